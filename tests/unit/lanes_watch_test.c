/* SPDX-License-Identifier: MIT */
/*
 * The lane watcher (host/service/service_lanes_watch.c) through
 * memd_lanes_sweep, with a clock the test drives (memd_set_clock), never
 * the watcher's interval: a lane whose reset policy says expired is
 * finalized once (the strategy folds the session into a summary, the
 * webhook gets one signed POST, the change feed one FINALIZE record); a
 * failing webhook is tried again on each pass and the third failure
 * finalizes the lane anyway; a lane in a turn is never finalized, and a
 * turn whose lease ran out is recorded as interrupted; prune keeps
 * suspended lanes and lanes in a turn; retention deletes ended sessions
 * with their events, artifacts and index entries, a bounded batch a pass.
 * Lanes are made through the store (a lane_write as the facade makes it).
 * The usage appends and lane writes add is exported by app in /metrics.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memd/memd.h>

#include "plugins/store.h"
#include "service/service.h"
#include "test_util.h"
#include "util/sha256.h"

#define US_PER_SEC 1000000LL
#define US_PER_MIN (60 * US_PER_SEC)
#define US_PER_DAY (86400 * US_PER_SEC)
#define T0 (1767225600LL * US_PER_SEC) /* 2026-01-01T00:00:00Z */
#define IDLE_MIN 60
#define SECRET "webhook-secret-for-tests"
#define HOOK_MAX 16
#define REQ_MAX 65536
#define RETENTION_BATCH 100 /* WATCH_RETENTION_BATCH */

/* ---- the clock ---- */

static _Atomic int64_t now_us = T0;

static int64_t test_clock(void *ud)
{
	(void)ud;
	return atomic_load(&now_us);
}

/* ---- a local webhook receiver ---- */

typedef struct hook_req {
	char signature[128];
	char timestamp[32];
	char *body;
} hook_req;

typedef struct receiver {
	int fd;
	int port;
	_Atomic int status;      /* what it answers; 0: nothing, it holds the request */
	_Atomic int n;           /* requests received */
	hook_req reqs[HOOK_MAX];
	pthread_t thread;
	_Atomic int stop;
} receiver;

static void header_value(const char *head, const char *name, char *out, size_t cap)
{
	const char *p = strcasestr(head, name);
	size_t n = 0;
	out[0] = '\0';
	if (!p)
		return;
	p += strlen(name);
	while (*p == ' ' || *p == ':')
		p++;
	while (p[n] && p[n] != '\r' && n + 1 < cap)
		n++;
	memcpy(out, p, n);
	out[n] = '\0';
}

static void *receive(void *arg)
{
	receiver *r = arg;
	static char buf[REQ_MAX];
	for (;;) {
		int c = accept(r->fd, NULL, NULL);
		size_t len = 0;
		char *end = NULL, cl[32];
		if (c < 0 || atomic_load(&r->stop)) {
			if (c >= 0)
				close(c);
			return NULL;
		}
		for (;;) {
			ssize_t got = recv(c, buf + len, sizeof(buf) - 1 - len, 0);
			if (got <= 0)
				break;
			len += (size_t)got;
			buf[len] = '\0';
			if (!end && (end = strstr(buf, "\r\n\r\n"))) {
				header_value(buf, "Content-Length", cl, sizeof(cl));
			}
			if (end && len >= (size_t)(end + 4 - buf) + (size_t)atoi(cl))
				break;
		}
		if (end) {
			int i = atomic_load(&r->n);
			if (i < HOOK_MAX) {
				*end = '\0';
				header_value(buf, "X-Memd-Signature", r->reqs[i].signature,
					     sizeof(r->reqs[i].signature));
				header_value(buf, "X-Memd-Timestamp", r->reqs[i].timestamp,
					     sizeof(r->reqs[i].timestamp));
				r->reqs[i].body = strndup(end + 4, (size_t)atoi(cl));
				atomic_store(&r->n, i + 1);
			}
		}
		if (atomic_load(&r->status) == 0) {
			/* hold: no answer, until the client gives up */
			while (recv(c, buf, sizeof(buf), 0) > 0)
				;
			close(c);
			continue;
		}
		char reply[128];
		int n = snprintf(reply, sizeof(reply),
				 "HTTP/1.1 %d X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
				 atomic_load(&r->status));
		(void)!write(c, reply, (size_t)n);
		close(c);
	}
}

static void receiver_start(receiver *r, int status)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	memset(r, 0, sizeof(*r));
	atomic_store(&r->status, status);
	r->fd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert(r->fd >= 0);
	cr_assert_eq(bind(r->fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(listen(r->fd, 16), 0);
	cr_assert_eq(getsockname(r->fd, (struct sockaddr *)&a, &al), 0);
	r->port = ntohs(a.sin_port);
	cr_assert_eq(pthread_create(&r->thread, NULL, receive, r), 0);
}

static void receiver_stop(receiver *r)
{
	atomic_store(&r->stop, 1);
	shutdown(r->fd, SHUT_RDWR);
	pthread_join(r->thread, NULL);
	close(r->fd);
	for (int i = 0; i < atomic_load(&r->n); i++)
		free(r->reqs[i].body);
}

/* The signature memd must have sent for a request. */
static void expect_signature(const hook_req *q)
{
	char *msg = NULL;
	uint8_t mac[SHA256_DIGEST_LEN];
	char hex[SHA256_HEX_LEN + 1], want[SHA256_HEX_LEN + 16];
	cr_assert(q->body && q->timestamp[0]);
	cr_assert(asprintf(&msg, "%s.%s", q->timestamp, q->body) > 0);
	hmac_sha256(SECRET, strlen(SECRET), msg, strlen(msg), mac);
	sha256_hex(mac, hex);
	snprintf(want, sizeof(want), "sha256=%s", hex);
	cr_assert_str_eq(q->signature, want, "bad signature over '%s'", msg);
	free(msg);
}

/* ---- memd and lanes ---- */

static tu_dir dir;
static memd *m;

static const char *strategy_yaml = "{strategy: summary_buffer, max_tokens: 2000}";

static void open_memd(const char *lanes_yaml, const char *sessions_yaml)
{
	char yaml[4096];
	snprintf(yaml, sizeof(yaml),
		 "stores:\n  main: {plugin: sqlite, path: %s/memd.db, synchronous: normal}\n"
		 "sessions: {%s}\n"
		 "summarizer: {type: extractive}\n"
		 "lanes: {%s}\n"
		 "apps:\n  '*': {working_memory: %s}\n",
		 dir.path, sessions_yaml ? sessions_yaml : "", lanes_yaml, strategy_yaml);
	m = tu_open(&dir, yaml);
	memd_set_clock(m, test_clock, NULL);
}

static void setup(void)
{
	strategy_yaml = "{strategy: summary_buffer, max_tokens: 2000}";
	atomic_store(&now_us, T0);
	tu_dir_make(&dir);
	m = NULL;
}

static void teardown(void)
{
	memd_close(m);
	tu_dir_remove(&dir);
}

TestSuite(lanes_watch, .init = setup, .fini = teardown, .timeout = 60);

typedef struct lane_opts {
	const char *turn_id;
	int64_t lease_until_us;
	uint32_t flags;
	int64_t updated_us;   /* 0 = now */
	const char *end_session; /* ended by the write */
} lane_opts;

static json_t *lane_get(const char *user, const char *key);

static int32_t ignore_lane(void *ud, const memd_lane *l)
{
	(void)ud;
	(void)l;
	return 0;
}

static const memd_lane_sink ignore = { sizeof(memd_lane_sink), NULL, ignore_lane };

static void make_lane_of(const char *app, const char *user, const char *key, const char *sid,
			 const lane_opts *o);

/* The lane (app "a") and its new session sid, made as an open does. */
static void make_lane(const char *user, const char *key, const char *sid, const lane_opts *o)
{
	make_lane_of("a", user, key, sid, o);
}

static void make_lane_of(const char *app, const char *user, const char *key, const char *sid,
			 const lane_opts *o)
{
	static const lane_opts none = { 0 };
	memd_call call = { .struct_size = sizeof(call) };
	memd_error err = { 0 };
	int64_t t = o && o->updated_us ? o->updated_us : atomic_load(&now_us);
	if (!o)
		o = &none;
	memd_session s = {
		.struct_size = sizeof(s),
		.app = app,
		.user = user,
		.id = sid,
		.created_us = t,
		.updated_us = t,
		.lane_key = key,
		.origin_json = "{\"platform\":\"telegram\",\"chat_type\":\"dm\"}",
		.origin_platform = "telegram",
		.start_reason = "explicit",
	};
	memd_lane l = {
		.struct_size = sizeof(l),
		.flags = o->flags,
		.app = app,
		.user = user,
		.key = key,
		.session = sid,
		.origin_json = "{\"platform\":\"telegram\",\"chat_type\":\"dm\"}",
		.updated_us = t,
		.turn_id = o->turn_id,
		.turn_started_us = o->turn_id ? t : 0,
		.turn_lease_until_us = o->lease_until_us,
	};
	memd_lane_write w = {
		.struct_size = sizeof(w),
		.flags = MEMD_LW_CREATE,
		.lane = &l,
		.create_session = &s,
		.now_us = t,
	};
	cr_assert_eq(store_lane_write(service_session_store(m), &call, &w, &ignore, &err), 0, "%s",
		     err.msg);
}

/* A new session of the lane, the old one ended (as a reset does). */
static void end_session_of(const char *user, const char *key, const char *old_sid,
			   const char *new_sid, int64_t t)
{
	memd_call call = { .struct_size = sizeof(call) };
	memd_error err = { 0 };
	json_t *cur = lane_get(user, key);
	memd_session s = {
		.struct_size = sizeof(s), .app = "a", .user = user, .id = new_sid,
		.created_us = t, .updated_us = t, .lane_key = key, .previous_session = old_sid,
		.start_reason = "explicit",
	};
	memd_lane l = {
		.struct_size = sizeof(l), .app = "a", .user = user, .key = key, .session = new_sid,
		.updated_us = t, .reset_reason = "explicit", .previous_session = old_sid, .reset_us = t,
	};
	memd_lane_write w = {
		.struct_size = sizeof(w),
		.expected_version = json_integer_value(json_object_get(cur, "version")),
		.lane = &l, .create_session = &s, .end_session = old_sid, .end_reason = "explicit",
		.now_us = t,
	};
	cr_assert_eq(store_lane_write(service_session_store(m), &call, &w, &ignore, &err), 0, "%s",
		     err.msg);
	json_decref(cur);
}

static int32_t lane_to_json(void *ud, const memd_lane *l)
{
	json_t **out = ud;
	*out = json_pack("{s:I,s:I,s:s,s:s?,s:I,s:I,s:I,s:s?}", "flags", (json_int_t)l->flags,
			 "version", (json_int_t)l->version, "session", l->session, "turn_id",
			 l->turn_id, "finalize_failures", (json_int_t)l->finalize_failures,
			 "finalize_claim_until_us", (json_int_t)l->finalize_claim_until_us,
			 "interruptions", (json_int_t)l->interruptions, "resume_reason",
			 l->resume_reason);
	return 0;
}

static json_t *lane_get_of(const char *app, const char *user, const char *key);

/* The lane (app "a") as the store has it, or NULL when there is none. */
static json_t *lane_get(const char *user, const char *key)
{
	return lane_get_of("a", user, key);
}

static json_t *lane_get_of(const char *app, const char *user, const char *key)
{
	memd_call call = { .struct_size = sizeof(call) };
	memd_error err = { 0 };
	memd_scope sc = { .struct_size = sizeof(sc), .app = app, .user = user };
	json_t *out = NULL;
	memd_lane_sink sink = { sizeof(sink), &out, lane_to_json };
	int32_t r = store_lane_get(service_session_store(m), &call, &sc, key, &sink, NULL, &err);
	if (r == MEMD_ENOTFOUND)
		return NULL;
	cr_assert_eq(r, 0, "%s", err.msg);
	return out;
}

static uint32_t lane_flags(const char *user, const char *key)
{
	json_t *l = lane_get(user, key);
	cr_assert(l, "lane %s is gone", key);
	uint32_t f = (uint32_t)json_integer_value(json_object_get(l, "flags"));
	json_decref(l);
	return f;
}

static void append(const char *user, const char *sid, const char *text)
{
	memd_error err = { 0 };
	char *out = NULL, body[512];
	snprintf(body, sizeof(body), "{\"events\":[{\"role\":\"user\",\"content\":\"%s\"},"
				     "{\"role\":\"assistant\",\"content\":\"noted: %s\"}]}", text, text);
	tu_ok(memd_events_append(m, "a", user, sid, body, &out, &err), &err, &out);
}

/* One pass; its counts. */
static json_t *sweep(void)
{
	memd_error err = { 0 };
	char *out = NULL;
	cr_assert_eq(memd_lanes_sweep(m, &out, &err), 0, "%s", err.msg);
	return tu_json(out);
}

static int64_t count(json_t *o, const char *what)
{
	return json_integer_value(json_object_get(o, what));
}

/* FINALIZE records of the change feed for session sid. */
static int32_t feed_rec(void *ud, const memd_feed_record *r)
{
	void **a = ud;
	if (r->kind == MEMD_FEED_FINALIZE && r->session && strcmp(r->session, a[1]) == 0)
		(*(int *)a[0])++;
	return 0;
}

static int finalize_records(const char *sid)
{
	memd_call call = { .struct_size = sizeof(call) };
	memd_error err = { 0 };
	int n = 0;
	void *a[2] = { &n, (void *)sid };
	memd_feed_sink sink = { sizeof(sink), a, feed_rec };
	cr_assert_eq(store_feed_read(service_session_store(m), &call, 0, 0, &sink, &err), 0, "%s",
		     err.msg);
	return n;
}

static json_t *last_event(const char *user, const char *sid)
{
	memd_error err = { 0 };
	char *out = NULL;
	cr_assert_eq(memd_events_list(m, "a", user, sid, 0, MEMD_PAGE_LIMIT_MAX, &out, &err), 0,
		     "%s", err.msg);
	json_t *o = tu_json(out), *ev = json_object_get(o, "events");
	json_t *last = json_incref(json_array_get(ev, json_array_size(ev) - 1));
	json_decref(o);
	return last;
}

static int search_hits(const char *user, const char *word, const char *sid);

#define LANES_IDLE "reset: {mode: idle, idle_minutes: 60}"

/* ---- tests ---- */

Test(lanes_watch, expired_lane_is_finalized_once_with_a_signed_webhook)
{
	receiver r;
	char lanes[512];
	receiver_start(&r, 200);
	snprintf(lanes, sizeof(lanes),
		 LANES_IDLE ", finalize: {webhook: {url: 'http://127.0.0.1:%d/hook', secret: %s, "
		 "timeout_ms: 5000, retries: 0}}", r.port, SECRET);
	open_memd(lanes, NULL);
	make_lane("u", "telegram:dm:1", "s1", NULL);
	append("u", "s1", "my order ships to Berlin");
	append("u", "s1", "and the invoice goes to Hamburg");

	/* Not idle long enough: nothing. */
	atomic_store(&now_us, T0 + (IDLE_MIN - 1) * US_PER_MIN);
	json_t *c = sweep();
	cr_assert_eq(count(c, "finalized"), 0);
	json_decref(c);
	cr_assert_eq(atomic_load(&r.n), 0);

	atomic_store(&now_us, T0 + (IDLE_MIN + 1) * US_PER_MIN);
	c = sweep();
	cr_assert_eq(count(c, "finalized"), 1);
	cr_assert_eq(count(c, "finalize_failed"), 0);
	json_decref(c);
	cr_assert(lane_flags("u", "telegram:dm:1") & MEMD_LANE_FINALIZED);
	cr_assert_eq(finalize_records("s1"), 1);
	/* The indexes read past the FINALIZE record (search waits for them
	 * to reach the feed's head) and keep the session's events. */
	cr_assert_geq(search_hits("u", "hamburg", "s1"), 2);
	/* the strategy folded the session: a summary covers the last event */
	json_t *e = last_event("u", "s1");
	cr_assert_str_eq(json_string_value(json_object_get(e, "role")), "summary");
	cr_assert_eq(json_integer_value(json_object_get(e, "covers_seq")),
		     json_integer_value(json_object_get(e, "seq")) - 1);
	json_decref(e);
	/* one signed POST naming the lane and its session */
	cr_assert_eq(atomic_load(&r.n), 1);
	expect_signature(&r.reqs[0]);
	cr_assert_eq(strtoll(r.reqs[0].timestamp, NULL, 10), atomic_load(&now_us) / US_PER_SEC);
	json_t *body = json_loads(r.reqs[0].body, 0, NULL);
	cr_assert(body);
	cr_assert_str_eq(json_string_value(json_object_get(body, "event")), "session.finalized");
	cr_assert_str_eq(json_string_value(json_object_get(body, "session_id")), "s1");
	cr_assert_str_eq(json_string_value(json_object_get(body, "lane_key")), "telegram:dm:1");
	cr_assert_str_eq(json_string_value(json_object_get(body, "reason")), "idle");
	json_decref(body);

	/* Once: later passes leave it alone. */
	atomic_store(&now_us, T0 + 10 * IDLE_MIN * US_PER_MIN);
	c = sweep();
	cr_assert_eq(count(c, "finalized"), 0);
	json_decref(c);
	cr_assert_eq(atomic_load(&r.n), 1);
	cr_assert_eq(finalize_records("s1"), 1);

	char *metrics = NULL;
	memd_error err = { 0 };
	cr_assert_eq(memd_metrics_text(m, &metrics, &err), 0);
	cr_assert(strstr(metrics, "memd_lanes_finalized_total 1\n"), "%s", metrics);
	memd_free(metrics);
	memd_close(m);
	m = NULL;
	receiver_stop(&r);
}

Test(lanes_watch, failing_webhook_is_retried_then_finalized_anyway)
{
	receiver r;
	char lanes[512];
	receiver_start(&r, 500);
	snprintf(lanes, sizeof(lanes),
		 LANES_IDLE ", finalize: {webhook: {url: 'http://127.0.0.1:%d/hook', secret: %s, "
		 "timeout_ms: 5000, retries: 0}}", r.port, SECRET);
	open_memd(lanes, NULL);
	make_lane("u", "k", "s1", NULL);
	append("u", "s1", "hello");
	atomic_store(&now_us, T0 + (IDLE_MIN + 1) * US_PER_MIN);

	for (int pass = 1; pass <= 2; pass++) {
		json_t *c = sweep();
		cr_assert_eq(count(c, "finalized"), 0, "pass %d", pass);
		cr_assert_eq(count(c, "finalize_failed"), 1, "pass %d", pass);
		json_decref(c);
		json_t *l = lane_get("u", "k");
		cr_assert_eq(json_integer_value(json_object_get(l, "finalize_failures")), pass);
		cr_assert_eq(json_integer_value(json_object_get(l, "finalize_claim_until_us")), 0,
			     "the claim was not released");
		cr_assert_eq(json_integer_value(json_object_get(l, "flags")) & MEMD_LANE_FINALIZED, 0);
		json_decref(l);
		cr_assert_eq(atomic_load(&r.n), pass);
	}
	json_t *c = sweep();
	cr_assert_eq(count(c, "finalized"), 1, "the third failure finalizes the lane anyway");
	cr_assert_eq(count(c, "finalize_failed"), 1);
	json_decref(c);
	cr_assert(lane_flags("u", "k") & MEMD_LANE_FINALIZED);
	cr_assert_eq(finalize_records("s1"), 1);
	cr_assert_eq(atomic_load(&r.n), 3);
	for (int i = 0; i < 3; i++)
		expect_signature(&r.reqs[i]);
	c = sweep();
	cr_assert_eq(count(c, "finalized") + count(c, "finalize_failed"), 0);
	json_decref(c);
	cr_assert_eq(atomic_load(&r.n), 3);
	memd_close(m);
	m = NULL;
	receiver_stop(&r);
}

Test(lanes_watch, turn_in_progress_is_never_finalized)
{
	open_memd(LANES_IDLE, NULL);
	int64_t lease = T0 + 3 * IDLE_MIN * US_PER_MIN;
	lane_opts o = { .turn_id = "t1", .lease_until_us = lease };
	make_lane("u", "k", "s1", &o);
	make_lane("u", "quiet", "s2", NULL);

	atomic_store(&now_us, T0 + 2 * IDLE_MIN * US_PER_MIN);
	json_t *c = sweep();
	cr_assert_eq(count(c, "finalized"), 1, "only the lane without a turn");
	cr_assert_eq(count(c, "leases_expired"), 0);
	json_decref(c);
	cr_assert_eq(lane_flags("u", "k") & MEMD_LANE_FINALIZED, 0);
	cr_assert(lane_flags("u", "quiet") & MEMD_LANE_FINALIZED);

	/* The holder died: its lease runs out, the turn is recorded as
	 * interrupted and the lane waits to be resumed, not finalized. */
	atomic_store(&now_us, lease + 1);
	c = sweep();
	cr_assert_eq(count(c, "leases_expired"), 1);
	cr_assert_eq(count(c, "finalized"), 0);
	json_decref(c);
	json_t *l = lane_get("u", "k");
	cr_assert(json_is_null(json_object_get(l, "turn_id")) || !json_object_get(l, "turn_id"));
	cr_assert_str_eq(json_string_value(json_object_get(l, "resume_reason")), "restart_interrupted");
	cr_assert_eq(json_integer_value(json_object_get(l, "interruptions")), 1);
	cr_assert(json_integer_value(json_object_get(l, "flags")) & MEMD_LANE_RESUME_PENDING);
	cr_assert_eq(json_integer_value(json_object_get(l, "flags")) & MEMD_LANE_FINALIZED, 0);
	json_decref(l);
}

Test(lanes_watch, prune_keeps_suspended_lanes_and_lanes_in_a_turn)
{
	open_memd("reset: {mode: none}, prune_after_days: 2", NULL);
	lane_opts turn = { .turn_id = "t", .lease_until_us = T0 + 30 * US_PER_DAY };
	lane_opts suspended = { .flags = MEMD_LANE_SUSPENDED };
	make_lane("u", "old", "s1", NULL);
	make_lane("u", "suspended", "s2", &suspended);
	make_lane("u", "turn", "s3", &turn);
	atomic_store(&now_us, T0 + US_PER_DAY);
	make_lane("u", "recent", "s4", NULL);

	atomic_store(&now_us, T0 + 2 * US_PER_DAY + US_PER_MIN);
	json_t *c = sweep();
	cr_assert_eq(count(c, "pruned"), 1);
	cr_assert_eq(count(c, "finalized"), 0, "mode none never expires");
	json_decref(c);
	json_t *l = lane_get("u", "old");
	cr_assert_null(l, "the old lane was not pruned");
	const char *kept[] = { "suspended", "turn", "recent" };
	for (int i = 0; i < 3; i++) {
		l = lane_get("u", kept[i]);
		cr_assert(l, "lane %s was pruned", kept[i]);
		json_decref(l);
	}
	/* its session stays */
	memd_error err = { 0 };
	char *out = NULL;
	tu_ok(memd_session_get(m, "a", "u", "s1", NULL, &out, &err), &err, &out);
}

Test(lanes_watch, prune_is_off_by_default)
{
	open_memd("reset: {mode: none}", NULL);
	make_lane("u", "old", "s1", NULL);
	atomic_store(&now_us, T0 + 1000 * US_PER_DAY);
	json_t *c = sweep();
	cr_assert_eq(count(c, "pruned"), 0);
	json_decref(c);
	json_t *l = lane_get("u", "old");
	cr_assert(l);
	json_decref(l);
}

/* Search results for word that are events of session sid. */
static int search_hits(const char *user, const char *word, const char *sid)
{
	memd_error err = { 0 };
	char *out = NULL, body[128];
	snprintf(body, sizeof(body), "{\"query\":\"%s\"}", word);
	cr_assert_eq(memd_search(m, "a", user, body, &out, &err), 0, "%s", err.msg);
	json_t *o = tu_json(out), *hit;
	size_t i;
	int n = 0;
	json_array_foreach(json_object_get(o, "results"), i, hit)
		n += strcmp(json_string_value(json_object_get(hit, "session_id")), sid) == 0;
	json_decref(o);
	return n;
}

Test(lanes_watch, retention_deletes_ended_sessions_with_artifacts_and_index_entries)
{
	memd_error err = { 0 };
	char *out = NULL;
	open_memd("reset: {mode: none}", "retention_days: 1");
	make_lane("u", "k", "old", NULL);
	append("u", "old", "zanzibar expedition notes");
	tu_ok(memd_artifact_put(m, "a", "u", "old", "notes.txt", "text/plain", "hi", 2, &out, &err),
	      &err, &out);
	end_session_of("u", "k", "old", "cur", T0 + US_PER_MIN);
	append("u", "cur", "zanzibar again, in the open session");
	cr_assert_eq(search_hits("u", "zanzibar", "old"), 2);
	cr_assert_eq(search_hits("u", "zanzibar", "cur"), 2);

	/* Ended a day ago less a minute: kept. */
	atomic_store(&now_us, T0 + US_PER_DAY);
	json_t *c = sweep();
	cr_assert_eq(count(c, "sessions_deleted"), 0);
	json_decref(c);

	atomic_store(&now_us, T0 + US_PER_DAY + 2 * US_PER_MIN);
	c = sweep();
	cr_assert_eq(count(c, "sessions_deleted"), 1);
	json_decref(c);
	cr_assert_eq(memd_session_get(m, "a", "u", "old", NULL, &out, &err), MEMD_ENOTFOUND);
	cr_assert_neq(memd_artifact_list(m, "a", "u", "old", &out, &err), 0);
	cr_assert_eq(search_hits("u", "zanzibar", "old"), 0, "the deleted session's events are still found");
	cr_assert_eq(search_hits("u", "zanzibar", "cur"), 2);
	tu_ok(memd_session_get(m, "a", "u", "cur", NULL, &out, &err), &err, &out);
}

Test(lanes_watch, retention_works_in_bounded_batches)
{
	char sid[32], nsid[32];
	open_memd("reset: {mode: none}", "retention_days: 1");
	make_lane("u", "k", "s0", NULL);
	for (int i = 0; i < RETENTION_BATCH + 20; i++) {
		snprintf(sid, sizeof(sid), "s%d", i);
		snprintf(nsid, sizeof(nsid), "s%d", i + 1);
		end_session_of("u", "k", sid, nsid, T0 + i);
	}
	atomic_store(&now_us, T0 + 2 * US_PER_DAY);
	json_t *c = sweep();
	cr_assert_eq(count(c, "sessions_deleted"), RETENTION_BATCH);
	json_decref(c);
	c = sweep();
	cr_assert_eq(count(c, "sessions_deleted"), 20);
	json_decref(c);
	c = sweep();
	cr_assert_eq(count(c, "sessions_deleted"), 0);
	json_decref(c);
}

Test(lanes_watch, usage_is_exported_by_app)
{
	memd_call call = { .struct_size = sizeof(call) };
	memd_error err = { 0 };
	char *metrics = NULL;
	open_memd("reset: {mode: none}", NULL);
	make_lane("u", "k", "s1", NULL);

	/* A turn's end: usage on the lane write. */
	json_t *cur = lane_get("u", "k");
	memd_usage turn = { .struct_size = sizeof(turn), .input_tokens = 100, .output_tokens = 20,
			    .cache_read_tokens = 7, .cost_micro_usd = 1500000 };
	memd_lane l = { .struct_size = sizeof(l), .app = "a", .user = "u", .key = "k",
			.session = "s1", .updated_us = T0 };
	memd_lane_write w = { .struct_size = sizeof(w), .lane = &l, .usage = &turn, .now_us = T0,
			      .expected_version = json_integer_value(json_object_get(cur, "version")) };
	json_decref(cur);
	cr_assert_eq(store_lane_write(service_session_store(m), &call, &w, &ignore, &err), 0, "%s",
		     err.msg);
	/* An append with usage. */
	memd_usage more = { .struct_size = sizeof(more), .input_tokens = 5, .cache_write_tokens = 3 };
	memd_event e = { .struct_size = sizeof(e), .id = "e1", .role = "user", .author = "user",
			 .content_json = "{\"parts\":[{\"text\":\"hi\"}]}", .text = "hi",
			 .timestamp_us = T0 };
	const memd_event *ev[1] = { &e };
	int64_t seq;
	memd_append a = { .struct_size = sizeof(a), .events = ev, .n_events = 1, .now_us = T0,
			  .usage = &more };
	memd_append_result res = { .struct_size = sizeof(res), .seqs = &seq };
	memd_scope sc = { .struct_size = sizeof(sc), .app = "a", .user = "u", .session = "s1" };
	cr_assert_eq(store_append(service_session_store(m), &call, &sc, &a, &res, &err), 0, "%s",
		     err.msg);
	/* A replay writes nothing and counts nothing. */
	cr_assert_eq(store_append(service_session_store(m), &call, &sc, &a, &res, &err), 0, "%s",
		     err.msg);
	cr_assert(res.flags & MEMD_APPEND_REPLAYED);

	cr_assert_eq(memd_metrics_text(m, &metrics, &err), 0);
	static const char *const want[] = {
		"memd_lane_usage_input_tokens_total{app=\"a\"} 105\n",
		"memd_lane_usage_output_tokens_total{app=\"a\"} 20\n",
		"memd_lane_usage_cache_read_tokens_total{app=\"a\"} 7\n",
		"memd_lane_usage_cache_write_tokens_total{app=\"a\"} 3\n",
		"memd_lane_usage_cost_usd_total{app=\"a\"} 1.500000\n",
		"# TYPE memd_lane_usage_input_tokens_total counter\n",
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		cr_assert(strstr(metrics, want[i]), "no '%s' in:\n%s", want[i], metrics);
	memd_free(metrics);
}

Test(lanes_watch, strategy_without_finalize_is_finalized_without_it)
{
	/* buffer_window has no on_session_finalize (as a strategy built for
	 * ABI 1.0 or 1.1): the lane is finalized, nothing is appended. */
	strategy_yaml = "{strategy: buffer_window}";
	open_memd(LANES_IDLE, NULL);
	make_lane("u", "k", "s1", NULL);
	append("u", "s1", "hello");
	atomic_store(&now_us, T0 + (IDLE_MIN + 1) * US_PER_MIN);
	json_t *c = sweep();
	cr_assert_eq(count(c, "finalized"), 1);
	cr_assert_eq(count(c, "finalize_failed"), 0);
	json_decref(c);
	cr_assert(lane_flags("u", "k") & MEMD_LANE_FINALIZED);
	json_t *e = last_event("u", "s1");
	cr_assert_str_eq(json_string_value(json_object_get(e, "role")), "assistant");
	json_decref(e);
}

Test(lanes_watch, appends_keep_a_lane_alive)
{
	open_memd(LANES_IDLE, NULL);
	make_lane("u", "k", "s1", NULL);
	/* The lane itself is quiet, its session is not. */
	atomic_store(&now_us, T0 + (IDLE_MIN - 10) * US_PER_MIN);
	append("u", "s1", "still here");
	atomic_store(&now_us, T0 + (IDLE_MIN + 1) * US_PER_MIN);
	json_t *c = sweep();
	cr_assert_eq(count(c, "finalized"), 0, "a lane whose session is active was finalized");
	json_decref(c);
	atomic_store(&now_us, T0 + (2 * IDLE_MIN - 9) * US_PER_MIN);
	c = sweep();
	cr_assert_eq(count(c, "finalized"), 1);
	json_decref(c);
}

/* memd_lane_open's answer. */
static json_t *lane_open(const char *user, const char *key)
{
	memd_error err = { 0 };
	char *out = NULL;
	cr_assert_eq(memd_lane_open(m, "a", user, key, "{}", &out, &err), 0, "%s", err.msg);
	return tu_json(out);
}

Test(lanes_watch, an_open_after_finalize_starts_a_new_session)
{
	open_memd(LANES_IDLE, NULL);
	json_t *o = lane_open("u", "k");
	char *first = strdup(json_string_value(json_object_get(json_object_get(o, "lane"),
							       "session_id")));
	json_decref(o);
	append("u", first, "something to fold");
	atomic_store(&now_us, T0 + (IDLE_MIN + 1) * US_PER_MIN);
	json_t *c = sweep();
	cr_assert_eq(count(c, "finalized"), 1);
	json_decref(c);
	/* The summary the finalize wrote is no activity: the next open
	 * resets the lane. */
	atomic_store(&now_us, T0 + (IDLE_MIN + 2) * US_PER_MIN);
	o = lane_open("u", "k");
	json_t *reset = json_object_get(o, "reset");
	cr_assert(json_is_object(reset), "the finalized session was kept");
	cr_assert_str_eq(json_string_value(json_object_get(reset, "reason")), "idle");
	cr_assert_str_neq(json_string_value(json_object_get(json_object_get(o, "lane"), "session_id")),
			  first);
	json_decref(o);
	cr_assert_eq(lane_flags("u", "k") & MEMD_LANE_FINALIZED, 0);
	/* The old session is never finalized again; the new one in its turn. */
	atomic_store(&now_us, T0 + (3 * IDLE_MIN) * US_PER_MIN);
	c = sweep();
	cr_assert_eq(count(c, "finalized"), 1);
	json_decref(c);
	cr_assert_eq(finalize_records(first), 1);
	free(first);
}

Test(lanes_watch, the_watcher_thread_runs_passes_and_stops_in_memd_close, .timeout = 60)
{
	/* A pass every second on the watcher's own thread; its webhook
	 * never answers (a 10-minute timeout): memd_close must cancel it
	 * rather than wait (else the test's timeout fails it). */
	receiver r;
	char lanes[512];
	receiver_start(&r, 0);
	snprintf(lanes, sizeof(lanes),
		 "watch_interval_s: 1, " LANES_IDLE ", finalize: {webhook: {url: "
		 "'http://127.0.0.1:%d/hook', secret: %s, timeout_ms: 600000, retries: 0}}",
		 r.port, SECRET);
	open_memd(lanes, NULL);
	make_lane("u", "k", "s1", NULL);
	atomic_store(&now_us, T0 + (IDLE_MIN + 1) * US_PER_MIN);
	while (atomic_load(&r.n) == 0) /* the criterion timeout bounds it */
		usleep(1000);
	memd_close(m);
	m = NULL;
	receiver_stop(&r);
}

Test(lanes_watch, daily_reset_finalizes_after_the_hour_in_the_zone)
{
	/* T0 is 01:00 in Berlin (UTC+1 in January): the 04:00 boundary is
	 * 03:00 UTC. */
	open_memd("reset: {mode: daily, at_hour: 4, timezone: Europe/Berlin}", NULL);
	make_lane("u", "k", "s1", NULL);
	atomic_store(&now_us, T0 + 3 * 60 * US_PER_MIN - US_PER_SEC);
	json_t *c = sweep();
	cr_assert_eq(count(c, "finalized"), 0, "finalized before 04:00 Berlin");
	json_decref(c);
	atomic_store(&now_us, T0 + 3 * 60 * US_PER_MIN + US_PER_SEC);
	c = sweep();
	cr_assert_eq(count(c, "finalized"), 1);
	json_decref(c);
	cr_assert(lane_flags("u", "k") & MEMD_LANE_FINALIZED);
}

Test(lanes_watch, prune_after_days_of_each_app)
{
	/* The default prunes after 2 days, app "keep" after 5, app "never"
	 * not at all: each lane by its own app's setting. */
	char yaml[4096];
	snprintf(yaml, sizeof(yaml),
		 "stores:\n  main: {plugin: sqlite, path: %s/memd.db, synchronous: normal}\n"
		 "lanes: {reset: {mode: none}, prune_after_days: 2}\n"
		 "apps:\n  '*': {working_memory: {strategy: buffer_window}}\n"
		 "  keep: {working_memory: {strategy: buffer_window}, lanes: {prune_after_days: 5}}\n"
		 "  never: {working_memory: {strategy: buffer_window}, lanes: {prune_after_days: 0}}\n",
		 dir.path);
	m = tu_open(&dir, yaml);
	memd_set_clock(m, test_clock, NULL);
	make_lane_of("other", "u", "k", "s1", NULL);
	make_lane_of("keep", "u", "k", "s2", NULL);
	make_lane_of("never", "u", "k", "s3", NULL);

	atomic_store(&now_us, T0 + 3 * US_PER_DAY);
	json_t *c = sweep();
	cr_assert_eq(count(c, "pruned"), 1);
	json_decref(c);
	json_t *l = lane_get_of("other", "u", "k");
	cr_assert_null(l, "the default app's lane was kept past 2 days");
	l = lane_get_of("keep", "u", "k");
	cr_assert_not_null(l, "app keep's lane was pruned before 5 days");
	json_decref(l);

	atomic_store(&now_us, T0 + 6 * US_PER_DAY);
	c = sweep();
	cr_assert_eq(count(c, "pruned"), 1);
	json_decref(c);
	cr_assert_null(lane_get_of("keep", "u", "k"));
	l = lane_get_of("never", "u", "k");
	cr_assert_not_null(l, "app never's lane was pruned");
	json_decref(l);
}
