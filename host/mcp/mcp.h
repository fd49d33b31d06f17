/* SPDX-License-Identifier: MIT */
/*
 * mcp: memd as a Model Context Protocol server, independent of the
 * transport. One mcp_conn is one MCP session (a stdio process, or an
 * Mcp-Session-Id of the HTTP transport): it takes JSON-RPC 2.0 messages
 * as text and answers them, running the memory tools (mcp_tools.c) on
 * the libmemd facade for the (app, user) the session is bound to, or
 * the one each call names.
 *
 * Methods: initialize (protocol revision negotiation), ping,
 * notifications/initialized, tools/list and tools/call; other
 * notifications and every response are taken and ignored. JSON-RPC
 * batches are taken only when the negotiated revision has them
 * (2025-03-26).
 */
#ifndef MEMD_MCP_H
#define MEMD_MCP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <memd/memd.h>

/* JSON-RPC 2.0 error codes. */
#define MCP_PARSE_ERROR      (-32700)
#define MCP_INVALID_REQUEST  (-32600)
#define MCP_METHOD_NOT_FOUND (-32601)
#define MCP_INVALID_PARAMS   (-32602)
#define MCP_INTERNAL_ERROR   (-32603)

/* The newest protocol revision memd speaks (answered to a client that
 * asks for one memd does not know). */
#define MCP_LATEST_VERSION "2025-11-25"
/* Longest protocol revision text ("YYYY-MM-DD"), with room to spare. */
#define MCP_VERSION_MAX 32

/* What an mcp_conn may do. */
#define MCP_SCOPE_READ  1 /* the read tools only */
#define MCP_SCOPE_WRITE 2 /* every tool */

/* mcp_binding.flags: memd was opened without the vector store
 * (MEMD_OPEN_NO_VECTOR, beside a server that holds it): a search that
 * names no mode is a keyword search. */
#define MCP_KEYWORD_ONLY 0x1u

/* Who the tools act for. app and user set: bound (the tools take no app
 * or user argument; one given must be the same); both NULL: each call
 * names them ("app" and "user" arguments), restricted to apps when that
 * is set (NULL-terminated; NULL: any app). */
typedef struct mcp_binding {
	const char *app;
	const char *user;
	const char *const *apps;
	int32_t scope;            /* MCP_SCOPE_* */
	uint32_t flags;           /* MCP_KEYWORD_ONLY, or 0 */
} mcp_binding;

typedef struct mcp_conn mcp_conn;

/* A new session for m (borrowed; must outlive it) with binding b (its
 * strings are copied). ret: free with mcp_conn_free. MEMD_EINVAL for a
 * half-bound binding or a bad scope, MEMD_ENOMEM. */
int32_t mcp_conn_new(memd *m, const mcp_binding *b, mcp_conn **ret, memd_error *err);
/* Accepts NULL. */
void mcp_conn_free(mcp_conn *c);

/* What mcp_handle answered. */
#define MCP_OUT_NONE     0 /* nothing (notifications and responses only) */
#define MCP_OUT_RESPONSE 1 /* a response (or a batch of them) */
#define MCP_OUT_INVALID  2 /* an error response without an id: the message
			    * was not JSON, or not a JSON-RPC message */

/* Handle one message (len bytes of text: a JSON-RPC request,
 * notification, response, or a batch). *ret_json: the answer (compact
 * JSON without newlines, malloc'd) or NULL; *ret_kind: MCP_OUT_*. Safe
 * to call from several threads at once on one conn once it is
 * initialized. Returns 0, or MEMD_ENOMEM (nothing answered). */
int32_t mcp_handle(mcp_conn *c, const char *text, size_t len, char **ret_json, int *ret_kind,
		   memd_error *err);

/* Is text (len bytes) a JSON-RPC initialize request (a single one, not
 * in a batch)? For a transport deciding whether a message may start a
 * session. */
int mcp_is_initialize(const char *text, size_t len);

/* The revision negotiated by initialize, "" before. */
const char *mcp_conn_version(const mcp_conn *c);
/* Is version one of the revisions memd speaks? */
int mcp_version_supported(const char *version);
/* "2025-11-25, 2025-06-18, ...": every revision memd speaks. Static. */
const char *mcp_versions_text(void);

/* A JSON-RPC error response with id null: {"jsonrpc": "2.0", "error":
 * {"code", "message"}, "id": null}, for a transport's own refusals.
 * malloc'd; NULL on ENOMEM. */
char *mcp_error_text(int32_t code, const char *message);

#endif
