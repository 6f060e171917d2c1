/* fence-proxy: fences and their durable marks, the bindings of paths to
 * the first fence that wrote them, and the per-fence queue that applies
 * the ordering rule of proxy.h (pump); the request records are
 * proxy_req.c's. */
#include "proxy/proxy_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/hash.h"
#include "base/log.h"
#include "proxy/path.h"

static void raise_start(fp_fence *f, uint64_t token);

/* ---- Request records ------------------------------------------------- */

/* fr no longer belongs to its client's connection (proxy_req.c). */
static void conn_unref(fp_req *fr)
{
    fence__proxy_req_unref_conn(fr);
}

/* H2O is disposing of the client's request (it was answered, or the client
 * went away).  A queued request is dropped; one at the upstream stays (it
 * is still in flight) but will answer nobody. */
void fence__proxy_req_dispose(void *p)
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
        fence__proxy_req_free(fr);
        /* The head may have changed; fence__proxy_pump() is called by the next event on
         * this fence at the latest, but call it now so nothing waits. */
        fence__proxy_pump(f);
    }
}

/* ---- Fences ---------------------------------------------------------- */

/* FNV-1a of the name. */
static uint64_t name_hash(const char *p, size_t n)
{
    return fence__fnv1a64(p, n);
}

/* The fence called name[0..n), created if new.  Returns NULL with a
 * reason in *why when it cannot be (too many fences, memory, guard). */
fp_fence *fence__proxy_fence_get(const char *name, size_t n, const char **why)
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
fp_bind *fence__proxy_bind_get(const char *path, size_t n)
{
    size_t b = name_hash(path, n) & (srv.nbbuckets - 1);
    for (fp_bind *x = srv.bbuckets[b]; x != NULL; x = x->next)
        if (x->len == n && memcmp(x->path, path, n) == 0)
            return x;
    return NULL;
}

/* Add a binding of path[0..n) to f (not yet durable unless durable).
 * Returns NULL when out of memory. */
fp_bind *fence__proxy_bind_add(const char *path, size_t n, fp_fence *f, bool durable)
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
        fence__proxy_pump(x->fence);
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
void fence__proxy_bind_queue(fp_bind *x)
{
    x->qnext = NULL;
    *srv.bpending_tail = x;
    srv.bpending_tail = &x->qnext;
    bind_flush();
}

/* bindlog open: one binding read back. */
int fence__proxy_bind_load_one(void *arg, const char *path, size_t plen, const char *fence, size_t flen,
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
    fp_fence *f = fence__proxy_fence_get(fence, flen, &why);
    if (f == NULL) {
        snprintf(err, cap, "bindings: fence '%.*s': %s", (int)flen, fence, why);
        return -1;
    }
    fp_bind *x = fence__proxy_bind_get(path, plen);
    if (x != NULL) {
        snprintf(err, cap, "bindings: path '%.*s' bound twice (corrupt)", (int)plen, path);
        return -1;
    }
    if (fence__proxy_bind_add(path, plen, f, true) == NULL) {
        snprintf(err, cap, "bindings: out of memory");
        return -1;
    }
    return 0;
}

/* ---- The per-fence queue and the guard admits ----------------------- */

/* Work f's queue from its head as far as the rules allow (see proxy.h):
 * refuse stale heads, raise the mark for a higher one, wait for older
 * in-flight requests to drain, forward the rest. */
void fence__proxy_pump(fp_fence *f)
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
            h2o_req_t *req = fence__proxy_detach(fr);
            fence__proxy_reply_stale(req, f, fr->token, f->high);
            fence__proxy_req_free(fr);
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
            break; /* fence__proxy_on_hold_end() pumps it */
        h2o_linklist_unlink(&fr->link);
        if (h2o_timeout_is_linked(&fr->drain))
            h2o_timeout_unlink(&fr->drain);
        fence__proxy_forward(fr);
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
            fence__proxy_reply(fence__proxy_detach(fr), 503, "Service Unavailable", NULL,
                  "GUARD the fence's mark could not be raised: %s; nothing was forwarded\n",
                  fence_guard_strerror(rc));
            fence__proxy_req_free(fr);
        }
        f->seen = f->high;
    } else {
        /* A disk error: the guard is unusable and may be behind what it
         * acknowledged; crash-stop like the other daemons. */
        fence__log_fatal("guard: %s: %s", fence_guard_strerror(rc), fence_guard_errmsg(srv.guard));
    }
    free(r);
    fence__proxy_pump(f);
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
void fence__proxy_on_drain_timeout(h2o_timeout_entry_t *entry)
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
        h2o_req_t *req = fence__proxy_detach(old);
        if (req != NULL)
            fence__proxy_reply(req, 504, "Gateway Timeout", NULL,
                  "DRAIN the upstream had not finished this request (fence '%.*s', token %" PRIu64
                  ") when a newer token arrived and --drain-timeout-ms (%" PRIu64
                  ") passed; the proxy closed its upstream connection; the outcome is "
                  "unknown\n",
                  (int)f->len, f->name, old->token, srv.cfg->drain_timeout_ms);
        fence__proxy_req_free(old);
    }
    f->running = 0;
    if (srv.cfg->drain_action == FENCE_PROXY_DRAIN_FAIL) {
        h2o_linklist_unlink(&fr->link);
        h2o_req_t *req = fence__proxy_detach(fr);
        fence__proxy_reply(req, 503, "Service Unavailable", NULL,
              "DRAIN older requests on fence '%.*s' did not finish within --drain-timeout-ms "
              "(%" PRIu64 "); they were aborted; nothing was forwarded; retry\n",
              (int)f->len, f->name, srv.cfg->drain_timeout_ms);
        fence__proxy_req_free(fr);
    }
    fence__proxy_pump(f);
}

/* The restart hold is over: forward what waited for it. */
void fence__proxy_on_hold_end(uv_timer_t *t)
{
    (void)t;
    srv.holding = false;
    FENCE_LOG_I("restart hold over: forwarding fenced requests");
    for (size_t b = 0; b < srv.nbuckets; b++)
        for (fp_fence *f = srv.buckets[b]; f != NULL; f = f->next)
            if (!h2o_linklist_is_empty(&f->waiting))
                fence__proxy_pump(f);
}
