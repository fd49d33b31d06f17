/* SPDX-License-Identifier: MIT */
/*
 * pg_transcripts: the reads of the PostgreSQL store's transcript records,
 * operations and state history (an append writes both, in pg_events.c
 * and pg_state.c).
 */
#ifndef MEMD_PG_TRANSCRIPTS_H
#define MEMD_PG_TRANSCRIPTS_H

#include "pg_db.h"

/* memd_store_ops members; see api/memd/store.h for each contract. inst is
 * the pg_store. */
int32_t pg_operation_list(void *inst, const memd_call *call, const memd_scope *scope,
			  uint32_t limit, const memd_operation_sink *out, memd_error *err);
int32_t pg_operation_get(void *inst, const memd_call *call, const memd_scope *scope,
			 const char *id, const memd_operation_sink *out, memd_error *err);
int32_t pg_state_history(void *inst, const memd_call *call, const memd_scope *scope,
			 const memd_state_history_query *q, const memd_state_change_sink *out,
			 memd_error *err);

#endif
