/* SPDX-License-Identifier: MIT */
/*
 * service_checkpoints: run checkpoints (api/memd/memd.h "run
 * checkpoints"): memd_checkpoint_put, _put_writes, _get, _list (a
 * session's or a user's, with the metadata filter and its cursors),
 * _delete, _resumable, and the expiry sweep (memd_checkpoints_sweep and
 * the background thread running it every checkpoints.sweep_interval_s).
 *
 * The facade decides what the store does not: the expiry of a put (the
 * app's checkpoints.timeout_s from the facade clock), the metadata filter
 * of a list (the store pages by its keyset, the facade keeps the rows
 * that match until it has a page), and what a resumable run is resumed by
 * (the app's auto_resume and auto_resume_hitl).
 */
#include "service/service_int.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json/checkpoint_json.h"
#include "service/service_thread.h"
#include "util/base64.h"

/* The longest type tag of a checkpoint or a write (a serializer's name). */
#define CHECKPOINT_TYPE_MAX 256
/* The longest task path of a put_writes (bytes); LangGraph's are a few
 * names and numbers, longer for nested subgraphs. */
#define CHECKPOINT_TASK_PATH_MAX 1024
/* Most pending writes one put_writes carries. */
#define CHECKPOINT_WRITES_MAX 10000
/* Rows a filtered list reads from the store per page. */
#define CHECKPOINT_SCAN_PAGE 200u
/* Checkpoints one store checkpoint_expire call deletes at most; a sweep
 * repeats it until a batch comes back short. */
#define CHECKPOINT_EXPIRE_BATCH 500u
/* The cursor of a resumable listing starts with this byte, a list's
 * cursor with CURSOR_LIST, so that one is refused by the other. */
#define CURSOR_LIST 'c'
#define CURSOR_RESUME 'r'
/* The resume values of the resumable listing. */
#define RESUME_AUTOMATIC "automatic"
#define RESUME_APPROVAL "approval"

/* The expiry sweep's thread. */
struct checkpoint_sweep {
	service_thread th;         /* its calls give up once th.cancel */
};

/* ---- checks --------------------------------------------------------------- */

/* A namespace: "" (the root) or an id; NULL means "". */
static int32_t check_ns(const char *ns, memd_error *err)
{
	return ns && *ns ? ej_check_id(ns, "checkpoint_ns", err) : 0;
}

/* A type tag: the n bytes at s (NUL-terminated after them). */
static int32_t check_type_text(const char *s, size_t n, const char *what, memd_error *err)
{
	if (n == 0 || n > CHECKPOINT_TYPE_MAX || strlen(s) != n || !ej_utf8_valid(s, n))
		return memd_error_set(err, MEMD_EINVAL, 0, "%s: must be 1..%d bytes of UTF-8", what,
				      CHECKPOINT_TYPE_MAX);
	return 0;
}

static int32_t check_type(json_t *v, const char *what, const char **ret, memd_error *err)
{
	int32_t r;

	if (!json_is_string(v))
		return memd_error_set(err, MEMD_EINVAL, 0, "%s: required, a string", what);
	if ((r = check_type_text(json_string_value(v), json_string_length(v), what, err)) < 0)
		return r;
	*ret = json_string_value(v);
	return 0;
}

/* body's "run_state" into *ret: absent or null leaves *ret. */
static int32_t opt_run_state(json_t *body, uint32_t *ret, memd_error *err)
{
	json_t *v = json_object_get(body, "run_state");

	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "run_state: must be running, interrupted or done");
	return cj_run_state_parse(json_string_value(v), "run_state", ret, err);
}

static int32_t check_limit(uint32_t limit, uint32_t *ret, memd_error *err)
{
	if (limit > MEMD_LIST_LIMIT_MAX)
		return memd_error_set(err, MEMD_EINVAL, 0, "limit: at most %d", MEMD_LIST_LIMIT_MAX);
	*ret = limit ? limit : MEMD_LIST_LIMIT_DEFAULT;
	return 0;
}

static int32_t store_failed(int32_t r, memd_error *err)
{
	return r == MEMD_ENOMEM ? service_oom(err) : r;
}

/* ---- cursors ---------------------------------------------------------------- */

/* A cursor: tag, then each of the n parts followed by a NUL, as URL-safe
 * base64. NULL on ENOMEM. */
static char *cursor_encode(char tag, const char *const *parts, size_t n)
{
	size_t len = 1, off = 1;
	char *raw, *out;

	for (size_t i = 0; i < n; i++)
		len += strlen(parts[i]) + 1;
	if (!(raw = malloc(len)))
		return NULL;
	raw[0] = tag;
	for (size_t i = 0; i < n; i++) {
		size_t k = strlen(parts[i]) + 1;
		memcpy(raw + off, parts[i], k);
		off += k;
	}
	out = b64_encode(raw, len, B64_URL, NULL);
	free(raw);
	return out;
}

/* Decode cursor c of tag into n parts (*ret_buf malloc'd holds them; the
 * parts point into it). Part i must pass check[i] (an id, or a
 * namespace when ns_part == i). MEMD_EINVAL "cursor: not a cursor memd
 * returned", MEMD_ENOMEM. */
static int32_t cursor_decode(char tag, const char *c, const char **parts, size_t n,
			     size_t ns_part, char **ret_buf, memd_error *err)
{
	void *raw = NULL;
	size_t len = 0, off = 1;
	memd_error e = { 0 };
	int r = b64_decode(c, strlen(c), B64_URL, &raw, &len);

	if (r == -2)
		return service_oom(err);
	if (r < 0 || len < 1 || ((char *)raw)[0] != tag)
		goto bad;
	for (size_t i = 0; i < n; i++) {
		const char *p = (char *)raw + off;
		size_t k = off < len ? strnlen(p, len - off) : 0;
		if (off >= len || off + k >= len)
			goto bad;
		if (i == ns_part ? check_ns(p, &e) < 0 : ej_check_id(p, "cursor", &e) < 0)
			goto bad;
		parts[i] = p;
		off += k + 1;
	}
	if (off != len)
		goto bad;
	*ret_buf = raw;
	return 0;
bad:
	free(raw);
	return memd_error_set(err, MEMD_EINVAL, 0, "cursor: not a cursor memd returned");
}

/* ---- put ---------------------------------------------------------------------- */

static const char *const put_fields[] = { "parent_checkpoint_id", "type", "checkpoint",
					  "metadata", "run_state", NULL };

/* What a put's body gives the checkpoint: the type, parent and run state
 * (strings in strs), the payload and the metadata text. */
typedef struct put_body {
	char *strs;        /* malloc'd: c's type and parent when read by put_scanned */
	void *payload;     /* malloc'd */
	size_t payload_len;
	char *meta;        /* malloc'd: jansson's compact dump */
} put_body;

static void put_body_clear(put_body *f)
{
	free(f->strs);
	free(f->payload);
	free(f->meta);
	memset(f, 0, sizeof(*f));
}

/* span's characters NUL-terminated at *at (advanced past them); NULL for
 * an absent span. */
static const char *span_copy(const cj_span *span, char **at)
{
	char *s = *at;

	if (!span->p)
		return NULL;
	memcpy(s, span->p, span->len);
	s[span->len] = '\0';
	*at = s + span->len + 1;
	return s;
}

/* A put's body read without a tree (cj_put_scan) into c and f, checked
 * as the jansson path checks it, in the same order: 1 when read so, 0
 * when the body takes the jansson path (nothing kept), or a MEMD_E*
 * code. */
static int32_t put_scanned(const char *body_json, memd_checkpoint *c, put_body *f,
			   memd_error *err)
{
	cj_put_body b;
	json_t *meta = NULL;
	char *at;
	char state[CHECKPOINT_TYPE_MAX + 1];
	int32_t r;

	if (!cj_put_scan(body_json, &b))
		return 0;
	/* Metadata jansson refuses (duplicate keys, numbers out of range...)
	 * is told as a body that is not valid JSON: the jansson path does. */
	if (b.metadata.p &&
	    !(meta = json_loadb(b.metadata.p, b.metadata.len, JSON_REJECT_DUPLICATES, NULL)))
		return 0;
	if (!(f->strs = malloc(b.type.len + b.parent_checkpoint_id.len + 2))) {
		r = service_oom(err);
		goto fail;
	}
	at = f->strs;
	c->type = span_copy(&b.type, &at);
	c->parent_id = span_copy(&b.parent_checkpoint_id, &at);
	if ((r = check_type_text(c->type, b.type.len, "type", err)) < 0 ||
	    (c->parent_id && (r = ej_check_id(c->parent_id, "parent_checkpoint_id", err)) < 0))
		goto fail;
	if (b.run_state.p) {
		/* Longer than any state's name: refused as another name. */
		size_t n = b.run_state.len < sizeof(state) ? b.run_state.len : sizeof(state) - 1;
		memcpy(state, b.run_state.p, n);
		state[n] = '\0';
		if (n < b.run_state.len)
			state[0] = '\0';
		if ((r = cj_run_state_parse(state, "run_state", &c->run_state, err)) < 0)
			goto fail;
	}
	if ((r = cj_bytes_text(b.checkpoint.p, b.checkpoint.len, "checkpoint", &f->payload,
			       &f->payload_len, err)) < 0)
		goto fail;
	if (!(f->meta = meta ? ej_dump(meta) : strdup("{}"))) {
		r = service_oom(err);
		goto fail;
	}
	json_decref(meta);
	return 1;
fail:
	json_decref(meta);
	put_body_clear(f);
	return r;
}

/* The same from the body's jansson tree (kept in *body: c's strings point
 * into it). */
static int32_t put_parsed(const char *body_json, json_t **body, memd_checkpoint *c,
			  put_body *f, memd_error *err)
{
	json_t *v;
	int32_t r;

	if ((r = service_parse_body(body_json, body, err)) < 0)
		return r;
	if ((r = service_check_fields(*body, put_fields, err)) < 0 ||
	    (r = check_type(json_object_get(*body, "type"), "type", &c->type, err)) < 0 ||
	    (r = service_opt_string_field(*body, "parent_checkpoint_id", &c->parent_id, err)) < 0 ||
	    (c->parent_id &&
	     (r = ej_check_id(c->parent_id, "parent_checkpoint_id", err)) < 0) ||
	    (r = opt_run_state(*body, &c->run_state, err)) < 0)
		return r;
	if (!(v = json_object_get(*body, "checkpoint")))
		return memd_error_set(err, MEMD_EINVAL, 0, "checkpoint: required, a base64 string");
	if ((r = cj_bytes(v, "checkpoint", &f->payload, &f->payload_len, err)) < 0)
		return r;
	v = json_object_get(*body, "metadata");
	if (v && !json_is_null(v) && !json_is_object(v))
		return memd_error_set(err, MEMD_EINVAL, 0, "metadata: must be a JSON object");
	if (!(f->meta = v && !json_is_null(v) ? ej_dump(v) : strdup("{}")))
		return service_oom(err);
	return 0;
}

/* Writes a delivered checkpoint's summary into the json_out ud (a second
 * delivery replaces the first). */
static int32_t got_summary(void *ud, const memd_checkpoint *c)
{
	json_out *jo = ud;

	jo_truncate(jo, 0);
	return cj_checkpoint_out(jo, c, 0);
}

int32_t memd_checkpoint_put(memd *m, const char *app, const char *user, const char *sid,
			    const char *ns, const char *checkpoint_id, const char *body_json,
			    char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	memd_checkpoint c = { .struct_size = sizeof(c), .run_state = MEMD_RUN_RUNNING };
	const settings_checkpoints *cfg;
	memd_checkpoint_sink sink = { sizeof(sink), NULL, got_summary, NULL, NULL };
	json_out out;
	json_t *body = NULL;
	put_body f = { 0 };
	int64_t now = service_clock_us(m);
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0 ||
	    (r = check_ns(ns, err)) < 0 ||
	    (r = ej_check_id(checkpoint_id, "checkpoint_id", err)) < 0)
		return r;
	jo_init(&out);
	/* The usual body (ids, a type, base64, a small metadata object) is
	 * read without jansson's tree of the whole body; any other, and any
	 * fault, goes the jansson way. */
	if ((r = put_scanned(body_json, &c, &f, err)) == 0)
		r = put_parsed(body_json, &body, &c, &f, err);
	if (r < 0)
		goto out;
	cfg = &settings_app_for(&m->set, app)->checkpoints;
	c.app = app;
	c.user = user;
	c.session = sid;
	c.ns = ns ? ns : "";
	c.id = checkpoint_id;
	c.payload = f.payload;
	c.payload_size = f.payload_len;
	c.metadata_json = f.meta;
	c.expires_us = cfg->timeout_s ? now + cfg->timeout_s * US_PER_SEC : 0;
	if ((r = store_checkpoint_put(m->sessions, &call, &c, 1, now, NULL, err)) < 0) {
		r = store_failed(r, err);
		goto out;
	}
	/* The answer is the stored row (its created time is the first put's). */
	sink.userdata = &out;
	r = store_checkpoint_get(m->sessions, &call, &sc, c.ns, c.id, now, &sink, err);
	if (r == 0 && out.len == 0 && !out.error)
		r = memd_error_set(err, MEMD_EINTERNAL, 0, "%s: checkpoint_get delivered nothing",
				   store_name(m->sessions));
	if (r < 0 || out.error) {
		r = out.error ? service_read_failed(m, &out, r, NULL, err) : store_failed(r, err);
		goto out;
	}
	r = jo_finish(&out, ret_json, NULL) < 0 ? service_oom(err) : 0;
out:
	jo_clear(&out);
	json_decref(body);
	put_body_clear(&f);
	return r;
}

/* ---- put writes ------------------------------------------------------------------ */

static const char *const writes_fields[] = { "task_id", "task_path", "writes", "run_state",
					     NULL };
static const char *const write_fields[] = { "idx", "channel", "type", "value", "replace",
					    NULL };

int32_t memd_checkpoint_put_writes(memd *m, const char *app, const char *user, const char *sid,
				   const char *ns, const char *checkpoint_id,
				   const char *body_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	memd_checkpoint_writes w = { .struct_size = sizeof(w) };
	memd_checkpoint_write *ws = NULL;
	const char **paths = NULL;
	void **values = NULL;
	json_t *body = NULL, *arr, *x;
	const char *task_id, *task_path;
	char what[64];
	size_t n = 0, i;
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0 ||
	    (r = check_ns(ns, err)) < 0 ||
	    (r = ej_check_id(checkpoint_id, "checkpoint_id", err)) < 0 ||
	    (r = service_parse_body(body_json, &body, err)) < 0)
		return r;
	if ((r = service_check_fields(body, writes_fields, err)) < 0 ||
	    (r = service_opt_string_field(body, "task_id", &task_id, err)) < 0 ||
	    (r = service_opt_string_field(body, "task_path", &task_path, err)) < 0 ||
	    (r = opt_run_state(body, &w.run_state, err)) < 0)
		goto out;
	/* The body's parse refuses a NUL in a string. */
	if (task_path && *task_path &&
	    (strlen(task_path) > CHECKPOINT_TASK_PATH_MAX ||
	     !ej_utf8_valid(task_path, strlen(task_path)))) {
		r = memd_error_set(err, MEMD_EINVAL, 0, "task_path: at most %d bytes of UTF-8",
				   CHECKPOINT_TASK_PATH_MAX);
		goto out;
	}
	if (!task_id) {
		r = memd_error_set(err, MEMD_EINVAL, 0, "task_id: required");
		goto out;
	}
	if ((r = ej_check_id(task_id, "task_id", err)) < 0)
		goto out;
	arr = json_object_get(body, "writes");
	if (!json_is_array(arr)) {
		r = memd_error_set(err, MEMD_EINVAL, 0, "writes: required, an array");
		goto out;
	}
	n = json_array_size(arr);
	if (n > CHECKPOINT_WRITES_MAX) {
		r = memd_error_set(err, MEMD_EINVAL, 0, "writes: at most %d", CHECKPOINT_WRITES_MAX);
		goto out;
	}
	if (!(ws = calloc(n + 1, sizeof(*ws))) || !(values = calloc(n + 1, sizeof(*values))) ||
	    !(paths = calloc(n + 1, sizeof(*paths)))) {
		r = service_oom(err);
		goto out;
	}
	json_array_foreach(arr, i, x) {
		memd_checkpoint_write *y = &ws[i];
		json_t *v;
		size_t len = 0;
		memd_error e = { 0 };
		snprintf(what, sizeof(what), "writes[%zu]", i);
		if (!json_is_object(x)) {
			r = memd_error_set(err, MEMD_EINVAL, 0, "%s: must be an object", what);
			goto out;
		}
		if ((r = service_check_fields(x, write_fields, &e)) < 0) {
			r = memd_error_set(err, r, 0, "%s: %s", what, e.msg);
			goto out;
		}
		y->struct_size = sizeof(*y);
		y->task_id = task_id;
		paths[i] = task_path;
		v = json_object_get(x, "idx");
		if (!json_is_integer(v)) {
			r = memd_error_set(err, MEMD_EINVAL, 0, "%s.idx: required, an integer", what);
			goto out;
		}
		y->idx = json_integer_value(v);
		v = json_object_get(x, "channel");
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v) ||
		    !ej_utf8_valid(json_string_value(v), json_string_length(v))) {
			r = memd_error_set(err, MEMD_EINVAL, 0, "%s.channel: required, a string",
					   what);
			goto out;
		}
		y->channel = json_string_value(v);
		snprintf(what, sizeof(what), "writes[%zu].type", i);
		if ((r = check_type(json_object_get(x, "type"), what, &y->type, err)) < 0)
			goto out;
		snprintf(what, sizeof(what), "writes[%zu].value", i);
		if (!(v = json_object_get(x, "value"))) {
			r = memd_error_set(err, MEMD_EINVAL, 0, "%s: required, a base64 string",
					   what);
			goto out;
		}
		if ((r = cj_bytes(v, what, &values[i], &len, err)) < 0)
			goto out;
		y->value = values[i];
		y->value_size = len;
		v = json_object_get(x, "replace");
		if (v && !json_is_null(v) && !json_is_boolean(v)) {
			r = memd_error_set(err, MEMD_EINVAL, 0, "writes[%zu].replace: must be a boolean",
					   i);
			goto out;
		}
		if (json_is_true(v))
			y->flags = MEMD_CKW_REPLACE;
	}
	w.ns = ns ? ns : "";
	w.checkpoint_id = checkpoint_id;
	w.writes = ws;
	w.n_writes = (uint32_t)n;
	w.task_paths = task_path && *task_path ? paths : NULL;
	w.now_us = service_clock_us(m);
	if ((r = store_checkpoint_put_writes(m->sessions, &call, &sc, &w, err)) < 0)
		r = store_failed(r, err);
out:
	for (i = 0; values && i < n; i++)
		free(values[i]);
	free(values);
	free(paths);
	free(ws);
	json_decref(body);
	return r;
}

/* ---- get ----------------------------------------------------------------------- */

/* Writes the tuple of a get: the checkpoint (a second delivery replaces
 * the first), then its writes into its open pending_writes. */
typedef struct tuple_sink {
	json_out out;
	int has;               /* a checkpoint was written */
	uint32_t n_writes;     /* writes written after it */
} tuple_sink;

static int32_t got_tuple(void *ud, const memd_checkpoint *c)
{
	tuple_sink *t = ud;

	jo_truncate(&t->out, 0);
	t->has = 1;
	t->n_writes = 0;
	return cj_checkpoint_out(&t->out, c, 1);
}

static int32_t got_write(void *ud, const memd_checkpoint_write *w, const char *task_path)
{
	tuple_sink *t = ud;

	if (!t->has)
		return 0;
	if (t->n_writes++)
		jo_lit(&t->out, ",");
	return cj_write_out(&t->out, w, task_path);
}

int32_t memd_checkpoint_get(memd *m, const char *app, const char *user, const char *sid,
			    const char *ns, const char *checkpoint_id, char **ret_json,
			    memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	tuple_sink t = { 0 };
	memd_checkpoint_sink sink = { sizeof(sink), &t, got_tuple, NULL, got_write };
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0 ||
	    (r = check_ns(ns, err)) < 0 ||
	    (checkpoint_id && (r = ej_check_id(checkpoint_id, "checkpoint_id", err)) < 0))
		return r;
	jo_init(&t.out);
	r = store_checkpoint_get(m->sessions, &call, &sc, ns ? ns : "", checkpoint_id,
				 service_clock_us(m), &sink, err);
	if (r == 0 && !t.has)
		r = memd_error_set(err, MEMD_EINTERNAL, 0, "%s: checkpoint_get delivered nothing",
				   store_name(m->sessions));
	if (r < 0 || t.out.error) {
		r = t.out.error ? service_read_failed(m, &t.out, r, NULL, err) : store_failed(r, err);
		jo_clear(&t.out);
		return r;
	}
	jo_lit(&t.out, "]}");
	if (jo_finish(&t.out, ret_json, NULL) < 0)
		return service_oom(err);
	return 0;
}

/* ---- list ---------------------------------------------------------------------- */

/* One list's state across the store pages it reads: the rows that match
 * are written as they come, the first limit of them; the one after says
 * there is a next page. */
typedef struct list_run {
	json_out out;          /* {"checkpoints":[ and the rows so far */
	json_t *filter;        /* metadata filter object; NULL = none */
	int full;
	uint32_t limit;        /* rows of the page */
	uint32_t kept;         /* rows written */
	int more;              /* a row matched after the limit-th */
	int in_row;            /* the last row written is a tuple left open
				* for its writes */
	uint32_t n_writes;     /* writes of that row */
	uint32_t seen;         /* rows of this store page */
	char *last_id;         /* the keyset of the store page's last row */
	char *last_session;
	char *last_ns;
	char *after_id;        /* the keyset the store page being read starts
				* after: the last page's last row, held for the
				* whole store call (the store may read it while
				* list_got replaces last_*) */
	char *after_session;
	char *after_ns;
	char *cursor;          /* the next page's cursor once more */
} list_run;

/* Does metadata text have every top-level member of filter, JSON-equal? */
static int metadata_matches(const json_t *filter, const char *text)
{
	json_t *meta, *v;
	const char *key;
	int ok = 1;

	if (!filter || json_object_size(filter) == 0)
		return 1;
	if (!text || !(meta = ej_load(text)))
		return 0;
	json_object_foreach((json_t *)filter, key, v) {
		json_t *have = json_object_get(meta, key);
		if (!have || !json_equal(have, v)) {
			ok = 0;
			break;
		}
	}
	json_decref(meta);
	return ok;
}

/* Close the open tuple of the last row written, if any. */
static void list_close_row(list_run *l)
{
	if (l->in_row)
		jo_lit(&l->out, "]}");
	l->in_row = 0;
}

static int32_t list_got(void *ud, const memd_checkpoint *c)
{
	list_run *l = ud;
	const char *parts[3];

	l->seen++;
	free(l->last_id);
	free(l->last_session);
	free(l->last_ns);
	l->last_id = strdup(c->id);
	l->last_session = strdup(c->session);
	l->last_ns = strdup(c->ns);
	list_close_row(l);
	if (!l->last_id || !l->last_session || !l->last_ns)
		return MEMD_ENOMEM;
	if (l->more || !metadata_matches(l->filter, c->metadata_json))
		return 0;
	if (l->kept == l->limit) {
		/* The next page starts after the last row written. */
		l->more = 1;
		return 0;
	}
	if (l->kept++)
		jo_lit(&l->out, ",");
	cj_checkpoint_out(&l->out, c, l->full);
	l->in_row = l->full;
	l->n_writes = 0;
	if (l->kept == l->limit) {
		parts[0] = c->id;
		parts[1] = c->session;
		parts[2] = c->ns ? c->ns : "";
		if (!(l->cursor = cursor_encode(CURSOR_LIST, parts, 3)))
			return MEMD_ENOMEM;
	}
	return l->out.error;
}

/* A write of the row written last (none: of a row not kept, skipped). */
static int32_t list_got_write(void *ud, const memd_checkpoint_write *w, const char *task_path)
{
	list_run *l = ud;

	if (!l->in_row)
		return 0;
	if (l->n_writes++)
		jo_lit(&l->out, ",");
	return cj_write_out(&l->out, w, task_path);
}

static void list_run_clear(list_run *l)
{
	jo_clear(&l->out);
	json_decref(l->filter);
	free(l->last_id);
	free(l->last_session);
	free(l->last_ns);
	free(l->after_id);
	free(l->after_session);
	free(l->after_ns);
	free(l->cursor);
	memset(l, 0, sizeof(*l));
}

/* The next store page starts after this one's last row: q's keyset takes
 * over l's last_* (l's after_* owns it until the page after). */
static void list_next_page(list_run *l, memd_checkpoint_query *q)
{
	free(l->after_id);
	free(l->after_session);
	free(l->after_ns);
	q->before_id = l->after_id = l->last_id;
	q->before_session = l->after_session = l->last_session;
	q->before_ns = l->after_ns = l->last_ns;
	l->last_id = l->last_session = l->last_ns = NULL;
}

int32_t memd_checkpoint_list(memd *m, const char *app, const char *user,
			     const memd_checkpoint_list_options *opts, char **ret_json,
			     memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	memd_checkpoint_list_options lo = { 0 };
	memd_checkpoint_query q = { .struct_size = sizeof(q) };
	memd_checkpoint_sink sink = { sizeof(sink), NULL, list_got, NULL, NULL };
	list_run l = { 0 };
	const char *keys[3];
	char *cbuf = NULL;
	uint32_t limit = 0;
	int32_t r;

	if ((r = service_check_scope(app, user, NULL, &sc, err)) < 0)
		return r;
	if (opts)
		memcpy(&lo, opts, opts->struct_size < sizeof(lo) ? opts->struct_size : sizeof(lo));
	if ((r = check_limit(lo.limit, &limit, err)) < 0 ||
	    (lo.session_id && (r = ej_check_id(lo.session_id, "session_id", err)) < 0) ||
	    (r = check_ns(lo.ns, err)) < 0 ||
	    (lo.before && (r = ej_check_id(lo.before, "before", err)) < 0))
		return r;
	if (lo.metadata_json) {
		l.filter = ej_load(lo.metadata_json);
		if (!l.filter || !json_is_object(l.filter)) {
			list_run_clear(&l);
			return memd_error_set(err, MEMD_EINVAL, 0, "metadata: must be a JSON object");
		}
	}
	if (lo.cursor && *lo.cursor) {
		if ((r = cursor_decode(CURSOR_LIST, lo.cursor, keys, 3, 2, &cbuf, err)) < 0)
			goto out;
		q.before_id = keys[0];
		q.before_session = keys[1];
		q.before_ns = keys[2];
		/* Every id below before is also before a cursor at or above it. */
		if (lo.before && strcmp(keys[0], lo.before) >= 0) {
			q.before_id = lo.before;
			q.before_session = q.before_ns = NULL;
		}
	} else {
		q.before_id = lo.before;
	}
	l.full = lo.full != 0;
	l.limit = limit;
	jo_init(&l.out);
	jo_lit(&l.out, "{\"checkpoints\":[");
	q.session = lo.session_id;
	q.ns = lo.ns;
	q.now_us = service_clock_us(m);
	/* Unfiltered, one page of limit + 1 rows answers; filtered, pages of
	 * CHECKPOINT_SCAN_PAGE until limit + 1 rows matched or the store has
	 * no more. */
	q.limit = l.filter ? CHECKPOINT_SCAN_PAGE : limit + 1;
	sink.userdata = &l;
	sink.task_write = l.full ? list_got_write : NULL;
	for (;;) {
		l.seen = 0;
		r = store_checkpoint_list(m->sessions, &call, &sc, &q, &sink, err);
		list_close_row(&l);
		if (r < 0 || l.out.error) {
			r = l.out.error ? service_read_failed(m, &l.out, r, NULL, err)
					: store_failed(r, err);
			goto out;
		}
		if (l.more || l.seen < q.limit)
			break;
		list_next_page(&l, &q);
	}
	jo_lit(&l.out, "],\"next_cursor\":");
	if (l.more)
		jo_string(&l.out, l.cursor);
	else
		jo_lit(&l.out, "null");
	jo_lit(&l.out, "}");
	if (jo_finish(&l.out, ret_json, NULL) < 0)
		r = service_oom(err);
out:
	list_run_clear(&l);
	free(cbuf);
	return r;
}

/* ---- delete -------------------------------------------------------------------- */

int32_t memd_checkpoint_delete(memd *m, const char *app, const char *user, const char *sid,
			       const char *ns, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0 ||
	    (r = check_ns(ns, err)) < 0)
		return r;
	r = store_checkpoint_delete(m->sessions, &call, &sc, ns, NULL, err);
	return r < 0 ? store_failed(r, err) : 0;
}

/* ---- resumable ----------------------------------------------------------------- */

/* What a run in run_state is resumed by under cfg: "automatic" or
 * "approval"; NULL for a run that is not resumed (done). */
static const char *resume_of(const settings_checkpoints *cfg, uint32_t run_state)
{
	switch (run_state) {
	case MEMD_RUN_RUNNING:
		return cfg->auto_resume ? RESUME_AUTOMATIC : RESUME_APPROVAL;
	case MEMD_RUN_INTERRUPTED:
		return cfg->auto_resume_hitl ? RESUME_AUTOMATIC : RESUME_APPROVAL;
	default:
		return NULL;
	}
}

typedef struct resume_run {
	const settings_checkpoints *cfg;
	json_t *rows;
} resume_run;

static json_t *time_or_null(int64_t us)
{
	char buf[EJ_TIME_LEN];

	if (!us)
		return json_null();
	ej_format_time(us, buf);
	return json_string(buf);
}

static int32_t resume_got(void *ud, const memd_checkpoint *c)
{
	resume_run *rr = ud;
	const char *resume = resume_of(rr->cfg, c->run_state);
	json_t *meta = c->metadata_json ? ej_load(c->metadata_json) : NULL, *o;

	if (!meta || !json_is_object(meta)) {
		json_decref(meta);
		meta = json_object();
	}
	o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:o,s:o,s:o}", "user", c->user, "session_id",
		      c->session, "checkpoint_id", c->id, "run_state",
		      cj_run_state_name(c->run_state) ? cj_run_state_name(c->run_state) : "running",
		      "resume", resume ? resume : RESUME_APPROVAL, "metadata", meta, "updated",
		      time_or_null(c->updated_us), "expires_at", time_or_null(c->expires_us));
	return o && json_array_append_new(rr->rows, o) == 0 ? 0 : MEMD_ENOMEM;
}

int32_t memd_checkpoint_resumable(memd *m, const char *app,
				  const memd_checkpoint_resumable_options *opts, char **ret_json,
				  memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_checkpoint_resumable_options lo = { 0 };
	memd_resumable_query q = { .struct_size = sizeof(q) };
	resume_run rr = { 0 };
	memd_checkpoint_sink sink = { sizeof(sink), &rr, resume_got, NULL, NULL };
	const char *keys[2];
	char *cbuf = NULL, *next = NULL;
	uint32_t limit = 0;
	int32_t r;

	if ((r = ej_check_id(app, "app", err)) < 0)
		return r;
	if (opts)
		memcpy(&lo, opts, opts->struct_size < sizeof(lo) ? opts->struct_size : sizeof(lo));
	if ((r = check_limit(lo.limit, &limit, err)) < 0)
		return r;
	if (lo.resume && strcmp(lo.resume, RESUME_AUTOMATIC) != 0 &&
	    strcmp(lo.resume, RESUME_APPROVAL) != 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "resume: must be automatic or approval");
	rr.cfg = &settings_app_for(&m->set, app)->checkpoints;
	for (uint32_t s = MEMD_RUN_RUNNING; s <= MEMD_RUN_DONE; s++) {
		const char *resume = resume_of(rr.cfg, s);
		if (resume && (!lo.resume || strcmp(resume, lo.resume) == 0))
			q.run_states |= 1u << s;
	}
	if (lo.cursor && *lo.cursor) {
		if ((r = cursor_decode(CURSOR_RESUME, lo.cursor, keys, 2, (size_t)-1, &cbuf, err)) <
		    0)
			return r;
		q.after_user = keys[0];
		q.after_session = keys[1];
	}
	if (!(rr.rows = json_array())) {
		r = service_oom(err);
		goto out;
	}
	q.app = app;
	q.limit = limit + 1;
	q.now_us = service_clock_us(m);
	if (q.run_states &&
	    (r = store_checkpoint_resumable(m->sessions, &call, &q, &sink, err)) < 0) {
		r = store_failed(r, err);
		goto out;
	}
	if (json_array_size(rr.rows) > limit) {
		json_t *last = json_array_get(rr.rows, limit - 1);
		const char *parts[2] = { json_string_value(json_object_get(last, "user")),
					 json_string_value(json_object_get(last, "session_id")) };
		json_array_remove(rr.rows, limit);
		if (!(next = cursor_encode(CURSOR_RESUME, parts, 2))) {
			r = service_oom(err);
			goto out;
		}
	}
	r = service_finish(json_pack("{s:O,s:s?}", "sessions", rr.rows, "next_cursor", next),
			   ret_json, err);
out:
	json_decref(rr.rows);
	free(cbuf);
	free(next);
	return r;
}

/* ---- the expiry sweep ---------------------------------------------------------- */

/* Delete expired checkpoints with call, a batch at a time, until a batch
 * comes back short; the count into *ret_count (also on failure: what
 * went before it). */
static int32_t sweep_pass(memd *m, const memd_call *call, uint32_t *ret_count, memd_error *err)
{
	int64_t now = service_clock_us(m);
	uint32_t n;
	int32_t r;

	*ret_count = 0;
	do {
		n = 0;
		if ((r = store_checkpoint_expire(m->sessions, call, now, CHECKPOINT_EXPIRE_BATCH, &n,
						 err)) < 0)
			return store_failed(r, err);
		*ret_count += n;
	} while (n == CHECKPOINT_EXPIRE_BATCH && !(call->cancel && *call->cancel));
	return 0;
}

int32_t memd_checkpoints_sweep(memd *m, char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	uint32_t n = 0;
	int32_t r;

	if (m->ckpt_sweep)
		pthread_mutex_lock(&m->ckpt_sweep->th.pass);
	r = sweep_pass(m, &call, &n, err);
	if (m->ckpt_sweep)
		pthread_mutex_unlock(&m->ckpt_sweep->th.pass);
	if (r < 0)
		return r;
	return service_finish(json_pack("{s:I}", "checkpoints_expired", (json_int_t)n), ret_json,
			      err);
}

static void *sweep_main(void *arg)
{
	memd *m = arg;
	checkpoint_sweep *w = m->ckpt_sweep;
	memd_call call = { .struct_size = sizeof(call), .cancel = &w->th.cancel };
	int64_t interval = m->set.checkpoints_sweep_interval_s;
	struct timespec at;

	pthread_mutex_lock(&w->th.lock);
	while (!w->th.stopping) {
		clock_gettime(CLOCK_MONOTONIC, &at);
		at.tv_sec += (time_t)interval;
		while (!w->th.stopping &&
		       pthread_cond_timedwait(&w->th.wake, &w->th.lock, &at) == 0)
			;
		if (w->th.stopping)
			break;
		pthread_mutex_unlock(&w->th.lock);
		{
			memd_error err = { 0 };
			uint32_t n = 0;
			pthread_mutex_lock(&w->th.pass);
			if (sweep_pass(m, &call, &n, &err) < 0 && err.code != MEMD_ECANCELED &&
			    err.code != MEMD_ENOTSUP)
				hostsvc_log(m->svc, MEMD_LOG_WARN, "memd", "checkpoint sweep: %s",
					    err.msg);
			pthread_mutex_unlock(&w->th.pass);
		}
		pthread_mutex_lock(&w->th.lock);
	}
	pthread_mutex_unlock(&w->th.lock);
	return NULL;
}

int32_t service_checkpoints_start(memd *m, memd_error *err)
{
	checkpoint_sweep *w;

	/* Only a store of ABI 1.5 or later may have checkpoints to sweep. */
	if (m->set.checkpoints_sweep_interval_s <= 0 || store_minor(m->sessions) < 5)
		return 0;
	if (!(w = calloc(1, sizeof(*w))))
		return service_oom(err);
	service_thread_init(&w->th);
	m->ckpt_sweep = w;
	return service_thread_start(&w->th, sweep_main, m, "checkpoint sweep", err);
}

void service_checkpoints_free(memd *m)
{
	checkpoint_sweep *w = m->ckpt_sweep;

	if (!w)
		return;
	service_thread_stop(&w->th);
	service_thread_destroy(&w->th);
	free(w);
	m->ckpt_sweep = NULL;
}
