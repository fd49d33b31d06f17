/* SPDX-License-Identifier: MIT */
#include "plugins/hostsvc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokens/bpe.h"
#include "config/settings.h"
#include "summarize/summarize.h"
#include "tokens/tokens.h"

#define HOSTSVC_LINE_MAX 1024
#define HOSTSVC_API_KEY_ENV "OPENAI_API_KEY"

struct hostsvc {
	memd_log_fn log;
	void *log_userdata;
	int32_t log_level;
	bpe *bpe;                   /* NULL = approximate counts */
	summarize_openai *openai;   /* NULL = extractive */
	int64_t summary_max_tokens;
};

hostsvc *hostsvc_new(memd_log_fn log, void *log_userdata, int32_t log_level)
{
	hostsvc *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->log = log;
	s->log_userdata = log_userdata;
	s->log_level = log_level;
	s->summary_max_tokens = SETTINGS_SUMMARIZER_MAX_TOKENS_DEFAULT;
	return s;
}

void hostsvc_free(hostsvc *s)
{
	if (!s)
		return;
	bpe_free(s->bpe);
	summarize_openai_free(s->openai);
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

/* ---- configuration ---------------------------------------------------------- */

static const char *text_of(const config_node *map, const char *key)
{
	return config_scalar(config_map_get(map, key));
}

static int32_t int_of(const config_node *map, const char *key, int64_t dflt, int64_t *ret,
		      memd_error *err)
{
	const config_node *n = config_map_get(map, key);
	if (!n || config_node_type(n) == CONFIG_NULL) {
		*ret = dflt;
		return 0;
	}
	if (config_as_int(n, ret) < 0 || *ret < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "%s:%u: %s: must be a non-negative integer",
				      config_node_file(n), config_node_line(n), key);
	return 0;
}

static int32_t make_tokenizer(hostsvc *s, const config_node *tk, bpe **ret, memd_error *err)
{
	const char *type = text_of(tk, "type"), *ranks, *enc_name;
	int32_t enc = 0, r;

	*ret = NULL;
	if (!type || strcmp(type, SETTINGS_TOKENIZER_TYPE_DEFAULT) == 0)
		return 0;
	if (strcmp(type, "bpe") != 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "tokenizer.type: unknown type '%.64s'", type);
	ranks = text_of(tk, "ranks");
	if (!ranks || !*ranks)
		return memd_error_set(err, MEMD_EINVAL, 0, "tokenizer.ranks: required when type is bpe");
	enc_name = text_of(tk, "encoding");
	if (enc_name && bpe_encoding_from_name(enc_name, &enc) < 0)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "tokenizer.encoding: '%.64s' is not cl100k_base or o200k_base",
				      enc_name);
	if ((r = bpe_load(ranks, enc, ret, err)) < 0)
		return r;
	hostsvc_log(s, MEMD_LOG_INFO, "tokenizer", "exact BPE tokens: %s (%zu ranks) from %s%s",
		    bpe_encoding_name(bpe_encoding(*ret)), bpe_vocab_size(*ret), ranks,
		    enc_name ? "" : " (encoding inferred)");
	return 0;
}

static int32_t make_summarizer(hostsvc *s, const config_node *sm, summarize_openai **ret,
			       int64_t *ret_max, memd_error *err)
{
	const char *type = text_of(sm, "type");
	summarize_openai_config cfg = { 0 };
	int32_t r;

	*ret = NULL;
	if ((r = int_of(sm, "max_tokens", SETTINGS_SUMMARIZER_MAX_TOKENS_DEFAULT, ret_max, err)) < 0)
		return r;
	if (*ret_max < 1)
		return memd_error_set(err, MEMD_EINVAL, 0, "summarizer.max_tokens: must be at least 1");
	if (!type || strcmp(type, SETTINGS_SUMMARIZER_TYPE_DEFAULT) == 0)
		return 0;
	if (strcmp(type, "openai") != 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "summarizer.type: unknown type '%.64s'", type);
	cfg.url = text_of(sm, "url");
	cfg.model = text_of(sm, "model");
	cfg.api_key = text_of(sm, "api_key");
	if (!cfg.api_key)
		cfg.api_key = getenv(HOSTSVC_API_KEY_ENV);
	if ((r = int_of(sm, "timeout_ms", SETTINGS_SUMMARIZER_TIMEOUT_MS_DEFAULT, &cfg.timeout_ms,
			err)) < 0 ||
	    (r = int_of(sm, "retries", SETTINGS_SUMMARIZER_RETRIES_DEFAULT, &cfg.retries, err)) < 0)
		return r;
	if (cfg.timeout_ms < 1)
		return memd_error_set(err, MEMD_EINVAL, 0, "summarizer.timeout_ms: must be at least 1");
	if ((r = summarize_openai_new(&cfg, ret, err)) < 0)
		return r;
	hostsvc_log(s, MEMD_LOG_INFO, "summarizer", "openai summaries: model %s at %s", cfg.model,
		    cfg.url);
	return 0;
}

int32_t hostsvc_configure(hostsvc *s, const config_node *tokenizer,
			  const config_node *summarizer, memd_error *err)
{
	bpe *b = NULL;
	summarize_openai *so = NULL;
	int64_t max_tokens;
	int32_t r;

	if ((r = make_tokenizer(s, tokenizer, &b, err)) < 0)
		return r;
	if ((r = make_summarizer(s, summarizer, &so, &max_tokens, err)) < 0) {
		bpe_free(b);
		return r;
	}
	bpe_free(s->bpe);
	summarize_openai_free(s->openai);
	s->bpe = b;
	s->openai = so;
	s->summary_max_tokens = max_tokens;
	return 0;
}

/* ---- tokens and summaries ------------------------------------------------------ */

int32_t hostsvc_count_tokens(hostsvc *s, const char *text, size_t len, int64_t *ret_tokens)
{
	if (!text && len)
		return MEMD_EINVAL;
	if (!text)
		*ret_tokens = 0;
	else if (s && s->bpe)
		*ret_tokens = bpe_count(s->bpe, text, len);
	else
		*ret_tokens = tokens_approx(text, len);
	return 0;
}

static int64_t count_cb(void *userdata, const char *text, size_t len)
{
	int64_t n = 0;
	hostsvc_count_tokens(userdata, text, len, &n);
	return n;
}

int32_t hostsvc_summarize(hostsvc *s, const memd_call *call, const char *previous_summary,
			  const memd_event *const *events, uint32_t n_events, int64_t target_tokens,
			  const memd_text_sink *out, memd_error *err)
{
	summarize_tokens tok = { count_cb, s };

	if (!s)
		return memd_error_set(err, MEMD_ENOTSUP, 0, "no summarizer is configured");
	if (!out || (!events && n_events))
		return memd_error_set(err, MEMD_EINVAL, 0, "summarize: events and a sink are required");
	if (target_tokens <= 0 || target_tokens > s->summary_max_tokens)
		target_tokens = s->summary_max_tokens;
	if (s->openai)
		return summarize_openai_run(s->openai, call, &tok, previous_summary, events, n_events,
					    target_tokens, out, err);
	return summarize_extractive(&tok, previous_summary, events, n_events, target_tokens, out,
				    err);
}
