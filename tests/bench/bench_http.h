/* SPDX-License-Identifier: MIT */
/*
 * bench_http: what the HTTP benches share (http_bench, lanes_bench): their
 * command line, a `memd serve` of their own on SQLite in a temp directory,
 * a keep-alive HTTP/1.1 client on raw sockets, and phases that run one C
 * worker per connection for the bench time and measure rate, latency and
 * CPU per request. A bench is one process doing one run, so the run's
 * settings live in one object, `bench`; every failure ends the process
 * (after killing memd serve) with a message naming the bench.
 */
#ifndef MEMD_BENCH_HTTP_H
#define MEMD_BENCH_HTTP_H

#include <limits.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define BENCH_MAX_CONNS 256
#define BENCH_RESP_MAX 65536
#define BENCH_REQ_MAX 1024
#define BENCH_US_PER_SEC 1e6

/* The run: its name and command line, its work directory, its memd serve. */
typedef struct bench_run {
	const char *name;   /* "http_bench": in messages and the work directory's name */
	int conns;          /* -c: connections (and worker threads) */
	int server_threads; /* -t: server.threads; 0 = memd's default */
	double seconds;     /* -s: the time each phase runs */
	char work_dir[PATH_MAX];
	char memd_exe[PATH_MAX];   /* the memd serve started, and its plugins */
	char plugin_dir[PATH_MAX];
	char own_exe[PATH_MAX];    /* this build's (bench_use_build(NULL)) */
	char own_plugin_dir[PATH_MAX];
	int port;
	pid_t memd_pid; /* 0 when no memd serve runs */
} bench_run;

extern bench_run bench;

/* The memd serve that bench_start_memd starts from now on: build
 * directory dir's (<dir>/host/memd and <dir>/plugins, as
 * MEMD_BENCH_BASE names one), or this build's when dir is NULL. */
void bench_use_build(const char *dir);

/* What one phase measured. */
typedef struct bench_result {
	double rate, p50_ms, p99_ms;
	double cpu_self_us, cpu_server_us; /* CPU per request: this process, memd serve */
	/* Voluntary context switches per request (a thread going to sleep:
	 * each is a wake-up to come), memd serve's and this process's; less
	 * sensitive to a busy machine than CPU time. */
	double sw_server, sw_self;
} bench_result;

typedef struct bench_phase bench_phase;
/* One request (or one timed unit of work) of worker `worker`: 0, or -1
 * after printing why, which ends the bench. */
typedef int (*bench_one_fn)(bench_phase *p, int worker);

struct bench_samples {
	int64_t *v;
	size_t n, cap;
};

struct bench_phase {
	bench_one_fn one;
	void *ctx; /* the bench's own, for `one` */
	atomic_int go, stop, ready;
	struct bench_samples lat[BENCH_MAX_CONNS];
};

/* One keep-alive connection to memd serve; fd -1 until the first call. */
typedef struct bench_conn {
	int fd;
	char buf[BENCH_RESP_MAX]; /* the last response, head and body, NUL-terminated */
} bench_conn;

/* Print "<name>: what: msg", kill memd serve if it runs, exit 1. */
void bench_die(const char *what, const char *msg);

/* Set bench.name, read the command line (-c -s -d -t; exits 2 with the
 * usage on a bad one), find memd and the plugins from the binary's place in
 * the build tree (MEMD_PLUGIN_PATH overrides the plugins) and make the
 * work directory under -d, $TMPDIR or /tmp. Ignores SIGPIPE. */
void bench_init(int argc, char **argv, const char *name);

/* What bench_init does after reading the command line, for a bench with a
 * command line of its own: set bench.name, find memd and the plugins, make
 * the work directory under dir (NULL: $TMPDIR or /tmp), ignore SIGPIPE. */
void bench_setup(const char *name, const char *dir);

/* A TCP port on 127.0.0.1 that was free a moment ago. */
int bench_free_port(void);

/* Remove the work directory and all in it. */
void bench_cleanup(void);

/* Run `one` on `threads` workers (at most BENCH_MAX_CONNS) for
 * bench.seconds, each in a loop, and measure it. */
bench_result bench_run_phase(bench_one_fn one, void *ctx, int threads);

/* Send req (len bytes) on c, dialling first if needed, and read the whole
 * response into c->buf; returns its status, or -1 on a transport error
 * (the connection is closed; the next call dials again). */
int bench_http_call(bench_conn *c, const char *req, size_t len);

/* Send `method path` with an optional JSON body on c: 0 when the status
 * is want, else -1 after printing the method, path, status and the
 * response's start. */
int bench_call(bench_conn *c, const char *method, const char *path, const char *body, int want);

/* Write work_dir/name: a memd config on bench.port with one SQLite store
 * at work_dir/db, a reader per connection. */
void bench_write_config(const char *name, const char *db);

/* Start memd serve on a free port with config work_dir/cfg (written by
 * bench_write_config with database work_dir/db), its log in
 * work_dir/memd.log, and wait until it answers /healthz. */
void bench_start_memd(const char *cfg, const char *db);

/* Stop memd serve (SIGTERM) and die unless it exits cleanly. */
void bench_stop_memd(void);

/* s percent-encoded as a path segment into out (cap bytes; cut short,
 * never split inside an escape, when it does not fit). */
void bench_encode_segment(const char *s, char *out, size_t cap);

#endif
