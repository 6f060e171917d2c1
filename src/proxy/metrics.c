/* fence-proxy's metrics (see metrics.h). */
#include "proxy/metrics.h"

/* Register and (with a port) serve the families. */
int fence__proxy_metrics_start(fence_res_metrics *m, const char *host, int port, char *errbuf,
                               size_t errcap)
{
    if (fence_res_metrics_init(m, "fence_proxy", errbuf, errcap) != 0)
        return -1;
    if (port > 0 && fence_res_metrics_listen(m, host, port, errbuf, errcap) != 0) {
        fence_res_metrics_free(m);
        return -1;
    }
    return 0;
}
