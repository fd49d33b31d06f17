/* SPDX-License-Identifier: MIT */
/*
 * memd plugin ABI, version 1: the plugin descriptor and entry point.
 * Include this one header to write a plugin; api/README.md is the contract.
 *
 * A plugin exports exactly one symbol:
 *
 *     MEMD_PLUGIN_EXPORT const memd_plugin *memd_plugin_entry_v1(void);
 *
 * returning a pointer to a static const descriptor. The host accepts it iff
 * abi_major == MEMD_ABI_MAJOR and abi_minor <= the host's minor, copies
 * min(struct_size, sizeof(memd_plugin)) bytes into a zeroed host-sized
 * struct (and likewise each ops table), and refuses it with a message that
 * says why otherwise.
 */
#ifndef MEMD_PLUGIN_H
#define MEMD_PLUGIN_H

#include "abi.h"
#include "host.h"
#include "store.h"
#include "strategy.h"
#include "vector.h"

#ifdef __cplusplus
extern "C" {
#endif

/* memd_plugin.kind bits: what the plugin provides. */
#define MEMD_KIND_STORE    0x1u /* .store is set */
#define MEMD_KIND_VECTOR   0x2u /* .vector is set */
#define MEMD_KIND_STRATEGY 0x4u /* .strategy is set */
#define MEMD_KIND_EMBEDDER 0x8u /* .embedder is set */

/* memd_plugin.flags */
#define MEMD_PLUGIN_THREADSAFE 0x1u /* ops may run concurrently on one instance */

/* memd_config_key.type */
#define MEMD_CONFIG_STRING 1u
#define MEMD_CONFIG_INT    2u
#define MEMD_CONFIG_DOUBLE 3u
#define MEMD_CONFIG_BOOL   4u
#define MEMD_CONFIG_JSON   5u /* any YAML/JSON value, handed over as JSON text */

/* memd_config_key.flags */
#define MEMD_CONFIG_REQUIRED 0x1u
#define MEMD_CONFIG_SECRET   0x2u /* never logged or echoed */

/* One key of the plugin's config node. The host refuses keys not listed. */
typedef struct memd_config_key {
	uint32_t struct_size;            /* since 1.0 */
	uint32_t type;                   /* since 1.0: MEMD_CONFIG_* */
	uint32_t flags;                  /* since 1.0: MEMD_CONFIG_REQUIRED|SECRET */
	uint32_t reserved;               /* since 1.0 */
	const char *name;                /* since 1.0 */
	const char *default_value;       /* since 1.0: as YAML scalar text; NULL = none */
	const char *help;                /* since 1.0: one line */
	/* since 1.1: for a STRING key, the only values it takes (NULL-terminated;
	 * the default must be one of them); the host refuses any other value
	 * before init, with the config's file:line. NULL = any string. */
	const char *const *choices;
} memd_config_key;

typedef struct memd_plugin {
	uint32_t struct_size;            /* since 1.0: sizeof(memd_plugin) as built */
	uint32_t abi_major;              /* since 1.0: MEMD_ABI_MAJOR */
	uint32_t abi_minor;              /* since 1.0: minimum host minor needed */
	uint32_t kind;                   /* since 1.0: MEMD_KIND_* bits */
	uint32_t flags;                  /* since 1.0: MEMD_PLUGIN_* */
	uint32_t reserved;               /* since 1.0 */
	const char *name;                /* since 1.0: [a-z0-9_]+, as named in config */
	const char *version;             /* since 1.0: the plugin's own version */
	const char *description;         /* since 1.0: one line */
	/* since 1.0: NULL-terminated array of the config keys it accepts
	 * ("plugin" itself is the host's and never listed); NULL = none. */
	const memd_config_key *const *config_keys;
	/* since 1.0: create an instance from host->config_*. On failure fill
	 * err, return a negative code, leave *ret_instance untouched. Runs on
	 * the host's main thread: do process-wide set-up here. */
	int32_t (*init)(const memd_host *host, void **ret_instance, memd_error *err);
	/* since 1.0: destroy an instance; accepts NULL. Main thread. */
	void (*fini)(void *instance);
	const memd_store_ops *store;         /* since 1.0: kind STORE */
	const memd_vector_ops *vector;       /* since 1.0: kind VECTOR */
	const memd_strategy_ops *strategy;   /* since 1.0: kind STRATEGY */
	const memd_embedder_ops *embedder;   /* since 1.0: kind EMBEDDER */
} memd_plugin;

typedef const memd_plugin *(*memd_plugin_entry_fn)(void);

#if defined(__GNUC__)
#define MEMD_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define MEMD_PLUGIN_EXPORT
#endif

/* Declared here so a plugin's definition is checked against it. */
MEMD_PLUGIN_EXPORT const memd_plugin *memd_plugin_entry_v1(void);

/* Fill err (if not NULL) and return code: for plugin and host code alike. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
static inline int32_t memd_error_set(memd_error *err, int32_t code, uint32_t flags,
				     const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static inline int32_t memd_error_set(memd_error *err, int32_t code, uint32_t flags,
				     const char *fmt, ...)
{
	if (err) {
		va_list ap;
		err->struct_size = sizeof(*err);
		err->code = code;
		err->flags = flags;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return code;
}

#ifdef __cplusplus
}
#endif
#endif /* MEMD_PLUGIN_H */
