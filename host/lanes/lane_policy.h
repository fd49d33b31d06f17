/* SPDX-License-Identifier: MIT */
/* lane_policy: when a lane's session has expired under its reset policy
 * (idle for too long, or across the daily reset hour in a time zone).
 * Pure functions of the policy and the times the caller passes; no clock
 * is read here. */
#ifndef MEMD_HOST_LANE_POLICY_H
#define MEMD_HOST_LANE_POLICY_H

#include <stdint.h>

#include <memd/abi.h>

#include "lanes/lane_tz.h"

#define LANE_POLICY_IDLE_MINUTES_DEFAULT 1440 /* a day */
#define LANE_POLICY_AT_HOUR_DEFAULT 4         /* 04:00 local: after a night's quiet */
#define LANE_POLICY_HOURS_PER_DAY 24

/* The reasons lane_policy_expired answers. */
#define LANE_EXPIRED_IDLE "idle"
#define LANE_EXPIRED_DAILY "daily"

typedef enum lane_reset_mode {
	LANE_RESET_NONE = 0,  /* never expires; only explicit resets */
	LANE_RESET_IDLE,      /* after idle_minutes without activity */
	LANE_RESET_DAILY,     /* when the last activity is before the last at_hour */
	LANE_RESET_BOTH,      /* whichever comes first */
} lane_reset_mode;

/* A reset policy: a view; strings and the zone are borrowed. */
typedef struct lane_reset_policy {
	lane_reset_mode mode;
	int64_t idle_minutes;         /* >= 1 */
	int32_t at_hour;              /* 0..23, local time in zone */
	const lane_tz *zone;          /* NULL = UTC */
	int notify;                   /* nonzero: the next context carries a notice */
	const char *idle_notice;      /* the notice's text after an idle reset */
	const char *daily_notice;     /* ... after a daily reset */
	const char *suspended_notice; /* ... after a reset of a suspended lane */
} lane_reset_policy;

/* "none" | "idle" | "daily" | "both" into *ret_mode; MEMD_EINVAL naming
 * the accepted values otherwise. */
int32_t lane_policy_mode_parse(const char *text, lane_reset_mode *ret_mode, memd_error *err);
/* The mode's name; "none" for anything unknown. */
const char *lane_policy_mode_name(lane_reset_mode mode);

/* Why a session last active at last_activity_us (unix us) has expired at
 * now_us under p: LANE_EXPIRED_IDLE when idle applies (mode idle or both)
 * and now_us is past last_activity_us + idle_minutes; else
 * LANE_EXPIRED_DAILY when daily applies and last_activity_us is before
 * lane_policy_daily_boundary(p, now_us); else NULL. Idle wins when both
 * hold. Activity exactly at the boundary is after it (not expired). */
const char *lane_policy_expired(const lane_reset_policy *p, int64_t last_activity_us,
				int64_t now_us);

/* The most recent daily boundary at or before now_us (unix us): the
 * at_hour:00 local time of today or yesterday in p->zone. On a day whose
 * at_hour does not exist (spring forward) the boundary is the first
 * instant after the gap; on a day where it happens twice (fall back), the
 * first occurrence. */
int64_t lane_policy_daily_boundary(const lane_reset_policy *p, int64_t now_us);

#endif
