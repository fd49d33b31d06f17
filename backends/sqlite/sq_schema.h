/* SPDX-License-Identifier: MIT */
/*
 * sq_schema: versioned migrations of the SQLite store's schema.
 *
 * The schema version is the database's PRAGMA user_version; its
 * application_id marks the file as memd's. Migrations are an ordered list
 * of steps, each run in its own BEGIN IMMEDIATE transaction that re-reads
 * the version first, so two processes opening one file at once apply each
 * step exactly once (the second waits for the first, then skips).
 */
#ifndef MEMD_SQ_SCHEMA_H
#define MEMD_SQ_SCHEMA_H

#include "sq_db.h"

/* Bring the database on the writer connection c up to the newest schema.
 * Refuses (MEMD_EIO) a file of another application or a schema newer than
 * this plugin knows; a failing step is rolled back and leaves the previous
 * version in place. On success *ret_version is the schema version. */
int32_t sq_schema_migrate(sq_conn *c, const memd_host *host, int32_t *ret_version,
			  memd_error *err);

#endif
