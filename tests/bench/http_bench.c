/* SPDX-License-Identifier: MIT */
/*
 * http_bench: memd over HTTP against the same work without HTTP, in one run.
 *
 * A C load generator (keep-alive HTTP/1.1 on raw sockets, one connection
 * per thread) drives a real `memd serve` on a loopback port, then the same
 * operations go through the libmemd facade in this process, then raw
 * sqlite3 does one transaction per insert. All on SQLite, WAL,
 * synchronous=FULL, fresh databases in a temp directory, each phase for
 * the same time:
 *   1. GET context over HTTP, C connections (each on its own 20-event session)
 *   2. memd_context through the facade, C threads (same shape)
 *   3. single-event POST events over HTTP, C connections (own session each)
 *   4. single-event memd_events_append through the facade, C threads
 *   5. raw sqlite3, one INSERT per transaction, 1 thread: the naive
 *      one-transaction-per-append rate of this disk
 * Both memd runs use the same store config (readers: one per connection).
 * It prints requests/s, p50 and p99 latency, and the ratios. Not a
 * pass/fail test: meson builds it, `meson test` never runs it. From a
 * build directory:
 *   tests/http/http_bench [-c connections] [-s seconds] [-d dir] [-t server threads]
 * (memd and the plugins are found from the binary's place in the build
 * tree; MEMD_PLUGIN_PATH overrides the plugins).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <memd/memd.h>

#define DEFAULT_CONNS 16
#define US_PER_SEC 1e6
#define DEFAULT_SECONDS 3.0
#define MAX_CONNS 256
#define CONTEXT_EVENTS 20
#define NS_PER_SEC 1000000000LL
#define NS_PER_MS 1e6
#define RESP_MAX 65536
#define REQ_MAX 1024
#define START_WAIT_MS 20000
#define POLL_MS 10
#define LAT_INITIAL 4096
#define FTW_FDS 16
#define PERCENT 100.0
#define P50 0.50
#define P99 0.99
#define BUSY_TIMEOUT_MS 10000
#define APPEND_BODY "{\"events\":[{\"role\":\"user\",\"content\":\"hello from the http bench\"}]}"

static int conns = DEFAULT_CONNS;
static int server_threads; /* server.threads; 0 = memd's default */
static double seconds = DEFAULT_SECONDS;
static char work_dir[PATH_MAX];
static char memd_exe[PATH_MAX];
static char plugin_dir[PATH_MAX];
static int port;
static pid_t memd_pid;

static void die(const char *what, const char *msg)
{
	fprintf(stderr, "http_bench: %s: %s\n", what, msg);
	if (memd_pid > 0)
		kill(memd_pid, SIGKILL);
	exit(1);
}

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * NS_PER_SEC + ts.tv_nsec;
}

/* ---- latency samples ---------------------------------------------------------- */

typedef struct samples {
	int64_t *v;
	size_t n, cap;
} samples;

static void add_sample(samples *s, int64_t ns)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : LAT_INITIAL;
		int64_t *nv = realloc(s->v, cap * sizeof(*nv));
		if (!nv)
			die("latency samples", "out of memory");
		s->v = nv;
		s->cap = cap;
	}
	s->v[s->n++] = ns;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

typedef struct result {
	double rate, p50_ms, p99_ms;
	double cpu_self_us, cpu_server_us; /* CPU per request: this process, memd serve */
} result;

/* CPU seconds (user + system, all threads) of this process. */
static double cpu_self_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / US_PER_SEC +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / US_PER_SEC;
}

/* CPU seconds of the running memd serve (0 when none runs): utime and
 * stime, fields 14 and 15 of /proc/<pid>/stat, in clock ticks. */
static double cpu_server_s(void)
{
	char path[64], buf[1024], *p;
	unsigned long long ut = 0, st = 0;
	FILE *f;
	size_t n;

	if (memd_pid <= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)memd_pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* The command name (field 2) may hold spaces: skip past its ')'. */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
			 &st) != 2)
		return 0;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* ---- running C workers for the bench time --------------------------------------- */

typedef struct phase phase;
typedef int (*one_fn)(phase *p, int worker);

struct phase {
	one_fn one;
	void *ctx;
	atomic_int go, stop, ready;
	samples lat[MAX_CONNS];
};

typedef struct warg {
	phase *p;
	int i;
} warg;

static void *work(void *a)
{
	warg *w = a;
	phase *p = w->p;
	atomic_fetch_add(&p->ready, 1);
	while (!atomic_load(&p->go))
		sched_yield();
	while (!atomic_load_explicit(&p->stop, memory_order_relaxed)) {
		int64_t t0 = now_ns();
		if (p->one(p, w->i) != 0)
			die("request", "failed (see above)");
		add_sample(&p->lat[w->i], now_ns() - t0);
	}
	return NULL;
}

static result run_phase(one_fn one, void *ctx, int threads)
{
	static phase p;
	pthread_t t[MAX_CONNS];
	warg args[MAX_CONNS];
	samples all = { 0 };
	int64_t t0, t1;
	double self0, server0;
	result r;

	memset(&p, 0, sizeof(p));
	p.one = one;
	p.ctx = ctx;
	for (int i = 0; i < threads; i++) {
		args[i] = (warg){ &p, i };
		if (pthread_create(&t[i], NULL, work, &args[i]) != 0)
			die("pthread_create", strerror(errno));
	}
	while (atomic_load(&p.ready) < threads)
		sched_yield();
	t0 = now_ns();
	self0 = cpu_self_s();
	server0 = cpu_server_s();
	atomic_store(&p.go, 1);
	usleep((useconds_t)(seconds * 1e6));
	atomic_store(&p.stop, 1);
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	t1 = now_ns();
	r.cpu_self_us = (cpu_self_s() - self0) * US_PER_SEC;
	r.cpu_server_us = (cpu_server_s() - server0) * US_PER_SEC;
	for (int i = 0; i < threads; i++) {
		for (size_t k = 0; k < p.lat[i].n; k++)
			add_sample(&all, p.lat[i].v[k]);
		free(p.lat[i].v);
	}
	qsort(all.v, all.n, sizeof(*all.v), cmp_i64);
	r.rate = (double)all.n / ((double)(t1 - t0) / NS_PER_SEC);
	r.cpu_self_us /= all.n ? (double)all.n : 1;
	r.cpu_server_us /= all.n ? (double)all.n : 1;
	r.p50_ms = all.n ? (double)all.v[(size_t)((double)(all.n - 1) * P50)] / NS_PER_MS : 0;
	r.p99_ms = all.n ? (double)all.v[(size_t)((double)(all.n - 1) * P99)] / NS_PER_MS : 0;
	free(all.v);
	return r;
}

/* ---- HTTP client: one keep-alive connection per worker ------------------------------ */

typedef struct conn {
	int fd;
	char buf[RESP_MAX];
} conn;

static int dial(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

/* Send one request and read its whole response; returns the status, or
 * -1 on a transport error. */
static int http_call(conn *c, const char *req, size_t len)
{
	size_t have = 0, need = 0;
	char *end;
	int status = -1;

	if (c->fd < 0 && (c->fd = dial()) < 0)
		return -1;
	if (send(c->fd, req, len, MSG_NOSIGNAL) != (ssize_t)len)
		goto reset;
	for (;;) {
		ssize_t r = recv(c->fd, c->buf + have, sizeof(c->buf) - 1 - have, 0);
		if (r <= 0)
			goto reset;
		have += (size_t)r;
		c->buf[have] = '\0';
		if (!need && (end = strstr(c->buf, "\r\n\r\n"))) {
			char *cl = strcasestr(c->buf, "\r\nContent-Length:");
			size_t head = (size_t)(end + 4 - c->buf);
			if (sscanf(c->buf, "HTTP/1.%*d %d", &status) != 1 || !cl || cl > end)
				goto reset;
			need = head + strtoul(cl + strlen("\r\nContent-Length:"), NULL, 10);
			if (need >= sizeof(c->buf))
				goto reset;
		}
		if (need && have >= need)
			break;
	}
	if (strcasestr(c->buf, "\r\nConnection: close")) {
		close(c->fd);
		c->fd = -1;
	}
	return status;
reset:
	close(c->fd);
	c->fd = -1;
	return -1;
}

typedef struct http_ctx {
	conn *conns;
	char req[MAX_CONNS][REQ_MAX];
	size_t len[MAX_CONNS];
	int want;
} http_ctx;

static int http_one(phase *p, int i)
{
	http_ctx *h = p->ctx;
	int status = http_call(&h->conns[i], h->req[i], h->len[i]);
	if (status != h->want) {
		fprintf(stderr, "http_bench: status %d, want %d: %.300s\n", status, h->want, h->conns[i].buf);
		return -1;
	}
	return 0;
}

static int post(conn *c, const char *path, const char *body, int want)
{
	char req[REQ_MAX];
	int n = snprintf(req, sizeof(req),
			 "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
			 "Content-Length: %zu\r\n\r\n%s", path, strlen(body), body);
	int status = http_call(c, req, (size_t)n);
	if (status != want) {
		fprintf(stderr, "http_bench: POST %s: %d, want %d: %.300s\n", path, status, want, c->buf);
		return -1;
	}
	return 0;
}

/* ---- memd serve --------------------------------------------------------------------- */

static void write_config(const char *name, const char *db)
{
	char path[PATH_MAX + 64];
	FILE *f;
	snprintf(path, sizeof(path), "%s/%s", work_dir, name);
	f = fopen(path, "w");
	if (!f)
		die(path, strerror(errno));
	/* Every connection comes from 127.0.0.1: no per-address limit. */
	fprintf(f, "server:\n  listen: 127.0.0.1:%d\n  log_level: warn\n  threads: %d\n"
		   "  max_connections_per_ip: 0\n"
		   "stores:\n  main: {plugin: sqlite, path: %s/%s, busy_timeout_ms: %d, readers: %d}\n",
		port, server_threads, work_dir, db, BUSY_TIMEOUT_MS, conns);
	fclose(f);
}

static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), p;
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) != 0)
		die("free port", strerror(errno));
	p = ntohs(a.sin_port);
	close(fd);
	return p;
}

static void start_memd(void)
{
	char cfg[PATH_MAX + 64], log[PATH_MAX + 64];
	conn c = { .fd = -1 };
	const char *probe = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

	port = free_port();
	write_config("http.yaml", "http.db");
	snprintf(cfg, sizeof(cfg), "%s/http.yaml", work_dir);
	snprintf(log, sizeof(log), "%s/memd.log", work_dir);
	memd_pid = fork();
	if (memd_pid < 0)
		die("fork", strerror(errno));
	if (memd_pid == 0) {
		FILE *l = freopen(log, "w", stderr);
		(void)l;
		setenv("MEMD_PLUGIN_PATH", plugin_dir, 1);
		execl(memd_exe, "memd", "serve", "--config", cfg, (char *)NULL);
		_exit(127);
	}
	for (int waited = 0; http_call(&c, probe, strlen(probe)) != 200; waited += POLL_MS) {
		int st;
		if (waited > START_WAIT_MS || waitpid(memd_pid, &st, WNOHANG) == memd_pid)
			die("memd serve did not start", log);
		usleep(POLL_MS * 1000);
	}
	close(c.fd);
}

static void stop_memd(void)
{
	int st;
	kill(memd_pid, SIGTERM);
	waitpid(memd_pid, &st, 0);
	memd_pid = 0;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		die("memd serve", "did not exit cleanly");
}

/* ---- the facade ------------------------------------------------------------------------- */

static void log_nothing(void *ud, int32_t level, const char *component, const char *line)
{
	(void)ud;
	(void)level;
	(void)component;
	(void)line;
}

typedef struct facade_ctx {
	memd *m;
} facade_ctx;

static int facade_context(phase *p, int i)
{
	facade_ctx *f = p->ctx;
	char sid[32], *out = NULL;
	memd_error err = { .struct_size = sizeof(err) };
	snprintf(sid, sizeof(sid), "ctx%d", i);
	if (memd_context(f->m, "bench", "u", sid, &out, &err) < 0) {
		fprintf(stderr, "http_bench: memd_context: %s\n", err.msg);
		return -1;
	}
	memd_free(out);
	return 0;
}

static int facade_append(phase *p, int i)
{
	facade_ctx *f = p->ctx;
	char sid[32], *out = NULL;
	memd_error err = { .struct_size = sizeof(err) };
	snprintf(sid, sizeof(sid), "app%d", i);
	if (memd_events_append(f->m, "bench", "u", sid, APPEND_BODY, &out, &err) < 0) {
		fprintf(stderr, "http_bench: memd_events_append: %s\n", err.msg);
		return -1;
	}
	memd_free(out);
	return 0;
}

static void facade_setup(memd *m)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out;
	for (int i = 0; i < conns; i++) {
		char body[64], sid[32];
		snprintf(sid, sizeof(sid), "ctx%d", i);
		snprintf(body, sizeof(body), "{\"id\":\"%s\"}", sid);
		if (memd_session_create(m, "bench", "u", body, &out, &err) < 0)
			die("memd_session_create", err.msg);
		memd_free(out);
		for (int k = 0; k < CONTEXT_EVENTS; k++) {
			if (memd_events_append(m, "bench", "u", sid, APPEND_BODY, &out, &err) < 0)
				die("memd_events_append", err.msg);
			memd_free(out);
		}
		snprintf(body, sizeof(body), "{\"id\":\"app%d\"}", i);
		if (memd_session_create(m, "bench", "u", body, &out, &err) < 0)
			die("memd_session_create", err.msg);
		memd_free(out);
	}
}

/* ---- naive: one transaction per insert --------------------------------------------------- */

typedef struct naive_ctx {
	sqlite3 *db;
	sqlite3_stmt *begin, *insert, *commit;
	int64_t n;
} naive_ctx;

static int naive_one(phase *p, int i)
{
	naive_ctx *x = p->ctx;
	(void)i;
	sqlite3_bind_int64(x->insert, 1, ++x->n);
	if (sqlite3_step(x->begin) != SQLITE_DONE || sqlite3_step(x->insert) != SQLITE_DONE ||
	    sqlite3_step(x->commit) != SQLITE_DONE) {
		fprintf(stderr, "http_bench: sqlite: %s\n", sqlite3_errmsg(x->db));
		return -1;
	}
	sqlite3_reset(x->begin);
	sqlite3_reset(x->insert);
	sqlite3_reset(x->commit);
	return 0;
}

static result bench_naive(void)
{
	char path[PATH_MAX + 16];
	naive_ctx x = { 0 };
	result r;

	snprintf(path, sizeof(path), "%s/naive.db", work_dir);
	if (sqlite3_open(path, &x.db) != SQLITE_OK ||
	    sqlite3_exec(x.db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
			       "CREATE TABLE e(seq INTEGER PRIMARY KEY, body TEXT NOT NULL)",
			 NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(x.db, "BEGIN", -1, &x.begin, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(x.db, "INSERT INTO e(seq, body) VALUES (?1, '" APPEND_BODY "')", -1,
			       &x.insert, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(x.db, "COMMIT", -1, &x.commit, NULL) != SQLITE_OK)
		die("naive sqlite", sqlite3_errmsg(x.db));
	r = run_phase(naive_one, &x, 1);
	sqlite3_finalize(x.begin);
	sqlite3_finalize(x.insert);
	sqlite3_finalize(x.commit);
	sqlite3_close(x.db);
	return r;
}

/* ---- main ------------------------------------------------------------------------------------ */

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void find_build_paths(void)
{
	char exe[PATH_MAX / 2], *slash;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	const char *env = getenv("MEMD_PLUGIN_PATH");

	if (n <= 0)
		die("readlink /proc/self/exe", strerror(errno));
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	*slash = '\0';
	/* <build>/tests/http/http_bench -> <build>/host/memd, <build>/plugins */
	snprintf(memd_exe, sizeof(memd_exe), "%s/../../host/memd", exe);
	if (env && *env)
		snprintf(plugin_dir, sizeof(plugin_dir), "%s", env);
	else
		snprintf(plugin_dir, sizeof(plugin_dir), "%s/../../plugins", exe);
	if (access(memd_exe, X_OK) != 0)
		die(memd_exe, "not found: run http_bench from its place in the build tree");
}

static void print_row(const char *op, const char *via, int threads, result r, const char *note)
{
	printf("%-30s %-16s %5d %12.0f %9.3f %9.3f %9.1f %9.1f  %s\n", op, via, threads, r.rate,
	       r.p50_ms, r.p99_ms, r.cpu_server_us, r.cpu_self_us, note);
}

int main(int argc, char **argv)
{
	const char *tmp = getenv("TMPDIR");
	const char *dir = NULL;
	http_ctx *h;
	conn *cs;
	result ctx_http, ctx_facade, app_http, app_facade, naive;
	char note[128];
	int opt;

	while ((opt = getopt(argc, argv, "c:s:d:t:")) != -1) {
		if (opt == 'c')
			conns = atoi(optarg);
		else if (opt == 't')
			server_threads = atoi(optarg);
		else if (opt == 's')
			seconds = atof(optarg);
		else if (opt == 'd')
			dir = optarg;
		else {
			fprintf(stderr, "usage: http_bench [-c connections] [-s seconds] [-d dir] [-t server threads]\n");
			return 2;
		}
	}
	if (conns < 1 || conns > MAX_CONNS || seconds <= 0 || server_threads < 0)
		die("arguments", "connections must be 1..256, seconds positive, threads 0 or more");
	signal(SIGPIPE, SIG_IGN);
	find_build_paths();
	snprintf(work_dir, sizeof(work_dir), "%s/memd-http-bench-XXXXXX", dir ? dir : tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(work_dir))
		die("mkdtemp", strerror(errno));

	/* HTTP. */
	h = calloc(1, sizeof(*h));
	cs = calloc((size_t)conns, sizeof(*cs));
	if (!h || !cs)
		die("setup", "out of memory");
	h->conns = cs;
	start_memd();
	for (int i = 0; i < conns; i++) {
		char path[128], body[64];
		cs[i].fd = -1;
		snprintf(body, sizeof(body), "{\"id\":\"ctx%d\"}", i);
		if (post(&cs[i], "/v1/apps/bench/users/u/sessions", body, 201) < 0)
			die("setup", "create session");
		snprintf(path, sizeof(path), "/v1/apps/bench/users/u/sessions/ctx%d/events", i);
		for (int k = 0; k < CONTEXT_EVENTS; k++)
			if (post(&cs[i], path, APPEND_BODY, 200) < 0)
				die("setup", "append");
		snprintf(body, sizeof(body), "{\"id\":\"app%d\"}", i);
		if (post(&cs[i], "/v1/apps/bench/users/u/sessions", body, 201) < 0)
			die("setup", "create session");
		h->len[i] = (size_t)snprintf(h->req[i], REQ_MAX,
					     "GET /v1/apps/bench/users/u/sessions/ctx%d/context HTTP/1.1\r\n"
					     "Host: 127.0.0.1\r\n\r\n", i);
	}
	h->want = 200;
	ctx_http = run_phase(http_one, h, conns);
	for (int i = 0; i < conns; i++)
		h->len[i] = (size_t)snprintf(h->req[i], REQ_MAX,
					     "POST /v1/apps/bench/users/u/sessions/app%d/events HTTP/1.1\r\n"
					     "Host: 127.0.0.1\r\nContent-Type: application/json\r\n"
					     "Content-Length: %zu\r\n\r\n%s", i, strlen(APPEND_BODY), APPEND_BODY);
	app_http = run_phase(http_one, h, conns);
	for (int i = 0; i < conns; i++)
		if (cs[i].fd >= 0)
			close(cs[i].fd);
	stop_memd();

	/* The facade, in this process, on its own database. */
	{
		const char *path[] = { plugin_dir, NULL };
		char cfg[PATH_MAX + 64];
		memd_options o = { .struct_size = sizeof(o), .config_path = cfg, .plugin_path = path,
				   .log = log_nothing, .log_level = MEMD_LOG_ERROR };
		memd_error err = { .struct_size = sizeof(err) };
		facade_ctx f;
		write_config("facade.yaml", "facade.db");
		snprintf(cfg, sizeof(cfg), "%s/facade.yaml", work_dir);
		if (memd_open(&o, &f.m, &err) < 0)
			die("memd_open", err.msg);
		facade_setup(f.m);
		ctx_facade = run_phase(facade_context, &f, conns);
		app_facade = run_phase(facade_append, &f, conns);
		memd_close(f.m);
	}
	naive = bench_naive();

	printf("memd http_bench: %d connections/threads, %.1f s per run, server.threads %d, "
	       "SQLite WAL synchronous=FULL, in %s\n\n", conns, seconds, server_threads, work_dir);
	printf("%-30s %-16s %5s %12s %9s %9s %9s %9s  %s\n", "operation", "via", "conns", "req/s",
	       "p50 ms", "p99 ms", "srv us", "cli us", "ratio");
	snprintf(note, sizeof(note), "HTTP = %.0f%% of the facade", PERCENT * ctx_http.rate / ctx_facade.rate);
	print_row("GET context (20 events)", "HTTP", conns, ctx_http, note);
	print_row("memd_context", "facade", conns, ctx_facade, "reference");
	snprintf(note, sizeof(note), "HTTP = %.0f%% of the facade, %.1fx naive",
		 PERCENT * app_http.rate / app_facade.rate, app_http.rate / naive.rate);
	print_row("POST events (1 event)", "HTTP", conns, app_http, note);
	snprintf(note, sizeof(note), "%.1fx naive", app_facade.rate / naive.rate);
	print_row("memd_events_append (1 event)", "facade", conns, app_facade, note);
	print_row("INSERT, 1 txn each (naive)", "raw sqlite3", 1, naive, "reference");
	printf("\nsrv us / cli us: CPU time (user + system, all threads) per request of memd serve "
	       "and of this process (the load generator, or the facade in-process).\n");
	{
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		double http_cpu = app_http.cpu_server_us + app_http.cpu_self_us;

		if (cpus < 1)
			cpus = 1;
		printf("bounds on this machine: %ld CPUs at %.1f us per HTTP append (server + "
		       "client) allow at most %.0f/s; %d callers each waiting for a durable commit "
		       "allow at most %d x the one-commit rate = %.0f/s\n",
		       cpus, http_cpu, http_cpu > 0 ? (double)cpus * US_PER_SEC / http_cpu : 0, conns,
		       conns, conns * naive.rate);
	}
	printf("targets: >= 30000 appends/s over HTTP, >= 100000/s through the facade, "
	       "GET context over HTTP >= 50%% of the facade\n");
	nftw(work_dir, rm_entry, FTW_FDS, FTW_DEPTH | FTW_PHYS);
	free(h);
	free(cs);
	return 0;
}
