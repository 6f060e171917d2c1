/* Log segments written out with zeros: see seg_fill.h for why and what. */
#include "server/seg_fill.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/assert.h"

/* Zeros written per pwrite. */
#define SEG_FILL_CHUNK (64 * 1024)

/* glibc's posix_fallocate(). */
typedef int (*fallocate_fn)(int fd, off_t offset, off_t len);

static _Atomic(fallocate_fn) real_fallocate; /* found on first use */
static _Atomic uint64_t filled;              /* segments written with zeros */
static const char zeros[SEG_FILL_CHUNK];     /* what is written */

/* Whether fd is a regular file whose name starts with "open-". */
static bool is_open_segment(int fd, char *path, size_t cap)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        return false;
    char link[64];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, cap - 1);
    if (n <= 0 || (size_t)n >= cap - 1)
        return false;
    path[n] = '\0';
    const char *base = strrchr(path, '/');
    base = base != NULL ? base + 1 : path;
    return strncmp(base, "open-", 5) == 0;
}

/* Write zeros over [offset, offset + len) of the file fd names, through a
 * descriptor of its own (no O_DSYNC: one fdatasync at the end). */
static bool fill_zeros(int fd, off_t offset, off_t len)
{
    char link[64];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    int wfd = open(link, O_WRONLY | O_CLOEXEC);
    if (wfd < 0)
        return false;
    bool ok = true;
    off_t end = offset + len;
    for (off_t at = offset; ok && at < end;) {
        size_t n = end - at < SEG_FILL_CHUNK ? (size_t)(end - at) : SEG_FILL_CHUNK;
        ssize_t w = pwrite(wfd, zeros, n, at);
        if (w > 0)
            at += w;
        else if (w < 0 && errno == EINTR)
            continue;
        else
            ok = false;
    }
    if (ok && fdatasync(wfd) != 0)
        ok = false;
    close(wfd);
    return ok;
}

/* See seg_fill.h. */
uint64_t fence__seg_fill_count(void)
{
    return atomic_load(&filled);
}

/* glibc's posix_fallocate(), interposed (seg_fill.h). */
__attribute__((visibility("default"))) int posix_fallocate(int fd, off_t offset, off_t len)
{
    fallocate_fn f = atomic_load(&real_fallocate);
    if (f == NULL) {
        f = (fallocate_fn)dlsym(RTLD_NEXT, "posix_fallocate");
        FENCE_ASSERT(f != NULL);
        atomic_store(&real_fallocate, f);
    }
    int rv = f(fd, offset, len);
    char path[4096];
    if (rv == 0 && len > 0 && is_open_segment(fd, path, sizeof(path)) &&
        fill_zeros(fd, offset, len))
        atomic_fetch_add(&filled, 1);
    return rv;
}
