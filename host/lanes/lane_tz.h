/* SPDX-License-Identifier: MIT */
/* lane_tz: IANA time zones read from TZif files (RFC 8536: version 1, 2
 * and 3; the 64-bit data, and the POSIX TZ rule of the footer for instants
 * past the table), for the daily reset of lanes. No setenv, no
 * localtime: a loaded zone is immutable and may be used by any number of
 * threads at once. A cache loads each zone once and shares it. */
#ifndef MEMD_HOST_LANE_TZ_H
#define MEMD_HOST_LANE_TZ_H

#include <stdint.h>

#include <memd/abi.h>

#define LANE_TZ_DIR_DEFAULT "/usr/share/zoneinfo" /* where zones live unless TZDIR says */
#define LANE_TZ_LOCALTIME "/etc/localtime"        /* the host's zone */
#define LANE_TZ_NAME_MAX 255                      /* bytes in a zone name */
#define LANE_TZ_CANDIDATES_MAX 2                  /* instants one local time can name */
#define LANE_TZ_SECS_PER_DAY 86400

typedef struct lane_tz lane_tz;
typedef struct lane_tz_cache lane_tz_cache;

/* Load the zone name: an IANA name ("Europe/Berlin": letters, digits and
 * "/_-+.", no leading '/', no ".." component) read from $TZDIR (default
 * LANE_TZ_DIR_DEFAULT); "" = the host's zone: $TZ when set (a zone name,
 * ":name", an absolute path, or a POSIX TZ rule such as "EST5EDT"), else
 * LANE_TZ_LOCALTIME. "UTC" that has no file is UTC. Nothing else falls
 * back to UTC: a missing or damaged file is an error. On success
 * *ret_zone is the caller's (lane_tz_free). MEMD_EINVAL (a bad name, a
 * file that is not TZif or has leap seconds), MEMD_ENOTFOUND (no such
 * zone), MEMD_EIO, MEMD_ENOMEM; the message names the zone. */
int32_t lane_tz_load(const char *name, lane_tz **ret_zone, memd_error *err);
void lane_tz_free(lane_tz *zone);

/* The name the zone was loaded by ("" loads give the host's zone's name
 * when it can be told, else "localtime"). Borrowed from the zone. */
const char *lane_tz_name(const lane_tz *zone);

/* Seconds east of UTC in force at the instant unix_s. */
int32_t lane_tz_offset(const lane_tz *zone, int64_t unix_s);

/* The instants whose local time in zone is local_s (a civil time counted
 * as seconds since 1970-01-01 00:00 of the zone's calendar, i.e. as if it
 * were UTC). Returns how many (earliest first in ret_utc): 1 normally, 2
 * in a fall-back overlap, 0 in a spring-forward gap, and then ret_utc[0]
 * is the first instant after the gap (the transition). */
int lane_tz_local_to_utc(const lane_tz *zone, int64_t local_s,
			 int64_t ret_utc[LANE_TZ_CANDIDATES_MAX]);

/* Days since 1970-01-01 of a proleptic Gregorian date, and back. */
int64_t lane_tz_days_from_civil(int64_t year, int month, int day);
void lane_tz_civil_from_days(int64_t days, int64_t *ret_year, int *ret_month, int *ret_day);

/* A cache of loaded zones, owned by whoever creates it; thread-safe. */
int32_t lane_tz_cache_new(lane_tz_cache **ret_cache, memd_error *err);
/* Frees the cache and every zone it handed out. NULL is fine. */
void lane_tz_cache_free(lane_tz_cache *cache);
/* The zone name (as lane_tz_load takes it), loaded on first use; later
 * calls get the same zone (a failure is not cached: a zone installed
 * later loads). *ret_zone is borrowed until lane_tz_cache_free. Errors as
 * lane_tz_load's. */
int32_t lane_tz_cache_get(lane_tz_cache *cache, const char *name, const lane_tz **ret_zone,
			  memd_error *err);

#endif
