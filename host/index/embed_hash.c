/* SPDX-License-Identifier: MIT */
#include "embed_hash.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config/settings.h"
#include "strtab.h"
#include "text.h"

/* Feature kinds, hashed in front of the feature text so a word and a
 * trigram with the same bytes land apart. */
#define FEATURE_WORD 'w'
#define FEATURE_NGRAM 'g'
#define NGRAM_BEGIN '<'
#define NGRAM_END '>'
#define SIGN_BIT 63
#define FEATURE_MAX (TEXT_TERM_MAX + 8)

typedef struct hash_embedder {
	uint32_t dim;
} hash_embedder;

typedef struct accum {
	double *v;
	uint32_t dim;
} accum;

static void add_feature(accum *a, char kind, const char *s, size_t len, double weight)
{
	char buf[FEATURE_MAX];
	uint64_t h;

	buf[0] = kind;
	memcpy(buf + 1, s, len);
	h = strtab_hash(buf, len + 1);
	a->v[(uint32_t)h % a->dim] += (h >> SIGN_BIT) ? -weight : weight;
}

static int on_token(void *ud, const text_token *t)
{
	accum *a = ud;
	/* The word with boundary marks, as code point offsets. */
	char w[FEATURE_MAX];
	size_t starts[FEATURE_MAX + 1], n_cp = 0, len = 0, i = 0, n_grams;
	double weight;

	add_feature(a, FEATURE_WORD, t->term, t->term_len, EMBED_HASH_WORD_WEIGHT);
	w[len++] = NGRAM_BEGIN;
	memcpy(w + len, t->word, t->word_len);
	len += t->word_len;
	w[len++] = NGRAM_END;
	while (i < len) {
		uint32_t cp;
		size_t n = text_utf8_decode(w + i, len - i, &cp);
		starts[n_cp++] = i;
		i += n ? n : 1;
	}
	starts[n_cp] = len;
	if (n_cp < EMBED_HASH_NGRAM)
		return 0;
	n_grams = n_cp - EMBED_HASH_NGRAM + 1;
	weight = EMBED_HASH_NGRAM_WEIGHT / sqrt((double)n_grams);
	for (size_t g = 0; g < n_grams; g++)
		add_feature(a, FEATURE_NGRAM, w + starts[g], starts[g + EMBED_HASH_NGRAM] - starts[g],
			    weight);
	return 0;
}

static int32_t hash_dimension(void *inst, uint32_t *ret_dim, memd_error *err)
{
	(void)err;
	*ret_dim = ((hash_embedder *)inst)->dim;
	return 0;
}

static int32_t hash_embed(void *inst, const memd_call *call, const char *const *texts, uint32_t n,
			  float *ret_vectors, memd_error *err)
{
	hash_embedder *h = inst;
	accum a = { calloc(h->dim, sizeof(double)), h->dim };

	(void)call;
	if (!a.v)
		return memd_error_set(err, MEMD_ENOMEM, 0, "hash embedder: out of memory");
	for (uint32_t t = 0; t < n; t++) {
		const char *text = texts[t] ? texts[t] : "";
		float *out = ret_vectors + (size_t)t * h->dim;
		double norm = 0;

		memset(a.v, 0, h->dim * sizeof(double));
		text_terms(text, strlen(text), TEXT_STEM | TEXT_STOP, on_token, &a);
		for (uint32_t d = 0; d < h->dim; d++)
			norm += a.v[d] * a.v[d];
		norm = sqrt(norm);
		for (uint32_t d = 0; d < h->dim; d++)
			out[d] = norm > 0 ? (float)(a.v[d] / norm) : 0.0f;
	}
	free(a.v);
	return 0;
}

static const memd_embedder_ops hash_ops = {
	.struct_size = sizeof(memd_embedder_ops),
	.dimension = hash_dimension,
	.embed = hash_embed,
};

int32_t embed_hash_create_dim(uint32_t dim, void **ret_inst, memd_error *err)
{
	hash_embedder *h;

	if (dim < 1 || dim > SETTINGS_EMBEDDER_DIM_MAX)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "index.vector.embedder.dim: must be 1..%d", SETTINGS_EMBEDDER_DIM_MAX);
	h = calloc(1, sizeof(*h));
	if (!h)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	h->dim = dim;
	*ret_inst = h;
	return 0;
}

static int32_t hash_create(const config_node *node, hostsvc *svc, void **ret_inst, memd_error *err)
{
	const config_node *d = node ? config_map_get(node, "dim") : NULL;
	int64_t dim = SETTINGS_EMBEDDER_DIM_DEFAULT;

	(void)svc;
	if (d && config_as_int(d, &dim) < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "%s:%u: index.vector.embedder.dim: not an integer",
				      config_node_file(d), config_node_line(d));
	if (dim < 1 || dim > SETTINGS_EMBEDDER_DIM_MAX)
		return memd_error_set(err, MEMD_EINVAL, 0, "index.vector.embedder.dim: must be 1..%d",
				      SETTINGS_EMBEDDER_DIM_MAX);
	return embed_hash_create_dim((uint32_t)dim, ret_inst, err);
}

const embed_builtin embed_hash_builtin = {
	.type = "hash",
	.create = hash_create,
	.destroy = free,
	.ops = &hash_ops,
	.revision = EMBED_HASH_REVISION,
};
