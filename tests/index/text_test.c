/* SPDX-License-Identifier: MIT */
/*
 * The analyzer (host/index/text.c) and the Porter stemmer: case folding
 * of Latin, Greek and Cyrillic, diacritics, apostrophes, stop words, CJK,
 * bad UTF-8, long words; Porter against the examples of Porter's paper
 * and against SQLite FTS5's porter tokenizer on a vocabulary.
 */
#include <criterion/criterion.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "index/porter.h"
#include "index/text.h"

#define OUT_MAX 4096

typedef struct collected {
	char buf[OUT_MAX];
	size_t len;
	int words; /* collect words instead of terms */
} collected;

static int collect(void *ud, const text_token *t)
{
	collected *c = ud;
	const char *s = c->words ? t->word : t->term;
	size_t n = c->words ? t->word_len : t->term_len;
	cr_assert_lt(c->len + n + 2, sizeof(c->buf));
	if (c->len)
		c->buf[c->len++] = ' ';
	memcpy(c->buf + c->len, s, n);
	c->len += n;
	c->buf[c->len] = '\0';
	return 0;
}

/* The terms of text, space-separated. */
static const char *terms(const char *text, uint32_t flags)
{
	static collected c;
	memset(&c, 0, sizeof(c));
	cr_assert_eq(text_terms(text, strlen(text), flags, collect, &c), 0);
	return c.buf;
}

static const char *words(const char *text)
{
	static collected c;
	memset(&c, 0, sizeof(c));
	c.words = 1;
	cr_assert_eq(text_terms(text, strlen(text), TEXT_STEM | TEXT_STOP, collect, &c), 0);
	return c.buf;
}

Test(text, splits_on_punctuation_and_folds_ascii)
{
	cr_assert_str_eq(terms("Hello, WORLD! foo_bar 3.14 gpt4-turbo", 0),
			 "hello world foo bar 3 14 gpt4 turbo");
	cr_assert_str_eq(terms("", 0), "");
	cr_assert_str_eq(terms("  ...!!  ", 0), "");
}

Test(text, case_folds_latin_greek_cyrillic_without_locale)
{
	/* Latin-1 and Latin Extended-A, diacritics removed as unicode61 does. */
	cr_assert_str_eq(terms("ZÜRICH Café NAÏVE Straße ŁÓDŹ ÆON Œuvre", 0),
			 "zurich cafe naive strasse lodz aeon oeuvre");
	/* Greek: capitals, tonos, final sigma. */
	cr_assert_str_eq(terms("ΟΔΥΣΣΕΥΣ Οδυσσεύς Άλφα", 0), "οδυσσευσ οδυσσευσ αλφα");
	/* Cyrillic: capitals incl. 0x400-0x40F, yo folds to ye. */
	cr_assert_str_eq(terms("МОСКВА Москва ЁЛКА Ђорђе", 0), "москва москва елка ђорђе");
	/* Vietnamese and fullwidth forms. */
	cr_assert_str_eq(terms("Tiếng Việt ＡＢＣ１２", 0), "tieng viet abc12");
	/* Combining marks (decomposed input) are dropped inside words. */
	cr_assert_str_eq(terms("Cafe\xcc\x81 e\xcc\x88", 0), "cafe e");
}

Test(text, fold_table_entries)
{
	uint32_t out[TEXT_FOLD_MAX];
	cr_assert_eq(text_fold(0xDF, out), 2); /* ß */
	cr_assert_eq(out[0], 's');
	cr_assert_eq(out[1], 's');
	cr_assert_eq(text_fold(0x3A3, out), 1); /* Σ */
	cr_assert_eq(out[0], 0x3C3);
	cr_assert_eq(text_fold(0x3C2, out), 1); /* ς */
	cr_assert_eq(out[0], 0x3C3);
	cr_assert_eq(text_fold(0x42F, out), 1); /* Я */
	cr_assert_eq(out[0], 0x44F);
	cr_assert_eq(text_fold(0x4E8, out), 1); /* Ө */
	cr_assert_eq(out[0], 0x4E9);
	cr_assert_eq(text_fold(0x531, out), 1); /* Armenian Ա */
	cr_assert_eq(out[0], 0x561);
	cr_assert_eq(text_fold(0x4E2D, out), 1); /* 中 unchanged */
	cr_assert_eq(out[0], 0x4E2D);
}

Test(text, apostrophes_and_possessives)
{
	cr_assert_str_eq(terms("John's car isn't O'Neil’s", 0), "john car isnt oneil");
	cr_assert_str_eq(terms("'quoted' rock'n'roll", 0), "quoted rocknroll");
}

Test(text, stop_words_are_dropped_only_when_asked)
{
	cr_assert_str_eq(terms("The cat is on the mat", TEXT_STOP), "cat mat");
	cr_assert_str_eq(terms("The cat is on the mat", 0), "the cat is on the mat");
	cr_assert(text_is_stop("the", 3));
	cr_assert(text_is_stop("a", 1));
	cr_assert(text_is_stop("your", 4));
	cr_assert(!text_is_stop("cat", 3));
	cr_assert(!text_is_stop("th", 2));
	cr_assert(!text_is_stop("thee", 4));
	/* Every word of the list is found (the binary search needs it sorted). */
	static const char *const all[] = {
		"a", "about", "am", "an", "and", "are", "as", "at", "be", "been", "being", "but",
		"by", "can", "could", "did", "do", "does", "for", "from", "had", "has", "have",
		"he", "her", "his", "i", "if", "in", "into", "is", "it", "its", "me", "my", "no",
		"not", "of", "on", "or", "our", "she", "should", "so", "such", "than", "that",
		"the", "their", "them", "then", "there", "these", "they", "this", "those", "to",
		"too", "very", "was", "we", "were", "what", "which", "who", "will", "with",
		"would", "you", "your",
	};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		cr_expect(text_is_stop(all[i], strlen(all[i])), "%s", all[i]);
}

Test(text, stemming_applies_to_ascii_words_only)
{
	cr_assert_str_eq(terms("Running runners ran easily", TEXT_STEM), "run runner ran easili");
	/* The word is kept unstemmed beside the term. */
	cr_assert_str_eq(words("Running runners"), "running runners");
	/* Words with digits or other scripts are not stemmed. */
	cr_assert_str_eq(terms("abc123s привычками", TEXT_STEM), "abc123s привычками");
	/* Folded Latin words are stemmed after folding. */
	cr_assert_str_eq(terms("CAFÉS", TEXT_STEM), "cafe");
}

Test(text, cjk_is_one_token_per_character)
{
	cr_assert_str_eq(terms("東京タワー abc漢字", 0), "東 京 タ ワ ー abc 漢 字");
}

Test(text, invalid_utf8_separates_and_long_words_are_cut)
{
	char longw[200];
	const char *t;

	cr_assert_str_eq(terms("ab\xff" "cd \xc0\xaf" "ef \xed\xa0\x80gh", 0), "ab cd ef gh");
	memset(longw, 'x', sizeof(longw) - 1);
	longw[sizeof(longw) - 1] = '\0';
	t = terms(longw, 0);
	cr_assert_eq(strlen(t), TEXT_TERM_MAX);
	/* A cut never splits a multi-byte character. */
	for (size_t i = 0; i < 99; i++) {
		longw[2 * i] = (char)0xC3;
		longw[2 * i + 1] = (char)0xA6; /* æ folds to "ae" */
	}
	longw[198] = '\0';
	t = terms(longw, 0);
	cr_assert_leq(strlen(t), TEXT_TERM_MAX);
	cr_assert_eq(strspn(t, "ae"), strlen(t));
}

Test(text, utf8_codec_round_trips)
{
	static const uint32_t cps[] = { 0x24, 0xA2, 0x939, 0x20AC, 0xD55C, 0x10348, 0x10FFFF };
	for (size_t i = 0; i < sizeof(cps) / sizeof(cps[0]); i++) {
		char buf[4];
		uint32_t back = 0;
		size_t n = text_utf8_encode(cps[i], buf);
		cr_assert_eq(text_utf8_decode(buf, n, &back), n);
		cr_assert_eq(back, cps[i]);
	}
	uint32_t cp;
	cr_assert_eq(text_utf8_decode("\xc0\x80", 2, &cp), 0, "overlong");
	cr_assert_eq(text_utf8_decode("\xed\xa0\x80", 3, &cp), 0, "surrogate");
	cr_assert_eq(text_utf8_decode("\xe2\x82", 2, &cp), 0, "truncated");
	cr_assert_eq(text_utf8_decode("\xf4\x90\x80\x80", 4, &cp), 0, "above U+10FFFF");
}

/* ---- Porter ------------------------------------------------------------------ */

static const char *stem(const char *w)
{
	static char buf[128];
	size_t n = strlen(w);
	memcpy(buf, w, n);
	buf[porter_stem(buf, n)] = '\0';
	return buf;
}

Test(porter, examples_from_the_paper)
{
	static const char *const pairs[][2] = {
		{ "caresses", "caress" }, { "ponies", "poni" }, { "ties", "ti" },
		{ "caress", "caress" }, { "cats", "cat" }, { "feed", "feed" }, { "agreed", "agre" },
		{ "plastered", "plaster" }, { "bled", "bled" }, { "motoring", "motor" },
		{ "sing", "sing" }, { "conflated", "conflat" }, { "troubled", "troubl" },
		{ "sized", "size" }, { "hopping", "hop" }, { "tanned", "tan" }, { "falling", "fall" },
		{ "hissing", "hiss" }, { "fizzed", "fizz" }, { "failing", "fail" }, { "filing", "file" },
		{ "happy", "happi" }, { "sky", "sky" }, { "relational", "relat" },
		{ "conditional", "condit" }, { "rational", "ration" }, { "valenci", "valenc" },
		{ "hesitanci", "hesit" }, { "digitizer", "digit" }, { "conformabli", "conform" },
		{ "radicalli", "radic" }, { "differentli", "differ" }, { "vileli", "vile" },
		{ "analogousli", "analog" }, { "vietnamization", "vietnam" },
		{ "predication", "predic" }, { "operator", "oper" }, { "feudalism", "feudal" },
		{ "decisiveness", "decis" }, { "hopefulness", "hope" }, { "callousness", "callous" },
		{ "formaliti", "formal" }, { "sensitiviti", "sensit" }, { "sensibiliti", "sensibl" },
		{ "triplicate", "triplic" }, { "formative", "form" }, { "formalize", "formal" },
		{ "electriciti", "electr" }, { "electrical", "electr" }, { "hopeful", "hope" },
		{ "goodness", "good" }, { "revival", "reviv" }, { "allowance", "allow" },
		{ "inference", "infer" }, { "airliner", "airlin" }, { "gyroscopic", "gyroscop" },
		{ "adjustable", "adjust" }, { "defensible", "defens" }, { "irritant", "irrit" },
		{ "replacement", "replac" }, { "adjustment", "adjust" }, { "dependent", "depend" },
		{ "adoption", "adopt" }, { "homologou", "homolog" }, { "communism", "commun" },
		{ "activate", "activ" }, { "angulariti", "angular" }, { "homologous", "homolog" },
		{ "effective", "effect" }, { "bowdlerize", "bowdler" }, { "probate", "probat" },
		{ "rate", "rate" }, { "cease", "ceas" }, { "controll", "control" }, { "roll", "roll" },
		{ "generalizations", "gener" }, { "oscillators", "oscil" }, { "a", "a" },
		{ "is", "is" }, { "ion", "ion" }, { "eed", "eed" },
	};
	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++)
		cr_expect_str_eq(stem(pairs[i][0]), pairs[i][1], "stem(%s)", pairs[i][0]);
}

/* English words covering every suffix rule, stemmed by SQLite FTS5's
 * porter tokenizer as the reference. */
static const char *const vocabulary =
	"abandoned abilities ability able abnormalities aboard absolutely absorbing abstraction "
	"academic acceleration accepted accessibility accidentally accommodation accompanied "
	"accordingly accountability accurately achievements acknowledged acquisitions activated "
	"actively activities actually adaptation addition additional adjustments administrative "
	"admitted adoption advertisements advising affectionately agreement agreeing alienation "
	"allowances alphabetical alternatively ambiguous amusement analogously analytically "
	"announcement anticipated apologizing apparently appreciation approximately arguing "
	"arrangements articulated artificially assessment assumptions attractiveness authorities "
	"automatically availability awareness bankruptcies basically beautifully believable "
	"benefited bicycles biologically blessings boundaries breathtaking brilliantly "
	"brotherhood calculations capabilities carelessness categorized celebrations "
	"certification challenging characterization cheerfulness childishness circulation "
	"civilization classification clumsiness collectively combinations comfortable commercially "
	"communications companionship comparatively competitiveness complications comprehensive "
	"conceptualization conditionally confidentiality configurations conscientiousness "
	"consequently considerably consolidation constitutional consultancies contemplating "
	"continuously contradictions controllable conventional conversational cooperatively "
	"coordination corporations correspondence counterproductive creatively criticism "
	"cultivation customization dangerously decentralization decisiveness dedication "
	"definitively deliberately demonstrations dependability descriptively destructiveness "
	"determination developmental differentiation digitization disagreements disappearing "
	"discouragement dissatisfaction distinctiveness diversification documentation "
	"dramatically dysfunctional economically educational effectiveness electrification "
	"embarrassment emotionally emphasizing encouragement enthusiastically environmentalism "
	"equalization establishments evaluations exaggeration excitement exclusively expectations "
	"experimentation explanations expressiveness externalization fabrication faithfulness "
	"familiarization fascination feasibility federalism fictionalized finalization "
	"flexibility forgetfulness formalities fortunately friendliness fulfillment functionality "
	"generalization generously globalization gracefully gratefulness hallucinations "
	"happiness harmonization helplessness hesitation historically hopelessness hospitality "
	"humanitarianism hypothetically idealization identification illustrations imaginative "
	"immediately implementation impressively improvisation inconsistencies incrementally "
	"independently individualism industrialization inevitability informational initialization "
	"innovativeness institutionalization intellectually intentionally internationalization "
	"interpretations intimidation invalidation irresponsibility jealousness journalism "
	"judgmental justifications kindness knowledgeable laboriously legalization liberalization "
	"likelihood logically loneliness magnification manipulation marginalization "
	"materialization meaningfulness mechanization memorization methodologically "
	"miscommunication mobilization modernization monopolization motivational multiplication "
	"naturalization neighborhoods nervousness normalization notifications nullification "
	"objectivity obligations observational occasionally operational optimization "
	"organizational originality outrageously overwhelmingly ownership participation "
	"particularly peacefulness perfectionism personalization persuasiveness philosophically "
	"playfulness politically popularization possessiveness powerfully practicality "
	"preoccupation presentations prioritization productivity professionalism programmatically "
	"proportionality prosperity publication purposefully qualifications questionnaires "
	"radicalization rationalization readiness realization recognizable recommendations "
	"reconciliation reformulation regionalization relationships reliability remarkably "
	"representational resourcefulness responsibilities restlessness revolutionary "
	"righteousness romanticism ruthlessness sanitization satisfactorily scandalous "
	"scientifically secularization sensationalism sentimentality seriousness significantly "
	"simplification sleeplessness socialization sophistication specialization spirituality "
	"spontaneously standardization stereotypical strategically subconsciously "
	"substantially successfully suggestiveness supervision sustainability symbolization "
	"systematically technological tenderness theoretically thoughtfulness traditionally "
	"transformational transparency tremendously truthfulness uncomfortably understandably "
	"unfortunately unpredictability urbanization usefulness utilization validation "
	"vaporization verification visualization vulnerability weightlessness wholeheartedly "
	"wilderness wonderfully worthlessness youthfulness zealousness";

Test(porter, agrees_with_sqlite_fts5_porter)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	char word[128];
	int n = 0;

	cr_assert_eq(sqlite3_open(":memory:", &db), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(db,
				  "CREATE VIRTUAL TABLE t USING fts5(x, tokenize='porter ascii');"
				  "CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance');",
				  NULL, NULL, NULL),
		     SQLITE_OK, "%s", sqlite3_errmsg(db));
	for (const char *p = vocabulary; *p;) {
		size_t len = strcspn(p, " ");
		cr_assert_lt(len, sizeof(word));
		memcpy(word, p, len);
		word[len] = '\0';
		p += len + (p[len] == ' ');
		cr_assert_eq(sqlite3_prepare_v2(db, "INSERT INTO t(rowid, x) VALUES (?1, ?2)", -1, &st,
						NULL),
			     SQLITE_OK);
		sqlite3_bind_int(st, 1, n++);
		sqlite3_bind_text(st, 2, word, -1, SQLITE_TRANSIENT);
		cr_assert_eq(sqlite3_step(st), SQLITE_DONE);
		sqlite3_finalize(st);
	}
	cr_assert_eq(sqlite3_prepare_v2(db, "SELECT v.term, t.x FROM v JOIN t ON t.rowid = v.doc", -1,
					&st, NULL),
		     SQLITE_OK);
	int checked = 0;
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *ref = (const char *)sqlite3_column_text(st, 0);
		const char *w = (const char *)sqlite3_column_text(st, 1);
		cr_expect_str_eq(stem(w), ref, "stem(%s)", w);
		checked++;
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	cr_assert_eq(checked, n);
	cr_assert_gt(n, 350);
}
