/* SPDX-License-Identifier: MIT */
/*
 * service_lanes: the lanes of memd.h (a chat gateway's conversations):
 * memd_lane_resolve, _open (get-or-create), _open_source, _get, _list,
 * _reset, _switch, _suspend, _delete; the lane helpers turns, the inbox
 * and the watcher share (service_int.h).
 *
 * Every change is: read the lane, decide with lanes/ (policy, priority),
 * one conditional lane_write expecting the version read; a write that
 * lost a race (MEMD_ECONFLICT) is re-read and re-decided, at most
 * SERVICE_LANE_TRIES times. The store applies each write, with the
 * sessions it creates, ends or reopens, in one transaction.
 */
#include "service/service_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json/event_json.h"
#include "json/json_out.h"
#include "json/lane_json.h"
#include "lanes/lane_key.h"
#include "util/uuid.h"

/* An open that finds the lane's last activity this recent (and nothing
 * else to change) does not write it again: activity is kept to the
 * second, far finer than any idle policy (minutes). */
#define LANE_ACTIVITY_GRANULARITY_US 1000000LL
/* Longest display name (chat_name, user_name) in a source, in bytes. */
#define LANE_SOURCE_NAME_MAX 1024
/* The end reason of a session a reset replaced (the gateway's). */
#define LANE_END_RESET "session_reset"
/* The end reason of a session a switch left. */
#define LANE_END_SWITCH "session_switch"
/* Start reasons (memd_session.start_reason, reset.reason). */
#define LANE_REASON_SUSPENDED "suspended"
#define LANE_REASON_EXPLICIT "explicit"
#define LANE_REASON_SWITCH "switch"
/* The lane's session was deleted: the open starts a new one. */
#define LANE_REASON_DELETED "deleted"

/* ---- lanes as read and written ------------------------------------------ */

void service_lane_clear(service_lane *sl)
{
	if (!sl)
		return;
	for (size_t i = 0; i < sizeof(sl->own) / sizeof(sl->own[0]); i++)
		free(sl->own[i]);
	memset(sl, 0, sizeof(*sl));
}

/* Copy *src into dst (cleared), its strings owned by dst. */
static int lane_copy(const memd_lane *src, service_lane *dst)
{
	const char **fields[] = { &dst->l.app, &dst->l.user, &dst->l.key, &dst->l.session,
				  &dst->l.origin_json, &dst->l.resume_reason,
				  &dst->l.reset_reason, &dst->l.previous_session,
				  &dst->l.turn_id };
	int bad = 0;

	service_lane_clear(dst);
	dst->l = *src;
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		if (!*fields[i])
			continue;
		dst->own[i] = strdup(*fields[i]);
		bad |= !dst->own[i];
		*fields[i] = dst->own[i];
	}
	return bad ? MEMD_ENOMEM : 0;
}

static int32_t sink_lane_copy(void *ud, const memd_lane *l)
{
	return lane_copy(l, ud);
}

/* service_lane_read, and the lane's session to session_out (NULL: not
 * asked) from the same store read. */
static int32_t lane_read(memd *m, const memd_call *call, const memd_scope *sc, const char *key,
			 service_lane *ret, const memd_session_sink *session_out, memd_error *err)
{
	memd_lane_sink sink = { sizeof(sink), ret, sink_lane_copy };
	int32_t r;

	service_lane_clear(ret);
	r = store_lane_get(m->sessions, call, sc, key, &sink, session_out, err);
	if (r == MEMD_ENOTFOUND)
		return memd_error_set(err, MEMD_ENOTFOUND, 0,
				      "no lane '%.255s' of user '%.255s' (open it first)", key, sc->user);
	if (r < 0)
		return r;
	if (!ret->l.key)
		return memd_error_set(err, MEMD_EINTERNAL, 0, "%s: lane_get delivered nothing",
				      store_name(m->sessions));
	return 0;
}

int32_t service_lane_read(memd *m, const memd_call *call, const memd_scope *sc, const char *key,
			  service_lane *ret, memd_error *err)
{
	return lane_read(m, call, sc, key, ret, NULL, err);
}

int32_t service_lane_write(memd *m, const memd_call *call, const memd_lane_write *w,
			   service_lane *ret, memd_error *err)
{
	service_lane junk = { 0 };
	service_lane *into = ret ? ret : &junk;
	memd_lane_sink sink = { sizeof(sink), into, sink_lane_copy };
	int32_t r;

	service_lane_clear(into);
	r = store_lane_write(m->sessions, call, w, &sink, err);
	if (r == 0 && !into->l.key)
		r = memd_error_set(err, MEMD_EINTERNAL, 0, "%s: lane_write delivered nothing",
				   store_name(m->sessions));
	service_lane_clear(&junk);
	return r;
}

/* MEMD_ECONFLICT (retryable) for a change that lost its race every time. */
static int32_t lane_busy(const char *key, memd_error *err)
{
	return memd_error_set(err, MEMD_ECONFLICT, MEMD_ERROR_RETRYABLE,
			      "lane '%.255s' changed under %d tries in a row; try again", key,
			      SERVICE_LANE_TRIES);
}

int32_t service_lane_change(memd *m, const memd_call *call, const memd_scope *sc,
			    const char *key, service_lane_decide_fn decide, void *ctx,
			    service_lane *ret, memd_error *err)
{
	service_lane cur = { 0 };
	int32_t r = MEMD_ECONFLICT;

	for (int i = 0; i < SERVICE_LANE_TRIES && r == MEMD_ECONFLICT; i++) {
		memd_lane l;
		memd_lane_write w = { .struct_size = sizeof(w) };
		int64_t now;

		if ((r = service_lane_read(m, call, sc, key, &cur, err)) < 0)
			goto out;
		now = service_clock_us(m);
		l = cur.l;
		if ((r = decide(ctx, &cur.l, &l, &w, now, err)) < 0)
			goto out;
		w.expected_version = cur.l.version;
		w.lane = &l;
		w.now_us = now;
		r = service_lane_write(m, call, &w, ret, err);
	}
	if (r == MEMD_ECONFLICT)
		r = lane_busy(key, err);
out:
	service_lane_clear(&cur);
	return r;
}

json_t *service_lane_json(const memd_lane *l)
{
	return lj_lane(l);
}

void service_lane_interrupt(memd_lane *w, const char *reason, int64_t now_us)
{
	w->turn_id = NULL;
	w->turn_started_us = 0;
	w->turn_lease_until_us = 0;
	if (w->flags & MEMD_LANE_SUSPENDED)
		return;
	w->interruptions++;
	if (w->interruptions >= SERVICE_LANE_MAX_INTERRUPTIONS) {
		w->flags |= MEMD_LANE_SUSPENDED;
		w->flags &= ~MEMD_LANE_RESUME_PENDING;
		w->resume_reason = NULL;
		return;
	}
	w->flags |= MEMD_LANE_RESUME_PENDING;
	w->resume_reason = reason;
	w->resume_marked_us = now_us;
}

int32_t service_lane_record_expired(memd *m, const memd_call *call, const memd_lane *cur,
				    int64_t now_us, int *ret_written, memd_error *err)
{
	memd_lane l = *cur;
	memd_lane_write w = { .struct_size = sizeof(w) };
	int32_t r;

	if (!cur->turn_id || cur->turn_lease_until_us > now_us) {
		*ret_written = 0;
		return 0;
	}
	service_lane_interrupt(&l, SERVICE_LANE_LEASE_EXPIRED, now_us);
	w.expected_version = cur->version;
	w.lane = &l;
	w.now_us = now_us;
	if ((r = service_lane_write(m, call, &w, NULL, err)) < 0)
		return r;
	*ret_written = 1;
	return 0;
}

/* ---- policy ---------------------------------------------------------------- */

const settings_lanes *service_lanes_settings(memd *m, const char *app)
{
	return &settings_app_for(&m->set, app)->lanes;
}

static lane_reset_mode mode_of(int32_t settings_mode)
{
	switch (settings_mode) {
	case SETTINGS_LANE_RESET_IDLE: return LANE_RESET_IDLE;
	case SETTINGS_LANE_RESET_DAILY: return LANE_RESET_DAILY;
	case SETTINGS_LANE_RESET_BOTH: return LANE_RESET_BOTH;
	default: return LANE_RESET_NONE;
	}
}

int32_t service_lane_policy(memd *m, const char *app, const char *platform,
			    const char *chat_type, lane_reset_policy *ret, memd_error *err)
{
	const settings_lane_reset *r =
		settings_lane_reset_for(service_lanes_settings(m, app), platform, chat_type);
	const lane_tz *zone = NULL;
	int32_t rc;

	if (r->mode == SETTINGS_LANE_RESET_DAILY || r->mode == SETTINGS_LANE_RESET_BOTH) {
		rc = lane_tz_cache_get(m->zones, r->timezone, &zone, err);
		/* The host's zone, not configured, unreadable: UTC (as at open). */
		if (rc < 0 && !*r->timezone)
			zone = NULL;
		else if (rc < 0)
			return rc;
	}
	*ret = (lane_reset_policy){
		.mode = mode_of(r->mode),
		.idle_minutes = r->idle_minutes,
		.at_hour = (int32_t)r->at_hour,
		.zone = zone,
		.notify = r->notify,
		.idle_notice = r->idle_notice,
		.daily_notice = r->daily_notice,
		.suspended_notice = r->suspended_notice,
	};
	return 0;
}

/* The platform and chat_type of an origin (a source object); borrowed
 * from o, NULL when absent. */
static void origin_keys(json_t *o, const char **ret_platform, const char **ret_chat_type)
{
	*ret_platform = json_string_value(json_object_get(o, "platform"));
	*ret_chat_type = json_string_value(json_object_get(o, "chat_type"));
}

int32_t service_lane_policy_of(memd *m, const memd_lane *l, lane_reset_policy *ret,
			       memd_error *err)
{
	json_t *o = ej_load(l->origin_json);
	const char *platform, *chat_type;
	int32_t r;

	origin_keys(o, &platform, &chat_type);
	r = service_lane_policy(m, l->app, platform, chat_type, ret, err);
	json_decref(o);
	return r;
}

/* One reset policy's zone, checked once per node. */
static size_t check_zone(const settings_lane_reset *r, lane_tz_cache *zones,
			 const config_node **seen, size_t *n_seen, config_diag *d)
{
	memd_error err = { 0 };
	const lane_tz *zone;

	if (!r->timezone_node)
		return 0; /* the default: the host's zone, UTC when it has none */
	for (size_t i = 0; i < *n_seen; i++)
		if (seen[i] == r->timezone_node)
			return 0;
	seen[(*n_seen)++] = r->timezone_node;
	if (lane_tz_cache_get(zones, r->timezone, &zone, &err) == 0)
		return 0;
	config_diag_add(d, r->timezone_node, "timezone", "cannot load time zone \"%s\": %s",
			r->timezone, err.msg);
	return 1;
}

size_t service_lanes_check_zones(const settings *s, lane_tz_cache *zones, config_diag *d)
{
	const config_node **seen;
	size_t n = 0, cap = 1, problems = 0;

	for (size_t a = 0; a < s->n_apps; a++)
		cap += 1 + s->apps[a].lanes.n_overrides;
	seen = calloc(cap, sizeof(*seen));
	if (!seen) {
		config_diag_add(d, NULL, NULL, "out of memory while checking time zones");
		return 1;
	}
	for (size_t a = 0; a < s->n_apps; a++) {
		const settings_lanes *l = &s->apps[a].lanes;
		problems += check_zone(&l->reset, zones, seen, &n, d);
		for (size_t i = 0; i < l->n_overrides; i++)
			problems += check_zone(&l->overrides[i].reset, zones, seen, &n, d);
	}
	free(seen);
	return problems;
}

/* ---- sources --------------------------------------------------------------- */

static const char *const source_fields[] = { "platform", "chat_type", "chat_id", "chat_name",
					     "thread_id", "user_id", "user_id_alt", "user_name",
					     NULL };
static const char *const chat_types[] = { "dm", "group", "channel", "thread", NULL };

/* A message source (memd.h "source") checked and normalized: platform in
 * lowercase, chat_type defaulted to "dm", empty and null members left
 * out. *ret is a new object; *ret_src (may be NULL) borrows from it. */
static int32_t source_parse(json_t *in, json_t **ret, lane_source *ret_src, memd_error *err)
{
	json_t *o;
	const char *key;
	json_t *v;
	char platform[LANE_PLATFORM_MAX + 1];
	int32_t r;

	if (!json_is_object(in))
		return memd_error_set(err, MEMD_EINVAL, 0, "source: must be an object");
	{
		memd_error inner = { 0 };
		if (service_check_fields(in, source_fields, &inner) < 0)
			return memd_error_set(err, MEMD_EINVAL, 0, "source: %s", inner.msg);
	}
	o = json_object();
	if (!o)
		return service_oom(err);
	json_object_foreach(in, key, v) {
		const char *s;
		size_t len, max;
		if (json_is_null(v))
			continue;
		if (!json_is_string(v)) {
			r = memd_error_set(err, MEMD_EINVAL, 0, "source.%s: must be a string", key);
			goto fail;
		}
		s = json_string_value(v);
		len = json_string_length(v);
		if (!len)
			continue;
		max = strcmp(key, "chat_name") == 0 || strcmp(key, "user_name") == 0
			      ? LANE_SOURCE_NAME_MAX
			      : MEMD_ID_MAX;
		if (len > max || !ej_utf8_valid(s, len) || strlen(s) != len) {
			r = memd_error_set(err, MEMD_EINVAL, 0,
					   "source.%s: must be valid UTF-8 of at most %zu bytes", key,
					   max);
			goto fail;
		}
		if (json_object_set(o, key, v) < 0) {
			r = service_oom(err);
			goto fail;
		}
	}
	key = json_string_value(json_object_get(o, "platform"));
	if (!key) {
		r = memd_error_set(err, MEMD_EINVAL, 0, "source.platform: required");
		goto fail;
	}
	if (strlen(key) > LANE_PLATFORM_MAX) {
		r = memd_error_set(err, MEMD_EINVAL, 0, "source.platform: at most %d bytes",
				   LANE_PLATFORM_MAX);
		goto fail;
	}
	for (size_t i = 0; key[i]; i++) {
		char ch = key[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '_' || ch == '-' || ch == '.')) {
			r = memd_error_set(err, MEMD_EINVAL, 0,
					   "source.platform: letters, digits, '_', '-' and '.' only");
			goto fail;
		}
		platform[i] = ch >= 'A' && ch <= 'Z' ? (char)(ch - 'A' + 'a') : ch;
		platform[i + 1] = '\0';
	}
	if (json_object_set_new(o, "platform", json_string(platform)) < 0) {
		r = service_oom(err);
		goto fail;
	}
	key = json_string_value(json_object_get(o, "chat_type"));
	if (key) {
		size_t i;
		for (i = 0; chat_types[i] && strcmp(chat_types[i], key) != 0; i++)
			;
		if (!chat_types[i]) {
			r = memd_error_set(err, MEMD_EINVAL, 0,
					   "source.chat_type: one of dm, group, channel, thread");
			goto fail;
		}
	} else if (json_object_set_new(o, "chat_type", json_string("dm")) < 0) {
		r = service_oom(err);
		goto fail;
	}
	if (ret_src) {
		*ret_src = (lane_source){
			.platform = json_string_value(json_object_get(o, "platform")),
			.chat_type = json_string_value(json_object_get(o, "chat_type")),
			.chat_id = json_string_value(json_object_get(o, "chat_id")),
			.chat_name = json_string_value(json_object_get(o, "chat_name")),
			.thread_id = json_string_value(json_object_get(o, "thread_id")),
			.user_id = json_string_value(json_object_get(o, "user_id")),
			.user_id_alt = json_string_value(json_object_get(o, "user_id_alt")),
			.user_name = json_string_value(json_object_get(o, "user_name")),
		};
	}
	*ret = o;
	return 0;
fail:
	json_decref(o);
	return r;
}

/* ---- open, reset: the decision ------------------------------------------ */

/* What an open or reset decided and did. */
typedef struct open_outcome {
	service_lane lane;        /* as stored after the write */
	char *session;            /* the current session's JSON text (owned) */
	size_t session_len;
	int created;
	int resumed;
	const char *reset_reason; /* NULL: no reset */
	int had_activity;
	char *previous;           /* the replaced session (owned) */
} open_outcome;

static void outcome_clear(open_outcome *o)
{
	service_lane_clear(&o->lane);
	free(o->session);
	free(o->previous);
	memset(o, 0, sizeof(*o));
}

/* What a session peek keeps of the session besides its numbers. */
typedef enum peek_shape {
	PEEK_NUMBERS, /* nothing more */
	PEEK_JSON,    /* json: ej_session's tree */
	PEEK_TEXT,    /* text, text_len: the same as JSON text (json_out.h) */
} peek_shape;

/* The session (app, user, sid) as read: its JSON (in the shape asked),
 * last_seq, updated_us and flags; delivered is set once it was read. */
typedef struct session_peek {
	peek_shape shape;
	int delivered;
	json_t *json;
	char *text;
	size_t text_len;
	int64_t last_seq;
	int64_t updated_us;
	uint32_t flags;
} session_peek;

/* Free what *p holds and forget the session (the shape stays). */
static void peek_clear(session_peek *p)
{
	json_decref(p->json);
	free(p->text);
	*p = (session_peek){ .shape = p->shape };
}

static int32_t sink_peek(void *ud, const memd_session *s)
{
	session_peek *p = ud;
	json_out jo;
	int32_t r = 0;

	peek_clear(p);
	if (p->shape == PEEK_JSON) {
		p->json = ej_session(s);
		r = p->json ? 0 : MEMD_ENOMEM;
	} else if (p->shape == PEEK_TEXT) {
		jo_init(&jo);
		jo_session(&jo, s);
		r = jo_finish(&jo, &p->text, &p->text_len);
	}
	if (r < 0)
		return r;
	p->delivered = 1;
	p->last_seq = s->last_seq;
	p->updated_us = s->updated_us;
	p->flags = s->flags;
	return 0;
}

/* Read the session (app, user, sid) into *ret (cleared first) in the
 * shape asked. MEMD_ENOTFOUND when it is gone (*ret then holds nothing). */
static int32_t session_peek_read(memd *m, const memd_call *call, const char *app,
				 const char *user, const char *sid, peek_shape shape,
				 session_peek *ret, memd_error *err)
{
	memd_scope sc = { .struct_size = sizeof(sc), .app = app, .user = user, .session = sid };
	memd_session_sink sink = { sizeof(sink), ret, sink_peek };
	int32_t r;

	ret->shape = shape;
	peek_clear(ret);
	r = store_session_get(m->sessions, call, &sc, &sink, err);
	if (r == MEMD_EINVAL && shape == PEEK_TEXT && !ret->delivered)
		return memd_error_set(err, MEMD_EINTERNAL, 0,
				      "session '%.255s' holds text that is not valid UTF-8", sid);
	if (r < 0) {
		peek_clear(ret);
		return r;
	}
	if (!ret->delivered)
		return memd_error_set(err, MEMD_EINTERNAL, 0, "%s: session_get delivered nothing",
				      store_name(m->sessions));
	return 0;
}

/* Read the lane (as service_lane_read) and, from the same store read, its
 * session into *peek (cleared first; shape kept): peek->delivered is 0
 * when that session is gone. */
static int32_t lane_read_peek(memd *m, const memd_call *call, const memd_scope *sc,
			      const char *key, service_lane *ret, session_peek *peek,
			      memd_error *err)
{
	memd_session_sink sink = { sizeof(sink), peek, sink_peek };
	int32_t r;

	peek_clear(peek);
	r = lane_read(m, call, sc, key, ret, &sink, err);
	if (r == MEMD_EINVAL && peek->shape == PEEK_TEXT && ret->l.key && !peek->delivered)
		r = memd_error_set(err, MEMD_EINTERNAL, 0,
				   "session '%.255s' holds text that is not valid UTF-8",
				   ret->l.session ? ret->l.session : "");
	if (r < 0)
		peek_clear(peek);
	return r;
}

int32_t service_lane_last_activity(memd *m, const memd_call *call, const memd_lane *l,
				   int64_t *ret_us, memd_error *err)
{
	session_peek p = { 0 };
	int32_t r = session_peek_read(m, call, l->app, l->user, l->session, PEEK_NUMBERS, &p, err);

	if (r == MEMD_ENOTFOUND) {
		*ret_us = l->updated_us;
		return 0;
	}
	if (r < 0)
		return r;
	*ret_us = p.updated_us > l->updated_us ? p.updated_us : l->updated_us;
	peek_clear(&p);
	return 0;
}

/* How an open or reset should go. */
typedef struct open_req {
	const char *app, *user, *key;
	const char *origin;     /* normalized source JSON text, or NULL */
	const char *platform;   /* of origin */
	const char *chat_type;  /* of origin */
	int explicit_reset;     /* memd_lane_reset */
} open_req;

/* 1 when a reset for reason owes the new session's first context a
 * notice under p (automatic resets, when p notifies). */
static int owes_notice(const lane_reset_policy *p, const char *reason)
{
	if (!p->notify)
		return 0;
	return strcmp(reason, LANE_EXPIRED_IDLE) == 0 || strcmp(reason, LANE_EXPIRED_DAILY) == 0 ||
	       strcmp(reason, LANE_REASON_SUSPENDED) == 0;
}

/* One try of an open or reset: read, decide, write. MEMD_ECONFLICT when
 * the write lost a race (the caller tries again), or, with *ret_final
 * set, when the change is refused (a reset during a turn). */
static int32_t open_try(memd *m, const memd_call *call, const open_req *q, open_outcome *out,
			int *ret_final, memd_error *err)
{
	memd_scope sc = { .struct_size = sizeof(sc), .app = q->app, .user = q->user };
	service_lane cur = { 0 };
	session_peek peek = { 0 };
	memd_lane l;
	memd_lane_write w = { .struct_size = sizeof(w) };
	memd_session ns = { .struct_size = sizeof(ns) };
	lane_reset_policy pol;
	char new_id[UUID_TEXT_LEN + 1], platform[LANE_PLATFORM_MAX + 1];
	const char *reason = NULL;
	int64_t now, last;
	int found, turn_live, keep_write = 1;
	int32_t r;

	/* The lane and its session in one store read. */
	peek.shape = PEEK_TEXT;
	r = lane_read_peek(m, call, &sc, q->key, &cur, &peek, err);
	if (r < 0 && r != MEMD_ENOTFOUND)
		return r;
	found = r == 0;
	now = service_clock_us(m);
	if ((r = service_lane_policy(m, q->app, q->platform, q->chat_type, &pol, err)) < 0)
		goto out;
	if (found && !q->platform) {
		/* No source with this call: the lane's own origin decides. */
		if ((r = service_lane_policy_of(m, &cur.l, &pol, err)) < 0)
			goto out;
	}
	memset(&l, 0, sizeof(l));
	l.struct_size = sizeof(l);
	if (found) {
		l = cur.l;
		r = peek.delivered ? 0 : MEMD_ENOTFOUND;
		last = cur.l.updated_us;
		if (r == 0 && peek.updated_us > last)
			last = peek.updated_us;
		/* A lane whose turn holds an unexpired lease is never reset (a
		 * suspension waits for the turn to end); only a session that is
		 * gone is replaced under it. */
		turn_live = cur.l.turn_id && cur.l.turn_lease_until_us > now;
		if (r == MEMD_ENOTFOUND)
			reason = LANE_REASON_DELETED;
		else if (q->explicit_reset)
			reason = LANE_REASON_EXPLICIT;
		else if ((cur.l.flags & MEMD_LANE_SUSPENDED) && !turn_live)
			reason = LANE_REASON_SUSPENDED;
		else if (cur.l.flags & MEMD_LANE_RESUME_PENDING)
			out->resumed = 1;
		else if (!turn_live)
			reason = lane_policy_expired(&pol, last, now);
		r = 0;
		if (q->explicit_reset && turn_live) {
			char until[EJ_TIME_LEN];
			ej_format_time(cur.l.turn_lease_until_us, until);
			r = memd_error_set(err, MEMD_ECONFLICT, 0,
					   "lane '%.255s' has a turn in progress (lease until %s); "
					   "end it first",
					   q->key, until);
			*ret_final = 1;
			goto out;
		}
		if (!reason) {
			/* Keep: mark the activity (unless just marked). */
			int same_origin = !q->origin || (cur.l.origin_json &&
							 strcmp(q->origin, cur.l.origin_json) == 0);
			keep_write = !same_origin || now - cur.l.updated_us >= LANE_ACTIVITY_GRANULARITY_US ||
				     (cur.l.flags & MEMD_LANE_FINALIZED);
			l.updated_us = now > cur.l.updated_us ? now : cur.l.updated_us;
			l.flags &= ~MEMD_LANE_FINALIZED;
			if (q->origin)
				l.origin_json = q->origin;
		}
	} else {
		l.app = q->app;
		l.user = q->user;
		l.key = q->key;
		if (q->explicit_reset)
			reason = LANE_REASON_EXPLICIT;
	}
	if (!found || reason) {
		if (uuid_v7(new_id) < 0) {
			r = memd_error_set(err, MEMD_EIO, 0, "cannot generate a session id");
			goto out;
		}
		ns.app = q->app;
		ns.user = q->user;
		ns.id = new_id;
		ns.metadata_json = "{}";
		ns.created_us = ns.updated_us = now;
		ns.lane_key = q->key;
		ns.origin_json = q->origin ? q->origin : (found ? cur.l.origin_json : NULL);
		ns.origin_platform = q->platform;
		if (!ns.origin_platform && ns.origin_json) {
			json_t *o = ej_load(ns.origin_json);
			const char *p, *t;
			origin_keys(o, &p, &t);
			if (p && strlen(p) < sizeof(platform)) {
				memcpy(platform, p, strlen(p) + 1);
				ns.origin_platform = platform;
			}
			json_decref(o);
		}
		ns.start_reason = reason;
		ns.previous_session = found ? cur.l.session : NULL;
		if (reason && owes_notice(&pol, reason))
			ns.flags |= MEMD_SESSION_NOTICE;
		w.create_session = &ns;
		l.session = new_id;
		l.origin_json = ns.origin_json;
		l.updated_us = now;
		l.flags &= ~(MEMD_LANE_SUSPENDED | MEMD_LANE_RESUME_PENDING | MEMD_LANE_FINALIZED |
			     MEMD_LANE_FRESH_RESET | MEMD_LANE_RESET_HAD_ACTIVITY);
		l.resume_reason = NULL;
		l.resume_marked_us = 0;
		l.interruptions = 0;
		l.finalize_failures = 0;
		l.finalize_claim_until_us = 0;
		if (reason) {
			int had = found && peek.delivered && peek.last_seq > 0;
			l.reset_reason = reason;
			l.previous_session = found ? cur.l.session : NULL;
			l.reset_us = now;
			if (had)
				l.flags |= MEMD_LANE_RESET_HAD_ACTIVITY;
			if (q->explicit_reset)
				l.flags |= MEMD_LANE_FRESH_RESET;
			if (found) {
				w.end_session = cur.l.session;
				w.end_reason = LANE_END_RESET;
			}
			out->reset_reason = reason;
			out->had_activity = had;
			free(out->previous);
			out->previous = found ? strdup(cur.l.session) : NULL;
			if (found && !out->previous) {
				r = service_oom(err);
				goto out;
			}
		}
		if (q->explicit_reset)
			w.flags |= MEMD_LW_CLEAR_INBOX;
	}
	if (!found)
		w.flags |= MEMD_LW_CREATE;
	w.expected_version = found ? cur.l.version : 0;
	w.lane = &l;
	w.now_us = now;
	if (found && !reason && !keep_write) {
		r = lane_copy(&cur.l, &out->lane) < 0 ? service_oom(err) : 0;
	} else {
		r = service_lane_write(m, call, &w, &out->lane, err);
	}
	if (r < 0)
		goto out;
	out->created = !found;
	if (w.create_session) {
		r = session_peek_read(m, call, q->app, q->user, new_id, PEEK_TEXT, &peek, err);
		if (r < 0)
			goto out;
	}
	out->session = peek.text;
	out->session_len = peek.text_len;
	peek.text = NULL;
out:
	peek_clear(&peek);
	service_lane_clear(&cur);
	return r;
}

/* Open or reset with retries; *out filled on success. */
static int32_t open_run(memd *m, const open_req *q, open_outcome *out, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	int32_t r = MEMD_ECONFLICT;
	int final = 0;

	for (int i = 0; i < SERVICE_LANE_TRIES && r == MEMD_ECONFLICT && !final; i++) {
		outcome_clear(out);
		r = open_try(m, &call, q, out, &final, err);
	}
	if (final)
		return r;
	if (r == MEMD_ECONFLICT)
		return lane_busy(q->key, err);
	return r;
}

/* The answer of an open or reset written into jo, without its closing
 * '}' (the caller adds members, then closes it): {"lane", "session",
 * "created", "reset": null | {"reason", "had_activity",
 * "previous_session"}, "resumed"}. Returns jo's sticky error. */
static int32_t outcome_write(const open_outcome *o, json_out *jo)
{
	jo_lit(jo, "{\"lane\":");
	lj_lane_write(jo, &o->lane.l);
	jo_lit(jo, ",\"session\":");
	jo_raw(jo, o->session, o->session_len);
	jo_lit(jo, ",\"created\":");
	jo_bool(jo, o->created);
	jo_lit(jo, ",\"reset\":");
	if (o->reset_reason) {
		jo_lit(jo, "{\"reason\":");
		jo_string(jo, o->reset_reason);
		jo_lit(jo, ",\"had_activity\":");
		jo_bool(jo, o->had_activity);
		jo_lit(jo, ",\"previous_session\":");
		jo_string(jo, o->previous);
		jo_lit(jo, "}");
	} else {
		jo_lit(jo, "null");
	}
	jo_lit(jo, ",\"resumed\":");
	return jo_bool(jo, o->resumed);
}

/* Close the answer in jo and hand it over as *ret_json. */
static int32_t answer_finish(json_out *jo, char **ret_json, memd_error *err)
{
	const char *bad = jo->bad_field;
	int32_t r;

	jo_lit(jo, "}");
	if ((r = jo_finish(jo, ret_json, NULL)) == 0)
		return 0;
	if (r == MEMD_EINVAL)
		return memd_error_set(err, MEMD_EINTERNAL, 0,
				      "cannot write the answer: %s is not valid UTF-8",
				      bad ? bad : "a string");
	return service_oom(err);
}

/* Check scope and key as ids. */
static int32_t check_lane_scope(const char *app, const char *user, const char *key,
				memd_scope *sc, memd_error *err)
{
	int32_t r;
	if ((r = service_check_scope(app, user, NULL, sc, err)) < 0)
		return r;
	return ej_check_id(key, "lane key", err);
}

static const char *const open_fields[] = { "source", NULL };

/* Open or reset (app, user, key), whose scope and key are checked, with
 * norm (a source as source_parse normalized it, borrowed; NULL: none):
 * the answer written into jo (outcome_write: still open); jo untouched
 * on failure. */
static int32_t open_normalized(memd *m, const char *app, const char *user, const char *key,
			       json_t *norm, int explicit_reset, json_out *jo, memd_error *err)
{
	char *origin = NULL;
	open_outcome o = { 0 };
	open_req q = { .app = app, .user = user, .key = key, .explicit_reset = explicit_reset };
	int32_t r;

	if (norm) {
		if (!(origin = ej_dump(norm)))
			return service_oom(err);
		q.origin = origin;
		q.platform = json_string_value(json_object_get(norm, "platform"));
		q.chat_type = json_string_value(json_object_get(norm, "chat_type"));
	}
	if ((r = open_run(m, &q, &o, err)) < 0)
		goto out;
	outcome_write(&o, jo);
out:
	outcome_clear(&o);
	free(origin);
	return r;
}

/* The open and reset calls: body {"source"?}; the answer into jo as
 * open_normalized writes it. */
static int32_t open_call(memd *m, const char *app, const char *user, const char *key,
			 const char *body_json, int explicit_reset, json_out *jo, memd_error *err)
{
	memd_scope sc;
	json_t *body = NULL, *src, *norm = NULL;
	int32_t r;

	if ((r = check_lane_scope(app, user, key, &sc, err)) < 0 ||
	    (r = service_parse_body(body_json, &body, err)) < 0)
		return r;
	if ((r = service_check_fields(body, open_fields, err)) < 0)
		goto out;
	src = json_object_get(body, "source");
	if (src && !json_is_null(src) && (r = source_parse(src, &norm, NULL, err)) < 0)
		goto out;
	r = open_normalized(m, app, user, key, norm, explicit_reset, jo, err);
out:
	json_decref(norm);
	json_decref(body);
	return r;
}

int32_t memd_lane_open(memd *m, const char *app, const char *user, const char *key,
		       const char *body_json, char **ret_json, memd_error *err)
{
	json_out jo;
	int32_t r;

	jo_init(&jo);
	if ((r = open_call(m, app, user, key, body_json, 0, &jo, err)) < 0) {
		jo_clear(&jo);
		return r;
	}
	return answer_finish(&jo, ret_json, err);
}

int32_t memd_lane_reset(memd *m, const char *app, const char *user, const char *key,
			const char *body_json, char **ret_json, memd_error *err)
{
	json_out jo;
	int32_t r;

	jo_init(&jo);
	if ((r = open_call(m, app, user, key, body_json, 1, &jo, err)) < 0) {
		jo_clear(&jo);
		return r;
	}
	return answer_finish(&jo, ret_json, err);
}

/* ---- resolve ----------------------------------------------------------------- */

/* Resolve body (a source) for app: the key, user scope, shared flag and
 * the normalized source (*ret_source, new). */
static int32_t resolve(memd *m, const char *app, const char *body_json, char **ret_key,
		       char **ret_user, int *ret_shared, json_t **ret_source, memd_error *err)
{
	const settings_lanes *ls;
	lane_key_rules rules;
	lane_source src;
	json_t *body = NULL, *norm = NULL;
	int32_t r;

	if ((r = ej_check_id(app, "app", err)) < 0 ||
	    (r = service_parse_body(body_json, &body, err)) < 0)
		return r;
	if ((r = source_parse(body, &norm, &src, err)) < 0)
		goto out;
	ls = service_lanes_settings(m, app);
	rules = (lane_key_rules){ .group_sessions_per_user = ls->group_sessions_per_user,
				  .thread_sessions_per_user = ls->thread_sessions_per_user };
	if ((r = lane_key_resolve(&src, &rules, ret_key, ret_user, ret_shared, err)) < 0)
		goto out;
	*ret_source = norm;
	norm = NULL;
out:
	json_decref(norm);
	json_decref(body);
	return r;
}

int32_t memd_lane_resolve(memd *m, const char *app, const char *body_json, char **ret_json,
			  memd_error *err)
{
	char *key = NULL, *user = NULL;
	int shared = 0;
	json_t *src = NULL;
	int32_t r = resolve(m, app, body_json, &key, &user, &shared, &src, err);

	if (r < 0)
		return r;
	r = service_finish(json_pack("{s:s,s:s,s:b,s:o}", "key", key, "user", user, "shared",
				     shared, "source", src),
			   ret_json, err);
	free(key);
	free(user);
	return r;
}

int32_t memd_lane_open_source(memd *m, const char *app, const char *body_json, char **ret_json,
			      memd_error *err)
{
	char *key = NULL, *user = NULL;
	int shared = 0;
	memd_scope sc;
	json_t *src = NULL;
	json_out jo;
	int32_t r = resolve(m, app, body_json, &key, &user, &shared, &src, err);

	if (r < 0)
		return r;
	/* The source resolve normalized is the open's: not dumped and parsed
	 * again, and the answer written as text (the open is the gateway's
	 * every-message call). */
	jo_init(&jo);
	if ((r = check_lane_scope(app, user, key, &sc, err)) < 0 ||
	    (r = open_normalized(m, app, user, key, src, 0, &jo, err)) < 0) {
		jo_clear(&jo);
		goto out;
	}
	jo_lit(&jo, ",\"key\":");
	jo_string(&jo, key);
	jo_lit(&jo, ",\"user\":");
	jo_string(&jo, user);
	jo_lit(&jo, ",\"shared\":");
	jo_bool(&jo, shared);
	r = answer_finish(&jo, ret_json, err);
out:
	json_decref(src);
	free(key);
	free(user);
	return r;
}

/* ---- get, list, delete ------------------------------------------------------- */

int32_t memd_lane_get(memd *m, const char *app, const char *user, const char *key,
		      char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	service_lane cur = { 0 };
	int32_t r;

	if ((r = check_lane_scope(app, user, key, &sc, err)) < 0)
		return r;
	if ((r = service_lane_read(m, &call, &sc, key, &cur, err)) < 0)
		return r;
	r = service_finish(service_lane_json(&cur.l), ret_json, err);
	service_lane_clear(&cur);
	return r;
}

int32_t memd_lane_delete(memd *m, const char *app, const char *user, const char *key,
			 memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	int32_t r;

	if ((r = check_lane_scope(app, user, key, &sc, err)) < 0)
		return r;
	r = store_lane_delete(m->sessions, &call, &sc, key, err);
	if (r == MEMD_ENOTFOUND)
		return memd_error_set(err, MEMD_ENOTFOUND, 0, "no lane '%.255s' of user '%.255s'",
				      key, user);
	return r;
}

/* Lane list cursors: "<updated_us>.<hex app>.<hex user>.<hex key>". */
static char *hex_of(const char *s, char *p)
{
	static const char hex[] = "0123456789abcdef";
	for (; *s; s++) {
		*p++ = hex[(unsigned char)*s >> 4];
		*p++ = hex[(unsigned char)*s & 0xf];
	}
	return p;
}

static char *lane_cursor_encode(const memd_lane *l)
{
	size_t len = 32 + 2 * (strlen(l->app) + strlen(l->user) + strlen(l->key)) + 3;
	char *c = malloc(len), *p;
	if (!c)
		return NULL;
	p = c + snprintf(c, 32, "%" PRId64, l->updated_us);
	*p++ = '.';
	p = hex_of(l->app, p);
	*p++ = '.';
	p = hex_of(l->user, p);
	*p++ = '.';
	p = hex_of(l->key, p);
	*p = '\0';
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

/* One hex part of a cursor (up to '.' or the end) into *ret (malloc'd). */
static int hex_part(const char **pp, char **ret)
{
	const char *p = *pp;
	size_t n = strcspn(p, ".");
	char *s;

	if (n == 0 || n % 2 || n / 2 > MEMD_ID_MAX || !(s = malloc(n / 2 + 1)))
		return -1;
	for (size_t i = 0; i < n / 2; i++) {
		int hi = hexval(p[2 * i]), lo = hexval(p[2 * i + 1]);
		if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
			free(s);
			return -1;
		}
		s[i] = (char)(hi << 4 | lo);
	}
	s[n / 2] = '\0';
	*pp = p + n + (p[n] == '.');
	*ret = s;
	return 0;
}

static int32_t lane_cursor_decode(const char *c, memd_lane_query *q, char *parts[3],
				  memd_error *err)
{
	char *end;
	long long updated = strtoll(c, &end, 10);
	const char *p = end;

	if (end == c || *end != '.' || updated <= 0)
		goto bad;
	p++;
	for (int i = 0; i < 3; i++)
		if (hex_part(&p, &parts[i]) < 0)
			goto bad;
	if (*p)
		goto bad;
	q->before_updated_us = updated;
	q->before_app = parts[0];
	q->before_user = parts[1];
	q->before_key = parts[2];
	return 0;
bad:
	return memd_error_set(err, MEMD_EINVAL, 0, "cursor: not a cursor memd returned");
}

static int32_t sink_lane_array(void *ud, const memd_lane *l)
{
	json_t *o = service_lane_json(l);
	return o && json_array_append_new(ud, o) == 0 ? 0 : MEMD_ENOMEM;
}

int32_t memd_lane_list(memd *m, const char *app, const char *user,
		       const memd_lane_list_options *opts, char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_lane_list_options o = { 0 };
	memd_lane_query q = { .struct_size = sizeof(q) };
	char *parts[3] = { NULL, NULL, NULL }, *next = NULL;
	json_t *arr = NULL;
	memd_lane_sink sink;
	uint32_t limit;
	int32_t r;

	if ((r = ej_check_id(app, "app", err)) < 0 ||
	    (user && (r = ej_check_id(user, "user", err)) < 0))
		return r;
	if (opts)
		memcpy(&o, opts, opts->struct_size < sizeof(o) ? opts->struct_size : sizeof(o));
	limit = o.limit ? o.limit : MEMD_LIST_LIMIT_DEFAULT;
	if (limit > MEMD_LIST_LIMIT_MAX)
		return memd_error_set(err, MEMD_EINVAL, 0, "limit: at most %d", MEMD_LIST_LIMIT_MAX);
	if (o.active_within_s < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "active_within: must not be negative");
	if ((o.flags & MEMD_LANES_SUSPENDED) && (o.flags & MEMD_LANES_NOT_SUSPENDED))
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "suspended: cannot be both true and false");
	if ((o.flags & MEMD_LANES_RESUME_PENDING) && (o.flags & MEMD_LANES_NOT_RESUME_PENDING))
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "resume_pending: cannot be both true and false");
	if (o.cursor && *o.cursor && (r = lane_cursor_decode(o.cursor, &q, parts, err)) < 0)
		goto out;
	q.app = app;
	q.user = user;
	q.limit = limit + 1; /* one more tells whether there is a next page */
	if (o.flags & MEMD_LANES_SUSPENDED)
		q.flags_all |= MEMD_LANE_SUSPENDED;
	if (o.flags & MEMD_LANES_NOT_SUSPENDED)
		q.flags_none |= MEMD_LANE_SUSPENDED;
	if (o.flags & MEMD_LANES_RESUME_PENDING)
		q.flags_all |= MEMD_LANE_RESUME_PENDING;
	if (o.flags & MEMD_LANES_NOT_RESUME_PENDING)
		q.flags_none |= MEMD_LANE_RESUME_PENDING;
	if (o.flags & MEMD_LANES_IN_TURN)
		q.turn = MEMD_LQ_TURN_SOME;
	if (o.active_within_s)
		q.updated_after_us = service_clock_us(m) - o.active_within_s * US_PER_SEC;
	if (!(arr = json_array())) {
		r = service_oom(err);
		goto out;
	}
	sink = (memd_lane_sink){ sizeof(sink), arr, sink_lane_array };
	if ((r = store_lane_list(m->sessions, &call, &q, &sink, err)) < 0)
		goto out;
	if (json_array_size(arr) > limit) {
		/* The next page starts after the last lane of this one. */
		json_t *last = json_array_get(arr, limit - 1);
		memd_lane at = { .struct_size = sizeof(at), .app = app };
		at.user = json_string_value(json_object_get(last, "user"));
		at.key = json_string_value(json_object_get(last, "key"));
		if (ej_parse_time(json_string_value(json_object_get(last, "updated")),
				  &at.updated_us) < 0 || !at.user || !at.key) {
			r = memd_error_set(err, MEMD_EINTERNAL, 0, "a listed lane has no position");
			goto out;
		}
		if (!(next = lane_cursor_encode(&at))) {
			r = service_oom(err);
			goto out;
		}
		json_array_remove(arr, limit);
	}
	r = service_finish(json_pack("{s:O,s:s?}", "lanes", arr, "next_cursor", next), ret_json,
			   err);
out:
	for (int i = 0; i < 3; i++)
		free(parts[i]);
	free(next);
	json_decref(arr);
	return r;
}

/* ---- switch, suspend ---------------------------------------------------------- */

static const char *const switch_fields[] = { "session_id", NULL };

/* What a switch decides: the target, a session of (app, user), becomes
 * the lane's; the lane starts afresh on it. */
typedef struct switch_ctx {
	memd *m;
	const memd_call *call;
	const char *app, *user, *key, *target;
	session_peek peek;
} switch_ctx;

static int32_t switch_decide(void *ctx, const memd_lane *cur, memd_lane *l, memd_lane_write *w,
			     int64_t now, memd_error *err)
{
	switch_ctx *x = ctx;
	int32_t r;

	/* The target must be a session of this (app, user). */
	r = session_peek_read(x->m, x->call, x->app, x->user, x->target, PEEK_JSON, &x->peek, err);
	if (r == MEMD_ENOTFOUND)
		return memd_error_set(err, MEMD_ENOTFOUND, 0,
				      "no session '%.255s' of user '%.255s' to switch to", x->target,
				      x->user);
	if (r < 0)
		return r;
	if (cur->turn_id && cur->turn_lease_until_us > now) {
		char until[EJ_TIME_LEN];
		ej_format_time(cur->turn_lease_until_us, until);
		return memd_error_set(err, MEMD_ECONFLICT, 0,
				      "lane '%.255s' has a turn in progress (lease until %s); "
				      "end it first", x->key, until);
	}
	l->session = x->target;
	l->updated_us = now;
	l->flags &= ~(MEMD_LANE_SUSPENDED | MEMD_LANE_RESUME_PENDING | MEMD_LANE_FINALIZED |
		      MEMD_LANE_FRESH_RESET);
	l->resume_reason = NULL;
	l->interruptions = 0;
	l->finalize_failures = 0;
	l->finalize_claim_until_us = 0;
	l->turn_id = NULL; /* an expired turn is dropped with the session it ran in */
	l->turn_started_us = l->turn_lease_until_us = 0;
	if (strcmp(cur->session, x->target) != 0) {
		w->end_session = cur->session;
		w->end_reason = LANE_END_SWITCH;
	}
	w->reopen_session = x->target;
	return 0;
}

int32_t memd_lane_switch(memd *m, const char *app, const char *user, const char *key,
			 const char *body_json, char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	json_t *body = NULL;
	switch_ctx x = { .m = m, .call = &call, .app = app, .user = user, .key = key };
	service_lane stored = { 0 };
	int32_t r;

	if ((r = check_lane_scope(app, user, key, &sc, err)) < 0 ||
	    (r = service_parse_body(body_json, &body, err)) < 0)
		return r;
	if ((r = service_check_fields(body, switch_fields, err)) < 0 ||
	    (r = service_opt_string_field(body, "session_id", &x.target, err)) < 0)
		goto out;
	if (!x.target) {
		r = memd_error_set(err, MEMD_EINVAL, 0, "session_id: required");
		goto out;
	}
	if ((r = ej_check_id(x.target, "session_id", err)) < 0)
		goto out;
	r = service_lane_change(m, &call, &sc, key, switch_decide, &x, &stored, err);
	if (r < 0)
		goto out;
	if ((r = session_peek_read(m, &call, app, user, x.target, PEEK_JSON, &x.peek, err)) < 0)
		goto out;
	r = service_finish(json_pack("{s:o,s:O}", "lane", service_lane_json(&stored.l), "session",
				     x.peek.json),
			   ret_json, err);
out:
	peek_clear(&x.peek);
	service_lane_clear(&stored);
	json_decref(body);
	return r;
}

/* suspend: set suspended, drop a pending resume. */
static int32_t suspend_decide(void *ctx, const memd_lane *cur, memd_lane *l, memd_lane_write *w,
			      int64_t now, memd_error *err)
{
	l->flags |= MEMD_LANE_SUSPENDED;
	l->flags &= ~MEMD_LANE_RESUME_PENDING;
	l->resume_reason = NULL;
	return 0;
}

int32_t memd_lane_suspend(memd *m, const char *app, const char *user, const char *key,
			  char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	service_lane stored = { 0 };
	int32_t r;

	if ((r = check_lane_scope(app, user, key, &sc, err)) < 0)
		return r;
	r = service_lane_change(m, &call, &sc, key, suspend_decide, NULL, &stored, err);
	if (r == 0)
		r = service_finish(service_lane_json(&stored.l), ret_json, err);
	service_lane_clear(&stored);
	return r;
}
