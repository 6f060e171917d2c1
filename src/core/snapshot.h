/* The snapshot codec: the whole state of a fence_fsm as deterministic bytes
 * (sorted by key), versioned and checksummed, and a restore that trusts
 * nothing (it validates every field and, last, every invariant).
 * Two state machines in the same state give byte-identical snapshots. */
#ifndef FENCE_CORE_SNAPSHOT_H
#define FENCE_CORE_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "core/fsm.h"

/* Bytes needed for a snapshot of the current state. */
size_t fence_fsm_snapshot_size(const fence_fsm *f);
/* Write the snapshot into buf (cap >= fence_fsm_snapshot_size); returns the
 * length written. */
size_t fence_fsm_snapshot(const fence_fsm *f, uint8_t *buf, size_t cap);
/* Snapshot layout: see snapshot.c.  Leases in id order, locks in order of
 * their current token (shared only by one multi-lock's locks, which keep
 * their grant order; waits name a lock by its place in that list), waits
 * in id order (which is each lock's FIFO order), dedup records oldest first
 * (the eviction order), the kinds' sections (multi: core/multi.c), then a
 * CRC32C.  A restore forgets the collected
 * events (they are not part of the state).
 *
 * Replace the state with a decoded snapshot.  0 on success; FENCE_ST_INVALID
 * for a malformed or corrupt buffer, or one of an unknown version (the
 * state is then unchanged); FENCE_ST_LIMIT for lack of memory, only into a
 * state machine that has never applied anything (state unchanged).  Into a
 * live one a failed allocation stops the process (fence__fatal), since that
 * replica could not follow the others.  The restored state is live. */
int fence_fsm_restore(fence_fsm *f, const uint8_t *buf, size_t len);

#endif /* FENCE_CORE_SNAPSHOT_H */
