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

int32_t strategy_context(strategy *st, store *s, const memd_call *call, const memd_scope *scope,
			 const memd_context_sink *out, memd_error *err)
{
	memd_reader reader = reader_for(s, scope);
	int32_t r;

	if (err)
		memset(err, 0, sizeof(*err));
	if (st->serialized)
		pthread_mutex_lock(&st->lock);
	r = st->ops->context(st->handle, call, &reader, out, err);
	if (st->serialized)
		pthread_mutex_unlock(&st->lock);
	return store_fix_error(st->name, "context", r, err);
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
