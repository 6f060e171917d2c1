/* fsync_probe: the durable-write floor of a directory's disk, measured the
 * way libraft 0.15's uv backend writes its log segments, for `make bench`
 * (issue 14: the contended handoff floor is 1 / (this p50 + one PING round
 * trip)).
 *
 *   fsync_probe DIR [N [direct|append|buffered|aio]]
 *
 * prints one line, e.g.
 *
 *   fsync_p50_us=71 fsync_p99_us=240 fsync_max_us=1800 n=2000 mode=direct
 *
 * libraft 0.15 (src/uv_fs.c UvFsAllocateFile, probeDirectIO; src/uv_writer.c)
 * creates each segment with O_DSYNC, preallocates it with posix_fallocate,
 * switches it to O_DIRECT when the file system allows, and writes whole
 * 4 KiB blocks: every append rewrites the block that holds the end of the
 * log (padded), and moves on to the next block once that one is full.  So
 * one durable append is one O_DIRECT|O_DSYNC block write, and most of them
 * overwrite a block already written.  MODE picks the pattern:
 *
 *   direct   (default) libraft's: O_DIRECT|O_DSYNC pwrite of 4 KiB, 16 writes
 *            per block (an entry of about 256 bytes), then the next block;
 *            without O_DIRECT (tmpfs, ZFS) the same writes, buffered, O_DSYNC
 *            (mode=dsync is printed then)
 *   append   a fresh 4 KiB block at the end every time, O_DIRECT|O_DSYNC
 *            (each write also converts an unwritten extent: the slow case)
 *   buffered pwrite of 4 KiB at the end + fdatasync (no O_DIRECT, no O_DSYNC)
 *   aio      as direct, but each write through kernel AIO as libraft submits
 *            it (io_submit with RWF_NOWAIT and an eventfd, poll, io_getevents;
 *            again without RWF_NOWAIT on EAGAIN): compare with direct to see
 *            what the AIO path itself costs (nothing measurable here)
 *
 * N defaults to 2000 writes (the first 50 are a warm-up and not counted).
 * The probe file (DIR/.fsync_probe.<pid>) is removed before exit.  Exit
 * status 0, or 1 with a message on stderr. */
#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Bytes per write: libraft's block size on every disk seen here. */
#define PROBE_BLOCK 4096
/* Writes per block in mode direct: entries of about 256 bytes. */
#define PROBE_PER_BLOCK 16
/* Writes done first and not counted. */
#define PROBE_WARMUP 50
/* Most writes one run may do (keeps the file and the sample array small). */
#define PROBE_N_MAX 1000000

/* Write patterns (see the head comment). */
enum probe_mode {
    MODE_DIRECT = 0, /* libraft's: rewrite the current block, O_DIRECT|O_DSYNC */
    MODE_APPEND,     /* a new block each time, O_DIRECT|O_DSYNC */
    MODE_BUFFERED,   /* a new block each time, write + fdatasync */
    MODE_AIO,        /* as direct, through kernel AIO like libraft's writer */
};

/* Kernel AIO state of mode aio. */
typedef struct probe_aio {
    aio_context_t ctx; /* io_setup(1) */
    int efd;           /* completions are signalled here (IOCB_FLAG_RESFD) */
} probe_aio;

/* One block write through kernel AIO as libraft's UvWriter does it: try
 * RWF_NOWAIT with an eventfd and wait for the eventfd (libraft's loop
 * polls it); on EAGAIN submit again without RWF_NOWAIT (libraft then uses
 * its thread pool).  Returns the bytes written or -1. */
static ssize_t aio_write_block(probe_aio *a, int fd, void *buf, off_t off)
{
    for (int nowait = 1; nowait >= 0; nowait--) {
        struct iocb cb;
        memset(&cb, 0, sizeof(cb));
        cb.aio_lio_opcode = IOCB_CMD_PWRITE;
        cb.aio_fildes = (uint32_t)fd;
        cb.aio_buf = (uint64_t)(uintptr_t)buf;
        cb.aio_nbytes = PROBE_BLOCK;
        cb.aio_offset = off;
        cb.aio_flags = IOCB_FLAG_RESFD;
        cb.aio_resfd = (uint32_t)a->efd;
#ifdef RWF_NOWAIT
        if (nowait)
            cb.aio_rw_flags = RWF_NOWAIT;
#endif
        struct iocb *cbs[1] = {&cb};
        if (syscall(SYS_io_submit, a->ctx, 1L, cbs) != 1)
            return -1;
        struct pollfd p = {a->efd, POLLIN, 0};
        if (poll(&p, 1, -1) != 1)
            return -1;
        uint64_t k;
        if (read(a->efd, &k, sizeof(k)) != (ssize_t)sizeof(k))
            return -1;
        struct io_event ev;
        if (syscall(SYS_io_getevents, a->ctx, 1L, 1L, &ev, NULL) != 1)
            return -1;
        if (ev.res == -EAGAIN && nowait)
            continue;
        if (ev.res < 0) {
            errno = (int)-ev.res;
            return -1;
        }
        return (ssize_t)ev.res;
    }
    return -1;
}

/* Monotonic nanoseconds. */
static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* qsort comparator for uint64_t. */
static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Parse a mode name; -1 if unknown. */
static int parse_mode(const char *s)
{
    if (strcmp(s, "direct") == 0)
        return MODE_DIRECT;
    if (strcmp(s, "append") == 0)
        return MODE_APPEND;
    if (strcmp(s, "buffered") == 0)
        return MODE_BUFFERED;
    if (strcmp(s, "aio") == 0)
        return MODE_AIO;
    return -1;
}

/* Run the probe; see the head comment. */
int main(int argc, char **argv)
{
    if (argc < 2 || argc > 4 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "--help") == 0) {
        fprintf(stderr, "usage: fsync_probe DIR [N [direct|append|buffered|aio]]\n");
        return 1;
    }
    long n = 2000;
    if (argc >= 3) {
        char *end;
        errno = 0;
        n = strtol(argv[2], &end, 10);
        if (errno != 0 || *end != '\0' || n < 1 || n > PROBE_N_MAX) {
            fprintf(stderr, "fsync_probe: N must be 1..%d\n", PROBE_N_MAX);
            return 1;
        }
    }
    int mode = argc >= 4 ? parse_mode(argv[3]) : MODE_DIRECT;
    if (mode < 0) {
        fprintf(stderr, "fsync_probe: unknown mode '%s'\n", argv[3]);
        return 1;
    }
    long total = n + PROBE_WARMUP;
    char path[4096];
    if (snprintf(path, sizeof(path), "%s/.fsync_probe.%ld", argv[1], (long)getpid()) >=
        (int)sizeof(path)) {
        fprintf(stderr, "fsync_probe: directory name too long\n");
        return 1;
    }
    int rc = 1;
    int flags = O_WRONLY | O_CREAT | O_EXCL;
    if (mode != MODE_BUFFERED)
        flags |= O_DSYNC;
    int fd = open(path, flags, 0600);
    if (fd < 0) {
        fprintf(stderr, "fsync_probe: %s: %s\n", path, strerror(errno));
        return 1;
    }
    uint64_t *lat = NULL;
    void *buf = NULL;
    bool per_block = mode == MODE_DIRECT || mode == MODE_AIO;
    long blocks = per_block ? total / PROBE_PER_BLOCK + 1 : total;
    probe_aio aio = {0, -1};
    int e = posix_fallocate(fd, 0, (off_t)blocks * PROBE_BLOCK);
    if (e != 0) {
        fprintf(stderr, "fsync_probe: posix_fallocate: %s\n", strerror(e));
        goto out_close;
    }
    const char *name = mode == MODE_DIRECT   ? "direct"
                       : mode == MODE_APPEND ? "append"
                       : mode == MODE_AIO    ? "aio"
                                             : "buffered";
    if (mode == MODE_AIO) {
        aio.efd = eventfd(0, EFD_CLOEXEC);
        if (aio.efd < 0 || syscall(SYS_io_setup, 1L, &aio.ctx) != 0) {
            fprintf(stderr, "fsync_probe: kernel AIO: %s\n", strerror(errno));
            goto out_close;
        }
    }
    if (mode != MODE_BUFFERED) {
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_DIRECT) != 0) {
            /* As libraft: no direct I/O here (tmpfs, ZFS), buffered O_DSYNC. */
            name = mode == MODE_DIRECT ? "dsync" : mode == MODE_AIO ? "aio-dsync"
                                                                    : "append-dsync";
        }
    }
    if (posix_memalign(&buf, PROBE_BLOCK, PROBE_BLOCK) != 0) {
        fprintf(stderr, "fsync_probe: out of memory\n");
        goto out_close;
    }
    memset(buf, 0x5a, PROBE_BLOCK);
    lat = malloc((size_t)total * sizeof(*lat));
    if (lat == NULL) {
        fprintf(stderr, "fsync_probe: out of memory\n");
        goto out_free;
    }
    for (long i = 0; i < total; i++) {
        long block = per_block ? i / PROBE_PER_BLOCK : i;
        ((uint8_t *)buf)[i % PROBE_BLOCK] ^= 1; /* never the same bytes twice */
        uint64_t t0 = now_ns();
        ssize_t w = mode == MODE_AIO
                        ? aio_write_block(&aio, fd, buf, (off_t)block * PROBE_BLOCK)
                        : pwrite(fd, buf, PROBE_BLOCK, (off_t)block * PROBE_BLOCK);
        if (w != PROBE_BLOCK) {
            fprintf(stderr, "fsync_probe: write: %s\n", w < 0 ? strerror(errno) : "short");
            goto out_free;
        }
        if (mode == MODE_BUFFERED && fdatasync(fd) != 0) {
            fprintf(stderr, "fsync_probe: fdatasync: %s\n", strerror(errno));
            goto out_free;
        }
        lat[i] = now_ns() - t0;
    }
    uint64_t *s = lat + PROBE_WARMUP;
    qsort(s, (size_t)n, sizeof(*s), cmp_u64);
    printf("fsync_p50_us=%llu fsync_p99_us=%llu fsync_max_us=%llu n=%ld mode=%s\n",
           (unsigned long long)(s[(n - 1) / 2] / 1000),
           (unsigned long long)(s[(n * 99 - 1) / 100] / 1000),
           (unsigned long long)(s[n - 1] / 1000), n, name);
    rc = 0;
out_free:
    free(lat);
    free(buf);
out_close:
    if (aio.ctx != 0)
        syscall(SYS_io_destroy, aio.ctx);
    if (aio.efd >= 0)
        close(aio.efd);
    close(fd);
    unlink(path);
    return rc;
}
