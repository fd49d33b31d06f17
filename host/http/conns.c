/* SPDX-License-Identifier: MIT */
#include "conns.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "errors.h"
#include "request.h"
#include "util/uuid.h"

#define NS_PER_SEC 1000000000LL
#define RAW_HEAD_MAX 512

/* One connection (libmicrohttpd's socket context). */
typedef struct conn_entry {
	int fd;
	int64_t since_ns;          /* waiting for a head since then */
	int waiting;               /* listed (waiting for a head) */
	int expired;               /* its head timed out: 408 sent */
	int kept;                  /* an earlier request on it completed (keep-alive) */
	char request_id[HTTP_REQUEST_ID_MAX + 1]; /* of the head being read, or "" */
	struct conn_entry *prev, *next;
} conn_entry;

struct http_conns {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	int stop;
	int64_t timeout_ns, tick_ns;
	http_metrics *mt;
	conn_entry *head, *tail;   /* waiting, oldest first */
};

static void unlist(http_conns *c, conn_entry *e)
{
	if (!e->waiting)
		return;
	if (e->prev)
		e->prev->next = e->next;
	else
		c->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		c->tail = e->prev;
	e->prev = e->next = NULL;
	e->waiting = 0;
}

static void list_now(http_conns *c, conn_entry *e)
{
	unlist(c, e);
	e->since_ns = http_now_ns();
	e->waiting = 1;
	e->prev = c->tail;
	if (c->tail)
		c->tail->next = e;
	else
		c->head = e;
	c->tail = e;
}

/* 408 without waiting (a client that reads nothing gets just the close),
 * then end of input for libmicrohttpd. Nothing else writes to a socket
 * that waits for a request head. A kept-alive connection whose next
 * request line has not come is idle, not slow: it is closed without a
 * 408, which its client would take for the answer to the request it may
 * be sending right now (a keep-alive pool reusing the socket just as the
 * deadline passes): a close is what every client expects of an idle
 * keep-alive connection, and a request caught by it was not read. */
static void expire(http_conns *c, conn_entry *e)
{
	const http_error_kind *k = http_error_lookup(HTTP_E_TIMEOUT, 0);
	char msg[128], head[RAW_HEAD_MAX];
	const char *id = e->request_id;
	char *body;
	int fd = e->fd, n;

	if (e->kept && !id[0]) {
		shutdown(fd, SHUT_RDWR);
		http_metrics_idle_close(c->mt);
		return;
	}
	/* Before its request line is in, the answer gets an id of its own. */
	if (!id[0] && uuid_v7(e->request_id) < 0)
		snprintf(e->request_id, sizeof(e->request_id), "head-timeout");
	e->expired = 1;

	snprintf(msg, sizeof(msg), "the request line and headers were not received within %lld s "
		 "(server.header_timeout_s)", (long long)(c->timeout_ns / NS_PER_SEC));
	body = http_error_body(k, msg);
	if (body) {
		n = snprintf(head, sizeof(head),
			     "HTTP/1.1 %u %s\r\nContent-Type: " HTTP_JSON_TYPE
			     "\r\nContent-Length: %zu\r\nX-Request-Id: %s\r\nCache-Control: no-store\r\n"
			     "Connection: close\r\n\r\n",
			     k->status, MHD_get_reason_phrase_for(k->status), strlen(body), id);
		if (n > 0 && (size_t)n < sizeof(head) &&
		    send(fd, head, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT | MSG_MORE) == n)
			send(fd, body, strlen(body), MSG_NOSIGNAL | MSG_DONTWAIT);
		free(body);
	}
	shutdown(fd, SHUT_RDWR);
	http_metrics_head_timeout(c->mt);
}

static void *run(void *arg)
{
	http_conns *c = arg;

	pthread_mutex_lock(&c->lock);
	while (!c->stop) {
		struct timespec until;
		int64_t now = http_now_ns();

		/* Oldest first: stop at the first one still in time. The
		 * socket stays open while listed (closing unlists it first). */
		while (c->head && now - c->head->since_ns > c->timeout_ns) {
			conn_entry *e = c->head;
			unlist(c, e);
			expire(c, e);
		}
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += c->tick_ns % NS_PER_SEC;
		until.tv_sec += c->tick_ns / NS_PER_SEC + until.tv_nsec / NS_PER_SEC;
		until.tv_nsec %= NS_PER_SEC;
		while (!c->stop && pthread_cond_timedwait(&c->wake, &c->lock, &until) == EINTR)
			;
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

http_conns *http_conns_start(int64_t head_timeout_ns, int64_t tick_ns, http_metrics *mt)
{
	http_conns *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->timeout_ns = head_timeout_ns;
	c->tick_ns = tick_ns;
	c->mt = mt;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->wake, NULL);
	if (pthread_create(&c->thread, NULL, run, c) != 0) {
		pthread_cond_destroy(&c->wake);
		pthread_mutex_destroy(&c->lock);
		free(c);
		return NULL;
	}
	return c;
}

void http_conns_stop(http_conns *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	c->stop = 1;
	pthread_cond_signal(&c->wake);
	pthread_mutex_unlock(&c->lock);
	pthread_join(c->thread, NULL);
	pthread_cond_destroy(&c->wake);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

void http_conns_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
		       enum MHD_ConnectionNotificationCode code)
{
	http_conns *c = cls;
	conn_entry *e = *socket_context;
	const union MHD_ConnectionInfo *ci;

	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		e = calloc(1, sizeof(*e));
		*socket_context = e;
		http_metrics_connections_add(c->mt, 1);
		if (!e || !ci)
			return; /* without memory only the deadline is lost */
		e->fd = ci->connect_fd;
		pthread_mutex_lock(&c->lock);
		list_now(c, e);
		pthread_mutex_unlock(&c->lock);
		return;
	}
	if (code != MHD_CONNECTION_NOTIFY_CLOSED)
		return;
	http_metrics_connections_add(c->mt, -1);
	if (!e)
		return;
	pthread_mutex_lock(&c->lock);
	unlist(c, e);
	pthread_mutex_unlock(&c->lock);
	free(e);
	*socket_context = NULL;
}

static conn_entry *entry_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci ? ci->socket_context : NULL;
}

void http_conns_head_done(http_conns *c, struct MHD_Connection *conn)
{
	conn_entry *e = entry_of(conn);
	if (!c || !e)
		return;
	pthread_mutex_lock(&c->lock);
	unlist(c, e);
	pthread_mutex_unlock(&c->lock);
}

void http_conns_head_next(http_conns *c, struct MHD_Connection *conn)
{
	conn_entry *e = entry_of(conn);
	if (!c || !e)
		return;
	pthread_mutex_lock(&c->lock);
	e->request_id[0] = '\0';
	e->kept = 1;
	list_now(c, e);
	pthread_mutex_unlock(&c->lock);
}

void http_conns_head_id(http_conns *c, struct MHD_Connection *conn, const char *request_id)
{
	conn_entry *e = entry_of(conn);
	if (!c || !e)
		return;
	pthread_mutex_lock(&c->lock);
	snprintf(e->request_id, sizeof(e->request_id), "%s", request_id);
	pthread_mutex_unlock(&c->lock);
}

int http_conns_expired(http_conns *c, struct MHD_Connection *conn)
{
	conn_entry *e = entry_of(conn);
	int r;
	if (!c || !e)
		return 0;
	pthread_mutex_lock(&c->lock);
	r = e->expired;
	pthread_mutex_unlock(&c->lock);
	return r;
}
