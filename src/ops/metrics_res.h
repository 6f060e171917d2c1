/* The metrics every fencing resource exports (fence-store, fence-proxy):
 * admits, stale rejections and the highest mark per fence (both with a
 * capped "fence" label), fsync latency, connections.  Each daemon names
 * them with its own prefix ("fence_store", "fence_proxy"); see
 * docs/metrics.md.  Updates run on the daemon's event loop. */
#ifndef FENCE_COMMON_METRICS_RES_H
#define FENCE_COMMON_METRICS_RES_H

#include <stddef.h>
#include <stdint.h>

#include "base/log.h"
#include "ops/metrics.h"

/* Distinct fences shown per family; the rest count under "_other". */
#define FENCE_RES_METRIC_FENCES 64

/* A resource daemon's families. */
typedef struct fence_res_metrics {
    fence_metrics *reg;         /* the registry */
    fence_metrics_http *http;   /* the endpoint, NULL without --metrics-port */
    fence_metric *admits;       /* <prefix>_admits_total */
    fence_metric *stale;        /* <prefix>_stale_rejections_total{fence} */
    fence_metric *mark;         /* <prefix>_fence_mark{fence} */
    fence_metric *fsync;        /* <prefix>_fsync_duration_seconds */
    fence_metric *connections;  /* <prefix>_connections */
    fence_metric *errors;       /* <prefix>_error_replies_total{code} */
    fence_metric *auth_failures; /* <prefix>_auth_failures_total */
    fence_log_limit audit;      /* rate limit of the stale-rejection audit lines */
} fence_res_metrics;

/* Register the families under prefix.  0, or -1 with the reason. */
int fence_res_metrics_init(fence_res_metrics *m, const char *prefix, char *errbuf,
                           size_t errcap);

/* Serve them on bind:port (/health always 200 while the process runs). */
int fence_res_metrics_listen(fence_res_metrics *m, const char *bind, int port, char *errbuf,
                             size_t errcap);

/* Stop the endpoint and free the registry (NULL registry: no-op). */
void fence_res_metrics_free(fence_res_metrics *m);

/* A token was admitted for fence (len bytes): one admit, and the fence's
 * mark raised to token. */
void fence_res_metrics_admit(fence_res_metrics *m, const char *fence, size_t len,
                             uint64_t token);

/* A stale token was refused for fence (its mark is high): counted, and an
 * info-level audit line (at most FENCE_RES_AUDIT_BURST a second). */
void fence_res_metrics_stale(fence_res_metrics *m, const char *fence, size_t len,
                             uint64_t token, uint64_t high);

/* Audit lines a second at most. */
#define FENCE_RES_AUDIT_BURST 20

/* An error reply with this code went out. */
void fence_res_metrics_error(fence_res_metrics *m, const char *code);

#endif /* FENCE_COMMON_METRICS_RES_H */
