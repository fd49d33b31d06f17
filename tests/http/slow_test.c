/* SPDX-License-Identifier: MIT */
/*
 * Slow clients: 2,000 connections from one address, each sending a
 * request head a byte at a time, do not keep a client on another address
 * from being answered within a second (server.max_connections_per_ip,
 * server.max_connections); a request head that keeps trickling in is cut
 * off at server.header_timeout_s with 408, though every byte starts
 * libmicrohttpd's idle timer again; max_connections is fitted to the
 * open-file limit at start.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define SLOW_CONNS 2000
/* The slow clients' address and the normal client's (all of 127/8 is
 * loopback on Linux). */
#define SLOW_ADDR "127.0.0.1"
#define NORMAL_ADDR "127.0.0.2"
/* A request head that never ends: the slow clients send it a byte at a
 * time, pausing TRICKLE_NS between rounds. */
#define SLOW_HEAD "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define TRICKLE_NS 200000000L
#define NORMAL_BOUND_MS 1000
#define NORMAL_READ_MS 5000
/* How long the test waits for memd to take or refuse every connection. */
#define SETTLE_MS 60000
#define POLL_STEP_US 20000
#define FD_HEADROOM 512
#define RESP_MAX 8192

static hs H;

static void setup(void)
{
	memset(&H, 0, sizeof(H));
}

static void teardown(void)
{
	hs_finish(&H);
}

TestSuite(slow, .init = setup, .fini = teardown, .timeout = 110);

/* A socket bound to addr, connecting to memd: nonblocking when nb (the
 * connection may still be in progress on return). */
static int connect_from(const char *addr, int nb)
{
	struct sockaddr_in local = { .sin_family = AF_INET };
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)H.port) };
	int fd = socket(AF_INET, SOCK_STREAM | (nb ? SOCK_NONBLOCK : 0), 0);

	cr_assert(fd >= 0, "socket: %s", strerror(errno));
	inet_pton(AF_INET, addr, &local.sin_addr);
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	cr_assert(bind(fd, (struct sockaddr *)&local, sizeof(local)) == 0, "bind %s: %s", addr,
		  strerror(errno));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
		cr_assert(nb && errno == EINPROGRESS, "connect: %s", strerror(errno));
	return fd;
}

/* One request from NORMAL_ADDR on a new connection: its status, and the
 * milliseconds from connect to the whole response. */
static int normal_request(const char *path, int64_t *ret_ms)
{
	char req[256], resp[RESP_MAX];
	int64_t t0 = hs_now_ms();
	int fd = connect_from(NORMAL_ADDR, 0);
	int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
			 path);

	hs_raw_send(fd, req, (size_t)n);
	hs_raw_read(fd, resp, sizeof(resp), NORMAL_READ_MS);
	*ret_ms = hs_now_ms() - t0;
	close(fd);
	return hs_raw_status(resp);
}

/* memd_http_connections from /metrics (asked from NORMAL_ADDR, so one of
 * them is that request's own connection). */
static long open_connections(void)
{
	char req[] = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
	static char resp[1 << 20];
	const char *p;
	int fd = connect_from(NORMAL_ADDR, 0);

	hs_raw_send(fd, req, sizeof(req) - 1);
	hs_raw_read(fd, resp, sizeof(resp), NORMAL_READ_MS);
	close(fd);
	p = strstr(resp, "\nmemd_http_connections ");
	cr_assert(p, "/metrics has no memd_http_connections gauge");
	return strtol(p + strlen("\nmemd_http_connections "), NULL, 10);
}

typedef struct slow_set {
	int fd[SLOW_CONNS];
	size_t sent[SLOW_CONNS];   /* bytes of SLOW_HEAD sent */
	int closed[SLOW_CONNS];    /* memd closed it (seen by the main thread) */
	atomic_int stop;
	pthread_t t;
} slow_set;

/* Each round, the next byte of the head on every connection. */
static void *trickle(void *arg)
{
	slow_set *s = arg;
	struct timespec pause = { 0, TRICKLE_NS };

	while (!atomic_load(&s->stop)) {
		for (int i = 0; i < SLOW_CONNS; i++)
			if (s->sent[i] < sizeof(SLOW_HEAD) - 1 &&
			    send(s->fd[i], SLOW_HEAD + s->sent[i], 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1)
				s->sent[i]++;
		nanosleep(&pause, NULL);
	}
	return NULL;
}

/* Connections memd has closed (refused, or timed out), newly seen. */
static int reap_closed(slow_set *s)
{
	static struct pollfd p[SLOW_CONNS];
	int idx[SLOW_CONNS], n = 0, closed = 0;

	for (int i = 0; i < SLOW_CONNS; i++)
		if (!s->closed[i]) {
			p[n] = (struct pollfd){ s->fd[i], POLLIN, 0 };
			idx[n++] = i;
		}
	if (poll(p, (nfds_t)n, 0) <= 0)
		return 0;
	for (int k = 0; k < n; k++) {
		char buf[RESP_MAX];
		ssize_t r;
		if (!(p[k].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		r = recv(p[k].fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			continue;
		s->closed[idx[k]] = 1; /* end of input, a reset, or an answer before closing */
		closed++;
	}
	return closed;
}

static void raise_nofile(rlim_t want)
{
	struct rlimit rl;
	cr_assert(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	if (rl.rlim_cur < want) {
		rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
		cr_assert(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit: %s", strerror(errno));
	}
	cr_assert(rl.rlim_cur >= want, "the open-file limit (%ju) is below the %ju the test needs",
		  (uintmax_t)rl.rlim_cur, (uintmax_t)want);
}

Test(slow, slowloris_from_one_address_leaves_others_answered)
{
	static slow_set s;
	int64_t ms, settle_until;
	int closed = 0, status;
	long open;

	raise_nofile(SLOW_CONNS + FD_HEADROOM);
	/* Heads have all the time the test needs: what is measured here are
	 * the connection limits. */
	hs_start(&H, "  header_timeout_s: 3600\n", NULL);
	settle_until = hs_now_ms() + SETTLE_MS;
	/* Only the /metrics request's own connection left (the start's
	 * /healthz probes closed theirs). */
	while ((open = open_connections()) != 1) {
		cr_assert(hs_now_ms() < settle_until, "memd still has %ld connections open", open);
		usleep(POLL_STEP_US);
	}
	memset(&s, 0, sizeof(s));
	for (int i = 0; i < SLOW_CONNS; i++)
		s.fd[i] = connect_from(SLOW_ADDR, 1);
	cr_assert(pthread_create(&s.t, NULL, trickle, &s) == 0);
	/* Wait until memd has taken (counted in the gauge) or refused
	 * (closed) every one of them. */
	for (;;) {
		closed += reap_closed(&s);
		open = open_connections() - 1;
		if (closed + open == SLOW_CONNS)
			break;
		cr_assert(hs_now_ms() < settle_until,
			  "after %d ms memd has taken %ld and refused %d of %d connections", SETTLE_MS,
			  open, closed, SLOW_CONNS);
		usleep(POLL_STEP_US);
	}
	cr_assert_gt(open, 0, "memd took none of the slow connections");
	cr_assert_gt(closed, 0, "memd refused none of the slow connections");
	status = normal_request("/healthz", &ms);
	cr_assert_eq(status, 200, "a client on another address got status %d after %" PRId64 " ms",
		     status, ms);
	cr_assert_lt(ms, NORMAL_BOUND_MS,
		     "a client on another address waited %" PRId64 " ms with %ld slow connections open",
		     ms, open);
	atomic_store(&s.stop, 1);
	pthread_join(s.t, NULL);
	for (int i = 0; i < SLOW_CONNS; i++)
		close(s.fd[i]);
}

Test(slow, trickled_head_cut_off_at_header_timeout)
{
	const char *head = SLOW_HEAD;
	char resp[RESP_MAX];
	struct timespec pause = { 0, TRICKLE_NS / 2 };
	int64_t t0, until;
	size_t sent = 0;
	int fd, closed = 0;

	hs_start(&H, "  header_timeout_s: 1\n", NULL);
	fd = connect_from(SLOW_ADDR, 0);
	t0 = hs_now_ms();
	/* Much faster than the idle timeout, and a head of many seconds. */
	until = t0 + SETTLE_MS / 4;
	while (!closed && sent < strlen(head) && hs_now_ms() < until) {
		struct pollfd p = { fd, POLLIN, 0 };
		if (send(fd, head + sent, 1, MSG_NOSIGNAL) == 1)
			sent++;
		nanosleep(&pause, NULL);
		closed = poll(&p, 1, 0) > 0;
	}
	cr_assert(closed, "memd still reads a head trickling in for %" PRId64 " ms (%zu bytes)",
		  hs_now_ms() - t0, sent);
	cr_assert_lt(sent, strlen(head));
	hs_raw_read(fd, resp, sizeof(resp), NORMAL_READ_MS);
	close(fd);
	cr_assert_eq(hs_raw_status(resp), 408, "got: %.200s", resp);
	cr_assert(strstr(resp, "header_timeout_s"), "got: %.400s", resp);
	cr_assert(strstr(resp, "\r\nX-Request-Id: "), "every answer has a request id: %.400s", resp);
}

Test(slow, max_connections_fitted_to_the_open_file_limit)
{
	struct rlimit rl = { 1024, 1024 };
	char *log;

	/* Inherited by memd (each test runs in its own process). */
	cr_assert(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit: %s", strerror(errno));
	int64_t until;

	hs_start(&H, "  max_connections: 5000\n", NULL);
	/* The "listening" line may come just after the first answer. */
	until = hs_now_ms() + SETTLE_MS;
	while (!strstr(log = hs_log_text(&H), "\"msg\":\"listening\"") && hs_now_ms() < until) {
		free(log);
		usleep(POLL_STEP_US);
	}
	cr_assert(strstr(log, "server.max_connections 5000 lowered to 768"), "log: %s", log);
	cr_assert(strstr(log, "\"max_connections\":768"), "log: %s", log);
	free(log);
}

Test(slow, a_head_timeout_after_the_request_line_is_logged_with_its_id)
{
	const char *head = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Half: a";
	char resp[4096], want[256], *log;
	const char *id;
	int fd;

	hs_start(&H, "  header_timeout_s: 1\n", NULL);
	fd = hs_raw_connect(&H);
	hs_raw_send(fd, head, strlen(head));
	/* memd closes the connection at the deadline (the read waits for it). */
	hs_raw_read(fd, resp, sizeof(resp), NORMAL_READ_MS);
	close(fd);
	cr_assert_eq(hs_raw_status(resp), 408, "got: %.200s", resp);
	id = strstr(resp, "\r\nX-Request-Id: ");
	cr_assert(id, "every answer has a request id: %.400s", resp);
	id += strlen("\r\nX-Request-Id: ");
	snprintf(want, sizeof(want), "\"request_id\":\"%.*s\"", (int)strcspn(id, "\r"), id);
	/* The request's log line is written when libmicrohttpd closes it, just
	 * after the socket closed: stop memd, which writes every line first. */
	hs_stop(&H);
	log = hs_log_text(&H);
	cr_assert(strstr(log, want), "no log line with %s:\n%s", want, log);
	cr_assert(strstr(strstr(log, want), "\"status\":408"), "%.400s", strstr(log, want));
	free(log);
}

Test(slow, an_idle_kept_alive_connection_is_closed_without_an_answer)
{
	const char *req = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
	char resp[RESP_MAX], rest[16];
	int fd;

	hs_start(&H, "  header_timeout_s: 1\n", NULL);
	fd = hs_raw_connect(&H);
	hs_raw_send(fd, req, strlen(req));
	/* The answer, then (the connection idle past the deadline) the close:
	 * the read ends when memd closes it, bounded far above the deadline. */
	hs_raw_read(fd, resp, sizeof(resp), SETTLE_MS);
	cr_assert_eq(recv(fd, rest, sizeof(rest), MSG_DONTWAIT), 0,
		     "memd did not close the idle connection within %d ms", SETTLE_MS);
	close(fd);
	cr_assert_eq(hs_raw_status(resp), 200, "got: %.200s", resp);
	/* A 408 here would be read by a keep-alive client as the answer to
	 * the request it sends next on this socket. */
	cr_assert_null(strstr(resp + 1, "HTTP/1.1 "), "more than one answer: %.600s", resp);
}
