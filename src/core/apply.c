/* Apply: the commands of plain and shared locks and leases, the dispatch
 * to the kinds' files (multi.c, elect.c, checkpoint.c), and the dedup of
 * retried requests; the machinery they share (grants, hand-off and
 * releases, time) is grant.c's, below them all.  See fsm.h for the
 * semantics; everything here runs inside apply, where a failed allocation
 * stops the process (fence__alloc) instead of changing an answer.  Last, a
 * whole log entry: checked, then applied with read-ahead (entry.h). */
#include <string.h>

#include "core/entry.h"
#include "core/fsm_int.h"

/* ---- Commands ------------------------------------------------------------- */

/* True when a name length is acceptable. */
static bool name_ok(const fence_cmd *c)
{
    return c->name != NULL && c->name_len >= 1 && c->name_len <= FENCE_NAME_MAX;
}

/* LEADER_START: new limits; rebase every deadline onto now. */
static void cmd_leader_start(fence_fsm *f, const fence_cmd *c, fence_result *r)
{
    const fence_limits *lim = &c->limits;
    if (lim->leases_max == 0 || lim->locks_max == 0 || lim->waiters_max == 0 ||
        lim->waits_max == 0) {
        r->status = FENCE_ST_INVALID;
        return;
    }
    f->limits = *lim;
    fence__dedup_trim(f, lim->dedup_max);
    for (fence__link *p = f->wait_list.first; p != NULL; p = p->next) {
        fence__wait *w = WAIT_OF(p);
        w->hi.deadline_ms = f->now_ms + w->wait_ms;
    }
    for (fence__link *p = f->lease_list.first; p != NULL; p = p->next) {
        fence__lease *l = LEASE_OF(p);
        l->hi.deadline_ms = fence__lease_deadline(f, l);
    }
    /* Every lease, every wait and every lock in lock-delay has its one
     * heap item (fence_fsm_check), so the heap's surplus over the leases
     * and waits counts the locks in delay: without any, the walk over
     * every lock (a million cache misses at a million locks) is skipped. */
    uint64_t timed = (uint64_t)f->leases.count + f->waits.count;
    FENCE_ASSERT(f->heap.len >= timed);
    if (f->heap.len > timed) {
        for (fence__link *p = f->lock_list.first; p != NULL; p = p->next) {
            fence__lock *k = LOCK_OF(p);
            if (k->in_delay) {
                k->hi.deadline_ms = f->now_ms + k->delay_ms;
            }
        }
    }
    fence__heap_rebuild(&f->heap);
    r->status = FENCE_ST_OK;
}

/* LEASE_GRANT: a new lease. */
static void cmd_lease_grant(fence_fsm *f, const fence_cmd *c, fence_result *r)
{
    if (c->ttl_ms < FENCE_TTL_MS_MIN || c->ttl_ms > FENCE_TTL_MS_MAX ||
        c->lock_delay_ms > FENCE_LOCK_DELAY_MS_MAX) {
        r->status = FENCE_ST_INVALID;
        return;
    }
    if (f->leases.count >= f->limits.leases_max || fence__quota_leases_full(f, c)) {
        r->status = FENCE_ST_LIMIT;
        return;
    }
    fence__lease *l = fence__lease_add(f, f->next_lease_id, c->ttl_ms,
                                       c->lock_delay_ms,
                                       f->now_ms + c->ttl_ms, false, c->owner);
    if (l == NULL) {
        /* The heap's index range (counts only; memory never gets here). */
        r->status = FENCE_ST_LIMIT;
        return;
    }
    f->next_lease_id++;
    r->status = FENCE_ST_OK;
    r->lease = l->id;
    r->value = l->ttl_ms;
}

/* LEASE_KEEPALIVE: restart a live lease's full TTL. */
static void cmd_keepalive(fence_fsm *f, const fence_cmd *c, fence_result *r)
{
    fence__lease *l = fence__lease_find(f, c->lease);
    if (l == NULL || !fence__lease_live(f, l)) {
        r->status = FENCE_ST_NOLEASE;
        return;
    }
    if (!fence__may_use(c, l)) {
        r->status = FENCE_ST_NOPERM;
        return;
    }
    fence__heap_extend(&f->heap, &l->hi, fence__lease_deadline(f, l),
                       f->now_ms + l->ttl_ms / 2);
    FENCE_ASSERT(fence__lease_live(f, l));
    r->status = FENCE_ST_OK;
    r->lease = l->id;
    r->value = l->ttl_ms;
}

/* LEASE_REVOKE: remove a live lease; unknown or expired is fine too. */
static void cmd_revoke(fence_fsm *f, const fence_cmd *c, fence_result *r)
{
    fence__lease *l = fence__lease_find(f, c->lease);
    if (l != NULL && fence__lease_live(f, l)) {
        if (!fence__may_use(c, l)) {
            r->status = FENCE_ST_NOPERM;
            return;
        }
        f->n_revoked++;
        fence__lease_remove(f, l, false);
    }
    r->status = FENCE_ST_OK;
}

/* LOCK: grant, reentrant answer, queue, or NIL. */
static void cmd_lock(fence_fsm *f, const fence_cmd *c, fence_result *r)
{
    if (!name_ok(c) || c->wait_ms > FENCE_WAIT_MS_MAX) {
        r->status = FENCE_ST_INVALID;
        return;
    }
    if (fence__sem_claims(f, c->name, c->name_len)) {
        r->status = FENCE_ST_WRONGTYPE;
        return;
    }
    fence__lease *l = fence__lease_find(f, c->lease);
    if (l == NULL || !fence__lease_live(f, l)) {
        r->status = FENCE_ST_NOLEASE;
        return;
    }
    if (!fence__may_use(c, l)) {
        r->status = FENCE_ST_NOPERM;
        return;
    }
    bool shared = (c->flags & FENCE_CMD_F_SHARED) != 0;
    uint64_t hash = fence__lock_hash(f, c->name, c->name_len);
    fence__lock *k = fence__lock_find_hashed(f, c->name, c->name_len, hash);
    if (k != NULL && k->elect != NULL) {
        r->status = FENCE_ST_WRONGTYPE; /* the name is an election */
        return;
    }
    /* The owner's quota: a lock this lease holds or waits for already
     * counts, so only a new hold or wait is refused. */
    if ((k == NULL || (k->holder != l && fence__wait_of(l, k) == NULL &&
                       fence__shold_of(l, k) == NULL)) &&
        fence__quota_locks_full(f, c, 1)) {
        r->status = FENCE_ST_LIMIT;
        return;
    }
    if (k == NULL) {
        if (f->locks.count >= f->limits.locks_max) {
            r->status = FENCE_ST_LIMIT;
            return;
        }
        k = fence__lock_add_hashed(f, c->name, c->name_len, hash, 0, NULL);
        if (k == NULL) {
            /* The heap's index range (counts only). */
            r->status = FENCE_ST_LIMIT;
            return;
        }
    }
    bool holds_shared = k->nsholders > 0 && fence__shold_of(l, k) != NULL;
    if (k->holder == l || holds_shared) {
        if (holds_shared != shared) {
            /* Neither an upgrade nor a downgrade: say so. */
            r->status = FENCE_ST_INVALID;
            r->value = FENCE_INVALID_MODE;
            return;
        }
        r->status = FENCE_ST_OK;
        r->token = k->token;
        r->lease = l->id;
        return;
    }
    if (fence__lock_is_free(k) && k->nwaiters == 0) {
        r->status = FENCE_ST_OK;
        r->token = shared ? fence__grant_shared(f, k, l) : fence__grant(f, k, l);
        r->lease = l->id;
        return;
    }
    if (shared && k->nsholders > 0 && k->nwaiters == 0) {
        /* Nothing queued ahead: join the current phase. */
        r->status = FENCE_ST_OK;
        r->token = fence__join_shared(f, k, l);
        r->lease = l->id;
        return;
    }
    fence__wait *w = fence__wait_of(l, k);
    if (w != NULL) {
        if (w->shared != shared) {
            r->status = FENCE_ST_INVALID;
            r->value = FENCE_INVALID_MODE;
            return;
        }
        r->status = FENCE_ST_QUEUED;
        r->wait_id = w->id;
        r->lease = l->id;
        return;
    }
    if (c->wait_ms == 0) {
        r->status = FENCE_ST_NIL;
        return;
    }
    w = fence__enqueue_as(f, l, k, c, false, r);
    if (w != NULL) {
        w->shared = shared;
    }
}

/* Release every lock l holds exclusively with token: one lock, or all the
 * names of one multi-lock (multi.c), in held-list order. */
static void release_group(fence_fsm *f, fence__lease *l, uint64_t token)
{
    fence__link *p = l->held.first;
    while (p != NULL) {
        fence__lock *g = HELD_OF(p);
        p = p->next;
        if (g->token == token) {
            fence__held_unlink(f, g);
            fence__handoff(f, g);
        }
    }
}

/* UNLOCK: release if the token is the holder's; a dedicated lease goes too. */
static void cmd_unlock(fence_fsm *f, const fence_cmd *c, fence_result *r)
{
    if (!name_ok(c)) {
        r->status = FENCE_ST_INVALID;
        return;
    }
    if (fence__sem_claims(f, c->name, c->name_len)) {
        r->status = FENCE_ST_WRONGTYPE;
        return;
    }
    r->status = FENCE_ST_OK;
    fence__lock *k = fence__lock_find(f, c->name, c->name_len);
    if (k != NULL && k->elect != NULL) {
        r->status = FENCE_ST_WRONGTYPE; /* the name is an election */
        return;
    }
    if (k != NULL && k->nsholders > 0 && k->token == c->token) {
        /* The holders of a phase share this token: which one? */
        r->status = FENCE_ST_INVALID;
        r->value = FENCE_INVALID_SHARED;
        return;
    }
    if (k == NULL || k->holder == NULL || k->token != c->token) {
        r->value = 0;
        return;
    }
    fence__lease *l = k->holder;
    if (!fence__may_use(c, l)) {
        r->status = FENCE_ST_NOPERM;
        return;
    }
    release_group(f, l, k->token);
    if (l->dedicated) {
        fence__lease_remove(f, l, false);
    }
    r->value = 1;
}

/* ACQUIRE: a dedicated lease plus LOCK, as one command. */
static void cmd_acquire(fence_fsm *f, const fence_cmd *c, fence_result *r)
{
    if (!name_ok(c) || c->ttl_ms < FENCE_TTL_MS_MIN ||
        c->ttl_ms > FENCE_TTL_MS_MAX ||
        c->lock_delay_ms > FENCE_LOCK_DELAY_MS_MAX ||
        c->wait_ms > FENCE_WAIT_MS_MAX) {
        r->status = FENCE_ST_INVALID;
        return;
    }
    if (fence__sem_claims(f, c->name, c->name_len)) {
        r->status = FENCE_ST_WRONGTYPE;
        return;
    }
    if (f->leases.count >= f->limits.leases_max || fence__quota_leases_full(f, c) ||
        fence__quota_locks_full(f, c, 1)) {
        r->status = FENCE_ST_LIMIT;
        return;
    }
    bool shared = (c->flags & FENCE_CMD_F_SHARED) != 0;
    fence__lock *k = fence__lock_find(f, c->name, c->name_len);
    if (k != NULL && k->elect != NULL) {
        r->status = FENCE_ST_WRONGTYPE; /* the name is an election */
        return;
    }
    bool join = shared && k != NULL && k->nsholders > 0 && k->nwaiters == 0;
    bool free_now = k == NULL || (fence__lock_is_free(k) && k->nwaiters == 0) || join;
    if (!free_now) {
        if (c->wait_ms == 0) {
            r->status = FENCE_ST_NIL;
            return;
        }
        if (k->nwaiters >= f->limits.waiters_max ||
            f->waits.count >= f->limits.waits_max) {
            r->status = FENCE_ST_LIMIT;
            return;
        }
    } else if (k == NULL && f->locks.count >= f->limits.locks_max) {
        r->status = FENCE_ST_LIMIT;
        return;
    }
    fence__lease *l = fence__lease_add(f, f->next_lease_id, c->ttl_ms,
                                       c->lock_delay_ms,
                                       f->now_ms + c->ttl_ms, true, c->owner);
    if (l == NULL) {
        /* The heap's index range (counts only). */
        r->status = FENCE_ST_LIMIT;
        return;
    }
    if (free_now) {
        if (k == NULL) {
            k = fence__lock_add(f, c->name, c->name_len, 0, NULL);
            if (k == NULL) {
                /* The heap's index range (counts only). */
                fence__lease_destroy(f, l);
                r->status = FENCE_ST_LIMIT;
                return;
            }
        }
        f->next_lease_id++;
        r->status = FENCE_ST_OK;
        r->token = join ? fence__join_shared(f, k, l)
                   : shared ? fence__grant_shared(f, k, l) : fence__grant(f, k, l);
        r->lease = l->id;
        return;
    }
    fence__wait *w = fence__enqueue_as(f, l, k, c, true, r);
    if (w == NULL) {
        fence__lease_destroy(f, l);
        return;
    }
    w->shared = shared;
    f->next_lease_id++;
    fence__heap_move(&f->heap, &l->hi, fence__lease_deadline(f, l));
}

/* CANCEL: the waiting client went away. */
static void cmd_cancel(fence_fsm *f, const fence_cmd *c, fence_result *r)
{
    fence__wait *w = fence__wait_find(f, c->wait_id);
    if (w != NULL) {
        /* The request had no lasting effect (an ACQUIRE's lease is revoked
         * with it), so forget the request ids attached to the wait (its
         * own and those of LOCKs that joined it): a client that lost its
         * connection and retries with the same REQID (after a failover,
         * say) queues afresh instead of being told "timed out" early. */
        fence__forget_reqs(f, w);
        fence__wait_fail(f, w, FENCE_ST_NIL, true);
    }
    r->status = FENCE_ST_OK;
}

/* UNLOCK_SHARED: release lease c->lease's hold of the lock if the token is
 * the hold's (a shared hold, or an exclusive one of that lease); a
 * dedicated lease goes too. */
void fence__cmd_unlock_shared(fence_fsm *f, const fence_cmd *c, fence_result *r)
{
    if (c->name == NULL || c->name_len < 1 || c->name_len > FENCE_NAME_MAX) {
        r->status = FENCE_ST_INVALID;
        return;
    }
    if (fence__sem_claims(f, c->name, c->name_len)) {
        r->status = FENCE_ST_WRONGTYPE; /* a semaphore or its slot */
        return;
    }
    r->status = FENCE_ST_OK;
    fence__lock *k = fence__lock_find(f, c->name, c->name_len);
    if (k != NULL && k->elect != NULL) {
        r->status = FENCE_ST_WRONGTYPE; /* the name is an election */
        return;
    }
    fence__lease *l = fence__lease_find(f, c->lease);
    if (k == NULL || l == NULL || k->token != c->token) {
        r->value = 0;
        return;
    }
    fence__shold *s = k->nsholders > 0 ? fence__shold_of(l, k) : NULL;
    if (s == NULL && k->holder != l) {
        r->value = 0;
        return;
    }
    if (!fence__may_use(c, l)) {
        r->status = FENCE_ST_NOPERM;
        return;
    }
    if (s != NULL) {
        fence__shold_remove(f, s);
        if (k->nsholders == 0) {
            fence__handoff(f, k);
        }
    } else {
        /* An exclusive hold: as UNLOCK (a multi-lock's names all go). */
        release_group(f, l, k->token);
    }
    if (l->dedicated) {
        fence__lease_remove(f, l, false);
    }
    r->value = 1;
}

/* Run one command (no dedup, no time). */
static void dispatch(fence_fsm *f, const fence_cmd *c, fence_result *r)
{
    switch (c->type) {
    case FENCE_CMD_LEADER_START:
        cmd_leader_start(f, c, r);
        break;
    case FENCE_CMD_TICK:
        r->status = FENCE_ST_OK;
        break;
    case FENCE_CMD_LEASE_GRANT:
        cmd_lease_grant(f, c, r);
        break;
    case FENCE_CMD_LEASE_KEEPALIVE:
        cmd_keepalive(f, c, r);
        break;
    case FENCE_CMD_LEASE_REVOKE:
        cmd_revoke(f, c, r);
        break;
    case FENCE_CMD_LOCK:
        cmd_lock(f, c, r);
        break;
    case FENCE_CMD_UNLOCK:
        cmd_unlock(f, c, r);
        break;
    case FENCE_CMD_ACQUIRE:
        cmd_acquire(f, c, r);
        break;
    case FENCE_CMD_CANCEL:
        cmd_cancel(f, c, r);
        break;
    case FENCE_CMD_SEM_ACQUIRE:
        fence__cmd_sem_acquire(f, c, r);
        break;
    case FENCE_CMD_SEM_RELEASE:
        fence__cmd_sem_release(f, c, r);
        break;
    case FENCE_CMD_UNLOCK_SHARED:
        fence__cmd_unlock_shared(f, c, r);
        break;
    case FENCE_CMD_LOCK_MULTI:
        fence__multi_cmd(f, c, r);
        break;
    case FENCE_CMD_LEASE_CHECKPOINT:
        fence__cmd_checkpoint(f, c, r); /* checkpoint.c */
        break;
    case FENCE_CMD_ELECT_CAMPAIGN:
        fence__elect_campaign(f, c, r);
        break;
    case FENCE_CMD_ELECT_PROCLAIM:
        fence__elect_proclaim(f, c, r);
        break;
    case FENCE_CMD_ELECT_RESIGN:
        fence__elect_resign(f, c, r);
        break;
    default:
        r->status = FENCE_ST_INVALID;
        break;
    }
}

static void apply_cmd(fence_fsm *f, const fence_cmd *cmd, fence_result *out);

/* Apply one command at now_ms: advance time (LEADER_START only moves the
 * clock: it rebases the old deadlines instead of firing them), run the
 * command, then process anything still due (see apply_cmd). */
void fence__apply_one(fence_fsm *f, uint64_t now_ms, const fence_cmd *cmd,
                      fence_result *out)
{
    FENCE_ASSERT(f != NULL);
    FENCE_ASSERT(f->oom == FENCE__OOM_APPLY);
    FENCE_ASSERT(cmd != NULL);
    FENCE_ASSERT(out != NULL);
    FENCE_ASSERT(now_ms <= FENCE_TIME_MS_MAX);
    memset(out, 0, sizeof(*out));
    if (cmd->type == FENCE_CMD_LEADER_START) {
        if (now_ms > f->now_ms) {
            f->now_ms = now_ms;
        }
    } else {
        fence__advance(f, now_ms);
    }
    apply_cmd(f, cmd, out);
    /* A LEADER_START that did not rebase (invalid, or answered from the
     * dedup table) leaves old deadlines due: process them now. */
    fence__process_due(f);
}

/* Apply one command; the events are this call's alone. */
void fence_fsm_apply(fence_fsm *f, uint64_t now_ms, const fence_cmd *cmd,
                     fence_result *out)
{
    FENCE_ASSERT(f != NULL);
    f->oom = FENCE__OOM_APPLY;
    fence__events_reset(f);
    fence__apply_one(f, now_ms, cmd, out);
}

/* Dedup lookup, the command itself, dedup record. */
static void apply_cmd(fence_fsm *f, const fence_cmd *cmd, fence_result *out)
{
    if ((cmd->flags & ~FENCE_CMD_F_ALL) != 0 ||
        ((cmd->flags & FENCE_CMD_F_SHARED) != 0 && cmd->type != FENCE_CMD_LOCK &&
         cmd->type != FENCE_CMD_ACQUIRE)) {
        out->status = FENCE_ST_INVALID;
        return;
    }
    fence__dedup *d = NULL;
    uint64_t fp = 0;
    if (cmd->flags & FENCE_CMD_F_REQID) {
        fp = fence__cmd_fp(cmd);
        fence__dedup *old = fence__dedup_find(f, cmd->req_id, cmd->owner);
        if (old != NULL) {
            if (old->fp != fp) {
                /* The same request id for a different request. */
                memset(out, 0, sizeof(*out));
                out->status = FENCE_ST_INVALID;
                return;
            }
            *out = old->result;
            return;
        }
        if (f->limits.dedup_max > 0) {
            if (f->dedup.count >= f->limits.dedup_max) {
                d = fence__dedup_pop_oldest(f);
            } else {
                d = fence__alloc(f, sizeof(*d));
                FENCE_ASSERT(d != NULL); /* fence__alloc stops on failure */
            }
            memset(d, 0, sizeof(*d));
            d->req_id = cmd->req_id;
            d->owner = cmd->owner;
            d->fp = fp;
        }
    }
    uint64_t token_before = f->last_token;
    dispatch(f, cmd, out);
    FENCE_ASSERT(f->last_token >= token_before);
    FENCE_ASSERT(out->status <= FENCE_ST_LAST);
    FENCE_ASSERT(out->status != FENCE_ST_OK || out->token == 0 ||
                 out->token <= f->last_token);
    if (d != NULL) {
        d->result = *out;
        fence__dedup_link(f, d);
        if (out->status == FENCE_ST_QUEUED) {
            /* A new wait, or one this LOCK joined: either way its end
             * must resolve this record too. */
            fence__wait *w = fence__wait_find(f, out->wait_id);
            FENCE_ASSERT(w != NULL);
            fence__dedup_attach(d, w);
        }
        fence__dedup_trim(f, f->limits.dedup_max);
    }
}

/* ---- A whole entry ----------------------------------------------------------
 * An entry is checked whole before anything runs (a malformed one changes
 * nothing), then applied command by command.  Replaying a log of a million
 * commands is bound by cache misses: every LOCK looks up its lease and its
 * lock, every LEASE_GRANT inserts into a table of a million leases.  So the
 * checking pass also notes, per command, the hashes of the keys it will
 * look up, and apply uses the notes to read ahead: for the command
 * APPLY_AHEAD places in front it prefetches the buckets, for the one half
 * as far (whose buckets are cached by now) the first node of each chain.
 * Each command is decoded twice (checked, applied), its name hashed once
 * for the read-ahead.  A prefetch is a hint: it changes no result, and a
 * wrong guess (a lease id that a LEASE_GRANT ahead will get, a bucket that
 * moved when a table grew) costs nothing but the fetch. */
#define APPLY_AHEAD 8u

/* The keys one command will look up: the low 32 bits of their hashes (a
 * bucket index never needs more; 0: no lookup, or a guess not made). */
typedef struct ahead_keys {
    uint32_t lock_hash;
    uint32_t lease_hash;
} ahead_keys;

/* The keys of c; *grant_id is the id the next LEASE_GRANT will get. */
static ahead_keys keys_of(const fence_fsm *f, const fence_cmd *c, uint64_t *grant_id)
{
    ahead_keys k = {0, 0};
    switch (c->type) {
    case FENCE_CMD_LOCK:
        k.lease_hash = (uint32_t)fence__key_hash(f, c->lease);
        /* fall through */
    case FENCE_CMD_UNLOCK:
    case FENCE_CMD_ACQUIRE:
        if (c->name_len > 0) {
            k.lock_hash = (uint32_t)fence__hash_name(f->hash_seed, c->name, c->name_len);
        }
        break;
    case FENCE_CMD_LEASE_KEEPALIVE:
    case FENCE_CMD_LEASE_REVOKE:
        k.lease_hash = (uint32_t)fence__key_hash(f, c->lease);
        break;
    case FENCE_CMD_LEASE_GRANT:
        k.lease_hash = (uint32_t)fence__key_hash(f, (*grant_id)++);
        break;
    default:
        break;
    }
    return k;
}

/* Check a whole entry (noting its keys), then apply every command at its
 * timestamp. */
int fence_fsm_apply_entry(fence_fsm *f, const uint8_t *buf, size_t len,
                          fence_result *results, uint32_t results_cap)
{
    FENCE_ASSERT(f != NULL);
    fence_entry_iter it;
    fence_cmd c;
    int rc;
    f->oom = FENCE__OOM_APPLY;
    fence__events_reset(f);
    if (fence_entry_open(&it, buf, len) != 0) {
        return -FENCE_ST_INVALID;
    }
    /* fence_entry_open refuses a count over FENCE_BATCH_MAX. */
    ahead_keys keys[FENCE_BATCH_MAX];
    uint64_t grant_id = f->next_lease_id;
    uint32_t n = 0;
    while ((rc = fence_entry_next(&it, &c)) == 1) {
        FENCE_ASSERT(n < FENCE_BATCH_MAX);
        keys[n++] = keys_of(f, &c, &grant_id);
    }
    if (rc != 0) {
        return -FENCE_ST_INVALID;
    }
    rc = fence_entry_open(&it, buf, len);
    FENCE_ASSERT(rc == 0);
    FENCE_ASSERT(n == it.count);
    if (n == 0) {
        fence__advance(f, it.timestamp_ms);
        return 0;
    }
    /* The prefetches stay in this function's body: GCC 12 takes a void
     * helper that only prefetches for one without effects and drops its
     * calls (htab.h). */
    for (uint32_t j = 0; j < n && j < APPLY_AHEAD; j++) {
        fence__htab_prefetch(&f->locks, keys[j].lock_hash);
        fence__htab_prefetch(&f->leases, keys[j].lease_hash);
    }
    uint32_t i = 0;
    while ((rc = fence_entry_next(&it, &c)) == 1) {
        FENCE_ASSERT(i < n);
        if (i + APPLY_AHEAD / 2 < n) {
            const ahead_keys *k = &keys[i + APPLY_AHEAD / 2];
            if (k->lock_hash != 0) {
                fence__htab_prefetch_node(&f->locks, k->lock_hash);
            }
            if (k->lease_hash != 0) {
                fence__htab_prefetch_node(&f->leases, k->lease_hash);
            }
        }
        fence_result r;
        fence__apply_one(f, it.timestamp_ms, &c, &r);
        /* After apply, so the buckets are those of the tables as they are
         * now (one may have grown). */
        if (i + APPLY_AHEAD < n) {
            fence__htab_prefetch(&f->locks, keys[i + APPLY_AHEAD].lock_hash);
            fence__htab_prefetch(&f->leases, keys[i + APPLY_AHEAD].lease_hash);
        }
        if (i < results_cap) {
            FENCE_ASSERT(results != NULL);
            results[i] = r;
        }
        i++;
    }
    FENCE_ASSERT(rc == 0);
    FENCE_ASSERT(i == n);
    return (int)i;
}
