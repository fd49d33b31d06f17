/* SPDX-License-Identifier: MIT */
/*
 * Transcripts (the facade's memd_session_rewind, memd_messages_*,
 * memd_events_clear, memd_operation_undo, memd_operations_list,
 * memd_state_history): rewind a session by user turns, read, append and
 * replace its messages in the OpenAI chat-completions shape, clear its
 * events, undo an operation, list the operations, and page the state
 * history. Nothing here deletes: the facade hides events by an operation
 * that keeps the audit trail (memd.h). Event pages with roles= and
 * include_hidden= and the OpenAI context live here too, beside the
 * routes they extend (routes_events.c keeps the plain ones).
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memd/memd.h>
#include <memd/plugin.h>

#include "request.h"
#include "routes.h"

#define APP(rq) http_req_param(rq, 0)
#define USER(rq) http_req_param(rq, 1)
#define SID(rq) http_req_param(rq, 2)
#define OP_ID(rq) http_req_param(rq, 3)

/* The one format the message routes speak (memd.h: memd_messages_get). */
#define FORMAT_OPENAI "openai"

static const char *json_body(const http_req *rq)
{
	return rq->body_len ? rq->body : NULL;
}

/* format=: absent or "openai" (*ret_openai = 1 when given), else
 * MEMD_EINVAL naming the parameter. */
static int32_t query_format(const http_req *rq, int *ret_openai, memd_error *err)
{
	const char *f = http_req_query(rq, "format");

	if (f && strcmp(f, FORMAT_OPENAI) != 0)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "query parameter format: must be openai (leave it out for memd's "
				      "own shape where the route has one)");
	*ret_openai = f != NULL;
	return 0;
}

/* roles=: a comma-separated list of user, assistant, system, tool,
 * summary; the facade judges the names. An empty value is refused here
 * (the facade reads "" as every role, which is not what was sent). */
static int32_t query_roles(const http_req *rq, const char **ret_roles, memd_error *err)
{
	const char *roles = http_req_query(rq, "roles");

	if (roles && !*roles)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "query parameter roles: a comma-separated list of user, assistant, "
				      "system, tool, summary (leave it out for every role)");
	*ret_roles = roles;
	return 0;
}

void http_h_events_query(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	uint64_t after_seq, limit;
	const char *roles = NULL;
	uint32_t flags = 0;
	char *out = NULL;
	int text, hidden;
	int64_t t0;
	int32_t r;

	if (http_req_query_u64(rq, "after_seq", 0, INT64_MAX, &after_seq, &err) < 0 ||
	    http_req_query_u64(rq, "limit", 0, MEMD_PAGE_LIMIT_MAX, &limit, &err) < 0 ||
	    http_req_query_bool(rq, "include_text", 0, &text, &err) < 0 ||
	    http_req_query_bool(rq, "include_hidden", 0, &hidden, &err) < 0 ||
	    query_roles(rq, &roles, &err) < 0 ||
	    (hidden && http_req_need_scope(rq, SETTINGS_SCOPE_WRITE,
					   "query parameter include_hidden (the audit trail)",
					   &err) < 0)) {
		http_reply_memd_error(rq, &err);
		return;
	}
	if (!text)
		flags |= MEMD_READ_NO_TEXT;
	if (hidden)
		flags |= MEMD_READ_INCLUDE_HIDDEN;
	t0 = http_now_ns();
	r = memd_events_query(rq->ctx->m, APP(rq), USER(rq), SID(rq), (int64_t)after_seq,
			      (uint32_t)limit, roles, flags, &out, &err);
	http_op_reply(rq, t0, r, &err, 200, out);
}

/* The one answer a write's return= asks for. */
#define RETURN_CONTEXT "context"

/* http_req_return_context without the reply. */
static int32_t return_context(const http_req *rq, http_return_context *ret, memd_error *err)
{
	static const char *const needs_it[] = { "format", "include_text", "query", NULL };
	const char *asked = http_req_query(rq, "return");
	uint32_t flags = 0;
	int text, openai;
	int32_t r;

	if (asked && strcmp(asked, RETURN_CONTEXT) != 0)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "query parameter return: must be context (leave it out for "
				      "the write's result alone)");
	if (!asked) {
		for (const char *const *p = needs_it; *p; p++)
			if (http_req_query(rq, *p))
				return memd_error_set(err, MEMD_EINVAL, 0,
						      "query parameter %s: only with return=context",
						      *p);
		*ret = (http_return_context){ 0 };
		return 0;
	}
	if ((r = http_req_query_bool(rq, "include_text", 0, &text, err)) < 0 ||
	    (r = query_format(rq, &openai, err)) < 0)
		return r;
	if (!text)
		flags |= MEMD_READ_NO_TEXT;
	if (openai)
		flags |= MEMD_READ_OPENAI;
	*ret = (http_return_context){ 1, flags, http_req_query(rq, "query") };
	return 0;
}

int32_t http_req_return_context(http_req *rq, http_return_context *ret)
{
	memd_error err = { .struct_size = sizeof(err) };
	int32_t r = return_context(rq, ret, &err);

	if (r < 0)
		http_reply_memd_error(rq, &err);
	return r;
}

void http_h_context_read(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	uint32_t flags = 0;
	char *out = NULL;
	int text, openai;
	int64_t t0;
	int32_t r;

	if (http_req_query_bool(rq, "include_text", 0, &text, &err) < 0 ||
	    query_format(rq, &openai, &err) < 0) {
		http_reply_memd_error(rq, &err);
		return;
	}
	if (!text)
		flags |= MEMD_READ_NO_TEXT;
	if (openai)
		flags |= MEMD_READ_OPENAI;
	t0 = http_now_ns();
	r = memd_context_recall(rq->ctx->m, APP(rq), USER(rq), SID(rq), flags,
				http_req_query(rq, "query"), &out, &err);
	http_op_reply(rq, t0, r, &err, 200, out);
}

void http_h_session_rewind(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	int64_t t0 = http_now_ns();
	int32_t r = memd_session_rewind(rq->ctx->m, APP(rq), USER(rq), SID(rq), json_body(rq), &out,
					&err);

	http_op_reply(rq, t0, r, &err, 200, out);
}

void http_h_messages_get(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	const char *roles = NULL;
	char *out = NULL;
	int openai;
	int64_t t0;
	int32_t r;

	if (query_format(rq, &openai, &err) < 0 || query_roles(rq, &roles, &err) < 0) {
		http_reply_memd_error(rq, &err);
		return;
	}
	t0 = http_now_ns();
	r = memd_messages_get(rq->ctx->m, APP(rq), USER(rq), SID(rq), roles, &out, &err);
	http_op_reply(rq, t0, r, &err, 200, out);
}

void http_h_messages_append(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	http_return_context rc;
	char *out = NULL;
	int64_t t0;
	int32_t r;

	if (http_req_return_context(rq, &rc) < 0)
		return;
	t0 = http_now_ns();
	r = rc.asked ? memd_messages_append_context(rq->ctx->m, APP(rq), USER(rq), SID(rq),
						    json_body(rq), rc.flags, rc.query, &out, &err)
		     : memd_messages_append(rq->ctx->m, APP(rq), USER(rq), SID(rq), json_body(rq),
					    &out, &err);
	http_op_reply(rq, t0, r, &err, 200, out);
}

void http_h_messages_put(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	int64_t t0 = http_now_ns();
	int32_t r = memd_messages_put(rq->ctx->m, APP(rq), USER(rq), SID(rq), json_body(rq), &out,
				      &err);
	json_t *o;

	/* 201 when the PUT made the session ("created": true), as a create. */
	if (r >= 0 && (o = json_loads(out, 0, NULL))) {
		int created = json_is_true(json_object_get(o, "created"));
		json_decref(o);
		http_op_reply(rq, t0, r, &err, created ? 201 : 200, out);
		return;
	}
	http_op_reply(rq, t0, r, &err, 200, out);
}

/* {"expected_version": n} from the query parameter, or NULL when absent;
 * *ret_body is malloc'd. */
static int32_t expected_version_body(const http_req *rq, char **ret_body, memd_error *err)
{
	uint64_t v;
	char *body = NULL;
	int32_t r;

	if (!http_req_query(rq, "expected_version")) {
		*ret_body = NULL;
		return 0;
	}
	if ((r = http_req_query_u64(rq, "expected_version", 0, INT64_MAX, &v, err)) < 0)
		return r;
	if (asprintf(&body, "{\"expected_version\":%llu}", (unsigned long long)v) < 0)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	*ret_body = body;
	return 0;
}

void http_h_events_clear(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL, *body = NULL;
	int64_t t0;
	int32_t r;

	if (expected_version_body(rq, &body, &err) < 0) {
		http_reply_memd_error(rq, &err);
		return;
	}
	t0 = http_now_ns();
	r = memd_events_clear(rq->ctx->m, APP(rq), USER(rq), SID(rq), body, &out, &err);
	free(body);
	http_op_reply(rq, t0, r, &err, 200, out);
}

void http_h_operation_undo(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	int64_t t0 = http_now_ns();
	int32_t r = memd_operation_undo(rq->ctx->m, APP(rq), USER(rq), SID(rq), OP_ID(rq),
					json_body(rq), &out, &err);

	http_op_reply(rq, t0, r, &err, 200, out);
}

void http_h_operation_list(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	char *out = NULL;
	int64_t t0 = http_now_ns();
	int32_t r = memd_operations_list(rq->ctx->m, APP(rq), USER(rq), SID(rq), &out, &err);

	http_op_reply(rq, t0, r, &err, 200, out);
}

void http_h_state_history(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	uint64_t limit;
	char *out = NULL;
	int64_t t0;
	int32_t r;

	if (http_req_query_u64(rq, "limit", 0, MEMD_PAGE_LIMIT_MAX, &limit, &err) < 0) {
		http_reply_memd_error(rq, &err);
		return;
	}
	t0 = http_now_ns();
	r = memd_state_history(rq->ctx->m, APP(rq), USER(rq), SID(rq), http_req_query(rq, "cursor"),
			       (uint32_t)limit, &out, &err);
	http_op_reply(rq, t0, r, &err, 200, out);
}
