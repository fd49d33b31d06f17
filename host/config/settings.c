/* SPDX-License-Identifier: MIT */
/*
 * settings: memd's config schema (config/memd.yaml documents every key;
 * docs/architecture.md, Configuration). Every section is checked
 * even after a problem was found, so one run reports every mistake.
 */
#include "config/settings.h"

#include <float.h>
#include <stdarg.h>
#include <strings.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* File name of the built-in defaults in messages and node locations. */
#define SETTINGS_DEFAULTS_NAME "<defaults>"
/* Longest key path kept in a message ("index.vector.embedder.dim"). */
#define SETTINGS_PATH_MAX 256
#define SETTINGS_INDEX_MAX 24 /* "[" + a size_t in decimal + "]" */
/* Longest single problem message. */
#define SETTINGS_MSG_MAX 512
/* Largest port number. */
#define SETTINGS_PORT_MAX 65535
/* Upper bound of sizes, counts and timeouts (they must fit an int). */
#define SETTINGS_INT_MAX INT32_MAX

#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)

/* The zero-config nodes: used for a missing stores: section and a missing
 * "*" app. */
static const char settings_defaults_yaml[] =
	"stores:\n"
	"  " SETTINGS_STORE_DEFAULT ":\n"
	"    plugin: sqlite\n"
	"    path: " SETTINGS_SQLITE_PATH_DEFAULT "\n"
	"apps:\n"
	"  \"" SETTINGS_DEFAULT_APP "\":\n"
	"    working_memory:\n"
	"      strategy: " SETTINGS_STRATEGY_DEFAULT "\n"
	"      max_messages: " STRINGIFY(SETTINGS_WINDOW_DEFAULT) "\n";

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

typedef struct ctx {
	config_diag *d;
	size_t errors;
	int nomem;
} ctx;

static void problem(ctx *c, const config_node *at, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void problem(ctx *c, const config_node *at, const char *path, const char *fmt, ...)
{
	char msg[SETTINGS_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	config_diag_add(c->d, at, path, "%s", msg);
	c->errors++;
}

/* Append s to out (SETTINGS_PATH_MAX bytes, *used of them taken), cutting
 * what does not fit. */
static void path_append(char *out, size_t *used, const char *s)
{
	size_t len = strlen(s);
	size_t room = SETTINGS_PATH_MAX - 1 - *used;
	if (len > room)
		len = room;
	memcpy(out + *used, s, len);
	*used += len;
	out[*used] = '\0';
}

/* out = path + "." + key (or key alone at the top). */
static void join(char *out, const char *path, const char *key)
{
	size_t used = 0;
	out[0] = '\0';
	path_append(out, &used, path);
	if (*path)
		path_append(out, &used, ".");
	path_append(out, &used, key);
}

static char *dup_or_flag(ctx *c, const char *s)
{
	if (!s)
		return NULL;
	char *p = strdup(s);
	if (!p)
		c->nomem = 1;
	return p;
}

/* "got "text"" for scalars, "got a map" otherwise; for messages. */
static void describe(const config_node *n, char *out, size_t cap)
{
	if (config_node_type(n) == CONFIG_SCALAR)
		snprintf(out, cap, "\"%s\"", config_scalar(n));
	else
		snprintf(out, cap, "%s", config_node_kind(n));
}

/* Value for key, with a null value counting as absent. */
static const config_node *get(const config_node *map, const char *key)
{
	const config_node *v = config_map_get(map, key);
	return config_node_type(v) == CONFIG_NULL ? NULL : v;
}

/* The node at key in map if it is a map; absent/null gives NULL quietly,
 * anything else a problem and NULL. */
static const config_node *get_map(ctx *c, const config_node *map, const char *path, const char *key)
{
	const config_node *v = get(map, key);
	if (!v || config_node_type(v) == CONFIG_MAP)
		return v;
	char full[SETTINGS_PATH_MAX];
	join(full, path, key);
	problem(c, v, full, "expected a map, got %s", config_node_kind(v));
	return NULL;
}

/* Report every key of map not in known (NULL-terminated). */
static void check_keys(ctx *c, const config_node *map, const char *path,
		       const char *const *known)
{
	for (size_t i = 0; i < config_len(map); i++) {
		const char *key = config_map_key_at(map, i);
		size_t j = 0;
		while (known[j] && strcmp(known[j], key) != 0)
			j++;
		if (known[j])
			continue;
		char list[SETTINGS_MSG_MAX] = "";
		size_t used = 0;
		for (j = 0; known[j] && used < sizeof(list); j++)
			used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s",
						 j ? ", " : "", known[j]);
		char full[SETTINGS_PATH_MAX];
		join(full, path, key);
		problem(c, config_map_key_node_at(map, i), full, "unknown key (known: %s)", list);
	}
}

/* A string value (any scalar); *out = strdup(value or def). */
static void get_string(ctx *c, const config_node *map, const char *path, const char *key,
		       const char *def, char **out)
{
	const config_node *v = get(map, key);
	const char *s = def;
	if (v) {
		if (config_node_type(v) == CONFIG_SCALAR) {
			s = config_scalar(v);
		} else {
			char full[SETTINGS_PATH_MAX];
			join(full, path, key);
			problem(c, v, full, "expected a string, got %s", config_node_kind(v));
		}
	}
	*out = dup_or_flag(c, s);
}

/* A string value that must be present and non-empty (when required) or
 * non-empty if present. Returns the text (borrowed) or NULL. */
static const char *get_text(ctx *c, const config_node *map, const config_node *at,
			    const char *path, const char *key, int required, const char *why)
{
	char full[SETTINGS_PATH_MAX];
	join(full, path, key);
	const config_node *v = get(map, key);
	if (!v) {
		if (required)
			problem(c, at, full, "required%s%s", why ? " " : "", why ? why : "");
		return NULL;
	}
	if (config_node_type(v) != CONFIG_SCALAR) {
		problem(c, v, full, "expected a string, got %s", config_node_kind(v));
		return NULL;
	}
	if (!*config_scalar(v)) {
		problem(c, v, full, "must not be empty");
		return NULL;
	}
	return config_scalar(v);
}

static void get_int(ctx *c, const config_node *map, const char *path, const char *key,
		    int64_t def, int64_t lo, int64_t hi, int64_t *out)
{
	*out = def;
	const config_node *v = get(map, key);
	if (!v)
		return;
	char full[SETTINGS_PATH_MAX];
	char got[SETTINGS_MSG_MAX / 2];
	join(full, path, key);
	int64_t x;
	if (config_as_int(v, &x) != 0) {
		describe(v, got, sizeof(got));
		problem(c, v, full, "expected an integer, got %s", got);
		return;
	}
	if (x < lo || x > hi) {
		problem(c, v, full, "must be between %lld and %lld, got %lld", (long long)lo,
			(long long)hi, (long long)x);
		return;
	}
	*out = x;
}

/* A number in the interval (lo, hi] when lo_open, else [lo, hi]. */
static void get_double(ctx *c, const config_node *map, const char *path, const char *key,
		       double def, double lo, int lo_open, double hi, double *out)
{
	*out = def;
	const config_node *v = get(map, key);
	if (!v)
		return;
	char full[SETTINGS_PATH_MAX];
	char got[SETTINGS_MSG_MAX / 2];
	join(full, path, key);
	double x;
	if (config_as_double(v, &x) != 0) {
		describe(v, got, sizeof(got));
		problem(c, v, full, "expected a number, got %s", got);
		return;
	}
	if ((lo_open ? x <= lo : x < lo) || x > hi) {
		problem(c, v, full, "must be %s %g and <= %g, got %g", lo_open ? ">" : ">=", lo, hi,
			x);
		return;
	}
	*out = x;
}

static void get_bool(ctx *c, const config_node *map, const char *path, const char *key,
		     int32_t def, int32_t *out)
{
	*out = def;
	const config_node *v = get(map, key);
	if (!v)
		return;
	int32_t x;
	if (config_as_bool(v, &x) != 0) {
		char full[SETTINGS_PATH_MAX];
		char got[SETTINGS_MSG_MAX / 2];
		join(full, path, key);
		describe(v, got, sizeof(got));
		problem(c, v, full, "expected true or false, got %s", got);
		return;
	}
	*out = x;
}

/* One of names (NULL-terminated); *out = its index, or def. */
static void get_enum(ctx *c, const config_node *map, const char *path, const char *key,
		     const char *const *names, size_t def, size_t *out)
{
	*out = def;
	const config_node *v = get(map, key);
	if (!v)
		return;
	const char *s = config_scalar(v);
	for (size_t i = 0; s && names[i]; i++) {
		if (strcmp(names[i], s) == 0) {
			*out = i;
			return;
		}
	}
	char list[SETTINGS_MSG_MAX / 2] = "";
	size_t used = 0;
	for (size_t i = 0; names[i] && used < sizeof(list); i++)
		used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s", i ? ", " : "",
					 names[i]);
	char full[SETTINGS_PATH_MAX];
	char got[SETTINGS_MSG_MAX / 2];
	join(full, path, key);
	describe(v, got, sizeof(got));
	problem(c, v, full, "expected one of %s, got %s", list, got);
}

/* ---- listen ------------------------------------------------------------ */

int32_t settings_listen_split(const char *listen, char **ret_host, int32_t *ret_port)
{
	if (!listen || !ret_host || !ret_port)
		return MEMD_EINVAL;
	const char *host = listen;
	size_t host_len;
	const char *colon;
	if (*listen == '[') {
		const char *close = strchr(listen, ']');
		if (!close || close[1] != ':')
			return MEMD_EINVAL;
		host = listen + 1;
		host_len = (size_t)(close - host);
		colon = close + 1;
	} else {
		colon = strrchr(listen, ':');
		if (!colon || memchr(listen, ':', (size_t)(colon - listen)))
			return MEMD_EINVAL; /* none, or a bare IPv6 address */
		host_len = (size_t)(colon - listen);
	}
	if (host_len == 0)
		return MEMD_EINVAL;
	const char *p = colon + 1;
	int64_t port = 0;
	if (!*p)
		return MEMD_EINVAL;
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			return MEMD_EINVAL;
		port = port * 10 + (*p - '0');
		if (port > SETTINGS_PORT_MAX)
			return MEMD_EINVAL;
	}
	if (port < 1)
		return MEMD_EINVAL;
	char *h = strndup(host, host_len);
	if (!h)
		return MEMD_ENOMEM;
	*ret_host = h;
	*ret_port = (int32_t)port;
	return 0;
}

/* ---- sections ---------------------------------------------------------- */

/* Every API key an example config in this repository shows or ever
 * showed. Anyone can read them, so a memd that uses one is open to
 * anyone who can reach it; settings_load refuses them. An example that
 * shows a key (better: ${VAR} without a default) adds it here. */
static const char *const published_api_keys[] = {
	"dev-only-key-change-me",       /* config/memd.yaml: the old ${MEMD_KEY:-...} default */
	"dev-only-admin-key-change-me", /* config/memd.yaml: the old ${MEMD_ADMIN_KEY:-...} default */
	NULL,
};

const char *const *settings_published_api_keys(void)
{
	return published_api_keys;
}

/* Is key usable: not published, long enough? Reports at the key's node. */
static int api_key_ok(ctx *c, const config_node *at, const char *path, const char *key)
{
	for (size_t i = 0; published_api_keys[i]; i++)
		if (strcmp(key, published_api_keys[i]) == 0) {
			problem(c, at, path,
				"this key is published in memd's example configs: anyone can use it; "
				"make your own with `openssl rand -hex 32`");
			return 0;
		}
	if (strlen(key) < SETTINGS_API_KEY_MIN) {
		problem(c, at, path,
			"too short (%zu bytes): an API key needs at least %d random bytes, "
			"e.g. from `openssl rand -hex 32`",
			strlen(key), SETTINGS_API_KEY_MIN);
		return 0;
	}
	return 1;
}

/* server.api_keys[i].apps: the app names a key is limited to (exact
 * names, as in the request path). NULL when absent or wrong (reported). */
static char **load_key_apps(ctx *c, const config_node *item, const char *path)
{
	const config_node *seq = get(item, "apps");
	char full[SETTINGS_PATH_MAX];
	char **apps;
	size_t n, k = 0;

	if (!seq)
		return NULL;
	join(full, path, "apps");
	if (config_node_type(seq) != CONFIG_SEQ || config_len(seq) == 0) {
		problem(c, seq, full, "expected a non-empty sequence of app names, got %s",
			config_node_type(seq) == CONFIG_SEQ ? "an empty one" : config_node_kind(seq));
		return NULL;
	}
	n = config_len(seq);
	apps = calloc(n + 1, sizeof(*apps));
	if (!apps) {
		c->nomem = 1;
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		const config_node *a = config_seq_at(seq, i);
		char at[SETTINGS_PATH_MAX + SETTINGS_INDEX_MAX];
		snprintf(at, sizeof(at), "%s[%zu]", full, i);
		if (config_node_type(a) != CONFIG_SCALAR || !*config_scalar(a)) {
			problem(c, a, at, "expected an app name, got %s",
				config_node_type(a) == CONFIG_SCALAR ? "an empty string" : config_node_kind(a));
			continue;
		}
		if ((apps[k] = dup_or_flag(c, config_scalar(a))))
			k++;
	}
	return apps;
}

static void free_strv(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

/* Is v an id as the API takes them: 1..MEMD_ID_MAX bytes without
 * control characters or '/'? */
static int id_ok(const char *v)
{
	size_t n = strlen(v);

	if (n == 0 || n > MEMD_ID_MAX)
		return 0;
	for (const char *p = v; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f || *p == '/')
			return 0;
	return 1;
}

/* server.api_keys[i].user: the one user a key acts for (the MCP tools of
 * such a key name no app or user: they are its one app and this user).
 * Needs apps with exactly one app. */
static void load_key_user(ctx *c, const config_node *item, const char *path,
			  settings_api_key *k)
{
	const char *user = get_text(c, item, item, path, "user", 0, NULL);
	char full[SETTINGS_PATH_MAX];

	if (!user)
		return;
	join(full, path, "user");
	if (!id_ok(user)) {
		problem(c, get(item, "user"), full,
			"expected a user id (1 to %d bytes, no '/' or control characters)", MEMD_ID_MAX);
		return;
	}
	if (!k->apps || !k->apps[0] || k->apps[1]) {
		problem(c, get(item, "user"), full,
			"a key bound to a user needs apps with exactly one app (the user's)");
		return;
	}
	k->user = dup_or_flag(c, user);
}

static void load_api_keys(ctx *c, const config_node *server, settings *s)
{
	static const char *const known[] = {"key", "scope", "apps", "user", NULL};
	static const char *const scopes[] = {"read", "write", "admin", NULL};
	static const int32_t scope_values[] = {SETTINGS_SCOPE_READ, SETTINGS_SCOPE_WRITE,
					       SETTINGS_SCOPE_ADMIN};
	const config_node *seq = get(server, "api_keys");
	if (!seq)
		return;
	if (config_node_type(seq) != CONFIG_SEQ) {
		problem(c, seq, "server.api_keys", "expected a sequence of {key, scope}, got %s",
			config_node_kind(seq));
		return;
	}
	size_t n = config_len(seq);
	if (n == 0)
		return;
	s->api_keys = calloc(n, sizeof(*s->api_keys));
	if (!s->api_keys) {
		c->nomem = 1;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const config_node *item = config_seq_at(seq, i);
		char path[SETTINGS_PATH_MAX];
		snprintf(path, sizeof(path), "server.api_keys[%zu]", i);
		if (config_node_type(item) != CONFIG_MAP) {
			problem(c, item, path, "expected a map {key, scope}, got %s", config_node_kind(item));
			continue;
		}
		check_keys(c, item, path, known);
		const char *key = get_text(c, item, item, path, "key", 1, NULL);
		size_t scope;
		get_enum(c, item, path, "scope", scopes, 0, &scope);
		if (!key)
			continue;
		{
			char full[SETTINGS_PATH_MAX];
			join(full, path, "key");
			if (!api_key_ok(c, get(item, "key"), full, key))
				continue;
		}
		for (size_t j = 0; j < s->n_api_keys; j++) {
			if (strcmp(s->api_keys[j].key, key) == 0) {
				char full[SETTINGS_PATH_MAX];
				join(full, path, "key");
				problem(c, get(item, "key"), full,
					"the same key as an earlier entry of server.api_keys");
				key = NULL;
				break;
			}
		}
		if (!key)
			continue;
		settings_api_key *k = &s->api_keys[s->n_api_keys];
		k->key = dup_or_flag(c, key);
		if (!k->key)
			continue;
		k->scope = scope_values[scope];
		k->apps = load_key_apps(c, item, path);
		load_key_user(c, item, path, k);
		s->n_api_keys++;
	}
}

/* A Host header value: a name or address, "[v6]", with an optional
 * ":port"; no spaces, controls, '/', '@' or other URL punctuation. */
static int host_value_ok(const char *v)
{
	if (!*v)
		return 0;
	for (const char *p = v; *p; p++) {
		unsigned char ch = (unsigned char)*p;
		if (ch <= 0x20 || ch >= 0x7f || strchr("/\\@?#%,;\"'<>", ch))
			return 0;
	}
	return 1;
}

static void load_allowed_hosts(ctx *c, const config_node *server, settings *s)
{
	const char *path = "server.allowed_hosts";
	const config_node *seq = get(server, "allowed_hosts");
	if (!seq)
		return;
	if (config_node_type(seq) != CONFIG_SEQ) {
		problem(c, seq, path, "expected a sequence of host names, got %s", config_node_kind(seq));
		return;
	}
	size_t n = config_len(seq);
	if (n == 0) {
		problem(c, seq, path,
			"must not be empty (leave it out to answer 127.0.0.1, localhost and [::1])");
		return;
	}
	s->allowed_hosts = calloc(n + 1, sizeof(*s->allowed_hosts));
	if (!s->allowed_hosts) {
		c->nomem = 1;
		return;
	}
	for (size_t i = 0, k = 0; i < n; i++) {
		const config_node *item = config_seq_at(seq, i);
		char at[SETTINGS_PATH_MAX];
		snprintf(at, sizeof(at), "%s[%zu]", path, i);
		if (config_node_type(item) != CONFIG_SCALAR) {
			problem(c, item, at, "expected a host name, got %s", config_node_kind(item));
			continue;
		}
		if (!host_value_ok(config_scalar(item))) {
			problem(c, item, at,
				"expected a host name or address with an optional :port "
				"(as in a Host header), got \"%s\"", config_scalar(item));
			continue;
		}
		if ((s->allowed_hosts[k] = dup_or_flag(c, config_scalar(item))))
			k++;
	}
}

static void load_server(ctx *c, const config_node *root, settings *s)
{
	static const char *const known[] = {"listen", "api_keys", "allowed_hosts", "threads", "workers",
					    "max_body_bytes", "max_batch_events", "max_header_bytes",
					    "request_timeout_ms", "header_timeout_s",
					    "max_connections", "max_connections_per_ip",
					    "max_response_bytes",
					    "log_level", "mcp", NULL};
	static const char *const levels[] = {"error", "warn", "info", "debug", NULL};
	static const int32_t level_values[] = {MEMD_LOG_ERROR, MEMD_LOG_WARN, MEMD_LOG_INFO,
					       MEMD_LOG_DEBUG};
	const char *path = "server";
	const config_node *m = get_map(c, root, "", path);
	check_keys(c, m, path, known);

	get_string(c, m, path, "listen", SETTINGS_LISTEN_DEFAULT, &s->listen);
	if (s->listen) {
		char *host = NULL;
		int32_t port;
		int32_t rc = settings_listen_split(s->listen, &host, &port);
		if (rc == MEMD_ENOMEM)
			c->nomem = 1;
		else if (rc)
			problem(c, get(m, "listen"), "server.listen",
				"expected host:port or [v6-address]:port with a port of 1..%d, got \"%s\"",
				SETTINGS_PORT_MAX, s->listen);
		free(host);
	}
	load_api_keys(c, m, s);
	load_allowed_hosts(c, m, s);
	get_int(c, m, path, "threads", SETTINGS_THREADS_DEFAULT, 0, SETTINGS_THREADS_MAX,
		&s->threads);
	get_int(c, m, path, "workers", SETTINGS_WORKERS_DEFAULT, 0, SETTINGS_THREADS_MAX,
		&s->workers);
	get_int(c, m, path, "max_body_bytes", SETTINGS_MAX_BODY_BYTES_DEFAULT, 1,
		SETTINGS_INT_MAX, &s->max_body_bytes);
	get_int(c, m, path, "max_batch_events", SETTINGS_MAX_BATCH_EVENTS_DEFAULT, 1,
		SETTINGS_INT_MAX, &s->max_batch_events);
	get_int(c, m, path, "max_header_bytes", SETTINGS_MAX_HEADER_BYTES_DEFAULT, 1,
		SETTINGS_INT_MAX, &s->max_header_bytes);
	get_int(c, m, path, "request_timeout_ms", SETTINGS_REQUEST_TIMEOUT_MS_DEFAULT, 1,
		SETTINGS_INT_MAX, &s->request_timeout_ms);
	get_int(c, m, path, "header_timeout_s", SETTINGS_HEADER_TIMEOUT_S_DEFAULT, 1,
		SETTINGS_HEADER_TIMEOUT_S_MAX, &s->header_timeout_s);
	get_int(c, m, path, "max_connections", SETTINGS_MAX_CONNECTIONS_DEFAULT, 1,
		SETTINGS_MAX_CONNECTIONS_MAX, &s->max_connections);
	get_int(c, m, path, "max_connections_per_ip", SETTINGS_MAX_CONNECTIONS_PER_IP_DEFAULT, 0,
		SETTINGS_MAX_CONNECTIONS_MAX, &s->max_connections_per_ip);
	get_int(c, m, path, "max_response_bytes", SETTINGS_MAX_RESPONSE_BYTES_DEFAULT,
		SETTINGS_MAX_RESPONSE_BYTES_MIN, SETTINGS_INT_MAX, &s->max_response_bytes);
	size_t level;
	get_enum(c, m, path, "log_level", levels, MEMD_LOG_INFO, &level);
	s->log_level = level_values[level];
	{
		static const char *const mcp_known[] = {"enabled", NULL};
		const config_node *mcp = get_map(c, m, path, "mcp");
		check_keys(c, mcp, "server.mcp", mcp_known);
		get_bool(c, mcp, "server.mcp", "enabled", 1, &s->mcp_enabled);
	}
}

static void load_plugins(ctx *c, const config_node *root, settings *s)
{
	static const char *const known[] = {"path", NULL};
	const config_node *m = get_map(c, root, "", "plugins");
	check_keys(c, m, "plugins", known);
	const config_node *p = get(m, "path");
	size_t n = config_node_type(p) == CONFIG_SEQ ? config_len(p) : 1;
	s->plugin_path = calloc(n + 1, sizeof(*s->plugin_path));
	if (!s->plugin_path) {
		c->nomem = 1;
		return;
	}
	if (!p)
		return;
	if (config_node_type(p) == CONFIG_MAP) {
		problem(c, p, "plugins.path", "expected a directory or a list of directories, got a map");
		return;
	}
	size_t out = 0;
	for (size_t i = 0; i < n; i++) {
		const config_node *dir = config_node_type(p) == CONFIG_SEQ ? config_seq_at(p, i) : p;
		char path[SETTINGS_PATH_MAX];
		if (config_node_type(p) == CONFIG_SEQ)
			snprintf(path, sizeof(path), "plugins.path[%zu]", i);
		else
			snprintf(path, sizeof(path), "plugins.path");
		const char *text = config_scalar(dir);
		if (!text) {
			problem(c, dir, path, "expected a directory, got %s", config_node_kind(dir));
			continue;
		}
		if (!*text) {
			problem(c, dir, path, "must not be empty");
			continue;
		}
		s->plugin_path[out] = dup_or_flag(c, text);
		if (s->plugin_path[out])
			out++;
	}
}

static void load_stores(ctx *c, const config_node *root, const config_node *defaults,
			settings *s)
{
	const config_node *m = get(root, "stores");
	if (!m)
		m = config_map_get(defaults, "stores");
	if (config_node_type(m) != CONFIG_MAP) {
		problem(c, m, "stores", "expected a map of store name to {plugin: ..., ...}, got %s",
			config_node_kind(m));
		return;
	}
	size_t n = config_len(m);
	if (n == 0) {
		problem(c, m, "stores", "no store is defined");
		return;
	}
	s->stores = calloc(n, sizeof(*s->stores));
	if (!s->stores) {
		c->nomem = 1;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const char *name = config_map_key_at(m, i);
		const config_node *v = config_map_value_at(m, i);
		char path[SETTINGS_PATH_MAX];
		join(path, "stores", name);
		settings_store *st = &s->stores[s->n_stores];
		if (!*name) {
			problem(c, config_map_key_node_at(m, i), "stores", "a store name must not be empty");
			continue;
		}
		/* The name is recorded even when the entry is bad, so that
		 * references to it do not add a second, misleading problem. */
		st->name = dup_or_flag(c, name);
		if (!st->name)
			continue;
		st->node = v;
		s->n_stores++;
		if (config_node_type(v) != CONFIG_MAP) {
			problem(c, v ? v : config_map_key_node_at(m, i), path,
				"expected a map {plugin: ..., ...}, got %s", config_node_kind(v));
			continue;
		}
		/* Other keys are the plugin's, checked by the loader. */
		const char *plugin = get_text(c, v, v, path, "plugin", 1,
					      "(the store plugin's name or .so path)");
		st->plugin = dup_or_flag(c, plugin);
	}
}

static char *store_names(const settings *s)
{
	size_t len = 1;
	for (size_t i = 0; i < s->n_stores; i++)
		len += strlen(s->stores[i].name) + 2;
	char *out = malloc(len);
	if (!out)
		return NULL;
	out[0] = '\0';
	for (size_t i = 0; i < s->n_stores; i++) {
		if (i)
			strcat(out, ", ");
		strcat(out, s->stores[i].name);
	}
	return out;
}

/* A reference to a store by name: must exist. */
static void check_store_ref(ctx *c, const config_node *at, const char *path, const char *name,
			    const settings *s)
{
	if (!name || settings_store_get(s, name))
		return;
	char *names = store_names(s);
	problem(c, at, path, "no store named \"%s\" in stores (defined: %s)", name,
		names && *names ? names : "none");
	free(names);
}

static void load_sessions(ctx *c, const config_node *root, settings *s)
{
	static const char *const known[] = {"store", "retention_days", NULL};
	const config_node *m = get_map(c, root, "", "sessions");
	check_keys(c, m, "sessions", known);
	get_int(c, m, "sessions", "retention_days", 0, 0, SETTINGS_INT_MAX,
		&s->sessions_retention_days);
	const char *name = NULL;
	if (get(m, "store")) {
		name = get_text(c, m, m, "sessions", "store", 0, NULL);
		if (!name)
			return; /* reported */
		check_store_ref(c, get(m, "store"), "sessions.store", name, s);
	} else if (!s->n_stores) {
		return; /* stores: is wrong, and reported */
	} else if (settings_store_get(s, SETTINGS_STORE_DEFAULT)) {
		name = SETTINGS_STORE_DEFAULT;
	} else if (s->n_stores == 1) {
		name = s->stores[0].name;
	} else {
		problem(c, m ? m : get(root, "stores"), "sessions.store",
			"required: there are %zu stores and none is named \"%s\"", s->n_stores,
			SETTINGS_STORE_DEFAULT);
		return;
	}
	s->sessions_store = dup_or_flag(c, name);
}

/* The embedder's type (SETTINGS_EMBEDDER_TYPE_DEFAULT when not given or
 * not a scalar; load_embedder reports a bad one). */
static const char *embedder_type(const config_node *embedder)
{
	const config_node *t = get(embedder, "type");
	return t && config_node_type(t) == CONFIG_SCALAR ? config_scalar(t)
							 : SETTINGS_EMBEDDER_TYPE_DEFAULT;
}

static void load_embedder(ctx *c, const config_node *vector, settings *s)
{
	static const char *const known[] = {"type", "dim", "url", "model", "api_key",
					    "batch", "timeout_ms", NULL};
	static const char *const types[] = {"hash", "openai", NULL};
	const char *path = "index.vector.embedder";
	const config_node *m = get_map(c, vector, "index.vector", "embedder");
	s->embedder = m;
	check_keys(c, m, path, known);
	size_t type;
	get_enum(c, m, path, "type", types, 0, &type);
	int64_t v;
	get_int(c, m, path, "dim", SETTINGS_EMBEDDER_DIM_DEFAULT, 1, SETTINGS_EMBEDDER_DIM_MAX, &v);
	get_int(c, m, path, "batch", SETTINGS_EMBEDDER_BATCH_DEFAULT, 1, SETTINGS_INT_MAX, &v);
	get_int(c, m, path, "timeout_ms", SETTINGS_EMBEDDER_TIMEOUT_MS_DEFAULT, 1,
		SETTINGS_INT_MAX, &v);
	int openai = type == 1;
	get_text(c, m, m, path, "url", openai, "when type is openai");
	get_text(c, m, m, path, "model", openai, "when type is openai");
	get_text(c, m, m, path, "api_key", 0, NULL);
}

/* The default of index.keyword.snapshot (settings.h); NULL = none. */
static char *snapshot_default(ctx *c, const settings *s)
{
	const settings_store *st = settings_store_get(s, s->sessions_store);
	const char *db = SETTINGS_SQLITE_PATH_DEFAULT, *slash;
	const config_node *p;
	char *out;
	size_t dl;

	if (st && st->plugin && strcmp(st->plugin, "memory") == 0)
		return NULL;
	if (!st || !st->plugin || strcmp(st->plugin, "sqlite") != 0)
		return dup_or_flag(c, SETTINGS_KEYWORD_SNAPSHOT_DEFAULT);
	p = get(st->node, "path");
	if (p && config_node_type(p) == CONFIG_SCALAR && *config_scalar(p))
		db = config_scalar(p);
	slash = strrchr(db, '/');
	dl = slash ? (size_t)(slash - db) + 1 : 0;
	out = malloc(dl + sizeof(SETTINGS_KEYWORD_SNAPSHOT_FILE));
	if (!out) {
		c->nomem = 1;
		return NULL;
	}
	memcpy(out, db, dl);
	memcpy(out + dl, SETTINGS_KEYWORD_SNAPSHOT_FILE, sizeof(SETTINGS_KEYWORD_SNAPSHOT_FILE));
	return out;
}

static void load_snapshot(ctx *c, const config_node *kw, settings *s)
{
	const char *path = "index.keyword.snapshot";
	const config_node *v = get(kw, "snapshot");
	int32_t on;

	if (v && config_node_type(v) != CONFIG_SCALAR) {
		problem(c, v, path, "expected a file path, true or false, got %s", config_node_kind(v));
		return;
	}
	if (v && !*config_scalar(v)) {
		problem(c, v, path, "must not be empty (false: no snapshot)");
		return;
	}
	if (!v || (config_as_bool(v, &on) == 0 && on))
		s->keyword_snapshot = snapshot_default(c, s);
	else if (config_as_bool(v, &on) != 0)
		s->keyword_snapshot = dup_or_flag(c, config_scalar(v));
}

static void load_index(ctx *c, const config_node *root, settings *s)
{
	static const char *const known[] = {"keyword", "vector", "hybrid", "default_mode", NULL};
	static const char *const kw_known[] = {"enabled", "k1", "b", "snapshot", NULL};
	static const char *const hybrid_known[] = {"vector_weight", NULL};
	static const char *const vec_known[] = {"enabled", "store", "embedder", NULL};
	enum { SEARCH_KEYWORD, SEARCH_VECTOR, SEARCH_HYBRID };
	static const char *const modes[] = {[SEARCH_KEYWORD] = "keyword", [SEARCH_VECTOR] = "vector",
					    [SEARCH_HYBRID] = "hybrid", NULL};
	const config_node *m = get_map(c, root, "", "index");
	check_keys(c, m, "index", known);

	const config_node *kw = get_map(c, m, "index", "keyword");
	check_keys(c, kw, "index.keyword", kw_known);
	get_bool(c, kw, "index.keyword", "enabled", 1, &s->keyword_enabled);
	get_double(c, kw, "index.keyword", "k1", SETTINGS_KEYWORD_K1_DEFAULT, 0, 1, DBL_MAX,
		   &s->keyword_k1);
	get_double(c, kw, "index.keyword", "b", SETTINGS_KEYWORD_B_DEFAULT, 0, 1, 1, &s->keyword_b);
	load_snapshot(c, kw, s);

	const config_node *vec = get_map(c, m, "index", "vector");
	check_keys(c, vec, "index.vector", vec_known);
	get_bool(c, vec, "index.vector", "enabled", 0, &s->vector_enabled);
	const char *store = get_text(c, vec, vec, "index.vector", "store", 0, NULL);
	if (s->vector_enabled) {
		if (store)
			check_store_ref(c, get(vec, "store"), "index.vector.store", store, s);
		else if (!get(vec, "store"))
			problem(c, vec, "index.vector.store",
				"required when index.vector.enabled is true");
	}
	s->vector_store = dup_or_flag(c, store);
	load_embedder(c, vec, s);

	int hash = strcmp(embedder_type(s->embedder), "hash") == 0;
	const config_node *hy = get_map(c, m, "index", "hybrid");
	check_keys(c, hy, "index.hybrid", hybrid_known);
	get_double(c, hy, "index.hybrid", "vector_weight",
		   hash ? SETTINGS_HYBRID_VECTOR_WEIGHT_HASH : SETTINGS_HYBRID_VECTOR_WEIGHT_MODEL, 0, 0,
		   1, &s->hybrid_vector_weight);

	/* Not given: keyword, or vector when only that is enabled (so never
	 * hybrid, whatever the embedder). */
	size_t mode = !s->keyword_enabled && s->vector_enabled ? SEARCH_VECTOR : SEARCH_KEYWORD;
	const config_node *at = get(m, "default_mode");
	if (at) {
		get_enum(c, m, "index", "default_mode", modes, mode, &mode);
		if (mode != SEARCH_VECTOR && !s->keyword_enabled)
			problem(c, at, "index.default_mode",
				"%s search needs index.keyword.enabled: true", modes[mode]);
		if (mode != SEARCH_KEYWORD && !s->vector_enabled)
			problem(c, at, "index.default_mode",
				"%s search needs index.vector.enabled: true", modes[mode]);
	}
	s->search_mode_default = dup_or_flag(c, modes[mode]);
}

static void load_summarizer(ctx *c, const config_node *root, settings *s)
{
	static const char *const known[] = {"type", "url", "model", "api_key", "timeout_ms",
					    "retries", "max_tokens", NULL};
	static const char *const types[] = {"extractive", "openai", NULL};
	const char *path = "summarizer";
	const config_node *m = get_map(c, root, "", path);
	s->summarizer = m;
	check_keys(c, m, path, known);
	size_t type;
	get_enum(c, m, path, "type", types, 0, &type);
	int64_t v;
	get_int(c, m, path, "timeout_ms", SETTINGS_SUMMARIZER_TIMEOUT_MS_DEFAULT, 1,
		SETTINGS_INT_MAX, &v);
	get_int(c, m, path, "retries", SETTINGS_SUMMARIZER_RETRIES_DEFAULT, 0, SETTINGS_RETRIES_MAX,
		&v);
	get_int(c, m, path, "max_tokens", SETTINGS_SUMMARIZER_MAX_TOKENS_DEFAULT, 1,
		SETTINGS_INT_MAX, &v);
	int openai = type == 1;
	get_text(c, m, m, path, "url", openai, "when type is openai");
	get_text(c, m, m, path, "model", openai, "when type is openai");
	get_text(c, m, m, path, "api_key", 0, NULL);
}

static void load_tokenizer(ctx *c, const config_node *root, settings *s)
{
	static const char *const known[] = {"type", "ranks", "encoding", NULL};
	static const char *const types[] = {"approx", "bpe", NULL};
	static const char *const encodings[] = {"cl100k_base", "o200k_base", NULL};
	const char *path = "tokenizer";
	const config_node *m = get_map(c, root, "", path);
	s->tokenizer = m;
	check_keys(c, m, path, known);
	size_t type;
	get_enum(c, m, path, "type", types, 0, &type);
	size_t encoding;
	get_enum(c, m, path, "encoding", encodings, 0, &encoding);
	get_text(c, m, m, path, "ranks", type == 1, "when type is bpe (a tiktoken ranks file)");
}

static void load_state(ctx *c, const config_node *root, settings *s)
{
	static const char *const known[] = {"temp_ttl_seconds", NULL};
	const config_node *m = get_map(c, root, "", "state");
	check_keys(c, m, "state", known);
	get_int(c, m, "state", "temp_ttl_seconds", SETTINGS_TEMP_TTL_SECONDS_DEFAULT, 1,
		SETTINGS_INT_MAX, &s->temp_ttl_seconds);
}

/* ---- lanes ------------------------------------------------------------- */

static const char *const lane_chat_types[] = {"dm", "group", "channel", "thread", NULL};

/* The built-in reset policy (lanes.reset without keys). Its strings are
 * only read (copied), never freed. */
static const settings_lane_reset lane_reset_defaults = {
	.mode = SETTINGS_LANE_RESET_BOTH,
	.idle_minutes = SETTINGS_LANES_IDLE_MINUTES_DEFAULT,
	.at_hour = SETTINGS_LANES_AT_HOUR_DEFAULT,
	.timezone = (char *)"",
	.notify = 1,
	.idle_notice = (char *)SETTINGS_LANES_IDLE_NOTICE_DEFAULT,
	.daily_notice = (char *)SETTINGS_LANES_DAILY_NOTICE_DEFAULT,
	.suspended_notice = (char *)SETTINGS_LANES_SUSPENDED_NOTICE_DEFAULT,
};

static void lane_reset_clear(settings_lane_reset *r)
{
	free(r->timezone);
	free(r->idle_notice);
	free(r->daily_notice);
	free(r->suspended_notice);
	memset(r, 0, sizeof(*r));
}

static void lanes_clear(settings_lanes *l)
{
	lane_reset_clear(&l->reset);
	for (size_t i = 0; i < l->n_overrides; i++) {
		free(l->overrides[i].platform);
		free(l->overrides[i].chat_type);
		lane_reset_clear(&l->overrides[i].reset);
	}
	free(l->overrides);
	free(l->webhook_url);
	free(l->webhook_secret);
	memset(l, 0, sizeof(*l));
}

/* A time zone name as an IANA zone file is named: letters, digits and
 * "/_-+.", no leading '/', no "." or ".." component; "" is the host's
 * zone. (Whether the zone exists is checked when memd loads it.) */
static int tz_name_ok(const char *name)
{
	size_t len = strlen(name);
	if (len == 0)
		return 1;
	if (len > MEMD_ID_MAX || name[0] == '/')
		return 0;
	for (const char *p = name; *p; p++) {
		unsigned char ch = (unsigned char)*p;
		int alnum = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
			    (ch >= '0' && ch <= '9');
		if (!alnum && !strchr("/_-+.", ch))
			return 0;
	}
	for (const char *p = name; *p;) {
		size_t n = strcspn(p, "/");
		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return 0;
		p += n;
		if (*p == '/')
			p++;
	}
	return name[len - 1] != '/';
}

/* A non-empty text at key, else def; *out = a copy. */
static void get_notice(ctx *c, const config_node *map, const char *path, const char *key,
		       const char *def, char **out)
{
	if (get(map, key))
		def = get_text(c, map, map, path, key, 0, NULL);
	*out = dup_or_flag(c, def ? def : "");
}

/* A reset map (lanes.reset, an override's reset) over base into *out
 * (which the caller clears). */
static void load_lane_reset(ctx *c, const config_node *m, const char *path,
			    const settings_lane_reset *base, settings_lane_reset *out)
{
	static const char *const known[] = {"mode", "idle_minutes", "at_hour", "timezone",
					    "notify", "idle_notice", "daily_notice",
					    "suspended_notice", NULL};
	static const char *const modes[] = {[SETTINGS_LANE_RESET_NONE] = "none",
					    [SETTINGS_LANE_RESET_IDLE] = "idle",
					    [SETTINGS_LANE_RESET_DAILY] = "daily",
					    [SETTINGS_LANE_RESET_BOTH] = "both", NULL};
	const config_node *tz = get(m, "timezone");
	size_t mode;

	check_keys(c, m, path, known);
	get_enum(c, m, path, "mode", modes, (size_t)base->mode, &mode);
	out->mode = (int32_t)mode;
	get_int(c, m, path, "idle_minutes", base->idle_minutes, 1, SETTINGS_INT_MAX,
		&out->idle_minutes);
	get_int(c, m, path, "at_hour", base->at_hour, 0, SETTINGS_LANES_AT_HOUR_MAX,
		&out->at_hour);
	get_bool(c, m, path, "notify", base->notify, &out->notify);
	get_string(c, m, path, "timezone", base->timezone, &out->timezone);
	out->timezone_node = base->timezone_node;
	if (tz && config_node_type(tz) == CONFIG_SCALAR) {
		char full[SETTINGS_PATH_MAX];
		join(full, path, "timezone");
		out->timezone_node = tz;
		if (!tz_name_ok(config_scalar(tz)))
			problem(c, tz, full,
				"expected an IANA time zone name (e.g. Europe/Berlin) or \"\" for "
				"the host's zone, got \"%s\"", config_scalar(tz));
	}
	get_notice(c, m, path, "idle_notice", base->idle_notice, &out->idle_notice);
	get_notice(c, m, path, "daily_notice", base->daily_notice, &out->daily_notice);
	get_notice(c, m, path, "suspended_notice", base->suspended_notice,
		   &out->suspended_notice);
}

/* A platform name as lane keys take it: letters, digits, '_', '-', '.'. */
static int platform_ok(const char *p)
{
	size_t len = strlen(p);
	if (len == 0 || len > SETTINGS_LANES_PLATFORM_MAX)
		return 0;
	for (; *p; p++) {
		unsigned char ch = (unsigned char)*p;
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || strchr("_-.", ch)))
			return 0;
	}
	return 1;
}

/* Append the entries of seq (lanes.overrides) to out->overrides, each
 * resolved over base. */
static void load_lane_overrides(ctx *c, const config_node *seq, const char *path,
				const settings_lane_reset *base, settings_lanes *out)
{
	static const char *const known[] = {"platform", "chat_type", "reset", NULL};
	settings_lane_override *grown;
	size_t n;

	if (!seq)
		return;
	if (config_node_type(seq) != CONFIG_SEQ) {
		problem(c, seq, path, "expected a sequence of {platform, chat_type, reset}, got %s",
			config_node_kind(seq));
		return;
	}
	n = config_len(seq);
	if (!n)
		return;
	grown = realloc(out->overrides, (out->n_overrides + n) * sizeof(*grown));
	if (!grown) {
		c->nomem = 1;
		return;
	}
	out->overrides = grown;
	for (size_t i = 0; i < n; i++) {
		const config_node *item = config_seq_at(seq, i);
		settings_lane_override *o = &out->overrides[out->n_overrides];
		char at[SETTINGS_PATH_MAX], full[SETTINGS_PATH_MAX];
		const char *platform, *chat_type;
		size_t type;

		snprintf(at, sizeof(at), "%s[%zu]", path, i);
		if (config_node_type(item) != CONFIG_MAP) {
			problem(c, item, at, "expected a map {platform, chat_type, reset}, got %s",
				config_node_kind(item));
			continue;
		}
		check_keys(c, item, at, known);
		memset(o, 0, sizeof(*o));
		platform = get_text(c, item, item, at, "platform", 0, NULL);
		chat_type = get_text(c, item, item, at, "chat_type", 0, NULL);
		if (platform && !platform_ok(platform)) {
			join(full, at, "platform");
			problem(c, get(item, "platform"), full,
				"expected a platform name (1..%d letters, digits, '_', '-', '.'), "
				"got \"%s\"", SETTINGS_LANES_PLATFORM_MAX, platform);
		}
		if (chat_type)
			get_enum(c, item, at, "chat_type", lane_chat_types, 0, &type);
		if (!get(item, "platform") && !get(item, "chat_type"))
			problem(c, item, at, "needs a platform, a chat_type or both to match");
		o->reset_node = get_map(c, item, at, "reset");
		join(full, at, "reset");
		load_lane_reset(c, o->reset_node, full, base, &o->reset);
		o->platform = dup_or_flag(c, platform);
		for (char *p = o->platform; p && *p; p++)
			if (*p >= 'A' && *p <= 'Z')
				*p = (char)(*p - 'A' + 'a');
		o->chat_type = dup_or_flag(c, chat_type);
		out->n_overrides++;
	}
}

/* The top-level overrides again, over an app's own reset: what they
 * said wrong was reported with the top-level section, so this pass
 * reports nothing. */
static void relay_lane_overrides(ctx *c, const config_node *seq,
				 const settings_lane_reset *base, settings_lanes *out)
{
	config_diag quiet = {0};
	ctx q = {.d = &quiet};

	load_lane_overrides(&q, seq, "lanes.overrides", base, out);
	config_diag_clear(&quiet);
	c->nomem |= q.nomem;
}

/* A webhook URL: "" (none) or http(s)://host... without spaces. */
static int webhook_url_ok(const char *u)
{
	size_t skip;

	if (!*u)
		return 1;
	if (strncmp(u, "http://", 7) == 0)
		skip = 7;
	else if (strncmp(u, "https://", 8) == 0)
		skip = 8;
	else
		return 0;
	if (!u[skip] || u[skip] == '/')
		return 0;
	for (const char *p = u; *p; p++)
		if ((unsigned char)*p <= 0x20 || (unsigned char)*p == 0x7f)
			return 0;
	return 1;
}

static void load_lane_finalize(ctx *c, const config_node *m, const char *path,
			       const settings_lanes *base, settings_lanes *out)
{
	static const char *const known[] = {"webhook", NULL};
	static const char *const wh_known[] = {"url", "secret", "timeout_ms", "retries", NULL};
	char wh_path[SETTINGS_PATH_MAX];
	const config_node *wh;

	check_keys(c, m, path, known);
	join(wh_path, path, "webhook");
	wh = get_map(c, m, path, "webhook");
	check_keys(c, wh, wh_path, wh_known);
	get_string(c, wh, wh_path, "url", base ? base->webhook_url : "", &out->webhook_url);
	if (get(wh, "url") && out->webhook_url && !webhook_url_ok(out->webhook_url)) {
		char full[SETTINGS_PATH_MAX];
		join(full, wh_path, "url");
		problem(c, get(wh, "url"), full,
			"expected an http:// or https:// URL (or \"\" for none), got \"%s\"",
			out->webhook_url);
	}
	get_string(c, wh, wh_path, "secret", base ? base->webhook_secret : "",
		   &out->webhook_secret);
	get_int(c, wh, wh_path, "timeout_ms",
		base ? base->webhook_timeout_ms : SETTINGS_LANES_WEBHOOK_TIMEOUT_MS_DEFAULT, 1,
		SETTINGS_INT_MAX, &out->webhook_timeout_ms);
	get_int(c, wh, wh_path, "retries",
		base ? base->webhook_retries : SETTINGS_LANES_WEBHOOK_RETRIES_DEFAULT, 0,
		SETTINGS_RETRIES_MAX, &out->webhook_retries);
}

/* A lanes map (the top-level section when base is NULL, else an app's
 * over base) into *out (cleared by the caller). top_overrides: the
 * top-level overrides, relayed after an app's own. */
static void load_lanes_map(ctx *c, const config_node *m, const char *path,
			   const settings_lanes *base, const config_node *top_overrides,
			   settings_lanes *out)
{
	static const char *const top_known[] = {"watch_interval_s", "lease_ms", "max_lease_ms",
						"group_sessions_per_user",
						"thread_sessions_per_user", "prune_after_days",
						"reset", "overrides", "finalize", NULL};
	char sub[SETTINGS_PATH_MAX];

	check_keys(c, m, path, base ? top_known + 1 : top_known);
	get_int(c, m, path, "lease_ms", base ? base->lease_ms : SETTINGS_LANES_LEASE_MS_DEFAULT, 1,
		SETTINGS_INT_MAX, &out->lease_ms);
	get_int(c, m, path, "max_lease_ms",
		base ? base->max_lease_ms : SETTINGS_LANES_MAX_LEASE_MS_DEFAULT, 1,
		SETTINGS_INT_MAX, &out->max_lease_ms);
	/* An app that sets neither inherits the pair, reported already. */
	if (out->lease_ms > out->max_lease_ms &&
	    (!base || get(m, "lease_ms") || get(m, "max_lease_ms"))) {
		char full[SETTINGS_PATH_MAX];
		const config_node *at = get(m, "lease_ms") ? get(m, "lease_ms") : get(m, "max_lease_ms");
		join(full, path, get(m, "lease_ms") ? "lease_ms" : "max_lease_ms");
		problem(c, at ? at : m, full, "lease_ms (%lld) must not be over max_lease_ms (%lld)",
			(long long)out->lease_ms, (long long)out->max_lease_ms);
	}
	get_bool(c, m, path, "group_sessions_per_user", base ? base->group_sessions_per_user : 1,
		 &out->group_sessions_per_user);
	get_bool(c, m, path, "thread_sessions_per_user",
		 base ? base->thread_sessions_per_user : 0, &out->thread_sessions_per_user);
	get_int(c, m, path, "prune_after_days", base ? base->prune_after_days : 0, 0,
		SETTINGS_INT_MAX, &out->prune_after_days);
	join(sub, path, "reset");
	load_lane_reset(c, get_map(c, m, path, "reset"), sub,
			base ? &base->reset : &lane_reset_defaults, &out->reset);
	join(sub, path, "overrides");
	load_lane_overrides(c, get(m, "overrides"), sub, &out->reset, out);
	if (base)
		relay_lane_overrides(c, top_overrides, &out->reset, out);
	join(sub, path, "finalize");
	load_lane_finalize(c, get_map(c, m, path, "finalize"), sub, base, out);
}

static void load_lanes(ctx *c, const config_node *root, settings *s)
{
	const config_node *m = get_map(c, root, "", "lanes");
	get_int(c, m, "lanes", "watch_interval_s", SETTINGS_LANES_WATCH_INTERVAL_S_DEFAULT, 1,
		SETTINGS_INT_MAX, &s->lanes_watch_interval_s);
	load_lanes_map(c, m, "lanes", NULL, NULL, &s->lanes);
}

const settings_lane_reset *settings_lane_reset_for(const settings_lanes *lanes,
						   const char *platform, const char *chat_type)
{
	for (size_t i = 0; i < lanes->n_overrides; i++) {
		const settings_lane_override *o = &lanes->overrides[i];
		if (o->platform && (!platform || strcasecmp(o->platform, platform) != 0))
			continue;
		if (o->chat_type && strcmp(o->chat_type, chat_type ? chat_type : "dm") != 0)
			continue;
		return &o->reset;
	}
	return &lanes->reset;
}

/* ---- memory ------------------------------------------------------------- */

static void extract_clear(settings_extract *x)
{
	free(x->url);
	free(x->model);
	if (x->api_key)
		memset(x->api_key, 0, strlen(x->api_key)); /* a secret */
	free(x->api_key);
	free(x->prompt);
	free(x->consolidate_prompt);
	memset(x, 0, sizeof(*x));
}

/* An optional string over base's (NULL = unset): *out = a copy or NULL. */
static void get_opt_text(ctx *c, const config_node *m, const char *path, const char *key,
			 const char *base, char **out)
{
	const char *v = get_text(c, m, m, path, key, 0, NULL);
	if (!v)
		v = base;
	*out = v ? dup_or_flag(c, v) : NULL;
}

/* A memory.extract map (the top-level one when base is NULL, else an
 * app's over base) into *out. */
static void load_extract(ctx *c, const config_node *m, const char *path,
			 const settings_extract *base, settings_extract *out)
{
	static const char *const known[] = {"type", "every_events", "idle_minutes", "on_finalize",
					    "batch_events", "neighbours", "default_ttl_days",
					    "timeout_ms", "retries", "url", "model", "api_key",
					    "prompt", "consolidate_prompt", NULL};
	static const char *const types[] = {"builtin", "openai", "none", NULL};
	size_t type;

	check_keys(c, m, path, known);
	get_enum(c, m, path, "type", types, base ? (size_t)base->type : SETTINGS_EXTRACT_BUILTIN,
		 &type);
	out->type = (int32_t)type;
	get_int(c, m, path, "every_events",
		base ? base->every_events : SETTINGS_EXTRACT_EVERY_EVENTS_DEFAULT, 0,
		SETTINGS_INT_MAX, &out->every_events);
	get_int(c, m, path, "idle_minutes",
		base ? base->idle_minutes : SETTINGS_EXTRACT_IDLE_MINUTES_DEFAULT, 0,
		SETTINGS_INT_MAX, &out->idle_minutes);
	get_bool(c, m, path, "on_finalize", base ? base->on_finalize : 1, &out->on_finalize);
	get_int(c, m, path, "batch_events",
		base ? base->batch_events : SETTINGS_EXTRACT_BATCH_EVENTS_DEFAULT, 1,
		SETTINGS_EXTRACT_BATCH_EVENTS_MAX, &out->batch_events);
	get_int(c, m, path, "neighbours",
		base ? base->neighbours : SETTINGS_EXTRACT_NEIGHBOURS_DEFAULT, 1,
		SETTINGS_EXTRACT_NEIGHBOURS_MAX, &out->neighbours);
	get_int(c, m, path, "default_ttl_days", base ? base->default_ttl_days : 0, 0,
		SETTINGS_INT_MAX, &out->default_ttl_days);
	get_int(c, m, path, "timeout_ms",
		base ? base->timeout_ms : SETTINGS_EXTRACT_TIMEOUT_MS_DEFAULT, 1, SETTINGS_INT_MAX,
		&out->timeout_ms);
	get_int(c, m, path, "retries", base ? base->retries : SETTINGS_EXTRACT_RETRIES_DEFAULT, 0,
		SETTINGS_RETRIES_MAX, &out->retries);
	get_opt_text(c, m, path, "url", base ? base->url : NULL, &out->url);
	get_opt_text(c, m, path, "model", base ? base->model : NULL, &out->model);
	get_opt_text(c, m, path, "api_key", base ? base->api_key : NULL, &out->api_key);
	get_opt_text(c, m, path, "prompt", base ? base->prompt : NULL, &out->prompt);
	get_opt_text(c, m, path, "consolidate_prompt", base ? base->consolidate_prompt : NULL,
		     &out->consolidate_prompt);
	if (out->url && !webhook_url_ok(out->url)) {
		char full[SETTINGS_PATH_MAX];
		join(full, path, "url");
		problem(c, get(m, "url") ? get(m, "url") : m, full,
			"expected an http:// or https:// URL, got \"%s\"", out->url);
	}
	/* An app's openai needs a url and a model, its own or inherited. */
	if (out->type == SETTINGS_EXTRACT_OPENAI && (!out->url || !out->model) &&
	    (!base || get(m, "type") || get(m, "url") || get(m, "model"))) {
		char full[SETTINGS_PATH_MAX];
		join(full, path, out->url ? "model" : "url");
		problem(c, get(m, "type") ? get(m, "type") : m, full, "required when type is openai");
	}
}

static void load_memory(ctx *c, const config_node *root, settings *s)
{
	static const char *const known[] = {"sweep_interval_s", "extract", NULL};
	const config_node *m = get_map(c, root, "", "memory");

	check_keys(c, m, "memory", known);
	get_int(c, m, "memory", "sweep_interval_s", SETTINGS_MEMORY_SWEEP_INTERVAL_S_DEFAULT, 0,
		SETTINGS_INT_MAX, &s->memory_sweep_interval_s);
	load_extract(c, get_map(c, m, "memory", "extract"), "memory.extract", NULL, &s->extract);
}

/* A checkpoints map m at path (the top-level section or an app's) into
 * *out, over base (NULL: the defaults). */
static void load_checkpoints_map(ctx *c, const config_node *m, const char *path,
				 const settings_checkpoints *base, settings_checkpoints *out)
{
	get_int(c, m, path, "timeout_s",
		base ? base->timeout_s : SETTINGS_CHECKPOINTS_TIMEOUT_S_DEFAULT, 0,
		SETTINGS_INT_MAX, &out->timeout_s);
	get_bool(c, m, path, "auto_resume", base ? base->auto_resume : 1, &out->auto_resume);
	get_bool(c, m, path, "auto_resume_hitl", base ? base->auto_resume_hitl : 0,
		 &out->auto_resume_hitl);
}

static void load_checkpoints(ctx *c, const config_node *root, settings *s)
{
	static const char *const known[] = {"timeout_s", "auto_resume", "auto_resume_hitl",
					    "sweep_interval_s", NULL};
	const config_node *m = get_map(c, root, "", "checkpoints");

	check_keys(c, m, "checkpoints", known);
	get_int(c, m, "checkpoints", "sweep_interval_s",
		SETTINGS_CHECKPOINTS_SWEEP_INTERVAL_S_DEFAULT, 0, SETTINGS_INT_MAX,
		&s->checkpoints_sweep_interval_s);
	load_checkpoints_map(c, m, "checkpoints", NULL, &s->checkpoints);
}

/* working_memory.recall (rc: the detached node, or NULL) into *out. */
static void load_recall(ctx *c, const config_node *rc, const char *path, const settings *s,
			settings_recall *out)
{
	static const char *const known[] = {"k", "sources", "min_score", "max_tokens", "mode",
					    NULL};
	static const char *const modes[] = {"keyword", "vector", "hybrid", NULL};
	static const char *const sources[] = {"events", "memories", NULL};
	static const uint32_t source_bits[] = {SETTINGS_RECALL_EVENTS, SETTINGS_RECALL_MEMORIES};
	char full[SETTINGS_PATH_MAX];

	memset(out, 0, sizeof(*out));
	if (!rc)
		return;
	if (config_node_type(rc) != CONFIG_MAP) {
		problem(c, rc, path, "expected a map {k, sources, min_score, max_tokens, mode}, got %s",
			config_node_kind(rc));
		return;
	}
	check_keys(c, rc, path, known);
	out->enabled = 1;
	get_int(c, rc, path, "k", SETTINGS_RECALL_K_DEFAULT, 1, SETTINGS_RECALL_K_MAX, &out->k);
	get_double(c, rc, path, "min_score", 0, 0, 0, DBL_MAX, &out->min_score);
	get_int(c, rc, path, "max_tokens", SETTINGS_RECALL_MAX_TOKENS_DEFAULT, 1, SETTINGS_INT_MAX,
		&out->max_tokens);
	out->sources = SETTINGS_RECALL_EVENTS | SETTINGS_RECALL_MEMORIES;
	const config_node *seq = get(rc, "sources");
	join(full, path, "sources");
	if (seq && (config_node_type(seq) != CONFIG_SEQ || config_len(seq) == 0)) {
		problem(c, seq, full, "expected a list of events and/or memories, got %s",
			config_node_type(seq) == CONFIG_SEQ ? "an empty one" : config_node_kind(seq));
	} else if (seq) {
		out->sources = 0;
		for (size_t i = 0; i < config_len(seq); i++) {
			const config_node *it = config_seq_at(seq, i);
			const char *v = config_scalar(it);
			size_t j = 0;
			while (v && sources[j] && strcmp(sources[j], v) != 0)
				j++;
			if (!v || !sources[j]) {
				char got[SETTINGS_MSG_MAX / 2];
				describe(it, got, sizeof(got));
				problem(c, it, full, "expected events or memories, got %s", got);
				continue;
			}
			out->sources |= source_bits[j];
		}
		if (!out->sources)
			out->sources = SETTINGS_RECALL_EVENTS | SETTINGS_RECALL_MEMORIES;
	}
	const config_node *at = get(rc, "mode");
	if (at) {
		size_t mode;
		get_enum(c, rc, path, "mode", modes, 0, &mode);
		join(full, path, "mode");
		if (!config_scalar(at) || strcmp(config_scalar(at), modes[mode]) != 0)
			return; /* reported */
		if (mode != 1 && !s->keyword_enabled)
			problem(c, at, full, "%s search needs index.keyword.enabled: true", modes[mode]);
		else if (mode != 0 && !s->vector_enabled)
			problem(c, at, full, "%s search needs index.vector.enabled: true", modes[mode]);
		out->mode = dup_or_flag(c, modes[mode]);
	} else if (!s->keyword_enabled && !s->vector_enabled) {
		problem(c, rc, path, "needs a search index (index.keyword or index.vector enabled)");
	}
}

static void recall_clear(settings_recall *r)
{
	free(r->mode);
	r->mode = NULL;
}

/* One apps.<name> entry into s->apps[s->n_apps]. */
static void load_app(ctx *c, const char *name, const config_node *key_node,
		     const config_node *v, settings *s)
{
	static const char *const known[] = {"working_memory", "lanes", "memory", "checkpoints",
					    NULL};
	static const char *const memory_known[] = {"extract", NULL};
	static const char *const checkpoints_known[] = {"timeout_s", "auto_resume",
							"auto_resume_hitl", NULL};
	char path[SETTINGS_PATH_MAX];
	join(path, "apps", name);
	if (!*name || strlen(name) > MEMD_ID_MAX) {
		problem(c, key_node, "apps", "an app name must be 1..%d bytes", MEMD_ID_MAX);
		return;
	}
	if (config_node_type(v) != CONFIG_MAP) {
		problem(c, v ? v : key_node, path, "expected a map {working_memory: ...}, got %s",
			config_node_kind(v));
		return;
	}
	check_keys(c, v, path, known);
	const config_node *wm = get_map(c, v, path, "working_memory");
	char wm_path[SETTINGS_PATH_MAX];
	join(wm_path, path, "working_memory");
	if (!wm) {
		if (!get(v, "working_memory"))
			problem(c, v, wm_path, "required ({strategy: ..., ...})");
		return;
	}
	/* Other keys are the strategy's, checked by the loader. */
	const char *strategy = get_text(c, wm, wm, wm_path, "strategy", 1,
					"(the strategy plugin's name or .so path)");
	if (!strategy)
		return;
	settings_app *app = &s->apps[s->n_apps];
	char recall_path[SETTINGS_PATH_MAX];
	/* recall is the host's: the strategy never sees it. */
	join(recall_path, wm_path, "recall");
	load_recall(c, config_map_detach(s->root, wm, "recall"), recall_path, s, &app->recall);
	char lanes_path[SETTINGS_PATH_MAX];
	join(lanes_path, path, "lanes");
	load_lanes_map(c, get_map(c, v, path, "lanes"), lanes_path, &s->lanes,
		       get(get(s->root, "lanes"), "overrides"), &app->lanes);
	{
		char mem_path[SETTINGS_PATH_MAX], ex_path[SETTINGS_PATH_MAX];
		const config_node *mem = get_map(c, v, path, "memory");
		join(mem_path, path, "memory");
		join(ex_path, mem_path, "extract");
		check_keys(c, mem, mem_path, memory_known);
		load_extract(c, get_map(c, mem, mem_path, "extract"), ex_path, &s->extract,
			     &app->extract);
	}
	{
		char ck_path[SETTINGS_PATH_MAX];
		const config_node *ck = get_map(c, v, path, "checkpoints");
		join(ck_path, path, "checkpoints");
		check_keys(c, ck, ck_path, checkpoints_known);
		load_checkpoints_map(c, ck, ck_path, &s->checkpoints, &app->checkpoints);
	}
	app->name = dup_or_flag(c, name);
	app->strategy = dup_or_flag(c, strategy);
	app->node = wm;
	if (app->name && app->strategy)
		s->n_apps++;
	else {
		free(app->name);
		free(app->strategy);
		app->name = app->strategy = NULL;
		lanes_clear(&app->lanes);
		extract_clear(&app->extract);
		recall_clear(&app->recall);
	}
}

static void load_apps(ctx *c, const config_node *root, const config_node *defaults,
		      settings *s)
{
	const config_node *m = get_map(c, root, "", "apps");
	const config_node *def_apps = config_map_get(defaults, "apps");
	size_t n = config_len(m);
	s->apps = calloc(n + 1, sizeof(*s->apps));
	if (!s->apps) {
		c->nomem = 1;
		return;
	}
	int have_default = 0;
	for (size_t i = 0; i < n; i++) {
		const char *name = config_map_key_at(m, i);
		if (strcmp(name, SETTINGS_DEFAULT_APP) == 0)
			have_default = 1;
		load_app(c, name, config_map_key_node_at(m, i), config_map_value_at(m, i), s);
	}
	if (!have_default)
		load_app(c, SETTINGS_DEFAULT_APP, NULL, config_map_get(def_apps, SETTINGS_DEFAULT_APP),
			 s);
}

/* ---- entry points ------------------------------------------------------ */

void settings_clear(settings *s)
{
	if (!s)
		return;
	free(s->listen);
	for (size_t i = 0; i < s->n_api_keys; i++) {
		free(s->api_keys[i].key);
		free_strv(s->api_keys[i].apps);
		free(s->api_keys[i].user);
	}
	free(s->api_keys);
	for (size_t i = 0; s->allowed_hosts && s->allowed_hosts[i]; i++)
		free(s->allowed_hosts[i]);
	free(s->allowed_hosts);
	for (size_t i = 0; s->plugin_path && s->plugin_path[i]; i++)
		free(s->plugin_path[i]);
	free(s->plugin_path);
	for (size_t i = 0; i < s->n_stores; i++) {
		free(s->stores[i].name);
		free(s->stores[i].plugin);
	}
	free(s->stores);
	free(s->sessions_store);
	free(s->keyword_snapshot);
	free(s->vector_store);
	free(s->search_mode_default);
	lanes_clear(&s->lanes);
	for (size_t i = 0; i < s->n_apps; i++) {
		free(s->apps[i].name);
		free(s->apps[i].strategy);
		lanes_clear(&s->apps[i].lanes);
		extract_clear(&s->apps[i].extract);
		recall_clear(&s->apps[i].recall);
	}
	free(s->apps);
	extract_clear(&s->extract);
	config_free(s->root);
	memset(s, 0, sizeof(*s));
}

int32_t settings_load(config_node *root, settings *ret, config_diag *d)
{
	static const char *const known[] = {"server", "plugins", "stores", "sessions", "index",
					    "summarizer", "tokenizer", "state", "lanes", "memory",
					    "checkpoints", "apps", NULL};
	memd_error err = {0};
	config_node *defaults = NULL;
	int32_t rc = config_parse_string(settings_defaults_yaml, sizeof(settings_defaults_yaml) - 1,
					 SETTINGS_DEFAULTS_NAME, &defaults, &err);
	if (rc) {
		/* The text is fixed, so only ENOMEM can get here. */
		config_free(root);
		config_diag_add(d, NULL, NULL, "%s", err.msg);
		return rc;
	}
	if (root)
		config_attach(root, defaults);
	else
		root = defaults;

	settings s = {0};
	s.root = root;
	ctx c = {.d = d};
	const config_node *top = root;
	if (config_node_type(root) == CONFIG_NULL) {
		top = NULL; /* an empty file: every default */
	} else if (config_node_type(root) != CONFIG_MAP) {
		problem(&c, root, NULL, "expected a map of sections (server, stores, apps, ...), got %s",
			config_node_kind(root));
		top = NULL;
	}
	check_keys(&c, top, "", known);
	load_server(&c, top, &s);
	load_plugins(&c, top, &s);
	load_stores(&c, top, defaults, &s);
	load_sessions(&c, top, &s);
	load_index(&c, top, &s);
	load_summarizer(&c, top, &s);
	load_tokenizer(&c, top, &s);
	load_state(&c, top, &s);
	load_lanes(&c, top, &s);
	load_memory(&c, top, &s);
	load_checkpoints(&c, top, &s);
	load_apps(&c, top, defaults, &s);

	if (c.nomem || c.errors) {
		settings_clear(&s);
		if (c.nomem) {
			config_diag_add(d, NULL, NULL, "out of memory while reading the config");
			return MEMD_ENOMEM;
		}
		return MEMD_EINVAL;
	}
	*ret = s;
	return 0;
}

const settings_app *settings_app_for(const settings *s, const char *app)
{
	if (!s)
		return NULL;
	const settings_app *fallback = NULL;
	for (size_t i = 0; i < s->n_apps; i++) {
		if (app && strcmp(s->apps[i].name, app) == 0)
			return &s->apps[i];
		if (strcmp(s->apps[i].name, SETTINGS_DEFAULT_APP) == 0)
			fallback = &s->apps[i];
	}
	return fallback;
}

const settings_store *settings_store_get(const settings *s, const char *name)
{
	if (!s || !name)
		return NULL;
	for (size_t i = 0; i < s->n_stores; i++)
		if (strcmp(s->stores[i].name, name) == 0)
			return &s->stores[i];
	return NULL;
}
