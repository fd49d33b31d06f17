/* SPDX-License-Identifier: MIT */
/*
 * What both extractors share (see extract.h): the memory lists lookups
 * fill, freeing results, topics as compared, and the word overlap of two
 * texts.
 */
#include "extract/extract.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define WORD_MIN_BYTES 2   /* shorter words say nothing about a fact */
#define WORDS_MAX 256      /* words of a text compared (the rest ignored) */
#define WORD_MAX 64        /* bytes of a word compared (the rest ignored) */

static void free_strv(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

int32_t extract_memories_add(extract_memories *ms, const char *id, const char *text,
			     const char *kind, const char *topics_json, int64_t version)
{
	extract_memory m = { .version = version };
	extract_memory *grown;
	json_t *topics = topics_json ? json_loads(topics_json, 0, NULL) : NULL;
	size_t i;
	json_t *t;

	m.id = strdup(id ? id : "");
	m.text = strdup(text ? text : "");
	m.kind = strdup(kind ? kind : "fact");
	if (json_is_array(topics) && json_array_size(topics)) {
		m.topics = calloc(json_array_size(topics), sizeof(*m.topics));
		if (!m.topics)
			goto nomem;
		json_array_foreach(topics, i, t)
			if (json_is_string(t) && !(m.topics[m.n_topics++] = strdup(json_string_value(t))))
				goto nomem;
	}
	json_decref(topics);
	topics = NULL;
	if (!m.id || !m.text || !m.kind)
		goto nomem;
	grown = realloc(ms->v, (ms->n + 1) * sizeof(*grown));
	if (!grown)
		goto nomem;
	ms->v = grown;
	ms->v[ms->n++] = m;
	return 0;
nomem:
	json_decref(topics);
	free(m.id);
	free(m.text);
	free(m.kind);
	free_strv(m.topics, m.n_topics);
	return MEMD_ENOMEM;
}

void extract_memories_clear(extract_memories *ms)
{
	if (!ms)
		return;
	for (size_t i = 0; i < ms->n; i++) {
		free(ms->v[i].id);
		free(ms->v[i].text);
		free(ms->v[i].kind);
		free_strv(ms->v[i].topics, ms->v[i].n_topics);
	}
	free(ms->v);
	memset(ms, 0, sizeof(*ms));
}

void extract_result_clear(extract_result *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++) {
		extract_decision *d = &r->v[i];
		free(d->memory_id);
		free(d->text);
		free(d->kind);
		free_strv(d->topics, d->n_topics);
		free_strv(d->entities, d->n_entities);
		free(d->seqs);
	}
	free(r->v);
	memset(r, 0, sizeof(*r));
}

int extract_kind_ok(const char *kind)
{
	static const char *const kinds[] = { "fact", "preference", "instruction", "episode", NULL };
	for (size_t i = 0; kind && kinds[i]; i++)
		if (strcmp(kind, kinds[i]) == 0)
			return 1;
	return 0;
}

static int ascii_alnum(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static unsigned char ascii_lower(unsigned char c)
{
	return c >= 'A' && c <= 'Z' ? (unsigned char)(c - 'A' + 'a') : c;
}

size_t extract_topic_normalise(const char *in, char *out, size_t cap)
{
	size_t n = 0;
	int space = 0;
	static const char my[] = "my ";

	if (!cap)
		return 0;
	for (const unsigned char *p = (const unsigned char *)(in ? in : ""); *p; p++) {
		unsigned char c = *p;
		int keep = c >= 0x80 || ascii_alnum(c) || c == ':' || c == '-' || c == '\'';
		if (!keep) {
			space = n > 0;
			continue;
		}
		if (space) {
			if (n + 1 >= cap)
				break;
			out[n++] = ' ';
			space = 0;
		}
		if (n + 1 >= cap)
			break;
		out[n++] = (char)ascii_lower(c);
	}
	/* A cut may have split a character: drop its leading bytes. */
	while (n && ((unsigned char)out[n - 1] & 0xc0) == 0x80)
		n--;
	if (n && ((unsigned char)out[n - 1] & 0xc0) == 0xc0)
		n--;
	out[n] = '\0';
	if (n > strlen(my) && strncmp(out, my, strlen(my)) == 0) {
		memmove(out, out + strlen(my), n - strlen(my) + 1);
		n -= strlen(my);
	}
	return n;
}

/* ---- word overlap ------------------------------------------------------- */

typedef struct words {
	char w[WORDS_MAX][WORD_MAX];
	size_t n;
} words;

static int stop_word(const char *w)
{
	static const char *const stop[] = { "the", "an", "and", "or", "of", "to", "in", "on", "at",
					    "is", "are", "was", "be", "that", "this", "it", "my",
					    "me", "user", "user's", "for", "with", "as", "about",
					    NULL };
	for (size_t i = 0; stop[i]; i++)
		if (strcmp(stop[i], w) == 0)
			return 1;
	return 0;
}

static void split_words(const char *s, words *ws)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");

	ws->n = 0;
	while (*p && ws->n < WORDS_MAX) {
		char w[WORD_MAX];
		size_t len = 0;
		while (*p && !(*p >= 0x80 || ascii_alnum(*p) || *p == '\''))
			p++;
		while (*p && (*p >= 0x80 || ascii_alnum(*p) || *p == '\'')) {
			if (len + 1 < sizeof(w))
				w[len++] = (char)ascii_lower(*p);
			p++;
		}
		w[len] = '\0';
		if (len < WORD_MIN_BYTES || stop_word(w))
			continue;
		{
			size_t i = 0;
			while (i < ws->n && strcmp(ws->w[i], w) != 0)
				i++;
			if (i == ws->n)
				memcpy(ws->w[ws->n++], w, len + 1);
		}
	}
}

double extract_similarity(const char *a, const char *b)
{
	words *wa = malloc(sizeof(*wa)), *wb = malloc(sizeof(*wb));
	size_t common = 0;
	double sim = 0;

	if (wa && wb) {
		split_words(a, wa);
		split_words(b, wb);
		for (size_t i = 0; i < wa->n; i++)
			for (size_t j = 0; j < wb->n; j++)
				if (strcmp(wa->w[i], wb->w[j]) == 0) {
					common++;
					break;
				}
		if (wa->n && wb->n)
			sim = (double)common / (double)(wa->n + wb->n - common);
	}
	free(wa);
	free(wb);
	return sim;
}
