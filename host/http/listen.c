/* SPDX-License-Identifier: MIT */
#include "listen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memd/plugin.h>

#include "config/settings.h"

#define LOOPBACK_NET_V4 0x7f000000u
#define LOOPBACK_MASK_V4 0xff000000u
#define V4MAPPED_PREFIX 12 /* bytes of ::ffff:0:0/96 before the IPv4 address */

static int32_t resolve(const char *addr, struct addrinfo **ret, memd_error *err)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	char *host = NULL, port[16];
	int32_t p, rc;

	if (settings_listen_split(addr, &host, &p) < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "server.listen '%.128s': expected host:port",
				      addr);
	snprintf(port, sizeof(port), "%d", (int)p);
	rc = getaddrinfo(host, port, &hints, ret);
	if (rc != 0) {
		int32_t r = memd_error_set(err, MEMD_EINVAL, 0, "server.listen '%.128s': %s", addr,
					   gai_strerror(rc));
		free(host);
		return r;
	}
	free(host);
	return 0;
}

static int is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		return (ntohl(in->sin_addr.s_addr) & LOOPBACK_MASK_V4) == LOOPBACK_NET_V4;
	}
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
		if (IN6_IS_ADDR_LOOPBACK(a))
			return 1;
		if (IN6_IS_ADDR_V4MAPPED(a))
			return a->s6_addr[V4MAPPED_PREFIX] == (LOOPBACK_NET_V4 >> 24);
	}
	return 0;
}

int32_t http_listen_is_loopback(const char *addr, int *ret_loopback, memd_error *err)
{
	struct addrinfo *ai;
	int all = 1;
	int32_t r = resolve(addr, &ai, err);

	if (r < 0)
		return r;
	for (struct addrinfo *p = ai; p; p = p->ai_next)
		all &= is_loopback(p->ai_addr);
	freeaddrinfo(ai);
	*ret_loopback = all;
	return 0;
}

int32_t http_listen_open(const char *addr, int *ret_fd, char *ret_name, size_t name_cap,
			 memd_error *err)
{
	struct addrinfo *ai;
	struct sockaddr_storage bound;
	socklen_t blen = sizeof(bound);
	char host[NI_MAXHOST], serv[NI_MAXSERV];
	int fd, one = 1, e;
	int32_t r = resolve(addr, &ai, err);

	if (r < 0)
		return r;
	fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
	if (fd < 0) {
		e = errno;
		freeaddrinfo(ai);
		return memd_error_set(err, MEMD_EIO, 0, "cannot create a socket: %s", strerror(e));
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, HTTP_LISTEN_BACKLOG) < 0) {
		e = errno;
		close(fd);
		freeaddrinfo(ai);
		return memd_error_set(err, MEMD_EIO, 0, "cannot listen on %.128s: %s", addr, strerror(e));
	}
	freeaddrinfo(ai);
	if (getsockname(fd, (struct sockaddr *)&bound, &blen) == 0 &&
	    getnameinfo((struct sockaddr *)&bound, blen, host, sizeof(host), serv, sizeof(serv),
			NI_NUMERICHOST | NI_NUMERICSERV) == 0)
		snprintf(ret_name, name_cap, bound.ss_family == AF_INET6 ? "[%s]:%s" : "%s:%s", host, serv);
	else
		snprintf(ret_name, name_cap, "%s", addr);
	*ret_fd = fd;
	return 0;
}
