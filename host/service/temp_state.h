/* SPDX-License-Identifier: MIT */
/*
 * temp_state: "temp:" state keys. Never persisted: they live in memory for
 * the invocation that wrote them and are dropped when it ends
 * (temp_state_end_invocation) or when they are older than the TTL.
 * Thread-safe.
 */
#ifndef MEMD_HOST_TEMP_STATE_H
#define MEMD_HOST_TEMP_STATE_H

#include <jansson.h>
#include <stdint.h>

typedef struct temp_state temp_state;

/* NULL on ENOMEM. ttl_us > 0. */
temp_state *temp_state_new(int64_t ttl_us);
/* Accepts NULL. */
void temp_state_free(temp_state *t);

/* Set key (with its "temp:" prefix) of the session to value (a JSON value,
 * borrowed and copied; NULL or JSON null deletes), written by invocation
 * inv (NULL = none: only the TTL drops it). 0 or MEMD_ENOMEM. */
int32_t temp_state_set(temp_state *t, const char *app, const char *user, const char *session,
		       const char *inv, const char *key, json_t *value, int64_t now_us);
/* Add the session's live temp keys into obj. 0 or MEMD_ENOMEM. */
int32_t temp_state_merge(temp_state *t, const char *app, const char *user, const char *session,
			 json_t *obj, int64_t now_us);
/* Drop the keys written by invocation inv of the session. */
void temp_state_end_invocation(temp_state *t, const char *app, const char *user,
			       const char *session, const char *inv);
/* Drop every key of the session, or (session NULL) of every session of
 * the user. */
void temp_state_drop(temp_state *t, const char *app, const char *user, const char *session);

#endif
