/* SPDX-License-Identifier: MIT */
/*
 * http workers: the threads that run the requests which may block on a
 * commit, so that libmicrohttpd's threads never do. The access handler
 * suspends the connection and submits the request; a worker runs its
 * route's handler (the facade call, which may sleep in the store's group
 * commit) and resumes the connection, whose next access call queues the
 * reply. With enough workers, every append waiting for a commit is in the
 * store's queue and joins the next group, however the connections are
 * spread over libmicrohttpd's threads. The queue is a list through the
 * requests themselves (no allocation); it never holds more than one
 * request per connection.
 */
#ifndef MEMD_HTTP_WORKERS_H
#define MEMD_HTTP_WORKERS_H

#include <stdint.h>

#include "request.h"

typedef struct http_workers http_workers;

/* Run a submitted request (on a worker thread): set its reply. rq stays
 * the caller's; the pool does not touch it after run returns. */
typedef void (*http_workers_run_fn)(void *ud, http_req *rq);
/* Give a submitted request back without running it (it timed out while
 * queued, or the pool is stopping): set its reply. Called from
 * http_workers_cancel's or http_workers_stop's caller. */
typedef void (*http_workers_drop_fn)(void *ud, http_req *rq, int stopping);

/* Start n threads (n >= 1). NULL on failure (out of memory, no thread). */
http_workers *http_workers_start(unsigned n, http_workers_run_fn run, http_workers_drop_fn drop,
				 void *ud);
/* Hand rq to a worker (FIFO). 0, or MEMD_ECANCELED once the pool is
 * stopping (rq is then not taken: the caller answers it). */
int32_t http_workers_submit(http_workers *w, http_req *rq);
/* Take rq out of the queue if no worker has picked it yet, and call drop
 * for it (stopping 0). Returns 1 when it did, 0 when rq is running or
 * done (then the worker answers it). */
int http_workers_cancel(http_workers *w, http_req *rq);
/* Stop: every request still queued is dropped (stopping 1), the requests
 * running finish, the threads are joined. Accepts NULL. After it returns,
 * submit refuses; free with http_workers_free. */
void http_workers_stop(http_workers *w);
/* Free a stopped pool; accepts NULL. */
void http_workers_free(http_workers *w);

#endif
