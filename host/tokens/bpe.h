/* SPDX-License-Identifier: MIT */
/*
 * bpe: exact byte-pair-encoding token counts for OpenAI's cl100k_base and
 * o200k_base encodings, from a tiktoken-format ranks file ("<base64 token>
 * <rank>" per line, as tiktoken and js-tiktoken use).
 *
 * Text is split by the encoding's pre-tokenization regex (implemented by
 * hand; classes as JavaScript's RegExp "u" flag defines them, see
 * bpe_unicode.h), then each piece is merged pair by pair, lowest rank
 * first (leftmost on ties), exactly as tiktoken does. Special tokens
 * ("<|endoftext|>") are not recognised: all text counts as ordinary text,
 * like tiktoken's encode_ordinary. A loaded bpe is immutable: any number
 * of threads may count with it at once.
 */
#ifndef MEMD_HOST_BPE_H
#define MEMD_HOST_BPE_H

#include <stddef.h>
#include <stdint.h>

#include <memd/abi.h>

#define BPE_ENCODING_CL100K 1 /* cl100k_base (GPT-3.5, GPT-4) */
#define BPE_ENCODING_O200K  2 /* o200k_base (GPT-4o, o1, o3) */

typedef struct bpe bpe;

/* The BPE_ENCODING_* of "cl100k_base" / "o200k_base"; MEMD_EINVAL for any
 * other name. */
int32_t bpe_encoding_from_name(const char *name, int32_t *ret_encoding);
/* "cl100k_base" or "o200k_base" (NULL for an unknown value). */
const char *bpe_encoding_name(int32_t encoding);

/* Load the ranks file at path. encoding: a BPE_ENCODING_*, or 0 to infer
 * it: from the file name ("o200k..." / "cl100k..."), else from the size of
 * the vocabulary (o200k_base has about twice as many ranks). On success
 * *ret owns the tables (bpe_free). Errors: MEMD_EIO (cannot read),
 * MEMD_EINVAL (not a tiktoken ranks file: the message names the line),
 * MEMD_ENOMEM. */
int32_t bpe_load(const char *path, int32_t encoding, bpe **ret, memd_error *err);
/* Accepts NULL. */
void bpe_free(bpe *b);
/* The encoding whose regex b uses. */
int32_t bpe_encoding(const bpe *b);
/* Number of ranks loaded. */
size_t bpe_vocab_size(const bpe *b);

/* Tokens in len bytes of text (any bytes: invalid UTF-8 is split like any
 * other character and merged byte-wise). Never fails; text may be NULL
 * when len is 0. */
int64_t bpe_count(const bpe *b, const char *text, size_t len);

/* Called for each token of an encoding, in order; nonzero stops. */
typedef int32_t (*bpe_token_fn)(void *userdata, uint32_t rank);
/* The token ids (ranks) of text, to fn. Returns 0, fn's nonzero result,
 * or MEMD_ENOMEM. */
int32_t bpe_encode(const bpe *b, const char *text, size_t len, bpe_token_fn fn, void *userdata);

#endif
