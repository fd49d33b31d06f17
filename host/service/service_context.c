/* SPDX-License-Identifier: MIT */
/*
 * service_context: memd_context, the working memory an app's strategy
 * makes of a session.
 */
#include "service/service_int.h"

static int32_t ctx_summary(void *ud, const memd_event *e)
{
	return jo_context_summary(ud, e);
}

static int32_t ctx_event(void *ud, const memd_event *e)
{
	return jo_context_event(ud, e);
}

int32_t memd_context(memd *m, const char *app, const char *user, const char *sid, char **ret_json,
		     memd_error *err)
{
	memd_call call = service_call_for_request(m);
	return service_context_read(m, &call, app, user, sid, 0, ret_json, err);
}

int32_t memd_context_read(memd *m, const char *app, const char *user, const char *sid,
			  uint32_t flags, char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	return service_context_read(m, &call, app, user, sid, flags, ret_json, err);
}

int32_t service_context(memd *m, const memd_call *call, const char *app, const char *user,
			const char *sid, char **ret_json, memd_error *err)
{
	return service_context_read(m, call, app, user, sid, 0, ret_json, err);
}

int32_t service_context_read(memd *m, const memd_call *call, const char *app, const char *user,
			     const char *sid, uint32_t flags, char **ret_json, memd_error *err)
{
	memd_scope sc;
	jo_context c;
	memd_context_sink sink = { sizeof(sink), &c, ctx_summary, ctx_event };
	const char *app_name;
	strategy *st;
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0)
		return r;
	st = service_strategy_for(m, app, &app_name);
	if (!st)
		return memd_error_set(err, MEMD_EINTERNAL, 0, "no strategy for app '%.64s'", app);
	jo_context_begin(&c, strategy_plugin_name(st));
	c.out.max_len = (size_t)m->set.max_response_bytes;
	c.out.no_text = (flags & MEMD_READ_NO_TEXT) != 0;
	r = c.out.error ? c.out.error : strategy_context(st, m->sessions, call, &sc, &sink, err);
	if (r < 0 || c.out.error) {
		r = service_read_failed(m, &c.out, r,
					"the context is one consistent view and is not paged: "
					"give the app a strategy with a window (buffer_window, "
					"token_window, summary_buffer), or read the events in pages "
					"(GET .../sessions/{id}/events)", err);
		jo_context_clear(&c);
		return r;
	}
	return jo_context_finish(&c, ret_json) < 0 ? service_oom(err) : 0;
}
