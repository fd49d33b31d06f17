/* SPDX-License-Identifier: MIT */
/*
 * The extractive summarizer (see summarize.h). Scoring, in the spirit of
 * SumBasic: a content word's weight is its share of all content words of
 * the folded text; a sentence scores the mean weight of its distinct
 * content words, times a bonus per name, number or date it holds (so facts
 * survive folding), times a bonus for lines of the previous summary (so old
 * facts are not crowded out by chatter). After a sentence is picked, the
 * weights of its words are damped, so the next pick says something else.
 */
#include "summarize/summarize.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SENTENCE_MAX_BYTES 600  /* longer sentences are cut (at a character) */
#define WORD_MIN_BYTES 2
#define ENTITY_BONUS 0.6        /* score factor per name/number/date ... */
#define ENTITY_CAP 4            /* ... counted up to this many */
#define PREVIOUS_BONUS 1.5      /* lines of the previous summary */
#define PICKED_DAMPING 0.3      /* weight factor of a picked sentence's words */
#define NO_WORDS_SCORE 1e-9     /* a sentence of stop words only */
#define LINE_SEPARATOR_TOKENS 1 /* the "\n" between lines */
#define MONTH_ABBREV_LEN 3

typedef struct unit {
	char *text;          /* the line as it will appear */
	size_t len;
	int64_t tokens;
	double bonus;
	uint64_t *words;     /* distinct content-word hashes */
	size_t n_words;
	double score;
	int picked;
	int dropped;         /* a duplicate, or too long for the budget */
} unit;

typedef struct word_slot {
	uint64_t key;        /* 0 = empty */
	double weight;
} word_slot;

typedef struct ex {
	const summarize_tokens *tok;
	unit *units;
	size_t n, cap;
	word_slot *words;
	size_t words_mask;
	size_t n_distinct;
	uint64_t total_words;
} ex;

static const char *const stop_words[] = {
	"a", "about", "after", "again", "all", "also", "am", "an", "and", "any", "are", "as", "at",
	"be", "been", "before", "but", "by", "can", "could", "did", "do", "does", "for", "from",
	"had", "has", "have", "he", "her", "here", "him", "his", "how", "i", "if", "in", "into",
	"is", "it", "its", "just", "me", "more", "my", "no", "not", "now", "of", "ok", "okay", "on",
	"or", "our", "out", "she", "so", "some", "than", "that", "the", "their", "them", "then",
	"there", "these", "they", "this", "to", "up", "us", "very", "was", "we", "were", "what",
	"when", "which", "who", "will", "with", "would", "yes", "you", "your", NULL,
};

static const char *const date_words[] = {
	"january", "february", "march", "april", "may", "june", "july", "august", "september",
	"october", "november", "december", "monday", "tuesday", "wednesday", "thursday", "friday",
	"saturday", "sunday", "today", "tomorrow", "yesterday", NULL,
};

#define HASH_OFFSET 0xcbf29ce484222325ull
#define HASH_PRIME 0x100000001b3ull

static uint64_t hash_lower(const char *s, size_t len)
{
	uint64_t h = HASH_OFFSET;
	for (size_t i = 0; i < len; i++) {
		h ^= (uint64_t)(unsigned char)tolower((unsigned char)s[i]);
		h *= HASH_PRIME;
	}
	return h ? h : 1;
}

static int word_in(const char *w, size_t len, const char *const *list, int prefix3)
{
	char low[16];
	if (len >= sizeof(low))
		return 0;
	for (size_t i = 0; i < len; i++)
		low[i] = (char)tolower((unsigned char)w[i]);
	low[len] = '\0';
	for (size_t i = 0; list[i]; i++) {
		if (strcmp(low, list[i]) == 0)
			return 1;
		if (prefix3 && len == MONTH_ABBREV_LEN && strncmp(low, list[i], MONTH_ABBREV_LEN) == 0)
			return 1;
	}
	return 0;
}

/* Word characters: ASCII letters, digits, and any non-ASCII byte (so
 * words of other scripts count as words). */
static int word_byte(unsigned char c)
{
	return isalnum(c) || c >= 0x80 || c == '_';
}

static word_slot *word_find(ex *x, uint64_t key)
{
	size_t i = (size_t)key & x->words_mask;
	while (x->words[i].key && x->words[i].key != key)
		i = (i + 1) & x->words_mask;
	return &x->words[i];
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Content words and entities of u (its text past skip bytes of prefix). */
static int32_t analyse(ex *x, unit *u, size_t skip)
{
	const char *s = u->text + skip;
	size_t len = u->len - skip, i = 0, n = 0, cap = 8;
	int entities = 0, first = 1;

	u->words = malloc(cap * sizeof(*u->words));
	if (!u->words)
		return MEMD_ENOMEM;
	while (i < len) {
		size_t j = i;
		int digits = 0, upper_first, all_upper = 1;
		if (!word_byte((unsigned char)s[i])) {
			i++;
			continue;
		}
		while (j < len && word_byte((unsigned char)s[j])) {
			if (isdigit((unsigned char)s[j]))
				digits = 1;
			if (islower((unsigned char)s[j]))
				all_upper = 0;
			j++;
		}
		upper_first = isupper((unsigned char)s[i]);
		if (digits)
			entities++;
		else if (word_in(s + i, j - i, date_words, 1))
			entities++;
		else if (upper_first && !first && !(j - i == 1 && s[i] == 'I'))
			entities++; /* a name (capitalised, not starting the sentence) */
		else if (upper_first && all_upper && j - i >= WORD_MIN_BYTES)
			entities++; /* an acronym */
		first = 0;
		if (j - i >= WORD_MIN_BYTES && !word_in(s + i, j - i, stop_words, 0)) {
			if (n == cap) {
				uint64_t *grown = realloc(u->words, 2 * cap * sizeof(*grown));
				if (!grown)
					return MEMD_ENOMEM;
				u->words = grown;
				cap *= 2;
			}
			u->words[n++] = hash_lower(s + i, j - i);
		}
		i = j;
	}
	qsort(u->words, n, sizeof(*u->words), cmp_u64);
	u->n_words = 0;
	for (size_t k = 0; k < n; k++)
		if (k == 0 || u->words[k] != u->words[k - 1])
			u->words[u->n_words++] = u->words[k];
	x->total_words += n;
	u->bonus *= 1.0 + ENTITY_BONUS * (entities < ENTITY_CAP ? entities : ENTITY_CAP);
	return 0;
}

/* Add one line: text[0..len) whitespace-collapsed, after prefix. */
static int32_t add_unit(ex *x, const char *prefix, const char *text, size_t len, double bonus)
{
	size_t plen = strlen(prefix), o = 0;
	unit *u;
	char *t;
	int space = 0;

	while (len && isspace((unsigned char)*text)) {
		text++;
		len--;
	}
	while (len && isspace((unsigned char)text[len - 1]))
		len--;
	if (!len)
		return 0;
	if (len > SENTENCE_MAX_BYTES) {
		len = SENTENCE_MAX_BYTES;
		while (len && ((unsigned char)text[len] & 0xC0) == 0x80)
			len--; /* do not cut a character */
	}
	t = malloc(plen + len + 1);
	if (!t)
		return MEMD_ENOMEM;
	memcpy(t, prefix, plen);
	o = plen;
	for (size_t i = 0; i < len; i++) {
		if (isspace((unsigned char)text[i])) {
			space = 1;
			continue;
		}
		if (space)
			t[o++] = ' ';
		space = 0;
		t[o++] = text[i];
	}
	t[o] = '\0';
	for (size_t k = 0; k < x->n; k++)
		if (x->units[k].len == o && memcmp(x->units[k].text, t, o) == 0) {
			free(t); /* said before */
			return 0;
		}
	if (x->n == x->cap) {
		size_t ncap = x->cap ? 2 * x->cap : 64;
		unit *grown = realloc(x->units, ncap * sizeof(*grown));
		if (!grown) {
			free(t);
			return MEMD_ENOMEM;
		}
		x->units = grown;
		x->cap = ncap;
	}
	u = &x->units[x->n++];
	memset(u, 0, sizeof(*u));
	u->text = t;
	u->len = o;
	u->bonus = bonus;
	u->tokens = x->tok->count(x->tok->userdata, t, o);
	return analyse(x, u, plen);
}

static const char *const abbreviations[] = {
	"dr", "mr", "mrs", "ms", "prof", "st", "jr", "sr", "vs", "etc", "e.g", "i.e", "no", "inc",
	"ltd", "co", "fig", "approx", "dept", "mt", "gen", "col", "capt", "sgt", "rev", NULL,
};

/* Nonzero if the word ending at s[i] (a '.') is an abbreviation such as
 * "Dr." or a single letter ("J."), which does not end a sentence. */
static int abbreviation_before(const char *s, size_t i)
{
	size_t start = i;
	while (start > 0 && (isalpha((unsigned char)s[start - 1]) || s[start - 1] == '.'))
		start--;
	if (i - start == 1 && isupper((unsigned char)s[start]))
		return 1;
	return i > start && word_in(s + start, i - start, abbreviations, 0);
}

static int is_terminator(const char *s, size_t i, size_t len, size_t *ret_after)
{
	static const char *const wide[] = { "\xE3\x80\x82", "\xEF\xBC\x81", "\xEF\xBC\x9F", NULL };
	char c = s[i];
	if (c == '.' && abbreviation_before(s, i))
		return 0;
	if (c == '.' || c == '!' || c == '?') {
		size_t j = i + 1;
		while (j < len && (s[j] == '.' || s[j] == '!' || s[j] == '?'))
			j++;
		if (j == len || isspace((unsigned char)s[j])) {
			*ret_after = j;
			return 1;
		}
		return 0;
	}
	for (size_t k = 0; wide[k]; k++)
		if (i + 3 <= len && memcmp(s + i, wide[k], 3) == 0) {
			*ret_after = i + 3;
			return 1;
		}
	return 0;
}

static int32_t add_sentences(ex *x, const char *prefix, const char *text)
{
	size_t len = strlen(text), start = 0, i = 0, after;
	int32_t r;
	while (i < len) {
		if (text[i] == '\n') {
			if ((r = add_unit(x, prefix, text + start, i - start, 1.0)) < 0)
				return r;
			start = ++i;
		} else if (is_terminator(text, i, len, &after)) {
			if ((r = add_unit(x, prefix, text + start, after - start, 1.0)) < 0)
				return r;
			start = i = after;
		} else {
			i++;
		}
	}
	return add_unit(x, prefix, text + start, len - start, 1.0);
}

static int32_t add_previous(ex *x, const char *prev)
{
	while (prev && *prev) {
		size_t len = strcspn(prev, "\n");
		int32_t r = add_unit(x, "", prev, len, PREVIOUS_BONUS);
		if (r < 0)
			return r;
		prev += len + (prev[len] == '\n');
	}
	return 0;
}

static int32_t build_weights(ex *x)
{
	size_t cap = 16, distinct = 0;
	for (size_t k = 0; k < x->n; k++)
		distinct += x->units[k].n_words;
	while (cap < 2 * distinct + 2)
		cap <<= 1;
	x->words = calloc(cap, sizeof(*x->words));
	if (!x->words)
		return MEMD_ENOMEM;
	x->words_mask = cap - 1;
	for (size_t k = 0; k < x->n; k++)
		for (size_t w = 0; w < x->units[k].n_words; w++) {
			word_slot *s = word_find(x, x->units[k].words[w]);
			s->key = x->units[k].words[w];
			s->weight += 1.0;
		}
	for (size_t i = 0; i <= x->words_mask; i++)
		if (x->words[i].key)
			x->words[i].weight /= (double)(x->total_words ? x->total_words : 1);
	return 0;
}

static void score(ex *x, unit *u)
{
	double sum = 0;
	for (size_t w = 0; w < u->n_words; w++)
		sum += word_find(x, u->words[w])->weight;
	u->score = (u->n_words ? sum / (double)u->n_words : NO_WORDS_SCORE) * u->bonus;
}

/* Selected lines in their original order, one per line. NULL on ENOMEM. */
static char *render(const ex *x, size_t *ret_len)
{
	size_t len = 0, o = 0;
	char *s;
	for (size_t k = 0; k < x->n; k++)
		if (x->units[k].picked)
			len += x->units[k].len + 1;
	s = malloc(len + 1);
	if (!s)
		return NULL;
	for (size_t k = 0; k < x->n; k++)
		if (x->units[k].picked) {
			if (o)
				s[o++] = '\n';
			memcpy(s + o, x->units[k].text, x->units[k].len);
			o += x->units[k].len;
		}
	s[o] = '\0';
	*ret_len = o;
	return s;
}

static void ex_clear(ex *x)
{
	for (size_t k = 0; k < x->n; k++) {
		free(x->units[k].text);
		free(x->units[k].words);
	}
	free(x->units);
	free(x->words);
}

static int32_t select_and_emit(ex *x, int64_t target, const memd_text_sink *out, memd_error *err)
{
	int64_t remaining = target;
	int any = 0;
	char *text;
	size_t len;
	int32_t r;

	for (size_t k = 0; k < x->n; k++) {
		x->units[k].dropped = x->units[k].tokens > target;
		score(x, &x->units[k]);
	}
	for (;;) {
		unit *best = NULL;
		int64_t sep = any ? LINE_SEPARATOR_TOKENS : 0;
		for (size_t k = 0; k < x->n; k++) {
			unit *u = &x->units[k];
			if (u->picked || u->dropped || u->tokens + sep > remaining)
				continue;
			if (!best || u->score > best->score)
				best = u;
		}
		if (!best)
			break;
		best->picked = 1;
		remaining -= best->tokens + sep;
		any = 1;
		for (size_t w = 0; w < best->n_words; w++)
			word_find(x, best->words[w])->weight *= PICKED_DAMPING;
		for (size_t k = 0; k < x->n; k++)
			if (!x->units[k].picked)
				score(x, &x->units[k]);
	}
	for (;;) {
		unit *worst = NULL;
		if (!(text = render(x, &len)))
			return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
		if (x->tok->count(x->tok->userdata, text, len) <= target)
			break;
		/* Joining changed the count: drop the least informative line. */
		for (size_t k = 0; k < x->n; k++)
			if (x->units[k].picked && (!worst || x->units[k].score < worst->score))
				worst = &x->units[k];
		free(text);
		worst->picked = 0;
	}
	if (len == 0 && x->n) {
		/* Every sentence is over the budget: the best one, clipped. */
		unit *best = NULL;
		free(text);
		for (size_t k = 0; k < x->n; k++)
			if (!best || x->units[k].score > best->score)
				best = &x->units[k];
		len = summarize_clip(x->tok, best->text, best->len, target);
		if (!(text = strndup(best->text, len)))
			return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	r = out->text(out->userdata, text, len);
	free(text);
	if (r < 0)
		return memd_error_set(err, r, 0, "summary sink refused the summary");
	return 0;
}

int32_t summarize_extractive(const summarize_tokens *tok, const char *previous,
			     const memd_event *const *events, uint32_t n_events,
			     int64_t target_tokens, const memd_text_sink *out, memd_error *err)
{
	ex x = { .tok = tok };
	int32_t r;

	if (target_tokens < 1)
		return memd_error_set(err, MEMD_EINVAL, 0, "summary budget must be at least 1 token");
	if ((r = add_previous(&x, previous)) < 0)
		goto fail;
	for (uint32_t i = 0; i < n_events; i++) {
		const memd_event *e = events[i];
		char prefix[64];
		if (!e->text || (e->role && strcmp(e->role, "summary") == 0))
			continue;
		snprintf(prefix, sizeof(prefix), "%.40s: ", e->role ? e->role : "event");
		if ((r = add_sentences(&x, prefix, e->text)) < 0)
			goto fail;
	}
	if ((r = build_weights(&x)) < 0)
		goto fail;
	r = select_and_emit(&x, target_tokens, out, err);
	ex_clear(&x);
	return r;
fail:
	ex_clear(&x);
	return memd_error_set(err, r, 0, "out of memory");
}

/* ---- clipping ------------------------------------------------------------ */

static size_t char_start(const char *s, size_t i)
{
	while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80)
		i--;
	return i;
}

size_t summarize_clip(const summarize_tokens *tok, const char *text, size_t len,
		      int64_t target_tokens)
{
	size_t lo = 0, hi = len, boundary = 0;

	if (tok->count(tok->userdata, text, len) <= target_tokens)
		return len;
	/* Largest prefix that fits, by bisection (a prefix's count grows with
	 * its length, up to a token merging across the cut: checked below). */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (tok->count(tok->userdata, text, mid) <= target_tokens)
			lo = mid;
		else
			hi = mid;
	}
	lo = char_start(text, lo);
	while (lo > 0 && tok->count(tok->userdata, text, lo) > target_tokens)
		lo = char_start(text, lo - 1);
	/* Prefer to end at a line or sentence end in the second half. */
	for (size_t i = lo; i > lo / 2; i--) {
		char c = text[i - 1];
		if (c == '\n' || ((c == '.' || c == '!' || c == '?') && (i == len || isspace((unsigned char)text[i])))) {
			boundary = c == '\n' ? i - 1 : i;
			break;
		}
	}
	return boundary ? boundary : lo;
}
