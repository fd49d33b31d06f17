/* SPDX-License-Identifier: MIT */
/* lanes/lane_policy: reset policies judged with a clock the test drives
 * (plain now_us arguments), in Europe/Berlin and America/New_York across
 * their DST changes: the spring-forward day whose at_hour does not exist,
 * the fall-back day whose hour happens twice (one reset, not two), idle
 * spans across a change, which reason wins in mode both, and activity
 * exactly at a boundary. Instants were computed with `TZ=<zone> date -d`
 * and are written as literals (comments give the local times). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "lanes/lane_policy.h"

#define US 1000000LL

static lane_tz *berlin, *new_york;

static void load_zones(void)
{
	memd_error err = { .struct_size = sizeof(err) };

	cr_assert_eq(unsetenv("TZDIR"), 0);
	cr_assert_eq(lane_tz_load("Europe/Berlin", &berlin, &err), 0, "%s", err.msg);
	cr_assert_eq(lane_tz_load("America/New_York", &new_york, &err), 0, "%s", err.msg);
}

static void free_zones(void)
{
	lane_tz_free(berlin);
	lane_tz_free(new_york);
}

static lane_reset_policy policy(lane_reset_mode mode, const lane_tz *zone, int at_hour,
				int64_t idle_minutes)
{
	return (lane_reset_policy){ .mode = mode, .idle_minutes = idle_minutes,
				    .at_hour = at_hour, .zone = zone, .notify = 1 };
}

typedef struct boundary_row {
	int64_t now_s;
	int64_t boundary_s;
	const char *what;
} boundary_row;

static void expect_boundaries(const lane_reset_policy *p, const boundary_row *rows, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		cr_expect_eq(lane_policy_daily_boundary(p, rows[i].now_s * US),
			     rows[i].boundary_s * US, "%s", rows[i].what);
		/* the last microsecond before now's boundary belongs to the day before */
		if (rows[i].now_s == rows[i].boundary_s)
			cr_expect_lt(lane_policy_daily_boundary(p, rows[i].now_s * US - 1),
				     rows[i].boundary_s * US, "%s (1 us earlier)", rows[i].what);
	}
}

typedef struct expiry_row {
	int64_t last_us;
	int64_t now_us;
	const char *want;    /* NULL, "idle" or "daily" */
	const char *what;
} expiry_row;

static void expect_expiry(const lane_reset_policy *p, const expiry_row *rows, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const char *got = lane_policy_expired(p, rows[i].last_us, rows[i].now_us);
		if (rows[i].want)
			cr_expect(got && strcmp(got, rows[i].want) == 0, "%s: got %s, want %s",
				  rows[i].what, got ? got : "NULL", rows[i].want);
		else
			cr_expect_null(got, "%s: got %s, want NULL", rows[i].what, got);
	}
}

TestSuite(lane_policy, .init = load_zones, .fini = free_zones);

Test(lane_policy, spring_forward_at_an_hour_that_does_not_exist)
{
	lane_reset_policy b = policy(LANE_RESET_DAILY, berlin, 2, 0);
	lane_reset_policy n = policy(LANE_RESET_DAILY, new_york, 2, 0);
	static const boundary_row brows[] = {
		{ 1774745999, 1774659600, "Berlin 03-29 01:59:59 CET: 03-28 02:00 CET" },
		{ 1774746000, 1774746000, "Berlin 03-29 03:00 CEST: the first instant after 02:00" },
		{ 1774749600, 1774746000, "Berlin 03-29 04:00 CEST" },
	};
	static const boundary_row nrows[] = {
		{ 1772953199, 1772866800, "New York 03-08 01:59:59 EST: 03-07 02:00 EST" },
		{ 1772953200, 1772953200, "New York 03-08 03:00 EDT: the first instant after 02:00" },
	};
	static const expiry_row bexp[] = {
		{ 1774745999 * US, 1774746000 * US, "daily", "Berlin: active 01:59:59, now 03:00" },
		{ 1774746000 * US, 1774749600 * US, NULL, "Berlin: active exactly at 03:00" },
		{ 1774746000 * US - 1, 1774749600 * US, "daily", "Berlin: 1 us before 03:00" },
		{ 1774745400 * US, 1774745999 * US, NULL, "Berlin: before the boundary, still 01:59" },
	};
	static const expiry_row nexp[] = {
		{ 1772953199 * US, 1772953200 * US, "daily", "New York: 01:59:59, now 03:00 EDT" },
		{ 1772953200 * US, 1772953200 * US, NULL, "New York: active exactly at 03:00 EDT" },
	};

	expect_boundaries(&b, brows, sizeof(brows) / sizeof(brows[0]));
	expect_boundaries(&n, nrows, sizeof(nrows) / sizeof(nrows[0]));
	expect_expiry(&b, bexp, sizeof(bexp) / sizeof(bexp[0]));
	expect_expiry(&n, nexp, sizeof(nexp) / sizeof(nexp[0]));
}

Test(lane_policy, fall_back_hour_twice_resets_once_at_the_first)
{
	lane_reset_policy b = policy(LANE_RESET_DAILY, berlin, 2, 0);
	lane_reset_policy n = policy(LANE_RESET_DAILY, new_york, 1, 0);
	static const boundary_row brows[] = {
		{ 1792886399, 1792800000, "Berlin 10-25 01:59:59 CEST: 10-24 02:00 CEST" },
		{ 1792886400, 1792886400, "Berlin 10-25 02:00 CEST (first)" },
		{ 1792890000, 1792886400, "Berlin 10-25 02:00 CET (second): still the first" },
		{ 1792891800, 1792886400, "Berlin 10-25 02:30 CET" },
		{ 1792976400, 1792976400, "Berlin 10-26 02:00 CET" },
	};
	static const boundary_row nrows[] = {
		{ 1793509199, 1793422800, "New York 11-01 00:59:59 EDT: 10-31 01:00 EDT" },
		{ 1793509200, 1793509200, "New York 11-01 01:00 EDT (first)" },
		{ 1793512800, 1793509200, "New York 11-01 01:00 EST (second): still the first" },
		{ 1793516400, 1793509200, "New York 11-01 02:00 EST" },
		{ 1793599200, 1793599200, "New York 11-02 01:00 EST" },
	};
	/* a lane active just before the first 02:00 resets there; its new
	 * session, active from then on, is not reset by the second 02:00 */
	static const expiry_row bexp[] = {
		{ 1792886399 * US, 1792886400 * US, "daily", "Berlin: reset at the first 02:00" },
		{ 1792886400 * US, 1792890000 * US, NULL, "Berlin: no second reset at 02:00 CET" },
		{ 1792886400 * US, 1792891800 * US, NULL, "Berlin: nor at 02:30 CET" },
		{ 1792888200 * US, 1792976399 * US, NULL, "Berlin: nor before the next day's" },
		{ 1792888200 * US, 1792976400 * US, "daily", "Berlin: the next day's 02:00" },
	};
	static const expiry_row nexp[] = {
		{ 1793509199 * US, 1793509200 * US, "daily", "New York: reset at the first 01:00" },
		{ 1793509200 * US, 1793512800 * US, NULL, "New York: no second reset at 01:00 EST" },
		{ 1793509200 * US, 1793516400 * US, NULL, "New York: nor at 02:00 EST" },
		{ 1793516400 * US, 1793599199 * US, NULL, "New York: nor before the next day's" },
		{ 1793516400 * US, 1793599200 * US, "daily", "New York: the next day's 01:00" },
	};

	expect_boundaries(&b, brows, sizeof(brows) / sizeof(brows[0]));
	expect_boundaries(&n, nrows, sizeof(nrows) / sizeof(nrows[0]));
	expect_expiry(&b, bexp, sizeof(bexp) / sizeof(bexp[0]));
	expect_expiry(&n, nexp, sizeof(nexp) / sizeof(nexp[0]));
}

Test(lane_policy, idle_counts_elapsed_time_across_dst_changes)
{
	lane_reset_policy b = policy(LANE_RESET_IDLE, berlin, 4, 60);
	lane_reset_policy n = policy(LANE_RESET_IDLE, new_york, 4, 90);
	static const expiry_row bexp[] = {
		/* 01:50 CET to 03:50 CEST: two hours on the wall, one elapsed */
		{ 1774745400 * US, 1774749000 * US, NULL, "Berlin spring: exactly 60 min" },
		{ 1774745400 * US, 1774749000 * US + 1, "idle", "Berlin spring: 60 min + 1 us" },
		/* 02:00 CEST to 02:00 CET: no time on the wall, an hour elapsed */
		{ 1792886400 * US, 1792890000 * US, NULL, "Berlin fall: exactly 60 min" },
		{ 1792886400 * US, 1792890000 * US + 1, "idle", "Berlin fall: 60 min + 1 us" },
		{ 1792886400 * US, 1792886400 * US - 5, NULL, "activity after now never expires" },
	};
	static const expiry_row nexp[] = {
		/* 01:30 EST to 04:00 EDT */
		{ 1772951400 * US, 1772956800 * US, NULL, "New York spring: exactly 90 min" },
		{ 1772951400 * US, 1772956800 * US + 1, "idle", "New York spring: 90 min + 1 us" },
		/* 01:00 EDT to 01:30 EST */
		{ 1793509200 * US, 1793514600 * US, NULL, "New York fall: exactly 90 min" },
		{ 1793509200 * US, 1793514600 * US + 1, "idle", "New York fall: 90 min + 1 us" },
	};

	expect_expiry(&b, bexp, sizeof(bexp) / sizeof(bexp[0]));
	expect_expiry(&n, nexp, sizeof(nexp) / sizeof(nexp[0]));
}

Test(lane_policy, modes_and_which_reason_wins)
{
	/* Berlin 2026-06-15: activity 03:50 CEST, boundary 04:00 CEST */
	const int64_t last = 1781488200 * US, at4 = 1781488800 * US, noon = 1781517600 * US;
	lane_reset_policy both = policy(LANE_RESET_BOTH, berlin, 4, 60);
	lane_reset_policy daily = policy(LANE_RESET_DAILY, berlin, 4, 60);
	lane_reset_policy idle = policy(LANE_RESET_IDLE, berlin, 4, 60);
	lane_reset_policy none = policy(LANE_RESET_NONE, berlin, 4, 60);
	const expiry_row rows_both[] = {
		{ last, noon, "idle", "both: idle and daily hold, idle wins" },
		{ last, at4, "daily", "both: 10 min idle, across 04:00" },
		{ at4, at4 + 59 * 60 * US, NULL, "both: neither" },
	};
	const expiry_row rows_daily[] = {
		{ last, noon, "daily", "daily: idle is not its business" },
		{ at4, noon, NULL, "daily: active at the boundary" },
	};
	const expiry_row rows_idle[] = {
		{ last, at4, NULL, "idle: the boundary is not its business" },
		{ last, noon, "idle", "idle: 8 h" },
	};
	const expiry_row rows_none[] = {
		{ 0, noon, NULL, "none: never" },
		{ last, noon, NULL, "none: never" },
	};

	cr_expect_eq(lane_policy_daily_boundary(&both, noon), 1781488800 * US);
	cr_expect_eq(lane_policy_daily_boundary(&both, 1781402400 * US), 1781402400 * US);
	expect_expiry(&both, rows_both, sizeof(rows_both) / sizeof(rows_both[0]));
	expect_expiry(&daily, rows_daily, sizeof(rows_daily) / sizeof(rows_daily[0]));
	expect_expiry(&idle, rows_idle, sizeof(rows_idle) / sizeof(rows_idle[0]));
	expect_expiry(&none, rows_none, sizeof(rows_none) / sizeof(rows_none[0]));
}

Test(lane_policy, no_zone_is_utc)
{
	lane_reset_policy p = policy(LANE_RESET_DAILY, NULL, 0, 0);

	/* 2026-06-15 10:00Z: the day began at 00:00Z */
	cr_expect_eq(lane_policy_daily_boundary(&p, 1781517600 * US), 1781481600 * US);
	cr_expect_eq(lane_policy_daily_boundary(&p, 1781481600 * US - 1), 1781395200 * US);
	cr_expect_str_eq(lane_policy_expired(&p, 1781481600 * US - 1, 1781517600 * US), "daily");
	cr_expect_null(lane_policy_expired(&p, 1781481600 * US, 1781517600 * US));
}

Test(lane_policy, mode_names)
{
	static const char *const names[] = { "none", "idle", "daily", "both" };
	memd_error err = { .struct_size = sizeof(err) };
	lane_reset_mode m;

	for (int i = 0; i < 4; i++) {
		cr_assert_eq(lane_policy_mode_parse(names[i], &m, &err), 0);
		cr_expect_eq((int)m, i);
		cr_expect_str_eq(lane_policy_mode_name(m), names[i]);
	}
	m = LANE_RESET_BOTH;
	cr_expect_eq(lane_policy_mode_parse("weekly", &m, &err), MEMD_EINVAL);
	cr_expect_str_eq(err.msg, "mode: must be none, idle, daily or both");
	cr_expect_eq(lane_policy_mode_parse(NULL, &m, &err), MEMD_EINVAL);
	cr_expect_eq(m, LANE_RESET_BOTH);
	cr_expect_str_eq(lane_policy_mode_name((lane_reset_mode)9), "none");
}
