/* SPDX-License-Identifier: MIT */
#include "window.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define TOOL_RESULT_KEY "tool_result"

/* ---- owned events ---------------------------------------------------------- */

static size_t slen(const char *s)
{
	return s ? strlen(s) + 1 : 0;
}

static const char *put(char **at, const char *s)
{
	char *d;
	size_t n;
	if (!s)
		return NULL;
	n = strlen(s) + 1;
	d = *at;
	memcpy(d, s, n);
	*at += n;
	return d;
}

int32_t win_copy(const memd_event *e, win_event *out)
{
	const char *const strs[] = { e->id, e->invocation_id, e->author, e->role, e->branch,
				     e->content_json, e->actions_json, e->metadata_json, e->text,
				     e->app, e->user, e->session };
	size_t total = 1;
	char *buf, *at;
	memd_event c = { 0 };

	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
		total += slen(strs[i]);
	buf = malloc(total);
	if (!buf)
		return MEMD_ENOMEM;
	memcpy(&c, e, e->struct_size < sizeof(c) ? e->struct_size : sizeof(c));
	c.struct_size = sizeof(c);
	at = buf;
	c.id = put(&at, e->id);
	c.invocation_id = put(&at, e->invocation_id);
	c.author = put(&at, e->author);
	c.role = put(&at, e->role);
	c.branch = put(&at, e->branch);
	c.content_json = put(&at, e->content_json);
	c.actions_json = put(&at, e->actions_json);
	c.metadata_json = put(&at, e->metadata_json);
	c.text = put(&at, e->text);
	c.app = put(&at, e->app);
	c.user = put(&at, e->user);
	c.session = put(&at, e->session);
	out->ev = c;
	out->buf = buf;
	return 0;
}

void win_event_clear(win_event *e)
{
	if (!e)
		return;
	free(e->buf);
	memset(e, 0, sizeof(*e));
}

int win_is_tool_result(const memd_event *e)
{
	json_t *content, *parts, *part;
	size_t i;
	int found = 0;

	if (e->role && strcmp(e->role, "tool") == 0)
		return 1;
	if (!e->content_json || !strstr(e->content_json, TOOL_RESULT_KEY))
		return 0; /* cheap test first: most events have no tool result */
	content = json_loads(e->content_json, 0, NULL);
	parts = json_object_get(content, "parts");
	json_array_foreach(parts, i, part) {
		if (json_is_object(json_object_get(part, TOOL_RESULT_KEY))) {
			found = 1;
			break;
		}
	}
	json_decref(content);
	return found;
}

/* ---- lists ------------------------------------------------------------------ */

void win_list_clear(win_list *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++)
		win_event_clear(&l->v[i]);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

/* Move e (now owned by l) to the end of l. */
static int32_t list_take(win_list *l, win_event *e)
{
	if (l->n == l->cap) {
		size_t ncap = l->cap ? 2 * l->cap : WIN_PAGE_FIRST;
		win_event *grown = realloc(l->v, ncap * sizeof(*grown));
		if (!grown)
			return MEMD_ENOMEM;
		l->v = grown;
		l->cap = ncap;
	}
	l->v[l->n++] = *e;
	l->tokens += e->ev.tokens;
	memset(e, 0, sizeof(*e));
	return 0;
}

static int32_t page_add(void *userdata, const memd_event *e)
{
	win_list *page = userdata;
	win_event c;
	int32_t r;
	if (page->n == page->cap)
		return MEMD_EINTERNAL; /* the reader ignored the limit */
	if ((r = win_copy(e, &c)) < 0)
		return r;
	page->v[page->n++] = c;
	return 0;
}

/* ---- the window ----------------------------------------------------------- */

typedef struct walk {
	const win_opts *o;
	win_list kept;   /* newest first */
	win_list unit;   /* the unit being gathered, newest first */
	int full;        /* a unit did not fit: stop */
} walk;

static int32_t unit_done(walk *w)
{
	int32_t r;
	int64_t budget = w->o->budget > 0 ? w->o->budget : 0;
	if (!w->unit.n)
		return 0;
	if (w->kept.n >= w->o->preserve && w->kept.tokens + w->unit.tokens > budget) {
		w->full = 1;
		return 0;
	}
	for (size_t i = 0; i < w->unit.n; i++)
		if ((r = list_take(&w->kept, &w->unit.v[i])) < 0)
			return r;
	w->unit.n = 0;
	w->unit.tokens = 0;
	return 0;
}

int32_t win_collect(const memd_reader *r, const memd_call *call, const win_opts *o,
		    win_list *ret, memd_error *err)
{
	walk w = { .o = o };
	win_list page = { 0 };
	uint32_t size = WIN_PAGE_FIRST;
	int64_t before = 0;
	int32_t rc = 0;

	page.v = malloc(WIN_PAGE_MAX * sizeof(*page.v));
	if (!page.v)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	while (!w.full) {
		memd_event_query q = {
			.struct_size = sizeof(q),
			.flags = MEMD_EVQ_NEWEST | MEMD_EVQ_NO_SUMMARY,
			.after_seq = o->after_seq,
			.before_seq = before,
			.limit = size,
		};
		memd_event_sink sink = { sizeof(sink), &page, page_add };
		size_t got;

		page.n = 0;
		page.cap = size;
		if ((rc = r->events(r, call, &q, &sink, err)) < 0) {
			if (rc == MEMD_ENOMEM || rc == MEMD_EINTERNAL)
				memd_error_set(err, rc, 0, "token window: %s",
					       rc == MEMD_ENOMEM ? "out of memory" : "reader sent too many events");
			break;
		}
		got = page.n;
		if (got)
			before = page.v[0].ev.seq;
		for (size_t i = got; i-- > 0 && !w.full;) {
			win_event *e = &page.v[i];
			int result = win_is_tool_result(&e->ev);
			if ((rc = list_take(&w.unit, e)) < 0)
				break;
			if (!result && (rc = unit_done(&w)) < 0)
				break;
		}
		for (size_t i = 0; i < got; i++)
			win_event_clear(&page.v[i]);
		if (rc < 0) {
			memd_error_set(err, rc, 0, "out of memory");
			break;
		}
		if (got < size) {
			/* The start of what may be read: tool results whose call is
			 * not there form a unit of their own. */
			if (!w.full && (rc = unit_done(&w)) < 0)
				memd_error_set(err, rc, 0, "out of memory");
			break;
		}
		if (size < WIN_PAGE_MAX)
			size *= 2;
	}
	page.n = 0;
	win_list_clear(&page);
	win_list_clear(&w.unit);
	if (rc < 0) {
		win_list_clear(&w.kept);
		return rc;
	}
	/* newest first -> ascending */
	for (size_t i = 0, j = w.kept.n; i + 1 < j; i++, j--) {
		win_event t = w.kept.v[i];
		w.kept.v[i] = w.kept.v[j - 1];
		w.kept.v[j - 1] = t;
	}
	*ret = w.kept;
	return 0;
}

int32_t win_emit(const win_list *l, const memd_context_sink *out)
{
	for (size_t i = 0; i < l->n; i++) {
		int32_t r = out->event(out->userdata, &l->v[i].ev);
		if (r)
			return r;
	}
	return 0;
}
