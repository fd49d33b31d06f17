/* SPDX-License-Identifier: MIT */
#include "hmap.h"

#include <stdlib.h>
#include <string.h>

#define HMAP_MIN_BUCKETS 16
/* Grow when count would exceed nbuckets * LOAD_NUM / LOAD_DEN (0.75). */
#define HMAP_LOAD_NUM 3
#define HMAP_LOAD_DEN 4
#define FNV_OFFSET 14695981039346656037ull
#define FNV_PRIME 1099511628211ull

static uint64_t hmap_hash(const void *key, size_t klen)
{
	const unsigned char *p = key;
	uint64_t h = FNV_OFFSET;
	for (size_t i = 0; i < klen; i++) {
		h ^= p[i];
		h *= FNV_PRIME;
	}
	return h;
}

void hmap_init(hmap *m)
{
	m->buckets = NULL;
	m->nbuckets = 0;
	m->count = 0;
}

void hmap_clear(hmap *m, void (*free_value)(void *value))
{
	for (size_t b = 0; b < m->nbuckets; b++) {
		hmap_node *n = m->buckets[b];
		while (n) {
			hmap_node *next = n->next;
			if (free_value)
				free_value(n->value);
			free(n);
			n = next;
		}
	}
	free(m->buckets);
	hmap_init(m);
}

hmap_node *hmap_node_new(const void *key, size_t klen, void *value)
{
	hmap_node *n = malloc(sizeof(*n) + klen + 1);
	if (!n)
		return NULL;
	n->next = NULL;
	n->hash = hmap_hash(key, klen);
	n->value = value;
	n->klen = klen;
	if (klen)
		memcpy(n->key, key, klen);
	n->key[klen] = '\0';
	return n;
}

void hmap_node_free(hmap_node *n)
{
	free(n);
}

static int hmap_resize(hmap *m, size_t nbuckets)
{
	hmap_node **nb = calloc(nbuckets, sizeof(*nb));
	if (!nb)
		return -1;
	for (size_t b = 0; b < m->nbuckets; b++) {
		hmap_node *n = m->buckets[b];
		while (n) {
			hmap_node *next = n->next;
			size_t i = (size_t)(n->hash & (nbuckets - 1));
			n->next = nb[i];
			nb[i] = n;
			n = next;
		}
	}
	free(m->buckets);
	m->buckets = nb;
	m->nbuckets = nbuckets;
	return 0;
}

static int hmap_fits(size_t nbuckets, size_t count)
{
	return count <= nbuckets / HMAP_LOAD_DEN * HMAP_LOAD_NUM;
}

int hmap_reserve(hmap *m, size_t extra)
{
	size_t want = m->count + extra;
	size_t nb = m->nbuckets ? m->nbuckets : HMAP_MIN_BUCKETS;

	if (want < m->count)
		return -1;
	while (!hmap_fits(nb, want)) {
		if (nb > SIZE_MAX / 2 / sizeof(hmap_node *))
			return -1;
		nb *= 2;
	}
	if (nb == m->nbuckets)
		return 0;
	return hmap_resize(m, nb);
}

hmap_node *hmap_find(const hmap *m, const void *key, size_t klen)
{
	uint64_t h;

	if (!m->nbuckets)
		return NULL;
	h = hmap_hash(key, klen);
	for (hmap_node *n = m->buckets[h & (m->nbuckets - 1)]; n; n = n->next)
		if (n->hash == h && n->klen == klen && memcmp(n->key, key, klen) == 0)
			return n;
	return NULL;
}

void hmap_insert(hmap *m, hmap_node *n)
{
	size_t i;

	if (!hmap_fits(m->nbuckets, m->count + 1) && m->nbuckets &&
	    m->nbuckets <= SIZE_MAX / 2 / sizeof(hmap_node *))
		(void)hmap_resize(m, m->nbuckets * 2); /* on ENOMEM chains just get longer */
	i = (size_t)(n->hash & (m->nbuckets - 1));
	n->next = m->buckets[i];
	m->buckets[i] = n;
	m->count++;
}

int hmap_put(hmap *m, hmap_node *n)
{
	if (hmap_reserve(m, 1) < 0)
		return -1;
	hmap_insert(m, n);
	return 0;
}

hmap_node *hmap_remove(hmap *m, const void *key, size_t klen)
{
	uint64_t h;
	hmap_node **pp;

	if (!m->nbuckets)
		return NULL;
	h = hmap_hash(key, klen);
	for (pp = &m->buckets[h & (m->nbuckets - 1)]; *pp; pp = &(*pp)->next) {
		hmap_node *n = *pp;
		if (n->hash == h && n->klen == klen && memcmp(n->key, key, klen) == 0) {
			*pp = n->next;
			n->next = NULL;
			m->count--;
			return n;
		}
	}
	return NULL;
}

hmap_node *hmap_next(const hmap *m, hmap_iter *it)
{
	if (it->node && it->node->next) {
		it->node = it->node->next;
		return it->node;
	}
	if (it->node)
		it->bucket++;
	for (; it->bucket < m->nbuckets; it->bucket++) {
		if (m->buckets[it->bucket]) {
			it->node = m->buckets[it->bucket];
			return it->node;
		}
	}
	it->node = NULL;
	return NULL;
}
