/* SPDX-License-Identifier: MIT */
/*
 * sqlite: memd's embedded session store (semantics in api/memd/store.h,
 * storage rules in docs/architecture.md, Stores and Durability). The plugin's
 * descriptor, config keys and instance life cycle; the ops live in the
 * sq_*.c files named after what they store.
 */
#include <stdlib.h>
#include <string.h>

#include <memd/plugin.h>

#include "sq_artifacts.h"
#include "sq_checkpoints.h"
#include "sq_db.h"
#include "sq_events.h"
#include "sq_feed.h"
#include "sq_group.h"
#include "sq_lanes.h"
#include "sq_memories.h"
#include "sq_sessions.h"
#include "sq_state.h"
#include "sq_tasks.h"
#include "sq_transcripts.h"

#define SQ_PLUGIN_VERSION "1.0.0"

#define SQ_DEFAULT_PATH "./data/memd.db"
#define SQ_DEFAULT_SYNCHRONOUS "full"
#define SQ_DEFAULT_BUSY_TIMEOUT_MS 5000
#define SQ_DEFAULT_READERS 4
/* 64 MiB: four times the WAL SQ_WAL_AUTOCHECKPOINT_PAGES lets grow. */
#define SQ_DEFAULT_RESERVE_KB 65536
#define SQ_RESERVE_MAX_KB (16LL * 1024 * 1024) /* 16 GiB */
#define SQ_BYTES_PER_KB 1024
#define SQ_BUSY_TIMEOUT_MAX_MS 3600000 /* an hour */
#define SQ_READERS_MAX 256

#define SQ_STR(x) SQ_STR2(x)
#define SQ_STR2(x) #x

static const memd_config_key key_path = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_STRING,
	.name = "path",
	.default_value = SQ_DEFAULT_PATH,
	.help = "database file; missing parent directories are created",
};
static const char *const synchronous_choices[] = { "full", "normal", NULL };
static const memd_config_key key_synchronous = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_STRING,
	.name = "synchronous",
	.default_value = SQ_DEFAULT_SYNCHRONOUS,
	.help = "full (an acknowledged append survives power loss) or normal (faster; "
		"the last commits may be lost on power loss, never on a crash)",
	.choices = synchronous_choices, /* a 1.0 host ignores it: sq_init checks too */
};
static const memd_config_key key_busy_timeout = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_INT,
	.name = "busy_timeout_ms",
	.default_value = SQ_STR(SQ_DEFAULT_BUSY_TIMEOUT_MS),
	.help = "how long a write waits for another process's lock before failing with 503",
};
static const memd_config_key key_readers = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_INT,
	.name = "readers",
	.default_value = SQ_STR(SQ_DEFAULT_READERS),
	.help = "read-only connections in the pool (concurrent reads)",
};
static const memd_config_key key_reserve = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_INT,
	.name = "reserve_kb",
	.default_value = SQ_STR(SQ_DEFAULT_RESERVE_KB),
	.help = "disk space (KiB) kept in a file beside the database and given up when the "
		"disk is full, so that deletes still succeed and free pages; the WAL is "
		"checkpointed at a quarter of it at most (0: no reserve)",
};
static const memd_config_key *const config_keys[] = {
	&key_path, &key_synchronous, &key_busy_timeout, &key_readers, &key_reserve, NULL,
};

/* A string key, or def when the host has no value for it. */
static int32_t cfg_string(const memd_host *host, const char *key, const char *def,
			  const char **ret, memd_error *err)
{
	int32_t r = host->config_string ? host->config_string(host, key, ret) : MEMD_ENOTFOUND;

	if (r == MEMD_ENOTFOUND) {
		*ret = def;
		return 0;
	}
	if (r < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "sqlite: %s must be a string", key);
	return 0;
}

/* An int key within [min, max], or def when the host has no value. */
static int32_t cfg_int(const memd_host *host, const char *key, int64_t def, int64_t min,
		       int64_t max, int64_t *ret, memd_error *err)
{
	int32_t r = host->config_int ? host->config_int(host, key, ret) : MEMD_ENOTFOUND;

	if (r == MEMD_ENOTFOUND) {
		*ret = def;
		return 0;
	}
	if (r < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "sqlite: %s must be an integer", key);
	if (*ret < min || *ret > max)
		return memd_error_set(err, MEMD_EINVAL, 0, "sqlite: %s must be %lld..%lld, not %lld",
				      key, (long long)min, (long long)max, (long long)*ret);
	return 0;
}

static int32_t sq_init(const memd_host *host, void **ret_instance, memd_error *err)
{
	sq_options o = { 0 };
	const char *sync = NULL;
	int64_t busy = 0, readers = 0, reserve_kb = 0;
	sq_store *s;
	int32_t r;

	if (!host || !host->now_us || !host->monotonic_us)
		return memd_error_set(err, MEMD_EINVAL, 0, "sqlite: the host gave no clock");
	r = cfg_string(host, "path", SQ_DEFAULT_PATH, &o.path, err);
	if (r == 0)
		r = cfg_string(host, "synchronous", SQ_DEFAULT_SYNCHRONOUS, &sync, err);
	if (r == 0)
		r = cfg_int(host, "busy_timeout_ms", SQ_DEFAULT_BUSY_TIMEOUT_MS, 0,
			    SQ_BUSY_TIMEOUT_MAX_MS, &busy, err);
	if (r == 0)
		r = cfg_int(host, "readers", SQ_DEFAULT_READERS, 1, SQ_READERS_MAX, &readers, err);
	if (r == 0)
		r = cfg_int(host, "reserve_kb", SQ_DEFAULT_RESERVE_KB, 0, SQ_RESERVE_MAX_KB,
			    &reserve_kb, err);
	if (r < 0)
		return r;
	if (strcmp(sync, "full") == 0)
		o.synchronous = SQ_SYNC_FULL;
	else if (strcmp(sync, "normal") == 0)
		o.synchronous = SQ_SYNC_NORMAL;
	else
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "sqlite: synchronous must be full or normal, not '%.64s'", sync);
	o.busy_timeout_ms = (int32_t)busy;
	o.readers = (uint32_t)readers;
	o.reserve_bytes = reserve_kb * SQ_BYTES_PER_KB;

	r = sq_store_open(host, &o, &s, err);
	if (r < 0)
		return r;
	if (host->log)
		host->log(host, MEMD_LOG_INFO,
			  "opened %s (schema %d, WAL, synchronous=%s, %u readers)", s->path,
			  (int)s->schema_version, sync, (unsigned)o.readers);
	*ret_instance = s;
	return 0;
}

static void sq_fini(void *instance)
{
	sq_group_log_stats(instance);
	sq_store_close(instance);
}

static const memd_store_ops store_ops = {
	.struct_size = sizeof(memd_store_ops),
	.session_create = sq_session_create,
	.session_get = sq_session_get,
	.session_list = sq_session_list,
	.session_update = sq_session_update,
	.session_delete = sq_session_delete,
	.append = sq_append,
	.events_load = sq_events_load,
	.state_get = sq_state_get,
	.artifact_put = sq_artifact_put,
	.artifact_get = sq_artifact_get,
	.artifact_list = sq_artifact_list,
	.artifact_versions = sq_artifact_versions,
	.artifact_delete = sq_artifact_delete,
	.user_delete = sq_user_delete,
	.feed_read = sq_feed_read,
	.feed_head = sq_feed_head,
	.cursor_get = sq_cursor_get,
	.cursor_set = sq_cursor_set,
	.ping = sq_ping,
	.operation_list = sq_operation_list,
	.operation_get = sq_operation_get,
	.state_history = sq_state_history,
	.lane_get = sq_lane_get,
	.lane_write = sq_lane_write,
	.lane_list = sq_lane_list,
	.lane_delete = sq_lane_delete,
	.lane_prune = sq_lane_prune,
	.inbox_put = sq_inbox_put,
	.inbox_take = sq_inbox_take,
	.inbox_list = sq_inbox_list,
	.session_list_ended = sq_session_list_ended,
	.memory_commit = sq_memory_commit,
	.memory_get = sq_memory_get,
	.memory_list = sq_memory_list,
	.memory_history = sq_memory_history,
	.memory_expire = sq_memory_expire,
	.session_list_pending = sq_session_list_pending,
	.stats = sq_stats,
	.checkpoint_put = sq_checkpoint_put,
	.checkpoint_put_writes = sq_checkpoint_put_writes,
	.checkpoint_get = sq_checkpoint_get,
	.checkpoint_list = sq_checkpoint_list,
	.checkpoint_delete = sq_checkpoint_delete,
	.checkpoint_resumable = sq_checkpoint_resumable,
	.checkpoint_expire = sq_checkpoint_expire,
	.task_put = sq_task_put,
	.task_get = sq_task_get,
	.task_list = sq_task_list,
	.task_delete = sq_task_delete,
};

static const memd_plugin descriptor = {
	.struct_size = sizeof(memd_plugin),
	.abi_major = MEMD_ABI_MAJOR,
	.abi_minor = 6, /* the task paths of checkpoint writes; 1.5: checkpoints and tasks */
	.kind = MEMD_KIND_STORE,
	.flags = MEMD_PLUGIN_THREADSAFE,
	.name = "sqlite",
	.version = SQ_PLUGIN_VERSION,
	.description = "embedded SQLite session store (WAL, one writer, read pool)",
	.config_keys = config_keys,
	.init = sq_init,
	.fini = sq_fini,
	.store = &store_ops,
};

MEMD_PLUGIN_EXPORT const memd_plugin *memd_plugin_entry_v1(void)
{
	return &descriptor;
}
