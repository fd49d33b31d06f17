/* SPDX-License-Identifier: MIT */
/*
 * service_thread: the skeleton of the facade's background threads (the
 * lane watcher, the memory worker): a lock, a wake condition on
 * CLOCK_MONOTONIC (for timed waits between passes), a mutex that keeps
 * passes one at a time, the thread, and the flags that close it. What the
 * thread does between its wakes is its owner's.
 */
#ifndef MEMD_HOST_SERVICE_THREAD_H
#define MEMD_HOST_SERVICE_THREAD_H

#include <pthread.h>
#include <stdint.h>

#include <memd/plugin.h>

typedef struct service_thread {
	pthread_mutex_t lock;      /* stopping, and whatever the owner guards with it */
	pthread_cond_t wake;       /* CLOCK_MONOTONIC; broadcast on stop */
	pthread_mutex_t pass;      /* one pass at a time */
	pthread_t thread;
	int started;
	int stopping;              /* under lock: the thread returns when it sees it */
	volatile int32_t cancel;   /* the thread's calls give up once closing */
} service_thread;

/* Initialises t's lock, wake condition and pass mutex; the thread is not
 * started. Cannot fail. */
void service_thread_init(service_thread *t);

/* Starts t's thread running run(arg). 0, or MEMD_EIO with err saying
 * "the <what>'s thread did not start". */
int32_t service_thread_start(service_thread *t, void *(*run)(void *), void *arg,
			     const char *what, memd_error *err);

/* Sets stopping and cancel, wakes the thread and waits for it to return.
 * Idempotent; does nothing more when the thread was never started. */
void service_thread_stop(service_thread *t);

/* Destroys what service_thread_init made; the thread must be stopped. */
void service_thread_destroy(service_thread *t);

#endif
