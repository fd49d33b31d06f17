/* SPDX-License-Identifier: MIT */
#include "index_util.h"

#include <criterion/criterion.h>
#include <ctype.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define IX_ENV_STORE "MEMD_INDEX_VECTOR_STORE"
#define IX_DEFAULT_STORE "{plugin: filevec, path: \"@TMPDIR@/vec\"}"
#define IX_NFTW_FDS 16
#define IX_BODY_MAX 8192

void ix_env_make(ix_env *e)
{
	const char *tmp = getenv("TMPDIR");
	const char *base;

	memset(e, 0, sizeof(*e));
	snprintf(e->dir, sizeof(e->dir), "%s/memd-index-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	cr_assert_not_null(mkdtemp(e->dir), "mkdtemp failed");
	base = strrchr(e->dir, '/') + 1;
	snprintf(e->testid, sizeof(e->testid), "memdix_%s_%ld", base, (long)getpid());
	for (char *c = e->testid; *c; c++)
		*c = (char)(isalnum((unsigned char)*c) ? tolower((unsigned char)*c) : '_');
	cr_assert_lt((size_t)snprintf(e->config_path, sizeof(e->config_path), "%s/memd.yaml", e->dir),
		     sizeof(e->config_path), "path too long");
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

void ix_env_remove(ix_env *e)
{
	if (e->dir[0])
		nftw(e->dir, rm_one, IX_NFTW_FDS, FTW_DEPTH | FTW_PHYS);
	e->dir[0] = '\0';
}

/* tmpl with @TMPDIR@ and @TESTID@ replaced, into out. */
static void expand(const ix_env *e, const char *tmpl, char *out, size_t cap)
{
	size_t n = 0;
	for (const char *p = tmpl; *p;) {
		const char *rep = NULL;
		size_t skip = 0;
		if (strncmp(p, "@TMPDIR@", 8) == 0) {
			rep = e->dir;
			skip = 8;
		} else if (strncmp(p, "@TESTID@", 8) == 0) {
			rep = e->testid;
			skip = 8;
		}
		if (rep) {
			size_t l = strlen(rep);
			cr_assert_lt(n + l, cap);
			memcpy(out + n, rep, l);
			n += l;
			p += skip;
		} else {
			cr_assert_lt(n + 1, cap);
			out[n++] = *p++;
		}
	}
	out[n] = '\0';
}

void ix_write_config(ix_env *e, int indexes, const char *extra)
{
	const char *tmpl = getenv(IX_ENV_STORE);
	char store[IX_CONFIG_MAX];
	FILE *f;

	expand(e, tmpl && *tmpl ? tmpl : IX_DEFAULT_STORE, store, sizeof(store));
	f = fopen(e->config_path, "w");
	cr_assert_not_null(f);
	/* Without vector search the vector store is left out: an embedded
	 * one belongs to a single process. */
	fprintf(f,
		"stores:\n"
		"  main: {plugin: sqlite, path: \"%s/memd.db\"}\n"
		"%s%s%s"
		"index:\n"
		"  keyword: {enabled: %s}\n"
		"  vector: {enabled: %s, store: vec, embedder: {type: hash, dim: %d}}\n"
		"%s",
		e->dir, indexes & IX_VECTOR ? "  vec: " : "", indexes & IX_VECTOR ? store : "",
		indexes & IX_VECTOR ? "\n" : "", indexes & IX_KEYWORD ? "true" : "false",
		indexes & IX_VECTOR ? "true" : "false", IX_DIM, extra ? extra : "");
	cr_assert_eq(fclose(f), 0);
}

int32_t ix_try_open(const ix_env *e, memd **ret, memd_error *err)
{
	memd_options o = { .struct_size = sizeof(o), .config_path = e->config_path };
	return memd_open(&o, ret, err);
}

memd *ix_open(const ix_env *e)
{
	memd_error err = { 0 };
	memd *m = NULL;
	cr_assert_eq(ix_try_open(e, &m, &err), 0, "memd_open: %s", err.msg);
	return m;
}

void ix_session(memd *m, const char *app, const char *user, const char *sid)
{
	char body[IX_PATH_MAX], *out = NULL;
	memd_error err = { 0 };
	int32_t r;

	snprintf(body, sizeof(body), "{\"id\":\"%s\"}", sid);
	r = memd_session_create(m, app, user, body, &out, &err);
	cr_assert(r == 0 || r == MEMD_ECONFLICT, "session create: %s", err.msg);
	memd_free(out);
}

char *ix_append(memd *m, const char *app, const char *user, const char *sid, const char *text,
		const char *author, int64_t ts_us)
{
	static unsigned counter;
	json_t *ev = json_pack("{s:s,s:s}", "role", "user", "content", text), *body;
	char *btxt, *out = NULL, id[64];
	memd_error err = { 0 };
	int32_t r;

	snprintf(id, sizeof(id), "e%ld-%u", (long)getpid(), counter++);
	json_object_set_new(ev, "id", json_string(id));
	if (author)
		json_object_set_new(ev, "author", json_string(author));
	if (ts_us) {
		char ts[64];
		time_t secs = (time_t)(ts_us / 1000000);
		struct tm tm;
		gmtime_r(&secs, &tm);
		snprintf(ts, sizeof(ts), "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm.tm_year + 1900,
			 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
			 (int)(ts_us % 1000000));
		json_object_set_new(ev, "timestamp", json_string(ts));
	}
	ix_session(m, app, user, sid);
	body = json_pack("{s:[o]}", "events", ev);
	btxt = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	r = memd_events_append(m, app, user, sid, btxt, &out, &err);
	free(btxt);
	cr_assert_eq(r, 0, "append: %s", err.msg);
	memd_free(out);
	return strdup(id);
}

json_t *ix_search(memd *m, const char *app, const char *user, const char *fmt, ...)
{
	char body[IX_BODY_MAX], *out = NULL;
	memd_error err = { 0 };
	va_list ap;
	json_t *res;

	va_start(ap, fmt);
	vsnprintf(body, sizeof(body), fmt, ap);
	va_end(ap);
	cr_assert_eq(memd_search(m, app, user, body, &out, &err), 0, "search %s: %s", body, err.msg);
	res = json_loads(out, 0, NULL);
	cr_assert_not_null(res, "not JSON: %s", out);
	memd_free(out);
	return res;
}

int32_t ix_search_fails(memd *m, const char *app, const char *user, const char *body,
			memd_error *err)
{
	char *out = NULL;
	int32_t r = memd_search(m, app, user, body, &out, err);
	cr_assert_lt(r, 0, "search %s should fail, got %s", body, out ? out : "");
	cr_assert_null(out, "no result on failure");
	return r;
}

json_t *ix_results(json_t *res)
{
	json_t *r = json_object_get(res, "results");
	cr_assert(json_is_array(r));
	return r;
}

size_t ix_count_id(json_t *res, const char *id)
{
	size_t i, n = 0;
	json_t *hit;
	json_array_foreach(ix_results(res), i, hit) {
		const char *eid = json_string_value(json_object_get(hit, "event_id"));
		n += eid && strcmp(eid, id) == 0; /* memories have none */
	}
	return n;
}

void ix_keyword_log(void *ud, int32_t level, const char *component, const char *line)
{
	ix_logbuf *lb = ud;
	(void)level;
	if (strcmp(component, "index.keyword") != 0)
		return;
	pthread_mutex_lock(&lb->mu);
	lb->n += (size_t)snprintf(lb->text + lb->n, sizeof(lb->text) - lb->n, "%s\n", line);
	if (lb->n >= sizeof(lb->text))
		lb->n = sizeof(lb->text) - 1;
	pthread_mutex_unlock(&lb->mu);
}
