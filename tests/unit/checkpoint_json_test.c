/* SPDX-License-Identifier: MIT */
/*
 * checkpoint_json's writer (cj_checkpoint_out, cj_write_out) against the
 * objects the API describes, built here with jansson from the same records
 * and dumped with json_dumps(JSON_COMPACT): byte for byte when the stored
 * metadata is jansson's own compact dump (what memd stores) or not an
 * object, json_equal for any other object text; a string that is not
 * UTF-8 is refused.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "json/checkpoint_json.h"
#include "json/event_json.h"
#include "util/base64.h"

#define PAYLOAD_MAX 300
#define WRITES_MAX 3
#define DEEP 70 /* metadata nesting past the scan's own limit */

static json_t *time_json(int64_t us)
{
	char buf[EJ_TIME_LEN];

	ej_format_time(us, buf);
	return json_string(buf);
}

static json_t *bytes_json(const void *p, uint64_t n)
{
	size_t len = 0;
	char *text = b64_encode(p, (size_t)n, B64_STD, &len);
	json_t *v;

	cr_assert_not_null(text);
	v = json_stringn(text, len);
	free(text);
	return v;
}

/* The summary (full: the tuple) of c with the writes ws and their task
 * paths, as the API describes it. */
static char *expected(const memd_checkpoint *c, int full, const memd_checkpoint_write *ws,
		      const char *const *paths, size_t n)
{
	json_t *meta = c->metadata_json ? json_loads(c->metadata_json, 0, NULL) : NULL;
	const char *state = cj_run_state_name(c->run_state);
	json_t *o, *writes;
	char *text;

	if (!meta || !json_is_object(meta)) {
		json_decref(meta);
		meta = json_object();
	}
	o = json_pack("{s:s,s:s,s:s,s:s?,s:s,s:o,s:s,s:o,s:o,s:o,s:I}", "session_id", c->session,
		      "checkpoint_ns", c->ns ? c->ns : "", "checkpoint_id", c->id,
		      "parent_checkpoint_id", c->parent_id, "type", c->type ? c->type : "",
		      "metadata", meta, "run_state", state ? state : "running", "created",
		      time_json(c->created_us), "updated", time_json(c->updated_us), "expires_at",
		      c->expires_us ? time_json(c->expires_us) : json_null(), "size",
		      (json_int_t)c->payload_size);
	cr_assert_not_null(o);
	if (full) {
		cr_assert_eq(json_object_set_new(o, "checkpoint",
						 bytes_json(c->payload, c->payload_size)), 0);
		cr_assert_not_null(writes = json_array());
		for (size_t i = 0; i < n; i++) {
			const memd_checkpoint_write *w = &ws[i];
			json_t *x = json_pack("{s:s,s:s,s:I,s:s,s:s,s:o}", "task_id", w->task_id,
					      "task_path", paths[i] ? paths[i] : "", "idx",
					      (json_int_t)w->idx, "channel",
					      w->channel ? w->channel : "", "type",
					      w->type ? w->type : "", "value",
					      bytes_json(w->value, w->value_size));
			cr_assert_eq(json_array_append_new(writes, x), 0);
		}
		cr_assert_eq(json_object_set_new(o, "pending_writes", writes), 0);
	}
	text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	cr_assert_not_null(text);
	return text;
}

/* The same through the direct writer. */
static char *direct(const memd_checkpoint *c, int full, const memd_checkpoint_write *ws,
		    const char *const *paths, size_t n)
{
	json_out jo;
	char *text = NULL;

	jo_init(&jo);
	cj_checkpoint_out(&jo, c, full);
	for (size_t i = 0; full && i < n; i++) {
		if (i)
			jo_lit(&jo, ",");
		cj_write_out(&jo, &ws[i], paths[i]);
	}
	if (full)
		jo_lit(&jo, "]}");
	cr_assert_eq(jo_finish(&jo, &text, NULL), 0);
	return text;
}

static void same(const memd_checkpoint *c, const memd_checkpoint_write *ws,
		 const char *const *paths, size_t n, int bytes)
{
	for (int full = 0; full <= 1; full++) {
		char *a = expected(c, full, ws, paths, n), *b = direct(c, full, ws, paths, n);
		json_t *ja = json_loads(a, 0, NULL), *jb = json_loads(b, 0, NULL);
		cr_assert_not_null(jb, "not JSON: %s", b);
		cr_assert(json_equal(ja, jb), "%s\n!=\n%s", a, b);
		if (bytes)
			cr_assert_str_eq(b, a);
		json_decref(ja);
		json_decref(jb);
		free(a);
		free(b);
	}
}

Test(checkpoint_json, writes_the_objects_the_api_describes)
{
	static const struct {
		const char *metadata;
		int bytes; /* the jansson answer is byte for byte the same */
	} metas[] = {
		{ NULL, 1 },
		{ "{}", 1 },
		{ "{\"source\":\"loop\",\"step\":3,\"parents\":{},\"w\":[1,2.5,null,true]}", 1 },
		{ "{\"t\":\"\\u00e9\\n\\\"x\\\"\",\"u\":\"\xc3\xa9\"}", 0 },
		{ " { \"a\" : 1 } ", 0 },
		{ "[1,2]", 1 },
		{ "\"text\"", 1 },
		{ "not json", 1 },
		{ "{\"a\":", 1 },
	};
	unsigned char payload[PAYLOAD_MAX];
	memd_checkpoint_write ws[WRITES_MAX] = {
		{ .struct_size = sizeof(ws[0]), .task_id = "t1", .idx = 0, .channel = "messages",
		  .type = "json", .value = "{\"a\":1}", .value_size = 7 },
		{ .struct_size = sizeof(ws[0]), .task_id = "t1", .idx = -1, .channel = NULL,
		  .type = NULL, .value = "", .value_size = 0 },
		{ .struct_size = sizeof(ws[0]), .task_id = "t\xc3\xa9\"2", .idx = 7,
		  .channel = "branch:to:\n", .type = "msgpack", .value = "\0\1\2", .value_size = 3 },
	};
	/* LangGraph's task paths; NULL is written as "". */
	static const char *const paths[WRITES_MAX] = { "~__pregel_pull, agent", NULL,
						       "~__pregel_push, 0000000002, \"x\\" };

	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (unsigned char)(i * 7 + 3);
	for (size_t k = 0; k < sizeof(metas) / sizeof(metas[0]); k++) {
		for (size_t size = 0; size <= 4; size++) {
			memd_checkpoint c = {
				.struct_size = sizeof(c), .app = "a", .user = "u", .session = "s\"1",
				.ns = k % 2 ? "" : "sub:graph", .id = "1ef4f797-8335-6428-8001-8a1503f9b875",
				.parent_id = k % 3 ? "1ef4f797-8335-6428-8000-8a1503f9b875" : NULL,
				.type = k % 4 ? "json" : NULL, .payload = payload,
				.payload_size = size == 4 ? PAYLOAD_MAX : size,
				.metadata_json = metas[k].metadata, .run_state = (uint32_t)(k % 5),
				.created_us = 1700000000123456LL, .updated_us = 1700000001000001LL,
				.expires_us = k % 2 ? 0 : 1800000000000000LL,
			};
			same(&c, ws, paths, size % (WRITES_MAX + 1), metas[k].bytes);
		}
	}
}

Test(checkpoint_json, refuses_a_string_that_is_not_utf8)
{
	memd_checkpoint c = { .struct_size = sizeof(c), .session = "s", .ns = "", .id = "bad\xff",
			      .type = "json", .payload = "", .metadata_json = "{}" };
	json_out jo;
	char *text = NULL;

	jo_init(&jo);
	cr_assert_eq(cj_checkpoint_out(&jo, &c, 0), MEMD_EINVAL);
	cr_assert_eq(jo_finish(&jo, &text, NULL), MEMD_EINVAL);
	cr_assert_null(text);
}

/* span equals the JSON member key of o (a string, or an object's compact
 * dump for metadata); absent or null: p NULL. */
static void span_is(const cj_span *span, json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	if (!v || json_is_null(v)) {
		cr_assert_null(span->p, "%s: not absent", key);
		return;
	}
	cr_assert_not_null(span->p, "%s: absent", key);
	if (json_is_string(v)) {
		cr_assert_eq(span->len, json_string_length(v), "%s", key);
		cr_assert(memcmp(span->p, json_string_value(v), span->len) == 0, "%s", key);
	} else {
		json_t *w = json_loadb(span->p, span->len, 0, NULL);
		cr_assert(json_equal(v, w), "%s: %.*s", key, (int)span->len, span->p);
		json_decref(w);
	}
}

Test(checkpoint_json, put_scan_reads_the_usual_bodies_as_jansson_does)
{
	static const char *const bodies[] = {
		"{\"type\":\"json\",\"checkpoint\":\"eyJhIjoxfQ==\"}",
		" {\n\t\"parent_checkpoint_id\" : \"1ef-1\" , \"type\":\"json\",\"checkpoint\":\"\","
		"\"metadata\":{\"source\":\"loop\",\"step\":-1,\"parents\":{},\"x\":[1,{\"y\":null}]},"
		"\"run_state\":\"interrupted\"}\r\n",
		"{\"checkpoint\":\"QQ==\",\"metadata\":null,\"run_state\":null,"
		"\"parent_checkpoint_id\":null,\"type\":\"t\xc3\xa9\"}",
		"{\"type\":\"json\",\"checkpoint\":\"QQ==\",\"metadata\":{\"a\":\"}\\\"{[\",\"b\":\"\\\\\"}}",
		"{\"type\":\"not base64!\",\"checkpoint\":\"%%%\",\"run_state\":\"sleeping\"}",
	};

	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		cj_put_body b;
		json_t *o = json_loads(bodies[i], JSON_REJECT_DUPLICATES, NULL);
		cr_assert_not_null(o, "%s", bodies[i]);
		cr_assert_eq(cj_put_scan(bodies[i], &b), 1, "%s", bodies[i]);
		span_is(&b.parent_checkpoint_id, o, "parent_checkpoint_id");
		span_is(&b.type, o, "type");
		span_is(&b.checkpoint, o, "checkpoint");
		span_is(&b.metadata, o, "metadata");
		span_is(&b.run_state, o, "run_state");
		json_decref(o);
	}
}

Test(checkpoint_json, put_scan_leaves_every_other_body_to_jansson)
{
	static const char *const bodies[] = {
		NULL, "", "   ", "{", "{}", "[]", "null",
		"{\"type\":\"json\"}",                                   /* no checkpoint */
		"{\"checkpoint\":\"QQ==\"}",                             /* no type */
		"{\"type\":null,\"checkpoint\":\"QQ==\"}",
		"{\"type\":\"json\",\"checkpoint\":null}",
		"{\"type\":\"json\",\"checkpoint\":\"QQ==\",}",
		"{\"type\":\"json\",\"checkpoint\":\"QQ==\"} x",
		"{\"type\":\"json\",\"checkpoint\":\"QQ==\"}{}",
		"{\"type\":\"json\",\"type\":\"json\",\"checkpoint\":\"QQ==\"}",
		"{\"type\":\"json\",\"checkpoint\":\"QQ==\",\"extra\":1}",
		"{\"type\":\"js\\u006fn\",\"checkpoint\":\"QQ==\"}",       /* an escape */
		"{\"type\":\"js\\non\",\"checkpoint\":\"QQ==\"}",
		"{\"type\":\"js\ton\",\"checkpoint\":\"QQ==\"}",          /* a control character */
		"{\"type\":\"\xff\",\"checkpoint\":\"QQ==\"}",            /* not UTF-8 */
		"{\"type\":\"\xff\"null,\"checkpoint\":\"QQ==\"}",
		"{\"parent_checkpoint_id\":\"\xff\"null,\"type\":\"j\",\"checkpoint\":\"QQ==\"}",
		"{\"type\":\"json\",\"checkpoint\":\"QQ==\",\"parent_checkpoint_id\":7}",
		"{\"type\":\"json\",\"checkpoint\":\"QQ==\",\"parent_checkpoint_id\":nul}",
		"{\"type\":\"json\",\"checkpoint\":\"QQ==\",\"run_state\":true}",
		"{\"type\":\"json\",\"checkpoint\":\"QQ==\",\"metadata\":[1]}",
		"{\"type\":\"json\",\"checkpoint\":\"QQ==\",\"metadata\":\"{}\"}",
		"{\"type\":\"json\",\"checkpoint\":\"QQ==\",\"metadata\":{\"a\":1}",
		"{\"type\":\"json\",\"checkpoint\":\"QQ==\",\"metadata\":{\"a\":\"\\",
		"{\"type\":\"json\" \"checkpoint\":\"QQ==\"}",
		"{\"type\" \"json\",\"checkpoint\":\"QQ==\"}",
		"{type:\"json\",\"checkpoint\":\"QQ==\"}",
		"{\"type\":\"json\",\"checkpoint\":\"QQ==",
	};
	char deep[1024];
	size_t n = 0;

	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		cj_put_body b;
		cr_assert_eq(cj_put_scan(bodies[i], &b), 0, "%s", bodies[i] ? bodies[i] : "(null)");
	}
	/* Metadata nested deeper than the scan reads itself. */
	n += (size_t)snprintf(deep, sizeof(deep), "{\"type\":\"j\",\"checkpoint\":\"\",\"metadata\":");
	for (int d = 0; d < DEEP; d++)
		n += (size_t)snprintf(deep + n, sizeof(deep) - n, "{\"a\":");
	deep[n++] = '1';
	for (int d = 0; d <= DEEP; d++)
		deep[n++] = '}';
	deep[n] = '\0';
	{
		json_t *o = json_loads(deep, 0, NULL);
		cr_assert_not_null(o);
		json_decref(o);
	}
	{
		cj_put_body b;
		cr_assert_eq(cj_put_scan(deep, &b), 0);
	}
}
