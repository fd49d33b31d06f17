/* SPDX-License-Identifier: MIT */
#include "util/uuid.h"

#include <errno.h>
#include <stdio.h>
#include <sys/random.h>
#include <time.h>

#include <memd/abi.h>

#define UUID_BYTES 16
#define UUID_VERSION_7 0x70
#define UUID_VARIANT_RFC 0x80

int32_t uuid_v7(char buf[UUID_TEXT_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	uint8_t b[UUID_BYTES];
	struct timespec ts;
	uint64_t ms;
	size_t got = 0;
	char *p = buf;

	clock_gettime(CLOCK_REALTIME, &ts);
	ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
	while (got < UUID_BYTES - 6) {
		ssize_t n = getrandom(b + 6 + got, UUID_BYTES - 6 - got, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return MEMD_EIO;
		}
		got += (size_t)n;
	}
	for (int i = 0; i < 6; i++)
		b[i] = (uint8_t)(ms >> (40 - 8 * i));
	b[6] = (uint8_t)((b[6] & 0x0f) | UUID_VERSION_7);
	b[8] = (uint8_t)((b[8] & 0x3f) | UUID_VARIANT_RFC);
	for (int i = 0; i < UUID_BYTES; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			*p++ = '-';
		*p++ = hex[b[i] >> 4];
		*p++ = hex[b[i] & 0xf];
	}
	*p = '\0';
	return 0;
}
