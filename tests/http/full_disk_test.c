/* SPDX-License-Identifier: MIT */
/*
 * Over real HTTP, memd on a SQLite database whose disk is really full (a
 * small tmpfs this test mounts; CI runs as root, and a test that cannot
 * mount fails saying so, it does not skip): an append and an artifact
 * PUT both answer 503 "unavailable", retryable, with Retry-After;
 * /readyz says not ready naming the store and "disk_full"; a session
 * DELETE works on the full disk (and the write that succeeded makes memd
 * ready again); once the disk is full again and space is freed outside
 * memd, /readyz turns ready by itself (its probe write) and appends work.
 * And a WAL checkpoint that fails when memd stops is logged.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define U "/v1/apps/demo/users/alice"
#define FS_SIZE "size=4m"
#define STORE_EXTRA ", reserve_kb: 1024"
#define BALLAST_BYTES (512 * 1024) /* the test's own file: "space freed" */
#define TEXT_BYTES 6000            /* per appended event */
#define BIG_BYTES (64 * 1024)      /* the artifact: far more than a full disk takes */
#define MAX_APPENDS 2000           /* 12 MB: far more than the file system holds */
#define BODY_MAX (TEXT_BYTES + 256)
/* /readyz probes a degraded store at most every 10 s: wait longer. */
#define READY_WAIT_MS 40000
#define POLL_MS 100
/* Memory extraction off: it commits its cursor in the background, a
 * page-sized write a full disk may still take in space the write-ahead
 * log already has, and a write that succeeds rightly makes memd ready,
 * which would race the test's "degraded" checks. The test's own writes
 * are then the only ones. */
#define NO_BACKGROUND_WRITES "memory: {extract: {type: none}}\n"

static hs H;
static char fs[256];
static int mounted;

static void setup(void)
{
	const char *tmp = getenv("TMPDIR");

	memset(&H, 0, sizeof(H));
	snprintf(fs, sizeof(fs), "%s/memd-full-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	cr_assert(mkdtemp(fs), "mkdtemp: %s", strerror(errno));
	cr_assert_eq(mount("tmpfs", fs, "tmpfs", 0, FS_SIZE), 0,
		     "cannot mount a tmpfs at %s: %s: this test needs root (CI runs as root) to "
		     "fill a real file system", fs, strerror(errno));
	mounted = 1;
}

static void teardown(void)
{
	hs_finish(&H);
	if (mounted)
		umount2(fs, MNT_DETACH);
	mounted = 0;
	rmdir(fs);
}

TestSuite(full_disk, .init = setup, .fini = teardown, .timeout = 120);

static void ballast(int make)
{
	char path[sizeof(fs) + 16];
	int fd;

	snprintf(path, sizeof(path), "%s/ballast", fs);
	if (!make) {
		cr_assert_eq(unlink(path), 0);
		return;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	cr_assert(fd >= 0);
	cr_assert_eq(posix_fallocate(fd, 0, BALLAST_BYTES), 0);
	close(fd);
}

static void append(const char *sid, int i, hs_resp *r)
{
	static char body[BODY_MAX];
	char path[128];
	int n = snprintf(body, sizeof(body), "{\"events\":[{\"role\":\"user\",\"content\":\"%d ", i);

	memset(body + n, 'x', TEXT_BYTES);
	snprintf(body + n + TEXT_BYTES, sizeof(body) - n - TEXT_BYTES, "\"}]}");
	snprintf(path, sizeof(path), U "/sessions/%s/events", sid);
	hs_json(&H, "POST", path, body, r);
}

/* r is the answer to a write on the full disk. */
static void expect_full(const char *what, hs_resp *r)
{
	cr_assert_eq(r->status, 503, "%s on a full disk: %ld %s", what, r->status, r->body);
	cr_assert_str_eq(hs_error_code(r), "unavailable", "%s: %s", what, r->body);
	cr_assert(json_is_true(json_object_get(json_object_get(r->json, "error"), "retryable")),
		  "%s: %s", what, r->body);
	cr_assert(hs_header(r, "Retry-After"), "%s: no Retry-After", what);
	cr_assert(strstr(r->body, "full"), "%s: the message does not say the disk is full: %s",
		  what, r->body);
}

/* Append to sid until the disk is full. */
static void fill(const char *sid)
{
	hs_resp r;
	int i;

	for (i = 0; i < MAX_APPENDS; i++) {
		append(sid, i, &r);
		if (r.status != 200)
			break;
		hs_resp_clear(&r);
	}
	cr_assert_lt(i, MAX_APPENDS, "%d appends of %d bytes fit on a " FS_SIZE " tmpfs", i,
		     TEXT_BYTES);
	expect_full("append", &r);
	hs_resp_clear(&r);
}

static void expect_degraded(void)
{
	hs_resp r;
	json_t *st;

	hs_json(&H, "GET", "/readyz", NULL, &r);
	cr_assert_eq(r.status, 503, "/readyz on a full disk: %ld %s", r.status, r.body);
	cr_assert(hs_header(&r, "Retry-After"));
	cr_assert_str_eq(json_string_value(json_object_get(r.json, "status")), "not_ready");
	st = json_array_get(json_object_get(r.json, "stores"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(st, "store")), "main", "%s", r.body);
	cr_assert_str_eq(json_string_value(json_object_get(st, "reason")), "disk_full", "%s",
			 r.body);
	hs_resp_clear(&r);
}

static long readyz(void)
{
	hs_resp r;
	long status;
	hs_json(&H, "GET", "/readyz", NULL, &r);
	status = r.status;
	hs_resp_clear(&r);
	return status;
}

Test(full_disk, writes_503_delete_works_readyz_follows)
{
	static char blob[BIG_BYTES];
	const char *const bin_type[] = { "Content-Type: application/octet-stream", NULL };
	struct timespec pause = { 0, POLL_MS * 1000000L };
	hs_resp r;
	int waited;

	snprintf(H.db_path, sizeof(H.db_path), "%s/memd.db", fs);
	snprintf(H.store_extra, sizeof(H.store_extra), "%s", STORE_EXTRA);
	hs_start(&H, NULL, NO_BACKGROUND_WRITES);
	json_decref(hs_expect(&H, "POST", U "/sessions", "{\"id\":\"keep\"}", 201));
	json_decref(hs_expect(&H, "POST", U "/sessions", "{\"id\":\"big\"}", 201));
	cr_assert_eq(readyz(), 200);
	ballast(1);

	fill("big");
	memset(blob, 'a', sizeof(blob));
	hs_req(&H, "PUT", U "/sessions/keep/artifacts/a.bin", bin_type, blob, sizeof(blob), &r);
	expect_full("artifact PUT", &r);
	hs_resp_clear(&r);
	expect_degraded();

	/* The delete works on the full disk; a write succeeded: ready. */
	hs_json(&H, "DELETE", U "/sessions/big", NULL, &r);
	cr_assert_eq(r.status, 204, "DELETE on a full disk: %ld %s", r.status, r.body);
	hs_resp_clear(&r);
	cr_assert_eq(readyz(), 200);

	/* Full again; space freed outside memd: ready again by itself. */
	fill("keep");
	expect_degraded();
	ballast(0);
	for (waited = 0; readyz() != 200; waited += POLL_MS) {
		cr_assert_lt(waited, READY_WAIT_MS, "/readyz not ready %d ms after space was freed",
			     waited);
		nanosleep(&pause, NULL);
	}
	append("keep", -1, &r);
	cr_assert_eq(r.status, 200, "append after space was freed: %ld %s", r.status, r.body);
	hs_resp_clear(&r);
}

/* Take every free byte of the file system. */
static void fill_outside(void)
{
	char path[sizeof(fs) + 16];
	struct statvfs v;
	int fd;

	cr_assert_eq(statvfs(fs, &v), 0);
	snprintf(path, sizeof(path), "%s/rest", fs);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	cr_assert(fd >= 0);
	cr_assert_eq(posix_fallocate(fd, 0, (off_t)v.f_bavail * (off_t)v.f_frsize), 0);
	close(fd);
	cr_assert_eq(statvfs(fs, &v), 0);
	cr_assert_eq(v.f_bavail, 0, "%lu blocks still free", (unsigned long)v.f_bavail);
}

Test(full_disk, failed_checkpoint_at_stop_is_logged)
{
	hs_resp r;
	char *log;

	snprintf(H.db_path, sizeof(H.db_path), "%s/memd.db", fs);
	snprintf(H.store_extra, sizeof(H.store_extra), "%s", STORE_EXTRA);
	/* No keyword snapshot: only the store writes at stop. */
	hs_start(&H, NULL, "index: {keyword: {snapshot: false}}");
	json_decref(hs_expect(&H, "POST", U "/sessions", "{\"id\":\"s\"}", 201));
	/* A few pages in the WAL (far below its checkpoint threshold) that
	 * the database must grow for when they are checkpointed. */
	for (int i = 0; i < 3; i++) {
		append("s", i, &r);
		cr_assert_eq(r.status, 200, "%ld %s", r.status, r.body);
		hs_resp_clear(&r);
	}
	fill_outside();
	hs_stop(&H);
	log = hs_log_text(&H);
	cr_assert(strstr(log, "the WAL checkpoint at close failed"),
		  "no failed checkpoint logged:\n%s", log);
	free(log);
}
