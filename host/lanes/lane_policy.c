/* SPDX-License-Identifier: MIT */
#include "lane_policy.h"

#include <string.h>

#include <memd/plugin.h>

#define LP_US_PER_S 1000000LL
#define LP_S_PER_MIN 60
#define LP_S_PER_HOUR 3600
#define LP_DAYS_BACK 3 /* today, yesterday, and the day before when a whole day was skipped */

static const char *const mode_names[] = { "none", "idle", "daily", "both" };

int32_t lane_policy_mode_parse(const char *text, lane_reset_mode *ret_mode, memd_error *err)
{
	for (size_t i = 0; text && i < sizeof(mode_names) / sizeof(mode_names[0]); i++) {
		if (strcmp(text, mode_names[i]) == 0) {
			*ret_mode = (lane_reset_mode)i;
			return 0;
		}
	}
	return memd_error_set(err, MEMD_EINVAL, 0, "mode: must be none, idle, daily or both");
}

const char *lane_policy_mode_name(lane_reset_mode mode)
{
	if ((unsigned)mode >= sizeof(mode_names) / sizeof(mode_names[0]))
		return mode_names[LANE_RESET_NONE];
	return mode_names[mode];
}

static int64_t floor_div(int64_t a, int64_t b)
{
	int64_t q = a / b;

	return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* The first instant (unix s) whose local time is local_s, or the first
 * after it when local_s falls in a gap. */
static int64_t first_instant(const lane_tz *zone, int64_t local_s)
{
	int64_t c[LANE_TZ_CANDIDATES_MAX];

	if (!zone)
		return local_s;
	lane_tz_local_to_utc(zone, local_s, c); /* 0 (a gap) still fills c[0] */
	return c[0];
}

int64_t lane_policy_daily_boundary(const lane_reset_policy *p, int64_t now_us)
{
	int64_t now_s = floor_div(now_us, LP_US_PER_S);
	int64_t local = now_s + (p->zone ? lane_tz_offset(p->zone, now_s) : 0);
	int64_t day = floor_div(local, LANE_TZ_SECS_PER_DAY), b = 0;

	for (int back = 0; back < LP_DAYS_BACK; back++) {
		b = first_instant(p->zone, (day - back) * LANE_TZ_SECS_PER_DAY +
						   (int64_t)p->at_hour * LP_S_PER_HOUR);
		if (b <= now_s)
			break;
	}
	return b * LP_US_PER_S;
}

const char *lane_policy_expired(const lane_reset_policy *p, int64_t last_activity_us,
				int64_t now_us)
{
	int idle = p->mode == LANE_RESET_IDLE || p->mode == LANE_RESET_BOTH;
	int daily = p->mode == LANE_RESET_DAILY || p->mode == LANE_RESET_BOTH;

	if (idle && p->idle_minutes > 0) {
		int64_t span = p->idle_minutes > INT64_MAX / (LP_S_PER_MIN * LP_US_PER_S)
				       ? INT64_MAX
				       : p->idle_minutes * LP_S_PER_MIN * LP_US_PER_S;
		if (last_activity_us < now_us && now_us - last_activity_us > span)
			return LANE_EXPIRED_IDLE;
	}
	if (daily && last_activity_us < lane_policy_daily_boundary(p, now_us))
		return LANE_EXPIRED_DAILY;
	return NULL;
}
