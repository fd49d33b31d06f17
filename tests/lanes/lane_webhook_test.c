/* SPDX-License-Identifier: MIT */
/* lanes/lane_webhook against the webhook receiver stand-in
 * (tests/standins/webhook_standin.py, started by with_standins.py
 * --webhook), which checks each delivery's signature with its own HMAC:
 * signed headers, retries with backoff on 5xx, 429, dropped connections
 * and timeouts (not on other 4xx), giving up after the configured
 * retries, messages that name the status but never the secret, bad
 * hooks, cancellation. Criterion runs tests at once: each delivers to a
 * path of its own, where the receiver keeps its plan and records. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lanes/lane_webhook.h"
#include "standin_client.h"

#define BODY "{\"event\":\"lane.finalized\",\"lane\":\"telegram:dm:12345\"}"
#define TS 1700000000
#define FAST_BACKOFF_MS 1  /* retries at once: the tests count attempts, not time */
#define ATTEMPT_TIMEOUT_MS 3000 /* ample for the receiver's answer on a busy machine */
#define SLOW_ANSWER "10000"  /* ms: far beyond an attempt's timeout */

#define PART_MAX 200 /* bytes of the receiver's root URL, and of a test's path */
#define URL_MAX 512  /* a root and a path with some more */

static char base[PART_MAX], path[PART_MAX], url[URL_MAX];
static const char *secret;

static void setup(void)
{
	memd_error err = { .struct_size = sizeof(err) };

	secret = sc_env("MEMD_WEBHOOK_SECRET");
	cr_assert_eq(lane_webhook_init(&err), 0, "%s", err.msg);
}

/* This test's hook: MEMD_WEBHOOK_STANDIN_URL + "/" + name. */
static void use_path(const char *name)
{
	const char *hook = sc_env("MEMD_WEBHOOK_STANDIN_URL");
	const char *p = strstr(hook, "://");

	p = p ? strchr(p + 3, '/') : NULL;
	cr_assert_not_null(p, "%s has no path", hook);
	snprintf(base, sizeof(base), "%.*s", (int)(p - hook), hook);
	snprintf(path, sizeof(path), "%s/%s", p, name);
	snprintf(url, sizeof(url), "%s%s", base, path);
}

static void teardown(void)
{
	lane_webhook_cleanup();
}

/* json: the plan's members after "path" (see webhook_standin.py). */
static void plan(const char *json)
{
	char u[URL_MAX], body[URL_MAX];

	snprintf(u, sizeof(u), "%s/__standin/plan", base);
	snprintf(body, sizeof(body), "{\"path\": \"%s\", %s}", path, json);
	json_decref(sc_post(u, body));
}

static json_t *deliveries(void)
{
	char u[URL_MAX];

	snprintf(u, sizeof(u), "%s/__standin/requests?path=%s", base, path);
	return sc_get(u);
}

static lane_webhook hook_to(const char *target, uint32_t retries)
{
	return (lane_webhook){ .url = target, .secret = secret, .timeout_ms = ATTEMPT_TIMEOUT_MS,
			       .retries = retries, .backoff_ms = FAST_BACKOFF_MS };
}

/* Every delivery so far was signed right, stamped TS, JSON, BODY. */
static void expect_all_signed(json_t *reqs)
{
	size_t i;
	json_t *r;

	json_array_foreach(reqs, i, r) {
		cr_expect(json_is_true(json_object_get(r, "signature_ok")), "delivery %zu: %s", i,
			  json_string_value(json_object_get(r, "signature")));
		cr_expect_str_eq(json_string_value(json_object_get(r, "timestamp")), "1700000000");
		cr_expect_str_eq(json_string_value(json_object_get(r, "content_type")),
				 "application/json");
		cr_expect_str_eq(json_string_value(json_object_get(r, "body")), BODY);
		cr_expect_str_eq(json_string_value(json_object_get(r, "path")), path);
	}
}

static void expect_no_secret(const memd_error *err)
{
	cr_expect_null(strstr(err->msg, secret), "the secret leaked: %s", err->msg);
}

TestSuite(lane_webhook, .init = setup, .fini = teardown);

Test(lane_webhook, the_signature_is_hmac_of_timestamp_dot_body)
{
	char sig[LANE_WEBHOOK_SIGNATURE_LEN + 1];

	/* Python: hmac.new(b"s3cret", b'1700000000.{"lane":"telegram:dm:1"}',
	 * hashlib.sha256).hexdigest() */
	lane_webhook_sign("s3cret", TS, "{\"lane\":\"telegram:dm:1\"}", sig);
	cr_expect_str_eq(sig,
			 "sha256=ff52fec044a41878d81e8d20408c106cad39ad6e8a8c666e9c24f4566cc8f601");
}

Test(lane_webhook, a_signed_delivery_is_accepted_once)
{
	use_path("a_signed_delivery_is_accepted_once");

	memd_error err = { .struct_size = sizeof(err) };
	lane_webhook h = hook_to(url, 3);
	json_t *reqs;

	cr_assert_eq(lane_webhook_post(&h, NULL, BODY, TS, &err), 0, "%s", err.msg);
	reqs = deliveries();
	cr_expect_eq(json_array_size(reqs), 1);
	expect_all_signed(reqs);
	cr_expect_eq(json_integer_value(json_object_get(json_array_get(reqs, 0), "status")), 200);
	json_decref(reqs);
}

Test(lane_webhook, server_errors_and_429_are_retried_until_accepted)
{
	use_path("server_errors_and_429_are_retried_until_accepted");

	memd_error err = { .struct_size = sizeof(err) };
	lane_webhook h = hook_to(url, 3);
	json_t *reqs;

	plan("\"fail\": 2, \"status\": 503");
	cr_assert_eq(lane_webhook_post(&h, NULL, BODY, TS, &err), 0, "%s", err.msg);
	plan("\"fail\": 1, \"status\": 429, \"retry_after\": 0");
	cr_assert_eq(lane_webhook_post(&h, NULL, BODY, TS, &err), 0, "%s", err.msg);
	reqs = deliveries();
	cr_expect_eq(json_array_size(reqs), 5); /* 503, 503, 200, 429, 200 */
	expect_all_signed(reqs);
	json_decref(reqs);
}

Test(lane_webhook, gives_up_after_the_retries_with_the_status)
{
	use_path("gives_up_after_the_retries_with_the_status");

	memd_error err = { .struct_size = sizeof(err) };
	lane_webhook h = hook_to(url, 2);
	json_t *reqs;

	plan("\"fail\": 10, \"status\": 500");
	cr_expect_eq(lane_webhook_post(&h, NULL, BODY, TS, &err), MEMD_EUNAVAIL);
	cr_expect(err.flags & MEMD_ERROR_RETRYABLE);
	cr_expect_not_null(strstr(err.msg, "HTTP 500"), "%s", err.msg);
	cr_expect_not_null(strstr(err.msg, "attempt 3 of 3"), "%s", err.msg);
	expect_no_secret(&err);
	reqs = deliveries();
	cr_expect_eq(json_array_size(reqs), 3); /* the first attempt and 2 retries */
	json_decref(reqs);

	h.retries = 0;
	cr_expect_eq(lane_webhook_post(&h, NULL, BODY, TS, &err), MEMD_EUNAVAIL);
	reqs = deliveries();
	cr_expect_eq(json_array_size(reqs), 4);
	json_decref(reqs);
}

Test(lane_webhook, other_client_errors_are_not_retried)
{
	use_path("other_client_errors_are_not_retried");

	memd_error err = { .struct_size = sizeof(err) };
	lane_webhook h = hook_to(url, 3);
	json_t *reqs;

	plan("\"fail\": 5, \"status\": 404");
	cr_expect_eq(lane_webhook_post(&h, NULL, BODY, TS, &err), MEMD_EIO);
	cr_expect_not_null(strstr(err.msg, "HTTP 404"), "%s", err.msg);
	reqs = deliveries();
	cr_expect_eq(json_array_size(reqs), 1);
	json_decref(reqs);
}

Test(lane_webhook, a_wrong_secret_is_refused_by_the_receiver_and_not_leaked)
{
	use_path("a_wrong_secret_is_refused_by_the_receiver_and_not_leaked");

	memd_error err = { .struct_size = sizeof(err) };
	lane_webhook h = hook_to(url, 3);
	json_t *reqs;

	h.secret = "not-the-receivers-secret";
	cr_expect_eq(lane_webhook_post(&h, NULL, BODY, TS, &err), MEMD_EIO);
	cr_expect_not_null(strstr(err.msg, "HTTP 401"), "%s", err.msg);
	cr_expect_null(strstr(err.msg, "not-the-receivers-secret"), "%s", err.msg);
	reqs = deliveries();
	cr_expect_eq(json_array_size(reqs), 1);
	cr_expect(json_is_false(json_object_get(json_array_get(reqs, 0), "signature_ok")));
	json_decref(reqs);
}

Test(lane_webhook, dropped_connections_and_slow_answers_are_retried)
{
	use_path("dropped_connections_and_slow_answers_are_retried");

	memd_error err = { .struct_size = sizeof(err) };
	lane_webhook h = hook_to(url, 3);
	json_t *reqs;

	plan("\"fail\": 1, \"mode\": \"drop\"");
	cr_assert_eq(lane_webhook_post(&h, NULL, BODY, TS, &err), 0, "%s", err.msg);
	plan("\"fail\": 1, \"mode\": \"delay\", \"delay_ms\": " SLOW_ANSWER);
	cr_assert_eq(lane_webhook_post(&h, NULL, BODY, TS, &err), 0, "%s", err.msg);
	reqs = deliveries();
	cr_expect_eq(json_array_size(reqs), 4);
	cr_expect_str_eq(json_string_value(json_object_get(json_array_get(reqs, 0), "status")),
			 "dropped");
	expect_all_signed(reqs);
	json_decref(reqs);
}

Test(lane_webhook, an_attempt_that_times_out_names_its_timeout)
{
	use_path("an_attempt_that_times_out_names_its_timeout");

	memd_error err = { .struct_size = sizeof(err) };
	lane_webhook h = hook_to(url, 0);

	plan("\"fail\": 1, \"mode\": \"delay\", \"delay_ms\": " SLOW_ANSWER);
	cr_expect_eq(lane_webhook_post(&h, NULL, BODY, TS, &err), MEMD_EUNAVAIL);
	cr_expect_not_null(strstr(err.msg, "no answer within 3000 ms"), "%s", err.msg);
}

Test(lane_webhook, no_receiver_is_unavailable_and_the_url_is_shown_without_credentials)
{
	use_path("no_receiver_is_unavailable_and_the_url_is_shown_without_credentials");

	memd_error err = { .struct_size = sizeof(err) };
	char target[200];
	lane_webhook h;

	snprintf(target, sizeof(target), "http://bot:hunter2@127.0.0.1:%d/hook?token=tok123",
		 sc_closed_port());
	h = hook_to(target, 2);
	cr_expect_eq(lane_webhook_post(&h, NULL, BODY, TS, &err), MEMD_EUNAVAIL);
	cr_expect(err.flags & MEMD_ERROR_RETRYABLE);
	cr_expect_null(strstr(err.msg, "hunter2"), "%s", err.msg);
	cr_expect_null(strstr(err.msg, "tok123"), "%s", err.msg);
	cr_expect_not_null(strstr(err.msg, "http://127.0.0.1:"), "%s", err.msg);
	expect_no_secret(&err);
}

Test(lane_webhook, bad_hooks_are_refused_before_sending)
{
	use_path("bad_hooks_are_refused_before_sending");

	memd_error err = { .struct_size = sizeof(err) };
	lane_webhook h = hook_to(url, 3);
	json_t *reqs;

	h.url = "";
	cr_expect_eq(lane_webhook_post(&h, NULL, BODY, TS, &err), MEMD_EINVAL);
	cr_expect_str_eq(err.msg, "finalize webhook: no URL");
	h.url = "ftp://127.0.0.1/hook";
	cr_expect_eq(lane_webhook_post(&h, NULL, BODY, TS, &err), MEMD_EINVAL);
	cr_expect_str_eq(err.msg, "finalize webhook: the URL must start with http:// or https://");
	h.url = "http://127.0.0.1/a b";
	cr_expect_eq(lane_webhook_post(&h, NULL, BODY, TS, &err), MEMD_EINVAL);
	cr_expect_str_eq(err.msg, "finalize webhook: the URL contains white space");
	h.url = url;
	h.timeout_ms = 0;
	cr_expect_eq(lane_webhook_post(&h, NULL, BODY, TS, &err), MEMD_EINVAL);
	cr_expect_str_eq(err.msg, "finalize webhook: timeout_ms must be at least 1");
	h.timeout_ms = ATTEMPT_TIMEOUT_MS;
	cr_expect_eq(lane_webhook_post(&h, NULL, NULL, TS, &err), MEMD_EINVAL);
	cr_expect_str_eq(err.msg, "finalize webhook: no body");
	cr_expect_eq(lane_webhook_post(NULL, NULL, BODY, TS, &err), MEMD_EINVAL);
	reqs = deliveries();
	cr_expect_eq(json_array_size(reqs), 0);
	json_decref(reqs);
}

Test(lane_webhook, a_cancelled_call_sends_nothing)
{
	use_path("a_cancelled_call_sends_nothing");

	memd_error err = { .struct_size = sizeof(err) };
	volatile int32_t cancel = 1;
	memd_call call = { .struct_size = sizeof(call), .cancel = &cancel };
	lane_webhook h = hook_to(url, 3);
	json_t *reqs;

	cr_expect_eq(lane_webhook_post(&h, &call, BODY, TS, &err), MEMD_ECANCELED);
	reqs = deliveries();
	cr_expect_eq(json_array_size(reqs), 0);
	json_decref(reqs);
}
