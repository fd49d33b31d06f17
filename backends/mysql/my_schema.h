/* SPDX-License-Identifier: MIT */
/*
 * my_schema: versioned schema migrations of the MariaDB store, run at
 * startup. Safe when several memd processes start at once: the steps run
 * under a named server lock (GET_LOCK) per database, every step is
 * idempotent (CREATE ... IF NOT EXISTS, ADD COLUMN IF NOT EXISTS), and
 * memd_schema records the version each step reached.
 */
#ifndef MEMD_MY_SCHEMA_H
#define MEMD_MY_SCHEMA_H

#include "my_db.h"

/* The schema version this plugin writes. */
#define MY_SCHEMA_LATEST 6

/* Bring the database on c up to MY_SCHEMA_LATEST. *ret_version is the
 * version found afterwards. Refuses a database whose schema is newer
 * than this plugin knows (MEMD_EIO). Closes c when done (it ran with
 * changed session settings); the pool reopens it on first use. */
int32_t my_schema_migrate(my_conn *c, const memd_host *host, int32_t *ret_version,
			  memd_error *err);

#endif
