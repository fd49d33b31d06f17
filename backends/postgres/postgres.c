/* SPDX-License-Identifier: MIT */
/*
 * postgres: the PostgreSQL session store (semantics in api/memd/store.h,
 * storage rules in docs/architecture.md, Stores), for running
 * several memd processes over one database. The plugin's descriptor,
 * config keys and instance life cycle; the ops live in the pg_*.c files
 * named after what they store.
 */
#include <stdlib.h>
#include <string.h>

#include <memd/plugin.h>

#include "pg_artifacts.h"
#include "pg_checkpoints.h"
#include "pg_db.h"
#include "pg_events.h"
#include "pg_feed.h"
#include "pg_lanes.h"
#include "pg_memories.h"
#include "pg_sessions.h"
#include "pg_state.h"
#include "pg_tasks.h"
#include "pg_transcripts.h"

#define PG_PLUGIN_VERSION "1.0.0"

#define PG_DEFAULT_SCHEMA "public"
#define PG_DEFAULT_POOL 8
#define PG_POOL_MAX 1024
#define PG_DEFAULT_CONNECT_TIMEOUT_S 5
#define PG_CONNECT_TIMEOUT_MIN_S 2 /* libpq's own minimum */
#define PG_CONNECT_TIMEOUT_MAX_S 3600
#define PG_DEFAULT_STATEMENT_TIMEOUT_MS 30000
#define PG_STATEMENT_TIMEOUT_MAX_MS 86400000 /* a day */
#define PG_DEFAULT_GROUP_COMMIT 32
#define PG_GROUP_COMMIT_MAX 1024
#define PG_PORT_MAX 65535
#define PG_SCHEMA_NAME_MAX 63 /* NAMEDATALEN - 1 */

#define PG_STR(x) PG_STR2(x)
#define PG_STR2(x) #x

#define KEY(var, t, fl, nm, dflt, hlp) \
	static const memd_config_key var = { .struct_size = sizeof(memd_config_key), \
		.type = (t), .flags = (fl), .name = (nm), .default_value = (dflt), .help = (hlp) }

KEY(key_dsn, MEMD_CONFIG_STRING, 0, "dsn", NULL,
    "libpq connection string or URI (\"host=... dbname=...\", postgresql://...); "
    "the discrete keys below override what it says");
KEY(key_host, MEMD_CONFIG_STRING, 0, "host", NULL, "server host name, address or socket dir");
KEY(key_port, MEMD_CONFIG_INT, 0, "port", NULL, "server port (libpq's default: 5432)");
KEY(key_database, MEMD_CONFIG_STRING, 0, "database", NULL, "database name");
KEY(key_user, MEMD_CONFIG_STRING, 0, "user", NULL, "role to log in as");
KEY(key_password, MEMD_CONFIG_STRING, MEMD_CONFIG_SECRET, "password", NULL,
    "password (use ${ENV_VAR}; never logged)");
KEY(key_sslmode, MEMD_CONFIG_STRING, 0, "sslmode", NULL,
    "disable, allow, prefer, require, verify-ca or verify-full");
KEY(key_sslrootcert, MEMD_CONFIG_STRING, 0, "sslrootcert", NULL, "CA certificate file");
KEY(key_sslcert, MEMD_CONFIG_STRING, 0, "sslcert", NULL, "client certificate file");
KEY(key_sslkey, MEMD_CONFIG_STRING, 0, "sslkey", NULL, "client key file");
KEY(key_schema, MEMD_CONFIG_STRING, 0, "schema", PG_DEFAULT_SCHEMA,
    "schema that holds memd's tables (created if missing)");
KEY(key_pool, MEMD_CONFIG_INT, 0, "pool", PG_STR(PG_DEFAULT_POOL),
    "connections per memd process (concurrent requests to the database)");
KEY(key_connect_timeout, MEMD_CONFIG_INT, 0, "connect_timeout_s",
    PG_STR(PG_DEFAULT_CONNECT_TIMEOUT_S), "give up connecting after this many seconds (>= 2)");
KEY(key_statement_timeout, MEMD_CONFIG_INT, 0, "statement_timeout_ms",
    PG_STR(PG_DEFAULT_STATEMENT_TIMEOUT_MS),
    "server-side limit per statement (0 = none); a timeout fails the call with 503");
KEY(key_group_commit, MEMD_CONFIG_INT, 0, "group_commit", PG_STR(PG_DEFAULT_GROUP_COMMIT),
    "most concurrent appends committed in one transaction (1 = off)");

static const memd_config_key *const config_keys[] = {
	&key_dsn, &key_host, &key_port, &key_database, &key_user, &key_password,
	&key_sslmode, &key_sslrootcert, &key_sslcert, &key_sslkey, &key_schema, &key_pool,
	&key_connect_timeout, &key_statement_timeout, &key_group_commit, NULL,
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
		return memd_error_set(err, MEMD_EINVAL, 0, "postgres: %s must be a string", key);
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
		return memd_error_set(err, MEMD_EINVAL, 0, "postgres: %s must be an integer", key);
	if (*ret < min || *ret > max)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "postgres: %s must be %lld..%lld, not %lld", key,
				      (long long)min, (long long)max, (long long)*ret);
	return 0;
}

static int32_t check_sslmode(const char *mode, memd_error *err)
{
	static const char *const modes[] = { "disable", "allow", "prefer", "require",
					     "verify-ca", "verify-full" };

	if (!mode)
		return 0;
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
		if (strcmp(mode, modes[i]) == 0)
			return 0;
	return memd_error_set(err, MEMD_EINVAL, 0,
			      "postgres: sslmode must be disable, allow, prefer, require, "
			      "verify-ca or verify-full, not '%.32s'", mode);
}

static int32_t pg_init(const memd_host *host, void **ret_instance, memd_error *err)
{
	pg_options o = { 0 };
	int64_t pool = 0, group = 0;
	pg_store *s;
	int32_t r;

	if (!host || !host->now_us || !host->monotonic_us)
		return memd_error_set(err, MEMD_EINVAL, 0, "postgres: the host gave no clock");
	r = cfg_string(host, "dsn", NULL, &o.dsn, err);
	if (r == 0)
		r = cfg_string(host, "host", NULL, &o.host, err);
	if (r == 0)
		r = cfg_int(host, "port", 0, 1, PG_PORT_MAX, &o.port, err);
	if (r == 0)
		r = cfg_string(host, "database", NULL, &o.database, err);
	if (r == 0)
		r = cfg_string(host, "user", NULL, &o.user, err);
	if (r == 0)
		r = cfg_string(host, "password", NULL, &o.password, err);
	if (r == 0)
		r = cfg_string(host, "sslmode", NULL, &o.sslmode, err);
	if (r == 0)
		r = cfg_string(host, "sslrootcert", NULL, &o.sslrootcert, err);
	if (r == 0)
		r = cfg_string(host, "sslcert", NULL, &o.sslcert, err);
	if (r == 0)
		r = cfg_string(host, "sslkey", NULL, &o.sslkey, err);
	if (r == 0)
		r = cfg_string(host, "schema", PG_DEFAULT_SCHEMA, &o.schema, err);
	if (r == 0)
		r = cfg_int(host, "pool", PG_DEFAULT_POOL, 1, PG_POOL_MAX, &pool, err);
	if (r == 0)
		r = cfg_int(host, "connect_timeout_s", PG_DEFAULT_CONNECT_TIMEOUT_S,
			    PG_CONNECT_TIMEOUT_MIN_S, PG_CONNECT_TIMEOUT_MAX_S, &o.connect_timeout_s,
			    err);
	if (r == 0)
		r = cfg_int(host, "statement_timeout_ms", PG_DEFAULT_STATEMENT_TIMEOUT_MS, 0,
			    PG_STATEMENT_TIMEOUT_MAX_MS, &o.statement_timeout_ms, err);
	if (r == 0)
		r = cfg_int(host, "group_commit", PG_DEFAULT_GROUP_COMMIT, 1, PG_GROUP_COMMIT_MAX,
			    &group, err);
	if (r == 0)
		r = check_sslmode(o.sslmode, err);
	if (r < 0)
		return r;
	if (!o.schema || !o.schema[0] || strlen(o.schema) > PG_SCHEMA_NAME_MAX)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "postgres: schema must be 1..%d bytes", PG_SCHEMA_NAME_MAX);
	if (!o.dsn && !o.host && !o.database)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "postgres: set dsn, or host and database");
	o.pool = (uint32_t)pool;
	o.group_commit = (uint32_t)group;

	r = pg_store_open(host, &o, &s, err);
	if (r < 0)
		return r;
	if (host->log)
		host->log(host, MEMD_LOG_INFO,
			  "connected (schema '%s' version %d, pool %u, group commit %u)", s->schema,
			  (int)s->schema_version, (unsigned)o.pool, (unsigned)o.group_commit);
	*ret_instance = s;
	return 0;
}

static void pg_fini(void *instance)
{
	pg_store_close(instance);
}

static const memd_store_ops store_ops = {
	.struct_size = sizeof(memd_store_ops),
	.session_create = pg_session_create,
	.session_get = pg_session_get,
	.session_list = pg_session_list,
	.session_update = pg_session_update,
	.session_delete = pg_session_delete,
	.append = pg_append,
	.events_load = pg_events_load,
	.state_get = pg_state_get,
	.artifact_put = pg_artifact_put,
	.artifact_get = pg_artifact_get,
	.artifact_list = pg_artifact_list,
	.artifact_versions = pg_artifact_versions,
	.artifact_delete = pg_artifact_delete,
	.user_delete = pg_user_delete,
	.feed_read = pg_feed_read,
	.feed_head = pg_feed_head,
	.cursor_get = pg_cursor_get,
	.cursor_set = pg_cursor_set,
	.ping = pg_ping,
	.lane_get = pg_lane_get,
	.lane_write = pg_lane_write,
	.lane_list = pg_lane_list,
	.lane_delete = pg_lane_delete,
	.lane_prune = pg_lane_prune,
	.inbox_put = pg_inbox_put,
	.inbox_take = pg_inbox_take,
	.inbox_list = pg_inbox_list,
	.session_list_ended = pg_session_list_ended,
	.operation_list = pg_operation_list,
	.operation_get = pg_operation_get,
	.state_history = pg_state_history,
	.memory_commit = pg_memory_commit,
	.memory_get = pg_memory_get,
	.memory_list = pg_memory_list,
	.memory_history = pg_memory_history,
	.memory_expire = pg_memory_expire,
	.session_list_pending = pg_session_list_pending,
	.checkpoint_put = pg_checkpoint_put,
	.checkpoint_put_writes = pg_checkpoint_put_writes,
	.checkpoint_get = pg_checkpoint_get,
	.checkpoint_list = pg_checkpoint_list,
	.checkpoint_delete = pg_checkpoint_delete,
	.checkpoint_resumable = pg_checkpoint_resumable,
	.checkpoint_expire = pg_checkpoint_expire,
	.task_put = pg_task_put,
	.task_get = pg_task_get,
	.task_list = pg_task_list,
	.task_delete = pg_task_delete,
};

static const memd_plugin descriptor = {
	.struct_size = sizeof(memd_plugin),
	.abi_major = MEMD_ABI_MAJOR,
	.abi_minor = 6,
	.kind = MEMD_KIND_STORE,
	.flags = MEMD_PLUGIN_THREADSAFE,
	.name = "postgres",
	.version = PG_PLUGIN_VERSION,
	.description = "PostgreSQL session store (libpq pool, pipelined prepared statements, "
		       "group commit)",
	.config_keys = config_keys,
	.init = pg_init,
	.fini = pg_fini,
	.store = &store_ops,
};

MEMD_PLUGIN_EXPORT const memd_plugin *memd_plugin_entry_v1(void)
{
	return &descriptor;
}
