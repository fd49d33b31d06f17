/* SPDX-License-Identifier: MIT */
/*
 * chat_client: the host's client of an OpenAI-compatible chat completions
 * endpoint, as the openai summarizer and the openai extractor use it. The
 * caller builds the JSON request; the client POSTs it, retries what a
 * retry may fix, and hands the content of the first choice's message to
 * the caller, who judges it.
 *
 * Every error message starts with the component's name ("summarizer: ...")
 * and never contains the API key.
 */
#ifndef MEMD_HOST_CHAT_CLIENT_H
#define MEMD_HOST_CHAT_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include <memd/plugin.h>

typedef struct chat_client chat_client;

typedef struct chat_client_config {
	const char *component;   /* first word of every message: "summarizer" */
	const char *url_key;     /* how the url's error names it: "summarizer.url" */
	const char *url;         /* base (".../v1") or the full ".../chat/completions" URL */
	const char *model;
	const char *api_key;     /* NULL or "" = none (no Authorization header); secret */
	int64_t timeout_ms;      /* per HTTP request; below 1 counts as 1 */
	int64_t retries;         /* extra attempts after the first; below 0 counts as 0 */
	int64_t backoff_base_ms; /* wait before retry n: base << n (n from 0)... */
	int64_t backoff_max_ms;  /* ...or the server's Retry-After, at most this */
} chat_client_config;

/* A client for cfg (copied, but for component, which must outlive the
 * client). The endpoint is the url with trailing slashes dropped, as is
 * when it ends in "/chat/completions", + "/chat/completions" when it ends
 * in "/v1", else + "/v1/chat/completions". Initialises libcurl
 * (process-wide; main thread). *ret is written only on success.
 * MEMD_EINVAL (no url or model, url not http(s)), MEMD_ENOMEM, MEMD_EIO
 * (libcurl failed to initialise). */
int32_t chat_client_new(const chat_client_config *cfg, chat_client **ret, memd_error *err);

/* Wipes the Authorization header, releases libcurl's share. Accepts NULL. */
void chat_client_free(chat_client *cc);

/* The model the client was made for (owned by cc). */
const char *chat_client_model(const chat_client *cc);

/* Judges the content of a 2xx reply's choices[0].message.content
 * (content[0..len), NUL-terminated; a string, possibly empty) and keeps
 * what it needs in ctx. Returns 0 (the call succeeds), MEMD_EIO with err
 * saying what is wrong (a bad answer: the attempt failed and is retried
 * like a 5xx, so the callback must drop what an earlier attempt kept), or
 * another negative code with err set (the call fails with it at once). */
typedef int32_t (*chat_answer_fn)(void *ctx, const char *content, size_t len, memd_error *err);

/* POSTs payload (a chat completions request, JSON) to cc's endpoint until
 * answer accepts a reply's content or the attempts run out. Blocks on the
 * network; honours call's deadline and cancel flag (call may be NULL). A
 * network error, 429, 5xx, a body that is not a chat completion and a
 * bad answer are retried after a backoff (the server's Retry-After when it
 * sends one), unless the wait would pass the deadline. Returns 0, or the
 * last attempt's error: MEMD_EUNAVAIL (cannot connect, 429/5xx;
 * RETRYABLE), MEMD_ETIMEDOUT (RETRYABLE), MEMD_EAUTH (401/403: "check
 * api_key"), MEMD_EIO (any other status; or a body that is not a chat
 * completion, or answer's MEMD_EIO: both RETRYABLE), MEMD_ECANCELED,
 * MEMD_ENOMEM, or answer's other error. */
int32_t chat_client_call(chat_client *cc, const memd_call *call, const char *payload,
			 chat_answer_fn answer, void *ctx, memd_error *err);

#endif
