/* SPDX-License-Identifier: MIT */
/*
 * sq_events: append (the atomic batch write) and events_load (index range
 * scans whose cost follows the rows returned) of the SQLite store.
 */
#ifndef MEMD_SQ_EVENTS_H
#define MEMD_SQ_EVENTS_H

#include "sq_db.h"

/* The columns every event query selects, in the order sq_event_from_row
 * reads them. */
#define SQ_EVENT_COLS \
	"position, app, user, session, seq, id, invocation_id, author, role, branch, " \
	"content, actions, metadata, timestamp_us, text, tokens, covers_seq, hidden_us, " \
	"hidden_by, hidden_kind, operation"
#define SQ_EVENT_N_COLS 21

/* Fill e from the SQ_EVENT_COLS columns of st's current row starting at
 * column col0. Strings are borrowed from st until its next step/reset. */
void sq_event_from_row(sqlite3_stmt *st, int col0, memd_event *e);

/* memd_store_ops members; see api/memd/store.h. inst is the sq_store. */
int32_t sq_append(void *inst, const memd_call *call, const memd_scope *scope,
		  const memd_append *a, memd_append_result *res, memd_error *err);
int32_t sq_events_load(void *inst, const memd_call *call, const memd_scope *scope,
		       const memd_event_query *q, const memd_event_sink *out, memd_error *err);

#endif
