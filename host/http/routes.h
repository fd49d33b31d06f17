/* SPDX-License-Identifier: MIT */
/*
 * http routes: the handlers of the route table (router.c). Each reads its
 * path parameters, query and body from rq, calls the libmemd facade and
 * sets the reply (request.h). They never fail silently: every outcome is
 * a reply.
 */
#ifndef MEMD_HTTP_ROUTES_H
#define MEMD_HTTP_ROUTES_H

#include "router.h"

/* routes_service.c: probes, metrics, plugins, the spec, users */
void http_h_healthz(http_req *rq);
void http_h_readyz(http_req *rq);
void http_h_metrics(http_req *rq);
void http_h_openapi(http_req *rq);
void http_h_plugins(http_req *rq);
void http_h_user_delete(http_req *rq);

/* routes_sessions.c */
void http_h_session_create(http_req *rq);
void http_h_session_list(http_req *rq);
void http_h_session_get(http_req *rq);
void http_h_session_patch(http_req *rq);
void http_h_session_delete(http_req *rq);

/* routes_events.c: events, state, invocations */
void http_h_events_append(http_req *rq);
void http_h_state_get(http_req *rq);
void http_h_state_patch(http_req *rq);
void http_h_invocation_end(http_req *rq);

/* routes_artifacts.c */
void http_h_artifact_list(http_req *rq);
void http_h_artifact_put(http_req *rq);
void http_h_artifact_get(http_req *rq);
void http_h_artifact_versions(http_req *rq);
void http_h_artifact_delete(http_req *rq);

/* routes_search.c: search (host/index/) */
void http_h_search(http_req *rq);

/* routes_jobs.c: background jobs of an app, and the index rebuild that
 * starts one */
void http_h_index_rebuild(http_req *rq);
void http_h_job_list(http_req *rq);
void http_h_job_get(http_req *rq);
void http_h_job_cancel(http_req *rq);

/* routes_lanes.c: lanes of a chat gateway (resolve, open, list, get,
 * reset, switch, suspend, delete), their turns and inboxes, and the
 * watcher's sweep */
void http_h_lane_resolve(http_req *rq);
void http_h_lane_open_source(http_req *rq);
void http_h_lane_list_app(http_req *rq);
void http_h_lane_list(http_req *rq);
void http_h_lane_get(http_req *rq);
void http_h_lane_delete(http_req *rq);
void http_h_lane_open(http_req *rq);
void http_h_lane_reset(http_req *rq);
void http_h_lane_switch(http_req *rq);
void http_h_lane_suspend(http_req *rq);
void http_h_turn_begin(http_req *rq);
void http_h_turn_heartbeat(http_req *rq);
void http_h_turn_end(http_req *rq);
void http_h_inbox_put(http_req *rq);
void http_h_inbox_list(http_req *rq);
void http_h_inbox_take(http_req *rq);
void http_h_lanes_sweep(http_req *rq);

/* routes_memories.c: long-term memories of a user: create, list, get,
 * update, delete, history */
void http_h_memory_create(http_req *rq);
void http_h_memory_list(http_req *rq);
void http_h_memory_get(http_req *rq);
void http_h_memory_update(http_req *rq);
void http_h_memory_delete(http_req *rq);
void http_h_memory_history(http_req *rq);

/* routes_memory_extract.c: memory extraction of a session now, and the
 * memory worker's sweep */
void http_h_memory_extract(http_req *rq);
void http_h_memories_sweep(http_req *rq);
/* routes_tasks.c: A2A tasks of an app (save, get, list, delete) */
void http_h_task_put(http_req *rq);
void http_h_task_get(http_req *rq);
void http_h_task_list(http_req *rq);
void http_h_task_delete(http_req *rq);

/* routes_checkpoints.c: run checkpoints: put, pending writes, get (by id,
 * latest), list (a session's, a user's), delete, an app's resumable runs */
void http_h_checkpoint_put(http_req *rq);
void http_h_checkpoint_writes(http_req *rq);
void http_h_checkpoint_get(http_req *rq);
void http_h_checkpoint_latest(http_req *rq);
void http_h_checkpoint_list(http_req *rq);
void http_h_checkpoint_list_user(http_req *rq);
void http_h_checkpoint_delete(http_req *rq);
void http_h_checkpoint_resumable(http_req *rq);

/* routes_transcripts.c: event pages (roles, hidden events), the context
 * (OpenAI format), rewind, messages, clear, undo, operations and the
 * state history */
void http_h_events_query(http_req *rq);
void http_h_context_read(http_req *rq);
/* The query of a write that may answer its context (?return=context, with
 * GET context's format, include_text and query). */
typedef struct http_return_context {
	int asked;          /* return=context */
	uint32_t flags;     /* the context read's MEMD_READ_* flags */
	const char *query;  /* the recall query (borrowed from rq), NULL = none */
} http_return_context;
/* Reads that query into *ret; 0, or, having replied 400 naming the
 * parameter (return other than "context"; format, include_text or query
 * without it), MEMD_EINVAL: the handler returns at once. */
int32_t http_req_return_context(http_req *rq, http_return_context *ret);
void http_h_session_rewind(http_req *rq);
void http_h_messages_get(http_req *rq);
void http_h_messages_append(http_req *rq);
void http_h_messages_put(http_req *rq);
void http_h_events_clear(http_req *rq);
void http_h_operation_undo(http_req *rq);
void http_h_operation_list(http_req *rq);
void http_h_state_history(http_req *rq);

/* routes_mcp.c: the Model Context Protocol's Streamable HTTP transport
 * (host/mcp/): POST a JSON-RPC message, DELETE a session (GET has no
 * route: memd opens no stream from the server, and answers it 405) */
void http_h_mcp_post(http_req *rq);
void http_h_mcp_delete(http_req *rq);

#endif
