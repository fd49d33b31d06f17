/* SPDX-License-Identifier: MIT */
/*
 * pg_schema: versioned migrations of the PostgreSQL store, run at startup
 * inside one transaction that holds an advisory lock per schema, so two
 * memd processes starting at once migrate exactly once.
 */
#ifndef MEMD_PG_SCHEMA_H
#define MEMD_PG_SCHEMA_H

#include "pg_db.h"

/* Create the schema if it is missing (the connection's search_path names
 * it already) and bring it to the latest version. Refuses a schema that
 * holds tables memd did not make, or a newer version than this plugin
 * knows (MEMD_EIO). *ret_version gets the version now in place. */
int32_t pg_schema_migrate(pg_conn *c, const memd_host *host, const char *schema,
			  int32_t *ret_version, memd_error *err);

#endif
