/* SPDX-License-Identifier: MIT */
/* util/base64: the RFC 4648 test vectors in both alphabets, every byte
 * value round-tripping at every length mod 3, and strict decoding that
 * refuses bad characters, misplaced or missing padding, and lengths no
 * encoder makes. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "util/base64.h"

static const struct {
	const char *in;
	const char *std;
	const char *url;
} rfc4648[] = {
	{ "", "", "" },
	{ "f", "Zg==", "Zg" },
	{ "fo", "Zm8=", "Zm8" },
	{ "foo", "Zm9v", "Zm9v" },
	{ "foob", "Zm9vYg==", "Zm9vYg" },
	{ "fooba", "Zm9vYmE=", "Zm9vYmE" },
	{ "foobar", "Zm9vYmFy", "Zm9vYmFy" },
};

Test(base64, rfc4648_vectors)
{
	for (size_t i = 0; i < sizeof(rfc4648) / sizeof(rfc4648[0]); i++) {
		size_t n = 0, len = strlen(rfc4648[i].in);
		char *s = b64_encode(rfc4648[i].in, len, B64_STD, &n);
		void *back = NULL;
		cr_assert_str_eq(s, rfc4648[i].std);
		cr_assert_eq(n, strlen(rfc4648[i].std));
		free(s);
		s = b64_encode(rfc4648[i].in, len, B64_URL, NULL);
		cr_assert_str_eq(s, rfc4648[i].url);
		free(s);
		cr_assert_eq(b64_decode(rfc4648[i].std, strlen(rfc4648[i].std), B64_STD, &back, &n), 0);
		cr_assert_eq(n, len);
		cr_assert_str_eq(back, rfc4648[i].in, "decodes to a NUL-terminated string");
		free(back);
		cr_assert_eq(b64_decode(rfc4648[i].url, strlen(rfc4648[i].url), B64_URL, &back, &n), 0);
		cr_assert_eq(n, len);
		cr_assert_eq(memcmp(back, rfc4648[i].in, len), 0);
		free(back);
	}
}

Test(base64, every_byte_round_trips)
{
	unsigned char buf[258];

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)(255 - i % 256);
	for (size_t len = 254; len <= sizeof(buf); len++) {
		for (int a = B64_STD; a <= B64_URL; a++) {
			size_t n = 0, m = 0;
			void *back = NULL;
			char *s = b64_encode(buf, len, a, &n);
			cr_assert_not_null(s);
			cr_assert_eq(strlen(s), n);
			cr_assert_null(strchr(s, a == B64_URL ? '+' : '-'));
			cr_assert_null(strchr(s, a == B64_URL ? '/' : '_'));
			cr_assert_eq(b64_decode(s, n, a, &back, &m), 0, "%s", s);
			cr_assert_eq(m, len);
			cr_assert_eq(memcmp(back, buf, len), 0);
			free(back);
			free(s);
		}
	}
}

Test(base64, refuses_what_no_encoder_makes)
{
	static const char *const bad_std[] = {
		"Zg=",      /* not a multiple of 4 */
		"Zg",       /* padding missing */
		"Z===",     /* three pads */
		"Zg==Zg==", /* padding inside */
		"Zm9v!A==", /* not in the alphabet */
		"Zm-v",     /* the URL alphabet */
		"Zm9 ",     /* white space */
		"=Zg=",
	};
	static const char *const bad_url[] = { "Z", "Zg==", "Zm+v", "Zm9vY", "Zm/v" };
	void *out = (void *)0x1;
	size_t n = 77;

	for (size_t i = 0; i < sizeof(bad_std) / sizeof(bad_std[0]); i++)
		cr_assert_eq(b64_decode(bad_std[i], strlen(bad_std[i]), B64_STD, &out, &n), -1, "%s",
			     bad_std[i]);
	for (size_t i = 0; i < sizeof(bad_url) / sizeof(bad_url[0]); i++)
		cr_assert_eq(b64_decode(bad_url[i], strlen(bad_url[i]), B64_URL, &out, &n), -1, "%s",
			     bad_url[i]);
	cr_assert_eq(out, (void *)0x1, "outputs untouched on failure");
	cr_assert_eq(n, 77);
}
