/* SPDX-License-Identifier: MIT */
/*
 * Long-term memories through the libmemd facade (memd.h "long-term
 * memories"), each test once over the memory store and once over sqlite:
 * create with its defaults and every validation error (nothing stored),
 * uuid v7 ids, dedupe of topics and entities, sources that must exist,
 * updates with versions (ECONFLICT), deletes, the history with actors and
 * reasons, expiry by a driven clock (invisible at once, deleted by the
 * lane watcher's pass), client-made id retries, list pages and filters,
 * users and apps kept apart, user delete; and a store of ABI 1.1 answering
 * MEMD_ENOTSUP naming it.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memd/memd.h>

#include "service/service_int.h"
#include "test_util.h"

#define US_PER_S 1000000LL
/* 2026-11-20T02:00:00Z */
#define T0 1795140000000000LL
#define T0_TEXT "2026-11-20T02:00:00.000000Z"

static tu_dir dir;
static memd *m;
static _Atomic int64_t now_us = T0;

/* Open memd over plugin in a new directory, the facade clock at T0. */
static void open_store(const char *plugin)
{
	atomic_store(&now_us, T0);
	m = tu_open_store(&dir, plugin, NULL, &now_us);
}

static void setup_memory(void)
{
	open_store("memory");
}

static void setup_sqlite(void)
{
	open_store("sqlite");
}

static void teardown(void)
{
	tu_close_store(m, &dir);
}

TestSuite(facade_memories_memory, .init = setup_memory, .fini = teardown);
TestSuite(facade_memories_sqlite, .init = setup_sqlite, .fini = teardown);

/* Each test body runs in both suites. */
#define BOTH(name)                                                  \
	static void name(void);                                     \
	Test(facade_memories_memory, name) { name(); }              \
	Test(facade_memories_sqlite, name) { name(); }              \
	static void name(void)

/* ---- helpers ------------------------------------------------------------ */

static json_t *ok_json(int32_t r, const memd_error *err, char **out)
{
	char *text = *out;
	cr_assert_eq(r, 0, "failed (%d): %s", (int)r, err->msg);
	*out = NULL;
	return tu_json(text);
}

static json_t *create_as(const char *app, const char *user, const char *body, int *ret_created)
{
	memd_error err = { 0 };
	char *out = NULL;
	return ok_json(memd_memory_create(m, app, user, body, &out, ret_created, &err), &err, &out);
}

static json_t *create(const char *body)
{
	return create_as("a", "u", body, NULL);
}

static const char *s(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	cr_assert(json_is_string(v), "%s is not a string", key);
	return json_string_value(v);
}

static long long n(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	cr_assert(json_is_integer(v), "%s is not an integer", key);
	return (long long)json_integer_value(v);
}

static void expect_json(json_t *v, const char *text)
{
	json_t *want = json_loads(text, JSON_DECODE_ANY, NULL);
	char *got = json_dumps(v, JSON_COMPACT);
	cr_assert_not_null(want, "bad expectation %s", text);
	cr_assert(json_equal(v, want), "got %s, want %s", got, text);
	free(got);
	json_decref(want);
}

static void expect_err(int32_t r, const memd_error *err, int32_t code, const char *msg)
{
	cr_assert_eq(r, code, "got %d (%s), want %d", (int)r, err->msg, (int)code);
	cr_assert_not_null(strstr(err->msg, msg), "message '%s' lacks '%s'", err->msg, msg);
}

static json_t *get_as(const char *app, const char *user, const char *id)
{
	memd_error err = { 0 };
	char *out = NULL;
	return ok_json(memd_memory_get(m, app, user, id, &out, &err), &err, &out);
}

static int32_t get_code(const char *app, const char *user, const char *id)
{
	memd_error err = { 0 };
	char *out = NULL;
	int32_t r = memd_memory_get(m, app, user, id, &out, &err);
	memd_free(out);
	return r;
}

static json_t *list(const memd_memory_list_options *o)
{
	memd_error err = { 0 };
	char *out = NULL;
	return ok_json(memd_memory_list(m, "a", "u", o, &out, &err), &err, &out);
}

static size_t list_count(const char *app, const char *user)
{
	memd_error err = { 0 };
	char *out = NULL;
	json_t *l = ok_json(memd_memory_list(m, app, user, NULL, &out, &err), &err, &out);
	size_t k = json_array_size(json_object_get(l, "memories"));
	json_decref(l);
	return k;
}

static json_t *update(const char *id, const char *body)
{
	memd_error err = { 0 };
	char *out = NULL;
	return ok_json(memd_memory_update(m, "a", "u", id, body, &out, &err), &err, &out);
}

static json_t *history(const char *app, const char *user, const char *id)
{
	memd_error err = { 0 };
	char *out = NULL;
	return ok_json(memd_memory_history(m, app, user, id, &out, &err), &err, &out);
}

static void session(const char *sid)
{
	memd_error err = { 0 };
	char body[128], *out = NULL;
	snprintf(body, sizeof(body), "{\"id\": \"%s\"}", sid);
	tu_ok(memd_session_create(m, "a", "u", body, &out, &err), &err, &out);
}

/* ---- create ------------------------------------------------------------- */

BOTH(create_with_defaults_and_get)
{
	int created = -1;
	json_t *mem = create_as("a", "u", "{\"text\": \"prefers window seats\"}", &created);
	const char *id = s(mem, "id");
	json_t *got;

	cr_assert_eq(created, 1);
	cr_assert_eq(strlen(id), 36, "a uuid: %s", id);
	cr_assert_eq(id[14], '7', "a uuid v7: %s", id);
	cr_assert_str_eq(s(mem, "text"), "prefers window seats");
	cr_assert_str_eq(s(mem, "kind"), "fact");
	expect_json(json_object_get(mem, "topics"), "[]");
	expect_json(json_object_get(mem, "entities"), "[]");
	cr_assert(json_is_null(json_object_get(mem, "source")));
	cr_assert(json_is_null(json_object_get(mem, "expires_at")));
	cr_assert_str_eq(s(mem, "created"), T0_TEXT);
	cr_assert_str_eq(s(mem, "updated"), T0_TEXT);
	cr_assert_eq(n(mem, "version"), 1);
	got = get_as("a", "u", id);
	cr_assert(json_equal(got, mem));
	json_decref(got);
	json_decref(mem);
}

BOTH(create_dedupes_tags_and_keeps_the_source)
{
	json_t *mem;

	session("s1");
	mem = create("{\"text\": \"allergic to nuts\", \"kind\": \"preference\", "
		     "\"topics\": [\"food\", \"health\", \"food\"], "
		     "\"entities\": [\"nuts\", \"nuts\"], "
		     "\"source\": {\"session_id\": \"s1\", \"seqs\": [1, 2]}}");
	cr_assert_str_eq(s(mem, "kind"), "preference");
	expect_json(json_object_get(mem, "topics"), "[\"food\", \"health\"]");
	expect_json(json_object_get(mem, "entities"), "[\"nuts\"]");
	expect_json(json_object_get(mem, "source"), "{\"session_id\": \"s1\", \"seqs\": [1, 2]}");
	json_decref(mem);
	mem = create("{\"text\": \"x\", \"source\": {\"session_id\": \"s1\"}}");
	expect_json(json_object_get(mem, "source"), "{\"session_id\": \"s1\", \"seqs\": []}");
	json_decref(mem);
}

BOTH(create_refuses_bad_bodies_and_stores_nothing)
{
	static const struct {
		const char *body;
		const char *msg;
	} bad[] = {
		{ "{}", "text: required" },
		{ "[]", "object" },
		{ "{\"text\": \"\"}", "text: must be 1..8192 bytes" },
		{ "{\"text\": 5}", "text: must be a string" },
		{ "{\"text\": \"x\", \"kind\": \"opinion\"}",
		  "kind: must be fact, preference, instruction or episode" },
		{ "{\"text\": \"x\", \"topics\": \"food\"}", "topics: must be an array of strings" },
		{ "{\"text\": \"x\", \"topics\": [\"\"]}", "topics[0]: must be 1..255 bytes" },
		{ "{\"text\": \"x\", \"topics\": [\"a\", 1]}", "topics[1]: must be a string" },
		{ "{\"text\": \"x\", \"entities\": [\"a\\nb\"]}", "entities[0]: has a control character" },
		{ "{\"text\": \"x\", \"source\": {}}", "source.session_id: required" },
		{ "{\"text\": \"x\", \"source\": {\"session_id\": \"nope\"}}",
		  "source.session_id: session 'nope' not found" },
		{ "{\"text\": \"x\", \"source\": {\"session_id\": \"s1\", \"seqs\": [0]}}",
		  "source.seqs[0]: must be an integer >= 1" },
		{ "{\"text\": \"x\", \"source\": {\"session_id\": \"s1\", \"why\": 1}}",
		  "source: unknown field 'why'" },
		{ "{\"text\": \"x\", \"source\": \"s1\"}", "source: must be an object" },
		{ "{\"text\": \"x\", \"expires_at\": \"2030-01-01T00:00:00Z\", \"ttl_seconds\": 5}",
		  "give one of them, not both" },
		{ "{\"text\": \"x\", \"ttl_seconds\": 0}", "ttl_seconds: must be an integer 1.." },
		{ "{\"text\": \"x\", \"ttl_seconds\": \"5\"}", "ttl_seconds: must be an integer 1.." },
		{ "{\"text\": \"x\", \"expires_at\": \"tomorrow\"}", "expires_at: must be an RFC 3339" },
		{ "{\"text\": \"x\", \"expires_at\": \"2020-01-01T00:00:00Z\"}",
		  "expires_at: must be in the future" },
		{ "{\"text\": \"x\", \"expires_at\": null}", "expires_at: must not be null" },
		{ "{\"text\": \"x\", \"id\": \"a/b\"}", "id:" },
		{ "{\"text\": \"x\", \"color\": \"red\"}", "unknown field 'color'" },
	};
	memd_error err = { 0 };
	char *out = NULL, *big, *body;

	session("s1");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int32_t r = memd_memory_create(m, "a", "u", bad[i].body, &out, NULL, &err);
		cr_assert_null(out);
		expect_err(r, &err, MEMD_EINVAL, bad[i].msg);
	}
	/* Too long a text, too many topics. */
	big = malloc(MEMD_MEMORY_TEXT_MAX + 2);
	memset(big, 'a', MEMD_MEMORY_TEXT_MAX + 1);
	big[MEMD_MEMORY_TEXT_MAX + 1] = '\0';
	body = malloc(MEMD_MEMORY_TEXT_MAX + 64);
	snprintf(body, MEMD_MEMORY_TEXT_MAX + 64, "{\"text\": \"%s\"}", big);
	expect_err(memd_memory_create(m, "a", "u", body, &out, NULL, &err), &err, MEMD_EINVAL,
		   "text: must be 1..8192 bytes (is 8193)");
	big[MEMD_MEMORY_TEXT_MAX] = '\0';
	snprintf(body, MEMD_MEMORY_TEXT_MAX + 64, "{\"text\": \"%s\"}", big);
	json_decref(create(body)); /* exactly the limit is fine */
	strcpy(body, "{\"text\": \"x\", \"topics\": [");
	for (int i = 0; i <= MEMD_MEMORY_TAGS_MAX; i++)
		sprintf(body + strlen(body), "%s\"t%d\"", i ? ", " : "", i);
	strcat(body, "]}");
	expect_err(memd_memory_create(m, "a", "u", body, &out, NULL, &err), &err, MEMD_EINVAL,
		   "topics: at most 32");
	expect_err(memd_memory_create(m, "a/b", "u", "{\"text\": \"x\"}", &out, NULL, &err), &err,
		   MEMD_EINVAL, "app");
	free(big);
	free(body);
	cr_assert_eq(list_count("a", "u"), 1, "only the valid one was stored");
}

BOTH(client_made_id_retries)
{
	int created = -1;
	memd_error err = { 0 };
	char *out = NULL;
	json_t *first = create_as("a", "u",
				  "{\"id\": \"m1\", \"text\": \"call me Sam\", \"topics\": [\"name\"], "
				  "\"ttl_seconds\": 600}",
				  &created);
	json_t *again;

	cr_assert_eq(created, 1);
	cr_assert_str_eq(s(first, "id"), "m1");
	atomic_fetch_add(&now_us, 5 * US_PER_S);
	again = create_as("a", "u",
			  "{\"id\": \"m1\", \"text\": \"call me Sam\", \"topics\": [\"name\"], "
			  "\"ttl_seconds\": 600}",
			  &created);
	cr_assert_eq(created, 0, "a retry creates nothing");
	cr_assert(json_equal(first, again), "the retry answers the stored memory");
	expect_err(memd_memory_create(m, "a", "u", "{\"id\": \"m1\", \"text\": \"call me Max\"}",
				      &out, &created, &err),
		   &err, MEMD_ECONFLICT, "memory 'm1' exists with other content");
	expect_err(memd_memory_create(m, "a", "u",
				      "{\"id\": \"m1\", \"text\": \"call me Sam\", \"kind\": \"episode\", "
				      "\"topics\": [\"name\"]}",
				      &out, &created, &err),
		   &err, MEMD_ECONFLICT, "other content");
	cr_assert_eq(list_count("a", "u"), 1);
	/* Expired but not yet deleted: its id is still taken. */
	atomic_fetch_add(&now_us, 600 * US_PER_S);
	expect_err(memd_memory_create(m, "a", "u", "{\"id\": \"m1\", \"text\": \"call me Sam\", "
				      "\"topics\": [\"name\"]}",
				      &out, &created, &err),
		   &err, MEMD_ECONFLICT, "memory 'm1' exists, expired");
	json_decref(first);
	json_decref(again);
}

/* ---- update, delete, history ----------------------------------------------- */

BOTH(update_with_versions_and_delete)
{
	memd_error err = { 0 };
	char *out = NULL, id[64];
	json_t *mem = create("{\"text\": \"lives in Paris\", \"topics\": [\"home\"]}");
	json_t *up, *hobj, *h, *e;

	snprintf(id, sizeof(id), "%s", s(mem, "id"));
	atomic_fetch_add(&now_us, 10 * US_PER_S);
	up = update(id, "{\"text\": \"lives in Lyon\", \"reason\": \"moved\"}");
	cr_assert_eq(n(up, "version"), 2);
	cr_assert_str_eq(s(up, "text"), "lives in Lyon");
	cr_assert_str_eq(s(up, "created"), T0_TEXT);
	cr_assert_str_eq(s(up, "updated"), "2026-11-20T02:00:10.000000Z");
	expect_json(json_object_get(up, "topics"), "[\"home\"]");
	json_decref(up);

	expect_err(memd_memory_update(m, "a", "u", id, "{\"kind\": \"episode\", \"version\": 1}",
				      &out, &err),
		   &err, MEMD_ECONFLICT, "is at version 2, not 1");
	up = update(id, "{\"kind\": \"episode\", \"entities\": [\"Lyon\"], \"version\": 2}");
	cr_assert_eq(n(up, "version"), 3);
	cr_assert_str_eq(s(up, "kind"), "episode");
	expect_json(json_object_get(up, "entities"), "[\"Lyon\"]");
	json_decref(up);
	expect_err(memd_memory_update(m, "a", "u", id, "{\"reason\": \"why not\"}", &out, &err),
		   &err, MEMD_EINVAL, "nothing to change");
	expect_err(memd_memory_update(m, "a", "u", id, "{\"text\": \"\"}", &out, &err), &err,
		   MEMD_EINVAL, "text: must be 1..");
	expect_err(memd_memory_update(m, "a", "u", id, "{\"source\": {}}", &out, &err), &err,
		   MEMD_EINVAL, "unknown field 'source'");
	expect_err(memd_memory_update(m, "a", "u", id, "{\"text\": \"x\", \"version\": 0}", &out,
				      &err),
		   &err, MEMD_EINVAL, "version: must be an integer >= 1");
	expect_err(memd_memory_update(m, "a", "u", "nope", "{\"text\": \"x\"}", &out, &err), &err,
		   MEMD_ENOTFOUND, "nope");

	expect_err(memd_memory_delete(m, "a", "u", id, 2, &err), &err, MEMD_ECONFLICT,
		   "version 3");
	expect_err(memd_memory_delete(m, "a", "u", id, -1, &err), &err, MEMD_EINVAL, "version");
	atomic_fetch_add(&now_us, 10 * US_PER_S);
	cr_assert_eq(memd_memory_delete(m, "a", "u", id, 3, &err), 0, "%s", err.msg);
	cr_assert_eq(get_code("a", "u", id), MEMD_ENOTFOUND);
	expect_err(memd_memory_delete(m, "a", "u", id, 0, &err), &err, MEMD_ENOTFOUND, id);

	hobj = history("a", "u", id);
	h = json_object_get(hobj, "history");
	cr_assert_eq(json_array_size(h), 4);
	e = json_array_get(h, 0);
	cr_assert_str_eq(s(e, "op"), "add");
	cr_assert_str_eq(s(e, "actor"), "api");
	cr_assert(json_is_null(json_object_get(e, "reason")));
	cr_assert_eq(n(e, "version"), 1);
	cr_assert_str_eq(s(e, "at"), T0_TEXT);
	cr_assert_str_eq(s(json_object_get(e, "memory"), "text"), "lives in Paris");
	e = json_array_get(h, 1);
	cr_assert_str_eq(s(e, "op"), "update");
	cr_assert_str_eq(s(e, "reason"), "moved");
	cr_assert_str_eq(s(json_object_get(e, "memory"), "text"), "lives in Lyon");
	e = json_array_get(h, 3);
	cr_assert_str_eq(s(e, "op"), "delete");
	cr_assert_eq(n(e, "version"), 3, "a delete keeps the version it removed");
	cr_assert_str_eq(s(e, "at"), "2026-11-20T02:00:20.000000Z");
	json_decref(hobj);
	json_decref(mem);
	expect_err(memd_memory_history(m, "a", "u", "never", &out, &err), &err, MEMD_ENOTFOUND,
		   "never");
}

BOTH(actor_variants_are_recorded)
{
	memd_error err = { 0 };
	char *out = NULL;
	json_t *mem, *h;
	char id[64];

	cr_assert_eq(service_memory_create(m, "a", "u", "{\"text\": \"likes jazz\"}",
					   SERVICE_ACTOR_MCP, &out, NULL, &err),
		     0, "%s", err.msg);
	mem = tu_json(out);
	snprintf(id, sizeof(id), "%s", s(mem, "id"));
	cr_assert_eq(service_memory_update(m, "a", "u", id, "{\"text\": \"likes blues\"}",
					   SERVICE_ACTOR_EXTRACTOR, &out, &err),
		     0, "%s", err.msg);
	memd_free(out);
	cr_assert_eq(service_memory_delete(m, "a", "u", id, 0, SERVICE_ACTOR_MCP, "user asked",
					   &err),
		     0, "%s", err.msg);
	h = history("a", "u", id);
	expect_json(json_object_get(json_array_get(json_object_get(h, "history"), 0), "actor"),
		    "\"mcp\"");
	expect_json(json_object_get(json_array_get(json_object_get(h, "history"), 1), "actor"),
		    "\"extractor\"");
	expect_json(json_object_get(json_array_get(json_object_get(h, "history"), 2), "reason"),
		    "\"user asked\"");
	json_decref(h);
	json_decref(mem);
}

/* ---- expiry ------------------------------------------------------------- */

BOTH(expiry_by_the_facade_clock)
{
	memd_error err = { 0 };
	char *out = NULL, id[64], id2[64];
	json_t *mem = create("{\"text\": \"in Rome this week\", \"ttl_seconds\": 60}"), *sw, *h;
	json_t *keep = create("{\"text\": \"keeps\", \"expires_at\": \"2026-11-20T03:00:00Z\"}");
	json_t *got;

	snprintf(id, sizeof(id), "%s", s(mem, "id"));
	snprintf(id2, sizeof(id2), "%s", s(keep, "id"));
	cr_assert_str_eq(s(mem, "expires_at"), "2026-11-20T02:01:00.000000Z");
	cr_assert_str_eq(s(keep, "expires_at"), "2026-11-20T03:00:00.000000Z");
	/* Not yet: the sweep leaves both. */
	cr_assert_eq(memd_lanes_sweep(m, &out, &err), 0, "%s", err.msg);
	sw = tu_json(out);
	cr_assert_eq(n(sw, "memories_expired"), 0);
	json_decref(sw);

	atomic_store(&now_us, T0 + 60 * US_PER_S);
	cr_assert_eq(get_code("a", "u", id), MEMD_ENOTFOUND, "expired at its expires_at");
	cr_assert_eq(list_count("a", "u"), 1);
	expect_err(memd_memory_update(m, "a", "u", id, "{\"text\": \"x\"}", &out, &err), &err,
		   MEMD_ENOTFOUND, id);
	expect_err(memd_memory_delete(m, "a", "u", id, 0, &err), &err, MEMD_ENOTFOUND, id);

	/* An update can take an expiry away, or set another. */
	json_decref(update(id2, "{\"ttl_seconds\": null}"));
	got = get_as("a", "u", id2);
	cr_assert(json_is_null(json_object_get(got, "expires_at")));
	json_decref(got);

	cr_assert_eq(memd_lanes_sweep(m, &out, &err), 0, "%s", err.msg);
	sw = tu_json(out);
	cr_assert_eq(n(sw, "memories_expired"), 1);
	json_decref(sw);
	cr_assert_eq(memd_lanes_sweep(m, &out, &err), 0, "%s", err.msg);
	sw = tu_json(out);
	cr_assert_eq(n(sw, "memories_expired"), 0, "deleted once");
	json_decref(sw);

	h = history("a", "u", id);
	cr_assert_eq(json_array_size(json_object_get(h, "history")), 2);
	expect_json(json_object_get(json_array_get(json_object_get(h, "history"), 1), "op"),
		    "\"expire\"");
	expect_json(json_object_get(json_array_get(json_object_get(h, "history"), 1), "actor"),
		    "\"retention\"");
	json_decref(h);

	atomic_store(&now_us, T0 + 4000 * US_PER_S);
	cr_assert_eq(get_code("a", "u", id2), 0, "no expiry any more");
	json_decref(mem);
	json_decref(keep);
}

/* ---- list --------------------------------------------------------------- */

BOTH(list_pages_and_filters)
{
	memd_memory_list_options o = { .struct_size = sizeof(o), .limit = 2 };
	memd_error err = { 0 };
	char *out = NULL, body[256], cursor[256];
	json_t *page, *arr;
	int seen = 0;

	session("s1");
	for (int i = 0; i < 5; i++) {
		snprintf(body, sizeof(body),
			 "{\"id\": \"m%d\", \"text\": \"memory %d\", \"kind\": \"%s\", "
			 "\"topics\": [\"t%d\"], \"entities\": [\"e\"]%s}",
			 i, i, i % 2 ? "preference" : "fact", i % 3,
			 i == 4 ? ", \"source\": {\"session_id\": \"s1\"}" : "");
		json_decref(create(body));
		atomic_fetch_add(&now_us, US_PER_S);
	}
	/* Newest first, two a page, until no cursor. */
	for (;;) {
		page = list(&o);
		arr = json_object_get(page, "memories");
		for (size_t i = 0; i < json_array_size(arr); i++) {
			char want[16];
			snprintf(want, sizeof(want), "m%d", 4 - seen);
			cr_assert_str_eq(s(json_array_get(arr, i), "id"), want);
			seen++;
		}
		if (json_is_null(json_object_get(page, "next_cursor"))) {
			json_decref(page);
			break;
		}
		snprintf(cursor, sizeof(cursor), "%s", s(page, "next_cursor"));
		o.cursor = cursor;
		json_decref(page);
	}
	cr_assert_eq(seen, 5);

	o = (memd_memory_list_options){ .struct_size = sizeof(o), .kind = "preference" };
	page = list(&o);
	cr_assert_eq(json_array_size(json_object_get(page, "memories")), 2);
	json_decref(page);
	o = (memd_memory_list_options){ .struct_size = sizeof(o), .topic = "t1" };
	page = list(&o);
	arr = json_object_get(page, "memories");
	cr_assert_eq(json_array_size(arr), 2);
	cr_assert_str_eq(s(json_array_get(arr, 0), "id"), "m4");
	cr_assert_str_eq(s(json_array_get(arr, 1), "id"), "m1");
	json_decref(page);
	o = (memd_memory_list_options){ .struct_size = sizeof(o), .entity = "e", .kind = "fact" };
	page = list(&o);
	cr_assert_eq(json_array_size(json_object_get(page, "memories")), 3);
	json_decref(page);
	o = (memd_memory_list_options){ .struct_size = sizeof(o), .session_id = "s1" };
	page = list(&o);
	arr = json_object_get(page, "memories");
	cr_assert_eq(json_array_size(arr), 1);
	cr_assert_str_eq(s(json_array_get(arr, 0), "id"), "m4");
	json_decref(page);

	o = (memd_memory_list_options){ .struct_size = sizeof(o), .cursor = "garbage" };
	expect_err(memd_memory_list(m, "a", "u", &o, &out, &err), &err, MEMD_EINVAL, "cursor");
	o = (memd_memory_list_options){ .struct_size = sizeof(o), .limit = MEMD_LIST_LIMIT_MAX + 1 };
	expect_err(memd_memory_list(m, "a", "u", &o, &out, &err), &err, MEMD_EINVAL, "limit");
	o = (memd_memory_list_options){ .struct_size = sizeof(o), .kind = "opinion" };
	expect_err(memd_memory_list(m, "a", "u", &o, &out, &err), &err, MEMD_EINVAL, "kind");
	o = (memd_memory_list_options){ .struct_size = sizeof(o), .topic = "" };
	expect_err(memd_memory_list(m, "a", "u", &o, &out, &err), &err, MEMD_EINVAL, "topic");
}

/* ---- users -------------------------------------------------------------- */

BOTH(users_and_apps_are_kept_apart_and_user_delete_forgets)
{
	memd_error err = { 0 };
	char *out = NULL;
	json_t *mine = create_as("a", "u1", "{\"id\": \"m1\", \"text\": \"mine\"}", NULL);
	json_t *theirs = create_as("a", "u2", "{\"id\": \"m1\", \"text\": \"theirs\"}", NULL);
	json_t *other = create_as("b", "u1", "{\"id\": \"m1\", \"text\": \"other app\"}", NULL);
	json_t *got;

	cr_assert_eq(get_code("a", "u3", "m1"), MEMD_ENOTFOUND);
	got = get_as("a", "u2", "m1");
	cr_assert_str_eq(s(got, "text"), "theirs");
	json_decref(got);
	cr_assert_eq(list_count("a", "u3"), 0);
	expect_err(memd_memory_update(m, "a", "u3", "m1", "{\"text\": \"x\"}", &out, &err), &err,
		   MEMD_ENOTFOUND, "m1");
	expect_err(memd_memory_delete(m, "a", "u3", "m1", 0, &err), &err, MEMD_ENOTFOUND, "m1");
	expect_err(memd_memory_history(m, "a", "u3", "m1", &out, &err), &err, MEMD_ENOTFOUND,
		   "m1");

	cr_assert_eq(memd_user_delete(m, "a", "u1", &err), 0, "%s", err.msg);
	cr_assert_eq(get_code("a", "u1", "m1"), MEMD_ENOTFOUND);
	expect_err(memd_memory_history(m, "a", "u1", "m1", &out, &err), &err, MEMD_ENOTFOUND,
		   "m1");
	cr_assert_eq(list_count("a", "u1"), 0);
	cr_assert_eq(get_code("a", "u2", "m1"), 0, "another user's stays");
	cr_assert_eq(get_code("b", "u1", "m1"), 0, "another app's stays");
	json_decref(mine);
	json_decref(theirs);
	json_decref(other);
}

/* ---- a store without memories ---------------------------------------------- */

Test(facade_memories_old_store, answers_enotsup_naming_the_store)
{
	char yaml[2 * TU_PATH_MAX];
	memd_error err = { 0 };
	char *out = NULL;
	const char *build = getenv("MEMD_BUILD_ROOT");

	cr_assert_not_null(build);
	tu_dir_make(&dir);
	snprintf(yaml, sizeof(yaml),
		 "plugins:\n  path: [%s/tests/fixtures]\nstores:\n  main: {plugin: old_store}\n",
		 build);
	m = tu_open(&dir, yaml);
	expect_err(memd_memory_create(m, "a", "u", "{\"text\": \"x\"}", &out, NULL, &err), &err,
		   MEMD_ENOTSUP, "stores.main: does not support memory_commit");
	expect_err(memd_memory_get(m, "a", "u", "m1", &out, &err), &err, MEMD_ENOTSUP,
		   "stores.main: does not support memory_get");
	expect_err(memd_memory_list(m, "a", "u", NULL, &out, &err), &err, MEMD_ENOTSUP,
		   "stores.main: does not support memory_list");
	expect_err(memd_memory_update(m, "a", "u", "m1", "{\"text\": \"x\"}", &out, &err), &err,
		   MEMD_ENOTSUP, "stores.main: does not support memory_get");
	expect_err(memd_memory_delete(m, "a", "u", "m1", 0, &err), &err, MEMD_ENOTSUP,
		   "stores.main: does not support memory_commit");
	expect_err(memd_memory_history(m, "a", "u", "m1", &out, &err), &err, MEMD_ENOTSUP,
		   "stores.main: does not support memory_history");
	cr_assert_null(out);
	memd_close(m);
	tu_dir_remove(&dir);
}
