/* SPDX-License-Identifier: MIT */
/*
 * my_events: append (the atomic batch write, with row locks so appends
 * from many processes get gapless seqs and exact expected_version checks)
 * and events_load (index range scans whose cost follows the rows
 * returned) of the MariaDB store.
 */
#ifndef MEMD_MY_EVENTS_H
#define MEMD_MY_EVENTS_H

#include "my_db.h"

/* The columns every event query selects, in the order my_event_from_row
 * reads them. */
#define MY_EVENT_COLS \
	"position, app, user, session, seq, id, invocation_id, author, role, branch, " \
	"content, actions, metadata, timestamp_us, text, tokens, covers_seq"
#define MY_EVENT_N_COLS 17

/* Fill e from the MY_EVENT_COLS columns of s's current row starting at
 * column col0. Strings are borrowed from s until its next fetch. */
void my_event_from_row(const my_stmt *s, unsigned col0, memd_event *e);

/* memd_store_ops members; see api/memd/store.h. inst is the my_store. */
int32_t my_append(void *inst, const memd_call *call, const memd_scope *scope,
		  const memd_append *a, memd_append_result *res, memd_error *err);
int32_t my_events_load(void *inst, const memd_call *call, const memd_scope *scope,
		       const memd_event_query *q, const memd_event_sink *out, memd_error *err);

#endif
