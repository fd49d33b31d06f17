/* SPDX-License-Identifier: MIT */
/*
 * sq_state: scoped key/value state of the SQLite store. Plain keys belong
 * to the session, "app:" keys to the app, "user:" keys to (app, user);
 * parsing and the merged view come from plugin_util.
 */
#ifndef MEMD_SQ_STATE_H
#define MEMD_SQ_STATE_H

#include "sq_db.h"

/* MEMD_EINVAL unless delta_json is NULL/"" or a JSON object of storable
 * keys (no "temp:", no empty or bare-prefix keys). Touches nothing. */
int32_t sq_state_check(const char *delta_json, memd_error *err);
/* Apply a checked delta to scope (session set) inside the write
 * transaction on c: a null value deletes the key. */
int32_t sq_state_apply(sq_conn *c, const memd_scope *scope, const char *delta_json,
		       memd_error *err);

/* memd_store_ops.state_get; inst is the sq_store. */
int32_t sq_state_get(void *inst, const memd_call *call, const memd_scope *scope,
		     const memd_text_sink *out, memd_error *err);

#endif
