/* LEASE_CHECKPOINT: the renewals the leader answered itself (without an
 * entry each) since its last checkpoint; docs/leases.md says what a client
 * may rely on.  Each live lease listed restarts its full TTL at the
 * entry's time, exactly as LEASE_KEEPALIVE would.  An unknown or expired
 * id is a no-op: everything due was processed before the command runs, so
 * an expired lease is gone by then, and a checkpoint never revives one
 * (the rule "never grant to an expired lease" is the replicated state's,
 * untouched by what the leader answered).  A lease listed twice is renewed
 * twice at the same time: the same deadline.  No owner check: the leader
 * lists only renewals it answered OK, which it checked against the lease's
 * owner as apply would (src/leader/renew.c).  value: the live leases
 * renewed. */
#include "base/bytes.h"
#include "core/fsm_int.h"

/* Read-ahead over the ids (bucket, then its first node), as apply.c's:
 * at a million leases each id is a cache miss for its bucket and another
 * for its lease, which fetching ahead overlaps. */
#define CKPT_AHEAD 16

/* The id at position i of c's list. */
static uint64_t id_at(const fence_cmd *c, uint32_t i)
{
    return fence__get_u64(c->ids + (size_t)i * 8);
}

void fence__cmd_checkpoint(fence_fsm *f, const fence_cmd *c, fence_result *r)
{
    if (c->ids_count == 0 || c->ids_count > FENCE_CHECKPOINT_IDS_MAX || c->ids == NULL) {
        r->status = FENCE_ST_INVALID;
        return;
    }
    uint64_t renewed = 0;
    uint32_t n = c->ids_count;
    for (uint32_t j = 0; j < n && j < CKPT_AHEAD; j++) {
        fence__htab_prefetch(&f->leases, fence__key_hash(f, id_at(c, j)));
    }
    for (uint32_t i = 0; i < n; i++) {
        if (i + CKPT_AHEAD / 2 < n) {
            fence__htab_prefetch_node(&f->leases,
                                      fence__key_hash(f, id_at(c, i + CKPT_AHEAD / 2)));
        }
        if (i + CKPT_AHEAD < n) {
            fence__htab_prefetch(&f->leases, fence__key_hash(f, id_at(c, i + CKPT_AHEAD)));
        }
        fence__lease *l = fence__lease_find(f, id_at(c, i));
        if (l == NULL || !fence__lease_live(f, l)) {
            continue;
        }
        /* Later only, in place: no sift per id (heap.h). */
        fence__heap_extend(&f->heap, &l->hi, fence__lease_deadline(f, l),
                       f->now_ms + l->ttl_ms / 2);
        FENCE_ASSERT(fence__lease_live(f, l));
        renewed++;
    }
    r->status = FENCE_ST_OK;
    r->value = renewed;
}
