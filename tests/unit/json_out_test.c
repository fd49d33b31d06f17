/* SPDX-License-Identifier: MIT */
/*
 * json_out (host/json/json_out.h) against the jansson path it replaces: for
 * randomized and hostile events and sessions its output must parse and be
 * json_equal to ej_event / ej_session (byte for byte when the stored JSON
 * texts are jansson's own compact dumps), its envelopes equal to the
 * json_pack ones the facade built before, its validator must accept
 * exactly what json_loads accepts, and ej_format_time must equal gmtime_r
 * with snprintf. Randomness is a fixed-seed xorshift: failures reproduce.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json/event_json.h"
#include "json/json_out.h"
#include "json/lane_json.h"
#include "service/service.h"
#include "plugins/store.h"
#include "test_util.h"

#define SEED 0x9E3779B97F4A7C15ULL
#define LOAD_FLAGS (JSON_DECODE_ANY | JSON_ALLOW_NUL)
#define DUMP_FLAGS (JSON_COMPACT | JSON_ENCODE_ANY)
#define TIME_CASES 200000
#define VALIDATOR_CASES 6000
#define MUTATIONS 4
#define NUMBER_CASES 40000
#define EVENT_CASES 4000
#define SESSION_CASES 2000
#define ENVELOPE_CASES 600
#define VALUE_DEPTH 4
#define TEXT_PIECES 24
#define FACADE_EVENTS 12

/* ---- test-side helpers --------------------------------------------------- */

typedef struct rng {
	uint64_t s;
} rng;

static uint64_t rnd(rng *r)
{
	uint64_t x = r->s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return r->s = x;
}

static uint64_t below(rng *r, uint64_t n)
{
	return rnd(r) % n;
}

typedef struct sbuf {
	char *p;
	size_t n, cap;
} sbuf;

static void sb_put(sbuf *b, const void *s, size_t n)
{
	if (b->n + n + 1 > b->cap) {
		b->cap = (b->n + n + 1) * 2;
		b->p = realloc(b->p, b->cap);
		cr_assert_not_null(b->p);
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = '\0';
}

static void sb_putc(sbuf *b, char c)
{
	sb_put(b, &c, 1);
}

static void sb_puts(sbuf *b, const char *s)
{
	sb_put(b, s, strlen(s));
}

static void sb_cp(sbuf *b, uint32_t cp)
{
	char u[4];
	if (cp < 0x80) {
		sb_putc(b, (char)cp);
	} else if (cp < 0x800) {
		u[0] = (char)(0xC0 | cp >> 6);
		u[1] = (char)(0x80 | (cp & 0x3F));
		sb_put(b, u, 2);
	} else if (cp < 0x10000) {
		u[0] = (char)(0xE0 | cp >> 12);
		u[1] = (char)(0x80 | (cp >> 6 & 0x3F));
		u[2] = (char)(0x80 | (cp & 0x3F));
		sb_put(b, u, 3);
	} else {
		u[0] = (char)(0xF0 | cp >> 18);
		u[1] = (char)(0x80 | (cp >> 12 & 0x3F));
		u[2] = (char)(0x80 | (cp >> 6 & 0x3F));
		u[3] = (char)(0x80 | (cp & 0x3F));
		sb_put(b, u, 4);
	}
}

static char *sb_take(sbuf *b)
{
	char *p = b->p ? b->p : strdup("");
	memset(b, 0, sizeof(*b));
	return p;
}

static const uint32_t edge_cps[] = { 0x7F,   0x80,    0x7FF,   0x800,    0xD7FF,  0xE000,
				     0xFFFD, 0xFFFF,  0x10000, 0x10FFFF, 0x2028,  0x2029,
				     0xFEFF, 0x1F600, 0xE9,    0x65E5,   0x1D11E, 0xA0 };

static const char *const bad_utf8[] = {
	"\x80",		"\xBF",		"\xC0\x80",	"\xC1\xBF",	"\xC2",
	"\xE0\x80\x80", "\xE0\x9F\xBF", "\xED\xA0\x80", "\xED\xBF\xBF", "\xF0\x80\x80\x80",
	"\xF0\x8F\xBF\xBF", "\xF4\x90\x80\x80", "\xF5\x80\x80\x80", "\xFE", "\xFF",
	"\xE2\x82",	"\xF0\x9F\x98",
};

/* Random text: ASCII, every kind of control character, quotes and
 * backslashes, 2- to 4-byte characters and edge code points; with
 * bad_every > 0, about one piece in bad_every is an invalid sequence. */
static void rand_text(rng *r, sbuf *b, size_t max_pieces, unsigned bad_every)
{
	size_t n = below(r, max_pieces + 1);
	for (size_t i = 0; i < n; i++) {
		switch (below(r, 11)) {
		case 0:
		case 1:
		case 2:
			sb_putc(b, (char)(0x20 + below(r, 0x5F)));
			break;
		case 3:
			sb_putc(b, (char)(1 + below(r, 0x1F)));
			break;
		case 4:
			sb_putc(b, "\"\\/"[below(r, 3)]);
			break;
		case 5:
			sb_cp(b, (uint32_t)(0x80 + below(r, 0x800 - 0x80)));
			break;
		case 6: {
			uint32_t cp = (uint32_t)(0x800 + below(r, 0x10000 - 0x800));
			sb_cp(b, cp >= 0xD800 && cp <= 0xDFFF ? 0xFFFD : cp);
			break;
		}
		case 7:
			sb_cp(b, (uint32_t)(0x10000 + below(r, 0x110000 - 0x10000)));
			break;
		case 8:
			sb_cp(b, edge_cps[below(r, sizeof(edge_cps) / sizeof(edge_cps[0]))]);
			break;
		case 9:
			sb_putc(b, 0x7F);
			break;
		default:
			if (bad_every && below(r, bad_every) == 0)
				sb_puts(b, bad_utf8[below(r, sizeof(bad_utf8) / sizeof(bad_utf8[0]))]);
			else
				sb_putc(b, (char)('a' + below(r, 26)));
		}
	}
}

static char *rand_cstr(rng *r, size_t max_pieces, unsigned bad_every)
{
	sbuf b = { 0 };
	rand_text(r, &b, max_pieces, bad_every);
	return sb_take(&b);
}

static const int64_t edge_ints[] = { 0,	      1,	 -1,	    INT64_MAX,	    INT64_MIN,
				     INT64_MAX - 1, INT64_MIN + 1, 2147483648LL, -2147483649LL,
				     1000000,	     -999999,	  4294967296LL, 9007199254740993LL };

static int64_t rand_int(rng *r)
{
	if (below(r, 3) == 0)
		return edge_ints[below(r, sizeof(edge_ints) / sizeof(edge_ints[0]))];
	if (below(r, 2) == 0)
		return (int64_t)below(r, 100000);
	return (int64_t)rnd(r);
}

static const double edge_reals[] = { 0.0,	  -0.0,		   0.1,	    -2.5,
				     1e308,	  -1.7976931348623157e308, 5e-324, 2.2250738585072014e-308,
				     1e-7,	  123456789.125,	   1e21,    -1e-300 };

static double rand_real(rng *r)
{
	double d;
	uint64_t bits;
	if (below(r, 2) == 0)
		return edge_reals[below(r, sizeof(edge_reals) / sizeof(edge_reals[0]))];
	do {
		bits = rnd(r);
		memcpy(&d, &bits, sizeof(d));
	} while (!isfinite(d));
	return d;
}

/* A random JSON value (strings may hold NUL; keys are valid UTF-8). */
static json_t *rand_value(rng *r, int depth)
{
	sbuf b = { 0 };
	json_t *v;

	switch (below(r, depth > 0 ? 9 : 6)) {
	case 0:
		rand_text(r, &b, 12, 0);
		if (below(r, 6) == 0)
			sb_put(&b, "\0x", 2);
		v = json_stringn(b.p ? b.p : "", b.n);
		free(b.p);
		return v;
	case 1:
		return json_integer(rand_int(r));
	case 2:
		return json_real(rand_real(r));
	case 3:
		return json_boolean(below(r, 2));
	case 4:
		return json_null();
	case 5:
		return json_string("");
	case 6:
	case 7: {
		json_t *a = json_array();
		size_t n = below(r, 5);
		for (size_t i = 0; i < n; i++)
			json_array_append_new(a, rand_value(r, depth - 1));
		return a;
	}
	default: {
		json_t *o = json_object();
		size_t n = below(r, 5);
		for (size_t i = 0; i < n; i++) {
			char *key = rand_cstr(r, 6, 0);
			json_object_set_new(o, key, rand_value(r, depth - 1));
			free(key);
		}
		return o;
	}
	}
}

static char *dump(const json_t *v, size_t flags)
{
	char *s = json_dumps(v, flags);
	cr_assert_not_null(s);
	return s;
}

static int jansson_accepts(const char *text, size_t n)
{
	json_t *v = json_loadb(text, n, LOAD_FLAGS, NULL);
	json_decref(v);
	return v != NULL;
}

static void check_valid(const char *text, size_t n)
{
	int want, got = jo_valid(text, n);

	/* A NUL byte is never JSON to jo_valid. (json_loadb can lose one that
	 * follows a token; stored texts are C strings, where json_loads stops
	 * at the NUL as strlen does.) */
	if (memchr(text, '\0', n)) {
		cr_assert_eq(got, 0, "a NUL byte accepted: %.*s", (int)n, text);
		return;
	}
	want = jansson_accepts(text, n);
	cr_assert_eq(got, want, "jo_valid says %d, jansson %d, for %zu bytes: %.*s", got, want, n,
		     (int)(n > 300 ? 300 : n), text);
}

static const char mutation_bytes[] = "\"\\{}[],: 0123456789-+.eEutnfx\x01\x1f\x7f\x80\xc3\xed\xf4\xff";

/* One random edit: replace, insert or delete a byte, or cut the end. */
static void mutate(rng *r, sbuf *b)
{
	size_t at = b->n ? below(r, b->n) : 0;
	char c = mutation_bytes[below(r, sizeof(mutation_bytes) - 1)];

	switch (below(r, 4)) {
	case 0:
		if (b->n)
			b->p[at] = c;
		break;
	case 1:
		sb_putc(b, 0);
		memmove(b->p + at + 1, b->p + at, b->n - at - 1);
		b->p[at] = c;
		break;
	case 2:
		if (b->n) {
			memmove(b->p + at, b->p + at + 1, b->n - at - 1);
			b->p[--b->n] = '\0';
		}
		break;
	default:
		b->n = at;
		if (b->p)
			b->p[b->n] = '\0';
	}
}

/* A stored JSON text of one of many kinds; *canonical tells whether the
 * old path would print it byte for byte as it is (or as null); *deep
 * (when deep is not NULL) that it may be nested at jansson's limit. */
static char *rand_stored_json(rng *r, int *canonical, int *deep)
{
	sbuf b = { 0 };
	json_t *v;
	char *s;

	switch (below(r, deep ? 12 : 11)) {
	case 0:
		return NULL;
	case 1:
	case 2:
	case 3:
		v = rand_value(r, VALUE_DEPTH);
		s = dump(v, DUMP_FLAGS);
		json_decref(v);
		return s;
	case 4:
		*canonical = 0;
		v = rand_value(r, VALUE_DEPTH);
		s = dump(v, JSON_INDENT(1) | JSON_ENCODE_ANY);
		json_decref(v);
		return s;
	case 5:
		*canonical = 0;
		v = rand_value(r, VALUE_DEPTH);
		s = dump(v, DUMP_FLAGS | JSON_ENSURE_ASCII | JSON_ESCAPE_SLASH);
		json_decref(v);
		return s;
	case 6:
	case 7: /* broken: mutated until jansson refuses it */
		v = rand_value(r, VALUE_DEPTH);
		s = dump(v, DUMP_FLAGS);
		json_decref(v);
		sb_puts(&b, s);
		free(s);
		for (int i = 0; i < 16 && jansson_accepts(b.p, b.n); i++)
			mutate(r, &b);
		if (jansson_accepts(b.p, b.n))
			*canonical = 0;
		return sb_take(&b);
	case 8:
		return strdup(below(r, 2) ? "" : " \n\t ");
	case 11: { /* nesting at jansson's depth limit, one side or the other */
		size_t depth = JO_DEPTH_MAX - 1 + below(r, 2);
		*deep = 1;
		for (size_t i = 0; i < depth; i++)
			sb_putc(&b, '[');
		sb_putc(&b, '1');
		for (size_t i = 0; i < depth; i++)
			sb_putc(&b, ']');
		return sb_take(&b);
	}
	case 9:
		return strdup(below(r, 2) ? "{\"\\u0000\":1}" : "[\"\\ud800\"]");
	default:
		return strdup(below(r, 2) ? "{\"a\":\"\\u0000\",\"b\":null}" : "1e400");
	}
}

/* ---- ej_format_time ------------------------------------------------------- */

/* The implementation ej_format_time had before json_out. */
static void ref_time(int64_t unix_us, char buf[EJ_TIME_LEN])
{
	int64_t secs = unix_us / 1000000, us = unix_us % 1000000;
	time_t t;
	struct tm tm;

	if (us < 0) {
		us += 1000000;
		secs--;
	}
	t = (time_t)secs;
	cr_assert_not_null(gmtime_r(&t, &tm));
	snprintf(buf, EJ_TIME_LEN, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (long long)us);
}

static void check_time(int64_t us)
{
	char want[EJ_TIME_LEN], got[EJ_TIME_LEN];
	size_t n;
	ref_time(us, want);
	n = ej_format_time(us, got);
	cr_assert_str_eq(got, want, "time %lld", (long long)us);
	cr_assert_eq(n, strlen(want));
}

Test(json_out, time_matches_gmtime_for_any_int64)
{
	static const int64_t edges[] = {
		0, -1, 1, 999999, 1000000, -1000000, -1000001, 86399999999LL, 86400000000LL,
		-86400000000LL, -86400000001LL, INT64_MAX, INT64_MIN, INT64_MIN + 1, INT64_MAX - 1,
		951782400000000LL,   /* 2000-02-29 */
		-2203891200000000LL, /* 1900-03-01 */
		253402300799999999LL, 253402300800000000LL, /* 9999-12-31T23:59:59.999999, 10000 */
		-62167219200000000LL, -62167219200000001LL, /* 0000-01-01, just before */
		-62198755200000000LL, -30610224000000000LL, 4107542400000000LL,
	};
	rng r = { SEED };

	for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
		check_time(edges[i]);
	for (int i = 0; i < TIME_CASES; i++) {
		check_time((int64_t)rnd(&r));
		/* Within +-3000 years of 1970, where the calendar details are. */
		check_time((int64_t)(rnd(&r) % 94670856000000000ULL) - 47335428000000000LL);
	}
}

/* ---- strings ------------------------------------------------------------------ */

static void check_string(const char *s, size_t n)
{
	json_t *ref = json_stringn(s, n);
	json_out jo;
	char *got, *want;
	int32_t r;

	jo_init(&jo);
	r = jo_stringn(&jo, s, n);
	if (!ref) {
		cr_assert_eq(r, MEMD_EINVAL, "jansson refuses %zu bytes, jo_stringn gave %d", n, r);
		cr_assert_eq(jo_finish(&jo, &got, NULL), MEMD_EINVAL);
		return;
	}
	cr_assert_eq(r, 0);
	cr_assert_eq(jo_finish(&jo, &got, NULL), 0);
	want = dump(ref, DUMP_FLAGS);
	cr_assert_str_eq(got, want);
	free(got);
	free(want);
	json_decref(ref);
}

/* jo_string (up to the NUL) as jo_stringn of the same bytes. */
static void check_cstring(const char *s)
{
	json_out a, b;
	char *got, *want;
	int32_t ra, rb;

	jo_init(&a);
	jo_init(&b);
	ra = jo_string(&a, s);
	rb = jo_stringn(&b, s, strlen(s));
	cr_assert_eq(ra, rb);
	if (ra < 0) {
		jo_clear(&a);
		jo_clear(&b);
		return;
	}
	cr_assert_eq(jo_finish(&a, &got, NULL), 0);
	cr_assert_eq(jo_finish(&b, &want, NULL), 0);
	cr_assert_str_eq(got, want);
	free(got);
	free(want);
}

Test(json_out, strings_escape_as_jansson_does)
{
	rng r = { SEED };
	char one[2] = { 0 };

	for (int c = 1; c < 256; c++) {
		one[0] = (char)c;
		check_string(one, 1);
		check_cstring(one);
	}
	for (size_t i = 0; i < sizeof(bad_utf8) / sizeof(bad_utf8[0]); i++) {
		check_string(bad_utf8[i], strlen(bad_utf8[i]));
		/* invalid in the middle of escapes and valid text */
		{
			sbuf b = { 0 };
			sb_puts(&b, "a\"\n\x01");
			sb_puts(&b, bad_utf8[i]);
			sb_puts(&b, "\xc3\xa9");
			check_string(b.p, b.n);
			check_cstring(b.p);
			check_cstring(bad_utf8[i]);
			free(b.p);
		}
	}
	check_string("", 0);
	check_string("a\0b", 3); /* NUL inside: \u0000 */
	for (int i = 0; i < EVENT_CASES * 4; i++) {
		sbuf b = { 0 };
		rand_text(&r, &b, TEXT_PIECES, 8);
		check_string(b.p ? b.p : "", b.n);
		check_cstring(b.p ? b.p : "");
		free(b.p);
	}
}

/* ---- validator ------------------------------------------------------------------ */

static void check_valid_str(const char *s)
{
	check_valid(s, strlen(s));
}

static void nest(sbuf *b, size_t depth, const char *open, const char *inner, const char *close)
{
	for (size_t i = 0; i < depth; i++)
		sb_puts(b, open);
	sb_puts(b, inner);
	for (size_t i = 0; i < depth; i++)
		sb_puts(b, close);
}

Test(json_out, validator_hostile_cases)
{
	static const char *const cases[] = {
		"", " ", "1", " 1 ", "\f1", "\v1", "1 2", "[1 2]", "[1,]", "[,1]", "[", "]", "{}", "[]",
		"[{}]", "{\"a\" 1}", "{1:2}", "{\"a\":}", "{\"a\":1,}", "{\"a\":1 \"b\":2}", "{,}",
		"nul", "null", "nulll", "True", "true1", "[true1]", "falsey", "\xEF\xBB\xBF{}",
		"\"abc", "\"\\\"", "\"\\", "\"\\u12\"", "\"\\u12G4\"", "\"\\x\"", "\"\\/\"",
		"\"\t\"", "\"\x7f\"", "\"\\u0000\"", "{\"\\u0000\":1}", "{\"a\\u0000b\":1}",
		"{\"a\":\"\\u0000\"}", "\"\\ud83d\\ude00\"", "\"\\uD83D\\uDE00\"", "\"\\ud83d\"",
		"\"\\ude00\"", "\"\\ud83d\\u0041\"", "\"\\ud83dx\"", "\"\\ud83d\\n\"", "\"\\ud83d\\ud83d\"",
		"\"\\u00e9\"", "\"\xc3\xa9\"", "\"\xc3\"", "\"\xed\xa0\x80\"", "\"\xf4\x8f\xbf\xbf\"",
		"\"\xf4\x90\x80\x80\"", "\xc3\xa9", "0", "-0", "-", "-a", "00", "01", "-01", "0.", ".1",
		"1.", "1.e5", "1e", "1e+", "1E+2", "1e-2", "+1", "0x10", "1.5.3", "1e5.3", "Infinity",
		"NaN", "-Infinity", "9223372036854775807", "9223372036854775808",
		"-9223372036854775808", "-9223372036854775809", "10000000000000000000",
		"00000000000000000001", "1e-400", "1e400", "-1e400", "1e308", "1.7976931348623157e308",
		"1.7976931348623158e308", "1.7976931348623159e308", "17976931348623157e292",
		"0e99999999999999999999", "0.0e400", "0.000e999", "1e-99999999999999999999",
		"1e99999999999999999999", "100e306", "1000e306", "0.1e310", "0.01e310", "0.001e310",
		"[1e400]", "{\"a\":1e400}", "[9223372036854775808]", "\"a\"\"b\"", "[]]", "{}}", "[[]",
		"{\"a\":{\"b\":[1,{\"c\":null}]}}", "[\"\\ud800\"]", "\"\\u0041\\u00DF\\u6771\"",
	};
	static const char threshold[] =
		"17976931348623158079372897140530341507993413271003782693617377898044496829276475094664901"
		"79775872070963302864166928879109465555478519404026306574886715058206819089020007083836762"
		"73854845817711531764475730270069855571366959622842914819860834936475292719074168444365510"
		"704342711559699508093042880177904174497792";
	sbuf b = { 0 };

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_valid_str(cases[i]);
	/* Bytes past a NUL count (json_loadb): a NUL is never JSON. */
	check_valid("1\0", 2);
	check_valid("\"a\0b\"", 5);
	check_valid("[1,\0]", 5);

	/* The real overflow threshold 2^1024 - 2^970, written many ways. */
	{
		static const struct {
			const char *pre, *post;
		} forms[] = { { "", ".0" },	{ "", "0e-1" }, { "0.", "e309" }, { "0.0", "e310" },
			      { "", "1e0" },	{ "", "000" },	{ "-", ".0" },	  { "-0.", "E+309" },
			      { "", ".000e0" }, { "", "e-1" } };
		char text[1024];
		char below_t[sizeof(threshold)];
		memcpy(below_t, threshold, sizeof(threshold));
		below_t[sizeof(threshold) - 2]--; /* ...791 */
		for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
			snprintf(text, sizeof(text), "%s%s%s", forms[i].pre, threshold, forms[i].post);
			check_valid_str(text);
			snprintf(text, sizeof(text), "%s%s%s", forms[i].pre, below_t, forms[i].post);
			check_valid_str(text);
		}
		/* 1.797...792e308, and with a digit changed either way */
		snprintf(text, sizeof(text), "%c.%se308", threshold[0], threshold + 1);
		check_valid_str(text);
		cr_assert_eq(jo_valid(text, strlen(text)), 0, "the threshold itself overflows");
		snprintf(text, sizeof(text), "%c.%se308", below_t[0], below_t + 1);
		check_valid_str(text);
		cr_assert_eq(jo_valid(text, strlen(text)), 1, "just below the threshold is DBL_MAX");
		snprintf(text, sizeof(text), "%c.%s1e308", below_t[0], below_t + 1);
		check_valid_str(text);
		snprintf(text, sizeof(text), "%c.%.20se308", threshold[0], threshold + 1);
		check_valid_str(text);
	}

	/* Depth: jansson accepts a value nested in JO_DEPTH_MAX - 1 containers
	 * and an empty container at depth JO_DEPTH_MAX, nothing deeper. */
	for (size_t d = JO_DEPTH_MAX - 2; d <= JO_DEPTH_MAX + 1; d++) {
		static const char *const inners[] = { "1", "[]", "{}", "\"x\"" };
		for (size_t k = 0; k < sizeof(inners) / sizeof(inners[0]); k++) {
			b.n = 0;
			nest(&b, d, "[", inners[k], "]");
			check_valid(b.p, b.n);
			b.n = 0;
			nest(&b, d, "{\"k\":", inners[k], "}");
			check_valid(b.p, b.n);
			b.n = 0;
			nest(&b, d, "[{\"a\":[1,", inners[k], "]}]");
			check_valid(b.p, b.n);
		}
	}
	b.n = 0;
	nest(&b, JO_DEPTH_MAX - 1, "[", "1", "]");
	cr_assert(jo_valid(b.p, b.n));
	b.n = 0;
	nest(&b, JO_DEPTH_MAX, "[", "1", "]");
	cr_assert_not(jo_valid(b.p, b.n));
	b.n = 0;
	nest(&b, 100000, "[", "", "]"); /* far past the limit: refused, no deep recursion */
	cr_assert_not(jo_valid(b.p, b.n));
	free(b.p);
}

Test(json_out, validator_agrees_with_jansson_on_random_texts)
{
	rng r = { SEED };

	for (int i = 0; i < VALIDATOR_CASES; i++) {
		json_t *v = rand_value(&r, VALUE_DEPTH);
		const size_t flags[] = { DUMP_FLAGS, JSON_INDENT(2) | JSON_ENCODE_ANY,
					 DUMP_FLAGS | JSON_ENSURE_ASCII | JSON_ESCAPE_SLASH };
		for (size_t f = 0; f < sizeof(flags) / sizeof(flags[0]); f++) {
			char *s = dump(v, flags[f]);
			sbuf b = { 0 };
			cr_assert(jo_valid(s, strlen(s)), "jansson's own dump refused: %s", s);
			sb_puts(&b, s);
			for (int k = 0; k < MUTATIONS; k++) {
				mutate(&r, &b);
				check_valid(b.p ? b.p : "", b.n);
			}
			free(b.p);
			free(s);
		}
		json_decref(v);
	}
}

Test(json_out, validator_numbers_agree_with_jansson)
{
	rng r = { SEED };
	char text[128];

	for (int i = 0; i < NUMBER_CASES; i++) {
		size_t n = 0, digits = 1 + below(&r, 25);
		if (below(&r, 3) == 0)
			text[n++] = '-';
		if (below(&r, 8) == 0)
			text[n++] = '0';
		for (size_t k = 0; k < digits; k++)
			text[n++] = (char)('0' + below(&r, 10));
		if (below(&r, 2)) {
			size_t fd = below(&r, 6);
			text[n++] = '.';
			for (size_t k = 0; k < fd; k++)
				text[n++] = (char)('0' + below(&r, 10));
		}
		if (below(&r, 2)) {
			size_t ed = below(&r, 5);
			text[n++] = below(&r, 2) ? 'e' : 'E';
			if (below(&r, 2))
				text[n++] = below(&r, 2) ? '-' : '+';
			if (below(&r, 2)) /* exponents near 308 */
				n += (size_t)snprintf(text + n, sizeof(text) - n, "%d",
						      (int)(280 + below(&r, 40)));
			else
				for (size_t k = 0; k < ed; k++)
					text[n++] = (char)('0' + below(&r, 10));
		}
		check_valid(text, n);
	}
}

/* ---- events and sessions --------------------------------------------------- */

typedef struct rand_event {
	memd_event e;
	char *strs[8]; /* id, invocation_id, author, role, branch, text, hidden_by, operation */
	char *texts[3];
	int canonical;
} rand_event;

static char *rand_field(rng *r, unsigned bad_every)
{
	switch (below(r, 8)) {
	case 0:
		return NULL;
	case 1:
		return strdup("");
	default:
		return rand_cstr(r, TEXT_PIECES, bad_every);
	}
}

/* The three stored texts of an event. A text at the depth limit nests the
 * output past what jansson parses: then the others are kept canonical, so
 * the output can be checked byte for byte instead. */
static void rand_texts(rng *r, char **texts, size_t n, int allow_deep, int *canonical)
{
	int deep = 0, c[3] = { 1, 1, 1 };

	for (size_t i = 0; i < n; i++)
		texts[i] = rand_stored_json(r, &c[i], allow_deep ? &deep : NULL);
	for (size_t i = 0; deep && i < n; i++)
		while (!c[i]) {
			free(texts[i]);
			c[i] = 1;
			texts[i] = rand_stored_json(r, &c[i], NULL);
		}
	for (size_t i = 0; i < n; i++)
		*canonical &= c[i];
}

static void rand_event_make(rng *r, rand_event *re, unsigned bad_every, int small_ints)
{
	static const char *const roles[] = { "summary", "user", "assistant", "tool" };

	memset(re, 0, sizeof(*re));
	re->canonical = 1;
	for (int i = 0; i < 8; i++)
		re->strs[i] = rand_field(r, bad_every);
	if (below(r, 2)) {
		free(re->strs[3]);
		re->strs[3] = strdup(roles[below(r, 4)]);
	}
	/* small_ints: for envelopes, which are checked by parsing */
	rand_texts(r, re->texts, 3, !small_ints, &re->canonical);
	re->e.struct_size = sizeof(re->e);
	re->e.id = re->strs[0];
	re->e.invocation_id = re->strs[1];
	re->e.author = re->strs[2];
	re->e.role = re->strs[3];
	re->e.branch = re->strs[4];
	re->e.text = re->strs[5];
	re->e.content_json = re->texts[0];
	re->e.actions_json = re->texts[1];
	re->e.metadata_json = re->texts[2];
	re->e.seq = small_ints ? (int64_t)below(r, 1000) : rand_int(r);
	re->e.tokens = small_ints ? (int64_t)below(r, 1000) : rand_int(r);
	re->e.covers_seq = small_ints ? (int64_t)below(r, 1000) : rand_int(r);
	re->e.timestamp_us = rand_int(r);
	/* Hidden by an operation (of a kind memd knows or not) a third of
	 * the time; appended by one, with or without a hidden mark. */
	if (!below(r, 3)) {
		re->e.hidden_us = rand_int(r);
		re->e.hidden_us += !re->e.hidden_us;
		re->e.hidden_kind = (uint32_t)below(r, 6);
		re->e.hidden_by = re->strs[6];
	}
	re->e.operation = below(r, 2) ? re->strs[7] : NULL;
}

static void rand_event_free(rand_event *re)
{
	for (int i = 0; i < 8; i++)
		free(re->strs[i]);
	for (int i = 0; i < 3; i++)
		free(re->texts[i]);
}

/* Keys of two objects in the same order. */
static void assert_same_key_order(json_t *a, json_t *b)
{
	void *ia = json_object_iter(a), *ib = json_object_iter(b);
	for (; ia && ib; ia = json_object_iter_next(a, ia), ib = json_object_iter_next(b, ib))
		cr_assert_str_eq(json_object_iter_key(ia), json_object_iter_key(ib));
	cr_assert(!ia && !ib, "different numbers of keys");
}

/* got (len bytes) must be the JSON of ref; byte for byte when exact. */
static void assert_same_json(const char *got, size_t len, json_t *ref, int exact)
{
	json_error_t jerr;
	json_t *parsed = json_loadb(got, len, JSON_ALLOW_NUL, &jerr);
	char *want = dump(ref, JSON_COMPACT);

	if (!parsed && json_error_code(&jerr) == json_error_stack_overflow) {
		/* Nested past jansson's limit, by a stored text at the limit
		 * (the old output nested as deep): compare the bytes. */
		cr_assert(exact, "too deep to parse, and not canonical");
		cr_assert_str_eq(got, want);
		free(want);
		return;
	}
	cr_assert_not_null(parsed, "output is not JSON (%s): %.300s", jerr.text, got);
	cr_assert(json_equal(parsed, ref), "output %.400s\nold     %.400s", got, want);
	assert_same_key_order(parsed, ref);
	if (exact)
		cr_assert_str_eq(got, want);
	cr_assert_eq(strlen(got), len);
	json_decref(parsed);
	free(want);
}

/* Whether any string field of e is refused by jansson. */
static int event_has_bad_string(const memd_event *e, const char *field)
{
	const char *const names[] = { "id",     "invocation_id", "author",    "role",
				      "branch", "text",          "hidden.by", "operation" };
	const char *const vals[] = { e->id,     e->invocation_id,			  e->author,
				     e->role,   e->branch,				  e->text,
				     e->hidden_us ? e->hidden_by : NULL, e->operation };
	for (int i = 0; i < 8; i++) {
		json_t *s;
		if (!vals[i] || (field && strcmp(field, names[i]) != 0))
			continue;
		s = json_string(vals[i]);
		json_decref(s);
		if (!s)
			return 1;
	}
	return 0;
}

Test(json_out, events_equal_the_jansson_path)
{
	rng r = { SEED };
	int bad = 0, summaries = 0, hidden = 0, appended = 0;

	for (int i = 0; i < EVENT_CASES; i++) {
		rand_event re;
		json_t *ref;
		json_out jo;
		char *got;
		size_t len;
		int32_t rc;

		rand_event_make(&r, &re, 40, 0);
		ref = ej_event(&re.e);
		jo_init(&jo);
		rc = jo_event(&jo, &re.e);
		if (!ref) {
			bad++;
			cr_assert(event_has_bad_string(&re.e, NULL), "ej_event failed on a valid event");
			cr_assert_eq(rc, MEMD_EINVAL);
			cr_assert_not_null(jo.bad_field);
			cr_assert(event_has_bad_string(&re.e, jo.bad_field), "bad_field %s is valid",
				  jo.bad_field);
			cr_assert_eq(jo_finish(&jo, &got, &len), MEMD_EINVAL);
		} else {
			summaries += json_object_get(ref, "covers_seq") != NULL;
			hidden += json_object_get(ref, "hidden") != NULL;
			appended += json_object_get(ref, "operation") != NULL;
			cr_assert_eq(rc, 0);
			cr_assert_eq(jo_finish(&jo, &got, &len), 0);
			assert_same_json(got, len, ref, re.canonical);
			free(got);
			json_decref(ref);
		}
		rand_event_free(&re);
	}
	/* The generator reached both sides, and hidden and appended events. */
	cr_assert_gt(bad, 10);
	cr_assert_gt(summaries, 100);
	cr_assert_gt(hidden, 100);
	cr_assert_gt(appended, 100);
}

/* Strings of a random session: id, app, user, title, metadata, origin;
 * lane_key, previous_session, start_reason, end_reason. */
#define SESSION_STRS 10

static void rand_session(rng *r, memd_session *s, char *strs[SESSION_STRS], int *canonical,
			 int allow_deep)
{
	memset(s, 0, sizeof(*s));
	memset(strs, 0, SESSION_STRS * sizeof(*strs));
	s->struct_size = sizeof(*s);
	for (int i = 0; i < 4; i++)
		strs[i] = rand_field(r, 40);
	rand_texts(r, &strs[4], 2, allow_deep, canonical);
	s->id = strs[0];
	s->app = strs[1];
	s->user = strs[2];
	s->title = strs[3];
	s->metadata_json = strs[4];
	/* A lane's session half the time: the lifecycle members and usage. */
	if (below(r, 2)) {
		for (int i = 6; i < SESSION_STRS; i++)
			strs[i] = below(r, 4) ? rand_field(r, 40) : NULL;
		s->origin_json = strs[5];
		s->lane_key = strs[6];
		s->previous_session = strs[7];
		s->start_reason = strs[8];
		s->end_reason = strs[9];
		s->ended_us = below(r, 2) ? rand_int(r) : 0;
		s->input_tokens = below(r, 2) ? rand_int(r) : 0;
		s->output_tokens = rand_int(r);
		s->cost_micro_usd = below(r, 2) ? (int64_t)below(r, 100000000) : 0;
		s->last_prompt_tokens = below(r, 2) ? rand_int(r) : 0;
	}
	s->flags = below(r, 2) ? MEMD_SESSION_ARCHIVED : 0;
	s->created_us = rand_int(r);
	s->updated_us = rand_int(r);
	s->version = rand_int(r);
	s->last_seq = rand_int(r);
	s->summary_seq = below(r, 3) ? rand_int(r) : 0;
	s->message_count = rand_int(r);
}

Test(json_out, sessions_equal_the_jansson_path)
{
	rng r = { SEED };
	int bad = 0;

	for (int i = 0; i < SESSION_CASES; i++) {
		memd_session s;
		char *strs[SESSION_STRS];
		int canonical = 1;
		json_t *ref;
		json_out jo;
		char *got;
		size_t len;
		int32_t rc;

		rand_session(&r, &s, strs, &canonical, 1);
		ref = ej_session(&s);
		jo_init(&jo);
		rc = jo_session(&jo, &s);
		if (!ref) {
			bad++;
			cr_assert_eq(rc, MEMD_EINVAL);
			cr_assert_not_null(jo.bad_field);
			jo_clear(&jo);
		} else {
			cr_assert_eq(rc, 0);
			cr_assert_eq(jo_finish(&jo, &got, &len), 0);
			assert_same_json(got, len, ref, canonical);
			free(got);
			json_decref(ref);
		}
		for (int k = 0; k < SESSION_STRS; k++)
			free(strs[k]);
	}
	cr_assert_gt(bad, 5);
}

/* ---- envelopes ------------------------------------------------------------- */

Test(json_out, context_envelope_equals_the_json_pack_one)
{
	rng r = { SEED };

	for (int i = 0; i < ENVELOPE_CASES; i++) {
		char *name = rand_cstr(&r, 4, 0);
		json_t *summary = NULL, *events = json_array(), *ref;
		int64_t tokens = 0;
		int exact = 1, failed = 0;
		size_t n_ops = below(&r, 7);
		jo_context c;
		char *got;
		int32_t rc;

		jo_context_begin(&c, name);
		for (size_t k = 0; k < n_ops && !failed; k++) {
			rand_event re;
			json_t *ev;
			/* mostly the contract (summary first), sometimes not */
			int as_summary = below(&r, k == 0 ? 2 : 6) == 0;
			rand_event_make(&r, &re, 200, 1);
			exact &= re.canonical;
			ev = ej_event(&re.e);
			tokens += re.e.tokens;
			rc = as_summary ? jo_context_summary(&c, &re.e) : jo_context_event(&c, &re.e);
			if (!ev) {
				cr_assert_eq(rc, MEMD_EINVAL);
				failed = 1;
			} else if (as_summary) {
				cr_assert_eq(rc, 0);
				json_decref(summary);
				summary = ev;
			} else {
				cr_assert_eq(rc, 0);
				json_array_append_new(events, ev);
			}
			rand_event_free(&re);
		}
		rc = jo_context_finish(&c, &got);
		if (failed) {
			cr_assert_eq(rc, MEMD_EINVAL);
			json_decref(summary);
			json_decref(events);
		} else {
			cr_assert_eq(rc, 0);
			ref = json_pack("{s:s,s:o?,s:o,s:I}", "strategy", name, "summary", summary,
					"events", events, "tokens", (json_int_t)tokens);
			cr_assert_not_null(ref);
			assert_same_json(got, strlen(got), ref, exact);
			json_decref(ref);
			free(got);
		}
		free(name);
	}
}

Test(json_out, page_envelope_equals_the_json_pack_one)
{
	rng r = { SEED };

	for (int i = 0; i < ENVELOPE_CASES; i++) {
		uint32_t limit = 1 + (uint32_t)below(&r, 5);
		size_t delivered = below(&r, limit + 2); /* the store gives at most limit + 1 */
		json_t *arr = json_array(), *next = NULL, *ref;
		int exact = 1, failed = 0;
		jo_page p;
		char *got;
		int32_t rc;

		cr_assert_eq(jo_page_begin(&p, limit), 0);
		for (size_t k = 0; k < delivered && !failed; k++) {
			rand_event re;
			json_t *ev;
			rand_event_make(&r, &re, k < limit ? 200 : 0, 1);
			ev = ej_event(&re.e);
			rc = jo_page_event(&p, &re.e);
			if (!ev) {
				cr_assert_eq(rc, MEMD_EINVAL);
				failed = 1;
			} else {
				cr_assert_eq(rc, 0);
				if (k < limit)
					exact &= re.canonical;
				json_array_append_new(arr, ev);
			}
			rand_event_free(&re);
		}
		rc = jo_page_finish(&p, &got);
		if (failed) {
			cr_assert_eq(rc, MEMD_EINVAL);
			json_decref(arr);
			continue;
		}
		cr_assert_eq(rc, 0);
		/* what memd_events_list did with jansson */
		if (json_array_size(arr) > limit) {
			json_array_remove(arr, limit);
			next = json_object_get(json_array_get(arr, limit - 1), "seq");
		}
		ref = json_pack("{s:o,s:O?}", "events", arr, "next_after_seq", next);
		cr_assert_not_null(ref);
		assert_same_json(got, strlen(got), ref, exact);
		json_decref(ref);
		free(got);
	}
	cr_assert_eq(jo_page_begin(&(jo_page){ 0 }, 0), MEMD_EINVAL);
}

/* max_len: a write past it fails (sticky) with MEMD_ETOOBIG, and the
 * buffer never grows past max_len + 1. */
Test(json_out, max_len_refuses_writes_past_it)
{
	json_out jo;
	char big[300];

	memset(big, 'x', sizeof(big));
	jo_init(&jo);
	jo.max_len = 1000;
	for (int i = 0; i < 3; i++)
		cr_assert_eq(jo_raw(&jo, big, sizeof(big)), 0);
	cr_assert_eq(jo_raw(&jo, big, sizeof(big)), MEMD_ETOOBIG);
	cr_assert_eq(jo.len, 900);
	cr_assert_leq(jo.cap, 1001);
	cr_assert_eq(jo_raw(&jo, "1", 1), MEMD_ETOOBIG, "the error sticks");
	jo_clear(&jo);
}

/* max_bytes: a page ends before the event that takes it over (never
 * before its first), and next_after_seq is where the next one starts. */
Test(json_out, page_ends_early_at_max_bytes)
{
	char text[400];
	memd_event e = { .struct_size = sizeof(e), .id = "e", .role = "user", .author = "user",
			 .content_json = "\"x\"", .text = text };
	jo_page p;
	json_t *page;
	char *got;
	int rc = 0;

	json_out one;
	size_t max;

	memset(text, 'y', sizeof(text) - 1);
	text[sizeof(text) - 1] = '\0';
	e.seq = 1;
	jo_init(&one);
	cr_assert_eq(jo_event(&one, &e), 0);
	cr_assert_eq(jo_page_begin(&p, 100), 0);
	/* Room for two events and a half. */
	max = p.max_bytes = one.len * 5 / 2;
	jo_clear(&one);
	for (int64_t seq = 1; seq <= 10 && rc == 0; seq++) {
		e.seq = seq;
		rc = jo_page_event(&p, &e);
	}
	cr_assert_eq(rc, 0);
	cr_assert(p.more && p.full);
	cr_assert_eq(jo_page_finish(&p, &got), 0);
	cr_assert_leq(strlen(got), max + 64, "%s", got);
	page = json_loads(got, 0, NULL);
	cr_assert_not_null(page, "%s", got);
	cr_assert_eq(json_array_size(json_object_get(page, "events")), 2);
	cr_assert_eq(json_integer_value(json_object_get(page, "next_after_seq")), 2);
	json_decref(page);
	free(got);

	/* One event over the limit alone still makes a page. */
	cr_assert_eq(jo_page_begin(&p, 100), 0);
	p.max_bytes = 10;
	e.seq = 1;
	cr_assert_eq(jo_page_event(&p, &e), 0);
	e.seq = 2;
	cr_assert_eq(jo_page_event(&p, &e), 0);
	cr_assert_eq(jo_page_finish(&p, &got), 0);
	page = json_loads(got, 0, NULL);
	cr_assert_eq(json_array_size(json_object_get(page, "events")), 1);
	cr_assert_eq(json_integer_value(json_object_get(page, "next_after_seq")), 1);
	json_decref(page);
	free(got);
}

Test(json_out, session_get_envelope_equals_the_jansson_one)
{
	rng r = { SEED };

	for (int i = 0; i < ENVELOPE_CASES; i++) {
		jo_session_get g;
		memd_session s;
		char *strs[SESSION_STRS];
		int exact = 1, with_events = (int)below(&r, 3), failed = 0;
		size_t deliveries = 1 + below(&r, 2), n_events = below(&r, 5);
		json_t *ref = NULL, *arr = NULL;
		char *got;
		int32_t rc;

		jo_session_get_init(&g);
		for (size_t k = 0; k < deliveries && !failed; k++) {
			exact = 1; /* only the last delivery is output */
			rand_session(&r, &s, strs, &exact, 0);
			json_decref(ref);
			ref = ej_session(&s);
			rc = jo_session_get_session(&g, &s);
			if (!ref) {
				cr_assert_eq(rc, MEMD_EINVAL);
				failed = 1;
			} else {
				cr_assert_eq(rc, 0);
			}
			for (int f = 0; f < SESSION_STRS; f++)
				free(strs[f]);
		}
		if (with_events && !failed) {
			cr_assert_eq(jo_session_get_events(&g), 0);
			arr = json_array();
			json_object_set_new(ref, "events", arr);
			for (size_t k = 0; k < n_events && !failed; k++) {
				rand_event re;
				json_t *ev;
				rand_event_make(&r, &re, 200, 1);
				exact &= re.canonical;
				ev = ej_event(&re.e);
				rc = jo_session_get_event(&g, &re.e);
				if (!ev) {
					cr_assert_eq(rc, MEMD_EINVAL);
					failed = 1;
				} else {
					cr_assert_eq(rc, 0);
					json_array_append_new(arr, ev);
				}
				rand_event_free(&re);
			}
		}
		rc = jo_session_get_finish(&g, &got);
		if (failed) {
			cr_assert_eq(rc, MEMD_EINVAL);
		} else {
			cr_assert_eq(rc, 0);
			assert_same_json(got, strlen(got), ref, exact);
			free(got);
		}
		json_decref(ref);
	}
}

/* A lane's session carries its lifecycle and usage; a plain one does
 * not, in both writers. */
Test(json_out, lane_sessions_carry_lifecycle_members)
{
	memd_session s = { .struct_size = sizeof(s), .id = "s2", .app = "a", .user = "u",
			   .metadata_json = "{}", .lane_key = "telegram:dm:1",
			   .origin_json = "{\"platform\":\"telegram\"}", .previous_session = "s1",
			   .start_reason = "idle", .input_tokens = 10, .output_tokens = 5,
			   .cost_micro_usd = 1500000, .last_prompt_tokens = 7 };
	memd_session plain = { .struct_size = sizeof(s), .id = "s", .app = "a", .user = "u" };
	json_t *o = ej_session(&s), *want;
	json_out jo;
	char *got;
	size_t len;

	want = json_pack("{s:s,s:{s:s},s:s,s:s,s:n,s:n,s:{s:i,s:i,s:i,s:i,s:i,s:f}}", "lane_key",
			 "telegram:dm:1", "origin", "platform", "telegram", "previous_session", "s1",
			 "start_reason", "idle", "ended", "end_reason", "usage", "input_tokens", 10,
			 "output_tokens", 5, "cache_read_tokens", 0, "cache_write_tokens", 0,
			 "last_prompt_tokens", 7, "cost_usd", 1.5);
	{
		const char *key;
		json_t *v;
		json_object_foreach(want, key, v)
			cr_assert(json_equal(json_object_get(o, key), v), "%s", key);
	}
	jo_init(&jo);
	cr_assert_eq(jo_session(&jo, &s), 0);
	cr_assert_eq(jo_finish(&jo, &got, &len), 0);
	assert_same_json(got, len, o, 1);
	free(got);
	json_decref(o);

	s.ended_us = 1000000;
	s.end_reason = "session_reset";
	o = ej_session(&s);
	cr_assert_str_eq(json_string_value(json_object_get(o, "ended")), "1970-01-01T00:00:01.000000Z");
	cr_assert_str_eq(json_string_value(json_object_get(o, "end_reason")), "session_reset");
	json_decref(o);

	o = ej_session(&plain);
	cr_assert_null(json_object_get(o, "lane_key"));
	cr_assert_null(json_object_get(o, "usage"));
	json_decref(o);
	json_decref(want);
}

/* lj_lane_write equals lj_lane: byte for byte for a compact origin,
 * json_equal (same keys, same order) otherwise; an origin that is not an
 * object is null in both; no usage, usage with a cost, a reset, a turn, a
 * pending resume (and a resume reason left over without one). */
Test(json_out, lanes_equal_the_jansson_path)
{
	static const char *const origins[] = { NULL, "{\"platform\":\"telegram\",\"chat_type\":\"dm\"}",
					       " { \"platform\" : \"x\" } ", "[1,2]", "\"text\"",
					       "{\"broken\":", "{}" };
	rng r = { SEED };

	for (int i = 0; i < SESSION_CASES; i++) {
		size_t which = (size_t)below(&r, sizeof(origins) / sizeof(origins[0]));
		memd_lane l = { .struct_size = sizeof(l), .app = "a", .user = "telegram:42",
				.key = "telegram:dm:42", .session = "0190-s\"1",
				.origin_json = origins[which],
				.created_us = (int64_t)below(&r, 4000000000000000ULL),
				.updated_us = (int64_t)below(&r, 4000000000000000ULL),
				.version = (int64_t)below(&r, 1000000),
				.flags = (uint32_t)below(&r, 256),
				.resume_reason = below(&r, 2) ? "lease_expired" : NULL,
				.interruptions = (int32_t)below(&r, 5),
				.inbox_depth = (int64_t)below(&r, 50) };
		json_t *ref;
		json_out jo;
		char *got;
		size_t len;

		if (below(&r, 2)) {
			l.reset_reason = "idle";
			l.reset_us = (int64_t)below(&r, 4000000000000000ULL);
			l.previous_session = below(&r, 2) ? "s0" : NULL;
		}
		if (below(&r, 2)) {
			l.turn_id = "t\u00e9-1";
			l.turn_started_us = (int64_t)below(&r, 4000000000000000ULL);
			l.turn_lease_until_us = (int64_t)below(&r, 4000000000000000ULL);
		}
		if (below(&r, 2)) {
			l.input_tokens = (int64_t)below(&r, 100000);
			l.output_tokens = (int64_t)below(&r, 100000);
			l.cache_read_tokens = (int64_t)below(&r, 3);
			l.cache_write_tokens = (int64_t)below(&r, 3);
			l.last_prompt_tokens = (int64_t)below(&r, 100000);
			l.cost_micro_usd = (int64_t)below(&r, 3) ? (int64_t)below(&r, 100000000) : 0;
		}
		ref = lj_lane(&l);
		cr_assert_not_null(ref);
		jo_init(&jo);
		cr_assert_eq(lj_lane_write(&jo, &l), 0);
		cr_assert_eq(jo_finish(&jo, &got, &len), 0);
		assert_same_json(got, len, ref, which != 2);
		free(got);
		json_decref(ref);
	}
}

Test(json_out, misuse_and_sticky_errors)
{
	jo_session_get g;
	memd_session s = { .struct_size = sizeof(s), .id = "s", .app = "a", .user = "u" };
	memd_event e = { .struct_size = sizeof(e), .id = "e", .role = "user", .text = "\xff" };
	json_out jo;
	char *got;
	size_t len;

	/* no session delivered; events before the session; a session after events */
	jo_session_get_init(&g);
	cr_assert_eq(jo_session_get_events(&g), MEMD_EINVAL);
	cr_assert_eq(jo_session_get_finish(&g, &got), MEMD_EINVAL);
	jo_session_get_init(&g);
	cr_assert_eq(jo_session_get_event(&g, &e), MEMD_EINVAL);
	jo_session_get_clear(&g);
	jo_session_get_init(&g);
	cr_assert_eq(jo_session_get_session(&g, &s), 0);
	cr_assert_eq(jo_session_get_events(&g), 0);
	cr_assert_eq(jo_session_get_session(&g, &s), MEMD_EINVAL);
	jo_session_get_clear(&g);
	jo_session_get_clear(NULL);

	/* the first error sticks: nothing more is written */
	jo_init(&jo);
	cr_assert_eq(jo_lit(&jo, "["), 0);
	cr_assert_eq(jo_event(&jo, &e), MEMD_EINVAL);
	cr_assert_str_eq(jo.bad_field, "text");
	cr_assert_eq(jo_lit(&jo, "]"), MEMD_EINVAL);
	cr_assert_eq(jo_int(&jo, 1), MEMD_EINVAL);
	cr_assert_eq(jo_finish(&jo, &got, &len), MEMD_EINVAL);
	cr_assert_null(jo.buf);

	/* replace: bad ranges refused; growing and shrinking ranges */
	jo_init(&jo);
	jo_lit(&jo, "[1,2,3]");
	cr_assert_eq(jo_replace(&jo, 3, 4, "22222", 5), 0);
	cr_assert_eq(jo_replace(&jo, 1, 2, "", 0), 0);
	cr_assert_eq(jo_replace(&jo, 0, 0, " ", 1), 0);
	cr_assert_eq(jo_finish(&jo, &got, &len), 0);
	cr_assert_str_eq(got, " [,22222,3]");
	cr_assert_eq(len, strlen(got));
	free(got);
	jo_init(&jo);
	jo_lit(&jo, "[]");
	cr_assert_eq(jo_replace(&jo, 2, 1, "x", 1), MEMD_EINVAL);
	jo_clear(&jo);
	jo_init(&jo);
	cr_assert_eq(jo_replace(&jo, 0, 0, "", 0), 0); /* nothing for nothing, nothing allocated */
	cr_assert_eq(jo_replace(&jo, 0, 3, "x", 1), MEMD_EINVAL);
	jo_clear(&jo);
	jo_clear(NULL);

	/* truncate past the end is ignored; an empty writer finishes as "" */
	jo_init(&jo);
	jo_lit(&jo, "abc");
	jo_truncate(&jo, 10);
	jo_truncate(&jo, 1);
	jo_lit(&jo, "z");
	cr_assert_eq(jo_finish(&jo, &got, NULL), 0);
	cr_assert_str_eq(got, "az");
	free(got);
	jo_init(&jo);
	cr_assert_eq(jo_finish(&jo, &got, &len), 0);
	cr_assert_str_eq(got, "");
	cr_assert_eq(len, 0);
	free(got);

	/* output far past the initial buffer */
	jo_init(&jo);
	for (int i = 0; i < 100000; i++)
		jo_int(&jo, INT64_MIN);
	cr_assert_eq(jo_finish(&jo, &got, &len), 0);
	cr_assert_eq(len, 100000 * strlen("-9223372036854775808"));
	free(got);
}

/* ---- the facade's read calls over sqlite ------------------------------------ */

static tu_dir dir;
static memd *m;

static void facade_setup(void)
{
	char yaml[TU_PATH_MAX + 256];
	tu_dir_make(&dir);
	snprintf(yaml, sizeof(yaml),
		 "stores:\n  main: {plugin: sqlite, path: %s/memd.db}\n"
		 "apps:\n  '*': {working_memory: {strategy: all}}\n"
		 "  sb: {working_memory: {strategy: summary_buffer, max_tokens: 1000000}}\n",
		 dir.path);
	m = tu_open(&dir, yaml);
}

static void facade_teardown(void)
{
	memd_close(m);
	tu_dir_remove(&dir);
}

TestSuite(read_path, .init = facade_setup, .fini = facade_teardown);

static memd_scope scope_of(const char *app, const char *sid)
{
	memd_scope sc = { .struct_size = sizeof(sc), .app = app, .user = "u", .session = sid };
	return sc;
}

/* Append events straight to the store: what it holds is what reads give
 * back, hostile texts included (the facade's own append would clean them). */
static void store_put(const char *app, const char *sid, const memd_event *e)
{
	memd_call call = { .struct_size = sizeof(call) };
	memd_scope sc = scope_of(app, sid);
	const memd_event *one[1] = { e };
	int64_t seq;
	memd_append a = { .struct_size = sizeof(a), .events = one, .n_events = 1, .now_us = 1 };
	memd_append_result res = { .struct_size = sizeof(res), .seqs = &seq };
	memd_error err = { 0 };
	cr_assert_eq(store_append(service_session_store(m), &call, &sc, &a, &res, &err), 0, "%s",
		     err.msg);
}

/* A session of FACADE_EVENTS hostile events (role summary at index
 * summary_at, covering the events before it, unless negative); returns
 * whether all stored texts print canonically (always, with canonical_only:
 * then the output must be the old one byte for byte). */
static int fill_session(rng *r, const char *app, const char *sid, int summary_at,
			int canonical_only)
{
	static const char *const roles[] = { "user", "assistant", "tool", "system" };
	char body[64], id[16];
	memd_error err = { 0 };
	char *out = NULL;
	int canonical = 1;

	snprintf(body, sizeof(body), "{\"id\":\"%s\"}", sid);
	tu_ok(memd_session_create(m, app, "u", body, &out, &err), &err, &out);
	for (int i = 0; i < FACADE_EVENTS; i++) {
		rand_event re;
		rand_event_make(r, &re, 0, 1);
		while (canonical_only && !re.canonical) {
			rand_event_free(&re);
			rand_event_make(r, &re, 0, 1);
		}
		snprintf(id, sizeof(id), "e%d", i);
		re.e.id = id;
		re.e.role = i == summary_at ? "summary" : roles[below(r, 4)];
		re.e.covers_seq = i == summary_at ? i : 0;
		canonical &= re.canonical;
		store_put(app, sid, &re.e);
		rand_event_free(&re);
	}
	return canonical;
}

static int32_t ref_event_sink(void *ud, const memd_event *e)
{
	json_t *o = ej_event(e);
	return o && json_array_append_new(ud, o) == 0 ? 0 : MEMD_ENOMEM;
}

static json_t *ref_events(const char *app, const char *sid, const memd_event_query *q)
{
	memd_call call = { .struct_size = sizeof(call) };
	memd_scope sc = scope_of(app, sid);
	json_t *arr = json_array();
	memd_event_sink sink = { sizeof(sink), arr, ref_event_sink };
	memd_error err = { 0 };
	cr_assert_eq(store_events_load(service_session_store(m), &call, &sc, q, &sink, &err), 0,
		     "%s", err.msg);
	return arr;
}

static int32_t ref_session_sink(void *ud, const memd_session *s)
{
	json_t **slot = ud;
	json_decref(*slot);
	*slot = ej_session(s);
	return *slot ? 0 : MEMD_ENOMEM;
}

static json_t *ref_session(const char *app, const char *sid)
{
	memd_call call = { .struct_size = sizeof(call) };
	memd_scope sc = scope_of(app, sid);
	json_t *o = NULL;
	memd_session_sink sink = { sizeof(sink), &o, ref_session_sink };
	memd_error err = { 0 };
	cr_assert_eq(store_session_get(service_session_store(m), &call, &sc, &sink, &err), 0, "%s",
		     err.msg);
	cr_assert_not_null(o);
	return o;
}

static int64_t sum_tokens(json_t *arr)
{
	size_t i;
	json_t *e;
	int64_t t = 0;
	json_array_foreach(arr, i, e)
		t += json_integer_value(json_object_get(e, "tokens"));
	return t;
}

static void check_output(int32_t r, const memd_error *err, char *out, json_t *ref, int exact)
{
	cr_assert_eq(r, 0, "%s", err->msg);
	assert_same_json(out, strlen(out), ref, exact);
	memd_free(out);
	json_decref(ref);
}

Test(read_path, events_pages_equal_the_old_envelope)
{
	rng r = { SEED };
	static const uint32_t limits[] = { 1, 3, FACADE_EVENTS - 1, FACADE_EVENTS, 100 };
	int exact = fill_session(&r, "app", "s1", 5, 1);

	for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
		for (int64_t after = 0; after <= 4; after += 2) {
			memd_event_query q = { .struct_size = sizeof(q), .after_seq = after,
					       .limit = limits[i] + 1 };
			memd_error err = { 0 };
			char *out = NULL;
			json_t *arr = ref_events("app", "s1", &q), *next = NULL;
			int32_t rc = memd_events_list(m, "app", "u", "s1", after, limits[i], &out, &err);
			if (json_array_size(arr) > limits[i]) {
				json_array_remove(arr, limits[i]);
				next = json_object_get(json_array_get(arr, limits[i] - 1), "seq");
			}
			check_output(rc, &err, out,
				     json_pack("{s:o,s:O?}", "events", arr, "next_after_seq", next), exact);
		}
	}
}

Test(read_path, session_get_equals_the_old_object)
{
	rng r = { SEED + 1 };
	int exact = fill_session(&r, "app", "s1", -1, 0);
	memd_get_options opts[] = {
		{ .struct_size = sizeof(memd_get_options) },
		{ .struct_size = sizeof(memd_get_options), .flags = MEMD_GET_EVENTS },
		{ .struct_size = sizeof(memd_get_options), .flags = MEMD_GET_EVENTS, .events = 3 },
		{ .struct_size = sizeof(memd_get_options), .flags = MEMD_GET_EVENTS, .after_seq = 4 },
		{ .struct_size = sizeof(memd_get_options), .flags = MEMD_GET_EVENTS, .events = 2,
		  .after_seq = 100 },
	};

	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
		memd_error err = { 0 };
		char *out = NULL;
		json_t *ref = ref_session("app", "s1");
		int32_t rc = memd_session_get(m, "app", "u", "s1", &opts[i], &out, &err);
		if (opts[i].flags & MEMD_GET_EVENTS) {
			memd_event_query q = { .struct_size = sizeof(q),
					       .flags = opts[i].events ? MEMD_EVQ_NEWEST : 0,
					       .after_seq = opts[i].after_seq,
					       .limit = opts[i].events };
			json_object_set_new(ref, "events", ref_events("app", "s1", &q));
		}
		check_output(rc, &err, out, ref, exact);
	}
}

Test(read_path, context_equals_the_old_envelope)
{
	rng r = { SEED + 2 };
	memd_event_query all = { .struct_size = sizeof(all), .flags = MEMD_EVQ_NO_SUMMARY };
	memd_event_query summary = { .struct_size = sizeof(summary), .flags = MEMD_EVQ_ONLY_SUMMARY };
	int exact_all = fill_session(&r, "app", "s1", 4, 1);
	int exact_sb = fill_session(&r, "sb", "s2", 6, 0);
	memd_error err = { 0 };
	char *out = NULL;
	json_t *events, *sum, *after;
	size_t i;
	json_t *e;
	int32_t rc;

	/* all: every event but summaries, no summary */
	events = ref_events("app", "s1", &all);
	rc = memd_context(m, "app", "u", "s1", &out, &err);
	check_output(rc, &err, out,
		     json_pack("{s:s,s:o?,s:O,s:I}", "strategy", "all", "summary", NULL, "events",
			       events, "tokens", (json_int_t)sum_tokens(events)),
		     exact_all);
	json_decref(events);

	/* summary_buffer: the summary, then the events after what it covers */
	sum = ref_events("sb", "s2", &summary);
	cr_assert_eq(json_array_size(sum), 1);
	events = ref_events("sb", "s2", &all);
	after = json_array();
	json_array_foreach(events, i, e)
		if (json_integer_value(json_object_get(e, "seq")) >
		    json_integer_value(json_object_get(json_array_get(sum, 0), "covers_seq")))
			json_array_append(after, e);
	cr_assert_lt(json_array_size(after), json_array_size(events));
	rc = memd_context(m, "sb", "u", "s2", &out, &err);
	check_output(rc, &err, out,
		     json_pack("{s:s,s:O,s:O,s:I}", "strategy", "summary_buffer", "summary",
			       json_array_get(sum, 0), "events", after, "tokens",
			       (json_int_t)(sum_tokens(after) + sum_tokens(sum))),
		     exact_sb);
	json_decref(after);
	json_decref(events);
	json_decref(sum);
}

Test(read_path, a_stored_string_that_is_not_utf8_fails_the_read_clearly)
{
	memd_event e = { .struct_size = sizeof(e), .id = "e1", .role = "user", .author = "user",
			 .content_json = "{\"parts\":[]}", .text = "broken \xc3(" };
	memd_get_options with_events = { .struct_size = sizeof(with_events), .flags = MEMD_GET_EVENTS };
	memd_error err = { 0 };
	char *out = NULL;

	tu_ok(memd_session_create(m, "app", "u", "{\"id\":\"s1\"}", &out, &err), &err, &out);
	store_put("app", "s1", &e);
	cr_assert_eq(memd_context(m, "app", "u", "s1", &out, &err), MEMD_EIO);
	cr_assert(strstr(err.msg, "text is not valid UTF-8"), "%s", err.msg);
	cr_assert_eq(memd_events_list(m, "app", "u", "s1", 0, 0, &out, &err), MEMD_EIO);
	cr_assert(strstr(err.msg, "text is not valid UTF-8"), "%s", err.msg);
	cr_assert_eq(memd_session_get(m, "app", "u", "s1", &with_events, &out, &err), MEMD_EIO);
	cr_assert(strstr(err.msg, "text is not valid UTF-8"), "%s", err.msg);
	/* the session itself is fine */
	tu_ok(memd_session_get(m, "app", "u", "s1", NULL, &out, &err), &err, &out);
}
