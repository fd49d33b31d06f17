/* SPDX-License-Identifier: MIT */
#include "hostsvc.h"

#include <stdio.h>
#include <stdlib.h>

#include "tokens.h"

#define HOSTSVC_LINE_MAX 1024

struct hostsvc {
	memd_log_fn log;
	void *log_userdata;
	int32_t log_level;
};

hostsvc *hostsvc_new(memd_log_fn log, void *log_userdata, int32_t log_level)
{
	hostsvc *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->log = log;
	s->log_userdata = log_userdata;
	s->log_level = log_level;
	return s;
}

void hostsvc_free(hostsvc *s)
{
	free(s);
}

void hostsvc_logv(hostsvc *s, int32_t level, const char *component, const char *fmt, va_list ap)
{
	char line[HOSTSVC_LINE_MAX];

	if (!s || !s->log || level > s->log_level)
		return;
	vsnprintf(line, sizeof(line), fmt, ap);
	s->log(s->log_userdata, level, component ? component : "memd", line);
}

void hostsvc_log(hostsvc *s, int32_t level, const char *component, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	hostsvc_logv(s, level, component, fmt, ap);
	va_end(ap);
}

int32_t hostsvc_count_tokens(hostsvc *s, const char *text, size_t len, int64_t *ret_tokens)
{
	(void)s;
	if (!text && len)
		return MEMD_EINVAL;
	*ret_tokens = text ? tokens_approx(text, len) : 0;
	return 0;
}

int32_t hostsvc_summarize(hostsvc *s, const memd_call *call, const char *previous_summary,
			  const memd_event *const *events, uint32_t n_events, int64_t target_tokens,
			  const memd_text_sink *out, memd_error *err)
{
	(void)s;
	(void)call;
	(void)previous_summary;
	(void)events;
	(void)n_events;
	(void)target_tokens;
	(void)out;
	return memd_error_set(err, MEMD_ENOTSUP, 0, "no summarizer is configured");
}
