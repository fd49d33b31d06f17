/* SPDX-License-Identifier: MIT */
#include "pu_group.h"

#include "plugin_util.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


struct pu_group {
	const pu_group_ops *ops;
	void *store;
	uint32_t max;              /* appends per transaction, >= 1 */
	pthread_mutex_t lock;
	pthread_cond_t cond;       /* a group finished or a connection came back */
	uint64_t gen;              /* + 1 per connection given back */
	pu_group_req *head, *tail;
	pu_group_stats stats;
};

int32_t pu_group_new(const pu_group_ops *ops, void *store, uint32_t max, pu_group **ret_group,
		     memd_error *err)
{
	pthread_condattr_t cattr;
	pu_group *g = calloc(1, sizeof(*g));

	if (!g)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	g->ops = ops;
	g->store = store;
	g->max = max ? max : 1;
	pthread_mutex_init(&g->lock, NULL);
	pthread_condattr_init(&cattr);
	pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
	pthread_cond_init(&g->cond, &cattr);
	pthread_condattr_destroy(&cattr);
	*ret_group = g;
	return 0;
}

void pu_group_free(pu_group *g)
{
	if (!g)
		return;
	pthread_cond_destroy(&g->cond);
	pthread_mutex_destroy(&g->lock);
	free(g);
}

void pu_group_wake(pu_group *g)
{
	if (!g)
		return;
	pthread_mutex_lock(&g->lock);
	g->gen++;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
}

void pu_group_note_written(pu_group *g, size_t n_write)
{
	if (!n_write)
		return;
	pthread_mutex_lock(&g->lock);
	g->stats.n_txns++;
	g->stats.n_appends += n_write;
	if (n_write > g->stats.max_batch)
		g->stats.max_batch = (uint32_t)n_write;
	pthread_mutex_unlock(&g->lock);
}

pu_group_stats pu_group_get_stats(pu_group *g)
{
	pu_group_stats st;

	pthread_mutex_lock(&g->lock);
	st = g->stats;
	pthread_mutex_unlock(&g->lock);
	return st;
}

void pu_group_begin(pu_group_req **m, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		m[i]->status = PU_GROUP_PENDING;
		m[i]->rc = 0;
		m[i]->replayed = 0;
	}
}

void pu_group_fail(pu_group_req **m, size_t n, int32_t r, const memd_error *err)
{
	for (size_t i = 0; i < n; i++) {
		m[i]->rc = r;
		m[i]->err = *err;
		m[i]->status = PU_GROUP_DONE;
	}
}

/* ---- the queue (every function here is called with g->lock held) ---- */

static void queue_add(pu_group *g, pu_group_req *q)
{
	q->queued = 1;
	if (g->tail)
		g->tail->next = q;
	else
		g->head = q;
	g->tail = q;
}

static void queue_remove(pu_group *g, pu_group_req *q)
{
	pu_group_req **pp = &g->head;

	while (*pp && *pp != q)
		pp = &(*pp)->next;
	if (!*pp)
		return;
	*pp = q->next;
	if (g->tail == q) {
		g->tail = g->head;
		while (g->tail && g->tail->next)
			g->tail = g->tail->next;
	}
	q->next = NULL;
	q->queued = 0;
}

static int same_session(const pu_group_req *a, const pu_group_req *b)
{
	return strcmp(a->scope->session, b->scope->session) == 0 &&
	       strcmp(a->scope->user, b->scope->user) == 0 &&
	       strcmp(a->scope->app, b->scope->app) == 0;
}

/* Take up to g->max queued appends to distinct sessions, mine first if it
 * is still queued. */
static size_t queue_take(pu_group *g, pu_group_req *mine, pu_group_req **out)
{
	size_t n = 0;

	if (mine->queued) {
		queue_remove(g, mine);
		out[n++] = mine;
	}
	for (pu_group_req *q = g->head, *next; q && n < g->max; q = next) {
		int clash = 0;
		next = q->next;
		for (size_t i = 0; i < n && !clash; i++)
			clash = same_session(q, out[i]);
		if (clash)
			continue;
		queue_remove(g, q);
		out[n++] = q;
	}
	return n;
}

/* ---- running ---------------------------------------------------------- */

/* The lock order: (app, user, session). */
static int cmp_req(const void *pa, const void *pb)
{
	const pu_group_req *a = *(pu_group_req *const *)pa, *b = *(pu_group_req *const *)pb;
	int c = strcmp(a->scope->app, b->scope->app);

	if (!c)
		c = strcmp(a->scope->user, b->scope->user);
	if (!c)
		c = strcmp(a->scope->session, b->scope->session);
	return c;
}

/* Run m[0, n) on *conn (NULL = the store takes one) and give back what
 * the run leaves in *conn. */
static void run_group(pu_group *g, const memd_call *call, void *conn, pu_group_req **m,
		      size_t n)
{
	if (n > 1)
		qsort(m, n, sizeof(*m), cmp_req);
	g->ops->run(g->store, call, &conn, m, n);
	g->ops->give(g->store, conn);
}

/* Wait on g->cond until woken, or until call's deadline: then, if me is
 * still queued, answer it MEMD_ETIMEDOUT. */
static void wait_turn(pu_group *g, pu_group_req *me)
{
	if (pu_cond_wait_call(&g->cond, &g->lock, me->call) == ETIMEDOUT && me->queued) {
		queue_remove(g, me);
		me->rc = memd_error_set(&me->err, MEMD_ETIMEDOUT, MEMD_ERROR_RETRYABLE,
					"%s: deadline passed waiting for a connection", g->ops->name);
		me->finished = 1;
	}
}

/* Queue me, then either serve a group (mine and others) on an idle
 * connection, or wait until a connection comes back or another thread's
 * group answered me. */
static void append_grouped(pu_group *g, pu_group_req *me)
{
	const memd_call *call = me->call;
	pu_group_req **batch = calloc(g->max, sizeof(*batch));

	if (!batch) {
		me->rc = memd_error_set(&me->err, MEMD_ENOMEM, 0, "out of memory");
		return;
	}
	pthread_mutex_lock(&g->lock);
	queue_add(g, me);
	while (!me->finished) {
		if (me->queued) {
			memd_error terr = { .struct_size = sizeof(terr) };
			void *c = NULL;
			uint64_t seen = g->gen;
			size_t n;
			int32_t r;

			pthread_mutex_unlock(&g->lock);
			r = g->ops->try_take(g->store, call, &c, &terr);
			pthread_mutex_lock(&g->lock);
			if (r < 0 && me->queued) {
				queue_remove(g, me);
				me->rc = r;
				me->err = terr;
				me->finished = 1;
				break;
			}
			if (c) {
				n = queue_take(g, me, batch);
				pthread_mutex_unlock(&g->lock);
				if (n)
					run_group(g, call, c, batch, n);
				else
					g->ops->give(g->store, c);
				pthread_mutex_lock(&g->lock);
				for (size_t i = 0; i < n; i++)
					batch[i]->finished = 1;
				pthread_cond_broadcast(&g->cond);
				continue;
			}
			if (!me->queued || g->gen != seen)
				continue; /* answered, or a connection came back meanwhile */
		}
		wait_turn(g, me);
	}
	pthread_mutex_unlock(&g->lock);
	free(batch);
}

int32_t pu_group_append(pu_group *g, pu_group_req *req, memd_append_result *res,
			memd_error *err)
{
	const memd_append *a = req->a;
	int32_t r;

	req->err.struct_size = sizeof(req->err);
	if (a->n_events) {
		req->seqs = calloc(a->n_events, sizeof(*req->seqs));
		if (!req->seqs)
			return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	if (g->max > 1)
		append_grouped(g, req);
	else
		run_group(g, req->call, NULL, &req, 1);
	r = req->rc;
	if (r == 0) {
		if (a->n_events)
			memcpy(res->seqs, req->seqs, a->n_events * sizeof(*req->seqs));
		res->version = req->version;
		res->flags = req->replayed ? MEMD_APPEND_REPLAYED : 0;
	} else if (err) {
		*err = req->err;
	}
	free(req->seqs);
	req->seqs = NULL;
	return r;
}

void pu_group_log_stats(pu_group *g, const memd_host *host)
{
	pu_group_stats st;

	if (!g || !host || !host->log)
		return;
	st = pu_group_get_stats(g);
	if (st.n_appends)
		host->log(host, MEMD_LOG_DEBUG,
			  "group commit: %llu appends written in %llu transactions (at most %u in one)",
			  (unsigned long long)st.n_appends, (unsigned long long)st.n_txns,
			  (unsigned)st.max_batch);
}
