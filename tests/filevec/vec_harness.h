/* SPDX-License-Identifier: MIT */
/*
 * vec_harness: what the vector-store tests need around one vector-store
 * plugin instance, created exactly as the host creates it (host/plugins/loader.h
 * + host/config/config.h), plus a hit sink that copies what it receives.
 *
 * Environment (for vec_open()):
 *   MEMD_VECTOR_PLUGIN   plugin name (e.g. filevec); required
 *   MEMD_VECTOR_CONFIG   YAML map for the instance; "@TMPDIR@" is replaced
 *                        by a fresh directory per test and "@TESTID@" by a
 *                        token unique to the test ([a-z0-9_], e.g. for a
 *                        collection name). Default "{plugin: <name>}".
 *   MEMD_VECTOR_DURABLE  "1" if data must survive closing and reopening
 *                        the instance on the same config
 *   MEMD_VECTOR_EXACT    "1" if query must return the exact top-k
 *   MEMD_VECTOR_REMOVE_EVENTS "1" if the plugin must have remove_events
 *                        (test_vector.c fails instead of skipping)
 *   MEMD_PLUGIN_PATH     ':'-separated plugin directories
 *
 * Helpers that fail an expectation fail the running Criterion test; the op
 * wrappers return the op's code and leave the message in vs->err.
 */
#ifndef MEMD_TESTS_VEC_HARNESS_H
#define MEMD_TESTS_VEC_HARNESS_H

#include <memd/plugin.h>

#include "config/config.h"
#include "plugins/loader.h"

typedef struct vec_store {
	loader_plugin *plugin;
	loader_instance *inst;   /* NULL while closed (vec_try_reopen failed) */
	config_node *cfg;
	const memd_vector_ops *ops;
	void *h;                 /* loader_instance_handle() */
	char *tmpdir;            /* removed by vec_close */
	char *config_text;       /* after substitution */
	int durable;             /* MEMD_VECTOR_DURABLE=1 */
	int exact;               /* MEMD_VECTOR_EXACT=1 */
	int threadsafe;          /* MEMD_PLUGIN_THREADSAFE */
	memd_error err;          /* of the last wrapped op */
	uint64_t rows_read;      /* every wrapped op adds to this */
	const volatile int32_t *cancel; /* put into every call (NULL: none) */
} vec_store;

/* The plugin and config from the environment; fails the test on error. */
vec_store *vec_open(void);
/* A given plugin and config template (same substitutions); durable and
 * exact as given. */
vec_store *vec_open_with(const char *plugin, const char *config_template, int durable,
			 int exact);
/* Destroy the instance and remove the temp dir; accepts NULL. */
void vec_close(vec_store *vs);
/* Destroy and recreate the instance on the same config; fails the test
 * if the new one cannot be created. */
void vec_reopen(vec_store *vs);
/* Destroy the instance (vs->inst becomes NULL) and create it again:
 * returns the code (message in *err); the instance stays closed on
 * failure. */
int32_t vec_try_reopen(vec_store *vs, memd_error *err);
/* Destroy the instance only (files stay); vec_try_reopen/vec_reopen make
 * it again. */
void vec_shut(vec_store *vs);
/* Create a second instance on vs's config: its code (message in *err);
 * on success *ret is it (destroy with loader_instance_destroy). */
int32_t vec_second_instance(vec_store *vs, loader_instance **ret, memd_error *err);
/* A second instance with another config template (same @TMPDIR@). */
int32_t vec_instance_with(vec_store *vs, const char *config_template, loader_instance **ret,
			  config_node **ret_cfg, memd_error *err);

/* A call context whose rows_read adds to vs->rows_read. */
memd_call vec_call(vec_store *vs);

/* ---- records, filters, hits ------------------------------------------- */

memd_vector_record vec_record(const char *app, const char *user, const char *session,
			      const char *event_id, const char *author, int64_t seq,
			      int64_t timestamp_us, const float *v, uint32_t dim);
memd_vector_filter vec_filter(const char *app, const char *user);

typedef struct vec_hit {
	float score;
	char *app, *user, *session, *event_id, *author;
	int64_t seq, timestamp_us;
} vec_hit;

typedef struct vec_hits {
	vec_hit *v;
	size_t n, cap;
	int32_t stop_after;      /* > 0: the sink returns MEMD_ECANCELED after this many */
} vec_hits;

void vec_hits_clear(vec_hits *l);
/* Index of the hit with (session, event_id), or -1. */
long vec_hits_find(const vec_hits *l, const char *session, const char *event_id);

/* ---- op wrappers ------------------------------------------------------ */

int32_t vec_upsert(vec_store *vs, const memd_vector_record *recs, uint32_t n);
int32_t vec_remove(vec_store *vs, const memd_vector_filter *f);
int32_t vec_remove_scope(vec_store *vs, const char *app, const char *user, const char *session);
/* remove_events of (app, user, session); MEMD_ENOTSUP when the plugin
 * has none (below ABI 1.2). */
int32_t vec_remove_events(vec_store *vs, const char *app, const char *user, const char *session,
			  const char *const *event_ids, uint32_t n);
/* Appends to out. */
int32_t vec_query(vec_store *vs, const float *v, uint32_t dim, const memd_vector_filter *f,
		  uint32_t k, vec_hits *out);
/* MEMD_ENOTSUP when the plugin has no prepare/ping. */
int32_t vec_prepare(vec_store *vs, uint32_t dim);
int32_t vec_ping(vec_store *vs);

/* ---- vectors ---------------------------------------------------------- */

/* A deterministic xorshift generator. */
uint32_t vec_rand(uint64_t *state);
/* A uniformly random unit vector (Gaussian components, normalized). */
void vec_random_unit(uint64_t *state, float *v, uint32_t dim);
/* Normalize v in place (a zero vector stays zero). */
void vec_normalize(float *v, uint32_t dim);
/* Inner product in double. */
double vec_dot(const float *a, const float *b, uint32_t dim);

#endif
