/* libfence internals shared by its files.  Private.  From the bottom:
 * errors.c (codes, messages), wire.c (one connection), call.c (the
 * request loop and the pool), lock.c and store.c (the calls), client.c
 * (the handle's open and close); none calls a file above it. */
#ifndef FENCE_CLIENT_INTERNAL_H
#define FENCE_CLIENT_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "libfence/pure.h"
#include "libfence/testhook.h"
#include "libfence/wire.h"
#include "fence.h"

/* One pooled (or the keepalive thread's own) connection. */
typedef struct fence__conn {
    fence__wire *wire;        /* NULL when not connected */
    fence__addr addr;         /* where wire is connected */
    struct fence__conn *next; /* next idle connection in the pool */
} fence__conn;

struct fence_client {
    pthread_mutex_t mu;        /* guards everything below that changes */
    pthread_cond_t pool_cv;    /* signalled when a connection is returned */
    fence_client_opts opts;    /* options with defaults filled in (the
                                * strings point at the copies below) */
    fence__wire_owned wire;    /* copies of the TLS and login options, the
                                * TLS context: wire.cfg for new connections */
    fence__addr addrs[FENCE__ADDRS_MAX]; /* known servers */
    size_t n_addrs;            /* entries used in addrs */
    size_t leader;             /* index in addrs of the believed leader */
    fence__conn *idle;         /* idle connections (LIFO) */
    uint32_t n_conns;          /* pooled connections open or checked out */
    uint64_t rand_state;       /* jitter generator state (under mu) */

    /* Keepalive thread. */
    pthread_cond_t ka_cv;      /* wakes the keepalive thread (CLOCK_MONOTONIC) */
    pthread_cond_t ka_done_cv; /* signalled when a lock stops being busy */
    pthread_t ka_thread;       /* valid when ka_started */
    bool ka_started;           /* the thread was created */
    bool ka_stop;              /* ask the thread to exit */
    fence__conn ka_conn;       /* the keepalive thread's own connection */
    struct fence_lock *locks;  /* locks whose leases are kept alive */
    uint64_t ka_wake_ms;       /* monotonic ms the sleeping keepalive thread
                                * wakes by itself; UINT64_MAX: only when
                                * woken; 0: awake (it rescans the list before
                                * sleeping again) */
    uint64_t ka_idle_ms;       /* renew delay of the newest lock: how long an
                                * idle thread sleeps, so that a lock
                                * registered after it went to sleep is due
                                * after it wakes anyway (no wake-up needed) */

    /* fence__client_set_notice: told (from the calling thread) when a
     * call's connection is lost and it starts reconnecting.  Set before
     * any call; NULL: nothing is told. */
    void (*notice)(void *arg, const char *msg);
    void *notice_arg;
    uint64_t ka_sleeps;        /* times the keepalive thread went to sleep
                                * (fence__ka_sync waits for the next one) */

    /* The lease clock (valid-until, renew times, the keepalive schedule):
     * fence_monotonic_ms when NULL, else a unit test's (set before the
     * keepalive thread starts, never changed after). */
    fence__clock_fn clock;
    void *clock_arg;
};

/* After a call's connection was lost, how long refusals from every known
 * server are still retried (a one-node server restarting) before the call
 * fails with the unknown outcome; never past the call's deadline. */
#define FENCE__REFUSED_RETRY_MS 2000u

/* Have msg told to fn (for fencectl's stderr) whenever a call on the pool
 * loses its connection and reconnects.  Not part of the public API. */
void fence__client_set_notice(fence_client *c, void (*fn)(void *arg, const char *msg),
                              void *arg);

struct fence_lock {
    fence_client *c;           /* owning client */
    char *name;                /* lock name (NUL-terminated copy) */
    uint64_t token;            /* fencing token (0 while still waiting) */
    uint64_t lease;            /* lease id */
    uint32_t ttl_ms;           /* lease TTL */
    bool dedicated;            /* lease from ACQUIRE: UNLOCK revokes it */
    bool shared;               /* FENCE_LOCK_SHARED: released by UNLOCK
                                  name token LEASE lease */
    char *signed_token;        /* the signed token string (FENCE_LOCK_SIGNED),
                                * or NULL */
    /* The fields below are guarded by c->mu. */
    uint64_t valid_until_ms;   /* send time + ttl - margin (monotonic) */
    uint64_t renew_at_ms;      /* next keepalive due (monotonic) */
    bool lost;                 /* NOLEASE seen or valid-until passed */
    int lost_rc;               /* FENCE_ENOLEASE or FENCE_ELEASELOST */
    bool notified;             /* the lost callback has been called */
    bool busy;                 /* the keepalive thread is working on it */
    bool registered;           /* in c->locks */
    fence_lost_cb cb;          /* lease-lost callback, or NULL */
    void *cb_arg;              /* its argument */
    struct fence_lock *next;   /* next in c->locks */
};

/* Record a message in the calling thread's error buffer and return rc. */
int fence__fail(int rc, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A fresh random 64-bit request id (never 0). */
uint64_t fence__reqid(void);

/* A waiting request (LOCK/ACQUIRE, SEM.ACQUIRE, LOCK.MULTI ... WAIT):
 * once(ctx, left_ms, out) sends it once with a fresh REQID and returns 0
 * with the reply in *out, an error code, or FENCE_EBUSY for nil.  The
 * server answers nil to a queued wait only when the wait times out or is
 * cancelled (it cancels a wait when its connection closes, and a retry with
 * the same REQID then gets that nil); so a nil clearly before wait_ms was
 * up is not "busy": once is called again for the time left, at most 16
 * times in all.  The old request is settled (nil), so the new one cannot be
 * applied twice.  Returns once's last result. */
int fence__wait_retry(uint32_t wait_ms, int (*once)(void *ctx, uint32_t left_ms, redisReply **out),
                      void *ctx, redisReply **out);

/* Send one command and wait for its reply, retrying (same argv, so the same
 * REQID) after TRYAGAIN, lost connections and timeouts, and following
 * NOTLEADER redirects, until deadline_ms (monotonic).  own: a dedicated
 * connection (the keepalive thread's) or NULL to use the pool.  On 0, *out
 * is a reply that is not an error the call handles itself (it may be an
 * error reply such as NOLEASE): the caller frees it with freeReplyObject.
 * Errors: FENCE_EUNREACHABLE, FENCE_ETIMEOUT, FENCE_EIO, FENCE_ETRYAGAIN,
 * FENCE_ENOTLEADER, FENCE_ENOMEM. */
int fence__call(fence_client *c, fence__conn *own, uint64_t deadline_ms,
                int argc, const char **argv, const size_t *lens,
                redisReply **out);

/* Turn an error reply into a code and an errmsg (returns the code). */
int fence__reply_error(const redisReply *r, const char *what);

/* Read a u64 from an integer reply (or a bulk/status holding digits). */
bool fence__reply_u64(const redisReply *r, uint64_t *out);

/* Close a connection's context (a no-op when not connected). */
void fence__conn_drop(fence__conn *k);

/* Stop and join the keepalive thread (lock.c; called by
 * fence_client_close). */
void fence__ka_stop(fence_client *c);

/* Now on c's lease clock (fence_monotonic_ms unless a test set its own). */
uint64_t fence__lease_now(const fence_client *c);

/* Run command on the connection with SIGPIPE blocked in this thread. */
redisReply *fence__command(redisContext *ctx, int argc, const char **argv,
                           const size_t *lens);

#endif /* FENCE_CLIENT_INTERNAL_H */
