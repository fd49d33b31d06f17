/* SPDX-License-Identifier: MIT */
#include "kw_feed.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* The strings of the JSON arrays a and b (either may be NULL or not an
 * array: nothing from it), joined by spaces, into *ret (malloc'd; NULL
 * when there are none). 0 or MEMD_ENOMEM. */
static int32_t tags_text(const char *a, const char *b, char **ret)
{
	const char *srcs[2] = { a, b };
	size_t len = 0, cap = 0;
	char *out = NULL;

	for (size_t s = 0; s < 2; s++) {
		json_t *arr = srcs[s] ? json_loads(srcs[s], 0, NULL) : NULL;
		size_t i;
		json_t *v;

		json_array_foreach(arr, i, v) {
			size_t n = json_string_length(v);
			if (!json_is_string(v) || !n)
				continue;
			if (len + n + 2 > cap) {
				size_t c = (len + n + 2) * 2;
				char *g = realloc(out, c);
				if (!g) {
					json_decref(arr);
					free(out);
					return MEMD_ENOMEM;
				}
				out = g;
				cap = c;
			}
			if (len)
				out[len++] = ' ';
			memcpy(out + len, json_string_value(v), n);
			len += n;
			out[len] = '\0';
		}
		json_decref(arr);
	}
	*ret = out;
	return 0;
}

/* A MEMORY record: the memory's document, replacing its older version. */
static int32_t put_memory(kw_index *kw, const feed_rec *r)
{
	char *tags = NULL;
	int32_t rc;
	kw_doc_in d = {
		.app = r->app,
		.user = r->user,
		.session = r->memory_id,
		.timestamp_us = r->timestamp_us,
		.text = r->text,
		.text_len = r->text ? strlen(r->text) : 0,
		.flags = KW_DOC_MEMORY,
		.expires_us = r->expires_us,
	};

	if (!r->memory_id || !r->memory_id[0])
		return 0;
	if ((rc = tags_text(r->topics, r->entities, &tags)) < 0)
		return rc;
	d.tags = tags;
	d.tags_len = tags ? strlen(tags) : 0;
	rc = kw_add(kw, &d);
	free(tags);
	return rc;
}

static int is_memory_rec(const feed_rec *r)
{
	return (r->kind == MEMD_FEED_MEMORY || r->kind == MEMD_FEED_MEMORY_DELETE) && r->memory_id &&
	       r->memory_id[0];
}

/* Nonzero if b is a MEMORY or MEMORY_DELETE record of a's user. */
static int same_memory_run(const feed_rec *a, const feed_rec *b)
{
	return is_memory_rec(b) && strcmp(a->app, b->app) == 0 && strcmp(a->user, b->user) == 0;
}

/* The MEMORY and MEMORY_DELETE records recs[0..n) of one user: every
 * older version of their memories is removed in one pass over the
 * partition, then each memory's last record in the run, if a MEMORY,
 * adds its new version (which then replaces nothing). */
static int32_t memory_run(kw_index *kw, const feed_rec *recs, size_t n)
{
	const char **ids = malloc(n * sizeof(*ids));
	int32_t r;

	if (!ids)
		return MEMD_ENOMEM;
	for (size_t i = 0; i < n; i++)
		ids[i] = recs[i].memory_id;
	r = kw_delete_memories(kw, recs[0].app, recs[0].user, ids, n);
	for (size_t i = 0; r == 0 && i < n; i++) {
		int later = 0;
		if (recs[i].kind != MEMD_FEED_MEMORY)
			continue;
		for (size_t j = i + 1; j < n && !later; j++)
			later = strcmp(ids[j], ids[i]) == 0;
		if (!later)
			r = put_memory(kw, &recs[i]);
	}
	free(ids);
	return r;
}

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
		case MEMD_FEED_MEMORY:
		case MEMD_FEED_MEMORY_DELETE:
			if (!is_memory_rec(r))
				break;
			while (i + run < n && run < KW_FEED_HIDE_RUN && same_memory_run(r, &recs[i + run]))
				run++;
			rc = memory_run(kw, r, run);
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
