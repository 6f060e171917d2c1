/* ------------------------------------------------------------------------
 * sim_client.c: Simulated clients
 *
 * A client connects to a node that says it is a ready leader (sometimes
 * to any live node), sends a pipeline of 1..SIM_PIPE_MAX requests (writes
 * and reads mixed), and processes the answers strictly in order, as a
 * connection's reply queue delivers them.  It may disconnect at any time
 * (orphaned requests; its waits are cancelled through the log), gives up
 * a wait that takes too long by disconnecting, and retries what had an
 * unknown outcome with the same REQID, on whatever node leads then.
 *
 * Pipeline checks, from the state index each answer came from (the index
 * of the last entry the node had applied): a read sees every earlier
 * write of its pipeline (index >= theirs) and no later one (index <
 * theirs), and every write acknowledged anywhere before it was sent.
 * ------------------------------------------------------------------------ */
#include "sim_int.h"

/* Pick a node a client can send to: any live node whose module is a ready
 * leader (a stale leader in a minority partition included); now and then
 * any live node, to see the refusals. */
static int pick_node(sim *s)
{
    int cand[SIM_MAX_NODES];
    int nc = 0;
    bool any = rng_pct(&s->rng, 3);
    for (unsigned k = 0; k < s->n_nodes; k++)
        if (!s->nodes[k].down &&
            (any || fence__leader_ready(s->nodes[k].leader)))
            cand[nc++] = (int)k;
    if (nc == 0)
        return -1;
    return cand[rng_range(&s->rng, 0, (uint64_t)nc - 1)];
}

/* Set a request's lock name. */
static void set_name(sim_req *q, unsigned lock)
{
    q->lock = lock;
    memcpy(q->name_buf, lock >= SIM_ELECT_BASE ? "elec" : "lock", 4);
    q->name_buf[4] = (uint8_t)('0' + lock % SIM_ELECT_BASE);
    q->cmd.name = q->name_buf;
    q->cmd.name_len = 5;
}

/* Requests drawn for lock SIM_SEM_LOCK (or a client's slot grant) go to
 * the semaphore: LOCK -> SEM_ACQUIRE with the lease, ACQUIRE -> its TTL
 * form, UNLOCK -> SEM_RELEASE.  No random draw: every seed's stream stays
 * what it was. */
static void to_semaphore(sim_req *q)
{
    fence_cmd *c = &q->cmd;
    bool slot_grant = q->lock >= SIM_SEM_SLOT;
    if ((q->lock != SIM_SEM_LOCK && !slot_grant) || q->is_read)
        return;
    if (c->type == FENCE_CMD_LOCK || c->type == FENCE_CMD_ACQUIRE) {
        c->type = FENCE_CMD_SEM_ACQUIRE;
        c->permits = SIM_SEM_N;
        if (c->lease == 0 && c->ttl_ms == 0)
            c->ttl_ms = 1000;
    } else if (c->type == FENCE_CMD_UNLOCK) {
        c->type = FENCE_CMD_SEM_RELEASE;
        c->slot = slot_grant ? q->lock - SIM_SEM_SLOT : (uint32_t)(c->token % SIM_SEM_N);
    } else {
        return;
    }
    memcpy(q->name_buf, "sem", 3);
    c->name = q->name_buf;
    c->name_len = 3;
}

/* Some LOCKs and UNLOCKs become elections' commands (core/elect.h),
 * derived from the fields already drawn so that the random stream (and
 * every seed's run) stays what it was: a LOCK of a lease id = 1 mod 5 is a
 * CAMPAIGN for election "elecN"; an UNLOCK of a held election is a RESIGN
 * (or a PROCLAIM), one of a random name with token 1 or 2 mod 4 a RESIGN
 * or PROCLAIM of "elecN" (mostly not the leader's token). */
static void to_election(sim_req *q)
{
    fence_cmd *c = &q->cmd;
    if (c->type == FENCE_CMD_LOCK && c->lease % 5 == 1) {
        c->type = FENCE_CMD_ELECT_CAMPAIGN;
        set_name(q, SIM_ELECT_BASE + q->lock % SIM_ELECT_BASE);
    } else if (c->type == FENCE_CMD_UNLOCK &&
               (q->lock >= SIM_ELECT_BASE || c->token % 4 == 1 || c->token % 4 == 2)) {
        c->type = c->token % 3 == 0 ? FENCE_CMD_ELECT_PROCLAIM : FENCE_CMD_ELECT_RESIGN;
        set_name(q, SIM_ELECT_BASE + q->lock % SIM_ELECT_BASE);
    } else {
        return;
    }
    if (c->type != FENCE_CMD_ELECT_RESIGN) {
        q->value_buf[0] = c->type == FENCE_CMD_ELECT_CAMPAIGN ? 'c' : 'p';
        q->value_buf[1] = (uint8_t)('0' + (c->lease + c->token) % 10);
        q->value_buf[2] = (uint8_t)('0' + c->wait_ms % 10);
        c->value = q->value_buf;
        c->value_len = 3;
    }
}

/* Choose a random new request for a client. */
static void client_new_req(sim *s, sim_client *cl, sim_req *q)
{
    uint64_t *g = &s->rng;
    memset(q, 0, sizeof *q);
    fence_cmd *c = &q->cmd;
    unsigned roll = (unsigned)rng_range(g, 0, 109);
    if (cl->n_leases == 0 && roll < 70)
        roll = 0; /* mostly get a lease first */
    uint64_t some_lease = cl->n_leases
                              ? cl->leases[rng_range(g, 0, cl->n_leases - 1)]
                              : rng_range(g, 1, 40);
    if (roll < 12) {
        c->type = FENCE_CMD_LEASE_GRANT;
        c->ttl_ms = rng_range(g, 300, 4000);
        c->lock_delay_ms = rng_pct(g, 70) ? 0 : rng_range(g, 10, 400);
        if (rng_pct(g, 3))
            c->ttl_ms = 1; /* invalid */
    } else if (roll < 40) {
        c->type = FENCE_CMD_LEASE_KEEPALIVE;
        c->lease = some_lease;
    } else if (roll < 44) {
        c->type = FENCE_CMD_LEASE_REVOKE;
        c->lease = some_lease;
    } else if (roll < 70) {
        c->type = FENCE_CMD_LOCK;
        c->lease = some_lease;
        set_name(q, (unsigned)rng_range(g, 0, SIM_LOCKS - 1));
        c->wait_ms = rng_pct(g, 50) ? 0 : rng_range(g, 50, 3000);
    } else if (roll < 86) {
        c->type = FENCE_CMD_UNLOCK;
        if (cl->n_held && rng_pct(g, 85)) {
            unsigned k = (unsigned)rng_range(g, 0, cl->n_held - 1);
            set_name(q, cl->held[k].lock < SIM_SEM_SLOT ? cl->held[k].lock : 0);
            q->lock = cl->held[k].lock;
            c->token = cl->held[k].token;
            if (cl->held[k].shared) {
                /* A shared hold is released by naming its lease. */
                c->type = FENCE_CMD_UNLOCK_SHARED;
                c->lease = cl->held[k].lease;
            }
        } else {
            set_name(q, (unsigned)rng_range(g, 0, SIM_LOCKS - 1));
            c->token = rng_range(g, 1, s->model_token + 2);
        }
    } else if (roll < 96) {
        c->type = FENCE_CMD_ACQUIRE;
        set_name(q, (unsigned)rng_range(g, 0, SIM_LOCKS - 1));
        c->ttl_ms = rng_range(g, 300, 4000);
        c->lock_delay_ms = rng_pct(g, 70) ? 0 : rng_range(g, 10, 400);
        c->wait_ms = rng_pct(g, 50) ? 0 : rng_range(g, 50, 3000);
    } else if (roll < 99) {
        c->type = FENCE_CMD_CANCEL;
        c->wait_id = rng_range(g, 1, 50); /* probably not ours */
    } else {
        /* A read: LEASE.INFO or LOCK.INFO. */
        q->is_read = true;
        if (rng_pct(g, 50))
            c->lease = some_lease;
        else
            set_name(q, (unsigned)rng_range(g, 0, SIM_LOCKS - 1));
        return;
    }
    if (rng_pct(g, 50)) {
        c->flags |= FENCE_CMD_F_REQID;
        c->req_id = ((uint64_t)(cl->id + 1) << 40) | ++cl->seq;
    }
    /* Per-owner quotas (core/fsm.h) on some grants, as the leader writes a
     * user's maxleases/maxlocks into the log: every replica must refuse
     * alike.  Derived from the fields already drawn, so the random stream
     * (and every seed's run) stays what it was. */
    if (c->type == FENCE_CMD_LEASE_GRANT || c->type == FENCE_CMD_ACQUIRE) {
        if (c->ttl_ms % 3 == 0) {
            c->flags |= FENCE_CMD_F_QUOTA;
            c->quota_leases = (uint32_t)(6 + c->ttl_ms % 7);
            c->quota_locks = (uint32_t)(c->ttl_ms % 2 ? 4 + c->ttl_ms % 5 : 0);
        }
    } else if (c->type == FENCE_CMD_LOCK && c->lease % 3 == 0) {
        c->flags |= FENCE_CMD_F_QUOTA;
        c->quota_locks = (uint32_t)(3 + c->lease % 4);
    }
    to_semaphore(q);
    /* Atomic multi-locks (core/multi.c): some LOCKs and ACQUIREs become a
     * LOCK_MULTI of their lock and one or two others (ACQUIRE: the lease-0
     * form with a dedicated lease), derived from the fields already drawn
     * so every seed's random stream stays what it was.  After the
     * semaphore's turn: a request drawn for lock4 is the semaphore's, but
     * lock4 may be a later name of a multi-lock (a plain lock "lock4"; the
     * semaphore's names are "sem", "sem#0", "sem#1"). */
    if ((c->type == FENCE_CMD_LOCK && c->lease % 4 == 1) ||
        (c->type == FENCE_CMD_ACQUIRE && c->ttl_ms % 5 == 0)) {
        static const char *const nm[SIM_LOCKS] = {"lock0", "lock1", "lock2", "lock3",
                                                  "lock4"};
        unsigned n = 2 + (unsigned)(c->wait_ms % 2);
        const unsigned off[SIM_MULTI_MAX] = {0, 1, 3};
        for (unsigned i = 0; i < n; i++) {
            q->mnames[i].name = (const uint8_t *)nm[(q->lock + off[i]) % SIM_LOCKS];
            q->mnames[i].len = 5;
        }
        if (c->type == FENCE_CMD_ACQUIRE)
            c->lease = 0;
        c->type = FENCE_CMD_LOCK_MULTI;
        c->name = NULL;
        c->name_len = 0;
        c->names = q->mnames;
        c->names_count = (uint16_t)n;
    }
    to_election(q);
    /* Shared (read) holds on about half the LOCKs and ACQUIREs left (not
     * the multi-locks nor the elections), derived as the quotas are: a few
     * locks see phases, queued writers and readers held back behind them. */
    if ((c->type == FENCE_CMD_LOCK && (c->lease + q->lock) % 2 == 1) ||
        (c->type == FENCE_CMD_ACQUIRE && (c->ttl_ms + q->lock) % 2 == 1))
        c->flags |= FENCE_CMD_F_SHARED;
}

/* Record a grant a client was told about. */
static void client_ack_grant(sim *s, sim_client *cl, unsigned lock,
                             uint64_t token, uint64_t lease, bool shared)
{
    s->acks = sim_grow(s->acks, &s->cap_acks, s->n_acks + 1, sizeof *s->acks);
    s->acks[s->n_acks].token = token;
    s->acks[s->n_acks].lease = lease;
    s->acks[s->n_acks].lock = lock;
    s->acks[s->n_acks].time_ms = s->fx.time;
    s->n_acks++;
    s->res->acked_grants++;
    if (cl->n_held < SIM_CLIENT_HELD) {
        cl->held[cl->n_held].lock = lock;
        cl->held[cl->n_held].token = token;
        cl->held[cl->n_held].lease = lease;
        cl->held[cl->n_held].shared = shared;
        cl->n_held++;
    }
}

/* What a client learns from the result of its command. */
static void client_result(sim *s, sim_client *cl, const sim_req *q)
{
    const fence_cmd *c = &q->cmd;
    const fence_result *r = &q->r;
    s->res->acked_cmds++;
    if (q->from_wait)
        s->res->wait_answers++;
    switch (c->type) {
    case FENCE_CMD_LEASE_GRANT:
        if (r->status == FENCE_ST_OK && cl->n_leases < SIM_CLIENT_LEASES)
            cl->leases[cl->n_leases++] = r->lease;
        break;
    case FENCE_CMD_LEASE_KEEPALIVE:
    case FENCE_CMD_LEASE_REVOKE:
        /* A renewal promises sent + the reply's TTL (docs/leases.md).  Not
         * a retry by REQID: that answers the first attempt's outcome (and
         * renews nothing more); fenced's LEASE.KEEPALIVE takes no REQID. */
        if (c->type == FENCE_CMD_LEASE_KEEPALIVE && r->status == FENCE_ST_OK &&
            !(c->flags & FENCE_CMD_F_REQID))
            sim_model_promise(s, c->lease, q->sent_at, r->value, q->local);
        if (r->status == FENCE_ST_NOLEASE ||
            c->type == FENCE_CMD_LEASE_REVOKE) {
            for (unsigned k = 0; k < cl->n_leases; k++)
                if (cl->leases[k] == c->lease)
                    cl->leases[k] = cl->leases[--cl->n_leases];
            for (unsigned k = 0; k < cl->n_held;)
                if (cl->held[k].lease == c->lease)
                    cl->held[k] = cl->held[--cl->n_held];
                else
                    k++;
        }
        break;
    case FENCE_CMD_LOCK:
    case FENCE_CMD_ACQUIRE:
    case FENCE_CMD_ELECT_CAMPAIGN:
        if (r->status == FENCE_ST_OK)
            client_ack_grant(s, cl, q->lock, r->token,
                             c->type == FENCE_CMD_ACQUIRE ? r->lease : c->lease,
                             (c->flags & FENCE_CMD_F_SHARED) != 0);
        break;
    case FENCE_CMD_SEM_ACQUIRE:
        if (r->status == FENCE_ST_OK)
            client_ack_grant(s, cl, SIM_SEM_SLOT + r->slot, r->token,
                             c->lease != 0 ? c->lease : r->lease, false);
        break;
    case FENCE_CMD_LOCK_MULTI:
        /* One token for every name; the history names the first. */
        if (r->status == FENCE_ST_OK)
            client_ack_grant(s, cl, q->lock, r->token, c->lease != 0 ? c->lease : r->lease,
                             false);
        break;
    case FENCE_CMD_UNLOCK:
    case FENCE_CMD_SEM_RELEASE:
    case FENCE_CMD_UNLOCK_SHARED:
    case FENCE_CMD_ELECT_RESIGN:
        for (unsigned k = 0; k < cl->n_held; k++)
            if (cl->held[k].token == c->token &&
                (c->type != FENCE_CMD_UNLOCK_SHARED || cl->held[k].lease == c->lease)) {
                cl->held[k] = cl->held[--cl->n_held];
                break;
            }
        break;
    default:
        break;
    }
}

/* Queue a request to be sent again (same command, same REQID). */
static void client_retry(sim_client *cl, const sim_req *q)
{
    if (cl->n_retry >= SIM_PIPE_MAX)
        return;
    sim_req *d = &cl->retry[cl->n_retry++];
    *d = *q;
    if (d->cmd.name_len)
        d->cmd.name = d->name_buf;
    if (d->cmd.names_count)
        d->cmd.names = d->mnames;
    if (d->cmd.value_len)
        d->cmd.value = d->value_buf;
    d->sent = false;
    d->ans = ANS_NONE;
}

/* An answer's state index against the rest of its pipeline: a read sees
 * its pipeline's earlier writes and no later one, and every write that was
 * acknowledged anywhere before it was sent.  Writes answered by a wait's
 * outcome are left out (their command applied at an earlier index). */
static void check_pipeline(sim *s, sim_client *cl, unsigned k)
{
    const sim_req *q = &cl->pipe[k];
    if (q->ans == ANS_READ) {
        if (q->state_index < q->floor_index)
            sim_fail(s, "client %u: a read was answered from index %" PRIu64
                        " but index %" PRIu64 " was acknowledged before it "
                        "was sent", cl->id, q->state_index, q->floor_index);
        for (unsigned j = 0; j < cl->n_pipe; j++) {
            const sim_req *w = &cl->pipe[j];
            if (j == k || w->ans != ANS_RESULT || w->from_wait || w->local)
                continue; /* (a renewal answered without an entry is no write) */
            if (j < k && w->state_index > q->state_index)
                sim_fail(s, "client %u: a read was answered from index %" PRIu64
                            ", before the write ahead of it in its pipeline "
                            "(applied at index %" PRIu64 ")",
                         cl->id, q->state_index, w->state_index);
            if (j > k && w->state_index <= q->state_index)
                sim_fail(s, "client %u: a read answered from index %" PRIu64
                            " saw the write behind it in its pipeline "
                            "(applied at index %" PRIu64 ")",
                         cl->id, q->state_index, w->state_index);
        }
        s->res->reads++;
    }
}

/* The current pipeline is over: nothing of it may be answered any more;
 * the next one uses the other half. */
static void pipe_end(sim_client *cl)
{
    for (unsigned k = 0; k < SIM_PIPE_MAX; k++)
        cl->pipe[k].sent = false;
    cl->n_pipe = cl->n_done = 0;
    cl->pipe = cl->pipe == cl->pipes[0] ? cl->pipes[1] : cl->pipes[0];
}

/* Process the answers at the head of the pipeline, in order. */
static void client_process(sim *s, sim_client *cl)
{
    if (cl->n_pipe == 0)
        return;
    while (cl->n_done < cl->n_pipe && cl->pipe[cl->n_done].ans != ANS_NONE) {
        sim_req *q = &cl->pipe[cl->n_done];
        if (q->ans == ANS_RESULT) {
            assert(q->r.status != FENCE_ST_QUEUED);
            client_result(s, cl, q);
            if (!q->from_wait && q->state_index > s->acked_index)
                s->acked_index = q->state_index;
        } else if (q->ans == ANS_ERROR) {
            if (q->err == FENCE_LERR_UNKNOWN || q->err == FENCE_LERR_RESTORED) {
                s->res->unknown_outcomes++;
                /* Retry only what is idempotent by request id. */
                if (q->cmd.flags & FENCE_CMD_F_REQID)
                    client_retry(cl, q);
            } else if (q->err == FENCE_LERR_UNAVAILABLE && !q->is_read &&
                       q->cmd.type != FENCE_CMD_CANCEL) {
                client_retry(cl, q); /* never applied: resend as it is */
            }
        }
        cl->n_done++;
    }
    if (cl->n_done < cl->n_pipe)
        return;
    /* Every answer is in: check the pipeline as a whole. */
    for (unsigned k = 0; k < cl->n_pipe; k++)
        check_pipeline(s, cl, k);
    pipe_end(cl);
    cl->next_at = s->fx.time + rng_range(&s->rng, 0, 300);
}

/* Close the client's connection: the node's module forgets its requests
 * (and cancels their waits through the log); those unanswered have an
 * unknown outcome, and the client retries the ones with a REQID. */
void sim_client_disconnect(sim *s, sim_client *cl)
{
    if (cl->node < 0)
        return;
    sim_node *n = &s->nodes[cl->node];
    fence__leader_conn_close(n->leader, &cl->lconn);
    for (unsigned k = cl->n_done; k < cl->n_pipe; k++) {
        sim_req *q = &cl->pipe[k];
        if (q->ans == ANS_NONE && !q->is_read &&
            (q->cmd.flags & FENCE_CMD_F_REQID) && rng_pct(&s->rng, 70))
            client_retry(cl, q);
    }
    if (cl->n_pipe > cl->n_done)
        s->res->disconnects++;
    cl->node = -1;
    pipe_end(cl);
    fence__leader_conn_init(&cl->lconn);
    cl->next_at = s->fx.time + rng_range(&s->rng, 10, 300);
}

/* Let a client act: process answers, give up a wait, disconnect at
 * random, or send its next pipeline (retries first). */
void sim_client_drive(sim *s, sim_client *cl)
{
    client_process(s, cl);
    if (cl->n_pipe > 0) {
        /* Outstanding requests: maybe go away (orphans, CANCEL). */
        if (s->fx.time >= cl->give_up_at ||
            (s->traffic && rng_pct(&s->rng, 1) && rng_pct(&s->rng, 20)))
            sim_client_disconnect(s, cl);
        return;
    }
    if (s->fx.time < cl->next_at)
        return;
    if (cl->n_retry == 0 && !s->traffic)
        return;
    int node = pick_node(s);
    if (node < 0) {
        cl->next_at = s->fx.time + 50;
        return;
    }
    if (cl->node != node) {
        sim_client_disconnect(s, cl);
        cl->node = node;
    }
    sim_node *n = &s->nodes[node];
    /* The pipeline: the retries, or 1..SIM_PIPE_MAX new requests. */
    if (cl->n_retry > 0) {
        for (unsigned k = 0; k < cl->n_retry; k++) {
            cl->pipe[k] = cl->retry[k];
            if (cl->pipe[k].cmd.name_len)
                cl->pipe[k].cmd.name = cl->pipe[k].name_buf;
            if (cl->pipe[k].cmd.names_count)
                cl->pipe[k].cmd.names = cl->pipe[k].mnames;
        }
        cl->n_pipe = cl->n_retry;
        cl->n_retry = 0;
    } else {
        unsigned len = (unsigned)rng_range(&s->rng, 1, SIM_PIPE_MAX);
        for (unsigned k = 0; k < len; k++)
            client_new_req(s, cl, &cl->pipe[k]);
        cl->n_pipe = len;
    }
    cl->n_done = 0;
    uint64_t wait_max = 0;
    for (unsigned k = 0; k < cl->n_pipe; k++)
        if (cl->pipe[k].cmd.wait_ms > wait_max)
            wait_max = cl->pipe[k].cmd.wait_ms;
    cl->give_up_at = s->fx.time + wait_max + 3000;
    /* Sent one by one: an answer may come back at once (refusals), and a
     * disconnect cannot happen in between (only this function does it). */
    for (unsigned k = 0; k < cl->n_pipe; k++) {
        sim_req *q = &cl->pipe[k];
        q->sent = true;
        q->ans = ANS_NONE;
        q->floor_index = s->acked_index;
        q->sent_at = s->fx.time;
        fence__leader_submit(n->leader, &cl->lconn, q, &q->cmd, q->is_read);
        q->local = q->ans == ANS_RESULT && q->cmd.type == FENCE_CMD_LEASE_KEEPALIVE;
        if (q->local)
            s->res->local_renewals++; /* answered at once: without an entry */
    }
    client_process(s, cl);
}
