/* SPDX-License-Identifier: MIT */
#include "service/jobs.h"

#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/errname.h"
#include "json/event_json.h"
#include "util/uuid.h"

#define US_PER_MS 1000LL
#define US_PER_SEC 1000000LL
#define NS_PER_US 1000LL
#define LOG_JOBS "jobs"

enum job_state { JOB_QUEUED, JOB_RUNNING, JOB_SUCCEEDED, JOB_FAILED, JOB_CANCELED };

static const char *const state_names[] = {
	[JOB_QUEUED] = "queued",
	[JOB_RUNNING] = "running",
	[JOB_SUCCEEDED] = "succeeded",
	[JOB_FAILED] = "failed",
	[JOB_CANCELED] = "canceled",
};

struct job {
	jobs *js;
	char id[UUID_TEXT_LEN + 1];
	const char *kind;           /* static */
	char *app, *user;           /* NULL, NULL = everything */
	enum job_state state;
	uint64_t done, total;
	int64_t created_us, started_us, finished_us; /* unix us; 0 = not yet */
	int64_t finished_mono_us;   /* for forgetting */
	memd_error err;             /* failed or canceled */
	volatile int32_t cancel;    /* the flag fn and its store calls see */
	jobs_fn fn;
	void *userdata;
	struct job *next;           /* newest first */
};

struct jobs {
	hostsvc *svc;
	char *hold_path;            /* the test-only hold; NULL = none */
	pthread_mutex_t lock;
	pthread_cond_t work;        /* a job was queued, or stopping */
	pthread_cond_t done;        /* a job finished (CLOCK_MONOTONIC) */
	job *head;                  /* every job kept, newest first */
	uint32_t n_active;          /* queued or running */
	uint32_t n_running;
	int stopping;
	pthread_t threads[JOBS_THREADS];
	uint32_t n_threads;
};

static int64_t unix_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * US_PER_SEC + ts.tv_nsec / NS_PER_US;
}

static int64_t mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * US_PER_SEC + ts.tv_nsec / NS_PER_US;
}

static void job_free(job *j)
{
	if (!j)
		return;
	free(j->app);
	free(j->user);
	free(j);
}

static int finished(const job *j)
{
	return j->state >= JOB_SUCCEEDED;
}

/* Forget finished jobs past JOBS_KEEP_MS or past the newest
 * JOBS_KEEP_FINISHED. Under lock. */
static void prune(jobs *js)
{
	int64_t now = mono_us();
	uint32_t kept = 0;

	for (job **p = &js->head; *p;) {
		job *j = *p;
		if (finished(j) && (kept >= JOBS_KEEP_FINISHED ||
				    now - j->finished_mono_us > JOBS_KEEP_MS * US_PER_MS)) {
			*p = j->next;
			job_free(j);
			continue;
		}
		if (finished(j))
			kept++;
		p = &j->next;
	}
}

/* Finish j (under lock) with r and err from fn, or the cancel before it ran. */
static void finish(jobs *js, job *j, int32_t r, const memd_error *err)
{
	j->finished_us = unix_us();
	j->finished_mono_us = mono_us();
	if (r == 0) {
		j->state = JOB_SUCCEEDED;
		j->done = j->total;
	} else {
		j->state = r == MEMD_ECANCELED && j->cancel ? JOB_CANCELED : JOB_FAILED;
		j->err = *err;
		j->err.code = r;
	}
	js->n_active--;
	pthread_cond_broadcast(&js->done);
}

static void log_finished(jobs *js, const job *j)
{
	int32_t level = j->state == JOB_FAILED ? MEMD_LOG_WARN : MEMD_LOG_INFO;
	hostsvc_log(js->svc, level, LOG_JOBS, "job %s (%s of %.64s/%.64s) %s after %lld ms%s%s", j->id,
		    j->kind, j->app ? j->app : "*", j->user ? j->user : "*", state_names[j->state],
		    (long long)((j->finished_us - (j->started_us ? j->started_us : j->created_us)) /
				US_PER_MS),
		    j->state == JOB_SUCCEEDED ? "" : ": ", j->state == JOB_SUCCEEDED ? "" : j->err.msg);
}

/* The oldest queued job, or NULL. Under lock. */
static job *oldest_queued(jobs *js)
{
	job *found = NULL;
	for (job *j = js->head; j; j = j->next)
		if (j->state == JOB_QUEUED)
			found = j;
	return found;
}

static void *run(void *arg)
{
	jobs *js = arg;

	pthread_mutex_lock(&js->lock);
	for (;;) {
		memd_error err = { .struct_size = sizeof(err) };
		job *j;
		int32_t r;

		while (!js->stopping && !(j = oldest_queued(js)))
			pthread_cond_wait(&js->work, &js->lock);
		if (js->stopping)
			break; /* jobs_free canceled what was queued */
		j->state = JOB_RUNNING;
		j->started_us = unix_us();
		js->n_running++;
		pthread_mutex_unlock(&js->lock);
		r = j->fn(j->userdata, j, j->app, j->user, &j->cancel, &err);
		if (r < 0 && !err.msg[0])
			memd_error_set(&err, r, 0, "%s", errname(r) ? errname(r) : "failed");
		pthread_mutex_lock(&js->lock);
		js->n_running--;
		finish(js, j, r, &err);
		log_finished(js, j);
		prune(js);
	}
	pthread_mutex_unlock(&js->lock);
	return NULL;
}

int32_t jobs_new(hostsvc *svc, jobs **ret, memd_error *err)
{
	const char *hold = getenv(JOBS_HOLD_ENV);
	pthread_condattr_t cattr;
	jobs *js = calloc(1, sizeof(*js));

	if (!js || (hold && *hold && !(js->hold_path = strdup(hold)))) {
		free(js);
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	js->svc = svc;
	pthread_mutex_init(&js->lock, NULL);
	pthread_cond_init(&js->work, NULL);
	pthread_condattr_init(&cattr);
	pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
	pthread_cond_init(&js->done, &cattr);
	pthread_condattr_destroy(&cattr);
	for (uint32_t i = 0; i < JOBS_THREADS; i++) {
		if (pthread_create(&js->threads[i], NULL, run, js) != 0) {
			jobs_free(js);
			return memd_error_set(err, MEMD_EIO, 0, "jobs: cannot start a thread");
		}
		js->n_threads++;
	}
	if (js->hold_path)
		hostsvc_log(svc, MEMD_LOG_WARN, LOG_JOBS,
			    "%s is set: running jobs wait while %s exists (for tests only)", JOBS_HOLD_ENV,
			    js->hold_path);
	*ret = js;
	return 0;
}

void jobs_free(jobs *js)
{
	int64_t until;
	struct timespec ts;
	int warned = 0;

	if (!js)
		return;
	pthread_mutex_lock(&js->lock);
	js->stopping = 1;
	for (job *j = js->head; j; j = j->next) {
		if (finished(j))
			continue;
		j->cancel = 1;
		if (j->state == JOB_QUEUED) {
			memd_error e = { .struct_size = sizeof(e) };
			memd_error_set(&e, MEMD_ECANCELED, 0, "canceled: memd is closing");
			finish(js, j, MEMD_ECANCELED, &e);
			log_finished(js, j);
		}
	}
	pthread_cond_broadcast(&js->work);
	until = mono_us() + JOBS_CLOSE_WAIT_MS * US_PER_MS;
	while (js->n_running) {
		if (!warned && mono_us() >= until) {
			hostsvc_log(js->svc, MEMD_LOG_WARN, LOG_JOBS,
				    "a canceled job is still running after %d ms; waiting for it to stop",
				    JOBS_CLOSE_WAIT_MS);
			warned = 1;
		}
		if (warned) {
			pthread_cond_wait(&js->done, &js->lock);
			continue;
		}
		ts.tv_sec = until / US_PER_SEC;
		ts.tv_nsec = (until % US_PER_SEC) * NS_PER_US;
		pthread_cond_timedwait(&js->done, &js->lock, &ts);
	}
	pthread_mutex_unlock(&js->lock);
	for (uint32_t i = 0; i < js->n_threads; i++)
		pthread_join(js->threads[i], NULL);
	while (js->head) {
		job *j = js->head;
		js->head = j->next;
		job_free(j);
	}
	pthread_mutex_destroy(&js->lock);
	pthread_cond_destroy(&js->work);
	pthread_cond_destroy(&js->done);
	free(js->hold_path);
	free(js);
}

static int same(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

static json_t *time_or_null(int64_t unix_us)
{
	char buf[EJ_TIME_LEN];
	if (!unix_us)
		return json_null();
	ej_format_time(unix_us, buf);
	return json_string(buf);
}

/* The job's JSON (under lock); NULL on ENOMEM. */
static json_t *job_json(const job *j)
{
	json_t *scope = j->app ? json_pack("{s:s,s:s}", "app", j->app, "user", j->user)
			       : json_object();
	json_t *o = json_pack("{s:s,s:s,s:s,s:o,s:{s:I,s:I},s:o,s:o,s:o,s:b}", "id", j->id, "kind",
			      j->kind, "state", state_names[j->state], "scope", scope, "progress",
			      "done", (json_int_t)j->done, "total", (json_int_t)j->total, "created",
			      time_or_null(j->created_us), "started", time_or_null(j->started_us),
			      "finished", time_or_null(j->finished_us), "cancel_requested",
			      j->cancel != 0);

	if (o && (j->state == JOB_FAILED || j->state == JOB_CANCELED)) {
		json_t *e = ej_error(j->err.code, j->err.msg, j->err.flags);
		if (!e || json_object_set_new(o, "error", e) < 0) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

/* o (consumed) as compact text into *ret_json. */
static int32_t answer(json_t *o, char **ret_json, memd_error *err)
{
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (!text)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	*ret_json = text;
	return 0;
}

/* The job id visible to app (NULL = any). Under lock. */
static job *find(jobs *js, const char *app, const char *id)
{
	for (job *j = js->head; j; j = j->next)
		if (strcmp(j->id, id) == 0)
			return !app || same(app, j->app) ? j : NULL;
	return NULL;
}

static int32_t not_found(const char *id, memd_error *err)
{
	return memd_error_set(err, MEMD_ENOTFOUND, 0,
			      "no job %.64s (finished jobs are forgotten after a while)", id);
}

int32_t jobs_submit(jobs *js, const char *kind, const char *app, const char *user, jobs_fn fn,
		    void *userdata, char **ret_json, int *ret_existing, memd_error *err)
{
	job *j = calloc(1, sizeof(*j));
	json_t *o;

	if (!j || (app && !(j->app = strdup(app))) || (user && !(j->user = strdup(user)))) {
		job_free(j);
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	if (uuid_v7(j->id) < 0) {
		job_free(j);
		return memd_error_set(err, MEMD_EIO, 0, "jobs: no random numbers for a job id");
	}
	j->js = js;
	j->kind = kind;
	j->fn = fn;
	j->userdata = userdata;
	j->created_us = unix_us();
	pthread_mutex_lock(&js->lock);
	prune(js);
	for (job *k = js->head; k; k = k->next) {
		if (finished(k) || strcmp(k->kind, kind) != 0 || !same(k->app, app) ||
		    !same(k->user, user))
			continue;
		o = job_json(k);
		pthread_mutex_unlock(&js->lock);
		job_free(j);
		if (answer(o, ret_json, err) < 0)
			return MEMD_ENOMEM;
		*ret_existing = 1;
		return 0;
	}
	if (js->stopping || js->n_active >= JOBS_ACTIVE_MAX) {
		int stopping = js->stopping;
		pthread_mutex_unlock(&js->lock);
		job_free(j);
		if (stopping)
			return memd_error_set(err, MEMD_EUNAVAIL, MEMD_ERROR_RETRYABLE,
					      "memd is shutting down: no new jobs");
		return memd_error_set(err, MEMD_EUNAVAIL, MEMD_ERROR_RETRYABLE,
				      "%d jobs are queued or running already; try again later",
				      JOBS_ACTIVE_MAX);
	}
	o = job_json(j);
	if (!o) {
		pthread_mutex_unlock(&js->lock);
		job_free(j);
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	j->state = JOB_QUEUED;
	j->next = js->head;
	js->head = j;
	js->n_active++;
	pthread_cond_signal(&js->work);
	pthread_mutex_unlock(&js->lock);
	if (answer(o, ret_json, err) < 0)
		return MEMD_ENOMEM; /* the job runs; the caller can list it */
	*ret_existing = 0;
	return 0;
}

int32_t jobs_get(jobs *js, const char *app, const char *id, char **ret_json, memd_error *err)
{
	json_t *o;
	job *j;

	pthread_mutex_lock(&js->lock);
	prune(js);
	if (!(j = find(js, app, id))) {
		pthread_mutex_unlock(&js->lock);
		return not_found(id, err);
	}
	o = job_json(j);
	pthread_mutex_unlock(&js->lock);
	return answer(o, ret_json, err);
}

int32_t jobs_list(jobs *js, const char *app, char **ret_json, memd_error *err)
{
	json_t *list = json_array(), *o = json_pack("{s:o}", "jobs", list);

	if (!o)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	pthread_mutex_lock(&js->lock);
	prune(js);
	for (job *j = js->head; j; j = j->next) {
		if (app && !same(app, j->app))
			continue;
		if (json_array_append_new(list, job_json(j)) < 0) {
			pthread_mutex_unlock(&js->lock);
			json_decref(o);
			return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
		}
	}
	pthread_mutex_unlock(&js->lock);
	return answer(o, ret_json, err);
}

int32_t jobs_cancel(jobs *js, const char *app, const char *id, char **ret_json, memd_error *err)
{
	json_t *o;
	job *j;

	pthread_mutex_lock(&js->lock);
	prune(js);
	if (!(j = find(js, app, id))) {
		pthread_mutex_unlock(&js->lock);
		return not_found(id, err);
	}
	if (!finished(j)) {
		j->cancel = 1;
		if (j->state == JOB_QUEUED) {
			memd_error e = { .struct_size = sizeof(e) };
			memd_error_set(&e, MEMD_ECANCELED, 0, "canceled before it started");
			finish(js, j, MEMD_ECANCELED, &e);
			log_finished(js, j);
		}
	}
	o = job_json(j);
	pthread_mutex_unlock(&js->lock);
	return answer(o, ret_json, err);
}

/* The test-only hold: wait while the file exists, unless canceled. */
static void hold(job *j)
{
	const struct timespec poll = { 0, JOBS_HOLD_POLL_MS * US_PER_MS * NS_PER_US };
	while (!j->cancel && access(j->js->hold_path, F_OK) == 0)
		nanosleep(&poll, NULL);
}

int job_progress(job *j, uint64_t done, uint64_t total)
{
	jobs *js = j->js;

	pthread_mutex_lock(&js->lock);
	j->done = done;
	j->total = total;
	pthread_mutex_unlock(&js->lock);
	if (js->hold_path)
		hold(j);
	return j->cancel != 0;
}
