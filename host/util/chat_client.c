/* SPDX-License-Identifier: MIT */
/*
 * The chat completions client (see chat_client.h): one POST per attempt,
 * the reply's body kept up to RESPONSE_MAX_BYTES, its Retry-After header
 * read for the backoff.
 */
#include "util/chat_client.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/call_time.h"

#define CHAT_PATH "/chat/completions"
#define V1_CHAT_PATH "/v1/chat/completions"
#define V1_PATH "/v1"
#define RESPONSE_MAX_BYTES (8u << 20) /* a larger body is refused */
#define HTTP_TOO_MANY 429
#define HTTP_SERVER_ERROR_MIN 500
#define HTTP_UNAUTHORIZED 401
#define HTTP_FORBIDDEN 403
#define HTTP_OK_MIN 200
#define HTTP_OK_MAX 299
#define MS_PER_SEC 1000
#define DETAIL_MAX 120          /* bytes of a server's error body in messages */
#define BACKOFF_SHIFT_MAX 16    /* base << attempt stops growing here */

struct chat_client {
	const char *component;
	char *endpoint;
	char *model;
	char *auth;     /* "Authorization: Bearer ...", or NULL; secret */
	int64_t timeout_ms;
	int64_t retries;
	int64_t backoff_base_ms;
	int64_t backoff_max_ms;
	int curl_ready;  /* curl_global_init succeeded: cleanup in free */
};

int32_t chat_client_new(const chat_client_config *cfg, chat_client **ret, memd_error *err)
{
	chat_client *cc;
	size_t ulen;
	const char *suffix = "";
	int has_key = cfg->api_key && *cfg->api_key;

	if (!cfg->url || !*cfg->url || !cfg->model || !*cfg->model)
		return memd_error_set(err, MEMD_EINVAL, 0, "%s: openai needs url and model",
				      cfg->component);
	if (strncmp(cfg->url, "http://", strlen("http://")) != 0 &&
	    strncmp(cfg->url, "https://", strlen("https://")) != 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "%s: must be http:// or https://",
				      cfg->url_key);
	if (!(cc = calloc(1, sizeof(*cc))))
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	ulen = strlen(cfg->url);
	while (ulen && cfg->url[ulen - 1] == '/')
		ulen--;
	/* ".../chat/completions" as is; ".../v1" + "/chat/completions"; a bare
	 * host + "/v1/chat/completions". */
	if (!(ulen >= strlen(CHAT_PATH) &&
	      strncmp(cfg->url + ulen - strlen(CHAT_PATH), CHAT_PATH, strlen(CHAT_PATH)) == 0))
		suffix = ulen >= strlen(V1_PATH) &&
				 strncmp(cfg->url + ulen - strlen(V1_PATH), V1_PATH,
					 strlen(V1_PATH)) == 0
			 ? CHAT_PATH
			 : V1_CHAT_PATH;
	if (asprintf(&cc->endpoint, "%.*s%s", (int)ulen, cfg->url, suffix) < 0)
		cc->endpoint = NULL;
	cc->component = cfg->component;
	cc->model = strdup(cfg->model);
	if (has_key && asprintf(&cc->auth, "Authorization: Bearer %s", cfg->api_key) < 0)
		cc->auth = NULL;
	cc->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 1;
	cc->retries = cfg->retries > 0 ? cfg->retries : 0;
	cc->backoff_base_ms = cfg->backoff_base_ms;
	cc->backoff_max_ms = cfg->backoff_max_ms;
	if (!cc->endpoint || !cc->model || (has_key && !cc->auth)) {
		chat_client_free(cc);
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		chat_client_free(cc);
		return memd_error_set(err, MEMD_EIO, 0, "%s: libcurl failed to initialise",
				      cfg->component);
	}
	cc->curl_ready = 1;
	*ret = cc;
	return 0;
}

void chat_client_free(chat_client *cc)
{
	if (!cc)
		return;
	if (cc->auth) {
		memset(cc->auth, 0, strlen(cc->auth)); /* a secret */
		free(cc->auth);
	}
	if (cc->curl_ready)
		curl_global_cleanup();
	free(cc->endpoint);
	free(cc->model);
	free(cc);
}

const char *chat_client_model(const chat_client *cc)
{
	return cc->model;
}

/* ---- one request ---------------------------------------------------------- */

typedef struct body {
	char *p;
	size_t len;
} body;

static size_t on_data(char *data, size_t size, size_t nmemb, void *ud)
{
	body *b = ud;
	size_t n = size * nmemb;
	char *grown;
	if (b->len + n > RESPONSE_MAX_BYTES)
		return 0;
	if (!(grown = realloc(b->p, b->len + n + 1)))
		return 0;
	b->p = grown;
	memcpy(b->p + b->len, data, n);
	b->len += n;
	b->p[b->len] = '\0';
	return n;
}

typedef struct reply {
	long status;
	int64_t retry_after_ms; /* from the server, or -1 */
	body b;
} reply;

static size_t on_header(char *data, size_t size, size_t nmemb, void *ud)
{
	reply *rp = ud;
	size_t n = size * nmemb;
	static const char name[] = "retry-after:";
	if (n > strlen(name) && strncasecmp(data, name, strlen(name)) == 0) {
		char *end;
		long secs = strtol(data + strlen(name), &end, 10);
		if (end != data + strlen(name) && secs >= 0)
			rp->retry_after_ms = (int64_t)secs * MS_PER_SEC;
	}
	return n;
}

/* One POST. Returns 0 with rp filled (any status), or a CURLcode > 0. */
static int post(const chat_client *cc, const memd_call *call, const char *payload, reply *rp,
		char *curl_msg)
{
	CURL *c = curl_easy_init();
	struct curl_slist *h = NULL;
	int64_t timeout = cc->timeout_ms, left = call_left_ms(call);
	CURLcode cr;

	if (!c)
		return CURLE_FAILED_INIT;
	if (left < timeout)
		timeout = left > 0 ? left : 1;
	h = curl_slist_append(h, "Content-Type: application/json");
	if (h && cc->auth)
		h = curl_slist_append(h, cc->auth);
	curl_easy_setopt(c, CURLOPT_URL, cc->endpoint);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, payload);
	curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(payload));
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)timeout);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)timeout);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &rp->b);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, rp);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, curl_msg);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_msg[0] = '\0';
	cr = h ? curl_easy_perform(c) : CURLE_OUT_OF_MEMORY;
	if (cr == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &rp->status);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	return (int)cr;
}

/* The start of an error body, printable ASCII only, into buf[cap]. */
static void detail(const body *b, char *buf, size_t cap)
{
	size_t n = 0;
	for (size_t i = 0; b->p && i < b->len && n + 1 < cap && n < DETAIL_MAX; i++)
		buf[n++] = (b->p[i] >= 0x20 && b->p[i] < 0x7f) ? b->p[i] : ' ';
	buf[n] = '\0';
}

/* A 2xx body: its choices[0].message.content to answer. 0, MEMD_EIO (not
 * a chat completion, or answer's), or answer's other error. */
static int32_t take_answer(const chat_client *cc, const body *b, chat_answer_fn answer,
			   void *ctx, memd_error *err)
{
	json_error_t jerr;
	json_t *o = b->p ? json_loadb(b->p, b->len, 0, &jerr) : NULL, *content;
	int32_t r;

	if (!o)
		return memd_error_set(err, MEMD_EIO, MEMD_ERROR_RETRYABLE,
				      "%s: the reply is not JSON", cc->component);
	content = json_object_get(json_object_get(json_array_get(json_object_get(o, "choices"), 0),
						  "message"),
				  "content");
	if (!json_is_string(content))
		r = memd_error_set(err, MEMD_EIO, MEMD_ERROR_RETRYABLE,
				   "%s: the reply has no choices[0].message.content", cc->component);
	else
		r = answer(ctx, json_string_value(content), json_string_length(content), err);
	json_decref(o);
	return r;
}

int32_t chat_client_call(chat_client *cc, const memd_call *call, const char *payload,
			 chat_answer_fn answer, void *ctx, memd_error *err)
{
	int32_t r = MEMD_EUNAVAIL;

	for (int64_t attempt = 0;; attempt++) {
		reply rp = { .retry_after_ms = -1 };
		char curl_msg[CURL_ERROR_SIZE], what[DETAIL_MAX + 1];
		int retryable = 0, cr;
		int64_t wait;

		if (call_cancelled(call)) {
			r = memd_error_set(err, MEMD_ECANCELED, 0, "%s: cancelled", cc->component);
			break;
		}
		if (call_left_ms(call) <= 0) {
			r = memd_error_set(err, MEMD_ETIMEDOUT, MEMD_ERROR_RETRYABLE,
					   "%s: deadline passed after %lld attempts", cc->component,
					   (long long)attempt);
			break;
		}
		cr = post(cc, call, payload, &rp, curl_msg);
		if (cr == CURLE_OPERATION_TIMEDOUT) {
			r = memd_error_set(err, MEMD_ETIMEDOUT, MEMD_ERROR_RETRYABLE,
					   "%s: %s: timed out", cc->component, cc->endpoint);
			retryable = 1;
		} else if (cr != CURLE_OK) {
			r = memd_error_set(err, MEMD_EUNAVAIL, MEMD_ERROR_RETRYABLE, "%s: %s: %s",
					   cc->component, cc->endpoint,
					   curl_msg[0] ? curl_msg : curl_easy_strerror(cr));
			retryable = cr != CURLE_OUT_OF_MEMORY;
		} else if (rp.status == HTTP_TOO_MANY || rp.status >= HTTP_SERVER_ERROR_MIN) {
			detail(&rp.b, what, sizeof(what));
			r = memd_error_set(err, MEMD_EUNAVAIL, MEMD_ERROR_RETRYABLE,
					   "%s: %s: HTTP %ld %s", cc->component, cc->endpoint,
					   rp.status, what);
			retryable = 1;
		} else if (rp.status == HTTP_UNAUTHORIZED || rp.status == HTTP_FORBIDDEN) {
			r = memd_error_set(err, MEMD_EAUTH, 0, "%s: %s: HTTP %ld (check api_key)",
					   cc->component, cc->endpoint, rp.status);
		} else if (rp.status < HTTP_OK_MIN || rp.status > HTTP_OK_MAX) {
			detail(&rp.b, what, sizeof(what));
			r = memd_error_set(err, MEMD_EIO, 0, "%s: %s: HTTP %ld %s", cc->component,
					   cc->endpoint, rp.status, what);
		} else {
			r = take_answer(cc, &rp.b, answer, ctx, err);
			retryable = r == MEMD_EIO; /* a bad answer may not come twice */
			if (r == MEMD_EIO && err)
				err->flags |= MEMD_ERROR_RETRYABLE;
		}
		free(rp.b.p);
		if (r == 0 || !retryable || attempt >= cc->retries)
			break;
		wait = cc->backoff_base_ms << (attempt < BACKOFF_SHIFT_MAX ? attempt : BACKOFF_SHIFT_MAX);
		if (rp.retry_after_ms >= 0)
			wait = rp.retry_after_ms;
		if (wait > cc->backoff_max_ms)
			wait = cc->backoff_max_ms;
		if (wait >= call_left_ms(call))
			break; /* the deadline comes first: report the last error */
		call_backoff_sleep(call, wait);
	}
	return r;
}
