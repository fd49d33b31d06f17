/* SPDX-License-Identifier: MIT */
/*
 * config: a parsed YAML or JSON document as a tree of nodes that remember
 * their file and line, with ${VAR} / ${VAR:-default} expanded from the
 * environment in scalars. Validation against memd's schema is settings.h;
 * validation of a plugin's node against its descriptor is config_check_plugin().
 *
 * Details: a plain (unquoted) empty, ~ or null value is a CONFIG_NULL node.
 * In scalar values (not map keys) ${NAME} is replaced by the variable (an
 * error if unset), ${NAME:-default} by the variable or, if it is unset or
 * empty, the default text; $$ is a literal $, and a $ before anything else
 * is kept. Anchors/aliases, tags other than !!str, non-scalar or duplicate
 * map keys and multiple documents are refused ("file:line:col: ...").
 */
#ifndef MEMD_HOST_CONFIG_H
#define MEMD_HOST_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include <memd/plugin.h>

typedef enum config_type {
	CONFIG_NULL,
	CONFIG_SCALAR, /* a string, number or boolean, kept as its text */
	CONFIG_MAP,
	CONFIG_SEQ,
} config_type;

typedef struct config_node config_node;

/* A list of "file:line: key: message" lines, for reporting every error. */
typedef struct config_diag {
	char **lines;
	size_t n;
	size_t cap;
} config_diag;

/* Append one formatted line to d (ENOMEM is swallowed: diagnostics never
 * fail the caller). */
void config_diag_add(config_diag *d, const config_node *at, const char *key,
		     const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Free the lines; d itself is caller-owned. Accepts NULL. */
void config_diag_clear(config_diag *d);

/* Parse the file at path (YAML 1.1 or JSON; JSON is read by the YAML
 * parser). On success *ret_root owns the tree. On failure returns
 * MEMD_EINVAL (syntax, bad ${VAR}), MEMD_EIO (cannot read) or MEMD_ENOMEM,
 * with err->msg "path:line:col: what". */
int32_t config_parse_file(const char *path, config_node **ret_root, memd_error *err);
/* As config_parse_file, from memory; name is used in messages. */
int32_t config_parse_string(const char *text, size_t len, const char *name,
			    config_node **ret_root, memd_error *err);
/* Free a tree returned by config_parse_*; accepts NULL. */
void config_free(config_node *root);
/* root takes ownership of other (another config_parse_* result): other's
 * nodes stay valid until config_free(root) frees both. other is not made
 * part of root's document (lookups in root do not see it). Accepts NULL
 * for either (then nothing happens). */
void config_attach(config_node *root, config_node *other);

/* Take key's entry out of map (a map of root's tree or of a tree
 * attached to it): lookups in map no longer see it. The value stays
 * valid, owned by root, until config_free(root). Returns the value, or
 * NULL when map is not a map or has no key. Main thread only (the tree
 * is not shared yet). */
const config_node *config_map_detach(config_node *root, const config_node *map,
				     const char *key);

config_type config_node_type(const config_node *n);
/* What n is, for messages: "a map", "a sequence", "null" or "a scalar". */
const char *config_node_kind(const config_node *n);
const char *config_node_file(const config_node *n);
unsigned config_node_line(const config_node *n);
/* Scalar text (after ${VAR} expansion); NULL for non-scalars. */
const char *config_scalar(const config_node *n);
/* Nonzero if n is a scalar that was quoted (or tagged !!str) in the file,
 * i.e. a string even if its text looks like a number or boolean. */
int config_scalar_quoted(const config_node *n);
/* Number of map entries or sequence items; 0 for scalars. */
size_t config_len(const config_node *n);
/* i-th sequence item, or i-th map entry's key / value, in document order. */
const config_node *config_seq_at(const config_node *n, size_t i);
const char *config_map_key_at(const config_node *n, size_t i);
const config_node *config_map_value_at(const config_node *n, size_t i);
/* The i-th map entry's key as a scalar node (for its line), or NULL. */
const config_node *config_map_key_node_at(const config_node *n, size_t i);
/* The value for key in a map, or NULL. */
const config_node *config_map_get(const config_node *map, const char *key);

/* Typed reads of a scalar. Return 0 and write *ret, or MEMD_EINVAL if the
 * node is not a scalar of that type (bool: true/false/yes/no/on/off). */
int32_t config_as_int(const config_node *n, int64_t *ret);
int32_t config_as_double(const config_node *n, double *ret);
int32_t config_as_bool(const config_node *n, int32_t *ret);

/* The subtree as compact JSON text (numbers and booleans unquoted when the
 * scalar was plain in YAML); malloc'd, caller frees. NULL on ENOMEM. */
char *config_to_json(const config_node *n);

/* Check a plugin instance's config node (a map) against the descriptor's
 * key schema: every key other than skip_key must be listed, have the
 * declared type, and every REQUIRED key must be present. Adds one line per
 * problem to d, prefixed with path (e.g. "stores.main"). Returns the number
 * of problems found. A null value counts as absent (so its default applies,
 * and a REQUIRED key with a null value is reported missing). STRING keys
 * accept any scalar (one of the key's choices when it has them); JSON keys
 * accept anything. node NULL = an empty map. keys must be host-sized
 * copies (loader_descriptor's), so that choices is readable. */
size_t config_check_plugin(const config_node *node, const char *path, const char *skip_key,
			   const memd_config_key *const *keys, config_diag *d);

#endif
