/* SPDX-License-Identifier: MIT */
/*
 * extract: the host's memory extractors. Given a batch of a session's
 * events and a way to find the existing memories nearest to a fact, an
 * extractor decides what the batch changes in the user's long-term
 * memories: add a memory, update or delete an existing one, or nothing
 * (the fact is known already). It decides only; the caller (the service)
 * commits the decisions, with the session's extraction cursor, in one
 * store transaction.
 *
 *  - builtin (extract_builtin.c): deterministic, no network; a baseline.
 *    Reads only user messages, sentence by sentence, and knows a few
 *    phrasings: "remember that ...", "my X is Y", "I am (I'm) allergic to
 *    ...", "I prefer ...", "call me ..." / "my name is ...", "I live in
 *    ...", "I work at ..." / "I work as ...", and "forget that ...".
 *    Each fact has a topic (extract_topic_normalise); a fact whose topic
 *    an existing memory has updates it when the text differs (the newer
 *    statement wins) and is nothing when it is the same; a fact without a
 *    topic is nothing when a memory says exactly it, else added; "forget
 *    that X" deletes the existing memory that shares most words with X.
 *  - openai (extract_openai.c): any OpenAI-compatible chat completions
 *    endpoint with structured output (response_format json_schema): one
 *    call extracts candidate facts from the batch, a second shows each
 *    candidate's nearest existing memories (with their ids) and asks for
 *    add / update / delete / none decisions. Both replies are validated
 *    strictly: a reply that breaks the schema fails the whole run (no
 *    decision of it is used).
 */
#ifndef MEMD_HOST_EXTRACT_H
#define MEMD_HOST_EXTRACT_H

#include <stddef.h>
#include <stdint.h>

#include <memd/plugin.h>

/* extract_decision.op */
#define EXTRACT_NONE   0u /* known already: memory_id names the memory */
#define EXTRACT_ADD    1u
#define EXTRACT_UPDATE 2u /* memory_id, memory_version: the memory replaced */
#define EXTRACT_DELETE 3u /* memory_id, memory_version: the memory removed */

/* Most topics or entities an extractor gives one memory (as the facade's
 * MEMD_MEMORY_TAGS_MAX), and the longest one, in bytes. */
#define EXTRACT_TAGS_MAX 32
#define EXTRACT_TAG_MAX 128
/* Longest memory text an extractor produces, in bytes (as the facade's
 * MEMD_MEMORY_TEXT_MAX). */
#define EXTRACT_TEXT_MAX 8192

/* One event of the batch (borrowed for the call). */
typedef struct extract_event {
	int64_t seq;
	const char *role;   /* user | assistant | system | tool | summary */
	const char *author; /* may be NULL */
	const char *text;   /* plain text; may be NULL */
} extract_event;

/* An existing memory as extractors see it. */
typedef struct extract_memory {
	char *id;
	char *text;
	char *kind;
	char **topics;
	size_t n_topics;
	int64_t version;
} extract_memory;

/* Memories a lookup found, nearest first (owned). */
typedef struct extract_memories {
	extract_memory *v;
	size_t n;
} extract_memories;

/* Append a copy of one memory (topics: a JSON array text, may be NULL)
 * to ms. 0 or MEMD_ENOMEM (ms unchanged). */
int32_t extract_memories_add(extract_memories *ms, const char *id, const char *text,
			     const char *kind, const char *topics_json, int64_t version);
/* Free what ms holds and zero it; accepts NULL. */
void extract_memories_clear(extract_memories *ms);

/* How an extractor finds the existing memories nearest a fact: up to k of
 * them (text; topics, may be empty) into *ret (empty on entry; filled,
 * nearest first, only on success). 0 or a negative MEMD_E* with err. */
typedef struct extract_nearest {
	int32_t (*find)(void *userdata, const char *text, const char *const *topics,
			size_t n_topics, uint32_t k, extract_memories *ret, memd_error *err);
	void *userdata;
} extract_nearest;

/* What an extractor reads. */
typedef struct extract_batch {
	const extract_event *events;
	size_t n_events;
	uint32_t neighbours;          /* k of each nearest lookup, >= 1 */
} extract_batch;

/* One decision. Strings owned; text, kind, topics and entities are set
 * for ADD and UPDATE, memory_id for the others; seqs: the events it came
 * from, ascending. */
typedef struct extract_decision {
	uint32_t op;                  /* EXTRACT_* */
	char *memory_id;
	int64_t memory_version;       /* the version the decision was made on */
	char *text;
	char *kind;                   /* fact | preference | instruction | episode */
	char **topics;
	size_t n_topics;
	char **entities;
	size_t n_entities;
	int64_t *seqs;
	size_t n_seqs;
} extract_decision;

/* Every decision of one run, in the order they apply. */
typedef struct extract_result {
	extract_decision *v;
	size_t n;
} extract_result;

/* Free what r holds and zero it; accepts NULL. */
void extract_result_clear(extract_result *r);

/* A topic as extractors compare them: ASCII lowercase, runs of spaces
 * and punctuation other than ':' and '-' as one space, no leading or
 * trailing space, a leading "my " dropped, at most EXTRACT_TAG_MAX - 1
 * bytes (cut at a character). Writes into out (cap >= EXTRACT_TAG_MAX);
 * returns its length (0: nothing left). */
size_t extract_topic_normalise(const char *in, char *out, size_t cap);

/* How alike two texts are, 0..1: the share of distinct words (ASCII
 * lowercase, at least two bytes, a few stop words left out) they have in
 * common (Jaccard). 0 when either has none. */
double extract_similarity(const char *a, const char *b);

/* 1 when kind is one of the four memory kinds. */
int extract_kind_ok(const char *kind);

/* ---- builtin ------------------------------------------------------------ */

/* The built-in extractor (see above) over batch b, looking up memories
 * through nn. Deterministic: the same batch and memories give the same
 * decisions. *ret (zeroed first by the caller) is filled only on
 * success. MEMD_ENOMEM, or nn's error. */
int32_t extract_builtin_run(const extract_batch *b, const extract_nearest *nn,
			    extract_result *ret, memd_error *err);

/* ---- openai ------------------------------------------------------------- */

typedef struct extract_openai extract_openai;

typedef struct extract_openai_config {
	const char *url;                /* base (".../v1") or the full ".../chat/completions" URL */
	const char *model;
	const char *api_key;            /* NULL = none (no Authorization header); secret */
	const char *prompt;             /* the extraction call's system prompt; NULL = built in */
	const char *consolidate_prompt; /* the consolidation call's; NULL = built in */
	int64_t timeout_ms;             /* per HTTP request, >= 1 */
	int64_t retries;                /* extra attempts of each call after the first */
} extract_openai_config;

/* Backoff between attempts: BASE << attempt, at most MAX, or the server's
 * Retry-After (seconds) when it sends one, also at most MAX. */
#define EXTRACT_OPENAI_BACKOFF_BASE_MS 100
#define EXTRACT_OPENAI_BACKOFF_MAX_MS 5000

/* A client for cfg (copied). Initialises libcurl (process-wide).
 * MEMD_EINVAL (no url or model, url not http(s)), MEMD_ENOMEM, MEMD_EIO. */
int32_t extract_openai_new(const extract_openai_config *cfg, extract_openai **ret,
			   memd_error *err);
/* Accepts NULL. */
void extract_openai_free(extract_openai *eo);

/* The model's decisions for batch b (see above). Blocks on the network;
 * honours call->deadline_us and call->cancel. Each call is retried (with
 * backoff) on a network error, 429, 5xx and a reply that is not valid
 * for its schema. Failures: MEMD_EUNAVAIL (retryable), MEMD_ETIMEDOUT,
 * MEMD_EAUTH (401/403), MEMD_EIO (another status, or a reply still not
 * valid after the retries: retryable), MEMD_ECANCELED, nn's error. *ret
 * (zeroed by the caller) is filled only on success. The error message
 * never contains the API key. */
int32_t extract_openai_run(extract_openai *eo, const memd_call *call, const extract_batch *b,
			   const extract_nearest *nn, extract_result *ret, memd_error *err);

#endif
