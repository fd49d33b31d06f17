/* SPDX-License-Identifier: MIT */
/* The HTTP transport's MCP sessions: a bounded table under one lock. */
#include "mcp_sessions.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <memd/plugin.h>

struct mcp_session {
	char id[MCP_SESSION_ID_LEN + 1];
	mcp_conn *conn;
	const void *owner;
	int64_t last_ns;             /* its last request's start */
	size_t refs;                 /* requests using it */
	int gone;                    /* out of the table: freed at the last release */
};

struct mcp_sessions {
	pthread_mutex_t lock;
	mcp_session **s;             /* n in use of max */
	size_t n, max;
	int64_t idle_ns;
};

static void session_free(mcp_session *s)
{
	mcp_conn_free(s->conn);
	free(s);
}

/* Take slot i out of the table (lock held): freed now, or by the last
 * request using it. */
static void drop(mcp_sessions *t, size_t i)
{
	mcp_session *s = t->s[i];

	t->s[i] = t->s[--t->n];
	if (s->refs)
		s->gone = 1;
	else
		session_free(s);
}

/* Drop the sessions idle past the idle time at now_ns (lock held). */
static void expire(mcp_sessions *t, int64_t now_ns)
{
	for (size_t i = 0; i < t->n;) {
		if (now_ns - t->s[i]->last_ns > t->idle_ns)
			drop(t, i);
		else
			i++;
	}
}

int32_t mcp_sessions_new(size_t max, int64_t idle_ns, mcp_sessions **ret, memd_error *err)
{
	mcp_sessions *t;

	if (max == 0 || idle_ns <= 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "MCP sessions need a bound and an idle time");
	if (!(t = calloc(1, sizeof(*t))) || !(t->s = calloc(max, sizeof(*t->s)))) {
		free(t);
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	pthread_mutex_init(&t->lock, NULL);
	t->max = max;
	t->idle_ns = idle_ns;
	*ret = t;
	return 0;
}

void mcp_sessions_free(mcp_sessions *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n; i++)
		session_free(t->s[i]);
	free(t->s);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

static int32_t new_id(char id[MCP_SESSION_ID_LEN + 1], memd_error *err)
{
	unsigned char b[MCP_SESSION_ID_BYTES];
	size_t got = 0;

	while (got < sizeof(b)) {
		ssize_t n = getrandom(b + got, sizeof(b) - got, 0);
		if (n <= 0)
			return memd_error_set(err, MEMD_EIO, 0, "no randomness for an MCP session id");
		got += (size_t)n;
	}
	for (size_t i = 0; i < sizeof(b); i++)
		snprintf(id + 2 * i, 3, "%02x", b[i]);
	return 0;
}

int32_t mcp_sessions_add(mcp_sessions *t, mcp_conn *conn, const void *owner, int64_t now_ns,
			 char ret_id[MCP_SESSION_ID_LEN + 1], memd_error *err)
{
	mcp_session *s = calloc(1, sizeof(*s));
	int32_t r;

	if (!s) {
		mcp_conn_free(conn);
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	s->conn = conn;
	if ((r = new_id(s->id, err)) < 0) {
		session_free(s);
		return r;
	}
	s->owner = owner;
	s->last_ns = now_ns;
	pthread_mutex_lock(&t->lock);
	expire(t, now_ns);
	if (t->n == t->max) {
		/* Full: the session idle longest goes. */
		size_t oldest = 0;
		for (size_t i = 1; i < t->n; i++)
			if (t->s[i]->last_ns < t->s[oldest]->last_ns)
				oldest = i;
		drop(t, oldest);
	}
	t->s[t->n++] = s;
	pthread_mutex_unlock(&t->lock);
	memcpy(ret_id, s->id, sizeof(s->id));
	return 0;
}

/* Is id the session id sid? The time does not depend on where they
 * differ (an id is a secret). */
static int id_equal(const char *sid, const char *id)
{
	volatile unsigned char diff = 0;

	/* Every id has the same length: it tells nothing. */
	if (strnlen(id, MCP_SESSION_ID_LEN + 1) != MCP_SESSION_ID_LEN)
		return 0;
	for (size_t i = 0; i < MCP_SESSION_ID_LEN; i++)
		diff |= (unsigned char)(sid[i] ^ id[i]);
	return diff == 0;
}

/* The slot of id for owner (lock held), or t->n. */
static size_t find(mcp_sessions *t, const char *id, const void *owner)
{
	size_t found = t->n;

	for (size_t i = 0; i < t->n; i++)
		if (id_equal(t->s[i]->id, id) && t->s[i]->owner == owner)
			found = i;
	return found;
}

mcp_session *mcp_sessions_get(mcp_sessions *t, const char *id, const void *owner,
			      int64_t now_ns)
{
	mcp_session *s = NULL;
	size_t i;

	pthread_mutex_lock(&t->lock);
	expire(t, now_ns);
	if ((i = find(t, id, owner)) < t->n) {
		s = t->s[i];
		s->refs++;
		s->last_ns = now_ns;
	}
	pthread_mutex_unlock(&t->lock);
	return s;
}

mcp_conn *mcp_session_conn(mcp_session *s)
{
	return s->conn;
}

void mcp_sessions_release(mcp_sessions *t, mcp_session *s)
{
	int done;

	if (!s)
		return;
	pthread_mutex_lock(&t->lock);
	done = --s->refs == 0 && s->gone;
	pthread_mutex_unlock(&t->lock);
	if (done)
		session_free(s);
}

int32_t mcp_sessions_end(mcp_sessions *t, const char *id, const void *owner, int64_t now_ns)
{
	size_t i;
	int32_t r = MEMD_ENOTFOUND;

	pthread_mutex_lock(&t->lock);
	expire(t, now_ns);
	if ((i = find(t, id, owner)) < t->n) {
		drop(t, i);
		r = 0;
	}
	pthread_mutex_unlock(&t->lock);
	return r;
}

size_t mcp_sessions_count(mcp_sessions *t, int64_t now_ns)
{
	size_t n;

	pthread_mutex_lock(&t->lock);
	expire(t, now_ns);
	n = t->n;
	pthread_mutex_unlock(&t->lock);
	return n;
}
