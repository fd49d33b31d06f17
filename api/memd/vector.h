/* SPDX-License-Identifier: MIT */
/*
 * memd plugin ABI, version 1: vector stores (kind MEMD_KIND_VECTOR) and
 * embedders (kind MEMD_KIND_EMBEDDER).
 *
 * A vector store keeps one float32 vector per event, with the event's scope
 * as payload, and answers exact or approximate top-k by inner product (the
 * host L2-normalizes, so this is cosine similarity). It is always derived
 * data: the host can rebuild it from the session store at any time.
 */
#ifndef MEMD_VECTOR_H
#define MEMD_VECTOR_H

#include "abi.h"
#include "host.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct memd_vector_record {
	uint32_t struct_size;            /* since 1.0 */
	uint32_t dim;                    /* since 1.0 */
	const char *app;                 /* since 1.0 */
	const char *user;                /* since 1.0 */
	const char *session;             /* since 1.0 */
	const char *event_id;            /* since 1.0 */
	const char *author;              /* since 1.0 */
	int64_t seq;                     /* since 1.0 */
	int64_t timestamp_us;            /* since 1.0 */
	const float *vector;             /* since 1.0: dim floats */
} memd_vector_record;

/* Scope filter: app and user are mandatory; the rest narrow further. */
typedef struct memd_vector_filter {
	uint32_t struct_size;            /* since 1.0 */
	uint32_t n_authors;              /* since 1.0 */
	const char *app;                 /* since 1.0 */
	const char *user;                /* since 1.0 */
	const char *session;             /* since 1.0: NULL = every session */
	const char *const *authors;      /* since 1.0: n_authors; NULL = any */
	int64_t after_us;                /* since 1.0: timestamp > after; 0 = none */
	int64_t before_us;               /* since 1.0: timestamp < before; 0 = none */
} memd_vector_filter;

typedef struct memd_vector_hit {
	uint32_t struct_size;            /* since 1.0 */
	float score;                     /* since 1.0 */
	const char *app;                 /* since 1.0 */
	const char *user;                /* since 1.0 */
	const char *session;             /* since 1.0 */
	const char *event_id;            /* since 1.0 */
	const char *author;              /* since 1.0 */
	int64_t seq;                     /* since 1.0 */
	int64_t timestamp_us;            /* since 1.0 */
} memd_vector_hit;

typedef struct memd_vector_hit_sink {
	uint32_t struct_size;            /* since 1.0 */
	void *userdata;                  /* since 1.0 */
	int32_t (*hit)(void *userdata, const memd_vector_hit *h); /* since 1.0 */
} memd_vector_hit_sink;

/* Required: upsert, remove, query. */
typedef struct memd_vector_ops {
	uint32_t struct_size;            /* since 1.0 */
	uint32_t reserved;               /* since 1.0 */
	/* since 1.0: insert or replace by (app, user, session, event_id);
	 * durable when it returns 0. */
	int32_t (*upsert)(void *inst, const memd_call *call,
			  const memd_vector_record *const *records, uint32_t n,
			  memd_error *err);
	/* since 1.0: remove every record matching (app, user[, session]). */
	int32_t (*remove)(void *inst, const memd_call *call, const memd_vector_filter *f,
			  memd_error *err);
	/* since 1.0: the k best matches of f, best first. */
	int32_t (*query)(void *inst, const memd_call *call, const float *vector, uint32_t dim,
			 const memd_vector_filter *f, uint32_t k,
			 const memd_vector_hit_sink *out, memd_error *err);
	/* since 1.0, optional: for /readyz. */
	int32_t (*ping)(void *inst, const memd_call *call, memd_error *err);
	/* since 1.0, optional: called once after init and before any other op
	 * with the dimension of every vector the host will store (the
	 * embedder's). Create collections or files here; fail with
	 * MEMD_ECONFLICT if the data already stored has another dimension. */
	int32_t (*prepare)(void *inst, const memd_call *call, uint32_t dim, memd_error *err);
	/* since 1.2: remove the records of these events of one session
	 * (scope app, user, session); ids without a record are ignored. */
	int32_t (*remove_events)(void *inst, const memd_call *call, const memd_scope *scope,
				 const char *const *event_ids, uint32_t n, memd_error *err);
} memd_vector_ops;

/* Required: dimension, embed. */
typedef struct memd_embedder_ops {
	uint32_t struct_size;            /* since 1.0 */
	uint32_t reserved;               /* since 1.0 */
	/* since 1.0: the vector size this instance produces. */
	int32_t (*dimension)(void *inst, uint32_t *ret_dim, memd_error *err);
	/* since 1.0: embed n texts into ret_vectors (caller-owned, n * dim
	 * floats, L2-normalized). */
	int32_t (*embed)(void *inst, const memd_call *call, const char *const *texts, uint32_t n,
			 float *ret_vectors, memd_error *err);
} memd_embedder_ops;

#ifdef __cplusplus
}
#endif
#endif /* MEMD_VECTOR_H */
