/* SPDX-License-Identifier: MIT */
#include "test_util.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_common.h"

#define TU_DIR_PREFIX "memd-test-"

void tu_dir_make(tu_dir *d)
{
	char *dir = tc_mkdtemp(TU_DIR_PREFIX);

	cr_assert_lt(strlen(dir), sizeof(d->path), "temp dir path too long: %s", dir);
	strcpy(d->path, dir);
	free(dir);
}

void tu_dir_remove(tu_dir *d)
{
	if (d->path[0])
		tc_rm_tree(d->path);
	d->path[0] = '\0';
}

void tu_write_file(const tu_dir *d, const char *name, const char *content, char *ret_path)
{
	FILE *f;
	cr_assert_lt(snprintf(ret_path, TU_PATH_MAX, "%s/%s", d->path, name), TU_PATH_MAX,
		     "path too long");
	f = fopen(ret_path, "w");
	cr_assert_not_null(f, "cannot write %s", ret_path);
	fputs(content, f);
	cr_assert_eq(fclose(f), 0);
}

memd *tu_open(const tu_dir *d, const char *yaml)
{
	char path[TU_PATH_MAX];
	memd_options o = { .struct_size = sizeof(o), .config_path = path };
	memd_error err = { 0 };
	memd *m = NULL;

	tu_write_file(d, "memd.yaml", yaml, path);
	cr_assert_eq(memd_open(&o, &m, &err), 0, "memd_open: %s", err.msg);
	return m;
}

json_t *tu_json(char *out)
{
	json_error_t jerr;
	json_t *v = json_loads(out, 0, &jerr);
	cr_assert_not_null(v, "not JSON (%s): %s", jerr.text, out);
	memd_free(out);
	return v;
}

void tu_ok(int32_t r, const memd_error *err, char **out)
{
	cr_assert_eq(r, 0, "failed (%d): %s", (int)r, err->msg);
	memd_free(*out);
	*out = NULL;
}

void tu_ok0(int32_t r, const memd_error *err)
{
	cr_assert_eq(r, 0, "failed (%d): %s", (int)r, err->msg);
}

size_t tu_files_contain(const tu_dir *d, const char *prefix, const char *needle)
{
	DIR *dir = opendir(d->path);
	struct dirent *de;
	size_t hits = 0, nlen = strlen(needle);

	cr_assert_not_null(dir);
	while ((de = readdir(dir))) {
		char path[TU_PATH_MAX * 2];
		FILE *f;
		char *buf;
		long size;
		if (strncmp(de->d_name, prefix, strlen(prefix)) != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", d->path, de->d_name);
		f = fopen(path, "rb");
		if (!f)
			continue;
		fseek(f, 0, SEEK_END);
		size = ftell(f);
		fseek(f, 0, SEEK_SET);
		buf = malloc((size_t)size + 1);
		cr_assert_not_null(buf);
		cr_assert_eq(fread(buf, 1, (size_t)size, f), (size_t)size);
		fclose(f);
		for (long i = 0; i + (long)nlen <= size; i++)
			if (memcmp(buf + i, needle, nlen) == 0)
				hits++;
		free(buf);
	}
	closedir(dir);
	return hits;
}
