/* fence-proxy: the proxy's own text replies (its refusals, the 409 of a
 * stale token, the upstream's failures), below the handler, the queues
 * and the upstream exchange, which all answer with them. */
#include "proxy/proxy_int.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"

/* ---- Replies --------------------------------------------------------- */

/* Answer req with a proxy-made text response: status, reason, the
 * Fencing-Highest value (NULL for none) and a body from fmt. */
__attribute__((format(printf, 5, 6))) void fence__proxy_reply(h2o_req_t *req, int status,
                                                        const char *reason,
                                                        const char *highest,
                                                        const char *fmt, ...)
{
    char body[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(body, sizeof(body), fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    if ((size_t)n >= sizeof(body))
        n = (int)sizeof(body) - 1;
    req->res.status = status;
    req->res.reason = reason;
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL,
                   H2O_STRLIT("text/plain; charset=utf-8"));
    if (highest != NULL) {
        h2o_iovec_t v = h2o_strdup(&req->pool, highest, strlen(highest));
        h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("fencing-highest"), 0,
                              "Fencing-Highest", v.base, v.len);
    }
    if (status == 503)
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_RETRY_AFTER, NULL,
                       H2O_STRLIT("1"));
    req->res.content_length = (size_t)n;
    h2o_send_inline(req, body, (size_t)n);
}

/* The 409 for a stale token. */
void fence__proxy_reply_stale(h2o_req_t *req, const fp_fence *f, uint64_t token, uint64_t highest)
{
    fence_res_metrics_stale(&srv.metrics, f->name, f->len, token, highest);
    char hv[32];
    snprintf(hv, sizeof(hv), "%" PRIu64, highest);
    FENCE_LOG_D("stale: fence %.*s token %" PRIu64 " < %" PRIu64, (int)f->len, f->name, token,
                highest);
    fence__proxy_reply(req, 409, "Conflict", hv,
          "STALE %" PRIu64 " %" PRIu64 " token %" PRIu64
          " is older than the highest token admitted for fence '%.*s' (%" PRIu64
          "); nothing was forwarded\n",
          token, highest, token, (int)f->len, f->name, highest);
}
