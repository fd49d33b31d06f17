/* SPDX-License-Identifier: MIT */
/*
 * http listen: the server.listen address: resolving it, telling whether
 * it is loopback-only, and opening the listening socket.
 */
#ifndef MEMD_HTTP_LISTEN_H
#define MEMD_HTTP_LISTEN_H

#include <stdint.h>

#include <memd/abi.h>

#define HTTP_LISTEN_BACKLOG 1024

/* Resolve addr ("host:port" or "[v6]:port"). Sets *ret_loopback to 1
 * when every address it resolves to is a loopback address (127.0.0.0/8,
 * ::1, ::ffff:127.0.0.0/104), else 0. MEMD_EINVAL if it cannot be
 * resolved or parsed. */
int32_t http_listen_is_loopback(const char *addr, int *ret_loopback, memd_error *err);

/* Open, bind and listen on the first address addr resolves to
 * (SO_REUSEADDR, non-blocking, close-on-exec). *ret_fd is the socket and
 * ret_name (at least 64 bytes) gets "addr:port" as bound. MEMD_EIO with
 * the reason (address in use, permission). */
int32_t http_listen_open(const char *addr, int *ret_fd, char *ret_name, size_t name_cap,
			 memd_error *err);

#endif
