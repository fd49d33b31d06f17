/* SPDX-License-Identifier: MIT */
#include "sq_group.h"

#include <errno.h>
#include <string.h>
#include <time.h>

/* sq_group_req.state */
#define REQ_QUEUED  0u /* waiting; the head of the queue leads the next group */
#define REQ_RUNNING 1u /* taken into the group being written */
#define REQ_DONE    2u /* result and err are final */

#define US_PER_SEC 1000000
#define NS_PER_US 1000

static const sq_sql SQL_SAVEPOINT = { SQ_ST_SAVEPOINT, "SAVEPOINT sq_group_req" };
static const sq_sql SQL_RELEASE = { SQ_ST_RELEASE, "RELEASE sq_group_req" };
static const sq_sql SQL_ROLLBACK_TO = { SQ_ST_ROLLBACK_TO, "ROLLBACK TO sq_group_req" };

/* One queued request; lives on its submitter's stack. The leader reads and
 * writes it (apply, result, err) only while it is REQ_RUNNING, and the
 * submitter waits until it is REQ_DONE. */
typedef struct sq_group_req {
	const memd_call *call;
	sq_group_apply_fn apply;
	void *ctx;
	uint32_t weight;
	uint32_t state;             /* REQ_*, under group_lock */
	int32_t result;
	memd_error *err;
	memd_error own_err;         /* err when the submitter gave none */
	struct sq_group_req *next;  /* under group_lock */
	pthread_cond_t cond;        /* CLOCK_MONOTONIC; signalled when done or head */
} sq_group_req;

/* The request cannot be stored because its group's transaction is gone
 * (cause says why): a retryable failure, nothing of it persists. */
static int32_t fail_lost(sq_group_req *m, const memd_error *cause)
{
	return memd_error_set(m->err, cause->code, MEMD_ERROR_RETRYABLE,
			      "sqlite writer: the group's transaction failed, nothing was stored: %s",
			      cause->msg);
}

/* Apply m inside a savepoint of its own: a failure rolls back to it and
 * fails m alone. If the transaction itself is lost (SQLite rolled it back,
 * or a savepoint statement failed), *lost and cause say why. */
static int32_t apply_in_savepoint(sq_conn *c, sq_group_req *m, int32_t *lost, memd_error *cause)
{
	sq_txn_state before = c->txn;
	int32_t r = sq_exec(c, &SQL_SAVEPOINT, cause);

	if (r < 0) {
		*lost = r;
		return fail_lost(m, cause);
	}
	r = m->apply(c, m->ctx, m->err);
	if (r == 0) {
		r = sq_exec(c, &SQL_RELEASE, cause);
		if (r < 0) {
			*lost = r;
			return fail_lost(m, cause);
		}
		return 0;
	}
	if (sqlite3_get_autocommit(c->db)) {
		/* I/O error, disk full, out of memory: SQLite rolled back the
		 * whole transaction, with the requests before this one. */
		*lost = memd_error_set(cause, r, MEMD_ERROR_RETRYABLE, "%s", m->err->msg);
		return r;
	}
	if (sq_exec(c, &SQL_ROLLBACK_TO, cause) < 0 || sq_exec(c, &SQL_RELEASE, cause) < 0)
		*lost = cause->code;
	/* What the transaction keeps in memory goes back with it: the
	 * positions m took are handed out again, leaving no gap. */
	c->txn = before;
	return r;
}

/* Write the n requests of m in order in the transaction open on c, then
 * commit (or roll back) and release the writer. Every request's result
 * and err are final when this returns. */
static void run_group(sq_store *s, sq_conn *c, sq_group_req *const *m, uint32_t n)
{
	memd_error cause = { 0 };
	uint32_t stored = 0;
	int32_t lost = 0, r;

	for (uint32_t i = 0; i < n; i++) {
		if (lost < 0) {
			m[i]->result = fail_lost(m[i], &cause);
			continue;
		}
		r = sq_call_check(s, m[i]->call, m[i]->err);
		if (r == 0)
			r = n == 1 ? m[i]->apply(c, m[i]->ctx, m[i]->err)
				   : apply_in_savepoint(c, m[i], &lost, &cause);
		m[i]->result = r;
		stored += r == 0;
	}
	if (lost < 0) {
		/* What was written before the loss went with the transaction. */
		for (uint32_t i = 0; i < n; i++)
			if (m[i]->result == 0)
				m[i]->result = fail_lost(m[i], &cause);
		stored = 0;
	}
	s->stats.requests += n;
	s->stats.groups++;
	if (n > 1)
		s->stats.grouped += n;
	if (n > s->stats.largest)
		s->stats.largest = n;
	/* Nothing to keep: roll back rather than commit an empty transaction. */
	r = sq_write_end(s, c, stored ? 0 : MEMD_EINTERNAL, &cause);
	if (stored && r < 0)
		for (uint32_t i = 0; i < n; i++)
			if (m[i]->result == 0)
				m[i]->result = fail_lost(m[i], &cause);
}

/* self is the head of the queue: take the writer, then everything queued
 * by then (within the bounds), write it as one transaction and hand the
 * queue to the next head. Called and returns without group_lock. */
static void lead(sq_store *s, sq_group_req *self)
{
	sq_group_req *m[SQ_GROUP_MAX_REQUESTS];
	memd_error begin_err;
	sq_conn *c = NULL;
	uint64_t weight = 0;
	uint32_t n = 0;
	/* Taking the writer first lets whatever arrives while it is busy
	 * (another process's transaction, a session write) join this group. */
	int32_t rb = sq_write_begin(s, NULL, &c, &begin_err);

	pthread_mutex_lock(&s->group_lock);
	for (sq_group_req *q = s->group_head; q && n < SQ_GROUP_MAX_REQUESTS; q = q->next) {
		if (n && weight + q->weight > SQ_GROUP_MAX_WEIGHT)
			break;
		q->state = REQ_RUNNING;
		weight += q->weight;
		m[n++] = q;
	}
	pthread_mutex_unlock(&s->group_lock);

	if (rb < 0) {
		for (uint32_t i = 0; i < n; i++)
			m[i]->result = fail_lost(m[i], &begin_err);
	} else {
		run_group(s, c, m, n);
	}

	pthread_mutex_lock(&s->group_lock);
	s->group_head = m[n - 1]->next;
	if (!s->group_head)
		s->group_tail = NULL;
	for (uint32_t i = 0; i < n; i++) {
		m[i]->state = REQ_DONE;
		if (m[i] != self)
			pthread_cond_signal(&m[i]->cond);
	}
	if (s->group_head)
		pthread_cond_signal(&s->group_head->cond);
	pthread_mutex_unlock(&s->group_lock);
}

/* Remove a queued request that is not the head (its deadline passed). */
static void unlink_req(sq_store *s, sq_group_req *req)
{
	sq_group_req *prev = NULL;

	for (sq_group_req *q = s->group_head; q; prev = q, q = q->next) {
		if (q != req)
			continue;
		if (prev)
			prev->next = req->next;
		else
			s->group_head = req->next;
		if (s->group_tail == req)
			s->group_tail = prev;
		return;
	}
}

/* With group_lock held: sleep until req is done or heads the queue with
 * nobody leading. A request still queued when its deadline passes leaves
 * the queue with MEMD_ETIMEDOUT; once taken into a group it waits for the
 * group's end whatever the deadline (the leader is using it). */
static int32_t wait_turn(sq_store *s, sq_group_req *req)
{
	int64_t deadline = req->call ? req->call->deadline_us : 0;

	while (req->state != REQ_DONE && !(req->state == REQ_QUEUED && s->group_head == req)) {
		if (deadline && req->state == REQ_QUEUED) {
			struct timespec ts = {
				.tv_sec = deadline / US_PER_SEC,
				.tv_nsec = (deadline % US_PER_SEC) * NS_PER_US,
			};
			if (pthread_cond_timedwait(&req->cond, &s->group_lock, &ts) == ETIMEDOUT &&
			    req->state == REQ_QUEUED && s->group_head != req) {
				unlink_req(s, req);
				return memd_error_set(req->err, MEMD_ETIMEDOUT, MEMD_ERROR_RETRYABLE,
						      "sqlite: deadline passed waiting for the writer");
			}
		} else {
			pthread_cond_wait(&req->cond, &s->group_lock);
		}
	}
	return 0;
}

int32_t sq_group_write(sq_store *s, const memd_call *call, sq_group_apply_fn apply, void *ctx,
		       uint32_t weight, memd_error *err)
{
	sq_group_req req = { .call = call, .apply = apply, .ctx = ctx,
			     .weight = weight ? weight : 1, .state = REQ_QUEUED };
	pthread_condattr_t cattr;
	int32_t r;

	req.err = err ? err : &req.own_err;
	r = sq_call_check(s, call, req.err);
	if (r < 0)
		return r;
	pthread_condattr_init(&cattr);
	pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
	pthread_cond_init(&req.cond, &cattr);
	pthread_condattr_destroy(&cattr);

	pthread_mutex_lock(&s->group_lock);
	if (s->group_tail)
		s->group_tail->next = &req;
	else
		s->group_head = &req;
	s->group_tail = &req;
	r = wait_turn(s, &req);
	if (r == 0 && req.state == REQ_QUEUED) {
		pthread_mutex_unlock(&s->group_lock);
		lead(s, &req);
		pthread_mutex_lock(&s->group_lock);
	}
	if (r == 0)
		r = req.result;
	pthread_mutex_unlock(&s->group_lock);
	pthread_cond_destroy(&req.cond);
	return r;
}

void sq_group_log_stats(const sq_store *s)
{
	if (!s || !s->host || !s->host->log)
		return;
	s->host->log(s->host, MEMD_LOG_INFO,
		     "group commit: %llu requests in %llu transactions (%llu shared one, largest "
		     "group %u); the writer committed %llu transactions in all",
		     (unsigned long long)s->stats.requests, (unsigned long long)s->stats.groups,
		     (unsigned long long)s->stats.grouped, (unsigned)s->stats.largest,
		     (unsigned long long)s->stats.commits);
}
