/* SPDX-License-Identifier: MIT */
/*
 * http conns: the client connections libmicrohttpd holds, and the request
 * head deadline. libmicrohttpd's idle timeout starts again with every byte
 * received, so a client sending a request line and headers one byte at a
 * time keeps its connection (and one of server.max_connections) for as
 * long as it likes. Here every connection waiting for a request head (from
 * when it was accepted, or from when its previous request completed) is
 * listed in arrival order; a thread closes, every tick, those whose head is
 * older than the deadline: it sends 408 (when the socket takes it without
 * waiting) and shuts the socket down, so that libmicrohttpd sees end of
 * input and closes the connection. The count of open connections feeds the
 * memd_http_connections gauge.
 */
#ifndef MEMD_HTTP_CONNS_H
#define MEMD_HTTP_CONNS_H

#include <microhttpd.h>
#include <stdint.h>

#include "metrics.h"

typedef struct http_conns http_conns;

/* Start the thread: heads must arrive within head_timeout_ns, checked
 * every tick_ns; mt (not owned, outlives the conns) counts connections
 * and head timeouts. NULL on failure (out of memory, no thread). */
http_conns *http_conns_start(int64_t head_timeout_ns, int64_t tick_ns, http_metrics *mt);
/* Stop and join the thread; accepts NULL. Call after MHD_stop_daemon (which
 * reports every connection closed). */
void http_conns_stop(http_conns *c);

/* MHD_OPTION_NOTIFY_CONNECTION callback (cls: the http_conns): a new
 * connection starts waiting for its head; a closed one is forgotten (the
 * thread never touches its socket afterwards). */
void http_conns_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
		       enum MHD_ConnectionNotificationCode code);
/* conn's request head is in (the first call of the access handler for a
 * request): its deadline no longer applies. */
void http_conns_head_done(http_conns *c, struct MHD_Connection *conn);
/* conn's request completed: the connection waits for the next head, with
 * a new deadline from now; if no request line has come by then, it is
 * idle and closed without a 408. */
void http_conns_head_next(http_conns *c, struct MHD_Connection *conn);
/* The id of the request whose head conn is reading (copied), for the 408
 * a head timeout sends; without one the 408 gets a new UUIDv7. */
void http_conns_head_id(http_conns *c, struct MHD_Connection *conn, const char *request_id);
/* Nonzero once conn's head timed out (the 408 went out, or was tried). */
int http_conns_expired(http_conns *c, struct MHD_Connection *conn);

#endif
