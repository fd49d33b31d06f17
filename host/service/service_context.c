/* SPDX-License-Identifier: MIT */
/*
 * service_context: memd_context, the working memory an app's strategy
 * makes of a session.
 */
#include "service/service_int.h"

#include <stdlib.h>
#include <string.h>

#include "json/event_json.h"

static int32_t ctx_summary(void *ud, const memd_event *e)
{
	return jo_context_summary(ud, e);
}

static int32_t ctx_event(void *ud, const memd_event *e)
{
	return jo_context_event(ud, e);
}

/* What a session owes its first context read (MEMD_SESSION_NOTICE). */
typedef struct notice_peek {
	uint32_t flags;
	char *reason;   /* start_reason */
	char *platform; /* of the origin */
	char *chat_type;
} notice_peek;

static int32_t sink_notice(void *ud, const memd_session *s)
{
	notice_peek *p = ud;
	json_t *o;

	p->flags = s->flags;
	if (!(s->flags & MEMD_SESSION_NOTICE) || !s->start_reason)
		return 0;
	free(p->reason);
	p->reason = strdup(s->start_reason);
	o = ej_load(s->origin_json);
	if (json_string_value(json_object_get(o, "platform")))
		p->platform = strdup(json_string_value(json_object_get(o, "platform")));
	if (json_string_value(json_object_get(o, "chat_type")))
		p->chat_type = strdup(json_string_value(json_object_get(o, "chat_type")));
	json_decref(o);
	return p->reason ? 0 : MEMD_ENOMEM;
}

static int32_t sink_ignore(void *ud, const memd_session *s)
{
	(void)ud;
	(void)s;
	return 0;
}

/* The notice text of a reset for reason under p; NULL for none. */
static const char *notice_text(const lane_reset_policy *p, const char *reason)
{
	if (strcmp(reason, LANE_EXPIRED_IDLE) == 0)
		return p->idle_notice;
	if (strcmp(reason, LANE_EXPIRED_DAILY) == 0)
		return p->daily_notice;
	if (strcmp(reason, "suspended") == 0)
		return p->suspended_notice;
	return NULL;
}

/* If the session of sc owes a notice and this call is the one that
 * clears it (MEMD_PATCH_CLEAR_NOTICE: of racing readers exactly one
 * succeeds), put it on c. Best effort: a failure shows no notice, and a
 * later read may show it. */
static void take_notice(memd *m, const memd_call *call, const memd_scope *sc,
			const char **ret_reason, const char **ret_text, notice_peek *p)
{
	memd_session_sink sink = { sizeof(sink), p, sink_notice };
	memd_session_sink ignore = { sizeof(ignore), NULL, sink_ignore };
	memd_session_update up = { .struct_size = sizeof(up), .fields = MEMD_PATCH_CLEAR_NOTICE };
	memd_error err = { 0 };
	lane_reset_policy pol;
	const char *text;

	if (store_minor(m->sessions) < 2 ||
	    store_session_get(m->sessions, call, sc, &sink, &err) < 0 || !p->reason)
		return;
	if (service_lane_policy(m, sc->app, p->platform, p->chat_type, &pol, &err) < 0 ||
	    !pol.notify || !(text = notice_text(&pol, p->reason)))
		return;
	up.now_us = service_clock_us(m);
	if (store_session_update(m->sessions, call, sc, &up, &ignore, &err) < 0)
		return;
	*ret_reason = p->reason;
	*ret_text = text;
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
	notice_peek np = { 0 };
	strategy *st;
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0)
		return r;
	st = service_strategy_for(m, app, &app_name);
	if (!st)
		return memd_error_set(err, MEMD_EINTERNAL, 0, "no strategy for app '%.64s'", app);
	if (flags & MEMD_READ_OPENAI) {
		json_t *o = NULL;
		const char *reason = NULL, *text = NULL;
		if ((r = service_context_openai(m, call, &sc, st, &o, err)) < 0)
			return r;
		take_notice(m, call, &sc, &reason, &text, &np);
		if (reason && json_object_set_new(o, "notice", json_pack("{s:s,s:s}", "reason", reason,
									  "text", text)) < 0) {
			json_decref(o);
			o = NULL;
		}
		r = service_finish_bounded(m, o,
					   "the context is one consistent view and is not paged: "
					   "give the app a strategy with a window (buffer_window, "
					   "token_window, summary_buffer)", ret_json, err);
		goto out;
	}
	jo_context_begin(&c, strategy_plugin_name(st));
	c.out.max_len = (size_t)m->set.max_response_bytes;
	c.out.no_text = (flags & MEMD_READ_NO_TEXT) != 0;
	r = c.out.error ? c.out.error : strategy_context(st, m->sessions, call, &sc, &sink, err);
	if (r == 0 && !c.out.error)
		take_notice(m, call, &sc, &c.notice_reason, &c.notice_text, &np);
	if (r < 0 || c.out.error) {
		r = service_read_failed(m, &c.out, r,
					"the context is one consistent view and is not paged: "
					"give the app a strategy with a window (buffer_window, "
					"token_window, summary_buffer), or read the events in pages "
					"(GET .../sessions/{id}/events)", err);
		jo_context_clear(&c);
		goto out;
	}
	r = jo_context_finish(&c, ret_json) < 0 ? service_oom(err) : 0;
out:
	free(np.reason);
	free(np.platform);
	free(np.chat_type);
	return r;
}
