/* SPDX-License-Identifier: MIT */
/*
 * pg_state: scoped state of the PostgreSQL store. A delta is parsed into a
 * list of writes first (so a bad delta writes nothing), the writes are
 * queued in a fixed global order (table, key) so concurrent transactions
 * lock shared app:/user: rows in the same order and cannot deadlock, and
 * state_get returns the merged view.
 */
#ifndef MEMD_PG_STATE_H
#define MEMD_PG_STATE_H

#include "pg_db.h"

/* What a delta's writes record in state_history beside each key: the
 * session's version and last_seq after the write, its time and the
 * transcript operation (borrowed; NULL = none), and the state_expect_json
 * of that operation (borrowed; NULL = none), which makes the write of
 * each key it names conditional. */
typedef struct pg_state_hist {
	int64_t version;
	int64_t seq;
	int64_t at_us;
	const char *operation;
	const char *expect_json;
} pg_state_hist;

/* One key write of a delta. Strings are owned by the list. */
typedef struct pg_state_write {
	int32_t scope;            /* PU_SCOPE_* */
	const memd_scope *where;  /* borrowed: the op's scope */
	uint32_t member;          /* order of the delta within a transaction */
	uint32_t index;           /* order of the key within its delta */
	char *key;
	char *value_json;         /* NULL = delete */
	pg_state_hist hist;       /* expect_json unused here */
	int has_expect;           /* written only if the value is expect_json */
	char *expect_json;        /* NULL = absent */
	size_t res_at;            /* its statement's index in the round */
} pg_state_write;

typedef struct pg_state_list {
	pg_state_write *v;
	size_t n, cap;
} pg_state_list;

/* MEMD_EINVAL unless delta_json is NULL/"" or a valid delta (see
 * plugin_util.h). */
int32_t pg_state_check(const char *delta_json, memd_error *err);
/* Add the writes of delta_json for scope `where` (borrowed until the list
 * is freed) to l, tagged with member, each to be recorded in the state
 * history as h says (h and h->operation borrowed until the list is
 * freed), conditional when h->expect_json names its key. Fails as
 * pg_state_check does (also for a bad expect_json), or MEMD_ENOMEM. */
int32_t pg_state_collect(const char *delta_json, const memd_scope *where, uint32_t member,
			 const pg_state_hist *h, pg_state_list *l, memd_error *err);
/* Queue every write of l on c, sorted by (table, key, member, index):
 * each changes its key (a shared key's row locked first) and records the
 * change in state_history, unless it is conditional and the key's value
 * is not the expected one. */
int32_t pg_state_send(pg_conn *c, pg_state_list *l, memd_error *err);
/* After the round of pg_state_send ran: the conditional writes of member
 * that were skipped, as a JSON array of their keys (with prefixes) in
 * *ret_json (malloc'd; NULL when the member had no conditional write).
 * MEMD_ENOMEM. */
int32_t pg_state_skipped(const pg_conn *c, const pg_state_list *l, uint32_t member,
			 char **ret_json, memd_error *err);
/* The key with its prefix ("app:", "user:" or none) for scope. */
const char *pg_state_prefix(int32_t scope);
/* Free l's contents (l itself is the caller's). Accepts NULL. */
void pg_state_list_clear(pg_state_list *l);

/* memd_store_ops member; see api/memd/store.h. inst is the pg_store. */
int32_t pg_state_get(void *inst, const memd_call *call, const memd_scope *scope,
		     const memd_text_sink *out, memd_error *err);

#endif
