/* SPDX-License-Identifier: MIT */
#include "test_common.h"

#include <criterion/criterion.h>
#include <ctype.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define TC_NFTW_FDS 16
#define TC_PROC_PATH_MAX 64

char *tc_strdup(const char *s)
{
	char *d;

	if (!s)
		return NULL;
	d = strdup(s);
	cr_assert_not_null(d, "out of memory");
	return d;
}

char *tc_subst(const char *text, const char *mark, const char *repl)
{
	size_t ml = strlen(mark), rl = strlen(repl), n = 0;
	const char *p;
	char *out, *w;

	for (p = text; (p = strstr(p, mark)); p += ml)
		n++;
	out = malloc(strlen(text) + n * rl + 1);
	cr_assert_not_null(out, "out of memory");
	w = out;
	for (p = text;;) {
		const char *m = strstr(p, mark);
		size_t l = m ? (size_t)(m - p) : strlen(p);
		memcpy(w, p, l);
		w += l;
		if (!m)
			break;
		memcpy(w, repl, rl);
		w += rl;
		p = m + ml;
	}
	*w = '\0';
	return out;
}

char *tc_mkdtemp(const char *prefix)
{
	const char *tmp = getenv("TMPDIR");
	char *dir;

	if (asprintf(&dir, "%s/%sXXXXXX", tmp && tmp[0] ? tmp : "/tmp", prefix) < 0)
		cr_assert_fail("out of memory");
	cr_assert_not_null(mkdtemp(dir), "mkdtemp(%s) failed", dir);
	return dir;
}

char *tc_testid(const char *tmpdir, const char *dir_prefix, const char *id_prefix)
{
	char *testid;

	if (asprintf(&testid, "%s%s", id_prefix, strrchr(tmpdir, '/') + 1 + strlen(dir_prefix)) < 0)
		cr_assert_fail("out of memory");
	for (char *c = testid; *c; c++)
		*c = (char)(isalnum((unsigned char)*c) ? tolower((unsigned char)*c) : '_');
	return testid;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

void tc_rm_tree(const char *path)
{
	if (path)
		nftw(path, rm_one, TC_NFTW_FDS, FTW_DEPTH | FTW_PHYS);
}

char *tc_plugin_search(const char *search[TC_MAX_SEARCH + 1])
{
	const char *env = getenv("MEMD_PLUGIN_PATH");
	char *list = tc_strdup(env ? env : ""), *save = NULL, *tok;
	size_t n = 0;

	for (tok = strtok_r(list, ":", &save); tok && n < TC_MAX_SEARCH; tok = strtok_r(NULL, ":", &save))
		search[n++] = tok;
	search[n] = NULL;
	return list;
}

pid_t tc_gettid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

long tc_thread_syscall(pid_t tid)
{
	char path[TC_PROC_PATH_MAX];
	long nr = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%ld/syscall", (long)tid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	/* "NR ARGS... SP PC" while blocked in a system call; "running" or
	 * "-1 SP PC" otherwise. */
	if (fscanf(f, "%ld", &nr) != 1)
		nr = -1;
	fclose(f);
	return nr;
}
