/* SPDX-License-Identifier: MIT */
/*
 * kw_snapshot: the keyword index (keyword.h) in a file, so a restart
 * loads it and replays only the feed after it instead of all of it.
 *
 * File (integers little-endian):
 *   preamble  8 bytes "MEMDKWSN", u32 format version (KWS_FORMAT_VERSION),
 *             u32 0
 *   sections  each: u32 kind, u32 0, u64 payload length, u32 CRC-32C of
 *             the payload, u32 CRC-32C of the 20 header bytes before it;
 *             then the payload. In order:
 *     META    u64 store id, i64 feed position, u32 analyzer version
 *             (KW_ANALYZER_VERSION), u32 0, u64 analyzer fingerprint,
 *             i64 unix time written (us), u32 anchors, then per anchor
 *             i64 feed position, u32 length, event id bytes
 *     TERMS, PARTITION...   kw_dump's sections (keyword.h), kinds
 *             KWS_SECTION_INDEX + KW_SECTION_*
 *     END     u64 sections before it, u64 documents, u64 bytes before it
 * A file without its END, with a bad checksum anywhere, bytes after END,
 * or of another format version is refused as a whole.
 *
 * Writing goes to a temporary file beside the target (PATH.tmp.PID.N),
 * which is fsynced, renamed over PATH, and the directory fsynced: a
 * crash at any moment leaves the old file or the new one, never a mix.
 * What the META fields mean, and whether a snapshot fits the store it is
 * loaded for, is the caller's business (index.c).
 */
#ifndef MEMD_INDEX_KW_SNAPSHOT_H
#define MEMD_INDEX_KW_SNAPSHOT_H

#include <stdint.h>

#include <memd/plugin.h>

#include "keyword.h"

#define KWS_MAGIC "MEMDKWSN"
#define KWS_MAGIC_LEN 8
#define KWS_FORMAT_VERSION 2u /* 2: documents have fields and flags (memories) */
/* Section kinds; kw_dump's kinds are offset by KWS_SECTION_INDEX. */
#define KWS_SECTION_META 1u
#define KWS_SECTION_END 2u
#define KWS_SECTION_INDEX 16u
/* Most anchors a snapshot records. */
#define KWS_ANCHORS 4

/* An event the index holds, to recognise the store's feed by. */
typedef struct kws_anchor {
	int64_t position;
	char event_id[MEMD_ID_MAX + 1];
} kws_anchor;

typedef struct kws_meta {
	uint64_t store_id;           /* identity of the session store */
	int64_t position;            /* feed position the index covers */
	uint32_t analyzer_version;   /* KW_ANALYZER_VERSION when written */
	uint64_t analyzer;           /* kw_analyzer_fingerprint() when written */
	int64_t written_us;          /* unix time, us */
	uint32_t n_anchors;          /* <= KWS_ANCHORS */
	kws_anchor anchors[KWS_ANCHORS];
} kws_meta;

/* ---- writing ---------------------------------------------------------------- */

typedef struct kws_writer kws_writer;

/* Start writing a snapshot for path: creates missing parent directories
 * and the temporary file. 0, MEMD_EINVAL (path empty or too long),
 * MEMD_EIO (with the system's reason), MEMD_ENOMEM. */
int32_t kws_writer_open(const char *path, kws_writer **ret, memd_error *err);
/* Write meta and the whole of kw (kw_dump: searches may go on, the
 * caller keeps kw's writer out) into the temporary file; the data may
 * still sit in the page cache. *ret_bytes / *ret_documents (may be NULL)
 * get the file size and documents written. 0 or MEMD_EIO/ENOMEM; the
 * writer must then be aborted. */
int32_t kws_writer_dump(kws_writer *w, const kws_meta *meta, kw_index *kw, uint64_t *ret_bytes,
			uint64_t *ret_documents, memd_error *err);
/* Make it durable and visible: fsync the file, rename it over the
 * target, fsync the directory. Frees w, also on failure (when the
 * temporary file is removed and the target left as it was). */
int32_t kws_writer_commit(kws_writer *w, memd_error *err);
/* Give up: remove the temporary file and free. Accepts NULL. */
void kws_writer_abort(kws_writer *w);

/* Remove temporary files of path left by writers that died (a process
 * killed mid-write): PATH.tmp.PID.* of a PID no longer running. */
void kws_remove_stale(const char *path);

/* ---- reading ---------------------------------------------------------------- */

typedef struct kws_reader kws_reader;

/* Open the snapshot at path and read its preamble and META into
 * *ret_meta. MEMD_ENOTFOUND if there is no file; MEMD_EINVAL if it is
 * not a snapshot this memd reads (bad magic, another format version, a
 * damaged or short META; the message says which); MEMD_EIO, MEMD_ENOMEM. */
int32_t kws_reader_open(const char *path, kws_reader **ret, kws_meta *ret_meta, memd_error *err);
/* Fill the empty index kw from the rest of the file (kw_restore), every
 * section's checksum verified before it is used; *ret_documents (may be
 * NULL) gets the documents loaded. cancel (may be NULL): when it becomes
 * nonzero the load stops with MEMD_ECANCELED. On any failure kw is left
 * empty: MEMD_EINVAL (damaged, truncated, trailing bytes), MEMD_EIO,
 * MEMD_ENOMEM, MEMD_ECANCELED. */
int32_t kws_reader_load(kws_reader *r, kw_index *kw, const volatile int32_t *cancel,
			uint64_t *ret_documents, memd_error *err);
/* Accepts NULL. */
void kws_reader_close(kws_reader *r);


#endif
