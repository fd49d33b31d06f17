/* SPDX-License-Identifier: MIT */
/*
 * recent_turns: an example third-party memd strategy, built only against
 * the installed headers (see README.md).
 *
 * The working memory is the newest `turns` user turns, each with
 * everything that came after it (assistant replies, tool calls and their
 * results), so a turn is never cut in half. Summary events are left out.
 * With `max_tokens` set, only as many of those turns as fit in that many
 * tokens are kept (whole turns, newest first). An event's tokens are the
 * count the host stored with it; for an event stored without one (0), the
 * plugin asks the host's token counter (memd_host.count_tokens: the
 * tokenizer memd is configured with, approximate or exact BPE).
 *
 * It loads only what it needs. First it walks back from the newest event
 * in pages (MEMD_EVQ_NEWEST with before_seq), keeping only seqs and roles,
 * until it has seen `turns` user events (or the start of the session).
 * Then it asks for exactly the events from that user turn on and streams
 * them to the host. The cost depends on the size of the last turns, not on
 * the length of the session.
 *
 * on_session_finalize (ABI 1.2, optional) shows the last call a strategy
 * gets for a session: memd makes it once when the session's lane expires.
 * This one leaves a closing note, a role "summary" event (which its own
 * context leaves out) saying how many user turns the session had, covering
 * its last event. It reads only seqs and roles, a page at a time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memd/plugin.h>

#define RT_VERSION "1.1.0"
/* Bounds of the `turns` key. */
#define RT_TURNS_MIN 1
#define RT_TURNS_MAX 10000
/* Events per page while walking back: a guess at events per turn times
 * turns, clamped. */
#define RT_EVENTS_PER_TURN_GUESS 4
#define RT_PAGE_MIN 16
#define RT_PAGE_MAX 1024
#define RT_MAX_TOKENS_LIMIT 100000000
/* Room for the closing note's text and content JSON. */
#define RT_NOTE_MAX 128

typedef struct recent_turns {
	const memd_host *host;
	uint32_t turns;
	uint32_t page;
	int64_t max_tokens; /* 0 = no token limit */
} recent_turns;

/* What phase 1 keeps of one event. */
typedef struct rt_mark {
	int64_t seq;
	int64_t tokens;
	int is_user;
} rt_mark;

typedef struct rt_page {
	const memd_host *host;
	rt_mark *marks;
	uint32_t n;
	uint32_t cap;
} rt_page;

/* The event's tokens: as stored by the host, else counted by the host. */
static int64_t rt_tokens(const memd_host *host, const memd_event *e)
{
	int64_t n = 0;
	if (e->tokens > 0)
		return e->tokens;
	if (e->text && MEMD_HOST_HAS(host, count_tokens) &&
	    host->count_tokens(host, e->text, strlen(e->text), &n) == 0)
		return n;
	return 0;
}

static int32_t rt_collect(void *userdata, const memd_event *e)
{
	rt_page *p = userdata;
	if (p->n == p->cap)
		return MEMD_EINTERNAL; /* the reader ignored the page limit */
	p->marks[p->n].seq = e->seq;
	p->marks[p->n].is_user = e->role && strcmp(e->role, "user") == 0;
	p->marks[p->n].tokens = rt_tokens(p->host, e);
	p->n++;
	return 0;
}

static int32_t rt_forward(void *userdata, const memd_event *e)
{
	const memd_context_sink *out = userdata;
	return out->event(out->userdata, e);
}

/* Phase 1: the seq of the turns-th newest user event (0 = from the start
 * of the session) and the newest seq (0 = no events at all, or no whole
 * turn fits in max_tokens). */
static int32_t rt_find_start(const recent_turns *rt, const memd_call *call,
			     const memd_reader *reader, int64_t *ret_start, int64_t *ret_newest,
			     memd_error *err)
{
	rt_page page = {.host = rt->host, .cap = rt->page};
	memd_event_sink sink = {.struct_size = sizeof(sink), .userdata = &page,
				.event = rt_collect};
	int64_t before = 0, newest = 0, start = 0, total = 0, turn = 0;
	uint32_t found = 0;
	int full = 0; /* a turn did not fit in max_tokens */
	int32_t rc = 0;

	page.marks = malloc(sizeof(*page.marks) * page.cap);
	if (!page.marks)
		return memd_error_set(err, MEMD_ENOMEM, 0, "recent_turns: out of memory");
	for (;;) {
		memd_event_query q = {
			.struct_size = sizeof(q),
			.flags = MEMD_EVQ_NEWEST | MEMD_EVQ_NO_SUMMARY,
			.before_seq = before,
			.limit = page.cap,
		};
		page.n = 0;
		rc = reader->events(reader, call, &q, &sink, err);
		if (rc < 0)
			break;
		if (page.n == 0)
			break; /* the start of the session */
		if (newest == 0)
			newest = page.marks[page.n - 1].seq;
		/* The page is in ascending order: look at it newest first. A
		 * turn is a user event and everything after it. */
		for (uint32_t i = page.n; i-- > 0 && !full && found < rt->turns;) {
			turn += page.marks[i].tokens;
			if (!page.marks[i].is_user)
				continue;
			if (rt->max_tokens && total + turn > rt->max_tokens) {
				full = 1;
				break;
			}
			total += turn;
			turn = 0;
			start = page.marks[i].seq;
			found++;
		}
		if (full || found == rt->turns || page.n < page.cap)
			break;
		before = page.marks[0].seq;
	}
	free(page.marks);
	if (rc < 0)
		return rc;
	if (!full && found < rt->turns) {
		/* The start of the session: what precedes the first user turn
		 * comes too, if it fits. */
		if (!rt->max_tokens || total + turn <= rt->max_tokens)
			start = 0;
		else if (!found)
			newest = 0; /* nothing fits */
	} else if (full && !found) {
		newest = 0; /* not even the newest turn fits */
	}
	*ret_start = start;
	*ret_newest = newest;
	return 0;
}

static int32_t rt_context(void *inst, const memd_call *call, const memd_reader *reader,
			  const memd_context_sink *out, memd_error *err)
{
	const recent_turns *rt = inst;
	int64_t start = 0, newest = 0;
	int32_t rc = rt_find_start(rt, call, reader, &start, &newest, err);

	if (rc < 0 || newest == 0)
		return rc;
	/* Phase 2: exactly [start, newest], streamed to the host. The upper
	 * bound keeps events appended meanwhile out of this answer. */
	memd_event_query q = {
		.struct_size = sizeof(q),
		.flags = MEMD_EVQ_NO_SUMMARY,
		.after_seq = start > 0 ? start - 1 : 0,
		.before_seq = newest + 1,
	};
	memd_event_sink sink = {.struct_size = sizeof(sink), .userdata = (void *)out,
				.event = rt_forward};
	return reader->events(reader, call, &q, &sink, err);
}

/* The closing note: count the user turns a page at a time (ascending, after
 * the last seq seen), then write one summary event covering the last seq.
 * An empty session gets no note. A persist failure is returned as is: memd
 * retries the finalize. */
static int32_t rt_on_session_finalize(void *inst, const memd_call *call, const memd_reader *reader,
				      const memd_event_sink *persist, memd_error *err)
{
	const recent_turns *rt = inst;
	rt_page page = {.host = rt->host, .cap = rt->page};
	memd_event_sink sink = {.struct_size = sizeof(sink), .userdata = &page,
				.event = rt_collect};
	int64_t after = 0, users = 0;
	char text[RT_NOTE_MAX], content[2 * RT_NOTE_MAX];
	memd_event note = {.struct_size = sizeof(note)};
	int32_t rc = 0;

	page.marks = malloc(sizeof(*page.marks) * page.cap);
	if (!page.marks)
		return memd_error_set(err, MEMD_ENOMEM, 0, "recent_turns: out of memory");
	for (;;) {
		memd_event_query q = {
			.struct_size = sizeof(q),
			.flags = MEMD_EVQ_NO_SUMMARY,
			.after_seq = after,
			.limit = page.cap,
		};
		page.n = 0;
		if ((rc = reader->events(reader, call, &q, &sink, err)) < 0)
			break;
		for (uint32_t i = 0; i < page.n; i++)
			users += page.marks[i].is_user;
		if (page.n)
			after = page.marks[page.n - 1].seq;
		if (page.n < page.cap)
			break;
	}
	free(page.marks);
	if (rc < 0 || after == 0)
		return rc;
	snprintf(text, sizeof(text), "The session ended after %lld user turns.", (long long)users);
	snprintf(content, sizeof(content), "{\"parts\":[{\"text\":\"%s\"}]}", text);
	note.role = "summary";
	note.author = "recent_turns";
	note.content_json = content;
	note.text = text;
	note.covers_seq = after;
	rc = persist->event(persist->userdata, &note);
	if (rc < 0)
		return memd_error_set(err, rc, MEMD_ERROR_RETRYABLE,
				      "recent_turns: the host could not persist the closing note");
	return 0;
}

static int32_t rt_init(const memd_host *host, void **ret_instance, memd_error *err)
{
	int64_t turns, max_tokens;
	recent_turns *rt;
	int32_t rc = host->config_int(host, "turns", &turns);

	if (rc < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "turns: must be an integer");
	if (turns < RT_TURNS_MIN || turns > RT_TURNS_MAX)
		return memd_error_set(err, MEMD_EINVAL, 0, "turns: must be %d..%d, not %lld",
				      RT_TURNS_MIN, RT_TURNS_MAX, (long long)turns);
	if (host->config_int(host, "max_tokens", &max_tokens) < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "max_tokens: must be an integer");
	if (max_tokens < 0 || max_tokens > RT_MAX_TOKENS_LIMIT)
		return memd_error_set(err, MEMD_EINVAL, 0, "max_tokens: must be 0..%d, not %lld",
				      RT_MAX_TOKENS_LIMIT, (long long)max_tokens);
	rt = calloc(1, sizeof(*rt));
	if (!rt)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	rt->host = host;
	rt->max_tokens = max_tokens;
	rt->turns = (uint32_t)turns;
	rt->page = rt->turns * RT_EVENTS_PER_TURN_GUESS;
	if (rt->page < RT_PAGE_MIN)
		rt->page = RT_PAGE_MIN;
	if (rt->page > RT_PAGE_MAX)
		rt->page = RT_PAGE_MAX;
	host->log(host, MEMD_LOG_DEBUG, "recent_turns %s: %u turns, pages of %u events",
		  RT_VERSION, rt->turns, rt->page);
	*ret_instance = rt;
	return 0;
}

static void rt_fini(void *instance)
{
	free(instance);
}

static const memd_config_key rt_key_turns = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_INT,
	.name = "turns",
	.default_value = "3",
	.help = "how many of the newest user turns to keep, each with everything after it",
};

static const memd_config_key rt_key_max_tokens = {
	.struct_size = sizeof(memd_config_key),
	.type = MEMD_CONFIG_INT,
	.name = "max_tokens",
	.default_value = "0",
	.help = "keep only the newest whole turns that fit in this many tokens (0 = no limit)",
};

static const memd_config_key *const rt_keys[] = {&rt_key_turns, &rt_key_max_tokens, NULL};

static const memd_strategy_ops rt_ops = {
	.struct_size = sizeof(memd_strategy_ops),
	.context = rt_context,
	.on_session_finalize = rt_on_session_finalize,
};

static const memd_plugin rt_plugin = {
	.struct_size = sizeof(memd_plugin),
	.abi_major = MEMD_ABI_MAJOR,
	.abi_minor = 2, /* on_session_finalize came with ABI 1.2 */
	.kind = MEMD_KIND_STRATEGY,
	.flags = MEMD_PLUGIN_THREADSAFE, /* no shared mutable state */
	.name = "recent_turns",
	.version = RT_VERSION,
	.description = "the newest user turns, each with everything after it",
	.config_keys = rt_keys,
	.init = rt_init,
	.fini = rt_fini,
	.strategy = &rt_ops,
};

MEMD_PLUGIN_EXPORT const memd_plugin *memd_plugin_entry_v1(void)
{
	return &rt_plugin;
}
