/* SPDX-License-Identifier: MIT */
/*
 * The lanes part of the session-store conformance suite (since 1.2): the
 * Lanes paragraph at the top of api/memd/store.h and the contracts of
 * memd_lane_write, memd_lane_query, the inbox ops, session_list_ended,
 * the sessions' lifecycle members and append usage, run unchanged
 * against every store plugin (see store_harness.h). A plugin below 1.2
 * without the lane ops skips these tests unless MEMD_CONFORMANCE_LANES=1
 * says every store under test must have them.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "store_harness.h"

#define APP "lapp"
#define APP2 "lapp2"
#define USER "lu"
#define USER2 "lu2"
#define KEY "telegram:dm:42"
#define T0 1700000000000000LL /* a plausible unix time in us */
#define LEASE_US 60000000LL   /* a turn's lease in these tests: a minute */
#define SUITE_TIMEOUT_S 60

static conf_store *st;

static void setup(void)
{
	st = conf_open();
	conf_require_lanes(st);
}

static void teardown(void)
{
	conf_close(st);
	st = NULL;
}

TestSuite(lanes, .init = setup, .fini = teardown, .timeout = SUITE_TIMEOUT_S);

/* ---- helpers ---------------------------------------------------------- */

/* A plain session record of (app, user, id) created at created_us. */
static memd_session session_rec(const char *app, const char *user, const char *id,
				int64_t created_us)
{
	memd_session s = { .struct_size = sizeof(s), .app = app, .user = user, .id = id,
			   .metadata_json = "{}", .created_us = created_us,
			   .updated_us = created_us };
	return s;
}

static void session_ok(const char *app, const char *user, const char *id, int64_t created_us)
{
	memd_session s = session_rec(app, user, id, created_us);
	int32_t r = conf_session_create_full(st, &s, NULL);
	cr_assert_eq(r, 0, "session_create(%s/%s/%s): %s", app, user, id, st->err.msg);
}

static conf_session session_get_ok(const char *app, const char *user, const char *id)
{
	conf_session s = { 0 };
	int32_t r = conf_session_get(st, app, user, id, &s);
	cr_assert_eq(r, 0, "session_get(%s/%s/%s): %s", app, user, id, st->err.msg);
	return s;
}

/* A lane record naming (app, user, key) -> session, last active at
 * updated_us, every other host field zero. */
static memd_lane lane_rec(const char *app, const char *user, const char *key, const char *session,
			  int64_t updated_us)
{
	memd_lane l = { .struct_size = sizeof(l), .app = app, .user = user, .key = key,
			.session = session, .updated_us = updated_us };
	return l;
}

/* Create lane (app, user, key) -> session (which must exist) at now_us. */
static conf_lane lane_create_ok(const char *app, const char *user, const char *key,
				const char *session, int64_t now_us)
{
	memd_lane l = lane_rec(app, user, key, session, now_us);
	memd_lane_write w = { .flags = MEMD_LW_CREATE, .lane = &l, .now_us = now_us };
	conf_lane got = { 0 };
	int32_t r = conf_lane_write(st, &w, &got);

	cr_assert_eq(r, 0, "create lane %s/%s/%s: %s", app, user, key, st->err.msg);
	cr_assert_eq(got.l.version, 1);
	return got;
}

/* A session and a lane pointing at it, both made at now_us. */
static conf_lane lane_with_session(const char *app, const char *user, const char *key,
				   const char *session, int64_t now_us)
{
	session_ok(app, user, session, now_us);
	return lane_create_ok(app, user, key, session, now_us);
}

static conf_lane lane_get_ok(const char *app, const char *user, const char *key)
{
	conf_lane l = { 0 };
	int32_t r = conf_lane_get(st, app, user, key, &l);
	cr_assert_eq(r, 0, "lane_get(%s/%s/%s): %s", app, user, key, st->err.msg);
	return l;
}

/* Write l (its host fields) with expected_version; asserts success. */
static conf_lane lane_update_ok(memd_lane *l, int64_t expected_version, int64_t now_us)
{
	memd_lane_write w = { .expected_version = expected_version, .lane = l, .now_us = now_us };
	conf_lane got = { 0 };
	int32_t r = conf_lane_write(st, &w, &got);

	cr_assert_eq(r, 0, "lane_write %s at version %lld: %s", l->key,
		     (long long)expected_version, st->err.msg);
	cr_assert_eq(got.l.version, expected_version + 1);
	return got;
}

/* Give lane (app, user, key) the turn turn_id, leased until lease_until. */
static conf_lane lane_turn_ok(const char *app, const char *user, const char *key,
			      const char *turn_id, int64_t lease_until)
{
	conf_lane cur = lane_get_ok(app, user, key);
	memd_lane l = cur.l;
	conf_lane got;

	l.turn_id = turn_id;
	l.turn_started_us = cur.l.updated_us;
	l.turn_lease_until_us = lease_until;
	got = lane_update_ok(&l, cur.l.version, cur.l.updated_us);
	conf_lane_clear(&cur);
	return got;
}

static void put_ok(const char *key, const char *id, uint32_t mode, uint32_t want_depth)
{
	char body[96];
	uint32_t depth = 0;
	int32_t r;

	snprintf(body, sizeof(body), "{\"text\":\"%s\"}", id);
	r = conf_inbox_put(st, APP, USER, key, id, mode, body, T0 + 1, &depth);
	cr_assert_eq(r, 0, "inbox_put %s: %s", id, st->err.msg);
	cr_assert_eq(depth, want_depth, "depth after putting %s is %u, expected %u", id, depth,
		     want_depth);
}

/* Assert the inbox of (APP, USER, key) lists exactly ids (the slot's
 * first; slot_first says whether the first one is in the slot). */
static void assert_inbox(const char *key, int slot_first, const char *const *ids, size_t n)
{
	conf_inbox l = { 0 };
	int32_t r = conf_inbox_list(st, APP, USER, key, &l);

	cr_assert_eq(r, 0, "inbox_list %s: %s", key, st->err.msg);
	cr_assert_eq(l.n, n, "inbox of %s has %zu items, expected %zu", key, l.n, n);
	for (size_t i = 0; i < n; i++) {
		cr_assert_str_eq(l.v[i].id, ids[i], "inbox item %zu is %s, expected %s", i,
				 l.v[i].id, ids[i]);
		cr_assert_eq(l.v[i].in_slot, (i == 0 && slot_first) ? 1u : 0u,
			     "item %s: in_slot %u", l.v[i].id, l.v[i].in_slot);
		if (i > 1)
			cr_assert_gt(l.v[i].position, l.v[i - 1].position,
				     "the FIFO is not in put order at %s", l.v[i].id);
	}
	conf_inbox_clear(&l);
}

static void take_expect(const char *key, const char *turn, int64_t now_us, const char *want_id,
			uint32_t want_depth)
{
	conf_inbox_item it = { 0 };
	uint32_t depth = 99;
	int32_t r = conf_inbox_take(st, APP, USER, key, turn, now_us, &it, &depth);

	cr_assert_eq(r, 0, "inbox_take: %s", st->err.msg);
	conf_assert_str_or_null(it.id, want_id, "the item taken");
	cr_assert_eq(depth, want_depth, "depth after the take is %u, expected %u", depth,
		     want_depth);
	free(it.id);
	free(it.body_json);
}

static void assert_usage(const char *what, int64_t in, int64_t out, int64_t cr, int64_t cw,
			 int64_t cost, int64_t lp, int64_t g_in, int64_t g_out, int64_t g_cr,
			 int64_t g_cw, int64_t g_cost, int64_t g_lp)
{
	cr_assert(in == g_in && out == g_out && cr == g_cr && cw == g_cw && cost == g_cost &&
			  lp == g_lp,
		  "%s usage is in %lld out %lld cache_read %lld cache_write %lld cost %lld "
		  "last_prompt %lld; expected %lld %lld %lld %lld %lld %lld",
		  what, (long long)g_in, (long long)g_out, (long long)g_cr, (long long)g_cw,
		  (long long)g_cost, (long long)g_lp, (long long)in, (long long)out, (long long)cr,
		  (long long)cw, (long long)cost, (long long)lp);
}

static void assert_lane_usage(const conf_lane *l, int64_t in, int64_t out, int64_t cr, int64_t cw,
			      int64_t cost, int64_t lp)
{
	assert_usage("the lane's", in, out, cr, cw, cost, lp, l->l.input_tokens,
		     l->l.output_tokens, l->l.cache_read_tokens, l->l.cache_write_tokens,
		     l->l.cost_micro_usd, l->l.last_prompt_tokens);
}

static void assert_session_usage(const char *id, int64_t in, int64_t out, int64_t cr, int64_t cw,
				 int64_t cost, int64_t lp)
{
	conf_session s = session_get_ok(APP, USER, id);
	assert_usage(id, in, out, cr, cw, cost, lp, s.usage.input_tokens, s.usage.output_tokens,
		     s.usage.cache_read_tokens, s.usage.cache_write_tokens, s.usage.cost_micro_usd,
		     s.usage.last_prompt_tokens);
	conf_session_clear(&s);
}

/* ---- sessions' lifecycle members -------------------------------------- */

Test(lanes, session_lifecycle_members_round_trip)
{
	memd_session s = session_rec(APP, USER, "s1", T0);
	conf_session got = { 0 };
	conf_sessions l = { 0 };
	memd_session_query q = { .limit = 10 };
	int32_t r;

	s.flags = MEMD_SESSION_NOTICE;
	s.lane_key = KEY;
	s.origin_json = "{\"platform\":\"telegram\",\"chat_type\":\"dm\",\"chat_id\":\"42\"}";
	s.origin_platform = "telegram";
	s.previous_session = "s0";
	s.start_reason = "idle";
	/* Output-only members a create ignores. */
	s.end_reason = "bogus";
	s.ended_us = T0 + 5;
	s.input_tokens = 77;
	r = conf_session_create_full(st, &s, &got);
	cr_assert_eq(r, 0, "%s", st->err.msg);
	for (int pass = 0; pass < 3; pass++) {
		const conf_session *c = &got;
		if (pass == 1) {
			conf_session_clear(&got);
			got = session_get_ok(APP, USER, "s1");
		} else if (pass == 2) {
			cr_assert_eq(conf_session_list_q(st, APP, USER, &q, &l), 0, "%s", st->err.msg);
			cr_assert_eq(l.n, 1);
			c = &l.v[0];
		}
		cr_assert_eq(c->flags, MEMD_SESSION_NOTICE, "pass %d: flags 0x%x", pass, c->flags);
		conf_assert_str_or_null(c->lane_key, KEY, "lane_key");
		cr_assert(conf_json_equal(c->origin_json, s.origin_json), "origin_json %s",
			  c->origin_json);
		conf_assert_str_or_null(c->origin_platform, "telegram", "origin_platform");
		conf_assert_str_or_null(c->previous_session, "s0", "previous_session");
		conf_assert_str_or_null(c->start_reason, "idle", "start_reason");
		conf_assert_str_or_null(c->end_reason, NULL, "end_reason of an open session");
		cr_assert_eq(c->ended_us, 0, "an open session has ended_us %lld",
			     (long long)c->ended_us);
		cr_assert_eq(c->version, 0);
		cr_assert_eq(c->created_us, T0);
		assert_usage("a new session's", 0, 0, 0, 0, 0, 0, c->usage.input_tokens,
			     c->usage.output_tokens, c->usage.cache_read_tokens,
			     c->usage.cache_write_tokens, c->usage.cost_micro_usd,
			     c->usage.last_prompt_tokens);
	}
	conf_session_clear(&got);
	conf_sessions_clear(&l);

	/* A 1.0-style create leaves every lifecycle member unset. */
	session_ok(APP, USER, "plain", T0 + 1);
	got = session_get_ok(APP, USER, "plain");
	cr_assert_eq(got.flags, 0);
	cr_assert_null(got.lane_key);
	cr_assert_null(got.origin_json);
	cr_assert_null(got.origin_platform);
	cr_assert_null(got.previous_session);
	cr_assert_null(got.start_reason);
	cr_assert_null(got.end_reason);
	conf_session_clear(&got);
}

Test(lanes, clear_notice_once)
{
	memd_session s = session_rec(APP, USER, "n1", T0);
	memd_session_update p = { .struct_size = sizeof(p), .fields = MEMD_PATCH_CLEAR_NOTICE,
				  .now_us = T0 + 50 };
	conf_session got = { 0 };
	int32_t r;

	s.flags = MEMD_SESSION_NOTICE | MEMD_SESSION_ARCHIVED;
	cr_assert_eq(conf_session_create_full(st, &s, NULL), 0, "%s", st->err.msg);
	r = conf_session_update(st, APP, USER, "n1", &p, &got);
	cr_assert_eq(r, 0, "clear the notice: %s", st->err.msg);
	cr_assert_eq(got.flags, MEMD_SESSION_ARCHIVED, "flags after the clear: 0x%x", got.flags);
	cr_assert_eq(got.updated_us, T0, "clearing the notice moved updated_us");
	cr_assert_eq(got.version, 0, "clearing the notice moved the version");
	conf_session_clear(&got);
	got = session_get_ok(APP, USER, "n1");
	cr_assert_eq(got.flags, MEMD_SESSION_ARCHIVED);
	cr_assert_eq(got.updated_us, T0);
	conf_session_clear(&got);

	/* Once only: the second clear (and a clear of a session that never
	 * had a notice) conflicts and changes nothing. */
	p.now_us = T0 + 60;
	r = conf_session_update(st, APP, USER, "n1", &p, NULL);
	cr_assert_eq(r, MEMD_ECONFLICT, "a second clear gave %d (%s)", r, st->err.msg);
	session_ok(APP, USER, "n2", T0);
	r = conf_session_update(st, APP, USER, "n2", &p, NULL);
	cr_assert_eq(r, MEMD_ECONFLICT, "clearing an absent notice gave %d (%s)", r, st->err.msg);
	got = session_get_ok(APP, USER, "n2");
	cr_assert_eq(got.updated_us, T0);
	conf_session_clear(&got);
	r = conf_session_update(st, APP, USER, "nope", &p, NULL);
	cr_assert_eq(r, MEMD_ENOTFOUND, "clearing the notice of a missing session gave %d", r);
}

Test(lanes, session_list_filters_origin_platform_and_lane_key)
{
	static const struct {
		const char *id, *platform, *lane;
	} rows[] = {
		{ "a", "telegram", "k1" }, { "b", "slack", "k1" }, { "c", "telegram", "k2" },
		{ "d", NULL, NULL },       { "e", "telegram", "k1" }, { "f", "telegram", NULL },
	};
	static const struct {
		const char *platform, *lane, *want;
	} cases[] = {
		{ "telegram", NULL, "feca" }, { NULL, "k1", "eba" }, { "telegram", "k1", "ea" },
		{ "slack", "k2", "" },        { "discord", NULL, "" }, { NULL, NULL, "fedcba" },
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		memd_session s = session_rec(APP, USER, rows[i].id, T0 + (int64_t)i);
		s.origin_platform = rows[i].platform;
		s.lane_key = rows[i].lane;
		cr_assert_eq(conf_session_create_full(st, &s, NULL), 0, "%s", st->err.msg);
	}
	session_ok(APP, USER2, "x", T0); /* another user's: never listed */
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		/* Page one at a time too: the filter holds across pages. */
		for (uint32_t limit = 1; limit <= 10; limit += 9) {
			char got[16] = "", before[2] = "";
			size_t n = 0;
			memd_session_query q = { .limit = limit, .origin_platform = cases[k].platform,
						 .lane_key = cases[k].lane };
			for (;;) {
				conf_sessions l = { 0 };
				cr_assert_eq(conf_session_list_q(st, APP, USER, &q, &l), 0, "%s",
					     st->err.msg);
				for (size_t i = 0; i < l.n && n + 1 < sizeof(got); i++)
					got[n++] = l.v[i].id[0];
				got[n] = '\0';
				if (l.n < limit) {
					conf_sessions_clear(&l);
					break;
				}
				q.before_created_us = l.v[l.n - 1].created_us;
				cr_assert_eq(strlen(l.v[l.n - 1].id), 1);
				before[0] = l.v[l.n - 1].id[0];
				q.before_id = before;
				conf_sessions_clear(&l);
			}
			const char *want = cases[k].want;
			cr_assert_str_eq(got, want,
					 "platform %s lane %s limit %u: listed '%s', expected '%s'",
					 cases[k].platform ? cases[k].platform : "*",
					 cases[k].lane ? cases[k].lane : "*", limit, got, want);
		}
	}
}

/* ---- lane_write ------------------------------------------------------- */

Test(lanes, create_writes_every_host_field)
{
	memd_session ns = session_rec(APP, USER, "s1", T0);
	memd_lane l = lane_rec(APP, USER, KEY, "s1", T0 + 5);
	memd_lane_write w = { .flags = MEMD_LW_CREATE, .lane = &l, .create_session = &ns,
			      .now_us = T0 + 10 };
	conf_lane got = { 0 };
	conf_session s;
	char *state = NULL;
	memd_scope sc = conf_scope(APP, USER, "s1");
	int32_t r;

	ns.flags = MEMD_SESSION_NOTICE;
	ns.lane_key = KEY;
	ns.origin_json = "{\"platform\":\"telegram\"}";
	ns.origin_platform = "telegram";
	ns.previous_session = "s0";
	ns.start_reason = "daily";
	l.flags = MEMD_LANE_FRESH_RESET | MEMD_LANE_RESET_HAD_ACTIVITY;
	l.origin_json = "{\"platform\":\"telegram\",\"chat_id\":\"42\"}";
	l.resume_reason = "restart_interrupted";
	l.resume_marked_us = T0 + 1;
	l.reset_reason = "daily";
	l.previous_session = "s0";
	l.reset_us = T0 + 4;
	l.turn_id = "turn-1";
	l.turn_started_us = T0 + 5;
	l.turn_lease_until_us = T0 + LEASE_US;
	l.interruptions = 2;
	l.finalize_failures = 1;
	l.finalize_claim_until_us = T0 + 7;
	/* Store-kept members: a write's values are ignored. */
	l.created_us = 123;
	l.version = 77;
	l.input_tokens = 999;
	l.last_prompt_tokens = 999;
	l.inbox_depth = 9;

	r = conf_lane_get(st, APP, USER, KEY, NULL);
	cr_assert_eq(r, MEMD_ENOTFOUND, "lane_get of a missing lane gave %d", r);
	r = conf_lane_write(st, &w, &got);
	cr_assert_eq(r, 0, "%s", st->err.msg);
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1) {
			conf_lane_clear(&got);
			got = lane_get_ok(APP, USER, KEY);
		}
		cr_assert_str_eq(got.l.app, APP);
		cr_assert_str_eq(got.l.user, USER);
		cr_assert_str_eq(got.l.key, KEY);
		cr_assert_str_eq(got.l.session, "s1");
		cr_assert_eq(got.l.flags, MEMD_LANE_FRESH_RESET | MEMD_LANE_RESET_HAD_ACTIVITY);
		cr_assert(conf_json_equal(got.l.origin_json, l.origin_json));
		cr_assert_eq(got.l.version, 1, "pass %d: version %lld after create", pass,
			     (long long)got.l.version);
		cr_assert_eq(got.l.created_us, T0 + 10, "created_us is not the create's now_us");
		cr_assert_eq(got.l.updated_us, T0 + 5, "updated_us is not the host's");
		conf_assert_str_or_null(got.l.resume_reason, "restart_interrupted", "resume_reason");
		cr_assert_eq(got.l.resume_marked_us, T0 + 1);
		conf_assert_str_or_null(got.l.reset_reason, "daily", "reset_reason");
		conf_assert_str_or_null(got.l.previous_session, "s0", "previous_session");
		cr_assert_eq(got.l.reset_us, T0 + 4);
		conf_assert_str_or_null(got.l.turn_id, "turn-1", "turn_id");
		cr_assert_eq(got.l.turn_started_us, T0 + 5);
		cr_assert_eq(got.l.turn_lease_until_us, T0 + LEASE_US);
		cr_assert_eq(got.l.interruptions, 2);
		cr_assert_eq(got.l.finalize_failures, 1);
		cr_assert_eq(got.l.finalize_claim_until_us, T0 + 7);
		assert_lane_usage(&got, 0, 0, 0, 0, 0, 0);
		cr_assert_eq(got.l.inbox_depth, 0);
	}
	conf_lane_clear(&got);

	/* The session was created as session_create would: version 0, no state. */
	s = session_get_ok(APP, USER, "s1");
	cr_assert_eq(s.version, 0);
	cr_assert_eq(s.created_us, T0);
	cr_assert_eq(s.last_seq, 0);
	cr_assert_eq(s.flags, MEMD_SESSION_NOTICE);
	conf_assert_str_or_null(s.lane_key, KEY, "session lane_key");
	conf_assert_str_or_null(s.origin_platform, "telegram", "session origin_platform");
	conf_assert_str_or_null(s.previous_session, "s0", "session previous_session");
	conf_assert_str_or_null(s.start_reason, "daily", "session start_reason");
	conf_session_clear(&s);
	cr_assert_eq(conf_state_get(st, &sc, &state), 0, "%s", st->err.msg);
	cr_assert(conf_json_equal(state, "{}"), "state of a lane-made session: %s", state);
	free(state);

	/* Every host field is written by an update, NULLs and zeros too. */
	{
		memd_lane u = lane_rec(APP, USER, KEY, "s1", T0 + 20);
		u.created_us = 5;
		got = lane_update_ok(&u, 1, T0 + 30);
		cr_assert_eq(got.l.created_us, T0 + 10, "an update moved created_us");
		cr_assert_eq(got.l.updated_us, T0 + 20);
		cr_assert_eq(got.l.flags, 0);
		cr_assert_null(got.l.origin_json);
		cr_assert_null(got.l.resume_reason);
		cr_assert_null(got.l.reset_reason);
		cr_assert_null(got.l.previous_session);
		cr_assert_null(got.l.turn_id);
		cr_assert_eq(got.l.turn_lease_until_us, 0);
		cr_assert_eq(got.l.interruptions, 0);
		cr_assert_eq(got.l.finalize_claim_until_us, 0);
		conf_lane_clear(&got);
		got = lane_get_ok(APP, USER, KEY);
		cr_assert_eq(got.l.version, 2);
		cr_assert_null(got.l.turn_id);
		conf_lane_clear(&got);
	}
}

Test(lanes, lanes_are_scoped_by_app_user_key)
{
	conf_lane a = lane_with_session(APP, USER, KEY, "s1", T0);
	conf_lane b = lane_with_session(APP, USER2, KEY, "s2", T0);
	conf_lane c = lane_with_session(APP2, USER, KEY, "s3", T0);
	conf_lane g;

	conf_lane_clear(&a);
	conf_lane_clear(&b);
	conf_lane_clear(&c);
	g = lane_get_ok(APP, USER2, KEY);
	cr_assert_str_eq(g.l.session, "s2");
	conf_lane_clear(&g);
	g = lane_get_ok(APP2, USER, KEY);
	cr_assert_str_eq(g.l.session, "s3");
	conf_lane_clear(&g);
	cr_assert_eq(conf_lane_get(st, APP, USER, "telegram:dm:4", NULL), MEMD_ENOTFOUND);
	cr_assert_eq(conf_lane_get(st, APP, USER, "Telegram:dm:42", NULL), MEMD_ENOTFOUND,
		     "lane keys must compare byte for byte");
}

/* Everything a write may do besides the lane row, for the checks that a
 * refused write did none of it. */
typedef struct world {
	int64_t feed_last;
	uint32_t depth;
	int64_t lane_version;
	int64_t lane_input;
	int64_t s1_input;
	int64_t s1_ended;
} world;

static world world_now(void)
{
	world w = { 0 };
	conf_lane l = lane_get_ok(APP, USER, KEY);
	conf_session s = session_get_ok(APP, USER, "s1");

	w.feed_last = conf_feed_last(st);
	w.depth = l.l.inbox_depth;
	w.lane_version = l.l.version;
	w.lane_input = l.l.input_tokens;
	w.s1_input = s.usage.input_tokens;
	w.s1_ended = s.ended_us;
	conf_lane_clear(&l);
	conf_session_clear(&s);
	return w;
}

static void assert_world(const world *before, const char *what)
{
	world now = world_now();

	cr_assert_eq(now.feed_last, before->feed_last, "%s: the feed changed", what);
	cr_assert_eq(now.depth, before->depth, "%s: the inbox changed", what);
	cr_assert_eq(now.lane_version, before->lane_version, "%s: the lane's version moved", what);
	cr_assert_eq(now.lane_input, before->lane_input, "%s: the lane's usage changed", what);
	cr_assert_eq(now.s1_input, before->s1_input, "%s: the session's usage changed", what);
	cr_assert_eq(now.s1_ended, before->s1_ended, "%s: the session was ended", what);
}

Test(lanes, refused_writes_write_nothing)
{
	memd_usage u = { .struct_size = sizeof(u), .input_tokens = 10 };
	memd_session ns = session_rec(APP, USER, "s9", T0 + 3);
	memd_lane l = lane_rec(APP, USER, KEY, "s9", T0 + 3);
	memd_lane_write w = { .lane = &l, .create_session = &ns, .end_session = "s1",
			      .end_reason = "explicit", .usage = &u,
			      .flags = MEMD_LW_CLEAR_INBOX | MEMD_LW_FEED_FINALIZE, .now_us = T0 + 3 };
	conf_lane cur = lane_with_session(APP, USER, KEY, "s1", T0);
	world before;
	int32_t r;

	conf_lane_clear(&cur);
	put_ok(KEY, "m1", MEMD_INBOX_QUEUE, 1);
	before = world_now();

	/* A second create of an existing lane. */
	w.flags |= MEMD_LW_CREATE;
	r = conf_lane_write(st, &w, NULL);
	cr_assert_eq(r, MEMD_ECONFLICT, "a create of an existing lane gave %d (%s)", r,
		     st->err.msg);
	assert_world(&before, "a create of an existing lane");
	cr_assert_eq(conf_session_get(st, APP, USER, "s9", NULL), MEMD_ENOTFOUND,
		     "a refused create made its session");

	/* Stale versions, below and above. */
	w.flags &= ~MEMD_LW_CREATE;
	for (int64_t v = 0; v <= 2; v += 2) {
		w.expected_version = v;
		r = conf_lane_write(st, &w, NULL);
		cr_assert_eq(r, MEMD_ECONFLICT, "expected_version %lld of a lane at 1 gave %d",
			     (long long)v, r);
		assert_world(&before, "a stale write");
		cr_assert_eq(conf_session_get(st, APP, USER, "s9", NULL), MEMD_ENOTFOUND,
			     "a stale write made its session");
	}

	/* A write of a lane that does not exist (without CREATE). */
	{
		memd_lane other = lane_rec(APP, USER, "telegram:dm:7", "s9", T0 + 3);
		memd_lane_write wo = { .lane = &other, .create_session = &ns, .expected_version = 0,
				       .now_us = T0 + 3 };
		r = conf_lane_write(st, &wo, NULL);
		cr_assert_eq(r, MEMD_ECONFLICT, "an update of a missing lane gave %d", r);
		cr_assert_eq(conf_lane_get(st, APP, USER, "telegram:dm:7", NULL), MEMD_ENOTFOUND);
		cr_assert_eq(conf_session_get(st, APP, USER, "s9", NULL), MEMD_ENOTFOUND);
	}

	/* The right version, but the session to create exists already. */
	w.expected_version = 1;
	ns.id = "s1";
	r = conf_lane_write(st, &w, NULL);
	cr_assert_eq(r, MEMD_ECONFLICT, "creating an existing session gave %d", r);
	assert_world(&before, "a write whose session exists");

	/* The right version, but the session to reopen does not exist. */
	w.create_session = NULL;
	w.reopen_session = "nope";
	r = conf_lane_write(st, &w, NULL);
	cr_assert_eq(r, MEMD_ENOTFOUND, "reopening a missing session gave %d", r);
	assert_world(&before, "a write whose reopen failed");

	/* Negative usage is refused. */
	w.reopen_session = NULL;
	u.input_tokens = -1;
	r = conf_lane_write(st, &w, NULL);
	cr_assert_eq(r, MEMD_EINVAL, "negative usage gave %d", r);
	assert_world(&before, "a write with negative usage");

	/* Finally the same write applies, all of it. */
	u.input_tokens = 10;
	ns.id = "s9";
	w.create_session = &ns;
	r = conf_lane_write(st, &w, NULL);
	cr_assert_eq(r, 0, "%s", st->err.msg);
	{
		world after = world_now();
		conf_session s9 = session_get_ok(APP, USER, "s9");
		cr_assert_eq(after.lane_version, 2);
		cr_assert_eq(after.depth, 0, "CLEAR_INBOX left %u items", after.depth);
		cr_assert_gt(after.feed_last, before.feed_last, "FEED_FINALIZE added no record");
		cr_assert_eq(after.lane_input, 10);
		cr_assert_eq(after.s1_ended, T0 + 3);
		cr_assert_eq(after.s1_input, 0, "usage went to the old session, not lane->session");
		cr_assert_eq(s9.usage.input_tokens, 10, "usage did not reach lane->session");
		conf_session_clear(&s9);
	}
}

/* ---- races ------------------------------------------------------------ */

#define RACE_ROUNDS 20
#define RACE_THREADS 2

static int32_t ignore_lane(void *ud, const memd_lane *l)
{
	(void)ud;
	(void)l;
	return 0;
}

static void *race_create(void *p)
{
	conf_racer *a = p;
	char key[32], sid[32];
	memd_call call = { .struct_size = sizeof(call) };
	memd_session ns;
	memd_lane l;
	memd_lane_write w;
	memd_lane_sink sink = { sizeof(sink), NULL, ignore_lane };

	snprintf(key, sizeof(key), "race:%d", a->round);
	snprintf(sid, sizeof(sid), "r%d-t%d", a->round, a->thread);
	ns = session_rec(APP, USER, sid, T0);
	l = lane_rec(APP, USER, key, sid, T0);
	w = (memd_lane_write){ .struct_size = sizeof(w), .flags = MEMD_LW_CREATE, .lane = &l,
			       .create_session = &ns, .now_us = T0 };
	a->err.struct_size = sizeof(a->err);
	pthread_barrier_wait(a->start);
	a->result = a->ops->lane_write(a->h, &call, &w, &sink, &a->err);
	return NULL;
}

Test(lanes, create_race_has_one_winner)
{
	void *twin, *h[2];

	conf_race_instances(st, &twin, h);
	for (int round = 0; round < RACE_ROUNDS; round++) {
		conf_racer args[RACE_THREADS];
		int winners = 0, winner = -1;
		char key[32];
		conf_lane l;

		conf_race_round(st, h, round, race_create, args, RACE_THREADS);
		for (int t = 0; t < RACE_THREADS; t++) {
			if (args[t].result == 0) {
				winners++;
				winner = t;
			} else {
				cr_assert_eq(args[t].result, MEMD_ECONFLICT,
					     "round %d: a losing create gave %d (%s)", round,
					     args[t].result, args[t].err.msg);
			}
		}
		cr_assert_eq(winners, 1, "round %d: %d creates of one lane won", round, winners);
		snprintf(key, sizeof(key), "race:%d", round);
		l = lane_get_ok(APP, USER, key);
		cr_assert_eq(l.l.version, 1);
		for (int t = 0; t < RACE_THREADS; t++) {
			char sid[32];
			snprintf(sid, sizeof(sid), "r%d-t%d", round, t);
			if (t == winner)
				cr_assert_str_eq(l.l.session, sid);
			cr_assert_eq(conf_session_get(st, APP, USER, sid, NULL),
				     t == winner ? 0 : MEMD_ENOTFOUND,
				     "round %d: the %s's session %s", round,
				     t == winner ? "winner" : "loser", sid);
		}
		conf_lane_clear(&l);
	}
	conf_twin_close(twin);
}

/* ---- sessions ended, reopened; usage; finalize records ---------------- */

Test(lanes, end_and_reopen_sessions)
{
	conf_lane cur = lane_with_session(APP, USER, KEY, "s1", T0);
	memd_session ns = session_rec(APP, USER, "s2", T0 + 100);
	memd_lane l = lane_rec(APP, USER, KEY, "s2", T0 + 100);
	memd_lane_write w = { .expected_version = 1, .lane = &l, .create_session = &ns,
			      .end_session = "s1", .end_reason = "idle", .now_us = T0 + 100 };
	conf_session s;
	int32_t r;

	conf_lane_clear(&cur);
	ns.previous_session = "s1";
	ns.start_reason = "idle";
	r = conf_lane_write(st, &w, NULL);
	cr_assert_eq(r, 0, "%s", st->err.msg);
	s = session_get_ok(APP, USER, "s1");
	cr_assert_eq(s.ended_us, T0 + 100, "ended_us is not the write's now_us");
	conf_assert_str_or_null(s.end_reason, "idle", "end_reason");
	conf_session_clear(&s);
	s = session_get_ok(APP, USER, "s2");
	cr_assert_eq(s.ended_us, 0);
	cr_assert_null(s.end_reason);
	conf_assert_str_or_null(s.previous_session, "s1", "previous_session");
	conf_session_clear(&s);

	/* Ending an ended session keeps its first end; a missing one is fine. */
	w = (memd_lane_write){ .expected_version = 2, .lane = &l, .end_session = "s1",
			       .end_reason = "explicit", .now_us = T0 + 200 };
	cr_assert_eq(conf_lane_write(st, &w, NULL), 0, "%s", st->err.msg);
	s = session_get_ok(APP, USER, "s1");
	cr_assert_eq(s.ended_us, T0 + 100, "an ended session was ended again");
	conf_assert_str_or_null(s.end_reason, "idle", "end_reason after a second end");
	conf_session_clear(&s);
	w = (memd_lane_write){ .expected_version = 3, .lane = &l, .end_session = "gone",
			       .end_reason = "explicit", .now_us = T0 + 250 };
	cr_assert_eq(conf_lane_write(st, &w, NULL), 0, "ending a missing session: %s",
		     st->err.msg);

	/* Switch back: reopen s1, end s2, in one write. */
	l.session = "s1";
	w = (memd_lane_write){ .expected_version = 4, .lane = &l, .end_session = "s2",
			       .end_reason = "switch", .reopen_session = "s1", .now_us = T0 + 300 };
	cr_assert_eq(conf_lane_write(st, &w, NULL), 0, "%s", st->err.msg);
	s = session_get_ok(APP, USER, "s1");
	cr_assert_eq(s.ended_us, 0, "a reopened session still has ended_us");
	cr_assert_null(s.end_reason, "a reopened session still has an end_reason");
	conf_session_clear(&s);
	s = session_get_ok(APP, USER, "s2");
	cr_assert_eq(s.ended_us, T0 + 300);
	conf_assert_str_or_null(s.end_reason, "switch", "end_reason");
	conf_session_clear(&s);
	/* Reopening an open session changes nothing. */
	w = (memd_lane_write){ .expected_version = 5, .lane = &l, .reopen_session = "s1",
			       .now_us = T0 + 400 };
	cr_assert_eq(conf_lane_write(st, &w, NULL), 0, "%s", st->err.msg);
	s = session_get_ok(APP, USER, "s1");
	cr_assert_eq(s.ended_us, 0);
	conf_session_clear(&s);
}

Test(lanes, lane_get_delivers_the_lanes_session)
{
	conf_lane cur = lane_with_session(APP, USER, KEY, "s1", T0);
	memd_session ns = session_rec(APP, USER, "s2", T0 + 100);
	memd_lane l = lane_rec(APP, USER, KEY, "s2", T0 + 100);
	memd_lane_write w = { .expected_version = 1, .lane = &l, .create_session = &ns,
			      .end_session = "s1", .end_reason = "idle", .now_us = T0 + 100 };
	conf_session s = { 0 }, want;
	conf_lane got = { 0 };
	int n = -1;
	int32_t r;

	conf_lane_clear(&cur);
	cr_assert_eq(conf_lane_get_session(st, APP, USER, KEY, &got, &s, &n), 0, "%s",
		     st->err.msg);
	cr_assert_eq(n, 1, "lane_get delivered %d sessions for the lane's session", n);
	conf_assert_str_or_null(s.id, "s1", "the session delivered");
	conf_assert_str_or_null(got.l.session, "s1", "the lane delivered");
	conf_lane_clear(&got);

	/* After a write that moves the lane on, the new session, as stored. */
	ns.previous_session = "s1";
	ns.start_reason = "idle";
	r = conf_lane_write(st, &w, NULL);
	cr_assert_eq(r, 0, "%s", st->err.msg);
	cr_assert_eq(conf_lane_get_session(st, APP, USER, KEY, &got, &s, &n), 0, "%s",
		     st->err.msg);
	cr_assert_eq(n, 1);
	want = session_get_ok(APP, USER, "s2");
	conf_assert_str_or_null(got.l.session, "s2", "the lane delivered");
	conf_assert_str_or_null(s.id, "s2", "the session delivered");
	conf_assert_str_or_null(s.app, APP, "app");
	conf_assert_str_or_null(s.user, USER, "user");
	conf_assert_str_or_null(s.previous_session, "s1", "previous_session");
	conf_assert_str_or_null(s.start_reason, "idle", "start_reason");
	conf_assert_str_or_null(s.lane_key, want.lane_key, "lane_key");
	cr_assert_eq(s.created_us, want.created_us);
	cr_assert_eq(s.updated_us, want.updated_us);
	cr_assert_eq(s.version, want.version);
	cr_assert_eq(s.last_seq, want.last_seq);
	cr_assert_eq(s.ended_us, 0);
	conf_session_clear(&want);
	conf_lane_clear(&got);

	/* The lane's session deleted: the lane alone, and no error. */
	cr_assert_eq(conf_session_delete(st, APP, USER, "s2"), 0, "%s", st->err.msg);
	n = -1;
	cr_assert_eq(conf_lane_get_session(st, APP, USER, KEY, &got, &s, &n), 0,
		     "lane_get of a lane whose session is gone: %s", st->err.msg);
	cr_assert_eq(n, 0, "lane_get delivered a session that was deleted");
	conf_assert_str_or_null(got.l.session, "s2", "the lane delivered");
	conf_lane_clear(&got);

	/* Without session_out, as before; and an unknown lane delivers neither. */
	got = lane_get_ok(APP, USER, KEY);
	conf_assert_str_or_null(got.l.session, "s2", "the lane without session_out");
	conf_lane_clear(&got);
	cr_assert_eq(conf_lane_get_session(st, APP, USER, "nope", NULL, &s, &n), MEMD_ENOTFOUND);
	cr_assert_eq(n, 0);
	conf_session_clear(&s);
}

Test(lanes, usage_sums_on_lane_writes_and_appends)
{
	memd_usage u = { .struct_size = sizeof(u), .input_tokens = 10, .output_tokens = 20,
			 .cache_read_tokens = 3, .cache_write_tokens = 4, .cost_micro_usd = 500,
			 .last_prompt_tokens = 100 };
	memd_lane l = lane_rec(APP, USER, KEY, "s1", T0 + 1);
	memd_lane_write w = { .expected_version = 1, .lane = &l, .usage = &u, .now_us = T0 + 1 };
	memd_scope sc = conf_scope(APP, USER, "s1");
	memd_session s1 = session_rec(APP, USER, "s1", T0);
	conf_lane got;
	int32_t r;

	/* Appends find the lane through the session's lane_key. */
	s1.lane_key = KEY;
	cr_assert_eq(conf_session_create_full(st, &s1, NULL), 0, "%s", st->err.msg);
	got = lane_create_ok(APP, USER, KEY, "s1", T0);
	conf_lane_clear(&got);
	cr_assert_eq(conf_lane_write(st, &w, &got), 0, "%s", st->err.msg);
	assert_lane_usage(&got, 10, 20, 3, 4, 500, 100);
	conf_lane_clear(&got);
	assert_session_usage("s1", 10, 20, 3, 4, 500, 100);

	/* last_prompt_tokens: the latest nonzero report, not a sum. */
	u = (memd_usage){ .struct_size = sizeof(u), .input_tokens = 1, .output_tokens = 2,
			  .cache_read_tokens = 3, .cache_write_tokens = 4, .cost_micro_usd = 5 };
	w.expected_version = 2;
	cr_assert_eq(conf_lane_write(st, &w, &got), 0, "%s", st->err.msg);
	assert_lane_usage(&got, 11, 22, 6, 8, 505, 100);
	conf_lane_clear(&got);
	u.last_prompt_tokens = 50;
	w.expected_version = 3;
	cr_assert_eq(conf_lane_write(st, &w, &got), 0, "%s", st->err.msg);
	assert_lane_usage(&got, 12, 24, 9, 12, 510, 50);
	conf_lane_clear(&got);
	assert_session_usage("s1", 12, 24, 9, 12, 510, 50);

	/* An append's usage goes to its session and to the lane (its
	 * lane_key) whose current session it is, with the append. */
	{
		memd_usage au = { .struct_size = sizeof(au), .input_tokens = 100,
				  .cost_micro_usd = 1000, .last_prompt_tokens = 70 };
		memd_event *e = conf_event_new("e1", "assistant", "hello", T0 + 5);
		int64_t seq = 0;
		conf_append_opts o = { .now_us = T0 + 5, .usage = &au };

		r = conf_append(st, &sc, &e, 1, &o, &seq, NULL);
		cr_assert_eq(r, 0, "%s", st->err.msg);
		conf_event_free(e);
		assert_session_usage("s1", 112, 24, 9, 12, 1510, 70);
		got = lane_get_ok(APP, USER, KEY);
		assert_lane_usage(&got, 112, 24, 9, 12, 1510, 70);
		conf_lane_clear(&got);

		/* A state-only append with usage counts too. */
		au = (memd_usage){ .struct_size = sizeof(au), .output_tokens = 8 };
		r = conf_append(st, &sc, NULL, 0, &o, NULL, NULL);
		cr_assert_eq(r, 0, "%s", st->err.msg);
		assert_session_usage("s1", 112, 32, 9, 12, 1510, 70);

		/* An append shorter than 1.2's memd_append has no usage to read. */
		o.struct_size = offsetof(memd_append, usage);
		au = (memd_usage){ .struct_size = sizeof(au), .input_tokens = 5000 };
		r = conf_append(st, &sc, NULL, 0, &o, NULL, NULL);
		cr_assert_eq(r, 0, "a 1.0-sized append: %s", st->err.msg);
		assert_session_usage("s1", 112, 32, 9, 12, 1510, 70);

		/* Negative usage: refused, nothing written. */
		o.struct_size = 0;
		au = (memd_usage){ .struct_size = sizeof(au), .output_tokens = -3 };
		e = conf_event_new("e2", "assistant", "no", T0 + 6);
		r = conf_append(st, &sc, &e, 1, &o, &seq, NULL);
		conf_event_free(e);
		cr_assert_eq(r, MEMD_EINVAL, "an append with negative usage gave %d", r);
		cr_assert_eq(conf_session_get(st, APP, USER, "s1", NULL), 0);
		{
			conf_session s = session_get_ok(APP, USER, "s1");
			cr_assert_eq(s.last_seq, 1, "a refused append stored its event");
			conf_session_clear(&s);
		}
	}

	/* A session that names the lane but is not its current one: its
	 * appends' usage stays with the session. */
	{
		memd_session old = session_rec(APP, USER, "s0", T0);
		memd_usage au = { .struct_size = sizeof(au), .input_tokens = 7 };
		memd_scope sc0 = conf_scope(APP, USER, "s0");
		conf_append_opts o = { .now_us = T0 + 7, .usage = &au };

		old.lane_key = KEY;
		cr_assert_eq(conf_session_create_full(st, &old, NULL), 0, "%s", st->err.msg);
		cr_assert_eq(conf_append(st, &sc0, NULL, 0, &o, NULL, NULL), 0, "%s", st->err.msg);
		assert_session_usage("s0", 7, 0, 0, 0, 0, 0);
		got = lane_get_ok(APP, USER, KEY);
		assert_lane_usage(&got, 112, 32, 9, 12, 1510, 70);
		conf_lane_clear(&got);
	}
}

Test(lanes, feed_finalize_records)
{
	memd_scope sc = conf_scope(APP, USER, "s1");
	memd_lane l = lane_rec(APP, USER, KEY, "s1", T0 + 2);
	memd_lane_write w = { .expected_version = 1, .flags = MEMD_LW_FEED_FINALIZE, .lane = &l,
			      .now_us = T0 + 2 };
	conf_lane got = lane_with_session(APP, USER, KEY, "s1", T0);
	conf_feed f = { 0 };
	int64_t before, fin = 0, head = 0;
	int32_t r;

	conf_lane_clear(&got);
	conf_append_simple(st, &sc, "e", 1, 2, T0 + 1);
	before = conf_feed_last(st);
	l.flags = MEMD_LANE_FINALIZED;
	cr_assert_eq(conf_lane_write(st, &w, NULL), 0, "%s", st->err.msg);
	conf_append_simple(st, &sc, "e", 3, 1, T0 + 3);

	r = conf_feed_read(st, before, CONF_FEED_ALL, &f);
	cr_assert_eq(r, 0, "%s", st->err.msg);
	cr_assert_eq(f.n, 2, "%zu records after the finalize, expected it and one event", f.n);
	cr_assert_eq(f.v[0].kind, MEMD_FEED_FINALIZE, "kind %u", f.v[0].kind);
	cr_assert_gt(f.v[0].position, before);
	cr_assert_str_eq(f.v[0].app, APP);
	cr_assert_str_eq(f.v[0].user, USER);
	conf_assert_str_or_null(f.v[0].session, "s1", "the finalize record's session");
	cr_assert_null(f.v[0].event.id, "a finalize record carries an event");
	fin = f.v[0].position;
	cr_assert_eq(f.v[1].kind, MEMD_FEED_EVENT);
	cr_assert_gt(f.v[1].position, fin, "an event appended after the finalize sorts before it");
	conf_feed_clear(&f);
	if (conf_feed_head(st, &head) == 0)
		cr_assert_eq(head, conf_feed_last(st));
	/* Paging from the finalize record's position skips it. */
	r = conf_feed_read(st, fin, CONF_FEED_ALL, &f);
	cr_assert_eq(r, 0);
	cr_assert_eq(f.n, 1);
	cr_assert_eq(f.v[0].kind, MEMD_FEED_EVENT);
	conf_feed_clear(&f);
	/* A page of one ending at it. */
	r = conf_feed_read(st, before, 1, &f);
	cr_assert_eq(r, 0);
	cr_assert_eq(f.n, 1);
	cr_assert_eq(f.v[0].position, fin);
	conf_feed_clear(&f);
	got = lane_get_ok(APP, USER, KEY);
	cr_assert_eq(got.l.flags, MEMD_LANE_FINALIZED);
	conf_lane_clear(&got);
}

/* ---- inbox ------------------------------------------------------------ */

Test(lanes, inbox_put_slot_fifo_and_interrupts)
{
	conf_lane l = lane_with_session(APP, USER, KEY, "s1", T0);
	conf_inbox items = { 0 };
	uint32_t depth = 0;
	int32_t r;

	conf_lane_clear(&l);
	r = conf_inbox_put(st, APP, USER, "nolane", "x", MEMD_INBOX_QUEUE, "{}", T0, &depth);
	cr_assert_eq(r, MEMD_ENOTFOUND, "a put to a missing lane gave %d", r);

	/* queue: the slot while it is free, then the FIFO's tail. */
	put_ok(KEY, "a", MEMD_INBOX_QUEUE, 1);
	put_ok(KEY, "b", MEMD_INBOX_QUEUE, 2);
	put_ok(KEY, "c", MEMD_INBOX_QUEUE, 3);
	{
		static const char *const want[] = { "a", "b", "c" };
		assert_inbox(KEY, 1, want, 3);
	}
	r = conf_inbox_list(st, APP, USER, KEY, &items);
	cr_assert_eq(r, 0);
	for (size_t i = 0; i < items.n; i++) {
		char body[64];
		snprintf(body, sizeof(body), "{\"text\":\"%s\"}", items.v[i].id);
		cr_assert_eq(items.v[i].mode, MEMD_INBOX_QUEUE);
		cr_assert(conf_json_equal(items.v[i].body_json, body), "body %s",
			  items.v[i].body_json);
		cr_assert_eq(items.v[i].created_us, T0 + 1);
	}
	cr_assert_lt(items.v[1].position, items.v[2].position);
	conf_inbox_clear(&items);

	/* interrupt: replaces the slot's item; a burst collapses to the last. */
	put_ok(KEY, "x", MEMD_INBOX_INTERRUPT, 3);
	put_ok(KEY, "y", MEMD_INBOX_INTERRUPT, 3);
	put_ok(KEY, "z", MEMD_INBOX_INTERRUPT, 3);
	{
		static const char *const want[] = { "z", "b", "c" };
		assert_inbox(KEY, 1, want, 3);
	}
	r = conf_inbox_list(st, APP, USER, KEY, &items);
	cr_assert_eq(r, 0);
	cr_assert_eq(items.v[0].mode, MEMD_INBOX_INTERRUPT);
	conf_inbox_clear(&items);
	l = lane_get_ok(APP, USER, KEY);
	cr_assert_eq(l.l.inbox_depth, 3);
	conf_lane_clear(&l);

	/* An interrupt into an empty inbox takes the slot; a queue then goes
	 * behind it. */
	l = lane_with_session(APP, USER, "k2", "s2", T0);
	conf_lane_clear(&l);
	r = conf_inbox_put(st, APP, USER, "k2", "i1", MEMD_INBOX_INTERRUPT, "{}", T0, &depth);
	cr_assert_eq(r, 0, "%s", st->err.msg);
	cr_assert_eq(depth, 1);
	r = conf_inbox_put(st, APP, USER, "k2", "q1", MEMD_INBOX_QUEUE, "{}", T0, &depth);
	cr_assert_eq(r, 0, "%s", st->err.msg);
	cr_assert_eq(depth, 2);
	r = conf_inbox_list(st, APP, USER, "k2", &items);
	cr_assert_eq(r, 0);
	cr_assert_eq(items.n, 2);
	cr_assert_str_eq(items.v[0].id, "i1");
	cr_assert_eq(items.v[0].in_slot, 1);
	cr_assert_str_eq(items.v[1].id, "q1");
	cr_assert_eq(items.v[1].in_slot, 0);
	conf_inbox_clear(&items);

	/* Bad items are refused and change nothing. */
	r = conf_inbox_put(st, APP, USER, KEY, "bad", 0, "{}", T0, &depth);
	cr_assert_eq(r, MEMD_EINVAL, "an unknown mode gave %d", r);
	r = conf_inbox_put(st, APP, USER, KEY, "bad", MEMD_INBOX_QUEUE, "not json", T0, &depth);
	cr_assert_eq(r, MEMD_EINVAL, "a body that is not JSON gave %d", r);
	{
		static const char *const want[] = { "z", "b", "c" };
		assert_inbox(KEY, 1, want, 3);
	}
	/* The other lane's inbox is its own. */
	r = conf_inbox_list(st, APP, USER, "k2", &items);
	cr_assert_eq(r, 0);
	cr_assert_eq(items.n, 2);
	conf_inbox_clear(&items);

	/* CLEAR_INBOX empties it. */
	{
		memd_lane w_l = lane_rec(APP, USER, KEY, "s1", T0 + 9);
		memd_lane_write w = { .expected_version = 1, .flags = MEMD_LW_CLEAR_INBOX,
				      .lane = &w_l, .now_us = T0 + 9 };
		cr_assert_eq(conf_lane_write(st, &w, &l), 0, "%s", st->err.msg);
		cr_assert_eq(l.l.inbox_depth, 0, "the delivered lane has depth %u after a clear",
			     l.l.inbox_depth);
		conf_lane_clear(&l);
		assert_inbox(KEY, 0, NULL, 0);
		put_ok(KEY, "after", MEMD_INBOX_QUEUE, 1);
		{
			static const char *const want[] = { "after" };
			assert_inbox(KEY, 1, want, 1);
		}
	}
}

Test(lanes, inbox_take_holder_and_order)
{
	conf_lane l = lane_with_session(APP, USER, KEY, "s1", T0);
	conf_inbox_item it = { 0 };
	uint32_t depth = 0;
	int32_t r;

	conf_lane_clear(&l);
	put_ok(KEY, "a", MEMD_INBOX_QUEUE, 1);
	put_ok(KEY, "b", MEMD_INBOX_QUEUE, 2);
	put_ok(KEY, "c", MEMD_INBOX_QUEUE, 3);

	/* No turn: nobody holds the lane. */
	r = conf_inbox_take(st, APP, USER, KEY, "t1", T0 + 1, &it, &depth);
	cr_assert_eq(r, MEMD_ECONFLICT, "a take from a lane without a turn gave %d", r);
	l = lane_turn_ok(APP, USER, KEY, "t1", T0 + LEASE_US);
	conf_lane_clear(&l);
	/* Not the holder; the holder after its lease ended (lease_until is
	 * not after now). */
	r = conf_inbox_take(st, APP, USER, KEY, "t2", T0 + 1, &it, &depth);
	cr_assert_eq(r, MEMD_ECONFLICT, "a take by a non-holder gave %d", r);
	r = conf_inbox_take(st, APP, USER, KEY, "t1", T0 + LEASE_US, &it, &depth);
	cr_assert_eq(r, MEMD_ECONFLICT, "a take at the lease's end gave %d", r);
	r = conf_inbox_take(st, APP, USER, KEY, "t1", T0 + LEASE_US + 1, &it, &depth);
	cr_assert_eq(r, MEMD_ECONFLICT, "a take after the lease gave %d", r);
	r = conf_inbox_take(st, APP, USER, "nolane", "t1", T0 + 1, &it, &depth);
	cr_assert(r == MEMD_ENOTFOUND || r == MEMD_ECONFLICT, "a take from a missing lane gave %d",
		  r);
	cr_assert_null(it.id);
	{
		static const char *const want[] = { "a", "b", "c" };
		assert_inbox(KEY, 1, want, 3);
	}

	/* The slot first; the FIFO's head then moves into the slot. */
	take_expect(KEY, "t1", T0 + LEASE_US - 1, "a", 2);
	{
		static const char *const want[] = { "b", "c" };
		assert_inbox(KEY, 1, want, 2);
	}
	/* An interrupt replaces the promoted item. */
	put_ok(KEY, "x", MEMD_INBOX_INTERRUPT, 2);
	take_expect(KEY, "t1", T0 + 2, "x", 1);
	{
		static const char *const want[] = { "c" };
		assert_inbox(KEY, 1, want, 1);
	}
	put_ok(KEY, "d", MEMD_INBOX_QUEUE, 2);
	take_expect(KEY, "t1", T0 + 3, "c", 1);
	take_expect(KEY, "t1", T0 + 4, "d", 0);
	take_expect(KEY, "t1", T0 + 5, NULL, 0);
	assert_inbox(KEY, 0, NULL, 0);
	l = lane_get_ok(APP, USER, KEY);
	cr_assert_eq(l.l.inbox_depth, 0);
	conf_lane_clear(&l);
	/* After it is empty, a queue takes the slot again. */
	put_ok(KEY, "e", MEMD_INBOX_QUEUE, 1);
	{
		static const char *const want[] = { "e" };
		assert_inbox(KEY, 1, want, 1);
	}
}

#define TAKE_THREADS 4
#define TAKE_ITEMS 60

typedef struct take_arg {
	void *h;
	const memd_store_ops *ops;
	pthread_barrier_t *start;
	int got[TAKE_ITEMS];
	int n;
	int32_t result;
	memd_error err;
} take_arg;

static int32_t take_one(void *ud, const memd_inbox_item *i)
{
	take_arg *a = ud;

	if (a->n < TAKE_ITEMS)
		a->got[a->n] = atoi(i->id + 1);
	a->n++;
	return 0;
}

static void *race_take(void *p)
{
	take_arg *a = p;
	memd_scope sc = conf_scope(APP, USER, NULL);
	memd_inbox_sink sink = { sizeof(sink), a, take_one };

	a->err.struct_size = sizeof(a->err);
	pthread_barrier_wait(a->start);
	for (;;) {
		memd_call call = { .struct_size = sizeof(call) };
		uint32_t depth = 0;
		int before = a->n;

		a->result = a->ops->inbox_take(a->h, &call, &sc, KEY, "t1", T0 + 1, &sink, &depth,
					       &a->err);
		if (a->result != 0 || a->n == before)
			break;
	}
	return NULL;
}

Test(lanes, racing_takers_get_each_item_once_in_order)
{
	void *twin, *h[2];
	pthread_barrier_t start;
	pthread_t th[TAKE_THREADS];
	take_arg *args = calloc(TAKE_THREADS, sizeof(*args));
	int seen[TAKE_ITEMS] = { 0 };
	int total = 0;
	conf_lane l;

	cr_assert_not_null(args);
	conf_race_instances(st, &twin, h);
	l = lane_with_session(APP, USER, KEY, "s1", T0);
	conf_lane_clear(&l);
	l = lane_turn_ok(APP, USER, KEY, "t1", T0 + LEASE_US);
	conf_lane_clear(&l);
	for (int i = 0; i < TAKE_ITEMS; i++) {
		char id[16];
		snprintf(id, sizeof(id), "i%03d", i);
		put_ok(KEY, id, MEMD_INBOX_QUEUE, (uint32_t)i + 1);
	}
	pthread_barrier_init(&start, NULL, TAKE_THREADS);
	for (int t = 0; t < TAKE_THREADS; t++) {
		args[t] = (take_arg){ .h = h[t % 2], .ops = st->ops, .start = &start };
		cr_assert_eq(pthread_create(&th[t], NULL, race_take, &args[t]), 0);
	}
	for (int t = 0; t < TAKE_THREADS; t++)
		pthread_join(th[t], NULL);
	pthread_barrier_destroy(&start);
	for (int t = 0; t < TAKE_THREADS; t++) {
		cr_assert_eq(args[t].result, 0, "taker %d: %d (%s)", t, args[t].result,
			     args[t].err.msg);
		cr_assert_leq(args[t].n, TAKE_ITEMS);
		for (int k = 0; k < args[t].n; k++) {
			int id = args[t].got[k];
			cr_assert(id >= 0 && id < TAKE_ITEMS, "taker %d got item %d", t, id);
			cr_assert_not(seen[id], "item %d was taken twice", id);
			seen[id] = 1;
			if (k > 0)
				cr_assert_gt(id, args[t].got[k - 1],
					     "taker %d got item %d after item %d: out of order", t,
					     id, args[t].got[k - 1]);
		}
		total += args[t].n;
	}
	cr_assert_eq(total, TAKE_ITEMS, "%d of %d items were taken", total, TAKE_ITEMS);
	assert_inbox(KEY, 0, NULL, 0);
	conf_twin_close(twin);
	free(args);
}

/* ---- lane_list -------------------------------------------------------- */

typedef struct lane_row {
	const char *app, *user, *key;
	int64_t updated;         /* offset from T0 */
	uint32_t flags;
	const char *turn;
	int64_t lease;           /* offset from T0 */
	uint32_t depth;          /* inbox items to put */
} lane_row;

/* Ties on updated_us, keys and users that sort differently by byte. */
static const lane_row list_rows[] = {
	{ APP, USER, "k1", 10, 0, NULL, 0, 0 },
	{ APP, USER, "k2", 20, MEMD_LANE_SUSPENDED, NULL, 0, 1 },
	{ APP, USER, "k3", 20, MEMD_LANE_RESUME_PENDING, "t3", 100, 0 },
	{ APP, USER2, "k1", 20, 0, "t4", 50, 2 },
	{ APP, USER2, "k4", 30, MEMD_LANE_RESUME_PENDING | MEMD_LANE_SUSPENDED, NULL, 0, 0 },
	{ APP2, USER, "k1", 20, MEMD_LANE_FINALIZED, NULL, 0, 0 },
	{ APP2, USER, "k5", 5, 0, "t7", 200, 3 },
	{ APP, USER, "K9", 40, 0, NULL, 0, 0 },
};
#define N_LIST_ROWS (sizeof(list_rows) / sizeof(list_rows[0]))

static void make_rows(const lane_row *rows, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const lane_row *r = &rows[i];
		char sid[32];
		memd_lane l;
		memd_lane_write w;

		snprintf(sid, sizeof(sid), "s%zu", i);
		session_ok(r->app, r->user, sid, T0);
		l = lane_rec(r->app, r->user, r->key, sid, T0 + r->updated);
		l.flags = r->flags;
		l.turn_id = r->turn;
		l.turn_started_us = r->turn ? T0 : 0;
		l.turn_lease_until_us = r->turn ? T0 + r->lease : 0;
		w = (memd_lane_write){ .flags = MEMD_LW_CREATE, .lane = &l, .now_us = T0 };
		cr_assert_eq(conf_lane_write(st, &w, NULL), 0, "%s", st->err.msg);
		for (uint32_t k = 0; k < r->depth; k++) {
			char id[16];
			snprintf(id, sizeof(id), "m%u", k);
			cr_assert_eq(conf_inbox_put(st, r->app, r->user, r->key, id,
						    MEMD_INBOX_QUEUE, "{}", T0, NULL),
				     0, "%s", st->err.msg);
		}
	}
}

/* Newest activity first: (updated_us, app, user, key) descending. */
static int row_cmp(const void *pa, const void *pb)
{
	const lane_row *a = *(const lane_row *const *)pa, *b = *(const lane_row *const *)pb;
	int c;

	if (a->updated != b->updated)
		return a->updated > b->updated ? -1 : 1;
	if ((c = strcmp(a->app, b->app)) != 0)
		return -c;
	if ((c = strcmp(a->user, b->user)) != 0)
		return -c;
	return -strcmp(a->key, b->key);
}

static int row_matches(const lane_row *r, const memd_lane_query *q)
{
	if (q->app && strcmp(r->app, q->app) != 0)
		return 0;
	if (q->user && strcmp(r->user, q->user) != 0)
		return 0;
	if ((r->flags & q->flags_all) != q->flags_all || (r->flags & q->flags_none))
		return 0;
	if (q->turn == MEMD_LQ_TURN_SOME && !r->turn)
		return 0;
	if (q->turn == MEMD_LQ_TURN_NONE && r->turn)
		return 0;
	if (q->updated_after_us && !(T0 + r->updated > q->updated_after_us))
		return 0;
	if (q->updated_before_us && !(T0 + r->updated < q->updated_before_us))
		return 0;
	if (q->lease_before_us && !(r->turn && T0 + r->lease < q->lease_before_us))
		return 0;
	return 1;
}

/* List with q page by page (limit) and check the whole against the rows
 * that match, in order, each with its inbox depth. */
static void check_list(const memd_lane_query *q0, uint32_t limit, const char *what)
{
	const lane_row *want[N_LIST_ROWS];
	size_t n_want = 0, n_got = 0;
	memd_lane_query q = *q0;
	conf_lanes last = { 0 };

	for (size_t i = 0; i < N_LIST_ROWS; i++)
		if (row_matches(&list_rows[i], q0))
			want[n_want++] = &list_rows[i];
	qsort(want, n_want, sizeof(want[0]), row_cmp);
	q.limit = limit;
	for (int pages = 0;; pages++) {
		conf_lanes page = { 0 };
		int32_t r = conf_lane_list(st, &q, &page);

		cr_assert_eq(r, 0, "%s: %s", what, st->err.msg);
		cr_assert_leq(page.n, limit, "%s: a page of %zu lanes, limit %u", what, page.n,
			      limit);
		cr_assert_leq(pages, (int)N_LIST_ROWS + 1, "%s: paging does not end", what);
		for (size_t i = 0; i < page.n; i++, n_got++) {
			const conf_lane *g = &page.v[i];
			cr_assert_lt(n_got, n_want, "%s: more lanes than match (%s/%s/%s)", what,
				     g->l.app, g->l.user, g->l.key);
			cr_assert(strcmp(g->l.app, want[n_got]->app) == 0 &&
					  strcmp(g->l.user, want[n_got]->user) == 0 &&
					  strcmp(g->l.key, want[n_got]->key) == 0,
				  "%s: lane %zu is %s/%s/%s, expected %s/%s/%s", what, n_got, g->l.app,
				  g->l.user, g->l.key, want[n_got]->app, want[n_got]->user,
				  want[n_got]->key);
			cr_assert_eq(g->l.updated_us, T0 + want[n_got]->updated);
			cr_assert_eq(g->l.inbox_depth, want[n_got]->depth,
				     "%s: lane %s/%s/%s has inbox_depth %u, expected %u", what,
				     g->l.app, g->l.user, g->l.key, g->l.inbox_depth,
				     want[n_got]->depth);
		}
		if (page.n < limit) {
			conf_lanes_clear(&page);
			break;
		}
		conf_lanes_clear(&last);
		last = page;
		q.before_updated_us = last.v[last.n - 1].l.updated_us;
		q.before_app = last.v[last.n - 1].l.app;
		q.before_user = last.v[last.n - 1].l.user;
		q.before_key = last.v[last.n - 1].l.key;
	}
	conf_lanes_clear(&last);
	cr_assert_eq(n_got, n_want, "%s: %zu lanes listed, %zu match", what, n_got, n_want);
}

Test(lanes, lane_list_order_paging_and_filters)
{
	static const struct {
		const char *what;
		memd_lane_query q;
	} cases[] = {
		{ "every app", { .app = NULL } },
		{ "one app", { .app = APP } },
		{ "one user", { .app = APP, .user = USER } },
		{ "another app", { .app = APP2 } },
		{ "an unknown app", { .app = "nope" } },
		{ "suspended", { .flags_all = MEMD_LANE_SUSPENDED } },
		{ "resume pending, not suspended",
		  { .flags_all = MEMD_LANE_RESUME_PENDING, .flags_none = MEMD_LANE_SUSPENDED } },
		{ "not suspended in one app", { .app = APP, .flags_none = MEMD_LANE_SUSPENDED } },
		{ "with a turn", { .turn = MEMD_LQ_TURN_SOME } },
		{ "without a turn", { .turn = MEMD_LQ_TURN_NONE } },
		{ "active within", { .updated_after_us = T0 + 10 } },
		{ "idle since", { .updated_before_us = T0 + 20 } },
		{ "between", { .updated_after_us = T0 + 5, .updated_before_us = T0 + 30 } },
		{ "expired leases", { .lease_before_us = T0 + 101 } },
		{ "expired leases of one app", { .app = APP, .lease_before_us = T0 + 300 } },
		{ "no turn and idle", { .turn = MEMD_LQ_TURN_NONE, .updated_before_us = T0 + 25,
					.flags_none = MEMD_LANE_FINALIZED } },
	};

	make_rows(list_rows, N_LIST_ROWS);
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++)
		for (uint32_t limit = 1; limit <= N_LIST_ROWS + 1; limit += 2)
			check_list(&cases[k].q, limit, cases[k].what);

	/* Bad queries. */
	{
		memd_lane_query q = { .limit = 10, .user = USER };
		conf_lanes l = { 0 };
		cr_assert_eq(conf_lane_list(st, &q, &l), MEMD_EINVAL, "a user without an app");
		q = (memd_lane_query){ .limit = 0, .app = APP };
		cr_assert_eq(conf_lane_list(st, &q, &l), MEMD_EINVAL, "limit 0");
		cr_assert_eq(l.n, 0);
	}
}

/* ---- delete, prune, ended sessions, user_delete ---------------------- */

Test(lanes, lane_delete_takes_the_inbox_not_the_sessions)
{
	conf_lane l = lane_with_session(APP, USER, KEY, "s1", T0);
	conf_session s;

	conf_lane_clear(&l);
	put_ok(KEY, "a", MEMD_INBOX_QUEUE, 1);
	put_ok(KEY, "b", MEMD_INBOX_QUEUE, 2);
	cr_assert_eq(conf_lane_delete(st, APP, USER, KEY), 0, "%s", st->err.msg);
	cr_assert_eq(conf_lane_get(st, APP, USER, KEY, NULL), MEMD_ENOTFOUND);
	cr_assert_eq(conf_lane_delete(st, APP, USER, KEY), MEMD_ENOTFOUND,
		     "deleting a deleted lane");
	s = session_get_ok(APP, USER, "s1");
	conf_session_clear(&s);
	/* A lane made again under the key starts with an empty inbox. */
	l = lane_create_ok(APP, USER, KEY, "s1", T0 + 1);
	cr_assert_eq(l.l.inbox_depth, 0, "a deleted lane's inbox came back");
	conf_lane_clear(&l);
	assert_inbox(KEY, 0, NULL, 0);
}

Test(lanes, lane_prune_spares_suspended_and_busy_lanes)
{
	static const lane_row rows[] = {
		{ APP, USER, "old1", 0, 0, NULL, 0, 2 },
		{ APP, USER, "old-suspended", 1, MEMD_LANE_SUSPENDED, NULL, 0, 0 },
		{ APP, USER, "old-busy", 2, 0, "t1", 1000, 0 },
		{ APP2, USER2, "old2", 3, MEMD_LANE_FINALIZED, NULL, 0, 1 },
		{ APP, USER, "at-bound", 500, 0, NULL, 0, 0 },
		{ APP, USER, "new", 1000, 0, NULL, 0, 0 },
	};
	uint32_t count = 99, total = 0;
	int32_t r;

	make_rows(rows, sizeof(rows) / sizeof(rows[0]));
	r = conf_lane_prune(st, T0 + 500, 1, &count);
	cr_assert_eq(r, 0, "%s", st->err.msg);
	cr_assert_eq(count, 1, "prune with limit 1 pruned %u", count);
	total += count;
	r = conf_lane_prune(st, T0 + 500, 10, &count);
	cr_assert_eq(r, 0, "%s", st->err.msg);
	total += count;
	cr_assert_eq(total, 2, "%u lanes pruned, expected old1 and old2", total);
	r = conf_lane_prune(st, T0 + 500, 10, &count);
	cr_assert_eq(r, 0);
	cr_assert_eq(count, 0, "a second prune found %u more", count);

	cr_assert_eq(conf_lane_get(st, APP, USER, "old1", NULL), MEMD_ENOTFOUND);
	cr_assert_eq(conf_lane_get(st, APP2, USER2, "old2", NULL), MEMD_ENOTFOUND);
	cr_assert_eq(conf_lane_get(st, APP, USER, "old-suspended", NULL), 0, "a suspended lane");
	cr_assert_eq(conf_lane_get(st, APP, USER, "old-busy", NULL), 0, "a lane with a turn");
	cr_assert_eq(conf_lane_get(st, APP, USER, "at-bound", NULL), 0,
		     "updated_us == the bound is not older");
	cr_assert_eq(conf_lane_get(st, APP, USER, "new", NULL), 0);
	/* Their sessions stay; their inboxes went with them. */
	cr_assert_eq(conf_session_get(st, APP, USER, "s0", NULL), 0);
	{
		conf_lane l = lane_create_ok(APP, USER, "old1", "s0", T0 + 2000);
		cr_assert_eq(l.l.inbox_depth, 0, "a pruned lane's inbox came back");
		conf_lane_clear(&l);
	}
}

Test(lanes, session_list_ended_oldest_first)
{
	static const struct {
		const char *app, *user, *id;
		int64_t ended; /* offset from T0; 0 = stays open */
	} rows[] = {
		{ APP, USER, "a", 30 }, { APP, USER, "b", 10 },  { APP2, USER2, "c", 20 },
		{ APP, USER, "d", 0 },  { APP, USER2, "e", 50 }, { APP, USER, "f", 40 },
	};
	static const char *const want_all = "bcaf";
	conf_sessions l = { 0 };
	char got[16];
	int32_t r;

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		char key[16];
		memd_lane ln;
		memd_lane_write w;

		snprintf(key, sizeof(key), "k-%s", rows[i].id);
		conf_lane c = lane_with_session(rows[i].app, rows[i].user, key, rows[i].id, T0);
		conf_lane_clear(&c);
		if (!rows[i].ended)
			continue;
		ln = lane_rec(rows[i].app, rows[i].user, key, rows[i].id, T0 + rows[i].ended);
		w = (memd_lane_write){ .expected_version = 1, .lane = &ln,
				       .end_session = rows[i].id, .end_reason = "idle",
				       .now_us = T0 + rows[i].ended };
		cr_assert_eq(conf_lane_write(st, &w, NULL), 0, "%s", st->err.msg);
	}
	r = conf_session_list_ended(st, T0 + 50, 10, &l);
	cr_assert_eq(r, 0, "%s", st->err.msg);
	for (size_t i = 0; i < l.n && i + 1 < sizeof(got); i++)
		got[i] = l.v[i].id[0];
	got[l.n < sizeof(got) ? l.n : sizeof(got) - 1] = '\0';
	cr_assert_str_eq(got, want_all, "ended before T0+50: '%s', expected '%s'", got, want_all);
	cr_assert_eq(l.v[0].ended_us, T0 + 10);
	conf_assert_str_or_null(l.v[0].end_reason, "idle", "end_reason");
	cr_assert_str_eq(l.v[1].app, APP2);
	cr_assert_str_eq(l.v[1].user, USER2);
	conf_sessions_clear(&l);

	r = conf_session_list_ended(st, T0 + 100, 2, &l);
	cr_assert_eq(r, 0);
	cr_assert_eq(l.n, 2, "limit 2 gave %zu", l.n);
	cr_assert_str_eq(l.v[0].id, "b");
	cr_assert_str_eq(l.v[1].id, "c");
	conf_sessions_clear(&l);
	r = conf_session_list_ended(st, T0 + 10, 10, &l);
	cr_assert_eq(r, 0);
	cr_assert_eq(l.n, 0, "ended_us == the bound is not before it");
	conf_sessions_clear(&l);
	r = conf_session_list_ended(st, T0 + 1000, 10, &l);
	cr_assert_eq(r, 0);
	cr_assert_eq(l.n, 5, "every ended session: %zu", l.n);
	conf_sessions_clear(&l);
}

Test(lanes, user_delete_removes_lanes_session_delete_leaves_them)
{
	conf_lane l;
	conf_lanes all = { 0 };
	memd_lane_query q = { .limit = 10, .app = APP };

	l = lane_with_session(APP, USER, KEY, "s1", T0);
	conf_lane_clear(&l);
	l = lane_create_ok(APP, USER, "k2", "s1", T0 + 1);
	conf_lane_clear(&l);
	put_ok(KEY, "a", MEMD_INBOX_QUEUE, 1);
	l = lane_with_session(APP, USER2, KEY, "s2", T0 + 2);
	conf_lane_clear(&l);
	l = lane_with_session(APP2, USER, KEY, "s3", T0 + 3);
	conf_lane_clear(&l);

	/* session_delete leaves the lane naming the gone session. */
	cr_assert_eq(conf_session_delete(st, APP, USER2, "s2"), 0, "%s", st->err.msg);
	l = lane_get_ok(APP, USER2, KEY);
	cr_assert_str_eq(l.l.session, "s2");
	conf_lane_clear(&l);

	cr_assert_eq(conf_user_delete(st, APP, USER), 0, "%s", st->err.msg);
	cr_assert_eq(conf_lane_get(st, APP, USER, KEY, NULL), MEMD_ENOTFOUND,
		     "user_delete left the user's lane");
	cr_assert_eq(conf_lane_get(st, APP, USER, "k2", NULL), MEMD_ENOTFOUND);
	cr_assert_eq(conf_lane_list(st, &q, &all), 0, "%s", st->err.msg);
	cr_assert_eq(all.n, 1, "%zu lanes left in the app", all.n);
	cr_assert_str_eq(all.v[0].l.user, USER2);
	conf_lanes_clear(&all);
	l = lane_get_ok(APP2, USER, KEY); /* another app's user is another user */
	conf_lane_clear(&l);
	/* The inbox went too. */
	session_ok(APP, USER, "s4", T0 + 4);
	l = lane_create_ok(APP, USER, KEY, "s4", T0 + 4);
	cr_assert_eq(l.l.inbox_depth, 0, "user_delete left the lane's inbox");
	conf_lane_clear(&l);
	assert_inbox(KEY, 0, NULL, 0);
}

Test(lanes, durable_across_reopen)
{
	conf_lane l = lane_with_session(APP, USER, KEY, "s1", T0);
	int32_t r;

	conf_lane_clear(&l);
	l = lane_turn_ok(APP, USER, KEY, "t1", T0 + LEASE_US);
	conf_lane_clear(&l);
	put_ok(KEY, "a", MEMD_INBOX_QUEUE, 1);
	put_ok(KEY, "b", MEMD_INBOX_QUEUE, 2);
	conf_reopen(st);
	r = conf_lane_get(st, APP, USER, KEY, &l);
	if (!st->durable) {
		cr_assert(r == 0 || r == MEMD_ENOTFOUND, "lane_get after reopen: %d", r);
		conf_lane_clear(&l);
		return;
	}
	cr_assert_eq(r, 0, "the lane was lost across reopen: %s", st->err.msg);
	cr_assert_eq(l.l.version, 2);
	conf_assert_str_or_null(l.l.turn_id, "t1", "turn_id after reopen");
	cr_assert_eq(l.l.inbox_depth, 2);
	conf_lane_clear(&l);
	take_expect(KEY, "t1", T0 + 1, "a", 1);
	take_expect(KEY, "t1", T0 + 1, "b", 0);
}

#define BIG_USERS 3
#define BIG_LANES 40          /* per user */
#define BIG_PAGE 5
/* How many rows beyond those returned a listing may examine. */
#define ROWS_SLACK 8

/* Assert a listing delivered BIG_PAGE lanes having examined few rows. */
static void assert_page_cheap(memd_lane_query *q, const char *what)
{
	conf_lanes l = { 0 };
	int32_t r;

	q->limit = BIG_PAGE;
	st->rows_read = 0;
	r = conf_lane_list(st, q, &l);
	cr_assert_eq(r, 0, "%s: %s", what, st->err.msg);
	cr_assert_eq(l.n, BIG_PAGE, "%s: %zu lanes", what, l.n);
	cr_assert_geq(st->rows_read, BIG_PAGE, "%s: rows_read %llu: the store does not count rows",
		      what, (unsigned long long)st->rows_read);
	cr_assert_leq(st->rows_read, BIG_PAGE + ROWS_SLACK, "%s examined %llu rows of %d", what,
		      (unsigned long long)st->rows_read, 2 * BIG_USERS * BIG_LANES);
	conf_lanes_clear(&l);
}

Test(lanes, lane_list_rows_read_bounded)
{
	static const char *const users[BIG_USERS] = { "ua", "ub", "uc" };
	static const char *const apps[2] = { APP, APP2 };
	memd_lane_query q;

	for (int a = 0; a < 2; a++)
		for (int u = 0; u < BIG_USERS; u++) {
			session_ok(apps[a], users[u], "s", T0);
			for (int k = 0; k < BIG_LANES; k++) {
				char key[32];
				conf_lane l;
				snprintf(key, sizeof(key), "k%03d", k);
				/* Interleaved activity times across users and apps. */
				l = lane_create_ok(apps[a], users[u], key, "s",
						   T0 + (int64_t)(k * BIG_USERS + u) * 2 + a);
				conf_lane_clear(&l);
			}
		}

	q = (memd_lane_query){ .app = APP, .user = "ub" };
	assert_page_cheap(&q, "a user's newest");
	q = (memd_lane_query){ .app = APP, .user = "ub", .before_updated_us = T0 + 60,
			       .before_app = APP, .before_user = "ub", .before_key = "k010" };
	assert_page_cheap(&q, "a user's page in the middle");
	q = (memd_lane_query){ .app = APP2 };
	assert_page_cheap(&q, "an app's newest");
	q = (memd_lane_query){ .app = APP, .before_updated_us = T0 + 100, .before_app = APP,
			       .before_user = "ua", .before_key = "k999" };
	assert_page_cheap(&q, "an app's page in the middle");
	q = (memd_lane_query){ .app = NULL };
	assert_page_cheap(&q, "every app's newest");
	q = (memd_lane_query){ .updated_before_us = T0 + 50 };
	assert_page_cheap(&q, "every app's idle since");
	q = (memd_lane_query){ .updated_after_us = T0 + 100, .before_updated_us = T0 + 150,
			       .before_app = APP2, .before_user = "uc", .before_key = "k000" };
	assert_page_cheap(&q, "every app's page in a window");
}

#define UNKNOWN_LW_FLAG 0x80000000u /* a lane write flag no store.h defines */

Test(lanes, bad_lane_input_is_refused)
{
	char too_long[MEMD_ID_MAX + 2];
	const char *const bad_keys[] = { "", "tab\there", too_long };
	memd_lane l = lane_rec(APP, USER, KEY, "s1", T0);
	memd_lane_write w = { .flags = MEMD_LW_CREATE, .lane = &l, .now_us = T0 };
	conf_lanes all = { 0 };
	memd_lane_query q = { .limit = 10 };
	int32_t r;

	memset(too_long, 'k', sizeof(too_long) - 1);
	too_long[sizeof(too_long) - 1] = '\0';
	session_ok(APP, USER, "s1", T0);
	w.lane = NULL;
	r = conf_lane_write(st, &w, NULL);
	cr_assert_eq(r, MEMD_EINVAL, "a write without a lane gave %d", r);
	w.lane = &l;
	w.flags = MEMD_LW_CREATE | UNKNOWN_LW_FLAG;
	r = conf_lane_write(st, &w, NULL);
	cr_assert_eq(r, MEMD_EINVAL, "an unknown write flag gave %d", r);
	w.flags = MEMD_LW_CREATE;
	for (size_t i = 0; i < sizeof(bad_keys) / sizeof(bad_keys[0]); i++) {
		l.key = bad_keys[i];
		r = conf_lane_write(st, &w, NULL);
		cr_assert_eq(r, MEMD_EINVAL, "lane key '%.16s' gave %d", bad_keys[i], r);
		r = conf_lane_get(st, APP, USER, bad_keys[i], NULL);
		cr_assert_eq(r, MEMD_EINVAL, "lane_get of key '%.16s' gave %d", bad_keys[i], r);
	}
	l.key = KEY;
	l.session = NULL;
	r = conf_lane_write(st, &w, NULL);
	cr_assert_eq(r, MEMD_EINVAL, "a lane without a session gave %d", r);
	cr_assert_eq(conf_lane_list(st, &q, &all), 0, "%s", st->err.msg);
	cr_assert_eq(all.n, 0, "a refused write stored a lane");
	conf_lanes_clear(&all);
}

#define RMW_THREADS 4
#define RMW_EACH 25
#define RMW_MAX_TRIES 10000 /* conflicts one thread may meet before the test gives up */

typedef struct rmw_arg {
	void *h;
	const memd_store_ops *ops;
	pthread_barrier_t *start;
	int done;
	int conflicts;
	int32_t result;
	memd_error err;
} rmw_arg;

typedef struct rmw_seen {
	int64_t version;
	uint32_t interruptions;
	char session[32];
} rmw_seen;

static int32_t rmw_keep(void *ud, const memd_lane *l)
{
	rmw_seen *s = ud;

	s->version = l->version;
	s->interruptions = l->interruptions;
	snprintf(s->session, sizeof(s->session), "%s", l->session);
	return 0;
}

/* Read the lane, add one to its interruptions and one token of usage,
 * write it back at the version read; on a conflict read again. */
static void *race_rmw(void *p)
{
	rmw_arg *a = p;
	memd_scope sc = conf_scope(APP, USER, NULL);
	memd_lane_sink sink = { sizeof(sink), NULL, rmw_keep };
	memd_usage u = { .struct_size = sizeof(u), .input_tokens = 1 };
	int tries = 0;

	a->err.struct_size = sizeof(a->err);
	pthread_barrier_wait(a->start);
	while (a->done < RMW_EACH && tries++ < RMW_MAX_TRIES) {
		memd_call call = { .struct_size = sizeof(call) };
		rmw_seen seen = { 0 };
		memd_lane l;
		memd_lane_write w;

		sink.userdata = &seen;
		a->result = a->ops->lane_get(a->h, &call, &sc, KEY, &sink, NULL, &a->err);
		if (a->result != 0)
			return NULL;
		l = lane_rec(APP, USER, KEY, seen.session, T0 + 1);
		l.interruptions = seen.interruptions + 1;
		w = (memd_lane_write){ .struct_size = sizeof(w), .expected_version = seen.version,
				       .lane = &l, .usage = &u, .now_us = T0 + 1 };
		a->result = a->ops->lane_write(a->h, &call, &w, &sink, &a->err);
		if (a->result == MEMD_ECONFLICT) {
			a->conflicts++;
			a->result = 0;
			continue;
		}
		if (a->result != 0)
			return NULL;
		a->done++;
	}
	return NULL;
}

Test(lanes, racing_conditional_writes_lose_no_update)
{
	void *twin, *h[2];
	pthread_barrier_t start;
	pthread_t th[RMW_THREADS];
	rmw_arg args[RMW_THREADS];
	conf_lane l;

	conf_race_instances(st, &twin, h);
	l = lane_with_session(APP, USER, KEY, "s1", T0);
	conf_lane_clear(&l);
	pthread_barrier_init(&start, NULL, RMW_THREADS);
	for (int t = 0; t < RMW_THREADS; t++) {
		args[t] = (rmw_arg){ .h = h[t % 2], .ops = st->ops, .start = &start };
		cr_assert_eq(pthread_create(&th[t], NULL, race_rmw, &args[t]), 0);
	}
	for (int t = 0; t < RMW_THREADS; t++)
		pthread_join(th[t], NULL);
	pthread_barrier_destroy(&start);
	for (int t = 0; t < RMW_THREADS; t++) {
		cr_assert_eq(args[t].result, 0, "writer %d: %d (%s)", t, args[t].result,
			     args[t].err.msg);
		cr_assert_eq(args[t].done, RMW_EACH, "writer %d made %d of %d writes (%d conflicts)",
			     t, args[t].done, RMW_EACH, args[t].conflicts);
	}
	l = lane_get_ok(APP, USER, KEY);
	cr_assert_eq(l.l.interruptions, RMW_THREADS * RMW_EACH,
		     "the count is %u after %d increments: updates were lost", l.l.interruptions,
		     RMW_THREADS * RMW_EACH);
	cr_assert_eq(l.l.version, 1 + RMW_THREADS * RMW_EACH);
	cr_assert_eq(l.l.input_tokens, RMW_THREADS * RMW_EACH, "usage added by lost writes");
	conf_lane_clear(&l);
	assert_session_usage("s1", RMW_THREADS * RMW_EACH, 0, 0, 0, 0, 0);
	conf_twin_close(twin);
}
