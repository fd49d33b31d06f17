/* SPDX-License-Identifier: MIT */
#include "my_state.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_util.h"

/* Room for a key with its prefix ("user:" is the longest). */
#define MY_STATE_NAME_MAX (MY_STATE_KEY_MAX + sizeof("user:"))

static const char *const scope_prefix[PU_SCOPE_COUNT] = {
	[PU_SCOPE_SESSION] = "", [PU_SCOPE_APP] = "app:", [PU_SCOPE_USER] = "user:",
};

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
/* A key's value before a write, locked to the end of the transaction. */
static const my_sql SQL_GET[PU_SCOPE_COUNT] = {
	[PU_SCOPE_SESSION] = { MY_ST_STATE_SESSION_GET,
		"SELECT value FROM memd_state_session"
		" WHERE app = ? AND user = ? AND session = ? AND name = ? FOR UPDATE" },
	[PU_SCOPE_APP] = { MY_ST_STATE_APP_GET,
		"SELECT value FROM memd_state_app WHERE app = ? AND name = ? FOR UPDATE" },
	[PU_SCOPE_USER] = { MY_ST_STATE_USER_GET,
		"SELECT value FROM memd_state_user WHERE app = ? AND user = ? AND name = ? FOR UPDATE" },
};
static const my_sql SQL_HISTORY_INSERT = { MY_ST_HISTORY_INSERT,
	"INSERT INTO memd_state_history (app, user, session, version, name, seq, old_value,"
	" new_value, at_us, operation) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)" };
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
	my_state_write *w;
	json_t *expect;            /* the parsed expect_json, or NULL */
	json_t *skipped;           /* the keys left unchanged (with expect) */
	json_t *seen;              /* the keys of expect the delta has */
	memd_error *err;
} apply_ctx;

/* Bind the key's scope columns and its bare name. */
static void param_key(my_params *p, const memd_scope *sc, int32_t scope, const char *key)
{
	my_param_text(p, sc->app);
	if (scope != PU_SCOPE_APP)
		my_param_text(p, sc->user);
	if (scope == PU_SCOPE_SESSION)
		my_param_text(p, sc->session);
	my_param_text(p, key);
}

/* Does the stored value (NULL = absent) equal the expected one (JSON
 * null = absent)? Compared as JSON values, not as text. */
static int value_is(const char *stored, const json_t *expected)
{
	json_t *v;
	int same;

	if (json_is_null(expected))
		return stored == NULL;
	if (!stored)
		return 0;
	v = json_loads(stored, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
	same = v && json_equal(v, expected);
	json_decref(v);
	return same;
}

static int32_t apply_key(void *userdata, int32_t scope, const char *key, const char *value)
{
	apply_ctx *x = userdata;
	const my_state_write *w = x->w;
	char name[MY_STATE_NAME_MAX + 1];
	my_stmt *s = NULL;
	char *old = NULL;
	const json_t *expected;
	my_params p;
	int32_t r;

	snprintf(name, sizeof(name), "%s%s", scope_prefix[scope], key);
	my_params_init(&p);
	param_key(&p, x->scope, scope, key);
	r = my_exec(x->c, &SQL_GET[scope], &p, &s, x->err);
	if (r == 0)
		r = my_fetch(x->c, s, x->err);
	if (r == 1) {
		old = strdup(my_col_text(s, 0) ? my_col_text(s, 0) : "");
		my_done(s);
		r = old ? 0 : memd_error_set(x->err, MEMD_ENOMEM, 0, "out of memory");
	}
	expected = x->expect ? json_object_get(x->expect, name) : NULL;
	if (r == 0 && expected && json_object_set_new(x->seen, name, json_true()))
		r = memd_error_set(x->err, MEMD_ENOMEM, 0, "out of memory");
	if (r == 0 && expected && !value_is(old, expected)) {
		/* Changed by someone since: left as it is. */
		if (json_array_append_new(x->skipped, json_string(name)))
			r = memd_error_set(x->err, MEMD_ENOMEM, 0, "out of memory");
		free(old);
		return r;
	}
	if (r == 0) {
		my_params_init(&p);
		param_key(&p, x->scope, scope, key);
		if (value)
			my_param_text(&p, value);
		r = my_exec(x->c, value ? &SQL_SET[scope] : &SQL_DEL[scope], &p, NULL, x->err);
	}
	if (r == 0) {
		my_params_init(&p);
		my_param_scope(&p, x->scope, 1);
		my_param_i64(&p, w->version);
		my_param_text(&p, name);
		my_param_i64(&p, w->seq);
		my_param_text(&p, old);
		my_param_text(&p, value);
		my_param_i64(&p, w->at_us);
		my_param_text(&p, w->operation);
		r = my_exec(x->c, &SQL_HISTORY_INSERT, &p, NULL, x->err);
	}
	free(old);
	return r;
}

int32_t my_state_apply(my_conn *c, const memd_scope *scope, const char *delta_json,
		       my_state_write *w, memd_error *err)
{
	apply_ctx x = { .c = c, .scope = scope, .w = w, .err = err };
	int32_t r = 0;

	free(w->not_restored);
	w->not_restored = NULL;
	if (w->expect_json && w->expect_json[0]) {
		x.expect = json_loads(w->expect_json, JSON_REJECT_DUPLICATES, NULL);
		x.skipped = json_array();
		x.seen = json_object();
		if (!x.skipped || !x.seen)
			r = memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
		else if (!json_is_object(x.expect))
			r = memd_error_set(err, MEMD_EINVAL, 0,
					   "state_expect_json must be a JSON object");
	}
	if (r == 0)
		r = pu_state_delta_foreach(delta_json, apply_key, &x, err);
	if (r == 0 && x.skipped) {
		/* Keys expected but not in the delta were not changed either. */
		const char *k;
		json_t *v;
		json_object_foreach(x.expect, k, v) {
			(void)v;
			if (!json_object_get(x.seen, k) &&
			    json_array_append_new(x.skipped, json_string(k)))
				r = memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
		}
	}
	if (r == 0 && x.skipped) {
		w->not_restored = json_dumps(x.skipped, JSON_COMPACT);
		if (!w->not_restored)
			r = memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	json_decref(x.expect);
	json_decref(x.skipped);
	json_decref(x.seen);
	return r;
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
