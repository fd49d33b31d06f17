/* SPDX-License-Identifier: MIT */
#include "porter.h"

#include <string.h>

/* b[0..k] is the word being stemmed; j marks the end of the stem a
 * matched suffix leaves (set by ends()). Indexes are signed because the
 * algorithm looks at j = -1 for a suffix that is the whole word. */
typedef struct stemmer {
	char *b;
	long k;
	long j;
} stemmer;

static int cons(const stemmer *z, long i)
{
	switch (z->b[i]) {
	case 'a':
	case 'e':
	case 'i':
	case 'o':
	case 'u':
		return 0;
	case 'y':
		return i == 0 ? 1 : !cons(z, i - 1);
	default:
		return 1;
	}
}

/* The number of consonant-vowel sequences in b[0..j]: [C](VC)^m[V]. */
static int measure(const stemmer *z)
{
	int n = 0;
	long i = 0;

	for (;;) {
		if (i > z->j)
			return n;
		if (!cons(z, i))
			break;
		i++;
	}
	i++;
	for (;;) {
		for (;;) {
			if (i > z->j)
				return n;
			if (cons(z, i))
				break;
			i++;
		}
		i++;
		n++;
		for (;;) {
			if (i > z->j)
				return n;
			if (!cons(z, i))
				break;
			i++;
		}
		i++;
	}
}

static int vowel_in_stem(const stemmer *z)
{
	for (long i = 0; i <= z->j; i++)
		if (!cons(z, i))
			return 1;
	return 0;
}

static int double_cons(const stemmer *z, long j)
{
	return j >= 1 && z->b[j] == z->b[j - 1] && cons(z, j);
}

/* consonant-vowel-consonant ending at i, the last not w, x or y. */
static int cvc(const stemmer *z, long i)
{
	if (i < 2 || !cons(z, i) || cons(z, i - 1) || !cons(z, i - 2))
		return 0;
	return z->b[i] != 'w' && z->b[i] != 'x' && z->b[i] != 'y';
}

static int ends(stemmer *z, const char *s)
{
	long len = (long)strlen(s);
	if (len > z->k + 1 || s[len - 1] != z->b[z->k])
		return 0;
	if (memcmp(z->b + z->k - len + 1, s, (size_t)len) != 0)
		return 0;
	z->j = z->k - len;
	return 1;
}

static void set_to(stemmer *z, const char *s)
{
	long len = (long)strlen(s);
	memcpy(z->b + z->j + 1, s, (size_t)len);
	z->k = z->j + len;
}

static void replace_if_m(stemmer *z, const char *s)
{
	if (measure(z) > 0)
		set_to(z, s);
}

/* Plurals and -ed or -ing. */
static void step1ab(stemmer *z)
{
	if (z->b[z->k] == 's') {
		if (ends(z, "sses"))
			z->k -= 2;
		else if (ends(z, "ies"))
			set_to(z, "i");
		else if (z->b[z->k - 1] != 's')
			z->k--;
	}
	if (ends(z, "eed")) {
		if (measure(z) > 0)
			z->k--;
	} else if ((ends(z, "ed") || ends(z, "ing")) && vowel_in_stem(z)) {
		z->k = z->j;
		if (ends(z, "at")) {
			set_to(z, "ate");
		} else if (ends(z, "bl")) {
			set_to(z, "ble");
		} else if (ends(z, "iz")) {
			set_to(z, "ize");
		} else if (double_cons(z, z->k)) {
			char ch = z->b[z->k];
			z->k--;
			if (ch == 'l' || ch == 's' || ch == 'z')
				z->k++;
		} else if (measure(z) == 1 && cvc(z, z->k)) { /* j == k here */
			set_to(z, "e");
		}
	}
}

/* Terminal y to i when there is another vowel in the stem. */
static void step1c(stemmer *z)
{
	if (ends(z, "y") && vowel_in_stem(z))
		z->b[z->k] = 'i';
}

typedef struct rule {
	const char *from, *to;
} rule;

static int apply_rules(stemmer *z, const rule *rules)
{
	for (; rules->from; rules++)
		if (ends(z, rules->from)) {
			replace_if_m(z, rules->to);
			return 1;
		}
	return 0;
}

/* Double suffixes to single ones. */
static void step2(stemmer *z)
{
	static const rule a[] = { { "ational", "ate" }, { "tional", "tion" }, { NULL, NULL } };
	static const rule c[] = { { "enci", "ence" }, { "anci", "ance" }, { NULL, NULL } };
	static const rule e[] = { { "izer", "ize" }, { NULL, NULL } };
	static const rule l[] = { { "bli", "ble" }, { "alli", "al" }, { "entli", "ent" },
				  { "eli", "e" }, { "ousli", "ous" }, { NULL, NULL } };
	static const rule o[] = { { "ization", "ize" }, { "ation", "ate" }, { "ator", "ate" },
				  { NULL, NULL } };
	static const rule s[] = { { "alism", "al" }, { "iveness", "ive" }, { "fulness", "ful" },
				  { "ousness", "ous" }, { NULL, NULL } };
	static const rule t[] = { { "aliti", "al" }, { "iviti", "ive" }, { "biliti", "ble" },
				  { NULL, NULL } };
	static const rule g[] = { { "logi", "log" }, { NULL, NULL } };

	if (z->k < 1)
		return;
	switch (z->b[z->k - 1]) {
	case 'a': apply_rules(z, a); break;
	case 'c': apply_rules(z, c); break;
	case 'e': apply_rules(z, e); break;
	case 'l': apply_rules(z, l); break;
	case 'o': apply_rules(z, o); break;
	case 's': apply_rules(z, s); break;
	case 't': apply_rules(z, t); break;
	case 'g': apply_rules(z, g); break;
	default: break;
	}
}

/* -ic-, -full, -ness etc. */
static void step3(stemmer *z)
{
	static const rule e[] = { { "icate", "ic" }, { "ative", "" }, { "alize", "al" },
				  { NULL, NULL } };
	static const rule i[] = { { "iciti", "ic" }, { NULL, NULL } };
	static const rule l[] = { { "ical", "ic" }, { "ful", "" }, { NULL, NULL } };
	static const rule s[] = { { "ness", "" }, { NULL, NULL } };

	switch (z->b[z->k]) {
	case 'e': apply_rules(z, e); break;
	case 'i': apply_rules(z, i); break;
	case 'l': apply_rules(z, l); break;
	case 's': apply_rules(z, s); break;
	default: break;
	}
}

static int ends_any(stemmer *z, const char *const *suffixes)
{
	for (; *suffixes; suffixes++)
		if (ends(z, *suffixes))
			return 1;
	return 0;
}

/* -ant, -ence etc., in context <c>vcvc<v>. */
static void step4(stemmer *z)
{
	static const char *const a[] = { "al", NULL };
	static const char *const c[] = { "ance", "ence", NULL };
	static const char *const e[] = { "er", NULL };
	static const char *const i[] = { "ic", NULL };
	static const char *const l[] = { "able", "ible", NULL };
	static const char *const n[] = { "ant", "ement", "ment", "ent", NULL };
	static const char *const s[] = { "ism", NULL };
	static const char *const t[] = { "ate", "iti", NULL };
	static const char *const u[] = { "ous", NULL };
	static const char *const v[] = { "ive", NULL };
	static const char *const zz[] = { "ize", NULL };
	const char *const *list = NULL;

	if (z->k < 1)
		return;
	switch (z->b[z->k - 1]) {
	case 'a': list = a; break;
	case 'c': list = c; break;
	case 'e': list = e; break;
	case 'i': list = i; break;
	case 'l': list = l; break;
	case 'n': list = n; break;
	case 'o':
		if (ends(z, "ion") && z->j >= 0 && (z->b[z->j] == 's' || z->b[z->j] == 't'))
			break;
		if (ends(z, "ou"))
			break;
		return;
	case 's': list = s; break;
	case 't': list = t; break;
	case 'u': list = u; break;
	case 'v': list = v; break;
	case 'z': list = zz; break;
	default: return;
	}
	if (list && !ends_any(z, list))
		return;
	if (measure(z) > 1)
		z->k = z->j;
}

/* Final -e, and -ll to -l. */
static void step5(stemmer *z)
{
	z->j = z->k;
	if (z->b[z->k] == 'e') {
		int a = measure(z);
		if (a > 1 || (a == 1 && !cvc(z, z->k - 1)))
			z->k--;
	}
	/* measure() still looks at b[0..j] with j the length before -e. */
	if (z->b[z->k] == 'l' && double_cons(z, z->k) && measure(z) > 1)
		z->k--;
}

size_t porter_stem(char *word, size_t len)
{
	stemmer z = { word, (long)len - 1, 0 };

	if (len <= 2)
		return len;
	step1ab(&z);
	if (z.k > 0) {
		step1c(&z);
		step2(&z);
		step3(&z);
		step4(&z);
		step5(&z);
	}
	return (size_t)z.k + 1;
}
