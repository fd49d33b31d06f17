/* SPDX-License-Identifier: MIT */
/*
 * Two expiry sweeps of one session at once (two memd processes over one
 * PostgreSQL each run one): the store's checkpoint_expire deletes the
 * session's head while another transaction, a connection of the test's
 * own standing in for the other process's sweep, is deleting the root
 * checkpoint just below it and has not committed yet. The head must pass
 * to the greatest root checkpoint that stays (the one below both), not
 * to the one the other sweep removes (a head that names a deleted
 * checkpoint drops the session from the resumable listing), and the
 * store's sweep must not wait for the other.
 *
 * And a delete of a session's checkpoints racing another process's put
 * of a root checkpoint, which has written the checkpoint and moved the
 * head and not committed yet: the store's delete waits for it (the test
 * sees it waiting on the server before it commits the put) and must not
 * leave the put's checkpoint without a head (then the session would be
 * missing from the resumable listing while it has checkpoints): either
 * both went or both stay.
 */
#include <criterion/criterion.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stress_util.h"

#define APP "sweep"
#define USER "u"
#define SESSION "thread"
#define N_ROOT 10                    /* root checkpoints 1..N_ROOT */
#define T0 1700000000000000LL        /* a plausible unix time in us */
#define EXPIRES (T0 + 10)            /* the head's expiry */
#define NOW (T0 + 20)                /* the sweep's clock: the head expired */
#define ID_LEN 16
#define WAIT_POLL_MS 1               /* between looks at the server's lock waits */
#define WAIT_MAX_MS 20000            /* the delete must be seen waiting by then */

static void checkpoint_id(char *buf, size_t cap, int n)
{
	snprintf(buf, cap, "%08d", n);
}

/* A connection to the test server with search_path the schema name. */
static PGconn *connect_schema(const char *name)
{
	const char *keys[] = { "dbname", "password", NULL };
	const char *vals[] = { getenv("MEMD_PG_DSN"), getenv("MEMD_PG_PASSWORD"), NULL };
	const char *p[1] = { name };
	PGconn *c;
	PGresult *r;

	cr_assert(vals[0], "MEMD_PG_DSN is not set: run under tests/services/with-services.sh");
	c = PQconnectdbParams(keys, vals, 1);
	cr_assert_eq(PQstatus(c), CONNECTION_OK, "connect: %s", PQerrorMessage(c));
	r = PQexecParams(c, "SELECT pg_catalog.set_config('search_path',"
			    " pg_catalog.quote_ident($1::text), false)", 1, NULL, p, NULL, NULL, 0);
	cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s", PQerrorMessage(c));
	PQclear(r);
	return c;
}

/* Run sql (one parameter: the checkpoint id, or none) and expect n rows
 * changed. */
static void exec_rows(PGconn *c, const char *sql, const char *id, const char *n)
{
	const char *p[1] = { id };
	PGresult *r = PQexecParams(c, sql, id ? 1 : 0, NULL, p, NULL, NULL, 0);

	cr_assert_eq(PQresultStatus(r), PGRES_COMMAND_OK, "%s: %s", sql, PQerrorMessage(c));
	cr_assert_str_eq(PQcmdTuples(r), n, "%s: %s rows", sql, PQcmdTuples(r));
	PQclear(r);
}

typedef struct head {
	char id[ID_LEN];
	size_t n;
} head;

static int32_t keep_head(void *userdata, const memd_checkpoint *ck)
{
	head *h = userdata;

	snprintf(h->id, sizeof(h->id), "%s", ck->id);
	h->n++;
	return 0;
}

Test(pg_checkpoint_sweeps, head_passes_over_a_checkpoint_another_sweep_deletes, .timeout = 60)
{
	char *name = stress_unique_name("sweep");
	char id[ID_LEN], below[ID_LEN], want[ID_LEN];
	memd_call call = stress_call();
	memd_scope sc = stress_scope(APP, USER, SESSION);
	memd_checkpoint_sink sink = { .struct_size = sizeof(sink), .checkpoint = keep_head };
	memd_resumable_query q = { .struct_size = sizeof(q), .limit = 2, .app = APP,
				   .run_states = 1u << MEMD_RUN_RUNNING, .now_us = NOW };
	memd_error err = { 0 };
	uint32_t count = 0;
	stress_store *st;
	PGconn *other;
	head h = { 0 };

	cr_assert_not_null(name);
	st = stress_open(NULL, name, NULL, &err);
	cr_assert_not_null(st, "%s", err.msg);
	cr_assert_not_null(st->ops->checkpoint_expire, "the store has no checkpoint ops");
	/* Root checkpoints 1..N_ROOT; only the last (the head) expires. */
	for (int n = 1; n <= N_ROOT; n++) {
		memd_checkpoint ck = { .struct_size = sizeof(ck), .run_state = MEMD_RUN_RUNNING,
				       .app = APP, .user = USER, .session = SESSION, .ns = "",
				       .id = id, .type = "json", .payload = "{}", .payload_size = 2,
				       .metadata_json = "{}",
				       .expires_us = n == N_ROOT ? EXPIRES : 0 };
		checkpoint_id(id, sizeof(id), n);
		cr_assert_eq(st->ops->checkpoint_put(st->h, &call, &ck, 1, T0, NULL, &err), 0, "%s",
			     err.msg);
	}

	/* The other sweep deletes the checkpoint below the head and holds. */
	other = connect_schema(name);
	checkpoint_id(below, sizeof(below), N_ROOT - 1);
	exec_rows(other, "BEGIN", NULL, "");
	exec_rows(other, "DELETE FROM checkpoints WHERE app = '" APP "' AND \"user\" = '" USER
			 "' AND session = '" SESSION "' AND ns = '' AND id = $1", below, "1");

	/* This one deletes the head meanwhile, without waiting. */
	cr_assert_eq(st->ops->checkpoint_expire(st->h, &call, NOW, N_ROOT, &count, &err), 0, "%s",
		     err.msg);
	cr_assert_eq(count, 1, "%u checkpoints expired", (unsigned)count);
	exec_rows(other, "COMMIT", NULL, "");
	PQfinish(other);

	/* The head is the greatest that stays, and the session resumable. */
	sink.userdata = &h;
	cr_assert_eq(st->ops->checkpoint_resumable(st->h, &call, &q, &sink, &err), 0, "%s",
		     err.msg);
	checkpoint_id(want, sizeof(want), N_ROOT - 2);
	cr_assert_eq(h.n, 1, "the session is not resumable: its head names a deleted checkpoint");
	cr_assert_str_eq(h.id, want, "head %s, the greatest left is %s", h.id, want);
	h.n = 0;
	cr_assert_eq(st->ops->checkpoint_get(st->h, &call, &sc, "", NULL, NOW, &sink, &err), 0,
		     "%s", err.msg);
	cr_assert_str_eq(h.id, want);
	stress_close(st);
	free(name);
}

/* Backends waiting for a lock the connection c holds. */
static int waiters(PGconn *c)
{
	PGresult *r = PQexec(c, "SELECT count(DISTINCT pid) FROM pg_catalog.pg_locks"
				" WHERE NOT granted AND pg_catalog.pg_backend_pid() ="
				" ANY (pg_catalog.pg_blocking_pids(pid))");
	int n;

	cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s", PQerrorMessage(c));
	n = atoi(PQgetvalue(r, 0, 0));
	PQclear(r);
	return n;
}

static int64_t count_rows(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	int64_t n;

	cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s: %s", sql, PQerrorMessage(c));
	n = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	return n;
}

typedef struct delete_job {
	stress_store *st;
	int32_t r;
	uint32_t count;
	memd_error err;
} delete_job;

static void *run_delete(void *arg)
{
	delete_job *j = arg;
	memd_call call = stress_call();
	memd_scope sc = stress_scope(APP, USER, SESSION);

	j->r = j->st->ops->checkpoint_delete(j->st->h, &call, &sc, NULL, &j->count, &j->err);
	return NULL;
}

Test(pg_checkpoint_sweeps, delete_racing_a_put_leaves_no_checkpoint_without_head,
     .timeout = 60)
{
	char *name = stress_unique_name("ckdel");
	char id[ID_LEN], put[ID_LEN];
	memd_call call = stress_call();
	delete_job job = { 0 };
	memd_error err = { 0 };
	pthread_t thread;
	PGconn *other;
	int64_t roots, heads, waited = 0;

	cr_assert_not_null(name);
	job.st = stress_open(NULL, name, NULL, &err);
	cr_assert_not_null(job.st, "%s", err.msg);
	cr_assert_not_null(job.st->ops->checkpoint_delete, "the store has no checkpoint ops");
	for (int n = 1; n < N_ROOT; n++) {
		memd_checkpoint ck = { .struct_size = sizeof(ck), .run_state = MEMD_RUN_RUNNING,
				       .app = APP, .user = USER, .session = SESSION, .ns = "",
				       .id = id, .type = "json", .payload = "{}", .payload_size = 2,
				       .metadata_json = "{}" };
		checkpoint_id(id, sizeof(id), n);
		cr_assert_eq(job.st->ops->checkpoint_put(job.st->h, &call, &ck, 1, T0, NULL, &err), 0,
			     "%s", err.msg);
	}

	/* The other process's put of a greater root checkpoint, as the
	 * store makes one, not committed. */
	other = connect_schema(name);
	checkpoint_id(put, sizeof(put), N_ROOT);
	exec_rows(other, "BEGIN", NULL, "");
	exec_rows(other, "INSERT INTO checkpoints (app, \"user\", session, ns, id, type, payload,"
			 " metadata, run_state, created_us, updated_us, expires_us) VALUES ('" APP
			 "', '" USER "', '" SESSION "', '', $1, 'json', '\\x7b7d', '{}', 1, 0, 0, 0)",
		  put, "1");
	exec_rows(other, "INSERT INTO checkpoint_heads (app, \"user\", session, id, run_state,"
			 " expires_us) VALUES ('" APP "', '" USER "', '" SESSION "', $1, 1, 0)"
			 " ON CONFLICT (app, \"user\", session) DO UPDATE SET id = excluded.id"
			 " WHERE checkpoint_heads.id <= excluded.id",
		  put, "1");

	/* The store's delete of every namespace, until it waits on the put. */
	cr_assert_eq(pthread_create(&thread, NULL, run_delete, &job), 0);
	while (waiters(other) == 0 && waited < WAIT_MAX_MS) {
		stress_sleep_ms(WAIT_POLL_MS);
		waited += WAIT_POLL_MS;
	}
	cr_assert_lt(waited, WAIT_MAX_MS, "the delete never waited for the put");
	exec_rows(other, "COMMIT", NULL, "");
	cr_assert_eq(pthread_join(thread, NULL), 0);
	cr_assert_eq(job.r, 0, "%s", job.err.msg);

	roots = count_rows(other, "SELECT count(*) FROM checkpoints WHERE session = '" SESSION
				  "' AND ns = ''");
	heads = count_rows(other, "SELECT count(*) FROM checkpoint_heads WHERE session = '"
				  SESSION "'");
	cr_assert(roots == 0 ? heads == 0 : heads == 1,
		  "%lld root checkpoints and %lld heads after the delete", (long long)roots,
		  (long long)heads);
	if (heads)
		cr_assert_eq(count_rows(other, "SELECT count(*) FROM checkpoint_heads h JOIN"
					       " checkpoints c ON c.session = h.session AND c.ns = ''"
					       " AND c.id = h.id"),
			     1, "the head names no checkpoint");
	PQfinish(other);
	stress_close(job.st);
	free(name);
}
