/* SPDX-License-Identifier: MIT */
/*
 * recall_bench [EVENTS [SESSIONS]]: what recall (apps.<name>.working_memory.recall)
 * adds to a context read. qgen's labelled conversations (tests/quality;
 * default about 1,000,000 events, SESSIONS a user, default 10: about 195
 * events a user) are appended through the facade into
 * the memory store with the keyword index (one append per session), then
 * for CALLS of qgen's questions a current session of the asking user
 * ends with the question as its latest user message, in two apps with
 * the same buffer_window: "r" with recall (k 5, keyword) over the user's
 * past, "p" without (the reference, a session of its own). Each call
 * reads both contexts back to back; printed: p50/p99 of each and of the
 * difference per call (target: p50 added <= 1 ms), and the fraction of
 * calls whose recall holds an event answering the question.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <memd/memd.h>

#include "qgen.h"

#define RB_SEED 20261126u
#define RB_EVENTS_DEFAULT 1000000
#define RB_EVENTS_PER_SESSION 19.5 /* qgen's assistant set, about */
#define RB_SESSIONS 10
#define RB_PER_USER 2
#define CALLS 1000
#define WARMUP 50
#define TARGET_ADDED_MS 1.0
#define MS_PER_S 1000.0
#define PCT_50 0.50
#define PCT_99 0.99
#define BODY_MAX (64 * 1024)
#define YAML_MAX 2048
#define CATCH_UP_TRIES 600

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, const memd_error *err)
{
	fprintf(stderr, "recall_bench: %s: %s\n", what, err ? err->msg : "failed");
	exit(1);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double pct(double *v, size_t n, double p)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return v[(size_t)(p * (double)(n - 1))];
}

static memd *open_memd(const char *dir)
{
	char cfg[1024], yaml[YAML_MAX];
	memd_options o = { .struct_size = sizeof(o), .config_path = cfg };
	memd_error err = { 0 };
	memd *m = NULL;
	FILE *f;

	snprintf(cfg, sizeof(cfg), "%s/memd.yaml", dir);
	snprintf(yaml, sizeof(yaml),
		 "stores: {main: {plugin: memory}}\n"
		 "index: {keyword: {enabled: true, snapshot: false}}\n"
		 "apps:\n"
		 "  '*': {working_memory: {strategy: all}}\n"
		 "  r: {working_memory: {strategy: buffer_window, max_messages: 20,"
		 " recall: {k: 5, sources: [events], mode: keyword}}}\n"
		 "  p: {working_memory: {strategy: buffer_window, max_messages: 20}}\n");
	if (!(f = fopen(cfg, "w")))
		die("config", NULL);
	fputs(yaml, f);
	fclose(f);
	if (memd_open(&o, &m, &err) < 0)
		die("memd_open", &err);
	return m;
}

static void session(memd *m, const char *app, const char *uid, const char *sid)
{
	char body[128], *out = NULL;
	memd_error err = { 0 };
	snprintf(body, sizeof(body), "{\"id\":\"%s\"}", sid);
	if (memd_session_create(m, app, uid, body, &out, &err) < 0)
		die("session create", &err);
	memd_free(out);
}

static void append(memd *m, const char *app, const char *uid, const char *sid, json_t *events)
{
	json_t *b = json_pack("{s:o}", "events", events);
	char *body = json_dumps(b, JSON_COMPACT), *out = NULL;
	memd_error err = { 0 };

	json_decref(b);
	if (memd_events_append(m, app, uid, sid, body, &out, &err) < 0)
		die("append", &err);
	free(body);
	memd_free(out);
}

/* Every session of s into app "r", one append each. */
static void load(memd *m, const qgen_set *s)
{
	char uid[QGEN_ID_MAX], sid[QGEN_ID_MAX], eid[QGEN_ID_MAX];
	double t0 = now_s();

	for (size_t i = 0, j; i < s->n_events; i = j) {
		json_t *evs = json_array();
		for (j = i; j < s->n_events && s->events[j].user == s->events[i].user &&
			    s->events[j].session == s->events[i].session;
		     j++) {
			qgen_event_id(&s->events[j], eid);
			json_array_append_new(evs, json_pack("{s:s,s:s,s:s}", "id", eid, "role",
							     s->events[j].role, "content",
							     s->events[j].text));
		}
		qgen_user_id(s->events[i].user, uid);
		qgen_session_id(s->events[i].user, s->events[i].session, sid);
		session(m, "r", uid, sid);
		append(m, "r", uid, sid, evs);
	}
	fprintf(stderr, "appended %zu events in %.1f s\n", s->n_events, now_s() - t0);
}

/* Wait until the keyword index has caught up (a search answers). */
static void catch_up(memd *m, const char *uid)
{
	double t0 = now_s();
	for (int i = 0; i < CATCH_UP_TRIES; i++) {
		memd_error err = { 0 };
		char *out = NULL;
		if (memd_search(m, "r", uid, "{\"query\":\"dinner\",\"mode\":\"keyword\"}", &out, &err) == 0) {
			memd_free(out);
			fprintf(stderr, "indexed in %.1f s more\n", now_s() - t0);
			return;
		}
	}
	die("the keyword index did not catch up", NULL);
}

/* Read the context of (app, uid, sid); seconds taken; *ret_json kept when
 * asked. */
static double read_ctx(memd *m, const char *app, const char *uid, const char *sid, char **ret_json)
{
	memd_error err = { 0 };
	char *out = NULL;
	double t0 = now_s(), t;

	if (memd_context(m, app, uid, sid, &out, &err) < 0)
		die("context", &err);
	t = now_s() - t0;
	if (ret_json)
		*ret_json = out;
	else
		memd_free(out);
	return t;
}

int main(int argc, char **argv)
{
	long events = argc > 1 ? atol(argv[1]) : RB_EVENTS_DEFAULT;
	long sessions = argc > 2 ? atol(argv[2]) : RB_SESSIONS;
	qgen_params p = { .seed = RB_SEED, .questions_per_user = RB_PER_USER };
	double *with, *without, *added;
	size_t n = 0, hits = 0, calls;
	char dir[512], cfg[1024];
	qgen_set *s = NULL;
	int ok;
	memd *m;

	if (sessions < 1)
		sessions = RB_SESSIONS;
	p.sessions = (uint32_t)sessions;
	p.users = (uint32_t)((double)events / (RB_EVENTS_PER_SESSION * (double)sessions));
	if (!p.users)
		p.users = 1;
	snprintf(dir, sizeof(dir), "%s/memd-recall-bench-XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir) || qgen_make(&p, &s) < 0)
		die("setup", NULL);
	m = open_memd(dir);
	load(m, s);
	calls = s->n_questions < CALLS + WARMUP ? s->n_questions : CALLS + WARMUP;
	with = calloc(calls, sizeof(double));
	without = calloc(calls, sizeof(double));
	added = calloc(calls, sizeof(double));
	if (!with || !without || !added)
		die("out of memory", NULL);
	/* The current sessions: spread over the users, the question last. */
	for (size_t c = 0; c < calls; c++) {
		const qgen_question *q = &s->questions[(c * s->n_questions) / calls];
		char uid[QGEN_ID_MAX], sid[QGEN_ID_MAX];
		qgen_user_id(q->user, uid);
		snprintf(sid, sizeof(sid), "now-%zu", c);
		for (int a = 0; a < 2; a++) {
			const char *app = a ? "p" : "r";
			session(m, app, uid, sid);
			append(m, app, uid, sid,
			       json_pack("[{s:s,s:s},{s:s,s:s},{s:s,s:s}]", "role", "user", "content",
					 "Hi again, quick question.", "role", "assistant", "content",
					 "Sure, go ahead.", "role", "user", "content", q->text));
		}
	}
	{
		char uid[QGEN_ID_MAX];
		qgen_user_id(0, uid);
		catch_up(m, uid);
	}
	for (size_t c = 0; c < calls; c++) {
		const qgen_question *q = &s->questions[(c * s->n_questions) / calls];
		char uid[QGEN_ID_MAX], sid[QGEN_ID_MAX], *json = NULL;
		double tw, tp;
		qgen_user_id(q->user, uid);
		snprintf(sid, sizeof(sid), "now-%zu", c);
		/* alternate the order so neither read always warms the other's caches */
		if (c % 2) {
			tp = read_ctx(m, "p", uid, sid, NULL);
			tw = read_ctx(m, "r", uid, sid, &json);
		} else {
			tw = read_ctx(m, "r", uid, sid, &json);
			tp = read_ctx(m, "p", uid, sid, NULL);
		}
		if (c >= WARMUP) {
			with[n] = tw * MS_PER_S;
			without[n] = tp * MS_PER_S;
			added[n] = (tw - tp) * MS_PER_S;
			for (uint32_t a = 0; a < q->n_answers; a++) {
				char eid[QGEN_ID_MAX];
				qgen_event_id(&s->events[q->answers[a]], eid);
				if (strstr(json, eid)) {
					hits++;
					break;
				}
			}
			n++;
		}
		memd_free(json);
	}
	printf("recall_bench: %zu events (%u users), keyword index, memory store, %zu calls\n",
	       s->n_events, s->users, n);
	printf("%-28s %10s %10s\n", "context read", "p50 ms", "p99 ms");
	printf("%-28s %10.3f %10.3f\n", "without recall (reference)", pct(without, n, PCT_50),
	       pct(without, n, PCT_99));
	printf("%-28s %10.3f %10.3f\n", "with recall (k 5)", pct(with, n, PCT_50), pct(with, n, PCT_99));
	printf("%-28s %10.3f %10.3f   (target p50 <= %.1f ms)\n", "added by recall, per call",
	       pct(added, n, PCT_50), pct(added, n, PCT_99), TARGET_ADDED_MS);
	printf("recall holds an answering event in %.1f%% of calls\n", 100.0 * (double)hits / (double)n);
	ok = pct(added, n, PCT_50) <= TARGET_ADDED_MS;
	memd_close(m);
	qgen_free(s);
	free(with);
	free(without);
	free(added);
	snprintf(cfg, sizeof(cfg), "%s/memd.yaml", dir);
	unlink(cfg);
	rmdir(dir);
	return ok ? 0 : 2;
}
