/* SPDX-License-Identifier: MIT */
/*
 * sq_group: group commit of the SQLite store's appends.
 *
 * With synchronous=FULL every COMMIT waits for an fsync, so one
 * transaction per append caps the store at the disk's sync rate. Requests
 * that arrive while a transaction is being written queue up, and the next
 * transaction takes them all: one BEGIN IMMEDIATE, each request in its own
 * SAVEPOINT (a request that fails is rolled back to its savepoint and
 * fails alone; the others go on and see each other's changes in queue
 * order), one COMMIT. Every caller returns only after the COMMIT that holds
 * its request is durable, with its own result.
 *
 * Leader/follower: the thread of the oldest queued request runs the
 * transaction for everything queued (so a lone request runs at once in
 * its own thread, with no hand-off and no timer) while the others sleep on
 * their own condition; when it is done the oldest remaining request's
 * thread leads the next group.
 */
#ifndef MEMD_SQ_GROUP_H
#define MEMD_SQ_GROUP_H

#include "sq_db.h"

/* Most requests in one transaction. */
#define SQ_GROUP_MAX_REQUESTS 128
/* Most weight (events) in one transaction; a heavier request still runs,
 * in a group of its own. */
#define SQ_GROUP_MAX_WEIGHT 4096

/* The write of one request, run on the writer c inside the group's
 * transaction (and, when the group has other requests, inside a savepoint
 * of its own). Returns 0, or a negative MEMD_E* with err filled; on
 * failure everything it wrote is rolled back. ctx is the submitter's. */
typedef int32_t (*sq_group_apply_fn)(sq_conn *c, void *ctx, memd_error *err);

/* Run apply(writer, ctx, err) in a write transaction shared with the
 * requests of other threads and return when that transaction is committed
 * (0: durable as the store's synchronous setting makes it) or when the
 * request failed (nothing of it is stored). weight (e.g. the number of
 * events; 0 counts as 1) bounds the size of a group. Fails with:
 *  - MEMD_ETIMEDOUT (retryable) if call's deadline passes while the
 *    request is still queued, or MEMD_ETIMEDOUT / MEMD_ECANCELED if it has
 *    passed or was raised when the request's turn comes;
 *  - apply's own error (that request only);
 *  - a retryable error if the group's transaction could not begin or
 *    commit, or was lost to an error that SQLite does not confine to one
 *    statement (I/O, disk full, out of memory): every request of that
 *    group fails then, and nothing of the group is stored.
 * ctx and err are used by the thread that runs the group until this
 * returns. */
int32_t sq_group_write(sq_store *s, const memd_call *call, sq_group_apply_fn apply, void *ctx,
		       uint32_t weight, memd_error *err);

/* Log the writer's counters (requests, groups, commits) at info level
 * through s->host. For fini and tests. */
void sq_group_log_stats(const sq_store *s);
/* memd_store_ops.stats: the group commit's counters, read without waiting
 * for the writer. */
int32_t sq_stats(void *inst, memd_store_stats *ret, memd_error *err);

#endif
