/* SPDX-License-Identifier: MIT */
/* bench_http: see bench_http.h. */
#include "bench_http.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_CONNS 16
#define DEFAULT_SECONDS 3.0
#define NS_PER_SEC 1000000000LL
#define NS_PER_MS 1e6
#define START_WAIT_MS 20000
#define POLL_MS 10
#define LAT_INITIAL 4096
#define FTW_FDS 16
#define P50 0.50
#define P99 0.99
#define BUSY_TIMEOUT_MS 10000
#define HTTP_NO_CONTENT 204

bench_run bench = { .conns = DEFAULT_CONNS, .seconds = DEFAULT_SECONDS };

void bench_die(const char *what, const char *msg)
{
	fprintf(stderr, "%s: %s: %s\n", bench.name, what, msg);
	if (bench.memd_pid > 0)
		kill(bench.memd_pid, SIGKILL);
	exit(1);
}

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * NS_PER_SEC + ts.tv_nsec;
}

/* ---- latency samples ---------------------------------------------------------- */


static void add_sample(struct bench_samples *s, int64_t ns)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : LAT_INITIAL;
		int64_t *nv = realloc(s->v, cap * sizeof(*nv));
		if (!nv)
			bench_die("latency samples", "out of memory");
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


/* CPU bench.seconds (user + system, all threads) of this process. */
static double cpu_self_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / BENCH_US_PER_SEC +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / BENCH_US_PER_SEC;
}

/* CPU bench.seconds of the running memd serve (0 when none runs): utime and
 * stime, fields 14 and 15 of /proc/<pid>/stat, in clock ticks. */
static double cpu_server_s(void)
{
	char path[64], buf[1024], *p;
	unsigned long long ut = 0, st = 0;
	FILE *f;
	size_t n;

	if (bench.memd_pid <= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)bench.memd_pid);
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

/* Voluntary context switches of this process's threads so far. */
static double switches_self(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_nvcsw;
}

/* Voluntary context switches of the running memd serve's threads so far
 * (0 when none runs): voluntary_ctxt_switches of each /proc/<pid>/task/
 * <tid>/status (the process's own status counts its first thread only). */
static double switches_server(void)
{
	char path[PATH_MAX], line[256];
	unsigned long long sum = 0, n;
	struct dirent *d;
	DIR *dir;

	if (bench.memd_pid <= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)bench.memd_pid);
	if (!(dir = opendir(path)))
		return 0;
	while ((d = readdir(dir))) {
		FILE *f;
		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/status", (int)bench.memd_pid, d->d_name);
		if (!(f = fopen(path, "r")))
			continue; /* the thread ended */
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "voluntary_ctxt_switches: %llu", &n) == 1)
				sum += n;
		fclose(f);
	}
	closedir(dir);
	return (double)sum;
}

/* ---- running C workers for the bench time --------------------------------------- */

typedef struct warg {
	bench_phase *p;
	int i;
} warg;

static void *work(void *a)
{
	warg *w = a;
	bench_phase *p = w->p;
	atomic_fetch_add(&p->ready, 1);
	while (!atomic_load(&p->go))
		sched_yield();
	while (!atomic_load_explicit(&p->stop, memory_order_relaxed)) {
		int64_t t0 = now_ns();
		if (p->one(p, w->i) != 0)
			bench_die("request", "failed (see above)");
		add_sample(&p->lat[w->i], now_ns() - t0);
	}
	return NULL;
}

bench_result bench_run_phase(bench_one_fn one, void *ctx, int threads)
{
	static bench_phase p;
	pthread_t t[BENCH_MAX_CONNS];
	warg args[BENCH_MAX_CONNS];
	struct bench_samples all = { 0 };
	int64_t t0, t1;
	double self0, server0, sw_self0, sw_server0;
	bench_result r;

	memset(&p, 0, sizeof(p));
	p.one = one;
	p.ctx = ctx;
	for (int i = 0; i < threads; i++) {
		args[i] = (warg){ &p, i };
		if (pthread_create(&t[i], NULL, work, &args[i]) != 0)
			bench_die("pthread_create", strerror(errno));
	}
	while (atomic_load(&p.ready) < threads)
		sched_yield();
	t0 = now_ns();
	self0 = cpu_self_s();
	server0 = cpu_server_s();
	sw_self0 = switches_self();
	sw_server0 = switches_server();
	atomic_store(&p.go, 1);
	usleep((useconds_t)(bench.seconds * 1e6));
	atomic_store(&p.stop, 1);
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	t1 = now_ns();
	r.cpu_self_us = (cpu_self_s() - self0) * BENCH_US_PER_SEC;
	r.cpu_server_us = (cpu_server_s() - server0) * BENCH_US_PER_SEC;
	r.sw_self = switches_self() - sw_self0;
	r.sw_server = switches_server() - sw_server0;
	for (int i = 0; i < threads; i++) {
		for (size_t k = 0; k < p.lat[i].n; k++)
			add_sample(&all, p.lat[i].v[k]);
		free(p.lat[i].v);
	}
	qsort(all.v, all.n, sizeof(*all.v), cmp_i64);
	r.rate = (double)all.n / ((double)(t1 - t0) / NS_PER_SEC);
	r.cpu_self_us /= all.n ? (double)all.n : 1;
	r.cpu_server_us /= all.n ? (double)all.n : 1;
	r.sw_self /= all.n ? (double)all.n : 1;
	r.sw_server /= all.n ? (double)all.n : 1;
	r.p50_ms = all.n ? (double)all.v[(size_t)((double)(all.n - 1) * P50)] / NS_PER_MS : 0;
	r.p99_ms = all.n ? (double)all.v[(size_t)((double)(all.n - 1) * P99)] / NS_PER_MS : 0;
	free(all.v);
	return r;
}

/* ---- HTTP client: one keep-alive connection per worker ------------------------------ */


static int dial(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)bench.port),
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
int bench_http_call(bench_conn *c, const char *req, size_t len)
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
			if (sscanf(c->buf, "HTTP/1.%*d %d", &status) != 1)
				goto reset;
			/* A 204 has no body and no Content-Length. */
			if (status == HTTP_NO_CONTENT && (!cl || cl > end))
				need = head;
			else if (!cl || cl > end)
				goto reset;
			else
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

/* A raw request into req: method, path, optional JSON body. */
static size_t request(char *req, const char *method, const char *path, const char *body)
{
	int n;
	if (body)
		n = snprintf(req, BENCH_REQ_MAX,
			     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
			     "Content-Length: %zu\r\n\r\n%s", method, path, strlen(body), body);
	else
		n = snprintf(req, BENCH_REQ_MAX, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", method, path);
	if (n < 0 || n >= BENCH_REQ_MAX)
		bench_die("request", "too long");
	return (size_t)n;
}

int bench_call(bench_conn *c, const char *method, const char *path, const char *body, int want)
{
	char req[BENCH_REQ_MAX];
	size_t len = request(req, method, path, body);
	int status = bench_http_call(c, req, len);
	if (status != want) {
		fprintf(stderr, "%s: %s %s: %d, want %d: %.300s\n", bench.name, method, path, status, want,
			c->buf);
		return -1;
	}
	return 0;
}

/* ---- memd serve --------------------------------------------------------------------- */

void bench_write_config(const char *name, const char *db)
{
	char path[PATH_MAX + 64];
	FILE *f;
	snprintf(path, sizeof(path), "%s/%s", bench.work_dir, name);
	f = fopen(path, "w");
	if (!f)
		bench_die(path, strerror(errno));
	/* Every connection comes from 127.0.0.1: no per-address limit. */
	fprintf(f, "server:\n  listen: 127.0.0.1:%d\n  log_level: warn\n  threads: %d\n"
		   "  max_connections_per_ip: 0\n"
		   "stores:\n  main: {plugin: sqlite, path: %s/%s, busy_timeout_ms: %d, readers: %d}\n",
		bench.port, bench.server_threads, bench.work_dir, db, BUSY_TIMEOUT_MS, bench.conns);
	fclose(f);
}

int bench_free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), p;
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) != 0)
		bench_die("free port", strerror(errno));
	p = ntohs(a.sin_port);
	close(fd);
	return p;
}

void bench_start_memd(const char *cfg_name, const char *db)
{
	char cfg[PATH_MAX + 64], log[PATH_MAX + 64];
	bench_conn c = { .fd = -1 };
	const char *probe = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

	bench.port = bench_free_port();
	bench_write_config(cfg_name, db);
	snprintf(cfg, sizeof(cfg), "%s/%s", bench.work_dir, cfg_name);
	snprintf(log, sizeof(log), "%s/memd.log", bench.work_dir);
	bench.memd_pid = fork();
	if (bench.memd_pid < 0)
		bench_die("fork", strerror(errno));
	if (bench.memd_pid == 0) {
		FILE *l = freopen(log, "w", stderr);
		(void)l;
		setenv("MEMD_PLUGIN_PATH", bench.plugin_dir, 1);
		execl(bench.memd_exe, "memd", "serve", "--config", cfg, (char *)NULL);
		_exit(127);
	}
	for (int waited = 0; bench_http_call(&c, probe, strlen(probe)) != 200; waited += POLL_MS) {
		int st;
		if (waited > START_WAIT_MS || waitpid(bench.memd_pid, &st, WNOHANG) == bench.memd_pid)
			bench_die("memd serve did not start", log);
		usleep(POLL_MS * 1000);
	}
	close(c.fd);
}

void bench_stop_memd(void)
{
	int st;
	kill(bench.memd_pid, SIGTERM);
	waitpid(bench.memd_pid, &st, 0);
	bench.memd_pid = 0;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		bench_die("memd serve", "did not exit cleanly");
}

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
		bench_die("readlink /proc/self/exe", strerror(errno));
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	*slash = '\0';
	/* <build>/tests/<dir>/<name> -> <build>/host/memd, <build>/plugins */
	snprintf(bench.memd_exe, sizeof(bench.memd_exe), "%s/../../host/memd", exe);
	if (env && *env)
		snprintf(bench.plugin_dir, sizeof(bench.plugin_dir), "%s", env);
	else
		snprintf(bench.plugin_dir, sizeof(bench.plugin_dir), "%s/../../plugins", exe);
	if (access(bench.memd_exe, X_OK) != 0)
		bench_die(bench.memd_exe, "not found: run the bench from its place in the build tree");
	memcpy(bench.own_exe, bench.memd_exe, sizeof(bench.own_exe));
	memcpy(bench.own_plugin_dir, bench.plugin_dir, sizeof(bench.own_plugin_dir));
}

void bench_use_build(const char *dir)
{
	if (!dir) {
		memcpy(bench.memd_exe, bench.own_exe, sizeof(bench.memd_exe));
		memcpy(bench.plugin_dir, bench.own_plugin_dir, sizeof(bench.plugin_dir));
		return;
	}
	snprintf(bench.memd_exe, sizeof(bench.memd_exe), "%s/host/memd", dir);
	snprintf(bench.plugin_dir, sizeof(bench.plugin_dir), "%s/plugins", dir);
}

void bench_setup(const char *name, const char *dir)
{
	const char *tmp = getenv("TMPDIR");
	char tag[64];

	bench.name = name;
	signal(SIGPIPE, SIG_IGN);
	find_build_paths();
	/* "http_bench" -> memd-http-bench-XXXXXX */
	snprintf(tag, sizeof(tag), "%s", name);
	for (char *c = tag; *c; c++)
		if (*c == '_')
			*c = '-';
	snprintf(bench.work_dir, sizeof(bench.work_dir), "%s/memd-%s-XXXXXX",
		 dir ? dir : tmp && *tmp ? tmp : "/tmp", tag);
	if (!mkdtemp(bench.work_dir))
		bench_die("mkdtemp", strerror(errno));
}

void bench_init(int argc, char **argv, const char *name)
{
	const char *dir = NULL;
	int opt;

	bench.name = name;
	while ((opt = getopt(argc, argv, "c:s:d:t:")) != -1) {
		if (opt == 'c')
			bench.conns = atoi(optarg);
		else if (opt == 't')
			bench.server_threads = atoi(optarg);
		else if (opt == 's')
			bench.seconds = atof(optarg);
		else if (opt == 'd')
			dir = optarg;
		else {
			fprintf(stderr, "usage: %s [-c connections] [-s seconds] [-d dir] [-t server threads]\n",
				name);
			exit(2);
		}
	}
	if (bench.conns < 1 || bench.conns > BENCH_MAX_CONNS || bench.seconds <= 0 ||
	    bench.server_threads < 0)
		bench_die("arguments", "connections must be 1..256, seconds positive, threads 0 or more");
	bench_setup(name, dir);
}

void bench_cleanup(void)
{
	nftw(bench.work_dir, rm_entry, FTW_FDS, FTW_DEPTH | FTW_PHYS);
}

void bench_encode_segment(const char *s, char *out, size_t cap)
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
