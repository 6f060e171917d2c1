/* fence-store's metrics: the resource families of common/metrics_res.h
 * under the prefix "fence_store", and the hooks server.c calls (on the
 * event loop). */
#ifndef FENCE_STORE_METRICS_H
#define FENCE_STORE_METRICS_H

#include "common/metrics_res.h"
#include "store/cmd.h"
#include "store/db.h"

/* Register the families; serve them on bind:port when port > 0.  0, or
 * -1 with the reason in errbuf. */
int fence__store_metrics_start(fence_res_metrics *m, const char *bind, int port,
                               char *errbuf, size_t errcap);

/* A write command finished with r after secs (the commit's fsync
 * included). */
void fence__store_metrics_write(fence_res_metrics *m, const fence_store_cmd *cmd,
                                fence_store_result r, const fence_store_write_out *out,
                                double secs);

#endif /* FENCE_STORE_METRICS_H */
