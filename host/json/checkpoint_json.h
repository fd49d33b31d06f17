/* SPDX-License-Identifier: MIT */
/*
 * checkpoint_json: the JSON shapes of run checkpoints (api/memd/memd.h,
 * "run checkpoints"): a checkpoint's summary and its tuple (the summary
 * with its payload and pending writes) and a pending write, written by
 * json_out; run state names, bytes as base64 text
 * (standard alphabet, padded) both ways, and a put's usual body read
 * without a tree.
 */
#ifndef MEMD_HOST_CHECKPOINT_JSON_H
#define MEMD_HOST_CHECKPOINT_JSON_H

#include <jansson.h>

#include <memd/plugin.h>

#include "json/json_out.h"

/* The name of a MEMD_RUN_* state ("running", "interrupted", "done"), or
 * NULL for another value (MEMD_RUN_UNSET included). */
const char *cj_run_state_name(uint32_t run_state);

/* The MEMD_RUN_* state of name (one of cj_run_state_name's) into *ret.
 * MEMD_EINVAL naming what and the allowed names for another text or
 * NULL. */
int32_t cj_run_state_parse(const char *name, const char *what, uint32_t *ret, memd_error *err);

/* The summary object of c, written by jo: {"session_id", "checkpoint_ns",
 * "checkpoint_id", "parent_checkpoint_id" (null when none), "type",
 * "metadata" (c->metadata_json as stored when jo_valid accepts it as an
 * object, else {}), "run_state", "created", "updated", "expires_at" (null
 * when never), "size" (payload bytes)}, no whitespace. With full, the
 * tuple: also "checkpoint" (the payload as base64), and the object is
 * left open after "pending_writes":[ for the caller to add cj_write_out
 * objects (separated by ',') and close with "]}". Returns jo's sticky
 * error (json_out.h). */
int32_t cj_checkpoint_out(json_out *jo, const memd_checkpoint *c, int full);

/* A pending write, written by jo: {"task_id", "task_path" (task_path;
 * NULL as ""), "idx", "channel", "type", "value" (base64)}. Returns jo's
 * sticky error. */
int32_t cj_write_out(json_out *jo, const memd_checkpoint_write *w, const char *task_path);

/* A part of a text (not NUL-terminated); p NULL: none. */
typedef struct cj_span {
	const char *p;
	size_t len;
} cj_span;

/* The members of a checkpoint put's body (PUT .../checkpoints/{id}) as
 * parts of its text: strings without their quotes, metadata as its
 * object's text; a member absent or null has p NULL. */
typedef struct cj_put_body {
	cj_span parent_checkpoint_id;
	cj_span type;
	cj_span checkpoint;
	cj_span metadata;
	cj_span run_state;
} cj_put_body;

/* Read body as a put's body without building a tree: 1 and *ret when it
 * is a JSON object of only those members, each at most once, "type" and
 * "checkpoint" strings, "parent_checkpoint_id" and "run_state" strings or
 * null, "metadata" an object or null, every string valid UTF-8 without
 * escapes or control characters (base64, ids, names); then json_loads
 * (JSON_REJECT_DUPLICATES) of body gives the same members, but for the
 * metadata object, which the caller parses (it may still be refused).
 * 0 for any other body, which the caller parses with jansson (and reports
 * its faults as it always did). Allocates nothing. */
int cj_put_scan(const char *body, cj_put_body *ret);

/* cj_bytes of the len characters of a JSON string's value at text. */
int32_t cj_bytes_text(const char *text, size_t len, const char *what, void **ret,
		      size_t *ret_len, memd_error *err);

/* v (a member named what) as the bytes of its base64 text into malloc'd
 * *ret (*ret_len bytes): MEMD_EINVAL "<what>: must be a base64 string"
 * when v is not a string of standard, padded base64; MEMD_ENOMEM. */
int32_t cj_bytes(const json_t *v, const char *what, void **ret, size_t *ret_len,
		 memd_error *err);

#endif
