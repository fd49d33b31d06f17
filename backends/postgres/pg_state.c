/* SPDX-License-Identifier: MIT */
#include "pg_state.h"

#include <stdlib.h>
#include <string.h>

#include "pg_sessions.h"
#include "plugin_util.h"

#define STATE_INITIAL 8

static const pg_sql SQL_SET[PU_SCOPE_COUNT] = {
	[PU_SCOPE_SESSION] = { PG_ST_STATE_SESSION_SET, 5,
		"INSERT INTO state_session (app, \"user\", session, name, value)"
		" VALUES ($1, $2, $3, $4, $5)"
		" ON CONFLICT (app, \"user\", session, name) DO UPDATE SET value = excluded.value" },
	[PU_SCOPE_APP] = { PG_ST_STATE_APP_SET, 3,
		"INSERT INTO state_app (app, name, value) VALUES ($1, $2, $3)"
		" ON CONFLICT (app, name) DO UPDATE SET value = excluded.value" },
	[PU_SCOPE_USER] = { PG_ST_STATE_USER_SET, 4,
		"INSERT INTO state_user (app, \"user\", name, value) VALUES ($1, $2, $3, $4)"
		" ON CONFLICT (app, \"user\", name) DO UPDATE SET value = excluded.value" },
};
static const pg_sql SQL_DEL[PU_SCOPE_COUNT] = {
	[PU_SCOPE_SESSION] = { PG_ST_STATE_SESSION_DEL, 4,
		"DELETE FROM state_session"
		" WHERE app = $1 AND \"user\" = $2 AND session = $3 AND name = $4" },
	[PU_SCOPE_APP] = { PG_ST_STATE_APP_DEL, 2,
		"DELETE FROM state_app WHERE app = $1 AND name = $2" },
	[PU_SCOPE_USER] = { PG_ST_STATE_USER_DEL, 3,
		"DELETE FROM state_user WHERE app = $1 AND \"user\" = $2 AND name = $3" },
};
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

typedef struct collect_ctx {
	pg_state_list *l;
	const memd_scope *where;
	uint32_t member;
	uint32_t index;
	memd_error *err;
} collect_ctx;

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
			       .index = x->index++ };
	w->key = strdup(key);
	w->value_json = value ? strdup(value) : NULL;
	if (!w->key || (value && !w->value_json)) {
		free(w->key);
		free(w->value_json);
		return memd_error_set(x->err, MEMD_ENOMEM, 0, "out of memory");
	}
	l->n++;
	return 0;
}

int32_t pg_state_collect(const char *delta_json, const memd_scope *where, uint32_t member,
			 pg_state_list *l, memd_error *err)
{
	memd_error local = { .struct_size = sizeof(local) };
	collect_ctx x = { .l = l, .where = where, .member = member, .err = err ? err : &local };

	return pu_state_delta_foreach(delta_json, collect_key, &x, err);
}

void pg_state_list_clear(pg_state_list *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].key);
		free(l->v[i].value_json);
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

int32_t pg_state_send(pg_conn *c, pg_state_list *l, memd_error *err)
{
	int32_t r = 0;

	if (l->n > 1)
		qsort(l->v, l->n, sizeof(*l->v), cmp_write);
	for (size_t i = 0; r == 0 && i < l->n; i++) {
		const pg_state_write *w = &l->v[i];
		const char *vals[5];
		int n = 0;

		vals[n++] = w->where->app;
		if (w->scope != PU_SCOPE_APP)
			vals[n++] = w->where->user;
		if (w->scope == PU_SCOPE_SESSION)
			vals[n++] = w->where->session;
		vals[n++] = w->key;
		if (w->value_json)
			vals[n++] = w->value_json;
		r = pg_send(c, w->value_json ? &SQL_SET[w->scope] : &SQL_DEL[w->scope], vals, err);
	}
	return r;
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
