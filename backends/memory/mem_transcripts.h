/* SPDX-License-Identifier: MIT */
/*
 * mem_transcripts: what the in-memory store keeps for transcripts
 * (store.h 1.2): the lists of visible events, an append's transcript
 * operation (hide, unhide, the operation record), state expectations,
 * the state history, and each user's sessions in activity order.
 *
 * Like the rest of the store: the lock is held by the caller, a
 * prepare/stage step changes nothing visible when it fails, a commit step
 * cannot fail.
 */
#ifndef MEMD_MEMORY_MEM_TRANSCRIPTS_H
#define MEMD_MEMORY_MEM_TRANSCRIPTS_H

#include "mem_store.h"

/* ---- event lists (ascending seq) -------------------------------------- */

/* The first index of l whose event's seq is >= seq. */
size_t mem_evlist_lower(const mem_evlist *l, int64_t seq);
/* Room for extra more events: 0, or -1 on ENOMEM (l unchanged). */
int mem_evlist_reserve(mem_evlist *l, size_t extra);
/* Commit step: add e, whose seq is above every seq in l (room reserved). */
void mem_evlist_push(mem_evlist *l, mem_event *e);
void mem_evlist_free(mem_evlist *l);

/* ---- activity order of a user's sessions ------------------------------ */

/* Room in u->by_activity for one more session: 0, or -1 on ENOMEM. */
int mem_activity_reserve(mem_user *u);
/* Commit steps: link s into its owner's activity order (room reserved),
 * unlink it, or change its updated_us and move it to its new place. */
void mem_activity_link(mem_session *s);
void mem_activity_unlink(const mem_session *s);
void mem_session_touch(mem_session *s, int64_t updated_us);
/* The first index of u->by_activity that is not below (updated, id); a
 * NULL id is below every id. */
size_t mem_activity_lower(const mem_user *u, int64_t updated, const char *id);

/* Free everything of s this file keeps (operations, history, the event
 * lists); the events themselves are memory.c's. */
void mem_session_transcripts_free(mem_session *s);

/* ---- state expectations and history ----------------------------------- */

/* Mark every op of o whose key is in expect_json (an op's state_expect_json,
 * may be NULL) and whose current value differs from the expected one
 * (null = absent) as skipped; *ret_not_restored is then the JSON array of
 * the expectation's keys that will not change (with their prefixes),
 * malloc'd. MEMD_EINVAL for a bad expectation (nothing marked). */
int32_t mem_state_expect(const mem_store *st, mem_session *s, mem_state_ops *o,
			 const char *expect_json, char **ret_not_restored, memd_error *err);

/* The changes a staged delta will make, each key's old and new value
 * copied, ascending by key; room for them is reserved in s->history. */
typedef struct mem_history_new {
	mem_state_change *v;
	size_t n;
} mem_history_new;

/* Stage o's changes (skipped ops left out) before o is committed. On
 * failure nothing is staged. */
int32_t mem_history_stage(const mem_store *st, mem_session *s, const mem_state_ops *o,
			  mem_history_new *ret, memd_error *err);
/* Commit step: append h's changes to s->history with the append's version,
 * the session's last seq after it, its time and operation; consumes h. */
void mem_history_commit(mem_session *s, mem_history_new *h, int64_t version, int64_t seq,
			int64_t at_us, const mem_op *op);
/* Free what a stage made (accepts an empty one). */
void mem_history_abort(mem_history_new *h);

/* ---- an append's transcript operation --------------------------------- */

/* An operation checked and allocated, not yet applied. */
typedef struct mem_op_new {
	mem_op *op;            /* NULL: a plain append */
	hmap_node *node;       /* for s->op_ids */
	mem_op *target;        /* UNDO: the operation it reverses */
	mem_event **unhide;    /* UNDO: the events target hid, ascending seq */
	size_t n_unhide;
	size_t keep_visible;   /* hiding kinds: how many visible events stay */
} mem_op_new;

/* in passed pu_check_append. Check it against s (its id unused; UNDO: the target exists, is not
 * undone and s is at its version) and reserve everything the operation
 * and an append of n_append events after it need (event lists, feed,
 * operation list). MEMD_ECONFLICT, MEMD_ENOTFOUND, MEMD_ENOMEM; nothing
 * changes on failure. */
int32_t mem_op_prepare(mem_store *st, mem_session *s, const memd_transcript_op *in,
		       size_t n_append, mem_op_new *ret, memd_error *err);
/* Commit step, before the append's events: hide (and for UNDO unhide)
 * events with their feed records; returns nothing, cannot fail. */
void mem_op_apply(mem_store *st, mem_session *s, mem_op_new *n, int64_t now_us);
/* Commit step, after the events and the version bump: the operation's
 * record (appended events first_seq..last_seq, 0 for none); consumes n. */
void mem_op_record(mem_session *s, mem_op_new *n, int64_t now_us, int64_t first_seq,
		   int64_t last_seq);
/* Free an operation that was prepared and not applied (accepts an empty
 * one). */
void mem_op_abort(mem_op_new *n);

/* ---- memd_store_ops members (see api/memd/store.h) -------------------- */

int32_t mem_operation_list(void *inst, const memd_call *call, const memd_scope *scope,
			   uint32_t limit, const memd_operation_sink *out, memd_error *err);
int32_t mem_operation_get(void *inst, const memd_call *call, const memd_scope *scope,
			  const char *id, const memd_operation_sink *out, memd_error *err);
int32_t mem_state_history(void *inst, const memd_call *call, const memd_scope *scope,
			  const memd_state_history_query *q, const memd_state_change_sink *out,
			  memd_error *err);

#endif
