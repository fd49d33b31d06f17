/* SPDX-License-Identifier: MIT */
/*
 * lanes_bench: what a chat gateway's calls cost over HTTP, against the
 * calls they replace, in one run against one `memd serve` on SQLite (WAL,
 * synchronous=FULL, a fresh database in a temp directory).
 *
 * A C load generator (keep-alive HTTP/1.1 on raw sockets, one connection
 * per thread, each on its own lane and session) runs each phase for the
 * same time:
 *   1. GET session (a read of one session)
 *   2. POST /v1/apps/{app}/lanes:open with a message source: resolve and
 *      open in one call (the lane exists: the usual case, activity marked)
 *   3. single-event POST events (a durable append)
 *   4. a turn: POST .../turns then POST .../turns/{turn}:end (ok), the
 *      pair timed as one
 * It prints requests/s, p50 and p99 latency per phase, and the ratios the
 * lanes work aims at: an open costs at most 1.5 session reads, a turn's
 * begin and end at most 2 durable appends (cost = 1 / rate at the same
 * concurrency). It never asserts timing: meson builds it, `meson test`
 * never runs it. From a build directory:
 *   tests/http/lanes_bench [-c connections] [-s seconds] [-d dir] [-t server threads]
 * (memd and the plugins are found from the binary's place in the build
 * tree; MEMD_PLUGIN_PATH overrides the plugins).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
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

#define DEFAULT_CONNS 16
#define US_PER_SEC 1e6
#define DEFAULT_SECONDS 3.0
#define MAX_CONNS 256
#define NS_PER_SEC 1000000000LL
#define NS_PER_MS 1e6
#define RESP_MAX 65536
#define REQ_MAX 1024
#define PATH_LEN 512
#define START_WAIT_MS 20000
#define POLL_MS 10
#define LAT_INITIAL 4096
#define FTW_FDS 16
#define P50 0.50
#define P99 0.99
#define BUSY_TIMEOUT_MS 10000
/* A turn's lease in the bench: far longer than any phase. */
#define TURN_BODY "{\"lease_ms\":600000}"
#define END_BODY "{\"outcome\":\"ok\"}"
#define APPEND_BODY "{\"events\":[{\"role\":\"user\",\"content\":\"hello from the lanes bench\"}]}"
#define OPEN_TARGET 1.5 /* an open costs at most this many session reads */
#define TURN_TARGET 2.0 /* a turn's begin + end cost at most this many appends */

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
	fprintf(stderr, "lanes_bench: %s: %s\n", what, msg);
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
	write_config("lanes.yaml", "lanes.db");
	snprintf(cfg, sizeof(cfg), "%s/lanes.yaml", work_dir);
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

/* ---- the lanes: one per connection ---------------------------------------------- */

typedef struct lane_ctx {
	conn *conns;
	char source[MAX_CONNS][REQ_MAX]; /* the source body of connection i */
	char lane[MAX_CONNS][PATH_LEN];  /* /v1/apps/bench/users/{user}/lanes/{key}, encoded */
	char session[MAX_CONNS][PATH_LEN];
} lane_ctx;

/* s percent-encoded as a path segment into out (cap bytes). */
static void encode(const char *s, char *out, size_t cap)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;
	for (; *s && o + 4 < cap; s++) {
		unsigned char c = (unsigned char)*s;
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '.' || c == '_' || c == '~') {
			out[o++] = (char)c;
		} else {
			out[o++] = '%';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 0xf];
		}
	}
	out[o] = '\0';
}

/* The JSON body of the response in c (after the head), parsed. */
static json_t *body_json(const conn *c)
{
	const char *b = strstr(c->buf, "\r\n\r\n");
	return b ? json_loads(b + 4, 0, NULL) : NULL;
}

/* A raw request into req: method, path, optional JSON body. */
static size_t request(char *req, const char *method, const char *path, const char *body)
{
	int n;
	if (body)
		n = snprintf(req, REQ_MAX,
			     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
			     "Content-Length: %zu\r\n\r\n%s", method, path, strlen(body), body);
	else
		n = snprintf(req, REQ_MAX, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", method, path);
	if (n < 0 || n >= REQ_MAX)
		die("request", "too long");
	return (size_t)n;
}

static int call(conn *c, const char *method, const char *path, const char *body, int want)
{
	char req[REQ_MAX];
	size_t len = request(req, method, path, body);
	int status = http_call(c, req, len);
	if (status != want) {
		fprintf(stderr, "lanes_bench: %s %s: %d, want %d: %.300s\n", method, path, status, want,
			c->buf);
		return -1;
	}
	return 0;
}

static int one_get_session(phase *p, int i)
{
	lane_ctx *x = p->ctx;
	return call(&x->conns[i], "GET", x->session[i], NULL, 200);
}

static int one_open(phase *p, int i)
{
	lane_ctx *x = p->ctx;
	return call(&x->conns[i], "POST", "/v1/apps/bench/lanes:open", x->source[i], 200);
}

static int one_append(phase *p, int i)
{
	lane_ctx *x = p->ctx;
	char path[PATH_LEN + 16];
	snprintf(path, sizeof(path), "%s/events", x->session[i]);
	return call(&x->conns[i], "POST", path, APPEND_BODY, 200);
}

static int one_turn(phase *p, int i)
{
	lane_ctx *x = p->ctx;
	char path[PATH_LEN * 2];
	json_t *t;
	int r;

	snprintf(path, sizeof(path), "%s/turns", x->lane[i]);
	if (call(&x->conns[i], "POST", path, TURN_BODY, 200) < 0)
		return -1;
	t = body_json(&x->conns[i]);
	if (!json_is_string(json_object_get(t, "turn_id"))) {
		json_decref(t);
		fprintf(stderr, "lanes_bench: a turn begin without turn_id: %.300s\n", x->conns[i].buf);
		return -1;
	}
	snprintf(path, sizeof(path), "%s/turns/%s:end", x->lane[i],
		 json_string_value(json_object_get(t, "turn_id")));
	json_decref(t);
	r = call(&x->conns[i], "POST", path, END_BODY, 200);
	return r;
}

/* Open each connection's lane once (creating it and its session) and
 * note its paths. */
static void setup_lanes(lane_ctx *x)
{
	for (int i = 0; i < conns; i++) {
		char user[PATH_LEN / 4], key[PATH_LEN / 4], sid[PATH_LEN / 4];
		json_t *o;
		x->conns[i].fd = -1;
		snprintf(x->source[i], REQ_MAX,
			 "{\"platform\":\"bench\",\"chat_type\":\"dm\",\"chat_id\":\"c%d\","
			 "\"user_id\":\"c%d\",\"user_name\":\"Bench %d\"}", i, i, i);
		if (call(&x->conns[i], "POST", "/v1/apps/bench/lanes:open", x->source[i], 200) < 0)
			die("setup", "lanes:open");
		o = body_json(&x->conns[i]);
		if (!json_is_string(json_object_get(o, "user")) ||
		    !json_is_string(json_object_get(o, "key")) ||
		    !json_is_string(json_object_get(json_object_get(o, "session"), "id")))
			die("setup", "lanes:open answered without user, key or session");
		encode(json_string_value(json_object_get(o, "user")), user, sizeof(user));
		encode(json_string_value(json_object_get(o, "key")), key, sizeof(key));
		encode(json_string_value(json_object_get(json_object_get(o, "session"), "id")), sid,
		       sizeof(sid));
		json_decref(o);
		snprintf(x->lane[i], PATH_LEN, "/v1/apps/bench/users/%s/lanes/%s", user, key);
		snprintf(x->session[i], PATH_LEN, "/v1/apps/bench/users/%s/sessions/%s", user, sid);
	}
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
	/* <build>/tests/http/lanes_bench -> <build>/host/memd, <build>/plugins */
	snprintf(memd_exe, sizeof(memd_exe), "%s/../../host/memd", exe);
	if (env && *env)
		snprintf(plugin_dir, sizeof(plugin_dir), "%s", env);
	else
		snprintf(plugin_dir, sizeof(plugin_dir), "%s/../../plugins", exe);
	if (access(memd_exe, X_OK) != 0)
		die(memd_exe, "not found: run lanes_bench from its place in the build tree");
}

static void print_row(const char *op, result r, const char *note)
{
	printf("%-36s %5d %12.0f %9.3f %9.3f %9.1f  %s\n", op, conns, r.rate, r.p50_ms, r.p99_ms,
	       r.cpu_server_us, note);
}

int main(int argc, char **argv)
{
	const char *tmp = getenv("TMPDIR");
	const char *dir = NULL;
	lane_ctx *x;
	result get, open, append, turn;
	double open_cost, turn_cost;
	char note[160];
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
			fprintf(stderr, "usage: lanes_bench [-c connections] [-s seconds] [-d dir] [-t server threads]\n");
			return 2;
		}
	}
	if (conns < 1 || conns > MAX_CONNS || seconds <= 0 || server_threads < 0)
		die("arguments", "connections must be 1..256, seconds positive, threads 0 or more");
	signal(SIGPIPE, SIG_IGN);
	find_build_paths();
	snprintf(work_dir, sizeof(work_dir), "%s/memd-lanes-bench-XXXXXX", dir ? dir : tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(work_dir))
		die("mkdtemp", strerror(errno));

	x = calloc(1, sizeof(*x));
	if (!x || !(x->conns = calloc((size_t)conns, sizeof(*x->conns))))
		die("setup", "out of memory");
	start_memd();
	setup_lanes(x);
	get = run_phase(one_get_session, x, conns);
	open = run_phase(one_open, x, conns);
	append = run_phase(one_append, x, conns);
	turn = run_phase(one_turn, x, conns);
	for (int i = 0; i < conns; i++)
		if (x->conns[i].fd >= 0)
			close(x->conns[i].fd);
	stop_memd();

	/* Cost of an operation: 1 / its rate at the same concurrency. */
	open_cost = get.rate / open.rate;
	turn_cost = append.rate / turn.rate;
	printf("memd lanes_bench: %d connections, %.1f s per run, server.threads %d, "
	       "SQLite WAL synchronous=FULL, over HTTP keep-alive, in %s\n\n", conns, seconds,
	       server_threads, work_dir);
	printf("%-36s %5s %12s %9s %9s %9s  %s\n", "operation", "conns", "per s", "p50 ms", "p99 ms",
	       "srv us", "");
	print_row("GET session", get, "reference (a read)");
	snprintf(note, sizeof(note), "= %.2f session reads (p50 %.2fx; target <= %.1f)", open_cost,
		 open.p50_ms / (get.p50_ms > 0 ? get.p50_ms : 1), OPEN_TARGET);
	print_row("POST lanes:open (resolve + open)", open, note);
	print_row("POST events (1 event, durable)", append, "reference (a durable append)");
	snprintf(note, sizeof(note), "= %.2f appends (p50 %.2fx; target <= %.1f)", turn_cost,
		 turn.p50_ms / (append.p50_ms > 0 ? append.p50_ms : 1), TURN_TARGET);
	print_row("turn begin + end (pair)", turn, note);
	printf("\nper s: operations per second (a turn pair counts once); srv us: CPU time of "
	       "memd serve per operation.\n");
	printf("open: %.2f x GET session (%s target 1.5); turn: %.2f x append (%s target 2)\n",
	       open_cost, open_cost <= OPEN_TARGET ? "within" : "over", turn_cost,
	       turn_cost <= TURN_TARGET ? "within" : "over");
	nftw(work_dir, rm_entry, FTW_FDS, FTW_DEPTH | FTW_PHYS);
	free(x->conns);
	free(x);
	return 0;
}
