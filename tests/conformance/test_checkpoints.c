/* SPDX-License-Identifier: MIT */
/*
 * The checkpoints part of the session-store conformance suite (since
 * 1.5): the "Checkpoints" paragraph at the top of api/memd/store.h and the
 * contracts of memd_checkpoint, memd_checkpoint_write(s),
 * memd_checkpoint_query, memd_resumable_query and the checkpoint ops, run
 * unchanged against every store plugin (see store_harness.h). A store
 * without the checkpoint ops is skipped unless
 * MEMD_CONFORMANCE_CHECKPOINTS=1.
 *
 * The head of a session (its newest root checkpoint) is only visible
 * through checkpoint_resumable, so the head tests read it there.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_harness.h"

#define APP "capp"
#define APP2 "capp2"
#define USER "cu"
#define USER2 "cu2"
#define T0 1700000000000000LL /* a plausible unix time in us */
#define NOW (T0 + 1000000)    /* the reads' now_us unless a test says otherwise */
#define SUITE_TIMEOUT_S 180
#define LIST_ALL 1000u        /* a limit larger than any listing a test makes */
#define KEYS_MAX 4096         /* room for a listing's keys */
/* Every run state bit of a memd_resumable_query mask. */
#define RUN_MASK_ALL ((1u << MEMD_RUN_RUNNING) | (1u << MEMD_RUN_INTERRUPTED) | \
		      (1u << MEMD_RUN_DONE))
#define RUN_MASK_RESUME ((1u << MEMD_RUN_RUNNING) | (1u << MEMD_RUN_INTERRUPTED))

static conf_store *st;

static void setup(void)
{
	st = conf_open();
	conf_require_checkpoints(st);
}

static void teardown(void)
{
	conf_close(st);
	st = NULL;
}

TestSuite(checkpoints, .init = setup, .fini = teardown, .timeout = SUITE_TIMEOUT_S);

/* ---- helpers ---------------------------------------------------------- */

/* A checkpoint whose payload is its id's bytes, type "json", metadata {}
 * and no parent, run state UNSET, never expiring. */
static memd_checkpoint ck(const char *app, const char *user, const char *session,
			  const char *ns, const char *id)
{
	memd_checkpoint c = { .struct_size = sizeof(c), .app = app, .user = user,
			      .session = session, .ns = ns, .id = id, .type = "json",
			      .payload = id, .payload_size = strlen(id), .metadata_json = "{}" };
	return c;
}

static void put_ok(const memd_checkpoint *c, int64_t now_us)
{
	int32_t r = conf_checkpoint_put(st, c, 1, now_us, NULL);
	cr_assert_eq(r, 0, "checkpoint_put(%s/%s/%s ns '%s' id %s): %s", c->app, c->user,
		     c->session, c->ns, c->id, st->err.msg);
}

/* Put (creating the session) a checkpoint with the given expiry and run
 * state. */
static void put_at(const char *app, const char *user, const char *session, const char *ns,
		   const char *id, int64_t expires_us, uint32_t run_state, int64_t now_us)
{
	memd_checkpoint c = ck(app, user, session, ns, id);
	c.expires_us = expires_us;
	c.run_state = run_state;
	put_ok(&c, now_us);
}

static void put_simple(const char *session, const char *ns, const char *id)
{
	put_at(APP, USER, session, ns, id, 0, MEMD_RUN_UNSET, T0);
}

static memd_checkpoint_write ckw(const char *task_id, int64_t idx, const char *channel,
				 const char *value, uint32_t flags)
{
	memd_checkpoint_write w = { .struct_size = sizeof(w), .flags = flags,
				    .task_id = task_id, .idx = idx, .channel = channel,
				    .type = "json", .value = value,
				    .value_size = strlen(value) };
	return w;
}

static int32_t put_writes(const char *app, const char *user, const char *session,
			  const char *ns, const char *id, const memd_checkpoint_write *ws,
			  uint32_t n, uint32_t run_state, int64_t now_us)
{
	memd_scope sc = conf_scope(app, user, session);
	memd_checkpoint_writes w = { .run_state = run_state, .ns = ns, .checkpoint_id = id,
				     .writes = ws, .n_writes = n, .now_us = now_us };
	return conf_checkpoint_put_writes(st, &sc, &w);
}

static conf_checkpoint get_ok(const char *app, const char *user, const char *session,
			      const char *ns, const char *id, int64_t now_us)
{
	memd_scope sc = conf_scope(app, user, session);
	conf_checkpoint c = { 0 };
	int32_t r = conf_checkpoint_get(st, &sc, ns, id, now_us, 1, &c);
	cr_assert_eq(r, 0, "checkpoint_get(%s ns '%s' id %s): %s", session, ns,
		     id ? id : "(latest)", st->err.msg);
	return c;
}

static void assert_get_absent(const char *app, const char *user, const char *session,
			      const char *ns, const char *id, int64_t now_us)
{
	memd_scope sc = conf_scope(app, user, session);
	int32_t r = conf_checkpoint_get(st, &sc, ns, id, now_us, 1, NULL);
	cr_assert_eq(r, MEMD_ENOTFOUND,
		     "checkpoint_get(%s ns '%s' id %s) gave %d, expected ENOTFOUND", session,
		     ns, id ? id : "(latest)", r);
}

/* The id of the newest unexpired checkpoint of (session, ns) at now_us. */
static void assert_latest(const char *session, const char *ns, const char *want,
			  int64_t now_us)
{
	conf_checkpoint c = get_ok(APP, USER, session, ns, NULL, now_us);
	cr_assert_str_eq(c.c.id, want, "latest of %s ns '%s' is %s, expected %s", session, ns,
			 c.c.id, want);
	conf_checkpoint_clear(&c);
}

/* "id@session:ns" of each listed checkpoint, joined by ','. */
static const char *keys_of(const conf_checkpoints *l, char *buf, size_t cap)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < l->n; i++) {
		int w = snprintf(buf + used, cap - used, "%s%s@%s:%s", i ? "," : "",
				 l->v[i].c.id, l->v[i].c.session, l->v[i].c.ns);
		cr_assert(w >= 0 && (size_t)w < cap - used, "key list too long");
		used += (size_t)w;
	}
	return buf;
}

static void assert_list(const char *app, const char *user, memd_checkpoint_query *q,
			const char *want, const char *what)
{
	conf_checkpoints l = { 0 };
	char buf[KEYS_MAX];
	int32_t r;

	if (!q->limit)
		q->limit = LIST_ALL;
	if (!q->now_us)
		q->now_us = NOW;
	r = conf_checkpoint_list(st, app, user, q, 0, &l);
	cr_assert_eq(r, 0, "%s: checkpoint_list: %s", what, st->err.msg);
	cr_assert_str_eq(keys_of(&l, buf, sizeof(buf)), want, "%s: listed %s, expected %s",
			 what, buf, want);
	for (size_t i = 0; i < l.n; i++) {
		cr_assert_str_eq(l.v[i].c.app, app, "%s: app", what);
		cr_assert_str_eq(l.v[i].c.user, user, "%s: user", what);
		cr_assert_eq(l.v[i].n_w, 0, "%s: writes delivered to a sink without write", what);
	}
	conf_checkpoints_clear(&l);
}

/* "user/session=id:state" of each resumable head, joined by ','. */
static const char *heads_of(const conf_checkpoints *l, char *buf, size_t cap)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < l->n; i++) {
		int w = snprintf(buf + used, cap - used, "%s%s/%s=%s:%u", i ? "," : "",
				 l->v[i].c.user, l->v[i].c.session, l->v[i].c.id,
				 l->v[i].c.run_state);
		cr_assert(w >= 0 && (size_t)w < cap - used, "head list too long");
		used += (size_t)w;
	}
	return buf;
}

static void assert_resumable(const char *app, uint32_t mask, const char *after_user,
			     const char *after_session, uint32_t limit, int64_t now_us,
			     const char *want, const char *what)
{
	memd_resumable_query q = { .limit = limit ? limit : LIST_ALL, .app = app,
				   .run_states = mask, .now_us = now_us,
				   .after_user = after_user, .after_session = after_session };
	conf_checkpoints l = { 0 };
	char buf[KEYS_MAX];
	int32_t r = conf_checkpoint_resumable(st, &q, &l);

	cr_assert_eq(r, 0, "%s: checkpoint_resumable: %s", what, st->err.msg);
	cr_assert_str_eq(heads_of(&l, buf, sizeof(buf)), want, "%s: resumable %s, expected %s",
			 what, buf, want);
	for (size_t i = 0; i < l.n; i++) {
		cr_assert_str_eq(l.v[i].c.app, app, "%s: app", what);
		cr_assert_str_eq(l.v[i].c.ns, "", "%s: a head outside the root namespace", what);
		cr_assert_null(l.v[i].c.payload, "%s: resumable delivered a payload", what);
		cr_assert_eq(l.v[i].c.payload_size, 0, "%s: payload_size", what);
	}
	conf_checkpoints_clear(&l);
}

static uint32_t delete_ok(const char *app, const char *user, const char *session,
			  const char *ns)
{
	memd_scope sc = conf_scope(app, user, session);
	uint32_t n = UINT32_MAX;
	int32_t r = conf_checkpoint_delete(st, &sc, ns, &n);
	cr_assert_eq(r, 0, "checkpoint_delete(%s ns %s): %s", session, ns ? ns : "(all)",
		     st->err.msg);
	return n;
}

static uint32_t expire_ok(int64_t now_us, uint32_t limit)
{
	uint32_t n = UINT32_MAX;
	int32_t r = conf_checkpoint_expire(st, now_us, limit, &n);
	cr_assert_eq(r, 0, "checkpoint_expire: %s", st->err.msg);
	return n;
}

static void assert_write(const conf_ckwrite *w, const char *task_id, int64_t idx,
			 const char *channel, const char *value)
{
	cr_assert_str_eq(w->task_id, task_id);
	cr_assert_eq(w->idx, idx, "write of %s has idx %lld, expected %lld", task_id,
		     (long long)w->idx, (long long)idx);
	cr_assert_str_eq(w->channel, channel);
	cr_assert_str_eq(w->type, "json");
	cr_assert_eq(w->value_size, strlen(value), "value size of %s/%lld", task_id,
		     (long long)idx);
	cr_assert_eq(memcmp(w->value, value, strlen(value)), 0, "value of %s/%lld is %.*s",
		     task_id, (long long)idx, (int)w->value_size, (const char *)w->value);
}

/* ---- put ---------------------------------------------------------------- */

Test(checkpoints, put_inserts_with_every_field_and_unset_stores_running)
{
	static const char payload[] = { 'a', '\0', 'b', (char)0xff, '\n' };
	memd_checkpoint c = ck(APP, USER, "s1", "", "0001");
	conf_checkpoint g;
	int created = -1;

	c.parent_id = "0000";
	c.type = "msgpack";
	c.payload = payload;
	c.payload_size = sizeof(payload);
	c.metadata_json = "{\"source\":\"loop\",\"step\":1}";
	c.expires_us = NOW + 10;
	cr_assert_eq(conf_checkpoint_put(st, &c, 1, T0, &created), 0, "put: %s", st->err.msg);
	cr_assert_eq(created, 1, "the put created the session but said %d", created);

	g = get_ok(APP, USER, "s1", "", "0001", NOW);
	cr_assert_str_eq(g.c.app, APP);
	cr_assert_str_eq(g.c.user, USER);
	cr_assert_str_eq(g.c.session, "s1");
	cr_assert_str_eq(g.c.ns, "");
	cr_assert_str_eq(g.c.id, "0001");
	conf_assert_str_or_null(g.c.parent_id, "0000", "parent_id");
	cr_assert_str_eq(g.c.type, "msgpack");
	cr_assert_eq(g.c.payload_size, sizeof(payload));
	cr_assert_eq(memcmp(g.c.payload, payload, sizeof(payload)), 0, "payload bytes differ");
	cr_assert(conf_json_equal(g.c.metadata_json, "{\"step\":1,\"source\":\"loop\"}"),
		  "metadata %s", g.c.metadata_json);
	cr_assert_eq(g.c.run_state, MEMD_RUN_RUNNING, "UNSET stored as %u", g.c.run_state);
	cr_assert_eq(g.c.created_us, T0);
	cr_assert_eq(g.c.updated_us, T0);
	cr_assert_eq(g.c.expires_us, NOW + 10);
	cr_assert_eq(g.n_w, 0, "a new checkpoint has %zu writes", g.n_w);
	conf_checkpoint_clear(&g);

	/* No parent stays NULL; an empty payload is 0 bytes. */
	c = ck(APP, USER, "s1", "", "0002");
	c.payload = "";
	c.payload_size = 0;
	c.run_state = MEMD_RUN_INTERRUPTED;
	put_ok(&c, T0 + 1);
	g = get_ok(APP, USER, "s1", "", "0002", NOW);
	conf_assert_str_or_null(g.c.parent_id, NULL, "parent_id");
	cr_assert_eq(g.c.payload_size, 0);
	cr_assert_eq(g.c.run_state, MEMD_RUN_INTERRUPTED);
	cr_assert_eq(g.c.expires_us, 0);
	conf_checkpoint_clear(&g);
}

Test(checkpoints, put_replace_keeps_created_us_and_writes)
{
	memd_checkpoint c = ck(APP, USER, "s1", "", "0001");
	memd_checkpoint_write w[2] = { ckw("t1", 0, "a", "1", 0), ckw("t1", 1, "b", "2", 0) };
	conf_checkpoint g;

	c.run_state = MEMD_RUN_RUNNING;
	put_ok(&c, T0);
	cr_assert_eq(put_writes(APP, USER, "s1", "", "0001", w, 2, MEMD_RUN_UNSET, T0 + 1), 0,
		     "put_writes: %s", st->err.msg);

	c.parent_id = "0000";
	c.type = "pickle";
	c.payload = "second";
	c.payload_size = 6;
	c.metadata_json = "{\"step\":2}";
	c.run_state = MEMD_RUN_DONE;
	c.expires_us = NOW + 5;
	put_ok(&c, T0 + 10);

	g = get_ok(APP, USER, "s1", "", "0001", NOW);
	cr_assert_eq(g.c.created_us, T0, "created_us %lld changed on replace",
		     (long long)g.c.created_us);
	cr_assert_eq(g.c.updated_us, T0 + 10);
	conf_assert_str_or_null(g.c.parent_id, "0000", "parent_id");
	cr_assert_str_eq(g.c.type, "pickle");
	cr_assert_eq(g.c.payload_size, 6);
	cr_assert_eq(memcmp(g.c.payload, "second", 6), 0);
	cr_assert(conf_json_equal(g.c.metadata_json, "{\"step\":2}"));
	cr_assert_eq(g.c.run_state, MEMD_RUN_DONE);
	cr_assert_eq(g.c.expires_us, NOW + 5);
	cr_assert_eq(g.n_w, 2, "the replace lost writes: %zu left", g.n_w);
	assert_write(&g.w[0], "t1", 0, "a", "1");
	assert_write(&g.w[1], "t1", 1, "b", "2");
	conf_checkpoint_clear(&g);

	/* Replacing with UNSET stores RUNNING again; the parent can go. */
	c.run_state = MEMD_RUN_UNSET;
	c.parent_id = NULL;
	c.expires_us = 0;
	put_ok(&c, T0 + 20);
	g = get_ok(APP, USER, "s1", "", "0001", NOW);
	cr_assert_eq(g.c.run_state, MEMD_RUN_RUNNING);
	conf_assert_str_or_null(g.c.parent_id, NULL, "parent_id after replace");
	cr_assert_eq(g.c.expires_us, 0);
	cr_assert_eq(g.c.created_us, T0);
	conf_checkpoint_clear(&g);

	/* One row per id: the latest is still this one. */
	assert_list(APP, USER, &(memd_checkpoint_query){ 0 }, "0001@s1:", "after replace");
}

Test(checkpoints, put_create_session_on_and_off)
{
	memd_checkpoint c = ck(APP, USER, "s1", "", "0001");
	conf_session s = { 0 };
	int created = 7;

	/* Without create_session a missing session is ENOTFOUND and nothing
	 * is written, not even the session. */
	cr_assert_eq(conf_checkpoint_put(st, &c, 0, T0, &created), MEMD_ENOTFOUND, "gave: %s",
		     st->err.msg);
	cr_assert_eq(created, 7, "ret_created_session written on failure");
	cr_assert_eq(conf_session_get(st, APP, USER, "s1", NULL), MEMD_ENOTFOUND);
	cr_assert_eq(conf_session_create(st, APP, USER, "s1", "title", T0 - 5, NULL, NULL), 0,
		     "%s", st->err.msg);
	assert_get_absent(APP, USER, "s1", "", "0001", NOW);
	assert_get_absent(APP, USER, "s1", "", NULL, NOW);

	/* An existing session: 0 either way. */
	cr_assert_eq(conf_checkpoint_put(st, &c, 0, T0, &created), 0, "put: %s", st->err.msg);
	cr_assert_eq(created, 0, "an existing session was reported created");
	created = 7;
	c.id = "0002";
	cr_assert_eq(conf_checkpoint_put(st, &c, 1, T0 + 1, &created), 0, "put: %s",
		     st->err.msg);
	cr_assert_eq(created, 0, "an existing session was reported created");
	cr_assert_eq(conf_session_get(st, APP, USER, "s1", &s), 0);
	conf_assert_str_or_null(s.title, "title", "the existing session's title");
	cr_assert_eq(s.created_us, T0 - 5);
	conf_session_clear(&s);

	/* create_session makes the session as session_create would. */
	created = 7;
	c.session = "s2";
	cr_assert_eq(conf_checkpoint_put(st, &c, 1, T0 + 2, &created), 0, "put: %s",
		     st->err.msg);
	cr_assert_eq(created, 1);
	cr_assert_eq(conf_session_get(st, APP, USER, "s2", &s), 0, "%s", st->err.msg);
	conf_assert_str_or_null(s.title, NULL, "a created session's title");
	cr_assert(conf_json_equal(s.metadata_json, "{}"), "metadata %s", s.metadata_json);
	cr_assert_eq(s.created_us, T0 + 2);
	cr_assert_eq(s.updated_us, T0 + 2);
	cr_assert_eq(s.version, 0);
	cr_assert_eq(s.last_seq, 0);
	conf_session_clear(&s);

	/* ret_created_session may be NULL. */
	c.session = "s3";
	cr_assert_eq(conf_checkpoint_put(st, &c, 1, T0 + 3, NULL), 0, "put: %s", st->err.msg);
	cr_assert_eq(conf_session_get(st, APP, USER, "s3", NULL), 0, "%s", st->err.msg);
	c.id = "0003";
	cr_assert_eq(conf_checkpoint_put(st, &c, 1, T0 + 4, NULL), 0, "put: %s", st->err.msg);
	assert_latest("s3", "", "0003", NOW);

	/* The session belongs to (app, user): another user's is missing. */
	c.user = USER2;
	cr_assert_eq(conf_checkpoint_put(st, &c, 0, T0 + 5, NULL), MEMD_ENOTFOUND);
}

Test(checkpoints, namespaces_are_separate_and_empty_is_a_value)
{
	memd_checkpoint a = ck(APP, USER, "s1", "", "0001");
	memd_checkpoint b = ck(APP, USER, "s1", "sub", "0001");
	conf_checkpoint g;

	a.metadata_json = "{\"ns\":\"root\"}";
	b.metadata_json = "{\"ns\":\"sub\"}";
	put_ok(&a, T0);
	put_ok(&b, T0 + 1);
	put_simple("s1", "sub", "0002");

	g = get_ok(APP, USER, "s1", "", "0001", NOW);
	cr_assert(conf_json_equal(g.c.metadata_json, "{\"ns\":\"root\"}"));
	cr_assert_str_eq(g.c.ns, "");
	conf_checkpoint_clear(&g);
	g = get_ok(APP, USER, "s1", "sub", "0001", NOW);
	cr_assert(conf_json_equal(g.c.metadata_json, "{\"ns\":\"sub\"}"));
	cr_assert_str_eq(g.c.ns, "sub");
	conf_checkpoint_clear(&g);
	assert_latest("s1", "", "0001", NOW);
	assert_latest("s1", "sub", "0002", NOW);
	assert_get_absent(APP, USER, "s1", "", "0002", NOW);
	assert_get_absent(APP, USER, "s1", "other", NULL, NOW);
}

/* ---- pending writes ----------------------------------------------------- */

Test(checkpoints, put_writes_insert_or_keep_replace_and_order)
{
	memd_checkpoint_write first[5] = {
		ckw("b", 2, "c-b2", "b2", 0), ckw("a", 0, "c-a0", "a0", 0),
		ckw("b", -1, "c-b-1", "b-1", 0), ckw("B", 7, "c-B7", "B7", 0),
		ckw("b", 0, "c-b0", "b0", 0),
	};
	memd_checkpoint_write again[2] = { ckw("a", 0, "c-a0x", "kept?", 0),
					   ckw("b", 2, "c-b2y", "b2y", MEMD_CKW_REPLACE) };
	conf_checkpoint g;

	put_simple("s1", "", "0001");
	cr_assert_eq(put_writes(APP, USER, "s1", "", "0001", first, 5, MEMD_RUN_UNSET, T0 + 1), 0,
		     "put_writes: %s", st->err.msg);

	/* Ascending by (task_id, idx): task ids as bytes ("B" < "a" < "b"),
	 * idx as a signed number (-1 < 0 < 2). */
	g = get_ok(APP, USER, "s1", "", "0001", NOW);
	cr_assert_eq(g.n_w, 5, "%zu writes", g.n_w);
	assert_write(&g.w[0], "B", 7, "c-B7", "B7");
	assert_write(&g.w[1], "a", 0, "c-a0", "a0");
	assert_write(&g.w[2], "b", -1, "c-b-1", "b-1");
	assert_write(&g.w[3], "b", 0, "c-b0", "b0");
	assert_write(&g.w[4], "b", 2, "c-b2", "b2");
	conf_checkpoint_clear(&g);

	/* Without REPLACE a stored (task_id, idx) stays; with it, it is
	 * replaced. */
	cr_assert_eq(put_writes(APP, USER, "s1", "", "0001", again, 2, MEMD_RUN_UNSET, T0 + 2), 0,
		     "put_writes: %s", st->err.msg);
	g = get_ok(APP, USER, "s1", "", "0001", NOW);
	cr_assert_eq(g.n_w, 5, "%zu writes", g.n_w);
	assert_write(&g.w[1], "a", 0, "c-a0", "a0");
	assert_write(&g.w[4], "b", 2, "c-b2y", "b2y");
	conf_checkpoint_clear(&g);

	/* A sink without write gets none. */
	{
		memd_scope sc = conf_scope(APP, USER, "s1");
		cr_assert_eq(conf_checkpoint_get(st, &sc, "", "0001", NOW, 0, &g), 0);
		cr_assert_eq(g.n_w, 0, "writes delivered to a sink without write");
		conf_checkpoint_clear(&g);
	}

	/* Writes belong to one checkpoint: another id, namespace or session
	 * with the same key has none. */
	put_simple("s1", "", "0002");
	put_simple("s1", "x", "0001");
	put_simple("s2", "", "0001");
	g = get_ok(APP, USER, "s1", "", "0002", NOW);
	cr_assert_eq(g.n_w, 0);
	conf_checkpoint_clear(&g);
	g = get_ok(APP, USER, "s1", "x", "0001", NOW);
	cr_assert_eq(g.n_w, 0);
	conf_checkpoint_clear(&g);
	g = get_ok(APP, USER, "s2", "", "0001", NOW);
	cr_assert_eq(g.n_w, 0);
	conf_checkpoint_clear(&g);
}

Test(checkpoints, put_writes_needs_an_unexpired_checkpoint)
{
	memd_checkpoint_write w[1] = { ckw("t", 0, "c", "v", 0) };
	conf_checkpoint g;

	put_at(APP, USER, "s1", "", "0001", T0 + 100, MEMD_RUN_UNSET, T0);

	/* Missing id, namespace, session, user: ENOTFOUND. */
	cr_assert_eq(put_writes(APP, USER, "s1", "", "0002", w, 1, MEMD_RUN_UNSET, T0 + 1),
		     MEMD_ENOTFOUND);
	cr_assert_eq(put_writes(APP, USER, "s1", "x", "0001", w, 1, MEMD_RUN_UNSET, T0 + 1),
		     MEMD_ENOTFOUND);
	cr_assert_eq(put_writes(APP, USER, "nope", "", "0001", w, 1, MEMD_RUN_UNSET, T0 + 1),
		     MEMD_ENOTFOUND);
	cr_assert_eq(put_writes(APP, USER2, "s1", "", "0001", w, 1, MEMD_RUN_UNSET, T0 + 1),
		     MEMD_ENOTFOUND);
	/* Expired at now_us (expires_us <= now): ENOTFOUND, nothing written,
	 * the run state unchanged. */
	cr_assert_eq(put_writes(APP, USER, "s1", "", "0001", w, 1, MEMD_RUN_DONE, T0 + 100),
		     MEMD_ENOTFOUND);
	g = get_ok(APP, USER, "s1", "", "0001", T0 + 99);
	cr_assert_eq(g.n_w, 0, "a refused put_writes wrote %zu writes", g.n_w);
	cr_assert_eq(g.c.run_state, MEMD_RUN_RUNNING);
	cr_assert_eq(g.c.updated_us, T0);
	conf_checkpoint_clear(&g);

	/* The id that was missing, put now, has none of the refused writes. */
	put_simple("s1", "", "0002");
	g = get_ok(APP, USER, "s1", "", "0002", NOW);
	cr_assert_eq(g.n_w, 0);
	conf_checkpoint_clear(&g);

	/* Just before expiry it works. */
	cr_assert_eq(put_writes(APP, USER, "s1", "", "0001", w, 1, MEMD_RUN_UNSET, T0 + 99), 0,
		     "%s", st->err.msg);
	g = get_ok(APP, USER, "s1", "", "0001", T0 + 99);
	cr_assert_eq(g.n_w, 1);
	conf_checkpoint_clear(&g);
}

Test(checkpoints, put_writes_run_state_changes_checkpoint_and_head)
{
	memd_checkpoint_write w[1] = { ckw("t", 0, "__interrupt__", "{}", 0) };
	conf_checkpoint g;
	char want[KEYS_MAX];

	put_simple("s1", "", "0001");
	put_simple("s1", "", "0002");
	assert_resumable(APP, RUN_MASK_ALL, NULL, NULL, 0, NOW, USER "/s1=0002:1", "before");

	/* The head's run state follows its checkpoint's. */
	cr_assert_eq(put_writes(APP, USER, "s1", "", "0002", w, 1, MEMD_RUN_INTERRUPTED,
				T0 + 10),
		     0, "%s", st->err.msg);
	g = get_ok(APP, USER, "s1", "", "0002", NOW);
	cr_assert_eq(g.c.run_state, MEMD_RUN_INTERRUPTED);
	cr_assert_eq(g.c.updated_us, T0 + 10);
	cr_assert_eq(g.c.created_us, T0);
	cr_assert_eq(g.n_w, 1);
	conf_checkpoint_clear(&g);
	snprintf(want, sizeof(want), "%s/s1=0002:%u", USER, MEMD_RUN_INTERRUPTED);
	assert_resumable(APP, RUN_MASK_ALL, NULL, NULL, 0, NOW, want, "after interrupt");

	/* A run-state change alone (no writes). */
	cr_assert_eq(put_writes(APP, USER, "s1", "", "0002", NULL, 0, MEMD_RUN_RUNNING, T0 + 11),
		     0, "%s", st->err.msg);
	assert_resumable(APP, RUN_MASK_ALL, NULL, NULL, 0, NOW, USER "/s1=0002:1", "resumed");

	/* UNSET leaves it as it is. */
	cr_assert_eq(put_writes(APP, USER, "s1", "", "0002", NULL, 0, MEMD_RUN_UNSET, T0 + 12),
		     0, "%s", st->err.msg);
	g = get_ok(APP, USER, "s1", "", "0002", NOW);
	cr_assert_eq(g.c.run_state, MEMD_RUN_RUNNING);
	cr_assert_eq(g.c.updated_us, T0 + 11, "an UNSET put_writes moved updated_us");
	conf_checkpoint_clear(&g);

	/* Another checkpoint's state changes alone: the head stays. */
	cr_assert_eq(put_writes(APP, USER, "s1", "", "0001", NULL, 0, MEMD_RUN_DONE, T0 + 13), 0,
		     "%s", st->err.msg);
	g = get_ok(APP, USER, "s1", "", "0001", NOW);
	cr_assert_eq(g.c.run_state, MEMD_RUN_DONE);
	conf_checkpoint_clear(&g);
	assert_resumable(APP, RUN_MASK_ALL, NULL, NULL, 0, NOW, USER "/s1=0002:1",
			 "a non-head state change");

	/* Nor does a same-id checkpoint of another namespace. */
	put_simple("s1", "sub", "0002");
	cr_assert_eq(put_writes(APP, USER, "s1", "sub", "0002", NULL, 0, MEMD_RUN_DONE, T0 + 14),
		     0, "%s", st->err.msg);
	assert_resumable(APP, RUN_MASK_ALL, NULL, NULL, 0, NOW, USER "/s1=0002:1",
			 "a state change in another namespace");
}

/* ---- get ---------------------------------------------------------------- */

Test(checkpoints, get_latest_by_id_expired_and_missing)
{
	/* Bytes order: "a1" < "a10" < "a2". */
	put_simple("s1", "", "a1");
	put_simple("s1", "", "a2");
	put_simple("s1", "", "a10");
	assert_latest("s1", "", "a2", NOW);

	/* An expired newest one is skipped by the latest; by id it is gone. */
	put_at(APP, USER, "s1", "", "a3", T0 + 50, MEMD_RUN_UNSET, T0);
	assert_latest("s1", "", "a3", T0 + 49);
	assert_latest("s1", "", "a2", T0 + 50);
	assert_get_absent(APP, USER, "s1", "", "a3", T0 + 50);
	assert_get_absent(APP, USER, "s1", "", "a3", T0 + 51);

	/* Every one expired: none. */
	put_at(APP, USER, "s2", "", "b1", T0 + 10, MEMD_RUN_UNSET, T0);
	put_at(APP, USER, "s2", "", "b2", T0 + 20, MEMD_RUN_UNSET, T0);
	assert_latest("s2", "", "b2", T0 + 10);
	assert_get_absent(APP, USER, "s2", "", NULL, T0 + 20);

	/* Missing id, namespace, session, user, app. */
	assert_get_absent(APP, USER, "s1", "", "a4", NOW);
	assert_get_absent(APP, USER, "s1", "x", NULL, NOW);
	assert_get_absent(APP, USER, "nope", "", NULL, NOW);
	assert_get_absent(APP, USER, "nope", "", "a1", NOW);
	assert_get_absent(APP, USER2, "s1", "", "a1", NOW);
	assert_get_absent(APP2, USER, "s1", "", NULL, NOW);

	/* A session without checkpoints. */
	cr_assert_eq(conf_session_create(st, APP, USER, "s3", NULL, T0, NULL, NULL), 0);
	assert_get_absent(APP, USER, "s3", "", NULL, NOW);
}

Test(checkpoints, ids_order_as_bytes)
{
	/* Binary order: "Z" < "a" < "aa" < "~" < "\xc3\xa9" (é); a
	 * case-insensitive or locale collation orders them otherwise. */
	static const char *const ids[] = { "aa", "\xc3\xa9", "Z", "~", "a" };

	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
		put_simple("s1", "", ids[i]);
	assert_latest("s1", "", "\xc3\xa9", NOW);
	assert_list(APP, USER, &(memd_checkpoint_query){ 0 },
		    "\xc3\xa9@s1:,~@s1:,aa@s1:,a@s1:,Z@s1:", "binary order");
	assert_list(APP, USER, &(memd_checkpoint_query){ .before_id = "aa" }, "a@s1:,Z@s1:",
		    "before aa");
	assert_list(APP, USER, &(memd_checkpoint_query){ .before_id = "b" }, "aa@s1:,a@s1:,Z@s1:",
		    "before b");
	/* "A" and "a" are different ids. */
	put_simple("s1", "", "A");
	assert_get_absent(APP, USER, "s1", "", "AA", NOW);
	assert_list(APP, USER, &(memd_checkpoint_query){ .before_id = "a" }, "Z@s1:,A@s1:",
		    "before a");
	assert_resumable(APP, RUN_MASK_ALL, NULL, NULL, 0, NOW, USER "/s1=\xc3\xa9:1",
			 "the head is the greatest id");
}

/* ---- list --------------------------------------------------------------- */

/* s1 "": c1 c3 c5; s1 "x": c3 c4; s2 "": c2 c3 c6 (expired at NOW); s2 "x": c5;
 * plus another user's and another app's. */
static void list_fixture(void)
{
	put_simple("s1", "", "c1");
	put_simple("s1", "", "c3");
	put_simple("s1", "", "c5");
	put_simple("s1", "x", "c3");
	put_simple("s1", "x", "c4");
	put_simple("s2", "", "c2");
	put_simple("s2", "", "c3");
	put_at(APP, USER, "s2", "", "c6", NOW, MEMD_RUN_UNSET, T0);
	put_simple("s2", "x", "c5");
	put_at(APP, USER2, "s1", "", "c9", 0, MEMD_RUN_UNSET, T0);
	put_at(APP2, USER, "s1", "", "c8", 0, MEMD_RUN_UNSET, T0);
}

#define LIST_ALL_KEYS "c5@s2:x,c5@s1:,c4@s1:x,c3@s2:,c3@s1:x,c3@s1:,c2@s2:,c1@s1:"

Test(checkpoints, list_filters_and_before_id)
{
	list_fixture();
	assert_list(APP, USER, &(memd_checkpoint_query){ 0 }, LIST_ALL_KEYS, "everything");
	assert_list(APP, USER, &(memd_checkpoint_query){ .now_us = NOW - 1 },
		    "c6@s2:," LIST_ALL_KEYS, "before c6 expires");
	assert_list(APP, USER, &(memd_checkpoint_query){ .session = "s1" },
		    "c5@s1:,c4@s1:x,c3@s1:x,c3@s1:,c1@s1:", "session s1");
	assert_list(APP, USER, &(memd_checkpoint_query){ .session = "s2" },
		    "c5@s2:x,c3@s2:,c2@s2:", "session s2");
	assert_list(APP, USER, &(memd_checkpoint_query){ .ns = "" },
		    "c5@s1:,c3@s2:,c3@s1:,c2@s2:,c1@s1:", "ns ''");
	assert_list(APP, USER, &(memd_checkpoint_query){ .ns = "x" }, "c5@s2:x,c4@s1:x,c3@s1:x",
		    "ns x");
	assert_list(APP, USER, &(memd_checkpoint_query){ .session = "s1", .ns = "" },
		    "c5@s1:,c3@s1:,c1@s1:", "s1 ns ''");
	assert_list(APP, USER, &(memd_checkpoint_query){ .session = "s2", .ns = "x" },
		    "c5@s2:x", "s2 ns x");
	assert_list(APP, USER, &(memd_checkpoint_query){ .session = "s2", .ns = "y" }, "",
		    "s2 ns y");
	assert_list(APP, USER, &(memd_checkpoint_query){ .before_id = "c4" },
		    "c3@s2:,c3@s1:x,c3@s1:,c2@s2:,c1@s1:", "before c4");
	assert_list(APP, USER, &(memd_checkpoint_query){ .before_id = "c3", .session = "s1" },
		    "c1@s1:", "s1 before c3");
	assert_list(APP, USER, &(memd_checkpoint_query){ .before_id = "c3", .ns = "" },
		    "c2@s2:,c1@s1:", "ns '' before c3");
	assert_list(APP, USER,
		    &(memd_checkpoint_query){ .before_id = "c9", .session = "s1", .ns = "x" },
		    "c4@s1:x,c3@s1:x", "s1 ns x before c9");
	assert_list(APP, USER, &(memd_checkpoint_query){ .before_id = "c1" }, "",
		    "before the first");
	assert_list(APP, USER, &(memd_checkpoint_query){ .limit = 2 }, "c5@s2:x,c5@s1:",
		    "limit 2");
	assert_list(APP, USER, &(memd_checkpoint_query){ .limit = 1, .session = "s1", .ns = "x" },
		    "c4@s1:x", "s1 ns x limit 1");
	assert_list(APP, USER, &(memd_checkpoint_query){ .limit = 2, .before_id = "c5", .ns = "" },
		    "c3@s2:,c3@s1:", "ns '' before c5 limit 2");

	/* Other users, apps and missing sessions. */
	assert_list(APP, USER2, &(memd_checkpoint_query){ 0 }, "c9@s1:", "another user");
	assert_list(APP2, USER, &(memd_checkpoint_query){ 0 }, "c8@s1:", "another app");
	assert_list(APP, USER, &(memd_checkpoint_query){ .session = "nope" }, "",
		    "a missing session");
	assert_list(APP, "nobody", &(memd_checkpoint_query){ 0 }, "", "a missing user");
}

Test(checkpoints, list_keyset_tuple)
{
	list_fixture();
	assert_list(APP, USER,
		    &(memd_checkpoint_query){ .before_id = "c3", .before_session = "s2",
					      .before_ns = "" },
		    "c3@s1:x,c3@s1:,c2@s2:,c1@s1:", "after c3@s2:");
	assert_list(APP, USER,
		    &(memd_checkpoint_query){ .before_id = "c3", .before_session = "s1",
					      .before_ns = "x" },
		    "c3@s1:,c2@s2:,c1@s1:", "after c3@s1:x");
	assert_list(APP, USER,
		    &(memd_checkpoint_query){ .before_id = "c3", .before_session = "s1",
					      .before_ns = "" },
		    "c2@s2:,c1@s1:", "after c3@s1:");
	assert_list(APP, USER,
		    &(memd_checkpoint_query){ .before_id = "c5", .before_session = "s2",
					      .before_ns = "x" },
		    "c5@s1:,c4@s1:x,c3@s2:,c3@s1:x,c3@s1:,c2@s2:,c1@s1:", "after the first");
	/* A tuple that is not stored still bounds. */
	assert_list(APP, USER,
		    &(memd_checkpoint_query){ .before_id = "c3", .before_session = "s1z",
					      .before_ns = "" },
		    "c3@s1:x,c3@s1:,c2@s2:,c1@s1:", "after c3@s1z:");
	assert_list(APP, USER,
		    &(memd_checkpoint_query){ .before_id = "c3", .before_session = "s1",
					      .before_ns = "w" },
		    "c3@s1:,c2@s2:,c1@s1:", "after c3@s1:w");
	/* With filters. */
	assert_list(APP, USER,
		    &(memd_checkpoint_query){ .ns = "", .before_id = "c3",
					      .before_session = "s2", .before_ns = "" },
		    "c3@s1:,c2@s2:,c1@s1:", "ns '' after c3@s2:");
	assert_list(APP, USER,
		    &(memd_checkpoint_query){ .session = "s1", .before_id = "c3",
					      .before_session = "s1", .before_ns = "x" },
		    "c3@s1:,c1@s1:", "s1 after c3@s1:x");
}

/* Page through a listing with the full keyset, page_size at a time; the
 * pages joined must be want. */
static void assert_pages(const char *session, const char *ns, uint32_t page_size,
			 const char *want)
{
	char got[KEYS_MAX], buf[KEYS_MAX];
	char *before_id = NULL, *before_session = NULL, *before_ns = NULL;
	size_t used = 0;
	unsigned pages = 0;

	got[0] = '\0';
	for (;;) {
		memd_checkpoint_query q = { .limit = page_size, .session = session, .ns = ns,
					    .before_id = before_id,
					    .before_session = before_session,
					    .before_ns = before_ns, .now_us = NOW };
		conf_checkpoints l = { 0 };
		int w;

		cr_assert_eq(conf_checkpoint_list(st, APP, USER, &q, 0, &l), 0, "%s",
			     st->err.msg);
		cr_assert_leq(l.n, page_size, "a page of %zu over limit %u", l.n, page_size);
		cr_assert_lt(++pages, 100u, "paging does not end");
		if (l.n == 0) {
			conf_checkpoints_clear(&l);
			break;
		}
		w = snprintf(got + used, sizeof(got) - used, "%s%s", used ? "," : "",
			     keys_of(&l, buf, sizeof(buf)));
		cr_assert(w >= 0 && (size_t)w < sizeof(got) - used);
		used += (size_t)w;
		free(before_id);
		free(before_session);
		free(before_ns);
		before_id = strdup(l.v[l.n - 1].c.id);
		before_session = strdup(l.v[l.n - 1].c.session);
		before_ns = strdup(l.v[l.n - 1].c.ns);
		conf_checkpoints_clear(&l);
	}
	free(before_id);
	free(before_session);
	free(before_ns);
	cr_assert_str_eq(got, want, "pages of %u (session %s, ns %s): %s, expected %s",
			 page_size, session ? session : "*", ns ? ns : "*", got, want);
}

Test(checkpoints, list_keyset_paging)
{
	list_fixture();
	for (uint32_t size = 1; size <= 3; size++) {
		assert_pages(NULL, NULL, size, LIST_ALL_KEYS);
		assert_pages(NULL, "", size, "c5@s1:,c3@s2:,c3@s1:,c2@s2:,c1@s1:");
		assert_pages("s1", NULL, size, "c5@s1:,c4@s1:x,c3@s1:x,c3@s1:,c1@s1:");
		assert_pages("s2", "", size, "c3@s2:,c2@s2:");
	}
}

Test(checkpoints, list_delivers_payloads_and_writes_when_asked)
{
	memd_checkpoint_write w[2] = { ckw("t2", 0, "c", "v2", 0), ckw("t1", 3, "c", "v1", 0) };
	memd_checkpoint_query q = { .limit = LIST_ALL, .session = "s1", .now_us = NOW };
	conf_checkpoints l = { 0 };

	put_simple("s1", "", "c1");
	put_simple("s1", "", "c2");
	put_simple("s1", "x", "c3");
	cr_assert_eq(put_writes(APP, USER, "s1", "", "c1", w, 2, MEMD_RUN_UNSET, T0 + 1), 0,
		     "%s", st->err.msg);
	cr_assert_eq(put_writes(APP, USER, "s1", "x", "c3", w, 1, MEMD_RUN_UNSET, T0 + 1), 0,
		     "%s", st->err.msg);

	cr_assert_eq(conf_checkpoint_list(st, APP, USER, &q, 1, &l), 0, "%s", st->err.msg);
	cr_assert_eq(l.n, 3);
	cr_assert_str_eq(l.v[0].c.id, "c3");
	cr_assert_eq(l.v[0].n_w, 1);
	assert_write(&l.v[0].w[0], "t2", 0, "c", "v2");
	cr_assert_str_eq(l.v[1].c.id, "c2");
	cr_assert_eq(l.v[1].n_w, 0);
	cr_assert_str_eq(l.v[2].c.id, "c1");
	cr_assert_eq(l.v[2].n_w, 2);
	assert_write(&l.v[2].w[0], "t1", 3, "c", "v1");
	assert_write(&l.v[2].w[1], "t2", 0, "c", "v2");
	for (size_t i = 0; i < l.n; i++) {
		const char *want = l.v[i].c.id;
		cr_assert_eq(l.v[i].c.payload_size, strlen(want), "payload of %s", want);
		cr_assert_eq(memcmp(l.v[i].c.payload, want, strlen(want)), 0, "payload of %s",
			     want);
		cr_assert_str_eq(l.v[i].c.type, "json");
		cr_assert_eq(l.v[i].c.run_state, MEMD_RUN_RUNNING);
		cr_assert_eq(l.v[i].c.created_us, T0);
	}
	conf_checkpoints_clear(&l);
}

/* ---- task paths (since 1.6) ------------------------------------------ */

/* put_writes with task_paths (NULL, or n entries). */
static int32_t put_writes_paths(const char *session, const char *id,
				const memd_checkpoint_write *ws, const char *const *paths,
				uint32_t n, int64_t now_us)
{
	memd_scope sc = conf_scope(APP, USER, session);
	memd_checkpoint_writes w = { .ns = "", .checkpoint_id = id, .writes = ws,
				     .n_writes = n, .now_us = now_us, .task_paths = paths };
	return conf_checkpoint_put_writes(st, &sc, &w);
}

/* A write delivered through task_write with task path path, and else as
 * assert_write. */
static void assert_path_write(const conf_ckwrite *w, const char *path, const char *task_id,
			      int64_t idx, const char *value)
{
	cr_assert_not_null(w->task_path,
			   "write %s/%lld came through write, not task_write with its path",
			   w->task_id, (long long)w->idx);
	cr_assert_str_eq(w->task_path, path, "task path of write %s/%lld", w->task_id,
			 (long long)w->idx);
	assert_write(w, task_id, idx, "c", value);
}

/* One write per (path, task, idx) of ORDER_WRITES, given out of order:
 * ascending by (task_path, task_id, idx) they are ORDER_WANT, which is
 * not their (task_id, idx) order. Paths compare as bytes: "" first, a
 * prefix before what extends it ("~__pregel_push" < "~__pregel_push, 10"),
 * "10" < "9" past a shared prefix, ASCII before any multi-byte UTF-8, and
 * U+00E9 < U+FF41 < U+1F600 (code point order, which UTF-16 order is not:
 * there U+1F600's surrogate 0xD83D comes before 0xFF41). */
static const struct { const char *path, *task; int64_t idx; const char *value; } ORDER_WRITES[] = {
	{ "\xf0\x9f\x98\x80", "m", 0, "smiley" },
	{ "~__pregel_pull, b", "a", 1, "pb-a1" },
	{ "~__pregel_push, 9", "x", 0, "push9" },
	{ "~__pregel_pull, a", "b", 0, "pa-b0" },
	{ "\xc3\xa9", "o", 0, "e-acute" },
	{ "", "z", 3, "none" },
	{ "~__pregel_push, 10", "y", 0, "push10" },
	{ "~__pregel_pull, b", "a", -1, "pb-a-1" },
	{ "\xef\xbd\x81", "n", 0, "fullwidth-a" },
	{ "~__pregel_push", "w", 0, "push" },
	{ "~__pregel_pull, a", "a", 0, "pa-a0" },
};
#define ORDER_N (sizeof(ORDER_WRITES) / sizeof(ORDER_WRITES[0]))
/* Indexes into ORDER_WRITES in delivery order. */
static const size_t ORDER_WANT[ORDER_N] = { 5, 10, 3, 7, 1, 9, 6, 2, 4, 8, 0 };

static void assert_order_writes(const conf_checkpoint *g, const char *what)
{
	cr_assert_eq(g->n_w, ORDER_N, "%s: %zu writes", what, g->n_w);
	for (size_t i = 0; i < ORDER_N; i++) {
		size_t k = ORDER_WANT[i];
		assert_path_write(&g->w[i], ORDER_WRITES[k].path, ORDER_WRITES[k].task,
				  ORDER_WRITES[k].idx, ORDER_WRITES[k].value);
	}
}

Test(checkpoints, writes_keep_task_paths_and_order_by_path_task_idx)
{
	memd_checkpoint_write w[ORDER_N];
	const char *paths[ORDER_N];
	memd_checkpoint_query q = { .limit = LIST_ALL, .session = "s1", .now_us = NOW };
	conf_checkpoints l = { 0 };
	conf_checkpoint g;

	conf_require_task_paths(st);
	for (size_t i = 0; i < ORDER_N; i++) {
		w[i] = ckw(ORDER_WRITES[i].task, ORDER_WRITES[i].idx, "c", ORDER_WRITES[i].value, 0);
		paths[i] = ORDER_WRITES[i].path;
	}
	put_simple("s1", "", "c1");
	put_simple("s1", "", "c2");
	cr_assert_eq(put_writes_paths("s1", "c1", w, paths, ORDER_N, T0 + 1), 0, "put_writes: %s",
		     st->err.msg);

	g = get_ok(APP, USER, "s1", "", "c1", NOW);
	assert_order_writes(&g, "get");
	conf_checkpoint_clear(&g);

	cr_assert_eq(conf_checkpoint_list(st, APP, USER, &q, 1, &l), 0, "%s", st->err.msg);
	cr_assert_eq(l.n, 2);
	cr_assert_str_eq(l.v[1].c.id, "c1");
	assert_order_writes(&l.v[1], "list");
	cr_assert_eq(l.v[0].n_w, 0, "c2 has %zu writes", l.v[0].n_w);
	conf_checkpoints_clear(&l);

	if (st->durable) {
		conf_reopen(st);
		g = get_ok(APP, USER, "s1", "", "c1", NOW);
		assert_order_writes(&g, "get after reopen");
		conf_checkpoint_clear(&g);
	}
}

Test(checkpoints, writes_without_task_paths_read_back_with_empty_path)
{
	memd_checkpoint_write none[2] = { ckw("b", 0, "c", "b0", 0), ckw("a", 1, "c", "a1", 0) };
	memd_checkpoint_write some[3] = { ckw("c", 0, "c", "c0", 0), ckw("a", 0, "c", "a0", 0),
					  ckw("d", 0, "c", "d0", 0) };
	const char *paths[3] = { NULL, "", "~__pregel_pull, d" };
	conf_checkpoint g;

	conf_require_task_paths(st);
	put_simple("s1", "", "c1");
	cr_assert_eq(put_writes_paths("s1", "c1", none, NULL, 2, T0 + 1), 0, "%s", st->err.msg);
	cr_assert_eq(put_writes_paths("s1", "c1", some, paths, 3, T0 + 2), 0, "%s", st->err.msg);

	/* No path is "", which sorts before any path. */
	g = get_ok(APP, USER, "s1", "", "c1", NOW);
	cr_assert_eq(g.n_w, 5, "%zu writes", g.n_w);
	assert_path_write(&g.w[0], "", "a", 0, "a0");
	assert_path_write(&g.w[1], "", "a", 1, "a1");
	assert_path_write(&g.w[2], "", "b", 0, "b0");
	assert_path_write(&g.w[3], "", "c", 0, "c0");
	assert_path_write(&g.w[4], "~__pregel_pull, d", "d", 0, "d0");
	conf_checkpoint_clear(&g);
}

Test(checkpoints, writes_keep_or_replace_take_the_path_with_the_write)
{
	memd_checkpoint_write first[3] = { ckw("t", 0, "c", "t0", 0), ckw("t", 1, "c", "t1", 0),
					   ckw("u", 0, "c", "u0", 0) };
	const char *first_paths[3] = { "p2", "p2", "p3" };
	memd_checkpoint_write again[3] = { ckw("t", 0, "c", "t0-kept?", 0),
					   ckw("t", 1, "c", "t1-new", MEMD_CKW_REPLACE),
					   ckw("u", 0, "c", "u0-new", MEMD_CKW_REPLACE) };
	const char *again_paths[3] = { "p1", "p0", NULL };
	conf_checkpoint g;

	conf_require_task_paths(st);
	put_simple("s1", "", "c1");
	cr_assert_eq(put_writes_paths("s1", "c1", first, first_paths, 3, T0 + 1), 0, "%s",
		     st->err.msg);
	cr_assert_eq(put_writes_paths("s1", "c1", again, again_paths, 3, T0 + 2), 0, "%s",
		     st->err.msg);

	/* (t, 0) stays with its value and path "p2"; (t, 1) and (u, 0) are
	 * replaced, path included ("p0", and "" for none). */
	g = get_ok(APP, USER, "s1", "", "c1", NOW);
	cr_assert_eq(g.n_w, 3, "%zu writes", g.n_w);
	assert_path_write(&g.w[0], "", "u", 0, "u0-new");
	assert_path_write(&g.w[1], "p0", "t", 1, "t1-new");
	assert_path_write(&g.w[2], "p2", "t", 0, "t0");
	conf_checkpoint_clear(&g);
}

Test(checkpoints, writes_of_several_puts_interleave_by_path)
{
	/* A step's tasks finish in any order, each putting its writes. */
	memd_checkpoint_write t3[2] = { ckw("t3", 0, "c", "t3-0", 0), ckw("t3", 1, "c", "t3-1", 0) };
	memd_checkpoint_write t1[2] = { ckw("t1", 1, "c", "t1-1", 0), ckw("t1", 0, "c", "t1-0", 0) };
	memd_checkpoint_write t2[2] = { ckw("t2", 0, "c", "t2-0", 0), ckw("t2", 1, "c", "t2-1", 0) };
	memd_checkpoint_write t0[1] = { ckw("t0", -1, "c", "t0-err", 0) };
	const char *p3[2] = { "~__pregel_pull, c", "~__pregel_pull, c" };
	const char *p1[2] = { "~__pregel_push, 0", "~__pregel_push, 0" };
	const char *p2[2] = { "~__pregel_pull, a", "~__pregel_pull, a" };
	const char *p_other[1] = { "~__pregel_pull, b" };
	conf_checkpoint g;

	conf_require_task_paths(st);
	put_simple("s1", "", "c1");
	put_simple("s1", "", "c2");
	cr_assert_eq(put_writes_paths("s1", "c1", t3, p3, 2, T0 + 1), 0, "%s", st->err.msg);
	/* A write of another checkpoint in between stays there. */
	cr_assert_eq(put_writes_paths("s1", "c2", t0, p_other, 1, T0 + 2), 0, "%s", st->err.msg);
	cr_assert_eq(put_writes_paths("s1", "c1", t1, p1, 2, T0 + 3), 0, "%s", st->err.msg);
	cr_assert_eq(put_writes_paths("s1", "c1", t0, NULL, 1, T0 + 4), 0, "%s", st->err.msg);
	cr_assert_eq(put_writes_paths("s1", "c1", t2, p2, 2, T0 + 5), 0, "%s", st->err.msg);

	g = get_ok(APP, USER, "s1", "", "c1", NOW);
	cr_assert_eq(g.n_w, 7, "%zu writes", g.n_w);
	assert_path_write(&g.w[0], "", "t0", -1, "t0-err");
	assert_path_write(&g.w[1], "~__pregel_pull, a", "t2", 0, "t2-0");
	assert_path_write(&g.w[2], "~__pregel_pull, a", "t2", 1, "t2-1");
	assert_path_write(&g.w[3], "~__pregel_pull, c", "t3", 0, "t3-0");
	assert_path_write(&g.w[4], "~__pregel_pull, c", "t3", 1, "t3-1");
	assert_path_write(&g.w[5], "~__pregel_push, 0", "t1", 0, "t1-0");
	assert_path_write(&g.w[6], "~__pregel_push, 0", "t1", 1, "t1-1");
	conf_checkpoint_clear(&g);

	g = get_ok(APP, USER, "s1", "", "c2", NOW);
	cr_assert_eq(g.n_w, 1, "%zu writes", g.n_w);
	assert_path_write(&g.w[0], "~__pregel_pull, b", "t0", -1, "t0-err");
	conf_checkpoint_clear(&g);
}

/* Task paths of the longest the REST API takes (1024 bytes) order by
 * every byte: two that differ only in their last byte and the 1023-byte
 * prefix of both, read by a get of the latest checkpoint and by a list
 * of two checkpoints with writes. (MariaDB's sort keys of a VARBINARY
 * stop short of max_sort_length = 1024: the order was by task id.) */
#define PROBE_LONG 1024
Test(checkpoints, writes_order_by_the_whole_of_long_task_paths)
{
	static char pa[PROBE_LONG + 1], pb[PROBE_LONG + 1], pp[PROBE_LONG];
	memd_checkpoint_write w[3] = { ckw("a", 0, "c", "b", 0), ckw("b", 0, "c", "a", 0),
				       ckw("c", 0, "c", "p", 0) };
	const char *paths[3] = { pb, pa, pp };
	memd_checkpoint_query q = { .limit = LIST_ALL, .session = "s1", .now_us = NOW };
	conf_checkpoints l = { 0 };
	conf_checkpoint g;

	conf_require_task_paths(st);
	memset(pa, 'x', PROBE_LONG);
	memset(pb, 'x', PROBE_LONG);
	memset(pp, 'x', PROBE_LONG - 1);
	pa[PROBE_LONG - 1] = 'a';
	pb[PROBE_LONG - 1] = 'b';
	put_simple("s1", "", "c1");
	put_simple("s1", "", "c2");
	cr_assert_eq(put_writes_paths("s1", "c1", w, paths, 3, T0 + 1), 0, "%s", st->err.msg);
	cr_assert_eq(put_writes_paths("s1", "c2", w, paths, 3, T0 + 1), 0, "%s", st->err.msg);
	g = get_ok(APP, USER, "s1", "", NULL, NOW);
	cr_assert_str_eq(g.c.id, "c2");
	cr_assert_eq(g.n_w, 3);
	assert_path_write(&g.w[0], pp, "c", 0, "p");
	assert_path_write(&g.w[1], pa, "b", 0, "a");
	assert_path_write(&g.w[2], pb, "a", 0, "b");
	conf_checkpoint_clear(&g);
	cr_assert_eq(conf_checkpoint_list(st, APP, USER, &q, 1, &l), 0, "%s", st->err.msg);
	cr_assert_eq(l.n, 2);
	for (size_t k = 0; k < 2; k++) {
		cr_assert_eq(l.v[k].n_w, 3);
		assert_path_write(&l.v[k].w[0], pp, "c", 0, "p");
		assert_path_write(&l.v[k].w[1], pa, "b", 0, "a");
		assert_path_write(&l.v[k].w[2], pb, "a", 0, "b");
	}
	conf_checkpoints_clear(&l);
}

/* ---- delete ------------------------------------------------------------- */

Test(checkpoints, delete_per_namespace_and_all)
{
	memd_checkpoint_write w[1] = { ckw("t", 0, "c", "v", 0) };
	conf_checkpoint g;

	put_simple("s1", "", "c1");
	put_simple("s1", "", "c2");
	put_simple("s1", "x", "c1");
	put_simple("s1", "x", "c3");
	put_simple("s2", "", "c1");
	put_simple("s2", "x", "c1");
	cr_assert_eq(put_writes(APP, USER, "s1", "x", "c3", w, 1, MEMD_RUN_UNSET, T0 + 1), 0);
	cr_assert_eq(put_writes(APP, USER, "s1", "", "c2", w, 1, MEMD_RUN_UNSET, T0 + 1), 0);

	/* One namespace: its checkpoints and writes; the head stays. */
	cr_assert_eq(delete_ok(APP, USER, "s1", "x"), 2);
	assert_list(APP, USER, &(memd_checkpoint_query){ .session = "s1" }, "c2@s1:,c1@s1:",
		    "after deleting ns x");
	assert_resumable(APP, RUN_MASK_ALL, NULL, NULL, 0, NOW, USER "/s1=c2:1," USER "/s2=c1:1",
			 "after deleting ns x");
	put_simple("s1", "x", "c3");
	g = get_ok(APP, USER, "s1", "x", "c3", NOW);
	cr_assert_eq(g.n_w, 0, "the writes of a deleted checkpoint came back");
	conf_checkpoint_clear(&g);

	/* The root namespace: the head goes too. */
	cr_assert_eq(delete_ok(APP, USER, "s1", ""), 2);
	assert_list(APP, USER, &(memd_checkpoint_query){ .session = "s1" }, "c3@s1:x",
		    "after deleting ns ''");
	assert_resumable(APP, RUN_MASK_ALL, NULL, NULL, 0, NOW, USER "/s2=c1:1",
			 "after deleting ns ''");
	put_simple("s1", "", "c2");
	g = get_ok(APP, USER, "s1", "", "c2", NOW);
	cr_assert_eq(g.n_w, 0, "the writes of a deleted checkpoint came back");
	conf_checkpoint_clear(&g);

	/* Every namespace (and the head). */
	cr_assert_eq(delete_ok(APP, USER, "s1", NULL), 2);
	assert_list(APP, USER, &(memd_checkpoint_query){ .session = "s1" }, "", "after all");
	assert_resumable(APP, RUN_MASK_ALL, NULL, NULL, 0, NOW, USER "/s2=c1:1", "after all");
	assert_get_absent(APP, USER, "s1", "", NULL, NOW);

	/* Nothing left, a missing namespace, a missing session: 0. */
	cr_assert_eq(delete_ok(APP, USER, "s1", NULL), 0);
	cr_assert_eq(delete_ok(APP, USER, "s1", "x"), 0);
	cr_assert_eq(delete_ok(APP, USER, "nope", NULL), 0);
	cr_assert_eq(delete_ok(APP, USER, "nope", ""), 0);

	/* The other session and the session itself are untouched. */
	assert_list(APP, USER, &(memd_checkpoint_query){ 0 }, "c1@s2:x,c1@s2:", "s2 kept");
	cr_assert_eq(conf_session_get(st, APP, USER, "s1", NULL), 0, "the session went: %s",
		     st->err.msg);
}

/* ---- heads and the resumable listing ------------------------------------ */

Test(checkpoints, head_is_the_greatest_root_id)
{
	memd_checkpoint c;
	conf_checkpoints l = { 0 };
	memd_resumable_query q = { .limit = LIST_ALL, .app = APP, .run_states = RUN_MASK_ALL,
				   .now_us = NOW };
	char want[KEYS_MAX];

	/* No root checkpoint: no head. */
	put_simple("s1", "sub", "c9");
	assert_resumable(APP, RUN_MASK_ALL, NULL, NULL, 0, NOW, "", "only a subgraph");

	put_at(APP, USER, "s1", "", "c2", 0, MEMD_RUN_UNSET, T0);
	put_at(APP, USER, "s1", "", "c1", 0, MEMD_RUN_DONE, T0 + 1);
	assert_resumable(APP, RUN_MASK_ALL, NULL, NULL, 0, NOW, USER "/s1=c2:1",
			 "a smaller id does not take the head");
	put_at(APP, USER, "s1", "sub", "c5", 0, MEMD_RUN_DONE, T0 + 2);
	assert_resumable(APP, RUN_MASK_ALL, NULL, NULL, 0, NOW, USER "/s1=c2:1",
			 "a subgraph id does not take the head");

	/* A put of the head's own id updates its state and expiry. */
	c = ck(APP, USER, "s1", "", "c2");
	c.parent_id = "c1";
	c.metadata_json = "{\"step\":4}";
	c.run_state = MEMD_RUN_INTERRUPTED;
	c.expires_us = NOW + 100;
	put_ok(&c, T0 + 3);
	snprintf(want, sizeof(want), "%s/s1=c2:%u", USER, MEMD_RUN_INTERRUPTED);
	assert_resumable(APP, RUN_MASK_ALL, NULL, NULL, 0, NOW, want, "the head put again");
	assert_resumable(APP, RUN_MASK_ALL, NULL, NULL, 0, NOW + 100, "",
			 "the head's new expiry");

	/* What resumable delivers of it. */
	cr_assert_eq(conf_checkpoint_resumable(st, &q, &l), 0, "%s", st->err.msg);
	cr_assert_eq(l.n, 1);
	cr_assert_str_eq(l.v[0].c.app, APP);
	cr_assert_str_eq(l.v[0].c.user, USER);
	cr_assert_str_eq(l.v[0].c.session, "s1");
	cr_assert_str_eq(l.v[0].c.ns, "");
	cr_assert_str_eq(l.v[0].c.id, "c2");
	conf_assert_str_or_null(l.v[0].c.parent_id, "c1", "parent_id");
	cr_assert_str_eq(l.v[0].c.type, "json");
	cr_assert(conf_json_equal(l.v[0].c.metadata_json, "{\"step\":4}"), "metadata %s",
		  l.v[0].c.metadata_json);
	cr_assert_eq(l.v[0].c.run_state, MEMD_RUN_INTERRUPTED);
	cr_assert_eq(l.v[0].c.created_us, T0);
	cr_assert_eq(l.v[0].c.updated_us, T0 + 3);
	cr_assert_eq(l.v[0].c.expires_us, NOW + 100);
	cr_assert_null(l.v[0].c.payload);
	cr_assert_eq(l.v[0].c.payload_size, 0);
	conf_checkpoints_clear(&l);

	/* A greater id takes it. */
	put_at(APP, USER, "s1", "", "c3", 0, MEMD_RUN_DONE, T0 + 4);
	snprintf(want, sizeof(want), "%s/s1=c3:%u", USER, MEMD_RUN_DONE);
	assert_resumable(APP, RUN_MASK_ALL, NULL, NULL, 0, NOW + 100, want, "a greater id");
}

Test(checkpoints, resumable_mask_expiry_order_and_keyset)
{
	char want[KEYS_MAX];

	/* ua/s1: head c2 interrupted (c1 running, a subgraph c9 running). */
	put_at(APP, "ua", "s1", "", "c1", 0, MEMD_RUN_RUNNING, T0);
	put_at(APP, "ua", "s1", "", "c2", 0, MEMD_RUN_INTERRUPTED, T0);
	put_at(APP, "ua", "s1", "sub", "c9", 0, MEMD_RUN_RUNNING, T0);
	/* ua/s2: done. */
	put_at(APP, "ua", "s2", "", "c1", 0, MEMD_RUN_DONE, T0);
	/* ua/s4: head c3 running; a smaller id interrupted after it. */
	put_at(APP, "ua", "s4", "", "c3", 0, MEMD_RUN_RUNNING, T0);
	put_at(APP, "ua", "s4", "", "c2", 0, MEMD_RUN_INTERRUPTED, T0 + 1);
	/* ub/s1: expired at NOW; ub/s3: expires later. */
	put_at(APP, "ub", "s1", "", "c5", NOW, MEMD_RUN_RUNNING, T0);
	put_at(APP, "ub", "s3", "", "c1", NOW + 1, MEMD_RUN_RUNNING, T0);
	/* uc/s0: a subgraph only. Another app. */
	put_at(APP, "uc", "s0", "sub", "c1", 0, MEMD_RUN_RUNNING, T0);
	put_at(APP2, "ua", "s1", "", "c7", 0, MEMD_RUN_RUNNING, T0);

	snprintf(want, sizeof(want), "ua/s1=c2:%u,ua/s4=c3:1,ub/s3=c1:1", MEMD_RUN_INTERRUPTED);
	assert_resumable(APP, RUN_MASK_RESUME, NULL, NULL, 0, NOW, want, "running|interrupted");
	snprintf(want, sizeof(want), "ua/s1=c2:%u,ua/s4=c3:1,ub/s1=c5:1,ub/s3=c1:1",
		 MEMD_RUN_INTERRUPTED);
	assert_resumable(APP, RUN_MASK_RESUME, NULL, NULL, 0, NOW - 1, want,
			 "before ub/s1 expires");
	assert_resumable(APP, 1u << MEMD_RUN_RUNNING, NULL, NULL, 0, NOW, "ua/s4=c3:1,ub/s3=c1:1",
			 "running");
	snprintf(want, sizeof(want), "ua/s1=c2:%u", MEMD_RUN_INTERRUPTED);
	assert_resumable(APP, 1u << MEMD_RUN_INTERRUPTED, NULL, NULL, 0, NOW, want,
			 "interrupted");
	snprintf(want, sizeof(want), "ua/s2=c1:%u", MEMD_RUN_DONE);
	assert_resumable(APP, 1u << MEMD_RUN_DONE, NULL, NULL, 0, NOW, want, "done");
	assert_resumable(APP, 0, NULL, NULL, 0, NOW, "", "an empty mask");
	assert_resumable(APP2, RUN_MASK_RESUME, NULL, NULL, 0, NOW, "ua/s1=c7:1", "another app");
	assert_resumable("noapp", RUN_MASK_ALL, NULL, NULL, 0, NOW, "", "a missing app");

	/* Keyset (after_user, after_session) and limit. */
	assert_resumable(APP, RUN_MASK_RESUME, "ua", "s1", 0, NOW, "ua/s4=c3:1,ub/s3=c1:1",
			 "after ua/s1");
	assert_resumable(APP, RUN_MASK_RESUME, "ua", "s4", 0, NOW, "ub/s3=c1:1", "after ua/s4");
	assert_resumable(APP, RUN_MASK_RESUME, "ua", "s9", 0, NOW, "ub/s3=c1:1", "after ua/s9");
	assert_resumable(APP, RUN_MASK_RESUME, "ub", "s3", 0, NOW, "", "after the last");
	snprintf(want, sizeof(want), "ua/s1=c2:%u", MEMD_RUN_INTERRUPTED);
	assert_resumable(APP, RUN_MASK_RESUME, "ua", "s0", 1, NOW, want, "after ua/s0, limit 1");
	assert_resumable(APP, RUN_MASK_RESUME, "ua", "s1", 1, NOW, "ua/s4=c3:1",
			 "after ua/s1, limit 1");

	/* The head's state changes through put_writes and puts. */
	cr_assert_eq(put_writes(APP, "ua", "s1", "", "c2", NULL, 0, MEMD_RUN_DONE, T0 + 5), 0,
		     "%s", st->err.msg);
	cr_assert_eq(put_writes(APP, "ua", "s1", "", "c1", NULL, 0, MEMD_RUN_RUNNING, T0 + 5), 0,
		     "%s", st->err.msg);
	put_at(APP, "ua", "s4", "", "c3", 0, MEMD_RUN_DONE, T0 + 6);
	assert_resumable(APP, RUN_MASK_RESUME, NULL, NULL, 0, NOW, "ub/s3=c1:1", "after done");
	snprintf(want, sizeof(want), "ua/s1=c2:%u,ua/s2=c1:%u,ua/s4=c3:%u", MEMD_RUN_DONE,
		 MEMD_RUN_DONE, MEMD_RUN_DONE);
	assert_resumable(APP, 1u << MEMD_RUN_DONE, NULL, NULL, 0, NOW, want, "done after");
}

/* ---- expiry ------------------------------------------------------------- */

Test(checkpoints, expire_oldest_first_with_limit_and_head_passing)
{
	memd_checkpoint_write w[1] = { ckw("t", 0, "c", "v", 0) };
	conf_checkpoint g;

	/* APP s: r1 never, r2 at +50, r3 (head) at +10, subgraph x1 at +20;
	 * APP2 s: q1 at +30. */
	put_at(APP, USER, "s", "", "r1", 0, MEMD_RUN_RUNNING, T0);
	put_at(APP, USER, "s", "", "r2", T0 + 50, MEMD_RUN_INTERRUPTED, T0);
	put_at(APP, USER, "s", "", "r3", T0 + 10, MEMD_RUN_RUNNING, T0);
	put_at(APP, USER, "s", "x", "x1", T0 + 20, MEMD_RUN_RUNNING, T0);
	put_at(APP2, USER, "s", "", "q1", T0 + 30, MEMD_RUN_RUNNING, T0);
	cr_assert_eq(put_writes(APP, USER, "s", "", "r3", w, 1, MEMD_RUN_UNSET, T0 + 1), 0);

	/* Nothing expired yet. */
	cr_assert_eq(expire_ok(T0 + 10 - 1, 100), 0);

	/* Oldest expiry first, across apps, at most limit. */
	cr_assert_eq(expire_ok(T0 + 100, 2), 2);
	assert_get_absent(APP, USER, "s", "", "r3", T0);
	assert_get_absent(APP, USER, "s", "x", "x1", T0);
	g = get_ok(APP2, USER, "s", "", "q1", T0);
	conf_checkpoint_clear(&g);
	g = get_ok(APP, USER, "s", "", "r2", T0);
	conf_checkpoint_clear(&g);

	/* The head passed to the greatest remaining root id, r2 (expired at
	 * +100 but not yet deleted), with its own state. */
	{
		char want[KEYS_MAX];
		snprintf(want, sizeof(want), "%s/s=r2:%u", USER, MEMD_RUN_INTERRUPTED);
		assert_resumable(APP, RUN_MASK_ALL, NULL, NULL, 0, T0 + 40, want,
				 "after the head expired");
	}
	assert_resumable(APP, RUN_MASK_ALL, NULL, NULL, 0, T0 + 100, "",
			 "the new head is expired itself");

	/* The rest: q1 then r2; the head passes to r1, which never expires. */
	cr_assert_eq(expire_ok(T0 + 100, 100), 2);
	assert_get_absent(APP2, USER, "s", "", "q1", T0);
	assert_get_absent(APP, USER, "s", "", "r2", T0);
	assert_resumable(APP, RUN_MASK_ALL, NULL, NULL, 0, T0 + 100, USER "/s=r1:1",
			 "after r2 expired");
	assert_resumable(APP2, RUN_MASK_ALL, NULL, NULL, 0, T0, "", "q1's head went");
	assert_latest("s", "", "r1", T0 + 100);
	cr_assert_eq(expire_ok(T0 + 1000000000LL, 100), 0, "a checkpoint without expiry expired");

	/* Its writes went with it. */
	put_at(APP, USER, "s", "", "r3", 0, MEMD_RUN_RUNNING, T0 + 200);
	g = get_ok(APP, USER, "s", "", "r3", T0 + 200);
	cr_assert_eq(g.n_w, 0, "the writes of an expired checkpoint came back");
	conf_checkpoint_clear(&g);

	/* The last root checkpoint of a session expiring takes the head. */
	put_at(APP, USER, "s2", "", "z1", T0 + 300, MEMD_RUN_RUNNING, T0 + 200);
	put_at(APP, USER, "s2", "x", "z9", 0, MEMD_RUN_RUNNING, T0 + 200);
	cr_assert_eq(expire_ok(T0 + 300, 100), 1);
	assert_resumable(APP, RUN_MASK_ALL, NULL, NULL, 0, T0 + 300, USER "/s=r3:1",
			 "a session without root checkpoints has no head");
}

Test(checkpoints, expire_limit_one_takes_the_oldest)
{
	put_at(APP, USER, "s1", "", "a", T0 + 30, MEMD_RUN_UNSET, T0);
	put_at(APP, USER, "s2", "", "b", T0 + 10, MEMD_RUN_UNSET, T0);
	put_at(APP, USER, "s3", "", "c", T0 + 20, MEMD_RUN_UNSET, T0);
	cr_assert_eq(expire_ok(T0 + 100, 1), 1);
	assert_get_absent(APP, USER, "s2", "", "b", T0);
	cr_assert_eq(expire_ok(T0 + 100, 1), 1);
	assert_get_absent(APP, USER, "s3", "", "c", T0);
	assert_latest("s1", "", "a", T0);
	cr_assert_eq(expire_ok(T0 + 30, 1), 1);
	cr_assert_eq(expire_ok(T0 + 100, 1), 0);
}

/* ---- retention ---------------------------------------------------------- */

Test(checkpoints, session_and_user_delete_take_their_checkpoints)
{
	memd_checkpoint_write w[1] = { ckw("t", 0, "c", "v", 0) };
	conf_checkpoint g;

	put_simple("s1", "", "c1");
	put_simple("s1", "x", "c2");
	put_simple("s2", "", "c1");
	put_at(APP, USER2, "s1", "", "c1", 0, MEMD_RUN_UNSET, T0);
	put_at(APP2, USER, "s1", "", "c1", 0, MEMD_RUN_UNSET, T0);
	cr_assert_eq(put_writes(APP, USER, "s1", "", "c1", w, 1, MEMD_RUN_UNSET, T0 + 1), 0);

	cr_assert_eq(conf_session_delete(st, APP, USER, "s1"), 0, "%s", st->err.msg);
	assert_get_absent(APP, USER, "s1", "", NULL, NOW);
	assert_get_absent(APP, USER, "s1", "x", "c2", NOW);
	assert_list(APP, USER, &(memd_checkpoint_query){ 0 }, "c1@s2:", "after session_delete");
	assert_resumable(APP, RUN_MASK_ALL, NULL, NULL, 0, NOW,
			 USER "/s2=c1:1," USER2 "/s1=c1:1", "after session_delete");
	assert_list(APP2, USER, &(memd_checkpoint_query){ 0 }, "c1@s1:", "another app kept");

	/* A new session of the same id starts empty. */
	put_simple("s1", "", "c1");
	g = get_ok(APP, USER, "s1", "", "c1", NOW);
	cr_assert_eq(g.n_w, 0, "writes survived session_delete");
	conf_checkpoint_clear(&g);
	assert_list(APP, USER, &(memd_checkpoint_query){ .session = "s1" }, "c1@s1:",
		    "the new session");

	cr_assert_eq(conf_user_delete(st, APP, USER), 0, "%s", st->err.msg);
	assert_list(APP, USER, &(memd_checkpoint_query){ 0 }, "", "after user_delete");
	assert_get_absent(APP, USER, "s2", "", "c1", NOW);
	assert_resumable(APP, RUN_MASK_ALL, NULL, NULL, 0, NOW, USER2 "/s1=c1:1",
			 "after user_delete");
	assert_list(APP, USER2, &(memd_checkpoint_query){ 0 }, "c1@s1:", "another user kept");
	assert_list(APP2, USER, &(memd_checkpoint_query){ 0 }, "c1@s1:",
		    "the user in another app kept");
	cr_assert_eq(expire_ok(NOW + 1000000000LL, 100), 0);
}

Test(checkpoints, durable_across_reopen)
{
	memd_checkpoint_write w[1] = { ckw("t", -2, "c", "v", 0) };
	conf_checkpoint g;

	if (!st->durable)
		cr_skip_test("the store is not durable");
	put_at(APP, USER, "s1", "", "c1", NOW + 5, MEMD_RUN_INTERRUPTED, T0);
	cr_assert_eq(put_writes(APP, USER, "s1", "", "c1", w, 1, MEMD_RUN_UNSET, T0 + 1), 0);
	conf_reopen(st);
	g = get_ok(APP, USER, "s1", "", NULL, NOW);
	cr_assert_str_eq(g.c.id, "c1");
	cr_assert_eq(g.c.run_state, MEMD_RUN_INTERRUPTED);
	cr_assert_eq(g.c.expires_us, NOW + 5);
	cr_assert_eq(g.n_w, 1);
	assert_write(&g.w[0], "t", -2, "c", "v");
	conf_checkpoint_clear(&g);
	{
		char want[KEYS_MAX];
		snprintf(want, sizeof(want), "%s/s1=c1:%u", USER, MEMD_RUN_INTERRUPTED);
		assert_resumable(APP, RUN_MASK_ALL, NULL, NULL, 0, NOW, want, "after reopen");
	}
}

/* ---- bad input ---------------------------------------------------------- */

#define RUN_STATE_BAD 9u /* no MEMD_RUN_* */

Test(checkpoints, bad_input_is_refused_and_writes_nothing)
{
	memd_checkpoint c = ck(APP, USER, "s1", "", "c1");
	memd_checkpoint_write w[1] = { ckw("t", 0, "c", "v", 0) };
	memd_checkpoint_query q = { .limit = 0, .now_us = NOW };
	memd_resumable_query rq = { .limit = 0, .app = APP, .run_states = RUN_MASK_ALL,
				    .now_us = NOW };
	conf_checkpoints l = { 0 };
	conf_checkpoint g;

	c.run_state = RUN_STATE_BAD;
	cr_assert_eq(conf_checkpoint_put(st, &c, 1, T0, NULL), MEMD_EINVAL, "a bad run state");
	c.run_state = MEMD_RUN_UNSET;
	c.metadata_json = "[1]";
	cr_assert_eq(conf_checkpoint_put(st, &c, 1, T0, NULL), MEMD_EINVAL, "metadata not an object");
	c.metadata_json = "{}";
	c.ns = NULL;
	cr_assert_eq(conf_checkpoint_put(st, &c, 1, T0, NULL), MEMD_EINVAL, "no namespace");
	cr_assert_eq(conf_session_get(st, APP, USER, "s1", NULL), MEMD_ENOTFOUND,
		     "a refused put created the session");

	put_simple("s1", "", "c1");
	cr_assert_eq(put_writes(APP, USER, "s1", "", "c1", w, 1, RUN_STATE_BAD, T0 + 1),
		     MEMD_EINVAL, "a bad run state");
	g = get_ok(APP, USER, "s1", "", "c1", NOW);
	cr_assert_eq(g.n_w, 0, "a refused put_writes wrote");
	cr_assert_eq(g.c.run_state, MEMD_RUN_RUNNING);
	conf_checkpoint_clear(&g);

	cr_assert_eq(conf_checkpoint_list(st, APP, USER, &q, 0, &l), MEMD_EINVAL, "limit 0");
	cr_assert_eq(l.n, 0);
	cr_assert_eq(conf_checkpoint_resumable(st, &rq, &l), MEMD_EINVAL, "limit 0");
	cr_assert_eq(l.n, 0);
}

/* ---- races and cost ----------------------------------------------------- */

#define RACE_THREADS 4
#define RACE_ROUNDS 8
#define RACE_ID_LEN 32

/* Each racer of a round puts a root checkpoint "r<round>-t<thread>" of
 * session "race": every id of a round is greater than the ids before it. */
static void *race_put(void *p)
{
	conf_racer *a = p;
	char id[RACE_ID_LEN];
	memd_call call = { .struct_size = sizeof(call) };
	memd_checkpoint c;

	snprintf(id, sizeof(id), "r%02d-t%d", a->round, a->thread);
	c = ck(APP, USER, "race", "", id);
	a->err.struct_size = sizeof(a->err);
	pthread_barrier_wait(a->start);
	a->result = a->ops->checkpoint_put(a->h, &call, &c, 1, T0 + a->round, NULL, &a->err);
	return NULL;
}

Test(checkpoints, racing_puts_leave_the_greatest_id_as_head)
{
	void *twin = NULL, *h[2];

	put_simple("race", "", "r");
	conf_race_instances(st, &twin, h);
	for (int round = 0; round < RACE_ROUNDS; round++) {
		conf_racer args[RACE_THREADS];
		char want[KEYS_MAX];

		conf_race_round(st, h, round, race_put, args, RACE_THREADS);
		for (int i = 0; i < RACE_THREADS; i++)
			cr_assert_eq(args[i].result, 0, "round %d thread %d: %s", round, i,
				     args[i].err.msg);
		snprintf(want, sizeof(want), "%s/race=r%02d-t%d:1", USER, round, RACE_THREADS - 1);
		assert_resumable(APP, RUN_MASK_ALL, NULL, NULL, 0, NOW, want, "after a round");
	}
	conf_twin_close(twin);
}

#define BIG_SESSIONS 3
#define BIG_IDS 40            /* per session and namespace */
#define BIG_PAGE 5
/* Rows a store may examine beyond the page (its own bookkeeping). */
#define ROWS_SLACK 8

static void assert_list_cheap(memd_checkpoint_query *q, const char *what)
{
	conf_checkpoints l = { 0 };

	q->limit = BIG_PAGE;
	q->now_us = NOW;
	st->rows_read = 0;
	cr_assert_eq(conf_checkpoint_list(st, APP, USER, q, 0, &l), 0, "%s: %s", what,
		     st->err.msg);
	cr_assert_eq(l.n, BIG_PAGE, "%s: %zu checkpoints", what, l.n);
	cr_assert_geq(st->rows_read, BIG_PAGE, "%s: rows_read %llu: the store does not count rows",
		      what, (unsigned long long)st->rows_read);
	cr_assert_leq(st->rows_read, BIG_PAGE + ROWS_SLACK, "%s examined %llu rows of %d", what,
		      (unsigned long long)st->rows_read, BIG_SESSIONS * 2 * BIG_IDS);
	conf_checkpoints_clear(&l);
}

/* A session's listing reads through an index: its cost is the page, not
 * the user's checkpoints. */
Test(checkpoints, session_list_rows_read_bounded)
{
	static const char *const sessions[BIG_SESSIONS] = { "sa", "sb", "sc" };
	static const char *const namespaces[2] = { "", "sub" };
	memd_checkpoint_query q;

	for (int k = 0; k < BIG_IDS; k++) {
		for (int s = 0; s < BIG_SESSIONS; s++) {
			for (int n = 0; n < 2; n++) {
				char id[RACE_ID_LEN];
				snprintf(id, sizeof(id), "c%03d", k);
				put_simple(sessions[s], namespaces[n], id);
			}
		}
	}
	q = (memd_checkpoint_query){ .session = "sb", .ns = "" };
	assert_list_cheap(&q, "one namespace of a session");
	q = (memd_checkpoint_query){ .session = "sb", .ns = "", .before_id = "c020" };
	assert_list_cheap(&q, "a page in the middle of a namespace");
	q = (memd_checkpoint_query){ .session = "sb" };
	assert_list_cheap(&q, "every namespace of a session");
	q = (memd_checkpoint_query){ .session = "sb", .before_id = "c020", .before_session = "sb",
				     .before_ns = "sub" };
	assert_list_cheap(&q, "a page in the middle of a session");
}
