/* SPDX-License-Identifier: MIT */
#include "fv_index.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "plugin_util.h"

#define FV_NONE UINT32_MAX
#define FV_ALIGN 64           /* cache line: rows start on one */
/* Arrays this large are aligned to, and asked to be backed by, huge pages:
 * the hardware prefetcher stops at page boundaries, so a scan streams
 * about a quarter faster over 2 MiB pages than over 4 KiB ones. */
#define FV_HUGE_PAGE (2u << 20)
#define FV_MIN_CAP 16         /* first capacity of a partition's arrays */
#define FV_MIN_TABLE 16       /* first size of a hash table (a power of 2) */
#define FV_BLOCK 256          /* vectors per int8 scoring block */
#define FV_CHECK_EVERY 64     /* blocks between deadline/cancel checks */
#define FV_MIN_CANDS 64       /* first capacity of the candidate list */

/* ---- hashing ---------------------------------------------------------- */

#define FNV_OFFSET 1469598103934665603ULL
#define FNV_PRIME 1099511628211ULL
#define MIX_1 0xbf58476d1ce4e5b9ULL
#define MIX_2 0x94d049bb133111ebULL
#define MIX_S1 30
#define MIX_S2 27
#define MIX_S3 31

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= FNV_PRIME;
	}
	return h;
}

/* splitmix64's finalizer: spreads FNV's bits over the low ones. */
static uint64_t hash_mix(uint64_t x)
{
	x ^= x >> MIX_S1;
	x *= MIX_1;
	x ^= x >> MIX_S2;
	x *= MIX_2;
	x ^= x >> MIX_S3;
	return x;
}

static uint64_t hash_pair(const fv_str *a, const fv_str *b)
{
	uint64_t h = hash_bytes(FNV_OFFSET, a->p, a->len);
	h = hash_bytes(h, "", 1); /* separator: ("ab","c") != ("a","bc") */
	return hash_mix(hash_bytes(h, b->p, b->len));
}

static uint64_t hash_str(const char *p, size_t len)
{
	return hash_mix(hash_bytes(FNV_OFFSET, p, len));
}

static uint64_t hash_key(uint32_t session_ix, const char *event_id, size_t len)
{
	uint64_t h = hash_bytes(FNV_OFFSET, &session_ix, sizeof(session_ix));
	return hash_mix(hash_bytes(h, event_id, len));
}

static char *dup_n(const char *p, size_t len)
{
	char *d = malloc(len + 1);

	if (d) {
		memcpy(d, p, len);
		d[len] = '\0';
	}
	return d;
}

/* Slot i of a linear-probing table of size cap (a power of 2) may hold an
 * entry whose home is h: after deleting the entry at hole, the entry at j
 * (home h) moves into the hole iff h is not cyclically in (hole, j]. */
static int probe_moves(size_t hole, size_t j, size_t h)
{
	if (hole <= j)
		return h <= hole || h > j;
	return h <= hole && h > j;
}

/* ---- interned strings (sessions, authors) ----------------------------- */

typedef struct fv_sentry {
	char *s;          /* NULL: free (refs is then the next free id) */
	uint32_t len;
	uint32_t refs;    /* vectors that use it */
	uint64_t hash;
} fv_sentry;

typedef struct fv_strtab {
	fv_sentry *e;
	uint32_t n, cap;  /* entries used (live or free), allocated */
	uint32_t free_head;
	uint32_t live;
	uint32_t *map;    /* entry ids, FV_NONE = empty */
	uint32_t map_cap;
} fv_strtab;

static void strtab_init(fv_strtab *t)
{
	memset(t, 0, sizeof(*t));
	t->free_head = FV_NONE;
}

static void strtab_clear(fv_strtab *t)
{
	for (uint32_t i = 0; i < t->n; i++)
		free(t->e[i].s);
	free(t->e);
	free(t->map);
	strtab_init(t);
}

static uint32_t strtab_find(const fv_strtab *t, const char *p, size_t len)
{
	uint64_t h;

	if (!t->map_cap)
		return FV_NONE;
	h = hash_str(p, len);
	for (size_t i = h & (t->map_cap - 1);; i = (i + 1) & (t->map_cap - 1)) {
		uint32_t id = t->map[i];
		if (id == FV_NONE)
			return FV_NONE;
		if (t->e[id].hash == h && t->e[id].len == len && memcmp(t->e[id].s, p, len) == 0)
			return id;
	}
}

static void strtab_place(fv_strtab *t, uint32_t id)
{
	size_t i = t->e[id].hash & (t->map_cap - 1);

	while (t->map[i] != FV_NONE)
		i = (i + 1) & (t->map_cap - 1);
	t->map[i] = id;
}

/* The id of (p, len), added with refs 0 if new. MEMD_ENOMEM. */
static int32_t strtab_intern(fv_strtab *t, const char *p, size_t len, uint32_t *ret_id)
{
	uint32_t id = strtab_find(t, p, len);
	char *copy;

	if (id != FV_NONE) {
		*ret_id = id;
		return 0;
	}
	if ((size_t)(t->live + 1) * 2 > t->map_cap) {
		uint32_t nc = t->map_cap ? t->map_cap * 2 : FV_MIN_TABLE;
		uint32_t *m = malloc((size_t)nc * sizeof(*m)), *old = t->map;
		if (!m)
			return MEMD_ENOMEM;
		memset(m, 0xff, (size_t)nc * sizeof(*m));
		t->map = m;
		t->map_cap = nc;
		for (uint32_t i = 0; i < t->n; i++)
			if (t->e[i].s)
				strtab_place(t, i);
		free(old);
	}
	if (t->free_head == FV_NONE && t->n == t->cap) {
		uint32_t nc = t->cap ? t->cap * 2 : FV_MIN_TABLE;
		fv_sentry *e = realloc(t->e, (size_t)nc * sizeof(*e));
		if (!e)
			return MEMD_ENOMEM;
		t->e = e;
		t->cap = nc;
	}
	copy = dup_n(p, len);
	if (!copy)
		return MEMD_ENOMEM;
	if (t->free_head != FV_NONE) {
		id = t->free_head;
		t->free_head = t->e[id].refs;
	} else {
		id = t->n++;
	}
	t->e[id] = (fv_sentry){ .s = copy, .len = (uint32_t)len, .refs = 0, .hash = hash_str(p, len) };
	strtab_place(t, id);
	t->live++;
	*ret_id = id;
	return 0;
}

static void strtab_drop(fv_strtab *t, uint32_t id)
{
	size_t mask = t->map_cap - 1, hole = t->e[id].hash & mask;

	while (t->map[hole] != id)
		hole = (hole + 1) & mask;
	for (size_t j = (hole + 1) & mask; t->map[j] != FV_NONE; j = (j + 1) & mask) {
		if (probe_moves(hole, j, t->e[t->map[j]].hash & mask)) {
			t->map[hole] = t->map[j];
			hole = j;
		}
	}
	t->map[hole] = FV_NONE;
	free(t->e[id].s);
	t->e[id].s = NULL;
	t->e[id].refs = t->free_head;
	t->free_head = id;
	t->live--;
}

static void strtab_drop_if_unused(fv_strtab *t, uint32_t id)
{
	if (id != FV_NONE && id < t->n && t->e[id].s && t->e[id].refs == 0)
		strtab_drop(t, id);
}

static void strtab_unref(fv_strtab *t, uint32_t id)
{
	if (id != FV_NONE && --t->e[id].refs == 0)
		strtab_drop(t, id);
}

static void strtab_ref(fv_strtab *t, uint32_t id)
{
	if (id != FV_NONE)
		t->e[id].refs++;
}

static const char *strtab_get(const fv_strtab *t, uint32_t id)
{
	return id == FV_NONE ? NULL : t->e[id].s;
}

/* ---- partitions ------------------------------------------------------- */

typedef struct fv_slot {
	char *event_id;
	uint32_t event_len;
	uint32_t session;      /* id in the partition's sessions */
	uint32_t author;       /* id in authors, or FV_NONE */
	uint32_t rec_bytes;    /* encoded size in the log */
	int64_t seq;
	int64_t timestamp_us;
	uint64_t hash;         /* hash_key(session, event_id) */
} fv_slot;

typedef struct fv_part {
	char *app, *user;
	size_t app_len, user_len;
	uint64_t hash;
	uint32_t n, cap;
	uint32_t pending;      /* puts counted by an ongoing reserve */
	int8_t *codes;         /* cap rows of i8_stride */
	float *vecs;           /* cap rows of f32_stride */
	fv_qmeta *qm;
	fv_slot *slots;
	uint32_t *map;         /* slot indexes by (session, event id), FV_NONE = empty */
	uint32_t map_cap;
	fv_strtab sessions;
	fv_strtab authors;
} fv_part;

struct fv_index {
	uint32_t dim;
	size_t i8_stride, f32_stride;
	fv_part **parts;       /* by (app, user), NULL = empty */
	size_t parts_cap;
	size_t n_parts;
	uint64_t live_bytes;
	uint64_t count;
};

static void part_free(fv_part *p)
{
	if (!p)
		return;
	for (uint32_t i = 0; i < p->n; i++)
		free(p->slots[i].event_id);
	free(p->app);
	free(p->user);
	free(p->codes);
	free(p->vecs);
	free(p->qm);
	free(p->slots);
	free(p->map);
	strtab_clear(&p->sessions);
	strtab_clear(&p->authors);
	free(p);
}

fv_index *fv_index_new(void)
{
	return calloc(1, sizeof(fv_index));
}

void fv_index_free(fv_index *ix)
{
	if (!ix)
		return;
	for (size_t i = 0; i < ix->parts_cap; i++)
		part_free(ix->parts[i]);
	free(ix->parts);
	free(ix);
}

uint32_t fv_index_dim(const fv_index *ix)
{
	return ix->dim;
}

void fv_index_set_dim(fv_index *ix, uint32_t dim)
{
	ix->dim = dim;
	ix->i8_stride = fv_i8_stride(dim);
	ix->f32_stride = fv_f32_stride(dim);
}

uint64_t fv_index_live_bytes(const fv_index *ix)
{
	return ix->live_bytes;
}

uint64_t fv_index_count(const fv_index *ix)
{
	return ix->count;
}

static fv_part *part_find(const fv_index *ix, const fv_str *app, const fv_str *user)
{
	uint64_t h;

	if (!ix->parts_cap)
		return NULL;
	h = hash_pair(app, user);
	for (size_t i = h & (ix->parts_cap - 1);; i = (i + 1) & (ix->parts_cap - 1)) {
		fv_part *p = ix->parts[i];
		if (!p)
			return NULL;
		if (p->hash == h && p->app_len == app->len && p->user_len == user->len &&
		    memcmp(p->app, app->p, app->len) == 0 && memcmp(p->user, user->p, user->len) == 0)
			return p;
	}
}

static void parts_place(fv_index *ix, fv_part *p)
{
	size_t i = p->hash & (ix->parts_cap - 1);

	while (ix->parts[i])
		i = (i + 1) & (ix->parts_cap - 1);
	ix->parts[i] = p;
}

static int32_t part_find_or_add(fv_index *ix, const fv_str *app, const fv_str *user,
				fv_part **ret)
{
	fv_part *p = part_find(ix, app, user);

	if (p) {
		*ret = p;
		return 0;
	}
	if ((ix->n_parts + 1) * 2 > ix->parts_cap) {
		size_t nc = ix->parts_cap ? ix->parts_cap * 2 : FV_MIN_TABLE;
		fv_part **t = calloc(nc, sizeof(*t)), **old = ix->parts;
		size_t oc = ix->parts_cap;
		if (!t)
			return MEMD_ENOMEM;
		ix->parts = t;
		ix->parts_cap = nc;
		for (size_t i = 0; i < oc; i++)
			if (old[i])
				parts_place(ix, old[i]);
		free(old);
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return MEMD_ENOMEM;
	strtab_init(&p->sessions);
	strtab_init(&p->authors);
	p->app = dup_n(app->p, app->len);
	p->user = dup_n(user->p, user->len);
	if (!p->app || !p->user) {
		part_free(p);
		return MEMD_ENOMEM;
	}
	p->app_len = app->len;
	p->user_len = user->len;
	p->hash = hash_pair(app, user);
	parts_place(ix, p);
	ix->n_parts++;
	*ret = p;
	return 0;
}

/* Take p out of the table and free it. */
static void part_remove(fv_index *ix, fv_part *p)
{
	size_t mask = ix->parts_cap - 1, hole = p->hash & mask;

	while (ix->parts[hole] != p)
		hole = (hole + 1) & mask;
	for (size_t j = (hole + 1) & mask; ix->parts[j]; j = (j + 1) & mask) {
		if (probe_moves(hole, j, ix->parts[j]->hash & mask)) {
			ix->parts[hole] = ix->parts[j];
			hole = j;
		}
	}
	ix->parts[hole] = NULL;
	ix->n_parts--;
	for (uint32_t i = 0; i < p->n; i++)
		ix->live_bytes -= p->slots[i].rec_bytes;
	ix->count -= p->n;
	part_free(p);
}

/* ---- a partition's (session, event id) table -------------------------- */

static uint32_t slot_find(const fv_part *p, uint32_t session, const char *event_id, size_t len,
			  uint64_t h)
{
	if (!p->map_cap)
		return FV_NONE;
	for (size_t i = h & (p->map_cap - 1);; i = (i + 1) & (p->map_cap - 1)) {
		uint32_t s = p->map[i];
		if (s == FV_NONE)
			return FV_NONE;
		if (p->slots[s].hash == h && p->slots[s].session == session &&
		    p->slots[s].event_len == len && memcmp(p->slots[s].event_id, event_id, len) == 0)
			return s;
	}
}

static void slot_place(fv_part *p, uint32_t s)
{
	size_t i = p->slots[s].hash & (p->map_cap - 1);

	while (p->map[i] != FV_NONE)
		i = (i + 1) & (p->map_cap - 1);
	p->map[i] = s;
}

/* Position in map of the entry pointing at slot s. */
static size_t slot_map_pos(const fv_part *p, uint32_t s)
{
	size_t i = p->slots[s].hash & (p->map_cap - 1);

	while (p->map[i] != s)
		i = (i + 1) & (p->map_cap - 1);
	return i;
}

static void slot_unplace(fv_part *p, uint32_t s)
{
	size_t mask = p->map_cap - 1, hole = slot_map_pos(p, s);

	for (size_t j = (hole + 1) & mask; p->map[j] != FV_NONE; j = (j + 1) & mask) {
		if (probe_moves(hole, j, p->slots[p->map[j]].hash & mask)) {
			p->map[hole] = p->map[j];
			hole = j;
		}
	}
	p->map[hole] = FV_NONE;
}

static void *alloc_aligned(size_t n)
{
	void *p = NULL;

	if (n >= FV_HUGE_PAGE) {
		if (posix_memalign(&p, FV_HUGE_PAGE, n) != 0)
			return NULL;
#ifdef MADV_HUGEPAGE
		(void)madvise(p, n, MADV_HUGEPAGE); /* a hint: fine if refused */
#endif
		return p;
	}
	return posix_memalign(&p, FV_ALIGN, n ? n : FV_ALIGN) == 0 ? p : NULL;
}

/* Room for need vectors in p's arrays and table. MEMD_ENOMEM. */
static int32_t part_reserve(fv_index *ix, fv_part *p, size_t need)
{
	if (need > UINT32_MAX / 2)
		return MEMD_ENOMEM;
	if (need > p->cap) {
		size_t nc = p->cap ? (size_t)p->cap * 2 : FV_MIN_CAP;
		int8_t *codes;
		float *vecs;
		fv_qmeta *qm;
		fv_slot *slots;

		while (nc < need)
			nc *= 2;
		if (nc > UINT32_MAX / 2 || nc > SIZE_MAX / (ix->f32_stride * sizeof(float)))
			return MEMD_ENOMEM;
		codes = alloc_aligned(nc * ix->i8_stride);
		vecs = alloc_aligned(nc * ix->f32_stride * sizeof(float));
		qm = malloc(nc * sizeof(*qm));
		slots = malloc(nc * sizeof(*slots));
		if (!codes || !vecs || !qm || !slots) {
			free(codes);
			free(vecs);
			free(qm);
			free(slots);
			return MEMD_ENOMEM;
		}
		if (p->n) {
			memcpy(codes, p->codes, (size_t)p->n * ix->i8_stride);
			memcpy(vecs, p->vecs, (size_t)p->n * ix->f32_stride * sizeof(float));
			memcpy(qm, p->qm, (size_t)p->n * sizeof(*qm));
			memcpy(slots, p->slots, (size_t)p->n * sizeof(*slots));
		}
		free(p->codes);
		free(p->vecs);
		free(p->qm);
		free(p->slots);
		p->codes = codes;
		p->vecs = vecs;
		p->qm = qm;
		p->slots = slots;
		p->cap = (uint32_t)nc;
	}
	if (need * 2 > p->map_cap) {
		size_t nc = p->map_cap ? p->map_cap : FV_MIN_TABLE;
		uint32_t *m;

		while (nc < need * 2)
			nc *= 2;
		m = malloc(nc * sizeof(*m));
		if (!m)
			return MEMD_ENOMEM;
		memset(m, 0xff, nc * sizeof(*m));
		free(p->map);
		p->map = m;
		p->map_cap = (uint32_t)nc;
		for (uint32_t s = 0; s < p->n; s++)
			slot_place(p, s);
	}
	return 0;
}

/* Remove slot s: the last slot moves into it. */
static void slot_remove(fv_index *ix, fv_part *p, uint32_t s)
{
	uint32_t last = p->n - 1;

	slot_unplace(p, s);
	strtab_unref(&p->sessions, p->slots[s].session);
	strtab_unref(&p->authors, p->slots[s].author);
	free(p->slots[s].event_id);
	ix->live_bytes -= p->slots[s].rec_bytes;
	ix->count--;
	if (s != last) {
		size_t pos = slot_map_pos(p, last);
		memcpy(p->codes + (size_t)s * ix->i8_stride, p->codes + (size_t)last * ix->i8_stride,
		       ix->i8_stride);
		memcpy(p->vecs + (size_t)s * ix->f32_stride, p->vecs + (size_t)last * ix->f32_stride,
		       ix->f32_stride * sizeof(float));
		p->qm[s] = p->qm[last];
		p->slots[s] = p->slots[last];
		p->map[pos] = s;
	}
	p->n--;
}

/* ---- writes ----------------------------------------------------------- */

int32_t fv_index_reserve(fv_index *ix, fv_put *puts, size_t n, memd_error *err)
{
	size_t i;

	for (i = 0; i < n; i++) {
		puts[i].part = NULL;
		puts[i].session_ix = FV_NONE;
		puts[i].author_ix = FV_NONE;
		puts[i].event_id = NULL;
	}
	for (i = 0; i < n; i++) {
		fv_put *p = &puts[i];
		if (part_find_or_add(ix, &p->rec.app, &p->rec.user, &p->part) < 0)
			goto nomem;
		p->part->pending++;
		if (strtab_intern(&p->part->sessions, p->rec.session.p, p->rec.session.len,
				  &p->session_ix) < 0)
			goto nomem;
		if (p->rec.has_author &&
		    strtab_intern(&p->part->authors, p->rec.author.p, p->rec.author.len,
				  &p->author_ix) < 0)
			goto nomem;
		p->event_id = dup_n(p->rec.event_id.p, p->rec.event_id.len);
		if (!p->event_id)
			goto nomem;
	}
	for (i = 0; i < n; i++) {
		fv_part *part = puts[i].part;
		if (part->pending) {
			size_t need = (size_t)part->n + part->pending;
			part->pending = 0;
			if (part_reserve(ix, part, need) < 0)
				goto nomem;
		}
	}
	return 0;
nomem:
	fv_index_release(ix, puts, n);
	return memd_error_set(err, MEMD_ENOMEM, 0, "filevec: out of memory for %zu vectors", n);
}

void fv_index_release(fv_index *ix, fv_put *puts, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		fv_put *p = &puts[i];
		free(p->event_id);
		p->event_id = NULL;
		if (!p->part)
			continue;
		p->part->pending = 0;
		strtab_drop_if_unused(&p->part->sessions, p->session_ix);
		strtab_drop_if_unused(&p->part->authors, p->author_ix);
	}
	for (size_t i = 0; i < n; i++) {
		fv_part *part;
		if (!puts[i].part)
			continue;
		/* An empty partition was made by this reservation. */
		part = part_find(ix, &puts[i].rec.app, &puts[i].rec.user);
		if (part && part->n == 0)
			part_remove(ix, part);
		puts[i].part = NULL;
	}
}

static void store_vector(fv_index *ix, fv_part *part, uint32_t s, const float *v)
{
	float *row = part->vecs + (size_t)s * ix->f32_stride;

	memcpy(row, v, (size_t)ix->dim * sizeof(float));
	for (size_t j = ix->dim; j < ix->f32_stride; j++)
		row[j] = 0.0f;
	fv_quantize(v, ix->dim, part->codes + (size_t)s * ix->i8_stride, &part->qm[s]);
}

void fv_index_commit(fv_index *ix, fv_put *puts, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		fv_put *p = &puts[i];
		fv_part *part = p->part;
		size_t len = p->rec.event_id.len;
		uint64_t h = hash_key(p->session_ix, p->event_id, len);
		uint32_t s = slot_find(part, p->session_ix, p->event_id, len, h);
		fv_slot *slot;

		if (s != FV_NONE) {
			slot = &part->slots[s];
			strtab_ref(&part->authors, p->author_ix);
			strtab_unref(&part->authors, slot->author);
			ix->live_bytes -= slot->rec_bytes;
			free(p->event_id);
		} else {
			s = part->n++;
			slot = &part->slots[s];
			slot->event_id = p->event_id;
			slot->event_len = (uint32_t)len;
			slot->session = p->session_ix;
			slot->hash = h;
			slot_place(part, s);
			strtab_ref(&part->sessions, p->session_ix);
			strtab_ref(&part->authors, p->author_ix);
			ix->count++;
		}
		p->event_id = NULL;
		slot->author = p->author_ix;
		slot->rec_bytes = p->rec_bytes;
		slot->seq = p->rec.seq;
		slot->timestamp_us = p->rec.timestamp_us;
		ix->live_bytes += p->rec_bytes;
		store_vector(ix, part, s, p->vector);
	}
}

uint64_t fv_index_matching(const fv_index *ix, const fv_str *app, const fv_str *user,
			   const fv_str *session)
{
	fv_part *p = part_find(ix, app, user);
	uint32_t sid;

	if (!p)
		return 0;
	if (!session)
		return p->n;
	sid = strtab_find(&p->sessions, session->p, session->len);
	return sid == FV_NONE ? 0 : p->sessions.e[sid].refs;
}

void fv_index_remove(fv_index *ix, const fv_str *app, const fv_str *user, const fv_str *session)
{
	fv_part *p = part_find(ix, app, user);
	uint32_t sid;

	if (!p)
		return;
	if (session) {
		sid = strtab_find(&p->sessions, session->p, session->len);
		if (sid == FV_NONE)
			return;
		for (uint32_t s = p->n; s-- > 0;)
			if (p->slots[s].session == sid)
				slot_remove(ix, p, s);
		if (p->n)
			return;
	}
	part_remove(ix, p);
}

/* The slot of (app, user, session, event id) in *ret_part, or FV_NONE. */
static uint32_t event_slot(const fv_index *ix, const fv_str *app, const fv_str *user,
			   const fv_str *session, const fv_str *event_id, fv_part **ret_part)
{
	fv_part *p = part_find(ix, app, user);
	uint32_t sid;

	*ret_part = p;
	if (!p)
		return FV_NONE;
	sid = strtab_find(&p->sessions, session->p, session->len);
	if (sid == FV_NONE)
		return FV_NONE;
	return slot_find(p, sid, event_id->p, event_id->len,
			 hash_key(sid, event_id->p, event_id->len));
}

int fv_index_has_event(const fv_index *ix, const fv_str *app, const fv_str *user,
		       const fv_str *session, const fv_str *event_id)
{
	fv_part *p;
	return event_slot(ix, app, user, session, event_id, &p) != FV_NONE;
}

void fv_index_remove_event(fv_index *ix, const fv_str *app, const fv_str *user,
			   const fv_str *session, const fv_str *event_id)
{
	fv_part *p;
	uint32_t s = event_slot(ix, app, user, session, event_id, &p);

	if (s == FV_NONE)
		return;
	slot_remove(ix, p, s);
	if (!p->n)
		part_remove(ix, p);
}

/* ---- queries ---------------------------------------------------------- */

typedef struct fv_cand {
	uint32_t slot;
	float score;
	double hi;
} fv_cand;

/* A min-heap of the k largest lower bounds seen so far. */
typedef struct fv_lo_heap {
	double *v;
	size_t n, k;
} fv_lo_heap;

static void heap_push(fv_lo_heap *h, double x)
{
	size_t i;

	if (h->n < h->k) {
		i = h->n++;
		while (i > 0 && h->v[(i - 1) / 2] > x) {
			h->v[i] = h->v[(i - 1) / 2];
			i = (i - 1) / 2;
		}
		h->v[i] = x;
		return;
	}
	if (x <= h->v[0])
		return;
	i = 0;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= h->n)
			break;
		if (c + 1 < h->n && h->v[c + 1] < h->v[c])
			c++;
		if (h->v[c] >= x)
			break;
		h->v[i] = h->v[c];
		i = c;
	}
	h->v[i] = x;
}

/* The k-th largest lower bound, or -inf while fewer than k are known. */
static double heap_floor(const fv_lo_heap *h)
{
	return h->n == h->k ? h->v[0] : -INFINITY;
}

typedef struct fv_match {
	uint32_t session;              /* FV_NONE: any */
	const uint32_t *authors;       /* n_authors ids; NULL: any */
	uint32_t n_authors;
	int64_t after_us, before_us;
} fv_match;

static int slot_matches(const fv_slot *s, const fv_match *m)
{
	if (m->session != FV_NONE && s->session != m->session)
		return 0;
	if (m->after_us && !(s->timestamp_us > m->after_us))
		return 0;
	if (m->before_us && !(s->timestamp_us < m->before_us))
		return 0;
	if (m->authors) {
		for (uint32_t i = 0; i < m->n_authors; i++)
			if (s->author == m->authors[i])
				return 1;
		return 0;
	}
	return 1;
}

/* Drop the candidates whose upper bound is below floor. */
static size_t cands_prune(fv_cand *c, size_t n, double floor)
{
	size_t w = 0;

	for (size_t i = 0; i < n; i++)
		if (c[i].hi >= floor)
			c[w++] = c[i];
	return w;
}

/* Best first: higher score, then session, then event id. */
static int cand_cmp(const void *a, const void *b, void *arg)
{
	const fv_cand *x = a, *y = b;
	const fv_part *p = arg;
	const fv_slot *sx = &p->slots[x->slot], *sy = &p->slots[y->slot];
	int c;

	if (x->score != y->score)
		return x->score > y->score ? -1 : 1;
	if (sx->session != sy->session) {
		c = strcmp(strtab_get(&p->sessions, sx->session), strtab_get(&p->sessions, sy->session));
		if (c)
			return c;
	}
	return strcmp(sx->event_id, sy->event_id);
}

typedef struct fv_scan {
	fv_cand *c;
	size_t n, cap;
	fv_lo_heap heap;
} fv_scan;

static int32_t scan_add(fv_scan *sc, uint32_t slot, double lo, double hi)
{
	heap_push(&sc->heap, lo);
	if (hi < heap_floor(&sc->heap))
		return 0;
	if (sc->n == sc->cap) {
		sc->n = cands_prune(sc->c, sc->n, heap_floor(&sc->heap));
		if (sc->n * 2 > sc->cap) {
			size_t nc = sc->cap * 2;
			fv_cand *c = realloc(sc->c, nc * sizeof(*c));
			if (!c)
				return MEMD_ENOMEM;
			sc->c = c;
			sc->cap = nc;
		}
	}
	sc->c[sc->n++] = (fv_cand){ .slot = slot, .hi = hi };
	return 0;
}

/* Deadline and cancel flag; without a host clock only the flag counts. */
static int32_t query_check(const memd_call *call, const memd_host *host, memd_error *err)
{
	return pu_call_check(call, host && host->monotonic_us ? host->monotonic_us(host) : 0, err);
}

static int32_t query_scan(const fv_index *ix, const fv_part *p, const fv_kernels *kern,
			  const memd_call *call, const memd_host *host, const fv_query *q,
			  const fv_match *m, int filtering, fv_scan *sc, memd_error *err)
{
	int32_t dots[FV_BLOCK];
	uint32_t idx[FV_BLOCK];
	size_t blocks = 0;

	for (uint32_t b = 0; b < p->n; b += FV_BLOCK) {
		uint32_t len = p->n - b < FV_BLOCK ? p->n - b : FV_BLOCK, cnt = 0;
		if (filtering) {
			for (uint32_t s = b; s < b + len; s++)
				if (slot_matches(&p->slots[s], m))
					idx[cnt++] = s;
			kern->dot_i8(q->codes, p->codes, ix->i8_stride, idx, cnt, dots);
		} else {
			for (uint32_t s = 0; s < len; s++)
				idx[s] = b + s;
			cnt = len;
			kern->dot_i8(q->codes, p->codes + (size_t)b * ix->i8_stride, ix->i8_stride, NULL,
				     cnt, dots);
		}
		for (uint32_t i = 0; i < cnt; i++) {
			double lo, hi;
			fv_bound(q, &p->qm[idx[i]], dots[i], &lo, &hi);
			if (scan_add(sc, idx[i], lo, hi) < 0)
				return memd_error_set(err, MEMD_ENOMEM, 0, "filevec: out of memory");
		}
		if (++blocks % FV_CHECK_EVERY == 0) {
			int32_t r = query_check(call, host, err);
			if (r < 0)
				return r;
		}
	}
	sc->n = cands_prune(sc->c, sc->n, heap_floor(&sc->heap));
	for (size_t i = 0; i < sc->n; i++)
		sc->c[i].score = kern->dot_f32(q->f32, p->vecs + (size_t)sc->c[i].slot * ix->f32_stride,
					       ix->f32_stride);
	qsort_r(sc->c, sc->n, sizeof(*sc->c), cand_cmp, (void *)p);
	return 0;
}

static int32_t query_deliver(const fv_part *p, const fv_scan *sc, uint32_t k,
			     const memd_vector_hit_sink *out)
{
	for (size_t i = 0; i < sc->n && i < k; i++) {
		const fv_slot *s = &p->slots[sc->c[i].slot];
		memd_vector_hit h = {
			.struct_size = sizeof(h),
			.score = sc->c[i].score,
			.app = p->app,
			.user = p->user,
			.session = strtab_get(&p->sessions, s->session),
			.event_id = s->event_id,
			.author = strtab_get(&p->authors, s->author),
			.seq = s->seq,
			.timestamp_us = s->timestamp_us,
		};
		int32_t r = out->hit(out->userdata, &h);
		if (r != 0)
			return r;
	}
	return 0;
}

int32_t fv_index_query(const fv_index *ix, const fv_kernels *kern, const memd_call *call,
		       const memd_host *host, const float *query, const fv_filter *f, uint32_t k,
		       const memd_vector_hit_sink *out, uint64_t *ret_examined, memd_error *err)
{
	const fv_part *p = ix->dim ? part_find(ix, &f->app, &f->user) : NULL;
	fv_match m = { .session = FV_NONE, .after_us = f->after_us, .before_us = f->before_us };
	uint32_t *author_ids = NULL;
	fv_query q = { 0 };
	fv_scan sc = { 0 };
	int filtering;
	int32_t r = 0;

	if (!p || p->n == 0 || k == 0)
		return 0;
	if (f->session) {
		m.session = strtab_find(&p->sessions, f->session, strlen(f->session));
		if (m.session == FV_NONE)
			return 0;
	}
	if (f->n_authors) {
		author_ids = malloc((size_t)f->n_authors * sizeof(*author_ids));
		if (!author_ids)
			return memd_error_set(err, MEMD_ENOMEM, 0, "filevec: out of memory");
		for (uint32_t i = 0; i < f->n_authors; i++) {
			uint32_t id = strtab_find(&p->authors, f->authors[i], strlen(f->authors[i]));
			if (id != FV_NONE)
				author_ids[m.n_authors++] = id;
		}
		m.authors = author_ids;
		if (m.n_authors == 0)
			goto out;
	}
	filtering = m.session != FV_NONE || m.authors || m.after_us || m.before_us;
	*ret_examined += p->n;

	q.codes = alloc_aligned(ix->i8_stride);
	q.f32 = alloc_aligned(ix->f32_stride * sizeof(float));
	sc.heap.k = k < p->n ? k : p->n;
	sc.heap.v = malloc(sc.heap.k * sizeof(*sc.heap.v));
	sc.cap = sc.heap.k * 2 > FV_MIN_CANDS ? sc.heap.k * 2 : FV_MIN_CANDS;
	sc.c = malloc(sc.cap * sizeof(*sc.c));
	if (!q.codes || !q.f32 || !sc.heap.v || !sc.c) {
		r = memd_error_set(err, MEMD_ENOMEM, 0, "filevec: out of memory");
		goto out;
	}
	fv_query_prepare(query, ix->dim, &q);
	r = query_scan(ix, p, kern, call, host, &q, &m, filtering, &sc, err);
	if (r == 0)
		r = query_deliver(p, &sc, k, out);
out:
	free(author_ids);
	free(q.codes);
	free(q.f32);
	free(sc.heap.v);
	free(sc.c);
	return r;
}

/* ---- iteration -------------------------------------------------------- */

int32_t fv_index_foreach(const fv_index *ix, fv_index_fn fn, void *userdata)
{
	for (size_t i = 0; i < ix->parts_cap; i++) {
		const fv_part *p = ix->parts[i];
		if (!p)
			continue;
		for (uint32_t s = 0; s < p->n; s++) {
			const fv_slot *sl = &p->slots[s];
			const fv_sentry *se = &p->sessions.e[sl->session];
			fv_rec r = {
				.type = FV_REC_UPSERT,
				.app = { p->app, p->app_len },
				.user = { p->user, p->user_len },
				.session = { se->s, se->len },
				.event_id = { sl->event_id, sl->event_len },
				.has_author = sl->author != FV_NONE,
				.seq = sl->seq,
				.timestamp_us = sl->timestamp_us,
				.dim = ix->dim,
			};
			int32_t rc;
			if (r.has_author) {
				r.author.p = p->authors.e[sl->author].s;
				r.author.len = p->authors.e[sl->author].len;
			}
			rc = fn(userdata, &r, p->vecs + (size_t)s * ix->f32_stride, sl->rec_bytes);
			if (rc != 0)
				return rc;
		}
	}
	return 0;
}
