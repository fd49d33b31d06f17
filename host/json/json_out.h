/* SPDX-License-Identifier: MIT */
/*
 * json_out: a streaming JSON writer for the read path (context, event
 * pages, session get). It writes memd's records straight into one growable
 * buffer, without building jansson trees: stored JSON texts (an event's
 * content, actions and metadata, a session's metadata) are checked by a
 * non-allocating validator and copied verbatim.
 *
 * The output is the JSON that event_json's ej_event / ej_session give
 * through json_dumps(JSON_COMPACT): the same keys in the same order, the
 * same values (json_equal), null or absent exactly where they are; strings
 * escaped as jansson escapes them. A stored JSON text jansson would refuse
 * becomes what ej_event makes of it (null; {} for a session's metadata).
 *
 * Errors: every writing call returns 0 or a negative MEMD_E* code, and the
 * first failure sticks: later calls write nothing and return it again, so
 * a sequence of writes can be checked once (jo_finish). MEMD_ENOMEM when
 * the buffer cannot grow; MEMD_EINVAL when a string to write is not valid
 * UTF-8 (jansson's json_string refuses those too); jo->bad_field then
 * names the field; MEMD_ETOOBIG when the output would exceed jo->max_len.
 */
#ifndef MEMD_HOST_JSON_OUT_H
#define MEMD_HOST_JSON_OUT_H

#include <stddef.h>
#include <stdint.h>

#include <memd/store.h>

/* The nesting depth jansson's parser accepts (JSON_PARSER_MAX_DEPTH): a
 * value nested in more than JO_DEPTH_MAX - 1 arrays or objects is refused. */
#define JO_DEPTH_MAX 2048

typedef struct json_out {
	char *buf;             /* malloc'd; not NUL-terminated before jo_finish */
	size_t len;            /* bytes written */
	size_t cap;            /* bytes allocated */
	size_t max_len;        /* 0: no limit; else a write that would make len
	                        * exceed it fails with MEMD_ETOOBIG (and the
	                        * buffer never grows past max_len + 1) */
	int no_text;           /* jo_event leaves out "text" */
	int32_t error;         /* first failure, sticky; 0 while none */
	const char *bad_field; /* with MEMD_EINVAL: the key of the bad string */
} json_out;

/* An empty writer (nothing allocated yet). */
void jo_init(json_out *jo);
/* Free the buffer and return to the jo_init state; accepts NULL. */
void jo_clear(json_out *jo);
/* Drop everything from offset len on (a len past jo->len is ignored);
 * writing continues from there. A sticky error stays. */
void jo_truncate(json_out *jo, size_t len);

/* Append n bytes verbatim; the caller vouches they keep the output JSON. */
int32_t jo_raw(json_out *jo, const char *s, size_t n);
/* jo_raw of a string literal. */
#define jo_lit(jo, s) jo_raw((jo), "" s "", sizeof(s) - 1)
/* A JSON string of the n bytes at s (escaped as jansson does: \" \\ \b \f
 * \n \r \t, other control characters as \u00XX, everything else as is).
 * MEMD_EINVAL if the bytes are not valid UTF-8 (nothing written). */
int32_t jo_stringn(json_out *jo, const char *s, size_t n);
/* jo_stringn of a C string; NULL writes null. */
int32_t jo_string(json_out *jo, const char *s);
int32_t jo_int(json_out *jo, int64_t v);
/* true or false. */
int32_t jo_bool(json_out *jo, int v);
/* A JSON string of ej_format_time(unix_us). */
int32_t jo_time(json_out *jo, int64_t unix_us);
/* The JSON text itself if jo_valid accepts it, else the literal fallback
 * (e.g. "null"); text NULL also writes fallback. */
int32_t jo_json_text(json_out *jo, const char *text, const char *fallback);
/* ej_usage's object (event_json.h) as JSON text, as jansson dumps it
 * (usage that is all zeros without jansson). Returns jo's sticky error. */
int32_t jo_usage(json_out *jo, int64_t input_tokens, int64_t output_tokens,
		 int64_t cache_read_tokens, int64_t cache_write_tokens, int64_t cost_micro_usd,
		 int64_t last_prompt_tokens);
/* Replace bytes [start, end) of the output (start <= end <= jo->len) by
 * the n bytes at s; MEMD_EINVAL for a bad range. */
int32_t jo_replace(json_out *jo, size_t start, size_t end, const char *s, size_t n);

/* 1 if json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL) accepts these n
 * bytes as one JSON value (jansson's rules: strict UTF-8, no lone
 * surrogate escapes, no \u0000 in object keys, integers within int64,
 * reals that do not overflow a double, depth at most JO_DEPTH_MAX; a NUL
 * byte is refused), else 0. Allocates nothing; recursion is bounded by
 * JO_DEPTH_MAX. */
int jo_valid(const char *text, size_t n);

/* One event as ej_event shapes it: id, seq, invocation_id, author, role,
 * branch, content, actions, metadata, timestamp, text (left out when
 * jo->no_text), tokens, and covers_seq when the role is "summary". */
int32_t jo_event(json_out *jo, const memd_event *e);
/* One session as ej_session shapes it. */
int32_t jo_session(json_out *jo, const memd_session *s);
/* jo_session without the closing '}': the caller adds members, each
 * starting with ',', then closes the object. */
int32_t jo_session_open(json_out *jo, const memd_session *s);

/* Hand the output over: *ret_text (malloc'd, NUL-terminated, free() it)
 * and *ret_len (its length, may be NULL). The writer is left empty. On a
 * sticky error returns it, frees the buffer, writes no output. */
int32_t jo_finish(json_out *jo, char **ret_text, size_t *ret_len);

/* ---- response envelopes (host/service/service.c) -------------------------------- */

/* GET context: {"strategy":..,"summary":<event>|null,"events":[..],
 * "tokens":<sum of tokens of the summary and the events delivered>}. The
 * strategy contract delivers the summary once, before any event; a summary
 * delivered again (or late) replaces the earlier one in place, as the
 * jansson version did. */
typedef struct jo_context {
	json_out out;
	size_t summary_at;  /* where the summary value starts */
	size_t summary_end; /* where it ends, once written (events started) */
	int has_summary;
	uint32_t n_events;
	int64_t tokens;
	/* Set before jo_context_finish (borrowed until then): a "notice":
	 * {"reason", "text"} member after "tokens". NULL: none. */
	const char *notice_reason;
	const char *notice_text;
	/* Set before jo_context_finish (borrowed until then): the JSON text
	 * of a "memories" member written after "tokens" (its tokens already
	 * added to tokens). NULL: none. */
	const char *memories_json;
} jo_context;

/* Start the envelope for the strategy named strategy. */
int32_t jo_context_begin(jo_context *c, const char *strategy);
int32_t jo_context_summary(jo_context *c, const memd_event *e);
int32_t jo_context_event(jo_context *c, const memd_event *e);
/* Close the envelope and hand it over as jo_finish does; c is left empty
 * either way (no jo_context_clear needed after it). */
int32_t jo_context_finish(jo_context *c, char **ret_json);
/* Free an unfinished envelope; accepts NULL. */
void jo_context_clear(jo_context *c);

/* GET events: {"events":[..],"next_after_seq":<seq>|null}. Up to limit
 * events (and up to max_bytes, see below) are written; one more delivered means there is a next page, and
 * next_after_seq is the seq of the last event written (later ones are
 * skipped). */
typedef struct jo_page {
	json_out out;
	uint32_t limit;
	size_t max_bytes;   /* 0: none; else the page ends before the event that
	                     * takes it past this many bytes (never before its
	                     * first event), and next_after_seq continues there */
	int full;
	uint32_t n_events;
	int64_t last_seq;
	int more;
} jo_page;

/* Start a page of at most limit (>= 1) events. */
int32_t jo_page_begin(jo_page *p, uint32_t limit);
int32_t jo_page_event(jo_page *p, const memd_event *e);
/* As jo_context_finish. */
int32_t jo_page_finish(jo_page *p, char **ret_json);
/* Free an unfinished page; accepts NULL. */
void jo_page_clear(jo_page *p);

/* GET session: the session object, with "events":[..] last when events
 * are asked for. */
typedef struct jo_session_get {
	json_out out;
	int has_session;
	int events_open;
	uint32_t n_events;
} jo_session_get;

void jo_session_get_init(jo_session_get *g);
/* The session (a second delivery replaces the first; MEMD_EINVAL once
 * events were written). */
int32_t jo_session_get_session(jo_session_get *g, const memd_session *s);
/* Open the "events" array (after the session; MEMD_EINVAL before it). */
int32_t jo_session_get_events(jo_session_get *g);
/* One event into the open array (MEMD_EINVAL when it is not open). */
int32_t jo_session_get_event(jo_session_get *g, const memd_event *e);
/* Close the object and hand it over as jo_context_finish does
 * (MEMD_EINVAL if no session was written). */
int32_t jo_session_get_finish(jo_session_get *g, char **ret_json);
/* Free an unfinished writer; accepts NULL. */
void jo_session_get_clear(jo_session_get *g);

#endif
