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

#include "config/config.h"

typedef struct hostsvc hostsvc;

/* New services with the given log sink (log may be NULL: discard). The
 * tokenizer starts as the approximate one and the summarizer as the
 * extractive one (hostsvc_configure changes them). NULL on ENOMEM. */
hostsvc *hostsvc_new(memd_log_fn log, void *log_userdata, int32_t log_level);
/* Accepts NULL. */
void hostsvc_free(hostsvc *s);

/* Set up the tokenizer and the summarizer from their config nodes (the
 * tokenizer: and summarizer: maps settings_load validated; NULL = the
 * defaults: approx, extractive). tokenizer {type: bpe, ranks: FILE,
 * encoding?} loads the ranks file (the encoding is inferred from the file
 * when not given, see bpe_load); summarizer {type: openai, url, model,
 * api_key?, timeout_ms?, retries?, max_tokens?} makes an HTTP client (the
 * API key falls back to $OPENAI_API_KEY); max_tokens caps every summary.
 * Call before the services are shared (memd_open does). On failure nothing
 * changes and err says why (the ranks file path, the bad key). */
int32_t hostsvc_configure(hostsvc *s, const config_node *tokenizer,
			  const config_node *summarizer, memd_error *err);

/* Log one line for component (a plugin instance or host module). s may be
 * NULL (discard). Never fails. */
void hostsvc_logv(hostsvc *s, int32_t level, const char *component, const char *fmt, va_list ap)
	__attribute__((format(printf, 4, 0)));
void hostsvc_log(hostsvc *s, int32_t level, const char *component, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Tokens in text by the configured tokenizer. s may be NULL (approximate).
 * Thread-safe. */
int32_t hostsvc_count_tokens(hostsvc *s, const char *text, size_t len, int64_t *ret_tokens);

/* The configured summarizer; see memd_host.summarize. target_tokens <= 0
 * means the configured max_tokens; a larger one is capped to it. The
 * summary delivered to out has at most that many tokens. s NULL:
 * MEMD_ENOTSUP. Thread-safe. */
int32_t hostsvc_summarize(hostsvc *s, const memd_call *call, const char *previous_summary,
			  const memd_event *const *events, uint32_t n_events, int64_t target_tokens,
			  const memd_text_sink *out, memd_error *err);

#endif
