/* SPDX-License-Identifier: MIT */
/*
 * mysql: memd's MariaDB session store (semantics in api/memd/store.h,
 * storage rules in docs/architecture.md, Stores), for running
 * several memd processes over one database. The plugin's descriptor and
 * instance life cycle; config in my_config.c, connections in my_db.c,
 * the ops in the my_*.c files named after what they store.
 */
#include <mysql.h>
#include <stdlib.h>

#include <memd/plugin.h>

#include "my_artifacts.h"
#include "my_checkpoints.h"
#include "my_config.h"
#include "my_db.h"
#include "my_events.h"
#include "my_feed.h"
#include "my_lanes.h"
#include "my_memories.h"
#include "my_sessions.h"
#include "my_state.h"
#include "my_tasks.h"
#include "my_transcripts.h"

#define MY_PLUGIN_VERSION "1.0.0"
/* The task paths of checkpoint writes are 1.6's (the checkpoint and task
 * ops 1.5's; the memory ops and a session's memory_seq 1.3's; the lanes,
 * a session's lifecycle members and append usage 1.2's). */
#define MY_ABI_MINOR_NEEDED 6
#define MY_WHERE_MAX 320 /* host:port or socket path, for the log */

/* Live instances of this plugin in the process. The client library's
 * set-up is process-wide (its plugins, TLS, config dirs): the first init
 * makes it, the last fini undoes it, so nothing is left behind when the
 * host unloads the plugin. init and fini run only on the host's main
 * thread, so the count needs no lock. */
static unsigned my_library_users;

static int32_t my_init(const memd_host *host, void **ret_instance, memd_error *err)
{
	my_options o = { 0 };
	my_store *s = NULL;
	int32_t r;

	if (!host || !host->now_us || !host->monotonic_us)
		return memd_error_set(err, MEMD_EINVAL, 0, "mysql: the host gave no clock");
	/* Process-wide set-up of the client library: here, on the main
	 * thread, before any connection is made. */
	if (my_library_users == 0 && mysql_library_init(0, NULL, NULL))
		return memd_error_set(err, MEMD_EINTERNAL, 0,
				      "mysql: the client library failed to initialise");
	my_library_users++;
	r = my_config_load(host, &o, err);
	if (r == 0)
		r = my_store_open(host, &o, &s, err);
	if (r < 0) {
		if (--my_library_users == 0)
			mysql_library_end();
		return r;
	}
	if (host->log) {
		char where[MY_WHERE_MAX];
		if (s->opt.socket && s->opt.socket[0])
			snprintf(where, sizeof(where), "%s", s->opt.socket);
		else
			snprintf(where, sizeof(where), "%s:%u", s->opt.host, (unsigned)s->opt.port);
		host->log(host, MEMD_LOG_INFO,
			  "connected to %s at %s, database %s as %s, %s%s (schema %d, pool %u)",
			  s->server_version, where, s->opt.database, s->opt.user,
			  s->tls_cipher[0] ? "TLS " : "no TLS", s->tls_cipher,
			  (int)s->schema_version, (unsigned)s->opt.pool);
	}
	*ret_instance = s;
	return 0;
}

static void my_fini(void *instance)
{
	if (!instance)
		return;
	my_store_close(instance);
	if (my_library_users > 0 && --my_library_users == 0)
		mysql_library_end();
}

static const memd_store_ops store_ops = {
	.struct_size = sizeof(memd_store_ops),
	.session_create = my_session_create,
	.session_get = my_session_get,
	.session_list = my_session_list,
	.session_update = my_session_update,
	.session_delete = my_session_delete,
	.append = my_append,
	.events_load = my_events_load,
	.state_get = my_state_get,
	.artifact_put = my_artifact_put,
	.artifact_get = my_artifact_get,
	.artifact_list = my_artifact_list,
	.artifact_versions = my_artifact_versions,
	.artifact_delete = my_artifact_delete,
	.user_delete = my_user_delete,
	.feed_read = my_feed_read,
	.feed_head = my_feed_head,
	.cursor_get = my_cursor_get,
	.cursor_set = my_cursor_set,
	.ping = my_ping,
	.lane_get = my_lane_get,
	.lane_write = my_lane_write,
	.lane_list = my_lane_list,
	.lane_delete = my_lane_delete,
	.lane_prune = my_lane_prune,
	.inbox_put = my_inbox_put,
	.inbox_take = my_inbox_take,
	.inbox_list = my_inbox_list,
	.session_list_ended = my_session_list_ended,
	.operation_list = my_operation_list,
	.operation_get = my_operation_get,
	.state_history = my_state_history,
	.memory_commit = my_memory_commit,
	.memory_get = my_memory_get,
	.memory_list = my_memory_list,
	.memory_history = my_memory_history,
	.memory_expire = my_memory_expire,
	.session_list_pending = my_session_list_pending,
	.checkpoint_put = my_checkpoint_put,
	.checkpoint_put_writes = my_checkpoint_put_writes,
	.checkpoint_get = my_checkpoint_get,
	.checkpoint_list = my_checkpoint_list,
	.checkpoint_delete = my_checkpoint_delete,
	.checkpoint_resumable = my_checkpoint_resumable,
	.checkpoint_expire = my_checkpoint_expire,
	.task_put = my_task_put,
	.task_get = my_task_get,
	.task_list = my_task_list,
	.task_delete = my_task_delete,
};

static const memd_plugin descriptor = {
	.struct_size = sizeof(memd_plugin),
	.abi_major = MEMD_ABI_MAJOR,
	.abi_minor = MY_ABI_MINOR_NEEDED,
	.kind = MEMD_KIND_STORE,
	.flags = MEMD_PLUGIN_THREADSAFE,
	.name = "mysql",
	.version = MY_PLUGIN_VERSION,
	.description = "MariaDB session store (connection pool, row locks, commit-ordered feed; "
		       "several memd processes over one database)",
	.config_keys = my_config_keys,
	.init = my_init,
	.fini = my_fini,
	.store = &store_ops,
};

MEMD_PLUGIN_EXPORT const memd_plugin *memd_plugin_entry_v1(void)
{
	return &descriptor;
}
