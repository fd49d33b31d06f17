/* SPDX-License-Identifier: MIT */
/*
 * pu_group: the group-commit queue of the server-backed stores (postgres,
 * mysql), independent of the database driver.
 *
 * Concurrent appends queue up. A thread that finds an idle connection
 * takes up to `max` queued appends to distinct sessions (its own first),
 * sorts them in (app, user, session) order - the order every writer locks
 * session rows in - and hands them to the store's run callback, which
 * writes them in one transaction on that connection and answers each
 * request (rc, err and, on success, seqs, version, replayed). The other
 * threads wait until their request is answered, a connection comes back
 * (pu_group_wake, which the store calls whenever it gives a connection
 * back) or their call's deadline passes (MEMD_ETIMEDOUT, retryable, only
 * while still queued: a request a leader took is always answered). With
 * max 1 every append runs alone through the same callback.
 *
 * The store's request type embeds pu_group_req as its first member, so
 * the callback may convert the pu_group_req pointers it gets back to its
 * own type. Everything the queue shares is guarded by one mutex of its
 * own; the callbacks run without it held.
 */
#ifndef MEMD_PU_GROUP_H
#define MEMD_PU_GROUP_H

#include <stddef.h>
#include <stdint.h>

#include <memd/plugin.h>

/* What a request does in its group's transaction (pu_group_req.status),
 * kept by the store's run callback. */
#define PU_GROUP_PENDING 0 /* not decided yet */
#define PU_GROUP_WRITE   1 /* writes in the group's transaction */
#define PU_GROUP_DONE    2 /* answered (written, replayed or refused) */

/* One append. The store fills the input, pu_group_append the rest. */
typedef struct pu_group_req {
	/* input: borrowed for the append */
	const memd_call *call;
	const memd_scope *scope;     /* with a session */
	const memd_append *a;
	/* output, set by the run callback */
	int64_t *seqs;               /* a->n_events slots (pu_group_append owns them) */
	int64_t version;
	int replayed;
	int32_t rc;
	memd_error err;
	int status;                  /* PU_GROUP_*, while its group runs */
	/* the queue's own: the store never touches these */
	int queued;                  /* waiting for a leader */
	int finished;                /* rc and outputs are final */
	struct pu_group_req *next;
} pu_group_req;

/* What the store supplies. store is the pu_group_new argument; a
 * connection is the store's own type, passed through as void *. */
typedef struct pu_group_ops {
	/* Names the store in the queue's messages ("<name>: deadline passed
	 * waiting for a connection"). */
	const char *name;
	/* Take an idle connection without waiting: 0 with *ret_conn the
	 * connection, or NULL when every one is busy; < 0 (err filled, no
	 * connection held) when there is no point trying (the call is over,
	 * the server cannot be reached). */
	int32_t (*try_take)(void *store, const memd_call *call, void **ret_conn, memd_error *err);
	/* Answer every request of m[0, n) (n >= 1, distinct sessions, in
	 * (app, user, session) order), writing them in one transaction on
	 * *conn where it can, on call (the leader's). *conn may be NULL: take
	 * a connection for the run. The callback may give *conn back and take
	 * another (or none: *conn NULL) on the way; whatever *conn holds on
	 * return the caller gives back. Every request must have rc (and err,
	 * or its outputs) set on return. */
	void (*run)(void *store, const memd_call *call, void **conn, pu_group_req **m, size_t n);
	/* Give back a connection of try_take or run. Accepts NULL. */
	void (*give)(void *store, void *conn);
} pu_group_ops;

typedef struct pu_group pu_group;

/* Statistics of the writes the store reported (pu_group_note_written). */
typedef struct pu_group_stats {
	uint64_t n_txns;             /* transactions that wrote appends */
	uint64_t n_appends;          /* appends they wrote */
	uint32_t max_batch;          /* most appends one of them wrote */
} pu_group_stats;

/* Create a queue for store (borrowed; ops too, for the queue's lifetime)
 * that puts up to max appends (0 counts as 1) in a transaction. On
 * success *ret_group owns the queue; MEMD_ENOMEM otherwise. */
int32_t pu_group_new(const pu_group_ops *ops, void *store, uint32_t max, pu_group **ret_group,
		     memd_error *err);
/* Free the queue. Accepts NULL. No append may be running. */
void pu_group_free(pu_group *g);
/* Wake the queued appends: a connection came back. Accepts NULL (a store
 * that gives a connection back before or after its queue exists). */
void pu_group_wake(pu_group *g);

/* Run one append whose checks have passed: req->call, scope and a set,
 * the rest zero. Queues it (or, with max 1, runs it alone), and on
 * success fills res->seqs (a->n_events slots), res->version and
 * res->flags (MEMD_APPEND_REPLAYED for a replay) and returns 0; on
 * failure returns the append's negative MEMD_E* with err filled (the
 * request's own error), and res is untouched. */
int32_t pu_group_append(pu_group *g, pu_group_req *req, memd_append_result *res,
			memd_error *err);

/* For run callbacks: start a try of m[0, n) (every request pending, rc
 * 0, not replayed). */
void pu_group_begin(pu_group_req **m, size_t n);
/* For run callbacks: answer every request of m[0, n) with r and err. */
void pu_group_fail(pu_group_req **m, size_t n, int32_t r, const memd_error *err);
/* For run callbacks: a transaction that wrote n_write appends committed
 * (0: nothing is counted). */
void pu_group_note_written(pu_group *g, size_t n_write);
/* The statistics so far. */
pu_group_stats pu_group_get_stats(pu_group *g);
/* Log the statistics (one debug line through host->log, "group commit: N
 * appends written in T transactions (at most M in one)") if any append
 * was written. Accepts a NULL g or host. */
void pu_group_log_stats(pu_group *g, const memd_host *host);

#endif
