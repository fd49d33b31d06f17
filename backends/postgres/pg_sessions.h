/* SPDX-License-Identifier: MIT */
/*
 * pg_sessions: sessions of the PostgreSQL store (create, get, list, update,
 * delete, user_delete, the ended and pending session lists) and the session-row
 * statements other ops queue in their rounds.
 */
#ifndef MEMD_PG_SESSIONS_H
#define MEMD_PG_SESSIONS_H

#include "pg_db.h"

/* The columns every query that delivers a session selects, in the order
 * pg_session_from_row reads them. */
#define PG_SESSION_COLS \
	"app, \"user\", id, title, metadata::text, flags, created_us, updated_us, version," \
	" last_seq, summary_seq, lane_key, origin::text, origin_platform, previous_session," \
	" start_reason, end_reason, ended_us, input_tokens, output_tokens, cache_read_tokens," \
	" cache_write_tokens, cost_micro_usd, last_prompt_tokens, message_count, memory_seq"

/* Fill s from the PG_SESSION_COLS of row `row` of res (every 1.3 member).
 * Strings are borrowed from res. */
void pg_session_from_row(const PGresult *res, int row, memd_session *s);

/* The checks of a session to create, before anything is sent: its scope,
 * metadata and (when s reaches them) lifecycle members. */
int32_t pg_session_check_new(const memd_session *s, memd_error *err);
/* The columns of a session as session_create inserts it, and their
 * PG_SESSION_INSERT_N values (created_us also gives updated_us, so it
 * appears twice in the columns and once in the values): app, user, id,
 * title, metadata, flags, created_us, lane_key, origin, origin_platform,
 * previous_session, start_reason. */
#define PG_SESSION_INSERT_COLS \
	"app, \"user\", id, title, metadata, flags, created_us, updated_us, lane_key, origin," \
	" origin_platform, previous_session, start_reason"
#define PG_SESSION_INSERT_N 12
/* The values of s for PG_SESSION_INSERT_COLS (flags ARCHIVED and NOTICE,
 * the lifecycle members s reaches; version 0, no usage) into vals, with
 * bufs for the numbers. */
void pg_session_insert_vals(const memd_session *s, char bufs[2][PG_INT_BUF], const char **vals);

/* What a write needs to know about a session row. */
typedef struct pg_session_head {
	int64_t version;
	int64_t last_seq;
	int64_t summary_seq;
} pg_session_head;

/* Queue a read of scope's session head (no lock). */
int32_t pg_session_send_exists(pg_conn *c, const memd_scope *scope, memd_error *err);
/* Queue a read of scope's session head that locks the row until the
 * transaction ends (FOR NO KEY UPDATE: appends to one session serialize,
 * inserts that only reference it do not wait). */
int32_t pg_session_send_lock(pg_conn *c, const memd_scope *scope, memd_error *err);
/* 0 if res (of either statement above) found the session, filling *ret
 * when not NULL and counting one row into call; MEMD_ENOTFOUND if not. */
int32_t pg_session_head_result(const PGresult *res, const memd_call *call,
			       const memd_scope *scope, pg_session_head *ret, memd_error *err);
#define pg_session_exists_result(res, call, scope, err) \
	pg_session_head_result((res), (call), (scope), NULL, (err))
/* Queue the session update of an append: version + 1, last_seq and
 * summary_seq from h (with find_summary: the newest visible summary's
 * seq, read after the round's earlier statements), message_count +
 * n_messages, updated_us = now_us, title = title_if_unset if the title is
 * NULL, usage (NULL = none) added to the session's sums and to those of
 * the lane whose current session it is, if any (whose lock
 * pg_session_send_lane_lock took first). */
int32_t pg_session_send_appended(pg_conn *c, const memd_scope *scope, const pg_session_head *h,
				 int64_t now_us, const char *title_if_unset, const memd_usage *usage,
				 int64_t n_messages, int find_summary, memd_error *err);
/* Queue the lock of the lane whose current session scope's is (if any),
 * which an append with usage takes before it locks the session (the
 * lanes' lock order: lane, then its sessions). */
int32_t pg_session_send_lane_lock(pg_conn *c, const memd_scope *scope, memd_error *err);

/* memd_store_ops members; see api/memd/store.h for each contract. inst is
 * the pg_store. */
int32_t pg_session_create(void *inst, const memd_call *call, const memd_session *s,
			  const char *state_delta_json, const memd_session_sink *out,
			  memd_error *err);
int32_t pg_session_get(void *inst, const memd_call *call, const memd_scope *scope,
		       const memd_session_sink *out, memd_error *err);
int32_t pg_session_list(void *inst, const memd_call *call, const memd_scope *scope,
			const memd_session_query *q, const memd_session_sink *out,
			memd_error *err);
int32_t pg_session_update(void *inst, const memd_call *call, const memd_scope *scope,
			  const memd_session_update *p, const memd_session_sink *out,
			  memd_error *err);
int32_t pg_session_delete(void *inst, const memd_call *call, const memd_scope *scope,
			  memd_error *err);
int32_t pg_user_delete(void *inst, const memd_call *call, const memd_scope *scope,
		       memd_error *err);
int32_t pg_session_list_ended(void *inst, const memd_call *call, int64_t ended_before_us,
			      uint32_t limit, const memd_session_sink *out, memd_error *err);
int32_t pg_session_list_pending(void *inst, const memd_call *call, const memd_pending_query *q,
				const memd_session_sink *out, memd_error *err);

#endif
