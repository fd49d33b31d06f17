/* SPDX-License-Identifier: MIT */
/*
 * Long-term memories over real HTTP (`memd serve` on SQLite): create (201
 * with Location and ETag, 200 for a retry of a client-made id, 409 for
 * other content), get, list with filters and cursors, PATCH with a body
 * version or If-Match, DELETE with ?version= or If-Match (204), the
 * history; bad input as the API's error object (400, 404, 409) with
 * nothing changed; scopes (a read key reads, only a write key writes).
 * Every response is checked against api/openapi.yaml by the harness.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define USER "/v1/apps/demo/users/ann"
#define MEMS USER "/memories"
#define PATH_MAX_LEN 512

#define KEY_R "read-key-0123456789abcdef0123456789abcdef"
#define KEY_W "write-key-0123456789abcdef0123456789abcdef"

static hs H;

static void setup(void)
{
	memset(&H, 0, sizeof(H));
}

static void teardown(void)
{
	hs_finish(&H);
}

TestSuite(memories, .init = setup, .fini = teardown, .timeout = 60);

static void expect_error(const char *method, const char *path, const char *body, long status,
			 const char *code, const char *msg)
{
	hs_expect_error(&H, method, path, body, status, code, msg);
}

static const char *str(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

static json_int_t num(json_t *o, const char *key)
{
	return json_integer_value(json_object_get(o, key));
}

/* One request with extra headers (NULL-terminated), the status back. */
static long with_headers(const char *method, const char *path, const char *const *hdr,
			 const char *body, hs_resp *out)
{
	hs_req(&H, method, path, hdr, body, body ? strlen(body) : 0, out);
	return out->status;
}

Test(memories, create_get_retry_and_conflict)
{
	const char *hdr[] = { "Content-Type: application/json", NULL };
	const char *body = "{\"id\": \"seat\", \"text\": \"prefers window seats\", "
			   "\"kind\": \"preference\", \"topics\": [\"travel\"]}";
	hs_resp r;
	json_t *o;

	hs_start(&H, NULL, NULL);
	cr_assert_eq(with_headers("POST", MEMS, hdr, body, &r), 201, "%s", r.body);
	cr_assert_str_eq(hs_header(&r, "Location"), MEMS "/seat");
	cr_assert_str_eq(hs_header(&r, "ETag"), "\"1\"");
	cr_assert_str_eq(str(r.json, "text"), "prefers window seats");
	cr_assert_str_eq(str(r.json, "kind"), "preference");
	cr_assert_eq(num(r.json, "version"), 1);
	hs_resp_clear(&r);
	/* The retry answers what the first one made. */
	cr_assert_eq(with_headers("POST", MEMS, hdr, body, &r), 200, "%s", r.body);
	cr_assert_str_eq(str(r.json, "id"), "seat");
	hs_resp_clear(&r);
	expect_error("POST", MEMS, "{\"id\": \"seat\", \"text\": \"prefers aisle seats\"}", 409,
		     "conflict", "exists with other content");

	o = hs_expect(&H, "GET", MEMS "/seat", NULL, 200);
	cr_assert_str_eq(str(o, "text"), "prefers window seats");
	json_decref(o);
	/* Without an id: a new one each time. */
	o = hs_expect(&H, "POST", MEMS, "{\"text\": \"allergic to nuts\"}", 201);
	cr_assert_eq(strlen(str(o, "id")), 36);
	cr_assert_str_eq(str(o, "kind"), "fact");
	json_decref(o);
}

Test(memories, bad_input_is_a_400_and_changes_nothing)
{
	json_t *o;

	hs_start(&H, NULL, NULL);
	expect_error("POST", MEMS, "{}", 400, "invalid_request", "text: required");
	expect_error("POST", MEMS, "{\"text\": \"x\", \"kind\": \"opinion\"}", 400,
		     "invalid_request", "kind:");
	expect_error("POST", MEMS, "{\"text\": \"x\", \"topics\": [\"\"]}", 400, "invalid_request",
		     "topics[0]");
	expect_error("POST", MEMS, "{\"text\": \"x\", \"source\": {\"session_id\": \"nope\"}}", 400,
		     "invalid_request", "session 'nope' not found");
	expect_error("POST", MEMS, "{\"text\": \"x\", \"ttl_seconds\": 5, "
		     "\"expires_at\": \"2099-01-01T00:00:00Z\"}", 400, "invalid_request",
		     "not both");
	expect_error("POST", MEMS, "{\"text\": \"x\", \"colour\": 1}", 400, "invalid_request",
		     "unknown field 'colour'");
	expect_error("GET", MEMS "?kind=opinion", NULL, 400, "invalid_request", "kind");
	expect_error("GET", MEMS "?cursor=nonsense", NULL, 400, "invalid_request", "cursor");
	expect_error("GET", MEMS "?limit=1001", NULL, 400, "invalid_request", "limit");
	expect_error("GET", MEMS "/nope", NULL, 404, "not_found", "nope");
	expect_error("GET", MEMS "/nope/history", NULL, 404, "not_found", "nope");
	expect_error("PATCH", MEMS "/nope", "{\"text\": \"x\"}", 404, "not_found", "nope");
	expect_error("DELETE", MEMS "/nope", NULL, 404, "not_found", "nope");
	o = hs_expect(&H, "GET", MEMS, NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(o, "memories")), 0);
	cr_assert(json_is_null(json_object_get(o, "next_cursor")));
	json_decref(o);
}

Test(memories, list_filters_and_cursors)
{
	char path[PATH_MAX_LEN], body[256];
	json_t *o;
	int seen = 0;

	hs_start(&H, NULL, NULL);
	o = hs_expect(&H, "POST", USER "/sessions", "{\"id\": \"chat\"}", 201);
	json_decref(o);
	for (int i = 0; i < 5; i++) {
		snprintf(body, sizeof(body),
			 "{\"id\": \"m%d\", \"text\": \"memory %d\", \"kind\": \"%s\", "
			 "\"topics\": [\"t%d\"], \"entities\": [\"Ann\"]%s}",
			 i, i, i % 2 ? "instruction" : "fact", i % 2,
			 i == 3 ? ", \"source\": {\"session_id\": \"chat\", \"seqs\": [1]}" : "");
		json_decref(hs_expect(&H, "POST", MEMS, body, 201));
	}
	snprintf(path, sizeof(path), MEMS "?limit=2");
	for (;;) {
		json_t *arr;
		o = hs_expect(&H, "GET", path, NULL, 200);
		arr = json_object_get(o, "memories");
		cr_assert_leq(json_array_size(arr), 2);
		seen += (int)json_array_size(arr);
		if (json_is_null(json_object_get(o, "next_cursor"))) {
			json_decref(o);
			break;
		}
		snprintf(path, sizeof(path), MEMS "?limit=2&cursor=%s", str(o, "next_cursor"));
		json_decref(o);
	}
	cr_assert_eq(seen, 5);
	o = hs_expect(&H, "GET", MEMS "?kind=instruction", NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(o, "memories")), 2);
	json_decref(o);
	o = hs_expect(&H, "GET", MEMS "?topic=t0&entity=Ann", NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(o, "memories")), 3);
	json_decref(o);
	o = hs_expect(&H, "GET", MEMS "?session_id=chat", NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(o, "memories")), 1);
	cr_assert_str_eq(str(json_array_get(json_object_get(o, "memories"), 0), "id"), "m3");
	json_decref(o);
}

Test(memories, patch_and_delete_with_versions_and_if_match)
{
	const char *stale[] = { "Content-Type: application/json", "If-Match: \"1\"", NULL };
	const char *fresh[] = { "Content-Type: application/json", "If-Match: \"2\"", NULL };
	const char *bad[] = { "Content-Type: application/json", "If-Match: W/\"2\"", NULL };
	hs_resp r;
	json_t *o, *h;

	hs_start(&H, NULL, NULL);
	json_decref(hs_expect(&H, "POST", MEMS, "{\"id\": \"home\", \"text\": \"lives in Paris\"}",
			      201));
	o = hs_expect(&H, "PATCH", MEMS "/home", "{\"text\": \"lives in Lyon\", \"reason\": \"moved\"}",
		      200);
	cr_assert_eq(num(o, "version"), 2);
	json_decref(o);
	expect_error("PATCH", MEMS "/home", "{\"text\": \"x\", \"version\": 1}", 409, "conflict",
		     "version 2");
	cr_assert_eq(with_headers("PATCH", MEMS "/home", stale, "{\"text\": \"x\"}", &r), 409,
		     "%s", r.body);
	hs_resp_clear(&r);
	cr_assert_eq(with_headers("PATCH", MEMS "/home", bad, "{\"text\": \"x\"}", &r), 400, "%s",
		     r.body);
	hs_resp_clear(&r);
	cr_assert_eq(with_headers("PATCH", MEMS "/home", fresh, "{\"text\": \"x\", \"version\": 1}",
				  &r),
		     400, "%s", r.body);
	hs_resp_clear(&r);
	cr_assert_eq(with_headers("PATCH", MEMS "/home", fresh, "{\"kind\": \"episode\"}", &r), 200,
		     "%s", r.body);
	cr_assert_str_eq(hs_header(&r, "ETag"), "\"3\"");
	hs_resp_clear(&r);
	expect_error("PATCH", MEMS "/home", "{}", 400, "invalid_request", "nothing to change");

	expect_error("DELETE", MEMS "/home?version=2", NULL, 409, "conflict", "version 3");
	cr_assert_eq(with_headers("DELETE", MEMS "/home", stale, NULL, &r), 409, "%s", r.body);
	hs_resp_clear(&r);
	json_decref(hs_expect(&H, "DELETE", MEMS "/home?version=3", NULL, 204));
	expect_error("GET", MEMS "/home", NULL, 404, "not_found", "home");

	o = hs_expect(&H, "GET", MEMS "/home/history", NULL, 200);
	h = json_object_get(o, "history");
	cr_assert_eq(json_array_size(h), 4);
	cr_assert_str_eq(str(json_array_get(h, 0), "op"), "add");
	cr_assert_str_eq(str(json_array_get(h, 1), "reason"), "moved");
	cr_assert_str_eq(str(json_array_get(h, 3), "op"), "delete");
	cr_assert_str_eq(str(json_array_get(h, 3), "actor"), "api");
	json_decref(o);
}

static long with_key(const char *method, const char *path, const char *key, const char *body)
{
	char auth[256];
	const char *hdr[] = { auth, "Content-Type: application/json", NULL };
	hs_resp r;
	long status;

	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", key);
	status = with_headers(method, path, hdr, body, &r);
	hs_resp_clear(&r);
	return status;
}

Test(memories, a_read_key_reads_and_cannot_write)
{
	hs_start(&H, "  api_keys:\n    - {key: " KEY_R ", scope: read}\n    - {key: " KEY_W
		     ", scope: write}\n", NULL);
	cr_assert_eq(with_key("POST", MEMS, KEY_R, "{\"id\": \"m\", \"text\": \"x\"}"), 403);
	cr_assert_eq(with_key("POST", MEMS, KEY_W, "{\"id\": \"m\", \"text\": \"x\"}"), 201);
	cr_assert_eq(with_key("GET", MEMS, KEY_R, NULL), 200);
	cr_assert_eq(with_key("GET", MEMS "/m", KEY_R, NULL), 200);
	cr_assert_eq(with_key("GET", MEMS "/m/history", KEY_R, NULL), 200);
	cr_assert_eq(with_key("PATCH", MEMS "/m", KEY_R, "{\"text\": \"y\"}"), 403);
	cr_assert_eq(with_key("DELETE", MEMS "/m", KEY_R, NULL), 403);
	cr_assert_eq(with_key("PATCH", MEMS "/m", KEY_W, "{\"text\": \"y\"}"), 200);
	cr_assert_eq(with_key("DELETE", MEMS "/m", KEY_W, NULL), 204);
}
