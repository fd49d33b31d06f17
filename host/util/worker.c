/* SPDX-License-Identifier: MIT */
#include "util/worker.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <memd/plugin.h>

#define WORKER_BUCKETS 1024u /* sessions hash into these (chained) */
#define WORKER_HASH_OFFSET 0xcbf29ce484222325ull
#define WORKER_HASH_PRIME 0x100000001b3ull

typedef struct job {
	char *key;          /* app \0 user \0 session \0 */
	char *user, *session; /* into key */
	uint64_t hash;
	int queued;
	int running;
	int rerun;          /* submitted while running: run once more */
	struct job *next_in_bucket;
	struct job *next_in_queue;
} job;

struct worker {
	pthread_mutex_t lock;
	pthread_cond_t work;  /* queue not empty, or stopping */
	pthread_cond_t idle;  /* active reached 0 */
	pthread_cond_t gone;  /* a job was forgotten (worker_run_exclusive waits) */
	job *buckets[WORKER_BUCKETS];
	job *head, *tail;
	uint32_t active;      /* jobs queued or running */
	int stopping;
	worker_fn fn;
	void *userdata;
	pthread_t *threads;
	uint32_t n_threads;
};

static uint64_t hash_key(const char *k, size_t len)
{
	uint64_t h = WORKER_HASH_OFFSET;
	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)k[i];
		h *= WORKER_HASH_PRIME;
	}
	return h;
}

static void enqueue(worker *w, job *j)
{
	j->queued = 1;
	j->next_in_queue = NULL;
	if (w->tail)
		w->tail->next_in_queue = j;
	else
		w->head = j;
	w->tail = j;
	pthread_cond_signal(&w->work);
}

static void forget(worker *w, job *j)
{
	job **p = &w->buckets[j->hash % WORKER_BUCKETS];
	while (*p != j)
		p = &(*p)->next_in_bucket;
	*p = j->next_in_bucket;
	free(j->key);
	free(j);
	pthread_cond_broadcast(&w->gone);
	if (--w->active == 0)
		pthread_cond_broadcast(&w->idle);
}

static void *run(void *arg)
{
	worker *w = arg;
	pthread_mutex_lock(&w->lock);
	for (;;) {
		job *j;
		while (!w->head && !w->stopping)
			pthread_cond_wait(&w->work, &w->lock);
		if (!w->head)
			break; /* stopping, and nothing is left */
		j = w->head;
		w->head = j->next_in_queue;
		if (!w->head)
			w->tail = NULL;
		j->queued = 0;
		j->running = 1;
		pthread_mutex_unlock(&w->lock);
		{
			memd_scope sc = { .struct_size = sizeof(sc), .app = j->key, .user = j->user,
					  .session = j->session };
			w->fn(w->userdata, &sc);
		}
		pthread_mutex_lock(&w->lock);
		j->running = 0;
		if (j->rerun) {
			j->rerun = 0;
			enqueue(w, j);
		} else {
			forget(w, j);
		}
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

int32_t worker_new(uint32_t threads, worker_fn fn, void *userdata, worker **ret, memd_error *err)
{
	worker *w;
	if (threads == 0 || !fn)
		return memd_error_set(err, MEMD_EINVAL, 0, "worker: needs a job and at least one thread");
	w = calloc(1, sizeof(*w));
	if (!w || !(w->threads = calloc(threads, sizeof(*w->threads)))) {
		free(w);
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->work, NULL);
	pthread_cond_init(&w->idle, NULL);
	pthread_cond_init(&w->gone, NULL);
	w->fn = fn;
	w->userdata = userdata;
	for (uint32_t i = 0; i < threads; i++) {
		if (pthread_create(&w->threads[i], NULL, run, w) != 0) {
			worker_free(w);
			return memd_error_set(err, MEMD_EIO, 0, "worker: cannot start a thread");
		}
		w->n_threads++;
	}
	*ret = w;
	return 0;
}

/* The key of scope's session: app \0 user \0 session \0 (malloc'd; NULL
 * on ENOMEM), its length and hash. */
static char *make_key(const memd_scope *scope, size_t *ret_len, uint64_t *ret_hash)
{
	size_t la = strlen(scope->app), lu = strlen(scope->user), ls = strlen(scope->session);
	size_t len = la + lu + ls + 3;
	char *key = malloc(len);

	if (!key)
		return NULL;
	memcpy(key, scope->app, la + 1);
	memcpy(key + la + 1, scope->user, lu + 1);
	memcpy(key + la + lu + 2, scope->session, ls + 1);
	*ret_len = len;
	*ret_hash = hash_key(key, len);
	return key;
}

/* The job of key, or NULL. Under the lock. */
static job *find(worker *w, const char *key, size_t len, uint64_t h)
{
	job *j;
	for (j = w->buckets[h % WORKER_BUCKETS]; j; j = j->next_in_bucket)
		if (j->hash == h && memcmp(j->key, key, len) == 0)
			return j;
	return NULL;
}

/* A new job for key (taken over), registered and counted but neither
 * queued nor running; NULL on ENOMEM (key is then still the caller's).
 * Under the lock. */
static job *add(worker *w, char *key, uint64_t h)
{
	size_t la = strlen(key), lu = strlen(key + la + 1);
	job *j = calloc(1, sizeof(*j));

	if (!j)
		return NULL;
	j->key = key;
	j->user = key + la + 1;
	j->session = key + la + lu + 2;
	j->hash = h;
	j->next_in_bucket = w->buckets[h % WORKER_BUCKETS];
	w->buckets[h % WORKER_BUCKETS] = j;
	w->active++;
	return j;
}

int32_t worker_submit(worker *w, const memd_scope *scope)
{
	size_t len;
	uint64_t h;
	job *j;
	char *key = make_key(scope, &len, &h);

	if (!key)
		return MEMD_ENOMEM;
	pthread_mutex_lock(&w->lock);
	if (w->stopping) {
		pthread_mutex_unlock(&w->lock);
		free(key);
		return MEMD_ECANCELED;
	}
	if ((j = find(w, key, len, h))) {
		if (j->running && !j->queued)
			j->rerun = 1;
		pthread_mutex_unlock(&w->lock);
		free(key);
		return 0;
	}
	if (!(j = add(w, key, h))) {
		pthread_mutex_unlock(&w->lock);
		free(key);
		return MEMD_ENOMEM;
	}
	enqueue(w, j);
	pthread_mutex_unlock(&w->lock);
	return 0;
}

int32_t worker_run_exclusive(worker *w, const memd_scope *scope, worker_fn fn, void *userdata)
{
	size_t len;
	uint64_t h;
	job *j;
	char *key = make_key(scope, &len, &h);

	if (!key)
		return MEMD_ENOMEM;
	pthread_mutex_lock(&w->lock);
	while (!w->stopping && find(w, key, len, h))
		pthread_cond_wait(&w->gone, &w->lock);
	if (w->stopping) {
		pthread_mutex_unlock(&w->lock);
		free(key);
		return MEMD_ECANCELED;
	}
	if (!(j = add(w, key, h))) {
		pthread_mutex_unlock(&w->lock);
		free(key);
		return MEMD_ENOMEM;
	}
	j->running = 1;
	pthread_mutex_unlock(&w->lock);
	fn(userdata, scope);
	pthread_mutex_lock(&w->lock);
	j->running = 0;
	if (j->rerun) {
		j->rerun = 0;
		enqueue(w, j);
	} else {
		forget(w, j);
	}
	pthread_mutex_unlock(&w->lock);
	return 0;
}

void worker_drain(worker *w)
{
	pthread_mutex_lock(&w->lock);
	while (w->active)
		pthread_cond_wait(&w->idle, &w->lock);
	pthread_mutex_unlock(&w->lock);
}

uint32_t worker_pending(worker *w)
{
	uint32_t n;
	pthread_mutex_lock(&w->lock);
	n = w->active;
	pthread_mutex_unlock(&w->lock);
	return n;
}

void worker_free(worker *w)
{
	if (!w)
		return;
	worker_drain(w);
	pthread_mutex_lock(&w->lock);
	w->stopping = 1;
	pthread_cond_broadcast(&w->work);
	pthread_mutex_unlock(&w->lock);
	for (uint32_t i = 0; i < w->n_threads; i++)
		pthread_join(w->threads[i], NULL);
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->work);
	pthread_cond_destroy(&w->idle);
	pthread_cond_destroy(&w->gone);
	free(w->threads);
	free(w);
}
