/* fence-store's write-ahead log files (see wal.h). */
#include "store/wal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/assert.h"
#include "base/bytes.h"
#include "base/crc32c.h"
#include "base/fs.h"
#include "base/limits.h"
#include "base/log.h"
#include "store/walrec.h"

/* The file header's magic and version. */
#define MAGIC "FSWAL\0\0\1"
#define VERSION 1
/* Header bytes covered by its CRC (magic, version, header size, size). */
#define HDR_USED 24

/* One of the two files. */
typedef struct wal_file {
    int fd;           /* open read-write */
    uint64_t size;    /* bytes, header included */
    uint64_t max_lsn; /* highest LSN written to it since it was last
                       * started over (0: none) */
} wal_file;

struct fence_store_wal {
    wal_file f[2];          /* wal.0 and wal.1 */
    int cur;                /* the file appended to */
    uint64_t off;           /* where the next record goes in f[cur] */
    uint64_t durable;       /* every LSN up to this is durable in LMDB */
    fence_store_wal_stats st; /* counters */
    char dir[1024];         /* the data directory (messages) */
};

/* The path of file i (or its temporary twin) in dir. */
static void file_path(char *buf, size_t cap, const char *dir, int i,
                      bool tmp)
{
    snprintf(buf, cap, "%s/wal.%d%s", dir, i, tmp ? ".tmp" : "");
}

/* Encode the header of a size-byte file into h[FENCE_STORE_WAL_HDR]. */
static void header_encode(uint8_t *h, uint64_t size)
{
    memset(h, 0, FENCE_STORE_WAL_HDR);
    memcpy(h, MAGIC, 8);
    fence__put_u32(h + 8, VERSION);
    fence__put_u32(h + 12, FENCE_STORE_WAL_HDR);
    fence__put_u64(h + 16, size);
    fence__put_u32(h + HDR_USED, fence__crc32c(h, HDR_USED));
}

/* Create file i of size bytes: header and zeros written to a temporary
 * file, synced, renamed into place, directory synced.  0 or an errno. */
static int file_create(const char *dir, int i, uint64_t size)
{
    char tmp[1100], path[1100];
    file_path(tmp, sizeof(tmp), dir, i, true);
    file_path(path, sizeof(path), dir, i, false);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return errno;
    int rc = 0;
    size_t chunk = 1024 * 1024;
    uint8_t *zeros = calloc(1, chunk);
    if (zeros == NULL) {
        rc = ENOMEM;
        goto out_close;
    }
    header_encode(zeros, size);
    for (uint64_t off = 0; off < size && rc == 0; off += chunk) {
        size_t n = size - off < chunk ? (size_t)(size - off) : chunk;
        rc = fence__fs_pwrite_all(fd, zeros, n, off);
        if (off == 0)
            memset(zeros, 0, FENCE_STORE_WAL_HDR);
    }
    free(zeros);
    if (rc == 0 && fsync(fd) != 0)
        rc = errno;
out_close:
    if (close(fd) != 0 && rc == 0)
        rc = errno;
    if (rc == 0 && rename(tmp, path) != 0)
        rc = errno;
    if (rc == 0)
        rc = fence__fs_fsync_dir(dir);
    if (rc != 0)
        (void)unlink(tmp);
    return rc;
}

/* Open file i (creating it with size bytes if missing) into *f; 0, or -1
 * with a message. */
static int file_open(const char *dir, int i, uint64_t size, wal_file *f,
                     char *err, size_t errcap)
{
    char path[1100];
    file_path(path, sizeof(path), dir, i, false);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
        int rc = file_create(dir, i, size);
        if (rc != 0) {
            snprintf(err, errcap, "cannot create the write-ahead log %s "
                     "(%" PRIu64 " bytes): %s", path, size, strerror(rc));
            return -1;
        }
        FENCE_LOG_I("write-ahead log %s created (%" PRIu64 " bytes)", path,
                    size);
        fd = open(path, O_RDWR | O_CLOEXEC);
    }
    if (fd < 0) {
        snprintf(err, errcap, "cannot open the write-ahead log %s: %s", path,
                 strerror(errno));
        return -1;
    }
    uint8_t h[FENCE_STORE_WAL_HDR], want[FENCE_STORE_WAL_HDR];
    struct stat sb;
    int rc = fstat(fd, &sb) != 0 ? errno : fence__fs_pread_all(fd, h, sizeof(h), 0);
    if (rc != 0) {
        snprintf(err, errcap, "cannot read the write-ahead log %s: %s", path,
                 strerror(rc));
        close(fd);
        return -1;
    }
    uint64_t fsize = fence__get_u64(h + 16);
    header_encode(want, fsize);
    if (memcmp(h, want, HDR_USED + 4) != 0 || fsize != (uint64_t)sb.st_size ||
        fsize < FENCE_STORE_WAL_HDR + 4096) {
        snprintf(err, errcap, "the write-ahead log %s has a bad header "
                 "(not a fence-store WAL file of this version, or damaged); "
                 "refusing to start", path);
        close(fd);
        return -1;
    }
    f->fd = fd;
    f->size = fsize;
    f->max_lsn = 0;
    return 0;
}

/* Open the log (wal.h). */
int fence__store_wal_open(const char *dir, uint64_t want,
                          fence_store_wal **out, char *err, size_t errcap)
{
    FENCE_ASSERT(out != NULL);
    *out = NULL;
    fence_store_wal *w = calloc(1, sizeof(*w));
    if (w == NULL) {
        snprintf(err, errcap, "out of memory");
        return -1;
    }
    snprintf(w->dir, sizeof(w->dir), "%s", dir);
    w->f[0].fd = w->f[1].fd = -1;
    uint64_t avail = 0, size = want;
    if (fence__fs_free_bytes(dir, &avail) == 0 && avail / 8 < size)
        size = avail / 8;
    struct rlimit lim; /* a file-size limit (ulimit -f) caps the files too */
    if (getrlimit(RLIMIT_FSIZE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY &&
        (uint64_t)lim.rlim_cur / 4 < size)
        size = (uint64_t)lim.rlim_cur / 4;
    if (size < FENCE_STORE_WAL_FILE_MIN)
        size = FENCE_STORE_WAL_FILE_MIN;
    size -= size % 4096;
    for (int i = 0; i < 2; i++) {
        if (file_open(dir, i, size, &w->f[i], err, errcap) != 0) {
            fence__store_wal_close(w);
            return -1;
        }
    }
    w->cur = 0;
    w->off = FENCE_STORE_WAL_HDR;
    w->st.file_size = w->f[0].size < w->f[1].size ? w->f[0].size
                                                  : w->f[1].size;
    *out = w;
    return 0;
}

/* Close (wal.h). */
void fence__store_wal_close(fence_store_wal *w)
{
    if (w == NULL)
        return;
    for (int i = 0; i < 2; i++)
        if (w->f[i].fd >= 0)
            close(w->f[i].fd);
    free(w);
}

/* The valid run of records at the start of one file. */
typedef struct chain {
    uint8_t *buf;     /* the whole file (malloc) */
    uint64_t size;    /* bytes in buf */
    uint64_t first;   /* LSN of the first record (0: none) */
    uint64_t last;    /* LSN of the last record of the run */
    uint64_t end;     /* offset just past the run */
} chain;

/* Read file f and find its run: consecutive LSNs from the header on,
 * ending at the first place that is not a valid record or whose LSN is
 * not the next one.  A valid record right after the run whose LSN is
 * higher than the next one is a gap: -1 with a message. */
static int chain_scan(fence_store_wal *w, int i, chain *c, char *err,
                      size_t errcap)
{
    wal_file *f = &w->f[i];
    memset(c, 0, sizeof(*c));
    c->buf = malloc(f->size);
    if (c->buf == NULL) {
        snprintf(err, errcap, "out of memory reading the write-ahead log");
        return -1;
    }
    c->size = f->size;
    int rc = fence__fs_pread_all(f->fd, c->buf, f->size, 0);
    if (rc != 0) {
        snprintf(err, errcap, "cannot read %s/wal.%d: %s", w->dir, i,
                 strerror(rc));
        return -1;
    }
    uint64_t off = FENCE_STORE_WAL_HDR;
    fence_store_walrec r;
    while (off < c->size) {
        size_t n = fence__store_walrec_parse(c->buf + off, c->size - off, &r);
        if (n == 0)
            break;
        if (c->first != 0 && r.lsn != c->last + 1) {
            if (r.lsn > c->last + 1) {
                snprintf(err, errcap, "the write-ahead log %s/wal.%d skips "
                         "from LSN %" PRIu64 " to %" PRIu64 " at offset %"
                         PRIu64 ": records are missing; refusing to start",
                         w->dir, i, c->last, r.lsn, off);
                return -1;
            }
            break; /* a lower LSN: left from an earlier cycle */
        }
        if (c->first == 0)
            c->first = r.lsn;
        c->last = r.lsn;
        off += n;
    }
    c->end = off;
    return 0;
}

/* After the run of c, look for a valid record with an LSN above floor:
 * one means the record where the run ends is damaged, not torn.  Its
 * offset, or 0. */
static uint64_t find_later(const chain *c, uint64_t floor)
{
    fence_store_walrec r;
    for (uint64_t off = c->end + 8; off + FENCE_STORE_WALREC_HDR <= c->size;
         off += 8) {
        if (fence__store_walrec_parse(c->buf + off, c->size - off, &r) != 0 &&
            r.lsn > floor)
            return off;
    }
    return 0;
}

/* Apply the records of c with LSNs in (*last, ...) in order; -1 when fn
 * fails. */
static int chain_apply(const chain *c, uint64_t *last, uint64_t *n,
                       fence_store_wal_apply_fn fn, void *ctx, char *err,
                       size_t errcap)
{
    uint64_t off = FENCE_STORE_WAL_HDR;
    fence_store_walrec r;
    while (off < c->end) {
        size_t k = fence__store_walrec_parse(c->buf + off, c->size - off, &r);
        FENCE_ASSERT(k > 0);
        off += k;
        if (r.lsn <= *last)
            continue;
        FENCE_ASSERT(r.lsn == *last + 1);
        if (fn(ctx, r.lsn, r.payload, r.payload_len, r.nops, err, errcap) != 0)
            return -1;
        *last = r.lsn;
        (*n)++;
    }
    return 0;
}

/* Recovery (wal.h). */
int fence__store_wal_replay(fence_store_wal *w, uint64_t after,
                            fence_store_wal_apply_fn fn, void *ctx,
                            uint64_t *last, uint64_t *n, char *err,
                            size_t errcap)
{
    chain c[2];
    memset(c, 0, sizeof(c));
    int rc = -1;
    *n = 0;
    *last = after;
    for (int i = 0; i < 2; i++)
        if (chain_scan(w, i, &c[i], err, errcap) != 0)
            goto out_free;
    /* The run holding after + 1 goes first; the other run may continue
     * it. */
    int order[2] = {0, 1};
    if (c[1].first != 0 && c[1].first <= after + 1 && c[1].last > after)
        order[0] = 1, order[1] = 0;
    else if (c[0].first != 0 && c[1].first != 0 && c[1].first < c[0].first &&
             !(c[0].first <= after + 1 && c[0].last > after))
        order[0] = 1, order[1] = 0;
    for (int k = 0; k < 2; k++) {
        const chain *ch = &c[order[k]];
        if (ch->first == 0 || ch->last <= *last)
            continue;
        if (ch->first > *last + 1) {
            snprintf(err, errcap, "the write-ahead log %s/wal.%d starts at "
                     "LSN %" PRIu64 " but the store holds only up to %" PRIu64
                     ": records are missing; refusing to start", w->dir,
                     order[k], ch->first, *last);
            goto out_free;
        }
        if (chain_apply(ch, last, n, fn, ctx, err, errcap) != 0)
            goto out_free;
    }
    /* A valid record beyond either run, newer than anything applied: the
     * run was cut by damage, not by a torn tail. */
    for (int i = 0; i < 2; i++) {
        uint64_t at = find_later(&c[i], *last);
        if (at != 0) {
            snprintf(err, errcap, "the write-ahead log %s/wal.%d is damaged "
                     "at offset %" PRIu64 " (a bad record followed by valid "
                     "newer ones at offset %" PRIu64 "); refusing to start: "
                     "restore the data directory from a backup", w->dir, i,
                     c[i].end, at);
            goto out_free;
        }
    }
    rc = 0;
out_free:
    free(c[0].buf);
    free(c[1].buf);
    fence__store_wal_reset(w);
    return rc;
}

/* Largest record (wal.h). */
uint64_t fence__store_wal_record_max(const fence_store_wal *w)
{
    return w->st.file_size - FENCE_STORE_WAL_HDR;
}

/* Write a record at the current offset and sync it; fatal on failure. */
static void record_write(fence_store_wal *w, uint64_t lsn, const uint8_t *rec,
                         size_t len)
{
    wal_file *f = &w->f[w->cur];
    FENCE_ASSERT(w->off + len <= f->size);
    int rc = fence__fs_pwrite_all(f->fd, rec, len, w->off);
    if (rc != 0)
        fence__log_fatal("write to the write-ahead log %s/wal.%d failed: %s",
                         w->dir, w->cur, strerror(rc));
    if (fdatasync(f->fd) != 0)
        fence__log_fatal("fdatasync of the write-ahead log %s/wal.%d "
                         "failed: %s", w->dir, w->cur, strerror(errno));
    w->off += len;
    f->max_lsn = lsn;
    w->st.bytes += len;
    w->st.syncs++;
}

/* Append (wal.h). */
fence_store_wal_put fence__store_wal_append(fence_store_wal *w, uint64_t lsn,
                                            const uint8_t *rec, size_t len)
{
    FENCE_ASSERT(len <= fence__store_wal_record_max(w));
    FENCE_ASSERT(lsn > w->f[w->cur].max_lsn);
    if (w->off + len <= w->f[w->cur].size) {
        record_write(w, lsn, rec, len);
        return FENCE_STORE_WAL_WRITTEN;
    }
    int other = 1 - w->cur;
    if (w->f[other].max_lsn > w->durable)
        return FENCE_STORE_WAL_BLOCKED;
    w->cur = other;
    w->off = FENCE_STORE_WAL_HDR;
    w->f[other].max_lsn = 0;
    w->st.switches++;
    record_write(w, lsn, rec, len);
    return FENCE_STORE_WAL_SWITCHED;
}

/* Durable up to lsn (wal.h). */
void fence__store_wal_durable(fence_store_wal *w, uint64_t lsn)
{
    if (lsn > w->durable)
        w->durable = lsn;
}

/* Start over (wal.h). */
void fence__store_wal_reset(fence_store_wal *w)
{
    w->f[0].max_lsn = w->f[1].max_lsn = 0;
    w->off = FENCE_STORE_WAL_HDR;
}

/* Counters (wal.h). */
void fence__store_wal_stats_get(const fence_store_wal *w,
                                fence_store_wal_stats *st)
{
    *st = w->st;
}
