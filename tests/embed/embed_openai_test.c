/* SPDX-License-Identifier: MIT */
/*
 * The built-in openai embedder (host/index/embed_openai.c) against the
 * local OpenAI embeddings stand-in (tests/standins/
 * openai_embeddings_standin.py, started around this program by
 * with_standins.py --openai). Every test uses its own model name, and the
 * stand-in keeps settings and records per model, so tests run in
 * parallel against one stand-in.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "embed_openai.h"
#include "standin_client.h"

#define ET_NAME_MAX 96
#define ET_DIM 8                /* the stand-in's default dimension */
#define ET_TEXTS 10
#define ET_SLOW_MS 3000         /* a "timeout" answer comes after this */
#define ET_SHORT_TIMEOUT_MS 200

typedef struct et {
	config_node *cfg;
	void *inst;
	const memd_embedder_ops *ops;
	memd_error err;
} et;

static void et_model(const char *tag, char out[ET_NAME_MAX])
{
	static unsigned counter;
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(out, ET_NAME_MAX, "m_%s_%ld_%ld_%u", tag, (long)getpid(), (long)ts.tv_nsec,
		 counter++);
}

/* Set the stand-in's behaviour for model (JSON members, e.g.
 * "\"dim\": 12"). */
static void et_standin_model(const char *model, const char *members)
{
	char *url, *body;

	cr_assert(asprintf(&url, "%s/../__standin/models", sc_env("MEMD_OPENAI_STANDIN_URL")) >= 0);
	cr_assert(asprintf(&body, "{\"model\": \"%s\", %s}", model, members) >= 0);
	json_decref(sc_post(url, body));
	free(url);
	free(body);
}

/* The stand-in's record of requests naming model. */
static json_t *et_requests(const char *model)
{
	char *url;
	json_t *j;

	cr_assert(asprintf(&url, "%s/../__standin/requests?model=%s",
			   sc_env("MEMD_OPENAI_STANDIN_URL"), model) >= 0);
	j = sc_get(url);
	free(url);
	cr_assert(json_is_array(j));
	return j;
}

static size_t et_count(const char *model)
{
	json_t *r = et_requests(model);
	size_t n = json_array_size(r);

	json_decref(r);
	return n;
}

/* Create the embedder from a YAML map; returns create's code. */
static int32_t et_try_open(et *t, const char *yaml)
{
	int32_t r;

	memset(t, 0, sizeof(*t));
	t->err.struct_size = sizeof(t->err);
	r = config_parse_string(yaml, strlen(yaml), "embed_openai_test", &t->cfg, &t->err);
	cr_assert_eq(r, 0, "config: %s", t->err.msg);
	t->ops = embed_openai_builtin.ops;
	return embed_openai_builtin.create(t->cfg, NULL, &t->inst, &t->err);
}

/* An embedder for model on the stand-in with the right key and extra
 * YAML members (", batch: 3"). */
static void et_open(et *t, const char *model, const char *extra)
{
	char *yaml;

	cr_assert(asprintf(&yaml,
			   "{type: openai, url: \"%s\", model: %s, api_key: \"${OPENAI_API_KEY}\"%s}",
			   sc_env("MEMD_OPENAI_STANDIN_URL"), model, extra ? extra : "") >= 0);
	int32_t r = et_try_open(t, yaml);
	cr_assert_eq(r, 0, "create(%s): %s", yaml, t->err.msg);
	free(yaml);
}

static void et_close(et *t)
{
	embed_openai_builtin.destroy(t->inst);
	config_free(t->cfg);
	memset(t, 0, sizeof(*t));
}

static int32_t et_dim(et *t, uint32_t *dim)
{
	return t->ops->dimension(t->inst, dim, &t->err);
}

static int32_t et_embed(et *t, const char *const *texts, uint32_t n, float *out)
{
	memd_call c = { .struct_size = sizeof(c) };
	return t->ops->embed(t->inst, &c, texts, n, out, &t->err);
}

static double et_norm(const float *v, uint32_t dim)
{
	double s = 0;
	for (uint32_t i = 0; i < dim; i++)
		s += (double)v[i] * v[i];
	return sqrt(s);
}

static const char *const texts10[ET_TEXTS] = {
	"the cat sat on the mat", "dogs bark at night", "a recipe for bread",
	"stock prices fell", "the cat chased a mouse", "rain is expected tomorrow",
	"memd keeps memories", "vectors in qdrant", "a train left at noon",
	"the end",
};

/* ---- dimension ------------------------------------------------------------- */

Test(embed_openai, dimension_is_learned_from_the_endpoint_once)
{
	char model[ET_NAME_MAX];
	uint32_t dim = 0;
	et t;

	et_model("learn", model);
	et_standin_model(model, "\"dim\": 12");
	et_open(&t, model, NULL);
	cr_expect_eq(et_count(model), 0, "create does not touch the network");
	cr_assert_eq(et_dim(&t, &dim), 0, "%s", t.err.msg);
	cr_expect_eq(dim, 12);
	cr_assert_eq(et_dim(&t, &dim), 0, "%s", t.err.msg);
	cr_expect_eq(dim, 12);
	cr_expect_eq(et_count(model), 1, "one probe, then remembered");
	et_close(&t);
}

Test(embed_openai, configured_dimension_needs_no_network_and_is_checked)
{
	char model[ET_NAME_MAX];
	float out[2 * 16];
	uint32_t dim = 0;
	et t;

	et_model("cfgdim", model);
	et_open(&t, model, ", dim: 16"); /* the stand-in makes ET_DIM */
	cr_assert_eq(et_dim(&t, &dim), 0, "%s", t.err.msg);
	cr_expect_eq(dim, 16);
	cr_expect_eq(et_count(model), 0);
	const char *in[] = { "hello", "world" };
	cr_expect_eq(et_embed(&t, in, 2, out), MEMD_ECONFLICT);
	cr_expect(strstr(t.err.msg, "returned 8-dimensional") && strstr(t.err.msg, "expected 16"),
		  "%s", t.err.msg);
	cr_expect_eq(t.err.flags & MEMD_ERROR_RETRYABLE, 0);
	et_close(&t);
}

/* The model changes under a running memd: the learned size is kept and a
 * different one is a clear error, not vectors of the wrong size. */
Test(embed_openai, a_model_that_changes_size_is_a_conflict)
{
	char model[ET_NAME_MAX];
	float out[ET_DIM];
	uint32_t dim = 0;
	et t;

	et_model("change", model);
	et_open(&t, model, NULL);
	cr_assert_eq(et_dim(&t, &dim), 0, "%s", t.err.msg);
	cr_assert_eq(dim, ET_DIM);
	et_standin_model(model, "\"dim\": 5");
	const char *in[] = { "hello" };
	cr_expect_eq(et_embed(&t, in, 1, out), MEMD_ECONFLICT);
	cr_expect(strstr(t.err.msg, "returned 5-dimensional") && strstr(t.err.msg, "expected 8"),
		  "%s", t.err.msg);
	et_close(&t);
}

Test(embed_openai, dimension_without_the_endpoint_is_retryable_and_says_what_to_do)
{
	char *yaml;
	uint32_t dim = 0;
	et t;

	cr_assert(asprintf(&yaml, "{type: openai, url: \"http://127.0.0.1:%d/v1\", model: m}",
			   sc_closed_port()) >= 0);
	cr_assert_eq(et_try_open(&t, yaml), 0, "%s", t.err.msg);
	free(yaml);
	cr_expect_eq(et_dim(&t, &dim), MEMD_EUNAVAIL, "%s", t.err.msg);
	cr_expect_neq(t.err.flags & MEMD_ERROR_RETRYABLE, 0);
	cr_expect(strstr(t.err.msg, "index.vector.embedder.dim"), "%s", t.err.msg);
	et_close(&t);
}

/* ---- batching ------------------------------------------------------------------ */

Test(embed_openai, texts_are_sent_in_batches_and_placed_by_index)
{
	char model[ET_NAME_MAX], single[ET_NAME_MAX];
	float a[ET_TEXTS * ET_DIM], b[ET_TEXTS * ET_DIM];
	uint32_t dim = 0;
	et t, one;

	et_model("batch", model);
	et_model("single", single);
	et_standin_model(model, "\"reverse\": true"); /* data listed backwards */
	et_open(&t, model, ", batch: 3, dim: 8");
	et_open(&one, single, ", batch: 64");
	cr_assert_eq(et_dim(&t, &dim), 0, "%s", t.err.msg);
	cr_assert_eq(et_dim(&one, &dim), 0, "%s", one.err.msg);
	cr_assert_eq(et_embed(&t, texts10, ET_TEXTS, a), 0, "%s", t.err.msg);
	cr_assert_eq(et_embed(&one, texts10, ET_TEXTS, b), 0, "%s", one.err.msg);

	json_t *reqs = et_requests(model), *r;
	size_t i, total = 0;
	cr_expect_eq(json_array_size(reqs), 4, "10 texts in batches of 3: 4 requests");
	json_array_foreach(reqs, i, r) {
		json_int_t n = json_integer_value(json_object_get(r, "inputs"));
		cr_expect_leq(n, 3);
		total += (size_t)n;
	}
	cr_expect_eq(total, ET_TEXTS);
	json_decref(reqs);
	/* Same vectors whatever the batching and the order of the answer. */
	for (size_t k = 0; k < ET_TEXTS * ET_DIM; k++)
		cr_expect_float_eq(a[k], b[k], 1e-6, "component %zu", k);
	for (size_t k = 0; k < ET_TEXTS; k++)
		cr_expect_float_eq(et_norm(a + k * ET_DIM, ET_DIM), 1.0, 1e-5, "unit vector %zu", k);
	et_close(&t);
	et_close(&one);
}

/* A server whose batch limit is below ours refuses the request with its
 * message; memd says so instead of retrying forever. */
Test(embed_openai, a_batch_over_the_servers_limit_is_einval)
{
	char model[ET_NAME_MAX];
	float out[ET_TEXTS * ET_DIM];
	et t;

	et_model("limit", model);
	et_standin_model(model, "\"max_batch\": 4");
	et_open(&t, model, ", batch: 5, dim: 8");
	cr_expect_eq(et_embed(&t, texts10, ET_TEXTS, out), MEMD_EINVAL);
	cr_expect(strstr(t.err.msg, "HTTP 400") && strstr(t.err.msg, "too long"), "%s", t.err.msg);
	cr_expect_eq(et_count(model), 1, "not retried");
	et_close(&t);
}

Test(embed_openai, empty_texts_are_zero_vectors_and_not_sent)
{
	const char *in[] = { "", "  \n", "words here", "" };
	char model[ET_NAME_MAX];
	float out[4 * ET_DIM];
	et t;

	et_model("empty", model);
	et_open(&t, model, ", dim: 8");
	memset(out, 0xff, sizeof(out));
	cr_assert_eq(et_embed(&t, in, 4, out), 0, "%s", t.err.msg);
	cr_expect_float_eq(et_norm(out, ET_DIM), 0.0, 1e-9);
	cr_expect_float_eq(et_norm(out + ET_DIM, ET_DIM), 0.0, 1e-9);
	cr_expect_float_eq(et_norm(out + 2 * ET_DIM, ET_DIM), 1.0, 1e-5);
	cr_expect_float_eq(et_norm(out + 3 * ET_DIM, ET_DIM), 0.0, 1e-9);
	json_t *reqs = et_requests(model);
	cr_expect_eq(json_array_size(reqs), 1);
	cr_expect_eq(json_integer_value(json_object_get(json_array_get(reqs, 0), "inputs")), 1);
	json_decref(reqs);
	/* Nothing but empty texts: no request at all. */
	cr_assert_eq(et_embed(&t, in, 2, out), 0, "%s", t.err.msg);
	cr_expect_eq(et_count(model), 1);
	et_close(&t);
}

/* ---- outages ----------------------------------------------------------------------- */

Test(embed_openai, a_short_outage_is_retried_inside_the_call)
{
	char model[ET_NAME_MAX];
	float out[ET_DIM];
	et t;

	et_model("blip", model);
	et_standin_model(model, "\"mode\": \"fail\", \"status\": 503, \"count\": 2");
	et_open(&t, model, ", dim: 8");
	const char *in[] = { "hello" };
	cr_expect_eq(et_embed(&t, in, 1, out), 0, "%s", t.err.msg);
	cr_expect_eq(et_count(model), 3, "two failures, then success");
	et_close(&t);
}

/* A longer outage: the call fails retryable after its retries (the
 * indexer then pauses and tries later); once the endpoint is back, the
 * same call succeeds. */
Test(embed_openai, an_outage_is_retryable_and_passes)
{
	char model[ET_NAME_MAX];
	float out[ET_DIM];
	et t;

	et_model("outage", model);
	et_standin_model(model, "\"mode\": \"fail\", \"status\": 500");
	et_open(&t, model, ", dim: 8");
	const char *in[] = { "hello" };
	cr_expect_eq(et_embed(&t, in, 1, out), MEMD_EUNAVAIL, "%s", t.err.msg);
	cr_expect_neq(t.err.flags & MEMD_ERROR_RETRYABLE, 0);
	cr_expect(strstr(t.err.msg, "HTTP 500"), "%s", t.err.msg);
	cr_expect_eq(et_count(model), 1 + EMBED_OPENAI_RETRIES);

	et_standin_model(model, "\"mode\": \"drop\"");
	cr_expect_eq(et_embed(&t, in, 1, out), MEMD_EUNAVAIL, "dropped: %s", t.err.msg);
	cr_expect_neq(t.err.flags & MEMD_ERROR_RETRYABLE, 0);

	et_standin_model(model, "\"mode\": \"fail\", \"status\": 429");
	cr_expect_eq(et_embed(&t, in, 1, out), MEMD_EUNAVAIL, "429: %s", t.err.msg);

	et_standin_model(model, "\"mode\": \"ok\"");
	cr_expect_eq(et_embed(&t, in, 1, out), 0, "back: %s", t.err.msg);
	et_close(&t);
}

Test(embed_openai, unreachable_endpoint_is_retryable)
{
	char *yaml;
	float out[ET_DIM];
	et t;

	cr_assert(asprintf(&yaml, "{type: openai, url: \"http://127.0.0.1:%d\", model: m, dim: 8}",
			   sc_closed_port()) >= 0);
	cr_assert_eq(et_try_open(&t, yaml), 0, "%s", t.err.msg);
	free(yaml);
	const char *in[] = { "hello" };
	cr_expect_eq(et_embed(&t, in, 1, out), MEMD_EUNAVAIL, "%s", t.err.msg);
	cr_expect_neq(t.err.flags & MEMD_ERROR_RETRYABLE, 0);
	et_close(&t);
}

Test(embed_openai, a_slow_endpoint_times_out_retryable)
{
	char model[ET_NAME_MAX], extra[64], members[96];
	struct timespec t0, t1;
	float out[ET_DIM];
	et t;

	et_model("slow", model);
	snprintf(members, sizeof(members), "\"mode\": \"timeout\", \"delay_ms\": %d", ET_SLOW_MS);
	et_standin_model(model, members);
	snprintf(extra, sizeof(extra), ", dim: 8, timeout_ms: %d", ET_SHORT_TIMEOUT_MS);
	et_open(&t, model, extra);
	const char *in[] = { "hello" };
	clock_gettime(CLOCK_MONOTONIC, &t0);
	cr_expect_eq(et_embed(&t, in, 1, out), MEMD_EUNAVAIL, "%s", t.err.msg);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	cr_expect_neq(t.err.flags & MEMD_ERROR_RETRYABLE, 0);
	cr_expect_lt((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000, ET_SLOW_MS,
		     "did not wait for the slow answer");

	/* The call's deadline bounds everything: MEMD_ETIMEDOUT. */
	memd_call c = { .struct_size = sizeof(c), .deadline_us = 1 };
	cr_expect_eq(t.ops->embed(t.inst, &c, in, 1, out, &t.err), MEMD_ETIMEDOUT, "%s",
		     t.err.msg);
	volatile int32_t cancel = 1;
	memd_call cc = { .struct_size = sizeof(cc), .cancel = &cancel };
	cr_expect_eq(t.ops->embed(t.inst, &cc, in, 1, out, &t.err), MEMD_ECANCELED, "%s",
		     t.err.msg);
	et_close(&t);
}

/* ---- keys and config ---------------------------------------------------------------- */

Test(embed_openai, api_key_from_config_or_environment_and_a_wrong_one_is_eauth)
{
	char model[ET_NAME_MAX], *yaml;
	float out[ET_DIM];
	et t;

	et_model("key", model);
	const char *in[] = { "hello" };
	/* No api_key in config: $OPENAI_API_KEY (set by with_standins.py). */
	cr_assert(asprintf(&yaml, "{type: openai, url: \"%s\", model: %s, dim: 8}",
			   sc_env("MEMD_OPENAI_STANDIN_URL"), model) >= 0);
	cr_assert_eq(et_try_open(&t, yaml), 0, "%s", t.err.msg);
	free(yaml);
	cr_expect_eq(et_embed(&t, in, 1, out), 0, "key from the environment: %s", t.err.msg);
	et_close(&t);

	cr_assert(asprintf(&yaml, "{type: openai, url: \"%s\", model: %s, dim: 8, "
				  "api_key: sk-wrong-key}",
			   sc_env("MEMD_OPENAI_STANDIN_URL"), model) >= 0);
	cr_assert_eq(et_try_open(&t, yaml), 0, "%s", t.err.msg);
	free(yaml);
	cr_expect_eq(et_embed(&t, in, 1, out), MEMD_EAUTH, "%s", t.err.msg);
	cr_expect_eq(t.err.flags & MEMD_ERROR_RETRYABLE, 0);
	cr_expect_null(strstr(t.err.msg, "sk-wrong-key"), "no key in messages");
	et_close(&t);

	json_t *reqs = et_requests(model);
	cr_expect_eq(json_array_size(reqs), 2, "a refused key is not retried");
	cr_expect_str_eq(json_string_value(json_object_get(json_array_get(reqs, 0), "auth")), "ok");
	cr_expect_str_eq(json_string_value(json_object_get(json_array_get(reqs, 1), "auth")),
			 "wrong");
	json_decref(reqs);
}

Test(embed_openai, url_forms)
{
	char model[ET_NAME_MAX], *yaml, base[256];
	float out[ET_DIM];
	et t;
	const char *in[] = { "hello" };

	et_model("urls", model);
	snprintf(base, sizeof(base), "%s", sc_env("MEMD_OPENAI_STANDIN_URL"));
	cr_assert(strlen(base) > 3);
	const char *suffixes[] = { "", "/", "/embeddings", NULL };
	for (size_t i = 0; suffixes[i]; i++) {
		char url[300];
		snprintf(url, sizeof(url), "%s%s", base, suffixes[i]);
		cr_assert(asprintf(&yaml, "{type: openai, url: \"%s\", model: %s, dim: 8}", url,
				   model) >= 0);
		cr_assert_eq(et_try_open(&t, yaml), 0, "%s", t.err.msg);
		free(yaml);
		cr_expect_eq(et_embed(&t, in, 1, out), 0, "url %s: %s", url, t.err.msg);
		et_close(&t);
	}
	/* A bare host gets /v1/embeddings. */
	base[strlen(base) - 3] = '\0';
	cr_assert(asprintf(&yaml, "{type: openai, url: \"%s\", model: %s, dim: 8}", base,
			   model) >= 0);
	cr_assert_eq(et_try_open(&t, yaml), 0, "%s", t.err.msg);
	free(yaml);
	cr_expect_eq(et_embed(&t, in, 1, out), 0, "bare host: %s", t.err.msg);
	et_close(&t);
	cr_expect_eq(et_count(model), 4);
}

Test(embed_openai, bad_config_is_refused)
{
	et t;

	cr_expect_eq(et_try_open(&t, "{type: openai, model: m}"), MEMD_EINVAL);
	cr_expect(strstr(t.err.msg, "url"), "%s", t.err.msg);
	et_close(&t);
	cr_expect_eq(et_try_open(&t, "{type: openai, url: \"http://h/v1\"}"), MEMD_EINVAL);
	cr_expect(strstr(t.err.msg, "model"), "%s", t.err.msg);
	et_close(&t);
	cr_expect_eq(et_try_open(&t, "{type: openai, url: \"file:///etc\", model: m}"), MEMD_EINVAL);
	et_close(&t);
	cr_expect_eq(et_try_open(&t, "{type: openai, url: \"http://h\", model: m, batch: 0}"),
		     MEMD_EINVAL);
	et_close(&t);
	cr_expect_eq(et_try_open(&t, "{type: openai, url: \"http://h\", model: m, dim: many}"),
		     MEMD_EINVAL);
	et_close(&t);
}
