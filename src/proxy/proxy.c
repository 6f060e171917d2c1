/* fence-proxy's server: H2O (libuv flavour) for the client side and for
 * the upstream client, libfence-guard for the durable marks, and the
 * per-fence ordering rule described in proxy.h. */
#include "proxy/proxy.h"

#include <errno.h>
#include <h2o.h>
#include <h2o/http1client.h>
#include <h2o/socketpool.h>
#include <inttypes.h>
#include <malloc.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <uv.h>

#include "base/assert.h"
#include "base/fs.h"
#include "base/hash.h"
#include "base/log.h"
#include "base/num.h"
#include "proxy/bindlog.h"
#include "proxy/path.h"
#include "proxy/metrics.h"
#include "token/signtok.h"
#include "daemon/startup_warn.h"
#include "net/tls.h"
#include "fence_guard.h"

_Static_assert(FENCE_PROXY_HEADER_MAX < H2O_MAX_REQLEN,
               "the header limit must be below H2O's own request-head limit");

/* Where a request is. */
enum fp_state {
    FP_QUEUED = 1,  /* on its fence's waiting list, not yet forwarded */
    FP_RUNNING = 2, /* forwarded: at the upstream */
};

typedef struct fp_fence fp_fence;

/* A path bound to the first fence that wrote it (routes that name no
 * fence; bindlog.h).  Never freed. */
typedef struct fp_bind {
    struct fp_bind *next;     /* next in the same hash bucket */
    struct fp_bind *qnext;    /* next in the pending or the writing batch */
    fp_fence *fence;          /* the fence it belongs to */
    bool durable;             /* on disk: a write through it may be forwarded */
    uint16_t len;             /* path length */
    char path[];              /* the normalised path (no NUL) */
} fp_bind;

/* One client connection.  tcp comes first: H2O closes it and
 * on_conn_close() frees the whole record through it. */
typedef struct fp_conn {
    uv_tcp_t tcp;              /* the client's socket */
    h2o_socket_t *sock;        /* H2O's socket over it */
    struct fp_conn *prev;      /* srv.conns list */
    struct fp_conn *next;
    struct fp_conn *hnext;     /* next in the same srv.chash bucket */
    uint64_t opened_ms;        /* when it was accepted (loop time) */
    uint64_t active_ms;        /* when bytes last arrived (seen by the sweep) */
    size_t last_read;          /* bytes read and buffered, at the last sweep */
    size_t mem;                /* its read buffer's size at the last sweep */
    uint32_t reqs;             /* its requests now at the proxy (queued or running) */
    bool closing;              /* shut down by the proxy to make room */
} fp_conn;

/* One request the proxy has accepted (queued or at the upstream).  It
 * outlives the client's h2o_req_t when the client goes away while its
 * request is at the upstream: the request still counts as in flight. */
typedef struct fp_req {
    h2o_req_t *req;            /* the client's request; NULL once detached */
    struct fp_req **slot;      /* H2O pool's pointer to us (NULL: detached) */
    fp_fence *fence;           /* NULL for an unfenced request */
    fp_bind *bind;             /* its path's binding (default fences), or NULL */
    fp_conn *conn;             /* the client's connection while attached, or NULL */
    uint64_t token;            /* Fencing-Token (fenced requests) */
    int state;                 /* enum fp_state */
    bool is_head;              /* method HEAD: the response has no body */
    size_t head_clen;          /* HEAD: the upstream's Content-Length, or SIZE_MAX */
    h2o_linklist_t link;       /* in fence->waiting or fence->running */
    h2o_timeout_entry_t drain; /* armed while it heads a queue, draining */
    h2o_http1client_t *client; /* the upstream exchange, while running */
    char *out;                 /* request bytes for the upstream */
    size_t out_len;            /* bytes in out */
    size_t out_cap;            /* allocated size of out */
    h2o_iovec_t outvec;        /* out, as H2O wants it */
    h2o_iovec_t target;        /* normalised path + query, in the req's pool */
    h2o_iovec_t dest;          /* normalised Destination (COPY, MOVE), or base NULL */
    fp_bind *bind2;            /* the Destination path's binding, or NULL */
    int status;                /* upstream status */
    char reason[64];           /* upstream reason phrase */
    char *hbuf;                /* upstream headers: "name\0value\0"... */
    size_t hlen;               /* bytes in hbuf */
    size_t hcap;               /* allocated size of hbuf */
    size_t nhdr;               /* headers in hbuf */
    char *body;                /* upstream body */
    size_t blen;               /* bytes in body */
    size_t bcap;               /* allocated size of body */
} fp_req;

/* One fence (never freed: the guard never forgets one either). */
struct fp_fence {
    fp_fence *next;           /* next fence in the same hash bucket */
    uint64_t high;            /* the durable mark (what the guard holds) */
    uint64_t seen;            /* highest token accepted: high, or queued */
    uint64_t running_token;   /* the token of requests now at the upstream */
    uint32_t running;         /* requests now at the upstream */
    bool raising;             /* a guard admit is out for this fence */
    bool had_mark;            /* it had a mark when the proxy started */
    bool pumping;             /* pump() is working this fence's queue */
    h2o_linklist_t waiting;   /* fp_req queued, arrival order */
    h2o_linklist_t inflight;  /* fp_req at the upstream */
    uint16_t len;             /* name length */
    char name[];              /* name bytes (no NUL) */
};

/* A guard admit, run on a pool thread. */
typedef struct fp_raise {
    uv_work_t work;           /* libuv's request */
    fp_fence *fence;          /* the fence being raised */
    uint64_t token;           /* the new mark */
    int rc;                   /* fence_guard_admit's result */
    uint64_t high;            /* the mark it reported */
    uint64_t t0_ns;           /* when it was queued (fsync latency metric) */
} fp_raise;

/* Buckets of the connection table (by H2O socket). */
#define FP_CONN_BUCKETS 4096

/* The whole server (one per process, on one loop). */
typedef struct fp_server {
    const fence_proxy_config *cfg;    /* options */
    uv_loop_t loop;                   /* the event loop */
    uv_tcp_t listener;                /* the listening socket */
    uv_signal_t sig_term;             /* SIGTERM: stop */
    uv_signal_t sig_int;              /* SIGINT: stop */
    uv_signal_t sig_hup;              /* SIGHUP: reopen the log */
    h2o_globalconf_t h2o_config;      /* H2O's configuration */
    h2o_context_t h2o_ctx;            /* H2O's per-loop context */
    h2o_accept_ctx_t accept_ctx;      /* for h2o_accept */
    h2o_socketpool_t pool;            /* keep-alive connections upstream */
    h2o_timeout_t io_timeout;         /* upstream I/O timeout */
    h2o_timeout_t drain_timeout;      /* --drain-timeout-ms */
    h2o_http1client_ctx_t client_ctx; /* upstream client context */
    h2o_iovec_t up_authority;         /* "host:port" of the upstream */
    fence_guard *guard;               /* the durable marks */
    fence_signtok_verifier *verifier; /* --token-verify-keys, or NULL */
    fp_fence **buckets;               /* fence hash table */
    size_t nbuckets;                  /* size of buckets (power of two) */
    uint64_t nfences;                 /* fences known */
    uint64_t nconns;                  /* client connections open */
    uint64_t inflight;                /* fp_req alive (queued or running) */
    bool holding;                     /* within --restart-hold-ms of start */
    uv_timer_t hold_timer;            /* ends the restart hold */
    fence_res_metrics metrics;        /* metric families, /metrics (metrics.c) */
    fence_proxy_metrics pm;           /* the proxy's own families */
    fence_proxy_bindlog *bindlog;     /* the durable bindings */
    fp_bind **bbuckets;               /* binding hash table */
    size_t nbbuckets;                 /* its size (power of two) */
    uint64_t nbindings;               /* bindings known */
    fp_bind *bpending, **bpending_tail; /* bindings not yet written */
    fp_bind *bwriting;                /* the batch being written */
    bool bwrite_out;                  /* a batch append is on a pool thread */
    uv_work_t bwork;                  /* its libuv request */
    char *bbuf;                       /* its bytes */
    size_t bbuf_len;                  /* bytes in bbuf */
    int bwrite_rc;                    /* its result (errno) */
    fp_conn *conns;                   /* client connections (newest first) */
    fp_conn *chash[FP_CONN_BUCKETS];  /* by H2O socket */
    uint64_t nclosing;                /* connections shut down, not yet closed */
    uint64_t req_mem;                 /* bytes of request records' buffers */
    uint64_t conn_mem;                /* bytes of connections' read buffers (last sweep) */
    uint64_t evicted_idle;            /* connections closed to make room */
    uint64_t evicted_mem;             /* connections closed for the memory budget */
    uint64_t refused_mem;             /* requests refused for the memory budget */
    uv_check_t sweep;                 /* after every poll: account memory */
} fp_server;

static fp_server srv;

static void pump(fp_fence *f);
static fp_conn *conn_of(h2o_req_t *req);
static bool conn_evictable(fp_conn *c);

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

/* ---- Replies --------------------------------------------------------- */

/* Answer req with a proxy-made text response: status, reason, the
 * Fencing-Highest value (NULL for none) and a body from fmt. */
__attribute__((format(printf, 5, 6))) static void reply(h2o_req_t *req, int status,
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
static void reply_stale(h2o_req_t *req, const fp_fence *f, uint64_t token, uint64_t highest)
{
    fence_res_metrics_stale(&srv.metrics, f->name, f->len, token, highest);
    char hv[32];
    snprintf(hv, sizeof(hv), "%" PRIu64, highest);
    FENCE_LOG_D("stale: fence %.*s token %" PRIu64 " < %" PRIu64, (int)f->len, f->name, token,
                highest);
    reply(req, 409, "Conflict", hv,
          "STALE %" PRIu64 " %" PRIu64 " token %" PRIu64
          " is older than the highest token admitted for fence '%.*s' (%" PRIu64
          "); nothing was forwarded\n",
          token, highest, token, (int)f->len, f->name, highest);
}

/* ---- Request records ------------------------------------------------- */

/* fr no longer belongs to its client's connection. */
static void conn_unref(fp_req *fr)
{
    if (fr->conn == NULL)
        return;
    FENCE_ASSERT(fr->conn->reqs > 0);
    fr->conn->reqs--;
    fr->conn = NULL;
}

/* Free fr (already detached, unlinked, no upstream exchange). */
static void fp_req_free(fp_req *fr)
{
    FENCE_ASSERT(fr->req == NULL);
    FENCE_ASSERT(fr->client == NULL);
    FENCE_ASSERT(!h2o_timeout_is_linked(&fr->drain));
    FENCE_ASSERT(fr->conn == NULL);
    FENCE_ASSERT(srv.req_mem >= fr->out_cap + fr->hcap + fr->bcap);
    srv.req_mem -= fr->out_cap + fr->hcap + fr->bcap;
    free(fr->out);
    free(fr->hbuf);
    free(fr->body);
    free(fr);
    FENCE_ASSERT(srv.inflight > 0);
    srv.inflight--;
}

/* H2O is disposing of the client's request (it was answered, or the client
 * went away).  A queued request is dropped; one at the upstream stays (it
 * is still in flight) but will answer nobody. */
static void on_req_dispose(void *p)
{
    fp_req **slot = p;
    fp_req *fr = *slot;
    if (fr == NULL)
        return;
    fr->req = NULL;
    fr->slot = NULL;
    conn_unref(fr);
    if (fr->state == FP_QUEUED) {
        fp_fence *f = fr->fence;
        FENCE_LOG_D("client left while queued on fence %.*s", (int)f->len, f->name);
        h2o_linklist_unlink(&fr->link);
        if (h2o_timeout_is_linked(&fr->drain))
            h2o_timeout_unlink(&fr->drain);
        fp_req_free(fr);
        /* The head may have changed; pump() is called by the next event on
         * this fence at the latest, but call it now so nothing waits. */
        pump(f);
    }
}

/* Detach fr from the client's request and return that request (NULL if
 * the client is gone), so that answering it cannot reach fr again. */
static h2o_req_t *detach(fp_req *fr)
{
    h2o_req_t *req = fr->req;
    if (fr->slot != NULL)
        *fr->slot = NULL;
    fr->slot = NULL;
    fr->req = NULL;
    conn_unref(fr);
    return req;
}

/* ---- Fences ---------------------------------------------------------- */

/* FNV-1a of the name. */
static uint64_t name_hash(const char *p, size_t n)
{
    return fence__fnv1a64(p, n);
}

/* The fence called name[0..n), created if new.  Returns NULL with a
 * reason in *why when it cannot be (too many fences, memory, guard). */
static fp_fence *fence_get(const char *name, size_t n, const char **why)
{
    size_t b = name_hash(name, n) & (srv.nbuckets - 1);
    for (fp_fence *f = srv.buckets[b]; f != NULL; f = f->next)
        if (f->len == n && memcmp(f->name, name, n) == 0)
            return f;
    if (srv.nfences >= srv.cfg->max_fences) {
        *why = "too many fences (--max-fences)";
        return NULL;
    }
    uint64_t high = 0;
    int rc = fence_guard_high(srv.guard, name, n, &high);
    if (rc != 0) {
        *why = fence_guard_strerror(rc);
        return NULL;
    }
    fp_fence *f = malloc(sizeof(*f) + n);
    if (f == NULL) {
        *why = "out of memory";
        return NULL;
    }
    memset(f, 0, sizeof(*f));
    memcpy(f->name, name, n);
    f->len = (uint16_t)n;
    f->high = high;
    f->seen = high;
    f->had_mark = high > 0;
    h2o_linklist_init_anchor(&f->waiting);
    h2o_linklist_init_anchor(&f->inflight);
    f->next = srv.buckets[b];
    srv.buckets[b] = f;
    srv.nfences++;
    return f;
}

/* ---- Bindings (paths of routes without a fence) ------------------- */

/* The binding of path[0..n), or NULL. */
static fp_bind *bind_get(const char *path, size_t n)
{
    size_t b = name_hash(path, n) & (srv.nbbuckets - 1);
    for (fp_bind *x = srv.bbuckets[b]; x != NULL; x = x->next)
        if (x->len == n && memcmp(x->path, path, n) == 0)
            return x;
    return NULL;
}

/* Add a binding of path[0..n) to f (not yet durable unless durable).
 * Returns NULL when out of memory. */
static fp_bind *bind_add(const char *path, size_t n, fp_fence *f, bool durable)
{
    FENCE_ASSERT(n > 0 && n <= FENCE_PROXY_PATH_MAX);
    fp_bind *x = malloc(sizeof(*x) + n);
    if (x == NULL)
        return NULL;
    memset(x, 0, sizeof(*x));
    memcpy(x->path, path, n);
    x->len = (uint16_t)n;
    x->fence = f;
    x->durable = durable;
    size_t b = name_hash(path, n) & (srv.nbbuckets - 1);
    x->next = srv.bbuckets[b];
    srv.bbuckets[b] = x;
    srv.nbindings++;
    if (srv.pm.bindings != NULL)
        fence_metric_set(srv.pm.bindings, (int64_t)srv.nbindings);
    return x;
}

static void bind_flush(void);

/* Pool thread: append the batch and fdatasync it. */
static void bind_work(uv_work_t *w)
{
    (void)w;
    srv.bwrite_rc = fence__proxy_bindlog_append(srv.bindlog, srv.bbuf, srv.bbuf_len);
}

/* Loop thread: the batch is durable; its writes may go on. */
static void bind_done(uv_work_t *w, int status)
{
    (void)w;
    FENCE_ASSERT(status == 0);
    FENCE_ASSERT(srv.bwrite_out);
    srv.bwrite_out = false;
    if (srv.bwrite_rc != 0)
        fence__log_fatal("bindings: append to %s/%s: %s", srv.cfg->data_dir,
                         FENCE_PROXY_BINDLOG_FILE, strerror(srv.bwrite_rc));
    fp_bind *x = srv.bwriting;
    srv.bwriting = NULL;
    for (fp_bind *y = x; y != NULL; y = y->qnext)
        y->durable = true;
    while (x != NULL) {
        fp_bind *nx = x->qnext;
        x->qnext = NULL;
        pump(x->fence);
        x = nx;
    }
    bind_flush();
}

/* Start writing the pending bindings if no write is out (one at a time,
 * so only the log's final batch can be torn). */
static void bind_flush(void)
{
    if (srv.bwrite_out || srv.bpending == NULL)
        return;
    size_t len = FENCE_PROXY_BINDLOG_BATCH_HDR;
    fp_bind **tail = &srv.bwriting;
    while (srv.bpending != NULL) {
        fp_bind *x = srv.bpending;
        size_t rl = FENCE_PROXY_BINDLOG_REC_HDR + x->len + x->fence->len;
        if (len + rl > FENCE_PROXY_BINDLOG_BATCH_HDR + FENCE_PROXY_BINDLOG_BATCH_MAX)
            break;
        len += fence__proxy_bindlog_record(srv.bbuf + len, x->path, x->len, x->fence->name,
                                           x->fence->len);
        srv.bpending = x->qnext;
        x->qnext = NULL;
        *tail = x;
        tail = &x->qnext;
    }
    if (srv.bpending == NULL)
        srv.bpending_tail = &srv.bpending;
    srv.bbuf_len = len;
    srv.bwrite_out = true;
    int rc = uv_queue_work(&srv.loop, &srv.bwork, bind_work, bind_done);
    FENCE_ASSERT(rc == 0);
}

/* Queue x to be written. */
static void bind_queue(fp_bind *x)
{
    x->qnext = NULL;
    *srv.bpending_tail = x;
    srv.bpending_tail = &x->qnext;
    bind_flush();
}

/* bindlog open: one binding read back. */
static int bind_load_one(void *arg, const char *path, size_t plen, const char *fence, size_t flen,
                         char *err, size_t cap)
{
    (void)arg;
    if (plen > FENCE_PROXY_PATH_MAX || !fence__proxy_name_valid(fence, flen)) {
        snprintf(err, cap, "bindings: a record with a bad path or fence (corrupt)");
        return -1;
    }
    if (srv.nbindings >= srv.cfg->max_bindings) {
        snprintf(err, cap, "bindings: the log holds more than --max-bindings (%" PRIu64
                 ") bindings; raise it", srv.cfg->max_bindings);
        return -1;
    }
    const char *why = NULL;
    fp_fence *f = fence_get(fence, flen, &why);
    if (f == NULL) {
        snprintf(err, cap, "bindings: fence '%.*s': %s", (int)flen, fence, why);
        return -1;
    }
    fp_bind *x = bind_get(path, plen);
    if (x != NULL) {
        snprintf(err, cap, "bindings: path '%.*s' bound twice (corrupt)", (int)plen, path);
        return -1;
    }
    if (bind_add(path, plen, f, true) == NULL) {
        snprintf(err, cap, "bindings: out of memory");
        return -1;
    }
    return 0;
}

static void forward(fp_req *fr);
static void raise_start(fp_fence *f, uint64_t token);
static void on_drain_timeout(h2o_timeout_entry_t *entry);

/* Work f's queue from its head as far as the rules allow (see proxy.h):
 * refuse stale heads, raise the mark for a higher one, wait for older
 * in-flight requests to drain, forward the rest. */
static void pump(fp_fence *f)
{
    if (f->pumping)
        return;
    f->pumping = true;
    while (!h2o_linklist_is_empty(&f->waiting)) {
        fp_req *fr = H2O_STRUCT_FROM_MEMBER(fp_req, link, f->waiting.next);
        FENCE_ASSERT(fr->state == FP_QUEUED);
        FENCE_ASSERT(fr->req != NULL);
        if (fr->token < f->high) {
            h2o_linklist_unlink(&fr->link);
            if (h2o_timeout_is_linked(&fr->drain))
                h2o_timeout_unlink(&fr->drain);
            h2o_req_t *req = detach(fr);
            reply_stale(req, f, fr->token, f->high);
            fp_req_free(fr);
            continue;
        }
        if (fr->token > f->high) {
            if (!f->raising)
                raise_start(f, fr->token);
            break;
        }
        if (f->running > 0 && f->running_token != fr->token) {
            FENCE_ASSERT(f->running_token < fr->token);
            if (!h2o_timeout_is_linked(&fr->drain)) {
                h2o_timeout_link(srv.h2o_ctx.loop, &srv.drain_timeout, &fr->drain);
                FENCE_LOG_D("fence %.*s: token %" PRIu64 " waits for %" PRIu32
                            " request(s) with token %" PRIu64,
                            (int)f->len, f->name, fr->token, f->running, f->running_token);
            }
            break;
        }
        if ((fr->bind != NULL && !fr->bind->durable) || (fr->bind2 != NULL && !fr->bind2->durable))
            break; /* bind_done() pumps it */
        if (srv.holding && f->had_mark)
            break; /* on_hold_end() pumps it */
        h2o_linklist_unlink(&fr->link);
        if (h2o_timeout_is_linked(&fr->drain))
            h2o_timeout_unlink(&fr->drain);
        forward(fr);
    }
    f->pumping = false;
}

/* Pool thread: make the mark durable (the guard groups concurrent admits
 * into shared fsyncs). */
static void raise_work(uv_work_t *w)
{
    fp_raise *r = H2O_STRUCT_FROM_MEMBER(fp_raise, work, w);
    r->rc = fence_guard_admit(srv.guard, r->fence->name, r->fence->len, r->token, &r->high);
}

/* Loop thread: a raise finished; apply it and work the queue. */
static void raise_done(uv_work_t *w, int status)
{
    fp_raise *r = H2O_STRUCT_FROM_MEMBER(fp_raise, work, w);
    fp_fence *f = r->fence;
    int rc = r->rc;
    FENCE_ASSERT(status == 0);
    FENCE_ASSERT(f->raising);
    f->raising = false;
    fence_metric_observe(srv.metrics.fsync, (double)(uv_hrtime() - r->t0_ns) * 1e-9);
    if (rc == 0) {
        if (r->token > f->high)
            f->high = r->token;
    } else if (rc == FENCE_GUARD_ESTALE) {
        if (r->high > f->high)
            f->high = r->high;
    } else if (rc == FENCE_GUARD_EFULL || rc == FENCE_GUARD_ENOMEM) {
        FENCE_LOG_W("fence %.*s: mark not raised: %s", (int)f->len, f->name,
                    fence_guard_strerror(rc));
        while (!h2o_linklist_is_empty(&f->waiting)) {
            fp_req *fr = H2O_STRUCT_FROM_MEMBER(fp_req, link, f->waiting.next);
            h2o_linklist_unlink(&fr->link);
            if (h2o_timeout_is_linked(&fr->drain))
                h2o_timeout_unlink(&fr->drain);
            reply(detach(fr), 503, "Service Unavailable", NULL,
                  "GUARD the fence's mark could not be raised: %s; nothing was forwarded\n",
                  fence_guard_strerror(rc));
            fp_req_free(fr);
        }
        f->seen = f->high;
    } else {
        /* A disk error: the guard is unusable and may be behind what it
         * acknowledged; crash-stop like the other daemons. */
        fence__log_fatal("guard: %s: %s", fence_guard_strerror(rc), fence_guard_errmsg(srv.guard));
    }
    free(r);
    pump(f);
}

/* Start raising f's mark to token on a pool thread. */
static void raise_start(fp_fence *f, uint64_t token)
{
    fp_raise *r = malloc(sizeof(*r));
    if (r == NULL)
        fence__log_fatal("out of memory raising a mark");
    memset(r, 0, sizeof(*r));
    r->fence = f;
    r->token = token;
    r->t0_ns = uv_hrtime();
    f->raising = true;
    int rc = uv_queue_work(&srv.loop, &r->work, raise_work, raise_done);
    FENCE_ASSERT(rc == 0);
}

/* The drain timer of a queue head fired: the older requests of its fence
 * have been at the upstream for --drain-timeout-ms.  Abort them (close
 * their upstream connections, answer 504), then refuse or forward the
 * head per --drain-action. */
static void on_drain_timeout(h2o_timeout_entry_t *entry)
{
    fp_req *fr = H2O_STRUCT_FROM_MEMBER(fp_req, drain, entry);
    fp_fence *f = fr->fence;
    FENCE_ASSERT(fr->state == FP_QUEUED);
    FENCE_LOG_W("fence %.*s: token %" PRIu64 " waited %" PRIu64 " ms for %" PRIu32
                " request(s) with token %" PRIu64 "; aborting them (drain timeout)",
                (int)f->len, f->name, fr->token, srv.cfg->drain_timeout_ms, f->running,
                f->running_token);
    while (!h2o_linklist_is_empty(&f->inflight)) {
        fp_req *old = H2O_STRUCT_FROM_MEMBER(fp_req, link, f->inflight.next);
        h2o_linklist_unlink(&old->link);
        if (old->client != NULL) {
            h2o_http1client_cancel(old->client);
            old->client = NULL;
        }
        h2o_req_t *req = detach(old);
        if (req != NULL)
            reply(req, 504, "Gateway Timeout", NULL,
                  "DRAIN the upstream had not finished this request (fence '%.*s', token %" PRIu64
                  ") when a newer token arrived and --drain-timeout-ms (%" PRIu64
                  ") passed; the proxy closed its upstream connection; the outcome is "
                  "unknown\n",
                  (int)f->len, f->name, old->token, srv.cfg->drain_timeout_ms);
        fp_req_free(old);
    }
    f->running = 0;
    if (srv.cfg->drain_action == FENCE_PROXY_DRAIN_FAIL) {
        h2o_linklist_unlink(&fr->link);
        h2o_req_t *req = detach(fr);
        reply(req, 503, "Service Unavailable", NULL,
              "DRAIN older requests on fence '%.*s' did not finish within --drain-timeout-ms "
              "(%" PRIu64 "); they were aborted; nothing was forwarded; retry\n",
              (int)f->len, f->name, srv.cfg->drain_timeout_ms);
        fp_req_free(fr);
    }
    pump(f);
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
    h2o_req_t *req = detach(fr);
    if (req != NULL) {
        if (errstr != NULL) {
            FENCE_LOG_W("upstream %s %.*s: %s", srv.cfg->upstream, (int)req->input.path.len,
                        req->input.path.base, errstr);
            reply(req, status, status == 504 ? "Gateway Timeout" : "Bad Gateway", NULL,
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
    fp_req_free(fr);
    if (f != NULL && f->running == 0)
        pump(f);
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
static void forward(fp_req *fr)
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
    reply(req, 409, "Conflict", NULL,
          "WRONGFENCE path '%.*s' belongs to fence '%.*s' (%s), not '%.*s'; nothing was "
          "forwarded\n",
          (int)(plen > 512 ? 512 : plen), path, (int)olen, owner, how, (int)llen, lock);
}

/* Every request: check it, then forward, queue or refuse it. */
static int on_req(h2o_handler_t *self, h2o_req_t *req)
{
    (void)self;
    size_t hbytes = 0;
    for (size_t i = 0; i < req->headers.size; i++) {
        /* Obsolete line folding (RFC 9112 5.2): the parser hands a
         * continuation line over as a header without a name. */
        if (req->headers.entries[i].name->len == 0) {
            reply(req, 400, "Bad Request", NULL,
                  "BADHEADER obsolete line folding (a header line starting with a space or "
                  "tab) is not accepted; nothing was forwarded\n");
            return 0;
        }
        hbytes += req->headers.entries[i].name->len + req->headers.entries[i].value.len;
    }
    if (hbytes > srv.cfg->max_header_bytes) {
        reply(req, 431, "Request Header Fields Too Large", NULL,
              "HEADERS the request's headers hold %zu bytes, more than --max-header-bytes "
              "(%" PRIu64 ")\n",
              hbytes, srv.cfg->max_header_bytes);
        return 0;
    }
    h2o_iovec_t lock, tok;
    if (one_header(req, H2O_STRLIT("fencing-lock"), &lock) != 0 ||
        one_header(req, H2O_STRLIT("fencing-token"), &tok) != 0) {
        reply(req, 400, "Bad Request", NULL,
              "BADFENCE Fencing-Lock and Fencing-Token may each be given once\n");
        return 0;
    }
    /* Decide on the normalised path and forward exactly it (path.h). */
    size_t in_len = req->input.path.len, plen = 0, qoff = 0;
    char *npath = h2o_mem_alloc_pool(&req->pool, in_len + 1);
    const char *why_path = NULL;
    if (fence__proxy_path_normalize(req->input.path.base, in_len, npath, in_len, &plen, &qoff,
                                    &why_path) != 0) {
        reply(req, 400, "Bad Request", NULL, "BADPATH %s; nothing was forwarded\n", why_path);
        return 0;
    }
    if (plen > FENCE_PROXY_PATH_MAX) {
        reply(req, 414, "URI Too Long", NULL,
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
        reply(req, 400, "Bad Request", NULL, "BADPATH Destination may be given once\n");
        return 0;
    }
    char *dpath = NULL;
    size_t dplen = 0, delen = 0;
    h2o_iovec_t dest_out = h2o_iovec_init(NULL, 0);
    char dexpect[FENCE_PROXY_NAME_MAX];
    if (dest.base != NULL) {
        if (parse_destination(req, dest, &dpath, &dplen, &dest_out, &why_path) != 0) {
            reply(req, 400, "Bad Request", NULL, "BADPATH %s; nothing was forwarded\n", why_path);
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
        reply(req, 400, "Bad Request", NULL,
              "BADFENCE the path gives no name for the fence of route '%s' (%s); nothing was "
              "forwarded\n",
              route->prefix, route->fence);
        return 0;
    }
    uint64_t token = 0;
    if (tok.base != NULL) {
        if (lock.base == NULL) {
            reply(req, 400, "Bad Request", NULL,
                  "BADFENCE a Fencing-Token needs a Fencing-Lock header naming its fence\n");
            return 0;
        }
        if (!fence__proxy_name_valid(lock.base, lock.len)) {
            reply(req, 400, "Bad Request", NULL,
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
                reply(req, 403, "Forbidden", NULL, "BADTOKEN %s; nothing was forwarded\n",
                      why);
                return 0;
            }
        } else if (fence__proxy_token_parse(tok.base, tok.len, &token) != 0) {
            reply(req, 400, "Bad Request", NULL,
                  "BADTOKEN Fencing-Token '%.*s' is not a decimal number in "
                  "0..18446744073709551615\n",
                  (int)(tok.len > 64 ? 64 : tok.len), tok.base);
            return 0;
        }
    } else if (needs) {
        if (elen > 0)
            add_expected(req, expect, elen);
        reply(req, 428, "Precondition Required", NULL,
              "NOTOKEN %.*s under '%s' needs a Fencing-Token (and Fencing-Lock) header\n",
              (int)req->input.method.len, req->input.method.base, route->prefix);
        return 0;
    }
    if (srv.inflight >= srv.cfg->max_inflight) {
        reply(req, 503, "Service Unavailable", NULL,
              "BUSY %" PRIu64 " requests in flight (--max-inflight); retry\n", srv.inflight);
        return 0;
    }
    fp_fence *f = NULL;
    fp_bind *bd = NULL, *dbd = NULL;
    if (tok.base != NULL) {
        if (dpath != NULL && delen == 0) {
            dbd = bind_get(dpath, dplen);
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
            bd = bind_get(npath, plen);
            if (bd != NULL && !h2o_memis(lock.base, lock.len, bd->fence->name, bd->fence->len)) {
                reply_wrongfence(req, npath, plen, lock.base, lock.len, bd->fence->name,
                                 bd->fence->len, "the first fence that wrote it");
                return 0;
            }
        }
        uint64_t new_binds = (elen == 0 && bd == NULL && !is_read) +
                             (dpath != NULL && delen == 0 && dbd == NULL);
        if (srv.nbindings + new_binds > srv.cfg->max_bindings) {
            reply(req, 503, "Service Unavailable", NULL,
                  "BINDINGS %" PRIu64 " paths are bound to fences (--max-bindings); "
                  "nothing was forwarded\n",
                  srv.nbindings);
            return 0;
        }
        const char *why = NULL;
        f = fence_get(lock.base, lock.len, &why);
        if (f == NULL) {
            reply(req, 503, "Service Unavailable", NULL, "GUARD %s; nothing was forwarded\n",
                  why);
            return 0;
        }
        if (token < f->seen) {
            reply_stale(req, f, token, f->seen);
            return 0;
        }
        if (elen == 0 && bd == NULL && !is_read) {
            bd = bind_add(npath, plen, f, false);
            if (bd == NULL) {
                reply(req, 503, "Service Unavailable", NULL, "NOMEM out of memory\n");
                return 0;
            }
            FENCE_LOG_D("bind %.*s to fence %.*s", (int)plen, npath, (int)f->len, f->name);
            bind_queue(bd);
        }
        if (dpath != NULL && delen == 0 && dbd == NULL) {
            dbd = bind_get(dpath, dplen); /* the source's own path, just bound? */
            if (dbd == NULL) {
                dbd = bind_add(dpath, dplen, f, false);
                if (dbd == NULL) {
                    reply(req, 503, "Service Unavailable", NULL, "NOMEM out of memory\n");
                    return 0;
                }
                FENCE_LOG_D("bind %.*s to fence %.*s", (int)dplen, dpath, (int)f->len, f->name);
                bind_queue(dbd);
            }
        }
    }
    /* The upstream request is a copy of head and body. */
    uint64_t need = req->entity.len + hbytes + 1024;
    if (srv.cfg->max_conn_memory > 0 &&
        srv.conn_mem + srv.req_mem + need > srv.cfg->max_conn_memory) {
        srv.refused_mem++;
        fence_metric_inc(srv.pm.busy);
        reply(req, 503, "Service Unavailable", NULL,
              "BUSY connections and requests hold %" PRIu64 " bytes; this request needs %" PRIu64
              " more (--max-conn-memory %" PRIu64 "); nothing was forwarded; retry\n",
              srv.conn_mem + srv.req_mem, need, srv.cfg->max_conn_memory);
        return 0;
    }
    fp_req *fr = malloc(sizeof(*fr));
    if (fr == NULL) {
        reply(req, 503, "Service Unavailable", NULL, "NOMEM out of memory\n");
        return 0;
    }
    memset(fr, 0, sizeof(*fr));
    fr->slot = h2o_mem_alloc_shared(&req->pool, sizeof(*fr->slot), on_req_dispose);
    *fr->slot = fr;
    fr->req = req;
    fr->fence = f;
    fr->bind = bd;
    fr->bind2 = dbd;
    fr->dest = dest_out;
    fr->conn = conn_of(req);
    if (fr->conn != NULL)
        fr->conn->reqs++;
    fr->token = token;
    fr->target = target;
    fr->drain.cb = on_drain_timeout;
    srv.inflight++;
    if (f == NULL) {
        forward(fr);
        return 0;
    }
    f->seen = token;
    fr->state = FP_QUEUED;
    h2o_linklist_insert(&f->waiting, &fr->link);
    pump(f);
    return 0;
}

/* The restart hold is over: forward what waited for it. */
static void on_hold_end(uv_timer_t *t)
{
    (void)t;
    srv.holding = false;
    FENCE_LOG_I("restart hold over: forwarding fenced requests");
    for (size_t b = 0; b < srv.nbuckets; b++)
        for (fp_fence *f = srv.buckets[b]; f != NULL; f = f->next)
            if (!h2o_linklist_is_empty(&f->waiting))
                pump(f);
}

/* ---- Connections and signals ----------------------------------------- */

/* The bucket of H2O socket sock in srv.chash. */
static size_t conn_bucket(const h2o_socket_t *sock)
{
    uint64_t h = (uint64_t)(uintptr_t)sock;
    h ^= h >> 17;
    h *= 0x9e3779b97f4a7c15ULL;
    return (size_t)(h >> 40) & (FP_CONN_BUCKETS - 1);
}

/* The connection of the client's request, or NULL. */
static fp_conn *conn_of(h2o_req_t *req)
{
    if (req->conn == NULL || req->conn->callbacks->get_socket == NULL)
        return NULL;
    h2o_socket_t *sock = req->conn->callbacks->get_socket(req->conn);
    if (sock == NULL)
        return NULL;
    for (fp_conn *c = srv.chash[conn_bucket(sock)]; c != NULL; c = c->hnext)
        if (c->sock == sock)
            return c;
    return NULL;
}

/* A client connection closed (H2O closed its socket). */
static void on_conn_close(uv_handle_t *h)
{
    fp_conn *c = (fp_conn *)h;
    FENCE_ASSERT(srv.nconns > 0);
    FENCE_ASSERT(c->reqs == 0);
    srv.nconns--;
    if (c->closing) {
        FENCE_ASSERT(srv.nclosing > 0);
        srv.nclosing--;
    }
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        srv.conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    fp_conn **pp = &srv.chash[conn_bucket(c->sock)];
    while (*pp != c)
        pp = &(*pp)->hnext;
    *pp = c->hnext;
    FENCE_ASSERT(srv.conn_mem >= c->mem);
    srv.conn_mem -= c->mem;
    fence_metric_set(srv.metrics.connections, (int64_t)srv.nconns);
    free(c);
}

/* A refused connection closed. */
static void on_refused_close(uv_handle_t *h)
{
    free(h);
}

/* Close c to make room (it has no request at the proxy): a short 503 if
 * it was in the middle of a request (plain HTTP only: nothing else is
 * being written on it), then shutdown(), which H2O reads as the client's
 * end and closes the connection itself. */
static void conn_evict(fp_conn *c, const char *why)
{
    FENCE_ASSERT(conn_evictable(c));
    c->closing = true;
    srv.nclosing++;

    uv_os_fd_t fd;
    if (uv_fileno((const uv_handle_t *)&c->tcp, &fd) != 0)
        return;
    if (c->sock->ssl == NULL && c->sock->input != NULL && c->sock->input->bytes != NULL &&
        c->sock->input->size > 0) {
        char msg[256];
        int n = snprintf(msg, sizeof(msg),
                         "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n"
                         "Content-Type: text/plain; charset=utf-8\r\nRetry-After: 1\r\n"
                         "Content-Length: %zu\r\n\r\nBUSY %s; nothing was forwarded\n",
                         strlen(why) + 28, why);
        if (n > 0 && (size_t)n < sizeof(msg))
            (void)send(fd, msg, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
    }
    /* An abortive close: when H2O closes the socket the client gets a
     * reset at once, instead of a zero window on an orphaned socket that
     * a client in the middle of a body would wait on for a minute. */
    struct linger lg = {1, 0};
    (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    shutdown(fd, SHUT_RDWR);
}

/* Whether c may be closed to make room: no request of it at the proxy,
 * and H2O waiting for its input (so it sees the shutdown at once), not
 * sending it a response. */
static bool conn_evictable(fp_conn *c)
{
    return !c->closing && c->reqs == 0 && c->sock->input != NULL &&
           h2o_socket_is_reading(c->sock) && !h2o_socket_is_writing(c->sock);
}

/* The connection to close to make room for a new one: the one without a
 * request at the proxy that has been quiet longest (idle keep-alive,
 * never sent anything, or trickling a request), or NULL. */
static fp_conn *conn_idlest(void)
{
    fp_conn *best = NULL;
    for (fp_conn *c = srv.conns; c != NULL; c = c->next) {
        if (!conn_evictable(c))
            continue;
        if (best == NULL || c->active_ms < best->active_ms ||
            (c->active_ms == best->active_ms && c->opened_ms < best->opened_ms))
            best = c;
    }
    return best;
}

/* After every poll: account the connections' read buffers (request heads
 * and bodies H2O is reading) and, over --max-conn-memory, close the
 * connections holding the most that have no request at the proxy yet. */
static void on_sweep(uv_check_t *h)
{
    (void)h;
    uint64_t now = uv_now(&srv.loop), mem = 0;
    for (fp_conn *c = srv.conns; c != NULL; c = c->next) {
        h2o_buffer_t *in = c->sock->input; /* NULL once H2O disposed of it */
        c->mem = in != NULL && in->bytes != NULL ? in->capacity : 0;
        mem += c->mem;
        size_t seen = c->sock->bytes_read + (in != NULL ? in->size : 0);
        if (seen != c->last_read) {
            c->last_read = seen;
            c->active_ms = now;
        }
    }
    srv.conn_mem = mem;
    fence_metric_set(srv.pm.memory, (int64_t)(mem + srv.req_mem));
    uint64_t max = srv.cfg->max_conn_memory;
    if (max == 0)
        return;
    uint64_t total = mem + srv.req_mem;
    while (total > max) {
        fp_conn *big = NULL;
        for (fp_conn *c = srv.conns; c != NULL; c = c->next)
            if (c->mem > 0 && conn_evictable(c) && (big == NULL || c->mem > big->mem))
                big = c;
        if (big == NULL)
            break;
        srv.evicted_mem++;
        fence_series_inc(fence_metric_with(srv.pm.evicted, "memory", 6));
        FENCE_LOG_D("closing a connection reading %zu bytes: connections and requests hold %" PRIu64
                    " bytes (--max-conn-memory %" PRIu64 ")",
                    big->mem, total, max);
        conn_evict(big, "the proxy's memory budget (--max-conn-memory) is used up");
        total -= big->mem;
    }
}

/* A client connects: hand it to H2O.  At --max-connections, the quietest
 * connection without a request at the proxy is closed to make room; only
 * when there is none is the new one refused. */
static void on_accept(uv_stream_t *listener, int status)
{
    if (status != 0)
        return;
    fp_conn *c = malloc(sizeof(*c));
    if (c == NULL)
        return;
    memset(c, 0, sizeof(*c));
    uv_tcp_init(listener->loop, &c->tcp);
    if (uv_accept(listener, (uv_stream_t *)&c->tcp) != 0) {
        uv_close((uv_handle_t *)&c->tcp, on_refused_close);
        return;
    }
    if (srv.nconns - srv.nclosing >= srv.cfg->max_connections) {
        fp_conn *v = conn_idlest();
        if (v == NULL) {
            FENCE_LOG_W("refusing a connection: %" PRIu64
                        " open, each with a request (--max-connections)",
                        srv.nconns);
            uv_close((uv_handle_t *)&c->tcp, on_refused_close);
            return;
        }
        srv.evicted_idle++;
        fence_series_inc(fence_metric_with(srv.pm.evicted, "room", 4));
        FENCE_LOG_D("closing the quietest connection (idle %" PRIu64
                    " ms) to make room (--max-connections)",
                    uv_now(&srv.loop) - v->active_ms);
        conn_evict(v, "connection closed to make room (--max-connections)");
    }
    srv.nconns++;
    fence_metric_set(srv.metrics.connections, (int64_t)srv.nconns);
    uv_tcp_nodelay(&c->tcp, 1);
    if (srv.cfg->max_conn_memory > 0) {
        /* What one loop turn can read from a connection is what its
         * kernel buffer holds: keep that small, so that the budget (checked
         * after every turn) is passed by little. */
        int rcv = FENCE_PROXY_CONN_RCVBUF;
        uv_os_fd_t fd;
        if (uv_fileno((const uv_handle_t *)&c->tcp, &fd) == 0)
            (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
    }
    c->opened_ms = c->active_ms = uv_now(&srv.loop);
    c->sock = h2o_uv_socket_create((uv_stream_t *)&c->tcp, on_conn_close);
    c->next = srv.conns;
    if (srv.conns != NULL)
        srv.conns->prev = c;
    srv.conns = c;
    size_t b = conn_bucket(c->sock);
    c->hnext = srv.chash[b];
    srv.chash[b] = c;
    h2o_accept(&srv.accept_ctx, c->sock);
}

/* SIGTERM / SIGINT: stop (every acknowledged mark is already durable). */
static void on_stop(uv_signal_t *h, int signum)
{
    (void)h;
    FENCE_LOG_I("signal %d: stopping", signum);
    uv_stop(&srv.loop);
}

/* SIGHUP: reopen the log file (logrotate) and read --token-verify-keys
 * again (key rotation; on_req verifies on this loop thread only, so the
 * swap is atomic for every request; a bad file keeps the old keys). */
static void on_hup(uv_signal_t *h, int signum)
{
    (void)h;
    (void)signum;
    fence__log_reopen();
    FENCE_LOG_I("log reopened");
    if (srv.cfg->token_verify_keys[0] == '\0')
        return;
    char kerr[1300];
    if (fence_signtok_verifier_reload(srv.cfg->token_verify_keys, 0, &srv.verifier, kerr,
                                      sizeof(kerr)) != 0)
        FENCE_LOG_E("SIGHUP: token-verify-keys not reloaded, the old %zu keys stay: %s",
                    fence_signtok_verifier_nkeys(srv.verifier), kerr);
    else
        FENCE_LOG_I("SIGHUP: token-verify-keys reloaded (%zu verify keys from %s)",
                    fence_signtok_verifier_nkeys(srv.verifier), srv.cfg->token_verify_keys);
}

/* Resolve the upstream and set up the socket pool. */
static int setup_upstream(const fence_proxy_config *cfg)
{
    struct addrinfo hints, *res = NULL;
    char port[8];
    memset(&hints, 0, sizeof(hints));
    hints.ai_socktype = SOCK_STREAM;
    snprintf(port, sizeof(port), "%u", (unsigned)cfg->up_port);
    int rc = getaddrinfo(cfg->up_host, port, &hints, &res);
    if (rc != 0) {
        FENCE_LOG_E("--upstream %s: %s", cfg->upstream, gai_strerror(rc));
        return -1;
    }
    h2o_socketpool_init_by_address(&srv.pool, res->ai_addr, res->ai_addrlen, 0,
                                   (size_t)cfg->max_inflight);
    freeaddrinfo(res);
    h2o_socketpool_set_timeout(&srv.pool, &srv.loop, 2000);
    char auth[300];
    int n = snprintf(auth, sizeof(auth), "%s:%u", cfg->up_host, (unsigned)cfg->up_port);
    srv.up_authority = h2o_strdup(NULL, auth, (size_t)n);
    h2o_timeout_init(&srv.loop, &srv.io_timeout, cfg->upstream_timeout_ms);
    srv.client_ctx.loop = &srv.loop;
    srv.client_ctx.io_timeout = &srv.io_timeout;
    return 0;
}

/* Bind and listen on --listen. */
static int setup_listener(const fence_proxy_config *cfg)
{
    struct sockaddr_storage ss;
    if (uv_ip4_addr(cfg->listen_host, cfg->listen_port, (struct sockaddr_in *)&ss) != 0 &&
        uv_ip6_addr(cfg->listen_host, cfg->listen_port, (struct sockaddr_in6 *)&ss) != 0) {
        FENCE_LOG_E("--listen %s: not a numeric address", cfg->listen);
        return -1;
    }
    uv_tcp_init(&srv.loop, &srv.listener);
    int rc = uv_tcp_bind(&srv.listener, (struct sockaddr *)&ss, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&srv.listener, 1024, on_accept);
    if (rc != 0) {
        FENCE_LOG_E("--listen %s: %s", cfg->listen, uv_strerror(rc));
        return -1;
    }
    return 0;
}

int fence__proxy_run(const fence_proxy_config *cfg)
{
    char nthreads[16];
    memset(&srv, 0, sizeof(srv));
    srv.cfg = cfg;
    signal(SIGPIPE, SIG_IGN);
    /* Large buffers (request bodies) are mapped and given back to the
     * system when freed, rather than kept in the heap (glibc would raise
     * its threshold after the first free and keep them). */
    mallopt(M_MMAP_THRESHOLD, 256 * 1024);
    /* libuv reads this when its pool first starts: the guard admits run
     * there, and the more run at once, the more share one fsync. */
    snprintf(nthreads, sizeof(nthreads), "%" PRIu64, cfg->guard_threads);
    setenv("UV_THREADPOOL_SIZE", nthreads, 1);

    if (cfg->token_verify_keys[0] != '\0') {
        char kerr[1300];
        if (fence_signtok_verifier_load(cfg->token_verify_keys, 0, &srv.verifier, kerr,
                                        sizeof(kerr)) != 0) {
            FENCE_LOG_E("token-verify-keys: %s", kerr);
            return 1;
        }
        FENCE_LOG_I("accepting only signed tokens (%zu verify keys from %s)",
                    fence_signtok_verifier_nkeys(srv.verifier), cfg->token_verify_keys);
    }
    int rc = fence__fs_mkdir_p(cfg->data_dir, 0755);
    if (rc != 0) {
        FENCE_LOG_E("--data-dir %s: %s", cfg->data_dir, strerror(rc > 0 ? rc : -rc));
        fence_signtok_verifier_free(srv.verifier);
        return 1;
    }
    /* One proxy per data directory (its marks), before the guard opens it. */
    char lerr[FENCE_FS_PATH_MAX + 200];
    int lock_fd = fence__fs_lock_dir_msg(cfg->data_dir, "fence-proxy.lock", lerr, sizeof(lerr));
    if (lock_fd < 0) {
        FENCE_LOG_E("%s", lerr);
        fence_signtok_verifier_free(srv.verifier);
        return 1;
    }
    fence_guard_opts gopts;
    fence_guard_opts_default(&gopts);
    gopts.fences_max = (uint32_t)cfg->max_fences;
    rc = fence_guard_open(cfg->data_dir, &gopts, &srv.guard);
    if (rc != 0) {
        FENCE_LOG_E("guard %s: %s: %s", cfg->data_dir, fence_guard_strerror(rc),
                    fence_guard_errmsg(srv.guard));
        fence_guard_close(srv.guard);
        fence_signtok_verifier_free(srv.verifier);
        return 1;
    }
    srv.nbuckets = 1024;
    while (srv.nbuckets < cfg->max_fences / 4 && srv.nbuckets < (1u << 22))
        srv.nbuckets *= 2;
    srv.buckets = calloc(srv.nbuckets, sizeof(*srv.buckets));
    if (srv.buckets == NULL) {
        FENCE_LOG_E("out of memory");
        goto out_close_guard;
    }
    srv.nbbuckets = 1024;
    while (srv.nbbuckets < cfg->max_bindings / 4 && srv.nbbuckets < (1u << 22))
        srv.nbbuckets *= 2;
    srv.bbuckets = calloc(srv.nbbuckets, sizeof(*srv.bbuckets));
    srv.bbuf = malloc(FENCE_PROXY_BINDLOG_BATCH_HDR + FENCE_PROXY_BINDLOG_BATCH_MAX);
    srv.bpending_tail = &srv.bpending;
    if (srv.bbuckets == NULL || srv.bbuf == NULL) {
        FENCE_LOG_E("out of memory");
        goto out_free_buckets;
    }
    {
        char berr[1400];
        if (fence__proxy_bindlog_open(cfg->data_dir, bind_load_one, NULL, &srv.bindlog, berr,
                                      sizeof(berr)) != 0) {
            FENCE_LOG_E("%s", berr);
            goto out_free_buckets;
        }
        if (fence__proxy_bindlog_torn(srv.bindlog) > 0)
            FENCE_LOG_W("bindings: cut off a torn tail of %" PRIu64
                        " bytes (never acknowledged)",
                        fence__proxy_bindlog_torn(srv.bindlog));
        if (srv.nbindings > 0)
            FENCE_LOG_I("bindings: %" PRIu64 " paths belong to the first fence that wrote them",
                        srv.nbindings);
    }

    uv_loop_init(&srv.loop);
    h2o_config_init(&srv.h2o_config);
    srv.h2o_config.server_name = h2o_iovec_init(H2O_STRLIT("fence-proxy"));
    srv.h2o_config.max_request_entity_size = (size_t)cfg->max_body_bytes;
    srv.h2o_config.http1.req_timeout = cfg->request_timeout_ms;
    srv.h2o_config.http1.upgrade_to_http2 = 0;
    h2o_hostconf_t *host =
        h2o_config_register_host(&srv.h2o_config, h2o_iovec_init(H2O_STRLIT("default")), 65535);
    h2o_pathconf_t *path = h2o_config_register_path(host, "/", 0);
    h2o_handler_t *handler = h2o_create_handler(path, sizeof(*handler));
    handler->on_req = on_req;
    h2o_context_init(&srv.h2o_ctx, &srv.loop, &srv.h2o_config);
    h2o_timeout_init(&srv.loop, &srv.drain_timeout, cfg->drain_timeout_ms);
    srv.accept_ctx.ctx = &srv.h2o_ctx;
    srv.accept_ctx.hosts = srv.h2o_config.hosts;
    if (cfg->tls_cert[0] != '\0') {
        char err[1400];
        fence_tls_opts o = {cfg->tls_cert, cfg->tls_key, NULL, FENCE_TLS_AUTH_NO,
                            FENCE_TLS_HANDSHAKE_MS_DEFAULT};
        srv.accept_ctx.ssl_ctx = fence__tls_server_ctx(&o, err, sizeof(err));
        if (srv.accept_ctx.ssl_ctx == NULL) {
            FENCE_LOG_E("%s", err);
            goto out_free_buckets;
        }
        FENCE_LOG_I("serving HTTPS (TLS 1.2+) with %s", cfg->tls_cert);
    }
    if (setup_upstream(cfg) != 0 || setup_listener(cfg) != 0)
        goto out_free_ssl;
    char merr[300];
    if (fence__proxy_metrics_start(&srv.metrics, &srv.pm, cfg->listen_host,
                                   (int)cfg->metrics_port, merr, sizeof(merr)) != 0) {
        FENCE_LOG_E("metrics-port: %s", merr);
        goto out_free_ssl;
    }
    fence_metric_set(srv.pm.bindings, (int64_t)srv.nbindings);

    uv_check_init(&srv.loop, &srv.sweep);
    uv_check_start(&srv.sweep, on_sweep);
    uv_signal_init(&srv.loop, &srv.sig_term);
    uv_signal_start(&srv.sig_term, on_stop, SIGTERM);
    uv_signal_init(&srv.loop, &srv.sig_int);
    uv_signal_start(&srv.sig_int, on_stop, SIGINT);
    uv_signal_init(&srv.loop, &srv.sig_hup);
    uv_signal_start(&srv.sig_hup, on_hup, SIGHUP);

    fence_guard_stats gs;
    fence_guard_stats_get(srv.guard, &gs);
    if (gs.fences > 0 && cfg->restart_hold_ms > 0) {
        /* The last run may have left requests at the upstream that the
         * ordering rule can no longer see. */
        srv.holding = true;
        uv_timer_init(&srv.loop, &srv.hold_timer);
        uv_timer_start(&srv.hold_timer, on_hold_end, cfg->restart_hold_ms, 0);
        FENCE_LOG_I("restart: %" PRIu64 " fences have marks; their fenced requests wait %" PRIu64
                    " ms (--restart-hold-ms) for what the last run may have left in flight",
                    gs.fences, cfg->restart_hold_ms);
    }
    fence__startup_warn_proxy(cfg->listen_host, cfg->tls_cert[0] != '\0', srv.verifier != NULL);
    FENCE_LOG_I("fence-proxy listening on %s, upstream %s, data dir %s, drain %" PRIu64
                " ms (%s)",
                cfg->listen, cfg->upstream, cfg->data_dir, cfg->drain_timeout_ms,
                cfg->drain_action_str);
    uv_run(&srv.loop, UV_RUN_DEFAULT);
    /* Stopped by a signal.  Guard admits may still run on pool threads, so
     * the guard is not closed (closing must not race them); everything it
     * acknowledged is already on disk. */
    FENCE_LOG_I("stopped");
    return 0;

out_free_ssl:
    SSL_CTX_free(srv.accept_ctx.ssl_ctx);
out_free_buckets:
    fence__proxy_bindlog_close(srv.bindlog);
    free(srv.bbuckets);
    free(srv.bbuf);
    free(srv.buckets);
out_close_guard:
    fence_guard_close(srv.guard);
    fence_signtok_verifier_free(srv.verifier);
    return 1;
}
