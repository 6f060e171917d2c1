/* fence-proxy: the request handler (checks every request's headers, path,
 * route and token, then forwards, queues or refuses it); the proxy's own
 * text replies are proxy_reply.c's. */
#include "proxy/proxy_int.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/log.h"
#include "proxy/path.h"

/* ---- The handler ----------------------------------------------------- */

/* Find the only header called name (lower case) in req.  Returns 0 and
 * sets *out (base NULL if absent), or -1 if it is given more than once. */
static int one_header(h2o_req_t *req, const char *name, size_t len, h2o_iovec_t *out)
{
    ssize_t i = h2o_find_header_by_str(&req->headers, name, len, -1);
    *out = h2o_iovec_init(NULL, 0);
    if (i < 0)
        return 0;
    if (h2o_find_header_by_str(&req->headers, name, len, i) >= 0)
        return -1;
    *out = req->headers.entries[i].value;
    return 0;
}

/* WebDAV's Destination (COPY, MOVE) names a second path the request
 * writes: an absolute URI or an absolute path.  Normalise its path like
 * the request's: *path and *plen get the normalised path (in req's pool),
 * *out the value to forward (the scheme and authority as sent, the
 * normalised path, the query).  Returns 0, or -1 with *why. */
static int parse_destination(h2o_req_t *req, h2o_iovec_t v, char **path, size_t *plen,
                             h2o_iovec_t *out, const char **why)
{
    size_t start = 0;
    if (v.len >= 7 && h2o_lcstris(v.base, 7, H2O_STRLIT("http://")))
        start = 7;
    else if (v.len >= 8 && h2o_lcstris(v.base, 8, H2O_STRLIT("https://")))
        start = 8;
    else if (v.len == 0 || v.base[0] != '/') {
        *why = "Destination is neither an absolute URI nor an absolute path";
        return -1;
    }
    if (start > 0) {
        while (start < v.len && v.base[start] != '/')
            start++;
        if (start == v.len) {
            *why = "Destination names no path";
            return -1;
        }
    }
    size_t n = v.len - start, ql = 0, qo = 0;
    char *buf = h2o_mem_alloc_pool(&req->pool, v.len + 1);
    memcpy(buf, v.base, start);
    if (fence__proxy_path_normalize(v.base + start, n, buf + start, n, &ql, &qo, why) != 0)
        return -1;
    if (ql > FENCE_PROXY_PATH_MAX) {
        *why = "the Destination path is too long";
        return -1;
    }
    *path = buf + start;
    *plen = ql;
    memcpy(buf + start + ql, v.base + start + qo, n - qo);
    *out = h2o_iovec_init(buf, start + ql + (n - qo));
    return 0;
}

/* Add "Fencing-Expected: name" to req's response. */
static void add_expected(h2o_req_t *req, const char *name, size_t len)
{
    h2o_iovec_t v = h2o_strdup(&req->pool, name, len);
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("fencing-expected"), 0,
                          "Fencing-Expected", v.base, v.len);
}

/* The 409 for a request through another fence than the one that guards
 * its path. */
static void reply_wrongfence(h2o_req_t *req, const char *path, size_t plen, const char *lock,
                             size_t llen, const char *owner, size_t olen, const char *how)
{
    add_expected(req, owner, olen);
    fence_metric_inc(srv.pm.wrongfence);
    FENCE_LOG_D("wrong fence: %.*s through %.*s, belongs to %.*s", (int)plen, path, (int)llen,
                lock, (int)olen, owner);
    fence__proxy_reply(req, 409, "Conflict", NULL,
          "WRONGFENCE path '%.*s' belongs to fence '%.*s' (%s), not '%.*s'; nothing was "
          "forwarded\n",
          (int)(plen > 512 ? 512 : plen), path, (int)olen, owner, how, (int)llen, lock);
}

/* Every request: check it, then forward, queue or refuse it. */
int fence__proxy_on_req(h2o_handler_t *self, h2o_req_t *req)
{
    (void)self;
    size_t hbytes = 0;
    for (size_t i = 0; i < req->headers.size; i++) {
        /* Obsolete line folding (RFC 9112 5.2): the parser hands a
         * continuation line over as a header without a name. */
        if (req->headers.entries[i].name->len == 0) {
            fence__proxy_reply(req, 400, "Bad Request", NULL,
                  "BADHEADER obsolete line folding (a header line starting with a space or "
                  "tab) is not accepted; nothing was forwarded\n");
            return 0;
        }
        hbytes += req->headers.entries[i].name->len + req->headers.entries[i].value.len;
    }
    if (hbytes > srv.cfg->max_header_bytes) {
        fence__proxy_reply(req, 431, "Request Header Fields Too Large", NULL,
              "HEADERS the request's headers hold %zu bytes, more than --max-header-bytes "
              "(%" PRIu64 ")\n",
              hbytes, srv.cfg->max_header_bytes);
        return 0;
    }
    h2o_iovec_t lock, tok;
    if (one_header(req, H2O_STRLIT("fencing-lock"), &lock) != 0 ||
        one_header(req, H2O_STRLIT("fencing-token"), &tok) != 0) {
        fence__proxy_reply(req, 400, "Bad Request", NULL,
              "BADFENCE Fencing-Lock and Fencing-Token may each be given once\n");
        return 0;
    }
    /* Decide on the normalised path and forward exactly it (path.h). */
    size_t in_len = req->input.path.len, plen = 0, qoff = 0;
    char *npath = h2o_mem_alloc_pool(&req->pool, in_len + 1);
    const char *why_path = NULL;
    if (fence__proxy_path_normalize(req->input.path.base, in_len, npath, in_len, &plen, &qoff,
                                    &why_path) != 0) {
        fence__proxy_reply(req, 400, "Bad Request", NULL, "BADPATH %s; nothing was forwarded\n", why_path);
        return 0;
    }
    if (plen > FENCE_PROXY_PATH_MAX) {
        fence__proxy_reply(req, 414, "URI Too Long", NULL,
              "BADPATH the path is longer than %d bytes; nothing was forwarded\n",
              FENCE_PROXY_PATH_MAX);
        return 0;
    }
    memcpy(npath + plen, req->input.path.base + qoff, in_len - qoff);
    h2o_iovec_t target = h2o_iovec_init(npath, plen + (in_len - qoff));
    const fence_proxy_route *route = fence__proxy_route_match(&srv.cfg->routes, npath, plen);
    bool needs = fence__proxy_route_needs_token(&srv.cfg->routes, route, req->input.method.base,
                                                req->input.method.len);
    bool is_read = fence__proxy_method_is_read(&srv.cfg->routes, req->input.method.base,
                                               req->input.method.len);
    /* A read that asks the upstream to act as another method (frameworks
     * honour these headers) is not a read. */
    static const char *const overrides[] = {"x-http-method-override", "x-http-method",
                                            "x-method-override"};
    for (size_t i = 0; i < sizeof(overrides) / sizeof(overrides[0]); i++) {
        if (h2o_find_header_by_str(&req->headers, overrides[i], strlen(overrides[i]), -1) >= 0) {
            is_read = false;
            if (route->all || route->n_methods > 0)
                needs = true;
        }
    }
    /* The fence the route names for this path, if any. */
    char expect[FENCE_PROXY_NAME_MAX];
    size_t elen = 0;
    bool no_fence = fence__proxy_route_fence(route, npath, plen, expect, sizeof(expect), &elen) != 0;
    /* A Destination (COPY, MOVE) is a second path the request writes: it
     * needs a token unless its route is '-', and its fence must match. */
    h2o_iovec_t dest;
    if (one_header(req, H2O_STRLIT("destination"), &dest) != 0) {
        fence__proxy_reply(req, 400, "Bad Request", NULL, "BADPATH Destination may be given once\n");
        return 0;
    }
    char *dpath = NULL;
    size_t dplen = 0, delen = 0;
    h2o_iovec_t dest_out = h2o_iovec_init(NULL, 0);
    char dexpect[FENCE_PROXY_NAME_MAX];
    if (dest.base != NULL) {
        if (parse_destination(req, dest, &dpath, &dplen, &dest_out, &why_path) != 0) {
            fence__proxy_reply(req, 400, "Bad Request", NULL, "BADPATH %s; nothing was forwarded\n", why_path);
            return 0;
        }
        const fence_proxy_route *droute = fence__proxy_route_match(&srv.cfg->routes, dpath, dplen);
        if (droute->all || droute->n_methods > 0)
            needs = true;
        is_read = false;
        if (fence__proxy_route_fence(droute, dpath, dplen, dexpect, sizeof(dexpect), &delen) != 0)
            no_fence = true;
    }
    if (no_fence && (needs || tok.base != NULL)) {
        fence__proxy_reply(req, 400, "Bad Request", NULL,
              "BADFENCE the path gives no name for the fence of route '%s' (%s); nothing was "
              "forwarded\n",
              route->prefix, route->fence);
        return 0;
    }
    uint64_t token = 0;
    if (tok.base != NULL) {
        if (lock.base == NULL) {
            fence__proxy_reply(req, 400, "Bad Request", NULL,
                  "BADFENCE a Fencing-Token needs a Fencing-Lock header naming its fence\n");
            return 0;
        }
        if (!fence__proxy_name_valid(lock.base, lock.len)) {
            fence__proxy_reply(req, 400, "Bad Request", NULL,
                  "BADFENCE Fencing-Lock must be 1..%d visible ASCII characters\n",
                  FENCE_PROXY_NAME_MAX);
            return 0;
        }
        /* One fence guards one resource: the route's, before anything
         * else looks at the token. */
        if (elen > 0 && !h2o_memis(lock.base, lock.len, expect, elen)) {
            reply_wrongfence(req, npath, plen, lock.base, lock.len, expect, elen,
                             "named by its route");
            return 0;
        }
        if (delen > 0 && !h2o_memis(lock.base, lock.len, dexpect, delen)) {
            reply_wrongfence(req, dpath, dplen, lock.base, lock.len, dexpect, delen,
                             "the Destination, named by its route");
            return 0;
        }
        /* Signed tokens (docs/security.md): with verify keys, only a token
         * fenced signed for this Fencing-Lock passes; without, a signed
         * token counts by its number.  Before any fence state is touched. */
        if (srv.verifier != NULL || memchr(tok.base, '.', tok.len) != NULL) {
            char why[192];
            if (fence_signtok_check(srv.verifier, lock.base, lock.len, tok.base, tok.len,
                                    &token, why, sizeof(why)) != 0) {
                fence__proxy_reply(req, 403, "Forbidden", NULL, "BADTOKEN %s; nothing was forwarded\n",
                      why);
                return 0;
            }
        } else if (fence__proxy_token_parse(tok.base, tok.len, &token) != 0) {
            fence__proxy_reply(req, 400, "Bad Request", NULL,
                  "BADTOKEN Fencing-Token '%.*s' is not a decimal number in "
                  "0..18446744073709551615\n",
                  (int)(tok.len > 64 ? 64 : tok.len), tok.base);
            return 0;
        }
    } else if (needs) {
        if (elen > 0)
            add_expected(req, expect, elen);
        fence__proxy_reply(req, 428, "Precondition Required", NULL,
              "NOTOKEN %.*s under '%s' needs a Fencing-Token (and Fencing-Lock) header\n",
              (int)req->input.method.len, req->input.method.base, route->prefix);
        return 0;
    }
    if (srv.inflight >= srv.cfg->max_inflight) {
        fence__proxy_reply(req, 503, "Service Unavailable", NULL,
              "BUSY %" PRIu64 " requests in flight (--max-inflight); retry\n", srv.inflight);
        return 0;
    }
    fp_fence *f = NULL;
    fp_bind *bd = NULL, *dbd = NULL;
    if (tok.base != NULL) {
        if (dpath != NULL && delen == 0) {
            dbd = fence__proxy_bind_get(dpath, dplen);
            if (dbd != NULL &&
                !h2o_memis(lock.base, lock.len, dbd->fence->name, dbd->fence->len)) {
                reply_wrongfence(req, dpath, dplen, lock.base, lock.len, dbd->fence->name,
                                 dbd->fence->len, "the Destination; the first fence that wrote it");
                return 0;
            }
        }
        /* No route names the fence: the path belongs to the first fence
         * that wrote it (as fence-store binds a key). */
        if (elen == 0) {
            bd = fence__proxy_bind_get(npath, plen);
            if (bd != NULL && !h2o_memis(lock.base, lock.len, bd->fence->name, bd->fence->len)) {
                reply_wrongfence(req, npath, plen, lock.base, lock.len, bd->fence->name,
                                 bd->fence->len, "the first fence that wrote it");
                return 0;
            }
        }
        uint64_t new_binds = (elen == 0 && bd == NULL && !is_read) +
                             (dpath != NULL && delen == 0 && dbd == NULL);
        if (srv.nbindings + new_binds > srv.cfg->max_bindings) {
            fence__proxy_reply(req, 503, "Service Unavailable", NULL,
                  "BINDINGS %" PRIu64 " paths are bound to fences (--max-bindings); "
                  "nothing was forwarded\n",
                  srv.nbindings);
            return 0;
        }
        const char *why = NULL;
        f = fence__proxy_fence_get(lock.base, lock.len, &why);
        if (f == NULL) {
            fence__proxy_reply(req, 503, "Service Unavailable", NULL, "GUARD %s; nothing was forwarded\n",
                  why);
            return 0;
        }
        if (token < f->seen) {
            fence__proxy_reply_stale(req, f, token, f->seen);
            return 0;
        }
        if (elen == 0 && bd == NULL && !is_read) {
            bd = fence__proxy_bind_add(npath, plen, f, false);
            if (bd == NULL) {
                fence__proxy_reply(req, 503, "Service Unavailable", NULL, "NOMEM out of memory\n");
                return 0;
            }
            FENCE_LOG_D("bind %.*s to fence %.*s", (int)plen, npath, (int)f->len, f->name);
            fence__proxy_bind_queue(bd);
        }
        if (dpath != NULL && delen == 0 && dbd == NULL) {
            dbd = fence__proxy_bind_get(dpath, dplen); /* the source's own path, just bound? */
            if (dbd == NULL) {
                dbd = fence__proxy_bind_add(dpath, dplen, f, false);
                if (dbd == NULL) {
                    fence__proxy_reply(req, 503, "Service Unavailable", NULL, "NOMEM out of memory\n");
                    return 0;
                }
                FENCE_LOG_D("bind %.*s to fence %.*s", (int)dplen, dpath, (int)f->len, f->name);
                fence__proxy_bind_queue(dbd);
            }
        }
    }
    /* The upstream request is a copy of head and body. */
    uint64_t need = req->entity.len + hbytes + 1024;
    if (srv.cfg->max_conn_memory > 0 &&
        srv.conn_mem + srv.req_mem + need > srv.cfg->max_conn_memory) {
        srv.refused_mem++;
        fence_metric_inc(srv.pm.busy);
        fence__proxy_reply(req, 503, "Service Unavailable", NULL,
              "BUSY connections and requests hold %" PRIu64 " bytes; this request needs %" PRIu64
              " more (--max-conn-memory %" PRIu64 "); nothing was forwarded; retry\n",
              srv.conn_mem + srv.req_mem, need, srv.cfg->max_conn_memory);
        return 0;
    }
    fp_req *fr = malloc(sizeof(*fr));
    if (fr == NULL) {
        fence__proxy_reply(req, 503, "Service Unavailable", NULL, "NOMEM out of memory\n");
        return 0;
    }
    memset(fr, 0, sizeof(*fr));
    fr->slot = h2o_mem_alloc_shared(&req->pool, sizeof(*fr->slot), fence__proxy_req_dispose);
    *fr->slot = fr;
    fr->req = req;
    fr->fence = f;
    fr->bind = bd;
    fr->bind2 = dbd;
    fr->dest = dest_out;
    fr->conn = fence__proxy_conn_of(req);
    if (fr->conn != NULL)
        fr->conn->reqs++;
    fr->token = token;
    fr->target = target;
    fr->drain.cb = fence__proxy_on_drain_timeout;
    srv.inflight++;
    if (f == NULL) {
        fence__proxy_forward(fr);
        return 0;
    }
    f->seen = token;
    fr->state = FP_QUEUED;
    h2o_linklist_insert(&f->waiting, &fr->link);
    fence__proxy_pump(f);
    return 0;
}
