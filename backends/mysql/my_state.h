/* SPDX-License-Identifier: MIT */
/*
 * my_state: scoped state of the MariaDB store: applying a delta inside a
 * write transaction, and state_get (the merged view, read in one
 * statement so it is one snapshot).
 */
#ifndef MEMD_MY_STATE_H
#define MEMD_MY_STATE_H

#include "my_db.h"

/* The longest state key (without its app:/user: prefix) the schema keeps;
 * the host refuses longer keys before they reach a store. */
#define MY_STATE_KEY_MAX 1024

/* Validate a delta (see pu_state_delta_foreach) and the length of its
 * keys without touching the database. */
int32_t my_state_check(const char *delta_json, memd_error *err);
/* Inside a transaction on c: apply delta_json to scope's state. */
int32_t my_state_apply(my_conn *c, const memd_scope *scope, const char *delta_json,
		       memd_error *err);

/* memd_store_ops member; see api/memd/store.h. inst is the my_store. */
int32_t my_state_get(void *inst, const memd_call *call, const memd_scope *scope,
		     const memd_text_sink *out, memd_error *err);

#endif
