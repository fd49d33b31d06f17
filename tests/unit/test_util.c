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
/* Room in tu_open_store's config for what is not the directory's path. */
#define TU_YAML_ROOM 2048

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

static int64_t driven_clock(void *userdata)
{
	return atomic_load((_Atomic int64_t *)userdata);
}

memd *tu_open_store(tu_dir *d, const char *plugin, const char *more_yaml,
		    _Atomic int64_t *now_us)
{
	char yaml[TU_PATH_MAX + TU_YAML_ROOM];
	memd *m;
	int n;

	tu_dir_make(d);
	if (strcmp(plugin, "sqlite") == 0)
		n = snprintf(yaml, sizeof(yaml),
			     "stores:\n  main: {plugin: sqlite, path: %s/memd.db}\n%s", d->path,
			     more_yaml ? more_yaml : "");
	else
		n = snprintf(yaml, sizeof(yaml), "stores:\n  main: {plugin: %s}\n%s", plugin,
			     more_yaml ? more_yaml : "");
	cr_assert(n > 0 && (size_t)n < sizeof(yaml), "config too long");
	m = tu_open(d, yaml);
	memd_set_clock(m, driven_clock, now_us);
	return m;
}

void tu_close_store(memd *m, tu_dir *d)
{
	memd_close(m);
	tu_dir_remove(d);
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
