/* SPDX-License-Identifier: MIT */
/*
 * service: the libmemd facade. Opens what config names (stores, strategies)
 * through the loader, and implements every memd_* call of api/memd/memd.h
 * over the store and strategy wrappers, with request validation in one
 * place so the HTTP server and the CLI stay thin.
 */
#include "service_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "event_json.h"
#include "memd-build.h"
#include "prom.h"

#define PATH_ENV "MEMD_PLUGIN_PATH"
#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)
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
