/* fence-proxy: the exchange with the upstream (H2O's HTTP/1 client over
 * a keep-alive socket pool): the request bytes, the response head and
 * body, and the answer to the client when it ends. */
#include "proxy/proxy_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/log.h"
#include "base/num.h"

/* ---- Small buffers --------------------------------------------------- */

/* Append p[0..n) to the growable buffer *buf (len, cap); 0 or -1. */
static int buf_add(char **buf, size_t *len, size_t *cap, const void *p, size_t n)
{
    if (*len + n > *cap) {
        size_t ncap = *cap ? *cap : 256;
        while (ncap < *len + n)
            ncap *= 2;
        char *nb = realloc(*buf, ncap);
        if (nb == NULL)
            return -1;
        *buf = nb;
        srv.req_mem += ncap - *cap; /* every such buffer belongs to a request record */
        *cap = ncap;
    }
    if (n > 0)
        memcpy(*buf + *len, p, n);
    *len += n;
    return 0;
}

/* ---- Upstream -------------------------------------------------------- */

/* The upstream exchange of fr ended (answer or failure): answer the client
 * if it is still there, free fr, and let its fence move on. */
static void finish(fp_req *fr, int status, const char *errstr)
{
    fp_fence *f = fr->fence;
    fr->client = NULL;
    if (f != NULL) {
        FENCE_ASSERT(f->running > 0);
        h2o_linklist_unlink(&fr->link);
        f->running--;
    }
    h2o_req_t *req = fence__proxy_detach(fr);
    if (req != NULL) {
        if (errstr != NULL) {
            FENCE_LOG_W("upstream %s %.*s: %s", srv.cfg->upstream, (int)req->input.path.len,
                        req->input.path.base, errstr);
            fence__proxy_reply(req, status, status == 504 ? "Gateway Timeout" : "Bad Gateway", NULL,
                  "UPSTREAM %s: %s; the outcome at the upstream is unknown\n", srv.cfg->upstream,
                  errstr);
        } else {
            req->res.status = fr->status;
            req->res.reason = h2o_strdup(&req->pool, fr->reason, strlen(fr->reason)).base;
            const char *p = fr->hbuf;
            for (size_t i = 0; i < fr->nhdr; i++) {
                size_t nl = strlen(p);
                const char *v = p + nl + 1;
                size_t vl = strlen(v);
                h2o_iovec_t name = h2o_strdup(&req->pool, p, nl);
                h2o_iovec_t val = h2o_strdup(&req->pool, v, vl);
                h2o_add_header_by_str(&req->pool, &req->res.headers, name.base, name.len, 1, NULL,
                                      val.base, val.len);
                p = v + vl + 1;
            }
            /* A body-less status or HEAD keeps H2O's "no length" (it sends
             * no body for those); everything else has a known length. */
            if (!fr->is_head && fr->status >= 200 && fr->status != 204 && fr->status != 304)
                req->res.content_length = fr->blen;
            else if (fr->is_head)
                req->res.content_length = fr->head_clen;
            h2o_send_inline(req, fr->body != NULL ? fr->body : "", fr->blen);
        }
    }
    fence__proxy_req_free(fr);
    if (f != NULL && f->running == 0)
        srv.pump(f); /* fence__proxy_pump, handed down at start */
}

/* Whether the header name (lower case) is hop-by-hop or rewritten by us. */
static bool skip_header(const char *n, size_t l, bool request)
{
    static const char *const hop[] = {"connection", "keep-alive", "proxy-connection", "te",
                                      "trailer", "transfer-encoding", "upgrade",
                                      "content-length", "http2-settings"};
    for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
        if (h2o_lcstris(n, l, hop[i], strlen(hop[i])))
            return true;
    if (request) {
        if (h2o_lcstris(n, l, H2O_STRLIT("host")) || h2o_lcstris(n, l, H2O_STRLIT("expect")))
            return true;
        if (!srv.cfg->keep_fencing_headers &&
            (h2o_lcstris(n, l, H2O_STRLIT("fencing-lock")) ||
             h2o_lcstris(n, l, H2O_STRLIT("fencing-token"))))
            return true;
    } else {
        if (h2o_lcstris(n, l, H2O_STRLIT("date")) || h2o_lcstris(n, l, H2O_STRLIT("server")))
            return true;
    }
    return false;
}

/* Upstream body bytes arrived (or the exchange ended). */
static int on_up_body(h2o_http1client_t *client, const char *errstr)
{
    fp_req *fr = client->data;
    if (errstr != NULL && errstr != h2o_http1client_error_is_eos) {
        finish(fr, 502, errstr);
        return -1;
    }
    h2o_buffer_t *in = client->sock->input;
    if (in->size > 0) {
        if (fr->blen + in->size > srv.cfg->max_response_bytes ||
            buf_add(&fr->body, &fr->blen, &fr->bcap, in->bytes, in->size) != 0) {
            h2o_buffer_consume(&client->sock->input, in->size);
            finish(fr, 502, "response body larger than --max-response-bytes");
            return -1;
        }
        h2o_buffer_consume(&client->sock->input, in->size);
        if (srv.cfg->max_conn_memory > 0 &&
            srv.conn_mem + srv.req_mem > srv.cfg->max_conn_memory) {
            srv.refused_mem++;
            fence_metric_inc(srv.pm.busy);
            finish(fr, 502, "the response does not fit the memory budget (--max-conn-memory) now");
            return -1;
        }
    }
    if (errstr == h2o_http1client_error_is_eos)
        finish(fr, 0, NULL);
    return 0;
}

/* The upstream's response head arrived (or the exchange failed). */
static h2o_http1client_body_cb on_up_head(h2o_http1client_t *client, const char *errstr,
                                          int minor_version, int status, h2o_iovec_t msg,
                                          h2o_header_t *headers, size_t num_headers, int rlen)
{
    fp_req *fr = client->data;
    (void)minor_version;
    (void)rlen;
    if (errstr != NULL && errstr != h2o_http1client_error_is_eos) {
        finish(fr, strstr(errstr, "timeout") ? 504 : 502, errstr);
        return NULL;
    }
    fr->status = status;
    size_t rl = msg.len < sizeof(fr->reason) - 1 ? msg.len : sizeof(fr->reason) - 1;
    memcpy(fr->reason, msg.base, rl);
    fr->reason[rl] = '\0';
    for (size_t i = 0; i < num_headers && fr->nhdr < FENCE_PROXY_RESP_HEADERS_MAX; i++) {
        const h2o_iovec_t *n = headers[i].name;
        uint64_t clen;
        if (fr->is_head && h2o_lcstris(n->base, n->len, H2O_STRLIT("content-length")) &&
            fence__num_u64(headers[i].value.base, headers[i].value.len, SIZE_MAX, &clen) == 0)
            fr->head_clen = (size_t)clen;
        if (skip_header(n->base, n->len, false))
            continue;
        if (memchr(n->base, '\0', n->len) != NULL ||
            memchr(headers[i].value.base, '\0', headers[i].value.len) != NULL)
            continue;
        if (buf_add(&fr->hbuf, &fr->hlen, &fr->hcap, n->base, n->len) != 0 ||
            buf_add(&fr->hbuf, &fr->hlen, &fr->hcap, "", 1) != 0 ||
            buf_add(&fr->hbuf, &fr->hlen, &fr->hcap, headers[i].value.base,
                    headers[i].value.len) != 0 ||
            buf_add(&fr->hbuf, &fr->hlen, &fr->hcap, "", 1) != 0) {
            finish(fr, 502, "out of memory copying the response head");
            return NULL;
        }
        fr->nhdr++;
    }
    if (errstr == h2o_http1client_error_is_eos) {
        finish(fr, 0, NULL);
        return NULL;
    }
    return on_up_body;
}

/* Connected to the upstream (or not): hand H2O the request bytes. */
static h2o_http1client_head_cb on_up_connect(h2o_http1client_t *client, const char *errstr,
                                             h2o_iovec_t **reqbufs, size_t *reqbufcnt,
                                             int *method_is_head)
{
    fp_req *fr = client->data;
    if (errstr != NULL) {
        finish(fr, 502, errstr);
        return NULL;
    }
    fr->outvec = h2o_iovec_init(fr->out, fr->out_len);
    *reqbufs = &fr->outvec;
    *reqbufcnt = 1;
    *method_is_head = fr->is_head;
    return on_up_head;
}

/* Write the upstream request (head and body) for req into fr->out. */
static int build_request(fp_req *fr, h2o_req_t *req)
{
    char line[64];
#define ADD(p, n) buf_add(&fr->out, &fr->out_len, &fr->out_cap, (p), (n))
    if (ADD(req->input.method.base, req->input.method.len) || ADD(" ", 1) ||
        ADD(fr->target.base, fr->target.len) || ADD(" HTTP/1.1\r\nhost: ", 17))
        return -1;
    h2o_iovec_t host = req->input.authority.len ? req->input.authority : srv.up_authority;
    if (ADD(host.base, host.len) || ADD("\r\n", 2))
        return -1;
    for (size_t i = 0; i < req->headers.size; i++) {
        const h2o_header_t *h = &req->headers.entries[i];
        if (skip_header(h->name->base, h->name->len, true))
            continue;
        if (fr->dest.base != NULL && h2o_lcstris(h->name->base, h->name->len, H2O_STRLIT("destination"))) {
            if (ADD("destination: ", 13) || ADD(fr->dest.base, fr->dest.len) || ADD("\r\n", 2))
                return -1;
            continue;
        }
        const char *n = h->orig_name != NULL ? h->orig_name : h->name->base;
        if (ADD(n, h->name->len) || ADD(": ", 2) || ADD(h->value.base, h->value.len) ||
            ADD("\r\n", 2))
            return -1;
    }
    if (req->entity.base != NULL) {
        int n = snprintf(line, sizeof(line), "content-length: %zu\r\n", req->entity.len);
        if (ADD(line, (size_t)n))
            return -1;
    }
    if (ADD("\r\n", 2))
        return -1;
    if (req->entity.base != NULL && ADD(req->entity.base, req->entity.len))
        return -1;
#undef ADD
    return 0;
}

/* Send fr's request to the upstream; it is in flight from now on. */
void fence__proxy_forward(fp_req *fr)
{
    h2o_req_t *req = fr->req;
    fp_fence *f = fr->fence;
    FENCE_ASSERT(req != NULL);
    fr->state = FP_RUNNING;
    if (f != NULL) {
        FENCE_ASSERT(f->running == 0 || f->running_token == fr->token);
        FENCE_ASSERT(fr->token == f->high);
        f->running_token = fr->token;
        f->running++;
        fence_res_metrics_admit(&srv.metrics, f->name, f->len, fr->token);
        h2o_linklist_insert(&f->inflight, &fr->link);
    }
    fr->is_head = h2o_memis(req->input.method.base, req->input.method.len, H2O_STRLIT("HEAD"));
    fr->head_clen = SIZE_MAX;
    if (build_request(fr, req) != 0) {
        finish(fr, 502, "out of memory building the upstream request");
        return;
    }
    FENCE_LOG_D("forward %.*s %.*s%s%.*s", (int)req->input.method.len, req->input.method.base,
                (int)fr->target.len, fr->target.base, f ? " fence " : "",
                f ? (int)f->len : 0, f ? f->name : "");
    h2o_http1client_connect_with_pool(&fr->client, fr, &srv.client_ctx, &srv.pool, on_up_connect);
}
