/* SPDX-License-Identifier: MIT */
#include "spec.h"

#include <criterion/criterion.h>
#include <ctype.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <memd/plugin.h>

#include "config/config.h"

#define PATH_SEGMENTS_MAX 32
#define WHERE_MAX 512
#define MEDIA_MAX 256

struct spec {
	json_t *doc;
};

spec *spec_load(const char *yaml_path, char *msg, size_t cap)
{
	config_node *root = NULL;
	memd_error err = { .struct_size = sizeof(err) };
	json_error_t jerr;
	char *text;
	spec *s;

	if (config_parse_file(yaml_path, &root, &err) < 0) {
		snprintf(msg, cap, "%s", err.msg);
		return NULL;
	}
	text = config_to_json(root);
	config_free(root);
	s = calloc(1, sizeof(*s));
	if (!text || !s) {
		free(text);
		free(s);
		snprintf(msg, cap, "out of memory");
		return NULL;
	}
	s->doc = json_loads(text, 0, &jerr);
	free(text);
	if (!json_is_object(s->doc)) {
		snprintf(msg, cap, "%s: not a JSON object after conversion: %s", yaml_path, jerr.text);
		spec_free(s);
		return NULL;
	}
	return s;
}

void spec_free(spec *s)
{
	if (!s)
		return;
	json_decref(s->doc);
	free(s);
}

json_t *spec_doc(const spec *s)
{
	return s->doc;
}

spec *spec_default(void)
{
	static spec *s;
	if (!s) {
		char path[PATH_MAX], msg[SPEC_MSG_MAX];
		const char *root = getenv("MEMD_SOURCE_ROOT");
		cr_assert(root, "MEMD_SOURCE_ROOT is not set");
		snprintf(path, sizeof(path), "%s/api/openapi.yaml", root);
		s = spec_load(path, msg, sizeof(msg));
		cr_assert(s, "cannot load %s: %s", path, msg);
	}
	return s;
}

/* ---- references ----------------------------------------------------------- */

/* The node a local reference "#/a/b" names, or NULL. */
static json_t *pointer(const spec *s, const char *ref)
{
	json_t *node = s->doc;
	const char *p;

	if (strncmp(ref, "#/", 2) != 0)
		return NULL;
	p = ref + 2;
	while (node && *p) {
		char key[256];
		size_t k = 0;
		while (*p && *p != '/' && k + 1 < sizeof(key)) {
			if (p[0] == '~' && p[1] == '1') {
				key[k++] = '/';
				p += 2;
			} else if (p[0] == '~' && p[1] == '0') {
				key[k++] = '~';
				p += 2;
			} else {
				key[k++] = *p++;
			}
		}
		key[k] = '\0';
		node = json_object_get(node, key);
		if (*p == '/')
			p++;
	}
	return node;
}

/* Follow $ref until a node without one (for responses, headers...). */
static json_t *deref(const spec *s, json_t *node)
{
	for (int i = 0; i < 16 && json_is_object(node); i++) {
		json_t *ref = json_object_get(node, "$ref");
		if (!json_is_string(ref))
			return node;
		node = pointer(s, json_string_value(ref));
	}
	return node;
}

/* ---- JSON Schema subset ----------------------------------------------------- */

typedef struct vctx {
	const spec *s;
	char *msg;
	size_t cap;
	int depth;
} vctx;

static int fail(vctx *v, const char *where, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(vctx *v, const char *where, const char *fmt, ...)
{
	char what[SPEC_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	snprintf(v->msg, v->cap, "%s: %s", where[0] ? where : "$", what);
	return -1;
}

static const char *type_of(json_t *x)
{
	switch (json_typeof(x)) {
	case JSON_OBJECT: return "object";
	case JSON_ARRAY: return "array";
	case JSON_STRING: return "string";
	case JSON_INTEGER: return "integer";
	case JSON_REAL: return "number";
	case JSON_TRUE:
	case JSON_FALSE: return "boolean";
	case JSON_NULL: return "null";
	}
	return "?";
}

static int type_ok(const char *t, json_t *x)
{
	if (strcmp(t, "number") == 0)
		return json_is_number(x);
	return strcmp(t, type_of(x)) == 0;
}

static size_t utf8_len(const char *p)
{
	size_t n = 0;
	for (; *p; p++)
		n += ((unsigned char)*p & 0xc0) != 0x80;
	return n;
}

static int digits(const char *p, int n)
{
	for (int i = 0; i < n; i++)
		if (!isdigit((unsigned char)p[i]))
			return 0;
	return 1;
}

/* RFC 3339 date-time: YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM). */
static int is_date_time(const char *t)
{
	size_t len = strlen(t), i = 19;
	if (len < 20 || !digits(t, 4) || t[4] != '-' || !digits(t + 5, 2) || t[7] != '-' ||
	    !digits(t + 8, 2) || (t[10] != 'T' && t[10] != 't') || !digits(t + 11, 2) ||
	    t[13] != ':' || !digits(t + 14, 2) || t[16] != ':' || !digits(t + 17, 2))
		return 0;
	if (t[i] == '.') {
		i++;
		if (!isdigit((unsigned char)t[i]))
			return 0;
		while (isdigit((unsigned char)t[i]))
			i++;
	}
	if ((t[i] == 'Z' || t[i] == 'z') && i + 1 == len)
		return 1;
	return (t[i] == '+' || t[i] == '-') && i + 6 == len && digits(t + i + 1, 2) &&
	       t[i + 3] == ':' && digits(t + i + 4, 2);
}

static int validate(vctx *v, json_t *schema, json_t *x, const char *where);

static const char *const annotations[] = { "description", "title", "summary", "example",
					   "examples", "default", "deprecated", "$comment", NULL };
static const char *const keywords[] = { "$ref", "type", "enum", "const", "properties", "required",
					"additionalProperties", "items", "minItems", "maxItems",
					"minLength", "maxLength", "minimum", "maximum", "anyOf",
					"oneOf", "allOf", "format", NULL };

static int in(const char *k, const char *const *list)
{
	for (size_t i = 0; list[i]; i++)
		if (strcmp(k, list[i]) == 0)
			return 1;
	return 0;
}

static int validate_object(vctx *v, json_t *schema, json_t *x, const char *where)
{
	json_t *props = json_object_get(schema, "properties");
	json_t *req = json_object_get(schema, "required");
	json_t *extra = json_object_get(schema, "additionalProperties");
	const char *key;
	json_t *val;
	size_t i;
	char sub[WHERE_MAX];

	json_array_foreach(req, i, val) {
		if (!json_object_get(x, json_string_value(val)))
			return fail(v, where, "required member '%s' is missing", json_string_value(val));
	}
	json_object_foreach(x, key, val) {
		json_t *ps = props ? json_object_get(props, key) : NULL;
		snprintf(sub, sizeof(sub), "%s.%s", where, key);
		if (ps) {
			if (validate(v, ps, val, sub) < 0)
				return -1;
		} else if (json_is_false(extra)) {
			return fail(v, where, "member '%s' is not in the schema", key);
		} else if (json_is_object(extra) && validate(v, extra, val, sub) < 0) {
			return -1;
		}
	}
	return 0;
}

static int validate(vctx *v, json_t *schema, json_t *x, const char *where)
{
	const char *key;
	json_t *kv;
	char sub[WHERE_MAX];

	if (++v->depth > 64) {
		v->depth--;
		return fail(v, where, "schema nesting too deep (a $ref loop?)");
	}
	if (json_is_true(schema)) {
		v->depth--;
		return 0;
	}
	if (!json_is_object(schema)) {
		v->depth--;
		return fail(v, where, "schema is not an object");
	}
	json_object_foreach(schema, key, kv) {
		if (!in(key, keywords) && !in(key, annotations) && strncmp(key, "x-", 2) != 0) {
			v->depth--;
			return fail(v, where, "schema keyword '%s' is not supported by this validator", key);
		}
	}
	if ((kv = json_object_get(schema, "$ref"))) {
		json_t *target = pointer(v->s, json_string_value(kv));
		if (!target) {
			v->depth--;
			return fail(v, where, "unresolvable $ref %s", json_string_value(kv));
		}
		if (validate(v, target, x, where) < 0)
			goto bad;
	}
	if ((kv = json_object_get(schema, "type"))) {
		int ok = 0;
		if (json_is_string(kv)) {
			ok = type_ok(json_string_value(kv), x);
		} else {
			size_t i;
			json_t *t;
			json_array_foreach(kv, i, t) ok |= type_ok(json_string_value(t), x);
		}
		if (!ok) {
			char want[128];
			char *dumped = json_dumps(kv, JSON_COMPACT | JSON_ENCODE_ANY);
			snprintf(want, sizeof(want), "%s", dumped ? dumped : "?");
			free(dumped);
			v->depth--;
			return fail(v, where, "is %s, the schema wants %s", type_of(x), want);
		}
	}
	if ((kv = json_object_get(schema, "enum"))) {
		size_t i;
		json_t *e;
		int ok = 0;
		json_array_foreach(kv, i, e) ok |= json_equal(e, x);
		if (!ok) {
			v->depth--;
			return fail(v, where, "value is not one of the enum");
		}
	}
	if ((kv = json_object_get(schema, "const")) && !json_equal(kv, x)) {
		v->depth--;
		return fail(v, where, "value is not the const");
	}
	if (json_is_object(x) && validate_object(v, schema, x, where) < 0)
		goto bad;
	if (json_is_array(x)) {
		json_t *items = json_object_get(schema, "items"), *e;
		json_t *mn = json_object_get(schema, "minItems"), *mx = json_object_get(schema, "maxItems");
		size_t i;
		if (mn && json_array_size(x) < (size_t)json_integer_value(mn)) {
			v->depth--;
			return fail(v, where, "fewer than %lld items", (long long)json_integer_value(mn));
		}
		if (mx && json_array_size(x) > (size_t)json_integer_value(mx)) {
			v->depth--;
			return fail(v, where, "more than %lld items", (long long)json_integer_value(mx));
		}
		json_array_foreach(x, i, e) {
			snprintf(sub, sizeof(sub), "%s[%zu]", where, i);
			if (items && validate(v, items, e, sub) < 0)
				goto bad;
		}
	}
	if (json_is_string(x)) {
		json_t *mn = json_object_get(schema, "minLength"), *mx = json_object_get(schema, "maxLength");
		json_t *fmt = json_object_get(schema, "format");
		size_t n = utf8_len(json_string_value(x));
		if (mn && n < (size_t)json_integer_value(mn)) {
			v->depth--;
			return fail(v, where, "shorter than %lld characters", (long long)json_integer_value(mn));
		}
		if (mx && n > (size_t)json_integer_value(mx)) {
			v->depth--;
			return fail(v, where, "longer than %lld characters", (long long)json_integer_value(mx));
		}
		if (fmt && strcmp(json_string_value(fmt), "date-time") == 0 &&
		    !is_date_time(json_string_value(x))) {
			v->depth--;
			return fail(v, where, "'%s' is not an RFC 3339 date-time", json_string_value(x));
		}
	}
	if (json_is_number(x)) {
		json_t *mn = json_object_get(schema, "minimum"), *mx = json_object_get(schema, "maximum");
		double d = json_number_value(x);
		if (mn && d < json_number_value(mn)) {
			v->depth--;
			return fail(v, where, "%g is below the minimum %g", d, json_number_value(mn));
		}
		if (mx && d > json_number_value(mx)) {
			v->depth--;
			return fail(v, where, "%g is above the maximum %g", d, json_number_value(mx));
		}
	}
	if ((kv = json_object_get(schema, "allOf"))) {
		size_t i;
		json_t *sch;
		json_array_foreach(kv, i, sch) if (validate(v, sch, x, where) < 0) goto bad;
	}
	for (int one = 0; one < 2; one++) {
		json_t *list = json_object_get(schema, one ? "oneOf" : "anyOf"), *sch;
		size_t i, matched = 0;
		char first[SPEC_MSG_MAX] = "";
		if (!list)
			continue;
		json_array_foreach(list, i, sch) {
			if (validate(v, sch, x, where) == 0)
				matched++;
			else if (!first[0])
				snprintf(first, sizeof(first), "%s", v->msg);
		}
		if (matched == 0 || (one && matched > 1)) {
			v->depth--;
			return fail(v, where, "%s: %zu alternatives match (first mismatch: %s)",
				    one ? "oneOf" : "anyOf", matched, first);
		}
	}
	v->depth--;
	return 0;
bad:
	v->depth--;
	return -1;
}

int spec_validate(const spec *s, json_t *schema, json_t *value, char *msg, size_t cap)
{
	vctx v = { s, msg, cap, 0 };
	return validate(&v, schema, value, "$");
}

/* ---- paths and responses ------------------------------------------------------- */

typedef struct seg {
	const char *p;
	size_t len;
} seg;

static int split(const char *path, size_t len, seg *out)
{
	int n = 0;
	size_t i = 0;
	if (len == 0 || path[0] != '/')
		return -1;
	for (i = 1;;) {
		size_t start = i;
		while (i < len && path[i] != '/')
			i++;
		if (n == PATH_SEGMENTS_MAX)
			return -1;
		out[n].p = path + start;
		out[n].len = i - start;
		n++;
		if (i >= len)
			return n;
		i++;
	}
}

static int seg_matches(const seg *t, const seg *s)
{
	const char *close;
	size_t suffix;
	if (t->len == 0 || t->p[0] != '{')
		return t->len == s->len && memcmp(t->p, s->p, s->len) == 0;
	close = memchr(t->p, '}', t->len);
	if (!close)
		return 0;
	suffix = t->len - (size_t)(close + 1 - t->p);
	return s->len > suffix && memcmp(s->p + s->len - suffix, close + 1, suffix) == 0;
}

/* The number of pattern segments of t that are a parameter with an
 * action suffix ("{key}:open"). */
static int actions_of(const seg *t, int nt)
{
	int n = 0;
	for (int i = 0; i < nt; i++)
		n += t[i].len > 0 && t[i].p[0] == '{' && t[i].p[t[i].len - 1] != '}';
	return n;
}

const char *spec_match_path(const spec *s, const char *raw_path)
{
	json_t *paths = json_object_get(s->doc, "paths"), *item;
	const char *tmpl, *best = NULL;
	seg rs[PATH_SEGMENTS_MAX], ts[PATH_SEGMENTS_MAX];
	size_t rlen = strcspn(raw_path, "?");
	int nr = split(raw_path, rlen, rs), best_actions = -1;

	if (nr < 0)
		return NULL;
	/* As memd's router: of the templates that match, the one with the
	 * most action suffixes ("lanes/{key}:open" over "lanes/{key}"). */
	json_object_foreach(paths, tmpl, item) {
		int nt = split(tmpl, strlen(tmpl), ts), ok = nt == nr;
		for (int i = 0; ok && i < nt; i++)
			ok = seg_matches(&ts[i], &rs[i]);
		if (ok && actions_of(ts, nt) > best_actions) {
			best = tmpl;
			best_actions = actions_of(ts, nt);
		}
	}
	return best;
}

static const char *find_header(const spec_response *r, const char *name)
{
	size_t n = strlen(name);
	for (size_t i = 0; i < r->n_headers; i++)
		if (strncasecmp(r->headers[i], name, n) == 0 && r->headers[i][n] == ':') {
			const char *v = r->headers[i] + n + 1;
			while (*v == ' ')
				v++;
			return v;
		}
	return NULL;
}

static int check_headers(const spec *s, json_t *resp, const spec_response *r, char *msg, size_t cap)
{
	json_t *headers = json_object_get(resp, "headers"), *h;
	const char *name;

	json_object_foreach(headers, name, h) {
		const char *v = find_header(r, name);
		json_t *schema;
		h = deref(s, h);
		if (!v) {
			if (json_is_true(json_object_get(h, "required"))) {
				snprintf(msg, cap, "required header %s is missing", name);
				return -1;
			}
			continue;
		}
		schema = deref(s, json_object_get(h, "schema"));
		if (schema && json_is_string(json_object_get(schema, "type")) &&
		    strcmp(json_string_value(json_object_get(schema, "type")), "integer") == 0) {
			if (!*v || strspn(v, "0123456789") != strlen(v)) {
				snprintf(msg, cap, "header %s: '%s' is not an integer", name, v);
				return -1;
			}
		}
	}
	return 0;
}

static int check_content(const spec *s, json_t *resp, const spec_response *r, char *msg, size_t cap)
{
	json_t *content = json_object_get(resp, "content"), *media_obj = NULL;
	const char *ct = find_header(r, "Content-Type");
	char media[MEDIA_MAX];
	size_t n;

	if (!content) {
		if (r->len) {
			snprintf(msg, cap, "the spec documents no body, got %zu bytes", r->len);
			return -1;
		}
		return 0;
	}
	if (!ct) {
		snprintf(msg, cap, "no Content-Type for a documented body");
		return -1;
	}
	n = strcspn(ct, ";");
	while (n && ct[n - 1] == ' ')
		n--;
	snprintf(media, sizeof(media), "%.*s", (int)n, ct);
	for (char *p = media; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	media_obj = json_object_get(content, media);
	if (!media_obj)
		media_obj = json_object_get(content, "*/*");
	if (!media_obj) {
		snprintf(msg, cap, "Content-Type %s is not documented", media);
		return -1;
	}
	if (strcmp(media, "application/json") == 0 && json_object_get(content, "application/json")) {
		json_error_t jerr;
		json_t *body = json_loadb(r->body, r->len, JSON_DECODE_ANY, &jerr);
		int rc;
		if (!body) {
			snprintf(msg, cap, "body is not JSON: %s", jerr.text);
			return -1;
		}
		rc = spec_validate(s, json_object_get(media_obj, "schema"), body, msg, cap);
		json_decref(body);
		return rc;
	}
	return 0;
}

int spec_check_response(const spec *s, const char *method, const char *raw_path,
			const spec_response *r, char *msg, size_t cap)
{
	const char *tmpl = spec_match_path(s, raw_path);
	json_t *resp = NULL, *op;
	char lower[16], code[16], inner[SPEC_MSG_MAX];
	size_t i;

	for (i = 0; method[i] && i + 1 < sizeof(lower); i++)
		lower[i] = (char)tolower((unsigned char)method[i]);
	lower[i] = '\0';
	snprintf(code, sizeof(code), "%u", r->status);
	if (!tmpl) {
		if (r->status != 404) {
			snprintf(msg, cap, "%s %s: no such path in the spec, yet status %u", method, raw_path,
				 r->status);
			return -1;
		}
		resp = pointer(s, "#/components/responses/NoRoute");
	} else if (!(op = json_object_get(json_object_get(json_object_get(s->doc, "paths"), tmpl), lower))) {
		if (r->status != 405) {
			snprintf(msg, cap, "%s %s: the spec has no %s, yet status %u", method, tmpl, method,
				 r->status);
			return -1;
		}
		resp = pointer(s, "#/components/responses/MethodNotAllowed");
	} else {
		json_t *responses = json_object_get(op, "responses");
		resp = json_object_get(responses, code);
		if (!resp)
			resp = json_object_get(responses, "default");
		if (!resp) {
			snprintf(msg, cap, "%s %s: status %u is not documented", method, tmpl, r->status);
			return -1;
		}
		resp = deref(s, resp);
	}
	if (!resp) {
		snprintf(msg, cap, "spec: unresolvable response");
		return -1;
	}
	if (check_headers(s, resp, r, inner, sizeof(inner)) < 0 ||
	    check_content(s, resp, r, inner, sizeof(inner)) < 0) {
		snprintf(msg, cap, "%s %s -> %u: %s", method, tmpl ? tmpl : raw_path, r->status, inner);
		return -1;
	}
	return 0;
}
