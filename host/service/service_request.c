/* SPDX-License-Identifier: MIT */
/*
 * service_request: what every facade call shares to take a request in and
 * hand its answer out: the call context with the request deadline, the
 * app's strategy, scope and body checks, and the JSON and error outcomes
 * (service_int.h).
 */
#include "service/service_int.h"

#include <pthread.h>
#include <string.h>
#include <time.h>

#include "json/event_json.h"

#define US_PER_MS 1000LL
#define NS_PER_US 1000

int64_t service_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * US_PER_SEC + ts.tv_nsec / NS_PER_US;
}

void memd_set_clock(memd *m, memd_clock_fn now_us, void *userdata)
{
	pthread_mutex_lock(&m->clock_lock);
	m->clock_fn = now_us;
	m->clock_userdata = userdata;
	pthread_mutex_unlock(&m->clock_lock);
}

int64_t service_clock_us(memd *m)
{
	memd_clock_fn fn;
	void *ud;

	pthread_mutex_lock(&m->clock_lock);
	fn = m->clock_fn;
	ud = m->clock_userdata;
	pthread_mutex_unlock(&m->clock_lock);
	return fn ? fn(ud) : service_now_us();
}

memd_call service_call_for_request(const memd *m)
{
	struct timespec ts;
	memd_call c = { .struct_size = sizeof(c) };

	clock_gettime(CLOCK_MONOTONIC, &ts);
	c.deadline_us = (int64_t)ts.tv_sec * US_PER_SEC + ts.tv_nsec / NS_PER_US +
			m->set.request_timeout_ms * US_PER_MS;
	return c;
}

strategy *service_strategy_for(memd *m, const char *app, const char **ret_app)
{
	strategy *fallback = NULL;
	for (size_t i = 0; i < m->n_apps; i++) {
		if (strcmp(m->apps[i].app, app) == 0) {
			*ret_app = m->apps[i].app;
			return m->apps[i].st;
		}
		if (strcmp(m->apps[i].app, SETTINGS_DEFAULT_APP) == 0)
			fallback = m->apps[i].st;
	}
	*ret_app = SETTINGS_DEFAULT_APP;
	return fallback;
}

int32_t service_oom(memd_error *err)
{
	return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
}

int32_t service_check_scope(const char *app, const char *user, const char *sid, memd_scope *ret,
			    memd_error *err)
{
	int32_t r;
	if ((r = ej_check_id(app, "app", err)) < 0 || (r = ej_check_id(user, "user", err)) < 0)
		return r;
	if (sid && (r = ej_check_id(sid, "session id", err)) < 0)
		return r;
	*ret = (memd_scope){ .struct_size = sizeof(*ret), .app = app, .user = user, .session = sid };
	return 0;
}

int32_t service_finish(json_t *o, char **ret_json, memd_error *err)
{
	char *text;
	if (!o)
		return service_oom(err);
	text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!text)
		return service_oom(err);
	*ret_json = text;
	return 0;
}

int32_t service_parse_body(const char *body, json_t **ret, memd_error *err)
{
	json_error_t jerr;
	json_t *o;

	if (!body || !*body) {
		o = json_object();
		if (!o)
			return service_oom(err);
		*ret = o;
		return 0;
	}
	o = json_loads(body, JSON_REJECT_DUPLICATES, &jerr);
	if (!o)
		return memd_error_set(err, MEMD_EINVAL, 0, "body is not valid JSON: %s (at %d:%d)",
				      jerr.text, jerr.line, jerr.column);
	if (!json_is_object(o)) {
		json_decref(o);
		return memd_error_set(err, MEMD_EINVAL, 0, "body must be a JSON object");
	}
	*ret = o;
	return 0;
}

int32_t service_check_fields(json_t *o, const char *const *allowed, memd_error *err)
{
	const char *key;
	json_t *v;
	json_object_foreach(o, key, v) {
		size_t i;
		for (i = 0; allowed[i]; i++)
			if (strcmp(key, allowed[i]) == 0)
				break;
		if (!allowed[i])
			return memd_error_set(err, MEMD_EINVAL, 0, "unknown field '%.64s'", key);
	}
	return 0;
}

int32_t service_opt_string_field(json_t *o, const char *key, const char **ret, memd_error *err)
{
	json_t *v = json_object_get(o, key);
	*ret = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return memd_error_set(err, MEMD_EINVAL, 0, "%s: must be a string", key);
	*ret = json_string_value(v);
	return 0;
}

int32_t service_opt_object_field(json_t *o, const char *key, json_t **ret, memd_error *err)
{
	json_t *v = json_object_get(o, key);
	*ret = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_object(v))
		return memd_error_set(err, MEMD_EINVAL, 0, "%s: must be an object", key);
	*ret = v;
	return 0;
}

int32_t service_read_failed(memd *m, const json_out *jo, int32_t r, const char *how_to_page,
			    memd_error *err)
{
	if (jo->error == MEMD_ETOOBIG)
		return memd_error_set(err, MEMD_ETOOBIG, 0,
				      "the response would be over %zu bytes (server.max_response_bytes); %s",
				      jo->max_len, how_to_page ? how_to_page : "ask for less");
	if (jo->error == MEMD_EINVAL)
		return memd_error_set(err, MEMD_EIO, 0, "%s: a stored %s is not valid UTF-8",
				      store_name(m->sessions), jo->bad_field ? jo->bad_field : "string");
	if (jo->error == MEMD_ENOMEM)
		return service_oom(err);
	return r < 0 ? r : memd_error_set(err, MEMD_EINTERNAL, 0, "read failed");
}
