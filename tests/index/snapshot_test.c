/* SPDX-License-Identifier: MIT */
/*
 * Keyword index snapshots (host/index/kw_snapshot.h, index.h) through the
 * facade on the sqlite session store:
 *
 *  - a restart that loads the snapshot answers every keyword search
 *    (several users and apps, filters) byte for byte as a full rebuild
 *    from the feed does, after appends, session deletes and a user delete
 *    before and after the snapshot; catch-up from its position applies
 *    the events and deletes written after it;
 *  - a truncated, bit-flipped, wrong-version, foreign-store, store-id-less,
 *    other-analyzer, past-the-head or anchor-mismatched snapshot is not
 *    used: the index is rebuilt and answers as the reference does;
 *  - with index.keyword.snapshot: false the file is neither read nor
 *    written;
 *  - SIGKILL while the snapshot is written never leaves a file that loads
 *    wrong, and the temporary files of dead writers are removed;
 *  - background snapshots (an indexer of the test's own, its schedule
 *    shortened) are taken while events are appended, deleted and
 *    searched, and catch up with the feed head;
 *  - kw_dump/kw_restore directly: exact round trips, damaged payloads;
 *  - the setting's defaults and refusals.
 *
 * Whether a start used the snapshot is seen with a marker: the test
 * rewrites the snapshot with one extra term ("zebra") on the event of user
 * "marked"; a search for it finds that event only if the snapshot was
 * loaded (a rebuild from the feed never has it).
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "plugins/hostsvc.h"
#include "index/index.h"
#include "index/keyword.h"
#include "index/kw_feed.h"
#include "index/kw_snapshot.h"
#include "index_util.h"
#include "plugins/loader.h"
#include "config/settings.h"
#include "plugins/store.h"

#define APP "a"
#define APP2 "b"
#define MARKED "marked"
#define MARK_TERM "zebra"
#define SESSIONS 3
#define EVENTS_PER_BATCH 12
#define WORDS_MIN 3
#define WORDS_SPREAD 9
#define BODY_MAX (1 << 16)
#define OUT_MAX (1 << 22)
#define SEARCH_K 40
#define TS_BASE_US 1700000000000000LL
#define TS_STEP_US 1000000LL
#define KILL_ROUNDS 24
#define KILL_BASE_BATCHES 40
#define SNAP_NAME "keyword.snapshot"
#define TMP_INFIX ".tmp."
#define PAST_HEAD 1000
#define K1 1.2
#define B 0.3

static const char *const vocab[] = {
	"marathon", "training", "pasta", "recipe", "garden", "tomato", "python", "compiler",
	"holiday", "beach", "mountain", "river", "budget", "invoice", "guitar", "concert",
	"doctor", "appointment", "birthday", "present", "coffee", "morning", "running", "shoes",
	"kitchen", "paint", "window", "blue", "train", "ticket", "paris", "museum",
	"dog", "walk", "park", "rain", "umbrella", "book", "novel", "chapter",
};
#define N_VOCAB (sizeof(vocab) / sizeof(vocab[0]))

static const char *const queries[] = {
	"marathon training", "pasta recipe tomato", "python compiler", "holiday beach mountain",
	"budget invoice", "running shoes morning", "paris museum ticket", "dog walk park rain",
	"book novel chapter", "blue",
};
#define N_QUERIES (sizeof(queries) / sizeof(queries[0]))

static ix_env env;
static ix_env other_env; /* a second database, for some tests */
static ix_env saved_env;  /* env while other_env stands in for it */

static void setup(void)
{
	ix_env_make(&env);
}

static void teardown(void)
{
	ix_env_remove(&env);
	ix_env_remove(&other_env);
	ix_env_remove(&saved_env);
}

TestSuite(snapshot, .init = setup, .fini = teardown, .timeout = 120);

/* ---- helpers --------------------------------------------------------------------- */

/* snapshot: the YAML value of index.keyword.snapshot, NULL = absent. */
static void write_config(const ix_env *e, const char *snapshot)
{
	FILE *f = fopen(e->config_path, "w");
	cr_assert_not_null(f);
	fprintf(f,
		"stores:\n"
		"  main: {plugin: sqlite, path: \"%s/memd.db\"}\n"
		"index:\n"
		"  keyword: {enabled: true%s%s}\n",
		e->dir, snapshot ? ", snapshot: " : "", snapshot ? snapshot : "");
	cr_assert_eq(fclose(f), 0);
}

static void snap_path(const ix_env *e, char out[IX_PATH_MAX])
{
	cr_assert_lt((size_t)snprintf(out, IX_PATH_MAX, "%s/" SNAP_NAME, e->dir), IX_PATH_MAX);
}

static int file_exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

/* xorshift64*: the test's texts, the same every run. */
static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ULL;
}

/* Append n events (authors alternate alice/bob) in one call. */
static void append_batch(memd *m, const char *app, const char *user, const char *sid, int n,
			 uint64_t *rng, int64_t *ts)
{
	char *body = malloc(BODY_MAX), *out = NULL;
	memd_error err = { 0 };
	size_t used = 0;

	cr_assert_not_null(body);
	ix_session(m, app, user, sid);
	used += (size_t)snprintf(body + used, BODY_MAX - used, "{\"events\":[");
	for (int i = 0; i < n; i++) {
		int words = WORDS_MIN + (int)(rng_next(rng) % WORDS_SPREAD);
		time_t secs = (time_t)(*ts / 1000000);
		struct tm tm;
		gmtime_r(&secs, &tm);
		used += (size_t)snprintf(body + used, BODY_MAX - used,
					 "%s{\"role\":\"user\",\"author\":\"%s\","
					 "\"timestamp\":\"%04d-%02d-%02dT%02d:%02d:%02dZ\",\"content\":\"",
					 i ? "," : "", i % 2 ? "bob" : "alice", tm.tm_year + 1900,
					 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
		*ts += TS_STEP_US;
		for (int w = 0; w < words; w++) {
			/* Squared: a few words are common, most rare. */
			uint64_t x = rng_next(rng) % N_VOCAB;
			x = x * x / N_VOCAB;
			used += (size_t)snprintf(body + used, BODY_MAX - used, "%s%s", w ? " " : "",
						 vocab[x]);
		}
		used += (size_t)snprintf(body + used, BODY_MAX - used, "\"}");
	}
	snprintf(body + used, BODY_MAX - used, "]}");
	cr_assert_eq(memd_events_append(m, app, user, sid, body, &out, &err), 0, "append: %s",
		     err.msg);
	memd_free(out);
	free(body);
}

static void delete_session(memd *m, const char *app, const char *user, const char *sid)
{
	memd_error err = { 0 };
	cr_assert_eq(memd_session_delete(m, app, user, sid, &err), 0, "%s", err.msg);
}

static void delete_user(memd *m, const char *app, const char *user)
{
	memd_error err = { 0 };
	cr_assert_eq(memd_user_delete(m, app, user, &err), 0, "%s", err.msg);
}

/* Every query for every (app, user) in scope, plain and filtered (session,
 * author, time), as the facade's JSON, concatenated: malloc'd. */
static char *collect(memd *m)
{
	static const char *const scopes[][2] = {
		{ APP, "u1" }, { APP, "u2" }, { APP, "u3" }, { APP, "u4" }, { APP2, "u1" }, { APP2, "u5" },
	};
	char *all = malloc(OUT_MAX);
	size_t used = 0;

	cr_assert_not_null(all);
	all[0] = '\0';
	for (size_t s = 0; s < sizeof(scopes) / sizeof(scopes[0]); s++) {
		for (size_t q = 0; q < N_QUERIES; q++) {
			char body[IX_PATH_MAX];
			for (int variant = 0; variant < 4; variant++) {
				char *out = NULL;
				memd_error err = { 0 };
				switch (variant) {
				case 0:
					snprintf(body, sizeof(body), "{\"query\":\"%s\",\"k\":%d}", queries[q],
						 SEARCH_K);
					break;
				case 1:
					snprintf(body, sizeof(body),
						 "{\"query\":\"%s\",\"k\":5,\"session_id\":\"s1\"}", queries[q]);
					break;
				case 2:
					snprintf(body, sizeof(body),
						 "{\"query\":\"%s\",\"k\":7,\"authors\":[\"bob\"]}", queries[q]);
					break;
				default:
					snprintf(body, sizeof(body),
						 "{\"query\":\"%s\",\"k\":9,\"after\":\"2023-11-14T22:14:00Z\"}",
						 queries[q]);
					break;
				}
				cr_assert_eq(memd_search(m, scopes[s][0], scopes[s][1], body, &out, &err), 0,
					     "search %s: %s", body, err.msg);
				used += (size_t)snprintf(all + used, OUT_MAX - used, "%s %s %s\n%s\n",
							 scopes[s][0], scopes[s][1], body, out);
				cr_assert_lt(used, OUT_MAX - 1, "results too long");
				memd_free(out);
			}
		}
	}
	return all;
}

/* Results of the marker's search. */
static size_t marker_hits(memd *m)
{
	json_t *res = ix_search(m, APP, MARKED, "{\"query\":\"" MARK_TERM "\"}");
	size_t n = json_array_size(ix_results(res));
	json_decref(res);
	return n;
}

/* Sessions s1..s3 of (app, user) with a batch each. */
static void fill_user(memd *m, const char *app, const char *user, uint64_t *rng, int64_t *ts)
{
	char sid[16];
	for (int i = 1; i <= SESSIONS; i++) {
		snprintf(sid, sizeof(sid), "s%d", i);
		append_batch(m, app, user, sid, EVENTS_PER_BATCH, rng, ts);
	}
}

/* The data before the snapshot: users u1..u3 and marked in app a, u1 and
 * u5 in app b; a session and a user deleted; then closed (the snapshot is
 * written). */
static void build_base(uint64_t *rng, int64_t *ts)
{
	char path[IX_PATH_MAX];
	memd *m;

	write_config(&env, NULL);
	m = ix_open(&env);
	fill_user(m, APP, "u1", rng, ts);
	fill_user(m, APP, "u2", rng, ts);
	fill_user(m, APP, "u3", rng, ts);
	fill_user(m, APP2, "u1", rng, ts);
	fill_user(m, APP2, "u5", rng, ts);
	free(ix_append(m, APP, MARKED, "m1", "the marked event", NULL, 0));
	delete_session(m, APP, "u1", "s2");
	delete_user(m, APP2, "u5");
	append_batch(m, APP, "u1", "s1", EVENTS_PER_BATCH, rng, ts);
	cr_assert_eq(marker_hits(m), 0);
	memd_close(m);
	snap_path(&env, path);
	cr_assert(file_exists(path), "closing wrote no snapshot at %s", path);
}

/* The results of a full rebuild from the feed (snapshot: false). */
static char *reference(void)
{
	memd *m;
	char *all;

	write_config(&env, "false");
	m = ix_open(&env);
	cr_assert_eq(marker_hits(m), 0, "snapshot: false read the snapshot");
	all = collect(m);
	memd_close(m);
	return all;
}

/* Rewrite the snapshot at path with the marker, META changed by edit
 * (may be NULL). */
static void forge(const char *path, void (*edit)(kws_meta *))
{
	kw_index *kw = kw_new(K1, B);
	static const char text[] = "the marked event " MARK_TERM;
	kw_doc_in d = { .app = APP, .user = MARKED, .session = "m1", .author = "user", .seq = 1,
			.timestamp_us = TS_BASE_US, .text = text, .text_len = strlen(text) };
	memd_error err = { 0 };
	kws_reader *rd = NULL;
	kws_writer *w = NULL;
	kws_meta meta;

	cr_assert_not_null(kw);
	cr_assert_eq(kws_reader_open(path, &rd, &meta, &err), 0, "%s", err.msg);
	cr_assert_eq(kws_reader_load(rd, kw, NULL, NULL, &err), 0, "%s", err.msg);
	kws_reader_close(rd);
	/* The event is indexed (adding it again would change nothing): it
	 * goes, and comes back with the marker. */
	cr_assert_eq(kw_delete_event(kw, APP, MARKED, "m1", 1), 0);
	cr_assert_eq(kw_add(kw, &d), 0);
	if (edit)
		edit(&meta);
	cr_assert_eq(kws_writer_open(path, &w, &err), 0, "%s", err.msg);
	cr_assert_eq(kws_writer_dump(w, &meta, kw, NULL, NULL, &err), 0, "%s", err.msg);
	cr_assert_eq(kws_writer_commit(w, &err), 0, "%s", err.msg);
	kw_free(kw);
}

static size_t count_lines(const char *text, const char *needle)
{
	size_t n = 0;
	for (const char *p = text; (p = strstr(p, needle)) != NULL; p++)
		n++;
	return n;
}

/* Open with the default snapshot. why NULL: it must be loaded (one
 * "loaded" line logged); else it must be refused, with exactly one line
 * saying why, containing why. marker: the marker is expected (1) or not
 * (0). The results must equal ref. */
static void expect_start(const char *ref, int marker, const char *why)
{
	static ix_logbuf lb = { .mu = PTHREAD_MUTEX_INITIALIZER };
	memd_options o = { .struct_size = sizeof(o), .config_path = env.config_path,
			   .log = ix_keyword_log, .log_userdata = &lb, .log_level = MEMD_LOG_INFO };
	memd_error err = { 0 };
	memd *m = NULL;
	char *got;

	lb.n = 0;
	lb.text[0] = '\0';
	write_config(&env, NULL);
	cr_assert_eq(memd_open(&o, &m, &err), 0, "memd_open: %s", err.msg);
	cr_assert_eq(marker_hits(m), (size_t)marker, "%s",
		     marker ? "the snapshot was not used" : "a snapshot that must be refused was used");
	got = collect(m);
	cr_assert(strcmp(got, ref) == 0, "results differ from a full rebuild");
	free(got);
	pthread_mutex_lock(&lb.mu);
	if (!why) {
		cr_assert_eq(count_lines(lb.text, "loaded the snapshot"), 1, "log:\n%s", lb.text);
	} else {
		cr_assert_eq(count_lines(lb.text, "not used ("), 1, "log:\n%s", lb.text);
		cr_assert_not_null(strstr(lb.text, why), "the refusal does not say \"%s\":\n%s", why,
				   lb.text);
	}
	pthread_mutex_unlock(&lb.mu);
	memd_close(m);
}

/* ---- restart equals rebuild ------------------------------------------------------ */

Test(snapshot, restart_equals_rebuild)
{
	uint64_t rng = 0x5eed5eed12345678ULL;
	int64_t ts = TS_BASE_US;
	char path[IX_PATH_MAX], *got, *ref;
	memd *m;

	build_base(&rng, &ts);
	snap_path(&env, path);
	forge(path, NULL);

	/* Start from the snapshot, then write and delete around it. */
	write_config(&env, NULL);
	m = ix_open(&env);
	cr_assert_eq(marker_hits(m), 1, "the snapshot was not used");
	append_batch(m, APP, "u1", "s1", EVENTS_PER_BATCH, &rng, &ts);
	append_batch(m, APP, "u2", "s4", EVENTS_PER_BATCH, &rng, &ts);
	fill_user(m, APP, "u4", &rng, &ts);
	delete_session(m, APP, "u2", "s1");    /* indexed in the snapshot */
	delete_user(m, APP2, "u1");            /* in the snapshot */
	fill_user(m, APP2, "u5", &rng, &ts);   /* deleted before it, back */
	delete_user(m, APP, "u3");             /* in the snapshot */
	append_batch(m, APP, "u3", "s9", EVENTS_PER_BATCH, &rng, &ts);
	got = collect(m);
	memd_close(m);

	ref = reference();
	cr_assert(strcmp(got, ref) == 0, "a restart from the snapshot answers differently from a full rebuild");

	/* The snapshot closing wrote (with the marker, since it was loaded)
	 * serves the next start the same. */
	expect_start(ref, 1, NULL);
	free(got);
	free(ref);
}

Test(snapshot, catch_up_applies_events_and_deletes_after_it)
{
	uint64_t rng = 0xabcdef0123456789ULL;
	int64_t ts = TS_BASE_US;
	char path[IX_PATH_MAX], *ref;
	struct stat before, after;
	memd *m;
	char *eid;
	json_t *res;

	build_base(&rng, &ts);
	snap_path(&env, path);
	forge(path, NULL);
	cr_assert_eq(stat(path, &before), 0);

	/* Written by a memd without snapshots: the file stays as it was. */
	write_config(&env, "false");
	m = ix_open(&env);
	eid = ix_append(m, APP, "u4", "late", "quokka sighting", NULL, 0);
	append_batch(m, APP, "u2", "s2", EVENTS_PER_BATCH, &rng, &ts);
	delete_session(m, APP, "u1", "s1");
	delete_user(m, APP, "u2");
	append_batch(m, APP, "u2", "s7", EVENTS_PER_BATCH, &rng, &ts);
	memd_close(m);
	cr_assert_eq(stat(path, &after), 0);
	cr_assert(before.st_ino == after.st_ino && before.st_size == after.st_size &&
			  before.st_mtime == after.st_mtime,
		  "snapshot: false wrote the snapshot");

	ref = reference();
	write_config(&env, NULL);
	m = ix_open(&env);
	cr_assert_eq(marker_hits(m), 1, "the snapshot was not used");
	res = ix_search(m, APP, "u4", "{\"query\":\"quokka\"}");
	cr_assert_eq(ix_count_id(res, eid), 1, "an event appended after the snapshot is missing");
	json_decref(res);
	res = ix_search(m, APP, "u1", "{\"query\":\"marathon training pasta\",\"session_id\":\"s1\"}");
	cr_assert_eq(json_array_size(ix_results(res)), 0, "a session deleted after the snapshot is found");
	json_decref(res);
	memd_close(m);
	expect_start(ref, 1, NULL);
	free(eid);
	free(ref);
}

/* ---- refused snapshots ----------------------------------------------------------- */

/* build_base, the reference, a marked snapshot; returns the reference. */
static char *prepared(char path[IX_PATH_MAX], void (*edit)(kws_meta *))
{
	uint64_t rng = 0x0123456789abcdefULL;
	int64_t ts = TS_BASE_US;
	char *ref;

	build_base(&rng, &ts);
	ref = reference();
	snap_path(&env, path);
	forge(path, edit);
	return ref;
}

static void truncate_to(const char *path, off_t size)
{
	cr_assert_eq(truncate(path, size), 0, "truncate: %s", strerror(errno));
}

static off_t size_of(const char *path)
{
	struct stat st;
	cr_assert_eq(stat(path, &st), 0);
	return st.st_size;
}

static void flip_bit(const char *path, off_t at, int bit)
{
	int fd = open(path, O_RDWR);
	unsigned char c;
	cr_assert_geq(fd, 0);
	cr_assert_eq(pread(fd, &c, 1, at), 1);
	c ^= (unsigned char)(1u << bit);
	cr_assert_eq(pwrite(fd, &c, 1, at), 1);
	close(fd);
}

Test(snapshot, marked_snapshot_is_used)
{
	char path[IX_PATH_MAX], *ref = prepared(path, NULL);
	/* The marker changes user "marked" only: every other result equals
	 * the rebuild's. */
	expect_start(ref, 1, NULL);
	free(ref);
}

Test(snapshot, truncated_is_refused)
{
	char path[IX_PATH_MAX], *ref = prepared(path, NULL);
	/* Short by one byte, by half, inside META, inside the preamble,
	 * empty. */
	const int cuts[] = { -1, -2, 40, 8, 0 };
	const char *const why[] = { "truncated", "truncated", "truncated", "truncated", "empty file" };

	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		off_t full = size_of(path);
		/* Each start below rebuilds and writes a good snapshot again:
		 * mark it anew before damaging it. */
		if (i)
			forge(path, NULL);
		truncate_to(path, cuts[i] == -1 ? full - 1 : cuts[i] == -2 ? full / 2 : cuts[i]);
		expect_start(ref, 0, why[i]);
	}
	free(ref);
}

Test(snapshot, bit_flips_are_refused)
{
	char path[IX_PATH_MAX], *ref = prepared(path, NULL);
	/* In the preamble's magic, META's section header, META's store id,
	 * the middle (-1), the END section (-2). */
	const int at[] = { 2, 18, 45, -1, -2 };
	const char *const why[] = { "bad magic", "checksum mismatch", "checksum mismatch",
				    "checksum mismatch", "checksum mismatch" };

	for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
		off_t full = size_of(path);
		if (i)
			forge(path, NULL);
		flip_bit(path, at[i] == -1 ? full / 2 : at[i] == -2 ? full - 3 : at[i], (int)(i % 8));
		expect_start(ref, 0, why[i]);
	}
	free(ref);
}

Test(snapshot, other_format_version_is_refused)
{
	char path[IX_PATH_MAX], *ref = prepared(path, NULL);
	int fd = open(path, O_RDWR);
	unsigned char v[4] = { KWS_FORMAT_VERSION + 1, 0, 0, 0 };

	cr_assert_geq(fd, 0);
	cr_assert_eq(pwrite(fd, v, sizeof(v), KWS_MAGIC_LEN), (ssize_t)sizeof(v));
	close(fd);
	expect_start(ref, 0, "format version");
	free(ref);
}

/* A snapshot of format 1 (documents without fields: written before the
 * author and memories were indexed) is refused with one log line, and
 * the index is rebuilt from the feed. */
Test(snapshot, format_1_is_refused)
{
	char path[IX_PATH_MAX], *ref = prepared(path, NULL);
	int fd = open(path, O_RDWR);
	unsigned char v[4] = { 1, 0, 0, 0 };

	cr_assert_geq(fd, 0);
	cr_assert_eq(pwrite(fd, v, sizeof(v), KWS_MAGIC_LEN), (ssize_t)sizeof(v));
	close(fd);
	expect_start(ref, 0, "format version 1, this memd reads 2");
	free(ref);
}

static void edit_analyzer(kws_meta *m)
{
	m->analyzer ^= 1;
}

Test(snapshot, other_analyzer_is_refused)
{
	char path[IX_PATH_MAX], *ref = prepared(path, edit_analyzer);
	expect_start(ref, 0, "another analyzer");
	free(ref);
}

static void edit_position(kws_meta *m)
{
	m->position += PAST_HEAD;
}

Test(snapshot, position_past_the_feed_head_is_refused)
{
	char path[IX_PATH_MAX], *ref = prepared(path, edit_position);
	expect_start(ref, 0, "past the store's feed head");
	free(ref);
}

static void edit_anchor(kws_meta *m)
{
	cr_assert_gt(m->n_anchors, 0, "the snapshot has no anchors");
	snprintf(m->anchors[m->n_anchors - 1].event_id, sizeof(m->anchors[0].event_id),
		 "not-this-event");
}

Test(snapshot, anchor_mismatch_is_refused)
{
	char path[IX_PATH_MAX], *ref = prepared(path, edit_anchor);
	expect_start(ref, 0, "holds another record");
	free(ref);
}

static void edit_store(kws_meta *m)
{
	m->store_id ^= 0x10;
}

Test(snapshot, other_store_id_is_refused)
{
	char path[IX_PATH_MAX], *ref = prepared(path, edit_store);
	expect_start(ref, 0, "another database");
	free(ref);
}

Test(snapshot, store_without_id_is_refused)
{
	char path[IX_PATH_MAX], db[IX_PATH_MAX], *ref = prepared(path, NULL);
	sqlite3 *h = NULL;

	/* A database restored from before its first snapshot. */
	cr_assert_lt((size_t)snprintf(db, sizeof(db), "%s/memd.db", env.dir), sizeof(db));
	cr_assert_eq(sqlite3_open(db, &h), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(h, "DELETE FROM cursors WHERE name = 'keyword:snapshot-id'", NULL,
				  NULL, NULL),
		     SQLITE_OK, "%s", sqlite3_errmsg(h));
	cr_assert_eq(sqlite3_changes(h), 1, "no snapshot id in the store");
	sqlite3_close(h);
	expect_start(ref, 0, "no snapshot id");
	free(ref);
}

Test(snapshot, snapshot_of_another_database_is_refused)
{
	char path[IX_PATH_MAX], other[IX_PATH_MAX], *ref;
	uint64_t rng = 0x0123456789abcdefULL;
	int64_t ts = TS_BASE_US;

	/* The same writes into another database: its snapshot looks alike
	 * (same positions, same texts) but belongs to another store. */
	ix_env_make(&other_env);
	saved_env = env;
	env = other_env;
	build_base(&rng, &ts);
	snap_path(&env, other);
	forge(other, NULL);
	env = saved_env;
	saved_env.dir[0] = '\0';
	ref = prepared(path, NULL);
	cr_assert_eq(rename(other, path), 0);
	expect_start(ref, 0, "another database");
	free(ref);
}

Test(snapshot, disabled_is_neither_read_nor_written)
{
	char path[IX_PATH_MAX], *ref = prepared(path, NULL);
	struct stat before, after;
	uint64_t rng = 7;
	int64_t ts = TS_BASE_US;
	memd *m;

	cr_assert_eq(stat(path, &before), 0);
	write_config(&env, "false");
	m = ix_open(&env);
	cr_assert_eq(marker_hits(m), 0, "snapshot: false read the snapshot");
	append_batch(m, APP, "u4", "s1", EVENTS_PER_BATCH, &rng, &ts);
	memd_close(m);
	cr_assert_eq(stat(path, &after), 0);
	cr_assert(before.st_ino == after.st_ino && before.st_mtime == after.st_mtime &&
		  before.st_size == after.st_size, "snapshot: false wrote the snapshot");
	free(ref);
}

Test(snapshot, explicit_path_in_new_directories)
{
	char path[IX_PATH_MAX], value[IX_PATH_MAX + 2];
	json_t *res;
	memd *m;

	cr_assert_lt((size_t)snprintf(path, sizeof(path), "%s/deep/er/kw.snap", env.dir),
		     sizeof(path));
	snprintf(value, sizeof(value), "\"%s\"", path);
	write_config(&env, value);
	m = ix_open(&env);
	free(ix_append(m, APP, "u1", "s1", "pelican crossing", NULL, 0));
	res = ix_search(m, APP, "u1", "{\"query\":\"pelican\"}");
	cr_assert_eq(json_array_size(ix_results(res)), 1);
	json_decref(res);
	memd_close(m);
	cr_assert(file_exists(path), "no snapshot at %s", path);
	m = ix_open(&env);
	res = ix_search(m, APP, "u1", "{\"query\":\"pelican\"}");
	cr_assert_eq(json_array_size(ix_results(res)), 1);
	json_decref(res);
	memd_close(m);
}

/* ---- a crash while writing --------------------------------------------------------- */

/* Temporary files of the snapshot in the test's directory. */
static int count_temps(void)
{
	DIR *d = opendir(env.dir);
	struct dirent *de;
	int n = 0;
	cr_assert_not_null(d);
	while ((de = readdir(d)) != NULL)
		n += strncmp(de->d_name, SNAP_NAME TMP_INFIX, strlen(SNAP_NAME TMP_INFIX)) == 0;
	closedir(d);
	return n;
}

/* The file at path is a whole snapshot that loads; its position. */
static int64_t check_loads(const char *path)
{
	kw_index *kw = kw_new(K1, B);
	memd_error err = { 0 };
	kws_reader *rd = NULL;
	kws_meta meta;

	cr_assert_eq(kws_reader_open(path, &rd, &meta, &err), 0, "%s", err.msg);
	cr_assert_eq(kws_reader_load(rd, kw, NULL, NULL, &err), 0, "a torn snapshot: %s", err.msg);
	kws_reader_close(rd);
	kw_free(kw);
	return meta.position;
}

static int64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Child: open, append, wait until indexed, tell the parent, close (which
 * writes the snapshot), exit. No Criterion asserts here. */
static void child_round(int fd, int round)
{
	memd_options o = { .struct_size = sizeof(o), .config_path = env.config_path };
	memd_error err = { 0 };
	char *out = NULL, body[256], sid[32];
	memd *m = NULL;

	if (memd_open(&o, &m, &err) < 0)
		_exit(3);
	snprintf(sid, sizeof(sid), "k%d", round);
	snprintf(body, sizeof(body), "{\"id\":\"%s\"}", sid);
	if (memd_session_create(m, APP, "u1", body, &out, &err) < 0)
		_exit(4);
	memd_free(out);
	snprintf(body, sizeof(body),
		 "{\"events\":[{\"role\":\"user\",\"content\":\"kill round %d walrus\"}]}", round);
	if (memd_events_append(m, APP, "u1", sid, body, &out, &err) < 0)
		_exit(5);
	memd_free(out);
	if (memd_search(m, APP, "u1", "{\"query\":\"walrus\"}", &out, &err) < 0)
		_exit(6);
	memd_free(out);
	if (write(fd, "c", 1) != 1)
		_exit(7);
	memd_close(m);
	_exit(0);
}

Test(snapshot, sigkill_while_writing_never_leaves_a_bad_file, .timeout = 180)
{
	uint64_t rng = 0xfeedfacecafebeefULL;
	int64_t ts = TS_BASE_US, close_us = 0, last = 0;
	char path[IX_PATH_MAX], *ref;
	int torn_temps = 0;
	memd *m;

	write_config(&env, NULL);
	m = ix_open(&env);
	for (int i = 0; i < KILL_BASE_BATCHES; i++) {
		char sid[16];
		snprintf(sid, sizeof(sid), "s%d", i % SESSIONS + 1);
		append_batch(m, APP, i % 2 ? "u1" : "u2", sid, EVENTS_PER_BATCH, &rng, &ts);
	}
	memd_close(m);
	snap_path(&env, path);
	last = check_loads(path);
	srand(1);
	for (int round = 0; round < KILL_ROUNDS; round++) {
		int fds[2], status;
		char c;
		pid_t pid;
		int64_t t0;

		cr_assert_eq(pipe(fds), 0);
		pid = fork();
		cr_assert_geq(pid, 0);
		if (pid == 0) {
			close(fds[0]);
			child_round(fds[1], round);
		}
		close(fds[1]);
		cr_assert_eq(read(fds[0], &c, 1), 1, "child %d failed before closing", round);
		close(fds[0]);
		t0 = now_us();
		if (round == 0) {
			/* Measure how long closing (the write) takes. */
			cr_assert_eq(waitpid(pid, &status, 0), pid);
			cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
			close_us = now_us() - t0;
		} else {
			useconds_t delay = (useconds_t)(close_us > 0 ? rand() % (close_us + 1) : 0);
			usleep(delay);
			kill(pid, SIGKILL);
			cr_assert_eq(waitpid(pid, &status, 0), pid);
			cr_assert(WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 0),
				  "child %d failed", round);
		}
		torn_temps += count_temps() > 0;
		/* Whatever is at the path is a complete snapshot, never older
		 * than the last one seen. */
		int64_t pos = check_loads(path);
		cr_assert_geq(pos, last, "the snapshot went back from %lld to %lld", (long long)last,
			      (long long)pos);
		last = pos;
	}
	cr_log_info("%d of %d kills left a temporary file (close took %lld us)", torn_temps,
		    KILL_ROUNDS - 1, (long long)close_us);
	ref = reference();
	expect_start(ref, 0, NULL);
	cr_assert_eq(count_temps(), 0, "temporary files of killed writers were not removed");
	free(ref);
}

/* ---- the setting ------------------------------------------------------------------- */

/* index.keyword.snapshot after loading yaml (NULL = zero-config). */
static char *snapshot_setting(const char *yaml)
{
	config_node *tree = NULL;
	memd_error err = { 0 };
	config_diag d = { 0 };
	settings s;
	char *out;

	if (yaml)
		cr_assert_eq(config_parse_string(yaml, strlen(yaml), "t.yaml", &tree, &err), 0, "%s",
			     err.msg);
	cr_assert_eq(settings_load(tree, &s, &d), 0, "%s: refused", yaml ? yaml : "zero-config");
	out = s.keyword_snapshot ? strdup(s.keyword_snapshot) : NULL;
	settings_clear(&s);
	config_diag_clear(&d);
	return out;
}

static void expect_setting(const char *yaml, const char *want)
{
	char *got = snapshot_setting(yaml);
	if (!want)
		cr_assert_null(got, "%s: got %s", yaml, got);
	else
		cr_assert(got && strcmp(got, want) == 0, "%s: got %s, want %s", yaml ? yaml : "",
			  got ? got : "(none)", want);
	free(got);
}

Test(snapshot_setting, defaults_and_values)
{
	expect_setting(NULL, "./data/keyword.snapshot");
	expect_setting("stores: {main: {plugin: sqlite, path: /srv/memd/memd.db}}\n",
		       "/srv/memd/keyword.snapshot");
	expect_setting("stores: {main: {plugin: sqlite, path: memd.db}}\n", "keyword.snapshot");
	expect_setting("stores: {main: {plugin: sqlite}}\n", "./data/keyword.snapshot");
	expect_setting("stores: {main: {plugin: memory}}\n", NULL);
	expect_setting("stores: {main: {plugin: postgres, dsn: x}}\n", "./data/keyword.snapshot");
	expect_setting("index: {keyword: {snapshot: false}}\n", NULL);
	expect_setting("index: {keyword: {snapshot: true}}\n", "./data/keyword.snapshot");
	expect_setting("stores: {main: {plugin: memory}}\nindex: {keyword: {snapshot: /tmp/k.snap}}\n",
		       "/tmp/k.snap");
	expect_setting("index: {keyword: {snapshot: rel/k.snap}}\n", "rel/k.snap");
}

static void expect_refused(const char *yaml, const char *needle)
{
	config_node *tree = NULL;
	memd_error err = { 0 };
	config_diag d = { 0 };
	settings s;
	int found = 0;

	cr_assert_eq(config_parse_string(yaml, strlen(yaml), "t.yaml", &tree, &err), 0, "%s", err.msg);
	cr_assert_eq(settings_load(tree, &s, &d), MEMD_EINVAL, "%s was accepted", yaml);
	for (size_t i = 0; i < d.n; i++)
		found |= strstr(d.lines[i], needle) != NULL;
	cr_assert(found, "%s: no problem mentions \"%s\"", yaml, needle);
	config_diag_clear(&d);
}

Test(snapshot_setting, refusals)
{
	expect_refused("index: {keyword: {snapshot: \"\"}}\n", "false: no snapshot");
	expect_refused("index: {keyword: {snapshot: [a]}}\n", "expected a file path");
	expect_refused("index: {keyword: {snapshot: {a: 1}}}\n", "expected a file path");
}

/* ---- kw_dump / kw_restore directly ------------------------------------------------ */

#define MEM_SECTIONS_MAX 64
#define FUZZ_ROUNDS 3000
#define DIRECT_USERS 5
#define DIRECT_DOCS 120
#define DIRECT_MEMORY_EVERY 5 /* every 5th document is a memory */

/* Sections in memory. */
typedef struct mem_sections {
	uint32_t kind[MEM_SECTIONS_MAX];
	uint8_t *data[MEM_SECTIONS_MAX];
	size_t len[MEM_SECTIONS_MAX], cap[MEM_SECTIONS_MAX];
	size_t n, next;
} mem_sections;

static int32_t ms_begin(void *ud, uint32_t kind, memd_error *err)
{
	mem_sections *ms = ud;
	(void)err;
	cr_assert_lt(ms->n, MEM_SECTIONS_MAX);
	ms->kind[ms->n] = kind;
	ms->data[ms->n] = NULL;
	ms->len[ms->n] = ms->cap[ms->n] = 0;
	return 0;
}

static int32_t ms_write(void *ud, const void *p, size_t n, memd_error *err)
{
	mem_sections *ms = ud;
	size_t i = ms->n;
	(void)err;
	if (ms->len[i] + n > ms->cap[i]) {
		ms->cap[i] = (ms->len[i] + n) * 2;
		ms->data[i] = realloc(ms->data[i], ms->cap[i]);
		cr_assert_not_null(ms->data[i]);
	}
	memcpy(ms->data[i] + ms->len[i], p, n);
	ms->len[i] += n;
	return 0;
}

static int32_t ms_end(void *ud, memd_error *err)
{
	mem_sections *ms = ud;
	(void)err;
	ms->n++;
	return 0;
}

static int32_t ms_next(void *ud, uint32_t *ret_kind, const uint8_t **ret_data, size_t *ret_len,
		       memd_error *err)
{
	mem_sections *ms = ud;
	(void)err;
	if (ms->next == ms->n)
		return 0;
	*ret_kind = ms->kind[ms->next];
	*ret_data = ms->data[ms->next];
	*ret_len = ms->len[ms->next];
	ms->next++;
	return 1;
}

static void ms_clear(mem_sections *ms)
{
	for (size_t i = 0; i < ms->n; i++)
		free(ms->data[i]);
	memset(ms, 0, sizeof(*ms));
}

static void dump_to(kw_index *kw, mem_sections *ms)
{
	kw_sink sink = { ms, ms_begin, ms_write, ms_end };
	memd_error err = { 0 };
	memset(ms, 0, sizeof(*ms));
	cr_assert_eq(kw_dump(kw, &sink, NULL, &err), 0, "%s", err.msg);
}

/* An index with several users, deletes, unicode, authors and memories
 * (every DIRECT_MEMORY_EVERY-th document, with tags, some expiring). */
static kw_index *direct_index(void)
{
	kw_index *kw = kw_new(K1, B);
	uint64_t rng = 42;
	char user[16], sid[16], text[512];

	cr_assert_not_null(kw);
	for (int d = 0; d < DIRECT_DOCS; d++) {
		size_t used = 0;
		int words = WORDS_MIN + (int)(rng_next(&rng) % WORDS_SPREAD);
		for (int w = 0; w < words; w++)
			used += (size_t)snprintf(text + used, sizeof(text) - used, "%s%s", w ? " " : "",
						 vocab[rng_next(&rng) % N_VOCAB]);
		if (d % 7 == 0)
			snprintf(text + used, sizeof(text) - used, " caf\xc3\xa9 \xe6\x9d\xb1\xe4\xba\xac");
		snprintf(user, sizeof(user), "u%d", d % DIRECT_USERS);
		snprintf(sid, sizeof(sid), "s%d", d % 4);
		kw_doc_in in = { .app = APP, .user = user, .session = sid, .author = d % 3 ? "bob" : "",
				 .seq = d + 1, .timestamp_us = TS_BASE_US + d, .text = text,
				 .text_len = strlen(text) };
		char mid[16], tags[64];
		if (d % DIRECT_MEMORY_EVERY == 0) {
			snprintf(mid, sizeof(mid), "mem%d", d);
			snprintf(tags, sizeof(tags), "%s Bob", vocab[d % N_VOCAB]);
			in.session = mid;
			in.author = NULL;
			in.flags = KW_DOC_MEMORY;
			in.expires_us = d % 2 ? TS_BASE_US + d : 0;
			in.tags = tags;
			in.tags_len = strlen(tags);
		}
		cr_assert_eq(kw_add(kw, &in), 0);
	}
	cr_assert_eq(kw_delete_session(kw, APP, "u1", "s2"), 0);
	kw_delete_user(kw, APP, "u3");
	return kw;
}

/* Every query for every user of a direct index, with scores, as text. */
static void direct_results(kw_index *kw, char *out, size_t cap)
{
	size_t used = 0;
	out[0] = '\0';
	for (int u = 0; u < DIRECT_USERS; u++) {
		char user[16];
		snprintf(user, sizeof(user), "u%d", u);
		for (size_t q = 0; q < N_QUERIES; q++) {
			memd_error err = { 0 };
			kw_hit *hits = NULL;
			size_t n = 0;
			cr_assert_eq(kw_search(kw, APP, user, queries[q], NULL, SEARCH_K, &hits, &n, NULL,
					       &err),
				     0, "%s", err.msg);
			for (size_t i = 0; i < n; i++)
				used += (size_t)snprintf(out + used, cap - used, "%s %s %lld %u %a\n",
							 user, hits[i].session, (long long)hits[i].seq,
							 hits[i].memory, hits[i].score);
			kw_hits_free(hits, n);
			cr_assert_lt(used, cap - 1);
		}
	}
}

Test(kw_snapshot, restore_is_exact)
{
	kw_index *kw = direct_index(), *back = kw_new(K1, B);
	mem_sections a, b;
	kw_source src = { &a, ms_next };
	memd_error err = { 0 };
	char *want = malloc(OUT_MAX), *got = malloc(OUT_MAX);
	kw_stats s1, s2;

	cr_assert(want && got && back);
	dump_to(kw, &a);
	cr_assert_eq(kw_restore(back, &src, &err), 0, "%s", err.msg);
	direct_results(kw, want, OUT_MAX);
	direct_results(back, got, OUT_MAX);
	cr_assert(strlen(want) > 0);
	cr_assert_str_eq(got, want, "a restored index answers differently");
	kw_get_stats(kw, &s1);
	kw_get_stats(back, &s2);
	cr_assert(s1.partitions == s2.partitions && s1.documents == s2.documents &&
		  s1.terms == s2.terms && s1.postings == s2.postings &&
		  s1.postings_bytes == s2.postings_bytes);
	/* Dumped again, byte for byte the same. */
	dump_to(back, &b);
	cr_assert_eq(a.n, b.n);
	for (size_t i = 0; i < a.n; i++)
		cr_assert(a.kind[i] == b.kind[i] && a.len[i] == b.len[i] &&
			  memcmp(a.data[i], b.data[i], a.len[i]) == 0, "section %zu differs", i);
	/* A restored index goes on like the original. */
	kw_doc_in more = { .app = APP, .user = "u0", .session = "s9", .author = "bob", .seq = 1,
			    .timestamp_us = TS_BASE_US, .text = "late pelican", .text_len = 12 };
	cr_assert_eq(kw_add(kw, &more), 0);
	cr_assert_eq(kw_add(back, &more), 0);
	cr_assert_eq(kw_delete_session(kw, APP, "u2", "s1"), 0);
	cr_assert_eq(kw_delete_session(back, APP, "u2", "s1"), 0);
	direct_results(kw, want, OUT_MAX);
	direct_results(back, got, OUT_MAX);
	cr_assert_str_eq(got, want);
	/* Not into an index that holds something. */
	a.next = 0;
	cr_assert_eq(kw_restore(back, &src, &err), MEMD_EINVAL);
	ms_clear(&a);
	ms_clear(&b);
	kw_free(kw);
	kw_free(back);
	free(want);
	free(got);
}

/* Hidden events (MEMD_FEED_HIDE) before and after a snapshot: the index
 * restored from it and caught up from the records after it answers as
 * one rebuilt from the visible events only. */
static void feed(kw_index *kw, uint32_t kind, const char *user, const char *sid, int64_t seq,
		 const char *text)
{
	feed_rec r = { .kind = kind, .position = seq, .app = APP, .user = user, .session = sid,
		       .event_id = "e", .author = "bob", .role = "user",
		       .text = kind == MEMD_FEED_EVENT ? text : "", .seq = seq,
		       .timestamp_us = TS_BASE_US + seq };
	memd_error err = { 0 };
	size_t done = 0;
	cr_assert_eq(kw_feed_apply(kw, &r, 1, &done, &err), 0, "%s", err.msg);
}

static const char *hide_text(int64_t seq, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s %s %s", vocab[seq % N_VOCAB], vocab[(seq * 7) % N_VOCAB],
		 vocab[(seq * 13 + 5) % N_VOCAB]);
	return buf;
}

Test(kw_snapshot, hidden_events_across_a_snapshot)
{
	kw_index *kw = kw_new(K1, B), *back = kw_new(K1, B), *rebuilt = kw_new(K1, B);
	char *want = malloc(OUT_MAX), *got = malloc(OUT_MAX), text[256];
	mem_sections a;
	kw_source src = { &a, ms_next };
	memd_error err = { 0 };

	cr_assert(kw && back && rebuilt && want && got);
	for (int64_t seq = 1; seq <= 80; seq++)
		feed(kw, MEMD_FEED_EVENT, "u0", "s1", seq, hide_text(seq, text, sizeof(text)));
	for (int64_t seq = 41; seq <= 80; seq++) /* rewound before the snapshot */
		feed(kw, MEMD_FEED_HIDE, "u0", "s1", seq, NULL);
	dump_to(kw, &a);
	cr_assert_eq(kw_restore(back, &src, &err), 0, "%s", err.msg);
	/* After it: more hidden, and some made visible again (an undo). */
	for (int64_t seq = 21; seq <= 40; seq++)
		feed(back, MEMD_FEED_HIDE, "u0", "s1", seq, NULL);
	for (int64_t seq = 61; seq <= 80; seq++)
		feed(back, MEMD_FEED_EVENT, "u0", "s1", seq, hide_text(seq, text, sizeof(text)));
	/* Visible: 1..20 and 61..80. */
	for (int64_t seq = 1; seq <= 80; seq++)
		if (seq <= 20 || seq > 60)
			feed(rebuilt, MEMD_FEED_EVENT, "u0", "s1", seq, hide_text(seq, text, sizeof(text)));
	direct_results(back, got, OUT_MAX);
	direct_results(rebuilt, want, OUT_MAX);
	cr_assert(strlen(want) > 0);
	cr_assert_str_eq(got, want, "restored and caught up, the index answers differently");
	ms_clear(&a);
	kw_free(kw);
	kw_free(back);
	kw_free(rebuilt);
	free(want);
	free(got);
}

/* Damaged payloads (past the file's checksums, e.g. forged) are refused
 * or, when they still describe a consistent index, load into one that
 * searches and dumps without faults (ASan watches). */
Test(kw_snapshot, damaged_payloads_are_refused_or_consistent)
{
	kw_index *kw = direct_index();
	mem_sections good;
	uint64_t rng = 99;
	size_t refused = 0, loaded = 0;
	char *out = malloc(OUT_MAX);

	cr_assert_not_null(out);
	dump_to(kw, &good);
	for (int round = 0; round < FUZZ_ROUNDS; round++) {
		mem_sections bad = good;
		kw_source src = { &bad, ms_next };
		size_t sec = (size_t)(rng_next(&rng) % good.n);
		uint8_t *copy = malloc(good.len[sec] ? good.len[sec] : 1);
		kw_index *t = kw_new(K1, B);
		memd_error err = { 0 };
		int32_t r;

		cr_assert(copy && t);
		memcpy(copy, good.data[sec], good.len[sec]);
		bad.data[sec] = copy;
		bad.next = 0;
		switch (rng_next(&rng) % 3) {
		case 0: /* a random byte */
			if (good.len[sec])
				copy[rng_next(&rng) % good.len[sec]] = (uint8_t)rng_next(&rng);
			break;
		case 1: /* a bit */
			if (good.len[sec])
				copy[rng_next(&rng) % good.len[sec]] ^= (uint8_t)(1u << (rng_next(&rng) % 8));
			break;
		default: /* cut short */
			bad.len[sec] = good.len[sec] ? (size_t)(rng_next(&rng) % good.len[sec]) : 0;
			break;
		}
		r = kw_restore(t, &src, &err);
		if (r == 0) {
			kw_stats st;
			mem_sections again;
			loaded++;
			direct_results(t, out, OUT_MAX);
			kw_get_stats(t, &st);
			dump_to(t, &again);
			ms_clear(&again);
		} else {
			cr_assert_eq(r, MEMD_EINVAL, "round %d: %d %s", round, r, err.msg);
			cr_assert_eq(strncmp(err.msg, "keyword snapshot: ", 18), 0, "%s", err.msg);
			kw_stats st;
			kw_get_stats(t, &st);
			cr_assert(st.partitions == 0 && st.terms == 0, "a refused restore left data");
			refused++;
		}
		kw_free(t);
		free(copy);
	}
	cr_log_info("%zu damaged payloads refused, %zu still consistent", refused, loaded);
	cr_assert_gt(refused, FUZZ_ROUNDS / 2);
	ms_clear(&good);
	kw_free(kw);
	free(out);
}

/* ---- background snapshots ---------------------------------------------------------- */

#define BG_ROUNDS 12
#define BG_CHECK_MS 5
#define BG_BIG_MS 3600000
#define BG_WAIT_ROUNDS 500
#define BG_SLEEP_US 10000
#define SEARCH_PATHS_MAX 16

/* An indexer of its own on the test's database (what memd_open builds),
 * so its snapshot schedule can be shortened. */
typedef struct direct {
	settings set;
	hostsvc *svc;
	loader_plugin *plugin;
	store *st;
	indexer *ix;
	char *paths;
} direct;

static void direct_open(direct *d, ix_logbuf *lb)
{
	const char *search[SEARCH_PATHS_MAX + 1];
	char yaml[IX_CONFIG_MAX];
	config_node *tree = NULL;
	config_diag diag = { 0 };
	memd_error err = { 0 };
	loader_instance *inst = NULL;
	size_t n = 0;

	memset(d, 0, sizeof(*d));
	d->paths = strdup(getenv("MEMD_PLUGIN_PATH") ? getenv("MEMD_PLUGIN_PATH") : "");
	cr_assert_not_null(d->paths);
	for (char *save = NULL, *p = strtok_r(d->paths, ":", &save); p && n < SEARCH_PATHS_MAX;
	     p = strtok_r(NULL, ":", &save))
		search[n++] = p;
	search[n] = NULL;
	snprintf(yaml, sizeof(yaml), "stores:\n  main: {plugin: sqlite, path: \"%s/memd.db\"}\n",
		 env.dir);
	cr_assert_eq(config_parse_string(yaml, strlen(yaml), "direct", &tree, &err), 0, "%s", err.msg);
	cr_assert_eq(settings_load(tree, &d->set, &diag), 0);
	config_diag_clear(&diag);
	d->svc = hostsvc_new(ix_keyword_log, lb, MEMD_LOG_INFO);
	cr_assert_not_null(d->svc);
	cr_assert_eq(loader_open("sqlite", search, &d->plugin, &err), 0, "%s", err.msg);
	cr_assert_eq(loader_instance_create(d->plugin, "stores.main", d->set.stores[0].node, "plugin",
					    d->svc, &inst, &err),
		     0, "%s", err.msg);
	cr_assert_eq(store_new(inst, &d->st, &err), 0, "%s", err.msg);
	cr_assert_eq(index_open(&d->set, d->st, NULL, d->svc, &d->ix, &err), 0, "%s", err.msg);
}

static void direct_close(direct *d)
{
	index_close(d->ix);
	store_free(d->st);
	loader_close(d->plugin);
	hostsvc_free(d->svc);
	settings_clear(&d->set);
	free(d->paths);
}

/* A search through the indexer: it waits until the feed is indexed. */
static void direct_search(direct *d, const char *user)
{
	memd_error err = { 0 };
	char *out = NULL;
	cr_assert_eq(index_search(d->ix, NULL, APP, user, "{\"query\":\"marathon\"}", 0, &out, &err), 0,
		     "%s", err.msg);
	free(out);
}

static int64_t feed_head_of(direct *d)
{
	memd_call call = { .struct_size = sizeof(call) };
	memd_error err = { 0 };
	int64_t head = 0;
	cr_assert_eq(store_feed_head(d->st, &call, &head, &err), 0, "%s", err.msg);
	return head;
}

Test(snapshot, background_snapshots_while_indexing)
{
	static ix_logbuf lb = { .mu = PTHREAD_MUTEX_INITIALIZER };
	uint64_t rng = 0x1234123412341234ULL;
	int64_t ts = TS_BASE_US, head, pos = 0;
	char path[IX_PATH_MAX], *ref;
	direct d;
	memd *w;

	/* Data first, written by a memd without snapshots. */
	write_config(&env, "false");
	w = ix_open(&env);
	fill_user(w, APP, "u1", &rng, &ts);
	fill_user(w, APP, "u2", &rng, &ts);
	snap_path(&env, path);

	direct_open(&d, &lb);
	index_snapshot_schedule(d.ix, 1, 0, BG_BIG_MS, BG_CHECK_MS);
	/* Writes, deletes and searches while snapshots are taken. Halfway,
	 * the rounds go on only once a snapshot was written: the rest of
	 * them move the head past it, so the snapshot at the head below is
	 * a second one, however slowly the writer ran. */
	for (int round = 0; round < BG_ROUNDS; round++) {
		char sid[16];
		snprintf(sid, sizeof(sid), "s%d", round % SESSIONS + 1);
		append_batch(w, APP, round % 2 ? "u1" : "u4", sid, EVENTS_PER_BATCH, &rng, &ts);
		if (round == BG_ROUNDS / 2)
			delete_session(w, APP, "u2", "s1");
		index_notify(d.ix);
		direct_search(&d, "u1");
		for (int i = 0; round == BG_ROUNDS / 2; i++) {
			int written;
			pthread_mutex_lock(&lb.mu);
			written = count_lines(lb.text, "snapshot written");
			pthread_mutex_unlock(&lb.mu);
			if (written > 0)
				break;
			cr_assert_lt(i, BG_WAIT_ROUNDS, "no background snapshot while indexing");
			usleep(BG_SLEEP_US);
		}
		usleep(BG_SLEEP_US);
	}
	memd_close(w);
	head = feed_head_of(&d);
	direct_search(&d, "u1");
	/* The background writer catches up with the head, the indexer still
	 * running. */
	for (int i = 0; i < BG_WAIT_ROUNDS && pos < head; i++) {
		kws_reader *rd = NULL;
		kws_meta meta;
		memd_error err = { 0 };
		if (kws_reader_open(path, &rd, &meta, &err) == 0) {
			pos = meta.position;
			kws_reader_close(rd);
		}
		if (pos < head)
			usleep(BG_SLEEP_US);
	}
	cr_assert_eq(pos, head, "no background snapshot at the feed head (%lld of %lld)",
		     (long long)pos, (long long)head);
	pthread_mutex_lock(&lb.mu);
	cr_assert_geq(count_lines(lb.text, "snapshot written"), 2, "log:\n%s", lb.text);
	pthread_mutex_unlock(&lb.mu);
	cr_assert_eq(check_loads(path), head);
	direct_close(&d);

	ref = reference();
	expect_start(ref, 0, NULL);
	free(ref);
}
