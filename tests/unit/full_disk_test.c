/* SPDX-License-Identifier: MIT */
/*
 * full_disk: memd over a SQLite database on a really full disk (a small
 * tmpfs this test mounts; CI runs as root, and a test that cannot mount
 * fails saying so, it does not skip). Every write fails the same way
 * (MEMD_EUNAVAIL, retryable, MEMD_ERROR_STORAGE_FULL), session and user
 * deletes succeed on the full disk (the store gives up its disk reserve
 * and checkpoints), appends work again after a delete, readiness reports
 * the full store (memd_ready, memd_ready_json) until a write succeeds, and
 * everything works once space is freed.
 *
 * Readiness follows the store's last write, whoever made it, so the
 * test's own writes must be the only ones: memory extraction is off
 * (NO_BACKGROUND_WRITES). With it on, the memory worker extracts the
 * events fill() appended in the background, and its commits (the
 * session's extraction cursor: a page or two) may still fit on the full
 * disk where the test's large writes do not: one landing after the
 * failed writes rightly makes memd ready, and the test would see that at
 * random. The sweeps and the keyword snapshot write nothing here (nothing
 * to prune or expire; a snapshot comes after 30 s at the earliest).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_util.h"

#define FS_SIZE "size=4m"
#define RESERVE_KB 1024
#define BALLAST_BYTES (512 * 1024) /* the test's own file: "space freed" */
#define TEXT_BYTES 6000            /* per event */
#define MAX_APPENDS 2000           /* 12 MB: far more than the file system holds */
/* The writes that must fail on the full disk are many times larger
 * than the append that found it full: a full disk may still take a page
 * or two (the file system allocates in pages), and a write-ahead log
 * started over after a checkpoint reuses the pages it already has, so
 * how much still fits depends on where in its cycle the log was when the
 * disk filled up (the larger schema of checkpoints and tasks moved that
 * point: 24 KiB writes then fit about half of the time). */
#define BIG_BYTES (96 * 1024)
#define BODY_MAX (BIG_BYTES + 256)
#define ARTIFACT_BYTES (64 * 1024)
/* Top-level YAML that leaves the test's writes the only writes (see the
 * top of this file). */
#define NO_BACKGROUND_WRITES "memory: {extract: {type: none}}\n"

static tu_dir dir;
static char fs[TU_PATH_MAX + 8];
static int mounted;
static memd *m;

static void setup(void)
{
	char yaml[3 * TU_PATH_MAX];

	tu_dir_make(&dir);
	snprintf(fs, sizeof(fs), "%s/fs", dir.path);
	cr_assert_eq(mkdir(fs, 0700), 0, "mkdir %s: %s", fs, strerror(errno));
	cr_assert_eq(mount("tmpfs", fs, "tmpfs", 0, FS_SIZE), 0,
		     "cannot mount a tmpfs at %s: %s: this test needs root (CI runs as root) to "
		     "fill a real file system", fs, strerror(errno));
	mounted = 1;
	snprintf(yaml, sizeof(yaml),
		 "stores:\n  main: {plugin: sqlite, path: %s/memd.db, reserve_kb: %d}\n"
		 NO_BACKGROUND_WRITES, fs, RESERVE_KB);
	m = tu_open(&dir, yaml);
}

static void teardown(void)
{
	memd_close(m);
	m = NULL;
	if (mounted)
		umount2(fs, MNT_DETACH);
	mounted = 0;
	tu_dir_remove(&dir);
}

TestSuite(full_disk, .timeout = 120);

static void ballast(void)
{
	char path[TU_PATH_MAX + 32];
	int fd;

	snprintf(path, sizeof(path), "%s/ballast", fs);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	cr_assert(fd >= 0);
	cr_assert_eq(posix_fallocate(fd, 0, BALLAST_BYTES), 0);
	close(fd);
}

static void free_ballast(void)
{
	char path[TU_PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/ballast", fs);
	cr_assert_eq(unlink(path), 0);
}

static int32_t append(const char *sid, int i, size_t text_bytes, memd_error *err)
{
	static char body[BODY_MAX];
	char *out = NULL;
	int n = snprintf(body, sizeof(body), "{\"events\":[{\"role\":\"user\",\"content\":\"%d ", i);
	int32_t r;

	memset(body + n, 'x', text_bytes);
	snprintf(body + n + text_bytes, sizeof(body) - n - text_bytes, "\"}]}");
	memset(err, 0, sizeof(*err));
	r = memd_events_append(m, "app", "u", sid, body, &out, err);
	memd_free(out);
	return r;
}

static void create(const char *user, const char *sid)
{
	char body[128];
	char *out = NULL;
	memd_error err = { 0 };
	snprintf(body, sizeof(body), "{\"id\":\"%s\"}", sid);
	tu_ok(memd_session_create(m, "app", user, body, &out, &err), &err, &out);
}

/* A write failed because the disk is full: one code and flags. */
static void expect_full(const char *what, int32_t r, const memd_error *err)
{
	cr_assert_eq(r, MEMD_EUNAVAIL, "%s on a full disk: %d (%s)", what, (int)r, err->msg);
	cr_assert_eq(err->flags, MEMD_ERROR_RETRYABLE | MEMD_ERROR_STORAGE_FULL,
		     "%s on a full disk: flags %#x (%s)", what, (unsigned)err->flags, err->msg);
}

/* Append to sid until the disk is full; returns the appends that worked. */
static int fill(const char *sid)
{
	memd_error err;
	int32_t r = 0;
	int i;

	for (i = 0; i < MAX_APPENDS; i++)
		if ((r = append(sid, i, TEXT_BYTES, &err)) < 0)
			break;
	cr_assert_lt(i, MAX_APPENDS, "%d appends of %d bytes fit on a " FS_SIZE " tmpfs", i,
		     TEXT_BYTES);
	expect_full("append", r, &err);
	return i;
}

/* memd_ready and memd_ready_json name the full store. */
static void expect_not_ready(void)
{
	memd_error err = { 0 };
	char *out = NULL;
	int ready = 1;
	json_t *report, *st;
	int32_t r = memd_ready(m, &err);

	cr_assert_eq(r, MEMD_EUNAVAIL, "ready on a full disk: %d %s", (int)r, err.msg);
	cr_assert_eq(err.flags, MEMD_ERROR_RETRYABLE | MEMD_ERROR_STORAGE_FULL, "%#x",
		     (unsigned)err.flags);
	cr_assert(strstr(err.msg, "main: disk_full: "), "%s", err.msg);
	cr_assert_eq(memd_ready_json(m, &ready, &out, &err), 0, "%s", err.msg);
	cr_assert_eq(ready, 0);
	report = tu_json(out);
	cr_assert_str_eq(json_string_value(json_object_get(report, "status")), "not_ready");
	st = json_array_get(json_object_get(report, "stores"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(st, "store")), "main");
	cr_assert_str_eq(json_string_value(json_object_get(st, "reason")), "disk_full");
	cr_assert_eq(json_array_size(json_object_get(report, "stores")), 1);
	json_decref(report);
}

Test(full_disk, writes_fail_alike_deletes_work_and_space_comes_back, .init = setup,
     .fini = teardown)
{
	static char blob[ARTIFACT_BYTES];
	static char pad[BIG_BYTES + 1], body[BODY_MAX];
	memd_error err = { 0 };
	char *out = NULL;
	int32_t r;

	create("u", "keep");
	create("u", "big");
	create("other", "o1");
	ballast();
	cr_assert_gt(fill("big"), 0);

	/* Every write route fails the way the append did. */
	memset(blob, 'a', sizeof(blob));
	memset(pad, 'p', BIG_BYTES);
	r = memd_artifact_put(m, "app", "u", "keep", "a.bin", "application/octet-stream", blob,
			      sizeof(blob), &out, &err);
	expect_full("artifact put", r, &err);
	memset(&err, 0, sizeof(err));
	snprintf(body, sizeof(body), "{\"id\":\"new\",\"metadata\":{\"pad\":\"%s\"}}", pad);
	r = memd_session_create(m, "app", "u", body, &out, &err);
	expect_full("session create", r, &err);
	memset(&err, 0, sizeof(err));
	snprintf(body, sizeof(body), "{\"k\":\"%s\"}", pad);
	r = memd_state_patch(m, "app", "u", "keep", body, &out, &err);
	expect_full("state patch", r, &err);
	r = append("keep", 0, BIG_BYTES, &err);
	expect_full("append to another session", r, &err);

	/* Not ready: the store's last write failed on the full disk. */
	expect_not_ready();
	/* Background passes that find nothing to prune or expire write
	 * nothing: their success does not make the store ready. */
	tu_ok(memd_lanes_sweep(m, &out, &err), &err, &out);
	tu_ok(memd_memories_sweep(m, &out, &err), &err, &out);
	expect_not_ready();

	/* Deletes go through on the full disk: an operator frees space
	 * through the API. */
	r = memd_session_delete(m, "app", "u", "big", &err);
	cr_assert_eq(r, 0, "session delete on a full disk: %s", err.msg);
	r = memd_user_delete(m, "app", "other", &err);
	cr_assert_eq(r, 0, "user delete on a full disk: %s", err.msg);
	/* A write succeeded: ready again. */
	tu_ok0(memd_ready(m, &err), &err);
	/* The pages the delete freed are written again. */
	r = append("keep", 1, TEXT_BYTES, &err);
	cr_assert_eq(r, 0, "append after a delete on a full disk: %s", err.msg);

	/* Fill again, then free space outside memd: writes work again. */
	fill("keep");
	expect_not_ready();
	free_ballast();
	r = append("keep", 2, TEXT_BYTES, &err);
	cr_assert_eq(r, 0, "append after space was freed: %s", err.msg);
	tu_ok0(memd_ready(m, &err), &err);
	tu_ok(memd_artifact_put(m, "app", "u", "keep", "a.bin", "application/octet-stream", blob,
				sizeof(blob), &out, &err), &err, &out);
}

/* Without root: a file size limit (RLIMIT_FSIZE, SIGXFSZ ignored) makes
 * SQLite's writes past it fail with EFBIG, which SQLite reports as
 * SQLITE_IOERR_WRITE, not SQLITE_FULL: the store reads the errno and
 * reports a full disk all the same. The limit is per file, not a shared
 * disk, so the disk reserve cannot help here (the tmpfs test above covers
 * deletes). */
#define FSIZE_HEADROOM (256 * 1024)

static tu_dir fdir;

static void fsize_setup(void)
{
	char yaml[2 * TU_PATH_MAX];

	tu_dir_make(&fdir);
	snprintf(yaml, sizeof(yaml),
		 "stores:\n  main: {plugin: sqlite, path: %s/memd.db, reserve_kb: 0}\n"
		 NO_BACKGROUND_WRITES, fdir.path);
	m = tu_open(&fdir, yaml);
}

static void fsize_teardown(void)
{
	struct rlimit unlimited = { RLIM_INFINITY, RLIM_INFINITY };

	setrlimit(RLIMIT_FSIZE, &unlimited);
	memd_close(m);
	m = NULL;
	tu_dir_remove(&fdir);
}

static off_t file_size(const char *name)
{
	char path[TU_PATH_MAX + 32];
	struct stat st;
	snprintf(path, sizeof(path), "%s/%s", fdir.path, name);
	return stat(path, &st) == 0 ? st.st_size : 0;
}

Test(file_size_limit, efbig_is_a_full_disk, .init = fsize_setup, .fini = fsize_teardown,
     .timeout = 60)
{
	struct rlimit lim;
	memd_error err = { 0 };
	off_t biggest = file_size("memd.db");

	create("u", "s");
	if (file_size("memd.db-wal") > biggest)
		biggest = file_size("memd.db-wal");
	cr_assert_neq(signal(SIGXFSZ, SIG_IGN), SIG_ERR);
	lim.rlim_cur = (rlim_t)(biggest + FSIZE_HEADROOM);
	lim.rlim_max = RLIM_INFINITY;
	cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0, "%s", strerror(errno));
	fill("s");
	expect_not_ready();
	/* The message says why in words, not "disk I/O error" alone. */
	cr_assert_eq(memd_ready(m, &err), MEMD_EUNAVAIL);
	cr_assert(strstr(err.msg, strerror(EFBIG)), "%s", err.msg);
	/* Raised again: writes work, and the store is ready. */
	lim.rlim_cur = RLIM_INFINITY;
	cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
	cr_assert_eq(append("s", -1, TEXT_BYTES, &err), 0, "%s", err.msg);
	tu_ok0(memd_ready(m, &err), &err);
}
