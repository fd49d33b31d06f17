/* SPDX-License-Identifier: MIT */
/*
 * window: helpers shared by the token_window and summary_buffer strategies
 * (linked statically into each; not part of the ABI): owned copies of
 * events, tool call/result units, and the token window itself, which reads
 * a session newest-first in growing pages and stops as soon as the budget
 * is spent.
 *
 * A unit is an event and the tool results that directly follow it (events
 * with role "tool" or a tool_result content part): a window takes or
 * leaves a unit whole, so a tool call is never separated from its results.
 */
#ifndef MEMD_STRATEGY_WINDOW_H
#define MEMD_STRATEGY_WINDOW_H

#include <memd/plugin.h>

/* An event with every string owned (one allocation). */
typedef struct win_event {
	memd_event ev;
	char *buf;
} win_event;

/* Deep-copy e into *out. MEMD_ENOMEM on failure (out untouched). */
int32_t win_copy(const memd_event *e, win_event *out);
/* Free what win_copy made; accepts NULL and zeroed events. */
void win_event_clear(win_event *e);

/* Nonzero if e is a tool result: role "tool", or a content part with a
 * "tool_result" member. */
int win_is_tool_result(const memd_event *e);

/* Events in ascending seq order, owned. */
typedef struct win_list {
	win_event *v;
	size_t n;
	size_t cap;
	int64_t tokens;  /* sum of ev.tokens */
} win_list;

void win_list_clear(win_list *l);

#define WIN_PAGE_FIRST 16u  /* events in the first page read */
#define WIN_PAGE_MAX 512u   /* pages double up to this */

typedef struct win_opts {
	int64_t budget;      /* tokens the window may hold (>= 0) */
	uint32_t preserve;   /* the newest units holding this many events are
			      * kept even over the budget */
	int64_t after_seq;   /* only events with seq > after_seq (0 = all) */
} win_opts;

/* The token window: the newest units (summaries left out) whose tokens
 * sum to at most o->budget (plus the preserved ones), contiguous up to the
 * newest event, in ascending order, into *ret (caller clears it). Reads
 * newest-first, pages of WIN_PAGE_FIRST doubling to WIN_PAGE_MAX, and stops
 * at the first unit that does not fit: what it reads is bounded by the
 * window, not by the session. The reader's error is returned as is. */
int32_t win_collect(const memd_reader *r, const memd_call *call, const win_opts *o,
		    win_list *ret, memd_error *err);

/* Hand l to a context sink: every event, in order. */
int32_t win_emit(const win_list *l, const memd_context_sink *out);

#endif
