/* SPDX-License-Identifier: MIT */
#include "keyword.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <memd/plugin.h>

#include "strtab.h"
#include "text.h"

#define KW_TAB_MIN 8
#define KW_HEAP_MIN 16        /* first heap capacity of a postings list */
#define KW_DOCS_MIN 16
#define KW_TERMS_MIN 32
#define KW_VARINT_MAX 10      /* bytes of a LEB128 uint64 */
#define KW_FIELDS 3           /* body, author, tags (KW_FIELD_* bit i = field i) */
#define KW_POSTING_MAX ((2 + KW_FIELDS) * KW_VARINT_MAX)
#define KW_EXT_SHIFT 2        /* tf_body's shift in a posting's extension */
#define KW_EXT_AUTHOR 0x1u    /* the extension's flags of the other fields */
#define KW_EXT_TAGS 0x2u
#define KW_KEY_SEP '\x01'     /* ids never contain control characters */
#define KW_HASH_MUL 0x9E3779B97F4A7C15ULL
#define KW_HASH_MUL2 0xC2B2AE3D27D4EB4FULL
#define KW_HASH_SHIFT 32
/* How texts and queries are analyzed (text.h). */
#define KW_TEXT_FLAGS (TEXT_STEM | TEXT_STOP | TEXT_KEEP_SELF)

/* ---- documents and postings lists ------------------------------------------ */

typedef struct kw_doc {
	int64_t timestamp_us;
	int64_t seq;
	uint32_t session;  /* id in the partition's sessions */
	uint32_t author;   /* id in the partition's authors */
	uint32_t len;      /* terms in the body */
	uint32_t flags;    /* KW_DOC_*; a memory's seq is its expires_us */
} kw_doc;

/* The seq a document is found by: a memory's is 0 (events' are >= 1). */
static int64_t doc_key(const kw_doc *d)
{
	return (d->flags & KW_DOC_MEMORY) ? 0 : d->seq;
}

/* A postings list longer than KW_INLINE bytes lives on the heap, with
 * its document count and last document in a header. */
typedef struct kw_heap {
	uint32_t df;       /* documents in the list */
	uint32_t last;     /* the last document number added */
	uint32_t cap;      /* bytes of data */
	uint32_t reserved;
	uint8_t data[];
} kw_heap;

/* One dictionary slot (16 bytes). Up to KW_INLINE bytes of postings sit
 * in the slot itself; their df and last are decoded when needed. */
typedef struct kw_plist {
	uint32_t term;     /* global term id + 1; 0 = empty slot */
	uint32_t len;      /* encoded bytes */
	union {
		kw_heap *heap; /* len > KW_INLINE */
		uint8_t inl[KW_INLINE];
	} u;
} kw_plist;

typedef struct kw_part {
	pthread_rwlock_t lock;
	kw_doc *docs;
	uint32_t n_docs, cap_docs;
	uint64_t sum_len;
	kw_plist *tab;     /* open addressing by term; tab_cap a power of two */
	uint32_t tab_cap, n_terms;
	strtab sessions, authors;
	uint64_t n_postings, posting_bytes, heap_bytes;
	/* Documents by (session, seq): open addressing of document + 1
	 * (0 = empty), lk_cap a power of two or 0. */
	uint32_t *lk;
	uint32_t lk_cap;
} kw_part;

struct kw_index {
	double k1, b;
	pthread_rwlock_t terms_lock;
	strtab terms;
	pthread_rwlock_t parts_lock;
	strtab part_keys;  /* "app\1user" -> id */
	kw_part **parts;   /* by key id; NULL = none (deleted) */
	uint32_t parts_cap;
};

static const uint8_t *plist_data(const kw_plist *p)
{
	return p->len <= KW_INLINE ? p->u.inl : p->u.heap->data;
}

static void plist_free(kw_plist *p)
{
	if (p->len > KW_INLINE)
		free(p->u.heap);
	p->len = 0;
}

static size_t varint_put(uint8_t *out, uint64_t v)
{
	size_t n = 0;
	while (v >= 0x80) {
		out[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	out[n++] = (uint8_t)v;
	return n;
}

static uint64_t varint_get(const uint8_t *p, size_t *pos)
{
	uint64_t v = 0;
	unsigned shift = 0;
	uint8_t byte;
	do {
		byte = p[(*pos)++];
		v |= (uint64_t)(byte & 0x7F) << shift;
		shift += 7;
	} while (byte & 0x80);
	return v;
}

/* One posting (keyword.h, snapshots): gap to the previous document
 * (first: doc + 1) minus one, shifted left with a flag "not once in the
 * body only"; when flagged, tf_body << KW_EXT_SHIFT with the flags of
 * the other fields present, then their tf - 1. */
static size_t posting_encode(uint8_t *out, int first, uint32_t last, uint32_t doc,
			     const uint32_t tf[KW_FIELDS])
{
	uint64_t gap = first ? (uint64_t)doc + 1 : (uint64_t)doc - last;
	int ext = tf[0] != 1 || tf[1] || tf[2];
	size_t n = varint_put(out, ((gap - 1) << 1) | (uint64_t)ext);
	if (!ext)
		return n;
	n += varint_put(out + n, ((uint64_t)tf[0] << KW_EXT_SHIFT) | (tf[1] ? KW_EXT_AUTHOR : 0) |
					 (tf[2] ? KW_EXT_TAGS : 0));
	if (tf[1])
		n += varint_put(out + n, tf[1] - 1);
	if (tf[2])
		n += varint_put(out + n, tf[2] - 1);
	return n;
}

typedef struct plist_iter {
	const uint8_t *p;
	size_t pos, len;
	uint32_t doc;
	int started;
} plist_iter;

static void iter_init(plist_iter *it, const kw_plist *pl)
{
	it->p = plist_data(pl);
	it->pos = 0;
	it->len = pl->len;
	it->doc = 0;
	it->started = 0;
}

static int iter_next(plist_iter *it, uint32_t *ret_doc, uint32_t ret_tf[KW_FIELDS])
{
	uint64_t code;
	if (it->pos >= it->len)
		return 0;
	code = varint_get(it->p, &it->pos);
	it->doc = it->started ? it->doc + (uint32_t)(code >> 1) + 1 : (uint32_t)(code >> 1);
	it->started = 1;
	*ret_doc = it->doc;
	ret_tf[0] = 1;
	ret_tf[1] = ret_tf[2] = 0;
	if (code & 1) {
		uint64_t ext = varint_get(it->p, &it->pos);
		ret_tf[0] = (uint32_t)(ext >> KW_EXT_SHIFT);
		if (ext & KW_EXT_AUTHOR)
			ret_tf[1] = (uint32_t)varint_get(it->p, &it->pos) + 1;
		if (ext & KW_EXT_TAGS)
			ret_tf[2] = (uint32_t)varint_get(it->p, &it->pos) + 1;
	}
	return 1;
}

/* df and last document of a list. */
static void plist_stats(const kw_plist *p, uint32_t *ret_df, uint32_t *ret_last)
{
	plist_iter it;
	uint32_t doc = 0, tf[KW_FIELDS], n = 0;

	if (p->len > KW_INLINE) {
		*ret_df = p->u.heap->df;
		*ret_last = p->u.heap->last;
		return;
	}
	iter_init(&it, p);
	while (iter_next(&it, &doc, tf))
		n++;
	*ret_df = n;
	*ret_last = doc;
}

static size_t heap_size(uint32_t cap)
{
	return sizeof(kw_heap) + cap;
}

/* Add (doc, tf) at the end of p (doc above its last); 0 or -1 on ENOMEM
 * (p unchanged). */
static int plist_add(kw_part *pt, kw_plist *p, uint32_t doc, const uint32_t tf[KW_FIELDS])
{
	uint8_t buf[KW_POSTING_MAX];
	uint32_t df, last;
	size_t n;
	uint64_t nl;

	plist_stats(p, &df, &last);
	n = posting_encode(buf, df == 0, last, doc, tf);
	nl = (uint64_t)p->len + n;
	if (nl > UINT32_MAX / 2)
		return -1;
	if (nl <= KW_INLINE) {
		memcpy(p->u.inl + p->len, buf, n);
	} else if (p->len <= KW_INLINE) {
		uint32_t cap = nl < KW_HEAP_MIN ? KW_HEAP_MIN : (uint32_t)nl;
		kw_heap *h = malloc(heap_size(cap));
		if (!h)
			return -1;
		memcpy(h->data, p->u.inl, p->len);
		memcpy(h->data + p->len, buf, n);
		h->cap = cap;
		h->reserved = 0;
		p->u.heap = h;
		pt->heap_bytes += heap_size(cap);
	} else {
		kw_heap *h = p->u.heap;
		if (nl > h->cap) {
			uint32_t cap = h->cap + h->cap / 2;
			if (cap < nl)
				cap = (uint32_t)nl;
			h = realloc(h, heap_size(cap));
			if (!h)
				return -1;
			pt->heap_bytes += cap - h->cap;
			h->cap = cap;
			p->u.heap = h;
		}
		memcpy(h->data + p->len, buf, n);
	}
	if (nl > KW_INLINE) {
		p->u.heap->df = df + 1;
		p->u.heap->last = doc;
	}
	p->len = (uint32_t)nl;
	pt->n_postings++;
	pt->posting_bytes += n;
	return 0;
}

/* Undo one add, back to a list of old_len bytes with old_df and old_last. */
static void plist_truncate(kw_part *pt, kw_plist *p, uint32_t old_len, uint32_t old_df,
			   uint32_t old_last)
{
	pt->posting_bytes -= p->len - old_len;
	pt->n_postings--;
	if (p->len > KW_INLINE && old_len <= KW_INLINE) {
		kw_heap *h = p->u.heap;
		pt->heap_bytes -= heap_size(h->cap);
		memcpy(p->u.inl, h->data, old_len);
		free(h);
	} else if (p->len > KW_INLINE) {
		p->u.heap->df = old_df;
		p->u.heap->last = old_last;
	}
	p->len = old_len;
}

/* ---- partitions ---------------------------------------------------------------- */

static uint32_t term_slot(uint32_t term, uint32_t cap)
{
	return (uint32_t)(((uint64_t)term * KW_HASH_MUL) >> KW_HASH_SHIFT) & (cap - 1);
}

static kw_plist *tab_find(const kw_part *pt, uint32_t term)
{
	if (!pt->tab_cap)
		return NULL;
	for (uint32_t i = term_slot(term, pt->tab_cap);; i = (i + 1) & (pt->tab_cap - 1)) {
		kw_plist *p = &pt->tab[i];
		if (p->term == term)
			return p;
		if (!p->term)
			return NULL;
	}
}

static kw_plist *tab_slot_for(kw_plist *tab, uint32_t cap, uint32_t term)
{
	uint32_t i = term_slot(term, cap);
	while (tab[i].term && tab[i].term != term)
		i = (i + 1) & (cap - 1);
	return &tab[i];
}

/* Make room for `more` new terms under a 3/4 load factor. */
static int tab_reserve(kw_part *pt, uint32_t more)
{
	uint64_t need = (uint64_t)pt->n_terms + more;
	uint32_t cap = pt->tab_cap ? pt->tab_cap : KW_TAB_MIN;
	kw_plist *tab;

	while (need * 4 > (uint64_t)cap * 3) {
		if (cap > UINT32_MAX / 2)
			return -1;
		cap *= 2;
	}
	if (cap == pt->tab_cap)
		return 0;
	tab = calloc(cap, sizeof(*tab));
	if (!tab)
		return -1;
	for (uint32_t i = 0; i < pt->tab_cap; i++)
		if (pt->tab[i].term)
			*tab_slot_for(tab, cap, pt->tab[i].term) = pt->tab[i];
	free(pt->tab);
	pt->tab = tab;
	pt->tab_cap = cap;
	return 0;
}

/* ---- documents by (session, seq) ----------------------------------------------- */

static uint32_t doc_slot(uint32_t session, int64_t seq, uint32_t cap)
{
	uint64_t h = (uint64_t)seq * KW_HASH_MUL ^ ((uint64_t)session + 1) * KW_HASH_MUL2;
	return (uint32_t)(h >> KW_HASH_SHIFT) & (cap - 1);
}

/* The document of (session, seq) in pt, or STRTAB_NONE. */
static uint32_t lk_find(const kw_part *pt, uint32_t session, int64_t seq)
{
	if (!pt->lk_cap)
		return STRTAB_NONE;
	for (uint32_t i = doc_slot(session, seq, pt->lk_cap);; i = (i + 1) & (pt->lk_cap - 1)) {
		uint32_t d1 = pt->lk[i];
		if (!d1)
			return STRTAB_NONE;
		if (pt->docs[d1 - 1].session == session && doc_key(&pt->docs[d1 - 1]) == seq)
			return d1 - 1;
	}
}

/* Put document doc of docs into lk (which has room and lacks it). */
static void lk_put(uint32_t *lk, uint32_t cap, const kw_doc *docs, uint32_t doc)
{
	uint32_t i = doc_slot(docs[doc].session, doc_key(&docs[doc]), cap);
	while (lk[i])
		i = (i + 1) & (cap - 1);
	lk[i] = doc + 1;
}

/* Make room in pt->lk for n documents under a 3/4 load factor, placing
 * the first `have` documents again when it grows. 0 or -1 on ENOMEM. */
static int lk_reserve(kw_part *pt, uint64_t n, uint32_t have)
{
	uint32_t cap = pt->lk_cap ? pt->lk_cap : KW_TAB_MIN;
	uint32_t *lk;

	while (n * 4 > (uint64_t)cap * 3) {
		if (cap > UINT32_MAX / 2)
			return -1;
		cap *= 2;
	}
	if (cap == pt->lk_cap)
		return 0;
	if (!(lk = calloc(cap, sizeof(*lk))))
		return -1;
	for (uint32_t d = 0; d < have; d++)
		lk_put(lk, cap, pt->docs, d);
	free(pt->lk);
	pt->lk = lk;
	pt->lk_cap = cap;
	return 0;
}

static kw_part *part_new(void)
{
	kw_part *pt = calloc(1, sizeof(*pt));
	if (pt && pthread_rwlock_init(&pt->lock, NULL) != 0) {
		free(pt);
		return NULL;
	}
	return pt;
}

static void part_free(kw_part *pt)
{
	if (!pt)
		return;
	for (uint32_t i = 0; i < pt->tab_cap; i++)
		plist_free(&pt->tab[i]);
	free(pt->tab);
	free(pt->docs);
	free(pt->lk);
	strtab_clear(&pt->sessions);
	strtab_clear(&pt->authors);
	pthread_rwlock_destroy(&pt->lock);
	free(pt);
}

/* ---- the index ------------------------------------------------------------------ */

kw_index *kw_new(double k1, double b)
{
	kw_index *kw = calloc(1, sizeof(*kw));
	if (!kw)
		return NULL;
	kw->k1 = k1;
	kw->b = b;
	if (pthread_rwlock_init(&kw->terms_lock, NULL) != 0) {
		free(kw);
		return NULL;
	}
	if (pthread_rwlock_init(&kw->parts_lock, NULL) != 0) {
		pthread_rwlock_destroy(&kw->terms_lock);
		free(kw);
		return NULL;
	}
	return kw;
}

static void drop_parts(kw_index *kw)
{
	for (uint32_t i = 0; i < kw->part_keys.n; i++)
		part_free(kw->parts[i]);
	free(kw->parts);
	kw->parts = NULL;
	kw->parts_cap = 0;
	strtab_clear(&kw->part_keys);
}

void kw_free(kw_index *kw)
{
	if (!kw)
		return;
	drop_parts(kw);
	strtab_clear(&kw->terms);
	pthread_rwlock_destroy(&kw->terms_lock);
	pthread_rwlock_destroy(&kw->parts_lock);
	free(kw);
}

/* "app\1user" into buf (2 * MEMD_ID_MAX + 2 bytes); returns its length,
 * or 0 if an id is too long. */
#define KW_KEY_MAX (2 * MEMD_ID_MAX + 2)
static size_t part_key(const char *app, const char *user, char buf[KW_KEY_MAX])
{
	size_t la = strlen(app), lu = strlen(user);
	if (la > MEMD_ID_MAX || lu > MEMD_ID_MAX)
		return 0;
	memcpy(buf, app, la);
	buf[la] = KW_KEY_SEP;
	memcpy(buf + la + 1, user, lu);
	buf[la + 1 + lu] = '\0';
	return la + 1 + lu;
}

/* The partition of (app, user) read-locked, or NULL. */
static kw_part *part_get_read(kw_index *kw, const char *app, const char *user)
{
	char key[KW_KEY_MAX];
	size_t kl = part_key(app, user, key);
	kw_part *pt = NULL;
	uint32_t id;

	if (!kl)
		return NULL;
	pthread_rwlock_rdlock(&kw->parts_lock);
	id = strtab_find(&kw->part_keys, key, kl);
	if (id != STRTAB_NONE && kw->parts[id]) {
		pt = kw->parts[id];
		pthread_rwlock_rdlock(&pt->lock);
	}
	pthread_rwlock_unlock(&kw->parts_lock);
	return pt;
}

/* The partition of (app, user), created if needed, write-locked. Only the
 * (single) writer calls this, so the partition cannot vanish between the
 * lookup and the lock. */
static kw_part *part_get_write(kw_index *kw, const char *app, const char *user, int create)
{
	char key[KW_KEY_MAX];
	size_t kl = part_key(app, user, key);
	kw_part *pt = NULL;
	uint32_t id;

	if (!kl)
		return NULL;
	pthread_rwlock_rdlock(&kw->parts_lock);
	id = strtab_find(&kw->part_keys, key, kl);
	if (id != STRTAB_NONE)
		pt = kw->parts[id];
	pthread_rwlock_unlock(&kw->parts_lock);
	if (!pt && create) {
		pthread_rwlock_wrlock(&kw->parts_lock);
		if (strtab_intern(&kw->part_keys, key, kl, &id) == 0) {
			if (id >= kw->parts_cap) {
				uint32_t cap = kw->parts_cap ? kw->parts_cap * 2 : KW_TAB_MIN;
				kw_part **grown = realloc(kw->parts, (size_t)cap * sizeof(*grown));
				if (grown) {
					memset(grown + kw->parts_cap, 0,
					       (size_t)(cap - kw->parts_cap) * sizeof(*grown));
					kw->parts = grown;
					kw->parts_cap = cap;
				}
			}
			if (id < kw->parts_cap)
				pt = kw->parts[id] = part_new();
		}
		pthread_rwlock_unlock(&kw->parts_lock);
	}
	if (pt)
		pthread_rwlock_wrlock(&pt->lock);
	return pt;
}

/* ---- adding ---------------------------------------------------------------------- */

/* Terms of one text: bytes back to back, with offsets. */
typedef struct term_list {
	char *bytes;
	size_t len, cap;
	uint32_t *offs;   /* n + 1 offsets */
	size_t n, cap_offs;
	int oom;
} term_list;

static int collect_term(void *ud, const text_token *t)
{
	term_list *tl = ud;
	if (tl->len + t->term_len > tl->cap) {
		size_t cap = tl->cap ? tl->cap * 2 : KW_TERMS_MIN * TEXT_TERM_MAX;
		char *b;
		while (cap < tl->len + t->term_len)
			cap *= 2;
		b = realloc(tl->bytes, cap);
		if (!b)
			return tl->oom = 1;
		tl->bytes = b;
		tl->cap = cap;
	}
	if (tl->n + 2 > tl->cap_offs) {
		size_t cap = tl->cap_offs ? tl->cap_offs * 2 : KW_TERMS_MIN;
		uint32_t *o = realloc(tl->offs, cap * sizeof(*o));
		if (!o)
			return tl->oom = 1;
		tl->offs = o;
		tl->cap_offs = cap;
	}
	if (tl->len + t->term_len > UINT32_MAX)
		return tl->oom = 1;
	if (tl->n == 0)
		tl->offs[0] = 0;
	memcpy(tl->bytes + tl->len, t->term, t->term_len);
	tl->len += t->term_len;
	tl->offs[++tl->n] = (uint32_t)tl->len;
	return 0;
}

static void term_list_clear(term_list *tl)
{
	free(tl->bytes);
	free(tl->offs);
}

/* Global ids of tl's terms into ids (n slots): found under the read lock,
 * the missing ones interned under the write lock (intern = 1) or left
 * STRTAB_NONE (intern = 0). 0 or -1 on ENOMEM. */
static int resolve_terms(kw_index *kw, const term_list *tl, uint32_t *ids, int intern)
{
	size_t missing = 0;

	pthread_rwlock_rdlock(&kw->terms_lock);
	for (size_t i = 0; i < tl->n; i++) {
		ids[i] = strtab_find(&kw->terms, tl->bytes + tl->offs[i], tl->offs[i + 1] - tl->offs[i]);
		missing += ids[i] == STRTAB_NONE;
	}
	pthread_rwlock_unlock(&kw->terms_lock);
	if (!missing || !intern)
		return 0;
	pthread_rwlock_wrlock(&kw->terms_lock);
	for (size_t i = 0; i < tl->n; i++) {
		if (ids[i] != STRTAB_NONE)
			continue;
		if (strtab_intern(&kw->terms, tl->bytes + tl->offs[i], tl->offs[i + 1] - tl->offs[i],
				  &ids[i]) < 0) {
			pthread_rwlock_unlock(&kw->terms_lock);
			return -1;
		}
	}
	pthread_rwlock_unlock(&kw->terms_lock);
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Sort (term, field) keys: insertion sort for the short arrays of most
 * texts. */
#define KW_SMALL_SORT 64
static void sort_keys(uint64_t *keys, size_t n)
{
	if (n > KW_SMALL_SORT) {
		qsort(keys, n, sizeof(*keys), cmp_u64);
		return;
	}
	for (size_t i = 1; i < n; i++) {
		uint64_t x = keys[i];
		size_t j = i;
		while (j && keys[j - 1] > x) {
			keys[j] = keys[j - 1];
			j--;
		}
		keys[j] = x;
	}
}

/* A (term id, field) key, ordered by term then field. */
#define KW_KEY_FIELD_BITS 2
#define KW_KEY_FIELD_MASK 0x3u
static uint64_t term_key(uint32_t id, unsigned field)
{
	return ((uint64_t)id << KW_KEY_FIELD_BITS) | field;
}

/* What one posting append changed, to undo it. */
typedef struct undo {
	kw_plist *p;
	uint32_t len, df, last;
} undo;

/* Append document doc to the lists of its sorted (term, field) keys. */
static int32_t add_postings(kw_part *pt, const uint64_t *keys, size_t n, uint32_t doc)
{
	undo *u = malloc((n ? n : 1) * sizeof(*u));
	size_t nu = 0, uniq = 0;

	if (!u)
		return MEMD_ENOMEM;
	for (size_t i = 0; i < n; i++)
		uniq += i == 0 || keys[i] >> KW_KEY_FIELD_BITS != keys[i - 1] >> KW_KEY_FIELD_BITS;
	if (uniq > UINT32_MAX || tab_reserve(pt, (uint32_t)uniq) < 0) {
		free(u);
		return MEMD_ENOMEM;
	}
	for (size_t i = 0; i < n;) {
		uint32_t id = (uint32_t)(keys[i] >> KW_KEY_FIELD_BITS), tf[KW_FIELDS] = { 0 };
		size_t j = i;
		kw_plist *p;

		while (j < n && keys[j] >> KW_KEY_FIELD_BITS == id)
			tf[keys[j++] & KW_KEY_FIELD_MASK]++;
		p = tab_slot_for(pt->tab, pt->tab_cap, id + 1);
		if (!p->term) {
			p->term = id + 1;
			pt->n_terms++;
		}
		u[nu].p = p;
		u[nu].len = p->len;
		plist_stats(p, &u[nu].df, &u[nu].last);
		if (plist_add(pt, p, doc, tf) < 0)
			goto fail;
		nu++;
		i = j;
	}
	free(u);
	return 0;
fail:
	/* Terms added for this document stay in the table with df 0 (search
	 * skips them; the next compaction drops them). */
	while (nu--)
		plist_truncate(pt, u[nu].p, u[nu].len, u[nu].df, u[nu].last);
	free(u);
	return MEMD_ENOMEM;
}

/* The (term, field) keys of a document's fields into *ret_keys (malloc'd,
 * sorted; *ret_n may be 0), the body's term count into *ret_body. 0 or
 * -1 on ENOMEM. */
static int doc_keys(kw_index *kw, const kw_doc_in *d, uint64_t **ret_keys, size_t *ret_n,
		    size_t *ret_body)
{
	const char *texts[KW_FIELDS] = { d->text, d->author, d->tags };
	size_t lens[KW_FIELDS] = { d->text_len, d->author ? strlen(d->author) : 0,
				   d->tags ? d->tags_len : 0 };
	uint64_t *keys = NULL;
	size_t n = 0, body = 0;
	int rc = 0;

	for (unsigned f = 0; f < KW_FIELDS && rc == 0; f++) {
		term_list tl = { 0 };
		uint32_t *ids = NULL;
		uint64_t *grown = NULL;

		if (f == 0 && (!texts[f] || !lens[f]))
			break; /* no body: not a document */
		if (!texts[f] || !lens[f])
			continue;
		text_terms(texts[f], lens[f], KW_TEXT_FLAGS, collect_term, &tl);
		if (f == 0 && !tl.oom && !(body = tl.n)) {
			/* Not a document: intern nothing of it. */
			term_list_clear(&tl);
			break;
		}
		if (tl.oom || (tl.n && !(ids = malloc(tl.n * sizeof(*ids)))) ||
		    (tl.n && resolve_terms(kw, &tl, ids, 1) < 0) ||
		    (tl.n && !(grown = realloc(keys, (n + tl.n) * sizeof(*keys))))) {
			rc = -1;
		} else if (tl.n) {
			keys = grown;
			for (size_t i = 0; i < tl.n; i++)
				keys[n++] = term_key(ids[i], f);
		}
		free(ids);
		term_list_clear(&tl);
	}
	if (rc < 0) {
		free(keys);
		return -1;
	}
	sort_keys(keys, n);
	*ret_keys = keys;
	*ret_n = n;
	*ret_body = body;
	return 0;
}

static int32_t part_compact(kw_part *pt, const uint8_t *drop);

/* Remove document doc of pt (write-locked). */
static int32_t part_drop_doc(kw_part *pt, uint32_t doc)
{
	uint8_t *drop = calloc(pt->n_docs, 1);
	int32_t r;

	if (!drop)
		return MEMD_ENOMEM;
	drop[doc] = 1;
	r = part_compact(pt, drop);
	free(drop);
	return r;
}

int32_t kw_add(kw_index *kw, const kw_doc_in *d)
{
	int memory = (d->flags & KW_DOC_MEMORY) != 0;
	uint64_t *keys = NULL;
	size_t n_keys = 0, body = 0;
	uint32_t sess, auth, have;
	kw_part *pt;
	int32_t r = MEMD_ENOMEM;

	if (doc_keys(kw, d, &keys, &n_keys, &body) < 0)
		goto out;
	if (!body && !memory) {
		r = 0;
		goto out;
	}
	pt = part_get_write(kw, d->app, d->user, body != 0);
	if (!pt) {
		r = body ? MEMD_ENOMEM : 0; /* no partition: no memory to remove */
		goto out;
	}
	sess = strtab_find(&pt->sessions, d->session, strlen(d->session));
	have = sess == STRTAB_NONE ? STRTAB_NONE : lk_find(pt, sess, memory ? 0 : d->seq);
	if (have != STRTAB_NONE && !memory) {
		r = 0; /* indexed already */
		goto unlock;
	}
	/* A memory's new version replaces the old one. */
	if (have != STRTAB_NONE && (r = part_drop_doc(pt, have)) < 0)
		goto unlock;
	r = MEMD_ENOMEM;
	if (!body) {
		r = 0;
		goto unlock;
	}
	if (pt->n_docs == UINT32_MAX - 1 || body > UINT32_MAX)
		goto unlock;
	if (pt->n_docs == pt->cap_docs) {
		uint32_t cap = pt->cap_docs ? pt->cap_docs * 2 : KW_DOCS_MIN;
		kw_doc *docs = realloc(pt->docs, (size_t)cap * sizeof(*docs));
		if (!docs)
			goto unlock;
		pt->docs = docs;
		pt->cap_docs = cap;
	}
	if (lk_reserve(pt, (uint64_t)pt->n_docs + 1, pt->n_docs) < 0)
		goto unlock;
	if (strtab_intern(&pt->sessions, d->session, strlen(d->session), &sess) < 0 ||
	    strtab_intern(&pt->authors, d->author ? d->author : "", d->author ? strlen(d->author) : 0,
			  &auth) < 0)
		goto unlock;
	if ((r = add_postings(pt, keys, n_keys, pt->n_docs)) < 0)
		goto unlock;
	pt->docs[pt->n_docs] = (kw_doc){
		.timestamp_us = d->timestamp_us,
		.seq = memory ? d->expires_us : d->seq,
		.session = sess,
		.author = auth,
		.len = (uint32_t)body,
		.flags = memory ? KW_DOC_MEMORY : 0,
	};
	lk_put(pt->lk, pt->lk_cap, pt->docs, pt->n_docs);
	pt->n_docs++;
	pt->sum_len += body;
unlock:
	pthread_rwlock_unlock(&pt->lock);
out:
	free(keys);
	return r;
}

/* ---- deleting -------------------------------------------------------------------- */

/* Re-encode one list without the removed documents (remap[d] ==
 * STRTAB_NONE) into out (a zeroed slot); 0 or -1 on ENOMEM. */
static int plist_compact(kw_part *npt, const kw_plist *old, const uint32_t *remap, kw_plist *out)
{
	plist_iter it;
	uint32_t doc, tf[KW_FIELDS];

	out->term = old->term;
	iter_init(&it, old);
	while (iter_next(&it, &doc, tf)) {
		if (remap[doc] == STRTAB_NONE)
			continue;
		if (plist_add(npt, out, remap[doc], tf) < 0)
			return -1;
	}
	return 0;
}

/* Rebuild pt without the documents d with drop[d] set, all or nothing. */
static int32_t part_compact(kw_part *pt, const uint8_t *drop)
{
	kw_part n = { 0 };
	uint32_t *remap = NULL, *sess_map = NULL, kept = 0;
	kw_plist *tab = NULL;
	uint32_t cap = KW_TAB_MIN;

	remap = malloc((size_t)pt->n_docs * sizeof(*remap));
	sess_map = malloc((size_t)(pt->sessions.n ? pt->sessions.n : 1) * sizeof(*sess_map));
	if (!remap || !sess_map)
		goto nomem;
	for (uint32_t s = 0; s < pt->sessions.n; s++)
		sess_map[s] = STRTAB_NONE;
	for (uint32_t d = 0; d < pt->n_docs; d++)
		remap[d] = drop[d] ? STRTAB_NONE : kept++;
	n.n_docs = kept;
	n.cap_docs = kept ? kept : 1;
	n.docs = malloc((size_t)n.cap_docs * sizeof(*n.docs));
	if (!n.docs)
		goto nomem;
	for (uint32_t d = 0; d < pt->n_docs; d++) {
		kw_doc doc = pt->docs[d];
		if (remap[d] == STRTAB_NONE)
			continue;
		if (sess_map[doc.session] == STRTAB_NONE) {
			const char *name = strtab_get(&pt->sessions, doc.session);
			if (strtab_intern(&n.sessions, name, strlen(name), &sess_map[doc.session]) < 0)
				goto nomem;
		}
		doc.session = sess_map[doc.session];
		n.docs[remap[d]] = doc;
		n.sum_len += doc.len;
	}
	if (lk_reserve(&n, kept, kept) < 0)
		goto nomem;
	while ((uint64_t)pt->n_terms * 4 > (uint64_t)cap * 3)
		cap *= 2;
	tab = calloc(cap, sizeof(*tab));
	if (!tab)
		goto nomem;
	n.tab = tab;
	n.tab_cap = cap;
	for (uint32_t i = 0; i < pt->tab_cap; i++) {
		kw_plist fresh = { 0 };
		if (!pt->tab[i].term || !pt->tab[i].len)
			continue;
		if (plist_compact(&n, &pt->tab[i], remap, &fresh) < 0) {
			plist_free(&fresh);
			goto nomem;
		}
		if (!fresh.len)
			continue;
		*tab_slot_for(n.tab, n.tab_cap, fresh.term) = fresh;
		n.n_terms++;
	}
	/* Swap in: the old lists, documents and sessions go. */
	for (uint32_t i = 0; i < pt->tab_cap; i++)
		plist_free(&pt->tab[i]);
	free(pt->tab);
	free(pt->docs);
	free(pt->lk);
	strtab_clear(&pt->sessions);
	pt->lk = n.lk;
	pt->lk_cap = n.lk_cap;
	pt->tab = n.tab;
	pt->tab_cap = n.tab_cap;
	pt->n_terms = n.n_terms;
	pt->docs = n.docs;
	pt->n_docs = n.n_docs;
	pt->cap_docs = n.cap_docs;
	pt->sum_len = n.sum_len;
	pt->sessions = n.sessions;
	pt->n_postings = n.n_postings;
	pt->posting_bytes = n.posting_bytes;
	pt->heap_bytes = n.heap_bytes;
	free(remap);
	free(sess_map);
	return 0;
nomem:
	for (uint32_t i = 0; tab && i < cap; i++)
		plist_free(&tab[i]);
	free(tab);
	free(n.docs);
	free(n.lk);
	strtab_clear(&n.sessions);
	free(remap);
	free(sess_map);
	return MEMD_ENOMEM;
}

int32_t kw_delete_session(kw_index *kw, const char *app, const char *user, const char *session)
{
	kw_part *pt = part_get_write(kw, app, user, 0);
	uint32_t sid;
	int32_t r = 0;

	if (!pt)
		return 0;
	sid = strtab_find(&pt->sessions, session, strlen(session));
	if (sid != STRTAB_NONE && pt->n_docs) {
		uint8_t *drop = malloc(pt->n_docs);
		if (drop) {
			for (uint32_t d = 0; d < pt->n_docs; d++)
				drop[d] = pt->docs[d].session == sid &&
					  !(pt->docs[d].flags & KW_DOC_MEMORY);
			r = part_compact(pt, drop);
			free(drop);
		} else {
			r = MEMD_ENOMEM;
		}
	}
	pthread_rwlock_unlock(&pt->lock);
	return r;
}

int32_t kw_delete_events(kw_index *kw, const char *app, const char *user, const char *session,
			 const int64_t *seqs, size_t n)
{
	kw_part *pt = part_get_write(kw, app, user, 0);
	uint8_t *drop = NULL;
	uint32_t sid;
	size_t found = 0;
	int32_t r = 0;

	if (!pt)
		return 0;
	sid = strtab_find(&pt->sessions, session, strlen(session));
	if (sid == STRTAB_NONE || !pt->n_docs || !n)
		goto out;
	if (!(drop = calloc(pt->n_docs, 1))) {
		r = MEMD_ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		uint32_t d = lk_find(pt, sid, seqs[i]);
		if (d != STRTAB_NONE && !drop[d]) {
			drop[d] = 1;
			found++;
		}
	}
	if (found)
		r = part_compact(pt, drop);
out:
	pthread_rwlock_unlock(&pt->lock);
	free(drop);
	return r;
}

int32_t kw_delete_event(kw_index *kw, const char *app, const char *user, const char *session,
			int64_t seq)
{
	return kw_delete_events(kw, app, user, session, &seq, 1);
}

int32_t kw_delete_memories(kw_index *kw, const char *app, const char *user,
			   const char *const *ids, size_t n)
{
	kw_part *pt = part_get_write(kw, app, user, 0);
	uint8_t *drop = NULL;
	size_t found = 0;
	int32_t r = 0;

	if (!pt)
		return 0;
	if (!pt->n_docs || !n)
		goto out;
	if (!(drop = calloc(pt->n_docs, 1))) {
		r = MEMD_ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		uint32_t sid = strtab_find(&pt->sessions, ids[i], strlen(ids[i]));
		uint32_t d = sid == STRTAB_NONE ? STRTAB_NONE : lk_find(pt, sid, 0);
		if (d != STRTAB_NONE && !drop[d]) {
			drop[d] = 1;
			found++;
		}
	}
	if (found)
		r = part_compact(pt, drop);
out:
	pthread_rwlock_unlock(&pt->lock);
	free(drop);
	return r;
}

int32_t kw_delete_memory(kw_index *kw, const char *app, const char *user, const char *id)
{
	return kw_delete_memories(kw, app, user, &id, 1);
}

void kw_delete_user(kw_index *kw, const char *app, const char *user)
{
	char key[KW_KEY_MAX];
	size_t kl = part_key(app, user, key);
	kw_part *pt = NULL;
	uint32_t id;

	if (!kl)
		return;
	pthread_rwlock_wrlock(&kw->parts_lock);
	id = strtab_find(&kw->part_keys, key, kl);
	if (id != STRTAB_NONE) {
		pt = kw->parts[id];
		kw->parts[id] = NULL;
	}
	pthread_rwlock_unlock(&kw->parts_lock);
	if (!pt)
		return;
	/* Searches that found pt before it was unlinked hold its read lock:
	 * wait for them. */
	pthread_rwlock_wrlock(&pt->lock);
	pthread_rwlock_unlock(&pt->lock);
	part_free(pt);
}

void kw_clear(kw_index *kw)
{
	kw_part **parts;
	uint32_t n;

	pthread_rwlock_wrlock(&kw->parts_lock);
	parts = kw->parts;
	n = kw->part_keys.n;
	kw->parts = NULL;
	kw->parts_cap = 0;
	strtab_clear(&kw->part_keys);
	pthread_rwlock_unlock(&kw->parts_lock);
	for (uint32_t i = 0; i < n; i++) {
		if (!parts[i])
			continue;
		pthread_rwlock_wrlock(&parts[i]->lock);
		pthread_rwlock_unlock(&parts[i]->lock);
		part_free(parts[i]);
	}
	free(parts);
	/* No partition refers to a term any more. */
	pthread_rwlock_wrlock(&kw->terms_lock);
	strtab_clear(&kw->terms);
	pthread_rwlock_unlock(&kw->terms_lock);
}

/* ---- searching ------------------------------------------------------------------- */

typedef struct cand {
	uint32_t doc;
	double score;
} cand;

/* Nonzero if a ranks before b (see the header: score, time, seq, session). */
static int better(const kw_part *pt, const cand *a, const cand *b)
{
	const kw_doc *x = &pt->docs[a->doc], *y = &pt->docs[b->doc];
	if (a->score != b->score)
		return a->score > b->score;
	if (x->timestamp_us != y->timestamp_us)
		return x->timestamp_us > y->timestamp_us;
	if (x->seq != y->seq)
		return x->seq > y->seq;
	if (x->session != y->session)
		return strcmp(strtab_get(&pt->sessions, x->session),
			      strtab_get(&pt->sessions, y->session)) < 0;
	return a->doc < b->doc;
}

/* Min-heap on "better": heap[0] is the worst kept candidate. */
static void sift_down(const kw_part *pt, cand *h, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, w = i;
		if (l < n && better(pt, &h[w], &h[l]))
			w = l;
		if (r < n && better(pt, &h[w], &h[r]))
			w = r;
		if (w == i)
			return;
		cand t = h[i];
		h[i] = h[w];
		h[w] = t;
		i = w;
	}
}

static void sift_up(const kw_part *pt, cand *h, size_t i)
{
	while (i) {
		size_t p = (i - 1) / 2;
		if (!better(pt, &h[p], &h[i]))
			return;
		cand t = h[i];
		h[i] = h[p];
		h[p] = t;
		i = p;
	}
}

/* Which documents the filter lets through. */
typedef struct doc_filter {
	uint32_t session;        /* STRTAB_NONE = any */
	uint32_t *authors;       /* NULL = any */
	size_t n_authors;
	int64_t after, before;
	int events, memories;    /* whether each kind may pass at all */
	int64_t now;             /* memories expired at now are left out */
	double w[KW_FIELDS];     /* weights of the fields counted; 0 = not */
} doc_filter;

static int passes(const doc_filter *f, const kw_doc *d)
{
	if (d->flags & KW_DOC_MEMORY)
		return f->memories && !(d->seq > 0 && d->seq <= f->now);
	if (!f->events)
		return 0;
	if (f->session != STRTAB_NONE && d->session != f->session)
		return 0;
	if (f->after && d->timestamp_us <= f->after)
		return 0;
	if (f->before && d->timestamp_us >= f->before)
		return 0;
	if (f->authors) {
		for (size_t i = 0; i < f->n_authors; i++)
			if (f->authors[i] == d->author)
				return 1;
		return 0;
	}
	return 1;
}

/* Resolve the filter's names in pt; 0 if nothing can match. */
static int filter_prepare(const kw_part *pt, const kw_filter *f, doc_filter *df, uint32_t *authors)
{
	static const double weights[KW_FIELDS] = { KW_WEIGHT_BODY, KW_WEIGHT_AUTHOR, KW_WEIGHT_TAGS };
	uint32_t sources = f && f->sources ? f->sources : KW_SOURCE_EVENTS | KW_SOURCE_MEMORIES;
	uint32_t fields = f && f->fields ? f->fields : KW_FIELD_ALL;

	df->session = STRTAB_NONE;
	df->authors = NULL;
	df->n_authors = 0;
	df->after = f ? f->after_us : 0;
	df->before = f ? f->before_us : 0;
	df->events = (sources & KW_SOURCE_EVENTS) != 0;
	df->memories = (sources & KW_SOURCE_MEMORIES) != 0;
	df->now = f ? f->now_us : 0;
	for (unsigned i = 0; i < KW_FIELDS; i++)
		df->w[i] = (fields & (1u << i)) ? weights[i] : 0.0;
	if (f && f->session) {
		df->session = strtab_find(&pt->sessions, f->session, strlen(f->session));
		if (df->session == STRTAB_NONE)
			df->events = 0;
	}
	if (f && f->authors) {
		df->authors = authors;
		for (size_t i = 0; i < f->n_authors; i++) {
			uint32_t a = strtab_find(&pt->authors, f->authors[i], strlen(f->authors[i]));
			if (a != STRTAB_NONE)
				authors[df->n_authors++] = a;
		}
		if (!df->n_authors)
			df->events = 0;
	}
	return df->events || df->memories;
}

/* Score pt for the distinct term ids into the best k. A document's score
 * is summed in the order of ids, so that order must not depend on the
 * index's history (see query_order). */
static int32_t score_part(const kw_index *kw, const kw_part *pt, const uint32_t *ids, size_t n_ids,
			  const doc_filter *f, uint32_t k, cand **ret, size_t *ret_n,
			  uint64_t *rows_read)
{
	double *acc = NULL, avglen;
	uint32_t *touched = NULL, n_touched = 0;
	uint64_t total_df = 0, examined = 0;
	const kw_plist **lists;
	uint32_t *dfs;
	size_t n_lists = 0;
	cand *heap = NULL;
	size_t n_heap = 0;

	*ret = NULL;
	*ret_n = 0;
	if (!pt->n_docs)
		return 0;
	lists = malloc(n_ids * sizeof(*lists));
	dfs = malloc(n_ids * sizeof(*dfs));
	if (!lists || !dfs) {
		free(lists);
		free(dfs);
		return MEMD_ENOMEM;
	}
	for (size_t i = 0; i < n_ids; i++) {
		const kw_plist *p = tab_find(pt, ids[i] + 1);
		uint32_t df, last;
		if (!p || !p->len)
			continue;
		plist_stats(p, &df, &last);
		lists[n_lists] = p;
		dfs[n_lists++] = df;
		total_df += df;
	}
	if (!n_lists) {
		free(lists);
		free(dfs);
		return 0;
	}
	acc = calloc(pt->n_docs, sizeof(*acc));
	touched = malloc((size_t)(total_df < pt->n_docs ? total_df : pt->n_docs) * sizeof(*touched));
	heap = malloc((size_t)k * sizeof(*heap));
	if (!acc || !touched || !heap)
		goto nomem;
	avglen = (double)pt->sum_len / pt->n_docs;
	for (size_t i = 0; i < n_lists; i++) {
		const kw_plist *p = lists[i];
		double idf = log(1.0 + ((double)pt->n_docs - dfs[i] + 0.5) / (dfs[i] + 0.5));
		plist_iter it;
		uint32_t doc, tf[KW_FIELDS];

		iter_init(&it, p);
		while (iter_next(&it, &doc, tf)) {
			const kw_doc *d = &pt->docs[doc];
			double lnorm, x;
			examined++;
			if (!passes(f, d))
				continue;
			/* BM25F (keyword.h), with numerator and denominator
			 * times B(d): x = w_body * tf_body + B(d) * (the
			 * other fields), so that a body-only posting scores
			 * bit for bit as plain BM25. */
			lnorm = 1.0 - kw->b + kw->b * d->len / avglen;
			x = f->w[0] * tf[0] + lnorm * (f->w[1] * tf[1] + f->w[2] * tf[2]);
			if (x <= 0.0)
				continue; /* only in fields not counted */
			if (acc[doc] == 0.0)
				touched[n_touched++] = doc;
			acc[doc] += idf * x * (kw->k1 + 1.0) / (x + kw->k1 * lnorm);
		}
	}
	for (uint32_t i = 0; i < n_touched; i++) {
		cand c = { touched[i], acc[touched[i]] };
		if (n_heap < k) {
			heap[n_heap++] = c;
			sift_up(pt, heap, n_heap - 1);
		} else if (better(pt, &c, &heap[0])) {
			heap[0] = c;
			sift_down(pt, heap, n_heap, 0);
		}
	}
	/* Heap sort: pop the worst to the end, best first remains. */
	for (size_t n = n_heap; n > 1; n--) {
		cand t = heap[0];
		heap[0] = heap[n - 1];
		heap[n - 1] = t;
		sift_down(pt, heap, n - 1, 0);
	}
	free(lists);
	free(dfs);
	free(acc);
	free(touched);
	if (rows_read)
		*rows_read += examined;
	*ret = heap;
	*ret_n = n_heap;
	return 0;
nomem:
	free(lists);
	free(dfs);
	free(acc);
	free(touched);
	free(heap);
	return MEMD_ENOMEM;
}

typedef struct qterm {
	const char *s;
	uint32_t len, id;
} qterm;

static int cmp_qterm(const void *a, const void *b)
{
	const qterm *x = a, *y = b;
	int c = memcmp(x->s, y->s, x->len < y->len ? x->len : y->len);
	return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* The distinct known terms of tl (ids from resolve_terms) into
 * ids[0..*ret_n), ordered by their text. Term ids are handed out in the
 * order terms first appear, which differs between an index that lived
 * through deletes and one rebuilt (or restored) without them; summing a
 * score in text order keeps every score bit for bit the same in both.
 * 0 or -1 on ENOMEM. */
static int query_order(const term_list *tl, uint32_t *ids, size_t *ret_n)
{
	qterm *q = malloc(tl->n * sizeof(*q));
	size_t nq = 0, n = 0;

	if (!q)
		return -1;
	for (size_t i = 0; i < tl->n; i++)
		if (ids[i] != STRTAB_NONE)
			q[nq++] = (qterm){ tl->bytes + tl->offs[i], tl->offs[i + 1] - tl->offs[i], ids[i] };
	qsort(q, nq, sizeof(*q), cmp_qterm);
	for (size_t i = 0; i < nq; i++)
		if (n == 0 || ids[n - 1] != q[i].id)
			ids[n++] = q[i].id;
	free(q);
	*ret_n = n;
	return 0;
}

void kw_hits_free(kw_hit *hits, size_t n)
{
	for (size_t i = 0; hits && i < n; i++)
		free(hits[i].session);
	free(hits);
}

int32_t kw_search(kw_index *kw, const char *app, const char *user, const char *query,
		  const kw_filter *f, uint32_t k, kw_hit **ret_hits, size_t *ret_n,
		  uint64_t *rows_read, memd_error *err)
{
	term_list tl = { 0 };
	uint32_t *ids = NULL, *authors = NULL;
	size_t n_ids = 0, n_c = 0;
	kw_part *pt = NULL;
	kw_hit *hits = NULL;
	cand *c = NULL;
	doc_filter df;
	int32_t r = MEMD_ENOMEM;

	if (k == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "k: must be at least 1");
	text_terms(query, strlen(query), KW_TEXT_FLAGS, collect_term, &tl);
	if (tl.oom)
		goto out;
	if (tl.n) {
		ids = malloc(tl.n * sizeof(*ids));
		if (!ids || resolve_terms(kw, &tl, ids, 0) < 0 || query_order(&tl, ids, &n_ids) < 0)
			goto out;
	}
	if (f && f->n_authors && !(authors = malloc(f->n_authors * sizeof(*authors))))
		goto out;
	if (n_ids && (pt = part_get_read(kw, app, user))) {
		if (filter_prepare(pt, f, &df, authors) &&
		    score_part(kw, pt, ids, n_ids, &df, k, &c, &n_c, rows_read) < 0) {
			pthread_rwlock_unlock(&pt->lock);
			goto out;
		}
		hits = calloc(n_c ? n_c : 1, sizeof(*hits));
		for (size_t i = 0; hits && i < n_c; i++) {
			const kw_doc *d = &pt->docs[c[i].doc];
			hits[i].session = strdup(strtab_get(&pt->sessions, d->session));
			hits[i].seq = doc_key(d);
			hits[i].timestamp_us = d->timestamp_us;
			hits[i].score = c[i].score;
			hits[i].memory = (d->flags & KW_DOC_MEMORY) != 0;
			if (!hits[i].session) {
				kw_hits_free(hits, i);
				hits = NULL;
			}
		}
		pthread_rwlock_unlock(&pt->lock);
		if (!hits)
			goto out;
	} else {
		hits = calloc(1, sizeof(*hits));
		if (!hits)
			goto out;
	}
	*ret_hits = hits;
	*ret_n = n_c;
	r = 0;
out:
	free(c);
	free(ids);
	free(authors);
	term_list_clear(&tl);
	if (r == MEMD_ENOMEM)
		memd_error_set(err, r, 0, "keyword search: out of memory");
	return r;
}

/* ---- stats ----------------------------------------------------------------------- */

void kw_get_stats(kw_index *kw, kw_stats *ret)
{
	kw_stats s = { 0 };

	pthread_rwlock_rdlock(&kw->terms_lock);
	s.terms = kw->terms.n;
	s.memory_bytes += strtab_bytes(&kw->terms);
	pthread_rwlock_unlock(&kw->terms_lock);
	pthread_rwlock_rdlock(&kw->parts_lock);
	s.memory_bytes += strtab_bytes(&kw->part_keys) + (size_t)kw->parts_cap * sizeof(*kw->parts);
	for (uint32_t i = 0; i < kw->part_keys.n; i++) {
		kw_part *pt = kw->parts[i];
		if (!pt)
			continue;
		pthread_rwlock_rdlock(&pt->lock);
		s.partitions++;
		s.documents += pt->n_docs;
		s.postings += pt->n_postings;
		s.postings_bytes += pt->posting_bytes;
		s.memory_bytes += sizeof(*pt) + (size_t)pt->cap_docs * sizeof(kw_doc) +
				  (size_t)pt->tab_cap * sizeof(kw_plist) + pt->heap_bytes +
				  (size_t)pt->lk_cap * sizeof(*pt->lk) + strtab_bytes(&pt->sessions) +
				  strtab_bytes(&pt->authors);
		pthread_rwlock_unlock(&pt->lock);
	}
	pthread_rwlock_unlock(&kw->parts_lock);
	*ret = s;
}

/* ---- snapshots: dump ---------------------------------------------------------------- */

/* Bytes kw_dump encodes before handing them to the sink. */
#define KW_DUMP_BUF 65536
#define KW_ZIGZAG_SHIFT 63

static uint64_t zigzag(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> KW_ZIGZAG_SHIFT);
}

static int64_t unzigzag(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

typedef struct enc {
	const kw_sink *out;
	memd_error *err;
	int32_t r;         /* the first failure; later writes are dropped */
	size_t n;
	uint8_t buf[KW_DUMP_BUF];
} enc;

static void enc_flush(enc *e)
{
	if (!e->r && e->n)
		e->r = e->out->write(e->out->userdata, e->buf, e->n, e->err);
	e->n = 0;
}

static void enc_bytes(enc *e, const void *p, size_t n)
{
	if (n > sizeof(e->buf) - e->n) {
		enc_flush(e);
		if (n > sizeof(e->buf) / 2) {
			if (!e->r)
				e->r = e->out->write(e->out->userdata, p, n, e->err);
			return;
		}
	}
	memcpy(e->buf + e->n, p, n);
	e->n += n;
}

static void enc_uv(enc *e, uint64_t v)
{
	if (sizeof(e->buf) - e->n < KW_VARINT_MAX)
		enc_flush(e);
	e->n += varint_put(e->buf + e->n, v);
}

static void enc_str(enc *e, const char *s, size_t len)
{
	enc_uv(e, len);
	enc_bytes(e, s, len);
}

static void enc_strtab(enc *e, const strtab *t)
{
	enc_uv(e, t->n);
	for (uint32_t i = 0; i < t->n; i++) {
		const char *x = strtab_get(t, i);
		enc_str(e, x, strlen(x));
	}
}

static void enc_begin(enc *e, uint32_t kind)
{
	if (!e->r)
		e->r = e->out->begin(e->out->userdata, kind, e->err);
}

static void enc_end(enc *e)
{
	enc_flush(e);
	if (!e->r)
		e->r = e->out->end(e->out->userdata, e->err);
}

/* Slots of a table in term order. qsort has no context argument, so the
 * slots are sorted as (term, slot) pairs. */
typedef struct slot_ref {
	uint32_t term, slot;
} slot_ref;

static int cmp_slot(const void *a, const void *b)
{
	const slot_ref *x = a, *y = b;
	return (x->term > y->term) - (x->term < y->term);
}

/* Lists in term order: the dump of an index does not depend on the
 * history of its hash table. */
static void dump_part(enc *e, const char *key, const kw_part *pt)
{
	uint32_t lists = 0;
	slot_ref *order;

	enc_begin(e, KW_SECTION_PARTITION);
	enc_str(e, key, strlen(key));
	enc_strtab(e, &pt->sessions);
	enc_strtab(e, &pt->authors);
	enc_uv(e, pt->n_docs);
	for (uint32_t i = 0; i < pt->n_docs && !e->r; i++) {
		const kw_doc *d = &pt->docs[i];
		enc_uv(e, zigzag(d->timestamp_us));
		enc_uv(e, zigzag(d->seq));
		enc_uv(e, d->session);
		enc_uv(e, d->author);
		enc_uv(e, d->len);
		enc_uv(e, d->flags);
	}
	order = malloc((pt->n_terms ? pt->n_terms : 1) * sizeof(*order));
	if (!order) {
		if (!e->r)
			e->r = memd_error_set(e->err, MEMD_ENOMEM, 0, "keyword snapshot: out of memory");
		return;
	}
	for (uint32_t i = 0; i < pt->tab_cap && lists < pt->n_terms; i++)
		if (pt->tab[i].term && pt->tab[i].len) /* else left behind by a failed add */
			order[lists++] = (slot_ref){ pt->tab[i].term, i };
	qsort(order, lists, sizeof(*order), cmp_slot);
	enc_uv(e, lists);
	for (uint32_t i = 0; i < lists && !e->r; i++) {
		const kw_plist *p = &pt->tab[order[i].slot];
		enc_uv(e, p->term - 1);
		enc_uv(e, p->len);
		enc_bytes(e, plist_data(p), p->len);
	}
	free(order);
	enc_end(e);
}

int32_t kw_dump(kw_index *kw, const kw_sink *out, uint64_t *ret_documents, memd_error *err)
{
	enc *e = malloc(sizeof(*e));
	uint64_t docs = 0;
	int32_t r;

	if (!e)
		return memd_error_set(err, MEMD_ENOMEM, 0, "keyword snapshot: out of memory");
	e->out = out;
	e->err = err;
	e->r = 0;
	e->n = 0;
	pthread_rwlock_rdlock(&kw->terms_lock);
	pthread_rwlock_rdlock(&kw->parts_lock);
	enc_begin(e, KW_SECTION_TERMS);
	enc_strtab(e, &kw->terms);
	enc_end(e);
	for (uint32_t i = 0; i < kw->part_keys.n && !e->r; i++) {
		kw_part *pt = kw->parts[i];
		if (!pt)
			continue;
		pthread_rwlock_rdlock(&pt->lock);
		dump_part(e, strtab_get(&kw->part_keys, i), pt);
		docs += pt->n_docs;
		pthread_rwlock_unlock(&pt->lock);
	}
	pthread_rwlock_unlock(&kw->parts_lock);
	pthread_rwlock_unlock(&kw->terms_lock);
	r = e->r;
	free(e);
	if (r == 0 && ret_documents)
		*ret_documents = docs;
	return r;
}

/* ---- snapshots: restore ------------------------------------------------------------- */

/* A payload being read; every read is bounds-checked. */
typedef struct dec {
	const uint8_t *p;
	size_t n, pos;
} dec;

/* Bytes each item of a list takes at least (to bound counts before
 * allocating for them): a string is its length; a document six
 * varints; a postings list its term, length and one byte. */
#define KW_MIN_STR 1
#define KW_MIN_DOC 6
#define KW_MIN_LIST 3
#define KW_VARINT_LAST_MAX 1 /* the 10th byte of a uint64 holds its top bit only */

static int dec_uv(dec *d, uint64_t *ret)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < KW_VARINT_MAX; i++) {
		uint8_t byte;
		if (d->pos >= d->n)
			return -1;
		byte = d->p[d->pos++];
		if (i == KW_VARINT_MAX - 1 && byte > KW_VARINT_LAST_MAX)
			return -1;
		v |= (uint64_t)(byte & 0x7F) << (7 * i);
		if (!(byte & 0x80)) {
			*ret = v;
			return 0;
		}
	}
	return -1;
}

static int dec_u32(dec *d, uint32_t *ret)
{
	uint64_t v;
	if (dec_uv(d, &v) < 0 || v > UINT32_MAX)
		return -1;
	*ret = (uint32_t)v;
	return 0;
}

/* A count of items taking at least min bytes each. */
static int dec_count(dec *d, size_t min, uint32_t *ret)
{
	if (dec_u32(d, ret) < 0 || (uint64_t)*ret * min > d->n - d->pos)
		return -1;
	return 0;
}

static int dec_str(dec *d, const char **ret, uint32_t *ret_len)
{
	uint32_t len;
	if (dec_u32(d, &len) < 0 || len > d->n - d->pos)
		return -1;
	*ret = (const char *)d->p + d->pos;
	*ret_len = len;
	d->pos += len;
	return 0;
}

/* Nonzero if the len bytes at s hold a NUL (strtab keeps C strings). */
static int has_nul(const char *s, size_t len)
{
	return memchr(s, '\0', len) != NULL;
}

static int32_t bad(memd_error *err, const char *what, const char *detail)
{
	return memd_error_set(err, MEMD_EINVAL, 0, "keyword snapshot: %s: %s", what, detail);
}

static int32_t restore_terms(kw_index *kw, const uint8_t *p, size_t n, memd_error *err)
{
	dec d = { p, n, 0 };
	uint32_t count;
	int32_t r = 0;

	if (dec_count(&d, KW_MIN_STR, &count) < 0)
		return bad(err, "terms", "malformed count");
	pthread_rwlock_wrlock(&kw->terms_lock);
	for (uint32_t i = 0; i < count; i++) {
		const char *s;
		uint32_t len, id;
		if (dec_str(&d, &s, &len) < 0 || len == 0 || len > TEXT_TERM_MAX || has_nul(s, len)) {
			r = bad(err, "terms", "malformed term");
			break;
		}
		if (strtab_intern(&kw->terms, s, len, &id) < 0) {
			r = memd_error_set(err, MEMD_ENOMEM, 0, "keyword snapshot: out of memory");
			break;
		}
		if (id != i) {
			r = bad(err, "terms", "a term is listed twice");
			break;
		}
	}
	pthread_rwlock_unlock(&kw->terms_lock);
	if (r == 0 && d.pos != d.n)
		r = bad(err, "terms", "bytes after the last term");
	return r;
}

/* A table of count strings into t (empty); what: for messages; entries
 * are min_len..max_len bytes. */
static int32_t restore_strtab(dec *d, strtab *t, const char *what, uint32_t min_len,
			      uint32_t max_len, memd_error *err)
{
	uint32_t count;

	if (dec_count(d, KW_MIN_STR, &count) < 0)
		return bad(err, what, "malformed count");
	for (uint32_t i = 0; i < count; i++) {
		const char *s;
		uint32_t len, id;
		if (dec_str(d, &s, &len) < 0 || len < min_len || len > max_len || has_nul(s, len))
			return bad(err, what, "malformed entry");
		if (strtab_intern(t, s, len, &id) < 0)
			return memd_error_set(err, MEMD_ENOMEM, 0, "keyword snapshot: out of memory");
		if (id != i)
			return bad(err, what, "an entry is listed twice");
	}
	return 0;
}

/* Check one encoded postings list against the partition's documents,
 * adding each document's term frequency to tf_sum; its df and last
 * document into *ret_df, *ret_last. 0 or -1. */
static int check_postings(const uint8_t *p, uint32_t len, uint32_t n_docs, uint32_t *tf_sum,
			  const kw_doc *docs, uint32_t *ret_df, uint32_t *ret_last)
{
	dec d = { p, len, 0 };
	uint64_t doc = 0;
	uint32_t df = 0;

	while (d.pos < d.n) {
		uint64_t code, tf = 1, ext = 0, other;
		if (dec_uv(&d, &code) < 0)
			return -1;
		doc = df ? doc + (code >> 1) + 1 : code >> 1;
		if (doc >= n_docs)
			return -1;
		if (code & 1) {
			/* Every field flagged has tf >= 1, and some field has. */
			if (dec_uv(&d, &ext) < 0 || ext >> KW_EXT_SHIFT > UINT32_MAX ||
			    ext == 0 || ext == 1u << KW_EXT_SHIFT)
				return -1;
			tf = ext >> KW_EXT_SHIFT;
			if ((ext & KW_EXT_AUTHOR) && (dec_uv(&d, &other) < 0 || other >= UINT32_MAX))
				return -1;
			if ((ext & KW_EXT_TAGS) && (dec_uv(&d, &other) < 0 || other >= UINT32_MAX))
				return -1;
		}
		/* The body's frequencies sum to the document's length. */
		if (tf > docs[doc].len - tf_sum[doc])
			return -1;
		tf_sum[doc] += (uint32_t)tf;
		df++;
	}
	*ret_df = df;
	*ret_last = (uint32_t)doc;
	return 0;
}

/* The postings lists of a partition into pt (its documents read). */
static int32_t restore_lists(dec *d, kw_part *pt, uint32_t n_terms, const char *what,
			     memd_error *err)
{
	uint32_t count, *tf_sum = calloc(pt->n_docs ? pt->n_docs : 1, sizeof(*tf_sum));
	int32_t r = 0;

	if (!tf_sum)
		return memd_error_set(err, MEMD_ENOMEM, 0, "keyword snapshot: out of memory");
	if (dec_count(d, KW_MIN_LIST, &count) < 0) {
		r = bad(err, what, "malformed list count");
		goto out;
	}
	if (tab_reserve(pt, count) < 0) {
		r = memd_error_set(err, MEMD_ENOMEM, 0, "keyword snapshot: out of memory");
		goto out;
	}
	for (uint32_t i = 0; i < count; i++) {
		uint32_t term, len, df, last;
		const char *data;
		kw_plist *slot;

		if (dec_u32(d, &term) < 0 || term >= n_terms || dec_str(d, &data, &len) < 0 ||
		    len == 0 || len > UINT32_MAX / 2) {
			r = bad(err, what, "malformed postings list");
			goto out;
		}
		slot = tab_slot_for(pt->tab, pt->tab_cap, term + 1);
		if (slot->term) {
			r = bad(err, what, "a term has two postings lists");
			goto out;
		}
		if (check_postings((const uint8_t *)data, len, pt->n_docs, tf_sum, pt->docs, &df,
				   &last) < 0) {
			r = bad(err, what, "postings out of order, out of range or malformed");
			goto out;
		}
		if (len <= KW_INLINE) {
			memcpy(slot->u.inl, data, len);
		} else {
			uint32_t cap = len < KW_HEAP_MIN ? KW_HEAP_MIN : len;
			kw_heap *h = malloc(heap_size(cap));
			if (!h) {
				r = memd_error_set(err, MEMD_ENOMEM, 0, "keyword snapshot: out of memory");
				goto out;
			}
			memcpy(h->data, data, len);
			h->df = df;
			h->last = last;
			h->cap = cap;
			h->reserved = 0;
			slot->u.heap = h;
			pt->heap_bytes += heap_size(cap);
		}
		slot->term = term + 1;
		slot->len = len;
		pt->n_terms++;
		pt->n_postings += df;
		pt->posting_bytes += len;
	}
	for (uint32_t i = 0; i < pt->n_docs; i++)
		if (tf_sum[i] != pt->docs[i].len) {
			r = bad(err, what, "a document's length does not match its postings");
			goto out;
		}
out:
	free(tf_sum);
	return r;
}

/* Hang pt into kw under key; -1 if the key is there already, -2 on
 * ENOMEM. */
static int parts_put(kw_index *kw, const char *key, size_t kl, kw_part *pt)
{
	uint32_t id;
	int rc = 0;

	pthread_rwlock_wrlock(&kw->parts_lock);
	if (strtab_find(&kw->part_keys, key, kl) != STRTAB_NONE) {
		rc = -1;
	} else if (strtab_intern(&kw->part_keys, key, kl, &id) < 0) {
		rc = -2;
	} else {
		if (id >= kw->parts_cap) {
			uint32_t cap = kw->parts_cap ? kw->parts_cap * 2 : KW_TAB_MIN;
			kw_part **grown = realloc(kw->parts, (size_t)cap * sizeof(*grown));
			if (grown) {
				memset(grown + kw->parts_cap, 0,
				       (size_t)(cap - kw->parts_cap) * sizeof(*grown));
				kw->parts = grown;
				kw->parts_cap = cap;
			}
		}
		if (id < kw->parts_cap)
			kw->parts[id] = pt;
		else
			rc = -2; /* the key stays, without a partition: as after a delete */
	}
	pthread_rwlock_unlock(&kw->parts_lock);
	return rc;
}

/* Nonzero if key is "app\1user" with two valid ids. */
static int key_ok(const char *key, uint32_t kl)
{
	const char *sep = memchr(key, KW_KEY_SEP, kl);
	size_t la, lu;

	if (!sep || has_nul(key, kl))
		return 0;
	la = (size_t)(sep - key);
	lu = kl - la - 1;
	return la >= 1 && la <= MEMD_ID_MAX && lu >= 1 && lu <= MEMD_ID_MAX &&
	       !memchr(sep + 1, KW_KEY_SEP, lu);
}

static int32_t restore_part(kw_index *kw, uint32_t n_terms, uint32_t index, const uint8_t *p,
			    size_t n, memd_error *err)
{
	char what[64];
	dec d = { p, n, 0 };
	kw_part *pt = part_new();
	const char *key;
	uint32_t kl, count;
	int32_t r;
	int rc;

	snprintf(what, sizeof(what), "partition %u", index);
	if (!pt)
		return memd_error_set(err, MEMD_ENOMEM, 0, "keyword snapshot: out of memory");
	if (dec_str(&d, &key, &kl) < 0 || !key_ok(key, kl)) {
		r = bad(err, what, "malformed key");
		goto fail;
	}
	/* Sessions are ids; authors are free text ("" when none). */
	if ((r = restore_strtab(&d, &pt->sessions, what, 1, MEMD_ID_MAX, err)) < 0 ||
	    (r = restore_strtab(&d, &pt->authors, what, 0, UINT32_MAX, err)) < 0)
		goto fail;
	if (dec_count(&d, KW_MIN_DOC, &count) < 0 || count >= UINT32_MAX - 1) {
		r = bad(err, what, "malformed document count");
		goto fail;
	}
	pt->cap_docs = count ? count : KW_DOCS_MIN;
	if (!(pt->docs = malloc((size_t)pt->cap_docs * sizeof(*pt->docs)))) {
		r = memd_error_set(err, MEMD_ENOMEM, 0, "keyword snapshot: out of memory");
		goto fail;
	}
	for (uint32_t i = 0; i < count; i++) {
		uint64_t ts, seq;
		kw_doc *doc = &pt->docs[i];
		if (dec_uv(&d, &ts) < 0 || dec_uv(&d, &seq) < 0 || dec_u32(&d, &doc->session) < 0 ||
		    dec_u32(&d, &doc->author) < 0 || dec_u32(&d, &doc->len) < 0 ||
		    dec_u32(&d, &doc->flags) < 0 || doc->session >= pt->sessions.n ||
		    doc->author >= pt->authors.n || doc->len == 0 || (doc->flags & ~KW_DOC_MEMORY)) {
			r = bad(err, what, "malformed document");
			goto fail;
		}
		doc->timestamp_us = unzigzag(ts);
		doc->seq = unzigzag(seq);
		pt->sum_len += doc->len;
		pt->n_docs++;
	}
	if (lk_reserve(pt, pt->n_docs, 0) < 0) {
		r = memd_error_set(err, MEMD_ENOMEM, 0, "keyword snapshot: out of memory");
		goto fail;
	}
	for (uint32_t i = 0; i < pt->n_docs; i++) {
		if (lk_find(pt, pt->docs[i].session, doc_key(&pt->docs[i])) != STRTAB_NONE) {
			r = bad(err, what, "a document twice");
			goto fail;
		}
		lk_put(pt->lk, pt->lk_cap, pt->docs, i);
	}
	if ((r = restore_lists(&d, pt, n_terms, what, err)) < 0)
		goto fail;
	if (d.pos != d.n) {
		r = bad(err, what, "bytes after the last postings list");
		goto fail;
	}
	rc = parts_put(kw, key, kl, pt);
	if (rc == 0)
		return 0;
	r = rc == -1 ? bad(err, what, "a second partition of the same user")
		     : memd_error_set(err, MEMD_ENOMEM, 0, "keyword snapshot: out of memory");
fail:
	part_free(pt);
	return r;
}

int32_t kw_restore(kw_index *kw, const kw_source *in, memd_error *err)
{
	const uint8_t *data;
	uint32_t kind, n_terms, index = 0;
	size_t len;
	int empty;
	int32_t r;

	pthread_rwlock_rdlock(&kw->terms_lock);
	pthread_rwlock_rdlock(&kw->parts_lock);
	empty = kw->terms.n == 0 && kw->part_keys.n == 0;
	pthread_rwlock_unlock(&kw->parts_lock);
	pthread_rwlock_unlock(&kw->terms_lock);
	if (!empty)
		return memd_error_set(err, MEMD_EINVAL, 0, "keyword snapshot: the index is not empty");
	r = in->next(in->userdata, &kind, &data, &len, err);
	if (r == 0 || (r > 0 && kind != KW_SECTION_TERMS)) {
		r = bad(err, "sections", "the terms do not come first");
		goto fail;
	}
	if (r < 0 || (r = restore_terms(kw, data, len, err)) < 0)
		goto fail;
	/* Terms only grow while partitions are read: their count is fixed. */
	n_terms = kw->terms.n;
	while ((r = in->next(in->userdata, &kind, &data, &len, err)) > 0) {
		if (kind != KW_SECTION_PARTITION) {
			r = bad(err, "sections", "unknown section");
			goto fail;
		}
		if ((r = restore_part(kw, n_terms, index++, data, len, err)) < 0)
			goto fail;
	}
	if (r == 0)
		return 0;
fail:
	kw_clear(kw);
	return r;
}

/* ---- analyzer fingerprint ------------------------------------------------------------- */

/* Exercises what the analyzer does: case folding (Latin, Greek, Cyrillic,
 * fullwidth, "ß"), diacritics, possessives and apostrophes, stop words
 * and the kept first-person pronouns, Porter stemming, CJK and kana
 * single tokens, numbers, invalid UTF-8, and a word over TEXT_TERM_MAX. */
static const char kw_probe[] =
	"The QUICK runners weren't running; I told my sister about John's "
	"caf\xc3\xa9 in Stra\xc3\x9f" "e. Na\xc3\xafve co-operation, generalizations, "
	"relational hopefulness, ponies and caresses. \xce\xa3\xce\x8a\xce\xa3\xce\xa5\xce\xa6"
	"\xce\x9f\xce\xa3 \xd0\x9c\xd0\xbe\xd1\x81\xd0\xba\xd0\xb2\xd0\xb0 \xe6\x9d\xb1\xe4\xba\xac"
	"\xe3\x82\xbf\xe3\x83\xaf\xe3\x83\xbc \xef\xbc\xa1\xef\xbc\xa2\xef\xbc\xa3 2024-05-01 "
	"v3.14 e-mail \xff\xfe broken "
	"pneumonoultramicroscopicsilicovolcanoconiosispneumonoultramicroscopicsilicovolcano "
	"myself me i am we you they";

/* Term separator in the fingerprint's hash input (terms hold no NUL). */
#define KW_PROBE_SEP '\0'

uint64_t kw_analyzer_fingerprint(void)
{
	term_list tl = { 0 };
	uint64_t h = 0;
	char *flat;

	text_terms(kw_probe, sizeof(kw_probe) - 1, KW_TEXT_FLAGS, collect_term, &tl);
	flat = tl.oom ? NULL : malloc(tl.len + tl.n + 1);
	if (flat) {
		size_t n = 0;
		for (size_t i = 0; i < tl.n; i++) {
			memcpy(flat + n, tl.bytes + tl.offs[i], tl.offs[i + 1] - tl.offs[i]);
			n += tl.offs[i + 1] - tl.offs[i];
			flat[n++] = KW_PROBE_SEP;
		}
		h = strtab_hash(flat, n) ^ ((uint64_t)KW_ANALYZER_VERSION << KW_HASH_SHIFT);
	}
	free(flat);
	term_list_clear(&tl);
	/* 0 (out of memory) matches no snapshot: the index is rebuilt. */
	return h;
}
