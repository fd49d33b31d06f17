/* SPDX-License-Identifier: MIT */
#include "sq_artifacts.h"

#include <string.h>

#include "plugin_util.h"
#include "sq_sessions.h"

#define DEFAULT_MIME "application/octet-stream"

/* Listing columns: name, version, mime_type, size, created_us[, data]. */
static const sq_sql SQL_ARTIFACT_LAST_VERSION = { SQ_ST_ARTIFACT_LAST_VERSION,
	"SELECT coalesce(max(version), 0) FROM artifacts"
	" WHERE app = ?1 AND user = ?2 AND session = ?3 AND name = ?4" };
static const sq_sql SQL_ARTIFACT_INSERT = { SQ_ST_ARTIFACT_INSERT,
	"INSERT INTO artifacts (app, user, session, name, version, mime_type, data, size,"
	" created_us) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)" };
static const sq_sql SQL_ARTIFACT_GET = { SQ_ST_ARTIFACT_GET,
	"SELECT name, version, mime_type, size, created_us, data FROM artifacts"
	" WHERE app = ?1 AND user = ?2 AND session = ?3 AND name = ?4 AND version = ?5" };
static const sq_sql SQL_ARTIFACT_GET_LATEST = { SQ_ST_ARTIFACT_GET_LATEST,
	"SELECT name, version, mime_type, size, created_us, data FROM artifacts"
	" WHERE app = ?1 AND user = ?2 AND session = ?3 AND name = ?4"
	" ORDER BY version DESC LIMIT 1" };
/* SQLite takes the bare columns from the row holding max(version). */
static const sq_sql SQL_ARTIFACT_LIST = { SQ_ST_ARTIFACT_LIST,
	"SELECT name, max(version), mime_type, size, created_us FROM artifacts"
	" WHERE app = ?1 AND user = ?2 AND session = ?3 GROUP BY name ORDER BY name" };
static const sq_sql SQL_ARTIFACT_VERSIONS = { SQ_ST_ARTIFACT_VERSIONS,
	"SELECT name, version, mime_type, size, created_us FROM artifacts"
	" WHERE app = ?1 AND user = ?2 AND session = ?3 AND name = ?4 ORDER BY version" };
static const sq_sql SQL_ARTIFACT_DELETE = { SQ_ST_ARTIFACT_DELETE,
	"DELETE FROM artifacts WHERE app = ?1 AND user = ?2 AND session = ?3 AND name = ?4" };

static int32_t check_args(const memd_scope *scope, const char *name, memd_error *err)
{
	int32_t r = pu_check_scope(scope, 1, err);
	if (r == 0 && name)
		r = pu_check_artifact_name(name, err);
	return r;
}

static void artifact_from_row(sqlite3_stmt *st, int with_data, memd_artifact *a)
{
	memset(a, 0, sizeof(*a));
	a->struct_size = sizeof(*a);
	a->name = sq_col_text(st, 0);
	a->version = sqlite3_column_int64(st, 1);
	a->mime_type = sq_col_text(st, 2);
	a->size = (uint64_t)sqlite3_column_int64(st, 3);
	a->created_us = sqlite3_column_int64(st, 4);
	if (with_data) {
		/* column_blob of an empty blob is NULL: hand out "" instead. */
		a->data = sqlite3_column_blob(st, 5);
		a->size = (uint64_t)sqlite3_column_bytes(st, 5);
		if (!a->data)
			a->data = "";
	}
}

static int32_t deliver(const memd_artifact_sink *out, const memd_artifact *a, memd_error *err)
{
	return sq_sink_result(out->artifact(out->userdata, a), "artifact", err);
}

static int32_t last_version(sq_conn *c, const memd_scope *scope, const char *name,
			    int64_t *ret, memd_error *err)
{
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, &SQL_ARTIFACT_LAST_VERSION, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = sq_bind_scope(st, scope, 1);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 4, name);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*ret = sqlite3_column_int64(st, 0);
	else
		r = sq_fail(c, rc, err, "read versions of artifact '%.64s'", name);
	sq_stmt_done(st);
	return r;
}

static int32_t insert_artifact(sq_conn *c, const memd_scope *scope, const memd_artifact *a,
			       int64_t version, memd_error *err)
{
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, &SQL_ARTIFACT_INSERT, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = sq_bind_scope(st, scope, 1);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 4, a->name);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 5, version);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 6, a->mime_type ? a->mime_type : DEFAULT_MIME);
	if (rc == SQLITE_OK)
		rc = a->size ? sqlite3_bind_blob64(st, 7, a->data, a->size, SQLITE_STATIC)
			     : sqlite3_bind_zeroblob(st, 7, 0);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 8, (int64_t)a->size);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 9, a->created_us);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		r = sq_fail(c, rc, err, "store artifact '%.64s'", a->name);
	sq_stmt_done(st);
	return r;
}

int32_t sq_artifact_put(void *inst, const memd_call *call, const memd_scope *scope,
			const memd_artifact *a, int64_t *ret_version, memd_error *err)
{
	sq_store *store = inst;
	sq_session_head head;
	sq_conn *c = NULL;
	int64_t version = 0;
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
	if (a->size > INT64_MAX)
		return memd_error_set(err, MEMD_ETOOBIG, 0, "artifact '%.64s' is too big", a->name);

	r = sq_write_begin(store, call, &c, err);
	if (r < 0)
		return r;
	r = sq_session_head_get(c, NULL, scope, &head, err);
	if (r == 0)
		r = last_version(c, scope, a->name, &version, err);
	if (r == 0)
		r = insert_artifact(c, scope, a, version + 1, err);
	r = sq_write_end(store, c, r, err);
	if (r == 0)
		*ret_version = version + 1;
	return r;
}

int32_t sq_artifact_get(void *inst, const memd_call *call, const memd_scope *scope,
			const char *name, int64_t version, const memd_artifact_sink *out,
			memd_error *err)
{
	sq_store *store = inst;
	sqlite3_stmt *st = NULL;
	memd_artifact a;
	sq_conn *c = NULL;
	int32_t r = check_args(scope, name, err);
	int rc;

	if (r == 0 && (!name || !out || !out->artifact))
		r = memd_error_set(err, MEMD_EINVAL, 0, "artifact name or sink is missing");
	if (r == 0 && version < 0)
		r = memd_error_set(err, MEMD_EINVAL, 0, "artifact version must not be negative");
	if (r < 0)
		return r;
	r = sq_read_begin(store, call, &c, err);
	if (r < 0)
		return r;
	r = sq_stmt(c, version ? &SQL_ARTIFACT_GET : &SQL_ARTIFACT_GET_LATEST, &st, err);
	if (r < 0)
		goto out;
	rc = sq_bind_scope(st, scope, 1);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 4, name);
	if (rc == SQLITE_OK && version)
		rc = sqlite3_bind_int64(st, 5, version);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		sq_count_rows(call, st, 1);
		artifact_from_row(st, 1, &a);
		r = deliver(out, &a, err);
	} else if (rc == SQLITE_DONE) {
		r = memd_error_set(err, MEMD_ENOTFOUND, 0, "artifact '%.64s'%s not found", name,
				   version ? " at that version" : "");
	} else {
		r = sq_fail(c, rc, err, "read artifact '%.64s'", name);
	}
out:
	sq_stmt_done(st);
	sq_read_end(store, c);
	return r > 0 ? 0 : r;
}

/* Deliver every row of a listing statement (bound by the caller). */
static int32_t deliver_listing(sq_conn *c, const memd_call *call, sqlite3_stmt *st,
			       const memd_artifact_sink *out, uint64_t *ret_rows,
			       memd_error *err)
{
	uint64_t rows = 0;
	int32_t r = 0;
	int rc;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		memd_artifact a;
		rows++;
		artifact_from_row(st, 0, &a);
		r = deliver(out, &a, err);
		if (r != 0)
			break;
	}
	if (r == 0 && rc != SQLITE_DONE)
		r = sq_fail(c, rc, err, "list artifacts");
	sq_count_rows(call, st, rows);
	*ret_rows = rows;
	return r;
}

int32_t sq_artifact_list(void *inst, const memd_call *call, const memd_scope *scope,
			 const memd_artifact_sink *out, memd_error *err)
{
	sq_store *store = inst;
	sq_session_head head;
	sqlite3_stmt *st = NULL;
	sq_conn *c = NULL;
	uint64_t rows = 0;
	int32_t r = check_args(scope, NULL, err);
	int rc;

	if (r == 0 && (!out || !out->artifact))
		r = memd_error_set(err, MEMD_EINVAL, 0, "artifact sink is missing");
	if (r < 0)
		return r;
	r = sq_read_begin(store, call, &c, err);
	if (r < 0)
		return r;
	r = sq_session_head_get(c, call, scope, &head, err);
	if (r == 0)
		r = sq_stmt(c, &SQL_ARTIFACT_LIST, &st, err);
	if (r == 0) {
		rc = sq_bind_scope(st, scope, 1);
		r = rc == SQLITE_OK ? deliver_listing(c, call, st, out, &rows, err)
				    : sq_fail(c, rc, err, "list artifacts");
	}
	sq_stmt_done(st);
	sq_read_end(store, c);
	return r > 0 ? 0 : r;
}

int32_t sq_artifact_versions(void *inst, const memd_call *call, const memd_scope *scope,
			     const char *name, const memd_artifact_sink *out, memd_error *err)
{
	sq_store *store = inst;
	sqlite3_stmt *st = NULL;
	sq_conn *c = NULL;
	uint64_t rows = 0;
	int32_t r = check_args(scope, name, err);
	int rc;

	if (r == 0 && (!name || !out || !out->artifact))
		r = memd_error_set(err, MEMD_EINVAL, 0, "artifact name or sink is missing");
	if (r < 0)
		return r;
	r = sq_read_begin(store, call, &c, err);
	if (r < 0)
		return r;
	r = sq_stmt(c, &SQL_ARTIFACT_VERSIONS, &st, err);
	if (r == 0) {
		rc = sq_bind_scope(st, scope, 1);
		if (rc == SQLITE_OK)
			rc = sq_bind_text(st, 4, name);
		r = rc == SQLITE_OK ? deliver_listing(c, call, st, out, &rows, err)
				    : sq_fail(c, rc, err, "list artifact versions");
	}
	if (r == 0 && rows == 0)
		r = memd_error_set(err, MEMD_ENOTFOUND, 0, "artifact '%.64s' not found", name);
	sq_stmt_done(st);
	sq_read_end(store, c);
	return r > 0 ? 0 : r;
}

static int32_t artifact_delete_once(void *inst, const memd_call *call,
				    const memd_scope *scope, const char *name, memd_error *err)
{
	sq_store *store = inst;
	sqlite3_stmt *st = NULL;
	sq_conn *c = NULL;
	int32_t r = check_args(scope, name, err);
	int rc;

	if (r == 0 && !name)
		r = memd_error_set(err, MEMD_EINVAL, 0, "artifact name is missing");
	if (r < 0)
		return r;
	r = sq_write_begin(store, call, &c, err);
	if (r < 0)
		return r;
	r = sq_stmt(c, &SQL_ARTIFACT_DELETE, &st, err);
	if (r == 0) {
		rc = sq_bind_scope(st, scope, 1);
		if (rc == SQLITE_OK)
			rc = sq_bind_text(st, 4, name);
		if (rc == SQLITE_OK)
			rc = sqlite3_step(st);
		if (rc != SQLITE_DONE)
			r = sq_fail(c, rc, err, "delete artifact '%.64s'", name);
		else if (sqlite3_changes(c->db) == 0)
			r = memd_error_set(err, MEMD_ENOTFOUND, 0, "artifact '%.64s' not found",
					   name);
		sq_stmt_done(st);
	}
	return sq_write_end(store, c, r, err);
}

/* On a full disk the delete is tried again once after sq_make_room: an
 * operator frees space through the API. */
int32_t sq_artifact_delete(void *inst, const memd_call *call, const memd_scope *scope,
			   const char *name, memd_error *err)
{
	int32_t r = artifact_delete_once(inst, call, scope, name, err);

	if (r < 0 && sq_is_full(err)) {
		sq_make_room(inst);
		r = artifact_delete_once(inst, call, scope, name, err);
		sq_after_room(inst, r);
	}
	return r;
}
