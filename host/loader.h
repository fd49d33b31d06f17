/* SPDX-License-Identifier: MIT */
/*
 * loader: finds, dlopens and validates plugins (DESIGN.md §3), and creates
 * plugin instances with their host-services table.
 *
 * A loader_plugin is a validated .so: the host-sized copies of its
 * descriptor and ops tables (absent members zeroed), its path and handle.
 * A loader_instance is one init'ed instance with its own config node.
 */
#ifndef MEMD_HOST_LOADER_H
#define MEMD_HOST_LOADER_H

#include <memd/plugin.h>

#include "config.h"

typedef struct loader_plugin loader_plugin;
typedef struct loader_instance loader_instance;
struct hostsvc;

/* Resolve name_or_path: a value containing '/' is a file path; otherwise
 * "memd-<name>.so" in each directory of search (NULL-terminated), first
 * match.
 * Only regular files are opened (RTLD_NOW | RTLD_LOCAL). Validates the
 * descriptor (entry symbol, struct_size, ABI major/minor, name, kind bits
 * vs ops tables, required ops) and refuses with a message naming the file
 * and the reason (MEMD_EABI, or MEMD_ENOTFOUND if no file was found).
 * On success *ret owns the plugin. */
int32_t loader_open(const char *name_or_path, const char *const *search,
		    loader_plugin **ret, memd_error *err);
/* Unload; only call when no instance of it is left. Accepts NULL. */
void loader_close(loader_plugin *p);

/* Host-sized copies; ops are NULL when the kind is absent. */
const memd_plugin *loader_descriptor(const loader_plugin *p);
const memd_store_ops *loader_store_ops(const loader_plugin *p);
const memd_strategy_ops *loader_strategy_ops(const loader_plugin *p);
const memd_vector_ops *loader_vector_ops(const loader_plugin *p);
const memd_embedder_ops *loader_embedder_ops(const loader_plugin *p);
const char *loader_path(const loader_plugin *p);

/* MEMD_EABI with "file: is a <kinds>, but <slot> needs a <kind>" unless p
 * provides every bit of kind. */
int32_t loader_require_kind(const loader_plugin *p, uint32_t kind, const char *slot,
			    memd_error *err);

/* Create an instance named `name` (for logs, e.g. "stores.main") from the
 * config node (a map; its `skip_key`, e.g. "plugin" or "strategy", is the
 * host's and is not checked). The node is validated against the plugin's
 * key schema first (every problem in err->msg, first one "file:line: ...").
 * svc provides token counting/summarizing; may be NULL. node must outlive
 * the instance. On success *ret owns the instance. */
int32_t loader_instance_create(loader_plugin *p, const char *name, const config_node *node,
			       const char *skip_key, struct hostsvc *svc,
			       loader_instance **ret, memd_error *err);
/* fini the instance; accepts NULL. */
void loader_instance_destroy(loader_instance *i);

void *loader_instance_handle(const loader_instance *i);
loader_plugin *loader_instance_plugin(const loader_instance *i);
const char *loader_instance_name(const loader_instance *i);
/* Nonzero if calls must be serialized (plugin not THREADSAFE). */
int loader_instance_serialized(const loader_instance *i);

#endif
