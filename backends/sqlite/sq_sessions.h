/* SPDX-License-Identifier: MIT */
/*
 * sq_sessions: sessions of the SQLite store (create, get, list, update,
 * delete, user_delete) and the session-row helpers append uses.
 */
#ifndef MEMD_SQ_SESSIONS_H
#define MEMD_SQ_SESSIONS_H

#include "sq_db.h"

/* Every query that delivers a session selects these columns, in the
 * order sq_session_from_row reads them. */
#define SQ_SESSION_COLS \
	"app, user, id, title, metadata, flags, created_us, updated_us, version, last_seq, " \
	"summary_seq, lane_key, origin, origin_platform, previous_session, start_reason, " \
	"end_reason, ended_us, input_tokens, output_tokens, cache_read_tokens, " \
	"cache_write_tokens, cost_micro_usd, last_prompt_tokens, message_count, memory_seq"

/* Fill s from the SQ_SESSION_COLS of st's current row. Strings are
 * borrowed from st until its next step or reset. */
void sq_session_from_row(sqlite3_stmt *st, memd_session *s);
/* sq_row_fn of the session lists: the session of st's current row (its
 * SQ_SESSION_COLS) to ud, a const memd_session_sink *. */
int32_t sq_session_row(sqlite3_stmt *st, void *ud, memd_error *err);

/* Check a session record for sq_session_insert: its scope, metadata
 * (NULL reads as {}: *ret_metadata is what to store) and, when the record
 * has them, its lifecycle members. MEMD_EINVAL says what is wrong. */
int32_t sq_session_check(const memd_session *s, const char **ret_metadata, memd_error *err);
/* Insert s (checked) inside the write transaction on c: version 0, no
 * state, updated_us = created_us, the lifecycle members it has.
 * MEMD_ECONFLICT if the id exists in (app, user). */
int32_t sq_session_insert(sq_conn *c, const memd_session *s, const char *metadata,
			  memd_error *err);

/* What a write needs to know about a session row. */
typedef struct sq_session_head {
	int64_t version;
	int64_t last_seq;
	int64_t summary_seq;
	int64_t message_count;    /* visible events that are not summaries */
} sq_session_head;

/* Read scope's session on c (inside the caller's transaction) and hand it
 * to out (NULL: only check it exists). MEMD_ENOTFOUND if absent. */
int32_t sq_session_read_deliver(sq_conn *c, const memd_call *call, const memd_scope *scope,
				const memd_session_sink *out, memd_error *err);

/* Read the head of scope's session on c (inside a transaction); counts one
 * row into call. MEMD_ENOTFOUND if there is no such session. */
int32_t sq_session_head_get(sq_conn *c, const memd_call *call, const memd_scope *scope,
			    sq_session_head *ret, memd_error *err);

/* After an append: version + 1, last_seq, summary_seq and message_count
 * from h, updated_us
 * = now_us, and title = title_if_unset when the title is NULL (title may
 * be NULL: keep it). Inside the append's write transaction. */
int32_t sq_session_appended(sq_conn *c, const memd_scope *scope, const sq_session_head *h,
			    int64_t now_us, const char *title_if_unset, memd_error *err);

/* memd_store_ops members; see api/memd/store.h for each contract. inst is
 * the sq_store. */
int32_t sq_session_create(void *inst, const memd_call *call, const memd_session *s,
			  const char *state_delta_json, const memd_session_sink *out,
			  memd_error *err);
int32_t sq_session_get(void *inst, const memd_call *call, const memd_scope *scope,
		       const memd_session_sink *out, memd_error *err);
int32_t sq_session_list(void *inst, const memd_call *call, const memd_scope *scope,
			const memd_session_query *q, const memd_session_sink *out,
			memd_error *err);
int32_t sq_session_update(void *inst, const memd_call *call, const memd_scope *scope,
			  const memd_session_update *p, const memd_session_sink *out,
			  memd_error *err);
int32_t sq_session_delete(void *inst, const memd_call *call, const memd_scope *scope,
			  memd_error *err);
int32_t sq_user_delete(void *inst, const memd_call *call, const memd_scope *scope,
		       memd_error *err);

#endif
