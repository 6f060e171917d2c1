/* Unit tests of the leader module (src/leader/) through its ops
 * table, with the real core and a fake raft: proposals are kept in a list
 * and "committed" by the test, which calls fence__leader_apply and then
 * fence__leader_applied as raft would.  Checks the phases (barrier, then
 * LEADER_START alone), group commit (one entry while none is in flight; a
 * full batch, or a write after a read of the same connection, goes out at
 * once), orphans, waits, leadership loss, and that calling raft from inside
 * a raft callback aborts (the rule in leader.h). */
#include <assert.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/entry.h"
#include "core/fsm.h"
#include "leader/leader.h"

#define MAXP 64

/* One proposal the fake raft holds. */
typedef struct prop {
    void *tag;       /* the module's batch */
    uint8_t *buf;    /* copy of the framed entry */
    size_t len;      /* its length */
} prop;

/* One answer the sink got. */
typedef struct ans {
    int kind;        /* 1 result, 2 read, 3 error */
    int req;         /* request number (handle - reqs) */
    fence_result r;  /* kind 1 */
    bool from_wait;  /* kind 1 */
    int err;         /* kind 3 */
} ans;

static int failures;
static bool leader = true;
static bool refuse; /* raft refuses proposals while we lead (a transfer) */
static int barriers;
static prop props[MAXP];
static int n_props;
static ans answers[8192];
static int n_answers;
static int reqs[8192];
static uint64_t clock_ms = 1000;
static fence_leader *g_l;
static bool step_in_sink;
static bool stored_all; /* ops->stored's answer */

#define CHECK(cond, what)                                                   \
    do {                                                                    \
        if (cond) {                                                         \
            printf("ok - %s\n", what);                                      \
        } else {                                                            \
            printf("not ok - %s (line %d)\n", what, __LINE__);              \
            failures++;                                                     \
        }                                                                   \
    } while (0)

/* ops->propose: keep a copy. */
static int t_propose(void *ctx, void *tag, const uint8_t *entry, size_t len)
{
    (void)ctx;
    assert(n_props < MAXP);
    props[n_props].tag = tag;
    props[n_props].buf = malloc(len);
    assert(props[n_props].buf != NULL);
    memcpy(props[n_props].buf, entry, len);
    props[n_props].len = len;
    n_props++;
    return leader && !refuse ? FENCE_LST_OK : FENCE_LST_NOTLEADER;
}

/* ops->barrier: count. */
static int t_barrier(void *ctx)
{
    (void)ctx;
    barriers++;
    return FENCE_LST_OK;
}

static bool t_is_leader(void *ctx) { (void)ctx; return leader; }
static unsigned t_voters(void *ctx) { (void)ctx; return 3; }
static uint64_t t_term(void *ctx) { (void)ctx; return 2; }
static uint64_t t_now(void *ctx) { (void)ctx; return clock_ms; }
static bool t_stored(void *ctx) { (void)ctx; return stored_all; }
static void t_log(void *ctx, int level, const char *msg) { (void)ctx; (void)level; (void)msg; }

/* Record an answer. */
static ans *t_answer(void *req, int kind)
{
    ans *a = &answers[n_answers++];
    memset(a, 0, sizeof(*a));
    a->kind = kind;
    a->req = (int)((int *)req - reqs);
    if (step_in_sink)
        fence__leader_step(g_l); /* breaks the rule: must abort */
    return a;
}

static void t_result(void *ctx, void *req, const fence_result *r, bool from_wait)
{
    (void)ctx;
    ans *a = t_answer(req, 1);
    a->r = *r;
    a->from_wait = from_wait;
}

static void t_read(void *ctx, void *req, const fence_cmd *cmd)
{
    (void)ctx;
    (void)cmd;
    t_answer(req, 2);
}

static void t_error(void *ctx, void *req, int err)
{
    (void)ctx;
    t_answer(req, 3)->err = err;
}

static void *t_alloc(void *ctx, size_t size) { (void)ctx; return malloc(size); }
static void t_free(void *ctx, void *p) { (void)ctx; free(p); }

/* Open proposal k for reading (every proposal is a well-formed entry). */
static void prop_open(int k, fence_entry_iter *it)
{
    size_t plen = fence__entry_unframe(props[k].buf, props[k].len);
    assert(plen != SIZE_MAX);
    int rv = fence_entry_open(it, props[k].buf, plen);
    assert(rv == 0);
    (void)rv;
}

/* Commands in proposal k (and the first into *first). */
static uint32_t prop_count(int k, fence_cmd *first)
{
    fence_entry_iter it;
    prop_open(k, &it);
    if (first != NULL)
        fence_entry_next(&it, first);
    return it.count;
}

/* Command i of proposal k into *out; false if it has fewer. */
static bool prop_cmd(int k, uint32_t i, fence_cmd *out)
{
    fence_entry_iter it;
    prop_open(k, &it);
    if (i >= it.count)
        return false;
    for (uint32_t j = 0; j <= i; j++)
        if (fence_entry_next(&it, out) != 1)
            return false;
    return true;
}

/* The timestamp proposal k is stamped with. */
static uint64_t prop_ts(int k)
{
    fence_entry_iter it;
    prop_open(k, &it);
    return it.timestamp_ms;
}

/* Commit proposal k the way raft does: apply, then its callback. */
static void commit(int k)
{
    const fence_result *res = fence__leader_apply(g_l, props[k].buf, props[k].len);
    fence__leader_applied(g_l, props[k].tag, FENCE_LST_OK, res);
}

/* Free every proposal copy. */
static void props_clear(void)
{
    for (int k = 0; k < n_props; k++)
        free(props[k].buf);
    n_props = 0;
}

/* A command of the given type. */
static fence_cmd cmd_of(uint8_t type)
{
    fence_cmd c;
    memset(&c, 0, sizeof(c));
    c.type = type;
    return c;
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    fence_fsm_opts fo;
    memset(&fo, 0, sizeof(fo));
    fo.alloc.alloc = t_alloc;
    fo.alloc.free = t_free;
    fence_fsm *fsm = NULL;
    assert(fence_fsm_create(&fo, &fsm) == 0);
    fence_leader_ops ops = {
        .ctx = NULL, .propose = t_propose, .barrier = t_barrier,
        .is_leader = t_is_leader, .voters = t_voters, .term = t_term,
        .now_ms = t_now, .stored = t_stored, .log = t_log, .reply_result = t_result,
        .reply_read = t_read, .reply_error = t_error,
    };
    fence_limits lim;
    fence_limits_default(&lim);
    assert(fence__leader_create(&ops, fsm, &lim, &g_l) == 0);
    fence_lconn a, b;
    fence__leader_conn_init(&a);
    fence__leader_conn_init(&b);

    /* Not ready: refused at once. */
    fence_cmd grant = cmd_of(FENCE_CMD_LEASE_GRANT);
    grant.ttl_ms = 10000;
    fence__leader_submit(g_l, &a, &reqs[0], &grant, false);
    CHECK(n_answers == 1 && answers[0].kind == 3 &&
          answers[0].err == FENCE_LERR_UNAVAILABLE, "a write before ready is refused");

    /* Phases: barrier, then LEADER_START alone, then ready. */
    fence__leader_step(g_l);
    CHECK(barriers == 1 && n_props == 0, "becoming leader issues one barrier");
    fence__leader_barrier_done(g_l, FENCE_LST_OK);
    CHECK(n_props == 0, "LEADER_START waits for the step (nothing proposed in the callback)");
    fence__leader_step(g_l);
    fence_cmd first;
    CHECK(n_props == 1 && prop_count(0, &first) == 1 &&
          first.type == FENCE_CMD_LEADER_START, "LEADER_START goes alone");
    CHECK(!fence__leader_ready(g_l), "not ready before LEADER_START applies");
    commit(0);
    props_clear();
    CHECK(fence__leader_ready(g_l), "ready once LEADER_START applied");

    /* Group commit and the cut: with an entry in flight, conn a sends
     * write, read, write and conn b a write.  The batch holding a's read is
     * cut before a's second write and goes out at once, behind the entry in
     * flight; the second write starts the next batch, which waits. */
    n_answers = 0;
    fence_cmd tk = cmd_of(FENCE_CMD_LEASE_GRANT);
    tk.ttl_ms = 10000;
    fence__leader_submit(g_l, &b, &reqs[9], &tk, false);
    fence__leader_step(g_l);
    CHECK(n_props == 1, "an entry in flight");
    fence__leader_submit(g_l, &a, &reqs[1], &grant, false);
    fence_cmd rd = cmd_of(0);
    rd.lease = 1;
    fence__leader_submit(g_l, &a, &reqs[2], &rd, true);
    fence__leader_submit(g_l, &b, &reqs[3], &grant, false);
    fence__leader_submit(g_l, &a, &reqs[4], &grant, false);
    CHECK(n_props == 1, "nothing is proposed outside the step");
    fence__leader_step(g_l);
    CHECK(n_props == 2 && prop_count(1, NULL) == 2,
          "the batch cut before a write after a read goes out behind the entry in flight");
    commit(0);
    commit(1);
    CHECK(n_answers == 4 && answers[0].req == 9 && answers[1].req == 1 &&
          answers[2].req == 2 && answers[2].kind == 2 && answers[3].req == 3,
          "the cut entry answers a's write, the read, and b's write");
    fence__leader_step(g_l);
    CHECK(n_props == 3 && prop_count(2, NULL) == 1, "the later write goes in the next entry");
    commit(2);
    CHECK(n_answers == 5 && answers[4].req == 4 && answers[4].kind == 1,
          "and is answered by it");
    props_clear();

    /* Group commit: while an entry is in flight the pending batch waits,
     * unless it is full. */
    n_answers = 0;
    fence__leader_submit(g_l, &a, &reqs[5], &grant, false);
    fence__leader_step(g_l);
    CHECK(n_props == 1, "one entry in flight");
    fence__leader_submit(g_l, &b, &reqs[6], &grant, false);
    fence__leader_step(g_l);
    CHECK(n_props == 1, "the next batch waits for the entry in flight");
    fence_cmd ka = cmd_of(FENCE_CMD_LEASE_KEEPALIVE);
    ka.lease = 1;
    for (int i = 0; i < FENCE_BATCH_MAX; i++)
        fence__leader_submit(g_l, &b, &reqs[7 + i % 8000], &ka, false);
    fence__leader_step(g_l);
    CHECK(n_props == 2 && prop_count(1, NULL) == FENCE_BATCH_MAX,
          "a full batch goes out behind the entry in flight");
    commit(0);
    commit(1);
    fence__leader_step(g_l);
    CHECK(n_props == 3 && prop_count(2, NULL) == 1, "the rest follows in the next entry");
    commit(2);
    props_clear();

    /* Gathering: an entry that answered 16 connections; with none in
     * flight, the next batch waits until all but 1/8 of them are back (14
     * requests), or for the timer, which then turns gathering off for a
     * while.  Reads of those connections count as answered too. */
    {
        enum { NG = 16 };
        fence_lconn g[NG];
        for (int i = 0; i < NG; i++)
            fence__leader_conn_init(&g[i]);
        n_answers = 0;
        for (int i = 0; i < NG; i++)
            fence__leader_submit(g_l, &g[i], &reqs[200 + i], &tk, false);
        fence__leader_step(g_l);
        CHECK(n_props == 1 && prop_count(0, NULL) == NG, "16 connections in one entry");
        commit(0);
        props_clear();
        CHECK(n_answers == NG, "all 16 answered");
        for (int i = 0; i < 13; i++) {
            fence__leader_submit(g_l, &g[i], &reqs[300 + i], &tk, false);
            fence__leader_step(g_l);
        }
        CHECK(n_props == 0, "13 of the 16 back: the batch waits for more");
        uint64_t gd = 0;
        CHECK(fence__leader_timer_take(g_l, &gd) && gd >= 1 && gd <= 2,
              "with the timer armed for the gather (1-2 ms)");
        fence__leader_submit(g_l, &g[13], &reqs[313], &tk, false);
        fence__leader_step(g_l);
        CHECK(n_props == 1 && prop_count(0, NULL) == 14, "the 14th: one entry of 14");
        commit(0);
        props_clear();
        /* 14 answered: the next batch waits; nobody else comes, so the
         * timer sends it, and the next batches go at once. */
        fence__leader_submit(g_l, &g[0], &reqs[320], &tk, false);
        fence__leader_step(g_l);
        CHECK(n_props == 0, "one back of 14: waits");
        clock_ms += 2;
        fence__leader_timer(g_l);
        fence__leader_step(g_l);
        CHECK(n_props == 1 && prop_count(0, NULL) == 1, "the timer sends it alone");
        commit(0);
        props_clear();
        fence__leader_submit(g_l, &g[1], &reqs[321], &tk, false);
        fence__leader_step(g_l);
        CHECK(n_props == 1, "after a gather timed out the next batch goes at once");
        commit(0);
        props_clear();
        fence_leader_stats gs;
        fence__leader_stats_get(g_l, &gs);
        CHECK(gs.gathers == 2 && gs.gathers_timed_out == 1, "INFO counts 2 gathers, 1 timed out");
        n_answers = 0;
    }

    /* Orphans: a closed connection's requests are never answered. */
    n_answers = 0;
    fence_lconn c;
    fence__leader_conn_init(&c);
    fence__leader_submit(g_l, &c, &reqs[100], &grant, false);
    fence__leader_step(g_l);
    fence__leader_conn_close(g_l, &c);
    commit(0);
    props_clear();
    CHECK(n_answers == 0, "a closed connection's request is not answered");

    /* Waits: lease 1 holds "x"; lease 2 waits; revoking lease 1 grants it,
     * answered as a wait's outcome. */
    n_answers = 0;
    fence_cmd lk = cmd_of(FENCE_CMD_LOCK);
    lk.name = (const uint8_t *)"x";
    lk.name_len = 1;
    lk.lease = 1;
    fence__leader_submit(g_l, &a, &reqs[200], &lk, false);
    lk.lease = 2;
    lk.wait_ms = 5000;
    fence__leader_submit(g_l, &b, &reqs[201], &lk, false);
    fence__leader_step(g_l);
    commit(0);
    CHECK(n_answers == 1 && answers[0].req == 200 && answers[0].r.status == FENCE_ST_OK,
          "the free lock is granted; the second LOCK waits");
    fence_cmd rv = cmd_of(FENCE_CMD_LEASE_REVOKE);
    rv.lease = 1;
    fence__leader_submit(g_l, &a, &reqs[202], &rv, false);
    fence__leader_step(g_l);
    commit(1);
    CHECK(n_answers == 3 && answers[1].req == 201 && answers[1].from_wait &&
          answers[1].r.status == FENCE_ST_OK && answers[2].req == 202,
          "the waiter gets the lock as a wait's outcome when the holder goes");
    uint64_t tok_x = answers[1].r.token;
    props_clear();

    /* Holding: with nothing in flight, a batch whose every item would
     * queue (an ACQUIRE that may wait for "x", which lease 2 holds) is held
     * back; the holder's UNLOCK ends the hold and both ride one entry, the
     * ACQUIRE first, so the UNLOCK hands "x" straight to it. */
    n_answers = 0;
    fence_lconn d, e;
    fence__leader_conn_init(&d);
    fence__leader_conn_init(&e);
    fence_cmd aq = cmd_of(FENCE_CMD_ACQUIRE);
    aq.name = (const uint8_t *)"x";
    aq.name_len = 1;
    aq.ttl_ms = 10000;
    aq.wait_ms = 5000;
    fence__leader_submit(g_l, &d, &reqs[500], &aq, false);
    fence__leader_step(g_l);
    uint64_t delay = UINT64_MAX;
    CHECK(n_props == 0, "an ACQUIRE that would queue is held back");
    CHECK(fence__leader_timer_take(g_l, &delay) && delay >= 1 && delay <= 2,
          "the hold arms the timer for at most 2 ms");
    fence_cmd ul = cmd_of(FENCE_CMD_UNLOCK);
    ul.name = (const uint8_t *)"x";
    ul.name_len = 1;
    ul.token = tok_x;
    fence__leader_submit(g_l, &b, &reqs[501], &ul, false);
    fence__leader_step(g_l);
    fence_cmd c0;
    CHECK(n_props == 1 && prop_count(0, &c0) == 2 && c0.type == FENCE_CMD_ACQUIRE,
          "the holder's UNLOCK ends the hold: one entry, the ACQUIRE first");
    commit(0);
    CHECK(n_answers == 2 && answers[0].req == 500 && answers[0].from_wait &&
          answers[0].r.status == FENCE_ST_OK && answers[0].r.token > tok_x &&
          answers[1].req == 501 && answers[1].r.value == 1,
          "that entry grants the waiter (a newer token) and releases the holder");
    props_clear();

    /* The hold is bounded: when the timer fires the batch goes alone. */
    n_answers = 0;
    fence__leader_submit(g_l, &e, &reqs[502], &aq, false);
    fence__leader_step(g_l);
    CHECK(n_props == 0, "a second ACQUIRE of the held lock is held back");
    fence__leader_timer(g_l);
    fence__leader_step(g_l);
    CHECK(n_props == 1 && prop_count(0, NULL) == 1,
          "the timer ends the hold: it goes out alone");
    commit(0);
    CHECK(n_answers == 0, "and waits (QUEUED)");
    props_clear();

    /* Nothing else is held: an ACQUIRE of a free lock, an ACQUIRE that may
     * not wait, a write behind a held item. */
    n_answers = 0;
    aq.name = (const uint8_t *)"y";
    fence__leader_submit(g_l, &a, &reqs[503], &aq, false);
    fence__leader_step(g_l);
    CHECK(n_props == 1, "an ACQUIRE of a free lock goes at once");
    commit(0);
    props_clear();
    aq.name = (const uint8_t *)"x";
    aq.wait_ms = 0;
    fence__leader_submit(g_l, &a, &reqs[504], &aq, false);
    fence__leader_step(g_l);
    CHECK(n_props == 1, "an ACQUIRE that may not wait goes at once");
    commit(0);
    props_clear();
    aq.wait_ms = 5000;
    fence__leader_submit(g_l, &a, &reqs[505], &aq, false);
    fence__leader_step(g_l);
    CHECK(n_props == 0, "held again");
    fence__leader_submit(g_l, &a, &reqs[506], &grant, false);
    fence__leader_step(g_l);
    CHECK(n_props == 1 && prop_count(0, NULL) == 2,
          "a LEASE.GRANT ends the hold; both in one entry");
    commit(0);
    CHECK(n_answers == 3 && answers[2].req == 506, "the grant is answered");
    props_clear();
    /* Cancel the two waits left (e's and a's). */
    fence__leader_conn_close(g_l, &e);
    fence__leader_conn_close(g_l, &a);
    fence__leader_conn_init(&a);
    fence__leader_step(g_l);
    CHECK(n_props == 1 && prop_count(0, NULL) == 2, "their CANCELs are not held");
    commit(0);
    props_clear();

    /* Renewals (leader.h "Renewals"): answered without an entry, then one
     * checkpoint stamped with the last renewal's time, ahead of the rest. */
    fence__leader_renew_window(g_l, 400);
    n_answers = 0;
    grant.ttl_ms = 10000;
    fence__leader_submit(g_l, &a, &reqs[600], &grant, false);
    fence__leader_step(g_l);
    commit(0);
    props_clear();
    uint64_t rl = answers[0].r.lease;
    fence_cmd rka = cmd_of(FENCE_CMD_LEASE_KEEPALIVE);
    rka.lease = rl;
    clock_ms += 10;
    fence__leader_submit(g_l, &a, &reqs[601], &rka, false);
    CHECK(n_answers == 2 && answers[1].req == 601 && answers[1].kind == 1 &&
          answers[1].r.status == FENCE_ST_OK && answers[1].r.value == 9600,
          "a renewal is answered at once: TTL minus the renew window");
    fence__leader_step(g_l);
    CHECK(n_props == 0, "... with no entry");
    fence_cmd ka2 = cmd_of(FENCE_CMD_LEASE_KEEPALIVE);
    ka2.lease = 999;
    fence__leader_submit(g_l, &b, &reqs[602], &ka2, false);
    CHECK(n_answers == 2, "an unknown lease's renewal goes through the log");
        CHECK(fence__leader_timer_take(g_l, &delay) && delay <= 101,
          "the timer is armed for the checkpoint");
    /* Within the interval, the recorded renewal rides the next entry
     * proposed (the unknown lease's KEEPALIVE), stamped when it goes. */
    clock_ms += 5;
    uint64_t ride_at = fence__leader_now(g_l);
    fence__leader_step(g_l);
    fence_cmd c1, c2;
    CHECK(n_props == 1 && prop_count(0, &c1) == 2 && c1.type == FENCE_CMD_LEASE_KEEPALIVE &&
              prop_cmd(0, 1, &c2) && c2.type == FENCE_CMD_LEASE_CHECKPOINT &&
              c2.ids_count == 1,
          "the recorded renewal rides the next entry, the log's KEEPALIVE");
    CHECK(prop_ts(0) == ride_at, "... stamped when it goes");
    commit(0);
    CHECK(n_answers == 3 && answers[2].req == 602 && answers[2].r.status == FENCE_ST_NOLEASE,
          "the log answers NOLEASE");
    fence_fsm_lease_state ls;
    CHECK(fence_fsm_lease_info(fsm, rl, fence__leader_now(g_l), &ls) == 0 &&
          ls.deadline_ms == ride_at + 10000, "the checkpoint renewed the lease");
    props_clear();
    fence__leader_step(g_l);
    clock_ms += 100;
    fence__leader_timer(g_l);
    fence__leader_step(g_l);
    CHECK(n_props == 0, "nothing is left for a checkpoint of its own");
    /* With nothing to ride: one checkpoint of its own after the interval,
     * stamped with the renewal's time. */
    clock_ms += 10;
    uint64_t renew_at = fence__leader_now(g_l);
    fence__leader_submit(g_l, &a, &reqs[611], &rka, false);
    CHECK(n_answers == 4 && answers[3].req == 611 && answers[3].r.value == 9600,
          "another renewal is answered at once");
    clock_ms += 50;
    fence__leader_step(g_l);
    CHECK(n_props == 0, "... and waits for the interval");
    clock_ms += 50;
    fence__leader_timer(g_l);
    fence__leader_step(g_l);
    CHECK(n_props == 1 && prop_count(0, &c1) == 1 && c1.type == FENCE_CMD_LEASE_CHECKPOINT &&
          c1.ids_count == 1, "one checkpoint after the interval");
    CHECK(prop_ts(0) == renew_at, "stamped with the renewal's time, not the proposal's");
    commit(0);
    CHECK(fence_fsm_lease_info(fsm, rl, fence__leader_now(g_l), &ls) == 0 &&
          ls.deadline_ms == renew_at + 10000, "the checkpoint renewed the lease");
    props_clear();
    /* A stall past the interval between the answer and the next entry:
     * the checkpoint does not ride that entry; it goes alone, first,
     * stamped with the renewal's time. */
    clock_ms += 10;
    renew_at = fence__leader_now(g_l);
    fence__leader_submit(g_l, &a, &reqs[612], &rka, false);
    CHECK(n_answers == 5 && answers[4].req == 612, "a renewal is answered at once");
    fence__leader_submit(g_l, &b, &reqs[613], &grant, false);
    clock_ms += 150;
    fence__leader_step(g_l);
    CHECK(n_props >= 1 && prop_count(0, &c1) == 1 && c1.type == FENCE_CMD_LEASE_CHECKPOINT &&
              prop_ts(0) == renew_at,
          "after a stall past the interval: a checkpoint of its own, stamped with the renewal");
    commit(0);
    fence__leader_step(g_l);
    CHECK(n_props == 2 && prop_count(1, &c2) == 1 && c2.type == FENCE_CMD_LEASE_GRANT,
          "... ahead of the entry it did not ride");
    commit(1);
    CHECK(n_answers == 6 && answers[5].req == 613, "the grant is answered");
    props_clear();
    n_answers = 3;
    /* No entry of ours applied for a whole window: not sure to lead. */
    clock_ms += 400;
    fence__leader_submit(g_l, &a, &reqs[603], &rka, false);
    CHECK(n_answers == 3, "without a recent applied entry a renewal goes through the log");
    fence__leader_step(g_l);
    commit(0);
    props_clear();
    CHECK(n_answers == 4 && answers[3].r.value == 10000, "... and answers the TTL");
    /* A write of the same connection still unapplied: in order, via the log. */
    fence__leader_submit(g_l, &a, &reqs[604], &grant, false);
    fence__leader_step(g_l);
    fence__leader_submit(g_l, &a, &reqs[605], &rka, false);
    CHECK(n_answers == 4, "behind an unapplied write of its connection: through the log");
    fence__leader_step(g_l);
    commit(0);
    fence__leader_step(g_l);
    commit(1);
    props_clear();
    CHECK(n_answers == 6 && answers[5].req == 605, "answered in order");
    fence__leader_submit(g_l, &a, &reqs[606], &rka, false);
    CHECK(n_answers == 7 && answers[6].r.value == 9600, "then at once again");
    /* Behind an unapplied renewal (of another lease) it is still answered
     * at once: overtaking a renewal changes no answer. */
    fence__leader_submit(g_l, &a, &reqs[609], &ka2, false);
    fence__leader_submit(g_l, &a, &reqs[610], &rka, false);
    CHECK(n_answers == 8 && answers[7].req == 610 && answers[7].r.value == 9600,
          "behind an unapplied KEEPALIVE of its connection: still at once");
    fence__leader_step(g_l);
    commit(0);
    props_clear();
    CHECK(n_answers == 9 && answers[8].req == 609 && answers[8].r.status == FENCE_ST_NOLEASE,
          "the one through the log answers after");
    n_answers = 7;
    /* Another owner's renewal goes through the log, which says NOPERM. */
    fence_cmd oka = rka;
    oka.owner = 77;
    fence__leader_submit(g_l, &b, &reqs[607], &oka, false);
    CHECK(n_answers == 7, "another owner's renewal is not answered by the leader itself");
    fence__leader_step(g_l);
    commit(0);
    props_clear();
    CHECK(n_answers == 8 && answers[7].req == 607 && answers[7].r.status == FENCE_ST_NOPERM,
          "... the log answers NOPERM");
    oka.flags |= FENCE_CMD_F_ADMIN;
    fence__leader_submit(g_l, &b, &reqs[608], &oka, false);
    CHECK(n_answers == 9 && answers[8].r.status == FENCE_ST_OK, "an admin's is answered at once");
    /* Leadership lost with a renewal recorded: no checkpoint afterwards. */
    leader = false;
    fence__leader_step(g_l);
    clock_ms += 200;
    fence__leader_timer(g_l);
    fence__leader_step(g_l);
    CHECK(n_props == 0, "renewals recorded are forgotten when leadership is lost");
    fence_leader_stats lst;
    fence__leader_stats_get(g_l, &lst);
    /* Six answered here (601, 611, 612, 606, 610, 608); 601's rode 602's
     * entry, 606's and 610's rode 609's, 611's and 612's went alone, 608's
     * was forgotten. */
    CHECK(lst.renewals_local == 6 && lst.checkpoints == 4 && lst.checkpoint_ids == 5 &&
              lst.checkpoints_rode == 2,
          "stats count the renewals, the checkpoints and those that rode");
    leader = true;
    fence__leader_step(g_l);
    fence__leader_barrier_done(g_l, FENCE_LST_OK);
    fence__leader_step(g_l);
    commit(0);
    props_clear();

    /* A leadership transfer: raft refuses every proposal while this server
     * still leads (seed 1538 of the simulation: a renewal answered during
     * one, a checkpoint refused, a later entry expired the lease 582 ms
     * before the answered TTL ran out).  No renewal is answered here from
     * the refusal until an entry proposed after it is applied, and the
     * refused checkpoint goes out before anything else. */
    n_answers = 0;
    clock_ms += 10;
    uint64_t renew2_at = fence__leader_now(g_l);
    fence__leader_submit(g_l, &a, &reqs[620], &rka, false);
    CHECK(n_answers == 1 && answers[0].kind == 1 && answers[0].r.status == FENCE_ST_OK &&
          n_props == 0, "before the transfer a renewal is answered at once");
    refuse = true;
    clock_ms += 100;
    fence__leader_timer(g_l);
    fence__leader_step(g_l);
    CHECK(n_props == 1 && prop_count(0, &c1) == 1 && c1.type == FENCE_CMD_LEASE_CHECKPOINT,
          "its checkpoint is proposed (and refused)");
    props_clear();
    fence__leader_submit(g_l, &a, &reqs[621], &rka, false);
    CHECK(n_answers == 1, "after a refused proposal a renewal is not answered by the leader");
    fence__leader_step(g_l);
    CHECK(n_answers == 2 && answers[1].req == 621 && answers[1].kind == 3 &&
          answers[1].err == FENCE_LERR_UNAVAILABLE, "... the log refuses it too");
    props_clear();
    refuse = false;
    clock_ms += 1;
    fence__leader_submit(g_l, &b, &reqs[622], &grant, false);
    fence__leader_step(g_l);
    {
        CHECK(n_props == 2 && prop_count(0, &c1) == 1 &&
              c1.type == FENCE_CMD_LEASE_CHECKPOINT && prop_count(1, &c2) == 1 &&
              c2.type == FENCE_CMD_LEASE_GRANT,
              "once raft takes proposals again the refused checkpoint goes first");
        size_t plen = fence__entry_unframe(props[0].buf, props[0].len);
        fence_entry_iter it;
        CHECK(fence_entry_open(&it, props[0].buf, plen) == 0 && it.timestamp_ms == renew2_at,
              "... stamped with the renewal's time");
    }
    fence__leader_submit(g_l, &a, &reqs[623], &rka, false);
    CHECK(n_answers == 2, "until an entry proposed since is applied, renewals use the log");
    commit(0);
    commit(1);
    CHECK(fence_fsm_lease_info(fsm, rl, fence__leader_now(g_l), &ls) == 0 &&
          ls.deadline_ms == renew2_at + 10000, "the checkpoint renewed the lease");
    props_clear();
    fence__leader_step(g_l);
    commit(0); /* the KEEPALIVE through the log */
    props_clear();
    int n_before = n_answers;
    fence__leader_submit(g_l, &a, &reqs[624], &rka, false);
    CHECK(n_answers == n_before + 1 && answers[n_before].req == 624 && n_props == 0,
          "then renewals are answered at once again");
    leader = false;
    fence__leader_step(g_l);
    leader = true;
    fence__leader_step(g_l);
    fence__leader_barrier_done(g_l, FENCE_LST_OK);
    fence__leader_step(g_l);
    commit(0);
    props_clear();

    /* Pipelining (clusters): once the entries in flight are on the local
     * disk, the pending batch goes out behind them, at most 4 in flight;
     * the answers still come in log order, each at its own commit. */
    n_answers = 0;
    fence__leader_submit(g_l, &a, &reqs[500], &grant, false);
    fence__leader_step(g_l);
    CHECK(n_props == 1, "pipelining: one entry in flight");
    fence__leader_submit(g_l, &b, &reqs[501], &grant, false);
    fence__leader_step(g_l);
    CHECK(n_props == 1, "pipelining: not on the local disk yet, the next batch waits");
    stored_all = true;
    fence__leader_step(g_l);
    CHECK(n_props == 2 && n_answers == 0,
          "pipelining: stored, it goes out behind the entry in flight, nothing answered");
    for (int i = 0; i < 3; i++) {
        fence__leader_submit(g_l, &a, &reqs[502 + i], &grant, false);
        fence__leader_step(g_l);
    }
    CHECK(n_props == 4, "pipelining: at most 4 entries in flight");
    commit(0);
    CHECK(n_answers == 1 && answers[0].req == 500, "pipelining: the first commit answers its own");
    fence__leader_step(g_l);
    CHECK(n_props == 5 && prop_count(4, NULL) == 1, "pipelining: a slot freed, the next goes");
    for (int k = 1; k < 5; k++)
        commit(k);
    CHECK(n_answers == 5 && answers[1].req == 501 && answers[2].req == 502 &&
          answers[3].req == 503 && answers[4].req == 504 && answers[4].kind == 1,
          "pipelining: answers in log order");
    fence__leader_stats_get(g_l, &lst);
    CHECK(lst.pipelined == 4, "pipelining: counted (INFO batches_pipelined)");
    props_clear();
    /* Waits-to-be are not sent behind entries in flight: lease of "p"'s
     * ACQUIRE holds it; another ACQUIRE of "p" that may wait comes while
     * an entry is in flight (and stored), and waits, then is held. */
    n_answers = 0;
    fence_cmd ap = cmd_of(FENCE_CMD_ACQUIRE);
    ap.name = (const uint8_t *)"p";
    ap.name_len = 1;
    ap.ttl_ms = 60000;
    fence__leader_submit(g_l, &a, &reqs[600], &ap, false);
    fence__leader_step(g_l);
    CHECK(n_props == 1, "pipelining: \"p\" acquired");
    commit(0);
    CHECK(n_answers == 1 && answers[0].r.status == FENCE_ST_OK, "pipelining: \"p\" granted");
    fence__leader_submit(g_l, &a, &reqs[601], &grant, false);
    fence__leader_step(g_l);
    CHECK(n_props == 2, "pipelining: an entry in flight");
    fence_lconn w;
    fence__leader_conn_init(&w);
    ap.wait_ms = 5000;
    fence__leader_submit(g_l, &w, &reqs[602], &ap, false);
    fence__leader_step(g_l);
    CHECK(n_props == 2, "pipelining: an ACQUIRE that would queue is not sent behind it");
    commit(1);
    fence__leader_step(g_l);
    CHECK(n_props == 2, "pipelining: with nothing in flight it is held as ever");
    fence__leader_timer(g_l);
    fence__leader_step(g_l);
    CHECK(n_props == 3 && prop_count(2, NULL) == 1, "pipelining: the hold's end sends it");
    commit(2);
    fence__leader_conn_close(g_l, &w); /* its CANCEL */
    fence__leader_step(g_l);
    CHECK(n_props == 4, "pipelining: the wait's CANCEL goes");
    commit(3);
    stored_all = false;
    props_clear();

    /* Leadership lost: what is not proposed is refused. */
    n_answers = 0;
    fence__leader_submit(g_l, &a, &reqs[300], &grant, false);
    leader = false;
    fence__leader_step(g_l);
    CHECK(n_answers == 1 && answers[0].err == FENCE_LERR_UNAVAILABLE && n_props == 0,
          "leadership lost: an unproposed request is refused");
    CHECK(!fence__leader_ready(g_l), "not ready after leadership is lost");

    /* The rule: raft called from inside a raft callback aborts. */
    leader = true;
    fence__leader_step(g_l);
    fence__leader_barrier_done(g_l, FENCE_LST_OK);
    fence__leader_step(g_l);
    commit(0);
    props_clear();
    fence__leader_submit(g_l, &a, &reqs[400], &grant, false);
    fence__leader_step(g_l);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(2); /* the assertion message is expected */
        step_in_sink = true;
        commit(0);
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT,
          "a step from inside a raft callback aborts");
    commit(0);
    props_clear();

    /* libraft 0.15 (tests/sim/test_libraft_selfvote.c): a barrier or a
     * LEADER_START that waits a second gets one more barrier, once per
     * second; the extra callbacks change no phase. */
    leader = false;
    fence__leader_step(g_l);
    leader = true;
    int b0 = barriers;
    fence__leader_step(g_l);
    clock_ms += 999;
    fence__leader_step(g_l);
    CHECK(barriers == b0 + 1, "a catch-up barrier waiting under a second: no other");
    clock_ms += 1;
    fence__leader_step(g_l);
    fence__leader_step(g_l);
    CHECK(barriers == b0 + 2 && n_props == 0,
          "after a second one more barrier (once), and nothing else");
    fence__leader_barrier_done(g_l, FENCE_LST_OK);
    fence__leader_step(g_l);
    CHECK(n_props == 1 && prop_count(0, &first) == 1 && first.type == FENCE_CMD_LEADER_START,
          "the first callback ends the catch-up: LEADER_START");
    clock_ms += 1000;
    fence__leader_step(g_l);
    CHECK(barriers == b0 + 3 && n_props == 1, "LEADER_START waiting a second: one more barrier");
    fence__leader_barrier_done(g_l, FENCE_LST_OK);
    fence__leader_barrier_done(g_l, FENCE_LST_OK);
    fence__leader_step(g_l);
    CHECK(n_props == 1 && !fence__leader_ready(g_l), "the later callbacks start nothing");
    commit(0);
    props_clear();
    CHECK(fence__leader_ready(g_l), "ready once LEADER_START is applied");
    clock_ms += 5000;
    fence__leader_step(g_l);
    CHECK(barriers == b0 + 3, "a ready leader issues no barrier");

    fence__leader_destroy(g_l);
    fence_fsm_destroy(fsm);
    return failures ? 1 : 0;
}
