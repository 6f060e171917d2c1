/* fence-proxy's metrics: the resource families of common/metrics_res.h
 * under the prefix "fence_proxy" (docs/metrics.md).  Updated on the
 * proxy's loop; served by libmicrohttpd's thread, never by H2O's loop. */
#ifndef FENCE_PROXY_METRICS_H
#define FENCE_PROXY_METRICS_H

#include "common/metrics_res.h"

/* Register the families; serve them on host:port when port > 0.  0, or
 * -1 with the reason in errbuf. */
int fence__proxy_metrics_start(fence_res_metrics *m, const char *host, int port, char *errbuf,
                               size_t errcap);

#endif /* FENCE_PROXY_METRICS_H */
