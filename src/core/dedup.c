/* The dedup table: results remembered by client request id (REQID), so
 * that a retried request gets the first answer instead of running twice.
 * Records are kept by age and the oldest evicted past dedup_max. */
#include <string.h>

#include "base/hash.h"
#include "core/fsm_int.h"

/* The table hash of key (req_id, owner).  Owner 0 (the default user, and
 * every record of an older log) hashes as req_id alone did.  Two keys may
 * share a hash: fence__dedup_find compares both fields. */
static uint64_t dedup_hash(const fence_fsm *f, uint64_t req_id, uint64_t owner)
{
    return fence__key_hash(f, req_id ^ (owner * 0x9E3779B97F4A7C15ULL));
}

/* The dedup record for (req_id, owner), or NULL. */
fence__dedup *fence__dedup_find(const fence_fsm *f, uint64_t req_id, uint64_t owner)
{
    uint64_t hash = dedup_hash(f, req_id, owner);
    for (fence__hnode *h = fence__htab_bucket(&f->dedup, hash); h != NULL; h = h->next) {
        fence__dedup *d = FENCE__CONTAINER(h, fence__dedup, hn);
        if (h->hash == hash && d->req_id == req_id && d->owner == owner)
            return d;
    }
    return NULL;
}

/* Link a filled-in record as the newest. */
void fence__dedup_link(fence_fsm *f, fence__dedup *d)
{
    FENCE_ASSERT(fence__dedup_find(f, d->req_id, d->owner) == NULL);
    d->hn.hash = dedup_hash(f, d->req_id, d->owner);
    fence__list_append(&f->dedup_list, &d->link);
    fence__htab_insert(f, &f->dedup, &d->hn);
}

/* Attach record d to wait w: its result is QUEUED with w's id, and the
 * end of w resolves it (apply.c) or, for a CANCEL, forgets it. */
void fence__dedup_attach(fence__dedup *d, fence__wait *w)
{
    FENCE_ASSERT(d->wait == NULL);
    FENCE_ASSERT(d->result.status == FENCE_ST_QUEUED);
    FENCE_ASSERT(d->result.wait_id == w->id);
    FENCE_ASSERT(w->nreqs < UINT32_MAX);
    fence__list_append(&w->reqs, &d->wlink);
    w->nreqs++;
    d->wait = w;
}

/* Detach record d from its wait, if attached. */
void fence__dedup_detach(fence__dedup *d)
{
    fence__wait *w = d->wait;
    if (w == NULL) {
        return;
    }
    FENCE_ASSERT(w->nreqs > 0);
    fence__list_remove(&w->reqs, &d->wlink);
    w->nreqs--;
    d->wait = NULL;
}

/* Unlink the oldest record (from its wait too) and hand it back (not
 * freed). */
fence__dedup *fence__dedup_pop_oldest(fence_fsm *f)
{
    fence__dedup *d = DEDUP_OF(f->dedup_list.first);
    FENCE_ASSERT(d != NULL);
    fence__dedup_detach(d);
    fence__list_remove(&f->dedup_list, &d->link);
    fence__htab_remove(&f->dedup, &d->hn);
    return d;
}

/* Unlink record d from wherever it is in the age list (and from its wait)
 * and free it. */
void fence__dedup_forget(fence_fsm *f, fence__dedup *d)
{
    FENCE_ASSERT(fence__dedup_find(f, d->req_id, d->owner) == d);
    fence__dedup_detach(d);
    fence__list_remove(&f->dedup_list, &d->link);
    fence__htab_remove(&f->dedup, &d->hn);
    fence__free(f, d);
}

/* Evict the oldest records until at most max remain. */
void fence__dedup_trim(fence_fsm *f, uint32_t max)
{
    while (f->dedup.count > max) {
        fence__free(f, fence__dedup_pop_oldest(f));
    }
}

/* A fingerprint of everything a command asks for (type and fields), so a
 * request id reused for a different request is refused instead of being
 * answered with another request's result (which could hand one client the
 * token and lease of another).  FNV-1a over the fields in a fixed order:
 * deterministic on every replica (unlike the hash tables' seed). */
uint64_t fence__cmd_fp(const fence_cmd *cmd)
{
    uint64_t h = FENCE_FNV64_INIT;
    const uint64_t fields[] = {cmd->type,    cmd->lease,   cmd->token,
                               cmd->wait_id, cmd->ttl_ms,  cmd->wait_ms,
                               cmd->lock_delay_ms, cmd->name_len};
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
        h = fence__fnv1a64_add_u64(h, fields[i]);
    if (cmd->type == FENCE_CMD_SEM_ACQUIRE || cmd->type == FENCE_CMD_SEM_RELEASE) {
        /* Only for the types that use them: older commands keep the
         * fingerprints their dedup records were written with. */
        h = fence__fnv1a64_add_u64(h, cmd->permits);
        h = fence__fnv1a64_add_u64(h, cmd->slot);
    }
    FENCE_ASSERT(cmd->name_len == 0 || cmd->name != NULL);
    /* A shared request differs from the exclusive one (mixed in only when
     * set, so that every older command keeps its fingerprint). */
    if (cmd->flags & FENCE_CMD_F_SHARED)
        h = fence__fnv1a64_add_u64(h, FENCE_CMD_F_SHARED);
    h = fence__fnv1a64_add(h, cmd->name, cmd->name_len);
    /* LOCK_MULTI's names, in request order (nothing for other types, so
     * their fingerprints are as before). */
    for (uint16_t i = 0; i < cmd->names_count; i++) {
        h = fence__fnv1a64_add_u64(h, cmd->names[i].len);
        h = fence__fnv1a64_add(h, cmd->names[i].name, cmd->names[i].len);
    }
    if (cmd->type == FENCE_CMD_ELECT_CAMPAIGN || cmd->type == FENCE_CMD_ELECT_PROCLAIM) {
        /* The value (older types keep the fingerprint they always had). */
        FENCE_ASSERT(cmd->value_len == 0 || cmd->value != NULL);
        h = fence__fnv1a64_add_u64(h, cmd->value_len);
        h = fence__fnv1a64_add(h, cmd->value, cmd->value_len);
    }
    return h;
}

/* Add a record as the newest (restore uses it). */
fence__dedup *fence__dedup_add(fence_fsm *f, uint64_t req_id, uint64_t owner, uint64_t fp,
                               const fence_result *r)
{
    fence__dedup *d = fence__alloc(f, sizeof(*d));
    if (d == NULL) {
        return NULL;
    }
    memset(d, 0, sizeof(*d));
    d->req_id = req_id;
    d->owner = owner;
    d->fp = fp;
    d->result = *r;
    fence__dedup_link(f, d);
    return d;
}
