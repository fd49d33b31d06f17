/* SPDX-License-Identifier: MIT */
#include "my_state.h"

#include <string.h>

#include "plugin_util.h"

static const my_sql SQL_SET[PU_SCOPE_COUNT] = {
	[PU_SCOPE_SESSION] = { MY_ST_STATE_SESSION_SET,
		"INSERT INTO memd_state_session (app, user, session, name, value)"
		" VALUES (?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE value = VALUES(value)" },
	[PU_SCOPE_APP] = { MY_ST_STATE_APP_SET,
		"INSERT INTO memd_state_app (app, name, value) VALUES (?, ?, ?)"
		" ON DUPLICATE KEY UPDATE value = VALUES(value)" },
	[PU_SCOPE_USER] = { MY_ST_STATE_USER_SET,
		"INSERT INTO memd_state_user (app, user, name, value) VALUES (?, ?, ?, ?)"
		" ON DUPLICATE KEY UPDATE value = VALUES(value)" },
};
static const my_sql SQL_DEL[PU_SCOPE_COUNT] = {
	[PU_SCOPE_SESSION] = { MY_ST_STATE_SESSION_DEL,
		"DELETE FROM memd_state_session"
		" WHERE app = ? AND user = ? AND session = ? AND name = ?" },
	[PU_SCOPE_APP] = { MY_ST_STATE_APP_DEL,
		"DELETE FROM memd_state_app WHERE app = ? AND name = ?" },
	[PU_SCOPE_USER] = { MY_ST_STATE_USER_DEL,
		"DELETE FROM memd_state_user WHERE app = ? AND user = ? AND name = ?" },
};
/* The session's existence (scope -1) and every key of the three scopes
 * in one statement: one snapshot, so an append that changed keys of
 * several scopes is seen whole or not at all. */
#define SCOPE_EXISTS (-1)
static const my_sql SQL_STATE_ALL = { MY_ST_STATE_ALL,
	"SELECT -1 AS scope, NULL AS name, NULL AS value FROM memd_sessions"
	"  WHERE app = ? AND user = ? AND id = ?"
	" UNION ALL SELECT 1, name, value FROM memd_state_app WHERE app = ?"
	" UNION ALL SELECT 2, name, value FROM memd_state_user WHERE app = ? AND user = ?"
	" UNION ALL SELECT 0, name, value FROM memd_state_session"
	"  WHERE app = ? AND user = ? AND session = ?" };

_Static_assert(PU_SCOPE_SESSION == 0 && PU_SCOPE_APP == 1 && PU_SCOPE_USER == 2,
	       "SQL_STATE_ALL numbers the scopes as plugin_util does");

static int32_t check_key(void *userdata, int32_t scope, const char *key, const char *value)
{
	memd_error *err = userdata;

	(void)scope;
	(void)value;
	if (strlen(key) > MY_STATE_KEY_MAX)
		return memd_error_set(err, MEMD_EINVAL, 0, "state key '%.64s...' is longer than %d bytes",
				      key, MY_STATE_KEY_MAX);
	return 0;
}

int32_t my_state_check(const char *delta_json, memd_error *err)
{
	return pu_state_delta_foreach(delta_json, check_key, err, err);
}

typedef struct apply_ctx {
	my_conn *c;
	const memd_scope *scope;
	memd_error *err;
} apply_ctx;

static int32_t apply_key(void *userdata, int32_t scope, const char *key, const char *value)
{
	apply_ctx *x = userdata;
	my_params p;

	my_params_init(&p);
	my_param_text(&p, x->scope->app);
	if (scope != PU_SCOPE_APP)
		my_param_text(&p, x->scope->user);
	if (scope == PU_SCOPE_SESSION)
		my_param_text(&p, x->scope->session);
	my_param_text(&p, key);
	if (value)
		my_param_text(&p, value);
	return my_exec(x->c, value ? &SQL_SET[scope] : &SQL_DEL[scope], &p, NULL, x->err);
}

int32_t my_state_apply(my_conn *c, const memd_scope *scope, const char *delta_json,
		       memd_error *err)
{
	apply_ctx x = { .c = c, .scope = scope, .err = err };

	return pu_state_delta_foreach(delta_json, apply_key, &x, err);
}

typedef struct get_ctx {
	const memd_scope *scope;
	pu_state_builder *b;
} get_ctx;

static int32_t get_body(my_conn *c, void *arg, memd_error *err)
{
	get_ctx *x = arg;
	const memd_scope *sc = x->scope;
	int exists = 0;
	my_stmt *s = NULL;
	my_params p;
	int32_t r;

	/* A retry starts from a fresh builder. */
	pu_state_builder_free(x->b);
	x->b = pu_state_builder_new();
	if (!x->b)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	my_params_init(&p);
	my_param_scope(&p, sc, 1);
	my_param_text(&p, sc->app);
	my_param_scope(&p, sc, 0);
	my_param_scope(&p, sc, 1);
	r = my_exec(c, &SQL_STATE_ALL, &p, &s, err);
	while (r == 0 && (r = my_fetch(c, s, err)) == 1) {
		int64_t scope = my_col_i64(s, 0);
		r = 0;
		if (scope == SCOPE_EXISTS)
			exists = 1;
		else
			r = pu_state_builder_add(x->b, (int32_t)scope, my_col_text(s, 1),
						 my_col_text(s, 2), err);
	}
	my_done(s);
	if (r < 0)
		return r;
	if (!exists)
		return memd_error_set(err, MEMD_ENOTFOUND, 0, "session '%.64s' not found",
				      sc->session);
	return 0;
}

int32_t my_state_get(void *inst, const memd_call *call, const memd_scope *scope,
		     const memd_text_sink *out, memd_error *err)
{
	get_ctx x = { .scope = scope };
	int32_t r = pu_check_scope(scope, 1, err);

	if (r < 0)
		return r;
	if (!out || !out->text)
		return memd_error_set(err, MEMD_EINVAL, 0, "state sink is missing");
	r = my_run(inst, call, MY_AUTOCOMMIT, get_body, &x, err);
	if (r == 0)
		r = pu_state_builder_finish(x.b, out, err);
	pu_state_builder_free(x.b);
	return r > 0 ? 0 : r;
}
