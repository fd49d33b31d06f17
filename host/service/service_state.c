/* SPDX-License-Identifier: MIT */
/*
 * service_state: session state (memd_state_get, memd_state_patch), the
 * split of a state delta into stored and temp: keys, and
 * memd_invocation_end, which drops an invocation's temp: keys.
 */
#include "service/service_int.h"

#include <string.h>

#include "json/event_json.h"

#define TEMP_PREFIX "temp:"
#define STATE_KEY_MAX 1024

int32_t service_split_delta(json_t *delta, json_t **ret_store, json_t **ret_temp, memd_error *err)
{
	json_t *keep = json_object(), *temp = json_object(), *v;
	const char *key;

	if (!keep || !temp)
		goto nomem;
	json_object_foreach(delta, key, v) {
		size_t len = strlen(key);
		if (!len || len > STATE_KEY_MAX || !ej_utf8_valid(key, len)) {
			json_decref(keep);
			json_decref(temp);
			return memd_error_set(err, MEMD_EINVAL, 0,
					      "state key '%.64s': must be 1..%d bytes of UTF-8", key,
					      STATE_KEY_MAX);
		}
		if (strncmp(key, TEMP_PREFIX, strlen(TEMP_PREFIX)) == 0) {
			if (len == strlen(TEMP_PREFIX)) {
				json_decref(keep);
				json_decref(temp);
				return memd_error_set(err, MEMD_EINVAL, 0,
						      "state key 'temp:' has a prefix but no name");
			}
			if (json_object_set(temp, key, v) < 0)
				goto nomem;
		} else if (json_object_set(keep, key, v) < 0) {
			goto nomem;
		}
	}
	*ret_store = keep;
	*ret_temp = temp;
	return 0;
nomem:
	json_decref(keep);
	json_decref(temp);
	return service_oom(err);
}

int32_t service_apply_temp(memd *m, const memd_scope *sc, const char *inv, json_t *temp,
			   memd_error *err)
{
	const char *key;
	json_t *v;
	int64_t now = service_now_us();
	json_object_foreach(temp, key, v) {
		if (temp_state_set(m->temp, sc->app, sc->user, sc->session, inv, key, v, now) < 0)
			return service_oom(err);
	}
	return 0;
}

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
