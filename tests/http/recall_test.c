/* SPDX-License-Identifier: MIT */
/*
 * Recall over HTTP (apps.<name>.working_memory.recall): GET .../context
 * answers a "memories" section for the window's latest user message, and
 * for ?query= instead; ?format=openai puts the items in one system message
 * first; every answer is checked against api/openapi.yaml (the harness
 * does).
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define BASE "/v1/apps/r/users/u"
#define CTX BASE "/sessions/now/context"

static hs H;

static void setup(void)
{
	memset(&H, 0, sizeof(H));
	hs_start(&H, NULL,
		 "index: {keyword: {enabled: true, snapshot: false}}\n"
		 "apps:\n"
		 "  '*': {working_memory: {strategy: all}}\n"
		 "  r: {working_memory: {strategy: buffer_window, max_messages: 2, recall: {k: 3}}}\n");
}

static void teardown(void)
{
	hs_finish(&H);
}

TestSuite(http_recall, .init = setup, .fini = teardown, .timeout = 60);

static void put(const char *sid, const char *role, const char *text)
{
	char path[256];
	json_t *b = json_pack("{s:[{s:s,s:s}]}", "events", "role", role, "content", text), *r;
	char *body = json_dumps(b, JSON_COMPACT);

	snprintf(path, sizeof(path), BASE "/sessions");
	json_decref(b);
	{
		char sb[128];
		hs_resp resp;
		snprintf(sb, sizeof(sb), "{\"id\":\"%s\"}", sid);
		hs_json(&H, "POST", path, sb, &resp);
		cr_assert(resp.status == 201 || resp.status == 409, "%ld %s", resp.status, resp.body);
		hs_resp_clear(&resp);
	}
	snprintf(path, sizeof(path), BASE "/sessions/%s/events", sid);
	r = hs_expect(&H, "POST", path, body, 200);
	json_decref(r);
	free(body);
}

static void history(void)
{
	put("old", "user", "My dog Biscuit loves running on the beach at dawn.");
	put("old", "user", "The car needs new winter tyres before December.");
	put("now", "user", "Biscuit chewed my slippers this morning.");
	put("now", "assistant", "Puppies chew when they are bored.");
	put("now", "user", "Where does Biscuit like to run?");
}

static const char *first_text(json_t *ctx)
{
	json_t *items = json_object_get(json_object_get(ctx, "memories"), "items");
	cr_assert_geq(json_array_size(items), 1, "%s", json_dumps(ctx, 0));
	return json_string_value(json_object_get(json_array_get(items, 0), "text"));
}

Test(http_recall, context_recalls_for_the_latest_user_message_and_for_query)
{
	json_t *c;

	history();
	c = hs_expect(&H, "GET", CTX, NULL, 200);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(c, "memories"), "query")),
			 "Where does Biscuit like to run?");
	cr_assert_str_eq(first_text(c), "My dog Biscuit loves running on the beach at dawn.");
	json_decref(c);
	c = hs_expect(&H, "GET", CTX "?query=winter%20tyres", NULL, 200);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(c, "memories"), "query")),
			 "winter tyres");
	cr_assert_str_eq(first_text(c), "The car needs new winter tyres before December.");
	json_decref(c);
}

Test(http_recall, openai_format_has_the_recall_as_the_first_system_message)
{
	json_t *o, *first;

	history();
	o = hs_expect(&H, "GET", CTX "?format=openai&query=tyres", NULL, 200);
	first = json_array_get(json_object_get(o, "messages"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(first, "role")), "system");
	cr_assert(strstr(json_string_value(json_object_get(first, "content")),
			 "The car needs new winter tyres before December."),
		  "%s", json_dumps(o, 0));
	json_decref(o);
}
