/* SPDX-License-Identifier: MIT */
/* JSON-RPC 2.0 and the MCP lifecycle: messages in, responses out. */
#include "mcp_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memd/plugin.h>

#include "memd-build.h"

#define JSONRPC_VERSION "2.0"
/* The revision that has JSON-RPC batches (added in it, removed after). */
#define MCP_BATCH_VERSION "2025-03-26"
/* The first revision with structured tool output and titles. */
#define MCP_STRUCTURED_VERSION "2025-06-18"
#define MCP_MSG_MAX 512
#define MCP_SERVER_NAME "memd"
#define MCP_INSTRUCTIONS                                                                  \
	"memd keeps this user's long-term memory: durable facts, preferences and "        \
	"instructions (memories) and every past conversation turn. Call search_memory "   \
	"before answering a question that may depend on what the user said before; call " \
	"add_memory when the user tells you something worth remembering; update_memory "  \
	"or delete_memory when a memory is wrong or outdated."

/* Every revision memd speaks, newest first: those of the official SDKs. */
static const char *const versions[] = {
	MCP_LATEST_VERSION, "2025-06-18", "2025-03-26", "2024-11-05", "2024-10-07", NULL,
};

int mcp_version_supported(const char *version)
{
	for (size_t i = 0; versions[i]; i++)
		if (strcmp(versions[i], version) == 0)
			return 1;
	return 0;
}

const char *mcp_versions_text(void)
{
	return MCP_LATEST_VERSION ", 2025-06-18, 2025-03-26, 2024-11-05, 2024-10-07";
}

int mcp_version_structured(const char *v)
{
	/* Revisions are dates: they compare as text. */
	return strcmp(v, MCP_STRUCTURED_VERSION) >= 0;
}

/* ---- sessions ------------------------------------------------------------ */

static char **strv_dup(const char *const *v)
{
	size_t n = 0;
	char **out;

	while (v[n])
		n++;
	if (!(out = calloc(n + 1, sizeof(*out))))
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (!(out[i] = strdup(v[i]))) {
			for (size_t k = 0; k < i; k++)
				free(out[k]);
			free(out);
			return NULL;
		}
	return out;
}

int32_t mcp_conn_new(memd *m, const mcp_binding *b, mcp_conn **ret, memd_error *err)
{
	mcp_conn *c;

	if (!b->app != !b->user)
		return memd_error_set(err, MEMD_EINVAL, 0, "an MCP binding names both app and user, or neither");
	if (b->scope != MCP_SCOPE_READ && b->scope != MCP_SCOPE_WRITE)
		return memd_error_set(err, MEMD_EINVAL, 0, "an MCP binding's scope is read or write");
	if (!(c = calloc(1, sizeof(*c))))
		goto nomem;
	c->m = m;
	c->scope = b->scope;
	c->flags = b->flags;
	atomic_init(&c->initialized, 0);
	if (b->app && (!(c->app = strdup(b->app)) || !(c->user = strdup(b->user))))
		goto nomem;
	if (b->apps && !(c->apps = strv_dup(b->apps)))
		goto nomem;
	*ret = c;
	return 0;
nomem:
	mcp_conn_free(c);
	return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
}

void mcp_conn_free(mcp_conn *c)
{
	if (!c)
		return;
	free(c->app);
	free(c->user);
	for (size_t i = 0; c->apps && c->apps[i]; i++)
		free(c->apps[i]);
	free(c->apps);
	free(c);
}

const char *mcp_conn_version(const mcp_conn *c)
{
	return c->version;
}

/* ---- responses ----------------------------------------------------------- */

/* {"jsonrpc": "2.0", "error": {"code", "message"}, "id": id} (id
 * borrowed; NULL: null). New reference, NULL on ENOMEM. */
static json_t *error_response(json_t *id, int32_t code, const char *message)
{
	return json_pack("{s:s,s:{s:i,s:s},s:O}", "jsonrpc", JSONRPC_VERSION, "error", "code",
			 (int)code, "message", message, "id", id ? id : json_null());
}

/* {"jsonrpc": "2.0", "result": result (taken), "id": id (borrowed)}. */
static json_t *result_response(json_t *id, json_t *result)
{
	if (!result)
		return NULL;
	return json_pack("{s:s,s:o,s:O}", "jsonrpc", JSONRPC_VERSION, "result", result, "id", id);
}

char *mcp_error_text(int32_t code, const char *message)
{
	json_t *e = error_response(NULL, code, message);
	char *text = e ? json_dumps(e, JSON_COMPACT) : NULL;

	json_decref(e);
	return text;
}

/* ---- methods ------------------------------------------------------------- */

/* A method's outcome: 0 with *ret_result, or a JSON-RPC error code with
 * a message in msg, or MEMD_ENOMEM. */
typedef int32_t (*method_fn)(mcp_conn *c, json_t *params, json_t **ret_result, char *msg,
			     size_t cap);

static int32_t m_initialize(mcp_conn *c, json_t *params, json_t **ret_result, char *msg,
			    size_t cap)
{
	json_t *v = json_object_get(params, "protocolVersion");
	const char *asked;
	const char *chosen;
	json_t *r;

	if (c->version[0]) {
		snprintf(msg, cap, "this session is initialized already");
		return MCP_INVALID_REQUEST;
	}
	if (!json_is_string(v)) {
		snprintf(msg, cap, "initialize: params.protocolVersion must be a string");
		return MCP_INVALID_PARAMS;
	}
	if (json_object_get(params, "capabilities") &&
	    !json_is_object(json_object_get(params, "capabilities"))) {
		snprintf(msg, cap, "initialize: params.capabilities must be an object");
		return MCP_INVALID_PARAMS;
	}
	asked = json_string_value(v);
	/* The client's revision when memd speaks it, else memd's newest (the
	 * client disconnects if it cannot speak that). */
	chosen = mcp_version_supported(asked) ? asked : MCP_LATEST_VERSION;
	r = json_pack("{s:s,s:{s:{s:b}},s:{s:s,s:s},s:s}", "protocolVersion", chosen, "capabilities",
		      "tools", "listChanged", 0, "serverInfo", "name", MCP_SERVER_NAME, "version",
		      MEMD_VERSION, "instructions", MCP_INSTRUCTIONS);
	if (!r)
		return MEMD_ENOMEM;
	if (mcp_version_structured(chosen))
		json_object_set_new(json_object_get(r, "serverInfo"), "title", json_string("memd memory"));
	snprintf(c->version, sizeof(c->version), "%s", chosen);
	*ret_result = r;
	return 0;
}

static int32_t m_ping(mcp_conn *c, json_t *params, json_t **ret_result, char *msg, size_t cap)
{
	(void)c;
	(void)params;
	(void)msg;
	(void)cap;
	return (*ret_result = json_object()) ? 0 : MEMD_ENOMEM;
}

static int32_t m_tools_list(mcp_conn *c, json_t *params, json_t **ret_result, char *msg,
			    size_t cap)
{
	/* memd's list is one page: a cursor can only be one it never gave. */
	if (json_object_get(params, "cursor")) {
		snprintf(msg, cap, "tools/list: memd gives no cursors (its list is one page)");
		return MCP_INVALID_PARAMS;
	}
	return (*ret_result = mcp_tools_list(c)) ? 0 : MEMD_ENOMEM;
}

static int32_t m_tools_call(mcp_conn *c, json_t *params, json_t **ret_result, char *msg,
			    size_t cap)
{
	json_t *name = json_object_get(params, "name");
	json_t *args = json_object_get(params, "arguments");

	if (!json_is_string(name)) {
		snprintf(msg, cap, "tools/call: params.name must be a string");
		return MCP_INVALID_PARAMS;
	}
	if (args && !json_is_object(args) && !json_is_null(args)) {
		snprintf(msg, cap, "tools/call: params.arguments must be an object");
		return MCP_INVALID_PARAMS;
	}
	return mcp_tools_call(c, json_string_value(name), json_is_object(args) ? args : NULL,
			      ret_result, msg, cap);
}

typedef struct method {
	const char *name;
	method_fn fn;
} method;

static const method methods[] = {
	{ "initialize", m_initialize },
	{ "ping", m_ping },
	{ "tools/list", m_tools_list },
	{ "tools/call", m_tools_call },
};

/* ---- messages ------------------------------------------------------------ */

/* A request id: a string or an integer (MCP: never null). */
static int id_ok(json_t *id)
{
	return json_is_string(id) || json_is_integer(id);
}

/* Handle one message (not a batch). *ret: the response (NULL: none);
 * *ret_invalid: the message was not a JSON-RPC message. Returns 0 or
 * MEMD_ENOMEM. */
static int32_t handle_one(mcp_conn *c, json_t *msg, int in_batch, json_t **ret, int *ret_invalid)
{
	json_t *id = json_object_get(msg, "id");
	json_t *meth = json_object_get(msg, "method");
	json_t *params = json_object_get(msg, "params");
	json_t *result = NULL;
	char text[MCP_MSG_MAX] = "";
	const char *name;
	int32_t r = MCP_METHOD_NOT_FOUND;

	*ret = NULL;
	*ret_invalid = 0;
	if (!json_is_object(msg) ||
	    !json_is_string(json_object_get(msg, "jsonrpc")) ||
	    strcmp(json_string_value(json_object_get(msg, "jsonrpc")), JSONRPC_VERSION) != 0) {
		*ret_invalid = 1;
		*ret = error_response(id_ok(id) ? id : NULL, MCP_INVALID_REQUEST,
				      json_is_object(msg) ? "not a JSON-RPC 2.0 message: \"jsonrpc\" must be \"2.0\""
							  : "not a JSON-RPC message: expected an object");
		return *ret ? 0 : MEMD_ENOMEM;
	}
	if (!meth) {
		/* A response: memd sends no requests, so there is nothing to
		 * match it with; it is taken and dropped. */
		if (id && (json_object_get(msg, "result") || json_object_get(msg, "error")))
			return 0;
		*ret_invalid = 1;
		*ret = error_response(id_ok(id) ? id : NULL, MCP_INVALID_REQUEST,
				      "not a JSON-RPC message: neither a request (\"method\") nor a "
				      "response (\"result\" or \"error\")");
		return *ret ? 0 : MEMD_ENOMEM;
	}
	if (!json_is_string(meth) || (id && !id_ok(id))) {
		*ret_invalid = 1;
		*ret = error_response(id_ok(id) ? id : NULL, MCP_INVALID_REQUEST,
				      !json_is_string(meth) ? "\"method\" must be a string"
							    : "\"id\" must be a string or an integer");
		return *ret ? 0 : MEMD_ENOMEM;
	}
	name = json_string_value(meth);
	if (!id) {
		/* A notification: never answered, not even with an error. */
		if (strcmp(name, "notifications/initialized") == 0 && c->version[0])
			atomic_store(&c->initialized, 1);
		return 0;
	}
	if (params && !json_is_object(params)) {
		*ret = error_response(id, MCP_INVALID_PARAMS, "\"params\" must be an object");
		return *ret ? 0 : MEMD_ENOMEM;
	}
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		if (strcmp(methods[i].name, name) != 0)
			continue;
		if (in_batch && methods[i].fn == m_initialize) {
			snprintf(text, sizeof(text), "initialize must not be part of a batch");
			r = MCP_INVALID_REQUEST;
		} else if (!c->version[0] && methods[i].fn != m_initialize && methods[i].fn != m_ping) {
			snprintf(text, sizeof(text), "%s before initialize: initialize the session first",
				 name);
			r = MCP_INVALID_REQUEST;
		} else {
			r = methods[i].fn(c, params, &result, text, sizeof(text));
		}
		break;
	}
	if (r == MEMD_ENOMEM)
		return r;
	if (r == MCP_METHOD_NOT_FOUND && !text[0])
		snprintf(text, sizeof(text), "method not found: %.200s", name);
	*ret = r == 0 ? result_response(id, result) : error_response(id, r, text);
	return *ret ? 0 : MEMD_ENOMEM;
}

/* Dump v (taken) as compact JSON into *ret_json. */
static int32_t dump(json_t *v, char **ret_json, memd_error *err)
{
	char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);

	json_decref(v);
	if (!text)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	*ret_json = text;
	return 0;
}

static int32_t handle_batch(mcp_conn *c, json_t *batch, char **ret_json, int *ret_kind,
			    memd_error *err)
{
	json_t *out;
	size_t i;
	json_t *msg;

	if (strcmp(c->version, MCP_BATCH_VERSION) != 0 || json_array_size(batch) == 0) {
		char text[MCP_MSG_MAX];
		if (json_array_size(batch) == 0)
			snprintf(text, sizeof(text), "an empty batch");
		else if (!c->version[0])
			snprintf(text, sizeof(text), "a batch before initialize (initialize must come alone)");
		else
			snprintf(text, sizeof(text),
				 "JSON-RPC batches are not part of protocol revision %s (only of " MCP_BATCH_VERSION
				 ")", c->version);
		*ret_kind = MCP_OUT_INVALID;
		return dump(error_response(NULL, MCP_INVALID_REQUEST, text), ret_json, err);
	}
	if (!(out = json_array()))
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	json_array_foreach (batch, i, msg) {
		json_t *resp;
		int invalid;
		if (handle_one(c, msg, 1, &resp, &invalid) < 0) {
			json_decref(out);
			return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
		}
		if (resp)
			json_array_append_new(out, resp);
	}
	if (json_array_size(out) == 0) {
		json_decref(out);
		*ret_json = NULL;
		*ret_kind = MCP_OUT_NONE;
		return 0;
	}
	*ret_kind = MCP_OUT_RESPONSE;
	return dump(out, ret_json, err);
}

int32_t mcp_handle(mcp_conn *c, const char *text, size_t len, char **ret_json, int *ret_kind,
		   memd_error *err)
{
	json_error_t jerr;
	json_t *msg = json_loadb(text, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
	json_t *resp;
	int invalid;
	int32_t r;

	if (!msg) {
		char m[MCP_MSG_MAX];
		snprintf(m, sizeof(m), "parse error: %s (at byte %d)", jerr.text, jerr.position);
		*ret_kind = MCP_OUT_INVALID;
		return dump(error_response(NULL, MCP_PARSE_ERROR, m), ret_json, err);
	}
	if (json_is_array(msg)) {
		r = handle_batch(c, msg, ret_json, ret_kind, err);
		json_decref(msg);
		return r;
	}
	r = handle_one(c, msg, 0, &resp, &invalid);
	json_decref(msg);
	if (r < 0)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	if (!resp) {
		*ret_json = NULL;
		*ret_kind = MCP_OUT_NONE;
		return 0;
	}
	*ret_kind = invalid ? MCP_OUT_INVALID : MCP_OUT_RESPONSE;
	return dump(resp, ret_json, err);
}

int mcp_is_initialize(const char *text, size_t len)
{
	json_t *msg = json_loadb(text, len, JSON_DECODE_ANY, NULL);
	json_t *meth = json_object_get(msg, "method");
	int yes = json_is_object(msg) && json_is_string(meth) &&
		  strcmp(json_string_value(meth), "initialize") == 0 && id_ok(json_object_get(msg, "id"));

	json_decref(msg);
	return yes;
}
