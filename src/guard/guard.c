/* libfence-guard: the durable high-water-mark store behind fence_guard.h.
 *
 * Memory: a hash table of fences (name -> mark), bounded by fences_max.
 * Disk: one append-only log (format.h) plus a lock file.  Durability uses
 * group commit: a caller that needs a record on disk appends it to the open
 * batch and either becomes the flusher (write one frame, fdatasync) or waits
 * for the flusher that is already writing; so different fences share fsyncs
 * instead of queueing behind each other's.  Calls on one fence are
 * serialized by a per-fence busy flag, held across the caller's write in
 * fence_guard_admit_run.
 *
 * Locking: g->mu protects everything in struct fence_guard except the file
 * descriptor and the log size, which belong to whichever thread has set
 * g->flushing (the flusher does its I/O without holding g->mu).
 */
#include "fence_guard.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/assert.h"
#include "base/hash.h"
#include "token/signtok.h"
#include "guard/format.h"

#define LOG_NAME "fence-guard.log"
#define TMP_NAME "fence-guard.log.tmp"
#define LOCK_NAME "fence-guard.lock"
/* Initial number of hash buckets (a power of two). */
#define BUCKETS_INITIAL 1024u

/* One fence. */
typedef struct fence_entry {
    struct fence_entry *next; /* next entry in the same hash bucket */
    uint64_t hash;            /* hash of the name */
    uint64_t high;            /* acknowledged mark: what admits compare to */
    uint64_t logged;          /* value of the newest record appended for
                               * this fence (what a replay would give once
                               * its batch is on disk) */
    uint32_t waiters;         /* threads waiting for busy to clear */
    bool busy;                /* a call holds this fence */
    uint16_t len;             /* name length, 1..FENCE_GUARD_NAME_MAX */
    char name[];              /* name bytes (not NUL-terminated) */
} fence_entry;

struct fence_guard {
    pthread_mutex_t mu;       /* protects the fields below (see top) */
    pthread_cond_t fence_cv;  /* signalled when a busy fence is released */
    pthread_cond_t flush_cv;  /* signalled when a flush ends */
    char *log_path;           /* <dir>/fence-guard.log */
    char *tmp_path;           /* <dir>/fence-guard.log.tmp (compaction) */
    int fd;                   /* the log, open read-write */
    int dir_fd;               /* the directory, for fsync after rename */
    int lock_fd;              /* the lock file, flock()ed exclusively */
    fence_entry **buckets;    /* hash table (chained) */
    size_t nbuckets;          /* size of buckets, a power of two */
    uint64_t nfences;         /* entries in the table */
    uint32_t fences_max;      /* bound on nfences */
    uint64_t compact_min;     /* compact only logs larger than this */
    unsigned char *pend;      /* open batch: frame header room + payload */
    size_t pend_len;          /* payload bytes in pend */
    unsigned char *spare;     /* the other batch buffer (swapped in flush) */
    uint64_t open_seq;        /* number of the batch records now join */
    uint64_t durable_seq;     /* newest batch known to be on disk */
    bool flushing;            /* a thread is writing a batch or compacting */
    uint64_t log_bytes;       /* size of the log (flusher-owned) */
    uint64_t live_bytes;      /* bytes a freshly compacted log would need */
    int failed;               /* 0, or the error that made the guard unusable */
    fence_guard_stats stats;  /* counters (fences and log_bytes filled on read) */
    fence_signtok_verifier *verifier; /* verify keys + cache, or NULL: tokens
                               * are plain numbers (set at open, then
                               * read-only; it locks its own cache) */
    char errmsg[FENCE_GUARD_ERRMSG_SIZE]; /* detail of the last error */
};

/* Record a printf-style detail for rc in g->errmsg and return rc.  The
 * caller holds g->mu (or is the only thread, during open). */
static int set_err(fence_guard *g, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int set_err(fence_guard *g, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->errmsg, sizeof(g->errmsg), fmt, ap);
    va_end(ap);
    return rc;
}

/* Make the guard unusable after a disk error: every later call fails with
 * FENCE_GUARD_EFAILED rather than continue on a file that may be behind
 * what was acknowledged.  Wakes every waiter so that it sees the failure. */
static int fail_io(fence_guard *g, const char *what, int err)
{
    g->failed = FENCE_GUARD_EIO;
    set_err(g, FENCE_GUARD_EIO, "%s: %s (guard is now unusable)", what,
            strerror(err));
    pthread_cond_broadcast(&g->flush_cv);
    pthread_cond_broadcast(&g->fence_cv);
    return FENCE_GUARD_EIO;
}

/* FNV-1a over the name: cheap and good enough for a chained table. */
static uint64_t hash_name(const char *name, size_t len)
{
    return fence__fnv1a64(name, len);
}

/* Find the entry for name, or NULL. */
static fence_entry *lookup(fence_guard *g, const char *name, size_t len,
                           uint64_t h)
{
    for (fence_entry *e = g->buckets[h & (g->nbuckets - 1)]; e; e = e->next)
        if (e->hash == h && e->len == len && memcmp(e->name, name, len) == 0)
            return e;
    return NULL;
}

/* Double the bucket array when the table gets crowded.  Failure to grow is
 * harmless (chains just get longer), so it is not reported. */
static void maybe_grow(fence_guard *g)
{
    if (g->nfences < g->nbuckets * 2 || g->nbuckets >= (1u << 28))
        return;
    size_t n = g->nbuckets * 2;
    fence_entry **b = calloc(n, sizeof(*b));
    if (b == NULL)
        return;
    for (size_t i = 0; i < g->nbuckets; i++) {
        fence_entry *e = g->buckets[i];
        while (e) {
            fence_entry *next = e->next;
            e->next = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
            e = next;
        }
    }
    free(g->buckets);
    g->buckets = b;
    g->nbuckets = n;
}

/* Add a new fence with mark 0.  Fails with EFULL at fences_max or ENOMEM. */
static int insert(fence_guard *g, const char *name, size_t len, uint64_t h,
                  fence_entry **out)
{
    FENCE_ASSERT(len >= 1);
    FENCE_ASSERT(len <= FENCE_GUARD_NAME_MAX);
    if (g->nfences >= g->fences_max)
        return set_err(g, FENCE_GUARD_EFULL,
                       "cannot track a new fence: fences_max (%" PRIu32
                       ") reached", g->fences_max);
    fence_entry *e = calloc(1, sizeof(*e) + len);
    if (e == NULL)
        return set_err(g, FENCE_GUARD_ENOMEM, "out of memory for a fence");
    e->hash = h;
    e->len = (uint16_t)len;
    memcpy(e->name, name, len);
    e->next = g->buckets[h & (g->nbuckets - 1)];
    g->buckets[h & (g->nbuckets - 1)] = e;
    g->nfences++;
    g->live_bytes += FENCE__GUARD_REC_FIXED + len;
    maybe_grow(g);
    *out = e;
    return 0;
}

/* Write all of buf at offset off, retrying short writes and EINTR.
 * Returns 0 or an errno value. */
static int pwrite_all(int fd, const void *buf, size_t n, uint64_t off)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = pwrite(fd, p, n, (off_t)off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        if (w == 0)
            return EIO;
        p += w;
        n -= (size_t)w;
        off += (uint64_t)w;
    }
    return 0;
}

/* Build "<dir>/<name>" in a new allocation, or NULL. */
static char *path_join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + 1 + strlen(name) + 1;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* Rewrite the log as one frame per PAYLOAD_MAX of live marks: write a
 * temporary file, fsync it, rename it over the log, fsync the directory.
 * Called by the flusher with g->mu held; drops it for the I/O.  A failure
 * before the rename leaves the old log in charge and is not an error; a
 * failure after it fails the guard. */
static void compact(fence_guard *g)
{
    FENCE_ASSERT(g->flushing);
    size_t frames = (size_t)(g->live_bytes / (FENCE__GUARD_PAYLOAD_MAX -
                                              FENCE__GUARD_REC_MAX) + 1);
    size_t cap = FENCE__GUARD_FILE_HDR + frames * FENCE__GUARD_FRAME_HDR +
                 (size_t)g->live_bytes;
    unsigned char *buf = malloc(cap);
    if (buf == NULL)
        return;
    fence__guard_file_header(buf);
    size_t off = FENCE__GUARD_FILE_HDR;
    size_t frame = off;  /* where the current frame's header goes */
    size_t plen = 0;     /* payload bytes in the current frame */
    off += FENCE__GUARD_FRAME_HDR;
    for (size_t i = 0; i < g->nbuckets; i++) {
        for (fence_entry *e = g->buckets[i]; e; e = e->next) {
            if (e->logged == 0)
                continue; /* same as never seen */
            if (plen + FENCE__GUARD_REC_FIXED + e->len >
                FENCE__GUARD_PAYLOAD_MAX) {
                fence__guard_frame_header(buf + frame,
                                          buf + frame + FENCE__GUARD_FRAME_HDR,
                                          plen);
                frame = off;
                off += FENCE__GUARD_FRAME_HDR;
                plen = 0;
            }
            FENCE_ASSERT(off + FENCE__GUARD_REC_FIXED + e->len <= cap);
            size_t n = fence__guard_rec_encode(buf + off, e->name, e->len,
                                               e->logged);
            off += n;
            plen += n;
        }
    }
    if (plen > 0)
        fence__guard_frame_header(buf + frame,
                                  buf + frame + FENCE__GUARD_FRAME_HDR, plen);
    else
        off = frame; /* no fences: just the file header */
    pthread_mutex_unlock(&g->mu);

    int err = 0;
    const char *what = NULL;
    int fd = open(g->tmp_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        free(buf);
        pthread_mutex_lock(&g->mu);
        return;
    }
    if (pwrite_all(fd, buf, off, 0) != 0 || fsync(fd) != 0) {
        close(fd);
        unlink(g->tmp_path);
        free(buf);
        pthread_mutex_lock(&g->mu);
        return;
    }
    free(buf);
    if (rename(g->tmp_path, g->log_path) != 0) {
        err = errno;
        what = "rename of the compacted log";
    } else if (fsync(g->dir_fd) != 0) {
        err = errno;
        what = "fsync of the guard directory after compaction";
    }
    pthread_mutex_lock(&g->mu);
    if (what != NULL) {
        close(fd);
        fail_io(g, what, err);
        return;
    }
    close(g->fd);
    g->fd = fd;
    g->log_bytes = off;
    g->stats.compactions++;
}

/* Write the open batch as one frame and fsync it.  Called with g->mu held,
 * no flush running and a non-empty batch; drops g->mu for the I/O.  On
 * return g->durable_seq covers the batch, or the guard has failed. */
static void flush(fence_guard *g)
{
    FENCE_ASSERT(!g->flushing);
    FENCE_ASSERT(g->pend_len > 0);
    g->flushing = true;
    unsigned char *buf = g->pend;
    size_t n = g->pend_len;
    uint64_t seq = g->open_seq++;
    uint64_t at = g->log_bytes;
    g->pend = g->spare;
    g->pend_len = 0;
    g->spare = buf;
    pthread_mutex_unlock(&g->mu);

    fence__guard_frame_header(buf, buf + FENCE__GUARD_FRAME_HDR, n);
    int err = pwrite_all(g->fd, buf, FENCE__GUARD_FRAME_HDR + n, at);
    const char *what = "write to the guard log";
    if (err == 0 && fdatasync(g->fd) != 0) {
        err = errno;
        what = "fdatasync of the guard log";
    }

    pthread_mutex_lock(&g->mu);
    if (err != 0) {
        g->flushing = false;
        fail_io(g, what, err);
        return;
    }
    g->log_bytes = at + FENCE__GUARD_FRAME_HDR + n;
    g->stats.syncs++;
    g->durable_seq = seq;
    pthread_cond_broadcast(&g->flush_cv);
    if (g->log_bytes > g->compact_min && g->log_bytes / 4 > g->live_bytes)
        compact(g);
    g->flushing = false;
    pthread_cond_broadcast(&g->flush_cv);
}

/* Append a record setting e's mark to value and wait until it is on disk
 * (joining or leading a group commit).  Called with g->mu held and e busy
 * (owned by the caller).  Returns 0, EFAILED (the guard had already
 * failed) or EIO (the batch holding this record failed to reach disk). */
static int log_and_sync(fence_guard *g, fence_entry *e, uint64_t value)
{
    FENCE_ASSERT(e->busy);
    size_t need = FENCE__GUARD_REC_FIXED + e->len;
    for (;;) {
        if (g->failed)
            return FENCE_GUARD_EFAILED;
        if (g->pend_len + need <= FENCE__GUARD_PAYLOAD_MAX)
            break;
        if (!g->flushing)
            flush(g);
        else
            pthread_cond_wait(&g->flush_cv, &g->mu);
    }
    fence__guard_rec_encode(g->pend + FENCE__GUARD_FRAME_HDR + g->pend_len,
                            e->name, e->len, value);
    g->pend_len += need;
    e->logged = value;
    uint64_t seq = g->open_seq;
    while (g->durable_seq < seq) {
        if (g->failed)
            return FENCE_GUARD_EIO; /* this record never reached the disk */
        if (!g->flushing)
            flush(g);
        else
            pthread_cond_wait(&g->flush_cv, &g->mu);
    }
    return 0;
}

/* Release a fence taken by admit_run and wake threads waiting for it. */
static void release(fence_guard *g, fence_entry *e)
{
    FENCE_ASSERT(e->busy);
    e->busy = false;
    if (e->waiters > 0)
        pthread_cond_broadcast(&g->fence_cv);
}

/* Fill *opts with the defaults. */
void fence_guard_opts_default(fence_guard_opts *opts)
{
    FENCE_ASSERT(opts != NULL);
    memset(opts, 0, sizeof(*opts));
    opts->fences_max = FENCE_GUARD_FENCES_DEFAULT;
    opts->compact_min_bytes = FENCE_GUARD_COMPACT_DEFAULT;
}

/* Record replay callback for open: the last record of a fence wins. */
static int replay_rec(void *ctx, const char *name, size_t len, uint64_t token)
{
    fence_guard *g = ctx;
    uint64_t h = hash_name(name, len);
    fence_entry *e = lookup(g, name, len, h);
    if (e == NULL) {
        int rc = insert(g, name, len, h, &e);
        if (rc != 0) {
            if (rc == FENCE_GUARD_EFULL)
                set_err(g, rc, "%s holds more than fences_max (%" PRIu32
                        ") fences; open it with a larger fences_max",
                        g->log_path, g->fences_max);
            return rc;
        }
    }
    e->high = token;
    e->logged = token;
    return 0;
}

/* Create an empty log (header only) atomically: write a temporary file,
 * fsync it, rename it into place and fsync the directory. */
static int create_log(fence_guard *g)
{
    unsigned char hdr[FENCE__GUARD_FILE_HDR];
    fence__guard_file_header(hdr);
    int fd = open(g->tmp_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return set_err(g, FENCE_GUARD_EIO, "create %s: %s", g->tmp_path,
                       strerror(errno));
    int err = pwrite_all(fd, hdr, sizeof(hdr), 0);
    if (err == 0 && fsync(fd) != 0)
        err = errno;
    if (err == 0 && rename(g->tmp_path, g->log_path) != 0)
        err = errno;
    if (err == 0 && fsync(g->dir_fd) != 0)
        err = errno;
    if (err != 0) {
        close(fd);
        return set_err(g, FENCE_GUARD_EIO, "create %s: %s", g->log_path,
                       strerror(err));
    }
    g->fd = fd;
    g->log_bytes = sizeof(hdr);
    return 0;
}

/* Read the existing log, check it, rebuild the table and cut off a torn
 * tail (durably) so that new frames follow the last good one. */
static int load_log(fence_guard *g)
{
    struct stat st;
    if (fstat(g->fd, &st) != 0)
        return set_err(g, FENCE_GUARD_EIO, "stat %s: %s", g->log_path,
                       strerror(errno));
    size_t size = (size_t)st.st_size;
    unsigned char *buf = malloc(size ? size : 1);
    if (buf == NULL)
        return set_err(g, FENCE_GUARD_ENOMEM,
                       "out of memory reading %s (%zu bytes)", g->log_path,
                       size);
    size_t got = 0;
    while (got < size) {
        ssize_t r = pread(g->fd, buf + got, size - got, (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            int e = r < 0 ? errno : EIO;
            free(buf);
            return set_err(g, FENCE_GUARD_EIO, "read %s: %s", g->log_path,
                           strerror(e));
        }
        got += (size_t)r;
    }
    fence__guard_scan_result res;
    int rc = fence__guard_scan(buf, size, replay_rec, g, &res);
    free(buf);
    if (rc == FENCE_GUARD_ECORRUPT)
        return set_err(g, rc, "%s is corrupt: %s; refusing to open (the "
                       "marks it holds cannot be trusted, and starting "
                       "from zero would admit stale tokens)",
                       g->log_path, res.err);
    if (rc != 0)
        return rc;
    if (res.torn_bytes > 0) {
        if (ftruncate(g->fd, (off_t)res.valid_end) != 0 || fsync(g->fd) != 0)
            return set_err(g, FENCE_GUARD_EIO,
                           "truncate torn tail of %s: %s", g->log_path,
                           strerror(errno));
    }
    g->stats.torn_bytes = res.torn_bytes;
    g->log_bytes = res.valid_end;
    return 0;
}

/* Open the guard in dir (see fence_guard.h for the contract). */
int fence_guard_open(const char *dir, const fence_guard_opts *opts,
                     fence_guard **out)
{
    if (out == NULL)
        return FENCE_GUARD_EINVAL;
    *out = NULL;
    fence_guard *g = calloc(1, sizeof(*g));
    if (g == NULL)
        return FENCE_GUARD_ENOMEM;
    g->fd = g->dir_fd = g->lock_fd = -1;
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->fence_cv, NULL);
    pthread_cond_init(&g->flush_cv, NULL);
    *out = g;

    int rc;
    fence_guard_opts o;
    fence_guard_opts_default(&o);
    if (opts)
        o = *opts;
    if (dir == NULL || dir[0] == '\0') {
        rc = set_err(g, FENCE_GUARD_EINVAL, "no guard directory given");
        goto out_fail;
    }
    if (o.fences_max < 1 || o.fences_max > FENCE_GUARD_FENCES_MAX) {
        rc = set_err(g, FENCE_GUARD_EINVAL,
                     "fences_max %" PRIu32 " is outside 1..%u", o.fences_max,
                     (unsigned)FENCE_GUARD_FENCES_MAX);
        goto out_fail;
    }
    g->fences_max = o.fences_max;
    g->compact_min = o.compact_min_bytes;
    if (o.verify_keys_path != NULL) {
        char kerr[FENCE_GUARD_ERRMSG_SIZE];
        if (o.verify_cache_max > FENCE_SIGNTOK_CACHE_MAX) {
            rc = set_err(g, FENCE_GUARD_EINVAL,
                         "verify_cache_max %" PRIu32 " is above %u",
                         o.verify_cache_max, (unsigned)FENCE_SIGNTOK_CACHE_MAX);
            goto out_fail;
        }
        int krc = fence_signtok_verifier_load(o.verify_keys_path,
                                              o.verify_cache_max,
                                              &g->verifier, kerr, sizeof(kerr));
        if (krc != 0) {
            rc = set_err(g, krc == FENCE_SIGNTOK_ENOMEM ? FENCE_GUARD_ENOMEM
                                                        : FENCE_GUARD_EKEYS,
                         "verify keys: %s", kerr);
            goto out_fail;
        }
    }
    g->log_path = path_join(dir, LOG_NAME);
    g->tmp_path = path_join(dir, TMP_NAME);
    char *lock_path = path_join(dir, LOCK_NAME);
    g->nbuckets = BUCKETS_INITIAL;
    g->buckets = calloc(g->nbuckets, sizeof(*g->buckets));
    g->pend = malloc(FENCE__GUARD_FRAME_HDR + FENCE__GUARD_PAYLOAD_MAX);
    g->spare = malloc(FENCE__GUARD_FRAME_HDR + FENCE__GUARD_PAYLOAD_MAX);
    if (!g->log_path || !g->tmp_path || !lock_path || !g->buckets ||
        !g->pend || !g->spare) {
        free(lock_path);
        rc = set_err(g, FENCE_GUARD_ENOMEM, "out of memory opening %s", dir);
        goto out_fail;
    }
    g->live_bytes = FENCE__GUARD_FILE_HDR + FENCE__GUARD_FRAME_HDR;

    g->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (g->dir_fd < 0) {
        free(lock_path);
        rc = set_err(g, FENCE_GUARD_EIO, "open directory %s: %s", dir,
                     strerror(errno));
        goto out_fail;
    }
    g->lock_fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (g->lock_fd < 0) {
        rc = set_err(g, FENCE_GUARD_EIO, "open %s: %s", lock_path,
                     strerror(errno));
        free(lock_path);
        goto out_fail;
    }
    if (flock(g->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        rc = e == EWOULDBLOCK
                 ? set_err(g, FENCE_GUARD_EBUSY,
                           "%s is locked: another guard has %s open",
                           lock_path, dir)
                 : set_err(g, FENCE_GUARD_EIO, "flock %s: %s", lock_path,
                           strerror(e));
        free(lock_path);
        goto out_fail;
    }
    free(lock_path);
    unlink(g->tmp_path); /* an unfinished compaction: the log is in charge */

    g->fd = open(g->log_path, O_RDWR | O_CLOEXEC);
    if (g->fd < 0 && errno == ENOENT)
        rc = create_log(g);
    else if (g->fd < 0)
        rc = set_err(g, FENCE_GUARD_EIO, "open %s: %s", g->log_path,
                     strerror(errno));
    else
        rc = load_log(g);
    if (rc != 0)
        goto out_fail;
    g->open_seq = 1;
    g->durable_seq = 0;
    g->errmsg[0] = '\0';
    return 0;

out_fail:
    FENCE_ASSERT(rc != 0);
    g->failed = rc;
    return rc;
}

/* Free everything; see fence_guard.h. */
void fence_guard_close(fence_guard *g)
{
    if (g == NULL)
        return;
    FENCE_ASSERT(!g->flushing);
    for (size_t i = 0; g->buckets && i < g->nbuckets; i++) {
        fence_entry *e = g->buckets[i];
        while (e) {
            fence_entry *next = e->next;
            free(e);
            e = next;
        }
    }
    free(g->buckets);
    if (g->fd >= 0)
        close(g->fd);
    if (g->dir_fd >= 0)
        close(g->dir_fd);
    if (g->lock_fd >= 0)
        close(g->lock_fd); /* releases the flock */
    free(g->pend);
    free(g->spare);
    free(g->log_path);
    free(g->tmp_path);
    fence_signtok_verifier_free(g->verifier);
    pthread_cond_destroy(&g->flush_cv);
    pthread_cond_destroy(&g->fence_cv);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

/* Check a name given by the caller. */
static int check_name(fence_guard *g, const char *name, size_t len)
{
    if (name == NULL || len < 1 || len > FENCE_GUARD_NAME_MAX)
        return set_err(g, FENCE_GUARD_EINVAL,
                       "fence name must be 1..%d bytes (got %zu)",
                       FENCE_GUARD_NAME_MAX, name ? len : 0);
    return 0;
}

/* Admit with an optional protected write; see fence_guard.h for the order
 * of events and why the mark goes to disk before fn runs.  The token has
 * passed verification already, if the guard verifies. */
static int admit_core(fence_guard *g, const char *name, size_t len,
                      uint64_t token, fence_guard_write_fn fn, void *arg,
                      uint64_t *high)
{
    pthread_mutex_lock(&g->mu);
    int rc = g->failed ? FENCE_GUARD_EFAILED : check_name(g, name, len);
    if (rc != 0) {
        pthread_mutex_unlock(&g->mu);
        return rc;
    }
    uint64_t h = hash_name(name, len);
    fence_entry *e = lookup(g, name, len, h);
    if (e == NULL && (rc = insert(g, name, len, h, &e)) != 0) {
        pthread_mutex_unlock(&g->mu);
        return rc;
    }
    while (e->busy && !g->failed) {
        e->waiters++;
        pthread_cond_wait(&g->fence_cv, &g->mu);
        e->waiters--;
    }
    if (g->failed) {
        pthread_mutex_unlock(&g->mu);
        return FENCE_GUARD_EFAILED;
    }
    if (token < e->high) {
        g->stats.rejected_stale++;
        if (high)
            *high = e->high;
        pthread_mutex_unlock(&g->mu);
        return FENCE_GUARD_ESTALE;
    }
    uint64_t old = e->high;
    e->busy = true;
    if (token > old && (rc = log_and_sync(g, e, token)) != 0) {
        release(g, e);
        pthread_mutex_unlock(&g->mu);
        return rc;
    }
    if (fn != NULL) {
        pthread_mutex_unlock(&g->mu);
        int frc = fn(arg);
        pthread_mutex_lock(&g->mu);
        if (frc != 0) {
            rc = FENCE_GUARD_EWRITE;
            if (token > old) {
                int lrc = log_and_sync(g, e, old);
                if (lrc != 0)
                    rc = lrc;
            }
            if (rc == FENCE_GUARD_EWRITE)
                set_err(g, rc, "the protected write for token %" PRIu64
                        " failed; the mark stays %" PRIu64, token, old);
            release(g, e);
            pthread_mutex_unlock(&g->mu);
            return rc;
        }
    }
    FENCE_ASSERT(e->logged == token || token == old);
    e->high = token;
    g->stats.admitted++;
    if (high)
        *high = token;
    release(g, e);
    pthread_mutex_unlock(&g->mu);
    return 0;
}

/* Count a refused token and record why (the mark is not touched). */
static int bad_token(fence_guard *g, const char *why)
{
    pthread_mutex_lock(&g->mu);
    g->stats.rejected_badtoken++;
    set_err(g, FENCE_GUARD_EBADTOKEN, "%s", why);
    pthread_mutex_unlock(&g->mu);
    return FENCE_GUARD_EBADTOKEN;
}

/* The numeric entry point: refused when the guard verifies signed tokens,
 * since a bare number carries no proof. */
int fence_guard_admit_run(fence_guard *g, const char *name, size_t len,
                          uint64_t token, fence_guard_write_fn fn, void *arg,
                          uint64_t *high)
{
    if (g == NULL)
        return FENCE_GUARD_EINVAL;
    if (g->verifier != NULL) {
        char why[128];
        snprintf(why, sizeof(why), "token %" PRIu64 " is not signed; this "
                 "guard admits only signed tokens (fence_guard_admit_signed)",
                 token);
        return bad_token(g, why);
    }
    return admit_core(g, name, len, token, fn, arg, high);
}

/* Verify (if the guard has keys), then admit; see fence_guard.h. */
int fence_guard_admit_signed(fence_guard *g, const char *name, size_t len,
                             const char *tok, size_t tok_len,
                             fence_guard_write_fn fn, void *arg,
                             uint64_t *token_out, uint64_t *high)
{
    if (g == NULL)
        return FENCE_GUARD_EINVAL;
    if (tok == NULL)
        return bad_token(g, "no token");
    if (name == NULL || len < 1 || len > FENCE_GUARD_NAME_MAX) {
        pthread_mutex_lock(&g->mu);
        int rc = check_name(g, name, len);
        pthread_mutex_unlock(&g->mu);
        return rc;
    }
    char why[FENCE_GUARD_ERRMSG_SIZE];
    uint64_t token = 0;
    int rc = fence_signtok_check(g->verifier, name, len, tok, tok_len, &token,
                                 why, sizeof(why));
    if (rc != 0)
        return bad_token(g, why);
    if (token_out != NULL)
        *token_out = token;
    return admit_core(g, name, len, token, fn, arg, high);
}

/* Admit without a protected write. */
int fence_guard_admit(fence_guard *g, const char *name, size_t len,
                      uint64_t token, uint64_t *high)
{
    return fence_guard_admit_run(g, name, len, token, NULL, NULL, high);
}

/* Read a fence's acknowledged mark. */
int fence_guard_high(fence_guard *g, const char *name, size_t len,
                     uint64_t *high)
{
    if (g == NULL || high == NULL)
        return FENCE_GUARD_EINVAL;
    pthread_mutex_lock(&g->mu);
    int rc = g->failed ? FENCE_GUARD_EFAILED : check_name(g, name, len);
    if (rc == 0) {
        fence_entry *e = lookup(g, name, len, hash_name(name, len));
        *high = e ? e->high : 0;
    }
    pthread_mutex_unlock(&g->mu);
    return rc;
}

/* Copy the counters. */
void fence_guard_stats_get(fence_guard *g, fence_guard_stats *stats)
{
    FENCE_ASSERT(g != NULL);
    FENCE_ASSERT(stats != NULL);
    pthread_mutex_lock(&g->mu);
    *stats = g->stats;
    stats->fences = g->nfences;
    if (g->verifier != NULL) {
        fence_signtok_stats vs;
        fence_signtok_verifier_stats(g->verifier, &vs);
        stats->verified = vs.verified;
        stats->verify_cache_hits = vs.cache_hits;
    }
    stats->log_bytes = g->log_bytes;
    pthread_mutex_unlock(&g->mu);
}

/* Static text for an error code, generated from FENCE_GUARD_ERRNO_MAP. */
const char *fence_guard_strerror(int rc)
{
    switch (rc) {
    case FENCE_GUARD_OK:
        return "success";
#define FENCE_GUARD__CASE(name, text)                                          \
    case FENCE_GUARD_E##name:                                                  \
        return text;
        FENCE_GUARD_ERRNO_MAP(FENCE_GUARD__CASE)
#undef FENCE_GUARD__CASE
    default:
        return "unknown error";
    }
}

/* The detail of the last error. */
const char *fence_guard_errmsg(fence_guard *g)
{
    if (g == NULL)
        return "out of memory";
    return g->errmsg;
}
