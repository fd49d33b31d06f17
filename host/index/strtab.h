/* SPDX-License-Identifier: MIT */
/*
 * strtab: interned strings with dense ids 0, 1, 2, ... (insertion order),
 * kept in one arena with an open-addressing hash of ids. Used for the
 * keyword index's terms, its partitions' sessions and authors, and the
 * partition keys. No removal: callers rebuild a table to drop entries.
 * Not synchronized: callers lock.
 */
#ifndef MEMD_INDEX_STRTAB_H
#define MEMD_INDEX_STRTAB_H

#include <stddef.h>
#include <stdint.h>

#define STRTAB_NONE UINT32_MAX

/* id + 1 (0 = empty) and the low bits of its string's hash, so probes
 * compare strings only when the hashes agree. */
typedef struct strtab_slot {
	uint32_t id1;
	uint32_t hash;
} strtab_slot;

typedef struct strtab {
	char *arena;        /* NUL-terminated strings back to back */
	size_t arena_len, arena_cap;
	uint32_t *offs;     /* id -> offset in arena */
	uint32_t n, offs_cap;
	strtab_slot *slots; /* slot_cap, a power of two */
	uint32_t slot_cap;
} strtab;

/* A table as {0} is empty and valid. Free its memory; accepts NULL. */
void strtab_clear(strtab *t);
/* The id of the len bytes s, or STRTAB_NONE. */
uint32_t strtab_find(const strtab *t, const char *s, size_t len);
/* The id of s, adding it if new. 0, or -1 on ENOMEM / when the arena
 * would pass 4 GiB (t unchanged). */
int strtab_intern(strtab *t, const char *s, size_t len, uint32_t *ret_id);
/* The NUL-terminated string of id (< t->n); valid until the next intern. */
const char *strtab_get(const strtab *t, uint32_t id);
/* Bytes of memory held. */
size_t strtab_bytes(const strtab *t);
/* The 64-bit hash strtab uses (FNV-1a with a final mix); deterministic
 * across runs and platforms. */
uint64_t strtab_hash(const char *s, size_t len);

#endif
