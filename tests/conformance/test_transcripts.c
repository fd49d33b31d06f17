/* SPDX-License-Identifier: MIT */
/*
 * The transcripts part of the session-store conformance suite (since
 * 1.2): the "Transcript operations" paragraph at the top of
 * api/memd/store.h and the contracts of memd_transcript_op,
 * memd_operation, memd_state_change, memd_state_history_query, the hidden
 * marks of memd_event, memd_session.message_count, MEMD_SQ_BY_ACTIVITY,
 * updated_after_us, MEMD_EVQ_INCLUDE_HIDDEN, the roles mask and
 * MEMD_FEED_HIDE, run unchanged against every store plugin (see
 * store_harness.h). A store without the transcript ops is skipped.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_harness.h"

#define APP "tapp"
#define USER "tu"
#define USER2 "tu2"
#define T0 1700000000000000LL /* a plausible unix time in us */
#define STEP_US 1000LL        /* between the appends of a test */
#define SUITE_TIMEOUT_S 120
#define IDS_MAX 4096          /* room for a comma-joined id list */

static conf_store *st;

static void setup(void)
{
	st = conf_open();
	conf_require_transcripts(st);
}

static void teardown(void)
{
	conf_close(st);
	st = NULL;
}

TestSuite(transcripts, .init = setup, .fini = teardown, .timeout = SUITE_TIMEOUT_S);

/* ---- helpers ---------------------------------------------------------- */

static void session_ok(const char *user, const char *id, int64_t created_us, const char *state)
{
	int32_t r = conf_session_create(st, APP, user, id, NULL, created_us, state, NULL);
	cr_assert_eq(r, 0, "session_create(%s): %s", id, st->err.msg);
}

static conf_session session_get_ok(const memd_scope *sc)
{
	conf_session s = { 0 };
	int32_t r = conf_session_get(st, sc->app, sc->user, sc->session, &s);
	cr_assert_eq(r, 0, "session_get(%s): %s", sc->session, st->err.msg);
	return s;
}

/* One event of the given role ("summary" covers covers_seq). */
static memd_event *ev(const char *id, const char *role, int64_t ts, int64_t covers_seq)
{
	char text[96];
	memd_event *e;

	snprintf(text, sizeof(text), "text of %s", id);
	e = conf_event_new(id, role, text, ts);
	e->covers_seq = covers_seq;
	return e;
}

/* Append one plain event; returns its seq. */
static int64_t add(const memd_scope *sc, const char *id, const char *role, int64_t now_us,
		   int64_t covers_seq)
{
	memd_event *e = ev(id, role, now_us, covers_seq);
	conf_append_opts o = { .now_us = now_us };
	int64_t seq = 0;
	int32_t r = conf_append(st, sc, &e, 1, &o, &seq, NULL);

	cr_assert_eq(r, 0, "append %s: %s", id, st->err.msg);
	conf_event_free(e);
	return seq;
}

/* A transcript op record. */
static memd_transcript_op op_rec(uint32_t kind, const char *id, int64_t hide_from_seq,
				 const char *undo_id)
{
	memd_transcript_op op = { .struct_size = sizeof(op), .kind = kind, .id = id,
				  .hide_from_seq = hide_from_seq, .undo_id = undo_id };
	return op;
}

/* An append carrying op with the events named "id:role" in spec (comma
 * separated, NULL = none), the delta (may be NULL) and, if
 * expected_version >= 0, that expected version. Returns the code; res
 * and seqs (n slots) as the op wrote them. */
static int32_t op_append(const memd_scope *sc, const memd_transcript_op *op, const char *spec,
			 const char *delta, int64_t expected_version, int64_t now_us,
			 int64_t *seqs, memd_append_result *res)
{
	memd_event *evs[16];
	uint32_t n = 0;
	conf_append_opts o = { .now_us = now_us, .delta = delta, .op = op };
	int64_t local[16];
	memd_append_result tmp;
	int32_t r;

	if (spec) {
		char *copy = strdup(spec), *save = NULL;
		cr_assert_not_null(copy);
		for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
			char *colon = strchr(tok, ':');
			cr_assert_not_null(colon, "bad spec %s", spec);
			*colon = '\0';
			cr_assert_lt(n, 16u);
			evs[n] = ev(tok, colon + 1, now_us + (int64_t)n, 0);
			n++;
		}
		free(copy);
	}
	if (expected_version >= 0) {
		o.flags = MEMD_APPEND_EXPECT_VERSION;
		o.expected_version = expected_version;
	}
	r = conf_append(st, sc, evs, n, &o, seqs ? seqs : local, res ? res : &tmp);
	for (uint32_t i = 0; i < n; i++)
		conf_event_free(evs[i]);
	return r;
}

static memd_append_result op_ok(const memd_scope *sc, const memd_transcript_op *op,
				const char *spec, const char *delta, int64_t now_us, int64_t *seqs)
{
	memd_append_result res = { 0 };
	int32_t r = op_append(sc, op, spec, delta, -1, now_us, seqs, &res);

	cr_assert_eq(r, 0, "append with op %s (kind %u): %s", op->id, op->kind, st->err.msg);
	cr_assert_eq(res.flags & MEMD_APPEND_REPLAYED, 0u, "op %s was taken for a replay", op->id);
	return res;
}

/* The ids events_load delivers for q, comma-joined into buf. */
static const char *ids_of(const memd_scope *sc, const memd_event_query *q, char *buf, size_t size)
{
	conf_events l = { 0 };
	int32_t r = conf_events_load_q(st, sc, q, &l);
	size_t used = 0;

	cr_assert_eq(r, 0, "events_load: %s", st->err.msg);
	buf[0] = '\0';
	for (size_t i = 0; i < l.n; i++) {
		int w = snprintf(buf + used, size - used, "%s%s", i ? "," : "", l.v[i].id);
		cr_assert(w > 0 && (size_t)w < size - used, "id list too long");
		used += (size_t)w;
		if (i)
			cr_assert_gt(l.v[i].seq, l.v[i - 1].seq, "events not in seq order");
	}
	conf_events_clear(&l);
	return buf;
}

static void assert_visible(const memd_scope *sc, const char *want)
{
	memd_event_query q = { 0 };
	char buf[IDS_MAX];
	const char *got = ids_of(sc, &q, buf, sizeof(buf));
	cr_assert_str_eq(got, want, "visible events of %s: '%s', expected '%s'", sc->session, got,
			 want);
}

/* The event id of sc, read with INCLUDE_HIDDEN; asserts it exists. */
static memd_event event_by_id(const memd_scope *sc, const char *id, conf_events *keep)
{
	memd_event_query q = { .flags = MEMD_EVQ_INCLUDE_HIDDEN };
	int32_t r;

	conf_events_clear(keep);
	r = conf_events_load_q(st, sc, &q, keep);
	cr_assert_eq(r, 0, "events_load hidden: %s", st->err.msg);
	for (size_t i = 0; i < keep->n; i++)
		if (strcmp(keep->v[i].id, id) == 0)
			return keep->v[i];
	cr_assert_fail("event %s is not stored (even hidden)", id);
	return keep->v[0];
}

static void assert_hidden(const memd_scope *sc, const char *id, int64_t hidden_us,
			  const char *hidden_by, uint32_t kind)
{
	conf_events keep = { 0 };
	memd_event e = event_by_id(sc, id, &keep);

	cr_assert_eq(e.hidden_us, hidden_us, "%s hidden_us %lld, expected %lld", id,
		     (long long)e.hidden_us, (long long)hidden_us);
	conf_assert_str_or_null(e.hidden_by, hidden_by, "hidden_by");
	cr_assert_eq(e.hidden_kind, kind, "%s hidden_kind %u, expected %u", id, e.hidden_kind, kind);
	conf_events_clear(&keep);
}

static void assert_operation_of(const memd_scope *sc, const char *id, const char *op)
{
	conf_events keep = { 0 };
	memd_event e = event_by_id(sc, id, &keep);
	conf_assert_str_or_null(e.operation, op, "event operation");
	conf_events_clear(&keep);
}

static void assert_head(const memd_scope *sc, int64_t version, int64_t last_seq,
			int64_t summary_seq, int64_t message_count)
{
	conf_session s = session_get_ok(sc);

	cr_assert_eq(s.version, version, "version %lld, expected %lld", (long long)s.version,
		     (long long)version);
	cr_assert_eq(s.last_seq, last_seq, "last_seq %lld, expected %lld", (long long)s.last_seq,
		     (long long)last_seq);
	cr_assert_eq(s.summary_seq, summary_seq, "summary_seq %lld, expected %lld",
		     (long long)s.summary_seq, (long long)summary_seq);
	cr_assert_eq(s.message_count, message_count, "message_count %lld, expected %lld",
		     (long long)s.message_count, (long long)message_count);
	conf_session_clear(&s);
}

static conf_operation op_get_ok(const memd_scope *sc, const char *id)
{
	conf_operation o = { 0 };
	int32_t r = conf_operation_get(st, sc, id, &o);
	cr_assert_eq(r, 0, "operation_get(%s): %s", id, st->err.msg);
	conf_assert_str_or_null(o.o.id, id, "operation id");
	return o;
}

/* ---- hiding ----------------------------------------------------------- */

/* 1 u1, 2 a1, 3 u2, 4 a2, 5 s1 (summary of 1..4), 6 u3, 7 a3, 8 u4, 9 a4,
 * 10 s2 (summary of 1..9); every event appended at T0 + seq * STEP_US. */
static void ten_events(const memd_scope *sc)
{
	static const char *const ids[] = { "u1", "a1", "u2", "a2", "s1",
					   "u3", "a3", "u4", "a4", "s2" };
	static const char *const roles[] = { "user", "assistant", "user", "assistant", "summary",
					     "user", "assistant", "user", "assistant", "summary" };
	for (int i = 0; i < 10; i++) {
		int64_t seq = add(sc, ids[i], roles[i], T0 + (i + 1) * STEP_US,
				  strcmp(roles[i], "summary") == 0 ? i : 0);
		cr_assert_eq(seq, i + 1);
	}
}

Test(transcripts, rewind_hides_from_a_seq)
{
	memd_scope sc = conf_scope(APP, USER, "s");
	memd_transcript_op op = op_rec(MEMD_OP_REWIND, "op1", 6, NULL);
	memd_append_result res;
	conf_operation o;
	const int64_t now = T0 + 100 * STEP_US;

	session_ok(USER, "s", T0, NULL);
	ten_events(&sc);
	assert_head(&sc, 10, 10, 10, 8);

	res = op_ok(&sc, &op, NULL, NULL, now, NULL);
	cr_assert_eq(res.version, 11);
	cr_assert_eq(res.hidden_count, 5);
	cr_assert_eq(res.unhidden_count, 0);
	/* last_seq stays; summary_seq is the newest visible summary. */
	assert_head(&sc, 11, 10, 5, 4);
	assert_visible(&sc, "u1,a1,u2,a2,s1");
	for (int i = 6; i <= 10; i++) {
		static const char *const ids[] = { "u3", "a3", "u4", "a4", "s2" };
		assert_hidden(&sc, ids[i - 6], now, "op1", MEMD_OP_REWIND);
	}
	assert_hidden(&sc, "a2", 0, NULL, 0);
	assert_operation_of(&sc, "u1", NULL);

	o = op_get_ok(&sc, "op1");
	cr_assert_eq(o.o.kind, MEMD_OP_REWIND);
	cr_assert_eq(o.o.created_us, now);
	cr_assert_eq(o.o.version, 11);
	cr_assert_eq(o.o.hide_from_seq, 6);
	cr_assert_eq(o.o.first_seq, 0);
	cr_assert_eq(o.o.last_seq, 0);
	cr_assert_eq(o.o.hidden_count, 5);
	cr_assert_eq(o.o.unhidden_count, 0);
	conf_assert_str_or_null(o.o.undo_of, NULL, "undo_of");
	conf_assert_str_or_null(o.o.undone_by, NULL, "undone_by");
	conf_operation_clear(&o);

	/* A second rewind from 3 with a new event: already hidden events keep
	 * their marks, the new event gets a new seq (never reused). */
	{
		memd_transcript_op op2 = op_rec(MEMD_OP_REWIND, "op2", 3, NULL);
		int64_t seqs[1] = { 0 };

		res = op_ok(&sc, &op2, "u2b:user", NULL, now + STEP_US, seqs);
		cr_assert_eq(seqs[0], 11, "the new event got seq %lld", (long long)seqs[0]);
		cr_assert_eq(res.hidden_count, 3);
		assert_head(&sc, 12, 11, 0, 3);
		assert_visible(&sc, "u1,a1,u2b");
		assert_hidden(&sc, "u3", now, "op1", MEMD_OP_REWIND);
		assert_hidden(&sc, "u2", now + STEP_US, "op2", MEMD_OP_REWIND);
		assert_hidden(&sc, "s1", now + STEP_US, "op2", MEMD_OP_REWIND);
		assert_operation_of(&sc, "u2b", "op2");
		o = op_get_ok(&sc, "op2");
		cr_assert_eq(o.o.first_seq, 11);
		cr_assert_eq(o.o.last_seq, 11);
		cr_assert_eq(o.o.hidden_count, 3);
		conf_operation_clear(&o);
	}
	/* A plain append after it goes on from there. */
	cr_assert_eq(add(&sc, "u5", "user", now + 2 * STEP_US, 0), 12);
	assert_operation_of(&sc, "u5", NULL);
	assert_head(&sc, 13, 12, 0, 4);
}

Test(transcripts, rewrite_and_clear_hide_everything)
{
	memd_scope sc = conf_scope(APP, USER, "s");
	memd_transcript_op rw = op_rec(MEMD_OP_REWRITE, "rw", 1, NULL);
	memd_transcript_op cl = op_rec(MEMD_OP_CLEAR, "cl", 1, NULL);
	memd_append_result res;
	int64_t seqs[3] = { 0 };
	const int64_t now = T0 + 100 * STEP_US;

	session_ok(USER, "s", T0, NULL);
	ten_events(&sc);
	res = op_ok(&sc, &rw, "n1:user,n2:assistant,n3:summary", NULL, now, seqs);
	cr_assert_eq(res.hidden_count, 10);
	cr_assert_eq(seqs[0], 11);
	cr_assert_eq(seqs[2], 13);
	assert_visible(&sc, "n1,n2,n3");
	assert_head(&sc, 11, 13, 13, 2);
	assert_hidden(&sc, "u1", now, "rw", MEMD_OP_REWRITE);
	assert_hidden(&sc, "s2", now, "rw", MEMD_OP_REWRITE);
	assert_operation_of(&sc, "n2", "rw");

	res = op_ok(&sc, &cl, NULL, NULL, now + STEP_US, NULL);
	cr_assert_eq(res.hidden_count, 3);
	assert_visible(&sc, "");
	assert_head(&sc, 12, 13, 0, 0);
	assert_hidden(&sc, "n1", now + STEP_US, "cl", MEMD_OP_CLEAR);
	assert_hidden(&sc, "u1", now, "rw", MEMD_OP_REWRITE);

	/* The session, its state and the next seqs go on. */
	cr_assert_eq(add(&sc, "after", "user", now + 2 * STEP_US, 0), 14);
	assert_visible(&sc, "after");
	assert_head(&sc, 13, 14, 0, 1);
}

/* ---- events_load over hidden events ----------------------------------- */

typedef struct model_ev {
	const char *id;
	const char *role;
	int64_t seq;
	int64_t ts;
	int hidden;
} model_ev;

static uint32_t role_bit(const char *role)
{
	if (strcmp(role, "user") == 0)
		return MEMD_ROLE_USER;
	if (strcmp(role, "assistant") == 0)
		return MEMD_ROLE_ASSISTANT;
	if (strcmp(role, "system") == 0)
		return MEMD_ROLE_SYSTEM;
	if (strcmp(role, "tool") == 0)
		return MEMD_ROLE_TOOL;
	return MEMD_ROLE_SUMMARY;
}

/* What events_load must deliver for q over the model m. */
static void model_ids(const model_ev *m, size_t n, const memd_event_query *q, char *buf,
		      size_t size)
{
	const model_ev *sel[64];
	size_t k = 0, from = 0, to, used = 0;

	for (size_t i = 0; i < n; i++) {
		const model_ev *e = &m[i];
		int summary = strcmp(e->role, "summary") == 0;
		if (e->hidden && !(q->flags & MEMD_EVQ_INCLUDE_HIDDEN))
			continue;
		if (e->seq <= q->after_seq || (q->before_seq && e->seq >= q->before_seq))
			continue;
		if (q->after_time_us && e->ts <= q->after_time_us)
			continue;
		if ((q->flags & MEMD_EVQ_NO_SUMMARY) && summary)
			continue;
		if ((q->flags & MEMD_EVQ_ONLY_SUMMARY) && !summary)
			continue;
		if (q->roles && !(q->roles & role_bit(e->role)))
			continue;
		sel[k++] = e;
	}
	to = k;
	if (q->limit && k > q->limit) {
		if (q->flags & MEMD_EVQ_NEWEST)
			from = k - q->limit;
		else
			to = q->limit;
	}
	buf[0] = '\0';
	for (size_t i = from; i < to; i++)
		used += (size_t)snprintf(buf + used, size - used, "%s%s", i > from ? "," : "",
					 sel[i]->id);
}

/* The model session of events_load_skips_hidden_events: see below. */
static const model_ev model[] = {
	{ "u1", "user", 1, 0, 0 },      { "a1", "assistant", 2, 0, 0 },
	{ "t1", "tool", 3, 0, 0 },      { "y1", "system", 4, 0, 0 },
	{ "s1", "summary", 5, 0, 0 },   { "u2", "user", 6, 0, 1 },
	{ "a2", "assistant", 7, 0, 1 }, { "s2", "summary", 8, 0, 1 },
	{ "u3", "user", 9, 0, 1 },      { "a3", "assistant", 10, 0, 1 },
	{ "u4", "user", 11, 0, 0 },     { "a4", "assistant", 12, 0, 0 },
	{ "s3", "summary", 13, 0, 0 },  { "u5", "user", 14, 0, 1 },
	{ "a5", "assistant", 15, 0, 1 }, { "u6", "user", 16, 0, 0 },
	{ "t2", "tool", 17, 0, 0 },
};
#define MODEL_N (sizeof(model) / sizeof(model[0]))

Test(transcripts, events_load_skips_hidden_events)
{
	memd_scope sc = conf_scope(APP, USER, "m");
	model_ev m[MODEL_N];
	memd_transcript_op r1 = op_rec(MEMD_OP_REWIND, "r1", 6, NULL);
	memd_transcript_op r2 = op_rec(MEMD_OP_REWIND, "r2", 14, NULL);
	static const uint32_t flag_sets[] = { 0, MEMD_EVQ_NO_SUMMARY, MEMD_EVQ_ONLY_SUMMARY };
	static const uint32_t limits[] = { 0, 1, 3 };
	static const uint32_t roles[] = { 0, MEMD_ROLE_USER, MEMD_ROLE_USER | MEMD_ROLE_ASSISTANT,
					  MEMD_ROLE_SUMMARY, MEMD_ROLE_TOOL | MEMD_ROLE_SYSTEM,
					  MEMD_ROLE_USER | MEMD_ROLE_SUMMARY };
	static const int64_t ranges[][2] = { { 0, 0 }, { 2, 16 } };
	char want[IDS_MAX], got[IDS_MAX];
	int checked = 0;

	memcpy(m, model, sizeof(m));
	for (size_t i = 0; i < MODEL_N; i++)
		m[i].ts = T0 + m[i].seq * STEP_US;
	session_ok(USER, "m", T0, NULL);
	/* 1..10 plainly, rewind r1 hides 6..10, 11..15 plainly, rewind r2
	 * hides 14..15 and appends 16..17. */
	for (size_t i = 0; i < 10; i++)
		add(&sc, m[i].id, m[i].role, m[i].ts, strcmp(m[i].role, "summary") ? 0 : m[i].seq - 1);
	op_ok(&sc, &r1, NULL, NULL, T0 + 10 * STEP_US + 1, NULL);
	for (size_t i = 10; i < 15; i++)
		add(&sc, m[i].id, m[i].role, m[i].ts, strcmp(m[i].role, "summary") ? 0 : m[i].seq - 1);
	{
		/* The op's events get their timestamps from op_append: now_us + index. */
		int64_t seqs[2];
		op_ok(&sc, &r2, "u6:user,t2:tool", NULL, T0 + 16 * STEP_US - 1, seqs);
		cr_assert_eq(seqs[0], 16);
		cr_assert_eq(seqs[1], 17);
		m[15].ts = T0 + 16 * STEP_US - 1;
		m[16].ts = T0 + 16 * STEP_US;
	}
	assert_head(&sc, 17, 17, 13, 8);

	for (int newest = 0; newest < 2; newest++)
		for (size_t f = 0; f < sizeof(flag_sets) / sizeof(flag_sets[0]); f++)
			for (int hidden = 0; hidden < 2; hidden++)
				for (size_t l = 0; l < sizeof(limits) / sizeof(limits[0]); l++)
					for (size_t g = 0; g < 2; g++)
						for (int t = 0; t < 2; t++)
							for (size_t ro = 0; ro < sizeof(roles) / sizeof(roles[0]); ro++) {
		memd_event_query q = {
			.flags = flag_sets[f] | (newest ? MEMD_EVQ_NEWEST : 0) |
				 (hidden ? MEMD_EVQ_INCLUDE_HIDDEN : 0),
			.limit = limits[l], .after_seq = ranges[g][0], .before_seq = ranges[g][1],
			.after_time_us = t ? T0 + 5 * STEP_US : 0, .roles = roles[ro]
		};
		model_ids(m, MODEL_N, &q, want, sizeof(want));
		ids_of(&sc, &q, got, sizeof(got));
		cr_assert_str_eq(got, want,
				 "flags 0x%x limit %u after_seq %lld before_seq %lld after_time %d "
				 "roles 0x%x: got '%s', expected '%s'",
				 q.flags, q.limit, (long long)q.after_seq, (long long)q.before_seq, t,
				 q.roles, got, want);
		checked++;
	}
	cr_assert_gt(checked, 0);

	/* With INCLUDE_HIDDEN every event says whether and why it is hidden. */
	{
		memd_event_query q = { .flags = MEMD_EVQ_INCLUDE_HIDDEN };
		conf_events l = { 0 };
		int32_t r = conf_events_load_q(st, &sc, &q, &l);

		cr_assert_eq(r, 0, "%s", st->err.msg);
		cr_assert_eq(l.n, MODEL_N);
		for (size_t i = 0; i < l.n; i++) {
			const char *by = !m[i].hidden ? NULL : m[i].seq < 14 ? "r1" : "r2";
			cr_assert_eq(l.v[i].hidden_us != 0, m[i].hidden, "%s hidden_us %lld",
				     l.v[i].id, (long long)l.v[i].hidden_us);
			conf_assert_str_or_null(l.v[i].hidden_by, by, l.v[i].id);
			cr_assert_eq(l.v[i].hidden_kind, m[i].hidden ? MEMD_OP_REWIND : 0u);
		}
		conf_events_clear(&l);
	}
}

Test(transcripts, roles_mask_each_role)
{
	memd_scope sc = conf_scope(APP, USER, "s");
	static const struct {
		uint32_t roles;
		const char *want;
	} cases[] = {
		{ MEMD_ROLE_USER, "u" },
		{ MEMD_ROLE_ASSISTANT, "a" },
		{ MEMD_ROLE_SYSTEM, "y" },
		{ MEMD_ROLE_TOOL, "t" },
		{ MEMD_ROLE_SUMMARY, "s" },
		{ MEMD_ROLE_USER | MEMD_ROLE_TOOL, "u,t" },
		{ MEMD_ROLE_USER | MEMD_ROLE_ASSISTANT | MEMD_ROLE_SYSTEM | MEMD_ROLE_TOOL |
			  MEMD_ROLE_SUMMARY, "u,a,y,t,s" },
		{ 0, "u,a,y,t,s" },
	};
	char got[IDS_MAX];

	session_ok(USER, "s", T0, NULL);
	add(&sc, "u", "user", T0 + 1, 0);
	add(&sc, "a", "assistant", T0 + 2, 0);
	add(&sc, "y", "system", T0 + 3, 0);
	add(&sc, "t", "tool", T0 + 4, 0);
	add(&sc, "s", "summary", T0 + 5, 4);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memd_event_query q = { .roles = cases[i].roles };
		ids_of(&sc, &q, got, sizeof(got));
		cr_assert_str_eq(got, cases[i].want, "roles 0x%x: '%s'", cases[i].roles, got);
		q.flags = MEMD_EVQ_NEWEST;
		q.limit = 1;
		ids_of(&sc, &q, got, sizeof(got));
		cr_assert_str_eq(got, strrchr(cases[i].want, ',') ? strrchr(cases[i].want, ',') + 1
								  : cases[i].want,
				 "roles 0x%x newest 1: '%s'", cases[i].roles, got);
	}
}

/* ---- the feed --------------------------------------------------------- */

#define FEED_MAX_KEYS 64

/* What a feed consumer (an index) holds: the visible (session, id) pairs,
 * built by applying records in order. */
typedef struct consumer {
	char keys[FEED_MAX_KEYS][96];
	size_t n;
	int64_t at;     /* the last position applied */
} consumer;

static void consumer_del(consumer *c, const char *key)
{
	for (size_t i = 0; i < c->n; i++)
		if (strcmp(c->keys[i], key) == 0) {
			memmove(c->keys[i], c->keys[c->n - 1], sizeof(c->keys[i]));
			c->n--;
			return;
		}
}

static void consumer_apply(consumer *c, const conf_feed_rec *r)
{
	char key[96];

	cr_assert_gt(r->position, c->at, "feed position %lld after %lld", (long long)r->position,
		     (long long)c->at);
	c->at = r->position;
	if (r->kind == MEMD_FEED_EVENT || r->kind == MEMD_FEED_HIDE) {
		cr_assert_not_null(r->event.id, "a record of kind %u without its event", r->kind);
		cr_assert_gt(r->event.seq, 0);
		snprintf(key, sizeof(key), "%s/%s", r->session, r->event.id);
		consumer_del(c, key);
		if (r->kind == MEMD_FEED_EVENT) {
			cr_assert_lt(c->n, FEED_MAX_KEYS);
			snprintf(c->keys[c->n++], sizeof(c->keys[0]), "%s", key);
		}
	} else if (r->kind == MEMD_FEED_DELETE_SESSION) {
		size_t len;
		snprintf(key, sizeof(key), "%s/", r->session);
		len = strlen(key);
		for (size_t i = c->n; i > 0; i--)
			if (strncmp(c->keys[i - 1], key, len) == 0)
				consumer_del(c, c->keys[i - 1]);
	}
}

/* Read the feed after c->at and apply it; returns the records read. */
static conf_feed consumer_follow(consumer *c)
{
	conf_feed f = { 0 };
	int32_t r = conf_feed_read(st, c->at, CONF_FEED_ALL, &f);

	cr_assert_eq(r, 0, "feed_read: %s", st->err.msg);
	for (size_t i = 0; i < f.n; i++)
		consumer_apply(c, &f.v[i]);
	return f;
}

static int key_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* c holds exactly the visible events of sessions names[0..n). */
static void consumer_assert(consumer *c, const char *const *names, size_t n, const char *what)
{
	char want[FEED_MAX_KEYS][96];
	size_t k = 0;

	for (size_t s = 0; s < n; s++) {
		memd_scope sc = conf_scope(APP, USER, names[s]);
		memd_event_query q = { 0 };
		conf_events l = { 0 };
		int32_t r = conf_events_load_q(st, &sc, &q, &l);

		if (r == MEMD_ENOTFOUND)
			continue;
		cr_assert_eq(r, 0, "%s", st->err.msg);
		for (size_t i = 0; i < l.n; i++)
			snprintf(want[k++], sizeof(want[0]), "%s/%s", names[s], l.v[i].id);
		conf_events_clear(&l);
	}
	qsort(want, k, sizeof(want[0]), key_cmp);
	qsort(c->keys, c->n, sizeof(c->keys[0]), key_cmp);
	cr_assert_eq(c->n, k, "%s: the feed leaves %zu events, %zu are visible", what, c->n, k);
	for (size_t i = 0; i < k; i++)
		cr_assert_str_eq(c->keys[i], want[i], "%s: %s vs %s", what, c->keys[i], want[i]);
}

/* Both a consumer that follows the feed step by step and one that reads
 * it from the start end with the visible events. */
static void feed_check(consumer *follower, const char *what)
{
	static const char *const names[] = { "s", "other" };
	consumer fresh = { .n = 0 };
	conf_feed f = consumer_follow(follower);

	conf_feed_clear(&f);
	consumer_assert(follower, names, 2, what);
	f = consumer_follow(&fresh);
	conf_feed_clear(&f);
	consumer_assert(&fresh, names, 2, what);
}

static size_t count_kind(const conf_feed *f, uint32_t kind, const char *session, const char *id)
{
	size_t n = 0;
	for (size_t i = 0; i < f->n; i++)
		if (f->v[i].kind == kind && conf_str_eq(f->v[i].session, session) &&
		    (!id || conf_str_eq(f->v[i].event.id, id)))
			n++;
	return n;
}

Test(transcripts, feed_hide_records_and_events_again_on_undo)
{
	memd_scope sc = conf_scope(APP, USER, "s");
	memd_scope other = conf_scope(APP, USER, "other");
	memd_transcript_op r1 = op_rec(MEMD_OP_REWIND, "r1", 3, NULL);
	memd_transcript_op u1 = op_rec(MEMD_OP_UNDO, "u1", 0, "r1");
	memd_transcript_op cl = op_rec(MEMD_OP_CLEAR, "cl", 1, NULL);
	consumer follower = { .n = 0 };
	conf_feed f;
	int64_t head;
	const int64_t now = T0 + 100 * STEP_US;

	session_ok(USER, "s", T0, NULL);
	session_ok(USER, "other", T0, NULL);
	conf_append_simple(st, &sc, "e", 1, 6, T0 + STEP_US);
	conf_append_simple(st, &other, "o", 1, 2, T0 + STEP_US);
	feed_check(&follower, "after the appends");

	/* A rewind: one HIDE per hidden event (e3..e6), then the new event,
	 * all after every earlier position. */
	head = follower.at;
	op_ok(&sc, &r1, "n1:user", NULL, now, NULL);
	f = consumer_follow(&follower);
	cr_assert_eq(count_kind(&f, MEMD_FEED_HIDE, "s", NULL), 4, "HIDE records after a rewind");
	for (int i = 3; i <= 6; i++) {
		char id[8];
		snprintf(id, sizeof(id), "e%d", i);
		cr_assert_eq(count_kind(&f, MEMD_FEED_HIDE, "s", id), 1, "HIDE of %s", id);
	}
	cr_assert_eq(count_kind(&f, MEMD_FEED_EVENT, "s", "n1"), 1);
	cr_assert_eq(f.n, 5, "%zu records after a rewind of 4 with 1 event", f.n);
	for (size_t i = 0; i < f.n; i++) {
		cr_assert_gt(f.v[i].position, head);
		conf_assert_str_or_null(f.v[i].app, APP, "app");
		conf_assert_str_or_null(f.v[i].user, USER, "user");
		if (f.v[i].kind == MEMD_FEED_HIDE)
			cr_assert_eq(f.v[i].event.seq, f.v[i].event.id[1] - '0',
				     "HIDE of %s carries seq %lld", f.v[i].event.id,
				     (long long)f.v[i].event.seq);
		else
			cr_assert_eq(i, f.n - 1, "the op's event comes after the hides");
	}
	conf_feed_clear(&f);
	feed_check(&follower, "after the rewind");

	/* Its undo: e3..e6 come back as new EVENT records, n1 gets a HIDE. */
	head = follower.at;
	op_ok(&sc, &u1, NULL, NULL, now + STEP_US, NULL);
	f = consumer_follow(&follower);
	cr_assert_eq(count_kind(&f, MEMD_FEED_EVENT, "s", NULL), 4, "EVENT records after an undo");
	cr_assert_eq(count_kind(&f, MEMD_FEED_HIDE, "s", "n1"), 1);
	cr_assert_eq(f.n, 5);
	for (size_t i = 0; i < f.n; i++)
		cr_assert_gt(f.v[i].position, head);
	conf_feed_clear(&f);
	feed_check(&follower, "after the undo");

	/* A clear, then the other session's delete. */
	op_ok(&sc, &cl, NULL, NULL, now + 2 * STEP_US, NULL);
	feed_check(&follower, "after a clear");
	cr_assert_eq(conf_session_delete(st, APP, USER, "other"), 0, "%s", st->err.msg);
	feed_check(&follower, "after a session delete");
	add(&sc, "late", "user", now + 3 * STEP_US, 0);
	feed_check(&follower, "after a later append");
	cr_assert_eq(conf_session_delete(st, APP, USER, "s"), 0, "%s", st->err.msg);
	feed_check(&follower, "after deleting the rewound session");
}

/* ---- undo ------------------------------------------------------------- */

Test(transcripts, undo_reverses_a_rewind)
{
	memd_scope sc = conf_scope(APP, USER, "s");
	memd_transcript_op r1 = op_rec(MEMD_OP_REWIND, "r1", 3, NULL);
	memd_transcript_op bad = op_rec(MEMD_OP_UNDO, "x0", 0, "nope");
	memd_transcript_op x1 = op_rec(MEMD_OP_UNDO, "x1", 0, "r1");
	memd_transcript_op x2 = op_rec(MEMD_OP_UNDO, "x2", 0, "r1");
	memd_append_result res;
	conf_operation o;
	const int64_t now = T0 + 100 * STEP_US;

	session_ok(USER, "s", T0, NULL);
	add(&sc, "u1", "user", T0 + 1, 0);
	add(&sc, "a1", "assistant", T0 + 2, 0);
	add(&sc, "s1", "summary", T0 + 3, 2);
	add(&sc, "u2", "user", T0 + 4, 0);
	add(&sc, "a2", "assistant", T0 + 5, 0);
	res = op_ok(&sc, &r1, "u2b:user", NULL, now, NULL);
	cr_assert_eq(res.hidden_count, 3);
	assert_head(&sc, 6, 6, 0, 3);

	/* An unknown target: ENOTFOUND, nothing written. */
	cr_assert_eq(op_append(&sc, &bad, NULL, NULL, -1, now + 1, NULL, NULL), MEMD_ENOTFOUND,
		     "undo of an unknown operation: %s", st->err.msg);
	assert_head(&sc, 6, 6, 0, 3);

	res = op_ok(&sc, &x1, NULL, NULL, now + STEP_US, NULL);
	cr_assert_eq(res.version, 7);
	cr_assert_eq(res.unhidden_count, 3);
	cr_assert_eq(res.hidden_count, 1);
	assert_visible(&sc, "u1,a1,s1,u2,a2");
	assert_head(&sc, 7, 6, 3, 4);
	assert_hidden(&sc, "u2", 0, NULL, 0);
	assert_hidden(&sc, "s1", 0, NULL, 0);
	assert_hidden(&sc, "u2b", now + STEP_US, "x1", MEMD_OP_UNDO);

	o = op_get_ok(&sc, "r1");
	conf_assert_str_or_null(o.o.undone_by, "x1", "undone_by of r1");
	conf_operation_clear(&o);
	o = op_get_ok(&sc, "x1");
	cr_assert_eq(o.o.kind, MEMD_OP_UNDO);
	conf_assert_str_or_null(o.o.undo_of, "r1", "undo_of");
	cr_assert_eq(o.o.version, 7);
	cr_assert_eq(o.o.hidden_count, 1);
	cr_assert_eq(o.o.unhidden_count, 3);
	cr_assert_eq(o.o.created_us, now + STEP_US);
	conf_operation_clear(&o);

	/* Undone twice: ECONFLICT, nothing written. */
	cr_assert_eq(op_append(&sc, &x2, NULL, NULL, -1, now + 2 * STEP_US, NULL, NULL),
		     MEMD_ECONFLICT, "a second undo: %s", st->err.msg);
	assert_head(&sc, 7, 6, 3, 4);
	cr_assert_eq(conf_operation_get(st, &sc, "x2", &o), MEMD_ENOTFOUND);
}

Test(transcripts, undo_after_a_later_append_conflicts)
{
	memd_scope sc = conf_scope(APP, USER, "s");
	memd_transcript_op r1 = op_rec(MEMD_OP_REWIND, "r1", 2, NULL);
	memd_transcript_op x1 = op_rec(MEMD_OP_UNDO, "x1", 0, "r1");
	conf_operation o = { 0 };

	session_ok(USER, "s", T0, NULL);
	conf_append_simple(st, &sc, "e", 1, 4, T0 + 1);
	op_ok(&sc, &r1, NULL, NULL, T0 + STEP_US, NULL);
	add(&sc, "later", "user", T0 + 2 * STEP_US, 0);
	cr_assert_eq(op_append(&sc, &x1, NULL, NULL, -1, T0 + 3 * STEP_US, NULL, NULL),
		     MEMD_ECONFLICT, "undo after a later append: %s", st->err.msg);
	assert_visible(&sc, "e1,later");
	assert_head(&sc, 3, 5, 0, 2);
	o = op_get_ok(&sc, "r1");
	conf_assert_str_or_null(o.o.undone_by, NULL, "undone_by");
	conf_operation_clear(&o);
}

Test(transcripts, undo_of_a_clear_and_of_a_rewrite)
{
	memd_scope sc = conf_scope(APP, USER, "s");
	memd_transcript_op rw = op_rec(MEMD_OP_REWRITE, "rw", 1, NULL);
	memd_transcript_op x1 = op_rec(MEMD_OP_UNDO, "x1", 0, "rw");
	memd_transcript_op cl = op_rec(MEMD_OP_CLEAR, "cl", 1, NULL);
	memd_transcript_op x2 = op_rec(MEMD_OP_UNDO, "x2", 0, "cl");
	memd_append_result res;

	session_ok(USER, "s", T0, NULL);
	conf_append_simple(st, &sc, "e", 1, 3, T0 + 1);
	op_ok(&sc, &rw, "n1:user,n2:assistant", NULL, T0 + STEP_US, NULL);
	assert_visible(&sc, "n1,n2");
	res = op_ok(&sc, &x1, NULL, NULL, T0 + 2 * STEP_US, NULL);
	cr_assert_eq(res.unhidden_count, 3);
	cr_assert_eq(res.hidden_count, 2);
	assert_visible(&sc, "e1,e2,e3");
	assert_hidden(&sc, "n2", T0 + 2 * STEP_US, "x1", MEMD_OP_UNDO);
	assert_head(&sc, 3, 5, 0, 3);

	op_ok(&sc, &cl, NULL, NULL, T0 + 3 * STEP_US, NULL);
	assert_head(&sc, 4, 5, 0, 0);
	res = op_ok(&sc, &x2, NULL, NULL, T0 + 4 * STEP_US, NULL);
	cr_assert_eq(res.unhidden_count, 3);
	cr_assert_eq(res.hidden_count, 0);
	assert_visible(&sc, "e1,e2,e3");
	assert_head(&sc, 5, 5, 0, 3);
}

/* ---- refusals, replays, versions -------------------------------------- */

Test(transcripts, op_id_clash_conflicts)
{
	memd_scope sc = conf_scope(APP, USER, "s");
	memd_scope sc2 = conf_scope(APP, USER, "s2");
	memd_transcript_op a = op_rec(MEMD_OP_REWIND, "same", 3, NULL);
	memd_transcript_op b = op_rec(MEMD_OP_CLEAR, "same", 1, NULL);

	session_ok(USER, "s", T0, NULL);
	session_ok(USER, "s2", T0, NULL);
	conf_append_simple(st, &sc, "e", 1, 4, T0 + 1);
	conf_append_simple(st, &sc2, "e", 1, 4, T0 + 1);
	op_ok(&sc, &a, NULL, NULL, T0 + STEP_US, NULL);
	/* The same id again (another kind, with events): nothing written. */
	cr_assert_eq(op_append(&sc, &b, "x:user", NULL, -1, T0 + 2 * STEP_US, NULL, NULL),
		     MEMD_ECONFLICT, "an op id used twice: %s", st->err.msg);
	cr_assert_eq(op_append(&sc, &a, NULL, NULL, -1, T0 + 2 * STEP_US, NULL, NULL),
		     MEMD_ECONFLICT, "a rewind retried without events: %s", st->err.msg);
	assert_visible(&sc, "e1,e2");
	assert_head(&sc, 2, 4, 0, 2);
	/* Op ids are per session. */
	op_ok(&sc2, &b, NULL, NULL, T0 + 3 * STEP_US, NULL);
	assert_visible(&sc2, "");
}

Test(transcripts, expected_version_covers_the_op)
{
	memd_scope sc = conf_scope(APP, USER, "s");
	memd_transcript_op a = op_rec(MEMD_OP_REWIND, "r", 2, NULL);
	memd_append_result res = { 0 };
	conf_operation o = { 0 };

	session_ok(USER, "s", T0, "{\"k\": 1}");
	conf_append_simple(st, &sc, "e", 1, 3, T0 + 1);
	cr_assert_eq(op_append(&sc, &a, "n:user", "{\"k\": 2}", 0, T0 + STEP_US, NULL, &res),
		     MEMD_ECONFLICT, "a stale expected_version: %s", st->err.msg);
	assert_visible(&sc, "e1,e2,e3");
	assert_head(&sc, 1, 3, 0, 3);
	conf_assert_state(st, &sc, "{\"k\": 1}");
	cr_assert_eq(conf_operation_get(st, &sc, "r", &o), MEMD_ENOTFOUND);

	cr_assert_eq(op_append(&sc, &a, "n:user", "{\"k\": 2}", 1, T0 + STEP_US, NULL, &res), 0,
		     "%s", st->err.msg);
	cr_assert_eq(res.version, 2);
	assert_visible(&sc, "e1,n");
	conf_assert_state(st, &sc, "{\"k\": 2}");
}

Test(transcripts, replayed_op_append_writes_nothing)
{
	memd_scope sc = conf_scope(APP, USER, "s");
	memd_transcript_op a = op_rec(MEMD_OP_REWIND, "r", 2, NULL);
	memd_append_result res = { 0 };
	int64_t seqs[2] = { 0 }, again[2] = { 0 };
	conf_operations ops = { 0 };
	int64_t feed_before;

	session_ok(USER, "s", T0, NULL);
	conf_append_simple(st, &sc, "e", 1, 3, T0 + 1);
	op_ok(&sc, &a, "n1:user,n2:assistant", "{\"k\": 1}", T0 + STEP_US, seqs);
	feed_before = conf_feed_last(st);

	/* The same append again, with the expected version it had: replayed. */
	cr_assert_eq(op_append(&sc, &a, "n1:user,n2:assistant", "{\"k\": 1}", 1,
			       T0 + 2 * STEP_US, again, &res), 0, "%s", st->err.msg);
	cr_assert_eq(res.flags & MEMD_APPEND_REPLAYED, MEMD_APPEND_REPLAYED);
	cr_assert_eq(again[0], seqs[0]);
	cr_assert_eq(again[1], seqs[1]);
	cr_assert_eq(res.version, 2);
	assert_head(&sc, 2, 5, 0, 3);
	assert_visible(&sc, "e1,n1,n2");
	cr_assert_eq(conf_feed_last(st), feed_before, "a replay added feed records");
	cr_assert_eq(conf_operation_list(st, &sc, 0, &ops), 0, "%s", st->err.msg);
	cr_assert_eq(ops.n, 1);
	conf_operations_clear(&ops);
}

Test(transcripts, bad_ops_are_refused)
{
	memd_scope sc = conf_scope(APP, USER, "s");
	const memd_transcript_op bad[] = {
		op_rec(99, "k", 1, NULL),
		op_rec(MEMD_OP_REWIND, NULL, 1, NULL),
		op_rec(MEMD_OP_REWIND, "", 1, NULL),
		op_rec(MEMD_OP_REWIND, "z", 0, NULL),
		op_rec(MEMD_OP_CLEAR, "z", -3, NULL),
		op_rec(MEMD_OP_UNDO, "z", 0, NULL),
	};

	session_ok(USER, "s", T0, NULL);
	conf_append_simple(st, &sc, "e", 1, 3, T0 + 1);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int32_t r = op_append(&sc, &bad[i], NULL, NULL, -1, T0 + STEP_US, NULL, NULL);
		cr_assert_eq(r, MEMD_EINVAL, "bad op %zu: %d (%s)", i, r, st->err.msg);
		cr_assert(st->err.msg[0], "bad op %zu: no message", i);
	}
	assert_visible(&sc, "e1,e2,e3");
	assert_head(&sc, 1, 3, 0, 3);
}

Test(transcripts, seqs_are_never_reused)
{
	memd_scope sc = conf_scope(APP, USER, "s");
	int64_t last = 0;

	session_ok(USER, "s", T0, NULL);
	for (int round = 0; round < 4; round++) {
		char id[16], prefix[16], spec[32];
		memd_transcript_op op = op_rec(round % 2 ? MEMD_OP_CLEAR : MEMD_OP_REWIND, id,
					       round % 2 ? 1 : last + 2, NULL);
		int64_t seqs[1];

		snprintf(prefix, sizeof(prefix), "r%de", round);
		conf_append_simple(st, &sc, prefix, 1, 3, T0 + round * STEP_US);
		snprintf(id, sizeof(id), "op%d", round);
		snprintf(spec, sizeof(spec), "r%dn:tool", round);
		op_ok(&sc, &op, spec, NULL, T0 + round * STEP_US + 10, seqs);
		cr_assert_eq(seqs[0], last + 4, "round %d: seq %lld after %lld", round,
			     (long long)seqs[0], (long long)last);
		last = seqs[0];
	}
	/* Every seq of the session is distinct, gapless and last_seq is the top. */
	{
		memd_event_query q = { .flags = MEMD_EVQ_INCLUDE_HIDDEN };
		conf_events l = { 0 };
		conf_session s;

		cr_assert_eq(conf_events_load_q(st, &sc, &q, &l), 0, "%s", st->err.msg);
		s = session_get_ok(&sc);
		cr_assert_eq(l.n, 16);
		for (size_t i = 0; i < l.n; i++)
			cr_assert_eq(l.v[i].seq, (int64_t)i + 1);
		cr_assert_eq(s.last_seq, 16);
		conf_session_clear(&s);
		conf_events_clear(&l);
	}
	assert_visible(&sc, "r3n");
}

/* ---- state history ---------------------------------------------------- */

typedef struct want_change {
	int64_t version, seq;
	const char *key, *old_json, *new_json;
	int64_t at_us;
	const char *operation;
} want_change;

static void assert_changes(const conf_state_changes *l, const want_change *w, size_t n,
			   const char *what)
{
	if (l->n != n)
		for (size_t i = 0; i < l->n; i++)
			cr_log_error("%s: #%zu: version %lld seq %lld %s: %s -> %s", what, i,
				     (long long)l->v[i].c.version, (long long)l->v[i].c.seq,
				     l->v[i].c.key, l->v[i].c.old_json ? l->v[i].c.old_json : "-",
				     l->v[i].c.new_json ? l->v[i].c.new_json : "-");
	cr_assert_eq(l->n, n, "%s: %zu changes, expected %zu", what, l->n, n);
	for (size_t i = 0; i < n; i++) {
		const memd_state_change *c = &l->v[i].c;
		cr_assert_eq(c->version, w[i].version, "%s #%zu version %lld", what, i,
			     (long long)c->version);
		cr_assert_eq(c->seq, w[i].seq, "%s #%zu seq %lld", what, i, (long long)c->seq);
		cr_assert_str_eq(c->key, w[i].key, "%s #%zu key %s", what, i, c->key);
		if (w[i].old_json)
			cr_assert(c->old_json && conf_json_equal(c->old_json, w[i].old_json),
				  "%s #%zu %s old %s, expected %s", what, i, c->key,
				  c->old_json ? c->old_json : "(null)", w[i].old_json);
		else
			conf_assert_str_or_null(c->old_json, NULL, c->key);
		if (w[i].new_json)
			cr_assert(c->new_json && conf_json_equal(c->new_json, w[i].new_json),
				  "%s #%zu %s new %s, expected %s", what, i, c->key,
				  c->new_json ? c->new_json : "(null)", w[i].new_json);
		else
			conf_assert_str_or_null(c->new_json, NULL, c->key);
		cr_assert_eq(c->at_us, w[i].at_us, "%s #%zu at_us", what, i);
		conf_assert_str_or_null(c->operation, w[i].operation, "operation");
	}
}

static void history_ok(const memd_scope *sc, memd_state_history_query q,
		       conf_state_changes *out)
{
	int32_t r = conf_state_history(st, sc, &q, out);
	cr_assert_eq(r, 0, "state_history: %s", st->err.msg);
}

Test(transcripts, state_history_records_every_key)
{
	memd_scope sc = conf_scope(APP, USER, "s");
	memd_scope sc2 = conf_scope(APP, USER, "s2");
	memd_transcript_op rw = op_rec(MEMD_OP_REWIND, "rw", 2, NULL);
	conf_append_opts o = { 0 };
	conf_state_changes l = { 0 };
	const int64_t t1 = T0 + STEP_US, t2 = T0 + 2 * STEP_US, t3 = T0 + 3 * STEP_US;
	static const want_change all[] = {
		{ 0, 0, "a", NULL, "1", T0, NULL },
		{ 0, 0, "app:x", NULL, "\"y\"", T0, NULL },
		{ 1, 2, "a", "1", "{\"n\": [1, 2]}", T0 + STEP_US, NULL },
		{ 1, 2, "b", NULL, "true", T0 + STEP_US, NULL },
		{ 1, 2, "user:u", NULL, "\"v\"", T0 + STEP_US, NULL },
		{ 2, 2, "app:x", "\"y\"", NULL, T0 + 2 * STEP_US, NULL },
		{ 2, 2, "b", "true", "false", T0 + 2 * STEP_US, NULL },
		{ 3, 3, "a", "{\"n\": [1, 2]}", NULL, T0 + 3 * STEP_US, "rw" },
	};

	session_ok(USER, "s", T0, "{\"a\": 1, \"app:x\": \"y\"}");
	session_ok(USER, "s2", T0, NULL);
	{
		memd_event *e[2] = { ev("e1", "user", t1, 0), ev("e2", "assistant", t1, 0) };
		int64_t seqs[2];
		o = (conf_append_opts){ .now_us = t1,
					.delta = "{\"a\": {\"n\": [1, 2]}, \"b\": true, \"user:u\": \"v\"}" };
		cr_assert_eq(conf_append(st, &sc, e, 2, &o, seqs, NULL), 0, "%s", st->err.msg);
		conf_event_free(e[0]);
		conf_event_free(e[1]);
	}
	/* A state-only append: seq is last_seq after it. */
	o = (conf_append_opts){ .now_us = t2, .delta = "{\"app:x\": null, \"b\": false}" };
	cr_assert_eq(conf_append(st, &sc, NULL, 0, &o, NULL, NULL), 0, "%s", st->err.msg);
	/* Another session's changes of shared keys are its own history. */
	o = (conf_append_opts){ .now_us = t2, .delta = "{\"user:u\": \"w\", \"c\": 1}" };
	cr_assert_eq(conf_append(st, &sc2, NULL, 0, &o, NULL, NULL), 0, "%s", st->err.msg);
	op_ok(&sc, &rw, "n:user", "{\"a\": null}", t3, NULL);

	history_ok(&sc, (memd_state_history_query){ 0 }, &l);
	assert_changes(&l, all, sizeof(all) / sizeof(all[0]), "the whole history");
	conf_state_changes_clear(&l);

	/* Keyset pages of 3. */
	{
		memd_state_history_query q = { .limit = 3 };
		size_t at = 0;
		for (;;) {
			history_ok(&sc, q, &l);
			cr_assert_leq(l.n, 3u);
			if (l.n == 0)
				break;
			assert_changes(&l, all + at, l.n, "a page");
			at += l.n;
			/* The page's last change is the next page's cursor:
			 * copy it out before clearing. */
			q.after_version = l.v[l.n - 1].c.version;
			{
				static char key[64];
				snprintf(key, sizeof(key), "%s", l.v[l.n - 1].c.key);
				q.after_key = key;
			}
			conf_state_changes_clear(&l);
		}
		cr_assert_eq(at, sizeof(all) / sizeof(all[0]), "pages gave %zu changes", at);
	}
	/* from_seq: only the changes of appends that left last_seq >= it. */
	history_ok(&sc, (memd_state_history_query){ .from_seq = 2 }, &l);
	assert_changes(&l, all + 2, 6, "from_seq 2");
	conf_state_changes_clear(&l);
	history_ok(&sc, (memd_state_history_query){ .from_seq = 3 }, &l);
	assert_changes(&l, all + 7, 1, "from_seq 3");
	conf_state_changes_clear(&l);
	/* after_version alone (no key): strictly after that version. */
	history_ok(&sc, (memd_state_history_query){ .after_version = 1 }, &l);
	assert_changes(&l, all + 5, 3, "after version 1");
	conf_state_changes_clear(&l);

	history_ok(&sc2, (memd_state_history_query){ 0 }, &l);
	{
		static const want_change w2[] = {
			{ 1, 0, "c", NULL, "1", T0 + 2 * STEP_US, NULL },
			{ 1, 0, "user:u", "\"v\"", "\"w\"", T0 + 2 * STEP_US, NULL },
		};
		assert_changes(&l, w2, 2, "the other session");
	}
	conf_state_changes_clear(&l);

	{
		memd_scope none = conf_scope(APP, USER, "nope");
		memd_state_history_query q = { 0 };
		cr_assert_eq(conf_state_history(st, &none, &q, &l), MEMD_ENOTFOUND);
		conf_operations ops = { 0 };
		cr_assert_eq(conf_operation_list(st, &none, 0, &ops), MEMD_ENOTFOUND);
	}
}

Test(transcripts, state_expect_changes_only_unchanged_keys)
{
	memd_scope sc = conf_scope(APP, USER, "s");
	memd_transcript_op op = op_rec(MEMD_OP_REWIND, "r", 1, NULL);
	memd_transcript_op op2 = op_rec(MEMD_OP_CLEAR, "c", 1, NULL);
	char *not_restored = NULL;
	memd_text_sink sink = conf_text_sink(&not_restored);
	conf_state_changes l = { 0 };
	const int64_t now = T0 + 10 * STEP_US;

	session_ok(USER, "s", T0, "{\"app:k\": 1, \"user:j\": 3, \"s\": 0}");
	conf_append_simple(st, &sc, "e", 1, 2, T0 + 1);
	op.state_expect_json = "{\"app:k\": 1, \"user:j\": 4, \"app:absent\": null}";
	op.not_restored = &sink;
	op_ok(&sc, &op, NULL, "{\"app:k\": 0, \"user:j\": 5, \"app:absent\": 7, \"s\": 1}", now,
	      NULL);
	cr_assert_not_null(not_restored, "not_restored got nothing");
	cr_assert(conf_json_equal(not_restored, "[\"user:j\"]"), "not_restored %s", not_restored);
	conf_assert_state(st, &sc, "{\"app:k\": 0, \"user:j\": 3, \"app:absent\": 7, \"s\": 1}");
	/* Only the keys written are history. */
	history_ok(&sc, (memd_state_history_query){ .after_version = 0, .from_seq = 1 }, &l);
	{
		static const want_change w[] = {
			{ 2, 2, "app:absent", NULL, "7", T0 + 10 * STEP_US, "r" },
			{ 2, 2, "app:k", "1", "0", T0 + 10 * STEP_US, "r" },
			{ 2, 2, "s", "0", "1", T0 + 10 * STEP_US, "r" },
		};
		assert_changes(&l, w, 3, "an op with state_expect");
	}
	conf_state_changes_clear(&l);

	/* Every expected key as it is: all restored (an empty list or none). */
	free(not_restored);
	not_restored = NULL;
	op2.state_expect_json = "{\"app:k\": 0, \"user:gone\": null}";
	op2.not_restored = &sink;
	op_ok(&sc, &op2, NULL, "{\"app:k\": 2, \"user:gone\": null}", now + STEP_US, NULL);
	cr_assert(!not_restored || conf_json_equal(not_restored, "[]"), "not_restored %s",
		  not_restored);
	conf_assert_state(st, &sc, "{\"app:k\": 2, \"user:j\": 3, \"app:absent\": 7, \"s\": 1}");
	free(not_restored);
}

/* ---- session lists ---------------------------------------------------- */

static void assert_list(const memd_session_query *q, const char *want)
{
	conf_sessions l = { 0 };
	char got[IDS_MAX];
	size_t used = 0;
	int32_t r = conf_session_list_q(st, APP, USER, q, &l);

	cr_assert_eq(r, 0, "session_list: %s", st->err.msg);
	got[0] = '\0';
	for (size_t i = 0; i < l.n; i++)
		used += (size_t)snprintf(got + used, sizeof(got) - used, "%s%s", i ? "," : "",
					 l.v[i].id);
	cr_assert_str_eq(got, want, "flags 0x%x before (%lld, %s) after %lld: '%s', expected '%s'",
			 q->flags, (long long)q->before_created_us,
			 q->before_id ? q->before_id : "-", (long long)q->updated_after_us, got,
			 want);
	conf_sessions_clear(&l);
}

Test(transcripts, session_list_by_activity)
{
	/* (created, last activity): s1 (1, 200), s2 (2, 2), s3 (3, 100),
	 * s4 (4, 50), s5 (5, 200); another user's session is newest of all. */
	static const struct {
		const char *id;
		int64_t activity;
	} rows[] = { { "s1", 200 }, { "s2", 0 }, { "s3", 100 }, { "s4", 50 }, { "s5", 200 } };
	memd_session_query q;
	conf_sessions l = { 0 };

	for (size_t i = 0; i < 5; i++) {
		memd_scope sc = conf_scope(APP, USER, rows[i].id);
		session_ok(USER, rows[i].id, T0 + (int64_t)i + 1, NULL);
		if (rows[i].activity)
			add(&sc, "e", "user", T0 + rows[i].activity, 0);
	}
	session_ok(USER2, "x", T0 + 500, NULL);

	q = (memd_session_query){ .flags = MEMD_SQ_BY_ACTIVITY, .limit = 10 };
	assert_list(&q, "s5,s1,s3,s4,s2");
	q.limit = 2;
	assert_list(&q, "s5,s1");
	q.before_created_us = T0 + 200;
	q.before_id = "s1";
	assert_list(&q, "s3,s4");
	q.before_created_us = T0 + 50;
	q.before_id = "s4";
	assert_list(&q, "s2");
	q = (memd_session_query){ .flags = MEMD_SQ_BY_ACTIVITY, .limit = 10,
				  .updated_after_us = T0 + 50 };
	assert_list(&q, "s5,s1,s3");
	/* updated_after_us with the created order. */
	q = (memd_session_query){ .limit = 10, .updated_after_us = T0 + 50 };
	assert_list(&q, "s5,s3,s1");
	q = (memd_session_query){ .limit = 10 };
	assert_list(&q, "s5,s4,s3,s2,s1");

	/* message_count in listings. */
	q = (memd_session_query){ .flags = MEMD_SQ_BY_ACTIVITY, .limit = 1 };
	cr_assert_eq(conf_session_list_q(st, APP, USER, &q, &l), 0, "%s", st->err.msg);
	cr_assert_eq(l.n, 1);
	cr_assert_eq(l.v[0].message_count, 1);
	conf_sessions_clear(&l);
}

/* ---- deletes ---------------------------------------------------------- */

static void assert_no_trace(const memd_scope *sc, const char *op_id)
{
	conf_operations ops = { 0 };
	conf_state_changes l = { 0 };
	conf_operation o = { 0 };
	memd_state_history_query q = { 0 };

	cr_assert_eq(conf_operation_list(st, sc, 0, &ops), 0, "%s", st->err.msg);
	cr_assert_eq(ops.n, 0, "%zu operations of a deleted session", ops.n);
	cr_assert_eq(conf_operation_get(st, sc, op_id, &o), MEMD_ENOTFOUND);
	cr_assert_eq(conf_state_history(st, sc, &q, &l), 0, "%s", st->err.msg);
	cr_assert_eq(l.n, 0, "%zu state changes of a deleted session", l.n);
	conf_operations_clear(&ops);
}

Test(transcripts, deletes_remove_operations_and_history)
{
	memd_scope sc = conf_scope(APP, USER, "s");
	memd_scope sc2 = conf_scope(APP, USER2, "s");
	memd_transcript_op op = op_rec(MEMD_OP_REWIND, "r", 1, NULL);
	conf_operations ops = { 0 };

	session_ok(USER, "s", T0, "{\"k\": 1}");
	session_ok(USER2, "s", T0, "{\"k\": 1}");
	conf_append_simple(st, &sc, "e", 1, 2, T0 + 1);
	conf_append_simple(st, &sc2, "e", 1, 2, T0 + 1);
	op_ok(&sc, &op, NULL, "{\"k\": 2}", T0 + STEP_US, NULL);
	op_ok(&sc2, &op, NULL, "{\"k\": 2}", T0 + STEP_US, NULL);

	cr_assert_eq(conf_session_delete(st, APP, USER, "s"), 0, "%s", st->err.msg);
	session_ok(USER, "s", T0 + 2 * STEP_US, NULL);
	assert_no_trace(&sc, "r");
	/* The same op id is free again. */
	op_ok(&sc, &op, NULL, NULL, T0 + 3 * STEP_US, NULL);

	cr_assert_eq(conf_user_delete(st, APP, USER2), 0, "%s", st->err.msg);
	session_ok(USER2, "s", T0 + 2 * STEP_US, NULL);
	assert_no_trace(&sc2, "r");

	cr_assert_eq(conf_operation_list(st, &sc, 0, &ops), 0, "%s", st->err.msg);
	cr_assert_eq(ops.n, 1);
	conf_operations_clear(&ops);
}

Test(transcripts, operation_list_newest_first)
{
	memd_scope sc = conf_scope(APP, USER, "s");
	conf_operations ops = { 0 };
	static const char *const ids[] = { "o1", "o2", "o3", "o4" };

	session_ok(USER, "s", T0, NULL);
	for (int i = 0; i < 4; i++) {
		memd_transcript_op op = op_rec(MEMD_OP_REWIND, ids[i], 1, NULL);
		char spec[16];
		snprintf(spec, sizeof(spec), "e%d:user", i);
		op_ok(&sc, &op, spec, NULL, T0 + (i + 1) * STEP_US, NULL);
	}
	cr_assert_eq(conf_operation_list(st, &sc, 0, &ops), 0, "%s", st->err.msg);
	cr_assert_eq(ops.n, 4);
	for (int i = 0; i < 4; i++) {
		cr_assert_str_eq(ops.v[i].o.id, ids[3 - i]);
		cr_assert_eq(ops.v[i].o.version, 4 - i);
		cr_assert_eq(ops.v[i].o.first_seq, 4 - i);
		cr_assert_eq(ops.v[i].o.hidden_count, 3 - i ? 1 : 0);
	}
	conf_operations_clear(&ops);
	cr_assert_eq(conf_operation_list(st, &sc, 2, &ops), 0, "%s", st->err.msg);
	cr_assert_eq(ops.n, 2);
	cr_assert_str_eq(ops.v[1].o.id, "o3");
	conf_operations_clear(&ops);
}

Test(transcripts, durable_across_reopen)
{
	memd_scope sc = conf_scope(APP, USER, "s");
	memd_transcript_op op = op_rec(MEMD_OP_REWIND, "r", 2, NULL);
	conf_operation o = { 0 };
	conf_state_changes l = { 0 };

	if (!st->durable)
		cr_skip_test("the store is not durable");
	session_ok(USER, "s", T0, NULL);
	conf_append_simple(st, &sc, "e", 1, 3, T0 + 1);
	op_ok(&sc, &op, "n:user", "{\"k\": 1}", T0 + STEP_US, NULL);
	conf_reopen(st);
	assert_visible(&sc, "e1,n");
	assert_head(&sc, 2, 4, 0, 2);
	assert_hidden(&sc, "e2", T0 + STEP_US, "r", MEMD_OP_REWIND);
	o = op_get_ok(&sc, "r");
	cr_assert_eq(o.o.hidden_count, 2);
	conf_operation_clear(&o);
	history_ok(&sc, (memd_state_history_query){ 0 }, &l);
	cr_assert_eq(l.n, 1);
	conf_state_changes_clear(&l);
}

/* ---- cost ------------------------------------------------------------- */

#define BIG_EVENTS 3000
#define BIG_BATCH 300
#define SMALL_EVENTS 40
#define HIDE_N 10
#define WINDOW 10
#define WIDE_WINDOW 500u
/* Rows beyond those hidden or returned an op or a read may examine. */
#define ROWS_SLACK 24

/* rows_read of hiding the newest HIDE_N events of a session of n. */
static uint64_t rewind_cost(const char *session, int n)
{
	memd_scope sc = conf_scope(APP, USER, session);
	memd_transcript_op op = op_rec(MEMD_OP_REWIND, "cost", n - HIDE_N + 1, NULL);
	memd_append_result res;

	session_ok(USER, session, T0, NULL);
	for (int i = 0; i < n; i += BIG_BATCH)
		conf_append_simple(st, &sc, "e", i + 1, n - i < BIG_BATCH ? n - i : BIG_BATCH,
				   T0 + i);
	st->rows_read = 0;
	res = op_ok(&sc, &op, NULL, NULL, T0 + 10 * BIG_EVENTS, NULL);
	cr_assert_eq(res.hidden_count, HIDE_N);
	return st->rows_read;
}

Test(transcripts, rows_read_follow_the_rows_hidden_and_the_window)
{
	memd_scope sc = conf_scope(APP, USER, "big");
	uint64_t small = rewind_cost("small", SMALL_EVENTS);
	uint64_t big = rewind_cost("big", BIG_EVENTS);
	memd_event_query q = { .flags = MEMD_EVQ_NEWEST, .limit = WINDOW };
	memd_transcript_op deep = op_rec(MEMD_OP_REWIND, "deep", BIG_EVENTS / 3, NULL);
	char got[IDS_MAX], want[IDS_MAX];
	size_t used = 0;

	cr_assert_geq(big, HIDE_N, "rows_read %llu: the store does not count rows",
		      (unsigned long long)big);
	cr_assert_leq(big, 3 * HIDE_N + ROWS_SLACK,
		      "hiding %d events of %d examined %llu rows", HIDE_N, BIG_EVENTS,
		      (unsigned long long)big);
	cr_assert_leq(big, small + ROWS_SLACK / 2,
		      "hiding %d events examined %llu rows in a session of %d, %llu in one of %d",
		      HIDE_N, (unsigned long long)big, BIG_EVENTS, (unsigned long long)small,
		      SMALL_EVENTS);

	/* A NEWEST window right after a rewind, then after a deep one and
	 * new events, examines about the window. */
	st->rows_read = 0;
	ids_of(&sc, &q, got, sizeof(got));
	cr_assert_leq(st->rows_read, WINDOW + ROWS_SLACK, "a window after a rewind: %llu rows",
		      (unsigned long long)st->rows_read);
	for (int i = BIG_EVENTS - HIDE_N - WINDOW + 1; i <= BIG_EVENTS - HIDE_N; i++)
		used += (size_t)snprintf(want + used, sizeof(want) - used, "%se%d",
					 used ? "," : "", i);
	cr_assert_str_eq(got, want);

	op_ok(&sc, &deep, NULL, NULL, T0 + 11 * BIG_EVENTS, NULL);
	conf_append_simple(st, &sc, "n", 1, 3, T0 + 12 * BIG_EVENTS);
	st->rows_read = 0;
	ids_of(&sc, &q, got, sizeof(got));
	cr_assert_leq(st->rows_read, WINDOW + ROWS_SLACK, "a window after a deep rewind: %llu rows",
		      (unsigned long long)st->rows_read);
	used = 0;
	for (int i = BIG_EVENTS / 3 - (WINDOW - 3); i < BIG_EVENTS / 3; i++)
		used += (size_t)snprintf(want + used, sizeof(want) - used, "%se%d",
					 used ? "," : "", i);
	used += (size_t)snprintf(want + used, sizeof(want) - used, ",n1,n2,n3");
	cr_assert_str_eq(got, want);
	/* The session head read is cheap too, and message_count right. */
	assert_head(&sc, BIG_EVENTS / BIG_BATCH + 3, BIG_EVENTS + 3, 0, BIG_EVENTS / 3 - 1 + 3);

	/* Wide NEWEST windows (a store may find their start before reading
	 * them): the visible ones, then with the hidden ones. */
	{
		static const struct {
			uint32_t flags;
			const char *first, *last_before_n;
		} wide[] = {
			{ MEMD_EVQ_NEWEST, "e503", "e999" },
			{ MEMD_EVQ_NEWEST | MEMD_EVQ_INCLUDE_HIDDEN, "e2504", "e3000" },
		};
		for (size_t w = 0; w < sizeof(wide) / sizeof(wide[0]); w++) {
			memd_event_query wq = { .flags = wide[w].flags, .limit = WIDE_WINDOW };
			conf_events l = { 0 };

			cr_assert_eq(conf_events_load_q(st, &sc, &wq, &l), 0, "%s", st->err.msg);
			cr_assert_eq(l.n, WIDE_WINDOW, "a wide window of %zu events", l.n);
			cr_assert_str_eq(l.v[0].id, wide[w].first);
			cr_assert_str_eq(l.v[WIDE_WINDOW - 4].id, wide[w].last_before_n);
			cr_assert_str_eq(l.v[WIDE_WINDOW - 1].id, "n3");
			for (size_t i = 1; i < l.n; i++)
				cr_assert_gt(l.v[i].seq, l.v[i - 1].seq);
			conf_events_clear(&l);
		}
	}
}

#define HISTORY_APPENDS 150
#define HISTORY_TAIL 5

/* A rewind reads the state changes since its first hidden seq: that read
 * examines about the changes it returns, not the session's history. */
Test(transcripts, rows_read_of_state_history_from_seq)
{
	memd_scope sc = conf_scope(APP, USER, "s");
	conf_state_changes l = { 0 };
	memd_state_history_query q = { .from_seq = HISTORY_APPENDS - HISTORY_TAIL + 1 };

	session_ok(USER, "s", T0, NULL);
	for (int i = 1; i <= HISTORY_APPENDS; i++) {
		char id[16], delta[32];
		memd_event *e;
		conf_append_opts o = { .now_us = T0 + i, .delta = delta };
		int64_t seq;

		snprintf(id, sizeof(id), "e%d", i);
		snprintf(delta, sizeof(delta), "{\"k\": %d}", i);
		e = ev(id, "user", T0 + i, 0);
		cr_assert_eq(conf_append(st, &sc, &e, 1, &o, &seq, NULL), 0, "%s", st->err.msg);
		conf_event_free(e);
	}
	st->rows_read = 0;
	history_ok(&sc, q, &l);
	cr_assert_eq(l.n, HISTORY_TAIL);
	for (size_t i = 0; i < l.n; i++)
		cr_assert_eq(l.v[i].c.seq, HISTORY_APPENDS - HISTORY_TAIL + 1 + (int64_t)i);
	cr_assert_leq(st->rows_read, HISTORY_TAIL + ROWS_SLACK,
		      "state_history from_seq examined %llu rows for %d of %d changes",
		      (unsigned long long)st->rows_read, HISTORY_TAIL, HISTORY_APPENDS);
	conf_state_changes_clear(&l);
}
