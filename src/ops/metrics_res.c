/* The resource daemons' metric families (see metrics_res.h). */
#include "ops/metrics_res.h"

#include <stdio.h>
#include <string.h>

#include "base/assert.h"
#include "base/limits.h"

/* Register one family named prefix + suffix; NULL with errbuf filled. */
static fence_metric *add(fence_res_metrics *m, int type, const char *prefix,
                         const char *suffix, const char *help, const char *label,
                         char *errbuf, size_t errcap) {
    char name[FENCE_METRIC_NAME_MAX + 1];
    snprintf(name, sizeof(name), "%s%s", prefix, suffix);
    const double *b = NULL;
    uint32_t nb = 0;
    if (type == FENCE_METRIC_HISTOGRAM) {
        b = fence_metric_latency_bounds;
        nb = fence_metric_latency_n;
    }
    fence_metric *f = fence_metrics_add(m->reg, type, name, help, label,
                                        label != NULL ? FENCE_RES_METRIC_FENCES : 0, b, nb);
    if (f == NULL)
        snprintf(errbuf, errcap, "metrics: %s: %s", name, fence_metrics_errmsg(m->reg));
    return f;
}

/* Register the families. */
int fence_res_metrics_init(fence_res_metrics *m, const char *prefix, char *errbuf,
                           size_t errcap) {
    memset(m, 0, sizeof(*m));
    m->audit.burst = FENCE_RES_AUDIT_BURST;
    if (fence_metrics_new(&m->reg) != 0) {
        snprintf(errbuf, errcap, "metrics: out of memory");
        return -1;
    }
    m->admits = add(m, FENCE_METRIC_COUNTER, prefix, "_admits_total",
                    "Fencing tokens admitted (token >= the fence's mark).", NULL, errbuf, errcap);
    m->stale = add(m, FENCE_METRIC_COUNTER, prefix, "_stale_rejections_total",
                   "Requests refused because their token is below the fence's mark.", "fence",
                   errbuf, errcap);
    m->mark = add(m, FENCE_METRIC_GAUGE, prefix, "_fence_mark",
                  "Highest token admitted per fence (since start).", "fence", errbuf, errcap);
    m->fsync = add(m, FENCE_METRIC_HISTOGRAM, prefix, "_fsync_duration_seconds",
                   "Durable commit (fsync) latency, in seconds.", NULL, errbuf, errcap);
    m->connections = add(m, FENCE_METRIC_GAUGE, prefix, "_connections",
                         "Open client connections.", NULL, errbuf, errcap);
    m->errors = add(m, FENCE_METRIC_COUNTER, prefix, "_error_replies_total",
                    "Error replies sent, by code.", "code", errbuf, errcap);
    m->auth_failures = add(m, FENCE_METRIC_COUNTER, prefix, "_auth_failures_total",
                           "Failed logins (AUTH or HELLO AUTH with a wrong user or password).",
                           NULL, errbuf, errcap);
    if (!m->admits || !m->stale || !m->mark || !m->fsync || !m->connections || !m->errors ||
        !m->auth_failures) {
        fence_metrics_free(m->reg);
        m->reg = NULL;
        return -1;
    }
    return 0;
}

/* Start the endpoint. */
int fence_res_metrics_listen(fence_res_metrics *m, const char *bind, int port, char *errbuf,
                             size_t errcap) {
    FENCE_ASSERT(m->reg != NULL);
    fence_metrics_http_opts o = {0};
    o.bind = bind;
    o.port = port;
    o.metrics = m->reg;
    return fence_metrics_http_start(&o, &m->http, errbuf, errcap);
}

/* Stop and free. */
void fence_res_metrics_free(fence_res_metrics *m) {
    fence_metrics_http_stop(m->http);
    m->http = NULL;
    fence_metrics_free(m->reg);
    m->reg = NULL;
}

/* One admit. */
void fence_res_metrics_admit(fence_res_metrics *m, const char *fence, size_t len,
                             uint64_t token) {
    if (m->reg == NULL)
        return;
    fence_metric_inc(m->admits);
    fence_series_max(fence_metric_with(m->mark, fence, len),
                     token > INT64_MAX ? INT64_MAX : (int64_t)token);
}

/* One stale rejection. */
void fence_res_metrics_stale(fence_res_metrics *m, const char *fence, size_t len,
                             uint64_t token, uint64_t high) {
    if (m->reg == NULL)
        return;
    fence_series_inc(fence_metric_with(m->stale, fence, len));
    unsigned long dropped;
    if (fence__log_level > FENCE_LOG_INFO || !fence__log_limit_take(&m->audit, &dropped))
        return;
    char name[64];
    size_t k = 0;
    for (size_t i = 0; i < len && k + 5 < sizeof(name); i++) {
        unsigned char c = (unsigned char)fence[i];
        if (c >= 0x20 && c < 0x7f && c != '\\')
            name[k++] = (char)c;
        else
            k += (size_t)snprintf(name + k, sizeof(name) - k, "\\x%02x", c);
    }
    name[k] = '\0';
    FENCE_LOG_I("audit: stale-rejection: fence '%s' token %llu < mark %llu (a holder that "
                "lost its lock tried to write)%s",
                name, (unsigned long long)token, (unsigned long long)high,
                dropped ? " (earlier lines dropped by the rate limit)" : "");
}

/* One error reply. */
void fence_res_metrics_error(fence_res_metrics *m, const char *code) {
    if (m->reg == NULL)
        return;
    fence_series_inc(fence_metric_with(m->errors, code, strlen(code)));
}
