/* SPDX-License-Identifier: MIT */
/*
 * Transcripts over real HTTP: what a chat UI does with a `memd serve` on
 * SQLite (undo a turn with a rewind, retry, replace the transcript, clear,
 * undo an operation, read the state history, read and write OpenAI chat
 * messages, list sessions by activity), the role filters and the audit
 * trail (include_hidden, which needs a write key), and bad input: each
 * refused with a clear 400, 404 or 409 and nothing changed. Every
 * response is checked against api/openapi.yaml by the harness.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define USER "/v1/apps/demo/users/ann"
#define SESS USER "/sessions/chat"
#define PATH_MAX_LEN 512

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

TestSuite(transcripts, .init = setup, .fini = teardown, .timeout = 60);

static void expect_error(const char *method, const char *path, const char *body, long status,
			 const char *code)
{
	hs_expect_error(&H, method, path, body, status, code, NULL);
}

static const char *str(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

static json_int_t num(json_t *o, const char *key)
{
	return json_integer_value(json_object_get(o, key));
}

/* Everything of the session, hidden events and operations included, as
 * canonical JSON text: for "nothing changed" checks. */
static char *everything(const char *sess)
{
	char p[PATH_MAX_LEN], *text;
	json_t *all = json_object();

	json_object_set_new(all, "session", hs_expect(&H, "GET", sess, NULL, 200));
	snprintf(p, sizeof(p), "%s/events?include_hidden=true&limit=1000", sess);
	json_object_set_new(all, "events", hs_expect(&H, "GET", p, NULL, 200));
	snprintf(p, sizeof(p), "%s/operations", sess);
	json_object_set_new(all, "operations", hs_expect(&H, "GET", p, NULL, 200));
	snprintf(p, sizeof(p), "%s/state", sess);
	json_object_set_new(all, "state", hs_expect(&H, "GET", p, NULL, 200));
	snprintf(p, sizeof(p), "%s/state/history?limit=1000", sess);
	json_object_set_new(all, "history", hs_expect(&H, "GET", p, NULL, 200));
	text = json_dumps(all, JSON_SORT_KEYS | JSON_COMPACT);
	json_decref(all);
	return text;
}

#define ASSERT_UNCHANGED(before, what)                                                        \
	do {                                                                                 \
		char *after_ = everything(SESS);                                             \
		cr_assert_str_eq(after_, before, "%s changed something", what);              \
		free(after_);                                                                \
	} while (0)

/* Three turns of a chat as OpenAI messages, the assistant's second with
 * a tool call and its result. */
#define THREE_TURNS                                                                           \
	"{\"messages\":["                                                                    \
	"{\"role\":\"user\",\"content\":\"hello\"},"                                          \
	"{\"role\":\"assistant\",\"content\":\"hi, how can I help?\"},"                       \
	"{\"role\":\"user\",\"content\":\"weather in Paris?\"},"                              \
	"{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_1\","         \
	"\"type\":\"function\",\"function\":{\"name\":\"weather\",\"arguments\":"              \
	"\"{\\\"city\\\":\\\"Paris\\\"}\"}}]},"                                               \
	"{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"18C, sunny\"},"          \
	"{\"role\":\"assistant\",\"content\":\"18C and sunny.\"},"                             \
	"{\"role\":\"user\",\"content\":\"and tomorrow?\"},"                                  \
	"{\"role\":\"assistant\",\"content\":\"rain\"}]}"

/* The session "chat" with the three turns; returns its version. */
static json_int_t three_turns(void)
{
	json_t *o;
	json_int_t v;

	json_decref(hs_expect(&H, "POST", USER "/sessions", "{\"id\":\"chat\"}", 201));
	o = hs_expect(&H, "POST", SESS "/messages", THREE_TURNS, 200);
	cr_assert_eq(json_array_size(json_object_get(o, "seqs")), 8);
	v = num(o, "version");
	json_decref(o);
	return v;
}

static size_t n_messages(const char *query)
{
	char p[PATH_MAX_LEN];
	json_t *o;
	size_t n;

	snprintf(p, sizeof(p), SESS "/messages%s", query);
	o = hs_expect(&H, "GET", p, NULL, 200);
	cr_assert_str_eq(str(o, "format"), "openai");
	n = json_array_size(json_object_get(o, "messages"));
	json_decref(o);
	return n;
}

/* ---- a chat UI's undo, retry and clear ---------------------------------------------------- */

Test(transcripts, messages_round_trip_in_openai_format)
{
	json_t *in, *o;

	hs_start(&H, NULL, NULL);

	three_turns();
	in = json_loads(THREE_TURNS, 0, NULL);
	o = hs_expect(&H, "GET", SESS "/messages?format=openai", NULL, 200);
	cr_assert(json_equal(json_object_get(o, "messages"), json_object_get(in, "messages")),
		  "messages out differ from messages in: %s", json_dumps(o, JSON_COMPACT));
	json_decref(o);
	/* The default format is the same. */
	o = hs_expect(&H, "GET", SESS "/messages", NULL, 200);
	cr_assert(json_equal(json_object_get(o, "messages"), json_object_get(in, "messages")));
	json_decref(o);
	json_decref(in);
	/* The role filter. */
	cr_assert_eq(n_messages("?roles=user"), 3);
	cr_assert_eq(n_messages("?roles=user,tool"), 4);
	/* Event pages take the filter too. */
	o = hs_expect(&H, "GET", SESS "/events?roles=assistant", NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(o, "events")), 4);
	json_decref(o);
	/* The context in OpenAI format keeps the tool call with its result. */
	o = hs_expect(&H, "GET", SESS "/context?format=openai", NULL, 200);
	cr_assert_str_eq(str(o, "format"), "openai");
	cr_assert_eq(json_array_size(json_object_get(o, "messages")), 8);
	cr_assert(json_is_string(json_object_get(o, "strategy")));
	json_decref(o);
	o = hs_expect(&H, "GET", SESS "/context", NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(o, "events")), 8, "memd's own shape stays");
	json_decref(o);
}

Test(transcripts, rewind_hides_the_last_turn_and_undo_brings_it_back)
{
	char p[PATH_MAX_LEN];
	json_t *o, *op, *events, *e;
	json_int_t v;
	size_t i, hidden = 0;
	char *op_id;

	hs_start(&H, NULL, NULL);
	v = three_turns();

	o = hs_expect(&H, "POST", SESS ":rewind", "{\"turns\":1}", 200);
	cr_assert_eq(num(o, "rewound_count"), 2);
	cr_assert_eq(num(o, "turns_undone"), 1);
	cr_assert_str_eq(str(o, "target_text"), "and tomorrow?");
	cr_assert_gt(num(o, "version"), v);
	op = json_object_get(o, "operation");
	cr_assert_str_eq(str(op, "kind"), "rewind");
	cr_assert_eq(num(op, "hidden_count"), 2);
	op_id = strdup(str(op, "id"));
	json_decref(o);
	cr_assert_eq(n_messages(""), 6);

	/* The audit trail: hidden events come back with include_hidden. */
	o = hs_expect(&H, "GET", SESS "/events?include_hidden=true", NULL, 200);
	events = json_object_get(o, "events");
	cr_assert_eq(json_array_size(events), 8);
	json_array_foreach(events, i, e) {
		json_t *h = json_object_get(e, "hidden");
		if (!h)
			continue;
		hidden++;
		cr_assert_str_eq(str(h, "by"), op_id);
		cr_assert_str_eq(str(h, "kind"), "rewind");
		cr_assert_geq(num(e, "seq"), 7);
	}
	cr_assert_eq(hidden, 2);
	json_decref(o);
	o = hs_expect(&H, "GET", SESS "/events", NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(o, "events")), 6);
	json_decref(o);

	/* Operations, newest first. */
	o = hs_expect(&H, "GET", SESS "/operations", NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(o, "operations")), 1);
	cr_assert_str_eq(str(json_array_get(json_object_get(o, "operations"), 0), "id"), op_id);
	json_decref(o);

	/* Undo: the turn is back, and the rewind says who undid it. */
	snprintf(p, sizeof(p), SESS "/operations/%s:undo", op_id);
	o = hs_expect(&H, "POST", p, NULL, 200);
	cr_assert_eq(num(o, "unhidden_count"), 2);
	cr_assert_str_eq(str(json_object_get(o, "undone"), "id"), op_id);
	cr_assert_str_eq(str(json_object_get(o, "operation"), "kind"), "undo");
	json_decref(o);
	cr_assert_eq(n_messages(""), 8);
	o = hs_expect(&H, "GET", SESS "/operations", NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(o, "operations")), 2);
	op = json_array_get(json_object_get(o, "operations"), 1);
	cr_assert_str_eq(str(op, "id"), op_id);
	cr_assert(json_is_string(json_object_get(op, "undone_by")));
	json_decref(o);
	/* Undone already: 409. */
	expect_error("POST", p, NULL, 409, "conflict");
	free(op_id);
}

Test(transcripts, retry_after_a_rewind_gets_new_seqs_and_blocks_the_undo)
{
	char p[PATH_MAX_LEN], *before;
	json_t *o;
	char *op_id;

	hs_start(&H, NULL, NULL);

	three_turns();
	o = hs_expect(&H, "POST", SESS ":rewind", "{\"to_seq\":7}", 200);
	cr_assert_eq(num(o, "rewound_count"), 2);
	op_id = strdup(str(json_object_get(o, "operation"), "id"));
	json_decref(o);
	/* The retry: seqs are never reused. */
	o = hs_expect(&H, "POST", SESS "/messages",
		      "{\"messages\":[{\"role\":\"user\",\"content\":\"and the day after?\"}]}", 200);
	cr_assert_eq(json_integer_value(json_array_get(json_object_get(o, "seqs"), 0)), 9);
	json_decref(o);
	/* Something was written after the rewind: its undo is a 409. */
	before = everything(SESS);
	snprintf(p, sizeof(p), SESS "/operations/%s:undo", op_id);
	expect_error("POST", p, NULL, 409, "conflict");
	ASSERT_UNCHANGED(before, "a refused undo");
	free(before);
	free(op_id);
}

Test(transcripts, put_replaces_and_creates_clear_hides_all)
{
	char p[PATH_MAX_LEN];
	json_t *o;
	char *op_id;

	hs_start(&H, NULL, NULL);

	/* PUT takes events too (format events). */
	o = hs_expect(&H, "PUT", USER "/sessions/evs/messages",
		      "{\"format\":\"events\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
		      201);
	cr_assert_eq(json_array_size(json_object_get(o, "seqs")), 1);
	json_decref(o);
	/* PUT on a session that does not exist creates it: 201. */
	o = hs_expect(&H, "PUT", USER "/sessions/fresh/messages",
		      "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", 201);
	cr_assert(json_is_true(json_object_get(o, "created")));
	json_decref(o);

	three_turns();
	json_decref(hs_expect(&H, "PATCH", SESS "/state", "{\"mood\":\"good\"}", 200));
	/* Compress: the transcript replaced by a summary and the last turn. */
	o = hs_expect(&H, "PUT", SESS "/messages",
		      "{\"messages\":[{\"role\":\"system\",\"content\":\"Ann asked about the weather.\"},"
		      "{\"role\":\"user\",\"content\":\"and tomorrow?\"},"
		      "{\"role\":\"assistant\",\"content\":\"rain\"}]}", 200);
	cr_assert(json_is_false(json_object_get(o, "created")));
	cr_assert_eq(num(o, "hidden_count"), 8);
	cr_assert_str_eq(str(json_object_get(o, "operation"), "kind"), "rewrite");
	json_decref(o);
	cr_assert_eq(n_messages(""), 3);

	/* Clear: nothing visible, the session and its state stay. */
	o = hs_expect(&H, "DELETE", SESS "/events", NULL, 200);
	cr_assert_eq(num(o, "hidden_count"), 3);
	cr_assert_str_eq(str(json_object_get(o, "operation"), "kind"), "clear");
	op_id = strdup(str(json_object_get(o, "operation"), "id"));
	json_decref(o);
	cr_assert_eq(n_messages(""), 0);
	o = hs_expect(&H, "GET", SESS "/state", NULL, 200);
	cr_assert_str_eq(str(o, "mood"), "good");
	json_decref(o);
	o = hs_expect(&H, "GET", SESS, NULL, 200);
	cr_assert_eq(num(o, "message_count"), 0);
	json_decref(o);

	/* Undo the clear. */
	snprintf(p, sizeof(p), SESS "/operations/%s:undo", op_id);
	json_decref(hs_expect(&H, "POST", p, "{}", 200));
	cr_assert_eq(n_messages(""), 3);
	o = hs_expect(&H, "GET", SESS, NULL, 200);
	cr_assert_eq(num(o, "message_count"), 3);
	json_decref(o);
	free(op_id);
}

Test(transcripts, state_history_pages_and_a_rewind_restores_state)
{
	json_t *o, *changes;
	char p[PATH_MAX_LEN];
	size_t total = 0;

	hs_start(&H, NULL, NULL);

	json_decref(hs_expect(&H, "POST", USER "/sessions", "{\"id\":\"chat\"}", 201));
	json_decref(hs_expect(&H, "POST", SESS "/events",
			      "{\"events\":[{\"role\":\"user\",\"content\":\"one\"}],"
			      "\"state_delta\":{\"step\":1}}", 200));
	json_decref(hs_expect(&H, "POST", SESS "/events",
			      "{\"events\":[{\"role\":\"user\",\"content\":\"two\"}],"
			      "\"state_delta\":{\"step\":2,\"topic\":\"x\"}}", 200));
	/* Page by one. */
	snprintf(p, sizeof(p), SESS "/state/history?limit=1");
	for (;;) {
		o = hs_expect(&H, "GET", p, NULL, 200);
		changes = json_object_get(o, "changes");
		cr_assert_leq(json_array_size(changes), 1);
		total += json_array_size(changes);
		if (total == 1) {
			json_t *c = json_array_get(changes, 0);
			cr_assert_str_eq(str(c, "key"), "step");
			cr_assert(json_is_null(json_object_get(c, "old")));
			cr_assert_eq(json_integer_value(json_object_get(c, "new")), 1);
		}
		if (json_is_null(json_object_get(o, "next_cursor"))) {
			json_decref(o);
			break;
		}
		snprintf(p, sizeof(p), SESS "/state/history?limit=1&cursor=%s",
			 str(o, "next_cursor"));
		json_decref(o);
		cr_assert_leq(total, 3, "the pages never end");
	}
	cr_assert_eq(total, 3);

	/* Rewinding the second turn puts step back to 1 and topic away. */
	o = hs_expect(&H, "POST", SESS ":rewind", "{\"turns\":1}", 200);
	cr_assert_eq(json_array_size(json_object_get(json_object_get(o, "state"), "restored")), 2);
	json_decref(o);
	o = hs_expect(&H, "GET", SESS "/state", NULL, 200);
	cr_assert_eq(num(o, "step"), 1);
	cr_assert_null(json_object_get(o, "topic"));
	json_decref(o);
}

Test(transcripts, sessions_list_by_activity_with_counts)
{
	json_t *o, *list;

	hs_start(&H, NULL, NULL);

	json_decref(hs_expect(&H, "POST", USER "/sessions", "{\"id\":\"old\"}", 201));
	json_decref(hs_expect(&H, "POST", USER "/sessions", "{\"id\":\"new\"}", 201));
	json_decref(hs_expect(&H, "POST", USER "/sessions/old/messages",
			      "{\"messages\":[{\"role\":\"user\",\"content\":\"back again\"}]}", 200));

	o = hs_expect(&H, "GET", USER "/sessions?order=activity", NULL, 200);
	list = json_object_get(o, "sessions");
	cr_assert_eq(json_array_size(list), 2);
	cr_assert_str_eq(str(json_array_get(list, 0), "id"), "old", "the active one first");
	cr_assert_eq(num(json_array_get(list, 0), "message_count"), 1);
	cr_assert_eq(num(json_array_get(list, 1), "message_count"), 0);
	cr_assert(json_is_string(json_object_get(json_array_get(list, 0), "last_activity")));
	cr_assert_str_eq(str(json_array_get(list, 0), "title"), "back again");
	json_decref(o);
	o = hs_expect(&H, "GET", USER "/sessions?order=created", NULL, 200);
	cr_assert_str_eq(str(json_array_get(json_object_get(o, "sessions"), 0), "id"), "new");
	json_decref(o);
	o = hs_expect(&H, "GET", USER "/sessions?order=activity&active_within=3600&limit=1", NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(o, "sessions")), 1);
	cr_assert(json_is_string(json_object_get(o, "next_cursor")));
	json_decref(o);
}

/* ---- bad input: a clear 4xx, nothing changed ---------------------------------------------- */

Test(transcripts, bad_input_changes_nothing)
{
	char *before;
	json_int_t v;
	char p[PATH_MAX_LEN];

	hs_start(&H, NULL, NULL);
	/* Unknown sessions. */
	expect_error("POST", USER "/sessions/nope:rewind", "{\"turns\":1}", 404, "not_found");
	expect_error("GET", USER "/sessions/nope/messages", NULL, 404, "not_found");
	expect_error("POST", USER "/sessions/nope/messages",
		     "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", 404, "not_found");
	expect_error("DELETE", USER "/sessions/nope/events", NULL, 404, "not_found");
	expect_error("GET", USER "/sessions/nope/operations", NULL, 404, "not_found");
	expect_error("GET", USER "/sessions/nope/state/history", NULL, 404, "not_found");
	/* A PUT of bad messages creates no session. */
	expect_error("PUT", USER "/sessions/nope/messages",
		     "{\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}", 400, "invalid_request");
	expect_error("GET", USER "/sessions/nope", NULL, 404, "not_found");

	v = three_turns();
	before = everything(SESS);
	/* Rewinds that cannot be. */
	expect_error("POST", SESS ":rewind", "{\"turns\":4}", 400, "invalid_request");
	expect_error("POST", SESS ":rewind", "{\"turns\":0}", 400, "invalid_request");
	expect_error("POST", SESS ":rewind", "{\"turns\":\"one\"}", 400, "invalid_request");
	expect_error("POST", SESS ":rewind", "{}", 400, "invalid_request");
	expect_error("POST", SESS ":rewind", NULL, 400, "invalid_request");
	expect_error("POST", SESS ":rewind", "[1]", 400, "invalid_request");
	snprintf(p, sizeof(p), "{\"turns\":1,\"expected_version\":%lld}", (long long)v - 1);
	expect_error("POST", SESS ":rewind", p, 409, "conflict");
	ASSERT_UNCHANGED(before, "refused rewinds");
	/* Bad messages. */
	expect_error("POST", SESS "/messages", "{\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}",
		     400, "invalid_request");
	expect_error("POST", SESS "/messages", "{\"messages\":{}}", 400, "invalid_request");
	expect_error("PUT", SESS "/messages", "{\"messages\":[{\"content\":\"x\"}]}", 400,
		     "invalid_request");
	snprintf(p, sizeof(p), "{\"messages\":[],\"expected_version\":%lld}", (long long)v + 5);
	expect_error("PUT", SESS "/messages", p, 409, "conflict");
	ASSERT_UNCHANGED(before, "refused message writes");
	/* Clear and undo. */
	snprintf(p, sizeof(p), SESS "/events?expected_version=%lld", (long long)v - 1);
	expect_error("DELETE", p, NULL, 409, "conflict");
	expect_error("DELETE", SESS "/events?expected_version=soon", NULL, 400, "invalid_request");
	expect_error("POST", SESS "/operations/nope:undo", NULL, 404, "not_found");
	expect_error("POST", SESS "/operations/nope:redo", NULL, 404, "no_route");
	ASSERT_UNCHANGED(before, "refused clears and undos");
	/* Bad queries. */
	expect_error("GET", SESS "/messages?format=xml", NULL, 400, "invalid_request");
	expect_error("GET", SESS "/messages?roles=", NULL, 400, "invalid_request");
	expect_error("GET", SESS "/messages?roles=user,wizard", NULL, 400, "invalid_request");
	expect_error("GET", SESS "/events?roles=wizard", NULL, 400, "invalid_request");
	expect_error("GET", SESS "/events?include_hidden=maybe", NULL, 400, "invalid_request");
	expect_error("GET", SESS "/context?format=anthropic", NULL, 400, "invalid_request");
	expect_error("GET", SESS "/state/history?limit=5000", NULL, 400, "invalid_request");
	expect_error("GET", SESS "/state/history?cursor=garbage", NULL, 400, "invalid_request");
	expect_error("GET", USER "/sessions?order=alphabetical", NULL, 400, "invalid_request");
	expect_error("GET", USER "/sessions?active_within=-1", NULL, 400, "invalid_request");
	ASSERT_UNCHANGED(before, "bad queries");
	free(before);
}

/* ---- scopes ------------------------------------------------------------------------------- */

static long with_key(const char *method, const char *path, const char *key, const char *body)
{
	char auth[256];
	const char *hdr[] = { auth, "Content-Type: application/json", NULL };
	hs_resp r;
	long status;

	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", key);
	hs_req(&H, method, path, hdr, body, body ? strlen(body) : 0, &r);
	status = r.status;
	hs_resp_clear(&r);
	return status;
}

Test(transcripts, reads_need_read_writes_and_the_audit_trail_write)
{
	const char *msg = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}";
	hs_resp r;
	const char *hdr[] = { "Authorization: Bearer " KEY_A, "Content-Type: application/json",
			      NULL };

	hs_start(&H, "  api_keys:\n    - {key: " KEY_R ", scope: read}\n    - {key: " KEY_W
		     ", scope: write}\n    - {key: " KEY_A ", scope: admin}\n", NULL);
	hs_req(&H, "PUT", SESS "/messages", hdr, msg, strlen(msg), &r);
	cr_assert_eq(r.status, 201, "%s", r.body);
	hs_resp_clear(&r);

	cr_assert_eq(with_key("GET", SESS "/messages", KEY_R, NULL), 200);
	cr_assert_eq(with_key("GET", SESS "/context?format=openai", KEY_R, NULL), 200);
	cr_assert_eq(with_key("GET", SESS "/events?roles=user", KEY_R, NULL), 200);
	cr_assert_eq(with_key("GET", SESS "/operations", KEY_R, NULL), 200);
	cr_assert_eq(with_key("GET", SESS "/state/history", KEY_R, NULL), 200);
	cr_assert_eq(with_key("GET", USER "/sessions?order=activity", KEY_R, NULL), 200);
	/* The audit trail needs write or admin. */
	cr_assert_eq(with_key("GET", SESS "/events?include_hidden=true", KEY_R, NULL), 403);
	cr_assert_eq(with_key("GET", SESS "/events?include_hidden=false", KEY_R, NULL), 200);
	cr_assert_eq(with_key("GET", SESS "/events?include_hidden=true", KEY_W, NULL), 200);
	cr_assert_eq(with_key("GET", SESS "/events?include_hidden=true", KEY_A, NULL), 200);
	/* Writes need write. */
	cr_assert_eq(with_key("POST", SESS "/messages", KEY_R, msg), 403);
	cr_assert_eq(with_key("PUT", SESS "/messages", KEY_R, msg), 403);
	cr_assert_eq(with_key("POST", SESS ":rewind", KEY_R, "{\"turns\":1}"), 403);
	cr_assert_eq(with_key("DELETE", SESS "/events", KEY_R, NULL), 403);
	cr_assert_eq(with_key("POST", SESS "/operations/x:undo", KEY_R, NULL), 403);
	cr_assert_eq(with_key("POST", SESS "/messages", KEY_W, msg), 200);
	cr_assert_eq(with_key("POST", SESS ":rewind", KEY_W, "{\"turns\":1}"), 200);
	cr_assert_eq(with_key("DELETE", SESS "/events", KEY_W, NULL), 200);
}
