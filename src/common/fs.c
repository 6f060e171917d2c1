/* Data-directory helpers (see fs.h). */
#include "common/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common/assert.h"

/* mkdir one component; an existing directory is fine. */
static int mkdir_one(const char *p, mode_t mode)
{
    if (mkdir(p, mode) == 0)
        return 0;
    int e = errno;
    struct stat st;
    if (e == EEXIST) {
        if (stat(p, &st) == 0 && S_ISDIR(st.st_mode))
            return 0;
        return ENOTDIR;
    }
    return e;
}

/* Walk the path, creating each missing component from the root down. */
int fence__fs_mkdir_p(const char *dir, mode_t mode)
{
    FENCE_ASSERT(dir != NULL);
    char p[FENCE_FS_PATH_MAX];
    size_t n = strlen(dir);
    if (n == 0)
        return ENOENT;
    if (n >= sizeof(p))
        return ENAMETOOLONG;
    memcpy(p, dir, n + 1);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/' || s[-1] == '/')
            continue;
        *s = '\0';
        int rc = mkdir_one(p, mode);
        *s = '/';
        if (rc != 0)
            return rc;
    }
    return mkdir_one(p, mode);
}

/* Open the directory read-only and fsync it. */
int fence__fs_fsync_dir(const char *dir)
{
    FENCE_ASSERT(dir != NULL);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    int rc = fsync(fd) == 0 ? 0 : errno;
    close(fd);
    return rc;
}

/* statvfs: blocks available to unprivileged users times the fragment size. */
int fence__fs_free_bytes(const char *path, uint64_t *out)
{
    FENCE_ASSERT(path != NULL);
    FENCE_ASSERT(out != NULL);
    struct statvfs vfs;
    if (statvfs(path, &vfs) != 0)
        return errno;
    *out = (uint64_t)vfs.f_bavail * (uint64_t)vfs.f_frsize;
    return 0;
}

/* Compare the free bytes with what the caller needs. */
int fence__fs_check_space(const char *path, uint64_t need, uint64_t *avail)
{
    uint64_t have = 0;
    int rc = fence__fs_free_bytes(path, &have);
    if (rc != 0)
        return rc;
    if (avail != NULL)
        *avail = have;
    return have < need ? ENOSPC : 0;
}

/* See fs.h. */
int fence__fs_pread_all(int fd, void *p, size_t n, uint64_t off)
{
    char *c = p;
    while (n > 0) {
        ssize_t k = pread(fd, c, n, (off_t)off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return k < 0 ? errno : EIO;
        c += k;
        n -= (size_t)k;
        off += (uint64_t)k;
    }
    return 0;
}

/* See fs.h. */
int fence__fs_pwrite_all(int fd, const void *p, size_t n, uint64_t off)
{
    const char *c = p;
    while (n > 0) {
        ssize_t k = pwrite(fd, c, n, (off_t)off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return k < 0 ? errno : EIO;
        c += k;
        n -= (size_t)k;
        off += (uint64_t)k;
    }
    return 0;
}
