/* SPDX-License-Identifier: MIT */
/*
 * token_window: the working memory is the newest events whose token counts
 * (computed once by the host when each event was appended, with its
 * configured tokenizer) sum to at most max_tokens. A tool call is never
 * separated from its results: they are taken or left together. The newest
 * events covering preserve_recent events are kept even when they alone
 * are over the budget (0 = the budget is never exceeded). Summary events
 * are left out.
 *
 * It reads the session newest-first in growing pages and stops at the
 * first unit that does not fit (strategies/common/window.c), so its cost
 * depends on the budget, not on the length of the session.
 */
#include <stdlib.h>

#include <memd/plugin.h>

#include "window.h"

#define TW_MAX_TOKENS_LIMIT 100000000
#define TW_PRESERVE_LIMIT 100000

typedef struct tw {
	int64_t max_tokens;
	uint32_t preserve;
} tw;

static int32_t tw_context(void *inst, const memd_call *call, const memd_reader *reader,
			  const memd_context_sink *out, memd_error *err)
{
	const tw *t = inst;
	win_opts o = { .budget = t->max_tokens, .preserve = t->preserve };
	win_list l = { 0 };
	int32_t r = win_collect(reader, call, &o, &l, err);
	if (r < 0)
		return r;
	r = win_emit(&l, out);
	win_list_clear(&l);
	return r;
}

static int32_t tw_init(const memd_host *host, void **ret_instance, memd_error *err)
{
	int64_t max_tokens, preserve;
	tw *t;

	if (host->config_int(host, "max_tokens", &max_tokens) < 0 ||
	    host->config_int(host, "preserve_recent", &preserve) < 0)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "max_tokens and preserve_recent must be integers");
	if (max_tokens < 1 || max_tokens > TW_MAX_TOKENS_LIMIT)
		return memd_error_set(err, MEMD_EINVAL, 0, "max_tokens: must be 1..%d, not %lld",
				      TW_MAX_TOKENS_LIMIT, (long long)max_tokens);
	if (preserve < 0 || preserve > TW_PRESERVE_LIMIT)
		return memd_error_set(err, MEMD_EINVAL, 0, "preserve_recent: must be 0..%d, not %lld",
				      TW_PRESERVE_LIMIT, (long long)preserve);
	t = calloc(1, sizeof(*t));
	if (!t)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	t->max_tokens = max_tokens;
	t->preserve = (uint32_t)preserve;
	*ret_instance = t;
	return 0;
}

static void tw_fini(void *instance)
{
	free(instance);
}

static const memd_config_key key_max_tokens = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_INT,
	.name = "max_tokens",
	.default_value = "4000",
	.help = "token budget of the window (by the host's tokenizer)",
};

static const memd_config_key key_preserve = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_INT,
	.name = "preserve_recent",
	.default_value = "0",
	.help = "the newest N events are kept even over the budget (0 = never exceed it)",
};

static const memd_config_key *const tw_keys[] = { &key_max_tokens, &key_preserve, NULL };

static const memd_strategy_ops tw_ops = {
	.struct_size = sizeof(memd_strategy_ops),
	.context = tw_context,
};

static const memd_plugin tw_plugin = {
	.struct_size = sizeof(memd_plugin),
	.abi_major = MEMD_ABI_MAJOR,
	.abi_minor = 0,
	.kind = MEMD_KIND_STRATEGY,
	.flags = MEMD_PLUGIN_THREADSAFE,
	.name = "token_window",
	.version = "1.0.0",
	.description = "the newest events that fit max_tokens, tool calls kept with their results",
	.config_keys = tw_keys,
	.init = tw_init,
	.fini = tw_fini,
	.strategy = &tw_ops,
};

MEMD_PLUGIN_EXPORT const memd_plugin *memd_plugin_entry_v1(void)
{
	return &tw_plugin;
}
