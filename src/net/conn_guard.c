/* Hostile-client guards of the connection layer (conn.h): a global memory
 * budget over every connection's buffers, an idle timeout, a timeout for
 * an incomplete request (slowloris), a login timeout, and room for
 * logged-in users when untrusted connections fill the table.  Before login
 * (limits.prelogin): small parser limits, a small read buffer and backlog,
 * a small share of the budget (the oldest stranger makes room when it is
 * full), and holds, which delay a failed login's answer on one timer
 * without blocking the loop.  The sweep also hands free heap pages back
 * (malloc_trim) after closed connections freed their buffers.
 *
 * Kept apart from conn.c, which calls these functions at a few points:
 * accept, buffer growth, writes, input, close.  This file calls conn.c
 * by no name: where a check finds a connection to close, it hands it back
 * to the caller, and its two timers act through the table conn.c gives at
 * start (fence_net_guard_acts).  The sweep runs on one
 * unreferenced timer once a second (O(connections) per second).  A
 * connection whose reading the layer paused (its pipeline is full of
 * unanswered requests) is not timed out for the bytes it cannot send. */
#include <inttypes.h>
#include <malloc.h>
#include <netinet/in.h>
#include <stdio.h>

#include "base/assert.h"
#include "net/conn.h"
#include "base/limits.h"
#include "base/log.h"

/* How often the sweep runs. */
#define GUARD_SWEEP_MS 1000
/* Over the budget, a connection is closed only if its unsent backlog is
 * at least this large (the big ones go, not whoever writes next). */
#define GUARD_BACKLOG_MIN (64 * 1024)

/* Close the connections whose timeouts passed. */
static void guard_sweep(uv_timer_t *t)
{
    fence_net *net = t->data;
    const fence_net_limits *lim = &net->lim;
    uint64_t now = uv_now(net->loop);
    fence_net_conn *c = net->conns;
    while (c != NULL) {
        fence_net_conn *next = c->next;
        const char *why = NULL;
        if (c->closing || c->close_after_flush) {
            c = next;
            continue;
        }
        if (lim->auth_timeout_ms > 0 && !c->trusted &&
            now - c->opened_ms >= lim->auth_timeout_ms)
            why = "not logged in in time (auth-timeout-ms)";
        else if (lim->request_timeout_ms > 0 && c->partial_ms != 0 && c->reading &&
                 now - c->partial_ms >= lim->request_timeout_ms)
            why = "request not completed in time (request-timeout-ms)";
        else if (lim->idle_timeout_ms > 0 && c->n_slots == 0 && c->out_pending == 0 &&
                 c->wlen == 0 && c->rlen == 0 &&
                 now - c->active_ms >= lim->idle_timeout_ms)
            why = "idle (idle-timeout-ms)";
        if (why != NULL && c->held) {
            /* Its delayed answer is not worth the wait: close now. */
            net->stat_timed_out++;
            FENCE_LOG_D("conn %" PRIu64 ": closed while held: %s", c->id, why);
            net->guard_acts->close(c);
        } else if (why != NULL) {
            net->stat_timed_out++;
            FENCE_LOG_D("conn %" PRIu64 ": closed: %s", c->id, why);
            net->guard_acts->time_out(c, why);
        }
        c = next;
    }
    if (net->freed_since_trim >= FENCE_TRIM_AFTER) {
        /* Closed connections freed their buffers: hand the free heap pages
         * back to the kernel (the big buffers are mmapped and already are;
         * see FENCE_MMAP_THRESHOLD). */
        net->freed_since_trim = 0;
        malloc_trim(0);
    }
}

void fence__net_guard_limits(fence_net_limits *lim, uint64_t max_conn_memory,
                             uint64_t idle_timeout_ms, uint64_t request_timeout_ms,
                             uint64_t auth_timeout_ms, bool has_acl)
{
    lim->max_conn_memory = max_conn_memory;
    lim->idle_timeout_ms = idle_timeout_ms;
    lim->request_timeout_ms = request_timeout_ms;
    lim->auth_timeout_ms = has_acl ? auth_timeout_ms : 0;
    lim->evict_untrusted = has_acl;
    lim->prelogin = has_acl;
}

void fence__net_guard_start(fence_net *net, const fence_net_guard_acts *acts)
{
    const fence_net_limits *lim = &net->lim;
    net->guard_acts = acts;
    if (lim->idle_timeout_ms == 0 && lim->request_timeout_ms == 0 && lim->auth_timeout_ms == 0)
        return;
    uv_timer_init(net->loop, &net->guard_timer);
    net->guard_timer.data = net;
    net->guard_timer_open = true;
    uv_timer_start(&net->guard_timer, guard_sweep, GUARD_SWEEP_MS, GUARD_SWEEP_MS);
    uv_unref((uv_handle_t *)&net->guard_timer);
}

void fence__net_guard_stop(fence_net *net)
{
    while (net->held != NULL)
        fence__net_guard_unhold(net->held);
    if (net->hold_timer_open) {
        uv_timer_stop(&net->hold_timer);
        uv_close((uv_handle_t *)&net->hold_timer, NULL);
        net->hold_timer_open = false;
    }
    if (!net->guard_timer_open)
        return;
    uv_timer_stop(&net->guard_timer);
    uv_close((uv_handle_t *)&net->guard_timer, NULL);
    net->guard_timer_open = false;
}

void fence__net_guard_account(fence_net_conn *c)
{
    size_t now_mem = c->closing ? 0 : c->rcap + c->wcap + c->out_pending;
    fence_net *net = c->net;
    FENCE_ASSERT(net->mem_used >= c->mem);
    net->mem_used = net->mem_used - c->mem + now_mem;
    if (!c->trusted) {
        FENCE_ASSERT(net->mem_prelogin >= c->mem);
        net->mem_prelogin = net->mem_prelogin - c->mem + now_mem;
    }
    c->mem = now_mem;
}

bool fence__net_guard_mem_ok(const fence_net_conn *c, size_t more)
{
    uint64_t max = c->net->lim.max_conn_memory;
    if (max == 0)
        return true;
    if (c->net->mem_used + more > max) {
        c->net->stat_mem_refused++;
        return false;
    }
    if (c->net->lim.prelogin && !c->trusted &&
        c->net->mem_prelogin + more > max / FENCE_PRELOGIN_MEMORY_DIV) {
        /* Strangers share a small part of the budget: they cannot crowd
         * out the users who logged in. */
        c->net->stat_mem_refused++;
        return false;
    }
    return true;
}

bool fence__net_guard_after_write(fence_net_conn *c)
{
    fence_net *net = c->net;
    uint64_t max = net->lim.max_conn_memory;
    fence__net_guard_account(c);
    if (fence__net_conn_prelogin(c) && c->out_pending > FENCE_PRELOGIN_OBUF_MAX) {
        net->stat_prelogin_refused++;
        FENCE_LOG_D("conn %" PRIu64 ": %zu reply bytes unsent before login (at most %d); "
                    "disconnecting it", c->id, c->out_pending, FENCE_PRELOGIN_OBUF_MAX);
        return true;
    }
    if (max == 0 || net->mem_used <= max || c->out_pending < GUARD_BACKLOG_MIN)
        return false;
    net->stat_mem_refused++;
    FENCE_LOG_W("conn %" PRIu64 ": %zu reply bytes unsent while connections hold %" PRIu64
                " bytes (max-conn-memory %" PRIu64 "); disconnecting it",
                c->id, c->out_pending, net->mem_used, max);
    return true;
}

fence_net_conn *fence__net_guard_evictee(fence_net *net, fence_net_conn *c)
{
    fence_net_conn *oldest = NULL;
    if (!net->lim.evict_untrusted)
        return NULL;
    for (fence_net_conn *x = net->conns; x != NULL; x = x->next) {
        if (x == c || x->trusted || x->closing)
            continue;
        if (oldest == NULL || x->opened_ms < oldest->opened_ms ||
            (x->opened_ms == oldest->opened_ms && x->id < oldest->id))
            oldest = x;
    }
    if (oldest == NULL)
        return NULL;
    net->stat_evicted++;
    FENCE_LOG_D("conn %" PRIu64 ": closed to make room (not logged in)", oldest->id);
    return oldest;
}

void fence__net_guard_after_input(fence_net_conn *c, bool progressed)
{
    uint64_t now = uv_now(c->net->loop);
    if (progressed)
        c->active_ms = now;
    if (c->rlen == 0)
        c->partial_ms = 0;
    else if (c->partial_ms == 0 || progressed)
        c->partial_ms = now; /* a new incomplete request starts now */
}

void fence__net_conn_trust(fence_net_conn *c, bool trusted)
{
    if (c->trusted == trusted)
        return;
    fence_net *net = c->net;
    if (trusted) {
        FENCE_ASSERT(net->mem_prelogin >= c->mem);
        net->mem_prelogin -= c->mem;
    } else {
        net->mem_prelogin += c->mem;
    }
    c->trusted = trusted;
}

/* ---- Before login ---------------------------------------------------------------- */

fence_net_conn *fence__net_guard_evictee_mem(fence_net_conn *c)
{
    fence_net *net = c->net;
    uint64_t max = net->lim.max_conn_memory;
    if (max == 0 || !net->lim.prelogin || net->mem_prelogin < max / FENCE_PRELOGIN_MEMORY_DIV / 2)
        return NULL; /* not the strangers' share that is full */
    fence_net_conn *oldest = NULL;
    for (fence_net_conn *x = net->conns; x != NULL; x = x->next) {
        if (x == c || x->trusted || x->closing || x->mem == 0)
            continue;
        if (oldest == NULL || x->opened_ms < oldest->opened_ms ||
            (x->opened_ms == oldest->opened_ms && x->id < oldest->id))
            oldest = x;
    }
    if (oldest == NULL)
        return NULL;
    net->stat_evicted++;
    FENCE_LOG_D("conn %" PRIu64 ": closed to make room in the memory of connections not "
                "logged in", oldest->id);
    return oldest;
}

/* The verified client certificate's CN, through the transport. */
const char *fence__net_conn_peer_cn(const fence_net_conn *c)
{
    FENCE_ASSERT(c != NULL);
    if (c->tr == NULL || c->tr->peer_cn == NULL)
        return NULL;
    return c->tr->peer_cn(c);
}

bool fence__net_conn_prelogin(const fence_net_conn *c)
{
    /* A client whose certificate the TLS layer verified against --tls-ca
     * is no stranger: the gate logs it in by its CN at its first request
     * (or answers -NOAUTH), and that request may be a full-sized one. */
    return c->net->lim.prelogin && !c->trusted && fence__net_conn_peer_cn(c) == NULL;
}

const fence_resp_limits *fence__net_conn_resp_limits(const fence_net_conn *c)
{
    return fence__net_conn_prelogin(c) ? &c->net->resp_prelogin : &c->net->lim.resp;
}

size_t fence__net_conn_rbuf_max(const fence_net_conn *c)
{
    size_t max = c->net->lim.rbuf_max;
    if (fence__net_conn_prelogin(c) && max > FENCE_PRELOGIN_RBUF_MAX)
        max = FENCE_PRELOGIN_RBUF_MAX;
    return max;
}

/* The hold timer fired: end every hold that is due, re-arm for the next. */
static void hold_fire(uv_timer_t *t)
{
    fence_net *net = t->data;
    uint64_t now = uv_now(net->loop);
    uint64_t next;
    /* First take the due ones off the list, then release them: releasing
     * one runs its requests, which may close others (a closing connection
     * stays allocated until its close callback, so the local list holds). */
    fence_net_conn *due = NULL;
    fence_net_conn *c = net->held;
    while (c != NULL) {
        fence_net_conn *n = c->hold_next;
        if (c->hold_until_ms <= now) {
            fence__net_guard_unhold(c);
            c->hold_next = due;
            due = c;
        }
        c = n;
    }
    while (due != NULL) {
        c = due;
        due = c->hold_next;
        c->hold_next = NULL;
        if (!c->closing && !c->held)
            net->guard_acts->release(c);
    }
    /* A released connection may be held again: the next due one of all. */
    next = 0;
    for (c = net->held; c != NULL; c = c->hold_next)
        if (next == 0 || c->hold_until_ms < next)
            next = c->hold_until_ms;
    if (next != 0 && net->hold_timer_open)
        uv_timer_start(&net->hold_timer, hold_fire, next > now ? next - now : 0, 0);
}

void fence__net_conn_hold(fence_net_conn *c, uint64_t delay_ms)
{
    fence_net *net = c->net;
    if (c->closing)
        return;
    uint64_t now = uv_now(net->loop);
    uint64_t until = now + delay_ms;
    if (!net->hold_timer_open) {
        uv_timer_init(net->loop, &net->hold_timer);
        net->hold_timer.data = net;
        uv_unref((uv_handle_t *)&net->hold_timer);
        net->hold_timer_open = true;
    }
    if (c->held) {
        if (until > c->hold_until_ms)
            c->hold_until_ms = until;
    } else {
        c->held = true;
        c->hold_until_ms = until;
        c->hold_prev = NULL;
        c->hold_next = net->held;
        if (net->held != NULL)
            net->held->hold_prev = c;
        net->held = c;
        if (c->reading) {
            c->tr->read_stop(c);
            c->reading = false;
        }
    }
    /* Due sooner than the timer: re-arm it (a later one is found when it
     * fires). */
    uint64_t due = uv_timer_get_due_in(&net->hold_timer);
    if (!uv_is_active((uv_handle_t *)&net->hold_timer) || c->hold_until_ms - now < due)
        uv_timer_start(&net->hold_timer, hold_fire, c->hold_until_ms - now, 0);
}

void fence__net_guard_unhold(fence_net_conn *c)
{
    if (!c->held)
        return;
    fence_net *net = c->net;
    if (c->hold_prev != NULL)
        c->hold_prev->hold_next = c->hold_next;
    else
        net->held = c->hold_next;
    if (c->hold_next != NULL)
        c->hold_next->hold_prev = c->hold_prev;
    c->hold_prev = c->hold_next = NULL;
    c->held = false;
}

/* "ip:port" of a socket address, or "?". */
static void addr_text(const struct sockaddr_storage *ss, int ok, char *buf, size_t cap,
                      char *ip, size_t ip_cap)
{
    char host[64] = "?";
    unsigned port = 0;
    if (ok == 0 && ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
        uv_ip4_name(a, host, sizeof(host));
        port = ntohs(a->sin_port);
    } else if (ok == 0 && ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
        uv_ip6_name(a, host, sizeof(host));
        port = ntohs(a->sin6_port);
    }
    snprintf(buf, cap, "%s:%u", host, port);
    if (ip != NULL)
        snprintf(ip, ip_cap, "%s", host);
}

void fence__net_conn_peer(const fence_net_conn *c, char *buf, size_t cap, char *ip,
                          size_t ip_cap)
{
    if (c->h.handle.type != UV_TCP) {
        snprintf(buf, cap, "unix");
        if (ip != NULL)
            snprintf(ip, ip_cap, "unix");
        return;
    }
    struct sockaddr_storage ss;
    int len = (int)sizeof(ss);
    int rc = uv_tcp_getpeername(&c->h.tcp, (struct sockaddr *)&ss, &len);
    addr_text(&ss, rc, buf, cap, ip, ip_cap);
}
