/* SPDX-License-Identifier: MIT */
#include "plugins/strategy.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct strategy {
	loader_instance *inst;
	const memd_strategy_ops *ops;
	void *handle;
	const char *name;
	int serialized;
	pthread_mutex_t lock;
};

int32_t strategy_new(loader_instance *inst, strategy **ret, memd_error *err)
{
	strategy *st;
	int32_t r;

	r = loader_require_kind(loader_instance_plugin(inst), MEMD_KIND_STRATEGY,
				loader_instance_name(inst), err);
	if (r < 0)
		return r;
	st = calloc(1, sizeof(*st));
	if (!st)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	st->inst = inst;
	st->ops = loader_strategy_ops(loader_instance_plugin(inst));
	st->handle = loader_instance_handle(inst);
	st->name = loader_instance_name(inst);
	st->serialized = loader_instance_serialized(inst);
	pthread_mutex_init(&st->lock, NULL);
	*ret = st;
	return 0;
}

void strategy_free(strategy *st)
{
	if (!st)
		return;
	loader_instance_destroy(st->inst);
	pthread_mutex_destroy(&st->lock);
	free(st);
}

const char *strategy_plugin_name(const strategy *st)
{
	return loader_descriptor(loader_instance_plugin(st->inst))->name;
}

int strategy_has_after_append(const strategy *st)
{
	return st->ops->after_append != NULL;
}

int strategy_has_on_session_finalize(const strategy *st)
{
	return st->ops->on_session_finalize != NULL;
}

static int32_t reader_session(const memd_reader *r, const memd_call *call,
			      const memd_session_sink *out, memd_error *err)
{
	return store_session_get(r->reader_data, call, r->scope, out, err);
}

static int32_t reader_events(const memd_reader *r, const memd_call *call,
			     const memd_event_query *q, const memd_event_sink *out, memd_error *err)
{
	return store_events_load(r->reader_data, call, r->scope, q, out, err);
}

static memd_reader reader_for(store *s, const memd_scope *scope)
{
	memd_reader r = {
		.struct_size = sizeof(r),
		.reader_data = s,
		.scope = scope,
		.session = reader_session,
		.events = reader_events,
	};
	return r;
}

/* ---- a past view (strategy_context_view) ---- */

typedef struct view_reader {
	store *s;
	const strategy_view *v;
} view_reader;

/* The session sink of a view: the record passed on with the view's
 * numbers, or, when its summary is newer than the view (a summary
 * appended since), not passed on (*later set) so that the caller looks
 * the view's summary up first. */
typedef struct view_session {
	const strategy_view *v;
	const memd_session_sink *out;
	int64_t summary_seq;     /* < 0: the record's own, when in the view */
	int later;               /* the record's summary is after the view */
} view_session;

static int32_t view_session_got(void *ud, const memd_session *s)
{
	view_session *vs = ud;
	memd_session c = { 0 };

	if (vs->summary_seq < 0 && s->summary_seq > vs->v->last_seq) {
		vs->later = 1;
		return 0;
	}
	memcpy(&c, s, s->struct_size < sizeof(c) ? s->struct_size : sizeof(c));
	if (c.last_seq > vs->v->last_seq)
		c.last_seq = vs->v->last_seq;
	if (vs->v->version > 0)
		c.version = vs->v->version;
	if (vs->summary_seq >= 0)
		c.summary_seq = vs->summary_seq;
	return vs->out->session(vs->out->userdata, &c);
}

static int32_t view_summary_got(void *ud, const memd_event *e)
{
	*(int64_t *)ud = e->seq;
	return 0;
}

static int32_t view_reader_session(const memd_reader *r, const memd_call *call,
				   const memd_session_sink *out, memd_error *err)
{
	const view_reader *vr = r->reader_data;
	view_session vs = { .v = vr->v, .out = out, .summary_seq = -1 };
	memd_session_sink sink = { sizeof(sink), &vs, view_session_got };
	memd_event_query q = {
		.struct_size = sizeof(q),
		.flags = MEMD_EVQ_NEWEST | MEMD_EVQ_ONLY_SUMMARY,
		.before_seq = vr->v->last_seq + 1,
		.limit = 1,
	};
	memd_event_sink summary = { sizeof(summary), &vs.summary_seq, view_summary_got };
	int32_t rc = store_session_get(vr->s, call, r->scope, &sink, err);

	if (rc < 0 || !vs.later)
		return rc;
	/* Rare: a summary was appended after the view. The view's is the
	 * newest visible one at or before its last seq (0: none). */
	vs.summary_seq = 0;
	if ((rc = store_events_load(vr->s, call, r->scope, &q, &summary, err)) < 0)
		return rc;
	vs.later = 0;
	return store_session_get(vr->s, call, r->scope, &sink, err);
}

static int32_t view_reader_events(const memd_reader *r, const memd_call *call,
				  const memd_event_query *q, const memd_event_sink *out,
				  memd_error *err)
{
	const view_reader *vr = r->reader_data;
	memd_event_query b = *q;

	if (!b.before_seq || b.before_seq > vr->v->last_seq + 1)
		b.before_seq = vr->v->last_seq + 1;
	return store_events_load(vr->s, call, r->scope, &b, out, err);
}

static int32_t run_context(strategy *st, const memd_reader *reader, const memd_call *call,
			   const memd_context_sink *out, memd_error *err)
{
	int32_t r;

	if (err)
		memset(err, 0, sizeof(*err));
	if (st->serialized)
		pthread_mutex_lock(&st->lock);
	r = st->ops->context(st->handle, call, reader, out, err);
	if (st->serialized)
		pthread_mutex_unlock(&st->lock);
	return store_fix_error(st->name, "context", r, err);
}

int32_t strategy_context_view(strategy *st, store *s, const memd_call *call,
			      const memd_scope *scope, const strategy_view *v,
			      const memd_context_sink *out, memd_error *err)
{
	view_reader vr = { s, v };
	memd_reader reader = {
		.struct_size = sizeof(reader),
		.reader_data = &vr,
		.scope = scope,
		.session = view_reader_session,
		.events = view_reader_events,
	};

	if (!v)
		return strategy_context(st, s, call, scope, out, err);
	return run_context(st, &reader, call, out, err);
}

int32_t strategy_context(strategy *st, store *s, const memd_call *call, const memd_scope *scope,
			 const memd_context_sink *out, memd_error *err)
{
	memd_reader reader = reader_for(s, scope);

	return run_context(st, &reader, call, out, err);
}

int32_t strategy_after_append(strategy *st, store *s, const memd_call *call,
			      const memd_scope *scope, const memd_event_sink *persist,
			      memd_error *err)
{
	memd_reader reader = reader_for(s, scope);
	int32_t r;

	if (!st->ops->after_append)
		return 0;
	if (err)
		memset(err, 0, sizeof(*err));
	if (st->serialized)
		pthread_mutex_lock(&st->lock);
	r = st->ops->after_append(st->handle, call, &reader, persist, err);
	if (st->serialized)
		pthread_mutex_unlock(&st->lock);
	return store_fix_error(st->name, "after_append", r, err);
}

int32_t strategy_on_session_finalize(strategy *st, store *s, const memd_call *call,
				     const memd_scope *scope, const memd_event_sink *persist,
				     memd_error *err)
{
	memd_reader reader = reader_for(s, scope);
	int32_t r;

	if (!st->ops->on_session_finalize)
		return memd_error_set(err, MEMD_ENOTSUP, 0, "strategy %s has no on_session_finalize",
				      st->name);
	if (err)
		memset(err, 0, sizeof(*err));
	if (st->serialized)
		pthread_mutex_lock(&st->lock);
	r = st->ops->on_session_finalize(st->handle, call, &reader, persist, err);
	if (st->serialized)
		pthread_mutex_unlock(&st->lock);
	return store_fix_error(st->name, "on_session_finalize", r, err);
}
