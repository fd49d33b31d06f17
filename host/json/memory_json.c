/* SPDX-License-Identifier: MIT */
/*
 * memory_json: the JSON of memories and their history (memory_json.h).
 */
#include "json/memory_json.h"

#include <string.h>

#include "json/event_json.h"

static const char *const kinds[] = { "fact", "preference", "instruction", "episode", NULL };

int mj_kind_valid(const char *kind)
{
	for (size_t i = 0; kind && kinds[i]; i++)
		if (strcmp(kind, kinds[i]) == 0)
			return 1;
	return 0;
}

const char *mj_op_name(uint32_t op)
{
	switch (op) {
	case MEMD_MEM_ADD:
		return "add";
	case MEMD_MEM_UPDATE:
		return "update";
	case MEMD_MEM_DELETE:
		return "delete";
	case MEMD_MEM_EXPIRE:
		return "expire";
	default:
		return NULL;
	}
}

/* text (a JSON array) as a new array; [] when NULL or not an array. */
static json_t *tags_json(const char *text)
{
	json_t *v = text ? ej_load(text) : NULL;

	if (v && json_is_array(v))
		return v;
	json_decref(v);
	return json_array();
}

static json_t *time_json(int64_t us)
{
	char buf[EJ_TIME_LEN];

	ej_format_time(us, buf);
	return json_string(buf);
}

json_t *mj_memory(const memd_memory *mm)
{
	json_t *source = mm->source_json ? ej_load(mm->source_json) : NULL;

	if (source && !json_is_object(source)) {
		json_decref(source);
		source = NULL;
	}
	return json_pack("{s:s,s:s,s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:I}", "id", mm->id, "text",
			 mm->text ? mm->text : "", "kind", mm->kind ? mm->kind : MJ_KIND_DEFAULT,
			 "topics", tags_json(mm->topics_json), "entities",
			 tags_json(mm->entities_json), "source", source ? source : json_null(),
			 "created", time_json(mm->created_us), "updated",
			 time_json(mm->updated_us), "expires_at",
			 mm->expires_us ? time_json(mm->expires_us) : json_null(), "version",
			 (json_int_t)mm->version);
}

json_t *mj_change(const memd_memory_change *c)
{
	const char *op = mj_op_name(c->op);

	return json_pack("{s:I,s:s,s:o,s:s,s:s?,s:o}", "version", (json_int_t)c->memory->version,
			 "op", op ? op : "unknown", "memory", mj_memory(c->memory), "actor",
			 c->actor ? c->actor : "", "reason", c->reason, "at", time_json(c->at_us));
}
