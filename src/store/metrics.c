/* fence-store's metrics (see metrics.h and docs/metrics.md). */
#include "store/metrics.h"

#include <stdio.h>
#include <string.h>

/* fence-store's own histograms, beside the shared families (one server
 * per process; fence_res_metrics is shared with fence-proxy, so they live
 * here).  NULL until fence__store_metrics_start. */
static fence_metric *commit_hist; /* batch commit: WAL write + fdatasync */
static fence_metric *ckpt_hist;   /* checkpoint: LMDB sync */

/* Register and (with a port) serve the families. */
int fence__store_metrics_start(fence_res_metrics *m, const char *bind, int port,
                               char *errbuf, size_t errcap)
{
    if (fence_res_metrics_init(m, "fence_store", errbuf, errcap) != 0)
        return -1;
    commit_hist = fence_metrics_histogram(
        m->reg, "fence_store_wal_commit_duration_seconds",
        "Batch commit latency (LMDB commit, WAL write and fdatasync), in "
        "seconds.", fence_metric_latency_bounds, fence_metric_latency_n);
    ckpt_hist = fence_metrics_histogram(
        m->reg, "fence_store_checkpoint_duration_seconds",
        "Checkpoint latency (LMDB sync on a worker thread), in seconds.",
        fence_metric_latency_bounds, fence_metric_latency_n);
    if (commit_hist == NULL || ckpt_hist == NULL) {
        snprintf(errbuf, errcap, "metrics: %s", fence_metrics_errmsg(m->reg));
        fence_res_metrics_free(m);
        return -1;
    }
    if (port > 0 && fence_res_metrics_listen(m, bind, port, errbuf, errcap) != 0) {
        fence_res_metrics_free(m);
        return -1;
    }
    return 0;
}

/* Count one write's outcome. */
void fence__store_metrics_write(fence_res_metrics *m, const fence_store_cmd *cmd,
                                fence_store_result r, const fence_store_write_out *out,
                                double secs)
{
    switch (r) {
    case FENCE_STORE_OK:
        fence_res_metrics_admit(m, cmd->fence, cmd->fence_len, out->high);
        fence_metric_observe(m->fsync, secs);
        break;
    case FENCE_STORE_STALE:
        fence_res_metrics_stale(m, cmd->fence, cmd->fence_len, cmd->token, out->high);
        fence_res_metrics_error(m, "STALE");
        break;
    case FENCE_STORE_WRONGFENCE:
        fence_res_metrics_error(m, "WRONGFENCE");
        break;
    case FENCE_STORE_FULL:
    case FENCE_STORE_NOSPACE:
        fence_res_metrics_error(m, "FULL");
        break;
    default:
        fence_res_metrics_error(m, "ERR");
        break;
    }
}

/* A batch's commit took secs. */
void fence__store_metrics_commit(fence_res_metrics *m, double secs)
{
    (void)m;
    if (commit_hist != NULL)
        fence_metric_observe(commit_hist, secs);
}

/* A checkpoint took secs. */
void fence__store_metrics_checkpoint(fence_res_metrics *m, double secs)
{
    (void)m;
    if (ckpt_hist != NULL)
        fence_metric_observe(ckpt_hist, secs);
}

/* Open connections: the gauge follows every open and close. */
void fence__store_metrics_connections(fence_res_metrics *m, uint64_t n)
{
    if (m->reg != NULL)
        fence_metric_set(m->connections, (int64_t)n);
}
