/* SPDX-License-Identifier: MIT */
#include "router.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memd/plugin.h>

#include "auth.h"
#include "errors.h"
#include "routes.h"
#include "config/settings.h"
#include "uri.h"

#define USER_PATH "/v1/apps/{app}/users/{user}"
#define SESSION_PATH USER_PATH "/sessions/{sid}"
#define ARTIFACT_PATH SESSION_PATH "/artifacts/{name}"
#define JOBS_PATH "/v1/apps/{app}/jobs"
#define APP_LANES_PATH "/v1/apps/{app}/lanes"
#define LANES_PATH USER_PATH "/lanes"
#define LANE_PATH LANES_PATH "/{key}"
#define MEMORIES_PATH USER_PATH "/memories"
#define MEMORY_PATH MEMORIES_PATH "/{mid}"
#define TASKS_PATH "/v1/apps/{app}/tasks"
#define TASK_PATH TASKS_PATH "/{tid}"
#define CHECKPOINTS_PATH SESSION_PATH "/checkpoints"
#define CHECKPOINT_PATH CHECKPOINTS_PATH "/{cid}"
#define MAX_SEGMENTS 16

#define R SETTINGS_SCOPE_READ
#define W SETTINGS_SCOPE_WRITE
#define A SETTINGS_SCOPE_ADMIN
#define P HTTP_SCOPE_PUBLIC

static const char *const q_list[] = { "limit", "cursor", "archived", "origin_platform", "lane",
				      "order", "active_within", NULL };
static const char *const q_get[] = { "events", "after_seq", "after_time", "include_text", NULL };
static const char *const q_events[] = { "after_seq", "limit", "include_text", "roles",
					"include_hidden", NULL };
static const char *const q_context[] = { "include_text", "format", "query", NULL };
/* A write that may answer its context (?return=context, with q_context's). */
static const char *const q_step[] = { "return", "format", "include_text", "query", NULL };
static const char *const q_messages[] = { "format", "roles", NULL };
static const char *const q_clear[] = { "expected_version", NULL };
static const char *const q_history[] = { "cursor", "limit", NULL };
static const char *const q_artifact[] = { "version", NULL };
static const char *const q_memories[] = { "kind", "topic", "entity", "session_id", "limit",
					  "cursor", NULL };
static const char *const q_memory_delete[] = { "version", NULL };
static const char *const q_task_put[] = { "user", NULL };
static const char *const q_task_get[] = { "history_length", NULL };
static const char *const q_tasks[] = { "context_id", "state", "user", "limit", "cursor", NULL };
static const char *const q_checkpoint[] = { "checkpoint_ns", NULL };
static const char *const q_checkpoints[] = { "checkpoint_ns", "before", "limit", "metadata",
					     "full", "cursor", NULL };
static const char *const q_user_checkpoints[] = { "session_id", "checkpoint_ns", "before",
						  "limit", "metadata", "full", "cursor", NULL };
static const char *const q_resumable[] = { "resume", "limit", "cursor", NULL };
static const char *const q_lanes[] = { "limit", "cursor", "suspended", "resume_pending",
				       "active_within", "in_turn", NULL };

static const http_route routes[] = {
	{ "GET", "/healthz", P, HTTP_BODY_NONE, NULL, HTTP_OP_NONE, http_h_healthz },
	{ "GET", "/readyz", P, HTTP_BODY_NONE, NULL, HTTP_OP_READY, http_h_readyz },
	{ "GET", "/openapi.json", P, HTTP_BODY_NONE, NULL, HTTP_OP_NONE, http_h_openapi },
	{ "GET", "/metrics", R, HTTP_BODY_NONE, NULL, HTTP_OP_NONE, http_h_metrics },
	{ "GET", "/v1/plugins", A, HTTP_BODY_NONE, NULL, HTTP_OP_PLUGINS, http_h_plugins },
	{ "DELETE", USER_PATH, A, HTTP_BODY_NONE, NULL, HTTP_OP_USER_DELETE, http_h_user_delete },
	{ "POST", USER_PATH "/sessions", W, HTTP_BODY_JSON, NULL, HTTP_OP_SESSION_CREATE,
	  http_h_session_create },
	{ "GET", USER_PATH "/sessions", R, HTTP_BODY_NONE, q_list, HTTP_OP_SESSION_LIST,
	  http_h_session_list },
	{ "GET", SESSION_PATH, R, HTTP_BODY_NONE, q_get, HTTP_OP_SESSION_GET, http_h_session_get },
	{ "PATCH", SESSION_PATH, W, HTTP_BODY_JSON, NULL, HTTP_OP_SESSION_PATCH,
	  http_h_session_patch },
	{ "DELETE", SESSION_PATH, W, HTTP_BODY_NONE, NULL, HTTP_OP_SESSION_DELETE,
	  http_h_session_delete },
	{ "POST", SESSION_PATH "/events", W, HTTP_BODY_JSON, q_step, HTTP_OP_EVENTS_APPEND,
	  http_h_events_append },
	{ "GET", SESSION_PATH "/events", R, HTTP_BODY_NONE, q_events, HTTP_OP_EVENTS_LIST,
	  http_h_events_query },
	{ "GET", SESSION_PATH "/context", R, HTTP_BODY_NONE, q_context, HTTP_OP_CONTEXT,
	  http_h_context_read },
	{ "GET", SESSION_PATH "/state", R, HTTP_BODY_NONE, NULL, HTTP_OP_STATE_GET, http_h_state_get },
	{ "PATCH", SESSION_PATH "/state", W, HTTP_BODY_JSON, NULL, HTTP_OP_STATE_PATCH,
	  http_h_state_patch },
	{ "DELETE", SESSION_PATH "/events", W, HTTP_BODY_NONE, q_clear, HTTP_OP_EVENTS_CLEAR,
	  http_h_events_clear },
	{ "POST", SESSION_PATH ":rewind", W, HTTP_BODY_JSON, NULL, HTTP_OP_SESSION_REWIND,
	  http_h_session_rewind },
	{ "GET", SESSION_PATH "/messages", R, HTTP_BODY_NONE, q_messages, HTTP_OP_MESSAGES_GET,
	  http_h_messages_get },
	{ "POST", SESSION_PATH "/messages", W, HTTP_BODY_JSON, q_step, HTTP_OP_MESSAGES_APPEND,
	  http_h_messages_append },
	{ "PUT", SESSION_PATH "/messages", W, HTTP_BODY_JSON, NULL, HTTP_OP_MESSAGES_PUT,
	  http_h_messages_put },
	{ "GET", SESSION_PATH "/operations", R, HTTP_BODY_NONE, NULL, HTTP_OP_OPERATION_LIST,
	  http_h_operation_list },
	{ "POST", SESSION_PATH "/operations/{op}:undo", W, HTTP_BODY_JSON, NULL,
	  HTTP_OP_OPERATION_UNDO, http_h_operation_undo },
	{ "GET", SESSION_PATH "/state/history", R, HTTP_BODY_NONE, q_history, HTTP_OP_STATE_HISTORY,
	  http_h_state_history },
	{ "POST", SESSION_PATH "/invocations/{invocation}:end", W, HTTP_BODY_NONE, NULL,
	  HTTP_OP_INVOCATION_END, http_h_invocation_end },
	{ "GET", SESSION_PATH "/artifacts", R, HTTP_BODY_NONE, NULL, HTTP_OP_ARTIFACT_LIST,
	  http_h_artifact_list },
	{ "PUT", ARTIFACT_PATH, W, HTTP_BODY_RAW, NULL, HTTP_OP_ARTIFACT_PUT, http_h_artifact_put },
	{ "GET", ARTIFACT_PATH, R, HTTP_BODY_NONE, q_artifact, HTTP_OP_ARTIFACT_GET,
	  http_h_artifact_get },
	{ "DELETE", ARTIFACT_PATH, W, HTTP_BODY_NONE, NULL, HTTP_OP_ARTIFACT_DELETE,
	  http_h_artifact_delete },
	{ "GET", ARTIFACT_PATH "/versions", R, HTTP_BODY_NONE, NULL, HTTP_OP_ARTIFACT_VERSIONS,
	  http_h_artifact_versions },
	{ "POST", USER_PATH "/search", R, HTTP_BODY_JSON, NULL, HTTP_OP_SEARCH, http_h_search },
	{ "POST", USER_PATH "/index:rebuild", A, HTTP_BODY_NONE, NULL, HTTP_OP_INDEX_REBUILD,
	  http_h_index_rebuild },
	{ "POST", MEMORIES_PATH, W, HTTP_BODY_JSON, NULL, HTTP_OP_MEMORY_CREATE,
	  http_h_memory_create },
	{ "GET", MEMORIES_PATH, R, HTTP_BODY_NONE, q_memories, HTTP_OP_MEMORY_LIST,
	  http_h_memory_list },
	{ "GET", MEMORY_PATH, R, HTTP_BODY_NONE, NULL, HTTP_OP_MEMORY_GET, http_h_memory_get },
	{ "PATCH", MEMORY_PATH, W, HTTP_BODY_JSON, NULL, HTTP_OP_MEMORY_UPDATE,
	  http_h_memory_update },
	{ "DELETE", MEMORY_PATH, W, HTTP_BODY_NONE, q_memory_delete, HTTP_OP_MEMORY_DELETE,
	  http_h_memory_delete },
	{ "GET", MEMORY_PATH "/history", R, HTTP_BODY_NONE, NULL, HTTP_OP_MEMORY_HISTORY,
	  http_h_memory_history },
	{ "GET", JOBS_PATH, W, HTTP_BODY_NONE, NULL, HTTP_OP_JOB_LIST, http_h_job_list },
	{ "GET", JOBS_PATH "/{job}", W, HTTP_BODY_NONE, NULL, HTTP_OP_JOB_GET, http_h_job_get },
	{ "DELETE", JOBS_PATH "/{job}", A, HTTP_BODY_NONE, NULL, HTTP_OP_JOB_CANCEL,
	  http_h_job_cancel },
	{ "POST", APP_LANES_PATH ":resolve", R, HTTP_BODY_JSON, NULL, HTTP_OP_LANE_RESOLVE,
	  http_h_lane_resolve },
	{ "POST", APP_LANES_PATH ":open", W, HTTP_BODY_JSON, q_step, HTTP_OP_LANE_OPEN_SOURCE,
	  http_h_lane_open_source },
	{ "GET", APP_LANES_PATH, R, HTTP_BODY_NONE, q_lanes, HTTP_OP_LANE_LIST, http_h_lane_list_app },
	{ "GET", LANES_PATH, R, HTTP_BODY_NONE, q_lanes, HTTP_OP_LANE_LIST, http_h_lane_list },
	{ "GET", LANE_PATH, R, HTTP_BODY_NONE, NULL, HTTP_OP_LANE_GET, http_h_lane_get },
	{ "DELETE", LANE_PATH, W, HTTP_BODY_NONE, NULL, HTTP_OP_LANE_DELETE, http_h_lane_delete },
	{ "POST", LANE_PATH ":open", W, HTTP_BODY_JSON, q_step, HTTP_OP_LANE_OPEN, http_h_lane_open },
	{ "POST", LANE_PATH ":reset", W, HTTP_BODY_JSON, NULL, HTTP_OP_LANE_RESET, http_h_lane_reset },
	{ "POST", LANE_PATH ":switch", W, HTTP_BODY_JSON, NULL, HTTP_OP_LANE_SWITCH,
	  http_h_lane_switch },
	{ "POST", LANE_PATH ":suspend", W, HTTP_BODY_NONE, NULL, HTTP_OP_LANE_SUSPEND,
	  http_h_lane_suspend },
	{ "POST", LANE_PATH "/turns", W, HTTP_BODY_JSON, NULL, HTTP_OP_TURN_BEGIN, http_h_turn_begin },
	{ "POST", LANE_PATH "/turns/{turn}:heartbeat", W, HTTP_BODY_JSON, NULL,
	  HTTP_OP_TURN_HEARTBEAT, http_h_turn_heartbeat },
	{ "POST", LANE_PATH "/turns/{turn}:end", W, HTTP_BODY_JSON, NULL, HTTP_OP_TURN_END,
	  http_h_turn_end },
	{ "POST", LANE_PATH "/inbox", W, HTTP_BODY_JSON, NULL, HTTP_OP_INBOX_PUT, http_h_inbox_put },
	{ "GET", LANE_PATH "/inbox", R, HTTP_BODY_NONE, NULL, HTTP_OP_INBOX_LIST, http_h_inbox_list },
	{ "POST", LANE_PATH "/inbox:take", W, HTTP_BODY_JSON, NULL, HTTP_OP_INBOX_TAKE,
	  http_h_inbox_take },
	{ "POST", "/v1/lanes:sweep", A, HTTP_BODY_NONE, NULL, HTTP_OP_LANES_SWEEP, http_h_lanes_sweep },
	{ "POST", "/mcp", R, HTTP_BODY_JSON, NULL, HTTP_OP_MCP, http_h_mcp_post },
	{ "DELETE", "/mcp", R, HTTP_BODY_NONE, NULL, HTTP_OP_NONE, http_h_mcp_delete },
	{ "POST", SESSION_PATH "/memories:extract", W, HTTP_BODY_NONE, NULL, HTTP_OP_MEMORY_EXTRACT,
	  http_h_memory_extract },
	{ "POST", "/v1/memories:sweep", A, HTTP_BODY_NONE, NULL, HTTP_OP_MEMORIES_SWEEP,
	  http_h_memories_sweep },
	{ "PUT", TASK_PATH, W, HTTP_BODY_JSON, q_task_put, HTTP_OP_TASK_PUT, http_h_task_put },
	{ "GET", TASK_PATH, R, HTTP_BODY_NONE, q_task_get, HTTP_OP_TASK_GET, http_h_task_get },
	{ "GET", TASKS_PATH, R, HTTP_BODY_NONE, q_tasks, HTTP_OP_TASK_LIST, http_h_task_list },
	{ "DELETE", TASK_PATH, W, HTTP_BODY_NONE, NULL, HTTP_OP_TASK_DELETE, http_h_task_delete },
	{ "PUT", CHECKPOINT_PATH, W, HTTP_BODY_JSON, q_checkpoint, HTTP_OP_CHECKPOINT_PUT,
	  http_h_checkpoint_put },
	{ "POST", CHECKPOINT_PATH "/writes", W, HTTP_BODY_JSON, q_checkpoint,
	  HTTP_OP_CHECKPOINT_WRITES, http_h_checkpoint_writes },
	{ "GET", CHECKPOINT_PATH, R, HTTP_BODY_NONE, q_checkpoint, HTTP_OP_CHECKPOINT_GET,
	  http_h_checkpoint_get },
	{ "GET", CHECKPOINTS_PATH ":latest", R, HTTP_BODY_NONE, q_checkpoint, HTTP_OP_CHECKPOINT_GET,
	  http_h_checkpoint_latest },
	{ "GET", CHECKPOINTS_PATH, R, HTTP_BODY_NONE, q_checkpoints, HTTP_OP_CHECKPOINT_LIST,
	  http_h_checkpoint_list },
	{ "DELETE", CHECKPOINTS_PATH, W, HTTP_BODY_NONE, q_checkpoint, HTTP_OP_CHECKPOINT_DELETE,
	  http_h_checkpoint_delete },
	{ "GET", USER_PATH "/checkpoints", R, HTTP_BODY_NONE, q_user_checkpoints,
	  HTTP_OP_CHECKPOINT_LIST, http_h_checkpoint_list_user },
	{ "GET", "/v1/apps/{app}/checkpoints:resumable", R, HTTP_BODY_NONE, q_resumable,
	  HTTP_OP_CHECKPOINT_RESUMABLE, http_h_checkpoint_resumable },
};

#define N_ROUTES (sizeof(routes) / sizeof(routes[0]))

static const char *const op_names[HTTP_OP_COUNT] = {
	[HTTP_OP_SESSION_CREATE] = "session_create",
	[HTTP_OP_SESSION_LIST] = "session_list",
	[HTTP_OP_SESSION_GET] = "session_get",
	[HTTP_OP_SESSION_PATCH] = "session_patch",
	[HTTP_OP_SESSION_DELETE] = "session_delete",
	[HTTP_OP_EVENTS_APPEND] = "events_append",
	[HTTP_OP_EVENTS_LIST] = "events_list",
	[HTTP_OP_CONTEXT] = "context",
	[HTTP_OP_STATE_GET] = "state_get",
	[HTTP_OP_STATE_PATCH] = "state_patch",
	[HTTP_OP_INVOCATION_END] = "invocation_end",
	[HTTP_OP_ARTIFACT_PUT] = "artifact_put",
	[HTTP_OP_ARTIFACT_GET] = "artifact_get",
	[HTTP_OP_ARTIFACT_LIST] = "artifact_list",
	[HTTP_OP_ARTIFACT_VERSIONS] = "artifact_versions",
	[HTTP_OP_ARTIFACT_DELETE] = "artifact_delete",
	[HTTP_OP_USER_DELETE] = "user_delete",
	[HTTP_OP_PLUGINS] = "plugins",
	[HTTP_OP_READY] = "ready",
	[HTTP_OP_SEARCH] = "search",
	[HTTP_OP_INDEX_REBUILD] = "index_rebuild",
	[HTTP_OP_JOB_LIST] = "job_list",
	[HTTP_OP_JOB_GET] = "job_get",
	[HTTP_OP_JOB_CANCEL] = "job_cancel",
	[HTTP_OP_LANE_RESOLVE] = "lane_resolve",
	[HTTP_OP_LANE_OPEN_SOURCE] = "lane_open_source",
	[HTTP_OP_LANE_LIST] = "lane_list",
	[HTTP_OP_LANE_GET] = "lane_get",
	[HTTP_OP_LANE_DELETE] = "lane_delete",
	[HTTP_OP_LANE_OPEN] = "lane_open",
	[HTTP_OP_LANE_RESET] = "lane_reset",
	[HTTP_OP_LANE_SWITCH] = "lane_switch",
	[HTTP_OP_LANE_SUSPEND] = "lane_suspend",
	[HTTP_OP_TURN_BEGIN] = "turn_begin",
	[HTTP_OP_TURN_HEARTBEAT] = "turn_heartbeat",
	[HTTP_OP_TURN_END] = "turn_end",
	[HTTP_OP_INBOX_PUT] = "inbox_put",
	[HTTP_OP_INBOX_LIST] = "inbox_list",
	[HTTP_OP_INBOX_TAKE] = "inbox_take",
	[HTTP_OP_LANES_SWEEP] = "lanes_sweep",
	[HTTP_OP_MEMORY_CREATE] = "memory_create",
	[HTTP_OP_MEMORY_LIST] = "memory_list",
	[HTTP_OP_MEMORY_GET] = "memory_get",
	[HTTP_OP_MEMORY_UPDATE] = "memory_update",
	[HTTP_OP_MEMORY_DELETE] = "memory_delete",
	[HTTP_OP_MEMORY_HISTORY] = "memory_history",
	[HTTP_OP_SESSION_REWIND] = "session_rewind",
	[HTTP_OP_MESSAGES_GET] = "messages_get",
	[HTTP_OP_MESSAGES_APPEND] = "messages_append",
	[HTTP_OP_MESSAGES_PUT] = "messages_put",
	[HTTP_OP_EVENTS_CLEAR] = "events_clear",
	[HTTP_OP_OPERATION_UNDO] = "operation_undo",
	[HTTP_OP_OPERATION_LIST] = "operation_list",
	[HTTP_OP_STATE_HISTORY] = "state_history",
	[HTTP_OP_MCP] = "mcp",
	[HTTP_OP_MEMORY_EXTRACT] = "memory_extract",
	[HTTP_OP_MEMORIES_SWEEP] = "memories_sweep",
	[HTTP_OP_TASK_PUT] = "task_put",
	[HTTP_OP_TASK_GET] = "task_get",
	[HTTP_OP_TASK_LIST] = "task_list",
	[HTTP_OP_TASK_DELETE] = "task_delete",
	[HTTP_OP_CHECKPOINT_PUT] = "checkpoint_put",
	[HTTP_OP_CHECKPOINT_WRITES] = "checkpoint_writes",
	[HTTP_OP_CHECKPOINT_GET] = "checkpoint_get",
	[HTTP_OP_CHECKPOINT_LIST] = "checkpoint_list",
	[HTTP_OP_CHECKPOINT_DELETE] = "checkpoint_delete",
	[HTTP_OP_CHECKPOINT_RESUMABLE] = "checkpoint_resumable",
};

const http_route *http_routes(size_t *ret_n)
{
	*ret_n = sizeof(routes) / sizeof(routes[0]);
	return routes;
}

const char *const *http_op_names(void)
{
	return op_names;
}

typedef struct segment {
	const char *p;
	size_t len;
} segment;

/* Split a path starting with '/' into its segments; -1 if it does not
 * start with '/' or has too many. */
static int split(const char *path, segment *seg)
{
	int n = 0;
	if (path[0] != '/')
		return -1;
	for (const char *p = path + 1;; ) {
		const char *slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - p) : strlen(p);
		if (n == MAX_SEGMENTS)
			return -1;
		seg[n].p = p;
		seg[n].len = len;
		n++;
		if (!slash)
			return n;
		p = slash + 1;
	}
}

/* Does the raw segment s match the pattern segment t? For a parameter,
 * *ret_value gets the part that is the value, and *ret_param is 1, or 2
 * when the pattern segment has a suffix (an action such as ":open"). */
static int seg_match(const segment *t, const segment *s, segment *ret_value, int *ret_param)
{
	const char *close;

	*ret_param = 0;
	if (t->len == 0 || t->p[0] != '{')
		return t->len == s->len && memcmp(t->p, s->p, s->len) == 0;
	close = memchr(t->p, '}', t->len);
	if (!close)
		return 0;
	{
		size_t suffix = t->len - (size_t)(close + 1 - t->p);
		if (s->len <= suffix || memcmp(s->p + s->len - suffix, close + 1, suffix) != 0)
			return 0;
		ret_value->p = s->p;
		ret_value->len = s->len - suffix;
		*ret_param = suffix ? 2 : 1;
	}
	return 1;
}

/* Does route r match the raw segments s? *ret_n gets the number of
 * parameters, *ret_actions the number of them matched by a pattern
 * segment with a suffix (see http_router_match). Every request tries
 * every route, and the routes of a path mostly differ in their last
 * segment ("/events", "/context", "/state"): that one is compared
 * first, and only a route that passes it is walked a segment at a time
 * beside the path (splitting each pattern whole first, or counting its
 * slashes, cost more than the match itself). */
static int route_matches(const http_route *r, const segment *s, int ns, segment *values,
			 char names[][32], size_t *ret_n, int *ret_actions)
{
	const char *p = r->pattern, *last = strrchr(p, '/');
	size_t n = 0;
	int actions = 0, param;

	if (p[0] != '/' || ns < 1)
		return 0;
	{
		segment t = { last + 1, strlen(last + 1) }, v;
		if (!seg_match(&t, &s[ns - 1], &v, &param))
			return 0;
	}
	p++;
	for (int i = 0; i < ns; i++) {
		const char *slash;
		segment t;

		if (!p)
			return 0; /* the pattern has fewer segments */
		slash = strchr(p, '/');
		t.p = p;
		t.len = slash ? (size_t)(slash - p) : strlen(p);
		p = slash ? slash + 1 : NULL;
		if (!seg_match(&t, &s[i], &values[n], &param))
			return 0;
		if (param) {
			actions += param == 2;
			if (n == HTTP_MAX_PARAMS)
				return 0;
			if (names) {
				const char *close = memchr(t.p, '}', t.len);
				size_t len = (size_t)(close - t.p - 1);
				snprintf(names[n], sizeof(names[n]), "%.*s", (int)len, t.p + 1);
			}
			n++;
		}
	}
	if (p)
		return 0; /* the pattern has more segments */
	*ret_n = n;
	*ret_actions = actions;
	return 1;
}

#define HINT_MAX 128

/* For a 405 on a path whose routes (those matching with most_actions
 * suffixes) have actions for method ("{key}" and "{key}:open"): those
 * actions into buf, as ":open, :reset", so that a key sent without its
 * action, or with a misspelt one, is told what exists; "" when none. */
static void action_hint(const char *method, const segment *s, int ns, int most_actions,
			char *buf, size_t cap)
{
	const size_t n = sizeof(routes) / sizeof(routes[0]);
	segment values[HTTP_MAX_PARAMS];

	buf[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		size_t np, plen = strlen(routes[i].pattern);
		int actions, seen = 0;
		if (!route_matches(&routes[i], s, ns, values, NULL, &np, &actions) ||
		    actions != most_actions)
			continue;
		for (size_t k = 0; k < i; k++)
			seen |= strcmp(routes[k].pattern, routes[i].pattern) == 0;
		for (size_t j = 0; !seen && j < n; j++) {
			const char *action = routes[j].pattern + plen;
			if (strcmp(routes[j].method, method) != 0 ||
			    strncmp(routes[j].pattern, routes[i].pattern, plen) != 0 || action[0] != ':' ||
			    strchr(action, '/'))
				continue;
			if (buf[0])
				strncat(buf, ", ", cap - strlen(buf) - 1);
			strncat(buf, action, cap - strlen(buf) - 1);
		}
	}
}

int32_t http_router_match(const char *method, const char *raw_path, http_match *ret,
			  memd_error *err)
{
	segment s[MAX_SEGMENTS], values[HTTP_MAX_PARAMS];
	char names[HTTP_MAX_PARAMS][32];
	int ns = split(raw_path, s);
	const http_route *found = NULL;
	size_t matched[N_ROUTES], n_matched = 0;
	int matched_actions[N_ROUTES];
	size_t found_index = 0, n = 0;
	http_match m = { 0 };
	int most_actions = 0, actions;

	if (ns < 0)
		return memd_error_set(err, HTTP_E_NOROUTE, 0, "no such path");
	/* An action suffix wins over a bare parameter: the path's routes are
	 * those that match with the most suffixes. One pass over the table
	 * notes the routes that match (a handful), the choice is among them. */
	for (size_t i = 0; i < N_ROUTES; i++) {
		size_t np;
		if (!route_matches(&routes[i], s, ns, values, NULL, &np, &actions))
			continue;
		matched[n_matched] = i;
		matched_actions[n_matched++] = actions;
		if (actions > most_actions)
			most_actions = actions;
	}
	for (size_t k = 0; k < n_matched; k++) {
		size_t i = matched[k];
		if (matched_actions[k] != most_actions)
			continue;
		if (strcmp(routes[i].method, method) == 0) {
			found = &routes[i];
			found_index = i;
			break;
		}
		if (m.allow[0])
			strncat(m.allow, ", ", sizeof(m.allow) - strlen(m.allow) - 1);
		strncat(m.allow, routes[i].method, sizeof(m.allow) - strlen(m.allow) - 1);
	}
	if (!found && m.allow[0]) {
		char hint[HINT_MAX];
		memcpy(ret->allow, m.allow, sizeof(m.allow));
		action_hint(method, s, ns, most_actions, hint, sizeof(hint));
		if (hint[0])
			return memd_error_set(err, HTTP_E_METHOD, 0,
					      "method %.16s is not allowed here (allowed: %s); %.16s takes "
					      "an action at the end of this path: %s",
					      method, m.allow, method, hint);
		return memd_error_set(err, HTTP_E_METHOD, 0, "method %.16s is not allowed here (allowed: %s)",
				      method, m.allow);
	}
	if (!found)
		return memd_error_set(err, HTTP_E_NOROUTE, 0, "no such path");
	route_matches(found, s, ns, values, names, &n, &actions);
	for (size_t i = 0; i < n; i++) {
		char what[64];
		int32_t r;
		snprintf(what, sizeof(what), "path parameter %s", names[i]);
		r = http_uri_decode(values[i].p, values[i].len, 1, what, &m.params[i], err);
		if (r < 0) {
			m.n_params = i;
			http_match_clear(&m);
			ret->index = found_index;
			return r;
		}
	}
	m.n_params = n;
	m.index = found_index;
	*ret = m;
	return 0;
}

void http_match_clear(http_match *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n_params; i++)
		free(m->params[i]);
	m->n_params = 0;
}
