/* Leader election (issue 21 §1; docs/recipes.md, docs/protocol.md): the
 * read side of the state machine's elections.
 *
 * An election is a name (in the one name space of locks, elections and
 * semaphores) whose lock object carries a value.  ELECT_CAMPAIGN queues a
 * lease as a candidate, FIFO, exactly as LOCK queues a waiter (wait_ms, the
 * lease's liveness, CANCEL, REQID, quotas and limits all work as for LOCK:
 * an election counts as a lock, a candidate as a wait); the candidate that
 * is granted the name is the leader, with a fencing token from the one
 * global counter, and its value becomes the election's.  ELECT_PROCLAIM
 * (the leader's token) changes the value; ELECT_RESIGN (the token), the
 * lease expiring (with its lock-delay, if any) or being revoked ends the
 * leadership and the next live candidate in line is elected with a new
 * token.  LOCK, ACQUIRE and UNLOCK of an election's name answer WRONGTYPE,
 * and so do the ELECT_* commands on a lock's name.
 *
 * Revisions: one counter for all elections (in the snapshot), taken for
 * every change of an election: a new leader, a new value, no leader any
 * more.  So an election's revision grows with every change, across
 * snapshots and leader changes, and never goes backwards, even when the
 * election goes away (no leader, no candidate) and comes back.  The
 * revision of an election that does not exist is the highest revision of
 * any gone election whose name hashes (FNV-1a, unkeyed) to the same one
 * of 256 slots, or 0: it changes only when such an election goes away, so
 * an observer of a name nobody campaigns for is not woken by other names'
 * elections (except, rarely, one of the same slot).
 *
 * Results: CAMPAIGN answers OK with token and lease (or QUEUED / NIL /
 * NOLEASE / LIMIT / NOPERM / WRONGTYPE as LOCK would); PROCLAIM answers OK
 * with value = the new revision, or value 0 when the token is not the
 * leader's; RESIGN answers OK with value 1, or 0 as UNLOCK does.  Every
 * result's revision is the global counter after the command. */
#ifndef FENCE_CORE_ELECT_H
#define FENCE_CORE_ELECT_H

#include <stdbool.h>
#include <stdint.h>

#include "core/fsm.h"

/* The state of one election, as ELECTION.LEADER / OBSERVE show it. */
typedef struct fence_fsm_elect_state {
    bool exists;          /* the election object exists */
    bool has_leader;      /* a leader holds it (the rest is 0 / NULL without) */
    uint64_t token;       /* the leader's token */
    uint64_t lease;       /* the leader's lease */
    uint64_t deadline_ms; /* its lease deadline, fsm time */
    const uint8_t *value; /* the leader's value (borrowed: valid until the
                             next call that changes the state) */
    uint32_t value_len;
    uint64_t revision;    /* see "Revisions" above */
    uint32_t candidates;  /* candidates queued */
} fence_fsm_elect_state;

/* Fill *out for name.  0, or FENCE_ST_WRONGTYPE when the name is a lock
 * (then *out says no leader, revision 0), or FENCE_ST_INVALID for a bad
 * name length. */
int fence_fsm_elect_info(const fence_fsm *f, const uint8_t *name, uint16_t len,
                         fence_fsm_elect_state *out);

/* The counter of election revisions: it moves whenever any election
 * changes (the server wakes its observers when it moved). */
uint64_t fence_fsm_elect_revision(const fence_fsm *f);

/* true when the name is an election right now (for WRONGTYPE wording). */
bool fence_fsm_is_election(const fence_fsm *f, const uint8_t *name, uint16_t len);

#endif /* FENCE_CORE_ELECT_H */
