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
 *  - Lanes (since 1.2; optional ops, a 1.0/1.1 store answers MEMD_ENOTSUP):
 *    a lane is a row per (app, user, key) naming the lane's current
 *    session, its lifecycle flags, its turn (id and lease) and usage sums;
 *    its inbox is a list of items per lane. The host decides every change
 *    (policy, priority, leases); a store only keeps rows and makes each
 *    lane_write one conditional transaction: it applies iff the lane's
 *    version equals expected_version (or, with MEMD_LW_CREATE, iff the
 *    lane does not exist), else MEMD_ECONFLICT and nothing is written.
 *    Times are unix microseconds the host passes in (now_us); a store
 *    never reads its own clock for lane decisions. session_delete leaves
 *    lanes pointing at the session (the host replaces it on the next open);
 *    user_delete removes the user's lanes and their inboxes.
 *
 *  - Transcript operations (since 1.2): an append may carry a
 *    memd_transcript_op that, in the same transaction and before its
 *    events, hides the visible events from a seq on (rewind, rewrite,
 *    clear) or reverses an earlier operation (undo). Hidden events stay
 *    stored (the audit trail) but no read returns them unless it asks
 *    (MEMD_EVQ_INCLUDE_HIDDEN), the feed carries a MEMD_FEED_HIDE record
 *    for each, unhidden ones come back as new MEMD_FEED_EVENT records, and
 *    summary_seq is the newest *visible* summary. Seqs are never reused.
 *    Every append with a state delta records each key's change (old and
 *    new value) in the same transaction (state_history).
 *
 *  - Memories (since 1.3; optional ops, a store below 1.3 answers
 *    MEMD_ENOTSUP): durable facts about one (app, user), each a row with
 *    a version and a history of every change. memory_commit is one
 *    transaction: every write applies or none does, and (with a cursor
 *    session) it also moves that session's memory_seq from the expected
 *    value to the new one, so that the memories extracted from a batch of
 *    events and the mark saying the batch was read land together, exactly
 *    once, even with several hosts racing. A memory whose expires_us is
 *    set and <= the now_us of a read is invisible to that read (get,
 *    list, commit's version checks treat it as absent); memory_expire
 *    deletes such rows. Every add or update gives the memory a new feed
 *    position (a MEMD_FEED_MEMORY record carrying the stored memory),
 *    every delete (commit, expire) adds a MEMD_FEED_MEMORY_DELETE record;
 *    user_delete removes the user's memories and their history (its
 *    DELETE_USER record covers them); session_delete leaves them.
 *
 *  - Checkpoints (since 1.5; optional ops, a store below 1.5 answers
 *    MEMD_ENOTSUP): snapshots of a long-running agent run, per session
 *    (the run's thread) and namespace ("" = the root graph), each with an
 *    id the runtime chooses (ids order as bytes: newest = greatest),
 *    opaque payload bytes with a type tag, JSON metadata, a run state
 *    (MEMD_RUN_*), and pending writes (task id, index, channel, tagged
 *    bytes). A checkpoint whose expires_us is set and <= a read's now_us
 *    is invisible to that read; checkpoint_expire deletes such rows with
 *    their writes. session_delete and user_delete remove the checkpoints
 *    of what they delete.
 *
 *  - Tasks (since 1.5; optional ops): A2A protocol tasks of an app, each a
 *    row keyed by (app, id) holding the whole task as JSON plus the
 *    columns reads filter on (context id, state, user), with a version.
 *    task_put is one conditional write; a task in a terminal state
 *    (completed, canceled, failed, rejected) keeps that state forever.
 *    A task with a user is linked to that user's session named by its
 *    context id: session_delete removes the tasks whose (user,
 *    context_id) is the session, user_delete every task of the user.
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
/* since 1.2: a lane reset made this session and the first context read
 * owes the user a notice (start_reason says why); cleared, once, by
 * MEMD_PATCH_CLEAR_NOTICE. */
#define MEMD_SESSION_NOTICE   0x2u

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
	/* Lifecycle (since 1.2; a store below 1.2 delivers a shorter struct:
	 * read these only when struct_size covers them). All may be NULL/0. */
	const char *lane_key;            /* since 1.2: the lane that made it */
	const char *origin_json;         /* since 1.2: message source (JSON object) */
	const char *origin_platform;     /* since 1.2: origin's platform, filterable */
	const char *previous_session;    /* since 1.2: the session a reset replaced */
	const char *start_reason;        /* since 1.2: suspended|idle|daily|explicit|switch */
	const char *end_reason;          /* since 1.2: NULL while open */
	int64_t ended_us;                /* since 1.2: 0 while open */
	/* Usage sums (since 1.2), added by lane_write and append usage. */
	int64_t input_tokens;            /* since 1.2 */
	int64_t output_tokens;           /* since 1.2 */
	int64_t cache_read_tokens;       /* since 1.2 */
	int64_t cache_write_tokens;      /* since 1.2 */
	int64_t cost_micro_usd;          /* since 1.2: USD x 1e6 */
	int64_t last_prompt_tokens;      /* since 1.2: the latest nonzero report, not a sum */
	int64_t message_count;           /* since 1.2: visible events that are not summaries */
	/* since 1.3: output: the last seq memory extraction has read (0 =
	 * none); moved only by memory_commit with this session as cursor. */
	int64_t memory_seq;
} memd_session;

/* A long-term memory of one (app, user) (since 1.3). On input (commit)
 * the host sets every member but position and the version/created_us it
 * does not decide (see memd_memory_write); on output all are set. */
typedef struct memd_memory {
	uint32_t struct_size;            /* since 1.3 */
	uint32_t flags;                  /* since 1.3: reserved, 0 */
	const char *app;                 /* since 1.3 */
	const char *user;                /* since 1.3 */
	const char *id;                  /* since 1.3: host-made, like an event id */
	const char *text;                /* since 1.3: the memory, plain text */
	const char *kind;                /* since 1.3: fact|preference|instruction|episode */
	const char *topics_json;         /* since 1.3: JSON array of strings ("[]" = none) */
	const char *entities_json;       /* since 1.3: JSON array of strings ("[]" = none) */
	const char *source_session;      /* since 1.3: the session it came from; NULL = none */
	const char *source_json;         /* since 1.3: {"session_id", "seqs": [int]} or NULL */
	int64_t created_us;              /* since 1.3: output: kept from the add */
	int64_t updated_us;              /* since 1.3: the last change's now_us */
	int64_t expires_us;              /* since 1.3: 0 = never; else invisible once <= now */
	int64_t version;                 /* since 1.3: output: 1 after add, +1 per update */
	int64_t position;                /* since 1.3: output: feed position of the last add/update */
	int64_t tokens;                  /* since 1.3: token count of text (the host's) */
} memd_memory;

/* memd_memory_write.op and memd_memory_change.op (since 1.3) */
#define MEMD_MEM_ADD    1u /* create; MEMD_ECONFLICT if the id exists (expired or not) */
#define MEMD_MEM_UPDATE 2u /* replace text, kind, topics, entities, source, expires, tokens */
#define MEMD_MEM_DELETE 3u /* remove the row (its history stays) */
#define MEMD_MEM_EXPIRE 4u /* change only: memory_expire removed it */

/* One change of a memory commit (since 1.3). */
typedef struct memd_memory_write {
	uint32_t struct_size;            /* since 1.3 */
	uint32_t op;                     /* since 1.3: MEMD_MEM_ADD | UPDATE | DELETE */
	/* since 1.3: UPDATE/DELETE: the memory's version must equal it, else
	 * MEMD_ECONFLICT; 0 = any version. A memory that does not exist (or
	 * has expired) is MEMD_ENOTFOUND. */
	int64_t expected_version;
	/* since 1.3: app and user equal the commit's scope; id always; for
	 * ADD and UPDATE the new values (updated_us = the commit's now_us). */
	const memd_memory *memory;
	const char *actor;               /* since 1.3: who: "api", "extractor", ... (history) */
	const char *reason;              /* since 1.3: why, for the history; NULL = none */
} memd_memory_write;

/* One memory commit (since 1.3): all or nothing. */
typedef struct memd_memory_commit {
	uint32_t struct_size;            /* since 1.3 */
	uint32_t n_writes;               /* since 1.3: may be 0 (a cursor move only) */
	const memd_memory_write *const *writes; /* since 1.3: applied in order */
	/* since 1.3: a session of the commit's (app, user) whose memory_seq
	 * must equal expected_cursor_seq (else MEMD_ECONFLICT; MEMD_ENOTFOUND
	 * if the session does not exist) and becomes new_cursor_seq (>=
	 * expected, else MEMD_EINVAL); NULL = no cursor. */
	const char *cursor_session;
	int64_t expected_cursor_seq;     /* since 1.3 */
	int64_t new_cursor_seq;          /* since 1.3 */
	int64_t now_us;                  /* since 1.3: updated_us, change times, expiry checks */
} memd_memory_commit;

/* One entry of a memory's history (since 1.3). */
typedef struct memd_memory_change {
	uint32_t struct_size;            /* since 1.3 */
	uint32_t op;                     /* since 1.3: MEMD_MEM_* */
	/* since 1.3: the memory after the change (DELETE/EXPIRE: as it was,
	 * version unchanged); position is 0. */
	const memd_memory *memory;
	const char *actor;               /* since 1.3 */
	const char *reason;              /* since 1.3: may be NULL */
	int64_t at_us;                   /* since 1.3: the commit's now_us */
} memd_memory_change;

/* Token and cost usage to add (since 1.2). Every field is added to the
 * sums except last_prompt_tokens, which replaces the stored one when > 0.
 * Negative values are refused with MEMD_EINVAL. */
typedef struct memd_usage {
	uint32_t struct_size;            /* since 1.2 */
	uint32_t reserved;               /* since 1.2 */
	int64_t input_tokens;            /* since 1.2 */
	int64_t output_tokens;           /* since 1.2 */
	int64_t cache_read_tokens;       /* since 1.2 */
	int64_t cache_write_tokens;      /* since 1.2 */
	int64_t cost_micro_usd;          /* since 1.2 */
	int64_t last_prompt_tokens;      /* since 1.2 */
} memd_usage;

/* memd_lane.flags (since 1.2) */
#define MEMD_LANE_SUSPENDED          0x1u  /* next open starts a new session */
#define MEMD_LANE_RESUME_PENDING     0x2u  /* next open keeps the session; resume_reason says why */
#define MEMD_LANE_FINALIZED          0x4u  /* the current session was finalized (expired) */
#define MEMD_LANE_FRESH_RESET        0x8u  /* the current session came from an explicit reset */
#define MEMD_LANE_RESET_HAD_ACTIVITY 0x10u /* the session the last reset replaced had events */

/* A lane: the current session of one conversation key (since 1.2). */
typedef struct memd_lane {
	uint32_t struct_size;            /* since 1.2 */
	uint32_t flags;                  /* since 1.2: MEMD_LANE_* */
	const char *app;                 /* since 1.2 */
	const char *user;                /* since 1.2 */
	const char *key;                 /* since 1.2: 1..MEMD_ID_MAX bytes, like an id */
	const char *session;             /* since 1.2: the current session's id */
	const char *origin_json;         /* since 1.2: the latest source seen; may be NULL */
	int64_t created_us;              /* since 1.2: output (kept from the first write) */
	int64_t updated_us;              /* since 1.2: last activity */
	int64_t version;                 /* since 1.2: output: 1 after create, +1 per write */
	const char *resume_reason;       /* since 1.2: with RESUME_PENDING, else NULL */
	int64_t resume_marked_us;        /* since 1.2 */
	const char *reset_reason;        /* since 1.2: the last reset's reason; NULL = none */
	const char *previous_session;    /* since 1.2: what the last reset replaced */
	int64_t reset_us;                /* since 1.2 */
	const char *turn_id;             /* since 1.2: the turn in progress; NULL = none */
	int64_t turn_started_us;         /* since 1.2 */
	int64_t turn_lease_until_us;     /* since 1.2: the holder's lease ends then */
	uint32_t interruptions;          /* since 1.2: consecutive interrupted turns */
	uint32_t finalize_failures;      /* since 1.2: failed finalize attempts */
	int64_t finalize_claim_until_us; /* since 1.2: a finalizer holds the lane until then */
	/* Usage sums (since 1.2): output only; lane_write adds its usage. */
	int64_t input_tokens;            /* since 1.2 */
	int64_t output_tokens;           /* since 1.2 */
	int64_t cache_read_tokens;       /* since 1.2 */
	int64_t cache_write_tokens;      /* since 1.2 */
	int64_t cost_micro_usd;          /* since 1.2 */
	int64_t last_prompt_tokens;      /* since 1.2 */
	uint32_t inbox_depth;            /* since 1.2: output: FIFO length + slot */
	uint32_t reserved;               /* since 1.2 */
} memd_lane;

/* memd_inbox_item.mode (since 1.2) */
#define MEMD_INBOX_INTERRUPT 1u /* fill the next-up slot, replacing what is there */
#define MEMD_INBOX_QUEUE     2u /* the slot if it is free, else the FIFO's tail */

/* One message waiting for a lane's turn holder (since 1.2). */
typedef struct memd_inbox_item {
	uint32_t struct_size;            /* since 1.2 */
	uint32_t mode;                   /* since 1.2: MEMD_INBOX_* it was put with */
	const char *id;                  /* since 1.2: host-made, unique per lane */
	const char *body_json;           /* since 1.2: the event, a JSON object */
	int64_t created_us;              /* since 1.2 */
	int64_t position;                /* since 1.2: output: ascending put order */
	uint32_t in_slot;                /* since 1.2: output: 1 = the next-up slot */
	uint32_t reserved;               /* since 1.2 */
} memd_inbox_item;

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
	/* Soft delete (since 1.2; output only: an append's events are
	 * visible; read only when struct_size covers them). */
	int64_t hidden_us;               /* since 1.2: 0 = visible */
	const char *hidden_by;           /* since 1.2: the operation that hid it */
	uint32_t hidden_kind;            /* since 1.2: that operation's MEMD_OP_* */
	uint32_t reserved2;              /* since 1.2 */
	const char *operation;           /* since 1.2: the operation that appended it; NULL = a plain append */
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
/* since 1.2: a lane's session was finalized (scope app, user, session).
 * Readers skip kinds they do not know. */
#define MEMD_FEED_FINALIZE       4u
/* since 1.2: an event was hidden (event set: its id and seq; the other
 * members as stored). An event unhidden later is a new EVENT record. */
#define MEMD_FEED_HIDE           5u
/* since 1.3: a memory was added or updated (memory set: the stored row,
 * position = the record's). */
#define MEMD_FEED_MEMORY         6u
/* since 1.3: a memory was deleted or expired (memory set: app, user, id;
 * the rest NULL/0; session NULL). */
#define MEMD_FEED_MEMORY_DELETE  7u

typedef struct memd_feed_record {
	uint32_t struct_size;            /* since 1.0 */
	uint32_t kind;                   /* since 1.0: MEMD_FEED_* */
	int64_t position;                /* since 1.0 */
	const char *app;                 /* since 1.0 */
	const char *user;                /* since 1.0 */
	const char *session;             /* since 1.0: NULL for DELETE_USER */
	const memd_event *event;         /* since 1.0: kind EVENT only */
	const memd_memory *memory;       /* since 1.3: kinds MEMORY, MEMORY_DELETE */
} memd_feed_record;

/* ---- queries ---------------------------------------------------------- */

/* memd_session_query.flags */
#define MEMD_SQ_INCLUDE_ARCHIVED 0x1u
/* since 1.2: newest activity first, by (updated_us, id); the keyset
 * before_created_us/before_id then means (updated_us, id). */
#define MEMD_SQ_BY_ACTIVITY      0x2u

/* Sessions of one (app, user), newest first by (created_us, id); keyset
 * paging: only sessions strictly before (before_created_us, before_id). */
typedef struct memd_session_query {
	uint32_t struct_size;            /* since 1.0 */
	uint32_t flags;                  /* since 1.0: MEMD_SQ_* */
	uint32_t limit;                  /* since 1.0: > 0 */
	uint32_t reserved;               /* since 1.0 */
	int64_t before_created_us;       /* since 1.0: 0 = from the newest */
	const char *before_id;           /* since 1.0: with before_created_us */
	const char *origin_platform;     /* since 1.2: only sessions with this origin platform; NULL = any */
	const char *lane_key;            /* since 1.2: only sessions made by this lane; NULL = any */
	int64_t updated_after_us;        /* since 1.2: only sessions with updated_us > this; 0 = any */
} memd_session_query;

/* memd_event_query.flags */
#define MEMD_EVQ_NEWEST       0x1u /* the newest `limit` matches (still delivered in seq order) */
#define MEMD_EVQ_NO_SUMMARY   0x2u /* skip role "summary" */
#define MEMD_EVQ_ONLY_SUMMARY 0x4u /* only role "summary" */
#define MEMD_EVQ_INCLUDE_HIDDEN 0x8u /* since 1.2: hidden events too (the audit trail) */

/* memd_event_query.roles (since 1.2): a mask; 0 = every role. */
#define MEMD_ROLE_USER      0x1u
#define MEMD_ROLE_ASSISTANT 0x2u
#define MEMD_ROLE_SYSTEM    0x4u
#define MEMD_ROLE_TOOL      0x8u
#define MEMD_ROLE_SUMMARY   0x10u

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
	uint32_t roles;                  /* since 1.2: MEMD_ROLE_* mask; 0 = all */
	uint32_t reserved2;              /* since 1.2 */
} memd_event_query;

/* Memories of one (app, user), newest first by (created_us, id); keyset
 * paging: only memories strictly before (before_created_us, before_id).
 * Every set filter must hold (since 1.3). */
typedef struct memd_memory_query {
	uint32_t struct_size;            /* since 1.3 */
	uint32_t limit;                  /* since 1.3: > 0 */
	const char *kind;                /* since 1.3: NULL = any */
	const char *topic;               /* since 1.3: an element of topics; NULL = any */
	const char *entity;              /* since 1.3: an element of entities; NULL = any */
	const char *session;             /* since 1.3: source_session equals; NULL = any */
	int64_t now_us;                  /* since 1.3: expired ones (0 < expires_us <= now_us) are skipped */
	int64_t before_created_us;       /* since 1.3: 0 = from the newest */
	const char *before_id;           /* since 1.3: with before_created_us */
} memd_memory_query;

/* Sessions of any app and user whose memory_seq < last_seq (events not
 * yet read by memory extraction) and updated_after_us < updated_us <
 * updated_before_us, ascending by (updated_us, app, user, id); keyset:
 * only sessions strictly after the after_* tuple (since 1.3). */
typedef struct memd_pending_query {
	uint32_t struct_size;            /* since 1.3 */
	uint32_t limit;                  /* since 1.3: > 0 */
	int64_t updated_after_us;        /* since 1.3: 0 = no bound */
	int64_t updated_before_us;       /* since 1.3: > 0 */
	int64_t after_updated_us;        /* since 1.3: 0 = from the oldest */
	const char *after_app;           /* since 1.3: with after_updated_us */
	const char *after_user;          /* since 1.3 */
	const char *after_id;            /* since 1.3 */
} memd_pending_query;

/* memd_session_update.fields */
#define MEMD_PATCH_TITLE    0x1u
#define MEMD_PATCH_METADATA 0x2u
#define MEMD_PATCH_ARCHIVED 0x4u
/* since 1.2: clear MEMD_SESSION_NOTICE without touching updated_us or
 * version; MEMD_ECONFLICT if it was not set (so exactly one caller of
 * several racing ones succeeds). */
#define MEMD_PATCH_CLEAR_NOTICE 0x8u

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
	/* since 1.2: added to the session's usage, and to the lane whose
	 * current session it is (if any), in the same transaction; NULL = none.
	 * The host sets it only for a store of minor >= 2. */
	const memd_usage *usage;
	/* since 1.2: a transcript operation done in the same transaction,
	 * before the events are added; NULL = a plain append. The host sets
	 * it only for a store of minor >= 2. */
	const struct memd_transcript_op *op;
} memd_append;

/* memd_append_result.flags */
#define MEMD_APPEND_REPLAYED 0x1u /* all ids existed; nothing was written */

typedef struct memd_append_result {
	uint32_t struct_size;            /* since 1.0 */
	uint32_t flags;                  /* since 1.0: MEMD_APPEND_REPLAYED */
	int64_t version;                 /* since 1.0: session version after */
	int64_t *seqs;                   /* since 1.0: caller-owned, n_events slots */
	int64_t hidden_count;            /* since 1.2: events the op hid */
	int64_t unhidden_count;          /* since 1.2: events an undo made visible again */
} memd_append_result;

/* memd_transcript_op.kind and memd_event.hidden_kind (since 1.2) */
#define MEMD_OP_REWIND  1u /* hide from a user turn on */
#define MEMD_OP_REWRITE 2u /* hide every event, then append the new transcript */
#define MEMD_OP_CLEAR   3u /* hide every event */
#define MEMD_OP_UNDO    4u /* reverse undo_id */

/* A transcript operation carried by an append (since 1.2). The store
 * keeps a record of it (memd_operation). With MEMD_APPEND_EXPECT_VERSION
 * the version check covers the operation too. A replayed append (every
 * event id exists) replays its operation too: nothing is written. */
typedef struct memd_transcript_op {
	uint32_t struct_size;            /* since 1.2 */
	uint32_t kind;                   /* since 1.2: MEMD_OP_* */
	const char *id;                  /* since 1.2: host-made; MEMD_ECONFLICT if the session has it */
	/* since 1.2: REWIND, REWRITE, CLEAR: hide every visible event with
	 * seq >= this (>= 1), marking it hidden_us = now_us, hidden_by = id,
	 * hidden_kind = kind. */
	int64_t hide_from_seq;
	/* since 1.2: UNDO: the operation to reverse: the events it hid become
	 * visible, the events it appended are hidden (by this op). MEMD_ECONFLICT
	 * unless the session's version is still the one that operation left
	 * and it was not undone; MEMD_ENOTFOUND if the session has no such
	 * operation. */
	const char *undo_id;
	/* since 1.2: JSON object {key: value or null}: the append's
	 * state_delta_json changes each of these keys only if its current
	 * value equals the one given (null = absent); other keys of the delta
	 * apply as usual. For restoring shared keys nobody changed since. */
	const char *state_expect_json;
	/* since 1.2: receives one JSON array of the keys of state_expect_json
	 * the store did not change; may be NULL. */
	const memd_text_sink *not_restored;
} memd_transcript_op;

/* A transcript operation as the store recorded it (since 1.2). */
typedef struct memd_operation {
	uint32_t struct_size;            /* since 1.2 */
	uint32_t kind;                   /* since 1.2: MEMD_OP_* */
	const char *id;                  /* since 1.2 */
	int64_t created_us;              /* since 1.2 */
	int64_t version;                 /* since 1.2: the session's version after it */
	int64_t hide_from_seq;           /* since 1.2 */
	int64_t first_seq;               /* since 1.2: events it appended: first..last; 0 = none */
	int64_t last_seq;                /* since 1.2 */
	int64_t hidden_count;            /* since 1.2 */
	int64_t unhidden_count;          /* since 1.2 */
	const char *undo_of;             /* since 1.2: UNDO: the operation it reversed */
	const char *undone_by;           /* since 1.2: the UNDO that reversed it; NULL */
} memd_operation;

/* One key's change by one append (since 1.2). */
typedef struct memd_state_change {
	uint32_t struct_size;            /* since 1.2 */
	uint32_t reserved;               /* since 1.2 */
	int64_t version;                 /* since 1.2: the session's version the append made */
	int64_t seq;                     /* since 1.2: the session's last_seq after that append */
	const char *key;                 /* since 1.2: with its prefix (app:, user:) */
	const char *old_json;            /* since 1.2: the value before; NULL = absent */
	const char *new_json;            /* since 1.2: the value after; NULL = deleted */
	int64_t at_us;                   /* since 1.2: the append's now_us */
	const char *operation;           /* since 1.2: the append's operation id; NULL */
} memd_state_change;

/* State changes of one session (since 1.2), ascending by (version, key);
 * keyset: only changes after (after_version, after_key). */
typedef struct memd_state_history_query {
	uint32_t struct_size;            /* since 1.2 */
	uint32_t limit;                  /* since 1.2: 0 = no limit */
	int64_t after_version;           /* since 1.2: 0 = from the first */
	const char *after_key;           /* since 1.2: with after_version; NULL = none */
	int64_t from_seq;                /* since 1.2: only changes with seq >= this; 0 = all */
} memd_state_history_query;

/* memd_lane_write.flags (since 1.2) */
#define MEMD_LW_CREATE        0x1u /* the lane must not exist yet (else ECONFLICT) */
#define MEMD_LW_CLEAR_INBOX   0x2u /* delete every inbox item of the lane */
#define MEMD_LW_FEED_FINALIZE 0x4u /* add a MEMD_FEED_FINALIZE record for lane->session */

/* One conditional write of a lane (since 1.2): all or nothing. */
typedef struct memd_lane_write {
	uint32_t struct_size;            /* since 1.2 */
	uint32_t flags;                  /* since 1.2: MEMD_LW_* */
	int64_t expected_version;        /* since 1.2: without CREATE, must equal the lane's */
	/* since 1.2: app, user, key, and the new value of every field except
	 * created_us, version, the usage sums and inbox_depth (store-kept). */
	const memd_lane *lane;
	/* since 1.2: a session created in the same transaction (as
	 * session_create, no state; MEMD_ECONFLICT if its id exists); NULL. */
	const memd_session *create_session;
	/* since 1.2: a session of (app, user) to mark ended (ended_us = now_us,
	 * end_reason) if it exists and is open; NULL = none. */
	const char *end_session;
	const char *end_reason;          /* since 1.2 */
	/* since 1.2: a session of (app, user) to reopen (ended_us = 0,
	 * end_reason NULL); MEMD_ENOTFOUND if it does not exist; NULL = none. */
	const char *reopen_session;
	/* since 1.2: added to the lane's sums and to lane->session's; NULL. */
	const memd_usage *usage;
	int64_t now_us;                  /* since 1.2 */
} memd_lane_write;

/* Lanes newest activity first, by (updated_us, app, user, key)
 * descending; keyset paging: only lanes strictly before the before_*
 * tuple (since 1.2). Every set filter must hold. */
#define MEMD_LQ_TURN_ANY  0u
#define MEMD_LQ_TURN_SOME 1u /* only lanes with a turn (turn_id set) */
#define MEMD_LQ_TURN_NONE 2u /* only lanes without a turn */
typedef struct memd_lane_query {
	uint32_t struct_size;            /* since 1.2 */
	uint32_t limit;                  /* since 1.2: > 0 */
	const char *app;                 /* since 1.2: NULL = every app (user must be NULL) */
	const char *user;                /* since 1.2: NULL = every user of app */
	uint32_t flags_all;              /* since 1.2: lanes having all these MEMD_LANE_* bits */
	uint32_t flags_none;             /* since 1.2: lanes having none of these bits */
	uint32_t turn;                   /* since 1.2: MEMD_LQ_TURN_* */
	uint32_t reserved;               /* since 1.2 */
	int64_t updated_after_us;        /* since 1.2: only updated_us > this; 0 = no bound */
	int64_t updated_before_us;       /* since 1.2: only updated_us < this; 0 = no bound */
	int64_t lease_before_us;         /* since 1.2: only turns whose lease ends < this; 0 = no bound */
	int64_t before_updated_us;       /* since 1.2: 0 = from the newest */
	const char *before_app;          /* since 1.2: with before_updated_us */
	const char *before_user;         /* since 1.2 */
	const char *before_key;          /* since 1.2 */
} memd_lane_query;

/* ---- checkpoints (since 1.5) ---------------------------------------- */

/* memd_checkpoint.run_state: what a restarting runtime should do with the
 * run whose newest root checkpoint this is (since 1.5). */
#define MEMD_RUN_UNSET       0u /* put: RUNNING; checkpoint_put_writes: unchanged */
#define MEMD_RUN_RUNNING     1u /* the run was going on: resume it automatically */
#define MEMD_RUN_INTERRUPTED 2u /* the run waits for a human: resume after approval */
#define MEMD_RUN_DONE        3u /* the run ended: nothing to resume */

/* One checkpoint (since 1.5). On input (put) app, user, session, ns, id,
 * type, payload and metadata_json are required; parent_id may be NULL. */
typedef struct memd_checkpoint {
	uint32_t struct_size;            /* since 1.5 */
	uint32_t run_state;              /* since 1.5: MEMD_RUN_* */
	const char *app;                 /* since 1.5 */
	const char *user;                /* since 1.5 */
	const char *session;             /* since 1.5: the run's thread */
	const char *ns;                  /* since 1.5: namespace, "" = root */
	const char *id;                  /* since 1.5: 1..MEMD_ID_MAX bytes, ordered as bytes */
	const char *parent_id;           /* since 1.5: the checkpoint it follows; NULL = none */
	const char *type;                /* since 1.5: the serializer's tag of payload */
	const void *payload;             /* since 1.5: opaque bytes (may be 0 bytes) */
	uint64_t payload_size;           /* since 1.5 */
	const char *metadata_json;       /* since 1.5: a JSON object */
	int64_t created_us;              /* since 1.5: output: the first put of this id */
	int64_t updated_us;              /* since 1.5: output: the last put or run-state change */
	int64_t expires_us;              /* since 1.5: 0 = never; else invisible once <= now */
} memd_checkpoint;

/* memd_checkpoint_write.flags */
#define MEMD_CKW_REPLACE 0x1u /* replace a stored write of the same (task_id, idx) */

/* One pending write of a checkpoint (since 1.5), keyed by (task_id, idx)
 * within the checkpoint. It is an element of arrays
 * (memd_checkpoint_writes.writes), so it never grows: what more a write
 * carries goes beside it (task_paths; memd_checkpoint_sink.task_write). */
typedef struct memd_checkpoint_write {
	uint32_t struct_size;            /* since 1.5 */
	uint32_t flags;                  /* since 1.5: MEMD_CKW_* (input only) */
	const char *task_id;             /* since 1.5 */
	int64_t idx;                     /* since 1.5: may be negative (special channels) */
	const char *channel;             /* since 1.5 */
	const char *type;                /* since 1.5: the serializer's tag of value */
	const void *value;               /* since 1.5: opaque bytes (may be 0 bytes) */
	uint64_t value_size;             /* since 1.5 */
} memd_checkpoint_write;

/* Pending writes for one checkpoint (since 1.5): all or nothing. Without
 * MEMD_CKW_REPLACE a write whose (task_id, idx) is stored already is
 * skipped (the stored one stays); with it, it replaces the stored one,
 * task path included. A store keeps each write's task path (since 1.6;
 * a 1.5 store keeps none, which reads back as ""). */
typedef struct memd_checkpoint_writes {
	uint32_t struct_size;            /* since 1.5 */
	uint32_t run_state;              /* since 1.5: MEMD_RUN_*; UNSET = unchanged */
	const char *ns;                  /* since 1.5 */
	const char *checkpoint_id;       /* since 1.5: must exist, unexpired (else ENOTFOUND) */
	const memd_checkpoint_write *writes; /* since 1.5 */
	uint32_t n_writes;               /* since 1.5: may be 0 (a run-state change only) */
	uint32_t reserved;               /* since 1.5 */
	int64_t now_us;                  /* since 1.5 */
	/* since 1.6: NULL, or n_writes entries: the path of the task that
	 * made each write (LangGraph's taskPath, which orders a step's
	 * writes); an entry NULL or "" = none. A parallel array, because
	 * memd_checkpoint_write never grows (an array's stride is the
	 * reader's sizeof). */
	const char *const *task_paths;
} memd_checkpoint_writes;

/* Checkpoints of one (app, user), newest first by (id, session, ns)
 * descending; keyset paging: only checkpoints strictly before the
 * (before_id, before_session, before_ns) tuple. Every set filter must
 * hold (since 1.5). */
typedef struct memd_checkpoint_query {
	uint32_t struct_size;            /* since 1.5 */
	uint32_t limit;                  /* since 1.5: > 0 */
	const char *session;             /* since 1.5: NULL = every session of the user */
	const char *ns;                  /* since 1.5: NULL = every namespace */
	const char *before_id;           /* since 1.5: NULL = from the newest */
	/* since 1.5: with before_id (EINVAL without it); NULL = only ids <
	 * before_id, else strictly before (before_id, before_session[, before_ns]) */
	const char *before_session;
	const char *before_ns;           /* since 1.5: with before_session; NULL = any */
	int64_t now_us;                  /* since 1.5: expired ones are skipped */
} memd_checkpoint_query;

/* Sessions of one app whose newest root ("" namespace) checkpoint is
 * unexpired and in one of run_states, ascending by (user, session);
 * keyset: only sessions strictly after (after_user, after_session)
 * (since 1.5). The store keeps a session's newest root checkpoint (its
 * head) so that this does not read every checkpoint. */
typedef struct memd_resumable_query {
	uint32_t struct_size;            /* since 1.5 */
	uint32_t limit;                  /* since 1.5: > 0 */
	const char *app;                 /* since 1.5 */
	uint32_t run_states;             /* since 1.5: mask of (1u << MEMD_RUN_*) */
	uint32_t reserved;               /* since 1.5 */
	int64_t now_us;                  /* since 1.5 */
	const char *after_user;          /* since 1.5: NULL = from the first */
	const char *after_session;       /* since 1.5: with after_user */
} memd_resumable_query;

/* ---- tasks (since 1.5) ---------------------------------------------- */

/* One task (since 1.5). On input (put) app, id, context_id, state and
 * task_json are required; user may be NULL (not linked to a session). */
typedef struct memd_task {
	uint32_t struct_size;            /* since 1.5 */
	uint32_t reserved;               /* since 1.5 */
	const char *app;                 /* since 1.5 */
	const char *id;                  /* since 1.5 */
	const char *context_id;          /* since 1.5: with user: the session it belongs to */
	const char *user;                /* since 1.5: NULL = none */
	const char *state;               /* since 1.5: the task's status.state */
	const char *task_json;           /* since 1.5: the whole task, a JSON object */
	int64_t created_us;              /* since 1.5: output: the first put */
	int64_t updated_us;              /* since 1.5: output: the last put */
	int64_t version;                 /* since 1.5: output: 1 after the first put, +1 per put */
} memd_task;

/* task_put flags */
#define MEMD_TASK_CREATE 0x1u /* the task must not exist (else MEMD_ECONFLICT) */

/* Tasks of one app, most recently updated first by (updated_us, id)
 * descending; keyset: only tasks strictly before (before_updated_us,
 * before_id). Every set filter must hold (since 1.5). */
typedef struct memd_task_query {
	uint32_t struct_size;            /* since 1.5 */
	uint32_t limit;                  /* since 1.5: > 0 */
	const char *app;                 /* since 1.5 */
	const char *context_id;          /* since 1.5: NULL = any */
	const char *state;               /* since 1.5: NULL = any */
	const char *user;                /* since 1.5: NULL = any */
	int64_t before_updated_us;       /* since 1.5: 0 = from the newest */
	const char *before_id;           /* since 1.5: with before_updated_us */
} memd_task_query;

/* A store's write counters (stats op): how its writes shared
 * transactions (group commit), for the host's /metrics. Every field is a
 * total since the store opened. */
typedef struct memd_store_stats {
	uint32_t struct_size;            /* since 1.4 */
	uint32_t reserved;               /* since 1.4 */
	uint64_t write_requests;         /* since 1.4: writes run through group commit */
	uint64_t write_groups;           /* since 1.4: the transactions they ran in */
	uint64_t commits;                /* since 1.4: COMMITs of the store's writer */
} memd_store_stats;

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

typedef struct memd_lane_sink {
	uint32_t struct_size;            /* since 1.2 */
	void *userdata;                  /* since 1.2 */
	int32_t (*lane)(void *userdata, const memd_lane *l); /* since 1.2 */
} memd_lane_sink;

typedef struct memd_inbox_sink {
	uint32_t struct_size;            /* since 1.2 */
	void *userdata;                  /* since 1.2 */
	int32_t (*item)(void *userdata, const memd_inbox_item *i); /* since 1.2 */
} memd_inbox_sink;

typedef struct memd_operation_sink {
	uint32_t struct_size;            /* since 1.2 */
	void *userdata;                  /* since 1.2 */
	int32_t (*operation)(void *userdata, const memd_operation *o); /* since 1.2 */
} memd_operation_sink;

typedef struct memd_state_change_sink {
	uint32_t struct_size;            /* since 1.2 */
	void *userdata;                  /* since 1.2 */
	int32_t (*change)(void *userdata, const memd_state_change *c); /* since 1.2 */
} memd_state_change_sink;

typedef struct memd_memory_sink {
	uint32_t struct_size;            /* since 1.3 */
	void *userdata;                  /* since 1.3 */
	int32_t (*memory)(void *userdata, const memd_memory *m); /* since 1.3 */
} memd_memory_sink;

typedef struct memd_memory_change_sink {
	uint32_t struct_size;            /* since 1.3 */
	void *userdata;                  /* since 1.3 */
	int32_t (*change)(void *userdata, const memd_memory_change *c); /* since 1.3 */
} memd_memory_change_sink;

typedef struct memd_checkpoint_sink {
	uint32_t struct_size;            /* since 1.5 */
	void *userdata;                  /* since 1.5 */
	int32_t (*checkpoint)(void *userdata, const memd_checkpoint *c); /* since 1.5 */
	/* since 1.5: NULL = writes not wanted; else each checkpoint's pending
	 * writes follow it, ascending by (task_path, task_id, idx), strings
	 * compared as bytes (a 1.5 store: by (task_id, idx), its paths all
	 * ""). A 1.6 store delivers them through task_write instead when the
	 * sink has it (set both: a 1.5 store calls write). */
	int32_t (*write)(void *userdata, const memd_checkpoint_write *w);
	/* since 1.6: optional: a pending write with the path of the task
	 * that made it ("" = none, never NULL). */
	int32_t (*task_write)(void *userdata, const memd_checkpoint_write *w,
			      const char *task_path);
} memd_checkpoint_sink;

typedef struct memd_task_sink {
	uint32_t struct_size;            /* since 1.5 */
	void *userdata;                  /* since 1.5 */
	int32_t (*task)(void *userdata, const memd_task *t); /* since 1.5 */
} memd_task_sink;

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

	/* ---- lanes (since 1.2, optional as a group) ---- */

	/* since 1.2: scope->session ignored. Delivers the lane (with
	 * inbox_depth). MEMD_ENOTFOUND if absent. session_out (NULL: not
	 * asked): after the lane, the record of the session lane->session,
	 * read in the same transaction (snapshot) as the lane, so the two are
	 * consistent; nothing is delivered to it when that session does not
	 * exist (the call still succeeds). */
	int32_t (*lane_get)(void *inst, const memd_call *call, const memd_scope *scope,
			    const char *key, const memd_lane_sink *out,
			    const memd_session_sink *session_out, memd_error *err);
	/* since 1.2: see memd_lane_write and the header comment; w->lane's
	 * app, user, key name the lane. Delivers the stored lane. */
	int32_t (*lane_write)(void *inst, const memd_call *call, const memd_lane_write *w,
			      const memd_lane_sink *out, memd_error *err);
	/* since 1.2: see memd_lane_query; each lane with its inbox_depth. */
	int32_t (*lane_list)(void *inst, const memd_call *call, const memd_lane_query *q,
			     const memd_lane_sink *out, memd_error *err);
	/* since 1.2: removes the lane and its inbox (its sessions stay).
	 * MEMD_ENOTFOUND if absent. */
	int32_t (*lane_delete)(void *inst, const memd_call *call, const memd_scope *scope,
			       const char *key, memd_error *err);
	/* since 1.2: deletes up to limit lanes (with their inboxes), of any
	 * app, whose updated_us < updated_before_us, that are not suspended
	 * and have no turn; writes how many. */
	int32_t (*lane_prune)(void *inst, const memd_call *call, int64_t updated_before_us,
			      uint32_t limit, uint32_t *ret_count, memd_error *err);

	/* since 1.2: one atomic put (item->id, mode, body_json, created_us).
	 * INTERRUPT replaces the slot's item; QUEUE takes the slot if it is
	 * empty, else the FIFO's tail. Writes the depth after. MEMD_ENOTFOUND
	 * if the lane does not exist. */
	int32_t (*inbox_put)(void *inst, const memd_call *call, const memd_scope *scope,
			     const char *key, const memd_inbox_item *item, uint32_t *ret_depth,
			     memd_error *err);
	/* since 1.2: only for the lane's turn holder: MEMD_ECONFLICT unless
	 * turn_id is the lane's turn and its lease ends after now_us. Removes
	 * and delivers the next item (the slot's; else the FIFO head), and
	 * moves the FIFO head into an emptied slot, in one transaction, so
	 * racing takers never get one item twice; delivers nothing when the
	 * inbox is empty. Writes the depth after. */
	int32_t (*inbox_take)(void *inst, const memd_call *call, const memd_scope *scope,
			      const char *key, const char *turn_id, int64_t now_us,
			      const memd_inbox_sink *out, uint32_t *ret_depth, memd_error *err);
	/* since 1.2: every item, the slot's first, then the FIFO in order. */
	int32_t (*inbox_list)(void *inst, const memd_call *call, const memd_scope *scope,
			      const char *key, const memd_inbox_sink *out, memd_error *err);

	/* since 1.2: up to limit sessions of any app and user with
	 * 0 < ended_us < ended_before_us, oldest ended first (for retention). */
	int32_t (*session_list_ended)(void *inst, const memd_call *call, int64_t ended_before_us,
				      uint32_t limit, const memd_session_sink *out,
				      memd_error *err);

	/* ---- transcripts (since 1.2; with append's op) ---- */

	/* since 1.2: the session's operations, newest first, at most limit
	 * (0 = all). MEMD_ENOTFOUND if the session does not exist. */
	int32_t (*operation_list)(void *inst, const memd_call *call, const memd_scope *scope,
				  uint32_t limit, const memd_operation_sink *out, memd_error *err);
	/* since 1.2: one operation; MEMD_ENOTFOUND if absent. */
	int32_t (*operation_get)(void *inst, const memd_call *call, const memd_scope *scope,
				 const char *id, const memd_operation_sink *out, memd_error *err);
	/* since 1.2: see memd_state_history_query. MEMD_ENOTFOUND if the
	 * session does not exist. */
	int32_t (*state_history)(void *inst, const memd_call *call, const memd_scope *scope,
				 const memd_state_history_query *q,
				 const memd_state_change_sink *out, memd_error *err);

	/* ---- memories (since 1.3, optional as a group) ---- */

	/* since 1.3: see memd_memory_commit and the header comment; scope
	 * names (app, user) (session ignored). Delivers each written memory in
	 * write order (DELETE: as it was). */
	int32_t (*memory_commit)(void *inst, const memd_call *call, const memd_scope *scope,
				 const memd_memory_commit *c, const memd_memory_sink *out,
				 memd_error *err);
	/* since 1.3: one memory of (app, user); MEMD_ENOTFOUND if absent or
	 * expired at now_us. */
	int32_t (*memory_get)(void *inst, const memd_call *call, const memd_scope *scope,
			      const char *id, int64_t now_us, const memd_memory_sink *out,
			      memd_error *err);
	/* since 1.3: see memd_memory_query. */
	int32_t (*memory_list)(void *inst, const memd_call *call, const memd_scope *scope,
			       const memd_memory_query *q, const memd_memory_sink *out,
			       memd_error *err);
	/* since 1.3: every change of memory id, oldest first (also after a
	 * delete); MEMD_ENOTFOUND if it has none. */
	int32_t (*memory_history)(void *inst, const memd_call *call, const memd_scope *scope,
				  const char *id, const memd_memory_change_sink *out,
				  memd_error *err);
	/* since 1.3: deletes up to limit memories of any app whose
	 * 0 < expires_us <= now_us (history op MEMD_MEM_EXPIRE, actor
	 * "retention", a MEMORY_DELETE feed record each); writes how many. */
	int32_t (*memory_expire)(void *inst, const memd_call *call, int64_t now_us,
				 uint32_t limit, uint32_t *ret_count, memd_error *err);
	/* since 1.3: see memd_pending_query. */
	int32_t (*session_list_pending)(void *inst, const memd_call *call,
					const memd_pending_query *q, const memd_session_sink *out,
					memd_error *err);

	/* since 1.4, optional (a 1.3 host never calls it, so a store may
	 * fill it and still need only 1.3): the
	 * store's write counters into *ret (its struct_size set by the host;
	 * fill only the fields it covers). Must not wait for a write in
	 * progress. */
	int32_t (*stats)(void *inst, memd_store_stats *ret, memd_error *err);

	/* ---- checkpoints (since 1.5, optional as a group) ---- */

	/* since 1.5: stores c (keyed by app, user, session, ns, id) in one
	 * transaction: a new id is inserted (created_us = updated_us =
	 * now_us); a stored id is replaced (payload, type, parent, metadata,
	 * run state, expires_us; created_us kept; its writes kept); run_state
	 * UNSET stores RUNNING. The session must exist (MEMD_ENOTFOUND) unless
	 * create_session is set: then a missing session is created in the same
	 * transaction as session_create would (no title, metadata "{}"), and
	 * its creation is what *ret_created_session says (may be NULL).
	 * In the root namespace ("") an id greater than every other of the
	 * session becomes the session's head (memd_resumable_query). */
	int32_t (*checkpoint_put)(void *inst, const memd_call *call, const memd_checkpoint *c,
				  int create_session, int64_t now_us, int *ret_created_session,
				  memd_error *err);
	/* since 1.5: see memd_checkpoint_writes; scope names the session. */
	int32_t (*checkpoint_put_writes)(void *inst, const memd_call *call,
					 const memd_scope *scope, const memd_checkpoint_writes *w,
					 memd_error *err);
	/* since 1.5: one checkpoint of (scope, ns): id, or the newest
	 * unexpired one when id is NULL; delivers it with its payload (and its
	 * writes when out->write is set). MEMD_ENOTFOUND if absent or expired
	 * (or, id NULL, the namespace has none). */
	int32_t (*checkpoint_get)(void *inst, const memd_call *call, const memd_scope *scope,
				  const char *ns, const char *id, int64_t now_us,
				  const memd_checkpoint_sink *out, memd_error *err);
	/* since 1.5: see memd_checkpoint_query; scope names (app, user)
	 * (session ignored: q->session). Delivers payloads (and writes when
	 * out->write is set). A session that does not exist lists nothing. */
	int32_t (*checkpoint_list)(void *inst, const memd_call *call, const memd_scope *scope,
				   const memd_checkpoint_query *q, const memd_checkpoint_sink *out,
				   memd_error *err);
	/* since 1.5: removes the checkpoints and writes of the session in ns
	 * (NULL = every namespace); writes how many checkpoints went (0 is a
	 * success). */
	int32_t (*checkpoint_delete)(void *inst, const memd_call *call, const memd_scope *scope,
				     const char *ns, uint32_t *ret_count, memd_error *err);
	/* since 1.5: see memd_resumable_query. Delivers each head without its
	 * payload (payload NULL, payload_size 0) and without writes. */
	int32_t (*checkpoint_resumable)(void *inst, const memd_call *call,
					const memd_resumable_query *q,
					const memd_checkpoint_sink *out, memd_error *err);
	/* since 1.5: deletes up to limit checkpoints (with their writes) of
	 * any app whose 0 < expires_us <= now_us, oldest expiry first; a
	 * deleted head passes to the newest remaining root checkpoint of its
	 * session, if any. Writes how many. */
	int32_t (*checkpoint_expire)(void *inst, const memd_call *call, int64_t now_us,
				     uint32_t limit, uint32_t *ret_count, memd_error *err);

	/* ---- tasks (since 1.5, optional as a group) ---- */

	/* since 1.5: stores t in one conditional transaction, writing nothing
	 * on failure: MEMD_ECONFLICT if flags has MEMD_TASK_CREATE and the
	 * task exists, if expected_version != 0 and differs from the stored
	 * version, or if the stored state is terminal (completed, canceled,
	 * failed, rejected) and t->state differs; MEMD_ENOTFOUND if
	 * expected_version != 0 and the task does not exist. Else inserts
	 * (version 1, created_us = updated_us = now_us) or replaces every
	 * column but created_us (version + 1, updated_us = now_us). Delivers
	 * the stored task. */
	int32_t (*task_put)(void *inst, const memd_call *call, const memd_task *t,
			    uint32_t flags, int64_t expected_version, int64_t now_us,
			    const memd_task_sink *out, memd_error *err);
	/* since 1.5: MEMD_ENOTFOUND if absent. */
	int32_t (*task_get)(void *inst, const memd_call *call, const char *app, const char *id,
			    const memd_task_sink *out, memd_error *err);
	/* since 1.5: see memd_task_query. */
	int32_t (*task_list)(void *inst, const memd_call *call, const memd_task_query *q,
			     const memd_task_sink *out, memd_error *err);
	/* since 1.5: expected_version 0 = any; else MEMD_ECONFLICT unless it
	 * equals the stored version. MEMD_ENOTFOUND if absent. */
	int32_t (*task_delete)(void *inst, const memd_call *call, const char *app, const char *id,
			       int64_t expected_version, memd_error *err);
} memd_store_ops;

#ifdef __cplusplus
}
#endif
#endif /* MEMD_STORE_H */
