/* SPDX-License-Identifier: MIT */
/*
 * my_transcripts: transcript operations of the MariaDB store (rewind,
 * rewrite, clear, undo as hidden marks on events, inside an append's
 * transaction), the operations' records, and the reads of operations and
 * state history.
 *
 * An append with an operation runs, after the session's row lock and the
 * version and replay checks (my_events.c): my_tx_check (the operation id
 * is new; an undo's target exists, is not undone and made the session's
 * version), my_tx_apply (hide and unhide, before the events), then its
 * state and session row, then, once the feed positions are taken (the
 * counter's lock last, see my_feed.h), my_tx_marks (the HIDE records and
 * the EVENT records of the events an undo showed again, positions before
 * the append's events) and my_tx_record.
 */
#ifndef MEMD_MY_TRANSCRIPTS_H
#define MEMD_MY_TRANSCRIPTS_H

#include "my_db.h"

/* What an operation did inside its transaction. */
typedef struct my_tx {
	const memd_transcript_op *op;
	int64_t stamp;             /* hidden_us of what it hides (> 0) */
	/* an undo's target, as recorded */
	int64_t target_stamp;      /* hidden_us of what the target hid */
	int64_t target_first_seq, target_last_seq;
	/* counts */
	int64_t hidden;            /* events it hid */
	int64_t unhidden;          /* events it showed again */
	int64_t messages_added;    /* change of the visible non-summaries */
	int64_t shown_from_seq;    /* the lowest seq it showed again (0 = none) */
	int64_t hidden_from_seq;   /* the lowest seq it may have hidden */
} my_tx;

/* Inside the append's transaction, with scope's session row locked at
 * version: refuse the operation (MEMD_ECONFLICT: its id exists, or an
 * undo's target was undone or is not the session's last change;
 * MEMD_ENOTFOUND: an undo's target does not exist) or fill t for it. */
int32_t my_tx_check(my_conn *c, const memd_scope *scope, const memd_transcript_op *op,
		    int64_t version, int64_t now_us, my_tx *t, memd_error *err);
/* Hide and unhide (t from my_tx_check) and count; then *summary_seq is
 * the newest visible summary (0 = none). */
int32_t my_tx_apply(my_conn *c, const memd_scope *scope, my_tx *t, int64_t *summary_seq,
		    memd_error *err);
/* Feed records of t at positions first, first + 1, ...: its HIDE
 * records, then the EVENT records of what it showed again
 * (t->hidden + t->unhidden positions). */
int32_t my_tx_marks(my_conn *c, const memd_scope *scope, const my_tx *t, int64_t first,
		    memd_error *err);
/* Record the operation (version: the session's version after it; the
 * seqs of the events it appended, 0 = none) and mark an undo's target. */
int32_t my_tx_record(my_conn *c, const memd_scope *scope, const my_tx *t, int64_t version,
		     int64_t now_us, int64_t first_seq, int64_t last_seq, memd_error *err);

/* memd_store_ops members; see api/memd/store.h. inst is the my_store. */
int32_t my_operation_list(void *inst, const memd_call *call, const memd_scope *scope,
			  uint32_t limit, const memd_operation_sink *out, memd_error *err);
int32_t my_operation_get(void *inst, const memd_call *call, const memd_scope *scope,
			 const char *id, const memd_operation_sink *out, memd_error *err);
int32_t my_state_history(void *inst, const memd_call *call, const memd_scope *scope,
			 const memd_state_history_query *q, const memd_state_change_sink *out,
			 memd_error *err);

#endif
