/* SPDX-License-Identifier: MIT */
/*
 * The exact BPE tokenizer (host/tokens/bpe.c) against the reference, js-tiktoken:
 * MEMD_TOKENS_DIR holds the ranks files made from js-tiktoken's data and
 * reference.jsonl, the seeded corpus with js-tiktoken's token ids for both
 * encodings (written by tokens_test.sh). Every string must give the same
 * count and the same ids. Plus: loading errors, encoding inference, bad
 * UTF-8, the host service wiring.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tokens/bpe.h"
#include "config/config.h"
#include "plugins/hostsvc.h"
#include <memd/memd.h>

#define CORPUS_MIN 2000
#define SHOW_MISMATCHES 5
#define IDS_MAX 65536

static const char *dir(void)
{
	const char *d = getenv("MEMD_TOKENS_DIR");
	cr_assert(d, "MEMD_TOKENS_DIR is not set: run through tokens_test.sh");
	return d;
}

static char *path_in(const char *name)
{
	char *p = NULL;
	cr_assert(asprintf(&p, "%s/%s", dir(), name) > 0);
	return p;
}

static bpe *load(const char *encoding_name)
{
	char file[128];
	snprintf(file, sizeof(file), "%s.tiktoken", encoding_name);
	char *p = path_in(file);
	int32_t enc;
	bpe *b = NULL;
	memd_error err = { 0 };
	cr_assert_eq(bpe_encoding_from_name(encoding_name, &enc), 0);
	cr_assert_eq(bpe_load(p, enc, &b, &err), 0, "%s", err.msg);
	free(p);
	return b;
}

typedef struct ids {
	uint32_t v[IDS_MAX];
	size_t n;
} ids;

static int32_t collect(void *ud, uint32_t rank)
{
	ids *o = ud;
	if (o->n == IDS_MAX)
		return MEMD_ETOOBIG;
	o->v[o->n++] = rank;
	return 0;
}

static void check_encoding(const char *name)
{
	static ids got;
	char *ref = path_in("reference.jsonl");
	FILE *f = fopen(ref, "r");
	bpe *b = load(name);
	char *line = NULL;
	size_t cap = 0, n = 0, bad = 0;
	int64_t tokens = 0;

	cr_assert(f, "cannot open %s", ref);
	while (getline(&line, &cap, f) > 0) {
		json_error_t jerr;
		json_t *o = json_loads(line, 0, &jerr), *want;
		const char *text;
		size_t len;
		cr_assert(o, "reference line %zu: %s", n + 1, jerr.text);
		text = json_string_value(json_object_get(o, "text"));
		len = json_string_length(json_object_get(o, "text"));
		want = json_object_get(o, name);
		cr_assert(text && json_is_array(want));
		int64_t count = bpe_count(b, text, len);
		got.n = 0;
		cr_assert_eq(bpe_encode(b, text, len, collect, &got), 0);
		int same = count == (int64_t)json_array_size(want) && got.n == json_array_size(want);
		for (size_t i = 0; same && i < got.n; i++)
			same = (json_int_t)got.v[i] == json_integer_value(json_array_get(want, i));
		if (!same && bad++ < SHOW_MISMATCHES) {
			char *w = json_dumps(want, JSON_COMPACT), *t = json_dumps(json_object_get(o, "text"), JSON_ENCODE_ANY);
			fprintf(stderr, "%s: string %zu %.300s: count %lld, js-tiktoken %zu %.300s; ids:", name,
				n, t, (long long)count, json_array_size(want), w);
			for (size_t i = 0; i < got.n && i < 40; i++)
				fprintf(stderr, " %u", got.v[i]);
			fputc('\n', stderr);
			free(w);
			free(t);
		}
		tokens += count;
		n++;
		json_decref(o);
	}
	free(line);
	fclose(f);
	free(ref);
	bpe_free(b);
	cr_assert_geq(n, CORPUS_MIN, "the corpus has %zu strings, fewer than %d", n, CORPUS_MIN);
	cr_assert_eq(bad, 0, "%s: %zu of %zu strings differ from js-tiktoken", name, bad, n);
	cr_log_info("%s: %zu strings, %lld tokens, all equal to js-tiktoken", name, n, (long long)tokens);
}

Test(bpe, cl100k_equals_js_tiktoken, .timeout = 60)
{
	check_encoding("cl100k_base");
}

Test(bpe, o200k_equals_js_tiktoken, .timeout = 60)
{
	check_encoding("o200k_base");
}

Test(bpe, vocabulary_and_inference)
{
	bpe *cl = load("cl100k_base"), *o2 = load("o200k_base"), *b = NULL;
	memd_error err = { 0 };
	char *p = path_in("o200k_base.tiktoken"), copy[] = "/tmp/memd-bpe-XXXXXX";
	cr_assert_eq(bpe_vocab_size(cl), 100256);
	cr_assert_eq(bpe_vocab_size(o2), 199998);
	/* Inferred from the name. */
	cr_assert_eq(bpe_load(p, 0, &b, &err), 0, "%s", err.msg);
	cr_assert_eq(bpe_encoding(b), BPE_ENCODING_O200K);
	bpe_free(b);
	/* A name that says nothing: inferred from the vocabulary size. */
	int fd = mkstemp(copy);
	cr_assert(fd >= 0);
	FILE *in = fopen(p, "rb"), *out = fdopen(fd, "wb");
	char buf[65536];
	size_t got;
	while ((got = fread(buf, 1, sizeof(buf), in)) > 0)
		fwrite(buf, 1, got, out);
	fclose(in);
	fclose(out);
	cr_assert_eq(bpe_load(copy, 0, &b, &err), 0, "%s", err.msg);
	cr_assert_eq(bpe_encoding(b), BPE_ENCODING_O200K);
	cr_assert_eq(bpe_count(b, "Hello, world", 12), bpe_count(o2, "Hello, world", 12));
	bpe_free(b);
	unlink(copy);
	free(p);
	cr_assert_str_eq(bpe_encoding_name(BPE_ENCODING_CL100K), "cl100k_base");
	int32_t enc;
	cr_assert_eq(bpe_encoding_from_name("p50k_base", &enc), MEMD_EINVAL);
	bpe_free(cl);
	bpe_free(o2);
}

Test(bpe, bad_utf8_and_edges)
{
	bpe *b = load("cl100k_base");
	const char bad[] = "ab\xff\xfe cd \xc3 \xe2\x82 \xed\xa0\x80 \xf4\x90\x80\x80 z";
	cr_assert_eq(bpe_count(b, NULL, 0), 0);
	cr_assert_eq(bpe_count(b, "", 0), 0);
	int64_t n = bpe_count(b, bad, sizeof(bad) - 1);
	cr_assert(n >= 8 && n <= (int64_t)(sizeof(bad) - 1), "count %lld", (long long)n);
	/* A long piece merges (heap path) to far fewer tokens than bytes. */
	char *longword = malloc(20001);
	for (int i = 0; i < 20000; i++)
		longword[i] = "abcdefghij"[i % 10];
	longword[20000] = '\0';
	int64_t m = bpe_count(b, longword, 20000);
	cr_assert(m > 0 && m < 10000, "count %lld", (long long)m);
	free(longword);
	bpe_free(b);
}

static int32_t load_text(const char *text, bpe **ret, memd_error *err)
{
	char path[] = "/tmp/memd-ranks-XXXXXX";
	int fd = mkstemp(path);
	cr_assert(fd >= 0);
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	int32_t r = bpe_load(path, BPE_ENCODING_CL100K, ret, err);
	unlink(path);
	return r;
}

Test(bpe, bad_ranks_files)
{
	bpe *b = NULL;
	memd_error err = { 0 };
	cr_assert_eq(bpe_load("/nonexistent/cl100k_base.tiktoken", 0, &b, &err), MEMD_EIO);
	cr_assert(strstr(err.msg, "No such file"), "%s", err.msg);
	cr_assert_eq(load_text("IQ== 0\nnot base64! 1\n", &b, &err), MEMD_EINVAL);
	cr_assert(strstr(err.msg, ":2: expected"), "%s", err.msg);
	cr_assert_eq(load_text("IQ== 0\nIQ== 1\n", &b, &err), MEMD_EINVAL);
	cr_assert(strstr(err.msg, ":2: token listed twice"), "%s", err.msg);
	cr_assert_eq(load_text("IQ== x\n", &b, &err), MEMD_EINVAL);
	cr_assert(strstr(err.msg, ":1: expected"), "%s", err.msg);
	cr_assert_eq(load_text("IQ== 0\nIg== 1\n", &b, &err), MEMD_EINVAL);
	cr_assert(strstr(err.msg, "has no rank"), "%s", err.msg);
	cr_assert_null(b);
}

Test(bpe, host_service_counts_with_the_configured_tokenizer)
{
	char *p = path_in("cl100k_base.tiktoken"), *yaml = NULL;
	config_node *root = NULL;
	memd_error err = { 0 };
	hostsvc *svc = hostsvc_new(NULL, NULL, 0);
	bpe *b = load("cl100k_base");
	int64_t got = 0;
	const char *text = "Exact counts: 12345 tokens, naïve café 😀 日本語";

	cr_assert(asprintf(&yaml, "type: bpe\nranks: %s\n", p) > 0);
	cr_assert_eq(config_parse_string(yaml, strlen(yaml), "t.yaml", &root, &err), 0, "%s", err.msg);
	cr_assert_eq(hostsvc_configure(svc, root, NULL, &err), 0, "%s", err.msg);
	cr_assert_eq(hostsvc_count_tokens(svc, text, strlen(text), &got), 0);
	cr_assert_eq(got, bpe_count(b, text, strlen(text)));
	config_free(root);
	free(yaml);

	/* A ranks file that is not there fails with the path in the message. */
	yaml = strdup("type: bpe\nranks: /nonexistent.tiktoken\n");
	cr_assert_eq(config_parse_string(yaml, strlen(yaml), "t.yaml", &root, &err), 0);
	cr_assert_eq(hostsvc_configure(svc, root, NULL, &err), MEMD_EIO);
	cr_assert(strstr(err.msg, "/nonexistent.tiktoken"), "%s", err.msg);
	config_free(root);
	free(yaml);
	free(p);
	bpe_free(b);
	hostsvc_free(svc);
}

/* Through the facade: with tokenizer {type: bpe} every appended event's
 * stored token count is the exact count, and a missing ranks file stops
 * memd_open with the path in the message. */
static memd *open_with_tokenizer(const char *tokenizer_yaml, memd_error *err, int32_t *ret_rc)
{
	char path[] = "/tmp/memd-bpe-config-XXXXXX";
	int fd = mkstemp(path);
	char *yaml = NULL;
	memd *m = NULL;
	cr_assert(fd >= 0);
	cr_assert(asprintf(&yaml, "stores:\n  main: {plugin: memory}\ntokenizer: %s\n", tokenizer_yaml) > 0);
	cr_assert_eq(write(fd, yaml, strlen(yaml)), (ssize_t)strlen(yaml));
	close(fd);
	memd_options o = { .struct_size = sizeof(o), .config_path = path };
	*ret_rc = memd_open(&o, &m, err);
	unlink(path);
	free(yaml);
	return m;
}

Test(bpe, facade_stores_exact_counts)
{
	char *ranks = path_in("o200k_base.tiktoken"), *tk = NULL, *out = NULL;
	memd_error err = { 0 };
	int32_t rc;
	bpe *b = load("o200k_base");
	static const char *const texts[] = { "Hello, wörld! 😀 日本語のテキスト", "getHTTPResponseCode(x)\n\n  ",
					     "    indented\tcode();  // 12345678" };

	cr_assert(asprintf(&tk, "{type: bpe, ranks: '%s'}", ranks) > 0);
	memd *m = open_with_tokenizer(tk, &err, &rc);
	cr_assert_eq(rc, 0, "%s", err.msg);
	cr_assert_eq(memd_session_create(m, "a", "u", "{\"id\":\"s\"}", &out, &err), 0, "%s", err.msg);
	memd_free(out);
	for (int i = 0; i < 3; i++) {
		json_t *req = json_pack("{s:[{s:s,s:s}]}", "events", "role", "user", "content", texts[i]);
		char *body = json_dumps(req, JSON_COMPACT);
		cr_assert_eq(memd_events_append(m, "a", "u", "s", body, &out, &err), 0, "%s", err.msg);
		memd_free(out);
		free(body);
		json_decref(req);
	}
	cr_assert_eq(memd_events_list(m, "a", "u", "s", 0, 10, &out, &err), 0, "%s", err.msg);
	json_t *o = json_loads(out, 0, NULL), *e;
	size_t i;
	memd_free(out);
	json_array_foreach(json_object_get(o, "events"), i, e) {
		const char *text = json_string_value(json_object_get(e, "text"));
		cr_assert_eq(json_integer_value(json_object_get(e, "tokens")), bpe_count(b, text, strlen(text)),
			     "event %zu: %s", i, text);
	}
	cr_assert_eq(json_array_size(json_object_get(o, "events")), 3);
	json_decref(o);
	memd_close(m);

	m = open_with_tokenizer("{type: bpe, ranks: /nonexistent/o200k_base.tiktoken}", &err, &rc);
	cr_assert_null(m);
	cr_assert_eq(rc, MEMD_EIO);
	cr_assert(strstr(err.msg, "/nonexistent/o200k_base.tiktoken"), "%s", err.msg);
	free(tk);
	free(ranks);
	bpe_free(b);
}
