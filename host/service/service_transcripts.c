/* SPDX-License-Identifier: MIT */
/*
 * service_transcripts: the transcript operations of memd.h. Events are
 * never deleted here: an operation (rewind, rewrite, clear, undo) rides on
 * one store append that hides events in the same transaction and keeps a
 * record of it (the audit trail, api/memd/store.h). This file decides what
 * to hide and which state to restore, from bounded reads:
 *  - a rewind by turns reads the newest n visible user events (one LIMIT
 *    read, never the whole session); the earliest of them is the target;
 *  - state comes back from the session's state history: per key the
 *    earliest recorded change from the first hidden seq on gives the value
 *    before it. Session keys are restored as they are; "app:" and "user:"
 *    keys, shared with other sessions, only where their value is still
 *    the newest one this session wrote (the store checks it in the
 *    append's transaction, and names the keys it skipped). temp: keys
 *    never reach the store and are left alone;
 *  - an undo reverses its target's own recorded state changes the same
 *    way, and the store checks nothing was written after the target.
 * A rewind's reads and its append are one decision: the append expects
 * the version the reads saw, and a race lost to another writer is re-read
 * and decided again (SERVICE_TX_TRIES) unless the caller gave
 * expected_version, who then gets MEMD_ECONFLICT.
 * Also here: memd_events_query (roles, hidden events), the operations
 * list and the state history pages.
 */
#include "service/service_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json/event_json.h"
#include "util/uuid.h"

/* Rewinds racing other writers are re-read and re-decided this often,
 * then fail with MEMD_ECONFLICT. */
#define SERVICE_TX_TRIES 8
/* State history changes read per store call while restoring state. */
#define HISTORY_PAGE 256
/* At most this many turns in one rewind: the window read is bounded. */
#define REWIND_TURNS_MAX MEMD_PAGE_LIMIT_MAX
#define APP_PREFIX "app:"
#define USER_PREFIX "user:"

/* ---- small helpers -------------------------------------------------------- */

/* An optional expected_version member of body: *ret_has, *ret. */
static int32_t opt_version(json_t *body, int *ret_has, int64_t *ret, memd_error *err)
{
	json_t *v = json_object_get(body, "expected_version");

	*ret_has = 0;
	*ret = 0;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "expected_version: must be a non-negative integer");
	*ret_has = 1;
	*ret = json_integer_value(v);
	return 0;
}

static int32_t need_transcripts(memd *m, memd_error *err)
{
	if (store_minor(m->sessions) < 2)
		return memd_error_set(err, MEMD_ENOTSUP, 0,
				      "%s: keeps no transcript operations (a store of ABI 1.2 or "
				      "later does)",
				      store_name(m->sessions));
	return 0;
}

static int32_t conflict_expected(int64_t expected, int64_t version, memd_error *err)
{
	return memd_error_set(err, MEMD_ECONFLICT, 0,
			      "expected_version %" PRId64 " but the session is at version %" PRId64,
			      expected, version);
}

int32_t service_parse_roles(const char *roles, uint32_t *ret, memd_error *err)
{
	static const struct {
		const char *name;
		uint32_t bit;
	} names[] = {
		{ "user", MEMD_ROLE_USER },	{ "assistant", MEMD_ROLE_ASSISTANT },
		{ "system", MEMD_ROLE_SYSTEM }, { "tool", MEMD_ROLE_TOOL },
		{ "summary", MEMD_ROLE_SUMMARY },
	};
	uint32_t mask = 0;
	const char *p = roles;

	while (p && *p) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p), i;
		for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			if (strlen(names[i].name) == len && strncmp(names[i].name, p, len) == 0)
				break;
		if (i == sizeof(names) / sizeof(names[0]))
			return memd_error_set(err, MEMD_EINVAL, 0,
					      "roles: unknown role '%.*s' (user, assistant, system, "
					      "tool, summary)",
					      (int)(len > 64 ? 64 : len), p);
		mask |= names[i].bit;
		if (end && !end[1])
			return memd_error_set(err, MEMD_EINVAL, 0, "roles: ends with a comma");
		p = end ? end + 1 : NULL;
	}
	*ret = mask;
	return 0;
}

/* ---- sessions and operations ---------------------------------------------- */

typedef struct session_info {
	int64_t version;
	int64_t last_seq;
} session_info;

static int32_t got_session_info(void *ud, const memd_session *s)
{
	session_info *si = ud;
	si->version = s->version;
	si->last_seq = s->last_seq;
	return 0;
}

static int32_t read_session_info(memd *m, const memd_call *call, const memd_scope *sc,
				 session_info *ret, memd_error *err)
{
	memd_session_sink sink = { sizeof(sink), ret, got_session_info };
	return store_session_get(m->sessions, call, sc, &sink, err);
}

static int32_t got_operation_json(void *ud, const memd_operation *o)
{
	json_t **slot = ud;
	json_decref(*slot);
	*slot = ej_operation(o);
	return *slot ? 0 : MEMD_ENOMEM;
}

/* Operation id of the session of sc as a new JSON object in *ret. */
static int32_t operation_json(memd *m, const memd_call *call, const memd_scope *sc,
			      const char *id, json_t **ret, memd_error *err)
{
	json_t *o = NULL;
	memd_operation_sink sink = { sizeof(sink), &o, got_operation_json };
	int32_t r = store_operation_get(m->sessions, call, sc, id, &sink, err);

	if (r < 0) {
		json_decref(o);
		return r;
	}
	if (!o)
		return memd_error_set(err, MEMD_EINTERNAL, 0, "%s: operation_get delivered nothing",
				      store_name(m->sessions));
	*ret = o;
	return 0;
}

/* What an undo needs of its target. */
typedef struct op_info {
	int found;
	uint32_t kind;
	int64_t version;
	int undone;
	char undone_by[MEMD_ID_MAX + 1];
} op_info;

static int32_t got_op_info(void *ud, const memd_operation *o)
{
	op_info *oi = ud;
	oi->found = 1;
	oi->kind = o->kind;
	oi->version = o->version;
	oi->undone = o->undone_by != NULL;
	snprintf(oi->undone_by, sizeof(oi->undone_by), "%s", o->undone_by ? o->undone_by : "");
	return 0;
}

/* ---- state restore ---------------------------------------------------------- */

/* Per key: the earliest old value and the newest new value of the changes
 * read (JSON null = absent). */
typedef struct restore_acc {
	json_t *first_old;     /* key -> value before the earliest change */
	json_t *last_new;      /* key -> value after the newest change */
	const char *only_op;   /* only changes of this operation; NULL = all */
	int64_t only_version;  /* with only_op: stop past this version */
	int64_t last_version;  /* keyset of the last change read */
	char *last_key;
	char *after_key;       /* the key the read going on starts after: the
				* last page's last_key, held for the whole store
				* call (the store may read it while got_change
				* replaces last_key) */
	uint32_t n;            /* changes delivered by the current read */
	int past;              /* a change past only_version was seen */
	int oom;
} restore_acc;

static json_t *value_or_null(const char *text)
{
	json_t *v = text ? ej_load(text) : NULL;
	return v ? v : json_null();
}

static int32_t got_change(void *ud, const memd_state_change *c)
{
	restore_acc *a = ud;

	a->n++;
	if (a->only_op && c->version > a->only_version) {
		a->past = 1;
		return 1;
	}
	free(a->last_key);
	a->last_version = c->version;
	if (!(a->last_key = strdup(c->key))) {
		a->oom = 1;
		return MEMD_ENOMEM;
	}
	if (a->only_op && (!c->operation || strcmp(c->operation, a->only_op) != 0))
		return 0;
	if (!json_object_get(a->first_old, c->key) &&
	    json_object_set_new(a->first_old, c->key, value_or_null(c->old_json)) < 0)
		a->oom = 1;
	if (json_object_set_new(a->last_new, c->key, value_or_null(c->new_json)) < 0)
		a->oom = 1;
	return a->oom ? MEMD_ENOMEM : 0;
}

static void restore_acc_clear(restore_acc *a)
{
	json_decref(a->first_old);
	json_decref(a->last_new);
	free(a->last_key);
	free(a->after_key);
	memset(a, 0, sizeof(*a));
}

/* Read the history into a: every change with seq >= from_seq, or (only_op
 * set) the changes of that operation, made at version only_version. */
static int32_t read_history(memd *m, const memd_call *call, const memd_scope *sc,
			    int64_t from_seq, restore_acc *a, memd_error *err)
{
	memd_state_history_query q = { .struct_size = sizeof(q), .limit = HISTORY_PAGE };
	memd_state_change_sink sink = { sizeof(sink), a, got_change };
	int32_t r;

	a->first_old = json_object();
	a->last_new = json_object();
	if (!a->first_old || !a->last_new)
		return service_oom(err);
	if (a->only_op)
		q.after_version = a->only_version - 1;
	else
		q.from_seq = from_seq;
	for (;;) {
		a->n = 0;
		r = store_state_history(m->sessions, call, sc, &q, &sink, err);
		if (a->oom)
			return service_oom(err);
		if (r < 0)
			return r;
		if (a->past || a->n < HISTORY_PAGE)
			return 0;
		/* The next page starts after this one's last change: q takes
		 * last_key over. */
		free(a->after_key);
		q.after_version = a->last_version;
		q.after_key = a->after_key = a->last_key;
		a->last_key = NULL;
	}
}

static int is_shared_key(const char *key)
{
	return strncmp(key, APP_PREFIX, strlen(APP_PREFIX)) == 0 ||
	       strncmp(key, USER_PREFIX, strlen(USER_PREFIX)) == 0;
}

/* The restoring delta of a (keys whose value changed), the expectations
 * of its shared keys, as JSON texts (*ret_delta NULL when there is
 * nothing to restore; *ret_expect NULL when no key is shared), and the
 * keys, sorted, as a new array in *ret_keys. */
static int32_t restore_plan(restore_acc *a, char **ret_delta, char **ret_expect, json_t **ret_keys,
			    memd_error *err)
{
	json_t *delta = json_object(), *expect = json_object(), *keys = json_array(), *old;
	const char *key;
	char *dt = NULL, *et = NULL;

	if (!delta || !expect || !keys)
		goto nomem;
	json_object_foreach(a->first_old, key, old) {
		json_t *now = json_object_get(a->last_new, key);
		if (now && json_equal(now, old))
			continue; /* the changes since came back to it */
		if (json_object_set(delta, key, old) < 0 ||
		    json_array_append_new(keys, json_string(key)) < 0)
			goto nomem;
		if (is_shared_key(key) && json_object_set(expect, key, now ? now : json_null()) < 0)
			goto nomem;
	}
	if (json_object_size(delta) && !(dt = ej_dump(delta)))
		goto nomem;
	if (json_object_size(expect) && !(et = ej_dump(expect)))
		goto nomem;
	json_decref(delta);
	json_decref(expect);
	*ret_delta = dt;
	*ret_expect = et;
	*ret_keys = keys;
	return 0;
nomem:
	free(dt);
	json_decref(delta);
	json_decref(expect);
	json_decref(keys);
	return service_oom(err);
}

static int cmp_key(const void *a, const void *b)
{
	return strcmp(json_string_value(*(json_t *const *)a), json_string_value(*(json_t *const *)b));
}

/* keys sorted in place (an array of strings). */
static int sort_keys(json_t *keys)
{
	size_t n = json_array_size(keys);
	json_t **v = calloc(n ? n : 1, sizeof(*v));

	if (!v)
		return -1;
	for (size_t i = 0; i < n; i++)
		v[i] = json_incref(json_array_get(keys, i));
	qsort(v, n, sizeof(*v), cmp_key);
	json_array_clear(keys);
	for (size_t i = 0; i < n; i++)
		if (json_array_append_new(keys, v[i]) < 0) {
			while (++i < n)
				json_decref(v[i]);
			free(v);
			return -1;
		}
	free(v);
	return 0;
}

static int32_t got_not_restored(void *ud, const char *text, size_t len)
{
	json_t **slot = ud;
	json_decref(*slot);
	*slot = json_loadb(text, len, 0, NULL);
	return *slot && json_is_array(*slot) ? 0 : MEMD_EINVAL;
}

/* {"restored": keys not in not_restored, "not_restored"}, sorted. */
static json_t *state_result(json_t *keys, json_t *not_restored)
{
	json_t *restored = json_array(), *nr = json_array(), *k;
	size_t i, j;

	if (!restored || !nr)
		goto fail;
	json_array_foreach(keys, i, k) {
		int skipped = 0;
		json_t *s;
		json_array_foreach(not_restored, j, s)
			skipped |= json_is_string(s) && strcmp(json_string_value(s),
							      json_string_value(k)) == 0;
		if (json_array_append(skipped ? nr : restored, k) < 0)
			goto fail;
	}
	if (sort_keys(restored) < 0 || sort_keys(nr) < 0)
		goto fail;
	return json_pack("{s:o,s:o}", "restored", restored, "not_restored", nr);
fail:
	json_decref(restored);
	json_decref(nr);
	return NULL;
}

/* ---- one operation as one append -------------------------------------------- */

/* An operation's append: op (id filled here), the restoring state, no
 * events, expecting version `expected`. On success q->hidden_count etc.
 * are set and *ret_state is {"restored", "not_restored"}. */
typedef struct op_append {
	memd_transcript_op op;
	char id[UUID_TEXT_LEN + 1];
	char *delta;
	char *expect;
	json_t *keys;
	json_t *not_restored;
	service_append_req q;
} op_append;

static void op_append_clear(op_append *oa)
{
	free(oa->delta);
	free(oa->expect);
	json_decref(oa->keys);
	json_decref(oa->not_restored);
	oa->q.delta_text = NULL; /* oa->delta */
	service_append_req_clear(&oa->q);
	memset(oa, 0, sizeof(*oa));
}

static int32_t op_append_run(memd *m, const memd_scope *sc, op_append *oa, uint32_t kind,
			     int has_version, int64_t expected, json_t **ret_state,
			     memd_error *err)
{
	memd_text_sink nr = { sizeof(nr), &oa->not_restored, got_not_restored };
	json_t *ignored = NULL;
	int32_t r;

	if (uuid_v7(oa->id) < 0)
		return memd_error_set(err, MEMD_EIO, 0, "cannot generate an operation id");
	oa->op.struct_size = sizeof(oa->op);
	oa->op.kind = kind;
	oa->op.id = oa->id;
	oa->op.state_expect_json = oa->expect;
	oa->op.not_restored = &nr;
	oa->q.op = &oa->op;
	oa->q.delta_text = oa->delta;
	r = service_append(m, sc, &oa->q, NULL, has_version, expected, &ignored, err);
	oa->q.op = NULL;
	json_decref(ignored);
	if (r < 0)
		return r;
	if (ret_state) {
		json_t *none = json_array();
		*ret_state = state_result(oa->keys ? oa->keys : none,
					  oa->not_restored ? oa->not_restored : none);
		json_decref(none);
		if (!*ret_state)
			return service_oom(err);
	}
	return 0;
}

/* ---- rewind ------------------------------------------------------------------ */

/* The events a rewind looks at: how many, the earliest's seq and text. */
typedef struct rewind_scan {
	uint32_t n;
	int64_t first_seq;
	char *first_text;
	int oom;
} rewind_scan;

static int32_t got_rewind_event(void *ud, const memd_event *e)
{
	rewind_scan *s = ud;
	if (!s->n++) {
		s->first_seq = e->seq;
		if (!(s->first_text = strdup(e->text ? e->text : ""))) {
			s->oom = 1;
			return MEMD_ENOMEM;
		}
	}
	return 0;
}

static const char *const rewind_fields[] = { "turns", "to_seq", "expected_version", NULL };

/* What one rewind attempt decided. */
typedef struct rewind_plan {
	int64_t hide_from;
	uint32_t turns_undone;
	char *target_text;     /* NULL = no user message is undone */
} rewind_plan;

/* Decide the rewind of body (turns or to_seq) on the session as it is. */
static int32_t rewind_decide(memd *m, const memd_call *call, const memd_scope *sc, int64_t turns,
			     int64_t to_seq, const session_info *si, rewind_plan *ret,
			     memd_error *err)
{
	memd_event_query q = { .struct_size = sizeof(q), .roles = MEMD_ROLE_USER };
	rewind_scan s = { 0 };
	memd_event_sink sink = { sizeof(sink), &s, got_rewind_event };
	int32_t r;

	if (turns) {
		/* The newest `turns` visible user messages: one bounded read. */
		q.flags = MEMD_EVQ_NEWEST;
		q.limit = (uint32_t)turns;
		if ((r = store_events_load(m->sessions, call, sc, &q, &sink, err)) < 0)
			goto fail;
		if (s.oom) {
			r = service_oom(err);
			goto fail;
		}
		if (s.n < turns) {
			r = memd_error_set(err, MEMD_EINVAL, 0,
					   "turns: the session has %" PRIu32 " user turns, fewer than "
					   "%" PRId64 " (nothing was rewound)",
					   s.n, turns);
			goto fail;
		}
		ret->hide_from = s.first_seq;
		ret->turns_undone = s.n;
		ret->target_text = s.first_text;
		return 0;
	}
	/* to_seq: something visible must be there to hide. */
	if (to_seq > si->last_seq) {
		r = memd_error_set(err, MEMD_EINVAL, 0,
				   "to_seq: %" PRId64 " is past the session's last seq %" PRId64
				   " (nothing was rewound)",
				   to_seq, si->last_seq);
		goto fail;
	}
	q.roles = 0;
	q.after_seq = to_seq - 1;
	q.limit = 1;
	if ((r = store_events_load(m->sessions, call, sc, &q, &sink, err)) < 0)
		goto fail;
	if (!s.n) {
		r = memd_error_set(err, MEMD_EINVAL, 0,
				   "to_seq: no visible event at seq %" PRId64 " or later (nothing was "
				   "rewound)",
				   to_seq);
		goto fail;
	}
	free(s.first_text);
	memset(&s, 0, sizeof(s));
	/* The user turns it undoes: read as far as the rewind hides. */
	q.roles = MEMD_ROLE_USER;
	q.limit = 0;
	if ((r = store_events_load(m->sessions, call, sc, &q, &sink, err)) < 0)
		goto fail;
	if (s.oom) {
		r = service_oom(err);
		goto fail;
	}
	ret->hide_from = to_seq;
	ret->turns_undone = s.n;
	ret->target_text = s.first_text;
	return 0;
fail:
	free(s.first_text);
	return r;
}

int32_t memd_session_rewind(memd *m, const char *app, const char *user, const char *sid,
			    const char *body_json, char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	json_t *body = NULL, *jturns, *jto, *state = NULL, *opj = NULL;
	int64_t turns = 0, to_seq = 0, expected;
	int has_version;
	op_append oa = { 0 };
	rewind_plan plan = { 0 };
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0 ||
	    (r = service_parse_body(body_json, &body, err)) < 0)
		return r;
	if ((r = service_check_fields(body, rewind_fields, err)) < 0 ||
	    (r = opt_version(body, &has_version, &expected, err)) < 0)
		goto out;
	jturns = json_object_get(body, "turns");
	jto = json_object_get(body, "to_seq");
	if (jturns && json_is_null(jturns))
		jturns = NULL;
	if (jto && json_is_null(jto))
		jto = NULL;
	if (!jturns == !jto) {
		r = memd_error_set(err, MEMD_EINVAL, 0, "turns or to_seq: exactly one is required");
		goto out;
	}
	if (jturns && (!json_is_integer(jturns) || (turns = json_integer_value(jturns)) < 1 ||
		       turns > REWIND_TURNS_MAX)) {
		r = memd_error_set(err, MEMD_EINVAL, 0, "turns: must be an integer from 1 to %d",
				   REWIND_TURNS_MAX);
		goto out;
	}
	if (jto && (!json_is_integer(jto) || (to_seq = json_integer_value(jto)) < 1)) {
		r = memd_error_set(err, MEMD_EINVAL, 0, "to_seq: must be an integer >= 1");
		goto out;
	}
	if ((r = need_transcripts(m, err)) < 0)
		goto out;
	for (int tries = 1;; tries++) {
		session_info si = { 0 };
		restore_acc acc = { 0 };

		if ((r = read_session_info(m, &call, &sc, &si, err)) < 0)
			goto out;
		if (has_version && si.version != expected) {
			r = conflict_expected(expected, si.version, err);
			goto out;
		}
		if ((r = rewind_decide(m, &call, &sc, turns, to_seq, &si, &plan, err)) < 0)
			goto out;
		r = read_history(m, &call, &sc, plan.hide_from, &acc, err);
		if (r == 0)
			r = restore_plan(&acc, &oa.delta, &oa.expect, &oa.keys, err);
		restore_acc_clear(&acc);
		if (r < 0)
			goto out;
		oa.op.hide_from_seq = plan.hide_from;
		/* The decision holds for the version it was made on. */
		r = op_append_run(m, &sc, &oa, MEMD_OP_REWIND, 1, si.version, &state, err);
		if (r == 0)
			break;
		if (r != MEMD_ECONFLICT || has_version || tries == SERVICE_TX_TRIES)
			goto out;
		op_append_clear(&oa);
		free(plan.target_text);
		memset(&plan, 0, sizeof(plan));
	}
	if ((r = operation_json(m, &call, &sc, oa.id, &opj, err)) < 0)
		goto out;
	r = service_finish(json_pack("{s:I,s:I,s:s?,s:O,s:O,s:O}", "rewound_count",
				     (json_int_t)oa.q.hidden_count, "turns_undone",
				     (json_int_t)plan.turns_undone, "target_text", plan.target_text,
				     "operation", opj, "version", json_object_get(opj, "version"),
				     "state", state),
			   ret_json, err);
out:
	json_decref(opj);
	json_decref(state);
	json_decref(body);
	free(plan.target_text);
	op_append_clear(&oa);
	return r;
}

/* ---- clear ------------------------------------------------------------------- */

static const char *const version_fields[] = { "expected_version", NULL };

int32_t memd_events_clear(memd *m, const char *app, const char *user, const char *sid,
			  const char *body_json, char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	json_t *body = NULL, *opj = NULL;
	int64_t expected;
	int has_version;
	op_append oa = { 0 };
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0 ||
	    (r = service_parse_body(body_json, &body, err)) < 0)
		return r;
	if ((r = service_check_fields(body, version_fields, err)) < 0 ||
	    (r = opt_version(body, &has_version, &expected, err)) < 0 ||
	    (r = need_transcripts(m, err)) < 0)
		goto out;
	oa.op.hide_from_seq = 1;
	if ((r = op_append_run(m, &sc, &oa, MEMD_OP_CLEAR, has_version, expected, NULL, err)) < 0 ||
	    (r = operation_json(m, &call, &sc, oa.id, &opj, err)) < 0)
		goto out;
	r = service_finish(json_pack("{s:O,s:O,s:I}", "operation", opj, "version",
				     json_object_get(opj, "version"), "hidden_count",
				     (json_int_t)oa.q.hidden_count),
			   ret_json, err);
out:
	json_decref(opj);
	json_decref(body);
	op_append_clear(&oa);
	return r;
}

/* A store's session create delivers the session made; rewrite needs none. */
static int32_t ignore_session(void *ud, const memd_session *s)
{
	(void)ud;
	(void)s;
	return 0;
}

/* ---- rewrite ------------------------------------------------------------------ */

int32_t service_transcript_rewrite(memd *m, const memd_call *call, const char *app,
				   const char *user, const char *sid, service_append_req *q,
				   const char *inv, int has_version, int64_t expected_version,
				   json_t **ret, memd_error *err)
{
	memd_scope sc;
	memd_transcript_op op = { .struct_size = sizeof(op), .kind = MEMD_OP_REWRITE,
				  .hide_from_seq = 1 };
	char id[UUID_TEXT_LEN + 1];
	session_info si = { 0 };
	json_t *out = NULL, *opj = NULL;
	int created = 0;
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0 ||
	    (r = need_transcripts(m, err)) < 0)
		return r;
	r = read_session_info(m, call, &sc, &si, err);
	if (r == MEMD_ENOTFOUND) {
		memd_session s = { .struct_size = sizeof(s), .app = app, .user = user, .id = sid,
				   .metadata_json = "{}" };
		memd_session_sink made = { sizeof(made), NULL, ignore_session };
		s.created_us = s.updated_us = service_clock_us(m);
		r = store_session_create(m->sessions, call, &s, NULL, &made, err);
		created = r == 0;
		if (r == MEMD_ECONFLICT) /* made meanwhile by another caller */
			r = 0;
	}
	if (r < 0)
		return r;
	if (uuid_v7(id) < 0)
		return memd_error_set(err, MEMD_EIO, 0, "cannot generate an operation id");
	op.id = id;
	q->op = &op;
	r = service_append(m, &sc, q, inv, has_version, expected_version, &out, err);
	q->op = NULL;
	if (r < 0)
		return r;
	if (!q->replayed && (r = operation_json(m, call, &sc, id, &opj, err)) < 0) {
		json_decref(out);
		return r;
	}
	*ret = json_pack("{s:o?,s:O,s:O,s:I,s:b}", "operation", opj ? opj : json_null(), "version",
			 json_object_get(out, "version"), "seqs", json_object_get(out, "seqs"),
			 "hidden_count", (json_int_t)q->hidden_count, "created", created);
	json_decref(out);
	return *ret ? 0 : service_oom(err);
}

/* ---- undo --------------------------------------------------------------------- */

int32_t memd_operation_undo(memd *m, const char *app, const char *user, const char *sid,
			    const char *op_id, const char *body_json, char **ret_json,
			    memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	json_t *body = NULL, *state = NULL, *opj = NULL, *undone = NULL;
	int64_t expected;
	int has_version;
	op_info oi = { 0 };
	memd_operation_sink osink = { sizeof(osink), &oi, got_op_info };
	restore_acc acc = { 0 };
	session_info si = { 0 };
	op_append oa = { 0 };
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0)
		return r;
	if ((r = ej_check_id(op_id, "operation", err)) < 0 ||
	    (r = service_parse_body(body_json, &body, err)) < 0)
		return r;
	if ((r = service_check_fields(body, version_fields, err)) < 0 ||
	    (r = opt_version(body, &has_version, &expected, err)) < 0 ||
	    (r = need_transcripts(m, err)) < 0 ||
	    (r = store_operation_get(m->sessions, &call, &sc, op_id, &osink, err)) < 0)
		goto out;
	if (!oi.found) {
		r = memd_error_set(err, MEMD_EINTERNAL, 0, "%s: operation_get delivered nothing",
				   store_name(m->sessions));
		goto out;
	}
	if (oi.kind == MEMD_OP_UNDO) {
		r = memd_error_set(err, MEMD_EINVAL, 0,
				   "operation '%.64s' is an undo: undo a rewind, rewrite or clear",
				   op_id);
		goto out;
	}
	if (oi.undone) {
		r = memd_error_set(err, MEMD_ECONFLICT, 0,
				   "operation '%.64s' was undone already (by '%.64s')", op_id,
				   oi.undone_by);
		goto out;
	}
	if ((r = read_session_info(m, &call, &sc, &si, err)) < 0)
		goto out;
	if (has_version && si.version != expected) {
		r = conflict_expected(expected, si.version, err);
		goto out;
	}
	if (si.version != oi.version) {
		r = memd_error_set(err, MEMD_ECONFLICT, 0,
				   "the session was written after operation '%.64s' (version %" PRId64
				   ", now %" PRId64 "): only the latest write can be undone",
				   op_id, oi.version, si.version);
		goto out;
	}
	/* The target's own state changes, reversed as a rewind restores. */
	acc.only_op = op_id;
	acc.only_version = oi.version;
	r = read_history(m, &call, &sc, 0, &acc, err);
	if (r == 0)
		r = restore_plan(&acc, &oa.delta, &oa.expect, &oa.keys, err);
	if (r < 0)
		goto out;
	oa.op.undo_id = op_id;
	/* The store checks again, in the append's transaction. */
	if ((r = op_append_run(m, &sc, &oa, MEMD_OP_UNDO, 1, oi.version, &state, err)) < 0 ||
	    (r = operation_json(m, &call, &sc, oa.id, &opj, err)) < 0 ||
	    (r = operation_json(m, &call, &sc, op_id, &undone, err)) < 0)
		goto out;
	r = service_finish(json_pack("{s:O,s:O,s:I,s:I,s:O,s:O}", "operation", opj, "undone",
				     undone, "unhidden_count", (json_int_t)oa.q.unhidden_count,
				     "hidden_count", (json_int_t)oa.q.hidden_count, "version",
				     json_object_get(opj, "version"), "state", state),
			   ret_json, err);
out:
	json_decref(opj);
	json_decref(undone);
	json_decref(state);
	json_decref(body);
	restore_acc_clear(&acc);
	op_append_clear(&oa);
	return r;
}

/* ---- operations and state history ---------------------------------------------- */

static int32_t got_operation_array(void *ud, const memd_operation *o)
{
	json_t *j = ej_operation(o);
	return j && json_array_append_new(ud, j) == 0 ? 0 : MEMD_ENOMEM;
}

int32_t memd_operations_list(memd *m, const char *app, const char *user, const char *sid,
			     char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	json_t *arr;
	memd_operation_sink sink = { sizeof(sink), NULL, got_operation_array };
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0 ||
	    (r = need_transcripts(m, err)) < 0)
		return r;
	if (!(arr = json_array()))
		return service_oom(err);
	sink.userdata = arr;
	if ((r = store_operation_list(m->sessions, &call, &sc, 0, &sink, err)) < 0) {
		json_decref(arr);
		return r;
	}
	return service_finish(json_pack("{s:o}", "operations", arr), ret_json, err);
}

/* History cursor text: "<version>.<hex of key>". */
static char *history_cursor(int64_t version, const char *key)
{
	static const char hex[] = "0123456789abcdef";
	size_t len = strlen(key), off;
	char *c = malloc(32 + 2 * len);

	if (!c)
		return NULL;
	off = (size_t)snprintf(c, 32, "%" PRId64 ".", version);
	for (size_t i = 0; i < len; i++) {
		c[off++] = hex[(unsigned char)key[i] >> 4];
		c[off++] = hex[(unsigned char)key[i] & 0xf];
	}
	c[off] = '\0';
	return c;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

static int32_t history_cursor_decode(const char *c, int64_t *ret_version, char **ret_key,
				     memd_error *err)
{
	char *end, *key;
	long long version;
	size_t hexlen;

	version = strtoll(c, &end, 10);
	if (end == c || *end != '.' || version < 0)
		goto bad;
	end++;
	hexlen = strlen(end);
	if (hexlen == 0 || hexlen % 2)
		goto bad;
	if (!(key = malloc(hexlen / 2 + 1)))
		return service_oom(err);
	for (size_t i = 0; i < hexlen / 2; i++) {
		int hi = hexval(end[2 * i]), lo = hexval(end[2 * i + 1]);
		if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
			free(key);
			goto bad;
		}
		key[i] = (char)(hi << 4 | lo);
	}
	key[hexlen / 2] = '\0';
	*ret_version = version;
	*ret_key = key;
	return 0;
bad:
	return memd_error_set(err, MEMD_EINVAL, 0, "cursor: not a cursor memd returned");
}

typedef struct history_page {
	json_t *changes;
	uint32_t limit;
	int more;
	int64_t last_version;
	char *last_key;
} history_page;

static int32_t got_history_change(void *ud, const memd_state_change *c)
{
	history_page *p = ud;
	char at[EJ_TIME_LEN];
	json_t *o;

	if (json_array_size(p->changes) == p->limit) {
		p->more = 1;
		return 1;
	}
	ej_format_time(c->at_us, at);
	o = json_pack("{s:I,s:I,s:s,s:o,s:o,s:s,s:s?}", "version", (json_int_t)c->version, "seq",
		      (json_int_t)c->seq, "key", c->key, "old", value_or_null(c->old_json), "new",
		      value_or_null(c->new_json), "at", at, "operation", c->operation);
	free(p->last_key);
	p->last_version = c->version;
	p->last_key = strdup(c->key);
	return o && p->last_key && json_array_append_new(p->changes, o) == 0 ? 0 : MEMD_ENOMEM;
}

int32_t memd_state_history(memd *m, const char *app, const char *user, const char *sid,
			   const char *cursor, uint32_t limit, char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	memd_state_history_query q = { .struct_size = sizeof(q) };
	history_page p = { 0 };
	memd_state_change_sink sink = { sizeof(sink), &p, got_history_change };
	char *after_key = NULL, *next = NULL;
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0 ||
	    (r = need_transcripts(m, err)) < 0)
		return r;
	if (limit == 0)
		limit = MEMD_PAGE_LIMIT_DEFAULT;
	if (limit > MEMD_PAGE_LIMIT_MAX)
		return memd_error_set(err, MEMD_EINVAL, 0, "limit: at most %d", MEMD_PAGE_LIMIT_MAX);
	if (cursor && *cursor &&
	    (r = history_cursor_decode(cursor, &q.after_version, &after_key, err)) < 0)
		return r;
	q.after_key = after_key;
	q.limit = limit + 1; /* one more tells whether there is a next page */
	p.limit = limit;
	if (!(p.changes = json_array())) {
		r = service_oom(err);
		goto out;
	}
	if ((r = store_state_history(m->sessions, &call, &sc, &q, &sink, err)) < 0)
		goto out;
	if (p.more && !(next = history_cursor(p.last_version, p.last_key))) {
		r = service_oom(err);
		goto out;
	}
	r = service_finish(json_pack("{s:O,s:s?}", "changes", p.changes, "next_cursor", next),
			   ret_json, err);
out:
	json_decref(p.changes);
	free(p.last_key);
	free(after_key);
	free(next);
	return r;
}

/* ---- event pages by role, hidden events ------------------------------------------ */

/* A sink of the read path: records written as JSON text (json_out.h). */
static int32_t sink_page_event(void *ud, const memd_event *e)
{
	jo_page *p = ud;
	int32_t r = jo_page_event(p, e);
	/* A full page needs nothing more from the store: stop its read. */
	return r == 0 && p->more ? 1 : r;
}

int32_t memd_events_query(memd *m, const char *app, const char *user, const char *sid,
			  int64_t after_seq, uint32_t limit, const char *roles, uint32_t flags,
			  char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	memd_event_query q = { .struct_size = sizeof(q) };
	jo_page page;
	memd_event_sink sink = { sizeof(sink), &page, sink_page_event };
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0 ||
	    (r = service_parse_roles(roles, &q.roles, err)) < 0)
		return r;
	if (after_seq < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "after_seq: must not be negative");
	if (limit == 0)
		limit = MEMD_PAGE_LIMIT_DEFAULT;
	if (limit > MEMD_PAGE_LIMIT_MAX)
		return memd_error_set(err, MEMD_EINVAL, 0, "limit: at most %d", MEMD_PAGE_LIMIT_MAX);
	/* A store before 1.2 would ignore both and answer a wider page. */
	if ((q.roles || (flags & MEMD_READ_INCLUDE_HIDDEN)) && (r = need_transcripts(m, err)) < 0)
		return r;
	q.after_seq = after_seq;
	q.limit = limit + 1; /* one more tells whether there is a next page */
	q.flags = flags & MEMD_READ_INCLUDE_HIDDEN ? MEMD_EVQ_INCLUDE_HIDDEN : 0;
	jo_page_begin(&page, limit);
	page.max_bytes = (size_t)m->set.max_response_bytes;
	page.out.no_text = (flags & MEMD_READ_NO_TEXT) != 0;
	r = store_events_load(m->sessions, &call, &sc, &q, &sink, err);
	if (r < 0 || page.out.error) {
		r = service_read_failed(m, &page.out, r, NULL, err);
		jo_page_clear(&page);
		return r;
	}
	return jo_page_finish(&page, ret_json) < 0 ? service_oom(err) : 0;
}
