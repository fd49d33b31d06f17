/* SPDX-License-Identifier: MIT */
/*
 * service_messages: a session's transcript as OpenAI chat-completions
 * messages (json/openai_msgs.h maps them): memd_messages_append (the
 * append path, message ids for idempotent retries), memd_messages_put
 * (the rewrite operation, service_transcripts.c), memd_messages_get
 * (the visible events, a role filter) and the context in that format
 * (memd_context_read with MEMD_READ_OPENAI).
 */
#include "service/service_int.h"

#include <stdlib.h>
#include <string.h>

#include "json/event_json.h"
#include "json/openai_msgs.h"

#define FORMAT_OPENAI "openai"
#define FORMAT_EVENTS "events"

/* The roles memd_messages_get reads when none are named: the messages,
 * not the summaries (a summary restates messages the transcript holds). */
#define MESSAGE_ROLES (MEMD_ROLE_USER | MEMD_ROLE_ASSISTANT | MEMD_ROLE_SYSTEM | MEMD_ROLE_TOOL)

typedef struct role_bit {
	const char *name;
	uint32_t bit;
} role_bit;

static const role_bit role_bits[] = {
	{ "user", MEMD_ROLE_USER },     { "assistant", MEMD_ROLE_ASSISTANT },
	{ "system", MEMD_ROLE_SYSTEM }, { "tool", MEMD_ROLE_TOOL },
	{ "summary", MEMD_ROLE_SUMMARY }, { NULL, 0 },
};

static uint32_t role_bit_of(const char *role, size_t len)
{
	for (const role_bit *r = role_bits; r->name; r++)
		if (strlen(r->name) == len && strncmp(r->name, role, len) == 0)
			return r->bit;
	return 0;
}

/* ---- append --------------------------------------------------------------- */

static const char *const append_fields[] = { "messages", "format", "expected_version",
					     "invocation_id", NULL };

/* The "format" member of body: openai (default) or events. */
static int32_t body_format(json_t *body, int *ret_events, memd_error *err)
{
	const char *format;
	int32_t r = service_opt_string_field(body, "format", &format, err);
	if (r < 0)
		return r;
	if (format && strcmp(format, FORMAT_OPENAI) != 0 && strcmp(format, FORMAT_EVENTS) != 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "format: must be \"openai\" or \"events\"");
	*ret_events = format && strcmp(format, FORMAT_EVENTS) == 0;
	return 0;
}

int32_t service_messages_events(json_t *body, json_t **ret_events, memd_error *err)
{
	json_t *messages = json_object_get(body, "messages");
	int events_format = 0;
	int32_t r;

	if ((r = body_format(body, &events_format, err)) < 0)
		return r;
	if (!messages)
		return memd_error_set(err, MEMD_EINVAL, 0, "messages: required");
	if (!json_is_array(messages))
		return memd_error_set(err, MEMD_EINVAL, 0, "messages: must be an array");
	if (events_format) {
		*ret_events = json_incref(messages);
		return 0;
	}
	return om_messages_to_events(messages, ret_events, err);
}

int32_t memd_messages_append(memd *m, const char *app, const char *user, const char *sid,
			     const char *body_json, char **ret_json, memd_error *err)
{
	json_t *out = NULL;
	int32_t r = service_messages_append(m, app, user, sid, body_json, &out, err);

	return r < 0 ? r : service_finish(out, ret_json, err);
}

int32_t service_messages_append(memd *m, const char *app, const char *user, const char *sid,
				const char *body_json, json_t **ret, memd_error *err)
{
	json_t *body = NULL, *events = NULL, *append = NULL, *v;
	char *text = NULL;
	memd_scope sc;
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0 ||
	    (r = service_parse_body(body_json, &body, err)) < 0)
		return r;
	if ((r = service_check_fields(body, append_fields, err)) < 0 ||
	    (r = service_messages_events(body, &events, err)) < 0)
		goto out;
	if (!(append = json_pack("{s:O}", "events", events))) {
		r = service_oom(err);
		goto out;
	}
	/* The append checks these as it checks them on events. */
	if (((v = json_object_get(body, "expected_version")) &&
	     json_object_set(append, "expected_version", v) < 0) ||
	    ((v = json_object_get(body, "invocation_id")) &&
	     json_object_set(append, "invocation_id", v) < 0) ||
	    !(text = ej_dump(append))) {
		r = service_oom(err);
		goto out;
	}
	r = service_events_append(m, app, user, sid, text, ret, err);
out:
	free(text);
	json_decref(append);
	json_decref(events);
	json_decref(body);
	return r;
}

/* ---- put ------------------------------------------------------------------------ */

static const char *const put_fields[] = { "messages", "format", "expected_version",
					  "state_delta", NULL };

int32_t memd_messages_put(memd *m, const char *app, const char *user, const char *sid,
			  const char *body_json, char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	service_append_req q = { 0 };
	json_t *events = NULL, *delta, *ver, *out = NULL;
	const char *inv = NULL;
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0 ||
	    (r = service_parse_body(body_json, &q.body, err)) < 0)
		return r;
	if ((r = service_check_fields(q.body, put_fields, err)) < 0 ||
	    (r = service_opt_object_field(q.body, "state_delta", &delta, err)) < 0 ||
	    (r = service_messages_events(q.body, &events, err)) < 0)
		goto out;
	ver = json_object_get(q.body, "expected_version");
	if (ver && !json_is_null(ver) && (!json_is_integer(ver) || json_integer_value(ver) < 0)) {
		r = memd_error_set(err, MEMD_EINVAL, 0, "expected_version: must be a non-negative integer");
		goto out;
	}
	if ((r = service_append_prepare(m, &q, events, delta, &inv, err)) < 0)
		goto out;
	r = service_transcript_rewrite(m, &call, app, user, sid, &q, inv, ver && !json_is_null(ver),
				       ver ? json_integer_value(ver) : 0, &out, err);
	if (r == 0)
		r = service_finish(out, ret_json, err);
out:
	json_decref(events);
	service_append_req_clear(&q);
	return r;
}

/* ---- get -------------------------------------------------------------------- */

/* Events gathered as JSON (ej_event), in the order delivered. */
typedef struct gather {
	json_t *events;
	uint32_t roles;   /* only these (a store before 1.2 may not filter) */
	json_t *summary;  /* a context's summary, delivered before the events */
	int64_t tokens;
	int oom;
	const memd_context_sink *tee; /* sees each summary and event first; may be NULL */
} gather;

static int32_t gather_add(gather *g, const memd_event *e, int summary)
{
	json_t *o;
	uint32_t bit = e->role ? role_bit_of(e->role, strlen(e->role)) : 0;

	if (g->roles && !(bit & g->roles))
		return 0;
	if (!(o = ej_event(e))) {
		g->oom = 1;
		return MEMD_ENOMEM;
	}
	if (summary) {
		/* A summary delivered again replaces the earlier one. */
		if (g->summary)
			g->tokens -= json_integer_value(json_object_get(g->summary, "tokens"));
		json_decref(g->summary);
		g->summary = o;
	} else if (json_array_append_new(g->events, o) < 0) {
		g->oom = 1;
		return MEMD_ENOMEM;
	}
	g->tokens += e->tokens;
	return 0;
}

static int32_t sink_gather(void *ud, const memd_event *e)
{
	gather *g = ud;
	int32_t r = g->tee ? g->tee->event(g->tee->userdata, e) : 0;
	return r < 0 ? r : gather_add(ud, e, 0);
}

static int32_t sink_gather_summary(void *ud, const memd_event *e)
{
	gather *g = ud;
	int32_t r = g->tee ? g->tee->summary(g->tee->userdata, e) : 0;
	return r < 0 ? r : gather_add(ud, e, 1);
}

int32_t service_finish_bounded(memd *m, json_t *o, const char *how_to_page, char **ret_json,
			      memd_error *err)
{
	char *text;
	size_t len;

	if (!o)
		return service_oom(err);
	text = ej_dump(o);
	json_decref(o);
	if (!text)
		return service_oom(err);
	len = strlen(text);
	if (m->set.max_response_bytes && len > (size_t)m->set.max_response_bytes) {
		free(text);
		return memd_error_set(err, MEMD_ETOOBIG, 0,
				      "the answer is %zu bytes, over server.max_response_bytes "
				      "(%lld): %s", len, (long long)m->set.max_response_bytes,
				      how_to_page);
	}
	*ret_json = text;
	return 0;
}

int32_t memd_messages_get(memd *m, const char *app, const char *user, const char *sid,
			  const char *roles, char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	memd_event_query q = { .struct_size = sizeof(q) };
	gather g = { 0 };
	memd_event_sink sink = { sizeof(sink), &g, sink_gather };
	json_t *messages = NULL;
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0 ||
	    (r = service_parse_roles(roles, &g.roles, err)) < 0)
		return r;
	if (!g.roles)
		g.roles = MESSAGE_ROLES;
	q.roles = g.roles;
	if (!(g.events = json_array()) || !(messages = json_array())) {
		r = service_oom(err);
		goto out;
	}
	/* memd_events_page's answer when the session does not exist. */
	{
		json_t *session = NULL;
		if ((r = service_session_json(m, &call, &sc, &session, err)) < 0)
			goto out;
		json_decref(session);
	}
	if ((r = store_events_load(m->sessions, &call, &sc, &q, &sink, err)) < 0) {
		if (g.oom)
			r = service_oom(err);
		goto out;
	}
	if ((r = om_events_to_messages(g.events, 0, messages, NULL, err)) < 0)
		goto out;
	r = service_finish_bounded(m, json_pack("{s:s,s:O}", "format", FORMAT_OPENAI, "messages", messages),
			   "read the events in pages (GET .../sessions/{id}/events) and map them",
			   ret_json, err);
out:
	json_decref(messages);
	json_decref(g.events);
	return r;
}

/* ---- context ------------------------------------------------------------------ */

int32_t service_context_openai(memd *m, const memd_call *call, const memd_scope *sc,
			       strategy *st, const strategy_view *view,
			       const memd_context_sink *tee, json_t **ret, memd_error *err)
{
	gather g = { .tee = tee };
	memd_context_sink sink = { sizeof(sink), &g, sink_gather_summary, sink_gather };
	json_t *messages = NULL, *all = NULL, *o;
	int64_t dropped = 0;
	int32_t r;

	if (!(g.events = json_array()) || !(messages = json_array()) || !(all = json_array())) {
		r = service_oom(err);
		goto out;
	}
	if ((r = strategy_context_view(st, m->sessions, call, sc, view, &sink, err)) < 0) {
		if (g.oom)
			r = service_oom(err);
		goto out;
	}
	if ((g.summary && json_array_append(all, g.summary) < 0) ||
	    json_array_extend(all, g.events) < 0) {
		r = service_oom(err);
		goto out;
	}
	/* A window that starts inside a tool exchange: its orphaned results
	 * go (their calls are not there for the endpoint to match). */
	if ((r = om_events_to_messages(all, OM_DROP_ORPHAN_RESULTS, messages, &dropped, err)) < 0)
		goto out;
	o = json_pack("{s:s,s:s,s:I,s:O}", "format", FORMAT_OPENAI, "strategy",
		      strategy_plugin_name(st), "tokens", (json_int_t)(g.tokens - dropped), "messages",
		      messages);
	if (!o) {
		r = service_oom(err);
		goto out;
	}
	*ret = o;
	r = 0;
out:
	json_decref(all);
	json_decref(messages);
	json_decref(g.events);
	json_decref(g.summary);
	return r;
}
