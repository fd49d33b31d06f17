/* SPDX-License-Identifier: MIT */
/*
 * service_admin: forgetting a user (memd_user_delete), the plugin listing
 * (memd_plugins_json), readiness (memd_ready) and the store metrics
 * (memd_metrics_text).
 */
#include "service/service_int.h"

#include <stdio.h>
#include <stdlib.h>

#include "memd-build.h"
#include "util/prom.h"

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

json_t *service_kinds_json(uint32_t kind)
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
		if ((kind & kinds[i].bit) && json_array_append_new(a, json_string(kinds[i].name)) < 0) {
			json_decref(a);
			a = NULL; /* out of memory: json_pack below fails on it */
		}
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
			if (instance_of(ns->inst, p) &&
			    json_array_append_new(insts, json_sprintf("stores.%s", ns->name)) < 0) {
				json_decref(insts);
				insts = NULL;
			}
		}
		for (size_t k = 0; insts && k < m->n_apps; k++)
			if (instance_of(m->apps[k].inst, p) &&
			    json_array_append_new(insts, json_sprintf("apps.%s", m->apps[k].app)) < 0) {
				json_decref(insts);
				insts = NULL;
			}
		po = json_pack("{s:s,s:s?,s:s?,s:o,s:s,s:s,s:b,s:o}", "name", d->name, "version",
			       d->version, "description", d->description, "kinds", service_kinds_json(d->kind),
			       "path", loader_path(p), "abi", abi, "threadsafe",
			       (d->flags & MEMD_PLUGIN_THREADSAFE) != 0, "instances", insts);
		if (!po || json_array_append_new(list, po) < 0) {
			json_decref(list);
			return service_oom(err);
		}
	}
	snprintf(abi, sizeof(abi), "%d.%d", MEMD_HOST_ABI_MAJOR, MEMD_HOST_ABI_MINOR);
	o = json_pack("{s:s,s:s,s:o}", "version", MEMD_VERSION, "abi", abi, "plugins", list);
	return service_finish(o, ret_json, err);
}

/* A degraded store is probed with a write of its own (this cursor) at
 * most this often when readiness is asked: a store whose space came back
 * is ready again even when no client writes to it (a load balancer sends
 * nothing to an instance that is not ready). */
#define READY_PROBE_CURSOR "memd.ready-probe"
#define READY_PROBE_INTERVAL_NS (10LL * 1000000000LL)

/* The readiness reason for a degraded store's MEMD_ERROR_STORAGE_* flags. */
static const char *storage_reason(uint32_t flags)
{
	if (flags & MEMD_ERROR_STORAGE_FULL)
		return "disk_full";
	if (flags & MEMD_ERROR_STORAGE_READONLY)
		return "read_only";
	return "io_error";
}

/* Every session store that is not ready, as [{"store", "reason",
 * "message"}] in *ret_list (owned): unreachable (ping fails), or
 * degraded (its last write failed with a full disk, read-only storage
 * or an I/O error, and the probe did not succeed). *ret_flags gets the
 * first one's flags. */
static int32_t ready_list(memd *m, json_t **ret_list, uint32_t *ret_flags, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	json_t *list = json_array();
	uint32_t first_flags = 0;

	if (!list)
		return service_oom(err);
	for (size_t i = 0; i < m->n_stores; i++) {
		store *st = m->stores[i].st;
		memd_error e = { .struct_size = sizeof(e) };
		store_health_report h;
		const char *reason = NULL, *msg = NULL;
		uint32_t flags = MEMD_ERROR_RETRYABLE;

		if (!st)
			continue;
		if (store_ping(st, &call, &e) < 0) {
			reason = "unreachable";
			msg = e.msg;
		} else if (store_health(st, &h)) {
			if (store_clock_ns() - h.since_ns >= READY_PROBE_INTERVAL_NS) {
				memd_error pe = { .struct_size = sizeof(pe) };
				(void)store_cursor_set(st, &call, READY_PROBE_CURSOR, 0, &pe);
			}
			if (store_health(st, &h)) {
				reason = storage_reason(h.flags);
				msg = h.msg;
				flags |= h.flags;
			}
		}
		if (!reason)
			continue;
		if (json_array_append_new(list, json_pack("{s:s,s:s,s:s}", "store", m->stores[i].name,
							  "reason", reason, "message", msg)) < 0) {
			json_decref(list);
			return service_oom(err);
		}
		if (!first_flags)
			first_flags = flags;
	}
	*ret_list = list;
	*ret_flags = first_flags;
	return 0;
}

int32_t memd_ready(memd *m, memd_error *err)
{
	json_t *list = NULL, *first;
	uint32_t flags = 0;
	int32_t r = ready_list(m, &list, &flags, err);

	if (r < 0)
		return r;
	first = json_array_get(list, 0);
	if (first)
		r = memd_error_set(err, MEMD_EUNAVAIL, flags, "%s: %s: %s",
				   json_string_value(json_object_get(first, "store")),
				   json_string_value(json_object_get(first, "reason")),
				   json_string_value(json_object_get(first, "message")));
	json_decref(list);
	return r;
}

int32_t memd_ready_json(memd *m, int *ret_ready, char **ret_json, memd_error *err)
{
	json_t *list = NULL, *o;
	uint32_t flags = 0;
	int32_t r = ready_list(m, &list, &flags, err);
	int ready;

	if (r < 0)
		return r;
	ready = json_array_size(list) == 0;
	if (ready) {
		json_decref(list);
		o = json_pack("{s:s}", "status", "ready");
	} else {
		o = json_pack("{s:s,s:o}", "status", "not_ready", "stores", list);
	}
	r = service_finish(o, ret_json, err);
	if (r == 0)
		*ret_ready = ready;
	return r;
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
	prom_printf(&b, "# HELP " STORE_METRIC_WRITES " Writes a store ran through group commit.\n"
			"# TYPE " STORE_METRIC_WRITES " counter\n");
	prom_printf(&b, "# HELP " STORE_METRIC_GROUPS " Transactions (commits) those writes shared; "
			"writes / groups is the mean commit group.\n# TYPE " STORE_METRIC_GROUPS " counter\n");
	for (size_t i = 0; i < m->n_stores; i++)
		if (m->stores[i].st)
			store_render_stats(m->stores[i].st, &b);
	store_render_usage(m->sessions, &b);
	service_watch_metrics(m, &b);
	service_memory_metrics(m, &b);
	if (b.oom) {
		free(b.p);
		return service_oom(err);
	}
	*ret_text = b.p;
	return 0;
}
