/* SPDX-License-Identifier: MIT */
/*
 * service_lanes_turns: a lane's turns (memd_turn_begin, _heartbeat, _end):
 * one turn at a time under a lease, a lease that ran out recorded as an
 * interrupted turn, interruptions counted up to the lane's suspension.
 * Each change is one conditional lane write, re-decided when it lost a
 * race (service_lanes.c).
 */
#include "service/service_int.h"

#include <inttypes.h>
#include <string.h>

#include "json/event_json.h"
#include "json/lane_json.h"
#include "util/uuid.h"

#define US_PER_MS 1000LL
/* The resume reason of a turn ended "interrupted" without a reason. */
#define TURN_REASON_INTERRUPTED "interrupted"

static const char *const lease_fields[] = { "lease_ms", NULL };
static const char *const end_fields[] = { "outcome", "reason", "usage", NULL };

/* Check scope, key and turn id (NULL: none) as ids. */
static int32_t check_turn_scope(const char *app, const char *user, const char *key,
				const char *turn_id, memd_scope *sc, memd_error *err)
{
	int32_t r;
	if ((r = service_check_scope(app, user, NULL, sc, err)) < 0 ||
	    (r = ej_check_id(key, "lane key", err)) < 0)
		return r;
	return turn_id ? ej_check_id(turn_id, "turn id", err) : 0;
}

/* body {"lease_ms"?}: the lease asked for, else the app's default. */
static int32_t parse_lease(memd *m, const char *app, const char *body_json, int64_t *ret_ms,
			   memd_error *err)
{
	const settings_lanes *ls = service_lanes_settings(m, app);
	json_t *body = NULL, *v;
	int32_t r;

	if ((r = service_parse_body(body_json, &body, err)) < 0)
		return r;
	if ((r = service_check_fields(body, lease_fields, err)) < 0)
		goto out;
	*ret_ms = ls->lease_ms;
	v = json_object_get(body, "lease_ms");
	if (v && !json_is_null(v)) {
		if (!json_is_integer(v) || json_integer_value(v) < 1 ||
		    json_integer_value(v) > ls->max_lease_ms) {
			r = memd_error_set(err, MEMD_EINVAL, 0,
					   "lease_ms: an integer from 1 to %" PRId64
					   " (lanes.max_lease_ms)",
					   ls->max_lease_ms);
			goto out;
		}
		*ret_ms = json_integer_value(v);
	}
out:
	json_decref(body);
	return r;
}

/* {"turn_id", "lease_ms", "lease_until", "lane"} of a stored lane. */
static int32_t turn_answer(const service_lane *stored, int64_t lease_ms, char **ret_json,
			   memd_error *err)
{
	char until[EJ_TIME_LEN];

	ej_format_time(stored->l.turn_lease_until_us, until);
	return service_finish(json_pack("{s:s,s:I,s:s,s:o}", "turn_id", stored->l.turn_id,
					"lease_ms", (json_int_t)lease_ms, "lease_until", until,
					"lane", service_lane_json(&stored->l)),
			      ret_json, err);
}

/* What a begin decides: a new turn under a lease, unless a turn holds
 * the lane; a turn whose lease ran out is recorded as interrupted. */
typedef struct begin_ctx {
	const char *key;
	int64_t lease_ms;
	char turn[UUID_TEXT_LEN + 1];
} begin_ctx;

static int32_t begin_decide(void *ctx, const memd_lane *cur, memd_lane *l, memd_lane_write *w,
			    int64_t now, memd_error *err)
{
	begin_ctx *x = ctx;

	if (cur->turn_id && cur->turn_lease_until_us > now) {
		char until[EJ_TIME_LEN];
		ej_format_time(cur->turn_lease_until_us, until);
		return memd_error_set(err, MEMD_ECONFLICT, 0,
				      "lane '%.255s' has a turn in progress: its lease ends at %s; "
				      "inbox depth %" PRIu32,
				      x->key, until, cur->inbox_depth);
	}
	/* A turn whose lease ran out: its holder died mid-turn. */
	if (l->turn_id)
		service_lane_interrupt(l, SERVICE_LANE_LEASE_EXPIRED, now);
	if (uuid_v7(x->turn) < 0)
		return memd_error_set(err, MEMD_EIO, 0, "cannot generate a turn id");
	l->turn_id = x->turn;
	l->turn_started_us = now;
	l->turn_lease_until_us = now + x->lease_ms * US_PER_MS;
	l->updated_us = now > cur->updated_us ? now : cur->updated_us;
	return 0;
}

int32_t memd_turn_begin(memd *m, const char *app, const char *user, const char *key,
			const char *body_json, char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	service_lane stored = { 0 };
	begin_ctx x = { .key = key };
	int32_t r;

	if ((r = check_turn_scope(app, user, key, NULL, &sc, err)) < 0 ||
	    (r = parse_lease(m, app, body_json, &x.lease_ms, err)) < 0)
		return r;
	r = service_lane_change(m, &call, &sc, key, begin_decide, &x, &stored, err);
	if (r == 0)
		r = turn_answer(&stored, x.lease_ms, ret_json, err);
	service_lane_clear(&stored);
	return r;
}

/* MEMD_ECONFLICT: turn_id is not the lane's turn. */
static int32_t stale_turn(const char *key, const char *turn_id, const memd_lane *l,
			  memd_error *err)
{
	if (!l->turn_id)
		return memd_error_set(err, MEMD_ECONFLICT, 0,
				      "turn '%.64s' is not lane '%.255s''s turn: the lane has none "
				      "(it ended, or its lease ran out and was recorded)",
				      turn_id, key);
	return memd_error_set(err, MEMD_ECONFLICT, 0,
			      "turn '%.64s' is not lane '%.255s''s turn: turn '%.64s' holds it",
			      turn_id, key, l->turn_id);
}

/* How a turn ends (its outcome). */
enum { END_OK, END_FAILED, END_INTERRUPTED };

/* What a heartbeat or an end first checks: turn_id is the lane's turn. */
typedef struct turn_ctx {
	const char *key, *turn_id;
	int64_t lease_ms;        /* heartbeat: the new lease */
	int how;                 /* end: END_* */
	const char *reason;      /* end: the interruption's reason, or NULL */
	const memd_usage *usage; /* end: the turn's usage, or NULL */
} turn_ctx;

static int32_t heartbeat_decide(void *ctx, const memd_lane *cur, memd_lane *l,
				memd_lane_write *w, int64_t now, memd_error *err)
{
	turn_ctx *x = ctx;

	if (!cur->turn_id || strcmp(cur->turn_id, x->turn_id) != 0)
		return stale_turn(x->key, x->turn_id, cur, err);
	l->turn_lease_until_us = now + x->lease_ms * US_PER_MS;
	return 0;
}

int32_t memd_turn_heartbeat(memd *m, const char *app, const char *user, const char *key,
			    const char *turn_id, const char *body_json, char **ret_json,
			    memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	service_lane stored = { 0 };
	turn_ctx x = { .key = key, .turn_id = turn_id };
	int32_t r;

	if ((r = check_turn_scope(app, user, key, turn_id, &sc, err)) < 0 ||
	    (r = parse_lease(m, app, body_json, &x.lease_ms, err)) < 0)
		return r;
	/* A lost race is a conflict only if the turn changed: re-read. */
	r = service_lane_change(m, &call, &sc, key, heartbeat_decide, &x, &stored, err);
	if (r == 0)
		r = turn_answer(&stored, x.lease_ms, ret_json, err);
	service_lane_clear(&stored);
	return r;
}

static int32_t end_decide(void *ctx, const memd_lane *cur, memd_lane *l, memd_lane_write *w,
			  int64_t now, memd_error *err)
{
	turn_ctx *x = ctx;

	if (!cur->turn_id || strcmp(cur->turn_id, x->turn_id) != 0)
		return stale_turn(x->key, x->turn_id, cur, err);
	if (x->how == END_INTERRUPTED) {
		service_lane_interrupt(l, x->reason ? x->reason : TURN_REASON_INTERRUPTED, now);
	} else {
		l->turn_id = NULL;
		l->turn_started_us = l->turn_lease_until_us = 0;
		if (x->how == END_OK) {
			l->flags &= ~MEMD_LANE_RESUME_PENDING;
			l->resume_reason = NULL;
			l->interruptions = 0;
		}
	}
	l->updated_us = now > cur->updated_us ? now : cur->updated_us;
	w->usage = x->usage;
	return 0;
}

int32_t memd_turn_end(memd *m, const char *app, const char *user, const char *key,
		      const char *turn_id, const char *body_json, char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	service_lane stored = { 0 };
	turn_ctx x = { .key = key, .turn_id = turn_id };
	json_t *body = NULL, *uv;
	const char *outcome, *reason;
	memd_usage usage;
	int32_t r;

	if ((r = check_turn_scope(app, user, key, turn_id, &sc, err)) < 0 ||
	    (r = service_parse_body(body_json, &body, err)) < 0)
		return r;
	if ((r = service_check_fields(body, end_fields, err)) < 0 ||
	    (r = service_opt_string_field(body, "outcome", &outcome, err)) < 0 ||
	    (r = service_opt_string_field(body, "reason", &reason, err)) < 0)
		goto out;
	if (!outcome) {
		r = memd_error_set(err, MEMD_EINVAL, 0, "outcome: required (ok, failed or interrupted)");
		goto out;
	}
	if (strcmp(outcome, "ok") == 0)
		x.how = END_OK;
	else if (strcmp(outcome, "failed") == 0)
		x.how = END_FAILED;
	else if (strcmp(outcome, "interrupted") == 0)
		x.how = END_INTERRUPTED;
	else {
		r = memd_error_set(err, MEMD_EINVAL, 0, "outcome: one of ok, failed, interrupted");
		goto out;
	}
	if (reason && (r = ej_check_id(reason, "reason", err)) < 0)
		goto out;
	uv = json_object_get(body, "usage");
	if (uv && !json_is_null(uv)) {
		if ((r = lj_usage_parse(uv, "usage", &usage, err)) < 0)
			goto out;
		x.usage = &usage;
	}
	x.reason = reason;
	r = service_lane_change(m, &call, &sc, key, end_decide, &x, &stored, err);
	if (r == 0)
		r = service_finish(json_pack("{s:o}", "lane", service_lane_json(&stored.l)),
				   ret_json, err);
out:
	service_lane_clear(&stored);
	json_decref(body);
	return r;
}
