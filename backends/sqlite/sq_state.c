/* SPDX-License-Identifier: MIT */
#include "sq_state.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_util.h"
#include "sq_sessions.h"

/* The prefixes of shared keys, by scope (a plain key has none). */
static const char *const key_prefix[PU_SCOPE_COUNT] = {
	[PU_SCOPE_SESSION] = "", [PU_SCOPE_APP] = "app:", [PU_SCOPE_USER] = "user:",
};

/* Every state statement numbers its parameters alike: ?1 app, ?2 user,
 * ?3 session, ?4 key, ?5 value (a statement uses the ones it needs). */
#define P_APP 1
#define P_USER 2
#define P_SESSION 3
#define P_NAME 4
#define P_VALUE 5

static const sq_sql SQL_SET[PU_SCOPE_COUNT] = {
	[PU_SCOPE_SESSION] = { SQ_ST_STATE_SESSION_SET,
		"INSERT INTO state_session (app, user, session, name, value)"
		" VALUES (?1, ?2, ?3, ?4, ?5)"
		" ON CONFLICT (app, user, session, name) DO UPDATE SET value = excluded.value" },
	[PU_SCOPE_APP] = { SQ_ST_STATE_APP_SET,
		"INSERT INTO state_app (app, name, value) VALUES (?1, ?4, ?5)"
		" ON CONFLICT (app, name) DO UPDATE SET value = excluded.value" },
	[PU_SCOPE_USER] = { SQ_ST_STATE_USER_SET,
		"INSERT INTO state_user (app, user, name, value) VALUES (?1, ?2, ?4, ?5)"
		" ON CONFLICT (app, user, name) DO UPDATE SET value = excluded.value" },
};
static const sq_sql SQL_DEL[PU_SCOPE_COUNT] = {
	[PU_SCOPE_SESSION] = { SQ_ST_STATE_SESSION_DEL,
		"DELETE FROM state_session"
		" WHERE app = ?1 AND user = ?2 AND session = ?3 AND name = ?4" },
	[PU_SCOPE_APP] = { SQ_ST_STATE_APP_DEL,
		"DELETE FROM state_app WHERE app = ?1 AND name = ?4" },
	[PU_SCOPE_USER] = { SQ_ST_STATE_USER_DEL,
		"DELETE FROM state_user WHERE app = ?1 AND user = ?2 AND name = ?4" },
};
static const sq_sql SQL_ALL[PU_SCOPE_COUNT] = {
	[PU_SCOPE_SESSION] = { SQ_ST_STATE_SESSION_ALL,
		"SELECT name, value FROM state_session"
		" WHERE app = ?1 AND user = ?2 AND session = ?3" },
	[PU_SCOPE_APP] = { SQ_ST_STATE_APP_ALL,
		"SELECT name, value FROM state_app WHERE app = ?1" },
	[PU_SCOPE_USER] = { SQ_ST_STATE_USER_ALL,
		"SELECT name, value FROM state_user WHERE app = ?1 AND user = ?2" },
};

static const sq_sql SQL_GET[PU_SCOPE_COUNT] = {
	[PU_SCOPE_SESSION] = { SQ_ST_STATE_SESSION_GET,
		"SELECT value FROM state_session"
		" WHERE app = ?1 AND user = ?2 AND session = ?3 AND name = ?4" },
	[PU_SCOPE_APP] = { SQ_ST_STATE_APP_GET,
		"SELECT value FROM state_app WHERE app = ?1 AND name = ?4" },
	[PU_SCOPE_USER] = { SQ_ST_STATE_USER_GET,
		"SELECT value FROM state_user WHERE app = ?1 AND user = ?2 AND name = ?4" },
};
/* A key written twice by one delta keeps its first old value. */
static const sq_sql SQL_HISTORY_INSERT = { SQ_ST_HISTORY_INSERT,
	"INSERT INTO state_history (app, user, session, version, key, seq, old, new, at_us,"
	" operation) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
	" ON CONFLICT (app, user, session, version, key) DO UPDATE SET new = excluded.new" };

static int32_t ignore_key(void *userdata, int32_t scope, const char *key, const char *value)
{
	(void)userdata;
	(void)scope;
	(void)key;
	(void)value;
	return 0;
}

int32_t sq_state_check(const char *delta_json, memd_error *err)
{
	return pu_state_delta_foreach(delta_json, ignore_key, NULL, err);
}

typedef struct apply_ctx {
	sq_conn *c;
	const memd_scope *scope;
	sq_state_record *rec;    /* NULL: no history */
	json_t *expect;          /* rec's state_expect_json parsed, or NULL */
	json_t *skipped;         /* the keys of expect not written */
	memd_error *err;
} apply_ctx;

static int bind_where(sqlite3_stmt *st, int32_t scope, const memd_scope *sc, const char *key)
{
	int rc = sq_bind_text(st, P_APP, sc->app);
	if (rc == SQLITE_OK && scope != PU_SCOPE_APP)
		rc = sq_bind_text(st, P_USER, sc->user);
	if (rc == SQLITE_OK && scope == PU_SCOPE_SESSION)
		rc = sq_bind_text(st, P_SESSION, sc->session);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, P_NAME, key);
	return rc;
}

/* The stored value of a key as malloc'd JSON text in *ret (NULL when
 * absent). */
static int32_t read_key(apply_ctx *ctx, int32_t scope, const char *key, char **ret)
{
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(ctx->c, &SQL_GET[scope], &st, ctx->err);
	int rc;

	if (r < 0)
		return r;
	*ret = NULL;
	rc = bind_where(st, scope, ctx->scope, key);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*ret = strdup(sq_col_text(st, 0));
		if (!*ret)
			r = memd_error_set(ctx->err, MEMD_ENOMEM, 0, "out of memory");
	} else if (rc != SQLITE_DONE) {
		r = sq_fail(ctx->c, rc, ctx->err, "read state key '%.64s'", key);
	}
	sq_stmt_done(st);
	return r;
}

/* Does the stored value (JSON text, NULL = absent) equal want (JSON null
 * = absent)? */
static int value_is(const char *stored, const json_t *want)
{
	json_t *v;
	int eq;

	if (!stored)
		return json_is_null(want);
	v = json_loads(stored, JSON_DECODE_ANY, NULL);
	eq = v && json_equal(v, want);
	json_decref(v);
	return eq;
}

static int32_t record_change(apply_ctx *ctx, const char *full_key, const char *old,
			     const char *value)
{
	const sq_state_record *rec = ctx->rec;
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(ctx->c, &SQL_HISTORY_INSERT, &st, ctx->err);
	int rc;

	if (r < 0)
		return r;
	rc = sq_bind_scope(st, ctx->scope, 1);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 4, rec->version);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 5, full_key);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 6, rec->seq);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 7, old);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 8, value);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 9, rec->at_us);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 10, rec->operation);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		r = sq_fail(ctx->c, rc, ctx->err, "record the change of state key '%.64s'", full_key);
	sq_stmt_done(st);
	return r;
}

/* Write one key (a null value deletes it), unless the op's expectation
 * for it fails; record the change. */
static int32_t apply_key(void *userdata, int32_t scope, const char *key, const char *value)
{
	apply_ctx *ctx = userdata;
	size_t plen = strlen(key_prefix[scope]), klen = strlen(key);
	char *full_key = malloc(plen + klen + 1);
	char *old = NULL;
	sqlite3_stmt *st = NULL;
	int32_t r = 0;
	int rc;

	if (!full_key)
		return memd_error_set(ctx->err, MEMD_ENOMEM, 0, "out of memory");
	memcpy(full_key, key_prefix[scope], plen);
	memcpy(full_key + plen, key, klen + 1);
	if (ctx->rec)
		r = read_key(ctx, scope, key, &old);
	if (r == 0 && ctx->expect) {
		json_t *want = json_object_get(ctx->expect, full_key);
		if (want && !value_is(old, want)) {
			if (json_array_append_new(ctx->skipped, json_string(full_key)) < 0)
				r = memd_error_set(ctx->err, MEMD_ENOMEM, 0, "out of memory");
			free(old);
			free(full_key);
			return r;
		}
	}
	if (r == 0)
		r = sq_stmt(ctx->c, value ? &SQL_SET[scope] : &SQL_DEL[scope], &st, ctx->err);
	if (r < 0) {
		free(old);
		free(full_key);
		return r;
	}
	rc = bind_where(st, scope, ctx->scope, key);
	if (rc == SQLITE_OK && value)
		rc = sq_bind_text(st, P_VALUE, value);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		r = sq_fail(ctx->c, rc, ctx->err, "write state key '%.64s'", key);
	sq_stmt_done(st);
	/* Deleting a key that is not there writes nothing. */
	if (r == 0 && ctx->rec && (old || value))
		r = record_change(ctx, full_key, old, value);
	free(old);
	free(full_key);
	return r;
}

int32_t sq_state_apply(sq_conn *c, const memd_scope *scope, const char *delta_json,
		       sq_state_record *rec, memd_error *err)
{
	apply_ctx ctx = { .c = c, .scope = scope, .rec = rec, .err = err };
	int32_t r;

	if (rec)
		rec->not_restored = NULL;
	if (rec && rec->expect_json && rec->expect_json[0]) {
		ctx.expect = json_loads(rec->expect_json, 0, NULL);
		ctx.skipped = json_array();
		if (!json_is_object(ctx.expect) || !ctx.skipped) {
			json_decref(ctx.expect);
			json_decref(ctx.skipped);
			return memd_error_set(err, MEMD_EINVAL, 0,
					      "state_expect_json must be a JSON object");
		}
	}
	r = pu_state_delta_foreach(delta_json, apply_key, &ctx, err);
	if (r == 0 && ctx.skipped) {
		rec->not_restored = json_dumps(ctx.skipped, JSON_COMPACT);
		if (!rec->not_restored)
			r = memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	json_decref(ctx.expect);
	json_decref(ctx.skipped);
	return r;
}

/* Add every key of one scope to b. */
static int32_t load_scope(sq_conn *c, const memd_call *call, int32_t scope,
			  const memd_scope *sc, pu_state_builder *b, memd_error *err)
{
	sqlite3_stmt *st = NULL;
	uint64_t stepped = 0;
	int32_t r = sq_stmt(c, &SQL_ALL[scope], &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = sq_bind_text(st, P_APP, sc->app);
	if (rc == SQLITE_OK && scope != PU_SCOPE_APP)
		rc = sq_bind_text(st, P_USER, sc->user);
	if (rc == SQLITE_OK && scope == PU_SCOPE_SESSION)
		rc = sq_bind_text(st, P_SESSION, sc->session);
	while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		rc = SQLITE_OK;
		stepped++;
		r = pu_state_builder_add(b, scope, sq_col_text(st, 0), sq_col_text(st, 1), err);
		if (r < 0)
			break;
	}
	if (r == 0 && rc != SQLITE_DONE)
		r = sq_fail(c, rc, err, "read state");
	sq_count_rows(call, st, stepped);
	sq_stmt_done(st);
	return r;
}

int32_t sq_state_get(void *inst, const memd_call *call, const memd_scope *scope,
		     const memd_text_sink *out, memd_error *err)
{
	static const int32_t order[] = { PU_SCOPE_APP, PU_SCOPE_USER, PU_SCOPE_SESSION };
	sq_store *store = inst;
	pu_state_builder *b = NULL;
	sq_session_head head;
	sq_conn *c = NULL;
	int32_t r = pu_check_scope(scope, 1, err);

	if (r < 0)
		return r;
	if (!out || !out->text)
		return memd_error_set(err, MEMD_EINVAL, 0, "state sink is missing");
	b = pu_state_builder_new();
	if (!b)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	r = sq_read_begin(store, call, &c, err);
	if (r < 0)
		goto out;
	r = sq_session_head_get(c, call, scope, &head, err);
	for (size_t i = 0; r == 0 && i < sizeof(order) / sizeof(order[0]); i++)
		r = load_scope(c, call, order[i], scope, b, err);
	sq_read_end(store, c);
	if (r == 0)
		r = pu_state_builder_finish(b, out, err);
	if (r > 0)
		r = 0;
out:
	pu_state_builder_free(b);
	return r;
}
