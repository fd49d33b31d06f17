/* SPDX-License-Identifier: MIT */
#include "service/temp_state.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memd/abi.h>

/* Ids never contain control characters (the facade checks), so the unit
 * separator makes composite keys unambiguous. */
#define SEP "\x1f"
/* Sweep expired keys of all sessions at most this often. */
#define TEMP_SWEEP_INTERVAL_US (60LL * 1000000LL)

/* sessions: { "app SEP user SEP session": { key: [value, inv|null, expires_us] } } */
struct temp_state {
	pthread_mutex_t lock;
	json_t *sessions;
	int64_t ttl_us;
	int64_t next_sweep_us;
};

temp_state *temp_state_new(int64_t ttl_us)
{
	temp_state *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->sessions = json_object();
	if (!t->sessions) {
		free(t);
		return NULL;
	}
	t->ttl_us = ttl_us;
	pthread_mutex_init(&t->lock, NULL);
	return t;
}

void temp_state_free(temp_state *t)
{
	if (!t)
		return;
	json_decref(t->sessions);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

static char *session_key(const char *app, const char *user, const char *session)
{
	size_t n = strlen(app) + strlen(user) + (session ? strlen(session) : 0) + 3;
	char *k = malloc(n);
	if (k)
		snprintf(k, n, "%s" SEP "%s" SEP "%s", app, user, session ? session : "");
	return k;
}

static int64_t entry_expiry(json_t *entry)
{
	return json_integer_value(json_array_get(entry, 2));
}

/* Remove expired keys of one session map. Caller holds the lock. */
static void expire(json_t *keys, int64_t now_us)
{
	const char *k;
	json_t *v;
	void *tmp;
	json_object_foreach_safe(keys, tmp, k, v) {
		if (entry_expiry(v) <= now_us)
			json_object_del(keys, k);
	}
}

static void sweep(temp_state *t, int64_t now_us)
{
	const char *k;
	json_t *keys;
	void *tmp;

	if (now_us < t->next_sweep_us)
		return;
	t->next_sweep_us = now_us + TEMP_SWEEP_INTERVAL_US;
	json_object_foreach_safe(t->sessions, tmp, k, keys) {
		expire(keys, now_us);
		if (json_object_size(keys) == 0)
			json_object_del(t->sessions, k);
	}
}

int32_t temp_state_set(temp_state *t, const char *app, const char *user, const char *session,
		       const char *inv, const char *key, json_t *value, int64_t now_us)
{
	char *sk = session_key(app, user, session);
	json_t *keys, *entry;
	int32_t r = 0;

	if (!sk)
		return MEMD_ENOMEM;
	pthread_mutex_lock(&t->lock);
	sweep(t, now_us);
	keys = json_object_get(t->sessions, sk);
	if (!value || json_is_null(value)) {
		if (keys)
			json_object_del(keys, key);
		goto out;
	}
	if (!keys) {
		keys = json_object();
		if (!keys || json_object_set_new(t->sessions, sk, keys) < 0) {
			r = MEMD_ENOMEM;
			goto out;
		}
	}
	entry = json_pack("[O,s?,I]", value, inv, (json_int_t)(now_us + t->ttl_us));
	if (!entry || json_object_set_new(keys, key, entry) < 0)
		r = MEMD_ENOMEM;
out:
	pthread_mutex_unlock(&t->lock);
	free(sk);
	return r;
}

int32_t temp_state_merge(temp_state *t, const char *app, const char *user, const char *session,
			 json_t *obj, int64_t now_us)
{
	char *sk = session_key(app, user, session);
	json_t *keys, *v;
	const char *k;
	int32_t r = 0;

	if (!sk)
		return MEMD_ENOMEM;
	pthread_mutex_lock(&t->lock);
	keys = json_object_get(t->sessions, sk);
	if (keys) {
		expire(keys, now_us);
		json_object_foreach(keys, k, v) {
			if (json_object_set(obj, k, json_array_get(v, 0)) < 0) {
				r = MEMD_ENOMEM;
				break;
			}
		}
	}
	pthread_mutex_unlock(&t->lock);
	free(sk);
	return r;
}

void temp_state_end_invocation(temp_state *t, const char *app, const char *user,
			       const char *session, const char *inv)
{
	char *sk = session_key(app, user, session);
	json_t *keys, *v;
	const char *k;
	void *tmp;

	if (!sk)
		return;
	pthread_mutex_lock(&t->lock);
	keys = json_object_get(t->sessions, sk);
	if (keys) {
		json_object_foreach_safe(keys, tmp, k, v) {
			const char *owner = json_string_value(json_array_get(v, 1));
			if (owner && strcmp(owner, inv) == 0)
				json_object_del(keys, k);
		}
		if (json_object_size(keys) == 0)
			json_object_del(t->sessions, sk);
	}
	pthread_mutex_unlock(&t->lock);
	free(sk);
}

void temp_state_drop(temp_state *t, const char *app, const char *user, const char *session)
{
	char *sk = session_key(app, user, session);
	const char *k;
	json_t *v;
	void *tmp;
	size_t prefix;

	if (!sk)
		return;
	pthread_mutex_lock(&t->lock);
	if (session) {
		json_object_del(t->sessions, sk);
	} else {
		prefix = strlen(sk); /* "app SEP user SEP" */
		json_object_foreach_safe(t->sessions, tmp, k, v) {
			if (strncmp(k, sk, prefix) == 0)
				json_object_del(t->sessions, k);
		}
	}
	pthread_mutex_unlock(&t->lock);
	free(sk);
}
