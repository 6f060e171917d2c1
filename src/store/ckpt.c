/* fence-store's checkpoints (see ckpt.h). */
#include "store/ckpt.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/assert.h"
#include "base/bytes.h"
#include "base/crc32c.h"
#include "base/fs.h"
#include "base/limits.h"

/* lmdb-meta.ckpt: two slots of one image each, written in place in turn
 * (the file is created once at its full size, so a checkpoint needs no
 * new block even on a full disk, and a torn write spoils one slot only).
 * An image: magic, u64 lsn, u64 generation (counts up across restarts),
 * u32 page size, u32 CRC32C of the image with the CRC taken as 0, then
 * meta pages 0 and 1 of data.mdb.  A slot whose magic is zeros holds
 * nothing. */
#define MAGIC "FSCKPT\0\2"
#define HDR 32
#define NAME "lmdb-meta.ckpt"

/* CRC of an image with its CRC field taken as 0. */
static uint32_t image_crc(uint8_t *p, size_t n)
{
    uint32_t keep = fence__get_u32(p + 28);
    fence__put_u32(p + 28, 0);
    uint32_t crc = fence__crc32c(p, n);
    fence__put_u32(p + 28, keep);
    return crc;
}

/* Init (ckpt.h). */
void fence__store_ckpt_saver_init(fence_store_ckpt_saver *sv, const char *dir)
{
    int rc = pthread_mutex_init(&sv->mu, NULL);
    FENCE_ASSERT(rc == 0);
    sv->saved = 0;
    sv->gen = 0;
    sv->fd = -1;
    snprintf(sv->dir, sizeof(sv->dir), "%s", dir);
}

/* Free (ckpt.h). */
void fence__store_ckpt_saver_free(fence_store_ckpt_saver *sv)
{
    if (sv->fd >= 0)
        close(sv->fd);
    sv->fd = -1;
    pthread_mutex_destroy(&sv->mu);
}

/* Capture (ckpt.h). */
int fence__store_ckpt_capture(MDB_env *env, uint64_t lsn, uint64_t seq,
                              fence_store_ckpt *c)
{
    FENCE_ASSERT(seq > 0);
    memset(c, 0, sizeof(*c));
    MDB_stat st;
    int rc = mdb_env_stat(env, &st);
    if (rc != 0)
        return rc;
    int fd;
    if ((rc = mdb_env_get_fd(env, &fd)) != 0)
        return rc;
    size_t psize = st.ms_psize;
    c->image_len = HDR + 2 * psize;
    c->image = calloc(1, c->image_len);
    if (c->image == NULL)
        return ENOMEM;
    if ((rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &c->pin)) != 0) {
        c->pin = NULL;
        goto out_free;
    }
    /* The meta pages as the last commit left them (pwrite, in the page
     * cache); no commit runs until we return. */
    if ((rc = fence__fs_pread_all(fd, c->image + HDR, 2 * psize, 0)) != 0)
        goto out_abort;
    memcpy(c->image, MAGIC, 8);
    fence__put_u64(c->image + 8, lsn);
    fence__put_u32(c->image + 24, (uint32_t)psize);
    c->lsn = lsn;
    c->seq = seq;
    return 0;

out_abort:
    mdb_txn_abort(c->pin);
    c->pin = NULL;
out_free:
    free(c->image);
    c->image = NULL;
    return rc;
}

/* Open sv's file, creating it zero-filled with two slots of len bytes
 * (through a synced temporary file) when missing or of another size; 0 or
 * an errno. */
static int file_ready(fence_store_ckpt_saver *sv, size_t len)
{
    if (sv->fd >= 0 && sv->slot == len)
        return 0;
    char tmp[1100], path[1100];
    snprintf(tmp, sizeof(tmp), "%s/" NAME ".tmp", sv->dir);
    snprintf(path, sizeof(path), "%s/" NAME, sv->dir);
    if (sv->fd < 0) {
        sv->fd = open(path, O_RDWR | O_CLOEXEC);
        struct stat sb;
        if (sv->fd >= 0 && fstat(sv->fd, &sb) == 0 &&
            (uint64_t)sb.st_size == 2 * (uint64_t)len) {
            sv->slot = len;
            return 0;
        }
        if (sv->fd >= 0)
            close(sv->fd);
        sv->fd = -1;
    }
    int fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return errno;
    uint8_t *zeros = calloc(2, len);
    int rc = zeros == NULL ? ENOMEM : fence__fs_pwrite_all(fd, zeros, 2 * len, 0);
    free(zeros);
    if (rc == 0 && fsync(fd) != 0)
        rc = errno;
    if (rc == 0 && rename(tmp, path) != 0)
        rc = errno;
    if (rc == 0)
        rc = fence__fs_fsync_dir(sv->dir);
    if (rc != 0) {
        close(fd);
        (void)unlink(tmp);
        return rc;
    }
    sv->fd = fd;
    sv->slot = len;
    return 0;
}

/* Write the data file's dirty pages back FENCE_STORE_CKPT_CHUNK bytes at
 * a time, each piece waited for, before the sync: one fdatasync of tens
 * of MB queues every page at once, and the log's next sync (a reply
 * waits on it) queues behind all of them.  Pieces keep the queue short.
 * An error here is left to the fdatasync that follows (the kernel keeps
 * a writeback error for it), which alone makes anything durable. */
static void writeback_paced(MDB_env *env)
{
    int fd;
    struct stat st;
    if (mdb_env_get_fd(env, &fd) != 0 || fstat(fd, &st) != 0)
        return;
    for (off_t off = 0; off < st.st_size; off += FENCE_STORE_CKPT_CHUNK)
        if (sync_file_range(fd, off, FENCE_STORE_CKPT_CHUNK,
                            SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                                SYNC_FILE_RANGE_WAIT_AFTER) != 0)
            return;
}

/* Persist (ckpt.h). */
int fence__store_ckpt_persist(MDB_env *env, fence_store_ckpt_saver *sv,
                              fence_store_ckpt *c)
{
    FENCE_ASSERT(c->image != NULL);
    writeback_paced(env);
    int rc = mdb_env_sync(env, 1);
    if (rc != 0)
        return rc;
    pthread_mutex_lock(&sv->mu);
    if (c->seq > sv->saved) { /* never replace a newer snapshot's pages */
        rc = file_ready(sv, c->image_len);
        if (rc == 0) {
            uint64_t gen = sv->gen + 1;
            fence__put_u64(c->image + 16, gen);
            fence__put_u32(c->image + 28, image_crc(c->image, c->image_len));
            rc = fence__fs_pwrite_all(sv->fd, c->image, c->image_len,
                                      (gen % 2) * c->image_len);
            if (rc == 0 && fdatasync(sv->fd) != 0)
                rc = errno;
            if (rc == 0) {
                sv->gen = gen;
                sv->saved = c->seq;
            }
        }
    }
    pthread_mutex_unlock(&sv->mu);
    return rc;
}

/* Release (ckpt.h). */
void fence__store_ckpt_release(fence_store_ckpt *c)
{
    if (c->pin != NULL)
        mdb_txn_abort(c->pin);
    free(c->image);
    memset(c, 0, sizeof(*c));
}

/* True when the slot p[0..n) holds a whole image. */
static bool slot_valid(uint8_t *p, size_t n)
{
    return n > HDR && memcmp(p, MAGIC, 8) == 0 &&
           fence__get_u32(p + 28) == image_crc(p, n) &&
           n == HDR + 2 * (size_t)fence__get_u32(p + 24);
}

/* Restore (ckpt.h). */
int fence__store_ckpt_restore(fence_store_ckpt_saver *sv, uint64_t *lsn,
                              char *err, size_t errcap)
{
    char path[1100], data[1100];
    snprintf(path, sizeof(path), "%s/" NAME, sv->dir);
    snprintf(data, sizeof(data), "%s/data.mdb", sv->dir);
    *lsn = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        return 0;
    if (fd < 0) {
        snprintf(err, errcap, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    uint8_t *img = NULL;
    struct stat sb;
    int rc = fstat(fd, &sb) != 0 ? errno : 0;
    size_t n = rc == 0 ? (size_t)sb.st_size : 0;
    if (rc == 0 && (n % 2 != 0 || n < 2 * (HDR + 2 * 512) ||
                    n > 2 * (HDR + 2 * 65536)))
        rc = EINVAL;
    if (rc == 0 && (img = malloc(n)) == NULL)
        rc = ENOMEM;
    if (rc == 0)
        rc = fence__fs_pread_all(fd, img, n, 0);
    close(fd);
    size_t half = n / 2;
    int best = -1;
    bool zeros = true;
    for (int i = 0; rc == 0 && i < 2; i++) {
        uint8_t *p = img + (size_t)i * half;
        if (slot_valid(p, half)) {
            if (best < 0 || fence__get_u64(p + 16) >
                                fence__get_u64(img + (size_t)best * half + 16))
                best = i;
        }
        for (size_t k = 0; k < 8 && zeros; k++) /* the magic */
            zeros = p[k] == 0;
    }
    if (rc == 0 && best < 0 && zeros) { /* created, never written, or
                                         * cleared by a clean stop: no
                                         * magic in either slot */
        free(img);
        return 0;
    }
    if (rc != 0 || best < 0) {
        snprintf(err, errcap, "%s is damaged or unreadable (%s); refusing to "
                 "start: restore the data directory from a backup", path,
                 rc == 0 || rc == EINVAL ? "no valid checkpoint in it"
                                         : strerror(rc));
        free(img);
        return -1;
    }
    uint8_t *p = img + (size_t)best * half;
    fd = open(data, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errcap, "%s exists but %s cannot be opened (%s); "
                 "refusing to start", path, data, strerror(errno));
        free(img);
        return -1;
    }
    rc = fence__fs_pwrite_all(fd, p + HDR, half - HDR, 0);
    if (rc == 0 && fdatasync(fd) != 0)
        rc = errno;
    close(fd);
    *lsn = fence__get_u64(p + 8);
    sv->gen = fence__get_u64(p + 16);
    free(img);
    if (rc != 0) {
        snprintf(err, errcap, "cannot write the checkpoint's meta pages "
                 "into %s: %s", data, strerror(rc));
        return -1;
    }
    return 1;
}

/* Forget (ckpt.h): the headers of both slots zeroed in place (one small
 * write each, no block freed or needed). */
int fence__store_ckpt_forget(fence_store_ckpt_saver *sv)
{
    if (sv->fd < 0)
        return 0;
    uint8_t zeros[HDR] = {0};
    int rc = 0;
    for (int i = 0; i < 2 && rc == 0; i++)
        rc = fence__fs_pwrite_all(sv->fd, zeros, sizeof(zeros), (uint64_t)i * sv->slot);
    if (rc == 0 && fdatasync(sv->fd) != 0)
        rc = errno;
    return rc;
}
