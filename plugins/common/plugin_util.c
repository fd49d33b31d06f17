/* SPDX-License-Identifier: MIT */
#include "plugin_util.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PU_US_PER_SEC 1000000
#define PU_NS_PER_US 1000

static const char *const scope_prefix[PU_SCOPE_COUNT] = { "", "app:", "user:" };

#define TEMP_PREFIX "temp:"

static int32_t classify(const char *key, int32_t *ret_scope, const char **ret_bare, memd_error *err)
{
	if (key[0] == '\0')
		return memd_error_set(err, MEMD_EINVAL, 0, "state key is empty");
	if (strncmp(key, TEMP_PREFIX, strlen(TEMP_PREFIX)) == 0)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "state key '%.64s' is temp: and is never stored", key);
	for (int32_t s = PU_SCOPE_APP; s < PU_SCOPE_COUNT; s++) {
		size_t pl = strlen(scope_prefix[s]);
		if (strncmp(key, scope_prefix[s], pl) == 0) {
			if (key[pl] == '\0')
				return memd_error_set(err, MEMD_EINVAL, 0,
						      "state key '%s' has a prefix but no name", key);
			*ret_scope = s;
			*ret_bare = key + pl;
			return 0;
		}
	}
	*ret_scope = PU_SCOPE_SESSION;
	*ret_bare = key;
	return 0;
}

int32_t pu_state_delta_foreach(const char *delta_json, pu_state_fn fn, void *userdata,
			       memd_error *err)
{
	json_error_t jerr;
	json_t *root;
	const char *key;
	json_t *value;
	int32_t r = 0;

	if (!delta_json || !delta_json[0])
		return 0;
	root = json_loads(delta_json, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
	if (!root)
		return memd_error_set(err, MEMD_EINVAL, 0, "state delta is not JSON: %s", jerr.text);
	if (!json_is_object(root)) {
		r = memd_error_set(err, MEMD_EINVAL, 0, "state delta must be a JSON object");
		goto out;
	}
	/* Validate every key before calling fn: a bad delta changes nothing. */
	json_object_foreach(root, key, value) {
		int32_t scope;
		const char *bare;
		r = classify(key, &scope, &bare, err);
		if (r < 0)
			goto out;
	}
	json_object_foreach(root, key, value) {
		int32_t scope;
		const char *bare;
		char *text = NULL;

		(void)classify(key, &scope, &bare, NULL);
		if (!json_is_null(value)) {
			text = json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY);
			if (!text) {
				r = memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
				goto out;
			}
		}
		r = fn(userdata, scope, bare, text);
		free(text);
		if (r < 0)
			goto out;
	}
out:
	json_decref(root);
	return r;
}

struct pu_state_builder {
	json_t *scopes[PU_SCOPE_COUNT];
};

pu_state_builder *pu_state_builder_new(void)
{
	pu_state_builder *b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	for (int s = 0; s < PU_SCOPE_COUNT; s++) {
		b->scopes[s] = json_object();
		if (!b->scopes[s]) {
			pu_state_builder_free(b);
			return NULL;
		}
	}
	return b;
}

int32_t pu_state_builder_add(pu_state_builder *b, int32_t scope, const char *key,
			     const char *value_json, memd_error *err)
{
	json_error_t jerr;
	json_t *v;

	if (scope < 0 || scope >= PU_SCOPE_COUNT)
		return memd_error_set(err, MEMD_EINVAL, 0, "bad state scope %d", (int)scope);
	v = json_loads(value_json, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
	if (!v)
		return memd_error_set(err, MEMD_EINVAL, 0, "stored state value of '%.64s' is not JSON: %s",
				      key, jerr.text);
	if (json_object_set_new(b->scopes[scope], key, v) < 0)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	return 0;
}

int32_t pu_state_builder_finish(pu_state_builder *b, const memd_text_sink *out, memd_error *err)
{
	json_t *merged = json_object();
	char *text = NULL;
	int32_t r = 0;

	if (!merged)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	for (int s = PU_SCOPE_APP; s <= PU_SCOPE_COUNT; s++) {
		/* app, user, then session last. */
		int32_t scope = s == PU_SCOPE_COUNT ? PU_SCOPE_SESSION : s;
		const char *key;
		json_t *v;
		json_object_foreach(b->scopes[scope], key, v) {
			size_t pl = strlen(scope_prefix[scope]), kl = strlen(key);
			char *full = malloc(pl + kl + 1);
			if (!full) {
				r = memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
				goto out;
			}
			memcpy(full, scope_prefix[scope], pl);
			memcpy(full + pl, key, kl + 1);
			r = json_object_set(merged, full, v);
			free(full);
			if (r < 0) {
				r = memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
				goto out;
			}
		}
	}
	text = json_dumps(merged, JSON_COMPACT);
	if (!text) {
		r = memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
		goto out;
	}
	r = out->text(out->userdata, text, strlen(text));
	if (r < 0)
		memd_error_set(err, r, 0, "state sink refused the result");
out:
	free(text);
	json_decref(merged);
	return r;
}

void pu_state_builder_free(pu_state_builder *b)
{
	if (!b)
		return;
	for (int s = 0; s < PU_SCOPE_COUNT; s++)
		json_decref(b->scopes[s]);
	free(b);
}

int32_t pu_call_check(const memd_call *call, int64_t now_monotonic_us, memd_error *err)
{
	if (!call)
		return 0;
	if (call->cancel && *call->cancel)
		return memd_error_set(err, MEMD_ECANCELED, 0, "call cancelled");
	if (call->deadline_us && now_monotonic_us > call->deadline_us)
		return memd_error_set(err, MEMD_ETIMEDOUT, MEMD_ERROR_RETRYABLE, "deadline passed");
	return 0;
}

int32_t pu_check_id(const char *what, const char *id, memd_error *err)
{
	size_t n;

	if (!id || !id[0])
		return memd_error_set(err, MEMD_EINVAL, 0, "%s is missing", what);
	n = strnlen(id, MEMD_ID_MAX + 1);
	if (n > MEMD_ID_MAX)
		return memd_error_set(err, MEMD_EINVAL, 0, "%s '%.64s...' is longer than %d bytes",
				      what, id, MEMD_ID_MAX);
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)id[i];
		if (ch < 0x20 || ch == 0x7f)
			return memd_error_set(err, MEMD_EINVAL, 0,
					      "%s contains a control character", what);
	}
	return 0;
}

int32_t pu_check_scope(const memd_scope *scope, int need_session, memd_error *err)
{
	int32_t r;

	if (!scope || scope->struct_size < offsetof(memd_scope, session) + sizeof(scope->session))
		return memd_error_set(err, MEMD_EINVAL, 0, "scope is missing or too small");
	r = pu_check_id("app", scope->app, err);
	if (r == 0)
		r = pu_check_id("user", scope->user, err);
	if (r == 0 && need_session)
		r = pu_check_id("session", scope->session, err);
	return r;
}

int32_t pu_check_artifact_name(const char *name, memd_error *err)
{
	int32_t r = pu_check_id("artifact name", name, err);

	if (r < 0)
		return r;
	if (strchr(name, '/') || strchr(name, '\\') || strstr(name, ".."))
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "artifact name '%.64s' must not contain '/', '\\' or '..'",
				      name);
	return 0;
}

static int cmp_str_ptr(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int32_t check_event(const memd_event *e, uint32_t i, memd_error *err)
{
	char what[32];
	int32_t r;

	if (!e)
		return memd_error_set(err, MEMD_EINVAL, 0, "event %u is missing", i);
	snprintf(what, sizeof(what), "event %u id", i);
	r = pu_check_id(what, e->id, err);
	if (r < 0)
		return r;
	if (!e->role || !e->role[0])
		return memd_error_set(err, MEMD_EINVAL, 0, "event '%.64s' has no role", e->id);
	if (e->covers_seq < 0 || e->tokens < 0)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "event '%.64s': covers_seq and tokens must not be negative",
				      e->id);
	return 0;
}

const memd_transcript_op *pu_append_op(const memd_append *a)
{
	if (!a || a->struct_size < offsetof(memd_append, op) + sizeof(a->op))
		return NULL;
	return a->op;
}

const char *pu_write_task_path(const memd_checkpoint_writes *w, uint32_t i)
{
	if (w->struct_size < offsetof(memd_checkpoint_writes, task_paths) + sizeof(w->task_paths) ||
	    !w->task_paths || !w->task_paths[i])
		return "";
	return w->task_paths[i];
}

/* Does out have a task_write (since 1.6)? */
static int sink_has_task_write(const memd_checkpoint_sink *out)
{
	return out->struct_size >=
		       offsetof(memd_checkpoint_sink, task_write) + sizeof(out->task_write) &&
	       out->task_write;
}

int pu_sink_wants_writes(const memd_checkpoint_sink *out)
{
	return out->write || sink_has_task_write(out);
}

int32_t pu_sink_write(const memd_checkpoint_sink *out, const memd_checkpoint_write *w,
		      const char *task_path)
{
	if (sink_has_task_write(out))
		return out->task_write(out->userdata, w, task_path ? task_path : "");
	return out->write(out->userdata, w);
}

static const char *const role_names[PU_ROLES_COUNT] = { "user", "assistant", "system", "tool",
							 "summary" };
_Static_assert(MEMD_ROLE_USER == 1u << 0 && MEMD_ROLE_ASSISTANT == 1u << 1 &&
		       MEMD_ROLE_SYSTEM == 1u << 2 && MEMD_ROLE_TOOL == 1u << 3 &&
		       MEMD_ROLE_SUMMARY == 1u << 4,
	       "role_names follows the MEMD_ROLE_* bits");

void pu_role_names(uint32_t roles, const char *names[PU_ROLES_COUNT])
{
	for (unsigned i = 0; i < PU_ROLES_COUNT; i++)
		names[i] = (roles & (1u << i)) ? role_names[i] : NULL;
}

/* The checks of an append's transcript operation (a store's own rules,
 * such as the undo target existing, come later, under its locks). */
static int32_t check_op(const memd_transcript_op *op, memd_error *err)
{
	int32_t r;

	if (op->struct_size < offsetof(memd_transcript_op, not_restored) + sizeof(op->not_restored))
		return memd_error_set(err, MEMD_EINVAL, 0, "transcript operation is too small");
	if (op->kind < MEMD_OP_REWIND || op->kind > MEMD_OP_UNDO)
		return memd_error_set(err, MEMD_EINVAL, 0, "transcript operation kind %u is unknown",
				      (unsigned)op->kind);
	r = pu_check_id("operation id", op->id, err);
	if (r < 0)
		return r;
	if (op->kind == MEMD_OP_UNDO) {
		r = pu_check_id("undo_id", op->undo_id, err);
		if (r == 0 && strcmp(op->undo_id, op->id) == 0)
			r = memd_error_set(err, MEMD_EINVAL, 0, "operation '%.64s' cannot undo itself",
					   op->id);
		if (r < 0)
			return r;
	} else if (op->hide_from_seq < 1) {
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "operation '%.64s': hide_from_seq must be >= 1", op->id);
	}
	if (op->state_expect_json && op->state_expect_json[0]) {
		json_t *root = json_loads(op->state_expect_json, JSON_REJECT_DUPLICATES, NULL);
		int ok = json_is_object(root);
		json_decref(root);
		if (!ok)
			return memd_error_set(err, MEMD_EINVAL, 0,
					      "state_expect_json must be a JSON object");
	}
	return 0;
}

int32_t pu_check_append(const memd_scope *scope, const memd_append *a,
			const memd_append_result *res, memd_error *err)
{
	const char **ids;
	int32_t r = pu_check_scope(scope, 1, err);

	if (r < 0)
		return r;
	if (!a || !res)
		return memd_error_set(err, MEMD_EINVAL, 0, "append or its result is missing");
	if (a->flags & ~MEMD_APPEND_EXPECT_VERSION)
		return memd_error_set(err, MEMD_EINVAL, 0, "append has unknown flags 0x%x",
				      (unsigned)a->flags);
	if (a->n_events && (!a->events || !res->seqs))
		return memd_error_set(err, MEMD_EINVAL, 0, "append of %u events without %s",
				      (unsigned)a->n_events, a->events ? "result slots" : "events");
	if (pu_append_op(a) && (r = check_op(pu_append_op(a), err)) < 0)
		return r;
	for (uint32_t i = 0; i < a->n_events; i++) {
		r = check_event(a->events[i], i, err);
		if (r < 0)
			return r;
	}
	if (a->n_events < 2)
		return 0;
	ids = malloc(a->n_events * sizeof(*ids));
	if (!ids)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	for (uint32_t i = 0; i < a->n_events; i++)
		ids[i] = a->events[i]->id;
	qsort(ids, a->n_events, sizeof(*ids), cmp_str_ptr);
	for (uint32_t i = 1; i < a->n_events && r == 0; i++)
		if (strcmp(ids[i - 1], ids[i]) == 0)
			r = memd_error_set(err, MEMD_ECONFLICT, 0,
					   "event id '%.64s' appears twice in the batch", ids[i]);
	free(ids);
	return r;
}

int32_t pu_check_event_query(const memd_scope *scope, const memd_event_query *q,
			     const memd_event_sink *out, memd_error *err)
{
	const uint32_t known = MEMD_EVQ_NEWEST | MEMD_EVQ_NO_SUMMARY | MEMD_EVQ_ONLY_SUMMARY |
			       MEMD_EVQ_INCLUDE_HIDDEN;
	int32_t r = pu_check_scope(scope, 1, err);

	if (r < 0)
		return r;
	if (!q || !out || !out->event)
		return memd_error_set(err, MEMD_EINVAL, 0, "event query or sink is missing");
	if (q->flags & ~known)
		return memd_error_set(err, MEMD_EINVAL, 0, "event query has unknown flags 0x%x",
				      (unsigned)q->flags);
	if ((q->flags & MEMD_EVQ_NO_SUMMARY) && (q->flags & MEMD_EVQ_ONLY_SUMMARY))
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "event query cannot ask for no summaries and only summaries");
	if (q->after_seq < 0 || q->before_seq < 0 || q->after_time_us < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "event query bounds must not be negative");
	if (pu_event_query_roles(q) & ~PU_ROLES_KNOWN)
		return memd_error_set(err, MEMD_EINVAL, 0, "event query has unknown roles 0x%x",
				      (unsigned)q->roles);
	return 0;
}

uint32_t pu_event_query_roles(const memd_event_query *q)
{
	if (q->struct_size < offsetof(memd_event_query, roles) + sizeof(q->roles))
		return 0;
	return q->roles;
}

uint32_t pu_role_bit(const char *role)
{
	static const struct {
		const char *name;
		uint32_t bit;
	} roles[] = {
		{ "user", MEMD_ROLE_USER },	    { "assistant", MEMD_ROLE_ASSISTANT },
		{ "system", MEMD_ROLE_SYSTEM },	    { "tool", MEMD_ROLE_TOOL },
		{ "summary", MEMD_ROLE_SUMMARY },
	};

	for (size_t i = 0; role && i < sizeof(roles) / sizeof(roles[0]); i++)
		if (strcmp(role, roles[i].name) == 0)
			return roles[i].bit;
	return 0;
}

int32_t pu_err_ids_stored(uint32_t n_stored, uint32_t n_events, const char *some_id,
			  memd_error *err)
{
	return memd_error_set(err, MEMD_ECONFLICT, 0,
			      "%u of the batch's %u event ids already exist (e.g. '%.64s'): "
			      "a retry must resend the same batch",
			      (unsigned)n_stored, (unsigned)n_events, some_id ? some_id : "");
}

int32_t pu_err_version(const memd_scope *scope, int64_t version, int64_t expected,
		       memd_error *err)
{
	return memd_error_set(err, MEMD_ECONFLICT, 0,
			      "session '%.64s' is at version %lld, not the expected %lld",
			      scope->session, (long long)version, (long long)expected);
}

int pu_cond_wait_call(pthread_cond_t *cond, pthread_mutex_t *mutex, const memd_call *call)
{
	struct timespec ts;

	if (!call || !call->deadline_us) {
		pthread_cond_wait(cond, mutex);
		return 0;
	}
	ts.tv_sec = call->deadline_us / PU_US_PER_SEC;
	ts.tv_nsec = (call->deadline_us % PU_US_PER_SEC) * PU_NS_PER_US;
	return pthread_cond_timedwait(cond, mutex, &ts) == ETIMEDOUT ? ETIMEDOUT : 0;
}

static const char **event_string_slot(memd_event *e, size_t k)
{
	const char **slots[] = { &e->app, &e->user, &e->session, &e->id, &e->invocation_id,
				 &e->author, &e->role, &e->branch, &e->content_json,
				 &e->actions_json, &e->metadata_json, &e->text, &e->hidden_by,
				 &e->operation };
	return k < sizeof(slots) / sizeof(slots[0]) ? slots[k] : NULL;
}

char *pu_strdup_or_null(const char *s, int *failed)
{
	char *d;

	if (!s)
		return NULL;
	d = strdup(s);
	if (!d)
		*failed = 1;
	return d;
}

int32_t pu_event_copy_make(const memd_event *src, pu_event_copy *dst, memd_error *err)
{
	size_t total = 0;
	const char **slot;
	char *p;

	dst->e = *src;
	for (size_t k = 0; (slot = event_string_slot(&dst->e, k)); k++)
		total += *slot ? strlen(*slot) + 1 : 0;
	dst->buf = malloc(total ? total : 1);
	if (!dst->buf)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	p = dst->buf;
	for (size_t k = 0; (slot = event_string_slot(&dst->e, k)); k++) {
		size_t n;
		if (!*slot)
			continue;
		n = strlen(*slot) + 1;
		memcpy(p, *slot, n);
		*slot = p;
		p += n;
	}
	return 0;
}

int32_t pu_copy_strings(const char **const *slots, size_t n, char **ret_buf, memd_error *err)
{
	size_t total = 0;
	char *buf, *p;

	for (size_t k = 0; k < n; k++)
		total += *slots[k] ? strlen(*slots[k]) + 1 : 0;
	buf = malloc(total ? total : 1);
	if (!buf)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	p = buf;
	for (size_t k = 0; k < n; k++) {
		size_t len;
		if (!*slots[k])
			continue;
		len = strlen(*slots[k]) + 1;
		memcpy(p, *slots[k], len);
		*slots[k] = p;
		p += len;
	}
	*ret_buf = buf;
	return 0;
}
