/* SPDX-License-Identifier: MIT */
#include "json/openai_msgs.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json/event_json.h"

/* Room for a field's path in messages ("messages[12].tool_calls[3].function.name"). */
#define PATH_MAX_LEN 128

/* The hints kept in metadata "openai" (OM_META_KEY). */
#define HINT_ROLE "role"       /* "developer" or "function": roles memd folds */
#define HINT_CONTENT "content" /* "parts" | "absent": a content not in its usual form */
#define HINT_NAME "name"       /* true: the author is the message's name */
#define HINT_REFUSAL "refusal" /* true: the last refusal part is the message's refusal */
#define HINT_KEEP "keep"       /* members with no event form, as sent */
#define HINT_ANNOTATIONS "annotations" /* a response's, as sent; not given back */

/* The member a content part may carry beside its kind's, kept in the
 * memd part as sent: where a prompt cache may break. */
#define PART_EXTRA "prompt_cache_breakpoint"

#define CONTENT_PARTS "parts"
#define CONTENT_ABSENT "absent"

/* ---- the roles ------------------------------------------------------------- */

/* Content part kinds, as bits. */
#define K_TEXT 0x1u
#define K_IMAGE 0x2u
#define K_AUDIO 0x4u
#define K_FILE 0x8u
#define K_REFUSAL 0x10u

typedef struct part_kind {
	const char *type;  /* the OpenAI part's "type", and its inner member */
	uint32_t bit;
} part_kind;

static const part_kind part_kinds[] = {
	{ "text", K_TEXT },
	{ "image_url", K_IMAGE },
	{ "input_audio", K_AUDIO },
	{ "file", K_FILE },
	{ "refusal", K_REFUSAL },
	{ NULL, 0 },
};

typedef struct role_info {
	const char *role;          /* the message's */
	const char *event_role;    /* the event's */
	const char *const *fields; /* members a message of the role may have */
	uint32_t kinds;            /* content part kinds it may carry */
	const char *kinds_text;    /* the same, for messages */
} role_info;

static const char *const system_fields[] = { "role", "content", "name", "id", NULL };
static const char *const assistant_fields[] = { "role",     "content",       "name",  "refusal",
						"tool_calls", "function_call", "audio", "annotations",
						"id",       NULL };
static const char *const tool_fields[] = { "role", "content", "tool_call_id", "id", NULL };

static const role_info roles[] = {
	{ "system", "system", system_fields, K_TEXT, "text" },
	{ "developer", "system", system_fields, K_TEXT, "text" },
	{ "user", "user", system_fields, K_TEXT | K_IMAGE | K_AUDIO | K_FILE,
	  "text, image_url, input_audio, file" },
	{ "assistant", "assistant", assistant_fields, K_TEXT | K_REFUSAL, "text, refusal" },
	{ "tool", "tool", tool_fields, K_TEXT, "text" },
	{ "function", "tool", system_fields, 0, "" },
	{ NULL, NULL, NULL, 0, NULL },
};

static int in_list(const char *s, const char *const *list)
{
	for (size_t i = 0; list[i]; i++)
		if (strcmp(s, list[i]) == 0)
			return 1;
	return 0;
}

/* ---- messages to events ------------------------------------------------------ */

/* What one message's conversion builds. */
typedef struct conv {
	size_t index;
	memd_error *err;
	json_t *parts; /* the event's content parts */
	json_t *hints; /* metadata "openai" */
	json_t *keep;  /* hints "keep" */
} conv;

static int32_t bad(conv *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* MEMD_EINVAL "messages[<index>]<fmt>". */
static int32_t bad(conv *c, const char *fmt, ...)
{
	char what[PATH_MAX_LEN * 2];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return memd_error_set(c->err, MEMD_EINVAL, 0, "messages[%zu]%s", c->index, what);
}

static int32_t oom(conv *c)
{
	return memd_error_set(c->err, MEMD_ENOMEM, 0, "out of memory");
}

/* Append a new part (consumed) to c->parts. */
static int32_t add_part(conv *c, json_t *part)
{
	if (!part || json_array_append_new(c->parts, part) < 0)
		return oom(c);
	return 0;
}

static int32_t set_hint(conv *c, const char *key, json_t *v)
{
	if (!v || json_object_set_new(c->hints, key, v) < 0)
		return oom(c);
	return 0;
}

/* Keep member key of msg as sent. */
static int32_t keep_member(conv *c, json_t *msg, const char *key)
{
	if (json_object_set(c->keep, key, json_object_get(msg, key)) < 0)
		return oom(c);
	return 0;
}

/* Every member of o is in allowed, else MEMD_EINVAL "<path>: unknown field". */
static int32_t known_fields(conv *c, json_t *o, const char *path, const char *const *allowed)
{
	const char *key;
	json_t *v;
	json_object_foreach(o, key, v) {
		if (!in_list(key, allowed))
			return bad(c, "%s: unknown field '%.64s'", path, key);
	}
	return 0;
}

/* Member key of o must be a string (required or not); *ret borrowed or NULL. */
static int32_t string_member(conv *c, json_t *o, const char *path, const char *key, int required,
			     const char **ret)
{
	json_t *v = json_object_get(o, key);
	*ret = NULL;
	if (!v) {
		if (required)
			return bad(c, "%s.%s: required", path, key);
		return 0;
	}
	if (!json_is_string(v))
		return bad(c, "%s.%s: must be a string", path, key);
	*ret = json_string_value(v);
	return 0;
}

/* Check an inner object of a part ("image_url": {...}): an object whose
 * members named in strings are strings (those in required present). */
static int32_t inner_object(conv *c, json_t *o, const char *path, const char *const *strings,
			    const char *const *required)
{
	const char *s;
	int32_t r;
	if (!json_is_object(o))
		return bad(c, "%s: must be an object", path);
	for (size_t i = 0; strings[i]; i++)
		if ((r = string_member(c, o, path, strings[i], in_list(strings[i], required), &s)) < 0)
			return r;
	return 0;
}

static const char *const no_names[] = { NULL };
static const char *const image_strings[] = { "url", "detail", NULL };
static const char *const image_required[] = { "url", NULL };
static const char *const audio_strings[] = { "data", "format", NULL };
static const char *const file_strings[] = { "file_data", "file_id", "filename", NULL };

/* One content part (at path) of a message of role ri, as a memd part
 * added to c->parts; *ret_bit is its kind. */
static int32_t content_part(conv *c, const role_info *ri, json_t *p, const char *path,
			    uint32_t *ret_bit)
{
	const char *type;
	const part_kind *k;
	json_t *inner;
	char ipath[PATH_MAX_LEN];
	const char *allowed[4] = { "type", NULL, NULL, NULL };
	json_t *part, *extra;
	int32_t r;

	if (!json_is_object(p))
		return bad(c, "%s: must be an object", path);
	if ((r = string_member(c, p, path, "type", 1, &type)) < 0)
		return r;
	for (k = part_kinds; k->type && strcmp(k->type, type) != 0; k++)
		;
	if (!k->type || !(k->bit & ri->kinds))
		return bad(c, "%s.type: '%.32s' is not a content part of a %s message (%s)", path, type,
			   ri->role, ri->kinds_text);
	allowed[1] = k->type;
	if (k->bit != K_REFUSAL)
		allowed[2] = PART_EXTRA;
	if ((r = known_fields(c, p, path, allowed)) < 0)
		return r;
	extra = json_object_get(p, PART_EXTRA);
	if (extra && !json_is_object(extra))
		return bad(c, "%s.%s: must be an object", path, PART_EXTRA);
	inner = json_object_get(p, k->type);
	snprintf(ipath, sizeof(ipath), "%s.%s", path, k->type);
	if (!inner)
		return bad(c, "%s: required", ipath);
	switch (k->bit) {
	case K_TEXT:
	case K_REFUSAL:
		if (!json_is_string(inner))
			return bad(c, "%s: must be a string", ipath);
		break;
	case K_IMAGE:
		r = inner_object(c, inner, ipath, image_strings, image_required);
		break;
	case K_AUDIO:
		r = inner_object(c, inner, ipath, audio_strings, audio_strings);
		break;
	default:
		r = inner_object(c, inner, ipath, file_strings, no_names);
		break;
	}
	if (r < 0)
		return r;
	*ret_bit = k->bit;
	part = json_pack("{s:O}", k->type, inner);
	if (part && extra && json_object_set(part, PART_EXTRA, extra) < 0) {
		json_decref(part);
		part = NULL;
	}
	return add_part(c, part);
}

/* The message's content as parts. The hint says when the form it was sent
 * in is not the one its parts give back (one text part: a string; none:
 * null for an assistant, "" for the others; else parts). */
static int32_t content(conv *c, const role_info *ri, json_t *msg)
{
	json_t *v = json_object_get(msg, "content"), *p;
	int assistant = strcmp(ri->role, "assistant") == 0;
	char path[PATH_MAX_LEN];
	uint32_t bit = 0;
	size_t i;
	int32_t r;

	if (!v) {
		if (!assistant)
			return bad(c, ".content: required");
		return set_hint(c, HINT_CONTENT, json_string(CONTENT_ABSENT));
	}
	if (json_is_null(v)) {
		if (!assistant)
			return bad(c, ".content: must be a string or an array of content parts");
		return 0;
	}
	if (json_is_string(v))
		return add_part(c, json_pack("{s:O}", "text", v));
	if (!json_is_array(v))
		return bad(c, ".content: must be a string%s or an array of content parts",
			   assistant ? ", null" : "");
	json_array_foreach(v, i, p) {
		snprintf(path, sizeof(path), ".content[%zu]", i);
		if ((r = content_part(c, ri, p, path, &bit)) < 0)
			return r;
	}
	if (json_array_size(v) == 0 || (json_array_size(v) == 1 && bit == K_TEXT))
		return set_hint(c, HINT_CONTENT, json_string(CONTENT_PARTS));
	return 0;
}

static const char *const call_fields[] = { "id", "type", "function", "custom", NULL };
static const char *const function_fields[] = { "name", "arguments", NULL };
static const char *const custom_fields[] = { "name", "input", NULL };

/* A call's arguments as a tool_call part's members: "args", the object
 * they are, when they parse as one; "arguments", the text as sent, when
 * they do not or when the object does not print back as that very text. */
static int32_t call_args(conv *c, json_t *call, const char *arguments)
{
	json_t *args = json_loads(arguments, JSON_DECODE_ANY, NULL);
	char *back = NULL;
	int32_t r = 0;

	if (json_is_object(args)) {
		if (json_object_set(call, "args", args) < 0 || !(back = ej_dump(args)))
			r = oom(c);
	}
	if (r == 0 && (!back || strcmp(back, arguments) != 0) &&
	    json_object_set_new(call, "arguments", json_string(arguments)) < 0)
		r = oom(c);
	free(back);
	json_decref(args);
	return r;
}

/* One of tool_calls (at path) as a tool_call part. */
static int32_t tool_call(conv *c, json_t *tc, const char *path)
{
	const char *id, *type, *name, *text;
	json_t *fn, *call;
	char fpath[PATH_MAX_LEN + sizeof(".function")];
	int custom;
	int32_t r;

	if (!json_is_object(tc))
		return bad(c, "%s: must be an object", path);
	if ((r = known_fields(c, tc, path, call_fields)) < 0 ||
	    (r = string_member(c, tc, path, "id", 1, &id)) < 0 ||
	    (r = string_member(c, tc, path, "type", 1, &type)) < 0)
		return r;
	if (!*id)
		return bad(c, "%s.id: must not be empty", path);
	if (strcmp(type, "function") != 0 && strcmp(type, "custom") != 0)
		return bad(c, "%s.type: must be \"function\" or \"custom\"", path);
	custom = strcmp(type, "custom") == 0;
	snprintf(fpath, sizeof(fpath), "%s.%s", path, type);
	fn = json_object_get(tc, type);
	if (json_object_get(tc, custom ? "function" : "custom"))
		return bad(c, "%s.%s: not with type \"%s\"", path, custom ? "function" : "custom", type);
	if (!fn)
		return bad(c, "%s: required", fpath);
	if (!json_is_object(fn))
		return bad(c, "%s: must be an object", fpath);
	if ((r = known_fields(c, fn, fpath, custom ? custom_fields : function_fields)) < 0 ||
	    (r = string_member(c, fn, fpath, "name", 1, &name)) < 0 ||
	    (r = string_member(c, fn, fpath, custom ? "input" : "arguments", 1, &text)) < 0)
		return r;
	call = json_pack("{s:s,s:s}", "id", id, "name", name);
	if (!call)
		return oom(c);
	if (custom)
		r = json_object_set_new(call, "input", json_string(text)) < 0 ? oom(c) : 0;
	else
		r = call_args(c, call, text);
	if (r < 0) {
		json_decref(call);
		return r;
	}
	return add_part(c, json_pack("{s:o}", "tool_call", call));
}

/* The assistant's members beyond content: refusal, tool_calls,
 * function_call (legacy: a tool_call part without an id), audio (kept as
 * sent) and a response's annotations (kept in the event only). Members
 * sent as null are kept as null. */
static int32_t assistant_members(conv *c, json_t *msg)
{
	json_t *v, *tc;
	char path[PATH_MAX_LEN];
	size_t i;
	int32_t r;

	v = json_object_get(msg, "refusal");
	if (json_is_string(v)) {
		if ((r = add_part(c, json_pack("{s:O}", "refusal", v))) < 0 ||
		    (r = set_hint(c, HINT_REFUSAL, json_true())) < 0)
			return r;
	} else if (json_is_null(v)) {
		if ((r = keep_member(c, msg, "refusal")) < 0)
			return r;
	} else if (v) {
		return bad(c, ".refusal: must be a string or null");
	}

	v = json_object_get(msg, "tool_calls");
	if (json_is_array(v) && json_array_size(v) > 0) {
		json_array_foreach(v, i, tc) {
			snprintf(path, sizeof(path), ".tool_calls[%zu]", i);
			if ((r = tool_call(c, tc, path)) < 0)
				return r;
			for (size_t j = 0; j < i; j++)
				if (json_equal(json_object_get(tc, "id"),
					       json_object_get(json_array_get(v, j), "id")))
					return bad(c, ".tool_calls[%zu].id: repeats tool_calls[%zu].id", i, j);
		}
	} else if (json_is_null(v) || json_is_array(v)) {
		if ((r = keep_member(c, msg, "tool_calls")) < 0)
			return r;
	} else if (v) {
		return bad(c, ".tool_calls: must be an array");
	}

	v = json_object_get(msg, "function_call");
	if (json_is_object(v)) {
		const char *name, *args;
		json_t *call;
		if ((r = known_fields(c, v, ".function_call", function_fields)) < 0 ||
		    (r = string_member(c, v, ".function_call", "name", 1, &name)) < 0 ||
		    (r = string_member(c, v, ".function_call", "arguments", 1, &args)) < 0)
			return r;
		if (!(call = json_pack("{s:s}", "name", name)))
			return oom(c);
		if ((r = call_args(c, call, args)) < 0) {
			json_decref(call);
			return r;
		}
		if ((r = add_part(c, json_pack("{s:o}", "tool_call", call))) < 0)
			return r;
	} else if (json_is_null(v)) {
		if ((r = keep_member(c, msg, "function_call")) < 0)
			return r;
	} else if (v) {
		return bad(c, ".function_call: must be an object or null");
	}

	v = json_object_get(msg, "audio");
	if (json_is_object(v)) {
		const char *id;
		const char *const audio_fields[] = { "id", NULL };
		if ((r = known_fields(c, v, ".audio", audio_fields)) < 0 ||
		    (r = string_member(c, v, ".audio", "id", 1, &id)) < 0)
			return r;
	} else if (v && !json_is_null(v)) {
		return bad(c, ".audio: must be an object or null");
	}
	if (v && (r = keep_member(c, msg, "audio")) < 0)
		return r;

	/* A response's annotations (url citations) are no request member:
	 * kept in the event, never given back in a message. */
	v = json_object_get(msg, "annotations");
	if (v && !json_is_array(v) && !json_is_null(v))
		return bad(c, ".annotations: must be an array or null");
	if (v && (r = set_hint(c, HINT_ANNOTATIONS, json_incref(v))) < 0)
		return r;
	return 0;
}

/* A tool message's (or a legacy function message's) content, as the
 * tool_result part's "content": the string, or the text parts. */
static int32_t result_content(conv *c, const role_info *ri, json_t *msg, json_t *result)
{
	json_t *v = json_object_get(msg, "content"), *p, *list;
	int function = strcmp(ri->role, "function") == 0;
	char path[PATH_MAX_LEN];
	size_t i;
	int32_t r;

	if (!v)
		return bad(c, ".content: required");
	if (json_is_string(v) || (function && json_is_null(v)))
		return json_object_set(result, "content", v) < 0 ? oom(c) : 0;
	if (function || !json_is_array(v))
		return bad(c, ".content: must be a string%s", function ? " or null"
								  : " or an array of text parts");
	/* The parts go through content_part into c->parts, then move. */
	json_array_foreach(v, i, p) {
		uint32_t bit;
		snprintf(path, sizeof(path), ".content[%zu]", i);
		if ((r = content_part(c, ri, p, path, &bit)) < 0)
			return r;
	}
	list = c->parts;
	c->parts = json_array();
	if (!c->parts || json_object_set_new(result, "content", list) < 0)
		return oom(c);
	return 0;
}

/* One message as one event object into *ret. */
static int32_t message_to_event(json_t *msg, size_t index, json_t **ret, memd_error *err)
{
	conv c = { .index = index, .err = err };
	const role_info *ri;
	const char *role, *name = NULL, *id = NULL;
	json_t *ev = NULL;
	char what[PATH_MAX_LEN];
	int32_t r;

	if (!json_is_object(msg))
		return bad(&c, ": must be an object");
	if ((r = string_member(&c, msg, "", "role", 1, &role)) < 0)
		return r;
	for (ri = roles; ri->role && strcmp(ri->role, role) != 0; ri++)
		;
	if (!ri->role)
		return bad(&c, ".role: must be system, developer, user, assistant, tool or function");
	if ((r = known_fields(&c, msg, "", ri->fields)) < 0)
		return r;
	if ((r = string_member(&c, msg, "", "id", 0, &id)) < 0)
		return r;
	if (id) {
		snprintf(what, sizeof(what), "messages[%zu].id", index);
		if ((r = ej_check_id(id, what, err)) < 0)
			return r;
	}
	if (strcmp(ri->role, "tool") != 0) {
		if ((r = string_member(&c, msg, "", "name", strcmp(ri->role, "function") == 0, &name)) < 0)
			return r;
		if (name) {
			snprintf(what, sizeof(what), "messages[%zu].name", index);
			if ((r = ej_check_id(name, what, err)) < 0)
				return r;
		}
	}

	c.parts = json_array();
	c.hints = json_object();
	c.keep = json_object();
	if (!c.parts || !c.hints || !c.keep) {
		r = oom(&c);
		goto out;
	}
	if (strcmp(ri->event_role, "tool") == 0) {
		const char *tcid = NULL;
		json_t *result = json_object();
		if (!result) {
			r = oom(&c);
			goto out;
		}
		if (name) {
			r = json_object_set_new(result, "name", json_string(name)) < 0 ? oom(&c) : 0;
			if (r == 0)
				r = set_hint(&c, HINT_ROLE, json_string(ri->role));
		} else if ((r = string_member(&c, msg, "", "tool_call_id", 1, &tcid)) == 0) {
			if (!*tcid)
				r = bad(&c, ".tool_call_id: must not be empty");
			else if (json_object_set_new(result, "id", json_string(tcid)) < 0)
				r = oom(&c);
		}
		if (r == 0)
			r = result_content(&c, ri, msg, result);
		if (r < 0) {
			json_decref(result);
			goto out;
		}
		if ((r = add_part(&c, json_pack("{s:o}", "tool_result", result))) < 0)
			goto out;
		name = NULL; /* the function's name is the result's, not a hint */
	} else {
		if ((r = content(&c, ri, msg)) < 0)
			goto out;
		if (strcmp(ri->role, "assistant") == 0 && (r = assistant_members(&c, msg)) < 0)
			goto out;
		if (strcmp(ri->role, "developer") == 0 &&
		    (r = set_hint(&c, HINT_ROLE, json_string(ri->role))) < 0)
			goto out;
	}
	if (name && (r = set_hint(&c, HINT_NAME, json_true())) < 0)
		goto out;
	if (json_object_size(c.keep) && (r = set_hint(&c, HINT_KEEP, json_incref(c.keep))) < 0)
		goto out;

	ev = json_pack("{s:s,s:{s:O}}", "role", ri->event_role, "content", "parts", c.parts);
	if (!ev || (id && json_object_set_new(ev, "id", json_string(id)) < 0) ||
	    (name && json_object_set_new(ev, "author", json_string(name)) < 0) ||
	    (json_object_size(c.hints) &&
	     json_object_set_new(ev, "metadata", json_pack("{s:O}", OM_META_KEY, c.hints)) < 0)) {
		r = oom(&c);
		goto out;
	}
	*ret = ev;
	ev = NULL;
	r = 0;
out:
	json_decref(ev);
	json_decref(c.parts);
	json_decref(c.hints);
	json_decref(c.keep);
	return r;
}

int32_t om_messages_to_events(json_t *messages, json_t **ret_events, memd_error *err)
{
	json_t *events, *msg, *ev = NULL;
	size_t i;
	int32_t r;

	if (!json_is_array(messages))
		return memd_error_set(err, MEMD_EINVAL, 0, "messages: must be an array");
	if (!(events = json_array()))
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	json_array_foreach(messages, i, msg) {
		json_t *id = json_object_get(msg, "id");
		if ((r = message_to_event(msg, i, &ev, err)) < 0) {
			json_decref(events);
			return r;
		}
		for (size_t j = 0; id && j < i; j++)
			if (json_equal(id, json_object_get(json_array_get(messages, j), "id"))) {
				json_decref(ev);
				json_decref(events);
				return memd_error_set(err, MEMD_EINVAL, 0,
						      "messages[%zu].id: repeats messages[%zu].id", i, j);
			}
		if (json_array_append_new(events, ev) < 0) {
			json_decref(events);
			return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
		}
	}
	*ret_events = events;
	return 0;
}

/* ---- events to messages ---------------------------------------------------- */

/* What the mapping of a list of events keeps between events. */
typedef struct emit {
	json_t *out;
	uint32_t flags;
	json_t *calls;      /* tool call ids seen in the messages so far */
	int function_call;  /* a legacy function_call was seen */
	size_t emitted;     /* messages the current event gave */
	size_t dropped;     /* its messages left out */
} emit;

/* Add msg (consumed) to the output. */
static int32_t put_msg(emit *e, json_t *msg)
{
	if (!msg || json_array_append_new(e->out, msg) < 0)
		return MEMD_ENOMEM;
	e->emitted++;
	return 0;
}

/* A kind's bit for a memd part (the member it holds), or 0. */
static uint32_t part_bit(json_t *part, json_t **ret_inner)
{
	for (const part_kind *k = part_kinds; k->type; k++) {
		json_t *v = json_object_get(part, k->type);
		if (v) {
			*ret_inner = v;
			return k->bit;
		}
	}
	return 0;
}

/* A memd part (part; kind bit, inner value v) as an OpenAI content part. */
static json_t *openai_part(json_t *part, uint32_t bit, json_t *v)
{
	json_t *extra = json_object_get(part, PART_EXTRA), *o;
	for (const part_kind *k = part_kinds; k->type; k++) {
		if (k->bit != bit)
			continue;
		o = json_pack("{s:s,s:O}", "type", k->type, k->type, v);
		if (o && json_is_object(extra) && bit != K_REFUSAL &&
		    json_object_set(o, PART_EXTRA, extra) < 0) {
			json_decref(o);
			o = NULL;
		}
		return o;
	}
	return NULL;
}

/* The content of a message of role ri from parts (kinds ri->kinds, but
 * the refusal part at skip, if any), in the form hint names, else one text
 * part as a string, none as null (assistant) or "", more as parts.
 * *ret_content is NULL for "absent". MEMD_ENOMEM. */
static int32_t message_content(const role_info *ri, json_t *parts, json_t *skip,
			       const char *hint, json_t **ret_content, size_t *ret_n)
{
	json_t *list = json_array(), *part, *inner = NULL, *one = NULL;
	uint32_t one_bit = 0;
	size_t i;

	if (!list)
		return MEMD_ENOMEM;
	json_array_foreach(parts, i, part) {
		uint32_t bit = json_is_object(part) ? part_bit(part, &inner) : 0;
		if (!(bit & ri->kinds) || part == skip)
			continue;
		if (bit & (K_TEXT | K_REFUSAL) && !json_is_string(inner))
			continue;
		if (json_array_append_new(list, openai_part(part, bit, inner)) < 0) {
			json_decref(list);
			return MEMD_ENOMEM;
		}
		one = inner;
		one_bit = bit;
	}
	*ret_n = json_array_size(list);
	if (hint && strcmp(hint, CONTENT_ABSENT) == 0) {
		json_decref(list);
		*ret_content = NULL;
		return 0;
	}
	if (hint && strcmp(hint, CONTENT_PARTS) == 0) {
		*ret_content = list;
		return 0;
	}
	if (*ret_n == 1 && one_bit == K_TEXT) {
		json_decref(list);
		*ret_content = json_incref(one);
	} else if (*ret_n == 0) {
		json_decref(list);
		*ret_content = strcmp(ri->role, "assistant") == 0 ? json_null() : json_string("");
	} else {
		*ret_content = list;
	}
	return *ret_content ? 0 : MEMD_ENOMEM;
}

static const role_info *role_named(const char *role)
{
	const role_info *ri;
	for (ri = roles; ri->role && strcmp(ri->role, role) != 0; ri++)
		;
	return ri->role ? ri : NULL;
}

/* A tool_call part's arguments as the text a call carries. */
static json_t *call_arguments(json_t *call)
{
	json_t *text = json_object_get(call, "arguments"), *args = json_object_get(call, "args");
	char *dump;
	json_t *v;

	if (json_is_string(text))
		return json_incref(text);
	if (!args)
		return json_string("{}");
	if (!(dump = ej_dump(args)))
		return NULL;
	v = json_string(dump);
	free(dump);
	return v;
}

/* A tool_call part (with an id) as one of tool_calls. */
static json_t *openai_tool_call(json_t *call, json_t *id)
{
	json_t *name = json_object_get(call, "name"), *input = json_object_get(call, "input");
	if (!json_is_string(name))
		name = json_string("");
	else
		json_incref(name);
	if (json_is_string(input))
		return json_pack("{s:O,s:s,s:{s:o,s:O}}", "id", id, "type", "custom", "custom", "name",
				 name, "input", input);
	return json_pack("{s:O,s:s,s:{s:o,s:o}}", "id", id, "type", "function", "function", "name",
			 name, "arguments", call_arguments(call));
}

/* A tool_result part as a tool message (a function message with the
 * hint), or nothing when it answers no call it can name. */
static int32_t result_message(emit *e, json_t *result, int function)
{
	json_t *id = json_object_get(result, "id"), *name = json_object_get(result, "name");
	json_t *c = json_object_get(result, "content"), *msg, *content;

	if (!c)
		c = json_object_get(result, "result");
	if (function ? !json_is_string(name) : !json_is_string(id))
		return 0;
	if (e->flags & OM_DROP_ORPHAN_RESULTS &&
	    (function ? !e->function_call : !json_object_get(e->calls, json_string_value(id)))) {
		e->dropped++;
		return 0;
	}
	if (json_is_string(c) || (function && json_is_null(c))) {
		content = json_incref(c);
	} else if (json_is_array(c) && !function) {
		json_t *p;
		size_t i;
		if (!(content = json_array()))
			return MEMD_ENOMEM;
		json_array_foreach(c, i, p) {
			json_t *t = json_object_get(p, "text");
			if (json_is_string(t) &&
			    json_array_append_new(content, openai_part(p, K_TEXT, t)) < 0) {
				json_decref(content);
				return MEMD_ENOMEM;
			}
		}
	} else if (!c) {
		content = function ? json_null() : json_string("");
	} else {
		char *dump = ej_dump(c);
		content = dump ? json_string(dump) : NULL;
		free(dump);
	}
	if (!content)
		return MEMD_ENOMEM;
	if (function)
		msg = json_pack("{s:s,s:O,s:o}", "role", "function", "name", name, "content", content);
	else
		msg = json_pack("{s:s,s:o,s:O}", "role", "tool", "content", content, "tool_call_id", id);
	return put_msg(e, msg);
}

/* The tool_result parts of parts as tool messages. */
static int32_t results(emit *e, json_t *parts, int function)
{
	json_t *part, *res;
	size_t i;
	int32_t r;
	json_array_foreach(parts, i, part) {
		if (json_is_object(res = json_object_get(part, "tool_result")) &&
		    (r = result_message(e, res, function)) < 0)
			return r;
	}
	return 0;
}

/* The summary event ev as a system message saying what it covers. */
static int32_t summary_message(emit *e, json_t *ev)
{
	memd_error err = { 0 };
	char *text = ej_content_text(json_object_get(ev, "content"), &err), *s;
	const char *at = json_string_value(json_object_get(ev, "timestamp"));
	json_int_t covers = json_integer_value(json_object_get(ev, "covers_seq"));
	int n;
	int32_t r;

	if (!text)
		return err.code == MEMD_ENOMEM ? MEMD_ENOMEM : MEMD_EINVAL;
	n = snprintf(NULL, 0, "Summary of the conversation up to %s (events 1..%lld):\n%s",
		     at ? at : "now", (long long)covers, text);
	s = n >= 0 ? malloc((size_t)n + 1) : NULL;
	if (!s) {
		free(text);
		return MEMD_ENOMEM;
	}
	snprintf(s, (size_t)n + 1, "Summary of the conversation up to %s (events 1..%lld):\n%s",
		 at ? at : "now", (long long)covers, text);
	r = put_msg(e, json_pack("{s:s,s:s}", "role", "system", "content", s));
	free(s);
	free(text);
	return r;
}

/* An assistant event's message: content, refusal, tool_calls,
 * function_call and the members kept as sent. */
static int32_t assistant_message(emit *e, const role_info *ri, json_t *ev, json_t *parts,
				 json_t *hints)
{
	json_t *msg, *content, *calls, *part, *call, *skip = NULL, *kept, *v;
	const char *key;
	size_t i, n;
	int32_t r;

	/* The message's refusal, when it had one, is the last refusal part. */
	if (json_is_true(json_object_get(hints, HINT_REFUSAL)))
		json_array_foreach(parts, i, part)
			if (json_is_string(json_object_get(part, "refusal")))
				skip = part;
	if ((r = message_content(ri, parts, skip,
				 json_string_value(json_object_get(hints, HINT_CONTENT)), &content,
				 &n)) < 0)
		return r;
	msg = json_pack("{s:s}", "role", "assistant");
	calls = json_array();
	if (!msg || !calls || (content && json_object_set_new(msg, "content", content) < 0))
		goto oom;
	content = NULL;
	if (skip && json_object_set(msg, "refusal", json_object_get(skip, "refusal")) < 0)
		goto oom;
	json_array_foreach(parts, i, part) {
		json_t *id;
		if (!json_is_object(call = json_object_get(part, "tool_call")))
			continue;
		id = json_object_get(call, "id");
		if (json_is_string(id)) {
			if (json_array_append_new(calls, openai_tool_call(call, id)) < 0 ||
			    json_object_set_new(e->calls, json_string_value(id), json_true()) < 0)
				goto oom;
		} else if (!json_object_get(msg, "function_call")) {
			json_t *name = json_object_get(call, "name");
			json_t *fc = json_pack("{s:s,s:o}", "name",
					       json_is_string(name) ? json_string_value(name) : "",
					       "arguments", call_arguments(call));
			if (json_object_set_new(msg, "function_call", fc) < 0)
				goto oom;
			e->function_call = 1;
		}
	}
	if (json_array_size(calls) && json_object_set(msg, "tool_calls", calls) < 0)
		goto oom;
	kept = json_object_get(hints, HINT_KEEP);
	json_object_foreach(kept, key, v) {
		if (json_object_set(msg, key, v) < 0)
			goto oom;
	}
	if (json_is_true(json_object_get(hints, HINT_NAME)) &&
	    json_object_set(msg, "name", json_object_get(ev, "author")) < 0)
		goto oom;
	json_decref(calls);
	return put_msg(e, msg);
oom:
	json_decref(content);
	json_decref(calls);
	json_decref(msg);
	return MEMD_ENOMEM;
}

/* One event's messages. */
static int32_t event_messages(emit *e, json_t *ev)
{
	const char *role = json_string_value(json_object_get(ev, "role"));
	json_t *parts = json_object_get(json_object_get(ev, "content"), "parts");
	json_t *hints = json_object_get(json_object_get(ev, "metadata"), OM_META_KEY);
	const char *hint_role = json_string_value(json_object_get(hints, HINT_ROLE));
	const role_info *ri;
	json_t *content, *msg;
	size_t n;
	int32_t r;

	if (!role)
		return MEMD_EINVAL;
	if (strcmp(role, "summary") == 0)
		return summary_message(e, ev);
	if (!json_is_array(parts))
		return MEMD_EINVAL;
	if (!json_is_object(hints))
		hints = NULL;
	if (strcmp(role, "tool") == 0)
		return results(e, parts, hint_role && strcmp(hint_role, "function") == 0);
	if (strcmp(role, "assistant") == 0) {
		if ((r = assistant_message(e, role_named("assistant"), ev, parts, hints)) < 0)
			return r;
		return results(e, parts, 0);
	}
	if (strcmp(role, "system") == 0)
		ri = role_named(hint_role && strcmp(hint_role, "developer") == 0 ? "developer"
										 : "system");
	else if (strcmp(role, "user") == 0)
		ri = role_named("user");
	else
		return 0; /* a role memd does not know: nothing a chat endpoint takes */
	/* Tool results a user event holds answer calls made before it. */
	if ((r = results(e, parts, 0)) < 0)
		return r;
	if ((r = message_content(ri, parts, NULL,
				 json_string_value(json_object_get(hints, HINT_CONTENT)), &content,
				 &n)) < 0)
		return r;
	if (n == 0 && !hints && (e->emitted || e->dropped)) {
		json_decref(content); /* only tool results */
		return 0;
	}
	msg = json_pack("{s:s,s:o}", "role", ri->role, "content", content ? content : json_string(""));
	if (msg && json_is_true(json_object_get(hints, HINT_NAME)) &&
	    json_object_set(msg, "name", json_object_get(ev, "author")) < 0) {
		json_decref(msg);
		return MEMD_ENOMEM;
	}
	return put_msg(e, msg);
}

int32_t om_events_to_messages(json_t *events, uint32_t flags, json_t *out,
			      int64_t *ret_dropped_tokens, memd_error *err)
{
	emit e = { .out = out, .flags = flags };
	json_t *ev;
	int64_t dropped_tokens = 0;
	size_t i;
	int32_t r = 0;

	if (!(e.calls = json_object()))
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	json_array_foreach(events, i, ev) {
		e.emitted = e.dropped = 0;
		if ((r = event_messages(&e, ev)) < 0) {
			if (r == MEMD_ENOMEM)
				memd_error_set(err, r, 0, "out of memory");
			else
				memd_error_set(err, r, 0, "event %zu: no role or no content parts", i);
			break;
		}
		if (e.dropped && !e.emitted)
			dropped_tokens += json_integer_value(json_object_get(ev, "tokens"));
	}
	json_decref(e.calls);
	if (r == 0 && ret_dropped_tokens)
		*ret_dropped_tokens = dropped_tokens;
	return r;
}
