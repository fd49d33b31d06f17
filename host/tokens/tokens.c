/* SPDX-License-Identifier: MIT */
#include "tokens/tokens.h"

#define TOKENS_CHARS_PER_TOKEN 5
#define TOKENS_WIDE_START 0x2E80u /* CJK radicals onwards: ~1 token each */

/* Decode one code point at s (len > 0 bytes left). Returns its length, or
 * 1 with *cp = 0xFFFD for an invalid sequence. */
static size_t utf8_next(const unsigned char *s, size_t len, uint32_t *cp)
{
	size_t n;
	uint32_t c = s[0];

	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if ((c & 0xE0) == 0xC0) {
		n = 2;
		c &= 0x1F;
	} else if ((c & 0xF0) == 0xE0) {
		n = 3;
		c &= 0x0F;
	} else if ((c & 0xF8) == 0xF0) {
		n = 4;
		c &= 0x07;
	} else {
		*cp = 0xFFFD;
		return 1;
	}
	if (n > len) {
		*cp = 0xFFFD;
		return 1;
	}
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xC0) != 0x80) {
			*cp = 0xFFFD;
			return 1;
		}
		c = (c << 6) | (s[i] & 0x3F);
	}
	*cp = c;
	return n;
}

static int is_word(uint32_t c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || (c >= 0x80 && c < TOKENS_WIDE_START && c != 0xFFFD);
}

int64_t tokens_approx(const char *text, size_t len)
{
	const unsigned char *s = (const unsigned char *)text;
	int64_t tokens = 0, run = 0;
	size_t i = 0;

	while (i < len) {
		uint32_t c;
		size_t n = utf8_next(s + i, len - i, &c);
		i += n;
		if (is_word(c)) {
			run++;
			continue;
		}
		if (run) {
			tokens += (run + TOKENS_CHARS_PER_TOKEN - 1) / TOKENS_CHARS_PER_TOKEN;
			run = 0;
		}
		if (c == '\n')
			tokens++;
		else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v')
			continue;
		else
			tokens++;
	}
	if (run)
		tokens += (run + TOKENS_CHARS_PER_TOKEN - 1) / TOKENS_CHARS_PER_TOKEN;
	return tokens;
}
