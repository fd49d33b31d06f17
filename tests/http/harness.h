/* SPDX-License-Identifier: MIT */
/*
 * harness: a real `memd serve` process on a random loopback port, in a
 * temp directory with its own SQLite database, and a libcurl client whose
 * every response is checked against api/openapi.yaml (spec.h).
 */
#ifndef MEMD_TEST_HARNESS_H
#define MEMD_TEST_HARNESS_H

#include <curl/curl.h>
#include <jansson.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define HS_MAX_HEADERS 32
#define HS_HEADER_MAX 1024

typedef struct hs {
	char dir[PATH_MAX / 2]; /* temp dir: memd.yaml, memd.db, memd.log */
	char config[PATH_MAX];
	char log[PATH_MAX];     /* memd's stderr */
	char base[64];          /* http://127.0.0.1:PORT */
	int port;
	pid_t pid;
	char server_yaml[4096]; /* extra lines under server: */
	char extra_yaml[4096];  /* extra top-level YAML */
	char store_extra[512];  /* extra keys of the sqlite store, ", k: v" */
	char store_plugin[64];  /* the main store's plugin instead of sqlite ("memory"); "" = sqlite */
	char db_path[PATH_MAX / 2]; /* the sqlite database; "" = DIR/memd.db */
	CURL *curl;             /* keep-alive client of the calling thread */
} hs;

typedef struct hs_resp {
	long status;
	char *body;             /* NUL-terminated */
	size_t len;
	char *headers[HS_MAX_HEADERS];
	size_t n_headers;
	json_t *json;           /* parsed body when it is JSON, else NULL */
} hs_resp;

/* Start memd with server_yaml (lines indented under "server:", may be
 * NULL) and extra_yaml (top-level, may be NULL); waits until /healthz
 * answers. Asserts on failure. */
void hs_start(hs *h, const char *server_yaml, const char *extra_yaml);
/* Start again on the same directory and database (after hs_kill/hs_stop). */
void hs_restart(hs *h);
/* SIGTERM, wait, and assert a clean exit (status 0). Keeps the directory. */
void hs_stop(hs *h);
/* hs_stop and remove the directory (kept when MEMD_TEST_KEEP is set). */
void hs_finish(hs *h);
/* Send sig to memd (0: none, just wait); returns its exit status
 * (waitpid) once it exits. */
int hs_signal_wait(hs *h, int sig);
/* Whole log of the server (malloc'd). */
char *hs_log_text(const hs *h);

/* One request with its own or the thread's handle (curl NULL = h->curl).
 * headers: NULL-terminated "Name: value" list or NULL. body may be NULL.
 * The response is checked against the spec (asserts) unless nocheck. */
void hs_req_on(hs *h, CURL *curl, const char *method, const char *path,
	       const char *const *headers, const void *body, size_t len, hs_resp *out);
void hs_req(hs *h, const char *method, const char *path, const char *const *headers,
	    const void *body, size_t len, hs_resp *out);
/* As hs_req with a JSON body text (or NULL) and no extra headers. */
void hs_json(hs *h, const char *method, const char *path, const char *body, hs_resp *out);
/* hs_json, assert the status, and return the JSON body (owned, may be
 * NULL for empty bodies). */
json_t *hs_expect(hs *h, const char *method, const char *path, const char *body, long status);
/* Like hs_req_on but returns -1 (with msg) instead of asserting, for use
 * from threads: transport failure or a response the spec does not allow. */
int hs_try(hs *h, CURL *curl, const char *method, const char *path, const char *const *headers,
	   const void *body, size_t len, hs_resp *out, char *msg, size_t cap);
/* The value of header name (case-insensitive), or NULL. */
const char *hs_header(const hs_resp *r, const char *name);
/* The error code of an error body, or "". */
const char *hs_error_code(const hs_resp *r);
void hs_resp_clear(hs_resp *r);
/* hs_json, then assert an error answer: the status, the error object's
 * code, and its message: containing msg, or (msg NULL) not empty. */
void hs_expect_error(hs *h, const char *method, const char *path, const char *body,
		     long status, const char *code, const char *msg);

/* A new keep-alive handle for a thread. */
CURL *hs_curl(void);

/* Raw TCP to the server: connect, send all of data, return the fd. */
int hs_raw_connect(const hs *h);
/* As hs_raw_connect, but returns -1 when the connection is refused. */
int hs_raw_connect_try(const hs *h);
void hs_raw_send(int fd, const void *data, size_t len);
/* The monotonic clock in milliseconds. */
int64_t hs_now_ms(void);
/* Read until the peer closes or timeout_ms passes; returns bytes read
 * into buf (NUL-terminated, at most cap - 1). */
size_t hs_raw_read(int fd, char *buf, size_t cap, int timeout_ms);
/* Status of a raw HTTP response text ("HTTP/1.1 408 ..."), or 0. */
int hs_raw_status(const char *text);
/* Waits (bounded by timeout_ms) until memd has exactly n requests in
 * flight besides the GET /metrics that asks (its memd_http_requests_in_flight
 * gauge): a request counts from when memd has its headers until it is
 * answered. Returns 1 when it got there, 0 on time-out. For tests that
 * need memd to be inside a request (a body half sent) before they act. */
int hs_wait_in_flight(hs *h, long n, int timeout_ms);

/* Canonical JSON text of everything the user (app, user) has: sessions
 * with all events, state and artifacts (with their bytes' sizes). For
 * "nothing changed" checks. malloc'd. */
char *hs_snapshot(hs *h, const char *app, const char *user);

#endif
