/* fence-proxy's durable bindings log (bindlog.h). */
#include "proxy/bindlog.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "base/fs.h"

struct fence_proxy_bindlog {
    int fd;           /* the log, O_WRONLY|O_APPEND after open */
    uint64_t size;    /* its size: where the next batch goes */
    uint64_t torn;    /* bytes cut off at open */
};

static void put16(char *p, uint32_t v)
{
    p[0] = (char)(v & 0xff);
    p[1] = (char)((v >> 8) & 0xff);
}

static void put32(char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (char)((v >> (8 * i)) & 0xff);
}

static uint32_t get16(const unsigned char *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8);
}

static uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

size_t fence__proxy_bindlog_record(char *out, const char *path, size_t plen, const char *fence,
                                   size_t flen)
{
    put16(out, (uint32_t)plen);
    put16(out + 2, (uint32_t)flen);
    memcpy(out + 4, path, plen);
    memcpy(out + 4 + plen, fence, flen);
    return FENCE_PROXY_BINDLOG_REC_HDR + plen + flen;
}

/* Whether p[0..n) is all zero bytes. */
static bool all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != 0)
            return false;
    return true;
}

long fence__proxy_bindlog_walk(const unsigned char *buf, size_t n, const char *file,
                               fence_proxy_bind_each each, void *arg, char *err, size_t cap)
{
    size_t off = 0;
    while (off < n) {
        size_t rest = n - off;
        const unsigned char *b = buf + off;
        if (rest < FENCE_PROXY_BINDLOG_BATCH_HDR || memcmp(b, "FPB1", 4) != 0) {
            if (rest < FENCE_PROXY_BINDLOG_BATCH_HDR || all_zero(b, rest))
                return (long)off; /* a torn tail */
            snprintf(err, cap, "%s: offset %zu: not a batch header (corrupt)", file, off);
            return -1;
        }
        uint32_t len = get32(b + 4), crc = get32(b + 8);
        if (len > FENCE_PROXY_BINDLOG_BATCH_MAX) {
            snprintf(err, cap, "%s: offset %zu: batch of %u bytes (corrupt)", file, off,
                     (unsigned)len);
            return -1;
        }
        if ((size_t)len > rest - FENCE_PROXY_BINDLOG_BATCH_HDR)
            return (long)off; /* cut short: torn */
        const unsigned char *body = b + FENCE_PROXY_BINDLOG_BATCH_HDR;
        if (fence__crc32c(body, len) != crc) {
            if (off + FENCE_PROXY_BINDLOG_BATCH_HDR + len == n)
                return (long)off; /* the final batch: torn */
            snprintf(err, cap, "%s: offset %zu: checksum mismatch before the final batch (corrupt)",
                     file, off);
            return -1;
        }
        size_t r = 0;
        while (r < len) {
            if (len - r < FENCE_PROXY_BINDLOG_REC_HDR) {
                snprintf(err, cap, "%s: offset %zu: bad record (corrupt)", file, off);
                return -1;
            }
            uint32_t pl = get16(body + r), fl = get16(body + r + 2);
            if (pl == 0 || fl == 0 || len - r - FENCE_PROXY_BINDLOG_REC_HDR < pl + fl) {
                snprintf(err, cap, "%s: offset %zu: bad record (corrupt)", file, off);
                return -1;
            }
            const char *p = (const char *)body + r + FENCE_PROXY_BINDLOG_REC_HDR;
            if (each(arg, p, pl, p + pl, fl, err, cap) != 0)
                return -1;
            r += FENCE_PROXY_BINDLOG_REC_HDR + pl + fl;
        }
        off += FENCE_PROXY_BINDLOG_BATCH_HDR + len;
    }
    return (long)off;
}

int fence__proxy_bindlog_open(const char *dir, fence_proxy_bind_each each, void *arg,
                              fence_proxy_bindlog **out, char *err, size_t cap)
{
    char file[1200];
    snprintf(file, sizeof(file), "%s/%s", dir, FENCE_PROXY_BINDLOG_FILE);
    *out = NULL;
    int fd = open(file, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(err, cap, "%s: open: %s", file, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(err, cap, "%s: fstat: %s", file, strerror(errno));
        close(fd);
        return -1;
    }
    size_t n = (size_t)st.st_size;
    unsigned char *buf = malloc(n > 0 ? n : 1);
    if (buf == NULL) {
        snprintf(err, cap, "%s: out of memory reading %zu bytes", file, n);
        close(fd);
        return -1;
    }
    if (n > 0 && fence__fs_pread_all(fd, buf, n, 0) != 0) {
        snprintf(err, cap, "%s: read: %s", file, strerror(errno));
        free(buf);
        close(fd);
        return -1;
    }
    long good = fence__proxy_bindlog_walk(buf, n, file, each, arg, err, cap);
    free(buf);
    if (good < 0) {
        close(fd);
        return -1;
    }
    fence_proxy_bindlog *l = calloc(1, sizeof(*l));
    if (l == NULL) {
        snprintf(err, cap, "out of memory");
        close(fd);
        return -1;
    }
    l->fd = fd;
    l->size = (uint64_t)good;
    l->torn = (uint64_t)(n - (size_t)good);
    if (l->torn > 0 && (ftruncate(fd, (off_t)good) != 0 || fdatasync(fd) != 0)) {
        snprintf(err, cap, "%s: cutting off a torn tail: %s", file, strerror(errno));
        fence__proxy_bindlog_close(l);
        return -1;
    }
    if (st.st_size == 0 && fence__fs_fsync_dir(dir) != 0) {
        snprintf(err, cap, "%s: fsync of the directory: %s", dir, strerror(errno));
        fence__proxy_bindlog_close(l);
        return -1;
    }
    *out = l;
    return 0;
}

void fence__proxy_bindlog_seal(char *buf, size_t len)
{
    size_t body = len - FENCE_PROXY_BINDLOG_BATCH_HDR;
    memcpy(buf, "FPB1", 4);
    put32(buf + 4, (uint32_t)body);
    put32(buf + 8, fence__crc32c(buf + FENCE_PROXY_BINDLOG_BATCH_HDR, body));
}

int fence__proxy_bindlog_append(fence_proxy_bindlog *l, char *buf, size_t len)
{
    fence__proxy_bindlog_seal(buf, len);
    if (fence__fs_pwrite_all(l->fd, buf, len, l->size) != 0)
        return errno ? errno : EIO;
    if (fdatasync(l->fd) != 0)
        return errno ? errno : EIO;
    l->size += len;
    return 0;
}

uint64_t fence__proxy_bindlog_torn(const fence_proxy_bindlog *l)
{
    return l->torn;
}

void fence__proxy_bindlog_close(fence_proxy_bindlog *l)
{
    if (l == NULL)
        return;
    close(l->fd);
    free(l);
}
