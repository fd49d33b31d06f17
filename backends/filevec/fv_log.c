/* SPDX-License-Identifier: MIT */
#include "fv_log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fv_kernel.h"
#include "pu_storage.h"

#define FV_LOCK_NAME "LOCK"
#define FV_SEG_PREFIX "seg-"
#define FV_SEG_SUFFIX ".fv"
#define FV_TMP_SUFFIX ".tmp"
#define FV_BAD_SUFFIX ".bad"
#define FV_SEG_ID_HEX 16
#define FV_NAME_MAX 64
#define FV_FILE_MODE 0644
#define FV_DIR_MODE 0755
#define FV_MIN_SEGS 8
#define FV_LOG_LINE_MAX 512
#define FV_PID_TEXT_MAX 32 /* a pid in decimal and a newline, in the LOCK file */
/* Compaction write buffer; larger than the largest record (ids, a 64 KiB
 * author and FV_DIM_MAX floats: about 330 KB). */
#define FV_COMPACT_BUF (1u << 20)

typedef struct fv_seg {
	uint64_t id;
	uint32_t flags;
	uint64_t size;          /* bytes in force (header included) */
} fv_seg;

struct fv_log {
	char *path;
	int dirfd;
	int lockfd;
	int fsync;
	const memd_host *host;
	uint32_t dim;
	fv_seg *segs;           /* in force, ascending id */
	size_t n_segs, cap_segs;
	uint64_t next_id;
	int active_fd;          /* segs[n_segs - 1], open for appends; -1 = none */
	uint64_t bytes;         /* record bytes in segs */
	int broken;             /* a failed write left the active segment unknown;
				 * atomic: fv_log_ping reads it without the writers' lock */
};

struct fv_log_writer {
	int fd;
	uint64_t id;
	uint64_t size;          /* bytes written so far, header included */
	unsigned char *buf;
	size_t used;
};

/* ---- small helpers ---------------------------------------------------- */

static void log_msg(const fv_log *l, int32_t level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void log_msg(const fv_log *l, int32_t level, const char *fmt, ...)
{
	char line[FV_LOG_LINE_MAX];
	va_list ap;

	if (!l->host || !l->host->log)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	l->host->log(l->host, level, "%s", line);
}

/* A failed system call's errno e as the store's error: its kind (full,
 * read-only, I/O error) through pu_storage.h. */
static int32_t io_error(memd_error *err, const fv_log *l, const char *what, const char *name,
			int e)
{
	uint32_t flags;
	int32_t code = pu_storage_code(pu_storage_errno_kind(e), &flags);

	return memd_error_set(err, code, flags, "filevec: %s %s/%s: %s", what, l->path, name,
			      strerror(e));
}

static void seg_name(char *buf, uint64_t id, const char *suffix)
{
	snprintf(buf, FV_NAME_MAX, FV_SEG_PREFIX "%016" PRIx64 FV_SEG_SUFFIX "%s", id, suffix);
}

/* The id of a "seg-<16 lower-case hex>.fv" name, or 0. */
static uint64_t seg_parse(const char *name)
{
	size_t pl = strlen(FV_SEG_PREFIX), sl = strlen(FV_SEG_SUFFIX);
	uint64_t id = 0;

	if (strlen(name) != pl + FV_SEG_ID_HEX + sl || strncmp(name, FV_SEG_PREFIX, pl) != 0 ||
	    strcmp(name + pl + FV_SEG_ID_HEX, FV_SEG_SUFFIX) != 0)
		return 0;
	for (size_t i = pl; i < pl + FV_SEG_ID_HEX; i++) {
		char c = name[i];
		int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
		if (v < 0)
			return 0;
		id = id << 4 | (uint64_t)v;
	}
	return id;
}

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int write_all(int fd, const void *buf, size_t len, uint64_t off)
{
	const unsigned char *p = buf;

	while (len) {
		ssize_t w = pwrite(fd, p, len, (off_t)off);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (w == 0) {
			errno = ENOSPC;
			return -1;
		}
		p += w;
		len -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

/* fsync the directory that contains path (a path as given to mkdir). */
static int sync_parent(const char *path)
{
	const char *slash = strrchr(path, '/');
	char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
	int fd, r = -1;

	if (!dir)
		return -1;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		r = fsync(fd);
		close(fd);
	}
	free(dir);
	return r;
}

/* mkdir -p path; a directory it makes is synced into its parent. */
static int32_t make_dirs(const char *path, memd_error *err)
{
	char *p = strdup(path);
	int32_t r = 0;

	if (!p)
		return memd_error_set(err, MEMD_ENOMEM, 0, "filevec: out of memory");
	for (char *s = p + 1;; s++) {
		char c = *s;
		if (c != '/' && c != '\0')
			continue;
		*s = '\0';
		if (mkdir(p, FV_DIR_MODE) == 0) {
			if (sync_parent(p) != 0) {
				r = memd_error_set(err, MEMD_EIO, 0, "filevec: cannot sync the parent of %s: %s",
						   p, strerror(errno));
				break;
			}
		} else if (errno != EEXIST) {
			r = memd_error_set(err, MEMD_EIO, 0, "filevec: cannot create directory %s: %s", p,
					   strerror(errno));
			break;
		}
		*s = c;
		if (!c)
			break;
	}
	free(p);
	return r;
}

static int32_t segs_push(fv_log *l, const fv_seg *s, memd_error *err)
{
	if (l->n_segs == l->cap_segs) {
		size_t nc = l->cap_segs ? l->cap_segs * 2 : FV_MIN_SEGS;
		fv_seg *v = realloc(l->segs, nc * sizeof(*v));
		if (!v)
			return memd_error_set(err, MEMD_ENOMEM, 0, "filevec: out of memory");
		l->segs = v;
		l->cap_segs = nc;
	}
	l->segs[l->n_segs++] = *s;
	return 0;
}

/* ---- making segments -------------------------------------------------- */

/* Create <seg>.tmp with a header; *ret_fd is open read-write. */
static int32_t seg_create_tmp(fv_log *l, uint64_t id, uint32_t flags, int *ret_fd,
			      memd_error *err)
{
	fv_seg_header h = { .version = FV_FORMAT_VERSION, .dim = l->dim, .flags = flags, .id = id,
			    .supersedes = flags & FV_SEG_COMPACTED ? id : 0 };
	unsigned char buf[FV_SEG_HEADER_SIZE];
	char tmp[FV_NAME_MAX];
	int fd;

	seg_name(tmp, id, FV_TMP_SUFFIX);
	fd = openat(l->dirfd, tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, FV_FILE_MODE);
	if (fd < 0)
		return io_error(err, l, "cannot create", tmp, errno);
	fv_seg_header_encode(&h, buf);
	if (write_all(fd, buf, sizeof(buf), 0) != 0) {
		int e = errno;
		close(fd);
		unlinkat(l->dirfd, tmp, 0);
		return io_error(err, l, "cannot write", tmp, e);
	}
	*ret_fd = fd;
	return 0;
}

/* seg_publish() results besides 0 (in force and durable). */
#define SEG_PUBLISHED_NOT_SYNCED 1 /* renamed into place, directory sync failed */

/* fsync fd (the .tmp of id), rename it into place and sync the directory.
 * Returns 0, or SEG_PUBLISHED_NOT_SYNCED (the segment is in force, but its
 * name may not survive a power loss until the directory is synced), or a
 * negative code: then the .tmp is removed and fd closed. */
static int32_t seg_publish(fv_log *l, int fd, uint64_t id, memd_error *err)
{
	char tmp[FV_NAME_MAX], name[FV_NAME_MAX];
	const char *what = "cannot sync";
	int e;

	seg_name(tmp, id, FV_TMP_SUFFIX);
	seg_name(name, id, "");
	if (fsync(fd) == 0) {
		what = "cannot rename into place";
		if (renameat(l->dirfd, tmp, l->dirfd, name) == 0) {
			if (fsync(l->dirfd) == 0)
				return 0;
			io_error(err, l, "cannot sync the directory entry of", name, errno);
			return SEG_PUBLISHED_NOT_SYNCED;
		}
	}
	e = errno;
	close(fd);
	unlinkat(l->dirfd, tmp, 0);
	return io_error(err, l, what, tmp, e);
}

/* Start a new (appendable) segment: it becomes the active one. */
static int32_t seg_start(fv_log *l, memd_error *err)
{
	fv_seg s = { .id = l->next_id, .flags = 0, .size = FV_SEG_HEADER_SIZE };
	int fd;
	int32_t r;

	r = seg_create_tmp(l, s.id, 0, &fd, err);
	if (r < 0)
		return r;
	l->next_id++;
	r = seg_publish(l, fd, s.id, err);
	if (r == SEG_PUBLISHED_NOT_SYNCED) {
		/* A valid, empty segment: harmless where it is; not used. */
		close(fd);
		return MEMD_EIO;
	}
	if (r < 0)
		return r;
	r = segs_push(l, &s, err);
	if (r < 0) {
		close(fd);
		return r;
	}
	l->active_fd = fd;
	return 0;
}

/* ---- open ------------------------------------------------------------- */

typedef struct seg_found {
	uint64_t id;
	int state;              /* SEG_* */
	fv_seg_header h;
} seg_found;

#define SEG_OK 0
#define SEG_BAD 1

static int found_cmp(const void *a, const void *b)
{
	uint64_t x = ((const seg_found *)a)->id, y = ((const seg_found *)b)->id;
	return x < y ? -1 : x > y;
}

/* Read the header of segment id. FV_DECODE_* (BAD also for a read error). */
static int seg_read_header(fv_log *l, uint64_t id, fv_seg_header *ret)
{
	unsigned char buf[FV_SEG_HEADER_SIZE];
	char name[FV_NAME_MAX];
	ssize_t n;
	int fd, rc;

	seg_name(name, id, "");
	fd = openat(l->dirfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return FV_DECODE_BAD;
	n = pread(fd, buf, sizeof(buf), 0);
	close(fd);
	if (n != (ssize_t)sizeof(buf))
		return FV_DECODE_BAD;
	rc = fv_seg_header_decode(buf, sizeof(buf), ret);
	if (rc == FV_DECODE_OK && ret->id != id)
		return FV_DECODE_BAD;
	return rc;
}

static void seg_set_aside(fv_log *l, uint64_t id, const char *why)
{
	char name[FV_NAME_MAX], bad[FV_NAME_MAX];

	seg_name(name, id, "");
	seg_name(bad, id, FV_BAD_SUFFIX);
	if (renameat(l->dirfd, name, l->dirfd, bad) == 0)
		log_msg(l, MEMD_LOG_ERROR, "%s/%s: %s; set aside as %s (its vectors are lost "
			"until the index is rebuilt)", l->path, name, why, bad);
	else
		log_msg(l, MEMD_LOG_ERROR, "%s/%s: %s; ignored (cannot rename it: %s)", l->path,
			name, why, strerror(errno));
}

/* List the directory: remove *.tmp, collect segment ids. */
static int32_t scan_dir(fv_log *l, seg_found **ret, size_t *ret_n, memd_error *err)
{
	int fd = fcntl(l->dirfd, F_DUPFD_CLOEXEC, 0);
	seg_found *v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d;

	if (fd < 0 || !(d = fdopendir(fd))) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return io_error(err, l, "cannot list", ".", e);
	}
	rewinddir(d);
	while ((de = readdir(d))) {
		uint64_t id;
		if (ends_with(de->d_name, FV_TMP_SUFFIX)) {
			if (unlinkat(l->dirfd, de->d_name, 0) == 0)
				log_msg(l, MEMD_LOG_INFO, "%s/%s: removed an unfinished segment", l->path,
					de->d_name);
			continue;
		}
		id = seg_parse(de->d_name);
		if (!id)
			continue;
		if (n == cap) {
			size_t nc = cap ? cap * 2 : FV_MIN_SEGS;
			seg_found *nv = realloc(v, nc * sizeof(*nv));
			if (!nv) {
				closedir(d);
				free(v);
				return memd_error_set(err, MEMD_ENOMEM, 0, "filevec: out of memory");
			}
			v = nv;
			cap = nc;
		}
		v[n++] = (seg_found){ .id = id };
	}
	closedir(d);
	if (n)
		qsort(v, n, sizeof(*v), found_cmp);
	*ret = v;
	*ret_n = n;
	return 0;
}

/* Decide which segments are in force. */
static int32_t load_segments(fv_log *l, memd_error *err)
{
	seg_found *f = NULL;
	size_t n = 0;
	uint64_t supersedes = 0;
	int changed = 0;
	int32_t r = scan_dir(l, &f, &n, err);

	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		int rc = seg_read_header(l, f[i].id, &f[i].h);
		char name[FV_NAME_MAX];

		if (f[i].id >= l->next_id)
			l->next_id = f[i].id + 1;
		if (rc == FV_DECODE_NEWER) {
			seg_name(name, f[i].id, "");
			r = memd_error_set(err, MEMD_ECONFLICT, 0,
					   "filevec: %s/%s was written by a newer filevec (format %u, "
					   "this one reads %u)", l->path, name, (unsigned)f[i].h.version,
					   FV_FORMAT_VERSION);
			free(f);
			return r;
		}
		f[i].state = rc == FV_DECODE_OK ? SEG_OK : SEG_BAD;
		if (f[i].state == SEG_OK && f[i].h.supersedes > supersedes)
			supersedes = f[i].h.supersedes;
	}
	for (size_t i = 0; i < n; i++) {
		char name[FV_NAME_MAX];
		if (f[i].id >= supersedes)
			continue;
		/* A compaction finished writing its segment but was cut off
		 * before it deleted these. */
		seg_name(name, f[i].id, "");
		if (unlinkat(l->dirfd, name, 0) == 0)
			log_msg(l, MEMD_LOG_INFO, "%s/%s: removed, superseded by a compaction", l->path,
				name);
		f[i].state = SEG_BAD;
		f[i].id = 0;
		changed = 1;
	}
	for (size_t i = 0; i < n && r == 0; i++) {
		fv_seg s;
		if (!f[i].id)
			continue;
		if (f[i].state == SEG_OK && l->dim && f[i].h.dim != l->dim) {
			char why[FV_NAME_MAX * 2];
			snprintf(why, sizeof(why), "dimension %u differs from the store's %u",
				 (unsigned)f[i].h.dim, (unsigned)l->dim);
			seg_set_aside(l, f[i].id, why);
			changed = 1;
			continue;
		}
		if (f[i].state == SEG_BAD) {
			seg_set_aside(l, f[i].id, "unreadable segment header");
			changed = 1;
			continue;
		}
		l->dim = f[i].h.dim;
		s = (fv_seg){ .id = f[i].id, .flags = f[i].h.flags, .size = 0 };
		r = segs_push(l, &s, err);
	}
	free(f);
	if (r == 0 && changed)
		(void)fsync(l->dirfd);
	return r;
}

/* The lock file holds the pid of the process that has the lock (as text,
 * for an operator and for the refusal below): written after the flock is
 * taken. A failure to write it is harmless (the refusal then names no
 * pid), so it is not reported. */
static void record_holder(int lockfd)
{
	char text[FV_PID_TEXT_MAX];
	int n = snprintf(text, sizeof(text), "%ld\n", (long)getpid());

	if (ftruncate(lockfd, 0) != 0 || pwrite(lockfd, text, (size_t)n, 0) != n)
		return; /* the refusal then names no pid */
}

/* The pid in the lock file of a holder, or 0 if it has none readable or
 * that process is gone (the holder is not a filevec that wrote its pid,
 * and a filevec that crashed left its pid behind). */
static long lock_holder(int lockfd)
{
	char text[FV_PID_TEXT_MAX];
	ssize_t n = pread(lockfd, text, sizeof(text) - 1, 0);
	char *end;
	long pid;

	if (n <= 0)
		return 0;
	text[n] = '\0';
	pid = strtol(text, &end, 10);
	if (end == text || (*end != '\n' && *end != '\0') || pid <= 0)
		return 0;
	if (kill((pid_t)pid, 0) != 0 && errno == ESRCH)
		return 0;
	return pid;
}

int32_t fv_log_open(const fv_log_opts *o, fv_log **ret, memd_error *err)
{
	fv_log *l = calloc(1, sizeof(*l));
	int32_t r;

	if (!l)
		return memd_error_set(err, MEMD_ENOMEM, 0, "filevec: out of memory");
	l->dirfd = l->lockfd = l->active_fd = -1;
	l->fsync = o->fsync;
	l->host = o->host;
	l->next_id = 1;
	l->path = strdup(o->path);
	if (!l->path) {
		r = memd_error_set(err, MEMD_ENOMEM, 0, "filevec: out of memory");
		goto fail;
	}
	r = make_dirs(o->path, err);
	if (r < 0)
		goto fail;
	l->dirfd = open(o->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (l->dirfd < 0) {
		r = memd_error_set(err, MEMD_EIO, 0, "filevec: cannot open directory %s: %s", o->path,
				   strerror(errno));
		goto fail;
	}
	l->lockfd = openat(l->dirfd, FV_LOCK_NAME, O_RDWR | O_CREAT | O_CLOEXEC, FV_FILE_MODE);
	if (l->lockfd < 0) {
		r = io_error(err, l, "cannot open", FV_LOCK_NAME, errno);
		goto fail;
	}
	if (flock(l->lockfd, LOCK_EX | LOCK_NB) != 0) {
		long holder;
		if (errno != EWOULDBLOCK)
			r = io_error(err, l, "cannot lock", FV_LOCK_NAME, errno);
		else if ((holder = lock_holder(l->lockfd)) > 0)
			r = memd_error_set(err, MEMD_EUNAVAIL, MEMD_ERROR_RETRYABLE,
					   "filevec: %s is locked by process %ld (%s/" FV_LOCK_NAME
					   "), e.g. a running memd serve",
					   o->path, holder, o->path);
		else
			r = memd_error_set(err, MEMD_EUNAVAIL, MEMD_ERROR_RETRYABLE,
					   "filevec: %s is locked by another instance or process (%s/"
					   FV_LOCK_NAME ")",
					   o->path, o->path);
		goto fail;
	}
	record_holder(l->lockfd);
	r = load_segments(l, err);
	if (r < 0)
		goto fail;
	*ret = l;
	return 0;
fail:
	fv_log_close(l);
	return r;
}

void fv_log_close(fv_log *l)
{
	if (!l)
		return;
	if (l->active_fd >= 0)
		close(l->active_fd);
	if (l->lockfd >= 0)
		close(l->lockfd); /* releases the flock */
	if (l->dirfd >= 0)
		close(l->dirfd);
	free(l->segs);
	free(l->path);
	free(l);
}

uint32_t fv_log_dim(const fv_log *l)
{
	return l->dim;
}

uint64_t fv_log_bytes(const fv_log *l)
{
	return l->bytes;
}

/* ---- replay ----------------------------------------------------------- */

/* The offset of the next intact record after a bad one at off, or 0. */
static size_t resync(const unsigned char *map, size_t off, size_t end, uint32_t dim)
{
	static const unsigned char magic[] = { FV_REC_MAGIC & 0xff, (FV_REC_MAGIC >> 8) & 0xff,
					       (FV_REC_MAGIC >> 16) & 0xff, FV_REC_MAGIC >> 24 };

	for (size_t p = off + FV_REC_ALIGN; p + FV_REC_HEADER_SIZE <= end; p += FV_REC_ALIGN) {
		fv_rec r;
		size_t sz;
		if (memcmp(map + p, magic, sizeof(magic)) == 0 &&
		    fv_rec_decode(map + p, end - p, dim, &r, &sz) == FV_DECODE_OK)
			return p;
	}
	return 0;
}

/* Replay the records of one mapped segment; *ret_end is where the intact
 * data ends (the file size unless the tail is torn). */
static int32_t replay_map(fv_log *l, const char *name, const unsigned char *map, size_t size,
			  fv_replay_fn fn, void *userdata, size_t *ret_end, memd_error *err)
{
	size_t off = FV_SEG_HEADER_SIZE;

	while (off < size) {
		fv_rec rec;
		size_t sz, next;
		int32_t r;

		if (fv_rec_decode(map + off, size - off, l->dim, &rec, &sz) == FV_DECODE_OK) {
			r = fn(userdata, &rec, (uint32_t)sz, err);
			if (r < 0)
				return r;
			off += sz;
			continue;
		}
		next = resync(map, off, size, l->dim);
		if (!next)
			break;
		log_msg(l, MEMD_LOG_WARN, "%s/%s: skipped %zu damaged bytes at offset %zu", l->path,
			name, next - off, off);
		off = next;
	}
	*ret_end = off;
	return 0;
}

static int32_t replay_one(fv_log *l, size_t i, fv_replay_fn fn, void *userdata, memd_error *err)
{
	fv_seg *s = &l->segs[i];
	int appendable = i == l->n_segs - 1 && !(s->flags & FV_SEG_COMPACTED);
	char name[FV_NAME_MAX];
	struct stat st;
	size_t end = FV_SEG_HEADER_SIZE;
	int32_t r = 0;
	int fd;

	seg_name(name, s->id, "");
	fd = openat(l->dirfd, name, (appendable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
	if (fd < 0)
		return io_error(err, l, "cannot open", name, errno);
	if (fstat(fd, &st) != 0) {
		r = io_error(err, l, "cannot stat", name, errno);
		goto out;
	}
	if ((size_t)st.st_size > FV_SEG_HEADER_SIZE) {
		void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (map == MAP_FAILED) {
			r = io_error(err, l, "cannot map", name, errno);
			goto out;
		}
		(void)madvise(map, (size_t)st.st_size, MADV_SEQUENTIAL);
		r = replay_map(l, name, map, (size_t)st.st_size, fn, userdata, &end, err);
		munmap(map, (size_t)st.st_size);
		if (r < 0)
			goto out;
	}
	s->size = (uint64_t)st.st_size;
	if (end < (size_t)st.st_size) {
		if (appendable) {
			/* A write cut short: appends continue from the last intact record. */
			if (ftruncate(fd, (off_t)end) != 0 || fsync(fd) != 0) {
				r = io_error(err, l, "cannot truncate the torn tail of", name, errno);
				goto out;
			}
			s->size = end;
			log_msg(l, MEMD_LOG_WARN, "%s/%s: dropped %zu bytes of an unfinished write at the end",
				l->path, name, (size_t)st.st_size - end);
		} else {
			log_msg(l, MEMD_LOG_WARN, "%s/%s: ignored %zu unreadable bytes at the end", l->path,
				name, (size_t)st.st_size - end);
		}
	}
	if (s->size < FV_SEG_HEADER_SIZE)
		s->size = FV_SEG_HEADER_SIZE;
	l->bytes += s->size - FV_SEG_HEADER_SIZE;
	if (appendable) {
		l->active_fd = fd;
		fd = -1;
	}
out:
	if (fd >= 0)
		close(fd);
	return r;
}

int32_t fv_log_replay(fv_log *l, fv_replay_fn fn, void *userdata, memd_error *err)
{
	for (size_t i = 0; i < l->n_segs; i++) {
		int32_t r = replay_one(l, i, fn, userdata, err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* ---- writes ----------------------------------------------------------- */

int32_t fv_log_set_dim(fv_log *l, uint32_t dim, memd_error *err)
{
	int32_t r;

	if (l->dim)
		return memd_error_set(err, MEMD_EINTERNAL, 0, "filevec: dimension already set");
	l->dim = dim;
	r = seg_start(l, err);
	if (r < 0)
		l->dim = 0;
	return r;
}

static int32_t broken_error(const fv_log *l, memd_error *err)
{
	return memd_error_set(err, MEMD_EIO, 0,
			      "filevec: %s: an earlier write failed and could not be undone; "
			      "reopen the store", l->path);
}

int32_t fv_log_append(fv_log *l, const void *buf, size_t len, memd_error *err)
{
	char name[FV_NAME_MAX];
	fv_seg *s;
	int32_t r;
	int e;

	if (__atomic_load_n(&l->broken, __ATOMIC_RELAXED))
		return broken_error(l, err);
	if (l->active_fd < 0) {
		r = seg_start(l, err);
		if (r < 0)
			return r;
	}
	s = &l->segs[l->n_segs - 1];
	seg_name(name, s->id, "");
	if (write_all(l->active_fd, buf, len, s->size) != 0) {
		e = errno;
		if (ftruncate(l->active_fd, (off_t)s->size) != 0)
			__atomic_store_n(&l->broken, 1, __ATOMIC_RELAXED);
		return io_error(err, l, "cannot write to", name, e);
	}
	if (l->fsync && fdatasync(l->active_fd) != 0) {
		/* After a failed sync the page cache cannot be trusted: the
		 * log is marked broken whether the truncation works or not
		 * (a (void) cast does not silence warn_unused_result). */
		e = errno;
		if (ftruncate(l->active_fd, (off_t)s->size) != 0) {
			/* nothing more to undo */
		}
		__atomic_store_n(&l->broken, 1, __ATOMIC_RELAXED);
		return io_error(err, l, "cannot sync", name, e);
	}
	s->size += len;
	l->bytes += len;
	return 0;
}

int32_t fv_log_ping(const fv_log *l, memd_error *err)
{
	struct stat st;

	if (__atomic_load_n(&l->broken, __ATOMIC_RELAXED))
		return broken_error(l, err);
	if (fstat(l->dirfd, &st) != 0 || st.st_nlink == 0)
		return memd_error_set(err, MEMD_EUNAVAIL, MEMD_ERROR_RETRYABLE,
				      "filevec: directory %s is gone", l->path);
	return 0;
}

/* ---- compaction ------------------------------------------------------- */

int32_t fv_log_compact_begin(fv_log *l, fv_log_writer **ret, memd_error *err)
{
	fv_log_writer *w;
	int32_t r;

	if (__atomic_load_n(&l->broken, __ATOMIC_RELAXED))
		return broken_error(l, err);
	if (l->cap_segs == 0) {
		/* Room for the compacted segment's entry, so commit cannot fail
		 * after the segment is in force. */
		fv_seg none = { 0 };
		r = segs_push(l, &none, err);
		if (r < 0)
			return r;
		l->n_segs = 0;
	}
	w = calloc(1, sizeof(*w));
	if (!w || !(w->buf = malloc(FV_COMPACT_BUF))) {
		free(w);
		return memd_error_set(err, MEMD_ENOMEM, 0, "filevec: out of memory");
	}
	w->id = l->next_id++;
	r = seg_create_tmp(l, w->id, FV_SEG_COMPACTED, &w->fd, err);
	if (r < 0) {
		free(w->buf);
		free(w);
		return r;
	}
	w->size = FV_SEG_HEADER_SIZE;
	*ret = w;
	return 0;
}

static int32_t writer_flush(fv_log_writer *w, memd_error *err)
{
	if (!w->used)
		return 0;
	if (write_all(w->fd, w->buf, w->used, w->size) != 0) {
		int e = errno;
		uint32_t flags;
		int32_t code = pu_storage_code(pu_storage_errno_kind(e), &flags);

		return memd_error_set(err, code, flags,
				      "filevec: cannot write a compacted segment: %s", strerror(e));
	}
	w->size += w->used;
	w->used = 0;
	return 0;
}

int32_t fv_log_compact_add(fv_log_writer *w, const fv_rec *rec, const float *vector,
			   memd_error *err)
{
	size_t sz = fv_rec_size(rec);

	if (sz > FV_COMPACT_BUF)
		return memd_error_set(err, MEMD_EINTERNAL, 0, "filevec: record of %zu bytes", sz);
	if (sz > FV_COMPACT_BUF - w->used) {
		int32_t r = writer_flush(w, err);
		if (r < 0)
			return r;
	}
	fv_rec_encode(rec, vector, w->buf + w->used);
	w->used += sz;
	return 0;
}

static void writer_free(fv_log_writer *w)
{
	free(w->buf);
	free(w);
}

void fv_log_compact_abort(fv_log *l, fv_log_writer *w)
{
	char tmp[FV_NAME_MAX];

	if (!w)
		return;
	seg_name(tmp, w->id, FV_TMP_SUFFIX);
	close(w->fd);
	unlinkat(l->dirfd, tmp, 0);
	writer_free(w);
}

int32_t fv_log_compact_commit(fv_log *l, fv_log_writer *w, memd_error *err)
{
	fv_seg s = { .id = w->id, .flags = FV_SEG_COMPACTED };
	int32_t r = writer_flush(w, err);
	memd_error perr = { .struct_size = sizeof(perr) };
	int synced;

	if (r < 0) {
		fv_log_compact_abort(l, w);
		return r;
	}
	s.size = w->size;
	r = seg_publish(l, w->fd, w->id, &perr); /* closes fd on failure */
	if (r < 0) {
		writer_free(w);
		if (err)
			*err = perr;
		return r;
	}
	synced = r == 0;
	close(w->fd);
	writer_free(w);
	/* The new segment is in force (a reopen would use it and delete the
	 * old ones): from here on, so does this process. */
	if (l->active_fd >= 0) {
		close(l->active_fd);
		l->active_fd = -1;
	}
	if (synced) {
		for (size_t i = 0; i < l->n_segs; i++) {
			char name[FV_NAME_MAX];
			seg_name(name, l->segs[i].id, "");
			if (unlinkat(l->dirfd, name, 0) != 0)
				log_msg(l, MEMD_LOG_WARN, "%s/%s: cannot remove after compaction (%s); "
					"removed at the next open", l->path, name, strerror(errno));
		}
		(void)fsync(l->dirfd);
	} else {
		/* Until the directory is synced, a power loss may bring the old
		 * segments back instead: keep them (the next open removes them). */
		log_msg(l, MEMD_LOG_ERROR, "%s", perr.msg);
	}
	l->n_segs = 0;
	l->bytes = s.size - FV_SEG_HEADER_SIZE;
	l->segs[l->n_segs++] = s; /* cap_segs >= 1 (compact_begin) */
	return 0;
}
