/* SPDX-License-Identifier: MIT */
/*
 * http router: the route table of memd's REST API (api/openapi.yaml
 * describes exactly these routes) and matching of a raw request path
 * against it. Patterns are "/"-separated; a segment "{name}" matches one
 * non-empty segment, "{name}:suffix" one that ends in ":suffix" (an
 * action: the suffix is compared with the raw, undecoded segment). Matched
 * segments are percent-decoded and must be UTF-8 without control
 * characters or '/'.
 *
 * Ids may contain ':' (lane keys do: "telegram:dm:42"), raw or as %3A. A
 * raw segment that ends in one of a path's actions is that action, for
 * every method: when routes "{key}" and "{key}:open" both match a path,
 * only the one with the action counts ("POST lanes/a:b:open" opens lane
 * "a:b"; "GET lanes/a:b:open" is 405). To name a key that itself ends in
 * ":open" (or another action of that path) without the action, encode
 * its ':' as %3A; a client that percent-encodes ':' in ids never meets
 * the question.
 */
#ifndef MEMD_HTTP_ROUTER_H
#define MEMD_HTTP_ROUTER_H

#include <stddef.h>
#include <stdint.h>

#include <memd/abi.h>

#define HTTP_MAX_PARAMS 5
#define HTTP_MAX_QUERY 8
#define HTTP_ALLOW_MAX 64

/* What a route reads from the request body. */
#define HTTP_BODY_NONE 0 /* a body is refused (400) */
#define HTTP_BODY_JSON 1 /* a JSON object (or empty) */
#define HTTP_BODY_RAW  2 /* any bytes, with their Content-Type */

/* Facade operations timed in memd_op_duration_seconds. */
enum http_op {
	HTTP_OP_NONE = -1,
	HTTP_OP_SESSION_CREATE,
	HTTP_OP_SESSION_LIST,
	HTTP_OP_SESSION_GET,
	HTTP_OP_SESSION_PATCH,
	HTTP_OP_SESSION_DELETE,
	HTTP_OP_EVENTS_APPEND,
	HTTP_OP_EVENTS_LIST,
	HTTP_OP_CONTEXT,
	HTTP_OP_STATE_GET,
	HTTP_OP_STATE_PATCH,
	HTTP_OP_INVOCATION_END,
	HTTP_OP_ARTIFACT_PUT,
	HTTP_OP_ARTIFACT_GET,
	HTTP_OP_ARTIFACT_LIST,
	HTTP_OP_ARTIFACT_VERSIONS,
	HTTP_OP_ARTIFACT_DELETE,
	HTTP_OP_USER_DELETE,
	HTTP_OP_PLUGINS,
	HTTP_OP_READY,
	HTTP_OP_SEARCH,
	HTTP_OP_INDEX_REBUILD,
	HTTP_OP_JOB_LIST,
	HTTP_OP_JOB_GET,
	HTTP_OP_JOB_CANCEL,
	HTTP_OP_LANE_RESOLVE,
	HTTP_OP_LANE_OPEN_SOURCE,
	HTTP_OP_LANE_LIST,
	HTTP_OP_LANE_GET,
	HTTP_OP_LANE_DELETE,
	HTTP_OP_LANE_OPEN,
	HTTP_OP_LANE_RESET,
	HTTP_OP_LANE_SWITCH,
	HTTP_OP_LANE_SUSPEND,
	HTTP_OP_TURN_BEGIN,
	HTTP_OP_TURN_HEARTBEAT,
	HTTP_OP_TURN_END,
	HTTP_OP_INBOX_PUT,
	HTTP_OP_INBOX_LIST,
	HTTP_OP_INBOX_TAKE,
	HTTP_OP_LANES_SWEEP,
	HTTP_OP_SESSION_REWIND,
	HTTP_OP_MESSAGES_GET,
	HTTP_OP_MESSAGES_APPEND,
	HTTP_OP_MESSAGES_PUT,
	HTTP_OP_EVENTS_CLEAR,
	HTTP_OP_OPERATION_UNDO,
	HTTP_OP_OPERATION_LIST,
	HTTP_OP_STATE_HISTORY,
	HTTP_OP_MCP,
	HTTP_OP_MEMORY_CREATE,
	HTTP_OP_MEMORY_LIST,
	HTTP_OP_MEMORY_GET,
	HTTP_OP_MEMORY_UPDATE,
	HTTP_OP_MEMORY_DELETE,
	HTTP_OP_MEMORY_HISTORY,
	HTTP_OP_MEMORY_EXTRACT,
	HTTP_OP_MEMORIES_SWEEP,
	HTTP_OP_TASK_PUT,
	HTTP_OP_TASK_GET,
	HTTP_OP_TASK_LIST,
	HTTP_OP_TASK_DELETE,
	HTTP_OP_CHECKPOINT_PUT,
	HTTP_OP_CHECKPOINT_WRITES,
	HTTP_OP_CHECKPOINT_GET,
	HTTP_OP_CHECKPOINT_LIST,
	HTTP_OP_CHECKPOINT_DELETE,
	HTTP_OP_CHECKPOINT_RESUMABLE,
	HTTP_OP_COUNT
};

typedef struct http_req http_req;
typedef void (*http_handler_fn)(http_req *rq);

typedef struct http_route {
	const char *method;
	const char *pattern;
	int32_t scope;                 /* HTTP_SCOPE_PUBLIC or SETTINGS_SCOPE_* */
	int body;                      /* HTTP_BODY_* */
	const char *const *query;      /* accepted query parameters; NULL = none */
	int op;                        /* enum http_op */
	http_handler_fn handler;
} http_route;

/* The route table (static storage), *ret_n entries. */
const http_route *http_routes(size_t *ret_n);
/* Names of the store operations, HTTP_OP_COUNT entries. */
const char *const *http_op_names(void);

typedef struct http_match {
	size_t index;                  /* into http_routes() */
	char *params[HTTP_MAX_PARAMS]; /* decoded, malloc'd */
	size_t n_params;
	char allow[HTTP_ALLOW_MAX];    /* HTTP_E_METHOD: the methods the path has */
} http_match;

/* Match method and raw_path (not decoded, no query). Returns 0 with
 * *ret filled (free with http_match_clear), HTTP_E_NOROUTE, HTTP_E_METHOD
 * (ret->allow set, nothing to free), MEMD_EINVAL (a matched segment is
 * not a valid id: bad escape, '/', control character, invalid UTF-8;
 * message in err; ret->index names the route, nothing to free) or
 * MEMD_ENOMEM. */
int32_t http_router_match(const char *method, const char *raw_path, http_match *ret,
			  memd_error *err);
/* Free the params; accepts NULL. */
void http_match_clear(http_match *m);

#endif
