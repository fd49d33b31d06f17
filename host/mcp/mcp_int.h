/* SPDX-License-Identifier: MIT */
/*
 * mcp internals: what mcp.c (JSON-RPC and the lifecycle) and
 * mcp_tools.c (the tools) share.
 */
#ifndef MEMD_MCP_INT_H
#define MEMD_MCP_INT_H

#include <jansson.h>

#include "mcp.h"

struct mcp_conn {
	memd *m;
	char *app, *user;           /* bound, or both NULL */
	char **apps;                /* NULL-terminated, or NULL: any app */
	int32_t scope;              /* MCP_SCOPE_* */
	uint32_t flags;             /* MCP_KEYWORD_ONLY, or 0 */
	/* Written once by initialize, before a transport shares the conn. */
	char version[MCP_VERSION_MAX];
	atomic_int initialized;     /* notifications/initialized came */
};

/* Does revision v have outputSchema, structuredContent and tool titles
 * (2025-06-18 and later)? */
int mcp_version_structured(const char *v);

/* tools/list's result for c: {"tools": [...]} (only those its scope
 * allows). New reference, NULL on ENOMEM. */
json_t *mcp_tools_list(const mcp_conn *c);

/* tools/call of tool name with arguments args (an object, or NULL for
 * none). On 0, *ret_result is the call's result (a new reference): the
 * tool's answer, or {"isError": true, "content": [...]} for a failed call
 * or bad arguments. MCP_INVALID_PARAMS for an unknown tool (or one the
 * scope hides), with the message in msg (cap bytes); MEMD_ENOMEM. */
int32_t mcp_tools_call(mcp_conn *c, const char *name, json_t *args, json_t **ret_result,
		       char *msg, size_t cap);

#endif
