/* SPDX-License-Identifier: MIT */
/*
 * sqlite-crash: an acknowledged append survives the process being killed,
 * and no append is ever half there.
 *
 * Each round forks a child that opens the sqlite store the way the host
 * does (loader + config node) and runs 1..APPENDERS_MAX appender threads
 * at once (so their appends share group commits), each appending batches
 * (several events and a state delta each) to a session of its own and
 * writing "acked t i" to a pipe after its append i returned. The parent
 * SIGKILLs the child at a random point (sometimes before the store is even
 * open), reopens the store and checks, for every appender, that every
 * acknowledged batch is fully there (events, gapless seqs, state delta,
 * version, title, feed) and that nothing of any other batch is (at most
 * one batch per appender may have committed without its ack being sent).
 *
 * The lanes round does the same with lane writes: a child moves one lane
 * on write after write, each one transaction that creates the next
 * session, ends the current one, counts, adds usage and records a
 * FINALIZE in the feed; after the kill, the lane, the sessions, the
 * usage and the feed all say the same number of writes happened, at
 * least every acknowledged one and at most one more.
 *
 * Set MEMD_CRASH_SEED to replay a run.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <errno.h>
#include <ftw.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "plugins/loader.h"

#define ROUNDS 30
#define APPENDERS_MAX 4          /* round r runs 1 + r % APPENDERS_MAX appenders */
#define EVENTS_PER_BATCH 4
#define MAX_BATCHES 100000       /* the child appends until it is killed */
#define MAX_ACKS_BEFORE_KILL 24  /* per appender: the kill comes after 0..this many */
#define EARLY_KILL_ONE_IN 6      /* rounds that kill while the child opens */
#define EARLY_KILL_MAX_US 20000
#define KILL_JITTER_MAX_US 3000  /* after the chosen ack: lands mid-append */
#define CHILD_OPEN_FAILED 2
#define CHILD_WRITE_FAILED 3
#define CHILD_PIPE_FAILED 4
#define CHILD_THREAD_FAILED 5
#define ID_MAX 64
#define LINE_MAX_LEN 64
#define MAX_SEARCH_DIRS 16
#define FTW_FDS 8

#define APP "crash"
#define USER "u"

typedef struct store {
	config_node *cfg;
	loader_plugin *plugin;
	loader_instance *inst;
	const memd_store_ops *ops;
	void *h;
} store;

static char tmp_dir[PATH_MAX];
static char db_path[PATH_MAX + sizeof("/db/memd.db")];

/* MEMD_PLUGIN_PATH split on ':' into a NULL-terminated array. */
static char *search_buf;
static const char *search_dirs[MAX_SEARCH_DIRS + 1];

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

/* Open the store like the host: parse a config node, load the plugin,
 * create an instance. Returns 0 or the failing code (err says why). */
static int32_t store_open(store *s, memd_error *err)
{
	char yaml[PATH_MAX + LINE_MAX_LEN];
	int32_t r;

	memset(s, 0, sizeof(*s));
	snprintf(yaml, sizeof(yaml), "plugin: sqlite\npath: \"%s\"\nsynchronous: full\n", db_path);
	r = config_parse_string(yaml, strlen(yaml), "sqlite-crash", &s->cfg, err);
	if (r == 0)
		r = loader_open("sqlite", search_dirs, &s->plugin, err);
	if (r == 0)
		r = loader_instance_create(s->plugin, "stores.crash", s->cfg, "plugin", NULL, &s->inst,
					   err);
	if (r < 0)
		return r;
	s->ops = loader_store_ops(s->plugin);
	s->h = loader_instance_handle(s->inst);
	return 0;
}

static void store_close(store *s)
{
	loader_instance_destroy(s->inst);
	loader_close(s->plugin);
	config_free(s->cfg);
	memset(s, 0, sizeof(*s));
}

static int appenders_of(int round)
{
	return 1 + round % APPENDERS_MAX;
}

/* Appender t of round's session. */
static memd_scope round_scope(char *sid, int round, int t)
{
	snprintf(sid, ID_MAX, "round-%d-t%d", round, t);
	return (memd_scope){ .struct_size = sizeof(memd_scope), .app = APP, .user = USER,
			     .session = sid };
}

static void batch_event_id(char *buf, int round, int t, int batch, int k)
{
	snprintf(buf, ID_MAX, "r%d-t%d-b%d-e%d", round, t, batch, k);
}

/* Append batch i of appender t of round: EVENTS_PER_BATCH events plus a
 * delta that sets "batch", a key of its own ("b<i>"), a user key of the
 * appender's, and deletes the key of batch i-2 ("gone<i-2>" set by that
 * batch). */
static int32_t append_batch(store *s, int round, int t, int i, int64_t *seqs,
			    int64_t *ret_version, memd_error *err)
{
	char sid[ID_MAX], ids[EVENTS_PER_BATCH][ID_MAX], texts[EVENTS_PER_BATCH][ID_MAX];
	char delta[4 * LINE_MAX_LEN], title[ID_MAX];
	memd_event evs[EVENTS_PER_BATCH];
	const memd_event *ptrs[EVENTS_PER_BATCH];
	memd_scope scope = round_scope(sid, round, t);
	memd_append_result res = { .struct_size = sizeof(res), .seqs = seqs };
	memd_append a;
	int32_t r;

	for (int k = 0; k < EVENTS_PER_BATCH; k++) {
		batch_event_id(ids[k], round, t, i, k);
		snprintf(texts[k], ID_MAX, "batch %d event %d", i, k);
		evs[k] = (memd_event){ .struct_size = sizeof(memd_event), .id = ids[k],
				       .author = k % 2 ? "agent" : "someone",
				       .role = k % 2 ? "assistant" : "user",
				       .content_json = "{\"parts\":[{\"text\":\"x\"}]}",
				       .text = texts[k], .tokens = k + 1,
				       .timestamp_us = (int64_t)i * EVENTS_PER_BATCH + k + 1 };
		ptrs[k] = &evs[k];
	}
	if (i >= 2)
		snprintf(delta, sizeof(delta),
			 "{\"batch\":%d,\"b%d\":\"x\",\"gone%d\":1,\"gone%d\":null,"
			 "\"user:last%d-%d\":%d}",
			 i, i, i, i - 2, round, t, i);
	else
		snprintf(delta, sizeof(delta),
			 "{\"batch\":%d,\"b%d\":\"x\",\"gone%d\":1,\"user:last%d-%d\":%d}", i, i,
			 i, round, t, i);
	snprintf(title, sizeof(title), "round %d-%d", round, t);
	a = (memd_append){ .struct_size = sizeof(a), .flags = MEMD_APPEND_EXPECT_VERSION,
			   .expected_version = i, .events = ptrs, .n_events = EVENTS_PER_BATCH,
			   .state_delta_json = delta, .title_if_unset = title,
			   .now_us = (int64_t)i + 1 };
	r = s->ops->append(s->h, NULL, &scope, &a, &res, err);
	if (r == 0)
		*ret_version = res.version;
	return r;
}

static int32_t ignore_session(void *userdata, const memd_session *s)
{
	(void)userdata;
	(void)s;
	return 0;
}

/* One appender thread of the child. */
typedef struct appender {
	store *s;
	int round, t, fd;
} appender;

/* Appends until the child is killed; any failure ends the child. */
static void *appender_run(void *p)
{
	appender *ap = p;
	int64_t seqs[EVENTS_PER_BATCH], version;
	char line[LINE_MAX_LEN];
	memd_error err;

	for (int i = 0; i < MAX_BATCHES; i++) {
		int n;
		if (append_batch(ap->s, ap->round, ap->t, i, seqs, &version, &err) < 0 ||
		    version != i + 1)
			_exit(CHILD_WRITE_FAILED);
		/* One write() of a short line: atomic on a pipe, so the
		 * appenders' lines never mix. */
		n = snprintf(line, sizeof(line), "acked %d %d\n", ap->t, i);
		if (write(ap->fd, line, (size_t)n) != n)
			_exit(CHILD_PIPE_FAILED);
	}
	return NULL;
}

/* The child: never returns. */
static void child_run(int round, int fd)
{
	memd_session_sink sink = { .struct_size = sizeof(sink), .session = ignore_session };
	pthread_t tid[APPENDERS_MAX];
	appender aps[APPENDERS_MAX];
	int n = appenders_of(round);
	memd_error err;
	store s;

	if (store_open(&s, &err) < 0)
		_exit(CHILD_OPEN_FAILED);
	for (int t = 0; t < n; t++) {
		char sid[ID_MAX];
		memd_session sess = { .struct_size = sizeof(sess), .app = APP, .user = USER,
				      .id = sid, .created_us = 1, .updated_us = 1 };
		round_scope(sid, round, t);
		if (s.ops->session_create(s.h, NULL, &sess, NULL, &sink, &err) < 0)
			_exit(CHILD_WRITE_FAILED);
	}
	if (dprintf(fd, "created\n") < 0)
		_exit(CHILD_PIPE_FAILED);
	for (int t = 0; t < n; t++) {
		aps[t] = (appender){ .s = &s, .round = round, .t = t, .fd = fd };
		if (pthread_create(&tid[t], NULL, appender_run, &aps[t]) != 0)
			_exit(CHILD_THREAD_FAILED);
	}
	for (int t = 0; t < n; t++)
		pthread_join(tid[t], NULL);
	_exit(0);
}

/* ---- checking what survived ---------------------------------------- */

typedef struct session_seen {
	int found;
	int64_t version, last_seq;
	char title[ID_MAX];
	int has_title;
} session_seen;

static int32_t keep_session(void *userdata, const memd_session *s)
{
	session_seen *seen = userdata;
	seen->found = 1;
	seen->version = s->version;
	seen->last_seq = s->last_seq;
	seen->has_title = s->title != NULL;
	if (s->title)
		snprintf(seen->title, sizeof(seen->title), "%s", s->title);
	return 0;
}

typedef struct events_seen {
	int round, t;
	int64_t n;
	int bad;
	char why[2 * ID_MAX + LINE_MAX_LEN];
} events_seen;

static int32_t check_event(void *userdata, const memd_event *e)
{
	events_seen *seen = userdata;
	int64_t k = seen->n;
	char want[ID_MAX], text[ID_MAX];

	seen->n++;
	if (seen->bad)
		return 0;
	batch_event_id(want, seen->round, seen->t, (int)(k / EVENTS_PER_BATCH),
		       (int)(k % EVENTS_PER_BATCH));
	snprintf(text, sizeof(text), "batch %d event %d", (int)(k / EVENTS_PER_BATCH),
		 (int)(k % EVENTS_PER_BATCH));
	if (e->seq != k + 1 || strcmp(e->id, want) != 0 || !e->text || strcmp(e->text, text) != 0) {
		seen->bad = 1;
		snprintf(seen->why, sizeof(seen->why), "event #%lld is seq %lld id %s, want seq %lld id %s",
			 (long long)k, (long long)e->seq, e->id, (long long)k + 1, want);
	}
	return 0;
}

static int32_t keep_text(void *userdata, const char *text, size_t len)
{
	json_error_t jerr;
	*(json_t **)userdata = json_loadb(text, len, 0, &jerr);
	return 0;
}

typedef struct feed_seen {
	const char *session;
	int64_t n, last_pos;
	int backwards;
} feed_seen;

static int32_t count_feed(void *userdata, const memd_feed_record *r)
{
	feed_seen *f = userdata;
	if (r->position <= f->last_pos)
		f->backwards = 1;
	f->last_pos = r->position;
	if (r->kind == MEMD_FEED_EVENT && r->session && strcmp(r->session, f->session) == 0)
		f->n++;
	return 0;
}

static void check_state(store *s, const memd_scope *scope, int round, int t, int64_t batches)
{
	memd_text_sink sink = { .struct_size = sizeof(sink), .text = keep_text };
	json_t *state = NULL;
	char key[ID_MAX];
	memd_error err;

	sink.userdata = &state;
	cr_assert_eq(s->ops->state_get(s->h, NULL, scope, &sink, &err), 0, "state_get: %s", err.msg);
	cr_assert(json_is_object(state), "state is not a JSON object");
	/* user: keys are shared by the user's sessions: only this
	 * appender's key says anything about its session. */
	snprintf(key, sizeof(key), "user:last%d-%d", round, t);
	if (batches == 0) {
		cr_assert(!json_object_get(state, "batch") && !json_object_get(state, key),
			  "round %d: state of a batch that was never acknowledged or stored", round);
	} else {
		cr_assert_eq(json_integer_value(json_object_get(state, "batch")), batches - 1,
			     "round %d: state batch is not the last batch %lld", round,
			     (long long)batches - 1);
		cr_assert_eq(json_integer_value(json_object_get(state, key)), batches - 1,
			     "round %d: %s is not the last batch", round, key);
	}
	for (int64_t i = 0; i < batches + 2; i++) {
		int want_b = i < batches;
		int want_gone = i < batches && i >= batches - 2;
		snprintf(key, sizeof(key), "b%lld", (long long)i);
		cr_assert_eq(json_object_get(state, key) != NULL, want_b,
			     "round %d, %lld batches: key %s %s", round, (long long)batches, key,
			     want_b ? "missing" : "present");
		snprintf(key, sizeof(key), "gone%lld", (long long)i);
		cr_assert_eq(json_object_get(state, key) != NULL, want_gone,
			     "round %d, %lld batches: key %s %s", round, (long long)batches, key,
			     want_gone ? "missing" : "present (delete lost)");
	}
	json_decref(state);
}

/* Everything appender t acknowledged is there, nothing half-written is. */
static void check_session(store *s, int round, int t, int created, int last_acked)
{
	memd_session_sink ssink = { .struct_size = sizeof(ssink), .session = keep_session };
	memd_event_query q = { .struct_size = sizeof(q) };
	memd_event_sink esink = { .struct_size = sizeof(esink), .event = check_event };
	memd_feed_sink fsink = { .struct_size = sizeof(fsink), .record = count_feed };
	session_seen seen = { 0 };
	events_seen evs = { .round = round, .t = t };
	feed_seen feed = { 0 };
	char sid[ID_MAX], title[ID_MAX];
	memd_scope scope = round_scope(sid, round, t);
	int64_t batches;
	memd_error err;
	int32_t r;

	ssink.userdata = &seen;
	r = s->ops->session_get(s->h, NULL, &scope, &ssink, &err);
	if (r == MEMD_ENOTFOUND) {
		cr_assert(!created, "%s: acknowledged session is gone", sid);
		return;
	}
	cr_assert_eq(r, 0, "session_get: %s", err.msg);
	batches = seen.version;
	/* Every acked batch, plus at most one whose ack the kill cut off. */
	cr_assert(batches >= last_acked + 1 && batches <= last_acked + 2,
		  "%s: %lld batches stored, %d acknowledged", sid, (long long)batches,
		  last_acked + 1);
	cr_assert_eq(seen.last_seq, batches * EVENTS_PER_BATCH,
		     "%s: last_seq %lld after %lld batches of %d", sid, (long long)seen.last_seq,
		     (long long)batches, EVENTS_PER_BATCH);
	snprintf(title, sizeof(title), "round %d-%d", round, t);
	if (batches)
		cr_assert(seen.has_title && strcmp(seen.title, title) == 0,
			  "%s: title not set by the first batch", sid);
	else
		cr_assert(!seen.has_title, "%s: title without a batch", sid);

	esink.userdata = &evs;
	cr_assert_eq(s->ops->events_load(s->h, NULL, &scope, &q, &esink, &err), 0,
		     "events_load: %s", err.msg);
	cr_assert(!evs.bad, "%s: %s", sid, evs.why);
	cr_assert_eq(evs.n, batches * EVENTS_PER_BATCH,
		     "%s: %lld events for %lld batches (a partial batch?)", sid, (long long)evs.n,
		     (long long)batches);

	check_state(s, &scope, round, t, batches);

	feed.session = sid;
	fsink.userdata = &feed;
	cr_assert_eq(s->ops->feed_read(s->h, NULL, 0, 0, &fsink, &err), 0, "feed_read: %s", err.msg);
	cr_assert(!feed.backwards, "feed positions are not increasing");
	cr_assert_eq(feed.n, evs.n, "%s: feed has %lld of %lld events", sid, (long long)feed.n,
		     (long long)evs.n);

	/* The store takes writes again where the child left off. */
	{
		int64_t seqs[EVENTS_PER_BATCH], version = 0;
		cr_assert_eq(append_batch(s, round, t, (int)batches, seqs, &version, &err), 0,
			     "append after the crash: %s", err.msg);
		cr_assert_eq(version, batches + 1);
		cr_assert_eq(seqs[0], batches * EVENTS_PER_BATCH + 1);
	}
}

/* Read the child's acks until it is dead: last[t] gets appender t's last
 * acked batch (-1 for none), *created whether the sessions were
 * acknowledged. Kills the child after kill_after acks in all (kill_after
 * < 0: after a random moment, while it opens). Returns the acks seen. */
static int run_child_and_kill(FILE *in, pid_t pid, int kill_after, unsigned *rng, int *created,
			      int *last)
{
	char line[LINE_MAX_LEN];
	int acks = 0, killed = 0;

	for (int t = 0; t < APPENDERS_MAX; t++)
		last[t] = -1;
	if (kill_after < 0) {
		usleep(rand_r(rng) % EARLY_KILL_MAX_US);
		kill(pid, SIGKILL);
		killed = 1;
	}
	while (fgets(line, sizeof(line), in)) {
		int t, i;
		if (strcmp(line, "created\n") == 0) {
			*created = 1;
		} else if (sscanf(line, "acked %d %d", &t, &i) == 2) {
			cr_assert(t >= 0 && t < APPENDERS_MAX, "ack from appender %d", t);
			cr_assert_eq(i, last[t] + 1, "appender %d: acks out of order", t);
			last[t] = i;
			acks++;
		} else {
			cr_assert_fail("the child wrote '%s'", line);
		}
		if (!killed && *created && acks >= kill_after) {
			usleep(rand_r(rng) % KILL_JITTER_MAX_US);
			kill(pid, SIGKILL);
			killed = 1;
		}
	}
	return acks;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* Runs after the test, passed or failed: leave no files behind. */
static void cleanup(void)
{
	if (tmp_dir[0])
		nftw(tmp_dir, remove_entry, FTW_FDS, FTW_DEPTH | FTW_PHYS);
	tmp_dir[0] = '\0';
	free(search_buf);
	search_buf = NULL;
}

Test(sqlite_crash, acknowledged_batches_survive_sigkill, .fini = cleanup, .timeout = 120)
{
	const char *seed_env = getenv("MEMD_CRASH_SEED");
	unsigned seed = seed_env ? (unsigned)strtoul(seed_env, NULL, 10)
				 : (unsigned)time(NULL) ^ (unsigned)getpid();
	unsigned rng = seed;
	const char *tmp = getenv("TMPDIR");
	int early_kills = 0, total_acked = 0;

	cr_log_info("sqlite-crash: MEMD_CRASH_SEED=%u", seed);
	search_path_init();
	snprintf(tmp_dir, sizeof(tmp_dir), "%s/memd-sqlite-crash-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
	cr_assert(mkdtemp(tmp_dir), "mkdtemp: %s", strerror(errno));
	snprintf(db_path, sizeof(db_path), "%s/db/memd.db", tmp_dir);

	for (int round = 0; round < ROUNDS; round++) {
		int fds[2], status, created = 0, last[APPENDERS_MAX];
		int n = appenders_of(round);
		int kill_after = rand_r(&rng) % EARLY_KILL_ONE_IN == 0
					 ? -1 : (int)(rand_r(&rng) % (MAX_ACKS_BEFORE_KILL * n + 1));
		FILE *in;
		pid_t pid;
		store s;
		memd_error err;

		cr_assert_eq(pipe(fds), 0);
		pid = fork();
		cr_assert(pid >= 0, "fork: %s", strerror(errno));
		if (pid == 0) {
			close(fds[0]);
			child_run(round, fds[1]);
		}
		close(fds[1]);
		in = fdopen(fds[0], "r");
		cr_assert(in);
		total_acked += run_child_and_kill(in, pid, kill_after, &rng, &created, last);
		fclose(in);
		cr_assert_eq(waitpid(pid, &status, 0), pid);
		cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
			  "round %d: the child was not killed but exited with %d (%s)", round,
			  WIFEXITED(status) ? WEXITSTATUS(status) : -1,
			  WIFEXITED(status) && WEXITSTATUS(status) == CHILD_OPEN_FAILED
				  ? "could not open the store"
				  : "a write failed");
		early_kills += kill_after < 0;

		cr_assert_eq(store_open(&s, &err), 0, "round %d: reopen after SIGKILL: %s", round,
			     err.msg);
		for (int t = 0; t < n; t++)
			check_session(&s, round, t, created, last[t]);
		store_close(&s);
	}
	cr_log_info("sqlite-crash: %d rounds (1..%d appenders), %d killed while opening, %d "
		    "acknowledged batches",
		    ROUNDS, APPENDERS_MAX, early_kills, total_acked);
}

/* ---- lanes ------------------------------------------------------------- */

#define LANE_ROUNDS 12
#define LANE_MAX_ACKS 40         /* the kill comes after 0..this many */
#define LANE_APP "crash-lanes"
#define LANE_KEY "telegram:dm:1"
#define LANE_T0 1000             /* write k runs at LANE_T0 + k */

static void lane_session_id(char *buf, int k)
{
	snprintf(buf, ID_MAX, "s%d", k);
}

static void lane_user(char *buf, int round)
{
	snprintf(buf, ID_MAX, "u%d", round);
}

static int32_t ignore_lane(void *userdata, const memd_lane *l)
{
	(void)userdata;
	(void)l;
	return 0;
}

/* Write k (0: the create) of round's lane: session s<k+1> is created and
 * becomes the lane's, s<k> is ended, interruptions = k, one input token
 * is added, a FINALIZE record written; all in one transaction. */
static int32_t lane_step(store *s, const char *user, int k, memd_error *err)
{
	char next[ID_MAX], cur[ID_MAX];
	memd_session ns = { .struct_size = sizeof(ns), .app = LANE_APP, .user = user,
			    .metadata_json = "{}", .created_us = LANE_T0 + k,
			    .updated_us = LANE_T0 + k };
	memd_lane l = { .struct_size = sizeof(l), .app = LANE_APP, .user = user, .key = LANE_KEY,
			.updated_us = LANE_T0 + k, .interruptions = (uint32_t)k };
	memd_usage u = { .struct_size = sizeof(u), .input_tokens = 1 };
	memd_lane_write w = { .struct_size = sizeof(w), .lane = &l, .create_session = &ns,
			      .now_us = LANE_T0 + k };
	memd_lane_sink sink = { .struct_size = sizeof(sink), .lane = ignore_lane };

	lane_session_id(next, k + 1);
	lane_session_id(cur, k);
	ns.id = next;
	l.session = next;
	if (k == 0) {
		w.flags = MEMD_LW_CREATE;
	} else {
		w.expected_version = k;
		w.end_session = cur;
		w.end_reason = "idle";
		w.usage = &u;
		w.flags = MEMD_LW_FEED_FINALIZE;
	}
	return s->ops->lane_write(s->h, NULL, &w, &sink, err);
}

static _Noreturn void lane_child_run(int round, int fd)
{
	char user[ID_MAX];
	memd_error err = { 0 };
	store s;
	FILE *out = fdopen(fd, "w");

	if (!out)
		_exit(CHILD_PIPE_FAILED);
	setvbuf(out, NULL, _IOLBF, 0);
	lane_user(user, round);
	if (store_open(&s, &err) < 0)
		_exit(CHILD_OPEN_FAILED);
	for (int k = 0; k < MAX_BATCHES; k++) {
		if (lane_step(&s, user, k, &err) < 0)
			_exit(CHILD_WRITE_FAILED);
		if (fprintf(out, "acked %d\n", k) < 0)
			_exit(CHILD_PIPE_FAILED);
	}
	_exit(0);
}

typedef struct lane_seen {
	int64_t version, input_tokens;
	uint32_t interruptions;
	char session[ID_MAX];
} lane_seen;

static int32_t keep_lane(void *userdata, const memd_lane *l)
{
	lane_seen *seen = userdata;

	seen->version = l->version;
	seen->input_tokens = l->input_tokens;
	seen->interruptions = l->interruptions;
	snprintf(seen->session, sizeof(seen->session), "%s", l->session);
	return 0;
}

typedef struct lane_session_seen {
	int64_t ended_us, input_tokens;
} lane_session_seen;

static int32_t keep_lane_session(void *userdata, const memd_session *s)
{
	lane_session_seen *seen = userdata;

	seen->ended_us = s->ended_us;
	seen->input_tokens = s->input_tokens;
	return 0;
}

typedef struct finalize_count {
	const char *user;
	int64_t n;
} finalize_count;

static int32_t count_finalize(void *userdata, const memd_feed_record *r)
{
	finalize_count *f = userdata;

	if (r->kind == MEMD_FEED_FINALIZE && strcmp(r->user, f->user) == 0)
		f->n++;
	return 0;
}

/* The lane of round after a kill: writes 0..v-1 happened, all of each. */
static void check_lane(store *s, int round, int last_acked)
{
	char user[ID_MAX], sid[ID_MAX], want[ID_MAX];
	memd_scope sc = { .struct_size = sizeof(sc), .app = LANE_APP };
	memd_lane_sink sink;
	memd_error err = { 0 };
	lane_seen seen = { 0 };
	finalize_count fin = { 0 };
	memd_feed_sink feed = { .struct_size = sizeof(feed), .userdata = &fin,
				.record = count_finalize };
	int64_t v;
	int32_t r;

	lane_user(user, round);
	sc.user = user;
	sink = (memd_lane_sink){ .struct_size = sizeof(sink), .userdata = &seen, .lane = keep_lane };
	r = s->ops->lane_get(s->h, NULL, &sc, LANE_KEY, &sink, NULL, &err);
	if (r == MEMD_ENOTFOUND) {
		cr_assert_eq(last_acked, -1, "round %d: the acknowledged lane is gone", round);
		return;
	}
	cr_assert_eq(r, 0, "round %d: lane_get: %s", round, err.msg);
	v = seen.version;
	cr_assert(v - 1 >= last_acked && v - 1 <= last_acked + 1,
		  "round %d: the lane is at version %lld after write %d was acknowledged", round,
		  (long long)v, last_acked);
	lane_session_id(want, (int)v);
	cr_assert_str_eq(seen.session, want, "round %d: version %lld names %s", round,
			 (long long)v, seen.session);
	cr_assert_eq(seen.interruptions, v - 1, "round %d: a half-applied lane write", round);
	cr_assert_eq(seen.input_tokens, v - 1, "round %d: the lane's usage", round);
	for (int k = 1; k <= v + 1; k++) {
		lane_session_seen ss = { 0 };
		memd_session_sink ssink = { .struct_size = sizeof(ssink), .userdata = &ss,
					    .session = keep_lane_session };
		lane_session_id(sid, k);
		sc.session = sid;
		r = s->ops->session_get(s->h, NULL, &sc, &ssink, &err);
		if (k == v + 1) {
			cr_assert_eq(r, MEMD_ENOTFOUND, "round %d: %s of an unapplied write exists",
				     round, sid);
			break;
		}
		cr_assert_eq(r, 0, "round %d: session %s: %s", round, sid, err.msg);
		cr_assert_eq(ss.ended_us, k < v ? LANE_T0 + k : 0,
			     "round %d: session %s ended at %lld", round, sid,
			     (long long)ss.ended_us);
		cr_assert_eq(ss.input_tokens, k > 1 ? 1 : 0, "round %d: session %s's usage", round,
			     sid);
	}
	fin.user = user;
	cr_assert_eq(s->ops->feed_read(s->h, NULL, 0, 0, &feed, &err), 0, "%s", err.msg);
	cr_assert_eq(fin.n, v - 1, "round %d: %lld FINALIZE records for version %lld", round,
		     (long long)fin.n, (long long)v);
}

Test(sqlite_crash, acknowledged_lane_writes_survive_sigkill_whole, .fini = cleanup,
     .timeout = 120)
{
	const char *seed_env = getenv("MEMD_CRASH_SEED");
	unsigned seed = seed_env ? (unsigned)strtoul(seed_env, NULL, 10)
				 : (unsigned)time(NULL) ^ (unsigned)getpid();
	unsigned rng = seed;
	const char *tmp = getenv("TMPDIR");

	cr_log_info("sqlite-crash lanes: MEMD_CRASH_SEED=%u", seed);
	search_path_init();
	snprintf(tmp_dir, sizeof(tmp_dir), "%s/memd-sqlite-crash-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
	cr_assert(mkdtemp(tmp_dir), "mkdtemp: %s", strerror(errno));
	snprintf(db_path, sizeof(db_path), "%s/db/memd.db", tmp_dir);

	for (int round = 0; round < LANE_ROUNDS; round++) {
		int fds[2], status, last = -1, killed = 0;
		int kill_after = (int)(rand_r(&rng) % (LANE_MAX_ACKS + 1));
		char line[LINE_MAX_LEN];
		FILE *in;
		pid_t pid;
		store s;
		memd_error err;

		cr_assert_eq(pipe(fds), 0);
		pid = fork();
		cr_assert(pid >= 0, "fork: %s", strerror(errno));
		if (pid == 0) {
			close(fds[0]);
			lane_child_run(round, fds[1]);
		}
		close(fds[1]);
		in = fdopen(fds[0], "r");
		cr_assert(in);
		if (kill_after == 0) { /* while it opens, or in its first write */
			usleep(rand_r(&rng) % EARLY_KILL_MAX_US);
			kill(pid, SIGKILL);
			killed = 1;
		}
		while (fgets(line, sizeof(line), in)) {
			int k;
			cr_assert(sscanf(line, "acked %d", &k) == 1, "the child wrote '%s'", line);
			cr_assert_eq(k, last + 1, "acks out of order");
			last = k;
			if (!killed && last + 1 >= kill_after) {
				usleep(rand_r(&rng) % KILL_JITTER_MAX_US);
				kill(pid, SIGKILL);
				killed = 1;
			}
		}
		fclose(in);
		cr_assert_eq(waitpid(pid, &status, 0), pid);
		cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
			  "round %d: the child was not killed but exited with %d", round,
			  WIFEXITED(status) ? WEXITSTATUS(status) : -1);
		cr_assert_eq(store_open(&s, &err), 0, "round %d: reopen after SIGKILL: %s", round,
			     err.msg);
		check_lane(&s, round, last);
		store_close(&s);
	}
}
