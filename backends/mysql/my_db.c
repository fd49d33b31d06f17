/* SPDX-License-Identifier: MIT */
#include "my_db.h"

#include <errmsg.h>
#include <errno.h>
#include <jansson.h>
#include <mysqld_error.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "my_events.h"
#include "my_schema.h"
#include "plugin_util.h"

#define MY_MS_PER_SEC 1000
#define MY_RESULT_INITIAL 256          /* first size of a text/blob result buffer */
#define MY_IO_GRACE_S 5                /* read/write timeout beyond the statement timeout */
#define MY_DEFAULT_LOCK_WAIT_S 50      /* innodb_lock_wait_timeout without a statement timeout */
#define MY_CHARSET "utf8mb4"
/* The oldest server the schema and statements are written for. */
#define MY_MIN_SERVER_VERSION 100600   /* MariaDB 10.6 */
#define MY_VERSION_MAJOR_DIV 10000
#define MY_VERSION_MINOR_DIV 100

/* Connection settings every connection gets: strict SQL, statement and
 * lock-wait timeouts (?1 = statement timeout in ms, 0 = none; ?2 = lock
 * wait in whole seconds), how much of a string ORDER BY compares (?3 =
 * MY_SORT_LENGTH), and READ COMMITTED (no gap locks, so appends to
 * different sessions never wait for each other; the ops that need one
 * snapshot run as one statement). */
static const my_sql SQL_SESSION_SETUP = { MY_ST_SESSION_SETUP,
	"SET SESSION max_statement_time = ? / 1000, innodb_lock_wait_timeout = ?,"
	" max_sort_length = ?,"
	" sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION,ERROR_FOR_DIVISION_BY_ZERO'" };
static const my_sql SQL_ISOLATION = { MY_ST_ISOLATION,
	"SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED" };
static const my_sql SQL_BEGIN = { MY_ST_BEGIN, "START TRANSACTION" };
static const my_sql SQL_COMMIT = { MY_ST_COMMIT, "COMMIT" };
static const my_sql SQL_ROLLBACK = { MY_ST_ROLLBACK, "ROLLBACK" };
/* The server's count of rows this connection read (not changed by
 * asking). */
static const my_sql SQL_ROWS_READ = { MY_ST_ROWS_READ,
	"SHOW SESSION STATUS LIKE 'Rows_read'" };
static const my_sql SQL_MAX_PACKET = { MY_ST_MAX_PACKET, "SELECT @@max_allowed_packet" };

/* ---- parameters ----------------------------------------------------- */

void my_params_init(my_params *p)
{
	memset(p, 0, sizeof(*p));
}

static MYSQL_BIND *param_next(my_params *p)
{
	MYSQL_BIND *b;

	if (p->n >= MY_PARAMS_MAX) {
		p->overflow = 1;
		return NULL;
	}
	b = &p->b[p->n];
	memset(b, 0, sizeof(*b));
	b->length = &p->len[p->n];
	b->is_null = &p->null[p->n];
	p->null[p->n] = 0;
	p->n++;
	return b;
}

void my_param_text(my_params *p, const char *text)
{
	MYSQL_BIND *b = param_next(p);

	if (!b)
		return;
	b->buffer_type = MYSQL_TYPE_STRING;
	if (!text) {
		*b->is_null = 1;
		b->buffer_type = MYSQL_TYPE_NULL;
		return;
	}
	b->buffer = (void *)text;
	*b->length = (unsigned long)strlen(text);
	b->buffer_length = *b->length;
}

void my_param_bytes(my_params *p, const void *data, size_t len)
{
	MYSQL_BIND *b = param_next(p);

	if (!b)
		return;
	b->buffer_type = MYSQL_TYPE_BLOB;
	b->buffer = (void *)(data ? data : "");
	*b->length = (unsigned long)len;
	b->buffer_length = *b->length;
}

void my_param_i64(my_params *p, int64_t v)
{
	MYSQL_BIND *b = param_next(p);

	if (!b)
		return;
	p->i64[p->n - 1] = v;
	b->buffer_type = MYSQL_TYPE_LONGLONG;
	b->buffer = &p->i64[p->n - 1];
}

void my_param_u64(my_params *p, uint64_t v)
{
	MYSQL_BIND *b = param_next(p);

	if (!b)
		return;
	memcpy(&p->i64[p->n - 1], &v, sizeof(v));
	b->buffer_type = MYSQL_TYPE_LONGLONG;
	b->is_unsigned = 1;
	b->buffer = &p->i64[p->n - 1];
}

void my_param_scope(my_params *p, const memd_scope *scope, int with_session)
{
	my_param_text(p, scope->app);
	my_param_text(p, scope->user);
	if (with_session)
		my_param_text(p, scope->session);
}

/* ---- errors ---------------------------------------------------------- */

unsigned my_errno(const my_conn *c, const my_stmt *s)
{
	if (s && s->st && mysql_stmt_errno(s->st))
		return mysql_stmt_errno(s->st);
	return c && c->m ? mysql_errno(c->m) : CR_SERVER_GONE_ERROR;
}

int32_t my_fail(my_conn *c, const my_stmt *s, memd_error *err, const char *what_fmt, ...)
{
	char what[MEMD_ERROR_MSG_MAX];
	unsigned e = my_errno(c, s);
	const char *msg;
	uint32_t flags;
	int lost;
	int32_t code = my_map_errno(e, &flags, &lost);
	va_list ap;

	if (s && s->st && mysql_stmt_errno(s->st))
		msg = mysql_stmt_error(s->st);
	else if (c && c->m && mysql_errno(c->m))
		msg = mysql_error(c->m);
	else
		msg = "not connected";
	va_start(ap, what_fmt);
	vsnprintf(what, sizeof(what), what_fmt, ap);
	va_end(ap);
	if (c) {
		c->last_errno = e;
		c->lost |= lost;
		c->deadlock |= e == ER_LOCK_DEADLOCK;
	}
	if (code == MEMD_ETOOBIG)
		return memd_error_set(err, code, flags,
				      "mysql: %s: the server refused a packet that large (raise "
				      "max_allowed_packet): %s", what, msg);
	return memd_error_set(err, code, flags, "mysql: %s: %s (%u)", what, msg, e);
}

int32_t my_sink_result(int32_t r, const char *what, memd_error *err)
{
	if (r < 0)
		return memd_error_set(err, r, 0, "%s sink stopped the read with error %d", what,
				      (int)r);
	return r;
}

int32_t my_fetch_deliver(my_store *store, const memd_call *call, my_conn *c, my_stmt *s,
			 int32_t r, my_row_fn row, void *ud, uint64_t *ret_rows,
			 memd_error *err)
{
	uint64_t n = 0;

	while (r == 0 && (r = my_fetch(c, s, err)) == 1) {
		n++;
		r = row(s, ud, err);
		if (r == 0 && n % MY_CHECK_EVERY == 0)
			r = my_call_check(store, call, err);
	}
	my_done(s);
	if (r > 0)
		r = 0;
	if (r == 0 && ret_rows)
		*ret_rows = n;
	return r;
}

/* ---- checks ---------------------------------------------------------- */

int32_t my_check_json_object(const char *what, const char *json, memd_error *err)
{
	json_error_t jerr;
	json_t *v;
	int32_t r = 0;

	if (!json)
		return memd_error_set(err, MEMD_EINVAL, 0, "%s is missing", what);
	v = json_loads(json, JSON_ALLOW_NUL, &jerr);
	if (!v)
		return memd_error_set(err, MEMD_EINVAL, 0, "%s is not JSON: %s", what, jerr.text);
	if (!json_is_object(v))
		r = memd_error_set(err, MEMD_EINVAL, 0, "%s must be a JSON object", what);
	json_decref(v);
	return r;
}

int32_t my_call_check(const my_store *s, const memd_call *call, memd_error *err)
{
	if (!call || (!call->deadline_us && !call->cancel))
		return 0;
	return pu_call_check(call, s->host->monotonic_us(s->host), err);
}

/* ---- statements ------------------------------------------------------ */

static void result_free(my_result *r)
{
	for (unsigned i = 0; r->buf && i < r->n; i++)
		free(r->buf[i]);
	free(r->b);
	free(r->buf);
	free(r->cap);
	free(r->len);
	free(r->is_null);
	free(r->error);
	free(r->i64);
	free(r->is_int);
	memset(r, 0, sizeof(*r));
}

static int is_int_type(enum enum_field_types t)
{
	switch (t) {
	case MYSQL_TYPE_TINY:
	case MYSQL_TYPE_SHORT:
	case MYSQL_TYPE_INT24:
	case MYSQL_TYPE_LONG:
	case MYSQL_TYPE_LONGLONG:
	case MYSQL_TYPE_YEAR:
		return 1;
	default:
		return 0;
	}
}

/* Set up result buffers from the statement's metadata (none when it
 * returns no rows). */
static int32_t result_setup(my_conn *c, my_stmt *s, memd_error *err)
{
	MYSQL_RES *meta = mysql_stmt_result_metadata(s->st);
	my_result *r = &s->res;
	MYSQL_FIELD *f;
	unsigned n;

	if (!meta)
		return 0;
	n = mysql_num_fields(meta);
	f = mysql_fetch_fields(meta);
	r->n = n;
	r->b = calloc(n, sizeof(*r->b));
	r->buf = calloc(n, sizeof(*r->buf));
	r->cap = calloc(n, sizeof(*r->cap));
	r->len = calloc(n, sizeof(*r->len));
	r->is_null = calloc(n, sizeof(*r->is_null));
	r->error = calloc(n, sizeof(*r->error));
	r->i64 = calloc(n, sizeof(*r->i64));
	r->is_int = calloc(n, sizeof(*r->is_int));
	if (!r->b || !r->buf || !r->cap || !r->len || !r->is_null || !r->error || !r->i64 ||
	    !r->is_int) {
		mysql_free_result(meta);
		result_free(r);
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	for (unsigned i = 0; i < n; i++) {
		MYSQL_BIND *b = &r->b[i];
		b->length = &r->len[i];
		b->is_null = &r->is_null[i];
		b->error = &r->error[i];
		if (is_int_type(f[i].type)) {
			r->is_int[i] = 1;
			b->buffer_type = MYSQL_TYPE_LONGLONG;
			b->buffer = &r->i64[i];
			b->is_unsigned = (f[i].flags & UNSIGNED_FLAG) != 0;
			continue;
		}
		r->buf[i] = malloc(MY_RESULT_INITIAL + 1);
		if (!r->buf[i]) {
			mysql_free_result(meta);
			result_free(r);
			return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
		}
		r->cap[i] = MY_RESULT_INITIAL;
		b->buffer_type = MYSQL_TYPE_BLOB;
		b->buffer = r->buf[i];
		b->buffer_length = r->cap[i];
	}
	mysql_free_result(meta);
	if (mysql_stmt_bind_result(s->st, r->b))
		return my_fail(c, s, err, "bind the result of statement %d", (int)s->sql->id);
	return 0;
}

static void stmt_close(my_stmt *s)
{
	if (s->st)
		mysql_stmt_close(s->st);
	result_free(&s->res);
	memset(s, 0, sizeof(*s));
}

/* The prepared statement for sql on c (prepared on first use). */
static int32_t stmt_get(my_conn *c, const my_sql *sql, my_stmt **ret, memd_error *err)
{
	my_stmt *s = &c->stmts[sql->id];
	int32_t r;

	if (!c->m)
		return memd_error_set(err, MEMD_EUNAVAIL, MEMD_ERROR_RETRYABLE,
				      "mysql: not connected");
	if (!s->st) {
		s->sql = sql;
		s->st = mysql_stmt_init(c->m);
		if (!s->st)
			return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
		if (mysql_stmt_prepare(s->st, sql->text, (unsigned long)strlen(sql->text))) {
			r = my_fail(c, s, err, "prepare statement %d", (int)sql->id);
			stmt_close(s);
			return r;
		}
		r = result_setup(c, s, err);
		if (r < 0) {
			stmt_close(s);
			return r;
		}
	}
	*ret = s;
	return 0;
}

void my_done(my_stmt *s)
{
	if (!s || !s->open)
		return;
	mysql_stmt_free_result(s->st);
	s->open = 0;
}

static int32_t run_stmt(my_conn *c, my_stmt *s, memd_error *err)
{
	if (mysql_stmt_execute(s->st))
		return my_fail(c, s, err, "statement %d", (int)s->sql->id);
	c->progress++;
	s->open = s->res.n > 0;
	return 0;
}

int32_t my_exec(my_conn *c, const my_sql *sql, my_params *p, my_stmt **ret, memd_error *err)
{
	my_stmt *s = NULL;
	int32_t r;

	if (p && p->overflow)
		return memd_error_set(err, MEMD_EINTERNAL, 0,
				      "mysql: statement %d has too many parameters", (int)sql->id);
	r = stmt_get(c, sql, &s, err);
	if (r < 0)
		return r;
	my_done(s);
	if (s->bulk) {
		unsigned int none = 0;
		mysql_stmt_attr_set(s->st, STMT_ATTR_ARRAY_SIZE, &none);
		s->bulk = 0;
	}
	if (mysql_stmt_param_count(s->st) != (p ? p->n : 0))
		return memd_error_set(err, MEMD_EINTERNAL, 0,
				      "mysql: statement %d takes %lu parameters, not %u",
				      (int)sql->id, mysql_stmt_param_count(s->st),
				      (unsigned)(p ? p->n : 0));
	if (p && c->max_packet) {
		uint64_t bytes = MY_PACKET_OVERHEAD;
		for (uint32_t i = 0; i < p->n; i++)
			bytes += MY_PACKET_PARAM_OVERHEAD +
				 (p->b[i].buffer_type == MYSQL_TYPE_LONGLONG ? sizeof(long long)
									     : p->len[i]);
		if (bytes > c->max_packet)
			return memd_error_set(err, MEMD_ETOOBIG, 0,
					      "mysql: statement %d: %llu bytes of values are over the "
					      "server's max_allowed_packet (%llu); raise it to store "
					      "values this large", (int)sql->id,
					      (unsigned long long)bytes,
					      (unsigned long long)c->max_packet);
	}
	if (p && p->n && mysql_stmt_bind_param(s->st, p->b))
		return my_fail(c, s, err, "bind statement %d", (int)sql->id);
	r = run_stmt(c, s, err);
	if (r == 0 && ret)
		*ret = s;
	return r;
}

int32_t my_exec_bulk(my_conn *c, const my_sql *sql, MYSQL_BIND *b, uint32_t n,
		     my_stmt **ret, memd_error *err)
{
	my_stmt *s = NULL;
	unsigned int size = n;
	int32_t r = stmt_get(c, sql, &s, err);

	if (r < 0)
		return r;
	my_done(s);
	if (mysql_stmt_attr_set(s->st, STMT_ATTR_ARRAY_SIZE, &size))
		return my_fail(c, s, err, "set the batch size of statement %d", (int)sql->id);
	s->bulk = n;
	if (mysql_stmt_bind_param(s->st, b))
		return my_fail(c, s, err, "bind statement %d", (int)sql->id);
	r = run_stmt(c, s, err);
	if (r == 0 && ret)
		*ret = s;
	return r;
}

/* Grow column i to hold len bytes (+ NUL) and fetch it again. */
static int32_t refetch_column(my_conn *c, my_stmt *s, unsigned i, memd_error *err)
{
	my_result *r = &s->res;
	unsigned long need = r->len[i];
	char *grown = realloc(r->buf[i], (size_t)need + 1);

	if (!grown)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory (a %lu-byte value)", need);
	r->buf[i] = grown;
	r->cap[i] = need;
	r->b[i].buffer = grown;
	r->b[i].buffer_length = need;
	if (mysql_stmt_fetch_column(s->st, &r->b[i], i, 0))
		return my_fail(c, s, err, "read column %u of statement %d", i, (int)s->sql->id);
	return 1; /* rebind */
}

int32_t my_fetch(my_conn *c, my_stmt *s, memd_error *err)
{
	my_result *r = &s->res;
	int rebind = 0;
	int rc;

	if (!s->open)
		return 0;
	rc = mysql_stmt_fetch(s->st);
	if (rc == MYSQL_NO_DATA) {
		my_done(s);
		return 0;
	}
	if (rc != 0 && rc != MYSQL_DATA_TRUNCATED) {
		int32_t e = my_fail(c, s, err, "read the rows of statement %d", (int)s->sql->id);
		my_done(s);
		return e;
	}
	for (unsigned i = 0; i < r->n; i++) {
		if (r->is_int[i] || r->is_null[i])
			continue;
		if (r->len[i] > r->cap[i]) {
			int32_t e = refetch_column(c, s, i, err);
			if (e < 0) {
				my_done(s);
				return e;
			}
			rebind = 1;
		}
		r->buf[i][r->len[i]] = '\0';
	}
	if (rebind && mysql_stmt_bind_result(s->st, r->b)) {
		int32_t e = my_fail(c, s, err, "rebind the result of statement %d",
				    (int)s->sql->id);
		my_done(s);
		return e;
	}
	return 1;
}

int32_t my_query_i64(my_conn *c, const my_sql *sql, my_params *p, int *ret_found,
		     int64_t *ret, memd_error *err)
{
	my_stmt *s = NULL;
	int32_t r = my_exec(c, sql, p, &s, err);
	int found = 0;
	int64_t v = 0;

	if (r < 0)
		return r;
	r = my_fetch(c, s, err);
	if (r == 1) {
		found = 1;
		v = my_col_i64(s, 0);
		my_done(s);
		r = 0;
	}
	if (r < 0)
		return r;
	if (ret_found)
		*ret_found = found;
	if (found)
		*ret = v;
	return 0;
}

const char *my_col_text(const my_stmt *s, unsigned i)
{
	const my_result *r = &s->res;

	if (i >= r->n || r->is_null[i] || r->is_int[i])
		return NULL;
	return r->buf[i];
}

/* Rows my_keys_keep makes room for first. */
#define MY_KEYS_INITIAL 64

int32_t my_keys_keep(my_keys *keys, const my_stmt *s, memd_error *err)
{
	size_t total = 0;
	char **row, *at;

	if (keys->n == keys->cap) {
		size_t ncap = keys->cap ? keys->cap * 2 : MY_KEYS_INITIAL;
		char **grown = realloc(keys->v, ncap * keys->ncols * sizeof(*grown));
		if (!grown)
			return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
		keys->v = grown;
		keys->cap = ncap;
	}
	for (unsigned j = 0; j < keys->ncols; j++) {
		const char *t = my_col_text(s, j);
		total += strlen(t ? t : "") + 1;
	}
	at = malloc(total);
	if (!at)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	row = my_keys_row(keys, keys->n);
	for (unsigned j = 0; j < keys->ncols; j++) {
		const char *t = my_col_text(s, j);
		size_t len = strlen(t ? t : "") + 1;
		row[j] = at;
		memcpy(at, t ? t : "", len);
		at += len;
	}
	keys->n++;
	return 0;
}

char **my_keys_row(const my_keys *keys, size_t i)
{
	return &keys->v[i * keys->ncols];
}

void my_keys_clear(my_keys *keys)
{
	for (size_t i = 0; i < keys->n; i++)
		free(my_keys_row(keys, i)[0]);
	keys->n = 0;
}

void my_keys_free(my_keys *keys)
{
	if (!keys)
		return;
	my_keys_clear(keys);
	free(keys->v);
	keys->v = NULL;
	keys->cap = 0;
}

int64_t my_col_i64(const my_stmt *s, unsigned i)
{
	const my_result *r = &s->res;

	if (i >= r->n || r->is_null[i])
		return 0;
	if (r->is_int[i])
		return (int64_t)r->i64[i];
	return strtoll(r->buf[i], NULL, 10);
}

const void *my_col_bytes(const my_stmt *s, unsigned i, size_t *ret_len)
{
	const my_result *r = &s->res;

	if (i >= r->n || r->is_null[i] || r->is_int[i]) {
		*ret_len = 0;
		return NULL;
	}
	*ret_len = r->len[i];
	return r->buf[i];
}

int my_col_null(const my_stmt *s, unsigned i)
{
	return i >= s->res.n || s->res.is_null[i];
}

uint64_t my_affected(const my_stmt *s)
{
	return (uint64_t)mysql_stmt_affected_rows(s->st);
}

uint64_t my_insert_id(const my_stmt *s)
{
	return (uint64_t)mysql_stmt_insert_id(s->st);
}

int32_t my_exec_once(my_conn *c, const char *sql, memd_error *err)
{
	my_stmt s = { 0 };
	my_sql once = { MY_ST_COUNT, sql };
	int32_t r = 0;

	if (!c->m)
		return memd_error_set(err, MEMD_EUNAVAIL, MEMD_ERROR_RETRYABLE,
				      "mysql: not connected");
	s.sql = &once;
	s.st = mysql_stmt_init(c->m);
	if (!s.st)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	if (mysql_stmt_prepare(s.st, sql, (unsigned long)strlen(sql)) || mysql_stmt_execute(s.st))
		r = my_fail(c, &s, err, "%.96s", sql);
	else
		c->progress++;
	mysql_stmt_close(s.st);
	return r;
}

/* ---- connections ----------------------------------------------------- */

void my_options_clear(my_options *o)
{
	if (!o)
		return;
	free(o->host);
	free(o->socket);
	free(o->database);
	free(o->user);
	if (o->password) {
		/* Do not leave the secret in freed memory. */
		volatile char *p = o->password;
		while (*p)
			*p++ = '\0';
		free(o->password);
	}
	free(o->ssl_ca);
	free(o->ssl_cert);
	free(o->ssl_key);
	memset(o, 0, sizeof(*o));
}

void my_conn_close(my_conn *c)
{
	for (size_t i = 0; i < MY_ST_COUNT; i++)
		stmt_close(&c->stmts[i]);
	if (c->m)
		mysql_close(c->m);
	c->m = NULL;
	c->max_packet = 0;
}

static unsigned int ceil_seconds(int64_t ms)
{
	return (unsigned int)((ms + MY_MS_PER_SEC - 1) / MY_MS_PER_SEC);
}

/* Where a connection goes, for messages (never the password). */
static void target_text(const my_options *o, char *buf, size_t size)
{
	if (o->socket && o->socket[0])
		snprintf(buf, size, "%s@%s/%s", o->user ? o->user : "", o->socket,
			 o->database ? o->database : "");
	else
		snprintf(buf, size, "%s@%s:%u/%s", o->user ? o->user : "", o->host ? o->host : "",
			 (unsigned)o->port, o->database ? o->database : "");
}

static int32_t set_tls(MYSQL *m, const my_options *o)
{
	my_bool yes = 1;

	if (o->sslmode == MY_SSL_DISABLED)
		return 0;
	/* Any TLS option makes the connector ask for TLS when the server
	 * offers it (preferred); ENFORCE refuses a server without it. */
	if (mysql_ssl_set(m, o->ssl_key, o->ssl_cert, o->ssl_ca, NULL, NULL))
		return -1;
	if (o->sslmode >= MY_SSL_REQUIRED && mysql_optionsv(m, MYSQL_OPT_SSL_ENFORCE, &yes))
		return -1;
	if (o->sslmode == MY_SSL_VERIFY_IDENTITY &&
	    mysql_optionsv(m, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &yes))
		return -1;
	return 0;
}

/* Apply the session settings to a new connection. */
static int32_t conn_setup(my_conn *c, const my_options *o, memd_error *err)
{
	int64_t lock_wait = o->statement_timeout_ms ? ceil_seconds(o->statement_timeout_ms)
						    : MY_DEFAULT_LOCK_WAIT_S;
	my_params p;
	int32_t r;

	my_params_init(&p);
	my_param_i64(&p, o->statement_timeout_ms);
	my_param_i64(&p, lock_wait);
	my_param_i64(&p, MY_SORT_LENGTH);
	int64_t max_packet = 0;
	int found = 0;

	r = my_exec(c, &SQL_SESSION_SETUP, &p, NULL, err);
	if (r == 0)
		r = my_exec(c, &SQL_ISOLATION, NULL, NULL, err);
	if (r == 0)
		r = my_query_i64(c, &SQL_MAX_PACKET, NULL, &found, &max_packet, err);
	if (r == 0 && found && max_packet > 0)
		c->max_packet = (uint64_t)max_packet;
	return r;
}

uint64_t my_packet_budget(const my_conn *c)
{
	if (!c->max_packet)
		return UINT64_MAX;
	return c->max_packet > MY_PACKET_OVERHEAD ? c->max_packet - MY_PACKET_OVERHEAD : 0;
}

/* Open c to the server, on database db (NULL = none). */
static int32_t conn_open(my_store *s, my_conn *c, const char *db, memd_error *err)
{
	const my_options *o = &s->opt;
	unsigned int connect_s = (unsigned int)o->connect_timeout_s;
	unsigned int io_s = o->statement_timeout_ms
				    ? ceil_seconds(o->statement_timeout_ms) + MY_IO_GRACE_S
				    : 0;
	unsigned int protocol = o->socket && o->socket[0] ? MYSQL_PROTOCOL_SOCKET
							 : MYSQL_PROTOCOL_TCP;
	my_bool no = 0;
	unsigned int off = 0;
	char target[MEMD_ERROR_MSG_MAX / 2];
	int32_t r;

	c->m = mysql_init(NULL);
	if (!c->m)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	if (mysql_optionsv(c->m, MYSQL_OPT_CONNECT_TIMEOUT, &connect_s) ||
	    (io_s && mysql_optionsv(c->m, MYSQL_OPT_READ_TIMEOUT, &io_s)) ||
	    (io_s && mysql_optionsv(c->m, MYSQL_OPT_WRITE_TIMEOUT, &io_s)) ||
	    mysql_optionsv(c->m, MYSQL_SET_CHARSET_NAME, MY_CHARSET) ||
	    mysql_optionsv(c->m, MYSQL_OPT_RECONNECT, &no) ||
	    mysql_optionsv(c->m, MYSQL_OPT_LOCAL_INFILE, &off) ||
	    mysql_optionsv(c->m, MYSQL_OPT_PROTOCOL, &protocol) || set_tls(c->m, o)) {
		my_conn_close(c);
		return memd_error_set(err, MEMD_EINTERNAL, 0,
				      "mysql: the client library refused an option");
	}
	if (!mysql_real_connect(c->m, o->socket && o->socket[0] ? NULL : o->host, o->user,
				o->password, db, o->port,
				o->socket && o->socket[0] ? o->socket : NULL, CLIENT_FOUND_ROWS)) {
		target_text(o, target, sizeof(target));
		/* A TLS failure while connecting stays retryable: a server that
		 * is going down or coming up breaks handshakes too (a wrong
		 * certificate then fails every try, with its reason). */
		r = my_fail(c, NULL, err, "cannot connect to %s", target);
		my_conn_close(c);
		return r;
	}
	/* The client library does not refuse a server that does not offer
	 * TLS unless the certificate is verified: check the session is
	 * encrypted whenever TLS is required. */
	if (o->sslmode >= MY_SSL_REQUIRED && !mysql_get_ssl_cipher(c->m)) {
		target_text(o, target, sizeof(target));
		my_conn_close(c);
		return memd_error_set(err, MEMD_EIO, 0,
				      "mysql: %s: sslmode requires TLS (SSL), but the server did not "
				      "agree to it", target);
	}
	r = conn_setup(c, o, err);
	if (r < 0) {
		my_conn_close(c);
		return r;
	}
	c->fresh = 1;
	return 0;
}

/* ---- the pool -------------------------------------------------------- */

static void note_lost(my_store *s, const memd_error *err)
{
	int log;

	pthread_mutex_lock(&s->pool_lock);
	log = !s->lost_logged;
	s->lost_logged = 1;
	pthread_mutex_unlock(&s->pool_lock);
	if (log && s->host->log)
		s->host->log(s->host, MEMD_LOG_WARN,
			     "lost the database (%s); calls fail with a retryable error until it "
			     "is back", err ? err->msg : "connection failed");
}

static void note_connected(my_store *s)
{
	int log;

	pthread_mutex_lock(&s->pool_lock);
	log = s->lost_logged;
	s->lost_logged = 0;
	pthread_mutex_unlock(&s->pool_lock);
	if (log && s->host->log)
		s->host->log(s->host, MEMD_LOG_INFO, "reconnected to the database");
}

static int32_t pool_take(my_store *s, const memd_call *call, my_conn **ret, memd_error *err)
{
	int32_t r = 0;

	pthread_mutex_lock(&s->pool_lock);
	while (s->n_idle == 0) {
		if (pu_cond_wait_call(&s->pool_cond, &s->pool_lock, call) == ETIMEDOUT &&
		    s->n_idle == 0) {
			r = memd_error_set(err, MEMD_ETIMEDOUT, MEMD_ERROR_RETRYABLE,
					   "mysql: deadline passed waiting for a connection");
			break;
		}
	}
	if (r == 0)
		*ret = &s->conns[s->idle[--s->n_idle]];
	pthread_mutex_unlock(&s->pool_lock);
	return r;
}

static void pool_give(my_store *s, my_conn *c)
{
	if (c->lost)
		my_conn_close(c); /* the next user reconnects */
	pthread_mutex_lock(&s->pool_lock);
	s->idle[s->n_idle++] = c->index;
	pthread_cond_signal(&s->pool_cond);
	pthread_mutex_unlock(&s->pool_lock);
}

/* The server's Rows_read counter of c. */
static int32_t rows_read_now(my_conn *c, uint64_t *ret, memd_error *err)
{
	my_stmt *s = NULL;
	int32_t r = my_exec(c, &SQL_ROWS_READ, NULL, &s, err);

	if (r < 0)
		return r;
	r = my_fetch(c, s, err);
	if (r == 1) {
		const char *v = my_col_text(s, 1);
		*ret = v ? strtoull(v, NULL, 10) : 0;
		my_done(s);
		return 0;
	}
	return r < 0 ? r : memd_error_set(err, MEMD_EIO, 0, "mysql: the server has no Rows_read");
}

static int wants_rows(const memd_call *call)
{
	return call && call->struct_size >= offsetof(memd_call, rows_read) + sizeof(call->rows_read) &&
	       call->rows_read;
}

/* One attempt of my_run on c. */
static int32_t run_once(my_store *s, my_conn *c, const memd_call *call, int mode,
			my_body_fn fn, void *arg, memd_error *err)
{
	uint64_t before = 0, after = 0;
	int count = wants_rows(call);
	int32_t r = 0;

	if (count)
		r = rows_read_now(c, &before, err);
	c->progress = 0;
	if (r == 0 && mode == MY_TXN)
		r = my_exec(c, &SQL_BEGIN, NULL, NULL, err);
	if (r == 0)
		r = fn(c, arg, err);
	if (mode == MY_TXN && c->progress > 0) {
		if (r == 0) {
			r = my_exec(c, &SQL_COMMIT, NULL, NULL, err);
		} else if (!c->lost) {
			memd_error ignored;
			/* A connection whose transaction state is unknown must
			 * not go back to the pool. */
			if (my_exec(c, &SQL_ROLLBACK, NULL, NULL, &ignored) < 0)
				c->lost = 1;
		}
	}
	if (count && !c->lost && rows_read_now(c, &after, NULL) == 0 && after >= before)
		pu_rows_read(call, after - before);
	return r;
}

int32_t my_run_on(my_store *s, my_conn *c, const memd_call *call, int mode, my_body_fn fn,
		  void *arg, memd_error *err)
{
	uint32_t deadlocks = 0;
	int stale_retried = 0;

	for (;;) {
		int retry;
		int32_t r = my_call_check(s, call, err);

		if (r < 0)
			return r;
		if (c->lost)
			my_conn_close(c); /* reconnected below */
		c->lost = c->deadlock = c->fresh = 0;
		c->last_errno = 0;
		if (!c->m) {
			r = conn_open(s, c, s->opt.database, err);
			if (r < 0) {
				/* The server accepted and then dropped the
				 * connection during the handshake (busy, or just
				 * starting): try once more. A refused connection
				 * (the server is down) fails at once. */
				int handshake = c->last_errno == CR_SERVER_LOST ||
						c->last_errno == CR_SSL_CONNECTION_ERROR ||
						c->last_errno == CR_SERVER_HANDSHAKE_ERR;
				if (r == MEMD_EUNAVAIL && handshake && !stale_retried++)
					continue;
				if (r == MEMD_EUNAVAIL)
					note_lost(s, err);
				return r;
			}
			note_connected(s);
		}
		r = run_once(s, c, call, mode, fn, arg, err);
		/* A deadlock victim's transaction is rolled back whole: run it
		 * again. A connection that died before the first statement of
		 * the call went through was stale (the server restarted while
		 * it was idle): run the call once more on a new one. */
		retry = r < 0 && ((c->deadlock && deadlocks++ < MY_DEADLOCK_RETRIES) ||
				  (c->lost && !c->fresh && c->progress == 0 && !stale_retried++));
		if (r == MEMD_EUNAVAIL && c->lost && !retry)
			note_lost(s, err);
		if (!retry)
			return r;
	}
}

int32_t my_run(my_store *s, const memd_call *call, int mode, my_body_fn fn, void *arg,
	       memd_error *err)
{
	my_conn *c = NULL;
	int32_t r = my_call_check(s, call, err);

	if (r == 0)
		r = pool_take(s, call, &c, err);
	if (r < 0)
		return r;
	r = my_run_on(s, c, call, mode, fn, arg, err);
	my_give(s, c);
	return r;
}

void my_try_take(my_store *s, my_conn **ret)
{
	pthread_mutex_lock(&s->pool_lock);
	*ret = s->n_idle ? &s->conns[s->idle[--s->n_idle]] : NULL;
	pthread_mutex_unlock(&s->pool_lock);
}

void my_give(my_store *s, my_conn *c)
{
	if (!c)
		return;
	pool_give(s, c);
	my_group_wake(s);
}

/* ---- open / close ---------------------------------------------------- */

/* Check the server is a MariaDB we know how to talk to. */
static int32_t check_server(my_store *s, my_conn *c, memd_error *err)
{
	unsigned long v = mysql_get_server_version(c->m);
	const char *info = mysql_get_server_info(c->m);

	snprintf(s->server_version, sizeof(s->server_version), "%s", info ? info : "?");
	if (!info || !strstr(info, "MariaDB"))
		return memd_error_set(err, MEMD_EIO, 0,
				      "mysql: the server is '%.64s', not MariaDB: this plugin needs "
				      "MariaDB %lu.%lu or newer (bulk inserts, max_statement_time)",
				      info ? info : "?",
				      (unsigned long)MY_MIN_SERVER_VERSION / MY_VERSION_MAJOR_DIV,
				      (unsigned long)MY_MIN_SERVER_VERSION % MY_VERSION_MAJOR_DIV /
					      MY_VERSION_MINOR_DIV);
	if (v < MY_MIN_SERVER_VERSION)
		return memd_error_set(err, MEMD_EIO, 0,
				      "mysql: MariaDB %s is too old: this plugin needs %lu.%lu or "
				      "newer", info,
				      (unsigned long)MY_MIN_SERVER_VERSION / MY_VERSION_MAJOR_DIV,
				      (unsigned long)MY_MIN_SERVER_VERSION % MY_VERSION_MAJOR_DIV /
					      MY_VERSION_MINOR_DIV);
	return 0;
}

/* The database's name travels as a parameter into a user variable; the
 * server quotes it as an identifier (doubling backquotes) and runs the
 * CREATE. EXECUTE IMMEDIATE cannot be prepared, so this one constant
 * statement goes as text: nothing from the config is in it. */
static const my_sql SQL_NAME_DATABASE = { MY_ST_COUNT, "SET @memd_database = ?" };
static const char SQL_CREATE_DATABASE[] =
	"EXECUTE IMMEDIATE CONCAT('CREATE DATABASE IF NOT EXISTS `',"
	" REPLACE(@memd_database, '`', '``'), '` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin')";

static int32_t create_database(my_store *s, my_conn *c, memd_error *err)
{
	my_stmt st = { 0 };
	my_params p;
	int32_t r = conn_open(s, c, NULL, err);

	if (r < 0)
		return r;
	r = check_server(s, c, err);
	if (r == 0) {
		st.sql = &SQL_NAME_DATABASE;
		st.st = mysql_stmt_init(c->m);
		my_params_init(&p);
		my_param_text(&p, s->opt.database);
		if (!st.st)
			r = memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
		else if (mysql_stmt_prepare(st.st, SQL_NAME_DATABASE.text,
					    (unsigned long)strlen(SQL_NAME_DATABASE.text)) ||
			 mysql_stmt_bind_param(st.st, p.b) || mysql_stmt_execute(st.st))
			r = my_fail(c, &st, err, "name the database to create");
		if (st.st)
			mysql_stmt_close(st.st);
	}
	if (r == 0 && mysql_real_query(c->m, SQL_CREATE_DATABASE,
				       (unsigned long)strlen(SQL_CREATE_DATABASE)))
		r = my_fail(c, NULL, err, "create database '%.64s'", s->opt.database);
	my_conn_close(c);
	return r;
}

int32_t my_store_open(const memd_host *host, my_options *o, my_store **ret_store,
		      memd_error *err)
{
	pthread_condattr_t cattr;
	my_store *s;
	my_conn *c;
	int32_t r;

	if (o->pool < 1) {
		my_options_clear(o);
		return memd_error_set(err, MEMD_EINVAL, 0, "mysql: pool must be at least 1");
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		my_options_clear(o);
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	s->host = host;
	s->opt = *o;
	memset(o, 0, sizeof(*o));
	s->conns = calloc(s->opt.pool, sizeof(*s->conns));
	s->idle = calloc(s->opt.pool, sizeof(*s->idle));
	if (!s->conns || !s->idle) {
		free(s->conns);
		free(s->idle);
		my_options_clear(&s->opt);
		free(s);
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	pthread_mutex_init(&s->pool_lock, NULL);
	pthread_condattr_init(&cattr);
	pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
	pthread_cond_init(&s->pool_cond, &cattr);
	pthread_condattr_destroy(&cattr);
	for (uint32_t i = 0; i < s->opt.pool; i++) {
		s->conns[i].index = i;
		s->idle[s->n_idle++] = s->opt.pool - 1 - i;
	}

	/* One connection now: a wrong address, password or database shows
	 * at start, and the schema is brought up to date before any op. */
	c = &s->conns[s->idle[s->n_idle - 1]];
	r = my_group_init(s, err);
	if (r == 0 && s->opt.create_database)
		r = create_database(s, c, err);
	if (r == 0)
		r = conn_open(s, c, s->opt.database, err);
	if (r == 0)
		r = check_server(s, c, err);
	if (r == 0) {
		const char *cipher = mysql_get_ssl_cipher(c->m);
		snprintf(s->tls_cipher, sizeof(s->tls_cipher), "%s", cipher ? cipher : "");
		r = my_schema_migrate(c, host, &s->schema_version, err);
	}
	if (r < 0) {
		my_store_close(s);
		return r;
	}
	*ret_store = s;
	return 0;
}

void my_store_close(my_store *s)
{
	if (!s)
		return;
	my_group_free(s);
	for (uint32_t i = 0; s->conns && i < s->opt.pool; i++)
		my_conn_close(&s->conns[i]);
	pthread_cond_destroy(&s->pool_cond);
	pthread_mutex_destroy(&s->pool_lock);
	free(s->conns);
	free(s->idle);
	my_options_clear(&s->opt);
	free(s);
}
