/* SPDX-License-Identifier: MIT */
/*
 * mcp sessions: the MCP sessions of the Streamable HTTP transport, by
 * Mcp-Session-Id. A bounded table: a new session past the bound pushes
 * out the one idle longest (its client gets 404 and initializes again);
 * a session idle longer than the idle time is gone. Ids are 32 random
 * bytes in hex: unguessable. Each session remembers who created it (an
 * opaque owner, e.g. the API key), and only that owner finds it again.
 * Thread-safe; times are the caller's (monotonic ns), so tests drive
 * the clock.
 */
#ifndef MEMD_MCP_SESSIONS_H
#define MEMD_MCP_SESSIONS_H

#include <stddef.h>
#include <stdint.h>

#include "mcp.h"

/* Bytes of randomness in a session id, and its text length (hex). */
#define MCP_SESSION_ID_BYTES 32
#define MCP_SESSION_ID_LEN (2 * MCP_SESSION_ID_BYTES)

/* The HTTP transport's bounds: sessions kept at most, and how long one
 * may stay idle (a client that comes back later initializes again). */
#define MCP_SESSIONS_MAX_DEFAULT 1024
#define MCP_SESSION_IDLE_S_DEFAULT 1800

typedef struct mcp_sessions mcp_sessions;
typedef struct mcp_session mcp_session;

/* A table of at most max sessions, each gone after idle_ns without a
 * request. MEMD_EINVAL for max 0 or idle_ns <= 0; MEMD_ENOMEM. */
int32_t mcp_sessions_new(size_t max, int64_t idle_ns, mcp_sessions **ret, memd_error *err);
/* Frees every session (none may be in use). Accepts NULL. */
void mcp_sessions_free(mcp_sessions *t);

/* Add conn (taken over, also on failure) for owner at now_ns under a
 * new id, written to ret_id. MEMD_EIO (no randomness), MEMD_ENOMEM. */
int32_t mcp_sessions_add(mcp_sessions *t, mcp_conn *conn, const void *owner, int64_t now_ns,
			 char ret_id[MCP_SESSION_ID_LEN + 1], memd_error *err);
/* The session id for owner, in use until mcp_sessions_release (its idle
 * time restarts at now_ns); NULL when unknown, expired, ended or
 * another owner's. */
mcp_session *mcp_sessions_get(mcp_sessions *t, const char *id, const void *owner,
			      int64_t now_ns);
/* The conn of a session in use (borrowed until its release). */
mcp_conn *mcp_session_conn(mcp_session *s);
/* Done with a session mcp_sessions_get returned; accepts NULL. */
void mcp_sessions_release(mcp_sessions *t, mcp_session *s);
/* End session id of owner: 0, or MEMD_ENOTFOUND (unknown, expired, or
 * another owner's). A request using it meanwhile finishes. */
int32_t mcp_sessions_end(mcp_sessions *t, const char *id, const void *owner, int64_t now_ns);
/* Sessions in the table (expired ones dropped at now_ns first). */
size_t mcp_sessions_count(mcp_sessions *t, int64_t now_ns);

#endif
