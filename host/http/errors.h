/* SPDX-License-Identifier: MIT */
/*
 * http errors: the one table from error codes (MEMD_E* and the HTTP
 * layer's own HTTP_E*) to HTTP statuses, and the error body
 * {"error": {"code", "message", "retryable"}} every failure is sent as.
 */
#ifndef MEMD_HTTP_ERRORS_H
#define MEMD_HTTP_ERRORS_H

#include <stddef.h>
#include <stdint.h>

#include <memd/abi.h>

/* Failures only the HTTP layer knows (outside the MEMD_E* range). */
#define HTTP_E_NOROUTE   (-1001) /* no such path: 404 */
#define HTTP_E_METHOD    (-1002) /* path exists, method does not: 405 */
#define HTTP_E_TIMEOUT   (-1003) /* request not received within the timeout: 408 */
#define HTTP_E_HEADERS   (-1004) /* request headers over the limit: 431 */
#define HTTP_E_DRAINING  (-1005) /* shutting down: 503, retryable */
#define HTTP_E_MEDIA     (-1006) /* a body that is not application/json: 415 */
#define HTTP_E_URI       (-1007) /* request target over the limit: 414 */

/* Seconds sent in Retry-After with every retryable (503) error. */
#define HTTP_RETRY_AFTER_SECONDS 1

typedef struct http_error_kind {
	int32_t code;        /* MEMD_E* or HTTP_E* */
	unsigned status;     /* HTTP status */
	const char *name;    /* the "code" member of the error body */
	int retryable;       /* always sent with 503 and Retry-After */
} http_error_kind;

/* The table row for code; flags are memd_error.flags: MEMD_ERROR_RETRYABLE
 * turns any code that is not a client error (4xx) into 503 "unavailable".
 * Unknown codes map to 500 "internal". Never NULL; static storage. */
const http_error_kind *http_error_lookup(int32_t code, uint32_t flags);

/* The error body for kind and message (a NUL-terminated string, any
 * bytes: invalid UTF-8 is replaced). malloc'd compact JSON; NULL on ENOMEM. */
char *http_error_body(const http_error_kind *kind, const char *message);

/* Every row of the table, for the spec-coverage test: *ret_n rows. */
const http_error_kind *http_error_table(size_t *ret_n);

#endif
