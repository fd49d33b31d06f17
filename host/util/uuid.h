/* SPDX-License-Identifier: MIT */
/* uuid: RFC 9562 UUIDv7 ids (time-ordered), canonical lowercase text. */
#ifndef MEMD_HOST_UUID_H
#define MEMD_HOST_UUID_H

#include <stdint.h>

#define UUID_TEXT_LEN 36

/* Write a new UUIDv7 + NUL into buf. Uses getrandom(); 0 or MEMD_EIO. */
int32_t uuid_v7(char buf[UUID_TEXT_LEN + 1]);

#endif
