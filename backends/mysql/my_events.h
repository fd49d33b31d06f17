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

/* The columns an append writes (with is_summary and operation), and
 * every event query selects them and the hidden mark, in the order
 * my_event_from_row reads them. */
#define MY_EVENT_COLS_WRITTEN \
	"position, app, user, session, seq, id, invocation_id, author, role, branch, " \
	"content, actions, metadata, timestamp_us, text, tokens, covers_seq"
#define MY_EVENT_COLS MY_EVENT_COLS_WRITTEN ", hidden_us, hidden_by, hidden_kind, operation"
/* The same qualified by a table alias e (for joins). */
#define MY_EVENT_COLS_E \
	"e.position, e.app, e.user, e.session, e.seq, e.id, e.invocation_id, e.author, " \
	"e.role, e.branch, e.content, e.actions, e.metadata, e.timestamp_us, e.text, " \
	"e.tokens, e.covers_seq, e.hidden_us, e.hidden_by, e.hidden_kind, e.operation"
#define MY_EVENT_N_COLS 21

/* Fill e from the MY_EVENT_COLS columns of s's current row starting at
 * column col0. Strings are borrowed from s until its next fetch. */
void my_event_from_row(const my_stmt *s, unsigned col0, memd_event *e);

/* Group commit (the queue is plugins/common/pu_group.h). Concurrent
 * appends queue; a thread that finds an idle connection takes up to
 * opt.group_commit queued appends to distinct sessions and writes them in
 * one transaction: their session rows locked in (app, user, session) order, one advance of the feed counter, their
 * events in as few inserts as fit, one commit. Each gets exactly what a
 * solo append returns (seqs, version, REPLAYED, its own refusal); when
 * the shared transaction fails for a reason that may be one member's
 * (bad data, a lock wait timeout, the leader's deadline) rather than the
 * connection's, every member is run again alone, on its own call, so only
 * the culprit fails. The group runs on the leader's call (its deadline,
 * cancellation and rows_read count). */

/* Create s->group, the queue of s->opt.group_commit appends per
 * transaction. MEMD_ENOMEM on failure. */
int32_t my_group_init(my_store *s, memd_error *err);
/* Log the group statistics (MEMD_LOG_DEBUG: "group commit: <appends>
 * appends written in <transactions> transactions (at most <n> in one)",
 * when any append was written) and free s->group. Accepts NULL, and a
 * store without a group. No append may be running. */
void my_group_free(my_store *s);
/* Wake the queued appends (a connection came back). */
void my_group_wake(my_store *s);

/* memd_store_ops members; see api/memd/store.h. inst is the my_store. */
int32_t my_append(void *inst, const memd_call *call, const memd_scope *scope,
		  const memd_append *a, memd_append_result *res, memd_error *err);
int32_t my_events_load(void *inst, const memd_call *call, const memd_scope *scope,
		       const memd_event_query *q, const memd_event_sink *out, memd_error *err);

#endif
