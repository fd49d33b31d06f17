/* SPDX-License-Identifier: MIT */
#include "qd_http.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define QD_HTTP_API_KEY_HEADER "api-key: "
#define QD_HTTP_STATUS_OK_MIN 200
#define QD_HTTP_STATUS_OK_MAX 299
#define QD_HTTP_STATUS_UNAUTHORIZED 401
#define QD_HTTP_STATUS_FORBIDDEN 403
#define QD_HTTP_STATUS_NOT_FOUND 404
#define QD_HTTP_STATUS_CONFLICT 409
#define QD_HTTP_STATUS_TOO_MANY 429
#define QD_HTTP_STATUS_CLIENT_MIN 400
#define QD_HTTP_STATUS_SERVER_MIN 500
#define QD_HTTP_STATUS_SERVER_MAX 599
/* How much of a non-JSON error body is quoted in a message. */
#define QD_HTTP_QUOTE_MAX 120
#define QD_US_PER_MS 1000

struct qd_http {
	char *base_url;              /* without a trailing '/' */
	char *api_key_header;        /* "api-key: ..." or NULL; secret */
	int64_t timeout_ms;
	const memd_host *host;
	pthread_mutex_t lock;        /* guards idle */
	CURL *idle[QD_HTTP_POOL_MAX];
	size_t n_idle;
};

typedef struct qd_buf {
	char *data;
	size_t len, cap;
	int too_big;
} qd_buf;

int32_t qd_http_global_init(memd_error *err)
{
	CURLcode c = curl_global_init(CURL_GLOBAL_DEFAULT);

	if (c != CURLE_OK)
		return memd_error_set(err, MEMD_EINTERNAL, 0, "qdrant: libcurl did not initialise: %s",
				      curl_easy_strerror(c));
	return 0;
}

void qd_http_global_cleanup(void)
{
	curl_global_cleanup();
}

int32_t qd_http_new(const qd_http_config *cfg, qd_http **ret, memd_error *err)
{
	qd_http *h;
	size_t ul;

	if (!cfg->base_url || (strncmp(cfg->base_url, "http://", 7) != 0 &&
			       strncmp(cfg->base_url, "https://", 8) != 0))
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "qdrant: url must start with http:// or https://");
	if (strpbrk(cfg->base_url, "?# \t\r\n"))
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "qdrant: url must not contain a query, fragment or spaces");
	if (cfg->timeout_ms < 1)
		return memd_error_set(err, MEMD_EINVAL, 0, "qdrant: timeout_ms must be at least 1");
	h = calloc(1, sizeof(*h));
	if (!h)
		return memd_error_set(err, MEMD_ENOMEM, 0, "qdrant: out of memory");
	h->base_url = strdup(cfg->base_url);
	if (!h->base_url)
		goto nomem;
	ul = strlen(h->base_url);
	while (ul > 0 && h->base_url[ul - 1] == '/')
		h->base_url[--ul] = '\0';
	if (cfg->api_key && cfg->api_key[0]) {
		if (strpbrk(cfg->api_key, "\r\n")) {
			free(h->base_url);
			free(h);
			return memd_error_set(err, MEMD_EINVAL, 0,
					      "qdrant: api_key must not contain line breaks");
		}
		if (asprintf(&h->api_key_header, QD_HTTP_API_KEY_HEADER "%s", cfg->api_key) < 0) {
			h->api_key_header = NULL;
			goto nomem;
		}
	}
	h->timeout_ms = cfg->timeout_ms;
	h->host = cfg->host;
	if (pthread_mutex_init(&h->lock, NULL) != 0)
		goto nomem;
	*ret = h;
	return 0;
nomem:
	free(h->base_url);
	free(h);
	return memd_error_set(err, MEMD_ENOMEM, 0, "qdrant: out of memory");
}

void qd_http_free(qd_http *h)
{
	if (!h)
		return;
	for (size_t i = 0; i < h->n_idle; i++)
		curl_easy_cleanup(h->idle[i]);
	pthread_mutex_destroy(&h->lock);
	if (h->api_key_header) {
		/* Do not leave the secret in freed memory. */
		volatile char *p = h->api_key_header;
		while (*p)
			*p++ = '\0';
	}
	free(h->api_key_header);
	free(h->base_url);
	free(h);
}

/* An idle handle (reset), or a new one; NULL on ENOMEM. */
static CURL *pool_take(qd_http *h)
{
	CURL *c = NULL;

	pthread_mutex_lock(&h->lock);
	if (h->n_idle > 0)
		c = h->idle[--h->n_idle];
	pthread_mutex_unlock(&h->lock);
	if (c) {
		curl_easy_reset(c);
		return c;
	}
	return curl_easy_init();
}

static void pool_put(qd_http *h, CURL *c)
{
	pthread_mutex_lock(&h->lock);
	if (h->n_idle < QD_HTTP_POOL_MAX) {
		h->idle[h->n_idle++] = c;
		c = NULL;
	}
	pthread_mutex_unlock(&h->lock);
	if (c)
		curl_easy_cleanup(c);
}

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	qd_buf *b = userdata;
	size_t n = size * nmemb;

	if (b->len + n + 1 > QD_HTTP_MAX_RESPONSE_BYTES) {
		b->too_big = 1;
		return 0;
	}
	if (b->len + n + 1 > b->cap) {
		size_t nc = b->cap ? b->cap : 4096;
		while (nc < b->len + n + 1)
			nc *= 2;
		char *d = realloc(b->data, nc);
		if (!d)
			return 0;
		b->data = d;
		b->cap = nc;
	}
	memcpy(b->data + b->len, ptr, n);
	b->len += n;
	b->data[b->len] = '\0';
	return n;
}

/* Aborts the transfer when the call is cancelled. */
static int on_progress(void *userdata, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	const memd_call *call = userdata;

	(void)dltotal;
	(void)dlnow;
	(void)ultotal;
	(void)ulnow;
	return call && call->cancel && *call->cancel ? 1 : 0;
}

/* Qdrant's error text from an error body: {"status":{"error":"..."}},
 * else the start of the body itself (printable bytes only). */
static void error_text(const qd_buf *b, char *out, size_t outsz)
{
	json_t *j = b->data ? json_loadb(b->data, b->len, 0, NULL) : NULL;
	const char *msg = NULL;

	if (j) {
		json_t *st = json_object_get(j, "status");
		if (json_is_object(st))
			msg = json_string_value(json_object_get(st, "error"));
		else if (json_is_string(st))
			msg = json_string_value(st);
	}
	if (msg) {
		snprintf(out, outsz, "%s", msg);
	} else if (b->data && b->len) {
		size_t n = 0;
		for (size_t i = 0; i < b->len && n + 1 < outsz && n < QD_HTTP_QUOTE_MAX; i++) {
			unsigned char ch = (unsigned char)b->data[i];
			out[n++] = ch >= 0x20 && ch != 0x7f ? (char)ch : ' ';
		}
		out[n] = '\0';
	} else {
		snprintf(out, outsz, "(empty body)");
	}
	json_decref(j);
}

static int32_t map_status(long status, const char *method, const char *path, const qd_buf *b,
			  memd_error *err)
{
	char text[MEMD_ERROR_MSG_MAX];
	int32_t code;
	uint32_t flags = 0;

	error_text(b, text, sizeof(text));
	if (status == QD_HTTP_STATUS_TOO_MANY ||
	    (status >= QD_HTTP_STATUS_SERVER_MIN && status <= QD_HTTP_STATUS_SERVER_MAX)) {
		code = MEMD_EUNAVAIL;
		flags = MEMD_ERROR_RETRYABLE;
	} else if (status == QD_HTTP_STATUS_UNAUTHORIZED || status == QD_HTTP_STATUS_FORBIDDEN) {
		code = MEMD_EAUTH;
	} else if (status == QD_HTTP_STATUS_NOT_FOUND) {
		code = MEMD_ENOTFOUND;
	} else if (status == QD_HTTP_STATUS_CONFLICT) {
		code = MEMD_ECONFLICT;
	} else if (status >= QD_HTTP_STATUS_CLIENT_MIN && status < QD_HTTP_STATUS_SERVER_MIN) {
		code = MEMD_EINVAL;
	} else {
		code = MEMD_EIO;
	}
	return memd_error_set(err, code, flags, "qdrant: %s %s: HTTP %ld: %s", method, path, status,
			      text);
}

static int32_t map_curl_error(CURLcode c, int deadline_bound, const char *method,
			      const char *path, const qd_buf *b, const char *detail,
			      memd_error *err)
{
	switch (c) {
	case CURLE_ABORTED_BY_CALLBACK:
		return memd_error_set(err, MEMD_ECANCELED, 0, "qdrant: %s %s: call cancelled", method,
				      path);
	case CURLE_OPERATION_TIMEDOUT:
		if (deadline_bound)
			return memd_error_set(err, MEMD_ETIMEDOUT, MEMD_ERROR_RETRYABLE,
					      "qdrant: %s %s: deadline passed", method, path);
		return memd_error_set(err, MEMD_EUNAVAIL, MEMD_ERROR_RETRYABLE,
				      "qdrant: %s %s: no answer in time: %s", method, path,
				      detail[0] ? detail : curl_easy_strerror(c));
	case CURLE_OUT_OF_MEMORY:
		return memd_error_set(err, MEMD_ENOMEM, 0, "qdrant: out of memory");
	case CURLE_WRITE_ERROR:
		if (b->too_big)
			return memd_error_set(err, MEMD_EIO, 0,
					      "qdrant: %s %s: response larger than %u bytes", method,
					      path, QD_HTTP_MAX_RESPONSE_BYTES);
		return memd_error_set(err, MEMD_ENOMEM, 0, "qdrant: out of memory");
	case CURLE_URL_MALFORMAT:
	case CURLE_UNSUPPORTED_PROTOCOL:
		return memd_error_set(err, MEMD_EINVAL, 0, "qdrant: %s %s: bad url: %s", method, path,
				      detail[0] ? detail : curl_easy_strerror(c));
	default:
		/* Resolving, connecting, TLS, a dropped connection: the server
		 * may be back later. */
		return memd_error_set(err, MEMD_EUNAVAIL, MEMD_ERROR_RETRYABLE,
				      "qdrant: %s %s: %s", method, path,
				      detail[0] ? detail : curl_easy_strerror(c));
	}
}

int32_t qd_http_request(qd_http *h, const memd_call *call, const char *method,
			const char *path_and_query, const char *body, json_t **ret_json,
			long *ret_status, memd_error *err)
{
	char errbuf[CURL_ERROR_SIZE] = "";
	struct curl_slist *headers = NULL, *hl;
	qd_buf b = { 0 };
	int64_t timeout_ms = h->timeout_ms;
	int deadline_bound = 0;
	char *url = NULL;
	long status = 0;
	CURLcode c;
	CURL *e;
	int32_t r;

	if (ret_status)
		*ret_status = 0;
	if (call && call->cancel && *call->cancel)
		return memd_error_set(err, MEMD_ECANCELED, 0, "qdrant: call cancelled");
	if (call && call->deadline_us && h->host && h->host->monotonic_us) {
		int64_t left_ms = (call->deadline_us - h->host->monotonic_us(h->host)) / QD_US_PER_MS;
		if (left_ms <= 0)
			return memd_error_set(err, MEMD_ETIMEDOUT, MEMD_ERROR_RETRYABLE,
					      "qdrant: deadline passed");
		if (left_ms < timeout_ms) {
			timeout_ms = left_ms;
			deadline_bound = 1;
		}
	}
	if (asprintf(&url, "%s%s", h->base_url, path_and_query) < 0)
		return memd_error_set(err, MEMD_ENOMEM, 0, "qdrant: out of memory");
	e = pool_take(h);
	if (!e) {
		free(url);
		return memd_error_set(err, MEMD_ENOMEM, 0, "qdrant: out of memory");
	}

	hl = curl_slist_append(headers, "Accept: application/json");
	if (hl)
		headers = hl;
	if (hl && body)
		hl = curl_slist_append(headers, "Content-Type: application/json");
	if (hl && body)
		hl = curl_slist_append(headers, "Expect:"); /* no 100-continue round trip */
	if (hl && h->api_key_header)
		hl = curl_slist_append(headers, h->api_key_header);
	if (!hl) {
		r = memd_error_set(err, MEMD_ENOMEM, 0, "qdrant: out of memory");
		goto out;
	}

	curl_easy_setopt(e, CURLOPT_URL, url);
#if LIBCURL_VERSION_NUM >= 0x075500 /* 7.85: the string form */
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
#else
	curl_easy_setopt(e, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
			 (long)(timeout_ms < QD_HTTP_CONNECT_TIMEOUT_MS ? timeout_ms
									  : QD_HTTP_CONNECT_TIMEOUT_MS));
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(e, CURLOPT_XFERINFODATA, (void *)call);
	curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
	if (body) {
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
	} else if (strcmp(method, "GET") == 0) {
		curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
	}

	c = curl_easy_perform(e);
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
	if (ret_status)
		*ret_status = status;
	if (c != CURLE_OK) {
		r = map_curl_error(c, deadline_bound, method, path_and_query, &b, errbuf, err);
		goto out;
	}
	if (status < QD_HTTP_STATUS_OK_MIN || status > QD_HTTP_STATUS_OK_MAX) {
		r = map_status(status, method, path_and_query, &b, err);
		goto out;
	}
	if (ret_json) {
		json_error_t jerr;
		json_t *j = b.data ? json_loadb(b.data, b.len, 0, &jerr) : NULL;
		if (!j) {
			r = memd_error_set(err, MEMD_EIO, 0,
					   "qdrant: %s %s: HTTP %ld with a body that is not JSON",
					   method, path_and_query, status);
			goto out;
		}
		*ret_json = j;
	}
	r = 0;
out:
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, NULL);
	pool_put(h, e);
	curl_slist_free_all(headers);
	free(b.data);
	free(url);
	return r;
}
