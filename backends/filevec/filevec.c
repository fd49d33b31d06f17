/* SPDX-License-Identifier: MIT */
/*
 * filevec: memd's embedded vector store (kind MEMD_KIND_VECTOR): a
 * directory of append-only segment files of checksummed records
 * (fv_format.h, fv_log.h), and an in-memory index (fv_index.h) that
 * answers exact top-k by inner product (fv_kernel.h).
 *
 * Loaded at start, not memory-mapped: open replays the segments once (each
 * is mapped read-only only while it is parsed) into per-(app, user)
 * partitions whose vectors are contiguous, 64-byte aligned and kept twice
 * (int8 codes for the scan, float32 for the exact rescoring). The log
 * interleaves users, holds replaced and removed records until compaction,
 * and stores floats unaligned, so mapping it would mean scanning a layout
 * made for appending rather than for querying, and each query's latency
 * would depend on the page cache; the price is memory for the live
 * vectors (about 1.25 x their float32 size) and a replay at open.
 *
 * Durability: an upsert, remove or remove_events returns after its
 * records are written and fdatasync()ed (config fsync: true, the
 * default); remove_events writes one event tombstone per vector it
 * removes, all in one append. Compaction runs in
 * the write that makes dead bytes exceed compact_ratio of the log (and
 * compact_min_bytes): it writes the live records to a new segment which
 * atomically supersedes the old ones.
 *
 * Threads (MEMD_PLUGIN_THREADSAFE): one mutex serializes writers (log
 * writes, index changes, compaction); a rwlock lets queries run while a
 * writer writes its log records or compacts, and excludes them only while
 * the index itself changes.
 */
#include <memd/plugin.h>

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fv_format.h"
#include "fv_index.h"
#include "fv_kernel.h"
#include "fv_log.h"
#include "plugin_util.h"

#define FV_PLUGIN_NAME "filevec"
#define FV_PLUGIN_VERSION "1.1.0"
#define FV_ABI_MINOR_NEEDED 0

#define FV_DEFAULT_FSYNC "true"
#define FV_DEFAULT_COMPACT_RATIO 0.5
#define FV_DEFAULT_COMPACT_MIN 1048576
#define FV_DEFAULT_SIMD "auto"
#define FV_STR(x) FV_STR2(x)
#define FV_STR2(x) #x
/* Vectors are L2-normalized by the host; this bound keeps every product
 * and sum far from float32 overflow. */
#define FV_NORM_MAX 1e9
#define US_PER_MS 1000
#define BYTES_PER_MB (1024.0 * 1024.0)
#define PERCENT 100.0

/* Is member m inside the struct_size the caller declared? */
#define FV_HAS(p, m) ((p)->struct_size >= offsetof(__typeof__(*(p)), m) + sizeof((p)->m))

typedef struct fv_store {
	const memd_host *host;
	pthread_mutex_t wlock;     /* writers */
	pthread_rwlock_t lock;     /* the index: queries read, commits write */
	fv_log *log;
	fv_index *ix;
	const fv_kernels *kern;
	double compact_ratio;
	uint64_t compact_min;
	uint64_t compact_retry;    /* after a failed compaction: wait for this much dead */
	float *replay_vec;         /* open only */
} fv_store;

/* ---- config ----------------------------------------------------------- */

static const memd_config_key key_path = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_STRING,
	.flags = MEMD_CONFIG_REQUIRED,
	.name = "path",
	.help = "directory of the store (created if missing; one instance at a time)",
};
static const memd_config_key key_fsync = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_BOOL,
	.name = "fsync",
	.default_value = FV_DEFAULT_FSYNC,
	.help = "fdatasync every write before it returns (an acknowledged upsert survives "
		"power loss); false: survives a crash of memd, not of the machine",
};
static const memd_config_key key_compact_ratio = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_DOUBLE,
	.name = "compact_ratio",
	.default_value = FV_STR(FV_DEFAULT_COMPACT_RATIO),
	.help = "compact when replaced/removed records exceed this fraction of the files (0..1)",
};
static const memd_config_key key_compact_min = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_INT,
	.name = "compact_min_bytes",
	.default_value = FV_STR(FV_DEFAULT_COMPACT_MIN),
	.help = "and only when they exceed this many bytes",
};
static const char *const simd_choices[] = { "auto", "avx2", "scalar", NULL };
static const memd_config_key key_simd = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_STRING,
	.name = "simd",
	.default_value = FV_DEFAULT_SIMD,
	.help = "dot-product kernels: auto (the best this CPU has), avx2 or scalar; "
		"every choice gives the same results",
	.choices = simd_choices, /* a 1.0 host ignores it: fv_init checks too */
};
static const memd_config_key *const config_keys[] = {
	&key_path, &key_fsync, &key_compact_ratio, &key_compact_min, &key_simd, NULL,
};

static int32_t cfg_error(memd_error *err, const char *key, const char *type)
{
	return memd_error_set(err, MEMD_EINVAL, 0, "filevec: %s must be %s", key, type);
}

typedef struct fv_config {
	const char *path;
	int32_t fsync;
	double compact_ratio;
	int64_t compact_min;
	const char *simd;
} fv_config;

static int32_t read_config(const memd_host *host, fv_config *c, memd_error *err)
{
	int32_t r;

	c->fsync = 1;
	c->compact_ratio = FV_DEFAULT_COMPACT_RATIO;
	c->compact_min = FV_DEFAULT_COMPACT_MIN;
	c->simd = FV_DEFAULT_SIMD;
	r = host->config_string ? host->config_string(host, "path", &c->path) : MEMD_ENOTFOUND;
	if (r == MEMD_ENOTFOUND || (r == 0 && (!c->path || !c->path[0])))
		return memd_error_set(err, MEMD_EINVAL, 0, "filevec: path (a directory) is required");
	if (r < 0)
		return cfg_error(err, "path", "a string");
	r = host->config_bool ? host->config_bool(host, "fsync", &c->fsync) : MEMD_ENOTFOUND;
	if (r < 0 && r != MEMD_ENOTFOUND)
		return cfg_error(err, "fsync", "true or false");
	r = host->config_double ? host->config_double(host, "compact_ratio", &c->compact_ratio)
				: MEMD_ENOTFOUND;
	if ((r < 0 && r != MEMD_ENOTFOUND) || !(c->compact_ratio > 0.0 && c->compact_ratio < 1.0))
		return cfg_error(err, "compact_ratio", "a number between 0 and 1 (exclusive)");
	r = host->config_int ? host->config_int(host, "compact_min_bytes", &c->compact_min)
			     : MEMD_ENOTFOUND;
	if ((r < 0 && r != MEMD_ENOTFOUND) || c->compact_min < 0)
		return cfg_error(err, "compact_min_bytes", "an integer >= 0");
	r = host->config_string ? host->config_string(host, "simd", &c->simd) : MEMD_ENOTFOUND;
	if (r < 0 && r != MEMD_ENOTFOUND)
		return cfg_error(err, "simd", "auto, avx2 or scalar");
	return 0;
}

static int32_t pick_kernels(const char *simd, const fv_kernels **ret, memd_error *err)
{
	if (strcmp(simd, "auto") == 0) {
		*ret = fv_kernels_best();
	} else if (strcmp(simd, "scalar") == 0) {
		*ret = fv_kernels_scalar();
	} else if (strcmp(simd, "avx2") == 0) {
		*ret = fv_kernels_avx2();
		if (!*ret)
			return memd_error_set(err, MEMD_EINVAL, 0,
					      "filevec: simd: avx2, but this CPU has no AVX2");
	} else {
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "filevec: simd must be auto, avx2 or scalar, not '%.32s'", simd);
	}
	return 0;
}

/* ---- input checks ----------------------------------------------------- */

/* An id: 1..MEMD_ID_MAX bytes. */
static int32_t check_id(const char *s, const char *what, uint32_t i, size_t *ret_len,
			memd_error *err)
{
	size_t len;

	if (!s || !s[0])
		return memd_error_set(err, MEMD_EINVAL, 0, "filevec: record %u: %s is missing",
				      (unsigned)i, what);
	len = strlen(s);
	if (len > MEMD_ID_MAX)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "filevec: record %u: %s is longer than %d bytes", (unsigned)i,
				      what, MEMD_ID_MAX);
	*ret_len = len;
	return 0;
}

/* dim finite floats with a norm <= FV_NORM_MAX. */
static int32_t check_vector(const float *v, uint32_t dim, const char *what, memd_error *err)
{
	double n2 = 0.0;

	if (!v)
		return memd_error_set(err, MEMD_EINVAL, 0, "filevec: %s has no vector", what);
	for (uint32_t j = 0; j < dim; j++) {
		if (!isfinite(v[j]))
			return memd_error_set(err, MEMD_EINVAL, 0,
					      "filevec: %s: component %u is not a finite number", what,
					      (unsigned)j);
		n2 += (double)v[j] * (double)v[j];
	}
	if (sqrt(n2) > FV_NORM_MAX)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "filevec: %s: vector norm %g is too large (the host normalizes "
				      "vectors)", what, sqrt(n2));
	return 0;
}

static int32_t check_dim(uint32_t dim, memd_error *err)
{
	if (dim == 0 || dim > FV_DIM_MAX)
		return memd_error_set(err, MEMD_EINVAL, 0, "filevec: dimension %u is not in 1..%u",
				      (unsigned)dim, FV_DIM_MAX);
	return 0;
}

/* records[i] into puts[i] (strings and vector borrowed). */
static int32_t make_put(const memd_vector_record *in, uint32_t i, fv_put *p, memd_error *err)
{
	memd_vector_record r;
	char what[32];
	int32_t rc;

	if (!in || !FV_HAS(in, vector))
		return memd_error_set(err, MEMD_EINVAL, 0, "filevec: record %u is missing or truncated",
				      (unsigned)i);
	memset(&r, 0, sizeof(r));
	memcpy(&r, in, in->struct_size < sizeof(r) ? in->struct_size : sizeof(r));
	memset(p, 0, sizeof(*p));
	p->rec.type = FV_REC_UPSERT;
	if ((rc = check_id(r.app, "app", i, &p->rec.app.len, err)) < 0 ||
	    (rc = check_id(r.user, "user", i, &p->rec.user.len, err)) < 0 ||
	    (rc = check_id(r.session, "session", i, &p->rec.session.len, err)) < 0 ||
	    (rc = check_id(r.event_id, "event_id", i, &p->rec.event_id.len, err)) < 0)
		return rc;
	p->rec.app.p = r.app;
	p->rec.user.p = r.user;
	p->rec.session.p = r.session;
	p->rec.event_id.p = r.event_id;
	if (r.author) {
		p->rec.has_author = 1;
		p->rec.author.p = r.author;
		p->rec.author.len = strlen(r.author);
		if (p->rec.author.len > FV_AUTHOR_MAX)
			return memd_error_set(err, MEMD_EINVAL, 0,
					      "filevec: record %u: author is longer than %u bytes",
					      (unsigned)i, FV_AUTHOR_MAX);
	}
	if ((rc = check_dim(r.dim, err)) < 0)
		return rc;
	snprintf(what, sizeof(what), "record %u", (unsigned)i);
	if ((rc = check_vector(r.vector, r.dim, what, err)) < 0)
		return rc;
	p->rec.dim = r.dim;
	p->rec.seq = r.seq;
	p->rec.timestamp_us = r.timestamp_us;
	p->vector = r.vector;
	p->rec_bytes = (uint32_t)fv_rec_size(&p->rec);
	return 0;
}

/* ---- writes ----------------------------------------------------------- */

typedef struct fv_compaction {
	fv_log_writer *w;
	memd_error *err;
} fv_compaction;

static int32_t compact_add(void *userdata, const fv_rec *rec, const float *vector,
			   uint32_t rec_bytes)
{
	fv_compaction *c = userdata;

	(void)rec_bytes;
	return fv_log_compact_add(c->w, rec, vector, c->err);
}

/* With wlock held: compact when dead bytes call for it. A failure is
 * logged, never returned: the write that triggered it has succeeded. */
static void maybe_compact(fv_store *st)
{
	uint64_t total = fv_log_bytes(st->log), live = fv_index_live_bytes(st->ix);
	uint64_t dead = total > live ? total - live : 0;
	int64_t t0 = st->host->monotonic_us ? st->host->monotonic_us(st->host) : 0;
	memd_error err = { .struct_size = sizeof(err) };
	fv_log_writer *w = NULL;
	int32_t r;

	if (!fv_index_dim(st->ix) || dead < st->compact_min ||
	    (double)dead <= st->compact_ratio * (double)total || dead < st->compact_retry)
		return;
	r = fv_log_compact_begin(st->log, &w, &err);
	/* Writers hold wlock, so the index cannot change under foreach. */
	if (r == 0) {
		fv_compaction c = { .w = w, .err = &err };
		r = fv_index_foreach(st->ix, compact_add, &c);
		if (r < 0) {
			fv_log_compact_abort(st->log, w);
		} else {
			r = fv_log_compact_commit(st->log, w, &err);
		}
	}
	if (r < 0) {
		st->compact_retry = dead * 2;
		if (st->host->log)
			st->host->log(st->host, MEMD_LOG_WARN, "compaction failed (retried when dead "
				      "bytes double): %s", err.msg);
		return;
	}
	st->compact_retry = 0;
	if (st->host->log)
		st->host->log(st->host, MEMD_LOG_DEBUG,
			      "compacted %llu bytes to %llu in %lld ms", (unsigned long long)total,
			      (unsigned long long)fv_log_bytes(st->log),
			      (long long)((st->host->monotonic_us ? st->host->monotonic_us(st->host)
								  : 0) - t0) / US_PER_MS);
}

/* With wlock held: give the store its dimension if it has none. */
static int32_t fix_dim(fv_store *st, uint32_t dim, memd_error *err)
{
	int32_t r;

	if (fv_index_dim(st->ix))
		return 0;
	r = fv_log_set_dim(st->log, dim, err);
	if (r < 0)
		return r;
	pthread_rwlock_wrlock(&st->lock);
	fv_index_set_dim(st->ix, dim);
	pthread_rwlock_unlock(&st->lock);
	return 0;
}

static int32_t fv_op_upsert(void *inst, const memd_call *call,
			 const memd_vector_record *const *records, uint32_t n, memd_error *err)
{
	fv_store *st = inst;
	fv_put *puts = NULL;
	unsigned char *buf = NULL;
	size_t total = 0, off = 0;
	uint32_t sdim;
	int32_t r;

	if (n == 0)
		return 0;
	if (!records)
		return memd_error_set(err, MEMD_EINVAL, 0, "filevec: no records");
	r = pu_call_check(call, st->host->monotonic_us ? st->host->monotonic_us(st->host) : 0, err);
	if (r < 0)
		return r;
	puts = calloc(n, sizeof(*puts));
	if (!puts)
		return memd_error_set(err, MEMD_ENOMEM, 0, "filevec: out of memory");
	for (uint32_t i = 0; i < n; i++) {
		r = make_put(records[i], i, &puts[i], err);
		if (r < 0)
			goto out;
		if (puts[i].rec.dim != puts[0].rec.dim) {
			r = memd_error_set(err, MEMD_EINVAL, 0,
					   "filevec: record %u has %u dimensions, record 0 has %u",
					   (unsigned)i, (unsigned)puts[i].rec.dim,
					   (unsigned)puts[0].rec.dim);
			goto out;
		}
		total += puts[i].rec_bytes;
	}
	buf = malloc(total);
	if (!buf) {
		r = memd_error_set(err, MEMD_ENOMEM, 0, "filevec: out of memory for %zu bytes", total);
		goto out;
	}
	for (uint32_t i = 0; i < n; i++)
		off += fv_rec_encode(&puts[i].rec, puts[i].vector, buf + off);

	pthread_mutex_lock(&st->wlock);
	sdim = fv_index_dim(st->ix);
	if (sdim && sdim != puts[0].rec.dim) {
		r = memd_error_set(err, MEMD_EINVAL, 0,
				   "filevec: vectors have %u dimensions, the store holds %u",
				   (unsigned)puts[0].rec.dim, (unsigned)sdim);
		goto unlock;
	}
	r = fix_dim(st, puts[0].rec.dim, err);
	if (r < 0)
		goto unlock;
	pthread_rwlock_wrlock(&st->lock);
	r = fv_index_reserve(st->ix, puts, n, err);
	pthread_rwlock_unlock(&st->lock);
	if (r < 0)
		goto unlock;
	r = fv_log_append(st->log, buf, total, err);
	pthread_rwlock_wrlock(&st->lock);
	if (r == 0)
		fv_index_commit(st->ix, puts, n);
	else
		fv_index_release(st->ix, puts, n);
	pthread_rwlock_unlock(&st->lock);
	if (r == 0)
		maybe_compact(st);
unlock:
	pthread_mutex_unlock(&st->wlock);
out:
	free(buf);
	free(puts);
	return r;
}

/* The filter copied into *ret (zeroed past what the caller knew). */
static int32_t copy_filter(const memd_vector_filter *f, memd_vector_filter *ret,
			   memd_error *err)
{
	if (!f || !FV_HAS(f, user))
		return memd_error_set(err, MEMD_EINVAL, 0, "filevec: no filter");
	memset(ret, 0, sizeof(*ret));
	memcpy(ret, f, f->struct_size < sizeof(*ret) ? f->struct_size : sizeof(*ret));
	if (!ret->app || !ret->app[0] || !ret->user || !ret->user[0])
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "filevec: a filter needs app and user (queries are scoped)");
	if (strlen(ret->app) > MEMD_ID_MAX || strlen(ret->user) > MEMD_ID_MAX ||
	    (ret->session && strlen(ret->session) > MEMD_ID_MAX))
		return memd_error_set(err, MEMD_EINVAL, 0, "filevec: an id in the filter is longer "
				      "than %d bytes", MEMD_ID_MAX);
	if (ret->session && !ret->session[0])
		return memd_error_set(err, MEMD_EINVAL, 0, "filevec: the filter's session is empty");
	if (ret->n_authors && !ret->authors)
		return memd_error_set(err, MEMD_EINVAL, 0, "filevec: n_authors without authors");
	for (uint32_t i = 0; i < ret->n_authors; i++)
		if (!ret->authors[i])
			return memd_error_set(err, MEMD_EINVAL, 0, "filevec: author %u is NULL",
					      (unsigned)i);
	return 0;
}

static int32_t fv_op_remove(void *inst, const memd_call *call, const memd_vector_filter *f,
			 memd_error *err)
{
	fv_store *st = inst;
	memd_vector_filter vf;
	fv_rec tomb = { .type = FV_REC_TOMBSTONE };
	fv_str session;
	unsigned char *buf;
	size_t sz;
	int32_t r = copy_filter(f, &vf, err);

	if (r < 0)
		return r;
	if (vf.n_authors || vf.after_us || vf.before_us)
		return memd_error_set(err, MEMD_EINVAL, 0, "filevec: remove takes app, user and "
				      "optionally session; authors and time bounds are not supported");
	r = pu_call_check(call, st->host->monotonic_us ? st->host->monotonic_us(st->host) : 0, err);
	if (r < 0)
		return r;
	tomb.app = (fv_str){ vf.app, strlen(vf.app) };
	tomb.user = (fv_str){ vf.user, strlen(vf.user) };
	if (vf.session) {
		tomb.has_session = 1;
		tomb.session = (fv_str){ vf.session, strlen(vf.session) };
	}
	session = tomb.session;
	sz = fv_rec_size(&tomb);
	buf = malloc(sz);
	if (!buf)
		return memd_error_set(err, MEMD_ENOMEM, 0, "filevec: out of memory");
	fv_rec_encode(&tomb, NULL, buf);

	pthread_mutex_lock(&st->wlock);
	/* Only writers change the index, and this is the writer. */
	if (fv_index_matching(st->ix, &tomb.app, &tomb.user, vf.session ? &session : NULL)) {
		r = fv_log_append(st->log, buf, sz, err);
		if (r == 0) {
			pthread_rwlock_wrlock(&st->lock);
			fv_index_remove(st->ix, &tomb.app, &tomb.user, vf.session ? &session : NULL);
			pthread_rwlock_unlock(&st->lock);
			maybe_compact(st);
		}
	}
	pthread_mutex_unlock(&st->wlock);
	free(buf);
	return r;
}

/* An id of the scope given to remove_events: 1..MEMD_ID_MAX bytes. */
static int32_t check_scope_id(const char *s, const char *what, fv_str *ret, memd_error *err)
{
	size_t len = s ? strlen(s) : 0;

	if (!len || len > MEMD_ID_MAX)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "filevec: remove_events: the scope's %s must be 1..%d bytes", what,
				      MEMD_ID_MAX);
	*ret = (fv_str){ s, len };
	return 0;
}

/* One event tombstone per id whose vector is there, written (and synced)
 * in one append, then removed from the index. */
static int32_t fv_op_remove_events(void *inst, const memd_call *call, const memd_scope *scope,
				   const char *const *event_ids, uint32_t n, memd_error *err)
{
	fv_store *st = inst;
	fv_rec *tombs = NULL;
	unsigned char *buf = NULL;
	size_t total = 0, off = 0;
	uint32_t live = 0;
	int32_t r;

	if (!scope || scope->struct_size < offsetof(memd_scope, session) + sizeof(scope->session))
		return memd_error_set(err, MEMD_EINVAL, 0, "filevec: remove_events: no scope");
	if (n == 0)
		return 0;
	if (!event_ids)
		return memd_error_set(err, MEMD_EINVAL, 0, "filevec: remove_events: no event ids");
	r = pu_call_check(call, st->host->monotonic_us ? st->host->monotonic_us(st->host) : 0, err);
	if (r < 0)
		return r;
	tombs = calloc(n, sizeof(*tombs));
	if (!tombs)
		return memd_error_set(err, MEMD_ENOMEM, 0, "filevec: out of memory");
	for (uint32_t i = 0; i < n; i++) {
		size_t len;
		tombs[i].type = FV_REC_EVENT_TOMBSTONE;
		if ((r = check_scope_id(scope->app, "app", &tombs[i].app, err)) < 0 ||
		    (r = check_scope_id(scope->user, "user", &tombs[i].user, err)) < 0 ||
		    (r = check_scope_id(scope->session, "session", &tombs[i].session, err)) < 0 ||
		    (r = check_id(event_ids[i], "event_id", i, &len, err)) < 0)
			goto out;
		tombs[i].has_session = 1;
		tombs[i].event_id = (fv_str){ event_ids[i], len };
	}

	pthread_mutex_lock(&st->wlock);
	/* Only writers change the index, and this is the writer: write
	 * tombstones for the vectors that are there (the others are ignored). */
	for (uint32_t i = 0; i < n; i++) {
		if (!fv_index_has_event(st->ix, &tombs[i].app, &tombs[i].user, &tombs[i].session,
					&tombs[i].event_id))
			continue;
		tombs[live++] = tombs[i];
		total += fv_rec_size(&tombs[i]);
	}
	if (live && !(buf = malloc(total)))
		r = memd_error_set(err, MEMD_ENOMEM, 0, "filevec: out of memory for %zu bytes", total);
	if (live && buf) {
		for (uint32_t i = 0; i < live; i++)
			off += fv_rec_encode(&tombs[i], NULL, buf + off);
		r = fv_log_append(st->log, buf, total, err);
		if (r == 0) {
			pthread_rwlock_wrlock(&st->lock);
			for (uint32_t i = 0; i < live; i++)
				fv_index_remove_event(st->ix, &tombs[i].app, &tombs[i].user,
						      &tombs[i].session, &tombs[i].event_id);
			pthread_rwlock_unlock(&st->lock);
			maybe_compact(st);
		}
	}
	pthread_mutex_unlock(&st->wlock);
out:
	free(buf);
	free(tombs);
	return r;
}

/* ---- queries ---------------------------------------------------------- */

static int32_t fv_op_query(void *inst, const memd_call *call, const float *vector, uint32_t dim,
			const memd_vector_filter *f, uint32_t k, const memd_vector_hit_sink *out,
			memd_error *err)
{
	fv_store *st = inst;
	memd_vector_filter vf;
	fv_filter ff;
	uint64_t examined = 0;
	uint32_t sdim;
	int32_t r = copy_filter(f, &vf, err);

	if (r < 0)
		return r;
	if (!out || !FV_HAS(out, hit) || !out->hit)
		return memd_error_set(err, MEMD_EINVAL, 0, "filevec: no hit sink");
	if ((r = check_dim(dim, err)) < 0 || (r = check_vector(vector, dim, "query", err)) < 0)
		return r;
	r = pu_call_check(call, st->host->monotonic_us ? st->host->monotonic_us(st->host) : 0, err);
	if (r < 0)
		return r;
	ff = (fv_filter){
		.app = { vf.app, strlen(vf.app) },
		.user = { vf.user, strlen(vf.user) },
		.session = vf.session,
		.authors = vf.authors,
		.n_authors = vf.n_authors,
		.after_us = vf.after_us,
		.before_us = vf.before_us,
	};
	pthread_rwlock_rdlock(&st->lock);
	sdim = fv_index_dim(st->ix);
	if (sdim && sdim != dim)
		r = memd_error_set(err, MEMD_EINVAL, 0,
				   "filevec: the query has %u dimensions, the store holds %u",
				   (unsigned)dim, (unsigned)sdim);
	else if (sdim)
		r = fv_index_query(st->ix, st->kern, call, st->host, vector, &ff, k, out, &examined,
				   err);
	pthread_rwlock_unlock(&st->lock);
	pu_rows_read(call, examined);
	if (r > 0) /* a sink that stopped with a positive value */
		r = memd_error_set(err, MEMD_EINTERNAL, 0, "filevec: the hit sink returned %d",
				   (int)r);
	return r;
}

static int32_t fv_op_ping(void *inst, const memd_call *call, memd_error *err)
{
	fv_store *st = inst;

	(void)call;
	return fv_log_ping(st->log, err);
}

static int32_t fv_op_prepare(void *inst, const memd_call *call, uint32_t dim, memd_error *err)
{
	fv_store *st = inst;
	uint32_t sdim;
	int32_t r = check_dim(dim, err);

	(void)call;
	if (r < 0)
		return r;
	pthread_mutex_lock(&st->wlock);
	sdim = fv_index_dim(st->ix);
	if (sdim && sdim != dim)
		r = memd_error_set(err, MEMD_ECONFLICT, 0,
				   "filevec: the store holds %u-dimensional vectors and the embedder "
				   "makes %u: give the vector store a new path (the index is rebuilt "
				   "from the sessions) or remove the old directory",
				   (unsigned)sdim, (unsigned)dim);
	else
		r = fix_dim(st, dim, err);
	pthread_mutex_unlock(&st->wlock);
	return r;
}

/* ---- open/close ------------------------------------------------------- */

static int32_t replay_apply(void *userdata, const fv_rec *rec, uint32_t rec_bytes,
			    memd_error *err)
{
	fv_store *st = userdata;
	fv_put put = { .rec = *rec, .rec_bytes = rec_bytes };
	int32_t r;

	if (rec->type == FV_REC_TOMBSTONE) {
		fv_index_remove(st->ix, &rec->app, &rec->user, rec->has_session ? &rec->session : NULL);
		return 0;
	}
	if (rec->type == FV_REC_EVENT_TOMBSTONE) {
		fv_index_remove_event(st->ix, &rec->app, &rec->user, &rec->session, &rec->event_id);
		return 0;
	}
	fv_rec_vector(rec, st->replay_vec);
	put.vector = st->replay_vec;
	r = fv_index_reserve(st->ix, &put, 1, err);
	if (r == 0)
		fv_index_commit(st->ix, &put, 1);
	return r;
}

static void fv_fini(void *instance)
{
	fv_store *st = instance;

	if (!st)
		return;
	fv_log_close(st->log);
	fv_index_free(st->ix);
	free(st->replay_vec);
	pthread_rwlock_destroy(&st->lock);
	pthread_mutex_destroy(&st->wlock);
	free(st);
}

static void log_opened(const fv_store *st, const char *path, int64_t t0)
{
	uint64_t total = fv_log_bytes(st->log), live = fv_index_live_bytes(st->ix);
	int64_t t1 = st->host->monotonic_us ? st->host->monotonic_us(st->host) : t0;

	if (!st->host->log)
		return;
	st->host->log(st->host, MEMD_LOG_INFO,
		      "opened %s: %llu vectors of dimension %u, %.1f MB of records (%.0f%% dead), "
		      "%s kernels, loaded in %lld ms", path, (unsigned long long)fv_index_count(st->ix),
		      (unsigned)fv_index_dim(st->ix), (double)total / BYTES_PER_MB,
		      total ? PERCENT * (double)(total - (live < total ? live : total)) / (double)total
			    : 0.0,
		      st->kern->name, (long long)(t1 - t0) / US_PER_MS);
}

static int32_t fv_init(const memd_host *host, void **ret_instance, memd_error *err)
{
	fv_config c;
	fv_log_opts lo = { 0 };
	fv_store *st;
	int64_t t0;
	int32_t r;

	if (!host)
		return memd_error_set(err, MEMD_EINVAL, 0, "filevec: no host");
	r = read_config(host, &c, err);
	if (r < 0)
		return r;
	st = calloc(1, sizeof(*st));
	if (!st)
		return memd_error_set(err, MEMD_ENOMEM, 0, "filevec: out of memory");
	st->host = host;
	st->compact_ratio = c.compact_ratio;
	st->compact_min = (uint64_t)c.compact_min;
	pthread_mutex_init(&st->wlock, NULL);
	pthread_rwlock_init(&st->lock, NULL);
	t0 = host->monotonic_us ? host->monotonic_us(host) : 0;
	r = pick_kernels(c.simd, &st->kern, err);
	if (r < 0)
		goto fail;
	st->ix = fv_index_new();
	if (!st->ix) {
		r = memd_error_set(err, MEMD_ENOMEM, 0, "filevec: out of memory");
		goto fail;
	}
	lo.path = c.path;
	lo.fsync = c.fsync;
	lo.host = host;
	r = fv_log_open(&lo, &st->log, err);
	if (r < 0)
		goto fail;
	if (fv_log_dim(st->log)) {
		fv_index_set_dim(st->ix, fv_log_dim(st->log));
		st->replay_vec = malloc((size_t)fv_log_dim(st->log) * sizeof(float));
		if (!st->replay_vec) {
			r = memd_error_set(err, MEMD_ENOMEM, 0, "filevec: out of memory");
			goto fail;
		}
	}
	r = fv_log_replay(st->log, replay_apply, st, err);
	if (r < 0)
		goto fail;
	free(st->replay_vec);
	st->replay_vec = NULL;
	log_opened(st, c.path, t0);
	*ret_instance = st;
	return 0;
fail:
	fv_fini(st);
	return r;
}

/* ---- descriptor ------------------------------------------------------- */

static const memd_vector_ops vector_ops = {
	.struct_size = sizeof(memd_vector_ops),
	.upsert = fv_op_upsert,
	.remove = fv_op_remove,
	.query = fv_op_query,
	.ping = fv_op_ping,
	.prepare = fv_op_prepare,
	.remove_events = fv_op_remove_events,
};

static const memd_plugin descriptor = {
	.struct_size = sizeof(memd_plugin),
	.abi_major = MEMD_ABI_MAJOR,
	.abi_minor = FV_ABI_MINOR_NEEDED,
	.kind = MEMD_KIND_VECTOR,
	.flags = MEMD_PLUGIN_THREADSAFE,
	.name = FV_PLUGIN_NAME,
	.version = FV_PLUGIN_VERSION,
	.description = "embedded file-based vector store: crash-safe append-only segments, "
		       "exact top-k with SIMD",
	.config_keys = config_keys,
	.init = fv_init,
	.fini = fv_fini,
	.vector = &vector_ops,
};

MEMD_PLUGIN_EXPORT const memd_plugin *memd_plugin_entry_v1(void)
{
	return &descriptor;
}
