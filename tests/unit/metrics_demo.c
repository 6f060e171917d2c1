/* A stand-alone exporter over src/ops/metrics for the Prometheus test
 * harness (tests/integration/test_metrics_prom.py): registers one family
 * of each kind, serves them on 127.0.0.1:PORT (argv[1]; 0 picks one) and
 * updates them every 10 ms until SIGTERM.  Prints "port N" once serving.
 * /health answers 200 while the file argv[2] (optional) is absent. */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ops/metrics.h"

static volatile sig_atomic_t stop;

/* SIGTERM/SIGINT: leave the update loop. */
static void on_signal(int sig) {
    (void)sig;
    stop = 1;
}

/* /health: healthy unless the marker file exists. */
static bool health(void *arg, char *reason, size_t cap) {
    const char *path = arg;
    bool ok = path == NULL || access(path, F_OK) != 0;
    snprintf(reason, cap, ok ? "demo ready" : "marker file present");
    return ok;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: metrics_demo PORT [UNHEALTHY-MARKER]\n");
        return 2;
    }
    fence_metrics *m = NULL;
    if (fence_metrics_new(&m) != 0)
        return 1;
    fence_metric *ticks = fence_metrics_counter(m, "demo_ticks_total", "Update rounds.");
    fence_metric *up = fence_metrics_gauge(m, "demo_uptime_seconds", "Seconds since start.");
    fence_metric *lat = fence_metrics_histogram(m, "demo_latency_seconds", "Fake latency.",
                                                fence_metric_latency_bounds,
                                                fence_metric_latency_n);
    fence_metric *stale = fence_metrics_add(m, FENCE_METRIC_COUNTER, "demo_stale_total",
                                            "Stale writes by fence (capped).", "fence", 4, NULL,
                                            0);
    if (!ticks || !up || !lat || !stale) {
        fprintf(stderr, "metrics: %s\n", fence_metrics_errmsg(m));
        return 1;
    }
    fence_metrics_http_opts o = {0};
    o.bind = "127.0.0.1";
    o.port = atoi(argv[1]);
    o.metrics = m;
    o.health = health;
    o.health_arg = argc > 2 ? argv[2] : NULL;
    fence_metrics_http *h = NULL;
    char err[256];
    if (fence_metrics_http_start(&o, &h, err, sizeof(err)) != 0) {
        fprintf(stderr, "metrics_demo: %s\n", err);
        return 1;
    }
    printf("port %d\n", fence_metrics_http_port(h));
    fflush(stdout);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    for (unsigned i = 0; !stop; i++) {
        fence_metric_inc(ticks);
        fence_metric_set(up, i / 100);
        fence_metric_observe(lat, (double)(i % 50) * 0.0001);
        char name[32];
        int n = snprintf(name, sizeof(name), "fence-%u\"x", i % 9);
        fence_series_inc(fence_metric_with(stale, name, (size_t)n));
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    fence_metrics_http_stop(h);
    fence_metrics_free(m);
    return 0;
}
