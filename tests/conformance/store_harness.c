/* SPDX-License-Identifier: MIT */
#include "store_harness.h"

#include <criterion/criterion.h>
#include <ctype.h>
#include <ftw.h>
#include <stddef.h>
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

int conf_str_eq(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
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
	if (in->struct_size < offsetof(memd_session, last_prompt_tokens) +
				      sizeof(in->last_prompt_tokens))
		return;
	out->lane_key = tc_strdup(in->lane_key);
	out->origin_json = tc_strdup(in->origin_json);
	out->origin_platform = tc_strdup(in->origin_platform);
	out->previous_session = tc_strdup(in->previous_session);
	out->start_reason = tc_strdup(in->start_reason);
	out->end_reason = tc_strdup(in->end_reason);
	out->ended_us = in->ended_us;
	out->usage = (memd_usage){ .struct_size = sizeof(memd_usage),
				   .input_tokens = in->input_tokens,
				   .output_tokens = in->output_tokens,
				   .cache_read_tokens = in->cache_read_tokens,
				   .cache_write_tokens = in->cache_write_tokens,
				   .cost_micro_usd = in->cost_micro_usd,
				   .last_prompt_tokens = in->last_prompt_tokens };
	if (in->struct_size >= offsetof(memd_session, message_count) + sizeof(in->message_count))
		out->message_count = in->message_count;
	if (in->struct_size >= offsetof(memd_session, memory_seq) + sizeof(in->memory_seq))
		out->memory_seq = in->memory_seq;
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
	free(s->lane_key);
	free(s->origin_json);
	free(s->origin_platform);
	free(s->previous_session);
	free(s->start_reason);
	free(s->end_reason);
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
	if (in->struct_size >= offsetof(memd_event, operation) + sizeof(in->operation)) {
		out->hidden_by = tc_strdup(in->hidden_by);
		out->operation = tc_strdup(in->operation);
	} else {
		out->hidden_us = 0;
		out->hidden_by = NULL;
		out->hidden_kind = 0;
		out->operation = NULL;
	}
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
	free((char *)e->hidden_by);
	free((char *)e->operation);
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

static void conf_lane_copy(const memd_lane *in, conf_lane *out)
{
	out->l = *in;
	out->l.app = tc_strdup(in->app);
	out->l.user = tc_strdup(in->user);
	out->l.key = tc_strdup(in->key);
	out->l.session = tc_strdup(in->session);
	out->l.origin_json = tc_strdup(in->origin_json);
	out->l.resume_reason = tc_strdup(in->resume_reason);
	out->l.reset_reason = tc_strdup(in->reset_reason);
	out->l.previous_session = tc_strdup(in->previous_session);
	out->l.turn_id = tc_strdup(in->turn_id);
}

void conf_lane_clear(conf_lane *l)
{
	if (!l)
		return;
	free((char *)l->l.app);
	free((char *)l->l.user);
	free((char *)l->l.key);
	free((char *)l->l.session);
	free((char *)l->l.origin_json);
	free((char *)l->l.resume_reason);
	free((char *)l->l.reset_reason);
	free((char *)l->l.previous_session);
	free((char *)l->l.turn_id);
	memset(l, 0, sizeof(*l));
}

void conf_lanes_clear(conf_lanes *l)
{
	for (size_t i = 0; i < l->n; i++)
		conf_lane_clear(&l->v[i]);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

static void conf_inbox_item_copy(const memd_inbox_item *in, conf_inbox_item *out)
{
	memset(out, 0, sizeof(*out));
	out->mode = in->mode;
	out->in_slot = in->in_slot;
	out->id = tc_strdup(in->id);
	out->body_json = tc_strdup(in->body_json);
	out->created_us = in->created_us;
	out->position = in->position;
}

static void conf_inbox_item_clear(conf_inbox_item *i)
{
	free(i->id);
	free(i->body_json);
	memset(i, 0, sizeof(*i));
}

void conf_inbox_clear(conf_inbox *l)
{
	for (size_t i = 0; i < l->n; i++)
		conf_inbox_item_clear(&l->v[i]);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

static void conf_memory_copy(const memd_memory *in, memd_memory *out)
{
	*out = *in;
	out->app = tc_strdup(in->app);
	out->user = tc_strdup(in->user);
	out->id = tc_strdup(in->id);
	out->text = tc_strdup(in->text);
	out->kind = tc_strdup(in->kind);
	out->topics_json = tc_strdup(in->topics_json);
	out->entities_json = tc_strdup(in->entities_json);
	out->source_session = tc_strdup(in->source_session);
	out->source_json = tc_strdup(in->source_json);
}

static void conf_memory_release(memd_memory *m)
{
	free((char *)m->app);
	free((char *)m->user);
	free((char *)m->id);
	free((char *)m->text);
	free((char *)m->kind);
	free((char *)m->topics_json);
	free((char *)m->entities_json);
	free((char *)m->source_session);
	free((char *)m->source_json);
	memset(m, 0, sizeof(*m));
}

void conf_feed_clear(conf_feed *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].app);
		free(l->v[i].user);
		free(l->v[i].session);
		conf_event_release(&l->v[i].event);
		conf_memory_release(&l->v[i].memory);
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
	if ((r->kind == MEMD_FEED_MEMORY || r->kind == MEMD_FEED_MEMORY_DELETE) && r->memory) {
		cr_assert_geq(r->memory->struct_size, sizeof(*r->memory),
			      "feed memory struct_size %u", r->memory->struct_size);
		conf_memory_copy(r->memory, &c->memory);
	}
	return 0;
}

static int32_t conf_lane_one(void *ud, const memd_lane *l)
{
	conf_lane *out = ud;
	cr_assert_geq(l->struct_size, sizeof(*l), "lane record struct_size %u", l->struct_size);
	cr_assert_null(out->l.key, "a single-lane op delivered more than one lane");
	conf_lane_copy(l, out);
	return 0;
}

static int32_t conf_lane_many(void *ud, const memd_lane *l)
{
	conf_lanes *ls = ud;
	cr_assert_geq(l->struct_size, sizeof(*l), "lane record struct_size %u", l->struct_size);
	ls->v = conf_grow(ls->v, &ls->cap, ls->n + 1, sizeof(*ls->v));
	conf_lane_copy(l, &ls->v[ls->n++]);
	return 0;
}

static int32_t conf_inbox_one(void *ud, const memd_inbox_item *i)
{
	conf_inbox_item *out = ud;
	cr_assert_geq(i->struct_size, sizeof(*i), "inbox item struct_size %u", i->struct_size);
	cr_assert_null(out->id, "inbox_take delivered more than one item");
	conf_inbox_item_copy(i, out);
	return 0;
}

static int32_t conf_inbox_many(void *ud, const memd_inbox_item *i)
{
	conf_inbox *l = ud;
	cr_assert_geq(i->struct_size, sizeof(*i), "inbox item struct_size %u", i->struct_size);
	l->v = conf_grow(l->v, &l->cap, l->n + 1, sizeof(*l->v));
	conf_inbox_item_copy(i, &l->v[l->n++]);
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

int32_t conf_session_create_full(conf_store *st, const memd_session *s, conf_session *ret)
{
	memd_call c = conf_call(st);
	conf_session tmp = { 0 };
	memd_session_sink sink = { sizeof(sink), ret ? ret : &tmp, conf_session_one };
	int32_t r;

	CONF_ERR_RESET(st);
	r = st->ops->session_create(st->h, &c, s, NULL, &sink, &st->err);
	conf_session_clear(&tmp);
	return r;
}

int32_t conf_session_list_q(conf_store *st, const char *app, const char *user,
			    const memd_session_query *q, conf_sessions *out)
{
	memd_call c = conf_call(st);
	memd_scope sc = conf_scope(app, user, NULL);
	memd_session_query qq = *q;
	memd_session_sink sink = { sizeof(sink), out, conf_session_many };

	qq.struct_size = sizeof(qq);
	CONF_ERR_RESET(st);
	return st->ops->session_list(st->h, &c, &sc, &qq, &sink, &st->err);
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
	a.usage = o->usage;
	a.op = o->op;
	if (o->struct_size)
		a.struct_size = o->struct_size;
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

int32_t conf_events_load_q(conf_store *st, const memd_scope *sc, const memd_event_query *q,
			   conf_events *out)
{
	memd_call c = conf_call(st);
	memd_event_query qq = *q;
	memd_event_sink sink = { sizeof(sink), out, conf_event_many };

	qq.struct_size = sizeof(qq);
	CONF_ERR_RESET(st);
	return st->ops->events_load(st->h, &c, sc, &qq, &sink, &st->err);
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

/* ---- lanes ------------------------------------------------------------ */

#define CONF_NEED(st, op)                                                                 \
	do {                                                                              \
		if (!(st)->ops->op)                                                       \
			return conf_enotsup(st, #op);                                     \
	} while (0)

void conf_require_lanes(conf_store *st)
{
	const memd_store_ops *o = st->ops;
	const char *required = getenv("MEMD_CONFORMANCE_LANES");
	int all = o->lane_get && o->lane_write && o->lane_list && o->lane_delete &&
		  o->lane_prune && o->inbox_put && o->inbox_take && o->inbox_list &&
		  o->session_list_ended;

	if (all)
		return;
	if (loader_descriptor(st->plugin)->abi_minor < 2 && !(required && strcmp(required, "1") == 0))
		cr_skip_test("the plugin (ABI 1.%u) has no lane ops",
			     (unsigned)loader_descriptor(st->plugin)->abi_minor);
	cr_assert_fail("the plugin lacks some lane op (lane_get %p, lane_write %p, lane_list %p, "
		       "lane_delete %p, lane_prune %p, inbox_put %p, inbox_take %p, inbox_list %p, "
		       "session_list_ended %p)",
		       (void *)o->lane_get, (void *)o->lane_write, (void *)o->lane_list,
		       (void *)o->lane_delete, (void *)o->lane_prune, (void *)o->inbox_put,
		       (void *)o->inbox_take, (void *)o->inbox_list, (void *)o->session_list_ended);
}

int32_t conf_lane_get(conf_store *st, const char *app, const char *user, const char *key,
		      conf_lane *ret)
{
	memd_call c = conf_call(st);
	memd_scope sc = conf_scope(app, user, NULL);
	conf_lane tmp = { 0 };
	memd_lane_sink sink = { sizeof(sink), &tmp, conf_lane_one };
	int32_t r;

	CONF_ERR_RESET(st);
	CONF_NEED(st, lane_get);
	r = st->ops->lane_get(st->h, &c, &sc, key, &sink, NULL, &st->err);
	if (r == 0 && ret) {
		cr_assert_not_null(tmp.l.key, "lane_get delivered nothing");
		conf_lane_clear(ret);
		*ret = tmp;
	} else {
		conf_lane_clear(&tmp);
	}
	return r;
}

/* The sessions lane_get delivers to session_out, counted. */
typedef struct lane_session_got {
	conf_session *s;
	int n;
} lane_session_got;

static int32_t conf_lane_session_one(void *ud, const memd_session *s)
{
	lane_session_got *g = ud;
	g->n++;
	return conf_session_one(g->s, s);
}

int32_t conf_lane_get_session(conf_store *st, const char *app, const char *user,
			      const char *key, conf_lane *ret, conf_session *ret_session,
			      int *ret_delivered)
{
	memd_call c = conf_call(st);
	memd_scope sc = conf_scope(app, user, NULL);
	conf_lane tmp = { 0 };
	memd_lane_sink sink = { sizeof(sink), &tmp, conf_lane_one };
	lane_session_got got = { ret_session, 0 };
	memd_session_sink ssink = { sizeof(ssink), &got, conf_lane_session_one };
	int32_t r;

	CONF_ERR_RESET(st);
	CONF_NEED(st, lane_get);
	conf_session_clear(ret_session);
	r = st->ops->lane_get(st->h, &c, &sc, key, &sink, &ssink, &st->err);
	cr_assert_leq(got.n, 1, "lane_get delivered %d sessions", got.n);
	*ret_delivered = got.n;
	if (r == 0)
		cr_assert_not_null(tmp.l.key, "lane_get delivered nothing");
	if (r == 0 && ret) {
		conf_lane_clear(ret);
		*ret = tmp;
	} else {
		conf_lane_clear(&tmp);
	}
	return r;
}

int32_t conf_lane_write(conf_store *st, memd_lane_write *w, conf_lane *ret)
{
	memd_call c = conf_call(st);
	conf_lane tmp = { 0 };
	memd_lane_sink sink = { sizeof(sink), &tmp, conf_lane_one };
	int32_t r;

	CONF_ERR_RESET(st);
	CONF_NEED(st, lane_write);
	w->struct_size = sizeof(*w);
	r = st->ops->lane_write(st->h, &c, w, &sink, &st->err);
	if (r == 0) {
		cr_assert_not_null(tmp.l.key, "lane_write delivered no lane");
		if (ret) {
			conf_lane_clear(ret);
			*ret = tmp;
			return r;
		}
	}
	conf_lane_clear(&tmp);
	return r;
}

int32_t conf_lane_list(conf_store *st, memd_lane_query *q, conf_lanes *out)
{
	memd_call c = conf_call(st);
	memd_lane_sink sink = { sizeof(sink), out, conf_lane_many };

	CONF_ERR_RESET(st);
	CONF_NEED(st, lane_list);
	q->struct_size = sizeof(*q);
	return st->ops->lane_list(st->h, &c, q, &sink, &st->err);
}

int32_t conf_lane_delete(conf_store *st, const char *app, const char *user, const char *key)
{
	memd_call c = conf_call(st);
	memd_scope sc = conf_scope(app, user, NULL);

	CONF_ERR_RESET(st);
	CONF_NEED(st, lane_delete);
	return st->ops->lane_delete(st->h, &c, &sc, key, &st->err);
}

int32_t conf_lane_prune(conf_store *st, int64_t updated_before_us, uint32_t limit,
			uint32_t *ret_count)
{
	memd_call c = conf_call(st);

	CONF_ERR_RESET(st);
	CONF_NEED(st, lane_prune);
	return st->ops->lane_prune(st->h, &c, updated_before_us, limit, ret_count, &st->err);
}

int32_t conf_inbox_put(conf_store *st, const char *app, const char *user, const char *key,
		       const char *id, uint32_t mode, const char *body_json, int64_t created_us,
		       uint32_t *ret_depth)
{
	memd_call c = conf_call(st);
	memd_scope sc = conf_scope(app, user, NULL);
	memd_inbox_item item = { .struct_size = sizeof(item), .mode = mode, .id = id,
				 .body_json = body_json, .created_us = created_us };
	uint32_t depth = 0;

	CONF_ERR_RESET(st);
	CONF_NEED(st, inbox_put);
	return st->ops->inbox_put(st->h, &c, &sc, key, &item, ret_depth ? ret_depth : &depth,
				  &st->err);
}

int32_t conf_inbox_take(conf_store *st, const char *app, const char *user, const char *key,
			const char *turn_id, int64_t now_us, conf_inbox_item *ret,
			uint32_t *ret_depth)
{
	memd_call c = conf_call(st);
	memd_scope sc = conf_scope(app, user, NULL);
	conf_inbox_item tmp = { 0 };
	memd_inbox_sink sink = { sizeof(sink), &tmp, conf_inbox_one };
	uint32_t depth = 0;
	int32_t r;

	CONF_ERR_RESET(st);
	CONF_NEED(st, inbox_take);
	r = st->ops->inbox_take(st->h, &c, &sc, key, turn_id, now_us, &sink,
				ret_depth ? ret_depth : &depth, &st->err);
	if (r == 0 && ret) {
		conf_inbox_item_clear(ret);
		*ret = tmp;
	} else {
		conf_inbox_item_clear(&tmp);
	}
	return r;
}

int32_t conf_inbox_list(conf_store *st, const char *app, const char *user, const char *key,
			conf_inbox *out)
{
	memd_call c = conf_call(st);
	memd_scope sc = conf_scope(app, user, NULL);
	memd_inbox_sink sink = { sizeof(sink), out, conf_inbox_many };

	CONF_ERR_RESET(st);
	CONF_NEED(st, inbox_list);
	return st->ops->inbox_list(st->h, &c, &sc, key, &sink, &st->err);
}

int32_t conf_session_list_ended(conf_store *st, int64_t ended_before_us, uint32_t limit,
				conf_sessions *out)
{
	memd_call c = conf_call(st);
	memd_session_sink sink = { sizeof(sink), out, conf_session_many };

	CONF_ERR_RESET(st);
	CONF_NEED(st, session_list_ended);
	return st->ops->session_list_ended(st->h, &c, ended_before_us, limit, &sink, &st->err);
}

void *conf_twin_open(conf_store *st)
{
	memd_error err = { .struct_size = sizeof(err) };
	loader_instance *twin = NULL;
	int32_t r = loader_instance_create(st->plugin, CONF_INSTANCE_NAME, st->cfg, "plugin",
					   NULL, &twin, &err);

	cr_assert_eq(r, 0, "a second instance (%s): %s", st->config_text, err.msg);
	return twin;
}

void conf_twin_close(void *twin)
{
	loader_instance_destroy(twin);
}

void *conf_twin_handle(void *twin)
{
	return loader_instance_handle(twin);
}

void conf_race_instances(conf_store *st, void **ret_twin, void *h[2])
{
	*ret_twin = NULL;
	h[0] = h[1] = st->h;
	if (st->durable) {
		*ret_twin = conf_twin_open(st);
		h[1] = conf_twin_handle(*ret_twin);
	} else if (!st->threadsafe) {
		cr_skip_test("the plugin is neither durable nor THREADSAFE: nothing can race");
	}
}

void conf_race_round(conf_store *st, void *h[2], int round, void *(*fn)(void *),
		     conf_racer *racers, int n)
{
	pthread_barrier_t start;
	pthread_t th[CONF_RACE_MAX];

	cr_assert(n > 0 && n <= CONF_RACE_MAX, "a race of %d threads", n);
	pthread_barrier_init(&start, NULL, (unsigned)n);
	for (int t = 0; t < n; t++) {
		racers[t] = (conf_racer){ .h = h[t % 2], .ops = st->ops, .start = &start,
					  .thread = t, .round = round };
		cr_assert_eq(pthread_create(&th[t], NULL, fn, &racers[t]), 0);
	}
	for (int t = 0; t < n; t++)
		pthread_join(th[t], NULL);
	pthread_barrier_destroy(&start);
}

/* ---- transcripts ------------------------------------------------------ */

void conf_require_transcripts(conf_store *st)
{
	const memd_store_ops *o = st->ops;
	int some = o->operation_list || o->operation_get || o->state_history;
	int all = o->operation_list && o->operation_get && o->state_history;

	const char *required = getenv("MEMD_CONFORMANCE_TRANSCRIPTS");

	if (all)
		return;
	if (!some && !(required && strcmp(required, "1") == 0))
		cr_skip_test("the plugin has no transcript ops yet");
	cr_assert_fail("the plugin lacks some transcript op (operation_list %p, operation_get %p, "
		       "state_history %p)",
		       (void *)o->operation_list, (void *)o->operation_get,
		       (void *)o->state_history);
}

static void conf_operation_copy(const memd_operation *in, conf_operation *out)
{
	out->o = *in;
	out->o.id = tc_strdup(in->id);
	out->o.undo_of = tc_strdup(in->undo_of);
	out->o.undone_by = tc_strdup(in->undone_by);
}

void conf_operation_clear(conf_operation *o)
{
	if (!o)
		return;
	free((char *)o->o.id);
	free((char *)o->o.undo_of);
	free((char *)o->o.undone_by);
	memset(o, 0, sizeof(*o));
}

void conf_operations_clear(conf_operations *l)
{
	for (size_t i = 0; i < l->n; i++)
		conf_operation_clear(&l->v[i]);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

void conf_state_changes_clear(conf_state_changes *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free((char *)l->v[i].c.key);
		free((char *)l->v[i].c.old_json);
		free((char *)l->v[i].c.new_json);
		free((char *)l->v[i].c.operation);
	}
	free(l->v);
	memset(l, 0, sizeof(*l));
}

static int32_t conf_operation_many(void *ud, const memd_operation *o)
{
	conf_operations *l = ud;
	cr_assert_geq(o->struct_size, sizeof(*o), "operation struct_size %u", o->struct_size);
	l->v = conf_grow(l->v, &l->cap, l->n + 1, sizeof(*l->v));
	conf_operation_copy(o, &l->v[l->n++]);
	return 0;
}

static int32_t conf_state_change_many(void *ud, const memd_state_change *c)
{
	conf_state_changes *l = ud;
	conf_state_change *d;

	cr_assert_geq(c->struct_size, sizeof(*c), "state change struct_size %u", c->struct_size);
	l->v = conf_grow(l->v, &l->cap, l->n + 1, sizeof(*l->v));
	d = &l->v[l->n++];
	d->c = *c;
	d->c.key = tc_strdup(c->key);
	d->c.old_json = tc_strdup(c->old_json);
	d->c.new_json = tc_strdup(c->new_json);
	d->c.operation = tc_strdup(c->operation);
	return 0;
}

int32_t conf_operation_list(conf_store *st, const memd_scope *sc, uint32_t limit,
			    conf_operations *out)
{
	memd_call c = conf_call(st);
	memd_operation_sink sink = { sizeof(sink), out, conf_operation_many };

	CONF_ERR_RESET(st);
	CONF_NEED(st, operation_list);
	return st->ops->operation_list(st->h, &c, sc, limit, &sink, &st->err);
}

int32_t conf_operation_get(conf_store *st, const memd_scope *sc, const char *id,
			   conf_operation *ret)
{
	memd_call c = conf_call(st);
	conf_operations l = { 0 };
	memd_operation_sink sink = { sizeof(sink), &l, conf_operation_many };
	int32_t r;

	CONF_ERR_RESET(st);
	CONF_NEED(st, operation_get);
	r = st->ops->operation_get(st->h, &c, sc, id, &sink, &st->err);
	if (r == 0) {
		cr_assert_eq(l.n, 1, "operation_get delivered %zu operations", l.n);
		conf_operation_clear(ret);
		*ret = l.v[0];
		l.n = 0;
	}
	conf_operations_clear(&l);
	return r;
}

int32_t conf_state_history(conf_store *st, const memd_scope *sc, memd_state_history_query *q,
			   conf_state_changes *out)
{
	memd_call c = conf_call(st);
	memd_state_change_sink sink = { sizeof(sink), out, conf_state_change_many };

	CONF_ERR_RESET(st);
	CONF_NEED(st, state_history);
	q->struct_size = sizeof(*q);
	return st->ops->state_history(st->h, &c, sc, q, &sink, &st->err);
}

static int32_t conf_text_keep(void *ud, const char *text, size_t len)
{
	char **dst = ud;
	free(*dst);
	*dst = malloc(len + 1);
	cr_assert_not_null(*dst);
	memcpy(*dst, text, len);
	(*dst)[len] = '\0';
	return 0;
}

memd_text_sink conf_text_sink(char **dst)
{
	memd_text_sink s = { sizeof(s), dst, conf_text_keep };
	return s;
}

/* ---- memories --------------------------------------------------------- */

void conf_require_memories(conf_store *st)
{
	const memd_store_ops *o = st->ops;
	int some = o->memory_commit || o->memory_get || o->memory_list || o->memory_history ||
		   o->memory_expire || o->session_list_pending;
	int all = o->memory_commit && o->memory_get && o->memory_list && o->memory_history &&
		  o->memory_expire && o->session_list_pending;
	const char *required = getenv("MEMD_CONFORMANCE_MEMORIES");

	if (all)
		return;
	if (!some && !(required && strcmp(required, "1") == 0))
		cr_skip_test("the plugin has no memory ops yet");
	cr_assert_fail("the plugin lacks some memory op (memory_commit %p, memory_get %p, "
		       "memory_list %p, memory_history %p, memory_expire %p, "
		       "session_list_pending %p)",
		       (void *)o->memory_commit, (void *)o->memory_get, (void *)o->memory_list,
		       (void *)o->memory_history, (void *)o->memory_expire,
		       (void *)o->session_list_pending);
}

void conf_memory_clear(conf_memory *m)
{
	if (m)
		conf_memory_release(&m->m);
}

void conf_memories_clear(conf_memories *l)
{
	for (size_t i = 0; i < l->n; i++)
		conf_memory_release(&l->v[i].m);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

void conf_memory_changes_clear(conf_memory_changes *l)
{
	for (size_t i = 0; i < l->n; i++) {
		conf_memory_release(&l->v[i].memory);
		free(l->v[i].actor);
		free(l->v[i].reason);
	}
	free(l->v);
	memset(l, 0, sizeof(*l));
}

static int32_t conf_memory_many(void *ud, const memd_memory *m)
{
	conf_memories *l = ud;
	cr_assert_geq(m->struct_size, sizeof(*m), "memory struct_size %u", m->struct_size);
	l->v = conf_grow(l->v, &l->cap, l->n + 1, sizeof(*l->v));
	conf_memory_copy(m, &l->v[l->n++].m);
	return 0;
}

static int32_t conf_memory_change_many(void *ud, const memd_memory_change *c)
{
	conf_memory_changes *l = ud;
	conf_memory_change *d;

	cr_assert_geq(c->struct_size, sizeof(*c), "memory change struct_size %u", c->struct_size);
	cr_assert_not_null(c->memory, "a memory change without its memory");
	cr_assert_geq(c->memory->struct_size, sizeof(*c->memory), "memory struct_size %u",
		      c->memory->struct_size);
	l->v = conf_grow(l->v, &l->cap, l->n + 1, sizeof(*l->v));
	d = &l->v[l->n++];
	memset(d, 0, sizeof(*d));
	d->op = c->op;
	conf_memory_copy(c->memory, &d->memory);
	d->actor = tc_strdup(c->actor);
	d->reason = tc_strdup(c->reason);
	d->at_us = c->at_us;
	return 0;
}

int32_t conf_memory_commit(conf_store *st, const char *app, const char *user,
			   memd_memory_commit *c, conf_memories *out)
{
	memd_call call = conf_call(st);
	memd_scope sc = conf_scope(app, user, NULL);
	conf_memories tmp = { 0 };
	memd_memory_sink sink = { sizeof(sink), out ? out : &tmp, conf_memory_many };
	int32_t r;

	CONF_ERR_RESET(st);
	CONF_NEED(st, memory_commit);
	c->struct_size = sizeof(*c);
	r = st->ops->memory_commit(st->h, &call, &sc, c, &sink, &st->err);
	conf_memories_clear(&tmp);
	return r;
}

int32_t conf_memory_get(conf_store *st, const char *app, const char *user, const char *id,
			int64_t now_us, conf_memory *ret)
{
	memd_call call = conf_call(st);
	memd_scope sc = conf_scope(app, user, NULL);
	conf_memories l = { 0 };
	memd_memory_sink sink = { sizeof(sink), &l, conf_memory_many };
	int32_t r;

	CONF_ERR_RESET(st);
	CONF_NEED(st, memory_get);
	r = st->ops->memory_get(st->h, &call, &sc, id, now_us, &sink, &st->err);
	if (r == 0) {
		cr_assert_eq(l.n, 1, "memory_get(%s) delivered %zu memories", id, l.n);
		if (ret) {
			conf_memory_clear(ret);
			*ret = l.v[0];
			l.n = 0;
		}
	}
	conf_memories_clear(&l);
	return r;
}

int32_t conf_memory_list(conf_store *st, const char *app, const char *user,
			 memd_memory_query *q, conf_memories *out)
{
	memd_call call = conf_call(st);
	memd_scope sc = conf_scope(app, user, NULL);
	memd_memory_sink sink = { sizeof(sink), out, conf_memory_many };

	CONF_ERR_RESET(st);
	CONF_NEED(st, memory_list);
	q->struct_size = sizeof(*q);
	return st->ops->memory_list(st->h, &call, &sc, q, &sink, &st->err);
}

int32_t conf_memory_history(conf_store *st, const char *app, const char *user, const char *id,
			    conf_memory_changes *out)
{
	memd_call call = conf_call(st);
	memd_scope sc = conf_scope(app, user, NULL);
	memd_memory_change_sink sink = { sizeof(sink), out, conf_memory_change_many };

	CONF_ERR_RESET(st);
	CONF_NEED(st, memory_history);
	return st->ops->memory_history(st->h, &call, &sc, id, &sink, &st->err);
}

int32_t conf_memory_expire(conf_store *st, int64_t now_us, uint32_t limit, uint32_t *ret_count)
{
	memd_call call = conf_call(st);

	CONF_ERR_RESET(st);
	CONF_NEED(st, memory_expire);
	return st->ops->memory_expire(st->h, &call, now_us, limit, ret_count, &st->err);
}

int32_t conf_session_list_pending(conf_store *st, memd_pending_query *q, conf_sessions *out)
{
	memd_call call = conf_call(st);
	memd_session_sink sink = { sizeof(sink), out, conf_session_many };

	CONF_ERR_RESET(st);
	CONF_NEED(st, session_list_pending);
	q->struct_size = sizeof(*q);
	return st->ops->session_list_pending(st->h, &call, q, &sink, &st->err);
}

/* ---- checkpoints (since 1.5) ------------------------------------------ */

void conf_require_checkpoints(conf_store *st)
{
	const memd_store_ops *o = st->ops;
	int some = o->checkpoint_put || o->checkpoint_put_writes || o->checkpoint_get ||
		   o->checkpoint_list || o->checkpoint_delete || o->checkpoint_resumable ||
		   o->checkpoint_expire;
	int all = o->checkpoint_put && o->checkpoint_put_writes && o->checkpoint_get &&
		  o->checkpoint_list && o->checkpoint_delete && o->checkpoint_resumable &&
		  o->checkpoint_expire;
	const char *required = getenv("MEMD_CONFORMANCE_CHECKPOINTS");

	if (all)
		return;
	if (!some && !(required && strcmp(required, "1") == 0))
		cr_skip_test("the plugin has no checkpoint ops yet");
	cr_assert_fail("the plugin lacks some checkpoint op (put %p, put_writes %p, get %p, "
		       "list %p, delete %p, resumable %p, expire %p)",
		       (void *)o->checkpoint_put, (void *)o->checkpoint_put_writes,
		       (void *)o->checkpoint_get, (void *)o->checkpoint_list,
		       (void *)o->checkpoint_delete, (void *)o->checkpoint_resumable,
		       (void *)o->checkpoint_expire);
}

/* The first ABI minor whose stores keep the task paths of pending writes. */
#define CONF_TASK_PATHS_MINOR 6

void conf_require_task_paths(conf_store *st)
{
	const char *required = getenv("MEMD_CONFORMANCE_TASK_PATHS");
	uint32_t minor = loader_descriptor(st->plugin)->abi_minor;

	if (minor < CONF_TASK_PATHS_MINOR && !(required && strcmp(required, "1") == 0))
		cr_skip_test("the plugin (ABI 1.%u) keeps no task paths", (unsigned)minor);
}

/* A malloc'd copy of n bytes plus a NUL (so 0 bytes is a valid pointer). */
static void *conf_bytes_dup(const void *p, uint64_t n)
{
	char *d = malloc((size_t)n + 1);

	cr_assert_not_null(d, "out of memory");
	if (n) {
		cr_assert_not_null(p, "%llu bytes delivered through a NULL pointer",
				   (unsigned long long)n);
		memcpy(d, p, (size_t)n);
	}
	d[n] = '\0';
	return d;
}

void conf_checkpoint_clear(conf_checkpoint *c)
{
	if (!c)
		return;
	free((char *)c->c.app);
	free((char *)c->c.user);
	free((char *)c->c.session);
	free((char *)c->c.ns);
	free((char *)c->c.id);
	free((char *)c->c.parent_id);
	free((char *)c->c.type);
	free((void *)c->c.payload);
	free((char *)c->c.metadata_json);
	for (size_t i = 0; i < c->n_w; i++) {
		free(c->w[i].task_id);
		free(c->w[i].task_path);
		free(c->w[i].channel);
		free(c->w[i].type);
		free(c->w[i].value);
	}
	free(c->w);
	memset(c, 0, sizeof(*c));
}

void conf_checkpoints_clear(conf_checkpoints *l)
{
	for (size_t i = 0; i < l->n; i++)
		conf_checkpoint_clear(&l->v[i]);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

static int32_t conf_checkpoint_many(void *ud, const memd_checkpoint *in)
{
	conf_checkpoints *l = ud;
	conf_checkpoint *d;

	cr_assert_geq(in->struct_size, sizeof(*in), "checkpoint struct_size %u", in->struct_size);
	l->v = conf_grow(l->v, &l->cap, l->n + 1, sizeof(*l->v));
	d = &l->v[l->n++];
	memset(d, 0, sizeof(*d));
	d->c = *in;
	d->c.app = tc_strdup(in->app);
	d->c.user = tc_strdup(in->user);
	d->c.session = tc_strdup(in->session);
	d->c.ns = tc_strdup(in->ns);
	d->c.id = tc_strdup(in->id);
	d->c.parent_id = tc_strdup(in->parent_id);
	d->c.type = tc_strdup(in->type);
	d->c.metadata_json = tc_strdup(in->metadata_json);
	d->c.payload = in->payload ? conf_bytes_dup(in->payload, in->payload_size) : NULL;
	return 0;
}

/* Copy a write to the last checkpoint of ud (a conf_checkpoints), with
 * task_path (NULL: delivered through write). */
static void conf_checkpoint_write_add(void *ud, const memd_checkpoint_write *in,
				      const char *task_path)
{
	conf_checkpoints *l = ud;
	conf_checkpoint *c;
	conf_ckwrite *d;

	cr_assert_geq(in->struct_size, sizeof(*in), "checkpoint write struct_size %u",
		      in->struct_size);
	cr_assert_gt(l->n, 0, "a checkpoint write delivered before any checkpoint");
	c = &l->v[l->n - 1];
	c->w = conf_grow(c->w, &c->cap_w, c->n_w + 1, sizeof(*c->w));
	d = &c->w[c->n_w++];
	d->task_id = tc_strdup(in->task_id);
	d->task_path = tc_strdup(task_path);
	d->channel = tc_strdup(in->channel);
	d->type = tc_strdup(in->type);
	d->idx = in->idx;
	d->value = conf_bytes_dup(in->value, in->value_size);
	d->value_size = in->value_size;
}

static int32_t conf_checkpoint_write_many(void *ud, const memd_checkpoint_write *in)
{
	conf_checkpoint_write_add(ud, in, NULL);
	return 0;
}

static int32_t conf_checkpoint_task_write_many(void *ud, const memd_checkpoint_write *in,
					       const char *task_path)
{
	cr_assert_not_null(task_path, "task_write delivered a NULL task path (\"\" = none)");
	conf_checkpoint_write_add(ud, in, task_path);
	return 0;
}

int32_t conf_checkpoint_put(conf_store *st, const memd_checkpoint *c, int create_session,
			    int64_t now_us, int *ret_created)
{
	memd_call call = conf_call(st);

	CONF_ERR_RESET(st);
	CONF_NEED(st, checkpoint_put);
	return st->ops->checkpoint_put(st->h, &call, c, create_session, now_us, ret_created,
				       &st->err);
}

int32_t conf_checkpoint_put_writes(conf_store *st, const memd_scope *sc,
				   memd_checkpoint_writes *w)
{
	memd_call call = conf_call(st);

	CONF_ERR_RESET(st);
	CONF_NEED(st, checkpoint_put_writes);
	w->struct_size = sizeof(*w);
	return st->ops->checkpoint_put_writes(st->h, &call, sc, w, &st->err);
}

int32_t conf_checkpoint_get(conf_store *st, const memd_scope *sc, const char *ns,
			    const char *id, int64_t now_us, int with_writes, conf_checkpoint *ret)
{
	memd_call call = conf_call(st);
	conf_checkpoints l = { 0 };
	memd_checkpoint_sink sink = { sizeof(sink), &l, conf_checkpoint_many,
				      with_writes ? conf_checkpoint_write_many : NULL,
				      with_writes ? conf_checkpoint_task_write_many : NULL };
	int32_t r;

	CONF_ERR_RESET(st);
	CONF_NEED(st, checkpoint_get);
	r = st->ops->checkpoint_get(st->h, &call, sc, ns, id, now_us, &sink, &st->err);
	if (r == 0) {
		cr_assert_eq(l.n, 1, "checkpoint_get(%s) delivered %zu checkpoints",
			     id ? id : "(latest)", l.n);
		if (ret) {
			conf_checkpoint_clear(ret);
			*ret = l.v[0];
			l.n = 0;
		}
	}
	conf_checkpoints_clear(&l);
	return r;
}

int32_t conf_checkpoint_list(conf_store *st, const char *app, const char *user,
			     memd_checkpoint_query *q, int with_writes, conf_checkpoints *out)
{
	memd_call call = conf_call(st);
	memd_scope sc = conf_scope(app, user, NULL);
	memd_checkpoint_sink sink = { sizeof(sink), out, conf_checkpoint_many,
				      with_writes ? conf_checkpoint_write_many : NULL,
				      with_writes ? conf_checkpoint_task_write_many : NULL };

	CONF_ERR_RESET(st);
	CONF_NEED(st, checkpoint_list);
	q->struct_size = sizeof(*q);
	return st->ops->checkpoint_list(st->h, &call, &sc, q, &sink, &st->err);
}

int32_t conf_checkpoint_delete(conf_store *st, const memd_scope *sc, const char *ns,
			       uint32_t *ret_count)
{
	memd_call call = conf_call(st);

	CONF_ERR_RESET(st);
	CONF_NEED(st, checkpoint_delete);
	return st->ops->checkpoint_delete(st->h, &call, sc, ns, ret_count, &st->err);
}

int32_t conf_checkpoint_resumable(conf_store *st, memd_resumable_query *q,
				  conf_checkpoints *out)
{
	memd_call call = conf_call(st);
	memd_checkpoint_sink sink = { sizeof(sink), out, conf_checkpoint_many, NULL, NULL };

	CONF_ERR_RESET(st);
	CONF_NEED(st, checkpoint_resumable);
	q->struct_size = sizeof(*q);
	return st->ops->checkpoint_resumable(st->h, &call, q, &sink, &st->err);
}

int32_t conf_checkpoint_expire(conf_store *st, int64_t now_us, uint32_t limit,
			       uint32_t *ret_count)
{
	memd_call call = conf_call(st);

	CONF_ERR_RESET(st);
	CONF_NEED(st, checkpoint_expire);
	return st->ops->checkpoint_expire(st->h, &call, now_us, limit, ret_count, &st->err);
}

/* ---- tasks (since 1.5) ------------------------------------------------ */

void conf_require_tasks(conf_store *st)
{
	const memd_store_ops *o = st->ops;
	int some = o->task_put || o->task_get || o->task_list || o->task_delete;
	int all = o->task_put && o->task_get && o->task_list && o->task_delete;
	const char *required = getenv("MEMD_CONFORMANCE_TASKS");

	if (all)
		return;
	if (!some && !(required && strcmp(required, "1") == 0))
		cr_skip_test("the plugin has no task ops yet");
	cr_assert_fail("the plugin lacks some task op (task_put %p, task_get %p, task_list %p, "
		       "task_delete %p)",
		       (void *)o->task_put, (void *)o->task_get, (void *)o->task_list,
		       (void *)o->task_delete);
}

void conf_task_clear(conf_task *t)
{
	if (!t)
		return;
	free((char *)t->t.app);
	free((char *)t->t.id);
	free((char *)t->t.context_id);
	free((char *)t->t.user);
	free((char *)t->t.state);
	free((char *)t->t.task_json);
	memset(t, 0, sizeof(*t));
}

void conf_tasks_clear(conf_tasks *l)
{
	for (size_t i = 0; i < l->n; i++)
		conf_task_clear(&l->v[i]);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

static int32_t conf_task_many(void *ud, const memd_task *in)
{
	conf_tasks *l = ud;
	memd_task *d;

	cr_assert_geq(in->struct_size, sizeof(*in), "task struct_size %u", in->struct_size);
	l->v = conf_grow(l->v, &l->cap, l->n + 1, sizeof(*l->v));
	d = &l->v[l->n++].t;
	*d = *in;
	d->app = tc_strdup(in->app);
	d->id = tc_strdup(in->id);
	d->context_id = tc_strdup(in->context_id);
	d->user = tc_strdup(in->user);
	d->state = tc_strdup(in->state);
	d->task_json = tc_strdup(in->task_json);
	return 0;
}

/* The one task of l into ret (cleared first; may be NULL); what names the
 * op for the message. */
static void conf_task_take_one(conf_tasks *l, conf_task *ret, const char *what)
{
	cr_assert_eq(l->n, 1, "%s delivered %zu tasks", what, l->n);
	if (ret) {
		conf_task_clear(ret);
		*ret = l->v[0];
		l->n = 0;
	}
}

int32_t conf_task_put(conf_store *st, const memd_task *t, uint32_t flags,
		      int64_t expected_version, int64_t now_us, conf_task *ret)
{
	memd_call call = conf_call(st);
	conf_tasks l = { 0 };
	memd_task_sink sink = { sizeof(sink), &l, conf_task_many };
	int32_t r;

	CONF_ERR_RESET(st);
	CONF_NEED(st, task_put);
	r = st->ops->task_put(st->h, &call, t, flags, expected_version, now_us, &sink, &st->err);
	if (r == 0)
		conf_task_take_one(&l, ret, "task_put");
	else
		cr_assert_eq(l.n, 0, "a failed task_put delivered %zu tasks", l.n);
	conf_tasks_clear(&l);
	return r;
}

int32_t conf_task_get(conf_store *st, const char *app, const char *id, conf_task *ret)
{
	memd_call call = conf_call(st);
	conf_tasks l = { 0 };
	memd_task_sink sink = { sizeof(sink), &l, conf_task_many };
	int32_t r;

	CONF_ERR_RESET(st);
	CONF_NEED(st, task_get);
	r = st->ops->task_get(st->h, &call, app, id, &sink, &st->err);
	if (r == 0)
		conf_task_take_one(&l, ret, "task_get");
	conf_tasks_clear(&l);
	return r;
}

int32_t conf_task_list(conf_store *st, memd_task_query *q, conf_tasks *out)
{
	memd_call call = conf_call(st);
	memd_task_sink sink = { sizeof(sink), out, conf_task_many };

	CONF_ERR_RESET(st);
	CONF_NEED(st, task_list);
	q->struct_size = sizeof(*q);
	return st->ops->task_list(st->h, &call, q, &sink, &st->err);
}

int32_t conf_task_delete(conf_store *st, const char *app, const char *id,
			 int64_t expected_version)
{
	memd_call call = conf_call(st);

	CONF_ERR_RESET(st);
	CONF_NEED(st, task_delete);
	return st->ops->task_delete(st->h, &call, app, id, expected_version, &st->err);
}
