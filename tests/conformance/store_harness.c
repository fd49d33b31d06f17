/* SPDX-License-Identifier: MIT */
#include "store_harness.h"

#include <criterion/criterion.h>
#include <ctype.h>
#include <ftw.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_common.h"

#define CONF_TMPL_MARK "@TMPDIR@"
#define CONF_TESTID_MARK "@TESTID@"
#define CONF_TMPDIR_PREFIX "memd-conf-"
#define CONF_TESTID_PREFIX "memdconf_"
#define CONF_INSTANCE_NAME "stores.conformance"

/* ---- small helpers ---------------------------------------------------- */

static void *conf_grow(void *arr, size_t *cap, size_t need, size_t elem)
{
	size_t nc = *cap ? *cap : 8;
	void *p;

	if (need <= *cap)
		return arr;
	while (nc < need)
		nc *= 2;
	p = realloc(arr, nc * elem);
	cr_assert_not_null(p, "out of memory");
	*cap = nc;
	return p;
}

/* ---- instance lifecycle ----------------------------------------------- */

static void conf_instance_create(conf_store *st)
{
	memd_error err = { .struct_size = sizeof(err) };
	int32_t r = loader_instance_create(st->plugin, CONF_INSTANCE_NAME, st->cfg, "plugin", NULL,
					   &st->inst, &err);

	cr_assert_eq(r, 0, "loader_instance_create(%s): %s", st->config_text, err.msg);
	st->h = loader_instance_handle(st->inst);
}

conf_store *conf_open(void)
{
	const char *name = getenv("MEMD_CONFORMANCE_PLUGIN");
	const char *cfg = getenv("MEMD_CONFORMANCE_CONFIG");
	const char *durable = getenv("MEMD_CONFORMANCE_DURABLE");
	char *pathlist;
	const char *search[TC_MAX_SEARCH + 1];
	char *dflt = NULL, *testid = NULL, *subst;
	memd_error err = { .struct_size = sizeof(err) };
	conf_store *st;
	int32_t r;

	cr_assert(name && name[0], "MEMD_CONFORMANCE_PLUGIN is not set");
	st = calloc(1, sizeof(*st));
	cr_assert_not_null(st);
	st->durable = durable && strcmp(durable, "1") == 0;

	st->tmpdir = tc_mkdtemp(CONF_TMPDIR_PREFIX);
	if (!cfg || !cfg[0]) {
		if (asprintf(&dflt, "{plugin: %s}", name) < 0)
			cr_assert_fail("out of memory");
		cfg = dflt;
	}
	testid = tc_testid(st->tmpdir, CONF_TMPDIR_PREFIX, CONF_TESTID_PREFIX);
	subst = tc_subst(cfg, CONF_TMPL_MARK, st->tmpdir);
	st->config_text = tc_subst(subst, CONF_TESTID_MARK, testid);
	free(subst);
	free(testid);
	free(dflt);
	r = config_parse_string(st->config_text, strlen(st->config_text), "MEMD_CONFORMANCE_CONFIG",
				&st->cfg, &err);
	cr_assert_eq(r, 0, "config: %s", err.msg);

	pathlist = tc_plugin_search(search);
	r = loader_open(name, search, &st->plugin, &err);
	free(pathlist);
	cr_assert_eq(r, 0, "loader_open(%s): %s", name, err.msg);
	r = loader_require_kind(st->plugin, MEMD_KIND_STORE, "stores.conformance", &err);
	cr_assert_eq(r, 0, "%s", err.msg);
	st->ops = loader_store_ops(st->plugin);
	cr_assert_not_null(st->ops);
	st->threadsafe = (loader_descriptor(st->plugin)->flags & MEMD_PLUGIN_THREADSAFE) != 0;
	conf_instance_create(st);
	return st;
}

void conf_reopen(conf_store *st)
{
	loader_instance_destroy(st->inst);
	st->inst = NULL;
	st->h = NULL;
	conf_instance_create(st);
}

void conf_close(conf_store *st)
{
	if (!st)
		return;
	loader_instance_destroy(st->inst);
	loader_close(st->plugin);
	config_free(st->cfg);
	tc_rm_tree(st->tmpdir);
	free(st->tmpdir);
	free(st->config_text);
	free(st);
}

memd_call conf_call(conf_store *st)
{
	memd_call c = { .struct_size = sizeof(c), .rows_read = &st->rows_read };
	return c;
}

memd_scope conf_scope(const char *app, const char *user, const char *session)
{
	memd_scope s = { .struct_size = sizeof(s), .app = app, .user = user, .session = session };
	return s;
}

/* ---- copies ----------------------------------------------------------- */

static void conf_session_copy(const memd_session *in, conf_session *out)
{
	memset(out, 0, sizeof(*out));
	out->flags = in->flags;
	out->app = tc_strdup(in->app);
	out->user = tc_strdup(in->user);
	out->id = tc_strdup(in->id);
	out->title = tc_strdup(in->title);
	out->metadata_json = tc_strdup(in->metadata_json);
	out->created_us = in->created_us;
	out->updated_us = in->updated_us;
	out->version = in->version;
	out->last_seq = in->last_seq;
	out->summary_seq = in->summary_seq;
}

void conf_session_clear(conf_session *s)
{
	if (!s)
		return;
	free(s->app);
	free(s->user);
	free(s->id);
	free(s->title);
	free(s->metadata_json);
	memset(s, 0, sizeof(*s));
}

void conf_sessions_clear(conf_sessions *l)
{
	for (size_t i = 0; i < l->n; i++)
		conf_session_clear(&l->v[i]);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

static void conf_event_copy(const memd_event *in, memd_event *out)
{
	*out = *in;
	out->id = tc_strdup(in->id);
	out->invocation_id = tc_strdup(in->invocation_id);
	out->author = tc_strdup(in->author);
	out->role = tc_strdup(in->role);
	out->branch = tc_strdup(in->branch);
	out->content_json = tc_strdup(in->content_json);
	out->actions_json = tc_strdup(in->actions_json);
	out->metadata_json = tc_strdup(in->metadata_json);
	out->text = tc_strdup(in->text);
	out->app = tc_strdup(in->app);
	out->user = tc_strdup(in->user);
	out->session = tc_strdup(in->session);
}

static void conf_event_release(memd_event *e)
{
	free((char *)e->id);
	free((char *)e->invocation_id);
	free((char *)e->author);
	free((char *)e->role);
	free((char *)e->branch);
	free((char *)e->content_json);
	free((char *)e->actions_json);
	free((char *)e->metadata_json);
	free((char *)e->text);
	free((char *)e->app);
	free((char *)e->user);
	free((char *)e->session);
	memset(e, 0, sizeof(*e));
}

void conf_events_clear(conf_events *l)
{
	for (size_t i = 0; i < l->n; i++)
		conf_event_release(&l->v[i]);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

void conf_artifacts_clear(conf_artifacts *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].name);
		free(l->v[i].mime_type);
		free(l->v[i].data);
	}
	free(l->v);
	memset(l, 0, sizeof(*l));
}

void conf_feed_clear(conf_feed *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].app);
		free(l->v[i].user);
		free(l->v[i].session);
		conf_event_release(&l->v[i].event);
	}
	free(l->v);
	memset(l, 0, sizeof(*l));
}

/* ---- sinks ------------------------------------------------------------ */

static int32_t conf_session_one(void *ud, const memd_session *s)
{
	conf_session *out = ud;
	cr_assert_geq(s->struct_size, sizeof(*s), "session record struct_size %u", s->struct_size);
	conf_session_clear(out);
	conf_session_copy(s, out);
	return 0;
}

static int32_t conf_session_many(void *ud, const memd_session *s)
{
	conf_sessions *l = ud;
	cr_assert_geq(s->struct_size, sizeof(*s), "session record struct_size %u", s->struct_size);
	l->v = conf_grow(l->v, &l->cap, l->n + 1, sizeof(*l->v));
	conf_session_copy(s, &l->v[l->n++]);
	return 0;
}

static int32_t conf_event_many(void *ud, const memd_event *e)
{
	conf_events *l = ud;
	cr_assert_geq(e->struct_size, sizeof(*e), "event record struct_size %u", e->struct_size);
	l->v = conf_grow(l->v, &l->cap, l->n + 1, sizeof(*l->v));
	conf_event_copy(e, &l->v[l->n++]);
	return 0;
}

static int32_t conf_artifact_many(void *ud, const memd_artifact *a)
{
	conf_artifacts *l = ud;
	conf_artifact *c;

	cr_assert_geq(a->struct_size, sizeof(*a), "artifact record struct_size %u", a->struct_size);
	l->v = conf_grow(l->v, &l->cap, l->n + 1, sizeof(*l->v));
	c = &l->v[l->n++];
	memset(c, 0, sizeof(*c));
	c->name = tc_strdup(a->name);
	c->mime_type = tc_strdup(a->mime_type);
	c->version = a->version;
	c->created_us = a->created_us;
	c->size = a->size;
	if (a->data) {
		c->data = malloc(a->size ? a->size : 1);
		cr_assert_not_null(c->data);
		memcpy(c->data, a->data, a->size);
	}
	return 0;
}

static int32_t conf_feed_many(void *ud, const memd_feed_record *r)
{
	conf_feed *l = ud;
	conf_feed_rec *c;

	cr_assert_geq(r->struct_size, sizeof(*r), "feed record struct_size %u", r->struct_size);
	l->v = conf_grow(l->v, &l->cap, l->n + 1, sizeof(*l->v));
	c = &l->v[l->n++];
	memset(c, 0, sizeof(*c));
	c->kind = r->kind;
	c->position = r->position;
	c->app = tc_strdup(r->app);
	c->user = tc_strdup(r->user);
	c->session = tc_strdup(r->session);
	if (r->event)
		conf_event_copy(r->event, &c->event);
	return 0;
}

typedef struct conf_text {
	char *text;
} conf_text;

static int32_t conf_text_one(void *ud, const char *text, size_t len)
{
	conf_text *t = ud;
	free(t->text);
	t->text = malloc(len + 1);
	cr_assert_not_null(t->text);
	memcpy(t->text, text, len);
	t->text[len] = '\0';
	return 0;
}

/* ---- input events ----------------------------------------------------- */

memd_event *conf_event_new(const char *id, const char *role, const char *text,
			   int64_t timestamp_us)
{
	memd_event *e = calloc(1, sizeof(*e));
	json_t *content;

	cr_assert_not_null(e);
	e->struct_size = sizeof(*e);
	e->id = tc_strdup(id);
	e->author = tc_strdup("tester");
	e->role = tc_strdup(role);
	e->text = tc_strdup(text);
	e->timestamp_us = timestamp_us;
	e->tokens = (int64_t)(strlen(text) / 4 + 1);
	content = json_pack("{s:[{s:s,s:s}]}", "parts", "type", "text", "text", text);
	cr_assert_not_null(content);
	e->content_json = json_dumps(content, JSON_COMPACT);
	json_decref(content);
	cr_assert_not_null(e->content_json);
	return e;
}

void conf_event_free(memd_event *e)
{
	if (!e)
		return;
	conf_event_release(e);
	free(e);
}

/* ---- op wrappers ------------------------------------------------------ */

#define CONF_ERR_RESET(st) memset(&(st)->err, 0, sizeof((st)->err)), (st)->err.struct_size = sizeof((st)->err)

int32_t conf_session_create(conf_store *st, const char *app, const char *user, const char *id,
			    const char *title, int64_t created_us, const char *state_delta,
			    conf_session *ret)
{
	memd_call c = conf_call(st);
	memd_session s = { .struct_size = sizeof(s), .app = app, .user = user, .id = id,
			   .title = title, .metadata_json = "{}", .created_us = created_us,
			   .updated_us = created_us };
	conf_session tmp = { 0 };
	memd_session_sink sink = { sizeof(sink), ret ? ret : &tmp, conf_session_one };
	int32_t r;

	CONF_ERR_RESET(st);
	r = st->ops->session_create(st->h, &c, &s, state_delta, &sink, &st->err);
	conf_session_clear(&tmp);
	return r;
}

int32_t conf_session_get(conf_store *st, const char *app, const char *user, const char *id,
			 conf_session *ret)
{
	memd_call c = conf_call(st);
	memd_scope sc = conf_scope(app, user, id);
	conf_session tmp = { 0 };
	memd_session_sink sink = { sizeof(sink), ret ? ret : &tmp, conf_session_one };
	int32_t r;

	CONF_ERR_RESET(st);
	r = st->ops->session_get(st->h, &c, &sc, &sink, &st->err);
	conf_session_clear(&tmp);
	return r;
}

int32_t conf_session_list(conf_store *st, const char *app, const char *user, uint32_t flags,
			  uint32_t limit, int64_t before_created_us, const char *before_id,
			  conf_sessions *out)
{
	memd_call c = conf_call(st);
	memd_scope sc = conf_scope(app, user, NULL);
	memd_session_query q = { .struct_size = sizeof(q), .flags = flags, .limit = limit,
				 .before_created_us = before_created_us, .before_id = before_id };
	memd_session_sink sink = { sizeof(sink), out, conf_session_many };

	CONF_ERR_RESET(st);
	return st->ops->session_list(st->h, &c, &sc, &q, &sink, &st->err);
}

int32_t conf_session_update(conf_store *st, const char *app, const char *user, const char *id,
			    const memd_session_update *p, conf_session *ret)
{
	memd_call c = conf_call(st);
	memd_scope sc = conf_scope(app, user, id);
	conf_session tmp = { 0 };
	memd_session_sink sink = { sizeof(sink), ret ? ret : &tmp, conf_session_one };
	int32_t r;

	CONF_ERR_RESET(st);
	r = st->ops->session_update(st->h, &c, &sc, p, &sink, &st->err);
	conf_session_clear(&tmp);
	return r;
}

int32_t conf_session_delete(conf_store *st, const char *app, const char *user, const char *id)
{
	memd_call c = conf_call(st);
	memd_scope sc = conf_scope(app, user, id);

	CONF_ERR_RESET(st);
	return st->ops->session_delete(st->h, &c, &sc, &st->err);
}

int32_t conf_append(conf_store *st, const memd_scope *sc, memd_event *const *evs, uint32_t n,
		    const conf_append_opts *o, int64_t *seqs, memd_append_result *ret)
{
	memd_call c = conf_call(st);
	conf_append_opts dflt = { 0 };
	memd_append a;
	memd_append_result tmp = { .struct_size = sizeof(tmp) };

	if (!o)
		o = &dflt;
	memset(&a, 0, sizeof(a));
	a.struct_size = sizeof(a);
	a.flags = o->flags;
	a.expected_version = o->expected_version;
	a.events = (const memd_event *const *)evs;
	a.n_events = n;
	a.state_delta_json = o->delta;
	a.title_if_unset = o->title_if_unset;
	a.now_us = o->now_us;
	if (!ret)
		ret = &tmp;
	ret->struct_size = sizeof(*ret);
	ret->seqs = seqs;
	CONF_ERR_RESET(st);
	return st->ops->append(st->h, &c, sc, &a, ret, &st->err);
}

void conf_append_simple(conf_store *st, const memd_scope *sc, const char *prefix, int from,
			int count, int64_t now_us)
{
	memd_event **evs = calloc((size_t)count, sizeof(*evs));
	int64_t *seqs = calloc((size_t)count, sizeof(*seqs));
	conf_append_opts o = { .now_us = now_us };
	int32_t r;

	cr_assert(evs && seqs);
	for (int i = 0; i < count; i++) {
		char id[64], text[96];
		snprintf(id, sizeof(id), "%s%d", prefix, from + i);
		snprintf(text, sizeof(text), "message %s%d", prefix, from + i);
		evs[i] = conf_event_new(id, "user", text, now_us + i);
	}
	r = conf_append(st, sc, evs, (uint32_t)count, &o, seqs, NULL);
	cr_assert_eq(r, 0, "append %s%d..: %s", prefix, from, st->err.msg);
	for (int i = 0; i < count; i++)
		conf_event_free(evs[i]);
	free(evs);
	free(seqs);
}

int32_t conf_events_load(conf_store *st, const memd_scope *sc, uint32_t flags, int64_t after_seq,
			 int64_t before_seq, int64_t after_time_us, uint32_t limit,
			 conf_events *out)
{
	memd_call c = conf_call(st);
	memd_event_query q = { .struct_size = sizeof(q), .flags = flags, .after_seq = after_seq,
			       .before_seq = before_seq, .after_time_us = after_time_us,
			       .limit = limit };
	memd_event_sink sink = { sizeof(sink), out, conf_event_many };

	CONF_ERR_RESET(st);
	return st->ops->events_load(st->h, &c, sc, &q, &sink, &st->err);
}

int32_t conf_state_get(conf_store *st, const memd_scope *sc, char **ret)
{
	memd_call c = conf_call(st);
	conf_text t = { NULL };
	memd_text_sink sink = { sizeof(sink), &t, conf_text_one };
	int32_t r;

	CONF_ERR_RESET(st);
	r = st->ops->state_get(st->h, &c, sc, &sink, &st->err);
	if (r == 0) {
		cr_assert_not_null(t.text, "state_get delivered nothing");
		*ret = t.text;
	} else {
		free(t.text);
	}
	return r;
}

int conf_json_equal(const char *a, const char *b)
{
	json_error_t e;
	json_t *ja = json_loads(a, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
	json_t *jb = json_loads(b, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
	int eq;

	cr_assert_not_null(ja, "not JSON: %.200s", a);
	cr_assert_not_null(jb, "not JSON: %.200s", b);
	eq = json_equal(ja, jb);
	json_decref(ja);
	json_decref(jb);
	return eq;
}

void conf_assert_state(conf_store *st, const memd_scope *sc, const char *expected_json)
{
	char *got = NULL;
	int32_t r = conf_state_get(st, sc, &got);

	cr_assert_eq(r, 0, "state_get(%s/%s/%s): %s", sc->app, sc->user, sc->session, st->err.msg);
	cr_assert(conf_json_equal(got, expected_json), "state of %s/%s/%s is %s, expected %s",
		  sc->app, sc->user, sc->session, got, expected_json);
	free(got);
}

static int32_t conf_enotsup(conf_store *st, const char *op)
{
	return memd_error_set(&st->err, MEMD_ENOTSUP, 0, "%s is not provided", op);
}

int32_t conf_artifact_put(conf_store *st, const memd_scope *sc, const char *name,
			  const char *mime, const void *data, uint64_t size, int64_t created_us,
			  int64_t *ret_version)
{
	memd_call c = conf_call(st);
	memd_artifact a = { .struct_size = sizeof(a), .name = name, .mime_type = mime,
			    .data = data, .size = size, .created_us = created_us };

	CONF_ERR_RESET(st);
	if (!st->ops->artifact_put)
		return conf_enotsup(st, "artifact_put");
	return st->ops->artifact_put(st->h, &c, sc, &a, ret_version, &st->err);
}

int32_t conf_artifact_get(conf_store *st, const memd_scope *sc, const char *name,
			  int64_t version, conf_artifacts *out)
{
	memd_call c = conf_call(st);
	memd_artifact_sink sink = { sizeof(sink), out, conf_artifact_many };

	CONF_ERR_RESET(st);
	if (!st->ops->artifact_get)
		return conf_enotsup(st, "artifact_get");
	return st->ops->artifact_get(st->h, &c, sc, name, version, &sink, &st->err);
}

int32_t conf_artifact_list(conf_store *st, const memd_scope *sc, conf_artifacts *out)
{
	memd_call c = conf_call(st);
	memd_artifact_sink sink = { sizeof(sink), out, conf_artifact_many };

	CONF_ERR_RESET(st);
	if (!st->ops->artifact_list)
		return conf_enotsup(st, "artifact_list");
	return st->ops->artifact_list(st->h, &c, sc, &sink, &st->err);
}

int32_t conf_artifact_versions(conf_store *st, const memd_scope *sc, const char *name,
			       conf_artifacts *out)
{
	memd_call c = conf_call(st);
	memd_artifact_sink sink = { sizeof(sink), out, conf_artifact_many };

	CONF_ERR_RESET(st);
	if (!st->ops->artifact_versions)
		return conf_enotsup(st, "artifact_versions");
	return st->ops->artifact_versions(st->h, &c, sc, name, &sink, &st->err);
}

int32_t conf_artifact_delete(conf_store *st, const memd_scope *sc, const char *name)
{
	memd_call c = conf_call(st);

	CONF_ERR_RESET(st);
	if (!st->ops->artifact_delete)
		return conf_enotsup(st, "artifact_delete");
	return st->ops->artifact_delete(st->h, &c, sc, name, &st->err);
}

int32_t conf_user_delete(conf_store *st, const char *app, const char *user)
{
	memd_call c = conf_call(st);
	memd_scope sc = conf_scope(app, user, NULL);

	CONF_ERR_RESET(st);
	return st->ops->user_delete(st->h, &c, &sc, &st->err);
}

int32_t conf_feed_read(conf_store *st, int64_t after, uint32_t limit, conf_feed *out)
{
	memd_call c = conf_call(st);
	memd_feed_sink sink = { sizeof(sink), out, conf_feed_many };

	CONF_ERR_RESET(st);
	return st->ops->feed_read(st->h, &c, after, limit, &sink, &st->err);
}

int32_t conf_feed_head(conf_store *st, int64_t *ret)
{
	memd_call c = conf_call(st);

	CONF_ERR_RESET(st);
	if (!st->ops->feed_head)
		return conf_enotsup(st, "feed_head");
	return st->ops->feed_head(st->h, &c, ret, &st->err);
}

int64_t conf_feed_last(conf_store *st)
{
	conf_feed f = { 0 };
	int64_t last = 0;
	int32_t r = conf_feed_read(st, 0, CONF_FEED_ALL, &f);

	cr_assert_eq(r, 0, "feed_read: %s", st->err.msg);
	for (size_t i = 0; i < f.n; i++) {
		cr_assert_gt(f.v[i].position, last, "feed positions not ascending");
		last = f.v[i].position;
	}
	conf_feed_clear(&f);
	return last;
}

int32_t conf_cursor_get(conf_store *st, const char *name, int64_t *ret)
{
	memd_call c = conf_call(st);

	CONF_ERR_RESET(st);
	return st->ops->cursor_get(st->h, &c, name, ret, &st->err);
}

int32_t conf_cursor_set(conf_store *st, const char *name, int64_t position)
{
	memd_call c = conf_call(st);

	CONF_ERR_RESET(st);
	return st->ops->cursor_set(st->h, &c, name, position, &st->err);
}
