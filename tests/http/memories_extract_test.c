/* SPDX-License-Identifier: MIT */
/*
 * Memory extraction over real HTTP on SQLite: POST
 * .../sessions/{sid}/memories:extract extracts the unread events now
 * (the built-in extractor, no config) and a second call finds nothing
 * left; an unknown session is 404, an app whose extraction is off 501;
 * POST /v1/memories:sweep runs the worker's pass. Every response is
 * checked against api/openapi.yaml by the harness.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <string.h>

#include "harness.h"

#define USER "/v1/apps/demo/users/ann"
#define SESS USER "/sessions/chat"

static hs H;

static void setup(void)
{
	memset(&H, 0, sizeof(H));
}

static void teardown(void)
{
	hs_finish(&H);
}

TestSuite(memories_extract, .init = setup, .fini = teardown, .timeout = 60);

static json_int_t num(json_t *o, const char *key)
{
	return json_integer_value(json_object_get(o, key));
}

Test(memories_extract, extract_now_then_nothing_left)
{
	json_t *o, *mem;

	hs_start(&H, NULL,
		 "memory: {extract: {every_events: 0, idle_minutes: 0}}\n"
		 "apps:\n  off:\n    working_memory: {strategy: all}\n"
		 "    memory: {extract: {type: none}}\n");
	json_decref(hs_expect(&H, "POST", USER "/sessions", "{\"id\":\"chat\"}", 201));
	json_decref(hs_expect(&H, "POST", SESS "/events",
			      "{\"events\":[{\"role\":\"user\",\"content\":\"My name is Ann. I "
			      "live in Ghent.\"},{\"role\":\"assistant\",\"content\":\"Hi Ann!\"}]}",
			      200));
	o = hs_expect(&H, "POST", SESS "/memories:extract", NULL, 200);
	cr_assert_str_eq(json_string_value(json_object_get(o, "session_id")), "chat");
	cr_assert_eq(num(o, "from_seq"), 0);
	cr_assert_eq(num(o, "to_seq"), 2);
	cr_assert_eq(num(o, "added"), 2);
	cr_assert_eq(json_array_size(json_object_get(o, "memories")), 2);
	mem = json_array_get(json_object_get(o, "memories"), 1);
	cr_assert_str_eq(json_string_value(json_object_get(mem, "text")), "User lives in Ghent");
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(mem, "source"),
							   "session_id")),
			 "chat");
	cr_assert_eq(num(mem, "version"), 1);
	json_decref(o);

	o = hs_expect(&H, "POST", SESS "/memories:extract", NULL, 200);
	cr_assert_eq(num(o, "from_seq"), 2);
	cr_assert_eq(num(o, "to_seq"), 2);
	cr_assert_eq(num(o, "added"), 0);
	json_decref(o);

	json_decref(hs_expect(&H, "POST", USER "/sessions/nope/memories:extract", NULL, 404));
	json_decref(hs_expect(&H, "POST", "/v1/apps/off/users/ann/sessions", "{\"id\":\"s\"}", 201));
	json_decref(hs_expect(&H, "POST", "/v1/apps/off/users/ann/sessions/s/memories:extract",
			      NULL, 501));
	o = hs_expect(&H, "POST", "/v1/memories:sweep", NULL, 200);
	cr_assert_eq(num(o, "sessions_extracted"), 0);
	cr_assert_eq(num(o, "memories_expired"), 0);
	json_decref(o);
}
