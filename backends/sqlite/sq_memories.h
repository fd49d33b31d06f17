/* SPDX-License-Identifier: MIT */
/*
 * sq_memories: long-term memories of the SQLite store (ABI 1.3): one row
 * per (app, user, id) in memories, every change in memory_history, and
 * the memory extraction cursor of a session (sessions.memory_seq). A
 * commit runs in the writer's group-commit transaction; the feed's MEMORY
 * records are the rows themselves (memories.position), its MEMORY_DELETE
 * records rows of feed_deletes (sq_feed.c reads both).
 */
#ifndef MEMD_SQ_MEMORIES_H
#define MEMD_SQ_MEMORIES_H

#include "sq_db.h"

/* Every query that delivers a memory selects these columns, in the order
 * sq_memory_from_row reads them. */
#define SQ_MEMORY_COLS \
	"app, user, id, text, kind, topics, entities, source_session, source, created_us, " \
	"updated_us, expires_us, version, position, tokens"

/* Fill m from the SQ_MEMORY_COLS of st's current row, starting at column
 * first. Strings are borrowed from st until its next step or reset. */
void sq_memory_from_row(sqlite3_stmt *st, int first, memd_memory *m);

/* Delete every memory of scope's (app, user) and their history, inside
 * the caller's write transaction on c (user_delete: its DELETE_USER
 * record covers them, so no MEMORY_DELETE record is added). *ret_count
 * gets how many memories and history rows went. */
int32_t sq_memories_user_delete(sq_conn *c, const memd_scope *scope, int64_t *ret_count,
				memd_error *err);

/* memd_store_ops members; see api/memd/store.h for each contract. inst is
 * the sq_store. memory_commit's out may be NULL (nothing is delivered). */
int32_t sq_memory_commit(void *inst, const memd_call *call, const memd_scope *scope,
			 const memd_memory_commit *c, const memd_memory_sink *out,
			 memd_error *err);
int32_t sq_memory_get(void *inst, const memd_call *call, const memd_scope *scope,
		      const char *id, int64_t now_us, const memd_memory_sink *out,
		      memd_error *err);
int32_t sq_memory_list(void *inst, const memd_call *call, const memd_scope *scope,
		       const memd_memory_query *q, const memd_memory_sink *out, memd_error *err);
int32_t sq_memory_history(void *inst, const memd_call *call, const memd_scope *scope,
			  const char *id, const memd_memory_change_sink *out, memd_error *err);
int32_t sq_memory_expire(void *inst, const memd_call *call, int64_t now_us, uint32_t limit,
			 uint32_t *ret_count, memd_error *err);
int32_t sq_session_list_pending(void *inst, const memd_call *call, const memd_pending_query *q,
				const memd_session_sink *out, memd_error *err);

#endif
