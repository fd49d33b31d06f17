/* SPDX-License-Identifier: MIT */
/*
 * summary_buffer: the working memory is the session's latest summary plus
 * every event after the last seq it covers (covers_seq), within max_tokens.
 *
 * Folding (after_append, which the host runs after the append was
 * acknowledged, never twice at once for one session): when the latest
 * summary plus the unsummarized events exceed threshold x max_tokens, the
 * newest events are kept (at least min_messages, and as many more as fit
 * in target x max_tokens / 2 tokens; a tool call stays with its results)
 * and the previous summary plus the older slice are folded by the host's
 * summarizer into a new summary of at most target x max_tokens / 2 tokens,
 * appended as a role "summary" event whose covers_seq is the last seq of
 * the slice. So after a fold the context is about target x max_tokens, and
 * no event leaves the context before a summary covers it. A slice holds at
 * most max_tokens tokens of events; a longer backlog (after summaries
 * failed for a while, or many appends coalesced into one run) is folded
 * progressively, fold after fold, until no fold is due.
 * If summarizing fails nothing is written and nothing is lost; the next
 * append tries again.
 *
 * Rewinds (transcript operations hide events): the store's summary_seq is
 * the newest *visible* summary, and a visible summary covers only visible
 * events (it is older than every hidden one), so the context never shows
 * a hidden event through a summary, and the next fold starts from the
 * visible summary and reads only visible events. A fold that a rewind
 * overtook (it read events hidden since) persists nothing.
 *
 * Finalizing (on_session_finalize, when the session's lane expired; the
 * host never runs it while after_append runs for the session, so it is
 * single-flight with the folds): every event after the latest summary's
 * covers_seq is folded into one last summary covering the session's last
 * seq, whatever the threshold says. The events are read and summarized a
 * slice at a time (at most max_tokens of events each, as a fold's slice),
 * each slice folded into the text of the ones before, and only the final
 * text is persisted: one summary event. Nothing after the summary:
 * nothing is written.
 *
 * Context: the session record gives the latest summary's seq, one read
 * fetches that summary, and the events after its covers_seq are read
 * newest-first until the budget left by the summary is spent (a token
 * window: while a fold is pending or failing, the oldest unsummarized
 * events give way, so the context never exceeds max_tokens). The cost does
 * not depend on how many events the summary covers.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include <memd/plugin.h>

#include "window.h"

#define SB_MAX_TOKENS_LIMIT 100000000
#define SB_MIN_MESSAGES_LIMIT 100000
/* Folds one after_append makes at most: it folds until no fold is due
 * (appends that arrive meanwhile coalesce into one more run, so a run must
 * catch up with all of them); this only guards against a store that never
 * moves the session's summary pointer. */
#define SB_FOLDS_PER_RUN 100000
#define SB_AUTHOR "summary_buffer"
#define SB_PLAN_PAGE 256u      /* events per read while planning a fold */

typedef struct sb {
	const memd_host *host;
	int64_t max_tokens;
	double threshold;
	double target;
	uint32_t min_messages;
} sb;

/* Tokens a fold aims for: half for the summary, half for the kept events. */
static int64_t half_target(const sb *b)
{
	int64_t t = (int64_t)(b->target * (double)b->max_tokens / 2.0);
	return t > 0 ? t : 1;
}

/* ---- reading ------------------------------------------------------------- */

static int32_t got_session(void *userdata, const memd_session *s)
{
	int64_t *out = userdata;
	out[0] = s->summary_seq;
	out[1] = s->last_seq;
	return 0;
}

static int32_t read_session(const memd_reader *r, const memd_call *call, int64_t *ret_summary_seq,
			    int64_t *ret_last_seq, memd_error *err)
{
	int64_t v[2] = { -1, -1 };
	memd_session_sink sink = { sizeof(sink), v, got_session };
	int32_t rc = r->session(r, call, &sink, err);
	if (rc < 0)
		return rc;
	if (v[0] < 0)
		return memd_error_set(err, MEMD_EINTERNAL, 0, "the reader delivered no session");
	*ret_summary_seq = v[0];
	*ret_last_seq = v[1];
	return 0;
}

static int32_t got_summary(void *userdata, const memd_event *e)
{
	win_event *out = userdata;
	win_event_clear(out);
	return win_copy(e, out);
}

/* The summary event at seq into *out (zeroed if there is none there). */
static int32_t read_summary(const memd_reader *r, const memd_call *call, int64_t seq,
			    win_event *out, memd_error *err)
{
	memd_event_query q = {
		.struct_size = sizeof(q),
		.flags = MEMD_EVQ_ONLY_SUMMARY,
		.after_seq = seq - 1,
		.before_seq = seq + 1,
		.limit = 1,
	};
	memd_event_sink sink = { sizeof(sink), out, got_summary };
	int32_t rc;
	memset(out, 0, sizeof(*out));
	rc = r->events(r, call, &q, &sink, err);
	if (rc == MEMD_ENOMEM)
		memd_error_set(err, rc, 0, "out of memory");
	if (rc < 0)
		win_event_clear(out);
	return rc;
}

/* ---- context --------------------------------------------------------------- */

static int32_t sb_context(void *inst, const memd_call *call, const memd_reader *reader,
			  const memd_context_sink *out, memd_error *err)
{
	const sb *b = inst;
	win_event summary = { 0 };
	win_list events = { 0 };
	win_opts o = { .budget = b->max_tokens };
	int64_t summary_seq = 0, last_seq = 0;
	int32_t rc;

	if ((rc = read_session(reader, call, &summary_seq, &last_seq, err)) < 0)
		return rc;
	if (summary_seq > 0 && (rc = read_summary(reader, call, summary_seq, &summary, err)) < 0)
		return rc;
	if (summary.buf && summary.ev.tokens <= b->max_tokens) {
		o.after_seq = summary.ev.covers_seq;
		o.budget -= summary.ev.tokens;
	} else if (summary.buf) {
		b->host->log(b->host, MEMD_LOG_WARN, "summary at seq %lld has %lld tokens, over max_tokens: left out",
			     (long long)summary_seq, (long long)summary.ev.tokens);
		win_event_clear(&summary);
	}
	if ((rc = win_collect(reader, call, &o, &events, err)) < 0)
		goto out;
	if (summary.buf && (rc = out->summary(out->userdata, &summary.ev)) != 0)
		goto out;
	rc = win_emit(&events, out);
out:
	win_event_clear(&summary);
	win_list_clear(&events);
	return rc;
}

/* ---- folding --------------------------------------------------------------- */

/* What planning keeps of an event. */
typedef struct mark {
	int64_t seq;
	int64_t tokens;
	int result;
} mark;

typedef struct marks {
	mark *v;
	size_t n, cap;
} marks;

static int32_t got_mark(void *userdata, const memd_event *e)
{
	marks *m = userdata;
	if (m->n == m->cap)
		return MEMD_EINTERNAL;
	m->v[m->n].seq = e->seq;
	m->v[m->n].tokens = e->tokens;
	m->v[m->n].result = win_is_tool_result(e);
	m->n++;
	return 0;
}

typedef struct plan {
	int fold;           /* a fold is due */
	int64_t keep_from;  /* first kept seq: the slice is (covers, keep_from) */
} plan;

/* The walk of make_plan. */
typedef struct walk {
	const sb *b;
	int64_t tail, trigger, keep_budget, kept_tokens, unit_tokens, unit_oldest;
	uint32_t kept, unit_events;
	int keeping;
	int done;
	plan *p;
} walk;

/* A unit (an event and the tool results after it) is complete. */
static void close_unit(walk *w)
{
	w->tail += w->unit_tokens;
	if (w->keeping && (w->kept < w->b->min_messages ||
			   w->kept_tokens + w->unit_tokens <= w->keep_budget)) {
		w->kept += w->unit_events;
		w->kept_tokens += w->unit_tokens;
		w->p->keep_from = w->unit_oldest;
	} else {
		w->keeping = 0;
	}
	w->unit_tokens = 0;
	w->unit_events = 0;
	if (!w->keeping && w->tail > w->trigger) {
		w->p->fold = 1;
		w->done = 1;
	}
}

/* Walk the events after covers newest-first, a unit at a time: keep units
 * while fewer than min_messages events are kept or they fit in half the
 * target; a fold is due when summary_tokens plus the walked events exceed
 * the threshold and some unit was not kept. Stops as soon as that is
 * known, so it reads at most about threshold x max_tokens of events. */
static int32_t make_plan(const sb *b, const memd_call *call, const memd_reader *r, int64_t covers,
			 int64_t summary_tokens, int64_t last_seq, plan *ret, memd_error *err)
{
	marks page = { 0 };
	int64_t before = 0;
	walk w = {
		.b = b,
		.tail = summary_tokens,
		.trigger = (int64_t)(b->threshold * (double)b->max_tokens),
		.keep_budget = half_target(b),
		.keeping = 1,
		.p = ret,
	};
	int32_t rc = 0;

	ret->fold = 0;
	ret->keep_from = last_seq + 1;
	page.v = malloc(SB_PLAN_PAGE * sizeof(*page.v));
	page.cap = SB_PLAN_PAGE;
	if (!page.v)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	while (!w.done) {
		memd_event_query q = {
			.struct_size = sizeof(q),
			.flags = MEMD_EVQ_NEWEST | MEMD_EVQ_NO_SUMMARY,
			.after_seq = covers,
			.before_seq = before,
			.limit = SB_PLAN_PAGE,
		};
		memd_event_sink sink = { sizeof(sink), &page, got_mark };
		int last_page;
		page.n = 0;
		if ((rc = r->events(r, call, &q, &sink, err)) < 0)
			break;
		last_page = page.n < SB_PLAN_PAGE;
		if (page.n)
			before = page.v[0].seq;
		for (size_t k = 0; k < page.n && !w.done; k++) {
			const mark *m = &page.v[page.n - 1 - k];
			w.unit_tokens += m->tokens;
			w.unit_events++;
			w.unit_oldest = m->seq;
			if (!m->result)
				close_unit(&w);
		}
		if (last_page) {
			/* Tool results whose call is summarized already: a unit. */
			if (!w.done && w.unit_events)
				close_unit(&w);
			break;
		}
	}
	free(page.v);
	return rc;
}

typedef struct slice {
	win_list events;
	int closing;      /* the token cap is reached: only tool results may follow */
	int64_t cap;
	int stop;
} slice;

static int32_t got_slice_event(void *userdata, const memd_event *e)
{
	slice *s = userdata;
	win_event c;
	int32_t rc;
	if (s->stop)
		return 0;
	if (s->closing && !win_is_tool_result(e)) {
		s->stop = 1;
		return 0;
	}
	if ((rc = win_copy(e, &c)) < 0)
		return rc;
	if (s->events.n == s->events.cap) {
		size_t ncap = s->events.cap ? 2 * s->events.cap : WIN_PAGE_FIRST;
		win_event *grown = realloc(s->events.v, ncap * sizeof(*grown));
		if (!grown) {
			win_event_clear(&c);
			return MEMD_ENOMEM;
		}
		s->events.v = grown;
		s->events.cap = ncap;
	}
	s->events.v[s->events.n++] = c;
	s->events.tokens += e->tokens;
	if (s->events.tokens >= s->cap)
		s->closing = 1;
	return 0;
}

/* The oldest events after covers and before keep_from, ascending, up to
 * max_tokens tokens (then only the tool results that complete the last
 * unit). */
static int32_t read_slice(const sb *b, const memd_call *call, const memd_reader *r,
			  int64_t covers, int64_t keep_from, slice *s, memd_error *err)
{
	int64_t after = covers;
	s->cap = b->max_tokens;
	while (!s->stop) {
		memd_event_query q = {
			.struct_size = sizeof(q),
			.flags = MEMD_EVQ_NO_SUMMARY,
			.after_seq = after,
			.before_seq = keep_from,
			.limit = SB_PLAN_PAGE,
		};
		memd_event_sink sink = { sizeof(sink), s, got_slice_event };
		size_t before_n = s->events.n;
		int32_t rc = r->events(r, call, &q, &sink, err);
		if (rc < 0)
			return rc == MEMD_ENOMEM ? memd_error_set(err, rc, 0, "out of memory") : rc;
		if (s->events.n == before_n || s->events.n - before_n < SB_PLAN_PAGE)
			break; /* nothing more before keep_from (or the slice is closed) */
		after = s->events.v[s->events.n - 1].ev.seq;
	}
	return 0;
}

typedef struct text_acc {
	char *text;
	size_t len;
} text_acc;

static int32_t got_text(void *userdata, const char *text, size_t len)
{
	text_acc *a = userdata;
	char *copy = malloc(len + 1);
	if (!copy)
		return MEMD_ENOMEM;
	memcpy(copy, text, len);
	copy[len] = '\0';
	free(a->text);
	a->text = copy;
	a->len = len;
	return 0;
}

static int32_t persist_summary(const memd_call *call, const memd_event_sink *persist,
			       const char *text, int64_t covers, uint32_t folded, memd_error *err)
{
	json_t *content = json_pack("{s:[{s:s}]}", "parts", "text", text);
	json_t *meta = json_pack("{s:I}", "folded_events", (json_int_t)folded);
	char *content_text = content ? json_dumps(content, JSON_COMPACT) : NULL;
	char *meta_text = meta ? json_dumps(meta, JSON_COMPACT) : NULL;
	memd_event e = { .struct_size = sizeof(e) };
	int32_t rc;

	(void)call;
	json_decref(content);
	json_decref(meta);
	if (!content_text || !meta_text) {
		free(content_text);
		free(meta_text);
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	e.role = "summary";
	e.author = SB_AUTHOR;
	e.content_json = content_text;
	e.metadata_json = meta_text;
	e.text = text;
	e.covers_seq = covers;
	rc = persist->event(persist->userdata, &e);
	free(content_text);
	free(meta_text);
	if (rc < 0)
		return memd_error_set(err, rc, MEMD_ERROR_RETRYABLE,
				      "the host could not persist the summary");
	return 0;
}

static int32_t count_event(void *userdata, const memd_event *e)
{
	(void)e;
	(*(int *)userdata)++;
	return 0;
}

/* *ret_visible: 1 if the event at seq is visible (not hidden by a
 * rewind, rewrite, clear or undo). One read of at most one row. A fold
 * checks its last event before it persists: those operations hide every
 * visible event from a seq on (an undo: the newest ones), so while the
 * last event a fold read is visible, so is every event it read. */
static int32_t event_visible(const memd_reader *r, const memd_call *call, int64_t seq,
			     int *ret_visible, memd_error *err)
{
	int n = 0;
	memd_event_query q = {
		.struct_size = sizeof(q),
		.after_seq = seq - 1,
		.before_seq = seq + 1,
		.limit = 1,
	};
	memd_event_sink sink = { sizeof(sink), &n, count_event };
	int32_t rc = r->events(r, call, &q, &sink, err);

	if (rc < 0)
		return rc;
	*ret_visible = n > 0;
	return 0;
}

/* One fold if one is due. *ret_folded: 1 if a summary was written. */
static int32_t fold_once(const sb *b, const memd_call *call, const memd_reader *r,
			 const memd_event_sink *persist, int *ret_folded, memd_error *err)
{
	win_event prev = { 0 };
	slice s = { 0 };
	plan p;
	text_acc acc = { 0 };
	memd_text_sink sink = { sizeof(sink), &acc, got_text };
	const memd_event **evp = NULL;
	int64_t summary_seq = 0, last_seq = 0, covers = 0, prev_tokens = 0;
	int32_t rc;

	*ret_folded = 0;
	if ((rc = read_session(r, call, &summary_seq, &last_seq, err)) < 0)
		return rc;
	if (summary_seq > 0) {
		if ((rc = read_summary(r, call, summary_seq, &prev, err)) < 0)
			return rc;
		if (prev.buf) {
			covers = prev.ev.covers_seq;
			prev_tokens = prev.ev.tokens;
		}
	}
	if ((rc = make_plan(b, call, r, covers, prev_tokens, last_seq, &p, err)) < 0 || !p.fold)
		goto out;
	if ((rc = read_slice(b, call, r, covers, p.keep_from, &s, err)) < 0)
		goto out;
	if (!s.events.n)
		goto out;
	evp = malloc(s.events.n * sizeof(*evp));
	if (!evp) {
		rc = memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < s.events.n; i++)
		evp[i] = &s.events.v[i].ev;
	if (!b->host->summarize) {
		rc = memd_error_set(err, MEMD_ENOTSUP, 0, "the host has no summarizer");
		goto out;
	}
	rc = b->host->summarize(b->host, call, prev.buf ? prev.ev.text : NULL, evp,
				(uint32_t)s.events.n, half_target(b), &sink, err);
	if (rc < 0)
		goto out;
	if (!acc.text) {
		rc = memd_error_set(err, MEMD_EIO, MEMD_ERROR_RETRYABLE, "the summarizer said nothing");
		goto out;
	}
	/* Another memd process over the same store may have folded meanwhile
	 * (the host's single-flight is per process), or a rewind hid events
	 * this fold read (a summary of them would bring them back): then this
	 * fold is stale; the next run folds the visible events. */
	{
		int64_t now_summary = 0, now_last = 0;
		int visible = 0;
		if ((rc = read_session(r, call, &now_summary, &now_last, err)) < 0)
			goto out;
		if (now_summary != summary_seq)
			goto out;
		if ((rc = event_visible(r, call, s.events.v[s.events.n - 1].ev.seq, &visible,
					err)) < 0 ||
		    !visible)
			goto out;
	}
	rc = persist_summary(call, persist, acc.text, s.events.v[s.events.n - 1].ev.seq,
			     (uint32_t)s.events.n, err);
	if (rc == 0) {
		*ret_folded = 1;
		b->host->log(b->host, MEMD_LOG_DEBUG, "folded %zu events (seq %lld..%lld) into a summary",
			     s.events.n, (long long)s.events.v[0].ev.seq,
			     (long long)s.events.v[s.events.n - 1].ev.seq);
	}
out:
	free(evp);
	free(acc.text);
	win_list_clear(&s.events);
	win_event_clear(&prev);
	return rc;
}

static int32_t sb_after_append(void *inst, const memd_call *call, const memd_reader *reader,
			       const memd_event_sink *persist, memd_error *err)
{
	const sb *b = inst;
	for (int i = 0; i < SB_FOLDS_PER_RUN; i++) {
		int folded;
		int32_t rc = fold_once(b, call, reader, persist, &folded, err);
		if (rc < 0 || !folded)
			return rc;
	}
	return 0;
}

/* Attempts of a finalize when another process writes a summary while it
 * summarizes (its slices are then stale: it starts over from that one). */
#define SB_FINALIZE_ATTEMPTS 3

/* One finalize attempt: fold everything after the latest summary into one
 * new summary. *ret_stale: a summary was written meanwhile (nothing was
 * persisted). */
static int32_t finalize_once(const sb *b, const memd_call *call, const memd_reader *r,
			     const memd_event_sink *persist, int *ret_stale, memd_error *err)
{
	win_event prev = { 0 };
	text_acc acc = { 0 };
	memd_text_sink sink = { sizeof(sink), &acc, got_text };
	char *carry = NULL; /* the summary of the slices folded so far */
	int64_t summary_seq = 0, last_seq = 0, covers = 0;
	uint32_t folded = 0;
	int32_t rc;

	*ret_stale = 0;
	if ((rc = read_session(r, call, &summary_seq, &last_seq, err)) < 0)
		return rc;
	if (summary_seq > 0 && (rc = read_summary(r, call, summary_seq, &prev, err)) < 0)
		return rc;
	if (prev.buf)
		covers = prev.ev.covers_seq;
	while (covers < last_seq) {
		slice s = { 0 };
		const memd_event **evp = NULL;

		if ((rc = read_slice(b, call, r, covers, last_seq + 1, &s, err)) < 0 || !s.events.n)
			goto next;
		if (!b->host->summarize) {
			rc = memd_error_set(err, MEMD_ENOTSUP, 0, "the host has no summarizer");
			goto next;
		}
		if (!(evp = malloc(s.events.n * sizeof(*evp)))) {
			rc = memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
			goto next;
		}
		for (size_t i = 0; i < s.events.n; i++)
			evp[i] = &s.events.v[i].ev;
		rc = b->host->summarize(b->host, call, carry ? carry : prev.buf ? prev.ev.text : NULL,
					evp, (uint32_t)s.events.n, half_target(b), &sink, err);
		if (rc == 0 && !acc.text)
			rc = memd_error_set(err, MEMD_EIO, MEMD_ERROR_RETRYABLE,
					    "the summarizer said nothing");
		if (rc == 0) {
			free(carry);
			carry = acc.text;
			acc.text = NULL;
			covers = s.events.v[s.events.n - 1].ev.seq;
			folded += (uint32_t)s.events.n;
		}
next:
		free(evp);
		if (rc < 0 || !s.events.n) {
			win_list_clear(&s.events);
			break;
		}
		win_list_clear(&s.events);
	}
	if (rc < 0 || !folded)
		goto out;
	{
		int64_t now_summary = 0, now_last = 0;
		int visible = 0;
		if ((rc = read_session(r, call, &now_summary, &now_last, err)) < 0 ||
		    (rc = event_visible(r, call, covers, &visible, err)) < 0)
			goto out;
		if (now_summary != summary_seq || !visible) {
			*ret_stale = 1;
			goto out;
		}
	}
	rc = persist_summary(call, persist, carry, covers, folded, err);
	if (rc == 0)
		b->host->log(b->host, MEMD_LOG_DEBUG,
			     "finalized: folded %u events (up to seq %lld) into the last summary",
			     folded, (long long)covers);
out:
	free(carry);
	free(acc.text);
	win_event_clear(&prev);
	return rc;
}

static int32_t sb_on_session_finalize(void *inst, const memd_call *call, const memd_reader *reader,
				      const memd_event_sink *persist, memd_error *err)
{
	const sb *b = inst;
	for (int i = 0; i < SB_FINALIZE_ATTEMPTS; i++) {
		int stale;
		int32_t rc = finalize_once(b, call, reader, persist, &stale, err);
		if (rc < 0 || !stale)
			return rc;
	}
	return memd_error_set(err, MEMD_ECONFLICT, MEMD_ERROR_RETRYABLE,
			      "summaries kept being written while finalizing; try again");
}

/* ---- set-up ------------------------------------------------------------------ */

static int32_t sb_init(const memd_host *host, void **ret_instance, memd_error *err)
{
	int64_t max_tokens, min_messages;
	double threshold, target;
	sb *b;

	if (host->config_int(host, "max_tokens", &max_tokens) < 0 ||
	    host->config_int(host, "min_messages", &min_messages) < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "max_tokens and min_messages must be integers");
	if (host->config_double(host, "threshold", &threshold) < 0 ||
	    host->config_double(host, "target", &target) < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "threshold and target must be numbers");
	if (max_tokens < 1 || max_tokens > SB_MAX_TOKENS_LIMIT)
		return memd_error_set(err, MEMD_EINVAL, 0, "max_tokens: must be 1..%d, not %lld",
				      SB_MAX_TOKENS_LIMIT, (long long)max_tokens);
	if (min_messages < 0 || min_messages > SB_MIN_MESSAGES_LIMIT)
		return memd_error_set(err, MEMD_EINVAL, 0, "min_messages: must be 0..%d, not %lld",
				      SB_MIN_MESSAGES_LIMIT, (long long)min_messages);
	if (!(threshold > 0 && threshold <= 1))
		return memd_error_set(err, MEMD_EINVAL, 0, "threshold: must be in (0, 1], not %g",
				      threshold);
	if (!(target > 0 && target < threshold))
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "target: must be above 0 and below threshold (%g), not %g",
				      threshold, target);
	if (!MEMD_HOST_HAS(host, summarize))
		host->log(host, MEMD_LOG_WARN,
			  "the host has no summarizer: the context will be a token window");
	b = calloc(1, sizeof(*b));
	if (!b)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	b->host = host;
	b->max_tokens = max_tokens;
	b->threshold = threshold;
	b->target = target;
	b->min_messages = (uint32_t)min_messages;
	*ret_instance = b;
	return 0;
}

static void sb_fini(void *instance)
{
	free(instance);
}

static const memd_config_key key_max_tokens = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_INT,
	.name = "max_tokens",
	.default_value = "8000",
	.help = "token budget of the context: summary plus recent events",
};

static const memd_config_key key_threshold = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_DOUBLE,
	.name = "threshold",
	.default_value = "0.75",
	.help = "fold when summary + unsummarized events exceed this share of max_tokens",
};

static const memd_config_key key_target = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_DOUBLE,
	.name = "target",
	.default_value = "0.5",
	.help = "share of max_tokens a fold leaves (half summary, half recent events)",
};

static const memd_config_key key_min_messages = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_INT,
	.name = "min_messages",
	.default_value = "4",
	.help = "the newest events a fold always leaves unsummarized",
};

static const memd_config_key *const sb_keys[] = { &key_max_tokens, &key_threshold, &key_target,
						  &key_min_messages, NULL };

static const memd_strategy_ops sb_ops = {
	.struct_size = sizeof(memd_strategy_ops),
	.context = sb_context,
	.after_append = sb_after_append,
	.on_session_finalize = sb_on_session_finalize,
};

static const memd_plugin sb_plugin = {
	.struct_size = sizeof(memd_plugin),
	.abi_major = MEMD_ABI_MAJOR,
	.abi_minor = 2, /* on_session_finalize */
	.kind = MEMD_KIND_STRATEGY,
	.flags = MEMD_PLUGIN_THREADSAFE,
	.name = "summary_buffer",
	.version = "1.1.0",
	.description = "the latest summary plus every event after it, folded progressively",
	.config_keys = sb_keys,
	.init = sb_init,
	.fini = sb_fini,
	.strategy = &sb_ops,
};

MEMD_PLUGIN_EXPORT const memd_plugin *memd_plugin_entry_v1(void)
{
	return &sb_plugin;
}
