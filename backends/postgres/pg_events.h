/* SPDX-License-Identifier: MIT */
/*
 * pg_events: append (the atomic batch write, with group commit) and
 * events_load (index range scans whose cost follows the rows returned) of
 * the PostgreSQL store.
 *
 * Group commit (the queue is plugins/common/pu_group.h): concurrent
 * appends queue up; a thread holding a pooled connection takes up to
 * group_commit queued appends to distinct sessions and runs them in one
 * transaction (two round trips and one commit for all of them). Each
 * append keeps its own all-or-nothing outcome: one that is refused (409,
 * 404) is left out of the write, and if the shared write fails for a
 * reason of the data, each member is run again alone so only the bad one
 * fails.
 */
#ifndef MEMD_PG_EVENTS_H
#define MEMD_PG_EVENTS_H

#include "pg_db.h"

/* The columns every event query selects, in the order pg_event_from_row
 * reads them. */
#define PG_EVENT_COLS \
	"position, app, \"user\", session, seq, id, invocation_id, author, role, branch," \
	" content::text, actions::text, metadata::text, timestamp_us, text, tokens, covers_seq," \
	" hidden_us, hidden_by, hidden_kind, operation"
#define PG_EVENT_N_COLS 21

/* Fill e from the PG_EVENT_COLS columns of row `row` of res, from column
 * col0. Strings are borrowed from res. */
void pg_event_from_row(const PGresult *res, int row, int col0, memd_event *e);

/* Create s->group, the group commit queue of s->group_commit appends per
 * transaction (pg_store_open calls this). MEMD_ENOMEM on failure. */
int32_t pg_group_init(pg_store *s, memd_error *err);
/* Free s->group (pg_store_close calls this). Accepts NULL, and a store
 * without a group. No append may be running. */
void pg_group_free(pg_store *s);
/* Wake appends waiting for a connection (pg_give calls this); a store
 * without a group yet is fine. */
void pg_group_wake(pg_store *s);

/* memd_store_ops members; see api/memd/store.h. inst is the pg_store. */
int32_t pg_append(void *inst, const memd_call *call, const memd_scope *scope,
		  const memd_append *a, memd_append_result *res, memd_error *err);
int32_t pg_events_load(void *inst, const memd_call *call, const memd_scope *scope,
		       const memd_event_query *q, const memd_event_sink *out, memd_error *err);

#endif
