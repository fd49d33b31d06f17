/* SPDX-License-Identifier: MIT */
/*
 * /mcp: the Model Context Protocol's Streamable HTTP transport over the
 * dispatcher of host/mcp/. A POST carries one JSON-RPC message (or a
 * batch, in the revision that has them) and is answered with JSON: 200
 * with the response, 202 without a body when there is none to give
 * (notifications, responses). initialize starts a session and its answer
 * carries Mcp-Session-Id, which every later request must send (400
 * without; 404 for one that is unknown, expired or ended, so that the
 * client initializes again). DELETE ends a session. memd opens no
 * stream of its own, so GET has no route (405, as the transport allows).
 *
 * Who the tools act for comes from the API key: a key bound to a user
 * (server.api_keys[].user) binds the session to its app and that user;
 * any other key (or none, on loopback without keys) leaves each call to
 * name them, within the key's apps. A read key gets the read tools only.
 * A session is found only with the key that started it.
 */
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <memd/memd.h>

#include "errors.h"
#include "mcp/mcp.h"
#include "mcp/mcp_sessions.h"
#include "request.h"
#include "routes.h"

#define SESSION_HEADER "Mcp-Session-Id"
#define VERSION_HEADER "MCP-Protocol-Version"
/* The session-not-found error code the SDKs answer with. */
#define MCP_SESSION_NOT_FOUND (-32001)
/* The JSON-RPC code of a transport-level refusal ("server error"). */
#define MCP_TRANSPORT_ERROR (-32000)
#define ORIGIN_ECHO_MAX 64
#define MSG_MAX 384

/* The session owner of requests without keys (no key configured). */
static const char no_key_owner;

static const char *header(const http_req *rq, const char *name)
{
	return MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, name);
}

/* Reply status with a JSON-RPC error without an id. */
static void reply_rpc_error(http_req *rq, unsigned status, int32_t code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void reply_rpc_error(http_req *rq, unsigned status, int32_t code, const char *fmt, ...)
{
	char msg[MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	http_reply_json(rq, status, mcp_error_text(code, msg));
	rq->error_name = "mcp";
	{
		/* Kept for the log line; a longer message is cut. */
		size_t n = strnlen(msg, sizeof(rq->error_msg) - 1);
		memcpy(rq->error_msg, msg, n);
		rq->error_msg[n] = '\0';
	}
}

/* Origin (DNS rebinding): a browser's request from a page whose origin
 * names a host memd does not answer to (the Host rules: allowed_hosts,
 * else the loopback names when memd has no keys) is refused. 0 to go on,
 * -1 with a reply set. */
static int origin_ok(http_req *rq)
{
	const char *origin = header(rq, MHD_HTTP_HEADER_ORIGIN);
	const char *authority;
	memd_error err = { .struct_size = sizeof(err) };

	if (!origin)
		return 0;
	authority = strstr(origin, "://");
	authority = authority ? authority + strlen("://") : NULL;
	if (authority && !strchr(authority, '/') &&
	    http_host_check(&rq->ctx->hosts, authority, 1, &err) == 0 &&
	    (rq->ctx->hosts.allowed || rq->ctx->hosts.loopback_only ||
	     strcasecmp(authority, header(rq, MHD_HTTP_HEADER_HOST) ? header(rq, MHD_HTTP_HEADER_HOST)
								      : "") == 0))
		return 0;
	http_reply_error(rq, MEMD_EFORBIDDEN, 0,
			 "a request from the web page at Origin '%.*s', which is not a host this memd "
			 "answers to (server.allowed_hosts)",
			 ORIGIN_ECHO_MAX, origin);
	return -1;
}

/* What every /mcp request checks first: the endpoint is on, the origin
 * allowed. *ret_owner: whose sessions the request may use; *ret_key: its
 * key (NULL without keys). 0, or -1 with a reply set. */
static int begin(http_req *rq, const void **ret_owner, const settings_api_key **ret_key)
{
	const settings *set = rq->ctx->set;

	if (!set->mcp_enabled || !rq->ctx->mcp) {
		http_reply_error(rq, HTTP_E_NOROUTE, 0, "no such path: /mcp is off (server.mcp.enabled)");
		return -1;
	}
	if (origin_ok(rq) < 0)
		return -1;
	*ret_key = NULL;
	*ret_owner = &no_key_owner;
	if (set->n_api_keys) {
		/* The dispatcher let the request in, so it names a key. */
		*ret_key = http_auth_key(set->api_keys, set->n_api_keys,
					 header(rq, MHD_HTTP_HEADER_AUTHORIZATION));
		if (!*ret_key) {
			http_reply_error(rq, MEMD_EAUTH, 0, "invalid API key");
			return -1;
		}
		*ret_owner = *ret_key;
	}
	return 0;
}

/* MCP-Protocol-Version, when sent, must be the session's revision. 0,
 * or -1 with a 400 reply. */
static int version_ok(http_req *rq, mcp_conn *c)
{
	const char *v = header(rq, VERSION_HEADER);

	if (!v || strcmp(v, mcp_conn_version(c)) == 0)
		return 0;
	if (!mcp_version_supported(v))
		reply_rpc_error(rq, 400, MCP_TRANSPORT_ERROR,
				"unsupported " VERSION_HEADER ": %.32s (memd speaks %s)", v, mcp_versions_text());
	else
		reply_rpc_error(rq, 400, MCP_TRANSPORT_ERROR,
				VERSION_HEADER ": %.32s is not this session's revision (%s)", v,
				mcp_conn_version(c));
	return -1;
}

/* Answer what mcp_handle made of a message. */
static void reply_handled(http_req *rq, int64_t t0, int32_t r, const memd_error *err, char *out,
			  int kind)
{
	http_op_done(rq, t0, r, err);
	if (r < 0)
		http_reply_memd_error(rq, err);
	else if (kind == MCP_OUT_NONE)
		http_reply_empty(rq, 202);
	else
		http_reply_json(rq, kind == MCP_OUT_INVALID ? 400 : 200, out);
}

/* A POST without a session: only initialize may come, and starts one. */
static void post_initialize(http_req *rq, const void *owner, const settings_api_key *key)
{
	memd_error err = { .struct_size = sizeof(err) };
	mcp_binding b = { .scope = MCP_SCOPE_WRITE };
	char id[MCP_SESSION_ID_LEN + 1];
	mcp_conn *c = NULL;
	char *out = NULL;
	int kind = MCP_OUT_NONE;
	int64_t t0 = http_now_ns();
	int32_t r;

	if (key) {
		b.scope = key->scope >= SETTINGS_SCOPE_WRITE ? MCP_SCOPE_WRITE : MCP_SCOPE_READ;
		if (key->user) {
			b.app = key->apps[0];
			b.user = key->user;
		} else {
			b.apps = (const char *const *)key->apps;
		}
	}
	if ((r = mcp_conn_new(rq->ctx->m, &b, &c, &err)) < 0 ||
	    (r = mcp_handle(c, rq->body, rq->body_len, &out, &kind, &err)) < 0) {
		mcp_conn_free(c);
		reply_handled(rq, t0, r, &err, NULL, kind);
		return;
	}
	if (!mcp_conn_version(c)[0]) {
		/* initialize failed: its error response, and no session. */
		mcp_conn_free(c);
		reply_handled(rq, t0, 0, &err, out, kind);
		return;
	}
	if ((r = mcp_sessions_add(rq->ctx->mcp, c, owner, http_now_ns(), id, &err)) < 0) {
		free(out);
		reply_handled(rq, t0, r, &err, NULL, kind);
		return;
	}
	reply_handled(rq, t0, 0, &err, out, kind);
	http_reply_header(rq, SESSION_HEADER, id);
}

void http_h_mcp_post(http_req *rq)
{
	memd_error err = { .struct_size = sizeof(err) };
	const settings_api_key *key;
	const void *owner;
	const char *sid;
	mcp_session *s;
	char *out = NULL;
	int kind = MCP_OUT_NONE;
	int64_t t0;
	int32_t r;

	if (begin(rq, &owner, &key) < 0)
		return;
	if (!rq->body_len) {
		reply_rpc_error(rq, 400, MCP_INVALID_REQUEST, "POST /mcp takes a JSON-RPC message");
		return;
	}
	sid = header(rq, SESSION_HEADER);
	if (!sid) {
		if (mcp_is_initialize(rq->body, rq->body_len)) {
			post_initialize(rq, owner, key);
			return;
		}
		reply_rpc_error(rq, 400, MCP_TRANSPORT_ERROR,
				SESSION_HEADER " header is required: initialize a session first");
		return;
	}
	if (!(s = mcp_sessions_get(rq->ctx->mcp, sid, owner, http_now_ns()))) {
		reply_rpc_error(rq, 404, MCP_SESSION_NOT_FOUND,
				"session not found (unknown, expired or ended): initialize a new one");
		return;
	}
	if (version_ok(rq, mcp_session_conn(s)) == 0) {
		t0 = http_now_ns();
		r = mcp_handle(mcp_session_conn(s), rq->body, rq->body_len, &out, &kind, &err);
		reply_handled(rq, t0, r, &err, out, kind);
		if (r == 0)
			http_reply_header(rq, SESSION_HEADER, sid);
	}
	mcp_sessions_release(rq->ctx->mcp, s);
}

void http_h_mcp_delete(http_req *rq)
{
	const settings_api_key *key;
	const void *owner;
	const char *sid;
	mcp_session *s;

	if (begin(rq, &owner, &key) < 0)
		return;
	if (!(sid = header(rq, SESSION_HEADER))) {
		reply_rpc_error(rq, 400, MCP_TRANSPORT_ERROR, SESSION_HEADER " header is required");
		return;
	}
	if (!(s = mcp_sessions_get(rq->ctx->mcp, sid, owner, http_now_ns()))) {
		reply_rpc_error(rq, 404, MCP_SESSION_NOT_FOUND,
				"session not found (unknown, expired or ended)");
		return;
	}
	if (version_ok(rq, mcp_session_conn(s)) < 0) {
		mcp_sessions_release(rq->ctx->mcp, s);
		return;
	}
	mcp_sessions_release(rq->ctx->mcp, s);
	if (mcp_sessions_end(rq->ctx->mcp, sid, owner, http_now_ns()) < 0) {
		reply_rpc_error(rq, 404, MCP_SESSION_NOT_FOUND, "session not found (ended meanwhile)");
		return;
	}
	http_reply_empty(rq, HTTP_STATUS_NO_CONTENT);
}
