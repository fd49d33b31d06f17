/* SPDX-License-Identifier: MIT */
/*
 * lane_json: the JSON shapes of lanes, inbox items and usage
 * (api/memd/memd.h, "lanes"), and validation of the usage a client sends.
 */
#ifndef MEMD_HOST_LANE_JSON_H
#define MEMD_HOST_LANE_JSON_H

#include <jansson.h>

#include <memd/plugin.h>

#include "json/json_out.h"

/* Micro-USD per USD: costs are kept as integers (memd_usage.cost_micro_usd). */
#define LJ_MICRO_PER_USD 1000000.0

/* {"input_tokens", "output_tokens", "cache_read_tokens",
 * "cache_write_tokens", "last_prompt_tokens", "cost_usd"} of usage sums
 * (every field); NULL on ENOMEM. */
json_t *lj_usage(int64_t input_tokens, int64_t output_tokens, int64_t cache_read_tokens,
		 int64_t cache_write_tokens, int64_t cost_micro_usd, int64_t last_prompt_tokens);
/* lj_usage written as JSON text into jo (json_out.h), as jansson dumps it
 * (usage that is all zeros without jansson). Returns jo's sticky error. */
int32_t lj_usage_write(json_out *jo, int64_t input_tokens, int64_t output_tokens,
		       int64_t cache_read_tokens, int64_t cache_write_tokens,
		       int64_t cost_micro_usd, int64_t last_prompt_tokens);
/* 1 when any usage member of s is nonzero. */
int lj_session_has_usage(const memd_session *s);

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
