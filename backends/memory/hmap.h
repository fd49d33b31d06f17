/* SPDX-License-Identifier: MIT */
/*
 * hmap: a small chained hash table from byte-string keys to void* values,
 * private to the memory store. Nodes are allocated by the caller
 * (hmap_node_new) so that a transaction can allocate everything first and
 * then insert without any step that can fail: hmap_reserve() guarantees
 * room for a number of inserts, hmap_insert() itself never fails.
 *
 * The table never owns values; hmap_clear() hands each one to a callback.
 * Not thread-safe: the store serializes access.
 */
#ifndef MEMD_MEMORY_HMAP_H
#define MEMD_MEMORY_HMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct hmap_node {
	struct hmap_node *next; /* bucket chain */
	uint64_t hash;
	void *value;            /* the caller's */
	size_t klen;
	char key[];             /* klen bytes, then a NUL (for C-string keys) */
} hmap_node;

typedef struct hmap {
	hmap_node **buckets;
	size_t nbuckets;        /* 0 or a power of two */
	size_t count;
} hmap;

/* An empty table (no allocation until the first reserve). */
void hmap_init(hmap *m);

/* Free every node and the buckets; free_value (may be NULL) gets each
 * value. The table is empty (and reusable) afterwards. */
void hmap_clear(hmap *m, void (*free_value)(void *value));

/* A detached node holding a copy of key (klen bytes) and value. NULL on
 * ENOMEM. Free a node that was never inserted (or was removed) with
 * hmap_node_free, which accepts NULL and does not touch the value. */
hmap_node *hmap_node_new(const void *key, size_t klen, void *value);
void hmap_node_free(hmap_node *n);

/* Make room so that `extra` further hmap_insert calls do not need to grow
 * the table. Returns 0, or -1 on ENOMEM (the table is unchanged). */
int hmap_reserve(hmap *m, size_t extra);

/* The node for key, or NULL. */
hmap_node *hmap_find(const hmap *m, const void *key, size_t klen);

/* Link n (its key must not be present). Never fails, but the table must
 * have buckets: call hmap_reserve first. Grows opportunistically when the
 * load is high and memory is available. */
void hmap_insert(hmap *m, hmap_node *n);

/* hmap_reserve(m, 1) then hmap_insert: 0, or -1 on ENOMEM (n not linked). */
int hmap_put(hmap *m, hmap_node *n);

/* Unlink and return the node for key (caller frees it), or NULL. */
hmap_node *hmap_remove(hmap *m, const void *key, size_t klen);

/* Iteration state; start from HMAP_ITER_INIT. */
typedef struct hmap_iter {
	size_t bucket;
	hmap_node *node;
} hmap_iter;
#define HMAP_ITER_INIT { 0, NULL }

/* The next node, or NULL at the end. The table must not change while an
 * iteration is under way. */
hmap_node *hmap_next(const hmap *m, hmap_iter *it);

#endif
