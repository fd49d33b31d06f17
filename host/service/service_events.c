/* SPDX-License-Identifier: MIT */
/*
 * service_events: memd_events_append (one atomic append of events and a
 * state delta, replayed without writing when its event ids exist) and
 * memd_events_list (pages: memd_events_query, service_transcripts.c); the
 * append machinery memd_state_patch and the transcript operations share.
 */
#include "service/service_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "json/event_json.h"
#include "json/lane_json.h"
#include "service/title.h"

static const char *const append_fields[] = { "events", "state_delta", "expected_version",
					     "invocation_id", "usage", NULL };

void service_append_req_clear(service_append_req *q)
{
	for (size_t i = 0; q->in && i < q->n; i++)
		ej_event_in_clear(&q->in[i]);
	free(q->in);
	free(q->evp);
	free(q->seqs);
	free(q->delta_text);
	free(q->title);
	json_decref(q->keep);
	json_decref(q->temp);
	json_decref(q->body);
}

int32_t service_append(memd *m, const memd_scope *sc, service_append_req *q, const char *inv,
		       int has_version, int64_t expected, json_t **ret, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_append a = { .struct_size = sizeof(a) };
	memd_append_result res = { .struct_size = sizeof(res) };
	json_t *seqs;
	int changed;
	int32_t r;

	/* A store before 1.2 does not read usage: it would be lost. */
	if (q->has_usage && store_minor(m->sessions) < 2)
		return memd_error_set(err, MEMD_ENOTSUP, 0,
				      "%s: keeps no usage (a store of ABI 1.2 or later does)",
				      store_name(m->sessions));
	q->seqs = calloc(q->n ? q->n : 1, sizeof(*q->seqs));
	if (!q->seqs)
		return service_oom(err);
	a.flags = has_version ? MEMD_APPEND_EXPECT_VERSION : 0;
	a.expected_version = expected;
	a.events = q->evp;
	a.n_events = (uint32_t)q->n;
	a.state_delta_json = q->delta_text;
	a.title_if_unset = q->title;
	a.usage = q->has_usage ? &q->usage : NULL;
	a.op = q->op;
	a.now_us = service_clock_us(m);
	res.seqs = q->seqs;
	if ((r = store_append(m->sessions, &call, sc, &a, &res, err)) < 0)
		return r;
	q->hidden_count = res.hidden_count;
	q->unhidden_count = res.unhidden_count;
	q->replayed = (res.flags & MEMD_APPEND_REPLAYED) != 0;
	changed = !q->replayed && (q->n || res.hidden_count || res.unhidden_count);
	/* The append is durable now: failing the call would make a client
	 * resend it (and, with ids memd made, store it twice). temp: keys
	 * are scratch of the invocation; losing them (out of memory) is
	 * logged, and the index and the strategy still hear of the append. */
	if (q->temp) {
		memd_error terr = { .struct_size = sizeof(terr) };
		if (service_apply_temp(m, sc, inv, q->temp, &terr) < 0)
			hostsvc_log(m->svc, MEMD_LOG_WARN, "memd",
				    "append to '%.64s' stored, its temp: state not kept: %s",
				    sc->session, terr.msg);
	}
	if (changed)
		index_notify(m->index);
	if (changed) {
		service_run_after_append(m, sc);
		if (q->n)
			service_memory_after_append(m, sc, q->seqs[0], q->seqs[q->n - 1]);
	}
	seqs = json_array();
	for (size_t i = 0; seqs && i < q->n; i++)
		if (json_array_append_new(seqs, json_integer(q->seqs[i])) < 0) {
			json_decref(seqs);
			seqs = NULL;
		}
	if (!seqs)
		return service_oom(err);
	*ret = json_pack("{s:I,s:o,s:b}", "version", (json_int_t)res.version, "seqs", seqs,
			 "replayed", (res.flags & MEMD_APPEND_REPLAYED) != 0);
	return *ret ? 0 : service_oom(err);
}

int32_t service_append_prepare(memd *m, service_append_req *q, json_t *events, json_t *delta,
			       const char **inout_inv, memd_error *err)
{
	const char *inv = *inout_inv;
	int64_t now = service_clock_us(m);

	q->n = events ? json_array_size(events) : 0;
	if (m->set.max_batch_events && q->n > (size_t)m->set.max_batch_events)
		return memd_error_set(err, MEMD_ETOOBIG, 0,
				      "events: %zu in one batch, the limit is %" PRId64, q->n,
				      m->set.max_batch_events);
	q->in = calloc(q->n ? q->n : 1, sizeof(*q->in));
	q->evp = calloc(q->n ? q->n : 1, sizeof(*q->evp));
	if (!q->in || !q->evp)
		return service_oom(err);
	for (size_t i = 0; i < q->n; i++) {
		int32_t r = ej_event_parse(json_array_get(events, i), i, inv, now, m->svc, &q->in[i],
					   err);
		if (r < 0)
			return r;
		q->evp[i] = &q->in[i].ev;
		for (size_t j = 0; j < i; j++)
			if (strcmp(q->in[j].ev.id, q->in[i].ev.id) == 0)
				return memd_error_set(err, MEMD_EINVAL, 0,
						      "events[%zu].id: repeats events[%zu].id", i, j);
		if (!inv)
			inv = q->in[i].ev.invocation_id;
		if (!q->title && strcmp(q->in[i].ev.role, "user") == 0)
			q->title = title_from_text(q->in[i].ev.text);
	}
	if (delta) {
		int32_t r = service_split_delta(delta, &q->keep, &q->temp, err);
		if (r < 0)
			return r;
		if (json_object_size(q->keep) && !(q->delta_text = ej_dump(q->keep)))
			return service_oom(err);
	}
	*inout_inv = inv;
	return 0;
}

int32_t memd_events_append(memd *m, const char *app, const char *user, const char *sid,
			   const char *body_json, char **ret_json, memd_error *err)
{
	json_t *out = NULL;
	int32_t r = service_events_append(m, app, user, sid, body_json, &out, err);

	return r < 0 ? r : service_finish(out, ret_json, err);
}

int32_t service_events_append(memd *m, const char *app, const char *user, const char *sid,
			      const char *body_json, json_t **ret, memd_error *err)
{
	memd_scope sc;
	service_append_req q = { 0 };
	json_t *events, *delta, *ver, *usage, *out = NULL;
	const char *inv;
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0 ||
	    (r = service_parse_body(body_json, &q.body, err)) < 0)
		return r;
	if ((r = service_check_fields(q.body, append_fields, err)) < 0 ||
	    (r = service_opt_object_field(q.body, "state_delta", &delta, err)) < 0 ||
	    (r = service_opt_string_field(q.body, "invocation_id", &inv, err)) < 0)
		goto out;
	if (inv && (r = ej_check_id(inv, "invocation_id", err)) < 0)
		goto out;
	events = json_object_get(q.body, "events");
	if (events && !json_is_array(events)) {
		r = memd_error_set(err, MEMD_EINVAL, 0, "events: must be an array");
		goto out;
	}
	usage = json_object_get(q.body, "usage");
	if (usage && !json_is_null(usage)) {
		if ((r = lj_usage_parse(usage, "usage", &q.usage, err)) < 0)
			goto out;
		q.has_usage = 1;
	}
	if (!events && !delta && !q.has_usage) {
		r = memd_error_set(err, MEMD_EINVAL, 0, "events: required (or a state_delta or usage)");
		goto out;
	}
	ver = json_object_get(q.body, "expected_version");
	if (ver && !json_is_null(ver) && (!json_is_integer(ver) || json_integer_value(ver) < 0)) {
		r = memd_error_set(err, MEMD_EINVAL, 0, "expected_version: must be a non-negative integer");
		goto out;
	}
	if ((r = service_append_prepare(m, &q, events, delta, &inv, err)) < 0)
		goto out;
	r = service_append(m, &sc, &q, inv, ver && !json_is_null(ver),
			   ver ? json_integer_value(ver) : 0, &out, err);
	if (r == 0)
		*ret = out;
out:
	service_append_req_clear(&q);
	return r;
}

int32_t memd_events_list(memd *m, const char *app, const char *user, const char *sid,
			 int64_t after_seq, uint32_t limit, char **ret_json, memd_error *err)
{
	return memd_events_page(m, app, user, sid, after_seq, limit, 0, ret_json, err);
}

int32_t memd_events_page(memd *m, const char *app, const char *user, const char *sid,
			 int64_t after_seq, uint32_t limit, uint32_t flags, char **ret_json,
			 memd_error *err)
{
	return memd_events_query(m, app, user, sid, after_seq, limit, NULL,
				 flags & MEMD_READ_NO_TEXT, ret_json, err);
}
