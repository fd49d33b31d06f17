/* SPDX-License-Identifier: MIT */
/*
 * memd plugin ABI, version 1: services the host offers a plugin.
 *
 * The host passes a memd_host to the plugin's init. The table and every
 * string it hands out stay valid until the plugin's fini returns, so a
 * plugin may keep the pointer. A member the host does not provide is NULL
 * (or absent: check struct_size with MEMD_HOST_HAS()).
 * Plugins link no host symbols: this table is the only way in.
 */
#ifndef MEMD_HOST_H
#define MEMD_HOST_H

#include "abi.h"

#ifdef __cplusplus
extern "C" {
#endif

struct memd_event;

/* Receives text (a summary, a JSON document). The callee must copy what it
 * keeps; text is borrowed for the call. Return 0, or a negative MEMD_E* to
 * stop the producer (which then returns that code). */
typedef struct memd_text_sink {
	uint32_t struct_size;            /* since 1.0 */
	void *userdata;                  /* since 1.0 */
	int32_t (*text)(void *userdata, const char *text, size_t len); /* since 1.0 */
} memd_text_sink;

typedef struct memd_host memd_host;
struct memd_host {
	uint32_t struct_size;            /* since 1.0 */
	uint32_t abi_major;              /* since 1.0: the host's MEMD_ABI_MAJOR */
	uint32_t abi_minor;              /* since 1.0: the host's MEMD_ABI_MINOR */
	uint32_t reserved;               /* since 1.0 */
	void *host_data;                 /* since 1.0: the host's; do not touch */

	/* since 1.0: log one line, tagged by the host with the plugin's name
	 * and instance. printf-style; the line must not contain secrets. */
	void (*log)(const memd_host *host, int32_t level, const char *fmt, ...)
		__attribute__((format(printf, 3, 4)));

	/* since 1.0: the host's allocator; memory from alloc/realloc is freed
	 * with free. Plugins may use their own malloc for private memory. */
	void *(*alloc)(size_t size);
	void *(*realloc)(void *ptr, size_t size);
	void (*free)(void *ptr);

	/* since 1.0: wall clock (CLOCK_REALTIME) and monotonic clock, in us. */
	int64_t (*now_us)(const memd_host *host);
	int64_t (*monotonic_us)(const memd_host *host);

	/* since 1.0: the plugin instance's own config node, validated by the
	 * host against the descriptor's key schema with defaults filled in.
	 * Each returns 0 and writes *ret, MEMD_ENOTFOUND if the key has no
	 * value and no default, or MEMD_EINVAL if it has another type.
	 * Strings (and JSON text for MEMD_CONFIG_JSON keys) are borrowed until
	 * fini. Booleans are 0 or 1. */
	int32_t (*config_string)(const memd_host *host, const char *key, const char **ret);
	int32_t (*config_int)(const memd_host *host, const char *key, int64_t *ret);
	int32_t (*config_double)(const memd_host *host, const char *key, double *ret);
	int32_t (*config_bool)(const memd_host *host, const char *key, int32_t *ret);
	int32_t (*config_json)(const memd_host *host, const char *key, const char **ret);

	/* since 1.0: tokens in UTF-8 text of len bytes, by the host's configured
	 * tokenizer (approximate unless an exact one is configured). */
	int32_t (*count_tokens)(const memd_host *host, const char *text, size_t len,
				int64_t *ret_tokens);

	/* since 1.0: fold events (in seq order) and an optional previous
	 * summary into a new summary of at most target_tokens, delivered to
	 * out. May block on the network; honours call->deadline_us. NULL when
	 * the host has no summarizer. */
	int32_t (*summarize)(const memd_host *host, const memd_call *call,
			     const char *previous_summary,
			     const struct memd_event *const *events, uint32_t n_events,
			     int64_t target_tokens, const memd_text_sink *out,
			     memd_error *err);

	/* since 1.0: write a new UUIDv7 in canonical text form (36 chars +
	 * NUL) to buf. */
	int32_t (*uuid_v7)(const memd_host *host, char buf[37]);
};

/* True if the host table is large enough to contain member m. */
#define MEMD_HOST_HAS(host, m) \
	((host)->struct_size >= offsetof(memd_host, m) + sizeof((host)->m) && (host)->m != NULL)

#ifdef __cplusplus
}
#endif
#endif /* MEMD_HOST_H */
