/* SPDX-License-Identifier: MIT */
/*
 * group_commit: the group-commit tests of the server-backed stores
 * (group_commit.c), and what each store supplies to them: one of
 * pg_group_commit.c and mysql_group_commit.c is linked with
 * group_commit.c and stress_util.c into the store's test executable and
 * defines gc_store_part.
 */
#ifndef MEMD_TESTS_GROUP_COMMIT_H
#define MEMD_TESTS_GROUP_COMMIT_H

#include <pthread.h>
#include <stdint.h>

#include <memd/plugin.h>

#define GC_LOG_MAX 64      /* log lines kept (the last ones) */
#define GC_LINE_MAX 512

/* The log lines of one store instance, "component: line", the last
 * GC_LOG_MAX of them (lines[(first + i) % GC_LOG_MAX] for i < n). */
typedef struct gc_log {
	pthread_mutex_t lock;
	char lines[GC_LOG_MAX][GC_LINE_MAX];
	int first, n;
} gc_log;

/* The transactions that wrote appends: how many, the appends they wrote
 * and the most appends one of them wrote. */
typedef struct gc_stats {
	uint64_t appends;
	uint64_t txns;
	uint32_t most;
} gc_stats;

/* A foreign transaction holding a session row lock. */
typedef struct gc_lock gc_lock;

/* The store's part. name is the test's namespace (the "@NAME@" of
 * $MEMD_GROUP_CONFIG: a schema or a database of its own). Connections
 * use the test server's variables; every failure fails the test
 * (Criterion assertion). */
typedef struct gc_store_part {
	const char *plugin;  /* the plugin to load */
	/* Start counting the transactions that write events in name (an
	 * instance has opened name, so its tables exist; none of the events
	 * written so far are counted). NULL when the store counts them
	 * itself (count reads its log). */
	void (*count_begin)(const char *name);
	/* The transactions that wrote events in name since count_begin, read
	 * after the counting instance closed; log is that instance's log. */
	void (*count)(const char *name, gc_log *log, gc_stats *ret);
	/* Lock the row of session sc (it exists) in a transaction of a
	 * connection of its own, so that writers of the session wait. */
	gc_lock *(*lock_session)(const char *name, const memd_scope *sc);
	/* 1 when a statement of another connection waits for the lock (the
	 * server shows it), else 0. */
	int (*lock_waited)(gc_lock *l);
	/* Roll the lock's transaction back and close it. Accepts NULL. */
	void (*unlock)(gc_lock *l);
} gc_store_part;

extern const gc_store_part gc_store;

#endif
