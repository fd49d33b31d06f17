/* SPDX-License-Identifier: MIT */
/*
 * The openai summarizer (see summarize.h): one chat completion through
 * util/chat_client.h, {"model", "messages": [system prompt, user
 * transcript], "temperature": 0, "max_tokens"}; the summary is
 * choices[0].message.content, clipped to the budget.
 */
#include "summarize/summarize.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "util/chat_client.h"

static const char system_prompt[] =
	"You maintain the running summary of a conversation between a user and an AI "
	"assistant. Fold the previous summary (if any) and the new messages into one "
	"updated summary. Preserve every fact, decision, name, date, number, identifier, "
	"preference, commitment and open question; keep who said or decided what. Drop "
	"greetings, filler and repetition. Write short plain sentences, one per line, no "
	"preamble. Output only the summary, at most %lld tokens.";

struct summarize_openai {
	chat_client *cc;
};

int32_t summarize_openai_new(const summarize_openai_config *cfg, summarize_openai **ret,
			     memd_error *err)
{
	chat_client_config cc = { .component = "summarizer", .url_key = "summarizer.url",
				  .url = cfg->url, .model = cfg->model, .api_key = cfg->api_key,
				  .timeout_ms = cfg->timeout_ms, .retries = cfg->retries,
				  .backoff_base_ms = SUMMARIZE_OPENAI_BACKOFF_BASE_MS,
				  .backoff_max_ms = SUMMARIZE_OPENAI_BACKOFF_MAX_MS };
	summarize_openai *so;
	int32_t r;

	if (!(so = calloc(1, sizeof(*so))))
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	if ((r = chat_client_new(&cc, &so->cc, err)) < 0) {
		free(so);
		return r;
	}
	*ret = so;
	return 0;
}

void summarize_openai_free(summarize_openai *so)
{
	if (!so)
		return;
	chat_client_free(so->cc);
	free(so);
}

/* ---- the request body and the reply ---------------------------------------- */

static char *transcript(const char *previous, const memd_event *const *events, uint32_t n)
{
	size_t len = 0, o = 0;
	char *s;
	static const char prev_head[] = "Previous summary:\n", new_head[] = "New messages:\n";

	if (previous && *previous)
		len += strlen(prev_head) + strlen(previous) + 2;
	len += strlen(new_head);
	for (uint32_t i = 0; i < n; i++)
		len += strlen(events[i]->role ? events[i]->role : "event") + 3 +
		       strlen(events[i]->text ? events[i]->text : "");
	s = malloc(len + 1);
	if (!s)
		return NULL;
	if (previous && *previous)
		o += (size_t)sprintf(s + o, "%s%s\n\n", prev_head, previous);
	o += (size_t)sprintf(s + o, "%s", new_head);
	for (uint32_t i = 0; i < n; i++)
		o += (size_t)sprintf(s + o, "%s: %s\n", events[i]->role ? events[i]->role : "event",
				     events[i]->text ? events[i]->text : "");
	s[o] = '\0';
	return s;
}

static char *request_json(const summarize_openai *so, const char *previous,
			  const memd_event *const *events, uint32_t n, int64_t target)
{
	char sys[sizeof(system_prompt) + 32];
	char *user = transcript(previous, events, n), *text = NULL;
	json_t *o;

	if (!user)
		return NULL;
	snprintf(sys, sizeof(sys), system_prompt, (long long)target);
	o = json_pack("{s:s,s:[{s:s,s:s},{s:s,s:s}],s:i,s:I}", "model", chat_client_model(so->cc),
		      "messages",
		      "role", "system", "content", sys, "role", "user", "content", user,
		      "temperature", 0, "max_tokens", (json_int_t)target);
	if (o)
		text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	free(user);
	return text;
}

/* The model's answer (a chat_answer_fn): a copy of a non-empty content
 * into *ctx (a char *, NULL before). */
static int32_t take_summary(void *ctx, const char *content, size_t len, memd_error *err)
{
	char **summary = ctx;

	if (len == 0)
		return memd_error_set(err, MEMD_EIO, MEMD_ERROR_RETRYABLE,
				      "summarizer: the reply has no choices[0].message.content");
	if (!(*summary = strndup(content, len)))
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	return 0;
}

int32_t summarize_openai_run(summarize_openai *so, const memd_call *call,
			     const summarize_tokens *tok, const char *previous,
			     const memd_event *const *events, uint32_t n_events,
			     int64_t target_tokens, const memd_text_sink *out, memd_error *err)
{
	char *payload, *summary = NULL;
	int32_t r;

	if (target_tokens < 1)
		return memd_error_set(err, MEMD_EINVAL, 0, "summary budget must be at least 1 token");
	if (!(payload = request_json(so, previous, events, n_events, target_tokens)))
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	r = chat_client_call(so->cc, call, payload, take_summary, &summary, err);
	if (r == 0) {
		size_t len = summarize_clip(tok, summary, strlen(summary), target_tokens);
		r = out->text(out->userdata, summary, len);
		if (r < 0)
			memd_error_set(err, r, 0, "summary sink refused the summary");
	}
	free(summary);
	free(payload);
	return r;
}
