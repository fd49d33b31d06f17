/* SPDX-License-Identifier: MIT */
#include "tokens/bpe.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memd/plugin.h>

#include "tokens/bpe_unicode.h"

/* Pieces up to this many bytes merge with a linear scan over a small
 * array (fastest for the short pieces of ordinary text); longer ones with
 * a min-heap of pairs and a linked list of parts (O(n log n)). */
#define BPE_SMALL_PIECE 96
#define BPE_NO_RANK UINT32_MAX
#define BPE_MAX_TOKEN_LEN 4096   /* longest token a ranks file may hold */
#define BPE_MAX_RANK 0x7FFFFFFFu
#define BPE_O200K_MIN_VOCAB 150000 /* cl100k_base has 100256 ranks, o200k_base 199998 */
#define BPE_HASH_SEED 0x243F6A8885A308D3ull
#define BPE_HASH_MUL 0x9E3779B97F4A7C15ull
#define BPE_HASH_SHIFT 29

typedef struct bpe_entry {
	uint32_t off;   /* into bytes */
	uint32_t len;   /* 0 = empty slot */
	uint32_t rank;
} bpe_entry;

struct bpe {
	int32_t encoding;
	size_t n;               /* ranks loaded */
	uint8_t *bytes;         /* every token's bytes, back to back */
	bpe_entry *table;       /* open addressing, linear probing */
	size_t mask;            /* table size - 1 */
	uint32_t byte_rank[256];
};

/* ---- encodings ------------------------------------------------------------ */

int32_t bpe_encoding_from_name(const char *name, int32_t *ret_encoding)
{
	if (name && strcmp(name, "cl100k_base") == 0)
		*ret_encoding = BPE_ENCODING_CL100K;
	else if (name && strcmp(name, "o200k_base") == 0)
		*ret_encoding = BPE_ENCODING_O200K;
	else
		return MEMD_EINVAL;
	return 0;
}

const char *bpe_encoding_name(int32_t encoding)
{
	switch (encoding) {
	case BPE_ENCODING_CL100K:
		return "cl100k_base";
	case BPE_ENCODING_O200K:
		return "o200k_base";
	default:
		return NULL;
	}
}

int32_t bpe_encoding(const bpe *b)
{
	return b->encoding;
}

size_t bpe_vocab_size(const bpe *b)
{
	return b->n;
}

/* ---- the rank table -------------------------------------------------------- */

static inline uint64_t hash_bytes(const uint8_t *p, size_t len)
{
	uint64_t h = BPE_HASH_SEED ^ (len * BPE_HASH_MUL);
	while (len >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		h = (h ^ w) * BPE_HASH_MUL;
		h ^= h >> BPE_HASH_SHIFT;
		p += 8;
		len -= 8;
	}
	if (len) {
		uint64_t w = 0;
		memcpy(&w, p, len);
		h = (h ^ w) * BPE_HASH_MUL;
		h ^= h >> BPE_HASH_SHIFT;
	}
	h *= BPE_HASH_MUL;
	return h ^ (h >> BPE_HASH_SHIFT);
}

/* Rank of the byte string p[0..len), or BPE_NO_RANK. */
static inline uint32_t rank_of(const bpe *b, const uint8_t *p, size_t len)
{
	size_t i;
	if (len == 1)
		return b->byte_rank[p[0]];
	i = (size_t)hash_bytes(p, len) & b->mask;
	for (;;) {
		const bpe_entry *e = &b->table[i];
		if (!e->len)
			return BPE_NO_RANK;
		if (e->len == len && memcmp(b->bytes + e->off, p, len) == 0)
			return e->rank;
		i = (i + 1) & b->mask;
	}
}

/* ---- loading ----------------------------------------------------------------- */

static int b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

/* Decode standard base64 (with padding) of len chars into out; returns
 * the byte count, or -1 if malformed. out has room for len * 3 / 4. */
static long b64_decode(const char *s, size_t len, uint8_t *out)
{
	size_t n = 0;
	if (len == 0 || len % 4)
		return -1;
	for (size_t i = 0; i < len; i += 4) {
		int v[4];
		int pad = 0;
		for (int k = 0; k < 4; k++) {
			if (s[i + k] == '=' && i + 4 == len && k >= 2) {
				v[k] = 0;
				pad++;
				continue;
			}
			if (pad || (v[k] = b64_value((unsigned char)s[i + k])) < 0)
				return -1;
		}
		out[n++] = (uint8_t)(v[0] << 2 | v[1] >> 4);
		if (pad < 2)
			out[n++] = (uint8_t)((v[1] & 0xF) << 4 | v[2] >> 2);
		if (pad < 1)
			out[n++] = (uint8_t)((v[2] & 0x3) << 6 | v[3]);
	}
	return (long)n;
}

static int32_t read_file(const char *path, char **ret, size_t *ret_len, memd_error *err)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t len = 0, cap = 0;

	if (!f)
		return memd_error_set(err, MEMD_EIO, 0, "tokenizer ranks %s: %s", path, strerror(errno));
	for (;;) {
		size_t got;
		if (cap - len < BUFSIZ) {
			size_t ncap = cap ? cap * 2 : (size_t)1 << 20;
			char *grown = realloc(buf, ncap + 1);
			if (!grown) {
				free(buf);
				fclose(f);
				return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
			}
			buf = grown;
			cap = ncap;
		}
		got = fread(buf + len, 1, cap - len, f);
		len += got;
		if (got == 0)
			break;
	}
	if (ferror(f)) {
		free(buf);
		fclose(f);
		return memd_error_set(err, MEMD_EIO, 0, "tokenizer ranks %s: read error", path);
	}
	fclose(f);
	buf[len] = '\0';
	*ret = buf;
	*ret_len = len;
	return 0;
}

static int32_t table_insert(bpe *b, uint32_t off, uint32_t len, uint32_t rank)
{
	size_t i = (size_t)hash_bytes(b->bytes + off, len) & b->mask;
	for (;;) {
		bpe_entry *e = &b->table[i];
		if (!e->len) {
			*e = (bpe_entry){ off, len, rank };
			return 0;
		}
		if (e->len == len && memcmp(b->bytes + e->off, b->bytes + off, len) == 0)
			return MEMD_ECONFLICT;
		i = (i + 1) & b->mask;
	}
}

static int32_t infer_encoding(const char *path, size_t n)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	if (strncmp(base, "o200k", strlen("o200k")) == 0)
		return BPE_ENCODING_O200K;
	if (strncmp(base, "cl100k", strlen("cl100k")) == 0)
		return BPE_ENCODING_CL100K;
	return n >= BPE_O200K_MIN_VOCAB ? BPE_ENCODING_O200K : BPE_ENCODING_CL100K;
}

int32_t bpe_load(const char *path, int32_t encoding, bpe **ret, memd_error *err)
{
	char *text = NULL, *p, *end;
	size_t len, lines = 0, bytes_cap, bytes_len = 0, cap = 1;
	bpe *b;
	int32_t r;

	if (encoding && !bpe_encoding_name(encoding))
		return memd_error_set(err, MEMD_EINVAL, 0, "tokenizer: unknown encoding %d", (int)encoding);
	if ((r = read_file(path, &text, &len, err)) < 0)
		return r;
	for (p = text; *p; p++)
		lines += *p == '\n';
	lines++;
	b = calloc(1, sizeof(*b));
	while (cap < lines * 2)
		cap <<= 1;
	bytes_cap = len; /* base64 is longer than what it decodes to */
	if (!b || !(b->table = calloc(cap, sizeof(*b->table))) ||
	    !(b->bytes = malloc(bytes_cap ? bytes_cap : 1))) {
		r = memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
		goto fail;
	}
	b->mask = cap - 1;
	for (int i = 0; i < 256; i++)
		b->byte_rank[i] = BPE_NO_RANK;

	p = text;
	end = text + len;
	for (size_t line = 1; p < end; line++) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		char *eol = nl ? nl : end, *sp, *num_end;
		unsigned long long rank;
		long n;

		if (eol > p && eol[-1] == '\r')
			eol--;
		if (eol == p) { /* blank line */
			p = nl ? nl + 1 : end;
			continue;
		}
		sp = memchr(p, ' ', (size_t)(eol - p));
		if (!sp || sp == p || sp + 1 >= eol)
			goto bad_line;
		if ((size_t)(sp - p) / 4 * 3 > BPE_MAX_TOKEN_LEN)
			goto bad_line;
		n = b64_decode(p, (size_t)(sp - p), b->bytes + bytes_len);
		if (n <= 0)
			goto bad_line;
		errno = 0;
		rank = strtoull(sp + 1, &num_end, 10);
		if (errno || num_end != eol || rank > BPE_MAX_RANK || sp[1] == '-' || sp[1] == '+')
			goto bad_line;
		if (n == 1) {
			if (b->byte_rank[b->bytes[bytes_len]] != BPE_NO_RANK)
				goto dup_line;
			b->byte_rank[b->bytes[bytes_len]] = (uint32_t)rank;
		}
		if (table_insert(b, (uint32_t)bytes_len, (uint32_t)n, (uint32_t)rank) < 0)
			goto dup_line;
		bytes_len += (size_t)n;
		b->n++;
		p = nl ? nl + 1 : end;
		continue;
bad_line:
		r = memd_error_set(err, MEMD_EINVAL, 0,
				   "tokenizer ranks %s:%zu: expected \"<base64 token> <rank>\"", path,
				   line);
		goto fail;
dup_line:
		r = memd_error_set(err, MEMD_EINVAL, 0, "tokenizer ranks %s:%zu: token listed twice",
				   path, line);
		goto fail;
	}
	for (int i = 0; i < 256; i++)
		if (b->byte_rank[i] == BPE_NO_RANK) {
			r = memd_error_set(err, MEMD_EINVAL, 0,
					   "tokenizer ranks %s: byte 0x%02x has no rank (not a byte-level BPE)",
					   path, i);
			goto fail;
		}
	b->encoding = encoding ? encoding : infer_encoding(path, b->n);
	free(text);
	*ret = b;
	return 0;
fail:
	free(text);
	bpe_free(b);
	return r;
}

void bpe_free(bpe *b)
{
	if (!b)
		return;
	free(b->table);
	free(b->bytes);
	free(b);
}

/* ---- pre-tokenization ---------------------------------------------------------- */

/* One character: its code point (0xFFFD for an invalid byte), class bits
 * and byte length. */
typedef struct ch {
	uint32_t cp;
	uint32_t cls;
	size_t n;
} ch;

#define CH_INVALID 0xFFFDu

static inline ch ch_at(const uint8_t *s, size_t len, size_t i)
{
	ch c = { CH_INVALID, 0, 1 };
	uint32_t b0 = s[i], cp;
	size_t n;

	if (b0 < 0x80) {
		c.cp = b0;
		c.cls = bpe_unicode_class(b0);
		return c;
	}
	if ((b0 & 0xE0) == 0xC0) {
		n = 2;
		cp = b0 & 0x1F;
	} else if ((b0 & 0xF0) == 0xE0) {
		n = 3;
		cp = b0 & 0x0F;
	} else if ((b0 & 0xF8) == 0xF0) {
		n = 4;
		cp = b0 & 0x07;
	} else {
		return c;
	}
	if (i + n > len)
		return c;
	for (size_t k = 1; k < n; k++) {
		if ((s[i + k] & 0xC0) != 0x80)
			return c;
		cp = cp << 6 | (s[i + k] & 0x3F);
	}
	/* Overlong forms and surrogates are invalid UTF-8. */
	if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
	    (cp >= 0xD800 && cp <= 0xDFFF) || cp > BPE_UNICODE_MAX)
		return c;
	c.cp = cp;
	c.cls = bpe_unicode_class(cp);
	c.n = n;
	return c;
}

#define IS_L(c)  ((c).cls & BPE_CLASS_L)
#define IS_N(c)  ((c).cls & BPE_CLASS_N)
#define IS_WS(c) ((c).cls & BPE_CLASS_WS)
#define IS_CRLF(c) ((c).cp == '\r' || (c).cp == '\n')
/* [^\r\n\p{L}\p{N}] */
#define IS_PREFIX(c) (!IS_CRLF(c) && !((c).cls & (BPE_CLASS_L | BPE_CLASS_N)))
/* [^\s\p{L}\p{N}] */
#define IS_OTHER(c) (!((c).cls & (BPE_CLASS_L | BPE_CLASS_N | BPE_CLASS_WS)))

/* End of the run of characters from i having any of the class bits. */
static inline size_t run_of(const uint8_t *s, size_t len, size_t i, uint32_t bits)
{
	while (i < len) {
		ch c = ch_at(s, len, i);
		if (!(c.cls & bits))
			break;
		i += c.n;
	}
	return i;
}

static inline int lower_ascii(uint8_t c)
{
	return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

/* '(s|t|re|ve|m|ll|d), either case: end of the contraction at i, or i. */
static size_t contraction(const uint8_t *s, size_t len, size_t i)
{
	if (i + 1 >= len || s[i] != '\'')
		return i;
	switch (lower_ascii(s[i + 1])) {
	case 's':
	case 't':
	case 'm':
	case 'd':
		return i + 2;
	case 'r':
	case 'v':
		return i + 2 < len && lower_ascii(s[i + 2]) == 'e' ? i + 3 : i;
	case 'l':
		return i + 2 < len && lower_ascii(s[i + 2]) == 'l' ? i + 3 : i;
	default:
		return i;
	}
}

/* \s*[\r\n]+ | \s+(?!\S) | \s+ at i, where s[i] is white space. */
static size_t ws_piece(const uint8_t *s, size_t len, size_t i)
{
	size_t j = i, last_crlf_end = 0, last_start = i;
	while (j < len) {
		ch c = ch_at(s, len, j);
		if (!IS_WS(c))
			break;
		if (IS_CRLF(c))
			last_crlf_end = j + c.n;
		last_start = j;
		j += c.n;
	}
	if (last_crlf_end)
		return last_crlf_end;   /* \s*[\r\n]+ */
	if (j == len || last_start == i)
		return j;               /* \s+(?!\S) at the end, or \s+ */
	return last_start;          /* \s+(?!\S): leave the last one for the next word */
}

/* ' ?[^\s\p{L}\p{N}]+' then tail_slash ? [\r\n/]* : [\r\n]*, at i; 0 if no match. */
static size_t punct_piece(const uint8_t *s, size_t len, size_t i, int tail_slash)
{
	size_t j = i;
	ch c = ch_at(s, len, j);
	if (c.cp == ' ' && j + 1 < len) {
		ch d = ch_at(s, len, j + 1);
		if (IS_OTHER(d)) {
			j++;
			c = d;
		}
	}
	if (!IS_OTHER(c))
		return 0;
	while (j < len) {
		c = ch_at(s, len, j);
		if (!IS_OTHER(c))
			break;
		j += c.n;
	}
	while (j < len && (s[j] == '\r' || s[j] == '\n' || (tail_slash && s[j] == '/')))
		j++;
	return j;
}

/* \p{N}{1,3} at i, where s[i] is a number. */
static size_t number_piece(const uint8_t *s, size_t len, size_t i)
{
	for (int k = 0; k < 3 && i < len; k++) {
		ch c = ch_at(s, len, i);
		if (!IS_N(c))
			break;
		i += c.n;
	}
	return i;
}

/* cl100k_base:
 * '(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+' */
static size_t cl100k_piece(const uint8_t *s, size_t len, size_t i)
{
	ch c = ch_at(s, len, i);
	size_t j;

	if (c.cp == '\'' && (j = contraction(s, len, i)) > i)
		return j;
	if (IS_L(c))
		return run_of(s, len, i, BPE_CLASS_L);
	if (IS_PREFIX(c) && i + c.n < len) {
		ch d = ch_at(s, len, i + c.n);
		if (IS_L(d))
			return run_of(s, len, i + c.n, BPE_CLASS_L);
	}
	if (IS_N(c))
		return number_piece(s, len, i);
	if ((j = punct_piece(s, len, i, 0)) > 0)
		return j;
	if (IS_WS(c))
		return ws_piece(s, len, i);
	return i + c.n; /* unreachable: every character is in one class above */
}

/* o200k_base [UPPER]*[LOWER]+ at i: end, or 0 if no match. */
static size_t o200k_word_lower(const uint8_t *s, size_t len, size_t i)
{
	size_t j = i, last_lower = 0, last_lower_end = 0;
	int any_lower = 0;
	while (j < len) {
		ch c = ch_at(s, len, j);
		if (!(c.cls & BPE_CLASS_UPPER))
			break;
		if (c.cls & BPE_CLASS_LOWER) {
			any_lower = 1;
			last_lower = j;
			last_lower_end = j + c.n;
		}
		j += c.n;
	}
	if (j < len) {
		ch c = ch_at(s, len, j);
		if (c.cls & BPE_CLASS_LOWER)
			return run_of(s, len, j, BPE_CLASS_LOWER);
	}
	/* Backtrack: the last character of the upper run that is also lower
	 * ends the match (nothing after it is lower). */
	(void)last_lower;
	return any_lower ? last_lower_end : 0;
}

/* o200k_base [UPPER]+[LOWER]* at i: end, or 0 if no match. */
static size_t o200k_word_upper(const uint8_t *s, size_t len, size_t i)
{
	size_t j;
	if (i >= len || !(ch_at(s, len, i).cls & BPE_CLASS_UPPER))
		return 0;
	j = run_of(s, len, i, BPE_CLASS_UPPER);
	return run_of(s, len, j, BPE_CLASS_LOWER);
}

/* o200k_base:
 * [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
 * [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
 * \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static size_t o200k_piece(const uint8_t *s, size_t len, size_t i)
{
	ch c = ch_at(s, len, i);
	size_t j;
	int prefix = IS_PREFIX(c);

	for (int alt = 0; alt < 2; alt++) {
		size_t (*word)(const uint8_t *, size_t, size_t) =
			alt == 0 ? o200k_word_lower : o200k_word_upper;
		if (prefix && (j = word(s, len, i + c.n)) > 0)
			return contraction(s, len, j);
		if ((j = word(s, len, i)) > 0)
			return contraction(s, len, j);
	}
	if (IS_N(c))
		return number_piece(s, len, i);
	if ((j = punct_piece(s, len, i, 1)) > 0)
		return j;
	if (IS_WS(c))
		return ws_piece(s, len, i);
	return i + c.n; /* unreachable */
}

/* ---- merging ------------------------------------------------------------------- */

/* Parts of a piece after merging: their count, and their ranks when out is
 * not NULL (room for len ranks). */
static size_t merge_small(const bpe *b, const uint8_t *p, size_t len, uint32_t *out)
{
	uint32_t start[BPE_SMALL_PIECE + 1];
	uint32_t rank[BPE_SMALL_PIECE];
	size_t m = len;

	for (size_t k = 0; k <= len; k++)
		start[k] = (uint32_t)k;
	for (size_t k = 0; k + 1 < m; k++)
		rank[k] = rank_of(b, p + k, 2);
	rank[m - 1] = BPE_NO_RANK;
	for (;;) {
		uint32_t best = BPE_NO_RANK;
		size_t at = 0;
		for (size_t k = 0; k + 1 < m; k++)
			if (rank[k] < best) {
				best = rank[k];
				at = k;
			}
		if (best == BPE_NO_RANK)
			break;
		/* merge parts at and at+1 */
		memmove(start + at + 1, start + at + 2, (m - at - 1) * sizeof(*start));
		memmove(rank + at + 1, rank + at + 2, (m - at - 2) * sizeof(*rank));
		m--;
		rank[m - 1] = BPE_NO_RANK;
		if (at + 1 < m)
			rank[at] = rank_of(b, p + start[at], start[at + 2] - start[at]);
		else
			rank[at] = BPE_NO_RANK;
		if (at > 0)
			rank[at - 1] = rank_of(b, p + start[at - 1], start[at + 1] - start[at - 1]);
	}
	if (out)
		for (size_t k = 0; k < m; k++)
			out[k] = rank_of(b, p + start[k], start[k + 1] - start[k]);
	return m;
}

/* Min-heap of (rank << 32 | part start): lowest rank, then leftmost. */
typedef struct heap {
	uint64_t *v;
	size_t n;
} heap;

static void heap_push(heap *h, uint64_t x)
{
	size_t i = h->n++;
	while (i > 0) {
		size_t parent = (i - 1) / 2;
		if (h->v[parent] <= x)
			break;
		h->v[i] = h->v[parent];
		i = parent;
	}
	h->v[i] = x;
}

static uint64_t heap_pop(heap *h)
{
	uint64_t top = h->v[0], x = h->v[--h->n];
	size_t i = 0;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= h->n)
			break;
		if (c + 1 < h->n && h->v[c + 1] < h->v[c])
			c++;
		if (h->v[c] >= x)
			break;
		h->v[i] = h->v[c];
		i = c;
	}
	if (h->n)
		h->v[i] = x;
	return top;
}

#define HEAP_KEY(rank, pos) ((uint64_t)(rank) << 32 | (uint64_t)(pos))

/* As merge_small for any length; -1 on ENOMEM. Parts are linked by their
 * start offsets: next[s] is the start of the part after the one at s. */
static long merge_large(const bpe *b, const uint8_t *p, size_t len, uint32_t *out)
{
	uint32_t *next = malloc((len + 1) * sizeof(*next));
	uint32_t *prev = malloc((len + 1) * sizeof(*prev));
	uint32_t *pair = malloc((len + 1) * sizeof(*pair)); /* rank of part s + the next */
	heap h = { malloc(2 * len * sizeof(*h.v) + sizeof(*h.v)), 0 };
	long m = (long)len;

	if (!next || !prev || !pair || !h.v) {
		m = -1;
		goto out;
	}
	for (size_t k = 0; k <= len; k++) {
		next[k] = (uint32_t)(k + 1);
		prev[k] = (uint32_t)(k ? k - 1 : 0);
		pair[k] = BPE_NO_RANK;
	}
	for (size_t k = 0; k + 1 < len; k++) {
		pair[k] = rank_of(b, p + k, 2);
		if (pair[k] != BPE_NO_RANK)
			heap_push(&h, HEAP_KEY(pair[k], k));
	}
	while (h.n) {
		uint64_t top = heap_pop(&h);
		uint32_t r = (uint32_t)(top >> 32), s = (uint32_t)top, nx;
		if (pair[s] != r)
			continue; /* stale: the part at s changed or is gone */
		nx = next[s];
		/* merge s with nx */
		next[s] = next[nx];
		if (next[nx] <= len)
			prev[next[nx]] = s;
		pair[nx] = BPE_NO_RANK;
		m--;
		if (next[s] < len) {
			pair[s] = rank_of(b, p + s, next[next[s]] - s);
			if (pair[s] != BPE_NO_RANK)
				heap_push(&h, HEAP_KEY(pair[s], s));
		} else {
			pair[s] = BPE_NO_RANK;
		}
		if (s > 0) {
			uint32_t q = prev[s];
			pair[q] = rank_of(b, p + q, next[s] - q);
			if (pair[q] != BPE_NO_RANK)
				heap_push(&h, HEAP_KEY(pair[q], q));
		}
	}
	if (out) {
		size_t k = 0;
		for (uint32_t s = 0; s < len; s = next[s])
			out[k++] = rank_of(b, p + s, next[s] - s);
	}
out:
	free(next);
	free(prev);
	free(pair);
	free(h.v);
	return m;
}

/* Tokens of one piece; their ranks to out (room for len) if not NULL.
 * -1 on ENOMEM. */
static long piece_tokens(const bpe *b, const uint8_t *p, size_t len, uint32_t *out)
{
	uint32_t whole;
	if (len == 1) {
		if (out)
			out[0] = b->byte_rank[p[0]];
		return 1;
	}
	whole = rank_of(b, p, len);
	if (whole != BPE_NO_RANK) {
		if (out)
			out[0] = whole;
		return 1;
	}
	if (len <= BPE_SMALL_PIECE)
		return (long)merge_small(b, p, len, out);
	return merge_large(b, p, len, out);
}

typedef size_t (*piece_fn)(const uint8_t *s, size_t len, size_t i);

static piece_fn splitter(const bpe *b)
{
	return b->encoding == BPE_ENCODING_O200K ? o200k_piece : cl100k_piece;
}

int64_t bpe_count(const bpe *b, const char *text, size_t len)
{
	const uint8_t *s = (const uint8_t *)text;
	piece_fn next_piece = splitter(b);
	int64_t total = 0;
	size_t i = 0;

	while (i < len) {
		size_t j = next_piece(s, len, i);
		long n = piece_tokens(b, s + i, j - i, NULL);
		/* Out of memory for a huge piece: count it as one token per byte
		 * (an upper bound), so the count never under-reports. */
		total += n < 0 ? (int64_t)(j - i) : n;
		i = j;
	}
	return total;
}

int32_t bpe_encode(const bpe *b, const char *text, size_t len, bpe_token_fn fn, void *userdata)
{
	const uint8_t *s = (const uint8_t *)text;
	piece_fn next_piece = splitter(b);
	uint32_t small[BPE_SMALL_PIECE];
	size_t i = 0;

	while (i < len) {
		size_t j = next_piece(s, len, i), plen = j - i;
		uint32_t *out = plen <= BPE_SMALL_PIECE ? small : malloc(plen * sizeof(*out));
		long n;
		int32_t r = 0;

		if (!out)
			return MEMD_ENOMEM;
		n = piece_tokens(b, s + i, plen, out);
		for (long k = 0; k < n && r == 0; k++)
			r = fn(userdata, out[k]);
		if (out != small)
			free(out);
		if (n < 0)
			return MEMD_ENOMEM;
		if (r)
			return r;
		i = j;
	}
	return 0;
}
