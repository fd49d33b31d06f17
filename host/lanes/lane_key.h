/* SPDX-License-Identifier: MIT */
/* lane_key: the lane of a message source. A chat gateway sends where a
 * message came from (platform, chat type, chat, thread, author); every
 * memd process derives the same lane key and user scope from it, with no
 * store call. */
#ifndef MEMD_HOST_LANE_KEY_H
#define MEMD_HOST_LANE_KEY_H

#include <stdint.h>

#include <memd/abi.h>

#define LANE_PLATFORM_MAX 64 /* bytes in a platform name ("telegram") */

/* Where a message came from. Borrowed strings; NULL and "" both mean
 * absent. platform is required: letters, digits, '_', '-' and '.'
 * (1..LANE_PLATFORM_MAX bytes), compared without ASCII case (keys carry it
 * in lowercase). chat_type is "dm", "group", "channel" or "thread" (absent
 * = "dm"). chat_name and user_name are display names: they never change a
 * key. */
typedef struct lane_source {
	const char *platform;
	const char *chat_type;
	const char *chat_id;
	const char *chat_name;
	const char *thread_id;
	const char *user_id;
	const char *user_id_alt;     /* a stable alternative to user_id; preferred */
	const char *user_name;
} lane_source;

/* How groups and threads are isolated. */
typedef struct lane_key_rules {
	int group_sessions_per_user;  /* groups and channels: one lane per participant */
	int thread_sessions_per_user; /* threads: one lane per participant */
} lane_key_rules;

/* The defaults: groups per user, threads shared. */
#define LANE_KEY_RULES_DEFAULT ((lane_key_rules){ .group_sessions_per_user = 1, \
						  .thread_sessions_per_user = 0 })

/* Derive the lane key and user scope of src under rules (NULL = the
 * defaults). Key: "{platform}:{chat_type}[:{chat_id}][:{thread_id}]
 * [:{participant}]", where the participant is user_id_alt, else user_id:
 *  - dm: "{p}:dm:{chat_id}[:{thread_id}]"; without chat_id
 *    "{p}:dm[:{thread_id}][:{participant}]". Always private.
 *  - group, channel, thread: "{p}:{type}[:{chat_id}][:{thread_id}]", plus
 *    ":{participant}" when the lane is per user: with a thread_id when
 *    thread_sessions_per_user, else when group_sessions_per_user.
 *  - whatsapp: chat_id and participant canonicalised first (the
 *    @s.whatsapp.net, @c.us, @lid or @g.us suffix and a ":device" part
 *    dropped; a phone number reduced to its E.164 digits), so alias forms
 *    of one number give one lane.
 * User scope (*ret_user): a private lane's is "{p}:{participant}" (a DM
 * without participant: "{p}:{chat_id}"); a shared lane's is the key
 * itself, or "{p}:shared" when the key names no chat, thread or
 * participant. *ret_shared is 1 for a lane several participants share.
 * On success *ret_key and *ret_user are malloc'd (the caller frees) and
 * *ret_shared is set; on failure none is written: MEMD_EINVAL (a missing
 * or bad platform, an unknown chat_type, an identifier that is not valid
 * UTF-8, or a key or user that is not a valid id: 1..MEMD_ID_MAX bytes, no
 * control characters, no '/'), MEMD_ENOMEM. */
int32_t lane_key_resolve(const lane_source *src, const lane_key_rules *rules, char **ret_key,
			 char **ret_user, int *ret_shared, memd_error *err);

/* The canonical form of a WhatsApp identifier (as lane_key_resolve uses
 * it), malloc'd, or NULL on ENOMEM. */
char *lane_key_whatsapp_canonical(const char *id);

#endif
