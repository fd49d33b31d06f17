/* SPDX-License-Identifier: MIT */
/*
 * filevec-crash: SIGKILL a writer at random points, many times; the store
 * always opens, no acknowledged vector is lost, no query returns garbage.
 *
 * Each round forks a child that opens the store the way the host does
 * (loader + config node) and runs batches on the round's own user: a batch
 * upserts B keys (new versions of earlier keys: replacements), removes
 * one session (a tombstone) or removes the batch's keys of one session
 * (remove_events: event tombstones), and the child writes "acked <i>" to a pipe
 * after batch i returned. The parent SIGKILLs it after a random number of
 * acks plus a random delay (or while it is still opening the store), then
 * opens the store itself and checks every key of the round against the
 * acknowledged batches (batch last+1 may be there in part or in whole: it
 * may have been written without its ack): each stored vector must be
 * exactly the version the batches say (a self-query scores 1 and every
 * hit's score is the inner product with that version), each acknowledged
 * one must be there, nothing else may be. Earlier rounds' users must be
 * unchanged: every round checks them all again.
 *
 * A SIGKILL never tears a single write() on Linux, but a power loss can
 * leave the unacknowledged write half there: in some rounds the parent
 * also appends garbage (random bytes, or the start of a record) to the
 * newest appendable segment before reopening, as such a loss would.
 *
 * Two workloads: upserts (fsync on, small batches, occasional compaction)
 * and compaction (a compact_ratio so low that nearly every batch compacts,
 * with longer random delays so kills land inside compactions; the test
 * counts the kills that left compaction files behind and requires some).
 * Set MEMD_CRASH_SEED to replay a run.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "fv_format.h"
#include "plugins/loader.h"
#include "vec_harness.h"

#define APP "crash"
#define ID_MAX 64
#define LINE_MAX_LEN 64
#define MAX_SEARCH_DIRS 16
#define FTW_FDS 8
#define MAX_BATCHES 1000000   /* the child runs until it is killed */
#define MAX_ROUNDS 60
#define EARLY_KILL_ONE_IN 6   /* rounds that kill while the child opens */
#define EARLY_KILL_MAX_US 30000
#define SCORE_EPS 1e-5
#define US_PER_S 1000000LL
#define NS_PER_US 1000
#define CHILD_OPEN_FAILED 2
#define CHILD_WRITE_FAILED 3
#define CHILD_PIPE_FAILED 4
#define ABSENT (-1)
#define TEAR_ONE_IN 3         /* rounds that also get a torn tail */
#define TEAR_MAX 3000         /* bytes of garbage */

typedef struct workload {
	const char *name;
	const char *config;       /* YAML after the plugin and path keys */
	uint32_t dim;
	int keys;                 /* K: keys k0..k(K-1) per round */
	int sessions;             /* key j is in session s(j % sessions) */
	int batch;                /* B: keys per upsert batch */
	int remove_every;         /* every n-th batch removes a session */
	int hide_every;           /* every n-th other batch removes events (remove_events) */
	int max_acks;             /* the kill comes after 0..max_acks acks */
	int jitter_max_us;        /* and then after up to this long */
	int min_rounds;
	double budget_s;          /* rounds stop after this, once min_rounds ran */
	int need_compaction_kills;
} workload;

static const workload upserts = {
	.name = "upserts",
	.config = "fsync: true\ncompact_min_bytes: 65536\n",
	.dim = 32,
	.keys = 64,
	.sessions = 4,
	.batch = 4,
	.remove_every = 7,
	.hide_every = 5,
	.max_acks = 30,
	.jitter_max_us = 4000,
	.min_rounds = 12,
	.budget_s = 7.0,
};

static const workload compaction = {
	.name = "compaction",
	.config = "fsync: false\ncompact_ratio: 0.02\ncompact_min_bytes: 0\n",
	.dim = 64,
	.keys = 400,
	.sessions = 5,
	.batch = 40,
	.remove_every = 5,
	.hide_every = 3,
	.max_acks = 12,
	.jitter_max_us = 40000,
	.min_rounds = 12,
	.budget_s = 7.0,
	.need_compaction_kills = 1,
};

static char tmp_dir[PATH_MAX];
static char store_path[PATH_MAX + sizeof("/store")];
static char *search_buf;
static const char *search_dirs[MAX_SEARCH_DIRS + 1];

typedef struct store {
	config_node *cfg;
	loader_plugin *plugin;
	loader_instance *inst;
	const memd_vector_ops *ops;
	void *h;
} store;

static void search_path_init(void)
{
	const char *env = getenv("MEMD_PLUGIN_PATH");
	size_t n = 0;

	cr_assert(env && env[0], "MEMD_PLUGIN_PATH must name the built plugins");
	search_buf = strdup(env);
	cr_assert(search_buf);
	for (char *save = NULL, *dir = strtok_r(search_buf, ":", &save);
	     dir && n < MAX_SEARCH_DIRS; dir = strtok_r(NULL, ":", &save))
		search_dirs[n++] = dir;
	search_dirs[n] = NULL;
}

/* Open the store like the host (and prepare its dimension). 0 or the
 * failing code (err says why). */
static int32_t store_open(const workload *w, store *s, memd_error *err)
{
	char yaml[2 * PATH_MAX];
	int32_t r;

	memset(s, 0, sizeof(*s));
	snprintf(yaml, sizeof(yaml), "plugin: filevec\npath: \"%s\"\n%s", store_path, w->config);
	r = config_parse_string(yaml, strlen(yaml), "filevec-crash", &s->cfg, err);
	if (r == 0)
		r = loader_open("filevec", search_dirs, &s->plugin, err);
	if (r == 0)
		r = loader_instance_create(s->plugin, "index.vector", s->cfg, "plugin", NULL, &s->inst,
					   err);
	if (r < 0)
		return r;
	s->ops = loader_vector_ops(s->plugin);
	s->h = loader_instance_handle(s->inst);
	return s->ops->prepare(s->h, NULL, w->dim, err);
}

static void store_close(store *s)
{
	loader_instance_destroy(s->inst);
	loader_close(s->plugin);
	config_free(s->cfg);
	memset(s, 0, sizeof(*s));
}

/* ---- the workload ----------------------------------------------------- */

static void user_of(char *buf, int round)
{
	snprintf(buf, ID_MAX, "round-%d", round);
}

static void session_of(char *buf, const workload *w, int key)
{
	snprintf(buf, ID_MAX, "s%d", key % w->sessions);
}

/* Version v of key j in round r: a deterministic unit vector. */
static void vector_of(const workload *w, int round, int key, int version, float *v)
{
	uint64_t seed = ((uint64_t)round * 1000003u + (uint64_t)key) * 2654435761u +
			(uint64_t)version * 40503u + 1;
	vec_random_unit(&seed, v, w->dim);
}

static int is_remove(const workload *w, int b)
{
	return b % w->remove_every == w->remove_every - 1;
}

static int removed_session(const workload *w, int b)
{
	return (b / w->remove_every) % w->sessions;
}

static int batch_key(const workload *w, int b, int t)
{
	return (b * w->batch + t) % w->keys;
}

/* A batch that removes events: the keys of its range in one session. */
static int is_hide(const workload *w, int b)
{
	return !is_remove(w, b) && w->hide_every && b % w->hide_every == w->hide_every - 1;
}

static int hidden_session(const workload *w, int b)
{
	return b % w->sessions;
}

/* Apply batch b to state (version per key, or ABSENT). */
static void apply(const workload *w, int b, int *state)
{
	if (is_remove(w, b)) {
		for (int j = 0; j < w->keys; j++)
			if (j % w->sessions == removed_session(w, b))
				state[j] = ABSENT;
		return;
	}
	if (is_hide(w, b)) {
		for (int t = 0; t < w->batch; t++)
			if (batch_key(w, b, t) % w->sessions == hidden_session(w, b))
				state[batch_key(w, b, t)] = ABSENT;
		return;
	}
	for (int t = 0; t < w->batch; t++)
		state[batch_key(w, b, t)] = b;
}

static int32_t run_batch(const workload *w, store *s, int round, int b, memd_error *err)
{
	char user[ID_MAX];
	int32_t r;

	user_of(user, round);
	if (is_remove(w, b)) {
		char session[ID_MAX];
		memd_vector_filter f = { .struct_size = sizeof(f), .app = APP, .user = user,
					 .session = session };
		snprintf(session, sizeof(session), "s%d", removed_session(w, b));
		return s->ops->remove(s->h, NULL, &f, err);
	}
	if (is_hide(w, b)) {
		char session[ID_MAX];
		char (*ids)[ID_MAX] = calloc((size_t)w->batch, sizeof(*ids));
		const char **ptrs = calloc((size_t)w->batch, sizeof(*ptrs));
		memd_scope sc = { .struct_size = sizeof(sc), .app = APP, .user = user,
				  .session = session };
		uint32_t n = 0;

		if (!ids || !ptrs)
			_exit(CHILD_WRITE_FAILED);
		snprintf(session, sizeof(session), "s%d", hidden_session(w, b));
		for (int t = 0; t < w->batch; t++) {
			int j = batch_key(w, b, t);
			if (j % w->sessions != hidden_session(w, b))
				continue;
			snprintf(ids[n], ID_MAX, "k%d", j);
			ptrs[n] = ids[n];
			n++;
		}
		r = s->ops->remove_events(s->h, NULL, &sc, ptrs, n, err);
		free(ids);
		free(ptrs);
		return r;
	}
	{
		float *vecs = malloc((size_t)w->batch * w->dim * sizeof(float));
		memd_vector_record *recs = calloc((size_t)w->batch, sizeof(*recs));
		const memd_vector_record **ptrs = calloc((size_t)w->batch, sizeof(*ptrs));
		char (*ids)[ID_MAX] = calloc((size_t)w->batch, sizeof(*ids));
		char (*sessions)[ID_MAX] = calloc((size_t)w->batch, sizeof(*sessions));

		if (!vecs || !recs || !ptrs || !ids || !sessions)
			_exit(CHILD_WRITE_FAILED);
		for (int t = 0; t < w->batch; t++) {
			int j = batch_key(w, b, t);
			float *v = vecs + (size_t)t * w->dim;
			vector_of(w, round, j, b, v);
			snprintf(ids[t], ID_MAX, "k%d", j);
			session_of(sessions[t], w, j);
			recs[t] = (memd_vector_record){ .struct_size = sizeof(recs[t]), .dim = w->dim,
							.app = APP, .user = user, .session = sessions[t],
							.event_id = ids[t], .author = b % 2 ? "odd" : "even",
							.seq = b, .timestamp_us = b, .vector = v };
			ptrs[t] = &recs[t];
		}
		r = s->ops->upsert(s->h, NULL, ptrs, (uint32_t)w->batch, err);
		free(vecs);
		free(recs);
		free(ptrs);
		free(ids);
		free(sessions);
	}
	return r;
}

/* The child: never returns. */
static void child_run(const workload *w, int round, int fd)
{
	memd_error err;
	store s;

	if (store_open(w, &s, &err) < 0)
		_exit(CHILD_OPEN_FAILED);
	if (dprintf(fd, "open\n") < 0)
		_exit(CHILD_PIPE_FAILED);
	for (int b = 0; b < MAX_BATCHES; b++) {
		if (run_batch(w, &s, round, b, &err) < 0)
			_exit(CHILD_WRITE_FAILED);
		if (dprintf(fd, "acked %d\n", b) < 0)
			_exit(CHILD_PIPE_FAILED);
	}
	_exit(0);
}

/* ---- checking --------------------------------------------------------- */

typedef struct seen {
	const workload *w;
	int round;
	const int *exp, *alt;     /* allowed versions per key */
	const float *q;
	int *found;               /* version found per key, ABSENT if none */
	char why[256];
	int bad;
} seen;

static int32_t check_hit(void *userdata, const memd_vector_hit *h)
{
	seen *sn = userdata;
	const workload *w = sn->w;
	char user[ID_MAX], session[ID_MAX];
	float v[256];
	int j, ver;

	if (sn->bad)
		return 0;
	user_of(user, sn->round);
	j = h->event_id[0] == 'k' ? atoi(h->event_id + 1) : -1;
	ver = (int)h->seq;
	if (strcmp(h->app, APP) != 0 || strcmp(h->user, user) != 0 || j < 0 || j >= w->keys) {
		snprintf(sn->why, sizeof(sn->why), "a hit that is not this round's: %s/%s/%s/%s",
			 h->app, h->user, h->session, h->event_id);
		sn->bad = 1;
		return 0;
	}
	session_of(session, w, j);
	if (strcmp(h->session, session) != 0 || (ver != sn->exp[j] && ver != sn->alt[j]) ||
	    h->timestamp_us != ver || !h->author ||
	    strcmp(h->author, ver % 2 ? "odd" : "even") != 0 || sn->found[j] != ABSENT) {
		snprintf(sn->why, sizeof(sn->why),
			 "key %d: session %s version %d author %s (acknowledged version %d, next %d%s)",
			 j, h->session, ver, h->author ? h->author : "-", sn->exp[j], sn->alt[j],
			 sn->found[j] != ABSENT ? ", returned twice" : "");
		sn->bad = 1;
		return 0;
	}
	vector_of(w, sn->round, j, ver, v);
	if (fabs(h->score - vec_dot(sn->q, v, w->dim)) > SCORE_EPS) {
		snprintf(sn->why, sizeof(sn->why), "key %d version %d: score %.7f, want %.7f", j, ver,
			 h->score, vec_dot(sn->q, v, w->dim));
		sn->bad = 1;
		return 0;
	}
	sn->found[j] = ver;
	return 0;
}

/* Check round's keys against the allowed states; fills found. */
static void check_round(const workload *w, store *s, int round, const int *exp, const int *alt,
			int *found)
{
	memd_vector_hit_sink sink = { .struct_size = sizeof(sink), .hit = check_hit };
	char user[ID_MAX];
	uint64_t qs = (uint64_t)round + 77;
	float q[256], v[256];
	seen sn = { .w = w, .round = round, .exp = exp, .alt = alt, .q = q, .found = found };
	memd_vector_filter f = { .struct_size = sizeof(f), .app = APP };
	memd_error err;

	user_of(user, round);
	f.user = user;
	for (int j = 0; j < w->keys; j++)
		found[j] = ABSENT;
	vec_random_unit(&qs, q, w->dim);
	sink.userdata = &sn;
	cr_assert_eq(s->ops->query(s->h, NULL, q, w->dim, &f, (uint32_t)w->keys * 2, &sink, &err),
		     0, "round %d: query: %s", round, err.msg);
	cr_assert(!sn.bad, "round %d: %s", round, sn.why);
	for (int j = 0; j < w->keys; j++) {
		cr_assert(found[j] != ABSENT || exp[j] == ABSENT || alt[j] == ABSENT,
			  "round %d: key %d (acknowledged version %d) is lost", round, j, exp[j]);
		if (found[j] == ABSENT)
			continue;
		/* The stored vector is exactly that version: it is its own best match. */
		vector_of(w, round, j, found[j], v);
		{
			int *tmp = calloc((size_t)w->keys, sizeof(int));
			seen self = { .w = w, .round = round, .exp = exp, .alt = alt, .q = v,
				      .found = tmp };
			memd_vector_hit_sink ss = { .struct_size = sizeof(ss), .userdata = &self,
						    .hit = check_hit };
			char session[ID_MAX];
			cr_assert_not_null(tmp);
			for (int i = 0; i < w->keys; i++)
				tmp[i] = ABSENT;
			session_of(session, w, j);
			f.session = session;
			cr_assert_eq(s->ops->query(s->h, NULL, v, w->dim, &f, 1, &ss, &err), 0, "%s",
				     err.msg);
			f.session = NULL;
			cr_assert(!self.bad, "round %d: %s", round, self.why);
			cr_assert_eq(tmp[j], found[j], "round %d: key %d is not its own best match",
				     round, j);
			free(tmp);
		}
	}
}

/* Kill evidence: files a compaction leaves when it is cut off. */
static int compaction_leftovers(void)
{
	DIR *d = opendir(store_path);
	struct dirent *de;
	int tmp = 0, compacted = 0, segs = 0;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);
		if (l > 4 && strcmp(de->d_name + l - 4, ".tmp") == 0)
			tmp++;
		if (l > 3 && strcmp(de->d_name + l - 3, ".fv") == 0) {
			char p[2 * PATH_MAX];
			unsigned char hdr[FV_SEG_HEADER_SIZE];
			fv_seg_header h;
			FILE *f;
			segs++;
			snprintf(p, sizeof(p), "%s/%s", store_path, de->d_name);
			f = fopen(p, "rb");
			if (f && fread(hdr, 1, sizeof(hdr), f) == sizeof(hdr) &&
			    fv_seg_header_decode(hdr, sizeof(hdr), &h) == FV_DECODE_OK &&
			    (h.flags & FV_SEG_COMPACTED))
				compacted++;
			if (f)
				fclose(f);
		}
	}
	closedir(d);
	/* A .tmp: cut off while writing; a compacted segment beside older
	 * ones: cut off before the old ones were deleted (the newest segment
	 * may legitimately follow a compacted one). */
	return tmp > 0 || (compacted > 0 && segs > 2) || (compacted > 1);
}

/* Append garbage to the newest segment if it takes appends (a compacted
 * one is complete before it is renamed into place: it cannot be torn).
 * Returns 1 if it did. */
static int tear_tail(unsigned *rng)
{
	DIR *d = opendir(store_path);
	struct dirent *de;
	char newest[2 * ID_MAX] = "", p[2 * PATH_MAX];
	unsigned char hdr[FV_SEG_HEADER_SIZE], junk[TEAR_MAX];
	fv_seg_header h;
	size_t n = 1 + rand_r(rng) % TEAR_MAX;
	FILE *f;
	int ok;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);
		if (l > 3 && l < sizeof(newest) && strcmp(de->d_name + l - 3, ".fv") == 0 &&
		    strcmp(de->d_name, newest) > 0)
			memcpy(newest, de->d_name, l + 1);
	}
	closedir(d);
	if (!newest[0])
		return 0;
	snprintf(p, sizeof(p), "%s/%s", store_path, newest);
	f = fopen(p, "r+b");
	cr_assert_not_null(f, "open %s", p);
	ok = fread(hdr, 1, sizeof(hdr), f) == sizeof(hdr) &&
	     fv_seg_header_decode(hdr, sizeof(hdr), &h) == FV_DECODE_OK &&
	     !(h.flags & FV_SEG_COMPACTED);
	if (ok) {
		for (size_t i = 0; i < n; i++)
			junk[i] = (unsigned char)rand_r(rng);
		if (rand_r(rng) % 2 && n >= 12) {
			/* The start of a record: its magic and a plausible length. */
			uint32_t magic = FV_REC_MAGIC, len = (uint32_t)(n - 8);
			memcpy(junk, &magic, sizeof(magic));
			memcpy(junk + 8, &len, sizeof(len));
		}
		cr_assert_eq(fseek(f, 0, SEEK_END), 0);
		cr_assert_eq(fwrite(junk, 1, n, f), n);
	}
	fclose(f);
	return ok;
}

/* Read acks until the child is dead; kill it after kill_after acks
 * (kill_after < 0: while it opens). Returns the last acked batch or -1. */
static int run_child_and_kill(const workload *w, FILE *in, pid_t pid, int kill_after,
			      unsigned *rng)
{
	char line[LINE_MAX_LEN];
	int acks = 0, last = -1, killed = 0, opened = 0;

	if (kill_after < 0) {
		usleep(rand_r(rng) % EARLY_KILL_MAX_US);
		kill(pid, SIGKILL);
		killed = 1;
	}
	while (fgets(line, sizeof(line), in)) {
		int i;
		if (strcmp(line, "open\n") == 0) {
			opened = 1;
		} else if (sscanf(line, "acked %d", &i) == 1) {
			cr_assert_eq(i, last + 1, "acks out of order");
			last = i;
			acks++;
		}
		if (!killed && opened && acks >= kill_after) {
			usleep(rand_r(rng) % (unsigned)w->jitter_max_us);
			kill(pid, SIGKILL);
			killed = 1;
		}
	}
	return last;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void cleanup(void)
{
	if (tmp_dir[0])
		nftw(tmp_dir, remove_entry, FTW_FDS, FTW_DEPTH | FTW_PHYS);
	tmp_dir[0] = '\0';
	free(search_buf);
	search_buf = NULL;
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / (NS_PER_US * (double)US_PER_S);
}

static void run(const workload *w)
{
	const char *seed_env = getenv("MEMD_CRASH_SEED");
	unsigned seed = seed_env ? (unsigned)strtoul(seed_env, NULL, 10)
				 : (unsigned)time(NULL) ^ (unsigned)getpid();
	unsigned rng = seed;
	const char *tmp = getenv("TMPDIR");
	int (*observed)[1024] = calloc(MAX_ROUNDS, sizeof(*observed));
	int *exp = calloc((size_t)w->keys, sizeof(int)), *alt = calloc((size_t)w->keys, sizeof(int));
	int rounds = 0, early = 0, acked = 0, mid_compaction = 0, torn = 0;
	double t0 = now_s();

	cr_assert(observed && exp && alt && w->keys <= 1024);
	cr_log_info("filevec-crash %s: MEMD_CRASH_SEED=%u", w->name, seed);
	search_path_init();
	snprintf(tmp_dir, sizeof(tmp_dir), "%s/memd-filevec-crash-XXXXXX",
		 tmp && tmp[0] ? tmp : "/tmp");
	cr_assert(mkdtemp(tmp_dir), "mkdtemp: %s", strerror(errno));
	snprintf(store_path, sizeof(store_path), "%s/store", tmp_dir);

	for (int round = 0; round < MAX_ROUNDS; round++) {
		int fds[2], status, last;
		int kill_after = rand_r(&rng) % EARLY_KILL_ONE_IN == 0
					 ? -1 : (int)(rand_r(&rng) % (unsigned)(w->max_acks + 1));
		FILE *in;
		pid_t pid;
		store s;
		memd_error err;

		if (round >= w->min_rounds && now_s() - t0 > w->budget_s)
			break;
		cr_assert_eq(pipe(fds), 0);
		pid = fork();
		cr_assert(pid >= 0, "fork: %s", strerror(errno));
		if (pid == 0) {
			close(fds[0]);
			child_run(w, round, fds[1]);
		}
		close(fds[1]);
		in = fdopen(fds[0], "r");
		cr_assert(in);
		last = run_child_and_kill(w, in, pid, kill_after, &rng);
		fclose(in);
		cr_assert_eq(waitpid(pid, &status, 0), pid);
		cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
			  "round %d: the child was not killed but exited with %d", round,
			  WIFEXITED(status) ? WEXITSTATUS(status) : -1);
		rounds++;
		early += kill_after < 0;
		acked += last + 1;
		mid_compaction += compaction_leftovers();
		if (rand_r(&rng) % TEAR_ONE_IN == 0)
			torn += tear_tail(&rng);

		for (int j = 0; j < w->keys; j++)
			exp[j] = ABSENT;
		for (int b = 0; b <= last; b++)
			apply(w, b, exp);
		memcpy(alt, exp, (size_t)w->keys * sizeof(int));
		apply(w, last + 1, alt);

		cr_assert_eq(store_open(w, &s, &err), 0, "round %d: open after SIGKILL: %s", round,
			     err.msg);
		check_round(w, &s, round, exp, alt, observed[round]);
		/* Earlier rounds: exactly as they were found. */
		for (int r = 0; r < round; r++) {
			int found[1024];
			check_round(w, &s, r, observed[r], observed[r], found);
		}
		store_close(&s);
	}
	cr_log_info("filevec-crash %s: %d rounds in %.1f s, %d killed while opening, %d "
		    "acknowledged batches, %d kills cut a compaction short, %d torn tails",
		    w->name, rounds, now_s() - t0, early, acked, mid_compaction, torn);
	cr_assert_gt(torn, 0, "no round tore a tail in %d rounds", rounds);
	if (w->need_compaction_kills)
		cr_assert_gt(mid_compaction, 0, "no kill landed inside a compaction in %d rounds",
			     rounds);
	free(observed);
	free(exp);
	free(alt);
}

Test(filevec_crash, acknowledged_upserts_survive_sigkill, .fini = cleanup, .timeout = 120)
{
	run(&upserts);
}

Test(filevec_crash, compaction_survives_sigkill, .fini = cleanup, .timeout = 120)
{
	run(&compaction);
}
