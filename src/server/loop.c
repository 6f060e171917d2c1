/* The daemon's shell: it owns the libuv handles (the loop check, the
 * leader timer, the signals, the loop-lag monitor), sets everything up and
 * tears it down.  It is on no request's path: connections (client_conn.c) hand
 * requests to the command table (cmd.c), which submits them to the leader
 * module (src/leader); raft_ops.c and raft_fsm.c are the module's side
 * towards raft (its requests; the state machine), and reply.c its reply
 * sink.  Here the module is only driven: its step at
 * every loop check and its one timer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/log.h"
#include "server/server.h"

/* Monotonic milliseconds (uv_hrtime never jumps with the wall clock). */
static uint64_t mono_ms(void)
{
    return uv_hrtime() / 1000000;
}

/* ---- Timer and loop check --------------------------------------------------- */

/* The earliest fsm deadline passed: the module queues a TICK. */
static void tick_cb(uv_timer_t *t)
{
    fence_server *s = t->data;
    fence__leader_timer(s->leader);
}

/* Arm or stop the one leader timer when the module says so. */
static void rearm_timer(fence_server *s)
{
    uint64_t delay;
    if (!fence__leader_timer_take(s->leader, &delay))
        return;
    if (delay == UINT64_MAX || s->stopping)
        uv_timer_stop(&s->tick_timer);
    else
        uv_timer_start(&s->tick_timer, tick_cb, delay, 0);
}

/* End of every loop turn: the module's step (follow leadership, propose),
 * flush replies, re-arm the timer. */
static void check_cb(uv_check_t *h)
{
    fence_server *s = h->data;
    fence__leader_step(s->leader);
    fence__observe_poll(s); /* elections that changed wake their observers */
    fence__conns_flush(s);
    /* Flushing resumes paused connections, whose buffered requests may
     * have filled the batch again; nothing else would wake the loop for
     * them, so step again now. */
    fence__leader_step(s->leader);
    fence__conns_flush(s);
    rearm_timer(s);
    fence__server_metrics_publish(s);
}

/* ---- Start and stop --------------------------------------------------------- */

/* SIGTERM / SIGINT: stop cleanly. */
static void signal_cb(uv_signal_t *h, int signum)
{
    fence_server *s = h->data;
    FENCE_LOG_I("signal %d: shutting down", signum);
    fence__server_stop(s);
}

/* raft is closed: close our remaining handles so the loop ends. */
static void node_closed(fence_node *n)
{
    fence_server *s = (fence_server *)((char *)n - offsetof(fence_server, node));
    fence__signq_close(s->signq); /* answers (frees) what it still signs */
    s->signq = NULL;
    uv_close((uv_handle_t *)&s->check, NULL);
    uv_close((uv_handle_t *)&s->tick_timer, NULL);
    fence__observe_close(s);
    fence__lag_close(&s->lag);
    uv_close((uv_handle_t *)&s->sig_term, NULL);
    uv_close((uv_handle_t *)&s->sig_int, NULL);
    FENCE_LOG_I("stopped");
}

/* Begin a clean shutdown: no new clients, answer what is not proposed,
 * close connections, close raft. */
void fence__server_stop(fence_server *s)
{
    if (s->stopping)
        return;
    s->stopping = true;
    fence__listen_close(s);
    fence__leader_stop(s->leader);
    fence__snapfork_cancel(&s->snap);
    fence__conns_close_all(s);
    uv_timer_stop(&s->tick_timer);
    fence__node_close(&s->node, node_closed);
}

/* Set up the state machine, the leader module, raft, handles, listeners. */
int fence__server_init(fence_server *s, uv_loop_t *loop, fence_config *cfg)
{
    memset(s, 0, sizeof(*s));
    s->loop = loop;
    s->cfg = cfg;
    s->start_ms = mono_ms();
    char merr[256];
    if (fence__srv_metrics_init(&s->metrics, merr, sizeof(merr)) != 0) {
        FENCE_LOG_E("%s", merr);
        return -1;
    }
    fence_resp_limits_default(&s->resp_lim);
    s->resp_lim.bulk_max = cfg->max_bulk;
    if (fence__raft_fsm_create(s) != 0)
        return -1;
    fence_leader_ops ops;
    memset(&ops, 0, sizeof(ops));
    ops.ctx = s;
    fence__raft_ops(&ops);   /* propose, barrier, leadership (raft_ops.c) */
    fence__reply_sink(&ops); /* the replies (reply.c) */
    fence_limits lim;
    fence_limits_default(&lim);
    lim.leases_max = (uint32_t)cfg->max_leases;
    lim.locks_max = (uint32_t)cfg->max_locks;
    lim.waiters_max = (uint32_t)cfg->max_waiters;
    lim.dedup_max = (uint32_t)cfg->max_dedup;
    lim.waits_max = (uint32_t)cfg->max_waits;
    if (fence__leader_create(&ops, s->fsm, &lim, &s->leader) != 0) {
        FENCE_LOG_E("out of memory at start");
        return -1;
    }
    /* A renewal answered without an entry may lose up to an election
     * timeout to a leader change (docs/leases.md). */
    fence__leader_renew_window(s->leader, cfg->election_timeout_ms);
    fence__raft_fsm_init(s);

    uv_check_init(loop, &s->check);
    s->check.data = s;
    uv_check_start(&s->check, check_cb);
    uv_timer_init(loop, &s->tick_timer);
    s->tick_timer.data = s;
    fence__observe_init(s);
    fence__lag_start(&s->lag, loop);
    uv_signal_init(loop, &s->sig_term);
    s->sig_term.data = s;
    uv_signal_start(&s->sig_term, signal_cb, SIGTERM);
    uv_signal_init(loop, &s->sig_int);
    s->sig_int.data = s;
    uv_signal_start(&s->sig_int, signal_cb, SIGINT);

    if (fence__node_start(&s->node, loop, cfg, &s->raft_fsm) != 0)
        return -1;
    /* raft calls io->async_work unchecked when snapshot_async is set, and
     * reads the field at each snapshot: setting it after raft_start, before
     * the loop runs any apply, is in time.  (raft_uv_init of libraft 0.15
     * fills async_work but leaves io->version at 1: test the function.) */
    if (cfg->snapshot_fork && s->node.io.async_work != NULL &&
        fence__snapfork_init(&s->snap))
        fence__raft_fsm_async(s);
    else
        FENCE_LOG_I("snapshots are encoded in the loop%s",
                    cfg->snapshot_fork ? " (fork mode unavailable)" : "");
    s->node.append_latency = s->metrics.append_latency; /* after start's memset */
    fence__node_set_peer_refusals(&s->node, s->metrics.peer_refusals);
    if (fence__listen(s) != 0)
        return -1;
    if (cfg->daemon.metrics_port != 0) {
        if (fence__srv_metrics_listen(&s->metrics, cfg->daemon.metrics_bind,
                                      (int)cfg->daemon.metrics_port, merr,
                                      sizeof(merr)) != 0) {
            FENCE_LOG_E("metrics-port: %s", merr);
            return -1;
        }
        FENCE_LOG_I("metrics on http://%s:%llu/metrics", cfg->daemon.metrics_bind,
                    (unsigned long long)cfg->daemon.metrics_port);
    }
    return 0;
}

/* Release what the loop no longer uses (after uv_run returned). */
void fence__server_free(fence_server *s)
{
    if (s->node.started)
        raft_uv_close(&s->node.io);
    if (s->node.tcp && !s->node.peer_tls)
        raft_uv_tcp_close(&s->node.transport);
    fence__srv_metrics_free(&s->metrics);
    fence__owners_free(s);
    fence__leader_destroy(s->leader);
    fence__snapfork_free(&s->snap);
    fence_fsm_destroy(s->fsm);
    fence__server_acl_free(s);
}
