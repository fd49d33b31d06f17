/* SPDX-License-Identifier: MIT */
/*
 * kw_feed: the keyword index's side of the change feed. Applies feed
 * records (feed.h) to a keyword index (keyword.h): an EVENT adds its
 * document (idempotent by (session, seq), so an event made visible again
 * or read twice is indexed once), a HIDE removes it, DELETE_SESSION and
 * DELETE_USER remove a session's events or a user's documents (its
 * memories too), a MEMORY adds or replaces the memory's document (text
 * as the body, topics and entities as the tags field), a MEMORY_DELETE
 * removes it; other kinds are skipped. A run of HIDE records of one
 * session (a rewind or a clear hides many events at once) is removed in
 * one pass over the partition, and so are the older versions of a run of
 * one user's memory records (a memory commit writes several at once).
 */
#ifndef MEMD_INDEX_KW_FEED_H
#define MEMD_INDEX_KW_FEED_H

#include <stddef.h>

#include "feed.h"
#include "keyword.h"

/* At most this many HIDE (or memory) records are applied in one pass
 * (bounds the scratch memory of a huge clear). */
#define KW_FEED_HIDE_RUN 4096

/* Apply recs[0..n) in order. *ret_applied (always written) is the number
 * of records applied: all n on success; on failure the ones before the
 * run that failed (a run of HIDE records changed nothing; a run of
 * memory records may be applied in part, and applying it again gives
 * the index it would have given). 0, or MEMD_ENOMEM with err naming the
 * feed position. */
int32_t kw_feed_apply(kw_index *kw, const feed_rec *recs, size_t n, size_t *ret_applied,
		      memd_error *err);

#endif
