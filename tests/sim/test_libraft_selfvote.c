/* A minimal raft_fixture reproduction of a libraft 0.15 liveness bug the
 * simulation found (docs/cluster.md, libraft pitfalls, 5; docs/testing.md,
 * "Known findings"): a follower that wins an election while its write of an
 * entry it received as a follower is still in flight does not count itself
 * for that entry once the write completes after its own first append.
 * With 2 voters its own vote is needed, so its barrier never commits.
 *
 * Two voters; server 1's disk is slow for one entry E it gets from leader 0;
 * the link is cut until server 0 steps down and server 1 campaigns, then
 * healed, so server 1 wins while E's write is pending; its barrier's write
 * (fast disk again) completes first, E's later.  The test prints what
 * libraft 0.15 does (the barrier stays uncommitted although server 0 has
 * it) and that one more append (a second barrier) unsticks it.  If libraft
 * ever fixes this, the "stalls" line turns into "not ok": update the
 * pitfall then. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <raft.h>
#include <raft/fixture.h>

static int failures;

#define CHECK(cond, what)                                                   \
    do {                                                                    \
        if (cond) {                                                         \
            printf("ok - %s\n", what);                                      \
        } else {                                                            \
            printf("not ok - %s (line %d)\n", what, __LINE__);              \
            failures++;                                                     \
        }                                                                   \
    } while (0)

/* A state machine that applies nothing. */
static int fsm_apply(struct raft_fsm *fsm, const struct raft_buffer *buf, void **result)
{
    (void)fsm;
    (void)buf;
    *result = NULL;
    return 0;
}

static int fsm_snapshot(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *n)
{
    (void)fsm;
    *bufs = raft_malloc(sizeof **bufs);
    if (*bufs == NULL)
        return RAFT_NOMEM;
    (*bufs)[0].len = 8;
    (*bufs)[0].base = raft_calloc(1, 8);
    *n = 1;
    return (*bufs)[0].base == NULL ? RAFT_NOMEM : 0;
}

static int fsm_restore(struct raft_fsm *fsm, struct raft_buffer *buf)
{
    (void)fsm;
    raft_free(buf->base);
    return 0;
}

static bool barrier_done[2];

static void barrier_cb(struct raft_barrier *req, int status)
{
    int *k = req->data;
    if (status == 0)
        barrier_done[*k] = true;
}

static void apply_cb(struct raft_apply *req, int status, void *result)
{
    (void)req;
    (void)status;
    (void)result;
}

/* Stop conditions for raft_fixture_step_until. */
static bool got_entry(struct raft_fixture *f, void *arg)
{
    raft_index *want = arg;
    return raft_last_index(raft_fixture_get(f, 1)) >= *want;
}

static bool is_leader_1(struct raft_fixture *f, void *arg)
{
    (void)arg;
    return raft_state(raft_fixture_get(f, 1)) == RAFT_LEADER;
}

static bool barrier_committed(struct raft_fixture *f, void *arg)
{
    (void)f;
    int *k = arg;
    return barrier_done[*k];
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    struct raft_fixture f;
    struct raft_fsm fsms[2];
    memset(fsms, 0, sizeof fsms);
    if (raft_fixture_initialize(&f) != 0)
        return 2;
    for (unsigned i = 0; i < 2; i++) {
        fsms[i].version = 1;
        fsms[i].apply = fsm_apply;
        fsms[i].snapshot = fsm_snapshot;
        fsms[i].restore = fsm_restore;
        if (raft_fixture_grow(&f, &fsms[i]) != 0)
            return 2;
    }
    struct raft_configuration conf;
    if (raft_fixture_configuration(&f, 2, &conf) != 0 || raft_fixture_bootstrap(&f, &conf) != 0)
        return 2;
    raft_configuration_close(&conf);
    if (raft_fixture_start(&f) != 0)
        return 2;
    raft_fixture_elect(&f, 0);
    struct raft *r0 = raft_fixture_get(&f, 0), *r1 = raft_fixture_get(&f, 1);
    CHECK(raft_state(r0) == RAFT_LEADER, "server 0 leads two voters");

    /* Entry E: server 1 receives it, but its disk takes 5 s to store it. */
    raft_fixture_set_disk_latency(&f, 1, 5000);
    raft_fixture_set_randomized_election_timeout(&f, 0, 20000); /* 0 never campaigns */
    struct raft_apply areq;
    struct raft_buffer buf = {.base = raft_calloc(1, 8), .len = 8};
    if (raft_apply(r0, &areq, &buf, 1, apply_cb) != 0)
        return 2;
    raft_index e = raft_last_index(r0);
    CHECK(raft_fixture_step_until(&f, got_entry, &e, 1000),
          "server 1 has entry E in memory, its write in flight");
    raft_fixture_set_disk_latency(&f, 1, 10); /* later writes are fast */
    raft_index stored_e = r1->last_stored;

    /* Cut the link until server 0 steps down and server 1 campaigns; heal;
     * server 1 wins while E's write is still pending. */
    raft_fixture_saturate(&f, 0, 1);
    raft_fixture_saturate(&f, 1, 0);
    raft_fixture_step_until_elapsed(&f, 2500);
    raft_fixture_desaturate(&f, 0, 1);
    raft_fixture_desaturate(&f, 1, 0);
    CHECK(raft_fixture_step_until(&f, is_leader_1, NULL, 2000) && stored_e < e &&
              r1->last_stored < e,
          "server 1 wins the election before its write of E completes");

    /* Its barrier: stored at once, E's write completes 5 s after it went. */
    int k0 = 0, k1 = 1;
    struct raft_barrier b0, b1;
    b0.data = &k0;
    b1.data = &k1;
    CHECK(raft_barrier(r1, &b0, barrier_cb) == 0, "the new leader appends its barrier");
    raft_index bi = raft_last_index(r1);
    bool committed = raft_fixture_step_until(&f, barrier_committed, &k0, 10000);
    unsigned self = 1; /* server 1's position in the configuration */
    printf("# leader: last_stored %llu, own match_index %llu, server 0 match_index %llu, "
           "commit %llu, barrier at %llu\n",
           (unsigned long long)r1->last_stored,
           (unsigned long long)r1->leader_state.progress[self].match_index,
           (unsigned long long)r1->leader_state.progress[0].match_index,
           (unsigned long long)r1->commit_index, (unsigned long long)bi);
    CHECK(!committed && raft_state(r1) == RAFT_LEADER && r1->last_stored >= bi &&
              r1->leader_state.progress[0].match_index >= bi &&
              r1->leader_state.progress[self].match_index < bi,
          "libraft 0.15 stalls: both voters stored the barrier, the leader does not count "
          "itself, nothing commits for 10 s");

    /* The workaround: one more append makes the leader count itself. */
    CHECK(raft_barrier(r1, &b1, barrier_cb) == 0, "a second barrier is appended");
    CHECK(raft_fixture_step_until(&f, barrier_committed, &k1, 2000) && barrier_done[0],
          "... and both barriers commit");

    raft_fixture_close(&f);
    return failures ? 1 : 0;
}
