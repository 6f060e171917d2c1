/* The parked ELECTION.OBSERVEs as plain data; see observe_set.h. */
#include "server/observe_set.h"

#include <stddef.h>
#include <string.h>

#include "base/assert.h"

void fence__obs_init(fence_obs_set *set, const fence_fsm *f)
{
    memset(set, 0, sizeof(*set));
    set->seen_rev = fence_fsm_elect_revision(f);
}

bool fence__obs_due(int rc, const fence_fsm_elect_state *st, uint64_t after)
{
    return rc != 0 || st->revision > after;
}

/* Remove o from the list whose head is *head. */
static void list_remove(fence_obs **head, fence_obs *o)
{
    if (o->prev != NULL)
        o->prev->next = o->next;
    else
        *head = o->next;
    if (o->next != NULL)
        o->next->prev = o->prev;
    o->next = o->prev = NULL;
}

static void list_push(fence_obs **head, fence_obs *o)
{
    o->prev = NULL;
    o->next = *head;
    if (*head != NULL)
        (*head)->prev = o;
    *head = o;
}

void fence__obs_park(fence_obs_set *set, fence_obs *o)
{
    o->timed_out = false;
    o->waking = false;
    list_push(&set->head, o);
    set->n++;
}

void fence__obs_remove(fence_obs_set *set, fence_obs *o)
{
    list_remove(o->waking ? &set->waking : &set->head, o);
    FENCE_ASSERT(set->n > 0);
    set->n--;
}

/* Move o from the parked list to the waking one. */
static void wake(fence_obs_set *set, fence_obs *o, bool timed_out)
{
    list_remove(&set->head, o);
    o->timed_out = timed_out;
    o->waking = true;
    list_push(&set->waking, o);
}

bool fence__obs_poll(fence_obs_set *set, const fence_fsm *f)
{
    uint64_t rev = fence_fsm_elect_revision(f);
    if (rev == set->seen_rev)
        return set->waking != NULL;
    set->seen_rev = rev; /* a restore may lower it: any change wakes */
    fence_obs *o = set->head;
    while (o != NULL) {
        fence_obs *next = o->next;
        fence_fsm_elect_state st;
        int rc = fence_fsm_elect_info(f, o->name, o->name_len, &st);
        if (fence__obs_due(rc, &st, o->after))
            wake(set, o, false);
        o = next;
    }
    return set->waking != NULL;
}

bool fence__obs_expire(fence_obs_set *set, uint64_t now)
{
    fence_obs *o = set->head;
    while (o != NULL) {
        fence_obs *next = o->next;
        if (o->deadline_ms <= now)
            wake(set, o, true);
        o = next;
    }
    return set->waking != NULL;
}

uint64_t fence__obs_first_deadline(const fence_obs_set *set)
{
    uint64_t first = UINT64_MAX;
    for (const fence_obs *o = set->head; o != NULL; o = o->next)
        if (o->deadline_ms < first)
            first = o->deadline_ms;
    return first;
}
