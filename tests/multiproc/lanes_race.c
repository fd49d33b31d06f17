/* SPDX-License-Identifier: MIT */
/*
 * Two memd processes (a libmemd handle in each of two forked children)
 * over one database server (stress_util.h says which) race the lanes:
 *
 *  - gateway: both open the same new keys at once (each key gets one
 *    session, the same for both), then both begin a turn on every key
 *    (exactly one wins each), then both take from one inbox with its
 *    holder's turn id (each item is taken exactly once, none is lost).
 *    The phases are started by the parent through pipes, each once both
 *    children have reported the one before.
 *  - finalize: both run the lane watcher at once over the same expired
 *    lanes: each lane is finalized exactly once. The parent counts the finalize webhook's deliveries (a
 * local receiver) and the change feed's FINALIZE records per session:
 * one each, and the children's finalized counts add up to the lanes.
 * Both children sweep until no lane is left unfinalized; they wait for
 * that condition (bounded by passes), never for a time, and the clock is
 * theirs (memd_set_clock).
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
#include <sys/wait.h>
#include <unistd.h>

#include <memd/memd.h>

#include "plugins/store.h"
#include "service/service.h"
#include "stress_util.h"

#define N_PROCS 2
#define N_LANES 40
#define MAX_PASSES 200          /* sweeps a child makes at most */
#define US_PER_MIN (60LL * 1000000LL)
#define T0 1767225600000000LL   /* 2026-01-01T00:00:00Z */
#define IDLE_MIN 60
#define REQ_MAX 65536
#define ID_MAX 64
#define N_KEYS 20               /* gateway: keys opened and turned at once */
#define N_ITEMS 60              /* gateway: inbox items taken by both */
#define LEASE_BODY "{\"lease_ms\":600000}"

static int64_t late_clock(void *ud)
{
	(void)ud;
	return T0 + 2 * IDLE_MIN * US_PER_MIN;
}

/* ---- the webhook receiver: session ids of the deliveries ---- */

typedef struct receiver {
	int fd;
	int port;
	_Atomic int n;
	char sessions[4 * N_LANES][ID_MAX];
	_Atomic int stop;
	pthread_t thread;
} receiver;

static void *receive(void *arg)
{
	receiver *r = arg;
	static char buf[REQ_MAX];
	for (;;) {
		int c = accept(r->fd, NULL, NULL);
		size_t len = 0;
		char *end = NULL;
		long cl = 0;
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
				const char *h = strcasestr(buf, "Content-Length:");
				cl = h ? strtol(h + strlen("Content-Length:"), NULL, 10) : 0;
			}
			if (end && len >= (size_t)(end + 4 - buf) + (size_t)cl)
				break;
		}
		if (end) {
			json_t *o = json_loadb(end + 4, (size_t)cl, 0, NULL);
			int i = atomic_load(&r->n);
			if (o && i < 4 * N_LANES) {
				snprintf(r->sessions[i], ID_MAX, "%s",
					 json_string_value(json_object_get(o, "session_id")));
				atomic_store(&r->n, i + 1);
			}
			json_decref(o);
		}
		static const char reply[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
		(void)!write(c, reply, sizeof(reply) - 1);
		close(c);
	}
}

/* ---- the processes ---- */

static memd *open_memd(const char *yaml_path)
{
	memd_options o = { .struct_size = sizeof(o), .config_path = yaml_path };
	memd_error err = { 0 };
	memd *m = NULL;
	if (memd_open(&o, &m, &err) != 0) {
		fprintf(stderr, "memd_open: %s\n", err.msg);
		return NULL;
	}
	return m;
}

static int32_t count_open(void *ud, const memd_lane *l)
{
	(void)l;
	(*(int *)ud)++;
	return 0;
}

/* Lanes not finalized yet. */
static int32_t unfinalized(memd *m, int *ret, memd_error *err)
{
	memd_call call = { .struct_size = sizeof(call) };
	memd_lane_query q = { .struct_size = sizeof(q), .limit = 4 * N_LANES, .app = "race",
			      .flags_none = MEMD_LANE_FINALIZED };
	memd_lane_sink sink = { sizeof(sink), ret, count_open };
	*ret = 0;
	return store_lane_list(service_session_store(m), &call, &q, &sink, err);
}

/* A child: wait for the go, sweep until every lane is finalized; write
 * how many this process finalized to out. */
static int child_main(const char *yaml_path, int go_fd, const char *out_path)
{
	memd *m = open_memd(yaml_path);
	memd_error err = { 0 };
	int finalized = 0, left = 1, pass;
	char go;
	FILE *f;

	if (!m)
		return 1;
	memd_set_clock(m, late_clock, NULL);
	if (read(go_fd, &go, 1) != 1)
		return 1;
	for (pass = 0; pass < MAX_PASSES && left; pass++) {
		char *out = NULL;
		json_t *o;
		if (memd_lanes_sweep(m, &out, &err) != 0) {
			fprintf(stderr, "sweep: %s\n", err.msg);
			return 1;
		}
		o = json_loads(out, 0, NULL);
		finalized += (int)json_integer_value(json_object_get(o, "finalized"));
		if (json_integer_value(json_object_get(o, "finalize_failed")))
			fprintf(stderr, "a finalize failed\n");
		json_decref(o);
		memd_free(out);
		if (unfinalized(m, &left, &err) != 0) {
			fprintf(stderr, "list: %s\n", err.msg);
			return 1;
		}
	}
	memd_close(m);
	if (left) {
		fprintf(stderr, "%d lanes left unfinalized after %d passes\n", left, pass);
		return 1;
	}
	if (!(f = fopen(out_path, "w")))
		return 1;
	fprintf(f, "%d\n", finalized);
	fclose(f);
	return 0;
}

static int32_t ignore_lane(void *ud, const memd_lane *l)
{
	(void)ud;
	(void)l;
	return 0;
}

static void make_lane(memd *m, int i)
{
	char key[32], sid[32];
	memd_call call = { .struct_size = sizeof(call) };
	memd_error err = { 0 };
	memd_lane_sink sink = { sizeof(sink), NULL, ignore_lane };
	snprintf(key, sizeof(key), "telegram:dm:%d", i);
	snprintf(sid, sizeof(sid), "s%d", i);
	memd_session s = { .struct_size = sizeof(s), .app = "race", .user = "u", .id = sid,
			   .created_us = T0, .updated_us = T0, .lane_key = key,
			   .start_reason = "explicit" };
	memd_lane l = { .struct_size = sizeof(l), .app = "race", .user = "u", .key = key,
			.session = sid, .updated_us = T0,
			.origin_json = "{\"platform\":\"telegram\",\"chat_type\":\"dm\"}" };
	memd_lane_write w = { .struct_size = sizeof(w), .flags = MEMD_LW_CREATE, .lane = &l,
			      .create_session = &s, .now_us = T0 };
	cr_assert_eq(store_lane_write(service_session_store(m), &call, &w, &sink, &err), 0, "%s",
		     err.msg);
}

static int32_t feed_rec(void *ud, const memd_feed_record *r)
{
	int *per = ud;
	if (r->kind == MEMD_FEED_FINALIZE && r->session && r->session[0] == 's')
		per[atoi(r->session + 1)]++;
	return 0;
}

Test(lanes_race, finalize_each_lane_exactly_once, .timeout = 120)
{
	char *name = stress_unique_name("lanes");
	char dir[] = "/tmp/memd-lanes-race-XXXXXX", yaml_path[64], *yaml = NULL;
	const char *tmpl = getenv("MEMD_STRESS_CONFIG");
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	static receiver r;
	int go[2], per_feed[N_LANES] = { 0 }, per_hook[N_LANES] = { 0 }, total = 0;
	pid_t pids[N_PROCS];
	memd *m;
	FILE *f;

	cr_assert_not_null(name);
	cr_assert_not_null(tmpl, "MEMD_STRESS_CONFIG is not set");
	cr_assert_not_null(mkdtemp(dir));
	/* The receiver's socket before the fork (its thread after it). */
	r.fd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert(r.fd >= 0);
	cr_assert_eq(bind(r.fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(listen(r.fd, 64), 0);
	cr_assert_eq(getsockname(r.fd, (struct sockaddr *)&a, &al), 0);
	r.port = ntohs(a.sin_port);
	/* The store's map from the template, @NAME@ made unique. */
	{
		char *map = strdup(tmpl), *p;
		size_t need;
		cr_assert_not_null(map);
		while ((p = strstr(map, "@NAME@"))) {
			char *n = NULL;
			cr_assert(asprintf(&n, "%.*s%s%s", (int)(p - map), map, name, p + 6) > 0);
			free(map);
			map = n;
		}
		need = (size_t)asprintf(&yaml,
					"stores:\n  main: %s\n"
					"lanes: {reset: {mode: idle, idle_minutes: %d}, finalize: {webhook: "
					"{url: 'http://127.0.0.1:%d/hook', secret: race, retries: 0}}}\n",
					map, IDLE_MIN, r.port);
		cr_assert(need > 0);
		free(map);
	}
	snprintf(yaml_path, sizeof(yaml_path), "%s/memd.yaml", dir);
	f = fopen(yaml_path, "w");
	cr_assert_not_null(f);
	fputs(yaml, f);
	fclose(f);
	free(yaml);

	cr_assert_eq(pipe(go), 0);
	for (int p = 0; p < N_PROCS; p++) {
		char out[96];
		snprintf(out, sizeof(out), "%s/finalized.%d", dir, p);
		pids[p] = fork();
		cr_assert_geq(pids[p], 0, "fork failed");
		if (pids[p] == 0) {
			close(go[1]);
			close(r.fd);
			_exit(child_main(yaml_path, go[0], out));
		}
	}
	close(go[0]);
	cr_assert_eq(pthread_create(&r.thread, NULL, receive, &r), 0);
	m = open_memd(yaml_path);
	cr_assert_not_null(m);
	for (int i = 0; i < N_LANES; i++)
		make_lane(m, i);
	/* Go: both children start sweeping at once. */
	cr_assert_eq(write(go[1], "gg", N_PROCS), N_PROCS);
	close(go[1]);
	for (int p = 0; p < N_PROCS; p++) {
		int status = 0, n = 0;
		char out[96];
		cr_assert_eq(waitpid(pids[p], &status, 0), pids[p]);
		cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			  "child %d failed (status 0x%x): see its stderr", p, status);
		snprintf(out, sizeof(out), "%s/finalized.%d", dir, p);
		f = fopen(out, "r");
		cr_assert_not_null(f);
		cr_assert_eq(fscanf(f, "%d", &n), 1);
		fclose(f);
		unlink(out);
		total += n;
	}
	cr_assert_eq(total, N_LANES, "the processes finalized %d lanes, not %d", total, N_LANES);

	{
		memd_call call = { .struct_size = sizeof(call) };
		memd_error err = { 0 };
		memd_feed_sink sink = { sizeof(sink), per_feed, feed_rec };
		cr_assert_eq(store_feed_read(service_session_store(m), &call, 0, 0, &sink, &err), 0,
			     "%s", err.msg);
	}
	atomic_store(&r.stop, 1);
	shutdown(r.fd, SHUT_RDWR);
	pthread_join(r.thread, NULL);
	close(r.fd);
	for (int i = 0; i < atomic_load(&r.n); i++)
		if (r.sessions[i][0] == 's')
			per_hook[atoi(r.sessions[i] + 1)]++;
	for (int i = 0; i < N_LANES; i++) {
		cr_assert_eq(per_feed[i], 1, "session s%d has %d FINALIZE records", i, per_feed[i]);
		cr_assert_eq(per_hook[i], 1, "session s%d was delivered %d times", i, per_hook[i]);
	}
	cr_assert_eq(atomic_load(&r.n), N_LANES);
	memd_close(m);
	unlink(yaml_path);
	rmdir(dir);
	free(name);
}

/* ---- gateway: opens, turn begins, inbox takes ---- */

/* Wait for the parent's go (one byte) on fd; nonzero when it never came. */
static int wait_go(int fd)
{
	char go;
	return read(fd, &go, 1) != 1;
}

/* The answer *out of a call that returned r (out is read after the call:
 * a pointer, since argument order is unspecified); NULL on a failure. */
static json_t *answer(int32_t r, char **out, const char *what, const memd_error *err)
{
	json_t *o;
	if (r != 0) {
		fprintf(stderr, "%s: %s\n", what, err->msg);
		return NULL;
	}
	o = json_loads(*out, 0, NULL);
	memd_free(*out);
	*out = NULL;
	return o;
}

/* A child of the gateway race. Files in dir: open.<p> ("<k> <session>"
 * lines), turn.<p> ("<k> <turn_id or ->" lines), take.<p> (item ids);
 * a byte on ready after each of the first two phases. */
static int gateway_child(const char *yaml_path, const char *dir, int p, int go_fd, int ready_fd)
{
	memd *m = open_memd(yaml_path);
	memd_error err = { 0 };
	char path[256], key[32], turn[ID_MAX + 1];
	FILE *f;

	if (!m || wait_go(go_fd))
		return 1;
	/* 1. opens */
	snprintf(path, sizeof(path), "%s/open.%d", dir, p);
	if (!(f = fopen(path, "w")))
		return 1;
	for (int k = 0; k < N_KEYS; k++) {
		char *out = NULL;
		snprintf(key, sizeof(key), "telegram:dm:%d", k);
		json_t *o = answer(memd_lane_open(m, "race", "u", key, "{}", &out, &err), &out,
				   "open", &err);
		if (!o)
			return 1;
		fprintf(f, "%d %s\n", k,
			json_string_value(json_object_get(json_object_get(o, "lane"), "session_id")));
		json_decref(o);
	}
	fclose(f);
	if (write(ready_fd, "r", 1) != 1 || wait_go(go_fd))
		return 1;
	/* 2. turn begins */
	snprintf(path, sizeof(path), "%s/turn.%d", dir, p);
	if (!(f = fopen(path, "w")))
		return 1;
	for (int k = 0; k < N_KEYS; k++) {
		char *out = NULL;
		int32_t r;
		snprintf(key, sizeof(key), "telegram:dm:%d", k);
		r = memd_turn_begin(m, "race", "u", key, LEASE_BODY, &out, &err);
		if (r == MEMD_ECONFLICT) {
			fprintf(f, "%d -\n", k);
			continue;
		}
		json_t *o = answer(r, &out, "turn begin", &err);
		if (!o)
			return 1;
		fprintf(f, "%d %s\n", k, json_string_value(json_object_get(o, "turn_id")));
		json_decref(o);
	}
	fclose(f);
	if (write(ready_fd, "r", 1) != 1 || wait_go(go_fd))
		return 1;
	/* 3. takes from key 0's inbox with its holder's turn id (in dir/holder) */
	snprintf(path, sizeof(path), "%s/holder", dir);
	if (!(f = fopen(path, "r")) || fscanf(f, "%64s", turn) != 1)
		return 1;
	fclose(f);
	snprintf(path, sizeof(path), "%s/take.%d", dir, p);
	if (!(f = fopen(path, "w")))
		return 1;
	for (;;) {
		char *out = NULL, body[128];
		snprintf(body, sizeof(body), "{\"turn_id\":\"%s\"}", turn);
		json_t *o = answer(memd_inbox_take(m, "race", "u", "telegram:dm:0", body, &out, &err),
				   &out, "take", &err);
		if (!o)
			return 1;
		json_t *item = json_object_get(o, "item");
		if (!json_is_object(item)) {
			json_decref(o);
			break;
		}
		fprintf(f, "%s\n", json_string_value(json_object_get(item, "id")));
		json_decref(o);
	}
	fclose(f);
	memd_close(m);
	return 0;
}

/* Every line of dir/<what>.<p> for both children, in *ret (lines). */
static size_t read_lines(const char *dir, const char *what, char lines[][2 * ID_MAX], size_t cap)
{
	size_t n = 0;
	for (int p = 0; p < N_PROCS; p++) {
		char path[256];
		FILE *f;
		snprintf(path, sizeof(path), "%s/%s.%d", dir, what, p);
		f = fopen(path, "r");
		cr_assert_not_null(f, "no %s from child %d", what, p);
		while (n < cap && fgets(lines[n], 2 * ID_MAX, f)) {
			lines[n][strcspn(lines[n], "\n")] = '\0';
			n++;
		}
		fclose(f);
		unlink(path);
	}
	return n;
}

/* Where the gateway's children work. */
typedef struct gateway_args {
	const char *yaml_path;
	const char *dir;
} gateway_args;

/* stress_child_fn of the gateway race: its results are its files in dir. */
static int gateway_crew_child(void *arg, int p, int go_fd, int ready_fd, const char *out_path)
{
	const gateway_args *a = arg;
	(void)out_path;
	return gateway_child(a->yaml_path, a->dir, p, go_fd, ready_fd);
}

/* Release both children into the next phase, each through its own go
 * pipe (a child done early can never take the other's byte and run
 * ahead), then wait for both to be done with it (unless !wait). */
static void phase(stress_crew *c, int wait)
{
	cr_assert_eq(stress_crew_go(c), 0, "a child is gone");
	if (wait)
		cr_assert_eq(stress_crew_wait(c), 0, "a child died in a phase");
}

static int32_t count_session(void *ud, const memd_session *s)
{
	(void)s;
	(*(int *)ud)++;
	return 0;
}

Test(lanes_race, opens_turn_begins_and_inbox_takes, .timeout = 120)
{
	char *name = stress_unique_name("gw");
	char dir[] = "/tmp/memd-lanes-gw-XXXXXX", yaml_path[64], *yaml = NULL;
	const char *tmpl = getenv("MEMD_STRESS_CONFIG");
	static char lines[4 * N_ITEMS][2 * ID_MAX];
	static char sessions[N_KEYS][ID_MAX], holder[ID_MAX];
	int wins[N_KEYS] = { 0 };
	gateway_args args = { 0 };
	stress_crew crew;
	memd_error err = { 0 };
	size_t n;
	memd *m;
	FILE *f;

	cr_assert_not_null(name);
	cr_assert_not_null(tmpl, "MEMD_STRESS_CONFIG is not set");
	cr_assert_not_null(mkdtemp(dir));
	{
		char *map = strdup(tmpl), *p;
		cr_assert_not_null(map);
		while ((p = strstr(map, "@NAME@"))) {
			char *nm = NULL;
			cr_assert(asprintf(&nm, "%.*s%s%s", (int)(p - map), map, name, p + 6) > 0);
			free(map);
			map = nm;
		}
		cr_assert(asprintf(&yaml, "stores:\n  main: %s\n", map) > 0);
		free(map);
	}
	snprintf(yaml_path, sizeof(yaml_path), "%s/memd.yaml", dir);
	f = fopen(yaml_path, "w");
	cr_assert_not_null(f);
	fputs(yaml, f);
	fclose(f);
	free(yaml);

	args.yaml_path = yaml_path;
	args.dir = dir;
	cr_assert_eq(stress_crew_start(&crew, N_PROCS, dir, gateway_crew_child, &args), 0,
		     "fork or pipe failed");
	m = open_memd(yaml_path);
	cr_assert_not_null(m);

	/* 1. Opens of the same new keys at once: one session each, the same
	 * for both processes. */
	phase(&crew, 1);
	n = read_lines(dir, "open", lines, sizeof(lines) / sizeof(lines[0]));
	cr_assert_eq(n, (size_t)N_PROCS * N_KEYS);
	for (size_t i = 0; i < n; i++) {
		int k;
		char sid[ID_MAX];
		cr_assert_eq(sscanf(lines[i], "%d %63s", &k, sid), 2);
		if (!sessions[k][0])
			snprintf(sessions[k], ID_MAX, "%s", sid);
		cr_assert_str_eq(sessions[k], sid, "key %d: sessions %s and %s", k, sessions[k], sid);
	}
	{
		memd_call call = { .struct_size = sizeof(call) };
		memd_scope sc = { .struct_size = sizeof(sc), .app = "race", .user = "u" };
		memd_session_query q = { .struct_size = sizeof(q), .limit = 4 * N_KEYS };
		memd_session_sink sink = { sizeof(sink), NULL, count_session };
		int count = 0;
		sink.userdata = &count;
		cr_assert_eq(store_session_list(service_session_store(m), &call, &sc, &q, &sink, &err),
			     0, "%s", err.msg);
		cr_assert_eq(count, N_KEYS, "%d sessions for %d keys", count, N_KEYS);
	}

	/* 2. Turn begins on every key at once: exactly one wins each. */
	phase(&crew, 1);
	n = read_lines(dir, "turn", lines, sizeof(lines) / sizeof(lines[0]));
	cr_assert_eq(n, (size_t)N_PROCS * N_KEYS);
	for (size_t i = 0; i < n; i++) {
		int k;
		char t[ID_MAX];
		cr_assert_eq(sscanf(lines[i], "%d %63s", &k, t), 2);
		if (strcmp(t, "-") != 0) {
			wins[k]++;
			if (k == 0)
				snprintf(holder, sizeof(holder), "%s", t);
		}
	}
	for (int k = 0; k < N_KEYS; k++)
		cr_assert_eq(wins[k], 1, "key %d: %d turn begins won", k, wins[k]);

	/* 3. Items put in key 0's inbox, then taken by both at once with
	 * its holder's turn: each exactly once. */
	for (int i = 0; i < N_ITEMS; i++) {
		char body[160], *out = NULL;
		snprintf(body, sizeof(body),
			 "{\"mode\":\"queue\",\"event\":{\"role\":\"user\",\"content\":\"m%d\"}}", i);
		cr_assert_eq(memd_inbox_put(m, "race", "u", "telegram:dm:0", body, &out, &err), 0,
			     "%s", err.msg);
		memd_free(out);
	}
	{
		char path[96];
		snprintf(path, sizeof(path), "%s/holder", dir);
		f = fopen(path, "w");
		cr_assert_not_null(f);
		fprintf(f, "%s\n", holder);
		fclose(f);
	}
	phase(&crew, 0);
	for (int p = 0; p < N_PROCS; p++) {
		int status = 0;
		close(crew.go[p]);
		cr_assert_eq(waitpid(crew.pids[p], &status, 0), crew.pids[p]);
		cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			  "child %d failed (status 0x%x): see its stderr", p, status);
	}
	n = read_lines(dir, "take", lines, sizeof(lines) / sizeof(lines[0]));
	cr_assert_eq(n, (size_t)N_ITEMS, "%zu items taken of %d put", n, N_ITEMS);
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			cr_assert_str_neq(lines[i], lines[j], "item %s was taken twice", lines[i]);
	{
		char *out = NULL;
		json_t *o = answer(memd_inbox_list(m, "race", "u", "telegram:dm:0", &out, &err), &out,
				   "inbox list", &err);
		cr_assert_not_null(o);
		cr_assert_eq(json_integer_value(json_object_get(o, "depth")), 0);
		json_decref(o);
	}
	stress_crew_close(&crew);
	memd_close(m);
	char path[96];
	snprintf(path, sizeof(path), "%s/holder", dir);
	unlink(path);
	unlink(yaml_path);
	rmdir(dir);
	free(name);
}
