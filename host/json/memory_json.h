/* SPDX-License-Identifier: MIT */
/*
 * memory_json: the JSON shapes of long-term memories (api/memd/memd.h,
 * "long-term memories"): a memory, an entry of its history, and the names
 * of memory kinds and history ops.
 */
#ifndef MEMD_HOST_MEMORY_JSON_H
#define MEMD_HOST_MEMORY_JSON_H

#include <jansson.h>

#include <memd/plugin.h>

/* The kind of a memory nobody named (memd_memory_create's default). */
#define MJ_KIND_DEFAULT "fact"

/* Nonzero if kind is one of the memory kinds: "fact", "preference",
 * "instruction", "episode" (case-sensitive). NULL is not. */
int mj_kind_valid(const char *kind);

/* The history name of a MEMD_MEM_* op ("add", "update", "delete",
 * "expire"), or NULL for another value. */
const char *mj_op_name(uint32_t op);

/* The memory JSON object of mm: {"id", "text", "kind", "topics",
 * "entities", "source" (mm->source_json as JSON, or null), "created",
 * "updated", "expires_at" (null when mm->expires_us is 0), "version"},
 * times RFC 3339 UTC with microseconds. topics_json and entities_json
 * are embedded as arrays ([] when NULL or not JSON). NULL on ENOMEM. */
json_t *mj_memory(const memd_memory *mm);

/* A history entry: {"version", "op", "memory": mj_memory(c->memory),
 * "actor", "reason" (null when none), "at"}. NULL on ENOMEM. */
json_t *mj_change(const memd_memory_change *c);

#endif
