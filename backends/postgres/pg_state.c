/* SPDX-License-Identifier: MIT */
#include "pg_state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_sessions.h"
#include "plugin_util.h"

#define STATE_INITIAL 8

/* One key's write with its history row, in one statement: $1 app, $2
 * user, $3 session (the appending session, whose history gets the row),
 * $4 the bare key, $5 the value (NULL = delete), $6 conditional, $7 the
 * expected value (NULL = absent), $8 version, $9 seq, $10 at_us, $11 the
 * operation, $12 the key with its prefix. The old value is read in the
 * statement's snapshot, which is taken after the row's lock (the
 * session's row lock, or SQL_LOCK for a shared key). A delete of an
 * absent key changes nothing and records nothing; a skipped conditional
 * write neither. The result's one column says whether the write ran. */
#define STATE_WRITE(table, pk, cols, vals, conflict) \
	"WITH cur AS (SELECT value FROM " table " WHERE " pk ")," \
	" go AS (SELECT NOT $6::boolean OR (SELECT value FROM cur) IS NOT DISTINCT FROM $7::text" \
	"        AS ok)," \
	" d AS (DELETE FROM " table " WHERE " pk " AND $5::text IS NULL AND (SELECT ok FROM go)" \
	"       RETURNING 1)," \
	" s AS (INSERT INTO " table " (" cols ") SELECT " vals \
	"       WHERE $5::text IS NOT NULL AND (SELECT ok FROM go)" \
	"       ON CONFLICT (" conflict ") DO UPDATE SET value = excluded.value RETURNING 1)," \
	" h AS (INSERT INTO state_history (app, \"user\", session, version, key, seq, old_value," \
	"       new_value, at_us, operation)" \
	"       SELECT $1::text, $2::text, $3::text, $8::bigint, $12::text, $9::bigint," \
	"       (SELECT value FROM cur), $5::text, $10::bigint, $11::text" \
	"       WHERE EXISTS (SELECT 1 FROM d) OR EXISTS (SELECT 1 FROM s)" \
	"       ON CONFLICT (app, \"user\", session, version, key)" \
	"       DO UPDATE SET new_value = excluded.new_value RETURNING 1)" \
	" SELECT (SELECT ok FROM go)"
#define STATE_WRITE_N 12
static const pg_sql SQL_WRITE[PU_SCOPE_COUNT] = {
	[PU_SCOPE_SESSION] = { PG_ST_STATE_SESSION_SET, STATE_WRITE_N,
		STATE_WRITE("state_session",
			    "app = $1 AND \"user\" = $2 AND session = $3 AND name = $4",
			    "app, \"user\", session, name, value", "$1, $2, $3, $4, $5::text",
			    "app, \"user\", session, name") },
	[PU_SCOPE_APP] = { PG_ST_STATE_APP_SET, STATE_WRITE_N,
		STATE_WRITE("state_app", "app = $1 AND name = $4", "app, name, value",
			    "$1, $4, $5::text", "app, name") },
	[PU_SCOPE_USER] = { PG_ST_STATE_USER_SET, STATE_WRITE_N,
		STATE_WRITE("state_user", "app = $1 AND \"user\" = $2 AND name = $4",
			    "app, \"user\", name, value", "$1, $2, $4, $5::text",
			    "app, \"user\", name") },
};
/* A shared key's row, locked before its write so the write's snapshot
 * holds the value other sessions committed last. */
static const pg_sql SQL_LOCK_APP = { PG_ST_STATE_APP_LOCK, 2,
	"SELECT 1 FROM state_app WHERE app = $1 AND name = $2 FOR UPDATE" };
static const pg_sql SQL_LOCK_USER = { PG_ST_STATE_USER_LOCK, 3,
	"SELECT 1 FROM state_user WHERE app = $1 AND \"user\" = $2 AND name = $3 FOR UPDATE" };
/* The merged view's rows in the order the builder needs them: app keys,
 * then user keys, then the session's. */
static const pg_sql SQL_STATE_ALL = { PG_ST_STATE_ALL, 3,
	"SELECT 1 AS scope, name, value FROM state_app WHERE app = $1"
	" UNION ALL SELECT 2, name, value FROM state_user"
	"  WHERE app = $1 AND \"user\" = $2"
	" UNION ALL SELECT 3, name, value FROM state_session"
	"  WHERE app = $1 AND \"user\" = $2 AND session = $3"
	" ORDER BY 1" };
/* scope column of SQL_STATE_ALL -> PU_SCOPE_* */
static const int32_t row_scope[] = { -1, PU_SCOPE_APP, PU_SCOPE_USER, PU_SCOPE_SESSION };
static const pg_sql SQL_BEGIN_READ = { PG_ST_BEGIN_READ, 0,
	"BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY" };
static const pg_sql SQL_COMMIT = { PG_ST_COMMIT, 0, "COMMIT" };

static int32_t ignore_key(void *userdata, int32_t scope, const char *key, const char *value)
{
	(void)userdata;
	(void)scope;
	(void)key;
	(void)value;
	return 0;
}

int32_t pg_state_check(const char *delta_json, memd_error *err)
{
	return pu_state_delta_foreach(delta_json, ignore_key, NULL, err);
}

/* One key of a state_expect_json. */
typedef struct expect_key {
	int32_t scope;
	char *key;
	char *value_json;         /* NULL = absent */
} expect_key;

typedef struct expect_list {
	expect_key *v;
	size_t n, cap;
	memd_error *err;
} expect_list;

typedef struct collect_ctx {
	pg_state_list *l;
	const memd_scope *where;
	uint32_t member;
	uint32_t index;
	const pg_state_hist *hist;
	const expect_list *expect;
	memd_error *err;
} collect_ctx;

static int32_t expect_add(void *userdata, int32_t scope, const char *key, const char *value)
{
	expect_list *x = userdata;
	expect_key *k;

	if (x->n == x->cap) {
		size_t ncap = x->cap ? x->cap * 2 : STATE_INITIAL;
		expect_key *grown = realloc(x->v, ncap * sizeof(*grown));
		if (!grown)
			return memd_error_set(x->err, MEMD_ENOMEM, 0, "out of memory");
		x->v = grown;
		x->cap = ncap;
	}
	k = &x->v[x->n];
	k->scope = scope;
	k->key = strdup(key);
	k->value_json = value ? strdup(value) : NULL;
	if (!k->key || (value && !k->value_json)) {
		free(k->key);
		free(k->value_json);
		return memd_error_set(x->err, MEMD_ENOMEM, 0, "out of memory");
	}
	x->n++;
	return 0;
}

static void expect_clear(expect_list *x)
{
	for (size_t i = 0; i < x->n; i++) {
		free(x->v[i].key);
		free(x->v[i].value_json);
	}
	free(x->v);
}

static const expect_key *expect_find(const expect_list *x, int32_t scope, const char *key)
{
	for (size_t i = 0; x && i < x->n; i++)
		if (x->v[i].scope == scope && strcmp(x->v[i].key, key) == 0)
			return &x->v[i];
	return NULL;
}

static int32_t collect_key(void *userdata, int32_t scope, const char *key, const char *value)
{
	collect_ctx *x = userdata;
	pg_state_list *l = x->l;
	pg_state_write *w;

	if (l->n == l->cap) {
		size_t ncap = l->cap ? l->cap * 2 : STATE_INITIAL;
		pg_state_write *grown = realloc(l->v, ncap * sizeof(*grown));
		if (!grown)
			return memd_error_set(x->err, MEMD_ENOMEM, 0, "out of memory");
		l->v = grown;
		l->cap = ncap;
	}
	w = &l->v[l->n];
	*w = (pg_state_write){ .scope = scope, .where = x->where, .member = x->member,
			       .index = x->index++, .hist = *x->hist };
	w->hist.expect_json = NULL;
	w->key = strdup(key);
	w->value_json = value ? strdup(value) : NULL;
	{
		const expect_key *e = expect_find(x->expect, scope, key);
		if (e) {
			w->has_expect = 1;
			if (e->value_json && !(w->expect_json = strdup(e->value_json))) {
				free(w->key);
				w->key = NULL;
			}
		}
	}
	if (!w->key || (value && !w->value_json)) {
		free(w->key);
		free(w->value_json);
		free(w->expect_json);
		return memd_error_set(x->err, MEMD_ENOMEM, 0, "out of memory");
	}
	l->n++;
	return 0;
}

int32_t pg_state_collect(const char *delta_json, const memd_scope *where, uint32_t member,
			 const pg_state_hist *h, pg_state_list *l, memd_error *err)
{
	memd_error local = { .struct_size = sizeof(local) };
	expect_list expect = { .err = err ? err : &local };
	collect_ctx x = { .l = l, .where = where, .member = member, .hist = h,
			  .err = err ? err : &local };
	int32_t r = 0;

	if (h->expect_json) {
		r = pu_state_delta_foreach(h->expect_json, expect_add, &expect, err);
		x.expect = &expect;
	}
	if (r == 0)
		r = pu_state_delta_foreach(delta_json, collect_key, &x, err);
	expect_clear(&expect);
	return r;
}

void pg_state_list_clear(pg_state_list *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].key);
		free(l->v[i].value_json);
		free(l->v[i].expect_json);
	}
	free(l->v);
	l->v = NULL;
	l->n = l->cap = 0;
}

static int cmp_str(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "");
}

/* The global lock order: table, then the row's key, then the order the
 * writes were made in (so the last write of a key still wins). */
static int cmp_write(const void *pa, const void *pb)
{
	const pg_state_write *a = pa, *b = pb;
	int c = (a->scope > b->scope) - (a->scope < b->scope);

	if (!c)
		c = cmp_str(a->where->app, b->where->app);
	if (!c && a->scope != PU_SCOPE_APP)
		c = cmp_str(a->where->user, b->where->user);
	if (!c && a->scope == PU_SCOPE_SESSION)
		c = cmp_str(a->where->session, b->where->session);
	if (!c)
		c = strcmp(a->key, b->key);
	if (!c)
		c = (a->member > b->member) - (a->member < b->member);
	if (!c)
		c = (a->index > b->index) - (a->index < b->index);
	return c;
}

const char *pg_state_prefix(int32_t scope)
{
	return scope == PU_SCOPE_APP ? "app:" : scope == PU_SCOPE_USER ? "user:" : "";
}

int32_t pg_state_send(pg_conn *c, pg_state_list *l, memd_error *err)
{
	int32_t r = 0;

	if (l->n > 1)
		qsort(l->v, l->n, sizeof(*l->v), cmp_write);
	for (size_t i = 0; r == 0 && i < l->n; i++) {
		pg_state_write *w = &l->v[i];
		const char *prefix = pg_state_prefix(w->scope);
		char ver[PG_INT_BUF], seq[PG_INT_BUF], at[PG_INT_BUF];
		size_t klen = strlen(prefix) + strlen(w->key) + 1;
		char *full = malloc(klen);
		const char *vals[STATE_WRITE_N];

		if (!full)
			return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
		snprintf(full, klen, "%s%s", prefix, w->key);
		if (w->scope == PU_SCOPE_APP) {
			const char *lv[2] = { w->where->app, w->key };
			r = pg_send(c, &SQL_LOCK_APP, lv, err);
		} else if (w->scope == PU_SCOPE_USER) {
			const char *lv[3] = { w->where->app, w->where->user, w->key };
			r = pg_send(c, &SQL_LOCK_USER, lv, err);
		}
		vals[0] = w->where->app;
		vals[1] = w->where->user;
		vals[2] = w->where->session;
		vals[3] = w->key;
		vals[4] = w->value_json;
		vals[5] = w->has_expect ? "t" : "f";
		vals[6] = w->expect_json;
		vals[7] = pg_i64(ver, w->hist.version);
		vals[8] = pg_i64(seq, w->hist.seq);
		vals[9] = pg_i64(at, w->hist.at_us);
		vals[10] = w->hist.operation;
		vals[11] = full;
		w->res_at = pg_n_queued(c);
		if (r == 0)
			r = pg_send(c, &SQL_WRITE[w->scope], vals, err);
		free(full);
	}
	return r;
}

/* Append sep (0 = none) and s as a JSON string to the buffer. */
static int json_str(char **buf, size_t *len, size_t *cap, char sep, const char *s)
{
	size_t need = *len + 6 * strlen(s) + 5;

	if (need > *cap) {
		size_t ncap = need * 2;
		char *grown = realloc(*buf, ncap);
		if (!grown)
			return -1;
		*buf = grown;
		*cap = ncap;
	}
	if (sep)
		(*buf)[(*len)++] = sep;
	(*buf)[(*len)++] = '"';
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\') {
			(*buf)[(*len)++] = '\\';
			(*buf)[(*len)++] = (char)*p;
		} else if (*p < 0x20) {
			*len += (size_t)snprintf(*buf + *len, 7, "\\u%04x", *p);
		} else {
			(*buf)[(*len)++] = (char)*p;
		}
	}
	(*buf)[(*len)++] = '"';
	(*buf)[*len] = '\0';
	return 0;
}

int32_t pg_state_skipped(const pg_conn *c, const pg_state_list *l, uint32_t member,
			 char **ret_json, memd_error *err)
{
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int any = 0, n = 0;

	for (size_t i = 0; i < l->n; i++) {
		const pg_state_write *w = &l->v[i];
		const PGresult *res;
		char *full;
		size_t klen;
		int bad;

		if (w->member != member || !w->has_expect)
			continue;
		if (!any) {
			buf = malloc(cap = 64);
			if (!buf)
				return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
			buf[len++] = '[';
			buf[len] = '\0';
			any = 1;
		}
		res = pg_res(c, w->res_at);
		if (res && PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "t") == 0)
			continue;
		klen = strlen(pg_state_prefix(w->scope)) + strlen(w->key) + 1;
		full = malloc(klen);
		bad = !full;
		if (full) {
			snprintf(full, klen, "%s%s", pg_state_prefix(w->scope), w->key);
			bad = json_str(&buf, &len, &cap, n++ ? ',' : 0, full) < 0;
			free(full);
		}
		if (bad) {
			free(buf);
			return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
		}
	}
	if (any) {
		if (len + 2 > cap) {
			char *grown = realloc(buf, len + 2);
			if (!grown) {
				free(buf);
				return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
			}
			buf = grown;
		}
		buf[len++] = ']';
		buf[len] = '\0';
	}
	*ret_json = buf;
	return 0;
}

typedef struct get_ctx {
	const memd_call *call;
	const memd_scope *scope;
	const memd_text_sink *out;
} get_ctx;

static int32_t state_get_once(pg_conn *c, void *ctx, memd_error *err)
{
	get_ctx *x = ctx;
	const char *vals[3] = { x->scope->app, x->scope->user, x->scope->session };
	pu_state_builder *b = NULL;
	PGresult *res;
	int32_t r;

	r = pg_send(c, &SQL_BEGIN_READ, NULL, err);
	if (r == 0)
		r = pg_session_send_exists(c, x->scope, err);
	if (r == 0)
		r = pg_send(c, &SQL_STATE_ALL, vals, err);
	if (r == 0)
		r = pg_send(c, &SQL_COMMIT, NULL, err);
	if (r == 0)
		r = pg_run(c, "read state", err);
	if (r == 0)
		r = pg_session_exists_result(pg_res(c, 1), x->call, x->scope, err);
	if (r < 0)
		return r;
	res = pg_res(c, 2);
	b = pu_state_builder_new();
	if (!b)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	for (int i = 0; r == 0 && i < PQntuples(res); i++) {
		int64_t sc = pg_get_i64(res, i, 0);
		if (sc < 1 || sc > PU_SCOPE_COUNT) {
			r = memd_error_set(err, MEMD_EINTERNAL, 0, "postgres: bad state row");
			break;
		}
		r = pu_state_builder_add(b, row_scope[sc], pg_get_text(res, i, 1),
					 pg_get_text(res, i, 2), err);
	}
	pu_rows_read(x->call, (uint64_t)PQntuples(res));
	if (r == 0)
		r = pu_state_builder_finish(b, x->out, err);
	pu_state_builder_free(b);
	return r > 0 ? 0 : r;
}

int32_t pg_state_get(void *inst, const memd_call *call, const memd_scope *scope,
		     const memd_text_sink *out, memd_error *err)
{
	get_ctx x = { .call = call, .scope = scope, .out = out };
	int32_t r = pu_check_scope(scope, 1, err);

	if (r < 0)
		return r;
	if (!out || !out->text)
		return memd_error_set(err, MEMD_EINVAL, 0, "state sink is missing");
	return pg_with_conn(inst, call, state_get_once, &x, err);
}
