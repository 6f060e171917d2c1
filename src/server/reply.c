/* The reply side of fenced: the leader module's reply sink (leader.h
 * fence_leader_ops.reply_*), the turning of a command's result, a read or
 * an error into its RESP reply, and the slots that carry replies in
 * request order on the shared connection layer (src/net/conn.h).
 * The end of every request's walk: cmd.c (or the leader module, through
 * the sink) decides the answer, this file words it and makes it final. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/log.h"
#include "server/server.h"

/* Largest value a RESP integer reply can carry. */
#define INT_REPLY_MAX ((uint64_t)INT64_MAX)

/* ---- Replies ------------------------------------------------------------------ */

/* Reply for a request that needs the leader when this server cannot serve
 * it: NOTLEADER with the leader's client address when one is known,
 * TRYAGAIN while an election or the leader's start-up is under way. */
void fence__cmd_reply_unavailable(fence_server *s, fence_slot *slot)
{
    char msg[160];
    if (s->stopping) {
        fence__slot_error(slot, "TRYAGAIN", "the server is shutting down");
        return;
    }
    if (fence__node_is_leader(&s->node)) {
        if (fence__node_transferring(&s->node))
            fence__slot_error(slot, "TRYAGAIN",
                              "leadership is being transferred; retry shortly");
        else
            fence__slot_error(slot, "TRYAGAIN",
                              "the leader is starting (replaying its log); retry shortly");
        return;
    }
    const fence_peer *p = fence__node_leader_peer(&s->node);
    if (p != NULL && p->id != s->cfg->node_id) {
        snprintf(msg, sizeof(msg), "%s:%u", p->host, (unsigned)p->client_port);
        fence__slot_error(slot, "NOTLEADER", msg);
        return;
    }
    fence__slot_error(slot, "TRYAGAIN", "no leader is elected yet; retry shortly");
}

/* Reply for the leader module's error (leader.h FENCE_LERR_*), with the
 * same codes and words as before the module existed. */
void fence__cmd_reply_error(fence_server *s, fence_slot *slot, int err)
{
    switch (err) {
    case FENCE_LERR_UNAVAILABLE:
        fence__cmd_reply_unavailable(s, slot);
        break;
    case FENCE_LERR_READ_RETRY:
        fence__slot_error(slot, "TRYAGAIN", "leadership changed; retry the read");
        break;
    case FENCE_LERR_NOMEM:
        fence__slot_error(slot, "TRYAGAIN", "out of memory; retry later");
        break;
    case FENCE_LERR_RESTORED:
        fence__slot_error(slot, "TRYAGAIN",
                          "outcome unknown (this server caught up from a "
                          "snapshot); retry with the same REQID");
        break;
    default:
        FENCE_ASSERT(err == FENCE_LERR_UNKNOWN);
        fence__slot_error(slot, "TRYAGAIN",
                          "outcome unknown (leadership lost or shutdown); "
                          "retry with the same REQID");
        break;
    }
}

/* Reply for an integer. */
static void reply_uint(fence_slot *slot, uint64_t v)
{
    char buf[32];
    size_t n = fence_resp_uint(buf, sizeof(buf), v > INT_REPLY_MAX ? INT_REPLY_MAX : v);
    FENCE_ASSERT(n <= sizeof(buf));
    fence__slot_reply(slot, buf, n);
}

/* Reply nil ("$-1", or RESP3's null "_" after HELLO 3). */
static void reply_nil(fence_slot *slot)
{
    char buf[8];
    size_t n = fence_resp_nil_v(buf, sizeof(buf), slot->resp);
    FENCE_ASSERT(n <= sizeof(buf));
    fence__slot_reply(slot, buf, n);
}

/* Reply with a grant's signed token (LOCK ... SIGNED), or [signed token,
 * lease] (ACQUIRE ... SIGNED).  Ed25519 is deterministic: a reentrant LOCK
 * and a REQID retry get the same string.  The signature is made by the
 * signing thread (signq.h), which the first signed grant starts; the
 * reply follows from a later loop callback.  Without that thread, here. */
static void reply_signed(fence_slot *slot, const fence_result *r, bool with_lease)
{
    fence_server *s = slot->conn != NULL ? slot->conn->srv : NULL;
    if (s != NULL && s->signq == NULL && !s->signq_off && !s->stopping &&
        fence__signq_start(&s->signq, s->loop) != 0) {
        s->signq_off = true;
        FENCE_LOG_W("cannot start the token-signing thread: grants are signed on the "
                    "loop thread");
    }
    if (s != NULL && !s->stopping &&
        fence__signq_submit(s->signq, slot, slot->signer, slot->sign_name,
                            slot->sign_name_len, r->token, r->lease, with_lease))
        return;
    char buf[FENCE_SIGNQ_REPLY_MAX];
    size_t off = fence__signq_reply(slot->signer, slot->sign_name, slot->sign_name_len,
                                    r->token, r->lease, with_lease, buf, sizeof(buf));
    FENCE_ASSERT(off > 0);
    fence__slot_reply(slot, buf, off);
}

/* Reply with an array of integers. */
static void reply_uints(fence_slot *slot, const uint64_t *v, unsigned n)
{
    char buf[256];
    size_t off = fence_resp_array(buf, sizeof(buf), n);
    for (unsigned i = 0; i < n; i++)
        off += fence_resp_uint(buf + off, sizeof(buf) - off,
                               v[i] > INT_REPLY_MAX ? INT_REPLY_MAX : v[i]);
    FENCE_ASSERT(off <= sizeof(buf));
    fence__slot_reply(slot, buf, off);
}

/* Turn a command's result (or a finished wait's event) into its reply. */
void fence__cmd_reply_result(fence_slot *slot, const fence_result *r)
{
    FENCE_ASSERT(r->status != FENCE_ST_QUEUED);
    switch (r->status) {
    case FENCE_ST_NOLEASE:
        if (slot->op == OP_REVOKE)
            break; /* idempotent: OK below */
        fence__slot_error(slot, "NOLEASE",
                          "the lease is unknown, expired or revoked");
        return;
    case FENCE_ST_LIMIT:
        fence__slot_error(slot, "LIMIT",
                          "a configured limit is full (max-leases, max-locks, "
                          "max-waiters or max-dedup, or this user's maxleases or "
                          "maxlocks)");
        return;
    case FENCE_ST_INVALID:
        if (r->value == FENCE_INVALID_SHARED)
            fence__slot_error(slot, "ERR", "the lock is held shared and its holders share "
                                           "this token: release one holder with UNLOCK "
                                           "name token LEASE lease");
        else if (r->value == FENCE_INVALID_MODE)
            fence__slot_error(slot, "ERR", "this lease holds or waits for the lock in the "
                                           "other mode (shared or exclusive); release it "
                                           "first (no upgrade or downgrade)");
        else
            fence__slot_error(slot, "ERR", "invalid request (a value out of range, or "
                                           "a REQID already used for a different request)");
        return;
    case FENCE_ST_NOPERM:
        fence__slot_error(slot, "NOPERM",
                          "this lease belongs to another user (only its owner or an "
                          "@admin user may use it)");
        return;
    case FENCE_ST_NIL:
        reply_nil(slot);
        return;
    case FENCE_ST_WRONGTYPE:
        /* -WRONGTYPE <name> is a <kind> (the one name space; cmd_sem.c). */
        fence__cmd_reply_wrongtype(slot, r);
        return;
    default:
        break;
    }
    if ((slot->op == OP_GRANT || slot->op == OP_ACQUIRE || slot->op == OP_SEM_ACQUIRE_TTL ||
         slot->op == OP_ACQUIRE_MULTI) &&
        slot->conn != NULL)
        fence__owner_record(slot->conn, r->lease); /* LEASE.LIST's owner */
    if (slot->op == OP_LOCK || slot->op == OP_ACQUIRE || slot->op == OP_SEM_ACQUIRE ||
        slot->op == OP_SEM_ACQUIRE_TTL || slot->op == OP_LOCK_MULTI ||
        slot->op == OP_ACQUIRE_MULTI || slot->op == OP_CAMPAIGN)
        fence__server_metrics_grant(slot, r); /* metrics and the audit line */
    switch (slot->op) {
    case OP_GRANT:
        reply_uint(slot, r->lease);
        break;
    case OP_KEEPALIVE:
    case OP_UNLOCK:
        reply_uint(slot, r->value);
        break;
    case OP_REVOKE: {
        char buf[8];
        size_t n = fence_resp_simple(buf, sizeof(buf), "OK");
        fence__slot_reply(slot, buf, n);
        break;
    }
    case OP_LOCK:
        if (slot->signer != NULL)
            reply_signed(slot, r, false);
        else
            reply_uint(slot, r->token);
        break;
    case OP_LOCK_MULTI:
        if (slot->signer != NULL)
            fence__cmd_multi_signed_reply(slot, r);
        else
            reply_uint(slot, r->token);
        break;
    case OP_ACQUIRE_MULTI: {
        if (slot->signer != NULL) {
            fence__cmd_multi_signed_reply(slot, r);
            break;
        }
        uint64_t v[2] = {r->token, r->lease};
        reply_uints(slot, v, 2);
        break;
    }
    case OP_PROCLAIM: /* the new revision, or 0: the token does not lead */
    case OP_RESIGN:   /* 1, or 0 */
        reply_uint(slot, r->value);
        break;
    case OP_CAMPAIGN:
    case OP_ACQUIRE: {
        if (slot->signer != NULL) {
            reply_signed(slot, r, true);
            break;
        }
        uint64_t v[2] = {r->token, r->lease};
        reply_uints(slot, v, 2);
        break;
    }
    case OP_SEM_ACQUIRE:
    case OP_SEM_ACQUIRE_TTL:
    case OP_SEM_RELEASE:
        fence__cmd_sem_reply(slot, r);
        break;
    default:
        FENCE_ASSERT(!"unexpected op for a command result");
        fence__slot_error(slot, "ERR", "internal error");
        break;
    }
}

/* Remaining ms from deadline at fsm time now, floored at 0. */
static uint64_t remaining(uint64_t deadline, uint64_t now)
{
    return deadline > now ? deadline - now : 0;
}

/* LOCK.INFO of a shared lock: [token, first lease, remaining_ms (the
 * longest), waiters, "shared", [[lease, remaining_ms], ...]] with the
 * holders in admission order. */
static void reply_shared_info(fence_server *s, fence_slot *slot, const fence_cmd *cmd,
                              const uint64_t v[4], uint32_t holders, uint64_t now)
{
    fence_fsm_holder *h = malloc((size_t)holders * sizeof(*h));
    size_t cap = fence_resp_array(NULL, 0, 6) + 4 * 24 + fence_resp_bulk(NULL, 0, "shared", 6) +
                 fence_resp_array(NULL, 0, holders) +
                 (size_t)holders * (fence_resp_array(NULL, 0, 2) + 2 * 24);
    char *buf = malloc(cap);
    if (h == NULL || buf == NULL) {
        free(h);
        free(buf);
        fence__slot_error(slot, "TRYAGAIN", "out of memory; retry later");
        return;
    }
    size_t n = fence_fsm_lock_holders(s->fsm, cmd->name, cmd->name_len, h, holders);
    FENCE_ASSERT(n == holders);
    size_t off = fence_resp_array(buf, cap, 6);
    for (int i = 0; i < 4; i++)
        off += fence_resp_uint(buf + off, cap - off, v[i] > INT_REPLY_MAX ? INT_REPLY_MAX : v[i]);
    off += fence_resp_bulk(buf + off, cap - off, "shared", 6);
    off += fence_resp_array(buf + off, cap - off, (int64_t)n);
    for (size_t i = 0; i < n; i++) {
        off += fence_resp_array(buf + off, cap - off, 2);
        off += fence_resp_uint(buf + off, cap - off,
                               h[i].lease > INT_REPLY_MAX ? INT_REPLY_MAX : h[i].lease);
        off += fence_resp_uint(buf + off, cap - off, remaining(h[i].deadline_ms, now));
    }
    FENCE_ASSERT(off <= cap);
    fence__slot_reply(slot, buf, off);
    free(h);
    free(buf);
}

/* Answer LEASE.INFO / LOCK.INFO from applied state. */
void fence__cmd_reply_read(fence_server *s, fence_slot *slot, const fence_cmd *cmd)
{
    uint64_t now = fence__leader_now(s->leader);
    if (slot->op == OP_LEASE_INFO) {
        fence_fsm_lease_state li;
        if (fence_fsm_lease_info(s->fsm, cmd->lease, now, &li) != 0) {
            fence__slot_error(slot, "NOLEASE", "the lease is unknown, expired or revoked");
            return;
        }
        uint64_t v[3] = {li.ttl_ms, remaining(li.deadline_ms, now), li.locks_held};
        reply_uints(slot, v, 3);
        return;
    }
    if (slot->op == OP_SEM_INFO) {
        fence__cmd_sem_info(s, slot, cmd);
        return;
    }
    if (slot->op == OP_ELECT_LEADER) {
        fence_fsm_elect_state st;
        if (fence_fsm_elect_info(s->fsm, cmd->name, cmd->name_len, &st) != 0) {
            fence_result wr;
            memset(&wr, 0, sizeof(wr));
            wr.status = FENCE_ST_WRONGTYPE;
            fence__cmd_reply_wrongtype(slot, &wr); /* a lock's or a semaphore's name */
            return;
        }
        fence__elect_reply_state(slot, &st, true);
        return;
    }
    FENCE_ASSERT(slot->op == OP_LOCK_INFO);
    fence_fsm_lock_state ki;
    if (!fence_fsm_lock_info(s->fsm, cmd->name, cmd->name_len, &ki)) {
        reply_nil(slot);
        return;
    }
    uint64_t v[4] = {ki.token, ki.lease, remaining(ki.deadline_ms, now), ki.waiters};
    if (!ki.shared) {
        reply_uints(slot, v, 4);
        return;
    }
    reply_shared_info(s, slot, cmd, v, ki.holders, now);
}

/* ---- The leader module's reply sink ------------------------------------------ */

/* A command's result or a wait's outcome. */
static void sink_result(void *ctx, void *req, const fence_result *r, bool from_wait)
{
    fence_slot *slot = req;
    (void)ctx;
    (void)from_wait;
    FENCE_ASSERT(slot->state == SLOT_LEADER);
    slot->state = SLOT_NEW;
    fence__cmd_reply_result(slot, r);
}

/* A read, answered from the state now. */
static void sink_read(void *ctx, void *req, const fence_cmd *cmd)
{
    fence_slot *slot = req;
    FENCE_ASSERT(slot->state == SLOT_LEADER);
    slot->state = SLOT_NEW;
    fence__cmd_reply_read(ctx, slot, cmd);
}

/* An error (FENCE_LERR_*). */
static void sink_error(void *ctx, void *req, int err)
{
    fence_slot *slot = req;
    FENCE_ASSERT(slot->state == SLOT_LEADER);
    slot->state = SLOT_NEW;
    fence__cmd_reply_error(ctx, slot, err);
}

/* Fill the sink's part of the leader module's ops (ctx is the server). */
void fence__reply_sink(fence_leader_ops *ops)
{
    ops->reply_result = sink_result;
    ops->reply_read = sink_read;
    ops->reply_error = sink_error;
}
