/* SPDX-License-Identifier: MIT */
#include "stress_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define STRESS_NAME_MARK "@NAME@"
#define STRESS_INSTANCE "stores.stress"
#define STRESS_MAX_SEARCH 16
#define STRESS_LINE_MAX 4096
#define STRESS_INITIAL 64
#define US_PER_SEC 1000000
#define NS_PER_US 1000
#define NS_PER_MS 1000000

char *stress_unique_name(const char *what)
{
	static unsigned counter;
	char *out = NULL;

	if (asprintf(&out, "memd_%s_%ld_%u_%lld", what, (long)getpid(), counter++,
		     (long long)(stress_now_us() % US_PER_SEC)) < 0)
		return NULL;
	return out;
}

/* text with every @NAME@ replaced by name, extra merged into the map. */
static char *render(const char *text, const char *name, const char *extra)
{
	size_t ml = strlen(STRESS_NAME_MARK), nl = strlen(name), el = extra ? strlen(extra) : 0;
	size_t n = 0;
	char *out, *w, *close;
	const char *p;

	for (p = text; (p = strstr(p, STRESS_NAME_MARK)); p += ml)
		n++;
	out = malloc(strlen(text) + n * nl + el + 3);
	if (!out)
		return NULL;
	w = out;
	for (p = text;;) {
		const char *m = strstr(p, STRESS_NAME_MARK);
		size_t l = m ? (size_t)(m - p) : strlen(p);
		memcpy(w, p, l);
		w += l;
		if (!m)
			break;
		memcpy(w, name, nl);
		w += nl;
		p = m + ml;
	}
	*w = '\0';
	close = strrchr(out, '}');
	if (extra && close) {
		memmove(close + el + 2, close, strlen(close) + 1);
		memcpy(close, ", ", 2);
		memcpy(close + 2, extra, el);
	}
	return out;
}

stress_store *stress_open(const char *template_text, const char *name, const char *extra_yaml,
			  memd_error *err)
{
	const char *tmpl = template_text ? template_text : getenv("MEMD_STRESS_CONFIG");
	const char *plugin = getenv("MEMD_STRESS_PLUGIN");
	const char *search[STRESS_MAX_SEARCH + 1];
	char *pathlist = NULL, *save = NULL, *tok, *text = NULL;
	size_t ns = 0;
	stress_store *s;
	int32_t r;

	if (!plugin || !plugin[0] || !tmpl || !tmpl[0]) {
		memd_error_set(err, MEMD_EINVAL, 0, "MEMD_STRESS_PLUGIN/MEMD_STRESS_CONFIG not set");
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	text = render(tmpl, name, extra_yaml);
	pathlist = strdup(getenv("MEMD_PLUGIN_PATH") ? getenv("MEMD_PLUGIN_PATH") : "");
	if (!s || !text || !pathlist) {
		memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
		goto fail;
	}
	r = config_parse_string(text, strlen(text), "MEMD_STRESS_CONFIG", &s->cfg, err);
	if (r < 0)
		goto fail;
	for (tok = strtok_r(pathlist, ":", &save); tok && ns < STRESS_MAX_SEARCH;
	     tok = strtok_r(NULL, ":", &save))
		search[ns++] = tok;
	search[ns] = NULL;
	r = loader_open(plugin, search, &s->plugin, err);
	if (r == 0)
		r = loader_require_kind(s->plugin, MEMD_KIND_STORE, STRESS_INSTANCE, err);
	if (r == 0)
		r = loader_instance_create(s->plugin, STRESS_INSTANCE, s->cfg, "plugin", NULL,
					   &s->inst, err);
	if (r < 0)
		goto fail;
	s->ops = loader_store_ops(s->plugin);
	s->h = loader_instance_handle(s->inst);
	free(text);
	free(pathlist);
	return s;
fail:
	free(text);
	free(pathlist);
	stress_close(s);
	return NULL;
}

void stress_close(stress_store *s)
{
	if (!s)
		return;
	loader_instance_destroy(s->inst);
	loader_close(s->plugin);
	config_free(s->cfg);
	free(s);
}

memd_call stress_call(void)
{
	memd_call c = { .struct_size = sizeof(c) };
	return c;
}

memd_scope stress_scope(const char *app, const char *user, const char *session)
{
	memd_scope s = { .struct_size = sizeof(s), .app = app, .user = user, .session = session };
	return s;
}

void stress_event(memd_event *ev, const char *id, const char *text, int64_t ts_us)
{
	memset(ev, 0, sizeof(*ev));
	ev->struct_size = sizeof(*ev);
	ev->id = id;
	ev->author = "stress";
	ev->role = "user";
	ev->content_json = "{\"parts\":[{\"type\":\"text\",\"text\":\"stress\"}]}";
	ev->text = text;
	ev->tokens = 1;
	ev->timestamp_us = ts_us;
}

static int32_t ignore_session(void *ud, const memd_session *s)
{
	(void)ud;
	(void)s;
	return 0;
}

int32_t stress_session_ensure(stress_store *s, const memd_scope *sc, memd_error *err)
{
	memd_call call = stress_call();
	memd_session sess = { .struct_size = sizeof(sess), .app = sc->app, .user = sc->user,
			      .id = sc->session, .metadata_json = "{}",
			      .created_us = 1700000000000000LL };
	memd_session_sink sink = { .struct_size = sizeof(sink), .session = ignore_session };
	int32_t r = s->ops->session_create(s->h, &call, &sess, NULL, &sink, err);

	return r == MEMD_ECONFLICT ? 0 : r;
}

typedef struct head_out {
	int64_t version, last_seq;
} head_out;

static int32_t take_head(void *ud, const memd_session *s)
{
	head_out *h = ud;
	h->version = s->version;
	h->last_seq = s->last_seq;
	return 0;
}

int32_t stress_session_head(stress_store *s, const memd_scope *sc, int64_t *ret_version,
			    int64_t *ret_last_seq, memd_error *err)
{
	memd_call call = stress_call();
	head_out h = { 0 };
	memd_session_sink sink = { .struct_size = sizeof(sink), .userdata = &h,
				   .session = take_head };
	int32_t r = s->ops->session_get(s->h, &call, sc, &sink, err);

	if (r == 0) {
		if (ret_version)
			*ret_version = h.version;
		if (ret_last_seq)
			*ret_last_seq = h.last_seq;
	}
	return r;
}

static void *grow(void *arr, size_t *cap, size_t need, size_t elem)
{
	size_t nc = *cap ? *cap : STRESS_INITIAL;
	void *p;

	if (need <= *cap)
		return arr;
	while (nc < need)
		nc *= 2;
	p = realloc(arr, nc * elem);
	if (!p) {
		fprintf(stderr, "stress: out of memory\n");
		abort();
	}
	*cap = nc;
	return p;
}

static char *dup_or_abort(const char *s)
{
	char *d;

	if (!s)
		return NULL;
	d = strdup(s);
	if (!d) {
		fprintf(stderr, "stress: out of memory\n");
		abort();
	}
	return d;
}

static int32_t take_event(void *ud, const memd_event *e)
{
	stress_evs *l = ud;
	l->v = grow(l->v, &l->cap, l->n + 1, sizeof(*l->v));
	l->v[l->n++] = (stress_ev){ .id = dup_or_abort(e->id), .seq = e->seq,
				    .position = e->position };
	return 0;
}

int32_t stress_events_all(stress_store *s, const memd_scope *sc, stress_evs *out,
			  memd_error *err)
{
	memd_call call = stress_call();
	memd_event_query q = { .struct_size = sizeof(q) };
	memd_event_sink sink = { .struct_size = sizeof(sink), .userdata = out,
				 .event = take_event };
	return s->ops->events_load(s->h, &call, sc, &q, &sink, err);
}

void stress_evs_clear(stress_evs *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].id);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

typedef struct feed_acc {
	stress_recs *out;
	size_t n;
} feed_acc;

static int32_t take_rec(void *ud, const memd_feed_record *r)
{
	feed_acc *a = ud;
	stress_recs *l = a->out;
	l->v = grow(l->v, &l->cap, l->n + 1, sizeof(*l->v));
	l->v[l->n++] = (stress_rec){ .position = r->position, .kind = r->kind,
				     .session = dup_or_abort(r->session),
				     .id = r->event ? dup_or_abort(r->event->id) : NULL };
	a->n++;
	return 0;
}

int32_t stress_feed_read(stress_store *s, int64_t after, uint32_t limit, stress_recs *out,
			 size_t *ret_n, memd_error *err)
{
	memd_call call = stress_call();
	feed_acc a = { .out = out };
	memd_feed_sink sink = { .struct_size = sizeof(sink), .userdata = &a, .record = take_rec };
	int32_t r = s->ops->feed_read(s->h, &call, after, limit, &sink, err);

	if (ret_n)
		*ret_n = a.n;
	return r;
}

void stress_recs_clear(stress_recs *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].session);
		free(l->v[i].id);
	}
	free(l->v);
	memset(l, 0, sizeof(*l));
}

int stress_service(const char *service, const char *verb, const char *dir)
{
	const char *root = getenv("MEMD_SOURCE_ROOT");
	char *script = NULL;
	pid_t pid;
	int status = 0;

	if (!root || asprintf(&script, "%s/tests/services/%s.sh", root, service) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		execl("/bin/bash", "bash", script, verb, dir, (char *)NULL);
		_exit(127);
	}
	free(script);
	if (pid < 0 || waitpid(pid, &status, 0) < 0)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int stress_load_env(const char *file)
{
	char line[STRESS_LINE_MAX];
	FILE *f = fopen(file, "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char *p = line, *eq, *v;
		size_t l;

		line[strcspn(line, "\n")] = '\0';
		if (strncmp(p, "export ", 7) == 0)
			p += 7;
		eq = strchr(p, '=');
		if (!eq)
			continue;
		*eq = '\0';
		v = eq + 1;
		l = strlen(v);
		if (l >= 2 && v[0] == '\'' && v[l - 1] == '\'') {
			v[l - 1] = '\0';
			v++;
		}
		setenv(p, v, 1);
	}
	fclose(f);
	return 0;
}

int64_t stress_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * US_PER_SEC + ts.tv_nsec / NS_PER_US;
}

void stress_sleep_ms(int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * NS_PER_MS };
	nanosleep(&ts, NULL);
}

/* ---- child processes in rounds -------------------------------------- */

/* A child's results: its crew's dir, "/codes." and its number. */
#define CREW_OUT_MAX (STRESS_PATH_MAX + 24)

static void crew_out_path(const stress_crew *c, int p, char out[CREW_OUT_MAX])
{
	snprintf(out, CREW_OUT_MAX, "%s/codes.%d", c->dir, p);
}

int stress_crew_start(stress_crew *c, int n, const char *dir, stress_child_fn fn, void *arg)
{
	int ready[2];

	if (n < 1 || n > STRESS_CREW_MAX || strlen(dir) + 1 > sizeof(c->dir) ||
	    pipe(ready) != 0)
		return -1;
	c->n = n;
	c->ready = ready[0];
	snprintf(c->dir, sizeof(c->dir), "%s", dir);
	for (int p = 0; p < n; p++) {
		char out[CREW_OUT_MAX];
		int go[2];

		if (pipe(go) != 0)
			return -1;
		crew_out_path(c, p, out);
		c->pids[p] = fork();
		if (c->pids[p] < 0)
			return -1;
		if (c->pids[p] == 0) {
			close(go[1]);
			close(ready[0]);
			_exit(fn(arg, p, go[0], ready[1], out));
		}
		close(go[0]);
		c->go[p] = go[1];
	}
	close(ready[1]);
	return 0;
}

int stress_crew_go(stress_crew *c)
{
	for (int p = 0; p < c->n; p++)
		if (write(c->go[p], "g", 1) != 1)
			return -1;
	return 0;
}

int stress_crew_wait(stress_crew *c)
{
	for (int got = 0; got < c->n; got++) {
		char r;
		if (read(c->ready, &r, 1) != 1)
			return -1;
	}
	return 0;
}

FILE *stress_crew_reap(stress_crew *c, int p)
{
	char out[CREW_OUT_MAX];
	int status = 0;
	FILE *f;

	close(c->go[p]);
	if (waitpid(c->pids[p], &status, 0) != c->pids[p] || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0) {
		fprintf(stderr, "child %d failed (status 0x%x): see its stderr\n", p, status);
		return NULL;
	}
	crew_out_path(c, p, out);
	f = fopen(out, "r");
	if (!f)
		fprintf(stderr, "child %d: no results in %s\n", p, out);
	unlink(out);
	return f;
}

void stress_crew_close(stress_crew *c)
{
	close(c->ready);
}
