/* SPDX-License-Identifier: MIT */
#include "lane_tz.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memd/plugin.h>

#define TZ_MAGIC "TZif"
#define TZ_MAGIC_LEN 4
#define TZ_HEADER_LEN 44          /* magic, version, 15 reserved, six counts */
#define TZ_COUNTS_OFFSET 20       /* where the six 32-bit counts start */
#define TZ_TYPE_LEN 6             /* utoff (4), isdst (1), desigidx (1) */
#define TZ_FILE_MAX (1u << 20)    /* real zones are a few KiB; refuse anything huge */
#define TZ_UTOFF_MIN (-89999)     /* RFC 8536 3.2: -25:59:59 */
#define TZ_UTOFF_MAX 93599        /* +25:59:59 */
#define TZ_WINDOW_S (26 * 3600)   /* no offset is larger: the span to search for a local time */
#define TZ_RULE_HOURS_MAX 167     /* RFC 8536 3.3.1: a rule's time may be -167..167 h */
#define TZ_OFFSET_HOURS_MAX 24    /* POSIX: an offset is at most 24 h */
#define TZ_DST_DEFAULT_S 3600     /* a DST offset not given is one hour ahead */
#define TZ_RULE_TIME_DEFAULT_S 7200 /* 02:00, a rule's time when not given */
#define TZ_NAME_MIN 3             /* POSIX: a zone abbreviation has >= 3 chars */
#define TZ_DAYS_PER_WEEK 7
#define TZ_WEEKDAY_EPOCH 4        /* 1970-01-01 was a Thursday (0 = Sunday) */
#define TZ_LAST_WEEK 5            /* Mm.5.d: the last d of the month */
#define TZ_FEB29_DAY 59           /* zero-based day of the year of Feb 29 */
#define TZ_RULE_EVENTS 6          /* two changes a year, three years */
#define TZ_UTC "UTC"
#define TZ_LOCALTIME_NAME "localtime"
#define TZ_ZONEINFO_MARK "zoneinfo/"
#define TZ_US_RULE ",M3.2.0,M11.1.0" /* POSIX's default when a DST name has no rule */

typedef struct tz_type {
	int32_t utoff;
	uint8_t isdst;
} tz_type;

typedef enum rule_kind { RULE_JULIAN1, RULE_JULIAN0, RULE_MONTH } rule_kind;

typedef struct tz_date {
	rule_kind kind;
	int n;                    /* Jn: 1..365, n: 0..365 */
	int month, week, wday;    /* Mm.w.d */
	int32_t time;             /* seconds after local midnight, -167..167 h */
} tz_date;

typedef struct tz_rule {
	int32_t std_off;          /* seconds east of UTC */
	int32_t dst_off;
	int has_dst;
	tz_date start, end;
} tz_rule;

struct lane_tz {
	char *name;
	int64_t *times;           /* transitions, ascending */
	uint8_t *idx;             /* the type after each */
	uint32_t timecnt;
	tz_type *types;
	uint32_t typecnt;
	int has_rule;             /* the footer: for instants past the table */
	tz_rule rule;
};

/* ---- calendar ------------------------------------------------------------- */

/* Howard Hinnant's days_from_civil / civil_from_days. */
int64_t lane_tz_days_from_civil(int64_t y, int m, int d)
{
	int64_t era, yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

void lane_tz_civil_from_days(int64_t z, int64_t *ret_year, int *ret_month, int *ret_day)
{
	int64_t era, doe, yoe, y, doy, mp;

	z += 719468;
	era = (z >= 0 ? z : z - 146096) / 146097;
	doe = z - era * 146097;
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	y = yoe + era * 400;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	*ret_day = (int)(doy - (153 * mp + 2) / 5 + 1);
	*ret_month = (int)(mp < 10 ? mp + 3 : mp - 9);
	*ret_year = y + (*ret_month <= 2);
}

static int64_t floor_div(int64_t a, int64_t b)
{
	int64_t q = a / b;

	return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

static int is_leap(int64_t y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int month_days(int64_t y, int m)
{
	static const int days[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };

	return days[m - 1] + (m == 2 && is_leap(y));
}

static int64_t year_of(int64_t unix_s)
{
	int64_t y;
	int m, d;

	lane_tz_civil_from_days(floor_div(unix_s, LANE_TZ_SECS_PER_DAY), &y, &m, &d);
	return y;
}

/* ---- the POSIX TZ rule ---------------------------------------------------- */

/* The day (days since the epoch) a rule date falls on in year y. */
static int64_t rule_day(const tz_date *d, int64_t y)
{
	int64_t jan1 = lane_tz_days_from_civil(y, 1, 1), first;
	int wd, last;

	switch (d->kind) {
	case RULE_JULIAN1: /* Feb 29 is never counted */
		return jan1 + d->n - 1 + (is_leap(y) && d->n - 1 >= TZ_FEB29_DAY);
	case RULE_JULIAN0:
		return jan1 + d->n;
	case RULE_MONTH:
	default:
		first = lane_tz_days_from_civil(y, d->month, 1);
		wd = (int)((first + TZ_WEEKDAY_EPOCH) % TZ_DAYS_PER_WEEK);
		if (wd < 0)
			wd += TZ_DAYS_PER_WEEK;
		first += (d->wday - wd + TZ_DAYS_PER_WEEK) % TZ_DAYS_PER_WEEK;
		first += (int64_t)TZ_DAYS_PER_WEEK * (d->week - 1);
		last = month_days(y, d->month);
		while (first >= lane_tz_days_from_civil(y, d->month, 1) + last)
			first -= TZ_DAYS_PER_WEEK;
		return first;
	}
}

typedef struct rule_event {
	int64_t at;
	int32_t off;      /* in force from at */
	int dst;
} rule_event;

static int event_cmp(const void *a, const void *b)
{
	const rule_event *x = a, *y = b;

	if (x->at != y->at)
		return x->at < y->at ? -1 : 1;
	/* at one instant, a year's end of DST before the next year's start
	 * (a zone on DST all year stays on it) */
	return x->dst - y->dst;
}

/* The DST starts and ends of years y0..y0+2, sorted. */
static void rule_events(const tz_rule *r, int64_t y0, rule_event ev[TZ_RULE_EVENTS])
{
	for (int i = 0; i < TZ_RULE_EVENTS / 2; i++) {
		int64_t y = y0 + i;
		/* the start's time is in standard time, the end's in DST */
		ev[2 * i] = (rule_event){ rule_day(&r->start, y) * LANE_TZ_SECS_PER_DAY +
						  r->start.time - r->std_off,
					  r->dst_off, 1 };
		ev[2 * i + 1] = (rule_event){ rule_day(&r->end, y) * LANE_TZ_SECS_PER_DAY +
						      r->end.time - r->dst_off,
					      r->std_off, 0 };
	}
	qsort(ev, TZ_RULE_EVENTS, sizeof(ev[0]), event_cmp);
}

static int32_t rule_offset(const tz_rule *r, int64_t u)
{
	rule_event ev[TZ_RULE_EVENTS];
	int32_t off = r->std_off;

	if (!r->has_dst)
		return r->std_off;
	rule_events(r, year_of(u) - 1, ev);
	for (int i = 0; i < TZ_RULE_EVENTS && ev[i].at <= u; i++)
		off = ev[i].off;
	return off;
}

typedef struct rp {
	const char *s;
} rp;

/* A zone abbreviation: <...> or 3+ letters. */
static int parse_abbr(rp *p)
{
	const char *s = p->s;
	size_t n = 0;

	if (*s == '<') {
		for (s++; *s && *s != '>'; s++, n++)
			if (!isalnum((unsigned char)*s) && *s != '+' && *s != '-')
				return -1;
		if (*s != '>' || n < TZ_NAME_MIN)
			return -1;
		p->s = s + 1;
		return 0;
	}
	for (; isalpha((unsigned char)*s); s++)
		n++;
	if (n < TZ_NAME_MIN)
		return -1;
	p->s = s;
	return 0;
}

/* [+-]hh[:mm[:ss]], hh <= max_hours, into seconds. */
static int parse_hms(rp *p, int max_hours, int32_t *ret)
{
	const char *s = p->s;
	int sign = 1;
	long h, m = 0, sec = 0;
	char *end;

	if (*s == '+' || *s == '-')
		sign = *s++ == '-' ? -1 : 1;
	if (!isdigit((unsigned char)*s))
		return -1;
	h = strtol(s, &end, 10);
	if (h > max_hours)
		return -1;
	s = end;
	if (*s == ':') {
		if (!isdigit((unsigned char)s[1]))
			return -1;
		m = strtol(s + 1, &end, 10);
		s = end;
		if (m > 59)
			return -1;
		if (*s == ':') {
			if (!isdigit((unsigned char)s[1]))
				return -1;
			sec = strtol(s + 1, &end, 10);
			s = end;
			if (sec > 59)
				return -1;
		}
	}
	p->s = s;
	*ret = (int32_t)(sign * (h * 3600 + m * 60 + sec));
	return 0;
}

static int parse_num(rp *p, long min, long max, int *ret)
{
	char *end;
	long v;

	if (!isdigit((unsigned char)*p->s))
		return -1;
	v = strtol(p->s, &end, 10);
	if (v < min || v > max)
		return -1;
	p->s = end;
	*ret = (int)v;
	return 0;
}

static int parse_date(rp *p, tz_date *d)
{
	d->time = TZ_RULE_TIME_DEFAULT_S;
	if (*p->s == 'J') {
		p->s++;
		d->kind = RULE_JULIAN1;
		if (parse_num(p, 1, 365, &d->n) < 0)
			return -1;
	} else if (*p->s == 'M') {
		p->s++;
		d->kind = RULE_MONTH;
		if (parse_num(p, 1, 12, &d->month) < 0 || *p->s++ != '.' ||
		    parse_num(p, 1, TZ_LAST_WEEK, &d->week) < 0 || *p->s++ != '.' ||
		    parse_num(p, 0, TZ_DAYS_PER_WEEK - 1, &d->wday) < 0)
			return -1;
	} else {
		d->kind = RULE_JULIAN0;
		if (parse_num(p, 0, 365, &d->n) < 0)
			return -1;
	}
	if (*p->s == '/') {
		p->s++;
		if (parse_hms(p, TZ_RULE_HOURS_MAX, &d->time) < 0)
			return -1;
	}
	return 0;
}

/* A POSIX TZ string ("CET-1CEST,M3.5.0,M10.5.0/3") into r; -1 if it is
 * not one. */
static int parse_rule(const char *text, tz_rule *r)
{
	rp p = { text };
	int32_t off;

	memset(r, 0, sizeof(*r));
	if (parse_abbr(&p) < 0 || parse_hms(&p, TZ_OFFSET_HOURS_MAX, &off) < 0)
		return -1;
	r->std_off = -off; /* POSIX counts west of Greenwich as positive */
	if (!*p.s)
		return 0;
	if (parse_abbr(&p) < 0)
		return -1;
	r->has_dst = 1;
	r->dst_off = r->std_off + TZ_DST_DEFAULT_S;
	if (*p.s && *p.s != ',') {
		if (parse_hms(&p, TZ_OFFSET_HOURS_MAX, &off) < 0)
			return -1;
		r->dst_off = -off;
	}
	if (!*p.s)
		p.s = TZ_US_RULE;
	if (*p.s++ != ',' || parse_date(&p, &r->start) < 0 || *p.s++ != ',' ||
	    parse_date(&p, &r->end) < 0 || *p.s)
		return -1;
	return 0;
}

/* ---- offsets and transitions ---------------------------------------------- */

/* Index of the last transition at or before u, or -1. */
static int64_t last_at_or_before(const lane_tz *z, int64_t u)
{
	int64_t lo = 0, hi = z->timecnt; /* first index with times > u */

	while (lo < hi) {
		int64_t mid = lo + (hi - lo) / 2;
		if (z->times[mid] <= u)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo - 1;
}

int32_t lane_tz_offset(const lane_tz *z, int64_t u)
{
	int64_t i;

	if (z->timecnt == 0)
		return z->has_rule ? rule_offset(&z->rule, u) : z->types[0].utoff;
	i = last_at_or_before(z, u);
	if (i < 0)
		return z->types[0].utoff; /* RFC 8536 3.2: type 0 before the first */
	if (i == (int64_t)z->timecnt - 1 && u > z->times[i] && z->has_rule)
		return rule_offset(&z->rule, u);
	return z->types[z->idx[i]].utoff;
}

/* The first instant T in (after, limit] where the offset changes
 * (offset(T) != offset(T - 1)); 1 and *ret_t, or 0 if none. */
static int next_change(const lane_tz *z, int64_t after, int64_t limit, int64_t *ret_t)
{
	int64_t i = z->timecnt ? last_at_or_before(z, after) + 1 : 0;

	for (; i < (int64_t)z->timecnt && z->times[i] <= limit; i++) {
		int64_t t = z->times[i];
		if (lane_tz_offset(z, t) != lane_tz_offset(z, t - 1)) {
			*ret_t = t;
			return 1;
		}
	}
	if (i < (int64_t)z->timecnt || !z->has_rule || !z->rule.has_dst)
		return 0;
	/* past the table: the rule's changes */
	int64_t from = z->timecnt ? z->times[z->timecnt - 1] : INT64_MIN;
	if (from < after)
		from = after;
	for (int64_t y = year_of(from) - 1; y <= year_of(limit) + 1; y++) {
		rule_event ev[TZ_RULE_EVENTS];
		rule_events(&z->rule, y, ev);
		for (int k = 0; k < TZ_RULE_EVENTS; k++) {
			int64_t t = ev[k].at;
			if (t <= from || t > limit)
				continue;
			if (lane_tz_offset(z, t) != lane_tz_offset(z, t - 1)) {
				*ret_t = t;
				return 1;
			}
		}
	}
	return 0;
}

int lane_tz_local_to_utc(const lane_tz *z, int64_t t, int64_t ret_utc[LANE_TZ_CANDIDATES_MAX])
{
	int64_t lo = t - TZ_WINDOW_S, hi = t + TZ_WINDOW_S, at = lo, ch;
	int64_t found[LANE_TZ_CANDIDATES_MAX];
	int n = 0;
	int32_t off = lane_tz_offset(z, lo);

	/* Every offset in force within a day of t: t - offset is an instant
	 * with local time t iff that offset is in force there. */
	for (;;) {
		int64_t u = t - off;
		int seen = 0;
		for (int k = 0; k < n; k++)
			seen |= found[k] == u;
		if (!seen && n < LANE_TZ_CANDIDATES_MAX && lane_tz_offset(z, u) == off)
			found[n++] = u;
		if (!next_change(z, at, hi, &ch))
			break;
		at = ch;
		off = lane_tz_offset(z, ch);
	}
	if (n == LANE_TZ_CANDIDATES_MAX && found[0] > found[1]) {
		int64_t x = found[0];
		found[0] = found[1];
		found[1] = x;
	}
	if (n > 0) {
		memcpy(ret_utc, found, sizeof(found[0]) * (size_t)n);
		return n;
	}
	/* In a gap: the change whose instant's local time jumps over t. */
	at = lo;
	while (next_change(z, at, hi, &ch)) {
		if (ch - 1 + lane_tz_offset(z, ch - 1) < t && ch + lane_tz_offset(z, ch) > t) {
			ret_utc[0] = ch;
			return 0;
		}
		at = ch;
	}
	ret_utc[0] = t - lane_tz_offset(z, t); /* not reached for a consistent zone */
	return 0;
}

const char *lane_tz_name(const lane_tz *z)
{
	return z->name;
}

/* ---- loading -------------------------------------------------------------- */

void lane_tz_free(lane_tz *z)
{
	if (!z)
		return;
	free(z->name);
	free(z->times);
	free(z->idx);
	free(z->types);
	free(z);
}

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int64_t be64(const unsigned char *p)
{
	return (int64_t)((uint64_t)be32(p) << 32 | be32(p + 4));
}

typedef struct tz_counts {
	uint32_t isut, isstd, leap, time, type, chars;
} tz_counts;

static size_t block_len(const tz_counts *c, size_t tlen)
{
	return (size_t)c->time * tlen + c->time + (size_t)c->type * TZ_TYPE_LEN + c->chars +
	       (size_t)c->leap * (tlen + 4) + c->isstd + c->isut;
}

static int read_counts(const unsigned char *p, size_t len, tz_counts *c)
{
	if (len < TZ_HEADER_LEN || memcmp(p, TZ_MAGIC, TZ_MAGIC_LEN) != 0)
		return -1;
	p += TZ_COUNTS_OFFSET;
	c->isut = be32(p);
	c->isstd = be32(p + 4);
	c->leap = be32(p + 8);
	c->time = be32(p + 12);
	c->type = be32(p + 16);
	c->chars = be32(p + 20);
	if (c->time > TZ_FILE_MAX || c->type > TZ_FILE_MAX || c->chars > TZ_FILE_MAX ||
	    c->leap > TZ_FILE_MAX || c->isstd > TZ_FILE_MAX || c->isut > TZ_FILE_MAX)
		return -1;
	return 0;
}

/* Parse the TZif bytes of the zone called name into *ret. */
static int32_t parse_tzif(const char *name, const unsigned char *buf, size_t len, lane_tz **ret,
			  memd_error *err)
{
	const unsigned char *p = buf, *data;
	size_t tlen = 4, blen;
	tz_counts c;
	lane_tz *z;

	if (read_counts(p, len, &c) < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "timezone %s: not a TZif file", name);
	blen = block_len(&c, 4);
	if (p[TZ_MAGIC_LEN] >= '2') {
		/* skip the 32-bit block to the 64-bit header and data */
		if (TZ_HEADER_LEN + blen > len)
			goto damaged;
		p += TZ_HEADER_LEN + blen;
		len -= TZ_HEADER_LEN + blen;
		if (read_counts(p, len, &c) < 0)
			goto damaged;
		tlen = 8;
		blen = block_len(&c, 8);
	}
	if (TZ_HEADER_LEN + blen > len)
		goto damaged;
	if (c.leap)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "timezone %s: zones with leap seconds (right/...) are not "
				      "supported",
				      name);
	if (c.type == 0 || (c.isstd && c.isstd != c.type) || (c.isut && c.isut != c.type))
		goto damaged;
	data = p + TZ_HEADER_LEN;

	z = calloc(1, sizeof(*z));
	if (!z)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	z->name = strdup(name);
	z->times = malloc(sizeof(int64_t) * (c.time ? c.time : 1));
	z->idx = malloc(c.time ? c.time : 1);
	z->types = malloc(sizeof(tz_type) * c.type);
	if (!z->name || !z->times || !z->idx || !z->types) {
		lane_tz_free(z);
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	z->timecnt = c.time;
	z->typecnt = c.type;
	for (uint32_t i = 0; i < c.time; i++) {
		const unsigned char *t = data + (size_t)i * tlen;
		z->times[i] = tlen == 8 ? be64(t) : (int64_t)(int32_t)be32(t);
		if (i > 0 && z->times[i] <= z->times[i - 1])
			goto bad;
	}
	data += (size_t)c.time * tlen;
	for (uint32_t i = 0; i < c.time; i++) {
		z->idx[i] = data[i];
		if (data[i] >= c.type)
			goto bad;
	}
	data += c.time;
	for (uint32_t i = 0; i < c.type; i++) {
		const unsigned char *t = data + (size_t)i * TZ_TYPE_LEN;
		int32_t off = (int32_t)be32(t);
		if (off < TZ_UTOFF_MIN || off > TZ_UTOFF_MAX || t[4] > 1)
			goto bad;
		z->types[i] = (tz_type){ off, t[4] };
	}
	if (tlen == 8) {
		/* the footer: "\n" POSIX-TZ "\n" after the data */
		const char *f = (const char *)(p + TZ_HEADER_LEN + blen), *nl;
		size_t left = len - TZ_HEADER_LEN - blen;
		if (left < 2 || f[0] != '\n' || !(nl = memchr(f + 1, '\n', left - 1)))
			goto bad;
		if (nl > f + 1) {
			char rule[LANE_TZ_NAME_MAX + 1];
			size_t rl = (size_t)(nl - f - 1);
			if (rl > LANE_TZ_NAME_MAX)
				goto bad;
			memcpy(rule, f + 1, rl);
			rule[rl] = '\0';
			if (parse_rule(rule, &z->rule) < 0) {
				lane_tz_free(z);
				return memd_error_set(err, MEMD_EINVAL, 0,
						      "timezone %s: a TZ rule memd cannot read: %s",
						      name, rule);
			}
			z->has_rule = 1;
		}
	}
	*ret = z;
	return 0;
bad:
	lane_tz_free(z);
damaged:
	return memd_error_set(err, MEMD_EINVAL, 0, "timezone %s: damaged TZif file", name);
}

static int32_t load_file(const char *name, const char *path, lane_tz **ret, memd_error *err)
{
	unsigned char *buf = NULL;
	struct stat st;
	size_t len = 0;
	int32_t r;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st) < 0 || S_ISDIR(st.st_mode)) {
		int e = fd < 0 ? errno : S_ISDIR(st.st_mode) ? ENOENT : errno;
		if (fd >= 0)
			close(fd);
		if (e == ENOENT || e == ENOTDIR)
			return memd_error_set(err, MEMD_ENOTFOUND, 0,
					      "timezone %s: no such zone (%s)", name, path);
		return memd_error_set(err, MEMD_EIO, 0, "timezone %s: %s: %s", name, path,
				      strerror(e));
	}
	if (st.st_size > TZ_FILE_MAX) {
		close(fd);
		return memd_error_set(err, MEMD_EINVAL, 0, "timezone %s: %s is not a TZif file",
				      name, path);
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	while (len < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + len, (size_t)st.st_size - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int e = n < 0 ? errno : EIO;
			free(buf);
			close(fd);
			return memd_error_set(err, MEMD_EIO, 0, "timezone %s: %s: %s", name, path,
					      strerror(e));
		}
		len += (size_t)n;
	}
	close(fd);
	r = parse_tzif(name, buf, len, ret, err);
	free(buf);
	return r;
}

static int32_t check_name(const char *name, memd_error *err)
{
	size_t n = strlen(name);
	const char *seg = name;

	if (n > LANE_TZ_NAME_MAX)
		return memd_error_set(err, MEMD_EINVAL, 0, "timezone: longer than %d bytes",
				      LANE_TZ_NAME_MAX);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)name[i];
		if (!isalnum(c) && !strchr("/_-+.", c))
			return memd_error_set(err, MEMD_EINVAL, 0,
					      "timezone %.64s: not an IANA zone name (letters, "
					      "digits and /_-+.)",
					      name);
	}
	if (name[0] == '/')
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "timezone %.64s: a zone name, not a path", name);
	for (;;) {
		const char *slash = strchr(seg, '/');
		size_t sl = slash ? (size_t)(slash - seg) : strlen(seg);
		if (sl == 0 || (sl == 1 && seg[0] == '.') || (sl == 2 && seg[0] == '.' &&
							       seg[1] == '.'))
			return memd_error_set(err, MEMD_EINVAL, 0,
					      "timezone %.64s: not an IANA zone name (empty, '.' or "
					      "'..' part)",
					      name);
		if (!slash)
			break;
		seg = slash + 1;
	}
	return 0;
}

static int32_t make_fixed(const char *name, const tz_rule *rule, lane_tz **ret, memd_error *err)
{
	lane_tz *z = calloc(1, sizeof(*z));

	if (z) {
		z->name = strdup(name);
		z->types = calloc(1, sizeof(tz_type));
		z->times = NULL;
		z->idx = NULL;
	}
	if (!z || !z->name || !z->types) {
		lane_tz_free(z);
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	z->typecnt = 1;
	if (rule) {
		z->rule = *rule;
		z->has_rule = 1;
		z->types[0].utoff = rule->std_off;
	}
	*ret = z;
	return 0;
}

static int32_t load_named(const char *name, lane_tz **ret, memd_error *err)
{
	const char *dir = getenv("TZDIR");
	char *path;
	int32_t r;

	if ((r = check_name(name, err)) < 0)
		return r;
	if (!dir || !dir[0])
		dir = LANE_TZ_DIR_DEFAULT;
	if (asprintf(&path, "%s/%s", dir, name) < 0)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	r = load_file(name, path, ret, err);
	free(path);
	if (r == MEMD_ENOTFOUND && strcmp(name, TZ_UTC) == 0)
		return make_fixed(TZ_UTC, NULL, ret, err);
	return r;
}

/* The host's zone: $TZ, else /etc/localtime (named after its link). */
static int32_t load_host(lane_tz **ret, memd_error *err)
{
	const char *tz = getenv("TZ");
	char link[PATH_MAX];
	const char *name = TZ_LOCALTIME_NAME;
	ssize_t n;
	int32_t r;

	if (tz && tz[0]) {
		tz_rule rule;
		if (tz[0] == ':')
			tz++;
		if (tz[0] == '/')
			return load_file(tz, tz, ret, err);
		r = load_named(tz, ret, err);
		if (r == MEMD_ENOTFOUND || r == MEMD_EINVAL) {
			if (parse_rule(tz, &rule) == 0)
				return make_fixed(tz, &rule, ret, err);
		}
		return r;
	}
	n = readlink(LANE_TZ_LOCALTIME, link, sizeof(link) - 1);
	if (n > 0) {
		const char *mark;
		link[n] = '\0';
		mark = strstr(link, TZ_ZONEINFO_MARK);
		if (mark && mark[strlen(TZ_ZONEINFO_MARK)])
			name = mark + strlen(TZ_ZONEINFO_MARK);
	}
	r = load_file(name, LANE_TZ_LOCALTIME, ret, err);
	if (r == MEMD_ENOTFOUND)
		return memd_error_set(err, MEMD_ENOTFOUND, 0,
				      "timezone: the host has none (no TZ and no %s); name one",
				      LANE_TZ_LOCALTIME);
	return r;
}

int32_t lane_tz_load(const char *name, lane_tz **ret_zone, memd_error *err)
{
	if (!name || !name[0])
		return load_host(ret_zone, err);
	return load_named(name, ret_zone, err);
}

/* ---- the cache ------------------------------------------------------------ */

typedef struct tz_entry {
	char *name;               /* as asked for ("" = the host's) */
	lane_tz *zone;
	struct tz_entry *next;
} tz_entry;

struct lane_tz_cache {
	pthread_mutex_t lock;     /* guards head */
	tz_entry *head;
};

int32_t lane_tz_cache_new(lane_tz_cache **ret_cache, memd_error *err)
{
	lane_tz_cache *c = calloc(1, sizeof(*c));

	if (!c)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	if (pthread_mutex_init(&c->lock, NULL) != 0) {
		free(c);
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	*ret_cache = c;
	return 0;
}

void lane_tz_cache_free(lane_tz_cache *c)
{
	if (!c)
		return;
	for (tz_entry *e = c->head, *next; e; e = next) {
		next = e->next;
		lane_tz_free(e->zone);
		free(e->name);
		free(e);
	}
	pthread_mutex_destroy(&c->lock);
	free(c);
}

int32_t lane_tz_cache_get(lane_tz_cache *c, const char *name, const lane_tz **ret_zone,
			  memd_error *err)
{
	const char *key = name ? name : "";
	tz_entry *e;
	lane_tz *z = NULL;
	int32_t r = 0;

	pthread_mutex_lock(&c->lock);
	for (e = c->head; e && strcmp(e->name, key) != 0; e = e->next)
		;
	if (e) {
		*ret_zone = e->zone;
		goto out;
	}
	/* loaded under the lock: zones are few and small, and each is read once */
	if ((r = lane_tz_load(key, &z, err)) < 0)
		goto out;
	e = calloc(1, sizeof(*e));
	if (e)
		e->name = strdup(key);
	if (!e || !e->name) {
		free(e);
		lane_tz_free(z);
		r = memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
		goto out;
	}
	e->zone = z;
	e->next = c->head;
	c->head = e;
	*ret_zone = z;
out:
	pthread_mutex_unlock(&c->lock);
	return r;
}
