/* SPDX-License-Identifier: MIT */
/*
 * checkpoint_json: the JSON of run checkpoints (checkpoint_json.h).
 */
#include "json/checkpoint_json.h"

#include <stdlib.h>
#include <string.h>

#include "json/event_json.h"
#include "util/base64.h"

static const char *const run_states[] = { [MEMD_RUN_RUNNING] = "running",
					  [MEMD_RUN_INTERRUPTED] = "interrupted",
					  [MEMD_RUN_DONE] = "done" };

const char *cj_run_state_name(uint32_t run_state)
{
	return run_state >= MEMD_RUN_RUNNING && run_state <= MEMD_RUN_DONE ? run_states[run_state]
									   : NULL;
}

int32_t cj_run_state_parse(const char *name, const char *what, uint32_t *ret, memd_error *err)
{
	for (uint32_t s = MEMD_RUN_RUNNING; name && s <= MEMD_RUN_DONE; s++) {
		if (strcmp(name, run_states[s]) == 0) {
			*ret = s;
			return 0;
		}
	}
	return memd_error_set(err, MEMD_EINVAL, 0, "%s: must be running, interrupted or done",
			      what);
}

static json_t *time_json(int64_t us)
{
	char buf[EJ_TIME_LEN];

	ej_format_time(us, buf);
	return json_string(buf);
}

/* bytes as a base64 JSON string; NULL on ENOMEM. */
static json_t *bytes_json(const void *p, uint64_t n)
{
	size_t len = 0;
	char *text = n <= SIZE_MAX ? b64_encode(p, (size_t)n, B64_STD, &len) : NULL;
	json_t *v = text ? json_stringn(text, len) : NULL;

	free(text);
	return v;
}

json_t *cj_checkpoint(const memd_checkpoint *c, int full)
{
	json_t *meta = c->metadata_json ? ej_load(c->metadata_json) : NULL;
	const char *state = cj_run_state_name(c->run_state);
	json_t *o;

	if (!meta || !json_is_object(meta)) {
		json_decref(meta);
		meta = json_object();
	}
	o = json_pack("{s:s,s:s,s:s,s:s?,s:s,s:o,s:s,s:o,s:o,s:o,s:I}", "session_id", c->session,
		      "checkpoint_ns", c->ns ? c->ns : "", "checkpoint_id", c->id,
		      "parent_checkpoint_id", c->parent_id, "type", c->type ? c->type : "",
		      "metadata", meta, "run_state", state ? state : "running", "created",
		      time_json(c->created_us), "updated", time_json(c->updated_us), "expires_at",
		      c->expires_us ? time_json(c->expires_us) : json_null(), "size",
		      (json_int_t)c->payload_size);
	if (o && full &&
	    (json_object_set_new(o, "checkpoint", bytes_json(c->payload, c->payload_size)) < 0 ||
	     json_object_set_new(o, "pending_writes", json_array()) < 0)) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *cj_write(const memd_checkpoint_write *w)
{
	return json_pack("{s:s,s:I,s:s,s:s,s:o}", "task_id", w->task_id, "idx",
			 (json_int_t)w->idx, "channel", w->channel ? w->channel : "", "type",
			 w->type ? w->type : "", "value", bytes_json(w->value, w->value_size));
}

/* ---- the direct writer ---------------------------------------------------- */

#define KEY(k) "\"" k "\":"

static int32_t out_fail(json_out *jo, int32_t code)
{
	if (!jo->error)
		jo->error = code;
	return jo->error;
}

/* bytes as a base64 JSON string (its characters need no escape). */
static int32_t out_bytes(json_out *jo, const void *p, uint64_t n)
{
	size_t len = 0;
	char *text = n <= SIZE_MAX ? b64_encode(p, (size_t)n, B64_STD, &len) : NULL;

	if (!text)
		return out_fail(jo, MEMD_ENOMEM);
	jo_lit(jo, "\"");
	jo_raw(jo, text, len);
	free(text);
	return jo_lit(jo, "\"");
}

/* A stored metadata text as cj_checkpoint embeds it: the object, or {}. */
static int32_t out_metadata(json_out *jo, const char *text)
{
	const char *p = text;
	size_t n;

	if (!p)
		return jo_lit(jo, "{}");
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	n = strlen(text);
	if (*p != '{' || !jo_valid(text, n))
		return jo_lit(jo, "{}");
	return jo_raw(jo, text, n);
}

int32_t cj_checkpoint_out(json_out *jo, const memd_checkpoint *c, int full)
{
	const char *state = cj_run_state_name(c->run_state);

	jo_lit(jo, "{" KEY("session_id"));
	jo_string(jo, c->session);
	jo_lit(jo, "," KEY("checkpoint_ns"));
	jo_string(jo, c->ns ? c->ns : "");
	jo_lit(jo, "," KEY("checkpoint_id"));
	jo_string(jo, c->id);
	jo_lit(jo, "," KEY("parent_checkpoint_id"));
	jo_string(jo, c->parent_id);
	jo_lit(jo, "," KEY("type"));
	jo_string(jo, c->type ? c->type : "");
	jo_lit(jo, "," KEY("metadata"));
	out_metadata(jo, c->metadata_json);
	jo_lit(jo, "," KEY("run_state"));
	jo_string(jo, state ? state : "running");
	jo_lit(jo, "," KEY("created"));
	jo_time(jo, c->created_us);
	jo_lit(jo, "," KEY("updated"));
	jo_time(jo, c->updated_us);
	jo_lit(jo, "," KEY("expires_at"));
	if (c->expires_us)
		jo_time(jo, c->expires_us);
	else
		jo_lit(jo, "null");
	jo_lit(jo, "," KEY("size"));
	jo_int(jo, (int64_t)c->payload_size);
	if (!full)
		return jo_lit(jo, "}");
	jo_lit(jo, "," KEY("checkpoint"));
	out_bytes(jo, c->payload, c->payload_size);
	return jo_lit(jo, "," KEY("pending_writes") "[");
}

int32_t cj_write_out(json_out *jo, const memd_checkpoint_write *w)
{
	jo_lit(jo, "{" KEY("task_id"));
	jo_string(jo, w->task_id);
	jo_lit(jo, "," KEY("idx"));
	jo_int(jo, w->idx);
	jo_lit(jo, "," KEY("channel"));
	jo_string(jo, w->channel ? w->channel : "");
	jo_lit(jo, "," KEY("type"));
	jo_string(jo, w->type ? w->type : "");
	jo_lit(jo, "," KEY("value"));
	out_bytes(jo, w->value, w->value_size);
	return jo_lit(jo, "}");
}

/* ---- parsing ----------------------------------------------------------------- */

int32_t cj_bytes(const json_t *v, const char *what, void **ret, size_t *ret_len,
		 memd_error *err)
{
	int r;

	if (!json_is_string(v))
		return memd_error_set(err, MEMD_EINVAL, 0, "%s: must be a base64 string", what);
	r = b64_decode(json_string_value(v), json_string_length(v), B64_STD, ret, ret_len);
	if (r == -2)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	if (r < 0)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "%s: must be a base64 string (standard alphabet, padded)",
				      what);
	return 0;
}
