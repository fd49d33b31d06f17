/* SPDX-License-Identifier: MIT */
/*
 * api/openapi.yaml against the server: every route the router answers is
 * in the spec with the same method, scope and query parameters, and every
 * operation of the spec is answered by the server (probed over HTTP, with
 * every method on every path); the error codes of the one error table are
 * the spec's; /openapi.json is the YAML; every $ref resolves; and the
 * response validator really rejects what it must.
 */
#include <criterion/criterion.h>
#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "errors.h"
#include "harness.h"
#include "openapi.h"
#include "router.h"
#include "config/settings.h"
#include "spec.h"

#define MSG_MAX 2048

static json_t *paths(void)
{
	return json_object_get(spec_doc(spec_default()), "paths");
}

static void lower(const char *in, char *out, size_t cap)
{
	size_t i;
	for (i = 0; in[i] && i + 1 < cap; i++)
		out[i] = (char)tolower((unsigned char)in[i]);
	out[i] = '\0';
}

static const char *scope_name(int32_t scope)
{
	return http_auth_scope_name(scope);
}

Test(spec, every_route_is_in_the_spec_with_its_scope_and_query)
{
	size_t n;
	const http_route *r = http_routes(&n);

	for (size_t i = 0; i < n; i++) {
		char m[16];
		json_t *op, *params, *p;
		size_t k, nq = 0, documented = 0;
		lower(r[i].method, m, sizeof(m));
		op = json_object_get(json_object_get(paths(), r[i].pattern), m);
		cr_assert(op, "%s %s is served but not in api/openapi.yaml", r[i].method, r[i].pattern);
		cr_assert_str_eq(json_string_value(json_object_get(op, "x-memd-scope")), scope_name(r[i].scope),
				 "%s %s: scope", r[i].method, r[i].pattern);
		if (r[i].scope == HTTP_SCOPE_PUBLIC)
			cr_assert_eq(json_array_size(json_object_get(op, "security")), 0,
				     "%s %s is public: security: []", r[i].method, r[i].pattern);
		else
			cr_assert_null(json_object_get(op, "security"), "%s %s needs the global bearer",
				       r[i].method, r[i].pattern);
		params = json_object_get(op, "parameters");
		for (nq = 0; r[i].query && r[i].query[nq]; nq++) {
			int found = 0;
			json_array_foreach(params, k, p) found |= strcmp(json_string_value(json_object_get(p, "name")), r[i].query[nq]) == 0 &&
							    strcmp(json_string_value(json_object_get(p, "in")), "query") == 0;
			cr_assert(found, "%s %s: query parameter %s is not documented", r[i].method,
				  r[i].pattern, r[i].query[nq]);
		}
		json_array_foreach(params, k, p) documented += strcmp(json_string_value(json_object_get(p, "in")), "query") == 0;
		cr_assert_eq(documented, nq, "%s %s: the spec documents %zu query parameters, the route takes %zu",
			     r[i].method, r[i].pattern, documented, nq);
		cr_assert_eq(json_object_get(op, "requestBody") != NULL, r[i].body != HTTP_BODY_NONE,
			     "%s %s: requestBody", r[i].method, r[i].pattern);
	}
}

Test(spec, every_operation_of_the_spec_is_a_route)
{
	size_t n, ops = 0;
	const http_route *r = http_routes(&n);
	const char *path, *method;
	json_t *item, *op;

	json_object_foreach(paths(), path, item) {
		json_object_foreach(item, method, op) {
			int found = 0;
			if (strcmp(method, "parameters") == 0)
				continue;
			for (size_t i = 0; i < n; i++) {
				char m[16];
				lower(r[i].method, m, sizeof(m));
				found |= strcmp(m, method) == 0 && strcmp(r[i].pattern, path) == 0;
			}
			cr_assert(found, "the spec has %s %s but the server has no such route", method, path);
			ops++;
			/* Every operation documents the errors every route can give. */
			cr_assert(json_object_get(json_object_get(op, "responses"), "400"), "%s %s: 400", method, path);
			cr_assert(json_object_get(json_object_get(op, "responses"), "405"), "%s %s: 405", method, path);
			cr_assert(json_object_get(json_object_get(op, "responses"), "414"), "%s %s: 414", method, path);
			cr_assert(json_object_get(json_object_get(op, "responses"), "431"), "%s %s: 431", method, path);
			cr_assert(json_object_get(json_object_get(op, "responses"), "500"), "%s %s: 500", method, path);
			cr_assert(json_object_get(json_object_get(op, "responses"), "503"), "%s %s: 503", method, path);
		}
	}
	cr_assert_eq(ops, n);
}

Test(spec, error_codes_are_the_tables)
{
	size_t n;
	const http_error_kind *t = http_error_table(&n);
	json_t *codes = json_object_get(json_object_get(json_object_get(
		json_object_get(json_object_get(spec_doc(spec_default()), "components"), "schemas"),
				"ErrorDetail"), "properties"), "code");
	json_t *e = json_object_get(codes, "enum"), *v;
	size_t i;

	cr_assert(json_is_array(e));
	for (i = 0; i < n; i++) {
		int found = 0;
		size_t k;
		json_array_foreach(e, k, v) found |= strcmp(json_string_value(v), t[i].name) == 0;
		cr_assert(found, "error code %s is not in the spec", t[i].name);
	}
	json_array_foreach(e, i, v) {
		int found = 0;
		for (size_t k = 0; k < n; k++)
			found |= strcmp(json_string_value(v), t[k].name) == 0;
		cr_assert(found, "the spec lists error code %s that memd never sends", json_string_value(v));
	}
	/* The status table of the brief. */
	cr_assert_eq(http_error_lookup(MEMD_EINVAL, 0)->status, 400);
	cr_assert_eq(http_error_lookup(MEMD_ENOTFOUND, 0)->status, 404);
	cr_assert_eq(http_error_lookup(MEMD_ECONFLICT, 0)->status, 409);
	cr_assert_eq(http_error_lookup(MEMD_ETOOBIG, 0)->status, 413);
	cr_assert_eq(http_error_lookup(MEMD_EAUTH, 0)->status, 401);
	cr_assert_eq(http_error_lookup(MEMD_EFORBIDDEN, 0)->status, 403);
	cr_assert_eq(http_error_lookup(MEMD_ENOTSUP, 0)->status, 501);
	cr_assert_eq(http_error_lookup(MEMD_EUNAVAIL, 0)->status, 503);
	cr_assert_eq(http_error_lookup(MEMD_ETIMEDOUT, 0)->status, 503);
	cr_assert_eq(http_error_lookup(MEMD_EIO, 0)->status, 500);
	cr_assert_eq(http_error_lookup(MEMD_EIO, MEMD_ERROR_RETRYABLE)->status, 503);
	cr_assert(http_error_lookup(MEMD_EIO, MEMD_ERROR_RETRYABLE)->retryable);
	cr_assert_eq(http_error_lookup(MEMD_EINVAL, MEMD_ERROR_RETRYABLE)->status, 400,
		     "a client error stays one");
	cr_assert_eq(http_error_lookup(-999, 0)->status, 500);
}

static void check_refs(json_t *node, const char *where)
{
	const char *key;
	json_t *v;
	size_t i;
	char msg[MSG_MAX];

	if (json_is_object(node)) {
		json_t *ref = json_object_get(node, "$ref");
		if (json_is_string(ref)) {
			/* A schema that is only this $ref validates whatever its target does;
			 * resolving it through the validator proves it exists. */
			json_t *probe = json_pack("{s:s}", "$ref", json_string_value(ref));
			int ok = spec_validate(spec_default(), probe, json_null(), msg, sizeof(msg)) == 0 ||
				 !strstr(msg, "unresolvable");
			json_decref(probe);
			cr_assert(ok, "%s: %s", where, msg);
		}
		json_object_foreach(node, key, v) check_refs(v, key);
	} else if (json_is_array(node)) {
		json_array_foreach(node, i, v) check_refs(v, where);
	}
}

Test(spec, every_ref_resolves_and_openapi_json_is_the_yaml)
{
	json_t *embedded = json_loads(http_openapi_json, 0, NULL);
	check_refs(spec_doc(spec_default()), "$");
	cr_assert(embedded, "the embedded /openapi.json is JSON");
	cr_assert_eq(strlen(http_openapi_json), http_openapi_json_len);
	cr_assert(json_equal(embedded, spec_doc(spec_default())),
		  "/openapi.json differs from api/openapi.yaml: rebuild");
	json_decref(embedded);
}

/* ---- the validator itself -------------------------------------------------------- */

static int valid(const char *schema_name, const char *value)
{
	char ref[128], msg[MSG_MAX];
	json_t *schema, *v = json_loads(value, JSON_DECODE_ANY, NULL);
	int r;
	cr_assert(v, "test value is not JSON: %s", value);
	snprintf(ref, sizeof(ref), "#/components/schemas/%s", schema_name);
	schema = json_pack("{s:s}", "$ref", ref);
	r = spec_validate(spec_default(), schema, v, msg, sizeof(msg));
	json_decref(schema);
	json_decref(v);
	return r == 0;
}

#define EVENT_OK "{\"id\":\"e\",\"seq\":1,\"invocation_id\":null,\"author\":\"user\",\"role\":\"user\"," \
		 "\"branch\":null,\"content\":{\"parts\":[{\"text\":\"x\"}]},\"actions\":null,\"metadata\":null," \
		 "\"timestamp\":\"2025-01-01T00:00:00.000001Z\",\"text\":\"x\",\"tokens\":1}"

Test(spec, the_validator_rejects_what_it_must)
{
	char msg[MSG_MAX];
	json_t *schema, *v;

	cr_assert(valid("AppendResult", "{\"version\":1,\"seqs\":[1,2],\"replayed\":false}"));
	cr_assert_not(valid("AppendResult", "{\"version\":1,\"seqs\":[1,2]}"), "missing required member");
	cr_assert_not(valid("AppendResult", "{\"version\":1,\"seqs\":[0],\"replayed\":false}"), "below minimum");
	cr_assert_not(valid("AppendResult", "{\"version\":\"1\",\"seqs\":[],\"replayed\":false}"), "wrong type");
	cr_assert_not(valid("AppendResult", "{\"version\":1.0,\"seqs\":[],\"replayed\":false}"), "a real is no integer");
	cr_assert_not(valid("AppendResult", "{\"version\":1,\"seqs\":[],\"replayed\":false,\"x\":1}"), "extra member");
	cr_assert(valid("Event", EVENT_OK));
	cr_assert_not(valid("Event", "{" "\"role\":\"wizard\"}"));
	{
		json_t *e = json_loads(EVENT_OK, 0, NULL);
		char *text;
		json_object_set_new(e, "role", json_string("wizard"));
		text = json_dumps(e, 0);
		cr_assert_not(valid("Event", text), "enum");
		free(text);
		json_object_set_new(e, "role", json_string("user"));
		json_object_set_new(e, "timestamp", json_string("yesterday"));
		text = json_dumps(e, 0);
		cr_assert_not(valid("Event", text), "date-time format");
		free(text);
		json_decref(e);
	}
	cr_assert(valid("Context", "{\"strategy\":\"all\",\"summary\":null,\"events\":[],\"tokens\":0}"));
	cr_assert(valid("Context", "{\"strategy\":\"all\",\"summary\":" EVENT_OK ",\"events\":[" EVENT_OK "],\"tokens\":0}"));
	cr_assert_not(valid("Context", "{\"strategy\":\"all\",\"summary\":5,\"events\":[],\"tokens\":0}"), "anyOf");
	cr_assert_not(valid("Context", "{\"strategy\":\"all\",\"summary\":null,\"events\":[{}],\"tokens\":0}"), "items");
	cr_assert(valid("SessionPage", "{\"sessions\":[],\"next_cursor\":null}"));
	cr_assert_not(valid("SessionPage", "{\"sessions\":[],\"next_cursor\":3}"), "type list");
	cr_assert(valid("Error", "{\"error\":{\"code\":\"conflict\",\"message\":\"m\",\"retryable\":false}}"));
	cr_assert_not(valid("Error", "{\"error\":{\"code\":\"oops\",\"message\":\"m\",\"retryable\":false}}"));
	cr_assert_not(valid("Error", "{\"error\":{\"code\":\"conflict\",\"message\":\"\",\"retryable\":false}}"), "minLength");
	cr_assert_not(valid("Id", "\"\""));
	/* A keyword outside the subset is an error, not a pass. */
	schema = json_pack("{s:s,s:s}", "type", "string", "pattern", "^a");
	v = json_string("b");
	cr_assert_neq(spec_validate(spec_default(), schema, v, msg, sizeof(msg)), 0);
	cr_assert(strstr(msg, "pattern"), "%s", msg);
	json_decref(schema);
	json_decref(v);
}

Test(spec, responses_are_checked_against_their_operation)
{
	const char *json_hdr[] = { "Content-Type: application/json", "X-Request-Id: r" };
	const char *no_id[] = { "Content-Type: application/json" };
	const char *err = "{\"error\":{\"code\":\"conflict\",\"message\":\"m\",\"retryable\":false}}";
	char msg[MSG_MAX];
	spec_response r = { 409, json_hdr, 2, err, strlen(err) };
	const char *p = "/v1/apps/a/users/u/sessions/s/events";

	cr_assert_eq(spec_check_response(spec_default(), "POST", p, &r, msg, sizeof(msg)), 0, "%s", msg);
	r.status = 418;
	cr_assert_neq(spec_check_response(spec_default(), "POST", p, &r, msg, sizeof(msg)), 0, "undocumented status");
	r.status = 409;
	r.headers = no_id;
	r.n_headers = 1;
	cr_assert_neq(spec_check_response(spec_default(), "POST", p, &r, msg, sizeof(msg)), 0, "missing X-Request-Id");
	r.headers = json_hdr;
	r.n_headers = 2;
	r.status = 409;
	cr_assert_neq(spec_check_response(spec_default(), "GET", p, &r, msg, sizeof(msg)), 0, "409 is not a GET events answer");
	r.status = 204;
	cr_assert_neq(spec_check_response(spec_default(), "DELETE", "/v1/apps/a/users/u/sessions/s", &r, msg, sizeof(msg)), 0,
		      "204 with a body");
	r.status = 404;
	cr_assert_eq(spec_check_response(spec_default(), "GET", "/nowhere", &r, msg, sizeof(msg)), 0, "%s", msg);
	r.status = 200;
	cr_assert_neq(spec_check_response(spec_default(), "GET", "/nowhere", &r, msg, sizeof(msg)), 0);
	cr_assert_str_eq(spec_match_path(spec_default(), "/v1/apps/a/users/u/sessions/s/invocations/i:end"),
			 "/v1/apps/{app}/users/{user}/sessions/{sid}/invocations/{invocation}:end");
	cr_assert_null(spec_match_path(spec_default(), "/v1/apps/a/users/u/sessions/s/invocations/i"));
	/* An action suffix wins over a bare parameter, as in memd's router. */
	cr_assert_str_eq(spec_match_path(spec_default(), "/v1/apps/a/users/u/lanes/x:y:open"),
			 "/v1/apps/{app}/users/{user}/lanes/{key}:open");
	cr_assert_str_eq(spec_match_path(spec_default(), "/v1/apps/a/users/u/lanes/x%3Ay%3Aopen"),
			 "/v1/apps/{app}/users/{user}/lanes/{key}");
}

/* The transcript routes: their paths match as the router's do, and their
 * answers are held to their schemas (a rewind without target_text, a
 * hidden mark without its operation, an OpenAI context without messages
 * are refused). */
Test(spec, transcript_answers_are_checked)
{
	const char *hdr[] = { "Content-Type: application/json", "X-Request-Id: r" };
	char msg[MSG_MAX];
	const char *op = "{\"id\":\"o1\",\"kind\":\"rewind\",\"created\":\"2025-01-01T00:00:00Z\","
			 "\"version\":3,\"hidden_count\":2,\"unhidden_count\":0,\"appended\":null,"
			 "\"undo_of\":null,\"undone_by\":null}";
	char good[1024], bad[1024];
	spec_response r = { 200, hdr, 2, good, 0 };
	const char *rw = "/v1/apps/a/users/u/sessions/s:rewind";

	cr_assert_str_eq(spec_match_path(spec_default(), rw),
			 "/v1/apps/{app}/users/{user}/sessions/{sid}:rewind");
	cr_assert_str_eq(spec_match_path(spec_default(), "/v1/apps/a/users/u/sessions/s/operations/o:undo"),
			 "/v1/apps/{app}/users/{user}/sessions/{sid}/operations/{op}:undo");
	cr_assert_str_eq(spec_match_path(spec_default(), "/v1/apps/a/users/u/sessions/s/state/history"),
			 "/v1/apps/{app}/users/{user}/sessions/{sid}/state/history");
	{
		/* A session's path names its action to a POST without one. */
		hs h;
		hs_resp resp;
		memset(&h, 0, sizeof(h));
		hs_start(&h, NULL, NULL);
		hs_json(&h, "POST", "/v1/apps/a/users/u/sessions/s", NULL, &resp);
		cr_assert_eq(resp.status, 405, "%s", resp.body);
		cr_assert(strstr(resp.body, "POST takes an action at the end of this path: :rewind"), "%s",
			  resp.body);
		hs_resp_clear(&resp);
		hs_finish(&h);
	}

	snprintf(good, sizeof(good), "{\"rewound_count\":2,\"turns_undone\":1,\"target_text\":\"hi\","
		 "\"operation\":%s,\"version\":3,\"state\":{\"restored\":[],\"not_restored\":[]}}", op);
	r.len = strlen(good);
	cr_assert_eq(spec_check_response(spec_default(), "POST", rw, &r, msg, sizeof(msg)), 0, "%s", msg);
	snprintf(bad, sizeof(bad), "{\"rewound_count\":2,\"turns_undone\":1,"
		 "\"operation\":%s,\"version\":3,\"state\":{\"restored\":[],\"not_restored\":[]}}", op);
	r.body = bad;
	r.len = strlen(bad);
	cr_assert_neq(spec_check_response(spec_default(), "POST", rw, &r, msg, sizeof(msg)), 0,
		      "a rewind without target_text");

	snprintf(bad, sizeof(bad), "{\"events\":[{\"id\":\"e\",\"seq\":1,\"invocation_id\":null,"
		 "\"author\":null,\"role\":\"user\",\"branch\":null,\"content\":{\"parts\":[]},"
		 "\"actions\":null,\"metadata\":null,\"timestamp\":\"2025-01-01T00:00:00Z\","
		 "\"tokens\":1,\"hidden\":{\"at\":\"2025-01-01T00:00:00Z\",\"kind\":\"rewind\"}}],"
		 "\"next_after_seq\":null}");
	r.len = strlen(bad);
	cr_assert_neq(spec_check_response(spec_default(), "GET", "/v1/apps/a/users/u/sessions/s/events",
					  &r, msg, sizeof(msg)), 0, "a hidden mark without by");

	snprintf(good, sizeof(good), "{\"format\":\"openai\",\"strategy\":\"all\",\"tokens\":3,"
		 "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}");
	r.body = good;
	r.len = strlen(good);
	cr_assert_eq(spec_check_response(spec_default(), "GET", "/v1/apps/a/users/u/sessions/s/context",
					 &r, msg, sizeof(msg)), 0, "%s", msg);
	snprintf(bad, sizeof(bad), "{\"format\":\"openai\",\"strategy\":\"all\",\"tokens\":3}");
	r.body = bad;
	r.len = strlen(bad);
	cr_assert_neq(spec_check_response(spec_default(), "GET", "/v1/apps/a/users/u/sessions/s/context",
					  &r, msg, sizeof(msg)), 0, "an OpenAI context without messages");
}

/* ---- the server answers exactly the spec's operations ------------------------------- */

/* A concrete path for a template: every {param} becomes "p", keeping a
 * suffix like ":end". */
static void concrete(const char *tmpl, char *out, size_t cap)
{
	size_t o = 0;
	for (const char *p = tmpl; *p && o + 2 < cap;) {
		if (*p == '{') {
			out[o++] = 'p';
			p = strchr(p, '}') + 1;
		} else {
			out[o++] = *p++;
		}
	}
	out[o] = '\0';
}

Test(spec, the_server_answers_every_operation_and_nothing_else, .timeout = 60)
{
	static const char *const methods[] = { "GET", "POST", "PUT", "PATCH", "DELETE" };
	hs h;
	const char *tmpl;
	json_t *item;
	int probed = 0;

	memset(&h, 0, sizeof(h));
	hs_start(&h, NULL, NULL);
	json_object_foreach(paths(), tmpl, item) {
		char path[512];
		concrete(tmpl, path, sizeof(path));
		for (size_t m = 0; m < sizeof(methods) / sizeof(methods[0]); m++) {
			char lm[16];
			hs_resp r;
			lower(methods[m], lm, sizeof(lm));
			/* The harness checks each answer against the spec too. */
			hs_req(&h, methods[m], path, NULL, NULL, 0, &r);
			if (json_object_get(item, lm)) {
				cr_assert(r.status != 405 && strcmp(hs_error_code(&r), "no_route") != 0,
					  "%s %s: the spec has it, the server answered %ld %s", methods[m], path,
					  r.status, r.body);
			} else {
				cr_assert_eq(r.status, 405, "%s %s: not in the spec, the server answered %ld",
					     methods[m], path, r.status);
			}
			probed++;
			hs_resp_clear(&r);
		}
	}
	cr_assert_gt(probed, 0);
	hs_finish(&h);
}
