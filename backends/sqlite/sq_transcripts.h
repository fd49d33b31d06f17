/* SPDX-License-Identifier: MIT */
/*
 * sq_transcripts: transcript operations of the SQLite store (since 1.2):
 * what an append's memd_transcript_op does inside the append's
 * transaction (hide from a seq, or reverse an earlier operation), the
 * operation records, and the ops that read operations and state history.
 *
 * Hidden events move from the partial index events_by_seq to
 * events_hidden (sq_schema.c): hiding walks only the visible events from
 * the op's seq on, undoing only the hidden ones from the target's lowest
 * seq on, never the whole session. Each hidden event gets a HIDE record
 * in feed_hides; an unhidden one moves to a new feed position, so it is a
 * new EVENT record.
 */
#ifndef MEMD_SQ_TRANSCRIPTS_H
#define MEMD_SQ_TRANSCRIPTS_H

#include "sq_db.h"
#include "sq_sessions.h"

/* What an op did, for its record and the append's result. */
typedef struct sq_op_done {
	int64_t hidden_count;
	int64_t unhidden_count;
} sq_op_done;

/* The first half of an append's op, inside its write transaction on c,
 * after the replay and version checks and before the events: MEMD_ECONFLICT
 * if the session has an operation op->id; then hide (REWIND, REWRITE,
 * CLEAR) the visible events with seq >= hide_from_seq, or (UNDO) check
 * the target (MEMD_ENOTFOUND if absent; MEMD_ECONFLICT if undone, or if
 * head->version is not the one it left), unhide what it hid, hide what it
 * appended and mark it undone. head's message_count and summary_seq follow
 * (summary_seq: the newest visible summary). Rows examined count into
 * call (may be NULL). On failure the caller rolls back. */
int32_t sq_op_apply(sq_conn *c, const memd_call *call, const memd_scope *scope,
		    const memd_transcript_op *op, int64_t now_us, sq_session_head *head,
		    sq_op_done *ret, memd_error *err);

/* The second half: the operation's record (created_us = now_us, version
 * the append made, first_seq..last_seq of its events, 0 when none). */
int32_t sq_op_record(sq_conn *c, const memd_scope *scope, const memd_transcript_op *op,
		     int64_t now_us, int64_t version, int64_t first_seq, int64_t last_seq,
		     const sq_op_done *done, memd_error *err);

/* memd_store_ops members; see api/memd/store.h. inst is the sq_store. */
int32_t sq_operation_list(void *inst, const memd_call *call, const memd_scope *scope,
			  uint32_t limit, const memd_operation_sink *out, memd_error *err);
int32_t sq_operation_get(void *inst, const memd_call *call, const memd_scope *scope,
			 const char *id, const memd_operation_sink *out, memd_error *err);
int32_t sq_state_history(void *inst, const memd_call *call, const memd_scope *scope,
			 const memd_state_history_query *q, const memd_state_change_sink *out,
			 memd_error *err);

#endif
