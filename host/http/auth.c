/* SPDX-License-Identifier: MIT */
#include "auth.h"

#include <string.h>
#include <strings.h>

#include <memd/plugin.h>

#define BEARER "Bearer"
#define PORT_DIGITS_MAX 5
#define HOST_ECHO_MAX 64 /* bytes of a refused Host quoted in the message */

/* The names of the loopback addresses, as a Host header carries them. */
static const char *const loopback_hosts[] = { "127.0.0.1", "localhost", "[::1]", NULL };

/* Nonzero iff a (alen bytes) equals b (blen bytes). The time depends on
 * blen (the configured key) only, never on where a differs. */
static int ct_equal(const char *a, size_t alen, const char *b, size_t blen)
{
	volatile unsigned char diff = (unsigned char)(alen != blen);
	for (size_t i = 0; i < blen; i++) {
		unsigned char ca = i < alen ? (unsigned char)a[i] : 0;
		diff |= (unsigned char)(ca ^ (unsigned char)b[i]);
	}
	return diff == 0;
}

const char *http_auth_scope_name(int32_t scope)
{
	switch (scope) {
	case SETTINGS_SCOPE_READ:
		return "read";
	case SETTINGS_SCOPE_WRITE:
		return "write";
	case SETTINGS_SCOPE_ADMIN:
		return "admin";
	default:
		return "public";
	}
}

/* Is app one of apps (NULL: every app)? */
static int app_allowed(char *const *apps, const char *app)
{
	if (!apps)
		return 1;
	for (size_t i = 0; apps[i]; i++)
		if (strcmp(apps[i], app) == 0)
			return 1;
	return 0;
}

const settings_api_key *http_auth_key(const settings_api_key *keys, size_t n,
				      const char *authorization)
{
	const settings_api_key *match = NULL;
	const char *token;
	size_t len;

	if (!authorization || strncasecmp(authorization, BEARER, strlen(BEARER)) != 0 ||
	    authorization[strlen(BEARER)] != ' ')
		return NULL;
	token = authorization + strlen(BEARER);
	while (*token == ' ')
		token++;
	len = strlen(token);
	while (len && token[len - 1] == ' ')
		len--;
	/* Every key is compared, whatever matched before. */
	for (size_t i = 0; i < n; i++)
		if (ct_equal(token, len, keys[i].key, strlen(keys[i].key)))
			match = &keys[i];
	return match;
}

int32_t http_auth_check(const settings_api_key *keys, size_t n, const char *authorization,
			int32_t scope, const char *app, memd_error *err)
{
	const settings_api_key *match = NULL;
	const char *token;
	size_t len;
	int32_t granted = 0;

	if (n == 0 || scope == HTTP_SCOPE_PUBLIC)
		return 0;
	if (!authorization)
		return memd_error_set(err, MEMD_EAUTH, 0,
				      "missing credentials: send 'Authorization: Bearer <api key>'");
	if (strncasecmp(authorization, BEARER, strlen(BEARER)) != 0 ||
	    authorization[strlen(BEARER)] != ' ')
		return memd_error_set(err, MEMD_EAUTH, 0,
				      "malformed Authorization header: expected 'Bearer <api key>'");
	token = authorization + strlen(BEARER);
	while (*token == ' ')
		token++;
	len = strlen(token);
	while (len && token[len - 1] == ' ')
		len--;
	/* Every key is compared, whatever matched before. */
	for (size_t i = 0; i < n; i++) {
		int eq = ct_equal(token, len, keys[i].key, strlen(keys[i].key));
		/* Keys are distinct (settings_load): at most one matches. */
		if (eq) {
			granted = keys[i].scope;
			match = &keys[i];
		}
	}
	if (!match)
		return memd_error_set(err, MEMD_EAUTH, 0, "invalid API key");
	if (granted < scope)
		return memd_error_set(err, MEMD_EFORBIDDEN, 0, "this API key has scope %s; the route needs %s",
				      http_auth_scope_name(granted), http_auth_scope_name(scope));
	if (match->apps && !app && scope >= SETTINGS_SCOPE_ADMIN)
		return memd_error_set(err, MEMD_EFORBIDDEN, 0,
				      "this API key is limited to some apps; the route is for every app "
				      "and needs a key without an apps list");
	if (app && !app_allowed(match->apps, app))
		return memd_error_set(err, MEMD_EFORBIDDEN, 0, "this API key is not for this app");
	return 0;
}

/* The port of a Host value ("name:port", "[v6]:port"), or NULL when it
 * names none. */
static const char *host_port(const char *host)
{
	const char *colon = strrchr(host, ':');
	const char *bracket = strchr(host, ']');
	if (!colon || (host[0] == '[' && (!bracket || colon < bracket)))
		return NULL;
	return colon + 1;
}

/* Is host name alone, or name followed by ":port" (want_port 0: any
 * port)? Case-insensitive. */
static int host_is(const char *host, const char *name, int32_t want_port)
{
	size_t n = strlen(name);
	const char *p = host + n;
	int32_t port = 0;

	if (strncasecmp(host, name, n) != 0)
		return 0;
	if (!*p)
		return 1;
	if (*p++ != ':' || !*p || strlen(p) > PORT_DIGITS_MAX)
		return 0;
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			return 0;
		port = port * 10 + (*p - '0');
	}
	return want_port == 0 || port == want_port;
}

int32_t http_host_check(const http_hosts *h, const char *host, int http11, memd_error *err)
{
	const char *const *names = h->allowed ? h->allowed : loopback_hosts;
	int ok = 0;

	if (!host) {
		if (http11)
			return memd_error_set(err, MEMD_EINVAL, 0, "an HTTP/1.1 request needs a Host header");
		return 0;
	}
	if (!h->allowed && !h->loopback_only)
		return 0;
	for (size_t i = 0; names[i] && !ok; i++) {
		if (h->allowed && host_port(names[i]))
			ok = strcasecmp(host, names[i]) == 0;
		else
			ok = host_is(host, names[i], h->allowed ? 0 : h->port);
	}
	if (!ok)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "Host '%.*s' is not a name this memd answers to (%s)", HOST_ECHO_MAX,
				      host, h->allowed ? "server.allowed_hosts"
						       : "127.0.0.1, localhost or [::1] without API keys; "
							 "see server.allowed_hosts");
	return 0;
}

int32_t http_browser_check(const char *origin, const char *fetch_site, const char *host,
			   memd_error *err)
{
	const char *authority;

	if (fetch_site && (strcasecmp(fetch_site, "cross-site") == 0 ||
			   strcasecmp(fetch_site, "same-site") == 0))
		return memd_error_set(err, MEMD_EFORBIDDEN, 0,
				      "a request a web page on another site made (Sec-Fetch-Site: %s); "
				      "memd without API keys answers no web page",
				      strcasecmp(fetch_site, "same-site") == 0 ? "same-site" : "cross-site");
	if (!origin)
		return 0;
	authority = strstr(origin, "://");
	authority = authority ? authority + strlen("://") : NULL;
	if (!authority || !host || strcasecmp(authority, host) != 0)
		return memd_error_set(err, MEMD_EFORBIDDEN, 0,
				      "a request from the web page at Origin '%.*s'; memd without API keys "
				      "answers no web page of another origin", HOST_ECHO_MAX, origin);
	return 0;
}
