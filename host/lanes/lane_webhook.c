/* SPDX-License-Identifier: MIT */
#include "lane_webhook.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <memd/plugin.h>

#include "util/call_time.h"
#include "util/sha256.h"

#define LW_TAG "finalize webhook"
#define LW_HTTP_OK_MIN 200
#define LW_HTTP_OK_MAX 299
#define LW_HTTP_TOO_MANY 429
#define LW_HTTP_SERVER_MIN 500
#define LW_URL_SHOWN_MAX 160       /* bytes of the URL a message quotes */
#define LW_CONNECT_TIMEOUT_MS 5000 /* connecting never takes longer than this */
#define LW_MS_PER_S 1000
#define LW_HEADER_MAX 128          /* one header line we build */
#define LW_TIMESTAMP_MAX 24        /* decimal int64 + NUL */

int32_t lane_webhook_init(memd_error *err)
{
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return memd_error_set(err, MEMD_EINTERNAL, 0, LW_TAG ": libcurl did not initialise");
	return 0;
}

void lane_webhook_cleanup(void)
{
	curl_global_cleanup();
}

void lane_webhook_sign(const char *secret, int64_t timestamp_s, const char *body,
		       char out[LANE_WEBHOOK_SIGNATURE_LEN + 1])
{
	size_t plen = strlen(LANE_WEBHOOK_SIGNATURE_PREFIX);
	uint8_t mac[SHA256_DIGEST_LEN];
	char ts[LW_TIMESTAMP_MAX];
	hmac_sha256_ctx c;
	int n = snprintf(ts, sizeof(ts), "%" PRId64, timestamp_s);

	hmac_sha256_init(&c, secret ? secret : "", secret ? strlen(secret) : 0);
	hmac_sha256_update(&c, ts, (size_t)n);
	hmac_sha256_update(&c, ".", 1);
	hmac_sha256_update(&c, body, strlen(body));
	hmac_sha256_final(&c, mac);
	memcpy(out, LANE_WEBHOOK_SIGNATURE_PREFIX, plen);
	sha256_hex(mac, out + plen);
}

/* The URL as messages show it: without "user:password@" and without the
 * query or fragment (either may carry a token), cut to a length. */
static void shown_url(const char *url, char out[LW_URL_SHOWN_MAX + 1])
{
	const char *host = strstr(url, "://"), *at, *end;
	size_t n = 0;

	host = host ? host + 3 : url;
	end = host + strcspn(host, "/?#");
	at = memchr(host, '@', (size_t)(end - host));
	n = (size_t)(host - url);
	if (n > LW_URL_SHOWN_MAX)
		n = LW_URL_SHOWN_MAX;
	memcpy(out, url, n);
	if (at)
		host = at + 1;
	for (const char *p = host; *p && *p != '?' && *p != '#' && n < LW_URL_SHOWN_MAX; p++) {
		unsigned char c = (unsigned char)*p;
		out[n++] = c >= 0x20 && c != 0x7f ? (char)c : '?';
	}
	out[n] = '\0';
}

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	(void)ptr;
	(void)userdata;
	return size * nmemb; /* the receiver's answer is not ours to read */
}

static int on_progress(void *userdata, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	(void)a;
	(void)b;
	(void)c;
	(void)d;
	return call_cancelled(userdata) ? 1 : 0;
}

typedef struct lw_attempt {
	long status;              /* 0 when no answer */
	int64_t retry_after_ms;   /* the receiver's Retry-After, or -1 */
} lw_attempt;

/* POST once. 0 when an answer arrived (any status, in a->status), else a
 * transport failure: MEMD_EUNAVAIL + RETRYABLE for network trouble and
 * timeouts of the attempt, MEMD_ETIMEDOUT, MEMD_ECANCELED, MEMD_ENOMEM. */
static int32_t post_once(const lane_webhook *hook, const memd_call *call,
			 const struct curl_slist *headers, const char *body, const char *shown,
			 lw_attempt *a, memd_error *err)
{
	char errbuf[CURL_ERROR_SIZE] = "";
	int64_t timeout = hook->timeout_ms, left = call_left_ms(call);
	int deadline_bound = 0;
	CURLcode c;
	CURL *cu;
	int32_t r = 0;

	a->status = 0;
	a->retry_after_ms = -1;
	if (left <= 0)
		return memd_error_set(err, MEMD_ETIMEDOUT, MEMD_ERROR_RETRYABLE,
				      LW_TAG ": %s: deadline passed", shown);
	if (left < timeout) {
		timeout = left;
		deadline_bound = 1;
	}
	cu = curl_easy_init();
	if (!cu)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	curl_easy_setopt(cu, CURLOPT_URL, hook->url);
#if LIBCURL_VERSION_NUM >= 0x075500 /* 7.85: the string form */
	curl_easy_setopt(cu, CURLOPT_PROTOCOLS_STR, "http,https");
#else
	curl_easy_setopt(cu, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
	curl_easy_setopt(cu, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(cu, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(cu, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(cu, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
	curl_easy_setopt(cu, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(cu, CURLOPT_TIMEOUT_MS, (long)timeout);
	curl_easy_setopt(cu, CURLOPT_CONNECTTIMEOUT_MS,
			 (long)(timeout < LW_CONNECT_TIMEOUT_MS ? timeout : LW_CONNECT_TIMEOUT_MS));
	curl_easy_setopt(cu, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(cu, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(cu, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(cu, CURLOPT_XFERINFODATA, (void *)call);
	c = curl_easy_perform(cu);
	if (c == CURLE_OK) {
		curl_off_t ra = -1;
		curl_easy_getinfo(cu, CURLINFO_RESPONSE_CODE, &a->status);
		if (curl_easy_getinfo(cu, CURLINFO_RETRY_AFTER, &ra) == CURLE_OK && ra >= 0)
			a->retry_after_ms = (int64_t)ra * LW_MS_PER_S;
	} else if (c == CURLE_ABORTED_BY_CALLBACK) {
		r = memd_error_set(err, MEMD_ECANCELED, 0, LW_TAG ": %s: call cancelled", shown);
	} else if (c == CURLE_OPERATION_TIMEDOUT && deadline_bound) {
		r = memd_error_set(err, MEMD_ETIMEDOUT, MEMD_ERROR_RETRYABLE,
				   LW_TAG ": %s: deadline passed", shown);
	} else if (c == CURLE_OPERATION_TIMEDOUT) {
		r = memd_error_set(err, MEMD_EUNAVAIL, MEMD_ERROR_RETRYABLE,
				   LW_TAG ": %s: no answer within %" PRId64 " ms", shown,
				   hook->timeout_ms);
	} else if (c == CURLE_OUT_OF_MEMORY) {
		r = memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	} else {
		r = memd_error_set(err, MEMD_EUNAVAIL, MEMD_ERROR_RETRYABLE, LW_TAG ": %s: %s",
				   shown, errbuf[0] ? errbuf : curl_easy_strerror(c));
	}
	curl_easy_cleanup(cu);
	return r;
}

static int32_t check_hook(const lane_webhook *hook, const char *body, memd_error *err)
{
	if (!hook || !hook->url || !hook->url[0])
		return memd_error_set(err, MEMD_EINVAL, 0, LW_TAG ": no URL");
	if (strncmp(hook->url, "http://", strlen("http://")) != 0 &&
	    strncmp(hook->url, "https://", strlen("https://")) != 0)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      LW_TAG ": the URL must start with http:// or https://");
	if (strpbrk(hook->url, " \t\r\n"))
		return memd_error_set(err, MEMD_EINVAL, 0, LW_TAG ": the URL contains white space");
	if (hook->timeout_ms < 1 || hook->timeout_ms > LONG_MAX)
		return memd_error_set(err, MEMD_EINVAL, 0, LW_TAG ": timeout_ms must be at least 1");
	if (!body)
		return memd_error_set(err, MEMD_EINVAL, 0, LW_TAG ": no body");
	return 0;
}

/* The header list of one delivery (the same for every attempt). */
static struct curl_slist *make_headers(const lane_webhook *hook, const char *body,
				       int64_t timestamp_s)
{
	char sig[LANE_WEBHOOK_SIGNATURE_LEN + 1], line[LW_HEADER_MAX];
	struct curl_slist *h = NULL, *n;
	const char *fixed[] = { "Content-Type: application/json", "Expect:" };

	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
		if (!(n = curl_slist_append(h, fixed[i])))
			goto fail;
		h = n;
	}
	snprintf(line, sizeof(line), LANE_WEBHOOK_TIMESTAMP_HEADER ": %" PRId64, timestamp_s);
	if (!(n = curl_slist_append(h, line)))
		goto fail;
	h = n;
	lane_webhook_sign(hook->secret, timestamp_s, body, sig);
	snprintf(line, sizeof(line), LANE_WEBHOOK_SIGNATURE_HEADER ": %s", sig);
	if (!(n = curl_slist_append(h, line)))
		goto fail;
	return n;
fail:
	curl_slist_free_all(h);
	return NULL;
}

int32_t lane_webhook_post(const lane_webhook *hook, const memd_call *call, const char *body,
			  int64_t timestamp_s, memd_error *err)
{
	char shown[LW_URL_SHOWN_MAX + 1];
	int64_t backoff;
	struct curl_slist *headers;
	int32_t r;

	if ((r = check_hook(hook, body, err)) < 0)
		return r;
	shown_url(hook->url, shown);
	headers = make_headers(hook, body, timestamp_s);
	if (!headers)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	backoff = hook->backoff_ms > 0 ? hook->backoff_ms : LANE_WEBHOOK_BACKOFF_MS_DEFAULT;
	for (uint32_t attempt = 0;; attempt++) {
		lw_attempt a;
		int64_t wait;

		if (call_cancelled(call)) {
			r = memd_error_set(err, MEMD_ECANCELED, 0, LW_TAG ": %s: call cancelled",
					   shown);
			break;
		}
		r = post_once(hook, call, headers, body, shown, &a, err);
		if (r == 0) {
			if (a.status >= LW_HTTP_OK_MIN && a.status <= LW_HTTP_OK_MAX)
				break;
			if (a.status == LW_HTTP_TOO_MANY || a.status >= LW_HTTP_SERVER_MIN)
				r = memd_error_set(err, MEMD_EUNAVAIL, MEMD_ERROR_RETRYABLE,
						   LW_TAG ": %s: HTTP %ld (attempt %u of %u)", shown,
						   a.status, attempt + 1, hook->retries + 1);
			else
				r = memd_error_set(err, MEMD_EIO, 0, LW_TAG ": %s: HTTP %ld", shown,
						   a.status);
		}
		if (r != MEMD_EUNAVAIL || attempt >= hook->retries)
			break;
		wait = backoff;
		if (a.retry_after_ms >= 0)
			wait = a.retry_after_ms;
		if (wait > LANE_WEBHOOK_BACKOFF_MAX_MS)
			wait = LANE_WEBHOOK_BACKOFF_MAX_MS;
		call_backoff_sleep(call, wait);
		backoff = backoff > LANE_WEBHOOK_BACKOFF_MAX_MS / 2 ? LANE_WEBHOOK_BACKOFF_MAX_MS
								    : backoff * 2;
	}
	curl_slist_free_all(headers);
	return r;
}
