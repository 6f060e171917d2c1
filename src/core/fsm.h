/* The lock state machine: leases, locks with FIFO wait queues, and the
 * global fencing-token counter.
 *
 * Deterministic: no I/O, no clock, no randomness, no globals.  Memory comes
 * from an injected allocator; every object is counted against a limit
 * first, and the outcome of apply is a function of (state, entry) alone:
 * never of the allocator (a failed allocation inside apply stops the
 * process, see fence_fsm_create).  Time enters only as the timestamp the
 * leader wrote into each log entry.  Two state machines fed the same
 * entries end in byte-identical snapshots.
 *
 * Vocabulary:
 *   - A lease has an id (assigned here, from 1), a TTL, a deadline (fsm
 *     time), an optional lock-delay, and the set of locks it holds.
 *   - A lock has a name (1..FENCE_NAME_MAX bytes), at most one holder lease,
 *     the token of that grant, and a FIFO of waiters.
 *   - next_token: every grant takes next_token++ (first token is 1), across
 *     all locks.  A token is never issued twice and never goes backwards.
 *     A multi-lock (LOCK_MULTI) is one grant: its locks share its token.
 *
 * Time: "now" of an entry is max(previous now, entry timestamp), so fsm time
 * never goes backwards even if a new leader's clock is behind.  Before the
 * commands of an entry run, everything whose deadline is <= now is
 * processed in (deadline, kind, id) order: expired leases release their
 * locks (with lock-delay) and fail their waits; timed-out waits fail;
 * lock-delays that ended hand locks to waiters.  Grants check
 * deadline > now themselves as well (never grant to an expired lease).
 *
 * LEADER_START (the first entry of every new leader) rebases every deadline
 * onto the new leader's clock: lease deadline = now + ttl, wait deadline =
 * now + wait_ms, lock-delay end = now + lock_delay_ms.  That errs toward
 * keeping locks longer, never toward granting early.  A LEADER_START
 * command only moves the clock before it runs: it does not first fire the
 * old deadlines (they belong to the old leader's clock, so a new leader far
 * ahead in time does not expire everything at once).  A queued dedicated
 * ACQUIRE lease is rebased to max(now + ttl, its rebased wait deadline).
 * The leader should continue fsm time: timestamp = fence_fsm_now() at its
 * start + elapsed monotonic ms, so that time neither stalls nor jumps.
 *
 * Order of due work: (deadline, kind, id) with kind wait timeout (0) <
 * lease expiry (1) < lock-delay end (2); id = wait id, lease id, or the
 * lock's last token.  Hand-off grants to the first waiter in FIFO order
 * whose lease is live and whose wait has not timed out at now; waiters
 * passed over stay queued for the moment and fail (NOLEASE / NIL events)
 * when their own deadlines are processed in the same advance.  Outside an
 * advance no such waiter exists, since everything due was processed.
 *
 * Lease expiry and LEASE_REVOKE release the lease's locks in token order,
 * then fail its waits in wait-id order.  UNLOCK of a lock held by a
 * dedicated (ACQUIRE) lease releases that lock, hands it off, then revokes
 * the lease.  Lease ids are consumed only by leases that come into being
 * (an ACQUIRE answered NIL or LIMIT consumes none).
 *
 * Limits count objects, never bytes: leases_max live leases, locks_max lock
 * objects, waiters_max waits on one lock, waits_max waits in all, dedup_max
 * request ids.  A command that would pass one answers LIMIT.  A queued
 * multi-lock is one wait against waits_max and a waiter on each of its
 * locks against waiters_max; every name it creates counts against
 * locks_max, and every name against the owner's quota_locks.
 *
 * Multi-locks (LOCK_MULTI, core/multi.c; lease 0: the ACQUIRE form with a
 * dedicated lease of ttl_ms, lock_delay_ms): 1..FENCE_MULTI_NAMES_MAX
 * distinct names, all granted with one token or none (NIL without a wait,
 * INVALID for duplicate names or for a lease that holds or waits for part
 * of the set; the same set again is reentrant OK, or joins its wait).  A
 * queued one is ONE wait (one id, one event) with a place in every named
 * lock's FIFO, taken in one step; it holds nothing while waiting and is
 * granted when every lock is free and its place is the first eligible in
 * every FIFO.  FIFOs are strict: a free lock whose first waiter is such a
 * multi-lock stays free (reserved), and LOCK / ACQUIRE of it queue.  No
 * deadlock: waits sharing locks are in id order in every shared FIFO, so
 * "blocked by" points only at smaller ids.  UNLOCK of any one of its
 * names with the token releases every lock its lease holds with that
 * token; expiry and revocation release them as any locks.
 *
 * LEADER_START answers INVALID when leases_max, locks_max, waiters_max or
 * waits_max is 0 (dedup_max 0 turns dedup off); it then changes nothing, and the old
 * deadlines are processed as for any other command.  Lowering dedup_max
 * evicts the oldest records at once.
 *
 * Owners: every lease records the owner of the LEASE_GRANT or ACQUIRE that
 * created it (cmd.owner: the user, in the log, so every replica agrees).
 * LEASE_KEEPALIVE, LEASE_REVOKE and LOCK naming a live lease of another
 * owner, and UNLOCK with the right token of a lock whose holder lease has
 * another owner, answer NOPERM and change nothing, unless the command
 * carries FENCE_CMD_F_ADMIN.  (Unknown or expired leases still answer as
 * before: NOLEASE, or OK for REVOKE; a wrong token still answers 0.)
 * Request ids are scoped to the owner: the dedup key is (req_id, owner),
 * so one user cannot read or ride on another's request id.
 *
 * Quotas (per-owner limits): a command with FENCE_CMD_F_QUOTA carries its
 * user's own limits, which the leader took from the ACL (maxleases,
 * maxlocks) and wrote into the log, so every replica decides alike.
 * LEASE_GRANT and ACQUIRE answer LIMIT when the owner already has
 * quota_leases live leases; LOCK (unless the lease already holds or waits
 * for that lock) and ACQUIRE answer LIMIT when the owner's leases already
 * hold or wait for quota_locks locks.  The counts are derived from the
 * leases (their owner, held locks and waits), so a snapshot needs nothing
 * new: restore recounts them.  A limit lowered below what the owner has
 * takes nothing away; it only refuses new leases and locks.  Hand-offs
 * never exceed a quota: a waiter already counts.  Commands without the
 * flag (older logs, users without limits) are limited by the global limits
 * only.
 *
 * Dedup: a retry of a request id whose command was QUEUED gets QUEUED with
 * the same wait_id while the wait lasts (attach the retrying client to that
 * wait), and the outcome (OK with token/lease, NIL, NOLEASE) once resolved.
 * That holds for every request answered QUEUED with a wait: the LOCK that
 * queued it and any later LOCK of the same lease on the same lock (which
 * joins the existing wait instead of queueing twice).  A CANCELled wait
 * forgets all of their request ids, so each retry queues afresh.
 *
 * Semaphores (SEM_ACQUIRE, SEM_RELEASE; core/sem.c): a semaphore of N
 * permits (1..FENCE_SEM_PERMITS_MAX) is N slots, and slot i is the lock
 * named name#i (decimal, no leading zero): a resource fences it as that
 * name.  The first SEM_ACQUIRE fixes N (the name plus "#" and the digits of
 * N-1 must fit FENCE_NAME_MAX, else INVALID); one with another N answers
 * WRONGTYPE with value = N.  The semaphore exists while a slot is held or
 * in lock-delay or anyone waits, and goes away with the last; the next
 * acquire may then choose another N.  SEM_ACQUIRE grants the lowest free
 * slot (OK: token, lease, slot), or queues FIFO (QUEUED, WAIT as LOCK) or
 * answers NIL; a freed slot goes to the first live waiter.  A lease holds
 * at most one slot of a semaphore: acquiring again answers the slot it
 * holds (or the wait it has).  lease 0 is the dedicated form: ttl_ms and
 * lock_delay_ms make a lease as ACQUIRE does (revoked by SEM_RELEASE, a
 * wait timeout or CANCEL).  SEM_RELEASE frees the slot when token is its
 * holder's (value 1, else 0; INVALID for a slot >= N).  Slots are locks in
 * every other respect: expiry and LEASE_REVOKE free them (with lock-delay),
 * they count against locks_max and quota_locks, their waits against
 * waits_max, waiters_max (the semaphore's FIFO) and quota_locks.  One name
 * space: while the semaphore exists, LOCK, ACQUIRE, UNLOCK, LOCK_MULTI and
 * ELECT_* naming its name or name#i (i < N) answer WRONGTYPE, and a first
 * SEM_ACQUIRE answers WRONGTYPE while a lock (also one kept for a queued
 * multi-lock), an election or a semaphore holds one of those names.
 *
 * Shared holds (FENCE_CMD_F_SHARED on LOCK/ACQUIRE, core/shared.c): a
 * lock is held by one exclusive holder or by the shared holders of one
 * phase.  A shared request on a free lock begins a phase with the next
 * token; one on a shared-held lock joins the phase, with the phase's token,
 * only when no request is queued on the lock (a queued request holds back
 * every later shared one: FIFO, no writer starvation); otherwise it queues
 * (or answers NIL).  Hand-off to a shared waiter begins a new phase and
 * admits the shared waiters behind it up to the first exclusive one; when
 * a waiter leaves the queue of a shared-held lock, the shared waiters now
 * at its head join the phase.  Each shared hold counts as a lock for the
 * owner's quota; the lock is one object for locks_max.  A lease that
 * holds or waits for a lock in one mode and asks in the other gets
 * INVALID with value FENCE_INVALID_MODE.  UNLOCK_SHARED (name, token,
 * lease) ends that lease's hold (shared, or exclusive of that lease);
 * plain UNLOCK with a shared phase's token answers INVALID with value
 * FENCE_INVALID_SHARED (the holders share the token: name the lease).  A
 * lease that ends releases its shared holds after its exclusive ones, in
 * token order; the last holder of a phase leaving frees the lock (with
 * the lease's lock-delay if it expired).
 *
 * Events: every call that runs commands or time (fence_fsm_apply_entry,
 * fence_fsm_apply, fence_fsm_advance) first forgets the events of the
 * previous call, then collects the events of its own in an array inside the
 * state machine, in the order they happened; the caller reads them with
 * fence_fsm_events afterwards.  Nothing calls back into the caller while
 * the state changes.
 */
#ifndef FENCE_FSM_H
#define FENCE_FSM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/limits.h"

/* Largest timestamp (fsm time, ms) an entry may carry; keeps every
 * "now + duration" sum far from overflow.  The entry decoder rejects larger
 * ones and apply asserts it. */
#define FENCE_TIME_MS_MAX (1ULL << 62)

/* Injected allocator (the core never calls malloc itself). */
typedef struct fence_alloc {
    void *(*alloc)(void *ctx, size_t size); /* NULL on failure */
    void (*free)(void *ctx, void *ptr);
    void *ctx;
} fence_alloc;

/* Limits the state machine enforces.  They travel in the log (LEADER_START
 * carries the leader's configured limits) so every replica enforces the same
 * ones; before the first LEADER_START the defaults from limits.h apply. */
typedef struct fence_limits {
    uint32_t leases_max;  /* live leases */
    uint32_t locks_max;   /* locks held or with waiters */
    uint32_t waiters_max; /* waiters queued on one lock */
    uint32_t dedup_max;   /* client request ids remembered */
    uint32_t waits_max;   /* waits queued, across all locks */
} fence_limits;

void fence_limits_default(fence_limits *l);

typedef enum fence_cmd_type {
    FENCE_CMD_LEADER_START = 1, /* limits; rebases deadlines */
    FENCE_CMD_TICK = 2,         /* nothing: the entry's timestamp advances time */
    FENCE_CMD_LEASE_GRANT = 3,  /* ttl_ms, lock_delay_ms */
    FENCE_CMD_LEASE_KEEPALIVE = 4, /* lease */
    FENCE_CMD_LEASE_REVOKE = 5, /* lease */
    FENCE_CMD_LOCK = 6,         /* name, lease, wait_ms (0: try once) */
    FENCE_CMD_UNLOCK = 7,       /* name, token */
    FENCE_CMD_ACQUIRE = 8,      /* name, ttl_ms, lock_delay_ms, wait_ms */
    FENCE_CMD_CANCEL = 9,       /* wait_id: the waiting client went away */
    /* Coordination kinds beyond the mutex (docs/recipes.md).  Each lives
     * in a name space shared with locks: a name is a lock, an election or
     * a semaphore, and using it as another kind answers WRONGTYPE.  They
     * appear only in version-5 entries (core/entry.h). */
    FENCE_CMD_ELECT_CAMPAIGN = 10, /* name, lease, wait_ms, value */
    FENCE_CMD_ELECT_PROCLAIM = 11, /* name, token, value */
    FENCE_CMD_ELECT_RESIGN = 12,   /* name, token */
    FENCE_CMD_SEM_ACQUIRE = 13,    /* name, permits, lease, wait_ms (lease 0:
                                      a dedicated lease of ttl_ms,
                                      lock_delay_ms, as ACQUIRE) */
    FENCE_CMD_SEM_RELEASE = 14,    /* name, slot, token */
    FENCE_CMD_LOCK_MULTI = 15,     /* names[names_count], lease, wait_ms
                                      (lease 0: dedicated, as ACQUIRE) */
    FENCE_CMD_UNLOCK_SHARED = 16,  /* name, token, lease: one shared holder */
    /* Renewals the leader answered itself (docs/leases.md): ids_count lease
     * ids; each live one restarts its full TTL at the entry's time, as
     * LEASE_KEEPALIVE would; an unknown or expired id changes nothing (a
     * checkpoint never revives a lease).  Version-5 entries only. */
    FENCE_CMD_LEASE_CHECKPOINT = 17, /* ids[ids_count] */
} fence_cmd_type;
#define FENCE_CMD_TYPE_LAST FENCE_CMD_LEASE_CHECKPOINT

/* Most lease ids one LEASE_CHECKPOINT carries (the leader splits larger
 * sets over several commands). */
#define FENCE_CHECKPOINT_IDS_MAX 16384

/* Flags on a command. */
#define FENCE_CMD_F_REQID 0x1 /* req_id is a client request id: deduplicate */
#define FENCE_CMD_F_ADMIN 0x2 /* the requesting user is an administrator: it
                                 may act on other owners' leases and locks */
#define FENCE_CMD_F_QUOTA 0x4 /* quota_leases / quota_locks hold the requesting
                                 user's own limits (see "Quotas" above) */
#define FENCE_CMD_F_SHARED 0x8 /* LOCK, ACQUIRE: a shared (read) hold; only in
                                  version-5 entries */
#define FENCE_CMD_F_ALL (FENCE_CMD_F_REQID | FENCE_CMD_F_ADMIN | FENCE_CMD_F_QUOTA | \
                         FENCE_CMD_F_SHARED)

/* One name of a LOCK_MULTI (borrowed, like fence_cmd.name). */
typedef struct fence_name {
    const uint8_t *name;
    uint16_t len; /* 1..FENCE_NAME_MAX */
} fence_name;

/* One command.  Fields a type does not use are zero.  name is borrowed: it
 * must stay valid for the duration of the call it is passed to. */
typedef struct fence_cmd {
    uint8_t type;           /* fence_cmd_type */
    uint8_t flags;          /* FENCE_CMD_F_* */
    uint64_t req_id;        /* client request id when FENCE_CMD_F_REQID */
    uint64_t lease;         /* LEASE_*, LOCK */
    uint64_t token;         /* UNLOCK */
    uint64_t wait_id;       /* CANCEL */
    uint64_t ttl_ms;        /* LEASE_GRANT, ACQUIRE */
    uint64_t wait_ms;       /* LOCK, ACQUIRE: 0 = try once */
    uint64_t lock_delay_ms; /* LEASE_GRANT, ACQUIRE */
    const uint8_t *name;    /* LOCK, UNLOCK, ACQUIRE */
    uint16_t name_len;      /* 1..FENCE_NAME_MAX */
    fence_limits limits;    /* LEADER_START */
    uint64_t owner;         /* the requesting user (a 64-bit id of its name;
                               0: "default", and every command of a log
                               written before owners existed) */
    uint32_t quota_leases;  /* with FENCE_CMD_F_QUOTA: most live leases the
                               owner may have (0: no own limit) */
    uint32_t quota_locks;   /* with FENCE_CMD_F_QUOTA: most locks the owner's
                               leases may hold or wait for (0: no own
                               limit); both 0 without the flag */
    const uint8_t *value;   /* ELECT_CAMPAIGN, ELECT_PROCLAIM: the leader's
                               value (borrowed), 0..FENCE_ELECT_VALUE_MAX */
    uint32_t value_len;
    uint32_t permits;       /* SEM_ACQUIRE: N, 1..FENCE_SEM_PERMITS_MAX */
    uint32_t slot;          /* SEM_RELEASE: 0..N-1 */
    const fence_name *names; /* LOCK_MULTI: 1..FENCE_MULTI_NAMES_MAX distinct
                                names (borrowed) */
    uint16_t names_count;
    const uint8_t *ids;     /* LEASE_CHECKPOINT: ids_count lease ids, each
                               a little-endian u64 (borrowed) */
    uint32_t ids_count;     /* 1..FENCE_CHECKPOINT_IDS_MAX */
} fence_cmd;

/* Outcome of one command (also of a deferred wait, see fence_event). */
typedef enum fence_status {
    FENCE_ST_OK = 0,      /* done; see the result fields */
    FENCE_ST_NIL = 1,     /* LOCK/ACQUIRE: busy and no wait, or wait timed out */
    FENCE_ST_QUEUED = 2,  /* LOCK/ACQUIRE: waiting; outcome comes as an event */
    FENCE_ST_NOLEASE = 3, /* unknown, expired or revoked lease */
    FENCE_ST_LIMIT = 4,   /* a limit is full */
    FENCE_ST_INVALID = 5, /* a field out of range (ttl, name length, ...) */
    FENCE_ST_NOPERM = 6,  /* the lease (or the lock's holder lease) belongs
                             to another owner, and the command is not
                             FENCE_CMD_F_ADMIN */
    FENCE_ST_WRONGTYPE = 7, /* the name is in use as another kind (lock,
                               election, semaphore), or SEM_ACQUIRE names a
                               different N than the semaphore's (value: the
                               semaphore's N) */
} fence_status;
#define FENCE_ST_LAST FENCE_ST_WRONGTYPE

/* fence_result.value with FENCE_ST_INVALID, saying why (0: a field out of
 * range, or a REQID reused for another request). */
#define FENCE_INVALID_MODE 1   /* LOCK: the lease holds or waits for the lock
                                  in the other mode (no upgrade/downgrade) */
#define FENCE_INVALID_SHARED 2 /* UNLOCK of a shared phase's token: its
                                  holders share it, UNLOCK_SHARED names one */

typedef struct fence_result {
    uint8_t status;   /* fence_status */
    uint64_t lease;   /* LEASE_GRANT, ACQUIRE: the lease id */
    uint64_t token;   /* LOCK, ACQUIRE: the token granted */
    uint64_t wait_id; /* QUEUED: id of the wait, for the event and CANCEL */
    uint64_t value;   /* KEEPALIVE: ttl_ms; UNLOCK: 1 or 0;
                         LEASE_CHECKPOINT: the live leases it renewed */
    uint64_t revision; /* ELECT_*: the election's revision after it */
    uint32_t slot;    /* SEM_ACQUIRE: the slot granted */
} fence_result;

/* A deferred outcome: a queued LOCK/ACQUIRE was granted (OK, with token and
 * lease) or failed (NIL on wait timeout, NOLEASE when its lease expired or
 * was revoked, or the wait was cancelled).  For a failed ACQUIRE, its
 * dedicated lease has been revoked. */
typedef struct fence_event {
    uint64_t wait_id;
    fence_result result;
} fence_event;

typedef struct fence_fsm fence_fsm;

typedef struct fence_fsm_opts {
    fence_alloc alloc;
    /* Keys the internal hash tables so that clients cannot choose lock
     * names or request ids that all land in one bucket.  Any value; it
     * need not match across replicas (it changes no result, event or
     * snapshot byte).  The server should pass a random value; 0 is fine in
     * tests. */
    uint64_t hash_seed;
} fence_fsm_opts;

/* Create an empty state machine.  Returns 0, or FENCE_ST_LIMIT if memory
 * could not be had.
 *
 * Memory: creating a state machine, and restoring a snapshot into one that
 * has never applied anything, report a failed allocation (FENCE_ST_LIMIT).
 * Once it has applied an entry (apply_entry, apply, advance) or restored a
 * snapshot, a failed allocation stops the process (fence__fatal, "out of
 * memory while applying a log entry ..."): apply's outcome is a function of
 * (state, entry) alone, so that every replica answers every entry alike;
 * every limit (FENCE_ST_LIMIT) depends on counts only. */
int fence_fsm_create(const fence_fsm_opts *opts, fence_fsm **out);
void fence_fsm_destroy(fence_fsm *f); /* NULL is a no-op */

/* Apply one command at time now_ms (see "Time" above).  Always fills *out.
 * Events for other waits (grants handed over by this command, deadlines it
 * passed) are collected: read them with fence_fsm_events. */
void fence_fsm_apply(fence_fsm *f, uint64_t now_ms, const fence_cmd *cmd,
                     fence_result *out);

/* Advance time to now_ms and process everything due (as at the start of
 * every entry).  fence_fsm_apply calls it itself.  The events are collected
 * as for fence_fsm_apply. */
void fence_fsm_advance(fence_fsm *f, uint64_t now_ms);

/* The events of the last fence_fsm_apply_entry, fence_fsm_apply or
 * fence_fsm_advance call, in order; *n receives their count (0: the array
 * may be NULL).  The array is borrowed from the state machine: it is valid
 * only until the next call that changes the state (apply_entry, apply,
 * advance, restore) or fence_fsm_destroy; copy what must outlive that. */
const fence_event *fence_fsm_events(const fence_fsm *f, size_t *n);

/* The earliest pending deadline (fsm time), or UINT64_MAX if none.  The
 * leader arms one timer for it and proposes a TICK when it passes.  Not
 * const: it may re-key deadline-heap items a renewal left early (that
 * changes no result, event or snapshot byte; src/core/heap.h). */
uint64_t fence_fsm_next_deadline(fence_fsm *f);
/* The same if it is at most now_ms; otherwise a lower bound of it that is
 * later than now_ms (a renewal may have left a lease's heap key early:
 * re-keying it is left until that key comes due, so a timer armed for the
 * bound may fire early and find nothing due: ask again then).  UINT64_MAX
 * if nothing is pending.  The leader's timer uses this one. */
uint64_t fence_fsm_next_deadline_by(fence_fsm *f, uint64_t now_ms);

/* Read-only queries, answered from applied state. */
uint64_t fence_fsm_now(const fence_fsm *f);
uint64_t fence_fsm_last_token(const fence_fsm *f); /* 0 before any grant */

/* true when a queued wait with this id exists (its outcome is still to
 * come as an event).  The server uses it after a snapshot restore: a wait
 * that ended inside the entries the snapshot replaced never produces an
 * event there. */
bool fence_fsm_wait_exists(const fence_fsm *f, uint64_t wait_id);

/* A live lease as the state machine sees it (not include/fence.h's
 * fence_lease_info, which is the client's view). */
typedef struct fence_fsm_lease_state {
    uint64_t ttl_ms;        /* granted TTL */
    uint64_t deadline_ms;   /* expiry, fsm time */
    uint32_t locks_held;    /* locks it holds */
    uint64_t lock_delay_ms; /* lock-delay applied when it expires */
    uint64_t owner;         /* owner that granted it */
} fence_fsm_lease_state;
/* 0, or FENCE_ST_NOLEASE when the lease is unknown or expired at now_ms. */
int fence_fsm_lease_info(const fence_fsm *f, uint64_t lease, uint64_t now_ms,
                         fence_fsm_lease_state *out);

/* A held lock as the state machine sees it (not include/fence.h's
 * fence_lock_info). */
typedef struct fence_fsm_lock_state {
    uint64_t token;         /* token of the holder's grant (shared: the
                               phase's token, every holder's) */
    uint64_t lease;         /* the holder lease (shared: the first holder) */
    uint64_t deadline_ms;   /* holder lease deadline, fsm time (shared: the
                               latest of the holders') */
    uint32_t waiters;       /* waits queued on it */
    uint64_t owner;         /* owner of the holder lease (shared: the first's) */
    bool shared;            /* held by the shared holders of one phase */
    uint32_t holders;       /* 1, or the shared holders */
} fence_fsm_lock_state;
/* true and *out filled when the lock is held; false when free. */
bool fence_fsm_lock_info(const fence_fsm *f, const uint8_t *name,
                         uint16_t name_len, fence_fsm_lock_state *out);

/* One holder of a lock. */
typedef struct fence_fsm_holder {
    uint64_t lease;
    uint64_t deadline_ms;   /* its lease's deadline, fsm time */
    uint64_t owner;
} fence_fsm_holder;
/* The holders of a held lock (the exclusive one, or the shared ones in
 * admission order): writes up to cap of them to out and returns how many
 * there are (0: free, in lock-delay or unknown). */
size_t fence_fsm_lock_holders(const fence_fsm *f, const uint8_t *name, uint16_t name_len,
                              fence_fsm_holder *out, size_t cap);

/* One lock as LOCK.LIST shows it.  name is borrowed from the state
 * machine: valid until the next call that changes the state. */
typedef struct fence_fsm_lock_entry {
    const uint8_t *name;    /* the name bytes (not NUL-terminated) */
    uint16_t name_len;      /* 1..FENCE_NAME_MAX */
    uint64_t token;         /* token of the last grant (the iteration key) */
    uint64_t lease;         /* the holder lease, 0 when free (lock-delay);
                               shared: the first holder */
    uint64_t deadline_ms;   /* holder lease deadline, or lock-delay end;
                               shared: the latest holder deadline */
    uint32_t waiters;       /* waits queued on it */
    uint32_t holders;       /* 0 (lock-delay), 1, or the shared holders */
    bool shared;            /* held shared */
} fence_fsm_lock_entry;

/* Read-only iteration over the locks in token order (deterministic): visit
 * at most max_visit locks whose token is > after, writing up to cap of them
 * to out.  When match is not NULL only the locks it accepts are written.
 * Returns the number written; *next receives the token to pass as after
 * for the following call, or 0 when the iteration is complete.  A lock
 * granted again between calls moves to the end (new token): it may be
 * listed twice, never skipped. */
size_t fence_fsm_locks_list(const fence_fsm *f, uint64_t after, size_t max_visit,
                            bool (*match)(void *ctx, const uint8_t *name, uint16_t len),
                            void *ctx, fence_fsm_lock_entry *out, size_t cap,
                            uint64_t *next);

/* A semaphore as SEM.INFO shows it. */
typedef struct fence_fsm_sem_state {
    uint32_t permits;    /* N */
    uint32_t slots_used; /* slots held or in lock-delay */
    uint32_t waiters;    /* waits queued on the semaphore */
} fence_fsm_sem_state;
/* One slot that is held or in lock-delay. */
typedef struct fence_fsm_sem_slot {
    uint32_t slot;        /* 0..N-1: the resource fences it as name#slot */
    uint64_t token;       /* token of the slot's last grant */
    uint64_t lease;       /* the holder lease, 0 in lock-delay */
    uint64_t deadline_ms; /* holder lease deadline, or lock-delay end */
    uint64_t owner;       /* owner of the holder lease (0 in lock-delay) */
} fence_fsm_sem_slot;
/* true when the semaphore exists: *out filled, and its used slots, in slot
 * order, written to slots (at most cap; *n receives how many). */
bool fence_fsm_sem_info(const fence_fsm *f, const uint8_t *name, uint16_t len,
                        fence_fsm_sem_state *out, fence_fsm_sem_slot *slots, size_t cap,
                        size_t *n);

/* One lease as LEASE.LIST shows it. */
typedef struct fence_fsm_lease_entry {
    uint64_t id;            /* lease id (the iteration key) */
    uint64_t ttl_ms;        /* granted TTL */
    uint64_t deadline_ms;   /* fsm time */
    uint32_t locks_held;    /* locks it holds */
    uint32_t waits;         /* waits it has queued */
    uint64_t owner;         /* owner that granted it (LEASE.LIST shows a
                               user its own leases only) */
} fence_fsm_lease_entry;

/* Read-only iteration over the leases in id order: up to cap leases with
 * id > after; *next is the id to continue after, or 0 when complete. */
size_t fence_fsm_leases_list(const fence_fsm *f, uint64_t after, fence_fsm_lease_entry *out,
                             size_t cap, uint64_t *next);

/* NULL in a normal build.  A build with a planted bug (tests/mutants/)
 * returns a line saying so, which fenced prints at start-up and in INFO so
 * that such a binary cannot be mistaken for a real one. */
const char *fence_fsm_build_note(void);

typedef struct fence_fsm_stats {
    uint64_t leases;
    uint64_t locks;    /* held */
    uint64_t waiters;  /* total queued */
    uint64_t last_token;
    uint64_t now_ms;
    /* Events counted since this state machine was created (metrics).  Not
     * state: a snapshot neither carries nor resets them, so two replicas
     * agree only on what both applied since their start. */
    uint64_t grants;                 /* tokens issued */
    uint64_t handoffs;               /* grants to a queued waiter */
    uint64_t expirations;            /* leases that ran out */
    uint64_t expirations_with_locks; /* ... while holding a lock */
    uint64_t revocations;            /* live leases revoked (LEASE_REVOKE) */
} fence_fsm_stats;
void fence_fsm_stats_get(const fence_fsm *f, fence_fsm_stats *out);

/* Check every invariant; returns NULL if all hold, else a static message.
 * Tests call it after every step; apply asserts the cheap ones itself.
 *
 * The codecs are in core/entry.h (log entries) and core/snapshot.h. */
const char *fence_fsm_check(const fence_fsm *f);

#endif /* FENCE_FSM_H */
