/* SPDX-License-Identifier: MIT */
/*
 * http log: structured JSON lines (one object per line) on a file
 * descriptor, filtered by level. Thread-safe: lines never interleave.
 * Every line has "ts" (RFC 3339 UTC), "level" and "msg"; callers add
 * fields. Nothing secret is ever passed in (no Authorization values).
 */
#ifndef MEMD_HTTP_LOG_H
#define MEMD_HTTP_LOG_H

#include <jansson.h>
#include <stdint.h>

typedef struct http_log http_log;

/* A logger writing to fd (not owned) the lines at or below level
 * (MEMD_LOG_*). NULL on ENOMEM. */
http_log *http_log_new(int fd, int32_t level);
/* Accepts NULL. */
void http_log_free(http_log *l);
/* Nonzero if a line at level would be written. */
int http_log_enabled(const http_log *l, int32_t level);
/* Write one line with msg and the members of fields (an object, consumed;
 * may be NULL). Lines above the level are dropped. Never fails (a line
 * that cannot be built or written is lost). */
void http_log_write(http_log *l, int32_t level, const char *msg, json_t *fields);
/* printf-style message with no extra fields. */
void http_log_printf(http_log *l, int32_t level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* A memd_log_fn (api/memd/memd.h) writing to the http_log in ud, with the
 * component as a field. */
void http_log_memd(void *ud, int32_t level, const char *component, const char *line);

#endif
