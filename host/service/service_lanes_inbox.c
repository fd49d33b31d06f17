/* SPDX-License-Identifier: MIT */
/*
 * service_lanes_inbox: a lane's inbox (memd_inbox_put, _take, _list): the
 * messages that arrive while a turn runs, in the store (a next-up slot
 * and a FIFO), taken by the turn holder only, each once.
 */
#include "service/service_int.h"

#include <string.h>

#include "json/event_json.h"
#include "json/lane_json.h"
#include "util/uuid.h"

static const char *const put_fields[] = { "mode", "event", NULL };
static const char *const take_fields[] = { "turn_id", NULL };

static int32_t check_inbox_scope(const char *app, const char *user, const char *key,
				 memd_scope *sc, memd_error *err)
{
	int32_t r;
	if ((r = service_check_scope(app, user, NULL, sc, err)) < 0)
		return r;
	return ej_check_id(key, "lane key", err);
}

/* MEMD_ENOTFOUND naming the lane, for a store's "no such lane". */
static int32_t no_lane(int32_t r, const char *key, const char *user, memd_error *err)
{
	if (r != MEMD_ENOTFOUND)
		return r;
	return memd_error_set(err, MEMD_ENOTFOUND, 0,
			      "no lane '%.255s' of user '%.255s' (open it first)", key, user);
}

int32_t memd_inbox_put(memd *m, const char *app, const char *user, const char *key,
		       const char *body_json, char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	json_t *body = NULL, *ev;
	const char *mode;
	ej_event_in in = { 0 };
	memd_inbox_item item = { .struct_size = sizeof(item) };
	char id[UUID_TEXT_LEN + 1], *text = NULL;
	uint32_t depth = 0;
	int parsed = 0;
	int32_t r;

	if ((r = check_inbox_scope(app, user, key, &sc, err)) < 0 ||
	    (r = service_parse_body(body_json, &body, err)) < 0)
		return r;
	if ((r = service_check_fields(body, put_fields, err)) < 0 ||
	    (r = service_opt_string_field(body, "mode", &mode, err)) < 0)
		goto out;
	if (!mode || (strcmp(mode, "interrupt") != 0 && strcmp(mode, "queue") != 0)) {
		r = memd_error_set(err, MEMD_EINVAL, 0, "mode: required, interrupt or queue");
		goto out;
	}
	ev = json_object_get(body, "event");
	if (!json_is_object(ev)) {
		r = memd_error_set(err, MEMD_EINVAL, 0,
				   "event: required, an event as an append takes it");
		goto out;
	}
	/* The event must be one an append would take when it is taken. */
	{
		memd_error inner = { 0 };
		if ((r = ej_event_parse(ev, 0, NULL, service_clock_us(m), m->svc, &in, &inner)) < 0) {
			r = memd_error_set(err, r, 0, "event: %s", inner.msg);
			goto out;
		}
	}
	parsed = 1;
	if (!(text = ej_dump(ev))) {
		r = service_oom(err);
		goto out;
	}
	if (uuid_v7(id) < 0) {
		r = memd_error_set(err, MEMD_EIO, 0, "cannot generate an inbox item id");
		goto out;
	}
	item.id = id;
	item.mode = strcmp(mode, "interrupt") == 0 ? MEMD_INBOX_INTERRUPT : MEMD_INBOX_QUEUE;
	item.body_json = text;
	item.created_us = service_clock_us(m);
	r = store_inbox_put(m->sessions, &call, &sc, key, &item, &depth, err);
	if (r < 0) {
		r = no_lane(r, key, user, err);
		goto out;
	}
	/* The slot is empty only while the FIFO is (a take moves the FIFO's
	 * head up): a queued item is in the slot iff it is the only one. */
	r = service_finish(json_pack("{s:s,s:I,s:b}", "id", id, "depth", (json_int_t)depth, "slot",
				     item.mode == MEMD_INBOX_INTERRUPT || depth == 1),
			   ret_json, err);
out:
	if (parsed)
		ej_event_in_clear(&in);
	free(text);
	json_decref(body);
	return r;
}

static int32_t sink_item(void *ud, const memd_inbox_item *i)
{
	json_t **slot = ud;
	json_decref(*slot);
	*slot = lj_inbox_item(i);
	return *slot ? 0 : MEMD_ENOMEM;
}

int32_t memd_inbox_take(memd *m, const char *app, const char *user, const char *key,
			const char *body_json, char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	json_t *body = NULL, *item = NULL;
	const char *turn_id;
	memd_inbox_sink sink = { sizeof(sink), &item, sink_item };
	uint32_t depth = 0;
	int32_t r;

	if ((r = check_inbox_scope(app, user, key, &sc, err)) < 0 ||
	    (r = service_parse_body(body_json, &body, err)) < 0)
		return r;
	if ((r = service_check_fields(body, take_fields, err)) < 0 ||
	    (r = service_opt_string_field(body, "turn_id", &turn_id, err)) < 0)
		goto out;
	if (!turn_id) {
		r = memd_error_set(err, MEMD_EINVAL, 0, "turn_id: required (the turn holder takes)");
		goto out;
	}
	if ((r = ej_check_id(turn_id, "turn_id", err)) < 0)
		goto out;
	r = store_inbox_take(m->sessions, &call, &sc, key, turn_id, service_clock_us(m), &sink,
			     &depth, err);
	if (r == MEMD_ECONFLICT) {
		r = memd_error_set(err, MEMD_ECONFLICT, 0,
				   "turn '%.64s' does not hold lane '%.255s' (only the holder of an "
				   "unexpired turn takes from its inbox)",
				   turn_id, key);
		goto out;
	}
	if (r < 0) {
		r = no_lane(r, key, user, err);
		goto out;
	}
	r = service_finish(json_pack("{s:O,s:I}", "item", item ? item : json_null(), "depth",
				     (json_int_t)depth),
			   ret_json, err);
out:
	json_decref(item);
	json_decref(body);
	return r;
}

static int32_t sink_item_array(void *ud, const memd_inbox_item *i)
{
	json_t *o = lj_inbox_item(i);
	return o && json_array_append_new(ud, o) == 0 ? 0 : MEMD_ENOMEM;
}

int32_t memd_inbox_list(memd *m, const char *app, const char *user, const char *key,
			char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	json_t *arr;
	memd_inbox_sink sink;
	int32_t r;

	if ((r = check_inbox_scope(app, user, key, &sc, err)) < 0)
		return r;
	if (!(arr = json_array()))
		return service_oom(err);
	sink = (memd_inbox_sink){ sizeof(sink), arr, sink_item_array };
	r = store_inbox_list(m->sessions, &call, &sc, key, &sink, err);
	if (r < 0) {
		json_decref(arr);
		return no_lane(r, key, user, err);
	}
	return service_finish(json_pack("{s:o,s:I}", "items", arr, "depth",
					(json_int_t)json_array_size(arr)),
			      ret_json, err);
}
