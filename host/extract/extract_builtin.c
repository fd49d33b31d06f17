/* SPDX-License-Identifier: MIT */
/*
 * The built-in extractor (see extract.h): a deterministic baseline that
 * needs no model. It reads the user's messages sentence by sentence, and
 * a sentence clause by clause (a clause of the user's own starts at "and
 * I", "and my", "but I", "but my"), and knows a few phrasings (the table
 * `rules`); anything else is not a memory to it. A sentence may start with a little filler ("oh,",
 * "btw", "please", "also", ...), which is skipped.
 *
 * A batch is read in order and its facts collapsed first: of several
 * facts of the same topic (or, without a topic, of the same text) the
 * last one stands, with the seqs of every event that said it. Then each
 * fact is consolidated against the existing memories nearest it:
 *  - with a topic: the memory of the same topic is updated when its text
 *    differs, left alone (none) when equal; else the fact is added;
 *  - without a topic: none when a memory says the same, else added;
 *  - "forget that X": the memory of X's topic when X has one, else the
 *    memory sharing most words with X (at least FORGET_MIN_SIMILARITY of
 *    them) is deleted; nothing when none is close.
 * A memory is changed at most once per run (the first decision wins).
 */
#include "extract/extract.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A forgotten fact deletes the memory sharing at least this share of its
 * words (extract_similarity); below it nothing is close enough. */
#define FORGET_MIN_SIMILARITY 0.34
/* Longest subject of "my X is Y", in words: longer is not a fact about
 * the user's X but a sentence that happens to start with "my". */
#define SUBJECT_MAX_WORDS 4
/* Longest sentence looked at, in bytes. */
#define SENTENCE_MAX 2048

/* What a rule makes of a sentence. */
typedef struct fact {
	char *text;
	const char *kind;
	char topic[EXTRACT_TAG_MAX]; /* normalised; "" = none */
	char *entity;                /* NULL = none */
	int forget;
	int64_t *seqs;
	size_t n_seqs;
} fact;

typedef struct facts {
	fact *v;
	size_t n;
} facts;

static void fact_clear(fact *f)
{
	free(f->text);
	free(f->entity);
	free(f->seqs);
	memset(f, 0, sizeof(*f));
}

static void facts_clear(facts *fs)
{
	for (size_t i = 0; i < fs->n; i++)
		fact_clear(&fs->v[i]);
	free(fs->v);
	memset(fs, 0, sizeof(*fs));
}

/* s[0..len) without leading and trailing spaces and trailing punctuation. */
static void trim(const char **s, size_t *len)
{
	while (*len && isspace((unsigned char)**s)) {
		(*s)++;
		(*len)--;
	}
	while (*len && (isspace((unsigned char)(*s)[*len - 1]) || strchr(".!?,;:", (*s)[*len - 1])))
		(*len)--;
}

/* If s starts with word (ASCII case-insensitive) followed by a space,
 * a comma or the end, the rest after it (spaces and one comma skipped);
 * else NULL. */
static const char *after_word(const char *s, const char *word)
{
	size_t n = strlen(word);
	if (strncasecmp(s, word, n) != 0)
		return NULL;
	if (s[n] && s[n] != ' ' && s[n] != ',')
		return NULL;
	s += n;
	while (*s == ' ' || *s == ',')
		s++;
	return s;
}

/* s with leading filler words skipped. */
static const char *skip_filler(const char *s)
{
	static const char *const filler[] = { "oh", "ok", "okay", "so", "and", "also", "btw",
					      "by the way", "actually", "please", "hey", "well",
					      "just", "hi", "hello", NULL };
	for (int again = 1; again;) {
		again = 0;
		for (size_t i = 0; filler[i]; i++) {
			const char *r = after_word(s, filler[i]);
			if (r && *r) {
				s = r;
				again = 1;
			}
		}
	}
	return s;
}

static int count_words(const char *s, size_t len)
{
	int n = 0, in = 0;
	for (size_t i = 0; i < len; i++) {
		int w = !isspace((unsigned char)s[i]);
		n += w && !in;
		in = w;
	}
	return n;
}

/* The fact's text: head, then a[0..alen), then mid and b[0..blen) when
 * mid is set, as a new string (at most EXTRACT_TEXT_MAX - 1 bytes); NULL
 * on ENOMEM. */
static char *make_text(const char *head, const char *a, size_t alen, const char *mid,
		       const char *b, size_t blen)
{
	size_t hl = strlen(head), ml = mid ? strlen(mid) : 0, len = hl + alen + ml + (mid ? blen : 0);
	char *s = malloc(len + 1);
	if (!s)
		return NULL;
	memcpy(s, head, hl);
	memcpy(s + hl, a, alen);
	if (mid) {
		memcpy(s + hl + alen, mid, ml);
		memcpy(s + hl + alen + ml, b, blen);
	}
	s[len] = '\0';
	if (len >= EXTRACT_TEXT_MAX)
		s[EXTRACT_TEXT_MAX - 1] = '\0';
	return s;
}

/* One phrasing: a sentence starting with prefix (after filler) is a fact
 * of kind, its text head and the rest; topic: fixed (topic), the rest
 * itself prefixed (topic_of_rest), or its last word (topic_last_word). */
typedef struct rule {
	const char *prefix;
	const char *kind;
	const char *head;
	const char *topic;       /* a fixed topic, or the prefix of one */
	int topic_of_rest;       /* topic = topic + rest */
	int topic_last_word;     /* topic = topic + the rest's last word */
	int entity;              /* the rest is an entity */
} rule;

static const rule rules[] = {
	{ "my name is", "fact", "User's name is ", "name", 0, 0, 1 },
	{ "call me", "preference", "User wants to be called ", "name", 0, 0, 1 },
	{ "i am allergic to", "fact", "User is allergic to ", "allergy: ", 1, 0, 1 },
	{ "i'm allergic to", "fact", "User is allergic to ", "allergy: ", 1, 0, 1 },
	{ "im allergic to", "fact", "User is allergic to ", "allergy: ", 1, 0, 1 },
	{ "i prefer", "preference", "User prefers ", "preference: ", 0, 1, 0 },
	{ "i live in", "fact", "User lives in ", "home", 0, 0, 1 },
	{ "i work at", "fact", "User works at ", "employer", 0, 0, 1 },
	{ "i work for", "fact", "User works at ", "employer", 0, 0, 1 },
	{ "i work as", "fact", "User works as ", "occupation", 0, 0, 0 },
};

/* Words that end what "I prefer X" prefers (the rest compares). */
static size_t preference_end(const char *s, size_t len)
{
	static const char *const ends[] = { " over ", " to ", " rather than ", " instead of ",
					    " when ", " because ", " if ", NULL };
	size_t end = len;
	for (size_t i = 0; ends[i]; i++) {
		size_t n = strlen(ends[i]);
		for (size_t j = 0; j + n <= end; j++)
			if (strncasecmp(s + j, ends[i], n) == 0) {
				end = j;
				break;
			}
	}
	return end;
}

static int set_topic(fact *f, const char *prefix, const char *s, size_t len)
{
	char raw[EXTRACT_TAG_MAX * 2];
	snprintf(raw, sizeof(raw), "%s%.*s", prefix, (int)len, s);
	return extract_topic_normalise(raw, f->topic, sizeof(f->topic)) > 0;
}

/* The fact of one sentence s (NUL-terminated) into *ret: 1 if it is one,
 * 0 if not, MEMD_ENOMEM. */
static int32_t parse_sentence(const char *s, fact *ret)
{
	const char *r;
	size_t len;

	memset(ret, 0, sizeof(*ret));
	s = skip_filler(s);
	if ((r = after_word(s, "remember that"))) {
		int32_t inner;
		len = strlen(r);
		trim(&r, &len);
		if (!len)
			return 0;
		{
			char sub[SENTENCE_MAX];
			snprintf(sub, sizeof(sub), "%.*s", (int)len, r);
			if ((inner = parse_sentence(sub, ret)) != 0)
				return inner;
		}
		ret->kind = "fact";
		if (!(ret->text = make_text("", r, len, NULL, NULL, 0)))
			return MEMD_ENOMEM;
		ret->text[0] = (char)toupper((unsigned char)ret->text[0]);
		return 1;
	}
	if ((r = after_word(s, "forget that")) || (r = after_word(s, "forget about"))) {
		int32_t inner;
		len = strlen(r);
		trim(&r, &len);
		if (!len)
			return 0;
		{
			char sub[SENTENCE_MAX];
			snprintf(sub, sizeof(sub), "%.*s", (int)len, r);
			inner = parse_sentence(sub, ret);
		}
		if (inner < 0)
			return inner;
		if (!inner && !(ret->text = make_text("", r, len, NULL, NULL, 0)))
			return MEMD_ENOMEM;
		ret->kind = "fact";
		ret->forget = 1;
		return 1;
	}
	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++) {
		const rule *ru = &rules[i];
		if (!(r = after_word(s, ru->prefix)))
			continue;
		len = strlen(r);
		trim(&r, &len);
		if (!len)
			return 0;
		ret->kind = ru->kind;
		if (!(ret->text = make_text(ru->head, r, len, NULL, NULL, 0)))
			return MEMD_ENOMEM;
		if (ru->topic_of_rest)
			set_topic(ret, ru->topic, r, len);
		else if (ru->topic_last_word) {
			size_t end = preference_end(r, len), start;
			const char *w = r;
			size_t wl = end;
			trim(&w, &wl);
			start = wl;
			while (start && !isspace((unsigned char)w[start - 1]))
				start--;
			set_topic(ret, ru->topic, w + start, wl - start);
		} else {
			set_topic(ret, ru->topic, "", 0);
		}
		if (ru->entity && !(ret->entity = strndup(r, len < EXTRACT_TAG_MAX - 1 ? len
										: EXTRACT_TAG_MAX - 1)))
			return MEMD_ENOMEM;
		return 1;
	}
	/* "my X is Y", "my X are Y" */
	if ((r = after_word(s, "my"))) {
		const char *verb = NULL;
		size_t vlen = 0;
		for (const char *p = r; *p; p++) {
			if (strncasecmp(p, " is ", 4) == 0) {
				verb = p, vlen = 4;
				break;
			}
			if (strncasecmp(p, " are ", 5) == 0) {
				verb = p, vlen = 5;
				break;
			}
		}
		if (verb) {
			const char *subj = r, *obj = verb + vlen;
			size_t slen = (size_t)(verb - r), olen = strlen(obj);
			trim(&subj, &slen);
			trim(&obj, &olen);
			if (!slen || !olen || count_words(subj, slen) > SUBJECT_MAX_WORDS)
				return 0;
			ret->kind = "fact";
			if (!(ret->text = make_text("User's ", subj, slen, vlen == 4 ? " is " : " are ",
						    obj, olen)))
				return MEMD_ENOMEM;
			if (!set_topic(ret, "", subj, slen))
				return fact_clear(ret), 0;
			return 1;
		}
	}
	return 0;
}

/* Two memory texts say the same: equal but for ASCII case, spaces and
 * trailing punctuation. */
static int same_text(const char *a, const char *b)
{
	char na[EXTRACT_TAG_MAX * 4], nb[EXTRACT_TAG_MAX * 4];
	if (strlen(a) >= sizeof(na) || strlen(b) >= sizeof(nb))
		return strcasecmp(a, b) == 0;
	extract_topic_normalise(a, na, sizeof(na));
	extract_topic_normalise(b, nb, sizeof(nb));
	return strcmp(na, nb) == 0;
}

static int add_seq(fact *f, int64_t seq)
{
	int64_t *grown;
	for (size_t i = 0; i < f->n_seqs; i++)
		if (f->seqs[i] == seq)
			return 0;
	if (!(grown = realloc(f->seqs, (f->n_seqs + 1) * sizeof(*grown))))
		return MEMD_ENOMEM;
	f->seqs = grown;
	f->seqs[f->n_seqs++] = seq;
	return 0;
}

/* Add f (taken) said at seq to fs, collapsing it with an earlier fact of
 * the same topic (or text) and the same intent. */
static int32_t collect(facts *fs, fact *f, int64_t seq)
{
	fact *grown;
	for (size_t i = 0; i < fs->n; i++) {
		fact *o = &fs->v[i];
		int same_key = f->topic[0] ? strcmp(o->topic, f->topic) == 0
					   : !o->topic[0] && same_text(o->text, f->text);
		if (!same_key)
			continue;
		if (o->forget == f->forget && same_text(o->text, f->text)) {
			fact_clear(f);
			return add_seq(o, seq);
		}
		/* A newer statement on the topic: it stands alone. */
		fact_clear(o);
		memmove(o, o + 1, (fs->n - i - 1) * sizeof(*o));
		fs->n--;
		break;
	}
	if (add_seq(f, seq) < 0)
		return fact_clear(f), MEMD_ENOMEM;
	if (!(grown = realloc(fs->v, (fs->n + 1) * sizeof(*grown))))
		return fact_clear(f), MEMD_ENOMEM;
	fs->v = grown;
	fs->v[fs->n++] = *f;
	memset(f, 0, sizeof(*f));
	return 0;
}

/* Where the next clause of s[0..len) starts after its first, or len: a
 * new clause of the user's own starts at "and I ", "and I'm ", "and my "
 * or "but I " after a space ("my name is Bob and I live in Oslo" is two
 * facts). *ret_skip: the bytes of the joining word and its space. */
static size_t clause_end(const char *s, size_t len, size_t *ret_skip)
{
	static const char *const joins[] = { " and i ", " and i'm ", " and my ", " but i ",
					     " but my ", NULL };
	*ret_skip = 0;
	for (size_t i = 0; i < len; i++)
		for (size_t j = 0; joins[j]; j++) {
			size_t n = strlen(joins[j]);
			/* the join's word, not the clause's first word, is skipped */
			size_t word = strchr(joins[j] + 1, ' ') - joins[j] + 1;
			if (i + n <= len && strncasecmp(s + i, joins[j], n) == 0) {
				*ret_skip = word;
				return i;
			}
		}
	return len;
}

/* One clause s[0..len) (trimmed here): its fact, if any, collected. */
static int32_t read_clause(facts *fs, const char *p, size_t len, int64_t seq)
{
	char s[SENTENCE_MAX];
	const char *t = p;
	fact f;
	int32_t r;

	trim(&t, &len);
	if (!len || len >= sizeof(s))
		return 0;
	memcpy(s, t, len);
	s[len] = '\0';
	if ((r = parse_sentence(s, &f)) < 0)
		return fact_clear(&f), r;
	return r > 0 ? collect(fs, &f, seq) : 0;
}

/* The facts of one message's text, sentence by sentence and clause by
 * clause, each collected. */
static int32_t read_message(facts *fs, const char *text, int64_t seq)
{
	const char *p = text;
	while (*p) {
		size_t len = strcspn(p, ".!?;\n"), at = 0;
		int32_t r;

		while (at < len) {
			size_t skip, end = at + clause_end(p + at, len - at, &skip);
			if ((r = read_clause(fs, p + at, end - at, seq)) < 0)
				return r;
			at = end + skip;
			if (skip == 0)
				break;
		}
		p += len;
		if (*p)
			p++;
	}
	return 0;
}

/* ---- decisions ------------------------------------------------------------ */

static int touched(const extract_result *res, const char *id)
{
	for (size_t i = 0; i < res->n; i++)
		if (res->v[i].memory_id && strcmp(res->v[i].memory_id, id) == 0)
			return 1;
	return 0;
}

static int has_topic(const extract_memory *m, const char *topic)
{
	char t[EXTRACT_TAG_MAX];
	for (size_t i = 0; i < m->n_topics; i++) {
		extract_topic_normalise(m->topics[i], t, sizeof(t));
		if (strcmp(t, topic) == 0)
			return 1;
	}
	return 0;
}

/* Append decision op on f (its strings copied) about memory m (may be
 * NULL) to res. */
static int32_t decide(extract_result *res, uint32_t op, const fact *f, const extract_memory *m)
{
	extract_decision d = { .op = op }, *grown;

	if (m && (!(d.memory_id = strdup(m->id))))
		goto nomem;
	d.memory_version = m ? m->version : 0;
	if (op == EXTRACT_ADD || op == EXTRACT_UPDATE) {
		if (!(d.text = strdup(f->text)) || !(d.kind = strdup(f->kind)))
			goto nomem;
		if (f->topic[0]) {
			if (!(d.topics = calloc(1, sizeof(*d.topics))) ||
			    !(d.topics[0] = strdup(f->topic)))
				goto nomem;
			d.n_topics = 1;
		}
		if (f->entity) {
			if (!(d.entities = calloc(1, sizeof(*d.entities))) ||
			    !(d.entities[0] = strdup(f->entity)))
				goto nomem;
			d.n_entities = 1;
		}
	}
	if (f->n_seqs) {
		if (!(d.seqs = malloc(f->n_seqs * sizeof(*d.seqs))))
			goto nomem;
		memcpy(d.seqs, f->seqs, f->n_seqs * sizeof(*d.seqs));
		d.n_seqs = f->n_seqs;
	}
	if (!(grown = realloc(res->v, (res->n + 1) * sizeof(*grown))))
		goto nomem;
	res->v = grown;
	res->v[res->n++] = d;
	return 0;
nomem:
	/* topics and entities, when allocated, have one slot (calloc'd). */
	free(d.memory_id);
	free(d.text);
	free(d.kind);
	if (d.topics)
		free(d.topics[0]);
	free(d.topics);
	if (d.entities)
		free(d.entities[0]);
	free(d.entities);
	free(d.seqs);
	return MEMD_ENOMEM;
}

static int sorted_seqs(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* The decision for one fact against its nearest memories. */
static int32_t consolidate(const extract_batch *b, const extract_nearest *nn, const fact *f,
			   extract_result *res, memd_error *err)
{
	extract_memories near = { 0 };
	const char *topics[1] = { f->topic };
	const extract_memory *hit = NULL;
	int32_t r;

	r = nn->find(nn->userdata, f->text, topics, f->topic[0] ? 1 : 0, b->neighbours, &near, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < near.n && !hit; i++) {
		const extract_memory *m = &near.v[i];
		if (touched(res, m->id))
			continue;
		if (f->topic[0] ? has_topic(m, f->topic) : same_text(m->text, f->text))
			hit = m;
	}
	if (f->forget && !hit && !f->topic[0]) {
		double best = FORGET_MIN_SIMILARITY;
		for (size_t i = 0; i < near.n; i++) {
			double s = extract_similarity(near.v[i].text, f->text);
			if (s >= best && !touched(res, near.v[i].id)) {
				best = s;
				hit = &near.v[i];
			}
		}
	}
	if (f->forget)
		r = hit ? decide(res, EXTRACT_DELETE, f, hit) : 0;
	else if (!hit)
		r = decide(res, EXTRACT_ADD, f, NULL);
	else if (same_text(hit->text, f->text))
		r = decide(res, EXTRACT_NONE, f, hit);
	else
		r = decide(res, EXTRACT_UPDATE, f, hit);
	extract_memories_clear(&near);
	if (r == MEMD_ENOMEM)
		memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	return r;
}

int32_t extract_builtin_run(const extract_batch *b, const extract_nearest *nn,
			    extract_result *ret, memd_error *err)
{
	facts fs = { 0 };
	extract_result res = { 0 };
	int32_t r = 0;

	for (size_t i = 0; i < b->n_events && r >= 0; i++) {
		const extract_event *e = &b->events[i];
		if (e->role && strcmp(e->role, "user") == 0 && e->text)
			r = read_message(&fs, e->text, e->seq);
	}
	if (r < 0) {
		facts_clear(&fs);
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	for (size_t i = 0; i < fs.n && r >= 0; i++) {
		qsort(fs.v[i].seqs, fs.v[i].n_seqs, sizeof(int64_t), sorted_seqs);
		r = consolidate(b, nn, &fs.v[i], &res, err);
	}
	facts_clear(&fs);
	if (r < 0) {
		extract_result_clear(&res);
		return r;
	}
	*ret = res;
	return 0;
}
