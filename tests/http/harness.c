/* SPDX-License-Identifier: MIT */
#include "harness.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "spec.h"

#define START_TIMEOUT_MS 20000
#define STOP_TIMEOUT_MS 30000
#define POLL_MS 10
#define MS_PER_SEC 1000
#define NS_PER_MS 1000000
#define PORT_TRIES 5
#define FTW_FDS 16
#define MSG_MAX 2048
#define SNAPSHOT_PATH_MAX 1024

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_init(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;

	cr_assert(fd >= 0);
	cr_assert(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	cr_assert(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
	port = ntohs(a.sin_port);
	close(fd);
	return port;
}

char *hs_log_text(const hs *h)
{
	FILE *f = fopen(h->log, "r");
	char *buf;
	long n;

	if (!f)
		return strdup("");
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = calloc(1, (size_t)n + 1);
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n)
		buf[0] = '\0';
	fclose(f);
	return buf;
}

static void write_config(hs *h)
{
	FILE *f = fopen(h->config, "w");
	cr_assert(f, "cannot write %s", h->config);
	if (h->store_plugin[0]) {
		fprintf(f, "server:\n  listen: 127.0.0.1:%d\n%s\nstores:\n  main: {plugin: %s%s}\n%s\n",
			h->port, h->server_yaml, h->store_plugin, h->store_extra, h->extra_yaml);
		fclose(f);
		return;
	}
	fprintf(f, "server:\n  listen: 127.0.0.1:%d\n%s\nstores:\n  main: {plugin: sqlite, path: %s%s%s}\n%s\n",
		h->port, h->server_yaml, h->db_path[0] ? h->db_path : h->dir,
		h->db_path[0] ? "" : "/memd.db", h->store_extra, h->extra_yaml);
	fclose(f);
}

static pid_t spawn(hs *h)
{
	const char *build = getenv("MEMD_BUILD_ROOT");
	char exe[PATH_MAX];
	pid_t pid, parent;

	cr_assert(build, "MEMD_BUILD_ROOT is not set");
	snprintf(exe, sizeof(exe), "%s/host/memd", build);
	parent = getpid();
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		int log = open(h->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		int null = open("/dev/null", O_RDWR);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		/* A test process that dies (a crash, a timeout's kill) takes its
		 * server along instead of leaving it serving on its port. */
		if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent)
			_exit(127);
		if (log < 0 || null < 0 || chdir(h->dir) != 0)
			_exit(127);
		dup2(null, STDIN_FILENO);
		dup2(null, STDOUT_FILENO);
		dup2(log, STDERR_FILENO);
		execl(exe, "memd", "serve", "--config", h->config, (char *)NULL);
		_exit(127);
	}
	return pid;
}

CURL *hs_curl(void)
{
	CURL *c;
	pthread_once(&curl_once, curl_init);
	c = curl_easy_init();
	cr_assert(c);
	return c;
}

/* 1 when /healthz answers 200, or 400 (server.allowed_hosts without
 * 127.0.0.1: memd is up and refuses the harness's Host). */
static int healthy(hs *h)
{
	char url[128];
	long status = 0;
	CURL *c = hs_curl();
	snprintf(url, sizeof(url), "%s/healthz", h->base);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 2000L);
	curl_easy_setopt(c, CURLOPT_NOBODY, 0L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, NULL);
	{
		FILE *null = fopen("/dev/null", "w");
		curl_easy_setopt(c, CURLOPT_WRITEDATA, null);
		if (curl_easy_perform(c) == CURLE_OK)
			curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
		fclose(null);
	}
	curl_easy_cleanup(c);
	return status == 200 || status == 400;
}

/* Start memd on the current port; 1 when up, 0 when the port was taken,
 * asserts otherwise. */
static int start_once(hs *h)
{
	int waited = 0, status;

	snprintf(h->base, sizeof(h->base), "http://127.0.0.1:%d", h->port);
	write_config(h);
	h->pid = spawn(h);
	for (;;) {
		if (waitpid(h->pid, &status, WNOHANG) == h->pid) {
			char *log = hs_log_text(h);
			int in_use = strstr(log, "Address already in use") != NULL;
			h->pid = 0;
			if (in_use) {
				free(log);
				return 0;
			}
			cr_assert_fail("memd exited at start (status %d): %s", status, log);
		}
		if (healthy(h))
			return 1;
		cr_assert(waited < START_TIMEOUT_MS, "memd did not answer /healthz within %d ms",
			  START_TIMEOUT_MS);
		sleep_ms(POLL_MS);
		waited += POLL_MS;
	}
}

void hs_start(hs *h, const char *server_yaml, const char *extra_yaml)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(h->dir, sizeof(h->dir), "%s/memd-http-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	cr_assert(mkdtemp(h->dir), "mkdtemp: %s", strerror(errno));
	snprintf(h->config, sizeof(h->config), "%s/memd.yaml", h->dir);
	snprintf(h->log, sizeof(h->log), "%s/memd.log", h->dir);
	if (server_yaml)
		snprintf(h->server_yaml, sizeof(h->server_yaml), "%s", server_yaml);
	if (extra_yaml)
		snprintf(h->extra_yaml, sizeof(h->extra_yaml), "%s", extra_yaml);
	for (int i = 0; i < PORT_TRIES; i++) {
		h->port = free_port();
		if (start_once(h)) {
			h->curl = hs_curl();
			return;
		}
	}
	cr_assert_fail("no free port for memd after %d tries", PORT_TRIES);
}

void hs_restart(hs *h)
{
	for (int i = 0; i < PORT_TRIES; i++) {
		if (start_once(h)) {
			if (!h->curl)
				h->curl = hs_curl();
			return;
		}
		h->port = free_port();
	}
	cr_assert_fail("cannot restart memd");
}

int hs_signal_wait(hs *h, int sig)
{
	int status = 0, waited = 0;

	cr_assert(h->pid > 0, "memd is not running");
	if (sig)
		kill(h->pid, sig);
	while (waitpid(h->pid, &status, WNOHANG) != h->pid) {
		if (waited >= STOP_TIMEOUT_MS) {
			kill(h->pid, SIGKILL);
			waitpid(h->pid, &status, 0);
			h->pid = 0;
			cr_assert_fail("memd did not exit within %d ms of signal %d", STOP_TIMEOUT_MS, sig);
		}
		sleep_ms(POLL_MS);
		waited += POLL_MS;
	}
	h->pid = 0;
	return status;
}

void hs_stop(hs *h)
{
	int status;
	if (h->curl) {
		curl_easy_cleanup(h->curl);
		h->curl = NULL;
	}
	if (h->pid <= 0)
		return;
	status = hs_signal_wait(h, SIGTERM);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		char *log = hs_log_text(h);
		cr_assert_fail("memd did not exit cleanly (status 0x%x); log:\n%s", status, log);
	}
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

void hs_finish(hs *h)
{
	hs_stop(h);
	if (getenv("MEMD_TEST_KEEP"))
		fprintf(stderr, "kept %s\n", h->dir);
	else if (h->dir[0])
		nftw(h->dir, rm_entry, FTW_FDS, FTW_DEPTH | FTW_PHYS);
}

/* ---- requests --------------------------------------------------------------- */

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
	hs_resp *r = ud;
	size_t add = size * n;
	char *nb = realloc(r->body, r->len + add + 1);
	if (!nb)
		return 0;
	memcpy(nb + r->len, p, add);
	r->body = nb;
	r->len += add;
	r->body[r->len] = '\0';
	return add;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
	hs_resp *r = ud;
	size_t len = size * n, k = len;

	while (k && (p[k - 1] == '\r' || p[k - 1] == '\n'))
		k--;
	if (k >= 5 && strncmp(p, "HTTP/", 5) == 0) {
		/* A new status line (after 100 Continue): start over. */
		for (size_t i = 0; i < r->n_headers; i++)
			free(r->headers[i]);
		r->n_headers = 0;
		return len;
	}
	if (k && r->n_headers < HS_MAX_HEADERS)
		r->headers[r->n_headers++] = strndup(p, k);
	return len;
}

const char *hs_header(const hs_resp *r, const char *name)
{
	size_t n = strlen(name);
	for (size_t i = 0; i < r->n_headers; i++)
		if (strncasecmp(r->headers[i], name, n) == 0 && r->headers[i][n] == ':') {
			const char *v = r->headers[i] + n + 1;
			while (*v == ' ')
				v++;
			return v;
		}
	return NULL;
}

const char *hs_error_code(const hs_resp *r)
{
	const char *c = json_string_value(json_object_get(json_object_get(r->json, "error"), "code"));
	return c ? c : "";
}

void hs_expect_error(hs *h, const char *method, const char *path, const char *body,
		     long status, const char *code, const char *msg)
{
	hs_resp r;
	const char *got;

	hs_json(h, method, path, body, &r);
	cr_assert_eq(r.status, status, "%s %s %s: status %ld, want %ld: %s", method, path,
		     body ? body : "", r.status, status, r.body);
	cr_assert_str_eq(hs_error_code(&r), code, "%s %s: code %s, want %s", method, path,
			 hs_error_code(&r), code);
	got = json_string_value(json_object_get(json_object_get(r.json, "error"), "message"));
	if (msg)
		cr_assert(got && strstr(got, msg), "%s %s: message '%s' lacks '%s'", method, path,
			  got ? got : "", msg);
	else
		cr_assert(got && *got, "%s %s: the error has no message", method, path);
	hs_resp_clear(&r);
}

void hs_resp_clear(hs_resp *r)
{
	free(r->body);
	for (size_t i = 0; i < r->n_headers; i++)
		free(r->headers[i]);
	json_decref(r->json);
	memset(r, 0, sizeof(*r));
}

int hs_try(hs *h, CURL *c, const char *method, const char *path, const char *const *headers,
	   const void *body, size_t len, hs_resp *out, char *msg, size_t cap)
{
	struct curl_slist *list = NULL;
	char url[4096];
	CURLcode rc;
	const char *ct;

	memset(out, 0, sizeof(*out));
	snprintf(url, sizeof(url), "%s%s", h->base, path);
	curl_easy_reset(c);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, out);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 30000L);
	curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
	if (strcmp(method, "GET") == 0 && !body)
		curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
	list = curl_slist_append(list, "Expect:");
	for (size_t i = 0; headers && headers[i]; i++)
		list = curl_slist_append(list, headers[i]);
	if (body) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
		int has_ct = 0;
		for (size_t i = 0; headers && headers[i]; i++)
			has_ct |= strncasecmp(headers[i], "Content-Type:", strlen("Content-Type:")) == 0;
		if (!has_ct)
			list = curl_slist_append(list, "Content-Type: application/json");
	}
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, list);
	rc = curl_easy_perform(c);
	curl_slist_free_all(list);
	if (rc != CURLE_OK) {
		snprintf(msg, cap, "%s %s: %s", method, path, curl_easy_strerror(rc));
		return -1;
	}
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
	if (!out->body)
		out->body = calloc(1, 1);
	ct = hs_header(out, "Content-Type");
	if (ct && strncmp(ct, "application/json", 16) == 0)
		out->json = json_loadb(out->body, out->len, JSON_DECODE_ANY, NULL);
	{
		spec_response sr = { (unsigned)out->status, (const char *const *)out->headers,
				     out->n_headers, out->body, out->len };
		char why[SPEC_MSG_MAX];
		if (spec_check_response(spec_default(), method, path, &sr, why, sizeof(why)) < 0) {
			snprintf(msg, cap, "not as the spec says: %s; body: %.300s", why, out->body);
			return -1;
		}
	}
	return 0;
}

void hs_req_on(hs *h, CURL *c, const char *method, const char *path, const char *const *headers,
	       const void *body, size_t len, hs_resp *out)
{
	char msg[MSG_MAX];
	if (hs_try(h, c ? c : h->curl, method, path, headers, body, len, out, msg, sizeof(msg)) < 0)
		cr_assert_fail("%s", msg);
}

void hs_req(hs *h, const char *method, const char *path, const char *const *headers,
	    const void *body, size_t len, hs_resp *out)
{
	hs_req_on(h, NULL, method, path, headers, body, len, out);
}

void hs_json(hs *h, const char *method, const char *path, const char *body, hs_resp *out)
{
	hs_req(h, method, path, NULL, body, body ? strlen(body) : 0, out);
}

json_t *hs_expect(hs *h, const char *method, const char *path, const char *body, long status)
{
	hs_resp r;
	json_t *j;
	hs_json(h, method, path, body, &r);
	cr_assert_eq(r.status, status, "%s %s: status %ld, want %ld; body: %s", method, path,
		     r.status, status, r.body);
	j = json_incref(r.json);
	hs_resp_clear(&r);
	return j;
}

/* ---- raw sockets ---------------------------------------------------------------- */

int hs_raw_connect(const hs *h)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)h->port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert(fd >= 0);
	cr_assert(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0, "connect: %s", strerror(errno));
	return fd;
}

int hs_raw_connect_try(const hs *h)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)h->port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert(fd >= 0);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

void hs_raw_send(int fd, const void *data, size_t len)
{
	const char *p = data;
	while (len) {
		ssize_t w = send(fd, p, len, MSG_NOSIGNAL);
		if (w <= 0)
			return; /* the server may close first: that is for the caller to judge */
		p += w;
		len -= (size_t)w;
	}
}

int64_t hs_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * MS_PER_SEC + ts.tv_nsec / NS_PER_MS;
}

size_t hs_raw_read(int fd, char *buf, size_t cap, int timeout_ms)
{
	size_t n = 0;
	int64_t start = hs_now_ms();
	while (n + 1 < cap) {
		struct pollfd p = { fd, POLLIN, 0 };
		int left = timeout_ms - (int)(hs_now_ms() - start);
		ssize_t r;
		if (left <= 0 || poll(&p, 1, left) <= 0)
			break;
		r = recv(fd, buf + n, cap - 1 - n, 0);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	buf[n] = '\0';
	return n;
}

int hs_raw_status(const char *text)
{
	int status = 0;
	if (sscanf(text, "HTTP/1.%*d %d", &status) != 1)
		return 0;
	return status;
}

/* The memd_http_requests_in_flight gauge (the asking request included). */
static long in_flight(hs *h)
{
	static const char name[] = "\nmemd_http_requests_in_flight ";
	hs_resp r;
	const char *p;
	long n;

	hs_req(h, "GET", "/metrics", NULL, NULL, 0, &r);
	cr_assert_eq(r.status, 200, "GET /metrics: %ld %s", r.status, r.body);
	p = strstr(r.body, name);
	cr_assert(p && sscanf(p + strlen(name), "%ld", &n) == 1,
		  "no memd_http_requests_in_flight in /metrics: %s", r.body);
	hs_resp_clear(&r);
	return n;
}

int hs_wait_in_flight(hs *h, long n, int timeout_ms)
{
	for (int waited = 0;; waited += POLL_MS) {
		if (in_flight(h) - 1 == n)
			return 1;
		if (waited >= timeout_ms)
			return 0;
		sleep_ms(POLL_MS);
	}
}

/* ---- snapshots ---------------------------------------------------------------------- */

char *hs_snapshot(hs *h, const char *app, const char *user)
{
	json_t *all = json_object(), *page;
	char path[SNAPSHOT_PATH_MAX], *cursor = NULL, *text;

	for (;;) {
		size_t i;
		json_t *s;
		if (cursor)
			snprintf(path, sizeof(path), "/v1/apps/%s/users/%s/sessions?archived=true&limit=2&cursor=%s",
				 app, user, cursor);
		else
			snprintf(path, sizeof(path), "/v1/apps/%s/users/%s/sessions?archived=true&limit=2", app,
				 user);
		free(cursor);
		cursor = NULL;
		page = hs_expect(h, "GET", path, NULL, 200);
		json_array_foreach(json_object_get(page, "sessions"), i, s) {
			const char *id = json_string_value(json_object_get(s, "id"));
			char *sid = curl_easy_escape(h->curl, id, 0);
			json_t *one = json_object(), *arts;
			size_t k;
			json_t *a;
			snprintf(path, sizeof(path), "/v1/apps/%s/users/%s/sessions/%s?events=0", app, user, sid);
			json_object_set_new(one, "session", hs_expect(h, "GET", path, NULL, 200));
			snprintf(path, sizeof(path), "/v1/apps/%s/users/%s/sessions/%s/state", app, user, sid);
			json_object_set_new(one, "state", hs_expect(h, "GET", path, NULL, 200));
			snprintf(path, sizeof(path), "/v1/apps/%s/users/%s/sessions/%s/artifacts", app, user, sid);
			arts = hs_expect(h, "GET", path, NULL, 200);
			json_array_foreach(json_object_get(arts, "artifacts"), k, a) {
				char *name = curl_easy_escape(h->curl, json_string_value(json_object_get(a, "name")), 0);
				snprintf(path, sizeof(path), "/v1/apps/%s/users/%s/sessions/%s/artifacts/%s/versions",
					 app, user, sid, name);
				curl_free(name);
				json_object_set_new(a, "all_versions", hs_expect(h, "GET", path, NULL, 200));
			}
			json_object_set_new(one, "artifacts", arts);
			json_object_set_new(all, id, one);
			curl_free(sid);
		}
		if (json_is_string(json_object_get(page, "next_cursor")))
			cursor = strdup(json_string_value(json_object_get(page, "next_cursor")));
		json_decref(page);
		if (!cursor)
			break;
	}
	text = json_dumps(all, JSON_SORT_KEYS | JSON_COMPACT);
	json_decref(all);
	return text;
}
