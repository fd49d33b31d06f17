/* SPDX-License-Identifier: MIT */
#include "my_config.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define MY_STR(x) MY_STR2(x)
#define MY_STR2(x) #x

#define MY_PORT_MAX 65535
#define MY_POOL_MAX 1024
#define MY_TIMEOUT_MAX_MS (24LL * 3600 * 1000) /* a day */
#define MY_CONNECT_TIMEOUT_MIN_S 1
#define MY_CONNECT_TIMEOUT_MAX_S 3600
#define MY_HEX_BASE 16
#define MY_DEC_BASE 10
#define MY_HEX_LETTER_VALUE 10 /* 'a' is 10 */

static const memd_config_key key_dsn = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_STRING,
	.flags = MEMD_CONFIG_SECRET,
	.name = "dsn",
	.help = "mysql://user:password@host:port/database?sslmode=...; the keys below "
		"override its parts",
};
static const memd_config_key key_host = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_STRING,
	.name = "host",
	.help = "server host name or address (default " MY_DEFAULT_HOST ")",
};
static const memd_config_key key_port = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_INT,
	.name = "port",
	.help = "server TCP port (default " MY_STR(MY_DEFAULT_PORT) ")",
};
static const memd_config_key key_socket = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_STRING,
	.name = "socket",
	.help = "unix socket path; when set, used instead of host and port",
};
static const memd_config_key key_database = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_STRING,
	.name = "database",
	.help = "database name (default " MY_DEFAULT_DATABASE "); must exist",
};
static const memd_config_key key_user = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_STRING,
	.name = "user",
	.help = "user name (default " MY_DEFAULT_USER ")",
};
static const memd_config_key key_password = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_STRING,
	.flags = MEMD_CONFIG_SECRET,
	.name = "password",
	.help = "password; write ${ENV_VAR} so it stays out of the file (never logged)",
};
static const memd_config_key key_sslmode = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_STRING,
	.name = "sslmode",
	.help = "disabled, preferred (TLS when the server offers it), required, or "
		"verify_identity (certificate and host name checked; default "
		MY_DEFAULT_SSLMODE ")",
};
static const memd_config_key key_ssl_ca = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_STRING,
	.name = "ssl_ca",
	.help = "CA certificate file (PEM) for verify_identity",
};
static const memd_config_key key_ssl_cert = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_STRING,
	.name = "ssl_cert",
	.help = "client certificate file (PEM)",
};
static const memd_config_key key_ssl_key = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_STRING,
	.name = "ssl_key",
	.help = "client private key file (PEM)",
};
static const memd_config_key key_pool = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_INT,
	.name = "pool",
	.default_value = MY_STR(MY_DEFAULT_POOL),
	.help = "connections this instance opens at most (concurrent calls)",
};
static const memd_config_key key_group_commit = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_INT,
	.name = "group_commit",
	.default_value = MY_STR(MY_DEFAULT_GROUP_COMMIT),
	.help = "concurrent appends (to distinct sessions) written in one transaction at "
		"most; 1 = every append alone",
};
static const memd_config_key key_connect_timeout = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_INT,
	.name = "connect_timeout_s",
	.default_value = MY_STR(MY_DEFAULT_CONNECT_TIMEOUT_S),
	.help = "how long a connection attempt may take, in seconds",
};
static const memd_config_key key_statement_timeout = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_INT,
	.name = "statement_timeout_ms",
	.default_value = MY_STR(MY_DEFAULT_STATEMENT_TIMEOUT_MS),
	.help = "longest a statement or a lock wait may take before the call fails "
		"with 503; 0 = no limit",
};

static const memd_config_key key_create_database = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_BOOL,
	.name = "create_database",
	.default_value = "false",
	.help = "create the database at start if it is missing (needs the CREATE privilege)",
};

const memd_config_key *const my_config_keys[] = {
	&key_dsn, &key_host, &key_port, &key_socket, &key_database, &key_user, &key_password,
	&key_sslmode, &key_ssl_ca, &key_ssl_cert, &key_ssl_key, &key_pool,
	&key_group_commit,
	&key_connect_timeout, &key_statement_timeout, &key_create_database, NULL,
};

int32_t my_sslmode_parse(const char *name)
{
	static const struct {
		const char *name;
		int32_t mode;
	} modes[] = {
		{ "disabled", MY_SSL_DISABLED },
		{ "preferred", MY_SSL_PREFERRED },
		{ "required", MY_SSL_REQUIRED },
		{ "verify_identity", MY_SSL_VERIFY_IDENTITY },
	};

	for (size_t i = 0; name && i < sizeof(modes) / sizeof(modes[0]); i++)
		if (strcmp(name, modes[i].name) == 0)
			return modes[i].mode;
	return -1;
}

/* ---- the DSN ---------------------------------------------------------- */

static int hex_value(int ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	ch = tolower(ch);
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + MY_HEX_LETTER_VALUE;
	return -1;
}

/* The percent-decoded copy of [s, s + n); NULL on a bad escape or ENOMEM
 * (*ret_bad says which). */
static char *decode(const char *s, size_t n, int *ret_bad)
{
	char *out = malloc(n + 1), *w = out;

	*ret_bad = 0;
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] != '%') {
			*w++ = s[i];
			continue;
		}
		if (i + 2 >= n || hex_value((unsigned char)s[i + 1]) < 0 ||
		    hex_value((unsigned char)s[i + 2]) < 0) {
			free(out);
			*ret_bad = 1;
			return NULL;
		}
		*w = (char)(hex_value((unsigned char)s[i + 1]) * MY_HEX_BASE +
			    hex_value((unsigned char)s[i + 2]));
		if (*w == '\0') {
			free(out);
			*ret_bad = 1;
			return NULL;
		}
		w++;
		i += 2;
	}
	*w = '\0';
	return out;
}

/* Replace *slot with the decoded [s, s + n). what names the part. */
static int32_t set_part(char **slot, const char *s, size_t n, const char *what, memd_error *err)
{
	int bad = 0;
	char *v = decode(s, n, &bad);

	if (!v)
		return bad ? memd_error_set(err, MEMD_EINVAL, 0, "mysql: dsn: bad %% escape in the %s",
					    what)
			   : memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	free(*slot);
	*slot = v;
	return 0;
}

static int32_t parse_port(const char *s, size_t n, uint32_t *ret, memd_error *err)
{
	uint32_t v = 0;

	if (n == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "mysql: dsn: the port is empty");
	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return memd_error_set(err, MEMD_EINVAL, 0, "mysql: dsn: the port is not a number");
		v = v * MY_DEC_BASE + (uint32_t)(s[i] - '0');
		if (v > MY_PORT_MAX)
			return memd_error_set(err, MEMD_EINVAL, 0, "mysql: dsn: port over %d",
					      MY_PORT_MAX);
	}
	if (v == 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "mysql: dsn: port 0");
	*ret = v;
	return 0;
}

static int32_t parse_query(const char *q, my_options *o, memd_error *err)
{
	while (*q) {
		const char *amp = strchr(q, '&');
		size_t len = amp ? (size_t)(amp - q) : strlen(q);
		const char *eq = memchr(q, '=', len);
		size_t klen = eq ? (size_t)(eq - q) : len;
		const char *v = eq ? eq + 1 : q + len;
		size_t vlen = eq ? len - klen - 1 : 0;
		char *mode = NULL;
		int32_t r;

		if (len == 0) {
			q += amp ? 1 : 0;
			continue;
		}
		if (!eq)
			return memd_error_set(err, MEMD_EINVAL, 0, "mysql: dsn: '%.*s' has no value",
					      (int)klen, q);
#define KEY_IS(k) (klen == strlen(k) && strncmp(q, k, klen) == 0)
		if (KEY_IS("sslmode")) {
			r = set_part(&mode, v, vlen, "sslmode", err);
			if (r == 0 && my_sslmode_parse(mode) < 0)
				r = memd_error_set(err, MEMD_EINVAL, 0,
						   "mysql: dsn: sslmode '%.32s' is not disabled, "
						   "preferred, required or verify_identity", mode);
			if (r == 0)
				o->sslmode = (uint32_t)my_sslmode_parse(mode);
			free(mode);
		} else if (KEY_IS("ssl_ca")) {
			r = set_part(&o->ssl_ca, v, vlen, "ssl_ca", err);
		} else if (KEY_IS("ssl_cert")) {
			r = set_part(&o->ssl_cert, v, vlen, "ssl_cert", err);
		} else if (KEY_IS("ssl_key")) {
			r = set_part(&o->ssl_key, v, vlen, "ssl_key", err);
		} else if (KEY_IS("socket")) {
			r = set_part(&o->socket, v, vlen, "socket", err);
		} else {
			r = memd_error_set(err, MEMD_EINVAL, 0,
					   "mysql: dsn: unknown parameter '%.*s' (known: sslmode, "
					   "ssl_ca, ssl_cert, ssl_key, socket)", (int)klen, q);
		}
#undef KEY_IS
		if (r < 0)
			return r;
		q += len + (amp ? 1 : 0);
	}
	return 0;
}

int32_t my_dsn_parse(const char *dsn, my_options *o, memd_error *err)
{
	static const char *const schemes[] = { "mysql://", "mariadb://" };
	const char *p = NULL, *auth_end, *at, *host, *host_end, *port = NULL;
	int32_t r;

	for (size_t i = 0; dsn && i < sizeof(schemes) / sizeof(schemes[0]); i++)
		if (strncmp(dsn, schemes[i], strlen(schemes[i])) == 0)
			p = dsn + strlen(schemes[i]);
	if (!p)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "mysql: dsn must start with mysql:// or mariadb://");
	auth_end = p + strcspn(p, "/?");
	/* user[:password]@ (the last @: a password may contain one). */
	at = NULL;
	for (const char *q = p; q < auth_end; q++)
		if (*q == '@')
			at = q;
	if (at) {
		const char *colon = memchr(p, ':', (size_t)(at - p));
		r = set_part(&o->user, p, (size_t)((colon ? colon : at) - p), "user", err);
		if (r == 0 && colon)
			r = set_part(&o->password, colon + 1, (size_t)(at - colon - 1), "password",
				     err);
		if (r < 0)
			return r;
		p = at + 1;
	}
	host = p;
	if (*host == '[') {
		const char *close = memchr(host, ']', (size_t)(auth_end - host));
		if (!close)
			return memd_error_set(err, MEMD_EINVAL, 0, "mysql: dsn: '[' without ']'");
		host_end = close + 1;
		if (host_end < auth_end && *host_end != ':')
			return memd_error_set(err, MEMD_EINVAL, 0,
					      "mysql: dsn: junk after the ']' of the host");
		host++;
		if (host_end < auth_end)
			port = host_end + 1;
		host_end = close;
	} else {
		host_end = memchr(host, ':', (size_t)(auth_end - host));
		if (host_end)
			port = host_end + 1;
		else
			host_end = auth_end;
	}
	if (host_end > host) {
		r = set_part(&o->host, host, (size_t)(host_end - host), "host", err);
		if (r < 0)
			return r;
	}
	if (port) {
		r = parse_port(port, (size_t)(auth_end - port), &o->port, err);
		if (r < 0)
			return r;
	}
	p = auth_end;
	if (*p == '/') {
		size_t n = strcspn(p + 1, "?");
		if (n) {
			r = set_part(&o->database, p + 1, n, "database", err);
			if (r < 0)
				return r;
		}
		p += 1 + n;
	}
	if (*p == '?')
		return parse_query(p + 1, o, err);
	return 0;
}

/* ---- resolution -------------------------------------------------------- */

/* A string key: *slot replaced when the key is set (a copy). */
static int32_t cfg_string(const memd_host *host, const char *key, char **slot, memd_error *err)
{
	const char *v = NULL;
	int32_t r = host->config_string ? host->config_string(host, key, &v) : MEMD_ENOTFOUND;
	char *copy;

	if (r == MEMD_ENOTFOUND)
		return 0;
	if (r < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "mysql: %s must be a string", key);
	copy = strdup(v);
	if (!copy)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	free(*slot);
	*slot = copy;
	return 0;
}

/* An int key within [min, max]; *ret untouched when it is not set. */
static int32_t cfg_int(const memd_host *host, const char *key, int64_t min, int64_t max,
		       int64_t *ret, memd_error *err)
{
	int64_t v = 0;
	int32_t r = host->config_int ? host->config_int(host, key, &v) : MEMD_ENOTFOUND;

	if (r == MEMD_ENOTFOUND)
		return 0;
	if (r < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "mysql: %s must be an integer", key);
	if (v < min || v > max)
		return memd_error_set(err, MEMD_EINVAL, 0, "mysql: %s must be %lld..%lld, not %lld",
				      key, (long long)min, (long long)max, (long long)v);
	*ret = v;
	return 0;
}

static int32_t set_default(char **slot, const char *def, memd_error *err)
{
	if (*slot)
		return 0;
	*slot = strdup(def);
	return *slot ? 0 : memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
}

int32_t my_config_load(const memd_host *host, my_options *ret, memd_error *err)
{
	my_options o = { .sslmode = UINT32_MAX };
	char *dsn = NULL, *sslmode = NULL;
	int64_t port = -1, pool = MY_DEFAULT_POOL, group = MY_DEFAULT_GROUP_COMMIT;
	int64_t connect_s = MY_DEFAULT_CONNECT_TIMEOUT_S;
	int64_t statement_ms = MY_DEFAULT_STATEMENT_TIMEOUT_MS;
	int32_t rb;
	int32_t r = cfg_string(host, "dsn", &dsn, err);

	if (r == 0 && dsn)
		r = my_dsn_parse(dsn, &o, err);
	if (r == 0)
		r = cfg_string(host, "host", &o.host, err);
	if (r == 0)
		r = cfg_int(host, "port", 1, MY_PORT_MAX, &port, err);
	if (r == 0)
		r = cfg_string(host, "socket", &o.socket, err);
	if (r == 0)
		r = cfg_string(host, "database", &o.database, err);
	if (r == 0)
		r = cfg_string(host, "user", &o.user, err);
	if (r == 0)
		r = cfg_string(host, "password", &o.password, err);
	if (r == 0)
		r = cfg_string(host, "sslmode", &sslmode, err);
	if (r == 0)
		r = cfg_string(host, "ssl_ca", &o.ssl_ca, err);
	if (r == 0)
		r = cfg_string(host, "ssl_cert", &o.ssl_cert, err);
	if (r == 0)
		r = cfg_string(host, "ssl_key", &o.ssl_key, err);
	if (r == 0)
		r = cfg_int(host, "pool", 1, MY_POOL_MAX, &pool, err);
	if (r == 0)
		r = cfg_int(host, "group_commit", 1, MY_GROUP_COMMIT_MAX, &group, err);
	if (r == 0)
		r = cfg_int(host, "connect_timeout_s", MY_CONNECT_TIMEOUT_MIN_S,
			    MY_CONNECT_TIMEOUT_MAX_S, &connect_s, err);
	if (r == 0)
		r = cfg_int(host, "statement_timeout_ms", 0, MY_TIMEOUT_MAX_MS, &statement_ms, err);
	if (r == 0 && host->config_bool &&
	    (rb = host->config_bool(host, "create_database", &o.create_database)) < 0 &&
	    rb != MEMD_ENOTFOUND)
		r = memd_error_set(err, MEMD_EINVAL, 0, "mysql: create_database must be a boolean");
	if (r == 0 && sslmode) {
		int32_t m = my_sslmode_parse(sslmode);
		if (m < 0)
			r = memd_error_set(err, MEMD_EINVAL, 0,
					   "mysql: sslmode '%.32s' is not disabled, preferred, "
					   "required or verify_identity", sslmode);
		else
			o.sslmode = (uint32_t)m;
	}
	if (r == 0 && o.sslmode == UINT32_MAX)
		o.sslmode = (uint32_t)my_sslmode_parse(MY_DEFAULT_SSLMODE);
	if (r == 0)
		r = set_default(&o.host, MY_DEFAULT_HOST, err);
	if (r == 0)
		r = set_default(&o.database, MY_DEFAULT_DATABASE, err);
	if (r == 0)
		r = set_default(&o.user, MY_DEFAULT_USER, err);
	if (r == 0 && !o.database[0])
		r = memd_error_set(err, MEMD_EINVAL, 0, "mysql: database is empty");
	if (dsn) {
		volatile char *p = dsn; /* it may hold the password */
		while (*p)
			*p++ = '\0';
		free(dsn);
	}
	free(sslmode);
	if (r < 0) {
		my_options_clear(&o);
		return r;
	}
	if (port > 0)
		o.port = (uint32_t)port;
	if (!o.port)
		o.port = MY_DEFAULT_PORT;
	o.pool = (uint32_t)pool;
	o.group_commit = (uint32_t)group;
	o.connect_timeout_s = connect_s;
	o.statement_timeout_ms = statement_ms;
	*ret = o;
	return 0;
}
