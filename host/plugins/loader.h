/* SPDX-License-Identifier: MIT */
/*
 * loader: finds, dlopens and validates plugins (api/README.md), and creates
 * plugin instances with their host-services table.
 *
 * A loader_plugin is a validated .so: the host-sized copies of its
 * descriptor and ops tables (absent members zeroed), its path and handle.
 * A loader_instance is one init'ed instance with its own config node.
 */
#ifndef MEMD_HOST_LOADER_H
#define MEMD_HOST_LOADER_H

#include <memd/plugin.h>

#include "config/config.h"

typedef struct loader_plugin loader_plugin;
typedef struct loader_instance loader_instance;
struct hostsvc;

/* Resolve name_or_path: a value containing '/' or ending in ".so" is a file
 * path (relative to the working directory); otherwise it must be a plugin
 * name ([a-z0-9_]+, else MEMD_EINVAL) and "memd-<name>.so" is looked up in
 * each directory of search (NULL-terminated, may be NULL), first match.
 * Only regular files are opened (stat follows symlinks: a directory, a
 * device or a link to one is refused with MEMD_EABI), RTLD_NOW |
 * RTLD_LOCAL. Validates the descriptor (entry symbol defined by this very
 * file, struct_size, ABI major/minor, name, init/fini, kind bits vs ops
 * tables, each table's struct_size, required ops, the config-key schema
 * and that each default parses as its type) and refuses with a message
 * that starts with the file's basename and says why (MEMD_EABI, or
 * MEMD_ENOTFOUND if no file was found). On success *ret owns the plugin. */
int32_t loader_open(const char *name_or_path, const char *const *search,
		    loader_plugin **ret, memd_error *err);
/* Unload. Accepts NULL. If instances of p are still alive, the unload is
 * deferred until the last one is destroyed (code in use is never
 * unloaded). Main thread only, like instance create/destroy. */
void loader_close(loader_plugin *p);

/* Host-sized copies, zeroed past what the plugin provided (each copy's
 * struct_size is the host's sizeof); ops are NULL when the kind is absent.
 * In the descriptor copy, version and description are never NULL ("" if
 * the plugin gave none), config_keys is always a NULL-terminated array of
 * host-sized copies (help never NULL), and store/vector/strategy/embedder
 * point at the host copies returned below. Valid until loader_close. */
const memd_plugin *loader_descriptor(const loader_plugin *p);
const memd_store_ops *loader_store_ops(const loader_plugin *p);
const memd_strategy_ops *loader_strategy_ops(const loader_plugin *p);
const memd_vector_ops *loader_vector_ops(const loader_plugin *p);
const memd_embedder_ops *loader_embedder_ops(const loader_plugin *p);
const char *loader_path(const loader_plugin *p);
/* The descriptor's struct_size as the plugin stated it. */
uint32_t loader_descriptor_size(const loader_plugin *p);

/* MEMD_EABI with "memd-x.so: is a strategy plugin, but stores.main needs
 * a session store" unless p provides every bit of kind. */
int32_t loader_require_kind(const loader_plugin *p, uint32_t kind, const char *slot,
			    memd_error *err);

/* Create an instance named `name` (for logs, e.g. "stores.main") from the
 * config node (a map; its `skip_key`, e.g. "plugin" or "strategy", is the
 * host's and is not checked; skip_key may be NULL). node NULL means an
 * empty config. The node is validated against the plugin's key schema
 * first: MEMD_EINVAL with every problem that fits in err->msg, joined by
 * "; ", the first one "file:line: ...". Then the plugin's init runs with a
 * memd_host whose log goes to hostsvc_log(svc, level, name, ...), whose
 * config accessors read node (falling back to the schema's default text)
 * and whose count_tokens/summarize are svc's (summarize is NULL when svc
 * is NULL). An init failure is returned with its code and RETRYABLE flag,
 * its message prefixed with "name: ". Logs the config at debug level,
 * never showing the value of a MEMD_CONFIG_SECRET key. svc may be NULL
 * (logs are dropped). node and svc must outlive the instance. Main thread
 * only. On success *ret owns the instance. */
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
/* The memd_host table the instance's init got (valid until destroy):
 * for host code and tests that read the instance's config the way the
 * plugin does. */
const memd_host *loader_instance_host(const loader_instance *i);

/* Validate a plugin without trusting it (`memd plugins check FILE`):
 * resolves name_or_path as loader_open does (in this process: only stat),
 * then in a forked child that runs in a scratch directory (removed
 * afterwards) opens and validates it, and runs init and fini with an empty
 * config (skipped when the plugin has required keys; the report says so).
 * On success *ret_report (malloc'd, caller frees) is a human report: file,
 * name, version, description, kinds, ABI, threading, provided ops, and
 * every config key with its type, flags, default (secret defaults hidden)
 * and help. On failure err says why: the loader's refusal or the init
 * error as the child saw it; "x.so: crashed in init (SIGSEGV)" (or while
 * loading, in the entry point, in fini...) if the child died by a signal;
 * MEMD_ETIMEDOUT if it did not finish within LOADER_CHECK_TIMEOUT_MS
 * (10 s; it is killed). Nothing the plugin does can affect the caller's
 * process. Forks: call it from a single-threaded process (the CLI), or
 * from one whose other threads hold no lock the loader needs (malloc). */
int32_t loader_check_isolated(const char *name_or_path, const char *const *search,
			      char **ret_report, memd_error *err);
/* How long loader_check_isolated() lets the child run before killing it. */
#define LOADER_CHECK_TIMEOUT_MS 10000
/* loader_check_isolated() with another timeout (> 0), e.g. for a CLI flag
 * or a test. */
int32_t loader_check_isolated_timeout(const char *name_or_path, const char *const *search,
				      int timeout_ms, char **ret_report, memd_error *err);

#endif
