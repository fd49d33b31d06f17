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

/* One key write of a delta. Strings are owned by the list. */
typedef struct pg_state_write {
	int32_t scope;            /* PU_SCOPE_* */
	const memd_scope *where;  /* borrowed: the op's scope */
	uint32_t member;          /* order of the delta within a transaction */
	uint32_t index;           /* order of the key within its delta */
	char *key;
	char *value_json;         /* NULL = delete */
} pg_state_write;

typedef struct pg_state_list {
	pg_state_write *v;
	size_t n, cap;
} pg_state_list;

/* MEMD_EINVAL unless delta_json is NULL/"" or a valid delta (see
 * plugin_util.h). */
int32_t pg_state_check(const char *delta_json, memd_error *err);
/* Add the writes of delta_json for scope `where` (borrowed until the list
 * is freed) to l, tagged with member. Fails as pg_state_check does, or
 * MEMD_ENOMEM. */
int32_t pg_state_collect(const char *delta_json, const memd_scope *where, uint32_t member,
			 pg_state_list *l, memd_error *err);
/* Queue every write of l on c, sorted by (table, key, member, index). */
int32_t pg_state_send(pg_conn *c, pg_state_list *l, memd_error *err);
/* Free l's contents (l itself is the caller's). Accepts NULL. */
void pg_state_list_clear(pg_state_list *l);

/* memd_store_ops member; see api/memd/store.h. inst is the pg_store. */
int32_t pg_state_get(void *inst, const memd_call *call, const memd_scope *scope,
		     const memd_text_sink *out, memd_error *err);

#endif
