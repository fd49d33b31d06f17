/* SPDX-License-Identifier: MIT */
/*
 * fv_index: filevec's in-memory index (not thread-safe: filevec.c locks).
 *
 * The vectors are partitioned by (app, user): a query scores only its
 * user's partition, so its cost never depends on other users' data, and
 * no query can return another user's vector. A partition keeps its
 * vectors in contiguous arrays (64-byte aligned): the int8 codes that are
 * scanned, the float32 values that are rescored, the bounds (fv_qmeta),
 * and per-vector metadata (event id, interned session and author ids,
 * seq, timestamp). A hash table finds a vector by (session, event id);
 * removal moves the last vector into the hole, so the arrays stay dense.
 *
 * Writes are two-phase so that the log write in between is the only thing
 * that can fail: fv_index_reserve() does every allocation (a partition,
 * interned strings, array capacity, the event id copy), then the caller
 * writes the log, then fv_index_commit() (which cannot fail) or
 * fv_index_release() (which undoes the reservation).
 */
#ifndef MEMD_FV_INDEX_H
#define MEMD_FV_INDEX_H

#include <memd/plugin.h>

#include "fv_format.h"
#include "fv_kernel.h"

typedef struct fv_index fv_index;
struct fv_part;

/* NULL on ENOMEM. The dimension is set later (fv_index_set_dim). */
fv_index *fv_index_new(void);
/* Accepts NULL. */
void fv_index_free(fv_index *ix);

/* The dimension (0 until set). */
uint32_t fv_index_dim(const fv_index *ix);
/* Set the dimension (1..FV_DIM_MAX) of an index that has none yet. */
void fv_index_set_dim(fv_index *ix, uint32_t dim);
/* Encoded bytes of every live record (what a compaction would write). */
uint64_t fv_index_live_bytes(const fv_index *ix);
/* Number of live vectors. */
uint64_t fv_index_count(const fv_index *ix);

/* One upsert. The caller fills rec (type FV_REC_UPSERT, dim equal to the
 * index's), vector and rec_bytes (fv_rec_size(&rec)); reserve fills the
 * rest. rec's strings and vector are borrowed until commit/release. */
typedef struct fv_put {
	fv_rec rec;
	const float *vector;
	uint32_t rec_bytes;
	struct fv_part *part;  /* reserved */
	uint32_t session_ix;   /* reserved */
	uint32_t author_ix;    /* reserved */
	char *event_id;        /* reserved copy, owned until commit/release */
} fv_put;

/* Do every allocation commit will need for puts[0..n). MEMD_ENOMEM (with
 * err) undoes what it did. */
int32_t fv_index_reserve(fv_index *ix, fv_put *puts, size_t n, memd_error *err);
/* Apply puts in order (a later put of the same key replaces an earlier
 * one). Cannot fail; takes the reserved copies. */
void fv_index_commit(fv_index *ix, fv_put *puts, size_t n);
/* Undo a reservation that will not be committed. */
void fv_index_release(fv_index *ix, fv_put *puts, size_t n);

/* Number of vectors of (app, user[, session]) (session NULL: the user). */
uint64_t fv_index_matching(const fv_index *ix, const fv_str *app, const fv_str *user,
			   const fv_str *session);
/* Remove every vector of (app, user[, session]). Cannot fail. */
void fv_index_remove(fv_index *ix, const fv_str *app, const fv_str *user, const fv_str *session);
/* Nonzero if the vector of (app, user, session, event id) is there. */
int fv_index_has_event(const fv_index *ix, const fv_str *app, const fv_str *user,
		       const fv_str *session, const fv_str *event_id);
/* Remove the vector of (app, user, session, event id), if there. Cannot
 * fail. */
void fv_index_remove_event(fv_index *ix, const fv_str *app, const fv_str *user,
			   const fv_str *session, const fv_str *event_id);

/* A query's scope and filters (app and user required). */
typedef struct fv_filter {
	fv_str app, user;
	const char *session;          /* NULL: every session */
	const char *const *authors;   /* n_authors; NULL when n_authors is 0 */
	uint32_t n_authors;
	int64_t after_us, before_us;  /* 0: no bound */
} fv_filter;

/* The k best vectors of f by float32 inner product with query (dim
 * floats, the index's dimension, finite), best first (equal scores: by
 * session, then event id), delivered to out with strings that live until
 * the index changes. Checks call's deadline and cancel flag (clock: host's
 * monotonic_us) as it scans. Adds the number of stored vectors it
 * examined to *ret_examined. Returns 0, MEMD_ENOMEM, MEMD_ETIMEDOUT,
 * MEMD_ECANCELED or the sink's nonzero result. */
int32_t fv_index_query(const fv_index *ix, const fv_kernels *kern, const memd_call *call,
		       const memd_host *host, const float *query, const fv_filter *f, uint32_t k,
		       const memd_vector_hit_sink *out, uint64_t *ret_examined, memd_error *err);

/* Call fn for every live vector (rec as fv_rec_encode wants it, vector,
 * its encoded size) until fn returns nonzero, which is returned. */
typedef int32_t (*fv_index_fn)(void *userdata, const fv_rec *rec, const float *vector,
			       uint32_t rec_bytes);
int32_t fv_index_foreach(const fv_index *ix, fv_index_fn fn, void *userdata);

#endif
