/* SPDX-License-Identifier: MIT */
/*
 * my_feed: the MariaDB store's change feed, named cursors and ping.
 *
 * Feed order across processes. Several memd processes append at once and
 * their transactions commit in any order, so an AUTO_INCREMENT position
 * is not enough: a transaction could take position 10, another 11 and
 * commit first, and a reader that read up to 11 would never see 10.
 * Positions are instead taken from the single row of memd_feed_counter
 * with `UPDATE ... SET last = LAST_INSERT_ID(last + n)`, as the last step
 * before the rows are inserted and the transaction commits. The update
 * holds the row's exclusive lock until commit, so the next transaction
 * can take positions only after this one committed: positions are
 * assigned in commit order. InnoDB makes a transaction visible before it
 * releases its locks (trx_t::commit_in_memory: deregister_rw, then
 * release_locks), so whenever a reader sees counter value H, every
 * position <= H is committed and visible. feed_read reads H together with
 * the DELETE, FINALIZE and MEMORY_DELETE records in one statement (one
 * snapshot), then the records of memd_feed_marks (HIDE, and EVENT for an
 * event an undo showed again: each names its event by seq and is
 * delivered with the event as stored now), the MEMORY records (a memory's
 * row carries the position of its latest add or update, my_memories.h)
 * and the visible events with position <= H: nothing it returns can later
 * be joined by a new record below it. The price is that appends (of any
 * session) commit one after another; the lock is held only for the event
 * insert and the commit, and InnoDB releases it before the log flush.
 * Group commit (my_events.h) puts many concurrent appends behind one such
 * step: one advance of the counter for the whole group, positions in the
 * group's lock order.
 */
#ifndef MEMD_MY_FEED_H
#define MEMD_MY_FEED_H

#include "my_db.h"

/* Inside a transaction on c: take n positions; *ret_first is the first
 * (the others follow it). Holds the counter's lock until commit. */
int32_t my_feed_alloc(my_conn *c, uint32_t n, int64_t *ret_first, memd_error *err);
/* Inside a transaction on c: add a record of kind MEMD_FEED_DELETE_SESSION,
 * MEMD_FEED_DELETE_USER (scope's session ignored) or MEMD_FEED_FINALIZE
 * for scope. They live in memd_feed_deletes, in the events' position
 * space; like my_feed_alloc, call it as the transaction's last write. */
int32_t my_feed_tombstone(my_conn *c, uint32_t kind, const memd_scope *scope, memd_error *err);
/* Inside a transaction on c that took position with my_feed_alloc: add
 * the MEMD_FEED_MEMORY_DELETE record of memory id of (app, user) there. */
int32_t my_feed_memory_delete(my_conn *c, int64_t position, const char *app, const char *user,
			      const char *id, memd_error *err);

/* memd_store_ops members; see api/memd/store.h. inst is the my_store. */
int32_t my_feed_read(void *inst, const memd_call *call, int64_t after, uint32_t limit,
		     const memd_feed_sink *out, memd_error *err);
int32_t my_feed_head(void *inst, const memd_call *call, int64_t *ret_position,
		     memd_error *err);
int32_t my_cursor_get(void *inst, const memd_call *call, const char *name, int64_t *ret_position,
		      memd_error *err);
int32_t my_cursor_set(void *inst, const memd_call *call, const char *name, int64_t position,
		      memd_error *err);
int32_t my_ping(void *inst, const memd_call *call, memd_error *err);

#endif
