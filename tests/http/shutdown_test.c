/* SPDX-License-Identifier: MIT */
/*
 * Graceful shutdown: SIGTERM during a write load loses no acknowledged
 * write (checked after a restart on the same database), memd exits 0, a
 * request in flight when the signal arrives is finished, and SIGINT does
 * the same as SIGTERM.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define U "/v1/apps/demo/users/alice"
#define WRITERS 6
#define MIN_ACKS_BEFORE_SIGNAL 60
#define MSG_MAX 2048
#define WAIT_STEP_US 5000
#define WAIT_ROUNDS 4000
#define DRAIN_WAIT_MS 10000 /* bound on waiting for memd to be in a request, or to stop accepting */

static hs H;

static void setup(void)
{
	memset(&H, 0, sizeof(H));
}

static void teardown(void)
{
	hs_finish(&H);
}

TestSuite(shutdown, .init = setup, .fini = teardown, .timeout = 90);

typedef struct writer {
	pthread_t t;
	int index;
	json_t *acked;      /* ids answered 200 */
	int other;          /* answers that were neither 200 nor 503 */
	char error[MSG_MAX];
} writer;

static atomic_int total_acks;

static void *write_loop(void *arg)
{
	writer *w = arg;
	CURL *c = hs_curl();
	char path[256];

	snprintf(path, sizeof(path), U "/sessions/w%d/events", w->index);
	for (int i = 0;; i++) {
		char body[256], msg[MSG_MAX], id[64];
		hs_resp r;
		snprintf(id, sizeof(id), "w%d-%d", w->index, i);
		snprintf(body, sizeof(body), "{\"events\":[{\"id\":\"%s\",\"role\":\"user\",\"content\":\"x\"}]}", id);
		if (hs_try(&H, c, "POST", path, NULL, body, strlen(body), &r, msg, sizeof(msg)) < 0) {
			/* Connection refused or reset: the server is gone. A response
			 * that broke the spec would be a failure, though. */
			if (strstr(msg, "not as the spec says")) {
				w->other++;
				snprintf(w->error, sizeof(w->error), "%s", msg);
			}
			hs_resp_clear(&r);
			break;
		}
		if (r.status == 200) {
			json_object_set_new(w->acked, id, json_true());
			atomic_fetch_add(&total_acks, 1);
		} else if (r.status != 503) {
			w->other++;
			snprintf(w->error, sizeof(w->error), "%ld %s", r.status, r.body);
		}
		hs_resp_clear(&r);
		if (r.status == 503)
			break;
	}
	curl_easy_cleanup(c);
	return NULL;
}

static void check_after_restart(writer *w)
{
	hs_restart(&H);
	for (int k = 0; k < WRITERS; k++) {
		char path[256];
		json_t *s, *e;
		size_t i, found = 0;
		snprintf(path, sizeof(path), U "/sessions/w%d?events=0", k);
		s = hs_expect(&H, "GET", path, NULL, 200);
		json_array_foreach(json_object_get(s, "events"), i, e) {
			cr_assert_eq(json_integer_value(json_object_get(e, "seq")), (json_int_t)i + 1);
			found += json_object_get(w[k].acked, json_string_value(json_object_get(e, "id"))) != NULL;
		}
		cr_assert_eq(found, json_object_size(w[k].acked),
			     "writer %d: %zu acknowledged events, %zu of them stored", k,
			     json_object_size(w[k].acked), found);
		/* At most the one unanswered append may be stored beyond the acknowledged. */
		cr_assert_leq(json_array_size(json_object_get(s, "events")), found + 1);
		json_decref(s);
	}
}

static void run_load_then_signal(int sig)
{
	writer w[WRITERS] = { 0 };
	int status;

	hs_start(&H, "  log_level: warn\n", NULL);
	for (int k = 0; k < WRITERS; k++) {
		char body[64];
		snprintf(body, sizeof(body), "{\"id\":\"w%d\"}", k);
		json_decref(hs_expect(&H, "POST", U "/sessions", body, 201));
	}
	atomic_store(&total_acks, 0);
	for (int k = 0; k < WRITERS; k++) {
		w[k].index = k;
		w[k].acked = json_object();
		cr_assert_eq(pthread_create(&w[k].t, NULL, write_loop, &w[k]), 0);
	}
	for (int i = 0; i < WAIT_ROUNDS && atomic_load(&total_acks) < MIN_ACKS_BEFORE_SIGNAL; i++)
		usleep(WAIT_STEP_US);
	cr_assert_geq(atomic_load(&total_acks), MIN_ACKS_BEFORE_SIGNAL);
	status = hs_signal_wait(&H, sig);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "exit status 0x%x", status);
	for (int k = 0; k < WRITERS; k++)
		pthread_join(w[k].t, NULL);
	for (int k = 0; k < WRITERS; k++)
		cr_assert_eq(w[k].other, 0, "writer %d: %s", k, w[k].error);
	fprintf(stderr, "shutdown (signal %d): %d appends acknowledged before memd exited\n", sig,
		atomic_load(&total_acks));
	check_after_restart(w);
	for (int k = 0; k < WRITERS; k++)
		json_decref(w[k].acked);
}

Test(shutdown, sigterm_under_write_load_loses_no_acknowledged_write)
{
	run_load_then_signal(SIGTERM);
}

Test(shutdown, sigint_too)
{
	run_load_then_signal(SIGINT);
}

Test(shutdown, request_in_flight_is_finished)
{
	char raw[4096], *log;
	const char *head = "POST " U "/sessions/s1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 64\r\n\r\n";
	char body[65];
	int fd, status, late = 0;
	json_t *s;

	hs_start(&H, NULL, NULL);
	json_decref(hs_expect(&H, "POST", U "/sessions", "{\"id\":\"s1\"}", 201));
	/* Half a request, then SIGTERM, then the rest. */
	snprintf(body, sizeof(body), "%-64s", "{\"events\":[{\"id\":\"late\",\"role\":\"user\",\"content\":\"x\"}]}");
	fd = hs_raw_connect(&H);
	hs_raw_send(fd, head, strlen(head));
	hs_raw_send(fd, body, 20);
	/* The signal comes once memd is inside the request (it has the
	 * headers), not after a guessed time. */
	cr_assert(hs_wait_in_flight(&H, 1, DRAIN_WAIT_MS),
		  "memd did not start on the half-sent request within %d ms", DRAIN_WAIT_MS);
	kill(H.pid, SIGTERM);
	/* memd stops accepting connections while the request is still in
	 * flight (its rest is not sent yet)... */
	for (int waited = 0; waited < DRAIN_WAIT_MS; waited += WAIT_STEP_US / 1000) {
		late = hs_raw_connect_try(&H);
		if (late < 0)
			break;
		close(late);
		usleep(WAIT_STEP_US);
	}
	cr_assert_lt(late, 0, "new connections were still accepted %d ms after SIGTERM",
		     DRAIN_WAIT_MS);
	/* ...but finishes this request. */
	hs_raw_send(fd, body + 20, 44);
	hs_raw_read(fd, raw, sizeof(raw), 10000);
	cr_assert_eq(hs_raw_status(raw), 200, "%s", raw);
	cr_assert(strstr(raw, "Connection: close"), "%s", raw);
	close(fd);
	status = hs_signal_wait(&H, 0);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "exit status 0x%x", status);
	log = hs_log_text(&H);
	cr_assert(strstr(log, "\"msg\":\"shutting down\""), "%s", log);
	/* At least this request (the /metrics probe that saw it may not have
	 * been counted out yet: its answer reaches the client first). */
	{
		const char *f = strstr(log, "\"in_flight\":");
		cr_assert(f && atol(f + strlen("\"in_flight\":")) >= 1,
			  "the request was not in flight at the signal: %s", log);
	}
	cr_assert(strstr(log, "\"msg\":\"stopped\""), "%s", log);
	free(log);
	hs_restart(&H);
	s = hs_expect(&H, "GET", U "/sessions/s1?events=0", NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(s, "events")), 1);
	json_decref(s);
}
