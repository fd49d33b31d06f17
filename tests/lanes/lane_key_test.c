/* SPDX-License-Identifier: MIT */
/* lanes/lane_key: every row of the gateway key tables (DMs, groups,
 * channels, threads shared and per user, the fallbacks without
 * identifiers, WhatsApp's alias forms), the isolation switches, and bad
 * sources refused with a clear message. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "lanes/lane_key.h"

#define ID_TOO_LONG 300

typedef struct key_row {
	const char *what;
	lane_source src;
	int group_per_user;  /* the rules */
	int thread_per_user;
	const char *key;     /* expected */
	const char *user;
	int shared;
} key_row;

static const key_row rows[] = {
	/* DMs: always private */
	{ "DM with chat_id", { .platform = "telegram", .chat_type = "dm", .chat_id = "12345", .user_id = "12345", .user_name = "Ann" }, 1, 0,
	  "telegram:dm:12345", "telegram:12345", 0 },
	{ "DM with chat_id, no participant", { .platform = "telegram", .chat_type = "dm", .chat_id = "12345" }, 1, 0,
	  "telegram:dm:12345", "telegram:12345", 0 },
	{ "DM with chat_id + thread", { .platform = "telegram", .chat_type = "dm", .chat_id = "12345", .thread_id = "thread_678", .user_id = "12345" },
	  1, 0, "telegram:dm:12345:thread_678", "telegram:12345", 0 },
	{ "DM without chat_id, with participant", { .platform = "signal", .chat_type = "dm", .user_id = "user_abc" },
	  1, 0, "signal:dm:user_abc", "signal:user_abc", 0 },
	{ "DM without chat_id or participant", { .platform = "telegram", .chat_type = "dm" }, 1, 0, "telegram:dm",
	  "telegram:shared", 1 },
	{ "DM: chat_type absent means dm", { .platform = "telegram", .chat_id = "12345" }, 1, 0,
	  "telegram:dm:12345", "telegram:12345", 0 },
	{ "DM ignores group_sessions_per_user", { .platform = "telegram", .chat_type = "dm", .chat_id = "12345", .user_id = "u9" },
	  0, 1, "telegram:dm:12345", "telegram:u9", 0 },
	{ "WhatsApp DM (JID)", { .platform = "whatsapp", .chat_type = "dm", .chat_id = "15551234567@s.whatsapp.net", .user_id = "15551234567@s.whatsapp.net" },
	  1, 0, "whatsapp:dm:15551234567", "whatsapp:15551234567", 0 },
	{ "WhatsApp DM (c.us alias)", { .platform = "whatsapp", .chat_type = "dm", .chat_id = "15551234567@c.us" }, 1, 0,
	  "whatsapp:dm:15551234567", "whatsapp:15551234567", 0 },
	{ "WhatsApp DM (device JID)", { .platform = "whatsapp", .chat_type = "dm", .chat_id = "15551234567:12@s.whatsapp.net" }, 1, 0,
	  "whatsapp:dm:15551234567", "whatsapp:15551234567", 0 },
	{ "WhatsApp DM (written number)", { .platform = "whatsapp", .chat_type = "dm", .chat_id = "+1 (555) 123-4567" }, 1, 0,
	  "whatsapp:dm:15551234567", "whatsapp:15551234567", 0 },
	{ "WhatsApp DM (linked id)", { .platform = "whatsapp", .chat_type = "dm", .chat_id = "208330071715946@lid" }, 1, 0,
	  "whatsapp:dm:208330071715946", "whatsapp:208330071715946", 0 },

	/* groups and channels */
	{ "Group chat (shared by config)",
	  { .platform = "telegram", .chat_type = "group", .chat_id = "-10012345", .user_id = "user_abc" }, 0, 0,
	  "telegram:group:-10012345", "telegram:group:-10012345", 1 },
	{ "Group chat without participant", { .platform = "telegram", .chat_type = "group", .chat_id = "-10012345" }, 1, 0,
	  "telegram:group:-10012345", "telegram:group:-10012345", 1 },
	{ "Group chat, per-user isolation",
	  { .platform = "telegram", .chat_type = "group", .chat_id = "-10012345", .chat_name = "Team", .user_id = "user_abc", .user_name = "Ann" }, 1, 0,
	  "telegram:group:-10012345:user_abc", "telegram:user_abc", 0 },
	{ "Thread in group, shared", { .platform = "discord", .chat_type = "group", .chat_id = "12345", .thread_id = "thread_678", .user_id = "user_abc" },
	  1, 0, "discord:group:12345:thread_678", "discord:group:12345:thread_678", 1 },
	{ "Thread in group, per-user",
	  { .platform = "discord", .chat_type = "group", .chat_id = "12345", .thread_id = "thread_678", .user_id = "user_abc" }, 1, 1,
	  "discord:group:12345:thread_678:user_abc", "discord:user_abc", 0 },
	{ "Thread per user even when groups are shared",
	  { .platform = "discord", .chat_type = "group", .chat_id = "12345", .thread_id = "thread_678", .user_id = "user_abc" }, 0, 1,
	  "discord:group:12345:thread_678:user_abc", "discord:user_abc", 0 },
	{ "Channel (shared by config)", { .platform = "slack", .chat_type = "channel", .chat_id = "C12345", .user_id = "U1" }, 0, 0,
	  "slack:channel:C12345", "slack:channel:C12345", 1 },
	{ "Channel, per user", { .platform = "slack", .chat_type = "channel", .chat_id = "C12345", .user_id = "U1" }, 1, 0,
	  "slack:channel:C12345:U1", "slack:U1", 0 },
	{ "Thread chat type, shared", { .platform = "slack", .chat_type = "thread", .chat_id = "C12345", .thread_id = "1700000000.000100", .user_id = "U1" },
	  1, 0, "slack:thread:C12345:1700000000.000100", "slack:thread:C12345:1700000000.000100",
	  1 },
	{ "Thread chat type without thread_id follows the group rule",
	  { .platform = "slack", .chat_type = "thread", .chat_id = "C12345", .user_id = "U1" }, 1, 0, "slack:thread:C12345:U1",
	  "slack:U1", 0 },
	{ "WhatsApp group (canonicalized)",
	  { .platform = "whatsapp", .chat_type = "group", .chat_id = "120363025246125486@g.us", .user_id = "15551234567:3@s.whatsapp.net" },
	  1, 0, "whatsapp:group:120363025246125486:15551234567", "whatsapp:15551234567", 0 },
	{ "WhatsApp legacy group id keeps its hyphen",
	  { .platform = "whatsapp", .chat_type = "group", .chat_id = "15551234567-1443090934@g.us", .user_id = "+1 555 123 4567" },
	  1, 0, "whatsapp:group:15551234567-1443090934:15551234567", "whatsapp:15551234567", 0 },
	{ "Group without chat_id, per user", { .platform = "telegram", .chat_type = "group", .user_id = "u1" }, 1, 0,
	  "telegram:group:u1", "telegram:u1", 0 },
	{ "Group without any identifier", { .platform = "telegram", .chat_type = "group" }, 1, 0, "telegram:group",
	  "telegram:shared", 1 },

	/* participant = user_id_alt, else user_id */
	{ "user_id_alt wins", { .platform = "signal", .chat_type = "group", .chat_id = "g1", .user_id = "+15550001111", .user_id_alt = "uuid-abc" },
	  1, 0, "signal:group:g1:uuid-abc", "signal:uuid-abc", 0 },
	{ "empty user_id_alt is absent", { .platform = "signal", .chat_type = "group", .chat_id = "g1", .user_id = "u1", .user_id_alt = "" }, 1, 0,
	  "signal:group:g1:u1", "signal:u1", 0 },
	{ "empty chat_id is absent", { .platform = "signal", .chat_type = "dm", .chat_id = "", .thread_id = "", .user_id = "u1" }, 1, 0, "signal:dm:u1",
	  "signal:u1", 0 },
	{ "platform compared without case", { .platform = "Telegram", .chat_type = "dm", .chat_id = "12345" }, 1, 0,
	  "telegram:dm:12345", "telegram:12345", 0 },
	{ "display names never change the key", { .platform = "telegram", .chat_type = "dm", .chat_id = "12345", .chat_name = "Other", .user_name = "Bob" },
	  1, 0, "telegram:dm:12345", "telegram:12345", 0 },
};

Test(lane_key, every_row_of_the_key_tables)
{
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const key_row *r = &rows[i];
		lane_key_rules rules = { r->group_per_user, r->thread_per_user };
		memd_error err = { .struct_size = sizeof(err) };
		char *key = NULL, *user = NULL;
		int shared = -1;
		int32_t rc = lane_key_resolve(&r->src, &rules, &key, &user, &shared, &err);

		cr_assert_eq(rc, 0, "%s: %s", r->what, err.msg);
		cr_expect_str_eq(key, r->key, "%s: key", r->what);
		cr_expect_str_eq(user, r->user, "%s: user", r->what);
		cr_expect_eq(shared, r->shared, "%s: shared", r->what);
		free(key);
		free(user);
	}
}

Test(lane_key, null_rules_are_the_defaults)
{
	lane_source g = { .platform = "discord", .chat_type = "group", .chat_id = "1",
			  .user_id = "u" };
	lane_source t = { .platform = "discord", .chat_type = "group", .chat_id = "1",
			  .thread_id = "t", .user_id = "u" };
	char *key, *user;
	int shared;

	cr_assert_eq(lane_key_resolve(&g, NULL, &key, &user, &shared, NULL), 0);
	cr_expect_str_eq(key, "discord:group:1:u");
	cr_expect_eq(shared, 0);
	free(key);
	free(user);
	cr_assert_eq(lane_key_resolve(&t, NULL, &key, &user, &shared, NULL), 0);
	cr_expect_str_eq(key, "discord:group:1:t");
	cr_expect_eq(shared, 1);
	free(key);
	free(user);
}

Test(lane_key, whatsapp_aliases_of_one_number_are_one_identifier)
{
	static const char *const forms[] = {
		"15551234567", "15551234567@s.whatsapp.net", "15551234567@c.us",
		"15551234567:7@s.whatsapp.net", "+15551234567", "+1 555 123 4567",
		"+1 (555) 123-4567", " 15551234567@S.WHATSAPP.NET ", "1.555.123.4567",
	};

	for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
		char *c = lane_key_whatsapp_canonical(forms[i]);
		cr_expect_str_eq(c, "15551234567", "%s", forms[i]);
		free(c);
	}
	/* not phone numbers: kept as written */
	char *c = lane_key_whatsapp_canonical("alice@example.org");
	cr_expect_str_eq(c, "alice@example.org");
	free(c);
	c = lane_key_whatsapp_canonical("+1 555 123 4567 8901 2345"); /* 20 digits */
	cr_expect_str_eq(c, "+1 555 123 4567 8901 2345");
	free(c);
}

typedef struct bad_row {
	lane_source src;
	const char *msg;     /* the error message, exactly */
} bad_row;

Test(lane_key, bad_sources_are_refused_with_a_clear_message)
{
	static char long_id[ID_TOO_LONG + 1];
	memset(long_id, '7', ID_TOO_LONG);
	const bad_row bad[] = {
		{ { .chat_type = "dm", .chat_id = "1" }, "source.platform: required" },
		{ { .platform = "", .chat_type = "dm", .chat_id = "1" }, "source.platform: required" },
		{ { .platform = "tele gram", .chat_type = "dm", .chat_id = "1" },
		  "source.platform: only letters, digits, '_', '-' and '.' are allowed" },
		{ { .platform = "tele:gram", .chat_type = "dm", .chat_id = "1" },
		  "source.platform: only letters, digits, '_', '-' and '.' are allowed" },
		{ { .platform = "a/b", .chat_type = "dm", .chat_id = "1" },
		  "source.platform: only letters, digits, '_', '-' and '.' are allowed" },
		{ { .platform = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", .chat_type = "dm" },
		  "source.platform: longer than 64 bytes" },
		{ { .platform = "telegram", .chat_type = "private", .chat_id = "1" },
		  "source.chat_type: must be dm, group, channel or thread" },
		{ { .platform = "telegram", .chat_type = "DM", .chat_id = "1" }, "source.chat_type: must be dm, group, channel or thread" },
		{ { .platform = "telegram", .chat_type = "dm", .chat_id = long_id }, "lane key: longer than 255 bytes" },
		{ { .platform = "telegram", .chat_type = "dm", .user_id = long_id }, "lane key: longer than 255 bytes" },
		{ { .platform = "telegram", .chat_type = "dm", .chat_id = "a/b" }, "lane key: contains '/'" },
		{ { .platform = "telegram", .chat_type = "group", .chat_id = "g", .user_id = "u\n1" },
		  "lane key: contains a control character" },
		{ { .platform = "telegram", .chat_type = "dm", .chat_id = "\xff\xfe" }, "source.chat_id: not valid UTF-8" },
		{ { .platform = "telegram", .chat_type = "group", .chat_id = "g", .user_id_alt = "\xc0\xaf" },
		  "source.user_id_alt: not valid UTF-8" },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memd_error err = { .struct_size = sizeof(err) };
		char *key = (char *)"untouched", *user = (char *)"untouched";
		int shared = 7;

		cr_expect_eq(lane_key_resolve(&bad[i].src, NULL, &key, &user, &shared, &err),
			     MEMD_EINVAL, "row %zu", i);
		cr_expect_eq(err.code, MEMD_EINVAL, "row %zu", i);
		cr_expect_str_eq(err.msg, bad[i].msg, "row %zu", i);
		cr_expect_str_eq(key, "untouched", "row %zu: key written on failure", i);
		cr_expect_str_eq(user, "untouched", "row %zu", i);
		cr_expect_eq(shared, 7, "row %zu", i);
	}
}

Test(lane_key, a_shared_lane_user_too_long_is_refused)
{
	/* a 200-byte chat and a 60-byte thread: the key is over 255 bytes
	 * only with its prefix, so the refusal names the key */
	char chat[201], thread[61];
	lane_source s = { .platform = "discord", .chat_type = "group", .chat_id = chat,
			  .thread_id = thread, .user_id = "u" };
	memd_error err = { .struct_size = sizeof(err) };
	char *key, *user;
	int shared;

	memset(chat, 'c', 200);
	chat[200] = '\0';
	memset(thread, 't', 60);
	thread[60] = '\0';
	cr_expect_eq(lane_key_resolve(&s, NULL, &key, &user, &shared, &err), MEMD_EINVAL);
	cr_expect_str_eq(err.msg, "lane key: longer than 255 bytes");
}
