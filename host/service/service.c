/* SPDX-License-Identifier: MIT */
/*
 * service: the libmemd facade. Opens what config names (stores, strategies)
 * through the loader, and implements every memd_* call of api/memd/memd.h
 * over the store and strategy wrappers, with request validation in one
 * place so the HTTP server and the CLI stay thin.
 *
 * This file: the memd handle's life (memd_open / memd_close), the plugin
 * registry and what config wires to it (stores, app strategies, search
 * indexes, the after_append worker), and the version. The calls live by
 * resource in service_<resource>.c; what they share is service_int.h.
 */
#include "service/service_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memd-build.h"

#define PATH_ENV "MEMD_PLUGIN_PATH"
#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)

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

		if ((m->open_flags & MEMD_OPEN_NO_VECTOR) && !is_sessions && m->set.vector_store &&
		    strcmp(ss->name, m->set.vector_store) == 0)
			continue;
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

/* The lanes' reset time zones, each loaded now: a zone that does not
 * load is a config problem (file:line), not a failure at the first open
 * of a lane. */
static int32_t open_zones(memd *m, memd_error *err)
{
	config_diag d = { 0 };
	int32_t r = 0;

	if ((r = lane_tz_cache_new(&m->zones, err)) < 0)
		return r;
	if (service_lanes_check_zones(&m->set, m->zones, &d))
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
	pthread_mutex_init(&m->clock_lock, NULL);
	if ((r = load_settings(o.config_path, &m->set, err)) < 0) {
		pthread_mutex_destroy(&m->clock_lock);
		free(m);
		return r;
	}
	m->open_flags = o.flags;
	if (o.flags & MEMD_OPEN_NO_VECTOR)
		m->set.vector_enabled = 0;
	m->svc = hostsvc_new(o.log, o.log_userdata, o.log_level);
	m->temp = temp_state_new(m->set.temp_ttl_seconds * US_PER_SEC);
	m->search = service_build_search(o.plugin_path, (const char *const *)m->set.plugin_path);
	if (!m->svc || !m->temp || !m->search) {
		r = service_oom(err);
		goto fail;
	}
	if ((r = hostsvc_configure(m->svc, m->set.tokenizer, m->set.summarizer, err)) < 0)
		goto fail;
	if ((r = open_zones(m, err)) < 0)
		goto fail;
	if ((r = open_stores(m, err)) < 0 || (r = open_strategies(m, err)) < 0)
		goto fail;
	if ((r = worker_new(WORKER_THREADS_DEFAULT, service_after_append_job, m, &m->worker,
			    err)) < 0)
		goto fail;
	if ((r = open_index(m, err)) < 0 || (r = jobs_new(m->svc, &m->jobs, err)) < 0)
		goto fail;
	if ((r = service_watch_start(m, err)) < 0 || (r = service_memory_start(m, err)) < 0 ||
	    (r = service_checkpoints_start(m, err)) < 0)
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
	service_checkpoints_free(m); /* its passes use the session store */
	service_memory_free(m); /* its runs use the stores and the index */
	service_watch_free(m);  /* its passes use the worker, the jobs and the stores */
	jobs_free(m->jobs);     /* cancels the jobs; waits for the running one */
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
	lane_tz_cache_free(m->zones);
	settings_clear(&m->set);
	pthread_mutex_destroy(&m->clock_lock);
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
