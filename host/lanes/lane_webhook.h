/* SPDX-License-Identifier: MIT */
/* lane_webhook: POST a JSON body to a configured URL, signed so the
 * receiver can tell it came from this memd: headers
 *   Content-Type: application/json
 *   X-Memd-Timestamp: <unix seconds>
 *   X-Memd-Signature: sha256=<hex HMAC-SHA256(secret, "<timestamp>.<body>")>
 * via libcurl (no signal handlers), with a timeout per attempt and retries
 * with backoff on 5xx, 429 and network errors. */
#ifndef MEMD_HOST_LANE_WEBHOOK_H
#define MEMD_HOST_LANE_WEBHOOK_H

#include <stdint.h>

#include <memd/abi.h>

#define LANE_WEBHOOK_TIMEOUT_MS_DEFAULT 5000
#define LANE_WEBHOOK_RETRIES_DEFAULT 3
#define LANE_WEBHOOK_BACKOFF_MS_DEFAULT 500   /* the first retry's wait; doubles */
#define LANE_WEBHOOK_BACKOFF_MAX_MS 30000     /* no wait is longer */
#define LANE_WEBHOOK_TIMESTAMP_HEADER "X-Memd-Timestamp"
#define LANE_WEBHOOK_SIGNATURE_HEADER "X-Memd-Signature"
#define LANE_WEBHOOK_SIGNATURE_PREFIX "sha256="

/* A webhook target; borrowed strings. */
typedef struct lane_webhook {
	const char *url;      /* http:// or https:// */
	const char *secret;   /* the HMAC key; never in a message or log */
	int64_t timeout_ms;   /* per attempt, >= 1 */
	uint32_t retries;     /* attempts after the first */
	int64_t backoff_ms;   /* wait before the first retry, doubling; 0 = the default */
} lane_webhook;

/* libcurl's global set-up, once per user of lane_webhook_post before it
 * (and before other threads run); _cleanup after the last post.
 * lane_webhook_init: 0 or MEMD_EINTERNAL. */
int32_t lane_webhook_init(memd_error *err);
void lane_webhook_cleanup(void);

/* Sign and POST body (JSON text) to hook->url with timestamp_s as the
 * X-Memd-Timestamp (the caller's clock). Retries up to hook->retries
 * times on a 5xx or 429 answer (honouring a Retry-After up to the
 * maximum backoff) or a network error; any other answer ends it. call
 * (may be NULL) bounds the whole with its deadline and cancel. Returns 0
 * on a 2xx answer; MEMD_EINVAL for a bad hook (no URL, not http(s), a
 * timeout below 1), MEMD_EUNAVAIL (+ RETRYABLE) when the last attempt got
 * a 5xx/429 or no answer, MEMD_EIO for another status, MEMD_ETIMEDOUT,
 * MEMD_ECANCELED, MEMD_ENOMEM. The message names the URL and the HTTP
 * status, never the secret. */
int32_t lane_webhook_post(const lane_webhook *hook, const memd_call *call, const char *body,
			  int64_t timestamp_s, memd_error *err);

/* The signature header's value for body at timestamp_s:
 * "sha256=" + 64 hex digits + NUL. */
#define LANE_WEBHOOK_SIGNATURE_LEN (sizeof(LANE_WEBHOOK_SIGNATURE_PREFIX) - 1 + 64)
void lane_webhook_sign(const char *secret, int64_t timestamp_s, const char *body,
		       char out[LANE_WEBHOOK_SIGNATURE_LEN + 1]);

#endif
