/* SPDX-License-Identifier: MIT */
/*
 * buffer_window: the working memory is the newest max_messages events of
 * the session (summary events left out). It asks the store for exactly
 * those rows (MEMD_EVQ_NEWEST with a limit), so its cost does not grow
 * with the length of the session.
 */
#include <stdlib.h>

#include <memd/plugin.h>

#define BW_MAX_MESSAGES_LIMIT 100000

typedef struct bw {
	uint32_t max_messages;
} bw;

static int32_t forward(void *ud, const memd_event *e)
{
	const memd_context_sink *out = ud;
	return out->event(out->userdata, e);
}

static int32_t bw_context(void *inst, const memd_call *call, const memd_reader *reader,
			  const memd_context_sink *out, memd_error *err)
{
	const bw *b = inst;
	memd_event_query q = {
		.struct_size = sizeof(q),
		.flags = MEMD_EVQ_NEWEST | MEMD_EVQ_NO_SUMMARY,
		.limit = b->max_messages,
	};
	memd_event_sink sink = { sizeof(sink), (void *)out, forward };
	return reader->events(reader, call, &q, &sink, err);
}

static int32_t bw_init(const memd_host *host, void **ret_instance, memd_error *err)
{
	int64_t n;
	bw *b;
	int32_t r = host->config_int(host, "max_messages", &n);

	if (r < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "max_messages: must be an integer");
	if (n < 1 || n > BW_MAX_MESSAGES_LIMIT)
		return memd_error_set(err, MEMD_EINVAL, 0, "max_messages: must be 1..%d, not %lld",
				      BW_MAX_MESSAGES_LIMIT, (long long)n);
	b = calloc(1, sizeof(*b));
	if (!b)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	b->max_messages = (uint32_t)n;
	*ret_instance = b;
	return 0;
}

static void bw_fini(void *instance)
{
	free(instance);
}

static const memd_config_key key_max_messages = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_INT,
	.name = "max_messages",
	.default_value = "20",
	.help = "how many of the newest events the LLM sees",
};

static const memd_config_key *const bw_keys[] = { &key_max_messages, NULL };

static const memd_strategy_ops bw_ops = {
	.struct_size = sizeof(memd_strategy_ops),
	.context = bw_context,
};

static const memd_plugin bw_plugin = {
	.struct_size = sizeof(memd_plugin),
	.abi_major = MEMD_ABI_MAJOR,
	.abi_minor = 0,
	.kind = MEMD_KIND_STRATEGY,
	.flags = MEMD_PLUGIN_THREADSAFE,
	.name = "buffer_window",
	.version = "1.0.0",
	.description = "the newest max_messages events",
	.config_keys = bw_keys,
	.init = bw_init,
	.fini = bw_fini,
	.strategy = &bw_ops,
};

MEMD_PLUGIN_EXPORT const memd_plugin *memd_plugin_entry_v1(void)
{
	return &bw_plugin;
}
