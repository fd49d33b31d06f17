/* SPDX-License-Identifier: MIT */
#include "pg_schema.h"

#include <string.h>

/* pg_advisory_xact_lock(PG_LOCK_CLASS, hashtext(schema)) serializes
 * migrations of one schema across processes: "memd" in ASCII. */
#define PG_LOCK_CLASS_TEXT "1835363684"

typedef struct pg_migration {
	int32_t version; /* memd_meta.version after the step */
	const char *what;
	const char *const *sql; /* single statements, NULL-terminated */
} pg_migration;

/* Version 1: the whole store. Keys are (app, "user", session) everywhere,
 * COLLATE "C" so ids compare and sort bytewise (as every memd store does).
 * events.position is the store-wide feed position handed out by the one
 * feed_counter row (see pg_feed.c for why that orders the feed);
 * feed_deletes holds the DELETE records in the same position space (and,
 * since version 2, the FINALIZE records).
 * Times are unix microseconds (bigint), exact. Event content, actions and
 * metadata and session metadata are jsonb (queryable); state values are
 * JSON text, because a state value may be any JSON, and jsonb cannot hold
 * the string escape \u0000. */
static const char *const SQL_V1[] = {
	"CREATE TABLE sessions ("
	"  app text COLLATE \"C\" NOT NULL, \"user\" text COLLATE \"C\" NOT NULL,"
	"  id text COLLATE \"C\" NOT NULL,"
	"  title text, metadata jsonb NOT NULL DEFAULT '{}',"
	"  flags integer NOT NULL DEFAULT 0,"
	"  created_us bigint NOT NULL, updated_us bigint NOT NULL,"
	"  version bigint NOT NULL DEFAULT 0,"
	"  last_seq bigint NOT NULL DEFAULT 0,"
	"  summary_seq bigint NOT NULL DEFAULT 0,"
	"  PRIMARY KEY (app, \"user\", id))",
	"CREATE INDEX sessions_by_created ON sessions (app, \"user\", created_us, id)",

	"CREATE TABLE events ("
	"  app text COLLATE \"C\" NOT NULL, \"user\" text COLLATE \"C\" NOT NULL,"
	"  session text COLLATE \"C\" NOT NULL,"
	"  seq bigint NOT NULL CHECK (seq > 0),"
	"  id text COLLATE \"C\" NOT NULL,"
	"  position bigint NOT NULL,"
	"  invocation_id text, author text, role text NOT NULL, branch text,"
	"  content jsonb, actions jsonb, metadata jsonb,"
	"  timestamp_us bigint NOT NULL,"
	"  text text, tokens bigint NOT NULL DEFAULT 0,"
	"  covers_seq bigint NOT NULL DEFAULT 0,"
	"  PRIMARY KEY (app, \"user\", session, seq),"
	"  FOREIGN KEY (app, \"user\", session) REFERENCES sessions (app, \"user\", id)"
	"    ON DELETE CASCADE)",
	"CREATE UNIQUE INDEX events_by_id ON events (app, \"user\", session, id)",
	"CREATE UNIQUE INDEX events_by_position ON events (position)",
	"CREATE INDEX events_summaries ON events (app, \"user\", session, seq)"
	"  WHERE role = 'summary'",
	"CREATE INDEX events_by_time ON events (app, \"user\", session, timestamp_us, seq)",

	"CREATE TABLE state_app ("
	"  app text COLLATE \"C\" NOT NULL, name text COLLATE \"C\" NOT NULL,"
	"  value text NOT NULL,"
	"  PRIMARY KEY (app, name))",
	"CREATE TABLE state_user ("
	"  app text COLLATE \"C\" NOT NULL, \"user\" text COLLATE \"C\" NOT NULL,"
	"  name text COLLATE \"C\" NOT NULL, value text NOT NULL,"
	"  PRIMARY KEY (app, \"user\", name))",
	"CREATE TABLE state_session ("
	"  app text COLLATE \"C\" NOT NULL, \"user\" text COLLATE \"C\" NOT NULL,"
	"  session text COLLATE \"C\" NOT NULL,"
	"  name text COLLATE \"C\" NOT NULL, value text NOT NULL,"
	"  PRIMARY KEY (app, \"user\", session, name),"
	"  FOREIGN KEY (app, \"user\", session) REFERENCES sessions (app, \"user\", id)"
	"    ON DELETE CASCADE)",

	"CREATE TABLE artifacts ("
	"  app text COLLATE \"C\" NOT NULL, \"user\" text COLLATE \"C\" NOT NULL,"
	"  session text COLLATE \"C\" NOT NULL,"
	"  name text COLLATE \"C\" NOT NULL, version bigint NOT NULL CHECK (version > 0),"
	"  mime_type text NOT NULL, data bytea NOT NULL, size bigint NOT NULL,"
	"  created_us bigint NOT NULL,"
	"  PRIMARY KEY (app, \"user\", session, name, version),"
	"  FOREIGN KEY (app, \"user\", session) REFERENCES sessions (app, \"user\", id)"
	"    ON DELETE CASCADE)",

	"CREATE TABLE feed_counter ("
	"  id integer PRIMARY KEY CHECK (id = 1),"
	"  last bigint NOT NULL)",
	"INSERT INTO feed_counter (id, last) VALUES (1, 0)",
	"CREATE TABLE feed_deletes ("
	"  position bigint PRIMARY KEY,"
	"  kind integer NOT NULL,"
	"  app text COLLATE \"C\" NOT NULL, \"user\" text COLLATE \"C\" NOT NULL,"
	"  session text COLLATE \"C\")",
	"CREATE TABLE cursors ("
	"  name text COLLATE \"C\" PRIMARY KEY,"
	"  position bigint NOT NULL CHECK (position >= 0))",
	NULL,
};

/* Version 2: lanes. Sessions gain their lifecycle (the lane that made
 * them, the message source, the session a reset replaced, why they
 * started and ended) and usage sums; ADD COLUMN with a constant default
 * rewrites nothing, so an existing database migrates at once and its
 * sessions read as open, made by no lane, with no usage. The partial
 * indexes serve the session list's lane and platform filters and the
 * retention scan of ended sessions as range scans, and cost nothing for
 * sessions without a lane, platform or end.
 *
 * lanes: one row per (app, user, key), the host's fields plus what the
 * store keeps: version, the usage sums, inbox_last (the last inbox
 * position handed out: positions ascend in put order) and inbox_depth
 * (the inbox's item count, kept by every write of the inbox under the
 * lane row's lock). Its three listing indexes are the three shapes of a
 * lane list (every app, one app, one user) in the list's order;
 * lanes_by_session finds the lane an append's usage also goes to. inbox:
 * the items of a lane, at most one of them in the next-up slot (the
 * partial unique index), gone with their lane (the foreign key). The
 * body is json, not jsonb: an item comes back as it was put. */
static const char *const SQL_V2[] = {
	"ALTER TABLE sessions"
	"  ADD COLUMN lane_key text COLLATE \"C\","
	"  ADD COLUMN origin jsonb,"
	"  ADD COLUMN origin_platform text COLLATE \"C\","
	"  ADD COLUMN previous_session text COLLATE \"C\","
	"  ADD COLUMN start_reason text,"
	"  ADD COLUMN end_reason text,"
	"  ADD COLUMN ended_us bigint NOT NULL DEFAULT 0,"
	"  ADD COLUMN input_tokens bigint NOT NULL DEFAULT 0,"
	"  ADD COLUMN output_tokens bigint NOT NULL DEFAULT 0,"
	"  ADD COLUMN cache_read_tokens bigint NOT NULL DEFAULT 0,"
	"  ADD COLUMN cache_write_tokens bigint NOT NULL DEFAULT 0,"
	"  ADD COLUMN cost_micro_usd bigint NOT NULL DEFAULT 0,"
	"  ADD COLUMN last_prompt_tokens bigint NOT NULL DEFAULT 0",
	"CREATE INDEX sessions_by_lane ON sessions (app, \"user\", lane_key, created_us, id)"
	"  WHERE lane_key IS NOT NULL",
	"CREATE INDEX sessions_by_platform"
	"  ON sessions (app, \"user\", origin_platform, created_us, id)"
	"  WHERE origin_platform IS NOT NULL",
	"CREATE INDEX sessions_by_ended ON sessions (ended_us, app, \"user\", id)"
	"  WHERE ended_us > 0",

	"CREATE TABLE lanes ("
	"  app text COLLATE \"C\" NOT NULL, \"user\" text COLLATE \"C\" NOT NULL,"
	"  key text COLLATE \"C\" NOT NULL,"
	"  flags integer NOT NULL DEFAULT 0,"
	"  session text COLLATE \"C\" NOT NULL DEFAULT '',"
	"  origin jsonb,"
	"  created_us bigint NOT NULL, updated_us bigint NOT NULL,"
	"  version bigint NOT NULL DEFAULT 0,"
	"  resume_reason text, resume_marked_us bigint NOT NULL DEFAULT 0,"
	"  reset_reason text, previous_session text COLLATE \"C\","
	"  reset_us bigint NOT NULL DEFAULT 0,"
	"  turn_id text COLLATE \"C\", turn_started_us bigint NOT NULL DEFAULT 0,"
	"  turn_lease_until_us bigint NOT NULL DEFAULT 0,"
	"  interruptions bigint NOT NULL DEFAULT 0,"
	"  finalize_failures bigint NOT NULL DEFAULT 0,"
	"  finalize_claim_until_us bigint NOT NULL DEFAULT 0,"
	"  input_tokens bigint NOT NULL DEFAULT 0,"
	"  output_tokens bigint NOT NULL DEFAULT 0,"
	"  cache_read_tokens bigint NOT NULL DEFAULT 0,"
	"  cache_write_tokens bigint NOT NULL DEFAULT 0,"
	"  cost_micro_usd bigint NOT NULL DEFAULT 0,"
	"  last_prompt_tokens bigint NOT NULL DEFAULT 0,"
	"  inbox_last bigint NOT NULL DEFAULT 0,"
	"  inbox_depth bigint NOT NULL DEFAULT 0,"
	"  PRIMARY KEY (app, \"user\", key))",
	"CREATE INDEX lanes_by_updated ON lanes (updated_us, app, \"user\", key)",
	"CREATE INDEX lanes_by_app_updated ON lanes (app, updated_us, \"user\", key)",
	"CREATE INDEX lanes_by_user_updated ON lanes (app, \"user\", updated_us, key)",
	"CREATE INDEX lanes_by_session ON lanes (app, \"user\", session)",

	"CREATE TABLE inbox ("
	"  app text COLLATE \"C\" NOT NULL, \"user\" text COLLATE \"C\" NOT NULL,"
	"  key text COLLATE \"C\" NOT NULL,"
	"  position bigint NOT NULL,"
	"  id text COLLATE \"C\" NOT NULL,"
	"  mode integer NOT NULL,"
	"  body json NOT NULL,"
	"  created_us bigint NOT NULL,"
	"  in_slot boolean NOT NULL DEFAULT false,"
	"  PRIMARY KEY (app, \"user\", key, position),"
	"  FOREIGN KEY (app, \"user\", key) REFERENCES lanes (app, \"user\", key)"
	"    ON DELETE CASCADE)",
	"CREATE UNIQUE INDEX inbox_slot ON inbox (app, \"user\", key) WHERE in_slot",
	NULL,
};

/* Version 3: transcripts. Events gain their hidden mark (hidden_us, 0 =
 * visible; the operation that hid them and its kind) and the operation
 * that appended them; ADD COLUMN with a constant default rewrites
 * nothing, so the events of an existing database read as visible. Every
 * read of visible events ranges over a partial index of the visible rows
 * (events_visible, and events_visible_summaries, which replaces the
 * summaries index), so hidden rows cost a window nothing; an undo finds
 * what an operation hid through events_hidden_by, which holds hidden
 * rows only. Sessions gain message_count (visible events that are not
 * summaries; counted once here for the sessions that exist) and an index
 * for the activity order.
 *
 * operations: the transcript operations of a session, listed newest
 * first by version (every operation is an append, which moves the
 * version). state_history: one row per key an append (or the initial
 * state of a session) changed, keyed (version, key) as it is listed.
 * feed_hides: the HIDE records of the feed, in the position space of the
 * events and feed_deletes, pointing at the event they hid (gone with it:
 * a deleted session leaves its DELETE record only). All three go with
 * their session (the foreign keys). */
static const char *const SQL_V3[] = {
	"ALTER TABLE events"
	"  ADD COLUMN hidden_us bigint NOT NULL DEFAULT 0,"
	"  ADD COLUMN hidden_by text COLLATE \"C\","
	"  ADD COLUMN hidden_kind integer NOT NULL DEFAULT 0,"
	"  ADD COLUMN operation text COLLATE \"C\"",
	"CREATE INDEX events_visible ON events (app, \"user\", session, seq)"
	"  WHERE hidden_us = 0",
	"CREATE INDEX events_visible_summaries ON events (app, \"user\", session, seq)"
	"  WHERE role = 'summary' AND hidden_us = 0",
	"DROP INDEX events_summaries",
	"CREATE INDEX events_hidden_by ON events (app, \"user\", session, hidden_by, seq)"
	"  WHERE hidden_us > 0",

	"ALTER TABLE sessions ADD COLUMN message_count bigint NOT NULL DEFAULT 0",
	"UPDATE sessions s SET message_count = m.n FROM"
	"  (SELECT app, \"user\", session, count(*) AS n FROM events"
	"   WHERE role <> 'summary' GROUP BY app, \"user\", session) m"
	"  WHERE s.app = m.app AND s.\"user\" = m.\"user\" AND s.id = m.session",
	"CREATE INDEX sessions_by_updated ON sessions (app, \"user\", updated_us, id)",

	"CREATE TABLE operations ("
	"  app text COLLATE \"C\" NOT NULL, \"user\" text COLLATE \"C\" NOT NULL,"
	"  session text COLLATE \"C\" NOT NULL,"
	"  id text COLLATE \"C\" NOT NULL,"
	"  kind integer NOT NULL,"
	"  created_us bigint NOT NULL,"
	"  version bigint NOT NULL,"
	"  hide_from_seq bigint NOT NULL DEFAULT 0,"
	"  first_seq bigint NOT NULL DEFAULT 0, last_seq bigint NOT NULL DEFAULT 0,"
	"  hidden_count bigint NOT NULL DEFAULT 0, unhidden_count bigint NOT NULL DEFAULT 0,"
	"  undo_of text COLLATE \"C\", undone_by text COLLATE \"C\","
	"  PRIMARY KEY (app, \"user\", session, id),"
	"  FOREIGN KEY (app, \"user\", session) REFERENCES sessions (app, \"user\", id)"
	"    ON DELETE CASCADE)",
	"CREATE INDEX operations_by_version ON operations (app, \"user\", session, version)",

	"CREATE TABLE state_history ("
	"  app text COLLATE \"C\" NOT NULL, \"user\" text COLLATE \"C\" NOT NULL,"
	"  session text COLLATE \"C\" NOT NULL,"
	"  version bigint NOT NULL,"
	"  key text COLLATE \"C\" NOT NULL,"
	"  seq bigint NOT NULL,"
	"  old_value text, new_value text,"
	"  at_us bigint NOT NULL,"
	"  operation text COLLATE \"C\","
	"  PRIMARY KEY (app, \"user\", session, version, key),"
	"  FOREIGN KEY (app, \"user\", session) REFERENCES sessions (app, \"user\", id)"
	"    ON DELETE CASCADE)",

	"CREATE TABLE feed_hides ("
	"  position bigint PRIMARY KEY,"
	"  app text COLLATE \"C\" NOT NULL, \"user\" text COLLATE \"C\" NOT NULL,"
	"  session text COLLATE \"C\" NOT NULL,"
	"  seq bigint NOT NULL,"
	"  FOREIGN KEY (app, \"user\", session, seq) REFERENCES events (app, \"user\", session, seq)"
	"    ON DELETE CASCADE)",
	"CREATE INDEX feed_hides_by_event ON feed_hides (app, \"user\", session, seq)",
	NULL,
};

/* Version 4: long-term memories. Sessions gain memory_seq (the last seq
 * memory extraction has read; ADD COLUMN with a constant default rewrites
 * nothing, so every existing session reads 0 and its events count as
 * unread) and sessions_pending, a partial index holding only the sessions
 * with unread events (memory_seq < last_seq) in the order
 * session_list_pending pages them: a session leaves it when a commit
 * moves its cursor to last_seq, so the scan never walks read sessions.
 *
 * memories: one row per (app, user, id): the host's content (topics and
 * entities JSON array text, kept byte for byte as given: the CHECKs only
 * refuse what is not an array), its version, times and the feed position
 * of its last add or update (in the position space of the events; see
 * pg_feed.c). memories_by_created is the list's order, memories_by_position
 * the feed's, memories_by_expiry (only rows that expire) the retention
 * sweep's. memory_history: every change of a memory with the snapshot it
 * left (a delete's: the row as it was), kept after the row is deleted; n
 * orders the changes of one instant. feed_memory_deletes: the
 * MEMORY_DELETE records of the feed, in the same position space. A user's
 * memories, history and delete records go with user_delete (by their
 * (app, user) key prefixes); a session's delete leaves them. */
static const char *const SQL_V4[] = {
	"ALTER TABLE sessions ADD COLUMN memory_seq bigint NOT NULL DEFAULT 0",
	"CREATE INDEX sessions_pending ON sessions (updated_us, app, \"user\", id)"
	"  WHERE memory_seq < last_seq",

	"CREATE TABLE memories ("
	"  app text COLLATE \"C\" NOT NULL, \"user\" text COLLATE \"C\" NOT NULL,"
	"  id text COLLATE \"C\" NOT NULL,"
	"  text text NOT NULL,"
	"  kind text NOT NULL CHECK (kind IN ('fact', 'preference', 'instruction', 'episode')),"
	"  topics text NOT NULL CHECK (pg_catalog.jsonb_typeof(topics::jsonb) = 'array'),"
	"  entities text NOT NULL CHECK (pg_catalog.jsonb_typeof(entities::jsonb) = 'array'),"
	"  source_session text COLLATE \"C\","
	"  source text,"
	"  created_us bigint NOT NULL, updated_us bigint NOT NULL,"
	"  expires_us bigint NOT NULL DEFAULT 0 CHECK (expires_us >= 0),"
	"  version bigint NOT NULL CHECK (version > 0),"
	"  position bigint NOT NULL,"
	"  tokens bigint NOT NULL DEFAULT 0,"
	"  PRIMARY KEY (app, \"user\", id))",
	"CREATE INDEX memories_by_created ON memories (app, \"user\", created_us, id)",
	"CREATE UNIQUE INDEX memories_by_position ON memories (position)",
	"CREATE INDEX memories_by_expiry ON memories (expires_us, app, \"user\", id)"
	"  WHERE expires_us > 0",

	"CREATE TABLE memory_history ("
	"  app text COLLATE \"C\" NOT NULL, \"user\" text COLLATE \"C\" NOT NULL,"
	"  id text COLLATE \"C\" NOT NULL,"
	"  n bigint GENERATED ALWAYS AS IDENTITY,"
	"  op integer NOT NULL,"
	"  text text NOT NULL, kind text NOT NULL, topics text NOT NULL, entities text NOT NULL,"
	"  source_session text COLLATE \"C\", source text,"
	"  created_us bigint NOT NULL, updated_us bigint NOT NULL,"
	"  expires_us bigint NOT NULL, version bigint NOT NULL, tokens bigint NOT NULL,"
	"  actor text NOT NULL, reason text,"
	"  at_us bigint NOT NULL,"
	"  PRIMARY KEY (app, \"user\", id, n))",

	"CREATE TABLE feed_memory_deletes ("
	"  position bigint PRIMARY KEY,"
	"  app text COLLATE \"C\" NOT NULL, \"user\" text COLLATE \"C\" NOT NULL,"
	"  id text COLLATE \"C\" NOT NULL)",
	"CREATE INDEX feed_memory_deletes_by_user ON feed_memory_deletes (app, \"user\")",
	NULL,
};

/* Version 5: run checkpoints and A2A tasks (ABI 1.5). A checkpoint
 * belongs to its session (deleting the session cascades to it, its
 * writes and its head); its writes belong to it. Ids and namespaces are
 * COLLATE "C" (newest = greatest as bytes), payloads bytea, metadata and
 * task JSON text as given (jsonb would reorder it and refuse \u0000).
 * checkpoint_heads holds each session's newest root ("" namespace)
 * checkpoint with its run state and expiry, moved in the transaction of
 * every put, write, delete and expiry, for the resumable listing.
 * checkpoints_by_user serves a user's list across sessions. Tasks are an
 * app's, not a session's: session and user deletes remove them by their
 * (user, context_id). */
static const char *const SQL_V5[] = {
	"CREATE TABLE checkpoints ("
	"  app text COLLATE \"C\" NOT NULL, \"user\" text COLLATE \"C\" NOT NULL,"
	"  session text COLLATE \"C\" NOT NULL, ns text COLLATE \"C\" NOT NULL,"
	"  id text COLLATE \"C\" NOT NULL,"
	"  parent_id text COLLATE \"C\","
	"  type text NOT NULL, payload bytea NOT NULL, metadata text NOT NULL,"
	"  run_state integer NOT NULL CHECK (run_state BETWEEN 1 AND 3),"
	"  created_us bigint NOT NULL, updated_us bigint NOT NULL,"
	"  expires_us bigint NOT NULL DEFAULT 0 CHECK (expires_us >= 0),"
	"  PRIMARY KEY (app, \"user\", session, ns, id),"
	"  FOREIGN KEY (app, \"user\", session) REFERENCES sessions (app, \"user\", id)"
	"    ON DELETE CASCADE)",
	"CREATE INDEX checkpoints_by_user ON checkpoints (app, \"user\", id, session, ns)",
	"CREATE INDEX checkpoints_by_expiry ON checkpoints"
	"  (expires_us, app, \"user\", session, ns, id) WHERE expires_us > 0",

	"CREATE TABLE checkpoint_writes ("
	"  app text COLLATE \"C\" NOT NULL, \"user\" text COLLATE \"C\" NOT NULL,"
	"  session text COLLATE \"C\" NOT NULL, ns text COLLATE \"C\" NOT NULL,"
	"  checkpoint_id text COLLATE \"C\" NOT NULL, task_id text COLLATE \"C\" NOT NULL,"
	"  idx bigint NOT NULL,"
	"  channel text NOT NULL, type text NOT NULL, value bytea NOT NULL,"
	"  PRIMARY KEY (app, \"user\", session, ns, checkpoint_id, task_id, idx),"
	"  FOREIGN KEY (app, \"user\", session, ns, checkpoint_id)"
	"    REFERENCES checkpoints (app, \"user\", session, ns, id) ON DELETE CASCADE)",

	"CREATE TABLE checkpoint_heads ("
	"  app text COLLATE \"C\" NOT NULL, \"user\" text COLLATE \"C\" NOT NULL,"
	"  session text COLLATE \"C\" NOT NULL,"
	"  id text COLLATE \"C\" NOT NULL,"
	"  run_state integer NOT NULL,"
	"  expires_us bigint NOT NULL DEFAULT 0,"
	"  PRIMARY KEY (app, \"user\", session),"
	"  FOREIGN KEY (app, \"user\", session) REFERENCES sessions (app, \"user\", id)"
	"    ON DELETE CASCADE)",

	"CREATE TABLE tasks ("
	"  app text COLLATE \"C\" NOT NULL, id text COLLATE \"C\" NOT NULL,"
	"  context_id text COLLATE \"C\" NOT NULL, \"user\" text COLLATE \"C\","
	"  state text NOT NULL, task text NOT NULL,"
	"  created_us bigint NOT NULL, updated_us bigint NOT NULL,"
	"  version bigint NOT NULL CHECK (version > 0),"
	"  PRIMARY KEY (app, id))",
	"CREATE INDEX tasks_by_updated ON tasks (app, updated_us, id)",
	"CREATE INDEX tasks_by_context ON tasks (app, context_id, updated_us, id)",
	"CREATE INDEX tasks_by_user ON tasks (app, \"user\", context_id)",
	NULL,
};

/* Version 6: a checkpoint write's task path (ABI 1.6), "" for none.
 * COLLATE "C" so it orders as bytes, which for UTF-8 is code point
 * order. ADD COLUMN with a constant default rewrites nothing: the writes
 * of an existing database read back with the path "". It is not in the
 * key (a write is still (checkpoint, task_id, idx)) nor in an index: a
 * checkpoint's writes are read over the primary key's prefix and sorted
 * by (task_path, task_id, idx), a sort of the few writes of one
 * checkpoint. */
static const char *const SQL_V6[] = {
	"ALTER TABLE checkpoint_writes"
	"  ADD COLUMN task_path text COLLATE \"C\" NOT NULL DEFAULT ''",
	NULL,
};

/* Ordered; each step's version is one more than the previous one's. */
static const pg_migration migrations[] = {
	{ 1, "initial schema", SQL_V1 },
	{ 2, "lanes, session lifecycle and usage", SQL_V2 },
	{ 3, "transcripts: hidden events, operations, state history", SQL_V3 },
	{ 4, "memories, their history and the sessions' memory cursor", SQL_V4 },
	{ 5, "run checkpoints, their writes and heads, and tasks", SQL_V5 },
	{ 6, "the task path of checkpoint writes", SQL_V6 },
};
#define PG_N_MIGRATIONS (sizeof(migrations) / sizeof(migrations[0]))
#define PG_SCHEMA_LATEST (migrations[PG_N_MIGRATIONS - 1].version)

/* Take the per-schema migration lock, create the schema if it is missing
 * (its name travels as a parameter: format('%I') quotes it server-side),
 * then say whether memd_meta and a table named sessions exist. */
static const char SQL_LOCK[] =
	"SELECT pg_catalog.pg_advisory_xact_lock(" PG_LOCK_CLASS_TEXT ","
	" pg_catalog.hashtext($1::text))";
static const char SQL_REMEMBER_SCHEMA[] =
	"SELECT pg_catalog.set_config('memd.schema', $1::text, true)";
static const char SQL_CREATE_SCHEMA[] =
	"DO $memd$ BEGIN"
	"  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace"
	"                 WHERE nspname = current_setting('memd.schema')) THEN"
	"    EXECUTE format('CREATE SCHEMA %I', current_setting('memd.schema'));"
	"  END IF;"
	" END $memd$";
static const char SQL_PROBE[] =
	"SELECT pg_catalog.to_regclass('memd_meta') IS NOT NULL,"
	" pg_catalog.to_regclass('sessions') IS NOT NULL,"
	" pg_catalog.current_schema()";
static const char SQL_META_VERSION[] = "SELECT version FROM memd_meta WHERE id = 1";
static const char SQL_META_CREATE[] =
	"CREATE TABLE memd_meta (id integer PRIMARY KEY CHECK (id = 1), version integer NOT NULL)";
static const char SQL_META_SET[] =
	"INSERT INTO memd_meta (id, version) VALUES (1, $1::integer)"
	" ON CONFLICT (id) DO UPDATE SET version = excluded.version";

/* Run the queued round; on failure roll back. */
static int32_t run_or_rollback(pg_conn *c, const char *what, memd_error *err)
{
	int32_t r = pg_run(c, what, err);

	pg_reset(c);
	if (r < 0 && !c->broken) {
		(void)pg_send_text(c, "ROLLBACK", 0, NULL, NULL);
		(void)pg_run(c, "rollback", NULL);
		pg_reset(c);
	}
	return r;
}

int32_t pg_schema_migrate(pg_conn *c, const memd_host *host, const char *schema,
			  int32_t *ret_version, memd_error *err)
{
	const char *vals[1] = { schema };
	int has_meta, has_sessions;
	int64_t version = 0;
	char vbuf[PG_INT_BUF];
	int32_t r;

	pg_reset(c);
	r = pg_send_text(c, "BEGIN", 0, NULL, err);
	if (r == 0)
		r = pg_send_text(c, SQL_LOCK, 1, vals, err);
	if (r == 0)
		r = pg_send_text(c, SQL_REMEMBER_SCHEMA, 1, vals, err);
	if (r == 0)
		r = pg_send_text(c, SQL_CREATE_SCHEMA, 0, NULL, err);
	if (r == 0)
		r = pg_send_text(c, SQL_PROBE, 0, NULL, err);
	if (r == 0)
		r = pg_run(c, "schema check", err);
	if (r < 0) {
		pg_reset(c);
		return r;
	}
	{
		PGresult *res = pg_res(c, 4);
		const char *cur = PQgetisnull(res, 0, 2) ? NULL : PQgetvalue(res, 0, 2);
		has_meta = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
		has_sessions = strcmp(PQgetvalue(res, 0, 1), "t") == 0;
		if (!cur || strcmp(cur, schema) != 0)
			r = memd_error_set(err, MEMD_EIO, 0,
					   "postgres: cannot use schema '%.64s' (no CREATE privilege "
					   "on the database?)", schema);
	}
	pg_reset(c);
	if (r == 0 && !has_meta && has_sessions)
		r = memd_error_set(err, MEMD_EIO, 0,
				   "postgres: schema '%.64s' already holds a table 'sessions' that "
				   "is not memd's; use another schema", schema);
	if (r == 0 && has_meta) {
		r = pg_send_text(c, SQL_META_VERSION, 0, NULL, err);
		if (r == 0)
			r = pg_run(c, "read schema version", err);
		if (r == 0 && PQntuples(pg_res(c, 0)) == 1)
			version = pg_get_i64(pg_res(c, 0), 0, 0);
		pg_reset(c);
	} else if (r == 0) {
		r = pg_send_text(c, SQL_META_CREATE, 0, NULL, err);
	}
	if (r == 0 && version > PG_SCHEMA_LATEST)
		r = memd_error_set(err, MEMD_EIO, 0,
				   "postgres: schema '%.64s' has version %lld, newer than the %d this "
				   "plugin knows; use a newer memd",
				   schema, (long long)version, (int)PG_SCHEMA_LATEST);
	for (size_t i = 0; r == 0 && i < PG_N_MIGRATIONS; i++) {
		const pg_migration *m = &migrations[i];
		if (m->version <= version)
			continue;
		for (size_t k = 0; r == 0 && m->sql[k]; k++)
			r = pg_send_text(c, m->sql[k], 0, NULL, err);
		if (r == 0) {
			const char *v[1] = { pg_i64(vbuf, m->version) };
			r = pg_send_text(c, SQL_META_SET, 1, v, err);
		}
		if (r == 0)
			r = pg_run(c, m->what, err);
		pg_reset(c);
		if (r == 0) {
			version = m->version;
			if (host && host->log)
				host->log(host, MEMD_LOG_INFO,
					  "schema '%s' migrated to version %d (%s)", schema,
					  (int)m->version, m->what);
		}
	}
	if (r == 0)
		r = pg_send_text(c, "COMMIT", 0, NULL, err);
	if (r == 0)
		r = run_or_rollback(c, "commit migrations", err);
	else if (!c->broken) {
		pg_reset(c);
		(void)pg_send_text(c, "ROLLBACK", 0, NULL, NULL);
		(void)pg_run(c, "rollback", NULL);
		pg_reset(c);
	}
	if (r < 0)
		return r;
	*ret_version = (int32_t)version;
	return 0;
}
