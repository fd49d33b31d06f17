/* SPDX-License-Identifier: MIT */
/*
 * my_artifacts: versioned artifacts of the MariaDB store: (app, user,
 * session, name) -> immutable versions 1, 2, 3, ... with a mime type and
 * bytes (LONGBLOB), removed with their session.
 */
#ifndef MEMD_MY_ARTIFACTS_H
#define MEMD_MY_ARTIFACTS_H

#include "my_db.h"

/* memd_store_ops members; see api/memd/store.h. inst is the my_store.
 * Names are 1..MEMD_ID_MAX bytes without '/', ".." or control chars. */
int32_t my_artifact_put(void *inst, const memd_call *call, const memd_scope *scope,
			const memd_artifact *a, int64_t *ret_version, memd_error *err);
int32_t my_artifact_get(void *inst, const memd_call *call, const memd_scope *scope,
			const char *name, int64_t version, const memd_artifact_sink *out,
			memd_error *err);
int32_t my_artifact_list(void *inst, const memd_call *call, const memd_scope *scope,
			 const memd_artifact_sink *out, memd_error *err);
int32_t my_artifact_versions(void *inst, const memd_call *call, const memd_scope *scope,
			     const char *name, const memd_artifact_sink *out, memd_error *err);
int32_t my_artifact_delete(void *inst, const memd_call *call, const memd_scope *scope,
			   const char *name, memd_error *err);

#endif
