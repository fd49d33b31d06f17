/* SPDX-License-Identifier: MIT */
#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <memd/abi.h>

#include "json/event_json.h"

#define LOG_MSG_MAX 2048
#define US_PER_SEC 1000000LL
#define NS_PER_US 1000
#define LOG_REAL_DIGITS 6 /* significant digits of numbers like duration_ms */

struct http_log {
	int fd;
	int32_t level;
	pthread_mutex_t lock;
};

static const char *const level_names[] = { "error", "warn", "info", "debug" };

http_log *http_log_new(int fd, int32_t level)
{
	http_log *l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	l->fd = fd;
	l->level = level;
	pthread_mutex_init(&l->lock, NULL);
	return l;
}

void http_log_free(http_log *l)
{
	if (!l)
		return;
	pthread_mutex_destroy(&l->lock);
	free(l);
}

int http_log_enabled(const http_log *l, int32_t level)
{
	return l && level <= l->level;
}

static void write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

void http_log_write(http_log *l, int32_t level, const char *msg, json_t *fields)
{
	struct timespec ts;
	char when[EJ_TIME_LEN];
	json_t *o;
	char *text;

	if (!http_log_enabled(l, level)) {
		json_decref(fields);
		return;
	}
	if (level < MEMD_LOG_ERROR)
		level = MEMD_LOG_ERROR;
	if (level > MEMD_LOG_DEBUG)
		level = MEMD_LOG_DEBUG;
	clock_gettime(CLOCK_REALTIME, &ts);
	ej_format_time((int64_t)ts.tv_sec * US_PER_SEC + ts.tv_nsec / NS_PER_US, when);
	o = json_pack("{s:s,s:s,s:s}", "ts", when, "level", level_names[level], "msg", msg ? msg : "");
	if (!o) {
		json_decref(fields);
		return;
	}
	if (fields)
		json_object_update_missing(o, fields);
	json_decref(fields);
	text = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(LOG_REAL_DIGITS));
	json_decref(o);
	if (!text)
		return;
	{
		size_t n = strlen(text);
		text[n] = '\n'; /* replaces the NUL: written with its length */
		pthread_mutex_lock(&l->lock);
		write_all(l->fd, text, n + 1);
		pthread_mutex_unlock(&l->lock);
	}
	free(text);
}

void http_log_printf(http_log *l, int32_t level, const char *fmt, ...)
{
	char msg[LOG_MSG_MAX];
	va_list ap;

	if (!http_log_enabled(l, level))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!ej_utf8_valid(msg, strlen(msg)))
		for (char *p = msg; *p; p++)
			if ((unsigned char)*p >= 0x80)
				*p = '?';
	http_log_write(l, level, msg, NULL);
}

void http_log_memd(void *ud, int32_t level, const char *component, const char *line)
{
	http_log *l = ud;
	char msg[LOG_MSG_MAX];

	if (!http_log_enabled(l, level))
		return;
	snprintf(msg, sizeof(msg), "%s", line ? line : "");
	if (!ej_utf8_valid(msg, strlen(msg)))
		for (char *p = msg; *p; p++)
			if ((unsigned char)*p >= 0x80)
				*p = '?';
	http_log_write(l, level, msg,
		       json_pack("{s:s}", "component", component && ej_utf8_valid(component, strlen(component))
						       ? component : "?"));
}
