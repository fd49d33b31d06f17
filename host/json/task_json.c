/* SPDX-License-Identifier: MIT */
/*
 * task_json: A2A tasks as JSON; see task_json.h.
 *
 * The check walks the Task the way the A2A protocol defines it (a Task's
 * status, history and artifacts; a Message's parts; a Part by its kind)
 * and names the first member that is wrong by its path in the object,
 * "history[2].parts[0].text", so that a client sees what to fix.
 */
#include "json/task_json.h"

#include <stdio.h>
#include <string.h>

#include "json/event_json.h"

/* Room for a member's path: "artifacts[4294967295].parts[...].file.mimeType". */
#define TJ_PATH_MAX 128

static const char *const tj_states[] = { "submitted", "working",  "input-required",
					  "auth-required", "completed", "canceled",
					  "failed", "rejected", "unknown" };
#define TJ_STATES_TEXT \
	"submitted, working, input-required, auth-required, completed, canceled, failed, " \
	"rejected or unknown"

int tj_state_valid(const char *state)
{
	if (!state)
		return 0;
	for (size_t i = 0; i < sizeof(tj_states) / sizeof(tj_states[0]); i++)
		if (strcmp(state, tj_states[i]) == 0)
			return 1;
	return 0;
}

/* ---- checking -------------------------------------------------------------- */

static int32_t bad(memd_error *err, const char *path, const char *what)
{
	return memd_error_set(err, MEMD_EINVAL, 0, "%s: %s", path, what);
}

/* path "." name into buf (the path of a member; cut to fit). */
static const char *member(char buf[TJ_PATH_MAX], const char *path, const char *name)
{
	int n = path[0] ? snprintf(buf, TJ_PATH_MAX, "%s.%s", path, name)
			: snprintf(buf, TJ_PATH_MAX, "%s", name);

	if (n < 0)
		buf[0] = '\0';
	return buf;
}

/* path "[" i "]" into buf (the path of an element; cut to fit). */
static const char *element(char buf[TJ_PATH_MAX], const char *path, size_t i)
{
	if (snprintf(buf, TJ_PATH_MAX, "%s[%zu]", path, i) < 0)
		buf[0] = '\0';
	return buf;
}

/* o's member name: absent or null is fine unless required; else it must
 * be of type (JSON_STRING, JSON_OBJECT, JSON_ARRAY). *ret: the value, or
 * NULL when absent or null. */
static int32_t get(json_t *o, const char *path, const char *name, json_type type, int required,
		   json_t **ret, memd_error *err)
{
	static const char *const must[] = { [JSON_STRING] = "must be a string",
					    [JSON_OBJECT] = "must be an object",
					    [JSON_ARRAY] = "must be an array" };
	char buf[TJ_PATH_MAX];
	json_t *v = json_object_get(o, name);

	*ret = NULL;
	if (!v || json_is_null(v))
		return required ? bad(err, member(buf, path, name), "required") : 0;
	if (json_typeof(v) != type)
		return bad(err, member(buf, path, name), must[type]);
	*ret = v;
	return 0;
}

/* "kind" of o: absent (when optional) or the string want. */
static int32_t check_kind(json_t *o, const char *path, const char *want, int required,
			  memd_error *err)
{
	char buf[TJ_PATH_MAX];
	json_t *v;
	int32_t r;

	if ((r = get(o, path, "kind", JSON_STRING, required, &v, err)) < 0 || !v)
		return r;
	if (strcmp(json_string_value(v), want) != 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "%s: must be \"%s\"",
				      member(buf, path, "kind"), want);
	return 0;
}

static int32_t check_metadata(json_t *o, const char *path, memd_error *err)
{
	json_t *v;

	return get(o, path, "metadata", JSON_OBJECT, 0, &v, err);
}

static int32_t check_part(json_t *p, const char *path, memd_error *err)
{
	char buf[TJ_PATH_MAX];
	json_t *kind, *v, *file, *bytes, *uri;
	const char *k;
	int32_t r;

	if (!json_is_object(p))
		return bad(err, path, "must be an object (a text, file or data part)");
	if ((r = get(p, path, "kind", JSON_STRING, 1, &kind, err)) < 0 ||
	    (r = check_metadata(p, path, err)) < 0)
		return r;
	k = json_string_value(kind);
	if (strcmp(k, "text") == 0)
		return get(p, path, "text", JSON_STRING, 1, &v, err);
	if (strcmp(k, "data") == 0)
		return get(p, path, "data", JSON_OBJECT, 1, &v, err);
	if (strcmp(k, "file") != 0)
		return bad(err, member(buf, path, "kind"), "must be text, file or data");
	if ((r = get(p, path, "file", JSON_OBJECT, 1, &file, err)) < 0)
		return r;
	member(buf, path, "file");
	if ((r = get(file, buf, "bytes", JSON_STRING, 0, &bytes, err)) < 0 ||
	    (r = get(file, buf, "uri", JSON_STRING, 0, &uri, err)) < 0 ||
	    (r = get(file, buf, "name", JSON_STRING, 0, &v, err)) < 0 ||
	    (r = get(file, buf, "mimeType", JSON_STRING, 0, &v, err)) < 0)
		return r;
	if (!bytes == !uri)
		return bad(err, buf, "must have one of bytes and uri");
	return 0;
}

static int32_t check_parts(json_t *o, const char *path, memd_error *err)
{
	char buf[TJ_PATH_MAX], at[TJ_PATH_MAX];
	json_t *parts;
	int32_t r;

	if ((r = get(o, path, "parts", JSON_ARRAY, 1, &parts, err)) < 0)
		return r;
	member(buf, path, "parts");
	for (size_t i = 0; i < json_array_size(parts); i++)
		if ((r = check_part(json_array_get(parts, i), element(at, buf, i), err)) < 0)
			return r;
	return 0;
}

static int32_t check_message(json_t *msg, const char *path, memd_error *err)
{
	char buf[TJ_PATH_MAX];
	json_t *role, *v;
	int32_t r;

	if (!json_is_object(msg))
		return bad(err, path, "must be an object (a Message)");
	if ((r = check_kind(msg, path, "message", 0, err)) < 0 ||
	    (r = get(msg, path, "messageId", JSON_STRING, 1, &v, err)) < 0 ||
	    (r = get(msg, path, "role", JSON_STRING, 1, &role, err)) < 0)
		return r;
	if (strcmp(json_string_value(role), "user") != 0 &&
	    strcmp(json_string_value(role), "agent") != 0)
		return bad(err, member(buf, path, "role"), "must be user or agent");
	if ((r = check_parts(msg, path, err)) < 0 || (r = check_metadata(msg, path, err)) < 0 ||
	    (r = get(msg, path, "contextId", JSON_STRING, 0, &v, err)) < 0 ||
	    (r = get(msg, path, "taskId", JSON_STRING, 0, &v, err)) < 0)
		return r;
	return 0;
}

static int32_t check_artifact(json_t *a, const char *path, memd_error *err)
{
	json_t *v;
	int32_t r;

	if (!json_is_object(a))
		return bad(err, path, "must be an object (an Artifact)");
	if ((r = get(a, path, "artifactId", JSON_STRING, 1, &v, err)) < 0 ||
	    (r = check_parts(a, path, err)) < 0 ||
	    (r = get(a, path, "name", JSON_STRING, 0, &v, err)) < 0 ||
	    (r = get(a, path, "description", JSON_STRING, 0, &v, err)) < 0 ||
	    (r = check_metadata(a, path, err)) < 0)
		return r;
	return 0;
}

/* Every element of task's array member name passes check. */
static int32_t check_each(json_t *task, const char *name,
			  int32_t (*check)(json_t *, const char *, memd_error *), memd_error *err)
{
	char at[TJ_PATH_MAX];
	json_t *arr;
	int32_t r;

	if ((r = get(task, "", name, JSON_ARRAY, 0, &arr, err)) < 0 || !arr)
		return r;
	for (size_t i = 0; i < json_array_size(arr); i++)
		if ((r = check(json_array_get(arr, i), element(at, name, i), err)) < 0)
			return r;
	return 0;
}

int32_t tj_check_task(json_t *task, const char *id, const char **ret_state, memd_error *err)
{
	json_t *tid, *ctx, *status, *state, *msg, *v;
	int32_t r;

	if (!json_is_object(task))
		return memd_error_set(err, MEMD_EINVAL, 0, "body: must be a JSON object (an A2A Task)");
	if ((r = check_kind(task, "", "task", 0, err)) < 0 ||
	    (r = get(task, "", "id", JSON_STRING, 1, &tid, err)) < 0)
		return r;
	if (strcmp(json_string_value(tid), id) != 0)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "id: must equal the task id of the path ('%.64s')", id);
	if ((r = get(task, "", "contextId", JSON_STRING, 1, &ctx, err)) < 0 ||
	    (r = get(task, "", "status", JSON_OBJECT, 1, &status, err)) < 0 ||
	    (r = get(status, "status", "state", JSON_STRING, 1, &state, err)) < 0)
		return r;
	if (!tj_state_valid(json_string_value(state)))
		return memd_error_set(err, MEMD_EINVAL, 0, "status.state: must be one of "
				      TJ_STATES_TEXT " (is '%.64s')", json_string_value(state));
	if ((r = get(status, "status", "message", JSON_OBJECT, 0, &msg, err)) < 0 ||
	    (msg && (r = check_message(msg, "status.message", err)) < 0) ||
	    (r = get(status, "status", "timestamp", JSON_STRING, 0, &v, err)) < 0 ||
	    (r = check_each(task, "history", check_message, err)) < 0 ||
	    (r = check_each(task, "artifacts", check_artifact, err)) < 0 ||
	    (r = check_metadata(task, "", err)) < 0)
		return r;
	*ret_state = json_string_value(state);
	return 0;
}

/* ---- the record ------------------------------------------------------------ */

static json_t *time_json(int64_t us)
{
	char buf[EJ_TIME_LEN];

	ej_format_time(us, buf);
	return json_string(buf);
}

int32_t tj_task_record(const memd_task *t, int64_t history_length, json_t **ret,
		       memd_error *err)
{
	json_t *task = t->task_json ? json_loads(t->task_json, 0, NULL) : NULL;
	json_t *history, *o;

	if (!json_is_object(task)) {
		json_decref(task);
		return memd_error_set(err, MEMD_EIO, 0, "task '%.64s': the stored task is not a JSON object",
				      t->id ? t->id : "");
	}
	history = json_object_get(task, "history");
	if (history_length >= 0 && json_is_array(history) &&
	    json_array_size(history) > (uint64_t)history_length) {
		size_t n = json_array_size(history), from = n - (size_t)history_length;
		json_t *kept = json_array();

		for (size_t i = from; kept && i < n; i++)
			if (json_array_append(kept, json_array_get(history, i)) < 0) {
				json_decref(kept);
				kept = NULL;
			}
		if (!kept || json_object_set_new(task, "history", kept) < 0) {
			json_decref(task);
			return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
		}
	}
	o = json_pack("{s:o,s:I,s:s?,s:o,s:o}", "task", task, "version", (json_int_t)t->version,
		      "user", t->user, "created", time_json(t->created_us), "updated",
		      time_json(t->updated_us));
	if (!o)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	*ret = o;
	return 0;
}
