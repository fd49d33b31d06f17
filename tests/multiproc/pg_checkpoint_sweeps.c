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
 */
#include <criterion/criterion.h>
#include <libpq-fe.h>
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
