/* SPDX-License-Identifier: MIT */
#include "json/event_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/errname.h"
#include "util/uuid.h"

#define US_PER_SEC 1000000LL
#define SECS_PER_MIN 60
#define FRACTION_DIGITS_MAX 9

/* Civil dates from day counts: Howard Hinnant's civil_from_days, on days
 * counted from 0000-03-01 in 400-year eras (proleptic Gregorian calendar,
 * astronomical years: what gmtime_r gives for every int64 time in us). */
#define SECS_PER_DAY 86400
#define DAYS_0000_03_01_TO_EPOCH 719468
#define DAYS_PER_ERA 146097 /* 400 years */
#define YEARS_PER_ERA 400
#define DAYS_PER_YEAR 365
#define DAYS_PER_4_YEARS 1460
#define DAYS_PER_CENTURY 36524
#define LEAP_YEARS_EVERY 4
#define NONLEAP_CENTURIES_EVERY 100
/* Months from March: (5 * day_of_year + 2) / 153 is the month index,
 * 153 days being five months from March (31+30+31+30+31). */
#define MONTH_DAYS_5 153
#define MONTHS_5 5
#define MONTH_ROUND 2
#define MONTHS_MAR_TO_DEC 10
#define MONTHS_PER_YEAR 12
#define MARCH 3
#define FIELD_WIDTH 2 /* months, days, hours, minutes, seconds */
#define YEAR_WIDTH 4 /* printf "%04d" */
#define MICROS_DIGITS 6
#define DECIMAL 10

static char *put_digits(char *p, uint64_t v, int width)
{
	char tmp[24];
	int n = 0;
	do {
		tmp[n++] = (char)('0' + v % DECIMAL);
		v /= DECIMAL;
	} while (v);
	while (n < width)
		tmp[n++] = '0';
	while (n)
		*p++ = tmp[--n];
	return p;
}

size_t ej_format_time(int64_t unix_us, char buf[EJ_TIME_LEN])
{
	int64_t secs = unix_us / US_PER_SEC, us = unix_us % US_PER_SEC;
	int64_t days, sod, era, doe, yoe, doy, mp, year;
	int month, mday;
	char *p = buf;

	if (us < 0) {
		us += US_PER_SEC;
		secs--;
	}
	days = secs / SECS_PER_DAY;
	sod = secs % SECS_PER_DAY;
	if (sod < 0) {
		sod += SECS_PER_DAY;
		days--;
	}
	days += DAYS_0000_03_01_TO_EPOCH;
	era = (days >= 0 ? days : days - (DAYS_PER_ERA - 1)) / DAYS_PER_ERA;
	doe = days - era * DAYS_PER_ERA;
	yoe = (doe - doe / DAYS_PER_4_YEARS + doe / DAYS_PER_CENTURY - doe / (DAYS_PER_ERA - 1)) /
	      DAYS_PER_YEAR;
	doy = doe - (DAYS_PER_YEAR * yoe + yoe / LEAP_YEARS_EVERY - yoe / NONLEAP_CENTURIES_EVERY);
	mp = (MONTHS_5 * doy + MONTH_ROUND) / MONTH_DAYS_5;
	mday = (int)(doy - (MONTH_DAYS_5 * mp + MONTH_ROUND) / MONTHS_5 + 1);
	month = (int)(mp < MONTHS_MAR_TO_DEC ? mp + MARCH : mp - (MONTHS_PER_YEAR - MARCH));
	year = yoe + era * YEARS_PER_ERA + (month < MARCH);

	/* "%04d": the width counts a minus sign, zeros go after it. */
	if (year < 0) {
		*p++ = '-';
		p = put_digits(p, (uint64_t)-year, YEAR_WIDTH - 1);
	} else {
		p = put_digits(p, (uint64_t)year, YEAR_WIDTH);
	}
	*p++ = '-';
	p = put_digits(p, (uint64_t)month, FIELD_WIDTH);
	*p++ = '-';
	p = put_digits(p, (uint64_t)mday, FIELD_WIDTH);
	*p++ = 'T';
	p = put_digits(p, (uint64_t)(sod / (SECS_PER_MIN * SECS_PER_MIN)), FIELD_WIDTH);
	*p++ = ':';
	p = put_digits(p, (uint64_t)(sod / SECS_PER_MIN % SECS_PER_MIN), FIELD_WIDTH);
	*p++ = ':';
	p = put_digits(p, (uint64_t)(sod % SECS_PER_MIN), FIELD_WIDTH);
	*p++ = '.';
	p = put_digits(p, (uint64_t)us, MICROS_DIGITS);
	*p++ = 'Z';
	*p = '\0';
	return (size_t)(p - buf);
}

static int digits(const char *s, int n, int *ret)
{
	int v = 0;
	for (int i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	*ret = v;
	return 0;
}

int32_t ej_parse_time(const char *text, int64_t *ret_unix_us)
{
	int Y, M, D, h, m, s, oh = 0, om = 0;
	int64_t frac_us = 0, offset = 0;
	const char *p = text;
	struct tm tm = { 0 };
	time_t t;

	if (!text || strlen(text) < 20)
		return MEMD_EINVAL;
	if (digits(p, 4, &Y) || p[4] != '-' || digits(p + 5, 2, &M) || p[7] != '-' ||
	    digits(p + 8, 2, &D) || (p[10] != 'T' && p[10] != 't' && p[10] != ' ') ||
	    digits(p + 11, 2, &h) || p[13] != ':' || digits(p + 14, 2, &m) || p[16] != ':' ||
	    digits(p + 17, 2, &s))
		return MEMD_EINVAL;
	if (M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || m > 59 || s > 60)
		return MEMD_EINVAL;
	p += 19;
	if (*p == '.') {
		int n = 0;
		int64_t scale = US_PER_SEC;
		p++;
		while (*p >= '0' && *p <= '9') {
			if (++n > FRACTION_DIGITS_MAX)
				return MEMD_EINVAL;
			scale /= 10;
			frac_us += (*p - '0') * (scale ? scale : 0);
			p++;
		}
		if (n == 0)
			return MEMD_EINVAL;
	}
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int sign = *p == '-' ? -1 : 1;
		if (digits(p + 1, 2, &oh) || p[3] != ':' || digits(p + 4, 2, &om) || oh > 23 || om > 59)
			return MEMD_EINVAL;
		offset = sign * ((int64_t)oh * SECS_PER_MIN + om) * SECS_PER_MIN;
		p += 6;
	} else {
		return MEMD_EINVAL;
	}
	if (*p)
		return MEMD_EINVAL;
	tm.tm_year = Y - 1900;
	tm.tm_mon = M - 1;
	tm.tm_mday = D;
	tm.tm_hour = h;
	tm.tm_min = m;
	tm.tm_sec = s;
	t = timegm(&tm);
	*ret_unix_us = ((int64_t)t - offset) * US_PER_SEC + frac_us;
	return 0;
}

int ej_utf8_valid(const char *str, size_t len)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0;

	while (i < len) {
		unsigned char c = s[i];
		size_t n;
		uint32_t cp, min;
		if (c < 0x80) {
			i++;
			continue;
		}
		if ((c & 0xE0) == 0xC0) {
			n = 2;
			cp = c & 0x1F;
			min = 0x80;
		} else if ((c & 0xF0) == 0xE0) {
			n = 3;
			cp = c & 0x0F;
			min = 0x800;
		} else if ((c & 0xF8) == 0xF0) {
			n = 4;
			cp = c & 0x07;
			min = 0x10000;
		} else {
			return 0;
		}
		if (i + n > len)
			return 0;
		for (size_t k = 1; k < n; k++) {
			if ((s[i + k] & 0xC0) != 0x80)
				return 0;
			cp = (cp << 6) | (s[i + k] & 0x3F);
		}
		if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
			return 0;
		i += n;
	}
	return 1;
}

int32_t ej_check_id(const char *s, const char *what, memd_error *err)
{
	size_t len;

	if (!s || !*s)
		return memd_error_set(err, MEMD_EINVAL, 0, "%s: must not be empty", what);
	len = strlen(s);
	if (len > MEMD_ID_MAX)
		return memd_error_set(err, MEMD_EINVAL, 0, "%s: longer than %d bytes", what, MEMD_ID_MAX);
	if (!ej_utf8_valid(s, len))
		return memd_error_set(err, MEMD_EINVAL, 0, "%s: not valid UTF-8", what);
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x20 || c == 0x7f)
			return memd_error_set(err, MEMD_EINVAL, 0, "%s: contains a control character", what);
		if (c == '/')
			return memd_error_set(err, MEMD_EINVAL, 0, "%s: contains '/'", what);
	}
	return 0;
}

int32_t ej_check_name(const char *s, memd_error *err)
{
	int32_t r = ej_check_id(s, "artifact name", err);
	if (r < 0)
		return r;
	/* ".." anywhere, not only as a whole segment: the store ABI promises
	 * plugins names without it (api/memd/store.h), and a plugin may build
	 * paths from them. "." is fine. */
	if (strstr(s, ".."))
		return memd_error_set(err, MEMD_EINVAL, 0, "artifact name: must not contain '..'");
	if (strchr(s, '\\'))
		return memd_error_set(err, MEMD_EINVAL, 0, "artifact name: contains a backslash");
	return 0;
}

json_t *ej_load(const char *text)
{
	if (!text)
		return NULL;
	return json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
}

char *ej_dump(const json_t *v)
{
	return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
}

/* Set key to the JSON value parsed from text, or to null. */
static int set_json_text(json_t *obj, const char *key, const char *text)
{
	json_t *v = ej_load(text);
	return json_object_set_new(obj, key, v ? v : json_null());
}

static int set_str(json_t *obj, const char *key, const char *s)
{
	return json_object_set_new(obj, key, s ? json_string(s) : json_null());
}

static int set_time(json_t *obj, const char *key, int64_t us)
{
	char buf[EJ_TIME_LEN];
	ej_format_time(us, buf);
	return json_object_set_new(obj, key, json_string(buf));
}

const char *ej_op_kind_name(uint32_t kind)
{
	switch (kind) {
	case MEMD_OP_REWIND:
		return "rewind";
	case MEMD_OP_REWRITE:
		return "rewrite";
	case MEMD_OP_CLEAR:
		return "clear";
	case MEMD_OP_UNDO:
		return "undo";
	default:
		return NULL;
	}
}

json_t *ej_event(const memd_event *e)
{
	json_t *o = json_object();
	int bad = !o;

	if (bad)
		return NULL;
	bad |= set_str(o, "id", e->id);
	bad |= json_object_set_new(o, "seq", json_integer(e->seq));
	bad |= set_str(o, "invocation_id", e->invocation_id);
	bad |= set_str(o, "author", e->author);
	bad |= set_str(o, "role", e->role);
	bad |= set_str(o, "branch", e->branch);
	bad |= set_json_text(o, "content", e->content_json);
	bad |= set_json_text(o, "actions", e->actions_json);
	bad |= set_json_text(o, "metadata", e->metadata_json);
	bad |= set_time(o, "timestamp", e->timestamp_us);
	bad |= set_str(o, "text", e->text ? e->text : "");
	bad |= json_object_set_new(o, "tokens", json_integer(e->tokens));
	if (e->role && strcmp(e->role, "summary") == 0)
		bad |= json_object_set_new(o, "covers_seq", json_integer(e->covers_seq));
	if (e->hidden_us) {
		json_t *h = json_object();
		bad |= !h;
		bad |= json_object_set_new(o, "hidden", h);
		if (h) {
			bad |= set_time(h, "at", e->hidden_us);
			bad |= set_str(h, "by", e->hidden_by);
			bad |= set_str(h, "kind", ej_op_kind_name(e->hidden_kind));
		}
	}
	if (e->operation)
		bad |= set_str(o, "operation", e->operation);
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *ej_usage(int64_t input_tokens, int64_t output_tokens, int64_t cache_read_tokens,
		 int64_t cache_write_tokens, int64_t cost_micro_usd, int64_t last_prompt_tokens)
{
	return json_pack("{s:I,s:I,s:I,s:I,s:I,s:f}", "input_tokens", (json_int_t)input_tokens,
			 "output_tokens", (json_int_t)output_tokens, "cache_read_tokens",
			 (json_int_t)cache_read_tokens, "cache_write_tokens",
			 (json_int_t)cache_write_tokens, "last_prompt_tokens",
			 (json_int_t)last_prompt_tokens, "cost_usd",
			 (double)cost_micro_usd / EJ_MICRO_PER_USD);
}

int ej_session_has_usage(const memd_session *s)
{
	return s->input_tokens || s->output_tokens || s->cache_read_tokens ||
	       s->cache_write_tokens || s->cost_micro_usd || s->last_prompt_tokens;
}

int ej_session_has_lifecycle(const memd_session *s)
{
	return s->lane_key || s->origin_json || s->previous_session || s->start_reason ||
	       s->end_reason || s->ended_us || ej_session_has_usage(s);
}

json_t *ej_session(const memd_session *s)
{
	json_t *o = json_object();
	json_t *meta;
	int bad = !o;

	if (bad)
		return NULL;
	meta = ej_load(s->metadata_json);
	bad |= set_str(o, "id", s->id);
	bad |= set_str(o, "app", s->app);
	bad |= set_str(o, "user", s->user);
	bad |= set_str(o, "title", s->title);
	bad |= json_object_set_new(o, "metadata", meta ? meta : json_object());
	bad |= json_object_set_new(o, "archived", json_boolean(s->flags & MEMD_SESSION_ARCHIVED));
	bad |= set_time(o, "created", s->created_us);
	bad |= set_time(o, "updated", s->updated_us);
	bad |= json_object_set_new(o, "version", json_integer(s->version));
	bad |= json_object_set_new(o, "last_seq", json_integer(s->last_seq));
	bad |= json_object_set_new(o, "summary_seq",
				   s->summary_seq ? json_integer(s->summary_seq) : json_null());
	bad |= json_object_set_new(o, "message_count", json_integer(s->message_count));
	bad |= set_time(o, "last_activity", s->updated_us);
	if (ej_session_has_lifecycle(s)) {
		json_t *origin = ej_load(s->origin_json);
		bad |= set_str(o, "lane_key", s->lane_key);
		bad |= json_object_set_new(o, "origin", origin ? origin : json_null());
		bad |= set_str(o, "previous_session", s->previous_session);
		bad |= set_str(o, "start_reason", s->start_reason);
		if (s->ended_us)
			bad |= set_time(o, "ended", s->ended_us);
		else
			bad |= json_object_set_new(o, "ended", json_null());
		bad |= set_str(o, "end_reason", s->end_reason);
		bad |= json_object_set_new(o, "usage", ej_usage(s->input_tokens, s->output_tokens,
								s->cache_read_tokens,
								s->cache_write_tokens,
								s->cost_micro_usd,
								s->last_prompt_tokens));
	}
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *ej_artifact(const memd_artifact *a)
{
	json_t *o = json_object();
	int bad = !o;

	if (bad)
		return NULL;
	bad |= set_str(o, "name", a->name);
	bad |= json_object_set_new(o, "version", json_integer(a->version));
	bad |= set_str(o, "mime_type", a->mime_type);
	bad |= json_object_set_new(o, "size", json_integer((json_int_t)a->size));
	bad |= set_time(o, "created", a->created_us);
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *ej_error(int32_t code, const char *message, uint32_t flags)
{
	const char *name = errname(code);

	return json_pack("{s:s,s:s,s:b}", "code", name ? name : ERRNAME_EINTERNAL, "message",
			 message, "retryable", (flags & MEMD_ERROR_RETRYABLE) != 0);
}

json_t *ej_operation(const memd_operation *op)
{
	json_t *o = json_object(), *appended;
	int bad = !o;

	if (bad)
		return NULL;
	appended = op->first_seq ? json_pack("{s:I,s:I}", "first_seq", (json_int_t)op->first_seq,
					     "last_seq", (json_int_t)op->last_seq)
				 : json_null();
	bad |= set_str(o, "id", op->id);
	bad |= set_str(o, "kind", ej_op_kind_name(op->kind));
	bad |= set_time(o, "created", op->created_us);
	bad |= json_object_set_new(o, "version", json_integer(op->version));
	bad |= json_object_set_new(o, "hidden_count", json_integer(op->hidden_count));
	bad |= json_object_set_new(o, "unhidden_count", json_integer(op->unhidden_count));
	bad |= !appended || json_object_set_new(o, "appended", appended);
	bad |= set_str(o, "undo_of", op->undo_of);
	bad |= set_str(o, "undone_by", op->undone_by);
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* ---- content text extraction ------------------------------------------ */

typedef struct textbuf {
	char *p;
	size_t n, cap;
	int oom;
} textbuf;

static void tb_add(textbuf *b, const char *s, size_t len)
{
	if (b->oom)
		return;
	if (b->n + len + 2 > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 256;
		char *np;
		while (cap < b->n + len + 2)
			cap *= 2;
		np = realloc(b->p, cap);
		if (!np) {
			b->oom = 1;
			return;
		}
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, len);
	b->n += len;
	b->p[b->n] = '\0';
}

static void tb_sep(textbuf *b)
{
	if (b->n)
		tb_add(b, "\n", 1);
}

static void tb_json(textbuf *b, json_t *v)
{
	char *t;
	if (json_is_string(v)) {
		tb_add(b, json_string_value(v), json_string_length(v));
		return;
	}
	t = ej_dump(v);
	if (!t) {
		b->oom = 1;
		return;
	}
	tb_add(b, t, strlen(t));
	free(t);
}

char *ej_content_text(json_t *content, memd_error *err)
{
	textbuf b = { 0 };
	json_t *parts, *part;
	size_t i;

	if (json_is_string(content)) {
		tb_add(&b, json_string_value(content), json_string_length(content));
		goto done;
	}
	if (!json_is_object(content) || !json_is_array(parts = json_object_get(content, "parts"))) {
		memd_error_set(err, MEMD_EINVAL, 0,
			       "content: must be a string or an object with a \"parts\" array");
		return NULL;
	}
	json_array_foreach(parts, i, part) {
		json_t *v;
		if (!json_is_object(part)) {
			free(b.p);
			memd_error_set(err, MEMD_EINVAL, 0, "content.parts[%zu]: must be an object", i);
			return NULL;
		}
		if (json_is_string(v = json_object_get(part, "text"))) {
			tb_sep(&b);
			tb_json(&b, v);
		} else if (json_is_object(v = json_object_get(part, "tool_call"))) {
			json_t *name = json_object_get(v, "name"), *args = json_object_get(v, "args");
			tb_sep(&b);
			if (json_is_string(name))
				tb_json(&b, name);
			tb_add(&b, "(", 1);
			if (args)
				tb_json(&b, args);
			tb_add(&b, ")", 1);
		} else if (json_is_object(v = json_object_get(part, "tool_result"))) {
			json_t *c = json_object_get(v, "content");
			if (!c)
				c = json_object_get(v, "result");
			if (json_is_array(c)) {
				/* content parts: their texts */
				json_t *cp;
				size_t k;
				json_array_foreach(c, k, cp) {
					json_t *t = json_object_get(cp, "text");
					if (json_is_string(t)) {
						tb_sep(&b);
						tb_json(&b, t);
					}
				}
			} else if (c) {
				tb_sep(&b);
				tb_json(&b, c);
			}
		}
	}
done:
	if (b.oom || !b.p) {
		if (b.oom) {
			free(b.p);
			memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
			return NULL;
		}
		b.p = strdup("");
		if (!b.p)
			memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	return b.p;
}

/* ---- client events ---------------------------------------------------- */

static const char *const event_fields[] = {
	"id", "invocation_id", "author", "role", "branch", "content", "actions", "metadata",
	"timestamp", NULL,
};

static const char *const client_roles[] = { "user", "assistant", "system", "tool", NULL };

static int in_list(const char *s, const char *const *list)
{
	for (size_t i = 0; list[i]; i++)
		if (strcmp(s, list[i]) == 0)
			return 1;
	return 0;
}

static const char *keep(ej_event_in *e, char *s)
{
	if (!s)
		return NULL;
	e->owned[e->n_owned++] = s;
	return s;
}

void ej_event_in_clear(ej_event_in *e)
{
	if (!e)
		return;
	for (size_t i = 0; i < e->n_owned; i++)
		free(e->owned[i]);
	memset(e, 0, sizeof(*e));
}

/* Optional string field: NULL if absent or null. */
static int32_t opt_string(json_t *in, const char *key, size_t index, const char **ret,
			  memd_error *err)
{
	json_t *v = json_object_get(in, key);
	*ret = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return memd_error_set(err, MEMD_EINVAL, 0, "events[%zu].%s: must be a string", index, key);
	*ret = json_string_value(v);
	return 0;
}

int32_t ej_event_parse(json_t *in, size_t index, const char *default_invocation, int64_t now_us,
		       hostsvc *svc, ej_event_in *ret, memd_error *err)
{
	ej_event_in e = { 0 };
	const char *key, *s;
	json_t *v;
	char what[64];
	char idbuf[UUID_TEXT_LEN + 1];
	int32_t r;

	if (!json_is_object(in))
		return memd_error_set(err, MEMD_EINVAL, 0, "events[%zu]: must be an object", index);
	json_object_foreach(in, key, v) {
		if (!in_list(key, event_fields))
			return memd_error_set(err, MEMD_EINVAL, 0, "events[%zu]: unknown field '%.64s'",
					      index, key);
	}
	e.ev.struct_size = sizeof(e.ev);

	if ((r = opt_string(in, "role", index, &s, err)) < 0)
		return r;
	if (!s)
		return memd_error_set(err, MEMD_EINVAL, 0, "events[%zu].role: required", index);
	if (!in_list(s, client_roles))
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "events[%zu].role: must be user, assistant, system or tool", index);
	e.ev.role = s;

	if ((r = opt_string(in, "id", index, &s, err)) < 0)
		return r;
	if (s) {
		snprintf(what, sizeof(what), "events[%zu].id", index);
		if ((r = ej_check_id(s, what, err)) < 0)
			return r;
		e.ev.id = s;
	} else {
		if (uuid_v7(idbuf) < 0)
			return memd_error_set(err, MEMD_EIO, 0, "cannot generate an event id");
		e.ev.id = idbuf; /* replaced by an owned copy below */
	}

	if ((r = opt_string(in, "invocation_id", index, &s, err)) < 0)
		return r;
	if (!s)
		s = default_invocation;
	if (s) {
		snprintf(what, sizeof(what), "events[%zu].invocation_id", index);
		if ((r = ej_check_id(s, what, err)) < 0)
			return r;
	}
	e.ev.invocation_id = s;

	if ((r = opt_string(in, "author", index, &s, err)) < 0)
		return r;
	if (s) {
		snprintf(what, sizeof(what), "events[%zu].author", index);
		if ((r = ej_check_id(s, what, err)) < 0)
			return r;
	}
	e.ev.author = s ? s : e.ev.role;

	if ((r = opt_string(in, "branch", index, &s, err)) < 0)
		return r;
	if (s) {
		snprintf(what, sizeof(what), "events[%zu].branch", index);
		if ((r = ej_check_id(s, what, err)) < 0)
			return r;
	}
	e.ev.branch = s;

	if ((r = opt_string(in, "timestamp", index, &s, err)) < 0)
		return r;
	e.ev.timestamp_us = now_us;
	if (s && ej_parse_time(s, &e.ev.timestamp_us) < 0)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "events[%zu].timestamp: not an RFC 3339 time", index);

	for (int k = 0; k < 2; k++) {
		const char *field = k ? "metadata" : "actions";
		v = json_object_get(in, field);
		if (v && !json_is_null(v) && !json_is_object(v))
			return memd_error_set(err, MEMD_EINVAL, 0, "events[%zu].%s: must be an object",
					      index, field);
	}

	v = json_object_get(in, "content");
	if (!v || json_is_null(v))
		return memd_error_set(err, MEMD_EINVAL, 0, "events[%zu].content: required", index);

	/* From here on, strings are owned copies. */
	{
		char *text;
		json_t *content;
		memd_error sub = { 0 };

		text = ej_content_text(v, &sub);
		if (!text)
			return memd_error_set(err, sub.code, 0, "events[%zu].%s", index, sub.msg);
		keep(&e, text);
		e.ev.text = text;
		if (hostsvc_count_tokens(svc, text, strlen(text), &e.ev.tokens) < 0)
			e.ev.tokens = 0;
		if (json_is_string(v)) {
			content = json_pack("{s:[{s:O}]}", "parts", "text", v);
			e.ev.content_json = keep(&e, content ? ej_dump(content) : NULL);
			json_decref(content);
		} else {
			e.ev.content_json = keep(&e, ej_dump(v));
		}
		if (!e.ev.content_json)
			goto oom;
		for (int k = 0; k < 2; k++) {
			json_t *o = json_object_get(in, k ? "metadata" : "actions");
			const char *t = NULL;
			if (o && json_is_object(o) && !(t = keep(&e, ej_dump(o))))
				goto oom;
			if (k)
				e.ev.metadata_json = t;
			else
				e.ev.actions_json = t;
		}
		if (e.ev.id == idbuf && !(e.ev.id = keep(&e, strdup(idbuf))))
			goto oom;
	}
	*ret = e;
	return 0;
oom:
	ej_event_in_clear(&e);
	return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
}
