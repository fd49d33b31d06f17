/* SPDX-License-Identifier: MIT */
/*
 * jobs: long operations (an index rebuild) run in the background on the
 * host's job thread, never on the caller's (a request's) thread, and a
 * registry of them that clients poll. A job has an id (UUIDv7), a kind,
 * a scope (app and user, or neither for everything), a state (queued,
 * running, succeeded, failed, canceled), progress (done of total units)
 * and, once it failed or was canceled, the error.
 *
 * At most one job of a kind and scope is queued or running: submitting
 * another while one is returns that one. Jobs run one at a time, oldest
 * first (JOBS_THREADS). Finished jobs are kept for JOBS_KEEP_MS and at
 * most JOBS_KEEP_FINISHED of them (the oldest finished go first), then
 * forgotten. Canceling a queued job finishes it at once; a running one
 * sees its cancel flag at its next progress report (and its store calls
 * see it too) and finishes as canceled, unless it had already done
 * everything. Closing cancels every job and waits for the running one.
 *
 * For tests only: when the environment variable JOBS_HOLD_ENV names a
 * file when the registry is created, a running job waits at each
 * progress report for as long as that file exists (or until canceled),
 * so that a test can observe a job in the middle of its work without
 * racing it. Unset (always, outside tests), nothing waits.
 */
#ifndef MEMD_HOST_JOBS_H
#define MEMD_HOST_JOBS_H

#include <stdint.h>

#include <memd/plugin.h>

#include "plugins/hostsvc.h"

/* Threads running jobs. One: the only kind, index rebuilds, serialize on
 * the index anyway, and a queued job then truly waits as "queued". */
#define JOBS_THREADS 1
/* Finished jobs kept for polling: at most this many, for this long. */
#define JOBS_KEEP_FINISHED 64
#define JOBS_KEEP_MS (60LL * 60 * 1000)
/* Queued and running jobs at most; another submit is MEMD_EUNAVAIL
 * (retryable). */
#define JOBS_ACTIVE_MAX 1024
/* How long closing waits for the running job to stop before it logs
 * that it is still waiting (it then waits on: the job's memory is in
 * use until it returns). */
#define JOBS_CLOSE_WAIT_MS 10000
/* The test-only hold (see above) and how often it looks at its file. */
#define JOBS_HOLD_ENV "MEMD_TEST_JOB_HOLD"
#define JOBS_HOLD_POLL_MS 10

/* Job kinds (static strings, the "kind" in the JSON). */
#define JOBS_KIND_INDEX_REBUILD "index_rebuild"

typedef struct jobs jobs;
typedef struct job job;

/* The work of a job, called once on the job thread with the job's scope
 * (app and user both set or both NULL; valid for the call). It reports
 * progress with job_progress and gives up with MEMD_ECANCELED once
 * *cancel is nonzero (job_progress also says so). Returns 0 or a
 * negative MEMD_E* with err filled. */
typedef int32_t (*jobs_fn)(void *userdata, job *j, const char *app, const char *user,
			   const volatile int32_t *cancel, memd_error *err);

/* Start JOBS_THREADS threads; svc (borrowed, must outlive the registry)
 * gets one log line per finished job. MEMD_ENOMEM, or MEMD_EIO when a
 * thread cannot start (nothing is left running). */
int32_t jobs_new(hostsvc *svc, jobs **ret, memd_error *err);

/* Cancel every queued and running job, wait for the running one to
 * return, stop the threads, free. Accepts NULL. */
void jobs_free(jobs *js);

/* Queue a job of kind (static) in scope (app, user: both set, validated
 * by the caller, or both NULL) that calls fn(userdata, ...) on the job
 * thread; userdata must stay valid until jobs_free. If a job of that
 * kind and scope is queued or running, nothing is queued and that one
 * is the answer, with *ret_existing 1 (else 0). *ret_json: the job
 * (see jobs_get), malloc'd. MEMD_EUNAVAIL (retryable) past
 * JOBS_ACTIVE_MAX or once closing began, MEMD_ENOMEM, MEMD_EIO (no
 * random numbers for the id). */
int32_t jobs_submit(jobs *js, const char *kind, const char *app, const char *user, jobs_fn fn,
		    void *userdata, char **ret_json, int *ret_existing, memd_error *err);

/* The job id as JSON text (malloc'd into *ret_json): {"id", "kind",
 * "state", "scope": {"app", "user"} (empty for everything), "progress":
 * {"done", "total"} (total 0 = not known yet), "created", "started",
 * "finished" (RFC 3339, null until then), "cancel_requested": bool,
 * "error"?: {"code", "message", "retryable"} (failed or canceled)}.
 * With app set, a job of another app (or of everything) is not found:
 * MEMD_ENOTFOUND, as for an unknown or forgotten id. */
int32_t jobs_get(jobs *js, const char *app, const char *id, char **ret_json, memd_error *err);

/* {"jobs": [job, ...]}: the jobs kept (queued, running, and finished
 * ones not yet forgotten), newest first; only app's when app is set. */
int32_t jobs_list(jobs *js, const char *app, char **ret_json, memd_error *err);

/* Cancel job id (found as by jobs_get) and answer it as it is then: a
 * queued job is canceled at once; a running one has cancel_requested
 * set and finishes soon; a finished one is unchanged. */
int32_t jobs_cancel(jobs *js, const char *app, const char *id, char **ret_json, memd_error *err);

/* From fn: the progress so far (done of total units, total 0 = not
 * known). Returns nonzero when the job is to give up (canceled or
 * closing). May wait: see the test-only hold above. */
int job_progress(job *j, uint64_t done, uint64_t total);

#endif
