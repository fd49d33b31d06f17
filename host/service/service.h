/* SPDX-License-Identifier: MIT */
/*
 * service: internals of the libmemd facade (api/memd/memd.h) that the CLI
 * and tests use beyond the public API.
 */
#ifndef MEMD_HOST_SERVICE_H
#define MEMD_HOST_SERVICE_H

#include <memd/memd.h>

#include "config/config.h"
#include "config/settings.h"
#include "plugins/store.h"
#include "plugins/strategy.h"

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

/* The plugin search path of a config (NULL = zero-config), as memd_open
 * builds it: MEMD_PLUGIN_PATH, extra_path, the config's plugins.path,
 * the install dir. Reads plugins.path from the raw tree, so a config
 * that fails memd's schema still gives its path. *ret is NULL-terminated
 * and malloc'd (free with service_free_search). The config's parse error
 * (MEMD_EINVAL, MEMD_EIO) or MEMD_ENOMEM in err. */
int32_t service_plugin_search(const char *config_path, const char *const *extra_path,
			      char ***ret, memd_error *err);
/* Free what service_plugin_search returned. Accepts NULL. */
void service_free_search(char **search);

/* `memd plugins list`: every plugin a config names, loaded and validated
 * but never initialized (so no store is opened and no file created), as
 * {"version","abi","search_path":[...],"plugins":[{"name","version",
 * "description","kinds","path","abi","threadsafe","instances":[slot...]}]}
 * in *ret_json (malloc'd). A config problem or a refused plugin is added
 * to d and makes it MEMD_EINVAL (nothing in *ret_json); MEMD_ENOMEM. */
int32_t service_plugins_list(const char *config_path, const char *const *extra_path,
			     char **ret_json, config_diag *d);

/* memd_context with a caller-supplied call context (deadline, rows_read
 * counter): what memd_context does with a default one. */
int32_t service_context(memd *m, const memd_call *call, const char *app, const char *user,
			const char *sid, char **ret_json, memd_error *err);
/* service_context with memd_context_read's flags. */
int32_t service_context_read(memd *m, const memd_call *call, const char *app, const char *user,
			     const char *sid, uint32_t flags, char **ret_json, memd_error *err);
/* service_context_read with memd_context_recall's query (NULL: the
 * window's latest user message). */
int32_t service_context_recall(memd *m, const memd_call *call, const char *app, const char *user,
			       const char *sid, uint32_t flags, const char *query, char **ret_json,
			       memd_error *err);

/* MEMD_EINVAL if query is longer than a context's recall query may be
 * (what service_context_recall refuses): checked before a write that
 * answers its context, so that such a query writes nothing. */
int32_t service_check_recall_query(const char *query, memd_error *err);

/* service_context_recall over a past view of the session (NULL = as it
 * is now; plugins/strategy.h, strategy_context_view): what an append
 * that answers its context reads. */
int32_t service_context_view(memd *m, const memd_call *call, const char *app, const char *user,
			     const char *sid, uint32_t flags, const char *query,
			     const strategy_view *view, char **ret_json, memd_error *err);

/* For tests: fn(userdata) runs in memd_events_append_context,
 * memd_messages_append_context and the lane opens that answer a context,
 * after the write is committed and before the context is read (another
 * writer appending there must not change the answer). NULL = none. Set
 * it before the calls it should affect. */
typedef void (*service_between_fn)(void *userdata);
void service_set_between_hook(memd *m, service_between_fn fn, void *userdata);

/* The app strategy's on_session_finalize for one session, as the lane
 * watcher runs it when the session's lane expires (exclusive with the
 * strategy's after_append for the session; events it asks for are
 * appended). 0 when the strategy has none; MEMD_EINVAL for bad ids; else
 * the strategy's or the store's error. */
int32_t service_session_finalize_strategy(memd *m, const char *app, const char *user,
					  const char *sid, memd_error *err);

/* The session store of an open memd (borrowed). */
store *service_session_store(memd *m);

/* Sessions the memory worker has queued or is extracting now (0: it is
 * idle; for tests that wait for it). */
uint32_t service_memory_queued(memd *m);

#endif
