/* SPDX-License-Identifier: MIT */
#include "kw_snapshot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "pu_crc32c.h"

#define KWS_FILE_MODE 0644
#define KWS_DIR_MODE 0755
#define KWS_PREAMBLE_LEN 16
#define KWS_HEADER_LEN 24        /* a section header */
#define KWS_HEADER_CRC_AT 20     /* its CRC covers the bytes before this */
#define KWS_WRITE_BUF (1u << 20) /* bytes buffered before a write() */
#define KWS_READ_BUF (1u << 20)  /* stdio buffer of the reader */
#define KWS_TMP_INFIX ".tmp."
#define KWS_NAME_EXTRA 64        /* room for ".tmp.PID.RAND" */
#define KWS_META_FIXED 44        /* META bytes before the anchors */
#define KWS_ANCHOR_FIXED 12      /* an anchor's bytes before its id */
#define KWS_END_LEN 24
#define KWS_US_PER_SEC 1000000
#define KWS_NS_PER_US 1000
#define KWS_BYTE_BITS 8

/* ---- little-endian fields ---------------------------------------------------------- */

static void put_u32(uint8_t *p, uint32_t v)
{
	for (unsigned i = 0; i < sizeof(v); i++)
		p[i] = (uint8_t)(v >> (KWS_BYTE_BITS * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
	for (unsigned i = 0; i < sizeof(v); i++)
		p[i] = (uint8_t)(v >> (KWS_BYTE_BITS * i));
}

static uint32_t get_u32(const uint8_t *p)
{
	uint32_t v = 0;
	for (unsigned i = 0; i < sizeof(v); i++)
		v |= (uint32_t)p[i] << (KWS_BYTE_BITS * i);
	return v;
}

static uint64_t get_u64(const uint8_t *p)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < sizeof(v); i++)
		v |= (uint64_t)p[i] << (KWS_BYTE_BITS * i);
	return v;
}

/* A section header for kind, payload length and CRC. */
static void header_make(uint8_t h[KWS_HEADER_LEN], uint32_t kind, uint64_t len, uint32_t crc)
{
	put_u32(h, kind);
	put_u32(h + 4, 0);
	put_u64(h + 8, len);
	put_u32(h + 16, crc);
	put_u32(h + KWS_HEADER_CRC_AT, pu_crc32c(0, h, KWS_HEADER_CRC_AT));
}

/* ---- paths -------------------------------------------------------------------------- */

/* The directory part of path ("." when none), malloc'd. */
static char *dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return strdup(".");
	if (slash == path)
		return strdup("/");
	return strndup(path, (size_t)(slash - path));
}

/* mkdir -p of dir. 0 or -1 with errno. */
static int make_dirs(const char *dir)
{
	char *d = strdup(dir);
	int rc = 0;

	if (!d)
		return -1;
	for (char *p = d + 1;; p++) {
		char saved;
		if (*p != '/' && *p != '\0')
			continue;
		saved = *p;
		*p = '\0';
		if (mkdir(d, KWS_DIR_MODE) < 0 && errno != EEXIST) {
			rc = -1;
			break;
		}
		*p = saved;
		if (saved == '\0')
			break;
	}
	free(d);
	return rc;
}

static int sync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc;

	if (fd < 0)
		return -1;
	rc = fsync(fd);
	close(fd);
	return rc;
}

void kws_remove_stale(const char *path)
{
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	size_t bl = strlen(base), il = strlen(KWS_TMP_INFIX);
	char *dir = dir_of(path);
	struct dirent *de;
	DIR *d;

	if (!dir)
		return;
	d = opendir(dir);
	while (d && (de = readdir(d)) != NULL) {
		char *end;
		long pid;
		if (strncmp(de->d_name, base, bl) != 0 ||
		    strncmp(de->d_name + bl, KWS_TMP_INFIX, il) != 0)
			continue;
		errno = 0;
		pid = strtol(de->d_name + bl + il, &end, 10);
		if (errno || pid <= 0 || *end != '.' || pid == (long)getpid())
			continue;
		if (kill((pid_t)pid, 0) < 0 && errno == ESRCH)
			(void)unlinkat(dirfd(d), de->d_name, 0);
	}
	if (d)
		closedir(d);
	free(dir);
}

/* ---- writing ------------------------------------------------------------------------- */

struct kws_writer {
	int fd;
	char *path, *tmp, *dir;
	uint8_t *buf;
	size_t n;              /* bytes in buf */
	uint64_t off;          /* file offset of buf[0] */
	int in_section;
	uint64_t sec_at;       /* file offset of the open section's header */
	uint64_t sec_len;
	uint32_t sec_kind, sec_crc;
	uint64_t sections;
};

static int32_t io_error(memd_error *err, const char *what, const char *path)
{
	return memd_error_set(err, MEMD_EIO, 0, "keyword snapshot: cannot %s %s: %s", what, path,
			      strerror(errno));
}

static int32_t w_flush(kws_writer *w, memd_error *err)
{
	size_t done = 0;
	while (done < w->n) {
		ssize_t k = write(w->fd, w->buf + done, w->n - done);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return io_error(err, "write", w->tmp);
		done += (size_t)k;
	}
	w->off += w->n;
	w->n = 0;
	return 0;
}

static int32_t w_put(kws_writer *w, const void *p, size_t n, memd_error *err)
{
	const uint8_t *b = p;
	int32_t r;

	if (w->in_section) {
		w->sec_crc = pu_crc32c(w->sec_crc, p, n);
		w->sec_len += n;
	}
	while (n) {
		size_t k = KWS_WRITE_BUF - w->n < n ? KWS_WRITE_BUF - w->n : n;
		memcpy(w->buf + w->n, b, k);
		w->n += k;
		b += k;
		n -= k;
		if (w->n == KWS_WRITE_BUF && (r = w_flush(w, err)) < 0)
			return r;
	}
	return 0;
}

static int32_t w_begin(kws_writer *w, uint32_t kind, memd_error *err)
{
	uint8_t zero[KWS_HEADER_LEN] = { 0 };
	int32_t r;

	w->sec_at = w->off + w->n;
	if ((r = w_put(w, zero, sizeof(zero), err)) < 0)
		return r;
	w->in_section = 1;
	w->sec_kind = kind;
	w->sec_len = 0;
	w->sec_crc = 0;
	return 0;
}

/* Fill in the open section's header: in the buffer if it is still
 * there, else in the file. */
static int32_t w_end(kws_writer *w, memd_error *err)
{
	uint8_t h[KWS_HEADER_LEN];

	header_make(h, w->sec_kind, w->sec_len, w->sec_crc);
	w->in_section = 0;
	w->sections++;
	if (w->sec_at >= w->off) {
		memcpy(w->buf + (w->sec_at - w->off), h, sizeof(h));
		return 0;
	}
	for (size_t done = 0; done < sizeof(h);) {
		ssize_t k = pwrite(w->fd, h + done, sizeof(h) - done, (off_t)(w->sec_at + done));
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return io_error(err, "write", w->tmp);
		done += (size_t)k;
	}
	return 0;
}

static int32_t sink_begin(void *ud, uint32_t kind, memd_error *err)
{
	return w_begin(ud, KWS_SECTION_INDEX + kind, err);
}

static int32_t sink_write(void *ud, const void *p, size_t n, memd_error *err)
{
	return w_put(ud, p, n, err);
}

static int32_t sink_end(void *ud, memd_error *err)
{
	return w_end(ud, err);
}

static void writer_free(kws_writer *w)
{
	if (!w)
		return;
	if (w->fd >= 0)
		close(w->fd);
	free(w->buf);
	free(w->path);
	free(w->tmp);
	free(w->dir);
	free(w);
}

int32_t kws_writer_open(const char *path, kws_writer **ret, memd_error *err)
{
	kws_writer *w;
	uint32_t rnd;
	size_t len;

	if (!path || !*path)
		return memd_error_set(err, MEMD_EINVAL, 0, "keyword snapshot: no path");
	len = strlen(path) + KWS_NAME_EXTRA;
	w = calloc(1, sizeof(*w));
	if (!w)
		return memd_error_set(err, MEMD_ENOMEM, 0, "keyword snapshot: out of memory");
	w->fd = -1;
	w->path = strdup(path);
	w->tmp = malloc(len);
	w->dir = dir_of(path);
	w->buf = malloc(KWS_WRITE_BUF);
	if (!w->path || !w->tmp || !w->dir || !w->buf) {
		writer_free(w);
		return memd_error_set(err, MEMD_ENOMEM, 0, "keyword snapshot: out of memory");
	}
	/* A name no other writer (thread or process) uses. */
	if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		rnd = (uint32_t)(uintptr_t)w ^ (uint32_t)time(NULL);
	snprintf(w->tmp, len, "%s" KWS_TMP_INFIX "%ld.%08x", path, (long)getpid(), rnd);
	if (make_dirs(w->dir) < 0) {
		int32_t r = io_error(err, "create the directory", w->dir);
		writer_free(w);
		return r;
	}
	w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, KWS_FILE_MODE);
	if (w->fd < 0) {
		int32_t r = io_error(err, "create", w->tmp);
		writer_free(w);
		return r;
	}
	*ret = w;
	return 0;
}

static int32_t put_meta(kws_writer *w, const kws_meta *m, memd_error *err)
{
	uint8_t fixed[KWS_META_FIXED];
	uint32_t n = m->n_anchors < KWS_ANCHORS ? m->n_anchors : KWS_ANCHORS;
	int32_t r;

	put_u64(fixed, m->store_id);
	put_u64(fixed + 8, (uint64_t)m->position);
	put_u32(fixed + 16, m->analyzer_version);
	put_u32(fixed + 20, 0);
	put_u64(fixed + 24, m->analyzer);
	put_u64(fixed + 32, (uint64_t)m->written_us);
	put_u32(fixed + 40, n);
	if ((r = w_begin(w, KWS_SECTION_META, err)) < 0 ||
	    (r = w_put(w, fixed, sizeof(fixed), err)) < 0)
		return r;
	for (uint32_t i = 0; i < n; i++) {
		uint8_t a[KWS_ANCHOR_FIXED];
		size_t len = strnlen(m->anchors[i].event_id, MEMD_ID_MAX);
		put_u64(a, (uint64_t)m->anchors[i].position);
		put_u32(a + 8, (uint32_t)len);
		if ((r = w_put(w, a, sizeof(a), err)) < 0 ||
		    (r = w_put(w, m->anchors[i].event_id, len, err)) < 0)
			return r;
	}
	return w_end(w, err);
}

int32_t kws_writer_dump(kws_writer *w, const kws_meta *meta, kw_index *kw, uint64_t *ret_bytes,
			uint64_t *ret_documents, memd_error *err)
{
	kw_sink sink = { w, sink_begin, sink_write, sink_end };
	uint8_t pre[KWS_PREAMBLE_LEN], end[KWS_END_LEN];
	uint64_t docs = 0, before;
	int32_t r;

	memcpy(pre, KWS_MAGIC, KWS_MAGIC_LEN);
	put_u32(pre + KWS_MAGIC_LEN, KWS_FORMAT_VERSION);
	put_u32(pre + KWS_MAGIC_LEN + 4, 0);
	if ((r = w_put(w, pre, sizeof(pre), err)) < 0 || (r = put_meta(w, meta, err)) < 0 ||
	    (r = kw_dump(kw, &sink, &docs, err)) < 0)
		return r;
	before = w->off + w->n;
	put_u64(end, w->sections);
	put_u64(end + 8, docs);
	put_u64(end + 16, before);
	if ((r = w_begin(w, KWS_SECTION_END, err)) < 0 || (r = w_put(w, end, sizeof(end), err)) < 0 ||
	    (r = w_end(w, err)) < 0 || (r = w_flush(w, err)) < 0)
		return r;
	if (ret_bytes)
		*ret_bytes = w->off;
	if (ret_documents)
		*ret_documents = docs;
	return 0;
}

int32_t kws_writer_commit(kws_writer *w, memd_error *err)
{
	int32_t r = 0;

	if (fsync(w->fd) < 0)
		r = io_error(err, "sync", w->tmp);
	else if (close(w->fd) < 0)
		r = io_error(err, "close", w->tmp);
	w->fd = -1;
	if (r == 0 && rename(w->tmp, w->path) < 0)
		r = io_error(err, "rename the new snapshot to", w->path);
	if (r < 0) {
		(void)unlink(w->tmp);
		writer_free(w);
		return r;
	}
	/* The rename is durable once the directory is. */
	if (sync_dir(w->dir) < 0)
		r = io_error(err, "sync the directory", w->dir);
	writer_free(w);
	return r;
}

void kws_writer_abort(kws_writer *w)
{
	if (!w)
		return;
	if (w->fd >= 0) {
		close(w->fd);
		w->fd = -1;
	}
	(void)unlink(w->tmp);
	writer_free(w);
}

/* ---- reading ------------------------------------------------------------------------- */

struct kws_reader {
	FILE *f;
	char *path;
	uint64_t size, pos;    /* file size; offset of the next byte read */
	uint8_t *buf;          /* the current section's payload */
	size_t cap;
	uint64_t sections;     /* read so far */
	const volatile int32_t *cancel;
	uint64_t documents;    /* from END */
};

static int32_t corrupt(kws_reader *r, memd_error *err, const char *why)
{
	return memd_error_set(err, MEMD_EINVAL, 0, "%s: %s", r->path, why);
}

/* Read exactly n bytes; 1 on success, 0 at a clean end of file before
 * any byte, or a negative MEMD_E*. */
static int32_t r_read(kws_reader *r, void *p, size_t n, memd_error *err)
{
	size_t k = fread(p, 1, n, r->f);

	r->pos += k;
	if (k == n)
		return 1;
	if (ferror(r->f))
		return memd_error_set(err, MEMD_EIO, 0, "%s: read failed: %s", r->path, strerror(errno));
	if (k == 0)
		return 0;
	return corrupt(r, err, "truncated in the middle of a section");
}

/* The next section into r->buf; 1 with kind and length, 0 at the end of
 * the file (before a header), or a negative MEMD_E*. */
static int32_t r_section(kws_reader *r, uint32_t *ret_kind, size_t *ret_len, memd_error *err)
{
	uint8_t h[KWS_HEADER_LEN];
	uint64_t len;
	int32_t rc;

	if ((rc = r_read(r, h, sizeof(h), err)) <= 0)
		return rc;
	if (get_u32(h + KWS_HEADER_CRC_AT) != pu_crc32c(0, h, KWS_HEADER_CRC_AT) ||
	    get_u32(h + 4) != 0)
		return corrupt(r, err, "a section header is damaged (checksum mismatch)");
	len = get_u64(h + 8);
	if (len > r->size - r->pos)
		return corrupt(r, err, "truncated (a section runs past the end of the file)");
	if (len > r->cap) {
		uint8_t *b = realloc(r->buf, (size_t)len);
		if (!b)
			return memd_error_set(err, MEMD_ENOMEM, 0, "keyword snapshot: out of memory");
		r->buf = b;
		r->cap = (size_t)len;
	}
	if (len && (rc = r_read(r, r->buf, (size_t)len, err)) <= 0)
		return rc < 0 ? rc : corrupt(r, err, "truncated");
	if (pu_crc32c(0, r->buf, (size_t)len) != get_u32(h + 16))
		return corrupt(r, err, "a section is damaged (checksum mismatch)");
	r->sections++;
	*ret_kind = get_u32(h);
	*ret_len = (size_t)len;
	return 1;
}

static int32_t parse_meta(kws_reader *r, size_t len, kws_meta *m, memd_error *err)
{
	const uint8_t *p = r->buf;
	size_t at = KWS_META_FIXED;

	if (len < KWS_META_FIXED)
		return corrupt(r, err, "the META section is too short");
	memset(m, 0, sizeof(*m));
	m->store_id = get_u64(p);
	m->position = (int64_t)get_u64(p + 8);
	m->analyzer_version = get_u32(p + 16);
	m->analyzer = get_u64(p + 24);
	m->written_us = (int64_t)get_u64(p + 32);
	m->n_anchors = get_u32(p + 40);
	if (m->n_anchors > KWS_ANCHORS)
		return corrupt(r, err, "too many anchors in META");
	for (uint32_t i = 0; i < m->n_anchors; i++) {
		uint32_t idl;
		if (len - at < KWS_ANCHOR_FIXED)
			return corrupt(r, err, "the META section is too short");
		m->anchors[i].position = (int64_t)get_u64(p + at);
		idl = get_u32(p + at + 8);
		at += KWS_ANCHOR_FIXED;
		if (idl == 0 || idl > MEMD_ID_MAX || idl > len - at || memchr(p + at, '\0', idl))
			return corrupt(r, err, "a malformed anchor in META");
		memcpy(m->anchors[i].event_id, p + at, idl);
		m->anchors[i].event_id[idl] = '\0';
		at += idl;
	}
	if (at != len)
		return corrupt(r, err, "bytes after the anchors in META");
	return 0;
}

void kws_reader_close(kws_reader *r)
{
	if (!r)
		return;
	if (r->f)
		fclose(r->f);
	free(r->buf);
	free(r->path);
	free(r);
}

int32_t kws_reader_open(const char *path, kws_reader **ret, kws_meta *ret_meta, memd_error *err)
{
	kws_reader *r = calloc(1, sizeof(*r));
	uint8_t pre[KWS_PREAMBLE_LEN];
	kws_meta meta;
	struct stat st;
	uint32_t kind, version;
	size_t len;
	int32_t rc;

	if (!r || !(r->path = strdup(path))) {
		free(r);
		return memd_error_set(err, MEMD_ENOMEM, 0, "keyword snapshot: out of memory");
	}
	r->f = fopen(path, "rbe");
	if (!r->f) {
		rc = errno == ENOENT ? memd_error_set(err, MEMD_ENOTFOUND, 0, "%s: no such file", path)
				     : memd_error_set(err, MEMD_EIO, 0, "%s: cannot open: %s", path,
						      strerror(errno));
		kws_reader_close(r);
		return rc;
	}
	(void)setvbuf(r->f, NULL, _IOFBF, KWS_READ_BUF);
	if (fstat(fileno(r->f), &st) < 0) {
		rc = memd_error_set(err, MEMD_EIO, 0, "%s: cannot stat: %s", path, strerror(errno));
		goto fail;
	}
	r->size = (uint64_t)st.st_size;
	if ((rc = r_read(r, pre, sizeof(pre), err)) <= 0) {
		if (rc == 0)
			rc = corrupt(r, err, "empty file");
		goto fail;
	}
	if (memcmp(pre, KWS_MAGIC, KWS_MAGIC_LEN) != 0) {
		rc = corrupt(r, err, "not a keyword snapshot (bad magic)");
		goto fail;
	}
	version = get_u32(pre + KWS_MAGIC_LEN);
	if (version != KWS_FORMAT_VERSION) {
		rc = memd_error_set(err, MEMD_EINVAL, 0, "%s: format version %u, this memd reads %u",
				    path, version, KWS_FORMAT_VERSION);
		goto fail;
	}
	if ((rc = r_section(r, &kind, &len, err)) <= 0) {
		if (rc == 0)
			rc = corrupt(r, err, "truncated (no META section)");
		goto fail;
	}
	if (kind != KWS_SECTION_META) {
		rc = corrupt(r, err, "the first section is not META");
		goto fail;
	}
	if ((rc = parse_meta(r, len, &meta, err)) < 0)
		goto fail;
	*ret = r;
	*ret_meta = meta;
	return 0;
fail:
	kws_reader_close(r);
	return rc;
}

/* kw_source.next: index sections until END, which is checked. */
static int32_t source_next(void *ud, uint32_t *ret_kind, const uint8_t **ret_data,
			   size_t *ret_len, memd_error *err)
{
	kws_reader *r = ud;
	uint64_t before = r->pos;
	uint32_t kind;
	size_t len;
	int32_t rc;

	if (r->cancel && *r->cancel)
		return memd_error_set(err, MEMD_ECANCELED, 0, "keyword snapshot: loading stopped");
	rc = r_section(r, &kind, &len, err);
	if (rc == 0)
		return corrupt(r, err, "truncated (no END section)");
	if (rc < 0)
		return rc;
	if (kind == KWS_SECTION_END) {
		if (len != KWS_END_LEN || get_u64(r->buf) != r->sections - 1 ||
		    get_u64(r->buf + 16) != before)
			return corrupt(r, err, "the END section does not match the file");
		if (r->pos != r->size)
			return corrupt(r, err, "bytes after the END section");
		r->documents = get_u64(r->buf + 8);
		return 0;
	}
	if (kind < KWS_SECTION_INDEX)
		return corrupt(r, err, "a section out of place");
	*ret_kind = kind - KWS_SECTION_INDEX;
	*ret_data = r->buf;
	*ret_len = len;
	return 1;
}

int32_t kws_reader_load(kws_reader *r, kw_index *kw, const volatile int32_t *cancel,
			uint64_t *ret_documents, memd_error *err)
{
	kw_source src = { r, source_next };
	kw_stats st;
	int32_t rc;

	r->cancel = cancel;
	if ((rc = kw_restore(kw, &src, err)) < 0)
		return rc;
	kw_get_stats(kw, &st);
	if (st.documents != r->documents) {
		kw_clear(kw);
		return corrupt(r, err, "the document count in END does not match the index");
	}
	if (ret_documents)
		*ret_documents = r->documents;
	return 0;
}
