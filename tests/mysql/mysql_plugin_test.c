/* SPDX-License-Identifier: MIT */
/*
 * What the store conformance suite cannot say about the MariaDB plugin
 * because it is about this backend: the DSN and the discrete keys, errors
 * at start (bad DSN, wrong password, no server, TLS refused, a schema from
 * a newer memd) that are clear and never show the password, statement
 * timeouts that end a blocked call with a retryable error, and state keys
 * over the schema's limit.
 *
 * Needs the server of tests/services/mariadb.sh ($MEMD_MYSQL_*; run under
 * tests/services/with-services.sh). Every test works in a database of its
 * own (memd_p<pid>_<n>, created by the plugin, dropped at the end).
 */
#include <arpa/inet.h>
#include <pthread.h>
#include <stddef.h>
#include <criterion/criterion.h>
#include <mysql.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <memd/plugin.h>

#include "config/config.h"
#include "plugins/hostsvc.h"
#include "plugins/loader.h"

#define LOG_MAX 64
#define LINE_MAX_LEN 512
#define TEXT_MAX 1024
#define MAX_SEARCH 16
#define US_PER_SEC 1000000
#define NS_PER_US 1000
#define T0 1700000000000000LL
#define STATE_KEY_MAX 1024      /* the plugin's MY_STATE_KEY_MAX */
#define FAIL_FAST_US 3000000    /* a refused connection reports within 3 s */
#define TIMEOUT_MS 500          /* statement_timeout_ms of the timeout test */
#define TIMEOUT_SLACK_US 4000000

/* ---- a plugin instance with its log captured ---------------------------- */

typedef struct log_buf {
	char lines[LOG_MAX][LINE_MAX_LEN];
	int n;
} log_buf;

static void capture(void *ud, int32_t level, const char *component, const char *line)
{
	log_buf *b = ud;
	(void)level;
	if (b->n < LOG_MAX)
		snprintf(b->lines[b->n++], LINE_MAX_LEN, "%s: %s", component, line);
}

typedef struct inst {
	loader_plugin *plugin;
	loader_instance *inst;
	config_node *cfg;
	hostsvc *svc;
	const memd_store_ops *ops;
	void *h;
	log_buf log;
	memd_error err;
} inst;

static char dbname[64];
static int db_counter;

static void new_dbname(void)
{
	snprintf(dbname, sizeof(dbname), "memd_p%ld_%d", (long)getpid(), db_counter++);
}

static MYSQL *raw_connect(const char *db)
{
	const char *port = getenv("MEMD_MYSQL_PORT");
	MYSQL *m = mysql_init(NULL);

	cr_assert_not_null(m);
	cr_assert_not_null(mysql_real_connect(m, getenv("MEMD_MYSQL_HOST"), getenv("MEMD_MYSQL_USER"),
					      getenv("MEMD_MYSQL_PASSWORD"), db,
					      port ? (unsigned)atoi(port) : 0, NULL, 0),
			   "raw connect: %s", mysql_error(m));
	return m;
}

/* Run constant SQL (test set-up only) over a raw connection. */
static void raw_sql(MYSQL *m, const char *sql)
{
	cr_assert_eq(mysql_real_query(m, sql, strlen(sql)), 0, "%s: %s", sql, mysql_error(m));
}

/* Create an instance from yaml; returns its init code (the instance is
 * kept only on success). */
static int32_t open_yaml(inst *in, const char *yaml)
{
	const char *search[MAX_SEARCH + 1];
	char *paths = strdup(getenv("MEMD_PLUGIN_PATH") ? getenv("MEMD_PLUGIN_PATH") : "");
	char *save = NULL;
	size_t n = 0;
	int32_t r;

	memset(in, 0, sizeof(*in));
	in->err.struct_size = sizeof(in->err);
	cr_assert_not_null(paths);
	for (char *t = strtok_r(paths, ":", &save); t && n < MAX_SEARCH; t = strtok_r(NULL, ":", &save))
		search[n++] = t;
	search[n] = NULL;
	in->svc = hostsvc_new(capture, &in->log, MEMD_LOG_DEBUG);
	cr_assert_not_null(in->svc);
	r = config_parse_string(yaml, strlen(yaml), "test", &in->cfg, &in->err);
	cr_assert_eq(r, 0, "config: %s", in->err.msg);
	r = loader_open("mysql", search, &in->plugin, &in->err);
	free(paths);
	cr_assert_eq(r, 0, "loader_open: %s", in->err.msg);
	r = loader_instance_create(in->plugin, "stores.test", in->cfg, "plugin", in->svc, &in->inst,
				   &in->err);
	if (r == 0) {
		in->ops = loader_store_ops(in->plugin);
		in->h = loader_instance_handle(in->inst);
	}
	return r;
}

static void close_inst(inst *in)
{
	loader_instance_destroy(in->inst);
	loader_close(in->plugin);
	config_free(in->cfg);
	hostsvc_free(in->svc);
	memset(in, 0, sizeof(*in));
}

/* The standard config of the test server, with extra keys appended. */
static void yaml_for(char *out, size_t size, const char *extra)
{
	snprintf(out, size,
		 "{plugin: mysql, host: \"${MEMD_MYSQL_HOST}\", port: \"${MEMD_MYSQL_PORT}\","
		 " user: \"${MEMD_MYSQL_USER}\", password: \"${MEMD_MYSQL_PASSWORD}\","
		 " database: %s, create_database: true%s%s}",
		 dbname, extra ? ", " : "", extra ? extra : "");
}

static void assert_no_secret(const inst *in, const char *secret)
{
	cr_assert_null(strstr(in->err.msg, secret), "the error shows the password: %s",
		       in->err.msg);
	for (int i = 0; i < in->log.n; i++)
		cr_assert_null(strstr(in->log.lines[i], secret), "a log line shows the password: %s",
			       in->log.lines[i]);
}

static void drop_db(void)
{
	MYSQL *m = raw_connect(NULL);
	char sql[128];
	snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS `%s`", dbname);
	raw_sql(m, sql);
	mysql_close(m);
}

static void setup(void)
{
	cr_assert(getenv("MEMD_MYSQL_HOST"), "MEMD_MYSQL_HOST is not set: run under "
		  "tests/services/with-services.sh");
	new_dbname();
}

/* Set when the test's database is on a private server (gone with it). */
static int db_elsewhere;

static void teardown(void)
{
	if (!db_elsewhere)
		drop_db();
}

TestSuite(mysql, .init = setup, .fini = teardown, .timeout = 60);

static int64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * US_PER_SEC + ts.tv_nsec / NS_PER_US;
}

static int32_t noop_session(void *ud, const memd_session *s)
{
	(void)ud;
	(void)s;
	return 0;
}

static int32_t create_session(inst *in, const char *id)
{
	memd_call call = { .struct_size = sizeof(call) };
	memd_session s = { .struct_size = sizeof(s), .app = "a", .user = "u", .id = id,
			   .created_us = T0 };
	memd_session_sink sink = { .struct_size = sizeof(sink), .session = noop_session };
	return in->ops->session_create(in->h, &call, &s, NULL, &sink, &in->err);
}

/* ---- the DSN and the keys ----------------------------------------------- */

Test(mysql, dsn_with_escapes_and_overrides)
{
	const char *pw = getenv("MEMD_MYSQL_PASSWORD"), *user = getenv("MEMD_MYSQL_USER");
	char yaml[TEXT_MAX * 2], escaped[TEXT_MAX] = "";
	inst in;
	int32_t r;

	/* The user name percent-encoded byte by byte. */
	for (const char *p = user; *p; p++)
		snprintf(escaped + strlen(escaped), sizeof(escaped) - strlen(escaped), "%%%02X",
			 (unsigned char)*p);
	/* Password and database in the DSN; sslmode from its query. */
	snprintf(yaml, sizeof(yaml),
		 "{plugin: mysql, dsn: \"mysql://%s:${MEMD_MYSQL_PASSWORD}@${MEMD_MYSQL_HOST}:"
		 "${MEMD_MYSQL_PORT}/%s?sslmode=disabled\", create_database: true}",
		 escaped, dbname);
	r = open_yaml(&in, yaml);
	cr_assert_eq(r, 0, "open with a DSN: %s", in.err.msg);
	cr_assert_eq(create_session(&in, "s1"), 0, "%s", in.err.msg);
	assert_no_secret(&in, pw);
	close_inst(&in);

	/* A discrete key overrides the DSN's part: the DSN names another
	 * database and a wrong port's host, the keys fix both. */
	snprintf(yaml, sizeof(yaml),
		 "{plugin: mysql, dsn: \"mariadb://nobody@[::1]:1/elsewhere?sslmode=required\","
		 " host: \"${MEMD_MYSQL_HOST}\", port: \"${MEMD_MYSQL_PORT}\","
		 " user: \"${MEMD_MYSQL_USER}\", password: \"${MEMD_MYSQL_PASSWORD}\","
		 " database: %s, sslmode: preferred}", dbname);
	r = open_yaml(&in, yaml);
	cr_assert_eq(r, 0, "keys over the DSN: %s", in.err.msg);
	/* The session made through the DSN is there: the same database. */
	{
		memd_call call = { .struct_size = sizeof(call) };
		memd_scope sc = { .struct_size = sizeof(sc), .app = "a", .user = "u", .session = "s1" };
		memd_session_sink sink = { .struct_size = sizeof(sink), .session = noop_session };
		r = in.ops->session_get(in.h, &call, &sc, &sink, &in.err);
		cr_assert_eq(r, 0, "session_get: %s", in.err.msg);
	}
	close_inst(&in);
}

Test(mysql, bad_dsns_are_refused_without_the_password)
{
	static const struct {
		const char *dsn;
		const char *says;
	} cases[] = {
		{ "postgres://u:SeCrEt1@h/db", "mysql://" },
		{ "mysql://u:SeCrEt1@h:99999/db", "port" },
		{ "mysql://u:SeCrEt1@h:12x/db", "port" },
		{ "mysql://u:SeCrEt1@h/db?color=blue", "unknown parameter 'color'" },
		{ "mysql://u:SeCrEt1%zz@h/db", "escape in the password" },
		{ "mysql://u:SeCrEt1@[::1/db", "']'" },
		{ "mysql://u:SeCrEt1@h/db?sslmode=sometimes", "sslmode" },
		{ "mysql://u:SeCrEt1@h/db?sslmode", "no value" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char yaml[TEXT_MAX];
		inst in;
		int32_t r;

		snprintf(yaml, sizeof(yaml), "{plugin: mysql, dsn: \"%s\"}", cases[i].dsn);
		r = open_yaml(&in, yaml);
		cr_assert_eq(r, MEMD_EINVAL, "%s: got %d (%s)", cases[i].dsn, r, in.err.msg);
		cr_assert_not_null(strstr(in.err.msg, cases[i].says), "%s: message '%s' lacks '%s'",
				   cases[i].dsn, in.err.msg, cases[i].says);
		assert_no_secret(&in, "SeCrEt1");
		close_inst(&in);
	}
}

Test(mysql, bad_keys_are_refused)
{
	static const char *const keys[] = {
		"sslmode: sometimes", "pool: 0", "port: 70000", "statement_timeout_ms: -1",
		"connect_timeout_s: 0", "colour: blue", "database: \"\"",
	};

	/* Refused before any connection is tried. */
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		char yaml[TEXT_MAX];
		inst in;
		snprintf(yaml, sizeof(yaml), "{plugin: mysql, %s}", keys[i]);
		cr_assert_eq(open_yaml(&in, yaml), MEMD_EINVAL, "%s was accepted: %s", keys[i],
			     in.err.msg);
		close_inst(&in);
	}
}

/* ---- errors at start ------------------------------------------------------ */

Test(mysql, wrong_password_is_clear_and_not_shown)
{
	char yaml[TEXT_MAX];
	inst in;
	int32_t r;

	snprintf(yaml, sizeof(yaml),
		 "{plugin: mysql, host: \"${MEMD_MYSQL_HOST}\", port: \"${MEMD_MYSQL_PORT}\","
		 " user: \"${MEMD_MYSQL_USER}\", password: WrOnGpAsS42, database: %s,"
		 " sslmode: disabled}", dbname);
	r = open_yaml(&in, yaml);
	cr_assert_eq(r, MEMD_EIO, "wrong password: got %d (%s)", r, in.err.msg);
	cr_assert_not_null(strstr(in.err.msg, "Access denied"), "%s", in.err.msg);
	assert_no_secret(&in, "WrOnGpAsS42");
	close_inst(&in);
}

Test(mysql, no_server_fails_fast_and_retryable)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	char yaml[TEXT_MAX];
	int64_t t0;
	inst in;
	int32_t r;

	/* A loopback port nobody listens on. */
	cr_assert_geq(fd, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	close(fd);
	snprintf(yaml, sizeof(yaml),
		 "{plugin: mysql, host: 127.0.0.1, port: %u, password: Pw123456,"
		 " connect_timeout_s: 2}", (unsigned)ntohs(a.sin_port));
	t0 = now_us();
	r = open_yaml(&in, yaml);
	cr_assert_eq(r, MEMD_EUNAVAIL, "no server: got %d (%s)", r, in.err.msg);
	cr_assert(in.err.flags & MEMD_ERROR_RETRYABLE, "not retryable: %s", in.err.msg);
	cr_assert_lt(now_us() - t0, FAIL_FAST_US, "took %lld us", (long long)(now_us() - t0));
	assert_no_secret(&in, "Pw123456");
	close_inst(&in);
}

static int log_has(const inst *in, const char *what)
{
	for (int i = 0; i < in->log.n; i++)
		if (strstr(in->log.lines[i], what))
			return 1;
	return 0;
}

Test(mysql, tls_modes)
{
	const char *ca = getenv("MEMD_MYSQL_SSL_CA");
	char yaml[TEXT_MAX], extra[TEXT_MAX / 2];
	inst in;
	int32_t r;

	cr_assert(ca && ca[0], "MEMD_MYSQL_SSL_CA is not set: the server of "
		  "tests/services/mariadb.sh has a test certificate");
	/* required and preferred: encrypted (the log says so). */
	yaml_for(yaml, sizeof(yaml), "sslmode: required");
	r = open_yaml(&in, yaml);
	cr_assert_eq(r, 0, "sslmode required: %s", in.err.msg);
	cr_assert(log_has(&in, ", TLS "), "required: the connection is not encrypted");
	close_inst(&in);
	yaml_for(yaml, sizeof(yaml), "sslmode: preferred");
	r = open_yaml(&in, yaml);
	cr_assert_eq(r, 0, "sslmode preferred: %s", in.err.msg);
	cr_assert(log_has(&in, ", TLS "), "preferred: TLS was offered but not used");
	close_inst(&in);
	/* verify_identity against the test CA, by key and in the DSN. */
	snprintf(extra, sizeof(extra), "sslmode: verify_identity, ssl_ca: \"%s\"", ca);
	yaml_for(yaml, sizeof(yaml), extra);
	r = open_yaml(&in, yaml);
	cr_assert_eq(r, 0, "verify_identity with the CA: %s", in.err.msg);
	cr_assert(log_has(&in, ", TLS "));
	close_inst(&in);
	snprintf(yaml, sizeof(yaml),
		 "{plugin: mysql, dsn: \"mysql://${MEMD_MYSQL_USER}@${MEMD_MYSQL_HOST}:"
		 "${MEMD_MYSQL_PORT}/%s?sslmode=verify_identity&ssl_ca=%s\","
		 " password: \"${MEMD_MYSQL_PASSWORD}\", create_database: true}", dbname, ca);
	r = open_yaml(&in, yaml);
	cr_assert_eq(r, 0, "verify_identity in the DSN: %s", in.err.msg);
	close_inst(&in);
	/* verify_identity without the CA: the certificate is not trusted. */
	yaml_for(yaml, sizeof(yaml), "sslmode: verify_identity");
	r = open_yaml(&in, yaml);
	cr_assert_lt(r, 0, "verify_identity trusted a certificate of an unknown CA");
	cr_assert_not_null(strstr(in.err.msg, "certificate"), "%s", in.err.msg);
	close_inst(&in);
	/* disabled: plain. */
	yaml_for(yaml, sizeof(yaml), "sslmode: disabled");
	r = open_yaml(&in, yaml);
	cr_assert_eq(r, 0, "sslmode disabled: %s", in.err.msg);
	cr_assert(log_has(&in, ", no TLS"), "disabled: the connection is encrypted");
	close_inst(&in);
}

/* A private server without TLS (tests/services/mariadb.sh, MEMD_MARIADB_TLS=0). */
static char plain_dir[] = "/tmp/memd-plain-XXXXXX";
static int plain_started;

static int service(const char *verb, const char *dir)
{
	char cmd[TEXT_MAX];
	snprintf(cmd, sizeof(cmd), "MEMD_MARIADB_TLS=0 '%s/tests/services/mariadb.sh' %s '%s'",
		 getenv("MEMD_SOURCE_ROOT") ? getenv("MEMD_SOURCE_ROOT") : ".", verb, dir);
	return system(cmd);
}

/* The test's database goes with the private server. */
static void plain_stop(void)
{
	if (plain_started)
		service("stop", plain_dir);
}

/* setenv each "export K=V" / "export K='V'" line of file. */
static void load_env(const char *file)
{
	char line[TEXT_MAX];
	FILE *f = fopen(file, "r");

	cr_assert_not_null(f, "no %s", file);
	while (fgets(line, sizeof(line), f)) {
		char *k = line + strlen("export "), *eq = strchr(line, '='), *v;
		size_t n;
		if (strncmp(line, "export ", strlen("export ")) != 0 || !eq)
			continue;
		*eq = '\0';
		v = eq + 1;
		n = strcspn(v, "\n");
		v[n] = '\0';
		if (v[0] == '\'' && n >= 2 && v[n - 1] == '\'') {
			v[n - 1] = '\0';
			v++;
		}
		setenv(k, v, 1);
	}
	fclose(f);
}

Test(mysql, tls_required_but_not_offered, .fini = plain_stop)
{
	char yaml[TEXT_MAX], env[sizeof(plain_dir) + 8];
	inst in;
	int32_t r;

	cr_assert_not_null(mkdtemp(plain_dir));
	cr_assert_eq(service("start", plain_dir), 0, "the private server did not start");
	plain_started = 1;
	db_elsewhere = 1;
	snprintf(env, sizeof(env), "%s/env", plain_dir);
	load_env(env);
	yaml_for(yaml, sizeof(yaml), "sslmode: required");
	r = open_yaml(&in, yaml);
	cr_assert_lt(r, 0, "sslmode required connected to a server without TLS");
	cr_assert(strstr(in.err.msg, "TLS") || strstr(in.err.msg, "SSL"), "%s", in.err.msg);
	close_inst(&in);
	/* preferred falls back to plain TCP. */
	yaml_for(yaml, sizeof(yaml), "sslmode: preferred");
	r = open_yaml(&in, yaml);
	cr_assert_eq(r, 0, "sslmode preferred: %s", in.err.msg);
	cr_assert(log_has(&in, ", no TLS"));
	close_inst(&in);
}

Test(mysql, newer_schema_is_refused)
{
	char yaml[TEXT_MAX];
	inst in;
	MYSQL *m;
	int32_t r;

	yaml_for(yaml, sizeof(yaml), NULL);
	r = open_yaml(&in, yaml);
	cr_assert_eq(r, 0, "%s", in.err.msg);
	close_inst(&in);
	m = raw_connect(dbname);
	raw_sql(m, "INSERT INTO memd_schema (version, what, applied_us) VALUES (99, 'future', 0)");
	mysql_close(m);
	r = open_yaml(&in, yaml);
	cr_assert_eq(r, MEMD_EIO, "a newer schema was accepted: %d %s", r, in.err.msg);
	cr_assert_not_null(strstr(in.err.msg, "newer"), "%s", in.err.msg);
	close_inst(&in);
}

Test(mysql, foreign_table_is_refused)
{
	char yaml[TEXT_MAX], sql[TEXT_MAX];
	inst in;
	MYSQL *m = raw_connect(NULL);
	int32_t r;

	/* Another application's memd_events in the database, no memd_schema. */
	snprintf(sql, sizeof(sql), "CREATE DATABASE `%s`", dbname);
	raw_sql(m, sql);
	snprintf(sql, sizeof(sql), "CREATE TABLE `%s`.memd_events (position BIGINT PRIMARY KEY,"
		 " note TEXT)", dbname);
	raw_sql(m, sql);
	mysql_close(m);
	yaml_for(yaml, sizeof(yaml), NULL);
	r = open_yaml(&in, yaml);
	cr_assert_eq(r, MEMD_EIO, "a foreign memd_events was accepted: %d %s", r, in.err.msg);
	cr_assert_not_null(strstr(in.err.msg, "another application"), "%s", in.err.msg);
	close_inst(&in);
}

/* ---- timeouts and limits -------------------------------------------------- */

Test(mysql, blocked_call_times_out_retryable)
{
	char yaml[TEXT_MAX], extra[64];
	memd_scope sc = { .struct_size = sizeof(sc), .app = "a", .user = "u", .session = "s1" };
	memd_call call = { .struct_size = sizeof(call) };
	memd_append ap = { .struct_size = sizeof(ap), .state_delta_json = "{\"k\":1}",
			   .now_us = T0 };
	memd_append_result res = { .struct_size = sizeof(res) };
	int64_t t0, took;
	inst in;
	MYSQL *m;
	int32_t r;

	snprintf(extra, sizeof(extra), "statement_timeout_ms: %d", TIMEOUT_MS);
	yaml_for(yaml, sizeof(yaml), extra);
	r = open_yaml(&in, yaml);
	cr_assert_eq(r, 0, "%s", in.err.msg);
	cr_assert_eq(create_session(&in, "s1"), 0, "%s", in.err.msg);
	/* Another connection holds the session's row lock. */
	m = raw_connect(dbname);
	raw_sql(m, "START TRANSACTION");
	raw_sql(m, "SELECT * FROM memd_sessions WHERE app = 'a' AND user = 'u' AND id = 's1'"
		   " FOR UPDATE");
	mysql_free_result(mysql_store_result(m));
	t0 = now_us();
	r = in.ops->append(in.h, &call, &sc, &ap, &res, &in.err);
	took = now_us() - t0;
	raw_sql(m, "ROLLBACK");
	mysql_close(m);
	cr_assert(r == MEMD_ETIMEDOUT || r == MEMD_EUNAVAIL, "blocked append: got %d (%s)", r,
		  in.err.msg);
	cr_assert(in.err.flags & MEMD_ERROR_RETRYABLE, "not retryable: %s", in.err.msg);
	cr_assert_lt(took, TIMEOUT_MS * 1000LL + TIMEOUT_SLACK_US, "took %lld us", (long long)took);
	/* Nothing of it stayed; the same call works now. */
	r = in.ops->append(in.h, &call, &sc, &ap, &res, &in.err);
	cr_assert_eq(r, 0, "after the lock went: %s", in.err.msg);
	cr_assert_eq(res.version, 1, "the timed-out append left a trace (version %lld)",
		     (long long)res.version);
	close_inst(&in);
}

Test(mysql, state_keys_over_the_limit)
{
	char yaml[TEXT_MAX];
	char *delta = malloc(STATE_KEY_MAX + 64);
	memd_scope sc = { .struct_size = sizeof(sc), .app = "a", .user = "u", .session = "s1" };
	memd_call call = { .struct_size = sizeof(call) };
	memd_append ap = { .struct_size = sizeof(ap), .now_us = T0 };
	memd_append_result res = { .struct_size = sizeof(res) };
	inst in;
	int32_t r;

	cr_assert_not_null(delta);
	yaml_for(yaml, sizeof(yaml), NULL);
	r = open_yaml(&in, yaml);
	cr_assert_eq(r, 0, "%s", in.err.msg);
	cr_assert_eq(create_session(&in, "s1"), 0, "%s", in.err.msg);
	/* A key of exactly the limit works, one byte more is refused. */
	for (int extra = 0; extra <= 1; extra++) {
		size_t n = STATE_KEY_MAX + (size_t)extra;
		strcpy(delta, "{\"user:");
		memset(delta + strlen(delta), 'k', n);
		strcpy(delta + strlen("{\"user:") + n, "\":1}");
		ap.state_delta_json = delta;
		r = in.ops->append(in.h, &call, &sc, &ap, &res, &in.err);
		if (extra)
			cr_assert_eq(r, MEMD_EINVAL, "a %zu-byte key: got %d", n, r);
		else
			cr_assert_eq(r, 0, "a %zu-byte key: %s", n, in.err.msg);
	}
	free(delta);
	close_inst(&in);
}

#define TOO_BIG (17u * 1024u * 1024u) /* over the server's 16 MiB max_allowed_packet */

Test(mysql, too_big_event_is_413_and_the_store_goes_on)
{
	char yaml[TEXT_MAX];
	char *big = malloc(TOO_BIG + 1);
	memd_scope sc = { .struct_size = sizeof(sc), .app = "a", .user = "u", .session = "s1" };
	memd_call call = { .struct_size = sizeof(call) };
	memd_event ev = { .struct_size = sizeof(ev), .id = "big", .author = "t", .role = "user",
			  .content_json = "{}", .timestamp_us = T0 };
	const memd_event *ptr = &ev;
	int64_t seq = 0;
	memd_append ap = { .struct_size = sizeof(ap), .events = &ptr, .n_events = 1,
			   .now_us = T0 };
	memd_append_result res = { .struct_size = sizeof(res), .seqs = &seq };
	inst in;
	int32_t r;

	cr_assert_not_null(big);
	memset(big, 'x', TOO_BIG);
	big[TOO_BIG] = '\0';
	ev.text = big;
	yaml_for(yaml, sizeof(yaml), "pool: 1");
	r = open_yaml(&in, yaml);
	cr_assert_eq(r, 0, "%s", in.err.msg);
	cr_assert_eq(create_session(&in, "s1"), 0, "%s", in.err.msg);
	r = in.ops->append(in.h, &call, &sc, &ap, &res, &in.err);
	cr_assert_eq(r, MEMD_ETOOBIG, "a 17 MiB event: got %d (%s)", r, in.err.msg);
	cr_assert_not_null(strstr(in.err.msg, "max_allowed_packet"), "%s", in.err.msg);
	/* The same (only) connection is usable again, and nothing was kept. */
	ev.text = "small";
	r = in.ops->append(in.h, &call, &sc, &ap, &res, &in.err);
	cr_assert_eq(r, 0, "after the refused event: %s", in.err.msg);
	cr_assert_eq(seq, 1, "the refused event took seq 1");
	free(big);
	close_inst(&in);
}

/* ---- bytes through the driver ---------------------------------------------- */

typedef struct got_events {
	char *text[4];
	char *id[4];
	int n;
} got_events;

static int32_t keep_event(void *ud, const memd_event *e)
{
	got_events *g = ud;
	if (g->n < 4) {
		g->text[g->n] = strdup(e->text ? e->text : "");
		g->id[g->n] = strdup(e->id);
		g->n++;
	}
	return 0;
}

Test(mysql, binaryish_utf8_and_wide_ids_round_trip)
{
	char yaml[TEXT_MAX], text[TEXT_MAX], emoji_id[MEMD_ID_MAX + 1], mixed_id[MEMD_ID_MAX + 1];
	size_t n = 0;
	memd_call call = { .struct_size = sizeof(call) };
	memd_event ev[2];
	const memd_event *ptrs[2] = { &ev[0], &ev[1] };
	int64_t seqs[2];
	memd_append ap = { .struct_size = sizeof(ap), .events = ptrs, .n_events = 2, .now_us = T0 };
	memd_append_result res = { .struct_size = sizeof(res), .seqs = seqs };
	memd_event_query q = { .struct_size = sizeof(q) };
	got_events g = { 0 };
	memd_event_sink sink = { .struct_size = sizeof(sink), .userdata = &g, .event = keep_event };
	memd_scope sc;
	inst in;
	int32_t r;

	/* Every byte 0x01..0x7f, then the edges of UTF-8: U+0080, U+07FF,
	 * U+0800, U+FFFD, the noncharacter U+FFFF, U+10000, U+10FFFF, U+2028. */
	for (int b = 1; b < 0x80; b++)
		text[n++] = (char)b;
	{
		static const char edges[] = "\xC2\x80\xDF\xBF\xE0\xA0\x80\xEF\xBF\xBD\xEF\xBF\xBF"
					    "\xF0\x90\x80\x80\xF4\x8F\xBF\xBF\xE2\x80\xA8";
		memcpy(text + n, edges, sizeof(edges));
		n += sizeof(edges) - 1;
	}
	text[n] = '\0';
	/* A session id of 63 four-byte emoji (252 bytes), an event id of 255
	 * bytes mixing 1- to 4-byte characters. */
	emoji_id[0] = '\0';
	for (int i = 0; i < MEMD_ID_MAX / 4; i++)
		strcat(emoji_id, "\xF0\x9F\x98\x80");
	mixed_id[0] = '\0';
	while (strlen(mixed_id) + 10 <= MEMD_ID_MAX)
		strcat(mixed_id, "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
	while (strlen(mixed_id) < MEMD_ID_MAX)
		strcat(mixed_id, "z");
	cr_assert_eq(strlen(mixed_id), MEMD_ID_MAX);

	yaml_for(yaml, sizeof(yaml), NULL);
	r = open_yaml(&in, yaml);
	cr_assert_eq(r, 0, "%s", in.err.msg);
	cr_assert_eq(create_session(&in, emoji_id), 0, "%s", in.err.msg);
	sc = (memd_scope){ .struct_size = sizeof(sc), .app = "a", .user = "u", .session = emoji_id };
	ev[0] = (memd_event){ .struct_size = sizeof(memd_event), .id = mixed_id, .author = "t",
			      .role = "user", .content_json = "{}", .text = text,
			      .timestamp_us = T0 };
	ev[1] = ev[0];
	ev[1].id = "A";
	r = in.ops->append(in.h, &call, &sc, &ap, &res, &in.err);
	cr_assert_eq(r, 0, "append: %s", in.err.msg);
	/* 'a' is another id than 'A'. */
	ev[0].id = "a";
	ap.n_events = 1;
	r = in.ops->append(in.h, &call, &sc, &ap, &res, &in.err);
	cr_assert_eq(r, 0, "'a' after 'A': %s", in.err.msg);
	cr_assert_eq(res.flags & MEMD_APPEND_REPLAYED, 0, "'a' was taken for 'A'");

	r = in.ops->events_load(in.h, &call, &sc, &q, &sink, &in.err);
	cr_assert_eq(r, 0, "%s", in.err.msg);
	cr_assert_eq(g.n, 3);
	cr_assert_str_eq(g.id[0], mixed_id);
	cr_assert_str_eq(g.id[1], "A");
	cr_assert_str_eq(g.id[2], "a");
	for (int i = 0; i < g.n; i++) {
		cr_assert_eq(strcmp(g.text[i], text), 0, "text %d changed on the way", i);
		free(g.text[i]);
		free(g.id[i]);
	}

	/* Bytes that are not UTF-8 never get in (the host checks first; the
	 * store refuses too) and leave nothing behind. */
	ev[0].id = "bad";
	ev[0].text = "\xFF\xFE not UTF-8";
	r = in.ops->append(in.h, &call, &sc, &ap, &res, &in.err);
	cr_assert_eq(r, MEMD_EINVAL, "invalid UTF-8: got %d (%s)", r, in.err.msg);
	memset(&g, 0, sizeof(g));
	r = in.ops->events_load(in.h, &call, &sc, &q, &sink, &in.err);
	cr_assert_eq(r, 0);
	cr_assert_eq(g.n, 3, "the refused append left an event");
	for (int i = 0; i < g.n; i++) {
		free(g.text[i]);
		free(g.id[i]);
	}
	close_inst(&in);
}

/* ---- lanes: the schema migration and races on one server ------------------- */

#define RACERS 8          /* threads racing one lane (the pool has as many connections) */
#define INBOX_ITEMS 40    /* items the racing takers share */
#define LEASE_US (3600LL * US_PER_SEC)

/* The statements that take a version 6 database back to version 5, as a
 * memd before the task paths of checkpoint writes left it (the reverse of
 * the plugin's step 6). */
static const char *const DOWNGRADE_TO_5[] = {
	"ALTER TABLE memd_checkpoint_writes DROP COLUMN task_path",
	"DELETE FROM memd_schema WHERE version > 5",
	NULL,
};

/* The statements that take a version 5 database back to version 4, as a
 * memd before checkpoints and tasks left it (the reverse of the plugin's
 * step 5). */
static const char *const DOWNGRADE_TO_4[] = {
	"DROP TABLE memd_checkpoints",
	"DROP TABLE memd_checkpoint_writes",
	"DROP TABLE memd_checkpoint_heads",
	"DROP TABLE memd_tasks",
	"DELETE FROM memd_schema WHERE version > 4",
	NULL,
};

/* The statements that take a version 4 database back to version 3, as a
 * memd before memories left it (the reverse of the plugin's step 4). */
static const char *const DOWNGRADE_TO_3[] = {
	"DROP TABLE memd_memories",
	"DROP TABLE memd_memory_history",
	"ALTER TABLE memd_feed_deletes DROP COLUMN memory_id",
	"ALTER TABLE memd_sessions DROP KEY memd_sessions_pending, DROP COLUMN memory_pending",
	"ALTER TABLE memd_sessions DROP COLUMN memory_seq",
	"DELETE FROM memd_schema WHERE version > 3",
	NULL,
};

/* The statements that take a version 3 database back to version 2, as a
 * memd before transcripts left it (the reverse of the plugin's step 3). */
static const char *const DOWNGRADE_TO_2[] = {
	"DROP TABLE memd_operations",
	"DROP TABLE memd_state_history",
	"DROP TABLE memd_feed_marks",
	"ALTER TABLE memd_events DROP KEY memd_events_visible,"
	" DROP KEY memd_events_visible_summaries, DROP KEY memd_events_visible_by_time,"
	" ADD KEY memd_events_summaries (app, user, session, is_summary, seq),"
	" ADD KEY memd_events_by_time (app, user, session, timestamp_us, seq),"
	" DROP COLUMN hidden_us, DROP COLUMN hidden_by, DROP COLUMN hidden_kind,"
	" DROP COLUMN operation",
	"ALTER TABLE memd_sessions DROP KEY memd_sessions_by_updated, DROP COLUMN message_count",
	"DELETE FROM memd_schema WHERE version > 2",
	NULL,
};

/* The statements that take a version 2 database back to version 1, as a
 * memd before lanes left it (the reverse of the plugin's step 2). */
static const char *const DOWNGRADE_TO_1[] = {
	"DROP TABLE memd_lanes",
	"DROP TABLE memd_inbox",
	"ALTER TABLE memd_sessions DROP KEY memd_sessions_by_platform,"
	" DROP KEY memd_sessions_by_lane, DROP KEY memd_sessions_by_ended,"
	" DROP COLUMN lane_key, DROP COLUMN origin, DROP COLUMN origin_platform,"
	" DROP COLUMN previous_session, DROP COLUMN start_reason, DROP COLUMN end_reason,"
	" DROP COLUMN ended_us, DROP COLUMN input_tokens, DROP COLUMN output_tokens,"
	" DROP COLUMN cache_read_tokens, DROP COLUMN cache_write_tokens,"
	" DROP COLUMN cost_micro_usd, DROP COLUMN last_prompt_tokens",
	"DELETE FROM memd_schema WHERE version > 1",
	NULL,
};

/* The steps that take a database at the plugin's version back to version
 * `to` (DOWNGRADE_TO_<n> takes n + 1 back to n). */
static const char *const *const DOWNGRADES[] = { NULL, DOWNGRADE_TO_1, DOWNGRADE_TO_2,
						 DOWNGRADE_TO_3, DOWNGRADE_TO_4, DOWNGRADE_TO_5 };
#define DOWNGRADE_LATEST ((int)(sizeof(DOWNGRADES) / sizeof(DOWNGRADES[0])))

/* Take m's database from the plugin's version back to version to. */
static void downgrade_to(MYSQL *m, int to)
{
	for (int v = DOWNGRADE_LATEST - 1; v >= to; v--)
		for (size_t i = 0; DOWNGRADES[v][i]; i++)
			raw_sql(m, DOWNGRADES[v][i]);
}

typedef struct kept_session {
	memd_session s;
	char lane_key[MEMD_ID_MAX + 1];
	int has_lane_key;
	int n;
} kept_session;

static int32_t keep_session(void *ud, const memd_session *s)
{
	kept_session *k = ud;
	k->s = *s;
	k->has_lane_key = s->lane_key != NULL;
	snprintf(k->lane_key, sizeof(k->lane_key), "%s", s->lane_key ? s->lane_key : "");
	k->s.app = k->s.user = k->s.id = k->s.title = k->s.metadata_json = NULL;
	k->s.lane_key = k->s.origin_json = k->s.origin_platform = k->s.previous_session = NULL;
	k->s.start_reason = k->s.end_reason = NULL;
	k->n++;
	return 0;
}

typedef struct kept_lane {
	memd_lane l;
	int n;
} kept_lane;

static int32_t keep_lane(void *ud, const memd_lane *l)
{
	kept_lane *k = ud;
	k->l = *l;
	k->l.app = k->l.user = k->l.key = k->l.session = k->l.origin_json = NULL;
	k->l.resume_reason = k->l.reset_reason = k->l.previous_session = k->l.turn_id = NULL;
	k->n++;
	return 0;
}

static int32_t get_session(inst *in, const char *id, kept_session *k)
{
	memd_call call = { .struct_size = sizeof(call) };
	memd_scope sc = { .struct_size = sizeof(sc), .app = "a", .user = "u", .session = id };
	memd_session_sink sink = { .struct_size = sizeof(sink), .userdata = k,
				   .session = keep_session };
	memset(k, 0, sizeof(*k));
	return in->ops->session_get(in->h, &call, &sc, &sink, &in->err);
}

/* A lane (a, u, key) on session, with turn (NULL = none); the caller
 * fills in flags and the rest. */
static memd_lane lane_of(const char *key, const char *session, const char *turn)
{
	return (memd_lane){ .struct_size = sizeof(memd_lane), .app = "a", .user = "u",
			    .key = key, .session = session, .updated_us = T0,
			    .turn_id = turn, .turn_started_us = turn ? T0 : 0,
			    .turn_lease_until_us = turn ? T0 + LEASE_US : 0 };
}

static int32_t write_lane(inst *in, memd_error *err, const memd_lane *l, uint32_t flags,
			  int64_t expected, const memd_session *create, const memd_usage *u,
			  kept_lane *out)
{
	memd_call call = { .struct_size = sizeof(call) };
	kept_lane ignored = { 0 };
	memd_lane_sink sink = { .struct_size = sizeof(sink), .userdata = out ? out : &ignored,
				.lane = keep_lane };
	memd_lane_write w = { .struct_size = sizeof(w), .flags = flags,
			      .expected_version = expected, .lane = l, .create_session = create,
			      .usage = u, .now_us = T0 };
	return in->ops->lane_write(in->h, &call, &w, &sink, err);
}

Test(mysql, schema_1_database_migrates_to_lanes)
{
	char yaml[TEXT_MAX];
	memd_scope sc = { .struct_size = sizeof(sc), .app = "a", .user = "u", .session = "old" };
	memd_call call = { .struct_size = sizeof(call) };
	memd_usage u = { .struct_size = sizeof(u), .input_tokens = 7, .last_prompt_tokens = 5 };
	memd_append ap = { .struct_size = sizeof(ap), .state_delta_json = "{\"k\":1}",
			   .now_us = T0, .usage = &u };
	memd_append_result res = { .struct_size = sizeof(res) };
	memd_lane l = lane_of("telegram:dm:1", "old", NULL);
	kept_session k;
	kept_lane kl = { 0 };
	inst in;
	MYSQL *m;
	int32_t r;

	/* A database of schema version 1 with a session in it. */
	yaml_for(yaml, sizeof(yaml), NULL);
	r = open_yaml(&in, yaml);
	cr_assert_eq(r, 0, "%s", in.err.msg);
	cr_assert_eq(create_session(&in, "old"), 0, "%s", in.err.msg);
	close_inst(&in);
	m = raw_connect(dbname);
	downgrade_to(m, 1);
	mysql_close(m);

	r = open_yaml(&in, yaml);
	cr_assert_eq(r, 0, "opening a version 1 database: %s", in.err.msg);
	cr_assert(log_has(&in, "schema migrated to version 2"), "no migration was logged");
	cr_assert(log_has(&in, "schema migrated to version 3"), "no migration was logged");
	cr_assert(log_has(&in, "schema migrated to version 4"), "no migration was logged");
	cr_assert(log_has(&in, "schema migrated to version 5"), "no migration was logged");
	cr_assert(log_has(&in, "schema migrated to version 6"), "no migration was logged");
	cr_assert(log_has(&in, "(schema 6,"), "the store does not say it is at version 6");
	/* The old session reads as open, made by no lane, with no usage. */
	r = get_session(&in, "old", &k);
	cr_assert_eq(r, 0, "%s", in.err.msg);
	cr_assert_geq(k.s.struct_size, offsetof(memd_session, last_prompt_tokens) + sizeof(int64_t));
	cr_assert_eq(k.s.ended_us, 0);
	cr_assert_eq(k.has_lane_key, 0);
	cr_assert_eq(k.s.input_tokens + k.s.last_prompt_tokens, 0);
	/* Lanes work on it, and an append's usage reaches the session and
	 * the lane whose session it is. */
	cr_assert_not_null(in.ops->lane_write);
	r = write_lane(&in, &in.err, &l, MEMD_LW_CREATE, 0, NULL, NULL, &kl);
	cr_assert_eq(r, 0, "lane create: %s", in.err.msg);
	cr_assert_eq(kl.l.version, 1);
	r = in.ops->append(in.h, &call, &sc, &ap, &res, &in.err);
	cr_assert_eq(r, 0, "append with usage: %s", in.err.msg);
	r = get_session(&in, "old", &k);
	cr_assert_eq(r, 0, "%s", in.err.msg);
	cr_assert_eq(k.s.input_tokens, 7);
	cr_assert_eq(k.s.last_prompt_tokens, 5);
	{
		memd_scope us = { .struct_size = sizeof(us), .app = "a", .user = "u" };
		memd_lane_sink sink = { .struct_size = sizeof(sink), .userdata = &kl,
					.lane = keep_lane };
		r = in.ops->lane_get(in.h, &call, &us, "telegram:dm:1", &sink, NULL, &in.err);
		cr_assert_eq(r, 0, "%s", in.err.msg);
		cr_assert_eq(kl.l.input_tokens, 7, "the lane's sum: %lld",
			     (long long)kl.l.input_tokens);
		cr_assert_eq(kl.l.version, 1, "append usage moved the lane's version");
	}
	close_inst(&in);

	/* A step cut off before it was recorded runs again over what it
	 * already did. */
	m = raw_connect(dbname);
	raw_sql(m, "DELETE FROM memd_schema WHERE version > 1");
	mysql_close(m);
	r = open_yaml(&in, yaml);
	cr_assert_eq(r, 0, "the step again over its own work: %s", in.err.msg);
	cr_assert(log_has(&in, "schema migrated to version 2"));
	r = get_session(&in, "old", &k);
	cr_assert_eq(r, 0, "%s", in.err.msg);
	cr_assert_eq(k.s.input_tokens, 7, "the second run lost data");
	close_inst(&in);
}

/* ---- transcripts: the schema migration ---------------------------------------- */

#define KEPT_EVENTS_MAX 8

typedef struct kept_events {
	int n;
	int64_t seq[KEPT_EVENTS_MAX];
	int64_t hidden_us[KEPT_EVENTS_MAX];
} kept_events;

static int32_t keep_seq_mark(void *ud, const memd_event *e)
{
	kept_events *k = ud;
	cr_assert_lt(k->n, KEPT_EVENTS_MAX);
	k->seq[k->n] = e->seq;
	k->hidden_us[k->n] = e->hidden_us;
	k->n++;
	return 0;
}

static int32_t load_events(inst *in, const char *id, uint32_t flags, kept_events *k)
{
	memd_call call = { .struct_size = sizeof(call) };
	memd_scope sc = { .struct_size = sizeof(sc), .app = "a", .user = "u", .session = id };
	memd_event_query q = { .struct_size = sizeof(q), .flags = flags };
	memd_event_sink sink = { .struct_size = sizeof(sink), .userdata = k, .event = keep_seq_mark };
	memset(k, 0, sizeof(*k));
	return in->ops->events_load(in->h, &call, &sc, &q, &sink, &in->err);
}

static int32_t keep_operation(void *ud, const memd_operation *o)
{
	memd_operation *out = ud;
	*out = *o;
	out->id = out->undo_of = out->undone_by = NULL;
	return 0;
}

typedef struct kept_change {
	int n;
	char old_json[TEXT_MAX];
} kept_change;

static int32_t keep_change(void *ud, const memd_state_change *c)
{
	kept_change *k = ud;
	snprintf(k->old_json, sizeof(k->old_json), "%s", c->old_json ? c->old_json : "(absent)");
	k->n++;
	return 0;
}

static memd_event event_of(const char *id, const char *role)
{
	return (memd_event){ .struct_size = sizeof(memd_event), .id = id, .role = role,
			     .author = "t", .content_json = "{\"parts\":[]}", .text = id,
			     .timestamp_us = T0, .covers_seq = strcmp(role, "summary") ? 0 : 2 };
}

Test(mysql, schema_2_database_migrates_to_transcripts)
{
	char yaml[TEXT_MAX];
	memd_scope sc = { .struct_size = sizeof(sc), .app = "a", .user = "u", .session = "old" };
	memd_call call = { .struct_size = sizeof(call) };
	memd_event e1 = event_of("e1", "user"), e2 = event_of("e2", "assistant"),
		   e3 = event_of("e3", "summary"), e4 = event_of("e4", "user");
	const memd_event *batch[] = { &e1, &e2, &e3 }, *after[] = { &e4 };
	int64_t seqs[3];
	memd_append ap = { .struct_size = sizeof(ap), .events = batch, .n_events = 3,
			   .state_delta_json = "{\"k\":1}", .now_us = T0 };
	memd_transcript_op op = { .struct_size = sizeof(op), .kind = MEMD_OP_REWIND, .id = "op1",
				  .hide_from_seq = 2 };
	memd_append_result res = { .struct_size = sizeof(res), .seqs = seqs };
	memd_operation o = { 0 };
	memd_operation_sink osink = { .struct_size = sizeof(osink), .userdata = &o,
				      .operation = keep_operation };
	memd_state_history_query hq = { .struct_size = sizeof(hq) };
	kept_change ch = { 0 };
	memd_state_change_sink hsink = { .struct_size = sizeof(hsink), .userdata = &ch,
					 .change = keep_change };
	kept_session k;
	kept_events ev;
	inst in;
	MYSQL *m;
	int32_t r;

	/* A database of schema version 2 with a session of three events
	 * (one a summary) and a state key in it. */
	yaml_for(yaml, sizeof(yaml), NULL);
	r = open_yaml(&in, yaml);
	cr_assert_eq(r, 0, "%s", in.err.msg);
	cr_assert_eq(create_session(&in, "old"), 0, "%s", in.err.msg);
	r = in.ops->append(in.h, &call, &sc, &ap, &res, &in.err);
	cr_assert_eq(r, 0, "%s", in.err.msg);
	close_inst(&in);
	m = raw_connect(dbname);
	downgrade_to(m, 2);
	mysql_close(m);

	r = open_yaml(&in, yaml);
	cr_assert_eq(r, 0, "opening a version 2 database: %s", in.err.msg);
	cr_assert(log_has(&in, "schema migrated to version 3"), "no migration was logged");
	cr_assert(log_has(&in, "schema migrated to version 4"), "no migration was logged");
	cr_assert(log_has(&in, "schema migrated to version 5"), "no migration was logged");
	cr_assert(log_has(&in, "schema migrated to version 6"), "no migration was logged");
	cr_assert(log_has(&in, "(schema 6,"), "the store does not say it is at version 6");
	/* The old events are visible, the messages counted. */
	r = get_session(&in, "old", &k);
	cr_assert_eq(r, 0, "%s", in.err.msg);
	cr_assert_eq(k.s.message_count, 2, "message_count %lld", (long long)k.s.message_count);
	cr_assert_eq(k.s.summary_seq, 3);
	r = load_events(&in, "old", 0, &ev);
	cr_assert_eq(r, 0, "%s", in.err.msg);
	cr_assert_eq(ev.n, 3);
	for (int i = 0; i < ev.n; i++)
		cr_assert_eq(ev.hidden_us[i], 0, "event %d reads as hidden", i);

	/* A rewind works on them: it hides seqs 2 and 3 and appends e4. */
	ap.events = after;
	ap.n_events = 1;
	ap.state_delta_json = "{\"k\":2}";
	ap.now_us = T0 + 1;
	ap.op = &op;
	r = in.ops->append(in.h, &call, &sc, &ap, &res, &in.err);
	cr_assert_eq(r, 0, "rewind: %s", in.err.msg);
	cr_assert_eq(res.hidden_count, 2);
	cr_assert_eq(seqs[0], 4, "seq %lld", (long long)seqs[0]);
	r = get_session(&in, "old", &k);
	cr_assert_eq(r, 0, "%s", in.err.msg);
	cr_assert_eq(k.s.message_count, 2, "message_count %lld", (long long)k.s.message_count);
	cr_assert_eq(k.s.summary_seq, 0, "the hidden summary is still the session's");
	r = load_events(&in, "old", 0, &ev);
	cr_assert_eq(r, 0, "%s", in.err.msg);
	cr_assert(ev.n == 2 && ev.seq[0] == 1 && ev.seq[1] == 4, "visible: %d events", ev.n);
	r = load_events(&in, "old", MEMD_EVQ_INCLUDE_HIDDEN, &ev);
	cr_assert_eq(r, 0, "%s", in.err.msg);
	cr_assert_eq(ev.n, 4);
	cr_assert_eq(ev.hidden_us[1], T0 + 1);
	r = in.ops->operation_get(in.h, &call, &sc, "op1", &osink, &in.err);
	cr_assert_eq(r, 0, "%s", in.err.msg);
	cr_assert_eq(o.hidden_count, 2);
	cr_assert_eq(o.first_seq, 4);
	/* The state change made since the migration is recorded (the one
	 * before it could not be). */
	r = in.ops->state_history(in.h, &call, &sc, &hq, &hsink, &in.err);
	cr_assert_eq(r, 0, "%s", in.err.msg);
	cr_assert_eq(ch.n, 1);
	cr_assert_str_eq(ch.old_json, "1");
	close_inst(&in);

	/* A step cut off before it was recorded runs again over what it
	 * already did, and counts the messages again right. */
	m = raw_connect(dbname);
	raw_sql(m, "DELETE FROM memd_schema WHERE version > 2");
	mysql_close(m);
	r = open_yaml(&in, yaml);
	cr_assert_eq(r, 0, "the step again over its own work: %s", in.err.msg);
	cr_assert(log_has(&in, "schema migrated to version 3"));
	r = get_session(&in, "old", &k);
	cr_assert_eq(r, 0, "%s", in.err.msg);
	cr_assert_eq(k.s.message_count, 2, "message_count %lld", (long long)k.s.message_count);
	r = load_events(&in, "old", 0, &ev);
	cr_assert_eq(r, 0, "%s", in.err.msg);
	cr_assert_eq(ev.n, 2, "the second run showed hidden events again");
	close_inst(&in);
}

/* ---- memories: the schema migration ------------------------------------------ */

#define KEPT_RECORDS_MAX 8
#define PENDING_BEFORE_US (T0 + 3600LL * US_PER_SEC)

typedef struct kept_memory {
	int n;
	int64_t version, position;
} kept_memory;

static int32_t keep_memory(void *ud, const memd_memory *m)
{
	kept_memory *k = ud;
	k->version = m->version;
	k->position = m->position;
	k->n++;
	return 0;
}

typedef struct kept_feed {
	int n;
	uint32_t kind[KEPT_RECORDS_MAX];
	int64_t position[KEPT_RECORDS_MAX];
	char last_name[TEXT_MAX]; /* the last record's session, or memory id */
} kept_feed;

static int32_t keep_record(void *ud, const memd_feed_record *r)
{
	kept_feed *k = ud;
	const char *name = r->memory ? r->memory->id : r->session;
	cr_assert_lt(k->n, KEPT_RECORDS_MAX);
	k->kind[k->n] = r->kind;
	k->position[k->n] = r->position;
	snprintf(k->last_name, sizeof(k->last_name), "%s", name ? name : "(none)");
	k->n++;
	return 0;
}

static int32_t count_session(void *ud, const memd_session *s)
{
	(void)s;
	(*(int *)ud)++;
	return 0;
}

static int count_pending(inst *in)
{
	memd_call call = { .struct_size = sizeof(call) };
	memd_pending_query q = { .struct_size = sizeof(q), .limit = 10,
				 .updated_before_us = PENDING_BEFORE_US };
	int n = 0;
	memd_session_sink sink = { .struct_size = sizeof(sink), .userdata = &n,
				   .session = count_session };
	int32_t r = in->ops->session_list_pending(in->h, &call, &q, &sink, &in->err);
	cr_assert_eq(r, 0, "session_list_pending: %s", in->err.msg);
	return n;
}

Test(mysql, schema_3_database_migrates_to_memories)
{
	char yaml[TEXT_MAX];
	memd_scope sc = { .struct_size = sizeof(sc), .app = "a", .user = "u", .session = "old" };
	memd_scope gone = { .struct_size = sizeof(gone), .app = "a", .user = "u", .session = "gone" };
	memd_call call = { .struct_size = sizeof(call) };
	memd_event e1 = event_of("e1", "user"), e2 = event_of("e2", "assistant"),
		   e3 = event_of("e3", "user");
	const memd_event *batch[] = { &e1, &e2, &e3 };
	int64_t seqs[3];
	memd_append ap = { .struct_size = sizeof(ap), .events = batch, .n_events = 3,
			   .now_us = T0 };
	memd_append_result res = { .struct_size = sizeof(res), .seqs = seqs };
	memd_memory mem = { .struct_size = sizeof(mem), .app = "a", .user = "u", .id = "m1",
			    .text = "prefers tea", .kind = "preference",
			    .topics_json = "[\"drinks\"]", .entities_json = "[]",
			    .source_session = "old" };
	memd_memory_write w = { .struct_size = sizeof(w), .op = MEMD_MEM_ADD, .memory = &mem,
				.actor = "extractor" };
	const memd_memory_write *ws[] = { &w };
	memd_memory_commit mc = { .struct_size = sizeof(mc), .n_writes = 1, .writes = ws,
				  .cursor_session = "old", .expected_cursor_seq = 0,
				  .new_cursor_seq = 3, .now_us = T0 + 10 };
	kept_memory km = { 0 };
	memd_memory_sink msink = { .struct_size = sizeof(msink), .userdata = &km,
				   .memory = keep_memory };
	kept_feed f = { 0 };
	memd_feed_sink fsink = { .struct_size = sizeof(fsink), .userdata = &f,
				 .record = keep_record };
	kept_session k;
	inst in;
	MYSQL *m;
	int32_t r;

	/* A database of schema version 3 with a session of three events and
	 * the DELETE record of another session in its feed. */
	yaml_for(yaml, sizeof(yaml), NULL);
	r = open_yaml(&in, yaml);
	cr_assert_eq(r, 0, "%s", in.err.msg);
	cr_assert_eq(create_session(&in, "old"), 0, "%s", in.err.msg);
	cr_assert_eq(create_session(&in, "gone"), 0, "%s", in.err.msg);
	r = in.ops->append(in.h, &call, &sc, &ap, &res, &in.err);
	cr_assert_eq(r, 0, "%s", in.err.msg);
	r = in.ops->session_delete(in.h, &call, &gone, &in.err);
	cr_assert_eq(r, 0, "%s", in.err.msg);
	close_inst(&in);
	m = raw_connect(dbname);
	downgrade_to(m, 3);
	mysql_close(m);

	r = open_yaml(&in, yaml);
	cr_assert_eq(r, 0, "opening a version 3 database: %s", in.err.msg);
	cr_assert(log_has(&in, "schema migrated to version 4"), "no migration was logged");
	cr_assert(log_has(&in, "schema migrated to version 5"), "no migration was logged");
	cr_assert(log_has(&in, "schema migrated to version 6"), "no migration was logged");
	cr_assert(log_has(&in, "(schema 6,"), "the store does not say it is at version 6");
	/* The old session has read nothing yet: memory_seq 0, pending. */
	r = get_session(&in, "old", &k);
	cr_assert_eq(r, 0, "%s", in.err.msg);
	cr_assert_geq(k.s.struct_size, offsetof(memd_session, memory_seq) + sizeof(int64_t));
	cr_assert_eq(k.s.memory_seq, 0, "memory_seq %lld", (long long)k.s.memory_seq);
	cr_assert_eq(k.s.last_seq, 3);
	cr_assert_eq(count_pending(&in), 1, "the old session is not pending");

	/* A memory commit with the cursor works on it. */
	cr_assert_not_null(in.ops->memory_commit);
	r = in.ops->memory_commit(in.h, &call, &sc, &mc, &msink, &in.err);
	cr_assert_eq(r, 0, "memory_commit: %s", in.err.msg);
	cr_assert_eq(km.n, 1);
	cr_assert_eq(km.version, 1);
	r = get_session(&in, "old", &k);
	cr_assert_eq(r, 0, "%s", in.err.msg);
	cr_assert_eq(k.s.memory_seq, 3);
	cr_assert_eq(count_pending(&in), 0, "a session read to its end is pending");
	/* The old feed (events, the DELETE record) reads as before, the new
	 * MEMORY record after it. */
	r = in.ops->feed_read(in.h, &call, 0, 0, &fsink, &in.err);
	cr_assert_eq(r, 0, "feed_read: %s", in.err.msg);
	cr_assert_eq(f.n, 5, "%d feed records", f.n);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(f.kind[i], MEMD_FEED_EVENT, "record %d is of kind %u", i, f.kind[i]);
	cr_assert_eq(f.kind[3], MEMD_FEED_DELETE_SESSION);
	cr_assert_eq(f.kind[4], MEMD_FEED_MEMORY);
	cr_assert_eq(f.position[4], km.position);
	cr_assert_str_eq(f.last_name, "m1");
	for (int i = 1; i < f.n; i++)
		cr_assert_gt(f.position[i], f.position[i - 1]);
	close_inst(&in);

	/* A step cut off before it was recorded runs again over what it
	 * already did and keeps the memory and the cursor. */
	m = raw_connect(dbname);
	raw_sql(m, "DELETE FROM memd_schema WHERE version > 3");
	mysql_close(m);
	r = open_yaml(&in, yaml);
	cr_assert_eq(r, 0, "the step again over its own work: %s", in.err.msg);
	cr_assert(log_has(&in, "schema migrated to version 4"));
	km.n = 0;
	r = in.ops->memory_get(in.h, &call, &sc, "m1", T0 + 10, &msink, &in.err);
	cr_assert_eq(r, 0, "the second run lost the memory: %s", in.err.msg);
	cr_assert_eq(km.n, 1);
	r = get_session(&in, "old", &k);
	cr_assert_eq(r, 0, "%s", in.err.msg);
	cr_assert_eq(k.s.memory_seq, 3, "the second run lost the cursor");
	cr_assert_eq(count_pending(&in), 0);
	close_inst(&in);
}

/* ---- checkpoints and tasks: the schema migration ------------------------------ */

#define CKPT_TTL_US (3600LL * US_PER_SEC)

typedef struct kept_checkpoints {
	int n, n_writes;
	char id[TEXT_MAX];
	char payload[TEXT_MAX];
	uint32_t run_state;
	int64_t idx;
} kept_checkpoints;

typedef struct kept_tasks {
	int n;
	int64_t version;
} kept_tasks;

static int32_t keep_task(void *ud, const memd_task *t)
{
	kept_tasks *k = ud;
	k->version = t->version;
	k->n++;
	return 0;
}

static int32_t keep_checkpoint(void *ud, const memd_checkpoint *c)
{
	kept_checkpoints *k = ud;
	snprintf(k->id, sizeof(k->id), "%s", c->id);
	snprintf(k->payload, sizeof(k->payload), "%.*s", (int)c->payload_size,
		 (const char *)c->payload);
	k->run_state = c->run_state;
	k->n++;
	return 0;
}

static int32_t keep_checkpoint_write(void *ud, const memd_checkpoint_write *w)
{
	kept_checkpoints *k = ud;
	k->idx = w->idx;
	k->n_writes++;
	return 0;
}

/* A root checkpoint of (a, u, session) with id and a payload naming it. */
static int32_t put_checkpoint(inst *in, memd_error *err, const char *session, const char *id,
			      int create, int *ret_created)
{
	memd_call call = { .struct_size = sizeof(call) };
	memd_checkpoint c = { .struct_size = sizeof(c), .app = "a", .user = "u",
			      .session = session, .ns = "", .id = id, .type = "json",
			      .payload = id, .payload_size = strlen(id), .metadata_json = "{}",
			      .expires_us = T0 + CKPT_TTL_US };
	return in->ops->checkpoint_put(in->h, &call, &c, create, T0, ret_created, err);
}

static int32_t get_latest(inst *in, const char *session, kept_checkpoints *k)
{
	memd_call call = { .struct_size = sizeof(call) };
	memd_scope sc = { .struct_size = sizeof(sc), .app = "a", .user = "u", .session = session };
	memd_checkpoint_sink sink = { .struct_size = sizeof(sink), .userdata = k,
				      .checkpoint = keep_checkpoint,
				      .write = keep_checkpoint_write };
	memset(k, 0, sizeof(*k));
	return in->ops->checkpoint_get(in->h, &call, &sc, "", NULL, T0, &sink, &in->err);
}

/* A task of app a, user u, in context ctx, at state. */
static int32_t put_task(inst *in, memd_error *err, const char *id, const char *ctx,
			const char *state, uint32_t flags, int64_t expected, int64_t *ret_version)
{
	memd_call call = { .struct_size = sizeof(call) };
	memd_task t = { .struct_size = sizeof(t), .app = "a", .id = id, .context_id = ctx,
			.user = "u", .state = state, .task_json = "{\"kind\":\"task\"}" };
	kept_tasks k = { 0 };
	memd_task_sink sink = { .struct_size = sizeof(sink), .userdata = &k, .task = keep_task };
	int32_t r = in->ops->task_put(in->h, &call, &t, flags, expected, T0, &sink, err);
	if (r == 0 && ret_version)
		*ret_version = k.version;
	return r;
}

Test(mysql, schema_4_database_migrates_to_checkpoints)
{
	char yaml[TEXT_MAX];
	memd_scope sc = { .struct_size = sizeof(sc), .app = "a", .user = "u", .session = "old" };
	memd_call call = { .struct_size = sizeof(call) };
	memd_checkpoint_write w = { .struct_size = sizeof(w), .task_id = "t", .idx = -1,
				    .channel = "__interrupt__", .type = "json", .value = "v",
				    .value_size = 1 };
	memd_checkpoint_writes ws = { .struct_size = sizeof(ws), .run_state = MEMD_RUN_INTERRUPTED,
				      .ns = "", .checkpoint_id = "0002", .writes = &w,
				      .n_writes = 1, .now_us = T0 };
	kept_checkpoints k;
	int64_t version = 0;
	int created = -1;
	inst in;
	MYSQL *m;
	int32_t r;

	/* A database of schema version 4 with a session in it. */
	yaml_for(yaml, sizeof(yaml), NULL);
	r = open_yaml(&in, yaml);
	cr_assert_eq(r, 0, "%s", in.err.msg);
	cr_assert_eq(create_session(&in, "old"), 0, "%s", in.err.msg);
	close_inst(&in);
	m = raw_connect(dbname);
	downgrade_to(m, 4);
	mysql_close(m);

	r = open_yaml(&in, yaml);
	cr_assert_eq(r, 0, "opening a version 4 database: %s", in.err.msg);
	cr_assert(log_has(&in, "schema migrated to version 5"), "no migration was logged");
	cr_assert(log_has(&in, "schema migrated to version 6"), "no migration was logged");
	cr_assert(log_has(&in, "(schema 6,"), "the store does not say it is at version 6");
	/* Checkpoints of the old session, the head the greater id, writes
	 * that mark the run interrupted. */
	cr_assert_not_null(in.ops->checkpoint_put);
	r = put_checkpoint(&in, &in.err, "old", "0002", 0, &created);
	cr_assert_eq(r, 0, "checkpoint_put: %s", in.err.msg);
	cr_assert_eq(created, 0, "an existing session was created");
	r = put_checkpoint(&in, &in.err, "old", "0001", 0, NULL);
	cr_assert_eq(r, 0, "checkpoint_put: %s", in.err.msg);
	r = in.ops->checkpoint_put_writes(in.h, &call, &sc, &ws, &in.err);
	cr_assert_eq(r, 0, "checkpoint_put_writes: %s", in.err.msg);
	r = get_latest(&in, "old", &k);
	cr_assert_eq(r, 0, "checkpoint_get: %s", in.err.msg);
	cr_assert_str_eq(k.id, "0002");
	cr_assert_str_eq(k.payload, "0002");
	cr_assert_eq(k.run_state, MEMD_RUN_INTERRUPTED);
	cr_assert_eq(k.n_writes, 1);
	cr_assert_eq(k.idx, -1);
	/* A new session is made by its first checkpoint; tasks of both. */
	r = put_checkpoint(&in, &in.err, "new", "0001", 1, &created);
	cr_assert_eq(r, 0, "checkpoint_put creating its session: %s", in.err.msg);
	cr_assert_eq(created, 1, "the session was not created");
	r = put_task(&in, &in.err, "task-old", "old", "working", MEMD_TASK_CREATE, 0, &version);
	cr_assert_eq(r, 0, "task_put: %s", in.err.msg);
	cr_assert_eq(version, 1);
	r = put_task(&in, &in.err, "task-new", "new", "working", MEMD_TASK_CREATE, 0, NULL);
	cr_assert_eq(r, 0, "task_put: %s", in.err.msg);
	/* Deleting the old session takes its checkpoints and its task. */
	r = in.ops->session_delete(in.h, &call, &sc, &in.err);
	cr_assert_eq(r, 0, "session_delete: %s", in.err.msg);
	r = get_latest(&in, "old", &k);
	cr_assert_eq(r, MEMD_ENOTFOUND, "a deleted session's checkpoint is there: %d", r);
	/* (its task gone, creating it again works) */
	r = put_task(&in, &in.err, "task-old", "old", "working", MEMD_TASK_CREATE, 0, NULL);
	cr_assert_eq(r, 0, "the deleted session's task is still there: %s", in.err.msg);
	close_inst(&in);

	/* A step cut off before it was recorded runs again over what it
	 * already did and keeps the checkpoints and the tasks. */
	m = raw_connect(dbname);
	raw_sql(m, "DELETE FROM memd_schema WHERE version > 4");
	mysql_close(m);
	r = open_yaml(&in, yaml);
	cr_assert_eq(r, 0, "the step again over its own work: %s", in.err.msg);
	cr_assert(log_has(&in, "schema migrated to version 5"));
	r = get_latest(&in, "new", &k);
	cr_assert_eq(r, 0, "the second run lost the checkpoint: %s", in.err.msg);
	cr_assert_str_eq(k.id, "0001");
	r = put_task(&in, &in.err, "task-new", "new", "working", 0, 1, &version);
	cr_assert_eq(r, 0, "the second run lost the task: %s", in.err.msg);
	cr_assert_eq(version, 2);
	close_inst(&in);
}

/* ---- task paths of checkpoint writes: the schema migration -------------------- */

#define TASK_PATH_MAX 1024 /* the plugin's MY_TASK_PATH_MAX */
#define N_KEPT_WRITES 8
#define KEPT_WRITE_MAX (TASK_PATH_MAX + TEXT_MAX) /* a path and what follows it */
#define PATH_A "~__pregel_pull, a"
#define PATH_B "~__pregel_pull, b"

/* The writes delivered, in order, each as "<task path>|<task id>|<idx>". */
typedef struct kept_writes {
	int n_checkpoints, n;
	char w[N_KEPT_WRITES][KEPT_WRITE_MAX];
} kept_writes;

static int32_t count_checkpoint(void *ud, const memd_checkpoint *c)
{
	(void)c;
	((kept_writes *)ud)->n_checkpoints++;
	return 0;
}

static int32_t keep_task_write(void *ud, const memd_checkpoint_write *w, const char *task_path)
{
	kept_writes *k = ud;
	cr_assert_not_null(task_path, "a task path is never NULL");
	cr_assert_lt(k->n, N_KEPT_WRITES);
	snprintf(k->w[k->n++], KEPT_WRITE_MAX, "%s|%s|%lld", task_path, w->task_id, (long long)w->idx);
	return 0;
}

/* The writes of (a, u, old)'s checkpoint "0001" by get; and by list,
 * which must deliver the same. */
static void read_writes(inst *in, kept_writes *k)
{
	memd_call call = { .struct_size = sizeof(call) };
	memd_scope sc = { .struct_size = sizeof(sc), .app = "a", .user = "u", .session = "old" };
	memd_checkpoint_sink sink = { .struct_size = sizeof(sink), .userdata = k,
				      .checkpoint = count_checkpoint,
				      .task_write = keep_task_write };
	memd_checkpoint_query q = { .struct_size = sizeof(q), .limit = 1, .session = "old",
				    .now_us = T0 };
	kept_writes l = { 0 };
	int32_t r;

	memset(k, 0, sizeof(*k));
	r = in->ops->checkpoint_get(in->h, &call, &sc, "", "0001", T0, &sink, &in->err);
	cr_assert_eq(r, 0, "checkpoint_get: %s", in->err.msg);
	cr_assert_eq(k->n_checkpoints, 1);
	sink.userdata = &l;
	r = in->ops->checkpoint_list(in->h, &call, &sc, &q, &sink, &in->err);
	cr_assert_eq(r, 0, "checkpoint_list: %s", in->err.msg);
	cr_assert_eq(l.n_checkpoints, 1);
	cr_assert_eq(l.n, k->n, "list: %d writes, get: %d", l.n, k->n);
	for (int i = 0; i < l.n; i++)
		cr_assert_str_eq(l.w[i], k->w[i], "write %d", i);
}

#define WRITE(task, i, fl)                                                                   \
	{ .struct_size = sizeof(memd_checkpoint_write), .flags = (fl), .task_id = (task),    \
	  .idx = (i), .channel = "messages", .type = "json", .value = "[]", .value_size = 2 }

static int32_t put_writes(inst *in, const memd_checkpoint_write *w, const char *const *paths,
			  uint32_t n)
{
	memd_call call = { .struct_size = sizeof(call) };
	memd_scope sc = { .struct_size = sizeof(sc), .app = "a", .user = "u", .session = "old" };
	memd_checkpoint_writes ws = { .struct_size = sizeof(ws), .ns = "",
				      .checkpoint_id = "0001", .writes = w, .n_writes = n,
				      .now_us = T0, .task_paths = paths };
	return in->ops->checkpoint_put_writes(in->h, &call, &sc, &ws, &in->err);
}

Test(mysql, schema_5_database_migrates_to_task_paths)
{
	char yaml[TEXT_MAX];
	char long_path[TASK_PATH_MAX + 2];
	/* Before the migration: task "b" and task "a", no paths. */
	const memd_checkpoint_write old[3] = { WRITE("b", 0, 0), WRITE("a", 1, 0),
					       WRITE("a", -1, 0) };
	/* After it: task "c" with PATH_A, task "b"'s write again with PATH_B
	 * (replaced: it moves behind c's), task "a"'s with PATH_A (kept: it
	 * stays at ""). */
	const memd_checkpoint_write later[3] = { WRITE("c", 0, 0),
						 WRITE("b", 0, MEMD_CKW_REPLACE),
						 WRITE("a", 1, 0) };
	const char *const paths[3] = { PATH_A, PATH_B, PATH_A };
	const memd_checkpoint_write one[1] = { WRITE("d", 0, 0) };
	const char *one_path[1] = { long_path };
	kept_writes k;
	inst in;
	MYSQL *m;
	int32_t r;

	/* A database of schema version 5 with a checkpoint and its writes. */
	yaml_for(yaml, sizeof(yaml), NULL);
	r = open_yaml(&in, yaml);
	cr_assert_eq(r, 0, "%s", in.err.msg);
	cr_assert_eq(create_session(&in, "old"), 0, "%s", in.err.msg);
	r = put_checkpoint(&in, &in.err, "old", "0001", 0, NULL);
	cr_assert_eq(r, 0, "checkpoint_put: %s", in.err.msg);
	r = put_writes(&in, old, NULL, 3);
	cr_assert_eq(r, 0, "checkpoint_put_writes: %s", in.err.msg);
	close_inst(&in);
	m = raw_connect(dbname);
	downgrade_to(m, 5);
	mysql_close(m);

	r = open_yaml(&in, yaml);
	cr_assert_eq(r, 0, "opening a version 5 database: %s", in.err.msg);
	cr_assert(log_has(&in, "schema migrated to version 6"), "no migration was logged");
	cr_assert(log_has(&in, "(schema 6,"), "the store does not say it is at version 6");
	/* The old writes: path "", in (task_id, idx) order. */
	read_writes(&in, &k);
	cr_assert_eq(k.n, 3);
	cr_assert_str_eq(k.w[0], "|a|-1");
	cr_assert_str_eq(k.w[1], "|a|1");
	cr_assert_str_eq(k.w[2], "|b|0");
	/* Writes with paths, ordered by them; REPLACE takes the new path. */
	r = put_writes(&in, later, paths, 3);
	cr_assert_eq(r, 0, "checkpoint_put_writes: %s", in.err.msg);
	read_writes(&in, &k);
	cr_assert_eq(k.n, 4);
	cr_assert_str_eq(k.w[0], "|a|-1");
	cr_assert_str_eq(k.w[1], "|a|1", "a kept write took the new path");
	cr_assert_str_eq(k.w[2], PATH_A "|c|0");
	cr_assert_str_eq(k.w[3], PATH_B "|b|0", "a replaced write kept its old path");
	/* A path as wide as the column is kept whole; a wider one is refused
	 * and writes nothing. */
	memset(long_path, 'p', TASK_PATH_MAX + 1);
	long_path[TASK_PATH_MAX + 1] = '\0';
	r = put_writes(&in, one, one_path, 1);
	cr_assert_eq(r, MEMD_EINVAL, "a task path over %d bytes: %d", TASK_PATH_MAX, r);
	cr_assert(strstr(in.err.msg, "task path"), "%s", in.err.msg);
	long_path[TASK_PATH_MAX] = '\0';
	r = put_writes(&in, one, one_path, 1);
	cr_assert_eq(r, 0, "a task path of %d bytes: %s", TASK_PATH_MAX, in.err.msg);
	read_writes(&in, &k); /* "p..." sorts between "" and "~..." */
	cr_assert_eq(k.n, 5);
	cr_assert_str_eq(k.w[1], "|a|1");
	cr_assert_eq(strlen(k.w[2]), TASK_PATH_MAX + strlen("|d|0"), "%.64s", k.w[2]);
	cr_assert_str_eq(k.w[2] + TASK_PATH_MAX, "|d|0");
	cr_assert_str_eq(k.w[3], PATH_A "|c|0");
	close_inst(&in);

	/* A step cut off before it was recorded runs again over what it
	 * already did and keeps the paths. */
	m = raw_connect(dbname);
	raw_sql(m, "DELETE FROM memd_schema WHERE version > 5");
	mysql_close(m);
	r = open_yaml(&in, yaml);
	cr_assert_eq(r, 0, "the step again over its own work: %s", in.err.msg);
	cr_assert(log_has(&in, "schema migrated to version 6"));
	read_writes(&in, &k);
	cr_assert_eq(k.n, 5);
	cr_assert_str_eq(k.w[4], PATH_B "|b|0");
	close_inst(&in);
}

/* ---- racers ------------------------------------------------------------------ */

typedef struct race {
	inst *in;
	pthread_barrier_t start;
	int32_t rc[RACERS];
	memd_error err[RACERS];
	/* for the inbox takers */
	char taken[RACERS][INBOX_ITEMS][16];
	int n_taken[RACERS];
} race;

typedef struct racer {
	race *r;
	int i;
} racer;

static void run_racers(race *rc, void *(*fn)(void *))
{
	pthread_t t[RACERS];
	racer args[RACERS];

	cr_assert_eq(pthread_barrier_init(&rc->start, NULL, RACERS), 0);
	for (int i = 0; i < RACERS; i++) {
		args[i] = (racer){ .r = rc, .i = i };
		rc->err[i] = (memd_error){ .struct_size = sizeof(memd_error) };
		cr_assert_eq(pthread_create(&t[i], NULL, fn, &args[i]), 0);
	}
	for (int i = 0; i < RACERS; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&rc->start);
}

/* The outcome of the racers: exactly one 0, every other MEMD_ECONFLICT. */
static void assert_one_winner(const race *rc, const char *what)
{
	int won = 0;

	for (int i = 0; i < RACERS; i++) {
		cr_assert(rc->rc[i] == 0 || rc->rc[i] == MEMD_ECONFLICT, "%s: racer %d got %d (%s)",
			  what, i, rc->rc[i], rc->err[i].msg);
		won += rc->rc[i] == 0;
	}
	cr_assert_eq(won, 1, "%s: %d racers won", what, won);
}

static void open_racing(inst *in)
{
	char yaml[TEXT_MAX], extra[32];

	snprintf(extra, sizeof(extra), "pool: %d", RACERS);
	yaml_for(yaml, sizeof(yaml), extra);
	cr_assert_eq(open_yaml(in, yaml), 0, "%s", in->err.msg);
	cr_assert_not_null(in->ops->lane_write, "the store has no lanes");
}

static void *create_racer(void *arg)
{
	racer *a = arg;
	char id[16];
	memd_session s;
	memd_lane l;

	snprintf(id, sizeof(id), "s%d", a->i);
	s = (memd_session){ .struct_size = sizeof(s), .app = "a", .user = "u", .id = id,
			    .created_us = T0, .lane_key = "k" };
	l = lane_of("k", id, NULL);
	pthread_barrier_wait(&a->r->start);
	a->r->rc[a->i] = write_lane(a->r->in, &a->r->err[a->i], &l, MEMD_LW_CREATE, 0, &s, NULL,
				    NULL);
	return NULL;
}

static void *update_racer(void *arg)
{
	racer *a = arg;
	memd_lane l = lane_of("k", "s0", NULL);

	l.interruptions = (uint32_t)a->i + 1;
	pthread_barrier_wait(&a->r->start);
	a->r->rc[a->i] = write_lane(a->r->in, &a->r->err[a->i], &l, 0, 1, NULL, NULL, NULL);
	return NULL;
}

Test(mysql, racing_lane_creates_and_updates_have_one_winner)
{
	memd_call call = { .struct_size = sizeof(call) };
	memd_scope us = { .struct_size = sizeof(us), .app = "a", .user = "u" };
	memd_session_query q = { .struct_size = sizeof(q), .limit = 100, .lane_key = "k" };
	int n = 0;
	memd_session_sink sink = { .struct_size = sizeof(sink), .userdata = &n,
				   .session = count_session };
	race rc = { 0 };
	inst in;
	int32_t r;

	open_racing(&in);
	rc.in = &in;
	/* One new key, every racer creating it with a session of its own:
	 * one lane, one session. */
	run_racers(&rc, create_racer);
	assert_one_winner(&rc, "create");
	r = in.ops->session_list(in.h, &call, &us, &q, &sink, &in.err);
	cr_assert_eq(r, 0, "%s", in.err.msg);
	cr_assert_eq(n, 1, "%d sessions were created for one lane", n);
	/* Every racer writing at version 1: one write, version 2. */
	{
		memd_lane l = lane_of("k", "s0", NULL);
		kept_lane kl = { 0 };
		memset(&rc, 0, sizeof(rc));
		rc.in = &in;
		run_racers(&rc, update_racer);
		assert_one_winner(&rc, "update at version 1");
		r = write_lane(&in, &in.err, &l, 0, 1, NULL, NULL, &kl);
		cr_assert_eq(r, MEMD_ECONFLICT, "a stale version was written: %d", r);
		memd_lane_sink ls = { .struct_size = sizeof(ls), .userdata = &kl, .lane = keep_lane };
		r = in.ops->lane_get(in.h, &call, &us, "k", &ls, NULL, &in.err);
		cr_assert_eq(r, 0, "%s", in.err.msg);
		cr_assert_eq(kl.l.version, 2);
		cr_assert_neq(kl.l.interruptions, 0);
	}
	close_inst(&in);
}

static void *notice_racer(void *arg)
{
	racer *a = arg;
	memd_call call = { .struct_size = sizeof(call) };
	memd_scope sc = { .struct_size = sizeof(sc), .app = "a", .user = "u", .session = "n" };
	memd_session_update p = { .struct_size = sizeof(p), .fields = MEMD_PATCH_CLEAR_NOTICE,
				  .now_us = T0 + 1 };
	kept_session k;
	memd_session_sink sink = { .struct_size = sizeof(sink), .userdata = &k,
				   .session = keep_session };

	pthread_barrier_wait(&a->r->start);
	a->r->rc[a->i] = a->r->in->ops->session_update(a->r->in->h, &call, &sc, &p, &sink,
						       &a->r->err[a->i]);
	return NULL;
}

Test(mysql, racing_notice_clears_have_one_winner)
{
	memd_call call = { .struct_size = sizeof(call) };
	memd_session s = { .struct_size = sizeof(s), .flags = MEMD_SESSION_NOTICE, .app = "a",
			   .user = "u", .id = "n", .created_us = T0, .start_reason = "idle" };
	kept_session k;
	memd_session_sink sink = { .struct_size = sizeof(sink), .userdata = &k,
				   .session = keep_session };
	race rc = { 0 };
	inst in;
	int32_t r;

	open_racing(&in);
	rc.in = &in;
	memset(&k, 0, sizeof(k));
	r = in.ops->session_create(in.h, &call, &s, NULL, &sink, &in.err);
	cr_assert_eq(r, 0, "%s", in.err.msg);
	cr_assert(k.s.flags & MEMD_SESSION_NOTICE, "the notice was not stored");
	run_racers(&rc, notice_racer);
	assert_one_winner(&rc, "clear notice");
	r = get_session(&in, "n", &k);
	cr_assert_eq(r, 0, "%s", in.err.msg);
	cr_assert_eq(k.s.flags & MEMD_SESSION_NOTICE, 0);
	cr_assert_eq(k.s.updated_us, T0, "clearing the notice moved updated_us");
	cr_assert_eq(k.s.version, 0, "clearing the notice moved the version");
	close_inst(&in);
}

static int32_t keep_item(void *ud, const memd_inbox_item *i)
{
	char *id = ud;
	snprintf(id, 16, "%s", i->id);
	return 0;
}

static void *take_racer(void *arg)
{
	racer *a = arg;
	memd_call call = { .struct_size = sizeof(call) };
	memd_scope us = { .struct_size = sizeof(us), .app = "a", .user = "u" };

	pthread_barrier_wait(&a->r->start);
	for (;;) {
		char id[16] = "";
		uint32_t depth = 0;
		memd_inbox_sink sink = { .struct_size = sizeof(sink), .userdata = id,
					 .item = keep_item };
		int32_t r = a->r->in->ops->inbox_take(a->r->in->h, &call, &us, "k", "turn1", T0,
						      &sink, &depth, &a->r->err[a->i]);
		a->r->rc[a->i] = r;
		if (r < 0 || !id[0] || a->r->n_taken[a->i] == INBOX_ITEMS)
			break;
		memcpy(a->r->taken[a->i][a->r->n_taken[a->i]++], id, sizeof(id));
	}
	return NULL;
}

Test(mysql, racing_inbox_takers_get_each_item_once_in_order)
{
	memd_call call = { .struct_size = sizeof(call) };
	memd_scope us = { .struct_size = sizeof(us), .app = "a", .user = "u" };
	memd_lane l = lane_of("k", "s", "turn1");
	int seen[INBOX_ITEMS] = { 0 };
	race rc = { 0 };
	inst in;
	int32_t r;

	open_racing(&in);
	rc.in = &in;
	r = write_lane(&in, &in.err, &l, MEMD_LW_CREATE, 0, NULL, NULL, NULL);
	cr_assert_eq(r, 0, "%s", in.err.msg);
	for (int i = 0; i < INBOX_ITEMS; i++) {
		char id[16];
		uint32_t depth = 0;
		snprintf(id, sizeof(id), "m%03d", i);
		memd_inbox_item it = { .struct_size = sizeof(it), .mode = MEMD_INBOX_QUEUE, .id = id,
				       .body_json = "{\"text\":\"hi\"}", .created_us = T0 };
		r = in.ops->inbox_put(in.h, &call, &us, "k", &it, &depth, &in.err);
		cr_assert_eq(r, 0, "%s", in.err.msg);
		cr_assert_eq(depth, (uint32_t)i + 1);
	}
	run_racers(&rc, take_racer);
	for (int t = 0; t < RACERS; t++) {
		cr_assert_eq(rc.rc[t], 0, "taker %d: %s", t, rc.err[t].msg);
		for (int j = 0; j < rc.n_taken[t]; j++) {
			int n = atoi(rc.taken[t][j] + 1);
			cr_assert(n >= 0 && n < INBOX_ITEMS);
			seen[n]++;
			/* One taker's items come in put order. */
			if (j > 0)
				cr_assert_lt(strcmp(rc.taken[t][j - 1], rc.taken[t][j]), 0,
					     "taker %d got %s after %s", t, rc.taken[t][j],
					     rc.taken[t][j - 1]);
		}
	}
	for (int i = 0; i < INBOX_ITEMS; i++)
		cr_assert_eq(seen[i], 1, "item %d was taken %d times", i, seen[i]);
	close_inst(&in);
}

/* ---- checkpoint heads and task versions under racing writers ------------------ */

#define HEAD_ROUNDS 6 /* root checkpoints each racer puts */

/* Racer i puts ids i, i + RACERS, ... of session "h", the greatest first,
 * so that commits of smaller ids keep following greater ones. */
static void *head_racer(void *arg)
{
	racer *a = arg;

	pthread_barrier_wait(&a->r->start);
	for (int round = HEAD_ROUNDS - 1; round >= 0 && a->r->rc[a->i] == 0; round--) {
		char id[16];
		snprintf(id, sizeof(id), "c%04d", round * RACERS + a->i);
		a->r->rc[a->i] = put_checkpoint(a->r->in, &a->r->err[a->i], "h", id, 1, NULL);
	}
	return NULL;
}

Test(mysql, racing_checkpoint_puts_leave_the_greatest_head)
{
	memd_call call = { .struct_size = sizeof(call) };
	memd_resumable_query q = { .struct_size = sizeof(q), .limit = 10, .app = "a",
				   .run_states = 1u << MEMD_RUN_RUNNING, .now_us = T0 };
	kept_checkpoints k = { 0 };
	memd_checkpoint_sink sink = { .struct_size = sizeof(sink), .userdata = &k,
				      .checkpoint = keep_checkpoint };
	char greatest[16];
	race rc = { 0 };
	inst in;
	int32_t r;

	open_racing(&in);
	cr_assert_not_null(in.ops->checkpoint_put, "the store has no checkpoints");
	rc.in = &in;
	/* Every racer also creates the session on its first put. */
	run_racers(&rc, head_racer);
	for (int i = 0; i < RACERS; i++)
		cr_assert_eq(rc.rc[i], 0, "racer %d: %s", i, rc.err[i].msg);
	snprintf(greatest, sizeof(greatest), "c%04d", HEAD_ROUNDS * RACERS - 1);
	r = in.ops->checkpoint_resumable(in.h, &call, &q, &sink, &in.err);
	cr_assert_eq(r, 0, "checkpoint_resumable: %s", in.err.msg);
	cr_assert_eq(k.n, 1, "%d heads", k.n);
	cr_assert_str_eq(k.id, greatest, "the head is %s", k.id);
	r = get_latest(&in, "h", &k);
	cr_assert_eq(r, 0, "%s", in.err.msg);
	cr_assert_str_eq(k.id, greatest);
	close_inst(&in);
}

static void *task_create_racer(void *arg)
{
	racer *a = arg;

	pthread_barrier_wait(&a->r->start);
	a->r->rc[a->i] = put_task(a->r->in, &a->r->err[a->i], "t", "ctx", "submitted",
				  MEMD_TASK_CREATE, 0, NULL);
	return NULL;
}

static void *task_update_racer(void *arg)
{
	racer *a = arg;

	pthread_barrier_wait(&a->r->start);
	a->r->rc[a->i] = put_task(a->r->in, &a->r->err[a->i], "t", "ctx", "working", 0, 1, NULL);
	return NULL;
}

Test(mysql, racing_task_puts_have_one_winner)
{
	memd_call call = { .struct_size = sizeof(call) };
	kept_tasks k = { 0 };
	memd_task_sink sink = { .struct_size = sizeof(sink), .userdata = &k, .task = keep_task };
	race rc = { 0 };
	inst in;
	int32_t r;

	open_racing(&in);
	cr_assert_not_null(in.ops->task_put, "the store has no tasks");
	rc.in = &in;
	run_racers(&rc, task_create_racer);
	assert_one_winner(&rc, "create");
	memset(&rc, 0, sizeof(rc));
	rc.in = &in;
	run_racers(&rc, task_update_racer);
	assert_one_winner(&rc, "put at version 1");
	r = in.ops->task_get(in.h, &call, "a", "t", &sink, &in.err);
	cr_assert_eq(r, 0, "%s", in.err.msg);
	cr_assert_eq(k.version, 2, "version %lld after one winning put", (long long)k.version);
	close_inst(&in);
}
