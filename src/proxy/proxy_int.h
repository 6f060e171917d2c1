/* fence-proxy's server, private to src/proxy/proxy*.c: the records the
 * proxy keeps (connections, requests, fences, bindings), the one server
 * structure, and the functions the files of the server call across.
 *
 *   proxy.c           start-up, signals, the loop (fence__proxy_run)
 *   proxy_handler.c   the request handler and the proxy's own replies
 *   proxy_fence.c     request records, fences, bindings, the per-fence queue
 *                     (the ordering rule of proxy.h) and the guard admits
 *   proxy_upstream.c  the exchange with the upstream
 *   proxy_conn.c      client connections, eviction, the memory budget
 *
 * Everything here runs on the loop thread except the guard admits and the
 * bindings-log appends (pool threads; they touch only their own job). */
#ifndef FENCE_PROXY_PROXY_INT_H
#define FENCE_PROXY_PROXY_INT_H

#include <h2o.h>
#include <h2o/http1client.h>
#include <h2o/socketpool.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "ops/metrics_res.h"
#include "proxy/bindlog.h"
#include "proxy/metrics.h"
#include "proxy/proxy.h"
#include "token/signtok.h"
#include "fence_guard.h"

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
    void (*pump)(fp_fence *f);        /* fence__proxy_pump (set at start): how the
                                       * upstream exchange, below the queues,
                                       * lets a fence move on */
} fp_server;

/* The one server of the process (proxy_srv.c defines it, proxy.c starts
 * it); every file of the proxy reaches it as srv. */
extern fp_server fence__proxy_srv;
#define srv fence__proxy_srv

/* ---- proxy_handler.c: the request handler ----------------------------- */

/* Every request: check it, then forward, queue or refuse it. */
int fence__proxy_on_req(h2o_handler_t *self, h2o_req_t *req);

/* ---- proxy_reply.c: the proxy's own replies ---------------------------- */

/* Answer req with a proxy-made text response: status, reason, the
 * Fencing-Highest value (NULL for none) and a body from fmt. */
__attribute__((format(printf, 5, 6))) void fence__proxy_reply(h2o_req_t *req, int status,
                                                               const char *reason,
                                                               const char *highest,
                                                               const char *fmt, ...);

/* The 409 for a stale token. */
void fence__proxy_reply_stale(h2o_req_t *req, const fp_fence *f, uint64_t token,
                              uint64_t highest);

/* ---- proxy_req.c: request records ------------------------------------- */

/* Free fr (already detached, unlinked, no upstream exchange). */
void fence__proxy_req_free(fp_req *fr);

/* Detach fr from the client's request and return that request (NULL if
 * the client is gone). */
h2o_req_t *fence__proxy_detach(fp_req *fr);

/* fr no longer belongs to its client's connection. */
void fence__proxy_req_unref_conn(fp_req *fr);

/* ---- proxy_fence.c: fences, bindings, the queues ----------------------- */

/* H2O's dispose callback of the slot that points at a request record. */
void fence__proxy_req_dispose(void *p);

/* The fence called name[0..n), created if new; NULL with *why. */
fp_fence *fence__proxy_fence_get(const char *name, size_t n, const char **why);

/* The binding of path[0..n), or NULL. */
fp_bind *fence__proxy_bind_get(const char *path, size_t n);

/* Add a binding of path[0..n) to f; NULL when out of memory. */
fp_bind *fence__proxy_bind_add(const char *path, size_t n, fp_fence *f, bool durable);

/* Queue binding x to be written to the bindings log. */
void fence__proxy_bind_queue(fp_bind *x);

/* The bindings log's callback for one record read back at start. */
int fence__proxy_bind_load_one(void *arg, const char *path, size_t plen, const char *fence,
                               size_t flen, char *err, size_t cap);

/* Work f's queue from its head as far as the rules allow (proxy.h). */
void fence__proxy_pump(fp_fence *f);

/* The drain timer of a queue head fired (fp_req.drain's callback). */
void fence__proxy_on_drain_timeout(h2o_timeout_entry_t *entry);

/* The restart hold is over: forward what waited for it. */
void fence__proxy_on_hold_end(uv_timer_t *t);

/* ---- proxy_upstream.c: the exchange with the upstream ------------------ */

/* Send fr's request to the upstream; it is in flight from now on. */
void fence__proxy_forward(fp_req *fr);

/* ---- proxy_conn.c: client connections and the memory budget ----------- */

/* The connection of the client's request, or NULL. */
fp_conn *fence__proxy_conn_of(h2o_req_t *req);

/* After every poll: account the read buffers, enforce --max-conn-memory. */
void fence__proxy_on_sweep(uv_check_t *h);

/* A client connects: hand it to H2O (or make room, or refuse it). */
void fence__proxy_on_accept(uv_stream_t *listener, int status);

#endif /* FENCE_PROXY_PROXY_INT_H */
