/* SPDX-License-Identifier: MIT */
/*
 * The openai extractor (see extract.h): two chat completions with
 * structured output (response_format {"type": "json_schema", "strict":
 * true}), both temperature 0:
 *  1. extraction: the system prompt, then the batch as a transcript
 *     ("[seq] role (author): text" lines); the reply is {"facts": [{"text",
 *     "kind", "topics", "entities", "seqs"}]};
 *  2. consolidation (only when some fact has existing memories near it;
 *     else every fact is added): the system prompt, then {"candidates":
 *     [{"index", "text", "kind", "topics", "entities", "existing": [{"id",
 *     "text", "kind", "topics"}]}]}; the reply is {"decisions":
 *     [{"candidate", "op", "memory_id", "text", "kind", "topics",
 *     "entities"}]}. A candidate without a decision is nothing.
 * Each reply is checked against its schema and the batch here, whatever
 * the endpoint claims to enforce: a fact's seqs must be the batch's, a
 * decision's memory_id one shown to it, a memory changed at most once.
 * A reply that fails is a failed attempt (retried like a 5xx); no
 * decision of it is kept.
 */
#include "extract/extract.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/chat_client.h"

/* Most facts one extraction reply may hold (more is not a valid reply). */
#define FACTS_MAX 256

static const char default_prompt[] =
	"You extract long-term memories about the user from a conversation between the "
	"user and an AI assistant. A memory is a durable fact, preference, instruction or "
	"episode worth knowing in a later conversation: identity, relationships, "
	"preferences, plans, constraints (allergies, accessibility), work, places. Take "
	"them only from what the user says (the assistant's messages give context). Skip "
	"small talk, questions, and anything true only for the moment. Write each memory "
	"as one short self-contained sentence in the third person (\"User is allergic to "
	"peanuts\"). kind: fact, preference, instruction or episode. topics: one to three "
	"short lowercase subject labels (\"diet\", \"home city\"); entities: names of "
	"people, places, organisations or things it mentions; seqs: the [seq] numbers of "
	"the messages it comes from. Answer {\"facts\": []} when there is nothing.";

static const char default_consolidate_prompt[] =
	"You keep a user's long-term memories consistent. For each candidate memory you "
	"see the existing memories nearest to it, with their ids. Decide, per candidate: "
	"\"add\" when it is new (memory_id null); \"update\" when it changes, corrects or "
	"refines an existing memory (memory_id: that memory; text, kind, topics, entities: "
	"the memory as it should read now, merging what is still true); \"delete\" when it "
	"says an existing memory is no longer true or asks to forget it (memory_id: that "
	"memory); \"none\" when an existing memory already says it (memory_id: that "
	"memory). Use only ids shown, change each existing memory at most once, and give "
	"one decision per candidate (candidate: its index).";

struct extract_openai {
	chat_client *cc;
	char *prompt;
	char *consolidate_prompt;
};

int32_t extract_openai_new(const extract_openai_config *cfg, extract_openai **ret,
			   memd_error *err)
{
	chat_client_config cc = { .component = "extractor", .url_key = "extractor url",
				  .url = cfg->url, .model = cfg->model, .api_key = cfg->api_key,
				  .timeout_ms = cfg->timeout_ms, .retries = cfg->retries,
				  .backoff_base_ms = EXTRACT_OPENAI_BACKOFF_BASE_MS,
				  .backoff_max_ms = EXTRACT_OPENAI_BACKOFF_MAX_MS };
	extract_openai *eo;
	int32_t r;

	if (!(eo = calloc(1, sizeof(*eo))))
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	if ((r = chat_client_new(&cc, &eo->cc, err)) < 0) {
		free(eo);
		return r;
	}
	eo->prompt = strdup(cfg->prompt && *cfg->prompt ? cfg->prompt : default_prompt);
	eo->consolidate_prompt = strdup(cfg->consolidate_prompt && *cfg->consolidate_prompt
						? cfg->consolidate_prompt
						: default_consolidate_prompt);
	if (!eo->prompt || !eo->consolidate_prompt) {
		extract_openai_free(eo);
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	*ret = eo;
	return 0;
}

void extract_openai_free(extract_openai *eo)
{
	if (!eo)
		return;
	chat_client_free(eo->cc);
	free(eo->prompt);
	free(eo->consolidate_prompt);
	free(eo);
}

/* ---- one structured call -------------------------------------------------- */

/* Checks a reply's content (parsed JSON) and keeps what it needs from
 * it: 0, or MEMD_EIO with err saying what is wrong (a failed attempt),
 * or MEMD_ENOMEM. */
typedef int32_t (*reply_check_fn)(void *ctx, json_t *content, memd_error *err);

typedef struct answer_ctx {
	reply_check_fn check;
	void *ctx;
} answer_ctx;

/* The model's answer (a chat_answer_fn): parsed as JSON and given to the
 * check in ctx (an answer_ctx). */
static int32_t take_answer(void *ctx, const char *content, size_t len, memd_error *err)
{
	answer_ctx *ac = ctx;
	json_error_t jerr;
	json_t *parsed = json_loadb(content, len, 0, &jerr);
	int32_t r;

	if (!parsed)
		return memd_error_set(err, MEMD_EIO, MEMD_ERROR_RETRYABLE,
				      "extractor: the model's answer is not JSON: %s", jerr.text);
	r = ac->check(ac->ctx, parsed, err);
	json_decref(parsed);
	return r;
}

/* One structured chat call: system and user messages, the schema named
 * name; the answer goes to check. Retried as extract.h says. */
static int32_t chat(const extract_openai *eo, const memd_call *call, const char *system,
		    const char *user, const char *name, json_t *schema, reply_check_fn check,
		    void *ctx, memd_error *err)
{
	json_t *req = json_pack("{s:s,s:[{s:s,s:s},{s:s,s:s}],s:i,s:{s:s,s:{s:s,s:b,s:O}}}",
				"model", chat_client_model(eo->cc), "messages", "role", "system",
				"content", system, "role", "user", "content", user, "temperature",
				0, "response_format", "type", "json_schema", "json_schema", "name",
				name, "strict", 1, "schema", schema);
	char *payload = req ? json_dumps(req, JSON_COMPACT) : NULL;
	answer_ctx ac = { check, ctx };
	int32_t r;

	json_decref(req);
	if (!payload)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	r = chat_client_call(eo->cc, call, payload, take_answer, &ac, err);
	free(payload);
	return r;
}

/* ---- schemas -------------------------------------------------------------- */

static json_t *strings_schema(void)
{
	return json_pack("{s:s,s:{s:s}}", "type", "array", "items", "type", "string");
}

static json_t *kind_schema(void)
{
	return json_pack("{s:s,s:[s,s,s,s]}", "type", "string", "enum", "fact", "preference",
			 "instruction", "episode");
}

static json_t *facts_schema(void)
{
	return json_pack(
		"{s:s,s:b,s:[s],s:{s:{s:s,s:{s:s,s:b,s:[s,s,s,s,s],s:{s:{s:s},s:o,s:o,s:o,"
		"s:{s:s,s:{s:s}}}}}}}",
		"type", "object", "additionalProperties", 0, "required", "facts", "properties",
		"facts", "type", "array", "items", "type", "object", "additionalProperties", 0,
		"required", "text", "kind", "topics", "entities", "seqs", "properties", "text",
		"type", "string", "kind", kind_schema(), "topics", strings_schema(), "entities",
		strings_schema(), "seqs", "type", "array", "items", "type", "integer");
}

static json_t *decisions_schema(void)
{
	return json_pack(
		"{s:s,s:b,s:[s],s:{s:{s:s,s:{s:s,s:b,s:[s,s,s,s,s,s,s],s:{s:{s:s},"
		"s:{s:s,s:[s,s,s,s]},s:{s:[s,s]},s:{s:s},s:o,s:o,s:o}}}}}",
		"type", "object", "additionalProperties", 0, "required", "decisions", "properties",
		"decisions", "type", "array", "items", "type", "object", "additionalProperties", 0,
		"required", "candidate", "op", "memory_id", "text", "kind", "topics", "entities",
		"properties", "candidate", "type", "integer", "op", "type", "string", "enum", "add",
		"update", "delete", "none", "memory_id", "type", "string", "null", "text", "type",
		"string", "kind", kind_schema(), "topics", strings_schema(), "entities",
		strings_schema());
}

/* ---- call 1: facts -------------------------------------------------------- */

/* A fact of the batch, as checked. */
typedef struct candidate {
	char *text;
	char *kind;
	char **topics;
	size_t n_topics;
	char **entities;
	size_t n_entities;
	int64_t *seqs;
	size_t n_seqs;
	extract_memories near;
} candidate;

typedef struct facts_ctx {
	const extract_batch *b;
	candidate *v;
	size_t n;
} facts_ctx;

static void free_strv(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

static void candidates_clear(facts_ctx *fc)
{
	for (size_t i = 0; i < fc->n; i++) {
		candidate *c = &fc->v[i];
		free(c->text);
		free(c->kind);
		free_strv(c->topics, c->n_topics);
		free_strv(c->entities, c->n_entities);
		free(c->seqs);
		extract_memories_clear(&c->near);
	}
	free(fc->v);
	fc->v = NULL;
	fc->n = 0;
}

static int valid_text(json_t *s, size_t max)
{
	return json_is_string(s) && json_string_length(s) > 0 && json_string_length(s) < max;
}

/* A JSON array of tags (strings 1..EXTRACT_TAG_MAX - 1 bytes, at most
 * EXTRACT_TAGS_MAX) copied into *ret; duplicates dropped. 0, MEMD_EIO
 * (not valid; what names it in err), MEMD_ENOMEM. */
static int32_t copy_tags(json_t *a, const char *what, size_t index, char ***ret, size_t *ret_n,
			 memd_error *err)
{
	size_t i, n = 0;
	json_t *t;
	char **v;

	if (!json_is_array(a) || json_array_size(a) > EXTRACT_TAGS_MAX)
		return memd_error_set(err, MEMD_EIO, 0,
				      "extractor: %s of item %zu: not an array of at most %d strings",
				      what, index, EXTRACT_TAGS_MAX);
	if (!(v = calloc(json_array_size(a) + 1, sizeof(*v))))
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	json_array_foreach(a, i, t) {
		size_t j = 0;
		if (!valid_text(t, EXTRACT_TAG_MAX)) {
			free_strv(v, n);
			return memd_error_set(err, MEMD_EIO, 0,
					      "extractor: %s of item %zu: each must be a string of "
					      "1..%d bytes", what, index, EXTRACT_TAG_MAX - 1);
		}
		while (j < n && strcmp(v[j], json_string_value(t)) != 0)
			j++;
		if (j < n)
			continue;
		if (!(v[n++] = strdup(json_string_value(t)))) {
			free_strv(v, n);
			return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
		}
	}
	*ret = v;
	*ret_n = n;
	return 0;
}

static int in_batch(const extract_batch *b, int64_t seq)
{
	for (size_t i = 0; i < b->n_events; i++)
		if (b->events[i].seq == seq)
			return 1;
	return 0;
}

static int cmp_seq(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static int32_t check_facts(void *ctx, json_t *content, memd_error *err)
{
	facts_ctx *fc = ctx;
	json_t *facts = json_object_get(content, "facts"), *f;
	size_t i;

	candidates_clear(fc); /* an earlier attempt's */
	if (!json_is_object(content) || json_object_size(content) != 1 || !json_is_array(facts) ||
	    json_array_size(facts) > FACTS_MAX)
		return memd_error_set(err, MEMD_EIO, 0,
				      "extractor: the answer is not {\"facts\": [...]} (at most %d)",
				      FACTS_MAX);
	if (!(fc->v = calloc(json_array_size(facts) + 1, sizeof(*fc->v))))
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	json_array_foreach(facts, i, f) {
		candidate *c = &fc->v[fc->n++];
		json_t *seqs = json_object_get(f, "seqs"), *s;
		size_t j;
		int32_t r;

		if (!json_is_object(f) || json_object_size(f) != 5 ||
		    !valid_text(json_object_get(f, "text"), EXTRACT_TEXT_MAX) ||
		    !extract_kind_ok(json_string_value(json_object_get(f, "kind"))) ||
		    !json_is_array(seqs) || json_array_size(seqs) == 0) {
			candidates_clear(fc);
			return memd_error_set(err, MEMD_EIO, 0,
					      "extractor: fact %zu: needs exactly text (1..%d bytes), "
					      "kind (fact, preference, instruction, episode), topics, "
					      "entities and seqs (not empty)", i, EXTRACT_TEXT_MAX - 1);
		}
		if (!(c->text = strdup(json_string_value(json_object_get(f, "text")))) ||
		    !(c->kind = strdup(json_string_value(json_object_get(f, "kind")))) ||
		    !(c->seqs = calloc(json_array_size(seqs), sizeof(*c->seqs)))) {
			candidates_clear(fc);
			return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
		}
		if ((r = copy_tags(json_object_get(f, "topics"), "topics", i, &c->topics,
				   &c->n_topics, err)) < 0 ||
		    (r = copy_tags(json_object_get(f, "entities"), "entities", i, &c->entities,
				   &c->n_entities, err)) < 0) {
			candidates_clear(fc);
			return r;
		}
		json_array_foreach(seqs, j, s) {
			int64_t seq = json_is_integer(s) ? (int64_t)json_integer_value(s) : -1;
			size_t k = 0;
			if (!in_batch(fc->b, seq)) {
				candidates_clear(fc);
				return memd_error_set(err, MEMD_EIO, 0,
						      "extractor: fact %zu: seq %lld is not one of "
						      "the batch's", i, (long long)seq);
			}
			while (k < c->n_seqs && c->seqs[k] != seq)
				k++;
			if (k == c->n_seqs)
				c->seqs[c->n_seqs++] = seq;
		}
		qsort(c->seqs, c->n_seqs, sizeof(*c->seqs), cmp_seq);
	}
	return 0;
}

/* The batch as the extraction call's user message. */
static char *transcript(const extract_batch *b)
{
	size_t len = 1, o = 0;
	char *s;

	for (size_t i = 0; i < b->n_events; i++) {
		const extract_event *e = &b->events[i];
		len += 48 + strlen(e->role ? e->role : "event") +
		       strlen(e->author ? e->author : "") + strlen(e->text ? e->text : "");
	}
	if (!(s = malloc(len)))
		return NULL;
	for (size_t i = 0; i < b->n_events; i++) {
		const extract_event *e = &b->events[i];
		o += (size_t)snprintf(s + o, len - o, "[%lld] %s%s%s%s: %s\n", (long long)e->seq,
				      e->role ? e->role : "event", e->author ? " (" : "",
				      e->author ? e->author : "", e->author ? ")" : "",
				      e->text ? e->text : "");
	}
	s[o] = '\0';
	return s;
}

/* ---- call 2: decisions ---------------------------------------------------- */

typedef struct decide_ctx {
	facts_ctx *fc;
	extract_result res;
} decide_ctx;

/* The memory shown to some candidate with id, or NULL. */
static const extract_memory *shown(const facts_ctx *fc, const char *id)
{
	for (size_t i = 0; i < fc->n; i++)
		for (size_t j = 0; j < fc->v[i].near.n; j++)
			if (strcmp(fc->v[i].near.v[j].id, id) == 0)
				return &fc->v[i].near.v[j];
	return NULL;
}

static char **dup_strv(char *const *v, size_t n)
{
	char **out = calloc(n + 1, sizeof(*out));
	for (size_t i = 0; out && i < n; i++)
		if (!(out[i] = strdup(v[i]))) {
			free_strv(out, i);
			return NULL;
		}
	return out;
}

/* Append a decision on candidate c to res; the content is c's when
 * text is NULL, else text, kind and the tags given (taken). */
static int32_t push(extract_result *res, uint32_t op, const extract_memory *m, const candidate *c,
		    const char *text, const char *kind, char **topics, size_t n_topics,
		    char **entities, size_t n_entities)
{
	extract_decision d = { .op = op }, *grown;

	d.memory_version = m ? m->version : 0;
	if (m && !(d.memory_id = strdup(m->id)))
		goto nomem;
	if (op == EXTRACT_ADD || op == EXTRACT_UPDATE) {
		if (!(d.text = strdup(text ? text : c->text)) || !(d.kind = strdup(kind ? kind : c->kind)))
			goto nomem;
		if (text) {
			d.topics = topics, d.n_topics = n_topics;
			d.entities = entities, d.n_entities = n_entities;
			topics = entities = NULL;
		} else if (!(d.topics = dup_strv(c->topics, c->n_topics)) ||
			   !(d.entities = dup_strv(c->entities, c->n_entities))) {
			goto nomem;
		} else {
			d.n_topics = c->n_topics, d.n_entities = c->n_entities;
		}
	}
	if (c->n_seqs) {
		if (!(d.seqs = malloc(c->n_seqs * sizeof(*d.seqs))))
			goto nomem;
		memcpy(d.seqs, c->seqs, c->n_seqs * sizeof(*d.seqs));
		d.n_seqs = c->n_seqs;
	}
	if (!(grown = realloc(res->v, (res->n + 1) * sizeof(*grown))))
		goto nomem;
	res->v = grown;
	res->v[res->n++] = d;
	free_strv(topics, n_topics);
	free_strv(entities, n_entities);
	return 0;
nomem:
	{
		extract_result one = { malloc(sizeof(d)), 1 };
		if (one.v) {
			one.v[0] = d;
			extract_result_clear(&one);
		}
	}
	free_strv(topics, n_topics);
	free_strv(entities, n_entities);
	return MEMD_ENOMEM;
}

static int32_t check_decisions(void *ctx, json_t *content, memd_error *err)
{
	static const char *const ops[] = { "none", "add", "update", "delete", NULL };
	decide_ctx *dc = ctx;
	json_t *ds = json_object_get(content, "decisions"), *d;
	unsigned char *decided;
	size_t i;
	int32_t r = 0;

	extract_result_clear(&dc->res); /* an earlier attempt's */
	if (!json_is_object(content) || json_object_size(content) != 1 || !json_is_array(ds))
		return memd_error_set(err, MEMD_EIO, 0,
				      "extractor: the answer is not {\"decisions\": [...]}");
	if (!(decided = calloc(dc->fc->n + 1, 1)))
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	json_array_foreach(ds, i, d) {
		json_t *cj = json_object_get(d, "candidate"), *idj = json_object_get(d, "memory_id");
		const char *op_s = json_string_value(json_object_get(d, "op"));
		const extract_memory *m = NULL;
		uint32_t op = 0;
		json_int_t ci;
		char **topics = NULL, **entities = NULL;
		size_t n_topics = 0, n_entities = 0;

		while (op_s && ops[op] && strcmp(ops[op], op_s) != 0)
			op++;
		if (!json_is_object(d) || json_object_size(d) != 7 || !json_is_integer(cj) ||
		    !op_s || !ops[op] || !(json_is_null(idj) || json_is_string(idj))) {
			r = memd_error_set(err, MEMD_EIO, 0,
					   "extractor: decision %zu: needs exactly candidate, op (add, "
					   "update, delete, none), memory_id, text, kind, topics, "
					   "entities", i);
			break;
		}
		ci = json_integer_value(cj);
		if (ci < 0 || (size_t)ci >= dc->fc->n || decided[ci]) {
			r = memd_error_set(err, MEMD_EIO, 0,
					   "extractor: decision %zu: candidate %lld is not one shown "
					   "or was decided already", i, (long long)ci);
			break;
		}
		decided[ci] = 1;
		if (json_is_string(idj) && !(m = shown(dc->fc, json_string_value(idj)))) {
			r = memd_error_set(err, MEMD_EIO, 0,
					   "extractor: decision %zu: memory_id \"%.64s\" was not shown",
					   i, json_string_value(idj));
			break;
		}
		if ((op == EXTRACT_ADD && m) || ((op == EXTRACT_UPDATE || op == EXTRACT_DELETE) && !m)) {
			r = memd_error_set(err, MEMD_EIO, 0,
					   "extractor: decision %zu: %s %s a memory_id", i, op_s,
					   op == EXTRACT_ADD ? "must not have" : "needs");
			break;
		}
		if (m && op != EXTRACT_NONE) {
			for (size_t k = 0; k < dc->res.n; k++)
				if (dc->res.v[k].op != EXTRACT_NONE && dc->res.v[k].memory_id &&
				    strcmp(dc->res.v[k].memory_id, m->id) == 0)
					r = memd_error_set(err, MEMD_EIO, 0,
							   "extractor: decision %zu: memory %.64s "
							   "changed twice", i, m->id);
			if (r < 0)
				break;
		}
		if (op == EXTRACT_ADD || op == EXTRACT_UPDATE) {
			if (!valid_text(json_object_get(d, "text"), EXTRACT_TEXT_MAX) ||
			    !extract_kind_ok(json_string_value(json_object_get(d, "kind")))) {
				r = memd_error_set(err, MEMD_EIO, 0,
						   "extractor: decision %zu: %s needs text (1..%d "
						   "bytes) and a kind", i, op_s, EXTRACT_TEXT_MAX - 1);
				break;
			}
			if ((r = copy_tags(json_object_get(d, "topics"), "topics", i, &topics,
					   &n_topics, err)) < 0)
				break;
			if ((r = copy_tags(json_object_get(d, "entities"), "entities", i, &entities,
					   &n_entities, err)) < 0) {
				free_strv(topics, n_topics);
				break;
			}
			r = push(&dc->res, op, m, &dc->fc->v[ci],
				 json_string_value(json_object_get(d, "text")),
				 json_string_value(json_object_get(d, "kind")), topics, n_topics,
				 entities, n_entities);
		} else {
			r = push(&dc->res, op, m, &dc->fc->v[ci], NULL, NULL, NULL, 0, NULL, 0);
		}
		if (r < 0) {
			memd_error_set(err, r, 0, "out of memory");
			break;
		}
	}
	free(decided);
	if (r < 0)
		extract_result_clear(&dc->res);
	return r;
}

/* The consolidation call's user message: the candidates and their
 * nearest memories. */
static char *candidates_json(const facts_ctx *fc)
{
	json_t *cs = json_array(), *o;
	char *s = NULL;

	for (size_t i = 0; cs && i < fc->n; i++) {
		const candidate *c = &fc->v[i];
		json_t *ex = json_array(), *topics = json_array(), *entities = json_array();
		for (size_t j = 0; j < c->n_topics && topics; j++)
			json_array_append_new(topics, json_string(c->topics[j]));
		for (size_t j = 0; j < c->n_entities && entities; j++)
			json_array_append_new(entities, json_string(c->entities[j]));
		for (size_t j = 0; ex && j < c->near.n; j++) {
			const extract_memory *m = &c->near.v[j];
			json_t *mt = json_array();
			for (size_t k = 0; mt && k < m->n_topics; k++)
				json_array_append_new(mt, json_string(m->topics[k]));
			json_array_append_new(ex, json_pack("{s:s,s:s,s:s,s:o*}", "id", m->id, "text",
							    m->text, "kind", m->kind, "topics", mt));
		}
		json_array_append_new(cs, json_pack("{s:I,s:s,s:s,s:o*,s:o*,s:o*}", "index",
						    (json_int_t)i, "text", c->text, "kind", c->kind,
						    "topics", topics, "entities", entities,
						    "existing", ex));
	}
	o = cs ? json_pack("{s:o}", "candidates", cs) : NULL;
	if (o)
		s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return s;
}

int32_t extract_openai_run(extract_openai *eo, const memd_call *call, const extract_batch *b,
			   const extract_nearest *nn, extract_result *ret, memd_error *err)
{
	facts_ctx fc = { .b = b };
	decide_ctx dc = { .fc = &fc };
	json_t *schema = NULL;
	char *user = NULL;
	size_t shown_n = 0;
	int32_t r;

	if (!b->n_events) {
		memset(ret, 0, sizeof(*ret));
		return 0;
	}
	if (!(user = transcript(b)) || !(schema = facts_schema())) {
		r = memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
		goto done;
	}
	if ((r = chat(eo, call, eo->prompt, user, "memory_facts", schema, check_facts, &fc, err)) < 0)
		goto done;
	for (size_t i = 0; i < fc.n; i++) {
		candidate *c = &fc.v[i];
		if ((r = nn->find(nn->userdata, c->text, (const char *const *)c->topics, c->n_topics,
				  b->neighbours, &c->near, err)) < 0)
			goto done;
		shown_n += c->near.n;
	}
	if (!shown_n) {
		/* Nothing to consolidate with: every fact is new. */
		for (size_t i = 0; i < fc.n; i++)
			if ((r = push(&dc.res, EXTRACT_ADD, NULL, &fc.v[i], NULL, NULL, NULL, 0, NULL,
				      0)) < 0) {
				memd_error_set(err, r, 0, "out of memory");
				goto done;
			}
	} else {
		free(user);
		json_decref(schema);
		if (!(user = candidates_json(&fc)) || !(schema = decisions_schema())) {
			schema = NULL;
			r = memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
			goto done;
		}
		if ((r = chat(eo, call, eo->consolidate_prompt, user, "memory_decisions", schema,
			      check_decisions, &dc, err)) < 0)
			goto done;
	}
	*ret = dc.res;
	memset(&dc.res, 0, sizeof(dc.res));
	r = 0;
done:
	extract_result_clear(&dc.res);
	candidates_clear(&fc);
	json_decref(schema);
	free(user);
	return r;
}
