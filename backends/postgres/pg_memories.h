/* SPDX-License-Identifier: MIT */
/*
 * pg_memories: long-term memories of the PostgreSQL store (since ABI 1.3):
 * memory_commit (every write, its history and feed records and the
 * extraction cursor of one session in one transaction), get, list,
 * history and expire. session_list_pending is in pg_sessions.c, the
 * MEMORY and MEMORY_DELETE records of the feed in pg_feed.c.
 */
#ifndef MEMD_PG_MEMORIES_H
#define MEMD_PG_MEMORIES_H

#include "pg_db.h"

/* The columns every query that delivers a memory selects, in the order
 * pg_memory_from_row reads them. */
#define PG_MEMORY_COLS \
	"app, \"user\", id, text, kind, topics, entities, source_session, source, created_us," \
	" updated_us, expires_us, version, position, tokens"
#define PG_MEMORY_N_COLS 15

/* Fill m from the PG_MEMORY_COLS columns of row `row` of res, from column
 * col0. Strings are borrowed from res. */
void pg_memory_from_row(const PGresult *res, int row, int col0, memd_memory *m);

/* memd_store_ops members; see api/memd/store.h for each contract. inst is
 * the pg_store. */
int32_t pg_memory_commit(void *inst, const memd_call *call, const memd_scope *scope,
			 const memd_memory_commit *c, const memd_memory_sink *out,
			 memd_error *err);
int32_t pg_memory_get(void *inst, const memd_call *call, const memd_scope *scope,
		      const char *id, int64_t now_us, const memd_memory_sink *out,
		      memd_error *err);
int32_t pg_memory_list(void *inst, const memd_call *call, const memd_scope *scope,
		       const memd_memory_query *q, const memd_memory_sink *out, memd_error *err);
int32_t pg_memory_history(void *inst, const memd_call *call, const memd_scope *scope,
			  const char *id, const memd_memory_change_sink *out, memd_error *err);
int32_t pg_memory_expire(void *inst, const memd_call *call, int64_t now_us, uint32_t limit,
			 uint32_t *ret_count, memd_error *err);

#endif
