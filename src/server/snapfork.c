/* Snapshots encoded in a forked child (see snapfork.h). */
#include "server/snapfork.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "base/assert.h"
#include "base/limits.h"
#include "core/snapshot.h"
#include "base/log.h"

/* Child exit codes (anything else, or a signal, is unexpected). */
#define CHILD_OK 0
#define CHILD_TEST_FAIL 1 /* FENCED_TEST_SNAPSHOT_FAIL */
#define CHILD_ORPHAN 2    /* the parent was gone before PDEATHSIG was set */
#define CHILD_TRUNCATE 3  /* ftruncate of the memfd failed (no memory) */
#define CHILD_MMAP 4      /* mmap of the memfd failed */

/* Monotonic nanoseconds, usable in the child (no libuv there). */
static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Words for a child's exit code. */
static const char *child_what(int code)
{
    switch (code) {
    case CHILD_TEST_FAIL:
        return "test hook FENCED_TEST_SNAPSHOT_FAIL";
    case CHILD_ORPHAN:
        return "parent gone";
    case CHILD_TRUNCATE:
        return "cannot size the memfd (out of memory?)";
    case CHILD_MMAP:
        return "cannot map the memfd";
    default:
        return code > 128 ? "killed by a signal" : "unexpected exit";
    }
}

/* Prepare the report page and the test hooks; check memfd_create works. */
bool fence__snapfork_init(fence_snapfork *sf)
{
    memset(sf, 0, sizeof(*sf));
    sf->fd = -1;
    /* An inherited SIGCHLD of SIG_IGN makes the kernel reap children
     * itself, and collect would never see ours: restore the default. */
    struct sigaction sa;
    if (sigaction(SIGCHLD, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN) {
        signal(SIGCHLD, SIG_DFL);
        FENCE_LOG_I("SIGCHLD was ignored (inherited): restored to default");
    }
    int fd = memfd_create("fenced-snapshot", MFD_CLOEXEC);
    if (fd < 0) {
        FENCE_LOG_W("memfd_create: %s: snapshots are encoded in the loop",
                    strerror(errno));
        return false;
    }
    close(fd);
    void *p = mmap(NULL, sizeof(*sf->rep), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        FENCE_LOG_W("mmap: %s: snapshots are encoded in the loop", strerror(errno));
        return false;
    }
    sf->rep = p;
    const char *env = getenv("FENCED_TEST_SNAPSHOT_FAIL");
    if (env != NULL && *env != '\0') {
        sf->fail_left = strtoull(env, NULL, 10);
        FENCE_LOG_W("test hook: the first %llu snapshot children will fail",
                    (unsigned long long)sf->fail_left);
    }
    env = getenv("FENCED_TEST_SNAPSHOT_CHECK");
    if (env != NULL && strcmp(env, "1") == 0) {
        sf->check_hook = true;
        FENCE_LOG_W("test hook: every forked snapshot is compared with the "
                    "in-loop encoder's bytes");
    }
    sf->enabled = true;
    return true;
}

/* The child: encode the inherited state into the memfd and exit.  Only
 * async-signal-safe calls and the pure encoder (which neither allocates
 * nor locks; a failed FENCE_ASSERT writes with write(2) and aborts). */
static _Noreturn void child_main(fence_snapfork *sf, const fence_fsm *f,
                                 pid_t parent, bool fail)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(CHILD_ORPHAN);
    /* The signals fenced catches through libuv: libuv's handler would
     * write to a pipe this child is about to close. */
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    signal(SIGPIPE, SIG_IGN);
    /* Drop our references to every descriptor but stdio and the memfd. */
    if (sf->fd > 3)
        close_range(3, (unsigned)sf->fd - 1, 0);
    close_range((unsigned)sf->fd + 1, ~0u, 0);
    if (fail)
        _exit(CHILD_TEST_FAIL);
    /* On a small machine the encoder competes with the loop for a core:
     * let the loop win (the snapshot only takes longer). */
    if (nice(FENCE_SNAPSHOT_CHILD_NICE) == -1) {
        /* errno only: a child that keeps its priority is fine */
    }
    uint64_t t0 = mono_ns();
    size_t size = fence_fsm_snapshot_size(f);
    if (ftruncate(sf->fd, (off_t)size) != 0)
        _exit(CHILD_TRUNCATE);
    uint8_t *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, sf->fd, 0);
    if (p == MAP_FAILED)
        _exit(CHILD_MMAP);
    size_t len = fence_fsm_snapshot(f, p, size);
    FENCE_ASSERT(len == size);
    sf->rep->len = len;
    sf->rep->encode_us = (mono_ns() - t0) / 1000;
    /* munmap is implied by _exit; the pages belong to the memfd. */
    _exit(CHILD_OK);
}

/* Fork a child encoding f as it is now. */
int fence__snapfork_start(fence_snapfork *sf, const fence_fsm *f)
{
    FENCE_ASSERT(sf->enabled);
    FENCE_ASSERT(sf->pid == 0);
    FENCE_ASSERT(sf->fd < 0);
    uint64_t now = uv_hrtime();
    if (now < sf->retry_ns)
        return FENCE_SNAPFORK_BUSY;
    sf->fd = memfd_create("fenced-snapshot", MFD_CLOEXEC);
    if (sf->fd < 0) {
        FENCE_LOG_W("snapshot not taken: memfd_create: %s", strerror(errno));
        goto out_backoff;
    }
    sf->rep->len = 0;
    sf->rep->encode_us = 0;
    sf->collected = false;
    sf->child_status = -1;
    sf->token = fence_fsm_last_token(f);
    bool fail = false;
    if (sf->fail_left > 0) {
        sf->fail_left--;
        fail = true;
    }
    if (sf->check_hook) {
        /* Test hook: the same state, encoded here, for finish to compare. */
        free(sf->check);
        sf->check_len = fence_fsm_snapshot_size(f);
        sf->check = malloc(sf->check_len);
        FENCE_ASSERT(sf->check != NULL);
        size_t n = fence_fsm_snapshot(f, sf->check, sf->check_len);
        FENCE_ASSERT(n == sf->check_len);
    }
    pid_t parent = getpid();
    sf->start_ns = uv_hrtime();
    pid_t pid = fork();
    if (pid == 0)
        child_main(sf, f, parent, fail);
    sf->fork_ns = uv_hrtime() - sf->start_ns;
    if (pid < 0) {
        FENCE_LOG_W("snapshot not taken: fork: %s", strerror(errno));
        close(sf->fd);
        sf->fd = -1;
        goto out_backoff;
    }
    sf->pid = pid;
    return FENCE_SNAPFORK_OK;

out_backoff:
    sf->failed++;
    sf->retry_ns = now + (uint64_t)FENCE_SNAPSHOT_RETRY_MS * 1000000u;
    return FENCE_SNAPFORK_BUSY;
}

/* Wait for the child (thread pool) and map what it wrote. */
int fence__snapfork_collect(fence_snapfork *sf, struct raft_buffer *bufs[],
                            unsigned *n_bufs)
{
    FENCE_ASSERT(sf->pid > 0);
    FENCE_ASSERT(sf->map == NULL);
    siginfo_t info;
    int rv;
    do {
        memset(&info, 0, sizeof(info));
        rv = waitid(P_PID, (id_t)sf->pid, &info, WEXITED | WNOWAIT);
    } while (rv != 0 && errno == EINTR);
    if (rv != 0) {
        /* ECHILD: someone else reaped it (nothing in fenced does): the pid
         * may be reused already, so finish must not signal it. */
        if (errno == ECHILD)
            sf->collected = true;
        return RAFT_IOERR;
    }
    sf->collected = true;
    sf->child_status =
        info.si_code == CLD_EXITED ? info.si_status : 128 + info.si_status;
    if (sf->child_status != CHILD_OK)
        return RAFT_IOERR;
    size_t len = (size_t)sf->rep->len;
    struct stat st;
    if (len == 0 || fstat(sf->fd, &st) != 0 || (uint64_t)st.st_size != len) {
        sf->child_status = CHILD_TRUNCATE;
        return RAFT_IOERR;
    }
    void *p = mmap(NULL, len, PROT_READ, MAP_SHARED, sf->fd, 0);
    if (p == MAP_FAILED) {
        sf->child_status = CHILD_MMAP;
        return RAFT_IOERR;
    }
    sf->map = p;
    sf->map_len = len;
    sf->buf.base = p;
    sf->buf.len = len;
    *bufs = &sf->buf;
    *n_bufs = 1;
    return 0;
}

/* Reap the child, compare (test hook), log, release. */
void fence__snapfork_finish(fence_snapfork *sf)
{
    FENCE_ASSERT(sf->enabled);
    if (sf->pid > 0) {
        if (!sf->collected)
            kill(sf->pid, SIGKILL); /* not reaped yet: the pid is still ours */
        int st;
        while (waitpid(sf->pid, &st, 0) < 0 && errno == EINTR) {
        }
        sf->pid = 0;
    }
    if (sf->map != NULL) {
        if (sf->check != NULL) {
            if (sf->check_len != sf->map_len ||
                memcmp(sf->check, sf->map, sf->map_len) != 0)
                fence__log_fatal("snapshot check: the forked child's %zu bytes "
                                 "differ from the in-loop encoder's %zu",
                                 sf->map_len, sf->check_len);
            FENCE_LOG_I("snapshot check: fork bytes equal inline bytes (%zu)",
                        sf->map_len);
        }
        sf->taken++;
        sf->last_len = sf->map_len;
        FENCE_LOG_I("snapshot taken: %zu bytes, fork %.1f ms, encode %.1f ms, "
                    "total %.1f ms, last token %llu",
                    sf->map_len, (double)sf->fork_ns / 1e6,
                    (double)sf->rep->encode_us / 1e3,
                    (double)(uv_hrtime() - sf->start_ns) / 1e6,
                    (unsigned long long)sf->token);
        munmap(sf->map, sf->map_len);
        sf->map = NULL;
        sf->map_len = 0;
        sf->buf.base = NULL;
        sf->buf.len = 0;
    } else if (sf->fd >= 0) {
        sf->failed++;
        sf->retry_ns = uv_hrtime() + (uint64_t)FENCE_SNAPSHOT_RETRY_MS * 1000000u;
        FENCE_LOG_W("snapshot failed: child %s (status %d); retry in %u ms",
                    sf->collected ? child_what(sf->child_status) : "not waited for",
                    sf->child_status, (unsigned)FENCE_SNAPSHOT_RETRY_MS);
    }
    if (sf->fd >= 0) {
        close(sf->fd);
        sf->fd = -1;
    }
}

/* Kill a running child at shutdown. */
void fence__snapfork_cancel(fence_snapfork *sf)
{
    /* Before finish reaps it the pid cannot be reused (a zombie keeps it). */
    if (sf->pid > 0)
        kill(sf->pid, SIGKILL);
}

/* Release the report page and the test hook's buffer. */
void fence__snapfork_free(fence_snapfork *sf)
{
    FENCE_ASSERT(sf->pid == 0);
    if (sf->rep != NULL)
        munmap(sf->rep, sizeof(*sf->rep));
    sf->rep = NULL;
    free(sf->check);
    sf->check = NULL;
}
