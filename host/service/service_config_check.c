/* SPDX-License-Identifier: MIT */
/*
 * service_config_check: service_check_config (service.h), what `memd
 * config check` runs: a config checked as memd_open would take it,
 * without initializing any plugin.
 */
#include "service/service_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memd-build.h"

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

/* The config's plugins.path from the raw tree (a directory or a list of
 * them; entries that are not scalars are the schema's to report), as a
 * NULL-terminated vector of borrowed strings in *ret (malloc'd: free the
 * vector only). MEMD_ENOMEM. */
static int32_t raw_plugin_path(const config_node *root, const char ***ret)
{
	const config_node *pp = config_map_get(config_map_get(root, "plugins"), "path");
	size_t n = config_node_type(pp) == CONFIG_SEQ ? config_len(pp) : 1, out = 0;
	const char **v = calloc(n + 1, sizeof(*v));

	if (!v)
		return MEMD_ENOMEM;
	for (size_t i = 0; pp && i < n; i++) {
		const char *dir =
			config_scalar(config_node_type(pp) == CONFIG_SEQ ? config_seq_at(pp, i) : pp);
		if (dir && *dir)
			v[out++] = dir;
	}
	*ret = v;
	return 0;
}

/* The search path of root (NULL = zero-config) as memd_open builds it. */
static int32_t search_of(const config_node *root, const char *const *extra_path, char ***ret)
{
	const char **configured;
	char **search;

	if (raw_plugin_path(root, &configured) < 0)
		return MEMD_ENOMEM;
	search = service_build_search(extra_path, configured);
	free(configured);
	if (!search)
		return MEMD_ENOMEM;
	*ret = search;
	return 0;
}

int32_t service_plugin_search(const char *config_path, const char *const *extra_path,
			      char ***ret, memd_error *err)
{
	config_node *root = NULL;
	int32_t r;

	if (config_path && (r = config_parse_file(config_path, &root, err)) < 0)
		return r;
	r = search_of(root, extra_path, ret);
	config_free(root);
	if (r < 0)
		return service_oom(err);
	return 0;
}

void service_free_search(char **search)
{
	service_free_strv(search);
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
	const config_node *stores, *apps;
	char **search = NULL;

	if (config_parse_file(config_path, &root, &err) < 0)
		return;
	(void)search_of(root, extra_path, &search); /* ENOMEM: search stays NULL */
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
		/* recall is the host's key, not the strategy's */
		(void)config_map_detach(root, node, "recall");
		check_plugin_slot(search, strategy_name, slot, MEMD_KIND_STRATEGY, node, "strategy", d);
	}
	service_free_strv(search);
	config_free(root);
}

/* Parse config_path (NULL: no config, *ret_root = NULL) for a check that
 * reports into d: a file that does not parse is one problem in d and
 * MEMD_EINVAL; MEMD_ENOMEM as itself. */
static int32_t parse_for_check(const char *config_path, config_node **ret_root, config_diag *d)
{
	memd_error err = { 0 };
	config_node *root = NULL;
	int32_t r;

	if (config_path && (r = config_parse_file(config_path, &root, &err)) < 0) {
		if (r == MEMD_ENOMEM)
			return r;
		config_diag_add(d, NULL, NULL, "%s", err.msg);
		return MEMD_EINVAL;
	}
	*ret_root = root;
	return 0;
}

int32_t service_check_config(const char *config_path, const char *const *extra_path,
			     service_config_rule rule, config_diag *d)
{
	config_node *root = NULL;
	settings set = { 0 };
	memd_error err = { 0 };
	char **search;
	int32_t r;

	if ((r = parse_for_check(config_path, &root, d)) < 0)
		return r;
	if (rule)
		rule(root, d); /* before settings_load, which takes root */
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
	/* The lanes' reset time zones, loaded as memd_open loads them. */
	{
		lane_tz_cache *zones = NULL;
		if (lane_tz_cache_new(&zones, &err) < 0)
			config_diag_add(d, NULL, NULL, "%s", err.msg);
		else
			service_lanes_check_zones(&set, zones, d);
		lane_tz_cache_free(zones);
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

/* ---- memd plugins list --------------------------------------------------- */

/* One plugin of the listing: the loaded file and the slots using it. */
typedef struct listed_plugin {
	loader_plugin *p;
	json_t *instances;
} listed_plugin;

typedef struct plugin_listing {
	char **search;
	listed_plugin *v;
	size_t n;
	int oom;
} plugin_listing;

/* Load plugin (name or path) for slot, add slot to its entry (one entry
 * per file, as memd_open keeps one per file). A refusal goes to d. */
static void list_slot(plugin_listing *l, const char *plugin, const char *slot, uint32_t kind,
		      const config_node *node, config_diag *d)
{
	loader_plugin *p;
	memd_error err = { 0 };
	listed_plugin *e = NULL, *grown;

	if (loader_open(plugin, (const char *const *)l->search, &p, &err) < 0) {
		if (err.code == MEMD_ENOMEM)
			l->oom = 1;
		else
			config_diag_add(d, node, slot, "%s", err.msg);
		return;
	}
	if (kind && loader_require_kind(p, kind, slot, &err) < 0) {
		config_diag_add(d, node, slot, "%s", err.msg);
		loader_close(p);
		return;
	}
	for (size_t i = 0; i < l->n && !e; i++)
		if (strcmp(loader_path(l->v[i].p), loader_path(p)) == 0)
			e = &l->v[i];
	if (e) {
		loader_close(p);
	} else {
		grown = realloc(l->v, (l->n + 1) * sizeof(*grown));
		if (!grown) {
			loader_close(p);
			l->oom = 1;
			return;
		}
		l->v = grown;
		e = &l->v[l->n++];
		e->p = p;
		e->instances = json_array();
	}
	if (!e->instances || json_array_append_new(e->instances, json_string(slot)) < 0)
		l->oom = 1;
}

static json_t *listing_json(const plugin_listing *l)
{
	json_t *plugins = json_array(), *path = json_array();
	char abi[SLOT_NAME_MAX];

	for (size_t i = 0; plugins && path && l->search[i]; i++)
		if (json_array_append_new(path, json_string(l->search[i])) < 0)
			goto nomem;
	for (size_t i = 0; plugins && path && i < l->n; i++) {
		const memd_plugin *desc = loader_descriptor(l->v[i].p);
		json_t *po;
		snprintf(abi, sizeof(abi), "%u.%u", (unsigned)desc->abi_major,
			 (unsigned)desc->abi_minor);
		po = json_pack("{s:s,s:s,s:s,s:o,s:s,s:s,s:b,s:O}", "name", desc->name, "version",
			       desc->version, "description", desc->description, "kinds",
			       service_kinds_json(desc->kind), "path", loader_path(l->v[i].p), "abi",
			       abi, "threadsafe", (desc->flags & MEMD_PLUGIN_THREADSAFE) != 0,
			       "instances", l->v[i].instances);
		if (!po || json_array_append_new(plugins, po) < 0)
			goto nomem;
	}
	if (!plugins || !path)
		goto nomem;
	snprintf(abi, sizeof(abi), "%d.%d", MEMD_ABI_MAJOR, MEMD_ABI_MINOR);
	return json_pack("{s:s,s:s,s:o,s:o}", "version", MEMD_VERSION, "abi", abi, "search_path", path,
			 "plugins", plugins);
nomem:
	json_decref(plugins);
	json_decref(path);
	return NULL;
}

int32_t service_plugins_list(const char *config_path, const char *const *extra_path,
			     char **ret_json, config_diag *d)
{
	config_node *root = NULL;
	settings set = { 0 };
	plugin_listing l = { 0 };
	memd_error err = { 0 };
	int32_t r;

	if ((r = parse_for_check(config_path, &root, d)) < 0)
		return r;
	if ((r = search_of(root, extra_path, &l.search)) < 0) {
		config_free(root);
		return r;
	}
	if ((r = settings_load(root, &set, d)) < 0) { /* takes root */
		service_free_strv(l.search);
		return r;
	}
	for (size_t i = 0; i < set.n_stores && !l.oom; i++) {
		char slot[SLOT_NAME_MAX];
		int is_sessions = strcmp(set.stores[i].name, set.sessions_store) == 0;
		snprintf(slot, sizeof(slot), "stores.%s", set.stores[i].name);
		list_slot(&l, set.stores[i].plugin, slot, is_sessions ? MEMD_KIND_STORE : 0,
			  set.stores[i].node, d);
	}
	for (size_t i = 0; i < set.n_apps && !l.oom; i++) {
		char slot[SLOT_NAME_MAX];
		snprintf(slot, sizeof(slot), "apps.%s", set.apps[i].name);
		list_slot(&l, set.apps[i].strategy, slot, MEMD_KIND_STRATEGY, set.apps[i].node, d);
	}
	if (l.oom)
		r = MEMD_ENOMEM;
	else if (d->n)
		r = MEMD_EINVAL;
	else
		r = service_finish(listing_json(&l), ret_json, &err);
	for (size_t i = 0; i < l.n; i++) {
		json_decref(l.v[i].instances);
		loader_close(l.v[i].p);
	}
	free(l.v);
	service_free_strv(l.search);
	settings_clear(&set);
	return r;
}
