/* SPDX-License-Identifier: MIT */
/*
 * stress_util: what the multi-process, outage and feed-order tests of the
 * server-backed stores share. A store instance is opened exactly as the
 * host opens one (host/plugins/loader.h), from a config template; nothing here
 * uses Criterion, so forked children can use it too (a failure prints and
 * returns an error instead of asserting).
 *
 * Environment (set by tests/multiproc/meson.build per backend):
 *   MEMD_STRESS_PLUGIN          plugin name (postgres, mysql)
 *   MEMD_STRESS_CONFIG          YAML map for the instance; "@NAME@" becomes
 *                               a name unique to the test run (a schema or
 *                               database of its own); ${VAR}s expand
 *   MEMD_STRESS_SERVICE         tests/services script (postgres, mariadb)
 *                               the outage test starts a private server with
 *   MEMD_PLUGIN_PATH, MEMD_SOURCE_ROOT  as every test gets them
 */
#ifndef MEMD_TESTS_STRESS_UTIL_H
#define MEMD_TESTS_STRESS_UTIL_H

#include <stdio.h>
#include <sys/types.h>

#include <memd/plugin.h>

#include "config/config.h"
#include "plugins/loader.h"

typedef struct stress_store {
	loader_plugin *plugin;
	loader_instance *inst;
	config_node *cfg;
	const memd_store_ops *ops;
	void *h;
} stress_store;

/* A fresh name for one test run ("memd_stress_<pid>_<n>"), malloc'd. */
char *stress_unique_name(const char *what);
/* Open an instance of $MEMD_STRESS_PLUGIN with $MEMD_STRESS_CONFIG (or
 * template when not NULL), "@NAME@" replaced by name and extra_yaml (may
 * be NULL; e.g. "group_commit: 1") merged into the map. Returns NULL and
 * writes err on failure. */
stress_store *stress_open(const char *template_text, const char *name, const char *extra_yaml,
			  memd_error *err);
/* Destroy the instance and unload. Accepts NULL. */
void stress_close(stress_store *s);

/* A call context with no deadline. */
memd_call stress_call(void);
memd_scope stress_scope(const char *app, const char *user, const char *session);

/* Fill ev as a "user" event with text content (strings borrowed). */
void stress_event(memd_event *ev, const char *id, const char *text, int64_t ts_us);

/* Create the session; an existing one is fine. */
int32_t stress_session_ensure(stress_store *s, const memd_scope *sc, memd_error *err);
/* The session's version, last_seq. */
int32_t stress_session_head(stress_store *s, const memd_scope *sc, int64_t *ret_version,
			    int64_t *ret_last_seq, memd_error *err);

/* One loaded event (owned copies of what the tests check). */
typedef struct stress_ev {
	char *id;
	int64_t seq;
	int64_t position;
} stress_ev;
typedef struct stress_evs {
	stress_ev *v;
	size_t n, cap;
} stress_evs;
/* Every event of the session, in seq order. */
int32_t stress_events_all(stress_store *s, const memd_scope *sc, stress_evs *out,
			  memd_error *err);
void stress_evs_clear(stress_evs *l);

/* A feed record as an indexer keeps it. */
typedef struct stress_rec {
	int64_t position;
	uint32_t kind;
	char *session;
	char *id;       /* kind EVENT */
} stress_rec;
typedef struct stress_recs {
	stress_rec *v;
	size_t n, cap;
} stress_recs;
/* Append feed_read(after, limit) records to out; *ret_n gets how many. */
int32_t stress_feed_read(stress_store *s, int64_t after, uint32_t limit, stress_recs *out,
			 size_t *ret_n, memd_error *err);
void stress_recs_clear(stress_recs *l);

/* Run $MEMD_SOURCE_ROOT/tests/services/<service>.sh verb dir; returns its
 * exit status (-1 if it could not run). */
int stress_service(const char *service, const char *verb, const char *dir);
/* setenv every "export K=V" / "export K='V'" line of file. */
int stress_load_env(const char *file);

/* Child processes that race in rounds. Child p starts a round on a byte
 * from its go pipe and writes a byte to the pipe all share when it is
 * done; it writes its results to <dir>/codes.<p>. */
#define STRESS_CREW_MAX 8
#define STRESS_PATH_MAX 96
typedef struct stress_crew {
	int n;
	pid_t pids[STRESS_CREW_MAX];
	int go[STRESS_CREW_MAX];     /* the parent's write ends */
	int ready;                   /* the parent's read end */
	char dir[STRESS_PATH_MAX];
} stress_crew;
/* One child's body: its rounds, reading go_fd and writing ready_fd, its
 * results in out_path; returns its exit status. */
typedef int (*stress_child_fn)(void *arg, int p, int go_fd, int ready_fd, const char *out_path);
/* Fork n (at most STRESS_CREW_MAX) children, each running fn(arg, p, ...)
 * then _exit with what it returns. The caller must hold no threads (a
 * child could inherit a held lock). 0, or -1 when a pipe or fork failed. */
int stress_crew_start(stress_crew *c, int n, const char *dir, stress_child_fn fn, void *arg);
/* Start a round: a byte to each child. 0, or -1 when a write failed. */
int stress_crew_go(stress_crew *c);
/* Wait for every child's byte of a round. 0, or -1 when one died. */
int stress_crew_wait(stress_crew *c);
/* Close child p's go pipe, wait for it and, when it exited with 0, open
 * its results (unlinked: gone once closed). NULL (and a message on
 * stderr) when it failed or its results cannot be read. */
FILE *stress_crew_reap(stress_crew *c, int p);
/* Close the shared pipe. */
void stress_crew_close(stress_crew *c);

/* Monotonic time in microseconds. */
int64_t stress_now_us(void);
void stress_sleep_ms(int ms);

#endif
