/* fence-proxy's metrics (see metrics.h). */
#include "proxy/metrics.h"

#include <stdio.h>

/* Register and (with a port) serve the families. */
int fence__proxy_metrics_start(fence_res_metrics *m, fence_proxy_metrics *pm, const char *host,
                               int port, char *errbuf, size_t errcap)
{
    if (fence_res_metrics_init(m, "fence_proxy", errbuf, errcap) != 0)
        return -1;
    pm->wrongfence = fence_metrics_counter(
        m->reg, "fence_proxy_wrong_fence_total",
        "requests refused because their Fencing-Lock is not the fence of the path (WRONGFENCE)");
    pm->bindings = fence_metrics_gauge(
        m->reg, "fence_proxy_bindings",
        "paths bound to the first fence that wrote them (--max-bindings bounds it)");
    pm->evicted = fence_metrics_add(
        m->reg, FENCE_METRIC_COUNTER, "fence_proxy_connections_closed_total",
        "client connections the proxy closed to make room (reason: room at --max-connections, "
        "memory over --max-conn-memory)",
        "reason", 4, NULL, 0);
    pm->memory = fence_metrics_gauge(
        m->reg, "fence_proxy_memory_bytes",
        "connections' read buffers plus request and response copies (--max-conn-memory)");
    pm->busy = fence_metrics_counter(
        m->reg, "fence_proxy_memory_refusals_total",
        "requests answered 503 or 502 because the memory budget was used up");
    if (pm->wrongfence == NULL || pm->bindings == NULL || pm->evicted == NULL ||
        pm->memory == NULL || pm->busy == NULL) {
        snprintf(errbuf, errcap, "metrics: %s", fence_metrics_errmsg(m->reg));
        fence_res_metrics_free(m);
        return -1;
    }
    if (port > 0 && fence_res_metrics_listen(m, host, port, errbuf, errcap) != 0) {
        fence_res_metrics_free(m);
        return -1;
    }
    return 0;
}
