/* SPDX-License-Identifier: MIT */
/*
 * http watchdog: enforces the request timeout on clients that stop
 * sending a body. Requests register while their body is being received;
 * a thread checks their deadlines every tick and calls fire() for each one
 * past it (once), which answers 408 and closes the connection.
 */
#ifndef MEMD_HTTP_WATCHDOG_H
#define MEMD_HTTP_WATCHDOG_H

#include <stdint.h>

#include "request.h"

typedef struct http_watchdog http_watchdog;

/* Called from the watchdog thread with rq->lock held, for a request whose
 * deadline_ns passed and that is not aborted. rq stays valid for the
 * call (it is unregistered only under the watchdog's lock). */
typedef void (*http_watchdog_fire_fn)(void *ud, http_req *rq);

/* Start the thread, checking every tick_ns. NULL on failure. */
http_watchdog *http_watchdog_start(int64_t tick_ns, http_watchdog_fire_fn fire, void *ud);
/* Stop and join the thread; accepts NULL. Registered requests are left
 * alone (their owner frees them). */
void http_watchdog_stop(http_watchdog *wd);
/* Register rq (rq->deadline_ns set); no-op if registered. */
void http_watchdog_add(http_watchdog *wd, http_req *rq);
/* Unregister rq; no-op if not registered. After it returns, fire() is
 * not running for rq and will not be called for it. */
void http_watchdog_remove(http_watchdog *wd, http_req *rq);

#endif
