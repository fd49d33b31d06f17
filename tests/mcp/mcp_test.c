/* SPDX-License-Identifier: MIT */
/*
 * The MCP dispatcher (host/mcp/) over a real memd on sqlite: every
 * method, JSON-RPC's error paths, revision negotiation and batches, every
 * tool with its argument checks and memd's errors as tool errors, the
 * binding rules (bound, unbound, limited to apps, read-only), and the
 * HTTP transport's session table on a clock the test drives.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memd/memd.h>

#include "mcp/mcp.h"
#include "mcp/mcp_int.h"
#include "mcp/mcp_sessions.h"
#include "test_util.h"

static tu_dir dir;
static memd *m;

static void setup(void)
{
	char yaml[TU_PATH_MAX + 256];

	tu_dir_make(&dir);
	snprintf(yaml, sizeof(yaml),
		 "stores:\n  main: {plugin: sqlite, path: %s/memd.db}\n"
		 "apps:\n  '*': {working_memory: {strategy: all}}\n"
		 "  rec: {working_memory: {strategy: all, recall: {k: 5, sources: [memories]}}}\n",
		 dir.path);
	m = tu_open(&dir, yaml);
}

static void teardown(void)
{
	memd_close(m);
	tu_dir_remove(&dir);
}

TestSuite(mcp, .init = setup, .fini = teardown);

/* A conn with binding b. */
static mcp_conn *conn(const char *app, const char *user, const char *const *apps, int32_t scope)
{
	mcp_binding b = { .app = app, .user = user, .apps = apps, .scope = scope };
	memd_error err = { 0 };
	mcp_conn *c = NULL;

	cr_assert_eq(mcp_conn_new(m, &b, &c, &err), 0, "%s", err.msg);
	return c;
}

/* Send text; the answer parsed (NULL when none), *ret_kind its kind. */
static json_t *send_kind(mcp_conn *c, const char *text, int *ret_kind)
{
	memd_error err = { 0 };
	char *out = NULL;
	int kind = -1;
	json_t *v;

	cr_assert_eq(mcp_handle(c, text, strlen(text), &out, &kind, &err), 0, "%s", err.msg);
	if (ret_kind)
		*ret_kind = kind;
	if (!out) {
		cr_assert_eq(kind, MCP_OUT_NONE);
		return NULL;
	}
	cr_assert_null(strchr(out, '\n'), "an answer holds a newline: %s", out);
	v = json_loads(out, 0, NULL);
	cr_assert_not_null(v, "not JSON: %s", out);
	free(out);
	return v;
}

static json_t *send(mcp_conn *c, const char *text)
{
	return send_kind(c, text, NULL);
}

/* Initialize c at revision version and send notifications/initialized. */
static void init_at(mcp_conn *c, const char *version)
{
	char text[256];
	json_t *r;

	snprintf(text, sizeof(text),
		 "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
		 "\"%s\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}",
		 version);
	r = send(c, text);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(r, "result"),
							   "protocolVersion")),
			 version);
	json_decref(r);
	cr_assert_null(send(c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"));
}

static mcp_conn *ready(const char *app, const char *user, int32_t scope)
{
	mcp_conn *c = conn(app, user, NULL, scope);
	init_at(c, MCP_LATEST_VERSION);
	return c;
}

static int error_code(json_t *r)
{
	json_t *e = json_object_get(r, "error");
	cr_assert(json_is_object(e), "not an error: %s", json_dumps(r, 0));
	return (int)json_integer_value(json_object_get(e, "code"));
}

/* tools/call of name with arguments (JSON text); the result object
 * (asserted a result, not a JSON-RPC error), a new reference. */
static json_t *call(mcp_conn *c, const char *name, const char *args)
{
	char *text = NULL;
	json_t *r, *res;

	cr_assert_gt(asprintf(&text,
			      "{\"jsonrpc\":\"2.0\",\"id\":\"c1\",\"method\":\"tools/call\",\"params\":"
			      "{\"name\":\"%s\",\"arguments\":%s}}",
			      name, args),
		     0);
	r = send(c, text);
	free(text);
	res = json_object_get(r, "result");
	cr_assert(json_is_object(res), "not a result: %s", json_dumps(r, 0));
	cr_assert_str_eq(json_string_value(json_object_get(r, "id")), "c1");
	json_incref(res);
	json_decref(r);
	return res;
}

static int is_error(json_t *res)
{
	return json_is_true(json_object_get(res, "isError"));
}

static const char *content_text(json_t *res)
{
	json_t *c0 = json_array_get(json_object_get(res, "content"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(c0, "type")), "text");
	return json_string_value(json_object_get(c0, "text"));
}

/* Assert res is a tool error whose text contains needle. */
static void assert_tool_error(json_t *res, const char *needle)
{
	cr_assert(is_error(res), "not a tool error: %s", json_dumps(res, 0));
	cr_assert_not_null(strstr(content_text(res), needle), "'%s' not in: %s", needle,
			   content_text(res));
	json_decref(res);
}

/* The tool names tools/list shows, comma-separated, into buf. */
static void tool_names(mcp_conn *c, char *buf, size_t cap)
{
	json_t *r = send(c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}");
	json_t *tools = json_object_get(json_object_get(r, "result"), "tools");
	size_t i;
	json_t *t;

	buf[0] = '\0';
	json_array_foreach (tools, i, t)
		snprintf(buf + strlen(buf), cap - strlen(buf), "%s%s", i ? "," : "",
			 json_string_value(json_object_get(t, "name")));
	json_decref(r);
}

static json_t *tool_of(json_t *list, const char *name)
{
	size_t i;
	json_t *t;
	json_array_foreach (json_object_get(json_object_get(list, "result"), "tools"), i, t)
		if (strcmp(json_string_value(json_object_get(t, "name")), name) == 0)
			return t;
	cr_assert_fail("no tool %s", name);
	return NULL;
}

/* Append a user message to (app, user, sid), creating the session when
 * it does not exist yet. */
static void append(const char *app, const char *user, const char *sid, const char *text)
{
	memd_error err = { 0 };
	char *out = NULL, body[512];

	snprintf(body, sizeof(body), "{\"id\":\"%s\"}", sid);
	if (memd_session_create(m, app, user, body, &out, &err) == 0)
		memd_free(out);
	else
		cr_assert_eq(err.code, MEMD_ECONFLICT, "%s", err.msg);
	out = NULL;
	snprintf(body, sizeof(body), "{\"events\":[{\"role\":\"user\",\"content\":\"%s\"}]}", text);
	tu_ok(memd_events_append(m, app, user, sid, body, &out, &err), &err, &out);
}

/* ---- lifecycle and JSON-RPC ------------------------------------------------ */

Test(mcp, initialize_negotiates_the_revision)
{
	static const char *const asked[] = { "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05" };
	json_t *r, *res;

	for (size_t i = 0; i < sizeof(asked) / sizeof(asked[0]); i++) {
		mcp_conn *c = conn(NULL, NULL, NULL, MCP_SCOPE_WRITE);
		init_at(c, asked[i]);
		cr_assert_str_eq(mcp_conn_version(c), asked[i]);
		cr_assert(atomic_load(&c->initialized));
		mcp_conn_free(c);
	}
	/* A revision memd does not know: memd's newest. */
	mcp_conn *c = conn(NULL, NULL, NULL, MCP_SCOPE_WRITE);
	r = send(c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
		    "\"1999-01-01\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}");
	res = json_object_get(r, "result");
	cr_assert_str_eq(json_string_value(json_object_get(res, "protocolVersion")), MCP_LATEST_VERSION);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(res, "serverInfo"), "name")),
			 "memd");
	cr_assert(json_is_object(json_object_get(json_object_get(res, "capabilities"), "tools")));
	cr_assert(json_is_string(json_object_get(res, "instructions")));
	cr_assert_eq(json_integer_value(json_object_get(r, "id")), 1);
	json_decref(r);
	/* Once only. */
	r = send(c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
		    "\"2025-06-18\"}}");
	cr_assert_eq(error_code(r), MCP_INVALID_REQUEST);
	cr_assert_str_eq(mcp_conn_version(c), MCP_LATEST_VERSION);
	json_decref(r);
	mcp_conn_free(c);
	/* Without a revision. */
	c = conn(NULL, NULL, NULL, MCP_SCOPE_WRITE);
	r = send(c, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"initialize\",\"params\":{}}");
	cr_assert_eq(error_code(r), MCP_INVALID_PARAMS);
	cr_assert_str_eq(mcp_conn_version(c), "");
	json_decref(r);
	mcp_conn_free(c);
}

Test(mcp, ping_and_order_of_the_lifecycle)
{
	mcp_conn *c = conn(NULL, NULL, NULL, MCP_SCOPE_WRITE);
	json_t *r;

	/* ping works at any time; nothing else before initialize. */
	r = send(c, "{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":\"ping\"}");
	cr_assert(json_is_object(json_object_get(r, "result")));
	cr_assert_eq(json_object_size(json_object_get(r, "result")), 0);
	cr_assert_str_eq(json_string_value(json_object_get(r, "id")), "p");
	json_decref(r);
	r = send(c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
	cr_assert_eq(error_code(r), MCP_INVALID_REQUEST);
	json_decref(r);
	/* notifications/initialized before initialize changes nothing. */
	cr_assert_null(send(c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"));
	cr_assert_eq(atomic_load(&c->initialized), 0);
	init_at(c, MCP_LATEST_VERSION);
	r = send(c, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\",\"params\":{}}");
	cr_assert(json_is_object(json_object_get(r, "result")));
	json_decref(r);
	mcp_conn_free(c);
}

Test(mcp, jsonrpc_errors)
{
	mcp_conn *c = ready(NULL, NULL, MCP_SCOPE_WRITE);
	int kind;
	json_t *r;

	r = send_kind(c, "{\"jsonrpc\":\"2.0\",\"id\":1,", &kind);
	cr_assert_eq(error_code(r), MCP_PARSE_ERROR);
	cr_assert(json_is_null(json_object_get(r, "id")));
	cr_assert_eq(kind, MCP_OUT_INVALID);
	json_decref(r);
	r = send_kind(c, "42", &kind);
	cr_assert_eq(error_code(r), MCP_INVALID_REQUEST);
	cr_assert_eq(kind, MCP_OUT_INVALID);
	json_decref(r);
	r = send_kind(c, "{\"jsonrpc\":\"1.0\",\"id\":7,\"method\":\"ping\"}", &kind);
	cr_assert_eq(error_code(r), MCP_INVALID_REQUEST);
	cr_assert_eq(json_integer_value(json_object_get(r, "id")), 7);
	json_decref(r);
	r = send_kind(c, "{\"jsonrpc\":\"2.0\",\"id\":true,\"method\":\"ping\"}", &kind);
	cr_assert_eq(error_code(r), MCP_INVALID_REQUEST);
	cr_assert(json_is_null(json_object_get(r, "id")));
	json_decref(r);
	r = send_kind(c, "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":3}", &kind);
	cr_assert_eq(error_code(r), MCP_INVALID_REQUEST);
	json_decref(r);
	r = send_kind(c, "{\"jsonrpc\":\"2.0\",\"id\":9}", &kind);
	cr_assert_eq(error_code(r), MCP_INVALID_REQUEST);
	json_decref(r);
	r = send_kind(c, "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"resources/list\"}", &kind);
	cr_assert_eq(error_code(r), MCP_METHOD_NOT_FOUND);
	cr_assert_eq(json_integer_value(json_object_get(r, "id")), 10);
	cr_assert_eq(kind, MCP_OUT_RESPONSE);
	json_decref(r);
	r = send(c, "{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"tools/list\",\"params\":[1]}");
	cr_assert_eq(error_code(r), MCP_INVALID_PARAMS);
	json_decref(r);
	r = send(c, "{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"tools/list\",\"params\":{\"cursor\":\"x\"}}");
	cr_assert_eq(error_code(r), MCP_INVALID_PARAMS);
	json_decref(r);
	r = send(c, "{\"jsonrpc\":\"2.0\",\"id\":13,\"method\":\"tools/call\",\"params\":{\"name\":1}}");
	cr_assert_eq(error_code(r), MCP_INVALID_PARAMS);
	json_decref(r);
	r = send(c, "{\"jsonrpc\":\"2.0\",\"id\":14,\"method\":\"tools/call\",\"params\":{\"name\":"
		    "\"search_memory\",\"arguments\":[]}}");
	cr_assert_eq(error_code(r), MCP_INVALID_PARAMS);
	json_decref(r);
	/* Notifications (known or not) and responses get no answer. */
	cr_assert_null(send_kind(c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
				    "\"params\":{\"requestId\":1}}", &kind));
	cr_assert_eq(kind, MCP_OUT_NONE);
	cr_assert_null(send(c, "{\"jsonrpc\":\"2.0\",\"method\":\"no/such\"}"));
	cr_assert_null(send(c, "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}"));
	cr_assert_null(send(c, "{\"jsonrpc\":\"2.0\",\"id\":4,\"error\":{\"code\":1,\"message\":\"x\"}}"));
	mcp_conn_free(c);
}

Test(mcp, batches_only_in_the_revision_that_has_them)
{
	mcp_conn *c = ready(NULL, NULL, MCP_SCOPE_WRITE);
	const char *batch = "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"},"
			    "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"},"
			    "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"nope\"}]";
	int kind;
	json_t *r;

	r = send_kind(c, batch, &kind);
	cr_assert_eq(error_code(r), MCP_INVALID_REQUEST);
	cr_assert_eq(kind, MCP_OUT_INVALID);
	json_decref(r);
	mcp_conn_free(c);

	c = conn(NULL, NULL, NULL, MCP_SCOPE_WRITE);
	r = send(c, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]");
	cr_assert_eq(error_code(r), MCP_INVALID_REQUEST); /* before initialize */
	json_decref(r);
	init_at(c, "2025-03-26");
	r = send_kind(c, batch, &kind);
	cr_assert_eq(kind, MCP_OUT_RESPONSE);
	cr_assert(json_is_array(r));
	cr_assert_eq(json_array_size(r), 2);
	cr_assert_eq(json_integer_value(json_object_get(json_array_get(r, 0), "id")), 1);
	cr_assert_eq(error_code(json_array_get(r, 1)), MCP_METHOD_NOT_FOUND);
	json_decref(r);
	cr_assert_null(send(c, "[{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}]"));
	r = send(c, "[]");
	cr_assert_eq(error_code(r), MCP_INVALID_REQUEST);
	json_decref(r);
	r = send(c, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":"
		    "{\"protocolVersion\":\"2025-03-26\"}}, 5]");
	cr_assert_eq(json_array_size(r), 2);
	cr_assert_eq(error_code(json_array_get(r, 0)), MCP_INVALID_REQUEST);
	cr_assert_eq(error_code(json_array_get(r, 1)), MCP_INVALID_REQUEST);
	json_decref(r);
	mcp_conn_free(c);
}

Test(mcp, is_initialize)
{
	const char *init = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}";
	cr_assert(mcp_is_initialize(init, strlen(init)));
	cr_assert_not(mcp_is_initialize("{\"jsonrpc\":\"2.0\",\"method\":\"initialize\"}", 40));
	cr_assert_not(mcp_is_initialize("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}]", 50));
	cr_assert_not(mcp_is_initialize("{", 1));
	cr_assert_not(mcp_version_supported("2025-13-01"));
	cr_assert(mcp_version_supported("2024-11-05"));
}

Test(mcp, bindings_are_whole)
{
	mcp_binding half = { .app = "a", .scope = MCP_SCOPE_WRITE };
	mcp_binding bad = { .scope = 7 };
	memd_error err = { 0 };
	mcp_conn *c = NULL;

	cr_assert_eq(mcp_conn_new(m, &half, &c, &err), MEMD_EINVAL);
	cr_assert_eq(mcp_conn_new(m, &bad, &c, &err), MEMD_EINVAL);
	cr_assert_null(c);
}

/* ---- tools/list --------------------------------------------------------------- */

Test(mcp, tools_list_by_binding_scope_and_revision)
{
	mcp_conn *c = ready(NULL, NULL, MCP_SCOPE_WRITE);
	char names[256], *text;
	json_t *r, *t, *req;

	tool_names(c, names, sizeof(names));
	cr_assert_str_eq(names, "search_memory,get_context,list_sessions,add_memory,update_memory,"
				"delete_memory");
	r = send(c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}");
	cr_assert(json_is_false(json_object_get(json_object_get(tool_of(r, "add_memory"), "annotations"),
						"readOnlyHint")));
	t = tool_of(r, "search_memory");
	req = json_object_get(json_object_get(t, "inputSchema"), "required");
	text = json_dumps(req, JSON_COMPACT);
	cr_assert_str_eq(text, "[\"app\",\"user\",\"query\"]");
	free(text);
	cr_assert(json_is_object(json_object_get(json_object_get(json_object_get(t, "inputSchema"),
								 "properties"), "app")));
	cr_assert(json_is_false(json_object_get(json_object_get(t, "inputSchema"),
						"additionalProperties")));
	cr_assert(json_is_object(json_object_get(t, "outputSchema")));
	cr_assert(json_is_string(json_object_get(t, "title")));
	cr_assert(json_is_true(json_object_get(json_object_get(t, "annotations"), "readOnlyHint")));
	json_decref(r);
	mcp_conn_free(c);

	/* Bound: no app or user arguments. */
	c = ready("app", "alice", MCP_SCOPE_WRITE);
	r = send(c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}");
	t = tool_of(r, "search_memory");
	text = json_dumps(json_object_get(json_object_get(t, "inputSchema"), "required"), JSON_COMPACT);
	cr_assert_str_eq(text, "[\"query\"]");
	free(text);
	cr_assert_null(json_object_get(json_object_get(json_object_get(t, "inputSchema"), "properties"),
				       "app"));
	json_decref(r);
	mcp_conn_free(c);

	/* Before 2025-06-18: no structured output, no titles. */
	c = conn(NULL, NULL, NULL, MCP_SCOPE_WRITE);
	init_at(c, "2025-03-26");
	r = send(c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}");
	t = tool_of(r, "list_sessions");
	cr_assert_null(json_object_get(t, "outputSchema"));
	cr_assert_null(json_object_get(t, "title"));
	json_decref(r);
	mcp_conn_free(c);

	/* Read scope: the read tools only, and the others are unknown. */
	c = ready("app", "alice", MCP_SCOPE_READ);
	tool_names(c, names, sizeof(names));
	cr_assert_str_eq(names, "search_memory,get_context,list_sessions");
	r = send(c, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":"
		    "{\"name\":\"add_memory\",\"arguments\":{\"text\":\"x\"}}}");
	cr_assert_eq(error_code(r), MCP_INVALID_PARAMS);
	cr_assert_not_null(strstr(json_string_value(json_object_get(json_object_get(r, "error"),
								    "message")),
				  "may only read"));
	json_decref(r);
	mcp_conn_free(c);
}

/* ---- tools/call --------------------------------------------------------------- */

Test(mcp, unknown_tool_is_invalid_params)
{
	mcp_conn *c = ready("app", "alice", MCP_SCOPE_WRITE);
	json_t *r = send(c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":"
			    "{\"name\":\"forget_everything\",\"arguments\":{}}}");

	cr_assert_eq(error_code(r), MCP_INVALID_PARAMS);
	cr_assert_not_null(strstr(json_string_value(json_object_get(json_object_get(r, "error"),
								    "message")),
				  "forget_everything"));
	json_decref(r);
	mcp_conn_free(c);
}

Test(mcp, search_memory_finds_an_event)
{
	mcp_conn *c = ready("app", "alice", MCP_SCOPE_READ);
	json_t *res, *sc, *first, *again;

	append("app", "alice", "s1", "my cat is called Zebedee");
	append("app", "bob", "s9", "zebedee is bob's dog");
	res = call(c, "search_memory", "{\"query\":\"zebedee\",\"k\":5,\"mode\":\"keyword\"}");
	cr_assert_not(is_error(res), "%s", content_text(res));
	sc = json_object_get(res, "structuredContent");
	cr_assert_str_eq(json_string_value(json_object_get(sc, "mode")), "keyword");
	cr_assert_eq(json_array_size(json_object_get(sc, "results")), 1, "%s", content_text(res));
	first = json_array_get(json_object_get(sc, "results"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(first, "session_id")), "s1");
	/* The text content is the same answer. */
	again = json_loads(content_text(res), 0, NULL);
	cr_assert(json_equal(again, sc));
	json_decref(again);
	json_decref(res);
	/* app and user repeated: the same; another's: refused. */
	res = call(c, "search_memory", "{\"query\":\"zebedee\",\"app\":\"app\",\"user\":\"alice\"}");
	cr_assert_not(is_error(res), "%s", content_text(res));
	json_decref(res);
	assert_tool_error(call(c, "search_memory", "{\"query\":\"zebedee\",\"user\":\"bob\"}"),
			  "bound to one app and user");
	assert_tool_error(call(c, "search_memory", "{\"query\":\"zebedee\",\"app\":\"other\"}"),
			  "bound to one app and user");
	mcp_conn_free(c);
}

Test(mcp, unbound_calls_name_app_and_user)
{
	static const char *const apps[] = { "app", NULL };
	mcp_conn *c = conn(NULL, NULL, apps, MCP_SCOPE_WRITE);
	json_t *res;

	init_at(c, "2025-06-18");
	append("app", "bob", "s9", "bob likes quinces");
	assert_tool_error(call(c, "search_memory", "{\"query\":\"quinces\"}"), "argument app is required");
	assert_tool_error(call(c, "search_memory", "{\"query\":\"quinces\",\"app\":\"app\"}"),
			  "argument user is required");
	assert_tool_error(call(c, "search_memory",
			       "{\"query\":\"quinces\",\"app\":\"other\",\"user\":\"bob\"}"),
			  "not for app 'other'");
	res = call(c, "search_memory", "{\"query\":\"quinces\",\"app\":\"app\",\"user\":\"bob\"}");
	cr_assert_not(is_error(res), "%s", content_text(res));
	cr_assert_eq(json_array_size(json_object_get(json_object_get(res, "structuredContent"),
						     "results")),
		     1);
	json_decref(res);
	mcp_conn_free(c);
}

Test(mcp, bad_arguments_are_tool_errors)
{
	mcp_conn *c = ready("app", "alice", MCP_SCOPE_WRITE);

	assert_tool_error(call(c, "search_memory", "{}"), "argument query is required");
	assert_tool_error(call(c, "search_memory", "{\"query\":\"\"}"), "argument query");
	assert_tool_error(call(c, "search_memory", "{\"query\":\"x\",\"k\":0}"), "argument k");
	assert_tool_error(call(c, "search_memory", "{\"query\":\"x\",\"k\":\"3\"}"), "argument k");
	assert_tool_error(call(c, "search_memory", "{\"query\":\"x\",\"mode\":\"magic\"}"),
			  "keyword, vector, hybrid");
	assert_tool_error(call(c, "search_memory", "{\"query\":\"x\",\"sources\":[\"dreams\"]}"),
			  "argument sources");
	assert_tool_error(call(c, "search_memory", "{\"query\":\"x\",\"sources\":[]}"),
			  "argument sources");
	assert_tool_error(call(c, "search_memory", "{\"query\":\"x\",\"colour\":1}"),
			  "unknown argument 'colour'");
	assert_tool_error(call(c, "get_context", "{}"), "argument session_id is required");
	assert_tool_error(call(c, "list_sessions", "{\"limit\":100000}"), "argument limit");
	/* No arguments at all: the required ones are missing. */
	assert_tool_error(call(c, "get_context", "null"), "argument session_id is required");
	mcp_conn_free(c);
}

Test(mcp, memd_errors_are_tool_errors)
{
	mcp_conn *c = ready("app", "alice", MCP_SCOPE_WRITE);

	assert_tool_error(call(c, "get_context", "{\"session_id\":\"nope\"}"), "not_found");
	assert_tool_error(call(c, "list_sessions", "{\"cursor\":\"garbage\"}"), "invalid_request");
	mcp_conn_free(c);
}

Test(mcp, get_context_and_list_sessions)
{
	mcp_conn *c = ready("app", "alice", MCP_SCOPE_READ);
	json_t *res, *sc, *next;
	char args[512];

	append("app", "alice", "s1", "first conversation");
	append("app", "alice", "s2", "second conversation");
	append("app", "bob", "s3", "not alice's");
	res = call(c, "get_context", "{\"session_id\":\"s1\"}");
	cr_assert_not(is_error(res), "%s", content_text(res));
	sc = json_object_get(res, "structuredContent");
	cr_assert_str_eq(json_string_value(json_object_get(sc, "strategy")), "all");
	cr_assert_eq(json_array_size(json_object_get(sc, "events")), 1);
	json_decref(res);
	/* Another user's session is not found. */
	assert_tool_error(call(c, "get_context", "{\"session_id\":\"s3\"}"), "not_found");

	res = call(c, "list_sessions", "{\"limit\":1}");
	cr_assert_not(is_error(res), "%s", content_text(res));
	sc = json_object_get(res, "structuredContent");
	cr_assert_eq(json_array_size(json_object_get(sc, "sessions")), 1);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(sc, "sessions"), 0),
							   "id")),
			 "s2");
	next = json_object_get(sc, "next_cursor");
	cr_assert(json_is_string(next));
	snprintf(args, sizeof(args), "{\"limit\":1,\"cursor\":\"%s\"}", json_string_value(next));
	json_decref(res);
	res = call(c, "list_sessions", args);
	sc = json_object_get(res, "structuredContent");
	cr_assert_eq(json_array_size(json_object_get(sc, "sessions")), 1);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(sc, "sessions"), 0),
							   "id")),
			 "s1");
	json_decref(res);
	mcp_conn_free(c);
}

/* The history of memory id of (app, alice), parsed. */
static json_t *history(const char *id)
{
	memd_error err = { 0 };
	char *out = NULL;

	cr_assert_eq(memd_memory_history(m, "app", "alice", id, &out, &err), 0, "%s", err.msg);
	return tu_json(out);
}

Test(mcp, memory_tools_add_search_update_delete)
{
	mcp_conn *c = ready("app", "alice", MCP_SCOPE_WRITE);
	json_t *res, *sc, *h, *results;
	char id[MEMD_ID_MAX + 1], args[768];

	append("app", "alice", "s1", "hello");
	res = call(c, "add_memory", "{\"text\":\"Alice is allergic to hazelnuts\",\"kind\":\"fact\","
				    "\"topics\":[\"food\",\"health\"],\"entities\":[\"Alice\"],"
				    "\"session_id\":\"s1\",\"ttl_seconds\":86400}");
	sc = json_object_get(res, "structuredContent");
	cr_assert_not(is_error(res), "%s", content_text(res));
	cr_assert_str_eq(json_string_value(json_object_get(sc, "kind")), "fact");
	cr_assert_eq(json_integer_value(json_object_get(sc, "version")), 1);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(sc, "source"), "session_id")),
			 "s1");
	cr_assert(json_is_string(json_object_get(sc, "expires_at")));
	snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(sc, "id")));
	json_decref(res);

	/* search_memory finds it among the memories. */
	res = call(c, "search_memory", "{\"query\":\"hazelnuts\",\"sources\":[\"memories\"]}");
	results = json_object_get(json_object_get(res, "structuredContent"), "results");
	cr_assert_eq(json_array_size(results), 1, "%s", content_text(res));
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(results, 0), "memory_id")), id);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(results, 0), "source")), "memory");
	json_decref(res);

	/* update_memory: with the right version, then a stale one. */
	snprintf(args, sizeof(args), "{\"id\":\"%s\",\"text\":\"Alice is allergic to all nuts\","
				     "\"version\":1}", id);
	res = call(c, "update_memory", args);
	cr_assert_not(is_error(res), "%s", content_text(res));
	sc = json_object_get(res, "structuredContent");
	cr_assert_eq(json_integer_value(json_object_get(sc, "version")), 2);
	cr_assert_str_eq(json_string_value(json_object_get(sc, "text")), "Alice is allergic to all nuts");
	json_decref(res);
	assert_tool_error(call(c, "update_memory", args), "conflict");
	snprintf(args, sizeof(args), "{\"id\":\"%s\",\"version\":2}", id);
	assert_tool_error(call(c, "update_memory", args), "nothing to change");

	/* delete_memory: a stale version, then for real, then again. */
	snprintf(args, sizeof(args), "{\"id\":\"%s\",\"version\":1}", id);
	assert_tool_error(call(c, "delete_memory", args), "conflict");
	snprintf(args, sizeof(args), "{\"id\":\"%s\"}", id);
	res = call(c, "delete_memory", args);
	cr_assert_not(is_error(res), "%s", content_text(res));
	cr_assert(json_is_true(json_object_get(json_object_get(res, "structuredContent"), "deleted")));
	json_decref(res);
	assert_tool_error(call(c, "delete_memory", args), "not_found");
	assert_tool_error(call(c, "update_memory", "{\"id\":\"nope\",\"text\":\"x\"}"), "not_found");

	/* Every change the tools made is the actor "mcp"'s. */
	h = history(id);
	cr_assert_eq(json_array_size(json_object_get(h, "history")), 3);
	for (size_t i = 0; i < 3; i++)
		cr_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(h, "history"), i),
								   "actor")),
				 "mcp");
	json_decref(h);
	mcp_conn_free(c);
}

Test(mcp, memory_tools_check_their_arguments)
{
	mcp_conn *c = ready("app", "alice", MCP_SCOPE_WRITE);
	char many[1024] = "{\"text\":\"x\",\"topics\":[";

	for (int i = 0; i <= MEMD_MEMORY_TAGS_MAX; i++)
		snprintf(many + strlen(many), sizeof(many) - strlen(many), "%s\"t%d\"", i ? "," : "", i);
	strcat(many, "]}");
	assert_tool_error(call(c, "add_memory", "{}"), "argument text is required");
	assert_tool_error(call(c, "add_memory", "{\"text\":\"x\",\"kind\":\"opinion\"}"),
			  "fact, preference, instruction, episode");
	assert_tool_error(call(c, "add_memory", many), "argument topics");
	assert_tool_error(call(c, "add_memory", "{\"text\":\"x\",\"entities\":[\"\"]}"),
			  "argument entities");
	assert_tool_error(call(c, "add_memory", "{\"text\":\"x\",\"ttl_seconds\":0}"),
			  "argument ttl_seconds");
	assert_tool_error(call(c, "add_memory", "{\"text\":\"x\",\"session_id\":\"nope\"}"),
			  "session 'nope' not found");
	assert_tool_error(call(c, "update_memory", "{\"text\":\"x\"}"), "argument id is required");
	assert_tool_error(call(c, "delete_memory", "{\"id\":\"x\",\"version\":0}"),
			  "argument version");
	mcp_conn_free(c);
}

Test(mcp, unbound_memory_tools_write_the_named_user)
{
	mcp_conn *c = ready(NULL, NULL, MCP_SCOPE_WRITE);
	memd_error err = { 0 };
	char *out = NULL;
	json_t *res, *list;

	res = call(c, "add_memory", "{\"app\":\"app\",\"user\":\"bob\",\"text\":\"Bob prefers aisle seats\","
				    "\"kind\":\"preference\"}");
	cr_assert_not(is_error(res), "%s", content_text(res));
	json_decref(res);
	cr_assert_eq(memd_memory_list(m, "app", "bob", NULL, &out, &err), 0, "%s", err.msg);
	list = tu_json(out);
	cr_assert_eq(json_array_size(json_object_get(list, "memories")), 1);
	json_decref(list);
	cr_assert_eq(memd_memory_list(m, "app", "alice", NULL, &out, &err), 0, "%s", err.msg);
	list = tu_json(out);
	cr_assert_eq(json_array_size(json_object_get(list, "memories")), 0);
	json_decref(list);
	mcp_conn_free(c);
}

Test(mcp, get_context_recalls_memories_for_a_query)
{
	mcp_conn *c = ready("rec", "alice", MCP_SCOPE_WRITE);
	json_t *res, *mem, *items;

	append("rec", "alice", "s1", "what should I cook tonight?");
	res = call(c, "add_memory", "{\"text\":\"Alice is vegetarian\",\"kind\":\"preference\"}");
	cr_assert_not(is_error(res), "%s", content_text(res));
	json_decref(res);
	res = call(c, "get_context", "{\"session_id\":\"s1\",\"query\":\"vegetarian\"}");
	cr_assert_not(is_error(res), "%s", content_text(res));
	mem = json_object_get(json_object_get(res, "structuredContent"), "memories");
	cr_assert_str_eq(json_string_value(json_object_get(mem, "query")), "vegetarian");
	items = json_object_get(mem, "items");
	cr_assert_eq(json_array_size(items), 1, "%s", content_text(res));
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(items, 0), "text")),
			 "Alice is vegetarian");
	json_decref(res);
	assert_tool_error(call(c, "get_context", "{\"session_id\":\"s1\",\"query\":\"\"}"),
			  "argument query");
	mcp_conn_free(c);
}

Test(mcp, no_structured_content_before_2025_06_18)
{
	mcp_conn *c = conn("app", "alice", NULL, MCP_SCOPE_READ);
	json_t *res;

	init_at(c, "2024-11-05");
	res = call(c, "list_sessions", "{}");
	cr_assert_not(is_error(res));
	cr_assert_null(json_object_get(res, "structuredContent"));
	cr_assert_not_null(strstr(content_text(res), "\"sessions\""));
	json_decref(res);
	mcp_conn_free(c);
}

/* ---- the HTTP transport's sessions -------------------------------------------- */

#define NS_PER_S 1000000000LL

Test(mcp, sessions_owners_expiry_and_bound)
{
	mcp_sessions *t = NULL;
	memd_error err = { 0 };
	char id1[MCP_SESSION_ID_LEN + 1], id2[MCP_SESSION_ID_LEN + 1], id3[MCP_SESSION_ID_LEN + 1];
	int owner_a, owner_b;
	mcp_session *s;

	cr_assert_eq(mcp_sessions_new(0, NS_PER_S, &t, &err), MEMD_EINVAL);
	cr_assert_eq(mcp_sessions_new(2, 10 * NS_PER_S, &t, &err), 0);
	cr_assert_eq(mcp_sessions_add(t, conn(NULL, NULL, NULL, MCP_SCOPE_WRITE), &owner_a, 0, id1,
				      &err), 0);
	cr_assert_eq(strlen(id1), MCP_SESSION_ID_LEN);
	cr_assert_eq(mcp_sessions_add(t, conn(NULL, NULL, NULL, MCP_SCOPE_WRITE), &owner_a,
				      1 * NS_PER_S, id2, &err), 0);
	cr_assert_str_neq(id1, id2);
	/* Only its owner finds a session. */
	cr_assert_null(mcp_sessions_get(t, id1, &owner_b, 2 * NS_PER_S));
	cr_assert_eq(mcp_sessions_end(t, id1, &owner_b, 2 * NS_PER_S), MEMD_ENOTFOUND);
	s = mcp_sessions_get(t, id1, &owner_a, 2 * NS_PER_S);
	cr_assert_not_null(s);
	cr_assert_not_null(mcp_session_conn(s));
	/* Ended while in use: gone for others, freed at the release. */
	cr_assert_eq(mcp_sessions_end(t, id1, &owner_a, 3 * NS_PER_S), 0);
	cr_assert_null(mcp_sessions_get(t, id1, &owner_a, 3 * NS_PER_S));
	cr_assert_eq(mcp_sessions_end(t, id1, &owner_a, 3 * NS_PER_S), MEMD_ENOTFOUND);
	mcp_sessions_release(t, s);
	cr_assert_eq(mcp_sessions_count(t, 3 * NS_PER_S), 1);
	/* Full: a new one pushes out the one idle longest. */
	cr_assert_eq(mcp_sessions_add(t, conn(NULL, NULL, NULL, MCP_SCOPE_WRITE), &owner_b,
				      4 * NS_PER_S, id1, &err), 0);
	cr_assert_eq(mcp_sessions_add(t, conn(NULL, NULL, NULL, MCP_SCOPE_WRITE), &owner_b,
				      5 * NS_PER_S, id3, &err), 0);
	cr_assert_eq(mcp_sessions_count(t, 5 * NS_PER_S), 2);
	cr_assert_null(mcp_sessions_get(t, id2, &owner_a, 5 * NS_PER_S));
	/* A use restarts the idle time; past it, a session is gone. */
	s = mcp_sessions_get(t, id1, &owner_b, 12 * NS_PER_S);
	cr_assert_not_null(s);
	mcp_sessions_release(t, s);
	cr_assert_null(mcp_sessions_get(t, id3, &owner_b, 15 * NS_PER_S + 1));
	cr_assert_eq(mcp_sessions_count(t, 15 * NS_PER_S + 1), 1);
	cr_assert_not_null((s = mcp_sessions_get(t, id1, &owner_b, 22 * NS_PER_S)));
	mcp_sessions_release(t, s);
	cr_assert_eq(mcp_sessions_count(t, 32 * NS_PER_S + 1), 0);
	mcp_sessions_free(t);
}
