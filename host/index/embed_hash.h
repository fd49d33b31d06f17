/* SPDX-License-Identifier: MIT */
/*
 * embed_hash: the built-in "hash" embedder. Deterministic feature hashing,
 * no model and no network: each text is analyzed like the keyword index
 * does (text.h: folded, stop words dropped), and every word feature
 * (the stemmed term, weight EMBED_HASH_WORD_WEIGHT) and every character
 * trigram of the word with boundary marks ("<wo", "wor", "ord", "rd>",
 * total weight about EMBED_HASH_NGRAM_WEIGHT per word) is hashed
 * (strtab_hash) to a dimension, with a sign from another bit of the hash;
 * the sum is L2-normalized. Same text, same vector, on every platform.
 */
#ifndef MEMD_INDEX_EMBED_HASH_H
#define MEMD_INDEX_EMBED_HASH_H

#include "embed.h"

#define EMBED_HASH_WORD_WEIGHT 1.0
#define EMBED_HASH_NGRAM_WEIGHT 0.5
#define EMBED_HASH_NGRAM 3
/* The algorithm's revision (embed.h: embed_builtin.revision); the golden
 * vectors in tests/index/embed_test.c pin it. */
#define EMBED_HASH_REVISION 1

/* The "hash" entry of embed.c's table. Config keys: dim (1..
 * SETTINGS_EMBEDDER_DIM_MAX, default SETTINGS_EMBEDDER_DIM_DEFAULT). */
extern const embed_builtin embed_hash_builtin;

/* An instance of dim dimensions, without config (for tests). */
int32_t embed_hash_create_dim(uint32_t dim, void **ret_inst, memd_error *err);

#endif
