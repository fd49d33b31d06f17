/* SPDX-License-Identifier: MIT */
#include "my_artifacts.h"

#include <string.h>

#include "plugin_util.h"
#include "my_sessions.h"

#define DEFAULT_MIME "application/octet-stream"

/* Listing columns: name, version, mime_type, size, created_us[, data]. */
static const my_sql SQL_ARTIFACT_LAST_VERSION = { MY_ST_ARTIFACT_LAST_VERSION,
	"SELECT COALESCE(MAX(version), 0) FROM memd_artifacts"
	" WHERE app = ? AND user = ? AND session = ? AND name = ?" };
static const my_sql SQL_ARTIFACT_INSERT = { MY_ST_ARTIFACT_INSERT,
	"INSERT INTO memd_artifacts (app, user, session, name, version, mime_type, data, size,"
	" created_us) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)" };
static const my_sql SQL_ARTIFACT_GET = { MY_ST_ARTIFACT_GET,
	"SELECT name, version, mime_type, size, created_us, data FROM memd_artifacts"
	" WHERE app = ? AND user = ? AND session = ? AND name = ? AND version = ?" };
static const my_sql SQL_ARTIFACT_GET_LATEST = { MY_ST_ARTIFACT_GET_LATEST,
	"SELECT name, version, mime_type, size, created_us, data FROM memd_artifacts"
	" WHERE app = ? AND user = ? AND session = ? AND name = ?"
	" ORDER BY version DESC LIMIT 1" };
/* The newest version of every name: the rows whose version is the
 * largest of their name. */
static const my_sql SQL_ARTIFACT_LIST = { MY_ST_ARTIFACT_LIST,
	"SELECT a.name, a.version, a.mime_type, a.size, a.created_us FROM memd_artifacts a"
	" WHERE a.app = ? AND a.user = ? AND a.session = ?"
	" AND a.version = (SELECT MAX(b.version) FROM memd_artifacts b"
	"  WHERE b.app = a.app AND b.user = a.user AND b.session = a.session"
	"  AND b.name = a.name)"
	" ORDER BY a.name" };
static const my_sql SQL_ARTIFACT_VERSIONS = { MY_ST_ARTIFACT_VERSIONS,
	"SELECT name, version, mime_type, size, created_us FROM memd_artifacts"
	" WHERE app = ? AND user = ? AND session = ? AND name = ? ORDER BY version" };
static const my_sql SQL_ARTIFACT_DELETE = { MY_ST_ARTIFACT_DELETE,
	"DELETE FROM memd_artifacts WHERE app = ? AND user = ? AND session = ? AND name = ?" };

static int32_t check_args(const memd_scope *scope, const char *name, memd_error *err)
{
	int32_t r = pu_check_scope(scope, 1, err);
	if (r == 0 && name)
		r = pu_check_artifact_name(name, err);
	return r;
}

static void artifact_from_row(const my_stmt *s, int with_data, memd_artifact *a)
{
	memset(a, 0, sizeof(*a));
	a->struct_size = sizeof(*a);
	a->name = my_col_text(s, 0);
	a->version = my_col_i64(s, 1);
	a->mime_type = my_col_text(s, 2);
	a->size = (uint64_t)my_col_i64(s, 3);
	a->created_us = my_col_i64(s, 4);
	if (with_data) {
		size_t len = 0;
		a->data = my_col_bytes(s, 5, &len);
		a->size = len;
		if (!a->data)
			a->data = "";
	}
}

static int32_t deliver(const memd_artifact_sink *out, const memd_artifact *a, memd_error *err)
{
	return my_sink_result(out->artifact(out->userdata, a), "artifact", err);
}

/* ---- put ------------------------------------------------------------- */

typedef struct put_ctx {
	const memd_scope *scope;
	const memd_artifact *a;
	int64_t version;
} put_ctx;

static int32_t put_body(my_conn *c, void *arg, memd_error *err)
{
	put_ctx *x = arg;
	my_session_head head;
	int found = 0;
	my_params p;
	/* The session's row lock orders puts of one session (and keeps a
	 * delete of the session out until this commits). */
	int32_t r = my_session_lock(c, x->scope, &head, err);

	if (r < 0)
		return r;
	my_params_init(&p);
	my_param_scope(&p, x->scope, 1);
	my_param_text(&p, x->a->name);
	x->version = 0;
	r = my_query_i64(c, &SQL_ARTIFACT_LAST_VERSION, &p, &found, &x->version, err);
	if (r < 0)
		return r;
	x->version++;
	my_params_init(&p);
	my_param_scope(&p, x->scope, 1);
	my_param_text(&p, x->a->name);
	my_param_i64(&p, x->version);
	my_param_text(&p, x->a->mime_type ? x->a->mime_type : DEFAULT_MIME);
	my_param_bytes(&p, x->a->data, (size_t)x->a->size);
	my_param_i64(&p, (int64_t)x->a->size);
	my_param_i64(&p, x->a->created_us);
	return my_exec(c, &SQL_ARTIFACT_INSERT, &p, NULL, err);
}

int32_t my_artifact_put(void *inst, const memd_call *call, const memd_scope *scope,
			const memd_artifact *a, int64_t *ret_version, memd_error *err)
{
	put_ctx x = { .scope = scope, .a = a };
	int32_t r;

	if (!a || !ret_version)
		return memd_error_set(err, MEMD_EINVAL, 0, "artifact is missing");
	r = check_args(scope, a->name, err);
	if (r == 0 && !a->name)
		r = memd_error_set(err, MEMD_EINVAL, 0, "artifact name is missing");
	if (r < 0)
		return r;
	if (a->size && !a->data)
		return memd_error_set(err, MEMD_EINVAL, 0, "artifact '%.64s' has a size but no data",
				      a->name);
	if (a->size > INT64_MAX || a->size > (uint64_t)(unsigned long)-1)
		return memd_error_set(err, MEMD_ETOOBIG, 0, "artifact '%.64s' is too big", a->name);
	r = my_run(inst, call, MY_TXN, put_body, &x, err);
	if (r == 0)
		*ret_version = x.version;
	return r;
}

/* ---- reads ------------------------------------------------------------ */

typedef struct read_ctx {
	const memd_scope *scope;
	const char *name;
	int64_t version;
	const memd_artifact_sink *out;
	uint64_t rows;
} read_ctx;

static int32_t get_body(my_conn *c, void *arg, memd_error *err)
{
	read_ctx *x = arg;
	my_stmt *s = NULL;
	memd_artifact a;
	my_params p;
	int32_t r;

	my_params_init(&p);
	my_param_scope(&p, x->scope, 1);
	my_param_text(&p, x->name);
	if (x->version)
		my_param_i64(&p, x->version);
	r = my_exec(c, x->version ? &SQL_ARTIFACT_GET : &SQL_ARTIFACT_GET_LATEST, &p, &s, err);
	if (r == 0)
		r = my_fetch(c, s, err);
	if (r == 0)
		return memd_error_set(err, MEMD_ENOTFOUND, 0, "artifact '%.64s'%s not found",
				      x->name, x->version ? " at that version" : "");
	if (r < 0)
		return r;
	artifact_from_row(s, 1, &a);
	r = deliver(x->out, &a, err);
	my_done(s);
	return r > 0 ? 0 : r;
}

int32_t my_artifact_get(void *inst, const memd_call *call, const memd_scope *scope,
			const char *name, int64_t version, const memd_artifact_sink *out,
			memd_error *err)
{
	read_ctx x = { .scope = scope, .name = name, .version = version, .out = out };
	int32_t r = check_args(scope, name, err);

	if (r == 0 && (!name || !out || !out->artifact))
		r = memd_error_set(err, MEMD_EINVAL, 0, "artifact name or sink is missing");
	if (r == 0 && version < 0)
		r = memd_error_set(err, MEMD_EINVAL, 0, "artifact version must not be negative");
	if (r < 0)
		return r;
	return my_run(inst, call, MY_AUTOCOMMIT, get_body, &x, err);
}

/* Deliver every row of a listing statement (executed by the caller). */
static int32_t deliver_listing(my_conn *c, my_stmt *s, read_ctx *x, memd_error *err)
{
	int32_t r;

	x->rows = 0;
	while ((r = my_fetch(c, s, err)) == 1) {
		memd_artifact a;
		x->rows++;
		artifact_from_row(s, 0, &a);
		r = deliver(x->out, &a, err);
		if (r != 0)
			break;
	}
	my_done(s);
	return r;
}

static int32_t list_body(my_conn *c, void *arg, memd_error *err)
{
	read_ctx *x = arg;
	my_stmt *s = NULL;
	my_params p;
	int32_t r;

	my_params_init(&p);
	my_param_scope(&p, x->scope, 1);
	r = my_exec(c, &SQL_ARTIFACT_LIST, &p, &s, err);
	if (r == 0)
		r = deliver_listing(c, s, x, err);
	if (r == 0 && x->rows == 0) {
		/* None: tell an empty session from a missing one. */
		int exists = 0;
		r = my_session_exists(c, x->scope, &exists, err);
		if (r == 0 && !exists)
			r = memd_error_set(err, MEMD_ENOTFOUND, 0, "session '%.64s' not found",
					   x->scope->session);
	}
	return r > 0 ? 0 : r;
}

int32_t my_artifact_list(void *inst, const memd_call *call, const memd_scope *scope,
			 const memd_artifact_sink *out, memd_error *err)
{
	read_ctx x = { .scope = scope, .out = out };
	int32_t r = check_args(scope, NULL, err);

	if (r == 0 && (!out || !out->artifact))
		r = memd_error_set(err, MEMD_EINVAL, 0, "artifact sink is missing");
	if (r < 0)
		return r;
	return my_run(inst, call, MY_AUTOCOMMIT, list_body, &x, err);
}

static int32_t versions_body(my_conn *c, void *arg, memd_error *err)
{
	read_ctx *x = arg;
	my_stmt *s = NULL;
	my_params p;
	int32_t r;

	my_params_init(&p);
	my_param_scope(&p, x->scope, 1);
	my_param_text(&p, x->name);
	r = my_exec(c, &SQL_ARTIFACT_VERSIONS, &p, &s, err);
	if (r == 0)
		r = deliver_listing(c, s, x, err);
	if (r == 0 && x->rows == 0)
		r = memd_error_set(err, MEMD_ENOTFOUND, 0, "artifact '%.64s' not found", x->name);
	return r > 0 ? 0 : r;
}

int32_t my_artifact_versions(void *inst, const memd_call *call, const memd_scope *scope,
			     const char *name, const memd_artifact_sink *out, memd_error *err)
{
	read_ctx x = { .scope = scope, .name = name, .out = out };
	int32_t r = check_args(scope, name, err);

	if (r == 0 && (!name || !out || !out->artifact))
		r = memd_error_set(err, MEMD_EINVAL, 0, "artifact name or sink is missing");
	if (r < 0)
		return r;
	return my_run(inst, call, MY_AUTOCOMMIT, versions_body, &x, err);
}

static int32_t delete_body(my_conn *c, void *arg, memd_error *err)
{
	read_ctx *x = arg;
	my_stmt *s = NULL;
	my_params p;
	int32_t r;

	my_params_init(&p);
	my_param_scope(&p, x->scope, 1);
	my_param_text(&p, x->name);
	r = my_exec(c, &SQL_ARTIFACT_DELETE, &p, &s, err);
	if (r == 0 && my_affected(s) == 0)
		r = memd_error_set(err, MEMD_ENOTFOUND, 0, "artifact '%.64s' not found", x->name);
	return r;
}

int32_t my_artifact_delete(void *inst, const memd_call *call, const memd_scope *scope,
			   const char *name, memd_error *err)
{
	read_ctx x = { .scope = scope, .name = name };
	int32_t r = check_args(scope, name, err);

	if (r == 0 && !name)
		r = memd_error_set(err, MEMD_EINVAL, 0, "artifact name is missing");
	if (r < 0)
		return r;
	/* One DELETE: atomic on its own. */
	return my_run(inst, call, MY_AUTOCOMMIT, delete_body, &x, err);
}
