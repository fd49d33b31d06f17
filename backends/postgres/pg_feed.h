/* SPDX-License-Identifier: MIT */
/*
 * pg_feed: the store-wide change feed of the PostgreSQL store (positions
 * from the feed_counter row, see pg_events.c for why they commit in
 * order) with its events, DELETE, HIDE, MEMORY and MEMORY_DELETE records,
 * durable cursors and ping.
 */
#ifndef MEMD_PG_FEED_H
#define MEMD_PG_FEED_H

#include "pg_db.h"

/* memd_store_ops members; see api/memd/store.h. inst is the pg_store. */
int32_t pg_feed_read(void *inst, const memd_call *call, int64_t after, uint32_t limit,
		     const memd_feed_sink *out, memd_error *err);
int32_t pg_feed_head(void *inst, const memd_call *call, int64_t *ret_position, memd_error *err);
int32_t pg_cursor_get(void *inst, const memd_call *call, const char *name, int64_t *ret_position,
		      memd_error *err);
int32_t pg_cursor_set(void *inst, const memd_call *call, const char *name, int64_t position,
		      memd_error *err);
int32_t pg_ping(void *inst, const memd_call *call, memd_error *err);

#endif
