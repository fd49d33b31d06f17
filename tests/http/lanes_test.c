/* SPDX-License-Identifier: MIT */
/*
 * Lanes over real HTTP: every lane, turn and inbox route of a `memd
 * serve` on SQLite, as a chat gateway drives them (resolve and open,
 * begin a turn, take the inbox, append with usage, end; a restart), lane
 * keys with ':' raw and percent-encoded, the action rule of the router,
 * scopes, and bad input: each refused with a clear 4xx and nothing
 * changed. Every response is checked against api/openapi.yaml by the
 * harness.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define APP "/v1/apps/demo"
/* A Telegram DM from user 42: lane telegram:dm:42 of user telegram:42. */
#define DM_SOURCE "{\"platform\":\"telegram\",\"chat_type\":\"dm\",\"chat_id\":\"42\",\"user_id\":\"42\"}"
#define DM_USER APP "/users/telegram:42"
#define DM_LANE DM_USER "/lanes/telegram:dm:42"
#define DM_LANE_ENC DM_USER "/lanes/telegram%3Adm%3A42"
#define PATH_MAX_LEN 512

/* No automatic reset: a daily boundary passing between two calls of a
 * test would start a new session under it. */
#define NO_RESET "lanes:\n  reset: {mode: none}\n"

#define KEY_R "read-key-0123456789abcdef0123456789abcdef"
#define KEY_W "write-key-0123456789abcdef0123456789abcdef"
#define KEY_A "admin-key-0123456789abcdef0123456789abcdef"

static hs H;

static void setup(void)
{
	memset(&H, 0, sizeof(H));
}

static void teardown(void)
{
	hs_finish(&H);
}

TestSuite(lanes, .init = setup, .fini = teardown, .timeout = 60);

static void expect_error(const char *method, const char *path, const char *body, long status,
			 const char *code)
{
	hs_expect_error(&H, method, path, body, status, code, NULL);
}

static const char *str(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* path + suffix into buf. */
static const char *at(char *buf, const char *path, const char *suffix)
{
	snprintf(buf, PATH_MAX_LEN, "%s%s", path, suffix);
	return buf;
}

/* Everything a lane call could change: the lane, its inbox and the
 * user's sessions (with events and state), as canonical JSON text. */
static char *everything(const char *lane_path, const char *app, const char *user)
{
	char p[PATH_MAX_LEN], *snap = hs_snapshot(&H, app, user), *text;
	json_t *all = json_object();
	hs_resp r;

	hs_json(&H, "GET", lane_path, NULL, &r);
	json_object_set_new(all, "lane_status", json_integer(r.status));
	json_object_set(all, "lane", r.json ? r.json : json_null());
	hs_resp_clear(&r);
	hs_json(&H, "GET", at(p, lane_path, "/inbox"), NULL, &r);
	json_object_set(all, "inbox", r.json ? r.json : json_null());
	hs_resp_clear(&r);
	json_object_set_new(all, "sessions", json_string(snap));
	free(snap);
	text = json_dumps(all, JSON_SORT_KEYS | JSON_COMPACT);
	json_decref(all);
	return text;
}

#define ASSERT_UNCHANGED(before, what)                                                        \
	do {                                                                                 \
		char *after_ = everything(DM_LANE, "demo", "telegram:42");                   \
		cr_assert_str_eq(after_, before, "%s changed something", what);              \
		free(after_);                                                                \
	} while (0)

/* Open the DM lane from its source; returns the open's answer. */
static json_t *open_dm(void)
{
	return hs_expect(&H, "POST", APP "/lanes:open", "{\"platform\":\"telegram\",\"chat_type\":\"dm\","
			 "\"chat_id\":\"42\",\"user_id\":\"42\",\"user_name\":\"Ann\"}", 200);
}

/* Begin a turn on the DM lane; returns its id (malloc'd). */
static char *begin_turn(void)
{
	char p[PATH_MAX_LEN], *id;
	json_t *t = hs_expect(&H, "POST", at(p, DM_LANE, "/turns"), "{\"lease_ms\":600000}", 200);
	id = strdup(str(t, "turn_id"));
	json_decref(t);
	return id;
}

/* ---- the message loop ------------------------------------------------------------- */

Test(lanes, a_gateway_message_loop)
{
	char p[PATH_MAX_LEN], body[PATH_MAX_LEN];
	json_t *o, *lane, *session, *t, *u;
	char *turn, *sid;
	hs_resp r;

	hs_start(&H, NULL, NO_RESET);
	/* resolve: pure, the same answer every time. */
	o = hs_expect(&H, "POST", APP "/lanes:resolve", DM_SOURCE, 200);
	cr_assert_str_eq(str(o, "key"), "telegram:dm:42");
	cr_assert_str_eq(str(o, "user"), "telegram:42");
	cr_assert(json_is_false(json_object_get(o, "shared")));
	json_decref(o);
	expect_error("GET", DM_LANE, NULL, 404, "not_found");

	/* resolve+open in one call: a new lane with a new session whose
	 * origin is the source. */
	o = open_dm();
	cr_assert_str_eq(str(o, "key"), "telegram:dm:42");
	cr_assert_str_eq(str(o, "user"), "telegram:42");
	cr_assert(json_is_true(json_object_get(o, "created")));
	cr_assert(json_is_null(json_object_get(o, "reset")));
	cr_assert(json_is_false(json_object_get(o, "resumed")));
	lane = json_object_get(o, "lane");
	session = json_object_get(o, "session");
	sid = strdup(str(session, "id"));
	cr_assert_str_eq(str(lane, "session_id"), sid);
	cr_assert_str_eq(str(session, "lane_key"), "telegram:dm:42");
	cr_assert_str_eq(str(json_object_get(session, "origin"), "platform"), "telegram");
	cr_assert_str_eq(str(json_object_get(lane, "origin"), "user_name"), "Ann");
	json_decref(o);

	/* Opening again keeps the session. */
	o = open_dm();
	cr_assert(json_is_false(json_object_get(o, "created")));
	cr_assert_str_eq(str(json_object_get(o, "session"), "id"), sid);
	json_decref(o);

	/* The lane by path, with its ':' raw and percent-encoded. */
	o = hs_expect(&H, "GET", DM_LANE, NULL, 200);
	cr_assert_str_eq(str(o, "key"), "telegram:dm:42");
	json_decref(o);
	o = hs_expect(&H, "GET", DM_LANE_ENC, NULL, 200);
	cr_assert_str_eq(str(o, "key"), "telegram:dm:42");
	cr_assert(json_is_null(json_object_get(o, "turn")));
	json_decref(o);

	/* Begin a turn; a second begin is a 409 naming the holder. */
	t = hs_expect(&H, "POST", at(p, DM_LANE_ENC, "/turns"), "{\"lease_ms\":600000}", 200);
	turn = strdup(str(t, "turn_id"));
	cr_assert_eq(json_integer_value(json_object_get(t, "lease_ms")), 600000);
	cr_assert_str_eq(str(json_object_get(json_object_get(t, "lane"), "turn"), "id"), turn);
	json_decref(t);
	/* Messages that arrive meanwhile go to the inbox. */
	o = hs_expect(&H, "POST", at(p, DM_LANE, "/inbox"),
		      "{\"mode\":\"queue\",\"event\":{\"role\":\"user\",\"content\":\"and one more\"}}", 200);
	cr_assert_eq(json_integer_value(json_object_get(o, "depth")), 1);
	cr_assert(json_is_true(json_object_get(o, "slot")));
	json_decref(o);
	o = hs_expect(&H, "POST", at(p, DM_LANE, "/inbox"),
		      "{\"mode\":\"queue\",\"event\":{\"role\":\"user\",\"content\":\"and another\"}}", 200);
	cr_assert_eq(json_integer_value(json_object_get(o, "depth")), 2);
	cr_assert(json_is_false(json_object_get(o, "slot")));
	json_decref(o);
	hs_json(&H, "POST", at(p, DM_LANE, "/turns"), NULL, &r);
	cr_assert_eq(r.status, 409, "%s", r.body);
	cr_assert_str_eq(hs_error_code(&r), "conflict");
	{
		json_t *holder = json_object_get(r.json, "holder");
		cr_assert(json_is_string(json_object_get(holder, "lease_until")), "%s", r.body);
		cr_assert_eq(json_integer_value(json_object_get(holder, "inbox_depth")), 2, "%s", r.body);
	}
	hs_resp_clear(&r);

	/* The holder takes the inbox in order: the slot, then the FIFO head
	 * moved up into it. */
	snprintf(body, sizeof(body), "{\"turn_id\":\"%s\"}", turn);
	o = hs_expect(&H, "POST", at(p, DM_LANE, "/inbox:take"), body, 200);
	cr_assert_str_eq(str(json_object_get(json_object_get(o, "item"), "event"), "content"),
			 "and one more");
	cr_assert_eq(json_integer_value(json_object_get(o, "depth")), 1);
	json_decref(o);
	o = hs_expect(&H, "GET", at(p, DM_LANE, "/inbox"), NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(o, "items")), 1);
	cr_assert_eq(json_integer_value(json_object_get(o, "depth")), 1);
	json_decref(o);
	o = hs_expect(&H, "POST", at(p, DM_LANE, "/inbox:take"), body, 200);
	cr_assert_str_eq(str(json_object_get(json_object_get(o, "item"), "event"), "content"),
			 "and another");
	json_decref(o);
	o = hs_expect(&H, "POST", at(p, DM_LANE, "/inbox:take"), body, 200);
	cr_assert(json_is_null(json_object_get(o, "item")));
	cr_assert_eq(json_integer_value(json_object_get(o, "depth")), 0);
	json_decref(o);

	/* Append the user's message and the reply with its usage. */
	snprintf(p, sizeof(p), DM_USER "/sessions/%s/events", sid);
	o = hs_expect(&H, "POST", p,
		      "{\"events\":[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\","
		      "\"content\":\"hello\"}],\"usage\":{\"input_tokens\":100,\"output_tokens\":20,"
		      "\"cost_usd\":0.5}}", 200);
	cr_assert_eq(json_array_size(json_object_get(o, "seqs")), 2);
	json_decref(o);

	/* End the turn with the rest of the usage. */
	snprintf(p, sizeof(p), DM_LANE "/turns/%s:end", turn);
	o = hs_expect(&H, "POST", p,
		      "{\"outcome\":\"ok\",\"usage\":{\"input_tokens\":1,\"cache_read_tokens\":7,"
		      "\"last_prompt_tokens\":120}}", 200);
	lane = json_object_get(o, "lane");
	cr_assert(json_is_null(json_object_get(lane, "turn")));
	u = json_object_get(lane, "usage");
	cr_assert_eq(json_integer_value(json_object_get(u, "input_tokens")), 101);
	cr_assert_eq(json_integer_value(json_object_get(u, "output_tokens")), 20);
	cr_assert_eq(json_integer_value(json_object_get(u, "cache_read_tokens")), 7);
	cr_assert_eq(json_integer_value(json_object_get(u, "last_prompt_tokens")), 120);
	cr_assert_float_eq(json_number_value(json_object_get(u, "cost_usd")), 0.5, 1e-9);
	json_decref(o);
	snprintf(p, sizeof(p), DM_USER "/sessions/%s", sid);
	o = hs_expect(&H, "GET", p, NULL, 200);
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(o, "usage"), "input_tokens")),
		     101);
	json_decref(o);

	/* The session list filters by lane and by origin platform. */
	o = hs_expect(&H, "GET", DM_USER "/sessions?lane=telegram%3Adm%3A42", NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(o, "sessions")), 1);
	json_decref(o);
	o = hs_expect(&H, "GET", DM_USER "/sessions?origin_platform=discord", NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(o, "sessions")), 0);
	json_decref(o);
	o = hs_expect(&H, "GET", DM_USER "/sessions?origin_platform=telegram", NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(o, "sessions")), 1);
	json_decref(o);
	free(turn);
	free(sid);
}

/* ---- a restart ---------------------------------------------------------------------- */

Test(lanes, a_restart_continues_the_interrupted_lanes)
{
	char p[PATH_MAX_LEN];
	json_t *o, *lanes;
	char *turn, *sid;

	hs_start(&H, NULL, NO_RESET);
	o = open_dm();
	sid = strdup(str(json_object_get(o, "session"), "id"));
	json_decref(o);
	/* A second lane that finishes its turn. */
	json_decref(hs_expect(&H, "POST", APP "/lanes:open",
			      "{\"platform\":\"slack\",\"chat_type\":\"dm\",\"chat_id\":\"D1\","
			      "\"user_id\":\"U1\"}", 200));
	turn = begin_turn();
	/* The gateway is told to stop: it ends its turn as interrupted. */
	snprintf(p, sizeof(p), DM_LANE "/turns/%s:end", turn);
	o = hs_expect(&H, "POST", p, "{\"outcome\":\"interrupted\",\"reason\":\"shutdown_timeout\"}", 200);
	cr_assert(json_is_true(json_object_get(json_object_get(o, "lane"), "resume_pending")));
	cr_assert_str_eq(str(json_object_get(o, "lane"), "resume_reason"), "shutdown_timeout");
	json_decref(o);

	/* memd itself restarts too: nothing is in process memory. */
	hs_stop(&H);
	hs_restart(&H);
	o = hs_expect(&H, "GET", APP "/lanes?resume_pending=true", NULL, 200);
	lanes = json_object_get(o, "lanes");
	cr_assert_eq(json_array_size(lanes), 1, "%s", json_dumps(o, 0));
	cr_assert_str_eq(str(json_array_get(lanes, 0), "key"), "telegram:dm:42");
	cr_assert_str_eq(str(json_array_get(lanes, 0), "user"), "telegram:42");
	json_decref(o);
	o = hs_expect(&H, "GET", APP "/lanes?resume_pending=false", NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(o, "lanes")), 1);
	cr_assert_str_eq(str(json_array_get(json_object_get(o, "lanes"), 0), "key"), "slack:dm:D1");
	json_decref(o);
	o = hs_expect(&H, "GET", APP "/lanes", NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(o, "lanes")), 2);
	json_decref(o);
	o = hs_expect(&H, "GET", DM_USER "/lanes?limit=1", NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(o, "lanes")), 1);
	json_decref(o);

	/* Continue it: open keeps the session, a turn ends ok and clears it. */
	o = hs_expect(&H, "POST", at(p, DM_LANE, ":open"), NULL, 200);
	cr_assert(json_is_true(json_object_get(o, "resumed")));
	cr_assert_str_eq(str(json_object_get(o, "session"), "id"), sid);
	json_decref(o);
	free(turn);
	turn = begin_turn();
	snprintf(p, sizeof(p), DM_LANE "/turns/%s:heartbeat", turn);
	o = hs_expect(&H, "POST", p, "{\"lease_ms\":300000}", 200);
	cr_assert_str_eq(str(o, "turn_id"), turn);
	json_decref(o);
	snprintf(p, sizeof(p), DM_LANE "/turns/%s:end", turn);
	o = hs_expect(&H, "POST", p, "{\"outcome\":\"ok\"}", 200);
	cr_assert(json_is_false(json_object_get(json_object_get(o, "lane"), "resume_pending")));
	json_decref(o);
	o = hs_expect(&H, "GET", APP "/lanes?resume_pending=true", NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(o, "lanes")), 0);
	json_decref(o);
	free(turn);
	free(sid);
}

/* ---- reset, switch, suspend, delete ---------------------------------------------------- */

Test(lanes, reset_switch_suspend_and_delete)
{
	char p[PATH_MAX_LEN], body[PATH_MAX_LEN];
	json_t *o, *reset;
	char *s1, *s2, *before, *other;

	hs_start(&H, NULL, NO_RESET);
	o = open_dm();
	s1 = strdup(str(json_object_get(o, "session"), "id"));
	json_decref(o);

	/* reset (/new): a new session linked to the old one, which ends. */
	o = hs_expect(&H, "POST", at(p, DM_LANE, ":reset"), NULL, 200);
	reset = json_object_get(o, "reset");
	cr_assert_str_eq(str(reset, "reason"), "explicit");
	cr_assert_str_eq(str(reset, "previous_session"), s1);
	s2 = strdup(str(json_object_get(o, "session"), "id"));
	cr_assert_str_neq(s2, s1);
	cr_assert_str_eq(str(json_object_get(o, "session"), "previous_session"), s1);
	cr_assert(json_is_true(json_object_get(json_object_get(o, "lane"), "fresh_reset")));
	json_decref(o);
	snprintf(p, sizeof(p), DM_USER "/sessions/%s", s1);
	o = hs_expect(&H, "GET", p, NULL, 200);
	cr_assert(json_is_string(json_object_get(o, "ended")), "the old session ended");
	cr_assert(json_is_string(json_object_get(o, "end_reason")));
	json_decref(o);

	/* switch (/resume) back to the first session. */
	snprintf(body, sizeof(body), "{\"session_id\":\"%s\"}", s1);
	o = hs_expect(&H, "POST", at(p, DM_LANE, ":switch"), body, 200);
	cr_assert_str_eq(str(json_object_get(o, "lane"), "session_id"), s1);
	cr_assert_str_eq(str(json_object_get(o, "session"), "id"), s1);
	json_decref(o);

	/* A switch to another user's session, or to none: 404, nothing changed. */
	o = hs_expect(&H, "POST", APP "/users/telegram:7/sessions", "{\"id\":\"theirs\"}", 201);
	json_decref(o);
	before = everything(DM_LANE, "demo", "telegram:42");
	expect_error("POST", at(p, DM_LANE, ":switch"), "{\"session_id\":\"theirs\"}", 404, "not_found");
	ASSERT_UNCHANGED(before, "a switch to another user's session");
	expect_error("POST", at(p, DM_LANE, ":switch"), "{\"session_id\":\"nope\"}", 404, "not_found");
	ASSERT_UNCHANGED(before, "a switch to no session");
	expect_error("POST", at(p, DM_LANE, ":switch"), "{}", 400, "invalid_request");
	ASSERT_UNCHANGED(before, "a switch without session_id");
	other = hs_snapshot(&H, "demo", "telegram:7");
	cr_assert(strstr(other, "theirs"));
	free(other);
	free(before);

	/* A reset during a turn is a 409. */
	{
		char *turn = begin_turn();
		before = everything(DM_LANE, "demo", "telegram:42");
		expect_error("POST", at(p, DM_LANE, ":reset"), NULL, 409, "conflict");
		ASSERT_UNCHANGED(before, "a reset during a turn");
		free(before);
		snprintf(p, sizeof(p), DM_LANE "/turns/%s:end", turn);
		json_decref(hs_expect(&H, "POST", p, "{\"outcome\":\"failed\"}", 200));
		free(turn);
	}

	/* suspend (/stop): the next open starts a new session. */
	o = hs_expect(&H, "POST", at(p, DM_LANE, ":suspend"), NULL, 200);
	cr_assert(json_is_true(json_object_get(o, "suspended")));
	json_decref(o);
	o = hs_expect(&H, "GET", APP "/lanes?suspended=true", NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(o, "lanes")), 1);
	json_decref(o);
	o = hs_expect(&H, "POST", at(p, DM_LANE, ":open"), "{\"source\":" DM_SOURCE "}", 200);
	cr_assert_str_eq(str(json_object_get(o, "reset"), "reason"), "suspended");
	cr_assert_str_neq(str(json_object_get(o, "session"), "id"), s1);
	cr_assert(json_is_false(json_object_get(json_object_get(o, "lane"), "suspended")));
	/* The new session's first context says why it starts afresh, once. */
	snprintf(p, sizeof(p), DM_USER "/sessions/%s/context", str(json_object_get(o, "session"), "id"));
	json_decref(o);
	o = hs_expect(&H, "GET", p, NULL, 200);
	cr_assert_str_eq(str(json_object_get(o, "notice"), "reason"), "suspended");
	cr_assert_gt(strlen(str(json_object_get(o, "notice"), "text")), 0);
	json_decref(o);
	o = hs_expect(&H, "GET", p, NULL, 200);
	cr_assert_null(json_object_get(o, "notice"), "the notice comes once");
	json_decref(o);

	/* delete: the lane goes, its sessions stay. */
	{
		hs_resp r;
		hs_json(&H, "DELETE", DM_LANE_ENC, NULL, &r);
		cr_assert_eq(r.status, 204, "%s", r.body);
		hs_resp_clear(&r);
	}
	expect_error("GET", DM_LANE, NULL, 404, "not_found");
	expect_error("DELETE", DM_LANE, NULL, 404, "not_found");
	snprintf(p, sizeof(p), DM_USER "/sessions/%s", s2);
	json_decref(hs_expect(&H, "GET", p, NULL, 200));
	free(s1);
	free(s2);
}

/* ---- keys and the router's action rule ------------------------------------------------- */

Test(lanes, keys_with_colons_and_actions)
{
	hs_resp r;
	json_t *o;

	hs_start(&H, NULL, NO_RESET);
	/* A key that itself ends in ":open": its ':' sent as %3A. */
	o = hs_expect(&H, "POST", APP "/users/u/lanes/a%3Aopen:open", NULL, 200);
	cr_assert_str_eq(str(json_object_get(o, "lane"), "key"), "a:open");
	json_decref(o);
	o = hs_expect(&H, "GET", APP "/users/u/lanes/a%3Aopen", NULL, 200);
	cr_assert_str_eq(str(o, "key"), "a:open");
	json_decref(o);
	/* Raw, the trailing ":open" is the action, for every method. */
	hs_json(&H, "GET", APP "/users/u/lanes/a:open", NULL, &r);
	cr_assert_eq(r.status, 405, "%s", r.body);
	cr_assert_str_eq(hs_header(&r, "Allow"), "POST");
	hs_resp_clear(&r);
	/* Raw ':' elsewhere in a key are the key's. */
	o = hs_expect(&H, "POST", APP "/users/u/lanes/x:y:z:open", NULL, 200);
	cr_assert_str_eq(str(json_object_get(o, "lane"), "key"), "x:y:z");
	json_decref(o);
	o = hs_expect(&H, "GET", APP "/users/u/lanes/x%3Ay%3Az", NULL, 200);
	cr_assert_str_eq(str(o, "key"), "x:y:z");
	json_decref(o);
	o = hs_expect(&H, "GET", APP "/users/u/lanes", NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(o, "lanes")), 2);
	json_decref(o);
	/* No such action: the path has GET and DELETE, and the message names
	 * the actions POST has there. */
	hs_json(&H, "POST", APP "/users/u/lanes/x:y:z:frobnicate", NULL, &r);
	cr_assert_eq(r.status, 405, "%s", r.body);
	cr_assert_str_eq(hs_header(&r, "Allow"), "GET, DELETE");
	cr_assert(strstr(r.body, "POST takes an action at the end of this path: :open, :reset, "
				 ":switch, :suspend"), "%s", r.body);
	hs_resp_clear(&r);
	hs_json(&H, "POST", APP "/users/u/lanes/x%3Ay%3Az", NULL, &r);
	cr_assert_eq(r.status, 405, "%s", r.body);
	cr_assert(strstr(r.body, ":open"), "a key without its action: %s", r.body);
	hs_resp_clear(&r);
	/* A path without actions says nothing of them. */
	hs_json(&H, "POST", APP "/users/u/sessions/s1/state", NULL, &r);
	cr_assert_eq(r.status, 405, "%s", r.body);
	cr_assert_null(strstr(r.body, "action"), "%s", r.body);
	hs_resp_clear(&r);
	/* '/' is never part of a key, encoded or not. */
	expect_error("POST", APP "/users/u/lanes/a%2Fb:open", NULL, 400, "invalid_request");
	expect_error("GET", APP "/users/u/lanes/a%2Fb", NULL, 400, "invalid_request");
	expect_error("GET", APP "/users/u/lanes/a%01b", NULL, 400, "invalid_request");
	o = hs_expect(&H, "GET", APP "/users/u/lanes", NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(o, "lanes")), 2, "nothing was created");
	json_decref(o);
}

/* ---- bad input: a clear 4xx, nothing changed ---------------------------------------------- */

Test(lanes, bad_input_changes_nothing)
{
	char p[PATH_MAX_LEN], body[PATH_MAX_LEN];
	char *before, *turn;

	hs_start(&H, NULL, NO_RESET);
	/* Unknown lanes. */
	expect_error("GET", APP "/users/u/lanes/nope", NULL, 404, "not_found");
	expect_error("POST", APP "/users/u/lanes/nope/turns", NULL, 404, "not_found");
	expect_error("POST", APP "/users/u/lanes/nope:suspend", NULL, 404, "not_found");
	expect_error("POST", APP "/users/u/lanes/nope/inbox",
		     "{\"mode\":\"queue\",\"event\":{\"role\":\"user\",\"content\":\"x\"}}", 404,
		     "not_found");
	expect_error("GET", APP "/users/u/lanes/nope/inbox", NULL, 404, "not_found");
	/* Bad sources. */
	expect_error("POST", APP "/lanes:resolve", "{\"chat_type\":\"dm\"}", 400, "invalid_request");
	expect_error("POST", APP "/lanes:resolve", "{\"platform\":\"telegram\",\"chat_type\":\"room\"}",
		     400, "invalid_request");
	expect_error("POST", APP "/lanes:open", "{\"platform\":5}", 400, "invalid_request");
	expect_error("POST", APP "/lanes:open", "[1]", 400, "invalid_request");
	expect_error("POST", APP "/users/u/lanes/k:open", "{\"source\":{\"chat_id\":\"1\"}}", 400,
		     "invalid_request");
	{
		json_t *o = hs_expect(&H, "GET", APP "/lanes", NULL, 200);
		cr_assert_eq(json_array_size(json_object_get(o, "lanes")), 0, "nothing was created");
		json_decref(o);
	}
	/* Bad list queries. */
	expect_error("GET", APP "/lanes?in_turn=false", NULL, 400, "invalid_request");
	expect_error("GET", APP "/lanes?suspended=maybe", NULL, 400, "invalid_request");
	expect_error("GET", APP "/lanes?limit=5000", NULL, 400, "invalid_request");
	expect_error("GET", APP "/lanes?active_within=-1", NULL, 400, "invalid_request");
	expect_error("GET", APP "/lanes?colour=red", NULL, 400, "invalid_request");

	json_decref(open_dm());
	turn = begin_turn();
	json_decref(hs_expect(&H, "POST", at(p, DM_LANE, "/inbox"),
			      "{\"mode\":\"interrupt\",\"event\":{\"role\":\"user\",\"content\":\"x\"}}",
			      200));
	before = everything(DM_LANE, "demo", "telegram:42");

	/* A take by a turn that is not the holder. */
	expect_error("POST", at(p, DM_LANE, "/inbox:take"), "{\"turn_id\":\"not-the-holder\"}", 409,
		     "conflict");
	ASSERT_UNCHANGED(before, "a take by a non-holder");
	expect_error("POST", at(p, DM_LANE, "/inbox:take"), "{}", 400, "invalid_request");
	ASSERT_UNCHANGED(before, "a take without turn_id");
	/* Stale or unknown turn ids. */
	expect_error("POST", at(p, DM_LANE, "/turns/stale:end"), "{\"outcome\":\"ok\"}", 409, "conflict");
	ASSERT_UNCHANGED(before, "an end with a stale turn id");
	expect_error("POST", at(p, DM_LANE, "/turns/stale:heartbeat"), NULL, 409, "conflict");
	ASSERT_UNCHANGED(before, "a heartbeat with a stale turn id");
	/* Bad bodies. */
	snprintf(p, sizeof(p), DM_LANE "/turns/%s:end", turn);
	expect_error("POST", p, "{\"outcome\":\"great\"}", 400, "invalid_request");
	expect_error("POST", p, "{\"outcome\":\"ok\",\"usage\":{\"input_tokens\":-1}}", 400,
		     "invalid_request");
	expect_error("POST", p, NULL, 400, "invalid_request");
	ASSERT_UNCHANGED(before, "bad turn ends");
	expect_error("POST", at(p, DM_LANE, "/inbox"), "{\"mode\":\"shout\",\"event\":{\"role\":\"user\","
		     "\"content\":\"x\"}}", 400, "invalid_request");
	expect_error("POST", at(p, DM_LANE, "/inbox"), "{\"mode\":\"queue\"}", 400, "invalid_request");
	ASSERT_UNCHANGED(before, "bad inbox puts");
	expect_error("POST", at(p, DM_LANE, ":suspend"), "{}", 400, "invalid_request");
	ASSERT_UNCHANGED(before, "a suspend with a body");

	/* The turn still works after all that. */
	snprintf(p, sizeof(p), DM_LANE "/turns/%s:end", turn);
	snprintf(body, sizeof(body), "{\"outcome\":\"ok\"}");
	json_decref(hs_expect(&H, "POST", p, body, 200));
	/* Now the old id is stale. */
	expect_error("POST", p, body, 409, "conflict");
	free(before);
	free(turn);
}

/* ---- scopes ------------------------------------------------------------------------------- */

static long with_key(const char *method, const char *path, const char *key, const char *body)
{
	char auth[256];
	const char *hdr[] = { auth, NULL };
	hs_resp r;
	long status;
	if (key)
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s", key);
	hs_req(&H, method, path, key ? hdr : NULL, body, body ? strlen(body) : 0, &r);
	status = r.status;
	hs_resp_clear(&r);
	return status;
}

Test(lanes, reads_need_read_writes_write_and_sweep_admin)
{
	hs_start(&H, "  api_keys:\n    - {key: " KEY_R ", scope: read}\n    - {key: " KEY_W
		     ", scope: write}\n    - {key: " KEY_A ", scope: admin}\n", NO_RESET);
	cr_assert_eq(with_key("POST", APP "/lanes:open", KEY_R, DM_SOURCE), 403);
	cr_assert_eq(with_key("POST", APP "/lanes:open", KEY_W, DM_SOURCE), 200);
	cr_assert_eq(with_key("POST", APP "/lanes:resolve", KEY_R, DM_SOURCE), 200);
	cr_assert_eq(with_key("GET", DM_LANE, KEY_R, NULL), 200);
	cr_assert_eq(with_key("GET", APP "/lanes", KEY_R, NULL), 200);
	cr_assert_eq(with_key("GET", DM_USER "/lanes", KEY_R, NULL), 200);
	cr_assert_eq(with_key("GET", DM_LANE "/inbox", KEY_R, NULL), 200);
	cr_assert_eq(with_key("POST", DM_LANE "/turns", KEY_R, NULL), 403);
	cr_assert_eq(with_key("POST", DM_LANE ":reset", KEY_R, NULL), 403);
	cr_assert_eq(with_key("POST", DM_LANE ":suspend", KEY_R, NULL), 403);
	cr_assert_eq(with_key("DELETE", DM_LANE, KEY_R, NULL), 403);
	cr_assert_eq(with_key("POST", DM_LANE "/inbox", KEY_R,
			      "{\"mode\":\"queue\",\"event\":{\"role\":\"user\",\"content\":\"x\"}}"), 403);
	cr_assert_eq(with_key("POST", "/v1/lanes:sweep", KEY_W, NULL), 403);
	cr_assert_eq(with_key("POST", "/v1/lanes:sweep", NULL, NULL), 401);
	cr_assert_eq(with_key("POST", "/v1/lanes:sweep", KEY_A, NULL), 200);
	cr_assert_eq(with_key("POST", DM_LANE "/turns", KEY_W, NULL), 200);
}

Test(lanes, sweep_counts_what_it_did)
{
	json_t *o;

	hs_start(&H, NULL, NO_RESET);
	json_decref(open_dm());
	o = hs_expect(&H, "POST", "/v1/lanes:sweep", NULL, 200);
	cr_assert_eq(json_integer_value(json_object_get(o, "leases_expired")), 0);
	cr_assert_eq(json_integer_value(json_object_get(o, "finalized")), 0,
		     "a lane whose policy never expires is not finalized");
	json_decref(o);
}
