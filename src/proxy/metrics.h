/* fence-proxy's metrics: the resource families of ops/metrics_res.h
 * under the prefix "fence_proxy" (docs/metrics.md), plus the proxy's own
 * (docs/proxy.md): refusals for another fence, bindings, connections
 * closed to make room, memory held.  Updated on the proxy's loop; served
 * by libmicrohttpd's thread, never by H2O's loop. */
#ifndef FENCE_PROXY_METRICS_H
#define FENCE_PROXY_METRICS_H

#include "ops/metrics_res.h"

/* The proxy's own families. */
typedef struct fence_proxy_metrics {
    fence_metric *wrongfence;  /* fence_proxy_wrong_fence_total */
    fence_metric *bindings;    /* fence_proxy_bindings */
    fence_metric *evicted;     /* fence_proxy_connections_closed_total{reason} */
    fence_metric *memory;      /* fence_proxy_memory_bytes */
    fence_metric *busy;        /* fence_proxy_memory_refusals_total */
} fence_proxy_metrics;

/* Register the families; serve them on host:port when port > 0.  0, or
 * -1 with the reason in errbuf. */
int fence__proxy_metrics_start(fence_res_metrics *m, fence_proxy_metrics *pm, const char *host,
                               int port, char *errbuf, size_t errcap);

#endif /* FENCE_PROXY_METRICS_H */
