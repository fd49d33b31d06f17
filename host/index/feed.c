/* SPDX-License-Identifier: MIT */
#include "feed.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FEED_CHUNK 65536
#define FEED_RECS_MIN 64
#define US_PER_MS 1000
#define US_PER_SEC 1000000
#define NS_PER_US 1000
/* Log a failure streak at its start and then every this many attempts. */
#define FEED_LOG_EVERY 20

/* ---- batches ------------------------------------------------------------------ */

typedef struct chunk {
	struct chunk *next;
	size_t used, cap;
	char data[];
} chunk;

struct feed_batch {
	feed_rec *recs;
	size_t n, cap;
	chunk *chunks; /* newest first */
};

feed_batch *feed_batch_new(void)
{
	return calloc(1, sizeof(feed_batch));
}

static void free_chunks(chunk *c)
{
	while (c) {
		chunk *next = c->next;
		free(c);
		c = next;
	}
}

void feed_batch_free(feed_batch *b)
{
	if (!b)
		return;
	free_chunks(b->chunks);
	free(b->recs);
	free(b);
}

void feed_batch_reset(feed_batch *b)
{
	b->n = 0;
	if (b->chunks) {
		free_chunks(b->chunks->next);
		b->chunks->next = NULL;
		b->chunks->used = 0;
	}
}

size_t feed_batch_count(const feed_batch *b)
{
	return b->n;
}

const feed_rec *feed_batch_records(const feed_batch *b)
{
	return b->recs;
}

/* A copy of s in b's chunks; s NULL gives dflt (static or NULL). */
static int copy_str(feed_batch *b, const char *s, const char *dflt, const char **ret)
{
	size_t n;
	if (!s) {
		*ret = dflt;
		return 0;
	}
	n = strlen(s) + 1;
	if (!b->chunks || b->chunks->cap - b->chunks->used < n) {
		size_t cap = n > FEED_CHUNK ? n : FEED_CHUNK;
		chunk *c = malloc(sizeof(*c) + cap);
		if (!c)
			return -1;
		c->used = 0;
		c->cap = cap;
		c->next = b->chunks;
		b->chunks = c;
	}
	memcpy(b->chunks->data + b->chunks->used, s, n);
	*ret = b->chunks->data + b->chunks->used;
	b->chunks->used += n;
	return 0;
}

static feed_rec *next_rec(feed_batch *b)
{
	if (b->n == b->cap) {
		size_t cap = b->cap ? b->cap * 2 : FEED_RECS_MIN;
		feed_rec *r = realloc(b->recs, cap * sizeof(*r));
		if (!r)
			return NULL;
		b->recs = r;
		b->cap = cap;
	}
	memset(&b->recs[b->n], 0, sizeof(b->recs[b->n]));
	return &b->recs[b->n];
}

static int32_t fill_event(feed_batch *b, feed_rec *r, const memd_event *e)
{
	if (copy_str(b, e->id, "", &r->event_id) < 0 || copy_str(b, e->author, "", &r->author) < 0 ||
	    copy_str(b, e->role, "", &r->role) < 0 || copy_str(b, e->text, "", &r->text) < 0)
		return MEMD_ENOMEM;
	r->seq = e->seq;
	r->timestamp_us = e->timestamp_us;
	return 0;
}

static int32_t fill_memory(feed_batch *b, feed_rec *r, const memd_memory *m)
{
	if (copy_str(b, m->id, "", &r->memory_id) < 0 || copy_str(b, m->text, "", &r->text) < 0 ||
	    copy_str(b, m->kind, NULL, &r->memory_kind) < 0 ||
	    copy_str(b, m->topics_json, "[]", &r->topics) < 0 ||
	    copy_str(b, m->entities_json, "[]", &r->entities) < 0)
		return MEMD_ENOMEM;
	r->timestamp_us = m->updated_us;
	r->expires_us = m->expires_us;
	return 0;
}

int32_t feed_batch_add_memory(feed_batch *b, const memd_memory *m)
{
	feed_rec *r = next_rec(b);

	if (!r)
		return MEMD_ENOMEM;
	r->kind = MEMD_FEED_MEMORY;
	r->position = m->position;
	if (copy_str(b, m->app, "", &r->app) < 0 || copy_str(b, m->user, "", &r->user) < 0 ||
	    fill_memory(b, r, m) < 0)
		return MEMD_ENOMEM;
	b->n++;
	return 0;
}

int32_t feed_batch_add(feed_batch *b, const memd_feed_record *in)
{
	const memd_memory *m = NULL;

	feed_rec *r = next_rec(b);

	if (!r)
		return MEMD_ENOMEM;
	r->kind = in->kind;
	r->position = in->position;
	/* A record of a store below 1.3 is shorter: no memory member. */
	if ((in->kind == MEMD_FEED_MEMORY || in->kind == MEMD_FEED_MEMORY_DELETE) &&
	    in->struct_size >= offsetof(memd_feed_record, memory) + sizeof(in->memory))
		m = in->memory;
	if (copy_str(b, in->app ? in->app : in->event ? in->event->app : m ? m->app : NULL, "",
		     &r->app) < 0 ||
	    copy_str(b, in->user ? in->user : in->event ? in->event->user : m ? m->user : NULL, "",
		     &r->user) < 0 ||
	    copy_str(b, in->session ? in->session : in->event ? in->event->session : NULL, NULL,
		     &r->session) < 0)
		return MEMD_ENOMEM;
	if ((in->kind == MEMD_FEED_EVENT || in->kind == MEMD_FEED_HIDE) && in->event &&
	    fill_event(b, r, in->event) < 0)
		return MEMD_ENOMEM;
	if (m && fill_memory(b, r, m) < 0)
		return MEMD_ENOMEM;
	b->n++;
	return 0;
}

int32_t feed_batch_add_event(feed_batch *b, const char *app, const char *user, const char *session,
			     const memd_event *e)
{
	feed_rec *r = next_rec(b);

	if (!r)
		return MEMD_ENOMEM;
	r->kind = MEMD_FEED_EVENT;
	r->position = e->position;
	if (copy_str(b, app, "", &r->app) < 0 || copy_str(b, user, "", &r->user) < 0 ||
	    copy_str(b, session, "", &r->session) < 0 || fill_event(b, r, e) < 0)
		return MEMD_ENOMEM;
	b->n++;
	return 0;
}

/* ---- the tailer ---------------------------------------------------------------- */

struct feed_tailer {
	store *st;
	hostsvc *svc;
	char *name;
	uint32_t batch;
	feed_consumer c;
	feed_batch *b;

	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cond;     /* CLOCK_MONOTONIC; every state change broadcasts */
	volatile int32_t cancel; /* set at stop: store calls may give up */
	int stop, busy;
	/* A pass is wanted (set by kicks and waiters, cleared when a pass
	 * begins); atomic so that a kick finding it set returns without the
	 * lock: the pass to come reads what the kicker wrote. */
	atomic_int kicked;
	int paused;              /* nesting count */
	int started;             /* consumer start done */
	int loaded;              /* position known (loaded or reset) */
	int64_t pos;             /* every record <= pos is applied */
	int64_t synced;          /* a pass that read the head at this value ended */
	int64_t rebuild_until;   /* skip is not consulted before pos reaches it */
	uint64_t want_gen, done_gen;
	uint32_t failures;
	char last_error[MEMD_ERROR_MSG_MAX];
};

int64_t feed_monotonic_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * US_PER_SEC + ts.tv_nsec / NS_PER_US;
}

/* Wait on t->cond until deadline (monotonic us; 0 = forever). */
static void cond_wait_until(feed_tailer *t, int64_t deadline_us)
{
	struct timespec ts;
	if (!deadline_us) {
		pthread_cond_wait(&t->cond, &t->mu);
		return;
	}
	ts.tv_sec = deadline_us / US_PER_SEC;
	ts.tv_nsec = (deadline_us % US_PER_SEC) * NS_PER_US;
	pthread_cond_timedwait(&t->cond, &t->mu, &ts);
}

static int32_t sink_record(void *ud, const memd_feed_record *r)
{
	return feed_batch_add(ud, r);
}

/* One pass: set-up if needed, skip, one feed_read, apply, save. Runs
 * without the lock. On success *ret_pos is the new position, *ret_n the
 * records read and *ret_head the feed head read before them (-1 if the
 * store cannot tell). */
static int32_t pass(feed_tailer *t, int *need_start, int need_load, int may_skip, int64_t pos,
		    int64_t *ret_pos, size_t *ret_n, int64_t *ret_head, memd_error *err)
{
	memd_call call = { .struct_size = sizeof(call), .cancel = &t->cancel };
	memd_feed_sink sink = { sizeof(sink), t->b, sink_record };
	memd_error ignored = { 0 };
	int64_t head = -1;
	size_t n;
	int32_t r;

	if (*need_start) {
		if (t->c.start && (r = t->c.start(t->c.userdata, err)) < 0)
			return r;
		*need_start = 0;
	}
	if (need_load) {
		pos = 0;
		if (t->c.load && (r = t->c.load(t->c.userdata, &pos, err)) < 0)
			return r;
	}
	if (may_skip && t->c.skip && (r = t->c.skip(t->c.userdata, pos, &pos, err)) < 0)
		return r;
	if (store_feed_head(t->st, &call, &head, &ignored) < 0)
		head = -1;
	feed_batch_reset(t->b);
	if ((r = store_feed_read(t->st, &call, pos, t->batch, &sink, err)) < 0)
		return r;
	n = feed_batch_count(t->b);
	if (n) {
		const feed_rec *recs = feed_batch_records(t->b);
		if ((r = t->c.apply(t->c.userdata, recs, n, err)) < 0)
			return r;
		pos = recs[n - 1].position;
		if (t->c.save && (r = t->c.save(t->c.userdata, pos, &ignored)) < 0)
			hostsvc_log(t->svc, MEMD_LOG_WARN, t->name, "cannot save the position %lld: %s",
				    (long long)pos, ignored.msg);
	}
	*ret_pos = pos;
	*ret_n = n;
	*ret_head = head;
	return 0;
}

static void *run(void *arg)
{
	feed_tailer *t = arg;
	int64_t backoff_ms = 0;

	pthread_mutex_lock(&t->mu);
	while (!t->stop) {
		memd_error err = { .struct_size = sizeof(err) };
		int need_start, need_load, may_skip;
		int64_t pos, head = -1;
		uint64_t gen;
		size_t n = 0;
		int32_t r;

		if (t->paused) {
			cond_wait_until(t, 0);
			continue;
		}
		t->busy = 1;
		t->kicked = 0;
		gen = t->want_gen;
		pos = t->pos;
		need_start = !t->started;
		need_load = !t->loaded;
		may_skip = t->loaded && pos >= t->rebuild_until;
		pthread_mutex_unlock(&t->mu);

		r = pass(t, &need_start, need_load, may_skip, pos, &pos, &n, &head, &err);

		pthread_mutex_lock(&t->mu);
		t->busy = 0;
		if (!need_start)
			t->started = 1;
		if (r < 0 && t->stop) {
			/* A call cut short by the stop is not a failure. */
			pthread_cond_broadcast(&t->cond);
			continue;
		} else if (r < 0) {
			if (t->failures % FEED_LOG_EVERY == 0)
				hostsvc_log(t->svc, MEMD_LOG_WARN, t->name, "%s (attempt %u; retrying)",
					    err.msg, t->failures + 1);
			t->failures++;
			memcpy(t->last_error, err.msg, sizeof(t->last_error));
			t->last_error[sizeof(t->last_error) - 1] = '\0';
			pthread_cond_broadcast(&t->cond);
			backoff_ms = backoff_ms ? backoff_ms * 2 : FEED_BACKOFF_MIN_MS;
			if (backoff_ms > FEED_BACKOFF_MAX_MS)
				backoff_ms = FEED_BACKOFF_MAX_MS;
			/* Kicks do not cut the backoff short (waiters fail fast
			 * meanwhile); a stop or a pause does. */
			int64_t retry_at = feed_monotonic_us() + backoff_ms * US_PER_MS;
			while (!t->stop && !t->paused && feed_monotonic_us() < retry_at)
				cond_wait_until(t, retry_at);
			continue;
		}
		if (t->failures)
			hostsvc_log(t->svc, MEMD_LOG_INFO, t->name, "recovered after %u failures",
				    t->failures);
		t->failures = 0;
		backoff_ms = 0;
		t->loaded = 1;
		t->pos = pos;
		if (n < t->batch) {
			/* The read reached the end of the feed as it was after
			 * head was read: everything up to head is applied. */
			if (head > t->synced)
				t->synced = head;
			t->done_gen = gen;
		}
		pthread_cond_broadcast(&t->cond);
		if (n >= t->batch || t->kicked || t->stop || t->paused)
			continue;
		cond_wait_until(t, feed_monotonic_us() + (int64_t)FEED_POLL_MS * US_PER_MS);
	}
	pthread_mutex_unlock(&t->mu);
	return NULL;
}

int32_t feed_tailer_start(store *s, hostsvc *svc, const char *name, uint32_t batch,
			  const feed_consumer *c, feed_tailer **ret, memd_error *err)
{
	feed_tailer *t = calloc(1, sizeof(*t));
	pthread_condattr_t attr;
	int rc;

	if (!t)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	t->st = s;
	t->svc = svc;
	t->batch = batch ? batch : 1;
	t->c = *c;
	t->name = strdup(name);
	t->b = feed_batch_new();
	if (!t->name || !t->b) {
		free(t->name);
		feed_batch_free(t->b);
		free(t);
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	pthread_mutex_init(&t->mu, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&t->cond, &attr);
	pthread_condattr_destroy(&attr);
	rc = pthread_create(&t->thread, NULL, run, t);
	if (rc != 0) {
		pthread_cond_destroy(&t->cond);
		pthread_mutex_destroy(&t->mu);
		free(t->name);
		feed_batch_free(t->b);
		free(t);
		return memd_error_set(err, MEMD_EIO, 0, "%s: cannot start a thread: %s", name,
				      strerror(rc));
	}
	*ret = t;
	return 0;
}

void feed_tailer_cancel(feed_tailer *t)
{
	if (!t)
		return;
	pthread_mutex_lock(&t->mu);
	t->stop = 1;
	t->cancel = 1;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->mu);
}

void feed_tailer_stop(feed_tailer *t)
{
	if (!t)
		return;
	feed_tailer_cancel(t);
	pthread_join(t->thread, NULL);
	pthread_cond_destroy(&t->cond);
	pthread_mutex_destroy(&t->mu);
	feed_batch_free(t->b);
	free(t->name);
	free(t);
}

void feed_tailer_kick(feed_tailer *t)
{
	/* The writers of one commit group return together and each kicks:
	 * the first one wakes the tailer, the rest find a pass wanted (one
	 * that has not begun yet, so it will read their records) and leave
	 * it at that; a kick during a pass asks for one more after it,
	 * without waking anyone (the tailer checks when the pass ends). */
	int wake = 0;

	if (atomic_load(&t->kicked)) /* seq_cst: against the clear at a pass's start */
		return;
	pthread_mutex_lock(&t->mu);
	if (!t->kicked) {
		t->kicked = 1;
		wake = !t->busy;
	}
	pthread_mutex_unlock(&t->mu);
	/* Broadcast after the unlock: woken under it, the tailer would find
	 * the lock taken and sleep once more on it. Every waiter rechecks its
	 * condition, and the tailer outlives its kickers (index_close). */
	if (wake)
		pthread_cond_broadcast(&t->cond);
}

int32_t feed_tailer_wait(feed_tailer *t, int64_t head, int64_t deadline_us, memd_error *err)
{
	int32_t r = 0;
	uint64_t want = 0;

	pthread_mutex_lock(&t->mu);
	if (head < 0)
		want = ++t->want_gen;
	for (;;) {
		if (head >= 0 ? t->loaded && (t->pos >= head || t->synced >= head)
			      : t->done_gen >= want)
			break;
		if (t->stop) {
			r = memd_error_set(err, MEMD_ECANCELED, 0, "%s: stopping", t->name);
			break;
		}
		if (t->failures >= FEED_FAIL_FAST) {
			r = memd_error_set(err, MEMD_EUNAVAIL, MEMD_ERROR_RETRYABLE, "%s: %s", t->name,
					   t->last_error);
			break;
		}
		if (deadline_us && feed_monotonic_us() >= deadline_us) {
			if (head >= 0)
				r = memd_error_set(err, MEMD_ETIMEDOUT, MEMD_ERROR_RETRYABLE,
						   "%s: still catching up (at feed position %lld of %lld)",
						   t->name, (long long)t->pos, (long long)head);
			else
				r = memd_error_set(err, MEMD_ETIMEDOUT, MEMD_ERROR_RETRYABLE,
						   "%s: still catching up (at feed position %lld)",
						   t->name, (long long)t->pos);
			break;
		}
		if (!t->kicked) {
			t->kicked = 1;
			pthread_cond_broadcast(&t->cond);
		}
		cond_wait_until(t, deadline_us);
	}
	pthread_mutex_unlock(&t->mu);
	return r;
}

int64_t feed_tailer_pause(feed_tailer *t)
{
	int64_t pos;
	pthread_mutex_lock(&t->mu);
	t->paused++;
	pthread_cond_broadcast(&t->cond);
	while (t->busy)
		cond_wait_until(t, 0);
	pos = t->pos;
	pthread_mutex_unlock(&t->mu);
	return pos;
}

void feed_tailer_resume(feed_tailer *t)
{
	pthread_mutex_lock(&t->mu);
	if (t->paused)
		t->paused--;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->mu);
}

void feed_tailer_reset(feed_tailer *t, int64_t position, int64_t until)
{
	pthread_mutex_lock(&t->mu);
	t->pos = position;
	t->loaded = 1;
	t->synced = 0;
	t->rebuild_until = until;
	t->failures = 0;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->mu);
}

int64_t feed_tailer_position(feed_tailer *t)
{
	int64_t pos;
	pthread_mutex_lock(&t->mu);
	pos = t->pos;
	pthread_mutex_unlock(&t->mu);
	return pos;
}
