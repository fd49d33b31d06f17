/* SPDX-License-Identifier: MIT */
/*
 * my_memories: long-term memories of the MariaDB store (since ABI 1.3):
 * memory_commit, memory_get, memory_list, memory_history, memory_expire
 * and session_list_pending, plus the row helpers the feed and user_delete
 * use.
 *
 * A memory is a row of memd_memories keyed by (app, user, id); every
 * change appends a row to memd_memory_history (the memory after it; for a
 * delete or an expiry the memory as it was). A memory's feed position is
 * its row's `position`, taken from the feed counter like an event's
 * (my_feed.h): feed_read delivers the rows with a position up to the head
 * it read as MEMORY records, and memd_feed_deletes holds the MEMORY_DELETE
 * records (kind MEMD_FEED_MEMORY_DELETE, memory_id set).
 *
 * Locking. memory_commit takes, in this order: the cursor session's row
 * (the conditional UPDATE of memory_seq), the rows of the memories it
 * changes (SELECT ... FOR UPDATE; an ADD's INSERT locks its key), and the
 * feed counter last, as every feed writer does: two commits with the same
 * expected cursor run one after the other, and the second's UPDATE, which
 * reads the committed row, matches nothing (MEMD_ECONFLICT). user_delete
 * takes the session rows, then the memories, then the counter; an expiry
 * the memories, then the counter.
 *
 * Topic and entity filters. topics and entities are kept as written; beside
 * them topics_match and entities_match hold the same arrays re-encoded
 * canonically (jansson, compact, ASCII only), and a filter is
 * JSON_CONTAINS(topics_match, ?) with the wanted string encoded the same
 * way: MariaDB compares JSON strings by their encoded bytes, so equal
 * strings must be encoded alike ("\u00e9" and "é" would not match).
 */
#ifndef MEMD_MY_MEMORIES_H
#define MEMD_MY_MEMORIES_H

#include "my_db.h"

/* The columns of a memory row of alias m, in the order my_memory_from_row
 * reads them. */
#define MY_MEMORY_COLS_M                                                                    \
	"m.app, m.user, m.id, m.text, m.kind, m.topics, m.entities, m.source_session,"      \
	" m.source, m.created_us, m.updated_us, m.expires_us, m.version, m.position,"       \
	" m.tokens"
/* Fill out from the memory columns of s's current row starting at column
 * at (strings borrowed from s until its next fetch). */
void my_memory_from_row(const my_stmt *s, unsigned at, memd_memory *out);

/* A memory copied out of a row or a write, to deliver after a read or a
 * commit. */
typedef struct my_memory_copy {
	memd_memory m;             /* its strings point into buf */
	char *buf;                 /* owned */
} my_memory_copy;

/* Copy src and its strings into *dst (dst's old copy is freed first).
 * MEMD_ENOMEM leaves *dst empty. */
int32_t my_memory_copy_make(const memd_memory *src, my_memory_copy *dst, memd_error *err);
/* Free dst's strings and zero it. Accepts an empty copy. */
void my_memory_copy_clear(my_memory_copy *dst);

/* Inside user_delete's transaction on c: delete every memory and every
 * history row of scope's (app, user); *ret_rows is how many rows went. */
int32_t my_memories_user_delete(my_conn *c, const memd_scope *scope, uint64_t *ret_rows,
				memd_error *err);

/* memd_store_ops members (since 1.3); see api/memd/store.h. inst is the
 * my_store. memory_commit's sink may be NULL (nothing delivered). */
int32_t my_memory_commit(void *inst, const memd_call *call, const memd_scope *scope,
			 const memd_memory_commit *c, const memd_memory_sink *out,
			 memd_error *err);
int32_t my_memory_get(void *inst, const memd_call *call, const memd_scope *scope,
		      const char *id, int64_t now_us, const memd_memory_sink *out,
		      memd_error *err);
int32_t my_memory_list(void *inst, const memd_call *call, const memd_scope *scope,
		       const memd_memory_query *q, const memd_memory_sink *out,
		       memd_error *err);
int32_t my_memory_history(void *inst, const memd_call *call, const memd_scope *scope,
			  const char *id, const memd_memory_change_sink *out, memd_error *err);
int32_t my_memory_expire(void *inst, const memd_call *call, int64_t now_us, uint32_t limit,
			 uint32_t *ret_count, memd_error *err);
int32_t my_session_list_pending(void *inst, const memd_call *call,
				const memd_pending_query *q, const memd_session_sink *out,
				memd_error *err);

#endif
