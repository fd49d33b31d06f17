/* SPDX-License-Identifier: MIT */
#include "server.h"

#include <inttypes.h>
#include <microhttpd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <memd/memd.h>
#include <memd/plugin.h>

#include "config/config.h"
#include "conns.h"
#include "dispatch.h"
#include "mcp/mcp_sessions.h"
#include "listen.h"
#include "log.h"
#include "memd-build.h"
#include "metrics.h"
#include "openapi.h"
#include "request.h"
#include "router.h"
#include "service/service.h"
#include "config/settings.h"
#include "watchdog.h"
#include "workers.h"

#define MS_PER_SEC 1000
#define NS_PER_MS 1000000LL
#define WATCHDOG_TICK_NS (50 * NS_PER_MS)
#define DRAIN_POLL_NS (10 * NS_PER_MS)
/* Per-connection memory (libmicrohttpd's pool) over the header limit: the
 * request line and headers must fit with room to spare, so that memd's own
 * 431 answers before libmicrohttpd's. */
#define CONN_MEMORY_FACTOR 2
#define CONN_MEMORY_EXTRA (32 * 1024)
#define LISTEN_NAME_MAX 128
/* How libmicrohttpd's log says it answered a request by itself. */
#define MHD_ANSWER_TEXT "HTTP response code is "
#define NS_PER_SEC (NS_PER_MS * MS_PER_SEC)
/* How often request heads are checked against server.header_timeout_s. */
#define HEAD_TICK_NS (100 * NS_PER_MS)
/* File descriptors kept for everything but client connections: the
 * listening socket, stores (database files, WAL, connections to a
 * server), plugins, logs, outgoing HTTP to an embedder or summarizer. */
#define FD_RESERVE 256

typedef struct server {
	settings set;
	http_log *log;
	memd *m;
	http_metrics *mt;
	const char **methods, **patterns;
	http_ctx ctx;
	int fd;
	unsigned max_connections;   /* server.max_connections, fitted to the fd limit */
	struct MHD_Daemon *daemon;
} server;

static void mhd_logger(void *cls, const char *fmt, va_list ap)
{
	char line[1024];
	const char *code;
	size_t n;
	vsnprintf(line, sizeof(line), fmt, ap);
	n = strlen(line);
	while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		line[--n] = '\0';
	/* Almost always about one client's malformed or aborted request; when
	 * libmicrohttpd answered it by itself, the line says with what status
	 * (the request's own log line, if it got that far, says it too). */
	code = strstr(line, MHD_ANSWER_TEXT);
	if (code) {
		char msg[sizeof(line) + sizeof("libmicrohttpd: ")];
		snprintf(msg, sizeof(msg), "libmicrohttpd: %s", line);
		http_log_write(cls, MEMD_LOG_INFO, msg,
			       json_pack("{s:i}", "status", atoi(code + strlen(MHD_ANSWER_TEXT))));
		return;
	}
	http_log_printf(cls, MEMD_LOG_INFO, "libmicrohttpd: %s", line);
}

/* The server's own rule (service_config_rule): server.listen resolves,
 * and an address that is not loopback only with server.api_keys. Reads
 * the raw tree: a listen or api_keys of the wrong shape is the schema's
 * to report. */
static void listen_rule(const config_node *root, config_diag *d)
{
	const config_node *srv = config_map_get(root, "server");
	const config_node *listen = config_map_get(srv, "listen");
	const config_node *keys = config_map_get(srv, "api_keys");
	const char *addr = listen ? config_scalar(listen) : SETTINGS_LISTEN_DEFAULT;
	memd_error err = { .struct_size = sizeof(err) };
	char *host = NULL;
	int32_t port;
	int loopback;

	if (!addr || settings_listen_split(addr, &host, &port) < 0)
		return;
	free(host);
	if (http_listen_is_loopback(addr, &loopback, &err) < 0) {
		config_diag_add(d, listen, "server.listen", "%s", err.msg);
		return;
	}
	if (!loopback && config_len(keys) == 0)
		config_diag_add(d, listen, "server.listen",
				"refusing to listen on %s without API keys: add server.api_keys, "
				"or listen on a loopback address (127.0.0.1, ::1)",
				addr);
}

int32_t http_check_config(const char *config_path, const char *const *plugin_path,
			  config_diag *d)
{
	return service_check_config(config_path, plugin_path, listen_rule, d);
}

/* Check the config (every problem logged), then load it into s->set. */
static int32_t load_settings(server *s, const char *path, const char *const *plugin_path)
{
	config_node *root = NULL;
	config_diag d = { 0 };
	memd_error err = { .struct_size = sizeof(err) };
	int32_t r;

	r = http_check_config(path, plugin_path, &d);
	for (size_t i = 0; i < d.n; i++)
		http_log_printf(s->log, MEMD_LOG_ERROR, "config: %s", d.lines[i]);
	if (r < 0) {
		if (r == MEMD_ENOMEM)
			http_log_printf(s->log, MEMD_LOG_ERROR, "cannot start: out of memory");
		else
			http_log_printf(s->log, MEMD_LOG_ERROR,
					"cannot start: invalid config: %zu problem%s (see above)", d.n,
					d.n == 1 ? "" : "s");
		config_diag_clear(&d);
		return r;
	}
	config_diag_clear(&d);
	if (path && (r = config_parse_file(path, &root, &err)) < 0) {
		http_log_printf(s->log, MEMD_LOG_ERROR, "cannot start: %s", err.msg);
		return r;
	}
	r = settings_load(root, &s->set, &d);
	for (size_t i = 0; i < d.n; i++)
		http_log_printf(s->log, MEMD_LOG_ERROR, "config: %s", d.lines[i]);
	config_diag_clear(&d);
	if (r < 0)
		http_log_printf(s->log, MEMD_LOG_ERROR, "cannot start: %s",
				r == MEMD_ENOMEM ? "out of memory" : "invalid config (see above)");
	return r;
}

static unsigned pool_size(const settings *set)
{
	long cpus;
	int64_t n;

	if (set->threads > 0)
		return (unsigned)set->threads;
	cpus = sysconf(_SC_NPROCESSORS_ONLN);
	n = (cpus > 0 ? cpus : 1) * HTTP_THREADS_PER_CPU;
	if (n < HTTP_THREADS_MIN)
		n = HTTP_THREADS_MIN;
	if (n > SETTINGS_THREADS_MAX)
		n = SETTINGS_THREADS_MAX;
	return (unsigned)n;
}

static unsigned workers_size(const settings *set)
{
	return set->workers > 0 ? (unsigned)set->workers : HTTP_WORKERS_DEFAULT;
}

/* Raise the soft open-file limit to the hard one, and fit max_connections
 * in what is left after FD_RESERVE (a connection is one descriptor; one
 * that cannot be opened makes libmicrohttpd stop accepting until another
 * closes). Logs when the configured value had to be lowered. */
static void fit_connections(server *s)
{
	struct rlimit rl;
	int64_t want = s->set.max_connections, budget;

	s->max_connections = (unsigned)want;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	if (rl.rlim_cur < rl.rlim_max) {
		struct rlimit up = { rl.rlim_max, rl.rlim_max };
		if (setrlimit(RLIMIT_NOFILE, &up) == 0)
			rl = up;
	}
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (rlim_t)INT64_MAX / 2)
		return;
	budget = (int64_t)rl.rlim_cur - FD_RESERVE;
	if (budget < 1)
		budget = 1;
	if (want > budget) {
		http_log_printf(s->log, MEMD_LOG_WARN,
				"server.max_connections %" PRId64 " lowered to %" PRId64
				": the open-file limit is %" PRId64 " (raise it with ulimit -n / LimitNOFILE)",
				want, budget, (int64_t)rl.rlim_cur);
		s->max_connections = (unsigned)budget;
	}
}

static int32_t route_labels(server *s)
{
	size_t n;
	const http_route *r = http_routes(&n);

	s->methods = calloc(n, sizeof(*s->methods));
	s->patterns = calloc(n, sizeof(*s->patterns));
	if (!s->methods || !s->patterns)
		return MEMD_ENOMEM;
	for (size_t i = 0; i < n; i++) {
		s->methods[i] = r[i].method;
		s->patterns[i] = r[i].pattern;
	}
	s->mt = http_metrics_new(n, s->methods, s->patterns, HTTP_OP_COUNT, http_op_names());
	return s->mt ? 0 : MEMD_ENOMEM;
}

static int32_t start(server *s, const char *const *plugin_path, const char *config_path)
{
	memd_error err = { .struct_size = sizeof(err) };
	memd_options o = { .struct_size = sizeof(o) };
	char name[LISTEN_NAME_MAX];
	unsigned threads = pool_size(&s->set);
	unsigned workers = workers_size(&s->set);
	unsigned timeout_s;
	size_t memory;
	char *host = NULL;
	int32_t port;
	int loopback;
	int32_t r;

	/* Which Host values to answer (http_host_check): the config check
	 * made sure that both succeed. */
	if ((r = settings_listen_split(s->set.listen, &host, &port)) < 0) {
		http_log_printf(s->log, MEMD_LOG_ERROR, "cannot start: server.listen: %s", s->set.listen);
		return r;
	}
	free(host);
	if ((r = http_listen_is_loopback(s->set.listen, &loopback, &err)) < 0) {
		http_log_printf(s->log, MEMD_LOG_ERROR, "cannot start: %s", err.msg);
		return r;
	}
	o.config_path = config_path;
	o.plugin_path = plugin_path;
	o.log = http_log_memd;
	o.log_userdata = s->log;
	o.log_level = s->set.log_level;
	if ((r = memd_open(&o, &s->m, &err)) < 0) {
		http_log_printf(s->log, MEMD_LOG_ERROR, "cannot start: %s", err.msg);
		return r;
	}
	if ((r = route_labels(s)) < 0) {
		http_log_printf(s->log, MEMD_LOG_ERROR, "cannot start: out of memory");
		return r;
	}
	if ((r = http_listen_open(s->set.listen, &s->fd, name, sizeof(name), &err)) < 0) {
		http_log_printf(s->log, MEMD_LOG_ERROR, "cannot start: %s", err.msg);
		return r;
	}
	s->ctx.m = s->m;
	s->ctx.set = &s->set;
	s->ctx.hosts.allowed = (const char *const *)s->set.allowed_hosts;
	s->ctx.hosts.loopback_only = loopback && s->set.n_api_keys == 0;
	s->ctx.hosts.port = port;
	s->ctx.log = s->log;
	s->ctx.mt = s->mt;
	s->ctx.openapi_json = http_openapi_json;
	s->ctx.openapi_len = http_openapi_json_len;
	if (s->set.mcp_enabled &&
	    (r = mcp_sessions_new(MCP_SESSIONS_MAX_DEFAULT, MCP_SESSION_IDLE_S_DEFAULT * NS_PER_SEC,
				  &s->ctx.mcp, &err)) < 0) {
		http_log_printf(s->log, MEMD_LOG_ERROR, "cannot start: %s", err.msg);
		return r;
	}
	s->ctx.wd = http_watchdog_start(WATCHDOG_TICK_NS, http_dispatch_timeout, NULL);
	s->ctx.conns = http_conns_start(s->set.header_timeout_s * NS_PER_SEC, HEAD_TICK_NS, s->mt);
	s->ctx.workers = http_workers_start(workers, http_dispatch_work, http_dispatch_drop, NULL);
	if (!s->ctx.wd || !s->ctx.conns || !s->ctx.workers) {
		http_log_printf(s->log, MEMD_LOG_ERROR, "cannot start: cannot create a thread");
		return MEMD_ENOMEM;
	}
	/* libmicrohttpd closes connections idle for longer than this; the
	 * watchdog answers 408 first for requests whose body stalls. */
	timeout_s = (unsigned)((s->set.request_timeout_ms + MS_PER_SEC - 1) / MS_PER_SEC) + 1;
	memory = (size_t)s->set.max_header_bytes * CONN_MEMORY_FACTOR + CONN_MEMORY_EXTRA;
	fit_connections(s);
	s->daemon = MHD_start_daemon(
		MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ITC | MHD_USE_ERROR_LOG |
			MHD_ALLOW_SUSPEND_RESUME, 0, NULL, NULL,
		http_dispatch_access, &s->ctx, MHD_OPTION_EXTERNAL_LOGGER, mhd_logger, s->log,
		MHD_OPTION_LISTEN_SOCKET, s->fd,
		MHD_OPTION_THREAD_POOL_SIZE, threads, MHD_OPTION_CONNECTION_TIMEOUT, timeout_s,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, memory, MHD_OPTION_NOTIFY_COMPLETED,
		http_dispatch_completed, &s->ctx, MHD_OPTION_UNESCAPE_CALLBACK,
		http_dispatch_unescape, NULL, MHD_OPTION_URI_LOG_CALLBACK, http_dispatch_uri_log,
		&s->ctx, MHD_OPTION_NOTIFY_CONNECTION, http_conns_notify,
		s->ctx.conns, MHD_OPTION_CONNECTION_LIMIT, s->max_connections,
		MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)s->set.max_connections_per_ip,
		MHD_OPTION_END);
	if (!s->daemon) {
		http_log_printf(s->log, MEMD_LOG_ERROR, "cannot start the HTTP server on %s", name);
		return MEMD_EIO;
	}
	http_log_write(s->log, MEMD_LOG_INFO, "listening",
		       json_pack("{s:s,s:s,s:i,s:i,s:b,s:I,s:I,s:I,s:I,s:I,s:I}", "address", name, "version",
				 MEMD_VERSION, "threads", (int)threads, "workers", (int)workers, "auth", s->set.n_api_keys > 0,
				 "max_body_bytes", (json_int_t)s->set.max_body_bytes,
				 "max_header_bytes", (json_int_t)s->set.max_header_bytes,
				 "request_timeout_ms", (json_int_t)s->set.request_timeout_ms,
				 "header_timeout_s", (json_int_t)s->set.header_timeout_s,
				 "max_connections", (json_int_t)s->max_connections,
				 "max_connections_per_ip", (json_int_t)s->set.max_connections_per_ip));
	return 0;
}

static void sleep_ns(int64_t ns)
{
	struct timespec ts = { ns / (NS_PER_MS * MS_PER_SEC), ns % (NS_PER_MS * MS_PER_SEC) };
	nanosleep(&ts, NULL);
}

/* Stop accepting, let the requests in flight finish (bounded), stop. */
static void drain(server *s, int signo)
{
	int64_t until = http_now_ns() + s->set.request_timeout_ms * NS_PER_MS;
	int64_t left;
	MHD_socket fd;

	http_log_write(s->log, MEMD_LOG_INFO, "shutting down",
		       json_pack("{s:s,s:I}", "signal", signo == SIGINT ? "SIGINT" : "SIGTERM",
				 "in_flight", (json_int_t)http_metrics_in_flight(s->mt)));
	atomic_store(&s->ctx.draining, 1);
	fd = MHD_quiesce_daemon(s->daemon);
	if (fd != MHD_INVALID_SOCKET) {
		close(fd);
		s->fd = -1;
	}
	while ((left = http_metrics_in_flight(s->mt)) > 0 && http_now_ns() < until)
		sleep_ns(DRAIN_POLL_NS);
	if (left > 0)
		http_log_printf(s->log, MEMD_LOG_WARN,
				"%" PRId64 " requests still running after %" PRId64 " ms; stopping anyway",
				left, s->set.request_timeout_ms);
	/* Requests whose work is still queued are answered 503, the running
	 * ones finish (each store call is bounded by its deadline); every
	 * suspended connection is resumed before the daemon stops. */
	http_workers_stop(s->ctx.workers);
	MHD_stop_daemon(s->daemon);
	s->daemon = NULL;
}

static void stop(server *s)
{
	http_workers_stop(s->ctx.workers);
	if (s->daemon)
		MHD_stop_daemon(s->daemon);
	http_workers_free(s->ctx.workers);
	if (s->fd >= 0)
		close(s->fd);
	http_watchdog_stop(s->ctx.wd);
	http_conns_stop(s->ctx.conns);
	mcp_sessions_free(s->ctx.mcp); /* no request is running */
	memd_close(s->m); /* finishes background work, flushes the stores */
	http_metrics_free(s->mt);
	free(s->methods);
	free(s->patterns);
	settings_clear(&s->set);
}

int32_t http_serve(const char *config_path, const char *const *plugin_path)
{
	server s = { .fd = -1 };
	sigset_t sigs;
	int signo = 0;
	int32_t r;

	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	s.log = http_log_new(STDERR_FILENO, MEMD_LOG_INFO);
	if (!s.log)
		return MEMD_ENOMEM;
	if ((r = load_settings(&s, config_path, plugin_path)) < 0) {
		http_log_free(s.log);
		return r;
	}
	http_log_free(s.log);
	s.log = http_log_new(STDERR_FILENO, s.set.log_level);
	if (!s.log) {
		settings_clear(&s.set);
		return MEMD_ENOMEM;
	}
	r = start(&s, plugin_path, config_path);
	if (r == 0) {
		while (sigwait(&sigs, &signo) != 0)
			;
		drain(&s, signo);
	}
	stop(&s);
	if (r == 0)
		http_log_printf(s.log, MEMD_LOG_INFO, "stopped");
	http_log_free(s.log);
	return r;
}
