/* fence-store's metrics: the resource families of ops/metrics_res.h
 * under the prefix "fence_store", and the hooks server.c calls (on the
 * event loop). */
#ifndef FENCE_STORE_METRICS_H
#define FENCE_STORE_METRICS_H

#include "ops/metrics_res.h"
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

/* A batch's durable commit (LMDB commit without sync + WAL write +
 * fdatasync) took secs: fence_store_wal_commit_duration_seconds. */
void fence__store_metrics_commit(fence_res_metrics *m, double secs);

/* A checkpoint (LMDB sync on a worker thread) took secs from queueing to
 * completion: fence_store_checkpoint_duration_seconds. */
void fence__store_metrics_checkpoint(fence_res_metrics *m, double secs);

/* The number of open client connections is now n (set when one opens and
 * when one closes; a registry that is not started ignores it). */
void fence__store_metrics_connections(fence_res_metrics *m, uint64_t n);

#endif /* FENCE_STORE_METRICS_H */
