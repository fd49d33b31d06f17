/* SPDX-License-Identifier: MIT */
#include "watchdog.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#define NS_PER_SEC 1000000000LL

struct http_watchdog {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	int stop;
	int64_t tick_ns;
	http_req *head;
	http_watchdog_fire_fn fire;
	void *ud;
};

static void unlink_req(http_watchdog *wd, http_req *rq)
{
	if (rq->wd_prev)
		rq->wd_prev->wd_next = rq->wd_next;
	else
		wd->head = rq->wd_next;
	if (rq->wd_next)
		rq->wd_next->wd_prev = rq->wd_prev;
	rq->wd_prev = rq->wd_next = NULL;
	rq->receiving = 0;
}

static void *run(void *arg)
{
	http_watchdog *wd = arg;

	pthread_mutex_lock(&wd->lock);
	while (!wd->stop) {
		struct timespec until;
		int64_t now = http_now_ns();
		http_req *rq = wd->head;

		while (rq) {
			http_req *next = rq->wd_next;
			if (now > rq->deadline_ns) {
				unlink_req(wd, rq);
				pthread_mutex_lock(&rq->lock);
				if (!rq->aborted)
					wd->fire(wd->ud, rq);
				pthread_mutex_unlock(&rq->lock);
			}
			rq = next;
		}
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += wd->tick_ns % NS_PER_SEC;
		until.tv_sec += wd->tick_ns / NS_PER_SEC + until.tv_nsec / NS_PER_SEC;
		until.tv_nsec %= NS_PER_SEC;
		while (!wd->stop && pthread_cond_timedwait(&wd->wake, &wd->lock, &until) == EINTR)
			;
	}
	pthread_mutex_unlock(&wd->lock);
	return NULL;
}

http_watchdog *http_watchdog_start(int64_t tick_ns, http_watchdog_fire_fn fire, void *ud)
{
	http_watchdog *wd = calloc(1, sizeof(*wd));
	if (!wd)
		return NULL;
	wd->tick_ns = tick_ns;
	wd->fire = fire;
	wd->ud = ud;
	pthread_mutex_init(&wd->lock, NULL);
	pthread_cond_init(&wd->wake, NULL);
	if (pthread_create(&wd->thread, NULL, run, wd) != 0) {
		pthread_cond_destroy(&wd->wake);
		pthread_mutex_destroy(&wd->lock);
		free(wd);
		return NULL;
	}
	return wd;
}

void http_watchdog_stop(http_watchdog *wd)
{
	if (!wd)
		return;
	pthread_mutex_lock(&wd->lock);
	wd->stop = 1;
	pthread_cond_signal(&wd->wake);
	pthread_mutex_unlock(&wd->lock);
	pthread_join(wd->thread, NULL);
	pthread_cond_destroy(&wd->wake);
	pthread_mutex_destroy(&wd->lock);
	free(wd);
}

void http_watchdog_add(http_watchdog *wd, http_req *rq)
{
	pthread_mutex_lock(&wd->lock);
	if (!rq->receiving) {
		rq->receiving = 1;
		rq->wd_prev = NULL;
		rq->wd_next = wd->head;
		if (wd->head)
			wd->head->wd_prev = rq;
		wd->head = rq;
	}
	pthread_mutex_unlock(&wd->lock);
}

void http_watchdog_remove(http_watchdog *wd, http_req *rq)
{
	pthread_mutex_lock(&wd->lock);
	if (rq->receiving)
		unlink_req(wd, rq);
	pthread_mutex_unlock(&wd->lock);
}
