/* SPDX-License-Identifier: MIT */
/*
 * service_sessions: memd_session_create, _get, _list (with its cursors),
 * _patch and _delete.
 */
#include "service/service_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json/event_json.h"
#include "util/uuid.h"

static int32_t sink_session_json(void *ud, const memd_session *s)
{
	json_t **slot = ud;
	json_decref(*slot);
	*slot = ej_session(s);
	return *slot ? 0 : MEMD_ENOMEM;
}

static int32_t sink_session_array(void *ud, const memd_session *s)
{
	json_t *o = ej_session(s);
	return o && json_array_append_new(ud, o) == 0 ? 0 : MEMD_ENOMEM;
}

/* Sinks of the read path: records written as JSON text (json_out.h). */
typedef struct get_ctx {
	jo_session_get g;
	int64_t last_seq;          /* of the session delivered */
} get_ctx;

static int32_t sink_get_session(void *ud, const memd_session *s)
{
	get_ctx *x = ud;
	x->last_seq = s->last_seq;
	return jo_session_get_session(&x->g, s);
}

static int32_t count_event(void *ud, const memd_event *e)
{
	(void)e;
	(*(int64_t *)ud)++;
	return 0;
}

static int32_t sink_get_event(void *ud, const memd_event *e)
{
	get_ctx *x = ud;
	return jo_session_get_event(&x->g, e);
}

int32_t service_session_json(memd *m, const memd_call *call, const memd_scope *sc, json_t **ret,
			     memd_error *err)
{
	json_t *o = NULL;
	memd_session_sink sink = { sizeof(sink), &o, sink_session_json };
	int32_t r = store_session_get(m->sessions, call, sc, &sink, err);
	if (r < 0) {
		json_decref(o);
		return r;
	}
	if (!o)
		return memd_error_set(err, MEMD_EINTERNAL, 0, "%s: session_get delivered nothing",
				      store_name(m->sessions));
	*ret = o;
	return 0;
}

static const char *const create_fields[] = { "id", "title", "metadata", "state", NULL };

int32_t memd_session_create(memd *m, const char *app, const char *user, const char *body_json,
			    char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	json_t *body = NULL, *meta, *state, *keep = NULL, *temp = NULL, *out = NULL;
	const char *id, *title;
	char idbuf[UUID_TEXT_LEN + 1], *meta_text = NULL, *state_text = NULL;
	memd_session s = { .struct_size = sizeof(s) };
	memd_session_sink sink = { sizeof(sink), &out, sink_session_json };
	int32_t r;

	if ((r = service_check_scope(app, user, NULL, &sc, err)) < 0 ||
	    (r = service_parse_body(body_json, &body, err)) < 0)
		return r;
	if ((r = service_check_fields(body, create_fields, err)) < 0 ||
	    (r = service_opt_string_field(body, "id", &id, err)) < 0 ||
	    (r = service_opt_string_field(body, "title", &title, err)) < 0 ||
	    (r = service_opt_object_field(body, "metadata", &meta, err)) < 0 ||
	    (r = service_opt_object_field(body, "state", &state, err)) < 0)
		goto out;
	if (id && (r = ej_check_id(id, "id", err)) < 0)
		goto out;
	if (!id) {
		if (uuid_v7(idbuf) < 0) {
			r = memd_error_set(err, MEMD_EIO, 0, "cannot generate a session id");
			goto out;
		}
		id = idbuf;
	}
	if (title && !ej_utf8_valid(title, strlen(title))) {
		r = memd_error_set(err, MEMD_EINVAL, 0, "title: not valid UTF-8");
		goto out;
	}
	if (state && (r = service_split_delta(state, &keep, &temp, err)) < 0)
		goto out;
	meta_text = meta ? ej_dump(meta) : strdup("{}");
	state_text = keep && json_object_size(keep) ? ej_dump(keep) : NULL;
	if (!meta_text || (keep && json_object_size(keep) && !state_text)) {
		r = service_oom(err);
		goto out;
	}
	s.app = app;
	s.user = user;
	s.id = id;
	s.title = title;
	s.metadata_json = meta_text;
	s.created_us = s.updated_us = service_clock_us(m);
	if ((r = store_session_create(m->sessions, &call, &s, state_text, &sink, err)) < 0)
		goto out;
	sc.session = id;
	if (temp && (r = service_apply_temp(m, &sc, NULL, temp, err)) < 0)
		goto out;
	r = service_finish(out, ret_json, err);
	out = NULL;
out:
	json_decref(out);
	json_decref(keep);
	json_decref(temp);
	json_decref(body);
	free(meta_text);
	free(state_text);
	return r;
}

/* What a client whose session get went over the limit can do instead. */
#define HOW_TO_PAGE_EVENTS                                                                  \
	"read the events in pages (GET .../sessions/{id}/events?after_seq=N&limit=M, "      \
	"following next_after_seq) or ask for fewer (?events=N: the newest N)"

int32_t memd_session_get(memd *m, const char *app, const char *user, const char *sid,
			 const memd_get_options *opts, char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	get_ctx x = { 0 };
	jo_session_get *g = &x.g;
	memd_session_sink sink = { sizeof(sink), &x, sink_get_session };
	memd_get_options o = { 0 };
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0)
		return r;
	if (opts)
		memcpy(&o, opts, opts->struct_size < sizeof(o) ? opts->struct_size : sizeof(o));
	jo_session_get_init(g);
	g->out.max_len = (size_t)m->set.max_response_bytes;
	g->out.no_text = (o.flags & MEMD_READ_NO_TEXT) != 0;
	r = store_session_get(m->sessions, &call, &sc, &sink, err);
	if (r < 0 || g->out.error) {
		r = service_read_failed(m, &g->out, r, NULL, err);
		goto fail;
	}
	if (!g->has_session) {
		r = memd_error_set(err, MEMD_EINTERNAL, 0, "%s: session_get delivered nothing",
				   store_name(m->sessions));
		goto fail;
	}
	if (o.flags & MEMD_GET_EVENTS) {
		memd_event_query q = {
			.struct_size = sizeof(q),
			.flags = o.events ? MEMD_EVQ_NEWEST : 0,
			.after_seq = o.after_seq,
			.after_time_us = o.after_time_us,
			.limit = o.events,
		};
		memd_event_sink events = { sizeof(events), &x, sink_get_event };
		if (o.after_seq < 0) {
			r = memd_error_set(err, MEMD_EINVAL, 0, "after_seq: must not be negative");
			goto fail;
		}
		if (o.events && !o.after_time_us) {
			/* Read in seq order, a store streams the events; asked
			 * for the newest, it keeps N copies first. The newest N
			 * are the N up to the session's last_seq while that
			 * range has no gap: always before 1.2; from 1.2 on,
			 * hidden events (rewinds) leave gaps, so the range's
			 * visible events are counted first (streamed, nothing
			 * kept), and only a range with gaps takes the store's
			 * NEWEST window. */
			int64_t from = x.last_seq - (int64_t)o.events;
			int gapless = from <= q.after_seq || store_minor(m->sessions) < 2;
			if (!gapless) {
				int64_t n = 0;
				memd_event_query cq = { .struct_size = sizeof(cq), .after_seq = from };
				memd_event_sink counter = { sizeof(counter), &n, count_event };
				if ((r = store_events_load(m->sessions, &call, &sc, &cq, &counter,
							   err)) < 0)
					goto fail;
				gapless = n == (int64_t)o.events;
			}
			if (gapless) {
				if (from > q.after_seq)
					q.after_seq = from;
				q.flags &= ~MEMD_EVQ_NEWEST;
			}
		}
		jo_session_get_events(g);
		r = store_events_load(m->sessions, &call, &sc, &q, &events, err);
		if (r < 0 || g->out.error) {
			r = service_read_failed(m, &g->out, r, HOW_TO_PAGE_EVENTS, err);
			goto fail;
		}
	}
	return jo_session_get_finish(g, ret_json) < 0 ? service_oom(err) : 0;
fail:
	jo_session_get_clear(g);
	return r;
}

/* Cursor text: "<created_us>.<hex of id>", or for the activity order
 * "a<updated_us>.<hex of id>" (so that a cursor of one order is refused
 * by the other). */
#define ACTIVITY_CURSOR 'a'

char *service_list_cursor_encode(int activity, int64_t at_us, const char *id)
{
	static const char hex[] = "0123456789abcdef";
	size_t len = strlen(id), off;
	char *c = malloc(32 + 2 * len);
	if (!c)
		return NULL;
	off = (size_t)snprintf(c, 32, "%s%" PRId64 ".", activity ? "a" : "", at_us);
	for (size_t i = 0; i < len; i++) {
		c[off++] = hex[(unsigned char)id[i] >> 4];
		c[off++] = hex[(unsigned char)id[i] & 0xf];
	}
	c[off] = '\0';
	return c;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

int32_t service_list_cursor_decode(int activity, const char *c, int64_t *ret_created,
				   char **ret_id, memd_error *err)
{
	char *end, *id;
	long long created;
	size_t hexlen;

	if ((*c == ACTIVITY_CURSOR) != activity)
		goto bad;
	c += activity;
	if (*c < '0' || *c > '9')
		goto bad;
	created = strtoll(c, &end, 10);
	if (end == c || *end != '.' || created < 0)
		goto bad;
	end++;
	hexlen = strlen(end);
	if (hexlen == 0 || hexlen % 2 || hexlen / 2 > MEMD_ID_MAX)
		goto bad;
	id = malloc(hexlen / 2 + 1);
	if (!id)
		return service_oom(err);
	for (size_t i = 0; i < hexlen / 2; i++) {
		int hi = hexval(end[2 * i]), lo = hexval(end[2 * i + 1]);
		if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
			free(id);
			goto bad;
		}
		id[i] = (char)(hi << 4 | lo);
	}
	id[hexlen / 2] = '\0';
	*ret_created = created;
	*ret_id = id;
	return 0;
bad:
	return memd_error_set(err, MEMD_EINVAL, 0, "cursor: not a cursor memd returned");
}

int32_t memd_session_list(memd *m, const char *app, const char *user, const char *cursor,
			  uint32_t limit, uint32_t flags, char **ret_json, memd_error *err)
{
	memd_session_list_options o = { .struct_size = sizeof(o), .flags = flags, .limit = limit,
					.cursor = cursor };
	return memd_session_list_filtered(m, app, user, &o, ret_json, err);
}

int32_t memd_session_list_filtered(memd *m, const char *app, const char *user,
				   const memd_session_list_options *opts, char **ret_json,
				   memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	memd_session_query q = { .struct_size = sizeof(q) };
	memd_session_list_options lo = { 0 };
	json_t *arr = NULL, *o;
	char *after_id = NULL, *next = NULL, platform[MEMD_ID_MAX + 1];
	const char *cursor;
	uint32_t limit, flags;
	int activity;
	memd_session_sink sink;
	int32_t r;

	if ((r = service_check_scope(app, user, NULL, &sc, err)) < 0)
		return r;
	if (opts)
		memcpy(&lo, opts, opts->struct_size < sizeof(lo) ? opts->struct_size : sizeof(lo));
	cursor = lo.cursor;
	limit = lo.limit;
	flags = lo.flags;
	if (lo.lane_key && (r = ej_check_id(lo.lane_key, "lane", err)) < 0)
		return r;
	if (lo.origin_platform) {
		size_t n = strlen(lo.origin_platform);
		if (n == 0 || n > MEMD_ID_MAX)
			return memd_error_set(err, MEMD_EINVAL, 0, "origin_platform: 1..%d bytes",
					      MEMD_ID_MAX);
		/* Platforms are kept in lowercase (as lane keys carry them). */
		for (size_t i = 0; i <= n; i++) {
			char ch = lo.origin_platform[i];
			platform[i] = ch >= 'A' && ch <= 'Z' ? (char)(ch - 'A' + 'a') : ch;
		}
		q.origin_platform = platform;
	}
	q.lane_key = lo.lane_key;
	if (lo.order != MEMD_ORDER_CREATED && lo.order != MEMD_ORDER_ACTIVITY)
		return memd_error_set(err, MEMD_EINVAL, 0, "order: must be created or activity");
	if (lo.active_within_s < 0 || lo.active_within_s > INT64_MAX / US_PER_SEC)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "active_within: must be a non-negative number of seconds");
	activity = lo.order == MEMD_ORDER_ACTIVITY;
	/* A store before 1.2 would ignore both and answer another list. */
	if ((activity || lo.active_within_s) && store_minor(m->sessions) < 2)
		return memd_error_set(err, MEMD_ENOTSUP, 0,
				      "%s: lists sessions by creation only (a store of ABI 1.2 or "
				      "later lists them by activity)",
				      store_name(m->sessions));
	if (lo.active_within_s)
		q.updated_after_us = service_clock_us(m) - lo.active_within_s * US_PER_SEC;
	if (limit == 0)
		limit = MEMD_LIST_LIMIT_DEFAULT;
	if (limit > MEMD_LIST_LIMIT_MAX)
		return memd_error_set(err, MEMD_EINVAL, 0, "limit: at most %d", MEMD_LIST_LIMIT_MAX);
	if (cursor && *cursor &&
	    (r = service_list_cursor_decode(activity, cursor, &q.before_created_us, &after_id,
					    err)) < 0)
		return r;
	q.before_id = after_id;
	q.limit = limit + 1; /* one more tells whether there is a next page */
	q.flags = flags & MEMD_LIST_INCLUDE_ARCHIVED ? MEMD_SQ_INCLUDE_ARCHIVED : 0;
	if (activity)
		q.flags |= MEMD_SQ_BY_ACTIVITY;
	arr = json_array();
	if (!arr) {
		r = service_oom(err);
		goto out;
	}
	sink = (memd_session_sink){ sizeof(sink), arr, sink_session_array };
	if ((r = store_session_list(m->sessions, &call, &sc, &q, &sink, err)) < 0)
		goto out;
	if (json_array_size(arr) > limit) {
		json_t *last = json_array_get(arr, limit - 1);
		int64_t created;
		json_array_remove(arr, limit);
		if (ej_parse_time(json_string_value(json_object_get(last, activity ? "updated"
											: "created")),
				  &created) < 0 ||
		    !(next = service_list_cursor_encode(activity, created,
					   json_string_value(json_object_get(last, "id"))))) {
			r = service_oom(err);
			goto out;
		}
	}
	o = json_pack("{s:O,s:s?}", "sessions", arr, "next_cursor", next);
	r = service_finish(o, ret_json, err);
out:
	json_decref(arr);
	free(after_id);
	free(next);
	return r;
}

static const char *const patch_fields[] = { "title", "metadata", "archived", NULL };

int32_t memd_session_patch(memd *m, const char *app, const char *user, const char *sid,
			   const char *body_json, char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	memd_session_update p = { .struct_size = sizeof(p) };
	json_t *body = NULL, *v, *out = NULL;
	memd_session_sink sink = { sizeof(sink), &out, sink_session_json };
	char *meta = NULL;
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0 ||
	    (r = service_parse_body(body_json, &body, err)) < 0)
		return r;
	if ((r = service_check_fields(body, patch_fields, err)) < 0)
		goto out;
	if ((v = json_object_get(body, "title"))) {
		if (!json_is_string(v) || !ej_utf8_valid(json_string_value(v), json_string_length(v))) {
			r = memd_error_set(err, MEMD_EINVAL, 0, "title: must be a string");
			goto out;
		}
		p.fields |= MEMD_PATCH_TITLE;
		p.title = json_string_value(v);
	}
	if ((v = json_object_get(body, "metadata"))) {
		if (!json_is_object(v)) {
			r = memd_error_set(err, MEMD_EINVAL, 0, "metadata: must be an object");
			goto out;
		}
		if (!(meta = ej_dump(v))) {
			r = service_oom(err);
			goto out;
		}
		p.fields |= MEMD_PATCH_METADATA;
		p.metadata_json = meta;
	}
	if ((v = json_object_get(body, "archived"))) {
		if (!json_is_boolean(v)) {
			r = memd_error_set(err, MEMD_EINVAL, 0, "archived: must be true or false");
			goto out;
		}
		p.fields |= MEMD_PATCH_ARCHIVED;
		p.archived = json_is_true(v);
	}
	p.now_us = service_clock_us(m);
	if ((r = store_session_update(m->sessions, &call, &sc, &p, &sink, err)) < 0)
		goto out;
	r = service_finish(out, ret_json, err);
	out = NULL;
out:
	json_decref(out);
	json_decref(body);
	free(meta);
	return r;
}

int32_t memd_session_delete(memd *m, const char *app, const char *user, const char *sid,
			    memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0)
		return r;
	if ((r = store_session_delete(m->sessions, &call, &sc, err)) < 0)
		return r;
	index_notify(m->index);
	temp_state_drop(m->temp, app, user, sid);
	return 0;
}
