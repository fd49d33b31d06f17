/* SPDX-License-Identifier: MIT */
#include "sq_group.h"

#include <errno.h>
#include <semaphore.h>
#include <string.h>
#include <time.h>

/* sq_group_req.state, under group_lock */
#define REQ_QUEUED  0u /* waiting behind the leader */
#define REQ_LEADING 1u /* heads the queue: its thread runs the next group */
#define REQ_RUNNING 2u /* taken into the group being written */
#define REQ_DONE    3u /* out of the queue; result and err are final */

/* sq_group_req.wake, written by the waker before it posts the request's
 * semaphore, read by the request's thread after its wait: what the thread
 * is woken for. */
#define WAKE_NONE 0u
#define WAKE_DONE 1u /* the group holding it is over */
#define WAKE_LEAD 2u /* it heads the queue now: lead the next group */

#define US_PER_SEC 1000000
#define NS_PER_US 1000

static const sq_sql SQL_SAVEPOINT = { SQ_ST_SAVEPOINT, "SAVEPOINT sq_group_req" };
static const sq_sql SQL_RELEASE = { SQ_ST_RELEASE, "RELEASE sq_group_req" };
static const sq_sql SQL_ROLLBACK_TO = { SQ_ST_ROLLBACK_TO, "ROLLBACK TO sq_group_req" };

/* One queued request; lives on its submitter's stack. The leader reads and
 * writes it (apply, result, err) only while it is REQ_RUNNING. A wake-up
 * is one post of the request's own semaphore (not under the queue's
 * lock), so many members can be woken without holding up the queue. A
 * semaphore rather than a mutex and condition: the woken thread needs no
 * lock its waker may still hold (which cost a second futex sleep and
 * wake-up per member), and a semaphore may be destroyed as soon as its
 * wait returned (glibc's sem_post reads nothing of it after the increment
 * that lets the waiter go; at most a futex wake-up on its address
 * follows, which is harmless once the memory is reused), so the waker
 * needs no lock to keep the request alive either. */
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
	sem_t woken;                /* posted once, after wake is set */
	uint32_t wake;              /* WAKE_* */
} sq_group_req;

/* The request cannot be stored because its group's transaction is gone
 * (cause says why): nothing of it persists. It fails with the cause's
 * code, retryable (it may be stored by itself), except that a storage
 * failure (full disk, read-only, I/O error) keeps the cause's flags: the
 * same kind fails the same way whichever request met it. */
static int32_t fail_lost(sq_group_req *m, const memd_error *cause)
{
	uint32_t flags = (cause->flags & MEMD_ERROR_STORAGE_MASK) ? cause->flags
								 : MEMD_ERROR_RETRYABLE;

	return memd_error_set(m->err, cause->code, flags,
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
		*lost = memd_error_set(cause, r, m->err->flags, "%s", m->err->msg);
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

/* Wake req's thread for why (WAKE_*). The caller must not touch req
 * afterwards: its thread may return at once. sem_post orders the write of
 * wake before the waiter's read. */
static void wake(sq_group_req *req, uint32_t why)
{
	req->wake = why;
	sem_post(&req->woken);
}

/* self heads the queue: take the writer, then everything queued by then
 * (within the bounds), write it as one transaction, hand the queue to the
 * next head and wake the members. Called and returns without group_lock. */
static void lead(sq_store *s, sq_group_req *self)
{
	sq_group_req *m[SQ_GROUP_MAX_REQUESTS];
	sq_group_req *next_head;
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
	next_head = m[n - 1]->next;
	s->group_head = next_head;
	if (!next_head)
		s->group_tail = NULL;
	else
		next_head->state = REQ_LEADING;
	for (uint32_t i = 0; i < n; i++)
		m[i]->state = REQ_DONE;
	pthread_mutex_unlock(&s->group_lock);

	/* Members first, so their next requests can join the next group. */
	for (uint32_t i = 0; i < n; i++)
		if (m[i] != self)
			wake(m[i], WAKE_DONE);
	if (next_head)
		wake(next_head, WAKE_LEAD);
}

/* Remove a queued request (never the head: that one is REQ_LEADING). */
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

/* Sleep until req's thread is woken; *ret_why says for what (WAKE_DONE or
 * WAKE_LEAD). A request still queued when its deadline passes leaves the
 * queue with MEMD_ETIMEDOUT; once taken into a group, or made the head, it
 * waits for its wake-up whatever the deadline (someone is using it). */
static int32_t wait_wake(sq_store *s, sq_group_req *req, uint32_t *ret_why)
{
	int64_t deadline = req->call ? req->call->deadline_us : 0;

	for (;;) {
		struct timespec ts;
		int gone = 0;

		if (!deadline) {
			if (sem_wait(&req->woken) == 0)
				break;
			continue; /* EINTR */
		}
		ts.tv_sec = deadline / US_PER_SEC;
		ts.tv_nsec = (deadline % US_PER_SEC) * NS_PER_US;
		if (sem_clockwait(&req->woken, CLOCK_MONOTONIC, &ts) == 0)
			break;
		if (errno != ETIMEDOUT)
			continue; /* EINTR */
		pthread_mutex_lock(&s->group_lock);
		if (req->state == REQ_QUEUED) {
			unlink_req(s, req);
			gone = 1;
		}
		pthread_mutex_unlock(&s->group_lock);
		if (gone)
			return memd_error_set(req->err, MEMD_ETIMEDOUT, MEMD_ERROR_RETRYABLE,
					      "sqlite: deadline passed waiting for the writer");
		/* Taken into a group or made the head just then: its wake-up
		 * comes (or came: the semaphore keeps the post). */
		deadline = 0;
	}
	*ret_why = req->wake;
	return 0;
}

int32_t sq_group_write(sq_store *s, const memd_call *call, sq_group_apply_fn apply, void *ctx,
		       uint32_t weight, memd_error *err)
{
	sq_group_req req = { .call = call, .apply = apply, .ctx = ctx,
			     .weight = weight ? weight : 1, .state = REQ_QUEUED };
	uint32_t why = WAKE_LEAD;
	int alone;
	int32_t r;

	req.err = err ? err : &req.own_err;
	r = sq_call_check(s, call, req.err);
	if (r < 0)
		return r;
	sem_init(&req.woken, 0, 0);

	pthread_mutex_lock(&s->group_lock);
	if (s->group_tail)
		s->group_tail->next = &req;
	else
		s->group_head = &req;
	s->group_tail = &req;
	/* Alone in the queue: nobody is writing, so lead at once (no hand-off,
	 * no timer). */
	alone = s->group_head == &req;
	if (alone)
		req.state = REQ_LEADING;
	pthread_mutex_unlock(&s->group_lock);

	if (!alone)
		r = wait_wake(s, &req, &why);
	if (r == 0 && why == WAKE_LEAD)
		lead(s, &req);
	if (r == 0)
		r = req.result;
	sem_destroy(&req.woken);
	return r;
}

void sq_group_log_stats(const sq_store *s)
{
	if (!s || !s->host || !s->host->log)
		return;
	s->host->log(s->host, MEMD_LOG_INFO,
		     "group commit: %llu requests in %llu transactions (%llu shared one, largest "
		     "group %u); the writer committed %llu transactions in all",
		     (unsigned long long)atomic_load(&s->stats.requests),
		     (unsigned long long)atomic_load(&s->stats.groups),
		     (unsigned long long)s->stats.grouped, (unsigned)s->stats.largest,
		     (unsigned long long)atomic_load(&s->stats.commits));
}

int32_t sq_stats(void *inst, memd_store_stats *ret, memd_error *err)
{
	sq_store *s = inst;
	memd_store_stats st = { .struct_size = sizeof(st) };
	uint32_t size = ret->struct_size;

	(void)err;
	st.write_requests = atomic_load_explicit(&s->stats.requests, memory_order_relaxed);
	st.write_groups = atomic_load_explicit(&s->stats.groups, memory_order_relaxed);
	st.commits = atomic_load_explicit(&s->stats.commits, memory_order_relaxed);
	memcpy(ret, &st, size < sizeof(st) ? size : sizeof(st));
	ret->struct_size = size;
	return 0;
}
