/* SPDX-License-Identifier: MIT */
/*
 * fv_log: filevec's files (format in fv_format.h). Not thread-safe:
 * filevec.c serializes every call that writes.
 *
 * A store is a directory:
 *   LOCK                 flock()ed by the one instance that has it open;
 *                        holds that process's pid (text)
 *   seg-<16 hex>.fv      segments, replayed in id order
 *   *.tmp                a segment being made (removed on open)
 *   *.bad                a segment whose header was unreadable, set aside
 * Records are only ever appended, to the newest segment unless it is a
 * compacted one (then a new segment is started). A new segment is written
 * as a .tmp file with its header, fsynced, and renamed into place (and the
 * directory fsynced), so a segment is never seen half-made. Compaction
 * writes every live record into a new segment the same way; its header
 * says that it supersedes every segment with a smaller id, which are then
 * deleted: a crash at any point leaves either the old segments or the new
 * one in force, never a mix.
 *
 * On open, a record that is not intact (checksum, length, fields) is
 * skipped up to the next intact one; what follows the last intact record
 * of the newest segment (a write cut short by a crash) is truncated away.
 * Only a segment written by a newer filevec refuses the open.
 */
#ifndef MEMD_FV_LOG_H
#define MEMD_FV_LOG_H

#include <memd/plugin.h>

#include "fv_format.h"

typedef struct fv_log fv_log;

typedef struct fv_log_opts {
	const char *path;       /* the directory; missing parents are made */
	int fsync;              /* fdatasync after every append */
	const memd_host *host;  /* for log lines; may be NULL */
} fv_log_opts;

/* Open (or create) the store at o->path: lock it, remove temp files and
 * superseded segments, set aside segments with a bad header, read the
 * dimension. Errors: MEMD_EUNAVAIL (retryable) when another instance has
 * it open, MEMD_ECONFLICT for a newer format, MEMD_EIO, MEMD_ENOMEM. */
int32_t fv_log_open(const fv_log_opts *o, fv_log **ret, memd_error *err);
/* Unlock and close; accepts NULL. */
void fv_log_close(fv_log *l);

/* The store's dimension; 0 while it has no segment. */
uint32_t fv_log_dim(const fv_log *l);

/* Called for every intact record, in log order. rec points into the file
 * (valid for the call). Return 0 or a negative MEMD_E* to stop. */
typedef int32_t (*fv_replay_fn)(void *userdata, const fv_rec *rec, uint32_t rec_bytes,
				memd_error *err);
/* Replay every segment once, after fv_log_open and before any write;
 * truncates a torn tail of the newest segment. Returns fn's error, or
 * MEMD_EIO/MEMD_ENOMEM. */
int32_t fv_log_replay(fv_log *l, fv_replay_fn fn, void *userdata, memd_error *err);

/* Give a store without a segment its dimension: makes the first segment
 * (durably). MEMD_EIO. */
int32_t fv_log_set_dim(fv_log *l, uint32_t dim, memd_error *err);

/* Append len bytes of whole records to the active segment (starting one
 * if needed), then fdatasync if o->fsync. On failure (MEMD_EIO) the
 * segment is cut back to where it was; if even that fails, or fdatasync
 * failed, the log refuses every later write until it is reopened. */
int32_t fv_log_append(fv_log *l, const void *buf, size_t len, memd_error *err);

/* Record bytes in the segments in force (live, dead, or skipped). */
uint64_t fv_log_bytes(const fv_log *l);

/* 0 while the directory is there and writes are accepted; MEMD_EUNAVAIL
 * (retryable) or MEMD_EIO otherwise. */
int32_t fv_log_ping(const fv_log *l, memd_error *err);

/* ---- compaction ------------------------------------------------------- */

typedef struct fv_log_writer fv_log_writer;

/* Start writing a compacted segment (a temp file). MEMD_EIO, MEMD_ENOMEM. */
int32_t fv_log_compact_begin(fv_log *l, fv_log_writer **ret, memd_error *err);
/* Add one live record (an upsert). MEMD_EIO, MEMD_ENOMEM. */
int32_t fv_log_compact_add(fv_log_writer *w, const fv_rec *rec, const float *vector,
			   memd_error *err);
/* fsync the new segment, rename it into place, delete the segments it
 * supersedes; it becomes the only segment. On failure (MEMD_EIO) the old
 * segments stay in force. Frees w either way. */
int32_t fv_log_compact_commit(fv_log *l, fv_log_writer *w, memd_error *err);
/* Drop the temp file; frees w; accepts NULL. */
void fv_log_compact_abort(fv_log *l, fv_log_writer *w);

#endif
