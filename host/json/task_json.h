/* SPDX-License-Identifier: MIT */
/*
 * task_json: the JSON shapes of A2A tasks (api/memd/memd.h, "A2A tasks"):
 * validation of the A2A protocol's Task object a client stores (its
 * Messages, Parts and Artifacts included), and the record memd answers
 * with around a stored task.
 */
#ifndef MEMD_HOST_TASK_JSON_H
#define MEMD_HOST_TASK_JSON_H

#include <jansson.h>

#include <memd/plugin.h>

/* Nonzero if state is one of the A2A task states: submitted, working,
 * input-required, auth-required, completed, canceled, failed, rejected,
 * unknown (case-sensitive). NULL is not. */
int tj_state_valid(const char *state);

/* Check task, an A2A Task object: "kind" "task" when present, "id" a
 * string equal to id, "contextId" a string, "status" an object with
 * "state" (tj_state_valid), "message"? (a Message) and "timestamp"?
 * (a string), "history"? (an array of Messages), "artifacts"? (an array
 * of {"artifactId", "parts", "name"?, "description"?, "metadata"?}),
 * "metadata"? (an object). A Message is {"kind"? "message", "messageId",
 * "role" "user" | "agent", "parts", "metadata"?, "contextId"?,
 * "taskId"?}; parts are arrays of text ({"kind": "text", "text"}), file
 * ({"kind": "file", "file": {"bytes" | "uri", "name"?, "mimeType"?}}) and
 * data ({"kind": "data", "data": object}) parts, each with an optional
 * "metadata" object. An optional member may be null. Members the check
 * does not know are allowed (kept as given). *ret_state (borrowed from
 * task) is status.state. MEMD_EINVAL naming the member ("status.state:
 * must be one of ...", "history[2].parts[0].text: must be a string"). */
int32_t tj_check_task(json_t *task, const char *id, const char **ret_state, memd_error *err);

/* The answer about a stored task: {"task": t->task_json as JSON (with
 * only its history_length most recent "history" messages when
 * history_length >= 0), "version", "user" (null when none), "created",
 * "updated"} (RFC 3339 UTC with microseconds) into *ret. MEMD_EIO when
 * the stored task_json is not a JSON object, MEMD_ENOMEM. */
int32_t tj_task_record(const memd_task *t, int64_t history_length, json_t **ret,
		       memd_error *err);

#endif
