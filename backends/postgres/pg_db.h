/* SPDX-License-Identifier: MIT */
/*
 * pg_db: the PostgreSQL store's connections. A pool of libpq connections
 * (opened lazily, reopened by themselves after the server went away), each
 * kept in pipeline mode: an op queues its prepared statements with pg_send
 * and pg_run sends them in one round trip and collects every result.
 * Statements are prepared on a connection the first time they are queued
 * there (in the same round trip). SQLSTATE -> MEMD_E* mapping, and the
 * scope, id and JSON checks every op shares.
 */
#ifndef MEMD_PG_DB_H
#define MEMD_PG_DB_H

#include <libpq-fe.h>
#include <pthread.h>

#include <memd/plugin.h>

/* Every prepared statement has one slot per connection; its SQL text lives
 * beside the code that uses it (see pg_sql). */
typedef enum pg_stmt_id {
	PG_ST_BEGIN,
	PG_ST_BEGIN_READ,
	PG_ST_COMMIT,
	PG_ST_ROLLBACK,
	/* sessions */
	PG_ST_SESSION_INSERT,
	PG_ST_SESSION_GET,
	PG_ST_SESSION_LOCK,
	PG_ST_SESSION_EXISTS,
	PG_ST_SESSION_LIST,
	PG_ST_SESSION_LIST_BEFORE,
	PG_ST_SESSION_LIST_LANE,
	PG_ST_SESSION_LIST_LANE_BEFORE,
	PG_ST_SESSION_LIST_PLATFORM,
	PG_ST_SESSION_LIST_PLATFORM_BEFORE,
	PG_ST_SESSION_LIST_ACTIVITY,
	PG_ST_SESSION_LIST_ACTIVITY_BEFORE,
	PG_ST_SESSION_LIST_ENDED,
	PG_ST_SESSION_UPDATE,
	PG_ST_SESSION_APPENDED,
	PG_ST_SESSION_LANE_LOCK,
	PG_ST_SESSION_LANE_USAGE,
	PG_ST_SESSION_DELETE,
	PG_ST_USER_SESSIONS_DELETE,
	PG_ST_STATE_USER_DELETE_ALL,
	/* events */
	PG_ST_EVENT_INSERT,
	PG_ST_EVENT_SEQS_BY_ID,
	PG_ST_EVENTS_ASC,
	PG_ST_EVENTS_DESC,
	PG_ST_SUMMARIES_ASC,
	PG_ST_SUMMARIES_DESC,
	PG_ST_NONSUMMARIES_ASC,
	PG_ST_NONSUMMARIES_DESC,
	PG_ST_EVENTS_BY_TIME_ASC,
	PG_ST_EVENTS_BY_TIME_DESC,
	PG_ST_EVENTS_ALL_ASC,
	PG_ST_EVENTS_ALL_DESC,
	PG_ST_SUMMARIES_ALL_ASC,
	PG_ST_SUMMARIES_ALL_DESC,
	PG_ST_NONSUMMARIES_ALL_ASC,
	PG_ST_NONSUMMARIES_ALL_DESC,
	/* transcript operations */
	PG_ST_OP_LOOKUP,
	PG_ST_OP_INSERT,
	PG_ST_OP_HIDE,
	PG_ST_OP_UNHIDE,
	PG_ST_OP_MARK_UNDONE,
	PG_ST_OP_LIST,
	PG_ST_OP_GET,
	PG_ST_STATE_HISTORY,
	PG_ST_STATE_HISTORY_AFTER,
	/* state */
	PG_ST_STATE_APP_SET,
	PG_ST_STATE_USER_SET,
	PG_ST_STATE_SESSION_SET,
	PG_ST_STATE_APP_LOCK,
	PG_ST_STATE_USER_LOCK,
	PG_ST_STATE_ALL,
	/* artifacts */
	PG_ST_ARTIFACT_LOCK,
	PG_ST_ARTIFACT_INSERT,
	PG_ST_ARTIFACT_GET,
	PG_ST_ARTIFACT_GET_LATEST,
	PG_ST_ARTIFACT_LIST,
	PG_ST_ARTIFACT_VERSIONS,
	PG_ST_ARTIFACT_DELETE,
	/* lanes and their inboxes */
	PG_ST_LANE_GET,
	PG_ST_LANE_SESSION_GET,
	PG_ST_LANE_LOCK,
	PG_ST_LANE_CREATE,
	PG_ST_LANE_SESSION_LOCK,
	PG_ST_LANE_SESSION_CREATE,
	PG_ST_LANE_SESSION_END,
	PG_ST_LANE_SESSION_REOPEN,
	PG_ST_LANE_SESSION_USAGE,
	PG_ST_LANE_INBOX_CLEAR,
	PG_ST_LANE_WRITE,
	PG_ST_LANE_FINALIZE,
	PG_ST_LANE_LIST_ALL,
	PG_ST_LANE_LIST_ALL_BEFORE,
	PG_ST_LANE_LIST_APP,
	PG_ST_LANE_LIST_APP_BEFORE,
	PG_ST_LANE_LIST_USER,
	PG_ST_LANE_LIST_USER_BEFORE,
	PG_ST_LANE_DELETE,
	PG_ST_LANE_PRUNE,
	PG_ST_INBOX_LOCK,
	PG_ST_INBOX_NEXT,
	PG_ST_INBOX_SLOT_REPLACE,
	PG_ST_INBOX_INSERT,
	PG_ST_INBOX_HOLDER,
	PG_ST_INBOX_TAKE,
	PG_ST_INBOX_PROMOTE,
	PG_ST_INBOX_LIST,
	PG_ST_USER_LANES_DELETE,
	/* memories */
	PG_ST_MEMORY_CURSOR_MOVE,
	PG_ST_MEMORY_CURSOR_READ,
	PG_ST_MEMORY_LOCK,
	PG_ST_MEMORY_FEED_ALLOC,
	PG_ST_MEMORY_ADD,
	PG_ST_MEMORY_UPDATE,
	PG_ST_MEMORY_DELETE,
	PG_ST_MEMORY_GET,
	PG_ST_MEMORY_LIST,
	PG_ST_MEMORY_LIST_BEFORE,
	PG_ST_MEMORY_HISTORY,
	PG_ST_MEMORY_EXPIRE,
	PG_ST_SESSION_LIST_PENDING,
	/* checkpoints */
	PG_ST_CK_SESSION_ENSURE,
	PG_ST_CK_UPSERT,
	PG_ST_CK_HEAD_UPSERT,
	PG_ST_CK_LOCK,
	PG_ST_CK_RUN_STATE,
	PG_ST_CK_HEAD_RUN_STATE,
	PG_ST_CK_WRITE_KEEP,
	PG_ST_CK_WRITE_REPLACE,
	PG_ST_CK_GET,
	PG_ST_CK_GET_LATEST,
	PG_ST_CK_WRITES,
	PG_ST_CK_WRITES_LATEST,
	PG_ST_CK_LIST_USER,
	PG_ST_CK_LIST_USER_BEFORE,
	PG_ST_CK_LIST_SESSION,
	PG_ST_CK_LIST_SESSION_BEFORE,
	PG_ST_CK_LIST_NS,
	PG_ST_CK_LIST_NS_BEFORE,
	PG_ST_CK_LIST_WRITES_USER,
	PG_ST_CK_LIST_WRITES_USER_BEFORE,
	PG_ST_CK_LIST_WRITES_SESSION,
	PG_ST_CK_LIST_WRITES_SESSION_BEFORE,
	PG_ST_CK_LIST_WRITES_NS,
	PG_ST_CK_LIST_WRITES_NS_BEFORE,
	PG_ST_CK_DELETE_ALL,
	PG_ST_CK_DELETE_NS,
	PG_ST_CK_HEAD_DELETE,
	PG_ST_CK_RESUMABLE,
	PG_ST_CK_EXPIRE,
	/* tasks */
	PG_ST_TASK_LOCK,
	PG_ST_TASK_INSERT,
	PG_ST_TASK_UPDATE,
	PG_ST_TASK_GET,
	PG_ST_TASK_LIST,
	PG_ST_TASK_LIST_CONTEXT,
	PG_ST_TASK_DELETE,
	/* feed and cursors */
	PG_ST_FEED_ALLOC,
	PG_ST_FEED_HEAD,
	PG_ST_FEED_READ,
	PG_ST_FEED_READ_MEMORIES,
	PG_ST_FEED_TOMBSTONE,
	PG_ST_CURSOR_GET,
	PG_ST_CURSOR_SET,
	PG_ST_PING,
	PG_ST_COUNT
} pg_stmt_id;

/* A statement: its slot, parameter count and SQL text (a constant, never
 * built from input). Modules define these as static const objects. */
typedef struct pg_sql {
	pg_stmt_id id;
	int n_params;
	const char *text;
} pg_sql;

/* One queued statement of a round. */
typedef struct pg_item {
	pg_stmt_id id;
	int is_prepare;
	PGresult *res; /* after pg_run */
} pg_item;

typedef struct pg_conn {
	PGconn *pg;                     /* NULL until connected */
	uint8_t prepared[PG_ST_COUNT];
	int broken;                     /* the connection failed: reopen before use */
	int commit_sent;                /* a COMMIT went out since pg_take */
	char sqlstate[6];               /* of the last failure pg_run saw; "" = none */
	pg_item *items;                 /* the current round */
	size_t n_items, cap_items;
	size_t n_queries;               /* queued statements (not prepares) */
	size_t *query_item;             /* query index -> item index */
	size_t cap_query_item;
} pg_conn;

/* What pg_store_open needs from the config. Strings are borrowed for the
 * call; NULL = not set. */
typedef struct pg_options {
	const char *dsn;
	const char *host;
	int64_t port;                   /* 0 = not set */
	const char *database;
	const char *user;
	const char *password;
	const char *sslmode;
	const char *sslrootcert;
	const char *sslcert;
	const char *sslkey;
	const char *schema;
	uint32_t pool;                  /* >= 1 */
	int64_t connect_timeout_s;
	int64_t statement_timeout_ms;   /* 0 = none */
	uint32_t group_commit;          /* appends per transaction, >= 1 */
} pg_options;

#define PG_MAX_CONN_PARAMS 24

struct pu_group;

/* One plugin instance. */
typedef struct pg_store {
	const memd_host *host;
	char *schema;
	int32_t schema_version;
	uint32_t group_commit;
	char *strings;                  /* owns every value of conn_vals */
	const char *conn_keys[PG_MAX_CONN_PARAMS + 1];
	const char *conn_vals[PG_MAX_CONN_PARAMS + 1];

	pthread_mutex_t pool_lock;
	pthread_cond_t pool_cond;       /* CLOCK_MONOTONIC, signalled on release */
	pg_conn *conns;
	uint32_t n_conns;
	uint32_t *idle;                 /* indexes of idle connections (a stack) */
	uint32_t n_idle;

	struct pu_group *group;         /* group commit queue (pg_events.c, pu_group.h) */
} pg_store;

/* Validate o, connect once, run the schema migrations (creating the schema
 * if needed) and set up a pool of o->pool connections. On success
 * *ret_store owns everything (o's strings are copied); on failure nothing
 * is left open and err says what failed (never with the password). */
int32_t pg_store_open(const memd_host *host, const pg_options *o, pg_store **ret_store,
		      memd_error *err);
/* Close every connection and free the store. Accepts NULL. */
void pg_store_close(pg_store *s);

/* Take an idle connection (waiting until call's deadline), reconnecting it
 * if it is broken or the server closed it. MEMD_EUNAVAIL (retryable) when
 * the server cannot be reached. Give it back with pg_give. */
int32_t pg_take(pg_store *s, const memd_call *call, pg_conn **ret, memd_error *err);
/* As pg_take, but without waiting: 0 with *ret NULL when no connection
 * is idle. */
int32_t pg_try_take(pg_store *s, const memd_call *call, pg_conn **ret, memd_error *err);
/* Return c to the pool and wake appends waiting for one (pg_events.h);
 * a connection left inside a transaction is rolled back (or dropped).
 * Accepts NULL. */
void pg_give(pg_store *s, pg_conn *c);

/* Queue sql with n text parameters (NULL = SQL NULL) on c's round. */
int32_t pg_send(pg_conn *c, const pg_sql *sql, const char *const *vals, memd_error *err);
/* As pg_send with per-parameter lengths and formats (1 = binary), and the
 * result format (1 = binary) of every column. */
int32_t pg_send_fmt(pg_conn *c, const pg_sql *sql, const char *const *vals, const int *lens,
		    const int *fmts, int result_format, memd_error *err);
/* Queue constant SQL text (DDL for the migrations) with n text
 * parameters as an unnamed statement; never for SQL built from input. */
int32_t pg_send_text(pg_conn *c, const char *text, int n, const char *const *vals,
		     memd_error *err);
/* Send the queued round and wait for every result. Returns 0 if every
 * statement succeeded; otherwise the first failure's mapped error, with
 * err "postgres: <what>: <server message>" (c->sqlstate holds its code)
 * and the rest of the round skipped by the server. A connection failure
 * marks c broken and gives MEMD_EUNAVAIL (retryable). */
int32_t pg_run(pg_conn *c, const char *what, memd_error *err);
/* The result of the i-th statement queued in the round just run (NULL if
 * it did not run). Valid until pg_reset. */
PGresult *pg_res(const pg_conn *c, size_t i);
/* Number of statements in the round. */
size_t pg_n_queued(const pg_conn *c);
/* Free the round's results and start a new round. */
void pg_reset(pg_conn *c);

/* Run one statement in a round of its own (e.g. ROLLBACK); for cleanups
 * whose failure only breaks the connection. */
int32_t pg_exec1(pg_conn *c, const pg_sql *sql, const char *const *vals, memd_error *err);

/* True when an op that failed with r on c may run again from the start:
 * the transaction is known not to have committed and the failure may be
 * gone (a broken connection before COMMIT was sent, a deadlock or
 * serialization failure). */
int pg_should_retry(const pg_conn *c, int32_t r);
/* Attempts per op (the first plus retries). */
#define PG_ATTEMPTS 3

/* One try of an op on a connection taken for it. */
typedef int32_t (*pg_op_fn)(pg_conn *c, void *ctx, memd_error *err);
/* Take a connection, run fn, give the connection back; run fn again (up
 * to PG_ATTEMPTS times) while pg_should_retry says the failure left
 * nothing behind. fn must deliver to sinks only once nothing can fail. */
int32_t pg_with_conn(pg_store *s, const memd_call *call, pg_op_fn fn, void *ctx,
		     memd_error *err);

/* An expiry that is one statement: sql takes (now_us, limit), deletes up
 * to limit rows that expired by now_us and answers their count in one row.
 * Run through pg_with_conn; what ("expire checkpoints") names it in an
 * error. limit 0 deletes nothing. *ret_count is written on success. */
int32_t pg_expire(pg_store *s, const memd_call *call, const pg_sql *sql, const char *what,
		  int64_t now_us, uint32_t limit, uint32_t *ret_count, memd_error *err);

/* Map a SQLSTATE (NULL or not 5 characters = no answer from the server)
 * to a MEMD_E* code, through pu_storage.h for every kind of storage
 * failure: 53100 disk_full -> full; 25006 read_only_sql_transaction (a
 * standby) -> read-only; class 58 (system error: 58030 io_error),
 * XX001/XX002 (data or index corrupted) -> I/O error; 40001 serialization
 * failure, 40P01 deadlock, 55P03 lock not available -> busy; class 08
 * (connection), 57P (server shutting down or starting: 57P03 cannot
 * connect now) and the rest of class 53 (out of memory, too many
 * connections, configuration limit on the server) -> unreachable.
 * 57014 (statement_timeout) -> MEMD_ETIMEDOUT retryable, 23505 ->
 * MEMD_ECONFLICT, 23503 -> MEMD_ENOTFOUND, the rest of 22 and 23 ->
 * MEMD_EINVAL, 54000/54001 -> MEMD_ETOOBIG, 28, 42, 3D, 3F, the rest
 * of XX (auth, privileges, missing objects, server bug) -> MEMD_EIO, anything else ->
 * MEMD_EINTERNAL. *ret_flags (if not NULL) gets the flags. In
 * pg_errmap.c (no libpq call, for the unit test). */
int32_t pg_map_sqlstate(const char *sqlstate, uint32_t *ret_flags);

/* MEMD_ETIMEDOUT / MEMD_ECANCELED when call's deadline passed or it was
 * cancelled; 0 otherwise. */
int32_t pg_call_check(const pg_store *s, const memd_call *call, memd_error *err);

/* MEMD_EINVAL unless json is a JSON object (what names it). */
int32_t pg_check_json_object(const char *what, const char *json, memd_error *err);
/* MEMD_EINVAL unless json (if not NULL) is JSON PostgreSQL's jsonb can
 * hold (no \u0000 in strings). */
int32_t pg_check_json(const char *what, const char *json, memd_error *err);

/* MEMD_EINVAL unless json is a JSON object (what names it), for JSON the
 * store keeps as text (as given, so \u0000 is fine). */
int32_t pg_check_json_text_object(const char *what, const char *json, memd_error *err);

/* True if JSON text json holds the escape \u0000 (which jsonb refuses). */
int pg_json_has_nul_escape(const char *json);

/* True when versioned record p (with struct_size) reaches member m. */
#define PG_HAS(p, m) ((p)->struct_size >= offsetof(__typeof__(*(p)), m) + sizeof((p)->m))

/* The fields of a memd_usage, as statements take them: input, output,
 * cache read, cache write, cost, last prompt. */
#define PG_USAGE_N 6
/* MEMD_EINVAL unless u is NULL or a whole memd_usage (struct_size) with
 * no negative field. */
int32_t pg_usage_check(const memd_usage *u, memd_error *err);
/* Decimal text of u's PG_USAGE_N fields (all "0" for NULL) into bufs and
 * vals[0..PG_USAGE_N). */
#define PG_INT_BUF 24
void pg_usage_vals(const memd_usage *u, char bufs[PG_USAGE_N][PG_INT_BUF], const char **vals);

/* Decimal text of v in buf (PG_INT_BUF bytes); returns buf. */
const char *pg_i64(char *buf, int64_t v);
/* Column value as int64 (0 for NULL) / as a C string (NULL for SQL NULL,
 * valid until pg_reset). */
int64_t pg_get_i64(const PGresult *res, int row, int col);
const char *pg_get_text(const PGresult *res, int row, int col);

/* Rows examined between checks of the deadline in long loops. */
#define PG_CHECK_EVERY 256u

/* Deliver-loop result of a sink: 0 = go on, > 0 = the caller asked to
 * stop (not an error), < 0 = error (err filled). */
int32_t pg_sink_result(int32_t r, const char *what, memd_error *err);

#endif
