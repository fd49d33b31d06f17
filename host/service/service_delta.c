/* SPDX-License-Identifier: MIT */
/*
 * service_delta: what appends (service_events.c), session creation
 * (service_sessions.c) and state patches (service_state.c) share about a
 * state delta: its split into the keys the store keeps and the temp:
 * keys, and setting those temp: keys. Below all three, so none of them
 * depends on another for it.
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
