/* SPDX-License-Identifier: MIT */
/*
 * my_state: scoped state of the MariaDB store: applying a delta inside a
 * write transaction, and state_get (the merged view, read in one
 * statement so it is one snapshot).
 */
#ifndef MEMD_MY_STATE_H
#define MEMD_MY_STATE_H

#include "my_db.h"

/* The longest state key (without its app:/user: prefix) the schema keeps;
 * the host refuses longer keys before they reach a store. */
#define MY_STATE_KEY_MAX 1024

/* Validate a delta (see pu_state_delta_foreach) and the length of its
 * keys without touching the database. */
int32_t my_state_check(const char *delta_json, memd_error *err);
/* How an append's delta is recorded (memd_state_change) and, for a
 * transcript operation, which keys it may change. */
typedef struct my_state_write {
	int64_t version;           /* the session's version the append makes */
	int64_t seq;               /* the session's last_seq after the append */
	int64_t at_us;             /* the append's now_us */
	const char *operation;     /* the append's operation id, or NULL */
	/* A JSON object {key: value or null} (checked): each of these keys
	 * changes only if its current value equals the one given (null =
	 * absent); NULL = no condition. */
	const char *expect_json;
	/* Output: the keys of expect_json left unchanged, as a JSON array
	 * (malloc'd; the caller frees it), NULL without expect_json. */
	char *not_restored;
} my_state_write;

/* Inside a transaction on c: apply delta_json to scope's state, reading
 * each key's value before (a locking read: shared keys are changed by
 * other sessions too) and recording the change in memd_state_history as
 * w says. A key whose expectation fails is neither changed nor recorded
 * (w->not_restored lists it). */
int32_t my_state_apply(my_conn *c, const memd_scope *scope, const char *delta_json,
		       my_state_write *w, memd_error *err);

/* memd_store_ops member; see api/memd/store.h. inst is the my_store. */
int32_t my_state_get(void *inst, const memd_call *call, const memd_scope *scope,
		     const memd_text_sink *out, memd_error *err);

#endif
