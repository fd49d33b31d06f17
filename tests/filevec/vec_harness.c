/* SPDX-License-Identifier: MIT */
#include "vec_harness.h"

#include <criterion/criterion.h>
#include <ctype.h>
#include <ftw.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_common.h"

#define VEC_TMPL_MARK "@TMPDIR@"
#define VEC_TESTID_MARK "@TESTID@"
#define VEC_TMPDIR_PREFIX "memd-vec-"
#define VEC_TESTID_PREFIX "memdvec_"
#define VEC_INSTANCE_NAME "index.vector"
#define VEC_MIN_HITS 8

/* ---- small helpers ---------------------------------------------------- */

/* The config template with the test's dir and id substituted; malloc'd. */
static char *vec_expand(const vec_store *vs, const char *tmpl)
{
	char *testid = tc_testid(vs->tmpdir, VEC_TMPDIR_PREFIX, VEC_TESTID_PREFIX);
	char *a = tc_subst(tmpl, VEC_TMPL_MARK, vs->tmpdir);
	char *b = tc_subst(a, VEC_TESTID_MARK, testid);

	free(a);
	free(testid);
	return b;
}

static int32_t vec_create(vec_store *vs, const config_node *cfg, loader_instance **ret,
			  memd_error *err)
{
	memset(err, 0, sizeof(*err));
	err->struct_size = sizeof(*err);
	return loader_instance_create(vs->plugin, VEC_INSTANCE_NAME, cfg, "plugin", NULL, ret, err);
}

static void vec_instance_create(vec_store *vs)
{
	memd_error err;
	int32_t r = vec_create(vs, vs->cfg, &vs->inst, &err);

	cr_assert_eq(r, 0, "loader_instance_create(%s): %s", vs->config_text, err.msg);
	vs->h = loader_instance_handle(vs->inst);
}

/* ---- lifecycle -------------------------------------------------------- */

vec_store *vec_open_with(const char *name, const char *tmpl, int durable, int exact)
{
	char *pathlist, *dflt = NULL;
	const char *search[TC_MAX_SEARCH + 1];
	memd_error err = { .struct_size = sizeof(err) };
	vec_store *vs;
	int32_t r;

	cr_assert(name && name[0], "no vector plugin named (MEMD_VECTOR_PLUGIN)");
	vs = calloc(1, sizeof(*vs));
	cr_assert_not_null(vs);
	vs->durable = durable;
	vs->exact = exact;
	vs->tmpdir = tc_mkdtemp(VEC_TMPDIR_PREFIX);
	if (!tmpl || !tmpl[0]) {
		if (asprintf(&dflt, "{plugin: %s}", name) < 0)
			cr_assert_fail("out of memory");
		tmpl = dflt;
	}
	vs->config_text = vec_expand(vs, tmpl);
	free(dflt);
	r = config_parse_string(vs->config_text, strlen(vs->config_text), "MEMD_VECTOR_CONFIG",
				&vs->cfg, &err);
	cr_assert_eq(r, 0, "config: %s", err.msg);

	pathlist = tc_plugin_search(search);
	r = loader_open(name, search, &vs->plugin, &err);
	free(pathlist);
	cr_assert_eq(r, 0, "loader_open(%s): %s", name, err.msg);
	r = loader_require_kind(vs->plugin, MEMD_KIND_VECTOR, VEC_INSTANCE_NAME, &err);
	cr_assert_eq(r, 0, "%s", err.msg);
	vs->ops = loader_vector_ops(vs->plugin);
	cr_assert_not_null(vs->ops);
	vs->threadsafe = (loader_descriptor(vs->plugin)->flags & MEMD_PLUGIN_THREADSAFE) != 0;
	vec_instance_create(vs);
	return vs;
}

vec_store *vec_open(void)
{
	const char *durable = getenv("MEMD_VECTOR_DURABLE"), *exact = getenv("MEMD_VECTOR_EXACT");

	return vec_open_with(getenv("MEMD_VECTOR_PLUGIN"), getenv("MEMD_VECTOR_CONFIG"),
			     durable && strcmp(durable, "1") == 0, exact && strcmp(exact, "1") == 0);
}

void vec_shut(vec_store *vs)
{
	loader_instance_destroy(vs->inst);
	vs->inst = NULL;
	vs->h = NULL;
}

int32_t vec_try_reopen(vec_store *vs, memd_error *err)
{
	int32_t r;

	vec_shut(vs);
	r = vec_create(vs, vs->cfg, &vs->inst, err);
	if (r == 0)
		vs->h = loader_instance_handle(vs->inst);
	return r;
}

void vec_reopen(vec_store *vs)
{
	memd_error err;
	int32_t r = vec_try_reopen(vs, &err);

	cr_assert_eq(r, 0, "reopen(%s): %s", vs->config_text, err.msg);
}

int32_t vec_second_instance(vec_store *vs, loader_instance **ret, memd_error *err)
{
	return vec_create(vs, vs->cfg, ret, err);
}

int32_t vec_instance_with(vec_store *vs, const char *tmpl, loader_instance **ret,
			  config_node **ret_cfg, memd_error *err)
{
	char *text = vec_expand(vs, tmpl);
	int32_t r = config_parse_string(text, strlen(text), "test config", ret_cfg, err);

	free(text);
	cr_assert_eq(r, 0, "config: %s", err->msg);
	r = vec_create(vs, *ret_cfg, ret, err);
	if (r < 0) {
		config_free(*ret_cfg);
		*ret_cfg = NULL;
	}
	return r;
}

void vec_close(vec_store *vs)
{
	if (!vs)
		return;
	loader_instance_destroy(vs->inst);
	loader_close(vs->plugin);
	config_free(vs->cfg);
	tc_rm_tree(vs->tmpdir);
	free(vs->tmpdir);
	free(vs->config_text);
	free(vs);
}

memd_call vec_call(vec_store *vs)
{
	memd_call c = { .struct_size = sizeof(c), .rows_read = &vs->rows_read,
			.cancel = vs->cancel };
	return c;
}

/* ---- records, filters, hits ------------------------------------------- */

memd_vector_record vec_record(const char *app, const char *user, const char *session,
			      const char *event_id, const char *author, int64_t seq,
			      int64_t timestamp_us, const float *v, uint32_t dim)
{
	memd_vector_record r = { .struct_size = sizeof(r), .dim = dim, .app = app, .user = user,
				 .session = session, .event_id = event_id, .author = author,
				 .seq = seq, .timestamp_us = timestamp_us, .vector = v };
	return r;
}

memd_vector_filter vec_filter(const char *app, const char *user)
{
	memd_vector_filter f = { .struct_size = sizeof(f), .app = app, .user = user };
	return f;
}

void vec_hits_clear(vec_hits *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].app);
		free(l->v[i].user);
		free(l->v[i].session);
		free(l->v[i].event_id);
		free(l->v[i].author);
	}
	free(l->v);
	l->v = NULL;
	l->n = l->cap = 0;
}

long vec_hits_find(const vec_hits *l, const char *session, const char *event_id)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->v[i].session, session) == 0 && strcmp(l->v[i].event_id, event_id) == 0)
			return (long)i;
	return -1;
}

static int32_t vec_hit_one(void *ud, const memd_vector_hit *h)
{
	vec_hits *l = ud;
	vec_hit *c;

	cr_assert_geq(h->struct_size, sizeof(*h), "hit struct_size %u", h->struct_size);
	cr_assert(h->app && h->user && h->session && h->event_id, "a hit without its scope or id");
	if (l->n == l->cap) {
		size_t nc = l->cap ? l->cap * 2 : VEC_MIN_HITS;
		vec_hit *v = realloc(l->v, nc * sizeof(*v));
		cr_assert_not_null(v);
		l->v = v;
		l->cap = nc;
	}
	c = &l->v[l->n++];
	c->score = h->score;
	c->app = tc_strdup(h->app);
	c->user = tc_strdup(h->user);
	c->session = tc_strdup(h->session);
	c->event_id = tc_strdup(h->event_id);
	c->author = tc_strdup(h->author);
	c->seq = h->seq;
	c->timestamp_us = h->timestamp_us;
	if (l->stop_after > 0 && l->n >= (size_t)l->stop_after)
		return MEMD_ECANCELED;
	return 0;
}

/* ---- op wrappers ------------------------------------------------------ */

#define VEC_ERR_RESET(vs) \
	memset(&(vs)->err, 0, sizeof((vs)->err)), (vs)->err.struct_size = sizeof((vs)->err)

int32_t vec_upsert(vec_store *vs, const memd_vector_record *recs, uint32_t n)
{
	const memd_vector_record **ptrs = calloc(n ? n : 1, sizeof(*ptrs));
	memd_call c = vec_call(vs);
	int32_t r;

	cr_assert_not_null(ptrs);
	for (uint32_t i = 0; i < n; i++)
		ptrs[i] = &recs[i];
	VEC_ERR_RESET(vs);
	r = vs->ops->upsert(vs->h, &c, ptrs, n, &vs->err);
	free(ptrs);
	return r;
}

int32_t vec_remove(vec_store *vs, const memd_vector_filter *f)
{
	memd_call c = vec_call(vs);

	VEC_ERR_RESET(vs);
	return vs->ops->remove(vs->h, &c, f, &vs->err);
}

int32_t vec_remove_events(vec_store *vs, const char *app, const char *user, const char *session,
			  const char *const *event_ids, uint32_t n)
{
	memd_call c = vec_call(vs);
	memd_scope sc = { .struct_size = sizeof(sc), .app = app, .user = user, .session = session };

	VEC_ERR_RESET(vs);
	if (!vs->ops->remove_events)
		return MEMD_ENOTSUP;
	return vs->ops->remove_events(vs->h, &c, &sc, event_ids, n, &vs->err);
}

int32_t vec_remove_scope(vec_store *vs, const char *app, const char *user, const char *session)
{
	memd_vector_filter f = vec_filter(app, user);

	f.session = session;
	return vec_remove(vs, &f);
}

int32_t vec_query(vec_store *vs, const float *v, uint32_t dim, const memd_vector_filter *f,
		  uint32_t k, vec_hits *out)
{
	memd_call c = vec_call(vs);
	memd_vector_hit_sink sink = { .struct_size = sizeof(sink), .userdata = out,
				      .hit = vec_hit_one };

	VEC_ERR_RESET(vs);
	return vs->ops->query(vs->h, &c, v, dim, f, k, &sink, &vs->err);
}

int32_t vec_prepare(vec_store *vs, uint32_t dim)
{
	memd_call c = vec_call(vs);

	VEC_ERR_RESET(vs);
	if (!vs->ops->prepare)
		return MEMD_ENOTSUP;
	return vs->ops->prepare(vs->h, &c, dim, &vs->err);
}

int32_t vec_ping(vec_store *vs)
{
	memd_call c = vec_call(vs);

	VEC_ERR_RESET(vs);
	if (!vs->ops->ping)
		return MEMD_ENOTSUP;
	return vs->ops->ping(vs->h, &c, &vs->err);
}

/* ---- vectors ---------------------------------------------------------- */

#define XS_A 13
#define XS_B 7
#define XS_C 17
#define RAND_SHIFT 32
#define RAND_UNIT (1.0 / 4294967296.0)
#define TWO_PI 6.283185307179586

uint32_t vec_rand(uint64_t *state)
{
	uint64_t x = *state ? *state : 1;

	x ^= x << XS_A;
	x ^= x >> XS_B;
	x ^= x << XS_C;
	*state = x;
	return (uint32_t)(x >> RAND_SHIFT);
}

/* Uniform in (0, 1]. */
static double vec_uniform(uint64_t *state)
{
	return ((double)vec_rand(state) + 1.0) * RAND_UNIT;
}

void vec_normalize(float *v, uint32_t dim)
{
	double n2 = 0.0;

	for (uint32_t j = 0; j < dim; j++)
		n2 += (double)v[j] * v[j];
	if (n2 > 0.0) {
		double inv = 1.0 / sqrt(n2);
		for (uint32_t j = 0; j < dim; j++)
			v[j] = (float)(v[j] * inv);
	}
}

void vec_random_unit(uint64_t *state, float *v, uint32_t dim)
{
	for (uint32_t j = 0; j < dim; j++) {
		/* Box-Muller: Gaussian components give a uniform direction. */
		double u1 = vec_uniform(state), u2 = vec_uniform(state);
		v[j] = (float)(sqrt(-2.0 * log(u1)) * cos(TWO_PI * u2));
	}
	vec_normalize(v, dim);
}

double vec_dot(const float *a, const float *b, uint32_t dim)
{
	double s = 0.0;

	for (uint32_t j = 0; j < dim; j++)
		s += (double)a[j] * b[j];
	return s;
}
