/* Crash safety of libfence-guard: a child process admits increasing tokens
 * (from several threads, so group commit is exercised) and reports every
 * acknowledged one through a pipe; the parent SIGKILLs it at a random
 * moment, reopens the guard and checks that every mark is >= the last
 * acknowledged token and that no lower token is admitted.  Repeated many
 * times on the same directory, so recovery of torn tails is exercised. */
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>

#include "fence_guard.h"
#include "guard/format.h"
#include "../lib/test.h"

enum { FENCES = 3, ROUNDS_DEFAULT = 40 };

static const char *names[FENCES] = {"crash-a", "crash-b", "crash-c"};

/* One acknowledgement sent by the child: fence index and token. */
typedef struct ack {
    uint64_t fence;  /* index into names */
    uint64_t token;  /* acknowledged token */
} ack;

/* The child's per-thread state. */
typedef struct child_thread {
    fence_guard *g; /* the guard */
    int f;          /* fence this thread admits on */
    int fd;         /* pipe to the parent */
} child_thread;

/* Admit ever larger tokens on one fence and report each acknowledged one.
 * Each thread owns its fence, so its tokens increase. */
static void *child_loop(void *p)
{
    child_thread *c = p;
    uint64_t t = 0;
    REQUIRE(fence_guard_high(c->g, names[c->f], strlen(names[c->f]), &t) ==
            0);
    unsigned seed = (unsigned)getpid() * 31u + (unsigned)c->f;
    for (;;) {
        t += 1 + (uint64_t)(rand_r(&seed) % 3);
        uint64_t h;
        int rc = fence_guard_admit(c->g, names[c->f], strlen(names[c->f]), t,
                                   &h);
        if (rc != 0)
            _exit(3);
        ack a = {(uint64_t)c->f, t};
        if (write(c->fd, &a, sizeof(a)) != (ssize_t)sizeof(a))
            _exit(4);
    }
    return NULL;
}

/* The child: open the guard, run one admitting thread per fence. */
static void child_main(const char *dir, int fd)
{
    fence_guard_opts o;
    fence_guard_opts_default(&o);
    o.compact_min_bytes = 8192; /* compact often, so kills hit compaction */
    fence_guard *g = NULL;
    if (fence_guard_open(dir, &o, &g) != 0) {
        fprintf(stderr, "child open: %s\n", fence_guard_errmsg(g));
        _exit(2);
    }
    child_thread th[FENCES];
    pthread_t tid[FENCES];
    for (int f = 0; f < FENCES; f++) {
        th[f] = (child_thread){g, f, fd};
        if (pthread_create(&tid[f], NULL, child_loop, &th[f]) != 0)
            _exit(5);
    }
    for (;;)
        pause();
}

/* Simulate what a power cut can add after a kill: the unacknowledged last
 * append torn (a prefix of a frame) or blocks allocated but never written
 * (zeros).  Neither may be taken for data, and neither may stop the open. */
static void add_torn_tail(const char *dir)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/fence-guard.log", dir);
    FILE *f = fopen(path, "ab");
    REQUIRE(f != NULL);
    unsigned char buf[FENCE__GUARD_FRAME_HDR + FENCE__GUARD_REC_MAX + 4096];
    size_t n;
    if (rand() % 2) {
        size_t plen = fence__guard_rec_encode(buf + FENCE__GUARD_FRAME_HDR,
                                              names[0], strlen(names[0]),
                                              UINT64_MAX / 2);
        fence__guard_frame_header(buf, buf + FENCE__GUARD_FRAME_HDR, plen);
        n = (size_t)rand() % (FENCE__GUARD_FRAME_HDR + plen); /* a prefix */
    } else {
        n = 1 + (size_t)rand() % 4096;
        memset(buf, 0, n);
    }
    REQUIRE(fwrite(buf, 1, n, f) == n);
    fclose(f);
}

/* Kill the child at random points many times; after each kill, reopen and
 * check that no acknowledged mark was lost. */
static void test_kill_and_reopen(void)
{
    char dir[] = "/tmp/fence-guard-crash.XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL);
    const char *env = getenv("FENCE_GUARD_CRASH_ROUNDS");
    int rounds = env ? atoi(env) : ROUNDS_DEFAULT;
    uint64_t acked[FENCES] = {0};
    uint64_t total_acks = 0;
    const char *seed_env = getenv("FENCE_GUARD_CRASH_SEED");
    unsigned seed = seed_env ? (unsigned)strtoul(seed_env, NULL, 10)
                             : (unsigned)time(NULL) ^ (unsigned)getpid();
    srand(seed);
    printf("#   %d rounds, FENCE_GUARD_CRASH_SEED=%u\n", rounds, seed);
    for (int round = 0; round < rounds; round++) {
        int p[2];
        REQUIRE(pipe(p) == 0);
        pid_t pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            close(p[0]);
            child_main(dir, p[1]);
        }
        close(p[1]);
        /* Let it run until a random number of acks arrived (or a random
         * short time passed), then kill it mid-flight. */
        int want = 1 + rand() % 200;
        int got = 0;
        ack a;
        while (got < want && read(p[0], &a, sizeof(a)) == (ssize_t)sizeof(a)) {
            REQUIRE(a.fence < FENCES);
            REQUIRE(a.token > acked[a.fence]);
            acked[a.fence] = a.token;
            got++;
        }
        if (rand() % 2)
            usleep((useconds_t)(rand() % 3000));
        kill(pid, SIGKILL);
        int status;
        waitpid(pid, &status, 0);
        REQUIRE(WIFSIGNALED(status)); /* it must not have failed by itself */
        while (read(p[0], &a, sizeof(a)) == (ssize_t)sizeof(a)) {
            REQUIRE(a.token > acked[a.fence]);
            acked[a.fence] = a.token;
            got++;
        }
        close(p[0]);
        total_acks += (uint64_t)got;
        if (rand() % 3 == 0)
            add_torn_tail(dir);

        fence_guard *g = NULL;
        int rc = fence_guard_open(dir, NULL, &g);
        if (rc != 0)
            printf("#   round %d: reopen failed: %s\n", round,
                   fence_guard_errmsg(g));
        REQUIRE(rc == 0);
        for (int f = 0; f < FENCES; f++) {
            uint64_t h = 0;
            REQUIRE(fence_guard_high(g, names[f], strlen(names[f]), &h) == 0);
            if (h < acked[f])
                printf("#   round %d: %s mark %" PRIu64
                       " < acknowledged %" PRIu64 "\n", round, names[f], h,
                       acked[f]);
            CHECK(h >= acked[f]);
            CHECK(h <= acked[f] + 3); /* at most the one in flight */
            if (acked[f] > 0) {
                uint64_t hh;
                CHECK(fence_guard_admit(g, names[f], strlen(names[f]),
                                        acked[f] - 1, &hh) ==
                      FENCE_GUARD_ESTALE);
            }
            acked[f] = h; /* the child continues from the mark */
        }
        fence_guard_close(g);
    }
    printf("#   %" PRIu64 " acknowledged admits across %d kills\n", total_acks,
           rounds);
    char path[128];
    snprintf(path, sizeof(path), "%s/fence-guard.log", dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/fence-guard.lock", dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/fence-guard.log.tmp", dir);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    TEST_RUN(test_kill_and_reopen);
    return TEST_DONE();
}
