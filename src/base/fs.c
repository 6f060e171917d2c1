/* Data-directory helpers (see fs.h). */
#include "base/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "base/assert.h"

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

/* The PID written in an open lock file, or 0 when none can be read. */
static long lock_file_pid(int fd)
{
    char buf[32];
    ssize_t k = pread(fd, buf, sizeof(buf) - 1, 0);
    if (k <= 0)
        return 0;
    buf[k] = '\0';
    char *end = NULL;
    long pid = strtol(buf, &end, 10);
    return end != buf && pid > 0 ? pid : 0;
}

/* See fs.h. */
int fence__fs_lock_dir(const char *dir, const char *name, int *fd, long *holder_pid)
{
    FENCE_ASSERT(dir != NULL);
    FENCE_ASSERT(name != NULL);
    FENCE_ASSERT(fd != NULL);
    *fd = -1;
    if (holder_pid != NULL)
        *holder_pid = 0;
    char path[FENCE_FS_PATH_MAX];
    int n = snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= sizeof(path))
        return ENAMETOOLONG;
    int f = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (f < 0)
        return errno;
    if (flock(f, LOCK_EX | LOCK_NB) != 0) {
        int e = errno == EWOULDBLOCK ? EWOULDBLOCK : errno;
        if (e == EWOULDBLOCK && holder_pid != NULL)
            *holder_pid = lock_file_pid(f);
        close(f);
        return e;
    }
    /* Ours now: record who holds it for the next one that tries. */
    char pid[32];
    int len = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
    if (ftruncate(f, 0) != 0 || fence__fs_pwrite_all(f, pid, (size_t)len, 0) != 0) {
        int e = errno != 0 ? errno : EIO;
        close(f);
        return e;
    }
    *fd = f;
    return 0;
}

/* See fs.h. */
int fence__fs_lock_dir_msg(const char *dir, const char *name, char *err, size_t cap)
{
    int fd = -1;
    long pid = 0;
    int rc = fence__fs_lock_dir(dir, name, &fd, &pid);
    if (rc == 0)
        return fd;
    if (rc == EWOULDBLOCK && pid > 0)
        snprintf(err, cap,
                 "data-dir %s is in use by another process (pid %ld holds %s/%s); "
                 "refusing to start",
                 dir, pid, dir, name);
    else if (rc == EWOULDBLOCK)
        snprintf(err, cap,
                 "data-dir %s is in use by another process (it holds %s/%s); "
                 "refusing to start",
                 dir, dir, name);
    else
        snprintf(err, cap, "data-dir %s: cannot lock %s/%s: %s", dir, dir, name,
                 strerror(rc));
    return -1;
}
