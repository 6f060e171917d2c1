/* libfence: locks with a background keepalive, and the plain protocol calls
 * (LEASE.*, LOCK, UNLOCK, ACQUIRE, LOCK.INFO, INFO). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/assert.h"
#include "libfence/internal.h"
#include "libfence/pure.h"
#include "base/limits.h"
#include "token/signtok.h"

_Static_assert(FENCE_SIGNED_TOKEN_BUF_SIZE >= FENCE_SIGNTOK_BUF_SIZE,
               "the public buffer size holds any signed token");

/* Longest decimal u64 plus NUL. */
#define U64_BUF 24

/* The deadline of a call that may wait wait_ms in the server's queue. */
static uint64_t call_deadline(const fence_client *c, uint64_t wait_ms)
{
    return fence_monotonic_ms() + c->opts.timeout_ms + wait_ms;
}

/* Check a lock name: 1..FENCE_NAME_MAX bytes. */
static int check_name(const char *name)
{
    if (name == NULL)
        return fence__fail(FENCE_EINVAL, "lock name is NULL");
    size_t n = strlen(name);
    if (n == 0 || n > FENCE_NAME_MAX)
        return fence__fail(FENCE_EINVAL, "lock name must be 1..%d bytes, not %zu",
                           FENCE_NAME_MAX, n);
    return 0;
}

/* Check a TTL against the server's bounds. */
static int check_ttl(uint64_t ttl_ms)
{
    if (ttl_ms < FENCE_TTL_MS_MIN || ttl_ms > FENCE_TTL_MS_MAX)
        return fence__fail(FENCE_EINVAL, "ttl %" PRIu64 " ms is outside %d..%llu",
                           ttl_ms, FENCE_TTL_MS_MIN,
                           (unsigned long long)FENCE_TTL_MS_MAX);
    return 0;
}

/* ---- Keepalive thread -------------------------------------------------- */

/* Now on c's lease clock. */
uint64_t fence__lease_now(const fence_client *c)
{
    return c->clock != NULL ? c->clock(c->clock_arg) : fence_monotonic_ms();
}

/* See testhook.h. */
void fence__client_set_clock(fence_client *c, fence__clock_fn fn, void *arg)
{
    pthread_mutex_lock(&c->mu);
    FENCE_ASSERT(!c->ka_started);
    c->clock = fn;
    c->clock_arg = arg;
    pthread_mutex_unlock(&c->mu);
}

/* See testhook.h. */
void fence__ka_sync(fence_client *c)
{
    pthread_mutex_lock(&c->mu);
    if (c->ka_started) {
        uint64_t seen = c->ka_sleeps;
        pthread_cond_broadcast(&c->ka_cv);
        while (c->ka_sleeps == seen && !c->ka_stop)
            pthread_cond_wait(&c->ka_done_cv, &c->mu);
    }
    pthread_mutex_unlock(&c->mu);
}

/* Mark l lost (under c->mu). */
static void mark_lost(struct fence_lock *l, int rc)
{
    if (!l->lost) {
        l->lost = true;
        l->lost_rc = rc;
    }
}

/* Call l's lost callback if it is due (lost, not yet notified, set).  Called
 * with c->mu held and l->busy set; drops and retakes the mutex around the
 * callback so the callback may call other libfence functions. */
static void notify_lost(fence_client *c, struct fence_lock *l)
{
    if (!l->lost || l->notified || l->cb == NULL)
        return;
    l->notified = true;
    fence_lost_cb cb = l->cb;
    void *arg = l->cb_arg;
    int rc = l->lost_rc;
    pthread_mutex_unlock(&c->mu);
    cb(l, rc, arg);
    pthread_mutex_lock(&c->mu);
}

/* Renew one lease once.  Called without c->mu; updates l under it. */
static void renew_one(fence_client *c, struct fence_lock *l)
{
    pthread_mutex_lock(&c->mu);
    uint64_t valid_until = l->valid_until_ms;
    pthread_mutex_unlock(&c->mu);

    uint64_t now = fence__lease_now(c);
    if (now >= valid_until) {
        pthread_mutex_lock(&c->mu);
        mark_lost(l, FENCE_ELEASELOST);
        pthread_mutex_unlock(&c->mu);
        return;
    }
    /* Never wait past valid-until for the reply: by then the lease counts
     * as lost, and the owner must hear about it on time.  (The lease clock
     * says how long is left; the network deadline is on CLOCK_MONOTONIC.) */
    uint64_t wait = valid_until - now;
    if (wait > c->opts.timeout_ms)
        wait = c->opts.timeout_ms;
    uint64_t deadline = fence_monotonic_ms() + wait;
    char lease_s[U64_BUF];
    snprintf(lease_s, sizeof(lease_s), "%" PRIu64, l->lease);
    const char *argv[] = {"LEASE.KEEPALIVE", lease_s};
    size_t lens[] = {strlen(argv[0]), strlen(lease_s)};
    uint64_t sent = fence__lease_now(c);
    redisReply *r = NULL;
    int rc = fence__call(c, &c->ka_conn, deadline, 2, argv, lens, &r);
    uint64_t ttl = 0;
    if (rc == 0) {
        if (r->type == REDIS_REPLY_ERROR)
            rc = fence__reply_error(r, "LEASE.KEEPALIVE");
        else if (!fence__reply_u64(r, &ttl) || ttl == 0)
            rc = fence__fail(FENCE_EPROTO, "LEASE.KEEPALIVE: unexpected reply");
        freeReplyObject(r);
    }
    pthread_mutex_lock(&c->mu);
    if (rc == 0) {
        /* The reply is how long the lease is guaranteed from our send time:
         * the TTL, or, answered by a cluster's leader without a log entry,
         * the TTL minus its election timeout (what a leader change may take
         * from it, docs/leases.md).  So valid-until follows the server's
         * guarantee as it is, and the next renewal comes a third of it
         * later. */
        uint64_t margin = fence__margin_ms(ttl, c->opts.margin_ms);
        uint64_t v = fence__valid_until(sent, ttl, margin);
        if (v > l->valid_until_ms)
            l->valid_until_ms = v;
        l->renew_at_ms = fence__renew_at(sent, ttl);
    } else if (rc == FENCE_ENOLEASE) {
        mark_lost(l, FENCE_ENOLEASE);
    } else {
        /* Transient: try again soon, but never later than valid-until,
         * when the lease counts as lost. */
        uint64_t retry = fence__lease_now(c) + (l->ttl_ms / 20 > 10 ? l->ttl_ms / 20 : 10);
        l->renew_at_ms = retry < l->valid_until_ms ? retry : l->valid_until_ms;
    }
    pthread_mutex_unlock(&c->mu);
}

/* The keepalive thread: renew each registered lease when due, declare it
 * lost on NOLEASE or when valid-until passes, and call lost callbacks. */
static void *ka_main(void *arg)
{
    fence_client *c = arg;
    pthread_mutex_lock(&c->mu);
    while (!c->ka_stop) {
        uint64_t now = fence__lease_now(c);
        struct fence_lock *due = NULL;
        uint64_t next = UINT64_MAX;
        for (struct fence_lock *l = c->locks; l != NULL; l = l->next) {
            if (l->busy)
                continue;
            if (l->lost) {
                if (!l->notified && l->cb != NULL) {
                    due = l;
                    break;
                }
                continue;
            }
            uint64_t at = l->renew_at_ms < l->valid_until_ms ? l->renew_at_ms
                                                             : l->valid_until_ms;
            if (at <= now) {
                due = l;
                break;
            }
            if (at < next)
                next = at;
        }
        if (due == NULL) {
            /* With no lock, sleep one renew delay of the newest lock: a
             * lock registered meanwhile (same TTL) is due after that, so
             * ka_register need not wake us (one wake-up per cycle of a
             * client that locks and unlocks in a loop). */
            if (next == UINT64_MAX && c->locks == NULL && c->ka_idle_ms > 0)
                next = now + c->ka_idle_ms;
            c->ka_wake_ms = next;
            c->ka_sleeps++;
            pthread_cond_broadcast(&c->ka_done_cv); /* fence__ka_sync */
            if (next == UINT64_MAX) {
                pthread_cond_wait(&c->ka_cv, &c->mu);
            } else {
                /* next is on the lease clock, ka_cv on CLOCK_MONOTONIC. */
                uint64_t at = fence_monotonic_ms() + (next - now);
                struct timespec ts = {(time_t)(at / 1000),
                                      (long)(at % 1000) * 1000000L};
                pthread_cond_timedwait(&c->ka_cv, &c->mu, &ts);
            }
            c->ka_wake_ms = 0;
            continue;
        }
        due->busy = true;
        if (!due->lost) {
            pthread_mutex_unlock(&c->mu);
            renew_one(c, due);
            pthread_mutex_lock(&c->mu);
        }
        notify_lost(c, due);
        due->busy = false;
        pthread_cond_broadcast(&c->ka_done_cv);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* Start the keepalive thread if it is not running (under c->mu). */
static int ka_start_locked(fence_client *c)
{
    if (c->ka_started)
        return 0;
    int rv = pthread_create(&c->ka_thread, NULL, ka_main, c);
    if (rv != 0)
        return fence__fail(FENCE_ENOMEM, "cannot start keepalive thread: %s",
                           strerror(rv));
    c->ka_started = true;
    return 0;
}

/* Stop and join the keepalive thread (called by fence_client_close). */
void fence__ka_stop(fence_client *c)
{
    pthread_mutex_lock(&c->mu);
    bool started = c->ka_started;
    c->ka_stop = true;
    pthread_cond_broadcast(&c->ka_cv);
    pthread_mutex_unlock(&c->mu);
    if (started)
        pthread_join(c->ka_thread, NULL);
}

/* Register l with the keepalive thread (starting it if needed). */
static int ka_register(fence_client *c, struct fence_lock *l)
{
    pthread_mutex_lock(&c->mu);
    int rv = ka_start_locked(c);
    if (rv == 0) {
        l->next = c->locks;
        c->locks = l;
        l->registered = true;
        uint64_t at = l->renew_at_ms < l->valid_until_ms ? l->renew_at_ms
                                                          : l->valid_until_ms;
        uint64_t now = fence__lease_now(c);
        c->ka_idle_ms = at > now ? at - now : 0;
        /* Wake the thread only if it sleeps past this lock's due time (an
         * awake thread, ka_wake_ms 0, rescans the list anyway). */
        if (c->ka_wake_ms != 0 && at < c->ka_wake_ms)
            pthread_cond_broadcast(&c->ka_cv);
    }
    pthread_mutex_unlock(&c->mu);
    return rv;
}

/* Unregister l, waiting while the keepalive thread works on it. */
static void ka_unregister(fence_client *c, struct fence_lock *l)
{
    pthread_mutex_lock(&c->mu);
    while (l->busy)
        pthread_cond_wait(&c->ka_done_cv, &c->mu);
    if (l->registered) {
        struct fence_lock **pp = &c->locks;
        while (*pp != NULL && *pp != l)
            pp = &(*pp)->next;
        FENCE_ASSERT(*pp == l);
        *pp = l->next;
        l->registered = false;
    }
    pthread_mutex_unlock(&c->mu);
}

/* ---- Plain protocol calls ----------------------------------------------- */

/* Send argv and return the reply through *out; handles deadlines. */
static int simple_call(fence_client *c, uint64_t wait_ms, int argc,
                       const char **argv, redisReply **out)
{
    size_t lens[16];
    FENCE_ASSERT(argc <= 16);
    for (int i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    return fence__call(c, NULL, call_deadline(c, wait_ms), argc, argv, lens, out);
}

/* PING the server. */
int fence_client_ping(fence_client *c)
{
    if (c == NULL)
        return fence__fail(FENCE_EINVAL, "client is NULL");
    const char *argv[] = {"PING"};
    redisReply *r;
    int rc = simple_call(c, 0, 1, argv, &r);
    if (rc != 0)
        return rc;
    if (r->type == REDIS_REPLY_ERROR)
        rc = fence__reply_error(r, "PING");
    freeReplyObject(r);
    return rc;
}

/* LEASE.GRANT with a fresh REQID. */
int fence_lease_grant(fence_client *c, uint32_t ttl_ms, uint64_t *lease_out)
{
    if (c == NULL || lease_out == NULL)
        return fence__fail(FENCE_EINVAL, "client and lease_out must not be NULL");
    int rc = check_ttl(ttl_ms);
    if (rc != 0)
        return rc;
    char ttl_s[U64_BUF], id_s[U64_BUF];
    snprintf(ttl_s, sizeof(ttl_s), "%" PRIu32, ttl_ms);
    snprintf(id_s, sizeof(id_s), "%" PRIu64, fence__reqid());
    const char *argv[] = {"LEASE.GRANT", ttl_s, "REQID", id_s};
    redisReply *r;
    rc = simple_call(c, 0, 4, argv, &r);
    if (rc != 0)
        return rc;
    if (r->type == REDIS_REPLY_ERROR)
        rc = fence__reply_error(r, "LEASE.GRANT");
    else if (!fence__reply_u64(r, lease_out) || *lease_out == 0)
        rc = fence__fail(FENCE_EPROTO, "LEASE.GRANT: unexpected reply");
    freeReplyObject(r);
    return rc;
}

/* LEASE.KEEPALIVE. */
int fence_lease_keepalive(fence_client *c, uint64_t lease, uint64_t *ttl_ms_out)
{
    if (c == NULL)
        return fence__fail(FENCE_EINVAL, "client is NULL");
    char lease_s[U64_BUF];
    snprintf(lease_s, sizeof(lease_s), "%" PRIu64, lease);
    const char *argv[] = {"LEASE.KEEPALIVE", lease_s};
    redisReply *r;
    int rc = simple_call(c, 0, 2, argv, &r);
    if (rc != 0)
        return rc;
    uint64_t ttl;
    if (r->type == REDIS_REPLY_ERROR)
        rc = fence__reply_error(r, "LEASE.KEEPALIVE");
    else if (!fence__reply_u64(r, &ttl))
        rc = fence__fail(FENCE_EPROTO, "LEASE.KEEPALIVE: unexpected reply");
    else if (ttl_ms_out != NULL)
        *ttl_ms_out = ttl;
    freeReplyObject(r);
    return rc;
}

/* LEASE.REVOKE. */
int fence_lease_revoke(fence_client *c, uint64_t lease)
{
    if (c == NULL)
        return fence__fail(FENCE_EINVAL, "client is NULL");
    char lease_s[U64_BUF];
    snprintf(lease_s, sizeof(lease_s), "%" PRIu64, lease);
    const char *argv[] = {"LEASE.REVOKE", lease_s};
    redisReply *r;
    int rc = simple_call(c, 0, 2, argv, &r);
    if (rc != 0)
        return rc;
    if (r->type == REDIS_REPLY_ERROR)
        rc = fence__reply_error(r, "LEASE.REVOKE");
    freeReplyObject(r);
    return rc;
}

/* Read element i of an array reply as u64 (false if missing or not a
 * number). */
static bool elem_u64(const redisReply *r, size_t i, uint64_t *out)
{
    if (r->type != REDIS_REPLY_ARRAY || i >= r->elements)
        return false;
    return fence__reply_u64(r->element[i], out);
}

/* LEASE.INFO. */
int fence_lease_info_get(fence_client *c, uint64_t lease, fence_lease_info *out)
{
    if (c == NULL || out == NULL)
        return fence__fail(FENCE_EINVAL, "client and out must not be NULL");
    memset(out, 0, sizeof(*out));
    char lease_s[U64_BUF];
    snprintf(lease_s, sizeof(lease_s), "%" PRIu64, lease);
    const char *argv[] = {"LEASE.INFO", lease_s};
    redisReply *r;
    int rc = simple_call(c, 0, 2, argv, &r);
    if (rc != 0)
        return rc;
    if (r->type == REDIS_REPLY_ERROR)
        rc = fence__reply_error(r, "LEASE.INFO");
    else if (!elem_u64(r, 0, &out->ttl_ms) || !elem_u64(r, 1, &out->remaining_ms) ||
             !elem_u64(r, 2, &out->locks_held))
        rc = fence__fail(FENCE_EPROTO, "LEASE.INFO: unexpected reply");
    freeReplyObject(r);
    return rc;
}

/* UNLOCK name token. */
int fence_token_unlock(fence_client *c, const char *name, uint64_t token,
                       bool *released_out)
{
    if (c == NULL)
        return fence__fail(FENCE_EINVAL, "client is NULL");
    int rc = check_name(name);
    if (rc != 0)
        return rc;
    char token_s[U64_BUF];
    snprintf(token_s, sizeof(token_s), "%" PRIu64, token);
    const char *argv[] = {"UNLOCK", name, token_s};
    redisReply *r;
    rc = simple_call(c, 0, 3, argv, &r);
    if (rc != 0)
        return rc;
    uint64_t v = 0;
    if (r->type == REDIS_REPLY_ERROR)
        rc = fence__reply_error(r, "UNLOCK");
    else if (!fence__reply_u64(r, &v) || v > 1)
        rc = fence__fail(FENCE_EPROTO, "UNLOCK: unexpected reply");
    else if (released_out != NULL)
        *released_out = v == 1;
    freeReplyObject(r);
    return rc;
}

/* UNLOCK name token LEASE lease: one holder of a shared lock. */
static int unlock_lease(fence_client *c, const char *name, uint64_t token, uint64_t lease,
                        bool *released_out)
{
    char token_s[U64_BUF], lease_s[U64_BUF];
    snprintf(token_s, sizeof(token_s), "%" PRIu64, token);
    snprintf(lease_s, sizeof(lease_s), "%" PRIu64, lease);
    const char *argv[] = {"UNLOCK", name, token_s, "LEASE", lease_s};
    redisReply *r;
    int rc = simple_call(c, 0, 5, argv, &r);
    if (rc != 0)
        return rc;
    uint64_t v = 0;
    if (r->type == REDIS_REPLY_ERROR)
        rc = fence__reply_error(r, "UNLOCK");
    else if (!fence__reply_u64(r, &v) || v > 1)
        rc = fence__fail(FENCE_EPROTO, "UNLOCK: unexpected reply");
    else if (released_out != NULL)
        *released_out = v == 1;
    freeReplyObject(r);
    return rc;
}

/* Sends one "cmd name arg [WAIT wait_ms] REQID id [SIGNED]" with a fresh
 * REQID, the request shape LOCK and ACQUIRE share.  On 0 the reply (neither
 * an error nor nil) is handed out in *out for the caller to parse and free;
 * an error reply becomes its code and nil (the wait ran out) FENCE_EBUSY. */
static int wait_once(fence_client *c, const char *cmd, const char *name,
                     const char *arg, uint32_t wait_ms, unsigned flags,
                     redisReply **out)
{
    bool sign = (flags & FENCE_LOCK_SIGNED) != 0;
    int rc;
    char wait_s[U64_BUF], id_s[U64_BUF];
    snprintf(wait_s, sizeof(wait_s), "%" PRIu32, wait_ms);
    snprintf(id_s, sizeof(id_s), "%" PRIu64, fence__reqid());
    const char *argv[9];
    int argc = 0;
    argv[argc++] = cmd;
    argv[argc++] = name;
    argv[argc++] = arg;
    if (flags & FENCE_LOCK_SHARED)
        argv[argc++] = "SHARED";
    if (wait_ms > 0) {
        argv[argc++] = "WAIT";
        argv[argc++] = wait_s;
    }
    argv[argc++] = "REQID";
    argv[argc++] = id_s;
    if (sign)
        argv[argc++] = "SIGNED";
    FENCE_ASSERT(argc <= (int)(sizeof(argv) / sizeof(argv[0])));
    redisReply *r;
    rc = simple_call(c, wait_ms, argc, argv, &r);
    if (rc != 0)
        return rc;
    if (r->type == REDIS_REPLY_ERROR)
        rc = fence__reply_error(r, cmd);
    else if (r->type == REDIS_REPLY_NIL)
        rc = fence__fail(FENCE_EBUSY, "lock \"%.100s\" not acquired within %" PRIu32 " ms",
                         name, wait_ms);
    if (rc != 0) {
        freeReplyObject(r);
        return rc;
    }
    *out = r;
    return 0;
}

/* wait_once's arguments but the time, for fence__wait_retry. */
typedef struct wait_args {
    fence_client *c;
    const char *cmd, *name, *arg;
    unsigned flags;
} wait_args;

static int wait_once_cb(void *ctx, uint32_t left_ms, redisReply **out)
{
    const wait_args *w = ctx;
    return wait_once(w->c, w->cmd, w->name, w->arg, left_ms, w->flags, out);
}

/* Sends "cmd name arg [WAIT wait_ms] REQID id" (see wait_once), asking
 * again for the time left after an early nil (fence__wait_retry). */
static int wait_request(fence_client *c, const char *cmd, const char *name,
                        const char *arg, uint32_t wait_ms, unsigned flags,
                        redisReply **out)
{
    wait_args w = {c, cmd, name, arg, flags};
    int rc = fence__wait_retry(wait_ms, wait_once_cb, &w, out);
    if (rc == FENCE_EBUSY)
        fence__fail(rc, "lock \"%.100s\" not acquired within %" PRIu32 " ms", name, wait_ms);
    return rc;
}

/* Read a signed token reply (a bulk string) into buf. */
static int signed_reply(const redisReply *r, const char *cmd,
                        uint64_t *token_out, char *buf, size_t cap)
{
    if (r == NULL || (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_STATUS) ||
        !fence__parse_signed(r->str, r->len, token_out, buf, cap))
        return fence__fail(FENCE_EPROTO, "%s SIGNED: the reply is not a signed token", cmd);
    return 0;
}

/* LOCK name lease [WAIT ms] REQID id [SIGNED] (see fence__wait_retry for the
 * re-ask); with sbuf, SIGNED and the string into sbuf. */
static int lease_lock(fence_client *c, uint64_t lease, const char *name,
                      uint32_t wait_ms, uint64_t *token_out, char *sbuf,
                      size_t scap, bool shared)
{
    if (c == NULL || token_out == NULL)
        return fence__fail(FENCE_EINVAL, "client and token_out must not be NULL");
    if (sbuf != NULL && scap < FENCE_SIGNED_TOKEN_BUF_SIZE)
        return fence__fail(FENCE_EINVAL, "a signed token needs a buffer of %d bytes",
                           FENCE_SIGNED_TOKEN_BUF_SIZE);
    int rc = check_name(name);
    if (rc != 0)
        return rc;
    char lease_s[U64_BUF];
    snprintf(lease_s, sizeof(lease_s), "%" PRIu64, lease);
    redisReply *r;
    rc = wait_request(c, "LOCK", name, lease_s, wait_ms,
                      (sbuf != NULL ? FENCE_LOCK_SIGNED : 0u) | (shared ? FENCE_LOCK_SHARED : 0u),
                      &r);
    if (rc != 0)
        return rc;
    if (sbuf != NULL)
        rc = signed_reply(r, "LOCK", token_out, sbuf, scap);
    else if (!fence__reply_u64(r, token_out) || *token_out == 0)
        rc = fence__fail(FENCE_EPROTO, "LOCK: unexpected reply");
    freeReplyObject(r);
    return rc;
}

/* LOCK name lease [WAIT ms] REQID id. */
int fence_lease_lock(fence_client *c, uint64_t lease, const char *name,
                     uint32_t wait_ms, uint64_t *token_out)
{
    return lease_lock(c, lease, name, wait_ms, token_out, NULL, 0, false);
}

/* LOCK name lease [WAIT ms] REQID id SIGNED. */
int fence_lease_lock_signed(fence_client *c, uint64_t lease, const char *name,
                            uint32_t wait_ms, uint64_t *token_out,
                            char *signed_out, size_t signed_cap)
{
    if (signed_out == NULL)
        return fence__fail(FENCE_EINVAL, "signed_out must not be NULL");
    return lease_lock(c, lease, name, wait_ms, token_out, signed_out, signed_cap, false);
}

/* ACQUIRE name ttl [WAIT ms] REQID id [SIGNED] (see fence__wait_retry for the
 * re-ask); with sbuf, SIGNED: the reply is [signed token, lease]. */
static int acquire_raw(fence_client *c, const char *name, uint32_t ttl_ms,
                       uint32_t wait_ms, uint64_t *token_out,
                       uint64_t *lease_out, char *sbuf, size_t scap, bool shared)
{
    if (c == NULL || token_out == NULL || lease_out == NULL)
        return fence__fail(FENCE_EINVAL, "client, token_out and lease_out must not be NULL");
    if (sbuf != NULL && scap < FENCE_SIGNED_TOKEN_BUF_SIZE)
        return fence__fail(FENCE_EINVAL, "a signed token needs a buffer of %d bytes",
                           FENCE_SIGNED_TOKEN_BUF_SIZE);
    int rc = check_name(name);
    if (rc == 0)
        rc = check_ttl(ttl_ms);
    if (rc != 0)
        return rc;
    char ttl_s[U64_BUF];
    snprintf(ttl_s, sizeof(ttl_s), "%" PRIu32, ttl_ms);
    redisReply *r;
    rc = wait_request(c, "ACQUIRE", name, ttl_s, wait_ms,
                      (sbuf != NULL ? FENCE_LOCK_SIGNED : 0u) | (shared ? FENCE_LOCK_SHARED : 0u),
                      &r);
    if (rc != 0)
        return rc;
    if (sbuf != NULL) {
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 2)
            rc = fence__fail(FENCE_EPROTO, "ACQUIRE SIGNED: unexpected reply");
        else
            rc = signed_reply(r->element[0], "ACQUIRE", token_out, sbuf, scap);
        if (rc == 0 && (!elem_u64(r, 1, lease_out) || *lease_out == 0))
            rc = fence__fail(FENCE_EPROTO, "ACQUIRE SIGNED: unexpected reply");
    } else if (!elem_u64(r, 0, token_out) || !elem_u64(r, 1, lease_out) ||
               *token_out == 0 || *lease_out == 0) {
        rc = fence__fail(FENCE_EPROTO, "ACQUIRE: unexpected reply");
    }
    freeReplyObject(r);
    return rc;
}

/* ACQUIRE name ttl [WAIT ms] REQID id. */
int fence_lock_acquire_raw(fence_client *c, const char *name, uint32_t ttl_ms,
                           uint32_t wait_ms, uint64_t *token_out,
                           uint64_t *lease_out)
{
    return acquire_raw(c, name, ttl_ms, wait_ms, token_out, lease_out, NULL, 0, false);
}

/* ACQUIRE name ttl [WAIT ms] REQID id SIGNED. */
int fence_lock_acquire_raw_signed(fence_client *c, const char *name,
                                  uint32_t ttl_ms, uint32_t wait_ms,
                                  uint64_t *token_out, uint64_t *lease_out,
                                  char *signed_out, size_t signed_cap)
{
    if (signed_out == NULL)
        return fence__fail(FENCE_EINVAL, "signed_out must not be NULL");
    return acquire_raw(c, name, ttl_ms, wait_ms, token_out, lease_out, signed_out,
                       signed_cap, false);
}

/* LOCK.INFO name. */
int fence_lock_info_get(fence_client *c, const char *name, fence_lock_info *out)
{
    if (c == NULL || out == NULL)
        return fence__fail(FENCE_EINVAL, "client and out must not be NULL");
    memset(out, 0, sizeof(*out));
    int rc = check_name(name);
    if (rc != 0)
        return rc;
    const char *argv[] = {"LOCK.INFO", name};
    redisReply *r;
    rc = simple_call(c, 0, 2, argv, &r);
    if (rc != 0)
        return rc;
    if (r->type == REDIS_REPLY_ERROR) {
        rc = fence__reply_error(r, "LOCK.INFO");
    } else if (r->type == REDIS_REPLY_NIL) {
        out->held = false;
    } else if (!elem_u64(r, 0, &out->token) || !elem_u64(r, 1, &out->lease) ||
               !elem_u64(r, 2, &out->remaining_ms) || !elem_u64(r, 3, &out->waiters)) {
        rc = fence__fail(FENCE_EPROTO, "LOCK.INFO: unexpected reply");
    } else {
        out->held = true;
    }
    freeReplyObject(r);
    return rc;
}

/* INFO: copy the bulk text out. */
int fence_server_info(fence_client *c, char **text_out)
{
    if (c == NULL || text_out == NULL)
        return fence__fail(FENCE_EINVAL, "client and text_out must not be NULL");
    *text_out = NULL;
    const char *argv[] = {"INFO"};
    redisReply *r;
    int rc = simple_call(c, 0, 1, argv, &r);
    if (rc != 0)
        return rc;
    if (r->type == REDIS_REPLY_ERROR) {
        rc = fence__reply_error(r, "INFO");
    } else if (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_STATUS) {
        rc = fence__fail(FENCE_EPROTO, "INFO: unexpected reply");
    } else {
        char *t = malloc(r->len + 1);
        if (t == NULL) {
            rc = fence__fail(FENCE_ENOMEM, "out of memory");
        } else {
            memcpy(t, r->str, r->len);
            t[r->len] = '\0';
            *text_out = t;
        }
    }
    freeReplyObject(r);
    return rc;
}

/* ---- Locks with keepalive ----------------------------------------------- */

/* Allocate a lock handle for name. */
static struct fence_lock *lock_new(fence_client *c, const char *name, uint32_t ttl_ms)
{
    struct fence_lock *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return NULL;
    l->name = strdup(name);
    if (l->name == NULL) {
        free(l);
        return NULL;
    }
    l->c = c;
    l->ttl_ms = ttl_ms;
    return l;
}

/* Free a lock handle (already unregistered). */
static void lock_free(struct fence_lock *l)
{
    FENCE_ASSERT(!l->registered);
    free(l->signed_token);
    free(l->name);
    free(l);
}

/* Acquire: ACQUIRE in one round trip when the wait is short, else
 * LEASE.GRANT, keepalive of that lease while LOCK waits in the queue.
 * FENCE_LOCK_SIGNED adds SIGNED to the granting request. */
int fence_lock_acquire_ex(fence_client *c, const char *name, uint32_t ttl_ms,
                          uint32_t wait_ms, unsigned flags, fence_lock **out)
{
    if (c == NULL || out == NULL)
        return fence__fail(FENCE_EINVAL, "client and out must not be NULL");
    *out = NULL;
    const unsigned known = FENCE_LOCK_SIGNED | FENCE_LOCK_SHARED;
    if ((flags & ~known) != 0)
        return fence__fail(FENCE_EINVAL, "unknown flags 0x%x", flags & ~known);
    bool shared = (flags & FENCE_LOCK_SHARED) != 0;
    int rc = check_name(name);
    if (rc == 0)
        rc = check_ttl(ttl_ms);
    if (rc != 0)
        return rc;
    struct fence_lock *l = lock_new(c, name, ttl_ms);
    if (l == NULL)
        return fence__fail(FENCE_ENOMEM, "out of memory");
    l->shared = shared;
    char *sbuf = NULL;
    if (flags & FENCE_LOCK_SIGNED) {
        sbuf = l->signed_token = malloc(FENCE_SIGNED_TOKEN_BUF_SIZE);
        if (sbuf == NULL) {
            lock_free(l);
            return fence__fail(FENCE_ENOMEM, "out of memory");
        }
    }
    uint64_t margin = fence__margin_ms(ttl_ms, c->opts.margin_ms);

    if (fence__use_acquire(ttl_ms, wait_ms)) {
        uint64_t sent = fence__lease_now(c);
        rc = acquire_raw(c, name, ttl_ms, wait_ms, &l->token, &l->lease, sbuf,
                         FENCE_SIGNED_TOKEN_BUF_SIZE, shared);
        if (rc != 0)
            goto out_free_lock;
        l->dedicated = true;
        l->valid_until_ms = fence__valid_until(sent, ttl_ms, margin);
        l->renew_at_ms = fence__renew_at(sent, ttl_ms);
        rc = ka_register(c, l);
        if (rc != 0)
            goto out_unlock;
        *out = l;
        return 0;
    }

    uint64_t sent = fence__lease_now(c);
    rc = fence_lease_grant(c, ttl_ms, &l->lease);
    if (rc != 0)
        goto out_free_lock;
    l->valid_until_ms = fence__valid_until(sent, ttl_ms, margin);
    l->renew_at_ms = fence__renew_at(sent, ttl_ms);
    rc = ka_register(c, l);
    if (rc != 0)
        goto out_revoke;
    rc = lease_lock(c, l->lease, name, wait_ms, &l->token, sbuf,
                    FENCE_SIGNED_TOKEN_BUF_SIZE, shared);
    if (rc != 0)
        goto out_unregister;
    pthread_mutex_lock(&c->mu);
    bool lost = l->lost;
    pthread_mutex_unlock(&c->mu);
    if (lost) {
        /* The lease ran out while we waited (this process was paused, or
         * the server unreachable): the grant cannot be trusted. */
        rc = fence__fail(FENCE_ELEASELOST, "lease %" PRIu64 " lost while waiting for \"%.100s\"",
                         l->lease, name);
        ka_unregister(c, l);
        bool ignored;
        if (!shared) /* a shared hold goes with the revoke below */
            fence_token_unlock(c, name, l->token, &ignored);
        goto out_revoke;
    }
    *out = l;
    return 0;

out_unregister:
    ka_unregister(c, l);
out_revoke:
    {
        int saved = rc;
        char msg[FENCE_ERRMSG_BUF_SIZE];
        snprintf(msg, sizeof(msg), "%s", fence_client_errmsg(c));
        fence_lease_revoke(c, l->lease);
        fence__fail(saved, "%s", msg);
        rc = saved;
    }
    goto out_free_lock;
out_unlock:
    {
        int saved = rc;
        char msg[FENCE_ERRMSG_BUF_SIZE];
        snprintf(msg, sizeof(msg), "%s", fence_client_errmsg(c));
        bool ignored;
        if (shared)
            unlock_lease(c, name, l->token, l->lease, &ignored);
        else
            fence_token_unlock(c, name, l->token, &ignored);
        fence__fail(saved, "%s", msg);
        rc = saved;
    }
out_free_lock:
    lock_free(l);
    FENCE_ASSERT(rc != 0);
    return rc;
}

/* Acquire without flags. */
int fence_lock_acquire(fence_client *c, const char *name, uint32_t ttl_ms,
                       uint32_t wait_ms, fence_lock **out)
{
    return fence_lock_acquire_ex(c, name, ttl_ms, wait_ms, 0, out);
}

/* Try once. */
int fence_lock_try(fence_client *c, const char *name, uint32_t ttl_ms,
                   fence_lock **out)
{
    return fence_lock_acquire(c, name, ttl_ms, 0, out);
}

/* Set the lost callback, calling it at once if the lease is already lost. */
void fence_lock_on_lost(fence_lock *l, fence_lost_cb cb, void *arg)
{
    FENCE_ASSERT(l != NULL);
    fence_client *c = l->c;
    pthread_mutex_lock(&c->mu);
    /* From a lost callback (the keepalive thread, which set busy itself)
     * waiting would never end; the callback has run by then anyway. */
    bool in_ka = c->ka_started && pthread_equal(pthread_self(), c->ka_thread);
    while (l->busy && !in_ka)
        pthread_cond_wait(&c->ka_done_cv, &c->mu);
    l->cb = cb;
    l->cb_arg = arg;
    if (l->lost && !l->notified && cb != NULL && !in_ka) {
        l->busy = true;
        notify_lost(c, l);
        l->busy = false;
        pthread_cond_broadcast(&c->ka_done_cv);
    }
    pthread_cond_broadcast(&c->ka_cv);
    pthread_mutex_unlock(&c->mu);
}

/* Release: stop the keepalive, UNLOCK by token, revoke a non-dedicated
 * lease, free the handle. */
int fence_lock_release(fence_lock *l)
{
    if (l == NULL)
        return 0;
    fence_client *c = l->c;
    pthread_mutex_lock(&c->mu);
    bool in_ka = c->ka_started && pthread_equal(pthread_self(), c->ka_thread);
    pthread_mutex_unlock(&c->mu);
    if (in_ka)
        return fence__fail(FENCE_EINVAL, "fence_lock_release called from a lease-lost callback");
    ka_unregister(c, l);
    /* A lost lease has no lock left to release (the server dropped it, or
     * it ran out here first and the server drops it within the margin):
     * no request, so releasing never waits on an unreachable server. */
    pthread_mutex_lock(&c->mu);
    bool lost = l->lost;
    pthread_mutex_unlock(&c->mu);
    if (lost) {
        lock_free(l);
        return 0;
    }
    bool released = false;
    int rc = l->shared ? unlock_lease(c, l->name, l->token, l->lease, &released)
                       : fence_token_unlock(c, l->name, l->token, &released);
    if (rc == 0 && !l->dedicated)
        rc = fence_lease_revoke(c, l->lease);
    /* An UNLOCK answered 0 means the lock was already gone (lost lease):
     * nothing is left to release, which is success. */
    lock_free(l);
    return rc;
}

/* Return the fencing token of the grant (fixed for the handle's life). */
uint64_t fence_lock_token(const fence_lock *l)
{
    FENCE_ASSERT(l != NULL);
    return l->token;
}

/* Return the signed token string, or NULL when not asked for. */
const char *fence_lock_signed_token(const fence_lock *l)
{
    FENCE_ASSERT(l != NULL);
    return l->signed_token;
}

/* Return the id of the lease the lock is held under. */
uint64_t fence_lock_lease(const fence_lock *l)
{
    FENCE_ASSERT(l != NULL);
    return l->lease;
}

/* Return the lock's name (the handle's own copy). */
const char *fence_lock_name(const fence_lock *l)
{
    FENCE_ASSERT(l != NULL);
    return l->name;
}

/* Return the lease TTL the lock was acquired with. */
uint32_t fence_lock_ttl_ms(const fence_lock *l)
{
    FENCE_ASSERT(l != NULL);
    return l->ttl_ms;
}

/* valid-until under the client mutex (the keepalive thread moves it). */
uint64_t fence_lock_valid_until(const fence_lock *l)
{
    FENCE_ASSERT(l != NULL);
    pthread_mutex_lock(&l->c->mu);
    uint64_t v = l->lost ? 0 : l->valid_until_ms;
    pthread_mutex_unlock(&l->c->mu);
    return v;
}

/* Not lost and valid-until in the future.  Liveness only. */
bool fence_lock_valid(const fence_lock *l)
{
    return fence__lease_now(l->c) < fence_lock_valid_until(l);
}
