/* SPDX-License-Identifier: MIT */
/*
 * keyword: the in-host BM25 index. Documents (events with text) live in
 * partitions, one per (app, user): a query only ever reads its own
 * partition, whose statistics (N, df, average length) are the ones BM25
 * uses. A partition keeps, per document, its session, author, seq,
 * timestamp and length (32 bytes), and per term of its dictionary (an
 * open-addressing table of 16-byte slots) a postings list of
 * delta-encoded document numbers with term frequencies (LEB128 varints;
 * lists of up to KW_INLINE bytes live inside the slot, longer ones on
 * the heap with their count). Terms are interned once for the whole
 * index. A partition also finds its documents by (session, seq) (an
 * open-addressing table of 4-byte slots), so adding is idempotent and a
 * single event can be removed.
 *
 * Thread-safety: any number of kw_search calls may run concurrently with
 * one writer (kw_add, kw_delete_*, kw_clear): partitions have their own
 * read/write locks, so a search waits only for writes to its partition.
 * Callers must not run two writers at once.
 *
 * Fields (BM25F): a document has a body (the event's or memory's text),
 * an author (the event's author) and tags (a memory's topics and
 * entities), each tokenized alike; a posting carries the term's
 * frequency in each field. Scoring: score(d) = sum over distinct query
 * terms t in d of
 *   idf(t) * tf~ * (k1 + 1) / (tf~ + k1),
 *   tf~ = w_body * tf_body / B(d) + w_author * tf_author + w_tags * tf_tags,
 *   B(d) = 1 - b + b * len(d) / avglen,
 *   idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5)),
 * with N, df (documents with t in any field) and avglen (of the body)
 * of the partition: the body is length-normalized, the short author and
 * tags fields are not (their b is 0). A document without author or tags
 * terms scores exactly as plain BM25 of its body. A search may count
 * only some fields (kw_filter.fields). Ties are broken by newer
 * timestamp, then higher seq, then session id, so results do not depend
 * on the order documents were added in.
 *
 * Memories: a partition also holds its user's memories as documents
 * (KW_DOC_MEMORY), found by their id (kept where an event keeps its
 * session; memory and session ids never mix up: the flag tells them
 * apart), replaced by a new version, with an expiry: a search leaves out
 * those expired at its now_us. Searches choose events, memories or both
 * (kw_filter.sources); the event filters (session, authors, times) never
 * narrow memories.
 */
#ifndef MEMD_INDEX_KEYWORD_H
#define MEMD_INDEX_KEYWORD_H

#include <stddef.h>
#include <stdint.h>

#include <memd/abi.h>

/* Bytes of postings kept inside a (16-byte) dictionary slot before a
 * list moves to the heap: most terms of a partition occur in a few
 * documents only. */
#define KW_INLINE 8

typedef struct kw_index kw_index;

/* A new empty index with BM25 parameters k1 (> 0) and b (0..1). NULL on
 * ENOMEM. */
kw_index *kw_new(double k1, double b);
/* Accepts NULL. */
void kw_free(kw_index *kw);

/* Fields of a document (kw_filter.fields masks). */
#define KW_FIELD_BODY   0x1u /* the text */
#define KW_FIELD_AUTHOR 0x2u /* an event's author */
#define KW_FIELD_TAGS   0x4u /* a memory's topics and entities */
#define KW_FIELD_ALL    0x7u
/* Field weights (BM25F): a term in the author or tags counts as much as
 * once in a body of average length. */
#define KW_WEIGHT_BODY   1.0
#define KW_WEIGHT_AUTHOR 1.0
#define KW_WEIGHT_TAGS   1.0

/* kw_doc_in.flags */
#define KW_DOC_MEMORY 0x1u /* a memory: session is its id, seq is ignored */

/* One document: borrowed strings, text, author and tags tokenized with
 * TEXT_STEM | TEXT_STOP | TEXT_KEEP_SELF (queries too). A text without
 * terms adds nothing (returns 0). An event: session, seq, timestamp_us
 * (its own), author (may be NULL). A memory (flags KW_DOC_MEMORY):
 * session = the memory's id, timestamp_us = its updated_us, expires_us
 * (0 = never), tags (its topics and entities as text; may be NULL). */
typedef struct kw_doc_in {
	const char *app, *user, *session, *author;
	int64_t seq;
	int64_t timestamp_us;
	const char *text;
	size_t text_len;
	uint32_t flags;              /* KW_DOC_* */
	int64_t expires_us;          /* memories */
	const char *tags;            /* NULL = none */
	size_t tags_len;
} kw_doc_in;

/* Add a document. 0, or MEMD_ENOMEM (the index is unchanged, except that
 * a memory being replaced may already be gone: applying the record again
 * adds it). An event's (session, seq) the partition has already is left
 * as it is (returns 0): an event the feed delivers again (made visible
 * again after a hide, or read by a rebuild as well as by the tailer) is
 * indexed once. A memory replaces the document of the same id (an
 * update, or the same version delivered again); one whose text has no
 * terms only removes it. */
int32_t kw_add(kw_index *kw, const kw_doc_in *d);
/* Remove the memories ids[0..n) of (app, user); ids not indexed are
 * ignored. Exact as kw_delete_session, and like it one pass over the
 * partition per call. 0 or MEMD_ENOMEM (unchanged). */
int32_t kw_delete_memories(kw_index *kw, const char *app, const char *user,
			   const char *const *ids, size_t n);
/* kw_delete_memories of one memory. */
int32_t kw_delete_memory(kw_index *kw, const char *app, const char *user, const char *id);
/* Remove every event of one session (its memories stay) / every
 * document of one (app, user). Exact: the statistics afterwards are
 * those of an index built without them. 0 or MEMD_ENOMEM (then the
 * partition is unchanged). */
int32_t kw_delete_session(kw_index *kw, const char *app, const char *user, const char *session);
/* Remove the documents of events seqs[0..n) of one session (a hidden
 * event); seqs not indexed are ignored. Exact as kw_delete_session, and
 * like it one pass over the partition per call, so callers remove a run
 * of events in one call. 0 or MEMD_ENOMEM (the partition is unchanged). */
int32_t kw_delete_events(kw_index *kw, const char *app, const char *user, const char *session,
			 const int64_t *seqs, size_t n);
/* kw_delete_events of one event. */
int32_t kw_delete_event(kw_index *kw, const char *app, const char *user, const char *session,
			int64_t seq);
void kw_delete_user(kw_index *kw, const char *app, const char *user);
/* Remove everything. */
void kw_clear(kw_index *kw);

/* kw_filter.sources */
#define KW_SOURCE_EVENTS   0x1u
#define KW_SOURCE_MEMORIES 0x2u

/* Narrowing of a search; every member optional (NULL / 0). session,
 * authors and the times narrow events only. */
typedef struct kw_filter {
	const char *session;
	const char *const *authors;  /* exact author names */
	size_t n_authors;
	int64_t after_us;            /* timestamp > after_us when nonzero */
	int64_t before_us;           /* timestamp < before_us when nonzero */
	uint32_t sources;            /* KW_SOURCE_* ; 0 = both */
	uint32_t fields;             /* KW_FIELD_* counted in scores; 0 = all */
	int64_t now_us;              /* memories with 0 < expires_us <= now_us are left out */
} kw_filter;

typedef struct kw_hit {
	char *session;               /* malloc'd; a memory's: its id */
	int64_t seq;                 /* a memory's: 0 */
	int64_t timestamp_us;        /* a memory's: updated_us */
	double score;
	uint32_t memory;             /* nonzero: the hit is a memory */
} kw_hit;

/* The best k (>= 1) documents of (app, user) for query, best first, into
 * *ret_hits (malloc'd array; free with kw_hits_free) and *ret_n (may be
 * 0). A query without terms, or an unknown partition, finds nothing.
 * rows_read (may be NULL) is increased by the postings examined.
 * 0 or MEMD_ENOMEM (with err). */
int32_t kw_search(kw_index *kw, const char *app, const char *user, const char *query,
		  const kw_filter *f, uint32_t k, kw_hit **ret_hits, size_t *ret_n,
		  uint64_t *rows_read, memd_error *err);
/* Free hits from kw_search; accepts NULL. */
void kw_hits_free(kw_hit *hits, size_t n);

/* ---- snapshots ------------------------------------------------------------
 * The index as a sequence of sections, for kw_snapshot.h's file (which
 * frames and checksums them). kw_dump writes, kw_restore reads:
 *   KW_SECTION_TERMS      varint n, then n times (varint len, bytes): the
 *                         interned terms in id order
 *   KW_SECTION_PARTITION  one per (app, user): varint len + "app\1user";
 *                         sessions and authors (varint n, then n times
 *                         varint len + bytes, in id order); documents
 *                         (varint n, then per document zigzag-varint
 *                         timestamp_us and seq (a memory's: expires_us),
 *                         varint session, author, len (of the body) and
 *                         flags (KW_DOC_*)); postings lists in term id order
 *                         (varint n, then per list varint term id,
 *                         varint byte length, the encoded postings as
 *                         kept in memory: per document a varint of its
 *                         gap to the previous one (first: its number)
 *                         shifted left once, the low bit set when the
 *                         frequencies are not "once in the body only";
 *                         then a varint tf_body << 2 | (tf_author > 0) |
 *                         (tf_tags > 0) << 1 and, for each field flagged,
 *                         a varint of its tf - 1)
 * Unsigned varints are LEB128; signed ones zigzag-mapped first. The
 * sections hold what the index holds, so a restored index answers every
 * search exactly as the dumped one did. BM25's k1 and b are not part of
 * it: they are applied at search time. */
#define KW_SECTION_TERMS 1u
#define KW_SECTION_PARTITION 2u

/* Bump when the analyzer (text.c, porter.c, the flags above) changes the
 * terms a text yields: snapshots of an older analyzer are then refused. */
#define KW_ANALYZER_VERSION 1u

/* Where kw_dump writes. Each op returns 0 or a negative MEMD_E* with err
 * filled (kw_dump then stops and returns it). */
typedef struct kw_sink {
	void *userdata;
	/* A section of kind KW_SECTION_* begins; its payload follows. */
	int32_t (*begin)(void *userdata, uint32_t kind, memd_error *err);
	int32_t (*write)(void *userdata, const void *p, size_t n, memd_error *err);
	/* The section's payload is complete. */
	int32_t (*end)(void *userdata, memd_error *err);
} kw_sink;

/* Write the whole index to out: one KW_SECTION_TERMS, then one
 * KW_SECTION_PARTITION per partition. A reader: searches may run
 * alongside, but the caller must keep writers (kw_add, kw_delete_*,
 * kw_clear) out for the dump to be of one moment. *ret_documents (may be
 * NULL) gets the documents written. 0, MEMD_ENOMEM, or what out
 * returned. */
int32_t kw_dump(kw_index *kw, const kw_sink *out, uint64_t *ret_documents, memd_error *err);

/* Where kw_restore reads. next delivers the next section: returns 1 with
 * its kind and payload (borrowed until the next call), 0 after the last
 * one, or a negative MEMD_E* with err filled. */
typedef struct kw_source {
	void *userdata;
	int32_t (*next)(void *userdata, uint32_t *ret_kind, const uint8_t **ret_data,
			size_t *ret_len, memd_error *err);
} kw_source;

/* Fill the empty index kw (a writer) from sections kw_dump wrote. Every
 * section is checked before it is used (ids in range, postings well
 * formed and ascending, each document's term frequencies summing to its
 * length), so a damaged or forged payload is refused, never trusted.
 * 0; MEMD_EINVAL (a malformed payload, or kw not empty; the message says
 * what), MEMD_ENOMEM, or what in returned. On failure kw is left empty. */
int32_t kw_restore(kw_index *kw, const kw_source *in, memd_error *err);

/* A fingerprint of the analyzer: a hash of the terms it yields for a
 * fixed text exercising folding, diacritics, stop words, stemming, CJK
 * and long words. A snapshot records it; a change of text.c or porter.c
 * that changes any of those terms changes it. */
uint64_t kw_analyzer_fingerprint(void);

/* Size of the index, for benchmarks and /metrics. */
typedef struct kw_stats {
	uint64_t partitions;
	uint64_t documents;
	uint64_t terms;              /* distinct terms, whole index */
	uint64_t postings;           /* (term, document) pairs */
	uint64_t postings_bytes;     /* encoded postings */
	uint64_t memory_bytes;       /* everything held, allocator overhead excluded */
} kw_stats;
void kw_get_stats(kw_index *kw, kw_stats *ret);

#endif
