/* SPDX-License-Identifier: MIT */
/*
 * libmemd: the memd service facade as a C API.
 *
 * Everything memd does over REST, a C program can do by linking libmemd
 * (the HTTP server and the CLI are thin layers over these calls). Bodies
 * and results are JSON text in the shapes api/openapi.yaml documents, so a
 * request means the same thing whichever way it arrives.
 *
 * Conventions:
 *  - Every call returns 0 or a negative MEMD_E* code and fills the
 *    caller-owned err (code, RETRYABLE flag, message) on failure.
 *  - ret_* outputs are written only on success. Strings returned through
 *    char ** are malloc'd; free them with memd_free().
 *  - Ids (app, user, session, event, invocation) are 1..255 bytes of UTF-8
 *    without control characters or '/'; anything else is MEMD_EINVAL.
 *  - A memd handle is thread-safe: call it from as many threads as you like.
 *  - A call gives the plugins it reaches a deadline of
 *    server.request_timeout_ms (default 30 s) from its start: a store that
 *    cannot serve it by then (a queue behind a stuck writer, an exhausted
 *    connection pool) fails it with MEMD_ETIMEDOUT, retryable. Background
 *    work (strategies' after_append, indexing) has no such deadline.
 */
#ifndef MEMD_MEMD_H
#define MEMD_MEMD_H

#include <stddef.h>
#include <stdint.h>

#include "abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define MEMD_API __attribute__((visibility("default")))
#else
#define MEMD_API
#endif

typedef struct memd memd;

/* Log callback: one line, no newline, never containing secrets. */
typedef void (*memd_log_fn)(void *userdata, int32_t level, const char *component,
			    const char *line);

/* memd_options.flags */
/* Open neither index.vector.store nor the vector index: for a process that
 * needs no vector search while another one (memd serve) holds a vector
 * store that admits one process at a time (filevec locks its directory).
 * Vector and hybrid searches then fail with MEMD_EINVAL; what is written
 * meanwhile is indexed by whoever opens the store next (the vector index
 * catches up from the session store's change feed). */
#define MEMD_OPEN_NO_VECTOR 0x1u

typedef struct memd_options {
	uint32_t struct_size;     /* sizeof(memd_options) */
	uint32_t flags;           /* MEMD_OPEN_*, or 0 */
	/* YAML or JSON config file; NULL = zero-config (SQLite ./data/memd.db,
	 * buffer_window of 20, keyword search). */
	const char *config_path;
	/* Extra plugin directories searched before config's plugins.path,
	 * NULL-terminated; NULL = none. MEMD_PLUGIN_PATH (colon-separated) is
	 * searched first of all. */
	const char *const *plugin_path;
	memd_log_fn log;          /* NULL = discard */
	void *log_userdata;
	int32_t log_level;        /* MEMD_LOG_*; lines above it are dropped */
	int32_t reserved;
} memd_options;

/* Read config, load and init every plugin it names, run store migrations.
 * On failure nothing is left open and err says what and where (file:line
 * for config errors, the plugin file and reason for refused plugins). */
MEMD_API int32_t memd_open(const memd_options *opts, memd **ret, memd_error *err);
/* Cancel background jobs and wait for the running one to stop, finish
 * other background work (pending summaries), fini plugins, unload.
 * Accepts NULL. */
MEMD_API void memd_close(memd *m);
/* Free a string returned by libmemd. Accepts NULL. */
MEMD_API void memd_free(void *p);
/* "memd X.Y.Z (ABI major.minor)". Static storage. */
MEMD_API const char *memd_version_string(void);

/* ---- sessions --------------------------------------------------------- */

/* body: {"id"?: str, "title"?: str, "metadata"?: object, "state"?: object}
 * (all optional; NULL body = {}). id defaults to a new UUIDv7.
 * Result: the session object. MEMD_ECONFLICT if the id exists. */
MEMD_API int32_t memd_session_create(memd *m, const char *app, const char *user,
				     const char *body_json, char **ret_json, memd_error *err);

/* Which events memd_session_get includes. */
typedef struct memd_get_options {
	uint32_t struct_size;     /* sizeof(memd_get_options) */
	uint32_t flags;           /* MEMD_GET_* */
	uint32_t events;          /* MEMD_GET_EVENTS: the newest N (0 = all matching) */
	uint32_t reserved;
	int64_t after_seq;        /* MEMD_GET_EVENTS: only seq > after_seq */
	int64_t after_time_us;    /* MEMD_GET_EVENTS: only timestamp > this */
} memd_get_options;
#define MEMD_GET_EVENTS 0x1u
/* Leave out each event's "text" (the plain text memd extracts from its
 * content, for search and token counts: a second copy of the content's
 * text). Taken by memd_session_get (memd_get_options.flags),
 * memd_events_page and memd_context_read. */
#define MEMD_READ_NO_TEXT 0x100u

/* Result: the session object, plus "events": [...] when asked. */
MEMD_API int32_t memd_session_get(memd *m, const char *app, const char *user, const char *sid,
				  const memd_get_options *opts, char **ret_json, memd_error *err);

#define MEMD_LIST_INCLUDE_ARCHIVED 0x1u
#define MEMD_LIST_LIMIT_DEFAULT 50
#define MEMD_LIST_LIMIT_MAX 1000
/* Newest first. cursor: NULL or the next_cursor of the previous page;
 * limit 0 = default. Result: {"sessions": [...], "next_cursor": str|null}. */
MEMD_API int32_t memd_session_list(memd *m, const char *app, const char *user,
				   const char *cursor, uint32_t limit, uint32_t flags,
				   char **ret_json, memd_error *err);

/* memd_session_list with filters (each set filter must hold). */
typedef struct memd_session_list_options {
	uint32_t struct_size;        /* sizeof(memd_session_list_options) */
	uint32_t flags;              /* MEMD_LIST_* */
	uint32_t limit;              /* 0 = default */
	uint32_t reserved;
	const char *cursor;          /* NULL or the next_cursor of the previous page */
	const char *origin_platform; /* only sessions a lane made for a source of this
	                              * platform (any case); NULL = any */
	const char *lane_key;        /* only sessions made by this lane; NULL = any */
	/* Since the transcripts work: */
	uint32_t order;              /* MEMD_ORDER_CREATED (0, newest created first) or
	                              * MEMD_ORDER_ACTIVITY (newest activity first) */
	uint32_t reserved2;
	int64_t active_within_s;     /* only sessions active in the last N seconds; 0 = any */
} memd_session_list_options;
#define MEMD_ORDER_CREATED  0u
#define MEMD_ORDER_ACTIVITY 1u
/* Every session object carries "message_count" (visible events that are
 * not summaries) and "last_activity" (= "updated"). A session without a
 * title is titled from its first user message (as today). */

/* As memd_session_list, with opts (NULL = no filter, default limit). */
MEMD_API int32_t memd_session_list_filtered(memd *m, const char *app, const char *user,
					    const memd_session_list_options *opts,
					    char **ret_json, memd_error *err);

/* body: {"title"?: str, "metadata"?: object, "archived"?: bool}.
 * Result: the session object. */
MEMD_API int32_t memd_session_patch(memd *m, const char *app, const char *user, const char *sid,
				    const char *body_json, char **ret_json, memd_error *err);

/* Removes the session with its events, state, artifacts, temp: state and
 * index entries. MEMD_ENOTFOUND if absent. */
MEMD_API int32_t memd_session_delete(memd *m, const char *app, const char *user,
				     const char *sid, memd_error *err);

/* ---- events ----------------------------------------------------------- */

/* body: {"events": [event...], "state_delta"?: object,
 *        "expected_version"?: int, "invocation_id"?: str,
 *        "usage"?: usage (see lanes; added to the session's sums and its
 *        lane's, in the same transaction)}
 * event: {"id"?, "invocation_id"?, "author"?, "role": "user|assistant|
 *         system|tool", "branch"?, "content": str | {"parts": [...]},
 *         "actions"?, "metadata"?, "timestamp"?}
 * One atomic append. temp: keys of state_delta stay in memory for the
 * invocation. Result: {"version": int, "seqs": [int...], "replayed": bool}.
 * MEMD_ECONFLICT on an expected_version mismatch. */
MEMD_API int32_t memd_events_append(memd *m, const char *app, const char *user, const char *sid,
				    const char *body_json, char **ret_json, memd_error *err);

#define MEMD_PAGE_LIMIT_DEFAULT 100
#define MEMD_PAGE_LIMIT_MAX 1000
/* Events with seq > after_seq, ascending, at most limit (0 = default).
 * Result: {"events": [...], "next_after_seq": int|null}. */
MEMD_API int32_t memd_events_list(memd *m, const char *app, const char *user, const char *sid,
				  int64_t after_seq, uint32_t limit, char **ret_json,
				  memd_error *err);
/* Include hidden events (rewound, rewritten or cleared), each with
 * "hidden": {"at", "by": operation id, "kind"}: the audit trail. For
 * memd_events_query. The HTTP API allows it to write and admin keys. */
#define MEMD_READ_INCLUDE_HIDDEN 0x400u

/* memd_events_list with flags (MEMD_READ_NO_TEXT, or 0). */
MEMD_API int32_t memd_events_page(memd *m, const char *app, const char *user, const char *sid,
				  int64_t after_seq, uint32_t limit, uint32_t flags,
				  char **ret_json, memd_error *err);

/* memd_events_page with a role filter: roles is a comma-separated list of
 * user, assistant, system, tool, summary (NULL or "" = all); flags
 * MEMD_READ_NO_TEXT | MEMD_READ_INCLUDE_HIDDEN. MEMD_EINVAL for an
 * unknown role. */
MEMD_API int32_t memd_events_query(memd *m, const char *app, const char *user, const char *sid,
				   int64_t after_seq, uint32_t limit, const char *roles,
				   uint32_t flags, char **ret_json, memd_error *err);

/* ---- transcripts: rewind, rewrite, clear, undo, state history ---------- */

/* Events are never deleted by these calls: they are hidden (soft delete)
 * by an *operation* the session records, which keeps the audit trail and
 * can be undone. Hidden events leave context, event pages, summaries and
 * search (the indexes follow through the change feed); seqs are never
 * reused and version advances. Operation JSON: {"id", "kind": "rewind" |
 * "rewrite" | "clear" | "undo", "created", "version" (the session's after
 * it), "hidden_count", "unhidden_count", "appended": {"first_seq",
 * "last_seq"} | null, "undo_of": id | null, "undone_by": id | null}.
 * Every body takes "expected_version"?: int (MEMD_ECONFLICT on a
 * mismatch, nothing done). */

/* Back up n user turns. body: {"turns": int >= 1} or {"to_seq": int >= 1}
 * (hide from that seq on), "expected_version"?. Hides the last n user
 * messages and everything after the earliest of them; session state
 * keys go back to their values before the first hidden event (state
 * history); "user:" and "app:" keys only where no other write changed
 * them since (the others are listed as not restored); temp: keys stay.
 * Result: {"rewound_count", "turns_undone", "target_text": the text of
 * the earliest undone user message | null, "operation": operation,
 * "version", "state": {"restored": [key...], "not_restored": [key...]}}.
 * MEMD_EINVAL when there are fewer user turns than asked (nothing done). */
MEMD_API int32_t memd_session_rewind(memd *m, const char *app, const char *user,
				     const char *sid, const char *body_json, char **ret_json,
				     memd_error *err);

/* Replace the whole transcript atomically, creating the session if it
 * does not exist. body: {"messages": [message...], "format"?: "openai"
 * (default) | "events", "expected_version"?, "state_delta"?}. The visible
 * events are hidden (operation kind "rewrite"), the new ones appended.
 * Result: {"operation", "version", "seqs", "hidden_count", "created":
 * bool}. */
MEMD_API int32_t memd_messages_put(memd *m, const char *app, const char *user,
				   const char *sid, const char *body_json, char **ret_json,
				   memd_error *err);

/* Append chat messages. body: {"messages": [message...], "format"?:
 * "openai" (default) | "events", "expected_version"?, "invocation_id"?}. A message
 * may carry "id" (memd's extension) for idempotent retries, as events do.
 * Result: as memd_events_append's. */
MEMD_API int32_t memd_messages_append(memd *m, const char *app, const char *user,
				      const char *sid, const char *body_json, char **ret_json,
				      memd_error *err);

/* The visible transcript as OpenAI chat-completions messages: summaries
 * as a "system" message saying what they cover, "user", "assistant" (with
 * "tool_calls"), "tool" (with "tool_call_id"), multimodal parts as
 * content parts; passable unchanged as "messages" to any
 * OpenAI-compatible endpoint. roles: as memd_events_query, but NULL or
 * "" is every role except summary (add "summary" to see them). Result:
 * {"format": "openai", "messages": [...]}. MEMD_ENOTFOUND without the
 * session; MEMD_ETOOBIG over server.max_response_bytes. */
MEMD_API int32_t memd_messages_get(memd *m, const char *app, const char *user,
				   const char *sid, const char *roles, char **ret_json,
				   memd_error *err);

/* The context (memd_context_read) as OpenAI messages: {"format":
 * "openai", "strategy", "tokens", "messages": [...], "notice"?}. A window
 * never separates an assistant's tool calls from their results. */
#define MEMD_READ_OPENAI 0x200u

/* Hide every event (operation kind "clear"); the session, its state and
 * artifacts stay. body: {"expected_version"?} or NULL. Result:
 * {"operation", "version", "hidden_count"}. */
MEMD_API int32_t memd_events_clear(memd *m, const char *app, const char *user,
				   const char *sid, const char *body_json, char **ret_json,
				   memd_error *err);

/* Reverse operation op_id (a rewind, rewrite or clear): what it hid comes
 * back, what it appended is hidden, and the state keys it restored go
 * back (as a rewind restores them). MEMD_ECONFLICT if anything was written
 * to the session after it, or it was undone already. body:
 * {"expected_version"?} or NULL. Result: {"operation": the undo's,
 * "undone": the reversed one, "unhidden_count", "hidden_count",
 * "version", "state": {"restored", "not_restored"}}. */
MEMD_API int32_t memd_operation_undo(memd *m, const char *app, const char *user,
				     const char *sid, const char *op_id, const char *body_json,
				     char **ret_json, memd_error *err);

/* Result: {"operations": [operation...]}, newest first. */
MEMD_API int32_t memd_operations_list(memd *m, const char *app, const char *user,
				      const char *sid, char **ret_json, memd_error *err);

/* The session's state changes, oldest first: {"changes": [{"version",
 * "seq", "key", "old": value | null, "new": value | null (deleted),
 * "at", "operation": id | null}], "next_cursor": str | null}. cursor:
 * NULL or a previous next_cursor; limit 0 = MEMD_PAGE_LIMIT_DEFAULT. */
MEMD_API int32_t memd_state_history(memd *m, const char *app, const char *user,
				    const char *sid, const char *cursor, uint32_t limit,
				    char **ret_json, memd_error *err);

/* ---- working memory ---------------------------------------------------- */

/* The app's strategy's view. Result: {"strategy": str, "summary": event|null,
 * "events": [...], "tokens": int}, plus "notice": {"reason": "idle" |
 * "daily" | "suspended", "text": str} on the first read of a session an
 * automatic lane reset made (once, unless the lane's reset policy has
 * notify: false). With the app's working_memory.recall set, also
 * "memories": {"query": str | null, "items": [search result...],
 * "tokens": int}: the recall.k memories and past events (recall.sources)
 * most relevant to the latest user message of the window (or the
 * caller's query; null: neither, then no items), through the index in
 * recall.mode, none of the window's events, none scoring below
 * recall.min_score; taken best first while the tokens of their text fit
 * recall.max_tokens and, when the app's strategy has a max_tokens key
 * (token_window, summary_buffer), what the window leaves of it (an item
 * that does not fit is skipped, a smaller one after it may fit);
 * "tokens" (the whole context's) counts them. With MEMD_READ_OPENAI the
 * items are one "system" message placed first (after the summary's):
 * "Recalled from earlier conversations and long-term memory:", then per
 * item a line "- " text (a memory) or "- [" timestamp "] " author (else
 * role) ": " text (an event). A recall whose search fails leaves the
 * context as it is: no items, and "error": {"code", "message",
 * "retryable"} in the section says why (e.g. "unavailable" during the
 * user's rebuild); only a lack of memory fails the read. */
MEMD_API int32_t memd_context(memd *m, const char *app, const char *user, const char *sid,
			      char **ret_json, memd_error *err);
/* memd_context with flags (MEMD_READ_NO_TEXT, MEMD_READ_OPENAI, or 0). */
MEMD_API int32_t memd_context_read(memd *m, const char *app, const char *user, const char *sid,
				   uint32_t flags, char **ret_json, memd_error *err);
/* memd_context_read with the recall query given: the memories section
 * answers query (NULL: the latest user message's text; at most 8192
 * bytes, else MEMD_EINVAL). Without recall configured, as
 * memd_context_read. */
MEMD_API int32_t memd_context_recall(memd *m, const char *app, const char *user,
				     const char *sid, uint32_t flags, const char *query,
				     char **ret_json, memd_error *err);

/* ---- one round trip per agent step ------------------------------------- */

/* memd_events_append, then the context (memd_context_recall's flags and
 * query) as it is right after this append, in one call: the strategy
 * reads the session as the append left it (its events up to the
 * append's last seq, the session record of its version), so other
 * writers appending before the read change nothing in the answer. A
 * replay (every event id existed, nothing written) answers the context
 * as of the original append's events; an append without events (state
 * only) the context as it is when read. Result: the append's result
 * plus "context": the context object (with MEMD_READ_OPENAI the OpenAI
 * form). An append that fails fails the call as memd_events_append's
 * does. Once the append is durable the call succeeds: a context read
 * that fails then gives "context_error": {"code", "message",
 * "retryable"} (an error body's "error") in place of "context", and the
 * append must not be sent again. */
MEMD_API int32_t memd_events_append_context(memd *m, const char *app, const char *user,
					    const char *sid, const char *body_json,
					    uint32_t flags, const char *query, char **ret_json,
					    memd_error *err);

/* memd_messages_append, then the context right after it, as
 * memd_events_append_context. */
MEMD_API int32_t memd_messages_append_context(memd *m, const char *app, const char *user,
					      const char *sid, const char *body_json,
					      uint32_t flags, const char *query, char **ret_json,
					      memd_error *err);

/* ---- state ------------------------------------------------------------ */

/* Merged state: session keys plain, "app:", "user:" and live "temp:" keys
 * with their prefixes. */
MEMD_API int32_t memd_state_get(memd *m, const char *app, const char *user, const char *sid,
				char **ret_json, memd_error *err);
/* body: a delta object (null deletes). Atomic; bumps the version like an
 * append with no events. Result: the merged state. */
MEMD_API int32_t memd_state_patch(memd *m, const char *app, const char *user, const char *sid,
				  const char *body_json, char **ret_json, memd_error *err);

/* Drop the temp: state written under this invocation. */
MEMD_API int32_t memd_invocation_end(memd *m, const char *app, const char *user,
				     const char *sid, const char *invocation_id, memd_error *err);

/* ---- artifacts -------------------------------------------------------- */

/* Store a new version of name. Result: {"name", "version", "mime_type",
 * "size", "created"}. */
MEMD_API int32_t memd_artifact_put(memd *m, const char *app, const char *user, const char *sid,
				   const char *name, const char *mime_type, const void *data,
				   size_t size, char **ret_json, memd_error *err);
/* version 0 = latest. ret_json: the metadata; ret_data/ret_size: the bytes
 * (malloc'd; memd_free). */
MEMD_API int32_t memd_artifact_get(memd *m, const char *app, const char *user, const char *sid,
				   const char *name, int64_t version, char **ret_json,
				   void **ret_data, size_t *ret_size, memd_error *err);
/* Result: {"artifacts": [metadata of the latest version of each name]}. */
MEMD_API int32_t memd_artifact_list(memd *m, const char *app, const char *user, const char *sid,
				    char **ret_json, memd_error *err);
/* Result: {"versions": [metadata...]}, ascending. */
MEMD_API int32_t memd_artifact_versions(memd *m, const char *app, const char *user,
					const char *sid, const char *name, char **ret_json,
					memd_error *err);
MEMD_API int32_t memd_artifact_delete(memd *m, const char *app, const char *user, const char *sid,
				      const char *name, memd_error *err);

/* ---- search ------------------------------------------------------------- */

/* Search (app, user)'s events and memories; nothing of another app or
 * user is ever returned. body: {"query": str, "k"?: int (1..1000,
 * default 10), "mode"?: "keyword" | "vector" | "hybrid" (default: config
 * index.default_mode), "sources"?: ["events" and/or "memories"] (default
 * both), "session_id"?: str, "authors"?: [str], "after"?, "before"?: RFC
 * 3339 times (exclusive bounds on the event's timestamp; session_id,
 * authors, after and before narrow events only)}.
 * Sees every event appended before the call: it waits (up to the
 * deadline of a request, 10 s) for the indexes to catch up, else fails
 * with MEMD_ETIMEDOUT or MEMD_EUNAVAIL (retryable); MEMD_EUNAVAIL
 * (retryable) at once while a rebuild of (app, user) runs. Result: {"mode": str,
 * "results": [{"source": "event", "session_id", "event_id", "seq",
 * "author", "role", "text", "timestamp", "score"} | {"source": "memory",
 * "memory_id", "text", "kind", "topics", "entities", "updated", "score"}]},
 * best first; scores are BM25 (keyword), cosine
 * similarity (vector) or, hybrid, (1 - w) * keyword + w * vector with
 * each list's scores min-max normalised to [0, 1] over its candidates
 * (an event missing from a list gets 0 from it) and w config's
 * index.hybrid.vector_weight (default 0.05 with the hash embedder, 0.15
 * with openai): in [0, 1].
 * MEMD_EINVAL for a bad body or a mode whose index is not enabled. */
MEMD_API int32_t memd_search(memd *m, const char *app, const char *user, const char *body_json,
			     char **ret_json, memd_error *err);

/* Progress of memd_index_rebuild: done of total units (events; feed
 * positions for a full rebuild; total 0 = unknown), every 200 ms or so
 * and once at the end. Return 0 to go on, anything else to stop (the
 * rebuild then fails with MEMD_ECANCELED; a stopped rebuild of one user
 * makes the indexes replay the change feed, so they end up whole). */
typedef int32_t (*memd_progress_fn)(void *userdata, uint64_t done, uint64_t total);

/* Rebuild the search indexes from the sessions, which are the source of
 * truth: of one (app, user) when both are given (its entries are
 * dropped and re-read from its sessions), of everything when both are
 * NULL (the indexes, including the vector index's durable cursor, are
 * reset and replay the change feed). Blocks until done (a rebuild that
 * does not hold the caller: memd_index_rebuild_start); progress may be
 * NULL. Meanwhile, searches of that (app, user) fail with MEMD_EUNAVAIL
 * (retryable) and other searches go on; during a rebuild of everything,
 * searches wait for the indexes to catch up. In a process
 * other than the server, only the durable vector index is affected (the
 * keyword index lives in each process's memory and is rebuilt at every
 * start). */
MEMD_API int32_t memd_index_rebuild(memd *m, const char *app, const char *user,
				    memd_progress_fn progress, void *userdata, memd_error *err);

/* ---- background jobs ----------------------------------------------------- */

/* Long operations run as background jobs on memd's job thread, never on
 * the caller's thread; a job is polled by id. Job JSON: {"id", "kind"
 * ("index_rebuild"), "state" ("queued" | "running" | "succeeded" |
 * "failed" | "canceled"), "scope": {"app", "user"} ({} for everything),
 * "progress": {"done", "total"} (units of the job; total 0 = not known
 * yet), "created", "started", "finished" (RFC 3339 UTC, null until
 * then), "cancel_requested": bool, "error"?: {"code", "message",
 * "retryable"} (failed or canceled)}. Jobs run one at a time, oldest
 * first. Finished jobs are kept for an hour, the newest 64 of them, then
 * forgotten (MEMD_ENOTFOUND). memd_close cancels every job. */

/* Start rebuilding the search indexes as memd_index_rebuild does (app
 * and user both set, or both NULL for everything) as a job, and return
 * at once with the job in *ret_json (malloc'd; memd_free). If a rebuild
 * of that scope is queued or running already, no other is started: that
 * job is returned and *ret_existing is 1 (else 0), so one index is never
 * rebuilt twice at once. Canceling a running rebuild leaves the indexes
 * whole: they replay the change feed (see memd_index_rebuild).
 * MEMD_EINVAL for a bad scope or when no index is enabled; MEMD_EUNAVAIL
 * (retryable) when too many jobs are queued or memd is closing. */
MEMD_API int32_t memd_index_rebuild_start(memd *m, const char *app, const char *user,
					  char **ret_json, int32_t *ret_existing, memd_error *err);

/* The job id as JSON (above) in *ret_json. app NULL: any job; app set:
 * only a job of that app (a job of another app, or of everything, is
 * MEMD_ENOTFOUND, as an unknown or forgotten id is). */
MEMD_API int32_t memd_job_get(memd *m, const char *app, const char *id, char **ret_json,
			      memd_error *err);

/* {"jobs": [job, ...]}: the jobs kept, newest first; only app's when app
 * is set (NULL: all). */
MEMD_API int32_t memd_job_list(memd *m, const char *app, char **ret_json, memd_error *err);

/* Cancel job id (found as by memd_job_get) and return it as it is then:
 * a queued job is canceled at once; a running one gets cancel_requested
 * and reaches "canceled" soon after (or "succeeded" if it had done
 * everything); a finished job is returned unchanged. */
MEMD_API int32_t memd_job_cancel(memd *m, const char *app, const char *id, char **ret_json,
				 memd_error *err);

/* ---- lanes: the conversations of a chat gateway ------------------------ */

/* A lane is a deterministic key for one conversation (a DM, a group, a
 * thread) naming its current session; memd decides when the lane starts a
 * new session (reset policy, suspension), tracks its turn (one at a time,
 * under a lease), its crash recovery (resume_pending) and an inbox of
 * messages that arrive while a turn runs. Lanes live in the session store,
 * so any number of memd processes over one database agree. A store without
 * lane support (ABI below 1.2) makes every lane call fail with
 * MEMD_ENOTSUP, naming the store.
 *
 * Lane keys are 1..255 bytes of UTF-8 without control characters or '/'
 * (like ids). Times in JSON are RFC 3339 UTC. JSON shapes:
 *
 *  source: {"platform": str (required), "chat_type"?: "dm" | "group" |
 *    "channel" | "thread" (default "dm"), "chat_id"?, "chat_name"?,
 *    "thread_id"?, "user_id"?, "user_id_alt"?, "user_name"?: str}
 *  usage: {"input_tokens"?, "output_tokens"?, "cache_read_tokens"?,
 *    "cache_write_tokens"?, "last_prompt_tokens"?: int >= 0,
 *    "cost_usd"?: number >= 0}
 *  lane: {"key", "user", "session_id", "origin": source | null, "created",
 *    "updated", "version", "suspended": bool, "resume_pending": bool,
 *    "resume_reason": str | null, "interruptions": int, "finalized": bool,
 *    "fresh_reset": bool, "last_reset": null | {"reason", "at",
 *    "previous_session", "had_activity"}, "turn": null | {"id", "started",
 *    "lease_until"}, "inbox_depth": int, "usage": usage (with all fields)}
 *
 * Sessions made by a lane carry "lane_key", "origin", "previous_session",
 * "start_reason", "ended" and "end_reason" (null while open) and "usage". */

/* Derive the lane of a message source by the app's lanes config: DMs are
 * always private; groups and channels are per user unless
 * group_sessions_per_user is false; threads are shared unless
 * thread_sessions_per_user is true; the participant is user_id_alt, else
 * user_id; without identifiers one shared lane per platform. Result:
 * {"key", "user" (the user scope: the participant's, or one derived from
 * the chat for a shared lane), "shared": bool, "source": the source as
 * normalized}. Pure: writes nothing. MEMD_EINVAL for a bad source. */
MEMD_API int32_t memd_lane_resolve(memd *m, const char *app, const char *body_json,
				   char **ret_json, memd_error *err);

/* Get-or-create (the entry point for every incoming message). body:
 * {"source"?: source} (NULL = {}): kept as the lane's origin and as the
 * origin of a session it creates. In this order: no lane yet: create it
 * with a new session; suspended: a new session (reset reason
 * "suspended"); resume_pending: keep the session ("resumed": true);
 * the reset policy says expired (idle or daily): a new session; else keep
 * it and mark activity. A lane whose turn is in progress is never reset
 * (a suspension waits for the turn's end). A new session ends the old one
 * and links to it. A lane whose session was deleted gets a new one (reset
 * reason "deleted"). Result: {"lane": lane,
 * "session": session, "created": bool, "reset": null | {"reason",
 * "had_activity", "previous_session"}, "resumed": bool}. Racing opens of
 * one key (any number of processes) agree on one session. */
MEMD_API int32_t memd_lane_open(memd *m, const char *app, const char *user, const char *key,
				const char *body_json, char **ret_json, memd_error *err);

/* memd_lane_resolve then memd_lane_open in one call. body: a source.
 * Result: memd_lane_open's, plus "key", "user" and "shared". */
MEMD_API int32_t memd_lane_open_source(memd *m, const char *app, const char *body_json,
				       char **ret_json, memd_error *err);

/* memd_lane_open, then the context of the session it opened as the open
 * left it (its events up to the session's last_seq, as
 * memd_events_append_context bounds its read), in one call. flags and
 * query: memd_context_recall's. Result: memd_lane_open's plus "context",
 * or "context_error" when the open succeeded but the read failed (as
 * memd_events_append_context's). */
MEMD_API int32_t memd_lane_open_context(memd *m, const char *app, const char *user,
					const char *key, const char *body_json, uint32_t flags,
					const char *query, char **ret_json, memd_error *err);

/* memd_lane_open_source with the context, as memd_lane_open_context. */
MEMD_API int32_t memd_lane_open_source_context(memd *m, const char *app, const char *body_json,
					       uint32_t flags, const char *query,
					       char **ret_json, memd_error *err);

/* Result: the lane. MEMD_ENOTFOUND if there is none. */
MEMD_API int32_t memd_lane_get(memd *m, const char *app, const char *user, const char *key,
			       char **ret_json, memd_error *err);

/* memd_lane_list_options.flags: filters, all of which must hold. */
#define MEMD_LANES_SUSPENDED          0x1u
#define MEMD_LANES_NOT_SUSPENDED      0x2u
#define MEMD_LANES_RESUME_PENDING     0x4u
#define MEMD_LANES_NOT_RESUME_PENDING 0x8u
#define MEMD_LANES_IN_TURN            0x10u

typedef struct memd_lane_list_options {
	uint32_t struct_size;     /* sizeof(memd_lane_list_options) */
	uint32_t flags;           /* MEMD_LANES_* */
	uint32_t limit;           /* 0 = MEMD_LIST_LIMIT_DEFAULT; at most MEMD_LIST_LIMIT_MAX */
	uint32_t reserved;
	int64_t active_within_s;  /* only lanes active in the last N seconds; 0 = any */
	const char *cursor;       /* NULL or the next_cursor of the previous page */
} memd_lane_list_options;

/* Lanes of (app, user), or of every user of app when user is NULL, newest
 * activity first. opts NULL = no filter, default limit. Result:
 * {"lanes": [lane...], "next_cursor": str | null}. */
MEMD_API int32_t memd_lane_list(memd *m, const char *app, const char *user,
				const memd_lane_list_options *opts, char **ret_json,
				memd_error *err);

/* Explicit reset (a user's /new): a new session (start_reason
 * "explicit", fresh_reset), the old one ended, the inbox cleared; creates
 * the lane if needed. body: {"source"?: source}. MEMD_ECONFLICT while a
 * turn is in progress. Result: as memd_lane_open's, reset.reason
 * "explicit". */
MEMD_API int32_t memd_lane_reset(memd *m, const char *app, const char *user, const char *key,
				 const char *body_json, char **ret_json, memd_error *err);

/* Point the lane at an existing session of the same (app, user) (a user's
 * /resume): the current session is ended, the target reopened. body:
 * {"session_id": str}. MEMD_ENOTFOUND for an unknown session (another
 * user's is unknown too); MEMD_ECONFLICT while a turn is in progress.
 * Result: {"lane": lane, "session": session}. */
MEMD_API int32_t memd_lane_switch(memd *m, const char *app, const char *user, const char *key,
				  const char *body_json, char **ret_json, memd_error *err);

/* Suspend the lane (a user's /stop): its next open starts a new session;
 * resume_pending is cleared. Result: the lane. */
MEMD_API int32_t memd_lane_suspend(memd *m, const char *app, const char *user,
				   const char *key, char **ret_json, memd_error *err);

/* Forget the lane and its inbox (its sessions stay). */
MEMD_API int32_t memd_lane_delete(memd *m, const char *app, const char *user, const char *key,
				  memd_error *err);

/* ---- turns ---- */

/* Begin a turn. body: {"lease_ms"?: int} (default lanes.lease_ms, at most
 * lanes.max_lease_ms). Result: {"turn_id", "lease_ms", "lease_until",
 * "lane": lane}. MEMD_ECONFLICT when another turn holds an unexpired
 * lease (the message names the lease's end and the inbox depth); a turn
 * whose lease ran out is first recorded as interrupted
 * ("restart_interrupted"). MEMD_ENOTFOUND without a lane (open first). */
MEMD_API int32_t memd_turn_begin(memd *m, const char *app, const char *user, const char *key,
				 const char *body_json, char **ret_json, memd_error *err);

/* Extend the turn's lease. body: {"lease_ms"?: int}. Result: as
 * memd_turn_begin's. MEMD_ECONFLICT for a turn that is not the lane's
 * (ended, expired and replaced, or never begun). */
MEMD_API int32_t memd_turn_heartbeat(memd *m, const char *app, const char *user,
				     const char *key, const char *turn_id, const char *body_json,
				     char **ret_json, memd_error *err);

/* End the turn. body: {"outcome": "ok" | "failed" | "interrupted",
 * "reason"?: "shutdown_timeout" | "restart_timeout" | str, "usage"?:
 * usage}. ok clears resume_pending and the interruption count;
 * interrupted sets resume_pending (reason, default "interrupted") and
 * counts an interruption, and the third in a row suspends the lane
 * instead; a suspended lane is never marked pending. usage is added to
 * the lane's and the session's sums. Result: {"lane": lane}.
 * MEMD_ECONFLICT for a stale turn id. */
MEMD_API int32_t memd_turn_end(memd *m, const char *app, const char *user, const char *key,
			       const char *turn_id, const char *body_json, char **ret_json,
			       memd_error *err);

/* ---- inbox ---- */

/* body: {"mode": "interrupt" | "queue", "event": object (an event as
 * memd_events_append takes it)}. interrupt fills the next-up slot,
 * replacing what is there; queue takes the slot if free, else the FIFO's
 * tail. Result: {"id", "depth", "slot": bool}. MEMD_ENOTFOUND without a
 * lane. */
MEMD_API int32_t memd_inbox_put(memd *m, const char *app, const char *user, const char *key,
				const char *body_json, char **ret_json, memd_error *err);

/* The turn holder takes the next item: the slot's, else the FIFO head
 * (the next FIFO item moves up into the slot). body: {"turn_id": str}.
 * Result: {"item": null | {"id", "mode", "event", "created"}, "depth"}.
 * Each item is taken exactly once. MEMD_ECONFLICT for a turn that is not
 * the lane's. */
MEMD_API int32_t memd_inbox_take(memd *m, const char *app, const char *user, const char *key,
				 const char *body_json, char **ret_json, memd_error *err);

/* Result: {"items": [item...] (slot first, then FIFO order), "depth"}. */
MEMD_API int32_t memd_inbox_list(memd *m, const char *app, const char *user, const char *key,
				 char **ret_json, memd_error *err);

/* ---- background lane work ---- */

/* Run one pass of the lane watcher now (it also runs every
 * lanes.watch_interval_s in memd serve): record turns whose lease ran
 * out as interrupted; finalize lanes whose policy says expired and that
 * have no turn (strategy on_session_finalize, webhook, change-feed
 * record; exactly once across processes); prune old lanes; delete ended
 * sessions past sessions.retention_days; delete expired long-term
 * memories. Bounded batches. Result: {"leases_expired", "finalized",
 * "finalize_failed", "pruned", "sessions_deleted", "memories_expired"}:
 * counts of this pass. */
MEMD_API int32_t memd_lanes_sweep(memd *m, char **ret_json, memd_error *err);

/* Replace the clock every lane decision and lane/session timestamp reads
 * (unix microseconds); NULL restores the system clock. For tests and
 * simulations: set it before the calls it should affect. */
typedef int64_t (*memd_clock_fn)(void *userdata);
MEMD_API void memd_set_clock(memd *m, memd_clock_fn now_us, void *userdata);

/* ---- long-term memories ------------------------------------------------- */

/* A memory: a durable fact about one (app, user), distilled from its
 * conversations or written by an agent. JSON: {"id", "text", "kind"
 * ("fact" | "preference" | "instruction" | "episode"), "topics": [str],
 * "entities": [str], "source": {"session_id", "seqs": [int]} | null,
 * "created", "updated", "expires_at" (RFC 3339 UTC, null = never),
 * "version"}. An expired memory is gone from every read at once (and
 * deleted by the background sweep). Every change is kept as history. A
 * store without memories (ABI below 1.3) answers MEMD_ENOTSUP naming it. */

/* Longest memory text, in bytes, and most topics or entities per memory. */
#define MEMD_MEMORY_TEXT_MAX 8192
#define MEMD_MEMORY_TAGS_MAX 32

/* Create a memory. body: {"text": str (1..MEMD_MEMORY_TEXT_MAX bytes),
 * "kind"?: (default "fact"), "topics"?: [str], "entities"?: [str] (each
 * 1..MEMD_ID_MAX bytes, at most MEMD_MEMORY_TAGS_MAX; duplicates
 * dropped), "source"?: {"session_id": str, "seqs"?: [int]} (the session
 * must exist), "expires_at"?: RFC 3339 | "ttl_seconds"?: int (> 0; not
 * both), "id"?: str (client-made, for retries: creating an id that
 * exists with the same content answers the stored memory with
 * *ret_created 0; different content is MEMD_ECONFLICT)}. Result: the
 * memory; *ret_created (may be NULL) 1 when it was created now. */
MEMD_API int32_t memd_memory_create(memd *m, const char *app, const char *user,
				    const char *body_json, char **ret_json, int *ret_created,
				    memd_error *err);

/* Result: the memory. MEMD_ENOTFOUND if absent, expired or another
 * user's. */
MEMD_API int32_t memd_memory_get(memd *m, const char *app, const char *user, const char *id,
				 char **ret_json, memd_error *err);

typedef struct memd_memory_list_options {
	uint32_t struct_size;     /* sizeof(memd_memory_list_options) */
	uint32_t limit;           /* 0 = MEMD_LIST_LIMIT_DEFAULT; at most MEMD_LIST_LIMIT_MAX */
	const char *cursor;       /* NULL or the next_cursor of the previous page */
	const char *kind;         /* NULL = any */
	const char *topic;        /* memories with this topic; NULL = any */
	const char *entity;       /* memories with this entity; NULL = any */
	const char *session_id;   /* memories whose source is this session; NULL = any */
} memd_memory_list_options;

/* Newest first (by creation). opts NULL = no filter, default limit.
 * Result: {"memories": [memory...], "next_cursor": str | null}. */
MEMD_API int32_t memd_memory_list(memd *m, const char *app, const char *user,
				  const memd_memory_list_options *opts, char **ret_json,
				  memd_error *err);

/* Change a memory. body: any of {"text", "kind", "topics", "entities",
 * "expires_at" | "ttl_seconds" (null: never expires)}, plus "version"?:
 * int (the change applies only to that version, else MEMD_ECONFLICT),
 * "reason"?: str (kept in the history). Result: the memory, version + 1.
 * MEMD_ENOTFOUND if absent or expired. */
MEMD_API int32_t memd_memory_update(memd *m, const char *app, const char *user,
				    const char *id, const char *body_json, char **ret_json,
				    memd_error *err);

/* Delete a memory (its history stays readable). expected_version 0 =
 * any; else MEMD_ECONFLICT unless it is the memory's version.
 * MEMD_ENOTFOUND if absent or expired. */
MEMD_API int32_t memd_memory_delete(memd *m, const char *app, const char *user,
				    const char *id, int64_t expected_version, memd_error *err);

/* Result: {"history": [{"version", "op" ("add" | "update" | "delete" |
 * "expire"), "memory": memory (after the change; as it was for delete
 * and expire), "actor" ("api" | "extractor" | "mcp" | "retention" | str),
 * "reason": str | null, "at"}]}, oldest first. MEMD_ENOTFOUND if the id
 * never existed for this user. */
MEMD_API int32_t memd_memory_history(memd *m, const char *app, const char *user,
				     const char *id, char **ret_json, memd_error *err);

/* Extract memories from the session's events that extraction has not
 * read yet, now, on the caller's thread (background extraction does the
 * same on its own; both are exactly once: the batch's memories and the
 * session's extraction cursor are committed together, and a batch
 * another process committed first is not extracted again). Uses the
 * app's memory.extract config (the built-in extractor when none).
 * Result: {"session_id", "from_seq", "to_seq" (the cursor after),
 * "added", "updated", "deleted", "unchanged" (candidates that matched a
 * memory), "memories": [memory changed...]}. MEMD_ENOTFOUND for an
 * unknown session; a failing extractor fails the call (retryable when
 * the endpoint is) and moves nothing. */
MEMD_API int32_t memd_memory_extract(memd *m, const char *app, const char *user,
				     const char *sid, char **ret_json, memd_error *err);

/* Run one pass of the memory background work now (it also runs on its
 * own in memd serve): extract sessions idle for the app's
 * memory.extract.idle_minutes, delete expired memories (bounded
 * batches). Result: {"sessions_extracted", "extract_failed",
 * "memories_expired"}: counts of this pass. */
MEMD_API int32_t memd_memories_sweep(memd *m, char **ret_json, memd_error *err);

/* ---- A2A tasks ------------------------------------------------------------ */

/* A task: an A2A protocol Task object an agent server keeps between
 * requests (its status, history and artifacts), stored whole per (app,
 * task id) with a version (1 after the first save, + 1 per save). The
 * record memd answers with: {"task": Task, "version", "user": str |
 * null, "created", "updated"} (RFC 3339 UTC with microseconds). A task
 * saved with a user belongs to that user's session named by its
 * contextId: deleting the session or the user deletes it. A task in a
 * terminal state (completed, canceled, failed, rejected) keeps it:
 * saving it with another state is MEMD_ECONFLICT naming both. A store
 * without tasks (ABI below 1.5) answers MEMD_ENOTSUP naming it. */

/* Save task id of app. body_json: the A2A Task ({"kind"?: "task", "id"
 * (= id), "contextId", "status": {"state", "message"?, "timestamp"?},
 * "history"?, "artifacts"?, "metadata"?}; state one of submitted,
 * working, input-required, auth-required, completed, canceled, failed,
 * rejected, unknown; members memd does not know are kept as given;
 * "kind" is set when absent or null). MEMD_EINVAL naming the member that is
 * wrong. user: NULL, or the owner, and then contextId must be a valid
 * session id (the session need not exist yet); a save without a user
 * links the task to no user. expected_version > 0:
 * save only over that version (MEMD_ECONFLICT if the task is at
 * another, MEMD_ENOTFOUND if there is none); create_only: only if the
 * task does not exist (MEMD_ECONFLICT if it does); neither: create or
 * replace. Result: the record; *ret_created (may be NULL) 1 when the
 * task was created now. */
MEMD_API int32_t memd_task_put(memd *m, const char *app, const char *id, const char *user,
			       const char *body_json, int64_t expected_version, int create_only,
			       char **ret_json, int *ret_created, memd_error *err);

/* Result: the record, its task's "history" cut to the history_length
 * most recent messages (< 0 = all, 0 = none). MEMD_ENOTFOUND if absent. */
MEMD_API int32_t memd_task_get(memd *m, const char *app, const char *id,
			       int64_t history_length, char **ret_json, memd_error *err);

typedef struct memd_task_list_options {
	uint32_t struct_size;     /* sizeof(memd_task_list_options) */
	uint32_t limit;           /* 0 = MEMD_LIST_LIMIT_DEFAULT; at most MEMD_LIST_LIMIT_MAX */
	const char *cursor;       /* NULL or the next_cursor of the previous page */
	const char *context_id;   /* tasks of this context; NULL = any */
	const char *state;        /* tasks in this state; NULL = any */
	const char *user;         /* tasks saved with this user; NULL = any */
} memd_task_list_options;

/* The tasks of app, most recently saved first. opts NULL = no filter,
 * default limit. Result: {"tasks": [record...], "next_cursor": str |
 * null}. MEMD_ETOOBIG when the page is longer than
 * server.max_response_bytes (ask for a smaller limit). */
MEMD_API int32_t memd_task_list(memd *m, const char *app, const memd_task_list_options *opts,
				char **ret_json, memd_error *err);

/* Delete a task. expected_version 0 = any; else MEMD_ECONFLICT unless it
 * is the task's version. MEMD_ENOTFOUND if absent. */
MEMD_API int32_t memd_task_delete(memd *m, const char *app, const char *id,
				  int64_t expected_version, memd_error *err);

/* ---- run checkpoints ----------------------------------------------------- */

/* A checkpoint: the saved state of a long-running agent run (a LangGraph
 * checkpointer's checkpoint), in a session (the run's thread) and a
 * namespace ("" = the root graph), under an id the runtime chooses (ids
 * order as bytes: the newest is the greatest), with opaque payload bytes
 * and their serializer's type tag, JSON metadata, a run state
 * ("running" | "interrupted" (waiting for a human) | "done") and pending
 * writes. Every put sets its expiry to the app's checkpoints.timeout_s
 * from now (0 = never); an expired checkpoint is gone from every read at
 * once and deleted by the expiry sweep. Deleting the session or the user
 * deletes its checkpoints. Namespaces are "" or 1..MEMD_ID_MAX bytes of
 * UTF-8 as ids are; ns NULL means "" where one namespace is meant.
 *
 * Summary JSON: {"session_id", "checkpoint_ns", "checkpoint_id",
 * "parent_checkpoint_id": str | null, "type", "metadata": {...},
 * "run_state", "created", "updated", "expires_at" (null = never), "size"
 * (payload bytes)}. Tuple JSON: the summary plus "checkpoint" (the
 * payload, base64) and "pending_writes": [{"task_id", "task_path" (""
 * = none), "idx", "channel", "type", "value" (base64)}] ascending by
 * (task_path, task_id, idx), strings by code point. Bytes are
 * base64 in the standard alphabet, padded. A store without checkpoints
 * (ABI below 1.5) answers MEMD_ENOTSUP naming it. */

/* Store checkpoint checkpoint_id of session sid in namespace ns (a
 * replace keeps its created time and its pending writes). body:
 * {"type": str (1..256 bytes), "checkpoint": base64, "parent_checkpoint_id"?:
 * id | null, "metadata"?: object (default {}), "run_state"?: "running" |
 * "interrupted" | "done" (default "running")}. Creates the session when
 * it does not exist. Result: the summary. */
MEMD_API int32_t memd_checkpoint_put(memd *m, const char *app, const char *user, const char *sid,
				     const char *ns, const char *checkpoint_id,
				     const char *body_json, char **ret_json, memd_error *err);

/* Add pending writes to a checkpoint, all or none. body: {"task_id": id,
 * "task_path"?: the path of the task that made them (at most 1024 bytes;
 * absent or "" = none), "writes": [{"idx": int, "channel": str, "type": str, "value": base64,
 * "replace"?: bool (default false: a write whose (task_id, idx) is stored
 * already is kept; true: replaced)}], "run_state"?: as in put (the
 * checkpoint's run state changes; absent: unchanged)}. MEMD_ENOTFOUND
 * when the checkpoint does not exist or expired. */
MEMD_API int32_t memd_checkpoint_put_writes(memd *m, const char *app, const char *user,
					    const char *sid, const char *ns,
					    const char *checkpoint_id, const char *body_json,
					    memd_error *err);

/* Result: the tuple of checkpoint_id, or (checkpoint_id NULL) of the
 * newest checkpoint of (sid, ns). MEMD_ENOTFOUND if there is none. */
MEMD_API int32_t memd_checkpoint_get(memd *m, const char *app, const char *user, const char *sid,
				     const char *ns, const char *checkpoint_id, char **ret_json,
				     memd_error *err);

typedef struct memd_checkpoint_list_options {
	uint32_t struct_size;     /* sizeof(memd_checkpoint_list_options) */
	uint32_t limit;           /* 0 = MEMD_LIST_LIMIT_DEFAULT; at most MEMD_LIST_LIMIT_MAX */
	const char *cursor;       /* NULL or the next_cursor of the previous page */
	const char *session_id;   /* NULL = every session of the user */
	const char *ns;           /* NULL = every namespace; "" = the root */
	const char *before;       /* only checkpoint ids below this one; NULL = any */
	/* A JSON object: only checkpoints whose metadata has each of its
	 * top-level keys with a JSON-equal value; NULL = any. */
	const char *metadata_json;
	int32_t full;             /* nonzero: tuples instead of summaries */
	int32_t reserved;
} memd_checkpoint_list_options;

/* Checkpoints of (app, user), newest first by (checkpoint id, session,
 * namespace). Result: {"checkpoints": [summary or tuple...],
 * "next_cursor": str | null}. */
MEMD_API int32_t memd_checkpoint_list(memd *m, const char *app, const char *user,
				      const memd_checkpoint_list_options *opts, char **ret_json,
				      memd_error *err);

/* Delete the checkpoints (and their writes) of session sid in namespace
 * ns (NULL = every namespace). A session without any is a success. */
MEMD_API int32_t memd_checkpoint_delete(memd *m, const char *app, const char *user,
					const char *sid, const char *ns, memd_error *err);

typedef struct memd_checkpoint_resumable_options {
	uint32_t struct_size;     /* sizeof(memd_checkpoint_resumable_options) */
	uint32_t limit;           /* 0 = MEMD_LIST_LIMIT_DEFAULT; at most MEMD_LIST_LIMIT_MAX */
	const char *cursor;       /* NULL or the next_cursor of the previous page */
	const char *resume;       /* "automatic" | "approval"; NULL = both */
} memd_checkpoint_resumable_options;

/* The runs of app a restarting runtime should resume: each session whose
 * newest root checkpoint is unexpired and not done, ascending by (user,
 * session). A running run resumes "automatic" when the app's
 * checkpoints.auto_resume (default true), else "approval"; an
 * interrupted one "automatic" when checkpoints.auto_resume_hitl (default
 * false), else "approval". Result: {"sessions": [{"user", "session_id",
 * "checkpoint_id", "run_state", "resume", "metadata", "updated",
 * "expires_at"}], "next_cursor": str | null}. */
MEMD_API int32_t memd_checkpoint_resumable(memd *m, const char *app,
					   const memd_checkpoint_resumable_options *opts,
					   char **ret_json, memd_error *err);

/* Run the expiry sweep now (memd serve also runs it every
 * checkpoints.sweep_interval_s): delete expired checkpoints, in bounded
 * batches, until none is left. Result: {"checkpoints_expired": n}. */
MEMD_API int32_t memd_checkpoints_sweep(memd *m, char **ret_json, memd_error *err);

/* ---- users and plugins -------------------------------------------------- */

/* Forget everything of (app, user). */
MEMD_API int32_t memd_user_delete(memd *m, const char *app, const char *user, memd_error *err);

/* Result: {"abi": "1.0", "plugins": [{"name", "version", "kinds", "path",
 * "abi", "description", "instances": [...]}]}. */
MEMD_API int32_t memd_plugins_json(memd *m, char **ret_json, memd_error *err);

/* Probe every store (ping) and look at its storage: 0 when every store
 * is reachable and none is degraded (its last write failed with a full
 * disk, read-only storage or an I/O error, and no write has succeeded
 * since: a degraded store is probed with a small write at most every 10
 * s). Otherwise MEMD_EUNAVAIL (retryable, with the first degraded store's
 * MEMD_ERROR_STORAGE_* flag) naming the store and why. */
MEMD_API int32_t memd_ready(memd *m, memd_error *err);
/* As memd_ready, as a report: *ret_ready is 1 when ready, and *ret_json
 * (memd_free) is {"status": "ready"} or {"status": "not_ready", "stores":
 * [{"store", "reason" (unreachable, disk_full, read_only, io_error),
 * "message"}]}. Fails only for lack of memory. */
MEMD_API int32_t memd_ready_json(memd *m, int *ret_ready, char **ret_json, memd_error *err);

/* The facade's own metrics as Prometheus text (exposition format 0.0.4),
 * malloc'd into *ret_text (memd_free): for every session store instance
 * and plugin op called so far, memd_store_call_duration_seconds{store,op}
 * (a histogram of the time in the plugin; for reads that deliver through
 * a sink, the time includes the facade's handling of each row) and
 * memd_store_call_errors_total{store,op,code}. MEMD_ENOMEM on failure. */
MEMD_API int32_t memd_metrics_text(memd *m, char **ret_text, memd_error *err);

#ifdef __cplusplus
}
#endif
#endif /* MEMD_MEMD_H */
