/* SPDX-License-Identifier: MIT */
/*
 * The qdrant plugin against the local Qdrant stand-in
 * (tests/standins/qdrant_standin.py, started around this program by
 * with_standins.py, which also fails the run if any request broke Qdrant's
 * OpenAPI contract). Each test works in its own collection, so tests run
 * in parallel against one stand-in. The plugin is loaded and instantiated
 * the way the host does it (loader + config).
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <memd/plugin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "plugins/loader.h"
#include "qd_uuid.h"
#include "standin_client.h"

#define QT_MAX_SEARCH 16
#define QT_NAME_MAX 96
#define QT_MAX_HITS 512
#define QT_DIM 4
#define QT_TIMEOUT_MS 3000
#define QT_SHORT_TIMEOUT_MS 300
#define QT_SLOW_ANSWER_MS 15000 /* far past QT_SHORT_TIMEOUT_MS, however loaded the machine */
#define QT_BIG_BATCH 300            /* more than one upsert request's worth */
#define QT_US_PER_MS 1000

/* The plugin's point-id namespace (backends/qdrant/qdrant.c): the test
 * recomputes ids to prove they are UUIDv5 of the scope and event id. */
static const uint8_t qt_namespace[QD_UUID_LEN] = {
	0x6f, 0x1c, 0x3e, 0x52, 0x8a, 0x4d, 0x4b, 0x17,
	0x9e, 0x2f, 0x51, 0xd0, 0x7c, 0x88, 0x0a, 0x3b,
};

typedef struct qt {
	loader_plugin *plugin;
	loader_instance *inst;
	config_node *cfg;
	const memd_vector_ops *ops;
	void *h;
	char coll[QT_NAME_MAX];
	memd_error err;
} qt;

typedef struct qt_hit {
	float score;
	char app[64], user[64], session[64], event_id[64], author[64];
	int has_author;
	int64_t seq, timestamp_us;
} qt_hit;

typedef struct qt_hits {
	qt_hit v[QT_MAX_HITS];
	size_t n;
} qt_hits;

/* ---- harness ------------------------------------------------------------ */

static void qt_name(const char *tag, char out[QT_NAME_MAX])
{
	static unsigned counter;
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(out, QT_NAME_MAX, "t_%s_%ld_%ld_%u", tag, (long)getpid(), (long)ts.tv_nsec,
		 counter++);
}

/* Instantiate the plugin on yaml; returns the init code (message in
 * t->err) so tests can assert on refusals. */
static int32_t qt_try_open(qt *t, const char *yaml)
{
	const char *search[QT_MAX_SEARCH + 1];
	char *paths = strdup(sc_env("MEMD_PLUGIN_PATH")), *save = NULL, *tok;
	size_t ns = 0;
	int32_t r;

	memset(&t->err, 0, sizeof(t->err));
	t->err.struct_size = sizeof(t->err);
	for (tok = strtok_r(paths, ":", &save); tok && ns < QT_MAX_SEARCH;
	     tok = strtok_r(NULL, ":", &save))
		search[ns++] = tok;
	search[ns] = NULL;
	r = loader_open("qdrant", search, &t->plugin, &t->err);
	free(paths);
	cr_assert_eq(r, 0, "loader_open: %s", t->err.msg);
	cr_assert_eq(loader_require_kind(t->plugin, MEMD_KIND_VECTOR, "index.vector", &t->err), 0,
		     "%s", t->err.msg);
	t->ops = loader_vector_ops(t->plugin);
	r = config_parse_string(yaml, strlen(yaml), "qdrant_test", &t->cfg, &t->err);
	cr_assert_eq(r, 0, "config: %s", t->err.msg);
	r = loader_instance_create(t->plugin, "stores.vec", t->cfg, "plugin", NULL, &t->inst,
				   &t->err);
	if (r == 0)
		t->h = loader_instance_handle(t->inst);
	return r;
}

/* An instance on collection coll of the stand-in with the right api key,
 * with extra YAML map entries (", distance: Dot") appended. */
static void qt_open_extra(qt *t, const char *coll, const char *extra)
{
	char *yaml;

	memset(t, 0, sizeof(*t));
	snprintf(t->coll, sizeof(t->coll), "%s", coll);
	cr_assert(asprintf(&yaml,
			   "{plugin: qdrant, url: \"%s\", api_key: \"${QDRANT_API_KEY}\", "
			   "collection: %s%s}",
			   sc_env("MEMD_QDRANT_STANDIN_URL"), coll, extra) >= 0);
	int32_t r = qt_try_open(t, yaml);
	cr_assert_eq(r, 0, "init(%s): %s", yaml, t->err.msg);
	free(yaml);
}

static void qt_open(qt *t, const char *coll)
{
	char extra[64];

	snprintf(extra, sizeof(extra), ", timeout_ms: %d", QT_TIMEOUT_MS);
	qt_open_extra(t, coll, extra);
}

static void qt_close(qt *t)
{
	loader_instance_destroy(t->inst);
	loader_close(t->plugin);
	config_free(t->cfg);
	memset(t, 0, sizeof(*t));
}

static memd_call qt_call(void)
{
	memd_call c = { .struct_size = sizeof(c) };
	return c;
}

static int32_t qt_prepare(qt *t, uint32_t dim)
{
	memd_call c = qt_call();
	memset(&t->err, 0, sizeof(t->err));
	return t->ops->prepare(t->h, &c, dim, &t->err);
}

static memd_vector_record qt_rec(const char *app, const char *user, const char *session,
				 const char *event, const char *author, int64_t seq, int64_t ts,
				 const float *vec, uint32_t dim)
{
	memd_vector_record r = {
		.struct_size = sizeof(r), .dim = dim, .app = app, .user = user,
		.session = session, .event_id = event, .author = author, .seq = seq,
		.timestamp_us = ts, .vector = vec,
	};
	return r;
}

static int32_t qt_upsert(qt *t, const memd_vector_record *recs, uint32_t n)
{
	const memd_vector_record **p = calloc(n ? n : 1, sizeof(*p));
	memd_call c = qt_call();
	int32_t r;

	cr_assert_not_null(p);
	for (uint32_t i = 0; i < n; i++)
		p[i] = &recs[i];
	memset(&t->err, 0, sizeof(t->err));
	r = t->ops->upsert(t->h, &c, p, n, &t->err);
	free(p);
	return r;
}

static void qt_upsert_ok(qt *t, const memd_vector_record *recs, uint32_t n)
{
	int32_t r = qt_upsert(t, recs, n);
	cr_assert_eq(r, 0, "upsert: %s", t->err.msg);
}

static void qt_copy(char *dst, size_t n, const char *src)
{
	snprintf(dst, n, "%s", src ? src : "");
}

static int32_t qt_sink(void *userdata, const memd_vector_hit *h)
{
	qt_hits *hs = userdata;
	qt_hit *o;

	cr_assert_lt(hs->n, QT_MAX_HITS);
	o = &hs->v[hs->n++];
	o->score = h->score;
	qt_copy(o->app, sizeof(o->app), h->app);
	qt_copy(o->user, sizeof(o->user), h->user);
	qt_copy(o->session, sizeof(o->session), h->session);
	qt_copy(o->event_id, sizeof(o->event_id), h->event_id);
	qt_copy(o->author, sizeof(o->author), h->author);
	o->has_author = h->author != NULL;
	o->seq = h->seq;
	o->timestamp_us = h->timestamp_us;
	return 0;
}

static memd_vector_filter qt_filter(const char *app, const char *user, const char *session)
{
	memd_vector_filter f = { .struct_size = sizeof(f), .app = app, .user = user,
				 .session = session };
	return f;
}

static int32_t qt_query(qt *t, const float *vec, uint32_t dim, const memd_vector_filter *f,
			uint32_t k, qt_hits *out)
{
	memd_vector_hit_sink sink = { .struct_size = sizeof(sink), .userdata = out,
				      .hit = qt_sink };
	memd_call c = qt_call();

	out->n = 0;
	memset(&t->err, 0, sizeof(t->err));
	return t->ops->query(t->h, &c, vec, dim, f, k, &sink, &t->err);
}

static void qt_query_ok(qt *t, const float *vec, const memd_vector_filter *f, uint32_t k,
			qt_hits *out)
{
	int32_t r = qt_query(t, vec, QT_DIM, f, k, out);
	cr_assert_eq(r, 0, "query: %s", t->err.msg);
}

static int32_t qt_remove(qt *t, const memd_vector_filter *f)
{
	memd_call c = qt_call();
	memset(&t->err, 0, sizeof(t->err));
	return t->ops->remove(t->h, &c, f, &t->err);
}

static int qt_has_event(const qt_hits *hs, const char *event_id)
{
	for (size_t i = 0; i < hs->n; i++)
		if (strcmp(hs->v[i].event_id, event_id) == 0)
			return 1;
	return 0;
}

/* ---- the stand-in's record -------------------------------------------- */

static json_t *qt_requests(const char *coll)
{
	char *url;
	json_t *j;

	cr_assert(asprintf(&url, "%s/__standin/requests?collection=%s",
			   sc_env("MEMD_QDRANT_STANDIN_URL"), coll) >= 0);
	j = sc_get(url);
	free(url);
	cr_assert(json_is_array(j));
	return j;
}

/* Every request made on coll was valid against Qdrant's contract, carried
 * the right api-key, and got an on-contract answer. */
static void qt_assert_contract(const char *coll)
{
	json_t *reqs = qt_requests(coll), *r;
	size_t i;

	cr_assert_gt(json_array_size(reqs), 0, "no request reached the stand-in for %s", coll);
	json_array_foreach(reqs, i, r) {
		char *dump = json_dumps(r, JSON_COMPACT);
		cr_expect_eq(json_array_size(json_object_get(r, "errors")), 0, "invalid: %s", dump);
		cr_expect_eq(json_array_size(json_object_get(r, "warnings")), 0,
			     "undeclared properties: %s", dump);
		cr_expect_eq(json_array_size(json_object_get(r, "response_errors")), 0,
			     "stand-in answer off-contract: %s", dump);
		cr_expect_str_eq(json_string_value(json_object_get(r, "api_key")), "ok",
				 "api-key header: %s", dump);
		free(dump);
	}
	json_decref(reqs);
}

/* How many requests on coll had this method and path suffix (and, when
 * query is not NULL, exactly this query string). */
static size_t qt_count(const char *coll, const char *method, const char *suffix,
		       const char *query)
{
	json_t *reqs = qt_requests(coll), *r;
	size_t i, n = 0;

	json_array_foreach(reqs, i, r) {
		const char *m = json_string_value(json_object_get(r, "method"));
		const char *p = json_string_value(json_object_get(r, "path"));
		const char *q = json_string_value(json_object_get(r, "query"));
		size_t pl = strlen(p), sl = strlen(suffix);
		if (strcmp(m, method) == 0 && pl >= sl && strcmp(p + pl - sl, suffix) == 0 &&
		    (!query || strcmp(q, query) == 0))
			n++;
	}
	json_decref(reqs);
	return n;
}

static void qt_fault(const char *coll, const char *spec)
{
	char *url, *body;

	cr_assert(asprintf(&url, "%s/__standin/faults", sc_env("MEMD_QDRANT_STANDIN_URL")) >= 0);
	cr_assert(asprintf(&body, "{\"collection\": \"%s\", %s}", coll, spec) >= 0);
	json_decref(sc_post(url, body));
	free(url);
	free(body);
}

/* Talk to the stand-in directly, as Qdrant's own clients would. */
static json_t *qt_direct(const char *method, const char *path, const char *body, long *status)
{
	char *url, *hdr;
	json_t *j;

	cr_assert(asprintf(&url, "%s%s", sc_env("MEMD_QDRANT_STANDIN_URL"), path) >= 0);
	cr_assert(asprintf(&hdr, "api-key: %s", sc_env("QDRANT_API_KEY")) >= 0);
	j = sc_request(method, url, body, hdr, status);
	free(url);
	free(hdr);
	return j;
}

static json_t *qt_collection_info(const char *coll)
{
	char *path;
	long status = 0;
	json_t *j;

	cr_assert(asprintf(&path, "/collections/%s", coll) >= 0);
	j = qt_direct("GET", path, NULL, &status);
	free(path);
	cr_assert_eq(status, 200);
	return j;
}

/* ---- vectors -------------------------------------------------------------- */

static const float V_X[QT_DIM] = { 1, 0, 0, 0 };
static const float V_Y[QT_DIM] = { 0, 1, 0, 0 };
static const float V_Z[QT_DIM] = { 0, 0, 1, 0 };
static const float V_XY[QT_DIM] = { 0.8f, 0.6f, 0, 0 };

/* ---- prepare ---------------------------------------------------------------- */

Test(qdrant, prepare_creates_collection_and_tenant_indexes)
{
	char coll[QT_NAME_MAX];
	qt t;

	qt_name("prep", coll);
	qt_open(&t, coll);
	cr_assert_eq(qt_prepare(&t, QT_DIM), 0, "%s", t.err.msg);

	json_t *info = qt_collection_info(coll);
	json_t *res = json_object_get(info, "result");
	json_t *vectors = json_object_get(
		json_object_get(json_object_get(res, "config"), "params"), "vectors");
	cr_expect_eq(json_integer_value(json_object_get(vectors, "size")), QT_DIM);
	cr_expect_str_eq(json_string_value(json_object_get(vectors, "distance")), "Cosine");
	json_t *schema = json_object_get(res, "payload_schema");
	const char *fields[] = { "app", "user", "session" };
	for (size_t i = 0; i < 3; i++) {
		json_t *idx = json_object_get(schema, fields[i]);
		cr_expect_str_eq(json_string_value(json_object_get(idx, "data_type")), "keyword",
				 "index on %s", fields[i]);
	}
	json_t *user_params = json_object_get(json_object_get(schema, "user"), "params");
	cr_expect(json_is_true(json_object_get(user_params, "is_tenant")),
		  "user is a tenant index");
	json_decref(info);

	cr_expect_eq(qt_count(coll, "PUT", coll, NULL), 1, "one create");
	cr_expect_eq(qt_count(coll, "PUT", "/index", "wait=true"), 3,
		     "three payload indexes, wait=true");
	qt_close(&t);
	qt_assert_contract(coll);
}

Test(qdrant, prepare_is_idempotent)
{
	char coll[QT_NAME_MAX];
	qt a, b;

	qt_name("idem", coll);
	qt_open(&a, coll);
	cr_assert_eq(qt_prepare(&a, QT_DIM), 0, "%s", a.err.msg);
	qt_open(&b, coll);
	cr_assert_eq(qt_prepare(&b, QT_DIM), 0, "second prepare: %s", b.err.msg);
	cr_assert_eq(qt_prepare(&b, QT_DIM), 0, "third prepare: %s", b.err.msg);
	/* The later prepares only looked: one create, three indexes in all. */
	cr_expect_eq(qt_count(coll, "PUT", coll, NULL), 1);
	cr_expect_eq(qt_count(coll, "PUT", "/index", NULL), 3);
	cr_expect_eq(qt_count(coll, "GET", coll, NULL), 3);
	qt_close(&a);
	qt_close(&b);
	qt_assert_contract(coll);
}

/* A collection someone made without memd's indexes gets them. */
Test(qdrant, prepare_adds_missing_indexes)
{
	char coll[QT_NAME_MAX], *path;
	long status = 0;
	qt t;

	qt_name("noidx", coll);
	cr_assert(asprintf(&path, "/collections/%s", coll) >= 0);
	json_decref(qt_direct("PUT", path, "{\"vectors\": {\"size\": 4, \"distance\": \"Cosine\"}}",
			      &status));
	cr_assert_eq(status, 200);
	free(path);
	qt_open(&t, coll);
	cr_assert_eq(qt_prepare(&t, QT_DIM), 0, "%s", t.err.msg);
	cr_expect_eq(qt_count(coll, "PUT", "/index", "wait=true"), 3);
	qt_close(&t);
}

Test(qdrant, prepare_with_another_dimension_conflicts)
{
	char coll[QT_NAME_MAX];
	qt a, b;

	qt_name("dimc", coll);
	qt_open(&a, coll);
	cr_assert_eq(qt_prepare(&a, QT_DIM), 0, "%s", a.err.msg);
	qt_open(&b, coll);
	cr_expect_eq(qt_prepare(&b, 2 * QT_DIM), MEMD_ECONFLICT);
	cr_expect_eq(b.err.code, MEMD_ECONFLICT);
	cr_expect(strstr(b.err.msg, "4-dimensional") && strstr(b.err.msg, "makes 8"), "%s",
		  b.err.msg);
	qt_close(&a);
	qt_close(&b);
	qt_assert_contract(coll);
}

Test(qdrant, prepare_with_another_distance_conflicts)
{
	char coll[QT_NAME_MAX];
	qt a, b;

	qt_name("distc", coll);
	qt_open(&a, coll);
	cr_assert_eq(qt_prepare(&a, QT_DIM), 0, "%s", a.err.msg);
	qt_open_extra(&b, coll, ", distance: Dot");
	cr_expect_eq(qt_prepare(&b, QT_DIM), MEMD_ECONFLICT);
	cr_expect(strstr(b.err.msg, "Cosine") && strstr(b.err.msg, "Dot"), "%s", b.err.msg);
	qt_close(&a);
	qt_close(&b);
}

/* Named vectors (not memd's layout) are refused, not misused. */
Test(qdrant, prepare_refuses_named_vectors)
{
	char coll[QT_NAME_MAX], *path;
	long status = 0;
	qt t;

	qt_name("named", coll);
	cr_assert(asprintf(&path, "/collections/%s", coll) >= 0);
	json_decref(qt_direct("PUT", path,
			      "{\"vectors\": {\"text\": {\"size\": 4, \"distance\": \"Cosine\"}}}",
			      &status));
	free(path);
	cr_assert_eq(status, 200);
	qt_open(&t, coll);
	cr_expect_eq(qt_prepare(&t, QT_DIM), MEMD_ECONFLICT);
	cr_expect(strstr(t.err.msg, "named vectors"), "%s", t.err.msg);
	qt_close(&t);
}

/* ---- upsert, query, replace ------------------------------------------------ */

Test(qdrant, upsert_then_query_round_trips_the_payload)
{
	char coll[QT_NAME_MAX];
	qt_hits hs;
	qt t;

	qt_name("rt", coll);
	qt_open(&t, coll);
	cr_assert_eq(qt_prepare(&t, QT_DIM), 0, "%s", t.err.msg);
	memd_vector_record recs[] = {
		qt_rec("app", "u1", "s1", "e-x", "alice", 1, 1000, V_X, QT_DIM),
		qt_rec("app", "u1", "s1", "e-y", "bob", 2, 2000, V_Y, QT_DIM),
		qt_rec("app", "u1", "s2", "e-z", NULL, 7, 3000, V_Z, QT_DIM),
	};
	qt_upsert_ok(&t, recs, 3);
	cr_expect_eq(qt_count(coll, "PUT", "/points", "wait=true"), 1, "upsert with wait=true");

	memd_vector_filter f = qt_filter("app", "u1", NULL);
	qt_query_ok(&t, V_XY, &f, 10, &hs);
	cr_assert_eq(hs.n, 3);
	cr_expect_str_eq(hs.v[0].event_id, "e-x");
	cr_expect_str_eq(hs.v[1].event_id, "e-y");
	cr_expect_str_eq(hs.v[2].event_id, "e-z");
	cr_expect_float_eq(hs.v[0].score, 0.8f, 1e-5);
	cr_expect_float_eq(hs.v[1].score, 0.6f, 1e-5);
	cr_expect_float_eq(hs.v[2].score, 0.0f, 1e-5);
	cr_expect_str_eq(hs.v[0].app, "app");
	cr_expect_str_eq(hs.v[0].user, "u1");
	cr_expect_str_eq(hs.v[0].session, "s1");
	cr_expect_str_eq(hs.v[0].author, "alice");
	cr_expect_eq(hs.v[0].seq, 1);
	cr_expect_eq(hs.v[0].timestamp_us, 1000);
	cr_expect_str_eq(hs.v[2].session, "s2");
	cr_expect_eq(hs.v[2].has_author, 0, "no author stays no author");
	cr_expect_eq(hs.v[2].seq, 7);

	/* k limits, best first. */
	qt_query_ok(&t, V_Y, &f, 1, &hs);
	cr_assert_eq(hs.n, 1);
	cr_expect_str_eq(hs.v[0].event_id, "e-y");
	/* k = 0 asks for nothing. */
	qt_query_ok(&t, V_Y, &f, 0, &hs);
	cr_expect_eq(hs.n, 0);
	qt_close(&t);
	qt_assert_contract(coll);
}

/* Point ids are UUIDv5 of (app, user, session, event id), with the event id
 * in the payload; upserting the same event again replaces its point. */
Test(qdrant, point_ids_are_uuidv5_and_upsert_replaces)
{
	const char *parts[] = { "app", "u1", "s1", "e1" };
	char coll[QT_NAME_MAX], want[QD_UUID_TEXT_LEN + 1], *path;
	long status = 0;
	qt_hits hs;
	qt t;

	qt_name("ids", coll);
	qt_open(&t, coll);
	cr_assert_eq(qt_prepare(&t, QT_DIM), 0, "%s", t.err.msg);
	memd_vector_record r1 = qt_rec("app", "u1", "s1", "e1", "alice", 1, 10, V_X, QT_DIM);
	qt_upsert_ok(&t, &r1, 1);
	memd_vector_record r2 = qt_rec("app", "u1", "s1", "e1", "carol", 5, 50, V_Y, QT_DIM);
	qt_upsert_ok(&t, &r2, 1);

	memd_vector_filter f = qt_filter("app", "u1", NULL);
	qt_query_ok(&t, V_Y, &f, 10, &hs);
	cr_assert_eq(hs.n, 1, "one point per event");
	cr_expect_str_eq(hs.v[0].author, "carol");
	cr_expect_eq(hs.v[0].seq, 5);
	cr_expect_float_eq(hs.v[0].score, 1.0f, 1e-5);

	qd_uuid_v5(qt_namespace, parts, 4, want);
	cr_assert(asprintf(&path, "/collections/%s/points/query", coll) >= 0);
	json_t *j = qt_direct("POST", path, "{\"query\": [0, 1, 0, 0], \"with_payload\": true}",
			      &status);
	free(path);
	cr_assert_eq(status, 200);
	json_t *pt = json_array_get(json_object_get(json_object_get(j, "result"), "points"), 0);
	cr_expect_str_eq(json_string_value(json_object_get(pt, "id")), want);
	cr_expect_str_eq(json_string_value(json_object_get(json_object_get(pt, "payload"),
							   "event_id")),
			 "e1");
	json_decref(j);
	qt_close(&t);
	qt_assert_contract(coll);
}

/* The same event id in another session, user or app is another point. */
Test(qdrant, same_event_id_in_other_scopes_is_another_point)
{
	char coll[QT_NAME_MAX];
	qt_hits hs;
	qt t;

	qt_name("scopes", coll);
	qt_open(&t, coll);
	cr_assert_eq(qt_prepare(&t, QT_DIM), 0, "%s", t.err.msg);
	memd_vector_record recs[] = {
		qt_rec("app", "u1", "s1", "e1", "a", 1, 1, V_X, QT_DIM),
		qt_rec("app", "u1", "s2", "e1", "a", 1, 1, V_X, QT_DIM),
		qt_rec("app", "u2", "s1", "e1", "a", 1, 1, V_X, QT_DIM),
		qt_rec("app2", "u1", "s1", "e1", "a", 1, 1, V_X, QT_DIM),
	};
	qt_upsert_ok(&t, recs, 4);
	memd_vector_filter f = qt_filter("app", "u1", NULL);
	qt_query_ok(&t, V_X, &f, 10, &hs);
	cr_expect_eq(hs.n, 2, "both sessions of app/u1");
	qt_close(&t);
}

Test(qdrant, big_batches_are_split_and_all_stored)
{
	static memd_vector_record recs[QT_BIG_BATCH];
	static char ids[QT_BIG_BATCH][16];
	static float vecs[QT_BIG_BATCH][QT_DIM];
	char coll[QT_NAME_MAX];
	static qt_hits hs;
	qt t;

	qt_name("big", coll);
	qt_open(&t, coll);
	cr_assert_eq(qt_prepare(&t, QT_DIM), 0, "%s", t.err.msg);
	for (int i = 0; i < QT_BIG_BATCH; i++) {
		snprintf(ids[i], sizeof(ids[i]), "e%d", i);
		vecs[i][0] = 1.0f;
		vecs[i][1] = (float)i / QT_BIG_BATCH;
		recs[i] = qt_rec("app", "u", "s", ids[i], "a", i + 1, i, vecs[i], QT_DIM);
	}
	qt_upsert_ok(&t, recs, QT_BIG_BATCH);
	cr_expect_gt(qt_count(coll, "PUT", "/points", "wait=true"), 1, "split into requests");
	memd_vector_filter f = qt_filter("app", "u", "s");
	qt_query_ok(&t, V_X, &f, QT_BIG_BATCH, &hs);
	cr_expect_eq(hs.n, QT_BIG_BATCH);
	qt_close(&t);
	qt_assert_contract(coll);
}

/* ---- filters and isolation ------------------------------------------------- */

static void qt_seed_filters(qt *t)
{
	static const float *vs[] = { V_X, V_Y, V_Z, V_XY };
	memd_vector_record recs[] = {
		qt_rec("app", "u1", "s1", "a1", "alice", 1, 100, vs[0], QT_DIM),
		qt_rec("app", "u1", "s1", "b1", "bob", 2, 200, vs[1], QT_DIM),
		qt_rec("app", "u1", "s2", "c1", "carol", 1, 300, vs[2], QT_DIM),
		qt_rec("app", "u1", "s2", "a2", "alice", 2, 400, vs[3], QT_DIM),
	};
	qt_upsert_ok(t, recs, 4);
}

Test(qdrant, filter_by_session_authors_and_time)
{
	const char *authors[] = { "alice", "carol", "alice" }; /* duplicates allowed */
	char coll[QT_NAME_MAX];
	qt_hits hs;
	qt t;

	qt_name("filt", coll);
	qt_open(&t, coll);
	cr_assert_eq(qt_prepare(&t, QT_DIM), 0, "%s", t.err.msg);
	qt_seed_filters(&t);

	memd_vector_filter f = qt_filter("app", "u1", "s2");
	qt_query_ok(&t, V_X, &f, 10, &hs);
	cr_expect_eq(hs.n, 2);
	cr_expect(qt_has_event(&hs, "c1") && qt_has_event(&hs, "a2"));

	f = qt_filter("app", "u1", NULL);
	f.authors = authors;
	f.n_authors = 3;
	qt_query_ok(&t, V_X, &f, 10, &hs);
	cr_expect_eq(hs.n, 3);
	cr_expect(!qt_has_event(&hs, "b1"), "bob is not among the authors");

	f = qt_filter("app", "u1", NULL);
	f.after_us = 100;  /* strictly after */
	f.before_us = 400; /* strictly before */
	qt_query_ok(&t, V_X, &f, 10, &hs);
	cr_expect_eq(hs.n, 2);
	cr_expect(qt_has_event(&hs, "b1") && qt_has_event(&hs, "c1"));

	f = qt_filter("app", "u1", "s1");
	f.authors = authors;
	f.n_authors = 1;
	f.after_us = 50;
	qt_query_ok(&t, V_Y, &f, 10, &hs);
	cr_assert_eq(hs.n, 1);
	cr_expect_str_eq(hs.v[0].event_id, "a1");
	qt_close(&t);
	qt_assert_contract(coll);
}

/* A query for user A never returns user B's events (nor another app's),
 * however close B's vectors are; removing A's leaves B's. */
Test(qdrant, isolation_between_users_and_apps)
{
	char coll[QT_NAME_MAX];
	qt_hits hs;
	qt t;

	qt_name("iso", coll);
	qt_open(&t, coll);
	cr_assert_eq(qt_prepare(&t, QT_DIM), 0, "%s", t.err.msg);
	memd_vector_record recs[] = {
		qt_rec("app", "alice", "s", "a-far", "alice", 1, 1, V_Z, QT_DIM),
		qt_rec("app", "bob", "s", "b-near", "bob", 1, 1, V_X, QT_DIM),
		qt_rec("other", "alice", "s", "o-near", "alice", 1, 1, V_X, QT_DIM),
		qt_rec("app", "alice2", "s", "prefix-near", "x", 1, 1, V_X, QT_DIM),
	};
	qt_upsert_ok(&t, recs, 4);

	memd_vector_filter fa = qt_filter("app", "alice", NULL);
	qt_query_ok(&t, V_X, &fa, 10, &hs);
	cr_assert_eq(hs.n, 1);
	cr_expect_str_eq(hs.v[0].event_id, "a-far");

	memd_vector_filter fb = qt_filter("app", "bob", NULL);
	qt_query_ok(&t, V_Z, &fb, 10, &hs);
	cr_assert_eq(hs.n, 1);
	cr_expect_str_eq(hs.v[0].event_id, "b-near");

	cr_assert_eq(qt_remove(&t, &fa), 0, "%s", t.err.msg);
	cr_expect_eq(qt_count(coll, "POST", "/points/delete", "wait=true"), 1);
	qt_query_ok(&t, V_X, &fa, 10, &hs);
	cr_expect_eq(hs.n, 0, "alice's points are gone");
	qt_query_ok(&t, V_X, &fb, 10, &hs);
	cr_expect_eq(hs.n, 1, "bob's stay");
	memd_vector_filter fo = qt_filter("other", "alice", NULL);
	qt_query_ok(&t, V_X, &fo, 10, &hs);
	cr_expect_eq(hs.n, 1, "alice in another app stays");
	qt_close(&t);
	qt_assert_contract(coll);
}

Test(qdrant, remove_one_session)
{
	char coll[QT_NAME_MAX];
	qt_hits hs;
	qt t;

	qt_name("rmsess", coll);
	qt_open(&t, coll);
	cr_assert_eq(qt_prepare(&t, QT_DIM), 0, "%s", t.err.msg);
	qt_seed_filters(&t);
	memd_vector_filter f = qt_filter("app", "u1", "s1");
	cr_assert_eq(qt_remove(&t, &f), 0, "%s", t.err.msg);
	f = qt_filter("app", "u1", NULL);
	qt_query_ok(&t, V_X, &f, 10, &hs);
	cr_expect_eq(hs.n, 2);
	cr_expect(qt_has_event(&hs, "c1") && qt_has_event(&hs, "a2"));
	qt_close(&t);
	qt_assert_contract(coll);
}

/* ---- bad input ----------------------------------------------------------------- */

Test(qdrant, bad_input_is_refused_before_sending)
{
	const float nan_vec[QT_DIM] = { 1, 0, 0, (float)NAN };
	char coll[QT_NAME_MAX];
	qt_hits hs;
	qt t;

	qt_name("badin", coll);
	qt_open(&t, coll);
	cr_assert_eq(qt_prepare(&t, QT_DIM), 0, "%s", t.err.msg);
	memd_vector_record r = qt_rec("app", "u", "s", "e", "a", 1, 1, V_X, 2);
	cr_expect_eq(qt_upsert(&t, &r, 1), MEMD_EINVAL, "dimension other than prepared");
	r = qt_rec("app", "u", "s", "e", "a", 1, 1, nan_vec, QT_DIM);
	cr_expect_eq(qt_upsert(&t, &r, 1), MEMD_EINVAL, "NaN");
	r = qt_rec("app", NULL, "s", "e", "a", 1, 1, V_X, QT_DIM);
	cr_expect_eq(qt_upsert(&t, &r, 1), MEMD_EINVAL, "no user");
	memd_vector_filter f = qt_filter("app", NULL, NULL);
	cr_expect_eq(qt_query(&t, V_X, QT_DIM, &f, 3, &hs), MEMD_EINVAL, "no user in filter");
	cr_expect_eq(qt_remove(&t, &f), MEMD_EINVAL, "remove needs a user");
	f = qt_filter("app", "u", NULL);
	cr_expect_eq(qt_query(&t, V_X, 2, &f, 3, &hs), MEMD_EINVAL, "query dimension");
	cr_expect_eq(qt_count(coll, "PUT", "/points", NULL), 0, "nothing was sent");
	qt_close(&t);
}

Test(qdrant, bad_config_is_refused)
{
	char *yaml;
	qt t;

	memset(&t, 0, sizeof(t));
	cr_assert(asprintf(&yaml, "{plugin: qdrant, url: \"%s\", distance: Euclid}",
			   sc_env("MEMD_QDRANT_STANDIN_URL")) >= 0);
	cr_expect_eq(qt_try_open(&t, yaml), MEMD_EINVAL);
	cr_expect(strstr(t.err.msg, "expected one of Cosine, Dot"), "%s", t.err.msg);
	free(yaml);
	qt_close(&t);

	cr_expect_eq(qt_try_open(&t, "{plugin: qdrant, url: \"ftp://127.0.0.1:1\"}"), MEMD_EINVAL);
	cr_expect(strstr(t.err.msg, "http"), "%s", t.err.msg);
	qt_close(&t);

	cr_expect_eq(qt_try_open(&t, "{plugin: qdrant, url: \"http://h\", collection: \"a/b\"}"),
		     MEMD_EINVAL);
	qt_close(&t);

	cr_expect_eq(qt_try_open(&t, "{plugin: qdrant, collection: c}"), MEMD_EINVAL,
		     "url is required");
	qt_close(&t);
}

/* ---- what Qdrant rejects, mapped ------------------------------------------- */

/* Qdrant rejects a vector of another size; an instance that did not prepare
 * (so cannot know) gets Qdrant's message as MEMD_EINVAL. */
Test(qdrant, wrong_vector_size_from_server_is_einval)
{
	const float v8[2 * QT_DIM] = { 1 };
	char coll[QT_NAME_MAX];
	qt_hits hs;
	qt a, b;

	qt_name("wsize", coll);
	qt_open(&a, coll);
	cr_assert_eq(qt_prepare(&a, QT_DIM), 0, "%s", a.err.msg);
	qt_open(&b, coll);
	memd_vector_record r = qt_rec("app", "u", "s", "e", "a", 1, 1, v8, 2 * QT_DIM);
	cr_expect_eq(qt_upsert(&b, &r, 1), MEMD_EINVAL);
	cr_expect_eq(b.err.flags & MEMD_ERROR_RETRYABLE, 0);
	cr_expect(strstr(b.err.msg, "HTTP 400") && strstr(b.err.msg, "Vector dimension error"),
		  "%s", b.err.msg);
	memd_vector_filter f = qt_filter("app", "u", NULL);
	cr_expect_eq(qt_query(&b, v8, 2 * QT_DIM, &f, 3, &hs), MEMD_EINVAL);
	cr_expect(strstr(b.err.msg, "Vector dimension error"), "%s", b.err.msg);
	qt_close(&a);
	qt_close(&b);
	qt_assert_contract(coll);
}

Test(qdrant, missing_collection_is_enotfound)
{
	char coll[QT_NAME_MAX];
	qt_hits hs;
	qt t;

	qt_name("missing", coll);
	qt_open(&t, coll);
	memd_vector_record r = qt_rec("app", "u", "s", "e", "a", 1, 1, V_X, QT_DIM);
	cr_expect_eq(qt_upsert(&t, &r, 1), MEMD_ENOTFOUND);
	cr_expect(strstr(t.err.msg, "HTTP 404") && strstr(t.err.msg, "doesn't exist"), "%s",
		  t.err.msg);
	memd_vector_filter f = qt_filter("app", "u", NULL);
	cr_expect_eq(qt_query(&t, V_X, QT_DIM, &f, 3, &hs), MEMD_ENOTFOUND);
	cr_expect_eq(qt_remove(&t, &f), MEMD_ENOTFOUND);
	qt_close(&t);
	qt_assert_contract(coll);
}

/* A collection deleted by hand after prepare is made again (with memd's
 * indexes) by the next upsert, which then succeeds. */
Test(qdrant, a_vanished_collection_is_created_again)
{
	char coll[QT_NAME_MAX], *path;
	long status = 0;
	qt_hits hs;
	qt t;

	qt_name("gone", coll);
	qt_open(&t, coll);
	cr_assert_eq(qt_prepare(&t, QT_DIM), 0, "%s", t.err.msg);
	memd_vector_record r1 = qt_rec("app", "u", "s", "e1", "a", 1, 1, V_X, QT_DIM);
	qt_upsert_ok(&t, &r1, 1);
	cr_assert(asprintf(&path, "/collections/%s", coll) >= 0);
	json_decref(qt_direct("DELETE", path, NULL, &status));
	free(path);
	cr_assert_eq(status, 200);

	memd_vector_record r2 = qt_rec("app", "u", "s", "e2", "a", 2, 2, V_Y, QT_DIM);
	qt_upsert_ok(&t, &r2, 1);
	memd_vector_filter f = qt_filter("app", "u", NULL);
	qt_query_ok(&t, V_Y, &f, 10, &hs);
	cr_assert_eq(hs.n, 1, "only what was written since");
	cr_expect_str_eq(hs.v[0].event_id, "e2");
	cr_expect_eq(qt_count(coll, "PUT", coll, NULL), 2, "created twice");
	cr_expect_eq(qt_count(coll, "PUT", "/index", "wait=true"), 6, "indexes made again");
	qt_close(&t);
}

/* ---- outages: retryable ------------------------------------------------------ */

static void qt_expect_retryable(const qt *t, int32_t r, const char *what)
{
	cr_expect_eq(r, MEMD_EUNAVAIL, "%s: %d %s", what, r, t->err.msg);
	cr_expect_neq(t->err.flags & MEMD_ERROR_RETRYABLE, 0, "%s is retryable", what);
}

Test(qdrant, server_errors_are_retryable_and_pass)
{
	char coll[QT_NAME_MAX];
	qt_hits hs;
	qt t;

	qt_name("5xx", coll);
	qt_open(&t, coll);
	cr_assert_eq(qt_prepare(&t, QT_DIM), 0, "%s", t.err.msg);
	memd_vector_record r = qt_rec("app", "u", "s", "e", "a", 1, 1, V_X, QT_DIM);
	memd_vector_filter f = qt_filter("app", "u", NULL);

	qt_fault(coll, "\"count\": 1, \"status\": 503");
	qt_expect_retryable(&t, qt_upsert(&t, &r, 1), "upsert on 503");
	cr_expect(strstr(t.err.msg, "HTTP 503") && strstr(t.err.msg, "fault injected"), "%s",
		  t.err.msg);
	qt_upsert_ok(&t, &r, 1);

	qt_fault(coll, "\"count\": 1, \"status\": 500");
	qt_expect_retryable(&t, qt_query(&t, V_X, QT_DIM, &f, 3, &hs), "query on 500");
	qt_fault(coll, "\"count\": 1, \"status\": 429");
	qt_expect_retryable(&t, qt_remove(&t, &f), "remove on 429");
	qt_fault(coll, "\"count\": 1, \"status\": 502");
	qt_expect_retryable(&t, qt_prepare(&t, QT_DIM), "prepare on 502");

	qt_query_ok(&t, V_X, &f, 3, &hs);
	cr_expect_eq(hs.n, 1, "the store works again");
	qt_close(&t);
	qt_assert_contract(coll);
}

Test(qdrant, dropped_connection_is_retryable)
{
	char coll[QT_NAME_MAX];
	qt t;

	qt_name("drop", coll);
	qt_open(&t, coll);
	cr_assert_eq(qt_prepare(&t, QT_DIM), 0, "%s", t.err.msg);
	memd_vector_record r = qt_rec("app", "u", "s", "e", "a", 1, 1, V_X, QT_DIM);
	/* libcurl itself resends once when a reused keep-alive connection turns
	 * out dead, so it takes two drops in a row to fail a request. */
	qt_fault(coll, "\"count\": 2, \"drop\": true");
	qt_expect_retryable(&t, qt_upsert(&t, &r, 1), "upsert on a dropped connection");
	int32_t rc = qt_upsert(&t, &r, 1);
	if (rc != 0) /* a fresh connection is not resent: one drop was left */
		rc = qt_upsert(&t, &r, 1);
	cr_expect_eq(rc, 0, "works again: %s", t.err.msg);
	qt_close(&t);
}

Test(qdrant, connection_refused_is_retryable)
{
	char *yaml;
	qt t;

	memset(&t, 0, sizeof(t));
	cr_assert(asprintf(&yaml, "{plugin: qdrant, url: \"http://127.0.0.1:%d\"}",
			   sc_closed_port()) >= 0);
	cr_assert_eq(qt_try_open(&t, yaml), 0, "init does not connect: %s", t.err.msg);
	free(yaml);
	qt_expect_retryable(&t, qt_prepare(&t, QT_DIM), "prepare");
	memd_call c = qt_call();
	qt_expect_retryable(&t, t.ops->ping(t.h, &c, &t.err), "ping");
	memd_vector_record r = qt_rec("app", "u", "s", "e", "a", 1, 1, V_X, QT_DIM);
	qt_expect_retryable(&t, qt_upsert(&t, &r, 1), "upsert");
	qt_close(&t);
}

/* No answer within timeout_ms: retryable; the call's own deadline:
 * MEMD_ETIMEDOUT. Neither waits for the slow answer. */
Test(qdrant, timeouts)
{
	char coll[QT_NAME_MAX], extra[64];
	struct timespec t0, t1;
	qt_hits hs;
	qt t, slow;

	qt_name("tmo", coll);
	qt_open(&t, coll);
	cr_assert_eq(qt_prepare(&t, QT_DIM), 0, "%s", t.err.msg);
	qt_close(&t);
	snprintf(extra, sizeof(extra), ", timeout_ms: %d", QT_SHORT_TIMEOUT_MS);
	qt_open_extra(&slow, coll, extra);

	memd_vector_filter f = qt_filter("app", "u", NULL);
	char fault[64];
	snprintf(fault, sizeof(fault), "\"count\": 1, \"delay_ms\": %d", QT_SLOW_ANSWER_MS);
	qt_fault(coll, fault);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	qt_expect_retryable(&slow, qt_query(&slow, V_X, QT_DIM, &f, 3, &hs), "slow answer");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	cr_expect_lt((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000,
		     QT_SLOW_ANSWER_MS, "gave up before the answer came");

	/* A deadline in the past: refused without a request. */
	memd_call c = qt_call();
	c.deadline_us = 1;
	memd_vector_hit_sink sink = { .struct_size = sizeof(sink), .userdata = &hs,
				      .hit = qt_sink };
	cr_expect_eq(slow.ops->query(slow.h, &c, V_X, QT_DIM, &f, 3, &sink, &slow.err),
		     MEMD_ETIMEDOUT, "%s", slow.err.msg);
	/* A cancelled call: refused too. */
	volatile int32_t cancel = 1;
	c = qt_call();
	c.cancel = &cancel;
	cr_expect_eq(slow.ops->query(slow.h, &c, V_X, QT_DIM, &f, 3, &sink, &slow.err),
		     MEMD_ECANCELED, "%s", slow.err.msg);
	qt_close(&slow);
}

/* ---- api key --------------------------------------------------------------------- */

Test(qdrant, api_key_is_sent_and_a_wrong_one_is_eauth)
{
	char coll[QT_NAME_MAX], *yaml;
	qt t;

	qt_name("key", coll);
	/* Right key: every request carries it (qt_assert_contract checks). */
	qt_open(&t, coll);
	cr_assert_eq(qt_prepare(&t, QT_DIM), 0, "%s", t.err.msg);
	qt_close(&t);
	qt_assert_contract(coll);

	memset(&t, 0, sizeof(t));
	cr_assert(asprintf(&yaml, "{plugin: qdrant, url: \"%s\", api_key: wrong-key, "
				  "collection: %s}",
			   sc_env("MEMD_QDRANT_STANDIN_URL"), coll) >= 0);
	cr_assert_eq(qt_try_open(&t, yaml), 0, "%s", t.err.msg);
	free(yaml);
	cr_expect_eq(qt_prepare(&t, QT_DIM), MEMD_EAUTH, "%s", t.err.msg);
	cr_expect_eq(t.err.flags & MEMD_ERROR_RETRYABLE, 0);
	cr_expect_null(strstr(t.err.msg, "wrong-key"), "the key is not in the message");
	qt_close(&t);

	memset(&t, 0, sizeof(t));
	cr_assert(asprintf(&yaml, "{plugin: qdrant, url: \"%s\", collection: %s}",
			   sc_env("MEMD_QDRANT_STANDIN_URL"), coll) >= 0);
	cr_assert_eq(qt_try_open(&t, yaml), 0, "%s", t.err.msg);
	free(yaml);
	cr_expect_eq(qt_prepare(&t, QT_DIM), MEMD_EAUTH, "no key: %s", t.err.msg);
	qt_close(&t);

	json_t *reqs = qt_requests(coll), *r;
	size_t i, wrong = 0, missing = 0;
	json_array_foreach(reqs, i, r) {
		const char *k = json_string_value(json_object_get(r, "api_key"));
		wrong += strcmp(k, "wrong") == 0;
		missing += strcmp(k, "missing") == 0;
	}
	json_decref(reqs);
	cr_expect_eq(wrong, 1);
	cr_expect_eq(missing, 1);
}

Test(qdrant, ping)
{
	char coll[QT_NAME_MAX];
	qt t;

	qt_name("ping", coll);
	qt_open(&t, coll);
	memd_call c = qt_call();
	cr_expect_eq(t.ops->ping(t.h, &c, &t.err), 0, "%s", t.err.msg);
	qt_close(&t);
}
