/* SPDX-License-Identifier: MIT */
#include "kw_feed.h"

#include <stdlib.h>
#include <string.h>

/* Nonzero if b is a HIDE record of a's session. */
static int same_run(const feed_rec *a, const feed_rec *b)
{
	return b->kind == MEMD_FEED_HIDE && b->session && strcmp(a->app, b->app) == 0 &&
	       strcmp(a->user, b->user) == 0 && strcmp(a->session, b->session) == 0;
}

/* The HIDE records recs[0..n) of one session, removed at once. */
static int32_t hide_run(kw_index *kw, const feed_rec *recs, size_t n)
{
	int64_t *seqs = malloc(n * sizeof(*seqs));
	int32_t r;

	if (!seqs)
		return MEMD_ENOMEM;
	for (size_t i = 0; i < n; i++)
		seqs[i] = recs[i].seq;
	r = kw_delete_events(kw, recs[0].app, recs[0].user, recs[0].session, seqs, n);
	free(seqs);
	return r;
}

int32_t kw_feed_apply(kw_index *kw, const feed_rec *recs, size_t n, size_t *ret_applied,
		      memd_error *err)
{
	size_t i = 0;
	int32_t rc = 0;

	while (i < n) {
		const feed_rec *r = &recs[i];
		size_t run = 1;

		switch (r->kind) {
		case MEMD_FEED_EVENT: {
			kw_doc_in d = {
				.app = r->app,
				.user = r->user,
				.session = r->session,
				.author = r->author,
				.seq = r->seq,
				.timestamp_us = r->timestamp_us,
				.text = r->text,
				.text_len = r->text ? strlen(r->text) : 0,
			};
			if (r->session && r->text)
				rc = kw_add(kw, &d);
			break;
		}
		case MEMD_FEED_HIDE:
			if (!r->session)
				break;
			while (i + run < n && run < KW_FEED_HIDE_RUN && same_run(r, &recs[i + run]))
				run++;
			rc = hide_run(kw, r, run);
			break;
		case MEMD_FEED_DELETE_SESSION:
			if (r->session)
				rc = kw_delete_session(kw, r->app, r->user, r->session);
			break;
		case MEMD_FEED_DELETE_USER:
			kw_delete_user(kw, r->app, r->user);
			break;
		default:
			break; /* kinds of a newer store: nothing to index */
		}
		if (rc < 0)
			break;
		i += run;
	}
	*ret_applied = i;
	if (rc < 0)
		return memd_error_set(err, rc, 0, "keyword index: out of memory at feed position %lld",
				      (long long)recs[i].position);
	return 0;
}
