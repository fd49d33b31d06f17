/* SPDX-License-Identifier: MIT */
/*
 * tokens_bench DIR CORPUS JS_RESULT: tokens/s of memd's exact BPE counter
 * (host/tokens/bpe.c) on the corpus (one JSON string per line), for cl100k_base
 * and o200k_base, next to js-tiktoken's figures measured on the same
 * corpus in the same run (JS_RESULT, from tokens_js.mjs). Also checks that
 * both counted the same number of tokens. Run by tokens_bench.sh.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tokens/bpe.h"

#define REPS 5
#define MIN_SECONDS 0.5 /* repeat the corpus until a run lasts this long */
#define TARGET_RATIO 5.0

typedef struct text {
	char *p;
	size_t len;
} text;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	text *texts = NULL;
	size_t n = 0, cap = 0, bytes = 0;
	char *line = NULL;
	size_t lcap = 0;
	json_t *js;
	FILE *f;
	int worst_ok = 1;

	if (argc != 4) {
		fprintf(stderr, "usage: %s DIR CORPUS JS_RESULT\n", argv[0]);
		return 2;
	}
	if (!(f = fopen(argv[2], "r"))) {
		perror(argv[2]);
		return 1;
	}
	while (getline(&line, &lcap, f) > 0) {
		json_t *s = json_loads(line, JSON_DECODE_ANY, NULL);
		if (!json_is_string(s)) {
			fprintf(stderr, "%s: not a JSON string per line\n", argv[2]);
			return 1;
		}
		if (n == cap) {
			cap = cap ? 2 * cap : 1024;
			texts = realloc(texts, cap * sizeof(*texts));
		}
		texts[n].len = json_string_length(s);
		texts[n].p = malloc(texts[n].len + 1);
		memcpy(texts[n].p, json_string_value(s), texts[n].len + 1);
		bytes += texts[n].len;
		n++;
		json_decref(s);
	}
	free(line);
	fclose(f);
	js = json_loads(argv[3], 0, NULL);
	if (!js) {
		fprintf(stderr, "JS_RESULT is not JSON\n");
		return 1;
	}
	printf("corpus: %zu strings, %zu bytes\n", n, bytes);
	printf("%-12s %14s %14s %14s %8s\n", "encoding", "tokens", "memd tok/s", "js tok/s", "ratio");
	for (int e = 0; e < 2; e++) {
		const char *name = e ? "o200k_base" : "cl100k_base";
		char path[1024];
		memd_error err = { 0 };
		bpe *b;
		int32_t enc;
		int64_t tokens = 0;
		double best = 1e30;
		snprintf(path, sizeof(path), "%s/%s.tiktoken", argv[1], name);
		bpe_encoding_from_name(name, &enc);
		if (bpe_load(path, enc, &b, &err) < 0) {
			fprintf(stderr, "%s\n", err.msg);
			return 1;
		}
		for (size_t i = 0; i < n; i++)
			tokens += bpe_count(b, texts[i].p, texts[i].len); /* warm-up */
		for (int r = 0; r < REPS; r++) {
			int rounds = 0;
			double t0 = now(), secs;
			do {
				int64_t t = 0;
				for (size_t i = 0; i < n; i++)
					t += bpe_count(b, texts[i].p, texts[i].len);
				if (t != tokens)
					return 1;
				rounds++;
			} while (now() - t0 < MIN_SECONDS);
			secs = (now() - t0) / rounds;
			if (secs < best)
				best = secs;
		}
		json_t *j = json_object_get(js, name);
		double js_secs = json_real_value(json_object_get(j, "seconds"));
		int64_t js_tokens = json_integer_value(json_object_get(j, "tokens"));
		double ours = (double)tokens / best, theirs = (double)js_tokens / js_secs;
		printf("%-12s %14lld %14.0f %14.0f %7.1fx\n", name, (long long)tokens, ours, theirs,
		       ours / theirs);
		if (js_tokens != tokens)
			printf("  note: js-tiktoken counted %lld tokens\n", (long long)js_tokens);
		if (ours / theirs < TARGET_RATIO)
			worst_ok = 0;
		bpe_free(b);
	}
	printf("target: memd >= %.0fx js-tiktoken: %s\n", TARGET_RATIO, worst_ok ? "met" : "NOT met");
	json_decref(js);
	for (size_t i = 0; i < n; i++)
		free(texts[i].p);
	free(texts);
	return 0;
}
