/* SPDX-License-Identifier: MIT */
#include "workers.h"

#include <pthread.h>
#include <stdlib.h>

struct http_workers {
	pthread_mutex_t lock;
	pthread_cond_t work;         /* signalled when a request is queued, broadcast at stop */
	int stopping;
	http_req *head, *tail;       /* queued, oldest first (through rq->work_next) */
	http_workers_run_fn run;
	http_workers_drop_fn drop;
	void *ud;
	unsigned n, started;
	pthread_t *threads;
};

static void *worker(void *arg)
{
	http_workers *w = arg;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		http_req *rq;

		while (!w->head && !w->stopping)
			pthread_cond_wait(&w->work, &w->lock);
		if (!w->head)
			break; /* stopping, nothing left */
		rq = w->head;
		w->head = rq->work_next;
		if (!w->head)
			w->tail = NULL;
		rq->work_next = NULL;
		rq->work_queued = 0;
		pthread_mutex_unlock(&w->lock);
		w->run(w->ud, rq);
		pthread_mutex_lock(&w->lock);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

http_workers *http_workers_start(unsigned n, http_workers_run_fn run, http_workers_drop_fn drop,
				 void *ud)
{
	http_workers *w = calloc(1, sizeof(*w));

	if (!w)
		return NULL;
	w->threads = calloc(n ? n : 1, sizeof(*w->threads));
	if (!w->threads) {
		free(w);
		return NULL;
	}
	w->run = run;
	w->drop = drop;
	w->ud = ud;
	w->n = n ? n : 1;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->work, NULL);
	for (; w->started < w->n; w->started++)
		if (pthread_create(&w->threads[w->started], NULL, worker, w) != 0) {
			http_workers_stop(w);
			http_workers_free(w);
			return NULL;
		}
	return w;
}

int32_t http_workers_submit(http_workers *w, http_req *rq)
{
	pthread_mutex_lock(&w->lock);
	if (w->stopping) {
		pthread_mutex_unlock(&w->lock);
		return MEMD_ECANCELED;
	}
	rq->work_next = NULL;
	rq->work_queued = 1;
	if (w->tail)
		w->tail->work_next = rq;
	else
		w->head = rq;
	w->tail = rq;
	pthread_mutex_unlock(&w->lock);
	/* Signalled after the unlock: a worker woken under the lock would
	 * find it taken and sleep again on it at once (a second futex wait
	 * and wake-up per request). A worker that takes rq meanwhile makes
	 * this wake-up spurious, which the wait loop tolerates; the pool
	 * (and the condition) outlives every submit. */
	pthread_cond_signal(&w->work);
	return 0;
}

/* Unlink rq from the queue (it is queued); under w->lock. */
static void unqueue(http_workers *w, http_req *rq)
{
	http_req *prev = NULL;

	for (http_req *q = w->head; q; prev = q, q = q->work_next) {
		if (q != rq)
			continue;
		if (prev)
			prev->work_next = rq->work_next;
		else
			w->head = rq->work_next;
		if (w->tail == rq)
			w->tail = prev;
		break;
	}
	rq->work_next = NULL;
	rq->work_queued = 0;
}

int http_workers_cancel(http_workers *w, http_req *rq)
{
	int queued;

	pthread_mutex_lock(&w->lock);
	queued = rq->work_queued;
	if (queued)
		unqueue(w, rq);
	pthread_mutex_unlock(&w->lock);
	if (queued)
		w->drop(w->ud, rq, 0);
	return queued;
}

void http_workers_stop(http_workers *w)
{
	http_req *left;

	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->stopping = 1;
	left = w->head;
	for (http_req *q = left; q; q = q->work_next)
		q->work_queued = 0;
	w->head = w->tail = NULL;
	pthread_cond_broadcast(&w->work);
	pthread_mutex_unlock(&w->lock);
	/* Read the next link first: drop may hand the request back to its
	 * connection, which may free it at once. */
	while (left) {
		http_req *next = left->work_next;
		left->work_next = NULL;
		w->drop(w->ud, left, 1);
		left = next;
	}
	for (unsigned i = 0; i < w->started; i++)
		pthread_join(w->threads[i], NULL);
	w->started = 0;
}

void http_workers_free(http_workers *w)
{
	if (!w)
		return;
	pthread_cond_destroy(&w->work);
	pthread_mutex_destroy(&w->lock);
	free(w->threads);
	free(w);
}
