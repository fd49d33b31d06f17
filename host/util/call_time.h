/* SPDX-License-Identifier: MIT */
/*
 * call_time: a memd_call's cancel flag and deadline as the host's outbound
 * HTTP clients (the finalize webhook, the OpenAI embedder, the chat client)
 * wait on them between attempts.
 */
#ifndef MEMD_HOST_CALL_TIME_H
#define MEMD_HOST_CALL_TIME_H

#include <stdint.h>

#include <memd/plugin.h>

/* 1 when call (may be NULL) is cancelled. */
int call_cancelled(const memd_call *call);

/* Milliseconds left before call's deadline (CLOCK_MONOTONIC); INT64_MAX
 * without a call or a deadline; zero or less once it passed. */
int64_t call_left_ms(const memd_call *call);

/* Sleep ms in short slices, returning early when call is cancelled or its
 * deadline would pass within the next slice. */
void call_backoff_sleep(const memd_call *call, int64_t ms);

#endif
