/* SPDX-License-Identifier: MIT */
/*
 * memd plugin ABI, version 1: the basic types every other header uses.
 *
 * Rules (api/README.md states them in full):
 *  - every struct that crosses the host/plugin boundary starts with
 *    uint32_t struct_size and only ever grows at the end (minor bump);
 *  - fixed-width integers and #define'd constants only: no enum, bool, long;
 *  - every member carries a "since 1.N" comment;
 *  - functions return int32_t: 0 or a negative MEMD_E* code, and fill a
 *    caller-owned memd_error.
 */
#ifndef MEMD_ABI_H
#define MEMD_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI this header describes. A plugin states in its descriptor the
 * *minimum* host minor it needs; the host accepts it iff the majors are
 * equal and the plugin's minor is <= the host's. */
#define MEMD_ABI_MAJOR 1
#define MEMD_ABI_MINOR 6

/* Name of the one symbol a plugin exports. */
#define MEMD_PLUGIN_ENTRY_SYMBOL "memd_plugin_entry_v1"

/* ---- error codes (negative; 0 is success) ---------------------------- */
#define MEMD_OK         0
#define MEMD_EINVAL    (-1)  /* bad input: 400 */
#define MEMD_ENOTFOUND (-2)  /* no such session/artifact/...: 404 */
#define MEMD_ECONFLICT (-3)  /* expected_version mismatch, id clash: 409 */
#define MEMD_ENOMEM    (-4)
#define MEMD_EIO       (-5)  /* storage failed */
#define MEMD_ENOTSUP   (-6)  /* operation not provided by this plugin */
#define MEMD_EUNAVAIL  (-7)  /* backend unreachable; usually RETRYABLE: 503 */
#define MEMD_ETIMEDOUT (-8)  /* deadline in memd_call passed */
#define MEMD_ECANCELED (-9)  /* memd_call.cancel was raised */
#define MEMD_ETOOBIG   (-10) /* payload or batch over a limit: 413 */
#define MEMD_EABI      (-11) /* plugin refused by the loader */
#define MEMD_EINTERNAL (-12) /* a bug: 500 */
#define MEMD_EAUTH     (-13) /* missing/invalid credentials: 401 */
#define MEMD_EFORBIDDEN (-14) /* credentials lack the scope: 403 */

/* memd_error.flags */
#define MEMD_ERROR_RETRYABLE 0x1u /* the same call may succeed later */
/* Since 1.1: why a store's storage refused the call (at most one of
 * these; a 1.0 plugin sets none, and a host ignores bits it does not
 * know, so neither side needs the other's minor for them). A host reports the store as not ready (/readyz) from a write
 * that fails with one of them until a write succeeds again. */
#define MEMD_ERROR_STORAGE_FULL     0x2u /* no space: disk full, quota, file size limit */
#define MEMD_ERROR_STORAGE_READONLY 0x4u /* read-only file system, file or database */
#define MEMD_ERROR_STORAGE_IO       0x8u /* I/O error or a damaged file */
#define MEMD_ERROR_STORAGE_MASK     0xeu

#define MEMD_ERROR_MSG_MAX 256

/* A caller-owned error report. The callee writes it only when it returns a
 * negative code; msg is always NUL-terminated and never holds secrets. */
typedef struct memd_error {
	uint32_t struct_size;            /* since 1.0 */
	int32_t code;                    /* since 1.0: MEMD_E*, equals the return */
	uint32_t flags;                  /* since 1.0: MEMD_ERROR_* */
	char msg[MEMD_ERROR_MSG_MAX];    /* since 1.0 */
} memd_error;

/* Per-call context, passed first to every data-path call. Borrowed. */
typedef struct memd_call {
	uint32_t struct_size;            /* since 1.0 */
	uint32_t flags;                  /* since 1.0: reserved, 0 */
	int64_t deadline_us;             /* since 1.0: CLOCK_MONOTONIC us; 0 = none */
	const char *request_id;          /* since 1.0: for logs; may be NULL */
	const volatile int32_t *cancel;  /* since 1.0: nonzero = give up; may be NULL */
	/* since 1.0: out-counter the callee adds the number of stored rows (or
	 * records) it examined to; may be NULL. Lets tests prove a query reads
	 * only what it needs without timing anything. */
	uint64_t *rows_read;
} memd_call;

/* Every read and write is scoped. session may be NULL only where a call
 * says so (user-wide calls). All strings are NUL-terminated UTF-8. */
typedef struct memd_scope {
	uint32_t struct_size;            /* since 1.0 */
	uint32_t reserved;               /* since 1.0: 0 */
	const char *app;                 /* since 1.0 */
	const char *user;                /* since 1.0 */
	const char *session;             /* since 1.0 */
} memd_scope;

/* Log levels for memd_host.log. */
#define MEMD_LOG_ERROR 0
#define MEMD_LOG_WARN  1
#define MEMD_LOG_INFO  2
#define MEMD_LOG_DEBUG 3

/* Limits every component agrees on. */
#define MEMD_ID_MAX 255 /* bytes in an app, user, session, event or cursor id */

#ifdef __cplusplus
}
#endif
#endif /* MEMD_ABI_H */
