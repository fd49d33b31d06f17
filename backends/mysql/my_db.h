/* SPDX-License-Identifier: MIT */
/*
 * my_db: the MariaDB store's connections. A pool of connections (opened on
 * first use, reopened by themselves after the server went away), a
 * per-connection cache of prepared statements with reusable result
 * buffers, the op runner (transactions, retries of deadlock victims and of
 * calls that found a stale connection), mapping of server and client
 * errors to MEMD_E* codes, and the scope and id checks shared by every op.
 *
 * Every statement is a constant prepared with mysql_stmt_prepare(); values
 * only ever travel as bound parameters.
 */
#ifndef MEMD_MY_DB_H
#define MEMD_MY_DB_H

#include <mysql.h>
#include <pthread.h>

#include <memd/plugin.h>

/* Every prepared statement the plugin runs has one slot per connection.
 * The SQL text lives beside the code that uses it (see my_sql). */
typedef enum my_stmt_id {
	MY_ST_SESSION_SETUP,
	MY_ST_ISOLATION,
	MY_ST_BEGIN,
	MY_ST_COMMIT,
	MY_ST_ROLLBACK,
	MY_ST_ROWS_READ,
	MY_ST_MAX_PACKET,
	MY_ST_SCHEMA_LOCK,
	MY_ST_SCHEMA_UNLOCK,
	MY_ST_SCHEMA_VERSION,
	MY_ST_SCHEMA_RECORD,
	/* sessions */
	MY_ST_SESSION_INSERT,
	MY_ST_SESSION_GET,
	MY_ST_SESSION_LOCK,
	MY_ST_SESSION_LIST,
	MY_ST_SESSION_LIST_BEFORE,
	MY_ST_SESSION_LIST_PLATFORM,
	MY_ST_SESSION_LIST_PLATFORM_BEFORE,
	MY_ST_SESSION_LIST_LANE,
	MY_ST_SESSION_LIST_LANE_BEFORE,
	MY_ST_SESSION_LIST_ENDED,
	MY_ST_SESSION_CLEAR_NOTICE,
	MY_ST_SESSION_END,
	MY_ST_SESSION_REOPEN,
	MY_ST_SESSION_USAGE,
	MY_ST_SESSION_UPDATE,
	MY_ST_SESSION_APPENDED,
	MY_ST_SESSION_DELETE,
	MY_ST_SESSION_EVENTS_DELETE,
	MY_ST_SESSION_STATE_DELETE,
	MY_ST_SESSION_ARTIFACTS_DELETE,
	MY_ST_USER_SESSIONS_DELETE,
	MY_ST_USER_EVENTS_DELETE,
	MY_ST_USER_STATE_DELETE,
	MY_ST_USER_SESSION_STATE_DELETE,
	MY_ST_USER_ARTIFACTS_DELETE,
	MY_ST_USER_LANES_DELETE,
	MY_ST_USER_INBOX_DELETE,
	MY_ST_SESSION_LIST_ACTIVE,
	MY_ST_SESSION_LIST_ACTIVE_BEFORE,
	MY_ST_SESSION_OPS_DELETE,
	MY_ST_SESSION_HISTORY_DELETE,
	MY_ST_SESSION_MARKS_DELETE,
	MY_ST_USER_OPS_DELETE,
	MY_ST_USER_HISTORY_DELETE,
	MY_ST_USER_MARKS_DELETE,
	/* events */
	MY_ST_EVENT_INSERT,
	MY_ST_EVENT_INSERT_BULK,
	MY_ST_EVENT_SEQ_BY_ID,
	MY_ST_EVENTS_ASC,
	MY_ST_EVENTS_NEWEST,
	MY_ST_EVENTS_KIND_ASC,
	MY_ST_EVENTS_KIND_NEWEST,
	MY_ST_EVENTS_TIME_ASC,
	MY_ST_EVENTS_TIME_NEWEST,
	MY_ST_EVENTS_TIME_KIND_ASC,
	MY_ST_EVENTS_TIME_KIND_NEWEST,
	MY_ST_EVENTS_ALL_ASC,
	MY_ST_EVENTS_ALL_NEWEST,
	MY_ST_SESSION_EXISTS,
	/* state */
	MY_ST_STATE_APP_SET,
	MY_ST_STATE_APP_DEL,
	MY_ST_STATE_USER_SET,
	MY_ST_STATE_USER_DEL,
	MY_ST_STATE_SESSION_SET,
	MY_ST_STATE_SESSION_DEL,
	MY_ST_STATE_ALL,
	MY_ST_STATE_APP_GET,
	MY_ST_STATE_USER_GET,
	MY_ST_STATE_SESSION_GET,
	MY_ST_HISTORY_INSERT,
	MY_ST_HISTORY_FROM_SEQ,
	MY_ST_HISTORY_AFTER,
	/* transcript operations */
	MY_ST_OP_INSERT,
	MY_ST_OP_GET,
	MY_ST_OP_LIST,
	MY_ST_OP_UNDONE,
	MY_ST_TX_COUNT_VISIBLE,
	MY_ST_TX_COUNT_HIDDEN_BY,
	MY_ST_TX_HIDE,
	MY_ST_TX_UNHIDE,
	MY_ST_TX_MARK_HIDDEN,
	MY_ST_TX_MARK_SHOWN,
	MY_ST_TX_NEWEST_SUMMARY,
	/* artifacts */
	MY_ST_ARTIFACT_LAST_VERSION,
	MY_ST_ARTIFACT_INSERT,
	MY_ST_ARTIFACT_GET,
	MY_ST_ARTIFACT_GET_LATEST,
	MY_ST_ARTIFACT_LIST,
	MY_ST_ARTIFACT_VERSIONS,
	MY_ST_ARTIFACT_DELETE,
	/* feed and cursors */
	MY_ST_FEED_HEAD,
	MY_ST_FEED_ADVANCE,
	MY_ST_FEED_DELETES,
	MY_ST_FEED_EVENTS,
	MY_ST_FEED_TOMBSTONE,
	MY_ST_FEED_MARKS,
	MY_ST_CURSOR_GET,
	MY_ST_CURSOR_SET,
	/* lanes and inboxes */
	MY_ST_LANE_GET,
	MY_ST_LANE_GET_SESSION,
	MY_ST_LANE_LOCK,
	MY_ST_LANE_INSERT,
	MY_ST_LANE_UPDATE,
	MY_ST_LANE_USAGE,
	MY_ST_LANE_DELETE,
	MY_ST_LANE_LIST,
	MY_ST_LANE_LIST_BEFORE,
	MY_ST_LANE_LIST_APP,
	MY_ST_LANE_LIST_APP_BEFORE,
	MY_ST_LANE_LIST_USER,
	MY_ST_LANE_LIST_USER_BEFORE,
	MY_ST_LANE_PRUNABLE,
	MY_ST_LANE_PRUNE_ONE,
	MY_ST_LANE_INBOX_LAST,
	MY_ST_INBOX_CLEAR,
	MY_ST_INBOX_SLOT_DELETE,
	MY_ST_INBOX_SLOT_USED,
	MY_ST_INBOX_INSERT,
	MY_ST_INBOX_DEPTH,
	MY_ST_INBOX_NEXT,
	MY_ST_INBOX_LIST,
	MY_ST_INBOX_DELETE_ONE,
	MY_ST_INBOX_PROMOTE,
	MY_ST_LANE_EXISTS,
	/* memories */
	MY_ST_MEMORY_GET,
	MY_ST_MEMORY_LOCK,
	MY_ST_MEMORY_INSERT,
	MY_ST_MEMORY_UPDATE,
	MY_ST_MEMORY_DELETE,
	MY_ST_MEMORY_POSITION,
	MY_ST_MEMORY_HISTORY_INSERT,
	MY_ST_MEMORY_HISTORY,
	MY_ST_MEMORY_LIST,
	MY_ST_MEMORY_LIST_BEFORE,
	MY_ST_MEMORY_EXPIRED,
	MY_ST_MEMORY_EXPIRE_HISTORY,
	MY_ST_MEMORY_EXPIRE_ONE,
	MY_ST_USER_MEMORIES_DELETE,
	MY_ST_USER_MEMORY_HISTORY_DELETE,
	MY_ST_SESSION_PENDING,
	MY_ST_SESSION_PENDING_AFTER,
	MY_ST_SESSION_MEMORY_SEQ,
	MY_ST_FEED_MEMORIES,
	MY_ST_FEED_MEMORY_DELETE,
	/* checkpoints */
	MY_ST_CKPT_SESSION_SHARE,
	MY_ST_CKPT_UPSERT,
	MY_ST_CKPT_HEAD_UPSERT,
	MY_ST_CKPT_LOCK,
	MY_ST_CKPT_RUN_STATE,
	MY_ST_CKPT_WRITE_KEEP,
	MY_ST_CKPT_WRITE_REPLACE,
	MY_ST_CKPT_GET,
	MY_ST_CKPT_GET_LATEST,
	MY_ST_CKPT_LIST_NS,
	MY_ST_CKPT_LIST_SESSION,
	MY_ST_CKPT_LIST_USER,
	MY_ST_CKPT_DELETE_NS,
	MY_ST_CKPT_DELETE_NS_WRITES,
	MY_ST_CKPT_RESUMABLE,
	MY_ST_CKPT_EXPIRED,
	MY_ST_CKPT_EXPIRE_WRITES,
	MY_ST_CKPT_EXPIRE_ONE,
	MY_ST_CKPT_HEAD_LOCK,
	MY_ST_CKPT_NEWEST_ROOT,
	MY_ST_CKPT_HEAD_MOVE,
	MY_ST_CKPT_HEAD_DELETE,
	MY_ST_SESSION_CKPTS_DELETE,
	MY_ST_SESSION_CKPT_WRITES_DELETE,
	MY_ST_SESSION_CKPT_HEADS_DELETE,
	MY_ST_USER_CKPTS_DELETE,
	MY_ST_USER_CKPT_WRITES_DELETE,
	MY_ST_USER_CKPT_HEADS_DELETE,
	/* tasks */
	MY_ST_TASK_LOCK,
	MY_ST_TASK_INSERT,
	MY_ST_TASK_UPDATE,
	MY_ST_TASK_GET,
	MY_ST_TASK_LIST,
	MY_ST_TASK_LIST_CONTEXT,
	MY_ST_TASK_DELETE,
	MY_ST_SESSION_TASKS_DELETE,
	MY_ST_USER_TASKS_DELETE,
	MY_ST_COUNT
} my_stmt_id;

/* A statement: its cache slot and its SQL text (a constant, never built
 * from input). Modules define these as static const objects. */
typedef struct my_sql {
	my_stmt_id id;
	const char *text;
} my_sql;

/* ---- parameters ----------------------------------------------------- */

#define MY_PARAMS_MAX 32 /* a lane update binds 26 */

/* The bound values of one execution; values are copied (integers) or
 * borrowed (strings, bytes: they must outlive the execution). */
typedef struct my_params {
	MYSQL_BIND b[MY_PARAMS_MAX];
	unsigned long len[MY_PARAMS_MAX];
	long long i64[MY_PARAMS_MAX];
	my_bool null[MY_PARAMS_MAX];
	uint32_t n;
	int overflow;              /* more than MY_PARAMS_MAX were added */
} my_params;

void my_params_init(my_params *p);
/* NUL-terminated text; NULL binds SQL NULL. */
void my_param_text(my_params *p, const char *text);
/* len bytes at data (binary); data may be NULL when len is 0. */
void my_param_bytes(my_params *p, const void *data, size_t len);
void my_param_i64(my_params *p, int64_t v);
void my_param_u64(my_params *p, uint64_t v);
/* The scope's app and user (and session when with_session). */
void my_param_scope(my_params *p, const memd_scope *scope, int with_session);

/* ---- statements and results ----------------------------------------- */

/* The result columns of a cached statement. Text and blob buffers grow
 * to the largest value seen and are reused by later executions. */
typedef struct my_result {
	unsigned n;
	MYSQL_BIND *b;
	char **buf;
	unsigned long *cap;
	unsigned long *len;
	my_bool *is_null;
	my_bool *error;
	long long *i64;
	unsigned char *is_int;
} my_result;

typedef struct my_stmt {
	MYSQL_STMT *st;
	const my_sql *sql;
	my_result res;
	int open;                  /* a result set is being fetched */
	uint32_t bulk;             /* array size last set (0 = none) */
} my_stmt;

typedef struct my_conn {
	MYSQL *m;                  /* NULL = not connected */
	my_stmt stmts[MY_ST_COUNT];
	uint32_t index;            /* in the pool */
	uint64_t max_packet;       /* the server's max_allowed_packet */
	/* Per op, reset by the runner: */
	int lost;                  /* the connection failed: close it */
	int deadlock;              /* the server chose this txn as a deadlock victim */
	int fresh;                 /* connected during this op */
	unsigned last_errno;       /* of the last failure my_fail saw, 0 = none */
	uint32_t progress;         /* statements that succeeded during this op */
} my_conn;

/* ---- the store ------------------------------------------------------ */

/* sslmode values. */
#define MY_SSL_DISABLED        0
#define MY_SSL_PREFERRED       1
#define MY_SSL_REQUIRED        2
#define MY_SSL_VERIFY_IDENTITY 3

/* Connection settings, resolved from the DSN and the discrete keys. */
typedef struct my_options {
	char *host;                /* NULL with socket */
	uint32_t port;
	char *socket;              /* unix socket path, or NULL */
	char *database;
	char *user;
	char *password;            /* never logged */
	uint32_t sslmode;          /* MY_SSL_* */
	char *ssl_ca, *ssl_cert, *ssl_key;
	uint32_t pool;             /* connections, >= 1 */
	uint32_t group_commit;     /* appends per transaction at most, >= 1 (0 = 1) */
	int64_t connect_timeout_s;
	int64_t statement_timeout_ms; /* 0 = none */
	int32_t create_database;   /* create it when it is missing */
} my_options;

/* Free the strings of o (not o). Accepts NULL. */
void my_options_clear(my_options *o);

typedef struct my_store {
	const memd_host *host;
	my_options opt;            /* owned */
	int32_t schema_version;
	char server_version[64];
	char tls_cipher[64];       /* of the first connection; "" = no TLS */

	pthread_mutex_t pool_lock;
	pthread_cond_t pool_cond;  /* CLOCK_MONOTONIC, signalled on release */
	my_conn *conns;
	uint32_t *idle;            /* indexes of idle connections (a stack) */
	uint32_t n_idle;
	int lost_logged;           /* an outage was logged; log the recovery */
	struct pu_group *group;    /* the append queue (my_events.c, pu_group.h) */
} my_store;

/* Create the store for *o (whose strings it takes over: o is zeroed),
 * create the database if o asks and it is missing, connect once, check
 * the server and run the schema migrations. On failure nothing is left open, o's strings
 * are freed and err says what failed (without the password). */
int32_t my_store_open(const memd_host *host, my_options *o, my_store **ret_store,
		      memd_error *err);
/* Close every connection and free the store. Accepts NULL. */
void my_store_close(my_store *s);

/* max_sort_length of every connection: how many bytes of a string value
 * ORDER BY compares, its length prefix included (MariaDB counts it: at
 * its default of 1024 a VARBINARY(1024) is sorted by its first 1022
 * bytes only). Covers every ordered string column of the schema whole;
 * the longest is a checkpoint write's task path (MY_TASK_PATH_MAX). */
#define MY_SORT_LENGTH 2048

/* ---- running ops ---------------------------------------------------- */

#define MY_AUTOCOMMIT 0 /* every statement is its own transaction and snapshot */
#define MY_TXN        1 /* one transaction, committed when the body returns 0 */

/* The body of an op: runs statements on c; returns 0 or a negative
 * MEMD_E* (err filled). It may be run again on a retry, so it must not
 * deliver anything to a sink of a MY_TXN op (the op delivers after the
 * commit); a MY_AUTOCOMMIT body is retried only if none of its statements
 * went through, so it may deliver rows as it reads them. */
typedef int32_t (*my_body_fn)(my_conn *c, void *arg, memd_error *err);

/* Take a connection (waiting until call's deadline), connect it if
 * needed, run fn in the mode's transaction, commit or roll back, add the
 * server's count of rows read to call->rows_read when asked, and give the
 * connection back. Retries a deadlock victim up to MY_DEADLOCK_RETRIES
 * times, and once a call whose first statement found the connection dead
 * (the server restarted while it sat idle). Connection failures are
 * MEMD_EUNAVAIL with MEMD_ERROR_RETRYABLE. */
int32_t my_run(my_store *s, const memd_call *call, int mode, my_body_fn fn, void *arg,
	       memd_error *err);
#define MY_DEADLOCK_RETRIES 8

/* Group commit needs to hold one connection across several ops. */

/* Take an idle connection without waiting: *ret is the connection, or
 * NULL when every one is busy. Give it back with my_give. */
void my_try_take(my_store *s, my_conn **ret);
/* Give back a connection of my_try_take (closed first if it was lost)
 * and wake the append queue (my_group_wake). Accepts a NULL c. */
void my_give(my_store *s, my_conn *c);
/* my_run on a connection the caller holds (connected here if needed;
 * kept by the caller afterwards): the same transaction, retries and
 * errors. */
int32_t my_run_on(my_store *s, my_conn *c, const memd_call *call, int mode, my_body_fn fn,
		  void *arg, memd_error *err);

/* MEMD_ETIMEDOUT / MEMD_ECANCELED when call's deadline passed or it was
 * cancelled; 0 otherwise. */
int32_t my_call_check(const my_store *s, const memd_call *call, memd_error *err);

/* Execute sql on c with p (NULL = no parameters). Statements with a
 * result set leave it open: read it with my_fetch (every row) or end it
 * with my_done. On success *ret (if not NULL) is the statement. A
 * statement whose values would not fit in the server's max_allowed_packet
 * is refused before it is sent (MEMD_ETOOBIG): sent, the server would drop
 * the connection, which looks like an outage. */
int32_t my_exec(my_conn *c, const my_sql *sql, my_params *p, my_stmt **ret, memd_error *err);
/* Execute an INSERT n times in one round trip (array binding): p's
 * bindings must point at arrays of n values (see my_events.c). The caller
 * keeps the values under my_packet_budget(c). */
int32_t my_exec_bulk(my_conn *c, const my_sql *sql, MYSQL_BIND *b, uint32_t n,
		     my_stmt **ret, memd_error *err);
/* Bytes of values one statement on c may carry (max_allowed_packet less
 * room for the protocol). */
uint64_t my_packet_budget(const my_conn *c);
/* Room reserved per parameter and per statement for the protocol. */
#define MY_PACKET_PARAM_OVERHEAD 16u
#define MY_PACKET_OVERHEAD 4096u

/* Next row: 1 = a row (read it with my_col_*), 0 = no more rows (the
 * result is closed), < 0 = error (closed; err filled). */
int32_t my_fetch(my_conn *c, my_stmt *s, memd_error *err);
/* Close a statement's open result (discarding unread rows). Accepts NULL. */
void my_done(my_stmt *s);
/* Prepare, execute and close a statement that is run once (schema
 * migrations); it must not return rows. */
int32_t my_exec_once(my_conn *c, const char *sql, memd_error *err);
/* Close c's connection (the next user of c reconnects). */
void my_conn_close(my_conn *c);
/* Execute and read the single integer of the first row into *ret;
 * *ret_found = 0 (and *ret untouched) when there is no row. */
int32_t my_query_i64(my_conn *c, const my_sql *sql, my_params *p, int *ret_found,
		     int64_t *ret, memd_error *err);

/* Column i of the current row: text (NULL for SQL NULL; NUL-terminated,
 * valid until the next fetch), integer (0 for NULL), bytes. */
const char *my_col_text(const my_stmt *s, unsigned i);
int64_t my_col_i64(const my_stmt *s, unsigned i);
const void *my_col_bytes(const my_stmt *s, unsigned i, size_t *ret_len);
int my_col_null(const my_stmt *s, unsigned i);

/* Text keys copied out of rows, e.g. what an expiry collects before it
 * deletes: n rows of ncols strings, row i's column j at
 * v[i * ncols + j] (SQL NULL copied as ""), each row one allocation. */
typedef struct my_keys {
	char **v;
	size_t n, cap;
	unsigned ncols;
} my_keys;

/* Append a copy of the first keys->ncols text columns of s's current row.
 * MEMD_ENOMEM (keys as they were) on failure. */
int32_t my_keys_keep(my_keys *keys, const my_stmt *s, memd_error *err);
/* Row i of keys (its ncols strings). */
char **my_keys_row(const my_keys *keys, size_t i);
/* Free the rows, keeping the array for more (n = 0). */
void my_keys_clear(my_keys *keys);
/* Free everything; keys is empty after. Accepts NULL. */
void my_keys_free(my_keys *keys);

/* Rows changed (matched, with CLIENT_FOUND_ROWS) by the last execution,
 * and the value of LAST_INSERT_ID(expr) it set. */
uint64_t my_affected(const my_stmt *s);
uint64_t my_insert_id(const my_stmt *s);

/* Fill err from the failed statement s (or the connection, when s is
 * NULL): "mysql: <what>: <server message>" with the mapped code; marks c
 * lost / deadlocked as the error says. Returns the code. */
int32_t my_fail(my_conn *c, const my_stmt *s, memd_error *err, const char *what_fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* The server or client error number of s (or c when s is NULL). The
 * number of the last failure during an op is also kept in c->last_errno. */
unsigned my_errno(const my_conn *c, const my_stmt *s);

/* Map a server or client error number to a MEMD_E* code and flags
 * (*ret_flags, if not NULL), through pu_storage.h for every kind of
 * storage failure: ER_RECORD_FILE_FULL (a table cannot grow: disk full),
 * ER_DISK_FULL -> full; ER_OPTION_PREVENTS_STATEMENT (--read-only),
 * ER_READ_ONLY_MODE -> read-only; ER_ERROR_ON_READ/WRITE, ER_GET_ERRNO
 * (the engine's errno), ER_CRASHED_ON_USAGE, ER_NOT_KEYFILE -> I/O
 * error; ER_LOCK_WAIT_TIMEOUT, ER_LOCK_DEADLOCK, a query interrupted,
 * a statement to prepare again -> busy; a lost or refused connection,
 * too many connections, the server out of memory (ER_OUTOFMEMORY,
 * ER_OUT_OF_RESOURCES) -> unreachable. ER_STATEMENT_TIMEOUT ->
 * MEMD_ETIMEDOUT retryable, ER_DUP_ENTRY -> MEMD_ECONFLICT, packets
 * too large -> MEMD_ETOOBIG, bad values -> MEMD_EINVAL, the client out of
 * memory -> MEMD_ENOMEM, anything else -> MEMD_EIO. *ret_lost (if not
 * NULL) is set when the connection cannot be used any more. In
 * my_errmap.c (no client call, for the unit test). */
int32_t my_map_errno(unsigned e, uint32_t *ret_flags, int *ret_lost);

/* ---- checks shared by every op (same rules as the sqlite store) ----- */

int32_t my_check_json_object(const char *what, const char *json, memd_error *err);

/* Deliver-loop result of a sink: 0 = go on, > 0 = the caller asked to
 * stop (not an error), < 0 = error (err filled, "what" names the sink). */
int32_t my_sink_result(int32_t r, const char *what, memd_error *err);

/* Rows examined between checks of the deadline in long loops. */
#define MY_CHECK_EVERY 256u


/* One row of a read, for my_fetch_deliver: turn s's current row into a
 * value and hand it to the caller's sink (ud). Returns 0 to go on, > 0 to
 * stop (not an error: my_sink_result's answer), < 0 on error with err
 * filled. The row's text is valid only during the call. */
typedef int32_t (*my_row_fn)(const my_stmt *s, void *ud, memd_error *err);

/* The deliver loop of a read: r is the result of executing s (my_exec);
 * when it is 0, fetch every row of s and hand it to row(s, ud, err),
 * until the rows run out, row returns non-zero, or call's deadline passes
 * (checked every MY_CHECK_EVERY rows). Closes s's result either way
 * (s may be NULL when the execution failed). Returns 0 when the rows ran
 * out or row asked to stop, with *ret_rows (if not NULL) the rows handed
 * to row; else r, my_fetch's, row's or the deadline's error. */
int32_t my_fetch_deliver(my_store *store, const memd_call *call, my_conn *c, my_stmt *s,
			 int32_t r, my_row_fn row, void *ud, uint64_t *ret_rows,
			 memd_error *err);

#endif
