/* SPDX-License-Identifier: MIT */
/*
 * index_util: helpers for the search tests: a temp dir, a config with the
 * sqlite session store and the vector store under test, appends and
 * searches through the facade.
 *
 * The vector store's config comes from $MEMD_INDEX_VECTOR_STORE, a YAML
 * flow mapping in which "@TMPDIR@" is the test's directory and
 * "@TESTID@" a token unique to the test (for servers' collection names);
 * default: filevec in @TMPDIR@/vec.
 */
#ifndef MEMD_TEST_INDEX_UTIL_H
#define MEMD_TEST_INDEX_UTIL_H

#include <jansson.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <memd/memd.h>

#define IX_PATH_MAX 512
#define IX_CONFIG_MAX 4096
#define IX_DIM 128

#define IX_KEYWORD 0x1
#define IX_VECTOR  0x2

typedef struct ix_env {
	char dir[IX_PATH_MAX];
	char testid[64];
	char config_path[IX_PATH_MAX];
} ix_env;

/* A fresh directory and test id; aborts the test on failure. */
void ix_env_make(ix_env *e);
/* Remove the directory. */
void ix_env_remove(ix_env *e);
/* Write the config (indexes: IX_* bits; extra: more YAML appended, may be
 * NULL) to e->config_path. */
void ix_write_config(ix_env *e, int indexes, const char *extra);
/* memd_open on e->config_path; asserts success. */
memd *ix_open(const ix_env *e);
/* memd_open; returns the code and fills err. */
int32_t ix_try_open(const ix_env *e, memd **ret, memd_error *err);

/* Create the session if it does not exist. */
void ix_session(memd *m, const char *app, const char *user, const char *sid);
/* Append one event (role user) with text, author (NULL = role) and
 * timestamp (0 = now, else unix us); returns its event id (malloc'd). */
char *ix_append(memd *m, const char *app, const char *user, const char *sid, const char *text,
		const char *author, int64_t ts_us);
/* memd_search with a printf-formatted body; asserts success; the parsed
 * result. */
json_t *ix_search(memd *m, const char *app, const char *user, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* memd_search expected to fail: the code. */
int32_t ix_search_fails(memd *m, const char *app, const char *user, const char *body,
			memd_error *err);
/* The results array of a search result (borrowed). */
json_t *ix_results(json_t *res);
/* How many results have event_id id (memories have none). */
size_t ix_count_id(json_t *res, const char *id);

/* The keyword index's log lines of one memd, one a line, as many as fit
 * (IX_LOG_MAX - 1 characters; later ones are cut). Initialize mu with
 * PTHREAD_MUTEX_INITIALIZER and hold it while reading text. */
#define IX_LOG_MAX 8192
typedef struct ix_logbuf {
	pthread_mutex_t mu;
	char text[IX_LOG_MAX];
	size_t n;
} ix_logbuf;
/* A memd log callback (memd_options.log) that keeps the lines of the
 * component "index.keyword" in ud, an ix_logbuf, and drops the rest. */
void ix_keyword_log(void *ud, int32_t level, const char *component, const char *line);

#endif
