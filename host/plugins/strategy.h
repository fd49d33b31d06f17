/* SPDX-License-Identifier: MIT */
/*
 * strategy: the host's handle on one strategy plugin instance (one per app
 * config entry), and the reader it gets over a session of a store.
 */
#ifndef MEMD_HOST_STRATEGY_H
#define MEMD_HOST_STRATEGY_H

#include <memd/plugin.h>

#include "plugins/loader.h"
#include "plugins/store.h"

typedef struct strategy strategy;

/* Wrap inst (which must be a strategy; MEMD_EABI otherwise). On success the
 * strategy owns inst. */
int32_t strategy_new(loader_instance *inst, strategy **ret, memd_error *err);
/* Accepts NULL. */
void strategy_free(strategy *st);
/* The plugin's name, e.g. "buffer_window". */
const char *strategy_plugin_name(const strategy *st);

/* Run the strategy's context op over scope's session in s; out receives the
 * summary and events. MEMD_ENOTFOUND if the session does not exist. */
int32_t strategy_context(strategy *st, store *s, const memd_call *call, const memd_scope *scope,
			 const memd_context_sink *out, memd_error *err);

/* A past view of a session for the reader: the session as one append
 * left it, though later appends may have been committed since. */
typedef struct strategy_view {
	int64_t last_seq; /* events with seq <= last_seq only (> 0) */
	int64_t version;  /* the session record's version then; 0 = as stored */
} strategy_view;

/* strategy_context over the view v of the session (NULL = as it is now):
 * the reader's events stop at v->last_seq, and its session record says
 * last_seq v->last_seq, version v->version (when set) and summary_seq
 * the newest visible summary at or before v->last_seq. Transcript
 * operations committed after the view (a rewind hiding events of it) are
 * seen: a view bounds what was appended, not what was hidden. */
int32_t strategy_context_view(strategy *st, store *s, const memd_call *call,
			      const memd_scope *scope, const strategy_view *v,
			      const memd_context_sink *out, memd_error *err);
/* Run after_append if the plugin has it (0 otherwise); events it asks to
 * persist go to persist. */
int32_t strategy_after_append(strategy *st, store *s, const memd_call *call,
			      const memd_scope *scope, const memd_event_sink *persist,
			      memd_error *err);
/* Nonzero if the plugin has an after_append op. */
int strategy_has_after_append(const strategy *st);
/* Run on_session_finalize (since ABI 1.2) over scope's session in s;
 * events it asks to persist go to persist. MEMD_ENOTSUP when the plugin
 * has none (a strategy built for 1.0 or 1.1, or one that keeps nothing
 * to fold): the caller finalizes the session without it. */
int32_t strategy_on_session_finalize(strategy *st, store *s, const memd_call *call,
				     const memd_scope *scope, const memd_event_sink *persist,
				     memd_error *err);
/* Nonzero if the plugin has an on_session_finalize op. */
int strategy_has_on_session_finalize(const strategy *st);

#endif
