/* SPDX-License-Identifier: MIT */
#include "lane_key.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <memd/plugin.h>

#include "json/event_json.h"

#define LK_WHATSAPP "whatsapp"
#define LK_SEP ':'
#define LK_SHARED "shared"      /* the participant part of a lane nobody is named in */
#define LK_E164_DIGITS_MAX 15   /* ITU-T E.164: at most 15 digits */

typedef enum lk_type { LK_DM, LK_GROUP, LK_CHANNEL, LK_THREAD } lk_type;

static const char *const lk_type_names[] = { "dm", "group", "channel", "thread" };

static const char *present(const char *s)
{
	return s && s[0] ? s : NULL;
}

/* The suffixes of WhatsApp JIDs: users, legacy users, linked ids, groups. */
static const char *const wa_domains[] = { "s.whatsapp.net", "c.us", "lid", "g.us" };

/* "+1 (555) 010-9999" style: '+', digits and the punctuation people write
 * numbers with; at least one digit. */
static int phone_like(const char *s, size_t len, size_t *ret_digits)
{
	size_t digits = 0;
	int punct = 0;

	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (isdigit(c))
			digits++;
		else if (c == '+' && i == 0)
			punct = 1;
		else if (c == ' ' || c == '-' || c == '(' || c == ')' || c == '.')
			punct = 1;
		else
			return 0;
	}
	*ret_digits = digits;
	return digits > 0 && punct;
}

char *lane_key_whatsapp_canonical(const char *id)
{
	const char *s = id ? id : "", *at, *colon;
	size_t len, digits;
	int group = 0;
	char *out;

	while (*s == ' ' || *s == '\t')
		s++;
	len = strlen(s);
	while (len && (s[len - 1] == ' ' || s[len - 1] == '\t'))
		len--;
	at = memchr(s, '@', len);
	if (at) {
		const char *dom = at + 1;
		size_t dl = len - (size_t)(dom - s);
		for (size_t i = 0; i < sizeof(wa_domains) / sizeof(wa_domains[0]); i++) {
			if (dl == strlen(wa_domains[i]) && strncasecmp(dom, wa_domains[i], dl) == 0) {
				group = strcmp(wa_domains[i], "g.us") == 0;
				len = (size_t)(at - s);
				/* "number:device@domain": one device of the account */
				colon = memchr(s, ':', len);
				if (colon)
					len = (size_t)(colon - s);
				break;
			}
		}
	}
	if (!group && phone_like(s, len, &digits) && digits <= LK_E164_DIGITS_MAX) {
		out = malloc(digits + 1);
		if (!out)
			return NULL;
		digits = 0;
		for (size_t i = 0; i < len; i++)
			if (isdigit((unsigned char)s[i]))
				out[digits++] = s[i];
		out[digits] = '\0';
		return out;
	}
	return strndup(s, len);
}

/* Append ":" + part to the growing key at *buf. */
static int append(char **buf, size_t *len, const char *part)
{
	size_t pl = strlen(part);
	char *n = realloc(*buf, *len + 1 + pl + 1);

	if (!n)
		return -1;
	*buf = n;
	if (*len)
		n[(*len)++] = LK_SEP;
	memcpy(n + *len, part, pl);
	*len += pl;
	n[*len] = '\0';
	return 0;
}

static int32_t check_platform(const char *p, memd_error *err)
{
	size_t n = strlen(p);

	if (n > LANE_PLATFORM_MAX)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "source.platform: longer than %d bytes", LANE_PLATFORM_MAX);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];
		if (!isalnum(c) && c != '_' && c != '-' && c != '.')
			return memd_error_set(err, MEMD_EINVAL, 0,
					      "source.platform: only letters, digits, '_', '-' and "
					      "'.' are allowed");
	}
	return 0;
}

static int32_t check_text(const char *s, const char *what, memd_error *err)
{
	if (s && !ej_utf8_valid(s, strlen(s)))
		return memd_error_set(err, MEMD_EINVAL, 0, "source.%s: not valid UTF-8", what);
	return 0;
}

int32_t lane_key_resolve(const lane_source *src, const lane_key_rules *rules, char **ret_key,
			 char **ret_user, int *ret_shared, memd_error *err)
{
	lane_key_rules def = LANE_KEY_RULES_DEFAULT;
	const char *platform = present(src ? src->platform : NULL);
	const char *type_text = present(src ? src->chat_type : NULL);
	const char *thread = NULL, *raw_participant;
	char *plat = NULL, *chat = NULL, *participant = NULL, *key = NULL, *user = NULL;
	size_t klen = 0;
	lk_type type = LK_DM;
	int shared, per_user, whatsapp;
	int32_t r;

	if (!rules)
		rules = &def;
	if (!platform)
		return memd_error_set(err, MEMD_EINVAL, 0, "source.platform: required");
	if ((r = check_platform(platform, err)) < 0)
		return r;
	if (type_text) {
		size_t i, n = sizeof(lk_type_names) / sizeof(lk_type_names[0]);
		for (i = 0; i < n && strcmp(type_text, lk_type_names[i]) != 0; i++)
			;
		if (i == n)
			return memd_error_set(err, MEMD_EINVAL, 0,
					      "source.chat_type: must be dm, group, channel or "
					      "thread");
		type = (lk_type)i;
	}
	if ((r = check_text(src->chat_id, "chat_id", err)) < 0 ||
	    (r = check_text(src->thread_id, "thread_id", err)) < 0 ||
	    (r = check_text(src->user_id, "user_id", err)) < 0 ||
	    (r = check_text(src->user_id_alt, "user_id_alt", err)) < 0)
		return r;

	plat = strdup(platform);
	if (!plat)
		goto nomem;
	for (char *p = plat; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	whatsapp = strcmp(plat, LK_WHATSAPP) == 0;
	thread = present(src->thread_id);
	raw_participant = present(src->user_id_alt) ? src->user_id_alt : present(src->user_id);
	if (present(src->chat_id)) {
		chat = whatsapp ? lane_key_whatsapp_canonical(src->chat_id) : strdup(src->chat_id);
		if (!chat)
			goto nomem;
		if (!chat[0]) {
			free(chat);
			chat = NULL;
		}
	}
	if (raw_participant) {
		participant = whatsapp ? lane_key_whatsapp_canonical(raw_participant)
				       : strdup(raw_participant);
		if (!participant)
			goto nomem;
		if (!participant[0]) {
			free(participant);
			participant = NULL;
		}
	}

	if (append(&key, &klen, plat) < 0 || append(&key, &klen, lk_type_names[type]) < 0)
		goto nomem;
	if (type == LK_DM) {
		/* Always private: the chat names the conversation; without
		 * one, the participant does. */
		per_user = 1;
		if (chat && append(&key, &klen, chat) < 0)
			goto nomem;
		if (thread && append(&key, &klen, thread) < 0)
			goto nomem;
		if (!chat && participant && append(&key, &klen, participant) < 0)
			goto nomem;
		shared = !chat && !participant;
	} else {
		per_user = thread ? rules->thread_sessions_per_user : rules->group_sessions_per_user;
		if (chat && append(&key, &klen, chat) < 0)
			goto nomem;
		if (thread && append(&key, &klen, thread) < 0)
			goto nomem;
		if (per_user && participant && append(&key, &klen, participant) < 0)
			goto nomem;
		shared = !(per_user && participant);
	}

	if (!shared) {
		const char *who = participant ? participant : chat;
		if (asprintf(&user, "%s%c%s", plat, LK_SEP, who) < 0)
			user = NULL;
	} else if (!chat && !thread && !(type == LK_DM && participant)) {
		if (asprintf(&user, "%s%c%s", plat, LK_SEP, LK_SHARED) < 0)
			user = NULL;
	} else {
		user = strdup(key);
	}
	if (!user)
		goto nomem;
	if ((r = ej_check_id(key, "lane key", err)) < 0 ||
	    (r = ej_check_id(user, "lane user", err)) < 0)
		goto fail;
	free(plat);
	free(chat);
	free(participant);
	*ret_key = key;
	*ret_user = user;
	*ret_shared = shared;
	return 0;
nomem:
	r = memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
fail:
	free(plat);
	free(chat);
	free(participant);
	free(key);
	free(user);
	return r;
}
