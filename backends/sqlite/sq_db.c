/* SPDX-License-Identifier: MIT */
#include "sq_db.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "plugin_util.h"
#include "sq_feed.h"
#include "sq_schema.h"

#define SQ_DIR_MODE 0755
#define SQ_US_PER_SEC 1000000
#define SQ_NS_PER_US 1000
/* The writer checkpoints the WAL into the database when a commit leaves
 * it at least this many pages long (SQLite's default is 1000). Each
 * checkpoint costs the committing group two fsyncs and a copy of the
 * pages changed since the last one; appends to many sessions rewrite the
 * same hot pages, so a longer WAL (16 MiB of 4 KiB pages) means far fewer
 * checkpoints for little more copying. */
#define SQ_WAL_AUTOCHECKPOINT_PAGES 4000
/* Opening the writer (WAL switch + migrations) races with another process
 * opening the same new file: it is retried whole, this often, while the
 * busy timeout lasts (I/O errors a few times only: a damaged file must
 * not make memd wait). */
#define SQ_OPEN_RETRY_US 20000
#define SQ_OPEN_IO_RETRIES 5
#define SQ_US_PER_MS 1000
/* The disk reserve. A full disk in WAL mode blocks deletes too: a
 * delete appends its pages to the WAL, and the WAL can only start over
 * from its beginning (in space the file already has) after a checkpoint
 * has copied it into the database, which needs room for the pages the
 * WAL added. So the writer keeps reserve_bytes in a file beside the
 * database and lets the WAL grow to a quarter of that at most before it
 * checkpoints: on a full disk, giving the reserve up leaves room for the
 * checkpoint (the WAL's new pages, up to twice the threshold when a
 * checkpoint failed and commits went on) and for the delete's own
 * pages. The reserve is made again at a write that succeeds, at most
 * every SQ_RESERVE_RETRY_US. */
#define SQ_RESERVE_SUFFIX "-reserve"
#define SQ_RESERVE_MODE 0600
#define SQ_RESERVE_WAL_SHARE 4
#define SQ_WAL_AUTOCHECKPOINT_MIN_PAGES 16
#define SQ_RESERVE_RETRY_US 1000000
#define SQ_PRAGMA_MAX 64

static const sq_sql SQL_BEGIN = { SQ_ST_BEGIN, "BEGIN" };
static const sq_sql SQL_BEGIN_IMMEDIATE = { SQ_ST_BEGIN_IMMEDIATE, "BEGIN IMMEDIATE" };
static const sq_sql SQL_COMMIT = { SQ_ST_COMMIT, "COMMIT" };
static const sq_sql SQL_ROLLBACK = { SQ_ST_ROLLBACK, "ROLLBACK" };

/* sq_fail with the description's arguments in a va_list. */
static int32_t sq_vfail(const sq_conn *c, int rc, memd_error *err, const char *what_fmt,
			va_list ap) __attribute__((format(printf, 4, 0)));

static int32_t sq_vfail(const sq_conn *c, int rc, memd_error *err, const char *what_fmt,
			va_list ap)
{
	/* SQLite keeps the errno of a failed system call only on some paths
	 * (not for a COMMIT whose WAL write failed): the thread's errno,
	 * read before anything else, stands in when it kept none. */
	int e = errno;
	int sys = c && c->db ? sqlite3_system_errno(c->db) : 0;
	char what[MEMD_ERROR_MSG_MAX];
	uint32_t flags;
	int32_t code = sq_map_code(rc, sys ? sys : e, &flags);

	vsnprintf(what, sizeof(what), what_fmt, ap);
	/* "disk I/O error" alone does not tell an operator the disk is full. */
	if (((rc & 0xff) == SQLITE_IOERR || (rc & 0xff) == SQLITE_CANTOPEN) && (sys || e))
		return memd_error_set(err, code, flags, "sqlite %s: %s: %s (%s)",
				      c ? c->role : "store", what,
				      c && c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc),
				      strerror(sys ? sys : e));
	return memd_error_set(err, code, flags, "sqlite %s: %s: %s", c ? c->role : "store", what,
			      c && c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
}

int32_t sq_fail(const sq_conn *c, int rc, memd_error *err, const char *what_fmt, ...)
{
	va_list ap;
	int32_t r;

	va_start(ap, what_fmt);
	r = sq_vfail(c, rc, err, what_fmt, ap);
	va_end(ap);
	return r;
}

int32_t sq_stmt(sq_conn *c, const sq_sql *sql, sqlite3_stmt **ret, memd_error *err)
{
	sqlite3_stmt *st = c->stmts[sql->id];
	int rc;

	if (!st) {
		rc = sqlite3_prepare_v3(c->db, sql->text, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL);
		if (rc != SQLITE_OK)
			return sq_fail(c, rc, err, "prepare statement %d", (int)sql->id);
		c->stmts[sql->id] = st;
	}
	*ret = st;
	return 0;
}

void sq_stmt_done(sqlite3_stmt *st)
{
	if (!st)
		return;
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
}

int sq_bind_text(sqlite3_stmt *st, int idx, const char *text)
{
	if (!text)
		return sqlite3_bind_null(st, idx);
	return sqlite3_bind_text(st, idx, text, -1, SQLITE_STATIC);
}

int sq_bind_scope(sqlite3_stmt *st, const memd_scope *scope, int with_session)
{
	int rc = sq_bind_text(st, 1, scope->app);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(st, 2, scope->user);
	if (rc == SQLITE_OK && with_session)
		rc = sq_bind_text(st, 3, scope->session);
	return rc;
}

const char *sq_col_text(sqlite3_stmt *st, int col)
{
	return (const char *)sqlite3_column_text(st, col);
}

void sq_count_rows(const memd_call *call, sqlite3_stmt *st, uint64_t stepped)
{
	uint64_t full = st ? (uint64_t)sqlite3_stmt_status(st, SQLITE_STMTSTATUS_FULLSCAN_STEP, 1) : 0;
	pu_rows_read(call, stepped + full);
}

/* Text keys copied out of a scan: n rows of ncols strings each, row i's
 * column j at v[i * ncols + j] (NULL for SQL NULL). */
typedef struct sq_keys {
	char **v;
	uint32_t n, ncols;
} sq_keys;

static void keys_free(sq_keys *keys)
{
	for (size_t i = 0; i < (size_t)keys->n * keys->ncols; i++)
		free(keys->v[i]);
	free(keys->v);
	keys->v = NULL;
	keys->n = 0;
}

/* sq_expire's scan: the keys into *ret_keys (the caller's to free with
 * keys_free), or an error and nothing. */
static int32_t collect_expired(sq_conn *c, const memd_call *call, const sq_sql *sql,
			       int64_t now_us, uint32_t limit, uint32_t ncols, const char *what,
			       sq_keys *ret_keys, memd_error *err)
{
	sqlite3_stmt *st = NULL;
	sq_keys keys = { .ncols = ncols };
	uint32_t cap = 0;
	int32_t r = sq_stmt(c, sql, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = sqlite3_bind_int64(st, 1, now_us);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 2, limit);
	while (rc == SQLITE_OK && r == 0) {
		int failed = 0;

		rc = sqlite3_step(st);
		if (rc != SQLITE_ROW)
			break;
		rc = SQLITE_OK;
		if (keys.n == cap) {
			uint32_t nc = cap ? cap * 2 : 16;
			char **v = realloc(keys.v, (size_t)nc * ncols * sizeof(*v));
			if (!v) {
				r = memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
				break;
			}
			keys.v = v;
			cap = nc;
		}
		for (uint32_t j = 0; j < ncols; j++)
			keys.v[(size_t)keys.n * ncols + j] =
				pu_strdup_or_null(sq_col_text(st, (int)j), &failed);
		keys.n++;
		if (failed)
			r = memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	if (r == 0 && rc != SQLITE_OK && rc != SQLITE_DONE)
		r = sq_fail(c, rc, err, "find %s", what);
	sq_count_rows(call, st, keys.n);
	sq_stmt_done(st);
	if (r < 0) {
		keys_free(&keys);
		return r;
	}
	*ret_keys = keys;
	return 0;
}

int32_t sq_expire(sq_store *s, const memd_call *call, const sq_sql *sql, uint32_t ncols,
		  const char *what, int64_t now_us, uint32_t limit, sq_expire_fn del,
		  uint32_t *ret_count, memd_error *err)
{
	sq_keys keys = { 0 };
	sq_conn *c = NULL;
	uint32_t n;
	int32_t r;

	if (!ret_count)
		return memd_error_set(err, MEMD_EINVAL, 0, "no output count");
	if (limit == 0) {
		*ret_count = 0;
		return 0;
	}
	r = sq_write_begin(s, call, &c, err);
	if (r < 0)
		return r;
	r = collect_expired(c, call, sql, now_us, limit, ncols, what, &keys, err);
	for (uint32_t i = 0; r == 0 && i < keys.n; i++)
		r = del(c, &keys.v[(size_t)i * ncols], now_us, err);
	n = keys.n;
	keys_free(&keys);
	r = sq_write_end(s, c, r, err);
	if (r == 0)
		*ret_count = n;
	return r;
}

int32_t sq_sink_result(int32_t r, const char *what, memd_error *err)
{
	if (r < 0)
		return memd_error_set(err, r, 0, "%s sink stopped the read with error %d", what,
				      (int)r);
	return r;
}

int32_t sq_step_deliver(sq_store *s, const memd_call *call, sq_conn *c, sqlite3_stmt *st,
			int rc, uint64_t limit, sq_row_fn row, void *ud, memd_error *err,
			const char *what_fmt, ...)
{
	uint64_t stepped = 0;
	int32_t r = 0;

	while (rc == SQLITE_OK && (limit == 0 || stepped < limit)) {
		rc = sqlite3_step(st);
		if (rc != SQLITE_ROW)
			break;
		rc = SQLITE_OK;
		stepped++;
		if (stepped % SQ_CHECK_EVERY == 0 && (r = sq_call_check(s, call, err)) < 0)
			break;
		r = row(st, ud, err);
		if (r != 0)
			break;
	}
	if (r > 0) {
		r = 0;
	} else if (r == 0 && rc != SQLITE_OK && rc != SQLITE_DONE) {
		va_list ap;

		va_start(ap, what_fmt);
		r = sq_vfail(c, rc, err, what_fmt, ap);
		va_end(ap);
	}
	sq_count_rows(call, st, stepped);
	return r;
}

int32_t sq_check_json_object(const char *what, const char *json, memd_error *err)
{
	json_error_t jerr;
	json_t *v;
	int32_t r = 0;

	if (!json)
		return memd_error_set(err, MEMD_EINVAL, 0, "%s is missing", what);
	v = json_loads(json, JSON_ALLOW_NUL, &jerr);
	if (!v)
		/* jansson's text may quote the input: give the place only. */
		return memd_error_set(err, MEMD_EINVAL, 0, "%s is not JSON (line %d, column %d)",
				      what, jerr.line, jerr.column);
	if (!json_is_object(v))
		r = memd_error_set(err, MEMD_EINVAL, 0, "%s must be a JSON object", what);
	json_decref(v);
	return r;
}

int32_t sq_call_check(const sq_store *s, const memd_call *call, memd_error *err)
{
	if (!call || (!call->deadline_us && !call->cancel))
		return 0;
	return pu_call_check(call, s->host->monotonic_us(s->host), err);
}

/* ---- connections ---------------------------------------------------- */

/* Run a constant statement (a PRAGMA) to completion; *ret_text (if not
 * NULL) gets a copy of the first column of its first row. */
static int32_t exec_const(sq_conn *c, const char *sql, char *ret_text, size_t text_size,
			  memd_error *err)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(c->db, sql, -1, &st, NULL);
	int first = 1;

	if (rc != SQLITE_OK)
		return sq_fail(c, rc, err, "%s", sql);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (first && ret_text) {
			const char *t = sq_col_text(st, 0);
			snprintf(ret_text, text_size, "%s", t ? t : "");
		}
		first = 0;
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return sq_fail(c, rc, err, "%s", sql);
	return 0;
}

/* Close c; *reprepared (may be NULL) grows by the times SQLite prepared its cached
 * statements again (a schema change, or a plan tied to a bound value). */
static void conn_close(sq_conn *c, uint64_t *reprepared)
{
	if (!c->db)
		return;
	for (size_t i = 0; i < SQ_ST_COUNT; i++) {
		if (reprepared && c->stmts[i])
			*reprepared += (uint64_t)sqlite3_stmt_status(
				c->stmts[i], SQLITE_STMTSTATUS_REPREPARE, 0);
		sqlite3_finalize(c->stmts[i]);
		c->stmts[i] = NULL;
	}
	sqlite3_close_v2(c->db);
	c->db = NULL;
}

/* The WAL's checkpoint threshold: SQ_WAL_AUTOCHECKPOINT_PAGES, or less
 * so that the disk reserve holds SQ_RESERVE_WAL_SHARE WALs. */
static int autocheckpoint_pages(const sq_options *o, long page_size)
{
	int64_t pages;

	if (!o->reserve_bytes || page_size <= 0)
		return SQ_WAL_AUTOCHECKPOINT_PAGES;
	pages = o->reserve_bytes / SQ_RESERVE_WAL_SHARE / page_size;
	if (pages > SQ_WAL_AUTOCHECKPOINT_PAGES)
		pages = SQ_WAL_AUTOCHECKPOINT_PAGES;
	if (pages < SQ_WAL_AUTOCHECKPOINT_MIN_PAGES)
		pages = SQ_WAL_AUTOCHECKPOINT_MIN_PAGES;
	return (int)pages;
}

static int32_t conn_open(sq_conn *c, const char *path, int writer, const sq_options *o,
			 memd_error *err)
{
	int flags = SQLITE_OPEN_NOMUTEX |
		    (writer ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE : SQLITE_OPEN_READONLY);
	int rc;
	int32_t r;

	memset(c, 0, sizeof(*c));
	c->role = writer ? "writer" : "reader";
	rc = sqlite3_open_v2(path, &c->db, flags, NULL);
	if (rc != SQLITE_OK) {
		r = memd_error_set(err, sq_map_code(rc, c->db ? sqlite3_system_errno(c->db) : 0, NULL),
				   0, "sqlite %s: cannot open '%s': %s",
				   c->role, path, c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
		conn_close(c, NULL);
		return r;
	}
	sqlite3_extended_result_codes(c->db, 1);
	rc = sqlite3_busy_timeout(c->db, o->busy_timeout_ms);
	if (rc != SQLITE_OK) {
		r = sq_fail(c, rc, err, "set busy_timeout");
		conn_close(c, NULL);
		return r;
	}
	r = exec_const(c, "PRAGMA foreign_keys = ON", NULL, 0, err);
	if (r == 0 && writer) {
		char mode[16];
		r = exec_const(c, "PRAGMA journal_mode = WAL", mode, sizeof(mode), err);
		if (r == 0 && strcmp(mode, "wal") != 0)
			r = memd_error_set(err, MEMD_EIO, 0,
					   "sqlite writer: '%s' cannot use WAL (journal mode is '%s')",
					   path, mode);
		if (r == 0)
			r = exec_const(c, o->synchronous == SQ_SYNC_NORMAL ?
					  "PRAGMA synchronous = NORMAL" : "PRAGMA synchronous = FULL",
				       NULL, 0, err);
		if (r == 0)
			r = exec_const(c, "PRAGMA page_size", mode, sizeof(mode), err);
		if (r == 0 && sqlite3_wal_autocheckpoint(c->db, autocheckpoint_pages(o, atol(mode))) !=
				      SQLITE_OK)
			r = sq_fail(c, SQLITE_ERROR, err, "set wal_autocheckpoint");
	}
	if (r < 0)
		conn_close(c, NULL);
	return r;
}

static int64_t open_clock_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * SQ_US_PER_SEC + ts.tv_nsec / SQ_NS_PER_US;
}

/* Open the writer and migrate. Two processes opening a new file at once
 * race for its switch to WAL (SQLite answers the loser BUSY without
 * calling the busy handler) and its first migration (a transient I/O
 * error); both steps are idempotent, so the whole open is retried. */
static int32_t open_writer(sq_store *s, const sq_options *o, const memd_host *host,
			   memd_error *err)
{
	int64_t give_up = open_clock_us() + (int64_t)o->busy_timeout_ms * SQ_US_PER_MS;
	int io_retries = 0;
	int32_t r;

	for (;;) {
		r = conn_open(&s->writer, o->path, 1, o, err);
		if (r == 0)
			r = sq_schema_migrate(&s->writer, host, &s->schema_version, err);
		if (r == 0)
			return 0;
		conn_close(&s->writer, NULL);
		if (r == MEMD_EIO && ++io_retries > SQ_OPEN_IO_RETRIES)
			return r;
		if ((r != MEMD_EUNAVAIL && r != MEMD_EIO) || open_clock_us() >= give_up)
			return r;
		usleep(SQ_OPEN_RETRY_US);
	}
}

/* The writer's commit hook: counts every transaction it commits (the
 * writer is used under write_lock, so the counter needs no other lock). */
static int count_commit(void *userdata)
{
	sq_store *s = userdata;

	s->stats.commits++;
	return 0; /* 0 lets the COMMIT go ahead */
}

/* fsync the directory that holds the entry dir[0..len) ("." when the
 * entry has no directory part), so a directory just made survives power
 * loss. */
static void sync_parent(char *dir, size_t len)
{
	size_t cut = len;
	char saved;
	int fd;

	while (cut > 0 && dir[cut - 1] != '/')
		cut--;
	if (cut > 1)
		cut--; /* drop the trailing '/', but keep "/" itself */
	saved = dir[cut];
	dir[cut] = '\0';
	fd = open(cut ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	dir[cut] = saved;
	if (fd >= 0) {
		(void)fsync(fd);
		close(fd);
	}
}

/* mkdir -p of the directory part of path; new directories are synced. */
static int32_t make_parent_dirs(const char *path, memd_error *err)
{
	char *dir = strdup(path);
	char *slash;
	int32_t r = 0;

	if (!dir)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		goto out;
	*slash = '\0';
	for (char *p = dir + 1; ; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char saved = *p;
		*p = '\0';
		if (mkdir(dir, SQ_DIR_MODE) == 0) {
			sync_parent(dir, (size_t)(p - dir));
		} else if (errno != EEXIST) {
			r = memd_error_set(err, MEMD_EIO, 0, "sqlite: cannot create directory '%s': %s",
					   dir, strerror(errno));
			goto out;
		}
		*p = saved;
		if (saved == '\0')
			break;
	}
out:
	free(dir);
	return r;
}

/* Make the disk reserve if the store has one and does not hold it: 1
 * when it is held afterwards. A file of the right size already there is
 * kept (fallocate of space it has allocates nothing). */
static int reserve_make(sq_store *s)
{
	int fd, rc;

	if (!s->reserve_bytes || s->reserve_held)
		return s->reserve_held;
	fd = open(s->reserve_path, O_WRONLY | O_CREAT | O_CLOEXEC, SQ_RESERVE_MODE);
	if (fd < 0)
		return 0;
	rc = posix_fallocate(fd, 0, (off_t)s->reserve_bytes);
	if (rc != 0) {
		/* What it got would only take space from the database. */
		unlink(s->reserve_path);
		close(fd);
		return 0;
	}
	close(fd);
	s->reserve_held = 1;
	return 1;
}

/* Log through the host, if it logs. */
#define store_log(s, level, ...)                                                          \
	do {                                                                              \
		if ((s)->host && (s)->host->log)                                          \
			(s)->host->log((s)->host, level, __VA_ARGS__);                    \
	} while (0)

int sq_is_full(const memd_error *err)
{
	return err && (err->flags & MEMD_ERROR_STORAGE_FULL);
}

/* Checkpoint the writer's WAL (no transaction open on it): 0, or the
 * SQLite result code; *ret_done (if not NULL) is set when every frame
 * of the WAL is in the database now. */
static int checkpoint(sq_conn *c, int mode, int *ret_done)
{
	int log = 0, done = 0;
	int rc = sqlite3_wal_checkpoint_v2(c->db, NULL, mode, &log, &done);

	if (ret_done)
		*ret_done = rc == SQLITE_OK && log == done;
	return rc;
}

void sq_make_room(sq_store *s)
{
	int rc;

	pthread_mutex_lock(&s->write_lock);
	/* SQLite built with SECURE_DELETE (Debian's is) zeroes every page a
	 * delete frees, which writes the whole of what is deleted to the WAL
	 * again: far more than a full disk has. FAST zeroes only what the
	 * delete writes anyway; the freed pages keep their bytes until they
	 * are reused. */
	if (exec_const(&s->writer, "PRAGMA secure_delete", s->secure_delete,
		       sizeof(s->secure_delete), NULL) < 0 ||
	    exec_const(&s->writer, "PRAGMA secure_delete = FAST", NULL, 0, NULL) < 0)
		s->secure_delete[0] = '\0';
	if (s->reserve_held) {
		unlink(s->reserve_path);
		s->reserve_held = 0;
		store_log(s, MEMD_LOG_WARN, "%s: the disk is full: gave up the disk reserve %s to "
			  "delete", s->path, s->reserve_path);
	}
	rc = checkpoint(&s->writer, SQLITE_CHECKPOINT_PASSIVE, NULL);
	if (rc != SQLITE_OK)
		store_log(s, MEMD_LOG_WARN, "%s: checkpoint on a full disk failed: %s", s->path,
			  sqlite3_errmsg(s->writer.db));
	pthread_mutex_unlock(&s->write_lock);
}

void sq_after_room(sq_store *s, int32_t r)
{
	char sql[SQ_PRAGMA_MAX];

	pthread_mutex_lock(&s->write_lock);
	if (s->secure_delete[0]) {
		snprintf(sql, sizeof(sql), "PRAGMA secure_delete = %d", atoi(s->secure_delete));
		(void)exec_const(&s->writer, sql, NULL, 0, NULL);
	}
	/* The delete's pages go into the database (which does not grow for
	 * them), so the WAL starts over and later writes reuse freed pages. */
	if (r == 0)
		(void)checkpoint(&s->writer, SQLITE_CHECKPOINT_PASSIVE, NULL);
	pthread_mutex_unlock(&s->write_lock);
}

int32_t sq_store_open(const memd_host *host, const sq_options *o, sq_store **ret_store,
		      memd_error *err)
{
	pthread_condattr_t cattr;
	sq_store *s;
	int32_t r;

	if (!sqlite3_threadsafe())
		return memd_error_set(err, MEMD_EINTERNAL, 0,
				      "sqlite: the SQLite library was built without thread support");
	if (!o->path || !o->path[0] || strcmp(o->path, ":memory:") == 0)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "sqlite: path must name a file (use the memory plugin for an "
				      "in-memory store)");
	if (o->readers < 1)
		return memd_error_set(err, MEMD_EINVAL, 0, "sqlite: readers must be at least 1");

	s = calloc(1, sizeof(*s));
	if (!s)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	s->host = host;
	s->synchronous = o->synchronous;
	s->reserve_bytes = o->reserve_bytes;
	s->path = strdup(o->path);
	s->reserve_path = malloc(strlen(o->path) + sizeof(SQ_RESERVE_SUFFIX));
	if (s->reserve_path)
		sprintf(s->reserve_path, "%s" SQ_RESERVE_SUFFIX, o->path);
	s->readers = calloc(o->readers, sizeof(*s->readers));
	s->idle = calloc(o->readers, sizeof(*s->idle));
	if (!s->path || !s->reserve_path || !s->readers || !s->idle) {
		free(s->reserve_path);
		free(s->path);
		free(s->readers);
		free(s->idle);
		free(s);
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	pthread_mutex_init(&s->write_lock, NULL);
	pthread_mutex_init(&s->group_lock, NULL);
	pthread_mutex_init(&s->pool_lock, NULL);
	pthread_condattr_init(&cattr);
	pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
	pthread_cond_init(&s->pool_cond, &cattr);
	pthread_condattr_destroy(&cattr);

	r = make_parent_dirs(o->path, err);
	if (r == 0)
		r = open_writer(s, o, host, err);
	if (r == 0)
		sqlite3_commit_hook(s->writer.db, count_commit, s);
	if (r == 0 && s->reserve_bytes && !reserve_make(s))
		store_log(s, MEMD_LOG_WARN, "%s: cannot make the disk reserve %s (no space?): "
			  "deletes may fail while the disk is full", s->path, s->reserve_path);
	for (uint32_t i = 0; r == 0 && i < o->readers; i++) {
		r = conn_open(&s->readers[i], o->path, 0, o, err);
		if (r == 0) {
			s->n_readers++;
			s->idle[s->n_idle++] = i;
		}
	}
	if (r < 0) {
		sq_store_close(s);
		return r;
	}
	*ret_store = s;
	return 0;
}

void sq_store_close(sq_store *s)
{
	uint64_t reprepared = 0;

	if (!s)
		return;
	for (uint32_t i = 0; i < s->n_readers; i++)
		conn_close(&s->readers[i], &reprepared);
	if (s->writer.db) {
		/* Closing checkpoints too, but says nothing when it fails: a WAL
		 * left behind (disk full, I/O error, another process reading) is
		 * replayed at the next open, and the operator should know. */
		int done = 0;
		int rc = checkpoint(&s->writer, SQLITE_CHECKPOINT_PASSIVE, &done);
		if (rc != SQLITE_OK)
			store_log(s, MEMD_LOG_WARN, "%s: the WAL checkpoint at close failed: %s",
				  s->path, sqlite3_errmsg(s->writer.db));
		else if (!done)
			store_log(s, MEMD_LOG_WARN, "%s: the WAL checkpoint at close was not "
				  "complete (%s): the WAL is kept", s->path,
				  "another connection reads an older snapshot");
	}
	if (s->writer.db) {
		conn_close(&s->writer, &reprepared);
		/* A statement prepared again at every step costs a parse and a
		 * plan each time: say how often it happened. */
		store_log(s, MEMD_LOG_INFO, "%s: statements prepared again: %llu",
			  s->path ? s->path : "sqlite", (unsigned long long)reprepared);
	}
	pthread_cond_destroy(&s->pool_cond);
	pthread_mutex_destroy(&s->pool_lock);
	pthread_mutex_destroy(&s->group_lock);
	pthread_mutex_destroy(&s->write_lock);
	free(s->readers);
	free(s->idle);
	free(s->reserve_path);
	free(s->path);
	free(s);
}

/* ---- transactions --------------------------------------------------- */

int32_t sq_exec(sq_conn *c, const sq_sql *sql, memd_error *err)
{
	sqlite3_stmt *st = NULL;
	int32_t r = sq_stmt(c, sql, &st, err);
	int rc;

	if (r < 0)
		return r;
	rc = sqlite3_step(st);
	sq_stmt_done(st);
	if (rc != SQLITE_DONE && rc != SQLITE_ROW)
		return sq_fail(c, rc, err, "%s", sql->text);
	return 0;
}

static int32_t pool_take(sq_store *s, const memd_call *call, sq_conn **ret, memd_error *err)
{
	int32_t r = 0;

	pthread_mutex_lock(&s->pool_lock);
	while (s->n_idle == 0) {
		if (pu_cond_wait_call(&s->pool_cond, &s->pool_lock, call) == ETIMEDOUT &&
		    s->n_idle == 0) {
			r = memd_error_set(err, MEMD_ETIMEDOUT, MEMD_ERROR_RETRYABLE,
					   "sqlite: deadline passed waiting for a reader");
			break;
		}
	}
	if (r == 0)
		*ret = &s->readers[s->idle[--s->n_idle]];
	pthread_mutex_unlock(&s->pool_lock);
	return r;
}

static void pool_give(sq_store *s, sq_conn *c)
{
	pthread_mutex_lock(&s->pool_lock);
	s->idle[s->n_idle++] = (uint32_t)(c - s->readers);
	pthread_cond_signal(&s->pool_cond);
	pthread_mutex_unlock(&s->pool_lock);
}

int32_t sq_read_begin(sq_store *s, const memd_call *call, sq_conn **ret, memd_error *err)
{
	sq_conn *c = NULL;
	int32_t r = sq_call_check(s, call, err);

	if (r < 0)
		return r;
	r = pool_take(s, call, &c, err);
	if (r < 0)
		return r;
	r = sq_exec(c, &SQL_BEGIN, err);
	if (r < 0) {
		pool_give(s, c);
		return r;
	}
	*ret = c;
	return 0;
}

void sq_read_end(sq_store *s, sq_conn *c)
{
	if (!c)
		return;
	/* A read transaction has nothing to keep: if COMMIT fails, roll back
	 * so the connection goes back to the pool clean. */
	if (!sqlite3_get_autocommit(c->db) && sq_exec(c, &SQL_COMMIT, NULL) < 0 &&
	    !sqlite3_get_autocommit(c->db))
		(void)sq_exec(c, &SQL_ROLLBACK, NULL);
	pool_give(s, c);
}

int32_t sq_write_begin(sq_store *s, const memd_call *call, sq_conn **ret, memd_error *err)
{
	int32_t r = sq_call_check(s, call, err);

	if (r < 0)
		return r;
	pthread_mutex_lock(&s->write_lock);
	r = sq_exec(&s->writer, &SQL_BEGIN_IMMEDIATE, err);
	if (r < 0) {
		pthread_mutex_unlock(&s->write_lock);
		return r;
	}
	*ret = &s->writer;
	return 0;
}

int32_t sq_write_end(sq_store *s, sq_conn *c, int32_t rc, memd_error *err)
{
	if (rc == 0)
		rc = sq_feed_flush(c, err);
	if (rc == 0)
		rc = sq_exec(c, &SQL_COMMIT, err);
	/* SQLite may already have rolled back by itself (I/O error, full
	 * disk); only roll back a transaction that is still open. */
	if (rc < 0 && !sqlite3_get_autocommit(c->db))
		(void)sq_exec(c, &SQL_ROLLBACK, NULL);
	memset(&c->txn, 0, sizeof(c->txn));
	/* A reserve given up on a full disk is made again once writes
	 * succeed (and there is room for it). */
	if (rc == 0 && s->reserve_bytes && !s->reserve_held) {
		int64_t now = s->host->monotonic_us(s->host);
		if (now - s->reserve_tried_us >= SQ_RESERVE_RETRY_US) {
			s->reserve_tried_us = now;
			if (reserve_make(s))
				store_log(s, MEMD_LOG_INFO, "%s: made the disk reserve %s again",
					  s->path, s->reserve_path);
		}
	}
	pthread_mutex_unlock(&s->write_lock);
	return rc;
}
