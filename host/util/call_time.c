/* SPDX-License-Identifier: MIT */
#include "util/call_time.h"

#include <time.h>

#define CT_SLEEP_SLICE_MS 50 /* how often a backoff looks at cancel */
#define CT_US_PER_S 1000000LL
#define CT_NS_PER_US 1000
#define CT_US_PER_MS 1000
#define CT_NS_PER_MS 1000000L

static int64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * CT_US_PER_S + ts.tv_nsec / CT_NS_PER_US;
}

int call_cancelled(const memd_call *call)
{
	return call && call->cancel && *call->cancel;
}

int64_t call_left_ms(const memd_call *call)
{
	if (!call || !call->deadline_us)
		return INT64_MAX;
	return (call->deadline_us - mono_us()) / CT_US_PER_MS;
}

void call_backoff_sleep(const memd_call *call, int64_t ms)
{
	while (ms > 0 && !call_cancelled(call)) {
		int64_t slice = ms < CT_SLEEP_SLICE_MS ? ms : CT_SLEEP_SLICE_MS;
		struct timespec ts = { .tv_sec = 0, .tv_nsec = slice * CT_NS_PER_MS };
		if (call_left_ms(call) <= slice)
			return;
		nanosleep(&ts, NULL);
		ms -= slice;
	}
}
