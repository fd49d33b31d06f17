/* SPDX-License-Identifier: MIT */
/*
 * test_common: helpers every test harness needs (Criterion-asserting on
 * out-of-memory): temp dirs, config templates, the plugin search path.
 */
#ifndef MEMD_TEST_COMMON_H
#define MEMD_TEST_COMMON_H

#include <stddef.h>
#include <sys/types.h>

/* The most MEMD_PLUGIN_PATH entries tc_plugin_search keeps. */
#define TC_MAX_SEARCH 32

/* strdup that asserts; NULL stays NULL. */
char *tc_strdup(const char *s);
/* text with every mark replaced by repl; malloc'd. */
char *tc_subst(const char *text, const char *mark, const char *repl);
/* A fresh directory $TMPDIR/<prefix>XXXXXX (or /tmp); malloc'd path. */
char *tc_mkdtemp(const char *prefix);
/* A per-test token usable as a database, schema or collection name:
 * id_prefix + the unique suffix of tmpdir (made with dir_prefix), in
 * lower-case letters, digits and '_'; malloc'd. */
char *tc_testid(const char *tmpdir, const char *dir_prefix, const char *id_prefix);
/* Remove path and everything below it; a NULL path is ignored. */
void tc_rm_tree(const char *path);
/* Split $MEMD_PLUGIN_PATH into search (NULL-terminated, at most
 * TC_MAX_SEARCH entries, pointing into the returned buffer, which the
 * caller frees after use). */
char *tc_plugin_search(const char *search[TC_MAX_SEARCH + 1]);

/* The calling thread's id (what the kernel calls it: gettid). */
pid_t tc_gettid(void);
/* The system call thread tid of this process is blocked in now (its
 * number, as SYS_futex or SYS_clock_nanosleep in <sys/syscall.h>), or -1
 * when it is running, blocked outside a system call or gone. From
 * /proc/self/task/TID/syscall (Linux): lets a test wait until a thread is
 * waiting inside a call (for a lock, a condition, a sleep) instead of
 * sleeping and assuming it got there. */
long tc_thread_syscall(pid_t tid);

#endif
