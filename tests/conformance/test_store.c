/* SPDX-License-Identifier: MIT */
/*
 * The session-store conformance suite: the contract at the top of
 * api/memd/store.h, run unchanged against every store plugin (the plugin
 * and its config come from the environment: see store_harness.h).
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "store_harness.h"

/* A query flag no version of store.h defines. */
#define UNKNOWN_EVQ_FLAG 0x80000000u
#define APP "app1"
#define USER "u1"
#define T0 1700000000000000LL /* a plausible unix time in us */
#define SUITE_TIMEOUT_S 60

static conf_store *st;

static void setup(void)
{
	st = conf_open();
}

static void teardown(void)
{
	conf_close(st);
	st = NULL;
}

TestSuite(store, .init = setup, .fini = teardown, .timeout = SUITE_TIMEOUT_S);

/* ---- helpers ---------------------------------------------------------- */

static void create_ok(const char *app, const char *user, const char *id, int64_t created_us)
{
	int32_t r = conf_session_create(st, app, user, id, NULL, created_us, NULL, NULL);
	cr_assert_eq(r, 0, "session_create(%s/%s/%s): %s", app, user, id, st->err.msg);
}

static conf_session get_ok(const char *app, const char *user, const char *id)
{
	conf_session s = { 0 };
	int32_t r = conf_session_get(st, app, user, id, &s);
	cr_assert_eq(r, 0, "session_get(%s/%s/%s): %s", app, user, id, st->err.msg);
	return s;
}

static size_t count_events(const memd_scope *sc)
{
	conf_events l = { 0 };
	int32_t r = conf_events_load(st, sc, 0, 0, 0, 0, 0, &l);
	size_t n;

	cr_assert_eq(r, 0, "events_load: %s", st->err.msg);
	n = l.n;
	conf_events_clear(&l);
	return n;
}

/* Assert l holds exactly the seqs in want[0..n). */
static void assert_seqs(const conf_events *l, const int64_t *want, size_t n, const char *what)
{
	cr_assert_eq(l->n, n, "%s: %zu events, expected %zu", what, l->n, n);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(l->v[i].seq, want[i], "%s: event %zu has seq %lld, expected %lld", what,
			     i, (long long)l->v[i].seq, (long long)want[i]);
}

static void free_events(memd_event **evs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		conf_event_free(evs[i]);
}

static char *text_of_content(const char *content_json)
{
	json_error_t e;
	json_t *c = json_loads(content_json, 0, &e);
	json_t *t;
	char *out;

	cr_assert_not_null(c, "content_json is not JSON: %s", e.text);
	t = json_object_get(json_array_get(json_object_get(c, "parts"), 0), "text");
	cr_assert(json_is_string(t), "content_json lost its text part");
	out = malloc(json_string_length(t) + 1);
	cr_assert_not_null(out);
	memcpy(out, json_string_value(t), json_string_length(t) + 1);
	json_decref(c);
	return out;
}

/* ---- sessions --------------------------------------------------------- */

Test(store, session_crud)
{
	conf_session s = { 0 };
	memd_session_update p = { .struct_size = sizeof(p) };
	int32_t r;

	r = conf_session_create(st, APP, USER, "s1", NULL, T0, NULL, &s);
	cr_assert_eq(r, 0, "%s", st->err.msg);
	cr_assert_str_eq(s.app, APP);
	cr_assert_str_eq(s.user, USER);
	cr_assert_str_eq(s.id, "s1");
	cr_assert_null(s.title, "a session created without title must have none");
	cr_assert(conf_json_equal(s.metadata_json, "{}"));
	cr_assert_eq(s.created_us, T0);
	cr_assert_eq(s.updated_us, T0);
	cr_assert_eq(s.version, 0);
	cr_assert_eq(s.last_seq, 0);
	cr_assert_eq(s.summary_seq, 0);
	cr_assert_eq(s.flags & MEMD_SESSION_ARCHIVED, 0);
	conf_session_clear(&s);

	s = get_ok(APP, USER, "s1");
	cr_assert_str_eq(s.id, "s1");
	cr_assert_eq(s.created_us, T0);
	cr_assert_eq(s.version, 0);
	conf_session_clear(&s);

	r = conf_session_create(st, APP, USER, "s1", "again", T0 + 5, NULL, NULL);
	cr_assert_eq(r, MEMD_ECONFLICT, "duplicate id: got %d (%s)", r, st->err.msg);
	s = get_ok(APP, USER, "s1");
	cr_assert_null(s.title, "a refused duplicate create changed the session");
	cr_assert_eq(s.created_us, T0);
	conf_session_clear(&s);

	/* The same id in another user or app is another session. */
	create_ok(APP, "u2", "s1", T0 + 1);
	create_ok("app2", USER, "s1", T0 + 2);
	s = get_ok(APP, "u2", "s1");
	cr_assert_eq(s.created_us, T0 + 1);
	conf_session_clear(&s);

	r = conf_session_get(st, APP, USER, "nope", NULL);
	cr_assert_eq(r, MEMD_ENOTFOUND, "missing session: got %d", r);
	r = conf_session_get(st, APP, "u3", "s1", NULL);
	cr_assert_eq(r, MEMD_ENOTFOUND, "session of another user: got %d", r);

	/* Update: title, metadata, archived; updated_us from now_us. */
	p.fields = MEMD_PATCH_TITLE | MEMD_PATCH_METADATA | MEMD_PATCH_ARCHIVED;
	p.title = "Trip planning";
	p.metadata_json = "{\"topic\":\"travel\",\"n\":3}";
	p.archived = 1;
	p.now_us = T0 + 100;
	r = conf_session_update(st, APP, USER, "s1", &p, &s);
	cr_assert_eq(r, 0, "%s", st->err.msg);
	cr_assert_str_eq(s.title, "Trip planning");
	cr_assert(conf_json_equal(s.metadata_json, p.metadata_json), "metadata %s", s.metadata_json);
	cr_assert_neq(s.flags & MEMD_SESSION_ARCHIVED, 0);
	cr_assert_eq(s.updated_us, T0 + 100);
	cr_assert_eq(s.created_us, T0);
	cr_assert_eq(s.version, 0, "update is not an append");
	conf_session_clear(&s);

	/* Only the fields named change. */
	memset(&p, 0, sizeof(p));
	p.struct_size = sizeof(p);
	p.fields = MEMD_PATCH_ARCHIVED;
	p.archived = 0;
	p.now_us = T0 + 200;
	r = conf_session_update(st, APP, USER, "s1", &p, NULL);
	cr_assert_eq(r, 0, "%s", st->err.msg);
	s = get_ok(APP, USER, "s1");
	cr_assert_str_eq(s.title, "Trip planning");
	cr_assert(conf_json_equal(s.metadata_json, "{\"topic\":\"travel\",\"n\":3}"));
	cr_assert_eq(s.flags & MEMD_SESSION_ARCHIVED, 0);
	cr_assert_eq(s.updated_us, T0 + 200);
	conf_session_clear(&s);

	r = conf_session_update(st, APP, USER, "nope", &p, NULL);
	cr_assert_eq(r, MEMD_ENOTFOUND, "update of a missing session: got %d", r);

	r = conf_session_delete(st, APP, USER, "s1");
	cr_assert_eq(r, 0, "%s", st->err.msg);
	r = conf_session_get(st, APP, USER, "s1", NULL);
	cr_assert_eq(r, MEMD_ENOTFOUND, "deleted session still found");
	r = conf_session_delete(st, APP, USER, "s1");
	cr_assert_eq(r, MEMD_ENOTFOUND, "second delete: got %d", r);
	/* Namesakes elsewhere survive. */
	s = get_ok(APP, "u2", "s1");
	conf_session_clear(&s);
	s = get_ok("app2", USER, "s1");
	conf_session_clear(&s);
	/* The id can be used again. */
	create_ok(APP, USER, "s1", T0 + 300);
	s = get_ok(APP, USER, "s1");
	cr_assert_eq(s.created_us, T0 + 300);
	cr_assert_null(s.title);
	conf_session_clear(&s);
}

Test(store, session_create_with_state)
{
	memd_scope sc = conf_scope(APP, USER, "s1");
	int32_t r;

	r = conf_session_create(st, APP, USER, "s1", "Hello", T0,
				"{\"k\":\"v\",\"user:lang\":\"fr\",\"app:model\":\"m1\"}", NULL);
	cr_assert_eq(r, 0, "%s", st->err.msg);
	conf_assert_state(st, &sc, "{\"k\":\"v\",\"user:lang\":\"fr\",\"app:model\":\"m1\"}");
	conf_session s = get_ok(APP, USER, "s1");
	cr_assert_str_eq(s.title, "Hello");
	cr_assert_eq(s.version, 0, "the initial state is not an append");
	conf_session_clear(&s);

	/* A bad initial delta creates nothing. */
	r = conf_session_create(st, APP, USER, "s2", NULL, T0, "{\"ok\":1,\"temp:x\":2}", NULL);
	cr_assert_eq(r, MEMD_EINVAL, "temp: key in initial state: got %d", r);
	r = conf_session_get(st, APP, USER, "s2", NULL);
	cr_assert_eq(r, MEMD_ENOTFOUND, "a refused create left a session behind");
	r = conf_session_create(st, APP, USER, "s2", NULL, T0, "[1]", NULL);
	cr_assert_eq(r, MEMD_EINVAL, "non-object initial state: got %d", r);
	r = conf_session_get(st, APP, USER, "s2", NULL);
	cr_assert_eq(r, MEMD_ENOTFOUND, "a refused create left a session behind");
}

#define LIST_N 25
#define LIST_TIES 5   /* sessions per created_us value */
#define LIST_PAGE 4

static int order_desc(const void *a, const void *b)
{
	const conf_session *x = a, *y = b;
	if (x->created_us != y->created_us)
		return x->created_us > y->created_us ? -1 : 1;
	return -strcmp(x->id, y->id);
}

/* Page through (APP, USER) with keyset paging; returns the ids in order. */
static size_t list_all(uint32_t flags, char ids[][8], size_t max)
{
	int64_t bc = 0;
	char bid[8] = "";
	size_t n = 0, pages = 0;

	for (;;) {
		conf_sessions page = { 0 };
		int32_t r = conf_session_list(st, APP, USER, flags, LIST_PAGE, bc, bc ? bid : NULL,
					      &page);
		cr_assert_eq(r, 0, "session_list: %s", st->err.msg);
		cr_assert_leq(page.n, LIST_PAGE, "page of %zu sessions, limit %d", page.n, LIST_PAGE);
		pages++;
		cr_assert_leq(pages, max / LIST_PAGE + 2, "paging does not end");
		for (size_t i = 0; i < page.n; i++) {
			cr_assert_lt(n, max, "more sessions listed than exist");
			cr_assert_str_eq(page.v[i].app, APP);
			cr_assert_str_eq(page.v[i].user, USER);
			snprintf(ids[n++], 8, "%s", page.v[i].id);
			bc = page.v[i].created_us;
			snprintf(bid, sizeof(bid), "%s", page.v[i].id);
		}
		if (page.n == 0) {
			conf_sessions_clear(&page);
			break;
		}
		conf_sessions_clear(&page);
	}
	return n;
}

Test(store, session_list_keyset_paging)
{
	conf_session want[LIST_N];
	char got[LIST_N + 1][8];
	size_t n, w;
	/* Created in an order unrelated to (created_us, id). */
	static const int perm[LIST_N] = { 7,  19, 3,  12, 0,  24, 15, 8,  21, 1,  10, 17, 5,
					  23, 2,  14, 9,  20, 6,  11, 18, 4,  22, 13, 16 };
	int archived[LIST_N] = { 0 };

	archived[3] = archived[11] = archived[20] = 1;
	for (int k = 0; k < LIST_N; k++) {
		int i = perm[k];
		char id[8];
		snprintf(id, sizeof(id), "s%02d", i);
		/* Ties: LIST_TIES sessions share each created_us. */
		create_ok(APP, USER, id, T0 + (i / LIST_TIES) * 1000);
		want[i] = (conf_session){ .id = strdup(id), .created_us = T0 + (i / LIST_TIES) * 1000 };
		if (archived[i]) {
			memd_session_update p = { .struct_size = sizeof(p), .fields = MEMD_PATCH_ARCHIVED,
						  .archived = 1, .now_us = T0 + 99999 };
			cr_assert_eq(conf_session_update(st, APP, USER, id, &p, NULL), 0, "%s",
				     st->err.msg);
		}
	}
	/* Noise in other scopes. */
	create_ok(APP, "u2", "x1", T0 + 500);
	create_ok("app2", USER, "x2", T0 + 500);

	for (int i = 0; i < LIST_N; i++)
		want[i].flags = archived[i] ? MEMD_SESSION_ARCHIVED : 0;
	qsort(want, LIST_N, sizeof(want[0]), order_desc);

	n = list_all(0, got, LIST_N);
	w = 0;
	for (int i = 0; i < LIST_N; i++) {
		if (want[i].flags)
			continue;
		cr_assert_lt(w, n, "listing stops early at %zu", w);
		cr_assert_str_eq(got[w], want[i].id, "position %zu: %s, expected %s", w, got[w],
				 want[i].id);
		w++;
	}
	cr_assert_eq(n, w, "listed %zu sessions, expected %zu (archived excluded)", n, w);

	n = list_all(MEMD_SQ_INCLUDE_ARCHIVED, got, LIST_N);
	cr_assert_eq(n, LIST_N, "with archived: %zu sessions, expected %d", n, LIST_N);
	for (int i = 0; i < LIST_N; i++)
		cr_assert_str_eq(got[i], want[i].id, "position %d: %s, expected %s", i, got[i],
				 want[i].id);

	/* A page starting mid-tie. */
	{
		conf_sessions page = { 0 };
		int32_t r = conf_session_list(st, APP, USER, MEMD_SQ_INCLUDE_ARCHIVED, 3,
					      want[6].created_us, want[6].id, &page);
		cr_assert_eq(r, 0, "%s", st->err.msg);
		cr_assert_eq(page.n, 3);
		for (int i = 0; i < 3; i++)
			cr_assert_str_eq(page.v[i].id, want[7 + i].id);
		conf_sessions_clear(&page);
	}
	/* Nobody's sessions. */
	{
		conf_sessions page = { 0 };
		int32_t r = conf_session_list(st, APP, "nobody", 0, 10, 0, NULL, &page);
		cr_assert_eq(r, 0, "%s", st->err.msg);
		cr_assert_eq(page.n, 0);
		conf_sessions_clear(&page);
	}
	for (int i = 0; i < LIST_N; i++)
		free(want[i].id);
}

/* ---- append ----------------------------------------------------------- */

Test(store, append_basics)
{
	memd_scope sc = conf_scope(APP, USER, "s1");
	memd_event *evs[3];
	int64_t seqs[3] = { -1, -1, -1 };
	memd_append_result res = { 0 };
	conf_append_opts o = { .now_us = T0 + 10 };
	conf_events l = { 0 };
	conf_session s;
	int32_t r;

	create_ok(APP, USER, "s1", T0);
	evs[0] = conf_event_new("e1", "user", "hello", T0 + 1);
	evs[1] = conf_event_new("e2", "assistant", "hi there", T0 + 2);
	evs[2] = conf_event_new("e3", "tool", "{\"ok\":true}", T0 + 3);
	evs[1]->invocation_id = strdup("inv-1");
	evs[1]->branch = strdup("main.b1");
	evs[1]->actions_json = strdup("{\"state_delta\":{\"a\":1}}");
	evs[1]->metadata_json = strdup("{\"model\":\"m\"}");
	evs[1]->author = (free((char *)evs[1]->author), strdup("agent-x"));
	evs[1]->tokens = 42;

	r = conf_append(st, &sc, evs, 3, &o, seqs, &res);
	cr_assert_eq(r, 0, "%s", st->err.msg);
	cr_assert_eq(seqs[0], 1);
	cr_assert_eq(seqs[1], 2);
	cr_assert_eq(seqs[2], 3);
	cr_assert_eq(res.version, 1);
	cr_assert_eq(res.flags & MEMD_APPEND_REPLAYED, 0);
	s = get_ok(APP, USER, "s1");
	cr_assert_eq(s.version, 1);
	cr_assert_eq(s.last_seq, 3);
	cr_assert_eq(s.updated_us, T0 + 10);
	cr_assert_eq(s.created_us, T0);
	conf_session_clear(&s);

	r = conf_events_load(st, &sc, 0, 0, 0, 0, 0, &l);
	cr_assert_eq(r, 0, "%s", st->err.msg);
	cr_assert_eq(l.n, 3);
	for (size_t i = 0; i < 3; i++) {
		const memd_event *g = &l.v[i], *w = evs[i];
		cr_assert_str_eq(g->id, w->id);
		cr_assert_eq(g->seq, (int64_t)i + 1);
		cr_assert_str_eq(g->role, w->role);
		cr_assert_str_eq(g->author, w->author);
		cr_assert_str_eq(g->text, w->text);
		cr_assert(conf_json_equal(g->content_json, w->content_json), "content %s",
			  g->content_json);
		cr_assert_eq(g->timestamp_us, w->timestamp_us);
		cr_assert_eq(g->tokens, w->tokens);
		cr_assert_gt(g->position, 0, "event without feed position");
		cr_assert_str_eq(g->app, APP);
		cr_assert_str_eq(g->user, USER);
		cr_assert_str_eq(g->session, "s1");
		if (i > 0)
			cr_assert_gt(g->position, l.v[i - 1].position);
	}
	cr_assert_null(l.v[0].invocation_id);
	cr_assert_null(l.v[0].branch);
	cr_assert_null(l.v[0].actions_json);
	cr_assert_str_eq(l.v[1].invocation_id, "inv-1");
	cr_assert_str_eq(l.v[1].branch, "main.b1");
	cr_assert(conf_json_equal(l.v[1].actions_json, evs[1]->actions_json));
	cr_assert(conf_json_equal(l.v[1].metadata_json, evs[1]->metadata_json));
	conf_events_clear(&l);
	free_events(evs, 3);

	/* Next batch continues the sequence. */
	conf_append_simple(st, &sc, "f", 1, 2, T0 + 20);
	s = get_ok(APP, USER, "s1");
	cr_assert_eq(s.version, 2);
	cr_assert_eq(s.last_seq, 5);
	cr_assert_eq(s.updated_us, T0 + 20);
	conf_session_clear(&s);

	/* State-only append: version bump, no events. */
	o = (conf_append_opts){ .delta = "{\"k\":1}", .now_us = T0 + 30 };
	memset(&res, 0, sizeof(res));
	r = conf_append(st, &sc, NULL, 0, &o, NULL, &res);
	cr_assert_eq(r, 0, "%s", st->err.msg);
	cr_assert_eq(res.version, 3);
	s = get_ok(APP, USER, "s1");
	cr_assert_eq(s.version, 3);
	cr_assert_eq(s.last_seq, 5);
	cr_assert_eq(s.updated_us, T0 + 30);
	conf_session_clear(&s);
	cr_assert_eq(count_events(&sc), 5);
	conf_assert_state(st, &sc, "{\"k\":1}");

	/* Appending to a missing session. */
	{
		memd_scope missing = conf_scope(APP, USER, "nope");
		memd_event *e = conf_event_new("z", "user", "z", T0);
		int64_t seq = 0;
		r = conf_append(st, &missing, &e, 1, NULL, &seq, NULL);
		cr_assert_eq(r, MEMD_ENOTFOUND, "append to a missing session: got %d", r);
		conf_event_free(e);
		r = conf_session_get(st, APP, USER, "nope", NULL);
		cr_assert_eq(r, MEMD_ENOTFOUND);
	}
}

/* The observable state of session s1: to prove a failed call wrote nothing. */
typedef struct snapshot {
	int64_t version, last_seq, updated_us, feed_last;
	size_t n_events;
	char *state;
	char *title;
} snapshot;

static snapshot snap(const memd_scope *sc)
{
	snapshot p = { 0 };
	conf_session s = get_ok(sc->app, sc->user, sc->session);

	p.version = s.version;
	p.last_seq = s.last_seq;
	p.updated_us = s.updated_us;
	p.title = s.title ? strdup(s.title) : NULL;
	conf_session_clear(&s);
	p.n_events = count_events(sc);
	cr_assert_eq(conf_state_get(st, sc, &p.state), 0, "%s", st->err.msg);
	p.feed_last = conf_feed_last(st);
	return p;
}

static void assert_unchanged(const memd_scope *sc, snapshot *before, const char *what)
{
	snapshot now = snap(sc);
	conf_feed f = { 0 };

	cr_assert_eq(now.version, before->version, "%s: version %lld -> %lld", what,
		     (long long)before->version, (long long)now.version);
	cr_assert_eq(now.last_seq, before->last_seq, "%s: last_seq changed", what);
	cr_assert_eq(now.updated_us, before->updated_us, "%s: updated_us changed", what);
	cr_assert_eq(now.n_events, before->n_events, "%s: %zu events -> %zu", what,
		     before->n_events, now.n_events);
	cr_assert(conf_json_equal(now.state, before->state), "%s: state %s -> %s", what,
		  before->state, now.state);
	cr_assert((!now.title && !before->title) ||
		  (now.title && before->title && strcmp(now.title, before->title) == 0),
		  "%s: title changed", what);
	cr_assert_eq(conf_feed_read(st, before->feed_last, CONF_FEED_ALL, &f), 0, "%s",
		     st->err.msg);
	cr_assert_eq(f.n, 0, "%s: %zu feed records were added", what, f.n);
	cr_assert_eq(now.feed_last, before->feed_last);
	conf_feed_clear(&f);
	free(now.state);
	free(now.title);
	free(before->state);
	free(before->title);
}

Test(store, append_atomic_repeated_id)
{
	memd_scope sc = conf_scope(APP, USER, "s1");
	memd_event *evs[3];
	int64_t seqs[3];
	conf_append_opts o = { .delta = "{\"a\":1,\"user:b\":2,\"app:c\":3}",
			       .title_if_unset = "Should not be set", .now_us = T0 + 50 };
	snapshot before;
	conf_events l = { 0 };
	int32_t r;

	create_ok(APP, USER, "s1", T0);
	conf_append_simple(st, &sc, "old", 1, 2, T0 + 1);
	before = snap(&sc);

	/* The 3rd event repeats the 1st event's id: the whole batch fails. */
	evs[0] = conf_event_new("x1", "user", "one", T0 + 10);
	evs[1] = conf_event_new("x2", "assistant", "two", T0 + 11);
	evs[2] = conf_event_new("x1", "user", "three", T0 + 12);
	r = conf_append(st, &sc, evs, 3, &o, seqs, NULL);
	cr_assert(r == MEMD_ECONFLICT || r == MEMD_EINVAL,
		  "a batch repeating an id must fail with ECONFLICT or EINVAL, got %d (%s)", r,
		  st->err.msg);
	assert_unchanged(&sc, &before, "batch with a repeated id");
	{
		/* No app: or user: state leaked either: check from a sibling session. */
		memd_scope sib = conf_scope(APP, USER, "s2");
		create_ok(APP, USER, "s2", T0 + 1);
		conf_assert_state(st, &sib, "{}");
	}

	/* The same events with distinct ids go in after it, gapless. */
	free((char *)evs[2]->id);
	evs[2]->id = strdup("x3");
	r = conf_append(st, &sc, evs, 3, &o, seqs, NULL);
	cr_assert_eq(r, 0, "%s", st->err.msg);
	cr_assert_eq(seqs[0], 3);
	cr_assert_eq(seqs[1], 4);
	cr_assert_eq(seqs[2], 5);
	r = conf_events_load(st, &sc, 0, 0, 0, 0, 0, &l);
	cr_assert_eq(r, 0);
	cr_assert_eq(l.n, 5);
	for (size_t i = 0; i < l.n; i++)
		cr_assert_eq(l.v[i].seq, (int64_t)i + 1, "gap in seqs after a failed batch");
	conf_events_clear(&l);
	free_events(evs, 3);
}

Test(store, append_atomic_bad_delta)
{
	memd_scope sc = conf_scope(APP, USER, "s1");
	static const char *const bad[] = {
		"{\"a\":1,\"temp:scratch\":2}",
		"{\"temp:x\":null}",
		"[1,2,3]",
		"\"a string\"",
		"42",
		"{not json",
	};
	snapshot before;

	create_ok(APP, USER, "s1", T0);
	conf_append_simple(st, &sc, "old", 1, 2, T0 + 1);
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		memd_event *evs[3];
		int64_t seqs[3];
		conf_append_opts o = { .delta = bad[k], .now_us = T0 + 50,
				       .title_if_unset = "nope" };
		int32_t r;

		before = snap(&sc);
		evs[0] = conf_event_new("y1", "user", "one", T0 + 10);
		evs[1] = conf_event_new("y2", "assistant", "two", T0 + 11);
		evs[2] = conf_event_new("y3", "user", "three", T0 + 12);
		r = conf_append(st, &sc, evs, 3, &o, seqs, NULL);
		cr_assert_eq(r, MEMD_EINVAL, "delta %s: got %d (%s)", bad[k], r, st->err.msg);
		assert_unchanged(&sc, &before, bad[k]);
		/* State-only, too. */
		before = snap(&sc);
		r = conf_append(st, &sc, NULL, 0, &o, NULL, NULL);
		cr_assert_eq(r, MEMD_EINVAL, "state-only delta %s: got %d", bad[k], r);
		assert_unchanged(&sc, &before, bad[k]);
		free_events(evs, 3);
	}
}

Test(store, append_expected_version)
{
	memd_scope sc = conf_scope(APP, USER, "s1");
	memd_event *e;
	int64_t seq = 0;
	memd_append_result res = { 0 };
	conf_append_opts o = { .flags = MEMD_APPEND_EXPECT_VERSION, .now_us = T0 + 5 };
	snapshot before;
	int32_t r;

	create_ok(APP, USER, "s1", T0);
	/* Expecting 0 on a fresh session succeeds. */
	e = conf_event_new("a", "user", "first", T0 + 1);
	o.expected_version = 0;
	r = conf_append(st, &sc, &e, 1, &o, &seq, &res);
	cr_assert_eq(r, 0, "%s", st->err.msg);
	cr_assert_eq(res.version, 1);
	cr_assert_eq(seq, 1);
	conf_event_free(e);

	/* A stale version writes nothing. */
	before = snap(&sc);
	e = conf_event_new("b", "user", "second", T0 + 2);
	o.expected_version = 0;
	o.delta = "{\"k\":\"v\"}";
	o.title_if_unset = "stale";
	r = conf_append(st, &sc, &e, 1, &o, &seq, NULL);
	cr_assert_eq(r, MEMD_ECONFLICT, "stale expected_version: got %d", r);
	assert_unchanged(&sc, &before, "stale expected_version");
	/* So does one from the future. */
	before = snap(&sc);
	o.expected_version = 7;
	r = conf_append(st, &sc, &e, 1, &o, &seq, NULL);
	cr_assert_eq(r, MEMD_ECONFLICT, "future expected_version: got %d", r);
	assert_unchanged(&sc, &before, "future expected_version");
	/* State-only with a stale version. */
	before = snap(&sc);
	o.expected_version = 0;
	r = conf_append(st, &sc, NULL, 0, &o, NULL, NULL);
	cr_assert_eq(r, MEMD_ECONFLICT, "stale state-only append: got %d", r);
	assert_unchanged(&sc, &before, "stale state-only append");

	/* The right version goes through. */
	o.expected_version = 1;
	memset(&res, 0, sizeof(res));
	r = conf_append(st, &sc, &e, 1, &o, &seq, &res);
	cr_assert_eq(r, 0, "%s", st->err.msg);
	cr_assert_eq(seq, 2);
	cr_assert_eq(res.version, 2);
	conf_assert_state(st, &sc, "{\"k\":\"v\"}");
	conf_event_free(e);
}

Test(store, append_idempotent_replay)
{
	memd_scope sc = conf_scope(APP, USER, "s1");
	memd_event *evs[3];
	int64_t seqs[3], again[3] = { -7, -7, -7 };
	memd_append_result res = { 0 };
	conf_append_opts o = { .delta = "{\"n\":1}", .now_us = T0 + 10 };
	snapshot before;
	conf_events l = { 0 };
	int32_t r;

	create_ok(APP, USER, "s1", T0);
	conf_append_simple(st, &sc, "pre", 1, 2, T0 + 1);
	evs[0] = conf_event_new("r1", "user", "one", T0 + 2);
	evs[1] = conf_event_new("r2", "assistant", "two", T0 + 3);
	evs[2] = conf_event_new("r3", "user", "three", T0 + 4);
	r = conf_append(st, &sc, evs, 3, &o, seqs, &res);
	cr_assert_eq(r, 0, "%s", st->err.msg);
	cr_assert_eq(seqs[0], 3);
	cr_assert_eq(seqs[2], 5);
	cr_assert_eq(res.version, 2);

	/* The retry (even with another delta and time) writes nothing. */
	before = snap(&sc);
	o.delta = "{\"n\":2,\"retry\":true}";
	o.now_us = T0 + 99;
	memset(&res, 0, sizeof(res));
	r = conf_append(st, &sc, evs, 3, &o, again, &res);
	cr_assert_eq(r, 0, "retry: %s", st->err.msg);
	cr_assert_neq(res.flags & MEMD_APPEND_REPLAYED, 0, "retry not flagged REPLAYED");
	cr_assert_eq(res.version, 2, "retry changed the version");
	for (int i = 0; i < 3; i++)
		cr_assert_eq(again[i], seqs[i], "retry seq %d: %lld, originally %lld", i,
			     (long long)again[i], (long long)seqs[i]);
	assert_unchanged(&sc, &before, "idempotent retry");
	conf_assert_state(st, &sc, "{\"n\":1}");

	/* A subset of the batch, in another order, is a replay too. */
	{
		memd_event *sub[2] = { evs[2], evs[0] };
		int64_t s2[2] = { 0, 0 };
		memset(&res, 0, sizeof(res));
		r = conf_append(st, &sc, sub, 2, NULL, s2, &res);
		cr_assert_eq(r, 0, "%s", st->err.msg);
		cr_assert_neq(res.flags & MEMD_APPEND_REPLAYED, 0);
		cr_assert_eq(s2[0], 5);
		cr_assert_eq(s2[1], 3);
	}

	/* Partial overlap: some ids exist, some do not: conflict, nothing written. */
	before = snap(&sc);
	{
		memd_event *mix[2] = { evs[2], conf_event_new("r4", "user", "four", T0 + 5) };
		int64_t s2[2];
		r = conf_append(st, &sc, mix, 2, &o, s2, NULL);
		cr_assert_eq(r, MEMD_ECONFLICT, "partial overlap: got %d (%s)", r, st->err.msg);
		assert_unchanged(&sc, &before, "partial overlap");
		/* Also when the new id comes first. */
		before = snap(&sc);
		mix[0] = mix[1];
		mix[1] = evs[0];
		r = conf_append(st, &sc, mix, 2, &o, s2, NULL);
		cr_assert_eq(r, MEMD_ECONFLICT, "partial overlap (new first): got %d", r);
		assert_unchanged(&sc, &before, "partial overlap (new first)");
		conf_event_free(mix[0]);
	}
	r = conf_events_load(st, &sc, 0, 0, 0, 0, 0, &l);
	cr_assert_eq(r, 0);
	cr_assert_eq(l.n, 5, "events duplicated or lost: %zu", l.n);
	for (size_t i = 0; i < l.n; i++)
		for (size_t j = i + 1; j < l.n; j++)
			cr_assert_str_neq(l.v[i].id, l.v[j].id, "duplicate event id %s", l.v[i].id);
	conf_events_clear(&l);

	/* A retry of an append made with expected_version (now stale, since
	 * the first attempt moved the version on) is a replay, not a conflict. */
	{
		memd_event *ev = conf_event_new("r5", "user", "five", T0 + 6);
		conf_append_opts eo = { .flags = MEMD_APPEND_EXPECT_VERSION, .now_us = T0 + 20 };
		int64_t s1 = 0, s2 = 0;
		conf_session cs = get_ok(APP, USER, "s1");
		eo.expected_version = cs.version;
		conf_session_clear(&cs);
		memset(&res, 0, sizeof(res));
		r = conf_append(st, &sc, &ev, 1, &eo, &s1, &res);
		cr_assert_eq(r, 0, "%s", st->err.msg);
		cr_assert_eq(res.version, eo.expected_version + 1);
		before = snap(&sc);
		memset(&res, 0, sizeof(res));
		r = conf_append(st, &sc, &ev, 1, &eo, &s2, &res);
		cr_assert_eq(r, 0, "retry with the same expected_version: got %d (%s)", r,
			     st->err.msg);
		cr_assert_neq(res.flags & MEMD_APPEND_REPLAYED, 0);
		cr_assert_eq(s2, s1);
		cr_assert_eq(res.version, eo.expected_version + 1);
		assert_unchanged(&sc, &before, "retry with expected_version");
		conf_event_free(ev);
	}

	/* Ids are per session: the same ids in another session are new. */
	create_ok(APP, USER, "s2", T0);
	{
		memd_scope sc2 = conf_scope(APP, USER, "s2");
		memset(&res, 0, sizeof(res));
		r = conf_append(st, &sc2, evs, 3, NULL, again, &res);
		cr_assert_eq(r, 0, "%s", st->err.msg);
		cr_assert_eq(res.flags & MEMD_APPEND_REPLAYED, 0);
		cr_assert_eq(again[0], 1);
		cr_assert_eq(again[2], 3);
	}
	free_events(evs, 3);
}

/* ---- events_load ------------------------------------------------------ */

#define QN 20

Test(store, events_load_queries)
{
	memd_scope sc = conf_scope(APP, USER, "s1");
	memd_event *evs[QN];
	int64_t seqs[QN];
	conf_events l = { 0 };
	conf_session s;
	int32_t r;

	create_ok(APP, USER, "s1", T0);
	/* Seq i has timestamp T0 + 1000 * i; seqs 5, 10, 15 are summaries
	 * covering up to seq - 1. */
	for (int i = 0; i < QN; i++) {
		char id[16];
		int seq = i + 1;
		snprintf(id, sizeof(id), "q%d", seq);
		evs[i] = conf_event_new(id, seq % 5 == 0 && seq < QN ? "summary" : "user", id,
					T0 + 1000 * seq);
		if (seq % 5 == 0 && seq < QN)
			evs[i]->covers_seq = seq - 1;
	}
	/* In several batches. */
	r = conf_append(st, &sc, evs, 7, NULL, seqs, NULL);
	cr_assert_eq(r, 0, "%s", st->err.msg);
	r = conf_append(st, &sc, evs + 7, QN - 7, NULL, seqs + 7, NULL);
	cr_assert_eq(r, 0, "%s", st->err.msg);
	for (int i = 0; i < QN; i++)
		cr_assert_eq(seqs[i], i + 1);

	s = get_ok(APP, USER, "s1");
	cr_assert_eq(s.summary_seq, 15, "summary_seq %lld", (long long)s.summary_seq);
	cr_assert_eq(s.last_seq, QN);
	conf_session_clear(&s);

#define Q(flags, after, before, atime, limit, ...)                                          \
	do {                                                                                 \
		static const int64_t want[] = { __VA_ARGS__ };                               \
		r = conf_events_load(st, &sc, flags, after, before, atime, limit, &l);       \
		cr_assert_eq(r, 0, "%s", st->err.msg);                                       \
		assert_seqs(&l, want + 1, sizeof(want) / sizeof(want[0]) - 1,                \
			    #flags " " #after " " #before " " #atime " " #limit);            \
		conf_events_clear(&l);                                                       \
	} while (0)

	/* The first element of each list is a dummy (lists may be empty). */
	Q(0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20);
	Q(0, 5, 0, 0, 0, 0, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20);
	Q(0, 0, 5, 0, 0, 0, 1, 2, 3, 4);
	Q(0, 5, 10, 0, 0, 0, 6, 7, 8, 9);
	Q(0, 9, 10, 0, 0, 0);
	Q(0, 20, 0, 0, 0, 0);
	Q(0, 0, 1, 0, 0, 0);
	Q(0, 0, 0, T0 + 12000, 0, 0, 13, 14, 15, 16, 17, 18, 19, 20);
	Q(0, 0, 15, T0 + 12000, 0, 0, 13, 14);
	Q(0, 0, 0, 0, 3, 0, 1, 2, 3);
	Q(0, 4, 0, 0, 3, 0, 5, 6, 7);
	Q(MEMD_EVQ_NEWEST, 0, 0, 0, 3, 0, 18, 19, 20);
	Q(MEMD_EVQ_NEWEST, 0, 10, 0, 3, 0, 7, 8, 9);
	Q(MEMD_EVQ_NEWEST, 15, 0, 0, 100, 0, 16, 17, 18, 19, 20);
	Q(MEMD_EVQ_NEWEST, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17,
	  18, 19, 20);
	Q(MEMD_EVQ_NO_SUMMARY, 0, 0, 0, 0, 0, 1, 2, 3, 4, 6, 7, 8, 9, 11, 12, 13, 14, 16, 17, 18, 19,
	  20);
	Q(MEMD_EVQ_NO_SUMMARY, 0, 0, 0, 5, 0, 1, 2, 3, 4, 6);
	Q(MEMD_EVQ_NO_SUMMARY | MEMD_EVQ_NEWEST, 0, 0, 0, 6, 0, 14, 16, 17, 18, 19, 20);
	Q(MEMD_EVQ_NO_SUMMARY | MEMD_EVQ_NEWEST, 0, 16, T0 + 8000, 0, 0, 9, 11, 12, 13, 14);
	Q(MEMD_EVQ_ONLY_SUMMARY, 0, 0, 0, 0, 0, 5, 10, 15);
	Q(MEMD_EVQ_ONLY_SUMMARY, 5, 0, 0, 0, 0, 10, 15);
	Q(MEMD_EVQ_ONLY_SUMMARY, 0, 15, 0, 0, 0, 5, 10);
	Q(MEMD_EVQ_ONLY_SUMMARY, 0, 0, 0, 2, 0, 5, 10);
	Q(MEMD_EVQ_ONLY_SUMMARY | MEMD_EVQ_NEWEST, 0, 0, 0, 1, 0, 15);
	Q(MEMD_EVQ_ONLY_SUMMARY | MEMD_EVQ_NEWEST, 0, 15, 0, 1, 0, 10);
	Q(MEMD_EVQ_ONLY_SUMMARY | MEMD_EVQ_NEWEST, 0, 0, T0 + 11000, 5, 0, 15);
	Q(MEMD_EVQ_ONLY_SUMMARY, 15, 0, 0, 0, 0);
#undef Q

	/* The latest summary carries its role and covers_seq. */
	r = conf_events_load(st, &sc, MEMD_EVQ_ONLY_SUMMARY | MEMD_EVQ_NEWEST, 0, 0, 0, 1, &l);
	cr_assert_eq(r, 0);
	cr_assert_eq(l.n, 1);
	cr_assert_str_eq(l.v[0].role, "summary");
	cr_assert_eq(l.v[0].covers_seq, 14);
	cr_assert_str_eq(l.v[0].id, "q15");
	conf_events_clear(&l);

	/* A later summary moves summary_seq. */
	{
		memd_event *sm = conf_event_new("sum2", "summary", "all so far", T0 + 1000 * 21);
		int64_t seq;
		sm->covers_seq = 20;
		r = conf_append(st, &sc, &sm, 1, NULL, &seq, NULL);
		cr_assert_eq(r, 0);
		cr_assert_eq(seq, 21);
		conf_event_free(sm);
		s = get_ok(APP, USER, "s1");
		cr_assert_eq(s.summary_seq, 21);
		conf_session_clear(&s);
		r = conf_events_load(st, &sc, MEMD_EVQ_ONLY_SUMMARY | MEMD_EVQ_NEWEST, 0, 0, 0, 1, &l);
		cr_assert_eq(r, 0);
		cr_assert_eq(l.n, 1);
		cr_assert_eq(l.v[0].seq, 21);
		cr_assert_eq(l.v[0].covers_seq, 20);
		conf_events_clear(&l);
	}

	/* Missing session; empty session. */
	{
		memd_scope missing = conf_scope(APP, USER, "nope");
		memd_scope empty = conf_scope(APP, USER, "empty");
		r = conf_events_load(st, &missing, 0, 0, 0, 0, 0, &l);
		cr_assert_eq(r, MEMD_ENOTFOUND, "events_load of a missing session: got %d", r);
		cr_assert_eq(l.n, 0);
		create_ok(APP, USER, "empty", T0);
		r = conf_events_load(st, &empty, MEMD_EVQ_NEWEST, 0, 0, 0, 10, &l);
		cr_assert_eq(r, 0);
		cr_assert_eq(l.n, 0);
		s = get_ok(APP, USER, "empty");
		cr_assert_eq(s.summary_seq, 0);
		conf_session_clear(&s);
	}

	/* Queries every store refuses (MEMD_EINVAL) before reading. */
	{
		r = conf_events_load(st, &sc, MEMD_EVQ_NO_SUMMARY | MEMD_EVQ_ONLY_SUMMARY, 0, 0, 0, 0,
				     &l);
		cr_assert_eq(r, MEMD_EINVAL, "no summaries and only summaries: got %d", r);
		r = conf_events_load(st, &sc, UNKNOWN_EVQ_FLAG, 0, 0, 0, 0, &l);
		cr_assert_eq(r, MEMD_EINVAL, "an unknown flag: got %d", r);
		r = conf_events_load(st, &sc, 0, -1, 0, 0, 0, &l);
		cr_assert_eq(r, MEMD_EINVAL, "a negative after_seq: got %d", r);
		r = conf_events_load(st, &sc, 0, 0, -1, 0, 0, &l);
		cr_assert_eq(r, MEMD_EINVAL, "a negative before_seq: got %d", r);
		r = conf_events_load(st, &sc, 0, 0, 0, -1, 0, &l);
		cr_assert_eq(r, MEMD_EINVAL, "a negative after_time: got %d", r);
		cr_assert_eq(l.n, 0, "a refused query delivered events");
	}
	free_events(evs, QN);
}

#define BIG_N 3000
#define BIG_BATCH 100
#define BIG_SUMMARY_AT 1500
/* How many rows beyond those returned a query may examine. */
#define ROWS_SLACK 8

Test(store, events_load_rows_read_bounded)
{
	memd_scope sc = conf_scope(APP, USER, "big");
	conf_events l = { 0 };
	int32_t r;

	create_ok(APP, USER, "big", T0);
	for (int b = 0; b < BIG_N / BIG_BATCH; b++) {
		memd_event *evs[BIG_BATCH];
		int64_t seqs[BIG_BATCH];
		for (int i = 0; i < BIG_BATCH; i++) {
			char id[16];
			int seq = b * BIG_BATCH + i + 1;
			snprintf(id, sizeof(id), "b%d", seq);
			evs[i] = conf_event_new(id, seq == BIG_SUMMARY_AT ? "summary" : "user", id,
						T0 + seq);
		}
		r = conf_append(st, &sc, evs, BIG_BATCH, NULL, seqs, NULL);
		cr_assert_eq(r, 0, "%s", st->err.msg);
		free_events(evs, BIG_BATCH);
	}

	st->rows_read = 0;
	r = conf_events_load(st, &sc, MEMD_EVQ_NEWEST, 0, 0, 0, 10, &l);
	cr_assert_eq(r, 0, "%s", st->err.msg);
	cr_assert_eq(l.n, 10);
	cr_assert_eq(l.v[0].seq, BIG_N - 9);
	cr_assert_eq(l.v[9].seq, BIG_N);
	cr_assert_geq(st->rows_read, 10, "rows_read %llu: the store does not count rows",
		      (unsigned long long)st->rows_read);
	cr_assert_leq(st->rows_read, 10 + ROWS_SLACK,
		      "NEWEST limit 10 examined %llu rows of %d", (unsigned long long)st->rows_read,
		      BIG_N);
	conf_events_clear(&l);

	st->rows_read = 0;
	r = conf_events_load(st, &sc, 0, BIG_N - 10, 0, 0, 0, &l);
	cr_assert_eq(r, 0);
	cr_assert_eq(l.n, 10);
	cr_assert_leq(st->rows_read, 10 + ROWS_SLACK, "after_seq examined %llu rows",
		      (unsigned long long)st->rows_read);
	conf_events_clear(&l);

	st->rows_read = 0;
	r = conf_events_load(st, &sc, 0, 100, 0, 0, 10, &l);
	cr_assert_eq(r, 0);
	cr_assert_eq(l.n, 10);
	cr_assert_eq(l.v[0].seq, 101);
	cr_assert_leq(st->rows_read, 10 + ROWS_SLACK, "after_seq+limit examined %llu rows",
		      (unsigned long long)st->rows_read);
	conf_events_clear(&l);

	st->rows_read = 0;
	r = conf_events_load(st, &sc, MEMD_EVQ_NEWEST, 0, 2001, 0, 5, &l);
	cr_assert_eq(r, 0);
	cr_assert_eq(l.n, 5);
	cr_assert_eq(l.v[4].seq, 2000);
	cr_assert_leq(st->rows_read, 5 + ROWS_SLACK, "before_seq+NEWEST examined %llu rows",
		      (unsigned long long)st->rows_read);
	conf_events_clear(&l);

	/* The latest summary, in the middle of the session. */
	st->rows_read = 0;
	r = conf_events_load(st, &sc, MEMD_EVQ_ONLY_SUMMARY | MEMD_EVQ_NEWEST, 0, 0, 0, 1, &l);
	cr_assert_eq(r, 0);
	cr_assert_eq(l.n, 1);
	cr_assert_eq(l.v[0].seq, BIG_SUMMARY_AT);
	cr_assert_leq(st->rows_read, 1 + ROWS_SLACK, "latest summary examined %llu rows",
		      (unsigned long long)st->rows_read);
	conf_events_clear(&l);
}

/* ---- state ------------------------------------------------------------ */

static void state_append(const char *app, const char *user, const char *session,
			 const char *delta)
{
	memd_scope sc = conf_scope(app, user, session);
	conf_append_opts o = { .delta = delta, .now_us = T0 + 1 };
	int32_t r = conf_append(st, &sc, NULL, 0, &o, NULL, NULL);
	cr_assert_eq(r, 0, "state append %s to %s/%s/%s: %s", delta, app, user, session,
		     st->err.msg);
}

Test(store, state_scopes_and_merge)
{
	memd_scope a1 = conf_scope("X", "u1", "A1"), a2 = conf_scope("X", "u1", "A2");
	memd_scope b1 = conf_scope("X", "u2", "B1"), c1 = conf_scope("Y", "u1", "C1");

	create_ok("X", "u1", "A1", T0);
	create_ok("X", "u1", "A2", T0 + 1);
	create_ok("X", "u2", "B1", T0 + 2);
	create_ok("Y", "u1", "C1", T0 + 3);
	conf_assert_state(st, &a1, "{}");

	state_append("X", "u1", "A1", "{\"k\":\"a1\",\"app:shared\":1,\"user:pref\":\"dark\"}");
	conf_assert_state(st, &a1, "{\"k\":\"a1\",\"app:shared\":1,\"user:pref\":\"dark\"}");
	conf_assert_state(st, &a2, "{\"app:shared\":1,\"user:pref\":\"dark\"}");
	conf_assert_state(st, &b1, "{\"app:shared\":1}");
	conf_assert_state(st, &c1, "{}");

	state_append("X", "u2", "B1", "{\"user:pref\":\"light\",\"k\":\"b1\"}");
	conf_assert_state(st, &b1, "{\"k\":\"b1\",\"app:shared\":1,\"user:pref\":\"light\"}");
	conf_assert_state(st, &a1, "{\"k\":\"a1\",\"app:shared\":1,\"user:pref\":\"dark\"}");

	/* Values of every JSON type, overwrite, and unicode keys. */
	state_append("X", "u1", "A2",
		     "{\"obj\":{\"a\":[1,2,{\"b\":null}]},\"arr\":[],\"s\":\"\\u00e9\\ud83d\\ude00\","
		     "\"f\":1.5,\"t\":true,\"nul_in_str\":\"a\\u0000b\",\"\\u65e5\\u672c\":\"jp\"}");
	state_append("X", "u1", "A2", "{\"t\":false,\"app:shared\":{\"v\":2}}");
	conf_assert_state(st, &a2,
			  "{\"obj\":{\"a\":[1,2,{\"b\":null}]},\"arr\":[],"
			  "\"s\":\"\\u00e9\\ud83d\\ude00\",\"f\":1.5,\"t\":false,"
			  "\"nul_in_str\":\"a\\u0000b\",\"\\u65e5\\u672c\":\"jp\","
			  "\"app:shared\":{\"v\":2},\"user:pref\":\"dark\"}");
	conf_assert_state(st, &b1, "{\"k\":\"b1\",\"app:shared\":{\"v\":2},\"user:pref\":\"light\"}");

	/* null deletes, in every scope; deleting an absent key is fine. */
	state_append("X", "u1", "A2", "{\"user:pref\":null,\"app:shared\":null,\"absent\":null}");
	conf_assert_state(st, &a1, "{\"k\":\"a1\"}");
	conf_assert_state(st, &b1, "{\"k\":\"b1\",\"user:pref\":\"light\"}");
	state_append("X", "u1", "A1", "{\"k\":null}");
	conf_assert_state(st, &a1, "{}");

	/* A plain key and a prefixed key with the same bare name are distinct. */
	state_append("X", "u1", "A1", "{\"n\":1,\"user:n\":2,\"app:n\":3}");
	conf_assert_state(st, &a1, "{\"n\":1,\"user:n\":2,\"app:n\":3}");
	conf_assert_state(st, &a2, "{\"obj\":{\"a\":[1,2,{\"b\":null}]},\"arr\":[],"
				   "\"s\":\"\\u00e9\\ud83d\\ude00\",\"f\":1.5,\"t\":false,"
				   "\"nul_in_str\":\"a\\u0000b\",\"\\u65e5\\u672c\":\"jp\","
				   "\"user:n\":2,\"app:n\":3}");
}

Test(store, state_temp_keys_refused)
{
	memd_scope sc = conf_scope(APP, USER, "s1");
	static const char *const bad[] = {
		"{\"temp:x\":1}",
		"{\"ok\":1,\"temp:y\":2}",
		"{\"temp:\":1}",
	};
	conf_append_opts o = { .now_us = T0 + 1 };
	int32_t r;

	create_ok(APP, USER, "s1", T0);
	state_append(APP, USER, "s1", "{\"keep\":true}");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		o.delta = bad[i];
		r = conf_append(st, &sc, NULL, 0, &o, NULL, NULL);
		cr_assert_eq(r, MEMD_EINVAL, "delta %s: got %d", bad[i], r);
	}
	conf_assert_state(st, &sc, "{\"keep\":true}");
	{
		conf_session s = get_ok(APP, USER, "s1");
		cr_assert_eq(s.version, 1, "refused deltas bumped the version");
		conf_session_clear(&s);
	}
}

/* ---- titles ----------------------------------------------------------- */

Test(store, title_if_unset)
{
	memd_scope s1 = conf_scope(APP, USER, "s1"), s2 = conf_scope(APP, USER, "s2");
	conf_append_opts o = { .title_if_unset = "First words", .now_us = T0 + 1 };
	memd_event *e;
	int64_t seq;
	conf_session s;
	int32_t r;

	create_ok(APP, USER, "s1", T0);
	e = conf_event_new("e1", "user", "First words of the user", T0 + 1);
	r = conf_append(st, &s1, &e, 1, &o, &seq, NULL);
	cr_assert_eq(r, 0, "%s", st->err.msg);
	conf_event_free(e);
	s = get_ok(APP, USER, "s1");
	cr_assert_str_eq(s.title, "First words");
	conf_session_clear(&s);

	o.title_if_unset = "Second";
	e = conf_event_new("e2", "user", "Second", T0 + 2);
	r = conf_append(st, &s1, &e, 1, &o, &seq, NULL);
	cr_assert_eq(r, 0, "%s", st->err.msg);
	conf_event_free(e);
	s = get_ok(APP, USER, "s1");
	cr_assert_str_eq(s.title, "First words", "title_if_unset replaced a set title");
	conf_session_clear(&s);

	/* A title given at create is kept. */
	r = conf_session_create(st, APP, USER, "s2", "Explicit", T0, NULL, NULL);
	cr_assert_eq(r, 0);
	e = conf_event_new("e1", "user", "hi", T0 + 1);
	r = conf_append(st, &s2, &e, 1, &o, &seq, NULL);
	cr_assert_eq(r, 0);
	conf_event_free(e);
	s = get_ok(APP, USER, "s2");
	cr_assert_str_eq(s.title, "Explicit");
	conf_session_clear(&s);
}

/* ---- artifacts -------------------------------------------------------- */

static void skip_without_artifacts(void)
{
	if (!st->ops->artifact_put || !st->ops->artifact_get || !st->ops->artifact_list ||
	    !st->ops->artifact_versions || !st->ops->artifact_delete)
		cr_skip_test("the plugin does not provide artifacts");
}

/* store.h: artifact names never contain '/', a backslash or ".."; a scope
 * whose struct_size does not reach session is refused. */
Test(store, bad_artifact_names_and_short_scopes_are_refused)
{
	memd_scope sc = conf_scope(APP, USER, "s1"), shorty = sc;
	static const char *const bad[] = { "a/b", "a\\b", "..", "x..y", "" };
	int64_t v = 0;

	skip_without_artifacts();
	create_ok(APP, USER, "s1", T0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(conf_artifact_put(st, &sc, bad[i], "text/plain", "x", 1, T0, &v),
			     MEMD_EINVAL, "artifact name '%s' was accepted", bad[i]);
	shorty.struct_size = offsetof(memd_scope, session);
	cr_assert_eq(conf_artifact_put(st, &shorty, "ok.txt", "text/plain", "x", 1, T0, &v),
		     MEMD_EINVAL, "a scope without room for session was accepted");
}

Test(store, artifacts)
{
	memd_scope sc = conf_scope(APP, USER, "s1"), other = conf_scope(APP, USER, "s2");
	static const char *const data[] = { "version one", "version two, longer", "v3" };
	static const unsigned char bin[] = { 0, 1, 2, 0xff, 0, 'x' };
	conf_artifacts l = { 0 };
	int64_t v = 0;
	int32_t r;

	skip_without_artifacts();
	create_ok(APP, USER, "s1", T0);
	create_ok(APP, USER, "s2", T0);
	for (int i = 0; i < 3; i++) {
		r = conf_artifact_put(st, &sc, "notes.txt", "text/plain", data[i], strlen(data[i]),
				      T0 + i, &v);
		cr_assert_eq(r, 0, "%s", st->err.msg);
		cr_assert_eq(v, i + 1, "put %d made version %lld", i, (long long)v);
	}
	r = conf_artifact_put(st, &sc, "blob.bin", "application/octet-stream", bin, sizeof(bin),
			      T0 + 10, &v);
	cr_assert_eq(r, 0, "%s", st->err.msg);
	cr_assert_eq(v, 1);

	/* Latest, and each version. */
	r = conf_artifact_get(st, &sc, "notes.txt", 0, &l);
	cr_assert_eq(r, 0, "%s", st->err.msg);
	cr_assert_eq(l.n, 1);
	cr_assert_eq(l.v[0].version, 3);
	cr_assert_eq(l.v[0].size, strlen(data[2]));
	cr_assert_not_null(l.v[0].data);
	cr_assert_eq(memcmp(l.v[0].data, data[2], strlen(data[2])), 0);
	cr_assert_str_eq(l.v[0].mime_type, "text/plain");
	cr_assert_str_eq(l.v[0].name, "notes.txt");
	cr_assert_eq(l.v[0].created_us, T0 + 2);
	conf_artifacts_clear(&l);
	for (int i = 0; i < 3; i++) {
		r = conf_artifact_get(st, &sc, "notes.txt", i + 1, &l);
		cr_assert_eq(r, 0, "%s", st->err.msg);
		cr_assert_eq(l.n, 1);
		cr_assert_eq(l.v[0].version, i + 1);
		cr_assert_eq(l.v[0].size, strlen(data[i]));
		cr_assert_eq(memcmp(l.v[0].data, data[i], strlen(data[i])), 0, "version %d data", i + 1);
		conf_artifacts_clear(&l);
	}
	r = conf_artifact_get(st, &sc, "blob.bin", 0, &l);
	cr_assert_eq(r, 0);
	cr_assert_eq(l.v[0].size, sizeof(bin));
	cr_assert_eq(memcmp(l.v[0].data, bin, sizeof(bin)), 0, "binary data changed");
	conf_artifacts_clear(&l);

	r = conf_artifact_get(st, &sc, "notes.txt", 4, &l);
	cr_assert_eq(r, MEMD_ENOTFOUND, "missing version: got %d", r);
	conf_artifacts_clear(&l);
	r = conf_artifact_get(st, &sc, "nope", 0, &l);
	cr_assert_eq(r, MEMD_ENOTFOUND, "missing name: got %d", r);
	conf_artifacts_clear(&l);
	r = conf_artifact_get(st, &other, "notes.txt", 0, &l);
	cr_assert_eq(r, MEMD_ENOTFOUND, "artifact visible from another session");
	conf_artifacts_clear(&l);

	/* List: latest of each name, by name, without data. */
	r = conf_artifact_list(st, &sc, &l);
	cr_assert_eq(r, 0, "%s", st->err.msg);
	cr_assert_eq(l.n, 2);
	cr_assert_str_eq(l.v[0].name, "blob.bin");
	cr_assert_eq(l.v[0].version, 1);
	cr_assert_eq(l.v[0].size, sizeof(bin));
	cr_assert_str_eq(l.v[1].name, "notes.txt");
	cr_assert_eq(l.v[1].version, 3);
	cr_assert_eq(l.v[1].size, strlen(data[2]));
	cr_assert_null(l.v[0].data, "listings carry no data");
	conf_artifacts_clear(&l);
	r = conf_artifact_list(st, &other, &l);
	cr_assert_eq(r, 0);
	cr_assert_eq(l.n, 0);
	conf_artifacts_clear(&l);

	r = conf_artifact_versions(st, &sc, "notes.txt", &l);
	cr_assert_eq(r, 0, "%s", st->err.msg);
	cr_assert_eq(l.n, 3);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(l.v[i].version, i + 1);
		cr_assert_eq(l.v[i].size, strlen(data[i]));
		cr_assert_eq(l.v[i].created_us, T0 + i);
		cr_assert_null(l.v[i].data);
	}
	conf_artifacts_clear(&l);

	r = conf_artifact_delete(st, &sc, "notes.txt");
	cr_assert_eq(r, 0, "%s", st->err.msg);
	r = conf_artifact_get(st, &sc, "notes.txt", 0, &l);
	cr_assert_eq(r, MEMD_ENOTFOUND, "deleted artifact still found");
	conf_artifacts_clear(&l);
	r = conf_artifact_get(st, &sc, "notes.txt", 2, &l);
	cr_assert_eq(r, MEMD_ENOTFOUND, "a version of a deleted artifact still found");
	conf_artifacts_clear(&l);
	r = conf_artifact_list(st, &sc, &l);
	cr_assert_eq(r, 0);
	cr_assert_eq(l.n, 1);
	cr_assert_str_eq(l.v[0].name, "blob.bin");
	conf_artifacts_clear(&l);
	r = conf_artifact_delete(st, &sc, "notes.txt");
	cr_assert_eq(r, MEMD_ENOTFOUND, "second delete: got %d", r);

	/* Artifacts of a missing session. */
	{
		memd_scope missing = conf_scope(APP, USER, "nope");
		r = conf_artifact_put(st, &missing, "a", "text/plain", "x", 1, T0, &v);
		cr_assert_eq(r, MEMD_ENOTFOUND, "put into a missing session: got %d", r);
	}
}

/* ---- deletes and the feed --------------------------------------------- */

static const conf_feed_rec *find_event(const conf_feed *f, const char *session, const char *id)
{
	for (size_t i = 0; i < f->n; i++)
		if (f->v[i].kind == MEMD_FEED_EVENT && f->v[i].session &&
		    strcmp(f->v[i].session, session) == 0 && strcmp(f->v[i].event.id, id) == 0)
			return &f->v[i];
	return NULL;
}

Test(store, session_delete_cascades)
{
	memd_scope s1 = conf_scope(APP, USER, "s1"), s2 = conf_scope(APP, USER, "s2");
	conf_feed f = { 0 };
	conf_events l = { 0 };
	conf_session s;
	int64_t last, v;
	int32_t r;

	create_ok(APP, USER, "s1", T0);
	create_ok(APP, USER, "s2", T0 + 1);
	conf_append_simple(st, &s1, "a", 1, 3, T0 + 2);
	conf_append_simple(st, &s2, "b", 1, 2, T0 + 3);
	state_append(APP, USER, "s1", "{\"plain\":1,\"user:u\":2,\"app:a\":3}");
	if (st->ops->artifact_put) {
		r = conf_artifact_put(st, &s1, "f.txt", "text/plain", "abc", 3, T0, &v);
		cr_assert_eq(r, 0, "%s", st->err.msg);
	}
	last = conf_feed_last(st);

	r = conf_session_delete(st, APP, USER, "s1");
	cr_assert_eq(r, 0, "%s", st->err.msg);
	r = conf_events_load(st, &s1, 0, 0, 0, 0, 0, &l);
	cr_assert_eq(r, MEMD_ENOTFOUND, "events_load after delete: got %d", r);
	conf_events_clear(&l);

	/* Recreated under the same id, it starts empty (user: and app: stay). */
	create_ok(APP, USER, "s1", T0 + 10);
	s = get_ok(APP, USER, "s1");
	cr_assert_eq(s.version, 0);
	cr_assert_eq(s.last_seq, 0);
	cr_assert_eq(s.summary_seq, 0);
	conf_session_clear(&s);
	cr_assert_eq(count_events(&s1), 0, "events survived session_delete");
	conf_assert_state(st, &s1, "{\"user:u\":2,\"app:a\":3}");
	if (st->ops->artifact_list) {
		conf_artifacts al = { 0 };
		r = conf_artifact_list(st, &s1, &al);
		cr_assert_eq(r, 0);
		cr_assert_eq(al.n, 0, "artifacts survived session_delete");
		conf_artifacts_clear(&al);
	}
	/* New events start at seq 1 again. */
	conf_append_simple(st, &s1, "c", 1, 1, T0 + 11);
	r = conf_events_load(st, &s1, 0, 0, 0, 0, 0, &l);
	cr_assert_eq(r, 0);
	cr_assert_eq(l.n, 1);
	cr_assert_eq(l.v[0].seq, 1);
	conf_events_clear(&l);

	/* The feed: s1's old events are gone, s2's remain, one DELETE_SESSION. */
	r = conf_feed_read(st, 0, CONF_FEED_ALL, &f);
	cr_assert_eq(r, 0, "%s", st->err.msg);
	for (int i = 1; i <= 3; i++) {
		char id[8];
		snprintf(id, sizeof(id), "a%d", i);
		cr_assert_null(find_event(&f, "s1", id), "deleted event %s still in the feed", id);
	}
	cr_assert_not_null(find_event(&f, "s2", "b1"));
	cr_assert_not_null(find_event(&f, "s2", "b2"));
	cr_assert_not_null(find_event(&f, "s1", "c1"), "the new s1's event is missing");
	{
		size_t deletes = 0;
		for (size_t i = 0; i < f.n; i++) {
			if (f.v[i].kind != MEMD_FEED_DELETE_SESSION)
				continue;
			deletes++;
			cr_assert_gt(f.v[i].position, last, "DELETE record not after earlier records");
			cr_assert_str_eq(f.v[i].app, APP);
			cr_assert_str_eq(f.v[i].user, USER);
			cr_assert_str_eq(f.v[i].session, "s1");
			cr_assert_lt(f.v[i].position, find_event(&f, "s1", "c1")->position);
		}
		cr_assert_eq(deletes, 1, "%zu DELETE_SESSION records", deletes);
	}
	conf_feed_clear(&f);
}

Test(store, user_delete_removes_only_that_user)
{
	memd_scope x11 = conf_scope("X", "u1", "s1"), x12 = conf_scope("X", "u1", "s2");
	memd_scope x21 = conf_scope("X", "u2", "s1"), y11 = conf_scope("Y", "u1", "s1");
	conf_sessions l = { 0 };
	conf_feed f = { 0 };
	int64_t last, v;
	int32_t r;

	create_ok("X", "u1", "s1", T0);
	create_ok("X", "u1", "s2", T0 + 1);
	create_ok("X", "u2", "s1", T0 + 2);
	create_ok("Y", "u1", "s1", T0 + 3);
	conf_append_simple(st, &x11, "e", 1, 2, T0);
	conf_append_simple(st, &x12, "e", 1, 2, T0);
	conf_append_simple(st, &x21, "e", 1, 2, T0);
	conf_append_simple(st, &y11, "e", 1, 2, T0);
	state_append("X", "u1", "s1", "{\"p\":1,\"user:name\":\"Ann\",\"app:policy\":\"strict\"}");
	state_append("X", "u2", "s1", "{\"user:name\":\"Bob\"}");
	state_append("Y", "u1", "s1", "{\"user:name\":\"Ann-Y\"}");
	if (st->ops->artifact_put) {
		r = conf_artifact_put(st, &x11, "a", "text/plain", "1", 1, T0, &v);
		cr_assert_eq(r, 0, "%s", st->err.msg);
	}
	last = conf_feed_last(st);

	r = conf_user_delete(st, "X", "u1");
	cr_assert_eq(r, 0, "%s", st->err.msg);

	cr_assert_eq(conf_session_get(st, "X", "u1", "s1", NULL), MEMD_ENOTFOUND);
	cr_assert_eq(conf_session_get(st, "X", "u1", "s2", NULL), MEMD_ENOTFOUND);
	r = conf_session_list(st, "X", "u1", MEMD_SQ_INCLUDE_ARCHIVED, 10, 0, NULL, &l);
	cr_assert_eq(r, 0);
	cr_assert_eq(l.n, 0, "the deleted user still has %zu sessions", l.n);
	conf_sessions_clear(&l);

	/* Others untouched: u2 in X (and X's app: state), u1 in Y. */
	cr_assert_eq(count_events(&x21), 2);
	conf_assert_state(st, &x21, "{\"user:name\":\"Bob\",\"app:policy\":\"strict\"}");
	cr_assert_eq(count_events(&y11), 2);
	conf_assert_state(st, &y11, "{\"user:name\":\"Ann-Y\"}");

	/* The user's user: state is gone: a new session sees none. */
	create_ok("X", "u1", "s1", T0 + 100);
	conf_assert_state(st, &x11, "{\"app:policy\":\"strict\"}");
	cr_assert_eq(count_events(&x11), 0);
	if (st->ops->artifact_list) {
		conf_artifacts al = { 0 };
		r = conf_artifact_list(st, &x11, &al);
		cr_assert_eq(r, 0);
		cr_assert_eq(al.n, 0, "artifacts survived user_delete");
		conf_artifacts_clear(&al);
	}

	r = conf_feed_read(st, 0, CONF_FEED_ALL, &f);
	cr_assert_eq(r, 0);
	{
		size_t deletes = 0, events = 0;
		for (size_t i = 0; i < f.n; i++) {
			const conf_feed_rec *c = &f.v[i];
			if (c->kind == MEMD_FEED_EVENT) {
				events++;
				cr_assert(!(strcmp(c->app, "X") == 0 && strcmp(c->user, "u1") == 0),
					  "event %s of the deleted user still in the feed",
					  c->event.id);
			} else if (c->kind == MEMD_FEED_DELETE_USER) {
				deletes++;
				cr_assert_str_eq(c->app, "X");
				cr_assert_str_eq(c->user, "u1");
				cr_assert_null(c->session);
				cr_assert_gt(c->position, last);
			}
		}
		cr_assert_eq(deletes, 1, "%zu DELETE_USER records", deletes);
		cr_assert_eq(events, 4, "%zu events left in the feed, expected 4", events);
	}
	conf_feed_clear(&f);
}

#define FEED_SESSIONS 3
#define FEED_ROUNDS 7
#define FEED_PAGE 3

Test(store, change_feed)
{
	static const char *const ids[FEED_SESSIONS] = { "fa", "fb", "fc" };
	char expect[FEED_SESSIONS * FEED_ROUNDS * 2][32];
	size_t n_expect = 0;
	conf_feed all = { 0 };
	int64_t head = -1, after = 0, prev = 0;
	size_t seen = 0;
	int32_t r;

	r = conf_feed_head(st, &head);
	if (r != MEMD_ENOTSUP) {
		cr_assert_eq(r, 0, "%s", st->err.msg);
		cr_assert_eq(head, 0, "fresh store has feed head %lld", (long long)head);
	}
	r = conf_feed_read(st, 0, 10, &all);
	cr_assert_eq(r, 0);
	cr_assert_eq(all.n, 0);

	for (int i = 0; i < FEED_SESSIONS; i++)
		create_ok(APP, USER, ids[i], T0 + i);
	/* Interleaved appends of 1 or 2 events. */
	for (int round = 0; round < FEED_ROUNDS; round++)
		for (int i = 0; i < FEED_SESSIONS; i++) {
			memd_scope sc = conf_scope(APP, USER, ids[i]);
			char prefix[16];
			int n = (round + i) % 2 + 1;
			snprintf(prefix, sizeof(prefix), "r%d-", round);
			conf_append_simple(st, &sc, prefix, 0, n, T0 + round);
			for (int k = 0; k < n; k++)
				snprintf(expect[n_expect++], 32, "%s/r%d-%d", ids[i], round, k);
		}

	r = conf_feed_read(st, 0, CONF_FEED_ALL, &all);
	cr_assert_eq(r, 0, "%s", st->err.msg);
	cr_assert_eq(all.n, n_expect, "feed has %zu records, expected %zu", all.n, n_expect);
	for (size_t i = 0; i < all.n; i++) {
		char got[64];
		const conf_feed_rec *c = &all.v[i];
		cr_assert_eq(c->kind, MEMD_FEED_EVENT);
		cr_assert_gt(c->position, prev, "positions not strictly increasing");
		prev = c->position;
		cr_assert_str_eq(c->app, APP);
		cr_assert_str_eq(c->user, USER);
		cr_assert_str_eq(c->event.session, c->session);
		cr_assert_eq(c->event.position, c->position);
		cr_assert_not_null(c->event.text);
		snprintf(got, sizeof(got), "%s/%s", c->session, c->event.id);
		cr_assert_str_eq(got, expect[i], "record %zu is %s, expected %s (append order)", i,
				 got, expect[i]);
	}
	r = conf_feed_head(st, &head);
	if (r != MEMD_ENOTSUP) {
		cr_assert_eq(r, 0);
		cr_assert_eq(head, prev, "feed_head %lld, last position %lld", (long long)head,
			     (long long)prev);
	}

	/* Paging sees every record exactly once, in order. */
	for (;;) {
		conf_feed page = { 0 };
		r = conf_feed_read(st, after, FEED_PAGE, &page);
		cr_assert_eq(r, 0, "%s", st->err.msg);
		cr_assert_leq(page.n, FEED_PAGE);
		if (page.n == 0) {
			conf_feed_clear(&page);
			break;
		}
		for (size_t i = 0; i < page.n; i++) {
			cr_assert_lt(seen, all.n, "paging returns more records than exist");
			cr_assert_gt(page.v[i].position, after, "feed_read returned position <= after");
			cr_assert_eq(page.v[i].position, all.v[seen].position, "paging skipped or repeated");
			seen++;
		}
		after = page.v[page.n - 1].position;
		conf_feed_clear(&page);
	}
	cr_assert_eq(seen, all.n);

	/* Starting mid-way; events_load reports the same positions. */
	{
		conf_feed tail = { 0 };
		conf_events l = { 0 };
		memd_scope sc = conf_scope(APP, USER, "fb");
		r = conf_feed_read(st, all.v[4].position, CONF_FEED_ALL, &tail);
		cr_assert_eq(r, 0);
		cr_assert_eq(tail.n, all.n - 5);
		cr_assert_eq(tail.v[0].position, all.v[5].position);
		conf_feed_clear(&tail);
		r = conf_events_load(st, &sc, 0, 0, 0, 0, 0, &l);
		cr_assert_eq(r, 0);
		for (size_t i = 0; i < l.n; i++) {
			const conf_feed_rec *c = find_event(&all, "fb", l.v[i].id);
			cr_assert_not_null(c);
			cr_assert_eq(c->position, l.v[i].position);
		}
		conf_events_clear(&l);
	}
	/* Past the head: nothing. */
	{
		conf_feed none = { 0 };
		r = conf_feed_read(st, prev, CONF_FEED_ALL, &none);
		cr_assert_eq(r, 0);
		cr_assert_eq(none.n, 0);
		conf_feed_clear(&none);
	}
	conf_feed_clear(&all);
}

Test(store, ping)
{
	memd_call c = conf_call(st);
	memd_error err = { .struct_size = sizeof(err) };

	if (!st->ops->ping)
		cr_skip_test("the plugin does not provide ping");
	cr_assert_eq(st->ops->ping(st->h, &c, &err), 0, "ping: %s", err.msg);
}

/* ---- cursors ---------------------------------------------------------- */

Test(store, cursors)
{
	int64_t pos = -1;
	int32_t r;

	r = conf_cursor_get(st, "index.keyword", &pos);
	cr_assert_eq(r, 0, "%s", st->err.msg);
	cr_assert_eq(pos, 0, "unknown cursor reads %lld", (long long)pos);
	cr_assert_eq(conf_cursor_set(st, "index.keyword", 42), 0, "%s", st->err.msg);
	cr_assert_eq(conf_cursor_set(st, "index.vector", 7), 0, "%s", st->err.msg);
	cr_assert_eq(conf_cursor_get(st, "index.keyword", &pos), 0);
	cr_assert_eq(pos, 42);
	cr_assert_eq(conf_cursor_get(st, "index.vector", &pos), 0);
	cr_assert_eq(pos, 7);
	cr_assert_eq(conf_cursor_set(st, "index.keyword", 1000000000000LL), 0);
	cr_assert_eq(conf_cursor_get(st, "index.keyword", &pos), 0);
	cr_assert_eq(pos, 1000000000000LL);
	cr_assert_eq(conf_cursor_get(st, "index.keyword%", &pos), 0);
	cr_assert_eq(pos, 0, "a cursor name matched another as a pattern");
}

Test(store, durable_across_reopen)
{
	memd_scope sc = conf_scope(APP, USER, "s1");
	conf_events l = { 0 };
	conf_session s;
	int64_t pos = -1, last;
	int32_t r;

	create_ok(APP, USER, "s1", T0);
	conf_append_simple(st, &sc, "d", 1, 3, T0 + 1);
	state_append(APP, USER, "s1", "{\"k\":1,\"user:u\":2,\"app:a\":3}");
	cr_assert_eq(conf_cursor_set(st, "c1", 5), 0);
	last = conf_feed_last(st);
	conf_reopen(st);
	/* The reopened instance works, whether or not it kept anything. */
	r = conf_session_get(st, APP, USER, "s1", NULL);
	cr_assert(r == 0 || r == MEMD_ENOTFOUND, "session_get after reopen: %d (%s)", r,
		  st->err.msg);
	if (!st->durable) {
		create_ok(APP, USER, "fresh", T0);
		return;
	}
	cr_assert_eq(r, 0, "session lost across reopen: %s", st->err.msg);
	s = get_ok(APP, USER, "s1");
	cr_assert_eq(s.version, 2);
	cr_assert_eq(s.last_seq, 3);
	conf_session_clear(&s);
	r = conf_events_load(st, &sc, 0, 0, 0, 0, 0, &l);
	cr_assert_eq(r, 0);
	cr_assert_eq(l.n, 3);
	cr_assert_str_eq(l.v[2].id, "d3");
	conf_events_clear(&l);
	conf_assert_state(st, &sc, "{\"k\":1,\"user:u\":2,\"app:a\":3}");
	cr_assert_eq(conf_cursor_get(st, "c1", &pos), 0, "%s", st->err.msg);
	cr_assert_eq(pos, 5, "cursor lost across reopen");
	cr_assert_eq(conf_feed_last(st), last, "feed changed across reopen");
	/* Positions keep increasing after a reopen. */
	conf_append_simple(st, &sc, "d", 4, 1, T0 + 2);
	cr_assert_gt(conf_feed_last(st), last);
}

/* ---- payloads and ids ------------------------------------------------- */

#define MIB (1024 * 1024)

Test(store, unicode_and_large_payloads)
{
	/* Emoji (4-byte and ZWJ sequence), CJK, combining marks, RTL. */
	static const char *const texts[] = {
		"emoji \xF0\x9F\x98\x80 \xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBB done",
		"\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xAE\xE3\x83\x86\xE3\x82\xAD\xE3\x82\xB9"
		"\xE3\x83\x88 \xE4\xB8\xAD\xE6\x96\x87 \xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4",
		"cafe\xCC\x81 vs caf\xC3\xA9, Z\xCD\x91\xCD\x97" "a\xCC\x80\xCD\x86l\xCD\x84go",
		"\xD7\xA9\xD7\x9C\xD7\x95\xD7\x9D \xD8\xB3\xD9\x84\xD8\xA7\xD9\x85",
	};
	enum { NT = sizeof(texts) / sizeof(texts[0]) };
	memd_scope sc = conf_scope(APP, USER, "uni");
	memd_event *evs[NT + 1];
	int64_t seqs[NT + 1];
	conf_events l = { 0 };
	char *big;
	size_t bl = 0;
	int32_t r;

	/* Composed and decomposed "cafe" (U+00E9 vs e + U+0301) are different ids. */
	r = conf_session_create(st, APP, USER, "caf\xC3\xA9", "\xF0\x9F\x98\x80 title", T0, NULL,
				NULL);
	cr_assert_eq(r, 0, "%s", st->err.msg);
	r = conf_session_create(st, APP, USER, "cafe\xCC\x81", "decomposed", T0, NULL, NULL);
	cr_assert_eq(r, 0, "NFC and NFD ids collide: %s", st->err.msg);
	{
		conf_session s = get_ok(APP, USER, "caf\xC3\xA9");
		cr_assert_str_eq(s.title, "\xF0\x9F\x98\x80 title");
		conf_session_clear(&s);
		s = get_ok(APP, USER, "cafe\xCC\x81");
		cr_assert_str_eq(s.title, "decomposed");
		conf_session_clear(&s);
	}

	/* 1 MiB of mixed 1- to 4-byte UTF-8. */
	big = malloc(MIB + 8);
	cr_assert_not_null(big);
	while (bl < MIB) {
		const char *piece = texts[bl % NT];
		size_t pl = strlen(piece);
		if (bl + pl > MIB)
			break;
		memcpy(big + bl, piece, pl);
		bl += pl;
	}
	while (bl < MIB)
		big[bl++] = 'x';
	big[bl] = '\0';

	create_ok(APP, USER, "uni", T0);
	for (int i = 0; i < NT; i++) {
		char id[8];
		snprintf(id, sizeof(id), "u%d", i);
		evs[i] = conf_event_new(id, "user", texts[i], T0 + i);
	}
	evs[NT] = conf_event_new("big", "assistant", big, T0 + NT);
	r = conf_append(st, &sc, evs, NT + 1, NULL, seqs, NULL);
	cr_assert_eq(r, 0, "%s", st->err.msg);
	r = conf_events_load(st, &sc, 0, 0, 0, 0, 0, &l);
	cr_assert_eq(r, 0, "%s", st->err.msg);
	cr_assert_eq(l.n, NT + 1);
	for (int i = 0; i <= NT; i++) {
		const char *want = i < NT ? texts[i] : big;
		char *ct = text_of_content(l.v[i].content_json);
		cr_assert_eq(strlen(l.v[i].text), strlen(want), "text %d length changed", i);
		cr_assert(strcmp(l.v[i].text, want) == 0, "text %d changed", i);
		cr_assert(strcmp(ct, want) == 0, "content text %d changed", i);
		free(ct);
	}
	conf_events_clear(&l);

	/* The same through the state and an artifact. */
	{
		json_t *d = json_pack("{s:s,s:s}", "user:big", big, "k", texts[2]);
		char *delta = json_dumps(d, JSON_COMPACT);
		char *got = NULL;
		json_t *g;
		json_error_t e;
		state_append(APP, USER, "uni", delta);
		cr_assert_eq(conf_state_get(st, &sc, &got), 0, "%s", st->err.msg);
		g = json_loads(got, 0, &e);
		cr_assert_not_null(g);
		cr_assert_str_eq(json_string_value(json_object_get(g, "k")), texts[2]);
		cr_assert(strcmp(json_string_value(json_object_get(g, "user:big")), big) == 0,
			  "1 MiB state value changed");
		json_decref(g);
		json_decref(d);
		free(delta);
		free(got);
	}
	if (st->ops->artifact_put) {
		unsigned char *bin = malloc(MIB);
		conf_artifacts al = { 0 };
		int64_t v;
		cr_assert_not_null(bin);
		for (size_t i = 0; i < MIB; i++)
			bin[i] = (unsigned char)(i * 31 + (i >> 8));
		r = conf_artifact_put(st, &sc, "big.bin", "application/octet-stream", bin, MIB, T0,
				      &v);
		cr_assert_eq(r, 0, "%s", st->err.msg);
		r = conf_artifact_get(st, &sc, "big.bin", 0, &al);
		cr_assert_eq(r, 0, "%s", st->err.msg);
		cr_assert_eq(al.v[0].size, MIB);
		cr_assert_eq(memcmp(al.v[0].data, bin, MIB), 0, "1 MiB artifact changed");
		conf_artifacts_clear(&al);
		free(bin);
	}
	free_events(evs, NT + 1);
	free(big);
}

static const char *const hostile[] = {
	"it's",
	"a\"b",
	"'; DROP TABLE sessions; --",
	"\"); DROP TABLE events; --",
	"../../etc/passwd",
	"..",
	"%",
	"_",
	"a%",
	"a_c",
	"abc",
	"a\\b",
	"\\",
	"\\%",
	"*",
	"?",
	"[a-z]",
	"$1",
	"${HOME}",
	"NULL",
	" ",
	"\xF0\x9F\x98\x80",
};
#define N_HOSTILE (sizeof(hostile) / sizeof(hostile[0]))

Test(store, hostile_ids_are_isolated)
{
	char longid[MEMD_ID_MAX + 1];
	const char *ids[N_HOSTILE + 1];
	conf_sessions l = { 0 };
	int32_t r;

	memset(longid, 'L', MEMD_ID_MAX);
	longid[MEMD_ID_MAX] = '\0';
	for (size_t i = 0; i < N_HOSTILE; i++)
		ids[i] = hostile[i];
	ids[N_HOSTILE] = longid;

	/* As session ids, each with its own title and one event. */
	for (size_t i = 0; i <= N_HOSTILE; i++) {
		char title[16];
		memd_scope sc = conf_scope(APP, USER, ids[i]);
		memd_event *e = conf_event_new(ids[i], "user", ids[i], T0);
		int64_t seq;
		snprintf(title, sizeof(title), "t%zu", i);
		r = conf_session_create(st, APP, USER, ids[i], title, T0 + (int64_t)i, NULL, NULL);
		cr_assert_eq(r, 0, "create id [%s]: %s", ids[i], st->err.msg);
		r = conf_append(st, &sc, &e, 1, NULL, &seq, NULL);
		cr_assert_eq(r, 0, "append to [%s]: %s", ids[i], st->err.msg);
		cr_assert_eq(seq, 1, "[%s] shares a sequence with another session", ids[i]);
		conf_event_free(e);
	}
	for (size_t i = 0; i <= N_HOSTILE; i++) {
		char title[16];
		memd_scope sc = conf_scope(APP, USER, ids[i]);
		conf_events ev = { 0 };
		conf_session s = get_ok(APP, USER, ids[i]);
		snprintf(title, sizeof(title), "t%zu", i);
		cr_assert_str_eq(s.id, ids[i]);
		cr_assert_str_eq(s.title, title, "[%s] got another session's title", ids[i]);
		conf_session_clear(&s);
		r = conf_events_load(st, &sc, 0, 0, 0, 0, 0, &ev);
		cr_assert_eq(r, 0);
		cr_assert_eq(ev.n, 1, "[%s] sees %zu events", ids[i], ev.n);
		cr_assert_str_eq(ev.v[0].text, ids[i]);
		cr_assert_str_eq(ev.v[0].id, ids[i]);
		conf_events_clear(&ev);
	}
	r = conf_session_list(st, APP, USER, 0, 1000, 0, NULL, &l);
	cr_assert_eq(r, 0);
	cr_assert_eq(l.n, N_HOSTILE + 1);
	conf_sessions_clear(&l);
	/* A wildcard id matches nothing else. */
	cr_assert_eq(conf_session_get(st, APP, USER, "a%c", NULL), MEMD_ENOTFOUND);
	cr_assert_eq(conf_session_get(st, APP, USER, "ab_", NULL), MEMD_ENOTFOUND);
	cr_assert_eq(conf_session_delete(st, APP, USER, "%"), 0);
	cr_assert_eq(conf_session_get(st, APP, USER, "abc", NULL), 0, "deleting '%%' took 'abc'");
	cr_assert_eq(conf_session_get(st, APP, USER, "a%", NULL), 0);
	cr_assert_eq(conf_session_get(st, APP, USER, "%", NULL), MEMD_ENOTFOUND);
	cr_assert_eq(conf_session_delete(st, APP, USER, "a_c"), 0);
	cr_assert_eq(conf_session_get(st, APP, USER, "abc", NULL), 0, "deleting 'a_c' took 'abc'");

	/* As event ids in one session: a_c then abc is not a replay. */
	{
		memd_scope sc = conf_scope(APP, USER, "abc");
		memd_event *e1 = conf_event_new("x_y", "user", "1", T0);
		memd_event *e2 = conf_event_new("xzy", "user", "2", T0);
		memd_append_result res = { 0 };
		int64_t seq;
		r = conf_append(st, &sc, &e1, 1, NULL, &seq, &res);
		cr_assert_eq(r, 0);
		r = conf_append(st, &sc, &e2, 1, NULL, &seq, &res);
		cr_assert_eq(r, 0, "%s", st->err.msg);
		cr_assert_eq(res.flags & MEMD_APPEND_REPLAYED, 0, "'xzy' replayed 'x_y'");
		cr_assert_eq(seq, 3);
		conf_event_free(e1);
		conf_event_free(e2);
	}

	/* As users and apps: a wildcard user is not the others. */
	create_ok(APP, "%", "s", T0);
	create_ok(APP, "_", "s", T0);
	create_ok("%", USER, "s", T0);
	state_append(APP, "%", "s", "{\"user:who\":\"percent\"}");
	state_append(APP, "_", "s", "{\"user:who\":\"underscore\"}");
	{
		memd_scope pct = conf_scope(APP, "%", "s"), und = conf_scope(APP, "_", "s");
		conf_assert_state(st, &pct, "{\"user:who\":\"percent\"}");
		conf_assert_state(st, &und, "{\"user:who\":\"underscore\"}");
	}
	r = conf_session_list(st, APP, "%", 0, 1000, 0, NULL, &l);
	cr_assert_eq(r, 0);
	cr_assert_eq(l.n, 1, "user '%%' lists %zu sessions", l.n);
	conf_sessions_clear(&l);
	cr_assert_eq(conf_user_delete(st, APP, "%"), 0, "%s", st->err.msg);
	cr_assert_eq(conf_session_get(st, APP, "_", "s", NULL), 0, "deleting user '%%' took '_'");
	cr_assert_eq(conf_session_get(st, APP, USER, "abc", NULL), 0, "deleting user '%%' took u1");
	cr_assert_eq(conf_session_get(st, "%", USER, "s", NULL), 0);
	cr_assert_eq(conf_user_delete(st, APP, "_"), 0);
	cr_assert_eq(conf_session_get(st, APP, USER, "abc", NULL), 0, "deleting user '_' took u1");

	/* As artifact names and cursor names. */
	if (st->ops->artifact_put) {
		memd_scope sc = conf_scope(APP, USER, "abc");
		conf_artifacts al = { 0 };
		int64_t v;
		cr_assert_eq(conf_artifact_put(st, &sc, "a_c", "text/plain", "1", 1, T0, &v), 0);
		cr_assert_eq(conf_artifact_put(st, &sc, "%", "text/plain", "2", 1, T0, &v), 0);
		cr_assert_eq(conf_artifact_get(st, &sc, "abc", 0, &al), MEMD_ENOTFOUND);
		conf_artifacts_clear(&al);
		cr_assert_eq(conf_artifact_get(st, &sc, "a%", 0, &al), MEMD_ENOTFOUND);
		conf_artifacts_clear(&al);
		cr_assert_eq(conf_artifact_delete(st, &sc, "%"), 0);
		cr_assert_eq(conf_artifact_get(st, &sc, "a_c", 0, &al), 0, "deleting '%%' took 'a_c'");
		conf_artifacts_clear(&al);
	}
	{
		int64_t pos;
		cr_assert_eq(conf_cursor_set(st, "a_c", 11), 0);
		cr_assert_eq(conf_cursor_set(st, "'; DROP TABLE cursors; --", 12), 0, "%s",
			     st->err.msg);
		cr_assert_eq(conf_cursor_get(st, "abc", &pos), 0);
		cr_assert_eq(pos, 0);
		cr_assert_eq(conf_cursor_get(st, "'; DROP TABLE cursors; --", &pos), 0);
		cr_assert_eq(pos, 12);
		cr_assert_eq(conf_cursor_get(st, "a_c", &pos), 0);
		cr_assert_eq(pos, 11);
	}
}

/* ---- concurrency ------------------------------------------------------ */

#define CC_THREADS 8
#define CC_EACH 200

typedef struct cc_arg {
	int thread;
	int64_t seqs[CC_EACH];
	int failed;
	memd_error err;
} cc_arg;

static void *cc_worker(void *p)
{
	cc_arg *a = p;
	memd_scope sc = conf_scope(APP, USER, "hot");

	for (int i = 0; i < CC_EACH && !a->failed; i++) {
		char id[32];
		memd_event *e;
		memd_call call = { .struct_size = sizeof(call) };
		memd_append ap = { .struct_size = sizeof(ap), .n_events = 1, .now_us = T0 + i };
		memd_append_result res = { .struct_size = sizeof(res), .seqs = &a->seqs[i] };

		snprintf(id, sizeof(id), "t%d-%d", a->thread, i);
		e = conf_event_new(id, "user", id, T0 + i);
		ap.events = (const memd_event *const *)&e;
		a->err.struct_size = sizeof(a->err);
		if (st->ops->append(st->h, &call, &sc, &ap, &res, &a->err) != 0)
			a->failed = 1;
		conf_event_free(e);
	}
	return NULL;
}

Test(store, concurrent_appends)
{
	pthread_t th[CC_THREADS];
	cc_arg *args;
	char *seen;
	conf_session s;
	conf_events l = { 0 };
	conf_feed f = { 0 };
	int32_t r;

	if (!st->threadsafe)
		cr_skip_test("the plugin is not THREADSAFE (the host serializes its calls)");
	create_ok(APP, USER, "hot", T0);
	args = calloc(CC_THREADS, sizeof(*args));
	seen = calloc(CC_THREADS * CC_EACH + 1, 1);
	cr_assert(args && seen);
	for (int t = 0; t < CC_THREADS; t++) {
		args[t].thread = t;
		cr_assert_eq(pthread_create(&th[t], NULL, cc_worker, &args[t]), 0);
	}
	for (int t = 0; t < CC_THREADS; t++)
		pthread_join(th[t], NULL);
	for (int t = 0; t < CC_THREADS; t++) {
		cr_assert_not(args[t].failed, "thread %d: append failed: %s", t, args[t].err.msg);
		for (int i = 0; i < CC_EACH; i++) {
			int64_t q = args[t].seqs[i];
			cr_assert(q >= 1 && q <= CC_THREADS * CC_EACH, "seq %lld out of range", (long long)q);
			cr_assert_not(seen[q], "seq %lld handed out twice", (long long)q);
			seen[q] = 1;
			if (i > 0)
				cr_assert_gt(q, args[t].seqs[i - 1], "one thread's seqs went backwards");
		}
	}
	s = get_ok(APP, USER, "hot");
	cr_assert_eq(s.version, CC_THREADS * CC_EACH);
	cr_assert_eq(s.last_seq, CC_THREADS * CC_EACH);
	conf_session_clear(&s);
	r = conf_events_load(st, &(memd_scope){ sizeof(memd_scope), 0, APP, USER, "hot" }, 0, 0, 0,
			     0, 0, &l);
	cr_assert_eq(r, 0);
	cr_assert_eq(l.n, CC_THREADS * CC_EACH);
	for (size_t i = 0; i < l.n; i++) {
		char want[32];
		int t = atoi(l.v[i].id + 1);
		int k = atoi(strchr(l.v[i].id, '-') + 1);
		cr_assert_eq(l.v[i].seq, (int64_t)i + 1, "gap at %zu", i);
		snprintf(want, sizeof(want), "t%d-%d", t, k);
		cr_assert_str_eq(l.v[i].id, want);
		cr_assert_eq(args[t].seqs[k], l.v[i].seq, "event %s stored at another seq", want);
	}
	conf_events_clear(&l);
	r = conf_feed_read(st, 0, CONF_FEED_ALL, &f);
	cr_assert_eq(r, 0);
	cr_assert_eq(f.n, CC_THREADS * CC_EACH);
	for (size_t i = 1; i < f.n; i++)
		cr_assert_gt(f.v[i].position, f.v[i - 1].position);
	conf_feed_clear(&f);
	free(args);
	free(seen);
}
