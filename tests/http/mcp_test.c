/* SPDX-License-Identifier: MIT */
/*
 * /mcp over real HTTP, every answer checked against api/openapi.yaml by
 * the harness: a session's life (initialize, a notification, tool calls,
 * DELETE), Origin against server.allowed_hosts, and server.mcp.enabled:
 * false. (tests/mcp drives it with the official SDK's client.)
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

#define INIT                                                                                  \
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":" \
	"\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}"

static hs H;

static void post(const char *const *headers, const char *body, hs_resp *r)
{
	hs_req(&H, "POST", "/mcp", headers, body, strlen(body), r);
}

/* initialize; the session id into sid (65 bytes). */
static void start_session(char *sid)
{
	const char *const h[] = { "Content-Type: application/json", NULL };
	hs_resp r;

	post(h, INIT, &r);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert_not_null(hs_header(&r, "Mcp-Session-Id"));
	snprintf(sid, 65, "%s", hs_header(&r, "Mcp-Session-Id"));
	cr_assert_eq(strlen(sid), 64);
	hs_resp_clear(&r);
}

Test(http_mcp, a_session_from_initialize_to_delete)
{
	char sid[65], with_sid[128];
	hs_resp r;

	hs_start(&H, NULL, NULL);
	start_session(sid);
	snprintf(with_sid, sizeof(with_sid), "Mcp-Session-Id: %s", sid);
	{
		const char *const h[] = { "Content-Type: application/json", with_sid,
					  "MCP-Protocol-Version: 2025-11-25", NULL };
		post(h, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", &r);
		cr_assert_eq(r.status, 202);
		cr_assert_eq(r.len, 0);
		cr_assert_str_eq(hs_header(&r, "Mcp-Session-Id"), sid);
		hs_resp_clear(&r);
		post(h, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":"
			"\"add_memory\",\"arguments\":{\"app\":\"a\",\"user\":\"u\",\"text\":\"likes tea\"}}}",
		     &r);
		cr_assert_eq(r.status, 200, "%s", r.body);
		cr_assert_not(json_is_true(json_object_get(json_object_get(r.json, "result"), "isError")),
			      "%s", r.body);
		hs_resp_clear(&r);
		/* What is not a JSON-RPC message is 400 with a JSON-RPC error. */
		post(h, "{\"id\":3}", &r);
		cr_assert_eq(r.status, 400);
		cr_assert_eq(json_integer_value(json_object_get(json_object_get(r.json, "error"), "code")),
			     -32600);
		hs_resp_clear(&r);
		hs_req(&H, "DELETE", "/mcp", h, NULL, 0, &r);
		cr_assert_eq(r.status, 204);
		hs_resp_clear(&r);
		post(h, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\"}", &r);
		cr_assert_eq(r.status, 404);
		cr_assert_eq(json_integer_value(json_object_get(json_object_get(r.json, "error"), "code")),
			     -32001);
		hs_resp_clear(&r);
	}
	{
		const char *const h[] = { "Content-Type: application/json", NULL };
		post(h, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\"}", &r);
		cr_assert_eq(r.status, 400, "no session id");
		hs_resp_clear(&r);
		hs_req(&H, "DELETE", "/mcp", NULL, NULL, 0, &r);
		cr_assert_eq(r.status, 400, "DELETE without a session id");
		hs_resp_clear(&r);
		hs_req(&H, "GET", "/mcp", NULL, NULL, 0, &r);
		cr_assert_eq(r.status, 405);
		cr_assert_not_null(strstr(hs_header(&r, "Allow"), "POST"));
		hs_resp_clear(&r);
	}
	hs_finish(&H);
}

#define KEY "0123456789abcdef0123456789abcdef-mcp"

/* With API keys the browser check of every route is off (a key is the
 * credential); /mcp still refuses a page whose Origin is not a host memd
 * answers to (DNS rebinding). */
Test(http_mcp, origin_must_be_an_allowed_host)
{
	const char *const good[] = { "Content-Type: application/json", "Authorization: Bearer " KEY,
				     "Origin: http://memd.test", NULL };
	const char *const evil[] = { "Content-Type: application/json", "Authorization: Bearer " KEY,
				     "Origin: http://evil.test", NULL };
	const char *const none[] = { "Content-Type: application/json", "Authorization: Bearer " KEY,
				     "Origin: null", NULL };
	hs_resp r;

	hs_start(&H, "  allowed_hosts: [127.0.0.1, memd.test]\n  api_keys: [{key: " KEY ", scope: write}]\n",
		 NULL);
	post(good, INIT, &r);
	cr_assert_eq(r.status, 200, "%s", r.body);
	hs_resp_clear(&r);
	post(evil, INIT, &r);
	cr_assert_eq(r.status, 403, "%s", r.body);
	cr_assert_str_eq(hs_error_code(&r), "forbidden");
	cr_assert_null(hs_header(&r, "Mcp-Session-Id"));
	hs_resp_clear(&r);
	post(none, INIT, &r);
	cr_assert_eq(r.status, 403, "%s", r.body);
	hs_resp_clear(&r);
	hs_finish(&H);
}

Test(http_mcp, off_with_server_mcp_enabled_false)
{
	const char *const h[] = { "Content-Type: application/json", NULL };
	hs_resp r;

	hs_start(&H, "  mcp: {enabled: false}\n", NULL);
	post(h, INIT, &r);
	cr_assert_eq(r.status, 404, "%s", r.body);
	cr_assert_str_eq(hs_error_code(&r), "no_route");
	hs_resp_clear(&r);
	hs_finish(&H);
}
