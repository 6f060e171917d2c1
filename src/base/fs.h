/* File-system helpers for the daemons' data directories.
 *
 * Every function returns 0 or a positive errno value (ENAMETOOLONG for a
 * path longer than FENCE_FS_PATH_MAX - 1); none sets errno for the caller
 * to read, none logs. */
#ifndef FENCE_COMMON_FS_H
#define FENCE_COMMON_FS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Longest path (with its NUL) the helpers accept. */
#define FENCE_FS_PATH_MAX 4096

/* Create dir and every missing parent with the given mode (mkdir -p).  An
 * existing directory is success; an existing non-directory is ENOTDIR. */
int fence__fs_mkdir_p(const char *dir, mode_t mode);

/* fsync the directory itself, so that entries created, renamed or removed
 * in it survive a power cut. */
int fence__fs_fsync_dir(const char *dir);

/* Bytes an unprivileged writer may still use on the file system holding
 * path (statvfs f_bavail * f_frsize), in *out. */
int fence__fs_free_bytes(const char *path, uint64_t *out);

/* 0 if the file system holding path has at least need bytes free for an
 * unprivileged writer, ENOSPC if it has fewer (*avail says how many, when
 * avail is not NULL), or the errno of the failed statvfs. */
int fence__fs_check_space(const char *path, uint64_t need, uint64_t *avail);

/* pread/pwrite all of p[0..n) at offset off, retrying short transfers and
 * EINTR: 0, the errno of a failed call, or EIO when the file ends (pread)
 * or nothing more is written (pwrite). */
int fence__fs_pread_all(int fd, void *p, size_t n, uint64_t off);
int fence__fs_pwrite_all(int fd, const void *p, size_t n, uint64_t off);

/* Take the exclusive lock that makes dir one process's: flock(LOCK_EX |
 * LOCK_NB) on dir/name (created 0644 when missing), held on the returned
 * descriptor (O_CLOEXEC) for the life of the process, as etcd and
 * PostgreSQL hold theirs; the file then holds the holder's PID ("1234\n").
 * Call it before touching anything else in dir.  Returns 0 with *fd set,
 * EWOULDBLOCK when another process holds the lock (*holder_pid is its PID
 * read from the file, or 0 when it has not written it yet), or the errno of
 * the failed open/flock.  Closing *fd (or exiting) releases the lock; the
 * file stays, so the next start finds it. */
int fence__fs_lock_dir(const char *dir, const char *name, int *fd, long *holder_pid);

/* fence__fs_lock_dir, and on failure a message for the log in err[0..cap):
 * "data-dir DIR is in use by another process (pid N holds DIR/NAME);
 * refusing to start" or the failing call and its reason.  Returns the fd,
 * or -1. */
int fence__fs_lock_dir_msg(const char *dir, const char *name, char *err, size_t cap);

#endif /* FENCE_COMMON_FS_H */
