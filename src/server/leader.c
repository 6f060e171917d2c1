/* The leader's logic of fenced (see leader.h for the contract, the
 * phases, the rule for calling raft and the libraft 0.15 behaviour it
 * relies on).  No libuv, no raft, no connection internals: what the module
 * needs from outside comes through fence_leader_ops. */
#include "server/leader.h"
#include "core/entry.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "core/entry.h"

/* Initial wait-table size (grows by doubling). */
#define WAIT_TAB_INITIAL 1024
/* Back-off before a TICK is retried for a deadline that is still due. */
#define TICK_RETRY_MS 100
/* Longest a batch of waits-to-be is held back for company (leader.h
 * "Holding"): long enough for a client round trip on a loaded machine,
 * short next to any wait.  The shell's timer has whole-ms resolution and
 * may fire up to 1 ms early, so the hold lasts 1-2 ms when nothing comes. */
#define HOLD_MS 2

/* Leadership phases. */
enum lphase {
    PH_NONE = 0,     /* not the leader */
    PH_CATCHUP,      /* leader; barrier in flight (applying older entries) */
    PH_BARRIER_DONE, /* leader; barrier applied, LEADER_START at next step */
    PH_STARTING,     /* leader; LEADER_START in flight */
    PH_READY,        /* leader; serving writes */
};

/* Where a request is. */
enum lreq_state {
    RQ_BATCH = 1, /* its command or read is in a batch */
    RQ_WAIT,      /* registered in the wait table under wait_id */
};

/* One request the module holds, from submit until it is answered.  An
 * orphan (its connection closed) has conn == NULL and is freed silently by
 * the batch holding it. */
struct fence_lreq {
    void *handle;      /* the shell's request; NULL once orphaned */
    fence_lconn *conn; /* owner; NULL once orphaned */
    fence_lreq *cprev; /* connection's list of held requests */
    fence_lreq *cnext; /* connection's list of held requests */
    fence_lreq *wnext; /* next in the same wait-table bucket */
    uint64_t wait_id;  /* RQ_WAIT: the core's wait id */
    uint8_t state;     /* enum lreq_state */
};

/* One request inside a batch. */
typedef struct litem {
    fence_cmd cmd;     /* the command (name filled in at encode time) */
    uint32_t name_off; /* offset of the name in the batch's name bytes */
    bool is_read;      /* evaluated when the entry applies; no fence_cmd */
    fence_lreq *req;   /* the request; NULL for internal commands */
} litem;

/* One group-commit batch: ONE raft entry once proposed. */
typedef struct lbatch {
    struct lbatch *next; /* next in its list (closed or in flight) */
    litem *items;        /* requests in arrival order */
    uint32_t n_items;    /* items used */
    uint32_t cap_items;  /* items allocated */
    uint32_t n_cmds;     /* items that are commands (not reads) */
    uint8_t *names;      /* lock names of the items, back to back */
    size_t names_len;    /* bytes used in names */
    size_t names_cap;    /* bytes allocated in names */
    uint64_t seq;        /* from 1, one per batch (fence_lconn.read_seq) */
    uint32_t n_held;     /* leading items known to queue (see batch_hold) */
    uint64_t held_seq;   /* fence_leader.apply_seq when they were checked */
} lbatch;

/* The module. */
struct fence_leader {
    fence_leader_ops ops;    /* the shell */
    fence_fsm *fsm;          /* the state machine (borrowed) */
    fence_limits limits;     /* carried by every LEADER_START */

    int phase;               /* enum lphase */
    bool barrier_inflight;   /* barrier (catch-up) outstanding */
    bool stopping;           /* fence__leader_stop was called */
    uint64_t time_offset;    /* fsm time = monotonic ms + this (leader) */
    bool tick_pending;       /* a TICK is in a batch */
    uint64_t tick_deadline;  /* the deadline the last TICK was for */
    bool rearm;              /* the shell must re-arm its timer */
    uint64_t hold_until;     /* the pending batch is held until this
                                monotonic ms (leader.h "Holding"); 0: not */
    bool hold_over;          /* the timer fired: the held batch goes now */
    uint64_t apply_seq;      /* entries applied or restored (the fsm
                                changed: held items are checked again) */

    lbatch *pending;         /* batch being filled, or NULL */
    lbatch *closed;          /* full or cut batches, to propose at step */
    lbatch *closed_tail;     /* newest of them */
    lbatch *inflight;        /* proposed batches, oldest first */
    lbatch *inflight_tail;   /* newest proposed batch */
    uint32_t n_inflight;     /* batches in flight */
    uint64_t batch_seq;      /* seq of the newest batch */

    fence_cmd *cmds;         /* encode scratch: FENCE_BATCH_MAX commands */
    uint8_t *ebuf;           /* encode scratch: the entry bytes */
    size_t ebuf_cap;         /* its capacity */
    fence_result results[FENCE_BATCH_MAX]; /* results of the last entry */
    int n_results;           /* commands in the last applied entry */
    const fence_event *events; /* events of the last entry (the fsm's) */
    size_t n_events;         /* how many */

    fence_lreq **wait_tab;   /* wait_id -> requests (chained) */
    size_t wait_nb;          /* buckets (power of two) */
    uint64_t n_waits;        /* registered requests */

    unsigned in_raft_cb;     /* depth inside raft callbacks (the rule) */
    bool in_step;            /* inside fence__leader_step */
    fence_leader_stats stats; /* for INFO */
};

static void batch_close(fence_leader *l);

/* Write one log line through the shell. */
static void llog(fence_leader *l, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void llog(fence_leader *l, int level, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    l->ops.log(l->ops.ctx, level, msg);
}

/* Current fsm time: monotonic ms plus the offset chosen when this server
 * became leader, so fsm time never goes back across leaders; off the
 * leader, the time of the last applied entry. */
uint64_t fence__leader_now(const fence_leader *l)
{
    uint64_t applied = fence_fsm_now(l->fsm);
    if (l->phase == PH_NONE)
        return applied;
    uint64_t t = l->ops.now_ms(l->ops.ctx) + l->time_offset;
    return t > applied ? t : applied;
}

/* Whether this server is a ready leader (LEADER_START applied). */
bool fence__leader_ready(const fence_leader *l)
{
    return l->phase == PH_READY;
}

/* Copy the counters out. */
void fence__leader_stats_get(const fence_leader *l, fence_leader_stats *out)
{
    *out = l->stats;
    out->waits = l->n_waits;
}

/* ---- Requests and connections ------------------------------------------ */

/* Set up a connection's module state. */
void fence__leader_conn_init(fence_lconn *c)
{
    memset(c, 0, sizeof(*c));
}

/* Link r into its connection's list. */
static void conn_link(fence_lconn *c, fence_lreq *r)
{
    r->conn = c;
    r->cprev = NULL;
    r->cnext = c->reqs;
    if (c->reqs != NULL)
        c->reqs->cprev = r;
    c->reqs = r;
}

/* Unlink r from its connection (if it still has one). */
static void conn_unlink(fence_lreq *r)
{
    fence_lconn *c = r->conn;
    if (c == NULL)
        return;
    if (r->cprev != NULL)
        r->cprev->cnext = r->cnext;
    else
        c->reqs = r->cnext;
    if (r->cnext != NULL)
        r->cnext->cprev = r->cprev;
    r->cprev = r->cnext = NULL;
    r->conn = NULL;
}

/* Take the request out of the module and return the shell's handle, or
 * NULL for an orphan (nobody to answer).  Call before the sink: a reply
 * can close the connection, and that must find nothing of r. */
static void *req_release(fence_lreq *r)
{
    void *h = r->conn != NULL ? r->handle : NULL;
    conn_unlink(r);
    free(r);
    return h;
}

/* Answer an error to a released handle (NULL: an orphan, nothing). */
static void answer_error(fence_leader *l, void *h, int err)
{
    if (h != NULL)
        l->ops.reply_error(l->ops.ctx, h, err);
}

/* Answer a result to a released handle (NULL: nothing). */
static void answer_result(fence_leader *l, void *h, const fence_result *r,
                          bool from_wait)
{
    FENCE_ASSERT(r->status != FENCE_ST_QUEUED);
    if (h != NULL)
        l->ops.reply_result(l->ops.ctx, h, r, from_wait);
}

/* ---- The wait table: wait_id -> requests --------------------------------- */

/* Bucket of a wait id (ids are sequential; a multiplicative hash spreads
 * them anyway). */
static size_t wait_bucket(const fence_leader *l, uint64_t id)
{
    return (size_t)((id * 0x9E3779B97F4A7C15ULL) >> 20) & (l->wait_nb - 1);
}

/* Double the bucket array when the table gets crowded (best effort: a
 * failed grow leaves longer chains, nothing else). */
static void wait_grow(fence_leader *l)
{
    size_t nb = l->wait_nb * 2;
    fence_lreq **tab = calloc(nb, sizeof(*tab));
    if (tab == NULL)
        return;
    size_t old_nb = l->wait_nb;
    fence_lreq **old = l->wait_tab;
    l->wait_tab = tab;
    l->wait_nb = nb;
    for (size_t i = 0; i < old_nb; i++) {
        fence_lreq *p = old[i];
        while (p != NULL) {
            fence_lreq *next = p->wnext;
            size_t b = wait_bucket(l, p->wait_id);
            p->wnext = tab[b];
            tab[b] = p;
            p = next;
        }
    }
    free(old);
}

/* Register r as waiting for wait_id's outcome. */
static void wait_insert(fence_leader *l, fence_lreq *r, uint64_t wait_id)
{
    if (l->n_waits >= l->wait_nb)
        wait_grow(l);
    r->wait_id = wait_id;
    r->state = RQ_WAIT;
    size_t b = wait_bucket(l, wait_id);
    r->wnext = l->wait_tab[b];
    l->wait_tab[b] = r;
    l->n_waits++;
}

/* Find and unlink one request waiting for wait_id, or NULL.  Several can
 * wait for the same wait_id: the core answers a LOCK by a lease that
 * already waits for that lock with the existing wait (a retry, or a
 * second connection of the same client). */
static fence_lreq *wait_take(fence_leader *l, uint64_t wait_id)
{
    fence_lreq **pp = &l->wait_tab[wait_bucket(l, wait_id)];
    for (; *pp != NULL; pp = &(*pp)->wnext) {
        fence_lreq *r = *pp;
        if (r->wait_id == wait_id) {
            *pp = r->wnext;
            r->wnext = NULL;
            l->n_waits--;
            return r;
        }
    }
    return NULL;
}

/* Whether any request waits for wait_id. */
static bool wait_has(const fence_leader *l, uint64_t wait_id)
{
    for (fence_lreq *p = l->wait_tab[wait_bucket(l, wait_id)]; p != NULL;
         p = p->wnext)
        if (p->wait_id == wait_id)
            return true;
    return false;
}

/* Unlink this registered request; true when no other request waits for
 * the same wait (then the wait itself can be cancelled). */
static bool wait_remove(fence_leader *l, fence_lreq *r)
{
    FENCE_ASSERT(r->state == RQ_WAIT);
    fence_lreq **pp = &l->wait_tab[wait_bucket(l, r->wait_id)];
    while (*pp != r) {
        FENCE_ASSERT(*pp != NULL);
        pp = &(*pp)->wnext;
    }
    *pp = r->wnext;
    r->wnext = NULL;
    l->n_waits--;
    return !wait_has(l, r->wait_id);
}

/* ---- Batches ---------------------------------------------------------------- */

/* Free a batch's memory (its requests are handled by the caller). */
static void batch_free(lbatch *b)
{
    free(b->items);
    free(b->names);
    free(b);
}

/* Append a command or read to the pending batch, cutting it first when
 * it is full or when a write follows a read of the same connection c (see
 * leader.h "Group commit").  The cut batch goes out at the next step, so
 * nothing here proposes or replies: a failed proposal's reply can no
 * longer close a connection (for lack of memory) under the request being
 * added, as it could when a cut batch was proposed on the spot.  Returns
 * the item, or NULL if memory ran out. */
static litem *batch_add(fence_leader *l, const fence_cmd *cmd, bool is_read,
                        fence_lreq *r, fence_lconn *c)
{
    lbatch *b = l->pending;
    if (b != NULL && b->n_items >= FENCE_BATCH_MAX) {
        batch_close(l);
        b = NULL;
    }
    if (b != NULL && !is_read && c != NULL && c->read_seq == b->seq) {
        batch_close(l);
        b = NULL;
    }
    if (b == NULL) {
        b = calloc(1, sizeof(*b));
        if (b == NULL)
            return NULL;
        b->seq = ++l->batch_seq;
        l->pending = b;
    }
    if (b->n_items == b->cap_items) {
        uint32_t cap = b->cap_items ? b->cap_items * 2 : 16;
        if (cap > FENCE_BATCH_MAX)
            cap = FENCE_BATCH_MAX;
        litem *items = realloc(b->items, cap * sizeof(*items));
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
    litem *it = &b->items[b->n_items++];
    it->cmd = *cmd;
    it->cmd.name = NULL;
    it->name_off = (uint32_t)b->names_len;
    if (cmd->name_len > 0)
        memcpy(b->names + b->names_len, cmd->name, cmd->name_len);
    b->names_len += cmd->name_len;
    it->is_read = is_read;
    it->req = r;
    if (!is_read)
        b->n_cmds++;
    if (r != NULL) {
        r->state = RQ_BATCH;
        if (c != NULL) {
            c->unapplied++;
            if (is_read)
                c->read_seq = b->seq;
        }
    }
    return it;
}

/* Move the pending batch to the closed list: it is proposed at the next
 * step, even behind entries in flight. */
static void batch_close(fence_leader *l)
{
    lbatch *b = l->pending;
    if (b == NULL)
        return;
    l->pending = NULL;
    l->hold_until = 0;
    l->hold_over = false;
    b->next = NULL;
    if (l->closed_tail != NULL)
        l->closed_tail->next = b;
    else
        l->closed = b;
    l->closed_tail = b;
}

/* Queue an internal command (no reply) into the pending batch. */
static bool batch_add_internal(fence_leader *l, const fence_cmd *cmd)
{
    return batch_add(l, cmd, false, NULL, NULL) != NULL;
}

/* Propose CANCEL for a wait whose client went away.  Only a ready leader
 * can; otherwise the wait ends by its timeout or its lease. */
static void cancel_wait(fence_leader *l, uint64_t wait_id)
{
    if (l->phase != PH_READY || l->stopping)
        return;
    fence_cmd cmd;
    memset(&cmd, 0, sizeof(cmd));
    cmd.type = FENCE_CMD_CANCEL;
    cmd.wait_id = wait_id;
    if (!batch_add_internal(l, &cmd))
        llog(l, FENCE_LLOG_WARN, "out of memory: wait %llu not cancelled",
             (unsigned long long)wait_id);
}

/* An internal command (no request) was not applied: its proposal failed or
 * its outcome is unknown.  A lost TICK must not stop the timer: while this
 * server stays a ready leader (say a leadership transfer made raft refuse
 * the entry, then timed out) nothing else would process expired leases and
 * wait timeouts until some client writes.  So the timer is re-armed;
 * fence__leader_timer_take backs off when the deadline is already due. */
static void internal_fail(fence_leader *l, const litem *it)
{
    FENCE_ASSERT(it->req == NULL);
    if (it->cmd.type == FENCE_CMD_TICK) {
        l->tick_pending = false;
        l->rearm = true;
    }
    if (it->cmd.type == FENCE_CMD_LEADER_START && l->phase == PH_STARTING)
        l->phase = PH_NONE;
}

/* Give an item its answer for a failed proposal (outcome unknown, or never
 * proposed: status NOTLEADER / SHUTDOWN). */
static void item_fail(fence_leader *l, litem *it, int status)
{
    fence_lreq *r = it->req;
    if (r == NULL) {
        internal_fail(l, it);
        return;
    }
    if (r->conn != NULL) {
        FENCE_ASSERT(r->conn->unapplied > 0);
        r->conn->unapplied--;
    }
    void *h = req_release(r);
    if (status == FENCE_LST_NOTLEADER || status == FENCE_LST_SHUTDOWN)
        answer_error(l, h, FENCE_LERR_UNAVAILABLE);
    else if (it->is_read)
        answer_error(l, h, FENCE_LERR_READ_RETRY);
    else
        answer_error(l, h, FENCE_LERR_UNKNOWN);
}

/* Fail every item of a batch that is out of every list, then free it. */
static void batch_fail(fence_leader *l, lbatch *b, int status)
{
    for (uint32_t i = 0; i < b->n_items; i++)
        item_fail(l, &b->items[i], status);
    batch_free(b);
}

/* Fail the batches not yet proposed (leadership lost, shutdown).  Each is
 * unlinked before its replies, which may add CANCELs to a new pending. */
static void fail_unproposed(fence_leader *l, int status)
{
    while (l->closed != NULL) {
        lbatch *b = l->closed;
        l->closed = b->next;
        if (l->closed == NULL)
            l->closed_tail = NULL;
        batch_fail(l, b, status);
    }
    lbatch *b = l->pending;
    l->pending = NULL;
    l->hold_until = 0;
    l->hold_over = false;
    if (b != NULL)
        batch_fail(l, b, status);
}

/* Handle one item of an applied entry.  res is its command result (NULL
 * for reads). */
static void item_done(fence_leader *l, lbatch *b, litem *it,
                      const fence_result *res)
{
    fence_lreq *r = it->req;
    if (r == NULL) {
        if (it->cmd.type == FENCE_CMD_TICK)
            l->tick_pending = false;
        if (it->cmd.type == FENCE_CMD_LEADER_START && l->phase == PH_STARTING) {
            if (!l->ops.is_leader(l->ops.ctx)) {
                /* Applied, but raft no longer leads: start over at the
                 * next step (a new barrier if it leads again). */
                l->phase = PH_NONE;
                return;
            }
            l->phase = PH_READY;
            l->rearm = true;
            llog(l, FENCE_LLOG_INFO, "leader ready: term %llu, last token %llu",
                 (unsigned long long)l->ops.term(l->ops.ctx),
                 (unsigned long long)fence_fsm_last_token(l->fsm));
        }
        return;
    }
    if (r->conn != NULL) {
        FENCE_ASSERT(r->conn->unapplied > 0);
        r->conn->unapplied--;
    }
    if (it->is_read) {
        void *h = req_release(r);
        if (h != NULL) {
            it->cmd.name = b->names + it->name_off;
            l->ops.reply_read(l->ops.ctx, h, &it->cmd);
        }
        return;
    }
    FENCE_ASSERT(res != NULL);
    if (res->status != FENCE_ST_QUEUED) {
        answer_result(l, req_release(r), res, false);
        return;
    }
    /* The wait may already have ended within this same entry (the event
     * stays listed: another request of this entry may share the wait). */
    for (size_t i = 0; i < l->n_events; i++) {
        if (l->events[i].wait_id == res->wait_id) {
            fence_result er = l->events[i].result;
            answer_result(l, req_release(r), &er, true);
            return;
        }
    }
    if (r->conn == NULL) {
        /* The client went away before its wait was even registered. */
        if (!wait_has(l, res->wait_id))
            cancel_wait(l, res->wait_id);
        req_release(r);
        return;
    }
    if (!fence_fsm_wait_exists(l->fsm, res->wait_id)) {
        /* QUEUED for a wait that is gone.  The core resolves every record
         * attached to a wait when it ends, but a snapshot written by an
         * older core (which kept a joiner's record QUEUED) may still carry
         * such a record.  No event will ever come: answer rather than
         * hang. */
        llog(l, FENCE_LLOG_WARN, "QUEUED for wait %llu, which no longer "
             "exists; answering TRYAGAIN", (unsigned long long)res->wait_id);
        answer_error(l, req_release(r), FENCE_LERR_UNKNOWN);
        return;
    }
    wait_insert(l, r, res->wait_id);
}

/* Unlink b from the in-flight list (it is normally the oldest). */
static void inflight_remove(fence_leader *l, lbatch *b)
{
    lbatch **pp = &l->inflight;
    lbatch *prev = NULL;
    while (*pp != b) {
        FENCE_ASSERT(*pp != NULL);
        prev = *pp;
        pp = &(*pp)->next;
    }
    *pp = b->next;
    if (l->inflight_tail == b)
        l->inflight_tail = prev;
    b->next = NULL;
    l->n_inflight--;
}

/* Encode b as one framed entry and propose it (from step only).  With zero
 * commands (reads only) the entry carries a TICK so it is not empty. */
static void propose(fence_leader *l, lbatch *b)
{
    FENCE_ASSERT(l->in_step);
    FENCE_ASSERT(l->in_raft_cb == 0);
    uint32_t n = 0;
    for (uint32_t i = 0; i < b->n_items; i++) {
        litem *it = &b->items[i];
        if (it->is_read)
            continue;
        FENCE_ASSERT(n < FENCE_BATCH_MAX);
        l->cmds[n] = it->cmd;
        l->cmds[n].name = it->cmd.name_len ? b->names + it->name_off : NULL;
        n++;
    }
    FENCE_ASSERT(n == b->n_cmds);
    if (n == 0) {
        memset(&l->cmds[0], 0, sizeof(l->cmds[0]));
        l->cmds[0].type = FENCE_CMD_TICK;
        n = 1;
    }
    uint64_t ts = fence__leader_now(l);
    size_t size = fence_entry_size(l->cmds, n);
    size_t framed = fence__entry_framed_len(size);
    int rv = FENCE_LST_UNKNOWN;
    if (framed > l->ebuf_cap) {
        uint8_t *nb = realloc(l->ebuf, framed);
        if (nb != NULL) {
            l->ebuf = nb;
            l->ebuf_cap = framed;
        }
    }
    if (framed <= l->ebuf_cap) {
        size_t len = fence_entry_encode(ts, l->cmds, n, l->ebuf, size);
        FENCE_ASSERT(len == size);
        len = fence__entry_frame(l->ebuf, len);
        FENCE_ASSERT(len == framed);
        rv = l->ops.propose(l->ops.ctx, b, l->ebuf, len);
    }
    if (rv != FENCE_LST_OK) {
        llog(l, FENCE_LLOG_WARN, "propose of %u commands failed", n);
        batch_fail(l, b, rv);
        return;
    }
    l->stats.batches++;
    l->stats.batch_cmds += b->n_cmds;
    l->stats.entry_bytes += framed;
    b->next = NULL;
    if (l->inflight_tail != NULL)
        l->inflight_tail->next = b;
    else
        l->inflight = b;
    l->inflight_tail = b;
    l->n_inflight++;
}

/* Propose the closed batches, oldest first. */
static void propose_closed(fence_leader *l)
{
    while (l->closed != NULL) {
        lbatch *b = l->closed;
        l->closed = b->next;
        if (l->closed == NULL)
            l->closed_tail = NULL;
        propose(l, b);
    }
}

/* Whether item it of a batch (names: the batch's name bytes) would be
 * answered QUEUED if it were applied now: a LOCK or ACQUIRE that may wait,
 * on a lock another lease holds (live at fsm time now).  Such an item's
 * client hears nothing when its entry applies, so its entry is in no hurry
 * (leader.h "Holding").  Anything else, internal commands and reads
 * included, is in a hurry. */
static bool item_will_queue(const fence_leader *l, const litem *it,
                            const uint8_t *names, uint64_t now)
{
    const fence_cmd *c = &it->cmd;
    if (it->is_read || it->req == NULL || c->wait_ms == 0 || c->name_len == 0)
        return false;
    if (c->type != FENCE_CMD_LOCK && c->type != FENCE_CMD_ACQUIRE)
        return false;
    fence_fsm_lock_state st;
    if (!fence_fsm_lock_info(l->fsm, names + it->name_off, c->name_len, &st))
        return false; /* free, or in its lock-delay */
    if (c->type == FENCE_CMD_LOCK && c->lease == st.lease)
        return false; /* reentrant: answered at once */
    return st.deadline_ms > now;
}

/* With no entry in flight: whether the pending batch is held back (leader.h
 * "Holding") rather than proposed now.  It is held while every item in it
 * would queue, for at most HOLD_MS: the first item in a hurry (typically
 * the UNLOCK of the holder, whose reply was sent with the grant that made
 * these clients ask again) ends the hold and the whole batch goes out as
 * one entry, in arrival order.  Items already found to queue are not
 * looked up again until an entry applies. */
static bool batch_hold(fence_leader *l)
{
    lbatch *b = l->pending;
    FENCE_ASSERT(b != NULL);
    FENCE_ASSERT(l->n_inflight == 0);
    if (l->hold_over || l->stopping)
        return false;
    if (b->held_seq != l->apply_seq) {
        b->held_seq = l->apply_seq;
        b->n_held = 0;
    }
    uint64_t now = fence__leader_now(l);
    while (b->n_held < b->n_items &&
           item_will_queue(l, &b->items[b->n_held], b->names, now))
        b->n_held++;
    if (b->n_held < b->n_items)
        return false;
    if (l->hold_until == 0) {
        l->hold_until = l->ops.now_ms(l->ops.ctx) + HOLD_MS;
        l->rearm = true;
        l->stats.holds++;
    }
    return true;
}

/* ---- Requests from the shell ------------------------------------------------ */

/* Take a request; see leader.h. */
void fence__leader_submit(fence_leader *l, fence_lconn *c, void *req,
                          const fence_cmd *cmd, bool is_read)
{
    FENCE_ASSERT(req != NULL);
    if (l->phase != PH_READY || l->stopping) {
        l->ops.reply_error(l->ops.ctx, req, FENCE_LERR_UNAVAILABLE);
        return;
    }
    /* Linearizable reads: in a cluster they ride the next entry; in a
     * cluster of one they only wait for this connection's own earlier
     * writes, so a pipeline reads its own writes. */
    if (is_read && l->ops.voters(l->ops.ctx) <= 1 && c->unapplied == 0) {
        l->ops.reply_read(l->ops.ctx, req, cmd);
        return;
    }
    fence_lreq *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        l->ops.reply_error(l->ops.ctx, req, FENCE_LERR_NOMEM);
        return;
    }
    r->handle = req;
    if (batch_add(l, cmd, is_read, r, c) == NULL) {
        free(r);
        l->ops.reply_error(l->ops.ctx, req, FENCE_LERR_NOMEM);
        return;
    }
    conn_link(c, r);
}

/* Forget a closed connection's requests; see leader.h. */
void fence__leader_conn_close(fence_leader *l, fence_lconn *c)
{
    fence_lreq *r = c->reqs;
    while (r != NULL) {
        fence_lreq *next = r->cnext;
        r->cprev = r->cnext = NULL;
        r->conn = NULL;
        r->handle = NULL;
        if (r->state == RQ_WAIT) {
            if (wait_remove(l, r))
                cancel_wait(l, r->wait_id);
            free(r);
        }
        /* RQ_BATCH: an orphan now; its batch frees it. */
        r = next;
    }
    c->reqs = NULL;
    c->unapplied = 0;
}

/* ---- The loop side ------------------------------------------------------------ */

/* Follow raft's state: start the catch-up on becoming leader; on losing
 * leadership refuse what is not yet proposed and stop the timer. */
static void watch_leadership(fence_leader *l)
{
    bool leader = l->ops.is_leader(l->ops.ctx);
    if (leader && l->phase == PH_NONE && !l->barrier_inflight && !l->stopping) {
        if (l->ops.barrier(l->ops.ctx) == FENCE_LST_OK) {
            l->barrier_inflight = true;
            l->phase = PH_CATCHUP;
            llog(l, FENCE_LLOG_INFO, "became leader (term %llu); catching up",
                 (unsigned long long)l->ops.term(l->ops.ctx));
        }
    } else if (!leader && l->phase != PH_NONE) {
        llog(l, FENCE_LLOG_INFO, "no longer leader (term %llu)",
             (unsigned long long)l->ops.term(l->ops.ctx));
        l->phase = PH_NONE;
        l->rearm = true; /* followers run no timer */
        /* Requests not yet proposed: tell their clients where to go. */
        fail_unproposed(l, FENCE_LST_NOTLEADER);
        l->tick_pending = false;
    }
}

/* The barrier is applied (the previous callback said so): fix the time
 * offset so fsm time never goes back, then propose LEADER_START with our
 * limits, alone in its entry; writes wait for it. */
static void start_leadership(fence_leader *l)
{
    uint64_t mono = l->ops.now_ms(l->ops.ctx);
    uint64_t fsm_now = fence_fsm_now(l->fsm);
    if (fsm_now > mono && fsm_now - mono > l->time_offset)
        l->time_offset = fsm_now - mono;
    fence_cmd cmd;
    memset(&cmd, 0, sizeof(cmd));
    cmd.type = FENCE_CMD_LEADER_START;
    cmd.limits = l->limits;
    l->phase = PH_STARTING;
    /* LEADER_START goes alone, ahead of anything else. */
    batch_close(l);
    propose_closed(l);
    if (!batch_add_internal(l, &cmd)) {
        l->phase = PH_NONE;
        return;
    }
    batch_close(l);
    propose_closed(l);
}

/* One step of the loop; see leader.h (THE RULE FOR CALLING RAFT). */
void fence__leader_step(fence_leader *l)
{
    FENCE_ASSERT(l->in_raft_cb == 0);
    FENCE_ASSERT(!l->in_step);
    l->in_step = true;
    watch_leadership(l);
    if (l->phase == PH_BARRIER_DONE && !l->stopping)
        start_leadership(l);
    if (l->phase != PH_NONE) {
        propose_closed(l);
        if (l->pending != NULL && l->n_inflight == 0 && !batch_hold(l)) {
            batch_close(l);
            propose_closed(l);
        }
    }
    l->in_step = false;
}

/* The earliest fsm deadline passed: queue a TICK so the core processes
 * it (lease expiry, wait timeouts, lock-delay ends). */
void fence__leader_timer(fence_leader *l)
{
    FENCE_ASSERT(l->in_raft_cb == 0);
    bool held = l->hold_until != 0;
    if (held) {
        /* The hold is over (leader.h "Holding"): the batch goes at the
         * next step. */
        l->hold_over = true;
        l->rearm = true;
    }
    if (l->phase != PH_READY || l->tick_pending || l->stopping)
        return;
    if (held && fence_fsm_next_deadline(l->fsm) > fence__leader_now(l))
        return; /* it fired for the hold only */
    fence_cmd cmd;
    memset(&cmd, 0, sizeof(cmd));
    cmd.type = FENCE_CMD_TICK;
    l->tick_deadline = fence_fsm_next_deadline(l->fsm);
    if (batch_add_internal(l, &cmd))
        l->tick_pending = true;
    else
        l->rearm = true; /* out of memory: try again after a back-off */
}

/* The delay for the one leader timer (the core's next deadline); see
 * leader.h. */
bool fence__leader_timer_take(fence_leader *l, uint64_t *delay_ms)
{
    if (!l->rearm)
        return false;
    l->rearm = false;
    *delay_ms = UINT64_MAX;
    if (l->phase != PH_READY || l->stopping)
        return true;
    uint64_t hold = UINT64_MAX;
    if (l->hold_until != 0) {
        uint64_t mono = l->ops.now_ms(l->ops.ctx);
        hold = l->hold_until > mono ? l->hold_until - mono : 0;
    }
    uint64_t deadline = fence_fsm_next_deadline(l->fsm);
    if (deadline == UINT64_MAX) {
        *delay_ms = hold;
        return true;
    }
    uint64_t now = fence__leader_now(l);
    /* +1: loop time is whole ms, so never fire a hair before the deadline. */
    uint64_t delay = deadline > now ? deadline - now + 1 : 0;
    if (delay == 0 && !l->tick_pending && deadline == l->tick_deadline) {
        /* A TICK for this deadline was tried and the deadline is still
         * pending: its proposal failed (raft refused it, say during a
         * leadership transfer), or, were it applied, a core bug.  Retry
         * after a back-off instead of spinning on TICKs. */
        llog(l, FENCE_LLOG_WARN,
             "deadline %llu still pending after a TICK; retrying in %d ms",
             (unsigned long long)deadline, TICK_RETRY_MS);
        delay = TICK_RETRY_MS;
    }
    *delay_ms = delay < hold ? delay : hold;
    return true;
}

/* Shutdown: no new requests; the unproposed ones are answered. */
void fence__leader_stop(fence_leader *l)
{
    FENCE_ASSERT(l->in_raft_cb == 0);
    if (l->stopping)
        return;
    l->stopping = true;
    l->rearm = true;
    fail_unproposed(l, FENCE_LST_SHUTDOWN);
}

/* ---- Raft's callbacks --------------------------------------------------------- */

/* raft fsm->apply; see leader.h.  Results go to an array of this module
 * that the raft_apply callback (leader only, right after) reads; nothing
 * is allocated per entry, so nothing leaks on followers. */
const fence_result *fence__leader_apply(fence_leader *l, const uint8_t *buf,
                                        size_t len)
{
    l->in_raft_cb++;
    size_t plen = fence__entry_unframe(buf, len);
    int n = plen == SIZE_MAX ? -1
                             : fence_fsm_apply_entry(l->fsm, buf, plen, l->results,
                                                     FENCE_BATCH_MAX);
    if (n < 0) {
        llog(l, FENCE_LLOG_ERROR, "malformed log entry (%zu bytes): refusing to go on",
             len);
        fence__fatal("malformed log entry");
    }
    l->n_results = n;
    l->apply_seq++;
    l->events = fence_fsm_events(l->fsm, &l->n_events);
    /* Waits that ended: answer every request registered for them.  The
     * events stay listed for QUEUED results of this same entry, which are
     * registered only when its callback runs (item_done). */
    for (size_t i = 0; i < l->n_events; i++) {
        const fence_event *ev = &l->events[i];
        fence_lreq *r;
        while ((r = wait_take(l, ev->wait_id)) != NULL) {
            fence_result res = ev->result;
            answer_result(l, req_release(r), &res, true);
        }
    }
    l->rearm = true;
    l->in_raft_cb--;
    return l->results;
}

/* After a snapshot restore: a request registered for a wait that no
 * longer exists will never get its event (the wait ended inside the
 * entries the snapshot replaced; this happens to a deposed leader whose
 * clients still wait on it and that catches up by InstallSnapshot).
 * Answer such requests RESTORED (TRYAGAIN): the outcome is unknown here,
 * and a retry (same REQID, or LOCK by the same lease) gets it from the
 * leader.  One request at a time, with a fresh scan of its bucket after
 * each reply, because a reply that fails for lack of memory closes its
 * connection, which unlinks that connection's other requests. */
void fence__leader_restored(fence_leader *l)
{
    l->in_raft_cb++;
    l->events = NULL; /* the fsm's array is gone with the old state */
    l->n_events = 0;
    l->apply_seq++;
    for (size_t b = 0; b < l->wait_nb; b++) {
        fence_lreq *r = l->wait_tab[b];
        while (r != NULL) {
            if (fence_fsm_wait_exists(l->fsm, r->wait_id)) {
                r = r->wnext;
                continue;
            }
            wait_remove(l, r);
            answer_error(l, req_release(r), FENCE_LERR_RESTORED);
            r = l->wait_tab[b];
        }
    }
    l->rearm = true;
    l->in_raft_cb--;
}

/* raft_apply callback: the batch's entry is committed and applied (status
 * OK; the results are those fence__leader_apply wrote just before), or its
 * outcome is unknown (leadership lost, shutdown).  Every request gets its
 * answer here or is registered as a wait. */
void fence__leader_applied(fence_leader *l, void *tag, int status,
                           const void *result)
{
    lbatch *b = tag;
    l->in_raft_cb++;
    inflight_remove(l, b);
    if (status != FENCE_LST_OK) {
        llog(l, FENCE_LLOG_WARN, "entry of %u commands not applied", b->n_cmds);
        batch_fail(l, b, status);
        l->in_raft_cb--;
        return;
    }
    FENCE_ASSERT(result == l->results);
    FENCE_ASSERT(l->n_results >= 0);
    FENCE_ASSERT((uint32_t)l->n_results == b->n_cmds + (b->n_cmds == 0 ? 1u : 0u));
    uint32_t j = 0;
    for (uint32_t i = 0; i < b->n_items; i++) {
        litem *it = &b->items[i];
        if (it->is_read) {
            item_done(l, b, it, NULL);
        } else {
            item_done(l, b, it, &l->results[j]);
            j++;
        }
    }
    l->rearm = true;
    batch_free(b);
    l->in_raft_cb--;
}

/* raft_barrier callback: the catch-up is over (status OK) or failed.  The
 * LEADER_START goes out at the next step (the rule). */
void fence__leader_barrier_done(fence_leader *l, int status)
{
    l->in_raft_cb++;
    l->barrier_inflight = false;
    if (l->phase == PH_CATCHUP) {
        if (status == FENCE_LST_OK && l->ops.is_leader(l->ops.ctx) && !l->stopping)
            l->phase = PH_BARRIER_DONE;
        else
            l->phase = PH_NONE;
    }
    l->in_raft_cb--;
}

/* ---- Life ------------------------------------------------------------------------ */

/* Create the module; see leader.h. */
int fence__leader_create(const fence_leader_ops *ops, fence_fsm *fsm,
                         const fence_limits *limits, fence_leader **out)
{
    fence_leader *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return -1;
    l->ops = *ops;
    l->fsm = fsm;
    l->limits = *limits;
    l->wait_nb = WAIT_TAB_INITIAL;
    l->wait_tab = calloc(l->wait_nb, sizeof(*l->wait_tab));
    l->cmds = calloc(FENCE_BATCH_MAX, sizeof(*l->cmds));
    if (l->wait_tab == NULL || l->cmds == NULL) {
        fence__leader_destroy(l);
        return -1;
    }
    *out = l;
    return 0;
}

/* Free a batch list with its requests (destroy only). */
static void free_batches(lbatch *b)
{
    while (b != NULL) {
        lbatch *next = b->next;
        for (uint32_t i = 0; i < b->n_items; i++)
            if (b->items[i].req != NULL) {
                conn_unlink(b->items[i].req);
                free(b->items[i].req);
            }
        batch_free(b);
        b = next;
    }
}

/* Free everything left; see leader.h. */
void fence__leader_destroy(fence_leader *l)
{
    if (l == NULL)
        return;
    free_batches(l->pending);
    free_batches(l->closed);
    free_batches(l->inflight);
    for (size_t b = 0; l->wait_tab != NULL && b < l->wait_nb; b++) {
        fence_lreq *r = l->wait_tab[b];
        while (r != NULL) {
            fence_lreq *next = r->wnext;
            conn_unlink(r);
            free(r);
            r = next;
        }
    }
    free(l->wait_tab);
    free(l->cmds);
    free(l->ebuf);
    free(l);
}

/* ---- Entry framing ------------------------------------------------------------------ */

/* Framed size: at least one trailer byte, up to the next multiple of 8. */
size_t fence__entry_framed_len(size_t len)
{
    return len + (8 - len % 8);
}

/* Zero-fill the padding and store its size in the last byte. */
size_t fence__entry_frame(uint8_t *buf, size_t len)
{
    size_t pad = 8 - len % 8;
    FENCE_ASSERT(pad >= 1);
    FENCE_ASSERT(pad <= 8);
    memset(buf + len, 0, pad - 1);
    buf[len + pad - 1] = (uint8_t)pad;
    return len + pad;
}

/* Strip the framing, checking it is well formed. */
size_t fence__entry_unframe(const uint8_t *buf, size_t len)
{
    if (len == 0 || len % 8 != 0)
        return SIZE_MAX;
    size_t pad = buf[len - 1];
    if (pad < 1 || pad > 8 || pad > len)
        return SIZE_MAX;
    for (size_t i = len - pad; i < len - 1; i++)
        if (buf[i] != 0)
            return SIZE_MAX;
    return len - pad;
}
