/* SPDX-License-Identifier: MIT */
/*
 * filevec's own behaviour beyond the vector-store contract: what it does
 * with torn, damaged and leftover files, compaction, the directory lock,
 * the stored dimension, partitioned scans (rows_read), the SIMD and scalar
 * kernels giving identical results, and exactness on near-duplicates.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fv_format.h"
#include "fv_kernel.h"
#include "vec_harness.h"

#define APP "app"
#define USER "u"
#define DIM 24
#define ID_LEN 64
#define PATH_LEN 512
#define MAX_SEGS 64
#define MANY 100000
#define SCORE_EPS 1e-5
#define CONFIG_STRICT \
	"{plugin: filevec, path: @TMPDIR@/vec, compact_ratio: 0.99, compact_min_bytes: 1000000000}"
#define CONFIG_COMPACT \
	"{plugin: filevec, path: @TMPDIR@/vec, compact_ratio: 0.3, compact_min_bytes: 0, fsync: false}"

static vec_store *vs;

static void open_strict(void)
{
	vs = vec_open_with("filevec", CONFIG_STRICT, 1, 1);
}

static void open_compacting(void)
{
	vs = vec_open_with("filevec", CONFIG_COMPACT, 1, 1);
}

static void teardown(void)
{
	vec_close(vs);
	vs = NULL;
}

/* ---- helpers ---------------------------------------------------------- */

static void dir_path(char *buf, const char *name)
{
	snprintf(buf, PATH_LEN, "%s/vec%s%s", vs->tmpdir, name ? "/" : "", name ? name : "");
}

/* Names in the store directory ending in suffix, sorted; returns count. */
static int list_files(const char *suffix, char names[][ID_LEN], int max)
{
	char dir[PATH_LEN];
	struct dirent *de;
	DIR *d;
	int n = 0;

	dir_path(dir, NULL);
	d = opendir(dir);
	cr_assert_not_null(d, "opendir %s", dir);
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name), sl = strlen(suffix);
		if (l >= sl && l < ID_LEN && strcmp(de->d_name + l - sl, suffix) == 0 && n < max)
			memcpy(names[n++], de->d_name, l + 1);
	}
	closedir(d);
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
			char t[ID_LEN];
			memcpy(t, names[j], ID_LEN);
			memcpy(names[j], names[j - 1], ID_LEN);
			memcpy(names[j - 1], t, ID_LEN);
		}
	return n;
}

static off_t file_size(const char *name)
{
	char p[PATH_LEN];
	struct stat st;

	dir_path(p, name);
	cr_assert_eq(stat(p, &st), 0, "stat %s", p);
	return st.st_size;
}

static unsigned char *read_file(const char *name, size_t *ret_len)
{
	char p[PATH_LEN];
	FILE *f;
	long n;
	unsigned char *buf;

	dir_path(p, name);
	f = fopen(p, "rb");
	cr_assert_not_null(f, "open %s", p);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n + 1);
	cr_assert_not_null(buf);
	cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*ret_len = (size_t)n;
	return buf;
}

static void write_file(const char *name, const void *data, size_t len)
{
	char p[PATH_LEN];
	FILE *f;

	dir_path(p, name);
	f = fopen(p, "wb");
	cr_assert_not_null(f, "create %s", p);
	cr_assert_eq(fwrite(data, 1, len, f), len);
	fclose(f);
}

static void vector_of(int i, float *v)
{
	uint64_t s = (uint64_t)i * 2654435761u + 1;
	vec_random_unit(&s, v, DIM);
}

/* Upsert e<i> (session s<i % 3>) for i in [from, to), one call each. */
static void put_range(int from, int to, int64_t version)
{
	for (int i = from; i < to; i++) {
		char id[ID_LEN], sess[ID_LEN];
		float v[DIM];
		memd_vector_record r;
		vector_of(i + (int)version * 1000, v);
		snprintf(id, sizeof(id), "e%d", i);
		snprintf(sess, sizeof(sess), "s%d", i % 3);
		r = vec_record(APP, USER, sess, id, "a", version, i, v, DIM);
		cr_assert_eq(vec_upsert(vs, &r, 1), 0, "upsert e%d: %s", i, vs->err.msg);
	}
}

/* Query with each e<i>'s expected vector: it must be the top hit, with the
 * exact stored vector (score equal to the float32 self product). Returns
 * the number of vectors of the user. */
static size_t check_range(int from, int to, int64_t version)
{
	memd_vector_filter f = vec_filter(APP, USER);
	vec_hits h = { 0 };
	size_t n;
	float v[DIM];

	for (int i = from; i < to; i++) {
		char id[ID_LEN];
		vector_of(i + (int)version * 1000, v);
		snprintf(id, sizeof(id), "e%d", i);
		cr_assert_eq(vec_query(vs, v, DIM, &f, 1, &h), 0, "%s", vs->err.msg);
		cr_assert_eq(h.n, 1, "no hit for e%d", i);
		cr_assert_str_eq(h.v[0].event_id, id);
		cr_assert_eq(h.v[0].seq, version, "e%d has version %lld, want %lld", i,
			     (long long)h.v[0].seq, (long long)version);
		cr_assert_float_eq(h.v[0].score, vec_dot(v, v, DIM), SCORE_EPS);
		vec_hits_clear(&h);
	}
	vector_of(0, v);
	cr_assert_eq(vec_query(vs, v, DIM, &f, MANY, &h), 0, "%s", vs->err.msg);
	n = h.n;
	vec_hits_clear(&h);
	return n;
}

/* ---- torn and damaged files ------------------------------------------- */

Test(filevec_files, a_torn_tail_is_dropped_and_writes_continue, .init = open_strict,
     .fini = teardown)
{
	char segs[MAX_SEGS][ID_LEN];
	unsigned char *data;
	size_t len;
	off_t good;

	put_range(0, 10, 1);
	vec_shut(vs);
	cr_assert_eq(list_files(".fv", segs, MAX_SEGS), 1);
	good = file_size(segs[0]);
	/* A crash in the middle of a write: the first half of a copy of the
	 * last record (valid magic and length, bad checksum). */
	data = read_file(segs[0], &len);
	{
		size_t rec = 0, off = FV_SEG_HEADER_SIZE;
		fv_rec r;
		size_t sz;
		while (fv_rec_decode(data + off, len - off, DIM, &r, &sz) == FV_DECODE_OK &&
		       off + sz < len)
			off += sz;
		rec = off;
		data = realloc(data, len + sz / 2);
		cr_assert_not_null(data);
		memcpy(data + len, data + rec, sz / 2);
		write_file(segs[0], data, len + sz / 2);
	}
	free(data);
	vec_reopen(vs);
	cr_assert_eq(file_size(segs[0]), good, "the torn tail is cut off on open");
	cr_assert_eq(check_range(0, 10, 1), 10);
	put_range(10, 12, 1);
	vec_reopen(vs);
	cr_assert_eq(check_range(0, 12, 1), 12, "writes after the repair survive");
}

Test(filevec_files, a_record_cut_short_is_lost_alone, .init = open_strict, .fini = teardown)
{
	char segs[MAX_SEGS][ID_LEN];
	char p[PATH_LEN];
	off_t before;

	put_range(0, 10, 1);
	vec_shut(vs);
	cr_assert_eq(list_files(".fv", segs, MAX_SEGS), 1);
	before = file_size(segs[0]);
	dir_path(p, segs[0]);
	cr_assert_eq(truncate(p, before - 5), 0);
	vec_reopen(vs);
	cr_assert_eq(check_range(0, 9, 1), 9, "the last, unfinished record is gone; nothing else");
	cr_assert_lt(file_size(segs[0]), before - 5, "truncated to the last whole record");
}

Test(filevec_files, a_damaged_record_in_the_middle_is_skipped, .init = open_strict,
     .fini = teardown)
{
	char segs[MAX_SEGS][ID_LEN];
	unsigned char *data;
	size_t len, off = FV_SEG_HEADER_SIZE, sz = 0;
	fv_rec r;

	put_range(0, 10, 1);
	vec_shut(vs);
	cr_assert_eq(list_files(".fv", segs, MAX_SEGS), 1);
	data = read_file(segs[0], &len);
	for (int i = 0; i < 5; i++) { /* to the 6th record (e5) */
		cr_assert_eq(fv_rec_decode(data + off, len - off, DIM, &r, &sz), FV_DECODE_OK);
		off += sz;
	}
	data[off + sz - 3] ^= 0x40; /* a bit of e5's vector */
	write_file(segs[0], data, len);
	free(data);
	vec_reopen(vs);
	cr_assert_eq(check_range(0, 5, 1), 9);
	cr_assert_eq(check_range(6, 10, 1), 9, "records after the damage are kept");
	{
		/* e5 is gone, not returned with a garbage vector. */
		memd_vector_filter f = vec_filter(APP, USER);
		vec_hits h = { 0 };
		float v[DIM];
		vector_of(5 + 1000, v);
		cr_assert_eq(vec_query(vs, v, DIM, &f, MANY, &h), 0);
		cr_assert_eq(vec_hits_find(&h, "s2", "e5"), -1, "a damaged record was returned");
		vec_hits_clear(&h);
	}
	cr_assert_eq(file_size(segs[0]), (off_t)len, "damage in the middle is not truncated");
}

Test(filevec_files, leftover_temp_files_are_removed, .init = open_strict, .fini = teardown)
{
	char segs[MAX_SEGS][ID_LEN], tmp[ID_LEN + 8];
	unsigned char *data;
	size_t len;

	put_range(0, 4, 1);
	vec_shut(vs);
	cr_assert_eq(list_files(".fv", segs, MAX_SEGS), 1);
	data = read_file(segs[0], &len);
	/* An interrupted compaction's output: a complete-looking file. */
	snprintf(tmp, sizeof(tmp), "seg-00000000000000ff.fv.tmp");
	write_file(tmp, data, len);
	free(data);
	vec_reopen(vs);
	cr_assert_eq(list_files(".tmp", segs, MAX_SEGS), 0, "temp file left");
	cr_assert_eq(check_range(0, 4, 1), 4);
}

Test(filevec_files, a_segment_with_a_bad_header_is_set_aside, .init = open_compacting,
     .fini = teardown)
{
	char segs[MAX_SEGS][ID_LEN], bad[MAX_SEGS][ID_LEN];
	unsigned char *data;
	size_t len;
	int n;

	/* Replacing every record makes a compaction: then two segments, the
	 * compacted one and the one written after it. */
	put_range(0, 6, 1);
	put_range(0, 6, 2);
	put_range(6, 8, 2);
	vec_shut(vs);
	n = list_files(".fv", segs, MAX_SEGS);
	cr_assert_eq(n, 2, "%d segments", n);
	data = read_file(segs[1], &len);
	data[FV_SEG_MAGIC_LEN + 1] ^= 0xff;
	write_file(segs[1], data, len);
	free(data);
	vec_reopen(vs);
	cr_assert_eq(list_files(".bad", bad, MAX_SEGS), 1);
	cr_assert_eq(check_range(0, 6, 2), 6, "the compacted segment's records stay");
	put_range(6, 8, 3);
	vec_reopen(vs);
	cr_assert_eq(check_range(6, 8, 3), 8, "new segments after the set-aside one");
}

Test(filevec_files, a_newer_format_is_refused, .init = open_strict, .fini = teardown)
{
	char segs[MAX_SEGS][ID_LEN];
	unsigned char *data;
	size_t len;
	memd_error err;
	fv_seg_header h;

	put_range(0, 2, 1);
	vec_shut(vs);
	cr_assert_eq(list_files(".fv", segs, MAX_SEGS), 1);
	data = read_file(segs[0], &len);
	cr_assert_eq(fv_seg_header_decode(data, len, &h), FV_DECODE_OK);
	h.version = FV_FORMAT_VERSION + 1;
	fv_seg_header_encode(&h, data);
	write_file(segs[0], data, len);
	free(data);
	cr_assert_eq(vec_try_reopen(vs, &err), MEMD_ECONFLICT, "got %d: %s", err.code, err.msg);
	cr_assert(strstr(err.msg, "newer"), "message: %s", err.msg);
}

/* ---- compaction ------------------------------------------------------- */

static int count_compacted(void)
{
	char segs[MAX_SEGS][ID_LEN];
	int n = list_files(".fv", segs, MAX_SEGS), c = 0;

	for (int i = 0; i < n; i++) {
		size_t len;
		unsigned char *d = read_file(segs[i], &len);
		fv_seg_header h;
		if (fv_seg_header_decode(d, len, &h) == FV_DECODE_OK && (h.flags & FV_SEG_COMPACTED))
			c++;
		free(d);
	}
	return c;
}

static off_t store_bytes(void)
{
	char segs[MAX_SEGS][ID_LEN];
	int n = list_files(".fv", segs, MAX_SEGS);
	off_t t = 0;

	for (int i = 0; i < n; i++)
		t += file_size(segs[i]);
	return t;
}

Test(filevec_compaction, rewrites_keep_the_files_bounded, .init = open_compacting,
     .fini = teardown)
{
	off_t live;

	put_range(0, 20, 1);
	live = store_bytes();
	for (int v = 2; v < 40; v++)
		put_range(0, 20, v);
	cr_assert_geq(count_compacted(), 1, "no compaction happened");
	cr_assert_leq(store_bytes(), 3 * live, "%lld bytes on disk for %lld live",
		      (long long)store_bytes(), (long long)live);
	cr_assert_eq(check_range(0, 20, 39), 20);
	vec_reopen(vs);
	cr_assert_eq(check_range(0, 20, 39), 20, "after compactions and a reopen");
}

Test(filevec_compaction, removed_vectors_stay_removed, .init = open_compacting,
     .fini = teardown)
{
	put_range(0, 9, 1);
	cr_assert_eq(vec_remove_scope(vs, APP, USER, "s1"), 0, "%s", vs->err.msg);
	/* Enough rewrites to compact away the tombstone and the dead records. */
	for (int v = 2; v < 8; v++)
		put_range(0, 9, 1), vec_remove_scope(vs, APP, USER, "s1");
	cr_assert_geq(count_compacted(), 1);
	vec_reopen(vs);
	cr_assert_eq(check_range(0, 1, 1), 6, "s1 (3 of 9) was removed last");
}

Test(filevec_compaction, superseded_segments_are_deleted_on_open, .init = open_strict,
     .fini = teardown)
{
	char segs[MAX_SEGS][ID_LEN], after[MAX_SEGS][ID_LEN];
	unsigned char *old[MAX_SEGS];
	size_t old_len[MAX_SEGS];
	loader_instance *inst = NULL;
	config_node *cfg = NULL;
	memd_error err;
	int n, m;

	put_range(0, 9, 1);
	cr_assert_eq(vec_remove_scope(vs, APP, USER, "s0"), 0);
	put_range(3, 6, 2);
	vec_shut(vs);
	n = list_files(".fv", segs, MAX_SEGS);
	for (int i = 0; i < n; i++)
		old[i] = read_file(segs[i], &old_len[i]);
	/* Compact with another config: one upsert past the threshold. */
	cr_assert_eq(vec_instance_with(vs, CONFIG_COMPACT, &inst, &cfg, &err), 0, "%s", err.msg);
	{
		memd_vector_record r;
		const memd_vector_record *rp = &r;
		memd_call c = { .struct_size = sizeof(c) };
		const memd_vector_ops *ops = loader_vector_ops(loader_instance_plugin(inst));
		float v[DIM];
		vector_of(4 + 3000, v);
		r = vec_record(APP, USER, "s1", "e4", "a", 3, 4, v, DIM);
		cr_assert_eq(ops->upsert(loader_instance_handle(inst), &c, &rp, 1, &err), 0, "%s",
			     err.msg);
	}
	loader_instance_destroy(inst);
	config_free(cfg);
	cr_assert_geq(count_compacted(), 1, "no compaction");
	/* A crash after the compacted segment was in place but before the old
	 * ones were deleted: put them back. */
	for (int i = 0; i < n; i++) {
		write_file(segs[i], old[i], old_len[i]);
		free(old[i]);
	}
	vec_reopen(vs);
	m = list_files(".fv", after, MAX_SEGS);
	for (int i = 0; i < m; i++)
		for (int j = 0; j < n; j++)
			cr_assert_str_neq(after[i], segs[j], "superseded %s is still there", segs[j]);
	/* e0 and e6 removed with s0; e3 written again; e4 and e5 replaced. */
	cr_assert_eq(check_range(1, 3, 1), 7);
	cr_assert_eq(check_range(3, 4, 2), 7);
	cr_assert_eq(check_range(4, 5, 3), 7);
	cr_assert_eq(check_range(5, 6, 2), 7);
	cr_assert_eq(check_range(7, 9, 1), 7);
}

/* ---- lock, dimension, config ------------------------------------------ */

Test(filevec_open, one_instance_per_directory, .init = open_strict, .fini = teardown)
{
	loader_instance *second = NULL;
	memd_error err;

	cr_assert_eq(vec_second_instance(vs, &second, &err), MEMD_EUNAVAIL,
		     "a second instance on the same directory: %d %s", err.code, err.msg);
	cr_assert(err.flags & MEMD_ERROR_RETRYABLE);
	vec_shut(vs);
	cr_assert_eq(vec_second_instance(vs, &second, &err), 0, "after the first closed: %s",
		     err.msg);
	loader_instance_destroy(second);
	vec_reopen(vs);
}

Test(filevec_open, prepare_stores_the_dimension, .init = open_strict, .fini = teardown)
{
	cr_assert_eq(vec_prepare(vs, DIM), 0, "%s", vs->err.msg);
	vec_reopen(vs);
	cr_assert_eq(vec_prepare(vs, DIM + 1), MEMD_ECONFLICT, "an empty store remembers its "
		     "dimension from prepare");
	cr_assert_eq(vec_prepare(vs, DIM), 0, "%s", vs->err.msg);
	cr_assert_eq(vec_prepare(vs, 0), MEMD_EINVAL);
	cr_assert_eq(vec_prepare(vs, FV_DIM_MAX + 1), MEMD_EINVAL);
}

Test(filevec_open, bad_config_is_refused, .init = open_strict, .fini = teardown)
{
	static const char *const bad[] = {
		"{plugin: filevec, path: @TMPDIR@/x, compact_ratio: 1.5}",
		"{plugin: filevec, path: @TMPDIR@/x, compact_ratio: 0}",
		"{plugin: filevec, path: @TMPDIR@/x, compact_min_bytes: -1}",
		"{plugin: filevec, path: @TMPDIR@/x, simd: sse9}",
		"{plugin: filevec}",
		"{plugin: filevec, path: @TMPDIR@/x, colour: blue}",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		loader_instance *inst = NULL;
		config_node *cfg = NULL;
		memd_error err;
		cr_assert_eq(vec_instance_with(vs, bad[i], &inst, &cfg, &err), MEMD_EINVAL,
			     "%s was accepted", bad[i]);
	}
}

Test(filevec_open, remove_refuses_filters_it_cannot_apply, .init = open_strict,
     .fini = teardown)
{
	memd_vector_filter f = vec_filter(APP, USER);
	const char *authors[] = { "a" };

	put_range(0, 3, 1);
	f.authors = authors;
	f.n_authors = 1;
	cr_assert_eq(vec_remove(vs, &f), MEMD_EINVAL, "remove by author would remove too much");
	f = vec_filter(APP, USER);
	f.after_us = 1;
	cr_assert_eq(vec_remove(vs, &f), MEMD_EINVAL);
	cr_assert_eq(check_range(0, 3, 1), 3);
}

Test(filevec_open, cancel_and_deadline_are_honoured, .init = open_strict, .fini = teardown)
{
	volatile int32_t cancel = 1;
	memd_vector_filter f = vec_filter(APP, USER);
	vec_hits h = { 0 };
	float v[DIM];

	put_range(0, 3, 1);
	vector_of(1, v);
	vs->cancel = &cancel;
	cr_assert_eq(vec_query(vs, v, DIM, &f, 3, &h), MEMD_ECANCELED);
	{
		memd_vector_record r = vec_record(APP, USER, "s", "x", "a", 1, 1, v, DIM);
		cr_assert_eq(vec_upsert(vs, &r, 1), MEMD_ECANCELED);
	}
	vs->cancel = NULL;
	cr_assert_eq(check_range(0, 3, 1), 3, "a cancelled upsert wrote nothing");
}

/* ---- queries ---------------------------------------------------------- */

Test(filevec_query, a_query_reads_only_its_users_partition, .init = open_strict,
     .fini = teardown)
{
	enum { MINE = 10, OTHERS = 1000 };
	memd_vector_record *recs = calloc(OTHERS, sizeof(*recs));
	char (*ids)[ID_LEN] = calloc(OTHERS, sizeof(*ids));
	float v[DIM];
	memd_vector_filter f = vec_filter(APP, USER);
	vec_hits h = { 0 };

	cr_assert(recs && ids);
	vector_of(0, v);
	put_range(0, MINE, 1);
	for (int i = 0; i < OTHERS; i++) {
		snprintf(ids[i], ID_LEN, "o%d", i);
		recs[i] = vec_record(APP, "other-user", "s", ids[i], "a", 1, 1, v, DIM);
	}
	cr_assert_eq(vec_upsert(vs, recs, OTHERS), 0, "%s", vs->err.msg);
	vs->rows_read = 0;
	cr_assert_eq(vec_query(vs, v, DIM, &f, 5, &h), 0);
	cr_assert_eq(vs->rows_read, MINE, "examined %llu vectors for a user with %d",
		     (unsigned long long)vs->rows_read, MINE);
	vec_hits_clear(&h);
	free(recs);
	free(ids);
}

#define ND 100          /* not a multiple of 16 or 32: padding is exercised */
#define ND_N 3000
#define ND_CLUSTERS 5
#define ND_NOISE 2e-3f

/* ND_N vectors in ND_CLUSTERS tight clusters: scores within a cluster are
 * closer than the int8 bound is wide, the hard case for the exact scan. */
static float *near_duplicates(void)
{
	float *v = malloc((size_t)ND_N * ND * sizeof(float)), base[ND_CLUSTERS][ND];
	uint64_t rng = 99;

	cr_assert_not_null(v);
	for (int c = 0; c < ND_CLUSTERS; c++)
		vec_random_unit(&rng, base[c], ND);
	for (int i = 0; i < ND_N; i++) {
		float *x = v + (size_t)i * ND;
		for (int j = 0; j < ND; j++)
			x[j] = base[i % ND_CLUSTERS][j] +
			       ND_NOISE * ((float)(vec_rand(&rng) % 2001) / 1000.0f - 1.0f);
		vec_normalize(x, ND);
		if (i % 10 == 3)
			memcpy(x, v + (size_t)(i - 3) * ND, ND * sizeof(float)); /* exact ties */
	}
	return v;
}

static void put_near_duplicates(const float *v)
{
	memd_vector_record *recs = calloc(ND_N, sizeof(*recs));
	char (*ids)[ID_LEN] = calloc(ND_N, sizeof(*ids));
	static const char *const authors[] = { "a", "b", "c" };
	static const char *const sessions[] = { "s0", "s1", "s2", "s3" };

	cr_assert(recs && ids);
	for (int i = 0; i < ND_N; i++) {
		snprintf(ids[i], ID_LEN, "e%04d", i);
		recs[i] = vec_record(APP, USER, sessions[i % 4], ids[i], authors[i % 3], i, i,
				     v + (size_t)i * ND, ND);
	}
	cr_assert_eq(vec_upsert(vs, recs, ND_N), 0, "%s", vs->err.msg);
	free(recs);
	free(ids);
}

typedef struct expect {
	float score;
	int i;
} expect;

static int expect_cmp(const void *a, const void *b)
{
	const expect *x = a, *y = b;
	if (x->score != y->score)
		return x->score > y->score ? -1 : 1;
	/* ties: by session ("s<i%4>"), then event id */
	if (x->i % 4 != y->i % 4)
		return x->i % 4 - y->i % 4;
	return x->i - y->i;
}

/* The query results must be exactly the brute-force float32 top-k (same
 * kernel, same order, same tie-break): ids and score bits. */
Test(filevec_query, exact_on_near_duplicates, .init = open_strict, .fini = teardown,
     .timeout = 60)
{
	float *v = near_duplicates(), *q = calloc(fv_f32_stride(ND), sizeof(float)),
	      *row = calloc(fv_f32_stride(ND), sizeof(float));
	expect *all = malloc(ND_N * sizeof(*all));
	const fv_kernels *kern = fv_kernels_scalar();
	static const uint32_t ks[] = { 1, 10, 57 };
	uint64_t rng = 5;

	cr_assert(q && row && all);
	put_near_duplicates(v);
	for (int t = 0; t < 12; t++) {
		memd_vector_filter f = vec_filter(APP, USER);
		uint32_t k = ks[t % 3];
		vec_hits h = { 0 };
		int n = 0;

		if (t < 4)
			memcpy(q, v + (size_t)(t * 11) * ND, ND * sizeof(float));
		else
			vec_random_unit(&rng, q, ND);
		if (t % 4 == 1)
			f.session = "s2";
		for (int i = 0; i < ND_N; i++) {
			if (f.session && i % 4 != 2)
				continue;
			memcpy(row, v + (size_t)i * ND, ND * sizeof(float));
			all[n].score = kern->dot_f32(q, row, fv_f32_stride(ND));
			all[n++].i = i;
		}
		qsort(all, (size_t)n, sizeof(*all), expect_cmp);
		cr_assert_eq(vec_query(vs, q, ND, &f, k, &h), 0, "%s", vs->err.msg);
		cr_assert_eq(h.n, k);
		for (size_t i = 0; i < h.n; i++) {
			char id[ID_LEN];
			snprintf(id, sizeof(id), "e%04d", all[i].i);
			cr_assert_str_eq(h.v[i].event_id, id, "query %d k %u: hit %zu is %s (%.9g), "
					 "want %s (%.9g)", t, k, i, h.v[i].event_id, h.v[i].score, id,
					 all[i].score);
			cr_assert(memcmp(&h.v[i].score, &all[i].score, sizeof(float)) == 0,
				  "query %d: score bits of %s", t, id);
		}
		vec_hits_clear(&h);
	}
	free(v);
	free(q);
	free(row);
	free(all);
}

/* Results of a fixed set of queries, for comparing kernels. */
static void run_queries(const float *v, vec_hits *out, int nq)
{
	static const char *const authors[] = { "b", "c" };

	for (int t = 0; t < nq; t++) {
		memd_vector_filter f = vec_filter(APP, USER);
		const float *q = v + (size_t)((t * 37) % ND_N) * ND;
		if (t % 3 == 1)
			f.session = "s3";
		if (t % 3 == 2) {
			f.authors = authors;
			f.n_authors = 2;
			f.after_us = 100;
			f.before_us = 2500;
		}
		cr_assert_eq(vec_query(vs, q, ND, &f, 25, &out[t]), 0, "%s", vs->err.msg);
	}
}

Test(filevec_query, simd_and_scalar_give_identical_results, .init = open_strict,
     .fini = teardown, .timeout = 60)
{
	enum { NQ = 9 };
	float *v = near_duplicates();
	vec_hits scalar[NQ] = { 0 }, simd[NQ] = { 0 };
	loader_instance *inst = NULL;
	config_node *cfg = NULL;
	memd_error err;

	if (!fv_kernels_avx2())
		cr_skip_test("no AVX2 on this CPU");
	put_near_duplicates(v);
	vec_shut(vs);
	/* The same files, once with each kernel. */
	cr_assert_eq(vec_instance_with(vs, "{plugin: filevec, path: @TMPDIR@/vec, simd: scalar}",
				       &inst, &cfg, &err), 0, "%s", err.msg);
	vs->inst = inst;
	vs->h = loader_instance_handle(inst);
	run_queries(v, scalar, NQ);
	vec_shut(vs);
	config_free(cfg);
	cr_assert_eq(vec_instance_with(vs, "{plugin: filevec, path: @TMPDIR@/vec, simd: avx2}",
				       &inst, &cfg, &err), 0, "%s", err.msg);
	vs->inst = inst;
	vs->h = loader_instance_handle(inst);
	run_queries(v, simd, NQ);
	vec_shut(vs);
	config_free(cfg);
	for (int t = 0; t < NQ; t++) {
		cr_assert_eq(simd[t].n, scalar[t].n, "query %d: %zu vs %zu hits", t, simd[t].n,
			     scalar[t].n);
		cr_assert_gt(simd[t].n, 0);
		for (size_t i = 0; i < simd[t].n; i++) {
			cr_assert_str_eq(simd[t].v[i].event_id, scalar[t].v[i].event_id,
					 "query %d, rank %zu", t, i);
			cr_assert(memcmp(&simd[t].v[i].score, &scalar[t].v[i].score, sizeof(float)) == 0,
				  "query %d, rank %zu: %.9g vs %.9g", t, i, simd[t].v[i].score,
				  scalar[t].v[i].score);
		}
		vec_hits_clear(&simd[t]);
		vec_hits_clear(&scalar[t]);
	}
	free(v);
	vec_reopen(vs);
}

/* ---- a full disk ---------------------------------------------------------- */

#define FULL_FS_SIZE "size=1m"
#define FULL_BATCH 64
#define FULL_MAX_BATCHES 10000 /* far more than the file system holds */

static char full_mount[PATH_LEN];

static void open_on_small_fs(void)
{
	memd_error err = { 0 };

	vs = vec_open_with("filevec", CONFIG_STRICT, 1, 1);
	vec_shut(vs);
	dir_path(full_mount, NULL);
	cr_assert_eq(mount("tmpfs", full_mount, "tmpfs", 0, FULL_FS_SIZE), 0,
		     "cannot mount a tmpfs at %s: %s: this test needs root (CI runs as root) to "
		     "fill a real file system", full_mount, strerror(errno));
	cr_assert_eq(vec_try_reopen(vs, &err), 0, "%s", err.msg);
}

static void close_small_fs(void)
{
	vec_shut(vs);
	if (full_mount[0])
		umount2(full_mount, MNT_DETACH);
	full_mount[0] = '\0';
	vec_close(vs);
	vs = NULL;
}

/* A write on a full disk fails as in every store: MEMD_EUNAVAIL, retryable,
 * MEMD_ERROR_STORAGE_FULL (pu_storage.h), and what was stored stays. */
Test(filevec_files, a_full_disk_is_retryable_and_loses_nothing, .init = open_on_small_fs,
     .fini = close_small_fs, .timeout = 60)
{
	memd_vector_record recs[FULL_BATCH];
	char ids[FULL_BATCH][ID_LEN];
	float v[FULL_BATCH][DIM];
	int32_t r = 0;
	int b;

	for (b = 0; b < FULL_MAX_BATCHES; b++) {
		for (int i = 0; i < FULL_BATCH; i++) {
			snprintf(ids[i], ID_LEN, "e%d", b * FULL_BATCH + i);
			vector_of(b * FULL_BATCH + i, v[i]);
			recs[i] = vec_record(APP, USER, "s0", ids[i], "a", 0, b * FULL_BATCH + i, v[i],
					     DIM);
		}
		if ((r = vec_upsert(vs, recs, FULL_BATCH)) < 0)
			break;
	}
	cr_assert_lt(b, FULL_MAX_BATCHES, "the " FULL_FS_SIZE " file system never filled");
	cr_assert_eq(r, MEMD_EUNAVAIL, "%d: %s", (int)r, vs->err.msg);
	cr_assert_eq(vs->err.flags, MEMD_ERROR_RETRYABLE | MEMD_ERROR_STORAGE_FULL, "%#x: %s",
		     (unsigned)vs->err.flags, vs->err.msg);
	cr_assert_eq(vec_ping(vs), 0, "the store broke: %s", vs->err.msg);
	cr_assert_eq(check_range(0, b * FULL_BATCH, 0), (size_t)b * FULL_BATCH);
}
