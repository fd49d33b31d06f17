/* SPDX-License-Identifier: MIT */
/*
 * The transcript operations of the libmemd facade (memd.h "transcripts")
 * over the real sqlite plugin: rewind by turns and to a seq (target text,
 * counts, the audit trail of hidden events), state restored from its
 * history (session keys as they were; app: and user: keys only where
 * nobody changed them since, the rest listed; temp: keys untouched),
 * clear, undo (and its conflicts), the operations list, the state history
 * in pages, event pages by role and with hidden events, session lists by
 * activity, and bad input that changes nothing.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memd/memd.h>

#include "test_util.h"

#define US_PER_S 1000000LL
/* 2026-11-20T02:00:00Z */
#define T0 1795140000000000LL

static tu_dir dir;
static memd *m;
static _Atomic int64_t now_us = T0;

static int64_t test_clock(void *userdata)
{
	(void)userdata;
	return atomic_load(&now_us);
}

static void setup(void)
{
	char yaml[TU_PATH_MAX + 256];

	atomic_store(&now_us, T0);
	tu_dir_make(&dir);
	snprintf(yaml, sizeof(yaml),
		 "stores:\n  main: {plugin: sqlite, path: %s/memd.db}\n"
		 "apps:\n  '*': {working_memory: {strategy: all}}\n",
		 dir.path);
	m = tu_open(&dir, yaml);
	memd_set_clock(m, test_clock, NULL);
}

static void teardown(void)
{
	memd_close(m);
	tu_dir_remove(&dir);
}

TestSuite(facade_transcripts, .init = setup, .fini = teardown);

/* ---- helpers ------------------------------------------------------------ */

static json_t *ok_json(int32_t r, const memd_error *err, char **out)
{
	char *text = *out;
	cr_assert_eq(r, 0, "failed (%d): %s", (int)r, err->msg);
	*out = NULL;
	return tu_json(text);
}

static json_t *get(json_t *o, const char *path)
{
	json_t *v = o;
	char buf[128];
	strncpy(buf, path, sizeof(buf) - 1);
	buf[sizeof(buf) - 1] = '\0';
	for (char *tok = strtok(buf, "."); tok && v; tok = strtok(NULL, "."))
		v = json_object_get(v, tok);
	return v;
}

static const char *str(json_t *o, const char *path)
{
	json_t *v = get(o, path);
	cr_assert(json_is_string(v), "%s is not a string", path);
	return json_string_value(v);
}

static json_int_t num(json_t *o, const char *path)
{
	json_t *v = get(o, path);
	cr_assert(json_is_integer(v), "%s is not an integer", path);
	return json_integer_value(v);
}

static void create(const char *user, const char *sid)
{
	memd_error err = { 0 };
	char body[256], *out = NULL;
	snprintf(body, sizeof(body), "{\"id\":\"%s\"}", sid);
	json_decref(ok_json(memd_session_create(m, "app", user, body, &out, &err), &err, &out));
}

/* Append one event of role with text, and the state delta (JSON object
 * text or NULL). */
static void say(const char *user, const char *sid, const char *role, const char *text,
		const char *delta)
{
	memd_error err = { 0 };
	char body[1024], *out = NULL;
	snprintf(body, sizeof(body), "{\"events\":[{\"role\":\"%s\",\"content\":\"%s\"}]%s%s}", role,
		 text, delta ? ",\"state_delta\":" : "", delta ? delta : "");
	json_decref(ok_json(memd_events_append(m, "app", user, sid, body, &out, &err), &err, &out));
}

static void set_state(const char *user, const char *sid, const char *delta)
{
	memd_error err = { 0 };
	char body[1024], *out = NULL;
	snprintf(body, sizeof(body), "{\"state_delta\":%s}", delta);
	json_decref(ok_json(memd_events_append(m, "app", user, sid, body, &out, &err), &err, &out));
}

static json_t *session(const char *user, const char *sid)
{
	memd_error err = { 0 };
	char *out = NULL;
	return ok_json(memd_session_get(m, "app", user, sid, NULL, &out, &err), &err, &out);
}

static json_t *state(const char *user, const char *sid)
{
	memd_error err = { 0 };
	char *out = NULL;
	return ok_json(memd_state_get(m, "app", user, sid, &out, &err), &err, &out);
}

static json_t *events(const char *sid, const char *roles, uint32_t flags)
{
	memd_error err = { 0 };
	char *out = NULL;
	return ok_json(memd_events_query(m, "app", "u", sid, 0, 0, roles, flags, &out, &err), &err,
		       &out);
}

static json_t *rewind_ok(const char *sid, const char *body)
{
	memd_error err = { 0 };
	char *out = NULL;
	return ok_json(memd_session_rewind(m, "app", "u", sid, body, &out, &err), &err, &out);
}

static int32_t rewind_fails(const char *sid, const char *body)
{
	memd_error err = { 0 };
	char *out = NULL;
	int32_t r = memd_session_rewind(m, "app", "u", sid, body, &out, &err);
	cr_assert_lt(r, 0, "rewind %s succeeded: %s", body, out ? out : "");
	cr_assert_null(out);
	cr_assert(err.msg[0], "no message");
	return r;
}

static json_t *undo(const char *sid, const char *op, const char *body, int32_t *ret_r)
{
	memd_error err = { 0 };
	char *out = NULL;
	int32_t r = memd_operation_undo(m, "app", "u", sid, op, body, &out, &err);
	if (ret_r) {
		*ret_r = r;
		if (r < 0) {
			cr_assert_null(out);
			return NULL;
		}
	}
	return ok_json(r, &err, &out);
}

static json_t *operations(const char *sid)
{
	memd_error err = { 0 };
	char *out = NULL;
	return ok_json(memd_operations_list(m, "app", "u", sid, &out, &err), &err, &out);
}

/* The seqs of a page's events, as "1,2,5". */
static const char *seqs(json_t *page, char *buf, size_t cap)
{
	json_t *e;
	size_t i, n = 0;
	buf[0] = '\0';
	json_array_foreach(json_object_get(page, "events"), i, e)
		n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? "," : "",
				      (long long)json_integer_value(json_object_get(e, "seq")));
	return buf;
}

/* The strings of array a are csv ("a,b"). */
static void assert_keys(json_t *a, const char *csv)
{
	char buf[256];
	json_t *k;
	size_t i, n = 0;
	cr_assert(json_is_array(a), "not an array");
	buf[0] = '\0';
	json_array_foreach(a, i, k)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s%s", i ? "," : "",
				      json_string_value(k));
	cr_assert_str_eq(buf, csv);
}

/* u1 a1 u2 a2 u3 a3: seqs 1..6. */
static void six(const char *sid)
{
	create("u", sid);
	say("u", sid, "user", "first question", NULL);
	say("u", sid, "assistant", "first answer", NULL);
	say("u", sid, "user", "second question", NULL);
	say("u", sid, "assistant", "second answer", NULL);
	say("u", sid, "user", "third question", NULL);
	say("u", sid, "assistant", "third answer", NULL);
}

/* ---- rewind --------------------------------------------------------------- */

Test(facade_transcripts, rewind_by_turns_hides_from_the_earliest_undone_user_turn)
{
	json_t *r, *s, *p, *e;
	char buf[64], op[128];

	six("s");
	r = rewind_ok("s", "{\"turns\":2}");
	cr_assert_eq(num(r, "rewound_count"), 4);
	cr_assert_eq(num(r, "turns_undone"), 2);
	cr_assert_str_eq(str(r, "target_text"), "second question");
	cr_assert_str_eq(str(r, "operation.kind"), "rewind");
	cr_assert_eq(num(r, "operation.hidden_count"), 4);
	cr_assert_eq(num(r, "version"), 7);
	cr_assert_eq(num(r, "operation.version"), 7);
	cr_assert(json_is_null(get(r, "operation.appended")));
	snprintf(op, sizeof(op), "%s", str(r, "operation.id"));

	p = events("s", NULL, 0);
	cr_assert_str_eq(seqs(p, buf, sizeof(buf)), "1,2");
	cr_assert_null(get(json_array_get(get(p, "events"), 0), "hidden"));
	json_decref(p);
	/* The audit trail: every event, the hidden ones marked. */
	p = events("s", NULL, MEMD_READ_INCLUDE_HIDDEN);
	cr_assert_str_eq(seqs(p, buf, sizeof(buf)), "1,2,3,4,5,6");
	e = json_array_get(get(p, "events"), 2);
	cr_assert_str_eq(str(e, "hidden.by"), op);
	cr_assert_str_eq(str(e, "hidden.kind"), "rewind");
	cr_assert(json_is_string(get(e, "hidden.at")));
	cr_assert_null(get(json_array_get(get(p, "events"), 1), "hidden"));
	json_decref(p);

	s = session("u", "s");
	cr_assert_eq(num(s, "message_count"), 2);
	cr_assert_eq(num(s, "version"), 7);
	cr_assert_str_eq(str(s, "last_activity"), str(s, "updated"));
	json_decref(s);
	/* The newest N events of a session read are its newest N visible. */
	{
		memd_error err = { 0 };
		char *out = NULL;
		memd_get_options o = { .struct_size = sizeof(o), .flags = MEMD_GET_EVENTS,
				       .events = 2 };
		s = ok_json(memd_session_get(m, "app", "u", "s", &o, &out, &err), &err, &out);
		cr_assert_str_eq(seqs(s, buf, sizeof(buf)), "1,2");
		json_decref(s);
	}
	/* Seqs are never reused. */
	say("u", "s", "user", "again", NULL);
	p = events("s", NULL, 0);
	cr_assert_str_eq(seqs(p, buf, sizeof(buf)), "1,2,7");
	json_decref(p);
	json_decref(r);
}

Test(facade_transcripts, rewind_counts_turns_over_visible_events_only)
{
	json_t *r, *p;
	char buf[64];

	six("s");
	json_decref(rewind_ok("s", "{\"turns\":1}")); /* hides 5, 6 */
	say("u", "s", "user", "fourth question", NULL); /* 7 */
	r = rewind_ok("s", "{\"turns\":2}");           /* the 2nd newest visible: seq 3 */
	cr_assert_str_eq(str(r, "target_text"), "second question");
	cr_assert_eq(num(r, "rewound_count"), 3); /* 3, 4, 7 */
	p = events("s", NULL, 0);
	cr_assert_str_eq(seqs(p, buf, sizeof(buf)), "1,2");
	json_decref(p);
	json_decref(r);
}

Test(facade_transcripts, rewind_to_seq)
{
	json_t *r, *p;
	char buf[64];

	six("s");
	r = rewind_ok("s", "{\"to_seq\":4}");
	cr_assert_eq(num(r, "rewound_count"), 3);
	cr_assert_eq(num(r, "turns_undone"), 1);
	cr_assert_str_eq(str(r, "target_text"), "third question");
	p = events("s", NULL, 0);
	cr_assert_str_eq(seqs(p, buf, sizeof(buf)), "1,2,3");
	json_decref(p);
	json_decref(r);
	/* Only assistant messages from there on: no user turn undone. */
	say("u", "s", "assistant", "late answer", NULL); /* 7 */
	r = rewind_ok("s", "{\"to_seq\":5}");
	cr_assert_eq(num(r, "rewound_count"), 1, "hidden events are not hidden again");
	cr_assert_eq(num(r, "turns_undone"), 0);
	cr_assert(json_is_null(get(r, "target_text")));
	json_decref(r);
}

/* Whatever a refused rewind was, the session is as it was. */
static void assert_untouched(const char *sid, json_int_t version, const char *visible)
{
	json_t *s = session("u", sid), *p = events(sid, NULL, 0), *ops = operations(sid);
	char buf[64];
	cr_assert_eq(num(s, "version"), version);
	cr_assert_str_eq(seqs(p, buf, sizeof(buf)), visible);
	cr_assert_eq(json_array_size(get(ops, "operations")), 0);
	json_decref(s);
	json_decref(p);
	json_decref(ops);
}

Test(facade_transcripts, rewind_of_more_turns_than_exist_changes_nothing)
{
	six("s");
	cr_assert_eq(rewind_fails("s", "{\"turns\":4}"), MEMD_EINVAL);
	assert_untouched("s", 6, "1,2,3,4,5,6");
}

Test(facade_transcripts, rewind_bad_input_changes_nothing)
{
	static const char *const bad[] = {
		"{}", "{\"turns\":1,\"to_seq\":2}", "{\"turns\":0}", "{\"turns\":-1}",
		"{\"turns\":\"1\"}", "{\"to_seq\":0}", "{\"to_seq\":7}", "{\"turns\":1,\"x\":1}",
		"{\"turns\":1,\"expected_version\":-1}", "[1]", "{\"turns\":1000000}",
	};
	six("s");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(rewind_fails("s", bad[i]), MEMD_EINVAL, "%s", bad[i]);
	cr_assert_eq(rewind_fails("nope", "{\"turns\":1}"), MEMD_ENOTFOUND);
	assert_untouched("s", 6, "1,2,3,4,5,6");
}

Test(facade_transcripts, rewind_with_a_stale_expected_version_conflicts)
{
	json_t *r;

	six("s");
	cr_assert_eq(rewind_fails("s", "{\"turns\":1,\"expected_version\":5}"), MEMD_ECONFLICT);
	assert_untouched("s", 6, "1,2,3,4,5,6");
	r = rewind_ok("s", "{\"turns\":1,\"expected_version\":6}");
	cr_assert_eq(num(r, "version"), 7);
	json_decref(r);
}

/* ---- state ---------------------------------------------------------------- */

Test(facade_transcripts, rewind_restores_session_state_and_unchanged_shared_keys)
{
	json_t *r, *st;

	create("u", "s");
	create("u", "other");
	say("u", "s", "user", "q1", "{\"mood\":\"calm\",\"app:theme\":\"light\"}");  /* 1 */
	say("u", "s", "assistant", "a1", NULL);                                     /* 2 */
	say("u", "s", "user", "q2",
	    "{\"mood\":\"angry\",\"topic\":\"x\",\"app:theme\":\"dark\",\"user:lang\":\"fr\","
	    "\"temp:scratch\":1}");                                                 /* 3 */
	say("u", "s", "assistant", "a2", "{\"mood\":\"sad\",\"user:tz\":\"CET\"}");   /* 4 */
	/* Another session writes user:lang since: not this session's to undo. */
	set_state("u", "other", "{\"user:lang\":\"de\"}");

	r = rewind_ok("s", "{\"turns\":1}");
	cr_assert_str_eq(str(r, "target_text"), "q2");
	st = state("u", "s");
	cr_assert_str_eq(str(st, "mood"), "calm");
	cr_assert_null(get(st, "topic"), "a key made by a hidden turn is gone");
	cr_assert_str_eq(str(st, "app:theme"), "light");
	cr_assert_null(get(st, "user:tz"));
	cr_assert_str_eq(str(st, "user:lang"), "de", "a shared key changed since stays");
	cr_assert_eq(num(st, "temp:scratch"), 1, "temp: keys are untouched");
	assert_keys(get(r, "state.not_restored"), "user:lang");
	assert_keys(get(r, "state.restored"), "app:theme,mood,topic,user:tz");
	json_decref(st);
	json_decref(r);
}

/* A rewind reads the state history a page at a time: a hidden turn that
 * changed more keys than two pages hold (the host reads 256 changes a
 * page) gets every one of them restored, the later pages read after the
 * keyset of the page before. */
Test(facade_transcripts, rewind_restores_state_changed_over_several_history_pages)
{
	enum { KEYS = 700, KEY_TEXT = 32 };
	size_t cap = (size_t)KEYS * KEY_TEXT + 256, n;
	char *body = malloc(cap), *out = NULL, key[KEY_TEXT];
	memd_error err = { 0 };
	json_t *r, *st;

	cr_assert_not_null(body);
	create("u", "s");
	say("u", "s", "user", "q1", "{\"k000\":\"kept\"}");  /* 1 */
	say("u", "s", "assistant", "a1", NULL);                /* 2 */
	n = (size_t)snprintf(body, cap, "{\"events\":[{\"role\":\"user\",\"content\":\"q2\"}],"
				      "\"state_delta\":{");
	for (int i = 0; i < KEYS; i++)
		n += (size_t)snprintf(body + n, cap - n, "%s\"k%03d\":%d", i ? "," : "", i, i);
	snprintf(body + n, cap - n, "}}");
	json_decref(ok_json(memd_events_append(m, "app", "u", "s", body, &out, &err), &err, &out));
	free(body);

	r = rewind_ok("s", "{\"turns\":1}");
	cr_assert_eq(json_array_size(get(r, "state.restored")), KEYS);
	st = state("u", "s");
	cr_assert_str_eq(str(st, "k000"), "kept");
	for (int i = 1; i < KEYS; i++) {
		snprintf(key, sizeof(key), "k%03d", i);
		cr_assert_null(get(st, key), "%s, made by the hidden turn, is still there", key);
	}
	cr_assert_eq(json_object_size(st), 1);
	json_decref(st);
	json_decref(r);
}

Test(facade_transcripts, undo_reverses_a_rewind_and_its_state)
{
	json_t *r, *u, *st, *p, *ops;
	char op[128], buf[64];

	six("s");
	set_state("u", "s", "{\"mood\":\"calm\",\"app:theme\":\"light\"}"); /* at seq 6 */
	say("u", "s", "user", "q4", "{\"mood\":\"angry\",\"app:theme\":\"dark\"}"); /* 7 */
	r = rewind_ok("s", "{\"turns\":1}");
	snprintf(op, sizeof(op), "%s", str(r, "operation.id"));
	st = state("u", "s");
	cr_assert_str_eq(str(st, "mood"), "calm");
	json_decref(st);

	u = undo("s", op, NULL, NULL);
	cr_assert_str_eq(str(u, "operation.kind"), "undo");
	cr_assert_str_eq(str(u, "operation.undo_of"), op);
	cr_assert_str_eq(str(u, "undone.undone_by"), str(u, "operation.id"));
	cr_assert_eq(num(u, "unhidden_count"), 1);
	cr_assert_eq(num(u, "hidden_count"), 0);
	assert_keys(get(u, "state.restored"), "app:theme,mood");
	assert_keys(get(u, "state.not_restored"), "");
	st = state("u", "s");
	cr_assert_str_eq(str(st, "mood"), "angry");
	cr_assert_str_eq(str(st, "app:theme"), "dark");
	json_decref(st);
	p = events("s", NULL, 0);
	cr_assert_str_eq(seqs(p, buf, sizeof(buf)), "1,2,3,4,5,6,7");
	json_decref(p);
	/* Newest first. */
	ops = operations("s");
	cr_assert_eq(json_array_size(get(ops, "operations")), 2);
	cr_assert_str_eq(str(json_array_get(get(ops, "operations"), 0), "kind"), "undo");
	cr_assert_str_eq(str(json_array_get(get(ops, "operations"), 1), "id"), op);
	json_decref(ops);
	json_decref(u);
	json_decref(r);
}

Test(facade_transcripts, undo_conflicts_after_an_append_or_twice_and_knows_no_stranger)
{
	json_t *r, *u, *s;
	int32_t rc;
	char op[128];

	six("s");
	r = rewind_ok("s", "{\"turns\":1}");
	snprintf(op, sizeof(op), "%s", str(r, "operation.id"));
	say("u", "s", "user", "later", NULL);
	cr_assert_null(undo("s", op, NULL, &rc));
	cr_assert_eq(rc, MEMD_ECONFLICT);
	s = session("u", "s");
	cr_assert_eq(num(s, "version"), 8);
	cr_assert_eq(num(s, "message_count"), 5);
	json_decref(s);
	json_decref(r);

	r = rewind_ok("s", "{\"turns\":1}");
	snprintf(op, sizeof(op), "%s", str(r, "operation.id"));
	cr_assert_null(undo("s", op, "{\"expected_version\":3}", &rc));
	cr_assert_eq(rc, MEMD_ECONFLICT);
	u = undo("s", op, NULL, NULL);
	cr_assert_null(undo("s", op, NULL, &rc));
	cr_assert_eq(rc, MEMD_ECONFLICT, "undone twice");
	cr_assert_null(undo("s", str(u, "operation.id"), NULL, &rc));
	cr_assert_eq(rc, MEMD_EINVAL, "an undo is not undone");
	cr_assert_null(undo("s", "no-such-op", NULL, &rc));
	cr_assert_eq(rc, MEMD_ENOTFOUND);
	cr_assert_null(undo("s", op, "{\"bad\":1}", &rc));
	cr_assert_eq(rc, MEMD_EINVAL);
	json_decref(u);
	json_decref(r);
}

/* ---- clear ------------------------------------------------------------------ */

Test(facade_transcripts, clear_hides_everything_and_keeps_state_and_undo_brings_it_back)
{
	memd_error err = { 0 };
	char *out = NULL, op[128], buf[64];
	json_t *c, *p, *st, *s, *u;

	six("s");
	set_state("u", "s", "{\"mood\":\"calm\"}");
	c = ok_json(memd_events_clear(m, "app", "u", "s", NULL, &out, &err), &err, &out);
	cr_assert_eq(num(c, "hidden_count"), 6);
	cr_assert_str_eq(str(c, "operation.kind"), "clear");
	cr_assert_eq(num(c, "version"), 8);
	snprintf(op, sizeof(op), "%s", str(c, "operation.id"));
	p = events("s", NULL, 0);
	cr_assert_str_eq(seqs(p, buf, sizeof(buf)), "");
	json_decref(p);
	st = state("u", "s");
	cr_assert_str_eq(str(st, "mood"), "calm");
	json_decref(st);
	s = session("u", "s");
	cr_assert_eq(num(s, "message_count"), 0);
	json_decref(s);
	/* Stale version: nothing. */
	cr_assert_eq(memd_events_clear(m, "app", "u", "s", "{\"expected_version\":1}", &out, &err),
		     MEMD_ECONFLICT);
	u = undo("s", op, "{\"expected_version\":8}", NULL);
	cr_assert_eq(num(u, "unhidden_count"), 6);
	p = events("s", NULL, 0);
	cr_assert_str_eq(seqs(p, buf, sizeof(buf)), "1,2,3,4,5,6");
	json_decref(p);
	json_decref(u);
	json_decref(c);
}

/* ---- reads ------------------------------------------------------------------ */

Test(facade_transcripts, events_by_role)
{
	memd_error err = { 0 };
	char *out = NULL, buf[64];
	json_t *p;

	six("s");
	p = events("s", "user", 0);
	cr_assert_str_eq(seqs(p, buf, sizeof(buf)), "1,3,5");
	json_decref(p);
	p = events("s", "assistant,user", 0);
	cr_assert_str_eq(seqs(p, buf, sizeof(buf)), "1,2,3,4,5,6");
	json_decref(p);
	p = events("s", "tool", 0);
	cr_assert_str_eq(seqs(p, buf, sizeof(buf)), "");
	json_decref(p);
	cr_assert_eq(memd_events_query(m, "app", "u", "s", 0, 0, "user,bot", 0, &out, &err),
		     MEMD_EINVAL);
	cr_assert_null(out);
	cr_assert_eq(memd_events_query(m, "app", "u", "s", 0, 0, "user,", 0, &out, &err),
		     MEMD_EINVAL);
}

Test(facade_transcripts, state_history_pages_with_cursors)
{
	memd_error err = { 0 };
	char *out = NULL, *cursor;
	json_t *h, *h2, *c;

	create("u", "s");
	set_state("u", "s", "{\"a\":1,\"b\":2}");  /* version 1 */
	set_state("u", "s", "{\"a\":null}");       /* version 2 */
	set_state("u", "s", "{\"user:c\":true}");  /* version 3 */
	h = ok_json(memd_state_history(m, "app", "u", "s", NULL, 2, &out, &err), &err, &out);
	cr_assert_eq(json_array_size(get(h, "changes")), 2);
	c = json_array_get(get(h, "changes"), 0);
	cr_assert_eq(num(c, "version"), 1);
	cr_assert_str_eq(str(c, "key"), "a");
	cr_assert(json_is_null(get(c, "old")));
	cr_assert_eq(num(c, "new"), 1);
	cr_assert(json_is_null(get(c, "operation")));
	cr_assert_str_eq(str(json_array_get(get(h, "changes"), 1), "key"), "b");
	cursor = strdup(str(h, "next_cursor"));
	h2 = ok_json(memd_state_history(m, "app", "u", "s", cursor, 2, &out, &err), &err, &out);
	cr_assert_eq(json_array_size(get(h2, "changes")), 2);
	c = json_array_get(get(h2, "changes"), 0);
	cr_assert_eq(num(c, "version"), 2);
	cr_assert_eq(num(c, "old"), 1);
	cr_assert(json_is_null(get(c, "new")), "deleted");
	cr_assert_str_eq(str(json_array_get(get(h2, "changes"), 1), "key"), "user:c");
	cr_assert(json_is_null(get(h2, "next_cursor")));
	cr_assert_eq(memd_state_history(m, "app", "u", "s", "garbage", 2, &out, &err), MEMD_EINVAL);
	cr_assert_eq(memd_state_history(m, "app", "u", "s", NULL, MEMD_PAGE_LIMIT_MAX + 1, &out,
					&err),
		     MEMD_EINVAL);
	cr_assert_eq(memd_state_history(m, "app", "u", "nope", NULL, 0, &out, &err),
		     MEMD_ENOTFOUND);
	free(cursor);
	json_decref(h);
	json_decref(h2);
}

static json_t *list(uint32_t order, int64_t within, const char *cursor, uint32_t limit,
		    int32_t *ret_r)
{
	memd_error err = { 0 };
	char *out = NULL;
	memd_session_list_options o = { .struct_size = sizeof(o), .order = order,
					.active_within_s = within, .cursor = cursor,
					.limit = limit };
	int32_t r = memd_session_list_filtered(m, "app", "u", &o, &out, &err);
	if (ret_r) {
		*ret_r = r;
		if (r < 0)
			return NULL;
	}
	return ok_json(r, &err, &out);
}

static const char *ids(json_t *l, char *buf, size_t cap)
{
	json_t *s;
	size_t i, n = 0;
	buf[0] = '\0';
	json_array_foreach(json_object_get(l, "sessions"), i, s)
		n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? "," : "",
				      json_string_value(json_object_get(s, "id")));
	return buf;
}

Test(facade_transcripts, sessions_list_by_activity_and_active_within)
{
	json_t *l, *l2;
	char buf[64];
	int32_t rc;

	create("u", "s1");
	atomic_fetch_add(&now_us, US_PER_S);
	create("u", "s2");
	atomic_fetch_add(&now_us, US_PER_S);
	create("u", "s3");
	atomic_fetch_add(&now_us, 100 * US_PER_S);
	say("u", "s1", "user", "hello", NULL);

	l = list(MEMD_ORDER_CREATED, 0, NULL, 0, NULL);
	cr_assert_str_eq(ids(l, buf, sizeof(buf)), "s3,s2,s1");
	json_decref(l);
	l = list(MEMD_ORDER_ACTIVITY, 0, NULL, 0, NULL);
	cr_assert_str_eq(ids(l, buf, sizeof(buf)), "s1,s3,s2");
	cr_assert_eq(num(json_array_get(get(l, "sessions"), 0), "message_count"), 1);
	json_decref(l);
	l = list(MEMD_ORDER_ACTIVITY, 50, NULL, 0, NULL);
	cr_assert_str_eq(ids(l, buf, sizeof(buf)), "s1");
	json_decref(l);
	/* Pages by activity. */
	l = list(MEMD_ORDER_ACTIVITY, 0, NULL, 2, NULL);
	cr_assert_str_eq(ids(l, buf, sizeof(buf)), "s1,s3");
	l2 = list(MEMD_ORDER_ACTIVITY, 0, str(l, "next_cursor"), 2, NULL);
	cr_assert_str_eq(ids(l2, buf, sizeof(buf)), "s2");
	/* A cursor of one order is refused by the other. */
	cr_assert_null(list(MEMD_ORDER_CREATED, 0, str(l, "next_cursor"), 2, &rc));
	cr_assert_eq(rc, MEMD_EINVAL);
	json_decref(l2);
	json_decref(l);
	cr_assert_null(list(7, 0, NULL, 0, &rc));
	cr_assert_eq(rc, MEMD_EINVAL);
	cr_assert_null(list(MEMD_ORDER_ACTIVITY, -1, NULL, 0, &rc));
	cr_assert_eq(rc, MEMD_EINVAL);
}

/* ---- rewrite (memd_messages_put) ---------------------------------------------- */

static json_t *put(const char *sid, const char *body, int32_t *ret_r)
{
	memd_error err = { 0 };
	char *out = NULL;
	int32_t r = memd_messages_put(m, "app", "u", sid, body, &out, &err);
	if (ret_r) {
		*ret_r = r;
		if (r < 0) {
			cr_assert_null(out);
			return NULL;
		}
	}
	return ok_json(r, &err, &out);
}

Test(facade_transcripts, rewrite_creates_replaces_and_undoes)
{
	json_t *p, *w, *u, *e, *s;
	char buf[64], op[128];
	int32_t rc;

	w = put("w", "{\"messages\":[{\"role\":\"user\",\"content\":\"hello\"},"
		     "{\"role\":\"assistant\",\"content\":\"hi\"}]}",
		NULL);
	cr_assert(json_is_true(get(w, "created")));
	cr_assert_eq(num(w, "hidden_count"), 0);
	cr_assert_str_eq(str(w, "operation.kind"), "rewrite");
	json_decref(w);
	s = session("u", "w");
	cr_assert_str_eq(str(s, "title"), "hello");
	json_decref(s);

	w = put("w", "{\"messages\":[{\"role\":\"user\",\"content\":\"compressed\"}],"
		     "\"expected_version\":1}",
		NULL);
	cr_assert(json_is_false(get(w, "created")));
	cr_assert_eq(num(w, "hidden_count"), 2);
	cr_assert_eq(num(w, "version"), 2);
	cr_assert_eq(num(w, "operation.appended.first_seq"), 3);
	snprintf(op, sizeof(op), "%s", str(w, "operation.id"));
	p = events("w", NULL, 0);
	cr_assert_str_eq(seqs(p, buf, sizeof(buf)), "3");
	cr_assert_str_eq(str(json_array_get(get(p, "events"), 0), "operation"), op);
	json_decref(p);
	p = events("w", NULL, MEMD_READ_INCLUDE_HIDDEN);
	e = json_array_get(get(p, "events"), 0);
	cr_assert_str_eq(str(e, "hidden.kind"), "rewrite");
	cr_assert_str_eq(str(e, "hidden.by"), op);
	json_decref(p);

	/* A stale version: nothing changes. */
	cr_assert_null(put("w", "{\"messages\":[],\"expected_version\":1}", &rc));
	cr_assert_eq(rc, MEMD_ECONFLICT);
	p = events("w", NULL, 0);
	cr_assert_str_eq(seqs(p, buf, sizeof(buf)), "3");
	json_decref(p);

	/* Undone: the old transcript is back, the new one hidden by the undo. */
	u = undo("w", op, NULL, NULL);
	cr_assert_eq(num(u, "unhidden_count"), 2);
	cr_assert_eq(num(u, "hidden_count"), 1);
	p = events("w", NULL, 0);
	cr_assert_str_eq(seqs(p, buf, sizeof(buf)), "1,2");
	json_decref(p);
	p = events("w", NULL, MEMD_READ_INCLUDE_HIDDEN);
	e = json_array_get(get(p, "events"), 2);
	cr_assert_str_eq(str(e, "hidden.kind"), "undo");
	cr_assert_str_eq(str(e, "hidden.by"), str(u, "operation.id"));
	json_decref(p);
	json_decref(u);
	json_decref(w);
}
