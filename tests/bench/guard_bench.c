/* guard-bench: admits per second and fsyncs per admit of libfence-guard,
 * for a few thread counts, on distinct fences (group commit shares fsyncs)
 * and on one fence (calls serialize); then, in the same run, one thread's
 * admits without and with signed-token verification (Ed25519 and
 * HMAC-SHA256; a new token each admit, and the current token repeated,
 * which the verify cache answers).  Not part of the library.
 *
 *   guard-bench [dir] [seconds-per-row]
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "token/signtok.h"
#include "fence_guard.h"

/* Shared state of one benchmark row. */
typedef struct row {
    fence_guard *g;        /* guard under test */
    int same_fence;        /* all threads on one fence */
    int row_id;            /* row number, so rows use fresh fences */
    double seconds;        /* how long to run */
    atomic_uint_fast64_t admits; /* admits that returned 0 */
    atomic_uint_fast64_t next;   /* token source for the shared fence */
} row;

/* Per-thread argument. */
typedef struct worker {
    row *r;   /* the row */
    int id;   /* thread number */
} worker;

/* Monotonic seconds. */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Admit increasing tokens until the row's time is up. */
static void *work(void *p)
{
    worker *w = p;
    row *r = w->r;
    char name[32];
    if (r->same_fence)
        snprintf(name, sizeof(name), "shared-%d", r->row_id);
    else
        snprintf(name, sizeof(name), "row%d-fence-%d", r->row_id, w->id);
    double end = now_s() + r->seconds;
    uint64_t t = 0;
    while (now_s() < end) {
        t = r->same_fence ? atomic_fetch_add(&r->next, 1) + 1 : t + 1;
        int rc = fence_guard_admit(r->g, name, strlen(name), t, NULL);
        if (rc != 0 && rc != FENCE_GUARD_ESTALE) {
            fprintf(stderr, "admit: %s\n", fence_guard_errmsg(r->g));
            exit(1);
        }
        if (rc == 0)
            atomic_fetch_add(&r->admits, 1);
    }
    return NULL;
}

/* Run one row and print it. */
static void run_row(const char *dir, int threads, int same, double secs)
{
    fence_guard *g = NULL;
    if (fence_guard_open(dir, NULL, &g) != 0) {
        fprintf(stderr, "open %s: %s\n", dir, fence_guard_errmsg(g));
        exit(1);
    }
    static row r;
    memset(&r, 0, sizeof(r));
    r.g = g;
    static int rows;
    r.same_fence = same;
    r.row_id = rows++;
    r.seconds = secs;
    pthread_t th[64];
    worker w[64];
    double start = now_s();
    for (int i = 0; i < threads; i++) {
        w[i] = (worker){&r, i};
        pthread_create(&th[i], NULL, work, &w[i]);
    }
    for (int i = 0; i < threads; i++)
        pthread_join(th[i], NULL);
    double el = now_s() - start;
    fence_guard_stats st;
    fence_guard_stats_get(g, &st);
    uint64_t n = atomic_load(&r.admits);
    printf("| %7d | %-9s | %10.0f | %10.0f | %12.2f | %11" PRIu64 " |\n",
           threads, same ? "one" : "distinct", (double)n / el,
           (double)st.rejected_stale / el,
           st.syncs ? (double)st.admitted / (double)st.syncs : 0.0,
           st.compactions);
    fence_guard_close(g);
}

/* Tokens signed ahead of a verification row (so signing is not timed). */
#define SIGNED_TOKENS 20000

/* One verification row: a guard in its own subdirectory of dir, with or
 * without verify keys of scheme sch, admitting for secs seconds either a
 * new token each time (repeat false) or one token over and over. */
static void run_verify_row(const char *dir, fence_signtok_scheme sch,
                           bool repeat, double secs)
{
    static int rows;
    char sub[256], keys[300];
    snprintf(sub, sizeof(sub), "%s/verify-%d", dir, rows++);
    if (mkdir(sub, 0700) != 0) {
        perror("mkdir");
        exit(1);
    }
    snprintf(keys, sizeof(keys), "%s/verify.keys", sub);
    fence_signtok_signer s;
    fence_signtok_key k;
    char err[256];
    char (*toks)[FENCE_SIGNTOK_BUF_SIZE] = NULL;
    fence_guard_opts o;
    fence_guard_opts_default(&o);
    if (sch != FENCE_SIGNTOK_NONE) {
        if (fence_signtok_keygen(sch, NULL, &s, &k, err, sizeof(err)) != 0) {
            fprintf(stderr, "keygen: %s\n", err);
            exit(1);
        }
        char line[128];
        fence_signtok_key_line(&k, line, sizeof(line));
        FILE *f = fopen(keys, "w");
        if (f == NULL || fputs(line, f) < 0 || fclose(f) != 0) {
            perror(keys);
            exit(1);
        }
        toks = malloc(sizeof(*toks) * SIGNED_TOKENS);
        if (toks == NULL)
            exit(1);
        for (int i = 0; i < SIGNED_TOKENS; i++)
            fence_signtok_sign(&s, "bench", 5, (uint64_t)i + 1, toks[i],
                               sizeof(toks[i]));
        o.verify_keys_path = keys;
    }
    fence_guard *g = NULL;
    if (fence_guard_open(sub, &o, &g) != 0) {
        fprintf(stderr, "open %s: %s\n", sub, fence_guard_errmsg(g));
        exit(1);
    }
    uint64_t n = 0;
    double start = now_s(), end = start + secs;
    while (now_s() < end && (repeat || n < SIGNED_TOKENS)) {
        uint64_t t = repeat ? 1 : n + 1;
        int rc;
        if (toks != NULL) {
            const char *tok = toks[t - 1];
            rc = fence_guard_admit_signed(g, "bench", 5, tok, strlen(tok),
                                          NULL, NULL, NULL, NULL);
        } else {
            rc = fence_guard_admit(g, "bench", 5, t, NULL);
        }
        if (rc != 0) {
            fprintf(stderr, "admit: %s\n", fence_guard_errmsg(g));
            exit(1);
        }
        n++;
    }
    double el = now_s() - start;
    fence_guard_stats st;
    fence_guard_stats_get(g, &st);
    printf("| %-12s | %-13s | %10.0f | %10.2f | %9" PRIu64 " | %10" PRIu64
           " |\n", sch == FENCE_SIGNTOK_NONE ? "none" :
           fence_signtok_scheme_name(sch),
           repeat ? "same token" : "new each time", (double)n / el,
           1e6 * el / (double)n, st.verified, st.verify_cache_hits);
    fence_guard_close(g);
    free(toks);
    unlink(keys);
    const char *files[] = {"fence-guard.log", "fence-guard.lock"};
    for (int i = 0; i < 2; i++) {
        char p[400];
        snprintf(p, sizeof(p), "%s/%s", sub, files[i]);
        unlink(p);
    }
    rmdir(sub);
}

int main(int argc, char **argv)
{
    char tmpl[] = "/tmp/guard-bench.XXXXXX";
    const char *dir = argc > 1 && argv[1][0] ? argv[1] : mkdtemp(tmpl);
    double secs = argc > 2 ? atof(argv[2]) : 2.0;
    if (dir == NULL) {
        perror("mkdtemp");
        return 1;
    }
    printf("libfence-guard, %s, %.1f s per row (every admit is durable)\n\n",
           dir, secs);
    printf("| threads | fences    | admits/s   | stale/s    | admits/fsync | compactions |\n");
    printf("|---------|-----------|------------|------------|--------------|-------------|\n");
    int counts[] = {1, 4, 16, 64};
    for (int same = 0; same <= 1; same++)
        for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
            run_row(dir, counts[i], same, secs);
    printf("\nSigned-token verification, 1 thread, one fence (a new token "
           "also means an fsync;\nthe same token needs none, so its row "
           "shows the verify cache's cost)\n\n");
    printf("| verify keys  | token         | admits/s   | us/admit   | verified  | cache hits |\n");
    printf("|--------------|---------------|------------|------------|-----------|------------|\n");
    const fence_signtok_scheme schemes[] = {
        FENCE_SIGNTOK_NONE, FENCE_SIGNTOK_ED25519, FENCE_SIGNTOK_HMAC_SHA256};
    for (int repeat = 0; repeat <= 1; repeat++)
        for (size_t i = 0; i < 3; i++)
            run_verify_row(dir, schemes[i], repeat, secs / 2);
    if (dir == tmpl) {
        char p[128];
        const char *files[] = {"fence-guard.log", "fence-guard.lock"};
        for (int i = 0; i < 2; i++) {
            snprintf(p, sizeof(p), "%s/%s", dir, files[i]);
            unlink(p);
        }
        rmdir(dir);
    }
    return 0;
}
