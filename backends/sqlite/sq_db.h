/* SPDX-License-Identifier: MIT */
/*
 * sq_db: the SQLite store's connections. One writer connection guarded by a
 * mutex (every write transaction is BEGIN IMMEDIATE; concurrent appends
 * share transactions through sq_group.h) and a pool of
 * read-only connections; a per-connection cache of prepared statements;
 * mapping of SQLite result codes to MEMD_E* codes (ids and scopes are
 * checked with plugin_util's pu_check_*).
 */
#ifndef MEMD_SQ_DB_H
#define MEMD_SQ_DB_H

#include <pthread.h>
#include <stdatomic.h>
#include <sqlite3.h>

#include <memd/plugin.h>

/* Every prepared statement the plugin runs has one slot per connection.
 * The SQL text lives beside the code that uses it (see sq_sql). */
typedef enum sq_stmt_id {
	SQ_ST_BEGIN,
	SQ_ST_BEGIN_IMMEDIATE,
	SQ_ST_COMMIT,
	SQ_ST_ROLLBACK,
	/* group commit: one savepoint per request */
	SQ_ST_SAVEPOINT,
	SQ_ST_RELEASE,
	SQ_ST_ROLLBACK_TO,
	/* sessions */
	SQ_ST_SESSION_INSERT,
	SQ_ST_SESSION_GET,
	SQ_ST_SESSION_HEAD,
	SQ_ST_SESSION_LIST,
	SQ_ST_SESSION_LIST_BEFORE,
	SQ_ST_SESSION_LIST_PLATFORM,
	SQ_ST_SESSION_LIST_PLATFORM_BEFORE,
	SQ_ST_SESSION_LIST_LANE,
	SQ_ST_SESSION_LIST_LANE_BEFORE,
	SQ_ST_SESSION_LIST_ACTIVITY,
	SQ_ST_SESSION_LIST_ACTIVITY_BEFORE,
	SQ_ST_SESSION_LIST_ENDED,
	SQ_ST_SESSION_CLEAR_NOTICE,
	SQ_ST_SESSION_END,
	SQ_ST_SESSION_REOPEN,
	SQ_ST_SESSION_USAGE_ADD,
	SQ_ST_SESSION_UPDATE,
	SQ_ST_SESSION_APPENDED,
	SQ_ST_SESSION_DELETE,
	SQ_ST_USER_SESSIONS_DELETE,
	SQ_ST_USER_LANES_DELETE,
	/* events */
	SQ_ST_EVENT_INSERT,
	SQ_ST_EVENT_SEQ_BY_ID,
	SQ_ST_EVENTS_ASC,
	SQ_ST_EVENTS_DESC,
	SQ_ST_SUMMARIES_ASC,
	SQ_ST_SUMMARIES_DESC,
	SQ_ST_TIMES_ASC,
	SQ_ST_TIMES_DESC,
	SQ_ST_EVENTS_ALL_ASC,
	SQ_ST_EVENTS_ALL_DESC,
	SQ_ST_SUMMARIES_ALL_ASC,
	SQ_ST_SUMMARIES_ALL_DESC,
	SQ_ST_TIMES_ALL_ASC,
	SQ_ST_TIMES_ALL_DESC,
	SQ_ST_EVENT_BY_POSITION,
	SQ_ST_SUMMARY_NEWEST,
	/* transcripts */
	SQ_ST_OP_INSERT,
	SQ_ST_OP_GET,
	SQ_ST_OP_LIST,
	SQ_ST_OP_UNDONE,
	SQ_ST_HIDE_SCAN,
	SQ_ST_HIDE_ROW,
	SQ_ST_UNHIDE_SCAN,
	SQ_ST_UNHIDE_ROW,
	SQ_ST_FEED_HIDE_INSERT,
	SQ_ST_HISTORY_INSERT,
	SQ_ST_HISTORY_LIST,
	SQ_ST_HISTORY_LIST_AFTER,
	SQ_ST_HISTORY_FROM,
	/* state */
	SQ_ST_STATE_APP_SET,
	SQ_ST_STATE_APP_DEL,
	SQ_ST_STATE_USER_SET,
	SQ_ST_STATE_USER_DEL,
	SQ_ST_STATE_SESSION_SET,
	SQ_ST_STATE_SESSION_DEL,
	SQ_ST_STATE_APP_ALL,
	SQ_ST_STATE_USER_ALL,
	SQ_ST_STATE_SESSION_ALL,
	SQ_ST_STATE_USER_DELETE_ALL,
	SQ_ST_STATE_APP_GET,
	SQ_ST_STATE_USER_GET,
	SQ_ST_STATE_SESSION_GET,
	/* artifacts */
	SQ_ST_ARTIFACT_LAST_VERSION,
	SQ_ST_ARTIFACT_INSERT,
	SQ_ST_ARTIFACT_GET,
	SQ_ST_ARTIFACT_GET_LATEST,
	SQ_ST_ARTIFACT_LIST,
	SQ_ST_ARTIFACT_VERSIONS,
	SQ_ST_ARTIFACT_DELETE,
	/* feed and cursors */
	SQ_ST_FEED_HEAD,
	SQ_ST_FEED_ADVANCE,
	SQ_ST_FEED_EVENTS,
	SQ_ST_FEED_DELETES,
	SQ_ST_FEED_HIDES,
	SQ_ST_FEED_TOMBSTONE,
	SQ_ST_CURSOR_GET,
	SQ_ST_CURSOR_SET,
	/* lanes and inboxes */
	SQ_ST_LANE_GET,
	SQ_ST_LANE_VERSION,
	SQ_ST_LANE_INSERT,
	SQ_ST_LANE_UPDATE,
	SQ_ST_LANE_USAGE_OF_SESSION,
	SQ_ST_LANE_LIST_USER,
	SQ_ST_LANE_LIST_APP,
	SQ_ST_LANE_LIST_ALL,
	SQ_ST_LANE_DELETE,
	SQ_ST_LANE_PRUNE,
	SQ_ST_LANE_INBOX_STATE,
	SQ_ST_LANE_INBOX_SET,
	SQ_ST_INBOX_INSERT,
	SQ_ST_INBOX_SLOT_DELETE,
	SQ_ST_INBOX_SLOT,
	SQ_ST_INBOX_HEAD,
	SQ_ST_INBOX_PROMOTE,
	SQ_ST_INBOX_DELETE_ONE,
	SQ_ST_INBOX_CLEAR,
	SQ_ST_INBOX_LIST,
	/* memories */
	SQ_ST_MEMORY_GET,
	SQ_ST_MEMORY_INSERT,
	SQ_ST_MEMORY_UPDATE,
	SQ_ST_MEMORY_DELETE,
	SQ_ST_MEMORY_HISTORY_INSERT,
	SQ_ST_MEMORY_HISTORY_LIST,
	SQ_ST_MEMORY_LIST,
	SQ_ST_MEMORY_LIST_BEFORE,
	SQ_ST_MEMORY_EXPIRED,
	SQ_ST_USER_MEMORIES_DELETE,
	SQ_ST_USER_MEMORY_HISTORY_DELETE,
	SQ_ST_SESSION_MEMORY_SEQ,
	SQ_ST_SESSION_MEMORY_SEQ_SET,
	SQ_ST_SESSION_PENDING,
	SQ_ST_SESSION_PENDING_AFTER,
	SQ_ST_FEED_MEMORIES,
	SQ_ST_FEED_MEMORY_TOMBSTONE,
	/* checkpoints */
	SQ_ST_CKPT_PUT,
	SQ_ST_CKPT_HEAD_PUT,
	SQ_ST_CKPT_EXPIRES,
	SQ_ST_CKW_KEEP,
	SQ_ST_CKW_REPLACE,
	SQ_ST_CKPT_RUN_STATE,
	SQ_ST_CKPT_HEAD_RUN_STATE,
	SQ_ST_CKPT_GET,
	SQ_ST_CKPT_LATEST,
	SQ_ST_CKW_LIST,
	SQ_ST_CKPT_LIST_SNS,
	SQ_ST_CKPT_LIST_SNS_BEFORE,
	SQ_ST_CKPT_LIST_S,
	SQ_ST_CKPT_LIST_S_BEFORE,
	SQ_ST_CKPT_LIST_U,
	SQ_ST_CKPT_LIST_U_BEFORE,
	SQ_ST_CKPT_DELETE_ALL,
	SQ_ST_CKPT_DELETE_NS,
	SQ_ST_CKPT_DELETE_ONE,
	SQ_ST_CKPT_HEAD_DELETE,
	SQ_ST_CKPT_HEAD_RESET,
	SQ_ST_CKPT_RESUMABLE,
	SQ_ST_CKPT_RESUMABLE_AFTER,
	SQ_ST_CKPT_EXPIRED,
	/* tasks */
	SQ_ST_TASK_GET,
	SQ_ST_TASK_HEAD,
	SQ_ST_TASK_INSERT,
	SQ_ST_TASK_UPDATE,
	SQ_ST_TASK_DELETE,
	SQ_ST_TASK_LIST,
	SQ_ST_TASK_LIST_BEFORE,
	SQ_ST_TASK_LIST_CONTEXT,
	SQ_ST_TASK_LIST_CONTEXT_BEFORE,
	SQ_ST_SESSION_TASKS_DELETE,
	SQ_ST_USER_TASKS_DELETE,
	SQ_ST_COUNT
} sq_stmt_id;

/* A statement: its cache slot and its SQL text (a constant, never built
 * from input). Modules define these as static const objects. */
typedef struct sq_sql {
	sq_stmt_id id;
	const char *text;
} sq_sql;

/* What a write transaction keeps in memory until it commits (sq_feed.h):
 * the feed counter, read once and written back once per transaction.
 * Copy it before a savepoint and put it back after ROLLBACK TO. */
typedef struct sq_txn_state {
	int64_t feed_last;          /* the last position handed out */
	uint32_t feed_cached;       /* feed_last was read in this transaction */
	uint32_t feed_dirty;        /* feed_last is ahead of the counter row */
} sq_txn_state;

typedef struct sq_conn {
	sqlite3 *db;
	const char *role; /* "writer" or "reader", for messages */
	sqlite3_stmt *stmts[SQ_ST_COUNT];
	sq_txn_state txn; /* the writer's, inside sq_write_begin..sq_write_end */
} sq_conn;

/* PRAGMA synchronous levels the config accepts. */
#define SQ_SYNC_FULL   1
#define SQ_SYNC_NORMAL 2

/* What sq_store_open needs from the config. */
typedef struct sq_options {
	const char *path;
	uint32_t synchronous;       /* SQ_SYNC_* */
	int32_t busy_timeout_ms;
	uint32_t readers;           /* >= 1 */
	int64_t reserve_bytes;      /* the disk reserve (0: none) */
} sq_options;

struct sq_group_req;

/* Counters of the writer (sq_group.c), written under write_lock; the
 * atomic ones are read without it (sq_stats). */
typedef struct sq_write_stats {
	_Atomic uint64_t requests;  /* requests run by group commit */
	_Atomic uint64_t groups;    /* transactions group commit ran */
	uint64_t grouped;           /* requests that shared a transaction */
	uint32_t largest;           /* most requests in one group */
	_Atomic uint64_t commits;   /* COMMITs of the writer (its commit hook) */
} sq_write_stats;

/* One plugin instance. */
typedef struct sq_store {
	const memd_host *host;
	char *path;
	uint32_t synchronous;
	int32_t schema_version;

	pthread_mutex_t write_lock;
	sq_conn writer;
	sq_write_stats stats;       /* under write_lock */

	/* The disk reserve: a file of reserve_bytes beside the database,
	 * given up to let deletes through on a full disk (sq_make_room). */
	char *reserve_path;
	int64_t reserve_bytes;      /* 0: no reserve */
	int reserve_held;           /* under write_lock */
	int64_t reserve_tried_us;   /* monotonic: last attempt to make it again */
	char secure_delete[8];      /* under write_lock: saved by sq_make_room */

	/* Group commit queue (sq_group.c), oldest first; the head leads. */
	pthread_mutex_t group_lock;
	struct sq_group_req *group_head;
	struct sq_group_req *group_tail;

	pthread_mutex_t pool_lock;
	pthread_cond_t pool_cond;   /* CLOCK_MONOTONIC, signalled on release */
	sq_conn *readers;
	uint32_t n_readers;
	uint32_t *idle;             /* indexes of idle readers (a stack) */
	uint32_t n_idle;
} sq_store;

/* Open the database at o->path (its parent directories are created),
 * switch it to WAL, set synchronous/busy_timeout/foreign_keys, run the
 * schema migrations and open o->readers read-only connections. On success
 * *ret_store owns everything; on failure nothing is left open and err says
 * what failed. */
int32_t sq_store_open(const memd_host *host, const sq_options *o, sq_store **ret_store,
		      memd_error *err);
/* Checkpoint the WAL (a full checkpoint that waits for no one), close
 * every connection and free the store; a checkpoint that fails is
 * logged. Accepts NULL. */
void sq_store_close(sq_store *s);

/* True when err is a full-disk failure (MEMD_ERROR_STORAGE_FULL). */
int sq_is_full(const memd_error *err);
/* Make room for a delete on a full disk: give up the disk reserve (if it
 * is held) and checkpoint the WAL, so the next write transaction starts
 * the WAL over in the space it already has and pages the checkpoint
 * could not grow the database for fit; and switch secure_delete to FAST
 * (freed pages are not zeroed: that would write all of what is deleted
 * again). Takes the writer. Logged. The caller then retries its delete
 * once and calls sq_after_room with the result, which puts secure_delete
 * back and, after a success, checkpoints again so that later writes
 * reuse the pages the delete freed. */
void sq_make_room(sq_store *s);
void sq_after_room(sq_store *s, int32_t r);

/* The cached prepared statement for sql on c, reset and with no bindings
 * (prepared on first use). Returns 0 and writes *ret, or a mapped error. */
int32_t sq_stmt(sq_conn *c, const sq_sql *sql, sqlite3_stmt **ret, memd_error *err);
/* Run a cached statement that returns no rows of interest (BEGIN,
 * SAVEPOINT, ...) to completion. Returns 0 or the mapped error. */
int32_t sq_exec(sq_conn *c, const sq_sql *sql, memd_error *err);
/* Reset a statement after use and clear its bindings. Accepts NULL. */
void sq_stmt_done(sqlite3_stmt *st);

/* Map a failed SQLite call's (extended) result code rc and the system
 * errno SQLite saw (sqlite3_system_errno; 0 if none) to a MEMD_E* code,
 * through pu_storage.h for every kind of storage failure: FULL (and an
 * I/O error whose errno says no space: RLIMIT_FSIZE's EFBIG is reported
 * as SQLITE_IOERR_WRITE) -> full; READONLY (and EROFS) -> read-only;
 * IOERR, CORRUPT, NOTADB, CANTOPEN -> I/O error; BUSY, LOCKED, PROTOCOL
 * -> busy. CONSTRAINT -> MEMD_ECONFLICT, NOMEM -> MEMD_ENOMEM, TOOBIG ->
 * MEMD_ETOOBIG, INTERRUPT -> MEMD_ECANCELED, anything else ->
 * MEMD_EINTERNAL. *ret_flags (if not NULL) gets the flags. In
 * sq_errmap.c (no connection needed, for the unit test). */
int32_t sq_map_code(int rc, int sys_errno, uint32_t *ret_flags);
/* Fill err from a failed SQLite call on c: "sqlite <role>: <what>: <sqlite
 * message>" with the mapped code (the errno is SQLite's, or the thread's
 * when SQLite kept none: call it right after the failed call). Returns
 * the mapped code. */
int32_t sq_fail(const sq_conn *c, int rc, memd_error *err, const char *what_fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Take an idle reader (waiting for one until call's deadline) and BEGIN a
 * read transaction on it, so every statement of the op sees one snapshot.
 * On success *ret is the reader; give it back with sq_read_end. */
int32_t sq_read_begin(sq_store *s, const memd_call *call, sq_conn **ret, memd_error *err);
/* End the read transaction and return the reader to the pool. Accepts a
 * NULL c. */
void sq_read_end(sq_store *s, sq_conn *c);

/* Lock the writer and BEGIN IMMEDIATE. On success *ret is the writer and
 * the lock is held until sq_write_end. */
int32_t sq_write_begin(sq_store *s, const memd_call *call, sq_conn **ret, memd_error *err);
/* rc == 0: write back what the transaction kept in memory (the feed
 * counter) and COMMIT (a failed commit rolls back and returns its mapped
 * error); rc < 0: ROLLBACK, so the transaction leaves no trace. Unlocks
 * the writer. Returns the final result (rc unless the commit failed). */
int32_t sq_write_end(sq_store *s, sq_conn *c, int32_t rc, memd_error *err);

/* MEMD_ETIMEDOUT / MEMD_ECANCELED when call's deadline passed or it was
 * cancelled; 0 otherwise. */
int32_t sq_call_check(const sq_store *s, const memd_call *call, memd_error *err);
/* Rows examined between checks of the deadline in long loops. */
#define SQ_CHECK_EVERY 256u

/* Add to call->rows_read: the rows stepped plus the full-scan steps st
 * made (SQLITE_STMTSTATUS_FULLSCAN_STEP, which this resets). */
void sq_count_rows(const memd_call *call, sqlite3_stmt *st, uint64_t stepped);

/* One row of a read, for sq_step_deliver: turn st's current row into a
 * value and hand it to the caller's sink (ud). Returns 0 to go on, > 0 to
 * stop (not an error: sq_sink_result's answer), < 0 on error with err
 * filled. The row's text is valid only during the call. */
typedef int32_t (*sq_row_fn)(sqlite3_stmt *st, void *ud, memd_error *err);

/* The deliver loop of a read: step st (its parameters bound; rc is the
 * result of binding them, anything but SQLITE_OK fails the read as a
 * failed step would) and hand each row to row(st, ud, err), until the
 * rows run out, limit rows were stepped (0: no limit but the
 * statement's own), row returns non-zero, or call's deadline passes
 * (checked every SQ_CHECK_EVERY rows). Adds the rows stepped to
 * call->rows_read (sq_count_rows). Returns 0 when the rows ran out, the
 * limit was reached or row asked to stop; row's or the deadline's error;
 * or sq_fail's error for a failed bind or step, described by what_fmt.
 * st stays the caller's: it neither resets nor finishes it. */
int32_t sq_step_deliver(sq_store *s, const memd_call *call, sq_conn *c, sqlite3_stmt *st,
			int rc, uint64_t limit, sq_row_fn row, void *ud, memd_error *err,
			const char *what_fmt, ...) __attribute__((format(printf, 10, 11)));

/* MEMD_EINVAL unless json is a JSON object (what names it in the message). */
int32_t sq_check_json_object(const char *what, const char *json, memd_error *err);

/* Bind text (NULL binds SQL NULL) / the scope's app, user[, session] to
 * parameters 1..3. Return a SQLite result code. */
int sq_bind_text(sqlite3_stmt *st, int idx, const char *text);
int sq_bind_scope(sqlite3_stmt *st, const memd_scope *scope, int with_session);

/* Column text as a C string (NULL for SQL NULL). Valid until the next
 * step or reset of st. */
const char *sq_col_text(sqlite3_stmt *st, int col);

/* Delete one expired row of sq_expire, given its key's columns (valid
 * during the call); 0 or an error with err filled. */
typedef int32_t (*sq_expire_fn)(sq_conn *c, char *const *key, int64_t now_us, memd_error *err);

/* An expiry in one write transaction: collect the keys (the first ncols
 * columns) of up to limit rows the statement sql finds (parameter 1 now_us,
 * parameter 2 limit) first, so that the scan never steps over rows the
 * transaction changes, then hand each key to del. what ("expired
 * checkpoints") names the scan in an error. limit 0 expires nothing.
 * *ret_count (the keys found) is written on success; on failure nothing
 * is committed. */
int32_t sq_expire(sq_store *s, const memd_call *call, const sq_sql *sql, uint32_t ncols,
		  const char *what, int64_t now_us, uint32_t limit, sq_expire_fn del,
		  uint32_t *ret_count, memd_error *err);

/* Deliver-loop result of a sink: 0 = go on, > 0 = the caller asked to
 * stop (not an error), < 0 = error (err filled, "what" names the sink). */
int32_t sq_sink_result(int32_t r, const char *what, memd_error *err);

#endif
