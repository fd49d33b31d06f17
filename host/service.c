/* SPDX-License-Identifier: MIT */
/*
 * service: the libmemd facade. Opens what config names (stores, strategies)
 * through the loader, and implements every memd_* call of api/memd/memd.h
 * over the store and strategy wrappers, with request validation in one
 * place so the HTTP server and the CLI stay thin.
 */
#include "service_int.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "event_json.h"
#include "memd-build.h"
#include "prom.h"
#include "title.h"
#include "uuid.h"

#define PATH_ENV "MEMD_PLUGIN_PATH"
#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)
#define TEMP_PREFIX "temp:"
#define STATE_KEY_MAX 1024
#define MIME_MAX 255
#define MIME_DEFAULT "application/octet-stream"

static void log_to_svc(memd *m, int32_t level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void log_to_svc(memd *m, int32_t level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	hostsvc_logv(m->svc, level, "memd", fmt, ap);
	va_end(ap);
}

void service_free_strv(char **v)
{
	if (!v)
		return;
	for (size_t i = 0; v[i]; i++)
		free(v[i]);
	free(v);
}

char **service_build_search(const char *const *extra, const char *const *configured)
{
	const char *env = getenv(PATH_ENV);
	size_t cap = 2, n = 0;
	char **v;

	if (env)
		for (const char *p = env; *p; p++)
			cap += *p == ':';
	cap++;
	for (size_t i = 0; extra && extra[i]; i++)
		cap++;
	for (size_t i = 0; configured && configured[i]; i++)
		cap++;
	v = calloc(cap + 1, sizeof(*v));
	if (!v)
		return NULL;
	if (env) {
		const char *p = env;
		while (*p) {
			size_t len = strcspn(p, ":");
			if (len && !(v[n++] = strndup(p, len)))
				goto nomem;
			p += len;
			if (*p == ':')
				p++;
		}
	}
	for (size_t i = 0; extra && extra[i]; i++)
		if (!(v[n++] = strdup(extra[i])))
			goto nomem;
	for (size_t i = 0; configured && configured[i]; i++)
		if (!(v[n++] = strdup(configured[i])))
			goto nomem;
	if (!(v[n++] = strdup(MEMD_PLUGINDIR)))
		goto nomem;
	return v;
nomem:
	service_free_strv(v);
	return NULL;
}

/* Load name (once per process-lifetime of m) through the registry. */
static int32_t registry_open(memd *m, const char *name, loader_plugin **ret, memd_error *err)
{
	loader_plugin *p, **grown;
	int32_t r;

	for (size_t i = 0; i < m->n_plugins; i++) {
		const memd_plugin *d = loader_descriptor(m->plugins[i]);
		if (strcmp(d->name, name) == 0 || strcmp(loader_path(m->plugins[i]), name) == 0) {
			*ret = m->plugins[i];
			return 0;
		}
	}
	r = loader_open(name, (const char *const *)m->search, &p, err);
	if (r < 0)
		return r;
	/* The same file may be reachable by name and by path. */
	for (size_t i = 0; i < m->n_plugins; i++) {
		if (strcmp(loader_path(m->plugins[i]), loader_path(p)) == 0) {
			loader_close(p);
			*ret = m->plugins[i];
			return 0;
		}
	}
	grown = realloc(m->plugins, (m->n_plugins + 1) * sizeof(*grown));
	if (!grown) {
		loader_close(p);
		return service_oom(err);
	}
	m->plugins = grown;
	m->plugins[m->n_plugins++] = p;
	log_to_svc(m, MEMD_LOG_INFO, "loaded plugin %s %s from %s", loader_descriptor(p)->name,
		   loader_descriptor(p)->version ? loader_descriptor(p)->version : "?",
		   loader_path(p));
	*ret = p;
	return 0;
}

static int32_t open_stores(memd *m, memd_error *err)
{
	m->stores = calloc(m->set.n_stores ? m->set.n_stores : 1, sizeof(*m->stores));
	if (!m->stores)
		return service_oom(err);
	for (size_t i = 0; i < m->set.n_stores; i++) {
		const settings_store *ss = &m->set.stores[i];
		named_store *ns = &m->stores[m->n_stores];
		char slot[SLOT_NAME_MAX];
		loader_plugin *p;
		loader_instance *inst;
		int is_sessions = strcmp(ss->name, m->set.sessions_store) == 0;
		int32_t r;

		snprintf(slot, sizeof(slot), "stores.%s", ss->name);
		if ((r = registry_open(m, ss->plugin, &p, err)) < 0)
			return r;
		if (is_sessions && (r = loader_require_kind(p, MEMD_KIND_STORE, slot, err)) < 0)
			return r;
		if ((r = loader_instance_create(p, slot, ss->node, "plugin", m->svc, &inst, err)) < 0)
			return r;
		ns->name = strdup(ss->name);
		if (!ns->name) {
			loader_instance_destroy(inst);
			return service_oom(err);
		}
		ns->inst = inst;
		m->n_stores++;
		if (loader_descriptor(p)->kind & MEMD_KIND_STORE) {
			if ((r = store_new(inst, &ns->st, err)) < 0) {
				loader_instance_destroy(inst);
				return r;
			}
			if (is_sessions)
				m->sessions = ns->st;
		} else {
			ns->other = inst;
		}
	}
	if (!m->sessions)
		return memd_error_set(err, MEMD_EINVAL, 0, "sessions.store '%s' is not configured",
				      m->set.sessions_store);
	return 0;
}

static int32_t open_strategies(memd *m, memd_error *err)
{
	m->apps = calloc(m->set.n_apps ? m->set.n_apps : 1, sizeof(*m->apps));
	if (!m->apps)
		return service_oom(err);
	for (size_t i = 0; i < m->set.n_apps; i++) {
		const settings_app *sa = &m->set.apps[i];
		char slot[SLOT_NAME_MAX];
		loader_plugin *p;
		loader_instance *inst;
		int32_t r;

		snprintf(slot, sizeof(slot), "apps.%s.working_memory", sa->name);
		if ((r = registry_open(m, sa->strategy, &p, err)) < 0)
			return r;
		if ((r = loader_require_kind(p, MEMD_KIND_STRATEGY, slot, err)) < 0)
			return r;
		if ((r = loader_instance_create(p, slot, sa->node, "strategy", m->svc, &inst, err)) < 0)
			return r;
		if ((r = strategy_new(inst, &m->apps[m->n_apps].st, err)) < 0) {
			loader_instance_destroy(inst);
			return r;
		}
		m->apps[m->n_apps].inst = inst;
		m->apps[m->n_apps].app = strdup(sa->name);
		m->n_apps++;
		if (!m->apps[m->n_apps - 1].app)
			return service_oom(err);
	}
	return 0;
}

/* The search indexes over the session store (and index.vector.store). */
static int32_t open_index(memd *m, memd_error *err)
{
	const loader_instance *vec = NULL;
	for (size_t i = 0; m->set.vector_store && i < m->n_stores; i++)
		if (strcmp(m->stores[i].name, m->set.vector_store) == 0)
			vec = m->stores[i].inst;
	return index_open(&m->set, m->sessions, vec, m->svc, &m->index, err);
}

/* The first diagnostic, and how many more there are, as err. */
static int32_t diag_error(const config_diag *d, memd_error *err)
{
	if (!d->n)
		return memd_error_set(err, MEMD_EINVAL, 0, "invalid config");
	if (d->n == 1)
		return memd_error_set(err, MEMD_EINVAL, 0, "%s", d->lines[0]);
	return memd_error_set(err, MEMD_EINVAL, 0, "%s (and %zu more problems: run memd config check)",
			      d->lines[0], d->n - 1);
}

static int32_t load_settings(const char *path, settings *ret, memd_error *err)
{
	config_node *root = NULL;
	config_diag d = { 0 };
	int32_t r;

	if (path && (r = config_parse_file(path, &root, err)) < 0)
		return r;
	r = settings_load(root, ret, &d);
	if (r == MEMD_ENOMEM)
		r = service_oom(err);
	else if (r < 0)
		r = diag_error(&d, err);
	config_diag_clear(&d);
	return r;
}

int32_t memd_open(const memd_options *opts, memd **ret, memd_error *err)
{
	memd_options o = { 0 };
	memd *m;
	int32_t r;

	if (opts)
		memcpy(&o, opts, opts->struct_size < sizeof(o) ? opts->struct_size : sizeof(o));
	m = calloc(1, sizeof(*m));
	if (!m)
		return service_oom(err);
	if ((r = load_settings(o.config_path, &m->set, err)) < 0) {
		free(m);
		return r;
	}
	m->svc = hostsvc_new(o.log, o.log_userdata, o.log_level);
	m->temp = temp_state_new(m->set.temp_ttl_seconds * US_PER_SEC);
	m->search = service_build_search(o.plugin_path, (const char *const *)m->set.plugin_path);
	if (!m->svc || !m->temp || !m->search) {
		r = service_oom(err);
		goto fail;
	}
	if ((r = hostsvc_configure(m->svc, m->set.tokenizer, m->set.summarizer, err)) < 0)
		goto fail;
	if ((r = open_stores(m, err)) < 0 || (r = open_strategies(m, err)) < 0)
		goto fail;
	if ((r = worker_new(WORKER_THREADS_DEFAULT, service_after_append_job, m, &m->worker,
			    err)) < 0)
		goto fail;
	if ((r = open_index(m, err)) < 0)
		goto fail;
	log_to_svc(m, MEMD_LOG_INFO, "ready: sessions in %s, %zu app strategies",
		   store_name(m->sessions), m->n_apps);
	*ret = m;
	return 0;
fail:
	memd_close(m);
	return r;
}

void memd_close(memd *m)
{
	if (!m)
		return;
	worker_free(m->worker); /* finishes pending after_append runs first */
	index_close(m->index);  /* before the stores it reads */
	for (size_t i = 0; i < m->n_apps; i++) {
		strategy_free(m->apps[i].st);
		free(m->apps[i].app);
	}
	free(m->apps);
	for (size_t i = 0; i < m->n_stores; i++) {
		store_free(m->stores[i].st);
		loader_instance_destroy(m->stores[i].other);
		free(m->stores[i].name);
	}
	free(m->stores);
	for (size_t i = 0; i < m->n_plugins; i++)
		loader_close(m->plugins[i]);
	free(m->plugins);
	service_free_strv(m->search);
	temp_state_free(m->temp);
	hostsvc_free(m->svc);
	settings_clear(&m->set);
	free(m);
}

void memd_free(void *p)
{
	free(p);
}

const char *memd_version_string(void)
{
	return "memd " MEMD_VERSION " (ABI " STRINGIFY(MEMD_HOST_ABI_MAJOR) "." STRINGIFY(MEMD_HOST_ABI_MINOR) ")";
}

store *service_session_store(memd *m)
{
	return m->sessions;
}

strategy *service_strategy_for(memd *m, const char *app, const char **ret_app)
{
	strategy *fallback = NULL;
	for (size_t i = 0; i < m->n_apps; i++) {
		if (strcmp(m->apps[i].app, app) == 0) {
			*ret_app = m->apps[i].app;
			return m->apps[i].st;
		}
		if (strcmp(m->apps[i].app, SETTINGS_DEFAULT_APP) == 0)
			fallback = m->apps[i].st;
	}
	*ret_app = SETTINGS_DEFAULT_APP;
	return fallback;
}

static int32_t sink_session_json(void *ud, const memd_session *s)
{
	json_t **slot = ud;
	json_decref(*slot);
	*slot = ej_session(s);
	return *slot ? 0 : MEMD_ENOMEM;
}

static int32_t sink_session_array(void *ud, const memd_session *s)
{
	json_t *o = ej_session(s);
	return o && json_array_append_new(ud, o) == 0 ? 0 : MEMD_ENOMEM;
}

/* Sinks of the read path: records written as JSON text (json_out.h). */
static int32_t sink_get_session(void *ud, const memd_session *s)
{
	return jo_session_get_session(ud, s);
}

static int32_t sink_get_event(void *ud, const memd_event *e)
{
	return jo_session_get_event(ud, e);
}

int32_t service_session_json(memd *m, const memd_call *call, const memd_scope *sc, json_t **ret,
			     memd_error *err)
{
	json_t *o = NULL;
	memd_session_sink sink = { sizeof(sink), &o, sink_session_json };
	int32_t r = store_session_get(m->sessions, call, sc, &sink, err);
	if (r < 0) {
		json_decref(o);
		return r;
	}
	if (!o)
		return memd_error_set(err, MEMD_EINTERNAL, 0, "%s: session_get delivered nothing",
				      store_name(m->sessions));
	*ret = o;
	return 0;
}

static const char *const create_fields[] = { "id", "title", "metadata", "state", NULL };

int32_t memd_session_create(memd *m, const char *app, const char *user, const char *body_json,
			    char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	json_t *body = NULL, *meta, *state, *keep = NULL, *temp = NULL, *out = NULL;
	const char *id, *title;
	char idbuf[UUID_TEXT_LEN + 1], *meta_text = NULL, *state_text = NULL;
	memd_session s = { .struct_size = sizeof(s) };
	memd_session_sink sink = { sizeof(sink), &out, sink_session_json };
	int32_t r;

	if ((r = service_check_scope(app, user, NULL, &sc, err)) < 0 ||
	    (r = service_parse_body(body_json, &body, err)) < 0)
		return r;
	if ((r = service_check_fields(body, create_fields, err)) < 0 ||
	    (r = service_opt_string_field(body, "id", &id, err)) < 0 ||
	    (r = service_opt_string_field(body, "title", &title, err)) < 0 ||
	    (r = service_opt_object_field(body, "metadata", &meta, err)) < 0 ||
	    (r = service_opt_object_field(body, "state", &state, err)) < 0)
		goto out;
	if (id && (r = ej_check_id(id, "id", err)) < 0)
		goto out;
	if (!id) {
		if (uuid_v7(idbuf) < 0) {
			r = memd_error_set(err, MEMD_EIO, 0, "cannot generate a session id");
			goto out;
		}
		id = idbuf;
	}
	if (title && !ej_utf8_valid(title, strlen(title))) {
		r = memd_error_set(err, MEMD_EINVAL, 0, "title: not valid UTF-8");
		goto out;
	}
	if (state && (r = service_split_delta(state, &keep, &temp, err)) < 0)
		goto out;
	meta_text = meta ? ej_dump(meta) : strdup("{}");
	state_text = keep && json_object_size(keep) ? ej_dump(keep) : NULL;
	if (!meta_text || (keep && json_object_size(keep) && !state_text)) {
		r = service_oom(err);
		goto out;
	}
	s.app = app;
	s.user = user;
	s.id = id;
	s.title = title;
	s.metadata_json = meta_text;
	s.created_us = s.updated_us = service_now_us();
	if ((r = store_session_create(m->sessions, &call, &s, state_text, &sink, err)) < 0)
		goto out;
	sc.session = id;
	if (temp && (r = service_apply_temp(m, &sc, NULL, temp, err)) < 0)
		goto out;
	r = service_finish(out, ret_json, err);
	out = NULL;
out:
	json_decref(out);
	json_decref(keep);
	json_decref(temp);
	json_decref(body);
	free(meta_text);
	free(state_text);
	return r;
}

int32_t memd_session_get(memd *m, const char *app, const char *user, const char *sid,
			 const memd_get_options *opts, char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	jo_session_get g;
	memd_session_sink sink = { sizeof(sink), &g, sink_get_session };
	memd_get_options o = { 0 };
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0)
		return r;
	if (opts)
		memcpy(&o, opts, opts->struct_size < sizeof(o) ? opts->struct_size : sizeof(o));
	jo_session_get_init(&g);
	r = store_session_get(m->sessions, &call, &sc, &sink, err);
	if (r < 0 || g.out.error) {
		r = service_read_failed(m, &g.out, r, err);
		goto fail;
	}
	if (!g.has_session) {
		r = memd_error_set(err, MEMD_EINTERNAL, 0, "%s: session_get delivered nothing",
				   store_name(m->sessions));
		goto fail;
	}
	if (o.flags & MEMD_GET_EVENTS) {
		memd_event_query q = {
			.struct_size = sizeof(q),
			.flags = o.events ? MEMD_EVQ_NEWEST : 0,
			.after_seq = o.after_seq,
			.after_time_us = o.after_time_us,
			.limit = o.events,
		};
		memd_event_sink events = { sizeof(events), &g, sink_get_event };
		if (o.after_seq < 0) {
			r = memd_error_set(err, MEMD_EINVAL, 0, "after_seq: must not be negative");
			goto fail;
		}
		jo_session_get_events(&g);
		r = store_events_load(m->sessions, &call, &sc, &q, &events, err);
		if (r < 0 || g.out.error) {
			r = service_read_failed(m, &g.out, r, err);
			goto fail;
		}
	}
	return jo_session_get_finish(&g, ret_json) < 0 ? service_oom(err) : 0;
fail:
	jo_session_get_clear(&g);
	return r;
}

/* Cursor text: "<created_us>.<hex of id>". */
static char *cursor_encode(int64_t created_us, const char *id)
{
	static const char hex[] = "0123456789abcdef";
	size_t len = strlen(id), off;
	char *c = malloc(32 + 2 * len);
	if (!c)
		return NULL;
	off = (size_t)snprintf(c, 32, "%" PRId64 ".", created_us);
	for (size_t i = 0; i < len; i++) {
		c[off++] = hex[(unsigned char)id[i] >> 4];
		c[off++] = hex[(unsigned char)id[i] & 0xf];
	}
	c[off] = '\0';
	return c;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

static int32_t cursor_decode(const char *c, int64_t *ret_created, char **ret_id, memd_error *err)
{
	char *end, *id;
	long long created;
	size_t hexlen;

	created = strtoll(c, &end, 10);
	if (end == c || *end != '.' || created < 0)
		goto bad;
	end++;
	hexlen = strlen(end);
	if (hexlen == 0 || hexlen % 2 || hexlen / 2 > MEMD_ID_MAX)
		goto bad;
	id = malloc(hexlen / 2 + 1);
	if (!id)
		return service_oom(err);
	for (size_t i = 0; i < hexlen / 2; i++) {
		int hi = hexval(end[2 * i]), lo = hexval(end[2 * i + 1]);
		if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
			free(id);
			goto bad;
		}
		id[i] = (char)(hi << 4 | lo);
	}
	id[hexlen / 2] = '\0';
	*ret_created = created;
	*ret_id = id;
	return 0;
bad:
	return memd_error_set(err, MEMD_EINVAL, 0, "cursor: not a cursor memd returned");
}

int32_t memd_session_list(memd *m, const char *app, const char *user, const char *cursor,
			  uint32_t limit, uint32_t flags, char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	memd_session_query q = { .struct_size = sizeof(q) };
	json_t *arr = NULL, *o;
	char *after_id = NULL, *next = NULL;
	memd_session_sink sink;
	int32_t r;

	if ((r = service_check_scope(app, user, NULL, &sc, err)) < 0)
		return r;
	if (limit == 0)
		limit = MEMD_LIST_LIMIT_DEFAULT;
	if (limit > MEMD_LIST_LIMIT_MAX)
		return memd_error_set(err, MEMD_EINVAL, 0, "limit: at most %d", MEMD_LIST_LIMIT_MAX);
	if (cursor && *cursor && (r = cursor_decode(cursor, &q.before_created_us, &after_id, err)) < 0)
		return r;
	q.before_id = after_id;
	q.limit = limit + 1; /* one more tells whether there is a next page */
	q.flags = flags & MEMD_LIST_INCLUDE_ARCHIVED ? MEMD_SQ_INCLUDE_ARCHIVED : 0;
	arr = json_array();
	if (!arr) {
		r = service_oom(err);
		goto out;
	}
	sink = (memd_session_sink){ sizeof(sink), arr, sink_session_array };
	if ((r = store_session_list(m->sessions, &call, &sc, &q, &sink, err)) < 0)
		goto out;
	if (json_array_size(arr) > limit) {
		json_t *last = json_array_get(arr, limit - 1);
		int64_t created;
		json_array_remove(arr, limit);
		if (ej_parse_time(json_string_value(json_object_get(last, "created")), &created) < 0 ||
		    !(next = cursor_encode(created, json_string_value(json_object_get(last, "id"))))) {
			r = service_oom(err);
			goto out;
		}
	}
	o = json_pack("{s:O,s:s?}", "sessions", arr, "next_cursor", next);
	r = service_finish(o, ret_json, err);
out:
	json_decref(arr);
	free(after_id);
	free(next);
	return r;
}

static const char *const patch_fields[] = { "title", "metadata", "archived", NULL };

int32_t memd_session_patch(memd *m, const char *app, const char *user, const char *sid,
			   const char *body_json, char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	memd_session_update p = { .struct_size = sizeof(p) };
	json_t *body = NULL, *v, *out = NULL;
	memd_session_sink sink = { sizeof(sink), &out, sink_session_json };
	char *meta = NULL;
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0 ||
	    (r = service_parse_body(body_json, &body, err)) < 0)
		return r;
	if ((r = service_check_fields(body, patch_fields, err)) < 0)
		goto out;
	if ((v = json_object_get(body, "title"))) {
		if (!json_is_string(v) || !ej_utf8_valid(json_string_value(v), json_string_length(v))) {
			r = memd_error_set(err, MEMD_EINVAL, 0, "title: must be a string");
			goto out;
		}
		p.fields |= MEMD_PATCH_TITLE;
		p.title = json_string_value(v);
	}
	if ((v = json_object_get(body, "metadata"))) {
		if (!json_is_object(v)) {
			r = memd_error_set(err, MEMD_EINVAL, 0, "metadata: must be an object");
			goto out;
		}
		if (!(meta = ej_dump(v))) {
			r = service_oom(err);
			goto out;
		}
		p.fields |= MEMD_PATCH_METADATA;
		p.metadata_json = meta;
	}
	if ((v = json_object_get(body, "archived"))) {
		if (!json_is_boolean(v)) {
			r = memd_error_set(err, MEMD_EINVAL, 0, "archived: must be true or false");
			goto out;
		}
		p.fields |= MEMD_PATCH_ARCHIVED;
		p.archived = json_is_true(v);
	}
	p.now_us = service_now_us();
	if ((r = store_session_update(m->sessions, &call, &sc, &p, &sink, err)) < 0)
		goto out;
	r = service_finish(out, ret_json, err);
	out = NULL;
out:
	json_decref(out);
	json_decref(body);
	free(meta);
	return r;
}

int32_t memd_session_delete(memd *m, const char *app, const char *user, const char *sid,
			    memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0)
		return r;
	if ((r = store_session_delete(m->sessions, &call, &sc, err)) < 0)
		return r;
	index_notify(m->index);
	temp_state_drop(m->temp, app, user, sid);
	return 0;
}

/* A sink of the read path: records written as JSON text (json_out.h). */
static int32_t sink_page_event(void *ud, const memd_event *e)
{
	return jo_page_event(ud, e);
}

static const char *const append_fields[] = { "events", "state_delta", "expected_version",
					     "invocation_id", NULL };

void service_append_req_clear(service_append_req *q)
{
	for (size_t i = 0; q->in && i < q->n; i++)
		ej_event_in_clear(&q->in[i]);
	free(q->in);
	free(q->evp);
	free(q->seqs);
	free(q->delta_text);
	free(q->title);
	json_decref(q->keep);
	json_decref(q->temp);
	json_decref(q->body);
}

int32_t service_append(memd *m, const memd_scope *sc, service_append_req *q, const char *inv,
		       int has_version, int64_t expected, json_t **ret, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_append a = { .struct_size = sizeof(a) };
	memd_append_result res = { .struct_size = sizeof(res) };
	json_t *seqs;
	int32_t r;

	q->seqs = calloc(q->n ? q->n : 1, sizeof(*q->seqs));
	if (!q->seqs)
		return service_oom(err);
	a.flags = has_version ? MEMD_APPEND_EXPECT_VERSION : 0;
	a.expected_version = expected;
	a.events = q->evp;
	a.n_events = (uint32_t)q->n;
	a.state_delta_json = q->delta_text;
	a.title_if_unset = q->title;
	a.now_us = service_now_us();
	res.seqs = q->seqs;
	if ((r = store_append(m->sessions, &call, sc, &a, &res, err)) < 0)
		return r;
	if (q->temp && (r = service_apply_temp(m, sc, inv, q->temp, err)) < 0)
		return r;
	if (!(res.flags & MEMD_APPEND_REPLAYED) && q->n)
		index_notify(m->index);
	if (!(res.flags & MEMD_APPEND_REPLAYED) && q->n)
		service_run_after_append(m, sc);
	seqs = json_array();
	for (size_t i = 0; seqs && i < q->n; i++)
		if (json_array_append_new(seqs, json_integer(q->seqs[i])) < 0) {
			json_decref(seqs);
			seqs = NULL;
		}
	if (!seqs)
		return service_oom(err);
	*ret = json_pack("{s:I,s:o,s:b}", "version", (json_int_t)res.version, "seqs", seqs,
			 "replayed", (res.flags & MEMD_APPEND_REPLAYED) != 0);
	return *ret ? 0 : service_oom(err);
}

int32_t memd_events_append(memd *m, const char *app, const char *user, const char *sid,
			   const char *body_json, char **ret_json, memd_error *err)
{
	memd_scope sc;
	service_append_req q = { 0 };
	json_t *events, *delta, *ver, *out = NULL;
	const char *inv;
	int64_t now = service_now_us();
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0 ||
	    (r = service_parse_body(body_json, &q.body, err)) < 0)
		return r;
	if ((r = service_check_fields(q.body, append_fields, err)) < 0 ||
	    (r = service_opt_object_field(q.body, "state_delta", &delta, err)) < 0 ||
	    (r = service_opt_string_field(q.body, "invocation_id", &inv, err)) < 0)
		goto out;
	if (inv && (r = ej_check_id(inv, "invocation_id", err)) < 0)
		goto out;
	events = json_object_get(q.body, "events");
	if (events && !json_is_array(events)) {
		r = memd_error_set(err, MEMD_EINVAL, 0, "events: must be an array");
		goto out;
	}
	if (!events && !delta) {
		r = memd_error_set(err, MEMD_EINVAL, 0, "events: required (or a state_delta)");
		goto out;
	}
	ver = json_object_get(q.body, "expected_version");
	if (ver && !json_is_null(ver) && (!json_is_integer(ver) || json_integer_value(ver) < 0)) {
		r = memd_error_set(err, MEMD_EINVAL, 0, "expected_version: must be a non-negative integer");
		goto out;
	}
	q.n = events ? json_array_size(events) : 0;
	if (m->set.max_batch_events && q.n > (size_t)m->set.max_batch_events) {
		r = memd_error_set(err, MEMD_ETOOBIG, 0, "events: %zu in one batch, the limit is %" PRId64,
				   q.n, m->set.max_batch_events);
		goto out;
	}
	q.in = calloc(q.n ? q.n : 1, sizeof(*q.in));
	q.evp = calloc(q.n ? q.n : 1, sizeof(*q.evp));
	if (!q.in || !q.evp) {
		r = service_oom(err);
		goto out;
	}
	for (size_t i = 0; i < q.n; i++) {
		if ((r = ej_event_parse(json_array_get(events, i), i, inv, now, m->svc, &q.in[i], err)) < 0)
			goto out;
		q.evp[i] = &q.in[i].ev;
		for (size_t j = 0; j < i; j++)
			if (strcmp(q.in[j].ev.id, q.in[i].ev.id) == 0) {
				r = memd_error_set(err, MEMD_EINVAL, 0, "events[%zu].id: repeats events[%zu].id",
						   i, j);
				goto out;
			}
		if (!inv)
			inv = q.in[i].ev.invocation_id;
		if (!q.title && strcmp(q.in[i].ev.role, "user") == 0)
			q.title = title_from_text(q.in[i].ev.text);
	}
	if (delta) {
		if ((r = service_split_delta(delta, &q.keep, &q.temp, err)) < 0)
			goto out;
		if (json_object_size(q.keep) && !(q.delta_text = ej_dump(q.keep))) {
			r = service_oom(err);
			goto out;
		}
	}
	r = service_append(m, &sc, &q, inv, ver && !json_is_null(ver),
			   ver ? json_integer_value(ver) : 0, &out, err);
	if (r == 0)
		r = service_finish(out, ret_json, err);
out:
	service_append_req_clear(&q);
	return r;
}

int32_t memd_events_list(memd *m, const char *app, const char *user, const char *sid,
			 int64_t after_seq, uint32_t limit, char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	memd_event_query q = { .struct_size = sizeof(q) };
	jo_page page;
	memd_event_sink sink = { sizeof(sink), &page, sink_page_event };
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0)
		return r;
	if (after_seq < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "after_seq: must not be negative");
	if (limit == 0)
		limit = MEMD_PAGE_LIMIT_DEFAULT;
	if (limit > MEMD_PAGE_LIMIT_MAX)
		return memd_error_set(err, MEMD_EINVAL, 0, "limit: at most %d", MEMD_PAGE_LIMIT_MAX);
	q.after_seq = after_seq;
	q.limit = limit + 1; /* one more tells whether there is a next page */
	jo_page_begin(&page, limit);
	r = store_events_load(m->sessions, &call, &sc, &q, &sink, err);
	if (r < 0 || page.out.error) {
		r = service_read_failed(m, &page.out, r, err);
		jo_page_clear(&page);
		return r;
	}
	return jo_page_finish(&page, ret_json) < 0 ? service_oom(err) : 0;
}

/* A call for background work (strategies' after_append): no deadline. */
static memd_call call_new(void)
{
	memd_call c = { .struct_size = sizeof(c) };
	return c;
}

/* Events a strategy's after_append asks to persist, appended one by one. */
typedef struct persist_ctx {
	memd *m;
	const memd_scope *sc;
} persist_ctx;

static int32_t persist_event(void *ud, const memd_event *in)
{
	persist_ctx *pc = ud;
	memd_call call = call_new();
	memd_event e = { .struct_size = sizeof(e) };
	const memd_event *one[1] = { &e };
	char idbuf[UUID_TEXT_LEN + 1];
	int64_t seq;
	memd_append a = { .struct_size = sizeof(a), .events = one, .n_events = 1 };
	memd_append_result res = { .struct_size = sizeof(res), .seqs = &seq };
	memd_error err = { 0 };
	int32_t r;

	memcpy(&e, in, in->struct_size < sizeof(e) ? in->struct_size : sizeof(e));
	e.struct_size = sizeof(e);
	if (!e.role || !e.content_json) {
		hostsvc_log(pc->m->svc, MEMD_LOG_WARN, "memd", "strategy event without role or content dropped");
		return MEMD_EINVAL;
	}
	if (!e.id) {
		if (uuid_v7(idbuf) < 0)
			return MEMD_EIO;
		e.id = idbuf;
	}
	if (!e.author)
		e.author = e.role;
	a.now_us = service_now_us();
	if (!e.timestamp_us)
		e.timestamp_us = a.now_us;
	if (!e.tokens && e.text)
		hostsvc_count_tokens(pc->m->svc, e.text, strlen(e.text), &e.tokens);
	r = store_append(pc->m->sessions, &call, pc->sc, &a, &res, &err);
	if (r < 0)
		hostsvc_log(pc->m->svc, MEMD_LOG_WARN, "memd", "persisting a strategy event failed: %s",
			    err.msg);
	return r;
}

void service_after_append_job(void *userdata, const memd_scope *sc)
{
	memd *m = userdata;
	const char *app_name;
	strategy *st = service_strategy_for(m, sc->app, &app_name);
	memd_call call = call_new();
	persist_ctx pc = { m, sc };
	memd_event_sink persist = { sizeof(persist), &pc, persist_event };
	memd_error err = { 0 };

	if (!st || !strategy_has_after_append(st))
		return;
	if (strategy_after_append(st, m->sessions, &call, sc, &persist, &err) < 0)
		hostsvc_log(m->svc, MEMD_LOG_WARN, "memd", "after_append: %s", err.msg);
}

void service_run_after_append(memd *m, const memd_scope *sc)
{
	const char *app_name;
	strategy *st = service_strategy_for(m, sc->app, &app_name);
	int32_t r;

	if (!st || !strategy_has_after_append(st))
		return;
	if ((r = worker_submit(m->worker, sc)) < 0)
		hostsvc_log(m->svc, MEMD_LOG_WARN, "memd",
			    "after_append not queued (%d): the next append catches up", (int)r);
}

static int32_t ctx_summary(void *ud, const memd_event *e)
{
	return jo_context_summary(ud, e);
}

static int32_t ctx_event(void *ud, const memd_event *e)
{
	return jo_context_event(ud, e);
}

int32_t memd_context(memd *m, const char *app, const char *user, const char *sid, char **ret_json,
		     memd_error *err)
{
	memd_call call = service_call_for_request(m);
	return service_context(m, &call, app, user, sid, ret_json, err);
}

int32_t service_context(memd *m, const memd_call *call, const char *app, const char *user,
			const char *sid, char **ret_json, memd_error *err)
{
	memd_scope sc;
	jo_context c;
	memd_context_sink sink = { sizeof(sink), &c, ctx_summary, ctx_event };
	const char *app_name;
	strategy *st;
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0)
		return r;
	st = service_strategy_for(m, app, &app_name);
	if (!st)
		return memd_error_set(err, MEMD_EINTERNAL, 0, "no strategy for app '%.64s'", app);
	jo_context_begin(&c, strategy_plugin_name(st));
	r = c.out.error ? c.out.error : strategy_context(st, m->sessions, call, &sc, &sink, err);
	if (r < 0 || c.out.error) {
		r = service_read_failed(m, &c.out, r, err);
		jo_context_clear(&c);
		return r;
	}
	return jo_context_finish(&c, ret_json) < 0 ? service_oom(err) : 0;
}

int32_t service_split_delta(json_t *delta, json_t **ret_store, json_t **ret_temp, memd_error *err)
{
	json_t *keep = json_object(), *temp = json_object(), *v;
	const char *key;

	if (!keep || !temp)
		goto nomem;
	json_object_foreach(delta, key, v) {
		size_t len = strlen(key);
		if (!len || len > STATE_KEY_MAX || !ej_utf8_valid(key, len)) {
			json_decref(keep);
			json_decref(temp);
			return memd_error_set(err, MEMD_EINVAL, 0,
					      "state key '%.64s': must be 1..%d bytes of UTF-8", key,
					      STATE_KEY_MAX);
		}
		if (strncmp(key, TEMP_PREFIX, strlen(TEMP_PREFIX)) == 0) {
			if (len == strlen(TEMP_PREFIX)) {
				json_decref(keep);
				json_decref(temp);
				return memd_error_set(err, MEMD_EINVAL, 0,
						      "state key 'temp:' has a prefix but no name");
			}
			if (json_object_set(temp, key, v) < 0)
				goto nomem;
		} else if (json_object_set(keep, key, v) < 0) {
			goto nomem;
		}
	}
	*ret_store = keep;
	*ret_temp = temp;
	return 0;
nomem:
	json_decref(keep);
	json_decref(temp);
	return service_oom(err);
}

int32_t service_apply_temp(memd *m, const memd_scope *sc, const char *inv, json_t *temp,
			   memd_error *err)
{
	const char *key;
	json_t *v;
	int64_t now = service_now_us();
	json_object_foreach(temp, key, v) {
		if (temp_state_set(m->temp, sc->app, sc->user, sc->session, inv, key, v, now) < 0)
			return service_oom(err);
	}
	return 0;
}

static int32_t sink_text_json(void *ud, const char *text, size_t len)
{
	json_t **slot = ud;
	json_decref(*slot);
	*slot = json_loadb(text, len, 0, NULL);
	return *slot ? 0 : MEMD_EIO;
}

static int32_t state_json(memd *m, const memd_scope *sc, char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	json_t *st = NULL;
	memd_text_sink sink = { sizeof(sink), &st, sink_text_json };
	int32_t r;

	if ((r = store_state_get(m->sessions, &call, sc, &sink, err)) < 0) {
		json_decref(st);
		return r;
	}
	if (!json_is_object(st)) {
		json_decref(st);
		return memd_error_set(err, MEMD_EIO, 0, "%s: state is not a JSON object",
				      store_name(m->sessions));
	}
	if (temp_state_merge(m->temp, sc->app, sc->user, sc->session, st, service_now_us()) < 0) {
		json_decref(st);
		return service_oom(err);
	}
	return service_finish(st, ret_json, err);
}

int32_t memd_state_get(memd *m, const char *app, const char *user, const char *sid,
		       char **ret_json, memd_error *err)
{
	memd_scope sc;
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0)
		return r;
	return state_json(m, &sc, ret_json, err);
}

int32_t memd_state_patch(memd *m, const char *app, const char *user, const char *sid,
			 const char *body_json, char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	service_append_req q = { 0 };
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0 ||
	    (r = service_parse_body(body_json, &q.body, err)) < 0)
		return r;
	if ((r = service_split_delta(q.body, &q.keep, &q.temp, err)) < 0)
		goto out;
	if (json_object_size(q.keep)) {
		json_t *ignored = NULL;
		if (!(q.delta_text = ej_dump(q.keep))) {
			r = service_oom(err);
			goto out;
		}
		r = service_append(m, &sc, &q, NULL, 0, 0, &ignored, err);
		json_decref(ignored);
		if (r < 0)
			goto out;
	} else {
		/* temp: keys only: nothing to persist, but the session must exist. */
		json_t *sess = NULL;
		if ((r = service_session_json(m, &call, &sc, &sess, err)) < 0)
			goto out;
		json_decref(sess);
		if ((r = service_apply_temp(m, &sc, NULL, q.temp, err)) < 0)
			goto out;
	}
	r = state_json(m, &sc, ret_json, err);
out:
	service_append_req_clear(&q);
	return r;
}

int32_t memd_invocation_end(memd *m, const char *app, const char *user, const char *sid,
			    const char *invocation_id, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	json_t *sess = NULL;
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0 ||
	    (r = ej_check_id(invocation_id, "invocation id", err)) < 0)
		return r;
	if ((r = service_session_json(m, &call, &sc, &sess, err)) < 0)
		return r;
	json_decref(sess);
	temp_state_end_invocation(m->temp, app, user, sid, invocation_id);
	return 0;
}

static int mime_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       strchr("!#$&^_.+-", c) != NULL;
}

/* type/subtype[; params] with RFC 6838 token characters. */
static int32_t check_mime(const char *mime, memd_error *err)
{
	size_t i = 0, len = strlen(mime), slash = 0;

	if (!len || len > MIME_MAX)
		goto bad;
	for (; i < len && mime[i] != ';'; i++) {
		unsigned char c = (unsigned char)mime[i];
		if (c == '/') {
			if (slash || i == 0)
				goto bad;
			slash = i;
		} else if (!mime_char(c)) {
			goto bad;
		}
	}
	if (!slash || slash + 1 >= i)
		goto bad;
	for (; i < len; i++)
		if ((unsigned char)mime[i] < 0x20 || (unsigned char)mime[i] >= 0x7f)
			goto bad;
	return 0;
bad:
	return memd_error_set(err, MEMD_EINVAL, 0, "content type '%.64s': not a media type", mime);
}

typedef struct artifact_acc {
	json_t *meta;
	json_t *list;
	void *data;
	size_t size;
	int want_data;
} artifact_acc;

static int32_t sink_artifact(void *ud, const memd_artifact *a)
{
	artifact_acc *acc = ud;
	json_t *o = ej_artifact(a);
	if (!o)
		return MEMD_ENOMEM;
	if (acc->list)
		return json_array_append_new(acc->list, o) == 0 ? 0 : MEMD_ENOMEM;
	json_decref(acc->meta);
	acc->meta = o;
	if (acc->want_data) {
		free(acc->data);
		acc->data = malloc(a->size ? a->size : 1);
		if (!acc->data)
			return MEMD_ENOMEM;
		if (a->size)
			memcpy(acc->data, a->data, a->size);
		acc->size = a->size;
	}
	return 0;
}

int32_t memd_artifact_put(memd *m, const char *app, const char *user, const char *sid,
			  const char *name, const char *mime_type, const void *data, size_t size,
			  char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	memd_artifact a = { .struct_size = sizeof(a) };
	int64_t version;
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0 ||
	    (r = ej_check_name(name, err)) < 0)
		return r;
	if (!mime_type || !*mime_type)
		mime_type = MIME_DEFAULT;
	if ((r = check_mime(mime_type, err)) < 0)
		return r;
	if (!data && size)
		return memd_error_set(err, MEMD_EINVAL, 0, "artifact data missing");
	a.name = name;
	a.mime_type = mime_type;
	a.data = data ? data : "";
	a.size = size;
	a.created_us = service_now_us();
	if ((r = store_artifact_put(m->sessions, &call, &sc, &a, &version, err)) < 0)
		return r;
	a.version = version;
	return service_finish(ej_artifact(&a), ret_json, err);
}

int32_t memd_artifact_get(memd *m, const char *app, const char *user, const char *sid,
			  const char *name, int64_t version, char **ret_json, void **ret_data,
			  size_t *ret_size, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	artifact_acc acc = { .want_data = 1 };
	memd_artifact_sink sink = { sizeof(sink), &acc, sink_artifact };
	char *meta = NULL;
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0 ||
	    (r = ej_check_name(name, err)) < 0)
		return r;
	if (version < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "version: must be positive");
	r = store_artifact_get(m->sessions, &call, &sc, name, version, &sink, err);
	if (r == 0 && !acc.meta)
		r = memd_error_set(err, MEMD_ENOTFOUND, 0, "artifact '%.64s' not found", name);
	if (r == 0 && (r = service_finish(acc.meta, &meta, err)) == 0) {
		acc.meta = NULL;
		*ret_json = meta;
		*ret_data = acc.data;
		*ret_size = acc.size;
		return 0;
	}
	json_decref(acc.meta);
	free(acc.data);
	return r;
}

static int32_t artifact_listing(memd *m, const char *app, const char *user, const char *sid,
				const char *name, char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	artifact_acc acc = { 0 };
	memd_artifact_sink sink = { sizeof(sink), &acc, sink_artifact };
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0 ||
	    (name && (r = ej_check_name(name, err)) < 0))
		return r;
	if (!(acc.list = json_array()))
		return service_oom(err);
	r = name ? store_artifact_versions(m->sessions, &call, &sc, name, &sink, err)
		 : store_artifact_list(m->sessions, &call, &sc, &sink, err);
	if (r == 0 && name && json_array_size(acc.list) == 0)
		r = memd_error_set(err, MEMD_ENOTFOUND, 0, "artifact '%.64s' not found", name);
	if (r < 0) {
		json_decref(acc.list);
		return r;
	}
	return service_finish(json_pack("{s:o}", name ? "versions" : "artifacts", acc.list),
			      ret_json, err);
}

int32_t memd_artifact_list(memd *m, const char *app, const char *user, const char *sid,
			   char **ret_json, memd_error *err)
{
	return artifact_listing(m, app, user, sid, NULL, ret_json, err);
}

int32_t memd_artifact_versions(memd *m, const char *app, const char *user, const char *sid,
			       const char *name, char **ret_json, memd_error *err)
{
	if (!name)
		return memd_error_set(err, MEMD_EINVAL, 0, "artifact name: required");
	return artifact_listing(m, app, user, sid, name, ret_json, err);
}

int32_t memd_artifact_delete(memd *m, const char *app, const char *user, const char *sid,
			     const char *name, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0 ||
	    (r = ej_check_name(name, err)) < 0)
		return r;
	return store_artifact_delete(m->sessions, &call, &sc, name, err);
}

int32_t memd_search(memd *m, const char *app, const char *user, const char *body_json,
		    char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	int32_t r;

	if ((r = service_check_scope(app, user, NULL, &sc, err)) < 0)
		return r;
	return index_search(m->index, &call, app, user, body_json, ret_json, err);
}

int32_t memd_index_rebuild(memd *m, const char *app, const char *user, memd_progress_fn progress,
			   void *userdata, memd_error *err)
{
	memd_scope sc;
	int32_t r;

	if ((app || user) &&
	    (r = service_check_scope(app ? app : "", user ? user : "", NULL, &sc, err)) < 0)
		return r;
	return index_rebuild(m->index, app, user, progress, userdata, err);
}

int32_t memd_user_delete(memd *m, const char *app, const char *user, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	int32_t r;

	if ((r = service_check_scope(app, user, NULL, &sc, err)) < 0)
		return r;
	if ((r = store_user_delete(m->sessions, &call, &sc, err)) < 0)
		return r;
	index_notify(m->index);
	temp_state_drop(m->temp, app, user, NULL);
	return 0;
}

static json_t *kinds_json(uint32_t kind)
{
	static const struct {
		uint32_t bit;
		const char *name;
	} kinds[] = {
		{ MEMD_KIND_STORE, "store" },
		{ MEMD_KIND_VECTOR, "vector" },
		{ MEMD_KIND_STRATEGY, "strategy" },
		{ MEMD_KIND_EMBEDDER, "embedder" },
	};
	json_t *a = json_array();
	for (size_t i = 0; a && i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (kind & kinds[i].bit)
			json_array_append_new(a, json_string(kinds[i].name));
	return a;
}

static int instance_of(const loader_instance *inst, const loader_plugin *p)
{
	return inst && loader_instance_plugin(inst) == p;
}

int32_t memd_plugins_json(memd *m, char **ret_json, memd_error *err)
{
	json_t *list = json_array(), *o;
	char abi[32];

	if (!list)
		return service_oom(err);
	for (size_t i = 0; i < m->n_plugins; i++) {
		const loader_plugin *p = m->plugins[i];
		const memd_plugin *d = loader_descriptor(p);
		json_t *insts = json_array(), *po;

		snprintf(abi, sizeof(abi), "%u.%u", (unsigned)d->abi_major, (unsigned)d->abi_minor);
		for (size_t k = 0; insts && k < m->n_stores; k++) {
			const named_store *ns = &m->stores[k];
			if (instance_of(ns->inst, p))
				json_array_append_new(insts, json_sprintf("stores.%s", ns->name));
		}
		for (size_t k = 0; insts && k < m->n_apps; k++)
			if (instance_of(m->apps[k].inst, p))
				json_array_append_new(insts, json_sprintf("apps.%s", m->apps[k].app));
		po = json_pack("{s:s,s:s?,s:s?,s:o,s:s,s:s,s:b,s:o}", "name", d->name, "version",
			       d->version, "description", d->description, "kinds", kinds_json(d->kind),
			       "path", loader_path(p), "abi", abi, "threadsafe",
			       (d->flags & MEMD_PLUGIN_THREADSAFE) != 0, "instances",
			       insts ? insts : json_array());
		if (!po || json_array_append_new(list, po) < 0) {
			json_decref(list);
			return service_oom(err);
		}
	}
	snprintf(abi, sizeof(abi), "%d.%d", MEMD_HOST_ABI_MAJOR, MEMD_HOST_ABI_MINOR);
	o = json_pack("{s:s,s:s,s:o}", "version", MEMD_VERSION, "abi", abi, "plugins", list);
	return service_finish(o, ret_json, err);
}

int32_t memd_ready(memd *m, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	for (size_t i = 0; i < m->n_stores; i++) {
		int32_t r;
		if (m->stores[i].st && (r = store_ping(m->stores[i].st, &call, err)) < 0)
			return r;
	}
	return 0;
}

int32_t memd_metrics_text(memd *m, char **ret_text, memd_error *err)
{
	prom_buf b = { 0 };

	prom_printf(&b, "# HELP " STORE_METRIC_DURATION " Time in a session store plugin's op.\n"
			"# TYPE " STORE_METRIC_DURATION " histogram\n");
	for (size_t i = 0; i < m->n_stores; i++)
		if (m->stores[i].st)
			store_render_durations(m->stores[i].st, &b);
	prom_printf(&b, "# HELP " STORE_METRIC_ERRORS " Failed session store plugin ops by error "
			"code.\n# TYPE " STORE_METRIC_ERRORS " counter\n");
	for (size_t i = 0; i < m->n_stores; i++)
		if (m->stores[i].st)
			store_render_errors(m->stores[i].st, &b);
	if (b.oom) {
		free(b.p);
		return service_oom(err);
	}
	*ret_text = b.p;
	return 0;
}

static void check_plugin_slot(char **search, const char *plugin, const char *slot, uint32_t kind,
			      const config_node *node, const char *skip, config_diag *d)
{
	loader_plugin *p;
	memd_error err = { 0 };

	if (loader_open(plugin, (const char *const *)search, &p, &err) < 0) {
		config_diag_add(d, node, slot, "%s", err.msg);
		return;
	}
	if (kind && loader_require_kind(p, kind, slot, &err) < 0)
		config_diag_add(d, node, slot, "%s", err.msg);
	else
		config_check_plugin(node, slot, skip, loader_descriptor(p)->config_keys, d);
	loader_close(p);
}

/* Best effort when the config failed memd's schema: every stores.<name>
 * with a plugin scalar and every apps.<app>.working_memory with a strategy
 * scalar is checked against its plugin's keys (not its kind: the schema
 * that says which store holds sessions did not load). */
static void check_raw_plugin_slots(const char *config_path, const char *const *extra_path,
				   config_diag *d)
{
	config_node *root = NULL;
	memd_error err = { 0 };
	const config_node *stores, *apps, *pp;
	char **search;
	const char *configured[2] = { NULL, NULL };

	if (config_parse_file(config_path, &root, &err) < 0)
		return;
	/* plugins.path may be a string or a list; only a string is used here. */
	pp = config_map_get(config_map_get(root, "plugins"), "path");
	if (pp && config_node_type(pp) == CONFIG_SCALAR)
		configured[0] = config_scalar(pp);
	search = service_build_search(extra_path, configured);
	stores = config_map_get(root, "stores");
	apps = config_map_get(root, "apps");
	for (size_t i = 0; search && config_node_type(stores) == CONFIG_MAP && i < config_len(stores); i++) {
		const config_node *node = config_map_value_at(stores, i);
		const char *plugin = config_scalar(config_map_get(node, "plugin"));
		char slot[SLOT_NAME_MAX];
		if (!plugin || config_node_type(node) != CONFIG_MAP)
			continue;
		snprintf(slot, sizeof(slot), "stores.%s", config_map_key_at(stores, i));
		check_plugin_slot(search, plugin, slot, 0, node, "plugin", d);
	}
	for (size_t i = 0; search && config_node_type(apps) == CONFIG_MAP && i < config_len(apps); i++) {
		const config_node *node = config_map_get(config_map_value_at(apps, i), "working_memory");
		const char *strategy_name = config_scalar(config_map_get(node, "strategy"));
		char slot[SLOT_NAME_MAX];
		if (!strategy_name || config_node_type(node) != CONFIG_MAP)
			continue;
		snprintf(slot, sizeof(slot), "apps.%s.working_memory", config_map_key_at(apps, i));
		check_plugin_slot(search, strategy_name, slot, MEMD_KIND_STRATEGY, node, "strategy", d);
	}
	service_free_strv(search);
	config_free(root);
}

int32_t service_check_config(const char *config_path, const char *const *extra_path,
			     config_diag *d)
{
	config_node *root = NULL;
	settings set = { 0 };
	memd_error err = { 0 };
	char **search;
	int32_t r;

	if (config_path && (r = config_parse_file(config_path, &root, &err)) < 0) {
		if (r == MEMD_ENOMEM)
			return r;
		config_diag_add(d, NULL, NULL, "%s", err.msg);
		return MEMD_EINVAL;
	}
	if ((r = settings_load(root, &set, d)) < 0) {
		/* memd's own schema failed: still check what the plugins say of
		 * their keys, so one run reports every problem. */
		if (r == MEMD_EINVAL && config_path)
			check_raw_plugin_slots(config_path, extra_path, d);
		return r;
	}
	search = service_build_search(extra_path, (const char *const *)set.plugin_path);
	if (!search) {
		settings_clear(&set);
		return MEMD_ENOMEM;
	}
	/* The tokenizer and summarizer as memd_open would set them up (a ranks
	 * file that does not load, a bad summarizer URL). */
	{
		hostsvc *svc = hostsvc_new(NULL, NULL, MEMD_LOG_ERROR);
		if (!svc) {
			service_free_strv(search);
			settings_clear(&set);
			return MEMD_ENOMEM;
		}
		if (hostsvc_configure(svc, set.tokenizer, set.summarizer, &err) < 0)
			config_diag_add(d, set.tokenizer ? set.tokenizer : set.summarizer, NULL, "%s",
					err.msg);
		hostsvc_free(svc);
	}
	for (size_t i = 0; i < set.n_stores; i++) {
		char slot[SLOT_NAME_MAX];
		int is_sessions = strcmp(set.stores[i].name, set.sessions_store) == 0;
		snprintf(slot, sizeof(slot), "stores.%s", set.stores[i].name);
		check_plugin_slot(search, set.stores[i].plugin, slot, is_sessions ? MEMD_KIND_STORE : 0,
				  set.stores[i].node, "plugin", d);
	}
	for (size_t i = 0; i < set.n_apps; i++) {
		char slot[SLOT_NAME_MAX];
		snprintf(slot, sizeof(slot), "apps.%s.working_memory", set.apps[i].name);
		check_plugin_slot(search, set.apps[i].strategy, slot, MEMD_KIND_STRATEGY,
				  set.apps[i].node, "strategy", d);
	}
	service_free_strv(search);
	settings_clear(&set);
	return d->n ? MEMD_EINVAL : 0;
}
