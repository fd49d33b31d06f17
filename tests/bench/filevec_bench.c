/* SPDX-License-Identifier: MIT */
/*
 * filevec_bench: exact top-k latency of the filevec plugin on one user's
 * N x DIM random unit vectors, one thread, beside the memory-bandwidth
 * bound measured in the same run (a streaming sum over the same number of
 * bytes), and FAISS IndexFlatIP on the very same vectors
 * (filevec_faiss.py, Debian's python3-faiss) when it is installed.
 *
 *   filevec_bench [--n N] [--dim D] [--queries Q] [--k K] [--dir DIR]
 *                 [--faiss SCRIPT] [--python PYTHON] [--simd auto|avx2|scalar]
 *
 * Writes DIR/vectors.f32 and DIR/queries.f32 (raw little-endian float32,
 * row-major), loads the vectors into a filevec store in DIR/store through
 * the loader (as memd does), times Q queries, writes each query's top-k
 * ids to DIR/filevec_top.txt, then runs SCRIPT (default: the one beside
 * this file) with PYTHON (default /usr/bin/python3, where Debian's
 * python3-faiss lives), which times FAISS and reports how many of its
 * top-k filevec also returned. DIR defaults to a temp dir, removed after.
 * MEMD_PLUGIN_PATH must name the built plugins.
 */
#include <errno.h>
#include <ftw.h>
#include <stdarg.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "plugins/loader.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define BENCH_X86 1
#include <immintrin.h>
#else
#define BENCH_X86 0
#endif

#define DEFAULT_N 100000
#define DEFAULT_DIM 384
#define DEFAULT_QUERIES 200
#define DEFAULT_K 10
#define WARMUP_QUERIES 5
#define UPSERT_BATCH 1000
#define SESSIONS 100
#define BW_ROUNDS 7
#define ID_LEN 32
#define MAX_SEARCH_DIRS 16
#define NFTW_FDS 16
#define NS_PER_S 1e9
#define MS_PER_S 1e3
#define BYTES_PER_GB 1e9
#define BYTES_PER_MB (1024.0 * 1024.0)
#define PERCENTILE_95 0.95
#define I8_PAD 32
#define DEFAULT_PYTHON "/usr/bin/python3"
#ifndef FILEVEC_FAISS_SCRIPT
#define FILEVEC_FAISS_SCRIPT "filevec_faiss.py"
#endif

typedef struct opts {
	long n, dim, queries, k;
	const char *dir, *faiss, *python, *simd;
} opts;

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / NS_PER_S;
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "filevec_bench: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* ---- data ------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

/* Gaussian components (Box-Muller), normalized: uniform directions. */
static void random_unit(uint64_t *s, float *v, long dim)
{
	double n2 = 0.0;

	for (long j = 0; j < dim; j += 2) {
		double u1 = ((double)(rng_next(s) >> 11) + 1.0) / 9007199254740993.0;
		double u2 = (double)(rng_next(s) >> 11) / 9007199254740992.0;
		double r = sqrt(-2.0 * log(u1));
		v[j] = (float)(r * cos(2.0 * M_PI * u2));
		if (j + 1 < dim)
			v[j + 1] = (float)(r * sin(2.0 * M_PI * u2));
	}
	for (long j = 0; j < dim; j++)
		n2 += (double)v[j] * v[j];
	for (long j = 0; j < dim; j++)
		v[j] = (float)(v[j] / sqrt(n2));
}

static void write_f32(const char *path, const float *v, size_t count)
{
	FILE *f = fopen(path, "wb");

	if (!f || fwrite(v, sizeof(float), count, f) != count || fclose(f) != 0)
		die("cannot write %s", path);
}

/* ---- memory bandwidth ------------------------------------------------- */

#if BENCH_X86
__attribute__((target("avx2"))) static float stream_sum_avx2(const float *p, size_t n)
{
	__m256 a = _mm256_setzero_ps(), b = a, c = a, d = a;
	size_t i = 0;
	float out[8], s = 0.0f;

	for (; i + 32 <= n; i += 32) {
		a = _mm256_add_ps(a, _mm256_loadu_ps(p + i));
		b = _mm256_add_ps(b, _mm256_loadu_ps(p + i + 8));
		c = _mm256_add_ps(c, _mm256_loadu_ps(p + i + 16));
		d = _mm256_add_ps(d, _mm256_loadu_ps(p + i + 24));
	}
	_mm256_storeu_ps(out, _mm256_add_ps(_mm256_add_ps(a, b), _mm256_add_ps(c, d)));
	for (int l = 0; l < 8; l++)
		s += out[l];
	for (; i < n; i++)
		s += p[i];
	return s;
}
#endif

static float stream_sum(const float *p, size_t n)
{
	float a[8] = { 0 }, s = 0.0f;
	size_t i = 0;

#if BENCH_X86
	if (__builtin_cpu_supports("avx2"))
		return stream_sum_avx2(p, n);
#endif
	for (; i + 8 <= n; i += 8)
		for (int l = 0; l < 8; l++)
			a[l] += p[i + l];
	for (int l = 0; l < 8; l++)
		s += a[l];
	for (; i < n; i++)
		s += p[i];
	return s;
}

/* Best single-thread read bandwidth (bytes/s) streaming over p. */
static double bandwidth(const float *p, size_t n)
{
	double best = 0.0;
	volatile float sink = 0.0f;

	for (int r = 0; r < BW_ROUNDS; r++) {
		double t0 = now_s(), dt;
		sink += stream_sum(p, n);
		dt = now_s() - t0;
		if ((double)n * sizeof(float) / dt > best)
			best = (double)n * sizeof(float) / dt;
	}
	(void)sink;
	return best;
}

/* ---- the store -------------------------------------------------------- */

typedef struct bench_store {
	config_node *cfg;
	loader_plugin *plugin;
	loader_instance *inst;
	const memd_vector_ops *ops;
	void *h;
} bench_store;

static void store_open(bench_store *s, const char *dir, const char *simd, char *search_buf)
{
	const char *search[MAX_SEARCH_DIRS + 1];
	char yaml[2 * PATH_MAX];
	memd_error err = { .struct_size = sizeof(err) };
	size_t n = 0;

	for (char *save = NULL, *d = strtok_r(search_buf, ":", &save); d && n < MAX_SEARCH_DIRS;
	     d = strtok_r(NULL, ":", &save))
		search[n++] = d;
	search[n] = NULL;
	snprintf(yaml, sizeof(yaml), "plugin: filevec\npath: \"%s/store\"\nsimd: %s\n", dir, simd);
	if (config_parse_string(yaml, strlen(yaml), "bench", &s->cfg, &err) < 0 ||
	    loader_open("filevec", search, &s->plugin, &err) < 0 ||
	    loader_instance_create(s->plugin, "index.vector", s->cfg, "plugin", NULL, &s->inst,
				   &err) < 0)
		die("%s", err.msg);
	s->ops = loader_vector_ops(s->plugin);
	s->h = loader_instance_handle(s->inst);
}

static void store_close(bench_store *s)
{
	loader_instance_destroy(s->inst);
	loader_close(s->plugin);
	config_free(s->cfg);
}

static void load(bench_store *s, const float *vecs, long n, long dim)
{
	memd_vector_record *recs = calloc(UPSERT_BATCH, sizeof(*recs));
	const memd_vector_record **ptrs = calloc(UPSERT_BATCH, sizeof(*ptrs));
	char (*ids)[ID_LEN] = calloc(UPSERT_BATCH, sizeof(*ids));
	char (*sess)[ID_LEN] = calloc(UPSERT_BATCH, sizeof(*sess));
	memd_error err = { .struct_size = sizeof(err) };

	if (!recs || !ptrs || !ids || !sess)
		die("%s", "out of memory");
	if (s->ops->prepare(s->h, NULL, (uint32_t)dim, &err) < 0)
		die("prepare: %s", err.msg);
	for (long b = 0; b < n; b += UPSERT_BATCH) {
		long m = n - b < UPSERT_BATCH ? n - b : UPSERT_BATCH;
		for (long i = 0; i < m; i++) {
			snprintf(ids[i], ID_LEN, "e%ld", b + i);
			snprintf(sess[i], ID_LEN, "s%ld", (b + i) % SESSIONS);
			recs[i] = (memd_vector_record){ .struct_size = sizeof(recs[i]),
							.dim = (uint32_t)dim, .app = "bench",
							.user = "u", .session = sess[i],
							.event_id = ids[i], .author = "user",
							.seq = b + i, .timestamp_us = b + i,
							.vector = vecs + (size_t)(b + i) * dim };
			ptrs[i] = &recs[i];
		}
		if (s->ops->upsert(s->h, NULL, ptrs, (uint32_t)m, &err) < 0)
			die("upsert: %s", err.msg);
	}
	free(recs);
	free(ptrs);
	free(ids);
	free(sess);
}

typedef struct topk {
	long *ids;
	long n;
} topk;

static int32_t keep_hit(void *ud, const memd_vector_hit *h)
{
	topk *t = ud;
	t->ids[t->n++] = atol(h->event_id + 1);
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* ---- FAISS ------------------------------------------------------------ */

/* Run the script; its line "faiss_ms_median X min Y recall Z" is parsed. */
static int run_faiss(const opts *o, double *ret_ms, double *ret_min, double *ret_recall)
{
	char cmd[4 * PATH_MAX], line[512];
	FILE *p;
	int found = 0, st;

	snprintf(cmd, sizeof(cmd), "'%s' '%s' --dir '%s' --n %ld --dim %ld --queries %ld --k %ld",
		 o->python, o->faiss, o->dir, o->n, o->dim, o->queries, o->k);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (fgets(line, sizeof(line), p)) {
		if (sscanf(line, "faiss_ms_median %lf min %lf recall %lf", ret_ms, ret_min,
			   ret_recall) == 3)
			found = 1;
		else
			fputs(line, stdout);
	}
	st = pclose(p);
	return found && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void parse_args(int argc, char **argv, opts *o)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v)
			die("%s needs a value", a);
		if (strcmp(a, "--n") == 0)
			o->n = atol(v);
		else if (strcmp(a, "--dim") == 0)
			o->dim = atol(v);
		else if (strcmp(a, "--queries") == 0)
			o->queries = atol(v);
		else if (strcmp(a, "--k") == 0)
			o->k = atol(v);
		else if (strcmp(a, "--dir") == 0)
			o->dir = v;
		else if (strcmp(a, "--faiss") == 0)
			o->faiss = v;
		else if (strcmp(a, "--python") == 0)
			o->python = v;
		else if (strcmp(a, "--simd") == 0)
			o->simd = v;
		else
			die("unknown option %s", a);
		i++;
	}
	if (o->n < 1 || o->dim < 1 || o->queries < 1 || o->k < 1)
		die("%s", "--n, --dim, --queries and --k must be positive");
}

int main(int argc, char **argv)
{
	opts o = { .n = DEFAULT_N, .dim = DEFAULT_DIM, .queries = DEFAULT_QUERIES,
		   .k = DEFAULT_K, .faiss = FILEVEC_FAISS_SCRIPT, .python = DEFAULT_PYTHON,
		   .simd = "auto" };
	char tmpl[PATH_MAX], path[2 * PATH_MAX], *search;
	const char *tmp = getenv("TMPDIR");
	float *vecs, *qs;
	double *ms, bw, t0, load_s, open_s, faiss_ms = 0.0, faiss_min = 0.0;
	double recall = 0.0, sum = 0.0;
	uint64_t rng = 12345;
	long *ids;
	int own_dir = 0, have_faiss;
	bench_store s;
	FILE *top;

	parse_args(argc, argv, &o);
	if (!getenv("MEMD_PLUGIN_PATH"))
		die("%s", "MEMD_PLUGIN_PATH must name the built plugins (build/plugins)");
	if (!o.dir) {
		snprintf(tmpl, sizeof(tmpl), "%s/memd-filevec-bench-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
		if (!mkdtemp(tmpl))
			die("mkdtemp: %s", strerror(errno));
		o.dir = tmpl;
		own_dir = 1;
	}
	vecs = malloc((size_t)o.n * o.dim * sizeof(float));
	qs = malloc((size_t)o.queries * o.dim * sizeof(float));
	ms = malloc((size_t)o.queries * sizeof(double));
	ids = malloc((size_t)o.k * sizeof(long));
	if (!vecs || !qs || !ms || !ids)
		die("%s", "out of memory");
	printf("filevec_bench: %ld vectors x %ld dims (%.1f MB float32), one user, %ld queries, "
	       "top-%ld, one thread\n", o.n, o.dim,
	       (double)o.n * o.dim * sizeof(float) / BYTES_PER_MB, o.queries, o.k);
	for (long i = 0; i < o.n; i++)
		random_unit(&rng, vecs + (size_t)i * o.dim, o.dim);
	for (long i = 0; i < o.queries; i++)
		random_unit(&rng, qs + (size_t)i * o.dim, o.dim);
	snprintf(path, sizeof(path), "%s/vectors.f32", o.dir);
	write_f32(path, vecs, (size_t)o.n * o.dim);
	snprintf(path, sizeof(path), "%s/queries.f32", o.dir);
	write_f32(path, qs, (size_t)o.queries * o.dim);

	search = strdup(getenv("MEMD_PLUGIN_PATH"));
	t0 = now_s();
	store_open(&s, o.dir, o.simd, search);
	load(&s, vecs, o.n, o.dim);
	load_s = now_s() - t0;
	store_close(&s);
	free(search);
	search = strdup(getenv("MEMD_PLUGIN_PATH"));
	t0 = now_s();
	store_open(&s, o.dir, o.simd, search);
	open_s = now_s() - t0;

	bw = bandwidth(vecs, (size_t)o.n * o.dim);

	snprintf(path, sizeof(path), "%s/filevec_top.txt", o.dir);
	top = fopen(path, "w");
	if (!top)
		die("cannot write %s", path);
	for (long i = -WARMUP_QUERIES; i < o.queries; i++) {
		const float *q = qs + (size_t)(i < 0 ? -i - 1 : i) * o.dim;
		memd_vector_filter f = { .struct_size = sizeof(f), .app = "bench", .user = "u" };
		topk t = { .ids = ids };
		memd_vector_hit_sink sink = { .struct_size = sizeof(sink), .userdata = &t,
					      .hit = keep_hit };
		memd_error err = { .struct_size = sizeof(err) };
		double q0 = now_s();
		if (s.ops->query(s.h, NULL, q, (uint32_t)o.dim, &f, (uint32_t)o.k, &sink, &err) < 0)
			die("query: %s", err.msg);
		if (i < 0)
			continue;
		ms[i] = (now_s() - q0) * MS_PER_S;
		sum += ms[i];
		for (long j = 0; j < t.n; j++)
			fprintf(top, "%ld%c", t.ids[j], j + 1 < t.n ? ' ' : '\n');
	}
	fclose(top);
	store_close(&s);
	free(search);
	qsort(ms, (size_t)o.queries, sizeof(*ms), cmp_double);

	have_faiss = run_faiss(&o, &faiss_ms, &faiss_min, &recall) == 0;

	printf("\n  load: %.2f s (%.0f vectors/s, fsync on); reopen (replay): %.2f s\n", load_s,
	       (double)o.n / load_s, open_s);
	printf("  memory bandwidth (one thread, streaming sum): %.1f GB/s\n", bw / BYTES_PER_GB);
	printf("\n  %-48s %8s %8s\n", "ms per query (one thread)", "median", "min");
	printf("  %-48s %8.2f %8.2f   (mean %.2f, p95 %.2f)\n", "filevec exact top-k",
	       ms[o.queries / 2], ms[0], sum / (double)o.queries,
	       ms[(long)(PERCENTILE_95 * (double)(o.queries - 1))]);
	if (have_faiss)
		printf("  %-48s %8.2f %8.2f   (filevec found %.1f%% of its top-%ld)\n",
		       "FAISS IndexFlatIP", faiss_ms, faiss_min, recall * 100.0, o.k);
	else
		printf("  %-48s %8s   (python3-faiss not available: %s %s)\n", "FAISS IndexFlatIP",
		       "-", o.python, o.faiss);
	printf("  %-48s %8.2f\n", "bandwidth bound, float32 scan",
	       (double)o.n * o.dim * sizeof(float) / bw * MS_PER_S);
	printf("  %-48s %8.2f\n", "bandwidth bound, int8 scan (what filevec reads)",
	       (double)o.n * ((o.dim + I8_PAD - 1) / I8_PAD * I8_PAD) / bw * MS_PER_S);
	if (own_dir)
		nftw(o.dir, rm_entry, NFTW_FDS, FTW_DEPTH | FTW_PHYS);
	free(vecs);
	free(qs);
	free(ms);
	free(ids);
	return 0;
}
