/* SPDX-License-Identifier: MIT */
/*
 * tokens: the approximate token counter memd uses unless an exact
 * tokenizer is configured.
 *
 * Heuristic (tuned to BPE tokenizers such as cl100k_base, where common
 * English words of up to five letters are one token and longer words and
 * identifiers split every four to six characters):
 *  - a run of ASCII letters/digits (or of non-ASCII letters below U+2E80)
 *    counts ceil(chars / 5) tokens, at least 1;
 *  - every other visible ASCII character (punctuation, symbols) counts 1;
 *  - every code point at or above U+2E80 (CJK, emoji, ...) counts 1;
 *  - white space counts nothing, except that a line break counts 1.
 * It never returns 0 for text with a visible character.
 */
#ifndef MEMD_HOST_TOKENS_H
#define MEMD_HOST_TOKENS_H

#include <stddef.h>
#include <stdint.h>

/* Approximate tokens in len bytes of UTF-8 text (invalid bytes count as
 * one token each). */
int64_t tokens_approx(const char *text, size_t len);

#endif
