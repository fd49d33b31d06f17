/* SPDX-License-Identifier: MIT */
#include "text.h"

#include <string.h>

#include "porter.h"

/* Room for a term plus one folded character that may overflow it. */
#define WORD_BUF (TEXT_TERM_MAX + 8)
#define APOS_MARK '\''
#define CP_MAX 0x10FFFFu

/* ---- UTF-8 ------------------------------------------------------------------ */

size_t text_utf8_decode(const char *s, size_t len, uint32_t *ret_cp)
{
	const unsigned char *u = (const unsigned char *)s;
	uint32_t cp, min;
	size_t n;

	if (u[0] < 0x80) {
		*ret_cp = u[0];
		return 1;
	}
	if ((u[0] & 0xE0) == 0xC0) {
		n = 2;
		cp = u[0] & 0x1Fu;
		min = 0x80;
	} else if ((u[0] & 0xF0) == 0xE0) {
		n = 3;
		cp = u[0] & 0x0Fu;
		min = 0x800;
	} else if ((u[0] & 0xF8) == 0xF0) {
		n = 4;
		cp = u[0] & 0x07u;
		min = 0x10000;
	} else {
		return 0;
	}
	if (len < n)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((u[i] & 0xC0) != 0x80)
			return 0;
		cp = (cp << 6) | (u[i] & 0x3Fu);
	}
	if (cp < min || cp > CP_MAX || (cp >= 0xD800 && cp <= 0xDFFF))
		return 0;
	*ret_cp = cp;
	return n;
}

size_t text_utf8_encode(uint32_t cp, char out[4])
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xC0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xE0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		out[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	out[0] = (char)(0xF0 | (cp >> 18));
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
	out[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}

/* ---- classes ---------------------------------------------------------------- */

typedef struct cp_range {
	uint32_t lo, hi;
	int cls;
} cp_range;

/* Non-ASCII ranges that are not plain word characters, ascending. */
static const cp_range class_ranges[] = {
	{ 0x0080, 0x00A9, TEXT_SEP },    /* Latin-1 controls, punctuation, symbols */
	{ 0x00AB, 0x00AC, TEXT_SEP },
	{ 0x00AD, 0x00AD, TEXT_DROP },   /* soft hyphen */
	{ 0x00AE, 0x00B4, TEXT_SEP },
	{ 0x00B6, 0x00B9, TEXT_SEP },
	{ 0x00BB, 0x00BF, TEXT_SEP },
	{ 0x00D7, 0x00D7, TEXT_SEP },    /* multiplication sign */
	{ 0x00F7, 0x00F7, TEXT_SEP },    /* division sign */
	{ 0x02BC, 0x02BC, TEXT_APOS },   /* modifier letter apostrophe */
	{ 0x02C2, 0x02C5, TEXT_SEP },
	{ 0x02D2, 0x02DF, TEXT_SEP },
	{ 0x0300, 0x036F, TEXT_DROP },   /* combining diacritical marks */
	{ 0x037E, 0x037E, TEXT_SEP },    /* Greek question mark */
	{ 0x0387, 0x0387, TEXT_SEP },    /* Greek ano teleia */
	{ 0x0482, 0x0482, TEXT_SEP },
	{ 0x0483, 0x0489, TEXT_DROP },   /* Cyrillic combining marks */
	{ 0x055A, 0x055F, TEXT_SEP },    /* Armenian punctuation */
	{ 0x0589, 0x058A, TEXT_SEP },
	{ 0x0591, 0x05C7, TEXT_DROP },   /* Hebrew points */
	{ 0x05F3, 0x05F4, TEXT_SEP },
	{ 0x0600, 0x060F, TEXT_SEP },    /* Arabic punctuation */
	{ 0x0610, 0x061A, TEXT_DROP },
	{ 0x061B, 0x061F, TEXT_SEP },
	{ 0x064B, 0x065F, TEXT_DROP },   /* Arabic harakat */
	{ 0x066A, 0x066D, TEXT_SEP },
	{ 0x0670, 0x0670, TEXT_DROP },
	{ 0x06D4, 0x06D4, TEXT_SEP },
	{ 0x06D6, 0x06ED, TEXT_DROP },
	{ 0x0964, 0x0965, TEXT_SEP },    /* Devanagari danda */
	{ 0x0E3F, 0x0E3F, TEXT_SEP },    /* Thai baht */
	{ 0x1AB0, 0x1AFF, TEXT_DROP },   /* combining marks extended */
	{ 0x1DC0, 0x1DFF, TEXT_DROP },   /* combining marks supplement */
	{ 0x2000, 0x200A, TEXT_SEP },    /* spaces */
	{ 0x200B, 0x200B, TEXT_SEP },    /* zero width space */
	{ 0x200C, 0x200D, TEXT_DROP },   /* ZWNJ, ZWJ */
	{ 0x200E, 0x2018, TEXT_SEP },    /* marks, dashes, quotes */
	{ 0x2019, 0x2019, TEXT_APOS },   /* right single quotation mark */
	{ 0x201A, 0x206F, TEXT_SEP },    /* general punctuation */
	{ 0x2070, 0x209F, TEXT_SEP },    /* super- and subscripts */
	{ 0x20A0, 0x20CF, TEXT_SEP },    /* currency */
	{ 0x20D0, 0x20FF, TEXT_DROP },   /* combining marks for symbols */
	{ 0x2100, 0x2BFF, TEXT_SEP },    /* letterlike .. misc symbols and arrows */
	{ 0x2E00, 0x2E7F, TEXT_SEP },    /* supplemental punctuation */
	{ 0x2FF0, 0x2FFF, TEXT_SEP },    /* ideographic description */
	{ 0x3000, 0x303F, TEXT_SEP },    /* CJK symbols and punctuation */
	{ 0x3040, 0x309F, TEXT_SINGLE }, /* hiragana */
	{ 0x30A0, 0x30FF, TEXT_SINGLE }, /* katakana */
	{ 0x3400, 0x4DBF, TEXT_SINGLE }, /* CJK extension A */
	{ 0x4DC0, 0x4DFF, TEXT_SEP },    /* hexagrams */
	{ 0x4E00, 0x9FFF, TEXT_SINGLE }, /* CJK unified ideographs */
	{ 0xD800, 0xF8FF, TEXT_SEP },    /* surrogates, private use */
	{ 0xF900, 0xFAFF, TEXT_SINGLE }, /* CJK compatibility ideographs */
	{ 0xFD3E, 0xFD3F, TEXT_SEP },
	{ 0xFE00, 0xFE0F, TEXT_DROP },   /* variation selectors */
	{ 0xFE10, 0xFE1F, TEXT_SEP },
	{ 0xFE20, 0xFE2F, TEXT_DROP },
	{ 0xFE30, 0xFE6F, TEXT_SEP },    /* CJK compatibility forms, small forms */
	{ 0xFEFF, 0xFEFF, TEXT_SEP },    /* BOM */
	{ 0xFF00, 0xFF0F, TEXT_SEP },    /* fullwidth punctuation */
	{ 0xFF1A, 0xFF20, TEXT_SEP },
	{ 0xFF3B, 0xFF40, TEXT_SEP },
	{ 0xFF5B, 0xFF65, TEXT_SEP },
	{ 0xFF66, 0xFF9F, TEXT_SINGLE }, /* halfwidth katakana */
	{ 0xFFE0, 0xFFFF, TEXT_SEP },
	{ 0x1D000, 0x1D24F, TEXT_SEP },  /* musical symbols */
	{ 0x1F000, 0x1FAFF, TEXT_SEP },  /* emoji, pictographs */
	{ 0x20000, 0x2FFFF, TEXT_SINGLE }, /* CJK extensions B.. */
	{ 0xE0000, 0xE007F, TEXT_DROP }, /* tags */
	{ 0xF0000, 0x10FFFF, TEXT_SEP }, /* private use planes */
};

int text_class(uint32_t cp)
{
	size_t lo = 0, hi = sizeof(class_ranges) / sizeof(class_ranges[0]);

	if (cp < 0x80) {
		if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9'))
			return TEXT_WORD;
		return cp == '\'' ? TEXT_APOS : TEXT_SEP;
	}
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (cp < class_ranges[mid].lo)
			hi = mid;
		else if (cp > class_ranges[mid].hi)
			lo = mid + 1;
		else
			return class_ranges[mid].cls;
	}
	return TEXT_WORD;
}

/* ---- folding ---------------------------------------------------------------- */

/* U+00C0..U+00FF: the base letter(s), lower case; "" keeps the character
 * (x and / signs are separators anyway). */
static const char *const latin1_base[64] = {
	"a", "a", "a", "a", "a", "a", "ae", "c", "e", "e", "e", "e", "i", "i", "i", "i",
	"d", "n", "o", "o", "o", "o", "o", "", "o", "u", "u", "u", "u", "y", "th", "ss",
	"a", "a", "a", "a", "a", "a", "ae", "c", "e", "e", "e", "e", "i", "i", "i", "i",
	"d", "n", "o", "o", "o", "o", "o", "", "o", "u", "u", "u", "u", "y", "th", "y",
};

/* U+0100..U+017F: base letter, lower case; '1' = "ij", '2' = "oe". */
static const char latin_ext_a_base[] =
	"aaaaaaccccccccdd"
	"ddeeeeeeeeeegggg"
	"gggghhhhiiiiiiii"
	"ii11jjkkklllllll"
	"lllnnnnnnnnnoooo"
	"oo22rrrrrrssssss"
	"ssttttttuuuuuuuu"
	"uuuuwwyyyzzzzzzs";

/* U+01CD..U+01DC (pinyin vowels with caron etc.). */
static const char latin_ext_b_pinyin[] = "aaiioouuuuuuuuuu";

/* Greek letters with tonos/dialytika, upper and lower, to the bare lower
 * case letter: pairs (from, to). */
static const uint32_t greek_accents[][2] = {
	{ 0x0386, 0x03B1 }, { 0x0388, 0x03B5 }, { 0x0389, 0x03B7 }, { 0x038A, 0x03B9 },
	{ 0x038C, 0x03BF }, { 0x038E, 0x03C5 }, { 0x038F, 0x03C9 }, { 0x0390, 0x03B9 },
	{ 0x03AA, 0x03B9 }, { 0x03AB, 0x03C5 }, { 0x03AC, 0x03B1 }, { 0x03AD, 0x03B5 },
	{ 0x03AE, 0x03B7 }, { 0x03AF, 0x03B9 }, { 0x03B0, 0x03C5 }, { 0x03C2, 0x03C3 },
	{ 0x03CA, 0x03B9 }, { 0x03CB, 0x03C5 }, { 0x03CC, 0x03BF }, { 0x03CD, 0x03C5 },
	{ 0x03CE, 0x03C9 },
};

static size_t put_ascii(const char *s, uint32_t out[TEXT_FOLD_MAX])
{
	size_t n = 0;
	while (s[n] && n < TEXT_FOLD_MAX) {
		out[n] = (unsigned char)s[n];
		n++;
	}
	return n;
}

/* Lower case of an alternating upper/lower pair range starting at an
 * upper-case code point `first`. */
static uint32_t pair_lower(uint32_t cp, uint32_t first)
{
	return ((cp - first) & 1u) ? cp : cp + 1;
}

static uint32_t vietnamese_base(uint32_t cp)
{
	if (cp <= 0x1EB7)
		return 'a';
	if (cp <= 0x1EC7)
		return 'e';
	if (cp <= 0x1ECB)
		return 'i';
	if (cp <= 0x1EE3)
		return 'o';
	if (cp <= 0x1EF1)
		return 'u';
	return 'y';
}

size_t text_fold(uint32_t cp, uint32_t out[TEXT_FOLD_MAX])
{
	if (cp < 0x80) {
		out[0] = cp >= 'A' && cp <= 'Z' ? cp + ('a' - 'A') : cp;
		return 1;
	}
	if (cp >= 0xC0 && cp <= 0xFF && latin1_base[cp - 0xC0][0])
		return put_ascii(latin1_base[cp - 0xC0], out);
	if (cp >= 0x100 && cp <= 0x17F) {
		char c = latin_ext_a_base[cp - 0x100];
		if (c == '1')
			return put_ascii("ij", out);
		if (c == '2')
			return put_ascii("oe", out);
		out[0] = (unsigned char)c;
		return 1;
	}
	if (cp >= 0x1CD && cp <= 0x1DC) {
		out[0] = (unsigned char)latin_ext_b_pinyin[cp - 0x1CD];
		return 1;
	}
	if (cp >= 0x218 && cp <= 0x21B) { /* Romanian s and t with comma below */
		out[0] = cp < 0x21A ? 's' : 't';
		return 1;
	}
	if (cp >= 0x386 && cp <= 0x3CE) {
		for (size_t i = 0; i < sizeof(greek_accents) / sizeof(greek_accents[0]); i++)
			if (greek_accents[i][0] == cp) {
				out[0] = greek_accents[i][1];
				return 1;
			}
		if (cp >= 0x391 && cp <= 0x3A9) {
			out[0] = cp + 0x20;
			return 1;
		}
	}
	if (cp >= 0x3D8 && cp <= 0x3EF) { /* archaic letters, Coptic in Greek: pairs */
		out[0] = pair_lower(cp, 0x3D8);
		return 1;
	}
	if (cp >= 0x400 && cp <= 0x52F) {
		if (cp == 0x401 || cp == 0x451) /* yo -> ye, as Russian search does */
			out[0] = 0x435;
		else if (cp <= 0x40F)
			out[0] = cp + 0x50;
		else if (cp <= 0x42F)
			out[0] = cp + 0x20;
		else if (cp >= 0x460 && cp <= 0x481)
			out[0] = pair_lower(cp, 0x460);
		else if (cp >= 0x48A && cp <= 0x4BF)
			out[0] = pair_lower(cp, 0x48A);
		else if (cp == 0x4C0)
			out[0] = 0x4CF;
		else if (cp >= 0x4C1 && cp <= 0x4CE)
			out[0] = pair_lower(cp, 0x4C1);
		else if (cp >= 0x4D0 && cp <= 0x52F)
			out[0] = pair_lower(cp, 0x4D0);
		else
			out[0] = cp;
		return 1;
	}
	if (cp >= 0x531 && cp <= 0x556) { /* Armenian capitals */
		out[0] = cp + 0x30;
		return 1;
	}
	if (cp >= 0x1EA0 && cp <= 0x1EF9) { /* Vietnamese */
		out[0] = vietnamese_base(cp);
		return 1;
	}
	if (cp >= 0x1E00 && cp <= 0x1E95) { /* Latin extended additional: pairs */
		out[0] = pair_lower(cp, 0x1E00);
		return 1;
	}
	if (cp >= 0xFF10 && cp <= 0xFF19) { /* fullwidth digits */
		out[0] = cp - 0xFF10 + '0';
		return 1;
	}
	if (cp >= 0xFF21 && cp <= 0xFF3A) { /* fullwidth A-Z */
		out[0] = cp - 0xFF21 + 'a';
		return 1;
	}
	if (cp >= 0xFF41 && cp <= 0xFF5A) { /* fullwidth a-z */
		out[0] = cp - 0xFF41 + 'a';
		return 1;
	}
	out[0] = cp;
	return 1;
}

/* ---- stop words ------------------------------------------------------------- */

/* English stop words, sorted (binary search): Lucene's list, the
 * pronouns and auxiliaries that dominate conversational text, and the
 * rest of Snowball's English list: question words ("how", "when",
 * "where", "why") carry nothing in a question put to a memory and only
 * pull in other questions (tests/quality measures it); contractions as
 * they are once apostrophes are removed ("ive", "dont"), except those
 * that are words too ("ill", "well", "shed", "wed", "id", "hell"). */
typedef struct stop_word {
	const char *w;
	size_t len;
} stop_word;
#define SW(x) { x, sizeof(x) - 1 }
static const stop_word stop_words[] = {
	SW("a"), SW("about"), SW("above"), SW("after"), SW("again"), SW("against"), SW("all"),
	SW("am"), SW("an"), SW("and"), SW("any"), SW("are"), SW("arent"), SW("as"), SW("at"),
	SW("be"), SW("because"), SW("been"), SW("before"), SW("being"), SW("below"),
	SW("between"), SW("both"), SW("but"), SW("by"), SW("can"), SW("cannot"), SW("cant"),
	SW("could"), SW("couldnt"), SW("did"), SW("didnt"), SW("do"), SW("does"), SW("doesnt"),
	SW("doing"), SW("dont"), SW("down"), SW("during"), SW("each"), SW("few"), SW("for"),
	SW("from"), SW("further"), SW("had"), SW("hadnt"), SW("has"), SW("hasnt"), SW("have"),
	SW("havent"), SW("having"), SW("he"), SW("her"), SW("here"), SW("hers"), SW("herself"),
	SW("him"), SW("himself"), SW("his"), SW("how"), SW("i"), SW("if"), SW("im"), SW("in"),
	SW("into"), SW("is"), SW("isnt"), SW("it"), SW("its"), SW("itself"), SW("ive"),
	SW("me"), SW("more"), SW("most"), SW("mustnt"), SW("my"), SW("myself"), SW("no"),
	SW("nor"), SW("not"), SW("of"), SW("off"), SW("on"), SW("once"), SW("only"), SW("or"),
	SW("other"), SW("ought"), SW("our"), SW("ours"), SW("ourselves"), SW("out"), SW("over"),
	SW("own"), SW("shant"), SW("she"), SW("should"), SW("shouldnt"), SW("so"),
	SW("some"), SW("such"), SW("than"), SW("that"), SW("the"), SW("their"), SW("theirs"),
	SW("them"), SW("themselves"), SW("then"), SW("there"), SW("these"), SW("they"),
	SW("theyd"), SW("theyll"), SW("theyve"), SW("this"), SW("those"), SW("through"),
	SW("to"), SW("too"), SW("under"), SW("until"), SW("up"), SW("very"), SW("was"),
	SW("wasnt"), SW("we"), SW("were"), SW("werent"), SW("weve"), SW("what"), SW("when"),
	SW("where"), SW("which"), SW("while"), SW("who"), SW("whom"), SW("why"), SW("will"),
	SW("with"), SW("wont"), SW("would"), SW("wouldnt"), SW("you"), SW("youd"), SW("youll"),
	SW("your"), SW("youre"), SW("yours"), SW("yourself"), SW("yourselves"), SW("youve"),
};
#undef SW
/* The longest stop word: longer words are never looked up. */
#define STOP_WORD_MAX 10

int text_is_stop(const char *word, size_t len)
{
	size_t lo = 0, hi = sizeof(stop_words) / sizeof(stop_words[0]);
	if (len > STOP_WORD_MAX)
		return 0;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const stop_word *w = &stop_words[mid];
		size_t n = len < w->len ? len : w->len, k = 0;
		int c;
		while (k < n && word[k] == w->w[k])
			k++;
		if (k < n)
			c = (unsigned char)word[k] < (unsigned char)w->w[k] ? -1 : 1;
		else
			c = len < w->len ? -1 : len > w->len ? 1 : 0;
		if (c == 0)
			return 1;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return 0;
}

/* ---- tokenizer -------------------------------------------------------------- */

typedef struct word_state {
	char buf[WORD_BUF];
	size_t len;
	int full; /* a character did not fit: the rest of the word is cut */
} word_state;

static void word_put(word_state *w, uint32_t cp)
{
	char enc[4];
	size_t n;

	if (w->full)
		return;
	n = text_utf8_encode(cp, enc);
	if (w->len + n > TEXT_TERM_MAX) {
		w->full = 1;
		return;
	}
	memcpy(w->buf + w->len, enc, n);
	w->len += n;
}

static int all_az(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (s[i] < 'a' || s[i] > 'z')
			return 0;
	return 1;
}

/* Nonzero for the pronouns TEXT_KEEP_SELF keeps. */
static int is_self(const char *w, size_t n)
{
	static const char *const self[] = { "i", "me", "my", "myself" };
	for (size_t i = 0; i < sizeof(self) / sizeof(self[0]); i++)
		if (strlen(self[i]) == n && memcmp(self[i], w, n) == 0)
			return 1;
	return 0;
}

/* Finish the current word: possessive, apostrophes, stop words, stem. */
static int word_emit(word_state *w, uint32_t flags, text_token_fn fn, void *ud)
{
	char stem[WORD_BUF];
	text_token t;
	size_t n = 0;

	if (w->len >= 2 && w->buf[w->len - 1] == 's' && w->buf[w->len - 2] == APOS_MARK)
		w->len -= 2;
	for (size_t i = 0; i < w->len; i++)
		if (w->buf[i] != APOS_MARK)
			w->buf[n++] = w->buf[i];
	w->len = 0;
	w->full = 0;
	if (!n)
		return 0;
	if ((flags & TEXT_STOP) && text_is_stop(w->buf, n) &&
	    !((flags & TEXT_KEEP_SELF) && is_self(w->buf, n)))
		return 0;
	t.word = w->buf;
	t.word_len = n;
	t.term = w->buf;
	t.term_len = n;
	if ((flags & TEXT_STEM) && all_az(w->buf, n)) {
		memcpy(stem, w->buf, n);
		t.term = stem;
		t.term_len = porter_stem(stem, n);
	}
	return fn(ud, &t);
}

static int emit_single(uint32_t cp, text_token_fn fn, void *ud)
{
	char enc[4];
	size_t n = text_utf8_encode(cp, enc);
	text_token t = { enc, n, enc, n };
	return fn(ud, &t);
}

int text_terms(const char *s, size_t len, uint32_t flags, text_token_fn fn, void *userdata)
{
	word_state w = { .len = 0 };
	size_t i = 0;
	int r;

	while (i < len) {
		uint32_t cp, next, folded[TEXT_FOLD_MAX];
		size_t n = text_utf8_decode(s + i, len - i, &cp), nf;
		int cls;

		if (!n) { /* invalid byte: a separator */
			i++;
			if (w.len && (r = word_emit(&w, flags, fn, userdata)) != 0)
				return r;
			continue;
		}
		i += n;
		cls = text_class(cp);
		/* An apostrophe inside a word and followed by a letter is kept
		 * as a mark; anywhere else it separates. */
		if (cls == TEXT_APOS &&
		    !(w.len && i < len && text_utf8_decode(s + i, len - i, &next) &&
		      text_class(next) == TEXT_WORD))
			cls = TEXT_SEP;
		switch (cls) {
		case TEXT_WORD:
			nf = text_fold(cp, folded);
			for (size_t k = 0; k < nf; k++)
				word_put(&w, folded[k]);
			break;
		case TEXT_DROP:
			break;
		case TEXT_APOS:
			if (!w.full && w.len < TEXT_TERM_MAX)
				w.buf[w.len++] = APOS_MARK;
			break;
		default:
			if (w.len && (r = word_emit(&w, flags, fn, userdata)) != 0)
				return r;
			if (cls == TEXT_SINGLE && (r = emit_single(cp, fn, userdata)) != 0)
				return r;
			break;
		}
	}
	if (w.len && (r = word_emit(&w, flags, fn, userdata)) != 0)
		return r;
	return 0;
}
