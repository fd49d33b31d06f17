/* SPDX-License-Identifier: MIT */
/*
 * sq_feed: the store-wide change feed (positions from one counter advanced
 * inside each write transaction, so they are strictly increasing, commit
 * in order with the single writer, and are never reused), DELETE records,
 * MEMORY records (memories.position) and MEMORY_DELETE records,
 * durable cursors and ping.
 */
#ifndef MEMD_SQ_FEED_H
#define MEMD_SQ_FEED_H

#include "sq_db.h"

/* Hand out n consecutive positions inside the write transaction on c;
 * *ret_first is the first of them. The counter row is read once per
 * transaction and advanced in c->txn; sq_feed_flush writes it back. */
int32_t sq_feed_alloc(sq_conn *c, uint32_t n, int64_t *ret_first, memd_error *err);
/* Write the positions handed out in this transaction to the counter row
 * (nothing to do if none were). sq_write_end calls it before COMMIT. */
int32_t sq_feed_flush(sq_conn *c, memd_error *err);
/* Add a record without an event (kind MEMD_FEED_DELETE_SESSION or
 * MEMD_FEED_FINALIZE with scope->session, or MEMD_FEED_DELETE_USER) at a
 * new position, inside the write transaction on c. */
int32_t sq_feed_tombstone(sq_conn *c, uint32_t kind, const memd_scope *scope, memd_error *err);
/* Add a MEMD_FEED_MEMORY_DELETE record for memory id of (app, user) at a
 * new position, inside the write transaction on c. */
int32_t sq_feed_memory_tombstone(sq_conn *c, const char *app, const char *user, const char *id,
				 memd_error *err);

/* memd_store_ops members; see api/memd/store.h. inst is the sq_store. */
int32_t sq_feed_read(void *inst, const memd_call *call, int64_t after, uint32_t limit,
		     const memd_feed_sink *out, memd_error *err);
int32_t sq_feed_head(void *inst, const memd_call *call, int64_t *ret_position, memd_error *err);
int32_t sq_cursor_get(void *inst, const memd_call *call, const char *name, int64_t *ret_position,
		      memd_error *err);
int32_t sq_cursor_set(void *inst, const memd_call *call, const char *name, int64_t position,
		      memd_error *err);
int32_t sq_ping(void *inst, const memd_call *call, memd_error *err);

#endif
