/* SPDX-License-Identifier: MIT */
/* test_util: helpers shared by the unit tests (temp dirs, configs, JSON). */
#ifndef MEMD_TEST_UTIL_H
#define MEMD_TEST_UTIL_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdint.h>

#include <memd/memd.h>

#define TU_PATH_MAX 512

typedef struct tu_dir {
	char path[TU_PATH_MAX];
} tu_dir;

/* A fresh directory under $TMPDIR (or /tmp); aborts the test on failure. */
void tu_dir_make(tu_dir *d);
/* Remove it and everything below. */
void tu_dir_remove(tu_dir *d);
/* Write content to d/name; the full path goes to ret_path (TU_PATH_MAX). */
void tu_write_file(const tu_dir *d, const char *name, const char *content, char *ret_path);
/* memd_open with yaml written to d/memd.yaml; asserts success. */
memd *tu_open(const tu_dir *d, const char *yaml);
/* Make d and memd_open there a config of one store "main" over plugin
 * ("memory", or "sqlite" on d/memd.db) followed by more_yaml (NULL: none),
 * the facade clock reading *now_us (the test drives it). Asserts success. */
memd *tu_open_store(tu_dir *d, const char *plugin, const char *more_yaml,
		    _Atomic int64_t *now_us);
/* memd_close(m), then remove d. */
void tu_close_store(memd *m, tu_dir *d);
/* Parse out (then memd_free it); asserts it is JSON. */
json_t *tu_json(char *out);
/* Assert r == 0 (with err's message), then memd_free(*out) and clear it.
 * out is a pointer so that it is read after the call that fills it. */
void tu_ok(int32_t r, const memd_error *err, char **out);
void tu_ok0(int32_t r, const memd_error *err);
/* How many times needle occurs in the bytes of files in d whose names
 * start with prefix (a database and its -wal/-shm files). */
size_t tu_files_contain(const tu_dir *d, const char *prefix, const char *needle);

#endif
