/* SPDX-License-Identifier: MIT */
/*
 * event_json: the JSON shapes of memd's records (api/openapi.yaml), and
 * validation of what clients send: ids, artifact names, event inputs.
 */
#ifndef MEMD_HOST_EVENT_JSON_H
#define MEMD_HOST_EVENT_JSON_H

#include <jansson.h>

#include <memd/plugin.h>

#include "plugins/hostsvc.h"

/* RFC 3339 UTC with microseconds, e.g. "2026-11-21T05:04:00.123456Z",
 * NUL-terminated; returns its length. Any int64 is formatted as gmtime_r
 * and "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ" would (years beyond 9999 or
 * before 0 included), without either. */
#define EJ_TIME_LEN 64
size_t ej_format_time(int64_t unix_us, char buf[EJ_TIME_LEN]);
/* Parse RFC 3339 ("Z" or +hh:mm offset, optional fraction up to 9 digits)
 * into unix us. 0 or MEMD_EINVAL. */
int32_t ej_parse_time(const char *text, int64_t *ret_unix_us);

/* 0 if s is a valid id: 1..MEMD_ID_MAX bytes of UTF-8 with no control
 * characters and no '/'. Otherwise MEMD_EINVAL with "<what>: <reason>". */
int32_t ej_check_id(const char *s, const char *what, memd_error *err);
/* As ej_check_id, for artifact names: also refuses ".." anywhere in the
 * name (as the store ABI promises plugins) and backslashes; "." is fine. */
int32_t ej_check_name(const char *s, memd_error *err);
/* 0 if s is valid UTF-8 (no overlongs/surrogates) of len bytes. */
int ej_utf8_valid(const char *s, size_t len);

/* The name of a MEMD_OP_* kind ("rewind", "rewrite", "clear", "undo"),
 * or NULL for another value. */
const char *ej_op_kind_name(uint32_t kind);

/* New JSON objects for records (NULL on ENOMEM). JSON text members are
 * embedded as JSON values, not strings. */
/* An event hidden by a transcript operation (hidden_us set) also carries
 * "hidden": {"at", "by": operation id, "kind"}, and an event an operation
 * appended "operation": its id; both are absent otherwise. */
json_t *ej_event(const memd_event *e);
/* A session made or touched by a lane (lane_key, origin, previous
 * session, start or end reason, end time or usage set) also carries
 * "lane_key", "origin", "previous_session", "start_reason", "ended" and
 * "end_reason" (null while open) and "usage" (ej_usage). */
json_t *ej_session(const memd_session *s);
/* Micro-USD per USD: costs are kept as integers (memd_usage.cost_micro_usd). */
#define EJ_MICRO_PER_USD 1000000.0
/* {"input_tokens", "output_tokens", "cache_read_tokens",
 * "cache_write_tokens", "last_prompt_tokens", "cost_usd"} of usage sums
 * (every field); NULL on ENOMEM. */
json_t *ej_usage(int64_t input_tokens, int64_t output_tokens, int64_t cache_read_tokens,
		 int64_t cache_write_tokens, int64_t cost_micro_usd, int64_t last_prompt_tokens);
/* 1 when any usage member of s is nonzero. */
int ej_session_has_usage(const memd_session *s);
/* 1 when ej_session writes s's lifecycle members. */
int ej_session_has_lifecycle(const memd_session *s);
json_t *ej_artifact(const memd_artifact *a);
/* memd.h's operation object: {"id", "kind", "created", "version",
 * "hidden_count", "unhidden_count", "appended": {"first_seq", "last_seq"}
 * | null, "undo_of", "undone_by"}. */
json_t *ej_operation(const memd_operation *o);
/* An error body's "error" object for a failure kept inside an answer (a
 * job's, a recall's, a write's context read): {"code": the name of the
 * MEMD_E* code (internal for an unknown one), "message", "retryable":
 * MEMD_ERROR_RETRYABLE in flags}. NULL on ENOMEM. */
json_t *ej_error(int32_t code, const char *message, uint32_t flags);

/* An event a client sent, validated and completed: owned strings behind
 * ev's pointers. */
typedef struct ej_event_in {
	memd_event ev;
	char *owned[8];
	size_t n_owned;
} ej_event_in;

/* Validate one client event object (fields: id, invocation_id, author,
 * role, branch, content, actions, metadata, timestamp; anything else is an
 * error) and fill *ret: id defaults to a new UUIDv7, author to the role,
 * timestamp to now_us, invocation_id to default_invocation; text is
 * extracted from the content parts and tokens counted with svc. index is
 * used in messages ("events[3].role: ..."). Strings not listed in owned
 * point into `in`, which must outlive *ret. MEMD_EINVAL or MEMD_ENOMEM;
 * on failure nothing needs freeing. */
int32_t ej_event_parse(json_t *in, size_t index, const char *default_invocation, int64_t now_us,
		       hostsvc *svc, ej_event_in *ret, memd_error *err);
/* Free what ej_event_parse filled; accepts NULL. */
void ej_event_in_clear(ej_event_in *e);

/* Plain text of a content value (string, or {"parts": [...]}): text parts
 * as is, tool calls as "name(args)", tool results as their content (the
 * texts of its text parts when it is a list of parts), joined by
 * newlines. malloc'd; NULL on ENOMEM or bad shape (with err). */
char *ej_content_text(json_t *content, memd_error *err);

/* Parse text as a JSON value (JSON_DECODE_ANY); NULL when text is NULL or
 * not JSON. */
json_t *ej_load(const char *text);
/* Compact JSON text of v (malloc'd) or NULL on ENOMEM. */
char *ej_dump(const json_t *v);

#endif
