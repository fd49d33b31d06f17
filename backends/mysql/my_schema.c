/* SPDX-License-Identifier: MIT */
#include "my_schema.h"

#include <stdio.h>

#include "my_checkpoints.h"

/* How long a starting process waits for another one's migration. */
#define MY_SCHEMA_LOCK_WAIT_S 120

/* Every table: InnoDB (row locks, MVCC), DYNAMIC rows (3072-byte index
 * keys), utf8mb4 with a binary collation (text compares byte for byte).
 *
 * Keys. app, user, session and event ids, artifact and cursor names are up
 * to MEMD_ID_MAX = 255 *bytes* of UTF-8: VARBINARY(255), compared byte for
 * byte ('A' and 'a', NFC and NFD, 'x ' and 'x' are different ids) and
 * 255 bytes whatever the characters, so (app, user, session) takes 765
 * bytes of an index key and the widest key, (app, user, session, state
 * key) with state keys up to MY_STATE_KEY_MAX = 1024 bytes, takes 1789:
 * under InnoDB's 3072. Free text (titles, content, metadata, text) is
 * LONGTEXT, artifact bytes LONGBLOB. Times are BIGINT microseconds.
 *
 * events.position is the store-wide change-feed position, assigned from
 * the one row of memd_feed_counter (see my_feed.h for why that orders the
 * feed by commit); memd_feed_deletes holds the DELETE records (and since
 * version 2 the FINALIZE records, kind 4), in the same position space.
 *
 * Version 2 adds lanes: the lifecycle and usage columns of a session (with
 * defaults, so the sessions of version 1 read as open, made by no lane,
 * with no usage), memd_lanes (one row per (app, user, lane_key)) and
 * memd_inbox (a lane's items by a position the lane row hands out from
 * inbox_last). Ids and keys stay VARBINARY(255); reasons and origins are
 * free text. The widest new index key, (app, user, lane_key, created_us,
 * id), takes 1283 bytes.
 *
 * Version 3 adds transcripts. An event's hidden mark (hidden_us, 0 =
 * visible; hidden_by, hidden_kind) and the operation that appended it;
 * the summaries and time indexes gain hidden_us before their own columns
 * and memd_events_visible is (app, user, session, hidden_us, seq), so a
 * window of visible events is one range (hidden_us = 0, a seq bound) read
 * in order up to its limit, and hiding from a seq on walks only the rows
 * from there. Sessions gain message_count (counted once for the sessions
 * already there) and an index by (updated_us, id) for the activity order.
 * memd_operations keeps the transcript operations (unique per session by
 * id and by the version they made), memd_state_history one row per state
 * key an append changed (names with their prefix, up to
 * MY_STATE_KEY_MAX + 5 bytes: the widest key, by seq, takes 1810 bytes),
 * and memd_feed_marks the HIDE records and the EVENT records of events an
 * undo showed again, in the feed's position space, naming the event by
 * (app, user, session, seq).
 *
 * Version 4 adds long-term memories (my_memories.h). Sessions gain
 * memory_seq (0: nothing read yet, so every session with events is
 * pending) and memory_pending, a stored generated column (memory_seq <
 * last_seq: MariaDB has no partial indexes) leading the index
 * memd_sessions_pending (memory_pending, updated_us, app, user, id), so
 * session_list_pending reads one range in order. memd_memories has one
 * row per (app, user, id), indexed by (app, user, created_us, id) for
 * listing, by position for the feed and by (expires_us, ...) for expiry;
 * memd_memory_history one row per change, numbered by hseq (the order of
 * writes, which breaks ties of (at_us, version, op)); memd_feed_deletes
 * gains memory_id for the MEMORY_DELETE records.
 *
 * Version 5 adds run checkpoints and A2A tasks (my_checkpoints.h,
 * my_tasks.h). memd_checkpoints has one row per (app, user, session, ns,
 * id): the namespace is VARBINARY(255) NOT NULL ("" is the root graph,
 * never NULL) and ids order as bytes, so the key takes 1275 bytes; the
 * payload is a LONGBLOB. It is indexed by (app, user, session, id, ns)
 * for one session's list across namespaces, by (app, user, id, session,
 * ns) for a user's list (both in list order) and by (expires_us, ...) for
 * expiry. memd_checkpoint_writes holds the pending writes under their
 * checkpoint's key and (task_id, idx): 1538 bytes. memd_checkpoint_heads
 * names each session's greatest root checkpoint id (what the resumable
 * listing reads; run state and expiry are the checkpoint's own).
 * memd_tasks has one row per (app, id), indexed by (app, updated_us, id)
 * for listing, (app, context_id, updated_us, id) for a context's tasks and
 * (app, user, context_id) for the session and user deletes.
 *
 * Version 6 gives each checkpoint write the path of the task that made it
 * (ABI 1.6): task_path VARBINARY(1024) (MY_TASK_PATH_MAX), "" for none,
 * so the writes of version 5 read back with the path "". It is not in the
 * key, nor in an index: a checkpoint's writes are read over the primary
 * key's prefix and sorted by (task_path, task_id, idx), as bytes, a sort
 * of the few writes of one checkpoint. */
#define MY_TABLE_OPTIONS \
	" ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin ROW_FORMAT=DYNAMIC"

static const char *const SQL_V1[] = {
	"CREATE TABLE IF NOT EXISTS memd_sessions ("
	"  app VARBINARY(255) NOT NULL, user VARBINARY(255) NOT NULL,"
	"  id VARBINARY(255) NOT NULL,"
	"  title LONGTEXT NULL, metadata LONGTEXT NOT NULL,"
	"  flags INT UNSIGNED NOT NULL DEFAULT 0,"
	"  created_us BIGINT NOT NULL, updated_us BIGINT NOT NULL,"
	"  version BIGINT NOT NULL DEFAULT 0,"
	"  last_seq BIGINT NOT NULL DEFAULT 0,"
	"  summary_seq BIGINT NOT NULL DEFAULT 0,"
	"  PRIMARY KEY (app, user, id),"
	"  KEY memd_sessions_by_created (app, user, created_us, id)"
	")" MY_TABLE_OPTIONS,

	"CREATE TABLE IF NOT EXISTS memd_events ("
	"  position BIGINT NOT NULL,"
	"  app VARBINARY(255) NOT NULL, user VARBINARY(255) NOT NULL,"
	"  session VARBINARY(255) NOT NULL,"
	"  seq BIGINT NOT NULL, id VARBINARY(255) NOT NULL,"
	"  invocation_id LONGTEXT NULL, author LONGTEXT NULL, role LONGTEXT NOT NULL,"
	"  branch LONGTEXT NULL, content LONGTEXT NULL, actions LONGTEXT NULL,"
	"  metadata LONGTEXT NULL, timestamp_us BIGINT NOT NULL, text LONGTEXT NULL,"
	"  tokens BIGINT NOT NULL DEFAULT 0, covers_seq BIGINT NOT NULL DEFAULT 0,"
	"  is_summary TINYINT NOT NULL DEFAULT 0,"
	"  PRIMARY KEY (position),"
	"  UNIQUE KEY memd_events_by_seq (app, user, session, seq),"
	"  UNIQUE KEY memd_events_by_id (app, user, session, id),"
	"  KEY memd_events_summaries (app, user, session, is_summary, seq),"
	"  KEY memd_events_by_time (app, user, session, timestamp_us, seq),"
	"  CONSTRAINT memd_events_seq CHECK (seq > 0)"
	")" MY_TABLE_OPTIONS,

	"CREATE TABLE IF NOT EXISTS memd_state_app ("
	"  app VARBINARY(255) NOT NULL, name VARBINARY(1024) NOT NULL,"
	"  value LONGTEXT NOT NULL,"
	"  PRIMARY KEY (app, name)"
	")" MY_TABLE_OPTIONS,

	"CREATE TABLE IF NOT EXISTS memd_state_user ("
	"  app VARBINARY(255) NOT NULL, user VARBINARY(255) NOT NULL,"
	"  name VARBINARY(1024) NOT NULL, value LONGTEXT NOT NULL,"
	"  PRIMARY KEY (app, user, name)"
	")" MY_TABLE_OPTIONS,

	"CREATE TABLE IF NOT EXISTS memd_state_session ("
	"  app VARBINARY(255) NOT NULL, user VARBINARY(255) NOT NULL,"
	"  session VARBINARY(255) NOT NULL, name VARBINARY(1024) NOT NULL,"
	"  value LONGTEXT NOT NULL,"
	"  PRIMARY KEY (app, user, session, name)"
	")" MY_TABLE_OPTIONS,

	"CREATE TABLE IF NOT EXISTS memd_artifacts ("
	"  app VARBINARY(255) NOT NULL, user VARBINARY(255) NOT NULL,"
	"  session VARBINARY(255) NOT NULL, name VARBINARY(255) NOT NULL,"
	"  version BIGINT NOT NULL, mime_type LONGTEXT NOT NULL, data LONGBLOB NOT NULL,"
	"  size BIGINT NOT NULL, created_us BIGINT NOT NULL,"
	"  PRIMARY KEY (app, user, session, name, version),"
	"  CONSTRAINT memd_artifacts_version CHECK (version > 0)"
	")" MY_TABLE_OPTIONS,

	"CREATE TABLE IF NOT EXISTS memd_feed_counter ("
	"  id TINYINT NOT NULL, last BIGINT NOT NULL,"
	"  PRIMARY KEY (id),"
	"  CONSTRAINT memd_feed_counter_one CHECK (id = 1)"
	")" MY_TABLE_OPTIONS,
	"INSERT IGNORE INTO memd_feed_counter (id, last) VALUES (1, 0)",

	"CREATE TABLE IF NOT EXISTS memd_feed_deletes ("
	"  position BIGINT NOT NULL, kind INT NOT NULL,"
	"  app VARBINARY(255) NOT NULL, user VARBINARY(255) NOT NULL,"
	"  session VARBINARY(255) NULL,"
	"  PRIMARY KEY (position)"
	")" MY_TABLE_OPTIONS,

	"CREATE TABLE IF NOT EXISTS memd_cursors ("
	"  name VARBINARY(255) NOT NULL, position BIGINT NOT NULL,"
	"  PRIMARY KEY (name),"
	"  CONSTRAINT memd_cursors_position CHECK (position >= 0)"
	")" MY_TABLE_OPTIONS,
	NULL,
};

/* Every step is idempotent (IF NOT EXISTS), as migrations must be. */
static const char *const SQL_V2[] = {
	"ALTER TABLE memd_sessions"
	"  ADD COLUMN IF NOT EXISTS lane_key VARBINARY(255) NULL,"
	"  ADD COLUMN IF NOT EXISTS origin LONGTEXT NULL,"
	"  ADD COLUMN IF NOT EXISTS origin_platform VARBINARY(255) NULL,"
	"  ADD COLUMN IF NOT EXISTS previous_session VARBINARY(255) NULL,"
	"  ADD COLUMN IF NOT EXISTS start_reason LONGTEXT NULL,"
	"  ADD COLUMN IF NOT EXISTS end_reason LONGTEXT NULL,"
	"  ADD COLUMN IF NOT EXISTS ended_us BIGINT NOT NULL DEFAULT 0,"
	"  ADD COLUMN IF NOT EXISTS input_tokens BIGINT NOT NULL DEFAULT 0,"
	"  ADD COLUMN IF NOT EXISTS output_tokens BIGINT NOT NULL DEFAULT 0,"
	"  ADD COLUMN IF NOT EXISTS cache_read_tokens BIGINT NOT NULL DEFAULT 0,"
	"  ADD COLUMN IF NOT EXISTS cache_write_tokens BIGINT NOT NULL DEFAULT 0,"
	"  ADD COLUMN IF NOT EXISTS cost_micro_usd BIGINT NOT NULL DEFAULT 0,"
	"  ADD COLUMN IF NOT EXISTS last_prompt_tokens BIGINT NOT NULL DEFAULT 0,"
	"  ADD KEY IF NOT EXISTS memd_sessions_by_platform"
	"   (app, user, origin_platform, created_us, id),"
	"  ADD KEY IF NOT EXISTS memd_sessions_by_lane (app, user, lane_key, created_us, id),"
	"  ADD KEY IF NOT EXISTS memd_sessions_by_ended (ended_us, app, user, id)",

	"CREATE TABLE IF NOT EXISTS memd_lanes ("
	"  app VARBINARY(255) NOT NULL, user VARBINARY(255) NOT NULL,"
	"  lane_key VARBINARY(255) NOT NULL,"
	"  flags INT UNSIGNED NOT NULL DEFAULT 0,"
	"  session VARBINARY(255) NOT NULL, origin LONGTEXT NULL,"
	"  created_us BIGINT NOT NULL, updated_us BIGINT NOT NULL,"
	"  version BIGINT NOT NULL,"
	"  resume_reason LONGTEXT NULL, resume_marked_us BIGINT NOT NULL DEFAULT 0,"
	"  reset_reason LONGTEXT NULL, previous_session VARBINARY(255) NULL,"
	"  reset_us BIGINT NOT NULL DEFAULT 0,"
	"  turn_id VARBINARY(255) NULL, turn_started_us BIGINT NOT NULL DEFAULT 0,"
	"  turn_lease_until_us BIGINT NOT NULL DEFAULT 0,"
	"  interruptions INT UNSIGNED NOT NULL DEFAULT 0,"
	"  finalize_failures INT UNSIGNED NOT NULL DEFAULT 0,"
	"  finalize_claim_until_us BIGINT NOT NULL DEFAULT 0,"
	"  input_tokens BIGINT NOT NULL DEFAULT 0, output_tokens BIGINT NOT NULL DEFAULT 0,"
	"  cache_read_tokens BIGINT NOT NULL DEFAULT 0,"
	"  cache_write_tokens BIGINT NOT NULL DEFAULT 0,"
	"  cost_micro_usd BIGINT NOT NULL DEFAULT 0,"
	"  last_prompt_tokens BIGINT NOT NULL DEFAULT 0,"
	"  inbox_last BIGINT NOT NULL DEFAULT 0,"
	"  PRIMARY KEY (app, user, lane_key),"
	"  KEY memd_lanes_by_updated (updated_us, app, user, lane_key),"
	"  KEY memd_lanes_app_by_updated (app, updated_us, user, lane_key),"
	"  KEY memd_lanes_user_by_updated (app, user, updated_us, lane_key),"
	"  KEY memd_lanes_by_session (app, user, session),"
	"  CONSTRAINT memd_lanes_version CHECK (version > 0)"
	")" MY_TABLE_OPTIONS,

	"CREATE TABLE IF NOT EXISTS memd_inbox ("
	"  app VARBINARY(255) NOT NULL, user VARBINARY(255) NOT NULL,"
	"  lane_key VARBINARY(255) NOT NULL, position BIGINT NOT NULL,"
	"  id VARBINARY(255) NOT NULL, mode INT UNSIGNED NOT NULL,"
	"  in_slot TINYINT NOT NULL DEFAULT 0, body LONGTEXT NOT NULL,"
	"  created_us BIGINT NOT NULL,"
	"  PRIMARY KEY (app, user, lane_key, position)"
	")" MY_TABLE_OPTIONS,
	NULL,
};

static const char *const SQL_V3[] = {
	"ALTER TABLE memd_events"
	"  ADD COLUMN IF NOT EXISTS hidden_us BIGINT NOT NULL DEFAULT 0,"
	"  ADD COLUMN IF NOT EXISTS hidden_by VARBINARY(255) NULL,"
	"  ADD COLUMN IF NOT EXISTS hidden_kind INT UNSIGNED NOT NULL DEFAULT 0,"
	"  ADD COLUMN IF NOT EXISTS operation VARBINARY(255) NULL,"
	"  ADD KEY IF NOT EXISTS memd_events_visible (app, user, session, hidden_us, seq),"
	"  ADD KEY IF NOT EXISTS memd_events_visible_summaries"
	"   (app, user, session, hidden_us, is_summary, seq),"
	"  ADD KEY IF NOT EXISTS memd_events_visible_by_time"
	"   (app, user, session, hidden_us, timestamp_us, seq),"
	"  DROP KEY IF EXISTS memd_events_summaries,"
	"  DROP KEY IF EXISTS memd_events_by_time",

	"ALTER TABLE memd_sessions"
	"  ADD COLUMN IF NOT EXISTS message_count BIGINT NOT NULL DEFAULT 0,"
	"  ADD KEY IF NOT EXISTS memd_sessions_by_updated (app, user, updated_us, id)",
	/* Recounted whole: right however often the step runs. */
	"UPDATE memd_sessions s SET message_count = (SELECT COUNT(*) FROM memd_events e"
	" WHERE e.app = s.app AND e.user = s.user AND e.session = s.id AND e.hidden_us = 0"
	" AND e.is_summary = 0)",

	"CREATE TABLE IF NOT EXISTS memd_operations ("
	"  app VARBINARY(255) NOT NULL, user VARBINARY(255) NOT NULL,"
	"  session VARBINARY(255) NOT NULL, id VARBINARY(255) NOT NULL,"
	"  kind INT UNSIGNED NOT NULL, created_us BIGINT NOT NULL, version BIGINT NOT NULL,"
	"  hide_from_seq BIGINT NOT NULL DEFAULT 0,"
	"  first_seq BIGINT NOT NULL DEFAULT 0, last_seq BIGINT NOT NULL DEFAULT 0,"
	"  hidden_count BIGINT NOT NULL DEFAULT 0, unhidden_count BIGINT NOT NULL DEFAULT 0,"
	"  undo_of VARBINARY(255) NULL, undone_by VARBINARY(255) NULL,"
	"  PRIMARY KEY (app, user, session, id),"
	"  UNIQUE KEY memd_operations_by_version (app, user, session, version)"
	")" MY_TABLE_OPTIONS,

	"CREATE TABLE IF NOT EXISTS memd_state_history ("
	"  app VARBINARY(255) NOT NULL, user VARBINARY(255) NOT NULL,"
	"  session VARBINARY(255) NOT NULL, version BIGINT NOT NULL,"
	"  name VARBINARY(1029) NOT NULL, seq BIGINT NOT NULL,"
	"  old_value LONGTEXT NULL, new_value LONGTEXT NULL, at_us BIGINT NOT NULL,"
	"  operation VARBINARY(255) NULL,"
	"  PRIMARY KEY (app, user, session, version, name),"
	"  KEY memd_state_history_by_seq (app, user, session, seq, version, name)"
	")" MY_TABLE_OPTIONS,

	"CREATE TABLE IF NOT EXISTS memd_feed_marks ("
	"  position BIGINT NOT NULL, kind INT NOT NULL,"
	"  app VARBINARY(255) NOT NULL, user VARBINARY(255) NOT NULL,"
	"  session VARBINARY(255) NOT NULL, seq BIGINT NOT NULL,"
	"  PRIMARY KEY (position),"
	"  KEY memd_feed_marks_by_session (app, user, session, seq)"
	")" MY_TABLE_OPTIONS,
	NULL,
};

static const char *const SQL_V4[] = {
	"ALTER TABLE memd_sessions"
	"  ADD COLUMN IF NOT EXISTS memory_seq BIGINT NOT NULL DEFAULT 0",
	"ALTER TABLE memd_sessions"
	"  ADD COLUMN IF NOT EXISTS memory_pending TINYINT AS (memory_seq < last_seq) PERSISTENT,"
	"  ADD KEY IF NOT EXISTS memd_sessions_pending (memory_pending, updated_us, app, user, id)",

	"ALTER TABLE memd_feed_deletes ADD COLUMN IF NOT EXISTS memory_id VARBINARY(255) NULL",

	"CREATE TABLE IF NOT EXISTS memd_memories ("
	"  app VARBINARY(255) NOT NULL, user VARBINARY(255) NOT NULL,"
	"  id VARBINARY(255) NOT NULL,"
	"  text LONGTEXT NOT NULL, kind VARBINARY(32) NOT NULL,"
	"  topics LONGTEXT NOT NULL, entities LONGTEXT NOT NULL,"
	"  topics_match LONGTEXT NOT NULL, entities_match LONGTEXT NOT NULL,"
	"  source_session VARBINARY(255) NULL, source LONGTEXT NULL,"
	"  created_us BIGINT NOT NULL, updated_us BIGINT NOT NULL,"
	"  expires_us BIGINT NOT NULL DEFAULT 0, version BIGINT NOT NULL,"
	"  position BIGINT NOT NULL DEFAULT 0, tokens BIGINT NOT NULL DEFAULT 0,"
	"  PRIMARY KEY (app, user, id),"
	"  KEY memd_memories_by_created (app, user, created_us, id),"
	"  KEY memd_memories_by_position (position),"
	"  KEY memd_memories_by_expiry (expires_us, app, user, id),"
	"  CONSTRAINT memd_memories_version CHECK (version > 0)"
	")" MY_TABLE_OPTIONS,

	"CREATE TABLE IF NOT EXISTS memd_memory_history ("
	"  hseq BIGINT NOT NULL AUTO_INCREMENT,"
	"  app VARBINARY(255) NOT NULL, user VARBINARY(255) NOT NULL,"
	"  id VARBINARY(255) NOT NULL, version BIGINT NOT NULL, op INT UNSIGNED NOT NULL,"
	"  text LONGTEXT NOT NULL, kind VARBINARY(32) NOT NULL,"
	"  topics LONGTEXT NOT NULL, entities LONGTEXT NOT NULL,"
	"  source_session VARBINARY(255) NULL, source LONGTEXT NULL,"
	"  created_us BIGINT NOT NULL, updated_us BIGINT NOT NULL,"
	"  expires_us BIGINT NOT NULL, tokens BIGINT NOT NULL,"
	"  actor LONGTEXT NULL, reason LONGTEXT NULL, at_us BIGINT NOT NULL,"
	"  PRIMARY KEY (hseq),"
	"  KEY memd_memory_history_by_id (app, user, id, at_us, version, op, hseq)"
	")" MY_TABLE_OPTIONS,
	NULL,
};

static const char *const SQL_V5[] = {
	"CREATE TABLE IF NOT EXISTS memd_checkpoints ("
	"  app VARBINARY(255) NOT NULL, user VARBINARY(255) NOT NULL,"
	"  session VARBINARY(255) NOT NULL, ns VARBINARY(255) NOT NULL,"
	"  id VARBINARY(255) NOT NULL, parent_id VARBINARY(255) NULL,"
	"  type LONGTEXT NOT NULL, payload LONGBLOB NOT NULL, metadata LONGTEXT NOT NULL,"
	"  run_state INT UNSIGNED NOT NULL,"
	"  created_us BIGINT NOT NULL, updated_us BIGINT NOT NULL,"
	"  expires_us BIGINT NOT NULL DEFAULT 0,"
	"  PRIMARY KEY (app, user, session, ns, id),"
	"  KEY memd_checkpoints_session_by_id (app, user, session, id, ns),"
	"  KEY memd_checkpoints_by_id (app, user, id, session, ns),"
	"  KEY memd_checkpoints_by_expiry (expires_us, app, user, session, ns, id)"
	")" MY_TABLE_OPTIONS,

	"CREATE TABLE IF NOT EXISTS memd_checkpoint_writes ("
	"  app VARBINARY(255) NOT NULL, user VARBINARY(255) NOT NULL,"
	"  session VARBINARY(255) NOT NULL, ns VARBINARY(255) NOT NULL,"
	"  checkpoint_id VARBINARY(255) NOT NULL, task_id VARBINARY(255) NOT NULL,"
	"  idx BIGINT NOT NULL, channel LONGTEXT NOT NULL, type LONGTEXT NOT NULL,"
	"  value LONGBLOB NOT NULL,"
	"  PRIMARY KEY (app, user, session, ns, checkpoint_id, task_id, idx)"
	")" MY_TABLE_OPTIONS,

	"CREATE TABLE IF NOT EXISTS memd_checkpoint_heads ("
	"  app VARBINARY(255) NOT NULL, user VARBINARY(255) NOT NULL,"
	"  session VARBINARY(255) NOT NULL, id VARBINARY(255) NOT NULL,"
	"  PRIMARY KEY (app, user, session)"
	")" MY_TABLE_OPTIONS,

	"CREATE TABLE IF NOT EXISTS memd_tasks ("
	"  app VARBINARY(255) NOT NULL, id VARBINARY(255) NOT NULL,"
	"  context_id VARBINARY(255) NOT NULL, user VARBINARY(255) NULL,"
	"  state VARBINARY(255) NOT NULL, task LONGTEXT NOT NULL,"
	"  created_us BIGINT NOT NULL, updated_us BIGINT NOT NULL, version BIGINT NOT NULL,"
	"  PRIMARY KEY (app, id),"
	"  KEY memd_tasks_by_updated (app, updated_us, id),"
	"  KEY memd_tasks_by_context (app, context_id, updated_us, id),"
	"  KEY memd_tasks_by_user (app, user, context_id),"
	"  CONSTRAINT memd_tasks_version CHECK (version > 0)"
	")" MY_TABLE_OPTIONS,
	NULL,
};

_Static_assert(MY_TASK_PATH_MAX == 1024, "SQL_V6's task_path is VARBINARY(MY_TASK_PATH_MAX)");
static const char *const SQL_V6[] = {
	"ALTER TABLE memd_checkpoint_writes"
	"  ADD COLUMN IF NOT EXISTS task_path VARBINARY(1024) NOT NULL DEFAULT ''",
	NULL,
};

/* Every table with every column the plugin uses, read once after the
 * migrations (no rows), so a table of the same name that is not memd's is
 * refused at start, not at the first call. */
static const char *const SQL_PROBES[] = {
	"SELECT app, user, id, title, metadata, flags, created_us, updated_us, version,"
	" last_seq, summary_seq, lane_key, origin, origin_platform, previous_session,"
	" start_reason, end_reason, ended_us, input_tokens, output_tokens, cache_read_tokens,"
	" cache_write_tokens, cost_micro_usd, last_prompt_tokens, message_count, memory_seq,"
	" memory_pending FROM memd_sessions WHERE 1 = 0",
	"SELECT position, app, user, session, seq, id, invocation_id, author, role, branch,"
	" content, actions, metadata, timestamp_us, text, tokens, covers_seq, is_summary,"
	" hidden_us, hidden_by, hidden_kind, operation FROM memd_events WHERE 1 = 0",
	"SELECT app, user, session, id, kind, created_us, version, hide_from_seq, first_seq,"
	" last_seq, hidden_count, unhidden_count, undo_of, undone_by"
	" FROM memd_operations WHERE 1 = 0",
	"SELECT app, user, session, version, name, seq, old_value, new_value, at_us, operation"
	" FROM memd_state_history WHERE 1 = 0",
	"SELECT position, kind, app, user, session, seq FROM memd_feed_marks WHERE 1 = 0",
	"SELECT app, name, value FROM memd_state_app WHERE 1 = 0",
	"SELECT app, user, name, value FROM memd_state_user WHERE 1 = 0",
	"SELECT app, user, session, name, value FROM memd_state_session WHERE 1 = 0",
	"SELECT app, user, session, name, version, mime_type, data, size, created_us"
	" FROM memd_artifacts WHERE 1 = 0",
	"SELECT id, last FROM memd_feed_counter WHERE 1 = 0",
	"SELECT position, kind, app, user, session, memory_id FROM memd_feed_deletes WHERE 1 = 0",
	"SELECT name, position FROM memd_cursors WHERE 1 = 0",
	"SELECT app, user, lane_key, flags, session, origin, created_us, updated_us, version,"
	" resume_reason, resume_marked_us, reset_reason, previous_session, reset_us, turn_id,"
	" turn_started_us, turn_lease_until_us, interruptions, finalize_failures,"
	" finalize_claim_until_us, input_tokens, output_tokens, cache_read_tokens,"
	" cache_write_tokens, cost_micro_usd, last_prompt_tokens, inbox_last"
	" FROM memd_lanes WHERE 1 = 0",
	"SELECT app, user, lane_key, position, id, mode, in_slot, body, created_us"
	" FROM memd_inbox WHERE 1 = 0",
	"SELECT app, user, id, text, kind, topics, entities, topics_match, entities_match,"
	" source_session, source, created_us, updated_us, expires_us, version, position, tokens"
	" FROM memd_memories WHERE 1 = 0",
	"SELECT hseq, app, user, id, version, op, text, kind, topics, entities, source_session,"
	" source, created_us, updated_us, expires_us, tokens, actor, reason, at_us"
	" FROM memd_memory_history WHERE 1 = 0",
	"SELECT app, user, session, ns, id, parent_id, type, payload, metadata, run_state,"
	" created_us, updated_us, expires_us FROM memd_checkpoints WHERE 1 = 0",
	"SELECT app, user, session, ns, checkpoint_id, task_id, idx, channel, type, value,"
	" task_path FROM memd_checkpoint_writes WHERE 1 = 0",
	"SELECT app, user, session, id FROM memd_checkpoint_heads WHERE 1 = 0",
	"SELECT app, id, context_id, user, state, task, created_us, updated_us, version"
	" FROM memd_tasks WHERE 1 = 0",
	NULL,
};

typedef struct my_migration {
	int32_t version;        /* the schema version after the step */
	const char *what;
	const char *const *sql; /* NULL-terminated */
} my_migration;

/* Ordered; each step's version is one more than the previous one's. A
 * step must be safe to run again (it may have been cut off half way). */
static const my_migration migrations[] = {
	{ 1, "initial schema", SQL_V1 },
	{ 2, "session lanes: lifecycle and usage of sessions, lanes, inboxes", SQL_V2 },
	{ 3, "transcripts: hidden events, operations, state history, activity order", SQL_V3 },
	{ 4, "memories: memories and their history, sessions' memory cursor", SQL_V4 },
	{ 5, "checkpoints and tasks: run checkpoints, pending writes, heads, A2A tasks",
	  SQL_V5 },
	{ 6, "checkpoint write task paths", SQL_V6 },
};
#define MY_N_MIGRATIONS (sizeof(migrations) / sizeof(migrations[0]))

_Static_assert(MY_SCHEMA_LATEST == 6, "update migrations[] with MY_SCHEMA_LATEST");

static const my_sql SQL_SCHEMA_TABLE = { MY_ST_COUNT, /* run once, not cached */
	"CREATE TABLE IF NOT EXISTS memd_schema ("
	"  version INT NOT NULL, what LONGTEXT NOT NULL, applied_us BIGINT NOT NULL,"
	"  PRIMARY KEY (version)"
	")" MY_TABLE_OPTIONS };
/* Migrations may wait for another process and run DDL: no statement
 * time limit on this connection (it is closed afterwards). */
static const my_sql SQL_NO_TIME_LIMIT = { MY_ST_COUNT, "SET SESSION max_statement_time = 0" };

static const my_sql SQL_SCHEMA_LOCK = { MY_ST_SCHEMA_LOCK,
	"SELECT GET_LOCK(CONCAT('memd.schema.', DATABASE()), ?)" };
static const my_sql SQL_SCHEMA_UNLOCK = { MY_ST_SCHEMA_UNLOCK,
	"SELECT RELEASE_LOCK(CONCAT('memd.schema.', DATABASE()))" };
static const my_sql SQL_SCHEMA_VERSION = { MY_ST_SCHEMA_VERSION,
	"SELECT COALESCE(MAX(version), 0) FROM memd_schema" };
static const my_sql SQL_SCHEMA_RECORD = { MY_ST_SCHEMA_RECORD,
	"INSERT INTO memd_schema (version, what, applied_us) VALUES (?, ?, ?)" };

static int32_t run_step(my_conn *c, const memd_host *host, const my_migration *m,
			memd_error *err)
{
	my_params p;
	int32_t r = 0;

	for (size_t i = 0; r == 0 && m->sql[i]; i++) {
		memd_error why = { .struct_size = sizeof(why) };
		r = my_exec_once(c, m->sql[i], &why);
		/* A step that changes a table CREATE ... IF NOT EXISTS left
		 * alone fails on a table that is not memd's. */
		if (r == MEMD_EIO || r == MEMD_EINVAL)
			return memd_error_set(err, MEMD_EIO, why.flags,
					      "mysql: migrating to schema version %d failed (a memd "
					      "table of another application?): %.160s",
					      (int)m->version, why.msg);
		if (r < 0) {
			if (err)
				*err = why;
			return r;
		}
	}
	my_params_init(&p);
	my_param_i64(&p, m->version);
	my_param_text(&p, m->what);
	my_param_i64(&p, host && host->now_us ? host->now_us(host) : 0);
	r = my_exec(c, &SQL_SCHEMA_RECORD, &p, NULL, err);
	if (r == 0 && host && host->log)
		host->log(host, MEMD_LOG_INFO, "schema migrated to version %d (%s)",
			  (int)m->version, m->what);
	return r;
}

static int32_t migrate_locked(my_conn *c, const memd_host *host, int64_t *version,
			      memd_error *err)
{
	int found = 0;
	int32_t r = my_exec_once(c, SQL_SCHEMA_TABLE.text, err);

	if (r == 0)
		r = my_query_i64(c, &SQL_SCHEMA_VERSION, NULL, &found, version, err);
	if (r < 0)
		return r;
	if (*version > MY_SCHEMA_LATEST)
		return memd_error_set(err, MEMD_EIO, 0,
				      "mysql: the database has schema version %lld, newer than the "
				      "%d this plugin knows; use a newer memd",
				      (long long)*version, (int)MY_SCHEMA_LATEST);
	for (size_t i = 0; i < MY_N_MIGRATIONS; i++) {
		const my_migration *m = &migrations[i];
		if (m->version <= *version)
			continue; /* done already (maybe by another process) */
		if (m->version != *version + 1)
			return memd_error_set(err, MEMD_EIO, 0,
					      "mysql: schema version %lld has no migration to %d",
					      (long long)*version, (int)m->version);
		r = run_step(c, host, m, err);
		if (r < 0)
			return r;
		*version = m->version;
	}
	for (size_t i = 0; SQL_PROBES[i]; i++) {
		memd_error why = { .struct_size = sizeof(why) };
		r = my_exec_once(c, SQL_PROBES[i], &why);
		if (r < 0)
			return memd_error_set(err, r == MEMD_EIO ? MEMD_EIO : r, why.flags,
					      "mysql: a memd table is not as schema version %lld "
					      "makes it (another application's table?): %.160s",
					      (long long)*version, why.msg);
	}
	return 0;
}

int32_t my_schema_migrate(my_conn *c, const memd_host *host, int32_t *ret_version,
			  memd_error *err)
{
	int64_t version = 0, got = 0;
	int found = 0;
	my_params p;
	int32_t r = my_exec_once(c, SQL_NO_TIME_LIMIT.text, err);

	if (r == 0) {
		my_params_init(&p);
		my_param_i64(&p, MY_SCHEMA_LOCK_WAIT_S);
		r = my_query_i64(c, &SQL_SCHEMA_LOCK, &p, &found, &got, err);
	}
	if (r == 0 && (!found || got != 1))
		r = memd_error_set(err, MEMD_EUNAVAIL, MEMD_ERROR_RETRYABLE,
				   "mysql: another process held the schema lock for %d s",
				   MY_SCHEMA_LOCK_WAIT_S);
	if (r < 0) {
		my_conn_close(c);
		return r;
	}
	r = migrate_locked(c, host, &version, err);
	/* The lock also goes when the connection closes. */
	(void)my_query_i64(c, &SQL_SCHEMA_UNLOCK, NULL, &found, &got, NULL);
	my_conn_close(c);
	if (r < 0)
		return r;
	*ret_version = (int32_t)version;
	return 0;
}
