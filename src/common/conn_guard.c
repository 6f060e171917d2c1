/* Hostile-client guards of the connection layer (conn.h): a global memory
 * budget over every connection's buffers, an idle timeout, a timeout for
 * an incomplete request (slowloris), a login timeout, and room for
 * logged-in users when untrusted connections fill the table.
 *
 * Kept apart from conn.c, which calls these functions at a few points:
 * accept, buffer growth, writes, input, close.  The sweep runs on one
 * unreferenced timer once a second (O(connections) per second).  A
 * connection whose reading the layer paused (its pipeline is full of
 * unanswered requests) is not timed out for the bytes it cannot send. */
#include <inttypes.h>

#include "common/assert.h"
#include "common/conn.h"
#include "common/log.h"

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
        if (why != NULL) {
            net->stat_timed_out++;
            FENCE_LOG_D("conn %" PRIu64 ": closed: %s", c->id, why);
            fence__net_reply_error(c, "ERR", why);
            fence__net_close_after_flush(c);
            fence__net_flush(net);
        }
        c = next;
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
}

void fence__net_guard_start(fence_net *net)
{
    const fence_net_limits *lim = &net->lim;
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
    c->mem = now_mem;
}

bool fence__net_guard_mem_ok(const fence_net_conn *c, size_t more)
{
    uint64_t max = c->net->lim.max_conn_memory;
    if (max == 0)
        return true;
    if (c->net->mem_used + more <= max)
        return true;
    c->net->stat_mem_refused++;
    return false;
}

bool fence__net_guard_after_write(fence_net_conn *c)
{
    fence_net *net = c->net;
    uint64_t max = net->lim.max_conn_memory;
    fence__net_guard_account(c);
    if (max == 0 || net->mem_used <= max || c->out_pending < GUARD_BACKLOG_MIN)
        return false;
    net->stat_mem_refused++;
    FENCE_LOG_W("conn %" PRIu64 ": %zu reply bytes unsent while connections hold %" PRIu64
                " bytes (max-conn-memory %" PRIu64 "); disconnecting it",
                c->id, c->out_pending, net->mem_used, max);
    fence__net_conn_close(c);
    return true;
}

bool fence__net_guard_make_room(fence_net *net, fence_net_conn *c)
{
    fence_net_conn *oldest = NULL;
    if (!net->lim.evict_untrusted)
        return false;
    for (fence_net_conn *x = net->conns; x != NULL; x = x->next) {
        if (x == c || x->trusted || x->closing)
            continue;
        if (oldest == NULL || x->opened_ms < oldest->opened_ms ||
            (x->opened_ms == oldest->opened_ms && x->id < oldest->id))
            oldest = x;
    }
    if (oldest == NULL)
        return false;
    net->stat_evicted++;
    FENCE_LOG_D("conn %" PRIu64 ": closed to make room (not logged in)", oldest->id);
    fence__net_conn_close(oldest);
    return true;
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
    c->trusted = trusted;
}
