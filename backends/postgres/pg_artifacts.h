/* SPDX-License-Identifier: MIT */
/*
 * pg_artifacts: versioned artifacts of the PostgreSQL store. Data travels
 * as binary parameters and results (no escaping, no size doubling); a put
 * takes a transaction-level advisory lock on the (scope, name) so two puts
 * of one name get versions n and n + 1, never the same.
 */
#ifndef MEMD_PG_ARTIFACTS_H
#define MEMD_PG_ARTIFACTS_H

#include "pg_db.h"

/* memd_store_ops members; see api/memd/store.h. inst is the pg_store. */
int32_t pg_artifact_put(void *inst, const memd_call *call, const memd_scope *scope,
			const memd_artifact *a, int64_t *ret_version, memd_error *err);
int32_t pg_artifact_get(void *inst, const memd_call *call, const memd_scope *scope,
			const char *name, int64_t version, const memd_artifact_sink *out,
			memd_error *err);
int32_t pg_artifact_list(void *inst, const memd_call *call, const memd_scope *scope,
			 const memd_artifact_sink *out, memd_error *err);
int32_t pg_artifact_versions(void *inst, const memd_call *call, const memd_scope *scope,
			     const char *name, const memd_artifact_sink *out, memd_error *err);
int32_t pg_artifact_delete(void *inst, const memd_call *call, const memd_scope *scope,
			   const char *name, memd_error *err);

#endif
