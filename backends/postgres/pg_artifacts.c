/* SPDX-License-Identifier: MIT */
#include "pg_artifacts.h"

#include <endian.h>
#include <string.h>

#include "pg_sessions.h"
#include "plugin_util.h"

#define DEFAULT_MIME "application/octet-stream"
#define BINARY 1
#define INT8_BYTES 8

static const pg_sql SQL_BEGIN = { PG_ST_BEGIN, 0, "BEGIN" };
static const pg_sql SQL_BEGIN_READ = { PG_ST_BEGIN_READ, 0,
	"BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY" };
static const pg_sql SQL_COMMIT = { PG_ST_COMMIT, 0, "COMMIT" };

/* The lock key is a hash of the four parts joined by a unit separator
 * (which ids cannot contain: they have no control characters). The lock
 * is its own statement so the INSERT's snapshot, taken after it, sees the
 * version the previous holder committed. */
static const pg_sql SQL_ARTIFACT_LOCK = { PG_ST_ARTIFACT_LOCK, 4,
	"SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended("
	" $1 || chr(31) || $2 || chr(31) || $3 || chr(31) || $4, 0))" };
static const pg_sql SQL_ARTIFACT_INSERT = { PG_ST_ARTIFACT_INSERT, 8,
	"INSERT INTO artifacts (app, \"user\", session, name, version, mime_type, data, size,"
	" created_us)"
	" SELECT $1, $2, $3, $4, coalesce(max(version), 0) + 1, $5, $6::bytea, $7::bigint, $8::bigint"
	" FROM artifacts WHERE app = $1 AND \"user\" = $2 AND session = $3 AND name = $4"
	" RETURNING version" };
/* Binary results: name, version, mime_type, size, created_us[, data]. */
static const pg_sql SQL_ARTIFACT_GET = { PG_ST_ARTIFACT_GET, 5,
	"SELECT name, version, mime_type, size, created_us, data FROM artifacts"
	" WHERE app = $1 AND \"user\" = $2 AND session = $3 AND name = $4 AND version = $5" };
static const pg_sql SQL_ARTIFACT_GET_LATEST = { PG_ST_ARTIFACT_GET_LATEST, 4,
	"SELECT name, version, mime_type, size, created_us, data FROM artifacts"
	" WHERE app = $1 AND \"user\" = $2 AND session = $3 AND name = $4"
	" ORDER BY version DESC LIMIT 1" };
static const pg_sql SQL_ARTIFACT_LIST = { PG_ST_ARTIFACT_LIST, 3,
	"SELECT DISTINCT ON (name) name, version, mime_type, size, created_us FROM artifacts"
	" WHERE app = $1 AND \"user\" = $2 AND session = $3 ORDER BY name, version DESC" };
static const pg_sql SQL_ARTIFACT_VERSIONS = { PG_ST_ARTIFACT_VERSIONS, 4,
	"SELECT name, version, mime_type, size, created_us FROM artifacts"
	" WHERE app = $1 AND \"user\" = $2 AND session = $3 AND name = $4 ORDER BY version" };
static const pg_sql SQL_ARTIFACT_DELETE = { PG_ST_ARTIFACT_DELETE, 4,
	"DELETE FROM artifacts WHERE app = $1 AND \"user\" = $2 AND session = $3 AND name = $4" };

static int32_t check_args(const memd_scope *scope, const char *name, memd_error *err)
{
	int32_t r = pu_check_scope(scope, 1, err);
	if (r == 0 && name)
		r = pu_check_artifact_name(name, err);
	return r;
}

static int64_t bin_i64(const PGresult *res, int row, int col)
{
	uint64_t be = 0;

	if (PQgetisnull(res, row, col) || PQgetlength(res, row, col) != INT8_BYTES)
		return 0;
	memcpy(&be, PQgetvalue(res, row, col), INT8_BYTES);
	return (int64_t)be64toh(be);
}

/* Row of a binary result (with data when with_data). */
static void artifact_from_row(const PGresult *res, int row, int with_data, memd_artifact *a)
{
	memset(a, 0, sizeof(*a));
	a->struct_size = sizeof(*a);
	a->name = PQgetvalue(res, row, 0);
	a->version = bin_i64(res, row, 1);
	a->mime_type = PQgetvalue(res, row, 2);
	a->size = (uint64_t)bin_i64(res, row, 3);
	a->created_us = bin_i64(res, row, 4);
	if (with_data) {
		a->data = PQgetvalue(res, row, 5);
		a->size = (uint64_t)PQgetlength(res, row, 5);
	}
}

static int32_t deliver(const memd_artifact_sink *out, const memd_artifact *a, memd_error *err)
{
	return pg_sink_result(out->artifact(out->userdata, a), "artifact", err);
}

/* ---- put ------------------------------------------------------------ */

typedef struct put_ctx {
	const memd_scope *scope;
	const memd_artifact *a;
	int64_t version;
} put_ctx;

static int32_t put_once(pg_conn *c, void *ctx, memd_error *err)
{
	put_ctx *x = ctx;
	const memd_artifact *a = x->a;
	char size[PG_INT_BUF], created[PG_INT_BUF];
	const char *vals[8] = { x->scope->app, x->scope->user, x->scope->session, a->name,
				a->mime_type ? a->mime_type : DEFAULT_MIME,
				a->size ? (const char *)a->data : "",
				pg_i64(size, (int64_t)a->size), pg_i64(created, a->created_us) };
	int lens[8] = { 0, 0, 0, 0, 0, (int)a->size, 0, 0 };
	int fmts[8] = { 0, 0, 0, 0, 0, BINARY, 0, 0 };
	int32_t r = pg_send(c, &SQL_BEGIN, NULL, err);

	if (r == 0)
		r = pg_send(c, &SQL_ARTIFACT_LOCK, vals, err);
	if (r == 0)
		r = pg_send_fmt(c, &SQL_ARTIFACT_INSERT, vals, lens, fmts, 0, err);
	if (r == 0)
		r = pg_send(c, &SQL_COMMIT, NULL, err);
	if (r == 0)
		r = pg_run(c, "store artifact", err);
	if (r == MEMD_ENOTFOUND)
		return memd_error_set(err, MEMD_ENOTFOUND, 0, "session '%.64s' not found",
				      x->scope->session);
	if (r == 0)
		x->version = pg_get_i64(pg_res(c, 2), 0, 0);
	return r;
}

int32_t pg_artifact_put(void *inst, const memd_call *call, const memd_scope *scope,
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
	/* libpq parameter lengths are ints; PostgreSQL's bytea tops out at 1 GB. */
	if (a->size > (uint64_t)INT32_MAX)
		return memd_error_set(err, MEMD_ETOOBIG, 0, "artifact '%.64s' is too big", a->name);
	r = pg_with_conn(inst, call, put_once, &x, err);
	if (r == 0)
		*ret_version = x.version;
	return r;
}

/* ---- reads ---------------------------------------------------------- */

typedef struct read_ctx {
	const memd_call *call;
	const memd_scope *scope;
	const char *name;
	int64_t version;
	const memd_artifact_sink *out;
} read_ctx;

static int32_t get_once(pg_conn *c, void *ctx, memd_error *err)
{
	read_ctx *x = ctx;
	char v[PG_INT_BUF];
	const char *vals[5] = { x->scope->app, x->scope->user, x->scope->session, x->name,
				pg_i64(v, x->version) };
	memd_artifact a;
	PGresult *res;
	int32_t r = pg_send_fmt(c, x->version ? &SQL_ARTIFACT_GET : &SQL_ARTIFACT_GET_LATEST, vals,
				NULL, NULL, BINARY, err);

	if (r == 0)
		r = pg_run(c, "read artifact", err);
	if (r < 0)
		return r;
	res = pg_res(c, 0);
	if (PQntuples(res) < 1)
		return memd_error_set(err, MEMD_ENOTFOUND, 0, "artifact '%.64s'%s not found",
				      x->name, x->version ? " at that version" : "");
	pu_rows_read(x->call, 1);
	artifact_from_row(res, 0, 1, &a);
	r = deliver(x->out, &a, err);
	return r > 0 ? 0 : r;
}

int32_t pg_artifact_get(void *inst, const memd_call *call, const memd_scope *scope,
			const char *name, int64_t version, const memd_artifact_sink *out,
			memd_error *err)
{
	read_ctx x = { .call = call, .scope = scope, .name = name, .version = version, .out = out };
	int32_t r = check_args(scope, name, err);

	if (r == 0 && (!name || !out || !out->artifact))
		r = memd_error_set(err, MEMD_EINVAL, 0, "artifact name or sink is missing");
	if (r == 0 && version < 0)
		r = memd_error_set(err, MEMD_EINVAL, 0, "artifact version must not be negative");
	if (r < 0)
		return r;
	return pg_with_conn(inst, call, get_once, &x, err);
}

/* Deliver every row of a listing result. */
static int32_t deliver_listing(const PGresult *res, const memd_call *call,
			       const memd_artifact_sink *out, memd_error *err)
{
	int32_t r = 0;

	pu_rows_read(call, (uint64_t)PQntuples(res));
	for (int i = 0; r == 0 && i < PQntuples(res); i++) {
		memd_artifact a;
		artifact_from_row(res, i, 0, &a);
		r = deliver(out, &a, err);
	}
	return r > 0 ? 0 : r;
}

static int32_t list_once(pg_conn *c, void *ctx, memd_error *err)
{
	read_ctx *x = ctx;
	const char *vals[3] = { x->scope->app, x->scope->user, x->scope->session };
	int32_t r = pg_send(c, &SQL_BEGIN_READ, NULL, err);

	if (r == 0)
		r = pg_session_send_exists(c, x->scope, err);
	if (r == 0)
		r = pg_send_fmt(c, &SQL_ARTIFACT_LIST, vals, NULL, NULL, BINARY, err);
	if (r == 0)
		r = pg_send(c, &SQL_COMMIT, NULL, err);
	if (r == 0)
		r = pg_run(c, "list artifacts", err);
	if (r == 0)
		r = pg_session_exists_result(pg_res(c, 1), x->call, x->scope, err);
	if (r < 0)
		return r;
	return deliver_listing(pg_res(c, 2), x->call, x->out, err);
}

int32_t pg_artifact_list(void *inst, const memd_call *call, const memd_scope *scope,
			 const memd_artifact_sink *out, memd_error *err)
{
	read_ctx x = { .call = call, .scope = scope, .out = out };
	int32_t r = check_args(scope, NULL, err);

	if (r == 0 && (!out || !out->artifact))
		r = memd_error_set(err, MEMD_EINVAL, 0, "artifact sink is missing");
	if (r < 0)
		return r;
	return pg_with_conn(inst, call, list_once, &x, err);
}

static int32_t versions_once(pg_conn *c, void *ctx, memd_error *err)
{
	read_ctx *x = ctx;
	const char *vals[4] = { x->scope->app, x->scope->user, x->scope->session, x->name };
	int32_t r = pg_send_fmt(c, &SQL_ARTIFACT_VERSIONS, vals, NULL, NULL, BINARY, err);

	if (r == 0)
		r = pg_run(c, "list artifact versions", err);
	if (r < 0)
		return r;
	if (PQntuples(pg_res(c, 0)) == 0)
		return memd_error_set(err, MEMD_ENOTFOUND, 0, "artifact '%.64s' not found", x->name);
	return deliver_listing(pg_res(c, 0), x->call, x->out, err);
}

int32_t pg_artifact_versions(void *inst, const memd_call *call, const memd_scope *scope,
			     const char *name, const memd_artifact_sink *out, memd_error *err)
{
	read_ctx x = { .call = call, .scope = scope, .name = name, .out = out };
	int32_t r = check_args(scope, name, err);

	if (r == 0 && (!name || !out || !out->artifact))
		r = memd_error_set(err, MEMD_EINVAL, 0, "artifact name or sink is missing");
	if (r < 0)
		return r;
	return pg_with_conn(inst, call, versions_once, &x, err);
}

static int32_t delete_once(pg_conn *c, void *ctx, memd_error *err)
{
	read_ctx *x = ctx;
	const char *vals[4] = { x->scope->app, x->scope->user, x->scope->session, x->name };
	int32_t r = pg_send(c, &SQL_ARTIFACT_DELETE, vals, err);

	if (r == 0)
		r = pg_run(c, "delete artifact", err);
	if (r == 0 && strcmp(PQcmdTuples(pg_res(c, 0)), "0") == 0)
		r = memd_error_set(err, MEMD_ENOTFOUND, 0, "artifact '%.64s' not found", x->name);
	return r;
}

int32_t pg_artifact_delete(void *inst, const memd_call *call, const memd_scope *scope,
			   const char *name, memd_error *err)
{
	read_ctx x = { .call = call, .scope = scope, .name = name };
	int32_t r = check_args(scope, name, err);

	if (r == 0 && !name)
		r = memd_error_set(err, MEMD_EINVAL, 0, "artifact name is missing");
	if (r < 0)
		return r;
	return pg_with_conn(inst, call, delete_once, &x, err);
}
