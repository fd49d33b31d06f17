/* SPDX-License-Identifier: MIT */
/* Small host modules: titles, approximate tokens, times, ids, UUIDv7,
 * temp: state. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "json/event_json.h"
#include "service/temp_state.h"
#include "service/title.h"
#include "tokens/tokens.h"
#include "util/uuid.h"

static size_t codepoints(const char *s)
{
	size_t n = 0;
	for (; *s; s++)
		n += ((unsigned char)*s & 0xC0) != 0x80;
	return n;
}

Test(title, short_text_is_kept_with_spaces_collapsed)
{
	char *t = title_from_text("  Hello \n\t world  ");
	cr_assert_str_eq(t, "Hello world");
	free(t);
	cr_assert_null(title_from_text(" \n\t "));
	cr_assert_null(title_from_text(""));
}

Test(title, long_text_is_cut_on_a_word_boundary)
{
	char *t = title_from_text("The quick brown fox jumps over the lazy dog and keeps running "
				  "far beyond the end of the title");
	cr_assert_leq(codepoints(t), 60);
	cr_assert_str_eq(t, "The quick brown fox jumps over the lazy dog and keeps\xe2\x80\xa6");
	free(t);
	t = title_from_text("Supercalifragilisticexpialidocious-and-then-some-more-words-with-no-spaces-at-all");
	cr_assert_eq(codepoints(t), 60);
	free(t);
	/* Multi-byte text is cut on code points, never inside one. */
	t = title_from_text("日本語のテキストはスペースがないので文字で切られますが、それでも正しいUTF-8のままであるべきですよね本当に長い");
	cr_assert_leq(codepoints(t), 60);
	cr_assert(ej_utf8_valid(t, strlen(t)));
	free(t);
}

Test(tokens, heuristic)
{
	cr_assert_eq(tokens_approx("", 0), 0);
	cr_assert_eq(tokens_approx("hello", 5), 1);
	cr_assert_eq(tokens_approx("internationalization", 20), 4);
	cr_assert_eq(tokens_approx("a b c", 5), 3);
	cr_assert_eq(tokens_approx("hi, there!", 10), 4);
	cr_assert_eq(tokens_approx("日本語", strlen("日本語")), 3);
	cr_assert_eq(tokens_approx("line\nline", 9), 3);
	cr_assert_gt(tokens_approx("\xff\xfe", 2), 0);
}

Test(time, format_and_parse_round_trip)
{
	char buf[EJ_TIME_LEN];
	int64_t us;
	ej_format_time(1763701440123456LL, buf);
	cr_assert_str_eq(buf, "2025-11-21T05:04:00.123456Z");
	cr_assert_eq(ej_parse_time(buf, &us), 0);
	cr_assert_eq(us, 1763701440123456LL);
	cr_assert_eq(ej_parse_time("2025-11-21T07:04:00.5+02:00", &us), 0);
	cr_assert_eq(us, 1763701440500000LL);
	cr_assert_eq(ej_parse_time("2025-11-21T05:04:00Z", &us), 0);
	cr_assert_eq(ej_parse_time("2025-13-21T05:04:00Z", &us), MEMD_EINVAL);
	cr_assert_eq(ej_parse_time("yesterday", &us), MEMD_EINVAL);
	cr_assert_eq(ej_parse_time("2025-11-21T05:04:00", &us), MEMD_EINVAL);
}

Test(ids, validation)
{
	char longid[MEMD_ID_MAX + 2];
	memd_error err = { 0 };
	cr_assert_eq(ej_check_id("user-1@example.com", "id", &err), 0);
	cr_assert_eq(ej_check_id("Robert'); DROP TABLE sessions;--", "id", &err), 0);
	cr_assert_eq(ej_check_id("a/b", "id", &err), MEMD_EINVAL);
	cr_assert_eq(ej_check_id("a\tb", "id", &err), MEMD_EINVAL);
	cr_assert_eq(ej_check_id("\xc3\x28", "id", &err), MEMD_EINVAL);
	cr_assert_eq(ej_check_id("\xed\xa0\x80", "id", &err), MEMD_EINVAL, "surrogate accepted");
	memset(longid, 'x', sizeof(longid) - 1);
	longid[sizeof(longid) - 1] = '\0';
	cr_assert_eq(ej_check_id(longid, "id", &err), MEMD_EINVAL);
	longid[MEMD_ID_MAX] = '\0';
	cr_assert_eq(ej_check_id(longid, "id", &err), 0);
	cr_assert_eq(ej_check_name("report.v2.pdf", &err), 0);
	cr_assert_eq(ej_check_name("..", &err), MEMD_EINVAL);
	cr_assert_eq(ej_check_name("a..b", &err), MEMD_EINVAL);
	cr_assert_eq(ej_check_name(".", &err), 0);
	cr_assert_eq(ej_check_name(".hidden", &err), 0);
	cr_assert_eq(ej_check_name("", &err), MEMD_EINVAL);
	cr_assert_eq(ej_check_name("a/b", &err), MEMD_EINVAL);
	cr_assert_eq(ej_check_name("a\x01", &err), MEMD_EINVAL);
	cr_assert_eq(ej_check_name("a\\b", &err), MEMD_EINVAL);
}

Test(uuid, v7_shape_and_order)
{
	char a[UUID_TEXT_LEN + 1], b[UUID_TEXT_LEN + 1];
	cr_assert_eq(uuid_v7(a), 0);
	cr_assert_eq(strlen(a), 36);
	cr_assert_eq(a[14], '7', "version nibble: %s", a);
	cr_assert(strchr("89ab", a[19]), "variant: %s", a);
	cr_assert_eq(uuid_v7(b), 0);
	cr_assert_str_neq(a, b);
	cr_assert_leq(strncmp(a, b, 8), 0, "time prefix went backwards");
}

Test(temp_state, ttl_invocations_and_drop)
{
	temp_state *t = temp_state_new(1000);
	json_t *v = json_integer(7), *o;

	cr_assert_eq(temp_state_set(t, "a", "u", "s", "inv", "temp:x", v, 0), 0);
	cr_assert_eq(temp_state_set(t, "a", "u", "s", NULL, "temp:y", v, 0), 0);
	cr_assert_eq(temp_state_set(t, "a", "u", "s2", NULL, "temp:z", v, 0), 0);
	o = json_object();
	temp_state_merge(t, "a", "u", "s", o, 10);
	cr_assert_eq(json_object_size(o), 2);
	json_decref(o);

	temp_state_end_invocation(t, "a", "u", "s", "inv");
	o = json_object();
	temp_state_merge(t, "a", "u", "s", o, 10);
	cr_assert_eq(json_object_size(o), 1);
	cr_assert_not_null(json_object_get(o, "temp:y"));
	json_decref(o);

	o = json_object();
	temp_state_merge(t, "a", "u", "s", o, 1001);
	cr_assert_eq(json_object_size(o), 0, "a key outlived its TTL");
	json_decref(o);

	temp_state_drop(t, "a", "u", NULL);
	o = json_object();
	temp_state_merge(t, "a", "u", "s2", o, 10);
	cr_assert_eq(json_object_size(o), 0, "dropping the user left a key");
	json_decref(o);
	json_decref(v);
	temp_state_free(t);
}
