/* Unit tests of libfence-guard: the admission rule, names, many fences,
 * reopen, limits, the protected-write path, compaction and a thread race. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "fence_guard.h"
#include "../lib/test.h"

/* Make a fresh temporary directory for one guard. */
static char *tmpdir(void)
{
    static char path[64];
    snprintf(path, sizeof(path), "/tmp/fence-guard-test.XXXXXX");
    REQUIRE(mkdtemp(path) != NULL);
    return path;
}

/* Remove a guard directory made by tmpdir (its files are known). */
static void rmdir_guard(const char *dir)
{
    char p[256];
    const char *files[] = {"fence-guard.log", "fence-guard.lock",
                           "fence-guard.log.tmp"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(p, sizeof(p), "%s/%s", dir, files[i]);
        unlink(p);
    }
    rmdir(dir);
}

/* Open a guard that must open. */
static fence_guard *must_open(const char *dir, const fence_guard_opts *o)
{
    fence_guard *g = NULL;
    int rc = fence_guard_open(dir, o, &g);
    if (rc != 0)
        printf("#   open %s: %s: %s\n", dir, fence_guard_strerror(rc),
               fence_guard_errmsg(g));
    REQUIRE(rc == 0);
    return g;
}

/* Admit with a C-string name. */
static int admit(fence_guard *g, const char *name, uint64_t t, uint64_t *high)
{
    return fence_guard_admit(g, name, strlen(name), t, high);
}

/* Read a mark with a C-string name. */
static uint64_t high_of(fence_guard *g, const char *name)
{
    uint64_t h = 12345;
    REQUIRE(fence_guard_high(g, name, strlen(name), &h) == 0);
    return h;
}

/* The rule: admit iff T >= high; equal admitted; stale reports the mark. */
static void test_rule(void)
{
    char *dir = tmpdir();
    fence_guard *g = must_open(dir, NULL);
    uint64_t h = 0;
    CHECK_EQ_U64(high_of(g, "orders"), 0);
    CHECK(admit(g, "orders", 33, &h) == 0);
    CHECK_EQ_U64(h, 33);
    CHECK(admit(g, "orders", 34, &h) == 0);
    CHECK_EQ_U64(h, 34);
    h = 0;
    CHECK(admit(g, "orders", 33, &h) == FENCE_GUARD_ESTALE);
    CHECK_EQ_U64(h, 34);
    fence_guard_stats before;
    fence_guard_stats_get(g, &before);
    CHECK(admit(g, "orders", 34, &h) == 0); /* equal token */
    CHECK(admit(g, "orders", 34, NULL) == 0);
    fence_guard_stats after;
    fence_guard_stats_get(g, &after);
    CHECK_EQ_U64(after.syncs, before.syncs); /* already durable: no fsync */
    CHECK_EQ_U64(high_of(g, "orders"), 34);
    CHECK(admit(g, "other", 1, &h) == 0); /* fences are independent */
    CHECK_EQ_U64(high_of(g, "other"), 1);
    CHECK(admit(g, "orders", 0, &h) == FENCE_GUARD_ESTALE);
    CHECK(admit(g, "zero", 0, &h) == 0); /* 0 >= 0 */
    CHECK(admit(g, "max", UINT64_MAX, &h) == 0);
    CHECK(admit(g, "max", UINT64_MAX - 1, &h) == FENCE_GUARD_ESTALE);
    CHECK_EQ_U64(h, UINT64_MAX);
    fence_guard_stats st;
    fence_guard_stats_get(g, &st);
    CHECK_EQ_U64(st.rejected_stale, 3);
    CHECK_EQ_U64(st.admitted, 7);
    CHECK_EQ_U64(st.fences, 4);
    fence_guard_close(g);
    g = must_open(dir, NULL);
    CHECK_EQ_U64(high_of(g, "orders"), 34);
    CHECK_EQ_U64(high_of(g, "max"), UINT64_MAX);
    CHECK(admit(g, "orders", 33, &h) == FENCE_GUARD_ESTALE);
    fence_guard_close(g);
    rmdir_guard(dir);
}

/* Names are 1..256 arbitrary bytes; bad arguments get EINVAL and a message. */
static void test_names(void)
{
    char *dir = tmpdir();
    fence_guard *g = must_open(dir, NULL);
    char name[300];
    memset(name, 'n', sizeof(name));
    uint64_t h;
    CHECK(fence_guard_admit(g, name, 0, 1, &h) == FENCE_GUARD_EINVAL);
    CHECK(strstr(fence_guard_errmsg(g), "1..256") != NULL);
    CHECK(fence_guard_admit(g, name, 257, 1, &h) == FENCE_GUARD_EINVAL);
    CHECK(fence_guard_admit(g, NULL, 3, 1, &h) == FENCE_GUARD_EINVAL);
    CHECK(fence_guard_admit(NULL, name, 3, 1, &h) == FENCE_GUARD_EINVAL);
    CHECK(fence_guard_high(g, name, 0, &h) == FENCE_GUARD_EINVAL);
    CHECK(fence_guard_admit(g, name, 256, 9, &h) == 0);
    CHECK(fence_guard_admit(g, name, 255, 3, &h) == 0); /* a different fence */
    const char bin[] = {'a', 0, 'b', '\n', (char)0xff};
    CHECK(fence_guard_admit(g, bin, sizeof(bin), 5, &h) == 0);
    CHECK(fence_guard_admit(g, bin, 1, 2, &h) == 0); /* "a" differs from bin */
    fence_guard_close(g);
    g = must_open(dir, NULL);
    CHECK(fence_guard_high(g, name, 256, &h) == 0);
    CHECK_EQ_U64(h, 9);
    CHECK(fence_guard_high(g, name, 255, &h) == 0);
    CHECK_EQ_U64(h, 3);
    CHECK(fence_guard_high(g, bin, sizeof(bin), &h) == 0);
    CHECK_EQ_U64(h, 5);
    CHECK(fence_guard_high(g, bin, 1, &h) == 0);
    CHECK_EQ_U64(h, 2);
    fence_guard_close(g);
    rmdir_guard(dir);
}

/* Many fences with random tokens survive close/reopen exactly. */
static void test_many_fences_reopen(void)
{
    enum { N = 600 };
    static uint64_t want[N];
    char *dir = tmpdir();
    fence_guard *g = must_open(dir, NULL);
    srand(7);
    char name[32];
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i += 1 + rand() % 3) {
            snprintf(name, sizeof(name), "fence-%d", i);
            uint64_t t = (uint64_t)rand() % 100000;
            uint64_t h = 0;
            int rc = admit(g, name, t, &h);
            if (t >= want[i]) {
                CHECK(rc == 0);
                want[i] = t;
            } else {
                CHECK(rc == FENCE_GUARD_ESTALE);
                CHECK_EQ_U64(h, want[i]);
            }
        }
    }
    fence_guard_close(g);
    g = must_open(dir, NULL);
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "fence-%d", i);
        CHECK_EQ_U64(high_of(g, name), want[i]);
    }
    fence_guard_close(g);
    rmdir_guard(dir);
}

/* fences_max bounds memory, both when admitting and when reopening. */
static void test_fences_max(void)
{
    char *dir = tmpdir();
    fence_guard_opts o;
    fence_guard_opts_default(&o);
    o.fences_max = 10;
    fence_guard *g = must_open(dir, &o);
    char name[16];
    for (int i = 0; i < 10; i++) {
        snprintf(name, sizeof(name), "f%d", i);
        CHECK(admit(g, name, 1, NULL) == 0);
    }
    CHECK(admit(g, "one-too-many", 1, NULL) == FENCE_GUARD_EFULL);
    CHECK(strstr(fence_guard_errmsg(g), "fences_max") != NULL);
    CHECK(admit(g, "f3", 2, NULL) == 0); /* known fences still work */
    fence_guard_close(g);
    o.fences_max = 5;
    g = NULL;
    CHECK(fence_guard_open(dir, &o, &g) == FENCE_GUARD_EFULL);
    CHECK(strstr(fence_guard_errmsg(g), "fences_max") != NULL);
    CHECK(admit(g, "f1", 9, NULL) == FENCE_GUARD_EFAILED);
    fence_guard_close(g);
    o.fences_max = 0;
    CHECK(fence_guard_open(dir, &o, &g) == FENCE_GUARD_EINVAL);
    fence_guard_close(g);
    rmdir_guard(dir);
}

/* State for the protected-write callback. */
typedef struct write_ctx {
    int calls;   /* times the callback ran */
    int fail;    /* make the callback fail */
} write_ctx;

/* A protected write that counts calls and fails on request. */
static int write_cb(void *arg)
{
    write_ctx *w = arg;
    w->calls++;
    return w->fail ? -1 : 0;
}

/* admit_run: fn runs only when admitted; a failed fn leaves the mark (also
 * on disk) where it was. */
static void test_admit_run(void)
{
    char *dir = tmpdir();
    fence_guard *g = must_open(dir, NULL);
    write_ctx w = {0, 0};
    uint64_t h;
    CHECK(fence_guard_admit_run(g, "k", 1, 10, write_cb, &w, &h) == 0);
    CHECK_EQ_U64(w.calls, 1);
    CHECK(fence_guard_admit_run(g, "k", 1, 9, write_cb, &w, &h) ==
          FENCE_GUARD_ESTALE);
    CHECK_EQ_U64(w.calls, 1);
    CHECK_EQ_U64(h, 10);
    CHECK(fence_guard_admit_run(g, "k", 1, 10, write_cb, &w, &h) == 0);
    CHECK_EQ_U64(w.calls, 2);
    w.fail = 1;
    CHECK(fence_guard_admit_run(g, "k", 1, 20, write_cb, &w, &h) ==
          FENCE_GUARD_EWRITE);
    CHECK_EQ_U64(w.calls, 3);
    CHECK_EQ_U64(high_of(g, "k"), 10);
    CHECK(fence_guard_admit_run(g, "new", 3, 5, write_cb, &w, &h) ==
          FENCE_GUARD_EWRITE);
    CHECK_EQ_U64(high_of(g, "new"), 0);
    fence_guard_close(g);
    g = must_open(dir, NULL);
    CHECK_EQ_U64(high_of(g, "k"), 10);
    CHECK_EQ_U64(high_of(g, "new"), 0);
    CHECK(admit(g, "k", 15, &h) == 0);
    fence_guard_close(g);
    rmdir_guard(dir);
}

/* A second guard on the same directory is refused (EBUSY), even in the
 * same process; a missing directory is a clear EIO. */
static void test_busy_and_missing(void)
{
    char *dir = tmpdir();
    fence_guard *g = must_open(dir, NULL);
    fence_guard *g2 = NULL;
    CHECK(fence_guard_open(dir, NULL, &g2) == FENCE_GUARD_EBUSY);
    CHECK(strstr(fence_guard_errmsg(g2), "locked") != NULL);
    fence_guard_close(g2);
    fence_guard_close(g);
    g = must_open(dir, NULL); /* free again after close */
    fence_guard_close(g);
    char missing[128];
    snprintf(missing, sizeof(missing), "%s/missing/dir", dir);
    CHECK(fence_guard_open(missing, NULL, &g2) == FENCE_GUARD_EIO);
    CHECK(strstr(fence_guard_errmsg(g2), missing) != NULL);
    fence_guard_close(g2);
    CHECK(fence_guard_open(NULL, NULL, &g2) == FENCE_GUARD_EINVAL);
    fence_guard_close(g2);
    fence_guard_close(NULL);
    rmdir_guard(dir);
}

/* Every code has its own text; unknown codes say so. */
static void test_strerror(void)
{
    CHECK_STR(fence_guard_strerror(0), "success");
    CHECK(strstr(fence_guard_strerror(FENCE_GUARD_ESTALE), "older") != NULL);
    CHECK(strstr(fence_guard_strerror(FENCE_GUARD_ECORRUPT), "corrupt") !=
          NULL);
    CHECK_STR(fence_guard_strerror(12345), "unknown error");
    for (int rc = FENCE_GUARD__ERRNO_BASE + 1; rc < FENCE_GUARD__ERRNO_END;
         rc++)
        CHECK(strcmp(fence_guard_strerror(rc), "unknown error") != 0);
}

/* The log is compacted when it outgrows its live marks, and the marks are
 * the same after reopening the compacted log. */
static void test_compaction(void)
{
    char *dir = tmpdir();
    fence_guard_opts o;
    fence_guard_opts_default(&o);
    o.compact_min_bytes = 2048;
    fence_guard *g = must_open(dir, &o);
    for (uint64_t t = 1; t <= 500; t++)
        CHECK(admit(g, t % 2 ? "odd" : "even", t, NULL) == 0);
    fence_guard_stats st;
    fence_guard_stats_get(g, &st);
    CHECK(st.compactions > 0);
    CHECK(st.log_bytes < 4096);
    CHECK_EQ_U64(st.syncs, 500);
    fence_guard_close(g);
    g = must_open(dir, &o);
    CHECK_EQ_U64(high_of(g, "odd"), 499);
    CHECK_EQ_U64(high_of(g, "even"), 500);
    fence_guard_close(g);
    rmdir_guard(dir);
}

/* ---- The thread race ------------------------------------------------------ */

enum { RACE_THREADS = 12, RACE_FENCES = 3, RACE_OPS = 400, RACE_LOG = 8192 };

/* Shared state of the race. */
typedef struct race {
    fence_guard *g;                         /* the guard under test */
    uint64_t order[RACE_FENCES][RACE_LOG];  /* tokens in admission order */
    atomic_uint n[RACE_FENCES];             /* entries in order[f] */
    atomic_int in_fn[RACE_FENCES];          /* threads inside fn for f */
    atomic_int violations;                  /* problems seen by threads */
    uint64_t max_admitted[RACE_THREADS][RACE_FENCES]; /* per thread */
} race;

/* Argument of the protected write in the race. */
typedef struct race_write {
    race *r;        /* shared state */
    int f;          /* fence index */
    uint64_t token; /* token being admitted */
} race_write;

/* The protected write: logs the token in admission order and checks that
 * no other thread is inside the same fence at the same time. */
static int race_cb(void *arg)
{
    race_write *w = arg;
    race *r = w->r;
    if (atomic_fetch_add(&r->in_fn[w->f], 1) != 0)
        atomic_fetch_add(&r->violations, 1);
    unsigned i = atomic_fetch_add(&r->n[w->f], 1);
    if (i < RACE_LOG)
        r->order[w->f][i] = w->token;
    atomic_fetch_sub(&r->in_fn[w->f], 1);
    return 0;
}

/* Thread body for the race. */
typedef struct race_arg {
    race *r;   /* shared state */
    int id;    /* thread number */
} race_arg;

/* Admit random tokens on random fences; check each answer is consistent. */
static void *race_thread(void *p)
{
    race_arg *a = p;
    race *r = a->r;
    unsigned seed = (unsigned)a->id * 7919u + 1;
    static const char *names[RACE_FENCES] = {"alpha", "beta", "gamma"};
    for (int i = 0; i < RACE_OPS; i++) {
        int f = rand_r(&seed) % RACE_FENCES;
        uint64_t t = (uint64_t)(rand_r(&seed) % 40) + (uint64_t)i * 10;
        race_write w = {r, f, t};
        uint64_t h = 0;
        int rc = fence_guard_admit_run(r->g, names[f], strlen(names[f]), t,
                                       race_cb, &w, &h);
        if (rc == 0) {
            if (h != t)
                atomic_fetch_add(&r->violations, 1);
            if (t > r->max_admitted[a->id][f])
                r->max_admitted[a->id][f] = t;
        } else if (rc == FENCE_GUARD_ESTALE) {
            if (!(h > t))
                atomic_fetch_add(&r->violations, 1);
        } else {
            atomic_fetch_add(&r->violations, 1);
        }
    }
    return NULL;
}

/* Many threads admit random tokens: per fence, the admitted tokens form a
 * non-decreasing sequence (the mark never goes backwards and no stale token
 * gets in), and the final mark is the largest admitted token. */
static void test_thread_race(void)
{
    char *dir = tmpdir();
    fence_guard_opts o;
    fence_guard_opts_default(&o);
    o.compact_min_bytes = 2048; /* compact during the race too */
    static race r;
    r.g = must_open(dir, &o);
    pthread_t th[RACE_THREADS];
    race_arg args[RACE_THREADS];
    for (int i = 0; i < RACE_THREADS; i++) {
        args[i] = (race_arg){&r, i};
        REQUIRE(pthread_create(&th[i], NULL, race_thread, &args[i]) == 0);
    }
    for (int i = 0; i < RACE_THREADS; i++)
        pthread_join(th[i], NULL);
    CHECK_EQ_U64(atomic_load(&r.violations), 0);
    static const char *names[RACE_FENCES] = {"alpha", "beta", "gamma"};
    uint64_t total = 0;
    for (int f = 0; f < RACE_FENCES; f++) {
        unsigned n = atomic_load(&r.n[f]);
        REQUIRE(n <= RACE_LOG);
        total += n;
        int backwards = 0;
        for (unsigned i = 1; i < n; i++)
            if (r.order[f][i] < r.order[f][i - 1])
                backwards++;
        CHECK_EQ_U64(backwards, 0);
        uint64_t max = 0;
        for (int t = 0; t < RACE_THREADS; t++)
            if (r.max_admitted[t][f] > max)
                max = r.max_admitted[t][f];
        CHECK_EQ_U64(high_of(r.g, names[f]), max);
        if (n > 0)
            CHECK_EQ_U64(r.order[f][n - 1], max);
    }
    fence_guard_stats st;
    fence_guard_stats_get(r.g, &st);
    CHECK_EQ_U64(st.admitted, total);
    CHECK_EQ_U64(st.admitted + st.rejected_stale,
                 (uint64_t)RACE_THREADS * RACE_OPS);
    printf("#   race: %" PRIu64 " admitted, %" PRIu64 " stale, %" PRIu64
           " fsyncs, %" PRIu64 " compactions\n", st.admitted,
           st.rejected_stale, st.syncs, st.compactions);
    uint64_t marks[RACE_FENCES];
    for (int f = 0; f < RACE_FENCES; f++)
        marks[f] = high_of(r.g, names[f]);
    fence_guard_close(r.g);
    fence_guard *g = must_open(dir, &o);
    for (int f = 0; f < RACE_FENCES; f++)
        CHECK_EQ_U64(high_of(g, names[f]), marks[f]);
    fence_guard_close(g);
    rmdir_guard(dir);
}

/* Many threads on many different fences: they share fsyncs (group commit),
 * so fewer fsyncs than admits are needed. */
static void *spread_thread(void *p)
{
    race_arg *a = p;
    char name[32];
    for (int i = 1; i <= 200; i++) {
        snprintf(name, sizeof(name), "t%d-f%d", a->id, i % 5);
        if (fence_guard_admit(a->r->g, name, strlen(name), (uint64_t)i,
                              NULL) != 0)
            atomic_fetch_add(&a->r->violations, 1);
    }
    return NULL;
}

/* Different fences proceed in parallel and never interfere. */
static void test_group_commit(void)
{
    char *dir = tmpdir();
    static race r;
    r.g = must_open(dir, NULL);
    pthread_t th[8];
    race_arg args[8];
    for (int i = 0; i < 8; i++) {
        args[i] = (race_arg){&r, i};
        REQUIRE(pthread_create(&th[i], NULL, spread_thread, &args[i]) == 0);
    }
    for (int i = 0; i < 8; i++)
        pthread_join(th[i], NULL);
    CHECK_EQ_U64(atomic_load(&r.violations), 0);
    fence_guard_stats st;
    fence_guard_stats_get(r.g, &st);
    CHECK_EQ_U64(st.admitted, 1600);
    CHECK(st.syncs <= 1600);
    printf("#   group commit: 1600 admits in %" PRIu64 " fsyncs\n", st.syncs);
    fence_guard_close(r.g);
    fence_guard *g = must_open(dir, NULL);
    CHECK_EQ_U64(high_of(g, "t3-f0"), 200);
    CHECK_EQ_U64(high_of(g, "t7-f4"), 199);
    fence_guard_close(g);
    rmdir_guard(dir);
}

/* A failed disk write (here: the file-size limit, EFBIG) is returned as
 * EIO to the caller, leaves the mark where it was, and makes the guard
 * unusable from then on (EFAILED) instead of running on a file that may be
 * behind.  The host process is not aborted. */
static void test_disk_error_is_sticky(void)
{
    char *dir = tmpdir();
    fence_guard *g = must_open(dir, NULL);
    CHECK(admit(g, "d", 1, NULL) == 0);
    fence_guard_stats st;
    fence_guard_stats_get(g, &st);
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {(rlim_t)st.log_bytes + 100, (rlim_t)st.log_bytes + 100};
    REQUIRE(setrlimit(RLIMIT_FSIZE, &rl) == 0);
    int rc = 0;
    uint64_t t = 2;
    while (rc == 0 && t < 100)
        rc = admit(g, "d", t++, NULL);
    CHECK(rc == FENCE_GUARD_EIO);
    printf("#   %s\n", fence_guard_errmsg(g));
    CHECK(strstr(fence_guard_errmsg(g), "unusable") != NULL);
    uint64_t h;
    CHECK(admit(g, "d", 1000, NULL) == FENCE_GUARD_EFAILED);
    CHECK(admit(g, "other", 1, NULL) == FENCE_GUARD_EFAILED);
    CHECK(fence_guard_high(g, "d", 1, &h) == FENCE_GUARD_EFAILED);
    fence_guard_close(g);
    rl.rlim_cur = rl.rlim_max = RLIM_INFINITY;
    setrlimit(RLIMIT_FSIZE, &rl); /* may fail (lowering is one-way): fine */
    rmdir_guard(dir);
}

int main(void)
{
    TEST_RUN(test_rule);
    TEST_RUN(test_names);
    TEST_RUN(test_many_fences_reopen);
    TEST_RUN(test_fences_max);
    TEST_RUN(test_admit_run);
    TEST_RUN(test_busy_and_missing);
    TEST_RUN(test_strerror);
    TEST_RUN(test_compaction);
    TEST_RUN(test_thread_race);
    TEST_RUN(test_group_commit);
    TEST_RUN(test_disk_error_is_sticky);
    return TEST_DONE();
}
