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
/* The state history of one write (a session's creation or an append). */
typedef struct sq_state_record {
	int64_t version;          /* the session's version the write makes */
	int64_t seq;              /* its last_seq after the write */
	int64_t at_us;
	const char *operation;    /* the append's transcript operation; NULL */
	/* The op's state_expect_json (NULL = none): a key of the delta that
	 * it names is written only if its stored value equals the one given
	 * (null = absent). */
	const char *expect_json;
	/* Output: with expect_json, a malloc'd JSON array of the keys it
	 * named that were not written (the caller frees it); else NULL. */
	char *not_restored;
} sq_state_record;

/* Apply a checked delta to scope (session set) inside the write
 * transaction on c: a null value deletes the key. With rec, every key
 * written is recorded in state_history (old and new values; deleting an
 * absent key writes and records nothing) and rec's expectations hold. */
int32_t sq_state_apply(sq_conn *c, const memd_scope *scope, const char *delta_json,
		       sq_state_record *rec, memd_error *err);

/* memd_store_ops.state_get; inst is the sq_store. */
int32_t sq_state_get(void *inst, const memd_call *call, const memd_scope *scope,
		     const memd_text_sink *out, memd_error *err);

#endif
