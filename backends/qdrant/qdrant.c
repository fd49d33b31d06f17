/* SPDX-License-Identifier: MIT */
/*
 * backends/qdrant: a vector-store plugin over Qdrant's REST API
 * (reference/qdrant-openapi.json), via libcurl.
 *
 *  - prepare(dim) creates the collection idempotently (single unnamed
 *    vector of the embedder's dimension and the configured distance) and
 *    the keyword payload indexes on app, user (a tenant index) and
 *    session; an existing collection with another size or distance is
 *    MEMD_ECONFLICT.
 *  - Point ids are UUIDv5 of (app, user, session, event id) in a fixed
 *    namespace, so an upsert of the same event replaces its point; the
 *    event id itself travels in the payload with the rest of the scope.
 *  - Writes use wait=true (durable when they return); queries use
 *    POST /points/query with a must filter on the scope; remove deletes
 *    by filter, remove_events (a hidden event) by the events' point ids.
 *  - Errors: qd_http.h maps transport failures and HTTP statuses.
 */
#include <jansson.h>
#include <math.h>
#include <memd/plugin.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_util.h"
#include "qd_http.h"
#include "qd_uuid.h"

#define QD_PLUGIN_VERSION "0.2.0"
#define QD_DEFAULT_COLLECTION "memd"
#define QD_DEFAULT_TIMEOUT_MS 10000
#define QD_TIMEOUT_MAX_MS 3600000
#define QD_DEFAULT_DISTANCE "Cosine"
#define QD_STR_(x) #x
#define QD_STR(x) QD_STR_(x)
/* Qdrant's own limit on collection names is looser; memd keeps names that
 * need no escaping in a URL path. */
#define QD_COLLECTION_MAX 255
/* Points per upsert request: bounds the request size (1536 floats of ~12
 * characters each make ~18 KiB a point). */
#define QD_UPSERT_CHUNK 256
/* Float32 values round-trip through 9 significant digits. */
#define QD_JSON_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(9))
/* Largest integer a JSON number (a double) carries exactly: 2^53. */
#define QD_JSON_INT_EXACT_MAX 9007199254740992LL

/* Namespace of memd's point ids (a fixed random UUID; changing it would
 * orphan every stored point). */
static const uint8_t qd_point_namespace[QD_UUID_LEN] = {
	0x6f, 0x1c, 0x3e, 0x52, 0x8a, 0x4d, 0x4b, 0x17,
	0x9e, 0x2f, 0x51, 0xd0, 0x7c, 0x88, 0x0a, 0x3b,
};

/* The payload fields memd indexes, and how. */
static const struct qd_index_spec {
	const char *field;
	int tenant;          /* is_tenant: the field most queries narrow by */
} qd_indexes[] = {
	{ "app", 0 },
	{ "user", 1 },
	{ "session", 0 },
};
#define QD_N_INDEXES (sizeof(qd_indexes) / sizeof(qd_indexes[0]))

typedef struct qd_store {
	const memd_host *host;
	qd_http *http;
	char *collection;
	char *coll_path;         /* "/collections/<collection>" */
	const char *distance;    /* "Cosine" or "Dot" (static) */
	/* 0 until prepare; atomic because a host may prepare again (after a
	 * retryable failure) while other threads query. */
	_Atomic uint32_t dim;
} qd_store;

/* ---- config ------------------------------------------------------------ */

static const memd_config_key key_url = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_STRING,
	.flags = MEMD_CONFIG_REQUIRED,
	.name = "url",
	.help = "Qdrant's REST address, e.g. http://127.0.0.1:6333",
};
static const memd_config_key key_collection = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_STRING,
	.name = "collection",
	.default_value = QD_DEFAULT_COLLECTION,
	.help = "collection name ([A-Za-z0-9_.-]); created on first use",
};
static const memd_config_key key_api_key = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_STRING,
	.flags = MEMD_CONFIG_SECRET,
	.name = "api_key",
	.help = "sent as the api-key header; usually ${QDRANT_API_KEY}",
};
static const memd_config_key key_timeout = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_INT,
	.name = "timeout_ms",
	.default_value = QD_STR(QD_DEFAULT_TIMEOUT_MS),
	.help = "per request; an unanswered request fails with 503 (retryable)",
};
static const char *const distance_choices[] = { "Cosine", "Dot", NULL };
static const memd_config_key key_distance = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_STRING,
	.name = "distance",
	.default_value = QD_DEFAULT_DISTANCE,
	.help = "Cosine or Dot (the host stores unit vectors: both rank alike)",
	.choices = distance_choices, /* a 1.0 host ignores it: qd_init checks too */
};
static const memd_config_key *const config_keys[] = {
	&key_url, &key_collection, &key_api_key, &key_timeout, &key_distance, NULL,
};

static int32_t cfg_string(const memd_host *host, const char *key, const char *def,
			  const char **ret, memd_error *err)
{
	int32_t r = host->config_string ? host->config_string(host, key, ret) : MEMD_ENOTFOUND;

	if (r == MEMD_ENOTFOUND) {
		*ret = def;
		return 0;
	}
	if (r < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "qdrant: %s must be a string", key);
	return 0;
}

static int valid_collection(const char *c)
{
	size_t n = strlen(c);

	if (n == 0 || n > QD_COLLECTION_MAX || strcmp(c, ".") == 0 || strcmp(c, "..") == 0)
		return 0;
	for (; *c; c++) {
		char ch = *c;
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
		      ch == '_' || ch == '-' || ch == '.'))
			return 0;
	}
	return 1;
}

static void qd_fini(void *instance)
{
	qd_store *s = instance;

	if (!s)
		return;
	qd_http_free(s->http);
	free(s->collection);
	free(s->coll_path);
	free(s);
	qd_http_global_cleanup();
}

static int32_t qd_init(const memd_host *host, void **ret_instance, memd_error *err)
{
	const char *url = NULL, *coll = NULL, *key = NULL, *dist = NULL;
	int64_t timeout = QD_DEFAULT_TIMEOUT_MS;
	qd_store *s;
	int32_t r;

	if (!host || !host->monotonic_us)
		return memd_error_set(err, MEMD_EINVAL, 0, "qdrant: the host gave no clock");
	r = cfg_string(host, "url", NULL, &url, err);
	if (r == 0 && (!url || !url[0]))
		r = memd_error_set(err, MEMD_EINVAL, 0, "qdrant: url is required");
	if (r == 0)
		r = cfg_string(host, "collection", QD_DEFAULT_COLLECTION, &coll, err);
	if (r == 0 && !valid_collection(coll))
		r = memd_error_set(err, MEMD_EINVAL, 0,
				   "qdrant: collection must be 1..%d characters of A-Z a-z 0-9 _ . -",
				   QD_COLLECTION_MAX);
	if (r == 0)
		r = cfg_string(host, "api_key", NULL, &key, err);
	if (r == 0)
		r = cfg_string(host, "distance", QD_DEFAULT_DISTANCE, &dist, err);
	if (r == 0 && host->config_int) {
		int32_t t = host->config_int(host, "timeout_ms", &timeout);
		if (t == MEMD_ENOTFOUND)
			timeout = QD_DEFAULT_TIMEOUT_MS;
		else if (t < 0)
			r = memd_error_set(err, MEMD_EINVAL, 0, "qdrant: timeout_ms must be an integer");
		else if (timeout < 1 || timeout > QD_TIMEOUT_MAX_MS)
			r = memd_error_set(err, MEMD_EINVAL, 0,
					   "qdrant: timeout_ms must be 1..%d, not %lld",
					   QD_TIMEOUT_MAX_MS, (long long)timeout);
	}
	if (r < 0)
		return r;
	/* Cosine and Dot score unit vectors identically (higher is better);
	 * Euclid and Manhattan are distances and would invert the host's
	 * notion of a score. */
	if (strcmp(dist, "Cosine") == 0)
		dist = "Cosine";
	else if (strcmp(dist, "Dot") == 0)
		dist = "Dot";
	else
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "qdrant: distance must be Cosine or Dot, not '%.32s'", dist);

	r = qd_http_global_init(err);
	if (r < 0)
		return r;
	s = calloc(1, sizeof(*s));
	if (!s) {
		qd_http_global_cleanup();
		return memd_error_set(err, MEMD_ENOMEM, 0, "qdrant: out of memory");
	}
	s->host = host;
	s->distance = dist;
	s->collection = strdup(coll);
	if (!s->collection || asprintf(&s->coll_path, "/collections/%s", coll) < 0) {
		s->coll_path = NULL;
		qd_fini(s);
		return memd_error_set(err, MEMD_ENOMEM, 0, "qdrant: out of memory");
	}
	qd_http_config hc = {
		.base_url = url, .api_key = key, .timeout_ms = timeout, .host = host,
	};
	r = qd_http_new(&hc, &s->http, err);
	if (r < 0) {
		qd_fini(s);
		return r;
	}
	*ret_instance = s;
	return 0;
}

/* ---- helpers ----------------------------------------------------------- */

static int32_t nomem(memd_error *err)
{
	return memd_error_set(err, MEMD_ENOMEM, 0, "qdrant: out of memory");
}

/* obj[key] = a new value (stolen); nonzero on ENOMEM. */
static int set_new(json_t *obj, const char *key, json_t *v)
{
	return !v || json_object_set_new(obj, key, v) != 0;
}

static int append_new(json_t *arr, json_t *v)
{
	return !v || json_array_append_new(arr, v) != 0;
}

/* Send a JSON document (borrowed) as the body. */
static int32_t request_json(qd_store *s, const memd_call *call, const char *method,
			    const char *path, json_t *body, json_t **ret, long *ret_status,
			    memd_error *err)
{
	char *text = NULL;
	int32_t r;

	if (body) {
		text = json_dumps(body, QD_JSON_FLAGS);
		if (!text)
			return nomem(err);
	}
	r = qd_http_request(s->http, call, method, path, text, ret, ret_status, err);
	free(text);
	return r;
}

/* The "result" member of a Qdrant envelope, or MEMD_EIO. */
static int32_t envelope_result(json_t *j, const char *what, json_t **ret, memd_error *err)
{
	json_t *res = json_is_object(j) ? json_object_get(j, "result") : NULL;

	if (!res)
		return memd_error_set(err, MEMD_EIO, 0, "qdrant: %s: answer has no result", what);
	*ret = res;
	return 0;
}

/* A vector as a JSON array; MEMD_EINVAL on NaN or infinity. */
static int32_t vector_json(const float *v, uint32_t dim, json_t **ret, memd_error *err)
{
	json_t *a = json_array();

	if (!a)
		return nomem(err);
	for (uint32_t i = 0; i < dim; i++) {
		if (!isfinite(v[i])) {
			json_decref(a);
			return memd_error_set(err, MEMD_EINVAL, 0,
					      "qdrant: vector element %u is not a finite number", i);
		}
		if (append_new(a, json_real((double)v[i]))) {
			json_decref(a);
			return nomem(err);
		}
	}
	*ret = a;
	return 0;
}

static json_t *match_value(const char *key, const char *value)
{
	return json_pack("{s:s, s:{s:s}}", "key", key, "match", "value", value);
}

/* The Qdrant filter for f: must match app, user, and (when given) the
 * session, one of the authors, and the open time range. */
static int32_t filter_json(const memd_vector_filter *f, json_t **ret, memd_error *err)
{
	json_t *must = json_array(), *flt;

	if (!f || !f->app || !f->user || !f->app[0] || !f->user[0]) {
		json_decref(must);
		return memd_error_set(err, MEMD_EINVAL, 0, "qdrant: a filter needs app and user");
	}
	if (!must)
		return nomem(err);
	if (append_new(must, match_value("app", f->app)) ||
	    append_new(must, match_value("user", f->user)) ||
	    (f->session && append_new(must, match_value("session", f->session))))
		goto oom;
	if (f->authors && f->n_authors > 0) {
		/* Qdrant's MatchAny wants unique items. */
		json_t *any = json_array();
		if (!any)
			goto oom;
		for (uint32_t i = 0; i < f->n_authors; i++) {
			int dup = 0;
			if (!f->authors[i]) {
				json_decref(any);
				json_decref(must);
				return memd_error_set(err, MEMD_EINVAL, 0,
						      "qdrant: author %u of the filter is NULL", i);
			}
			for (uint32_t k = 0; k < i && !dup; k++)
				dup = f->authors[k] && strcmp(f->authors[k], f->authors[i]) == 0;
			if (!dup && append_new(any, json_string(f->authors[i]))) {
				json_decref(any);
				goto oom;
			}
		}
		if (append_new(must, json_pack("{s:s, s:{s:o}}", "key", "author", "match", "any", any)))
			goto oom;
	}
	if (f->after_us || f->before_us) {
		json_t *range = json_object();
		if (!range || (f->after_us && set_new(range, "gt", json_integer(f->after_us))) ||
		    (f->before_us && set_new(range, "lt", json_integer(f->before_us)))) {
			json_decref(range);
			goto oom;
		}
		if (append_new(must, json_pack("{s:s, s:o}", "key", "timestamp_us", "range", range)))
			goto oom;
	}
	flt = json_pack("{s:o}", "must", must);
	if (!flt)
		return nomem(err);
	*ret = flt;
	return 0;
oom:
	json_decref(must);
	return nomem(err);
}

/* ---- prepare ----------------------------------------------------------- */

/* Check an existing collection's info (the "result" of GET) against dim
 * and distance, and note which of memd's payload indexes it has. */
static int32_t check_collection(qd_store *s, json_t *info, uint32_t dim, int *have_index,
				memd_error *err)
{
	json_t *vectors = json_object_get(
		json_object_get(json_object_get(info, "config"), "params"), "vectors");
	json_t *size = json_object_get(vectors, "size");
	const char *dist = json_string_value(json_object_get(vectors, "distance"));
	json_t *schema = json_object_get(info, "payload_schema");

	if (!json_is_object(vectors))
		return memd_error_set(err, MEMD_EIO, 0,
				      "qdrant: collection %s: info has no config.params.vectors",
				      s->collection);
	if (!json_is_integer(size))
		return memd_error_set(err, MEMD_ECONFLICT, 0,
				      "qdrant: collection %s uses named vectors; memd needs one "
				      "unnamed vector: use another collection",
				      s->collection);
	if (json_integer_value(size) != (json_int_t)dim)
		return memd_error_set(err, MEMD_ECONFLICT, 0,
				      "qdrant: collection %s holds %lld-dimensional vectors, the "
				      "embedder makes %u: use another collection or rebuild the index",
				      s->collection, (long long)json_integer_value(size), dim);
	if (!dist || strcmp(dist, s->distance) != 0)
		return memd_error_set(err, MEMD_ECONFLICT, 0,
				      "qdrant: collection %s uses distance %s, configured is %s",
				      s->collection, dist ? dist : "(none)", s->distance);
	for (size_t i = 0; i < QD_N_INDEXES; i++) {
		json_t *idx = json_object_get(schema, qd_indexes[i].field);
		const char *t = json_string_value(json_object_get(idx, "data_type"));
		have_index[i] = t && strcmp(t, "keyword") == 0;
	}
	return 0;
}

/* GET the collection; *ret_exists is 0 when Qdrant says 404. */
static int32_t get_collection(qd_store *s, const memd_call *call, uint32_t dim, int *ret_exists,
			      int *have_index, memd_error *err)
{
	json_t *j = NULL, *info = NULL;
	int32_t r = request_json(s, call, "GET", s->coll_path, NULL, &j, NULL, err);

	if (r == MEMD_ENOTFOUND) {
		*ret_exists = 0;
		return 0;
	}
	if (r < 0)
		return r;
	r = envelope_result(j, s->coll_path, &info, err);
	if (r == 0)
		r = check_collection(s, info, dim, have_index, err);
	json_decref(j);
	if (r == 0)
		*ret_exists = 1;
	return r;
}

static int32_t create_index(qd_store *s, const memd_call *call, const struct qd_index_spec *spec,
			    memd_error *err)
{
	char *path = NULL;
	json_t *body, *res = NULL;
	int32_t r;

	if (spec->tenant)
		body = json_pack("{s:s, s:{s:s, s:b}}", "field_name", spec->field, "field_schema",
				 "type", "keyword", "is_tenant", 1);
	else
		body = json_pack("{s:s, s:s}", "field_name", spec->field, "field_schema", "keyword");
	if (!body || asprintf(&path, "%s/index?wait=true", s->coll_path) < 0) {
		json_decref(body);
		return nomem(err);
	}
	r = request_json(s, call, "PUT", path, body, &res, NULL, err);
	json_decref(res);
	json_decref(body);
	free(path);
	return r;
}

static int32_t qd_prepare(void *inst, const memd_call *call, uint32_t dim, memd_error *err)
{
	qd_store *s = inst;
	int have_index[QD_N_INDEXES] = { 0 };
	int exists = 0, created = 0;
	int32_t r;

	if (dim == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "qdrant: dimension must be at least 1");
	r = get_collection(s, call, dim, &exists, have_index, err);
	if (r < 0)
		return r;
	if (!exists) {
		json_t *body = json_pack("{s:{s:I, s:s}}", "vectors", "size", (json_int_t)dim,
					 "distance", s->distance);
		json_t *res = NULL;
		if (!body)
			return nomem(err);
		r = request_json(s, call, "PUT", s->coll_path, body, &res, NULL, err);
		json_decref(body);
		json_decref(res);
		if (r == MEMD_ECONFLICT) {
			/* Another process created it meanwhile: check it. */
			r = get_collection(s, call, dim, &exists, have_index, err);
			if (r == 0 && !exists)
				r = memd_error_set(err, MEMD_EUNAVAIL, MEMD_ERROR_RETRYABLE,
						   "qdrant: collection %s: creating it said it "
						   "exists, then it was not found",
						   s->collection);
		} else if (r == 0) {
			created = 1;
		}
		if (r < 0)
			return r;
	}
	for (size_t i = 0; i < QD_N_INDEXES; i++) {
		if (have_index[i])
			continue;
		r = create_index(s, call, &qd_indexes[i], err);
		if (r < 0)
			return r;
	}
	atomic_store(&s->dim, dim);
	if (s->host->log)
		s->host->log(s->host, MEMD_LOG_INFO, "collection %s %s (%u dimensions, %s)",
			     s->collection, created ? "created" : "ready", dim, s->distance);
	return 0;
}

/* ---- upsert ------------------------------------------------------------ */

static int32_t check_record(uint32_t want_dim, const memd_vector_record *rec, uint32_t i,
			    memd_error *err)
{
	if (!rec || !rec->app || !rec->user || !rec->session || !rec->event_id || !rec->vector)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "qdrant: record %u lacks app, user, session, event id or vector",
				      i);
	if (!rec->app[0] || !rec->user[0] || !rec->session[0] || !rec->event_id[0])
		return memd_error_set(err, MEMD_EINVAL, 0, "qdrant: record %u has an empty id", i);
	if (rec->dim == 0 || (want_dim && rec->dim != want_dim))
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "qdrant: record %u has %u dimensions, the collection %u", i,
				      rec->dim, want_dim);
	if (rec->seq < 0 || rec->seq > QD_JSON_INT_EXACT_MAX || rec->timestamp_us < 0 ||
	    rec->timestamp_us > QD_JSON_INT_EXACT_MAX)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "qdrant: record %u: seq and timestamp must be 0..2^53", i);
	return 0;
}

static int32_t point_json(const memd_vector_record *rec, json_t **ret, memd_error *err)
{
	const char *parts[4] = { rec->app, rec->user, rec->session, rec->event_id };
	char id[QD_UUID_TEXT_LEN + 1];
	json_t *vec = NULL, *payload, *p;
	int32_t r;

	qd_uuid_v5(qd_point_namespace, parts, 4, id);
	r = vector_json(rec->vector, rec->dim, &vec, err);
	if (r < 0)
		return r;
	payload = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I}", "app", rec->app, "user", rec->user,
			    "session", rec->session, "event_id", rec->event_id, "seq",
			    (json_int_t)rec->seq, "timestamp_us", (json_int_t)rec->timestamp_us);
	if (payload && rec->author && set_new(payload, "author", json_string(rec->author))) {
		json_decref(payload);
		payload = NULL;
	}
	if (!payload) {
		json_decref(vec);
		return nomem(err);
	}
	p = json_pack("{s:s, s:o, s:o}", "id", id, "vector", vec, "payload", payload);
	if (!p)
		return nomem(err);
	*ret = p;
	return 0;
}

static int32_t qd_upsert(void *inst, const memd_call *call, const memd_vector_record *const *records,
			 uint32_t n, memd_error *err)
{
	qd_store *s = inst;
	uint32_t want_dim = atomic_load(&s->dim);
	int recreated = 0;
	char *path = NULL;
	int32_t r = 0;

	for (uint32_t i = 0; i < n; i++) {
		r = check_record(want_dim, records[i], i, err);
		if (r < 0)
			return r;
	}
	if (n == 0)
		return 0;
	if (asprintf(&path, "%s/points?wait=true", s->coll_path) < 0)
		return nomem(err);
	for (uint32_t from = 0; from < n && r == 0; from += QD_UPSERT_CHUNK) {
		uint32_t to = n - from > QD_UPSERT_CHUNK ? from + QD_UPSERT_CHUNK : n;
		json_t *points = json_array(), *body, *res = NULL;
		if (!points) {
			r = nomem(err);
			break;
		}
		for (uint32_t i = from; i < to && r == 0; i++) {
			json_t *p = NULL;
			r = point_json(records[i], &p, err);
			if (r == 0 && append_new(points, p))
				r = nomem(err);
		}
		if (r < 0) {
			json_decref(points);
			break;
		}
		body = json_pack("{s:o}", "points", points);
		if (!body) {
			r = nomem(err);
			break;
		}
		r = request_json(s, call, "PUT", path, body, &res, NULL, err);
		json_decref(res);
		res = NULL;
		if (r == MEMD_ENOTFOUND && want_dim && !recreated) {
			/* The collection vanished after prepare (deleted by hand to
			 * drop the vectors?): make it again as at start and resend
			 * this request once. */
			recreated = 1;
			if (s->host->log)
				s->host->log(s->host, MEMD_LOG_WARN,
					     "collection %s is gone; creating it again",
					     s->collection);
			r = qd_prepare(s, call, want_dim, err);
			if (r == 0)
				r = request_json(s, call, "PUT", path, body, &res, NULL, err);
			json_decref(res);
		}
		json_decref(body);
	}
	free(path);
	return r;
}

/* ---- remove ------------------------------------------------------------ */

static int32_t qd_remove(void *inst, const memd_call *call, const memd_vector_filter *f,
			 memd_error *err)
{
	qd_store *s = inst;
	json_t *flt = NULL, *body, *res = NULL;
	char *path = NULL;
	int32_t r = filter_json(f, &flt, err);

	if (r < 0)
		return r;
	body = json_pack("{s:o}", "filter", flt);
	if (!body || asprintf(&path, "%s/points/delete?wait=true", s->coll_path) < 0) {
		json_decref(body);
		return nomem(err);
	}
	r = request_json(s, call, "POST", path, body, &res, NULL, err);
	json_decref(res);
	json_decref(body);
	free(path);
	return r;
}

/* The events' points by id (the UUIDv5 of their scope and event id, as
 * upsert makes them), QD_UPSERT_CHUNK ids a request; ids without a point
 * are ignored by Qdrant. */
static int32_t qd_remove_events(void *inst, const memd_call *call, const memd_scope *scope,
				const char *const *event_ids, uint32_t n, memd_error *err)
{
	qd_store *s = inst;
	char *path = NULL;
	int32_t r = 0;

	if (!scope || !scope->app || !scope->app[0] || !scope->user || !scope->user[0] ||
	    !scope->session || !scope->session[0])
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "qdrant: remove_events needs app, user and session");
	for (uint32_t i = 0; i < n; i++)
		if (!event_ids || !event_ids[i] || !event_ids[i][0])
			return memd_error_set(err, MEMD_EINVAL, 0,
					      "qdrant: remove_events: event id %u is empty", i);
	if (n == 0)
		return 0;
	if (asprintf(&path, "%s/points/delete?wait=true", s->coll_path) < 0)
		return nomem(err);
	for (uint32_t from = 0; from < n && r == 0; from += QD_UPSERT_CHUNK) {
		uint32_t to = n - from > QD_UPSERT_CHUNK ? from + QD_UPSERT_CHUNK : n;
		json_t *ids = json_array(), *body, *res = NULL;
		if (!ids) {
			r = nomem(err);
			break;
		}
		for (uint32_t i = from; i < to && r == 0; i++) {
			const char *parts[4] = { scope->app, scope->user, scope->session, event_ids[i] };
			char id[QD_UUID_TEXT_LEN + 1];
			qd_uuid_v5(qd_point_namespace, parts, 4, id);
			if (append_new(ids, json_string(id)))
				r = nomem(err);
		}
		body = r == 0 ? json_pack("{s:o}", "points", ids) : NULL;
		if (r < 0 || !body) {
			if (r == 0)
				r = nomem(err);
			else
				json_decref(ids);
			break;
		}
		r = request_json(s, call, "POST", path, body, &res, NULL, err);
		json_decref(res);
		json_decref(body);
	}
	free(path);
	return r;
}

/* ---- query ------------------------------------------------------------- */

static const char *payload_str(json_t *payload, const char *key)
{
	return json_string_value(json_object_get(payload, key));
}

/* Deliver one scored point; MEMD_EIO if it is not one of memd's or lies
 * outside the filter's scope (a query never returns another tenant's
 * data, even from a misbehaving server). */
static int32_t deliver_hit(json_t *pt, const memd_vector_filter *f, const memd_vector_hit_sink *out,
			   uint32_t i, memd_error *err)
{
	json_t *payload = json_object_get(pt, "payload");
	json_t *score = json_object_get(pt, "score");
	memd_vector_hit h = { .struct_size = sizeof(h) };

	h.app = payload_str(payload, "app");
	h.user = payload_str(payload, "user");
	h.session = payload_str(payload, "session");
	h.event_id = payload_str(payload, "event_id");
	h.author = payload_str(payload, "author");
	if (!json_is_number(score) || !h.app || !h.user || !h.session || !h.event_id)
		return memd_error_set(err, MEMD_EIO, 0,
				      "qdrant: hit %u lacks a score or memd's payload (app, user, "
				      "session, event_id)",
				      i);
	if (strcmp(h.app, f->app) != 0 || strcmp(h.user, f->user) != 0 ||
	    (f->session && strcmp(h.session, f->session) != 0))
		return memd_error_set(err, MEMD_EIO, 0,
				      "qdrant: hit %u lies outside the query's scope", i);
	h.score = (float)json_number_value(score);
	h.seq = json_integer_value(json_object_get(payload, "seq"));
	h.timestamp_us = json_integer_value(json_object_get(payload, "timestamp_us"));
	return out->hit(out->userdata, &h);
}

static int32_t qd_query(void *inst, const memd_call *call, const float *vector, uint32_t dim,
			const memd_vector_filter *f, uint32_t k, const memd_vector_hit_sink *out,
			memd_error *err)
{
	qd_store *s = inst;
	json_t *flt = NULL, *vec = NULL, *body, *res = NULL, *result = NULL, *points = NULL;
	char *path = NULL;
	int32_t r;

	uint32_t want_dim = atomic_load(&s->dim);

	if (!vector || dim == 0 || (want_dim && dim != want_dim))
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "qdrant: query vector has %u dimensions, the collection %u", dim,
				      want_dim);
	if (!out || !out->hit)
		return memd_error_set(err, MEMD_EINVAL, 0, "qdrant: no hit sink");
	r = filter_json(f, &flt, err);
	if (r < 0)
		return r;
	if (k == 0) {
		json_decref(flt);
		return 0;
	}
	r = vector_json(vector, dim, &vec, err);
	if (r < 0) {
		json_decref(flt);
		return r;
	}
	body = json_pack("{s:o, s:o, s:I, s:b}", "query", vec, "filter", flt, "limit",
			 (json_int_t)k, "with_payload", 1);
	if (!body || asprintf(&path, "%s/points/query", s->coll_path) < 0) {
		json_decref(body);
		return nomem(err);
	}
	r = request_json(s, call, "POST", path, body, &res, NULL, err);
	json_decref(body);
	if (r == 0)
		r = envelope_result(res, path, &result, err);
	if (r == 0) {
		points = json_object_get(result, "points");
		if (!json_is_array(points))
			r = memd_error_set(err, MEMD_EIO, 0, "qdrant: %s: answer has no points", path);
	}
	if (r == 0) {
		size_t n = json_array_size(points);
		pu_rows_read(call, n);
		for (size_t i = 0; i < n && i < k && r == 0; i++)
			r = deliver_hit(json_array_get(points, i), f, out, (uint32_t)i, err);
	}
	json_decref(res);
	free(path);
	return r;
}

/* ---- ping -------------------------------------------------------------- */

static int32_t qd_ping(void *inst, const memd_call *call, memd_error *err)
{
	qd_store *s = inst;

	return qd_http_request(s->http, call, "GET", "/readyz", NULL, NULL, NULL, err);
}

/* ---- descriptor -------------------------------------------------------- */

static const memd_vector_ops vector_ops = {
	.struct_size = sizeof(memd_vector_ops),
	.upsert = qd_upsert,
	.remove = qd_remove,
	.query = qd_query,
	.ping = qd_ping,
	.prepare = qd_prepare,
	.remove_events = qd_remove_events,
};

static const memd_plugin descriptor = {
	.struct_size = sizeof(memd_plugin),
	.abi_major = MEMD_ABI_MAJOR,
	.abi_minor = 0,
	.kind = MEMD_KIND_VECTOR,
	.flags = MEMD_PLUGIN_THREADSAFE,
	.name = "qdrant",
	.version = QD_PLUGIN_VERSION,
	.description = "Qdrant vector store over REST (libcurl): tenant payload indexes, "
		       "UUIDv5 point ids, wait=true writes",
	.config_keys = config_keys,
	.init = qd_init,
	.fini = qd_fini,
	.vector = &vector_ops,
};

MEMD_PLUGIN_EXPORT const memd_plugin *memd_plugin_entry_v1(void)
{
	return &descriptor;
}
