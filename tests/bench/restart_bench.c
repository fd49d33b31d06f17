/* SPDX-License-Identifier: MIT */
/*
 * restart_bench: how long a memd start takes until its first keyword
 * search is answered (memd_open until memd_search succeeds: the in-memory
 * keyword index has caught up with the feed) on a sqlite store holding N
 * events of qgen's conversations (tests/quality/qgen.h, as keyword_bench),
 *   - without a snapshot (index.keyword.snapshot: false): the whole feed
 *     is replayed;
 *   - with a snapshot at the feed head: the file is loaded;
 *   - with a snapshot RB_TAIL events behind the head: loaded, then those
 *     events replayed;
 * and the snapshot's size, how long closing took to write it, and how
 * long the copy of the index into the file paused indexing (what a
 * background snapshot costs the tailer).
 *
 * The store is filled through the facade with synchronous: normal and
 * the keyword index off (the fill is not what is measured). The snapshot
 * is read from the page cache (just written): a cold start also reads it
 * from disk.
 *
 * Usage: restart_bench [events ...]   (default 100000 1000000)
 * MEMD_PLUGIN_PATH must name the built plugins (for sqlite);
 * MEMD_BENCH_CONCAT=n makes each event's text n of qgen's texts (longer
 * turns: qgen's are short sentences).
 */
#include <ftw.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <memd/memd.h>

#include "qgen.h"

#define RB_SEED 0x7265737461727421ULL
#define RB_EVENTS_PER_USER 588       /* as keyword_bench: 1M events ~ 1,700 users */
#define RB_SESSIONS 30
#define RB_TAIL 10000                /* events appended after the snapshot */
#define RB_APP "bench"
#define RB_QUERY "{\"query\":\"what did I say about the weekend\",\"k\":10}"
#define RB_PATH_MAX 1024
#define RB_KW_EXTRA 64               /* the keyword map around the snapshot path */
#define RB_DIR_MAX 900
#define RB_LOG_MAX 512
#define RB_NFTW_FDS 16
#define RB_MAX_SIZES 8
#define RB_CONCAT_MAX 64
#define RB_NS_PER_S 1e9
#define RB_BYTES_PER_MIB (1024.0 * 1024.0)

static const long default_sizes[] = { 100000, 1000000 };

static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("restart_bench: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / RB_NS_PER_S;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* The keyword index's last "snapshot written" and "loaded" lines. */
typedef struct logs {
	pthread_mutex_t mu;
	char written[RB_LOG_MAX], loaded[RB_LOG_MAX];
} logs;

static void log_line(void *ud, int32_t level, const char *component, const char *line)
{
	logs *l = ud;
	(void)level;
	if (strcmp(component, "index.keyword") != 0)
		return;
	pthread_mutex_lock(&l->mu);
	if (strstr(line, "snapshot written"))
		snprintf(l->written, sizeof(l->written), "%s", line);
	else if (strstr(line, "loaded the snapshot"))
		snprintf(l->loaded, sizeof(l->loaded), "%s", line);
	else if (strstr(line, "not used"))
		fprintf(stderr, "  %s\n", line);
	pthread_mutex_unlock(&l->mu);
}

/* The number before suffix in line (e.g. " ms in all"), or -1. */
static double number_before(const char *line, const char *suffix)
{
	const char *at = strstr(line, suffix), *p;
	if (!at)
		return -1;
	p = at;
	while (p > line && (p[-1] == '.' || (p[-1] >= '0' && p[-1] <= '9')))
		p--;
	return p < at ? strtod(p, NULL) : -1;
}

static void write_config(const char *dir, const char *keyword)
{
	char path[RB_PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/memd.yaml", dir);
	f = fopen(path, "w");
	if (!f)
		die("cannot write %s", path);
	fprintf(f,
		"stores:\n"
		"  main: {plugin: sqlite, path: \"%s/memd.db\", synchronous: normal}\n"
		"index:\n"
		"  keyword: %s\n",
		dir, keyword);
	fclose(f);
}

static memd *open_memd(const char *dir, logs *l)
{
	char path[RB_PATH_MAX];
	memd_options o = { .struct_size = sizeof(o), .config_path = path, .log = log_line,
			   .log_userdata = l, .log_level = MEMD_LOG_INFO };
	memd_error err = { 0 };
	memd *m = NULL;

	snprintf(path, sizeof(path), "%s/memd.yaml", dir);
	if (memd_open(&o, &m, &err) < 0)
		die("memd_open: %s", err.msg);
	return m;
}

/* MEMD_BENCH_CONCAT=n: each event's text is qgen's texts of it and the
 * n - 1 events after it, for longer turns than qgen's (default 1). */
static size_t bench_concat(void)
{
	const char *v = getenv("MEMD_BENCH_CONCAT");
	char *end;
	long n;

	if (!v || !*v)
		return 1;
	n = strtol(v, &end, 10);
	if (*end || n < 1 || n > RB_CONCAT_MAX)
		die("MEMD_BENCH_CONCAT must be 1..%d", RB_CONCAT_MAX);
	return (size_t)n;
}

/* The text of event i (malloc'd), concat texts long. */
static char *event_text(const qgen_set *s, size_t i, size_t concat)
{
	size_t len = 0, at = 0;
	char *t;

	for (size_t k = 0; k < concat; k++)
		len += strlen(s->events[(i + k) % s->n_events].text) + 1;
	if (!(t = malloc(len)))
		die("out of memory");
	for (size_t k = 0; k < concat; k++) {
		const char *x = s->events[(i + k) % s->n_events].text;
		size_t l = strlen(x);
		if (k)
			t[at++] = ' ';
		memcpy(t + at, x, l);
		at += l;
	}
	t[at] = '\0';
	return t;
}

/* Append events [from, to) of s, one append per run of one session. */
static void fill(memd *m, const qgen_set *s, size_t from, size_t to)
{
	size_t concat = bench_concat();
	char uid[QGEN_ID_MAX], sid[QGEN_ID_MAX], eid[QGEN_ID_MAX];
	size_t i = from;

	while (i < to) {
		const qgen_event *first = &s->events[i];
		json_t *evs = json_array(), *body;
		memd_error err = { 0 };
		char *text, *out = NULL, sbody[QGEN_ID_MAX * 2];

		qgen_user_id(first->user, uid);
		qgen_session_id(first->user, first->session, sid);
		if (first->seq == 1) {
			snprintf(sbody, sizeof(sbody), "{\"id\":\"%s\"}", sid);
			if (memd_session_create(m, RB_APP, uid, sbody, &out, &err) < 0)
				die("session create: %s", err.msg);
			memd_free(out);
			out = NULL;
		}
		for (; i < to && s->events[i].user == first->user &&
		       s->events[i].session == first->session;
		     i++) {
			char *t = event_text(s, i, concat);
			qgen_event_id(&s->events[i], eid);
			json_array_append_new(evs, json_pack("{s:s,s:s,s:s}", "id", eid, "role",
							     s->events[i].role, "content", t));
			free(t);
		}
		body = json_pack("{s:o}", "events", evs);
		text = json_dumps(body, JSON_COMPACT);
		json_decref(body);
		if (!text || memd_events_append(m, RB_APP, uid, sid, text, &out, &err) < 0)
			die("append: %s", err.msg);
		free(text);
		memd_free(out);
	}
}

/* memd_open until the first search is answered; seconds. */
static double start_to_searchable(const char *dir, logs *l, const char *user, memd **ret)
{
	double t0 = now_s();
	memd *m = open_memd(dir, l);
	for (;;) {
		memd_error err = { 0 };
		char *out = NULL;
		int32_t r = memd_search(m, RB_APP, user, RB_QUERY, &out, &err);
		memd_free(out);
		if (r == 0)
			break;
		if (r != MEMD_ETIMEDOUT && r != MEMD_EUNAVAIL)
			die("search: %s", err.msg);
	}
	*ret = m;
	return now_s() - t0;
}

typedef struct row {
	long events;
	double rebuild_s, load_s, tail_s;
	double load_ms_logged;
	double size_mib, close_s, paused_ms, write_ms;
} row;

static void run_size(long events, row *r)
{
	qgen_params p = { .seed = RB_SEED, .sessions = RB_SESSIONS, .questions_per_user = 1 };
	logs l = { .mu = PTHREAD_MUTEX_INITIALIZER };
	char dir[RB_DIR_MAX], snap[RB_PATH_MAX], user[QGEN_ID_MAX], kw[RB_PATH_MAX + RB_KW_EXTRA];
	const char *tmp = getenv("TMPDIR");
	qgen_set *s = NULL;
	size_t base;
	struct stat st;
	double t0;
	memd *m;

	memset(r, 0, sizeof(*r));
	p.users = (uint32_t)((events + RB_EVENTS_PER_USER / 2) / RB_EVENTS_PER_USER);
	if (!p.users)
		p.users = 1;
	if (qgen_make(&p, &s) < 0)
		die("qgen: out of memory");
	snprintf(dir, sizeof(dir), "%s/restart-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir))
		die("mkdtemp failed");
	snprintf(snap, sizeof(snap), "%s/keyword.snapshot", dir);
	snprintf(kw, sizeof(kw), "{enabled: true, snapshot: \"%s\"}", snap);
	qgen_user_id(0, user);
	/* The tail goes in after the snapshot: it must be whole sessions. */
	base = s->n_events > RB_TAIL ? s->n_events - RB_TAIL : 0;
	while (base > 0 && s->events[base].seq != 1)
		base--;
	r->events = (long)base;

	fprintf(stderr, "%ld events: filling the store...\n", r->events);
	write_config(dir, "{enabled: false}");
	m = open_memd(dir, &l);
	fill(m, s, 0, base);
	memd_close(m);

	fprintf(stderr, "  start without a snapshot...\n");
	write_config(dir, "{enabled: true, snapshot: false}");
	r->rebuild_s = start_to_searchable(dir, &l, user, &m);
	memd_close(m);

	fprintf(stderr, "  first start with a snapshot (none yet), close writes it...\n");
	write_config(dir, kw);
	start_to_searchable(dir, &l, user, &m);
	t0 = now_s();
	memd_close(m);
	r->close_s = now_s() - t0;
	if (stat(snap, &st) < 0)
		die("no snapshot was written at %s", snap);
	r->size_mib = (double)st.st_size / RB_BYTES_PER_MIB;
	fprintf(stderr, "  %s\n", l.written);
	r->paused_ms = number_before(l.written, " ms, ");
	r->write_ms = number_before(l.written, " ms in all");

	fprintf(stderr, "  start from the snapshot...\n");
	r->load_s = start_to_searchable(dir, &l, user, &m);
	fprintf(stderr, "  %s\n", l.loaded);
	r->load_ms_logged = number_before(l.loaded, " ms; catching up");
	memd_close(m);

	fprintf(stderr, "  %zu more events, then a start from the snapshot...\n", s->n_events - base);
	write_config(dir, "{enabled: false}");
	m = open_memd(dir, &l);
	fill(m, s, base, s->n_events);
	memd_close(m);
	write_config(dir, kw);
	l.loaded[0] = '\0';
	r->tail_s = start_to_searchable(dir, &l, user, &m);
	memd_close(m);

	nftw(dir, rm_one, RB_NFTW_FDS, FTW_DEPTH | FTW_PHYS);
	qgen_free(s);
}

int main(int argc, char **argv)
{
	long sizes[RB_MAX_SIZES];
	row rows[RB_MAX_SIZES];
	size_t n = 0;

	if (!getenv("MEMD_PLUGIN_PATH"))
		die("MEMD_PLUGIN_PATH must name the built plugins (build/plugins)");
	for (int i = 1; i < argc && n < RB_MAX_SIZES; i++) {
		char *end;
		sizes[n] = strtol(argv[i], &end, 10);
		if (*end || sizes[n] <= RB_TAIL)
			die("usage: restart_bench [events (> %d) ...]", RB_TAIL);
		n++;
	}
	if (!n)
		for (; n < sizeof(default_sizes) / sizeof(default_sizes[0]); n++)
			sizes[n] = default_sizes[n];
	for (size_t i = 0; i < n; i++)
		run_size(sizes[i], &rows[i]);

	printf("memd start until the first keyword search is answered (sqlite, qgen conversations)\n");
	printf("%9s | %10s %10s %8s %9s %12s | %9s %9s %10s %9s\n", "events", "no snap s",
	       "snap s", "speedup", "load ms", "snap+tail s", "snap MiB", "close s", "paused ms",
	       "write ms");
	for (size_t i = 0; i < n; i++)
		printf("%9ld | %10.2f %10.2f %7.1fx %9.0f %12.2f | %9.1f %9.2f %10.0f %9.0f\n",
		       rows[i].events, rows[i].rebuild_s, rows[i].load_s,
		       rows[i].load_s > 0 ? rows[i].rebuild_s / rows[i].load_s : 0,
		       rows[i].load_ms_logged, rows[i].tail_s, rows[i].size_mib, rows[i].close_s,
		       rows[i].paused_ms, rows[i].write_ms);
	printf("load ms: reading the file into the index (part of snap s); snap+tail: a snapshot\n"
	       "%d events behind the head; paused ms: indexing paused while the index is copied\n"
	       "into the file; write ms: the whole write, fsyncs and rename included.\n",
	       RB_TAIL);
	return 0;
}
