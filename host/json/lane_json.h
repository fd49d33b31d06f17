/* SPDX-License-Identifier: MIT */
/*
 * lane_json: the JSON shapes of lanes and inbox items (api/memd/memd.h,
 * "lanes"), and validation of the usage a client sends (usage JSON itself:
 * event_json.h's ej_usage, json_out.h's jo_usage).
 */
#ifndef MEMD_HOST_LANE_JSON_H
#define MEMD_HOST_LANE_JSON_H

#include <jansson.h>

#include <memd/plugin.h>

#include "json/json_out.h"

/* The lane JSON object (memd.h's "lane"); NULL on ENOMEM. */
json_t *lj_lane(const memd_lane *l);
/* lj_lane written as JSON text into jo (json_out.h): the same members in
 * the same order, values json_equal to lj_lane's, without a jansson tree
 * (the open, a gateway's every-message call, answers with it). Returns 0
 * or jo's sticky error (MEMD_ENOMEM; MEMD_EINVAL for a string that is not
 * valid UTF-8). */
int32_t lj_lane_write(json_out *jo, const memd_lane *l);
/* An inbox item: {"id", "mode" ("interrupt" | "queue"), "event",
 * "created"}; NULL on ENOMEM. */
json_t *lj_inbox_item(const memd_inbox_item *i);

/* Validate a client's usage object (v; "what" names it in messages) into
 * *ret (struct_size set): every member optional, token counts integers
 * >= 0, cost_usd a number >= 0 (kept as micro-USD, rounded to the
 * nearest), nothing else. MEMD_EINVAL naming the member. */
int32_t lj_usage_parse(json_t *v, const char *what, memd_usage *ret, memd_error *err);

#endif
