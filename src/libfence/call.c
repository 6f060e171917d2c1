/* libfence's request loop and its connection pool: one command sent and
 * its reply awaited, retried with the same REQID after TRYAGAIN, lost
 * connections and timeouts, NOTLEADER redirects followed, reconnect
 * backoff with jitter; the monotonic clock and request ids.  Below the
 * handle's life (client.c) and the lock calls (lock.c, store.c); on the
 * connection (wire.c). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "base/assert.h"
#include "libfence/internal.h"

/* Read CLOCK_MONOTONIC in milliseconds. */
uint64_t fence_monotonic_ms(void)
{
    struct timespec ts;
    int rv = clock_gettime(CLOCK_MONOTONIC, &ts);
    FENCE_ASSERT(rv == 0);
    (void)rv;
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* splitmix64: a small mixing step used for REQIDs when getrandom fails and
 * for backoff jitter. */
static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Draw a random non-zero 64-bit request id from the kernel (falling back to
 * a mix of time, pid and a counter if getrandom is unavailable). */
uint64_t fence__reqid(void)
{
    static __thread uint64_t fallback;
    uint64_t id = 0;
    while (id == 0) {
        if (getrandom(&id, sizeof(id), GRND_NONBLOCK) != (ssize_t)sizeof(id)) {
            if (fallback == 0)
                fallback = fence_monotonic_ms() ^ ((uint64_t)getpid() << 32) ^
                           (uint64_t)(uintptr_t)&fallback;
            id = splitmix64(&fallback);
        }
    }
    return id;
}

/* Close a connection's context. */
void fence__conn_drop(fence__conn *k)
{
    if (k->wire != NULL) {
        fence__wire_close(k->wire);
        k->wire = NULL;
    }
}

/* Run a command with SIGPIPE blocked in this thread, so a write to a closed
 * socket becomes an EPIPE error instead of killing the process; a SIGPIPE
 * raised meanwhile is consumed before the mask is restored. */
redisReply *fence__command(redisContext *ctx, int argc, const char **argv,
                           const size_t *lens)
{
    sigset_t pipe_set, old_set, pending;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
    redisReply *r = redisCommandArgv(ctx, argc, argv, lens);
    sigemptyset(&pending);
    if (sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) &&
        !sigismember(&old_set, SIGPIPE)) {
        struct timespec zero = {0, 0};
        int saved = errno;
        while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR) {
        }
        errno = saved;
    }
    pthread_sigmask(SIG_SETMASK, &old_set, NULL);
    return r;
}

/* Sleep ms milliseconds (restarting after signals). */
static void sleep_ms(uint64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

/* Pause before the next attempt, never past the deadline.  Returns false
 * if the deadline has passed. */
static bool backoff(fence_client *c, uint32_t attempt, uint64_t deadline_ms)
{
    pthread_mutex_lock(&c->mu);
    uint32_t r = (uint32_t)splitmix64(&c->rand_state);
    pthread_mutex_unlock(&c->mu);
    uint64_t ms = fence__backoff_ms(attempt, c->opts.backoff_ms_min,
                                    c->opts.backoff_ms_max, r);
    uint64_t now = fence_monotonic_ms();
    if (now >= deadline_ms)
        return false;
    if (now + ms > deadline_ms)
        ms = deadline_ms - now;
    sleep_ms(ms);
    return fence_monotonic_ms() < deadline_ms;
}

/* Connect k to the address currently believed to be the leader.  0, or
 * FENCE_EUNREACHABLE (then the next address becomes the candidate; *refused
 * tells whether the server refused the connection, i.e. nothing listens
 * there, as opposed to a timeout). */
static int conn_open(fence_client *c, fence__conn *k, uint64_t deadline_ms, bool *refused)
{
    *refused = false;
    FENCE_ASSERT(k->wire == NULL);
    pthread_mutex_lock(&c->mu);
    fence__addr a = c->addrs[c->leader];
    pthread_mutex_unlock(&c->mu);
    uint64_t now = fence_monotonic_ms();
    uint64_t ms = c->opts.connect_timeout_ms;
    if (deadline_ms > now && deadline_ms - now < ms)
        ms = deadline_ms - now;
    if (ms == 0)
        ms = 1;
    char err[FENCE_ERRMSG_BUF_SIZE];
    fence__wire *w;
    int rv = fence__wire_open(&a, &c->wire.cfg, ms, &w, refused, err, sizeof(err));
    if (rv != 0) {
        char where[FENCE__HOST_MAX + 16];
        fence__addr_format(&a, where, sizeof(where));
        fence__fail(rv, "cannot connect to %s: %s", where, err);
        if (rv != FENCE_EUNREACHABLE)
            return rv;
        /* Try the next known server next time. */
        pthread_mutex_lock(&c->mu);
        if (fence__addr_equal(&c->addrs[c->leader], &a))
            c->leader = (c->leader + 1) % c->n_addrs;
        pthread_mutex_unlock(&c->mu);
        return FENCE_EUNREACHABLE;
    }
    k->wire = w;
    k->addr = a;
    return 0;
}

/* Take an idle connection from the pool (or a fresh, unconnected one),
 * waiting while pool_max connections are in use.  NULL on timeout or lack of
 * memory (errmsg set). */
static fence__conn *pool_get(fence_client *c, uint64_t deadline_ms)
{
    pthread_mutex_lock(&c->mu);
    for (;;) {
        if (c->idle != NULL) {
            fence__conn *k = c->idle;
            c->idle = k->next;
            k->next = NULL;
            pthread_mutex_unlock(&c->mu);
            return k;
        }
        if (c->n_conns < c->opts.pool_max) {
            fence__conn *k = calloc(1, sizeof(*k));
            if (k != NULL)
                c->n_conns++;
            pthread_mutex_unlock(&c->mu);
            if (k == NULL)
                fence__fail(FENCE_ENOMEM, "out of memory");
            return k;
        }
        struct timespec ts = {(time_t)(deadline_ms / 1000),
                              (long)(deadline_ms % 1000) * 1000000L};
        if (pthread_cond_timedwait(&c->pool_cv, &c->mu, &ts) == ETIMEDOUT &&
            c->idle == NULL) {
            pthread_mutex_unlock(&c->mu);
            fence__fail(FENCE_ETIMEOUT, "all %u pooled connections busy",
                        c->opts.pool_max);
            return NULL;
        }
    }
}

/* Return a connection to the pool (closing it if it is broken or points at
 * a server that is no longer believed to be the leader). */
static void pool_put(fence_client *c, fence__conn *k)
{
    pthread_mutex_lock(&c->mu);
    if (k->wire != NULL && (fence__wire_broken(k->wire) || !fence__addr_equal(&k->addr, &c->addrs[c->leader])))
        fence__conn_drop(k);
    k->next = c->idle;
    c->idle = k;
    pthread_cond_signal(&c->pool_cv);
    pthread_mutex_unlock(&c->mu);
}

/* Make addr the believed leader, adding it to the known list if new (the
 * last slot is reused when the list is full). */
static void set_leader(fence_client *c, const fence__addr *addr)
{
    pthread_mutex_lock(&c->mu);
    size_t i;
    for (i = 0; i < c->n_addrs; i++)
        if (fence__addr_equal(&c->addrs[i], addr))
            break;
    if (i == c->n_addrs) {
        if (c->n_addrs < FENCE__ADDRS_MAX)
            c->n_addrs++;
        i = c->n_addrs - 1;
        c->addrs[i] = *addr;
    }
    c->leader = i;
    pthread_mutex_unlock(&c->mu);
}

/* Move to the next known server (NOTLEADER without an address). */
static void next_leader(fence_client *c)
{
    pthread_mutex_lock(&c->mu);
    c->leader = (c->leader + 1) % c->n_addrs;
    pthread_mutex_unlock(&c->mu);
}

/* See internal.h. */
void fence__client_set_notice(fence_client *c, void (*fn)(void *arg, const char *msg),
                              void *arg)
{
    FENCE_ASSERT(c != NULL);
    c->notice = fn;
    c->notice_arg = arg;
}

/* The request loop; see internal.h.  Every attempt sends the same argv, so
 * a command with a REQID is applied at most once however often it is sent. */
int fence__call(fence_client *c, fence__conn *own, uint64_t deadline_ms,
                int argc, const char **argv, const size_t *lens,
                redisReply **out)
{
    FENCE_ASSERT(c != NULL);
    FENCE_ASSERT(argc > 0);
    FENCE_ASSERT(out != NULL);
    *out = NULL;
    int last = FENCE_EUNREACHABLE;
    bool ever_connected = false;
    uint32_t attempt = 0;    /* attempts that ended in a pause */
    uint32_t redirects = 0;  /* NOTLEADER redirects followed */
    uint32_t refusals = 0;   /* connection attempts refused in a row */
    uint64_t refused_since = 0; /* when the first of those refusals came */
    bool told = false;       /* the notice hook heard of a lost connection */
    bool pause = false;      /* pause (backoff) before the next attempt */
    fence__fail(0, "%s", "");
    for (;;) {
        if (pause && !backoff(c, attempt++, deadline_ms))
            break;
        pause = true;
        fence__conn *k = own ? own : pool_get(c, deadline_ms);
        if (k == NULL)
            return FENCE_ETIMEOUT;
        if (k->wire == NULL) {
            bool refused;
            int rv = conn_open(c, k, deadline_ms, &refused);
            if (rv != 0) {
                if (!own)
                    pool_put(c, k);
                if (rv == FENCE_ENOMEM || rv == FENCE_EAUTH)
                    return rv;
                if (!ever_connected)
                    last = rv;
                /* Nothing listens at any known server (each refused twice
                 * in a row, with a backoff between): that will not change
                 * within the timeout often enough to be worth waiting for,
                 * so fail now.  After a lost connection (a request may
                 * have been applied) the refusals are retried for
                 * FENCE__REFUSED_RETRY_MS, time for a restarting server to
                 * answer the retried REQID, and no longer: not the whole
                 * WAIT of a queued lock request.  Timeouts are still
                 * retried until the deadline. */
                refusals = refused ? refusals + 1 : 0;
                if (refusals == 1)
                    refused_since = fence_monotonic_ms();
                pthread_mutex_lock(&c->mu);
                size_t n_addrs = c->n_addrs;
                pthread_mutex_unlock(&c->mu);
                if (refusals >= 2 * n_addrs &&
                    (!ever_connected ||
                     fence_monotonic_ms() - refused_since >= FENCE__REFUSED_RETRY_MS))
                    break;
                continue;
            }
        }
        ever_connected = true;
        refusals = 0; /* "in a row": a server that answers ends the run */
        uint64_t now = fence_monotonic_ms();
        if (now >= deadline_ms) {
            if (!own)
                pool_put(c, k);
            if (last == FENCE_EUNREACHABLE)
                last = fence__fail(FENCE_ETIMEOUT, "deadline passed before sending");
            break;
        }
        uint64_t ms = deadline_ms - now;
        bool timed_out;
        redisReply *r = fence__wire_command(k->wire, ms, argc, argv, lens, &timed_out);
        if (r == NULL) {
            char where[FENCE__HOST_MAX + 16];
            fence__addr_format(&k->addr, where, sizeof(where));
            if (timed_out)
                last = fence__fail(FENCE_ETIMEOUT, "%s to %s: no reply within %llu ms",
                                   argv[0], where, (unsigned long long)ms);
            else
                last = fence__fail(FENCE_EIO, "%s to %s: %s", argv[0], where,
                                   fence__wire_errstr(k->wire)[0] ? fence__wire_errstr(k->wire)
                                                                  : "connection lost");
            if (!timed_out && own == NULL && c->notice != NULL && !told) {
                told = true;
                uint64_t t = fence_monotonic_ms();
                uint64_t left = deadline_ms > t ? deadline_ms - t : 0;
                char msg[FENCE__HOST_MAX + 300];
                snprintf(msg, sizeof(msg), "connection to %s lost during %s (%s); "
                         "reconnecting: giving up after %.1f s of refused connections, "
                         "or in %.1f s", where, argv[0],
                         fence__wire_errstr(k->wire)[0] ? fence__wire_errstr(k->wire)
                                                        : "connection lost",
                         FENCE__REFUSED_RETRY_MS / 1000.0, (double)left / 1000.0);
                c->notice(c->notice_arg, msg);
            }
            fence__conn_drop(k);
            if (!own)
                pool_put(c, k);
            continue;
        }
        if (r->type == REDIS_REPLY_ERROR) {
            int code = fence__error_code(r->str);
            if (code == FENCE_ETRYAGAIN) {
                last = fence__fail(FENCE_ETRYAGAIN, "%s: %.200s", argv[0], r->str);
                freeReplyObject(r);
                if (!own)
                    pool_put(c, k);
                continue;
            }
            if (code == FENCE_ENOTLEADER) {
                fence__addr leader;
                last = fence__fail(FENCE_ENOTLEADER, "%s: %.200s", argv[0], r->str);
                if (fence__parse_notleader(r->str, &leader) == 0 &&
                    !fence__addr_equal(&leader, &k->addr)) {
                    set_leader(c, &leader);
                    /* The first few redirects are followed at once; after
                     * that (a leader change in progress, or servers that
                     * disagree) with backoff. */
                    if (redirects++ < 3)
                        pause = false;
                } else {
                    next_leader(c);
                }
                freeReplyObject(r);
                fence__conn_drop(k);
                if (!own)
                    pool_put(c, k);
                continue;
            }
        }
        if (!own)
            pool_put(c, k);
        *out = r;
        return 0;
    }
    if (last == 0)
        last = FENCE_ETIMEOUT;
    return last;
}

/* Convert an error reply into a code, with the server's text as errmsg. */
int fence__reply_error(const redisReply *r, const char *what)
{
    FENCE_ASSERT(r != NULL);
    if (r->type != REDIS_REPLY_ERROR)
        return fence__fail(FENCE_EPROTO, "%s: unexpected reply type %d", what, r->type);
    return fence__fail(fence__error_code(r->str), "%s: %.200s", what, r->str);
}

/* Read an unsigned integer reply. */
bool fence__reply_u64(const redisReply *r, uint64_t *out)
{
    if (r == NULL)
        return false;
    if (r->type == REDIS_REPLY_INTEGER) {
        if (r->integer < 0)
            return false;
        *out = (uint64_t)r->integer;
        return true;
    }
    if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS)
        return fence__parse_u64(r->str, r->len, out);
    return false;
}

/* Bounds the asks of fence__wait_retry. */
#define EARLY_NIL_TRIES 16

/* True when a nil at now is early for a wait of wait_ms that began at
 * start_ms (with some slack for clock rates and scheduling). */
static bool nil_is_early(uint64_t start_ms, uint32_t wait_ms, uint64_t now)
{
    uint64_t slack = wait_ms / 20 > 50 ? wait_ms / 20 : 50;
    return wait_ms > 0 && now + slack < start_ms + wait_ms;
}

int fence__wait_retry(uint32_t wait_ms, int (*once)(void *ctx, uint32_t left_ms, redisReply **out),
                      void *ctx, redisReply **out)
{
    int rc;
    uint64_t start = fence_monotonic_ms();
    uint32_t left = wait_ms;
    for (int i = 0;; i++) {
        rc = once(ctx, left, out);
        uint64_t now = fence_monotonic_ms();
        if (rc != FENCE_EBUSY || i + 1 == EARLY_NIL_TRIES || !nil_is_early(start, wait_ms, now))
            return rc;
        left = (uint32_t)(start + wait_ms - now);
    }
}
