/* The state machine's memory rules: every allocation of src/core goes
 * through the injected allocator (fence_alloc), and a failure follows the
 * state's FENCE__OOM_* mode (fsm_int.h).  The lowest file of the core:
 * htab.c, heap.c and the object files allocate through it, and it calls
 * none of them. */
#include "core/fsm_int.h"

/* Allocate size bytes through the injected allocator; NULL on failure. */
void *fence__alloc(fence_fsm *f, size_t size)
{
    FENCE_ASSERT(size > 0);
    void *p = f->alloc.alloc(f->alloc.ctx, size);
    if (p == NULL) {
        fence__oom(f->oom);
    }
    return p;
}

/* A failed allocation in mode oom: nothing in FENCE__OOM_RETURN (the
 * caller reports it), a crash-stop otherwise.  A replica that cannot apply
 * an entry may not answer it differently from the others, which would
 * diverge the token counters and, after a failover, grant a token twice;
 * stopping it leaves the cluster to the replicas that can go on. */
void fence__oom(uint8_t oom)
{
    switch (oom) {
    case FENCE__OOM_RETURN:
        return;
    case FENCE__OOM_APPLY:
        fence__fatal("out of memory while applying a log entry "
                     "(a replica may not answer differently: stopping)");
    case FENCE__OOM_RESTORE:
        fence__fatal("out of memory while restoring a snapshot into a live "
                     "state machine: stopping");
    default:
        FENCE_ASSERT(0);
    }
}

/* Free memory from fence__alloc; NULL is a no-op. */
void fence__free(fence_fsm *f, void *p)
{
    if (p != NULL) {
        f->alloc.free(f->alloc.ctx, p);
    }
}
