/* Driver of the cluster simulation (see sim.h).
 *
 *   sim                      the make-test run: a few seed groups, one
 *                            "ok"/"not ok" line per group
 *   sim --seeds N [--start S] one line per seed (make sim SEEDS=N)
 *   FENCE_SIM_SEED=n sim     replay one seed (with FENCE_SIM_NODES if the
 *                            failure report gave it)
 *   sim --expect-violation --seeds N
 *                            control run against a core built with a planted
 *                            bug: passes when some seed violates an invariant
 *
 * Other options: --nodes 3|5 (default: 3 for even seeds, 5 for odd),
 * --duration MS (simulated time with faults, default 30000), --clients C,
 * --verbose (faults, leaderships), --trace (also every applied command).
 * Environment: FENCE_SIM_NO_PRE_VOTE=1 turns raft pre-vote off,
 * FENCE_SIM_VOTE_FAULTS=1 lets disk faults hit set_term/set_vote too,
 * FENCE_SIM_DEBUG=1 dumps node and client state when a run does not settle,
 * FENCE_SIM_NO_MEMBERSHIP=1 (or --no-membership) turns the membership
 * changes off (CLUSTER.ADD/REMOVE; sim_member.c), FENCE_SIM_NO_FLOOR=1
 * removes nodes without the voter floor (a control).  Every seed runs in a
 * forked child, so an assert inside raft or
 * the core fails that seed (its number is printed) and not the whole run.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sim.h"

/* This program's path, for the replay line of a failing seed. */
static const char *g_prog = "fence_sim";

/* Options of this driver. */
typedef struct main_opts {
    uint64_t start;        /* first seed */
    uint64_t seeds;        /* number of seeds (0: the make-test groups) */
    unsigned nodes;        /* 0: derived from the seed */
    uint64_t duration_ms;  /* simulated time per seed */
    unsigned clients;      /* clients per run */
    int verbose;           /* trace faults and leaders */
    int expect_violation;  /* control mode */
    int replay;            /* FENCE_SIM_SEED given */
    int membership;        /* membership changes (default on) */
} main_opts;

/* Outcome of one seed as the parent sees it. */
typedef struct seed_outcome {
    int status;              /* 0 ok, 1 invariant violated, 2 crashed */
    fence_sim_result res;    /* what the child reported */
} seed_outcome;

/* Return the cluster size for a seed. */
static unsigned nodes_for(const main_opts *m, uint64_t seed)
{
    if (m->nodes)
        return m->nodes;
    return (seed % 2) ? 5 : 3;
}

/* Run one seed in a forked child (results come back through shared
 * memory); report a crash with the seed so it can be replayed. */
static seed_outcome run_seed(const main_opts *m, uint64_t seed)
{
    seed_outcome out;
    memset(&out, 0, sizeof out);
    fence_sim_result *shared = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE,
                                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) {
        perror("mmap");
        exit(2);
    }
    memset(shared, 0, sizeof *shared);
    fence_sim_opts o;
    memset(&o, 0, sizeof o);
    o.seed = seed;
    o.nodes = nodes_for(m, seed);
    o.duration_ms = m->duration_ms;
    o.clients = m->clients;
    o.verbose = m->verbose;
    o.vote_faults = getenv("FENCE_SIM_VOTE_FAULTS") != NULL;
    o.no_pre_vote = getenv("FENCE_SIM_NO_PRE_VOTE") != NULL;
    o.membership = m->membership;
    o.no_floor = getenv("FENCE_SIM_NO_FLOOR") != NULL;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(2);
    }
    if (pid == 0) {
        int rc = fence_sim_run(&o, shared);
        fflush(stdout);
        fflush(stderr);
        exit(rc ? 3 : 0); /* exit, not _exit: LeakSanitizer runs at exit */
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    out.res = *shared;
    munmap(shared, sizeof *shared);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
        out.status = 0;
    } else if (WIFEXITED(st) && WEXITSTATUS(st) == 3) {
        out.status = 1;
        printf("# seed %" PRIu64 " (%u nodes): invariant violated at step %"
               PRIu64 ", t=%" PRIu64 " ms: %s\n",
               seed, o.nodes, out.res.step, out.res.time_ms, out.res.msg);
        printf("# replay: FENCE_SIM_SEED=%" PRIu64 " FENCE_SIM_NODES=%u "
               "FENCE_SIM_DURATION=%" PRIu64 " %s --verbose%s\n",
               seed, o.nodes, m->duration_ms, g_prog,
               o.membership ? "" : " --no-membership");
    } else {
        out.status = 2;
        printf("# seed %" PRIu64 " (%u nodes): crashed (%s %d)\n", seed,
               o.nodes, WIFSIGNALED(st) ? "signal" : "exit status",
               WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
        printf("# replay: FENCE_SIM_SEED=%" PRIu64 " FENCE_SIM_NODES=%u "
               "FENCE_SIM_DURATION=%" PRIu64 " %s --verbose%s\n",
               seed, o.nodes, m->duration_ms, g_prog,
               o.membership ? "" : " --no-membership");
    }
    fflush(stdout);
    return out;
}

/* Print the counters of a passing seed as a comment line. */
static void print_stats(uint64_t seed, unsigned nodes, int membership,
                        const fence_sim_result *r)
{
    printf("# seed %" PRIu64 " (%u nodes): %" PRIu64 " entries, %" PRIu64
           " grants (%" PRIu64 " acked), %" PRIu64 " acked cmds, %" PRIu64
           " unknown, %" PRIu64 " leaderships, %" PRIu64 " faults, %" PRIu64
           " restarts (%" PRIu64 " crash-stops), snapshots %" PRIu64
           " taken/%" PRIu64 " restored, %" PRIu64 " model adjusts, %" PRIu64
           " forgotten reqids, %" PRIu64 " reads, %" PRIu64 " wait answers, %"
           PRIu64 " disconnects, %" PRIu64 " unknown batches, %" PRIu64
           " steps, %" PRIu64 " shared grants, %" PRIu64 " shared checks\n",
           seed, nodes, r->entries, r->grants, r->acked_grants, r->acked_cmds,
           r->unknown_outcomes, r->leader_terms, r->faults, r->restarts,
           r->crashes, r->snapshots_taken, r->snapshots_restored,
           r->model_adjusts, r->model_forgets, r->reads, r->wait_answers,
           r->disconnects, r->unknown_batches, r->step, r->shared_grants,
           r->shared_checks);
    printf("# seed %" PRIu64 " renewals: %" PRIu64 " answered without an entry, %" PRIu64
           " checkpoints applied, %" PRIu64 " expiries checked against answered renewals\n",
           seed, r->local_renewals, r->checkpoints, r->promise_checks);
    printf("# seed %" PRIu64 " observers: %" PRIu64 " answers checked (%" PRIu64
           " woken by a change), %" PRIu64 " nils, %" PRIu64 " moved to another node\n",
           seed, r->obs_answers, r->obs_woken, r->obs_nils, r->obs_moves);
    if (membership)
        printf("# seed %" PRIu64 " membership: %" PRIu64 " added, %" PRIu64
               " removed, %" PRIu64 " refused by the voter floor (%" PRIu64
               " waited for contact), %" PRIu64 " skipped (1-2 voters), %" PRIu64
               " failed, %" PRIu64 " libraft rollback crash-stops, %" PRIu64
               " libraft left-out-configuration crash-stops\n",
               seed, r->member_adds, r->member_removes, r->floor_refusals,
               r->floor_waits, r->member_skips, r->member_failures,
               r->rollback_crashes, r->conf_crashes);
}

/* Parse an unsigned number or exit with a message. */
static uint64_t num(const char *what, const char *s)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s ? s : "", &end, 10);
    if (s == NULL || *s == '\0' || *end != '\0' || errno) {
        fprintf(stderr, "sim: %s needs a number, got \"%s\"\n", what,
                s ? s : "");
        exit(2);
    }
    return v;
}

/* Parse options, then run the make-test seed groups, a range of seeds,
 * one replayed seed, or the planted-bug control; exit non-zero on any
 * failing seed. */
int main(int argc, char **argv)
{
    main_opts m;
    memset(&m, 0, sizeof m);
    g_prog = argv[0];
    m.start = 1;
    m.duration_ms = 30000;
    m.clients = 8;
    m.membership = getenv("FENCE_SIM_NO_MEMBERSHIP") == NULL;
    const char *env = getenv("FENCE_SIM_DURATION");
    if (env && *env)
        m.duration_ms = num("FENCE_SIM_DURATION", env);
    env = getenv("FENCE_SIM_NODES");
    if (env && *env)
        m.nodes = (unsigned)num("FENCE_SIM_NODES", env);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--seeds")) {
            m.seeds = num(a, v);
            i++;
        } else if (!strcmp(a, "--start")) {
            m.start = num(a, v);
            i++;
        } else if (!strcmp(a, "--nodes")) {
            m.nodes = (unsigned)num(a, v);
            i++;
        } else if (!strcmp(a, "--duration")) {
            m.duration_ms = num(a, v);
            i++;
        } else if (!strcmp(a, "--clients")) {
            m.clients = (unsigned)num(a, v);
            i++;
        } else if (!strcmp(a, "--verbose")) {
            m.verbose = 1;
        } else if (!strcmp(a, "--trace")) {
            m.verbose = 2;
        } else if (!strcmp(a, "--no-membership")) {
            m.membership = 0;
        } else if (!strcmp(a, "--expect-violation")) {
            m.expect_violation = 1;
        } else {
            fprintf(stderr, "usage: %s [--seeds N] [--start S] [--nodes 3|5] "
                            "[--duration MS] [--clients C] [--verbose|--trace] "
                            "[--no-membership] [--expect-violation]\n", argv[0]);
            return 2;
        }
    }
    if (m.nodes != 0 && (m.nodes < 1 || m.nodes > 8)) {
        fprintf(stderr, "sim: --nodes must be 1..8\n");
        return 2;
    }
    env = getenv("FENCE_SIM_SEED");
    if (env && *env) {
        m.start = num("FENCE_SIM_SEED", env);
        m.seeds = 1;
        m.replay = 1;
    }

    if (m.expect_violation) {
        uint64_t n = m.seeds ? m.seeds : 40;
        for (uint64_t seed = m.start; seed < m.start + n; seed++) {
            seed_outcome o = run_seed(&m, seed);
            if (o.status == 1) {
                printf("ok - planted bug caught by seed %" PRIu64 ": %s\n",
                       seed, o.res.msg);
                return 0;
            }
            if (o.status == 2) {
                printf("not ok - seed %" PRIu64 " crashed instead of "
                       "reporting a violation\n", seed);
                return 1;
            }
        }
        printf("not ok - planted bug not caught in %" PRIu64 " seeds from %"
               PRIu64 "\n", n, m.start);
        return 1;
    }

    if (m.seeds) {
        /* One line per seed. */
        int failed = 0;
        for (uint64_t seed = m.start; seed < m.start + m.seeds; seed++) {
            seed_outcome o = run_seed(&m, seed);
            if (o.status == 0)
                print_stats(seed, nodes_for(&m, seed), m.membership, &o.res);
            printf("%s - sim seed %" PRIu64 " (%u nodes)\n",
                   o.status ? "not ok" : "ok", seed, nodes_for(&m, seed));
            failed |= o.status != 0;
        }
        return failed;
    }

    /* The make-test run: groups of seeds, one line per group. */
    static const struct {
        unsigned nodes;   /* cluster size */
        uint64_t start;   /* first seed */
        uint64_t count;   /* seeds */
        int membership;   /* membership changes on (the regression seeds
                             replay histories from before they existed) */
    } groups[] = {
        {3, 1, 20, 1},
        {5, 1001, 20, 1},
        {3, 2001, 15, 1},
        {5, 3001, 15, 1},
        /* Regression: the lease model treated the retry of an ACQUIRE whose
         * wait a CANCEL had failed (in the same entry) as a duplicate; the
         * core forgets such a request id, so the retry queued afresh. */
        {5, 1463, 1, 0},
        /* Regression: a LOCK that joined a wait kept its request id's
         * record QUEUED after the wait was cancelled (wait 27); its
         * retries got QUEUED for a wait that was gone. */
        {3, 900, 1, 0},
    };
    int failed = 0;
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
        main_opts gm = m;
        gm.nodes = groups[g].nodes;
        gm.membership = m.membership && groups[g].membership;
        int gfail = 0;
        uint64_t entries = 0, grants = 0, restarts = 0;
        for (uint64_t seed = groups[g].start;
             seed < groups[g].start + groups[g].count; seed++) {
            seed_outcome o = run_seed(&gm, seed);
            if (o.status == 0) {
                print_stats(seed, gm.nodes, gm.membership, &o.res);
                entries += o.res.entries;
                grants += o.res.grants;
                restarts += o.res.restarts;
            }
            gfail |= o.status != 0;
        }
        printf("%s - sim %u nodes, seeds %" PRIu64 "..%" PRIu64 " (%" PRIu64
               " entries, %" PRIu64 " grants, %" PRIu64 " restarts%s)\n",
               gfail ? "not ok" : "ok", gm.nodes, groups[g].start,
               groups[g].start + groups[g].count - 1, entries, grants,
               restarts, gm.membership ? ", membership changes" : "");
        fflush(stdout);
        failed |= gfail;
    }
    return failed;
}
