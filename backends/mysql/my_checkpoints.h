/* SPDX-License-Identifier: MIT */
/*
 * my_checkpoints: run checkpoints of the MariaDB store (since ABI 1.5):
 * checkpoint_put, checkpoint_put_writes, checkpoint_get, checkpoint_list,
 * checkpoint_delete, checkpoint_resumable and checkpoint_expire, plus the
 * part of session_delete and user_delete that removes them.
 *
 * A checkpoint is a row of memd_checkpoints keyed by (app, user, session,
 * ns, id), ids and namespaces VARBINARY (compared and ordered as bytes;
 * the root namespace is "", never NULL); its pending writes are rows of
 * memd_checkpoint_writes under the same key and (task_id, idx), each
 * with the path of the task that made it (since schema version 6; ""
 * for none), delivered by (task_path, task_id, idx) as bytes.
 * memd_checkpoint_heads names each session's head, the greatest id among
 * its root checkpoints; the resumable listing reads an app's heads joined
 * with their checkpoints, whose run state and expiry are the head's.
 *
 * Locking, in this order wherever several are taken: the session row, the
 * checkpoint rows, their writes, the head row. checkpoint_put holds the
 * session's row in share mode (creating the row when asked), so a
 * session_delete, which locks that row first, either runs wholly before
 * it or after it; it upserts the checkpoint (INSERT ... ON DUPLICATE KEY
 * UPDATE) and, in the root namespace, the head, which the upsert moves
 * only to a greater id: it compares with the head's committed id under
 * the head row's lock, so processes putting one session's checkpoints at
 * once leave the greatest as head whatever their order.
 * checkpoint_put_writes locks the checkpoint's row (SELECT ... FOR
 * UPDATE) before it checks and writes. checkpoint_expire locks the rows
 * it removes, walking the expiry index from its start (so sweeps of
 * several processes run one after another: each waits at the first row
 * the one before it locked) and, for a removed head, the head row before
 * it reads the greatest remaining root id: a put of a greater id waiting
 * on that lock moves the head again after it, and a sweep removing that
 * root id meanwhile finds it named by the head, under the same lock, and
 * passes the head on again.
 *
 * Reads are one statement each (one snapshot under READ COMMITTED): a
 * checkpoint and its writes come from one UNION ALL, so a reader never
 * sees half of a put_writes.
 */
#ifndef MEMD_MY_CHECKPOINTS_H
#define MEMD_MY_CHECKPOINTS_H

#include "my_db.h"

/* The longest task path of a checkpoint write, in bytes: the width of
 * memd_checkpoint_writes.task_path (VARBINARY(1024)). Every connection
 * sorts it whole (max_sort_length = MY_SORT_LENGTH). */
#define MY_TASK_PATH_MAX 1024

/* Inside session_delete's transaction on c, after the session row is
 * locked: delete scope's session's checkpoints, their writes and its
 * head. */
int32_t my_checkpoints_session_delete(my_conn *c, const memd_scope *scope, memd_error *err);
/* Inside user_delete's transaction on c: delete every checkpoint, write
 * and head of scope's (app, user); *ret_rows is how many checkpoints
 * went. */
int32_t my_checkpoints_user_delete(my_conn *c, const memd_scope *scope, uint64_t *ret_rows,
				   memd_error *err);

/* memd_store_ops members (since 1.5); see api/memd/store.h. inst is the
 * my_store. */
int32_t my_checkpoint_put(void *inst, const memd_call *call, const memd_checkpoint *c,
			  int create_session, int64_t now_us, int *ret_created_session,
			  memd_error *err);
int32_t my_checkpoint_put_writes(void *inst, const memd_call *call, const memd_scope *scope,
				 const memd_checkpoint_writes *w, memd_error *err);
int32_t my_checkpoint_get(void *inst, const memd_call *call, const memd_scope *scope,
			  const char *ns, const char *id, int64_t now_us,
			  const memd_checkpoint_sink *out, memd_error *err);
int32_t my_checkpoint_list(void *inst, const memd_call *call, const memd_scope *scope,
			   const memd_checkpoint_query *q, const memd_checkpoint_sink *out,
			   memd_error *err);
int32_t my_checkpoint_delete(void *inst, const memd_call *call, const memd_scope *scope,
			     const char *ns, uint32_t *ret_count, memd_error *err);
int32_t my_checkpoint_resumable(void *inst, const memd_call *call,
				const memd_resumable_query *q, const memd_checkpoint_sink *out,
				memd_error *err);
int32_t my_checkpoint_expire(void *inst, const memd_call *call, int64_t now_us, uint32_t limit,
			     uint32_t *ret_count, memd_error *err);

#endif
