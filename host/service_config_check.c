/* SPDX-License-Identifier: MIT */
/*
 * service_config_check: service_check_config (service.h), what `memd
 * config check` runs: a config checked as memd_open would take it,
 * without initializing any plugin.
 */
#include "service_int.h"

#include <stdio.h>
#include <string.h>

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
			     service_config_rule rule, config_diag *d)
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
