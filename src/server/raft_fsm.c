/* The state machine raft drives on every server: its creation (the core
 * over malloc) and raft's view of it (struct raft_fsm): apply an entry
 * (forwarded to the leader module, src/leader/replica.c), snapshot
 * (forked or in the loop, snapfork.h) and restore.  The other half of
 * fenced's side towards raft, the requests the leader module makes
 * (propose, barrier) and their callbacks, is raft_ops.c.
 *
 * libraft 0.15 behaviour this file relies on (read in its v0.15.0
 * source; the rest is listed in leader.h):
 *   - replication.c applyCommand(): fsm->apply runs on every server for
 *     every committed command entry; on the leader the raft_apply
 *     callback of the same entry (raft_ops.c) fires right after it, with
 *     the result pointer apply set, which points into the leader module
 *     (nobody frees it).
 *   - snapshot.c snapshotRestore(): on success the restored buffer is the
 *     fsm's to raft_free.  With fsm version 3 and snapshot_finalize set,
 *     the buffers fsm->snapshot / snapshot_async hand out stay ours.
 *   - replication.c takeSnapshot(): a non-zero return of fsm->snapshot
 *     other than RAFT_BUSY propagates out of replicationApply (and on a
 *     follower fails the AppendEntries being handled); RAFT_BUSY is
 *     ignored and the snapshot retried at a later apply. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "base/assert.h"
#include "base/log.h"
#include "server/server.h"

/* fsm_apply halves its byte and entry counts at this many entries, so the
 * mean entry size follows the recent load. */
#define APPLIED_HALVE_AT (1u << 20)
/* fsm_apply scales the threshold again at this many entries applied. */
#define RESCALE_AT 64u

static void scale_snapshot_threshold(fence_server *s);

/* Allocator handed to the core. */
static void *core_alloc(void *ctx, size_t size)
{
    (void)ctx;
    return malloc(size);
}

/* Deallocator handed to the core. */
static void core_free(void *ctx, void *ptr)
{
    (void)ctx;
    free(ptr);
}

/* Create the state machine (s->fsm) over malloc; see server.h. */
int fence__raft_fsm_create(fence_server *s)
{
    fence_fsm_opts fo;
    memset(&fo, 0, sizeof(fo));
    fo.alloc.alloc = core_alloc;
    fo.alloc.free = core_free;
    /* Keys the core's hash tables so clients cannot choose lock names or
     * request ids that all land in one bucket.  It changes no result and no
     * snapshot byte, so every node may use its own. */
    if (getrandom(&fo.hash_seed, sizeof(fo.hash_seed), 0) !=
        (ssize_t)sizeof(fo.hash_seed))
        fo.hash_seed = (uint64_t)uv_hrtime() ^ ((uint64_t)getpid() << 32);
    if (fence_fsm_create(&fo, &s->fsm) != 0) {
        FENCE_LOG_E("cannot create the state machine");
        return -1;
    }
    return 0;
}

/* raft fsm->apply: the module applies the entry on every server. */
static int fsm_apply(struct raft_fsm *fsm, const struct raft_buffer *buf,
                     void **result)
{
    fence_server *s = fsm->data;
    s->applied_bytes += buf->len;
    s->applied_entries++;
    if (s->applied_entries >= APPLIED_HALVE_AT) {
        /* A mean over the recent entries, not over the whole life. */
        s->applied_bytes /= 2;
        s->applied_entries /= 2;
    }
    if (s->applied_entries == RESCALE_AT && s->snap_bytes > 0) {
        /* A restored node has no mean entry size at its restore: scale
         * once it has one, so a restart's replay does not end in a
         * snapshot at the configured threshold. */
        scale_snapshot_threshold(s);
    }
    *result = (void *)fence__leader_apply(s->leader, buf->base, buf->len);
    return 0;
}

/* Scale the snapshot threshold with the state: the next snapshot comes
 * after the most of
 *   - --snapshot-threshold entries,
 *   - as many entries as live leases, locks and waiters (a million held
 *     locks are not serialized every 1,024 entries),
 *   - as many entries as make up --snapshot-log-ratio (default 2) times
 *     the latest snapshot's bytes, at the mean size of recent entries:
 *     the log kept since the last snapshot (in raft's memory, on disk,
 *     and replayed by a restart) stays within a fixed multiple of the
 *     state's own size, whatever that size is: a node's disk holds about
 *     1 + ratio times its state (plus --snapshot-trailing entries), and
 *     a restart replays at most ratio snapshots' worth of entries after
 *     restoring one.  With 2, a full dedup table (3.7 MB) is snapshotted
 *     every ~4,200 entries of ~1.7 KB instead of every 1,024, and a restart
 *     replays at most those (~1 s on the loaded 2-core VM; 4 would be
 *     ~2 s there; docs/performance.md, "Snapshot cadence").  This
 *     covers what the counts above do not: the dedup table (65,536
 *     records, 3.7 MB, when every write carries a REQID) and large names.
 * So encoding the whole state costs a bounded amount per entry (and per
 * byte logged) however big it is (docs/cluster.md, docs/performance.md). */
static void scale_snapshot_threshold(fence_server *s)
{
    fence_fsm_stats st;
    fence_fsm_stats_get(s->fsm, &st);
    uint64_t n = st.leases + st.locks + st.waiters;
    uint64_t thr = s->cfg->snapshot_threshold;
    if (n > thr)
        thr = n;
    uint64_t ratio = s->cfg->snapshot_log_ratio;
    if (ratio > 0 && s->snap_bytes > 0 && s->applied_entries > 0) {
        uint64_t mean = s->applied_bytes / s->applied_entries;
        uint64_t by_bytes = s->snap_bytes / (mean > 0 ? mean : 1);
        by_bytes = by_bytes > FENCE_SNAPSHOT_THRESHOLD_MAX / ratio
                       ? FENCE_SNAPSHOT_THRESHOLD_MAX
                       : by_bytes * ratio;
        if (by_bytes > thr)
            thr = by_bytes;
    }
    if (thr > FENCE_SNAPSHOT_THRESHOLD_MAX)
        thr = FENCE_SNAPSHOT_THRESHOLD_MAX;
    raft_set_snapshot_threshold(&s->node.raft, (unsigned)thr);
}

/* raft fsm->snapshot (fsm version 3; the buffers are ours, freed in
 * fsm_snapshot_finalize).  With --snapshot-fork 1 this only forks a child
 * that encodes the state it inherited (snapfork.h), and
 * fsm_snapshot_async collects it; otherwise (or when raft's io has no
 * async_work) the state is encoded here, in the loop.  A snapshot that
 * cannot start is RAFT_BUSY, which raft ignores: it tries again at a
 * later apply. */
static int fsm_snapshot(struct raft_fsm *fsm, struct raft_buffer *bufs[],
                        unsigned *n_bufs)
{
    fence_server *s = fsm->data;
    /* libraft 0.15 files a snapshot taken while a membership change is
     * uncommitted under the old committed configuration's index with the
     * new configuration, so the nodes that restore it disagree on who is a
     * member (found by the simulation; docs/cluster.md, libraft pitfalls).
     * Not yet: raft asks again at a later apply, once the change commits. */
    if (s->node.raft.configuration_uncommitted_index != 0)
        return RAFT_BUSY;
    if (fsm->snapshot_async != NULL) {
        *bufs = NULL;
        *n_bufs = 0;
        if (fence__snapfork_start(&s->snap, s->fsm) != FENCE_SNAPFORK_OK)
            return RAFT_BUSY;
        scale_snapshot_threshold(s);
        return 0;
    }
    FENCE_ASSERT(s->snap_inline == NULL);
    uint64_t t0 = uv_hrtime();
    size_t size = fence_fsm_snapshot_size(s->fsm);
    struct raft_buffer *b = malloc(sizeof(*b));
    if (b == NULL)
        return RAFT_BUSY;
    s->snap_inline = malloc(size);
    if (s->snap_inline == NULL) {
        free(b);
        return RAFT_BUSY;
    }
    b->base = s->snap_inline;
    b->len = fence_fsm_snapshot(s->fsm, s->snap_inline, size);
    FENCE_ASSERT(b->len == size);
    *bufs = b;
    *n_bufs = 1;
    scale_snapshot_threshold(s);
    FENCE_LOG_I("snapshot taken: %zu bytes, in the loop: encode %.1f ms, last token %llu",
                size, (double)(uv_hrtime() - t0) / 1e6,
                (unsigned long long)fence_fsm_last_token(s->fsm));
    return 0;
}

/* raft fsm->snapshot_async, in libuv's thread pool: wait for the child
 * fsm_snapshot forked.  It must not (and does not) read the live state,
 * which raft keeps applying to meanwhile. */
static int fsm_snapshot_async(struct raft_fsm *fsm, struct raft_buffer *bufs[],
                              unsigned *n_bufs)
{
    fence_server *s = fsm->data;
    return fence__snapfork_collect(&s->snap, bufs, n_bufs);
}

/* raft fsm->snapshot_finalize, in the loop, after every snapshot that
 * fsm_snapshot started (written, failed or abandoned). */
static int fsm_snapshot_finalize(struct raft_fsm *fsm, struct raft_buffer *bufs[],
                                 unsigned *n_bufs)
{
    fence_server *s = fsm->data;
    /* Told apart by what fsm_snapshot made, not by snapshot_async: raft
     * may take an in-loop snapshot inside raft_start, before that is set. */
    if (s->snap_inline != NULL) {
        s->snap_bytes = (*bufs)->len;
        free(s->snap_inline);
        s->snap_inline = NULL;
        free(*bufs);
    } else {
        uint64_t taken = s->snap.taken;
        fence__snapfork_finish(&s->snap);
        if (s->snap.taken != taken)
            s->snap_bytes = s->snap.last_len;
    }
    *bufs = NULL;
    *n_bufs = 0;
    /* Now with this snapshot's size (fsm_snapshot scaled with the last). */
    scale_snapshot_threshold(s);
    return 0;
}

/* raft fsm->restore: replace the state; on success the buffer is ours. */
static int fsm_restore(struct raft_fsm *fsm, struct raft_buffer *buf)
{
    fence_server *s = fsm->data;
    uint64_t t0 = uv_hrtime();
    int rv = fence_fsm_restore(s->fsm, buf->base, buf->len);
    if (rv != 0) {
        FENCE_LOG_E("snapshot restore failed (%d): corrupt or unknown version", rv);
        return rv == FENCE_ST_LIMIT ? RAFT_NOMEM : RAFT_CORRUPT;
    }
    s->snap_bytes = buf->len;
    raft_free(buf->base);
    FENCE_LOG_I("snapshot restored: %zu bytes in %.1f ms, last token %llu", buf->len,
                (double)(uv_hrtime() - t0) / 1e6,
                (unsigned long long)fence_fsm_last_token(s->fsm));
    scale_snapshot_threshold(s);
    fence__leader_restored(s->leader);
    return 0;
}

/* Set up raft's view of the state machine (snapshot_async is set once
 * raft's io is known: fence__raft_fsm_async). */
void fence__raft_fsm_init(fence_server *s)
{
    s->raft_fsm.version = 3;
    s->raft_fsm.data = s;
    s->raft_fsm.apply = fsm_apply;
    s->raft_fsm.snapshot = fsm_snapshot;
    s->raft_fsm.restore = fsm_restore;
    s->raft_fsm.snapshot_finalize = fsm_snapshot_finalize;
    s->raft_fsm.snapshot_async = NULL;
}

/* Encode snapshots in a forked child from now on (snapfork.h). */
void fence__raft_fsm_async(fence_server *s)
{
    s->raft_fsm.snapshot_async = fsm_snapshot_async;
}
