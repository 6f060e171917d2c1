/* Apply must never depend on the allocator (issue 15, part 1).
 *
 * Two state machines, A and B, are fed the same log entries.  B's allocator
 * fails exactly once, at allocation number k counted from after
 * fence_fsm_create; every k the scenario reaches is tried in turn, each in
 * a forked child.  After every entry the child compares the two replicas'
 * results and snapshots.  A child may end in one of two ways only:
 *
 *   - it aborts with "fatal: out of memory while ..." (the node crash-stops,
 *     as a raft-based system must: a replica that cannot apply an entry may
 *     not answer it differently from the others), or
 *   - it runs to the end with A and B byte-identical all along (the failed
 *     allocation changed nothing observable).
 *
 * A child that finds the replicas different (a LIMIT reply on B where A
 * granted, a token counter that moved on one side only) fails the test:
 * after a failover that divergence grants the same token twice.
 *
 * The scenario reaches every allocation site inside apply: leases, locks,
 * waits and dedup records, hash-table growth (more than 16 of each), the
 * deadline heap's growth (more than 64 objects), the event array's growth
 * (70 events in one call), lock-delay hand-off, ACQUIRE, and a snapshot
 * restored into the live state machines.
 */
#include "../lib/test.h"
#include "test_core_fork.h"

#include <stdbool.h>

#include "core/entry.h"
#include "core/fsm.h"
#include "core/snapshot.h"

/* ---- A counting allocator that fails once -------------------------------- */

/* Counts allocations; fails the one whose number is fail_at. */
typedef struct oom_alloc {
    long count;   /* allocations asked for so far */
    long fail_at; /* the number of the one that fails; < 0: none */
    bool armed;   /* counting (false while the fsm is being created) */
} oom_alloc;

static void *oom_malloc(void *ctx, size_t n)
{
    oom_alloc *a = ctx;
    if (a->armed) {
        long k = a->count++;
        if (k == a->fail_at) {
            return NULL;
        }
    }
    return malloc(n);
}

static void oom_free(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}

/* ---- The scenario ---------------------------------------------------------- */

#define ENTRIES_MAX 32
#define CMDS_MAX 96
#define NAMES 70

/* One step: an entry to apply, or a snapshot of A restored into both. */
typedef struct step {
    bool restore;      /* true: snapshot A, restore into A and B */
    uint8_t *buf;      /* the encoded entry */
    size_t len;        /* its length */
} step;

static step steps[ENTRIES_MAX];
static int nsteps;
static char names[NAMES + 16][8];

/* Batch being built. */
static fence_cmd batch[CMDS_MAX];
static uint32_t nbatch;
static uint64_t next_req = 1000;

static void add(fence_cmd c)
{
    REQUIRE(nbatch < CMDS_MAX);
    batch[nbatch++] = c;
}

/* Add c with a fresh request id (a dedup record). */
static void add_req(fence_cmd c)
{
    c.flags |= FENCE_CMD_F_REQID;
    c.req_id = next_req++;
    add(c);
}

/* Close the batch as one entry with timestamp ts. */
static void entry(uint64_t ts)
{
    REQUIRE(nsteps < ENTRIES_MAX);
    size_t need = fence_entry_size(batch, nbatch);
    uint8_t *buf = malloc(need);
    REQUIRE(buf != NULL);
    REQUIRE(fence_entry_encode(ts, batch, nbatch, buf, need) == need);
    steps[nsteps].restore = false;
    steps[nsteps].buf = buf;
    steps[nsteps].len = need;
    nsteps++;
    nbatch = 0;
}

static void restore_step(void)
{
    REQUIRE(nsteps < ENTRIES_MAX);
    steps[nsteps].restore = true;
    steps[nsteps].buf = NULL;
    nsteps++;
}

static fence_cmd lock_cmd(int name, uint64_t lease, uint64_t wait_ms)
{
    fence_cmd c = {.type = FENCE_CMD_LOCK, .lease = lease, .wait_ms = wait_ms,
                   .name = (const uint8_t *)names[name],
                   .name_len = (uint16_t)strlen(names[name])};
    return c;
}

/* Build every step.  Leases 1 (holder) and 2 (waiter) come first. */
static void build(void)
{
    for (int i = 0; i < NAMES + 16; i++) {
        snprintf(names[i], sizeof(names[i]), "k%02d", i);
    }
    fence_cmd ls = {.type = FENCE_CMD_LEADER_START};
    fence_limits_default(&ls.limits);
    add(ls);
    entry(1);
    /* 20 leases: hash-table growth for leases and dedup records. */
    for (int i = 0; i < 20; i++) {
        fence_cmd g = {.type = FENCE_CMD_LEASE_GRANT, .ttl_ms = 60000};
        add_req(g);
    }
    entry(2);
    /* Lease 1 takes 70 locks: lock table and heap growth. */
    for (int i = 0; i < NAMES; i++) {
        add(lock_cmd(i, 1, 0));
    }
    entry(3);
    /* Lease 2 queues on all 70: wait table and heap growth. */
    for (int i = 0; i < NAMES; i++) {
        add_req(lock_cmd(i, 2, 100));
    }
    entry(4);
    /* All 70 waits time out in one call: the event array grows. */
    fence_cmd tick = {.type = FENCE_CMD_TICK};
    add(tick);
    entry(200);
    /* ACQUIREs: dedicated leases and new locks; one queued on k00. */
    for (int i = 0; i < 10; i++) {
        fence_cmd a = {.type = FENCE_CMD_ACQUIRE, .ttl_ms = 1000,
                       .name = (const uint8_t *)names[NAMES + i],
                       .name_len = (uint16_t)strlen(names[NAMES + i])};
        add_req(a);
    }
    fence_cmd aq = {.type = FENCE_CMD_ACQUIRE, .ttl_ms = 1000, .wait_ms = 500,
                    .name = (const uint8_t *)names[0],
                    .name_len = (uint16_t)strlen(names[0])};
    add_req(aq);
    entry(300);
    /* UNLOCK k00 (token 1): handed to the queued ACQUIRE. */
    fence_cmd u = {.type = FENCE_CMD_UNLOCK, .token = 1,
                   .name = (const uint8_t *)names[0],
                   .name_len = (uint16_t)strlen(names[0])};
    add(u);
    entry(400);
    restore_step();
    /* A short lease with lock-delay takes k80; it expires, the lock sits
     * in lock-delay, and a waiter gets it when the delay ends. */
    fence_cmd sg = {.type = FENCE_CMD_LEASE_GRANT, .ttl_ms = 10,
                    .lock_delay_ms = 50};
    add(sg);
    entry(500);
    add(lock_cmd(NAMES + 10, 32, 0));
    add_req(lock_cmd(NAMES + 10, 3, 1000));
    entry(501);
    add(tick);
    entry(520);
    add(tick);
    entry(600);
    /* Lease 1 is revoked: 69 locks released at once. */
    fence_cmd rv = {.type = FENCE_CMD_LEASE_REVOKE, .lease = 1};
    add_req(rv);
    entry(700);
    /* More locks, waits and dedup records after the restore. */
    for (int i = 0; i < 30; i++) {
        add_req(lock_cmd(i, 4 + (uint64_t)(i % 10), 0));
        add_req(lock_cmd(i, 14 + (uint64_t)(i % 5), 300));
    }
    entry(800);
    restore_step();
    add(tick);
    entry(5000);
}

/* ---- Running it ------------------------------------------------------------ */

/* A malloc'd snapshot of f; its length in *n. */
static uint8_t *snap(const fence_fsm *f, size_t *n)
{
    *n = fence_fsm_snapshot_size(f);
    uint8_t *s = malloc(*n);
    REQUIRE(s != NULL);
    REQUIRE(fence_fsm_snapshot(f, s, *n) == *n);
    return s;
}

/* True when the two replicas' snapshots are byte-identical. */
static bool same_state(const fence_fsm *a, const fence_fsm *b)
{
    size_t na, nb;
    uint8_t *sa = snap(a, &na);
    uint8_t *sb = snap(b, &nb);
    bool same = na == nb && memcmp(sa, sb, na) == 0;
    free(sa);
    free(sb);
    return same;
}

/* True when the events of the last call are the same on both. */
static bool same_events(const fence_fsm *a, const fence_fsm *b)
{
    size_t na, nb;
    const fence_event *ea = fence_fsm_events(a, &na);
    const fence_event *eb = fence_fsm_events(b, &nb);
    return na == nb && (na == 0 || memcmp(ea, eb, na * sizeof(*ea)) == 0);
}

static fence_result ra[CMDS_MAX], rb[CMDS_MAX];

/* Run the scenario on A and B (B fails allocation fail_at).  Returns the
 * number of allocations B made; exits 3 at the first divergence. */
static long run(long fail_at)
{
    oom_alloc aa = {0, -1, false};
    oom_alloc ab = {0, fail_at, false};
    fence_fsm_opts oa = {.alloc = {oom_malloc, oom_free, &aa}, .hash_seed = 1};
    fence_fsm_opts ob = {.alloc = {oom_malloc, oom_free, &ab}, .hash_seed = 2};
    fence_fsm *a = NULL, *b = NULL;
    REQUIRE(fence_fsm_create(&oa, &a) == 0);
    REQUIRE(fence_fsm_create(&ob, &b) == 0);
    ab.armed = true;
    for (int i = 0; i < nsteps; i++) {
        if (steps[i].restore) {
            size_t n;
            uint8_t *s = snap(a, &n);
            int rca = fence_fsm_restore(a, s, n);
            int rcb = fence_fsm_restore(b, s, n);
            free(s);
            REQUIRE(rca == 0);
            (void)rcb; /* compared through the states below */
        } else {
            memset(ra, 0, sizeof(ra));
            memset(rb, 0, sizeof(rb));
            int na = fence_fsm_apply_entry(a, steps[i].buf, steps[i].len, ra,
                                           CMDS_MAX);
            int nb = fence_fsm_apply_entry(b, steps[i].buf, steps[i].len, rb,
                                           CMDS_MAX);
            REQUIRE(na >= 0);
            if (na != nb || memcmp(ra, rb, sizeof(ra)) != 0 ||
                !same_events(a, b)) {
                fprintf(stderr, "allocation %ld failed: step %d answered "
                        "differently on the two replicas\n", fail_at, i);
                _exit(3);
            }
        }
        REQUIRE(fence_fsm_check(a) == NULL);
        if (!same_state(a, b)) {
            fprintf(stderr, "allocation %ld failed: the replicas' states "
                    "differ after step %d\n", fail_at, i);
            _exit(3);
        }
    }
    fence_fsm_destroy(a);
    fence_fsm_destroy(b);
    return ab.count;
}

/* The child's side of one case: the scenario with allocation *arg
 * failing. */
static void child_run(void *arg)
{
    run(*(const long *)arg);
}

/* One case in a child: 'd' diverged (printed when verbose), 'a' aborted
 * with the out-of-memory message, 's' same states to the end, 'x'
 * anything else. */
static char one_case(long k, bool verbose)
{
    char err[512];
    int status = fork_case(child_run, &k, err, sizeof(err));
    if (exited_with(status, 0)) {
        return 's';
    }
    if (exited_with(status, 3)) {
        if (verbose) {
            printf("#   %s", err);
        }
        return 'd';
    }
    if (stopped_for_oom(status, err)) {
        return 'a';
    }
    printf("#   allocation %ld: child ended otherwise (status 0x%x): %s\n", k,
           (unsigned)status, err);
    return 'x';
}

/* Every single allocation failure on one replica either stops it or
 * changes nothing; none makes it answer differently. */
static void test_one_failure_never_diverges(void)
{
    build();
    long total = run(-1);
    REQUIRE(total > 100);
    long diverged = 0, aborted = 0, same = 0, other = 0;
    for (long k = 0; k < total; k++) {
        switch (one_case(k, diverged < 5)) {
        case 'd':
            diverged++;
            break;
        case 'a':
            aborted++;
            break;
        case 's':
            same++;
            break;
        default:
            other++;
            break;
        }
    }
    printf("# %ld allocation points: %ld crash-stopped, %ld harmless, "
           "%ld diverged, %ld other\n", total, aborted, same, diverged, other);
    CHECK_EQ_I64(diverged, 0);
    CHECK_EQ_I64(other, 0);
    for (int i = 0; i < nsteps; i++) {
        free(steps[i].buf);
    }
}

int main(void)
{
    TEST_RUN(test_one_failure_never_diverges);
    return TEST_DONE();
}
