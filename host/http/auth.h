/* SPDX-License-Identifier: MIT */
/*
 * http auth: API keys from server.api_keys, sent as
 * "Authorization: Bearer <key>". Scopes are ordered: admin includes write,
 * write includes read. Keys are compared in constant time (per key length)
 * and never logged or echoed.
 */
#ifndef MEMD_HTTP_AUTH_H
#define MEMD_HTTP_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include <memd/abi.h>

#include "config/settings.h"

/* Scope a route needs: none (public), or SETTINGS_SCOPE_*. */
#define HTTP_SCOPE_PUBLIC 0

/* Check the Authorization header value (NULL if absent) against keys
 * (n of them, borrowed) for a route needing scope, about app: the
 * request's app (decoded), "" when the route has one that could not be
 * read, NULL for a route without one. A key limited to apps (its apps
 * list) passes only for those apps, and for app-less routes that do not
 * need admin scope. With no keys configured every request passes.
 * Returns 0, MEMD_EAUTH (missing, malformed or unknown key) or
 * MEMD_EFORBIDDEN (the key's scope is too low, or the app not one of
 * its apps), with a message in err. */
int32_t http_auth_check(const settings_api_key *keys, size_t n, const char *authorization,
			int32_t scope, const char *app, memd_error *err);

/* The key of keys (n of them) the Authorization header value names
 * (borrowed from keys), or NULL when it names none (or is NULL or
 * malformed). Compared as http_auth_check does. */
const settings_api_key *http_auth_key(const settings_api_key *keys, size_t n,
				      const char *authorization);

/* Which Host header values a request may carry (DNS rebinding: a web
 * page on a name that resolves to 127.0.0.1 must not reach a loopback
 * memd that has no keys). */
typedef struct http_hosts {
	const char *const *allowed;    /* server.allowed_hosts, or NULL */
	int loopback_only;             /* no allowed_hosts: answer only the loopback names */
	int32_t port;                  /* memd's port, for "name:port" */
} http_hosts;

/* Check a request's Host header value (NULL when absent). With
 * h->allowed each entry "name" matches the name alone or with any port,
 * "name:port" only itself; else with h->loopback_only 127.0.0.1,
 * localhost and [::1] match alone or with h->port; else every Host does.
 * Names are compared case-insensitively. An HTTP/1.1 request (http11
 * nonzero) must carry a Host. Returns 0 or MEMD_EINVAL with a message. */
int32_t http_host_check(const http_hosts *h, const char *host, int http11, memd_error *err);

/* Cross-site requests from a browser (CSRF), for a memd without API keys,
 * where the browser's ambient access to 127.0.0.1 is the only credential:
 * refused when Sec-Fetch-Site (NULL if absent) is cross-site or
 * same-site, or when Origin (NULL if absent) is "null" or names another
 * authority than host (the Host header, NULL if absent). Requests from
 * other clients carry neither header. Returns 0 or MEMD_EFORBIDDEN with a
 * message. */
int32_t http_browser_check(const char *origin, const char *fetch_site, const char *host,
			   memd_error *err);

/* "read", "write", "admin" or "public". Static storage. */
const char *http_auth_scope_name(int32_t scope);

#endif
