/* SPDX-License-Identifier: MIT */
/*
 * memd plugin ABI, version 1: the session store (kind MEMD_KIND_STORE).
 *
 * A session store keeps sessions, their events, scoped state, artifacts,
 * a store-wide change feed and durable named cursors. Semantics (the store
 * conformance suite in tests/conformance/ is the judge):
 *
 *  - Everything is scoped by (app, user, session); no call reads across
 *    scopes except user_delete, which removes everything of one user.
 *  - append is one atomic transaction: events + state delta + version bump +
 *    updated_us, all or nothing. seq is gapless per session starting at 1.
 *    If MEMD_APPEND_EXPECT_VERSION is set and the session's version differs,
 *    append fails with MEMD_ECONFLICT and writes nothing. If every event id
 *    of the batch already exists in the session, append writes nothing,
 *    returns the original seqs and sets MEMD_APPEND_REPLAYED, even when
 *    expected_version is now stale (a retry is not a conflict); if only
 *    some exist, it fails with MEMD_ECONFLICT. A batch that repeats an id
 *    within itself fails with MEMD_EINVAL or MEMD_ECONFLICT. An append
 *    with no events (state only) still bumps the version.
 *  - Ids (app, user, session, event, cursor names) are 1..MEMD_ID_MAX bytes
 *    of UTF-8 without control characters or '/'; artifact names also
 *    without ".." or backslashes. The host validates them; a store may refuse
 *    others with MEMD_EINVAL. Ids compare byte for byte (case-sensitive).
 *  - State keys: plain keys belong to the session, "app:" keys to the app,
 *    "user:" keys to the (app, user). Keys starting "temp:" never reach a
 *    store (the host keeps them); a store refuses them with MEMD_EINVAL.
 *    A JSON null value deletes the key. state_get returns the merged view
 *    with prefixes restored.
 *  - Calls on a session that does not exist (events_load, state_get,
 *    append, artifacts) fail with MEMD_ENOTFOUND; user_delete of an unknown
 *    user succeeds and adds no feed record.
 *  - Appending an event with role "summary" makes it the session's
 *    summary_seq; its covers_seq says the last seq it folds.
 *  - Every appended event gets a store-wide, strictly increasing feed
 *    position. feed_read(after) never returns a position <= after, and a
 *    reader that saw position P never later sees a new record < P (stores
 *    with concurrent writers must hold records back until every earlier
 *    position is committed). Deleting a session or user removes its events
 *    from the feed and adds one DELETE record.
 *
 * Records and strings passed in are borrowed for the call. Records passed
 * to a sink are borrowed for the sink call: the host copies what it keeps.
 */
#ifndef MEMD_STORE_H
#define MEMD_STORE_H

#include "abi.h"
#include "host.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- records ---------------------------------------------------------- */

/* memd_session.flags */
#define MEMD_SESSION_ARCHIVED 0x1u

typedef struct memd_session {
	uint32_t struct_size;            /* since 1.0 */
	uint32_t flags;                  /* since 1.0: MEMD_SESSION_* */
	const char *app;                 /* since 1.0 */
	const char *user;                /* since 1.0 */
	const char *id;                  /* since 1.0 */
	const char *title;               /* since 1.0: NULL = not set yet */
	const char *metadata_json;       /* since 1.0: JSON object text */
	int64_t created_us;              /* since 1.0: unix time, us */
	int64_t updated_us;              /* since 1.0 */
	int64_t version;                 /* since 1.0: +1 per append; 0 at create */
	int64_t last_seq;                /* since 1.0: seq of the newest event, 0 = none */
	int64_t summary_seq;             /* since 1.0: seq of the newest summary, 0 = none */
} memd_session;

typedef struct memd_event {
	uint32_t struct_size;            /* since 1.0 */
	uint32_t flags;                  /* since 1.0: reserved, 0 */
	const char *id;                  /* since 1.0: unique within the session */
	int64_t seq;                     /* since 1.0: store-assigned, gapless */
	const char *invocation_id;       /* since 1.0: may be NULL */
	const char *author;              /* since 1.0 */
	const char *role;                /* since 1.0: user|assistant|system|tool|summary */
	const char *branch;              /* since 1.0: may be NULL */
	const char *content_json;        /* since 1.0: message JSON (parts) */
	const char *actions_json;        /* since 1.0: may be NULL */
	const char *metadata_json;       /* since 1.0: may be NULL */
	int64_t timestamp_us;            /* since 1.0 */
	const char *text;                /* since 1.0: extracted plain text */
	int64_t tokens;                  /* since 1.0: token count of text */
	int64_t covers_seq;              /* since 1.0: role summary: last seq folded */
	int64_t position;                /* since 1.0: change-feed position (output) */
	const char *app;                 /* since 1.0: output only */
	const char *user;                /* since 1.0: output only */
	const char *session;             /* since 1.0: output only */
} memd_event;

typedef struct memd_artifact {
	uint32_t struct_size;            /* since 1.0 */
	uint32_t reserved;               /* since 1.0 */
	const char *name;                /* since 1.0 */
	int64_t version;                 /* since 1.0: 1, 2, 3, ... (output) */
	const char *mime_type;           /* since 1.0 */
	const void *data;                /* since 1.0: NULL in listings */
	uint64_t size;                   /* since 1.0 */
	int64_t created_us;              /* since 1.0 */
} memd_artifact;

/* memd_feed_record.kind */
#define MEMD_FEED_EVENT          1u /* event is set */
#define MEMD_FEED_DELETE_SESSION 2u /* scope app, user, session */
#define MEMD_FEED_DELETE_USER    3u /* scope app, user; session NULL */

typedef struct memd_feed_record {
	uint32_t struct_size;            /* since 1.0 */
	uint32_t kind;                   /* since 1.0: MEMD_FEED_* */
	int64_t position;                /* since 1.0 */
	const char *app;                 /* since 1.0 */
	const char *user;                /* since 1.0 */
	const char *session;             /* since 1.0: NULL for DELETE_USER */
	const memd_event *event;         /* since 1.0: kind EVENT only */
} memd_feed_record;

/* ---- queries ---------------------------------------------------------- */

/* memd_session_query.flags */
#define MEMD_SQ_INCLUDE_ARCHIVED 0x1u

/* Sessions of one (app, user), newest first by (created_us, id); keyset
 * paging: only sessions strictly before (before_created_us, before_id). */
typedef struct memd_session_query {
	uint32_t struct_size;            /* since 1.0 */
	uint32_t flags;                  /* since 1.0: MEMD_SQ_* */
	uint32_t limit;                  /* since 1.0: > 0 */
	uint32_t reserved;               /* since 1.0 */
	int64_t before_created_us;       /* since 1.0: 0 = from the newest */
	const char *before_id;           /* since 1.0: with before_created_us */
} memd_session_query;

/* memd_event_query.flags */
#define MEMD_EVQ_NEWEST       0x1u /* the newest `limit` matches (still delivered in seq order) */
#define MEMD_EVQ_NO_SUMMARY   0x2u /* skip role "summary" */
#define MEMD_EVQ_ONLY_SUMMARY 0x4u /* only role "summary" */

/* Events of one session in ascending seq order. Stores must answer with
 * an index range scan: cost proportional to the rows returned. */
typedef struct memd_event_query {
	uint32_t struct_size;            /* since 1.0 */
	uint32_t flags;                  /* since 1.0: MEMD_EVQ_* */
	int64_t after_seq;               /* since 1.0: seq > after_seq; 0 = all */
	int64_t before_seq;              /* since 1.0: seq < before_seq; 0 = no bound */
	int64_t after_time_us;           /* since 1.0: timestamp_us > this; 0 = no bound */
	uint32_t limit;                  /* since 1.0: 0 = no limit */
	uint32_t reserved;               /* since 1.0 */
} memd_event_query;

/* memd_session_update.fields */
#define MEMD_PATCH_TITLE    0x1u
#define MEMD_PATCH_METADATA 0x2u
#define MEMD_PATCH_ARCHIVED 0x4u

typedef struct memd_session_update {
	uint32_t struct_size;            /* since 1.0 */
	uint32_t fields;                 /* since 1.0: MEMD_PATCH_* to change */
	const char *title;               /* since 1.0 */
	const char *metadata_json;       /* since 1.0: replaces the object */
	uint32_t archived;               /* since 1.0: 0 or 1 */
	uint32_t reserved;               /* since 1.0 */
	int64_t now_us;                  /* since 1.0: new updated_us */
} memd_session_update;

/* memd_append.flags */
#define MEMD_APPEND_EXPECT_VERSION 0x1u

typedef struct memd_append {
	uint32_t struct_size;            /* since 1.0 */
	uint32_t flags;                  /* since 1.0: MEMD_APPEND_* */
	int64_t expected_version;        /* since 1.0: with MEMD_APPEND_EXPECT_VERSION */
	const memd_event *const *events; /* since 1.0: ids, roles, texts set by host */
	uint32_t n_events;               /* since 1.0: may be 0 (state-only append) */
	uint32_t reserved;               /* since 1.0 */
	const char *state_delta_json;    /* since 1.0: JSON object or NULL */
	const char *title_if_unset;      /* since 1.0: becomes title iff title is NULL */
	int64_t now_us;                  /* since 1.0: new updated_us */
} memd_append;

/* memd_append_result.flags */
#define MEMD_APPEND_REPLAYED 0x1u /* all ids existed; nothing was written */

typedef struct memd_append_result {
	uint32_t struct_size;            /* since 1.0 */
	uint32_t flags;                  /* since 1.0: MEMD_APPEND_REPLAYED */
	int64_t version;                 /* since 1.0: session version after */
	int64_t *seqs;                   /* since 1.0: caller-owned, n_events slots */
} memd_append_result;

/* ---- sinks (host-owned; copy what you keep; nonzero return stops) ---- */

typedef struct memd_session_sink {
	uint32_t struct_size;            /* since 1.0 */
	void *userdata;                  /* since 1.0 */
	int32_t (*session)(void *userdata, const memd_session *s); /* since 1.0 */
} memd_session_sink;

typedef struct memd_event_sink {
	uint32_t struct_size;            /* since 1.0 */
	void *userdata;                  /* since 1.0 */
	int32_t (*event)(void *userdata, const memd_event *e); /* since 1.0 */
} memd_event_sink;

typedef struct memd_artifact_sink {
	uint32_t struct_size;            /* since 1.0 */
	void *userdata;                  /* since 1.0 */
	int32_t (*artifact)(void *userdata, const memd_artifact *a); /* since 1.0 */
} memd_artifact_sink;

typedef struct memd_feed_sink {
	uint32_t struct_size;            /* since 1.0 */
	void *userdata;                  /* since 1.0 */
	int32_t (*record)(void *userdata, const memd_feed_record *r); /* since 1.0 */
} memd_feed_sink;

/* ---- the operations --------------------------------------------------- */

/* Every op takes the plugin instance from init, a per-call context and a
 * caller-owned error. Required ops (the loader refuses a store without
 * them): session_create, session_get, session_list, session_update,
 * session_delete, append, events_load, state_get, user_delete, feed_read,
 * cursor_get, cursor_set. The rest may be NULL (MEMD_ENOTSUP). */
typedef struct memd_store_ops {
	uint32_t struct_size;            /* since 1.0 */
	uint32_t reserved;               /* since 1.0 */

	/* since 1.0: create s (app, user, id, title, metadata_json, created_us
	 * = updated_us) with an optional initial state delta; MEMD_ECONFLICT if
	 * the id exists in (app, user). Delivers the stored session to out. */
	int32_t (*session_create)(void *inst, const memd_call *call, const memd_session *s,
				  const char *state_delta_json, const memd_session_sink *out,
				  memd_error *err);
	/* since 1.0: scope->session must be set. MEMD_ENOTFOUND if absent. */
	int32_t (*session_get)(void *inst, const memd_call *call, const memd_scope *scope,
			       const memd_session_sink *out, memd_error *err);
	/* since 1.0: scope->session is ignored. */
	int32_t (*session_list)(void *inst, const memd_call *call, const memd_scope *scope,
				const memd_session_query *q, const memd_session_sink *out,
				memd_error *err);
	/* since 1.0: delivers the updated session. */
	int32_t (*session_update)(void *inst, const memd_call *call, const memd_scope *scope,
				  const memd_session_update *p, const memd_session_sink *out,
				  memd_error *err);
	/* since 1.0: removes the session, its events, state and artifacts. */
	int32_t (*session_delete)(void *inst, const memd_call *call, const memd_scope *scope,
				  memd_error *err);

	/* since 1.0: see the header comment. res->seqs has a->n_events slots. */
	int32_t (*append)(void *inst, const memd_call *call, const memd_scope *scope,
			  const memd_append *a, memd_append_result *res, memd_error *err);
	/* since 1.0: MEMD_ENOTFOUND if the session does not exist. */
	int32_t (*events_load)(void *inst, const memd_call *call, const memd_scope *scope,
			       const memd_event_query *q, const memd_event_sink *out,
			       memd_error *err);

	/* since 1.0: merged state JSON object of the session to out. */
	int32_t (*state_get)(void *inst, const memd_call *call, const memd_scope *scope,
			     const memd_text_sink *out, memd_error *err);

	/* since 1.0: a->name, mime_type, data, size, created_us; writes the
	 * new version (previous + 1, starting at 1). */
	int32_t (*artifact_put)(void *inst, const memd_call *call, const memd_scope *scope,
				const memd_artifact *a, int64_t *ret_version, memd_error *err);
	/* since 1.0: version 0 = latest. Delivers one artifact with data. */
	int32_t (*artifact_get)(void *inst, const memd_call *call, const memd_scope *scope,
				const char *name, int64_t version, const memd_artifact_sink *out,
				memd_error *err);
	/* since 1.0: latest version of every name, by name; data NULL. */
	int32_t (*artifact_list)(void *inst, const memd_call *call, const memd_scope *scope,
				 const memd_artifact_sink *out, memd_error *err);
	/* since 1.0: every version of name, ascending; data NULL. */
	int32_t (*artifact_versions)(void *inst, const memd_call *call, const memd_scope *scope,
				     const char *name, const memd_artifact_sink *out,
				     memd_error *err);
	/* since 1.0: every version of name. */
	int32_t (*artifact_delete)(void *inst, const memd_call *call, const memd_scope *scope,
				   const char *name, memd_error *err);

	/* since 1.0: scope->session ignored: every session, event, state key
	 * and artifact of (app, user), plus the user: state. */
	int32_t (*user_delete)(void *inst, const memd_call *call, const memd_scope *scope,
			       memd_error *err);

	/* since 1.0: up to limit records with position > after, ascending;
	 * limit 0 = no limit. */
	int32_t (*feed_read)(void *inst, const memd_call *call, int64_t after, uint32_t limit,
			     const memd_feed_sink *out, memd_error *err);
	/* since 1.0: the highest position handed out so far (0 = none). */
	int32_t (*feed_head)(void *inst, const memd_call *call, int64_t *ret_position,
			     memd_error *err);
	/* since 1.0: durable named cursor; an unknown name reads as 0. */
	int32_t (*cursor_get)(void *inst, const memd_call *call, const char *name,
			      int64_t *ret_position, memd_error *err);
	int32_t (*cursor_set)(void *inst, const memd_call *call, const char *name,
			      int64_t position, memd_error *err);

	/* since 1.0: is the backend reachable? For /readyz. */
	int32_t (*ping)(void *inst, const memd_call *call, memd_error *err);
} memd_store_ops;

#ifdef __cplusplus
}
#endif
#endif /* MEMD_STORE_H */
