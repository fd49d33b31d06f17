/* SPDX-License-Identifier: MIT */
/*
 * The memories part of the session-store conformance suite (since 1.3):
 * the "Memories" paragraph at the top of api/memd/store.h and the
 * contracts of memd_memory, memd_memory_write, memd_memory_commit,
 * memd_memory_change, memd_memory_query, memd_pending_query,
 * memd_session.memory_seq and MEMD_FEED_MEMORY / MEMD_FEED_MEMORY_DELETE,
 * run unchanged against every store plugin (see store_harness.h). A store
 * without the memory ops is skipped unless MEMD_CONFORMANCE_MEMORIES=1.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_harness.h"

#define APP "mapp"
#define APP2 "mapp2"
#define USER "mu"
#define USER2 "mu2"
#define T0 1700000000000000LL /* a plausible unix time in us */
#define SUITE_TIMEOUT_S 180
#define ID_LEN 48             /* room for the ids the tests make */

static conf_store *st;

static void setup(void)
{
	st = conf_open();
	conf_require_memories(st);
}

static void teardown(void)
{
	conf_close(st);
	st = NULL;
}

TestSuite(memories, .init = setup, .fini = teardown, .timeout = SUITE_TIMEOUT_S);

/* ---- helpers ---------------------------------------------------------- */

/* A memory of (app, user) with the given content; the rest as a host
 * would set it for an add. */
static memd_memory mem(const char *app, const char *user, const char *id, const char *text)
{
	memd_memory m = { .struct_size = sizeof(m), .app = app, .user = user, .id = id,
			  .text = text, .kind = "fact", .topics_json = "[]",
			  .entities_json = "[]", .tokens = (int64_t)(strlen(text) / 4 + 1) };
	return m;
}

static memd_memory_write wr(uint32_t op, const memd_memory *m, int64_t expected_version)
{
	memd_memory_write w = { .struct_size = sizeof(w), .op = op,
				.expected_version = expected_version, .memory = m,
				.actor = "api" };
	return w;
}

/* Commit n writes (no cursor) at now_us on (app, user). */
static int32_t commit_n(const char *app, const char *user, memd_memory_write *ws, uint32_t n,
			int64_t now_us, conf_memories *out)
{
	const memd_memory_write *ptrs[16];
	memd_memory_commit c = { .n_writes = n, .writes = ptrs, .now_us = now_us };

	cr_assert_leq(n, 16u);
	for (uint32_t i = 0; i < n; i++)
		ptrs[i] = &ws[i];
	return conf_memory_commit(st, app, user, &c, out);
}

/* One write, asserted to succeed; returns the delivered memory. */
static conf_memory commit1_ok(const char *app, const char *user, uint32_t op,
			      const memd_memory *m, int64_t expected_version, int64_t now_us)
{
	memd_memory_write w = wr(op, m, expected_version);
	conf_memories out = { 0 };
	conf_memory got;
	int32_t r = commit_n(app, user, &w, 1, now_us, &out);

	cr_assert_eq(r, 0, "commit op %u of %s: %s", op, m->id, st->err.msg);
	cr_assert_eq(out.n, 1, "commit delivered %zu memories", out.n);
	got = out.v[0];
	out.n = 0;
	conf_memories_clear(&out);
	return got;
}

static conf_memory add_ok(const char *app, const char *user, const char *id, const char *text,
			  int64_t now_us)
{
	memd_memory m = mem(app, user, id, text);
	return commit1_ok(app, user, MEMD_MEM_ADD, &m, 0, now_us);
}

static void add_quiet(const char *app, const char *user, const char *id, const char *text,
		      int64_t now_us)
{
	conf_memory m = add_ok(app, user, id, text, now_us);
	conf_memory_clear(&m);
}

static conf_memory get_ok(const char *app, const char *user, const char *id, int64_t now_us)
{
	conf_memory m = { 0 };
	int32_t r = conf_memory_get(st, app, user, id, now_us, &m);
	cr_assert_eq(r, 0, "memory_get(%s/%s/%s): %s", app, user, id, st->err.msg);
	return m;
}

static void assert_absent(const char *app, const char *user, const char *id, int64_t now_us)
{
	int32_t r = conf_memory_get(st, app, user, id, now_us, NULL);
	cr_assert_eq(r, MEMD_ENOTFOUND, "memory_get(%s/%s/%s) gave %d, expected ENOTFOUND", app,
		     user, id, r);
}

static void session_ok(const char *app, const char *user, const char *id, int64_t created_us)
{
	int32_t r = conf_session_create(st, app, user, id, NULL, created_us, NULL, NULL);
	cr_assert_eq(r, 0, "session_create(%s): %s", id, st->err.msg);
}

static conf_session session_get_ok(const char *app, const char *user, const char *id)
{
	conf_session s = { 0 };
	int32_t r = conf_session_get(st, app, user, id, &s);
	cr_assert_eq(r, 0, "session_get(%s): %s", id, st->err.msg);
	return s;
}

static int64_t memory_seq_of(const char *app, const char *user, const char *id)
{
	conf_session s = session_get_ok(app, user, id);
	int64_t v = s.memory_seq;
	conf_session_clear(&s);
	return v;
}

/* A cursor-only commit (n_writes 0). */
static int32_t cursor_commit(const char *app, const char *user, const char *session,
			     int64_t expected, int64_t next, int64_t now_us)
{
	memd_memory_commit c = { .cursor_session = session, .expected_cursor_seq = expected,
				 .new_cursor_seq = next, .now_us = now_us };
	return conf_memory_commit(st, app, user, &c, NULL);
}

static size_t history_len(const char *app, const char *user, const char *id)
{
	conf_memory_changes h = { 0 };
	int32_t r = conf_memory_history(st, app, user, id, &h);
	size_t n;

	if (r == MEMD_ENOTFOUND)
		return 0;
	cr_assert_eq(r, 0, "memory_history(%s): %s", id, st->err.msg);
	n = h.n;
	conf_memory_changes_clear(&h);
	return n;
}

/* Ids of a listing joined by ',' into buf. */
static const char *ids_of(const conf_memories *l, char *buf, size_t cap)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < l->n; i++) {
		int w = snprintf(buf + used, cap - used, "%s%s", i ? "," : "", l->v[i].m.id);
		cr_assert(w >= 0 && (size_t)w < cap - used, "id list too long");
		used += (size_t)w;
	}
	return buf;
}

#define IDS_MAX 4096

static void assert_list(const char *app, const char *user, memd_memory_query *q,
			const char *want, const char *what)
{
	conf_memories l = { 0 };
	char buf[IDS_MAX];
	int32_t r;

	if (!q->limit)
		q->limit = 1000;
	r = conf_memory_list(st, app, user, q, &l);
	cr_assert_eq(r, 0, "%s: memory_list: %s", what, st->err.msg);
	cr_assert_str_eq(ids_of(&l, buf, sizeof(buf)), want, "%s: listed %s, expected %s", what,
			 buf, want);
	conf_memories_clear(&l);
}

/* ---- add, update, delete ---------------------------------------------- */

Test(memories, add_update_delete_versions_and_times)
{
	memd_memory m = mem(APP, USER, "m1", "prefers window seats");
	conf_memory a, u, g, d;
	memd_memory_write w;

	m.kind = "preference";
	m.topics_json = "[\"travel\",\"seats\"]";
	m.entities_json = "[\"airline\"]";
	m.source_session = "s1";
	m.source_json = "{\"session_id\":\"s1\",\"seqs\":[1,2]}";
	m.expires_us = T0 + 1000000;
	m.tokens = 7;
	a = commit1_ok(APP, USER, MEMD_MEM_ADD, &m, 0, T0);
	cr_assert_str_eq(a.m.app, APP);
	cr_assert_str_eq(a.m.user, USER);
	cr_assert_str_eq(a.m.id, "m1");
	cr_assert_str_eq(a.m.text, "prefers window seats");
	cr_assert_str_eq(a.m.kind, "preference");
	cr_assert(conf_json_equal(a.m.topics_json, "[\"travel\",\"seats\"]"), "topics %s",
		  a.m.topics_json);
	cr_assert(conf_json_equal(a.m.entities_json, "[\"airline\"]"));
	cr_assert_str_eq(a.m.source_session, "s1");
	cr_assert(conf_json_equal(a.m.source_json, "{\"session_id\":\"s1\",\"seqs\":[1,2]}"));
	cr_assert_eq(a.m.version, 1);
	cr_assert_eq(a.m.created_us, T0);
	cr_assert_eq(a.m.updated_us, T0);
	cr_assert_eq(a.m.expires_us, T0 + 1000000);
	cr_assert_eq(a.m.tokens, 7);
	cr_assert_gt(a.m.position, 0, "an added memory has no feed position");

	g = get_ok(APP, USER, "m1", T0);
	cr_assert_eq(g.m.version, 1);
	cr_assert_eq(g.m.position, a.m.position);
	cr_assert_str_eq(g.m.text, a.m.text);
	cr_assert(conf_json_equal(g.m.source_json, a.m.source_json));
	conf_memory_clear(&g);

	/* A second add of the id conflicts. */
	w = wr(MEMD_MEM_ADD, &m, 0);
	cr_assert_eq(commit_n(APP, USER, &w, 1, T0 + 1, NULL), MEMD_ECONFLICT);

	/* Update replaces every content column and keeps created_us. */
	m.text = "prefers aisle seats";
	m.kind = "fact";
	m.topics_json = "[\"travel\"]";
	m.entities_json = "[]";
	m.source_session = NULL;
	m.source_json = NULL;
	m.expires_us = 0;
	m.tokens = 5;
	u = commit1_ok(APP, USER, MEMD_MEM_UPDATE, &m, 1, T0 + 10);
	cr_assert_eq(u.m.version, 2);
	cr_assert_eq(u.m.created_us, T0);
	cr_assert_eq(u.m.updated_us, T0 + 10);
	cr_assert_str_eq(u.m.text, "prefers aisle seats");
	cr_assert_str_eq(u.m.kind, "fact");
	cr_assert(conf_json_equal(u.m.topics_json, "[\"travel\"]"));
	cr_assert(conf_json_equal(u.m.entities_json, "[]"));
	conf_assert_str_or_null(u.m.source_session, NULL, "source_session after update");
	conf_assert_str_or_null(u.m.source_json, NULL, "source_json after update");
	cr_assert_eq(u.m.expires_us, 0);
	cr_assert_eq(u.m.tokens, 5);
	cr_assert_gt(u.m.position, a.m.position, "an update did not move the feed position");
	g = get_ok(APP, USER, "m1", T0 + 10);
	cr_assert_eq(g.m.version, 2);
	cr_assert_str_eq(g.m.text, "prefers aisle seats");
	cr_assert_eq(g.m.position, u.m.position);
	conf_memory_clear(&g);

	/* A stale expected version conflicts; 0 means any. */
	w = wr(MEMD_MEM_UPDATE, &m, 1);
	cr_assert_eq(commit_n(APP, USER, &w, 1, T0 + 11, NULL), MEMD_ECONFLICT);
	conf_memory_clear(&u);
	u = commit1_ok(APP, USER, MEMD_MEM_UPDATE, &m, 0, T0 + 12);
	cr_assert_eq(u.m.version, 3);
	w = wr(MEMD_MEM_DELETE, &m, 2);
	cr_assert_eq(commit_n(APP, USER, &w, 1, T0 + 13, NULL), MEMD_ECONFLICT);
	g = get_ok(APP, USER, "m1", T0 + 13);
	cr_assert_eq(g.m.version, 3, "a refused delete changed the memory");
	conf_memory_clear(&g);

	/* Delete delivers the memory as it was and removes it. */
	d = commit1_ok(APP, USER, MEMD_MEM_DELETE, &m, 3, T0 + 14);
	cr_assert_str_eq(d.m.id, "m1");
	cr_assert_eq(d.m.version, 3);
	cr_assert_str_eq(d.m.text, "prefers aisle seats");
	cr_assert_eq(d.m.updated_us, T0 + 12);
	assert_absent(APP, USER, "m1", T0 + 14);
	w = wr(MEMD_MEM_UPDATE, &m, 0);
	cr_assert_eq(commit_n(APP, USER, &w, 1, T0 + 15, NULL), MEMD_ENOTFOUND);
	w = wr(MEMD_MEM_DELETE, &m, 0);
	cr_assert_eq(commit_n(APP, USER, &w, 1, T0 + 15, NULL), MEMD_ENOTFOUND);
	conf_memory_clear(&a);
	conf_memory_clear(&u);
	conf_memory_clear(&d);
}

Test(memories, writes_apply_in_order_within_a_commit)
{
	memd_memory x = mem(APP, USER, "x", "first");
	memd_memory x2 = mem(APP, USER, "x", "second");
	memd_memory y = mem(APP, USER, "y", "gone at once");
	memd_memory_write ws[4] = { wr(MEMD_MEM_ADD, &x, 0), wr(MEMD_MEM_UPDATE, &x2, 1),
				    wr(MEMD_MEM_ADD, &y, 0), wr(MEMD_MEM_DELETE, &y, 1) };
	conf_memories out = { 0 };
	conf_memory g = { 0 };
	conf_memory_changes h = { 0 };

	cr_assert_eq(commit_n(APP, USER, ws, 4, T0, &out), 0, "commit: %s", st->err.msg);
	cr_assert_eq(out.n, 4, "delivered %zu memories for 4 writes", out.n);
	cr_assert_str_eq(out.v[0].m.text, "first");
	cr_assert_eq(out.v[0].m.version, 1);
	cr_assert_str_eq(out.v[1].m.text, "second");
	cr_assert_eq(out.v[1].m.version, 2);
	cr_assert_gt(out.v[1].m.position, out.v[0].m.position);
	cr_assert_str_eq(out.v[2].m.id, "y");
	cr_assert_str_eq(out.v[3].m.id, "y");
	cr_assert_eq(out.v[3].m.version, 1);
	conf_memories_clear(&out);

	g = get_ok(APP, USER, "x", T0);
	cr_assert_eq(g.m.version, 2);
	cr_assert_str_eq(g.m.text, "second");
	conf_memory_clear(&g);
	assert_absent(APP, USER, "y", T0);
	cr_assert_eq(conf_memory_history(st, APP, USER, "y", &h), 0, "%s", st->err.msg);
	cr_assert_eq(h.n, 2);
	cr_assert_eq(h.v[0].op, MEMD_MEM_ADD);
	cr_assert_eq(h.v[1].op, MEMD_MEM_DELETE);
	conf_memory_changes_clear(&h);
}

/* A caller that keeps nothing of a commit passes no sink. */
Test(memories, commit_without_a_sink)
{
	memd_call call = conf_call(st);
	memd_scope sc = conf_scope(APP, USER, NULL);
	memd_memory m = mem(APP, USER, "quiet", "stored all the same");
	memd_memory_write w = wr(MEMD_MEM_ADD, &m, 0);
	const memd_memory_write *ws[1] = { &w };
	memd_memory_commit c = { .struct_size = sizeof(c), .n_writes = 1, .writes = ws,
				 .now_us = T0 };
	memd_error err = { .struct_size = sizeof(err) };
	conf_memory g;

	cr_assert_eq(st->ops->memory_commit(st->h, &call, &sc, &c, NULL, &err), 0, "%s", err.msg);
	g = get_ok(APP, USER, "quiet", T0);
	cr_assert_eq(g.m.version, 1);
	conf_memory_clear(&g);
}

/* What a failed commit must leave as it was. */
typedef struct snapshot {
	int64_t feed_last;
	int64_t m0_version;
	int64_t memory_seq;
	size_t m0_history;
} snapshot;

static snapshot take_snapshot(void)
{
	snapshot s;
	conf_memory m0 = get_ok(APP, USER, "m0", T0 + 50);

	s.feed_last = conf_feed_last(st);
	s.m0_version = m0.m.version;
	s.memory_seq = memory_seq_of(APP, USER, "s");
	s.m0_history = history_len(APP, USER, "m0");
	conf_memory_clear(&m0);
	return s;
}

static void assert_unchanged(const snapshot *before, const char *what)
{
	snapshot after = take_snapshot();

	cr_assert_eq(after.feed_last, before->feed_last, "%s: the feed moved", what);
	cr_assert_eq(after.m0_version, before->m0_version, "%s: m0 was updated", what);
	cr_assert_eq(after.memory_seq, before->memory_seq, "%s: the cursor moved", what);
	cr_assert_eq(after.m0_history, before->m0_history, "%s: m0's history grew", what);
	assert_absent(APP, USER, "new1", T0 + 50);
	cr_assert_eq(history_len(APP, USER, "new1"), 0, "%s: the failed add left history", what);
}

/* Commit [ADD new1, UPDATE m0, third] with the cursor 0 -> 3 on "s". */
static int32_t three_writes(const memd_memory_write *third, int64_t expected_cursor,
			    int64_t new_cursor)
{
	memd_memory n1 = mem(APP, USER, "new1", "a new one");
	memd_memory m0 = mem(APP, USER, "m0", "m0 changed");
	memd_memory_write ws[2] = { wr(MEMD_MEM_ADD, &n1, 0), wr(MEMD_MEM_UPDATE, &m0, 1) };
	const memd_memory_write *ptrs[3] = { &ws[0], &ws[1], third };
	memd_memory_commit c = { .n_writes = third ? 3 : 2, .writes = ptrs,
				 .cursor_session = "s", .expected_cursor_seq = expected_cursor,
				 .new_cursor_seq = new_cursor, .now_us = T0 + 50 };
	return conf_memory_commit(st, APP, USER, &c, NULL);
}

Test(memories, a_failed_commit_writes_nothing)
{
	memd_scope sc = conf_scope(APP, USER, "s");
	memd_memory missing = mem(APP, USER, "nope", "x");
	memd_memory dup = mem(APP, USER, "m0", "again");
	memd_memory m0 = mem(APP, USER, "m0", "stale");
	memd_memory bad = mem(APP, USER, "bad", "bad kind");
	memd_memory_write w;
	snapshot before;

	session_ok(APP, USER, "s", T0);
	conf_append_simple(st, &sc, "e", 1, 3, T0 + 1);
	add_quiet(APP, USER, "m0", "m0", T0 + 2);
	before = take_snapshot();

	w = wr(MEMD_MEM_UPDATE, &missing, 0);
	cr_assert_eq(three_writes(&w, 0, 3), MEMD_ENOTFOUND, "update of a missing memory");
	assert_unchanged(&before, "update of a missing memory");
	w = wr(MEMD_MEM_DELETE, &missing, 0);
	cr_assert_eq(three_writes(&w, 0, 3), MEMD_ENOTFOUND);
	assert_unchanged(&before, "delete of a missing memory");
	w = wr(MEMD_MEM_ADD, &dup, 0);
	cr_assert_eq(three_writes(&w, 0, 3), MEMD_ECONFLICT);
	assert_unchanged(&before, "add of an existing id");
	/* m0 is at version 2 inside the commit: expecting 1 conflicts. */
	w = wr(MEMD_MEM_UPDATE, &m0, 1);
	cr_assert_eq(three_writes(&w, 0, 3), MEMD_ECONFLICT);
	assert_unchanged(&before, "a stale version after an update in the same commit");
	bad.kind = "opinion";
	w = wr(MEMD_MEM_ADD, &bad, 0);
	cr_assert_eq(three_writes(&w, 0, 3), MEMD_EINVAL);
	assert_unchanged(&before, "a bad kind");
	/* Good writes, bad cursor. */
	cr_assert_eq(three_writes(NULL, 1, 3), MEMD_ECONFLICT);
	assert_unchanged(&before, "a stale cursor");
	cr_assert_eq(three_writes(NULL, 0, -1), MEMD_EINVAL);
	assert_unchanged(&before, "a cursor going backwards");

	/* The same writes with a good cursor land together. */
	cr_assert_eq(three_writes(NULL, 0, 3), 0, "%s", st->err.msg);
	cr_assert_eq(memory_seq_of(APP, USER, "s"), 3);
	{
		conf_memory g = get_ok(APP, USER, "m0", T0 + 50);
		cr_assert_eq(g.m.version, 2);
		cr_assert_str_eq(g.m.text, "m0 changed");
		conf_memory_clear(&g);
		g = get_ok(APP, USER, "new1", T0 + 50);
		conf_memory_clear(&g);
	}
}

Test(memories, bad_input_is_refused)
{
	memd_memory m = mem(APP, USER, "v", "valid");
	memd_memory_write w;
	int64_t feed = conf_feed_last(st);

	m.text = NULL;
	w = wr(MEMD_MEM_ADD, &m, 0);
	cr_assert_eq(commit_n(APP, USER, &w, 1, T0, NULL), MEMD_EINVAL, "ADD without text");
	m = mem(APP, USER, NULL, "no id");
	w = wr(MEMD_MEM_ADD, &m, 0);
	cr_assert_eq(commit_n(APP, USER, &w, 1, T0, NULL), MEMD_EINVAL, "ADD without id");
	m = mem(APP, USER, "v", "valid");
	w = wr(MEMD_MEM_EXPIRE, &m, 0);
	cr_assert_eq(commit_n(APP, USER, &w, 1, T0, NULL), MEMD_EINVAL, "op EXPIRE in a commit");
	w = wr(99, &m, 0);
	cr_assert_eq(commit_n(APP, USER, &w, 1, T0, NULL), MEMD_EINVAL, "unknown op");
	m.kind = "opinion";
	w = wr(MEMD_MEM_ADD, &m, 0);
	cr_assert_eq(commit_n(APP, USER, &w, 1, T0, NULL), MEMD_EINVAL, "unknown kind");
	m = mem(APP, USER, "v", "valid");
	m.topics_json = "{\"a\":1}";
	w = wr(MEMD_MEM_ADD, &m, 0);
	cr_assert_eq(commit_n(APP, USER, &w, 1, T0, NULL), MEMD_EINVAL, "topics not an array");
	m = mem(APP, USER, "v", "valid");
	m.entities_json = "not json";
	w = wr(MEMD_MEM_ADD, &m, 0);
	cr_assert_eq(commit_n(APP, USER, &w, 1, T0, NULL), MEMD_EINVAL, "entities not JSON");
	assert_absent(APP, USER, "v", T0);
	cr_assert_eq(conf_feed_last(st), feed, "a refused commit added feed records");

	/* Every kind of the four is fine. */
	{
		static const char *const kinds[] = { "fact", "preference", "instruction",
						     "episode" };
		for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
			char id[ID_LEN];
			conf_memory g = { 0 };
			snprintf(id, sizeof(id), "k%zu", i);
			m = mem(APP, USER, id, "some text");
			m.kind = kinds[i];
			g = commit1_ok(APP, USER, MEMD_MEM_ADD, &m, 0, T0);
			cr_assert_str_eq(g.m.kind, kinds[i]);
			conf_memory_clear(&g);
		}
	}
}

/* ---- the cursor ------------------------------------------------------- */

Test(memories, cursor_rules_and_memory_seq_on_sessions)
{
	memd_scope sc = conf_scope(APP, USER, "s");
	conf_sessions l = { 0 };
	conf_session s;
	memd_session_query q = { .limit = 10 };

	session_ok(APP, USER, "s", T0);
	session_ok(APP, USER2, "other", T0);
	s = session_get_ok(APP, USER, "s");
	cr_assert_eq(s.memory_seq, 0, "a new session's memory_seq");
	conf_session_clear(&s);
	conf_append_simple(st, &sc, "e", 1, 4, T0 + 1);

	cr_assert_eq(cursor_commit(APP, USER, "nosuch", 0, 1, T0 + 2), MEMD_ENOTFOUND,
		     "an unknown cursor session");
	cr_assert_eq(cursor_commit(APP, USER, "other", 0, 1, T0 + 2), MEMD_ENOTFOUND,
		     "another user's session as cursor");
	cr_assert_eq(cursor_commit(APP, USER, "s", 1, 2, T0 + 2), MEMD_ECONFLICT,
		     "a stale expected cursor");
	cr_assert_eq(memory_seq_of(APP, USER, "s"), 0);

	cr_assert_eq(cursor_commit(APP, USER, "s", 0, 2, T0 + 3), 0, "%s", st->err.msg);
	cr_assert_eq(memory_seq_of(APP, USER, "s"), 2);
	cr_assert_eq(cursor_commit(APP, USER, "s", 2, 1, T0 + 4), MEMD_EINVAL,
		     "a cursor going backwards");
	cr_assert_eq(cursor_commit(APP, USER, "s", 0, 4, T0 + 4), MEMD_ECONFLICT,
		     "the old expected cursor again");
	cr_assert_eq(cursor_commit(APP, USER, "s", 2, 2, T0 + 4), 0, "staying put: %s",
		     st->err.msg);
	cr_assert_eq(memory_seq_of(APP, USER, "s"), 2);

	cr_assert_eq(conf_session_list_q(st, APP, USER, &q, &l), 0, "%s", st->err.msg);
	cr_assert_eq(l.n, 1);
	cr_assert_eq(l.v[0].memory_seq, 2, "session_list's memory_seq");
	cr_assert_eq(l.v[0].last_seq, 4);
	conf_sessions_clear(&l);
	/* The other user's session is untouched. */
	cr_assert_eq(memory_seq_of(APP, USER2, "other"), 0);
}

/* ---- expiry ----------------------------------------------------------- */

Test(memories, expired_memories_are_invisible)
{
	memd_memory e = mem(APP, USER, "e", "expiring");
	memd_memory_write w;
	memd_memory_query q = { 0 };
	conf_memory g = { 0 };

	e.expires_us = T0 + 100;
	g = commit1_ok(APP, USER, MEMD_MEM_ADD, &e, 0, T0);
	conf_memory_clear(&g);
	add_quiet(APP, USER, "forever", "never expires", T0 + 1);

	g = get_ok(APP, USER, "e", T0 + 99);
	cr_assert_eq(g.m.expires_us, T0 + 100);
	conf_memory_clear(&g);
	assert_absent(APP, USER, "e", T0 + 100);
	assert_absent(APP, USER, "e", T0 + 500);
	g = get_ok(APP, USER, "forever", T0 + 1000000000LL);
	conf_memory_clear(&g);

	q.now_us = T0 + 99;
	assert_list(APP, USER, &q, "forever,e", "before expiry");
	q = (memd_memory_query){ .now_us = T0 + 100 };
	assert_list(APP, USER, &q, "forever", "at expiry");

	/* A commit treats it as absent. */
	w = wr(MEMD_MEM_UPDATE, &e, 0);
	cr_assert_eq(commit_n(APP, USER, &w, 1, T0 + 100, NULL), MEMD_ENOTFOUND,
		     "update of an expired memory");
	w = wr(MEMD_MEM_DELETE, &e, 1);
	cr_assert_eq(commit_n(APP, USER, &w, 1, T0 + 100, NULL), MEMD_ENOTFOUND,
		     "delete of an expired memory");
	/* ... but its id is still taken until it is expired away. */
	w = wr(MEMD_MEM_ADD, &e, 0);
	cr_assert_eq(commit_n(APP, USER, &w, 1, T0 + 100, NULL), MEMD_ECONFLICT,
		     "add over an expired memory");
	/* Before its expiry it can still be updated. */
	e.text = "updated in time";
	g = commit1_ok(APP, USER, MEMD_MEM_UPDATE, &e, 1, T0 + 50);
	cr_assert_eq(g.m.version, 2);
	conf_memory_clear(&g);
}

Test(memories, memory_expire_oldest_first_with_history_and_feed)
{
	static const struct {
		const char *app, *user, *id;
		int64_t expires;
	} ms[] = {
		{ APP, USER, "late", T0 + 30 },  { APP2, USER, "early", T0 + 10 },
		{ APP, USER2, "mid", T0 + 20 },  { APP, USER, "never", 0 },
		{ APP, USER, "future", T0 + 1000 },
	};
	uint32_t n = 99;
	int64_t feed_before;
	conf_feed f = { 0 };
	conf_memory_changes h = { 0 };
	int deletes = 0;

	for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++) {
		memd_memory m = mem(ms[i].app, ms[i].user, ms[i].id, "text");
		conf_memory g = { 0 };
		m.expires_us = ms[i].expires;
		g = commit1_ok(ms[i].app, ms[i].user, MEMD_MEM_ADD, &m, 0, T0);
		conf_memory_clear(&g);
	}
	feed_before = conf_feed_last(st);

	cr_assert_eq(conf_memory_expire(st, T0 + 30, 2, &n), 0, "%s", st->err.msg);
	cr_assert_eq(n, 2, "expired %u, limit 2", n);
	cr_assert_eq(conf_memory_history(st, APP2, USER, "early", &h), 0, "%s", st->err.msg);
	cr_assert_eq(h.n, 2);
	cr_assert_eq(h.v[1].op, MEMD_MEM_EXPIRE);
	cr_assert_str_eq(h.v[1].actor, "retention");
	cr_assert_eq(h.v[1].memory.version, 1);
	cr_assert_str_eq(h.v[1].memory.text, "text");
	cr_assert_eq(h.v[1].at_us, T0 + 30);
	conf_memory_changes_clear(&h);
	cr_assert_eq(history_len(APP, USER2, "mid"), 2, "mid (expires second) was not expired");
	cr_assert_eq(history_len(APP, USER, "late"), 1, "late was expired before the older ones");

	cr_assert_eq(conf_feed_read(st, feed_before, CONF_FEED_ALL, &f), 0, "%s", st->err.msg);
	for (size_t i = 0; i < f.n; i++) {
		cr_assert_eq(f.v[i].kind, MEMD_FEED_MEMORY_DELETE, "record %zu kind %u", i,
			     f.v[i].kind);
		cr_assert_not_null(f.v[i].memory.id, "MEMORY_DELETE without the memory's id");
		cr_assert_str_eq(f.v[i].memory.app, f.v[i].app);
		cr_assert_str_eq(f.v[i].memory.user, f.v[i].user);
		cr_assert(strcmp(f.v[i].memory.id, "early") == 0 ||
				  strcmp(f.v[i].memory.id, "mid") == 0,
			  "a tombstone for %s", f.v[i].memory.id);
		deletes++;
	}
	cr_assert_eq(deletes, 2);
	conf_feed_clear(&f);

	cr_assert_eq(conf_memory_expire(st, T0 + 30, 10, &n), 0, "%s", st->err.msg);
	cr_assert_eq(n, 1);
	cr_assert_eq(conf_memory_expire(st, T0 + 30, 10, &n), 0, "%s", st->err.msg);
	cr_assert_eq(n, 0);
	{
		conf_memory g = get_ok(APP, USER, "never", T0 + 999);
		conf_memory_clear(&g);
		g = get_ok(APP, USER, "future", T0 + 999);
		conf_memory_clear(&g);
		/* Expired away, the id is free again. */
		add_quiet(APP, USER, "late", "back", T0 + 40);
	}
}

/* ---- listing ---------------------------------------------------------- */

static int id_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

#define PAGE_MEMS 23
#define PAGE_SIZE 4
#define SAME_TIME 3 /* memories added by one commit (one created_us) */

Test(memories, list_newest_first_keyset_pages)
{
	char want[IDS_MAX] = "", got[IDS_MAX] = "";
	size_t used = 0, gused = 0;
	int64_t before_us = 0;
	char before_id[ID_LEN] = "";
	int pages = 0;

	/* Ids not in time order, several per created_us. */
	for (int i = 0; i < PAGE_MEMS; i++) {
		char id[ID_LEN];
		snprintf(id, sizeof(id), "m%02d", (i * 7) % PAGE_MEMS);
		add_quiet(APP, USER, id, "text", T0 + i / SAME_TIME);
	}
	add_quiet(APP, USER2, "other", "another user's", T0 + 100);
	/* Expected: created_us desc, then id desc. */
	for (int t = (PAGE_MEMS - 1) / SAME_TIME; t >= 0; t--) {
		char grp[SAME_TIME][ID_LEN];
		int k = 0;
		for (int i = t * SAME_TIME; i < PAGE_MEMS && i < (t + 1) * SAME_TIME; i++)
			snprintf(grp[k++], ID_LEN, "m%02d", (i * 7) % PAGE_MEMS);
		qsort(grp, (size_t)k, ID_LEN, id_cmp);
		for (int j = k - 1; j >= 0; j--)
			used += (size_t)snprintf(want + used, sizeof(want) - used, "%s%s",
						 used ? "," : "", grp[j]);
	}

	for (;;) {
		memd_memory_query q = { .limit = PAGE_SIZE, .now_us = T0,
					.before_created_us = before_us,
					.before_id = before_id[0] ? before_id : NULL };
		conf_memories l = { 0 };

		cr_assert_eq(conf_memory_list(st, APP, USER, &q, &l), 0, "%s", st->err.msg);
		cr_assert_leq(l.n, PAGE_SIZE);
		for (size_t i = 0; i < l.n; i++)
			gused += (size_t)snprintf(got + gused, sizeof(got) - gused, "%s%s",
						  gused ? "," : "", l.v[i].m.id);
		if (l.n < PAGE_SIZE) {
			conf_memories_clear(&l);
			break;
		}
		before_us = l.v[l.n - 1].m.created_us;
		snprintf(before_id, sizeof(before_id), "%s", l.v[l.n - 1].m.id);
		conf_memories_clear(&l);
		cr_assert_lt(++pages, PAGE_MEMS, "paging does not end");
	}
	cr_assert_str_eq(got, want, "pages gave %s, expected %s", got, want);
}

/* Add one memory with the given kind, topics, entities and source. */
static void add_tagged(const char *id, const char *kind, const char *topics,
		       const char *entities, const char *session, int64_t now_us)
{
	memd_memory m = mem(APP, USER, id, "tagged");
	conf_memory g = { 0 };

	m.kind = kind;
	m.topics_json = topics;
	m.entities_json = entities;
	m.source_session = session;
	g = commit1_ok(APP, USER, MEMD_MEM_ADD, &m, 0, now_us);
	conf_memory_clear(&g);
}

Test(memories, list_filters)
{
	memd_memory_query q;

	add_tagged("a", "fact", "[\"food\",\"teal\"]", "[\"Alice\"]", "s1", T0 + 1);
	add_tagged("b", "preference", "[\"food\"]", "[\"Bob\"]", "s2", T0 + 2);
	add_tagged("c", "preference", "[\"tea\"]", "[\"Alice\",\"Bob\"]", "s1", T0 + 3);
	add_tagged("d", "instruction", "[]", "[]", NULL, T0 + 4);
	add_tagged("e", "episode", "[\"food\"]", "[\"Alice\"]", "s1", T0 + 5);

	q = (memd_memory_query){ .now_us = T0 };
	assert_list(APP, USER, &q, "e,d,c,b,a", "no filter");
	q = (memd_memory_query){ .now_us = T0, .kind = "preference" };
	assert_list(APP, USER, &q, "c,b", "kind");
	q = (memd_memory_query){ .now_us = T0, .topic = "food" };
	assert_list(APP, USER, &q, "e,b,a", "topic");
	q = (memd_memory_query){ .now_us = T0, .topic = "tea" };
	assert_list(APP, USER, &q, "c", "topic that is a prefix of another");
	q = (memd_memory_query){ .now_us = T0, .entity = "Alice" };
	assert_list(APP, USER, &q, "e,c,a", "entity");
	q = (memd_memory_query){ .now_us = T0, .entity = "alice" };
	assert_list(APP, USER, &q, "", "entity compares case-sensitively");
	q = (memd_memory_query){ .now_us = T0, .session = "s1" };
	assert_list(APP, USER, &q, "e,c,a", "session");
	q = (memd_memory_query){ .now_us = T0, .kind = "preference", .entity = "Bob",
				 .topic = "tea", .session = "s1" };
	assert_list(APP, USER, &q, "c", "every filter");
	q = (memd_memory_query){ .now_us = T0, .entity = "Alice", .session = "s1", .limit = 1,
				 .before_created_us = T0 + 5, .before_id = "e" };
	assert_list(APP, USER, &q, "c", "filters with a keyset page");
	q = (memd_memory_query){ .now_us = T0, .kind = "fact", .topic = "food", .entity = "Bob" };
	assert_list(APP, USER, &q, "", "filters matching nothing");
	q = (memd_memory_query){ .now_us = T0, .topic = "food" };
	assert_list(APP, USER2, &q, "", "another user");
}

/* ---- history ---------------------------------------------------------- */

Test(memories, history_oldest_first_survives_delete)
{
	memd_memory m = mem(APP, USER, "h", "v1");
	memd_memory_write w;
	conf_memory g = { 0 };
	conf_memory_changes h = { 0 };

	g = commit1_ok(APP, USER, MEMD_MEM_ADD, &m, 0, T0);
	conf_memory_clear(&g);
	m.text = "v2";
	w = wr(MEMD_MEM_UPDATE, &m, 1);
	w.actor = "extractor";
	w.reason = "newer statement";
	cr_assert_eq(commit_n(APP, USER, &w, 1, T0 + 5, NULL), 0, "%s", st->err.msg);
	m.text = "v3";
	g = commit1_ok(APP, USER, MEMD_MEM_UPDATE, &m, 2, T0 + 9);
	conf_memory_clear(&g);
	w = wr(MEMD_MEM_DELETE, &m, 3);
	w.actor = "mcp";
	w.reason = "user asked";
	cr_assert_eq(commit_n(APP, USER, &w, 1, T0 + 20, NULL), 0, "%s", st->err.msg);

	cr_assert_eq(conf_memory_history(st, APP, USER, "h", &h), 0, "%s", st->err.msg);
	cr_assert_eq(h.n, 4, "history has %zu entries", h.n);
	cr_assert_eq(h.v[0].op, MEMD_MEM_ADD);
	cr_assert_eq(h.v[1].op, MEMD_MEM_UPDATE);
	cr_assert_eq(h.v[2].op, MEMD_MEM_UPDATE);
	cr_assert_eq(h.v[3].op, MEMD_MEM_DELETE);
	cr_assert_eq(h.v[0].memory.version, 1);
	cr_assert_eq(h.v[1].memory.version, 2);
	cr_assert_eq(h.v[2].memory.version, 3);
	cr_assert_eq(h.v[3].memory.version, 3, "a delete's snapshot is the memory as it was");
	cr_assert_str_eq(h.v[0].memory.text, "v1");
	cr_assert_str_eq(h.v[1].memory.text, "v2");
	cr_assert_str_eq(h.v[3].memory.text, "v3");
	cr_assert_eq(h.v[0].at_us, T0);
	cr_assert_eq(h.v[1].at_us, T0 + 5);
	cr_assert_eq(h.v[3].at_us, T0 + 20);
	cr_assert_eq(h.v[1].memory.created_us, T0);
	cr_assert_eq(h.v[1].memory.updated_us, T0 + 5);
	cr_assert_str_eq(h.v[0].actor, "api");
	conf_assert_str_or_null(h.v[0].reason, NULL, "the add's reason");
	cr_assert_str_eq(h.v[1].actor, "extractor");
	conf_assert_str_or_null(h.v[1].reason, "newer statement", "the update's reason");
	cr_assert_str_eq(h.v[3].actor, "mcp");
	conf_assert_str_or_null(h.v[3].reason, "user asked", "the delete's reason");
	for (size_t i = 0; i < h.n; i++) {
		cr_assert_str_eq(h.v[i].memory.id, "h");
		cr_assert_str_eq(h.v[i].memory.app, APP);
		cr_assert_str_eq(h.v[i].memory.user, USER);
	}
	conf_memory_changes_clear(&h);

	cr_assert_eq(conf_memory_history(st, APP, USER, "unknown", &h), MEMD_ENOTFOUND);
	cr_assert_eq(h.n, 0);
	cr_assert_eq(conf_memory_history(st, APP, USER2, "h", &h), MEMD_ENOTFOUND,
		     "another user sees the history");
	cr_assert_eq(conf_user_delete(st, APP, USER), 0, "%s", st->err.msg);
	cr_assert_eq(conf_memory_history(st, APP, USER, "h", &h), MEMD_ENOTFOUND,
		     "the history outlived user_delete");
	conf_memory_changes_clear(&h);
}

/* ---- the feed --------------------------------------------------------- */

/* The feed's records of memory id (MEMORY and MEMORY_DELETE), counted. */
static size_t feed_count(const conf_feed *f, uint32_t kind, const char *id)
{
	size_t n = 0;
	for (size_t i = 0; i < f->n; i++)
		if (f->v[i].kind == kind && conf_str_eq(f->v[i].memory.id, id))
			n++;
	return n;
}

static void assert_strictly_increasing(const conf_feed *f)
{
	for (size_t i = 1; i < f->n; i++)
		cr_assert_gt(f->v[i].position, f->v[i - 1].position,
			     "feed positions not strictly increasing at %zu", i);
}

Test(memories, feed_carries_memories_in_position_order)
{
	memd_scope sc = conf_scope(APP, USER, "s");
	conf_feed f = { 0 };
	conf_memory a, u;
	memd_memory m = mem(APP, USER, "fm", "first text");
	int64_t ev1_pos = 0, ev2_pos = 0, old_pos, start;
	size_t mem_recs = 0;

	session_ok(APP, USER, "s", T0);
	start = conf_feed_last(st);
	conf_append_simple(st, &sc, "e", 1, 1, T0 + 1);
	m.topics_json = "[\"t\"]";
	m.source_session = "s";
	a = commit1_ok(APP, USER, MEMD_MEM_ADD, &m, 0, T0 + 2);
	conf_append_simple(st, &sc, "e", 2, 1, T0 + 3);

	cr_assert_eq(conf_feed_read(st, start, CONF_FEED_ALL, &f), 0, "%s", st->err.msg);
	cr_assert_eq(f.n, 3, "feed has %zu records", f.n);
	assert_strictly_increasing(&f);
	cr_assert_eq(f.v[0].kind, MEMD_FEED_EVENT);
	ev1_pos = f.v[0].position;
	cr_assert_eq(f.v[1].kind, MEMD_FEED_MEMORY);
	cr_assert_gt(f.v[1].position, ev1_pos);
	cr_assert_eq(f.v[1].position, a.m.position, "the record's position is the memory's");
	cr_assert_eq(f.v[1].memory.position, f.v[1].position);
	cr_assert_str_eq(f.v[1].app, APP);
	cr_assert_str_eq(f.v[1].user, USER);
	cr_assert_str_eq(f.v[1].memory.id, "fm");
	cr_assert_str_eq(f.v[1].memory.app, APP);
	cr_assert_str_eq(f.v[1].memory.user, USER);
	cr_assert_str_eq(f.v[1].memory.text, "first text");
	cr_assert_str_eq(f.v[1].memory.kind, "fact");
	cr_assert(conf_json_equal(f.v[1].memory.topics_json, "[\"t\"]"));
	cr_assert_str_eq(f.v[1].memory.source_session, "s");
	cr_assert_eq(f.v[1].memory.version, 1);
	cr_assert_eq(f.v[1].memory.created_us, T0 + 2);
	cr_assert_eq(f.v[2].kind, MEMD_FEED_EVENT);
	ev2_pos = f.v[2].position;
	old_pos = a.m.position;
	conf_feed_clear(&f);

	/* An update moves the memory to a new position after everything. */
	m.text = "second text";
	u = commit1_ok(APP, USER, MEMD_MEM_UPDATE, &m, 1, T0 + 4);
	cr_assert_gt(u.m.position, ev2_pos);
	cr_assert_eq(conf_feed_read(st, start, CONF_FEED_ALL, &f), 0, "%s", st->err.msg);
	assert_strictly_increasing(&f);
	cr_assert_eq(feed_count(&f, MEMD_FEED_MEMORY, "fm"), 1,
		     "an updated memory is read at its old position too");
	for (size_t i = 0; i < f.n; i++) {
		cr_assert_neq(f.v[i].position, old_pos, "the old position was read again");
		if (f.v[i].kind == MEMD_FEED_MEMORY) {
			cr_assert_eq(f.v[i].position, u.m.position);
			cr_assert_str_eq(f.v[i].memory.text, "second text");
			cr_assert_eq(f.v[i].memory.version, 2);
		}
	}
	conf_feed_clear(&f);
	/* A reader past the old position sees the new one. */
	cr_assert_eq(conf_feed_read(st, ev2_pos, CONF_FEED_ALL, &f), 0, "%s", st->err.msg);
	cr_assert_eq(f.n, 1);
	cr_assert_eq(f.v[0].kind, MEMD_FEED_MEMORY);
	cr_assert_eq(f.v[0].position, u.m.position);
	conf_feed_clear(&f);

	/* A delete adds a tombstone after it. */
	{
		memd_memory_write w = wr(MEMD_MEM_DELETE, &m, 2);
		cr_assert_eq(commit_n(APP, USER, &w, 1, T0 + 5, NULL), 0, "%s", st->err.msg);
	}
	conf_append_simple(st, &sc, "e", 3, 1, T0 + 6);
	cr_assert_eq(conf_feed_read(st, u.m.position, CONF_FEED_ALL, &f), 0, "%s", st->err.msg);
	assert_strictly_increasing(&f);
	cr_assert_eq(f.n, 2, "after the update: %zu records", f.n);
	cr_assert_eq(f.v[0].kind, MEMD_FEED_MEMORY_DELETE);
	cr_assert_str_eq(f.v[0].app, APP);
	cr_assert_str_eq(f.v[0].user, USER);
	conf_assert_str_or_null(f.v[0].session, NULL, "a MEMORY_DELETE's session");
	cr_assert_str_eq(f.v[0].memory.app, APP);
	cr_assert_str_eq(f.v[0].memory.user, USER);
	cr_assert_str_eq(f.v[0].memory.id, "fm");
	cr_assert_eq(f.v[1].kind, MEMD_FEED_EVENT);
	conf_feed_clear(&f);

	/* Paging the whole feed one record at a time gives the same order. */
	{
		conf_feed all = { 0 };
		int64_t after = start;
		cr_assert_eq(conf_feed_read(st, start, CONF_FEED_ALL, &all), 0, "%s", st->err.msg);
		for (size_t i = 0; i < all.n; i++) {
			cr_assert_eq(conf_feed_read(st, after, 1, &f), 0, "%s", st->err.msg);
			cr_assert_eq(f.n, 1);
			cr_assert_eq(f.v[0].position, all.v[i].position);
			cr_assert_eq(f.v[0].kind, all.v[i].kind);
			if (f.v[0].kind == MEMD_FEED_MEMORY)
				mem_recs++;
			after = f.v[0].position;
			conf_feed_clear(&f);
		}
		cr_assert_eq(conf_feed_read(st, after, 1, &f), 0);
		cr_assert_eq(f.n, 0);
		conf_feed_clear(&all);
	}
	cr_assert_eq(mem_recs, 0, "a deleted memory's MEMORY record is still read");
	conf_memory_clear(&a);
	conf_memory_clear(&u);
}

/* ---- deletes of users and sessions ------------------------------------ */

Test(memories, user_delete_removes_memories_session_delete_leaves_them)
{
	memd_scope sc = conf_scope(APP, USER, "s");
	memd_memory_query q = { .now_us = T0 };
	conf_feed f = { 0 };
	int64_t before;
	conf_memory g = { 0 };

	session_ok(APP, USER, "s", T0);
	conf_append_simple(st, &sc, "e", 1, 2, T0 + 1);
	add_tagged("keep", "fact", "[]", "[]", "s", T0 + 2);
	add_quiet(APP, USER, "k2", "another", T0 + 3);
	add_quiet(APP, USER2, "k2", "of the other user", T0 + 3);
	add_quiet(APP2, USER, "k2", "of the other app", T0 + 3);

	cr_assert_eq(conf_session_delete(st, APP, USER, "s"), 0, "%s", st->err.msg);
	g = get_ok(APP, USER, "keep", T0 + 4);
	conf_assert_str_or_null(g.m.source_session, "s", "source_session after session_delete");
	conf_memory_clear(&g);
	q.session = "s";
	assert_list(APP, USER, &q, "keep", "after session_delete");

	before = conf_feed_last(st);
	cr_assert_eq(conf_user_delete(st, APP, USER), 0, "%s", st->err.msg);
	assert_absent(APP, USER, "keep", T0 + 4);
	assert_absent(APP, USER, "k2", T0 + 4);
	q = (memd_memory_query){ .now_us = T0 };
	assert_list(APP, USER, &q, "", "after user_delete");
	cr_assert_eq(history_len(APP, USER, "k2"), 0);
	cr_assert_eq(conf_feed_read(st, before, CONF_FEED_ALL, &f), 0, "%s", st->err.msg);
	cr_assert_eq(f.n, 1, "user_delete added %zu records", f.n);
	cr_assert_eq(f.v[0].kind, MEMD_FEED_DELETE_USER);
	conf_feed_clear(&f);
	/* The user's MEMORY records left the feed with the rows. */
	cr_assert_eq(conf_feed_read(st, 0, CONF_FEED_ALL, &f), 0, "%s", st->err.msg);
	for (size_t i = 0; i < f.n; i++)
		if (f.v[i].kind == MEMD_FEED_MEMORY)
			cr_assert(!(conf_str_eq(f.v[i].app, APP) && conf_str_eq(f.v[i].user, USER)),
				  "a deleted user's memory %s is still in the feed",
				  f.v[i].memory.id);
	cr_assert_eq(feed_count(&f, MEMD_FEED_MEMORY, "k2"), 2);
	conf_feed_clear(&f);

	g = get_ok(APP, USER2, "k2", T0 + 4);
	cr_assert_str_eq(g.m.text, "of the other user");
	conf_memory_clear(&g);
	g = get_ok(APP2, USER, "k2", T0 + 4);
	cr_assert_str_eq(g.m.text, "of the other app");
	conf_memory_clear(&g);
	cr_assert_eq(history_len(APP2, USER, "k2"), 1);
}

/* ---- isolation -------------------------------------------------------- */

Test(memories, users_and_apps_are_isolated)
{
	memd_memory m = mem(APP, USER, "same", "of mu in mapp");
	memd_memory_write w;
	memd_memory_query q = { .now_us = T0 };
	conf_memory g = { 0 };

	add_quiet(APP, USER, "same", "of mu in mapp", T0);
	add_quiet(APP, USER2, "same", "of mu2 in mapp", T0);
	add_quiet(APP2, USER, "same", "of mu in mapp2", T0);
	add_quiet(APP, USER2, "only2", "only mu2 has it", T0 + 1);

	m.text = "changed";
	g = commit1_ok(APP, USER, MEMD_MEM_UPDATE, &m, 1, T0 + 2);
	conf_memory_clear(&g);
	g = get_ok(APP, USER2, "same", T0 + 2);
	cr_assert_str_eq(g.m.text, "of mu2 in mapp");
	cr_assert_eq(g.m.version, 1);
	conf_memory_clear(&g);
	g = get_ok(APP2, USER, "same", T0 + 2);
	cr_assert_str_eq(g.m.text, "of mu in mapp2");
	conf_memory_clear(&g);

	assert_absent(APP, USER, "only2", T0 + 2);
	m = mem(APP, USER, "only2", "x");
	w = wr(MEMD_MEM_UPDATE, &m, 0);
	cr_assert_eq(commit_n(APP, USER, &w, 1, T0 + 3, NULL), MEMD_ENOTFOUND,
		     "an update reached another user's memory");
	w = wr(MEMD_MEM_DELETE, &m, 0);
	cr_assert_eq(commit_n(APP, USER, &w, 1, T0 + 3, NULL), MEMD_ENOTFOUND);
	assert_list(APP, USER, &q, "same", "mu in mapp");
	q = (memd_memory_query){ .now_us = T0 };
	assert_list(APP, USER2, &q, "only2,same", "mu2 in mapp");
	q = (memd_memory_query){ .now_us = T0 };
	assert_list(APP2, USER, &q, "same", "mu in mapp2");
	cr_assert_eq(history_len(APP, USER, "same"), 2);
	cr_assert_eq(history_len(APP, USER2, "same"), 1);

	m = mem(APP, USER, "same", "x");
	w = wr(MEMD_MEM_DELETE, &m, 0);
	cr_assert_eq(commit_n(APP, USER, &w, 1, T0 + 4, NULL), 0, "%s", st->err.msg);
	g = get_ok(APP, USER2, "same", T0 + 4);
	conf_memory_clear(&g);
	g = get_ok(APP2, USER, "same", T0 + 4);
	conf_memory_clear(&g);
}

/* ---- pending sessions ------------------------------------------------- */

/* Listed ids joined as "app/user/id,..." into buf. */
static const char *pending_ids(const conf_sessions *l, char *buf, size_t cap, size_t *used)
{
	for (size_t i = 0; i < l->n; i++) {
		int w = snprintf(buf + *used, cap - *used, "%s%s/%s/%s", *used ? "," : "",
				 l->v[i].app, l->v[i].user, l->v[i].id);
		cr_assert(w >= 0 && (size_t)w < cap - *used);
		*used += (size_t)w;
	}
	return buf;
}

static void assert_pending(memd_pending_query *q, const char *want, const char *what)
{
	conf_sessions l = { 0 };
	char buf[IDS_MAX] = "";
	size_t used = 0;

	if (!q->limit)
		q->limit = 100;
	cr_assert_eq(conf_session_list_pending(st, q, &l), 0, "%s: %s", what, st->err.msg);
	pending_ids(&l, buf, sizeof(buf), &used);
	cr_assert_str_eq(buf, want, "%s: pending %s, expected %s", what, buf, want);
	conf_sessions_clear(&l);
}

static void session_with_events(const char *app, const char *user, const char *id,
				int events, int64_t updated_us)
{
	memd_scope sc = conf_scope(app, user, id);
	session_ok(app, user, id, updated_us - 1);
	if (events)
		conf_append_simple(st, &sc, "e", 1, events, updated_us);
}

Test(memories, session_list_pending_order_bounds_and_paging)
{
	memd_pending_query q;
	char all[IDS_MAX] = "";
	size_t used = 0;
	int64_t after_us = 0;
	char after_app[ID_LEN] = "", after_user[ID_LEN] = "", after_id[ID_LEN] = "";
	int pages = 0;

	/* updated_us: T0+10 (three sessions tie), T0+20, T0+30, T0+40. */
	session_with_events(APP2, USER, "a", 2, T0 + 10);
	session_with_events(APP, USER2, "b", 1, T0 + 10);
	session_with_events(APP, USER, "c", 3, T0 + 10);
	session_with_events(APP, USER, "empty", 0, T0 + 15);
	session_with_events(APP, USER, "d", 1, T0 + 20);
	session_with_events(APP, USER, "read", 2, T0 + 25);
	cr_assert_eq(cursor_commit(APP, USER, "read", 0, 2, T0 + 26), 0, "%s", st->err.msg);
	session_with_events(APP, USER, "half", 4, T0 + 30);
	cr_assert_eq(cursor_commit(APP, USER, "half", 0, 2, T0 + 31), 0, "%s", st->err.msg);
	session_with_events(APP2, USER2, "z", 1, T0 + 40);

	q = (memd_pending_query){ .updated_before_us = T0 + 1000 };
	assert_pending(&q,
		       "mapp/mu/c,mapp/mu2/b,mapp2/mu/a,mapp/mu/d,mapp/mu/half,mapp2/mu2/z",
		       "every pending session");
	q = (memd_pending_query){ .updated_after_us = T0 + 10, .updated_before_us = T0 + 40 };
	assert_pending(&q, "mapp/mu/d,mapp/mu/half", "bounds are exclusive");
	q = (memd_pending_query){ .updated_before_us = T0 + 10 };
	assert_pending(&q, "", "nothing before the oldest");
	q = (memd_pending_query){ .updated_before_us = T0 + 1000, .after_updated_us = T0 + 10,
				  .after_app = APP, .after_user = USER2, .after_id = "b" };
	assert_pending(&q, "mapp2/mu/a,mapp/mu/d,mapp/mu/half,mapp2/mu2/z",
		       "keyset inside a tie of updated_us");

	/* Pages of two give every one once, in order. */
	for (;;) {
		conf_sessions l = { 0 };
		q = (memd_pending_query){ .limit = 2, .updated_before_us = T0 + 1000,
					  .after_updated_us = after_us,
					  .after_app = after_app[0] ? after_app : NULL,
					  .after_user = after_user[0] ? after_user : NULL,
					  .after_id = after_id[0] ? after_id : NULL };
		cr_assert_eq(conf_session_list_pending(st, &q, &l), 0, "%s", st->err.msg);
		cr_assert_leq(l.n, 2);
		pending_ids(&l, all, sizeof(all), &used);
		if (l.n < 2) {
			conf_sessions_clear(&l);
			break;
		}
		after_us = l.v[1].updated_us;
		snprintf(after_app, sizeof(after_app), "%s", l.v[1].app);
		snprintf(after_user, sizeof(after_user), "%s", l.v[1].user);
		snprintf(after_id, sizeof(after_id), "%s", l.v[1].id);
		conf_sessions_clear(&l);
		cr_assert_lt(++pages, 10, "paging does not end");
	}
	cr_assert_str_eq(all, "mapp/mu/c,mapp/mu2/b,mapp2/mu/a,mapp/mu/d,mapp/mu/half,mapp2/mu2/z",
			 "pages gave %s", all);

	/* Reading every event takes a session off the list. */
	cr_assert_eq(cursor_commit(APP, USER, "c", 0, 3, T0 + 50), 0, "%s", st->err.msg);
	cr_assert_eq(cursor_commit(APP, USER, "half", 2, 4, T0 + 50), 0, "%s", st->err.msg);
	q = (memd_pending_query){ .updated_before_us = T0 + 1000 };
	assert_pending(&q, "mapp/mu2/b,mapp2/mu/a,mapp/mu/d,mapp2/mu2/z", "after cursor commits");
	/* A new event puts it back. */
	{
		memd_scope sc = conf_scope(APP, USER, "c");
		conf_append_simple(st, &sc, "x", 1, 1, T0 + 60);
	}
	q = (memd_pending_query){ .updated_before_us = T0 + 1000 };
	assert_pending(&q, "mapp/mu2/b,mapp2/mu/a,mapp/mu/d,mapp2/mu2/z,mapp/mu/c",
		       "after a new event");
}

/* ---- races ------------------------------------------------------------ */

#define RACE_ROUNDS 20
#define RACE_THREADS 2

static int32_t ignore_memory(void *ud, const memd_memory *m)
{
	(void)ud;
	(void)m;
	return 0;
}

static void *race_commit(void *p)
{
	conf_racer *a = p;
	char id[ID_LEN];
	memd_call call = { .struct_size = sizeof(call) };
	memd_scope sc = conf_scope(APP, USER, NULL);
	memd_memory m;
	memd_memory_write w;
	const memd_memory_write *ws[1] = { &w };
	memd_memory_commit c;
	memd_memory_sink sink = { sizeof(sink), NULL, ignore_memory };

	snprintf(id, sizeof(id), "r%d-t%d", a->round, a->thread);
	m = mem(APP, USER, id, "raced");
	w = wr(MEMD_MEM_ADD, &m, 0);
	c = (memd_memory_commit){ .struct_size = sizeof(c), .n_writes = 1, .writes = ws,
				  .cursor_session = "s", .expected_cursor_seq = a->round,
				  .new_cursor_seq = a->round + 1, .now_us = T0 + a->round };
	a->err.struct_size = sizeof(a->err);
	pthread_barrier_wait(a->start);
	a->result = a->ops->memory_commit(a->h, &call, &sc, &c, &sink, &a->err);
	return NULL;
}

Test(memories, racing_cursor_commits_have_one_winner)
{
	memd_scope sc = conf_scope(APP, USER, "s");
	void *twin, *h[2];

	session_ok(APP, USER, "s", T0);
	conf_append_simple(st, &sc, "e", 1, RACE_ROUNDS, T0);
	conf_race_instances(st, &twin, h);
	for (int round = 0; round < RACE_ROUNDS; round++) {
		conf_racer args[RACE_THREADS];
		int winners = 0;

		conf_race_round(st, h, round, race_commit, args, RACE_THREADS);
		for (int t = 0; t < RACE_THREADS; t++) {
			char id[ID_LEN];
			snprintf(id, sizeof(id), "r%d-t%d", round, t);
			if (args[t].result == 0) {
				winners++;
				cr_assert_eq(conf_memory_get(st, APP, USER, id, T0, NULL), 0,
					     "round %d: the winner's memory: %s", round,
					     st->err.msg);
			} else {
				cr_assert_eq(args[t].result, MEMD_ECONFLICT,
					     "round %d: a losing commit gave %d (%s)", round,
					     args[t].result, args[t].err.msg);
				assert_absent(APP, USER, id, T0);
				cr_assert_eq(history_len(APP, USER, id), 0,
					     "round %d: the loser left history", round);
			}
		}
		cr_assert_eq(winners, 1, "round %d: %d commits with one cursor won", round,
			     winners);
		cr_assert_eq(memory_seq_of(APP, USER, "s"), round + 1);
	}
	conf_twin_close(twin);
}

/* ---- durability and cost ---------------------------------------------- */

Test(memories, durable_across_reopen)
{
	memd_scope sc = conf_scope(APP, USER, "s");
	conf_memory g = { 0 };
	int32_t r;

	session_ok(APP, USER, "s", T0);
	conf_append_simple(st, &sc, "e", 1, 2, T0);
	add_quiet(APP, USER, "d", "durable", T0);
	cr_assert_eq(cursor_commit(APP, USER, "s", 0, 2, T0 + 1), 0, "%s", st->err.msg);
	conf_reopen(st);
	if (!st->durable)
		return;
	r = conf_memory_get(st, APP, USER, "d", T0, &g);
	cr_assert_eq(r, 0, "the memory was lost across reopen: %s", st->err.msg);
	cr_assert_str_eq(g.m.text, "durable");
	conf_memory_clear(&g);
	cr_assert_eq(history_len(APP, USER, "d"), 1);
	cr_assert_eq(memory_seq_of(APP, USER, "s"), 2, "memory_seq was lost across reopen");
}

#define BIG_USERS 3
#define BIG_MEMS 40           /* per user */
#define BIG_PAGE 5
/* How many rows beyond those returned a listing may examine. */
#define ROWS_SLACK 8

static void assert_list_cheap(const char *user, memd_memory_query *q, const char *what)
{
	conf_memories l = { 0 };

	q->limit = BIG_PAGE;
	st->rows_read = 0;
	cr_assert_eq(conf_memory_list(st, APP, user, q, &l), 0, "%s: %s", what, st->err.msg);
	cr_assert_eq(l.n, BIG_PAGE, "%s: %zu memories", what, l.n);
	cr_assert_geq(st->rows_read, BIG_PAGE, "%s: rows_read %llu: the store does not count rows",
		      what, (unsigned long long)st->rows_read);
	cr_assert_leq(st->rows_read, BIG_PAGE + ROWS_SLACK, "%s examined %llu rows of %d", what,
		      (unsigned long long)st->rows_read, BIG_USERS * BIG_MEMS);
	conf_memories_clear(&l);
}

Test(memories, memory_list_rows_read_bounded)
{
	static const char *const users[BIG_USERS] = { "ua", "ub", "uc" };
	memd_memory_query q;

	for (int k = 0; k < BIG_MEMS; k++) {
		for (int u = 0; u < BIG_USERS; u++) {
			char id[ID_LEN];
			snprintf(id, sizeof(id), "m%03d", k);
			add_quiet(APP, users[u], id, "text", T0 + k * BIG_USERS + u);
		}
	}
	q = (memd_memory_query){ .now_us = T0 };
	assert_list_cheap("ub", &q, "a user's newest");
	q = (memd_memory_query){ .now_us = T0, .before_created_us = T0 + 20 * BIG_USERS + 1,
				 .before_id = "m020" };
	assert_list_cheap("ub", &q, "a user's page in the middle");
}
