/* SPDX-License-Identifier: MIT */
/*
 * memd plugin ABI, version 1: working-memory strategies (kind
 * MEMD_KIND_STRATEGY).
 *
 * A strategy decides what an LLM sees next from a session, and controls
 * loading: it asks for exactly the events it needs through the reader the
 * host passes in (last N, after a checkpoint, before a seq), never "load
 * everything then filter". The host instantiates a strategy once per app
 * config entry; the instance's config node is that app's working_memory.
 */
#ifndef MEMD_STRATEGY_H
#define MEMD_STRATEGY_H

#include "abi.h"
#include "host.h"
#include "store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Read access to one session, provided by the host for one call. */
typedef struct memd_reader memd_reader;
struct memd_reader {
	uint32_t struct_size;            /* since 1.0 */
	uint32_t reserved;               /* since 1.0 */
	void *reader_data;               /* since 1.0: the host's */
	const memd_scope *scope;         /* since 1.0: the session being read */
	/* since 1.0: the session record (version, last_seq, summary_seq). */
	int32_t (*session)(const memd_reader *r, const memd_call *call,
			   const memd_session_sink *out, memd_error *err);
	/* since 1.0: events of the session, as memd_store_ops.events_load. */
	int32_t (*events)(const memd_reader *r, const memd_call *call,
			  const memd_event_query *q, const memd_event_sink *out,
			  memd_error *err);
};

/* Where a strategy puts the context it chose. summary at most once and
 * before any event; events in ascending seq order. */
typedef struct memd_context_sink {
	uint32_t struct_size;            /* since 1.0 */
	void *userdata;                  /* since 1.0 */
	int32_t (*summary)(void *userdata, const memd_event *summary); /* since 1.0 */
	int32_t (*event)(void *userdata, const memd_event *e);         /* since 1.0 */
} memd_context_sink;

typedef struct memd_strategy_ops {
	uint32_t struct_size;            /* since 1.0 */
	uint32_t reserved;               /* since 1.0 */
	/* since 1.0, required: the working-memory view of reader->scope. */
	int32_t (*context)(void *inst, const memd_call *call, const memd_reader *reader,
			   const memd_context_sink *out, memd_error *err);
	/* since 1.0, optional: runs after an append was acknowledged, outside
	 * the request, never twice at once for one session. Events written to
	 * persist (e.g. one role "summary" event with covers_seq) are appended
	 * to the session by the host. A failure here loses nothing. */
	int32_t (*after_append)(void *inst, const memd_call *call, const memd_reader *reader,
				const memd_event_sink *persist, memd_error *err);
	/* since 1.2, optional: the session's lane expired and memd finalizes
	 * the session: the last call a strategy gets for it, once per session
	 * (with several memd processes too), on a worker thread, never while
	 * after_append runs for the session. Events written to persist are
	 * appended like after_append's (summary_buffer folds the rest of the
	 * session into one summary). A failure is retried (at most 3 attempts
	 * in all), then the session is finalized without it. */
	int32_t (*on_session_finalize)(void *inst, const memd_call *call,
				       const memd_reader *reader, const memd_event_sink *persist,
				       memd_error *err);
} memd_strategy_ops;

#ifdef __cplusplus
}
#endif
#endif /* MEMD_STRATEGY_H */
