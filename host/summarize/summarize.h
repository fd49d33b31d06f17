/* SPDX-License-Identifier: MIT */
/*
 * summarize: the host's summarizers behind memd_host.summarize.
 *
 *  - extractive (summarize_extractive.c): built in, deterministic, no
 *    network. Splits the previous summary into its lines and each event's
 *    text into sentences, scores every sentence by how informative it is
 *    (frequent content words of the folded text, with bonuses for names,
 *    numbers and dates, a penalty for length), and keeps the best ones,
 *    redundancy removed, up to the token budget, in their original order,
 *    one per line, each event sentence prefixed with its role ("user: ").
 *  - openai (summarize_openai.c): any OpenAI-compatible chat completions
 *    endpoint, with a prompt that asks to keep facts, decisions, names,
 *    dates and numbers; timeout, retries with exponential backoff on
 *    network errors, 429 and 5xx.
 *
 * Both deliver one summary of at most target_tokens tokens by the host's
 * tokenizer (summarize_clip enforces it) to a text sink.
 */
#ifndef MEMD_HOST_SUMMARIZE_H
#define MEMD_HOST_SUMMARIZE_H

#include <stddef.h>
#include <stdint.h>

#include <memd/plugin.h>

/* The host's token counter, as summarizers see it. */
typedef struct summarize_tokens {
	int64_t (*count)(void *userdata, const char *text, size_t len);
	void *userdata;
} summarize_tokens;

/* Fold previous (may be NULL) and events into one extractive summary of
 * at most target_tokens (> 0) tokens, delivered to out once. Deterministic:
 * the same input gives the same summary. MEMD_EINVAL (target < 1),
 * MEMD_ENOMEM, or the sink's error. */
int32_t summarize_extractive(const summarize_tokens *tok, const char *previous,
			     const memd_event *const *events, uint32_t n_events,
			     int64_t target_tokens, const memd_text_sink *out, memd_error *err);

/* The longest prefix of text[0..len) that ends at a line or sentence end
 * (or, failing that, a UTF-8 character boundary) and has at most
 * target_tokens tokens. Returns its length in bytes (len if it all fits). */
size_t summarize_clip(const summarize_tokens *tok, const char *text, size_t len,
		      int64_t target_tokens);

/* ---- openai ------------------------------------------------------------ */

typedef struct summarize_openai summarize_openai;

typedef struct summarize_openai_config {
	const char *url;      /* base (".../v1") or the full ".../chat/completions" URL */
	const char *model;
	const char *api_key;  /* NULL = none (no Authorization header); secret */
	int64_t timeout_ms;   /* per HTTP request */
	int64_t retries;      /* extra attempts after the first */
} summarize_openai_config;

/* Backoff between attempts: BASE << attempt, at most MAX, or the server's
 * Retry-After (seconds) when it sends one, also at most MAX. */
#define SUMMARIZE_OPENAI_BACKOFF_BASE_MS 100
#define SUMMARIZE_OPENAI_BACKOFF_MAX_MS 5000

/* A client for cfg (copied). Initialises libcurl (process-wide; main
 * thread). MEMD_EINVAL (no url or model, url not http(s)), MEMD_ENOMEM. */
int32_t summarize_openai_new(const summarize_openai_config *cfg, summarize_openai **ret,
			     memd_error *err);
/* Accepts NULL. */
void summarize_openai_free(summarize_openai *so);

/* As summarize_extractive, by the model. Blocks on the network; honours
 * call->deadline_us and call->cancel. Failures: MEMD_EUNAVAIL (cannot
 * connect, 429/5xx after every retry; RETRYABLE), MEMD_ETIMEDOUT,
 * MEMD_EAUTH (401/403), MEMD_EIO (any other status, or a body that is not
 * a chat completion with a non-empty message), MEMD_ECANCELED. The error
 * message never contains the API key. */
int32_t summarize_openai_run(summarize_openai *so, const memd_call *call,
			     const summarize_tokens *tok, const char *previous,
			     const memd_event *const *events, uint32_t n_events,
			     int64_t target_tokens, const memd_text_sink *out, memd_error *err);

#endif
