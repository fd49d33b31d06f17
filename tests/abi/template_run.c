/* SPDX-License-Identifier: MIT */
/*
 * template_run PLUGIN.so: loads the out-of-tree template strategy
 * (plugins/template, built by template_test.sh against the installed
 * headers) through the loader and checks that it does its job: the newest
 * `turns` user turns with everything after each, summaries left out, read
 * through the reader page by page so that a long session costs no more
 * than a short one. The reader here follows the memd_reader contract
 * (strategy.h, store.h's memd_event_query) over an in-memory session and
 * counts the rows it hands out in call->rows_read, as stores do. Its
 * on_session_finalize leaves one closing note (a summary event covering
 * the last event, with the number of user turns) and nothing for an empty
 * session.
 *
 * Exit status 0 if every check passed; each failure is printed.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "plugins/loader.h"
#include "tokens/tokens.h"

#define SESSION_MAX 8192
#define OUT_MAX SESSION_MAX
#define LONG_TURNS 1000
/* Phase 1 reads one page (at least 16 events), phase 2 the last turns: a
 * session of 1000 turns must still cost well under this. */
#define LONG_ROWS_BOUND 64

static int failures;

__attribute__((format(printf, 2, 3)))
static void check(int ok, const char *fmt, ...)
{
	va_list ap;
	if (ok)
		return;
	failures++;
	fprintf(stderr, "FAIL: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* ---- an in-memory session and its reader ---------------------------- */

typedef struct session {
	memd_event ev[SESSION_MAX];
	int64_t n;
	int32_t fail_with; /* nonzero: events() fails with this code */
} session;

static void add(session *s, const char *role)
{
	if (s->n == SESSION_MAX) {
		fprintf(stderr, "template_run: SESSION_MAX is too small\n");
		exit(2);
	}
	memd_event *e = &s->ev[s->n];
	memset(e, 0, sizeof(*e));
	e->struct_size = sizeof(*e);
	e->seq = s->n + 1;
	e->role = role;
	e->author = role;
	e->id = "e";
	e->content_json = "{}";
	e->text = role;
	e->timestamp_us = e->seq;
	s->n++;
}

/* A system prompt, then turns of user, assistant (tool call), tool,
 * assistant; a summary event after every fourth turn. */
static void build(session *s, int turns)
{
	s->n = 0;
	s->fail_with = 0;
	if (turns == 0)
		return;
	add(s, "system");
	for (int t = 1; t <= turns; t++) {
		add(s, "user");
		add(s, "assistant");
		add(s, "tool");
		add(s, "assistant");
		if (t % 4 == 0)
			add(s, "summary");
	}
}

static int matches(const memd_event *e, const memd_event_query *q)
{
	int summary = strcmp(e->role, "summary") == 0;
	if ((q->flags & MEMD_EVQ_NO_SUMMARY) && summary)
		return 0;
	if ((q->flags & MEMD_EVQ_ONLY_SUMMARY) && !summary)
		return 0;
	if (e->seq <= q->after_seq)
		return 0;
	if (q->before_seq && e->seq >= q->before_seq)
		return 0;
	if (q->after_time_us && e->timestamp_us <= q->after_time_us)
		return 0;
	return 1;
}

static int32_t reader_events(const memd_reader *r, const memd_call *call,
			     const memd_event_query *q, const memd_event_sink *out,
			     memd_error *err)
{
	const session *s = r->reader_data;
	int64_t first = 0, last = s->n; /* half-open index range to deliver */

	if (s->fail_with)
		return memd_error_set(err, s->fail_with, MEMD_ERROR_RETRYABLE, "store is down");
	if (q->limit && (q->flags & MEMD_EVQ_NEWEST)) {
		/* The newest `limit` matches, delivered in ascending order. */
		uint32_t taken = 0;
		first = s->n;
		while (first > 0 && taken < q->limit) {
			first--;
			taken += (uint32_t)matches(&s->ev[first], q);
		}
	}
	uint32_t sent = 0;
	for (int64_t i = first; i < last; i++) {
		if (!matches(&s->ev[i], q))
			continue;
		if (q->limit && !(q->flags & MEMD_EVQ_NEWEST) && sent == q->limit)
			break;
		if (call && call->rows_read)
			(*call->rows_read)++;
		int32_t rc = out->event(out->userdata, &s->ev[i]);
		if (rc)
			return rc;
		sent++;
	}
	return 0;
}

static int32_t reader_session(const memd_reader *r, const memd_call *call,
			      const memd_session_sink *out, memd_error *err)
{
	(void)r;
	(void)call;
	(void)out;
	return memd_error_set(err, MEMD_ENOTSUP, 0, "not needed by this check");
}

/* ---- the context sink ----------------------------------------------- */

typedef struct collected {
	int64_t seqs[OUT_MAX];
	int n;
	int summaries;
	int unordered;
} collected;

static int32_t got_event(void *userdata, const memd_event *e)
{
	collected *c = userdata;
	if (c->n && e->seq <= c->seqs[c->n - 1])
		c->unordered++;
	if (c->n < OUT_MAX)
		c->seqs[c->n++] = e->seq;
	return 0;
}

static int32_t got_summary(void *userdata, const memd_event *e)
{
	collected *c = userdata;
	(void)e;
	c->summaries++;
	return 0;
}

/* The expected answer, by a plain scan of the whole session. */
static int expected(const session *s, int turns, int64_t *seqs)
{
	int64_t start = 0;
	int found = 0, n = 0;
	for (int64_t i = s->n; i-- > 0;)
		if (strcmp(s->ev[i].role, "user") == 0 && ++found == turns) {
			start = i;
			break;
		}
	for (int64_t i = start; i < s->n; i++)
		if (strcmp(s->ev[i].role, "summary") != 0)
			seqs[n++] = s->ev[i].seq;
	return n;
}

/* As expected(), keeping only the newest whole turns that fit in
 * max_tokens, each event counted by the host's (here: approximate) token
 * counter, since the events carry no stored count. */
static int expected_budget(const session *s, int turns, int64_t max_tokens, int64_t *seqs)
{
	int64_t start = -1, total = 0, turn = 0;
	int found = 0, n = 0, full = 0;
	for (int64_t i = s->n; i-- > 0 && found < turns;) {
		if (strcmp(s->ev[i].role, "summary") == 0)
			continue;
		turn += tokens_approx(s->ev[i].text, strlen(s->ev[i].text));
		if (strcmp(s->ev[i].role, "user") != 0)
			continue;
		if (total + turn > max_tokens) {
			full = 1;
			break;
		}
		total += turn;
		turn = 0;
		start = i;
		found++;
	}
	if (!full && found < turns && total + turn <= max_tokens)
		start = 0;
	if (start < 0)
		return 0;
	for (int64_t i = start; i < s->n; i++)
		if (strcmp(s->ev[i].role, "summary") != 0)
			seqs[n++] = s->ev[i].seq;
	return n;
}

static int32_t run(loader_instance *inst, session *s, collected *c, uint64_t *rows,
		   memd_error *err)
{
	memd_scope scope = {.struct_size = sizeof(scope), .app = "a", .user = "u", .session = "s"};
	memd_reader reader = {
		.struct_size = sizeof(reader),
		.reader_data = s,
		.scope = &scope,
		.session = reader_session,
		.events = reader_events,
	};
	memd_call call = {.struct_size = sizeof(call), .rows_read = rows};
	memd_context_sink sink = {.struct_size = sizeof(sink), .userdata = c,
				  .summary = got_summary, .event = got_event};
	const memd_strategy_ops *ops = loader_strategy_ops(loader_instance_plugin(inst));
	memset(c, 0, sizeof(*c));
	*rows = 0;
	return ops->context(loader_instance_handle(inst), &call, &reader, &sink, err);
}

static void check_case_tokens(loader_instance *inst, session *s, int turns, int64_t max_tokens,
			      const char *what)
{
	static collected c;
	static int64_t want[OUT_MAX];
	memd_error err = {.struct_size = sizeof(err)};
	uint64_t rows = 0;
	int32_t rc = run(inst, s, &c, &rows, &err);
	check(rc == 0, "%s: context failed: %d %s", what, rc, err.msg);
	int n = max_tokens ? expected_budget(s, turns, max_tokens, want) : expected(s, turns, want);
	check(c.n == n, "%s: %d events, expected %d", what, c.n, n);
	for (int i = 0; i < n && i < c.n; i++)
		check(c.seqs[i] == want[i], "%s: event %d is seq %lld, expected %lld", what, i,
		      (long long)c.seqs[i], (long long)want[i]);
	check(c.summaries == 0 && c.unordered == 0, "%s: %d summaries, %d out of order", what,
	      c.summaries, c.unordered);
}

static void check_case(loader_instance *inst, session *s, int turns, const char *what)
{
	check_case_tokens(inst, s, turns, 0, what);
}

/* ---- on_session_finalize ------------------------------------------------- */

typedef struct persisted {
	int n;
	char role[32];
	char text[256];
	int64_t covers_seq;
	int has_content;
} persisted;

static int32_t got_persist(void *userdata, const memd_event *e)
{
	persisted *p = userdata;
	p->n++;
	snprintf(p->role, sizeof(p->role), "%s", e->role ? e->role : "");
	snprintf(p->text, sizeof(p->text), "%s", e->text ? e->text : "");
	p->covers_seq = e->covers_seq;
	p->has_content = e->content_json && e->content_json[0] == '{';
	return 0;
}

static int32_t finalize(loader_instance *inst, session *s, persisted *p, memd_error *err)
{
	memd_scope scope = {.struct_size = sizeof(scope), .app = "a", .user = "u", .session = "s"};
	memd_reader reader = {
		.struct_size = sizeof(reader),
		.reader_data = s,
		.scope = &scope,
		.session = reader_session,
		.events = reader_events,
	};
	memd_call call = {.struct_size = sizeof(call)};
	memd_event_sink sink = {.struct_size = sizeof(sink), .userdata = p, .event = got_persist};
	const memd_strategy_ops *ops = loader_strategy_ops(loader_instance_plugin(inst));
	memset(p, 0, sizeof(*p));
	if (!ops->on_session_finalize)
		return memd_error_set(err, MEMD_ENOTSUP, 0, "the template has no on_session_finalize");
	return ops->on_session_finalize(loader_instance_handle(inst), &call, &reader, &sink, err);
}

static void check_finalize(loader_instance *inst, session *s)
{
	persisted p;
	memd_error err = {.struct_size = sizeof(err)};
	int32_t rc;

	build(s, 10);
	rc = finalize(inst, s, &p, &err);
	check(rc == 0, "finalize failed: %d %s", rc, err.msg);
	check(p.n == 1 && strcmp(p.role, "summary") == 0 && p.has_content,
	      "finalize: %d events, role '%s'; expected one summary with content", p.n, p.role);
	check(p.covers_seq == s->n, "finalize: the note covers %lld, not the last seq %lld",
	      (long long)p.covers_seq, (long long)s->n);
	check(strstr(p.text, " 10 user turns") != NULL, "finalize: the note says '%s'", p.text);

	build(s, 0);
	rc = finalize(inst, s, &p, &err);
	check(rc == 0 && p.n == 0, "finalize of an empty session: %d, %d events", rc, p.n);

	build(s, 10);
	s->fail_with = MEMD_EUNAVAIL;
	rc = finalize(inst, s, &p, &err);
	check(rc == MEMD_EUNAVAIL && p.n == 0, "finalize over a failing reader: %d, %d events", rc,
	      p.n);
	s->fail_with = 0;
}

static loader_instance *instance(loader_plugin *p, const char *yaml, config_node **ret_node,
				 memd_error *err)
{
	loader_instance *inst = NULL;
	*ret_node = NULL;
	if (yaml && config_parse_string(yaml, strlen(yaml), "template.yaml", ret_node, err) != 0)
		return NULL;
	if (loader_instance_create(p, "apps.*.working_memory", *ret_node, "strategy", NULL, &inst,
				   err) != 0)
		return NULL;
	return inst;
}

int main(int argc, char **argv)
{
	static session s;
	static collected c;
	memd_error err = {.struct_size = sizeof(err)};
	loader_plugin *p = NULL;
	loader_instance *two, *dflt, *bad, *budget;
	config_node *n_two, *n_dflt, *n_bad, *n_budget;
	uint64_t rows = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: %s PLUGIN.so\n", argv[0]);
		return 2;
	}
	if (loader_open(argv[1], NULL, &p, &err) != 0) {
		fprintf(stderr, "FAIL: %s\n", err.msg);
		return 1;
	}
	check(strcmp(loader_descriptor(p)->name, "recent_turns") == 0, "name is %s",
	      loader_descriptor(p)->name);
	check(loader_require_kind(p, MEMD_KIND_STRATEGY, "apps.*.working_memory", &err) == 0,
	      "%s", err.msg);

	two = instance(p, "strategy: recent_turns\nturns: 2\n", &n_two, &err);
	check(two != NULL, "turns 2: %s", err.msg);
	dflt = instance(p, NULL, &n_dflt, &err);
	check(dflt != NULL, "default config: %s", err.msg);
	bad = instance(p, "strategy: recent_turns\nturns: 0\n", &n_bad, &err);
	check(bad == NULL && strstr(err.msg, "turns: must be 1..") != NULL,
	      "turns 0 must be refused, got: %s", bad ? "an instance" : err.msg);
	loader_instance_destroy(bad);
	/* max_tokens: whole turns within a token budget, counted by the host
	 * (memd_host.count_tokens) since these events carry no stored count:
	 * a turn here is user 1 + assistant 2 + tool 1 + assistant 2 tokens. */
	budget = instance(p, "strategy: recent_turns\nturns: 3\nmax_tokens: 13\n", &n_budget, &err);
	check(budget != NULL, "max_tokens 13: %s", err.msg);
	if (!two || !dflt || !budget)
		goto out;

	build(&s, 10);
	check_case(two, &s, 2, "10 turns, keep 2");
	check_case(dflt, &s, 3, "10 turns, keep the default 3");
	build(&s, 1);
	check_case(two, &s, 2, "1 turn, keep 2 (everything)");
	build(&s, 0);
	check_case(two, &s, 2, "empty session");

	build(&s, 10);
	check_case_tokens(budget, &s, 3, 13, "10 turns, 3 of them within 13 tokens");
	build(&s, 1);
	check_case_tokens(budget, &s, 3, 13, "1 turn and the system prompt within 13 tokens");
	{
		loader_instance *tiny;
		config_node *n_tiny;
		tiny = instance(p, "strategy: recent_turns\nmax_tokens: 5\n", &n_tiny, &err);
		check(tiny != NULL, "max_tokens 5: %s", err.msg);
		build(&s, 4);
		if (tiny)
			check_case_tokens(tiny, &s, 3, 5, "no whole turn fits in 5 tokens: nothing");
		loader_instance_destroy(tiny);
		config_free(n_tiny);
	}

	/* A long session costs what a short one does. */
	build(&s, LONG_TURNS);
	check_case(two, &s, 2, "1000 turns, keep 2");
	check(run(two, &s, &c, &rows, &err) == 0, "long session: %s", err.msg);
	check(rows > 0 && rows < LONG_ROWS_BOUND,
	      "long session: read %llu rows of %lld; must stay under %d",
	      (unsigned long long)rows, (long long)s.n, LONG_ROWS_BOUND);

	check_finalize(two, &s);

	/* A failing reader: the error comes back unchanged. */
	build(&s, LONG_TURNS);
	s.fail_with = MEMD_EUNAVAIL;
	memset(&err, 0, sizeof(err));
	int32_t rc = run(two, &s, &c, &rows, &err);
	check(rc == MEMD_EUNAVAIL && (err.flags & MEMD_ERROR_RETRYABLE) &&
		      strcmp(err.msg, "store is down") == 0,
	      "a reader error must come back as is: %d %s", rc, err.msg);
out:
	loader_instance_destroy(two);
	loader_instance_destroy(dflt);
	loader_instance_destroy(budget);
	loader_close(p);
	config_free(n_two);
	config_free(n_dflt);
	config_free(n_bad);
	config_free(n_budget);
	if (failures)
		fprintf(stderr, "%d check(s) failed\n", failures);
	else
		printf("ok: %s works as a strategy\n", argv[1]);
	return failures ? 1 : 0;
}
