/* SPDX-License-Identifier: MIT */
/*
 * http server: `memd serve`. Loads the config, refuses a non-loopback
 * listen address without API keys, opens libmemd, serves the REST API
 * (api/openapi.yaml) on libmicrohttpd with a thread pool, and on SIGTERM
 * or SIGINT stops accepting, finishes the requests in flight (for at most
 * server.request_timeout_ms), closes libmemd (flushing) and returns.
 * Logs JSON lines on stderr.
 */
#ifndef MEMD_HTTP_SERVER_H
#define MEMD_HTTP_SERVER_H

#include <stdint.h>

#include "config/config.h"

/* Threads of the pool when server.threads is 0: this many per online CPU,
 * at least HTTP_THREADS_MIN (handlers block on storage, so a pool larger
 * than the CPU count keeps clients from waiting behind each other). */
#define HTTP_THREADS_PER_CPU 8
#define HTTP_THREADS_MIN 16
/* Workers when server.workers is 0 (workers.h): the writes that may wait
 * for a commit at once; each is in the store's queue, so up to this many
 * share one commit group. */
#define HTTP_WORKERS_DEFAULT 64

/* Check a config as `memd serve` takes it (what `memd config check` runs):
 * service_check_config with the server's own rule (server.listen resolves,
 * and a non-loopback address needs server.api_keys). Every problem is
 * added to d. Returns 0, MEMD_EINVAL, or MEMD_ENOMEM. */
int32_t http_check_config(const char *config_path, const char *const *plugin_path,
			  config_diag *d);

/* Run the server until SIGTERM/SIGINT. Checks the config first with
 * http_check_config and logs every problem before refusing. config_path NULL = zero-config;
 * plugin_path as memd_options.plugin_path. Blocks SIGTERM and SIGINT in
 * the calling thread (and the threads it starts). Returns 0 after a clean
 * shutdown; otherwise a negative MEMD_E* code after logging why:
 * MEMD_EINVAL for a bad config or an unsafe listen address, MEMD_EIO when
 * the address cannot be bound, or what memd_open returned. */
int32_t http_serve(const char *config_path, const char *const *plugin_path);

#endif
