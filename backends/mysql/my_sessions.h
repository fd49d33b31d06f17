/* SPDX-License-Identifier: MIT */
/*
 * my_sessions: sessions of the MariaDB store (create, get, list, update,
 * delete, the ended ones for retention) and user_delete, plus the
 * session-row helpers append, the artifact ops and lane_write use inside
 * their transactions.
 */
#ifndef MEMD_MY_SESSIONS_H
#define MEMD_MY_SESSIONS_H

#include "my_db.h"

/* The counters append reads and advances, from the locked session row. */
typedef struct my_session_head {
	int64_t version;
	int64_t last_seq;
	int64_t summary_seq;
} my_session_head;

/* Inside a transaction on c: lock scope's session row (SELECT ... FOR
 * UPDATE) and read its counters; MEMD_ENOTFOUND if there is none. Every
 * writer of a session takes this lock first, so writers of one session
 * run one after another, in any process. */
int32_t my_session_lock(my_conn *c, const memd_scope *scope, my_session_head *ret,
			memd_error *err);
/* Store the counters after an append: version + 1, last_seq, summary_seq,
 * message_count + messages_added (negative when an operation hid more
 * than the append added), updated_us = now_us and the title if it has
 * none. */
int32_t my_session_appended(my_conn *c, const memd_scope *scope, const my_session_head *h,
			    int64_t messages_added, int64_t now_us, const char *title_if_unset,
			    memd_error *err);
/* The columns of a session row of alias s, in the order
 * my_session_from_row reads them (those session_get selects). */
#define MY_SESSION_COLS_S                                                                    \
	"s.app, s.user, s.id, s.title, s.metadata, s.flags, s.created_us, s.updated_us,"     \
	" s.version, s.last_seq, s.summary_seq, s.lane_key, s.origin, s.origin_platform,"   \
	" s.previous_session, s.start_reason, s.end_reason, s.ended_us, s.input_tokens,"     \
	" s.output_tokens, s.cache_read_tokens, s.cache_write_tokens, s.cost_micro_usd,"     \
	" s.last_prompt_tokens, s.message_count, s.memory_seq"
/* Fill out from the session columns of s's current row starting at
 * column at (strings borrowed from s). */
void my_session_from_row(const my_stmt *s, unsigned at, memd_session *out);
/* my_row_fn of the session lists: the session of s's current row (from
 * column 0) to ud, a const memd_session_sink *. */
int32_t my_session_row(const my_stmt *s, void *ud, memd_error *err);
/* 1 in *ret_exists if scope's session exists (one read, no lock). */
int32_t my_session_exists(my_conn *c, const memd_scope *scope, int *ret_exists,
			  memd_error *err);

/* The checks of a session to create (ids, metadata and origin JSON
 * objects, the lifecycle members when s->struct_size covers them):
 * 0 or MEMD_EINVAL. */
int32_t my_session_check_new(const memd_session *s, memd_error *err);
/* Inside a transaction on c: insert s (checked by my_session_check_new)
 * at version 0 with updated_us = created_us, its flags and, when its
 * struct_size covers them, its lifecycle members; MEMD_ECONFLICT if the
 * id exists in (app, user). */
int32_t my_session_insert(my_conn *c, const memd_session *s, memd_error *err);
/* Inside a transaction on c: add u (checked by my_usage_check) to scope's
 * session's sums; a missing session is no error (nothing changes). */
int32_t my_session_add_usage(my_conn *c, const memd_scope *scope, const memd_usage *u,
			     memd_error *err);
/* Inside a transaction on c: mark scope's session ended (ended_us =
 * now_us, end_reason = reason) if it exists and is open; else nothing. */
int32_t my_session_end(my_conn *c, const memd_scope *scope, const char *reason, int64_t now_us,
		       memd_error *err);
/* Inside a transaction on c: reopen scope's session (ended_us 0, no end
 * reason); MEMD_ENOTFOUND if it does not exist. */
int32_t my_session_reopen(my_conn *c, const memd_scope *scope, memd_error *err);

/* memd_store_ops members; see api/memd/store.h. inst is the my_store. */
int32_t my_session_create(void *inst, const memd_call *call, const memd_session *s,
			  const char *state_delta_json, const memd_session_sink *out,
			  memd_error *err);
int32_t my_session_get(void *inst, const memd_call *call, const memd_scope *scope,
		       const memd_session_sink *out, memd_error *err);
int32_t my_session_list(void *inst, const memd_call *call, const memd_scope *scope,
			const memd_session_query *q, const memd_session_sink *out,
			memd_error *err);
int32_t my_session_update(void *inst, const memd_call *call, const memd_scope *scope,
			  const memd_session_update *p, const memd_session_sink *out,
			  memd_error *err);
int32_t my_session_delete(void *inst, const memd_call *call, const memd_scope *scope,
			  memd_error *err);
int32_t my_session_list_ended(void *inst, const memd_call *call, int64_t ended_before_us,
			      uint32_t limit, const memd_session_sink *out, memd_error *err);
int32_t my_user_delete(void *inst, const memd_call *call, const memd_scope *scope,
		       memd_error *err);

#endif
