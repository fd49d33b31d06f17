/* SPDX-License-Identifier: MIT */
/*
 * Greedy clients: eight clients reading a large session at once keep
 * memd's memory bounded by server.max_response_bytes, not by the
 * session's size. A session get with all its events (or the newest
 * million) over the limit is a 413 that says how to page, refused before
 * it is built whole (the newest N are not copied first either); event
 * pages end early at the limit and still deliver every event once,
 * and a context of the `all` strategy over the limit is a 413. The
 * session's size is MEMD_TEST_GREEDY_MIB (default GREEDY_MIB_DEFAULT);
 * tests/bench/slowclient_bench reads a 160 MiB one.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

#define U "/v1/apps/demo/users/alice"
#define BIG U "/sessions/big"
#define GREEDY_MIB_DEFAULT 16
#define EVENT_BYTES (256 * 1024)
#define BATCH_EVENTS 12
#define READERS 8
#define MAX_RESPONSE_BYTES (2 * 1024 * 1024)
#define MIB 1048576L
/* What memd may add to its peak RSS while READERS clients read: each
 * answer in memory at most twice (the buffer, and one event being written
 * past it) plus the HTTP library's copy being sent, and a margin for the
 * allocator and the store's page cache. */
#define RSS_GROWTH_BOUND (READERS * 3L * MAX_RESPONSE_BYTES + 48 * MIB)
#define MSG_MAX 1024

static hs H;
static int n_events;

static void setup(void)
{
	char server[256];

	memset(&H, 0, sizeof(H));
	/* glibc gives each of the server's threads its own arena and keeps
	 * what was freed there: with two, the peak measures memd's buffers
	 * rather than how its allocations spread over sixteen threads. */
	setenv("MALLOC_ARENA_MAX", "2", 1);
	snprintf(server, sizeof(server), "  max_response_bytes: %d\n  max_body_bytes: %d\n",
		 MAX_RESPONSE_BYTES, 2 * BATCH_EVENTS * EVENT_BYTES);
	hs_start(&H, server, "apps:\n  everything:\n    working_memory: {strategy: all}\n");
}

static void teardown(void)
{
	hs_finish(&H);
}

TestSuite(greedy, .init = setup, .fini = teardown, .timeout = 110);

static long vm_hwm(void)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)H.pid);
	f = fopen(path, "r");
	cr_assert(f, "cannot read %s", path);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmHWM: %ld kB", &kib) == 1)
			break;
	fclose(f);
	cr_assert_gt(kib, 0);
	return kib * 1024;
}

/* The session's size: MEMD_TEST_GREEDY_MIB or GREEDY_MIB_DEFAULT. */
static long greedy_mib(void)
{
	const char *env = getenv("MEMD_TEST_GREEDY_MIB");
	return env ? strtol(env, NULL, 10) : GREEDY_MIB_DEFAULT;
}

/* A session "big" of mib MiB in EVENT_BYTES events. */
static void fill(const char *app_path, long mib)
{
	size_t cap = (size_t)BATCH_EVENTS * (EVENT_BYTES + 128) + 64;
	char *text = malloc(EVENT_BYTES + 1), *body = malloc(cap);
	char path[256];

	cr_assert(text && body && mib > 0);
	for (size_t i = 0; i < EVENT_BYTES; i++)
		text[i] = i % 8 == 7 ? ' ' : (char)('a' + (i * 7 + i / 13) % 26);
	text[EVENT_BYTES] = '\0';
	snprintf(path, sizeof(path), "%s/sessions", app_path);
	json_decref(hs_expect(&H, "POST", path, "{\"id\":\"big\"}", 201));
	snprintf(path, sizeof(path), "%s/sessions/big/events", app_path);
	n_events = (int)(mib * MIB / EVENT_BYTES);
	for (int done = 0; done < n_events;) {
		size_t len = (size_t)snprintf(body, cap, "{\"events\":[");
		int k;
		for (k = 0; k < BATCH_EVENTS && done + k < n_events; k++)
			len += (size_t)snprintf(body + len, cap - len,
						"%s{\"role\":\"user\",\"content\":\"%d %s\"}", k ? "," : "",
						done + k, text);
		snprintf(body + len, cap - len, "]}");
		json_decref(hs_expect(&H, "POST", path, body, 200));
		done += k;
	}
	free(text);
	free(body);
}

typedef struct reader {
	pthread_t t;
	int whole;          /* 1: GET ?events=0; 2: ?events=1000000; 0: every page
	                     * of GET events */
	int newest;         /* whole == 2 */
	long status;        /* of the whole read, or of the first failed page */
	int events;         /* events received (pages) */
	int pages;
	char error[MSG_MAX];
} reader;

/* GET path on a new raw connection (Connection: close): the status and
 * the body (malloc'd, NUL-terminated), or -1 on a transport failure. The
 * bodies are megabytes of event text: checking them against the spec
 * (hs_req) would take most of the test's time. */
static long raw_get(const char *path, char **ret_body)
{
	char head[512];
	size_t len = 0, cap = 1 << 20;
	char *buf = malloc(cap), *body;
	int fd = hs_raw_connect(&H);
	int n = snprintf(head, sizeof(head), "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
			 path);
	long status;

	cr_assert(buf);
	hs_raw_send(fd, head, (size_t)n);
	for (;;) {
		ssize_t r;
		if (cap - len < 65536) {
			cap *= 2;
			buf = realloc(buf, cap);
			cr_assert(buf);
		}
		r = recv(fd, buf + len, cap - len - 1, 0);
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	close(fd);
	buf[len] = '\0';
	status = hs_raw_status(buf);
	body = strstr(buf, "\r\n\r\n");
	*ret_body = strdup(body ? body + 4 : "");
	free(buf);
	return status ? status : -1;
}

static void *read_session(void *arg)
{
	reader *r = arg;
	char path[256], *body;
	int64_t after = 0;

	if (r->whole) {
		/* All of them, or the newest million (read newest first, a
		 * store would keep a copy of each before answering). */
		r->status = raw_get(r->newest ? BIG "?events=1000000" : BIG "?events=0", &body);
		snprintf(r->error, sizeof(r->error), "%.900s", body);
		free(body);
		return NULL;
	}
	for (;;) {
		json_t *page, *next;
		int more;
		snprintf(path, sizeof(path), BIG "/events?after_seq=%lld&limit=1000", (long long)after);
		r->status = raw_get(path, &body);
		page = r->status == 200 ? json_loads(body, 0, NULL) : NULL;
		if (!page) {
			snprintf(r->error, sizeof(r->error), "%.900s", body);
			free(body);
			if (r->status == 200)
				r->status = -2; /* not JSON */
			break;
		}
		free(body);
		r->pages++;
		r->events += (int)json_array_size(json_object_get(page, "events"));
		next = json_object_get(page, "next_after_seq");
		more = json_is_integer(next);
		after = json_integer_value(next);
		json_decref(page);
		if (!more)
			break;
	}
	return NULL;
}

static void run_readers(reader *r, int whole)
{
	for (int i = 0; i < READERS; i++) {
		memset(&r[i], 0, sizeof(r[i]));
		r[i].whole = whole;
		r[i].newest = whole == 2;
		cr_assert(pthread_create(&r[i].t, NULL, read_session, &r[i]) == 0);
	}
	for (int i = 0; i < READERS; i++)
		pthread_join(r[i].t, NULL);
}

Test(greedy, concurrent_readers_of_a_large_session_stay_bounded)
{
	reader r[READERS];
	long before, after;

	fill(U, greedy_mib());
	before = vm_hwm();
	for (int whole = 1; whole <= 2; whole++) {
		run_readers(r, whole);
		for (int i = 0; i < READERS; i++) {
			cr_assert_eq(r[i].status, 413, "reader %d: %ld %s", i, r[i].status, r[i].error);
			cr_assert(strstr(r[i].error, "max_response_bytes") &&
					  strstr(r[i].error, "after_seq"),
				  "the 413 does not say how to page: %s", r[i].error);
		}
	}
	run_readers(r, 0);
	for (int i = 0; i < READERS; i++) {
		cr_assert_eq(r[i].status, 200, "reader %d: %ld %s", i, r[i].status, r[i].error);
		cr_assert_eq(r[i].events, n_events, "reader %d read %d of %d events", i, r[i].events,
			     n_events);
		cr_assert_gt(r[i].pages, 1, "the pages did not end early at the limit");
	}
	after = vm_hwm();
	cr_log_info("memd's peak RSS grew by %ld MiB (from %ld MiB); the bound is %ld MiB",
		    (after - before) / MIB, before / MIB, RSS_GROWTH_BOUND / MIB);
	cr_assert_leq(after - before, RSS_GROWTH_BOUND,
		      "memd's peak RSS grew by %ld MiB (from %ld MiB) with %d readers of a %d-event "
		      "session; the bound is %ld MiB",
		      (after - before) / MIB, before / MIB, READERS, n_events, RSS_GROWTH_BOUND / MIB);
}

Test(greedy, context_of_everything_over_the_limit_is_413)
{
	hs_resp resp;

	/* Just over the limit. */
	fill("/v1/apps/everything/users/alice", MAX_RESPONSE_BYTES / MIB + 1);
	hs_json(&H, "GET", "/v1/apps/everything/users/alice/sessions/big/context", NULL, &resp);
	cr_assert_eq(resp.status, 413, "%.300s", resp.body);
	cr_assert_str_eq(hs_error_code(&resp), "too_large");
	cr_assert(strstr(resp.body, "max_response_bytes"), "%.300s", resp.body);
	hs_resp_clear(&resp);
}
