/* SPDX-License-Identifier: MIT */
/*
 * hostsvc: the services behind memd_host (logging, token counting,
 * summarizing) shared by every plugin instance of one memd.
 */
#ifndef MEMD_HOST_HOSTSVC_H
#define MEMD_HOST_HOSTSVC_H

#include <stdarg.h>

#include <memd/memd.h>
#include <memd/plugin.h>

typedef struct hostsvc hostsvc;

/* New services with the given log sink (log may be NULL: discard). The
 * tokenizer starts as the approximate one. NULL on ENOMEM. */
hostsvc *hostsvc_new(memd_log_fn log, void *log_userdata, int32_t log_level);
/* Accepts NULL. */
void hostsvc_free(hostsvc *s);

/* Log one line for component (a plugin instance or host module). s may be
 * NULL (discard). Never fails. */
void hostsvc_logv(hostsvc *s, int32_t level, const char *component, const char *fmt, va_list ap)
	__attribute__((format(printf, 4, 0)));
void hostsvc_log(hostsvc *s, int32_t level, const char *component, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Tokens in text by the configured tokenizer. s may be NULL (approximate). */
int32_t hostsvc_count_tokens(hostsvc *s, const char *text, size_t len, int64_t *ret_tokens);

/* The configured summarizer, or MEMD_ENOTSUP if none; see memd_host.summarize. */
int32_t hostsvc_summarize(hostsvc *s, const memd_call *call, const char *previous_summary,
			  const memd_event *const *events, uint32_t n_events, int64_t target_tokens,
			  const memd_text_sink *out, memd_error *err);

#endif
