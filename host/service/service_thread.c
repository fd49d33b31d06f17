/* SPDX-License-Identifier: MIT */
#include "service/service_thread.h"

#include <time.h>

void service_thread_init(service_thread *t)
{
	pthread_condattr_t ca;

	pthread_mutex_init(&t->lock, NULL);
	pthread_mutex_init(&t->pass, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&t->wake, &ca);
	pthread_condattr_destroy(&ca);
}

int32_t service_thread_start(service_thread *t, void *(*run)(void *), void *arg,
			     const char *what, memd_error *err)
{
	if (pthread_create(&t->thread, NULL, run, arg) != 0)
		return memd_error_set(err, MEMD_EIO, 0, "the %s's thread did not start", what);
	t->started = 1;
	return 0;
}

void service_thread_stop(service_thread *t)
{
	pthread_mutex_lock(&t->lock);
	t->stopping = 1;
	t->cancel = 1;
	pthread_cond_broadcast(&t->wake);
	pthread_mutex_unlock(&t->lock);
	if (t->started)
		pthread_join(t->thread, NULL);
	t->started = 0;
}

void service_thread_destroy(service_thread *t)
{
	pthread_mutex_destroy(&t->lock);
	pthread_mutex_destroy(&t->pass);
	pthread_cond_destroy(&t->wake);
}
