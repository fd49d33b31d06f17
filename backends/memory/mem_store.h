/* SPDX-License-Identifier: MIT */
/*
 * mem_store: the records of the in-memory store and the helpers its files
 * share (memory.c: sessions, events, state, artifacts, the feed, cursors;
 * mem_lanes.c: lanes, their inboxes and the session lifecycle;
 * mem_transcripts.c: hidden events, transcript operations, state history
 * and the sessions' activity order; mem_memories.c: long-term memories,
 * their history and the extraction cursor; mem_tasks.c: A2A tasks;
 * mem_checkpoints.c: run checkpoints and their pending writes).
 *
 * Every function here expects the store's lock to be held by the caller
 * unless it says otherwise, and follows the store's two-phase rule: a
 * function that can fail changes nothing visible when it does; a function
 * documented as a commit step cannot fail.
 */
#ifndef MEMD_MEMORY_MEM_STORE_H
#define MEMD_MEMORY_MEM_STORE_H

#include <memd/plugin.h>

#include <pthread.h>

#include "hmap.h"
#include "plugin_util.h"

#define MEM_PLUGIN_NAME "memory"
#define MEM_PLUGIN_VERSION "1.3.0"
#define MEM_ROLE_SUMMARY "summary"
#define MEM_EMPTY_OBJECT "{}"
/* app \0 user \0 session (or lane key) \0: the longest composite key. */
#define MEM_KEY_PARTS 3
#define MEM_KEY_MAX (MEM_KEY_PARTS * (MEMD_ID_MAX + 1))
#define MEM_MIN_CAP 16
/* Compact the feed when dead records are over half of it and at least this many. */
#define MEM_FEED_COMPACT_MIN 64
#define US_PER_S 1000000
#define NS_PER_US 1000

/* Is member m inside the struct_size the caller declared? */
#define MEM_HAS(p, m) ((p)->struct_size >= offsetof(__typeof__(*(p)), m) + sizeof((p)->m))

/* ---- records ---------------------------------------------------------- */

struct mem_session;
struct mem_lane;
struct mem_op;
struct mem_memory;
struct mem_ckpt;

typedef struct mem_event {
	const struct mem_session *owner;
	char *id;
	char *invocation_id;
	char *author;
	char *role;
	char *branch;
	char *content_json;
	char *actions_json;
	char *metadata_json;
	char *text;
	uint32_t flags;
	int is_summary;
	int64_t seq;
	int64_t timestamp_us;
	int64_t tokens;
	int64_t covers_seq;
	int64_t position;      /* of its (latest) EVENT feed record */
	uint32_t role_bit;     /* MEMD_ROLE_* of role; 0 for another role */
	uint32_t hidden_kind;  /* MEMD_OP_* of hidden_by */
	int64_t hidden_us;     /* 0 = visible */
	const struct mem_op *hidden_by; /* the operation that hid it; NULL */
	const struct mem_op *operation; /* the operation that appended it; NULL */
} mem_event;

/* Events in ascending seq order (a session's visible ones, its summaries). */
typedef struct mem_evlist {
	mem_event **v;
	size_t n;
	size_t cap;
} mem_evlist;

/* A transcript operation as recorded (memd_operation), owned by its
 * session; events point at it (hidden_by, operation). */
typedef struct mem_op {
	uint32_t kind;         /* MEMD_OP_* */
	char *id;
	int64_t created_us;
	int64_t version;
	int64_t hide_from_seq;
	int64_t first_seq;     /* the events it appended: first..last; 0 = none */
	int64_t last_seq;
	int64_t hidden_count;
	int64_t unhidden_count;
	char *undo_of;         /* UNDO: the operation it reversed */
	const struct mem_op *undone_by; /* the UNDO that reversed it; NULL */
	mem_evlist hid;        /* the events it hid */
} mem_op;

/* One key's change by one append (memd_state_change). */
typedef struct mem_state_change {
	int64_t version;
	int64_t seq;
	int64_t at_us;
	char *key;             /* with its prefix */
	char *old_json;        /* NULL = absent */
	char *new_json;        /* NULL = deleted */
	const mem_op *operation; /* NULL = a plain append */
} mem_state_change;

typedef struct mem_artifact {
	int64_t version;
	char *mime_type;
	void *data;
	uint64_t size;
	int64_t created_us;
} mem_artifact;

/* Every version of one artifact name; versions[i].version == i + 1. */
typedef struct mem_artset {
	char *name;
	mem_artifact *versions;
	size_t n;
	size_t cap;
} mem_artset;

/* Token and cost sums of a session or a lane (memd_usage's fields). */
typedef struct mem_usage {
	int64_t input_tokens;
	int64_t output_tokens;
	int64_t cache_read_tokens;
	int64_t cache_write_tokens;
	int64_t cost_micro_usd;
	int64_t last_prompt_tokens; /* the latest nonzero report, not a sum */
} mem_usage;

/* Lanes in ascending (updated_us, app, user, key) order; lane_list walks
 * one of these backwards. */
typedef struct mem_lane_index {
	struct mem_lane **v;
	size_t n;
	size_t cap;
} mem_lane_index;

struct mem_user;

typedef struct mem_session {
	struct mem_user *owner;
	char *app;
	char *user;
	char *id;
	char *title;           /* NULL = unset */
	char *metadata_json;
	uint32_t flags;
	int64_t created_us;
	int64_t updated_us;
	int64_t version;
	int64_t summary_seq;
	/* Lifecycle (store.h 1.2); every string may be NULL. */
	char *lane_key;
	char *origin_json;
	char *origin_platform;
	char *previous_session;
	char *start_reason;
	char *end_reason;
	int64_t ended_us;      /* 0 while open; > 0: in mem_store.ended */
	mem_usage usage;
	int64_t memory_seq;    /* store.h 1.3: the extraction cursor */
	mem_event **events;    /* events[seq - 1], hidden ones too */
	size_t n_events;
	size_t cap_events;
	mem_evlist summaries;  /* role-summary events, hidden ones too */
	mem_evlist visible;    /* the events that are not hidden */
	mem_evlist visible_summaries; /* the summaries that are not hidden */
	int64_t *hide_feed;    /* positions of its MEMD_FEED_HIDE records */
	size_t n_hide_feed;
	size_t cap_hide_feed;
	mem_op **ops;          /* its operations, oldest first */
	size_t n_ops;
	size_t cap_ops;
	hmap op_ids;           /* operation id -> mem_op* */
	mem_state_change *history; /* ascending (version, key) */
	size_t n_history;
	size_t cap_history;
	hmap event_ids;        /* event id -> mem_event* */
	hmap state;            /* plain key -> JSON text */
	hmap artifacts;        /* name -> mem_artset* */
	struct mem_ckpt **ckpts; /* its checkpoints, ascending (ns, id) (mem_checkpoints.c) */
	size_t n_ckpts;
	size_t cap_ckpts;
} mem_session;

typedef struct mem_user {
	char *app;
	char *user;
	hmap state;            /* "user:" key (bare) -> JSON text */
	mem_session **sessions; /* newest first by (created_us, id) */
	size_t n_sessions;
	size_t cap_sessions;
	mem_session **by_activity; /* the same, ascending (updated_us, id) */
	size_t cap_by_activity; /* holds n_sessions */
	mem_lane_index lanes;  /* the user's lanes */
	/* Memories (mem_memories.c). */
	hmap memories;         /* id -> mem_memory* (expired ones until deleted) */
	struct mem_memory **memory_order; /* the same, newest first by (created_us, id) */
	size_t n_memories;
	size_t cap_memories;
	hmap memory_history;   /* id -> mem_mhist* (also of deleted ones) */
} mem_user;

typedef struct mem_app {
	hmap state;            /* "app:" key (bare) -> JSON text */
	mem_lane_index lanes;  /* the app's lanes, every user */
} mem_app;

#define MEM_FEED_DEAD 0u

typedef struct mem_feed_entry {
	int64_t position;
	uint32_t kind;         /* MEMD_FEED_*, or MEM_FEED_DEAD */
	mem_event *event;      /* kinds EVENT and HIDE */
	struct mem_memory *memory; /* kind MEMORY: the row it carries */
	char *app;             /* other kinds: owned */
	char *user;
	char *session;         /* NULL for DELETE_USER */
	char *memory_id;       /* kind MEMORY_DELETE: owned */
} mem_feed_entry;

typedef struct mem_store {
	const memd_host *host;
	pthread_mutex_t lock;
	hmap sessions;         /* app\0user\0id -> mem_session* */
	hmap users;            /* app\0user -> mem_user* */
	hmap apps;             /* app -> mem_app* */
	hmap cursors;          /* name -> int64_t* */
	hmap lanes;            /* app\0user\0key -> mem_lane* */
	mem_lane_index all_lanes; /* every lane */
	/* Ended sessions, ascending (ended_us, app, user, id). */
	mem_session **ended;
	size_t n_ended;
	size_t cap_ended;
	mem_feed_entry *feed;  /* ascending position */
	size_t n_feed;
	size_t cap_feed;
	size_t n_dead;
	int64_t feed_head;
	/* Memories with an expiry, ascending (expires_us, app, user, id). */
	struct mem_memory **expiring;
	size_t n_expiring;
	size_t cap_expiring;
	/* A2A tasks (mem_tasks.c): app\0id -> mem_task*, and the same in
	 * ascending (app, updated_us, id) order. */
	hmap tasks;
	struct mem_task **task_order;
	size_t n_tasks;
	size_t cap_tasks;
} mem_store;

/* ---- small helpers (memory.c; no lock needed) ------------------------- */

/* A copy of s (NULL for NULL, or on ENOMEM). */
char *mem_strdup(const char *s);
/* Copy s into *ret (NULL stays NULL). 0, or -1 on ENOMEM. */
int mem_dup_opt(const char *s, char **ret);
int32_t mem_enomem(memd_error *err);
/* Grow *arr (elements of size elem) so that it can hold `need` elements.
 * 0, or -1 on ENOMEM (*arr unchanged). */
int mem_grow(void **arr, size_t *cap, size_t need, size_t elem);
/* Build the composite key of the parts (each a checked id; a NULL part
 * ends the key) into buf; returns its length. */
size_t mem_key(char buf[MEM_KEY_MAX], const char *app, const char *user, const char *third);
/* <0 if (ca, ia) sorts before (cb, ib) in ascending (time, id) order
 * (a session's or a memory's (created_us, id)); a NULL id is below every
 * id. */
int mem_order_cmp(int64_t ca, const char *ia, int64_t cb, const char *ib);
/* Deadline/cancel check at the start of an op; takes no lock. */
int32_t mem_begin(const mem_store *st, const memd_call *call, memd_error *err);
/* A sink's nonzero return stops the producer: passes r on (filling err
 * when negative). Producers return mem_sink_final(r) at the end. */
int32_t mem_sink_result(int32_t r, memd_error *err);
/* A positive sink result only meant "stop": the call succeeded. */
int32_t mem_sink_final(int32_t r);
/* 0 if text is NULL or a JSON object, else MEMD_EINVAL naming what. */
int32_t mem_check_json_object(const char *what, const char *text, memd_error *err);

/* Check *in (struct_size, no negative value) and copy it into *ret, the
 * members beyond in->struct_size reading as 0. MEMD_EINVAL on bad input. */
int32_t mem_usage_read(const memd_usage *in, mem_usage *ret, memd_error *err);
/* Add every member of add to sum, except last_prompt_tokens, which
 * replaces sum's when it is > 0. */
void mem_usage_add(mem_usage *sum, const mem_usage *add);

/* ---- lookups and records (memory.c) ----------------------------------- */

mem_session *mem_session_find(const mem_store *st, const memd_scope *scope);
/* The session of scope, or MEMD_ENOTFOUND saying so. */
int32_t mem_session_require(const mem_store *st, const memd_scope *scope, mem_session **ret,
			    memd_error *err);
/* The session (app, user, id), or NULL. */
mem_session *mem_session_find3(const mem_store *st, const char *app, const char *user,
			       const char *id);
mem_user *mem_user_find(const mem_store *st, const char *app, const char *user);
/* The user record of (app, user), created (empty) if absent. */
int32_t mem_user_get_or_create(mem_store *st, const char *app, const char *user,
			       mem_user **ret, memd_error *err);
/* The app record, created (empty) if absent. */
int32_t mem_app_get_or_create(mem_store *st, const char *app, mem_app **ret, memd_error *err);
/* The app record, or NULL. */
mem_app *mem_app_find(const mem_store *st, const char *app);
/* Drop a user record that holds nothing any more (no sessions, state,
 * lanes, memories or memory history); u is freed then. */
void mem_user_drop_if_empty(mem_store *st, mem_user *u);

/* Deliver s (every member, the 1.2 lifecycle and usage ones included) to
 * out (NULL: no-op). */
int32_t mem_session_deliver(const mem_session *s, const memd_session_sink *out,
			    memd_error *err);

/* A parsed state delta, staged before a write commits. */
typedef struct mem_state_op {
	int32_t scope;         /* PU_SCOPE_* */
	int skip;              /* a state expectation failed: left as it is */
	hmap_node *node;       /* bare key; value = JSON text, or NULL to delete */
} mem_state_op;

typedef struct mem_state_ops {
	mem_state_op *ops;
	size_t n;
	size_t cap;
	size_t sets[PU_SCOPE_COUNT]; /* inserts each scope may need */
} mem_state_ops;

/* The map of scope's keys for s (a may be NULL but for PU_SCOPE_APP). */
hmap *mem_state_map(mem_session *s, mem_app *a, int32_t scope);

/* Check a session record for creating: ids, metadata and origin JSON;
 * the lifecycle members only when in->struct_size covers them. No lock. */
int32_t mem_session_check(const memd_session *in, memd_error *err);

/* A session made but not yet linked: mem_session_prepare allocates and
 * checks everything (MEMD_ECONFLICT if the id exists), then exactly one of
 * mem_session_commit (cannot fail) or mem_session_abort. */
typedef struct mem_session_new {
	mem_session *s;
	hmap_node *node;       /* for st->sessions */
	mem_app *app;          /* for app: state keys */
	int created_user;      /* s->owner was made for it */
	mem_state_ops state;   /* staged initial state */
} mem_session_new;
int32_t mem_session_prepare(mem_store *st, const memd_session *in, const char *delta,
			    mem_session_new *ret, memd_error *err);
void mem_session_commit(mem_store *st, mem_session_new *n);
void mem_session_abort(mem_store *st, mem_session_new *n);

/* A feed record of kind (not EVENT) for the scope, allocated (and the
 * feed's room for it reserved) before the write commits. Free an unused
 * one with mem_feed_entry_clear. */
int32_t mem_feed_prepare_scoped(mem_store *st, uint32_t kind, const char *app,
				const char *user, const char *session, mem_feed_entry *ret,
				memd_error *err);
/* Commit step: the next position for f (room reserved); an EVENT
 * record's event takes that position. */
void mem_feed_push(mem_store *st, mem_feed_entry f);
void mem_feed_entry_clear(mem_feed_entry *f);
/* Commit step: compact the feed if dead records dominate it. */
void mem_feed_compact(mem_store *st);
/* Commit step: mark the live record at position dead (if there is one). */
void mem_feed_kill(mem_store *st, int64_t position);

#endif
