/* SPDX-License-Identifier: MIT */
/*
 * text: the analyzer shared by the keyword index and the hash embedder.
 * Splits UTF-8 text into words, case-folds them (Latin, Greek, Cyrillic,
 * Armenian and fullwidth forms, with our own tables: no locale, no libc
 * ctype), removes Latin diacritics (as SQLite's unicode61 does), strips
 * English possessives and apostrophes, drops English stop words and
 * Porter-stems pure a-z words. CJK ideographs and kana become one token
 * each. Invalid UTF-8 bytes separate words. Deterministic and
 * thread-safe (no state).
 */
#ifndef MEMD_INDEX_TEXT_H
#define MEMD_INDEX_TEXT_H

#include <stddef.h>
#include <stdint.h>

/* Longest term in bytes; longer words are cut at a character boundary. */
#define TEXT_TERM_MAX 64

/* text_terms flags */
#define TEXT_STEM 0x1u /* Porter-stem words made only of a-z */
#define TEXT_STOP 0x2u /* drop English stop words */
/* With TEXT_STOP: keep the first-person singular pronouns (i, me, my,
 * myself). In a user's memory they tell the user's own statements ("my
 * best time") from everything else; the keyword index keeps them, the
 * hash embedder (where they would be a feature shared by most texts)
 * does not. */
#define TEXT_KEEP_SELF 0x4u

/* One token. word: the folded word (no apostrophes); term: what is
 * indexed (word, stemmed with TEXT_STEM). Both borrowed for the call,
 * not NUL-terminated, 1..TEXT_TERM_MAX bytes. */
typedef struct text_token {
	const char *word;
	size_t word_len;
	const char *term;
	size_t term_len;
} text_token;

/* Receives each token in order; a nonzero return stops text_terms, which
 * then returns that value. */
typedef int (*text_token_fn)(void *userdata, const text_token *t);

/* Tokenize len bytes of s (need not be NUL-terminated) with flags
 * TEXT_*. Returns 0, or the callback's nonzero return. */
int text_terms(const char *s, size_t len, uint32_t flags, text_token_fn fn, void *userdata);

/* Character classes of text_class(). */
#define TEXT_SEP    0 /* separates words */
#define TEXT_WORD   1 /* part of a word */
#define TEXT_SINGLE 2 /* a word by itself (CJK ideograph, kana) */
#define TEXT_DROP   3 /* ignored inside words (combining marks, soft hyphen) */
#define TEXT_APOS   4 /* apostrophe: inside a word between letters, else SEP */

/* The class of code point cp. */
int text_class(uint32_t cp);

/* Most code points one code point folds to ("ß" -> "ss"). */
#define TEXT_FOLD_MAX 2
/* Case-fold cp and remove a Latin diacritic: writes 1..TEXT_FOLD_MAX
 * code points to out and returns how many. Code points without a
 * folding are returned as they are. */
size_t text_fold(uint32_t cp, uint32_t out[TEXT_FOLD_MAX]);

/* Nonzero if the len bytes of word (folded, a-z) are an English stop word. */
int text_is_stop(const char *word, size_t len);

/* Decode one UTF-8 character from s[0..len) (len > 0): writes the code
 * point and returns its byte length (1..4), or returns 0 for an invalid
 * sequence (overlong, surrogate, truncated, > U+10FFFF). */
size_t text_utf8_decode(const char *s, size_t len, uint32_t *ret_cp);
/* Encode cp (<= U+10FFFF) into out; returns the byte length (1..4). */
size_t text_utf8_encode(uint32_t cp, char out[4]);

#endif
