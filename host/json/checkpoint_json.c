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

/* A stored metadata text: the object, or {}. */
static int32_t out_metadata(json_out *jo, const char *text)
{
	const char *p = text;

	while (p && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return jo_json_text(jo, p && *p == '{' ? text : NULL, "{}");
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

int32_t cj_write_out(json_out *jo, const memd_checkpoint_write *w, const char *task_path)
{
	jo_lit(jo, "{" KEY("task_id"));
	jo_string(jo, w->task_id);
	jo_lit(jo, "," KEY("task_path"));
	jo_string(jo, task_path ? task_path : "");
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

/* The deepest metadata cj_put_scan reads itself (deeper: jansson's path,
 * which counts the depth as it always did). */
#define SCAN_DEPTH_MAX 64

typedef struct scan {
	const char *p;
} scan;

static void scan_ws(scan *sc)
{
	while (*sc->p == ' ' || *sc->p == '\t' || *sc->p == '\n' || *sc->p == '\r')
		sc->p++;
}

/* A string without escapes or control characters, valid UTF-8, at sc->p
 * (its opening quote): its characters into *ret; 0 for another. */
static int scan_string(scan *sc, cj_span *ret)
{
	const char *start;

	if (*sc->p != '"')
		return 0;
	start = ++sc->p;
	while (*sc->p != '"') {
		unsigned char c = (unsigned char)*sc->p;
		if (c < ' ' || c == '\\')
			return 0; /* a control character, an escape, or the end */
		sc->p++;
	}
	ret->p = start;
	ret->len = (size_t)(sc->p - start);
	sc->p++;
	return ej_utf8_valid(ret->p, ret->len);
}

static int scan_null(scan *sc)
{
	if (strncmp(sc->p, "null", 4) != 0)
		return 0;
	sc->p += 4;
	return 1;
}

/* An object's text at sc->p, its end found by nesting outside strings
 * (jansson checks the text itself); 0 past SCAN_DEPTH_MAX or the end. */
static int scan_object(scan *sc, cj_span *ret)
{
	const char *start = sc->p;
	int depth = 0, in_string = 0;

	if (*sc->p != '{')
		return 0;
	for (; *sc->p; sc->p++) {
		char c = *sc->p;
		if (in_string) {
			if (c == '\\' && sc->p[1])
				sc->p++;
			else if (c == '"')
				in_string = 0;
		} else if (c == '"') {
			in_string = 1;
		} else if (c == '{' || c == '[') {
			if (++depth > SCAN_DEPTH_MAX)
				return 0;
		} else if ((c == '}' || c == ']') && --depth == 0) {
			sc->p++;
			ret->p = start;
			ret->len = (size_t)(sc->p - start);
			return 1;
		}
	}
	return 0;
}

int cj_put_scan(const char *body, cj_put_body *ret)
{
	static const char *const names[] = { "parent_checkpoint_id", "type", "checkpoint",
					     "metadata", "run_state" };
	enum { PARENT, TYPE, CHECKPOINT, METADATA, RUN_STATE, N_MEMBERS };
	cj_put_body b = { 0 };
	cj_span *slot[N_MEMBERS] = { &b.parent_checkpoint_id, &b.type, &b.checkpoint,
				     &b.metadata, &b.run_state };
	int seen[N_MEMBERS] = { 0 };
	scan sc = { body };

	if (!body)
		return 0;
	scan_ws(&sc);
	if (*sc.p != '{')
		return 0;
	sc.p++;
	scan_ws(&sc);
	while (*sc.p != '}') {
		cj_span key;
		int k;

		if (!scan_string(&sc, &key))
			return 0;
		for (k = 0; k < N_MEMBERS; k++)
			if (strlen(names[k]) == key.len && memcmp(names[k], key.p, key.len) == 0)
				break;
		if (k == N_MEMBERS || seen[k]++)
			return 0; /* another member, or one again */
		scan_ws(&sc);
		if (*sc.p != ':')
			return 0;
		sc.p++;
		scan_ws(&sc);
		if (*sc.p == 'n') {
			if ((k == TYPE || k == CHECKPOINT) || !scan_null(&sc))
				return 0; /* null type or checkpoint: jansson's path says why */
		} else if (k == METADATA ? !scan_object(&sc, slot[k]) : !scan_string(&sc, slot[k])) {
			return 0;
		}
		scan_ws(&sc);
		if (*sc.p == ',') {
			sc.p++;
			scan_ws(&sc);
			if (*sc.p == '}')
				return 0; /* a trailing comma */
		} else if (*sc.p != '}') {
			return 0;
		}
	}
	sc.p++;
	scan_ws(&sc);
	if (*sc.p || !seen[TYPE] || !seen[CHECKPOINT])
		return 0;
	*ret = b;
	return 1;
}

int32_t cj_bytes(const json_t *v, const char *what, void **ret, size_t *ret_len,
		 memd_error *err)
{
	if (!json_is_string(v))
		return memd_error_set(err, MEMD_EINVAL, 0, "%s: must be a base64 string", what);
	return cj_bytes_text(json_string_value(v), json_string_length(v), what, ret, ret_len, err);
}

int32_t cj_bytes_text(const char *text, size_t len, const char *what, void **ret,
		      size_t *ret_len, memd_error *err)
{
	int r = b64_decode(text, len, B64_STD, ret, ret_len);
	if (r == -2)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	if (r < 0)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "%s: must be a base64 string (standard alphabet, padded)",
				      what);
	return 0;
}
