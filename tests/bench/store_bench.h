/* SPDX-License-Identifier: MIT */
/*
 * store_bench: the benchmark of a server-backed store plugin against its
 * raw client library (store_bench.c: the plugin side, the runs, the
 * figures), and what each store supplies: its raw side, running exactly
 * the plugin's statements (pg_bench.c over libpq, mysql_bench.c over
 * libmariadb). Each store's part is linked with store_bench.c into the
 * store's bench executable.
 */
#ifndef MEMD_TESTS_STORE_BENCH_H
#define MEMD_TESTS_STORE_BENCH_H

#include <stddef.h>

/* What every append and read of both sides uses. */
#define BENCH_APP "bench"
#define BENCH_USER "u"
#define BENCH_T0 1700000000000000LL
#define BENCH_EVENT_TEXT "hello from the store bench"
#define BENCH_EVENT_CONTENT "{\"parts\":[{\"type\":\"text\",\"text\":\"" BENCH_EVENT_TEXT "\"}]}"
#define BENCH_EVENT_TOKENS 6
#define BENCH_MAX_BATCH 32     /* events per append at most */
#define BENCH_ID_LEN 64        /* ids, session names, the namespace name */
#define BENCH_CONTEXT_LIMIT 20 /* events a context read returns */

/* One raw connection of the store's client library (the store's own). */
typedef struct raw_conn raw_conn;

/* The store's part. Every function exits the bench (bench_die) on
 * failure. */
typedef struct bench_store {
	const char *prog;        /* "pg_bench": messages and usage */
	const char *plugin;      /* the plugin's name, e.g. "postgres" */
	const char *title;       /* first line of the report, e.g. "PostgreSQL store vs raw
				  * libpq, same statements" */
	const char *ns_prefix;   /* the bench's own schema or database: <ns_prefix><pid> */
	const char *env_var;     /* set when the test server runs, e.g. "MEMD_PG_DSN" */
	/* The plugin's config, a YAML map: yaml_head is its start (the
	 * plugin and the server, no closing brace), to which the bench adds
	 * "<ns_key>: <ns>" (the namespace, which the plugin creates), the
	 * pool and group_commit. */
	const char *yaml_head;
	const char *ns_key;      /* "schema", "database" */
	/* Connect to namespace ns and prepare the plugin's statements. */
	raw_conn *(*raw_open)(const char *ns);
	void (*raw_close)(raw_conn *c);
	/* The plugin's append of batch events ("<prefix>-<k>-<j>", j < batch)
	 * to session (existing; BENCH_APP, BENCH_USER), statement for
	 * statement, in one transaction. */
	void (*raw_append)(raw_conn *c, const char *session, const char *prefix, long k,
			   int batch);
	/* The plugin's context read: the newest BENCH_CONTEXT_LIMIT events of
	 * session (dies unless exactly that many come back). */
	void (*raw_context)(raw_conn *c, const char *session);
	/* Drop namespace ns, or NULL to leave it. */
	void (*drop)(const char *ns);
} bench_store;

/* The store's part, defined by the store's source (store_bench.c's main
 * runs the bench for it). */
extern const bench_store bench_the_store;

/* Print "<prog>: what: msg" to stderr and exit 1. */
void bench_die(const char *what, const char *msg) __attribute__((noreturn));

#endif
