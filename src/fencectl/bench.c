/* `fencectl bench`: acquire+release cycles per second and acquire latency
 * with N connections, uncontended (a lock each) and contended (one lock). */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "fencectl/cli.h"
#include "fencectl/hist.h"

/* Shared by the worker threads of one cell. */
typedef struct cell {
    const fencectl_args *a;  /* options */
    char prefix[200];        /* lock name prefix */
    bool contended;          /* all workers on one lock */
    bool shared;             /* ... which they take shared */
    uint64_t start_us;       /* when the workers may start */
    uint64_t stop_us;        /* when they stop starting cycles */
    atomic_int ready;        /* workers connected */
} cell;

/* One worker thread's state and results. */
typedef struct worker {
    cell *cell;              /* shared */
    int index;               /* 0..n-1 */
    fence_client *c;         /* its own client (one connection) */
    uint64_t cycles;         /* acquire+release completed in time */
    uint64_t errors;         /* failed acquires or releases */
    int last_error;          /* last error code, for the report */
    fencectl_hist hist;      /* acquire latency, microseconds */
    pthread_t thread;        /* the thread */
} worker;

/* Monotonic microseconds. */
static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Sleep until the monotonic time us (one sleep, not a polling loop: 64
 * workers polling every millisecond took a core's worth of wake-ups from
 * the server they were about to measure). */
static void sleep_until(uint64_t us)
{
    struct timespec ts = {.tv_sec = (time_t)(us / 1000000u),
                          .tv_nsec = (long)(us % 1000000u) * 1000};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0)
        ; /* EINTR: sleep on */
}

/* User + system CPU seconds this process has taken so far. */
static double self_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* Worker: connect, wait for the start, then cycle until the stop time. */
static void *worker_main(void *arg)
{
    worker *w = arg;
    cell *ce = w->cell;
    char name[256];
    if (ce->contended)
        snprintf(name, sizeof(name), "%s.contended", ce->prefix);
    else
        snprintf(name, sizeof(name), "%s.%d", ce->prefix, w->index);
    fence_client_ping(w->c); /* connect before the clock starts */
    atomic_fetch_add(&ce->ready, 1);
    sleep_until(ce->start_us);
    uint32_t ttl = ce->a->ttl_ms;
    uint32_t wait = ttl / 2;
    while (now_us() < ce->stop_us) {
        fence_lock *l = NULL;
        uint64_t t0 = now_us();
        int rc = fence_lock_acquire_ex(w->c, name, ttl, wait,
                                       (ce->a->signed_token ? FENCE_LOCK_SIGNED : 0u) |
                                           (ce->shared ? FENCE_LOCK_SHARED : 0u),
                                       &l);
        uint64_t t1 = now_us();
        if (rc != 0) {
            w->errors++;
            w->last_error = rc;
            if (rc == FENCE_EUNREACHABLE)
                usleep(10000);
            continue;
        }
        rc = fence_lock_release(l);
        if (rc != 0) {
            w->errors++;
            w->last_error = rc;
            continue;
        }
        if (t1 <= ce->stop_us) {
            fencectl_hist_add(&w->hist, t1 - t0);
            w->cycles++;
        }
    }
    return NULL;
}

/* Run one cell (mode x connection count) and print its row. */
static int run_cell(const fencectl_args *a, const char *prefix, bool contended, bool shared,
                    uint32_t n)
{
    cell ce;
    memset(&ce, 0, sizeof(ce));
    ce.a = a;
    ce.contended = contended;
    ce.shared = shared;
    snprintf(ce.prefix, sizeof(ce.prefix), "%s.%s%u", prefix,
             shared ? "s" : contended ? "c" : "u", n);
    const char *mode = shared ? "shared" : contended ? "contended" : "uncontended";
    worker *ws = calloc(n, sizeof(*ws));
    if (ws == NULL) {
        fprintf(stderr, "fencectl: bench: out of memory\n");
        return FENCECTL_EXIT_ERROR;
    }
    /* Start far enough ahead for every worker to connect. */
    ce.start_us = now_us() + 500000 + (uint64_t)n * 5000;
    ce.stop_us = ce.start_us + (uint64_t)a->duration_ms * 1000;
    uint32_t started = 0;
    int rv = 0;
    for (uint32_t i = 0; i < n; i++) {
        ws[i].cell = &ce;
        ws[i].index = (int)i;
        fencectl_hist_init(&ws[i].hist);
        fence_client_opts o;
        fencectl_client_opts(a, &o);
        o.pool_max = 1;
        if (fence_client_open(&o, &ws[i].c) != 0) {
            fprintf(stderr, "fencectl: bench: %s\n", fence_client_errmsg(NULL));
            rv = FENCECTL_EXIT_USAGE;
            break;
        }
        if (pthread_create(&ws[i].thread, NULL, worker_main, &ws[i]) != 0) {
            fence_client_close(ws[i].c);
            fprintf(stderr, "fencectl: bench: cannot start thread %u\n", i);
            rv = FENCECTL_EXIT_ERROR;
            break;
        }
        started++;
    }
    /* This process's CPU within the measured window (tsv cpu_s), so that a
     * script can set it beside the server's over the same window
     * (start_us, stop_us) without the connects and handshakes. */
    double cpu0 = 0, cpu1 = 0;
    if (rv == 0) {
        sleep_until(ce.start_us);
        cpu0 = self_cpu_s();
        sleep_until(ce.stop_us);
        cpu1 = self_cpu_s();
    }
    fencectl_hist total;
    fencectl_hist_init(&total);
    uint64_t cycles = 0, errors = 0, cmin = UINT64_MAX, cmax = 0;
    int last_error = 0;
    for (uint32_t i = 0; i < started; i++) {
        pthread_join(ws[i].thread, NULL);
        fence_client_close(ws[i].c);
        fencectl_hist_merge(&total, &ws[i].hist);
        cycles += ws[i].cycles;
        errors += ws[i].errors;
        if (ws[i].errors)
            last_error = ws[i].last_error;
        if (ws[i].cycles < cmin)
            cmin = ws[i].cycles;
        if (ws[i].cycles > cmax)
            cmax = ws[i].cycles;
    }
    free(ws);
    if (rv != 0)
        return rv;
    double secs = (double)a->duration_ms / 1000.0;
    char fair[48];
    if (contended)
        snprintf(fair, sizeof(fair), "%" PRIu64 "/%" PRIu64, cmin, cmax);
    else
        snprintf(fair, sizeof(fair), "-");
    if (a->bench_tsv)
        printf("%s\t%u\t%.1f\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64
               "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%.6f\n",
               mode, n, (double)cycles / secs, cycles,
               fencectl_hist_quantile(&total, 0.50), fencectl_hist_quantile(&total, 0.99),
               fencectl_hist_quantile(&total, 0.999), total.max,
               cycles == 0 ? 0 : cmin, cmax, errors, ce.start_us, ce.stop_us, cpu1 - cpu0);
    else
        printf("%-12s %6u %11.1f %9.3f %9.3f %9.3f %15s %7" PRIu64 "\n",
               mode, n, (double)cycles / secs,
               (double)fencectl_hist_quantile(&total, 0.50) / 1000.0,
               (double)fencectl_hist_quantile(&total, 0.99) / 1000.0,
               (double)fencectl_hist_quantile(&total, 0.999) / 1000.0, fair, errors);
    fflush(stdout);
    if (cycles == 0 && errors > 0) {
        fprintf(stderr, "fencectl: bench: every cycle failed (last: %s)\n",
                fence_strerror(last_error));
        return fencectl_exit_code(last_error);
    }
    return 0;
}

/* Run every requested cell and print the table. */
int fencectl_cmd_bench(const fencectl_args *a)
{
    char prefix[220];
    if (a->bench_prefix != NULL)
        snprintf(prefix, sizeof(prefix), "%s", a->bench_prefix);
    else
        snprintf(prefix, sizeof(prefix), "bench.%ld", (long)getpid());

    /* Check the server is there before spending any time. */
    fence_client *c = fencectl_open(a);
    int rc = fence_client_ping(c);
    if (rc != 0) {
        fprintf(stderr, "fencectl: bench: %s: %s\n", fence_strerror(rc),
                fence_client_errmsg(c));
        fence_client_close(c);
        return fencectl_exit_code(rc);
    }
    fence_client_close(c);

    if (a->bench_tsv) {
        printf("mode\tconns\tcycles_per_s\tcycles\tp50_us\tp99_us\tp999_us\tmax_us"
               "\tmin_cycles\tmax_cycles\terrors\tstart_us\tstop_us\tcpu_s\n");
    } else {
        printf("fencectl bench: server %s, %u s per cell, ttl %u ms%s\n", fencectl_servers(a),
               a->duration_ms / 1000, a->ttl_ms,
               a->signed_token ? ", signed grants (SIGNED)" : "");
        printf("%-12s %6s %11s %9s %9s %9s %15s %7s\n", "mode", "conns", "cycles/s",
               "p50 ms", "p99 ms", "p999 ms", "min/max cycles", "errors");
    }
    int rv = 0;
    for (int pass = 0; pass < 3; pass++) {
        bool contended = pass >= 1;
        bool shared = pass == 2;
        if (shared != (a->bench_mode == FENCECTL_BENCH_SHARED))
            continue;
        if (pass == 1 && a->bench_mode == FENCECTL_BENCH_UNCONTENDED)
            continue;
        if (pass == 0 && a->bench_mode == FENCECTL_BENCH_CONTENDED)
            continue;
        for (size_t i = 0; i < a->n_conns; i++) {
            int r = run_cell(a, prefix, contended, shared, a->conns[i]);
            if (r != 0 && rv == 0)
                rv = r;
        }
    }
    if (!a->bench_tsv)
        printf("(cycle = acquire with keepalive + release; latency = acquire call, "
               "send to reply)\n");
    return rv;
}
