/* SPDX-License-Identifier: MIT */
#include "service/title.h"

#include <stdlib.h>
#include <string.h>

#define ELLIPSIS "\xe2\x80\xa6" /* U+2026 */

static int is_space(unsigned char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static int is_continuation(unsigned char c)
{
	return (c & 0xC0) == 0x80;
}

char *title_from_text(const char *text)
{
	size_t len = text ? strlen(text) : 0, n = 0, chars = 0;
	size_t cut = 0, last_space = 0;
	int truncated = 0;
	char *out;

	if (!len)
		return NULL;
	out = malloc(len + sizeof(ELLIPSIS));
	if (!out)
		return NULL;
	/* Collapse white space. */
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)text[i];
		if (is_space(c)) {
			if (n && out[n - 1] != ' ')
				out[n++] = ' ';
		} else {
			out[n++] = (char)c;
		}
	}
	while (n && out[n - 1] == ' ')
		n--;
	if (!n) {
		free(out);
		return NULL;
	}
	/* Find the byte length of the first TITLE_MAX_CHARS code points. */
	for (size_t i = 0; i < n; i++) {
		if (is_continuation((unsigned char)out[i]))
			continue;
		if (chars == TITLE_MAX_CHARS) {
			truncated = 1;
			break;
		}
		if (out[i] == ' ')
			last_space = i;
		chars++;
		cut = i + 1;
		while (cut < n && is_continuation((unsigned char)out[cut]))
			cut++;
	}
	if (truncated) {
		/* Make room for the ellipsis: at most TITLE_MAX_CHARS - 1 before it. */
		size_t keep = 0, c = 0;
		for (size_t i = 0; i < n && c < TITLE_MAX_CHARS - 1; i++) {
			if (is_continuation((unsigned char)out[i]))
				continue;
			c++;
			keep = i + 1;
			while (keep < n && is_continuation((unsigned char)out[keep]))
				keep++;
		}
		last_space = 0;
		for (size_t i = 0; i <= keep && i < n; i++)
			if (out[i] == ' ')
				last_space = i;
		cut = last_space ? last_space : keep;
		while (cut && out[cut - 1] == ' ')
			cut--;
		memcpy(out + cut, ELLIPSIS, sizeof(ELLIPSIS));
		return out;
	}
	out[cut] = '\0';
	return out;
}
