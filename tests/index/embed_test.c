/* SPDX-License-Identifier: MIT */
/*
 * The built-in hash embedder (host/index/embed_hash.c) through the
 * embedder wrapper: deterministic, L2-normalized, dimension and batch
 * from config, zero vector for text without features, related texts
 * closer than unrelated ones, bad config refused.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "index/embed.h"
#include "index/embed_hash.h"
#include "config/settings.h"

static embedder *open_yaml(const char *yaml, config_node **ret_root)
{
	config_node *root = NULL;
	memd_error err = { 0 };
	embedder *e = NULL;

	if (yaml)
		cr_assert_eq(config_parse_string(yaml, strlen(yaml), "test.yaml", &root, &err), 0, "%s",
			     err.msg);
	cr_assert_eq(embedder_open(root, NULL, &e, &err), 0, "%s", err.msg);
	*ret_root = root;
	return e;
}

static double dot(const float *a, const float *b, uint32_t dim)
{
	double s = 0;
	for (uint32_t i = 0; i < dim; i++)
		s += (double)a[i] * b[i];
	return s;
}

Test(embed_hash, zero_config_is_hash_with_the_default_dimension)
{
	config_node *root;
	embedder *e = open_yaml(NULL, &root);
	cr_assert_str_eq(embedder_type(e), "hash");
	cr_assert_eq(embedder_dim(e), SETTINGS_EMBEDDER_DIM_DEFAULT);
	cr_assert_eq(embedder_batch(e), SETTINGS_EMBEDDER_BATCH_DEFAULT);
	cr_assert_str_eq(embedder_identity(e), "hashr1-256");
	embedder_free(e);
}

Test(embed_hash, identity_names_type_revision_dimension_and_model)
{
	config_node *root;
	embedder *e = open_yaml("dim: 32\nmodel: \"some/Model:v2\"\n", &root);
	const char *id = embedder_identity(e);
	cr_assert_eq(strncmp(id, "hashr1-32-", 10), 0, "%s", id);
	cr_assert_eq(strlen(id), 18, "%s", id);
	cr_assert_eq(strspn(id, "abcdefghijklmnopqrstuvwxyz0123456789-"), strlen(id), "%s", id);
	embedder_free(e);
	config_free(root);
}

Test(embed_hash, deterministic_and_normalized)
{
	config_node *root;
	embedder *e = open_yaml("type: hash\ndim: 64\nbatch: 7\n", &root);
	const char *texts[] = { "The quick brown fox jumps over the lazy dog",
				"Ünïcödé text: Москва, Αθήνα, 東京", "the of and",
				"The quick brown fox jumps over the lazy dog", "" };
	float v[5 * 64], again[5 * 64];
	memd_error err = { 0 };

	cr_assert_eq(embedder_dim(e), 64);
	cr_assert_eq(embedder_batch(e), 7);
	cr_assert_eq(embedder_embed(e, NULL, texts, 5, v, &err), 0, "%s", err.msg);
	cr_assert_eq(embedder_embed(e, NULL, texts, 5, again, &err), 0, "%s", err.msg);
	cr_assert_eq(memcmp(v, again, sizeof(v)), 0, "same input, same vectors");
	cr_assert_eq(memcmp(v, v + 3 * 64, 64 * sizeof(float)), 0, "same text in a batch");
	cr_assert_float_eq(dot(v, v, 64), 1.0, 1e-5);
	cr_assert_float_eq(dot(v + 64, v + 64, 64), 1.0, 1e-5);
	/* Stop words only / empty: no features, a zero vector. */
	cr_assert_eq(dot(v + 2 * 64, v + 2 * 64, 64), 0.0);
	cr_assert_eq(dot(v + 4 * 64, v + 4 * 64, 64), 0.0);
	embedder_free(e);
	config_free(root);
}

Test(embed_hash, the_same_on_every_platform)
{
	/* Feature hashing must not depend on the machine or the run (FNV-1a
	 * based, no randomness): fixed texts give these vectors. They were
	 * produced by this implementation; changing the algorithm must update
	 * them deliberately (stored vectors then need a rebuild). */
	static const float golden[2][8] = {
		{ 0, 0.816496611f, 0.166666672f, 0.166666672f, 0, 0, 0.166666672f, -0.5f },
		{ 0.133943394f, -0.234388709f, -0.140844271f, 0.522928417f, -0.0552538894f,
		  0.777491748f, -0.162121773f, 0 },
	};
	const char *texts[] = { "memory", "Café au lait, s'il vous plaît" };
	void *inst = NULL;
	memd_error err = { 0 };
	float v[16];

	cr_assert_eq(embed_hash_create_dim(8, &inst, &err), 0);
	cr_assert_eq(embed_hash_builtin.ops->embed(inst, NULL, texts, 2, v, &err), 0);
	embed_hash_builtin.destroy(inst);
	for (int t = 0; t < 2; t++)
		for (int i = 0; i < 8; i++)
			cr_expect_float_eq(v[t * 8 + i], golden[t][i], 1e-6, "text %d dim %d: %.9g", t, i,
					   v[t * 8 + i]);
}

Test(embed_hash, related_texts_are_closer)
{
	config_node *root;
	embedder *e = open_yaml("dim: 512\n", &root);
	const char *texts[] = { "my dog loves running in the park",
				"dogs love to run in parks",
				"quarterly revenue grew in the finance report",
				"running" ,
				"runner" };
	float v[5 * 512];
	memd_error err = { 0 };

	cr_assert_eq(embedder_embed(e, NULL, texts, 5, v, &err), 0, "%s", err.msg);
	double related = dot(v, v + 512, 512), unrelated = dot(v, v + 2 * 512, 512);
	cr_assert_gt(related, 0.3, "related %f", related);
	cr_assert_lt(unrelated, related / 3, "related %f vs unrelated %f", related, unrelated);
	/* Character trigrams connect forms the stemmer does not ("run",
	 * "runner": no word feature in common). */
	cr_assert_gt(dot(v + 3 * 512, v + 4 * 512, 512), 0.05);
	embedder_free(e);
	config_free(root);
}

Test(embed_hash, bad_config_is_refused)
{
	static const char *const bad[] = { "dim: 0\n", "dim: 999999999\n", "dim: many\n",
					   "batch: 0\n", "type: word2vec\n" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		config_node *root = NULL;
		memd_error err = { 0 };
		embedder *e = NULL;
		cr_assert_eq(config_parse_string(bad[i], strlen(bad[i]), "t.yaml", &root, &err), 0);
		cr_assert_eq(embedder_open(root, NULL, &e, &err), MEMD_EINVAL, "%s", bad[i]);
		cr_assert_null(e);
		cr_assert_neq(err.msg[0], '\0');
		config_free(root);
	}
}
