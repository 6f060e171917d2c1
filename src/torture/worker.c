/* fence-torture-worker: one client process of the torture workload and of
 * the pause demo.
 *
 * It speaks RESP directly to fenced and to fence-store (through hiredis, no
 * libfence), and records every invocation and completion as one JSON line in
 * a history file, stamped with CLOCK_MONOTONIC (system-wide, so the histories
 * of several processes share one timeline).  The history format is described
 * in docs/testing.md ("Torture") and read by tools/torture_check.py.
 *
 * Loop mode (the torture workload), per iteration:
 *   LEASE.GRANT ttl; LOCK name lease WAIT w (the lease may expire while
 *   queued); FENCE.ADMIT fence token; FGET counter; hold a random time;
 *   FSET fence token counter value+1; FSET fence token rec:<id>:<n> record;
 *   UNLOCK name token; LEASE.REVOKE lease.
 * With --shared-pct P, P percent of the iterations are readers: LOCK name
 * lease WAIT w SHARED; FENCE.ADMIT; FGET; hold; FGET; FENCE.ADMIT again; a
 * "reread" event with both values; UNLOCK name token LEASE lease.
 * A keepalive thread renews the current lease every ttl/3 on its own
 * connection.  The worker never checks its own lease before writing: that is
 * the point, safety has to come from the resource.
 *
 * Once mode (the demo): the same steps once, writing --value to --key
 * instead of the counter, holding --hold-ms before the write.
 *
 * Outcomes in the history: "ok" (definite success), "fail" (definite failure:
 * an error reply or nil), "info" (unknown: timeout or connection lost; the
 * command may or may not have taken effect).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hiredis.h>

#include "base/version.h"

/* Most server addresses a worker can rotate through (cluster nodes). */
#define WORKER_ADDRS_MAX 8
/* Longest host name in an address. */
#define WORKER_HOST_MAX 128
/* Extra time on top of a command's own wait before the client gives up. */
#define WORKER_IO_TIMEOUT_MS 2000

/* One server address. */
typedef struct addr {
    char host[WORKER_HOST_MAX]; /* host name or IP, NUL-terminated */
    int port;                   /* TCP port */
} addr;

/* A connection that can fail over between several addresses. */
typedef struct endpoint {
    addr addrs[WORKER_ADDRS_MAX]; /* candidate servers */
    int naddrs;                   /* number of entries in addrs */
    int cur;                      /* index of the address in use */
    redisContext *ctx;            /* live connection or NULL */
} endpoint;

/* Worker configuration from the command line. */
typedef struct config {
    int id;                  /* worker id, used in the history ("w<id>") */
    const char *history;     /* history file path (appended) */
    const char *fenced;      /* fenced address list "h:p[,h:p...]" */
    const char *store;       /* fence-store address "h:p" */
    const char *lock;        /* lock name */
    const char *fence;       /* fence name at the store */
    const char *counter;     /* counter key (loop mode) */
    const char *key;         /* data key (once mode) */
    const char *value;       /* value to write (once mode) */
    uint64_t ttl_ms;         /* lease TTL */
    uint64_t wait_ms;        /* LOCK WAIT */
    uint64_t hold_max_ms;    /* longest hold in loop mode */
    uint64_t hold_ms;        /* hold before the write in once mode */
    uint64_t seed;           /* PRNG seed */
    uint64_t ops;            /* iterations in loop mode, 0 = forever */
    uint64_t long_pct;       /* percent of holds in [hold_max/2, hold_max] */
    uint64_t shared_pct;     /* percent of iterations that are readers */
    bool once;               /* once mode (demo) instead of the loop */
    bool elect;              /* --elect: lead the election cfg.lock instead of locking it */
} config;

static config cfg;                                   /* set once by parse_args */
static FILE *hist;                                   /* the history file */
static pthread_mutex_t hist_mu = PTHREAD_MUTEX_INITIALIZER; /* one line at a time */
static atomic_uint_fast64_t op_seq;                  /* next op sequence number */
static atomic_uint_fast64_t cur_lease;               /* lease the keepalive thread renews, 0 = none */
static uint64_t rng_state;                           /* PRNG state (main thread only) */

/* Returns CLOCK_MONOTONIC in nanoseconds.  It is system-wide, so stamps from
 * different processes are comparable; libfaketime is told not to fake it. */
static uint64_t mono_ns(void)
{
    struct timespec ts;
    int rc = clock_gettime(CLOCK_MONOTONIC, &ts);
    if (rc != 0) {
        abort();
    }
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Sleeps for ms milliseconds as measured on the monotonic clock (wall-clock
 * jumps neither shorten nor lengthen it).  It sleeps in relative steps and
 * re-reads the clock: libfaketime's clock_nanosleep(TIMER_ABSTIME) wrapper
 * returns at once even when told not to fake the monotonic clock. */
static void sleep_ms(uint64_t ms)
{
    uint64_t deadline = mono_ns() + ms * 1000000ULL;
    for (;;) {
        uint64_t now = mono_ns();
        if (now >= deadline) {
            return;
        }
        uint64_t left = deadline - now;
        struct timespec ts = {(time_t)(left / 1000000000ULL), (long)(left % 1000000000ULL)};
        nanosleep(&ts, NULL);
    }
}

/* Returns the next value of a xorshift64* generator (deterministic per seed;
 * only the main thread uses it). */
static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ULL;
}

/* Returns a uniform value in [lo, hi]. */
static uint64_t rnd_range(uint64_t lo, uint64_t hi)
{
    if (hi <= lo) {
        return lo;
    }
    return lo + rnd() % (hi - lo + 1);
}

/* Appends s to the buffer as a JSON string body (quotes and control
 * characters escaped), truncating at the buffer's end. */
static void json_escape(char *out, size_t cap, const char *s, size_t len)
{
    size_t o = 0;
    for (size_t i = 0; i < len && o + 7 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = (char)c;
        } else if (c < 0x20 || c >= 0x7f) {
            o += (size_t)snprintf(out + o, cap - o, "\\u%04x", c);
        } else {
            out[o++] = (char)c;
        }
    }
    out[o] = '\0';
}

/* Writes one history event: time, process, op, phase, the op's sequence
 * number, then the caller's extra JSON members (fmt may be NULL).  Each line
 * is written and flushed whole under a mutex, so a kill never leaves a
 * half-written line from this process except possibly the very last one. */
static void ev(const char *op, const char *phase, uint64_t n, const char *fmt, ...)
{
    char extra[4096] = "";
    if (fmt != NULL) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(extra, sizeof(extra), fmt, ap);
        va_end(ap);
    }
    pthread_mutex_lock(&hist_mu);
    fprintf(hist, "{\"t\":%" PRIu64 ",\"proc\":\"w%d\",\"op\":\"%s\",\"phase\":\"%s\",\"n\":%" PRIu64 "%s%s}\n",
            mono_ns(), cfg.id, op, phase, n, extra[0] ? "," : "", extra);
    fflush(hist);
    pthread_mutex_unlock(&hist_mu);
}

/* Parses "h:p[,h:p...]" into the endpoint's address list.  Returns 0, or -1
 * with a message on stderr for a malformed list. */
static int endpoint_parse(endpoint *e, const char *list)
{
    memset(e, 0, sizeof(*e));
    const char *p = list;
    while (*p != '\0') {
        if (e->naddrs == WORKER_ADDRS_MAX) {
            fprintf(stderr, "worker: too many addresses in '%s'\n", list);
            return -1;
        }
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *colon = memchr(p, ':', len);
        if (colon == NULL || (size_t)(colon - p) >= WORKER_HOST_MAX || colon == p) {
            fprintf(stderr, "worker: bad address in '%s' (want host:port)\n", list);
            return -1;
        }
        addr *a = &e->addrs[e->naddrs++];
        memcpy(a->host, p, (size_t)(colon - p));
        a->host[colon - p] = '\0';
        char *ep;
        long port = strtol(colon + 1, &ep, 10);
        if (ep != p + len || port <= 0 || port > 65535) {
            fprintf(stderr, "worker: bad port in '%s'\n", list);
            return -1;
        }
        a->port = (int)port;
        p = end ? end + 1 : p + len;
    }
    if (e->naddrs == 0) {
        fprintf(stderr, "worker: empty address list\n");
        return -1;
    }
    return 0;
}

/* Drops the endpoint's connection and moves on to its next address, so the
 * next command reconnects (used after I/O errors and NOTLEADER). */
static void endpoint_reset(endpoint *e, bool rotate)
{
    if (e->ctx != NULL) {
        redisFree(e->ctx);
        e->ctx = NULL;
    }
    if (rotate) {
        e->cur = (e->cur + 1) % e->naddrs;
    }
}

/* Makes sure the endpoint is connected.  Returns true on success; on failure
 * the address is rotated and false returned. */
static bool endpoint_connect(endpoint *e)
{
    if (e->ctx != NULL) {
        return true;
    }
    struct timeval tv = {WORKER_IO_TIMEOUT_MS / 1000, 0};
    addr *a = &e->addrs[e->cur];
    e->ctx = redisConnectWithTimeout(a->host, a->port, tv);
    if (e->ctx == NULL || e->ctx->err) {
        endpoint_reset(e, true);
        return false;
    }
    return true;
}

/* Result classes of one command. */
typedef enum res {
    RES_OK = 0,      /* a non-error reply */
    RES_FAIL = 1,    /* an error reply: definitely not applied */
    RES_UNKNOWN = 2, /* no reply (timeout, connection lost): maybe applied */
} res;

/* Sends one command (argv form) on the endpoint with a timeout of extra_ms
 * plus WORKER_IO_TIMEOUT_MS.  On success *out holds the reply (caller frees).
 * NOTLEADER and TRYAGAIN replies also rotate the address. */
static res call(endpoint *e, redisReply **out, uint64_t extra_ms, int argc, const char **argv)
{
    *out = NULL;
    if (!endpoint_connect(e)) {
        return RES_FAIL; /* nothing was sent */
    }
    uint64_t ms = extra_ms + WORKER_IO_TIMEOUT_MS;
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)((ms % 1000) * 1000)};
    redisSetTimeout(e->ctx, tv);
    redisReply *r = redisCommandArgv(e->ctx, argc, argv, NULL);
    if (r == NULL) {
        endpoint_reset(e, false);
        return RES_UNKNOWN;
    }
    *out = r;
    if (r->type == REDIS_REPLY_ERROR) {
        if (strncmp(r->str, "NOTLEADER", 9) == 0 || strncmp(r->str, "TRYAGAIN", 8) == 0) {
            endpoint_reset(e, true);
        }
        return RES_FAIL;
    }
    return RES_OK;
}

/* Formats the JSON member "err":"..." for an error reply, or for a connection
 * failure when r is NULL. */
static void err_member(char *buf, size_t cap, const endpoint *e, const redisReply *r)
{
    char esc[512];
    if (r != NULL && r->type == REDIS_REPLY_ERROR) {
        json_escape(esc, sizeof(esc), r->str, r->len);
    } else if (r != NULL && r->type == REDIS_REPLY_NIL) {
        snprintf(esc, sizeof(esc), "nil");
    } else if (r != NULL) {
        snprintf(esc, sizeof(esc), "unexpected reply type %d", r->type);
    } else {
        snprintf(esc, sizeof(esc), "no connection to %s:%d", e->addrs[e->cur].host, e->addrs[e->cur].port);
    }
    snprintf(buf, cap, "\"err\":\"%s\"", esc);
}

/* Parses an integer reply (or an integer in a bulk/status string) into *v.
 * Returns false when the reply is not a non-negative integer. */
static bool reply_u64(const redisReply *r, uint64_t *v)
{
    if (r == NULL) {
        return false;
    }
    if (r->type == REDIS_REPLY_INTEGER) {
        if (r->integer < 0) {
            return false;
        }
        *v = (uint64_t)r->integer;
        return true;
    }
    if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) {
        char *end;
        errno = 0;
        unsigned long long x = strtoull(r->str, &end, 10);
        if (errno != 0 || end == r->str || *end != '\0') {
            return false;
        }
        *v = x;
        return true;
    }
    return false;
}

/* Logs the completion of op n for a reply that was not the expected success:
 * "fail" for an error or nil, "info" for an unknown outcome.  A STALE error
 * also gets "stale":true and the store's highest token. */
static void ev_not_ok_m(const char *op, uint64_t n, res rc, const endpoint *e, const redisReply *r,
                        const char *members)
{
    char m[4800];
    err_member(m, 600, e, r);
    if (members != NULL && members[0] != '\0') {
        size_t len = strlen(m);
        snprintf(m + len, sizeof(m) - len, ",%s", members);
    }
    if (rc == RES_UNKNOWN) {
        ev(op, "info", n, "%s", m);
        return;
    }
    if (r != NULL && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "STALE", 5) == 0) {
        unsigned long long tok = 0, high = 0;
        if (sscanf(r->str, "STALE %llu %llu", &tok, &high) == 2) {
            ev(op, "fail", n, "%s,\"stale\":true,\"highest\":%llu", m, high);
            return;
        }
        ev(op, "fail", n, "%s,\"stale\":true", m);
        return;
    }
    ev(op, "fail", n, "%s", m);
}

/* Logs a not-ok completion without extra members (see ev_not_ok_m). */
static void ev_not_ok(const char *op, uint64_t n, res rc, const endpoint *e, const redisReply *r)
{
    ev_not_ok_m(op, n, rc, e, r, NULL);
}

/* The keepalive thread: every ttl/3 it renews the lease the main thread
 * published in cur_lease, on its own connection, and logs each renewal. */
static void *keepalive_main(void *arg)
{
    endpoint *e = arg;
    uint64_t period = cfg.ttl_ms / 3 ? cfg.ttl_ms / 3 : 1;
    for (;;) {
        sleep_ms(period);
        uint64_t lease = atomic_load(&cur_lease);
        if (lease == 0) {
            continue;
        }
        char ls[32];
        snprintf(ls, sizeof(ls), "%" PRIu64, lease);
        const char *argv[] = {"LEASE.KEEPALIVE", ls};
        uint64_t n = atomic_fetch_add(&op_seq, 1);
        ev("keepalive", "invoke", n, "\"lease\":%" PRIu64, lease);
        redisReply *r;
        res rc = call(e, &r, 0, 2, argv);
        uint64_t ttl;
        if (rc == RES_OK && reply_u64(r, &ttl)) {
            ev("keepalive", "ok", n, "\"lease\":%" PRIu64 ",\"ttl\":%" PRIu64, lease, ttl);
        } else {
            ev_not_ok("keepalive", n, rc == RES_OK ? RES_FAIL : rc, e, r);
            if (rc == RES_FAIL && r != NULL && r->type == REDIS_REPLY_ERROR &&
                strncmp(r->str, "NOLEASE", 7) == 0) {
                /* Stop renewing a lease the server says is gone. */
                uint_fast64_t expect = lease;
                atomic_compare_exchange_strong(&cur_lease, &expect, 0);
            }
        }
        if (r != NULL) {
            freeReplyObject(r);
        }
    }
    return NULL;
}

/* Grants a lease.  Returns its id, or 0 on any failure (logged). */
static uint64_t do_grant(endpoint *fe)
{
    char ttl[32];
    snprintf(ttl, sizeof(ttl), "%" PRIu64, cfg.ttl_ms);
    const char *argv[] = {"LEASE.GRANT", ttl};
    uint64_t n = atomic_fetch_add(&op_seq, 1);
    /* The wall clock is logged only to show clock faults took effect. */
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    ev("grant", "invoke", n, "\"ttl\":%" PRIu64 ",\"wall\":%lld", cfg.ttl_ms, (long long)wall.tv_sec);
    redisReply *r;
    res rc = call(fe, &r, 0, 2, argv);
    uint64_t lease = 0;
    if (rc == RES_OK && reply_u64(r, &lease) && lease != 0) {
        ev("grant", "ok", n, "\"lease\":%" PRIu64 ",\"ttl\":%" PRIu64, lease, cfg.ttl_ms);
    } else {
        lease = 0;
        ev_not_ok("grant", n, rc == RES_OK ? RES_FAIL : rc, fe, r);
    }
    if (r != NULL) {
        freeReplyObject(r);
    }
    return lease;
}

/* Locks cfg.lock with the lease, queueing up to cfg.wait_ms.  Returns the
 * token, or 0 when not granted (nil, error or unknown; logged). */
static uint64_t do_lock(endpoint *fe, uint64_t lease, bool shared)
{
    char ls[32], ws[32];
    snprintf(ls, sizeof(ls), "%" PRIu64, lease);
    snprintf(ws, sizeof(ws), "%" PRIu64, cfg.wait_ms);
    const char *argv[] = {"LOCK", cfg.lock, ls, "WAIT", ws, "SHARED"};
    /* --elect: ELECTION.CAMPAIGN name lease value WAIT ms, answered
     * [token, lease]; logged as the lock it is (the leader's token fences
     * the same way). */
    const char *eargv[] = {"ELECTION.CAMPAIGN", cfg.lock, ls, "worker", "WAIT", ws};
    uint64_t n = atomic_fetch_add(&op_seq, 1);
    char lk[600];
    json_escape(lk, sizeof(lk), cfg.lock, strlen(cfg.lock));
    ev("lock", "invoke", n, "\"lock\":\"%s\",\"lease\":%" PRIu64 ",\"wait\":%" PRIu64 "%s", lk, lease,
       cfg.wait_ms, shared ? ",\"shared\":1" : "");
    redisReply *r;
    res rc = cfg.elect ? call(fe, &r, cfg.wait_ms, 6, eargv)
                       : call(fe, &r, cfg.wait_ms, shared ? 6 : 5, argv);
    uint64_t token = 0;
    if (rc == RES_OK && cfg.elect && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        reply_u64(r->element[0], &token) && token != 0) {
        ev("lock", "ok", n, "\"lock\":\"%s\",\"lease\":%" PRIu64 ",\"token\":%" PRIu64, lk, lease, token);
    } else if (rc == RES_OK && !cfg.elect && r->type == REDIS_REPLY_INTEGER &&
               reply_u64(r, &token) && token != 0) {
        ev("lock", "ok", n, "\"lock\":\"%s\",\"lease\":%" PRIu64 ",\"token\":%" PRIu64 "%s", lk, lease,
           token, shared ? ",\"shared\":1" : "");
    } else {
        token = 0;
        ev_not_ok("lock", n, rc == RES_OK ? RES_FAIL : rc, fe, r);
    }
    if (r != NULL) {
        freeReplyObject(r);
    }
    return token;
}

/* Runs a fence-store command that answers OK (FENCE.ADMIT, FSET) and logs it
 * as op with the given JSON members.  Returns true on OK. */
static bool do_store_ok(endpoint *se, const char *op, const char *members, int argc, const char **argv)
{
    uint64_t n = atomic_fetch_add(&op_seq, 1);
    ev(op, "invoke", n, "%s", members);
    redisReply *r;
    res rc = call(se, &r, 0, argc, argv);
    bool ok = rc == RES_OK && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
    if (ok) {
        ev(op, "ok", n, "%s", members);
    } else {
        ev_not_ok_m(op, n, rc == RES_OK ? RES_FAIL : rc, se, r, members);
    }
    if (r != NULL) {
        freeReplyObject(r);
    }
    return ok;
}

/* Reads key at the store.  Returns true with *v set (0 for a missing key),
 * false on failure or a non-numeric value (logged). */
static bool do_read(endpoint *se, const char *key, uint64_t *v)
{
    const char *argv[] = {"FGET", key};
    uint64_t n = atomic_fetch_add(&op_seq, 1);
    char k[600];
    json_escape(k, sizeof(k), key, strlen(key));
    ev("read", "invoke", n, "\"key\":\"%s\"", k);
    redisReply *r;
    res rc = call(se, &r, 0, 2, argv);
    bool ok = false;
    if (rc == RES_OK && r->type == REDIS_REPLY_NIL) {
        *v = 0;
        ok = true;
    } else if (rc == RES_OK && r->type == REDIS_REPLY_STRING) {
        ok = reply_u64(r, v);
    }
    if (ok) {
        ev("read", "ok", n, "\"key\":\"%s\",\"value\":%" PRIu64, k, *v);
    } else {
        ev_not_ok("read", n, rc == RES_OK ? RES_FAIL : rc, se, r);
    }
    if (r != NULL) {
        freeReplyObject(r);
    }
    return ok;
}

/* Releases the lock by token (UNLOCK), logged; a shared hold (lease not 0)
 * by UNLOCK name token LEASE lease. */
static void do_unlock(endpoint *fe, uint64_t token, uint64_t lease)
{
    char ts[32], ls[32];
    snprintf(ts, sizeof(ts), "%" PRIu64, token);
    snprintf(ls, sizeof(ls), "%" PRIu64, lease);
    const char *argv[] = {cfg.elect ? "ELECTION.RESIGN" : "UNLOCK", cfg.lock, ts, "LEASE", ls};
    uint64_t n = atomic_fetch_add(&op_seq, 1);
    ev("unlock", "invoke", n, "\"token\":%" PRIu64, token);
    redisReply *r;
    res rc = call(fe, &r, 0, lease != 0 && !cfg.elect ? 5 : 3, argv);
    uint64_t v;
    if (rc == RES_OK && reply_u64(r, &v)) {
        ev("unlock", "ok", n, "\"token\":%" PRIu64 ",\"released\":%" PRIu64, token, v);
    } else {
        ev_not_ok("unlock", n, rc == RES_OK ? RES_FAIL : rc, fe, r);
    }
    if (r != NULL) {
        freeReplyObject(r);
    }
}

/* Revokes the lease (LEASE.REVOKE), logged. */
static void do_revoke(endpoint *fe, uint64_t lease)
{
    char ls[32];
    snprintf(ls, sizeof(ls), "%" PRIu64, lease);
    const char *argv[] = {"LEASE.REVOKE", ls};
    uint64_t n = atomic_fetch_add(&op_seq, 1);
    ev("revoke", "invoke", n, "\"lease\":%" PRIu64, lease);
    redisReply *r;
    res rc = call(fe, &r, 0, 2, argv);
    if (rc == RES_OK) {
        ev("revoke", "ok", n, "\"lease\":%" PRIu64, lease);
    } else {
        ev_not_ok("revoke", n, rc, fe, r);
    }
    if (r != NULL) {
        freeReplyObject(r);
    }
}

/* Picks a hold time: long_pct percent in [hold_max/2, hold_max] (around the
 * TTL by default), a quarter in [hold_max/10, hold_max/2], the rest short.
 * The keepalive thread keeps the lease alive while holding; only pauses and
 * network faults make it run out. */
static uint64_t pick_hold_ms(void)
{
    uint64_t p = rnd() % 100;
    uint64_t hi = cfg.hold_max_ms;
    if (p < cfg.long_pct) {
        return rnd_range(hi / 2, hi);
    }
    if (p < cfg.long_pct + 25) {
        return rnd_range(hi / 10, hi / 2);
    }
    return rnd_range(0, hi / 10);
}

/* Runs one iteration of the workload (or the demo's single pass).  Every
 * step is logged; a failed step abandons the iteration after releasing what
 * it holds, and the loop goes on. */
static void iteration(endpoint *fe, endpoint *se, uint64_t iter)
{
    uint64_t lease = do_grant(fe);
    /* The demo's single pass must not give up on a server that is still
     * starting (TRYAGAIN) or briefly unreachable. */
    for (int i = 0; cfg.once && lease == 0 && i < 100; i++) {
        sleep_ms(50);
        lease = do_grant(fe);
    }
    if (lease == 0) {
        sleep_ms(rnd_range(20, 100));
        return;
    }
    atomic_store(&cur_lease, lease);
    /* A reader (a shared hold) or a writer; no draw at all without
     * --shared-pct, so older runs replay as they were. */
    bool reader = !cfg.once && !cfg.elect && cfg.shared_pct > 0 && rnd() % 100 < cfg.shared_pct;
    uint64_t token = do_lock(fe, lease, reader);
    if (token == 0) {
        atomic_store(&cur_lease, 0);
        do_revoke(fe, lease);
        return;
    }
    char ts[32], fk[600], vs[64], rk[128], rv[128], members[4096], ck[600];
    snprintf(ts, sizeof(ts), "%" PRIu64, token);
    json_escape(fk, sizeof(fk), cfg.fence, strlen(cfg.fence));
    snprintf(members, sizeof(members), "\"fence\":\"%s\",\"token\":%" PRIu64, fk, token);
    const char *admit[] = {"FENCE.ADMIT", cfg.fence, ts};
    if (!do_store_ok(se, "admit", members, 3, admit)) {
        goto out_release;
    }
    if (cfg.once) {
        sleep_ms(cfg.hold_ms);
        char kk[600], vv[600];
        json_escape(kk, sizeof(kk), cfg.key, strlen(cfg.key));
        json_escape(vv, sizeof(vv), cfg.value, strlen(cfg.value));
        snprintf(members, sizeof(members), "\"fence\":\"%s\",\"token\":%" PRIu64 ",\"key\":\"%s\",\"value\":\"%s\"",
                 fk, token, kk, vv);
        const char *set[] = {"FSET", cfg.fence, ts, cfg.key, cfg.value};
        do_store_ok(se, "write", members, 5, set);
        goto out_release;
    }
    uint64_t v;
    if (!do_read(se, cfg.counter, &v)) {
        goto out_release;
    }
    if (reader) {
        /* A reader holds, reads again and asks the fence again: while its
         * token is still admitted no write can have come between (a
         * writer's token is above the phase's), so both reads agree. */
        sleep_ms(pick_hold_ms());
        uint64_t v2;
        if (!do_read(se, cfg.counter, &v2) || !do_store_ok(se, "admit", members, 3, admit)) {
            goto out_release;
        }
        uint64_t rn = atomic_fetch_add(&op_seq, 1);
        ev("reread", "invoke", rn, "\"token\":%" PRIu64, token);
        ev("reread", "ok", rn, "\"token\":%" PRIu64 ",\"first\":%" PRIu64 ",\"second\":%" PRIu64,
           token, v, v2);
        goto out_release;
    }
    sleep_ms(pick_hold_ms());
    snprintf(vs, sizeof(vs), "%" PRIu64, v + 1);
    json_escape(ck, sizeof(ck), cfg.counter, strlen(cfg.counter));
    snprintf(members, sizeof(members),
             "\"fence\":\"%s\",\"token\":%" PRIu64 ",\"key\":\"%s\",\"value\":%" PRIu64 ",\"read\":%" PRIu64,
             fk, token, ck, v + 1, v);
    const char *set[] = {"FSET", cfg.fence, ts, cfg.counter, vs};
    if (!do_store_ok(se, "write", members, 5, set)) {
        goto out_release;
    }
    /* The append-style record: a key nobody else writes, so if its write
     * was acknowledged it must be there at the end, whatever crashed. */
    snprintf(rk, sizeof(rk), "rec:w%d:%" PRIu64, cfg.id, iter);
    snprintf(rv, sizeof(rv), "%" PRIu64 ":%" PRIu64, token, v + 1);
    snprintf(members, sizeof(members), "\"fence\":\"%s\",\"token\":%" PRIu64 ",\"key\":\"%s\",\"value\":\"%s\"",
             fk, token, rk, rv);
    const char *rec[] = {"FSET", cfg.fence, ts, rk, rv};
    do_store_ok(se, "record", members, 5, rec);
out_release:
    do_unlock(fe, token, reader ? lease : 0);
    atomic_store(&cur_lease, 0);
    do_revoke(fe, lease);
}

/* Prints the usage text. */
static void usage(FILE *f)
{
    fprintf(f,
            "usage: fence-torture-worker --id N --history FILE --fenced H:P[,H:P...] --store H:P [options]\n"
            "  --lock NAME        lock name (default torture)\n"
            "  --fence NAME       fence name at the store (default torture)\n"
            "  --counter KEY      counter key (default counter)\n"
            "  --ttl-ms MS        lease TTL (default 1000)\n"
            "  --wait-ms MS       LOCK WAIT (default 5000)\n"
            "  --hold-max-ms MS   longest hold in the loop (default 1000)\n"
            "  --seed N           PRNG seed (default 1)\n"
            "  --ops N            iterations, 0 = until killed (default 0)\n"
            "  --long-pct P       percent of holds in [hold-max/2, hold-max] (default 5)\n"
            "  --shared-pct P     percent of iterations that read under a shared lock\n"
            "                     (LOCK ... SHARED; read, hold, read, admit again; default 0)\n"
            "  --once             demo mode: one pass writing --value to --key after --hold-ms\n"
            "  --elect            lead the election --lock (ELECTION.CAMPAIGN / RESIGN)\n"
            "  --key KEY --value V --hold-ms MS\n");
}

/* Parses a non-negative decimal option value or exits with a message. */
static uint64_t opt_u64(const char *name, const char *s)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || s[0] == '-') {
        fprintf(stderr, "worker: %s wants a non-negative integer, got '%s'\n", name, s);
        exit(2);
    }
    return v;
}

/* Parses the command line into cfg, exiting with a message on bad input. */
static void parse_args(int argc, char **argv)
{
    cfg = (config){.id = -1, .lock = "torture", .fence = "torture", .counter = "counter", .key = "data",
                   .value = "x", .ttl_ms = 1000, .wait_ms = 5000, .hold_max_ms = 1000, .seed = 1, .long_pct = 5};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0) {
            usage(stdout);
            exit(0);
        }
        if (strcmp(a, "--once") == 0) {
            cfg.once = true;
            continue;
        }
        if (strcmp(a, "--elect") == 0) {
            cfg.elect = true;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "worker: %s needs a value (or is unknown)\n", a);
            usage(stderr);
            exit(2);
        }
        const char *v = argv[++i];
        if (strcmp(a, "--id") == 0) cfg.id = (int)opt_u64(a, v);
        else if (strcmp(a, "--history") == 0) cfg.history = v;
        else if (strcmp(a, "--fenced") == 0) cfg.fenced = v;
        else if (strcmp(a, "--store") == 0) cfg.store = v;
        else if (strcmp(a, "--lock") == 0) cfg.lock = v;
        else if (strcmp(a, "--fence") == 0) cfg.fence = v;
        else if (strcmp(a, "--counter") == 0) cfg.counter = v;
        else if (strcmp(a, "--key") == 0) cfg.key = v;
        else if (strcmp(a, "--value") == 0) cfg.value = v;
        else if (strcmp(a, "--ttl-ms") == 0) cfg.ttl_ms = opt_u64(a, v);
        else if (strcmp(a, "--wait-ms") == 0) cfg.wait_ms = opt_u64(a, v);
        else if (strcmp(a, "--hold-max-ms") == 0) cfg.hold_max_ms = opt_u64(a, v);
        else if (strcmp(a, "--hold-ms") == 0) cfg.hold_ms = opt_u64(a, v);
        else if (strcmp(a, "--seed") == 0) cfg.seed = opt_u64(a, v);
        else if (strcmp(a, "--ops") == 0) cfg.ops = opt_u64(a, v);
        else if (strcmp(a, "--long-pct") == 0) cfg.long_pct = opt_u64(a, v);
        else if (strcmp(a, "--shared-pct") == 0) cfg.shared_pct = opt_u64(a, v);
        else {
            fprintf(stderr, "worker: unknown option %s\n", a);
            usage(stderr);
            exit(2);
        }
    }
    if (cfg.id < 0 || cfg.history == NULL || cfg.fenced == NULL || cfg.store == NULL) {
        fprintf(stderr, "worker: --id, --history, --fenced and --store are required\n");
        usage(stderr);
        exit(2);
    }
    if (cfg.long_pct > 75) {
        fprintf(stderr, "worker: --long-pct must be <= 75\n");
        exit(2);
    }
    if (cfg.ttl_ms == 0) {
        fprintf(stderr, "worker: --ttl-ms must be > 0\n");
        exit(2);
    }
}

/* Runs the worker: parses the options, opens the history, starts the
 * keepalive thread, then runs the loop (or the demo's single pass).  It is
 * stopped by a signal; the history stays consistent line by line. */
int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--version") == 0) {
        printf("fence-torture-worker %s\n", FENCE_VERSION);
        return 0;
    }
    parse_args(argc, argv);
    static endpoint fe, ke, se;
    if (endpoint_parse(&fe, cfg.fenced) != 0 || endpoint_parse(&ke, cfg.fenced) != 0 ||
        endpoint_parse(&se, cfg.store) != 0) {
        return 2;
    }
    hist = fopen(cfg.history, "a");
    if (hist == NULL) {
        fprintf(stderr, "worker: cannot open history %s: %s\n", cfg.history, strerror(errno));
        return 2;
    }
    rng_state = cfg.seed * 0x9E3779B97F4A7C15ULL + (uint64_t)cfg.id + 1;
    atomic_store(&op_seq, 1);
    pthread_t ka;
    if (pthread_create(&ka, NULL, keepalive_main, &ke) != 0) {
        fprintf(stderr, "worker: cannot start the keepalive thread\n");
        return 2;
    }
    ev("start", "ok", 0, "\"pid\":%d,\"ttl\":%" PRIu64, (int)getpid(), cfg.ttl_ms);
    if (cfg.once) {
        iteration(&fe, &se, 0);
    } else {
        for (uint64_t i = 0; cfg.ops == 0 || i < cfg.ops; i++) {
            iteration(&fe, &se, i);
        }
    }
    ev("exit", "ok", 0, NULL);
    return 0;
}
