/* SPDX-License-Identifier: MIT */
/*
 * service_state: session state (memd_state_get, memd_state_patch) and
 * memd_invocation_end, which drops an invocation's temp: keys. A patch is
 * an append without events (service_events.c); the delta split it shares
 * with appends and session creation is in service_delta.c.
 */
#include "service/service_int.h"

#include <string.h>

#include "json/event_json.h"

static int32_t sink_text_json(void *ud, const char *text, size_t len)
{
	json_t **slot = ud;
	json_decref(*slot);
	*slot = json_loadb(text, len, 0, NULL);
	return *slot ? 0 : MEMD_EIO;
}

static int32_t state_json(memd *m, const memd_scope *sc, char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	json_t *st = NULL;
	memd_text_sink sink = { sizeof(sink), &st, sink_text_json };
	int32_t r;

	if ((r = store_state_get(m->sessions, &call, sc, &sink, err)) < 0) {
		json_decref(st);
		return r;
	}
	if (!json_is_object(st)) {
		json_decref(st);
		return memd_error_set(err, MEMD_EIO, 0, "%s: state is not a JSON object",
				      store_name(m->sessions));
	}
	if (temp_state_merge(m->temp, sc->app, sc->user, sc->session, st, service_now_us()) < 0) {
		json_decref(st);
		return service_oom(err);
	}
	return service_finish(st, ret_json, err);
}

int32_t memd_state_get(memd *m, const char *app, const char *user, const char *sid,
		       char **ret_json, memd_error *err)
{
	memd_scope sc;
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0)
		return r;
	return state_json(m, &sc, ret_json, err);
}

int32_t memd_state_patch(memd *m, const char *app, const char *user, const char *sid,
			 const char *body_json, char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	service_append_req q = { 0 };
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0 ||
	    (r = service_parse_body(body_json, &q.body, err)) < 0)
		return r;
	if ((r = service_split_delta(q.body, &q.keep, &q.temp, err)) < 0)
		goto out;
	if (json_object_size(q.keep)) {
		json_t *ignored = NULL;
		if (!(q.delta_text = ej_dump(q.keep))) {
			r = service_oom(err);
			goto out;
		}
		r = service_append(m, &sc, &q, NULL, 0, 0, &ignored, err);
		json_decref(ignored);
		if (r < 0)
			goto out;
	} else {
		/* temp: keys only: nothing to persist, but the session must exist. */
		json_t *sess = NULL;
		if ((r = service_session_json(m, &call, &sc, &sess, err)) < 0)
			goto out;
		json_decref(sess);
		if ((r = service_apply_temp(m, &sc, NULL, q.temp, err)) < 0)
			goto out;
	}
	r = state_json(m, &sc, ret_json, err);
out:
	service_append_req_clear(&q);
	return r;
}

int32_t memd_invocation_end(memd *m, const char *app, const char *user, const char *sid,
			    const char *invocation_id, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	json_t *sess = NULL;
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0 ||
	    (r = ej_check_id(invocation_id, "invocation id", err)) < 0)
		return r;
	if ((r = service_session_json(m, &call, &sc, &sess, err)) < 0)
		return r;
	json_decref(sess);
	temp_state_end_invocation(m->temp, app, user, sid, invocation_id);
	return 0;
}
