/* SPDX-License-Identifier: MIT */
/*
 * config: YAML/JSON (read by libyaml's event parser) into a tree of nodes
 * that remember file, line and column; ${VAR} expansion in scalar values;
 * typed reads; JSON rendering; checking a plugin's node against its keys.
 */
#include "config/config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <yaml.h>

/* Deeper nesting than this is refused (keeps every recursion bounded). */
#define CONFIG_MAX_DEPTH 64
/* A config file larger than this is refused as not being a config. */
#define CONFIG_FILE_MAX ((size_t)16 * 1024 * 1024)
/* First capacity of a map's or sequence's child arrays. */
#define CONFIG_INITIAL_CAP 4
/* First capacity of a growing text buffer. */
#define BUF_INITIAL_CAP 64

struct config_node {
	config_type type;
	unsigned line;            /* 1-based */
	unsigned col;             /* 1-based */
	int quoted;               /* scalar was quoted or tagged !!str */
	const char *file;         /* shared by the tree; owned by its root */
	char *text;               /* scalar text, expanded (NULL otherwise) */
	config_node **keys;       /* map: key scalars */
	config_node **items;      /* map values or sequence items */
	size_t n;
	size_t cap;
	/* Set on roots only. */
	char *file_owned;
	config_node *attached;    /* first tree attached to this root (owned) */
	config_node *next_attached; /* sibling in the parent root's attach list */
};

/* ---- growing text buffer ---------------------------------------------- */

typedef struct buf {
	char *p;
	size_t n;
	size_t cap;
	int nomem;
} buf;

static void buf_add(buf *b, const char *s, size_t len)
{
	if (b->nomem)
		return;
	if (b->n + len + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : BUF_INITIAL_CAP;
		while (b->n + len + 1 > cap)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->nomem = 1;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, len);
	b->n += len;
	b->p[b->n] = '\0';
}

static void buf_str(buf *b, const char *s)
{
	buf_add(b, s, strlen(s));
}

/* The finished string (never NULL unless ENOMEM), ownership to the caller. */
static char *buf_take(buf *b)
{
	if (!b->nomem && !b->p)
		buf_add(b, "", 0);
	if (b->nomem) {
		free(b->p);
		b->p = NULL;
		return NULL;
	}
	char *p = b->p;
	b->p = NULL;
	return p;
}

/* ---- diagnostics ------------------------------------------------------ */

void config_diag_add(config_diag *d, const config_node *at, const char *key,
		     const char *fmt, ...)
{
	if (!d)
		return;
	char msg[MEMD_ERROR_MSG_MAX * 2];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);

	buf b = {0};
	if (at) {
		char loc[64];
		snprintf(loc, sizeof(loc), ":%u: ", at->line);
		buf_str(&b, at->file);
		buf_str(&b, loc);
	}
	if (key && *key) {
		buf_str(&b, key);
		buf_str(&b, ": ");
	}
	buf_str(&b, msg);
	char *line = buf_take(&b);
	if (!line)
		return;
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : CONFIG_INITIAL_CAP;
		char **lines = realloc(d->lines, cap * sizeof(*lines));
		if (!lines) {
			free(line);
			return;
		}
		d->lines = lines;
		d->cap = cap;
	}
	d->lines[d->n++] = line;
}

void config_diag_clear(config_diag *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->n; i++)
		free(d->lines[i]);
	free(d->lines);
	d->lines = NULL;
	d->n = 0;
	d->cap = 0;
}

/* ---- nodes ------------------------------------------------------------- */

static config_node *node_new(config_type type, const char *file, const yaml_mark_t *mark)
{
	config_node *n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->type = type;
	n->file = file;
	n->line = (unsigned)mark->line + 1;
	n->col = (unsigned)mark->column + 1;
	return n;
}

static void node_free(config_node *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < n->n; i++) {
		if (n->keys)
			node_free(n->keys[i]);
		node_free(n->items[i]);
	}
	free(n->keys);
	free(n->items);
	free(n->text);
	config_node *a = n->attached;
	while (a) {
		config_node *next = a->next_attached;
		node_free(a);
		a = next;
	}
	free(n->file_owned);
	free(n);
}

void config_free(config_node *root)
{
	node_free(root);
}

void config_attach(config_node *root, config_node *other)
{
	if (!root || !other)
		return;
	other->next_attached = root->attached;
	root->attached = other;
}

const config_node *config_map_detach(config_node *root, const config_node *map,
				     const char *key)
{
	/* map is part of root's trees, which root owns (the const is the
	 * readers' view). */
	config_node *m = (config_node *)map;
	config_node *value;

	if (!root || !m || m->type != CONFIG_MAP || !key)
		return NULL;
	for (size_t i = 0; i < m->n; i++) {
		if (strcmp(m->keys[i]->text, key) != 0)
			continue;
		value = m->items[i];
		node_free(m->keys[i]);
		memmove(&m->keys[i], &m->keys[i + 1], (m->n - i - 1) * sizeof(*m->keys));
		memmove(&m->items[i], &m->items[i + 1], (m->n - i - 1) * sizeof(*m->items));
		m->n--;
		config_attach(root, value);
		return value;
	}
	return NULL;
}

/* Append (key, value) to a map or value to a sequence; takes both. */
static int32_t node_push(config_node *parent, config_node *key, config_node *value)
{
	if (parent->n == parent->cap) {
		size_t cap = parent->cap ? parent->cap * 2 : CONFIG_INITIAL_CAP;
		config_node **items = realloc(parent->items, cap * sizeof(*items));
		if (!items)
			return MEMD_ENOMEM;
		parent->items = items;
		if (parent->type == CONFIG_MAP) {
			config_node **keys = realloc(parent->keys, cap * sizeof(*keys));
			if (!keys)
				return MEMD_ENOMEM;
			parent->keys = keys;
		}
		parent->cap = cap;
	}
	if (parent->type == CONFIG_MAP)
		parent->keys[parent->n] = key;
	parent->items[parent->n++] = value;
	return 0;
}

config_type config_node_type(const config_node *n)
{
	return n ? n->type : CONFIG_NULL;
}

const char *config_node_file(const config_node *n)
{
	return n ? n->file : NULL;
}

unsigned config_node_line(const config_node *n)
{
	return n ? n->line : 0;
}

const char *config_scalar(const config_node *n)
{
	return n && n->type == CONFIG_SCALAR ? n->text : NULL;
}

int config_scalar_quoted(const config_node *n)
{
	return n && n->type == CONFIG_SCALAR && n->quoted;
}

size_t config_len(const config_node *n)
{
	return n && (n->type == CONFIG_MAP || n->type == CONFIG_SEQ) ? n->n : 0;
}

const config_node *config_seq_at(const config_node *n, size_t i)
{
	return n && n->type == CONFIG_SEQ && i < n->n ? n->items[i] : NULL;
}

const char *config_map_key_at(const config_node *n, size_t i)
{
	return n && n->type == CONFIG_MAP && i < n->n ? n->keys[i]->text : NULL;
}

const config_node *config_map_key_node_at(const config_node *n, size_t i)
{
	return n && n->type == CONFIG_MAP && i < n->n ? n->keys[i] : NULL;
}

const config_node *config_map_value_at(const config_node *n, size_t i)
{
	return n && n->type == CONFIG_MAP && i < n->n ? n->items[i] : NULL;
}

static const config_node *map_key_node(const config_node *map, const char *key)
{
	if (!map || map->type != CONFIG_MAP || !key)
		return NULL;
	for (size_t i = 0; i < map->n; i++)
		if (strcmp(map->keys[i]->text, key) == 0)
			return map->keys[i];
	return NULL;
}

const config_node *config_map_get(const config_node *map, const char *key)
{
	if (!map || map->type != CONFIG_MAP || !key)
		return NULL;
	for (size_t i = 0; i < map->n; i++)
		if (strcmp(map->keys[i]->text, key) == 0)
			return map->items[i];
	return NULL;
}

/* ---- typed reads ------------------------------------------------------- */

int32_t config_as_int(const config_node *n, int64_t *ret)
{
	const char *s = config_scalar(n);
	if (!s || !*s)
		return MEMD_EINVAL;
	if (!(*s == '-' || *s == '+' || (*s >= '0' && *s <= '9')))
		return MEMD_EINVAL;
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || *end || end == s)
		return MEMD_EINVAL;
	*ret = (int64_t)v;
	return 0;
}

int32_t config_as_double(const config_node *n, double *ret)
{
	const char *s = config_scalar(n);
	if (!s || !*s)
		return MEMD_EINVAL;
	if (!(*s == '-' || *s == '+' || *s == '.' || (*s >= '0' && *s <= '9')))
		return MEMD_EINVAL;
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || *end || end == s || !isfinite(v))
		return MEMD_EINVAL;
	*ret = v;
	return 0;
}

int32_t config_as_bool(const config_node *n, int32_t *ret)
{
	static const char *const yes[] = {"true", "yes", "on"};
	static const char *const no[] = {"false", "no", "off"};
	const char *s = config_scalar(n);
	if (!s)
		return MEMD_EINVAL;
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*ret = 1;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*ret = 0;
			return 0;
		}
	}
	return MEMD_EINVAL;
}

/* ---- environment expansion -------------------------------------------- */

static int is_name_start(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

static int is_name_char(char c)
{
	return is_name_start(c) || (c >= '0' && c <= '9');
}

/* Append a ${NAME:-default}'s default text [p, end), with $$ made $. */
static void add_default(buf *b, const char *p, const char *end)
{
	while (p < end) {
		if (p[0] == '$' && p + 1 < end && p[1] == '$')
			p++;
		buf_add(b, p, 1);
		p++;
	}
}

/* Expand ${VAR}, ${VAR:-default} (default when unset or empty) and $$ in
 * text. A '$' followed by anything else is kept. */
static int32_t expand_env(const char *text, const char *file, unsigned line, char **ret,
			  memd_error *err)
{
	buf b = {0};
	const char *p = text;
	while (*p) {
		const char *dollar = strchr(p, '$');
		if (!dollar) {
			buf_str(&b, p);
			break;
		}
		buf_add(&b, p, (size_t)(dollar - p));
		if (dollar[1] == '$') {
			buf_add(&b, "$", 1);
			p = dollar + 2;
			continue;
		}
		if (dollar[1] != '{') {
			buf_add(&b, "$", 1);
			p = dollar + 1;
			continue;
		}
		const char *name = dollar + 2;
		const char *close = strchr(name, '}');
		if (!close) {
			free(b.p);
			return memd_error_set(err, MEMD_EINVAL, 0,
					      "%s:%u: unterminated ${ (write $$ for a literal $)",
					      file, line);
		}
		const char *q = name;
		if (is_name_start(*q))
			while (is_name_char(*q))
				q++;
		size_t name_len = (size_t)(q - name);
		int has_default = q[0] == ':' && q[1] == '-';
		if (name_len == 0 || (q != close && !has_default)) {
			free(b.p);
			return memd_error_set(err, MEMD_EINVAL, 0,
					      "%s:%u: bad variable reference \"%.*s\" (expected ${NAME} or ${NAME:-default})",
					      file, line, (int)(close - dollar + 1), dollar);
		}
		char var[MEMD_ERROR_MSG_MAX];
		if (name_len >= sizeof(var)) {
			free(b.p);
			return memd_error_set(err, MEMD_EINVAL, 0,
					      "%s:%u: environment variable name too long", file, line);
		}
		memcpy(var, name, name_len);
		var[name_len] = '\0';
		const char *value = getenv(var);
		if (has_default) {
			if (value && *value)
				buf_str(&b, value);
			else
				add_default(&b, q + 2, close);
		} else {
			if (!value) {
				free(b.p);
				return memd_error_set(err, MEMD_EINVAL, 0,
						      "%s:%u: environment variable %s is not set",
						      file, line, var);
			}
			buf_str(&b, value);
		}
		p = close + 1;
	}
	char *out = buf_take(&b);
	if (!out)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	*ret = out;
	return 0;
}

/* ---- parser ------------------------------------------------------------ */

typedef struct cparse {
	yaml_parser_t parser;
	const char *file;
	memd_error *err;
} cparse;

static int32_t at_mark(cparse *cp, const yaml_mark_t *m, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int32_t at_mark(cparse *cp, const yaml_mark_t *m, const char *fmt, ...)
{
	char msg[MEMD_ERROR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return memd_error_set(cp->err, MEMD_EINVAL, 0, "%s:%zu:%zu: %s", cp->file, m->line + 1,
			      m->column + 1, msg);
}

static int32_t next_event(cparse *cp, yaml_event_t *ev)
{
	if (yaml_parser_parse(&cp->parser, ev))
		return 0;
	yaml_parser_t *p = &cp->parser;
	if (p->error == YAML_MEMORY_ERROR)
		return memd_error_set(cp->err, MEMD_ENOMEM, 0, "%s: out of memory", cp->file);
	const yaml_mark_t *m = p->error == YAML_READER_ERROR ? &p->mark : &p->problem_mark;
	const char *problem = p->problem ? p->problem : "syntax error";
	if (p->context)
		return at_mark(cp, m, "%s (%s at line %zu)", problem, p->context,
			       p->context_mark.line + 1);
	return at_mark(cp, m, "%s", problem);
}

static int32_t check_anchor(cparse *cp, const yaml_event_t *ev, const yaml_char_t *anchor)
{
	if (anchor)
		return at_mark(cp, &ev->start_mark,
			       "anchors and aliases are not supported (&%s); repeat the value instead",
			       (const char *)anchor);
	return 0;
}

static int32_t check_tag(cparse *cp, const yaml_event_t *ev, const yaml_char_t *tag,
			 const char *allowed)
{
	static const char yaml_prefix[] = "tag:yaml.org,2002:";
	const char *t = (const char *)tag;
	if (!t || strcmp(t, allowed) == 0)
		return 0;
	if (strncmp(t, yaml_prefix, sizeof(yaml_prefix) - 1) == 0)
		return at_mark(cp, &ev->start_mark, "tag !!%s is not supported",
			       t + sizeof(yaml_prefix) - 1);
	return at_mark(cp, &ev->start_mark, "tag %s is not supported", t);
}

static int is_null_text(const char *s)
{
	return !*s || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 || strcmp(s, "Null") == 0 ||
	       strcmp(s, "NULL") == 0;
}

/* A scalar node from a SCALAR event; values get ${VAR} expansion, keys not. */
static int32_t make_scalar(cparse *cp, const yaml_event_t *ev, int is_key, config_node **ret)
{
	int32_t rc = check_anchor(cp, ev, ev->data.scalar.anchor);
	if (rc)
		return rc;
	rc = check_tag(cp, ev, ev->data.scalar.tag, YAML_STR_TAG);
	if (rc)
		return rc;
	const char *value = (const char *)ev->data.scalar.value;
	size_t len = ev->data.scalar.length;
	if (strlen(value) != len)
		return at_mark(cp, &ev->start_mark, "NUL characters are not supported in values");
	int quoted = ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE || ev->data.scalar.tag;

	config_type type = !quoted && !is_key && is_null_text(value) ? CONFIG_NULL : CONFIG_SCALAR;
	config_node *n = node_new(type, cp->file, &ev->start_mark);
	if (!n)
		return memd_error_set(cp->err, MEMD_ENOMEM, 0, "%s: out of memory", cp->file);
	n->quoted = quoted;
	if (type == CONFIG_SCALAR) {
		if (is_key) {
			n->text = strdup(value);
			if (!n->text) {
				node_free(n);
				return memd_error_set(cp->err, MEMD_ENOMEM, 0, "%s: out of memory",
						      cp->file);
			}
		} else {
			rc = expand_env(value, cp->file, n->line, &n->text, cp->err);
			if (rc) {
				node_free(n);
				return rc;
			}
		}
	}
	*ret = n;
	return 0;
}

static int32_t parse_node(cparse *cp, yaml_event_t *ev, unsigned depth, config_node **ret);

static int32_t parse_children(cparse *cp, config_node *n, yaml_event_type_t end, unsigned depth)
{
	for (;;) {
		yaml_event_t ev;
		int32_t rc = next_event(cp, &ev);
		if (rc)
			return rc;
		if (ev.type == end) {
			yaml_event_delete(&ev);
			return 0;
		}
		config_node *key = NULL;
		if (n->type == CONFIG_MAP) {
			if (ev.type == YAML_ALIAS_EVENT) {
				rc = at_mark(cp, &ev.start_mark,
					     "anchors and aliases are not supported (*%s); repeat the value instead",
					     (const char *)ev.data.alias.anchor);
				yaml_event_delete(&ev);
				return rc;
			}
			if (ev.type != YAML_SCALAR_EVENT) {
				rc = at_mark(cp, &ev.start_mark, "map keys must be scalars");
				yaml_event_delete(&ev);
				return rc;
			}
			rc = make_scalar(cp, &ev, 1, &key);
			yaml_event_delete(&ev);
			if (rc)
				return rc;
			const config_node *first = map_key_node(n, key->text);
			if (first) {
				rc = memd_error_set(cp->err, MEMD_EINVAL, 0,
						    "%s:%u:%u: duplicate key \"%s\" (first at line %u)",
						    cp->file, key->line, key->col, key->text,
						    first->line);
				node_free(key);
				return rc;
			}
			rc = next_event(cp, &ev);
			if (rc) {
				node_free(key);
				return rc;
			}
		}
		config_node *value = NULL;
		rc = parse_node(cp, &ev, depth + 1, &value);
		if (rc) {
			node_free(key);
			return rc;
		}
		rc = node_push(n, key, value);
		if (rc) {
			node_free(key);
			node_free(value);
			return memd_error_set(cp->err, rc, 0, "%s: out of memory", cp->file);
		}
	}
}

/* Build the node that starts with *ev (consumed) and everything inside. */
static int32_t parse_node(cparse *cp, yaml_event_t *ev, unsigned depth, config_node **ret)
{
	int32_t rc = 0;
	config_node *n = NULL;
	if (depth > CONFIG_MAX_DEPTH) {
		rc = at_mark(cp, &ev->start_mark, "nesting deeper than %d levels", CONFIG_MAX_DEPTH);
		goto out;
	}
	switch (ev->type) {
	case YAML_ALIAS_EVENT:
		rc = at_mark(cp, &ev->start_mark,
			     "anchors and aliases are not supported (*%s); repeat the value instead",
			     (const char *)ev->data.alias.anchor);
		goto out;
	case YAML_SCALAR_EVENT:
		rc = make_scalar(cp, ev, 0, &n);
		goto out;
	case YAML_SEQUENCE_START_EVENT:
	case YAML_MAPPING_START_EVENT: {
		int is_map = ev->type == YAML_MAPPING_START_EVENT;
		rc = check_anchor(cp, ev, is_map ? ev->data.mapping_start.anchor
						 : ev->data.sequence_start.anchor);
		if (!rc)
			rc = check_tag(cp, ev,
				       is_map ? ev->data.mapping_start.tag : ev->data.sequence_start.tag,
				       is_map ? YAML_MAP_TAG : YAML_SEQ_TAG);
		if (rc)
			goto out;
		n = node_new(is_map ? CONFIG_MAP : CONFIG_SEQ, cp->file, &ev->start_mark);
		if (!n) {
			rc = memd_error_set(cp->err, MEMD_ENOMEM, 0, "%s: out of memory", cp->file);
			goto out;
		}
		yaml_event_delete(ev);
		rc = parse_children(cp, n, is_map ? YAML_MAPPING_END_EVENT : YAML_SEQUENCE_END_EVENT,
				    depth);
		if (rc) {
			node_free(n);
			return rc;
		}
		*ret = n;
		return 0;
	}
	default:
		rc = at_mark(cp, &ev->start_mark, "unexpected YAML event");
		goto out;
	}
out:
	yaml_event_delete(ev);
	if (!rc)
		*ret = n;
	return rc;
}

/* STREAM-START (DOCUMENT-START node DOCUMENT-END)? STREAM-END */
static int32_t parse_stream(cparse *cp, config_node **ret)
{
	yaml_event_t ev;
	config_node *root = NULL;
	int32_t rc = next_event(cp, &ev);
	if (rc)
		return rc;
	yaml_event_delete(&ev); /* STREAM-START */
	rc = next_event(cp, &ev);
	if (rc)
		return rc;
	if (ev.type == YAML_STREAM_END_EVENT) {
		/* An empty file is a null document. */
		root = node_new(CONFIG_NULL, cp->file, &ev.start_mark);
		yaml_event_delete(&ev);
		if (!root)
			return memd_error_set(cp->err, MEMD_ENOMEM, 0, "%s: out of memory", cp->file);
		*ret = root;
		return 0;
	}
	yaml_event_delete(&ev); /* DOCUMENT-START */
	rc = next_event(cp, &ev);
	if (rc)
		return rc;
	rc = parse_node(cp, &ev, 0, &root);
	if (rc)
		return rc;
	rc = next_event(cp, &ev);
	if (rc)
		goto fail;
	yaml_event_delete(&ev); /* DOCUMENT-END */
	rc = next_event(cp, &ev);
	if (rc)
		goto fail;
	if (ev.type != YAML_STREAM_END_EVENT) {
		rc = at_mark(cp, &ev.start_mark,
			     "multiple documents are not supported (one config per file)");
		yaml_event_delete(&ev);
		goto fail;
	}
	yaml_event_delete(&ev);
	*ret = root;
	return 0;
fail:
	node_free(root);
	return rc;
}

int32_t config_parse_string(const char *text, size_t len, const char *name,
			    config_node **ret_root, memd_error *err)
{
	if (!text || !ret_root)
		return memd_error_set(err, MEMD_EINVAL, 0, "config_parse_string: no text");
	if (!name)
		name = "<string>";
	char *file = strdup(name);
	if (!file)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	cparse cp = {.file = file, .err = err};
	if (!yaml_parser_initialize(&cp.parser)) {
		free(file);
		return memd_error_set(err, MEMD_ENOMEM, 0, "%s: out of memory", name);
	}
	yaml_parser_set_input_string(&cp.parser, (const unsigned char *)text, len);
	config_node *root = NULL;
	int32_t rc = parse_stream(&cp, &root);
	yaml_parser_delete(&cp.parser);
	if (rc) {
		free(file);
		return rc;
	}
	root->file_owned = file;
	*ret_root = root;
	return 0;
}

int32_t config_parse_file(const char *path, config_node **ret_root, memd_error *err)
{
	if (!path || !ret_root)
		return memd_error_set(err, MEMD_EINVAL, 0, "config_parse_file: no path");
	FILE *f = fopen(path, "rb");
	if (!f)
		return memd_error_set(err, MEMD_EIO, 0, "%s: cannot open: %s", path, strerror(errno));
	buf b = {0};
	char chunk[BUFSIZ];
	size_t got;
	int32_t rc = 0;
	while ((got = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		buf_add(&b, chunk, got);
		if (b.n > CONFIG_FILE_MAX) {
			rc = memd_error_set(err, MEMD_EINVAL, 0, "%s: larger than %zu bytes", path,
					    CONFIG_FILE_MAX);
			goto out;
		}
	}
	if (ferror(f)) {
		rc = memd_error_set(err, MEMD_EIO, 0, "%s: cannot read: %s", path, strerror(errno));
		goto out;
	}
	if (b.nomem) {
		rc = memd_error_set(err, MEMD_ENOMEM, 0, "%s: out of memory", path);
		goto out;
	}
	rc = config_parse_string(b.p ? b.p : "", b.n, path, ret_root, err);
out:
	fclose(f);
	free(b.p);
	return rc;
}

/* ---- JSON rendering ---------------------------------------------------- */

/* JSON's number grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static int is_json_number(const char *s)
{
	if (*s == '-')
		s++;
	if (*s == '0')
		s++;
	else if (*s >= '1' && *s <= '9')
		while (*s >= '0' && *s <= '9')
			s++;
	else
		return 0;
	if (*s == '.') {
		s++;
		if (!(*s >= '0' && *s <= '9'))
			return 0;
		while (*s >= '0' && *s <= '9')
			s++;
	}
	if (*s == 'e' || *s == 'E') {
		s++;
		if (*s == '+' || *s == '-')
			s++;
		if (!(*s >= '0' && *s <= '9'))
			return 0;
		while (*s >= '0' && *s <= '9')
			s++;
	}
	return *s == '\0';
}

static void json_string(buf *b, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	buf_add(b, "\"", 1);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		switch (*p) {
		case '"': buf_add(b, "\\\"", 2); break;
		case '\\': buf_add(b, "\\\\", 2); break;
		case '\n': buf_add(b, "\\n", 2); break;
		case '\r': buf_add(b, "\\r", 2); break;
		case '\t': buf_add(b, "\\t", 2); break;
		default:
			if (*p < 0x20) {
				char esc[] = {'\\', 'u', '0', '0', hex[*p >> 4], hex[*p & 0xf]};
				buf_add(b, esc, sizeof(esc));
			} else {
				buf_add(b, (const char *)p, 1);
			}
		}
	}
	buf_add(b, "\"", 1);
}

static void json_node(buf *b, const config_node *n)
{
	switch (n->type) {
	case CONFIG_NULL:
		buf_str(b, "null");
		return;
	case CONFIG_SCALAR:
		if (!n->quoted) {
			if (is_json_number(n->text)) {
				buf_str(b, n->text);
				return;
			}
			if (strcmp(n->text, "true") == 0 || strcmp(n->text, "True") == 0 ||
			    strcmp(n->text, "TRUE") == 0) {
				buf_str(b, "true");
				return;
			}
			if (strcmp(n->text, "false") == 0 || strcmp(n->text, "False") == 0 ||
			    strcmp(n->text, "FALSE") == 0) {
				buf_str(b, "false");
				return;
			}
		}
		json_string(b, n->text);
		return;
	case CONFIG_SEQ:
		buf_add(b, "[", 1);
		for (size_t i = 0; i < n->n; i++) {
			if (i)
				buf_add(b, ",", 1);
			json_node(b, n->items[i]);
		}
		buf_add(b, "]", 1);
		return;
	case CONFIG_MAP:
		buf_add(b, "{", 1);
		for (size_t i = 0; i < n->n; i++) {
			if (i)
				buf_add(b, ",", 1);
			json_string(b, n->keys[i]->text);
			buf_add(b, ":", 1);
			json_node(b, n->items[i]);
		}
		buf_add(b, "}", 1);
		return;
	}
}

char *config_to_json(const config_node *n)
{
	buf b = {0};
	if (n)
		json_node(&b, n);
	else
		buf_str(&b, "null");
	return buf_take(&b);
}

/* ---- plugin key schema ------------------------------------------------- */

const char *config_node_kind(const config_node *n)
{
	switch (config_node_type(n)) {
	case CONFIG_MAP: return "a map";
	case CONFIG_SEQ: return "a sequence";
	case CONFIG_NULL: return "null";
	case CONFIG_SCALAR: break;
	}
	return "a scalar";
}

static const char *key_type_name(uint32_t type)
{
	switch (type) {
	case MEMD_CONFIG_STRING: return "a string";
	case MEMD_CONFIG_INT: return "an integer";
	case MEMD_CONFIG_DOUBLE: return "a number";
	case MEMD_CONFIG_BOOL: return "a boolean (true/false)";
	case MEMD_CONFIG_JSON: return "any value";
	}
	return "an unknown type";
}

/* 0 if value fits type. */
static int32_t check_type(const config_node *value, uint32_t type)
{
	int64_t i;
	double d;
	int32_t b;
	switch (type) {
	case MEMD_CONFIG_STRING:
		return config_node_type(value) == CONFIG_SCALAR ? 0 : MEMD_EINVAL;
	case MEMD_CONFIG_INT:
		return config_as_int(value, &i);
	case MEMD_CONFIG_DOUBLE:
		return config_as_double(value, &d);
	case MEMD_CONFIG_BOOL:
		return config_as_bool(value, &b);
	case MEMD_CONFIG_JSON:
		return 0;
	}
	return MEMD_EINVAL;
}

static const memd_config_key *find_key(const memd_config_key *const *keys, const char *name)
{
	for (size_t i = 0; keys && keys[i]; i++)
		if (keys[i]->name && strcmp(keys[i]->name, name) == 0)
			return keys[i];
	return NULL;
}

/* Whether the scalar v is one of a STRING key's choices (or it has none). */
static int in_choices(const memd_config_key *key, const config_node *v)
{
	if (key->type != MEMD_CONFIG_STRING || !key->choices || v->type != CONFIG_SCALAR)
		return 1;
	for (size_t j = 0; key->choices[j]; j++)
		if (strcmp(key->choices[j], v->text) == 0)
			return 1;
	return 0;
}

size_t config_check_plugin(const config_node *node, const char *path, const char *skip_key,
			   const memd_config_key *const *keys, config_diag *d)
{
	size_t problems = 0;
	if (!path)
		path = "";
	if (node && node->type != CONFIG_MAP && node->type != CONFIG_NULL) {
		config_diag_add(d, node, path, "expected a map, got %s", config_node_kind(node));
		return 1;
	}
	for (size_t i = 0; i < config_len(node); i++) {
		const config_node *k = node->keys[i];
		const config_node *v = node->items[i];
		if (skip_key && strcmp(k->text, skip_key) == 0)
			continue;
		char full[MEMD_ERROR_MSG_MAX];
		snprintf(full, sizeof(full), "%s%s%s", path, *path ? "." : "", k->text);
		const memd_config_key *key = find_key(keys, k->text);
		if (!key) {
			buf known = {0};
			for (size_t j = 0; keys && keys[j]; j++) {
				if (!keys[j]->name)
					continue;
				if (known.n)
					buf_str(&known, ", ");
				buf_str(&known, keys[j]->name);
			}
			char *list = buf_take(&known);
			if (list && *list)
				config_diag_add(d, k, full, "unknown key (known: %s)", list);
			else
				config_diag_add(d, k, full, "unknown key (this plugin takes no keys)");
			free(list);
			problems++;
			continue;
		}
		if (v->type == CONFIG_NULL)
			continue; /* counts as absent; REQUIRED is checked below */
		if (check_type(v, key->type) == 0) {
			if (!in_choices(key, v)) {
				buf list = {0};
				for (size_t j = 0; key->choices[j]; j++) {
					if (j)
						buf_str(&list, ", ");
					buf_str(&list, key->choices[j]);
				}
				char *text = buf_take(&list);
				if (key->flags & MEMD_CONFIG_SECRET)
					config_diag_add(d, v, full, "expected one of %s",
							text ? text : "its choices");
				else
					config_diag_add(d, v, full, "expected one of %s, got \"%s\"",
							text ? text : "its choices", v->text);
				free(text);
				problems++;
			}
			continue;
		}
		if (v->type == CONFIG_SCALAR && !(key->flags & MEMD_CONFIG_SECRET))
			config_diag_add(d, v, full, "expected %s, got \"%s\"",
					key_type_name(key->type), v->text);
		else
			config_diag_add(d, v, full, "expected %s, got %s", key_type_name(key->type),
					config_node_kind(v));
		problems++;
	}
	for (size_t j = 0; keys && keys[j]; j++) {
		const memd_config_key *key = keys[j];
		if (!key->name || !(key->flags & MEMD_CONFIG_REQUIRED))
			continue;
		const config_node *v = config_map_get(node, key->name);
		if (v && v->type != CONFIG_NULL)
			continue;
		char full[MEMD_ERROR_MSG_MAX];
		snprintf(full, sizeof(full), "%s%s%s", path, *path ? "." : "", key->name);
		config_diag_add(d, v ? v : node, full, "required key is missing");
		problems++;
	}
	return problems;
}
