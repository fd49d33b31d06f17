/* SPDX-License-Identifier: MIT */
#include "plugins/store.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/errname.h"
#include "util/prom.h"

#define NS_PER_SEC 1000000000LL

/* The plugin ops the wrappers time, by name (STORE_OP_<op> indexes). */
#define STORE_OPS(X)                                                                      \
	X(session_create) X(session_get) X(session_list) X(session_update)               \
	X(session_delete) X(append) X(events_load) X(state_get) X(artifact_put)          \
	X(artifact_get) X(artifact_list) X(artifact_versions) X(artifact_delete)          \
	X(user_delete) X(feed_read) X(feed_head) X(cursor_get) X(cursor_set) X(ping)     \
	X(lane_get) X(lane_write) X(lane_list) X(lane_delete) X(lane_prune) X(inbox_put) \
	X(inbox_take) X(inbox_list) X(session_list_ended) X(operation_list)               \
	X(operation_get) X(state_history) X(memory_commit) X(memory_get) X(memory_list)     \
	X(memory_history) X(memory_expire) X(session_list_pending) X(checkpoint_put)      \
	X(checkpoint_put_writes) X(checkpoint_get) X(checkpoint_list) X(checkpoint_delete) \
	X(checkpoint_resumable) X(checkpoint_expire) X(task_put) X(task_get) X(task_list) \
	X(task_delete)
#define STORE_OP_ENUM(op) STORE_OP_##op,
#define STORE_OP_NAME(op) #op,
enum { STORE_OPS(STORE_OP_ENUM) STORE_N_OPS };
static const char *const op_names[STORE_N_OPS] = { STORE_OPS(STORE_OP_NAME) };

/* Failed calls are counted per MEMD_E* code, -1 .. -N_ERR_SLOTS, any
 * other code in one more slot; labelled by errname(). */
#define N_ERR_SLOTS (-MEMD_EFORBIDDEN)
/* Apps whose usage gets series of their own; the others share one. */
#define STORE_USAGE_APPS_MAX 256
#define STORE_USAGE_OTHER "_other"
#define MICRO_PER_UNIT 1e6

/* The usage sums (memd_usage's, but last_prompt_tokens) of one app. */
enum { USAGE_INPUT, USAGE_OUTPUT, USAGE_CACHE_READ, USAGE_CACHE_WRITE, USAGE_COST_MICRO,
       USAGE_N };
typedef struct usage_sum {
	char *app;
	int64_t v[USAGE_N];
} usage_sum;

struct store {
	loader_instance *inst;
	const memd_store_ops *ops;
	void *handle;
	const char *name;
	int serialized;
	pthread_mutex_t lock;
	prom_histogram calls[STORE_N_OPS];                   /* time in the plugin */
	_Atomic uint64_t errors[STORE_N_OPS][N_ERR_SLOTS + 1]; /* last: other codes */
	/* The storage's health, from the writes (store_health). */
	pthread_mutex_t health_lock;
	/* MEMD_ERROR_STORAGE_* of the failed write; 0: healthy. Written under
	 * health_lock; read without it by the write path, so that a healthy
	 * store's writes take no lock for it. */
	_Atomic uint32_t health_flags;
	int64_t health_since_ns;      /* monotonic: when that write failed */
	char health_msg[MEMD_ERROR_MSG_MAX];
	/* Usage the store took (appends, lane writes), by app. */
	pthread_mutex_t usage_lock;
	usage_sum *usage;
	size_t n_usage;
};

/* The ops that write: their results say whether the storage takes writes. */
static int op_writes(size_t op)
{
	switch (op) {
	case STORE_OP_session_create:
	case STORE_OP_session_update:
	case STORE_OP_session_delete:
	case STORE_OP_append:
	case STORE_OP_artifact_put:
	case STORE_OP_artifact_delete:
	case STORE_OP_user_delete:
	case STORE_OP_cursor_set:
	case STORE_OP_lane_write:
	case STORE_OP_memory_commit:
	case STORE_OP_memory_expire:
	case STORE_OP_lane_delete:
	case STORE_OP_lane_prune:
	case STORE_OP_inbox_put:
	case STORE_OP_inbox_take:
	case STORE_OP_checkpoint_put:
	case STORE_OP_checkpoint_put_writes:
	case STORE_OP_checkpoint_delete:
	case STORE_OP_checkpoint_expire:
	case STORE_OP_task_put:
	case STORE_OP_task_delete:
		return 1;
	default:
		return 0;
	}
}

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * NS_PER_SEC + ts.tv_nsec;
}

/* Count one call of op that took ns and returned r. */
static void count_call(store *s, size_t op, int32_t r, int64_t ns)
{
	prom_observe(&s->calls[op], ns);
	if (r < 0) {
		size_t slot = -(int64_t)r <= (int64_t)N_ERR_SLOTS ? (size_t)(-r - 1) : N_ERR_SLOTS;
		atomic_fetch_add_explicit(&s->errors[op][slot], 1, memory_order_relaxed);
	}
}

/* Note a write's result for store_health: a failure with a
 * MEMD_ERROR_STORAGE_* flag marks the storage degraded, a success clears
 * the mark; other failures (conflicts, busy, not found) say nothing
 * about it. */
/* The writing ops that may succeed without writing anything (nothing to
 * prune or expire): such a success says nothing about the storage, so
 * only their failures, and a success that wrote (count_wrote), count. */
static int op_may_write_nothing(size_t op)
{
	return op == STORE_OP_lane_prune || op == STORE_OP_memory_expire ||
	       op == STORE_OP_checkpoint_expire || op == STORE_OP_checkpoint_delete;
}

static void note_health(store *s, size_t op, int32_t r, const memd_error *err, int64_t now_ns)
{
	if (!op_writes(op) || (r < 0 && (!err || !(err->flags & MEMD_ERROR_STORAGE_MASK))))
		return;
	if (r >= 0 && op_may_write_nothing(op))
		return;
	if (r >= 0 && !atomic_load_explicit(&s->health_flags, memory_order_relaxed))
		return; /* healthy, and stays so */
	pthread_mutex_lock(&s->health_lock);
	if (r >= 0) {
		atomic_store_explicit(&s->health_flags, 0, memory_order_relaxed);
	} else {
		atomic_store_explicit(&s->health_flags, err->flags & MEMD_ERROR_STORAGE_MASK,
				      memory_order_relaxed);
		s->health_since_ns = now_ns;
		snprintf(s->health_msg, sizeof(s->health_msg), "%s", err->msg);
	}
	pthread_mutex_unlock(&s->health_lock);
}

int store_health(store *s, store_health_report *ret)
{
	uint32_t flags;
	int degraded;

	pthread_mutex_lock(&s->health_lock);
	flags = atomic_load_explicit(&s->health_flags, memory_order_relaxed);
	degraded = flags != 0;
	if (degraded) {
		ret->flags = flags;
		ret->since_ns = s->health_since_ns;
		memcpy(ret->msg, s->health_msg, sizeof(ret->msg));
	}
	pthread_mutex_unlock(&s->health_lock);
	return degraded;
}

int64_t store_clock_ns(void)
{
	return mono_ns();
}

void store_render_durations(const store *s, prom_buf *b)
{
	char labels[256];

	for (size_t op = 0; op < STORE_N_OPS; op++) {
		if (!prom_count(&s->calls[op]))
			continue;
		snprintf(labels, sizeof(labels), "store=\"%s\",op=\"%s\"", s->name, op_names[op]);
		prom_render_histogram(b, STORE_METRIC_DURATION, labels, &s->calls[op]);
	}
}

void store_render_errors(const store *s, prom_buf *b)
{
	store *m = (store *)s; /* atomic loads take non-const */

	for (size_t op = 0; op < STORE_N_OPS; op++)
		for (size_t c = 0; c <= N_ERR_SLOTS; c++) {
			uint64_t v = atomic_load_explicit(&m->errors[op][c], memory_order_relaxed);
			if (v)
				prom_printf(b,
					    STORE_METRIC_ERRORS
					    "{store=\"%s\",op=\"%s\",code=\"%s\"} %" PRIu64 "\n",
					    s->name, op_names[op],
					    c < N_ERR_SLOTS ? errname(-(int32_t)c - 1) : "other", v);
		}
}

void store_render_stats(store *s, prom_buf *b)
{
	memd_store_stats st = { .struct_size = sizeof(st) };
	memd_error err = { .struct_size = sizeof(err) };
	int32_t r;

	if (!s->ops->stats)
		return;
	if (s->serialized)
		pthread_mutex_lock(&s->lock);
	r = s->ops->stats(s->handle, &st, &err);
	if (s->serialized)
		pthread_mutex_unlock(&s->lock);
	if (r < 0)
		return;
	prom_printf(b, STORE_METRIC_WRITES "{store=\"%s\"} %" PRIu64 "\n", s->name, st.write_requests);
	prom_printf(b, STORE_METRIC_GROUPS "{store=\"%s\"} %" PRIu64 "\n", s->name, st.write_groups);
}

/* v as a label value: backslash and double quote escaped. */
static void label_value(const char *v, char *out, size_t cap)
{
	size_t n = 0;
	for (; *v && n + 3 < cap; v++) {
		if (*v == '\\' || *v == '"')
			out[n++] = '\\';
		out[n++] = *v;
	}
	out[n] = '\0';
}

void store_render_usage(store *s, prom_buf *b)
{
	static const char *const names[USAGE_N] = {
		STORE_METRIC_USAGE "input_tokens_total", STORE_METRIC_USAGE "output_tokens_total",
		STORE_METRIC_USAGE "cache_read_tokens_total",
		STORE_METRIC_USAGE "cache_write_tokens_total", STORE_METRIC_USAGE "cost_usd_total",
	};
	char app[2 * MEMD_ID_MAX + 1];

	pthread_mutex_lock(&s->usage_lock);
	for (size_t k = 0; k < USAGE_N; k++) {
		prom_printf(b, "# HELP %s Usage reported by turn ends and appends, by app.\n"
			       "# TYPE %s counter\n", names[k], names[k]);
		for (size_t i = 0; i < s->n_usage; i++) {
			label_value(s->usage[i].app, app, sizeof(app));
			if (k == USAGE_COST_MICRO)
				prom_printf(b, "%s{app=\"%s\"} %.6f\n", names[k], app,
					    (double)s->usage[i].v[k] / MICRO_PER_UNIT);
			else
				prom_printf(b, "%s{app=\"%s\"} %" PRId64 "\n", names[k], app,
					    s->usage[i].v[k]);
		}
	}
	pthread_mutex_unlock(&s->usage_lock);
}

int32_t store_new(loader_instance *inst, store **ret, memd_error *err)
{
	store *s;
	int32_t r;

	r = loader_require_kind(loader_instance_plugin(inst), MEMD_KIND_STORE,
				loader_instance_name(inst), err);
	if (r < 0)
		return r;
	s = calloc(1, sizeof(*s));
	if (!s)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	s->inst = inst;
	s->ops = loader_store_ops(loader_instance_plugin(inst));
	s->handle = loader_instance_handle(inst);
	s->name = loader_instance_name(inst);
	s->serialized = loader_instance_serialized(inst);
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->health_lock, NULL);
	pthread_mutex_init(&s->usage_lock, NULL);
	*ret = s;
	return 0;
}

void store_free(store *s)
{
	if (!s)
		return;
	loader_instance_destroy(s->inst);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->health_lock);
	pthread_mutex_destroy(&s->usage_lock);
	for (size_t i = 0; i < s->n_usage; i++)
		free(s->usage[i].app);
	free(s->usage);
	free(s);
}

const char *store_name(const store *s)
{
	return s->name;
}

uint32_t store_minor(const store *s)
{
	return loader_descriptor(loader_instance_plugin(s->inst))->abi_minor;
}

int32_t store_fix_error(const char *name, const char *op, int32_t r, memd_error *err)
{
	char msg[2 * MEMD_ERROR_MSG_MAX];

	if (r >= 0 || !err)
		return r;
	if (err->code != r || !err->msg[0])
		snprintf(msg, sizeof(msg), "%s: %s failed (error %d)", name, op, (int)r);
	else
		snprintf(msg, sizeof(msg), "%s: %s", name, err->msg);
	err->struct_size = sizeof(*err);
	if (err->code != r)
		err->flags = r == MEMD_EUNAVAIL ? MEMD_ERROR_RETRYABLE : 0;
	err->code = r;
	memcpy(err->msg, msg, sizeof(err->msg) - 1);
	err->msg[sizeof(err->msg) - 1] = '\0';
	return r;
}

/* Forward op to the plugin: ENOTSUP if absent, serialized if needed, err
 * always filled on failure; the call is timed (waiting for the lock of a
 * serialized plugin included) and counted. */
#define STORE_FORWARD(s, op, err, ...)                                                    \
	do {                                                                              \
		int32_t r_;                                                               \
		int64_t t0_, t1_;                                                         \
		if (!(s)->ops->op)                                                        \
			return memd_error_set(err, MEMD_ENOTSUP, 0, "%s: does not support %s", \
					      (s)->name, #op);                            \
		if (err)                                                                  \
			memset(err, 0, sizeof(*err));                                     \
		t0_ = mono_ns();                                                          \
		if ((s)->serialized)                                                      \
			pthread_mutex_lock(&(s)->lock);                                   \
		r_ = (s)->ops->op((s)->handle, __VA_ARGS__, err);                         \
		if ((s)->serialized)                                                      \
			pthread_mutex_unlock(&(s)->lock);                                 \
		t1_ = mono_ns();                                                          \
		count_call((s), STORE_OP_##op, r_, t1_ - t0_);                           \
		r_ = store_fix_error((s)->name, #op, r_, err);                            \
		note_health((s), STORE_OP_##op, r_, err, t1_);                           \
		return r_;                                                                \
	} while (0)

/* Records a plugin delivers reach the host's sinks host-sized: a record
 * whose struct_size ends before members the host knows (a store built
 * against an older minor) is copied into a zeroed host-sized one, so
 * that every reader sees those members as not set instead of reading
 * past the plugin's record. A record at least host-sized goes through
 * as it is. The norm_* sinks wrap the caller's sink (NULL stays NULL). */
#define NORM_COPY(type, rec, copy)                                                        \
	((rec)->struct_size >= sizeof(type)                                               \
		 ? (rec)                                                                  \
		 : (memset(&(copy), 0, sizeof(copy)),                                     \
		    memcpy(&(copy), (rec), (rec)->struct_size),                           \
		    (copy).struct_size = sizeof(type), (const type *)&(copy)))

static int32_t norm_session(void *ud, const memd_session *rec)
{
	const memd_session_sink *out = ud;
	memd_session copy;
	return out->session(out->userdata, NORM_COPY(memd_session, rec, copy));
}

static int32_t norm_event(void *ud, const memd_event *rec)
{
	const memd_event_sink *out = ud;
	memd_event copy;
	return out->event(out->userdata, NORM_COPY(memd_event, rec, copy));
}

/* A feed record and its event, both host-sized. */
static int32_t norm_feed(void *ud, const memd_feed_record *rec)
{
	const memd_feed_sink *out = ud;
	memd_feed_record copy;
	memd_event ev;
	const memd_feed_record *r = NORM_COPY(memd_feed_record, rec, copy);

	if (r->event && r->event->struct_size < sizeof(memd_event)) {
		if (r != &copy) {
			copy = *r;
			r = &copy;
		}
		copy.event = NORM_COPY(memd_event, rec->event, ev);
	}
	return out->record(out->userdata, r);
}

static int32_t norm_lane(void *ud, const memd_lane *rec)
{
	const memd_lane_sink *out = ud;
	memd_lane copy;
	return out->lane(out->userdata, NORM_COPY(memd_lane, rec, copy));
}

static int32_t norm_item(void *ud, const memd_inbox_item *rec)
{
	const memd_inbox_sink *out = ud;
	memd_inbox_item copy;
	return out->item(out->userdata, NORM_COPY(memd_inbox_item, rec, copy));
}

#define NORM_SINK(kind, fn, name, out)                                                    \
	memd_##kind##_sink name##_ = { sizeof(name##_), (void *)(out), fn };                \
	const memd_##kind##_sink *name = (out) ? &name##_ : NULL

int32_t store_session_create(store *s, const memd_call *call, const memd_session *in,
			     const char *state_delta_json, const memd_session_sink *out,
			     memd_error *err)
{
	NORM_SINK(session, norm_session, norm, out);
	STORE_FORWARD(s, session_create, err, call, in, state_delta_json, norm);
}

int32_t store_session_get(store *s, const memd_call *call, const memd_scope *scope,
			  const memd_session_sink *out, memd_error *err)
{
	NORM_SINK(session, norm_session, norm, out);
	STORE_FORWARD(s, session_get, err, call, scope, norm);
}

int32_t store_session_list(store *s, const memd_call *call, const memd_scope *scope,
			   const memd_session_query *q, const memd_session_sink *out,
			   memd_error *err)
{
	NORM_SINK(session, norm_session, norm, out);
	STORE_FORWARD(s, session_list, err, call, scope, q, norm);
}

int32_t store_session_update(store *s, const memd_call *call, const memd_scope *scope,
			     const memd_session_update *p, const memd_session_sink *out,
			     memd_error *err)
{
	NORM_SINK(session, norm_session, norm, out);
	STORE_FORWARD(s, session_update, err, call, scope, p, norm);
}

int32_t store_session_delete(store *s, const memd_call *call, const memd_scope *scope,
			     memd_error *err)
{
	STORE_FORWARD(s, session_delete, err, call, scope);
}

/* Add the usage u (a host-made record) written for app to its sums. An
 * app past STORE_USAGE_APPS_MAX goes to STORE_USAGE_OTHER; without
 * memory it is not counted. */
static usage_sum *usage_find(store *s, const char *app)
{
	for (size_t i = 0; i < s->n_usage; i++)
		if (strcmp(s->usage[i].app, app) == 0)
			return &s->usage[i];
	return NULL;
}

static void count_usage(store *s, const char *app, const memd_usage *u)
{
	usage_sum *sum;

	if (!u || !app)
		return;
	pthread_mutex_lock(&s->usage_lock);
	sum = usage_find(s, app);
	if (!sum && s->n_usage >= STORE_USAGE_APPS_MAX - 1) {
		app = STORE_USAGE_OTHER; /* the last slot is kept for the rest */
		sum = usage_find(s, app);
	}
	if (!sum) {
		usage_sum *grown = realloc(s->usage, (s->n_usage + 1) * sizeof(*grown));
		if (grown) {
			s->usage = grown;
			memset(&grown[s->n_usage], 0, sizeof(*grown));
			if ((grown[s->n_usage].app = strdup(app)))
				sum = &grown[s->n_usage++];
		}
	}
	if (sum) {
		sum->v[USAGE_INPUT] += u->input_tokens;
		sum->v[USAGE_OUTPUT] += u->output_tokens;
		sum->v[USAGE_CACHE_READ] += u->cache_read_tokens;
		sum->v[USAGE_CACHE_WRITE] += u->cache_write_tokens;
		sum->v[USAGE_COST_MICRO] += u->cost_micro_usd;
	}
	pthread_mutex_unlock(&s->usage_lock);
}

static int32_t append_forward(store *s, const memd_call *call, const memd_scope *scope,
			      const memd_append *a, memd_append_result *res, memd_error *err)
{
	STORE_FORWARD(s, append, err, call, scope, a, res);
}

int32_t store_append(store *s, const memd_call *call, const memd_scope *scope,
		     const memd_append *a, memd_append_result *res, memd_error *err)
{
	int32_t r;

	/* A store before 1.2 reads neither op nor usage: the append would
	 * be done without its operation. */
	if (a->op && store_minor(s) < 2)
		return memd_error_set(err, MEMD_ENOTSUP, 0,
				      "%s: does not support transcript operations (a store of "
				      "ABI 1.2 or later does)", s->name);
	r = append_forward(s, call, scope, a, res, err);

	/* Usage reaches only a store of minor 2 or later, and a replay
	 * wrote nothing. */
	if (r == 0 && store_minor(s) >= 2 && a->struct_size >= sizeof(*a) &&
	    !(res->flags & MEMD_APPEND_REPLAYED))
		count_usage(s, scope->app, a->usage);
	return r;
}

int32_t store_events_load(store *s, const memd_call *call, const memd_scope *scope,
			  const memd_event_query *q, const memd_event_sink *out, memd_error *err)
{
	NORM_SINK(event, norm_event, norm, out);
	STORE_FORWARD(s, events_load, err, call, scope, q, norm);
}

int32_t store_state_get(store *s, const memd_call *call, const memd_scope *scope,
			const memd_text_sink *out, memd_error *err)
{
	STORE_FORWARD(s, state_get, err, call, scope, out);
}

int32_t store_artifact_put(store *s, const memd_call *call, const memd_scope *scope,
			   const memd_artifact *a, int64_t *ret_version, memd_error *err)
{
	STORE_FORWARD(s, artifact_put, err, call, scope, a, ret_version);
}

int32_t store_artifact_get(store *s, const memd_call *call, const memd_scope *scope,
			   const char *name, int64_t version, const memd_artifact_sink *out,
			   memd_error *err)
{
	STORE_FORWARD(s, artifact_get, err, call, scope, name, version, out);
}

int32_t store_artifact_list(store *s, const memd_call *call, const memd_scope *scope,
			    const memd_artifact_sink *out, memd_error *err)
{
	STORE_FORWARD(s, artifact_list, err, call, scope, out);
}

int32_t store_artifact_versions(store *s, const memd_call *call, const memd_scope *scope,
				const char *name, const memd_artifact_sink *out, memd_error *err)
{
	STORE_FORWARD(s, artifact_versions, err, call, scope, name, out);
}

int32_t store_artifact_delete(store *s, const memd_call *call, const memd_scope *scope,
			      const char *name, memd_error *err)
{
	STORE_FORWARD(s, artifact_delete, err, call, scope, name);
}

int32_t store_user_delete(store *s, const memd_call *call, const memd_scope *scope,
			  memd_error *err)
{
	STORE_FORWARD(s, user_delete, err, call, scope);
}

int32_t store_feed_read(store *s, const memd_call *call, int64_t after, uint32_t limit,
			const memd_feed_sink *out, memd_error *err)
{
	NORM_SINK(feed, norm_feed, norm, out);
	STORE_FORWARD(s, feed_read, err, call, after, limit, norm);
}

int32_t store_feed_head(store *s, const memd_call *call, int64_t *ret_position, memd_error *err)
{
	STORE_FORWARD(s, feed_head, err, call, ret_position);
}

int32_t store_cursor_get(store *s, const memd_call *call, const char *name,
			 int64_t *ret_position, memd_error *err)
{
	STORE_FORWARD(s, cursor_get, err, call, name, ret_position);
}

int32_t store_cursor_set(store *s, const memd_call *call, const char *name, int64_t position,
			 memd_error *err)
{
	STORE_FORWARD(s, cursor_set, err, call, name, position);
}

int32_t store_ping(store *s, const memd_call *call, memd_error *err)
{
	if (!s->ops->ping)
		return 0;
	STORE_FORWARD(s, ping, err, call);
}

int32_t store_lane_get(store *s, const memd_call *call, const memd_scope *scope,
		       const char *key, const memd_lane_sink *out,
		       const memd_session_sink *session_out, memd_error *err)
{
	NORM_SINK(lane, norm_lane, norm, out);
	NORM_SINK(session, norm_session, snorm, session_out);
	STORE_FORWARD(s, lane_get, err, call, scope, key, norm, snorm);
}

static int32_t lane_write_forward(store *s, const memd_call *call, const memd_lane_write *w,
				  const memd_lane_sink *out, memd_error *err)
{
	NORM_SINK(lane, norm_lane, norm, out);
	STORE_FORWARD(s, lane_write, err, call, w, norm);
}

int32_t store_lane_write(store *s, const memd_call *call, const memd_lane_write *w,
			 const memd_lane_sink *out, memd_error *err)
{
	int32_t r = lane_write_forward(s, call, w, out, err);

	if (r == 0 && w->lane)
		count_usage(s, w->lane->app, w->usage);
	return r;
}

int32_t store_lane_list(store *s, const memd_call *call, const memd_lane_query *q,
			const memd_lane_sink *out, memd_error *err)
{
	NORM_SINK(lane, norm_lane, norm, out);
	STORE_FORWARD(s, lane_list, err, call, q, norm);
}

int32_t store_lane_delete(store *s, const memd_call *call, const memd_scope *scope,
			  const char *key, memd_error *err)
{
	STORE_FORWARD(s, lane_delete, err, call, scope, key);
}

/* A prune or expire that removed rows wrote: the storage takes writes
 * again (see op_may_write_nothing). */
static void count_wrote(store *s, int32_t r, uint32_t count)
{
	if (r == 0 && count > 0 && atomic_load_explicit(&s->health_flags, memory_order_relaxed)) {
		pthread_mutex_lock(&s->health_lock);
		atomic_store_explicit(&s->health_flags, 0, memory_order_relaxed);
		pthread_mutex_unlock(&s->health_lock);
	}
}

static int32_t lane_prune_forward(store *s, const memd_call *call, int64_t updated_before_us,
				  uint32_t limit, uint32_t *ret_count, memd_error *err)
{
	STORE_FORWARD(s, lane_prune, err, call, updated_before_us, limit, ret_count);
}

int32_t store_lane_prune(store *s, const memd_call *call, int64_t updated_before_us,
			 uint32_t limit, uint32_t *ret_count, memd_error *err)
{
	uint32_t n = 0;
	int32_t r = lane_prune_forward(s, call, updated_before_us, limit, &n, err);

	count_wrote(s, r, n);
	if (r == 0)
		*ret_count = n;
	return r;
}

int32_t store_inbox_put(store *s, const memd_call *call, const memd_scope *scope,
			const char *key, const memd_inbox_item *item, uint32_t *ret_depth,
			memd_error *err)
{
	STORE_FORWARD(s, inbox_put, err, call, scope, key, item, ret_depth);
}

int32_t store_inbox_take(store *s, const memd_call *call, const memd_scope *scope,
			 const char *key, const char *turn_id, int64_t now_us,
			 const memd_inbox_sink *out, uint32_t *ret_depth, memd_error *err)
{
	NORM_SINK(inbox, norm_item, norm, out);
	STORE_FORWARD(s, inbox_take, err, call, scope, key, turn_id, now_us, norm, ret_depth);
}

int32_t store_inbox_list(store *s, const memd_call *call, const memd_scope *scope,
			 const char *key, const memd_inbox_sink *out, memd_error *err)
{
	NORM_SINK(inbox, norm_item, norm, out);
	STORE_FORWARD(s, inbox_list, err, call, scope, key, norm);
}

int32_t store_session_list_ended(store *s, const memd_call *call, int64_t ended_before_us,
				 uint32_t limit, const memd_session_sink *out, memd_error *err)
{
	NORM_SINK(session, norm_session, norm, out);
	STORE_FORWARD(s, session_list_ended, err, call, ended_before_us, limit, norm);
}

int32_t store_operation_list(store *s, const memd_call *call, const memd_scope *scope,
			     uint32_t limit, const memd_operation_sink *out, memd_error *err)
{
	STORE_FORWARD(s, operation_list, err, call, scope, limit, out);
}

int32_t store_operation_get(store *s, const memd_call *call, const memd_scope *scope,
			    const char *id, const memd_operation_sink *out, memd_error *err)
{
	STORE_FORWARD(s, operation_get, err, call, scope, id, out);
}

int32_t store_state_history(store *s, const memd_call *call, const memd_scope *scope,
			    const memd_state_history_query *q, const memd_state_change_sink *out,
			    memd_error *err)
{
	STORE_FORWARD(s, state_history, err, call, scope, q, out);
}

int32_t store_memory_commit(store *s, const memd_call *call, const memd_scope *scope,
			    const memd_memory_commit *c, const memd_memory_sink *out,
			    memd_error *err)
{
	STORE_FORWARD(s, memory_commit, err, call, scope, c, out);
}

int32_t store_memory_get(store *s, const memd_call *call, const memd_scope *scope,
			 const char *id, int64_t now_us, const memd_memory_sink *out,
			 memd_error *err)
{
	STORE_FORWARD(s, memory_get, err, call, scope, id, now_us, out);
}

int32_t store_memory_list(store *s, const memd_call *call, const memd_scope *scope,
			  const memd_memory_query *q, const memd_memory_sink *out,
			  memd_error *err)
{
	STORE_FORWARD(s, memory_list, err, call, scope, q, out);
}

int32_t store_memory_history(store *s, const memd_call *call, const memd_scope *scope,
			     const char *id, const memd_memory_change_sink *out, memd_error *err)
{
	STORE_FORWARD(s, memory_history, err, call, scope, id, out);
}

static int32_t memory_expire_forward(store *s, const memd_call *call, int64_t now_us,
				     uint32_t limit, uint32_t *ret_count, memd_error *err)
{
	STORE_FORWARD(s, memory_expire, err, call, now_us, limit, ret_count);
}

int32_t store_memory_expire(store *s, const memd_call *call, int64_t now_us, uint32_t limit,
			    uint32_t *ret_count, memd_error *err)
{
	uint32_t n = 0;
	int32_t r = memory_expire_forward(s, call, now_us, limit, &n, err);

	count_wrote(s, r, n);
	if (r == 0)
		*ret_count = n;
	return r;
}

int32_t store_session_list_pending(store *s, const memd_call *call,
				   const memd_pending_query *q, const memd_session_sink *out,
				   memd_error *err)
{
	NORM_SINK(session, norm_session, norm, out);
	STORE_FORWARD(s, session_list_pending, err, call, q, norm);
}

/* A checkpoint sink's records, host-sized. Writes reach the caller's
 * task_write with their task path, "" from a 1.5 store (which calls
 * write), or its write when it set no task_write. */
static int32_t norm_checkpoint(void *ud, const memd_checkpoint *rec)
{
	const memd_checkpoint_sink *out = ud;
	memd_checkpoint copy;
	return out->checkpoint(out->userdata, NORM_COPY(memd_checkpoint, rec, copy));
}

static int32_t norm_checkpoint_task_write(void *ud, const memd_checkpoint_write *rec,
					  const char *task_path)
{
	const memd_checkpoint_sink *out = ud;
	memd_checkpoint_write copy;
	const memd_checkpoint_write *w = NORM_COPY(memd_checkpoint_write, rec, copy);

	if (out->task_write)
		return out->task_write(out->userdata, w, task_path ? task_path : "");
	return out->write(out->userdata, w);
}

static int32_t norm_checkpoint_write(void *ud, const memd_checkpoint_write *rec)
{
	return norm_checkpoint_task_write(ud, rec, "");
}

/* The sink handed to the store: writes wanted when the caller set write
 * or task_write. */
#define NORM_CHECKPOINT_SINK(name, out)                                                   \
	int name##_writes_ = (out) && ((out)->write || (out)->task_write);                \
	memd_checkpoint_sink name##_ = {                                                  \
		sizeof(name##_), (void *)(out), norm_checkpoint,                          \
		name##_writes_ ? norm_checkpoint_write : NULL,                            \
		name##_writes_ ? norm_checkpoint_task_write : NULL                        \
	};                                                                                \
	const memd_checkpoint_sink *name = (out) ? &name##_ : NULL

static int32_t norm_task(void *ud, const memd_task *rec)
{
	const memd_task_sink *out = ud;
	memd_task copy;
	return out->task(out->userdata, NORM_COPY(memd_task, rec, copy));
}

int32_t store_checkpoint_put(store *s, const memd_call *call, const memd_checkpoint *c,
			     int create_session, int64_t now_us, int *ret_created_session,
			     memd_error *err)
{
	STORE_FORWARD(s, checkpoint_put, err, call, c, create_session, now_us,
		      ret_created_session);
}

int32_t store_checkpoint_put_writes(store *s, const memd_call *call, const memd_scope *scope,
				    const memd_checkpoint_writes *w, memd_error *err)
{
	STORE_FORWARD(s, checkpoint_put_writes, err, call, scope, w);
}

int32_t store_checkpoint_get(store *s, const memd_call *call, const memd_scope *scope,
			     const char *ns, const char *id, int64_t now_us,
			     const memd_checkpoint_sink *out, memd_error *err)
{
	NORM_CHECKPOINT_SINK(norm, out);
	STORE_FORWARD(s, checkpoint_get, err, call, scope, ns, id, now_us, norm);
}

int32_t store_checkpoint_list(store *s, const memd_call *call, const memd_scope *scope,
			      const memd_checkpoint_query *q, const memd_checkpoint_sink *out,
			      memd_error *err)
{
	NORM_CHECKPOINT_SINK(norm, out);
	STORE_FORWARD(s, checkpoint_list, err, call, scope, q, norm);
}

static int32_t checkpoint_delete_forward(store *s, const memd_call *call,
					 const memd_scope *scope, const char *ns,
					 uint32_t *ret_count, memd_error *err)
{
	STORE_FORWARD(s, checkpoint_delete, err, call, scope, ns, ret_count);
}

int32_t store_checkpoint_delete(store *s, const memd_call *call, const memd_scope *scope,
				const char *ns, uint32_t *ret_count, memd_error *err)
{
	uint32_t n = 0;
	int32_t r = checkpoint_delete_forward(s, call, scope, ns, &n, err);

	count_wrote(s, r, n);
	if (r == 0 && ret_count)
		*ret_count = n;
	return r;
}

int32_t store_checkpoint_resumable(store *s, const memd_call *call,
				   const memd_resumable_query *q, const memd_checkpoint_sink *out,
				   memd_error *err)
{
	NORM_CHECKPOINT_SINK(norm, out);
	STORE_FORWARD(s, checkpoint_resumable, err, call, q, norm);
}

static int32_t checkpoint_expire_forward(store *s, const memd_call *call, int64_t now_us,
					 uint32_t limit, uint32_t *ret_count, memd_error *err)
{
	STORE_FORWARD(s, checkpoint_expire, err, call, now_us, limit, ret_count);
}

int32_t store_checkpoint_expire(store *s, const memd_call *call, int64_t now_us,
				uint32_t limit, uint32_t *ret_count, memd_error *err)
{
	uint32_t n = 0;
	int32_t r = checkpoint_expire_forward(s, call, now_us, limit, &n, err);

	count_wrote(s, r, n);
	if (r == 0)
		*ret_count = n;
	return r;
}

int32_t store_task_put(store *s, const memd_call *call, const memd_task *t, uint32_t flags,
		       int64_t expected_version, int64_t now_us, const memd_task_sink *out,
		       memd_error *err)
{
	NORM_SINK(task, norm_task, norm, out);
	STORE_FORWARD(s, task_put, err, call, t, flags, expected_version, now_us, norm);
}

int32_t store_task_get(store *s, const memd_call *call, const char *app, const char *id,
		       const memd_task_sink *out, memd_error *err)
{
	NORM_SINK(task, norm_task, norm, out);
	STORE_FORWARD(s, task_get, err, call, app, id, norm);
}

int32_t store_task_list(store *s, const memd_call *call, const memd_task_query *q,
			const memd_task_sink *out, memd_error *err)
{
	NORM_SINK(task, norm_task, norm, out);
	STORE_FORWARD(s, task_list, err, call, q, norm);
}

int32_t store_task_delete(store *s, const memd_call *call, const char *app, const char *id,
			  int64_t expected_version, memd_error *err)
{
	STORE_FORWARD(s, task_delete, err, call, app, id, expected_version);
}
