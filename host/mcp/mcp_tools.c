/* SPDX-License-Identifier: MIT */
/*
 * The memory tools: each a facade call for one (app, user), described by
 * one table from which both its inputSchema and the check of its
 * arguments are made, so that the two never disagree.
 */
#include "mcp_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memd/plugin.h>

#include "service/service_int.h"
#include "util/errname.h"

/* Argument types. */
#define T_STR   0 /* a string of min..max bytes */
#define T_INT   1 /* an integer in min..max */
#define T_STRS  2 /* an array of at most max strings of 1..MEMD_ID_MAX bytes */
#define T_ENUM  3 /* one of values */
#define T_ENUMS 4 /* an array of distinct values, at least one */

/* Bounds of the search tool's k (memd_search's). */
#define SEARCH_K_MAX 1000
/* The longest lifetime add_memory takes: a century, in seconds. */
#define MEMORY_TTL_MAX_S (100LL * 366 * 24 * 3600)
#define MSG_MAX 512

typedef struct param {
	const char *name;
	int type;                  /* T_* */
	int required;
	int64_t min, max;
	const char *const *values; /* T_ENUM, T_ENUMS */
	const char *description;
} param;

typedef struct tool tool;
/* A tool's facade call: 0 with *ret_json (the facade's answer, malloc'd),
 * or a MEMD_E* code with err filled. */
typedef int32_t (*tool_fn)(mcp_conn *c, const char *app, const char *user, json_t *args,
			   char **ret_json, memd_error *err);

struct tool {
	const char *name;
	const char *title;
	const char *description;
	int32_t scope;             /* MCP_SCOPE_* it needs */
	const param *params;       /* ends with a NULL name */
	const char *output_schema; /* JSON text; NULL: no structured output */
	tool_fn fn;
};

static const char *const modes[] = { "keyword", "vector", "hybrid", NULL };
static const char *const sources[] = { "events", "memories", NULL };
static const char *const kinds[] = { "fact", "preference", "instruction", "episode", NULL };

/* The arguments naming whose memory a call is about, for an unbound conn. */
static const param scope_params[] = {
	{ "app", T_STR, 1, 1, MEMD_ID_MAX, NULL, "the application whose memory to use" },
	{ "user", T_STR, 1, 1, MEMD_ID_MAX, NULL, "the user whose memory to use" },
	{ NULL, 0, 0, 0, 0, NULL, NULL },
};

/* ---- arguments ------------------------------------------------------------ */

static json_t *arg(json_t *args, const char *name)
{
	return json_object_get(args, name);
}

static const char *arg_str(json_t *args, const char *name)
{
	return json_string_value(arg(args, name));
}

static int in_values(const char *const *values, const char *s)
{
	for (size_t i = 0; values[i]; i++)
		if (strcmp(values[i], s) == 0)
			return 1;
	return 0;
}

static void values_text(const char *const *values, char *buf, size_t cap)
{
	buf[0] = '\0';
	for (size_t i = 0; values[i]; i++)
		snprintf(buf + strlen(buf), cap - strlen(buf), "%s%s", i ? ", " : "", values[i]);
}

/* Check one argument v against p; 0, or -1 with msg. */
static int check_param(const param *p, json_t *v, char *msg, size_t cap)
{
	char vals[128];
	size_t i;
	json_t *e;

	switch (p->type) {
	case T_STR:
		if (!json_is_string(v) || json_string_length(v) < (size_t)p->min ||
		    json_string_length(v) > (size_t)p->max) {
			snprintf(msg, cap, "argument %s: expected a string of %lld to %lld bytes", p->name,
				 (long long)p->min, (long long)p->max);
			return -1;
		}
		return 0;
	case T_INT:
		if (!json_is_integer(v) || json_integer_value(v) < p->min ||
		    json_integer_value(v) > p->max) {
			snprintf(msg, cap, "argument %s: expected an integer from %lld to %lld", p->name,
				 (long long)p->min, (long long)p->max);
			return -1;
		}
		return 0;
	case T_ENUM:
		if (!json_is_string(v) || !in_values(p->values, json_string_value(v))) {
			values_text(p->values, vals, sizeof(vals));
			snprintf(msg, cap, "argument %s: expected one of %s", p->name, vals);
			return -1;
		}
		return 0;
	case T_STRS:
	case T_ENUMS:
		if (!json_is_array(v) || (p->type == T_STRS && json_array_size(v) > (size_t)p->max) ||
		    (p->type == T_ENUMS && json_array_size(v) == 0)) {
			snprintf(msg, cap, "argument %s: expected an array of %s", p->name,
				 p->type == T_STRS ? "at most 32 strings" : "at least one value");
			return -1;
		}
		json_array_foreach (v, i, e) {
			if (p->type == T_STRS &&
			    (!json_is_string(e) || json_string_length(e) == 0 ||
			     json_string_length(e) > MEMD_ID_MAX)) {
				snprintf(msg, cap, "argument %s: item %zu is not a string of 1 to %d bytes",
					 p->name, i, MEMD_ID_MAX);
				return -1;
			}
			if (p->type == T_ENUMS &&
			    (!json_is_string(e) || !in_values(p->values, json_string_value(e)))) {
				values_text(p->values, vals, sizeof(vals));
				snprintf(msg, cap, "argument %s: item %zu is not one of %s", p->name, i, vals);
				return -1;
			}
		}
		return 0;
	}
	snprintf(msg, cap, "argument %s: unknown type", p->name);
	return -1;
}

static const param *find_param(const param *ps, const char *name)
{
	for (; ps && ps->name; ps++)
		if (strcmp(ps->name, name) == 0)
			return ps;
	return NULL;
}

/* The argument names t takes on c, for a message. */
static void names_text(const mcp_conn *c, const tool *t, char *buf, size_t cap)
{
	buf[0] = '\0';
	for (const param *p = c->app ? NULL : scope_params; p && p->name; p++)
		snprintf(buf + strlen(buf), cap - strlen(buf), "%s%s", buf[0] ? ", " : "", p->name);
	for (const param *p = t->params; p->name; p++)
		snprintf(buf + strlen(buf), cap - strlen(buf), "%s%s", buf[0] ? ", " : "", p->name);
}

/* Check args (NULL: none) for t on c and find whose memory the call is
 * about: *ret_app and *ret_user (borrowed from c or args). 0, or -1 with
 * msg. */
static int check_args(const mcp_conn *c, const tool *t, json_t *args, const char **ret_app,
		      const char **ret_user, char *msg, size_t cap)
{
	const char *key;
	json_t *v;
	const char *app, *user;

	json_object_foreach (args, key, v) {
		const param *p = find_param(t->params, key);
		if (!p && !(p = find_param(scope_params, key))) {
			char names[MSG_MAX / 2];
			names_text(c, t, names, sizeof(names));
			snprintf(msg, cap, "unknown argument '%.64s' (%s takes: %s)", key, t->name, names);
			return -1;
		}
		if (check_param(p, v, msg, cap) < 0)
			return -1;
	}
	for (const param *p = t->params; p->name; p++)
		if (p->required && !arg(args, p->name)) {
			snprintf(msg, cap, "argument %s is required", p->name);
			return -1;
		}
	app = arg_str(args, "app");
	user = arg_str(args, "user");
	if (c->app) {
		/* Bound: the session's own (app, user), which an argument may
		 * repeat but never change. */
		if ((app && strcmp(app, c->app) != 0) || (user && strcmp(user, c->user) != 0)) {
			snprintf(msg, cap,
				 "this session is bound to one app and user; app and user arguments, "
				 "when given, must be those");
			return -1;
		}
		*ret_app = c->app;
		*ret_user = c->user;
		return 0;
	}
	if (!app || !user) {
		snprintf(msg, cap, "argument %s is required", app ? "user" : "app");
		return -1;
	}
	if (c->apps && !in_values((const char *const *)c->apps, app)) {
		snprintf(msg, cap, "this API key is not for app '%.64s'", app);
		return -1;
	}
	*ret_app = app;
	*ret_user = user;
	return 0;
}

/* The body for a facade call: the arguments named in copied that are
 * given, as JSON text (malloc'd), or NULL on ENOMEM. */
static char *body_of(json_t *args, const char *const *copied)
{
	json_t *body = json_object();
	char *text;

	for (size_t i = 0; body && copied[i]; i++)
		if (arg(args, copied[i]))
			json_object_set(body, copied[i], arg(args, copied[i]));
	text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(body);
	return text;
}

/* ---- schemas -------------------------------------------------------------- */

static json_t *param_schema(const param *p)
{
	json_t *s = json_object(), *items = NULL;

	if (!s)
		return NULL;
	switch (p->type) {
	case T_STR:
		json_object_set_new(s, "type", json_string("string"));
		json_object_set_new(s, "minLength", json_integer(p->min));
		/* JSON Schema counts characters, memd bytes: the byte limit
		 * is checked by memd. */
		break;
	case T_INT:
		json_object_set_new(s, "type", json_string("integer"));
		json_object_set_new(s, "minimum", json_integer(p->min));
		json_object_set_new(s, "maximum", json_integer(p->max));
		break;
	case T_ENUM:
	case T_ENUMS:
		items = json_array();
		for (size_t i = 0; items && p->values[i]; i++)
			json_array_append_new(items, json_string(p->values[i]));
		if (p->type == T_ENUM) {
			json_object_set_new(s, "type", json_string("string"));
			json_object_set_new(s, "enum", items);
		} else {
			json_object_set_new(s, "type", json_string("array"));
			json_object_set_new(s, "items", json_pack("{s:s,s:o}", "type", "string", "enum", items));
			json_object_set_new(s, "minItems", json_integer(1));
			json_object_set_new(s, "uniqueItems", json_true());
		}
		break;
	case T_STRS:
		json_object_set_new(s, "type", json_string("array"));
		json_object_set_new(s, "items", json_pack("{s:s,s:i}", "type", "string", "minLength", 1));
		json_object_set_new(s, "maxItems", json_integer(p->max));
		break;
	}
	json_object_set_new(s, "description", json_string(p->description));
	return s;
}

/* Add ps's schemas to props and the required ones' names to req. */
static void add_params(json_t *props, json_t *req, const param *ps)
{
	for (const param *p = ps; p->name; p++) {
		json_object_set_new(props, p->name, param_schema(p));
		if (p->required)
			json_array_append_new(req, json_string(p->name));
	}
}

static json_t *input_schema(const mcp_conn *c, const tool *t)
{
	json_t *props = json_object(), *req = json_array();
	json_t *s;

	if (!c->app && props && req)
		add_params(props, req, scope_params);
	if (props && req)
		add_params(props, req, t->params);
	s = json_pack("{s:s,s:o,s:o,s:b}", "type", "object", "properties", props, "required", req,
		      "additionalProperties", 0);
	return s;
}

/* ---- the tools ------------------------------------------------------------ */

static const param search_params[] = {
	{ "query", T_STR, 1, 1, MEMD_MEMORY_TEXT_MAX, NULL,
	  "what to look for, in words (a question, a name, a topic)" },
	{ "k", T_INT, 0, 1, SEARCH_K_MAX, NULL, "how many results at most (default 10)" },
	{ "sources", T_ENUMS, 0, 0, 0, sources,
	  "what to search: memories (durable facts), events (past conversation turns); default both" },
	{ "mode", T_ENUM, 0, 0, 0, modes,
	  "keyword (BM25), vector (embeddings) or hybrid (both fused); default: memd's configured mode" },
	{ "session_id", T_STR, 0, 1, MEMD_ID_MAX, NULL, "only events of this conversation" },
	{ NULL, 0, 0, 0, 0, NULL, NULL },
};

static int32_t t_search(mcp_conn *c, const char *app, const char *user, json_t *args,
			char **ret_json, memd_error *err)
{
	static const char *const copied[] = { "query", "k", "sources", "mode", "session_id", NULL };
	char *text = body_of(args, copied);
	int32_t r;

	if (text && (c->flags & MCP_KEYWORD_ONLY) && !arg(args, "mode")) {
		/* Without the vector store: what the keyword index finds. */
		json_t *body = json_loads(text, 0, NULL);
		free(text);
		text = body && json_object_set_new(body, "mode", json_string("keyword")) == 0
			       ? json_dumps(body, JSON_COMPACT)
			       : NULL;
		json_decref(body);
	}
	if (!text)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	r = memd_search(c->m, app, user, text, ret_json, err);
	free(text);
	return r;
}

static const param context_params[] = {
	{ "session_id", T_STR, 1, 1, MEMD_ID_MAX, NULL, "the conversation (memd session id)" },
	{ "query", T_STR, 0, 1, MEMD_MEMORY_TEXT_MAX, NULL,
	  "what to recall memories for (default: the conversation's latest user message); "
	  "used when the app recalls memories into its context" },
	{ NULL, 0, 0, 0, 0, NULL, NULL },
};

static int32_t t_context(mcp_conn *c, const char *app, const char *user, json_t *args,
			 char **ret_json, memd_error *err)
{
	return memd_context_recall(c->m, app, user, arg_str(args, "session_id"), MEMD_READ_NO_TEXT,
				   arg_str(args, "query"), ret_json, err);
}

static const param sessions_params[] = {
	{ "limit", T_INT, 0, 1, MEMD_LIST_LIMIT_MAX, NULL, "sessions per page (default 50)" },
	{ "cursor", T_STR, 0, 1, MEMD_ID_MAX * 4, NULL, "next_cursor of the previous page" },
	{ NULL, 0, 0, 0, 0, NULL, NULL },
};

static int32_t t_sessions(mcp_conn *c, const char *app, const char *user, json_t *args,
			  char **ret_json, memd_error *err)
{
	memd_session_list_options o = {
		.struct_size = sizeof(o),
		.limit = (uint32_t)json_integer_value(arg(args, "limit")),
		.cursor = arg_str(args, "cursor"),
		.order = MEMD_ORDER_ACTIVITY,
	};
	return memd_session_list_filtered(c->m, app, user, &o, ret_json, err);
}

static const param add_memory_params[] = {
	{ "text", T_STR, 1, 1, MEMD_MEMORY_TEXT_MAX, NULL,
	  "the memory, one self-contained statement (\"Alice is allergic to nuts\")" },
	{ "kind", T_ENUM, 0, 0, 0, kinds,
	  "fact, preference, instruction (how to behave) or episode (something that happened); "
	  "default fact" },
	{ "topics", T_STRS, 0, 0, MEMD_MEMORY_TAGS_MAX, NULL, "topics it is about (\"food\", \"travel\")" },
	{ "entities", T_STRS, 0, 0, MEMD_MEMORY_TAGS_MAX, NULL,
	  "people, places and things it names" },
	{ "ttl_seconds", T_INT, 0, 1, MEMORY_TTL_MAX_S, NULL,
	  "forget it after this many seconds; default never" },
	{ "session_id", T_STR, 0, 1, MEMD_ID_MAX, NULL, "the conversation it comes from" },
	{ NULL, 0, 0, 0, 0, NULL, NULL },
};

static int32_t t_add(mcp_conn *c, const char *app, const char *user, json_t *args,
		     char **ret_json, memd_error *err)
{
	static const char *const copied[] = { "text", "kind", "topics", "entities", "ttl_seconds",
					      NULL };
	json_t *body = NULL;
	char *text = body_of(args, copied);
	int32_t r;

	if (text && arg(args, "session_id")) {
		/* The conversation it comes from is its source. */
		body = json_loads(text, 0, NULL);
		free(text);
		text = NULL;
		if (body && json_object_set_new(body, "source",
						json_pack("{s:O}", "session_id", arg(args, "session_id"))) == 0)
			text = json_dumps(body, JSON_COMPACT);
		json_decref(body);
	}
	if (!text)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	r = service_memory_create(c->m, app, user, text, SERVICE_ACTOR_MCP, ret_json, NULL, err);
	free(text);
	return r;
}

static const param update_params[] = {
	{ "id", T_STR, 1, 1, MEMD_ID_MAX, NULL, "the memory (its id, from search_memory or add_memory)" },
	{ "text", T_STR, 0, 1, MEMD_MEMORY_TEXT_MAX, NULL, "the new text" },
	{ "kind", T_ENUM, 0, 0, 0, kinds, "the new kind" },
	{ "topics", T_STRS, 0, 0, MEMD_MEMORY_TAGS_MAX, NULL, "the new topics (replace the old)" },
	{ "entities", T_STRS, 0, 0, MEMD_MEMORY_TAGS_MAX, NULL, "the new entities (replace the old)" },
	{ "version", T_INT, 0, 1, INT64_MAX, NULL,
	  "change it only if it is still this version (else a conflict)" },
	{ NULL, 0, 0, 0, 0, NULL, NULL },
};

static int32_t t_update(mcp_conn *c, const char *app, const char *user, json_t *args,
			char **ret_json, memd_error *err)
{
	static const char *const changes[] = { "text", "kind", "topics", "entities", NULL };
	static const char *const copied[] = { "text", "kind", "topics", "entities", "version", NULL };
	char *text;
	int any = 0;
	int32_t r;

	for (size_t i = 0; changes[i]; i++)
		any |= arg(args, changes[i]) != NULL;
	if (!any)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "nothing to change: give text, kind, topics or entities");
	if (!(text = body_of(args, copied)))
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	r = service_memory_update(c->m, app, user, arg_str(args, "id"), text, SERVICE_ACTOR_MCP,
				  ret_json, err);
	free(text);
	return r;
}

static const param delete_params[] = {
	{ "id", T_STR, 1, 1, MEMD_ID_MAX, NULL, "the memory to forget" },
	{ "version", T_INT, 0, 1, INT64_MAX, NULL,
	  "delete it only if it is still this version (else a conflict)" },
	{ NULL, 0, 0, 0, 0, NULL, NULL },
};

static int32_t t_delete(mcp_conn *c, const char *app, const char *user, json_t *args,
			char **ret_json, memd_error *err)
{
	const char *id = arg_str(args, "id");
	json_t *out;
	int32_t r = service_memory_delete(c->m, app, user, id,
					  (int64_t)json_integer_value(arg(args, "version")),
					  SERVICE_ACTOR_MCP, NULL, err);

	if (r < 0)
		return r;
	out = json_pack("{s:s,s:b}", "id", id, "deleted", 1);
	*ret_json = out ? json_dumps(out, JSON_COMPACT) : NULL;
	json_decref(out);
	return *ret_json ? 0 : memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
}

#define MEMORY_OUTPUT                                                                           \
	"{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\"},\"text\":{\"type\":"    \
	"\"string\"},\"kind\":{\"type\":\"string\"},\"topics\":{\"type\":\"array\",\"items\":{"      \
	"\"type\":\"string\"}},\"entities\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"    \
	"\"version\":{\"type\":\"integer\"}},\"required\":[\"id\",\"text\",\"kind\",\"topics\","    \
	"\"entities\",\"version\"]}"
#define DELETE_OUTPUT                                                                          \
	"{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\"},\"deleted\":{\"type\":" \
	"\"boolean\"}},\"required\":[\"id\",\"deleted\"]}"
#define SEARCH_OUTPUT                                                                         \
	"{\"type\":\"object\",\"properties\":{\"mode\":{\"type\":\"string\"},\"results\":{\"type\":" \
	"\"array\",\"items\":{\"type\":\"object\"}}},\"required\":[\"mode\",\"results\"]}"
#define CONTEXT_OUTPUT                                                                          \
	"{\"type\":\"object\",\"properties\":{\"strategy\":{\"type\":\"string\"},\"events\":{\"type\":" \
	"\"array\",\"items\":{\"type\":\"object\"}},\"tokens\":{\"type\":\"integer\"},\"memories\":"  \
	"{\"type\":\"object\",\"properties\":{\"query\":{\"type\":\"string\"},\"items\":{\"type\":"  \
	"\"array\",\"items\":{\"type\":\"object\"}}}}},\"required\":[\"strategy\",\"events\","       \
	"\"tokens\"]}"
#define SESSIONS_OUTPUT                                                                          \
	"{\"type\":\"object\",\"properties\":{\"sessions\":{\"type\":\"array\",\"items\":{\"type\":" \
	"\"object\"}},\"next_cursor\":{\"type\":[\"string\",\"null\"]}},\"required\":[\"sessions\","  \
	"\"next_cursor\"]}"

static const tool tools[] = {
	{ "search_memory", "Search memory",
	  "Search this user's memories (durable facts, preferences, instructions) and past "
	  "conversation turns. Results are best first, each with \"source\": \"memory\" "
	  "(memory_id, text, kind, topics, entities) or \"event\" (session_id, seq, role, text).",
	  MCP_SCOPE_READ, search_params, SEARCH_OUTPUT, t_search },
	{ "get_context", "Get a conversation's context",
	  "The working context of one conversation as memd's strategy keeps it: the recent "
	  "events, a summary of older ones, the token count, and, when the app recalls memories, "
	  "the memories and past turns most relevant to the latest user message (or to query).",
	  MCP_SCOPE_READ, context_params, CONTEXT_OUTPUT, t_context },
	{ "list_sessions", "List conversations",
	  "This user's conversations (memd sessions), most recently active first, a page at a "
	  "time (pass next_cursor as cursor for the next).",
	  MCP_SCOPE_READ, sessions_params, SESSIONS_OUTPUT, t_sessions },
	{ "add_memory", "Remember something",
	  "Keep a durable memory of this user: a fact, a preference, an instruction or an "
	  "episode, in one self-contained statement. Search first: when a memory says the same "
	  "or the opposite, update_memory it instead of adding another.",
	  MCP_SCOPE_WRITE, add_memory_params, MEMORY_OUTPUT, t_add },
	{ "update_memory", "Correct a memory",
	  "Change a memory (its text, kind, topics or entities) when it is wrong or outdated; "
	  "with version, only if nobody changed it since. Its history keeps every version.",
	  MCP_SCOPE_WRITE, update_params, MEMORY_OUTPUT, t_update },
	{ "delete_memory", "Forget a memory",
	  "Delete a memory the user wants forgotten or that no longer holds; with version, only "
	  "if nobody changed it since.",
	  MCP_SCOPE_WRITE, delete_params, DELETE_OUTPUT, t_delete },
};

static const tool *find_tool(const char *name)
{
	for (size_t i = 0; i < sizeof(tools) / sizeof(tools[0]); i++)
		if (strcmp(tools[i].name, name) == 0)
			return &tools[i];
	return NULL;
}

json_t *mcp_tools_list(const mcp_conn *c)
{
	json_t *list = json_array();
	int structured = mcp_version_structured(c->version);

	for (size_t i = 0; list && i < sizeof(tools) / sizeof(tools[0]); i++) {
		const tool *t = &tools[i];
		json_t *o;
		if (t->scope > c->scope)
			continue;
		o = json_pack("{s:s,s:s,s:o,s:{s:b,s:b}}", "name", t->name, "description", t->description,
			      "inputSchema", input_schema(c, t), "annotations", "readOnlyHint",
			      t->scope == MCP_SCOPE_READ, "openWorldHint", 0);
		if (!o) {
			json_decref(list);
			return NULL;
		}
		if (structured) {
			json_object_set_new(o, "title", json_string(t->title));
			if (t->output_schema)
				json_object_set_new(o, "outputSchema", json_loads(t->output_schema, 0, NULL));
		}
		json_array_append_new(list, o);
	}
	return list ? json_pack("{s:o}", "tools", list) : NULL;
}

/* A tool result whose content is one text. */
static json_t *text_result(const char *text, int is_error)
{
	json_t *r = json_pack("{s:[{s:s,s:s}]}", "content", "type", "text", "text", text);
	if (r && is_error)
		json_object_set_new(r, "isError", json_true());
	return r;
}

static json_t *error_result(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static json_t *error_result(const char *fmt, ...)
{
	char text[MSG_MAX + MEMD_ERROR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	return text_result(text, 1);
}

int32_t mcp_tools_call(mcp_conn *c, const char *name, json_t *args, json_t **ret_result,
		       char *msg, size_t cap)
{
	const tool *t = find_tool(name);
	memd_error err = { .struct_size = sizeof(err) };
	const char *app, *user;
	char problem[MSG_MAX];
	char *out = NULL;
	json_t *r;
	int32_t rc;

	if (!t || t->scope > c->scope) {
		snprintf(msg, cap, "unknown tool: %.128s%s", name,
			 t ? " (this API key may only read: its tools are search_memory, get_context "
			     "and list_sessions)"
			   : "");
		return MCP_INVALID_PARAMS;
	}
	if (check_args(c, t, args, &app, &user, problem, sizeof(problem)) < 0) {
		/* Bad arguments are the tool's error, so that the model sees
		 * what to correct. */
		r = error_result("%s: %s", t->name, problem);
		goto out;
	}
	rc = t->fn(c, app, user, args, &out, &err);
	if (rc < 0) {
		const char *code = errname(rc);
		if (rc == MEMD_ENOMEM)
			return rc;
		r = error_result("%s failed: %s: %s%s", t->name, code ? code : "error", err.msg,
				 err.flags & MEMD_ERROR_RETRYABLE ? " (retryable: try again later)" : "");
		goto out;
	}
	r = text_result(out, 0);
	if (r && t->output_schema && mcp_version_structured(c->version)) {
		json_t *sc = json_loads(out, 0, NULL);
		if (!sc) {
			json_decref(r);
			r = NULL;
		} else {
			json_object_set_new(r, "structuredContent", sc);
		}
	}
	memd_free(out);
out:
	if (!r)
		return MEMD_ENOMEM;
	*ret_result = r;
	return 0;
}
