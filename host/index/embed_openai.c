/* SPDX-License-Identifier: MIT */
#include "embed_openai.h"

#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/settings.h"
#include "util/call_time.h"

#define EO_TAG "embedder openai"
#define EO_COMPONENT "index.vector.embedder"
#define EO_PATH "/embeddings"
#define EO_V1_PATH "/v1/embeddings"
#define EO_V1 "/v1"
#define EO_AUTH_PREFIX "Authorization: Bearer "
#define EO_KEY_ENV "OPENAI_API_KEY"
#define EO_HTTP_OK_MIN 200
#define EO_HTTP_OK_MAX 299
#define EO_HTTP_UNAUTHORIZED 401
#define EO_HTTP_FORBIDDEN 403
#define EO_HTTP_TOO_MANY 429
#define EO_HTTP_CLIENT_MIN 400
#define EO_HTTP_SERVER_MIN 500
#define EO_DETAIL_MAX 160          /* bytes of a server's message quoted */
#define EO_CONNECT_TIMEOUT_MS 5000
#define EO_MS_PER_S 1000

typedef struct embed_openai {
	char *endpoint;
	char *model;
	char *auth;                 /* "Authorization: Bearer ..." or NULL; secret */
	int64_t timeout_ms;
	uint32_t batch;
	hostsvc *svc;
	pthread_mutex_t lock;       /* guards dim */
	uint32_t dim;               /* 0 until configured or learned */
	int dim_configured;
} embed_openai;

typedef struct eo_buf {
	char *data;
	size_t len;
	int too_big;
} eo_buf;

/* ---- create / destroy ---------------------------------------------------- */

static const char *node_text(const config_node *node, const char *key)
{
	const config_node *v = node ? config_map_get(node, key) : NULL;
	const char *s = v ? config_scalar(v) : NULL;

	return s && s[0] ? s : NULL;
}

static int32_t node_int(const config_node *node, const char *key, int64_t dflt, int64_t min,
			int64_t max, int64_t *ret, memd_error *err)
{
	const config_node *v = node ? config_map_get(node, key) : NULL;
	int64_t x = dflt;

	if (v && config_node_type(v) != CONFIG_NULL && config_as_int(v, &x) < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "%s:%u: " EO_COMPONENT ".%s: not an integer",
				      config_node_file(v), config_node_line(v), key);
	if (x < min || x > max)
		return memd_error_set(err, MEMD_EINVAL, 0, EO_COMPONENT ".%s: must be %lld..%lld",
				      key, (long long)min, (long long)max);
	*ret = x;
	return 0;
}

static void eo_free(embed_openai *e)
{
	if (!e)
		return;
	if (e->auth) {
		volatile char *p = e->auth; /* a secret: do not leave it in freed memory */
		while (*p)
			*p++ = '\0';
		free(e->auth);
	}
	free(e->endpoint);
	free(e->model);
	pthread_mutex_destroy(&e->lock);
	free(e);
}

static void eo_destroy(void *inst)
{
	if (!inst)
		return;
	eo_free(inst);
	curl_global_cleanup();
}

/* ".../embeddings" as is; ".../v1" + "/embeddings"; else + "/v1/embeddings". */
static char *endpoint_for(const char *url)
{
	size_t ul = strlen(url), pl = strlen(EO_PATH), vl = strlen(EO_V1);
	const char *suffix = EO_V1_PATH;
	char *out;

	while (ul > 0 && url[ul - 1] == '/')
		ul--;
	if (ul >= pl && strncmp(url + ul - pl, EO_PATH, pl) == 0)
		suffix = "";
	else if (ul >= vl && strncmp(url + ul - vl, EO_V1, vl) == 0)
		suffix = EO_PATH;
	if (asprintf(&out, "%.*s%s", (int)ul, url, suffix) < 0)
		return NULL;
	return out;
}

static int32_t eo_create(const config_node *node, hostsvc *svc, void **ret_inst, memd_error *err)
{
	const char *url = node_text(node, "url"), *model = node_text(node, "model");
	const char *key = node_text(node, "api_key");
	const config_node *dn = node ? config_map_get(node, "dim") : NULL;
	int64_t batch, timeout, dim = 0;
	embed_openai *e;
	int32_t r;

	if (!url)
		return memd_error_set(err, MEMD_EINVAL, 0, EO_COMPONENT ".url: required for type openai");
	if (strncmp(url, "http://", strlen("http://")) != 0 &&
	    strncmp(url, "https://", strlen("https://")) != 0)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      EO_COMPONENT ".url: must start with http:// or https://");
	if (!model)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      EO_COMPONENT ".model: required for type openai");
	if ((r = node_int(node, "batch", SETTINGS_EMBEDDER_BATCH_DEFAULT, 1, UINT32_MAX, &batch,
			  err)) < 0 ||
	    (r = node_int(node, "timeout_ms", SETTINGS_EMBEDDER_TIMEOUT_MS_DEFAULT, 1, INT32_MAX,
			  &timeout, err)) < 0)
		return r;
	if (dn && config_node_type(dn) != CONFIG_NULL &&
	    (r = node_int(node, "dim", 0, 1, SETTINGS_EMBEDDER_DIM_MAX, &dim, err)) < 0)
		return r;
	if (!key) {
		const char *env = getenv(EO_KEY_ENV);
		key = env && env[0] ? env : NULL;
	}
	if (key && strpbrk(key, "\r\n"))
		return memd_error_set(err, MEMD_EINVAL, 0,
				      EO_COMPONENT ".api_key: must not contain line breaks");

	e = calloc(1, sizeof(*e));
	if (!e)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	if (pthread_mutex_init(&e->lock, NULL) != 0) {
		free(e);
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	e->endpoint = endpoint_for(url);
	e->model = strdup(model);
	if (key && asprintf(&e->auth, EO_AUTH_PREFIX "%s", key) < 0)
		e->auth = NULL;
	if (!e->endpoint || !e->model || (key && !e->auth)) {
		eo_free(e);
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	e->timeout_ms = timeout;
	e->batch = (uint32_t)batch;
	e->svc = svc;
	e->dim = (uint32_t)dim;
	e->dim_configured = dim > 0;
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		eo_free(e);
		return memd_error_set(err, MEMD_EINTERNAL, 0, EO_TAG ": libcurl did not initialise");
	}
	*ret_inst = e;
	return 0;
}

/* ---- one HTTP attempt --------------------------------------------------- */

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	eo_buf *b = userdata;
	size_t n = size * nmemb;
	char *d;

	if (b->len + n + 1 > EMBED_OPENAI_RESPONSE_MAX_BYTES) {
		b->too_big = 1;
		return 0;
	}
	d = realloc(b->data, b->len + n + 1);
	if (!d)
		return 0;
	memcpy(d + b->len, ptr, n);
	b->data = d;
	b->len += n;
	d[b->len] = '\0';
	return n;
}

static int on_progress(void *userdata, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	(void)a;
	(void)b;
	(void)c;
	(void)d;
	return call_cancelled(userdata) ? 1 : 0;
}

/* The server's error message: {"error": {"message": ...}} (OpenAI), or
 * {"error": "..."}, else the start of the body, printable bytes only. */
static void server_message(const eo_buf *b, char *out, size_t outsz)
{
	json_t *j = b->data ? json_loadb(b->data, b->len, 0, NULL) : NULL;
	json_t *e = json_object_get(j, "error");
	const char *msg = json_is_string(e) ? json_string_value(e)
					    : json_string_value(json_object_get(e, "message"));
	size_t n = 0;

	if (msg) {
		snprintf(out, outsz, "%.*s", EO_DETAIL_MAX, msg);
	} else {
		for (size_t i = 0; b->data && i < b->len && n + 1 < outsz && n < EO_DETAIL_MAX; i++) {
			unsigned char ch = (unsigned char)b->data[i];
			out[n++] = ch >= 0x20 && ch != 0x7f ? (char)ch : ' ';
		}
		out[n] = '\0';
		if (!n)
			snprintf(out, outsz, "(empty body)");
	}
	json_decref(j);
}

typedef struct eo_attempt {
	long status;               /* 0 when no answer */
	int64_t retry_after_ms;    /* the server's Retry-After, or -1 */
	eo_buf body;
} eo_attempt;

/* POST body once. Returns 0 when an HTTP answer arrived (any status, in
 * a->status), or a transport failure mapped to a code (EUNAVAIL +
 * RETRYABLE for network trouble). */
static int32_t post_once(embed_openai *e, const memd_call *call, const char *body, eo_attempt *a,
			 memd_error *err)
{
	char errbuf[CURL_ERROR_SIZE] = "";
	struct curl_slist *h = NULL, *hl;
	int64_t timeout = e->timeout_ms, left = call_left_ms(call);
	int deadline_bound = 0;
	CURLcode c;
	CURL *cu;
	int32_t r = 0;

	memset(a, 0, sizeof(*a));
	a->retry_after_ms = -1;
	if (left <= 0)
		return memd_error_set(err, MEMD_ETIMEDOUT, MEMD_ERROR_RETRYABLE,
				      EO_TAG ": deadline passed");
	if (left < timeout) {
		timeout = left;
		deadline_bound = 1;
	}
	cu = curl_easy_init();
	hl = cu ? curl_slist_append(h, "Content-Type: application/json") : NULL;
	if (hl)
		h = hl;
	if (hl)
		hl = curl_slist_append(h, "Expect:");
	if (hl && e->auth)
		hl = curl_slist_append(h, e->auth);
	if (!hl) {
		curl_slist_free_all(h);
		if (cu)
			curl_easy_cleanup(cu);
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	curl_easy_setopt(cu, CURLOPT_URL, e->endpoint);
#if LIBCURL_VERSION_NUM >= 0x075500 /* 7.85: the string form */
	curl_easy_setopt(cu, CURLOPT_PROTOCOLS_STR, "http,https");
#else
	curl_easy_setopt(cu, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
	curl_easy_setopt(cu, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(cu, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(cu, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(cu, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
	curl_easy_setopt(cu, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(cu, CURLOPT_TIMEOUT_MS, (long)timeout);
	curl_easy_setopt(cu, CURLOPT_CONNECTTIMEOUT_MS,
			 (long)(timeout < EO_CONNECT_TIMEOUT_MS ? timeout : EO_CONNECT_TIMEOUT_MS));
	curl_easy_setopt(cu, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(cu, CURLOPT_WRITEDATA, &a->body);
	curl_easy_setopt(cu, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(cu, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(cu, CURLOPT_XFERINFODATA, (void *)call);
	c = curl_easy_perform(cu);
	if (c == CURLE_OK) {
		curl_off_t ra = -1;
		curl_easy_getinfo(cu, CURLINFO_RESPONSE_CODE, &a->status);
		if (curl_easy_getinfo(cu, CURLINFO_RETRY_AFTER, &ra) == CURLE_OK && ra >= 0)
			a->retry_after_ms = (int64_t)ra * EO_MS_PER_S;
	} else if (c == CURLE_ABORTED_BY_CALLBACK) {
		r = memd_error_set(err, MEMD_ECANCELED, 0, EO_TAG ": call cancelled");
	} else if (c == CURLE_OPERATION_TIMEDOUT && deadline_bound) {
		r = memd_error_set(err, MEMD_ETIMEDOUT, MEMD_ERROR_RETRYABLE,
				   EO_TAG ": deadline passed");
	} else if (c == CURLE_WRITE_ERROR && a->body.too_big) {
		r = memd_error_set(err, MEMD_EIO, 0, EO_TAG ": answer larger than %u bytes",
				   EMBED_OPENAI_RESPONSE_MAX_BYTES);
	} else if (c == CURLE_OUT_OF_MEMORY || c == CURLE_WRITE_ERROR) {
		r = memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	} else {
		r = memd_error_set(err, MEMD_EUNAVAIL, MEMD_ERROR_RETRYABLE, EO_TAG ": %s: %s",
				   e->endpoint, errbuf[0] ? errbuf : curl_easy_strerror(c));
	}
	curl_slist_free_all(h);
	curl_easy_cleanup(cu);
	return r;
}

/* POST body with retries; on success *ret owns the parsed answer. */
static int32_t post(embed_openai *e, const memd_call *call, const char *body, json_t **ret,
		    memd_error *err)
{
	char detail[EO_DETAIL_MAX + 1];
	int32_t r = 0;

	for (int attempt = 0;; attempt++) {
		eo_attempt a;
		int retryable;

		if (call_cancelled(call))
			return memd_error_set(err, MEMD_ECANCELED, 0, EO_TAG ": call cancelled");
		r = post_once(e, call, body, &a, err);
		if (r == 0 && a.status >= EO_HTTP_OK_MIN && a.status <= EO_HTTP_OK_MAX) {
			json_t *j = a.body.data ? json_loadb(a.body.data, a.body.len, 0, NULL) : NULL;
			free(a.body.data);
			if (!j)
				return memd_error_set(err, MEMD_EIO, 0,
						      EO_TAG ": %s answered HTTP %ld with a body that "
						      "is not JSON",
						      e->endpoint, a.status);
			*ret = j;
			return 0;
		}
		if (r == 0) {
			server_message(&a.body, detail, sizeof(detail));
			if (a.status == EO_HTTP_TOO_MANY || a.status >= EO_HTTP_SERVER_MIN)
				r = memd_error_set(err, MEMD_EUNAVAIL, MEMD_ERROR_RETRYABLE,
						   EO_TAG ": %s: HTTP %ld: %s", e->endpoint, a.status,
						   detail);
			else if (a.status == EO_HTTP_UNAUTHORIZED || a.status == EO_HTTP_FORBIDDEN)
				r = memd_error_set(err, MEMD_EAUTH, 0,
						   EO_TAG ": %s refused the API key (HTTP %ld): %s",
						   e->endpoint, a.status, detail);
			else if (a.status >= EO_HTTP_CLIENT_MIN)
				r = memd_error_set(err, MEMD_EINVAL, 0,
						   EO_TAG ": %s: HTTP %ld (model %.64s): %s",
						   e->endpoint, a.status, e->model, detail);
			else
				r = memd_error_set(err, MEMD_EIO, 0, EO_TAG ": %s: unexpected HTTP %ld",
						   e->endpoint, a.status);
		}
		free(a.body.data);
		retryable = r == MEMD_EUNAVAIL;
		if (!retryable || attempt >= EMBED_OPENAI_RETRIES)
			return r;
		int64_t wait = (int64_t)EMBED_OPENAI_BACKOFF_BASE_MS << attempt;
		if (a.retry_after_ms >= 0)
			wait = a.retry_after_ms;
		if (wait > EMBED_OPENAI_BACKOFF_MAX_MS)
			wait = EMBED_OPENAI_BACKOFF_MAX_MS;
		hostsvc_log(e->svc, MEMD_LOG_DEBUG, EO_COMPONENT, "%s (retry %d in %lld ms)", err->msg,
			    attempt + 1, (long long)wait);
		call_backoff_sleep(call, wait);
	}
}

/* ---- request and answer -------------------------------------------------- */

/* The longest prefix of s (at most max bytes) that ends on a UTF-8
 * character boundary. */
static size_t utf8_cut(const char *s, size_t len, size_t max)
{
	if (len <= max)
		return len;
	while (max > 0 && ((unsigned char)s[max] & 0xc0u) == 0x80u)
		max--;
	return max;
}

/* {"model": ..., "input": [texts[idx[0..n)]]} as text (malloc'd). */
static int32_t request_body(const embed_openai *e, const char *const *texts, const uint32_t *idx,
			    uint32_t n, char **ret, memd_error *err)
{
	json_t *input = json_array(), *body;
	char *text;

	if (!input)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	for (uint32_t i = 0; i < n; i++) {
		const char *t = texts[idx[i]];
		size_t len = utf8_cut(t, strlen(t), EMBED_OPENAI_MAX_INPUT_BYTES);
		json_t *s = json_stringn(t, len);
		if (!s) {
			json_decref(input);
			return memd_error_set(err, MEMD_EINVAL, 0, EO_TAG ": text %u is not valid UTF-8",
					      idx[i]);
		}
		if (json_array_append_new(input, s) != 0) {
			json_decref(input);
			return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
		}
	}
	body = json_pack("{s:s, s:o}", "model", e->model, "input", input);
	text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(body);
	if (!text)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	*ret = text;
	return 0;
}

static int32_t dim_mismatch(const embed_openai *e, size_t got, uint32_t want, memd_error *err)
{
	return memd_error_set(err, MEMD_ECONFLICT, 0,
			      EO_TAG ": model %.64s returned %zu-dimensional vectors, expected %u (%s): "
			      "fix index.vector.embedder or rebuild the index for the new model",
			      e->model, got, want,
			      e->dim_configured ? "index.vector.embedder.dim" : "learned at start");
}

/* Check an answer for n inputs. *dim is the expected size, or 0 to learn
 * it (then set). When out is not NULL, item k's vector goes to
 * out + k * dim, L2-normalized. */
static int32_t parse_answer(const embed_openai *e, json_t *j, uint32_t n, uint32_t *dim, float *out,
			    memd_error *err)
{
	json_t *data = json_object_get(j, "data"), *item;
	unsigned char *seen;
	size_t i;

	if (!json_is_array(data) || json_array_size(data) != n)
		return memd_error_set(err, MEMD_EIO, 0,
				      EO_TAG ": answer has %zu embeddings for %u inputs (want "
				      "{\"data\": [{\"index\", \"embedding\"}...]})",
				      json_is_array(data) ? json_array_size(data) : 0, n);
	seen = calloc(n ? n : 1, 1);
	if (!seen)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	json_array_foreach(data, i, item) {
		json_t *ix = json_object_get(item, "index"), *emb = json_object_get(item, "embedding");
		json_int_t k = json_is_integer(ix) ? json_integer_value(ix) : -1;
		size_t m = json_array_size(emb);
		double norm = 0;

		if (k < 0 || k >= (json_int_t)n || seen[k] || !json_is_array(emb) || m == 0) {
			free(seen);
			return memd_error_set(err, MEMD_EIO, 0,
					      EO_TAG ": embedding %zu of the answer has a bad index or "
					      "no vector",
					      i);
		}
		seen[k] = 1;
		if (*dim == 0) {
			if (m > SETTINGS_EMBEDDER_DIM_MAX) {
				free(seen);
				return memd_error_set(err, MEMD_EIO, 0,
						      EO_TAG ": %zu dimensions is more than %d", m,
						      SETTINGS_EMBEDDER_DIM_MAX);
			}
			*dim = (uint32_t)m;
		}
		if (m != *dim) {
			free(seen);
			return dim_mismatch(e, m, *dim, err);
		}
		for (size_t d = 0; d < m; d++) {
			json_t *x = json_array_get(emb, d);
			if (!json_is_number(x)) {
				free(seen);
				return memd_error_set(err, MEMD_EIO, 0,
						      EO_TAG ": embedding %zu has a non-number", i);
			}
			double v = json_number_value(x);
			norm += v * v;
			if (out)
				out[(size_t)k * m + d] = (float)v;
		}
		if (out && norm > 0) {
			float inv = (float)(1.0 / sqrt(norm));
			for (size_t d = 0; d < m; d++)
				out[(size_t)k * m + d] *= inv;
		}
	}
	free(seen);
	return 0;
}

/* Embed the n texts texts[idx[..]] in one request into out (n * dim). */
static int32_t embed_batch(embed_openai *e, const memd_call *call, const char *const *texts,
			   const uint32_t *idx, uint32_t n, uint32_t *dim, float *out,
			   memd_error *err)
{
	char *body = NULL;
	json_t *answer = NULL;
	int32_t r = request_body(e, texts, idx, n, &body, err);

	if (r == 0)
		r = post(e, call, body, &answer, err);
	if (r == 0)
		r = parse_answer(e, answer, n, dim, out, err);
	json_decref(answer);
	free(body);
	return r;
}

/* ---- ops ------------------------------------------------------------------- */

static int32_t eo_dimension(void *inst, uint32_t *ret_dim, memd_error *err)
{
	embed_openai *e = inst;
	static const char *const probe[] = { EMBED_OPENAI_PROBE_TEXT };
	static const uint32_t probe_idx[] = { 0 };
	uint32_t dim;
	int32_t r;

	pthread_mutex_lock(&e->lock);
	dim = e->dim;
	pthread_mutex_unlock(&e->lock);
	if (dim) {
		*ret_dim = dim;
		return 0;
	}
	r = embed_batch(e, NULL, probe, probe_idx, 1, &dim, NULL, err);
	if (r < 0) {
		char why[MEMD_ERROR_MSG_MAX];
		snprintf(why, sizeof(why), "%s", err->msg);
		return memd_error_set(err, r, err->flags,
				      "%s (learning the dimension; set " EO_COMPONENT
				      ".dim to start without the endpoint)",
				      why);
	}
	pthread_mutex_lock(&e->lock);
	if (!e->dim)
		e->dim = dim;
	dim = e->dim;
	pthread_mutex_unlock(&e->lock);
	hostsvc_log(e->svc, MEMD_LOG_INFO, EO_COMPONENT, "model %s makes %u-dimensional vectors",
		    e->model, dim);
	*ret_dim = dim;
	return 0;
}

static int has_text(const char *s)
{
	for (; *s; s++)
		if (*s != ' ' && *s != '\t' && *s != '\n' && *s != '\r')
			return 1;
	return 0;
}

static int32_t eo_embed(void *inst, const memd_call *call, const char *const *texts, uint32_t n,
			float *ret_vectors, memd_error *err)
{
	embed_openai *e = inst;
	uint32_t dim, n_idx = 0, *idx = NULL;
	float *tmp = NULL;
	int32_t r = 0;

	pthread_mutex_lock(&e->lock);
	dim = e->dim;
	pthread_mutex_unlock(&e->lock);
	if (!dim)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      EO_TAG ": the dimension is not known yet (call dimension first)");
	if (n == 0)
		return 0;
	for (uint32_t i = 0; i < n; i++)
		if (!texts[i])
			return memd_error_set(err, MEMD_EINVAL, 0, EO_TAG ": text %u is NULL", i);
	idx = malloc((size_t)n * sizeof(*idx));
	tmp = calloc((size_t)n * dim, sizeof(float));
	if (!idx || !tmp) {
		free(idx);
		free(tmp);
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	/* Texts without words are not sent: they stay zero vectors. */
	for (uint32_t i = 0; i < n; i++)
		if (has_text(texts[i]))
			idx[n_idx++] = i;
	float *chunk = malloc((size_t)(n_idx < e->batch ? n_idx : e->batch) * dim * sizeof(float) +
			      sizeof(float));
	if (!chunk)
		r = memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	for (uint32_t from = 0; r == 0 && from < n_idx; from += e->batch) {
		uint32_t m = n_idx - from < e->batch ? n_idx - from : e->batch;
		uint32_t d = dim;
		r = embed_batch(e, call, texts, idx + from, m, &d, chunk, err);
		for (uint32_t k = 0; r == 0 && k < m; k++)
			memcpy(tmp + (size_t)idx[from + k] * dim, chunk + (size_t)k * dim,
			       dim * sizeof(float));
	}
	if (r == 0)
		memcpy(ret_vectors, tmp, (size_t)n * dim * sizeof(float));
	free(chunk);
	free(tmp);
	free(idx);
	return r;
}

static const memd_embedder_ops eo_ops = {
	.struct_size = sizeof(memd_embedder_ops),
	.dimension = eo_dimension,
	.embed = eo_embed,
};

const embed_builtin embed_openai_builtin = {
	.type = "openai",
	.create = eo_create,
	.destroy = eo_destroy,
	.ops = &eo_ops,
};
