/* SPDX-License-Identifier: MIT */
/*
 * pg_sessions: sessions of the PostgreSQL store (create, get, list, update,
 * delete, user_delete) and the session-row statements other ops queue in
 * their rounds.
 */
#ifndef MEMD_PG_SESSIONS_H
#define MEMD_PG_SESSIONS_H

#include "pg_db.h"

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
 * summary_seq from h, updated_us = now_us, title = title_if_unset if the
 * title is NULL. */
int32_t pg_session_send_appended(pg_conn *c, const memd_scope *scope, const pg_session_head *h,
				 int64_t now_us, const char *title_if_unset, memd_error *err);

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

#endif
