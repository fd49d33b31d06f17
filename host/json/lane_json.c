/* SPDX-License-Identifier: MIT */
#include "json/lane_json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json/event_json.h"

/* The largest cost accepted, in USD: its micro-USD must fit an int64
 * with room for sums. */
#define LJ_COST_USD_MAX 1e12

static int set_str(json_t *o, const char *key, const char *s)
{
	return json_object_set_new(o, key, s ? json_string(s) : json_null());
}

static int set_time(json_t *o, const char *key, int64_t us)
{
	char buf[EJ_TIME_LEN];
	ej_format_time(us, buf);
	return json_object_set_new(o, key, json_string(buf));
}

json_t *lj_lane(const memd_lane *l)
{
	json_t *o = json_object(), *v;
	int bad = !o;

	if (bad)
		return NULL;
	bad |= set_str(o, "key", l->key);
	bad |= set_str(o, "user", l->user);
	bad |= set_str(o, "session_id", l->session);
	v = ej_load(l->origin_json);
	bad |= json_object_set_new(o, "origin", json_is_object(v) ? v : (json_decref(v), json_null()));
	bad |= set_time(o, "created", l->created_us);
	bad |= set_time(o, "updated", l->updated_us);
	bad |= json_object_set_new(o, "version", json_integer(l->version));
	bad |= json_object_set_new(o, "suspended", json_boolean(l->flags & MEMD_LANE_SUSPENDED));
	bad |= json_object_set_new(o, "resume_pending",
				   json_boolean(l->flags & MEMD_LANE_RESUME_PENDING));
	bad |= set_str(o, "resume_reason",
		       l->flags & MEMD_LANE_RESUME_PENDING ? l->resume_reason : NULL);
	bad |= json_object_set_new(o, "interruptions", json_integer(l->interruptions));
	bad |= json_object_set_new(o, "finalized", json_boolean(l->flags & MEMD_LANE_FINALIZED));
	bad |= json_object_set_new(o, "fresh_reset", json_boolean(l->flags & MEMD_LANE_FRESH_RESET));
	if (l->reset_reason) {
		v = json_object();
		bad |= !v;
		bad |= set_str(v, "reason", l->reset_reason);
		bad |= set_time(v, "at", l->reset_us);
		bad |= set_str(v, "previous_session", l->previous_session);
		bad |= json_object_set_new(v, "had_activity",
					   json_boolean(l->flags & MEMD_LANE_RESET_HAD_ACTIVITY));
		bad |= json_object_set_new(o, "last_reset", v);
	} else {
		bad |= json_object_set_new(o, "last_reset", json_null());
	}
	if (l->turn_id) {
		v = json_object();
		bad |= !v;
		bad |= set_str(v, "id", l->turn_id);
		bad |= set_time(v, "started", l->turn_started_us);
		bad |= set_time(v, "lease_until", l->turn_lease_until_us);
		bad |= json_object_set_new(o, "turn", v);
	} else {
		bad |= json_object_set_new(o, "turn", json_null());
	}
	bad |= json_object_set_new(o, "inbox_depth", json_integer(l->inbox_depth));
	v = ej_usage(l->input_tokens, l->output_tokens, l->cache_read_tokens,
		     l->cache_write_tokens, l->cost_micro_usd, l->last_prompt_tokens);
	bad |= json_object_set_new(o, "usage", v);
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* 1 when text is an object ej_load accepts (lj_lane keeps only those). */
static int object_text(const char *text, size_t *ret_len)
{
	const char *p = text;

	if (!text)
		return 0;
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	*ret_len = strlen(text);
	return *p == '{' && jo_valid(text, *ret_len);
}

int32_t lj_lane_write(json_out *jo, const memd_lane *l)
{
	size_t len;

	jo_lit(jo, "{\"key\":");
	jo_string(jo, l->key);
	jo_lit(jo, ",\"user\":");
	jo_string(jo, l->user);
	jo_lit(jo, ",\"session_id\":");
	jo_string(jo, l->session);
	jo_lit(jo, ",\"origin\":");
	if (object_text(l->origin_json, &len))
		jo_raw(jo, l->origin_json, len);
	else
		jo_lit(jo, "null");
	jo_lit(jo, ",\"created\":");
	jo_time(jo, l->created_us);
	jo_lit(jo, ",\"updated\":");
	jo_time(jo, l->updated_us);
	jo_lit(jo, ",\"version\":");
	jo_int(jo, l->version);
	jo_lit(jo, ",\"suspended\":");
	jo_bool(jo, (l->flags & MEMD_LANE_SUSPENDED) != 0);
	jo_lit(jo, ",\"resume_pending\":");
	jo_bool(jo, (l->flags & MEMD_LANE_RESUME_PENDING) != 0);
	jo_lit(jo, ",\"resume_reason\":");
	jo_string(jo, l->flags & MEMD_LANE_RESUME_PENDING ? l->resume_reason : NULL);
	jo_lit(jo, ",\"interruptions\":");
	jo_int(jo, l->interruptions);
	jo_lit(jo, ",\"finalized\":");
	jo_bool(jo, (l->flags & MEMD_LANE_FINALIZED) != 0);
	jo_lit(jo, ",\"fresh_reset\":");
	jo_bool(jo, (l->flags & MEMD_LANE_FRESH_RESET) != 0);
	jo_lit(jo, ",\"last_reset\":");
	if (l->reset_reason) {
		jo_lit(jo, "{\"reason\":");
		jo_string(jo, l->reset_reason);
		jo_lit(jo, ",\"at\":");
		jo_time(jo, l->reset_us);
		jo_lit(jo, ",\"previous_session\":");
		jo_string(jo, l->previous_session);
		jo_lit(jo, ",\"had_activity\":");
		jo_bool(jo, (l->flags & MEMD_LANE_RESET_HAD_ACTIVITY) != 0);
		jo_lit(jo, "}");
	} else {
		jo_lit(jo, "null");
	}
	jo_lit(jo, ",\"turn\":");
	if (l->turn_id) {
		jo_lit(jo, "{\"id\":");
		jo_string(jo, l->turn_id);
		jo_lit(jo, ",\"started\":");
		jo_time(jo, l->turn_started_us);
		jo_lit(jo, ",\"lease_until\":");
		jo_time(jo, l->turn_lease_until_us);
		jo_lit(jo, "}");
	} else {
		jo_lit(jo, "null");
	}
	jo_lit(jo, ",\"inbox_depth\":");
	jo_int(jo, l->inbox_depth);
	jo_lit(jo, ",\"usage\":");
	jo_usage(jo, l->input_tokens, l->output_tokens, l->cache_read_tokens,
		 l->cache_write_tokens, l->cost_micro_usd, l->last_prompt_tokens);
	return jo_lit(jo, "}");
}

json_t *lj_inbox_item(const memd_inbox_item *i)
{
	json_t *o = json_object(), *ev;
	int bad = !o;

	if (bad)
		return NULL;
	ev = ej_load(i->body_json);
	bad |= set_str(o, "id", i->id);
	bad |= set_str(o, "mode", i->mode == MEMD_INBOX_INTERRUPT ? "interrupt" : "queue");
	bad |= json_object_set_new(o, "event", ev ? ev : json_null());
	bad |= set_time(o, "created", i->created_us);
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

int32_t lj_usage_parse(json_t *v, const char *what, memd_usage *ret, memd_error *err)
{
	static const struct {
		const char *key;
		size_t off;
	} ints[] = {
		{ "input_tokens", offsetof(memd_usage, input_tokens) },
		{ "output_tokens", offsetof(memd_usage, output_tokens) },
		{ "cache_read_tokens", offsetof(memd_usage, cache_read_tokens) },
		{ "cache_write_tokens", offsetof(memd_usage, cache_write_tokens) },
		{ "last_prompt_tokens", offsetof(memd_usage, last_prompt_tokens) },
	};
	memd_usage u = { .struct_size = sizeof(u) };
	const char *key;
	json_t *m;

	if (!json_is_object(v))
		return memd_error_set(err, MEMD_EINVAL, 0, "%s: must be an object", what);
	json_object_foreach(v, key, m) {
		size_t i;
		for (i = 0; i < sizeof(ints) / sizeof(ints[0]); i++)
			if (strcmp(key, ints[i].key) == 0)
				break;
		if (i < sizeof(ints) / sizeof(ints[0])) {
			if (!json_is_integer(m) || json_integer_value(m) < 0)
				return memd_error_set(err, MEMD_EINVAL, 0,
						      "%s.%s: must be a non-negative integer", what, key);
			memcpy((char *)&u + ints[i].off, &(int64_t){ json_integer_value(m) },
			       sizeof(int64_t));
		} else if (strcmp(key, "cost_usd") == 0) {
			double d = json_is_number(m) ? json_number_value(m) : -1;
			if (!json_is_number(m) || !(d >= 0) || d > LJ_COST_USD_MAX)
				return memd_error_set(err, MEMD_EINVAL, 0,
						      "%s.cost_usd: must be a number from 0 to %g",
						      what, LJ_COST_USD_MAX);
			u.cost_micro_usd = (int64_t)llround(d * EJ_MICRO_PER_USD);
		} else {
			return memd_error_set(err, MEMD_EINVAL, 0, "%s: unknown field '%.64s'", what,
					      key);
		}
	}
	*ret = u;
	return 0;
}
