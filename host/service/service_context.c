/* SPDX-License-Identifier: MIT */
/*
 * service_context: memd_context, the working memory an app's strategy
 * makes of a session, and the recall of an app with
 * working_memory.recall: the memories and past events most relevant to
 * the latest user message of the window (or the caller's query), found
 * through the index (index_search_results) without the window's own
 * events, as the context's "memories" section, or with MEMD_READ_OPENAI
 * as one system message (RECALL_HEADER, then one line per item) placed
 * first, after the summary's.
 *
 * Budget: the items are taken best first while their tokens (each
 * item's text by the configured tokenizer) fit recall.max_tokens; an
 * item that does not fit is skipped and smaller ones after it may still
 * be taken. When the app's strategy has a max_tokens key (token_window,
 * summary_buffer), the budget is also at most that max_tokens minus the
 * window's tokens (summary included): window and recall together stay
 * within the strategy's max_tokens, the window first.
 */
#include "service/service_int.h"

#include <stdlib.h>
#include <string.h>

#include "json/event_json.h"

/* The system message of the recalled items (MEMD_READ_OPENAI): this
 * line, then one line per item: "- " and a memory's text, or "- [" an
 * event's RFC 3339 timestamp "] " its author (else its role) ": " and its
 * text. */
#define RECALL_HEADER "Recalled from earlier conversations and long-term memory:"
/* The longest recall query (as memd_search's). */
#define RECALL_QUERY_MAX 8192
/* Window event ids kept before growing. */
#define RECALL_IDS_MIN 32

static int32_t ctx_summary(void *ud, const memd_event *e)
{
	return jo_context_summary(ud, e);
}

static int32_t ctx_event(void *ud, const memd_event *e)
{
	return jo_context_event(ud, e);
}

/* What a session owes its first context read (MEMD_SESSION_NOTICE). */
typedef struct notice_peek {
	uint32_t flags;
	char *reason;   /* start_reason */
	char *platform; /* of the origin */
	char *chat_type;
} notice_peek;

static int32_t sink_notice(void *ud, const memd_session *s)
{
	notice_peek *p = ud;
	json_t *o;

	p->flags = s->flags;
	if (!(s->flags & MEMD_SESSION_NOTICE) || !s->start_reason)
		return 0;
	free(p->reason);
	p->reason = strdup(s->start_reason);
	o = ej_load(s->origin_json);
	if (json_string_value(json_object_get(o, "platform")))
		p->platform = strdup(json_string_value(json_object_get(o, "platform")));
	if (json_string_value(json_object_get(o, "chat_type")))
		p->chat_type = strdup(json_string_value(json_object_get(o, "chat_type")));
	json_decref(o);
	return p->reason ? 0 : MEMD_ENOMEM;
}

static int32_t sink_ignore(void *ud, const memd_session *s)
{
	(void)ud;
	(void)s;
	return 0;
}

/* The notice text of a reset for reason under p; NULL for none. */
static const char *notice_text(const lane_reset_policy *p, const char *reason)
{
	if (strcmp(reason, LANE_EXPIRED_IDLE) == 0)
		return p->idle_notice;
	if (strcmp(reason, LANE_EXPIRED_DAILY) == 0)
		return p->daily_notice;
	if (strcmp(reason, "suspended") == 0)
		return p->suspended_notice;
	return NULL;
}

/* If the session of sc owes a notice and this call is the one that
 * clears it (MEMD_PATCH_CLEAR_NOTICE: of racing readers exactly one
 * succeeds), put it on c. Best effort: a failure shows no notice, and a
 * later read may show it. */
static void take_notice(memd *m, const memd_call *call, const memd_scope *sc,
			const char **ret_reason, const char **ret_text, notice_peek *p)
{
	memd_session_sink sink = { sizeof(sink), p, sink_notice };
	memd_session_sink ignore = { sizeof(ignore), NULL, sink_ignore };
	memd_session_update up = { .struct_size = sizeof(up), .fields = MEMD_PATCH_CLEAR_NOTICE };
	memd_error err = { 0 };
	lane_reset_policy pol;
	const char *text;

	if (store_minor(m->sessions) < 2 ||
	    store_session_get(m->sessions, call, sc, &sink, &err) < 0 || !p->reason)
		return;
	if (service_lane_policy(m, sc->app, p->platform, p->chat_type, &pol, &err) < 0 ||
	    !pol.notify || !(text = notice_text(&pol, p->reason)))
		return;
	up.now_us = service_clock_us(m);
	if (store_session_update(m->sessions, call, sc, &up, &ignore, &err) < 0)
		return;
	*ret_reason = p->reason;
	*ret_text = text;
}

/* ---- recall ---------------------------------------------------------------- */

/* What recall needs of the window, seen on its way to the output (a tee
 * in front of the output's sink): its events' ids and the text of its
 * latest user message. */
typedef struct recall_window {
	memd_context_sink next;  /* the output's sink */
	char **ids;              /* malloc'd, each malloc'd */
	size_t n_ids, cap_ids;
	char *last_user;         /* malloc'd; NULL: none */
	int has_summary;
} recall_window;

static void recall_window_clear(recall_window *w)
{
	for (size_t i = 0; i < w->n_ids; i++)
		free(w->ids[i]);
	free(w->ids);
	free(w->last_user);
	memset(w, 0, sizeof(*w));
}

static int32_t tee_summary(void *ud, const memd_event *e)
{
	recall_window *w = ud;
	w->has_summary = 1;
	return w->next.summary(w->next.userdata, e);
}

static int32_t tee_event(void *ud, const memd_event *e)
{
	recall_window *w = ud;

	if (e->id) {
		if (w->n_ids == w->cap_ids) {
			size_t cap = w->cap_ids ? w->cap_ids * 2 : RECALL_IDS_MIN;
			char **v = realloc(w->ids, cap * sizeof(*v));
			if (!v)
				return MEMD_ENOMEM;
			w->ids = v;
			w->cap_ids = cap;
		}
		if (!(w->ids[w->n_ids] = strdup(e->id)))
			return MEMD_ENOMEM;
		w->n_ids++;
	}
	if (e->role && strcmp(e->role, "user") == 0 && e->text && *e->text) {
		char *t = strdup(e->text);
		if (!t)
			return MEMD_ENOMEM;
		free(w->last_user);
		w->last_user = t;
	}
	return w->next.event ? w->next.event(w->next.userdata, e) : 0;
}

static int32_t tee_ignore(void *ud, const memd_event *e)
{
	(void)ud;
	(void)e;
	return 0;
}

/* The recall budget in tokens: recall.max_tokens, and at most the
 * strategy's max_tokens (when it has that key) less window_tokens. */
static int64_t recall_budget(memd *m, const char *app_name, const settings_recall *rc,
			     int64_t window_tokens)
{
	int64_t budget = rc->max_tokens, strategy_max;

	for (size_t i = 0; i < m->n_apps; i++) {
		const memd_host *h;
		if (strcmp(m->apps[i].app, app_name) != 0)
			continue;
		h = loader_instance_host(m->apps[i].inst);
		if (h && h->config_int && h->config_int(h, "max_tokens", &strategy_max) == 0 &&
		    strategy_max - window_tokens < budget)
			budget = strategy_max - window_tokens;
	}
	return budget > 0 ? budget : 0;
}

/* The recall of the window w of sc for the app's settings rc: query (NULL
 * = w's latest user message) through the index, the window's events left
 * out, best first within the budget. *ret_section: {"query": str | null,
 * "items": [search result...], "tokens": int} (new). Recall adds to the
 * context and never takes it away: a search that fails (no index, a
 * rebuild of the user running, an index behind its deadline) gives no
 * items and the section says why in "error": {"code", "message",
 * "retryable"}, as an error body would; only a lack of memory fails. */
static int32_t recall(memd *m, const memd_call *call, const memd_scope *sc, const char *app_name,
		      const settings_recall *rc, const recall_window *w, const char *query,
		      int64_t window_tokens, json_t **ret_section, int64_t *ret_tokens,
		      memd_error *err)
{
	index_query q = { 0 };
	memd_error serr = { sizeof(serr), 0, 0, { 0 } };
	json_t *found = NULL, *items = json_array(), *failure = NULL, *it, *sec;
	int64_t budget = recall_budget(m, app_name, rc, window_tokens), used = 0;
	size_t i;
	int32_t r = 0;

	if (!query || !*query)
		query = w->last_user;
	if (!items)
		return service_oom(err);
	if (query && *query && budget > 0) {
		q.query = query;
		q.k = (uint32_t)rc->k;
		q.mode = rc->mode;
		q.sources = ((rc->sources & SETTINGS_RECALL_EVENTS) ? INDEX_SOURCE_EVENTS : 0) |
			    ((rc->sources & SETTINGS_RECALL_MEMORIES) ? INDEX_SOURCE_MEMORIES : 0);
		q.exclude_session = sc->session;
		q.exclude_ids = (const char *const *)w->ids;
		q.n_exclude = w->n_ids;
		q.min_score = rc->min_score;
		q.now_us = service_clock_us(m);
		if (!m->index)
			r = memd_error_set(&serr, MEMD_EINVAL, 0,
					   "working_memory.recall: search is not enabled (index)");
		else
			r = index_search_results(m->index, call, sc->app, sc->user, &q,
						 (void **)&found, &serr);
		if (r == MEMD_ENOMEM) {
			json_decref(items);
			*err = serr;
			return r;
		}
		if (r < 0 && !(failure = ej_error(r, serr.msg, serr.flags))) {
			json_decref(items);
			return service_oom(err);
		}
		r = 0;
	}
	json_array_foreach(found, i, it) {
		const char *text = json_string_value(json_object_get(it, "text"));
		int64_t t = 0;
		if (!text)
			continue;
		hostsvc_count_tokens(m->svc, text, strlen(text), &t);
		if (used + t > budget)
			continue;
		if (json_array_append(items, it) < 0) {
			r = service_oom(err);
			goto out;
		}
		used += t;
	}
	sec = json_pack("{s:s?,s:O,s:I,s:o*}", "query", query && *query ? query : NULL, "items",
			items, "tokens", (json_int_t)used, "error", failure);
	failure = NULL;
	if (!sec) {
		r = service_oom(err);
		goto out;
	}
	*ret_section = sec;
	*ret_tokens = used;
out:
	json_decref(found);
	json_decref(items);
	return r;
}

/* The recalled items as one system message (RECALL_HEADER's format), or
 * NULL (*ret_msg) when there are none. */
static int32_t recall_message(const json_t *items, json_t **ret_msg, memd_error *err)
{
	size_t i, len = sizeof(RECALL_HEADER), off;
	json_t *it, *msg;
	char *text;

	*ret_msg = NULL;
	if (!json_array_size(items))
		return 0;
	json_array_foreach(items, i, it) {
		const char *who = json_string_value(json_object_get(it, "author"));
		if (!who)
			who = json_string_value(json_object_get(it, "role"));
		len += strlen(json_string_value(json_object_get(it, "text"))) + (who ? strlen(who) : 0) +
		       EJ_TIME_LEN + sizeof("\n- [] : ");
	}
	if (!(text = malloc(len)))
		return service_oom(err);
	off = (size_t)snprintf(text, len, "%s", RECALL_HEADER);
	json_array_foreach(items, i, it) {
		const char *t = json_string_value(json_object_get(it, "text"));
		const char *ts = json_string_value(json_object_get(it, "timestamp"));
		const char *who = json_string_value(json_object_get(it, "author"));
		if (!who)
			who = json_string_value(json_object_get(it, "role"));
		if (ts)
			off += (size_t)snprintf(text + off, len - off, "\n- [%s] %s: %s", ts,
						who ? who : "", t);
		else
			off += (size_t)snprintf(text + off, len - off, "\n- %s", t);
	}
	msg = json_pack("{s:s,s:s}", "role", "system", "content", text);
	free(text);
	if (!msg)
		return service_oom(err);
	*ret_msg = msg;
	return 0;
}

/* o (an OpenAI context) with the recall: its items as a system message
 * after the summary's (first), "tokens" counting them. */
static int32_t recall_into_openai(json_t *o, const json_t *section, int has_summary,
				  memd_error *err)
{
	json_t *msg = NULL, *messages = json_object_get(o, "messages");
	int64_t tokens = json_integer_value(json_object_get(o, "tokens"));
	int32_t r;

	if ((r = recall_message(json_object_get(section, "items"), &msg, err)) < 0 || !msg)
		return r;
	if (json_array_insert_new(messages, has_summary && json_array_size(messages) ? 1 : 0,
				  msg) < 0 ||
	    json_object_set_new(o, "tokens",
				json_integer(tokens + json_integer_value(
							      json_object_get(section, "tokens")))) < 0)
		return service_oom(err);
	return 0;
}

/* ---- reading ---------------------------------------------------------------- */

int32_t memd_context(memd *m, const char *app, const char *user, const char *sid, char **ret_json,
		     memd_error *err)
{
	memd_call call = service_call_for_request(m);
	return service_context_read(m, &call, app, user, sid, 0, ret_json, err);
}

int32_t memd_context_read(memd *m, const char *app, const char *user, const char *sid,
			  uint32_t flags, char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	return service_context_read(m, &call, app, user, sid, flags, ret_json, err);
}

int32_t memd_context_recall(memd *m, const char *app, const char *user, const char *sid,
			    uint32_t flags, const char *query, char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	return service_context_recall(m, &call, app, user, sid, flags, query, ret_json, err);
}

int32_t service_context(memd *m, const memd_call *call, const char *app, const char *user,
			const char *sid, char **ret_json, memd_error *err)
{
	return service_context_read(m, call, app, user, sid, 0, ret_json, err);
}

int32_t service_context_read(memd *m, const memd_call *call, const char *app, const char *user,
			     const char *sid, uint32_t flags, char **ret_json, memd_error *err)
{
	return service_context_recall(m, call, app, user, sid, flags, NULL, ret_json, err);
}

int32_t service_context_recall(memd *m, const memd_call *call, const char *app, const char *user,
			       const char *sid, uint32_t flags, const char *query, char **ret_json,
			       memd_error *err)
{
	return service_context_view(m, call, app, user, sid, flags, query, NULL, ret_json, err);
}

int32_t service_check_recall_query(const char *query, memd_error *err)
{
	if (query && strlen(query) > RECALL_QUERY_MAX)
		return memd_error_set(err, MEMD_EINVAL, 0, "query: at most %d bytes", RECALL_QUERY_MAX);
	return 0;
}

int32_t service_context_view(memd *m, const memd_call *call, const char *app, const char *user,
			     const char *sid, uint32_t flags, const char *query,
			     const strategy_view *view, char **ret_json, memd_error *err)
{
	memd_scope sc;
	jo_context c;
	memd_context_sink sink = { sizeof(sink), &c, ctx_summary, ctx_event };
	recall_window w = { .next = { 0 } };
	memd_context_sink tee = { sizeof(tee), &w, tee_summary, tee_event };
	const settings_recall *rc;
	const char *app_name;
	notice_peek np = { 0 };
	json_t *section = NULL;
	char *section_text = NULL;
	int64_t recall_tokens = 0;
	strategy *st;
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0)
		return r;
	if ((r = service_check_recall_query(query, err)) < 0)
		return r;
	st = service_strategy_for(m, app, &app_name);
	if (!st)
		return memd_error_set(err, MEMD_EINTERNAL, 0, "no strategy for app '%.64s'", app);
	rc = &settings_app_for(&m->set, app_name)->recall;
	if (!rc->enabled)
		rc = NULL;
	if (flags & MEMD_READ_OPENAI) {
		json_t *o = NULL;
		const char *reason = NULL, *text = NULL;
		memd_context_sink ignore = { sizeof(ignore), NULL, tee_ignore, tee_ignore };
		w.next = ignore;
		if ((r = service_context_openai(m, call, &sc, st, view, rc ? &tee : NULL, &o,
						  err)) < 0)
			goto out;
		if (rc && ((r = recall(m, call, &sc, app_name, rc, &w, query,
				       json_integer_value(json_object_get(o, "tokens")), &section,
				       &recall_tokens, err)) < 0 ||
			   (r = recall_into_openai(o, section, w.has_summary, err)) < 0)) {
			json_decref(o);
			goto out;
		}
		take_notice(m, call, &sc, &reason, &text, &np);
		if (reason && json_object_set_new(o, "notice", json_pack("{s:s,s:s}", "reason", reason,
									  "text", text)) < 0) {
			json_decref(o);
			o = NULL;
		}
		r = service_finish_bounded(m, o,
					   "the context is one consistent view and is not paged: "
					   "give the app a strategy with a window (buffer_window, "
					   "token_window, summary_buffer)", ret_json, err);
		goto out;
	}
	jo_context_begin(&c, strategy_plugin_name(st));
	c.out.max_len = (size_t)m->set.max_response_bytes;
	c.out.no_text = (flags & MEMD_READ_NO_TEXT) != 0;
	w.next = sink;
	r = c.out.error ? c.out.error
			: strategy_context_view(st, m->sessions, call, &sc, view,
						rc ? &tee : &sink, err);
	if (r == 0 && !c.out.error && rc) {
		if ((r = recall(m, call, &sc, app_name, rc, &w, query, c.tokens, &section,
				&recall_tokens, err)) < 0) {
			jo_context_clear(&c);
			goto out;
		}
		if (!(section_text = ej_dump(section))) {
			jo_context_clear(&c);
			r = service_oom(err);
			goto out;
		}
		c.memories_json = section_text;
		c.tokens += recall_tokens;
	}
	if (r == 0 && !c.out.error)
		take_notice(m, call, &sc, &c.notice_reason, &c.notice_text, &np);
	if (r < 0 || c.out.error) {
		r = service_read_failed(m, &c.out, r,
					"the context is one consistent view and is not paged: "
					"give the app a strategy with a window (buffer_window, "
					"token_window, summary_buffer), or read the events in pages "
					"(GET .../sessions/{id}/events)", err);
		jo_context_clear(&c);
		goto out;
	}
	r = jo_context_finish(&c, ret_json) < 0 ? service_oom(err) : 0;
out:
	json_decref(section);
	free(section_text);
	recall_window_clear(&w);
	free(np.reason);
	free(np.platform);
	free(np.chat_type);
	return r;
}
