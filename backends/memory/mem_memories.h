/* SPDX-License-Identifier: MIT */
/*
 * mem_memories: long-term memories of the in-memory store (store.h 1.3):
 * each user's memory rows and their history, the store-wide expiry order,
 * the memory feed records and the sessions' extraction cursor
 * (memory_seq), under the store's one lock like the rest of the store.
 */
#ifndef MEMD_MEMORY_MEM_MEMORIES_H
#define MEMD_MEMORY_MEM_MEMORIES_H

#include "mem_store.h"

/* A stored memory row (the strings are owned). */
typedef struct mem_memory {
	char *app;
	char *user;
	char *id;
	char *text;
	char *kind;
	char *topics_json;     /* JSON array text, as given */
	char *entities_json;
	char *source_session;  /* NULL = none */
	char *source_json;     /* NULL = none */
	char **topics;         /* topics_json parsed, for the list filter */
	size_t n_topics;
	char **entities;
	size_t n_entities;
	int64_t created_us;
	int64_t updated_us;
	int64_t expires_us;    /* 0 = never; > 0: in mem_store.expiring */
	int64_t version;
	int64_t position;      /* of its MEMORY feed record */
	int64_t tokens;
} mem_memory;

/* Fill out (borrowing m's strings) as delivered to a sink. */
void mem_memory_fill(const mem_memory *m, memd_memory *out);

/* Commit step of user_delete (cannot fail; lock held): remove every
 * memory of u (out of the expiry order, their MEMORY feed records dead;
 * no tombstones: the DELETE_USER record covers them) and every history
 * entry. Returns the rows removed. */
uint64_t mem_memories_user_forget(mem_store *st, mem_user *u);
/* Free u's memories and history (u is being freed; no feed upkeep). */
void mem_memories_user_free(mem_user *u);
/* Free the expiry order (fini; the rows go with their users). */
void mem_memories_fini(mem_store *st);

/* memd_store_ops members; see api/memd/store.h. inst is the mem_store. */
int32_t mem_memory_commit(void *inst, const memd_call *call, const memd_scope *scope,
			  const memd_memory_commit *c, const memd_memory_sink *out,
			  memd_error *err);
int32_t mem_memory_get(void *inst, const memd_call *call, const memd_scope *scope,
		       const char *id, int64_t now_us, const memd_memory_sink *out,
		       memd_error *err);
int32_t mem_memory_list(void *inst, const memd_call *call, const memd_scope *scope,
			const memd_memory_query *q, const memd_memory_sink *out, memd_error *err);
int32_t mem_memory_history(void *inst, const memd_call *call, const memd_scope *scope,
			   const char *id, const memd_memory_change_sink *out, memd_error *err);
int32_t mem_memory_expire(void *inst, const memd_call *call, int64_t now_us, uint32_t limit,
			  uint32_t *ret_count, memd_error *err);
int32_t mem_session_list_pending(void *inst, const memd_call *call,
				 const memd_pending_query *q, const memd_session_sink *out,
				 memd_error *err);

#endif
