/* SPDX-License-Identifier: MIT */
#include "strtab.h"

#include <stdlib.h>
#include <string.h>

#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME 0x100000001b3ULL
#define MIX1 0xff51afd7ed558ccdULL
#define MIX2 0xc4ceb9fe1a85ec53ULL
#define SLOTS_MIN 16
#define ARENA_MIN 256
#define OFFS_MIN 8
#define ARENA_LIMIT UINT32_MAX

uint64_t strtab_hash(const char *s, size_t len)
{
	uint64_t h = FNV_OFFSET;
	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)s[i];
		h *= FNV_PRIME;
	}
	h ^= h >> 33;
	h *= MIX1;
	h ^= h >> 33;
	h *= MIX2;
	h ^= h >> 33;
	return h;
}

void strtab_clear(strtab *t)
{
	if (!t)
		return;
	free(t->arena);
	free(t->offs);
	free(t->slots);
	memset(t, 0, sizeof(*t));
}

const char *strtab_get(const strtab *t, uint32_t id)
{
	return t->arena + t->offs[id];
}

static int same(const strtab *t, uint32_t id, const char *s, size_t len)
{
	const char *x = t->arena + t->offs[id];
	return memcmp(x, s, len) == 0 && x[len] == '\0';
}

uint32_t strtab_find(const strtab *t, const char *s, size_t len)
{
	uint32_t mask, i, h;

	if (!t->slot_cap)
		return STRTAB_NONE;
	mask = t->slot_cap - 1;
	h = (uint32_t)strtab_hash(s, len);
	for (i = h & mask;; i = (i + 1) & mask) {
		const strtab_slot *v = &t->slots[i];
		if (!v->id1)
			return STRTAB_NONE;
		if (v->hash == h && same(t, v->id1 - 1, s, len))
			return v->id1 - 1;
	}
}

static void place(strtab_slot *slots, uint32_t cap, uint32_t h, uint32_t id)
{
	uint32_t mask = cap - 1, i;
	for (i = h & mask; slots[i].id1; i = (i + 1) & mask)
		;
	slots[i].id1 = id + 1;
	slots[i].hash = h;
}

static int grow_slots(strtab *t)
{
	uint32_t cap = t->slot_cap ? t->slot_cap * 2 : SLOTS_MIN;
	strtab_slot *slots;

	if (cap < t->slot_cap)
		return -1;
	slots = calloc(cap, sizeof(*slots));
	if (!slots)
		return -1;
	/* Every id is in the old table with its hash: no rehashing. */
	for (uint32_t i = 0; i < t->slot_cap; i++)
		if (t->slots[i].id1)
			place(slots, cap, t->slots[i].hash, t->slots[i].id1 - 1);
	free(t->slots);
	t->slots = slots;
	t->slot_cap = cap;
	return 0;
}

int strtab_intern(strtab *t, const char *s, size_t len, uint32_t *ret_id)
{
	uint32_t id = strtab_find(t, s, len);

	if (id != STRTAB_NONE) {
		*ret_id = id;
		return 0;
	}
	if (t->n == STRTAB_NONE - 1 || t->arena_len + len + 1 > ARENA_LIMIT)
		return -1;
	if (t->arena_len + len + 1 > t->arena_cap) {
		size_t cap = t->arena_cap ? t->arena_cap : ARENA_MIN;
		char *a;
		while (cap < t->arena_len + len + 1)
			cap *= 2;
		a = realloc(t->arena, cap);
		if (!a)
			return -1;
		t->arena = a;
		t->arena_cap = cap;
	}
	if (t->n == t->offs_cap) {
		uint32_t cap = t->offs_cap ? t->offs_cap * 2 : OFFS_MIN;
		uint32_t *o = realloc(t->offs, (size_t)cap * sizeof(*o));
		if (!o)
			return -1;
		t->offs = o;
		t->offs_cap = cap;
	}
	/* Keep the load factor under 3/4. */
	if ((uint64_t)(t->n + 1) * 4 > (uint64_t)t->slot_cap * 3 && grow_slots(t) < 0)
		return -1;
	memcpy(t->arena + t->arena_len, s, len);
	t->arena[t->arena_len + len] = '\0';
	t->offs[t->n] = (uint32_t)t->arena_len;
	t->arena_len += len + 1;
	place(t->slots, t->slot_cap, (uint32_t)strtab_hash(s, len), t->n);
	*ret_id = t->n++;
	return 0;
}

size_t strtab_bytes(const strtab *t)
{
	return t->arena_cap + (size_t)t->offs_cap * sizeof(uint32_t) +
	       (size_t)t->slot_cap * sizeof(strtab_slot);
}
