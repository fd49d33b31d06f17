/* SPDX-License-Identifier: MIT */
/*
 * The lanes of the libmemd facade (memd.h "lanes") over the real sqlite
 * plugin, on a clock the test drives (memd_set_clock): open's priority
 * (no lane, suspended, resume_pending, policy expiry, keep), idle and
 * daily resets with their notice shown once, explicit reset, switch and
 * suspend, turns with leases, interruptions and the suspension they
 * escalate to, the inbox, usage sums, bad input that changes nothing, and
 * races: threads of one process and two processes' handles on one file.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memd/memd.h>

#include "test_util.h"

#define US_PER_S 1000000LL
#define US_PER_MIN (60 * US_PER_S)
#define US_PER_HOUR (60 * US_PER_MIN)
/* 2026-11-20T02:00:00Z: a day's 04:00 UTC boundary is two hours later. */
#define T0 1795140000000000LL
#define RACERS 8

static tu_dir dir;
static memd *m;

/* The clock every lane decision reads. */
static _Atomic int64_t now_us = T0;

static int64_t test_clock(void *userdata)
{
	(void)userdata;
	return atomic_load(&now_us);
}

static void advance(int64_t us)
{
	atomic_fetch_add(&now_us, us);
}

static const char *config_yaml(void)
{
	static char yaml[TU_PATH_MAX + 1024];
	snprintf(yaml, sizeof(yaml),
		 "stores:\n  main: {plugin: sqlite, path: %s/memd.db}\n"
		 "lanes:\n"
		 "  lease_ms: 60000\n"
		 "  max_lease_ms: 14400000\n"
		 "  reset: {mode: both, idle_minutes: 60, at_hour: 4, timezone: UTC}\n"
		 "  overrides:\n"
		 "    - {platform: daily, reset: {mode: daily}}\n"
		 "    - {platform: quiet, reset: {notify: false}}\n"
		 "    - {platform: keep, reset: {mode: none}}\n"
		 "apps:\n  '*': {working_memory: {strategy: all}}\n",
		 dir.path);
	return yaml;
}

static void setup(void)
{
	atomic_store(&now_us, T0);
	tu_dir_make(&dir);
	m = tu_open(&dir, config_yaml());
	memd_set_clock(m, test_clock, NULL);
}

static void teardown(void)
{
	memd_close(m);
	tu_dir_remove(&dir);
}

TestSuite(facade_lanes, .init = setup, .fini = teardown);

/* ---- helpers ------------------------------------------------------------ */

/* Assert r == 0 and parse *out (a pointer: read after the call that
 * fills it). */
static json_t *ok_json(int32_t r, const memd_error *err, char **out)
{
	char *text = *out;
	cr_assert_eq(r, 0, "failed (%d): %s", (int)r, err->msg);
	*out = NULL;
	return tu_json(text);
}

static json_t *lane_open(const char *user, const char *key, const char *body)
{
	memd_error err = { 0 };
	char *out = NULL;
	int32_t r = memd_lane_open(m, "app", user, key, body, &out, &err);
	return ok_json(r, &err, &out);
}

static json_t *lane_get(const char *user, const char *key)
{
	memd_error err = { 0 };
	char *out = NULL;
	int32_t r = memd_lane_get(m, "app", user, key, &out, &err);
	return ok_json(r, &err, &out);
}

static json_t *session_get(const char *user, const char *sid)
{
	memd_error err = { 0 };
	char *out = NULL;
	int32_t r = memd_session_get(m, "app", user, sid, NULL, &out, &err);
	return ok_json(r, &err, &out);
}

static json_t *context(const char *user, const char *sid)
{
	memd_error err = { 0 };
	char *out = NULL;
	int32_t r = memd_context(m, "app", user, sid, &out, &err);
	return ok_json(r, &err, &out);
}

static void append_text(const char *user, const char *sid, const char *text)
{
	memd_error err = { 0 };
	char body[512], *out = NULL;
	snprintf(body, sizeof(body), "{\"events\":[{\"role\":\"user\",\"content\":\"%s\"}]}", text);
	tu_ok(memd_events_append(m, "app", user, sid, body, &out, &err), &err, &out);
}

static json_t *turn_begin(const char *user, const char *key, const char *body)
{
	memd_error err = { 0 };
	char *out = NULL;
	int32_t r = memd_turn_begin(m, "app", user, key, body, &out, &err);
	return ok_json(r, &err, &out);
}

static json_t *turn_end(const char *user, const char *key, const char *turn, const char *body)
{
	memd_error err = { 0 };
	char *out = NULL;
	int32_t r = memd_turn_end(m, "app", user, key, turn, body, &out, &err);
	return ok_json(r, &err, &out);
}

static const char *str(json_t *o, const char *path)
{
	json_t *v = o;
	char buf[128];
	strncpy(buf, path, sizeof(buf) - 1);
	buf[sizeof(buf) - 1] = '\0';
	for (char *tok = strtok(buf, "."); tok && v; tok = strtok(NULL, "."))
		v = json_object_get(v, tok);
	cr_assert(json_is_string(v), "%s is not a string", path);
	return json_string_value(v);
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

static int truth(json_t *o, const char *path)
{
	json_t *v = get(o, path);
	cr_assert(json_is_boolean(v), "%s is not a boolean", path);
	return json_is_true(v);
}

static json_int_t num(json_t *o, const char *path)
{
	json_t *v = get(o, path);
	cr_assert(json_is_integer(v), "%s is not an integer", path);
	return json_integer_value(v);
}

#define SRC(platform) "{\"source\":{\"platform\":\"" platform "\",\"chat_id\":\"c1\"}}"

/* ---- open's priority ---------------------------------------------------------- */

Test(facade_lanes, open_creates_the_lane_then_keeps_its_session)
{
	json_t *a = lane_open("alice", "tg:dm:1", SRC("Telegram")), *b;
	char sid[64];

	cr_assert(truth(a, "created"));
	cr_assert(json_is_null(get(a, "reset")));
	cr_assert(!truth(a, "resumed"));
	snprintf(sid, sizeof(sid), "%s", str(a, "session.id"));
	cr_assert_str_eq(str(a, "lane.session_id"), sid);
	cr_assert_str_eq(str(a, "lane.key"), "tg:dm:1");
	cr_assert_str_eq(str(a, "lane.origin.platform"), "telegram", "platforms in lowercase");
	cr_assert_str_eq(str(a, "lane.origin.chat_type"), "dm");
	cr_assert_str_eq(str(a, "session.lane_key"), "tg:dm:1");
	cr_assert_str_eq(str(a, "session.origin.chat_id"), "c1");
	cr_assert(json_is_null(get(a, "session.ended")));
	cr_assert_eq(num(a, "lane.version"), 1);
	cr_assert_str_eq(str(a, "lane.created"), "2026-11-20T02:00:00.000000Z");

	advance(10 * US_PER_MIN);
	b = lane_open("alice", "tg:dm:1", NULL);
	cr_assert(!truth(b, "created"));
	cr_assert(json_is_null(get(b, "reset")));
	cr_assert_str_eq(str(b, "session.id"), sid);
	cr_assert_str_eq(str(b, "lane.updated"), "2026-11-20T02:10:00.000000Z",
			 "the open marked the activity at the test's clock");
	cr_assert_eq(num(b, "lane.version"), 2);
	json_decref(a);
	json_decref(b);
}

Test(facade_lanes, idle_reset_makes_a_new_session_and_the_notice_shows_once)
{
	json_t *a = lane_open("alice", "k", SRC("tg")), *b, *old, *fresh, *c1, *c2;
	char sid[64];

	snprintf(sid, sizeof(sid), "%s", str(a, "session.id"));
	append_text("alice", sid, "hello");
	advance(61 * US_PER_MIN);
	b = lane_open("alice", "k", SRC("tg"));
	cr_assert(!truth(b, "created"));
	cr_assert_str_eq(str(b, "reset.reason"), "idle");
	cr_assert(truth(b, "reset.had_activity"));
	cr_assert_str_eq(str(b, "reset.previous_session"), sid);
	cr_assert_str_neq(str(b, "session.id"), sid);
	cr_assert_str_eq(str(b, "session.start_reason"), "idle");
	cr_assert_str_eq(str(b, "session.previous_session"), sid);
	cr_assert_str_eq(str(b, "lane.last_reset.reason"), "idle");
	cr_assert(truth(b, "lane.last_reset.had_activity"));
	cr_assert(!truth(b, "lane.fresh_reset"));

	old = session_get("alice", sid);
	cr_assert_str_eq(str(old, "end_reason"), "session_reset");
	cr_assert_str_eq(str(old, "ended"), "2026-11-20T03:01:00.000000Z");

	c1 = context("alice", str(b, "session.id"));
	cr_assert_str_eq(str(c1, "notice.reason"), "idle");
	cr_assert_str_eq(str(c1, "notice.text"),
			 "Session expired due to inactivity: this is a new session.");
	c2 = context("alice", str(b, "session.id"));
	cr_assert_null(get(c2, "notice"), "the notice is shown once");
	fresh = context("alice", sid);
	cr_assert_null(get(fresh, "notice"), "the old session owes none");
	json_decref(a);
	json_decref(b);
	json_decref(old);
	json_decref(c1);
	json_decref(c2);
	json_decref(fresh);
}

Test(facade_lanes, an_idle_reset_of_a_session_without_events_had_no_activity)
{
	json_t *a = lane_open("alice", "k", SRC("tg")), *b;

	advance(60 * US_PER_MIN + 1);
	b = lane_open("alice", "k", NULL);
	cr_assert_str_eq(str(b, "reset.reason"), "idle");
	cr_assert(!truth(b, "reset.had_activity"));
	json_decref(a);
	json_decref(b);
}

Test(facade_lanes, appends_are_activity_for_the_idle_policy)
{
	json_t *a = lane_open("alice", "k", SRC("tg")), *b;

	advance(50 * US_PER_MIN);
	append_text("alice", str(a, "session.id"), "still here");
	advance(50 * US_PER_MIN);
	b = lane_open("alice", "k", NULL);
	cr_assert(json_is_null(get(b, "reset")), "the append 50 minutes ago was activity");
	cr_assert_str_eq(str(b, "session.id"), str(a, "session.id"));
	json_decref(a);
	json_decref(b);
}

Test(facade_lanes, daily_reset_at_the_hour_with_its_notice)
{
	json_t *a, *b, *c, *d;

	advance(2 * US_PER_HOUR - US_PER_MIN); /* 03:59 UTC */
	a = lane_open("alice", "k", SRC("daily"));
	advance(30 * US_PER_S); /* 03:59:30: before the boundary */
	b = lane_open("alice", "k", NULL);
	cr_assert(json_is_null(get(b, "reset")));
	advance(US_PER_MIN); /* 04:00:30 */
	c = lane_open("alice", "k", NULL);
	cr_assert_str_eq(str(c, "reset.reason"), "daily");
	cr_assert_str_eq(str(c, "reset.previous_session"), str(a, "session.id"));
	d = context("alice", str(c, "session.id"));
	cr_assert_str_eq(str(d, "notice.reason"), "daily");
	cr_assert_str_eq(str(d, "notice.text"),
			 "Session expired at the daily reset: this is a new session.");
	json_decref(a);
	json_decref(b);
	json_decref(c);
	json_decref(d);
}

Test(facade_lanes, notify_false_resets_without_a_notice)
{
	json_t *a = lane_open("alice", "k", SRC("quiet")), *b, *c;

	advance(2 * US_PER_HOUR);
	b = lane_open("alice", "k", NULL);
	cr_assert_str_eq(str(b, "reset.reason"), "idle");
	c = context("alice", str(b, "session.id"));
	cr_assert_null(get(c, "notice"));
	json_decref(a);
	json_decref(b);
	json_decref(c);
}

Test(facade_lanes, mode_none_never_expires)
{
	json_t *a = lane_open("alice", "k", SRC("keep")), *b;

	advance(72 * US_PER_HOUR);
	b = lane_open("alice", "k", NULL);
	cr_assert(json_is_null(get(b, "reset")));
	cr_assert_str_eq(str(b, "session.id"), str(a, "session.id"));
	json_decref(a);
	json_decref(b);
}

Test(facade_lanes, resume_pending_keeps_the_session_even_when_expired)
{
	json_t *a = lane_open("alice", "k", SRC("tg")), *t, *e, *b, *c, *d;

	t = turn_begin("alice", "k", NULL);
	e = turn_end("alice", "k", str(t, "turn_id"),
		     "{\"outcome\":\"interrupted\",\"reason\":\"shutdown_timeout\"}");
	cr_assert(truth(e, "lane.resume_pending"));
	cr_assert_str_eq(str(e, "lane.resume_reason"), "shutdown_timeout");
	cr_assert_eq(num(e, "lane.interruptions"), 1);
	advance(3 * US_PER_HOUR);
	b = lane_open("alice", "k", NULL);
	cr_assert(truth(b, "resumed"));
	cr_assert(json_is_null(get(b, "reset")));
	cr_assert_str_eq(str(b, "session.id"), str(a, "session.id"));
	cr_assert(truth(b, "lane.resume_pending"), "kept until a turn ends ok");
	json_decref(t);
	t = turn_begin("alice", "k", NULL);
	c = turn_end("alice", "k", str(t, "turn_id"), "{\"outcome\":\"ok\"}");
	cr_assert(!truth(c, "lane.resume_pending"));
	cr_assert(json_is_null(get(c, "lane.resume_reason")));
	cr_assert_eq(num(c, "lane.interruptions"), 0);
	d = lane_open("alice", "k", NULL);
	cr_assert(!truth(d, "resumed"));
	json_decref(a);
	json_decref(t);
	json_decref(e);
	json_decref(b);
	json_decref(c);
	json_decref(d);
}

Test(facade_lanes, suspended_starts_a_new_session_before_resume_pending)
{
	memd_error err = { 0 };
	char *out = NULL;
	json_t *a = lane_open("alice", "k", SRC("tg")), *t, *e, *s, *b, *c;

	t = turn_begin("alice", "k", NULL);
	e = turn_end("alice", "k", str(t, "turn_id"), "{\"outcome\":\"interrupted\"}");
	cr_assert(truth(e, "lane.resume_pending"));
	cr_assert_str_eq(str(e, "lane.resume_reason"), "interrupted");
	s = ok_json(memd_lane_suspend(m, "app", "alice", "k", &out, &err), &err, &out);
	cr_assert(truth(s, "suspended"));
	cr_assert(!truth(s, "resume_pending"), "suspend clears resume_pending");
	b = lane_open("alice", "k", NULL);
	cr_assert_str_eq(str(b, "reset.reason"), "suspended");
	cr_assert(!truth(b, "resumed"));
	cr_assert(!truth(b, "lane.suspended"));
	cr_assert_str_neq(str(b, "session.id"), str(a, "session.id"));
	c = context("alice", str(b, "session.id"));
	cr_assert_str_eq(str(c, "notice.reason"), "suspended");
	json_decref(a);
	json_decref(t);
	json_decref(e);
	json_decref(s);
	json_decref(b);
	json_decref(c);
}

Test(facade_lanes, a_turn_in_progress_is_never_reset_by_the_policy)
{
	json_t *a = lane_open("alice", "k", SRC("tg")), *t, *b, *e, *c;

	t = turn_begin("alice", "k", "{\"lease_ms\":10800000}"); /* 3 h */
	advance(2 * US_PER_HOUR);
	b = lane_open("alice", "k", NULL);
	cr_assert(json_is_null(get(b, "reset")));
	cr_assert_str_eq(str(b, "session.id"), str(a, "session.id"));
	e = turn_end("alice", "k", str(t, "turn_id"), "{\"outcome\":\"ok\"}");
	advance(61 * US_PER_MIN);
	c = lane_open("alice", "k", NULL);
	cr_assert_str_eq(str(c, "reset.reason"), "idle", "after the turn, the policy applies");
	json_decref(a);
	json_decref(t);
	json_decref(b);
	json_decref(e);
	json_decref(c);
}

Test(facade_lanes, a_suspension_during_a_turn_waits_for_its_end)
{
	memd_error err = { 0 };
	char *out = NULL;
	json_t *a = lane_open("alice", "k", SRC("tg")), *t, *b, *e, *c;

	t = turn_begin("alice", "k", NULL);
	tu_ok(memd_lane_suspend(m, "app", "alice", "k", &out, &err), &err, &out);
	b = lane_open("alice", "k", NULL);
	cr_assert(json_is_null(get(b, "reset")), "the turn's session stays while it runs");
	cr_assert_str_eq(str(b, "session.id"), str(a, "session.id"));
	cr_assert(truth(b, "lane.suspended"));
	e = turn_end("alice", "k", str(t, "turn_id"), "{\"outcome\":\"ok\"}");
	c = lane_open("alice", "k", NULL);
	cr_assert_str_eq(str(c, "reset.reason"), "suspended");
	json_decref(a);
	json_decref(t);
	json_decref(b);
	json_decref(e);
	json_decref(c);
}

Test(facade_lanes, a_deleted_session_is_replaced_at_the_next_open)
{
	memd_error err = { 0 };
	json_t *a = lane_open("alice", "k", SRC("tg")), *b;

	tu_ok0(memd_session_delete(m, "app", "alice", str(a, "session.id"), &err), &err);
	b = lane_open("alice", "k", NULL);
	cr_assert_str_eq(str(b, "reset.reason"), "deleted");
	cr_assert_str_eq(str(b, "reset.previous_session"), str(a, "session.id"));
	cr_assert_str_neq(str(b, "session.id"), str(a, "session.id"));
	cr_assert_str_eq(str(b, "session.origin.platform"), "tg");
	json_decref(a);
	json_decref(b);
}

/* ---- explicit reset, switch, suspend ------------------------------------------- */

Test(facade_lanes, explicit_reset_ends_the_old_session_and_clears_the_inbox)
{
	memd_error err = { 0 };
	char *out = NULL;
	json_t *a = lane_open("alice", "k", SRC("tg")), *r, *old, *c, *l, *t, *v;

	tu_ok(memd_inbox_put(m, "app", "alice", "k",
			     "{\"mode\":\"queue\",\"event\":{\"role\":\"user\",\"content\":\"x\"}}",
			     &out, &err),
	      &err, &out);
	r = ok_json(memd_lane_reset(m, "app", "alice", "k", NULL, &out, &err), &err, &out);
	cr_assert_str_eq(str(r, "reset.reason"), "explicit");
	cr_assert_str_eq(str(r, "reset.previous_session"), str(a, "session.id"));
	cr_assert(truth(r, "lane.fresh_reset"));
	cr_assert_eq(num(r, "lane.inbox_depth"), 0);
	cr_assert_str_eq(str(r, "session.start_reason"), "explicit");
	old = session_get("alice", str(a, "session.id"));
	cr_assert_str_eq(str(old, "end_reason"), "session_reset");
	c = context("alice", str(r, "session.id"));
	cr_assert_null(get(c, "notice"), "an explicit reset owes no notice");

	/* During a turn a reset is refused and changes nothing. */
	t = turn_begin("alice", "k", NULL);
	l = lane_get("alice", "k");
	cr_assert_eq(memd_lane_reset(m, "app", "alice", "k", NULL, &out, &err), MEMD_ECONFLICT);
	cr_assert(strstr(err.msg, "turn in progress"), "%s", err.msg);
	v = lane_get("alice", "k");
	cr_assert(json_equal(l, v));
	json_decref(a);
	json_decref(r);
	json_decref(old);
	json_decref(c);
	json_decref(t);
	json_decref(l);
	json_decref(v);
}

Test(facade_lanes, reset_creates_a_missing_lane)
{
	memd_error err = { 0 };
	char *out = NULL;
	json_t *r = ok_json(memd_lane_reset(m, "app", "alice", "new", SRC("tg"), &out, &err), &err,
			    &out);
	cr_assert(truth(r, "created"));
	cr_assert_str_eq(str(r, "reset.reason"), "explicit");
	cr_assert(json_is_null(get(r, "reset.previous_session")));
	json_decref(r);
}

Test(facade_lanes, switch_reopens_a_session_of_the_same_user_only)
{
	memd_error err = { 0 };
	char *out = NULL, body[256];
	json_t *a = lane_open("alice", "k", SRC("tg")), *r, *s, *cur, *target, *l, *v, *bob;

	r = ok_json(memd_lane_reset(m, "app", "alice", "k", NULL, &out, &err), &err, &out);
	snprintf(body, sizeof(body), "{\"session_id\":\"%s\"}", str(a, "session.id"));
	s = ok_json(memd_lane_switch(m, "app", "alice", "k", body, &out, &err), &err, &out);
	cr_assert_str_eq(str(s, "lane.session_id"), str(a, "session.id"));
	cr_assert_str_eq(str(s, "session.id"), str(a, "session.id"));
	cr_assert(json_is_null(get(s, "session.ended")), "the target is reopened");
	cur = session_get("alice", str(r, "session.id"));
	cr_assert_str_eq(str(cur, "end_reason"), "session_switch");
	target = session_get("alice", str(a, "session.id"));
	cr_assert(json_is_null(get(target, "end_reason")));

	/* Another user's session is unknown here; nothing changes. */
	bob = ok_json(memd_session_create(m, "app", "bob", "{\"id\":\"bobs\"}", &out, &err), &err,
		      &out);
	l = lane_get("alice", "k");
	cr_assert_eq(memd_lane_switch(m, "app", "alice", "k", "{\"session_id\":\"bobs\"}", &out,
				      &err),
		     MEMD_ENOTFOUND);
	cr_assert(strstr(err.msg, "bobs"), "%s", err.msg);
	cr_assert_eq(memd_lane_switch(m, "app", "alice", "k", "{}", &out, &err), MEMD_EINVAL);
	v = lane_get("alice", "k");
	cr_assert(json_equal(l, v));
	json_decref(a);
	json_decref(r);
	json_decref(s);
	json_decref(cur);
	json_decref(target);
	json_decref(bob);
	json_decref(l);
	json_decref(v);
}

/* ---- turns ------------------------------------------------------------------------ */

Test(facade_lanes, one_turn_at_a_time_and_an_expired_lease_is_an_interruption)
{
	memd_error err = { 0 };
	char *out = NULL;
	json_t *a = lane_open("alice", "k", SRC("tg")), *t1, *t2, *l, *v;

	t1 = turn_begin("alice", "k", NULL);
	cr_assert_eq(num(t1, "lease_ms"), 60000);
	cr_assert_str_eq(str(t1, "lease_until"), "2026-11-20T02:01:00.000000Z");
	cr_assert_str_eq(str(t1, "lane.turn.id"), str(t1, "turn_id"));
	tu_ok(memd_inbox_put(m, "app", "alice", "k",
			     "{\"mode\":\"queue\",\"event\":{\"role\":\"user\",\"content\":\"x\"}}",
			     &out, &err),
	      &err, &out);
	l = lane_get("alice", "k");
	cr_assert_eq(memd_turn_begin(m, "app", "alice", "k", NULL, &out, &err), MEMD_ECONFLICT);
	cr_assert(strstr(err.msg, "2026-11-20T02:01:00.000000Z"), "%s", err.msg);
	cr_assert(strstr(err.msg, "inbox depth 1"), "%s", err.msg);
	cr_assert(!(err.flags & MEMD_ERROR_RETRYABLE));
	v = lane_get("alice", "k");
	cr_assert(json_equal(l, v), "a refused begin changes nothing");
	json_decref(v);

	/* The holder died: its lease runs out; the next begin records it. */
	advance(61 * US_PER_S);
	t2 = turn_begin("alice", "k", "{\"lease_ms\":5000}");
	cr_assert_str_neq(str(t2, "turn_id"), str(t1, "turn_id"));
	cr_assert(truth(t2, "lane.resume_pending"));
	cr_assert_str_eq(str(t2, "lane.resume_reason"), "restart_interrupted");
	cr_assert_eq(num(t2, "lane.interruptions"), 1);

	/* The old turn is stale now: heartbeat and end are refused. */
	v = lane_get("alice", "k");
	cr_assert_eq(memd_turn_heartbeat(m, "app", "alice", "k", str(t1, "turn_id"), NULL, &out,
					 &err),
		     MEMD_ECONFLICT);
	cr_assert_eq(memd_turn_end(m, "app", "alice", "k", str(t1, "turn_id"),
				   "{\"outcome\":\"ok\"}", &out, &err),
		     MEMD_ECONFLICT);
	cr_assert(strstr(err.msg, "is not lane"), "%s", err.msg);
	json_decref(l);
	l = lane_get("alice", "k");
	cr_assert(json_equal(l, v), "stale calls change nothing");
	cr_assert_eq(memd_turn_begin(m, "app", "alice", "k", "{\"lease_ms\":14400001}", &out,
				     &err),
		     MEMD_EINVAL);
	cr_assert_eq(memd_turn_end(m, "app", "alice", "k", str(t2, "turn_id"),
				   "{\"outcome\":\"done\"}", &out, &err),
		     MEMD_EINVAL);
	json_decref(a);
	json_decref(t1);
	json_decref(t2);
	json_decref(l);
	json_decref(v);
}

Test(facade_lanes, heartbeat_extends_the_lease)
{
	memd_error err = { 0 };
	char *out = NULL;
	json_t *a = lane_open("alice", "k", SRC("tg")), *t, *h;

	t = turn_begin("alice", "k", NULL);
	advance(50 * US_PER_S);
	h = ok_json(memd_turn_heartbeat(m, "app", "alice", "k", str(t, "turn_id"), NULL, &out,
					&err),
		    &err, &out);
	cr_assert_str_eq(str(h, "lease_until"), "2026-11-20T02:01:50.000000Z");
	advance(50 * US_PER_S); /* past the first lease, within the second */
	cr_assert_eq(memd_turn_begin(m, "app", "alice", "k", NULL, &out, &err), MEMD_ECONFLICT);
	json_decref(a);
	json_decref(t);
	json_decref(h);
}

Test(facade_lanes, the_third_interruption_in_a_row_suspends_the_lane)
{
	json_t *a = lane_open("alice", "k", SRC("tg")), *t, *e = NULL, *b;

	for (int i = 1; i <= 3; i++) {
		json_decref(e);
		t = turn_begin("alice", "k", NULL);
		e = turn_end("alice", "k", str(t, "turn_id"), "{\"outcome\":\"interrupted\"}");
		json_decref(t);
		if (i < 3) {
			cr_assert(truth(e, "lane.resume_pending"));
			cr_assert_eq(num(e, "lane.interruptions"), i);
		}
	}
	cr_assert(truth(e, "lane.suspended"));
	cr_assert(!truth(e, "lane.resume_pending"), "a suspended lane is never pending");
	/* Interrupted again while suspended: still not pending. */
	json_decref(e);
	t = turn_begin("alice", "k", NULL);
	e = turn_end("alice", "k", str(t, "turn_id"), "{\"outcome\":\"interrupted\"}");
	cr_assert(truth(e, "lane.suspended"));
	cr_assert(!truth(e, "lane.resume_pending"));
	b = lane_open("alice", "k", NULL);
	cr_assert_str_eq(str(b, "reset.reason"), "suspended");
	cr_assert_eq(num(b, "lane.interruptions"), 0);
	json_decref(a);
	json_decref(t);
	json_decref(e);
	json_decref(b);
}

Test(facade_lanes, failed_turns_neither_count_nor_clear)
{
	json_t *a = lane_open("alice", "k", SRC("tg")), *t, *e;

	t = turn_begin("alice", "k", NULL);
	json_decref(turn_end("alice", "k", str(t, "turn_id"), "{\"outcome\":\"interrupted\"}"));
	json_decref(t);
	t = turn_begin("alice", "k", NULL);
	e = turn_end("alice", "k", str(t, "turn_id"), "{\"outcome\":\"failed\"}");
	cr_assert(truth(e, "lane.resume_pending"));
	cr_assert_eq(num(e, "lane.interruptions"), 1);
	cr_assert(json_is_null(get(e, "lane.turn")));
	json_decref(a);
	json_decref(t);
	json_decref(e);
}

/* ---- usage ---------------------------------------------------------------------------- */

Test(facade_lanes, usage_sums_on_the_session_and_the_lane)
{
	memd_error err = { 0 };
	char *out = NULL, body[256];
	json_t *a = lane_open("alice", "k", SRC("tg")), *t, *e, *s, *l;
	const char *sid = str(a, "session.id");

	t = turn_begin("alice", "k", NULL);
	e = turn_end("alice", "k", str(t, "turn_id"),
		     "{\"outcome\":\"ok\",\"usage\":{\"input_tokens\":100,\"output_tokens\":20,"
		     "\"cache_read_tokens\":5,\"cost_usd\":0.25,\"last_prompt_tokens\":90}}");
	snprintf(body, sizeof(body),
		 "{\"events\":[{\"role\":\"assistant\",\"content\":\"hi\"}],"
		 "\"usage\":{\"input_tokens\":1,\"output_tokens\":2,\"cost_usd\":0.5}}");
	tu_ok(memd_events_append(m, "app", "alice", sid, body, &out, &err), &err, &out);
	s = session_get("alice", sid);
	cr_assert_eq(num(s, "usage.input_tokens"), 101);
	cr_assert_eq(num(s, "usage.output_tokens"), 22);
	cr_assert_eq(num(s, "usage.cache_read_tokens"), 5);
	cr_assert_eq(num(s, "usage.last_prompt_tokens"), 90);
	cr_assert_float_eq(json_real_value(get(s, "usage.cost_usd")), 0.75, 1e-9);
	l = lane_get("alice", "k");
	cr_assert_eq(num(l, "usage.input_tokens"), 101);
	cr_assert_eq(num(l, "usage.output_tokens"), 22);
	cr_assert_float_eq(json_real_value(get(l, "usage.cost_usd")), 0.75, 1e-9);

	/* Bad usage is refused and adds nothing. */
	cr_assert_eq(memd_events_append(m, "app", "alice", sid,
					"{\"events\":[{\"role\":\"user\",\"content\":\"x\"}],"
					"\"usage\":{\"input_tokens\":-1}}",
					&out, &err),
		     MEMD_EINVAL);
	cr_assert_eq(memd_events_append(m, "app", "alice", sid,
					"{\"usage\":{\"cost_usd\":\"1\"}}", &out, &err),
		     MEMD_EINVAL);
	cr_assert_eq(memd_events_append(m, "app", "alice", sid, "{\"usage\":{\"tokens\":1}}",
					&out, &err),
		     MEMD_EINVAL);
	json_decref(s);
	s = session_get("alice", sid);
	cr_assert_eq(num(s, "usage.input_tokens"), 101);
	cr_assert_eq(num(s, "last_seq"), 1);
	json_decref(a);
	json_decref(t);
	json_decref(e);
	json_decref(s);
	json_decref(l);
}

/* ---- inbox -------------------------------------------------------------------------- */

static json_t *inbox_put(const char *mode, const char *text)
{
	memd_error err = { 0 };
	char body[256], *out = NULL;
	snprintf(body, sizeof(body),
		 "{\"mode\":\"%s\",\"event\":{\"role\":\"user\",\"content\":\"%s\"}}", mode, text);
	return ok_json(memd_inbox_put(m, "app", "alice", "k", body, &out, &err), &err, &out);
}

static json_t *inbox_take(const char *turn)
{
	memd_error err = { 0 };
	char body[128], *out = NULL;
	snprintf(body, sizeof(body), "{\"turn_id\":\"%s\"}", turn);
	return ok_json(memd_inbox_take(m, "app", "alice", "k", body, &out, &err), &err, &out);
}

Test(facade_lanes, inbox_slot_fifo_and_holder_only_takes)
{
	memd_error err = { 0 };
	char *out = NULL;
	json_t *a = lane_open("alice", "k", SRC("tg")), *p, *t, *x, *list;
	const char *want[] = { "i2", "q2", "q3" };

	p = inbox_put("queue", "q1");
	cr_assert(truth(p, "slot"));
	cr_assert_eq(num(p, "depth"), 1);
	json_decref(p);
	p = inbox_put("queue", "q2");
	cr_assert(!truth(p, "slot"));
	json_decref(p);
	p = inbox_put("queue", "q3");
	json_decref(p);
	p = inbox_put("interrupt", "i2"); /* replaces q1 in the slot */
	cr_assert(truth(p, "slot"));
	cr_assert_eq(num(p, "depth"), 3);
	json_decref(p);

	list = ok_json(memd_inbox_list(m, "app", "alice", "k", &out, &err), &err, &out);
	cr_assert_eq(num(list, "depth"), 3);
	cr_assert_str_eq(str(json_array_get(get(list, "items"), 0), "event.content"), "i2");

	/* Only the turn holder takes. */
	cr_assert_eq(memd_inbox_take(m, "app", "alice", "k", "{\"turn_id\":\"nobody\"}", &out,
				     &err),
		     MEMD_ECONFLICT);
	t = turn_begin("alice", "k", NULL);
	for (size_t i = 0; i < 3; i++) {
		x = inbox_take(str(t, "turn_id"));
		cr_assert_str_eq(str(x, "item.event.content"), want[i]);
		cr_assert_eq(num(x, "depth"), (json_int_t)(2 - i));
		json_decref(x);
	}
	x = inbox_take(str(t, "turn_id"));
	cr_assert(json_is_null(get(x, "item")));
	json_decref(x);
	/* A lease that ran out takes nothing. */
	json_decref(inbox_put("queue", "late"));
	advance(2 * US_PER_MIN);
	cr_assert_eq(memd_inbox_take(m, "app", "alice", "k", "{}", &out, &err), MEMD_EINVAL);
	cr_assert_eq(memd_inbox_take(m, "app", "alice", "k", "{\"turn_id\":\"x\"}", &out, &err),
		     MEMD_ECONFLICT);
	json_decref(list);
	list = ok_json(memd_inbox_list(m, "app", "alice", "k", &out, &err), &err, &out);
	cr_assert_eq(num(list, "depth"), 1, "a refused take removes nothing");

	/* Bad puts. */
	cr_assert_eq(memd_inbox_put(m, "app", "alice", "k",
				    "{\"mode\":\"later\",\"event\":{\"role\":\"user\",\"content\":\"x\"}}",
				    &out, &err),
		     MEMD_EINVAL);
	cr_assert_eq(memd_inbox_put(m, "app", "alice", "k",
				    "{\"mode\":\"queue\",\"event\":{\"role\":\"boss\",\"content\":\"x\"}}",
				    &out, &err),
		     MEMD_EINVAL);
	cr_assert_eq(memd_inbox_put(m, "app", "alice", "nolane",
				    "{\"mode\":\"queue\",\"event\":{\"role\":\"user\",\"content\":\"x\"}}",
				    &out, &err),
		     MEMD_ENOTFOUND);
	json_decref(a);
	json_decref(t);
	json_decref(list);
}

/* ---- bad input, listing, resolving ------------------------------------------------------ */

Test(facade_lanes, unknown_lanes_and_bad_input)
{
	memd_error err = { 0 };
	char *out = NULL;

	cr_assert_eq(memd_lane_get(m, "app", "alice", "none", &out, &err), MEMD_ENOTFOUND);
	cr_assert(strstr(err.msg, "none"), "%s", err.msg);
	cr_assert_eq(memd_turn_begin(m, "app", "alice", "none", NULL, &out, &err), MEMD_ENOTFOUND);
	cr_assert_eq(memd_lane_suspend(m, "app", "alice", "none", &out, &err), MEMD_ENOTFOUND);
	cr_assert_eq(memd_lane_delete(m, "app", "alice", "none", &err), MEMD_ENOTFOUND);
	cr_assert_eq(memd_lane_switch(m, "app", "alice", "none", "{\"session_id\":\"s\"}", &out,
				      &err),
		     MEMD_ENOTFOUND);
	cr_assert_eq(memd_lane_open(m, "app", "alice", "a/b", NULL, &out, &err), MEMD_EINVAL);
	cr_assert_eq(memd_lane_open(m, "app", "alice", "k", "{\"source\":{\"chat_id\":\"1\"}}",
				    &out, &err),
		     MEMD_EINVAL);
	cr_assert(strstr(err.msg, "platform"), "%s", err.msg);
	cr_assert_eq(memd_lane_open(m, "app", "alice", "k",
				    "{\"source\":{\"platform\":\"tg\",\"chat_type\":\"room\"}}",
				    &out, &err),
		     MEMD_EINVAL);
	cr_assert_eq(memd_lane_open(m, "app", "alice", "k", "{\"src\":{}}", &out, &err),
		     MEMD_EINVAL);
	cr_assert_eq(memd_lane_get(m, "app", "alice", "k", &out, &err), MEMD_ENOTFOUND,
		     "refused opens create nothing");
}

Test(facade_lanes, list_filters_and_pages_newest_activity_first)
{
	memd_error err = { 0 };
	char *out = NULL;
	memd_lane_list_options o = { .struct_size = sizeof(o), .limit = 2 };
	json_t *p1, *p2, *t, *pending;

	for (int i = 0; i < 3; i++) {
		char key[8];
		snprintf(key, sizeof(key), "k%d", i);
		json_decref(lane_open(i == 2 ? "bob" : "alice", key, SRC("tg")));
		advance(US_PER_MIN);
	}
	p1 = ok_json(memd_lane_list(m, "app", NULL, &o, &out, &err), &err, &out);
	cr_assert_eq(json_array_size(get(p1, "lanes")), 2);
	cr_assert_str_eq(str(json_array_get(get(p1, "lanes"), 0), "key"), "k2");
	cr_assert_str_eq(str(json_array_get(get(p1, "lanes"), 1), "key"), "k1");
	o.cursor = str(p1, "next_cursor");
	p2 = ok_json(memd_lane_list(m, "app", NULL, &o, &out, &err), &err, &out);
	cr_assert_eq(json_array_size(get(p2, "lanes")), 1);
	cr_assert_str_eq(str(json_array_get(get(p2, "lanes"), 0), "key"), "k0");
	cr_assert(json_is_null(get(p2, "next_cursor")));

	t = turn_begin("alice", "k0", NULL);
	json_decref(turn_end("alice", "k0", str(t, "turn_id"), "{\"outcome\":\"interrupted\"}"));
	o = (memd_lane_list_options){ .struct_size = sizeof(o), .flags = MEMD_LANES_RESUME_PENDING };
	pending = ok_json(memd_lane_list(m, "app", NULL, &o, &out, &err), &err, &out);
	cr_assert_eq(json_array_size(get(pending, "lanes")), 1);
	cr_assert_str_eq(str(json_array_get(get(pending, "lanes"), 0), "key"), "k0");
	json_decref(pending);
	o = (memd_lane_list_options){ .struct_size = sizeof(o), .active_within_s = 90 };
	pending = ok_json(memd_lane_list(m, "app", "alice", &o, &out, &err), &err, &out);
	cr_assert_eq(json_array_size(get(pending, "lanes")), 1, "only k0 was active since");
	o.cursor = "garbage";
	cr_assert_eq(memd_lane_list(m, "app", NULL, &o, &out, &err), MEMD_EINVAL);
	json_decref(p1);
	json_decref(p2);
	json_decref(t);
	json_decref(pending);
}

Test(facade_lanes, sessions_list_by_lane_and_origin_platform)
{
	memd_error err = { 0 };
	char *out = NULL;
	memd_session_list_options o = { .struct_size = sizeof(o), .lane_key = "k" };
	json_t *a = lane_open("alice", "k", SRC("tg")), *b, *l;

	json_decref(lane_open("alice", "other", SRC("slack")));
	tu_ok(memd_session_create(m, "app", "alice", "{\"id\":\"plain\"}", &out, &err), &err, &out);
	advance(2 * US_PER_HOUR);
	b = lane_open("alice", "k", NULL);
	l = ok_json(memd_session_list_filtered(m, "app", "alice", &o, &out, &err), &err, &out);
	cr_assert_eq(json_array_size(get(l, "sessions")), 2);
	json_decref(l);
	o = (memd_session_list_options){ .struct_size = sizeof(o), .origin_platform = "SLACK" };
	l = ok_json(memd_session_list_filtered(m, "app", "alice", &o, &out, &err), &err, &out);
	cr_assert_eq(json_array_size(get(l, "sessions")), 1);
	cr_assert_str_eq(str(json_array_get(get(l, "sessions"), 0), "lane_key"), "other");
	json_decref(l);
	l = ok_json(memd_session_list(m, "app", "alice", NULL, 0, 0, &out, &err), &err, &out);
	cr_assert_eq(json_array_size(get(l, "sessions")), 4);
	json_decref(a);
	json_decref(b);
	json_decref(l);
}

Test(facade_lanes, resolve_and_open_by_source)
{
	memd_error err = { 0 };
	char *out = NULL;
	json_t *r, *o, *again;

	r = ok_json(memd_lane_resolve(m, "app",
				      "{\"platform\":\"discord\",\"chat_type\":\"group\","
				      "\"chat_id\":\"987\",\"thread_id\":\"678\",\"user_id\":\"u1\"}",
				      &out, &err),
		    &err, &out);
	cr_assert_str_eq(str(r, "key"), "discord:group:987:678");
	cr_assert(truth(r, "shared"));
	o = ok_json(memd_lane_open_source(m, "app",
					  "{\"platform\":\"telegram\",\"chat_id\":\"12345\","
					  "\"user_id\":\"12345\"}",
					  &out, &err),
		    &err, &out);
	cr_assert_str_eq(str(o, "key"), "telegram:dm:12345");
	cr_assert(truth(o, "created"));
	cr_assert_str_eq(str(o, "session.origin.platform"), "telegram");
	again = ok_json(memd_lane_open_source(m, "app",
					      "{\"platform\":\"telegram\",\"chat_id\":\"12345\","
					      "\"user_id\":\"12345\"}",
					      &out, &err),
			&err, &out);
	cr_assert(!truth(again, "created"));
	cr_assert_str_eq(str(again, "session.id"), str(o, "session.id"));
	cr_assert_eq(memd_lane_resolve(m, "app", "{\"chat_id\":\"1\"}", &out, &err), MEMD_EINVAL);
	json_decref(r);
	json_decref(o);
	json_decref(again);
}

/* ---- races ------------------------------------------------------------------------------ */

typedef struct racer {
	memd *m;
	pthread_barrier_t *go;
	char session[64];
	int created;
	int32_t rc;
	char msg[256];
} racer;

static void *race_open(void *p)
{
	racer *x = p;
	memd_error err = { 0 };
	char *out = NULL;
	json_t *o;

	pthread_barrier_wait(x->go);
	x->rc = memd_lane_open(x->m, "app", "alice", "race", SRC("tg"), &out, &err);
	if (x->rc < 0) {
		snprintf(x->msg, sizeof(x->msg), "%s", err.msg);
		return NULL;
	}
	o = json_loads(out, 0, NULL);
	memd_free(out);
	snprintf(x->session, sizeof(x->session), "%s",
		 json_string_value(json_object_get(json_object_get(o, "session"), "id")));
	x->created = json_is_true(json_object_get(o, "created"));
	json_decref(o);
	return NULL;
}

Test(facade_lanes, racing_opens_of_a_new_key_create_one_session)
{
	memd_error err = { 0 };
	char *out = NULL;
	memd_session_list_options o = { .struct_size = sizeof(o), .lane_key = "race" };
	pthread_barrier_t go;
	pthread_t t[RACERS];
	racer x[RACERS];
	int created = 0;
	json_t *l;

	pthread_barrier_init(&go, NULL, RACERS);
	for (int i = 0; i < RACERS; i++) {
		x[i] = (racer){ .m = m, .go = &go };
		cr_assert_eq(pthread_create(&t[i], NULL, race_open, &x[i]), 0);
	}
	for (int i = 0; i < RACERS; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&go);
	for (int i = 0; i < RACERS; i++) {
		cr_assert_eq(x[i].rc, 0, "open %d: %s", i, x[i].msg);
		cr_assert_str_eq(x[i].session, x[0].session);
		created += x[i].created;
	}
	cr_assert_eq(created, 1);
	l = ok_json(memd_session_list_filtered(m, "app", "alice", &o, &out, &err), &err, &out);
	cr_assert_eq(json_array_size(get(l, "sessions")), 1);
	json_decref(l);
}

typedef struct beginner {
	memd *m;
	pthread_barrier_t *go;
	int32_t rc;
	char msg[256];
} beginner;

static void *race_begin(void *p)
{
	beginner *b = p;
	memd_error err = { 0 };
	char *out = NULL;

	pthread_barrier_wait(b->go);
	b->rc = memd_turn_begin(b->m, "app", "alice", "k", NULL, &out, &err);
	snprintf(b->msg, sizeof(b->msg), "%s", err.msg);
	memd_free(out);
	return NULL;
}

/* Two memd handles on one database file (as two processes would be):
 * racing begins of one lane, one wins and the other sees its lease. */
Test(facade_lanes, two_handles_racing_turn_begins_one_wins)
{
	memd *m2 = NULL;
	memd_options opts = { .struct_size = sizeof(opts) };
	memd_error err = { 0 };
	char path[TU_PATH_MAX + 16];
	pthread_barrier_t go;
	pthread_t t[2];
	beginner b[2];

	json_decref(lane_open("alice", "k", SRC("tg")));
	snprintf(path, sizeof(path), "%s/memd.yaml", dir.path);
	opts.config_path = path;
	cr_assert_eq(memd_open(&opts, &m2, &err), 0, "%s", err.msg);
	memd_set_clock(m2, test_clock, NULL);
	for (int round = 0; round < 4; round++) {
		int won = 0;
		pthread_barrier_init(&go, NULL, 2);
		b[0] = (beginner){ .m = m, .go = &go };
		b[1] = (beginner){ .m = m2, .go = &go };
		for (int i = 0; i < 2; i++)
			cr_assert_eq(pthread_create(&t[i], NULL, race_begin, &b[i]), 0);
		for (int i = 0; i < 2; i++)
			pthread_join(t[i], NULL);
		pthread_barrier_destroy(&go);
		for (int i = 0; i < 2; i++) {
			if (b[i].rc == 0)
				won++;
			else
				cr_assert_eq(b[i].rc, MEMD_ECONFLICT, "%s", b[i].msg);
		}
		cr_assert_eq(won, 1, "round %d", round);
		advance(2 * US_PER_MIN); /* the winner's lease runs out */
	}
	memd_close(m2);
}

/* A reset time zone that does not load is a config problem at open,
 * with its location, not a failure at the first lane. */
Test(facade_lanes, an_unknown_time_zone_fails_open_with_its_location)
{
	char yaml[TU_PATH_MAX + 256], path[TU_PATH_MAX];
	memd_options o = { .struct_size = sizeof(o), .config_path = path };
	memd_error err = { 0 };
	memd *bad = NULL;

	snprintf(yaml, sizeof(yaml),
		 "stores:\n  main: {plugin: sqlite, path: %s/other.db}\n"
		 "lanes:\n"
		 "  reset: {mode: daily, timezone: Nowhere/Atlantis}\n",
		 dir.path);
	tu_write_file(&dir, "bad.yaml", yaml, path);
	cr_assert_eq(memd_open(&o, &bad, &err), MEMD_EINVAL);
	cr_assert_null(bad);
	cr_assert(strstr(err.msg, "bad.yaml:4:"), "%s", err.msg);
	cr_assert(strstr(err.msg, "Nowhere/Atlantis"), "%s", err.msg);
}

typedef struct reader {
	pthread_barrier_t *go;
	const char *sid;
	int noticed;
	int32_t rc;
} reader;

static void *race_context(void *p)
{
	reader *x = p;
	memd_error err = { 0 };
	char *out = NULL;
	json_t *o;

	pthread_barrier_wait(x->go);
	x->rc = memd_context(m, "app", "alice", x->sid, &out, &err);
	if (x->rc < 0)
		return NULL;
	o = json_loads(out, 0, NULL);
	memd_free(out);
	x->noticed = json_object_get(o, "notice") != NULL;
	json_decref(o);
	return NULL;
}

/* Of the context reads racing for a session's notice, exactly one shows it. */
Test(facade_lanes, racing_context_reads_show_the_notice_once)
{
	json_t *a = lane_open("alice", "k", SRC("tg")), *b;
	pthread_barrier_t go;
	pthread_t t[RACERS];
	reader x[RACERS];
	int noticed = 0;

	advance(2 * US_PER_HOUR);
	b = lane_open("alice", "k", NULL);
	pthread_barrier_init(&go, NULL, RACERS);
	for (int i = 0; i < RACERS; i++) {
		x[i] = (reader){ .go = &go, .sid = str(b, "session.id") };
		cr_assert_eq(pthread_create(&t[i], NULL, race_context, &x[i]), 0);
	}
	for (int i = 0; i < RACERS; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&go);
	for (int i = 0; i < RACERS; i++) {
		cr_assert_eq(x[i].rc, 0);
		noticed += x[i].noticed;
	}
	cr_assert_eq(noticed, 1);
	json_decref(a);
	json_decref(b);
}
