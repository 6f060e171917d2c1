/* The one place where the kinds of lock hand the lock machinery what
 * they add at its hand-off and release points (fsm_int.h
 * fence__kind_hooks): grant.c and lock.c call through f->kinds, so that
 * the machinery never calls up into a kind's file (docs/conventions.md
 * "files call down").  A new kind adds its hooks here. */
#include "core/fsm_int.h"

void fence__kinds_init(fence_fsm *f)
{
    f->kinds.multi_try = fence__multi_try;
    f->kinds.multi_fail = fence__multi_fail;
    f->kinds.elect_won = fence__elect_won;
    f->kinds.elect_lost = fence__elect_lost;
    f->kinds.elect_cand_free = fence__elect_cand_free;
    f->kinds.elect_lock_gone = fence__elect_lock_gone;
    f->kinds.sem_slot_free = fence__sem_slot_free;
    f->kinds.sem_maybe_destroy = fence__sem_maybe_destroy;
    f->kinds.sem_unqueue = fence__sem_unqueue;
}
