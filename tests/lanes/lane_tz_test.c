/* SPDX-License-Identifier: MIT */
/* lanes/lane_tz: IANA zones from the system's TZif files (Debian's tzdata)
 * and from files the test writes under its own TZDIR (version 1 only,
 * version 3 with a footer rule in its J, n and M forms and hours beyond
 * 24, leap seconds, damage), offsets before, on and after transitions,
 * local times in gaps and overlaps, bad names, the host's zone, and the
 * cache shared by threads. Expected instants were computed with
 * `TZ=<zone> date -d ...` and are written as literals. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lanes/lane_tz.h"

#define THREADS 8
#define HOUR 3600

static lane_tz *load_ok(const char *name)
{
	memd_error err = { .struct_size = sizeof(err) };
	lane_tz *z = NULL;

	cr_assert_eq(lane_tz_load(name, &z, &err), 0, "%s: %s", name, err.msg);
	return z;
}

static void expect_load_error(const char *name, int32_t code, const char *msg)
{
	memd_error err = { .struct_size = sizeof(err) };
	lane_tz *z = (lane_tz *)&err; /* must stay untouched */

	cr_expect_eq(lane_tz_load(name, &z, &err), code, "%s: %s", name, err.msg);
	cr_expect_str_eq(err.msg, msg, "%s", name);
	cr_expect_eq(z, (lane_tz *)&err, "%s: zone written on failure", name);
}

typedef struct at_row {
	int64_t unix_s;
	int32_t offset;
} at_row;

static void expect_offsets(const char *name, const at_row *rows, size_t n)
{
	lane_tz *z = load_ok(name);

	for (size_t i = 0; i < n; i++)
		cr_expect_eq(lane_tz_offset(z, rows[i].unix_s), rows[i].offset, "%s at %lld", name,
			     (long long)rows[i].unix_s);
	lane_tz_free(z);
}

Test(lane_tz, berlin_and_new_york_offsets_around_their_changes)
{
	static const at_row berlin[] = {
		{ 1774745999, 1 * HOUR }, /* 2026-03-29 01:59:59 CET */
		{ 1774746000, 2 * HOUR }, /* 03:00:00 CEST */
		{ 1792889999, 2 * HOUR }, /* 2026-10-25 02:59:59 CEST */
		{ 1792890000, 1 * HOUR }, /* 02:00:00 CET */
		{ 4109878799, 1 * HOUR }, /* 2100-03-28: past the table, the footer rule */
		{ 4109878800, 2 * HOUR },
		{ 4128627599, 2 * HOUR }, /* 2100-10-31 02:59:59 CEST */
		{ 4128627600, 1 * HOUR },
	};
	static const at_row ny[] = {
		{ 1772953199, -5 * HOUR }, /* 2026-03-08 01:59:59 EST */
		{ 1772953200, -4 * HOUR }, /* 03:00 EDT */
		{ 1793512799, -4 * HOUR }, /* 2026-11-01 01:59:59 EDT */
		{ 1793512800, -5 * HOUR }, /* 01:00 EST */
		{ 7263932399, -5 * HOUR }, /* 2200-03-09 */
		{ 7263932400, -4 * HOUR },
		{ 7284491999, -4 * HOUR }, /* 2200-11-02 01:59:59 EDT */
		{ 7284492000, -5 * HOUR },
	};

	expect_offsets("Europe/Berlin", berlin, sizeof(berlin) / sizeof(berlin[0]));
	expect_offsets("America/New_York", ny, sizeof(ny) / sizeof(ny[0]));
}

typedef struct local_row {
	int64_t local_s;   /* civil time counted as if UTC */
	int n;
	int64_t utc[2];
} local_row;

static void expect_locals(const char *name, const local_row *rows, size_t n)
{
	lane_tz *z = load_ok(name);

	for (size_t i = 0; i < n; i++) {
		int64_t c[LANE_TZ_CANDIDATES_MAX] = { -1, -1 };
		int got = lane_tz_local_to_utc(z, rows[i].local_s, c);
		cr_expect_eq(got, rows[i].n, "%s local %lld: count", name, (long long)rows[i].local_s);
		cr_expect_eq(c[0], rows[i].utc[0], "%s local %lld: first", name,
			     (long long)rows[i].local_s);
		if (rows[i].n == 2)
			cr_expect_eq(c[1], rows[i].utc[1], "%s local %lld: second", name,
				     (long long)rows[i].local_s);
	}
	lane_tz_free(z);
}

Test(lane_tz, local_times_in_gaps_overlaps_and_plain_days)
{
	/* local 2026-03-29 02:30 (gap): none, first instant after = 03:00 CEST */
	static const local_row berlin[] = {
		{ 1774751400, 0, { 1774746000 } },
		{ 1774744200, 1, { 1774740600 } },               /* 01:30 CET */
		{ 1774753200, 1, { 1774746000 } },               /* 03:00 CEST */
		{ 1792895400, 2, { 1792888200, 1792891800 } },   /* 2026-10-25 02:30 twice */
		{ 1792893600, 2, { 1792886400, 1792890000 } },   /* 02:00 twice */
		{ 1792897200, 1, { 1792893600 } },               /* 03:00 CET: once */
		{ 4128633000, 2, { 4128625800, 4128629400 } },   /* 2100-10-31 02:30 */
		{ 1781524800, 1, { 1781517600 } },               /* 2026-06-15 12:00 */
	};
	static const local_row ny[] = {
		{ 1772937000, 0, { 1772953200 } },               /* 2026-03-08 02:30: gap */
		{ 1793496600, 2, { 1793511000, 1793514600 } },   /* 2026-11-01 01:30 twice */
		{ 1793494800, 2, { 1793509200, 1793512800 } },   /* 01:00 twice */
		{ 7284475800, 2, { 7284490200, 7284493800 } }, /* 2200-11-02 01:30 */
	};

	expect_locals("Europe/Berlin", berlin, sizeof(berlin) / sizeof(berlin[0]));
	expect_locals("America/New_York", ny, sizeof(ny) / sizeof(ny[0]));
}

Test(lane_tz, civil_days_round_trip)
{
	int64_t y;
	int m, d;

	cr_expect_eq(lane_tz_days_from_civil(1970, 1, 1), 0);
	cr_expect_eq(lane_tz_days_from_civil(2026, 3, 29), 20541);
	cr_expect_eq(lane_tz_days_from_civil(1969, 12, 31), -1);
	cr_expect_eq(lane_tz_days_from_civil(2000, 2, 29), 11016);
	for (int64_t days = -800000; days <= 800000; days += 97) {
		lane_tz_civil_from_days(days, &y, &m, &d);
		cr_assert_eq(lane_tz_days_from_civil(y, m, d), days);
	}
}

/* ---- zones the test writes ------------------------------------------------ */

static char tzdir[64];

static void make_tzdir(void)
{
	snprintf(tzdir, sizeof(tzdir), "/tmp/memd-lane-tz-XXXXXX");
	cr_assert_not_null(mkdtemp(tzdir));
	cr_assert_eq(setenv("TZDIR", tzdir, 1), 0);
	char sub[128];
	snprintf(sub, sizeof(sub), "%s/Test", tzdir);
	cr_assert_eq(mkdir(sub, 0700), 0);
}

static void remove_tzdir(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tzdir);
	cr_expect_eq(system(cmd), 0);
}

static void put32(FILE *f, uint32_t v)
{
	unsigned char b[4] = { v >> 24, v >> 16, v >> 8, v };
	fwrite(b, 1, 4, f);
}

static void put64(FILE *f, int64_t v)
{
	put32(f, (uint32_t)((uint64_t)v >> 32));
	put32(f, (uint32_t)v);
}

typedef struct tzif_spec {
	char version;              /* 0 (v1), '2', '3' */
	uint32_t n;                /* transitions */
	const int64_t *times;
	const uint8_t *idx;
	uint32_t ntypes;
	const int32_t *utoff;
	const uint8_t *isdst;
	uint32_t leaps;            /* leap second records (zeros) */
	const char *footer;        /* v2+: the POSIX TZ rule, "" for none */
} tzif_spec;

static void write_block(FILE *f, const tzif_spec *s, int wide)
{
	fwrite("TZif", 1, 4, f);
	fputc(s->version, f);
	for (int i = 0; i < 15; i++)
		fputc(0, f);
	put32(f, 0);               /* isutcnt */
	put32(f, 0);               /* isstdcnt */
	put32(f, s->leaps);
	put32(f, s->n);
	put32(f, s->ntypes);
	put32(f, 4);               /* charcnt: "ZZZ\0" */
	for (uint32_t i = 0; i < s->n; i++) {
		if (wide)
			put64(f, s->times[i]);
		else
			put32(f, (uint32_t)(int32_t)s->times[i]);
	}
	for (uint32_t i = 0; i < s->n; i++)
		fputc(s->idx[i], f);
	for (uint32_t i = 0; i < s->ntypes; i++) {
		put32(f, (uint32_t)s->utoff[i]);
		fputc(s->isdst[i], f);
		fputc(0, f);
	}
	fwrite("ZZZ", 1, 4, f);
	for (uint32_t i = 0; i < s->leaps; i++) {
		if (wide)
			put64(f, 0);
		else
			put32(f, 0);
		put32(f, 0);
	}
}

static void write_tzif(const char *name, const tzif_spec *s)
{
	char path[192];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tzdir, name);
	f = fopen(path, "wb");
	cr_assert_not_null(f);
	write_block(f, s, 0);
	if (s->version) {
		write_block(f, s, 1);
		fprintf(f, "\n%s\n", s->footer);
	}
	cr_assert_eq(fclose(f), 0);
}

static void write_text(const char *name, const char *text, size_t len)
{
	char path[192];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tzdir, name);
	f = fopen(path, "wb");
	cr_assert_not_null(f);
	fwrite(text, 1, len, f);
	cr_assert_eq(fclose(f), 0);
}

static const int32_t two_offs[] = { 1 * HOUR, 2 * HOUR };
static const uint8_t two_dst[] = { 0, 1 };
static const int64_t two_times[] = { 1000000000, 1100000000 };
static const uint8_t two_idx[] = { 1, 0 };

Test(lane_tz, a_version_1_file_is_read_from_its_32_bit_data, .init = make_tzdir,
     .fini = remove_tzdir)
{
	tzif_spec v1 = { 0, 2, two_times, two_idx, 2, two_offs, two_dst, 0, NULL };
	static const at_row rows[] = {
		{ -5000000000, 1 * HOUR }, /* before the first transition: type 0 */
		{ 999999999, 1 * HOUR },
		{ 1000000000, 2 * HOUR },
		{ 1099999999, 2 * HOUR },
		{ 1100000000, 1 * HOUR },
		{ 9000000000, 1 * HOUR }, /* no footer: the last type forever */
	};

	write_tzif("Test/V1", &v1);
	expect_offsets("Test/V1", rows, sizeof(rows) / sizeof(rows[0]));
}

Test(lane_tz, footer_rules_in_julian_zero_based_and_month_forms, .init = make_tzdir,
     .fini = remove_tzdir)
{
	static const int32_t off3[] = { -3 * HOUR };
	static const uint8_t std[] = { 0 };
	static const int64_t t0[] = { 0 };
	static const uint8_t i0[] = { 0 };
	/* J60/25: Mar 1 at 25:00 (Feb 29 not counted); 300/-1: zero-based
	 * day 300 (Oct 28, or Oct 27 in a leap year) at -1:00 */
	tzif_spec j = { '3', 0, NULL, NULL, 1, off3, std, 0, "XXX3YYY,J60/25,300/-1" };
	/* version 3: hours below 0 and beyond 24 */
	tzif_spec m = { '3', 0, NULL, NULL, 1, off3, std, 0, "<-03>3<-02>,M3.5.0/-2,M10.5.0/50" };
	/* version 2: a table, then the rule */
	tzif_spec v2 = { '2', 1, t0, i0, 1, two_offs, std, 0, "CET-1CEST,M3.5.0,M10.5.0/3" };
	static const at_row jrows[] = {
		{ 1898654399, -3 * HOUR }, { 1898654400, -2 * HOUR }, /* 2030-03-02 04:00Z */
		{ 1919379599, -2 * HOUR }, { 1919379600, -3 * HOUR }, /* 2030-10-28 01:00Z */
		{ 1961812799, -3 * HOUR }, { 1961812800, -2 * HOUR }, /* 2032 (leap) */
		{ 1982451599, -2 * HOUR }, { 1982451600, -3 * HOUR }, /* 2032-10-27 01:00Z */
	};
	static const at_row mrows[] = {
		{ 1901149199, -3 * HOUR }, { 1901149200, -2 * HOUR }, /* 2030-03-31 01:00Z */
		{ 1919476799, -2 * HOUR }, { 1919476800, -3 * HOUR }, /* 2030-10-29 04:00Z */
	};
	static const at_row v2rows[] = {
		{ -1, 1 * HOUR }, { 1901149199, 1 * HOUR }, { 1901149200, 2 * HOUR },
	};

	write_tzif("Test/J", &j);
	write_tzif("Test/M", &m);
	write_tzif("Test/V2", &v2);
	expect_offsets("Test/J", jrows, sizeof(jrows) / sizeof(jrows[0]));
	expect_offsets("Test/M", mrows, sizeof(mrows) / sizeof(mrows[0]));
	expect_offsets("Test/V2", v2rows, sizeof(v2rows) / sizeof(v2rows[0]));
}

Test(lane_tz, bad_names_missing_and_damaged_files, .init = make_tzdir, .fini = remove_tzdir)
{
	static const int32_t zero[] = { 0 };
	static const uint8_t std[] = { 0 };
	tzif_spec leap = { '2', 0, NULL, NULL, 1, zero, std, 1, "UTC0" };
	tzif_spec rule = { '2', 0, NULL, NULL, 1, zero, std, 0, "UTC0,nonsense" };

	write_tzif("Test/Leap", &leap);
	write_tzif("Test/Rule", &rule);
	write_text("Test/Text", "# not a zone\n", 13);
	write_text("Test/Short", "TZif2\0\0\0", 8);
	write_text("Test/Cut", "TZif2\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0"
			       "\0\0\0\5\0\0\0\1\0\0\0\4", 44);

	expect_load_error("../etc/passwd", MEMD_EINVAL,
			  "timezone ../etc/passwd: not an IANA zone name (empty, '.' or '..' part)");
	expect_load_error("Europe/../Test/V1", MEMD_EINVAL,
			  "timezone Europe/../Test/V1: not an IANA zone name (empty, '.' or '..' "
			  "part)");
	expect_load_error("Europe//Berlin", MEMD_EINVAL,
			  "timezone Europe//Berlin: not an IANA zone name (empty, '.' or '..' part)");
	expect_load_error("/etc/localtime", MEMD_EINVAL,
			  "timezone /etc/localtime: a zone name, not a path");
	expect_load_error("Europe/Berlin;rm", MEMD_EINVAL,
			  "timezone Europe/Berlin;rm: not an IANA zone name (letters, digits and "
			  "/_-+.)");
	char nowhere[160];
	snprintf(nowhere, sizeof(nowhere), "timezone Nowhere/City: no such zone (%s/Nowhere/City)",
		 tzdir);
	expect_load_error("Nowhere/City", MEMD_ENOTFOUND, nowhere);
	snprintf(nowhere, sizeof(nowhere), "timezone Test: no such zone (%s/Test)", tzdir);
	expect_load_error("Test", MEMD_ENOTFOUND, nowhere); /* a directory */
	expect_load_error("Test/Leap", MEMD_EINVAL,
			  "timezone Test/Leap: zones with leap seconds (right/...) are not "
			  "supported");
	expect_load_error("Test/Rule", MEMD_EINVAL,
			  "timezone Test/Rule: a TZ rule memd cannot read: UTC0,nonsense");
	expect_load_error("Test/Text", MEMD_EINVAL, "timezone Test/Text: not a TZif file");
	expect_load_error("Test/Short", MEMD_EINVAL, "timezone Test/Short: not a TZif file");
	expect_load_error("Test/Cut", MEMD_EINVAL, "timezone Test/Cut: damaged TZif file");
	/* TZDIR has no UTC: "UTC" is UTC all the same, but no other name is */
	lane_tz *z = load_ok("UTC");
	cr_expect_str_eq(lane_tz_name(z), "UTC");
	cr_expect_eq(lane_tz_offset(z, 1774746000), 0);
	lane_tz_free(z);
	snprintf(nowhere, sizeof(nowhere), "timezone Etc/UTC: no such zone (%s/Etc/UTC)", tzdir);
	expect_load_error("Etc/UTC", MEMD_ENOTFOUND, nowhere);
}

Test(lane_tz, the_host_zone_comes_from_tz_or_etc_localtime)
{
	lane_tz *z;

	cr_assert_eq(setenv("TZ", ":America/New_York", 1), 0);
	z = load_ok("");
	cr_expect_str_eq(lane_tz_name(z), "America/New_York");
	cr_expect_eq(lane_tz_offset(z, 1772953200), -4 * HOUR);
	lane_tz_free(z);

	cr_assert_eq(setenv("TZ", "/usr/share/zoneinfo/Europe/Berlin", 1), 0);
	z = load_ok("");
	cr_expect_eq(lane_tz_offset(z, 1774746000), 2 * HOUR);
	lane_tz_free(z);

	/* a POSIX rule with no file behind it */
	cr_assert_eq(setenv("TZ", "<-03>3<-02>,M3.5.0/-2,M10.5.0/50", 1), 0);
	z = load_ok("");
	cr_expect_eq(lane_tz_offset(z, 1901149199), -3 * HOUR);
	cr_expect_eq(lane_tz_offset(z, 1901149200), -2 * HOUR);
	lane_tz_free(z);

	cr_assert_eq(setenv("TZ", "No/Such_Zone", 1), 0);
	memd_error err = { .struct_size = sizeof(err) };
	cr_expect_eq(lane_tz_load("", &z, &err), MEMD_ENOTFOUND);

	/* no TZ: /etc/localtime, whatever this host's zone is */
	cr_assert_eq(unsetenv("TZ"), 0);
	if (access(LANE_TZ_LOCALTIME, R_OK) == 0) {
		z = load_ok("");
		cr_expect_str_neq(lane_tz_name(z), "");
		lane_tz_free(z);
	}
}

typedef struct cache_arg {
	lane_tz_cache *cache;
	const lane_tz *got;
} cache_arg;

static void *get_berlin(void *p)
{
	cache_arg *a = p;
	memd_error err = { .struct_size = sizeof(err) };

	if (lane_tz_cache_get(a->cache, "Europe/Berlin", &a->got, &err) < 0)
		a->got = NULL;
	return NULL;
}

Test(lane_tz, the_cache_loads_a_zone_once_and_shares_it_between_threads)
{
	memd_error err = { .struct_size = sizeof(err) };
	lane_tz_cache *c;
	const lane_tz *z = NULL, *ny = NULL;
	pthread_t th[THREADS];
	cache_arg args[THREADS];

	cr_assert_eq(lane_tz_cache_new(&c, &err), 0);
	for (int i = 0; i < THREADS; i++) {
		args[i] = (cache_arg){ c, NULL };
		cr_assert_eq(pthread_create(&th[i], NULL, get_berlin, &args[i]), 0);
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	cr_assert_eq(lane_tz_cache_get(c, "Europe/Berlin", &z, &err), 0);
	for (int i = 0; i < THREADS; i++)
		cr_expect_eq(args[i].got, z, "thread %d got another copy", i);
	cr_assert_eq(lane_tz_cache_get(c, "America/New_York", &ny, &err), 0);
	cr_expect_neq(ny, z);
	cr_expect_eq(lane_tz_offset(ny, 1793512800), -5 * HOUR);
	cr_expect_eq(lane_tz_cache_get(c, "Nowhere/City", &z, &err), MEMD_ENOTFOUND);
	lane_tz_cache_free(c);
	lane_tz_cache_free(NULL);
}
