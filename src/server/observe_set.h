/* The parked ELECTION.OBSERVEs of one server as plain data (docs/protocol.md,
 * ELECTION.OBSERVE): which to answer once an apply changed their election,
 * which once their WAIT ran out.  No libuv, no slots, no allocation:
 * fenced's observe.c embeds a fence_obs in each parked request, the
 * simulation (tests/sim/sim_observe.c) in each simulated observer, and both
 * decide with the same code.
 *
 * The rule: OBSERVE name AFTER r is answered at once with the election's
 * state when its revision is above r (fence__obs_due); otherwise it is
 * parked.  Once per loop turn fence__obs_poll moves to the waking list
 * every parked observer whose election's revision is now above its r (or
 * whose name is no longer an election), scanning only when the core's
 * election counter moved since the last scan (a restore may lower it: any
 * change scans).  fence__obs_expire moves those whose deadline passed,
 * marked timed out (they answer nil).  The caller answers and takes off
 * the waking list (fence__obs_remove) each one. */
#ifndef FENCE_SERVER_OBSERVE_SET_H
#define FENCE_SERVER_OBSERVE_SET_H

#include <stdbool.h>
#include <stdint.h>

#include "base/limits.h"
#include "core/elect.h"

/* One parked observer (embedded in the caller's request). */
typedef struct fence_obs fence_obs;
struct fence_obs {
    fence_obs *next;
    fence_obs *prev;
    uint64_t after;        /* answer a revision above this */
    uint64_t deadline_ms;  /* loop time at which it answers nil */
    bool timed_out;        /* on the waking list: answer nil */
    bool waking;           /* on the waking list (else parked) */
    uint16_t name_len;
    uint8_t name[FENCE_NAME_MAX];
};

/* The set of one server. */
typedef struct fence_obs_set {
    fence_obs *head;   /* parked (a doubly linked list) */
    fence_obs *waking; /* due: the caller answers them */
    uint32_t n;        /* parked or waking */
    uint64_t seen_rev; /* the core's election counter at the last scan */
} fence_obs_set;

/* An empty set over fsm's current election counter. */
void fence__obs_init(fence_obs_set *set, const fence_fsm *f);

/* Whether a request AFTER after is answered at once, given the status and
 * state fence_fsm_elect_info gave for its name. */
bool fence__obs_due(int rc, const fence_fsm_elect_state *st, uint64_t after);

/* Park o (after, deadline_ms and the name filled in). */
void fence__obs_park(fence_obs_set *set, fence_obs *o);

/* Take o off whichever list holds it. */
void fence__obs_remove(fence_obs_set *set, fence_obs *o);

/* Once per loop turn: move the observers the elections' changes woke to
 * the waking list; true when any is waking. */
bool fence__obs_poll(fence_obs_set *set, const fence_fsm *f);

/* Move the parked observers whose deadline is <= now to the waking list,
 * timed out; true when any is waking. */
bool fence__obs_expire(fence_obs_set *set, uint64_t now);

/* The earliest deadline of the parked observers (UINT64_MAX: none). */
uint64_t fence__obs_first_deadline(const fence_obs_set *set);

#endif /* FENCE_SERVER_OBSERVE_SET_H */
