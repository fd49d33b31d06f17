/* SPDX-License-Identifier: MIT */
/*
 * all: the working memory is every conversation event of the session, in
 * order (summary events, which are derived, are left out). For short
 * sessions; its cost grows with the session by design.
 */
#include <stdlib.h>

#include <memd/plugin.h>


static int32_t forward(void *ud, const memd_event *e)
{
	const memd_context_sink *out = ud;
	return out->event(out->userdata, e);
}

static int32_t all_context(void *inst, const memd_call *call, const memd_reader *reader,
			   const memd_context_sink *out, memd_error *err)
{
	memd_event_query q = { .struct_size = sizeof(q), .flags = MEMD_EVQ_NO_SUMMARY };
	memd_event_sink sink = { sizeof(sink), (void *)out, forward };
	(void)inst;
	return reader->events(reader, call, &q, &sink, err);
}

static int32_t all_init(const memd_host *host, void **ret_instance, memd_error *err)
{
	(void)host;
	(void)err;
	*ret_instance = NULL;
	return 0;
}

static void all_fini(void *instance)
{
	(void)instance;
}

static const memd_strategy_ops all_ops = {
	.struct_size = sizeof(memd_strategy_ops),
	.context = all_context,
};

static const memd_plugin all_plugin = {
	.struct_size = sizeof(memd_plugin),
	.abi_major = MEMD_ABI_MAJOR,
	.abi_minor = 0,
	.kind = MEMD_KIND_STRATEGY,
	.flags = MEMD_PLUGIN_THREADSAFE,
	.name = "all",
	.version = "1.0.0",
	.description = "every event of the session",
	.init = all_init,
	.fini = all_fini,
	.strategy = &all_ops,
};

MEMD_PLUGIN_EXPORT const memd_plugin *memd_plugin_entry_v1(void)
{
	return &all_plugin;
}
