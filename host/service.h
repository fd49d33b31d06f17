/* SPDX-License-Identifier: MIT */
/*
 * service: internals of the libmemd facade (api/memd/memd.h) that the CLI
 * and tests use beyond the public API.
 */
#ifndef MEMD_HOST_SERVICE_H
#define MEMD_HOST_SERVICE_H

#include <memd/memd.h>

#include "config.h"
#include "settings.h"
#include "store.h"

/* A rule of a caller's own over the parsed config tree, beyond memd's
 * schema (`memd serve`: a non-loopback listen address needs API keys).
 * root is NULL for zero-config, and may fail memd's schema: the rule reads
 * only what it can trust, and adds each problem to d. */
typedef void (*service_config_rule)(const config_node *root, config_diag *d);

/* Check a config file (NULL = zero-config) as memd_open would, without
 * initializing any plugin: syntax, memd's schema, rule (may be NULL), that
 * every named plugin loads and is of the right kind, and every plugin's
 * own keys (types, required keys, choices). Every problem is added to d.
 * extra_path: as memd_options.plugin_path. Returns 0 if there were none,
 * MEMD_EINVAL otherwise (or MEMD_ENOMEM). */
int32_t service_check_config(const char *config_path, const char *const *extra_path,
			     service_config_rule rule, config_diag *d);

/* memd_context with a caller-supplied call context (deadline, rows_read
 * counter): what memd_context does with a default one. */
int32_t service_context(memd *m, const memd_call *call, const char *app, const char *user,
			const char *sid, char **ret_json, memd_error *err);

/* The session store of an open memd (borrowed). */
store *service_session_store(memd *m);

#endif
