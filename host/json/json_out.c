/* SPDX-License-Identifier: MIT */
#include "json/json_out.h"

#include <stdlib.h>
#include <string.h>

#include "json/event_json.h"

#define JO_INITIAL_CAP 4096
#define JO_INT_MAX_LEN 20 /* "-9223372036854775808" */
#define JO_ESCAPE_LEN 6   /* \u00XX */
#define DECIMAL 10
#define HEX_NIBBLE_BITS 4
#define HEX_NIBBLE_MASK 0xF
#define HEX_DIGITS 4 /* \uXXXX */
#define UESCAPE_LEN 6

/* Byte classes of string contents. */
#define CL_PLAIN 0  /* copied as is */
#define CL_ESCAPE 1 /* '"', '\\' and control characters */
#define CL_UTF8 2   /* start (or stray part) of a multi-byte sequence */

#define ASCII_END 0x80
#define CONTROL_END 0x20

/* UTF-8 as jansson checks it (utf8_check_first / utf8_check_full). */
#define UTF8_CONT_MIN 0x80
#define UTF8_CONT_MAX 0xBF
#define UTF8_LEAD2_MIN 0xC2
#define UTF8_LEAD2_MAX 0xDF
#define UTF8_LEAD3_MIN 0xE0
#define UTF8_LEAD3_MAX 0xEF
#define UTF8_LEAD4_MIN 0xF0
#define UTF8_LEAD4_MAX 0xF4
#define UTF8_E0_CONT_MIN 0xA0 /* below: overlong 3-byte form */
#define UTF8_LEAD_SURROGATES 0xED
#define UTF8_ED_CONT_MAX 0x9F /* above: a surrogate */
#define UTF8_F0_CONT_MIN 0x90 /* below: overlong 4-byte form */
#define UTF8_F4_CONT_MAX 0x8F /* above: past U+10FFFF */

#define SURROGATE_HIGH_MIN 0xD800
#define SURROGATE_HIGH_MAX 0xDBFF
#define SURROGATE_LOW_MIN 0xDC00
#define SURROGATE_LOW_MAX 0xDFFF

/* Number limits jansson applies: integers must fit json_int_t (strtoll),
 * reals must not overflow a double (strtod's ERANGE with HUGE_VAL). */
#define INT64_DIGITS 19
static const char int64_max_digits[] = "9223372036854775807";
static const char int64_min_digits[] = "9223372036854775808";
/* A real overflows iff its value is at least 2^1024 - 2^970, halfway from
 * DBL_MAX to 2^1024 (round to nearest even goes up from there). These are
 * its digits: 309 of them, so reals below 10^308 never overflow and reals
 * from 10^309 on always do. */
#define REAL_OVERFLOW_DIGITS 309
static const char real_overflow_digits[] =
	"17976931348623158079372897140530341507993413271003782693617377898044496829276475094664901"
	"79775872070963302864166928879109465555478519404026306574886715058206819089020007083836762"
	"73854845817711531764475730270069855571366959622842914819860834936475292719074168444365510"
	"704342711559699508093042880177904174497792";
/* Exponents are read up to this magnitude (any beyond it overflows or
 * vanishes the same way). */
#define EXP_SATURATE 1000000000000000LL

static const char hex_upper[] = "0123456789ABCDEF";

#define ROW16(x) x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x
#define P CL_PLAIN
#define E CL_ESCAPE
static const unsigned char byte_class[256] = {
	ROW16(E), ROW16(E),                             /* 0x00-0x1F: control */
	P, P, E, P, P, P, P, P, P, P, P, P, P, P, P, P, /* 0x22: '"' */
	ROW16(P), ROW16(P),                             /* 0x30-0x4F */
	P, P, P, P, P, P, P, P, P, P, P, P, E, P, P, P, /* 0x5C: '\\' */
	ROW16(P), ROW16(P),                             /* 0x60-0x7F */
	ROW16(CL_UTF8), ROW16(CL_UTF8), ROW16(CL_UTF8), ROW16(CL_UTF8),
	ROW16(CL_UTF8), ROW16(CL_UTF8), ROW16(CL_UTF8), ROW16(CL_UTF8),
};
#undef P
#undef E

/* ---- buffer ------------------------------------------------------------ */

void jo_init(json_out *jo)
{
	memset(jo, 0, sizeof(*jo));
}

void jo_clear(json_out *jo)
{
	if (!jo)
		return;
	free(jo->buf);
	jo_init(jo);
}

void jo_truncate(json_out *jo, size_t len)
{
	if (len < jo->len)
		jo->len = len;
}

static int32_t fail(json_out *jo, int32_t code)
{
	if (!jo->error)
		jo->error = code;
	return jo->error;
}

/* Room for more bytes plus the final NUL. */
static int32_t grow(json_out *jo, size_t more)
{
	size_t need, cap;
	char *p;

	if (more > SIZE_MAX - jo->len - 1)
		return fail(jo, MEMD_ENOMEM);
	if (jo->max_len && jo->len + more > jo->max_len)
		return fail(jo, MEMD_ETOOBIG);
	need = jo->len + more + 1;
	cap = jo->cap ? jo->cap : JO_INITIAL_CAP;
	while (cap < need)
		cap = cap > SIZE_MAX / 2 ? need : cap * 2;
	if (jo->max_len && cap > jo->max_len + 1)
		cap = jo->max_len + 1; /* >= need */
	p = realloc(jo->buf, cap);
	if (!p)
		return fail(jo, MEMD_ENOMEM);
	jo->buf = p;
	jo->cap = cap;
	return 0;
}

static inline int32_t reserve(json_out *jo, size_t more)
{
	if (jo->error)
		return jo->error;
	if (jo->cap - jo->len > more)
		return 0;
	return grow(jo, more);
}

/* jo_raw, inlined where it is used here (literals become plain stores). */
static inline int32_t put(json_out *jo, const char *s, size_t n)
{
	int32_t r = reserve(jo, n);
	if (r < 0)
		return r;
	memcpy(jo->buf + jo->len, s, n);
	jo->len += n;
	return 0;
}

#define LIT(jo, s) put((jo), "" s "", sizeof(s) - 1)

int32_t jo_raw(json_out *jo, const char *s, size_t n)
{
	return put(jo, s, n);
}

int32_t jo_replace(json_out *jo, size_t start, size_t end, const char *s, size_t n)
{
	size_t old_n;
	int32_t r;

	if (jo->error)
		return jo->error;
	if (start > end || end > jo->len)
		return fail(jo, MEMD_EINVAL);
	old_n = end - start;
	if (!n && !old_n)
		return 0;
	if (n > old_n && (r = reserve(jo, n - old_n)) < 0)
		return r;
	memmove(jo->buf + start + n, jo->buf + end, jo->len - end);
	memcpy(jo->buf + start, s, n);
	jo->len = jo->len - old_n + n;
	return 0;
}

int32_t jo_finish(json_out *jo, char **ret_text, size_t *ret_len)
{
	int32_t r = reserve(jo, 0);
	if (r < 0) {
		jo_clear(jo);
		return r;
	}
	jo->buf[jo->len] = '\0';
	*ret_text = jo->buf;
	if (ret_len)
		*ret_len = jo->len;
	jo_init(jo);
	return 0;
}

/* ---- scalars ------------------------------------------------------------ */

/* Length of the valid UTF-8 sequence at s (of at most avail bytes), 0 if
 * none. Bytes are read in order up to the first that does not fit. */
static size_t utf8_seq(const unsigned char *s, size_t avail)
{
	unsigned char c = s[0], lo = UTF8_CONT_MIN, hi = UTF8_CONT_MAX;
	size_t n;

	if (c >= UTF8_LEAD2_MIN && c <= UTF8_LEAD2_MAX)
		n = 2;
	else if (c >= UTF8_LEAD3_MIN && c <= UTF8_LEAD3_MAX)
		n = 3;
	else if (c >= UTF8_LEAD4_MIN && c <= UTF8_LEAD4_MAX)
		n = 4;
	else
		return 0;
	if (avail < n)
		return 0;
	if (c == UTF8_LEAD3_MIN)
		lo = UTF8_E0_CONT_MIN;
	else if (c == UTF8_LEAD_SURROGATES)
		hi = UTF8_ED_CONT_MAX;
	else if (c == UTF8_LEAD4_MIN)
		lo = UTF8_F0_CONT_MIN;
	else if (c == UTF8_LEAD4_MAX)
		hi = UTF8_F4_CONT_MAX;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (s[i] < UTF8_CONT_MIN || s[i] > UTF8_CONT_MAX)
			return 0;
	return n;
}

/* The string at s, up to end, or up to its NUL when end is NULL (one pass:
 * C strings need no strlen first). */
static int32_t put_string(json_out *jo, const unsigned char *s, const unsigned char *end)
{
	const unsigned char *run;
	size_t start = jo->len;
	int32_t r;

	if ((r = put(jo, "\"", 1)) < 0)
		return r;
	run = s;
	for (;;) {
		unsigned char c;
		char esc[JO_ESCAPE_LEN];
		size_t esc_n = 2;

		if (end) {
			while (s < end && byte_class[*s] == CL_PLAIN)
				s++;
			if (s >= end)
				break;
		} else {
			while (byte_class[*s] == CL_PLAIN)
				s++;
			if (!*s)
				break;
		}
		c = *s;
		if (byte_class[c] == CL_UTF8) {
			/* Without end, a sequence cut short meets the NUL, which
			 * fails the continuation check before anything past it. */
			size_t k = utf8_seq(s, end ? (size_t)(end - s) : SIZE_MAX);
			if (!k) {
				jo->len = start;
				return fail(jo, MEMD_EINVAL);
			}
			s += k;
			continue;
		}
		if ((r = put(jo, (const char *)run, (size_t)(s - run))) < 0)
			return r;
		esc[0] = '\\';
		switch (c) {
		case '"':
		case '\\':
			esc[1] = (char)c;
			break;
		case '\b':
			esc[1] = 'b';
			break;
		case '\f':
			esc[1] = 'f';
			break;
		case '\n':
			esc[1] = 'n';
			break;
		case '\r':
			esc[1] = 'r';
			break;
		case '\t':
			esc[1] = 't';
			break;
		default:
			esc[1] = 'u';
			esc[2] = '0';
			esc[3] = '0';
			esc[4] = hex_upper[c >> HEX_NIBBLE_BITS];
			esc[5] = hex_upper[c & HEX_NIBBLE_MASK];
			esc_n = JO_ESCAPE_LEN;
		}
		if ((r = put(jo, esc, esc_n)) < 0)
			return r;
		run = ++s;
	}
	if ((r = put(jo, (const char *)run, (size_t)(s - run))) < 0)
		return r;
	return put(jo, "\"", 1);
}

int32_t jo_stringn(json_out *jo, const char *s, size_t n)
{
	return put_string(jo, (const unsigned char *)s, (const unsigned char *)s + n);
}

int32_t jo_string(json_out *jo, const char *s)
{
	if (!s)
		return LIT(jo, "null");
	return put_string(jo, (const unsigned char *)s, NULL);
}

int32_t jo_int(json_out *jo, int64_t v)
{
	char tmp[JO_INT_MAX_LEN];
	char *p = tmp + sizeof(tmp);
	uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;

	do {
		*--p = (char)('0' + u % DECIMAL);
		u /= DECIMAL;
	} while (u);
	if (v < 0)
		*--p = '-';
	return put(jo, p, (size_t)(tmp + sizeof(tmp) - p));
}

int32_t jo_bool(json_out *jo, int v)
{
	return v ? LIT(jo, "true") : LIT(jo, "false");
}

int32_t jo_time(json_out *jo, int64_t unix_us)
{
	int32_t r = reserve(jo, EJ_TIME_LEN + 2);
	size_t n;

	if (r < 0)
		return r;
	jo->buf[jo->len] = '"';
	n = ej_format_time(unix_us, jo->buf + jo->len + 1);
	jo->buf[jo->len + 1 + n] = '"';
	jo->len += n + 2;
	return 0;
}

int32_t jo_json_text(json_out *jo, const char *text, const char *fallback)
{
	size_t n;

	if (text) {
		n = strlen(text);
		if (jo_valid(text, n))
			return put(jo, text, n);
	}
	return put(jo, fallback, strlen(fallback));
}

/* ---- validator ------------------------------------------------------------ */

typedef struct jv {
	const unsigned char *p;
	const unsigned char *end;
} jv;

static int is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

static void jv_ws(jv *v)
{
	while (v->p < v->end && (*v->p == ' ' || *v->p == '\t' || *v->p == '\n' || *v->p == '\r'))
		v->p++;
}

static int hex4(const unsigned char *p, uint32_t *ret)
{
	uint32_t u = 0;
	for (int i = 0; i < HEX_DIGITS; i++) {
		unsigned char c = p[i];
		u <<= HEX_NIBBLE_BITS;
		if (c >= '0' && c <= '9')
			u |= (uint32_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			u |= (uint32_t)(c - 'a' + DECIMAL);
		else if (c >= 'A' && c <= 'F')
			u |= (uint32_t)(c - 'A' + DECIMAL);
		else
			return 0;
	}
	*ret = u;
	return 1;
}

/* A string at v->p ('"'); is_key refuses \u0000 as jansson does in keys. */
static int jv_string(jv *v, int is_key)
{
	const unsigned char *p = v->p + 1, *end = v->end;

	for (;;) {
		unsigned char c;
		while (p < end && byte_class[*p] == CL_PLAIN)
			p++;
		if (p >= end)
			return 0;
		c = *p;
		if (c == '"') {
			v->p = p + 1;
			return 1;
		}
		if (c >= ASCII_END) {
			size_t k = utf8_seq(p, (size_t)(end - p));
			if (!k)
				return 0;
			p += k;
		} else if (c != '\\') {
			return 0; /* a control character */
		} else if (end - p >= 2 && p[1] == 'u') {
			uint32_t u, lo;
			if (end - p < UESCAPE_LEN || !hex4(p + 2, &u))
				return 0;
			p += UESCAPE_LEN;
			if (u >= SURROGATE_HIGH_MIN && u <= SURROGATE_HIGH_MAX) {
				if (end - p < UESCAPE_LEN || p[0] != '\\' || p[1] != 'u' || !hex4(p + 2, &lo) ||
				    lo < SURROGATE_LOW_MIN || lo > SURROGATE_LOW_MAX)
					return 0;
				p += UESCAPE_LEN;
			} else if ((u >= SURROGATE_LOW_MIN && u <= SURROGATE_LOW_MAX) || (u == 0 && is_key)) {
				return 0;
			}
		} else if (end - p >= 2 && p[1] && strchr("\"\\/bfnrt", p[1])) {
			p += 2;
		} else {
			return 0;
		}
	}
}

/* Whether the real with integer digits [ip, ip + ilen), fraction digits
 * [fp, fp + flen) and exponent exp overflows a double. */
static int real_overflows(const unsigned char *ip, size_t ilen, const unsigned char *fp,
			  size_t flen, int64_t exp)
{
	const char *t = real_overflow_digits;
	int64_t mag; /* the value is in [10^(mag-1), 10^mag) */
	size_t skip = 0;

	if (!(ilen == 1 && ip[0] == '0')) {
		mag = (int64_t)ilen + exp;
	} else {
		while (skip < flen && fp[skip] == '0')
			skip++;
		if (skip == flen)
			return 0; /* zero */
		mag = exp - (int64_t)skip;
	}
	if (mag < REAL_OVERFLOW_DIGITS)
		return 0;
	if (mag > REAL_OVERFLOW_DIGITS)
		return 1;
	/* Compare the significant digits with the threshold's. */
	for (size_t i = 0; i < ilen + flen; i++) {
		unsigned char d;
		if (i < ilen) {
			if (ilen == 1 && ip[0] == '0')
				continue;
			d = ip[i];
		} else {
			if (i - ilen < skip)
				continue;
			d = fp[i - ilen];
		}
		if (!*t)
			return 1; /* the threshold's digits, then more: at least it */
		if (d != (unsigned char)*t)
			return d > (unsigned char)*t;
		t++;
	}
	return *t == '\0';
}

/* A number at v->p, with jansson's range rules. */
static int jv_number(jv *v)
{
	const unsigned char *p = v->p, *end = v->end, *ip, *fp = NULL;
	size_t ilen, flen = 0;
	int neg = 0, real = 0;
	int64_t exp = 0;

	if (*p == '-') {
		neg = 1;
		p++;
	}
	ip = p;
	if (p >= end || !is_digit(*p))
		return 0;
	if (*p == '0') {
		if (++p < end && is_digit(*p))
			return 0;
	} else {
		while (p < end && is_digit(*p))
			p++;
	}
	ilen = (size_t)(p - ip);
	if (p < end && *p == '.') {
		fp = ++p;
		if (p >= end || !is_digit(*p))
			return 0;
		while (p < end && is_digit(*p))
			p++;
		flen = (size_t)(p - fp);
		real = 1;
	}
	if (p < end && (*p == 'e' || *p == 'E')) {
		int eneg = 0;
		real = 1;
		if (++p < end && (*p == '+' || *p == '-'))
			eneg = *p++ == '-';
		if (p >= end || !is_digit(*p))
			return 0;
		while (p < end && is_digit(*p)) {
			if (exp < EXP_SATURATE)
				exp = exp * DECIMAL + (*p - '0');
			p++;
		}
		if (eneg)
			exp = -exp;
	}
	v->p = p;
	if (real)
		return !real_overflows(ip, ilen, fp, flen, exp);
	if (ilen != INT64_DIGITS)
		return ilen < INT64_DIGITS;
	return memcmp(ip, neg ? int64_min_digits : int64_max_digits, INT64_DIGITS) <= 0;
}

static int jv_literal(jv *v, const char *word, size_t n)
{
	if ((size_t)(v->end - v->p) < n || memcmp(v->p, word, n) != 0)
		return 0;
	v->p += n;
	return 1;
}

/* One scalar or the opening of a container at v->p. */
enum { JV_SCALAR, JV_OPEN_ARRAY, JV_OPEN_OBJECT, JV_BAD };

static int jv_start(jv *v)
{
	switch (*v->p) {
	case '[':
		v->p++;
		return JV_OPEN_ARRAY;
	case '{':
		v->p++;
		return JV_OPEN_OBJECT;
	case '"':
		return jv_string(v, 0) ? JV_SCALAR : JV_BAD;
	case 't':
		return jv_literal(v, "true", sizeof("true") - 1) ? JV_SCALAR : JV_BAD;
	case 'f':
		return jv_literal(v, "false", sizeof("false") - 1) ? JV_SCALAR : JV_BAD;
	case 'n':
		return jv_literal(v, "null", sizeof("null") - 1) ? JV_SCALAR : JV_BAD;
	default:
		if (*v->p == '-' || is_digit(*v->p))
			return jv_number(v) ? JV_SCALAR : JV_BAD;
		return JV_BAD;
	}
}

#define BITS_PER_BYTE 8

/* Parser states: a value is next, an object key is next, or a value just
 * ended (inside the innermost open container, if any). */
enum { JV_VALUE, JV_KEY, JV_AFTER };

int jo_valid(const char *text, size_t n)
{
	/* Kinds of the open containers, one bit each (1 = object): an explicit
	 * stack instead of recursion, so the deepest text costs 256 bytes. */
	unsigned char is_object[JO_DEPTH_MAX / BITS_PER_BYTE] = { 0 };
	size_t open = 0;
	jv v = { (const unsigned char *)text, (const unsigned char *)text + n };
	int state = JV_VALUE;

	for (;;) {
		jv_ws(&v);
		if (state == JV_VALUE) {
			int kind;
			/* jansson counts a value's depth as the containers around it
			 * plus one, and refuses depths past JSON_PARSER_MAX_DEPTH. */
			if (v.p >= v.end || open + 1 > JO_DEPTH_MAX)
				return 0;
			kind = jv_start(&v);
			if (kind == JV_BAD)
				return 0;
			if (kind == JV_SCALAR) {
				state = JV_AFTER;
				continue;
			}
			if (kind == JV_OPEN_OBJECT)
				is_object[open / BITS_PER_BYTE] |= (unsigned char)(1u << (open % BITS_PER_BYTE));
			else
				is_object[open / BITS_PER_BYTE] &= (unsigned char)~(1u << (open % BITS_PER_BYTE));
			open++;
			jv_ws(&v);
			if (v.p < v.end && *v.p == (kind == JV_OPEN_OBJECT ? '}' : ']')) {
				v.p++;
				open--;
				state = JV_AFTER;
			} else {
				state = kind == JV_OPEN_OBJECT ? JV_KEY : JV_VALUE;
			}
		} else if (state == JV_KEY) {
			if (v.p >= v.end || *v.p != '"' || !jv_string(&v, 1))
				return 0;
			jv_ws(&v);
			if (v.p >= v.end || *v.p != ':')
				return 0;
			v.p++;
			state = JV_VALUE;
		} else {
			int obj;
			if (!open)
				return v.p == v.end;
			if (v.p >= v.end)
				return 0;
			obj = (is_object[(open - 1) / BITS_PER_BYTE] >> ((open - 1) % BITS_PER_BYTE)) & 1;
			if (*v.p == ',') {
				v.p++;
				state = obj ? JV_KEY : JV_VALUE;
			} else if (*v.p == (obj ? '}' : ']')) {
				v.p++;
				open--;
			} else {
				return 0;
			}
		}
	}
}

/* ---- records --------------------------------------------------------------- */

#define KEY(k) "\"" k "\":"

/* A string member's value; remembers field when the string is refused. */
static int32_t str_value(json_out *jo, const char *field, const char *s)
{
	int32_t r = jo_string(jo, s);
	if (r == MEMD_EINVAL && !jo->bad_field)
		jo->bad_field = field;
	return r;
}

int32_t jo_event(json_out *jo, const memd_event *e)
{
	LIT(jo, "{" KEY("id"));
	str_value(jo, "id", e->id);
	LIT(jo, "," KEY("seq"));
	jo_int(jo, e->seq);
	LIT(jo, "," KEY("invocation_id"));
	str_value(jo, "invocation_id", e->invocation_id);
	LIT(jo, "," KEY("author"));
	str_value(jo, "author", e->author);
	LIT(jo, "," KEY("role"));
	str_value(jo, "role", e->role);
	LIT(jo, "," KEY("branch"));
	str_value(jo, "branch", e->branch);
	LIT(jo, "," KEY("content"));
	jo_json_text(jo, e->content_json, "null");
	LIT(jo, "," KEY("actions"));
	jo_json_text(jo, e->actions_json, "null");
	LIT(jo, "," KEY("metadata"));
	jo_json_text(jo, e->metadata_json, "null");
	LIT(jo, "," KEY("timestamp"));
	jo_time(jo, e->timestamp_us);
	if (!jo->no_text) {
		LIT(jo, "," KEY("text"));
		str_value(jo, "text", e->text ? e->text : "");
	}
	LIT(jo, "," KEY("tokens"));
	jo_int(jo, e->tokens);
	if (e->role && strcmp(e->role, "summary") == 0) {
		LIT(jo, "," KEY("covers_seq"));
		jo_int(jo, e->covers_seq);
	}
	if (e->hidden_us) {
		LIT(jo, "," KEY("hidden") "{" KEY("at"));
		jo_time(jo, e->hidden_us);
		LIT(jo, "," KEY("by"));
		str_value(jo, "hidden.by", e->hidden_by);
		LIT(jo, "," KEY("kind"));
		jo_string(jo, ej_op_kind_name(e->hidden_kind));
		LIT(jo, "}");
	}
	if (e->operation) {
		LIT(jo, "," KEY("operation"));
		str_value(jo, "operation", e->operation);
	}
	return LIT(jo, "}");
}

/* Usage that is all zeros, as jansson dumps ej_usage(0, ...). */
#define JO_USAGE_ZERO                                                                   \
	"{\"input_tokens\":0,\"output_tokens\":0,\"cache_read_tokens\":0,"                  \
	"\"cache_write_tokens\":0,\"last_prompt_tokens\":0,\"cost_usd\":0.0}"

int32_t jo_usage(json_out *jo, int64_t input_tokens, int64_t output_tokens,
		 int64_t cache_read_tokens, int64_t cache_write_tokens, int64_t cost_micro_usd,
		 int64_t last_prompt_tokens)
{
	json_t *usage;
	char *text;

	if (!input_tokens && !output_tokens && !cache_read_tokens && !cache_write_tokens &&
	    !cost_micro_usd && !last_prompt_tokens)
		return jo_lit(jo, JO_USAGE_ZERO);
	/* A real number: built with jansson and copied as jansson dumps it. */
	usage = ej_usage(input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
			 cost_micro_usd, last_prompt_tokens);
	text = usage ? json_dumps(usage, JSON_COMPACT) : NULL;
	json_decref(usage);
	if (!text) {
		if (!jo->error)
			jo->error = MEMD_ENOMEM;
		return jo->error;
	}
	jo_raw(jo, text, strlen(text));
	free(text);
	return jo->error;
}

/* The members ej_session adds for a session of a lane (usage as
 * jo_usage writes it). */
static int32_t jo_session_lifecycle(json_out *jo, const memd_session *s)
{
	LIT(jo, "," KEY("lane_key"));
	str_value(jo, "lane_key", s->lane_key);
	LIT(jo, "," KEY("origin"));
	jo_json_text(jo, s->origin_json, "null");
	LIT(jo, "," KEY("previous_session"));
	str_value(jo, "previous_session", s->previous_session);
	LIT(jo, "," KEY("start_reason"));
	str_value(jo, "start_reason", s->start_reason);
	LIT(jo, "," KEY("ended"));
	if (s->ended_us)
		jo_time(jo, s->ended_us);
	else
		LIT(jo, "null");
	LIT(jo, "," KEY("end_reason"));
	str_value(jo, "end_reason", s->end_reason);
	LIT(jo, "," KEY("usage"));
	return jo_usage(jo, s->input_tokens, s->output_tokens, s->cache_read_tokens,
			s->cache_write_tokens, s->cost_micro_usd, s->last_prompt_tokens);
}

int32_t jo_session_open(json_out *jo, const memd_session *s)
{
	LIT(jo, "{" KEY("id"));
	str_value(jo, "id", s->id);
	LIT(jo, "," KEY("app"));
	str_value(jo, "app", s->app);
	LIT(jo, "," KEY("user"));
	str_value(jo, "user", s->user);
	LIT(jo, "," KEY("title"));
	str_value(jo, "title", s->title);
	LIT(jo, "," KEY("metadata"));
	jo_json_text(jo, s->metadata_json, "{}");
	LIT(jo, "," KEY("archived"));
	jo_bool(jo, (s->flags & MEMD_SESSION_ARCHIVED) != 0);
	LIT(jo, "," KEY("created"));
	jo_time(jo, s->created_us);
	LIT(jo, "," KEY("updated"));
	jo_time(jo, s->updated_us);
	LIT(jo, "," KEY("version"));
	jo_int(jo, s->version);
	LIT(jo, "," KEY("last_seq"));
	jo_int(jo, s->last_seq);
	LIT(jo, "," KEY("summary_seq"));
	if (s->summary_seq)
		jo_int(jo, s->summary_seq);
	else
		LIT(jo, "null");
	LIT(jo, "," KEY("message_count"));
	jo_int(jo, s->message_count);
	LIT(jo, "," KEY("last_activity"));
	jo_time(jo, s->updated_us);
	if (!ej_session_has_lifecycle(s))
		return jo->error;
	return jo_session_lifecycle(jo, s);
}

int32_t jo_session(json_out *jo, const memd_session *s)
{
	jo_session_open(jo, s);
	return LIT(jo, "}");
}

/* ---- envelopes ---------------------------------------------------------------- */

int32_t jo_context_begin(jo_context *c, const char *strategy)
{
	memset(c, 0, sizeof(*c));
	jo_init(&c->out);
	LIT(&c->out, "{" KEY("strategy"));
	str_value(&c->out, "strategy", strategy);
	LIT(&c->out, "," KEY("summary"));
	c->summary_at = c->out.len;
	return c->out.error;
}

int32_t jo_context_summary(jo_context *c, const memd_event *e)
{
	json_out late;
	int32_t r;

	c->tokens += e->tokens;
	if (c->out.error)
		return c->out.error;
	if (!c->n_events) {
		jo_truncate(&c->out, c->summary_at);
		c->has_summary = 1;
		return jo_event(&c->out, e);
	}
	/* Past the contract (summary first): replace the one written. */
	jo_init(&late);
	if ((r = jo_event(&late, e)) < 0) {
		c->out.bad_field = late.bad_field;
		jo_clear(&late);
		return fail(&c->out, r);
	}
	r = jo_replace(&c->out, c->summary_at, c->summary_end, late.buf, late.len);
	c->summary_end = c->summary_at + late.len;
	c->has_summary = 1;
	jo_clear(&late);
	return r;
}

/* The summary (or null) is complete: open the events array. */
static int32_t context_open_events(jo_context *c)
{
	if (!c->has_summary)
		LIT(&c->out, "null");
	c->summary_end = c->out.len;
	return LIT(&c->out, "," KEY("events") "[");
}

int32_t jo_context_event(jo_context *c, const memd_event *e)
{
	c->tokens += e->tokens;
	if (!c->n_events)
		context_open_events(c);
	else
		LIT(&c->out, ",");
	c->n_events++;
	return jo_event(&c->out, e);
}

int32_t jo_context_finish(jo_context *c, char **ret_json)
{
	int32_t r;

	if (!c->n_events)
		context_open_events(c);
	LIT(&c->out, "]," KEY("tokens"));
	jo_int(&c->out, c->tokens);
	if (c->memories_json) {
		LIT(&c->out, "," KEY("memories"));
		jo_raw(&c->out, c->memories_json, strlen(c->memories_json));
	}
	if (c->notice_reason) {
		LIT(&c->out, "," KEY("notice") "{" KEY("reason"));
		str_value(&c->out, "notice", c->notice_reason);
		LIT(&c->out, "," KEY("text"));
		str_value(&c->out, "notice", c->notice_text);
		LIT(&c->out, "}");
	}
	LIT(&c->out, "}");
	r = jo_finish(&c->out, ret_json, NULL);
	jo_context_clear(c);
	return r;
}

void jo_context_clear(jo_context *c)
{
	if (!c)
		return;
	jo_clear(&c->out);
	memset(c, 0, sizeof(*c));
}

int32_t jo_page_begin(jo_page *p, uint32_t limit)
{
	memset(p, 0, sizeof(*p));
	jo_init(&p->out);
	if (!limit)
		return fail(&p->out, MEMD_EINVAL);
	p->limit = limit;
	return LIT(&p->out, "{" KEY("events") "[");
}

int32_t jo_page_event(jo_page *p, const memd_event *e)
{
	size_t before = p->out.len;
	int64_t prev_seq = p->last_seq;
	int32_t r;

	if (p->full || p->n_events >= p->limit) {
		p->more = 1;
		return p->out.error;
	}
	if (p->n_events++)
		LIT(&p->out, ",");
	p->last_seq = e->seq;
	r = jo_event(&p->out, e);
	if (r == 0 && p->max_bytes && p->out.len > p->max_bytes && p->n_events > 1) {
		/* The next page starts with this event. */
		jo_truncate(&p->out, before);
		p->n_events--;
		p->last_seq = prev_seq;
		p->full = p->more = 1;
	}
	return r;
}

int32_t jo_page_finish(jo_page *p, char **ret_json)
{
	int32_t r;

	LIT(&p->out, "]," KEY("next_after_seq"));
	if (p->more)
		jo_int(&p->out, p->last_seq);
	else
		LIT(&p->out, "null");
	LIT(&p->out, "}");
	r = jo_finish(&p->out, ret_json, NULL);
	jo_page_clear(p);
	return r;
}

void jo_page_clear(jo_page *p)
{
	if (!p)
		return;
	jo_clear(&p->out);
	memset(p, 0, sizeof(*p));
}

void jo_session_get_init(jo_session_get *g)
{
	memset(g, 0, sizeof(*g));
	jo_init(&g->out);
}

int32_t jo_session_get_session(jo_session_get *g, const memd_session *s)
{
	if (g->events_open)
		return fail(&g->out, MEMD_EINVAL);
	jo_truncate(&g->out, 0);
	g->has_session = 1;
	return jo_session_open(&g->out, s);
}

int32_t jo_session_get_events(jo_session_get *g)
{
	if (!g->has_session || g->events_open)
		return fail(&g->out, MEMD_EINVAL);
	g->events_open = 1;
	return LIT(&g->out, "," KEY("events") "[");
}

int32_t jo_session_get_event(jo_session_get *g, const memd_event *e)
{
	if (!g->events_open)
		return fail(&g->out, MEMD_EINVAL);
	if (g->n_events++)
		LIT(&g->out, ",");
	return jo_event(&g->out, e);
}

int32_t jo_session_get_finish(jo_session_get *g, char **ret_json)
{
	int32_t r;

	if (!g->has_session)
		fail(&g->out, MEMD_EINVAL);
	if (g->events_open)
		LIT(&g->out, "]");
	LIT(&g->out, "}");
	r = jo_finish(&g->out, ret_json, NULL);
	jo_session_get_clear(g);
	return r;
}

void jo_session_get_clear(jo_session_get *g)
{
	if (!g)
		return;
	jo_clear(&g->out);
	memset(g, 0, sizeof(*g));
}
