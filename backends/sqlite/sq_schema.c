/* SPDX-License-Identifier: MIT */
#include "sq_schema.h"

#include <stdio.h>

/* PRAGMA application_id of a memd database: "memd" in ASCII. */
#define SQ_APPLICATION_ID 0x6d656d64
#define SQ_PRAGMA_MAX 64

typedef struct sq_migration {
	int32_t version; /* user_version after the step */
	const char *what;
	const char *sql;
} sq_migration;

/* Version 1: the whole store. Keys are (app, user, session) everywhere.
 * events.position is the store-wide feed position (the rowid, assigned
 * from feed_counter, never reused); feed_deletes holds the DELETE records
 * that share the same position space. */
static const char SQL_V1[] =
	"CREATE TABLE sessions ("
	"  app TEXT NOT NULL, user TEXT NOT NULL, id TEXT NOT NULL,"
	"  title TEXT, metadata TEXT NOT NULL DEFAULT '{}',"
	"  flags INTEGER NOT NULL DEFAULT 0,"
	"  created_us INTEGER NOT NULL, updated_us INTEGER NOT NULL,"
	"  version INTEGER NOT NULL DEFAULT 0,"
	"  last_seq INTEGER NOT NULL DEFAULT 0,"
	"  summary_seq INTEGER NOT NULL DEFAULT 0,"
	"  PRIMARY KEY (app, user, id)"
	") WITHOUT ROWID;"
	"CREATE INDEX sessions_by_created ON sessions (app, user, created_us, id);"

	"CREATE TABLE events ("
	"  position INTEGER PRIMARY KEY,"
	"  app TEXT NOT NULL, user TEXT NOT NULL, session TEXT NOT NULL,"
	"  seq INTEGER NOT NULL CHECK (seq > 0),"
	"  id TEXT NOT NULL,"
	"  invocation_id TEXT, author TEXT, role TEXT NOT NULL, branch TEXT,"
	"  content TEXT, actions TEXT, metadata TEXT,"
	"  timestamp_us INTEGER NOT NULL,"
	"  text TEXT, tokens INTEGER NOT NULL DEFAULT 0,"
	"  covers_seq INTEGER NOT NULL DEFAULT 0,"
	"  FOREIGN KEY (app, user, session) REFERENCES sessions (app, user, id)"
	"    ON DELETE CASCADE"
	");"
	"CREATE UNIQUE INDEX events_by_seq ON events (app, user, session, seq);"
	"CREATE UNIQUE INDEX events_by_id ON events (app, user, session, id);"
	"CREATE INDEX events_summaries ON events (app, user, session, seq)"
	"  WHERE role = 'summary';"
	"CREATE INDEX events_by_time ON events (app, user, session, timestamp_us, seq, role);"

	"CREATE TABLE state_app ("
	"  app TEXT NOT NULL, name TEXT NOT NULL, value TEXT NOT NULL,"
	"  PRIMARY KEY (app, name)"
	") WITHOUT ROWID;"
	"CREATE TABLE state_user ("
	"  app TEXT NOT NULL, user TEXT NOT NULL, name TEXT NOT NULL, value TEXT NOT NULL,"
	"  PRIMARY KEY (app, user, name)"
	") WITHOUT ROWID;"
	"CREATE TABLE state_session ("
	"  app TEXT NOT NULL, user TEXT NOT NULL, session TEXT NOT NULL,"
	"  name TEXT NOT NULL, value TEXT NOT NULL,"
	"  PRIMARY KEY (app, user, session, name),"
	"  FOREIGN KEY (app, user, session) REFERENCES sessions (app, user, id)"
	"    ON DELETE CASCADE"
	") WITHOUT ROWID;"

	"CREATE TABLE artifacts ("
	"  app TEXT NOT NULL, user TEXT NOT NULL, session TEXT NOT NULL,"
	"  name TEXT NOT NULL, version INTEGER NOT NULL CHECK (version > 0),"
	"  mime_type TEXT NOT NULL, data BLOB NOT NULL, size INTEGER NOT NULL,"
	"  created_us INTEGER NOT NULL,"
	"  PRIMARY KEY (app, user, session, name, version),"
	"  FOREIGN KEY (app, user, session) REFERENCES sessions (app, user, id)"
	"    ON DELETE CASCADE"
	");"

	"CREATE TABLE feed_counter ("
	"  id INTEGER PRIMARY KEY CHECK (id = 1),"
	"  last INTEGER NOT NULL"
	");"
	"INSERT INTO feed_counter (id, last) VALUES (1, 0);"
	"CREATE TABLE feed_deletes ("
	"  position INTEGER PRIMARY KEY,"
	"  kind INTEGER NOT NULL,"
	"  app TEXT NOT NULL, user TEXT NOT NULL, session TEXT"
	");"
	"CREATE TABLE cursors ("
	"  name TEXT NOT NULL PRIMARY KEY,"
	"  position INTEGER NOT NULL CHECK (position >= 0)"
	") WITHOUT ROWID;";

/* Version 2: events_by_id leads with the id. Ids the host makes are
 * UUIDv7 (time-ordered), so new entries of every session land on the
 * index's last pages instead of on one page per session: concurrent
 * appends to many sessions dirty (and a group commit writes to the WAL)
 * one index page fewer per session. Lookups give all four columns. */
static const char SQL_V2[] =
	"DROP INDEX events_by_id;"
	"CREATE UNIQUE INDEX events_by_id ON events (id, app, user, session);";

/* Version 3: one per-session index instead of two. Every append writes
 * an entry to each index keyed by session, and a group commit of appends
 * to many sessions dirties (and writes to the WAL) one page per session
 * per such index: measured, the second one cost a fifth of the append
 * rate. events_by_seq now also carries timestamp_us and role, so an
 * after_time read walks it index-only in seq order, and events_by_time
 * goes. Seqs stay unique per session because the writer alone hands them
 * out, from the session row, in the transaction that inserts them. */
static const char SQL_V3[] =
	"DROP INDEX events_by_time;"
	"DROP INDEX events_by_seq;"
	"CREATE INDEX events_by_seq ON events (app, user, session, seq, timestamp_us, role);";

/* Version 4 (ABI 1.2): lanes. Sessions gain their lifecycle (the lane
 * that made them, the message source, what they replaced, why they began
 * and ended) and usage sums; existing rows read as open sessions with no
 * lane and no usage. A lane is one row per (app, user, key); its inbox
 * depth and the next inbox position are kept in the row, so listings
 * need no count and puts and takes lock the lane row they change. The
 * inbox holds one row per item, in_slot = 1 for the next-up slot, and
 * goes with its lane (ON DELETE CASCADE).
 *
 * lane_list walks one of three indexes in (updated_us, app, user, key)
 * order, by how much of the scope it fixes: a user's lanes, an app's, or
 * every app's (the watcher's scans); lane_prune walks the last one from
 * the oldest. session_list filters by origin platform or lane through
 * partial indexes of the sessions that have one; session_list_ended walks
 * a partial index of the ended ones. */
static const char SQL_V4[] =
	"ALTER TABLE sessions ADD COLUMN lane_key TEXT;"
	"ALTER TABLE sessions ADD COLUMN origin TEXT;"
	"ALTER TABLE sessions ADD COLUMN origin_platform TEXT;"
	"ALTER TABLE sessions ADD COLUMN previous_session TEXT;"
	"ALTER TABLE sessions ADD COLUMN start_reason TEXT;"
	"ALTER TABLE sessions ADD COLUMN end_reason TEXT;"
	"ALTER TABLE sessions ADD COLUMN ended_us INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE sessions ADD COLUMN input_tokens INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE sessions ADD COLUMN output_tokens INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE sessions ADD COLUMN cache_read_tokens INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE sessions ADD COLUMN cache_write_tokens INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE sessions ADD COLUMN cost_micro_usd INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE sessions ADD COLUMN last_prompt_tokens INTEGER NOT NULL DEFAULT 0;"
	"CREATE INDEX sessions_by_platform ON sessions (app, user, origin_platform, created_us, id)"
	"  WHERE origin_platform IS NOT NULL;"
	"CREATE INDEX sessions_by_lane ON sessions (app, user, lane_key, created_us, id)"
	"  WHERE lane_key IS NOT NULL;"
	"CREATE INDEX sessions_ended ON sessions (ended_us, app, user, id) WHERE ended_us > 0;"

	"CREATE TABLE lanes ("
	"  app TEXT NOT NULL, user TEXT NOT NULL, key TEXT NOT NULL,"
	"  session TEXT NOT NULL, flags INTEGER NOT NULL DEFAULT 0, origin TEXT,"
	"  created_us INTEGER NOT NULL, updated_us INTEGER NOT NULL,"
	"  version INTEGER NOT NULL,"
	"  resume_reason TEXT, resume_marked_us INTEGER NOT NULL DEFAULT 0,"
	"  reset_reason TEXT, previous_session TEXT, reset_us INTEGER NOT NULL DEFAULT 0,"
	"  turn_id TEXT, turn_started_us INTEGER NOT NULL DEFAULT 0,"
	"  turn_lease_until_us INTEGER NOT NULL DEFAULT 0,"
	"  interruptions INTEGER NOT NULL DEFAULT 0,"
	"  finalize_failures INTEGER NOT NULL DEFAULT 0,"
	"  finalize_claim_until_us INTEGER NOT NULL DEFAULT 0,"
	"  input_tokens INTEGER NOT NULL DEFAULT 0,"
	"  output_tokens INTEGER NOT NULL DEFAULT 0,"
	"  cache_read_tokens INTEGER NOT NULL DEFAULT 0,"
	"  cache_write_tokens INTEGER NOT NULL DEFAULT 0,"
	"  cost_micro_usd INTEGER NOT NULL DEFAULT 0,"
	"  last_prompt_tokens INTEGER NOT NULL DEFAULT 0,"
	"  inbox_depth INTEGER NOT NULL DEFAULT 0,"
	"  inbox_next INTEGER NOT NULL DEFAULT 1,"
	"  PRIMARY KEY (app, user, key)"
	") WITHOUT ROWID;"
	"CREATE INDEX lanes_of_user ON lanes (app, user, updated_us, key);"
	"CREATE INDEX lanes_of_app ON lanes (app, updated_us, user, key);"
	"CREATE INDEX lanes_by_activity ON lanes (updated_us, app, user, key);"

	"CREATE TABLE inbox ("
	"  app TEXT NOT NULL, user TEXT NOT NULL, key TEXT NOT NULL,"
	"  position INTEGER NOT NULL, id TEXT NOT NULL, mode INTEGER NOT NULL,"
	"  body TEXT NOT NULL, created_us INTEGER NOT NULL,"
	"  in_slot INTEGER NOT NULL DEFAULT 0,"
	"  PRIMARY KEY (app, user, key, position),"
	"  FOREIGN KEY (app, user, key) REFERENCES lanes (app, user, key) ON DELETE CASCADE"
	") WITHOUT ROWID;";

/* Version 5 (ABI 1.2): transcripts. Events gain their hidden mark
 * (hidden_us = 0: visible; hidden_by and hidden_kind: the operation that
 * hid them) and the operation that appended them. events_by_seq becomes a
 * partial index of the visible events, so reads and "newest N visible"
 * windows never step over hidden rows, and appends write no more index
 * entries than before; events_hidden holds the hidden ones (the audit
 * trail, read with INCLUDE_HIDDEN, merged in seq order with the visible
 * ones). Hiding or unhiding moves a row from one to the other: the cost
 * follows the rows hidden, not the session. The summaries index covers
 * only visible summaries (summary_seq is the newest visible one).
 *
 * Sessions gain message_count (visible events that are not summaries,
 * counted here once for existing rows, then kept by every append) and an
 * index by activity for lists in (updated_us, id) order. operations keeps
 * the transcript operations, state_history every key an append or a
 * session's creation wrote, feed_hides the feed's HIDE records (in the
 * feed's position space; the event's data is read from events by its id). All
 * three go with their session (ON DELETE CASCADE). */
static const char SQL_V5[] =
	/* Counted through the old events_by_seq (it covers role). */
	"ALTER TABLE sessions ADD COLUMN message_count INTEGER NOT NULL DEFAULT 0;"
	"UPDATE sessions SET message_count = (SELECT count(*) FROM events e"
	"  WHERE e.app = sessions.app AND e.user = sessions.user AND e.session = sessions.id"
	"  AND e.role <> 'summary');"
	"ALTER TABLE events ADD COLUMN hidden_us INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE events ADD COLUMN hidden_by TEXT;"
	"ALTER TABLE events ADD COLUMN hidden_kind INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE events ADD COLUMN operation TEXT;"
	"DROP INDEX events_by_seq;"
	"CREATE INDEX events_by_seq ON events (app, user, session, seq, timestamp_us, role)"
	"  WHERE hidden_us = 0;"
	"CREATE INDEX events_hidden ON events (app, user, session, seq, timestamp_us, role)"
	"  WHERE hidden_us <> 0;"
	"DROP INDEX events_summaries;"
	"CREATE INDEX events_summaries ON events (app, user, session, seq)"
	"  WHERE role = 'summary' AND hidden_us = 0;"

	"CREATE INDEX sessions_by_activity ON sessions (app, user, updated_us, id);"

	"CREATE TABLE operations ("
	"  app TEXT NOT NULL, user TEXT NOT NULL, session TEXT NOT NULL, id TEXT NOT NULL,"
	"  kind INTEGER NOT NULL, created_us INTEGER NOT NULL, version INTEGER NOT NULL,"
	"  hide_from_seq INTEGER NOT NULL DEFAULT 0,"
	"  first_seq INTEGER NOT NULL DEFAULT 0, last_seq INTEGER NOT NULL DEFAULT 0,"
	"  hidden_count INTEGER NOT NULL DEFAULT 0, unhidden_count INTEGER NOT NULL DEFAULT 0,"
	"  undo_of TEXT, undone_by TEXT,"
	"  PRIMARY KEY (app, user, session, id),"
	"  FOREIGN KEY (app, user, session) REFERENCES sessions (app, user, id)"
	"    ON DELETE CASCADE"
	") WITHOUT ROWID;"
	"CREATE INDEX operations_by_version ON operations (app, user, session, version);"

	"CREATE TABLE state_history ("
	"  app TEXT NOT NULL, user TEXT NOT NULL, session TEXT NOT NULL,"
	"  version INTEGER NOT NULL, key TEXT NOT NULL, seq INTEGER NOT NULL,"
	"  old TEXT, new TEXT, at_us INTEGER NOT NULL, operation TEXT,"
	"  PRIMARY KEY (app, user, session, version, key),"
	"  FOREIGN KEY (app, user, session) REFERENCES sessions (app, user, id)"
	"    ON DELETE CASCADE"
	") WITHOUT ROWID;"

	"CREATE TABLE feed_hides ("
	"  position INTEGER PRIMARY KEY,"
	"  app TEXT NOT NULL, user TEXT NOT NULL, session TEXT NOT NULL,"
	"  event TEXT NOT NULL,"
	"  FOREIGN KEY (app, user, session) REFERENCES sessions (app, user, id)"
	"    ON DELETE CASCADE"
	");"
	"CREATE INDEX feed_hides_of_session ON feed_hides (app, user, session);";

/* Version 6: state_history by seq. A rewind restores state from the
 * changes since its first hidden seq (state_history's from_seq); an
 * append's seq never decreases with its version, so those changes are a
 * suffix of the session's history, whose first version this index finds
 * in one step instead of a walk through the whole history. */
static const char SQL_V6[] =
	"CREATE INDEX state_history_by_seq ON state_history (app, user, session, seq, version);";

/* Version 7 (ABI 1.3): long-term memories. A memory is one row per
 * (app, user, id) of memories; its position is the feed position of its
 * last add or update (its MEMORY record: a new position moves the record,
 * so a reader never sees it twice), read in position order through
 * memories_by_position. memory_list walks memories_by_created newest
 * first; memory_expire walks memories_expiring (a partial index of the
 * rows with an expiry) from the oldest expiry. memory_history keeps every
 * change as a full snapshot, in the order written (n), and outlives the
 * row; user_delete removes both. feed_deletes gains the memory id of its
 * MEMORY_DELETE records.
 *
 * Sessions gain memory_seq, the last seq memory extraction has read (0
 * for every existing session, so their events count as unread), and
 * sessions_pending, a partial index of the sessions with unread events
 * (memory_seq < last_seq) in (updated_us, app, user, id) order: the
 * pending listing walks only those, never every session. */
static const char SQL_V7[] =
	"ALTER TABLE sessions ADD COLUMN memory_seq INTEGER NOT NULL DEFAULT 0;"
	"CREATE INDEX sessions_pending ON sessions (updated_us, app, user, id)"
	"  WHERE memory_seq < last_seq;"
	"ALTER TABLE feed_deletes ADD COLUMN memory TEXT;"

	"CREATE TABLE memories ("
	"  app TEXT NOT NULL, user TEXT NOT NULL, id TEXT NOT NULL,"
	"  text TEXT NOT NULL, kind TEXT NOT NULL,"
	"  topics TEXT NOT NULL DEFAULT '[]', entities TEXT NOT NULL DEFAULT '[]',"
	"  source_session TEXT, source TEXT,"
	"  created_us INTEGER NOT NULL, updated_us INTEGER NOT NULL,"
	"  expires_us INTEGER NOT NULL DEFAULT 0,"
	"  version INTEGER NOT NULL CHECK (version > 0),"
	"  position INTEGER NOT NULL,"
	"  tokens INTEGER NOT NULL DEFAULT 0,"
	"  PRIMARY KEY (app, user, id)"
	") WITHOUT ROWID;"
	"CREATE INDEX memories_by_created ON memories (app, user, created_us, id);"
	"CREATE UNIQUE INDEX memories_by_position ON memories (position);"
	"CREATE INDEX memories_expiring ON memories (expires_us, app, user, id)"
	"  WHERE expires_us > 0;"

	"CREATE TABLE memory_history ("
	"  n INTEGER PRIMARY KEY,"
	"  app TEXT NOT NULL, user TEXT NOT NULL, id TEXT NOT NULL,"
	"  version INTEGER NOT NULL, op INTEGER NOT NULL,"
	"  text TEXT NOT NULL, kind TEXT NOT NULL, topics TEXT NOT NULL, entities TEXT NOT NULL,"
	"  source_session TEXT, source TEXT,"
	"  created_us INTEGER NOT NULL, updated_us INTEGER NOT NULL,"
	"  expires_us INTEGER NOT NULL, tokens INTEGER NOT NULL,"
	"  actor TEXT NOT NULL, reason TEXT, at_us INTEGER NOT NULL"
	");"
	"CREATE INDEX memory_history_of ON memory_history (app, user, id, at_us);";

/* Version 8 (ABI 1.5): run checkpoints and A2A tasks. A checkpoint is one
 * row per (app, user, session, ns, id) of checkpoints (ids compare as
 * bytes: SQLite's BINARY collation); its pending writes are rows of
 * checkpoint_writes under it, in (task_id, idx) order; a session's head,
 * its greatest root ("" namespace) checkpoint id with that checkpoint's
 * run state and expiry, is its row of checkpoint_heads, which the
 * resumable listing walks in (app, user, session) order. Everything goes
 * with its session (ON DELETE CASCADE from sessions) and writes with their
 * checkpoint; an upsert of a checkpoint (never INSERT OR REPLACE) keeps
 * them. A session's listing walks the primary key (one namespace) or
 * checkpoints_session_by_id (every namespace), a user's walks
 * checkpoints_by_id, newest id first; checkpoint_expire walks
 * checkpoints_expiring (a partial index of the rows with an expiry) from
 * the oldest expiry.
 *
 * A task is one row per (app, id) of tasks: listings walk
 * tasks_by_updated or, for one context id, tasks_by_context, newest
 * update first; session and user deletes find a user's tasks through
 * tasks_by_user. */
static const char SQL_V8[] =
	"CREATE TABLE checkpoints ("
	"  app TEXT NOT NULL, user TEXT NOT NULL, session TEXT NOT NULL,"
	"  ns TEXT NOT NULL, id TEXT NOT NULL,"
	"  parent_id TEXT, type TEXT NOT NULL, payload BLOB NOT NULL,"
	"  metadata TEXT NOT NULL DEFAULT '{}',"
	"  run_state INTEGER NOT NULL,"
	"  created_us INTEGER NOT NULL, updated_us INTEGER NOT NULL,"
	"  expires_us INTEGER NOT NULL DEFAULT 0,"
	"  PRIMARY KEY (app, user, session, ns, id),"
	"  FOREIGN KEY (app, user, session) REFERENCES sessions (app, user, id)"
	"    ON DELETE CASCADE"
	");"
	"CREATE INDEX checkpoints_session_by_id ON checkpoints (app, user, session, id, ns);"
	"CREATE INDEX checkpoints_by_id ON checkpoints (app, user, id, session, ns);"
	"CREATE INDEX checkpoints_expiring ON checkpoints (expires_us, app, user, session, ns, id)"
	"  WHERE expires_us > 0;"

	"CREATE TABLE checkpoint_writes ("
	"  app TEXT NOT NULL, user TEXT NOT NULL, session TEXT NOT NULL,"
	"  ns TEXT NOT NULL, checkpoint_id TEXT NOT NULL,"
	"  task_id TEXT NOT NULL, idx INTEGER NOT NULL,"
	"  channel TEXT NOT NULL, type TEXT NOT NULL, value BLOB NOT NULL,"
	"  PRIMARY KEY (app, user, session, ns, checkpoint_id, task_id, idx),"
	"  FOREIGN KEY (app, user, session, ns, checkpoint_id)"
	"    REFERENCES checkpoints (app, user, session, ns, id) ON DELETE CASCADE"
	");"

	"CREATE TABLE checkpoint_heads ("
	"  app TEXT NOT NULL, user TEXT NOT NULL, session TEXT NOT NULL,"
	"  id TEXT NOT NULL, run_state INTEGER NOT NULL,"
	"  expires_us INTEGER NOT NULL DEFAULT 0,"
	"  PRIMARY KEY (app, user, session),"
	"  FOREIGN KEY (app, user, session) REFERENCES sessions (app, user, id)"
	"    ON DELETE CASCADE"
	") WITHOUT ROWID;"

	"CREATE TABLE tasks ("
	"  app TEXT NOT NULL, id TEXT NOT NULL,"
	"  context_id TEXT NOT NULL, user TEXT, state TEXT NOT NULL,"
	"  task TEXT NOT NULL,"
	"  created_us INTEGER NOT NULL, updated_us INTEGER NOT NULL,"
	"  version INTEGER NOT NULL CHECK (version > 0),"
	"  PRIMARY KEY (app, id)"
	");"
	"CREATE INDEX tasks_by_updated ON tasks (app, updated_us, id);"
	"CREATE INDEX tasks_by_context ON tasks (app, context_id, updated_us, id);"
	"CREATE INDEX tasks_by_user ON tasks (app, user, context_id) WHERE user IS NOT NULL;";

/* Version 9 (ABI 1.6): a pending write keeps the path of the task that
 * made it (LangGraph's taskPath), '' for none, which is also what the
 * writes of an older database read back with. It is not part of the key
 * (a write is still one per (checkpoint, task_id, idx)). A checkpoint's
 * writes are read ascending by (task_path, task_id, idx) in BINARY
 * collation (bytes: UTF-8 in code point order); no index serves that
 * order: the primary key's prefix finds the writes of one checkpoint, a
 * step's few, and the read sorts them. */
static const char SQL_V9[] =
	"ALTER TABLE checkpoint_writes ADD COLUMN task_path TEXT COLLATE BINARY NOT NULL"
	"  DEFAULT '';";

/* Ordered; each step's version is one more than the previous one's. */
static const sq_migration migrations[] = {
	{ 1, "initial schema", SQL_V1 },
	{ 2, "events_by_id ordered by id first", SQL_V2 },
	{ 3, "events_by_seq covers timestamp and role; events_by_time dropped", SQL_V3 },
	{ 4, "lanes, inboxes, sessions' lifecycle and usage", SQL_V4 },
	{ 5, "transcripts: hidden events, operations, state history, activity order", SQL_V5 },
	{ 6, "state_history by seq", SQL_V6 },
	{ 7, "long-term memories, their history and the sessions' memory cursor", SQL_V7 },
	{ 8, "run checkpoints, their pending writes and heads; A2A tasks", SQL_V8 },
	{ 9, "the task path of checkpoint writes", SQL_V9 },
};
#define SQ_N_MIGRATIONS (sizeof(migrations) / sizeof(migrations[0]))
#define SQ_SCHEMA_LATEST (migrations[SQ_N_MIGRATIONS - 1].version)

/* Run constant SQL (possibly several statements) to completion. */
static int32_t run(sq_conn *c, const char *sql, memd_error *err)
{
	int rc = sqlite3_exec(c->db, sql, NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		return sq_fail(c, rc, err, "schema");
	return 0;
}

/* The integer result of a constant query (a PRAGMA or a count). */
static int32_t query_int(sq_conn *c, const char *sql, int64_t *ret, memd_error *err)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(c->db, sql, -1, &st, NULL);

	if (rc == SQLITE_OK) {
		rc = sqlite3_step(st);
		if (rc == SQLITE_ROW) {
			*ret = sqlite3_column_int64(st, 0);
			rc = SQLITE_OK;
		}
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_OK)
		return sq_fail(c, rc, err, "%s", sql);
	return 0;
}

/* Refuse a database that is not memd's (another app's file). */
static int32_t check_owner(sq_conn *c, int64_t version, memd_error *err)
{
	int64_t app_id = 0, n_tables = 0;
	int32_t r = query_int(c, "PRAGMA application_id", &app_id, err);

	if (r < 0 || app_id == SQ_APPLICATION_ID)
		return r;
	if (app_id != 0 || version != 0)
		return memd_error_set(err, MEMD_EIO, 0,
				      "sqlite: the database belongs to another application "
				      "(application_id %lld, user_version %lld)",
				      (long long)app_id, (long long)version);
	r = query_int(c, "SELECT count(*) FROM sqlite_master", &n_tables, err);
	if (r == 0 && n_tables > 0)
		r = memd_error_set(err, MEMD_EIO, 0,
				   "sqlite: the database already holds %lld schema objects that are not "
				   "memd's; refusing to add memd's tables to it",
				   (long long)n_tables);
	return r;
}

/* One step in its own transaction; *version is the schema version after. */
static int32_t run_step(sq_conn *c, const memd_host *host, const sq_migration *m,
			int64_t *version, memd_error *err)
{
	char pragma[SQ_PRAGMA_MAX];
	int64_t now = 0;
	int32_t r = run(c, "BEGIN IMMEDIATE", err);

	if (r < 0)
		return r;
	r = query_int(c, "PRAGMA user_version", &now, err);
	if (r == 0)
		r = check_owner(c, now, err);
	if (r == 0 && now > SQ_SCHEMA_LATEST)
		r = memd_error_set(err, MEMD_EIO, 0,
				   "sqlite: the database has schema version %lld, newer than the %d "
				   "this plugin knows; use a newer memd",
				   (long long)now, (int)SQ_SCHEMA_LATEST);
	if (r < 0 || now >= m->version)
		goto out; /* done already (maybe by another process) */
	if (now != m->version - 1) {
		r = memd_error_set(err, MEMD_EIO, 0,
				   "sqlite: schema version %lld has no migration to %d",
				   (long long)now, (int)m->version);
		goto out;
	}
	r = run(c, m->sql, err);
	if (r == 0) {
		snprintf(pragma, sizeof(pragma), "PRAGMA application_id = %d", SQ_APPLICATION_ID);
		r = run(c, pragma, err);
	}
	if (r == 0) {
		snprintf(pragma, sizeof(pragma), "PRAGMA user_version = %d", (int)m->version);
		r = run(c, pragma, err);
	}
	if (r == 0) {
		now = m->version;
		if (host && host->log)
			host->log(host, MEMD_LOG_INFO, "schema migrated to version %d (%s)",
				  (int)m->version, m->what);
	}
out:
	if (r == 0)
		r = run(c, "COMMIT", err);
	if (r < 0) {
		if (!sqlite3_get_autocommit(c->db))
			(void)sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
		return r;
	}
	*version = now;
	return 0;
}

int32_t sq_schema_migrate(sq_conn *c, const memd_host *host, int32_t *ret_version,
			  memd_error *err)
{
	int64_t version = 0;

	for (size_t i = 0; i < SQ_N_MIGRATIONS; i++) {
		int32_t r = run_step(c, host, &migrations[i], &version, err);
		if (r < 0)
			return r;
	}
	*ret_version = (int32_t)version;
	return 0;
}
