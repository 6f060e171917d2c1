/* The server's loop machinery: the raft state-machine glue, group commit,
 * leadership start-up, the lease/wait timer, the wait table, and shutdown.
 *
 * libraft 0.15 behaviour this relies on (read in its v0.15.0 source):
 *   - replication.c applyCommand(): fsm->apply(buf, &result) runs on every
 *     server; on the leader the raft_apply callback of that entry fires
 *     right after, with that same result pointer and before the next entry
 *     is applied.  Nobody frees result (on followers there is no callback),
 *     so results go to a server-owned array (s->results), never the heap.
 *   - convert.c convertFailApply(): when leadership is lost, pending
 *     requests complete with RAFT_LEADERSHIPLOST and a NULL result: the
 *     outcome is unknown, so clients get TRYAGAIN and retry with REQID.
 *   - client.c raft_apply(): the buffer belongs to raft only when it
 *     returns 0 (on failure logDiscard() does not free it; we do).
 *   - raft_barrier() appends a (RAFT_BARRIER) log entry; its callback fires
 *     once every earlier entry is applied: the new leader's catch-up.
 *   - snapshot.c snapshotRestore(): on success the restored buffer is the
 *     fsm's to raft_free; with fsm version 1, raft frees snapshot buffers.
 *   - uv_encoding.c / uv_segment.c: entries are padded to 8 bytes when
 *     written but reloaded unpadded, so entries are framed (node.h). */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "server/log.h"
#include "server/server.h"

/* Initial wait-table size (grows by doubling). */
#define WAIT_TAB_INITIAL 1024

static void propose_pending(fence_server *s);

/* Monotonic milliseconds (uv_hrtime never jumps with the wall clock). */
static uint64_t mono_ms(void)
{
    return uv_hrtime() / 1000000;
}

/* Current fsm time on this server: monotonic ms plus the offset chosen when
 * it became leader, so fsm time never goes back across leaders.  Off the
 * leader, the time of the last applied entry. */
uint64_t fence__server_now(fence_server *s)
{
    if (s->lstate == LS_NONE)
        return fence_fsm_now(s->fsm);
    uint64_t t = mono_ms() + s->time_offset;
    uint64_t applied = fence_fsm_now(s->fsm);
    return t > applied ? t : applied;
}

/* ---- The wait table: wait_id -> slot ------------------------------------ */

/* Bucket of a wait id (ids are sequential; a multiplicative hash spreads
 * them anyway). */
static size_t wait_bucket(const fence_server *s, uint64_t id)
{
    return (size_t)((id * 0x9E3779B97F4A7C15ULL) >> 20) & (s->wait_nb - 1);
}

/* Double the bucket array when the table gets crowded (best effort: a
 * failed grow leaves longer chains, nothing else). */
static void wait_grow(fence_server *s)
{
    size_t nb = s->wait_nb * 2;
    fence_slot **tab = calloc(nb, sizeof(*tab));
    if (tab == NULL)
        return;
    size_t old_nb = s->wait_nb;
    fence_slot **old = s->wait_tab;
    s->wait_tab = tab;
    s->wait_nb = nb;
    for (size_t i = 0; i < old_nb; i++) {
        fence_slot *p = old[i];
        while (p != NULL) {
            fence_slot *next = p->wnext;
            size_t b = wait_bucket(s, p->wait_id);
            p->wnext = tab[b];
            tab[b] = p;
            p = next;
        }
    }
    free(old);
}

/* Register slot as waiting for wait_id's outcome. */
static void wait_insert(fence_server *s, fence_slot *slot, uint64_t wait_id)
{
    if (s->n_waits >= s->wait_nb)
        wait_grow(s);
    slot->wait_id = wait_id;
    slot->state = SLOT_WAIT;
    size_t b = wait_bucket(s, wait_id);
    slot->wnext = s->wait_tab[b];
    s->wait_tab[b] = slot;
    s->n_waits++;
}

/* Find and unlink one slot waiting for wait_id, or NULL.  Several slots
 * can wait for the same wait_id: the core answers a LOCK by a lease that
 * already waits for that lock with the existing wait (a retry, or a
 * pipelined duplicate), so each of them gets the outcome. */
static fence_slot *wait_take(fence_server *s, uint64_t wait_id)
{
    fence_slot **pp = &s->wait_tab[wait_bucket(s, wait_id)];
    for (; *pp != NULL; pp = &(*pp)->wnext) {
        if ((*pp)->wait_id == wait_id) {
            fence_slot *slot = *pp;
            *pp = slot->wnext;
            slot->wnext = NULL;
            s->n_waits--;
            return slot;
        }
    }
    return NULL;
}

/* Whether any slot still waits for wait_id. */
static bool wait_has(fence_server *s, uint64_t wait_id)
{
    for (fence_slot *p = s->wait_tab[wait_bucket(s, wait_id)]; p != NULL; p = p->wnext)
        if (p->wait_id == wait_id)
            return true;
    return false;
}

/* Remove this registered slot (its connection is closing); true when no
 * other slot waits for the same wait, so the wait itself can go. */
bool fence__wait_remove(fence_server *s, fence_slot *slot)
{
    assert(slot->state == SLOT_WAIT);
    fence_slot **pp = &s->wait_tab[wait_bucket(s, slot->wait_id)];
    while (*pp != slot) {
        assert(*pp != NULL);
        pp = &(*pp)->wnext;
    }
    *pp = slot->wnext;
    slot->wnext = NULL;
    s->n_waits--;
    return !wait_has(s, slot->wait_id);
}

/* ---- Batches ---------------------------------------------------------------- */

/* Free a batch's memory (its slots are handled by the caller). */
static void batch_free(fence_batch *b)
{
    free(b->items);
    free(b->names);
    free(b);
}

/* Propose the pending batch before slot (not yet in any batch) is added.
 * A failed proposal replies to the batch's slots, and a reply that fails
 * for lack of memory closes its connection, which frees that connection's
 * unbatched slots: slot is marked as batched meanwhile, so such a close
 * orphans it (conn = NULL) instead of freeing it under the caller. */
static void propose_before(fence_server *s, fence_slot *slot)
{
    if (slot != NULL)
        slot->state = SLOT_BATCH;
    propose_pending(s);
    if (slot != NULL)
        slot->state = SLOT_NEW;
}

/* Append a command or read to the pending batch; see server.h. */
fence_item *fence__batch_add(fence_server *s, const fence_cmd *cmd, uint8_t op,
                             bool is_read, fence_slot *slot)
{
    fence_batch *b = s->pending;
    if (b != NULL && b->n_items >= FENCE_BATCH_MAX) {
        /* Full: it goes out now, even behind an entry in flight. */
        propose_before(s, slot);
        b = s->pending;
    }
    fence_conn *c = slot != NULL ? slot->conn : NULL;
    if (b != NULL && !is_read && c != NULL && c->read_seq == b->seq) {
        /* A read of this connection rides this batch, and reads are
         * answered once the whole entry is applied: a later write of the
         * same pipeline must not be in it, or the read would see it.  So
         * the batch goes out now (as when full) and the write starts the
         * next one. */
        propose_before(s, slot);
        b = s->pending;
        c = slot->conn;
    }
    if (b == NULL) {
        b = calloc(1, sizeof(*b));
        if (b == NULL)
            return NULL;
        b->req.data = b;
        b->srv = s;
        b->seq = ++s->batch_seq;
        s->pending = b;
    }
    if (b->n_items == b->cap_items) {
        uint32_t cap = b->cap_items ? b->cap_items * 2 : 16;
        if (cap > FENCE_BATCH_MAX)
            cap = FENCE_BATCH_MAX;
        fence_item *items = realloc(b->items, cap * sizeof(*items));
        if (items == NULL)
            return NULL;
        b->items = items;
        b->cap_items = cap;
    }
    if (b->names_len + cmd->name_len > b->names_cap) {
        size_t cap = b->names_cap ? b->names_cap * 2 : 1024;
        while (cap < b->names_len + cmd->name_len)
            cap *= 2;
        uint8_t *names = realloc(b->names, cap);
        if (names == NULL)
            return NULL;
        b->names = names;
        b->names_cap = cap;
    }
    fence_item *it = &b->items[b->n_items++];
    it->cmd = *cmd;
    it->cmd.name = NULL;
    it->name_off = (uint32_t)b->names_len;
    if (cmd->name_len > 0)
        memcpy(b->names + b->names_len, cmd->name, cmd->name_len);
    b->names_len += cmd->name_len;
    it->op = op;
    it->is_read = is_read;
    it->slot = slot;
    if (!is_read)
        b->n_cmds++;
    if (slot != NULL) {
        slot->state = SLOT_BATCH;
        if (c != NULL) {
            c->unapplied++;
            if (is_read)
                c->read_seq = b->seq;
        }
    }
    return it;
}

/* Queue an internal command (no reply) into the pending batch. */
static bool batch_add_internal(fence_server *s, const fence_cmd *cmd)
{
    return fence__batch_add(s, cmd, OP_INTERNAL, false, NULL) != NULL;
}

/* Propose CANCEL for a wait whose client went away.  Only a ready leader
 * can; otherwise the wait ends by its timeout or its lease. */
void fence__cancel_wait(fence_server *s, uint64_t wait_id)
{
    if (s->lstate != LS_READY || s->stopping)
        return;
    fence_cmd cmd;
    memset(&cmd, 0, sizeof(cmd));
    cmd.type = FENCE_CMD_CANCEL;
    cmd.wait_id = wait_id;
    if (!batch_add_internal(s, &cmd))
        LOG_WARN("out of memory: wait %llu not cancelled", (unsigned long long)wait_id);
}

/* Give the item's slot its reply for a failed proposal (outcome unknown or
 * never proposed). */
static void item_fail(fence_server *s, fence_item *it, int raft_status)
{
    fence_slot *slot = it->slot;
    if (slot == NULL)
        return;
    if (slot->conn != NULL) {
        assert(slot->conn->unapplied > 0);
        slot->conn->unapplied--;
    }
    slot->state = SLOT_NEW;
    if (raft_status == RAFT_NOTLEADER || raft_status == RAFT_SHUTDOWN) {
        fence__cmd_reply_unavailable(s, slot);
        return;
    }
    if (it->is_read) {
        fence__slot_error(slot, "TRYAGAIN", "leadership changed; retry the read");
        return;
    }
    fence__slot_error(slot, "TRYAGAIN",
                      "outcome unknown (leadership lost or shutdown); "
                      "retry with the same REQID");
}

/* An internal command (no slot) was not applied: its proposal failed or
 * its outcome is unknown.  A lost TICK must not stop the timer: while this
 * server stays a ready leader (say a leadership transfer made raft_apply
 * refuse the entry, then timed out) nothing else would process expired
 * leases and wait timeouts until some client writes.  So re-arm it at the
 * loop check; rearm_timer backs off when the deadline is already due. */
static void internal_fail(fence_server *s, const fence_item *it)
{
    assert(it->slot == NULL);
    if (it->cmd.type == FENCE_CMD_TICK) {
        s->tick_pending = false;
        s->rearm = true;
    }
    if (it->cmd.type == FENCE_CMD_LEADER_START && s->lstate == LS_STARTING)
        s->lstate = LS_NONE;
}

/* Deliver a finished wait's outcome to its slot. */
static void deliver_event(fence_slot *slot, const fence_result *r)
{
    slot->state = SLOT_NEW;
    fence__cmd_reply_result(slot, r);
}

/* Handle one item of an applied entry.  r is its command result (NULL for
 * reads). */
static void item_done(fence_server *s, fence_batch *b, fence_item *it,
                      const fence_result *r)
{
    fence_slot *slot = it->slot;
    if (slot == NULL) {
        if (it->cmd.type == FENCE_CMD_TICK)
            s->tick_pending = false;
        if (it->cmd.type == FENCE_CMD_LEADER_START && s->lstate == LS_STARTING &&
            fence__node_is_leader(&s->node)) {
            s->lstate = LS_READY;
            s->rearm = true;
            LOG_INFO("leader ready: term %llu, last token %llu",
                     (unsigned long long)s->node.raft.current_term,
                     (unsigned long long)fence_fsm_last_token(s->fsm));
        }
        return;
    }
    if (slot->conn != NULL) {
        assert(slot->conn->unapplied > 0);
        slot->conn->unapplied--;
    }
    slot->state = SLOT_NEW;
    if (it->is_read) {
        if (slot->conn == NULL) {
            fence__slot_free(slot);
            return;
        }
        it->cmd.name = b->names + it->name_off;
        fence__cmd_reply_read(s, slot, &it->cmd);
        return;
    }
    assert(r != NULL);
    if (r->status != FENCE_ST_QUEUED) {
        fence__cmd_reply_result(slot, r);
        return;
    }
    /* The wait may already have ended within this same entry (the event
     * stays listed: another slot of this entry may share the wait). */
    for (size_t i = 0; i < s->n_early; i++) {
        if (s->early[i].wait_id == r->wait_id) {
            fence_result er = s->early[i].result;
            deliver_event(slot, &er); /* frees an orphaned slot */
            return;
        }
    }
    if (slot->conn == NULL) {
        /* The client went away before its wait was even registered. */
        if (!wait_has(s, r->wait_id))
            fence__cancel_wait(s, r->wait_id);
        fence__slot_free(slot);
        return;
    }
    wait_insert(s, slot, r->wait_id);
}

/* Unlink b from the in-flight list (it is normally the oldest). */
static void inflight_remove(fence_server *s, fence_batch *b)
{
    fence_batch **pp = &s->inflight;
    fence_batch *prev = NULL;
    while (*pp != b) {
        assert(*pp != NULL);
        prev = *pp;
        pp = &(*pp)->next;
    }
    *pp = b->next;
    if (s->inflight_tail == b)
        s->inflight_tail = prev;
    b->next = NULL;
    s->n_inflight--;
}

/* raft_apply callback: the batch's entry is committed and applied (status
 * 0; the results are in s->results, written by fsm_apply just before), or
 * its outcome is unknown (leadership lost, shutdown).  Every slot gets its
 * reply here or is registered as a wait. */
static void batch_applied(struct raft_apply *req, int status, void *result)
{
    fence_batch *b = req->data;
    fence_server *s = b->srv;
    inflight_remove(s, b);
    if (status != 0) {
        LOG_WARN("entry of %u commands not applied: %s", b->n_cmds,
                 raft_strerror(status));
        for (uint32_t i = 0; i < b->n_items; i++) {
            fence_item *it = &b->items[i];
            if (it->slot == NULL) {
                internal_fail(s, it);
                continue;
            }
            item_fail(s, it, status);
        }
        batch_free(b);
        return;
    }
    assert(result == s->results);
    assert(s->n_results >= 0 && (uint32_t)s->n_results == b->n_cmds +
           (b->n_cmds == 0 ? 1u : 0u));
    (void)result;
    uint32_t j = 0;
    for (uint32_t i = 0; i < b->n_items; i++) {
        fence_item *it = &b->items[i];
        if (it->is_read) {
            item_done(s, b, it, NULL);
        } else {
            item_done(s, b, it, &s->results[j]);
            j++;
        }
    }
    s->rearm = true;
    batch_free(b);
}

/* Encode the pending batch as one entry and propose it.  With zero
 * commands (reads only) the entry carries a TICK so it is not empty. */
static void propose_pending(fence_server *s)
{
    static fence_cmd cmds[FENCE_BATCH_MAX];
    fence_batch *b = s->pending;
    if (b == NULL)
        return;
    s->pending = NULL;
    uint32_t n = 0;
    for (uint32_t i = 0; i < b->n_items; i++) {
        fence_item *it = &b->items[i];
        if (it->is_read)
            continue;
        assert(n < FENCE_BATCH_MAX);
        cmds[n] = it->cmd;
        cmds[n].name = it->cmd.name_len ? b->names + it->name_off : NULL;
        n++;
    }
    assert(n == b->n_cmds);
    if (n == 0) {
        memset(&cmds[0], 0, sizeof(cmds[0]));
        cmds[0].type = FENCE_CMD_TICK;
        n = 1;
    }
    uint64_t ts = fence__server_now(s);
    size_t size = fence_entry_size(cmds, n);
    size_t framed = fence__node_framed_len(size);
    uint8_t *buf = raft_malloc(framed);
    int rv = RAFT_NOMEM;
    if (buf != NULL) {
        size_t len = fence_entry_encode(ts, cmds, n, buf, size);
        assert(len == size);
        len = fence__node_frame(buf, len);
        assert(len == framed);
        b->entry_len = len;
        rv = fence__node_apply(&s->node, &b->req, buf, len, batch_applied);
        if (rv != 0)
            raft_free(buf); /* raft took ownership only on success */
    }
    if (rv != 0) {
        LOG_WARN("propose of %u commands failed: %s", n, raft_strerror(rv));
        for (uint32_t i = 0; i < b->n_items; i++) {
            fence_item *it = &b->items[i];
            if (it->slot == NULL) {
                internal_fail(s, it);
                continue;
            }
            item_fail(s, it, rv == RAFT_NOTLEADER ? RAFT_NOTLEADER : RAFT_NOMEM);
        }
        batch_free(b);
        return;
    }
    s->stat_batches++;
    s->stat_batch_cmds += b->n_cmds;
    s->stat_entry_bytes += framed;
    if (s->inflight_tail != NULL)
        s->inflight_tail->next = b;
    else
        s->inflight = b;
    s->inflight_tail = b;
    s->n_inflight++;
}

/* ---- The raft state machine ----------------------------------------------- */

/* Event from the core: a queued wait ended.  Deliver it, or keep it for the
 * apply callback when the wait was queued by this very entry. */
static void on_fsm_event(fence_server *s, const fence_event *ev)
{
    fence_slot *slot;
    while ((slot = wait_take(s, ev->wait_id)) != NULL)
        deliver_event(slot, &ev->result);
    /* Kept for QUEUED results of this same entry, which are registered
     * only after it is applied (see item_done). */
    if (s->n_early == s->cap_early) {
        size_t cap = s->cap_early ? s->cap_early * 2 : 64;
        fence_event *e = realloc(s->early, cap * sizeof(*e));
        if (e == NULL) {
            LOG_ERROR("out of memory: event for wait %llu dropped",
                      (unsigned long long)ev->wait_id);
            return;
        }
        s->early = e;
        s->cap_early = cap;
    }
    s->early[s->n_early++] = *ev;
}

/* raft fsm->apply: decode and apply one entry on every server.  Results go
 * to a server-owned array that the raft_apply callback (leader only, fired
 * right after this) reads; nothing is allocated per entry, so nothing leaks
 * on followers where no callback runs.  A malformed entry is a bug. */
static int fsm_apply(struct raft_fsm *fsm, const struct raft_buffer *buf,
                     void **result)
{
    fence_server *s = fsm->data;
    s->n_early = 0; /* the previous entry's callback has run */
    size_t len = fence__node_unframe(buf->base, buf->len);
    if (len == SIZE_MAX)
        fence__log_fatal("malformed log entry framing (%zu bytes): refusing to go on",
                         buf->len);
    int n = fence_fsm_apply_entry(s->fsm, buf->base, len, s->results,
                                  FENCE_BATCH_MAX);
    if (n < 0)
        fence__log_fatal("malformed log entry (%zu bytes): refusing to go on",
                         buf->len);
    size_t n_ev = 0;
    const fence_event *evs = fence_fsm_events(s->fsm, &n_ev);
    for (size_t i = 0; i < n_ev; i++)
        on_fsm_event(s, &evs[i]);
    s->n_results = n;
    *result = s->results;
    s->rearm = true;
    return 0;
}

/* raft fsm->snapshot: the whole state in one raft_malloc'd buffer (raft
 * frees it: fsm version 1). */
static int fsm_snapshot(struct raft_fsm *fsm, struct raft_buffer *bufs[],
                        unsigned *n_bufs)
{
    fence_server *s = fsm->data;
    size_t size = fence_fsm_snapshot_size(s->fsm);
    struct raft_buffer *b = raft_malloc(sizeof(*b));
    if (b == NULL)
        return RAFT_NOMEM;
    b->base = raft_malloc(size ? size : 1);
    if (b->base == NULL) {
        raft_free(b);
        return RAFT_NOMEM;
    }
    b->len = fence_fsm_snapshot(s->fsm, b->base, size);
    assert(b->len == size);
    *bufs = b;
    *n_bufs = 1;
    LOG_INFO("snapshot taken: %zu bytes, last token %llu", size,
             (unsigned long long)fence_fsm_last_token(s->fsm));
    return 0;
}

/* After a snapshot restore: a slot registered for a wait that no longer
 * exists will never get its event (the wait ended inside the entries the
 * snapshot replaced; this happens to a deposed leader whose clients still
 * wait on it and that catches up by InstallSnapshot).  Answer such slots
 * TRYAGAIN: the outcome is unknown here, and a retry (same REQID, or LOCK
 * by the same lease) gets it from the leader.  One slot at a time, with a
 * fresh scan of its bucket after each reply, because a reply that fails
 * for lack of memory closes its connection, which unlinks that
 * connection's other slots from the table. */
static void waits_after_restore(fence_server *s)
{
    for (size_t b = 0; b < s->wait_nb; b++) {
        fence_slot *slot = s->wait_tab[b];
        while (slot != NULL) {
            if (fence_fsm_wait_exists(s->fsm, slot->wait_id)) {
                slot = slot->wnext;
                continue;
            }
            fence_slot *taken = wait_take(s, slot->wait_id);
            assert(taken != NULL);
            taken->state = SLOT_NEW;
            fence__slot_error(taken, "TRYAGAIN",
                              "outcome unknown (this server caught up from a "
                              "snapshot); retry with the same REQID");
            slot = s->wait_tab[b];
        }
    }
}

/* raft fsm->restore: replace the state; on success the buffer is ours. */
static int fsm_restore(struct raft_fsm *fsm, struct raft_buffer *buf)
{
    fence_server *s = fsm->data;
    int rv = fence_fsm_restore(s->fsm, buf->base, buf->len);
    if (rv != 0) {
        LOG_ERROR("snapshot restore failed (%d): corrupt or unknown version", rv);
        return rv == FENCE_ST_LIMIT ? RAFT_NOMEM : RAFT_CORRUPT;
    }
    raft_free(buf->base);
    LOG_INFO("snapshot restored: last token %llu",
             (unsigned long long)fence_fsm_last_token(s->fsm));
    waits_after_restore(s);
    return 0;
}

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

/* ---- Leadership ------------------------------------------------------------- */

/* The catch-up barrier is applied: every earlier entry is in the state
 * machine.  Fix the time offset so fsm time never goes back, then propose
 * LEADER_START with our limits; writes wait for it. */
static void barrier_done(struct raft_barrier *req, int status)
{
    fence_server *s = req->data;
    s->barrier_inflight = false;
    if (status != 0 || s->lstate != LS_CATCHUP || !fence__node_is_leader(&s->node)) {
        if (s->lstate == LS_CATCHUP)
            s->lstate = LS_NONE;
        return;
    }
    uint64_t mono = mono_ms();
    uint64_t fsm_now = fence_fsm_now(s->fsm);
    if (fsm_now > mono && fsm_now - mono > s->time_offset)
        s->time_offset = fsm_now - mono;
    fence_cmd cmd;
    memset(&cmd, 0, sizeof(cmd));
    cmd.type = FENCE_CMD_LEADER_START;
    cmd.limits.leases_max = (uint32_t)s->cfg->max_leases;
    cmd.limits.locks_max = (uint32_t)s->cfg->max_locks;
    cmd.limits.waiters_max = (uint32_t)s->cfg->max_waiters;
    cmd.limits.dedup_max = (uint32_t)s->cfg->max_dedup;
    s->lstate = LS_STARTING;
    /* LEADER_START goes alone, ahead of anything else. */
    if (s->pending != NULL)
        propose_pending(s);
    if (!batch_add_internal(s, &cmd)) {
        s->lstate = LS_NONE;
        return;
    }
    propose_pending(s);
}

/* Follow raft's state: start the catch-up on becoming leader; on losing
 * leadership stop the timer (followers run none) and refuse writes. */
static void watch_leadership(fence_server *s)
{
    bool leader = fence__node_is_leader(&s->node);
    if (leader && s->lstate == LS_NONE && !s->barrier_inflight && !s->stopping) {
        s->barrier.data = s;
        int rv = fence__node_barrier(&s->node, &s->barrier, barrier_done);
        if (rv == 0) {
            s->barrier_inflight = true;
            s->lstate = LS_CATCHUP;
            LOG_INFO("became leader (term %llu); catching up",
                     (unsigned long long)s->node.raft.current_term);
        }
    } else if (!leader && s->lstate != LS_NONE) {
        LOG_INFO("no longer leader (role %s)", fence__node_role(&s->node));
        s->lstate = LS_NONE;
        uv_timer_stop(&s->tick_timer);
        /* Requests not yet proposed: tell their clients where to go. */
        fence_batch *b = s->pending;
        s->pending = NULL;
        if (b != NULL) {
            for (uint32_t i = 0; i < b->n_items; i++)
                if (b->items[i].slot != NULL)
                    item_fail(s, &b->items[i], RAFT_NOTLEADER);
            batch_free(b);
        }
        s->tick_pending = false;
    }
}

/* ---- Timer and loop check --------------------------------------------------- */

/* The earliest fsm deadline passed: propose a TICK so the core processes
 * it (lease expiry, wait timeouts, lock-delay ends). */
static void tick_cb(uv_timer_t *t)
{
    fence_server *s = t->data;
    if (s->lstate != LS_READY || s->tick_pending || s->stopping)
        return;
    fence_cmd cmd;
    memset(&cmd, 0, sizeof(cmd));
    cmd.type = FENCE_CMD_TICK;
    s->tick_deadline = fence_fsm_next_deadline(s->fsm);
    if (batch_add_internal(s, &cmd))
        s->tick_pending = true;
    else
        s->rearm = true; /* out of memory: try again after a back-off */
}

/* Arm the one leader timer for the core's next deadline. */
static void rearm_timer(fence_server *s)
{
    if (s->lstate != LS_READY || s->stopping) {
        uv_timer_stop(&s->tick_timer);
        return;
    }
    uint64_t deadline = fence_fsm_next_deadline(s->fsm);
    if (deadline == UINT64_MAX) {
        uv_timer_stop(&s->tick_timer);
        return;
    }
    uint64_t now = fence__server_now(s);
    /* +1: loop time is whole ms, so never fire a hair before the deadline. */
    uint64_t delay = deadline > now ? deadline - now + 1 : 0;
    if (delay == 0 && !s->tick_pending && deadline == s->tick_deadline) {
        /* A TICK for this deadline was tried and the deadline is still
         * pending: its proposal failed (raft refused it, say during a
         * leadership transfer), or, were it applied, a core bug.  Retry
         * after a back-off instead of spinning on TICKs. */
        LOG_WARN("deadline %llu still pending after a TICK; retrying in 100 ms",
                 (unsigned long long)deadline);
        delay = 100;
    }
    uv_timer_start(&s->tick_timer, tick_cb, delay, 0);
}

/* End of every loop turn: follow leadership, propose the pending batch when
 * no entry is in flight (group commit), flush replies, re-arm the timer. */
static void check_cb(uv_check_t *h)
{
    fence_server *s = h->data;
    watch_leadership(s);
    if (s->pending != NULL && s->n_inflight == 0 && s->lstate != LS_NONE)
        propose_pending(s);
    fence__conns_flush(s);
    /* Flushing resumes paused connections, whose buffered requests may
     * have filled the batch again; nothing else would wake the loop for
     * them, so propose now. */
    if (s->pending != NULL && s->n_inflight == 0 && s->lstate != LS_NONE)
        propose_pending(s);
    fence__conns_flush(s);
    if (s->rearm) {
        s->rearm = false;
        rearm_timer(s);
    }
}

/* ---- Start and stop --------------------------------------------------------- */

/* SIGTERM / SIGINT: stop cleanly. */
static void signal_cb(uv_signal_t *h, int signum)
{
    fence_server *s = h->data;
    LOG_INFO("signal %d: shutting down", signum);
    fence__server_stop(s);
}

/* raft is closed: close our remaining handles so the loop ends. */
static void node_closed(fence_node *n)
{
    fence_server *s = (fence_server *)((char *)n - offsetof(fence_server, node));
    uv_close((uv_handle_t *)&s->check, NULL);
    uv_close((uv_handle_t *)&s->tick_timer, NULL);
    uv_close((uv_handle_t *)&s->sig_term, NULL);
    uv_close((uv_handle_t *)&s->sig_int, NULL);
    LOG_INFO("stopped");
}

/* Begin a clean shutdown: no new clients, close connections, close raft. */
void fence__server_stop(fence_server *s)
{
    if (s->stopping)
        return;
    s->stopping = true;
    fence__listen_close(s);
    fence__conns_close_all(s);
    uv_timer_stop(&s->tick_timer);
    fence_batch *b = s->pending;
    s->pending = NULL;
    if (b != NULL) {
        for (uint32_t i = 0; i < b->n_items; i++)
            if (b->items[i].slot != NULL)
                item_fail(s, &b->items[i], RAFT_SHUTDOWN);
        batch_free(b);
    }
    fence__node_close(&s->node, node_closed);
}

/* Set up the state machine, raft, handles and listeners. */
int fence__server_init(fence_server *s, uv_loop_t *loop, fence_config *cfg)
{
    memset(s, 0, sizeof(*s));
    s->loop = loop;
    s->cfg = cfg;
    s->start_ms = mono_ms();
    fence_resp_limits_default(&s->resp_lim);
    s->resp_lim.bulk_max = cfg->max_bulk;
    s->msg = malloc(sizeof(*s->msg));
    s->wait_nb = WAIT_TAB_INITIAL;
    s->wait_tab = calloc(s->wait_nb, sizeof(*s->wait_tab));
    if (s->msg == NULL || s->wait_tab == NULL) {
        LOG_ERROR("out of memory at start");
        return -1;
    }
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
        LOG_ERROR("cannot create the state machine");
        return -1;
    }
    s->raft_fsm.version = 1;
    s->raft_fsm.data = s;
    s->raft_fsm.apply = fsm_apply;
    s->raft_fsm.snapshot = fsm_snapshot;
    s->raft_fsm.restore = fsm_restore;

    uv_check_init(loop, &s->check);
    s->check.data = s;
    uv_check_start(&s->check, check_cb);
    uv_timer_init(loop, &s->tick_timer);
    s->tick_timer.data = s;
    uv_signal_init(loop, &s->sig_term);
    s->sig_term.data = s;
    uv_signal_start(&s->sig_term, signal_cb, SIGTERM);
    uv_signal_init(loop, &s->sig_int);
    s->sig_int.data = s;
    uv_signal_start(&s->sig_int, signal_cb, SIGINT);

    if (fence__node_start(&s->node, loop, cfg, &s->raft_fsm) != 0)
        return -1;
    if (fence__listen(s) != 0)
        return -1;
    return 0;
}

/* Release what the loop no longer uses (after uv_run returned). */
void fence__server_free(fence_server *s)
{
    if (s->node.started)
        raft_uv_close(&s->node.io);
    if (s->node.tcp)
        raft_uv_tcp_close(&s->node.transport);
    fence_fsm_destroy(s->fsm);
    free(s->msg);
    free(s->wait_tab);
    free(s->early);
}
