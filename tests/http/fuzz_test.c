/* SPDX-License-Identifier: MIT */
/*
 * Robustness: thousands of randomized malformed requests (truncated and
 * corrupted JSON, huge numbers, deep nesting, binary bodies, wrong types,
 * unknown fields, bad ids, invalid UTF-8, NUL bytes) through libcurl, and
 * malformed HTTP (garbage, truncated bodies, lying Content-Length, broken
 * chunking) on raw sockets. memd must stay up, answer every well-formed
 * HTTP request with a 4xx that the spec documents, and leave the store
 * exactly as it was. The seed is printed; MEMD_FUZZ_SEED replays a run.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define U "/v1/apps/demo/users/alice"
#define S1 U "/sessions/s1"
#define HTTP_REQUESTS 3000
#define RAW_REQUESTS 150
#define BODY_MAX 65536
#define DEEP 5000
#define MSG_MAX 2048
#define RAW_READ_MS 5000

static hs H;

static void setup(void)
{
	memset(&H, 0, sizeof(H));
}

static void teardown(void)
{
	hs_finish(&H);
}

TestSuite(fuzz, .init = setup, .fini = teardown, .timeout = 120);

/* xorshift64*: deterministic per seed. */
static uint64_t rng_state;
static uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1DULL;
}
static size_t pick(size_t n)
{
	return (size_t)(rnd() % n);
}

/* Valid bodies for the JSON routes, to corrupt. */
static const char *const valid_append =
	"{\"events\":[{\"id\":\"fz\",\"role\":\"user\",\"content\":{\"parts\":[{\"text\":\"hello\"}]},"
	"\"metadata\":{\"k\":[1,2,{\"x\":null}]}}],\"state_delta\":{\"a\":1,\"user:b\":\"c\"},"
	"\"expected_version\":3,\"invocation_id\":\"inv\"}";
static const char *const valid_create = "{\"id\":\"new\",\"title\":\"t\",\"metadata\":{\"m\":1},\"state\":{\"s\":2}}";
static const char *const valid_patch = "{\"title\":\"t2\",\"metadata\":{\"m\":2},\"archived\":true}";
static const char *const valid_state = "{\"k\":\"v\",\"n\":null}";

typedef struct target {
	const char *method;
	const char *path;
	const char *valid;
} target;

static const target targets[] = {
	{ "POST", S1 "/events", NULL },
	{ "POST", U "/sessions", NULL },
	{ "PATCH", S1, NULL },
	{ "PATCH", S1 "/state", NULL },
};

/* A body that is certainly invalid for its route (so that nothing may be
 * written). Returns its length. */
static size_t mutate(const char *valid, char *out, size_t cap, int state_route)
{
	size_t len = strlen(valid), n = 0;
	int kind = (int)pick(state_route ? 8 : 11);

	switch (kind) {
	case 0: /* truncated: an object is incomplete before its last byte */
		n = 1 + pick(len - 1);
		memcpy(out, valid, n);
		return n;
	case 1: /* random binary, starting with a byte JSON cannot start with */
		n = 1 + pick(512);
		out[0] = (char)(0x80 | pick(0x80));
		for (size_t i = 1; i < n; i++)
			out[i] = (char)pick(256);
		return n;
	case 2: /* deep nesting */
		n = 0;
		out[n++] = '{';
		memcpy(out + n, "\"a\":", 4);
		n += 4;
		for (int i = 0; i < DEEP && n < cap - 2; i++)
			out[n++] = '[';
		return n;
	case 3: /* a huge number where an object belongs */
		return (size_t)snprintf(out, cap, "%s", pick(2) ? "1e999999" : "123456789012345678901234567890");
	case 4: /* invalid UTF-8 inside a string */
		n = (size_t)snprintf(out, cap, "{\"title\":\"a\xc3\x28\xed\xa0\x80z\"}");
		return n;
	case 5: /* a NUL byte inside */
		memcpy(out, valid, len);
		out[pick(len)] = '\0';
		return len;
	case 6: /* not an object */
		return (size_t)snprintf(out, cap, "%s", pick(2) ? "[]" : "\"str\"");
	case 7: /* a byte flipped to a structural character, then cut short */
		memcpy(out, valid, len);
		out[pick(len)] = "{}[],:\""[pick(7)];
		return len - 1;
	case 8: /* an unknown field */
		n = (size_t)snprintf(out, cap, "%.*s,\"zz_unknown\":1}", (int)(len - 1), valid);
		return n;
	case 9: /* a wrong type for a known field */
	{
		static const char *const wrong[] = {
			"{\"events\":{}}", "{\"events\":[1]}", "{\"events\":[{\"role\":5,\"content\":\"x\"}]}",
			"{\"expected_version\":-1,\"events\":[]}", "{\"expected_version\":1.5,\"events\":[]}",
			"{\"expected_version\":99999999999999999999,\"events\":[]}",
			"{\"id\":[],\"title\":\"t\"}", "{\"title\":5}", "{\"metadata\":\"m\"}", "{\"archived\":1}",
			"{\"events\":[{\"role\":\"user\",\"content\":5}]}",
			"{\"events\":[{\"role\":\"user\",\"content\":{\"parts\":\"x\"}}]}",
			"{\"events\":[{\"role\":\"user\",\"content\":\"x\",\"timestamp\":\"noon\"}]}",
			"{\"state_delta\":[1]}", "{\"invocation_id\":7,\"events\":[]}",
		};
		return (size_t)snprintf(out, cap, "%s", wrong[pick(sizeof(wrong) / sizeof(wrong[0]))]);
	}
	default: /* a bad id (control character, slash, too long) */
	{
		static const char *const bad[] = {
			"{\"id\":\"a\\u0001b\"}", "{\"id\":\"a/b\"}", "{\"id\":\"\"}",
			"{\"events\":[{\"id\":\"x\\u0000y\",\"role\":\"user\",\"content\":\"x\"}]}",
			"{\"events\":[{\"id\":\"x/y\",\"role\":\"user\",\"content\":\"x\"}]}",
			"{\"invocation_id\":\"a\\nb\",\"events\":[{\"role\":\"user\",\"content\":\"x\"}]}",
		};
		return (size_t)snprintf(out, cap, "%s", bad[pick(sizeof(bad) / sizeof(bad[0]))]);
	}
	}
}

/* A path that is certainly refused: a bad id, a bad escape, a bad query. */
static void bad_path(char *out, size_t cap)
{
	static const char *const paths[] = {
		U "/sessions/a%2Fb", U "/sessions/%00", U "/sessions/%ff%fe", U "/sessions/%zz",
		U "/sessions/s1?events=-1", U "/sessions/s1?after_seq=99999999999999999999999",
		U "/sessions/s1?after_time=x", U "/sessions?limit=1e9", U "/sessions?cursor=%ff",
		U "/sessions/s1/events?limit=abc", U "/sessions/s1/artifacts/..", "/v1/apps/%01/users/u/sessions",
		U "/sessions/s1?events=1&events=2", U "/sessions/s1/context?x=1",
	};
	snprintf(out, cap, "%s", paths[pick(sizeof(paths) / sizeof(paths[0]))]);
}

static int64_t clock_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

Test(fuzz, malformed_requests_change_nothing)
{
	static char body[BODY_MAX];
	char msg[MSG_MAX], path[512], *before, *after;
	uint64_t seed = getenv("MEMD_FUZZ_SEED") ? strtoull(getenv("MEMD_FUZZ_SEED"), NULL, 10)
						 : (uint64_t)time(NULL) ^ (uint64_t)getpid();
	const char *valid[] = { valid_append, valid_create, valid_patch, valid_state };
	int counts[600] = { 0 };
	int stalled[RAW_REQUESTS], n_stalled = 0;
	int64_t t0;

	rng_state = seed ? seed : 1;
	fprintf(stderr, "fuzz seed: %llu (MEMD_FUZZ_SEED replays it)\n", (unsigned long long)seed);
	hs_start(&H, "  max_body_bytes: 65536\n  request_timeout_ms: 1000\n", NULL);
	json_decref(hs_expect(&H, "POST", U "/sessions", "{\"id\":\"s1\",\"title\":\"kept\",\"state\":{\"x\":1}}", 201));
	json_decref(hs_expect(&H, "POST", S1 "/events",
			      "{\"events\":[{\"role\":\"user\",\"content\":\"one\"},{\"role\":\"assistant\",\"content\":\"two\"}]}", 200));
	{
		const char *const ct[] = { "Content-Type: text/plain", NULL };
		hs_resp r;
		hs_req(&H, "PUT", S1 "/artifacts/a.txt", ct, "abc", 3, &r);
		cr_assert_eq(r.status, 201);
		hs_resp_clear(&r);
	}
	before = hs_snapshot(&H, "demo", "alice");

	t0 = clock_ms();
	for (int i = 0; i < HTTP_REQUESTS; i++) {
		size_t t = pick(sizeof(targets) / sizeof(targets[0]) + 1);
		size_t len;
		hs_resp r;
		const char *method, *p;

		if (t == sizeof(targets) / sizeof(targets[0])) {
			/* A bad path or query on a read route, or an artifact PUT with a bad name. */
			bad_path(path, sizeof(path));
			method = "GET";
			p = path;
			len = 0;
		} else {
			method = targets[t].method;
			p = targets[t].path;
			len = mutate(valid[t], body, sizeof(body), t == 3);
		}
		if (hs_try(&H, H.curl, method, p, NULL, len || strcmp(method, "GET") ? body : NULL, len, &r,
			   msg, sizeof(msg)) < 0)
			cr_assert_fail("request %d (%s %s, seed %llu): %s", i, method, p,
				       (unsigned long long)seed, msg);
		cr_assert(r.status >= 400 && r.status < 500, "request %d (%s %s, seed %llu): %ld %s; body %.*s",
			  i, method, p, (unsigned long long)seed, r.status, r.body, (int)(len < 200 ? len : 200), body);
		counts[r.status]++;
		hs_resp_clear(&r);
	}
	fprintf(stderr, "fuzz: %d x 400, %d x 404, %d x 409, %d x 413 in %.1f s\n", counts[400], counts[404],
		counts[409], counts[413], (double)(clock_ms() - t0) / 1000);
	t0 = clock_ms();

	/* Malformed HTTP on raw sockets: whatever answer comes is a 4xx. */
	for (int i = 0; i < RAW_REQUESTS; i++) {
		char raw[4096], reply[8192];
		int fd = hs_raw_connect(&H), status;
		size_t n = 0;
		switch (i % 6) {
		case 0: /* garbage */
			for (n = 0; n < 64; n++)
				raw[n] = (char)(1 + pick(255));
			memcpy(raw + n, "\r\n\r\n", 4);
			n += 4;
			break;
		case 1: /* a body shorter than its Content-Length, then close */
			n = (size_t)snprintf(raw, sizeof(raw), "POST " S1 "/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nConnection: close\r\n"
						       "Content-Length: 500\r\n\r\n{\"events\":[{\"role\":\"user\"");
			break;
		case 2: /* broken chunking */
			n = (size_t)snprintf(raw, sizeof(raw), "POST " S1 "/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nConnection: close\r\n"
						       "Transfer-Encoding: chunked\r\n\r\nZZZ\r\nabc\r\n0\r\n\r\n");
			break;
		case 3: /* a request line without a version */
			n = (size_t)snprintf(raw, sizeof(raw), "GET " S1 "\r\n\r\n");
			break;
		case 4: /* a bad Content-Length */
			n = (size_t)snprintf(raw, sizeof(raw), "POST " S1 "/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nConnection: close\r\n"
						       "Content-Length: -5\r\n\r\n{}");
			break;
		default: /* binary body with a lying Content-Length, sent in full */
			n = (size_t)snprintf(raw, sizeof(raw), "PATCH " S1 "/state HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nConnection: close\r\n"
						       "Content-Length: 40\r\n\r\n");
			for (int k = 0; k < 40; k++)
				raw[n++] = (char)(0x80 | pick(0x80));
			break;
		}
		hs_raw_send(fd, raw, n);
		if (i % 6 == 1) {
			/* Half-closed mid-body: answered by the request timeout. Read
			 * these at the end, all at once. */
			shutdown(fd, SHUT_WR);
			stalled[n_stalled++] = fd;
			continue;
		}
		hs_raw_read(fd, reply, sizeof(reply), RAW_READ_MS);
		status = hs_raw_status(reply);
		cr_assert(status == 0 || (status >= 400 && status < 500), "raw request %d: %s", i, reply);
		close(fd);
	}
	for (int k = 0; k < n_stalled; k++) {
		char reply[8192];
		hs_raw_read(stalled[k], reply, sizeof(reply), RAW_READ_MS);
		/* libmicrohttpd closes it when it sees the end of input with the
		 * body; otherwise the watchdog answers 408. */
		cr_assert(hs_raw_status(reply) == 408 || reply[0] == '\0', "a half-closed upload: %s", reply);
		close(stalled[k]);
	}

	fprintf(stderr, "fuzz: %d raw requests in %.1f s\n", RAW_REQUESTS, (double)(clock_ms() - t0) / 1000);
	/* Still up, and nothing changed. */
	json_decref(hs_expect(&H, "GET", "/healthz", NULL, 200));
	after = hs_snapshot(&H, "demo", "alice");
	cr_assert_str_eq(before, after, "the store changed (seed %llu)", (unsigned long long)seed);
	free(before);
	free(after);
}
