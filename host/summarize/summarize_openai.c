/* SPDX-License-Identifier: MIT */
/*
 * The openai summarizer (see summarize.h): one POST to
 * <url>/chat/completions per attempt, {"model", "messages": [system prompt,
 * user transcript], "temperature": 0, "max_tokens"}; the summary is
 * choices[0].message.content.
 */
#include "summarize/summarize.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/call_time.h"

#define CHAT_PATH "/chat/completions"
#define V1_CHAT_PATH "/v1/chat/completions"
#define RESPONSE_MAX_BYTES (8u << 20) /* a larger body is refused */
#define HTTP_TOO_MANY 429
#define HTTP_SERVER_ERROR_MIN 500
#define HTTP_UNAUTHORIZED 401
#define HTTP_FORBIDDEN 403
#define HTTP_OK_MIN 200
#define HTTP_OK_MAX 299
#define MS_PER_SEC 1000
#define NS_PER_MS 1000000L
#define SLEEP_SLICE_MS 50       /* how often a backoff looks at cancel */
#define AUTH_HEADER_MAX 4096
#define DETAIL_MAX 120          /* bytes of a server's error body in messages */

static const char system_prompt[] =
	"You maintain the running summary of a conversation between a user and an AI "
	"assistant. Fold the previous summary (if any) and the new messages into one "
	"updated summary. Preserve every fact, decision, name, date, number, identifier, "
	"preference, commitment and open question; keep who said or decided what. Drop "
	"greetings, filler and repetition. Write short plain sentences, one per line, no "
	"preamble. Output only the summary, at most %lld tokens.";

struct summarize_openai {
	char *endpoint;
	char *model;
	char *auth;     /* "Authorization: Bearer ...", or NULL; secret */
	int64_t timeout_ms;
	int64_t retries;
	int curl_ready;  /* curl_global_init succeeded: cleanup in free */
};

int32_t summarize_openai_new(const summarize_openai_config *cfg, summarize_openai **ret,
			     memd_error *err)
{
	summarize_openai *so;
	size_t ulen;

	if (!cfg->url || !*cfg->url || !cfg->model || !*cfg->model)
		return memd_error_set(err, MEMD_EINVAL, 0, "summarizer: openai needs url and model");
	if (strncmp(cfg->url, "http://", strlen("http://")) != 0 &&
	    strncmp(cfg->url, "https://", strlen("https://")) != 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "summarizer.url: must be http:// or https://");
	so = calloc(1, sizeof(*so));
	if (!so)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	ulen = strlen(cfg->url);
	while (ulen && cfg->url[ulen - 1] == '/')
		ulen--;
	/* ".../chat/completions" as is; ".../v1" + "/chat/completions"; a bare
	 * host + "/v1/chat/completions". */
	{
		const char *suffix = "";
		size_t cl = strlen(CHAT_PATH);
		if (!(ulen >= cl && strncmp(cfg->url + ulen - cl, CHAT_PATH, cl) == 0))
			suffix = ulen >= 3 && strncmp(cfg->url + ulen - 3, "/v1", 3) == 0 ? CHAT_PATH
											  : V1_CHAT_PATH;
		if (asprintf(&so->endpoint, "%.*s%s", (int)ulen, cfg->url, suffix) < 0)
			so->endpoint = NULL;
	}
	so->model = strdup(cfg->model);
	if (cfg->api_key && *cfg->api_key &&
	    asprintf(&so->auth, "Authorization: Bearer %s", cfg->api_key) < 0)
		so->auth = NULL;
	so->timeout_ms = cfg->timeout_ms;
	so->retries = cfg->retries;
	if (!so->endpoint || !so->model || (cfg->api_key && *cfg->api_key && !so->auth)) {
		summarize_openai_free(so);
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		summarize_openai_free(so);
		return memd_error_set(err, MEMD_EIO, 0, "summarizer: libcurl failed to initialise");
	}
	so->curl_ready = 1;
	*ret = so;
	return 0;
}

void summarize_openai_free(summarize_openai *so)
{
	if (!so)
		return;
	if (so->auth) {
		memset(so->auth, 0, strlen(so->auth)); /* a secret */
		free(so->auth);
	}
	if (so->curl_ready)
		curl_global_cleanup();
	free(so->endpoint);
	free(so->model);
	free(so);
}

/* ---- one request -------------------------------------------------------- */

typedef struct body {
	char *p;
	size_t len;
	int too_big;
} body;

static size_t on_data(char *data, size_t size, size_t nmemb, void *ud)
{
	body *b = ud;
	size_t n = size * nmemb;
	char *grown;
	if (b->len + n > RESPONSE_MAX_BYTES) {
		b->too_big = 1;
		return 0;
	}
	grown = realloc(b->p, b->len + n + 1);
	if (!grown)
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
static int post(summarize_openai *so, const memd_call *call, const char *payload, reply *rp,
		char *curl_msg)
{
	CURL *c = curl_easy_init();
	struct curl_slist *h = NULL;
	int64_t timeout = so->timeout_ms, left = call_left_ms(call);
	CURLcode cr;

	if (!c)
		return CURLE_FAILED_INIT;
	if (left < timeout)
		timeout = left > 0 ? left : 1;
	h = curl_slist_append(h, "Content-Type: application/json");
	if (h && so->auth)
		h = curl_slist_append(h, so->auth);
	curl_easy_setopt(c, CURLOPT_URL, so->endpoint);
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

/* ---- the request body and the reply ---------------------------------------- */

static char *transcript(const char *previous, const memd_event *const *events, uint32_t n)
{
	size_t len = 0, o = 0;
	char *s;
	static const char prev_head[] = "Previous summary:\n", new_head[] = "New messages:\n";

	if (previous && *previous)
		len += strlen(prev_head) + strlen(previous) + 2;
	len += strlen(new_head);
	for (uint32_t i = 0; i < n; i++)
		len += strlen(events[i]->role ? events[i]->role : "event") + 3 +
		       strlen(events[i]->text ? events[i]->text : "");
	s = malloc(len + 1);
	if (!s)
		return NULL;
	if (previous && *previous)
		o += (size_t)sprintf(s + o, "%s%s\n\n", prev_head, previous);
	o += (size_t)sprintf(s + o, "%s", new_head);
	for (uint32_t i = 0; i < n; i++)
		o += (size_t)sprintf(s + o, "%s: %s\n", events[i]->role ? events[i]->role : "event",
				     events[i]->text ? events[i]->text : "");
	s[o] = '\0';
	return s;
}

static char *request_json(const summarize_openai *so, const char *previous,
			  const memd_event *const *events, uint32_t n, int64_t target)
{
	char sys[sizeof(system_prompt) + 32];
	char *user = transcript(previous, events, n), *text = NULL;
	json_t *o;

	if (!user)
		return NULL;
	snprintf(sys, sizeof(sys), system_prompt, (long long)target);
	o = json_pack("{s:s,s:[{s:s,s:s},{s:s,s:s}],s:i,s:I}", "model", so->model, "messages",
		      "role", "system", "content", sys, "role", "user", "content", user,
		      "temperature", 0, "max_tokens", (json_int_t)target);
	if (o)
		text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	free(user);
	return text;
}

/* The summary of a chat completion body, or NULL with err (EIO). */
static char *parse_reply(const body *b, memd_error *err)
{
	json_error_t jerr;
	json_t *o = b->p ? json_loadb(b->p, b->len, 0, &jerr) : NULL, *content;
	char *s = NULL;

	if (!o) {
		memd_error_set(err, MEMD_EIO, MEMD_ERROR_RETRYABLE,
			       "summarizer: the reply is not JSON");
		return NULL;
	}
	content = json_object_get(json_object_get(json_array_get(json_object_get(o, "choices"), 0),
						  "message"),
				  "content");
	if (!json_is_string(content) || json_string_length(content) == 0)
		memd_error_set(err, MEMD_EIO, MEMD_ERROR_RETRYABLE,
			       "summarizer: the reply has no choices[0].message.content");
	else if (!(s = strndup(json_string_value(content), json_string_length(content))))
		memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	json_decref(o);
	return s;
}

/* Sleep ms, waking early on cancel. 0, or MEMD_ECANCELED. */
static int32_t pause_ms(const memd_call *call, int64_t ms)
{
	while (ms > 0) {
		int64_t slice = ms < SLEEP_SLICE_MS ? ms : SLEEP_SLICE_MS;
		struct timespec ts = { slice / MS_PER_SEC, (long)(slice % MS_PER_SEC) * NS_PER_MS };
		if (call_cancelled(call))
			return MEMD_ECANCELED;
		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
		ms -= slice;
	}
	return call_cancelled(call) ? MEMD_ECANCELED : 0;
}

static void detail(const body *b, char *buf, size_t cap)
{
	size_t n = 0;
	for (size_t i = 0; b->p && i < b->len && n + 1 < cap && n < DETAIL_MAX; i++)
		buf[n++] = (b->p[i] >= 0x20 && b->p[i] < 0x7f) ? b->p[i] : ' ';
	buf[n] = '\0';
}

int32_t summarize_openai_run(summarize_openai *so, const memd_call *call,
			     const summarize_tokens *tok, const char *previous,
			     const memd_event *const *events, uint32_t n_events,
			     int64_t target_tokens, const memd_text_sink *out, memd_error *err)
{
	char *payload;
	int32_t r = MEMD_EUNAVAIL;

	if (target_tokens < 1)
		return memd_error_set(err, MEMD_EINVAL, 0, "summary budget must be at least 1 token");
	if (!(payload = request_json(so, previous, events, n_events, target_tokens)))
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	for (int64_t attempt = 0;; attempt++) {
		reply rp = { .retry_after_ms = -1 };
		char curl_msg[CURL_ERROR_SIZE], what[DETAIL_MAX + 1];
		int retryable = 0, cr;
		int64_t wait;

		if (call_cancelled(call)) {
			r = memd_error_set(err, MEMD_ECANCELED, 0, "summarizer: cancelled");
			break;
		}
		if (call_left_ms(call) <= 0) {
			r = memd_error_set(err, MEMD_ETIMEDOUT, MEMD_ERROR_RETRYABLE,
					   "summarizer: deadline passed after %lld attempts",
					   (long long)attempt);
			break;
		}
		cr = post(so, call, payload, &rp, curl_msg);
		if (cr == CURLE_OPERATION_TIMEDOUT) {
			r = memd_error_set(err, MEMD_ETIMEDOUT, MEMD_ERROR_RETRYABLE,
					   "summarizer: %s: timed out", so->endpoint);
			retryable = 1;
		} else if (cr != CURLE_OK) {
			r = memd_error_set(err, MEMD_EUNAVAIL, MEMD_ERROR_RETRYABLE, "summarizer: %s: %s",
					   so->endpoint, curl_msg[0] ? curl_msg : curl_easy_strerror(cr));
			retryable = cr != CURLE_OUT_OF_MEMORY;
		} else if (rp.status == HTTP_TOO_MANY || rp.status >= HTTP_SERVER_ERROR_MIN) {
			detail(&rp.b, what, sizeof(what));
			r = memd_error_set(err, MEMD_EUNAVAIL, MEMD_ERROR_RETRYABLE,
					   "summarizer: %s: HTTP %ld %s", so->endpoint, rp.status, what);
			retryable = 1;
		} else if (rp.status == HTTP_UNAUTHORIZED || rp.status == HTTP_FORBIDDEN) {
			r = memd_error_set(err, MEMD_EAUTH, 0, "summarizer: %s: HTTP %ld (check api_key)",
					   so->endpoint, rp.status);
		} else if (rp.status < HTTP_OK_MIN || rp.status > HTTP_OK_MAX) {
			detail(&rp.b, what, sizeof(what));
			r = memd_error_set(err, MEMD_EIO, 0, "summarizer: %s: HTTP %ld %s", so->endpoint,
					   rp.status, what);
		} else {
			char *summary = parse_reply(&rp.b, err);
			if (summary) {
				size_t len = summarize_clip(tok, summary, strlen(summary), target_tokens);
				r = out->text(out->userdata, summary, len);
				if (r < 0)
					memd_error_set(err, r, 0, "summary sink refused the summary");
				free(summary);
			} else {
				r = err ? err->code : MEMD_EIO;
				retryable = r == MEMD_EIO; /* a garbled body may be a passing fault */
			}
		}
		free(rp.b.p);
		if (r == 0 || !retryable || attempt >= so->retries)
			break;
		wait = (int64_t)SUMMARIZE_OPENAI_BACKOFF_BASE_MS << (attempt < 16 ? attempt : 16);
		if (rp.retry_after_ms >= 0)
			wait = rp.retry_after_ms;
		if (wait > SUMMARIZE_OPENAI_BACKOFF_MAX_MS)
			wait = SUMMARIZE_OPENAI_BACKOFF_MAX_MS;
		if (wait >= call_left_ms(call))
			break; /* the deadline comes first: report the last error */
		if (pause_ms(call, wait) < 0) {
			r = memd_error_set(err, MEMD_ECANCELED, 0, "summarizer: cancelled");
			break;
		}
	}
	free(payload);
	return r;
}
