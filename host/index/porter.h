/* SPDX-License-Identifier: MIT */
/*
 * porter: the Porter stemming algorithm (M.F. Porter, "An algorithm for
 * suffix stripping", 1980), with the two departures of Porter's own
 * reference implementation ("bli" -> "ble", "logi" -> "log"), so output
 * matches the published vocabulary/output lists.
 */
#ifndef MEMD_INDEX_PORTER_H
#define MEMD_INDEX_PORTER_H

#include <stddef.h>

/* Stem the len bytes of word (lower-case a-z only) in place; returns the
 * new length (<= len). Words of 1 or 2 letters are left as they are. */
size_t porter_stem(char *word, size_t len);

#endif
