/* SPDX-License-Identifier: MIT */
/*
 * service_step: writes that answer the context right after them, so that
 * an agent's step is one round trip (append the user's turn and read what
 * the model sees next): memd_events_append_context,
 * memd_messages_append_context, memd_lane_open_context and
 * memd_lane_open_source_context.
 *
 * The context is read over the view the write left (plugins/strategy.h,
 * strategy_context_view): the events up to its last seq, the session
 * record of its version. Another writer's append committed between the
 * write and the read is after that view, so the answer is the same as if
 * nobody had written in between.
 *
 * The write comes first and is durable once it returns: from then on the
 * call succeeds whatever the read does (a failed call would make a client
 * send the write again), and a read that fails is said in the answer's
 * "context_error" (an error body's "error") in place of "context".
 */
#include "service/service_int.h"

#include <stdlib.h>
#include <string.h>


void service_set_between_hook(memd *m, service_between_fn fn, void *userdata)
{
	m->between_fn = fn;
	m->between_userdata = userdata;
}

/* The view an append's result o left: its last seq and version, or a
 * replay's last seq (the original append's events; its version is not
 * known). 0 when o names no events: the caller reads the session as it
 * is then. */
static int view_of_append(const json_t *o, strategy_view *ret)
{
	const json_t *seqs = json_object_get(o, "seqs");
	size_t n = json_array_size(seqs);

	if (!n)
		return 0;
	ret->last_seq = json_integer_value(json_array_get(seqs, n - 1));
	ret->version = json_is_true(json_object_get(o, "replayed"))
			       ? 0
			       : json_integer_value(json_object_get(o, "version"));
	return 1;
}

/* The view a lane open's result o left: its session's last seq and
 * version then. */
static void view_of_open(const json_t *o, strategy_view *ret)
{
	const json_t *s = json_object_get(o, "session");

	ret->last_seq = json_integer_value(json_object_get(s, "last_seq"));
	ret->version = json_integer_value(json_object_get(s, "version"));
}

/* The answer: the write's result text (a JSON object, consumed) with
 * ',"context":' and the context text, or ',"context_error":' and the
 * read's error, inserted before its closing brace. */
static int32_t splice(char *result, const char *context, int32_t read_r,
		      const memd_error *read_err, char **ret_json, memd_error *err)
{
	size_t n = strlen(result), extra;
	char *failure = NULL, *out;
	const char *member, *value;

	if (read_r < 0) {
		json_t *e = ej_error(read_r, read_err->msg[0] ? read_err->msg : "the read failed",
				     read_err->flags);
		failure = e ? ej_dump(e) : NULL;
		json_decref(e);
		if (!failure) {
			free(result);
			return service_oom(err);
		}
		member = ",\"context_error\":";
		value = failure;
	} else {
		member = ",\"context\":";
		value = context;
	}
	extra = strlen(member) + strlen(value);
	out = n && result[n - 1] == '}' ? realloc(result, n + extra + 1) : NULL;
	if (!out) {
		free(failure);
		free(result);
		return n ? service_oom(err)
			 : memd_error_set(err, MEMD_EINTERNAL, 0, "the write answered nothing");
	}
	snprintf(out + n - 1, extra + 2, "%s%s}", member, value);
	free(failure);
	*ret_json = out;
	return 0;
}

/* The write's result text (consumed) with the context of the session sid
 * of (app, user) over view (NULL = now) read after it. */
static int32_t answer(memd *m, char *result, const char *app, const char *user, const char *sid,
		      uint32_t flags, const char *query, const strategy_view *view,
		      char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_error rerr = { .struct_size = sizeof(rerr) };
	char *context = NULL;
	int32_t r;

	if (m->between_fn)
		m->between_fn(m->between_userdata);
	r = service_context_view(m, &call, app, user, sid, flags, query, view, &context, &rerr);
	r = splice(result, context, r, &rerr, ret_json, err);
	free(context);
	return r;
}

/* An append's result o (consumed) with its context (answer). */
static int32_t append_answer(memd *m, json_t *o, const char *app, const char *user,
			     const char *sid, uint32_t flags, const char *query, char **ret_json,
			     memd_error *err)
{
	strategy_view v = { 0 };
	int in_view = view_of_append(o, &v);
	char *result = ej_dump(o);

	json_decref(o);
	if (!result)
		return service_oom(err);
	return answer(m, result, app, user, sid, flags, query, in_view ? &v : NULL, ret_json, err);
}

int32_t memd_events_append_context(memd *m, const char *app, const char *user, const char *sid,
				   const char *body_json, uint32_t flags, const char *query,
				   char **ret_json, memd_error *err)
{
	json_t *o = NULL;
	int32_t r = service_check_recall_query(query, err);

	if (r == 0)
		r = service_events_append(m, app, user, sid, body_json, &o, err);

	if (r < 0)
		return r;
	return append_answer(m, o, app, user, sid, flags, query, ret_json, err);
}

int32_t memd_messages_append_context(memd *m, const char *app, const char *user,
				     const char *sid, const char *body_json, uint32_t flags,
				     const char *query, char **ret_json, memd_error *err)
{
	json_t *o = NULL;
	int32_t r = service_check_recall_query(query, err);

	if (r == 0)
		r = service_messages_append(m, app, user, sid, body_json, &o, err);

	if (r < 0)
		return r;
	return append_answer(m, o, app, user, sid, flags, query, ret_json, err);
}

/* A lane open's result text (consumed) with its session's context. user:
 * the lane's user, NULL = the result's ("user", an open by source). The
 * text is read for the session and its view, and answered as it is. */
static int32_t open_answer(memd *m, char *text, const char *app, const char *user,
			   uint32_t flags, const char *query, char **ret_json, memd_error *err)
{
	strategy_view v = { 0 };
	json_t *o = ej_load(text);
	const char *sid;
	int32_t r;

	if (!o) {
		free(text);
		return service_oom(err);
	}
	if (!user)
		user = json_string_value(json_object_get(o, "user"));
	sid = json_string_value(json_object_get(json_object_get(o, "session"), "id"));
	if (!user || !sid) {
		json_decref(o);
		free(text);
		return memd_error_set(err, MEMD_EINTERNAL, 0, "the lane open named no session");
	}
	view_of_open(o, &v);
	/* o owns user and sid: it goes after the answer. */
	r = answer(m, text, app, user, sid, flags, query, &v, ret_json, err);
	json_decref(o);
	return r;
}

int32_t memd_lane_open_context(memd *m, const char *app, const char *user, const char *key,
			       const char *body_json, uint32_t flags, const char *query,
			       char **ret_json, memd_error *err)
{
	char *text = NULL;
	int32_t r = service_check_recall_query(query, err);

	if (r == 0)
		r = memd_lane_open(m, app, user, key, body_json, &text, err);

	if (r < 0)
		return r;
	return open_answer(m, text, app, user, flags, query, ret_json, err);
}

int32_t memd_lane_open_source_context(memd *m, const char *app, const char *body_json,
				      uint32_t flags, const char *query, char **ret_json,
				      memd_error *err)
{
	char *text = NULL;
	int32_t r = service_check_recall_query(query, err);

	if (r == 0)
		r = memd_lane_open_source(m, app, body_json, &text, err);

	if (r < 0)
		return r;
	return open_answer(m, text, app, NULL, flags, query, ret_json, err);
}
