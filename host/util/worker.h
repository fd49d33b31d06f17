/* SPDX-License-Identifier: MIT */
/*
 * worker: runs the strategies' after_append hooks after the append was
 * acknowledged, on background threads, single-flight per session: a run
 * for one session never overlaps another run for it, and an append that
 * arrives while a run is in progress gets exactly one more run after it
 * (so the hook always sees the newest events; bursts coalesce). Another
 * job for a session (a strategy's on_session_finalize) runs on its
 * caller's thread, exclusive with those runs (worker_run_exclusive).
 */
#ifndef MEMD_HOST_WORKER_H
#define MEMD_HOST_WORKER_H

#include <stdint.h>

#include <memd/abi.h>

#define WORKER_THREADS_DEFAULT 2

typedef struct worker worker;

/* The job: called on a worker thread with a scope (app, user, session)
 * that stays valid for the call. It must not call worker_* itself. */
typedef void (*worker_fn)(void *userdata, const memd_scope *scope);

/* Start threads (>= 1) running fn. On failure nothing is left running:
 * MEMD_EINVAL (threads 0), MEMD_ENOMEM, MEMD_EIO (no thread). */
int32_t worker_new(uint32_t threads, worker_fn fn, void *userdata, worker **ret, memd_error *err);

/* Ask for fn(scope) soon, single-flight per session (see above). Never
 * waits for fn. 0, or MEMD_ENOMEM (nothing queued; the next submit for the
 * session catches up), or MEMD_ECANCELED once worker_free has begun. */
int32_t worker_submit(worker *w, const memd_scope *scope);

/* Run fn(userdata, scope) once on the calling thread, exclusive with the
 * runs for scope's session: first waits until none is queued or running,
 * then holds the session while fn runs (a submit meanwhile is run once
 * after fn returns, as for a run in progress). fn must not call worker_*
 * for the same session. 0 once fn ran; MEMD_ENOMEM or MEMD_ECANCELED
 * (worker_free has begun) without running it. */
int32_t worker_run_exclusive(worker *w, const memd_scope *scope, worker_fn fn, void *userdata);

/* Block until no run is queued or in progress. */
void worker_drain(worker *w);

/* Number of sessions queued or running now (for tests and metrics). */
uint32_t worker_pending(worker *w);

/* Finish every queued run (drain), stop the threads, free. Accepts NULL. */
void worker_free(worker *w);

#endif
