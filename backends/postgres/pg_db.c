/* SPDX-License-Identifier: MIT */
#include "pg_db.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pg_events.h"
#include "pg_schema.h"
#include "plugin_util.h"

#define PG_STMT_NAME_MAX 32
#define PG_ITEMS_INITIAL 16
#define PG_KEEPALIVES_IDLE_S "10"
#define PG_KEEPALIVES_INTERVAL_S "3"
#define PG_KEEPALIVES_COUNT "3"
#define PG_APPLICATION_NAME "memd"
#define PG_OPTIONS_MAX 64
#define PG_NUM_MAX 24

static const pg_sql SQL_ROLLBACK_CLEANUP = { PG_ST_ROLLBACK, 0, "ROLLBACK" };

/* ---- errors --------------------------------------------------------- */

/* The first line of a libpq message. */
static void first_line(const char *msg, char *buf, size_t size)
{
	size_t n = msg ? strcspn(msg, "\n") : 0;

	if (n >= size)
		n = size - 1;
	if (n)
		memcpy(buf, msg, n);
	buf[n] = '\0';
}

int32_t pg_call_check(const pg_store *s, const memd_call *call, memd_error *err)
{
	if (!call || (!call->deadline_us && !call->cancel))
		return 0;
	return pu_call_check(call, s->host->monotonic_us(s->host), err);
}

int32_t pg_sink_result(int32_t r, const char *what, memd_error *err)
{
	if (r < 0)
		return memd_error_set(err, r, 0, "%s sink stopped the read with error %d", what,
				      (int)r);
	return r;
}

/* ---- checks --------------------------------------------------------- */

static int32_t check_json(const char *what, const char *json, int want_object, memd_error *err)
{
	json_error_t jerr;
	json_t *v;
	int32_t r = 0;

	if (!json)
		return memd_error_set(err, MEMD_EINVAL, 0, "%s is missing", what);
	/* Without JSON_ALLOW_NUL jansson refuses \u0000, which jsonb cannot
	 * store either: refuse it here with a clear message. */
	v = json_loads(json, JSON_DECODE_ANY, &jerr);
	if (!v)
		return memd_error_set(err, MEMD_EINVAL, 0, "%s is not JSON PostgreSQL can store: %s",
				      what, jerr.text);
	if (want_object && !json_is_object(v))
		r = memd_error_set(err, MEMD_EINVAL, 0, "%s must be a JSON object", what);
	json_decref(v);
	return r;
}

int32_t pg_check_json_object(const char *what, const char *json, memd_error *err)
{
	return check_json(what, json, 1, err);
}

int32_t pg_check_json_text_object(const char *what, const char *json, memd_error *err)
{
	json_error_t jerr;
	json_t *v;
	int32_t r = 0;

	if (!json)
		return memd_error_set(err, MEMD_EINVAL, 0, "%s is missing", what);
	v = json_loads(json, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
	if (!v)
		return memd_error_set(err, MEMD_EINVAL, 0, "%s is not JSON: %s", what, jerr.text);
	if (!json_is_object(v))
		r = memd_error_set(err, MEMD_EINVAL, 0, "%s must be a JSON object", what);
	json_decref(v);
	return r;
}

int32_t pg_check_json(const char *what, const char *json, memd_error *err)
{
	return json ? check_json(what, json, 0, err) : 0;
}

int pg_json_has_nul_escape(const char *json)
{
	for (const char *p = json ? strstr(json, "u0000") : NULL; p; p = strstr(p + 1, "u0000")) {
		size_t backslashes = 0;
		for (const char *q = p; q > json && q[-1] == '\\'; q--)
			backslashes++;
		if (backslashes % 2 == 1)
			return 1;
	}
	return 0;
}

int32_t pg_usage_check(const memd_usage *u, memd_error *err)
{
	if (!u)
		return 0;
	if (u->struct_size < sizeof(*u))
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "usage struct_size %u is smaller than memd_usage (%zu)",
				      (unsigned)u->struct_size, sizeof(*u));
	if (u->input_tokens < 0 || u->output_tokens < 0 || u->cache_read_tokens < 0 ||
	    u->cache_write_tokens < 0 || u->cost_micro_usd < 0 || u->last_prompt_tokens < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "usage must not be negative");
	return 0;
}

/* ---- values --------------------------------------------------------- */

void pg_usage_vals(const memd_usage *u, char bufs[PG_USAGE_N][PG_INT_BUF], const char **vals)
{
	const int64_t v[PG_USAGE_N] = {
		u ? u->input_tokens : 0, u ? u->output_tokens : 0,
		u ? u->cache_read_tokens : 0, u ? u->cache_write_tokens : 0,
		u ? u->cost_micro_usd : 0, u ? u->last_prompt_tokens : 0,
	};

	for (size_t i = 0; i < PG_USAGE_N; i++)
		vals[i] = pg_i64(bufs[i], v[i]);
}

const char *pg_i64(char *buf, int64_t v)
{
	snprintf(buf, PG_INT_BUF, "%" PRId64, v);
	return buf;
}

int64_t pg_get_i64(const PGresult *res, int row, int col)
{
	if (PQgetisnull(res, row, col))
		return 0;
	return strtoll(PQgetvalue(res, row, col), NULL, 10);
}

const char *pg_get_text(const PGresult *res, int row, int col)
{
	if (PQgetisnull(res, row, col))
		return NULL;
	return PQgetvalue(res, row, col);
}

/* ---- rounds --------------------------------------------------------- */

static int32_t conn_failed(pg_conn *c, const char *what, memd_error *err)
{
	char line[MEMD_ERROR_MSG_MAX];

	c->broken = 1;
	c->sqlstate[0] = '\0';
	first_line(c->pg ? PQerrorMessage(c->pg) : "not connected", line, sizeof(line));
	return memd_error_set(err, MEMD_EUNAVAIL, MEMD_ERROR_RETRYABLE,
			      "postgres: %s: connection lost: %s", what, line);
}

static int32_t add_item(pg_conn *c, pg_stmt_id id, int is_prepare, memd_error *err)
{
	if (c->n_items == c->cap_items) {
		size_t ncap = c->cap_items ? c->cap_items * 2 : PG_ITEMS_INITIAL;
		pg_item *grown = realloc(c->items, ncap * sizeof(*grown));
		if (!grown)
			return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
		c->items = grown;
		c->cap_items = ncap;
	}
	if (!is_prepare && c->n_queries == c->cap_query_item) {
		size_t ncap = c->cap_query_item ? c->cap_query_item * 2 : PG_ITEMS_INITIAL;
		size_t *grown = realloc(c->query_item, ncap * sizeof(*grown));
		if (!grown)
			return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
		c->query_item = grown;
		c->cap_query_item = ncap;
	}
	if (!is_prepare)
		c->query_item[c->n_queries++] = c->n_items;
	c->items[c->n_items++] = (pg_item){ .id = id, .is_prepare = is_prepare };
	return 0;
}

static void stmt_name(pg_stmt_id id, char buf[PG_STMT_NAME_MAX])
{
	snprintf(buf, PG_STMT_NAME_MAX, "memd_%d", (int)id);
}

int32_t pg_send_fmt(pg_conn *c, const pg_sql *sql, const char *const *vals, const int *lens,
		    const int *fmts, int result_format, memd_error *err)
{
	char name[PG_STMT_NAME_MAX];
	int32_t r;

	if (!c->pg || c->broken)
		return conn_failed(c, "send", err);
	stmt_name(sql->id, name);
	if (!c->prepared[sql->id]) {
		if (!PQsendPrepare(c->pg, name, sql->text, sql->n_params, NULL))
			return conn_failed(c, "prepare", err);
		c->prepared[sql->id] = 1;
		r = add_item(c, sql->id, 1, err);
		if (r < 0)
			return r;
	}
	if (!PQsendQueryPrepared(c->pg, name, sql->n_params, vals, lens, fmts, result_format))
		return conn_failed(c, "send", err);
	return add_item(c, sql->id, 0, err);
}

int32_t pg_send_text(pg_conn *c, const char *text, int n, const char *const *vals,
		     memd_error *err)
{
	if (!c->pg || c->broken)
		return conn_failed(c, "send", err);
	if (!PQsendQueryParams(c->pg, text, n, NULL, vals, NULL, NULL, 0))
		return conn_failed(c, "send", err);
	return add_item(c, PG_ST_COUNT, 0, err);
}

int32_t pg_send(pg_conn *c, const pg_sql *sql, const char *const *vals, memd_error *err)
{
	return pg_send_fmt(c, sql, vals, NULL, NULL, 0, err);
}

int32_t pg_run(pg_conn *c, const char *what, memd_error *err)
{
	int32_t r = 0;
	PGresult *res;

	c->sqlstate[0] = '\0';
	for (size_t i = 0; i < c->n_items; i++)
		if (!c->items[i].is_prepare && c->items[i].id == PG_ST_COMMIT)
			c->commit_sent = 1;
	if (!c->pg || c->broken || PQpipelineSync(c->pg) != 1)
		return conn_failed(c, what, err);
	for (size_t i = 0; i < c->n_items; i++) {
		pg_item *it = &c->items[i];
		ExecStatusType stt;

		res = PQgetResult(c->pg);
		if (!res) {
			if (r == 0)
				r = conn_failed(c, what, err);
			c->broken = 1;
			break;
		}
		stt = PQresultStatus(res);
		if (stt == PGRES_FATAL_ERROR && r == 0) {
			const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
			char line[MEMD_ERROR_MSG_MAX];
			uint32_t flags = 0;
			int32_t code = pg_map_sqlstate(state, &flags);

			first_line(PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) ?
				   PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) :
				   PQresultErrorMessage(res), line, sizeof(line));
			snprintf(c->sqlstate, sizeof(c->sqlstate), "%s", state ? state : "");
			r = memd_error_set(err, code, flags, "postgres: %s: %s", what, line);
			if (!state || PQstatus(c->pg) != CONNECTION_OK)
				c->broken = 1;
		}
		if (it->is_prepare) {
			if (stt != PGRES_COMMAND_OK)
				c->prepared[it->id] = 0;
			PQclear(res);
		} else {
			it->res = res;
		}
		if (c->broken)
			break;
		res = PQgetResult(c->pg); /* the NULL after each statement */
		if (res) {
			PQclear(res);
			if (r == 0)
				r = memd_error_set(err, MEMD_EINTERNAL, 0,
						   "postgres: %s: unexpected extra result", what);
			c->broken = 1;
			break;
		}
	}
	if (!c->broken) {
		res = PQgetResult(c->pg);
		if (!res || PQresultStatus(res) != PGRES_PIPELINE_SYNC) {
			if (r == 0)
				r = conn_failed(c, what, err);
			c->broken = 1;
		}
		PQclear(res);
	}
	if (c->broken && r == 0)
		r = conn_failed(c, what, err);
	if (c->broken) {
		/* Statements may not be prepared on a new connection. */
		memset(c->prepared, 0, sizeof(c->prepared));
	}
	return r;
}

PGresult *pg_res(const pg_conn *c, size_t i)
{
	if (i >= c->n_queries)
		return NULL;
	return c->items[c->query_item[i]].res;
}

size_t pg_n_queued(const pg_conn *c)
{
	return c->n_queries;
}

void pg_reset(pg_conn *c)
{
	for (size_t i = 0; i < c->n_items; i++)
		PQclear(c->items[i].res);
	c->n_items = 0;
	c->n_queries = 0;
}

int32_t pg_exec1(pg_conn *c, const pg_sql *sql, const char *const *vals, memd_error *err)
{
	int32_t r;

	pg_reset(c);
	r = pg_send(c, sql, vals, err);
	if (r == 0)
		r = pg_run(c, "cleanup", err);
	pg_reset(c);
	return r;
}

int pg_should_retry(const pg_conn *c, int32_t r)
{
	if (r >= 0 || !c)
		return 0;
	if (strcmp(c->sqlstate, "40001") == 0 || strcmp(c->sqlstate, "40P01") == 0)
		return 1;
	return c->broken && !c->commit_sent && r == MEMD_EUNAVAIL;
}

int32_t pg_with_conn(pg_store *s, const memd_call *call, pg_op_fn fn, void *ctx,
		     memd_error *err)
{
	for (int attempt = 1;; attempt++) {
		pg_conn *c = NULL;
		int32_t r = pg_take(s, call, &c, err);
		int again;

		if (r < 0)
			return r;
		r = fn(c, ctx, err);
		again = attempt < PG_ATTEMPTS && pg_should_retry(c, r);
		pg_give(s, c);
		if (!again)
			return r;
	}
}

typedef struct expire_ctx {
	const pg_sql *sql;
	const char *what;
	int64_t now_us;
	uint32_t limit;
	uint32_t count;
} expire_ctx;

static int32_t expire_once(pg_conn *c, void *ctx, memd_error *err)
{
	expire_ctx *x = ctx;
	char now[PG_INT_BUF], lim[PG_INT_BUF];
	const char *vals[2] = { pg_i64(now, x->now_us), pg_i64(lim, x->limit) };
	int32_t r = pg_send(c, x->sql, vals, err);

	if (r == 0)
		r = pg_run(c, x->what, err);
	if (r == 0)
		x->count = (uint32_t)pg_get_i64(pg_res(c, 0), 0, 0);
	return r;
}

int32_t pg_expire(pg_store *s, const memd_call *call, const pg_sql *sql, const char *what,
		  int64_t now_us, uint32_t limit, uint32_t *ret_count, memd_error *err)
{
	expire_ctx x = { .sql = sql, .what = what, .now_us = now_us, .limit = limit };
	int32_t r;

	if (!ret_count)
		return memd_error_set(err, MEMD_EINVAL, 0, "no output count");
	if (limit == 0) {
		*ret_count = 0;
		return 0;
	}
	r = pg_with_conn(s, call, expire_once, &x, err);
	if (r == 0)
		*ret_count = x.count;
	return r;
}

/* ---- connections ---------------------------------------------------- */

static void ignore_notice(void *arg, const PGresult *res)
{
	(void)arg;
	(void)res;
}

static void conn_close(pg_conn *c)
{
	pg_reset(c);
	if (c->pg)
		PQfinish(c->pg);
	c->pg = NULL;
	c->broken = 0;
	memset(c->prepared, 0, sizeof(c->prepared));
}

static void conn_free(pg_conn *c)
{
	conn_close(c);
	free(c->items);
	free(c->query_item);
	c->items = NULL;
	c->query_item = NULL;
	c->cap_items = c->cap_query_item = 0;
}

/* Connect c and set its search_path to the store's schema. */
static int32_t conn_open(pg_store *s, pg_conn *c, memd_error *err)
{
	const char *vals[1] = { s->schema };
	char line[MEMD_ERROR_MSG_MAX];
	PGresult *res;
	int32_t r = 0;

	conn_close(c);
	c->pg = PQconnectdbParams(s->conn_keys, s->conn_vals, 1);
	if (!c->pg)
		return memd_error_set(err, MEMD_ENOMEM, 0, "postgres: out of memory connecting");
	if (PQstatus(c->pg) != CONNECTION_OK) {
		first_line(PQerrorMessage(c->pg), line, sizeof(line));
		r = memd_error_set(err, MEMD_EUNAVAIL, MEMD_ERROR_RETRYABLE,
				   "postgres: cannot connect: %s", line);
		conn_close(c);
		return r;
	}
	PQsetNoticeReceiver(c->pg, ignore_notice, NULL);
	/* The schema name is a parameter; quote_ident makes it one name. */
	if (!PQsendQueryParams(c->pg,
			       "SELECT pg_catalog.set_config('search_path',"
			       " pg_catalog.quote_ident($1::text), false)",
			       1, NULL, vals, NULL, NULL, 0)) {
		r = conn_failed(c, "set search_path", err);
		conn_close(c);
		return r;
	}
	res = PQgetResult(c->pg);
	if (!res || PQresultStatus(res) != PGRES_TUPLES_OK) {
		first_line(res ? PQresultErrorMessage(res) : PQerrorMessage(c->pg), line,
			   sizeof(line));
		r = memd_error_set(err, MEMD_EIO, 0, "postgres: set search_path: %s", line);
	}
	PQclear(res);
	while ((res = PQgetResult(c->pg)))
		PQclear(res);
	if (r == 0 && PQenterPipelineMode(c->pg) != 1)
		r = conn_failed(c, "enter pipeline mode", err);
	if (r < 0)
		conn_close(c);
	return r;
}

/* True if the server closed c while it sat in the pool (its socket is
 * readable with nothing we asked for). */
static int conn_gone(pg_conn *c)
{
	struct pollfd p = { .fd = PQsocket(c->pg), .events = POLLIN };

	if (PQstatus(c->pg) != CONNECTION_OK || p.fd < 0)
		return 1;
	if (poll(&p, 1, 0) <= 0)
		return 0;
	if (!PQconsumeInput(c->pg))
		return 1;
	return PQstatus(c->pg) != CONNECTION_OK;
}

/* Make a connection just taken from the pool ready for an op. */
static int32_t conn_ready(pg_store *s, pg_conn *c, memd_error *err)
{
	int32_t r = 0;

	c->commit_sent = 0;
	c->sqlstate[0] = '\0';
	pg_reset(c);
	if (!c->pg || c->broken || conn_gone(c))
		r = conn_open(s, c, err);
	if (r < 0) {
		pg_give(s, c);
		return r;
	}
	return 0;
}

int32_t pg_take(pg_store *s, const memd_call *call, pg_conn **ret, memd_error *err)
{
	pg_conn *c = NULL;
	int32_t r = pg_call_check(s, call, err);

	if (r < 0)
		return r;
	pthread_mutex_lock(&s->pool_lock);
	while (s->n_idle == 0) {
		if (pu_cond_wait_call(&s->pool_cond, &s->pool_lock, call) == ETIMEDOUT &&
		    s->n_idle == 0) {
			r = memd_error_set(err, MEMD_ETIMEDOUT, MEMD_ERROR_RETRYABLE,
					   "postgres: deadline passed waiting for a connection");
			break;
		}
	}
	if (r == 0)
		c = &s->conns[s->idle[--s->n_idle]];
	pthread_mutex_unlock(&s->pool_lock);
	if (r == 0)
		r = conn_ready(s, c, err);
	if (r == 0)
		*ret = c;
	return r;
}

int32_t pg_try_take(pg_store *s, const memd_call *call, pg_conn **ret, memd_error *err)
{
	pg_conn *c = NULL;
	int32_t r = pg_call_check(s, call, err);

	if (r < 0)
		return r;
	pthread_mutex_lock(&s->pool_lock);
	if (s->n_idle > 0)
		c = &s->conns[s->idle[--s->n_idle]];
	pthread_mutex_unlock(&s->pool_lock);
	if (c && (r = conn_ready(s, c, err)) < 0)
		return r;
	*ret = c;
	return 0;
}

void pg_give(pg_store *s, pg_conn *c)
{
	if (!c)
		return;
	pg_reset(c);
	if (c->pg && !c->broken && PQtransactionStatus(c->pg) != PQTRANS_IDLE)
		(void)pg_exec1(c, &SQL_ROLLBACK_CLEANUP, NULL, NULL);
	if (c->pg && (c->broken || PQtransactionStatus(c->pg) != PQTRANS_IDLE))
		conn_close(c);
	pthread_mutex_lock(&s->pool_lock);
	s->idle[s->n_idle++] = (uint32_t)(c - s->conns);
	pthread_cond_signal(&s->pool_cond);
	pthread_mutex_unlock(&s->pool_lock);
	pg_group_wake(s);
}

/* ---- the store ------------------------------------------------------ */

/* Add key = value to the parameter list unless value is NULL or empty. */
static void add_param(const char **k, const char **v, size_t *n, const char *key,
		      const char *value)
{
	if (!value || !value[0] || *n >= PG_MAX_CONN_PARAMS)
		return;
	k[*n] = key;
	v[*n] = value;
	(*n)++;
}

/* Copy every parameter value into one buffer owned by s. */
static int32_t set_conn_params(pg_store *s, const pg_options *o, memd_error *err)
{
	char port[PG_NUM_MAX], timeout[PG_NUM_MAX], options[PG_OPTIONS_MAX];
	const char *k[PG_MAX_CONN_PARAMS], *v[PG_MAX_CONN_PARAMS];
	size_t n = 0, total = 0;
	char *p;

#define PG_PARAM(key, value) add_param(k, v, &n, (key), (value))
	/* dsn first: libpq expands it (expand_dbname) and the discrete keys
	 * after it override what it says. */
	PG_PARAM("dbname", o->dsn);
	PG_PARAM("host", o->host);
	if (o->port) {
		snprintf(port, sizeof(port), "%" PRId64, o->port);
		PG_PARAM("port", port);
	}
	PG_PARAM("dbname", o->database);
	PG_PARAM("user", o->user);
	PG_PARAM("password", o->password);
	PG_PARAM("sslmode", o->sslmode);
	PG_PARAM("sslrootcert", o->sslrootcert);
	PG_PARAM("sslcert", o->sslcert);
	PG_PARAM("sslkey", o->sslkey);
	snprintf(timeout, sizeof(timeout), "%" PRId64, o->connect_timeout_s);
	PG_PARAM("connect_timeout", timeout);
	PG_PARAM("client_encoding", "UTF8");
	PG_PARAM("application_name", PG_APPLICATION_NAME);
	PG_PARAM("keepalives", "1");
	PG_PARAM("keepalives_idle", PG_KEEPALIVES_IDLE_S);
	PG_PARAM("keepalives_interval", PG_KEEPALIVES_INTERVAL_S);
	PG_PARAM("keepalives_count", PG_KEEPALIVES_COUNT);
	snprintf(options, sizeof(options), "-c statement_timeout=%" PRId64,
		 o->statement_timeout_ms);
	PG_PARAM("options", options);
#undef PG_PARAM

	for (size_t i = 0; i < n; i++)
		total += strlen(v[i]) + 1;
	s->strings = malloc(total);
	if (!s->strings)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	p = s->strings;
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(v[i]) + 1;
		memcpy(p, v[i], l);
		s->conn_keys[i] = k[i];
		s->conn_vals[i] = p;
		p += l;
	}
	s->conn_keys[n] = NULL;
	s->conn_vals[n] = NULL;
	return 0;
}

int32_t pg_store_open(const memd_host *host, const pg_options *o, pg_store **ret_store,
		      memd_error *err)
{
	pthread_condattr_t cattr;
	pg_conn *c = NULL;
	pg_store *s;
	int32_t r;

	if (!PQisthreadsafe())
		return memd_error_set(err, MEMD_EINTERNAL, 0,
				      "postgres: libpq was built without thread safety");
	if (o->pool < 1)
		return memd_error_set(err, MEMD_EINVAL, 0, "postgres: pool must be at least 1");
	if (!o->schema || !o->schema[0])
		return memd_error_set(err, MEMD_EINVAL, 0, "postgres: schema must not be empty");

	s = calloc(1, sizeof(*s));
	if (!s)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	s->host = host;
	s->group_commit = o->group_commit ? o->group_commit : 1;
	s->schema = strdup(o->schema);
	s->conns = calloc(o->pool, sizeof(*s->conns));
	s->idle = calloc(o->pool, sizeof(*s->idle));
	pthread_mutex_init(&s->pool_lock, NULL);
	pthread_condattr_init(&cattr);
	pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
	pthread_cond_init(&s->pool_cond, &cattr);
	pthread_condattr_destroy(&cattr);
	if (!s->schema || !s->conns || !s->idle) {
		pg_store_close(s);
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	s->n_conns = o->pool;
	for (uint32_t i = 0; i < o->pool; i++)
		s->idle[s->n_idle++] = o->pool - 1 - i;
	r = set_conn_params(s, o, err);
	if (r == 0)
		r = pg_group_init(s, err);
	if (r == 0)
		r = pg_take(s, NULL, &c, err);
	if (r == 0) {
		r = pg_schema_migrate(c, host, s->schema, &s->schema_version, err);
		pg_give(s, c);
	}
	if (r < 0) {
		pg_store_close(s);
		return r;
	}
	*ret_store = s;
	return 0;
}

void pg_store_close(pg_store *s)
{
	if (!s)
		return;
	for (uint32_t i = 0; i < s->n_conns; i++)
		conn_free(&s->conns[i]);
	pg_group_free(s);
	pthread_cond_destroy(&s->pool_cond);
	pthread_mutex_destroy(&s->pool_lock);
	free(s->conns);
	free(s->idle);
	free(s->schema);
	free(s->strings);
	free(s);
}
