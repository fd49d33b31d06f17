/* SPDX-License-Identifier: MIT */
/*
 * service_after_append: a strategy's after_append hook, queued after an
 * acknowledged append and run on the worker, persisting the events it
 * asks for (a summary, say); the same persisting serves the strategy's
 * on_session_finalize (service_lanes_watch.c).
 */
#include "service/service_int.h"

#include <string.h>

#include "util/uuid.h"

/* A call for background work (strategies' after_append): no deadline. */
static memd_call call_new(void)
{
	memd_call c = { .struct_size = sizeof(c) };
	return c;
}

/* Events a strategy's hook asks to persist, appended one by one. */
static int32_t persist_event(void *ud, const memd_event *in)
{
	service_persist_ctx *pc = ud;
	memd_call call = call_new();
	memd_event e = { .struct_size = sizeof(e) };
	const memd_event *one[1] = { &e };
	char idbuf[UUID_TEXT_LEN + 1];
	int64_t seq;
	memd_append a = { .struct_size = sizeof(a), .events = one, .n_events = 1 };
	memd_append_result res = { .struct_size = sizeof(res), .seqs = &seq };
	memd_error err = { 0 };
	int32_t r;

	memcpy(&e, in, in->struct_size < sizeof(e) ? in->struct_size : sizeof(e));
	e.struct_size = sizeof(e);
	if (!e.role || !e.content_json) {
		hostsvc_log(pc->m->svc, MEMD_LOG_WARN, "memd", "strategy event without role or content dropped");
		return MEMD_EINVAL;
	}
	if (!e.id) {
		if (uuid_v7(idbuf) < 0)
			return MEMD_EIO;
		e.id = idbuf;
	}
	if (!e.author)
		e.author = e.role;
	a.now_us = pc->now_us ? pc->now_us : service_clock_us(pc->m);
	if (!e.timestamp_us)
		e.timestamp_us = a.now_us;
	if (!e.tokens && e.text)
		hostsvc_count_tokens(pc->m->svc, e.text, strlen(e.text), &e.tokens);
	r = store_append(pc->m->sessions, &call, pc->sc, &a, &res, &err);
	if (r < 0)
		hostsvc_log(pc->m->svc, MEMD_LOG_WARN, "memd", "persisting a strategy event failed: %s",
			    err.msg);
	return r;
}

memd_event_sink service_persist_sink(service_persist_ctx *pc)
{
	memd_event_sink persist = { sizeof(persist), pc, persist_event };
	return persist;
}

void service_after_append_job(void *userdata, const memd_scope *sc)
{
	memd *m = userdata;
	const char *app_name;
	strategy *st = service_strategy_for(m, sc->app, &app_name);
	memd_call call = call_new();
	service_persist_ctx pc = { m, sc, 0 };
	memd_event_sink persist = service_persist_sink(&pc);
	memd_error err = { 0 };

	if (!st || !strategy_has_after_append(st))
		return;
	if (strategy_after_append(st, m->sessions, &call, sc, &persist, &err) < 0)
		hostsvc_log(m->svc, MEMD_LOG_WARN, "memd", "after_append: %s", err.msg);
}

void service_run_after_append(memd *m, const memd_scope *sc)
{
	const char *app_name;
	strategy *st = service_strategy_for(m, sc->app, &app_name);
	int32_t r;

	if (!st || !strategy_has_after_append(st))
		return;
	if ((r = worker_submit(m->worker, sc)) < 0)
		hostsvc_log(m->svc, MEMD_LOG_WARN, "memd",
			    "after_append not queued (%d): the next append catches up", (int)r);
}
