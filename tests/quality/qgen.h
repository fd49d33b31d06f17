/* SPDX-License-Identifier: MIT */
/*
 * qgen: a deterministic (seeded) generator of labelled multi-session
 * conversations for retrieval-quality tests and benchmarks. Every user
 * has several sessions, each on one topic (travel, cooking, code,
 * health, finance, family, hobbies, work), made of fact turns (user or
 * assistant turns carrying concrete names, numbers, dates and places)
 * among distractor turns (small talk on the same topic, acknowledgments).
 * Questions are asked about a user's facts, phrased differently from the
 * answering turn (paraphrase, other word forms that stemming must
 * bridge, partial overlap), and labelled with the asking user and the
 * event(s) that answer them. Same params, same data, on every platform
 * (own PRNG, no libc rand, no locale).
 *
 * Two styles. QGEN_STYLE_ASSISTANT: a user talks with an assistant
 * (roles user and assistant, no author). QGEN_STYLE_PARTY: each user's
 * sessions are chats between QGEN_PARTY_SPEAKERS named people (every
 * event has role user and its speaker's name as author), who tell each
 * other about their lives, react to each other by name and chat about
 * nothing in particular; the questions name the speaker ("What did
 * Melanie say about the pottery class?"), are paraphrased so they share
 * few words with the answering turn (other words for the same things),
 * and another speaker's remarks often share more words with the question
 * than the answer does. Few shared words make bag-of-words vectors (the
 * hash embedder) weak; the speaker's name is only in the author field
 * and in the others' reactions.
 */
#ifndef MEMD_TEST_QGEN_H
#define MEMD_TEST_QGEN_H

#include <stddef.h>
#include <stdint.h>

/* Most events one question is labelled with. */
#define QGEN_ANSWERS_MAX 2
/* Bytes of a generated id, NUL included. */
#define QGEN_ID_MAX 32

typedef struct qgen_event {
	uint32_t user;          /* 0..users-1 */
	uint32_t session;       /* 0..sessions-1 within the user */
	int64_t seq;            /* 1.. within the session */
	int64_t timestamp_us;   /* increasing within a user */
	const char *role;       /* "user" or "assistant" (static) */
	const char *author;     /* the speaker's name (static); NULL: none (the role) */
	char *text;             /* owned by the set */
} qgen_event;

typedef struct qgen_question {
	uint32_t user;          /* the asking user */
	char *text;             /* owned by the set */
	uint32_t n_answers;     /* 1..QGEN_ANSWERS_MAX */
	size_t answers[QGEN_ANSWERS_MAX]; /* indexes into the set's events */
} qgen_question;

typedef struct qgen_set {
	qgen_event *events;     /* grouped by user, then session, then seq */
	size_t n_events;
	qgen_question *questions;
	size_t n_questions;
	uint32_t users, sessions;
} qgen_set;

/* Speakers of a user's chats in QGEN_STYLE_PARTY. */
#define QGEN_PARTY_SPEAKERS 3

#define QGEN_STYLE_ASSISTANT 0
#define QGEN_STYLE_PARTY 1

typedef struct qgen_params {
	uint64_t seed;
	uint32_t style;              /* QGEN_STYLE_*; 0 = QGEN_STYLE_ASSISTANT */
	uint32_t users;              /* >= 1 */
	uint32_t sessions;           /* per user, >= 1 */
	uint32_t questions_per_user; /* at most the user's facts are asked */
} qgen_params;

/* Generate the set p describes into *ret (free with qgen_free). 0, or -1
 * on bad params (a zero count, an unknown style) or out of memory
 * (nothing allocated). */
int qgen_make(const qgen_params *p, qgen_set **ret);
/* Accepts NULL. */
void qgen_free(qgen_set *s);

/* Ids of user u, its session s, and an event: "u00042",
 * "u00042-s007", "u00042-s007-e012", into buf (QGEN_ID_MAX bytes). */
void qgen_user_id(uint32_t u, char buf[QGEN_ID_MAX]);
void qgen_session_id(uint32_t u, uint32_t s, char buf[QGEN_ID_MAX]);
void qgen_event_id(const qgen_event *e, char buf[QGEN_ID_MAX]);

#endif
