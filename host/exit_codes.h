/* SPDX-License-Identifier: MIT */
/*
 * exit_codes: the exit status of every memd command, `memd serve`
 * included. This table is the only list: `memd --help` prints it,
 * README.md's table is checked against it (tests/unit/cli_test.sh), and
 * exit_for_error / exit_for_start map MEMD_E* codes onto it.
 */
#ifndef MEMD_HOST_EXIT_CODES_H
#define MEMD_HOST_EXIT_CODES_H

#include <stdint.h>

#include <memd/abi.h>

/* X(NAME, status, what it means): one line of the README's table each. */
#define MEMD_EXIT_CODES(X)                                                                   \
	X(OK, 0, "success")                                                                  \
	X(FAIL, 1, "failure: an internal or I/O error while running")                        \
	X(USAGE, 2, "bad command line")                                                      \
	X(INVALID, 3, "invalid request (bad JSON, id, event, ...)")                          \
	X(NOTFOUND, 4, "not found")                                                          \
	X(CONFLICT, 5, "conflict (expected_version, an id that exists)")                     \
	X(UNAVAILABLE, 6, "unavailable: a backend is down, timed out or in use; retry later") \
	X(CONFIG, 7, "cannot start: the config (or its file), a plugin, a path or address it names")

#define MEMD_EXIT_ENUM(name, status, what) EXIT_##name = status,
enum memd_exit_code { MEMD_EXIT_CODES(MEMD_EXIT_ENUM) };
#undef MEMD_EXIT_ENUM

/* The exit status for a failed request (a scripting command's call). */
static inline int exit_for_error(int32_t code)
{
	switch (code) {
	case MEMD_OK:
		return EXIT_OK;
	case MEMD_EINVAL:
	case MEMD_ETOOBIG:
		return EXIT_INVALID;
	case MEMD_ENOTFOUND:
		return EXIT_NOTFOUND;
	case MEMD_ECONFLICT:
		return EXIT_CONFLICT;
	case MEMD_EUNAVAIL:
	case MEMD_ETIMEDOUT:
		return EXIT_UNAVAILABLE;
	case MEMD_EABI:
		return EXIT_CONFIG;
	default:
		return EXIT_FAIL;
	}
}

/* The exit status for a failure to start (memd_open, `memd serve`):
 * retryable conditions are UNAVAILABLE, running out of memory or a bug
 * FAIL, anything else (the config, a plugin, a path or address it names)
 * CONFIG. */
static inline int exit_for_start(int32_t code)
{
	switch (code) {
	case MEMD_OK:
		return EXIT_OK;
	case MEMD_EUNAVAIL:
	case MEMD_ETIMEDOUT:
		return EXIT_UNAVAILABLE;
	case MEMD_ENOMEM:
	case MEMD_EINTERNAL:
		return EXIT_FAIL;
	default:
		return EXIT_CONFIG;
	}
}

#endif
