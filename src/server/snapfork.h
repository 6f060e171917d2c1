/* Snapshots that never stall the loop: the capture is a fork(), as in
 * Redis's BGSAVE.  raft_fsm version 3 (libraft 0.15) splits a snapshot in
 * three calls, and this module gives each its part:
 *
 *   fence__snapfork_start()    fsm->snapshot, in the loop: create a memfd
 *                              and fork.  The child inherits the state
 *                              copy-on-write, a consistent image at exactly
 *                              the applied index; it encodes it with the
 *                              pure encoder (core/snapshot.h) straight into
 *                              the memfd, mapped shared (no allocation), and
 *                              _exit()s.  The loop pays only for the fork.
 *   fence__snapfork_collect()  fsm->snapshot_async, in libuv's thread pool:
 *                              wait for that child (waitid on its pid, with
 *                              WNOWAIT: it stays a zombie, so only the loop
 *                              reaps it and a kill can never hit a reused
 *                              pid), check its exit status, map the memfd
 *                              read-only as the one buffer raft writes.  It
 *                              never reads the live state, which raft keeps
 *                              changing meanwhile.
 *   fence__snapfork_finish()   fsm->snapshot_finalize, in the loop: reap the
 *                              child (killing it first if collect never
 *                              ran), unmap, close, log the numbers.
 *
 * A failed fork (ENOMEM, EAGAIN) or memfd is a failed snapshot: start
 * returns FENCE_SNAPFORK_BUSY, which the caller turns into RAFT_BUSY (raft
 * ignores it and tries again at a later apply); a failed child makes
 * collect return non-zero (raft drops that snapshot and tries again).  In
 * both cases no new fork is tried for FENCE_SNAPSHOT_RETRY_MS, so a fork
 * that keeps failing costs the loop nothing.
 *
 * The child touches nothing but the inherited state and the memfd: it
 * closes every other file descriptor (client and raft sockets, the raft
 * data files, libuv's epoll and signal pipes: only its references; the
 * parent's stay open), sets PR_SET_PDEATHSIG to SIGKILL, restores the
 * default action of the signals fenced catches, and makes no libuv, stdio,
 * log or malloc call.
 *
 * Test hooks (environment):
 *   FENCED_TEST_SNAPSHOT_FAIL=N  the first N children exit with status 1.
 *   FENCED_TEST_SNAPSHOT_CHECK=1 at each fork the loop also encodes the
 *                                same state in place, and finish compares
 *                                the child's bytes with those (a mismatch
 *                                stops the process); logs "snapshot check:
 *                                fork bytes equal inline bytes". */
#ifndef FENCE_SERVER_SNAPFORK_H
#define FENCE_SERVER_SNAPFORK_H

#include <raft.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/fsm.h"

/* start's outcomes. */
#define FENCE_SNAPFORK_OK 0
#define FENCE_SNAPFORK_BUSY 1 /* no child (fork/memfd failed, or backing off) */

/* What the child reports, in a page shared with it. */
typedef struct fence__snapfork_report {
    uint64_t len;       /* bytes encoded */
    uint64_t encode_us; /* the child's encoding time */
} fence__snapfork_report;

/* One snapshot in flight at most (raft never starts a second one). */
typedef struct fence_snapfork {
    bool enabled;               /* fork mode available (init succeeded) */
    pid_t pid;                  /* the child, 0: none */
    int fd;                     /* its memfd, -1: none */
    fence__snapfork_report *rep; /* the shared report page */
    void *map;                  /* the memfd mapped for raft, or NULL */
    size_t map_len;             /* its length */
    struct raft_buffer buf;     /* the one buffer handed to raft */
    bool collected;             /* collect saw the child exit (WNOWAIT) */
    int child_status;           /* its exit code, or 128 + signal */
    uint64_t fork_ns;           /* the fork's time in the loop */
    uint64_t start_ns;          /* uv_hrtime() at the fork */
    uint64_t token;             /* last token at the fork (log line) */
    uint64_t retry_ns;          /* no fork before this uv_hrtime() */
    uint64_t fail_left;         /* FENCED_TEST_SNAPSHOT_FAIL countdown */
    bool check_hook;            /* FENCED_TEST_SNAPSHOT_CHECK is on */
    uint8_t *check;             /* its in-loop bytes of this snapshot */
    size_t check_len;           /* their length */
    uint64_t taken;             /* snapshots handed to raft */
    uint64_t last_len;          /* the last one's bytes */
    uint64_t failed;            /* snapshots that failed */
} fence_snapfork;

/* Prepare (map the report page, check memfd works, read the test hooks).
 * false: fork mode is unavailable (logged); use the in-loop encoder. */
bool fence__snapfork_init(fence_snapfork *sf);

/* Loop: fork a child encoding f as it is now.  FENCE_SNAPFORK_OK, or
 * FENCE_SNAPFORK_BUSY (logged). */
int fence__snapfork_start(fence_snapfork *sf, const fence_fsm *f);

/* Thread pool: wait for the child; on success bufs and n_bufs name the
 * snapshot (valid until finish).  0, or a RAFT_* error (the child failed). */
int fence__snapfork_collect(fence_snapfork *sf, struct raft_buffer *bufs[],
                            unsigned *n_bufs);

/* Loop: release everything of this snapshot (after collect, or instead of
 * it: the child is then killed). */
void fence__snapfork_finish(fence_snapfork *sf);

/* Loop, at shutdown: kill a running child, so the pending collect ends now
 * instead of after a whole encode (that snapshot then fails). */
void fence__snapfork_cancel(fence_snapfork *sf);

/* Release what init set up (no snapshot in flight). */
void fence__snapfork_free(fence_snapfork *sf);

#endif /* FENCE_SERVER_SNAPFORK_H */
