/* libfence: the C client of the fenced lock service.
 *
 * A lock from fenced comes with a fencing token: a 64-bit number that is
 * strictly greater for every grant.  Pass the token with every request to the
 * resource you protect, and have the resource reject any token lower than
 * the highest it has seen (fence-store, the PostgreSQL and Redis adapters
 * and libfence-guard all do).  That check at the resource is the ONLY thing
 * that makes the lock safe.
 *
 *   fence_client *c;
 *   fence_client_opts o;
 *   fence_client_opts_init(&o);
 *   o.servers = "127.0.0.1:7700";
 *   if (fence_client_open(&o, &c) != 0) ...
 *   fence_lock *l;
 *   int rc = fence_lock_acquire(c, "orders", 10000, 5000, &l);
 *   if (rc == 0) {
 *       write_to_resource(fence_lock_token(l), ...);   // resource checks it
 *       fence_lock_release(l);
 *   }
 *   fence_client_close(c);
 *
 * !!! VALID-UNTIL IS A LIVENESS OPTIMISATION, NEVER SAFETY !!!
 * fence_lock_valid_until() and fence_lock_valid() tell you when this process
 * can no longer be sure it holds the lock, so it can stop early instead of
 * doing work that the resource will reject.  They can NOT guarantee that the
 * lock is still held when your write reaches the resource: the process can
 * be paused (GC, swap, SIGSTOP, a VM migration) between the check and the
 * write, for any length of time.  Only the resource rejecting stale tokens
 * is safety.  Never skip the token check at the resource because the client
 * checked valid-until.
 *
 * Threads: a fence_client may be used from any number of threads at once.
 * It keeps a small pool of connections and checks one out for each call, so
 * a call blocked in a long WAIT does not hold up calls from other threads.
 * The keepalive thread has its own connection.  A fence_lock handle may be
 * read (token, lease, valid) from any thread; release it from one thread,
 * once.  A fence_store handle serialises its calls with a mutex.
 *
 * Errors: every function that can fail returns 0 or a negative FENCE_E*
 * code (-1, -2, ...); fence_strerror() describes the code and
 * fence_client_errmsg() gives the detail of the calling thread's last failure.
 */
#ifndef FENCE_H
#define FENCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define FENCE_API __attribute__((visibility("default")))
#else
#define FENCE_API
#endif

/* Version of this header and library. */
#define FENCE_VERSION_MAJOR 0
#define FENCE_VERSION_MINOR 1

/* Bytes of the per-thread error message buffer (including the NUL). */
#define FENCE_ERRMSG_BUF_SIZE 256

/* ---- Error codes ------------------------------------------------------------
 * One X-macro gives the enum (FENCE_E<NAME>, negative) and the strings. */
#define FENCE_ERRNO_MAP(X)                                                   \
    X(INVAL, "invalid argument")                                             \
    X(NOMEM, "out of memory")                                                \
    X(UNREACHABLE, "no server could be reached")                             \
    X(TIMEOUT, "timed out; the outcome of the last request is unknown")      \
    X(IO, "connection lost; the outcome of the last request is unknown")     \
    X(PROTO, "unexpected reply from the server")                             \
    X(BUSY, "the lock is held by someone else")                              \
    X(NOLEASE, "the lease does not exist or has expired")                    \
    X(LEASELOST, "the lease was lost")                                       \
    X(LIMIT, "a configured server limit is full")                            \
    X(TRYAGAIN, "the server was not ready until the deadline")               \
    X(NOTLEADER, "no leader could be found")                                 \
    X(SERVER, "the server refused the request")                              \
    X(STALE, "fencing token is older than one the resource has seen")        \
    X(TOOBIG, "value exceeds a limit")                                       \
    X(BADTOKEN, "the resource refused the token: unsigned, forged or for another fence") \
    X(AUTH, "the server refused the login (AUTH) or requires one")          \
    X(NOPERM, "the server's user permissions forbid this")

/* Positions in the map (1, 2, ...); the codes are their negatives. */
enum fence_errno_index_ {
    FENCE_ERRNO_INDEX_OK_ = 0,
#define FENCE_ERRNO_INDEX_(name, msg) FENCE_ERRNO_INDEX_##name##_,
    FENCE_ERRNO_MAP(FENCE_ERRNO_INDEX_)
#undef FENCE_ERRNO_INDEX_
    FENCE_ERRNO_COUNT_ /* one more than the number of error codes */
};

typedef enum fence_errno {
    FENCE_OK = 0,
#define FENCE_ERRNO_ENUM_(name, msg) FENCE_E##name = -FENCE_ERRNO_INDEX_##name##_,
    FENCE_ERRNO_MAP(FENCE_ERRNO_ENUM_)
#undef FENCE_ERRNO_ENUM_
} fence_errno;

/* A static string describing rc (0 or a FENCE_E* code).  Never NULL: an
 * unknown code gives "unknown error". */
FENCE_API const char *fence_strerror(int rc);

/* The short name of rc, e.g. "FENCE_EBUSY" ("FENCE_OK" for 0). */
FENCE_API const char *fence_err_name(int rc);

/* ---- Client -------------------------------------------------------------- */

typedef struct fence_client fence_client;

/* A held lock (see fence_lock_acquire()). */
typedef struct fence_lock fence_lock;

/* Called at most once per lock, from the keepalive thread, when the lease of
 * a held lock is lost: a keepalive was answered NOLEASE, or valid-until
 * passed without a successful renewal.  It must return quickly and must not
 * call fence_lock_release() (it may set a flag, write to a pipe, signal a
 * process).  rc is FENCE_ENOLEASE or FENCE_ELEASELOST. */
typedef void (*fence_lost_cb)(fence_lock *l, int rc, void *arg);

typedef struct fence_client_opts {
    /* Servers, "host:port[,host:port...]" (IPv4 or a name; a Unix socket as
     * "unix:/path").  NULL: $FENCE_SERVER, else "127.0.0.1:7700".  Copied. */
    const char *servers;
    /* Per-request timeout: how long one call may wait for a reply beyond
     * any WAIT it asked for, including retries.  0: 5000.  A call whose
     * connection is lost and whose every server then refuses connections
     * fails about 2 s later (FENCE_EIO, or FENCE_EUNREACHABLE if it never
     * connected: at once), even in a long WAIT. */
    uint32_t timeout_ms;
    /* Timeout of one TCP connect attempt.  0: 1000. */
    uint32_t connect_timeout_ms;
    /* First pause between reconnect/retry attempts (doubling each time,
     * with jitter).  0: 20. */
    uint32_t backoff_ms_min;
    /* Largest pause between attempts.  0: 1000. */
    uint32_t backoff_ms_max;
    /* Safety margin subtracted from valid-until.  0: ttl/10 + 5 ms.  It
     * covers clock rate differences; it is not safety either. */
    uint32_t margin_ms;
    /* Most connections the pool keeps open at once (concurrent calls beyond
     * this wait for a free one).  0: 64. */
    uint32_t pool_max;
    /* TLS to the servers (fenced --tls-port).  Unix-socket addresses stay
     * plaintext.  The certificate is always verified. */
    bool tls;
    /* PEM file of the CA(s) the servers' certificates must chain to.
     * NULL: the system's trusted CAs.  Copied. */
    const char *tls_ca_file;
    /* Client certificate and key (PEM), for servers that verify clients
     * (mTLS, --tls-ca); both or neither.  NULL: none.  Copied. */
    const char *tls_cert_file;
    const char *tls_key_file;
    /* The name the server certificate must carry (and the SNI).  NULL: the
     * host part of each address (an IP literal is checked as an IP SAN);
     * "": check the chain only, not the name.  Copied. */
    const char *tls_server_name;
    /* Login sent as AUTH on every new connection: "AUTH user password", or
     * "AUTH password" when user is NULL.  password NULL: no AUTH.  Copied
     * (and wiped from memory on fence_client_close); never put in
     * fence_client_errmsg(). */
    const char *user;
    const char *password;
} fence_client_opts;

/* Fill opts with defaults (all zero: see the fields). */
FENCE_API void fence_client_opts_init(fence_client_opts *opts);

/* Create a client.  No connection is made yet: the first call connects, so
 * opening succeeds while the servers are down.  On success *out is the
 * handle; close it with fence_client_close().
 * Errors: FENCE_EINVAL (opts NULL, a malformed or too long server list,
 * unreadable TLS files, a certificate without its key), FENCE_ENOMEM.
 * Calls may then also fail with FENCE_EAUTH (login refused, or the server
 * wants one: NOAUTH) and FENCE_ENOPERM (the user may not do that). */
FENCE_API int fence_client_open(const fence_client_opts *opts,
                                fence_client **out);

/* Close the client: stop the keepalive thread, close every connection and
 * free the handle.  Locks still held are NOT released (their leases expire
 * on the server); their handles are freed, so release them first.  No other
 * thread may be using c or its locks any more.  NULL is a no-op. */
FENCE_API void fence_client_close(fence_client *c);

/* The detail of the last failure of a libfence call made by this thread
 * (a thread-local buffer of FENCE_ERRMSG_BUF_SIZE bytes; empty if none).
 * Valid until this thread's next libfence call.  c may be NULL (for a
 * failed fence_client_open()). */
FENCE_API const char *fence_client_errmsg(const fence_client *c);

/* Copy the address the client currently believes is the leader
 * ("host:port") into buf (cap bytes, truncated, always NUL-terminated). */
FENCE_API void fence_client_server(fence_client *c, char *buf, size_t cap);

/* Send PING (connecting if needed).  0, or FENCE_EUNREACHABLE,
 * FENCE_ETIMEOUT, FENCE_EIO, FENCE_ETRYAGAIN, FENCE_ENOTLEADER,
 * FENCE_ESERVER. */
FENCE_API int fence_client_ping(fence_client *c);

/* ---- Locks with keepalive -------------------------------------------------
 * Each logical call carries a random 64-bit request id (REQID), reused on
 * every retry (after TRYAGAIN, a timeout, a lost connection or a NOTLEADER
 * redirect), so the server applies it once. */

/* Acquire lock `name` (1..256 bytes, NUL-terminated) with a lease of ttl_ms
 * (10 .. 7 days), waiting up to wait_ms (0: try once) in the server's FIFO
 * queue.  On success *out is a lock handle; the lease is renewed in the
 * background every ttl/3 until fence_lock_release().
 * Errors: FENCE_EBUSY (not acquired within wait_ms), FENCE_EINVAL,
 * FENCE_ENOMEM, FENCE_EUNREACHABLE, FENCE_ETIMEOUT / FENCE_EIO (outcome
 * unknown after retrying until the deadline: if it was granted, the lease
 * expires after ttl_ms), FENCE_ELIMIT, FENCE_ENOLEASE (the lease expired
 * while waiting), FENCE_ELEASELOST (waits longer than ttl/2 only: the lease
 * could not be renewed while waiting, so a grant is not trusted and is
 * undone), FENCE_ETRYAGAIN, FENCE_ENOTLEADER, FENCE_ESERVER. */
FENCE_API int fence_lock_acquire(fence_client *c, const char *name,
                                 uint32_t ttl_ms, uint32_t wait_ms,
                                 fence_lock **out);

/* Flags of fence_lock_acquire_ex(). */
/* Ask for a signed token (LOCK/ACQUIRE ... SIGNED): the grant carries, beside
 * its number, a string "<token>.<key id>.<signature>" that a resource with
 * fenced's verify keys can check on its own (docs/security.md).  The server
 * must have a signing key (fenced --token-signing-key); otherwise the call
 * fails with the server's error (FENCE_ESERVER) and nothing is granted. */
#define FENCE_LOCK_SIGNED 0x1u
/* A shared (read) lock (LOCK/ACQUIRE ... SHARED): shared holders coexist,
 * an exclusive one waits for them all; the holders admitted together (one
 * phase) carry one token (docs/recipes.md).  fence_lock_release() releases
 * it with UNLOCK name token LEASE lease. */
#define FENCE_LOCK_SHARED 0x2u

/* Bytes that hold any signed token string and its NUL. */
#define FENCE_SIGNED_TOKEN_BUF_SIZE 192

/* fence_lock_acquire() with flags (0, FENCE_LOCK_SIGNED, FENCE_LOCK_SHARED or
 * both); the same
 * errors, plus FENCE_EINVAL for an unknown flag and FENCE_EPROTO if a signed
 * reply does not have the signed token's shape. */
FENCE_API int fence_lock_acquire_ex(fence_client *c, const char *name,
                                    uint32_t ttl_ms, uint32_t wait_ms,
                                    unsigned flags, fence_lock **out);

/* fence_lock_acquire() with wait_ms = 0. */
FENCE_API int fence_lock_try(fence_client *c, const char *name,
                             uint32_t ttl_ms, fence_lock **out);

/* Set the lease-lost callback of l (NULL to remove).  If the lease is
 * already lost when this is called, cb is called before this returns. */
FENCE_API void fence_lock_on_lost(fence_lock *l, fence_lost_cb cb, void *arg);

/* Release the lock (UNLOCK by token; the lease is revoked too), stop its
 * keepalive and free the handle.  The handle is freed whatever the outcome.
 * 0 when released or already gone (a lost lease: then nothing is sent, so
 * it returns at once even with the server unreachable); on
 * FENCE_EUNREACHABLE / FENCE_ETIMEOUT / FENCE_EIO the lock is left to
 * expire with its lease.
 * Must not be called from a lease-lost callback (FENCE_EINVAL, nothing
 * freed).  NULL is a no-op returning 0. */
FENCE_API int fence_lock_release(fence_lock *l);

/* The fencing token of the grant (> 0).  Pass it to the resource. */
FENCE_API uint64_t fence_lock_token(const fence_lock *l);
/* The signed token string of the grant (acquired with FENCE_LOCK_SIGNED),
 * or NULL.  Valid as long as the handle.  Its leading decimal is
 * fence_lock_token(l).  Pass it to resources that verify signed tokens. */
FENCE_API const char *fence_lock_signed_token(const fence_lock *l);
/* The lease id the lock is held under. */
FENCE_API uint64_t fence_lock_lease(const fence_lock *l);
/* The lock's name (valid as long as the handle). */
FENCE_API const char *fence_lock_name(const fence_lock *l);
/* The lease TTL in ms. */
FENCE_API uint32_t fence_lock_ttl_ms(const fence_lock *l);

/* The monotonic time (fence_monotonic_ms()) until which this process may
 * assume it holds the lock: the SEND time of the request that granted or
 * last renewed the lease, plus the TTL (for a renewal: the TTL its reply
 * carries, which a cluster's leader answering without a log entry shortens
 * by its election timeout, docs/leases.md), minus the margin.  The server's
 * deadline started later, so this is conservative.  0 once the lease is
 * known to be lost.
 * LIVENESS ONLY: use it to stop early, never as the guard of a write. */
FENCE_API uint64_t fence_lock_valid_until(const fence_lock *l);

/* True while the lease is not known lost and valid-until has not passed.
 * LIVENESS ONLY (see above): a true answer can be stale by the time you act. */
FENCE_API bool fence_lock_valid(const fence_lock *l);

/* CLOCK_MONOTONIC in milliseconds, the clock of fence_lock_valid_until(). */
FENCE_API uint64_t fence_monotonic_ms(void);

/* ---- Plain protocol calls (for scripts and tools) ------------------------
 * Each maps to one fenced command, with REQID and retries where the
 * command takes one.  Errors as for fence_lock_acquire(). */

/* LEASE.GRANT ttl_ms: *lease_out is the new lease id. */
FENCE_API int fence_lease_grant(fence_client *c, uint32_t ttl_ms,
                                uint64_t *lease_out);
/* LEASE.KEEPALIVE: *ttl_ms_out (may be NULL) is the renewed TTL.
 * FENCE_ENOLEASE if the lease is gone. */
FENCE_API int fence_lease_keepalive(fence_client *c, uint64_t lease,
                                    uint64_t *ttl_ms_out);
/* LEASE.REVOKE (idempotent: an unknown lease is fine). */
FENCE_API int fence_lease_revoke(fence_client *c, uint64_t lease);

typedef struct fence_lease_info {
    uint64_t ttl_ms;       /* the lease's TTL */
    uint64_t remaining_ms; /* time left on the server's clock */
    uint64_t locks_held;   /* locks held under it */
} fence_lease_info;
/* LEASE.INFO.  FENCE_ENOLEASE if the lease is gone. */
FENCE_API int fence_lease_info_get(fence_client *c, uint64_t lease,
                                   fence_lease_info *out);

/* LOCK name lease [WAIT wait_ms]: *token_out is the token.  FENCE_EBUSY if
 * not granted within wait_ms, FENCE_ENOLEASE if the lease is gone. */
FENCE_API int fence_lease_lock(fence_client *c, uint64_t lease,
                               const char *name, uint32_t wait_ms,
                               uint64_t *token_out);
/* LOCK name lease [WAIT wait_ms] SIGNED: as fence_lease_lock(), and the
 * signed token string goes into signed_out (signed_cap bytes, at least
 * FENCE_SIGNED_TOKEN_BUF_SIZE). */
FENCE_API int fence_lease_lock_signed(fence_client *c, uint64_t lease,
                                      const char *name, uint32_t wait_ms,
                                      uint64_t *token_out, char *signed_out,
                                      size_t signed_cap);
/* UNLOCK name token: *released_out (may be NULL) is true if that token held
 * the lock and it is now released. */
FENCE_API int fence_token_unlock(fence_client *c, const char *name,
                                 uint64_t token, bool *released_out);
/* ACQUIRE name ttl [WAIT wait_ms]: a dedicated lease and the lock in one
 * round trip, no keepalive.  FENCE_EBUSY if not granted within wait_ms. */
FENCE_API int fence_lock_acquire_raw(fence_client *c, const char *name,
                                     uint32_t ttl_ms, uint32_t wait_ms,
                                     uint64_t *token_out, uint64_t *lease_out);

/* ACQUIRE name ttl [WAIT wait_ms] SIGNED: as fence_lock_acquire_raw(), and
 * the signed token string goes into signed_out (signed_cap bytes, at least
 * FENCE_SIGNED_TOKEN_BUF_SIZE). */
FENCE_API int fence_lock_acquire_raw_signed(fence_client *c, const char *name,
                                            uint32_t ttl_ms, uint32_t wait_ms,
                                            uint64_t *token_out,
                                            uint64_t *lease_out,
                                            char *signed_out,
                                            size_t signed_cap);

typedef struct fence_lock_info {
    bool held;             /* false: free (the other fields are 0) */
    uint64_t token;        /* token of the holder */
    uint64_t lease;        /* holder's lease */
    uint64_t remaining_ms; /* time left on the holder's lease */
    uint64_t waiters;      /* clients queued */
} fence_lock_info;
/* LOCK.INFO name. */
FENCE_API int fence_lock_info_get(fence_client *c, const char *name,
                                  fence_lock_info *out);

/* ---- Leader election (docs/recipes.md, docs/protocol.md ELECTION.*) ------
 * An election is a name whose leader holds a fencing token (from the same
 * counter as locks), a value, and a revision that grows with every change
 * of leader or value.  Errors as for fence_lock_acquire(); FENCE_ESERVER
 * with "WRONGTYPE" in the message when the name is a lock. */

#define FENCE_ELECTION_VALUE_MAX 4096 /* bytes of an election's value */
#define FENCE_ELECTION_NOW UINT64_MAX /* fence_election_observe: no AFTER */

typedef struct fence_election_state {
    bool has_leader;       /* false: nobody leads (token and lease are 0) */
    bool changed;          /* observe: false when nothing newer came within
                              the wait (the rest is then 0) */
    uint64_t token;        /* the leader's fencing token */
    uint64_t lease;        /* the leader's lease */
    uint64_t revision;     /* the election's revision */
    size_t value_len;      /* bytes in value */
    char value[FENCE_ELECTION_VALUE_MAX + 1]; /* the leader's value, NUL-terminated */
} fence_election_state;

/* ELECTION.CAMPAIGN name lease value [WAIT wait_ms]: *token_out is the
 * leader's token once elected.  FENCE_EBUSY if not elected within wait_ms
 * (0: try once), FENCE_ENOLEASE if the lease is gone, FENCE_ETOOBIG for a
 * value over FENCE_ELECTION_VALUE_MAX. */
FENCE_API int fence_election_campaign(fence_client *c, const char *name, uint64_t lease,
                                      const void *value, size_t value_len,
                                      uint32_t wait_ms, uint64_t *token_out);
/* ELECTION.PROCLAIM name token value: *revision_out (may be NULL) is the new
 * revision.  FENCE_ESTALE when token no longer leads. */
FENCE_API int fence_election_proclaim(fence_client *c, const char *name, uint64_t token,
                                      const void *value, size_t value_len,
                                      uint64_t *revision_out);
/* ELECTION.RESIGN name token: *resigned_out (may be NULL) is false when the
 * token did not lead (any more). */
FENCE_API int fence_election_resign(fence_client *c, const char *name, uint64_t token,
                                    bool *resigned_out);
/* ELECTION.LEADER name (linearizable): out->has_leader false when nobody
 * leads (revision then 0: use observe to learn it). */
FENCE_API int fence_election_leader(fence_client *c, const char *name,
                                    fence_election_state *out);
/* ELECTION.OBSERVE name [AFTER after] [WAIT wait_ms]: the state, at once
 * when after is FENCE_ELECTION_NOW or the revision is above after, else
 * the first change within wait_ms (out->changed false when none came).
 * Any node answers it, followers too. */
FENCE_API int fence_election_observe(fence_client *c, const char *name, uint64_t after,
                                     uint32_t wait_ms, fence_election_state *out);

/* ---- Multi-locks (docs/recipes.md, docs/protocol.md LOCK.MULTI) ----------
 * Every name or none, for a lease the caller keeps alive, with one token
 * that is above every earlier token at each of the names; pass it to each
 * resource.  fence_token_unlock() of any one name with the token releases
 * them all.  Errors as for fence_lease_lock(); FENCE_ESERVER with
 * "WRONGTYPE" when a name is an election's or a semaphore's. */

#define FENCE_MULTI_NAMES 64 /* names of one multi-lock */

/* LOCK.MULTI lease names[0..count) [WAIT wait_ms]: *token_out is the token.
 * FENCE_EBUSY if not all were granted within wait_ms (0: try once; then
 * nothing is held), FENCE_EINVAL for 0 or more than FENCE_MULTI_NAMES names,
 * a duplicate, or a name spelled like an option word (WAIT, REQID,
 * LOCKDELAY, SIGNED, SHARED: take such a lock alone). */
FENCE_API int fence_lease_lock_multi(fence_client *c, uint64_t lease,
                                     const char *const *names, size_t count,
                                     uint32_t wait_ms, uint64_t *token_out);
/* The same with SIGNED: signed_out[i] gets names[i]'s signed token string
 * (the token signed for that name alone: hand each resource the string of
 * the name it guards; docs/security.md).  signed_out holds count buffers. */
FENCE_API int fence_lease_lock_multi_signed(fence_client *c, uint64_t lease,
                                            const char *const *names, size_t count,
                                            uint32_t wait_ms, uint64_t *token_out,
                                            char (*signed_out)[FENCE_SIGNED_TOKEN_BUF_SIZE]);

/* ---- Semaphores of slots (docs/recipes.md, docs/protocol.md SEM.*) -------
 * A semaphore `name` of n slots (1..FENCE_SEM_N_MAX): each slot is its own
 * fence, named "name#slot" (fence_sem_fence_name()), whose tokens come from
 * the one global counter; pass the token to the resource with that fence
 * name.  A lease holds at most one slot of a semaphore.  Errors as for
 * fence_lock_acquire(); FENCE_ESERVER with "WRONGTYPE" in the message when
 * the name (or a slot name) is a lock or an election, or the semaphore
 * exists with another n. */

#define FENCE_SEM_N_MAX 1024 /* slots of a semaphore */
/* Bytes that hold any slot's fence name "name#slot" and its NUL (names are
 * at most 256 bytes, slot names included). */
#define FENCE_SEM_FENCE_BUF_SIZE 257

/* SEM.ACQUIRE name n lease [WAIT wait_ms]: take the lowest free slot with
 * an existing lease (keep it alive yourself, or use fencectl sem).  *slot_out
 * and *token_out are the slot and its token.  The same call again with the
 * same lease answers the slot it holds (safe to retry).  FENCE_EBUSY if every
 * slot stayed taken for wait_ms (0: try once), FENCE_ENOLEASE if the lease
 * is gone, FENCE_EINVAL for n outside 1..FENCE_SEM_N_MAX or a name whose
 * slot names do not fit 256 bytes. */
FENCE_API int fence_sem_acquire(fence_client *c, const char *name, uint32_t n,
                                uint64_t lease, uint32_t wait_ms,
                                uint32_t *slot_out, uint64_t *token_out);
/* fence_sem_acquire() with SIGNED: the signed token string (signed for the
 * fence name "name#slot") goes into signed_out (signed_cap bytes, at least
 * FENCE_SIGNED_TOKEN_BUF_SIZE); FENCE_EPROTO if it does not have the signed
 * token's shape. */
FENCE_API int fence_sem_acquire_signed(fence_client *c, const char *name, uint32_t n,
                                       uint64_t lease, uint32_t wait_ms,
                                       uint32_t *slot_out, uint64_t *token_out,
                                       char *signed_out, size_t signed_cap);
/* SEM.RELEASE name slot token: *released_out (may be NULL) is true when
 * that token held the slot and it is now free (false: already released,
 * taken over after an expiry).  Harmless to retry. */
FENCE_API int fence_sem_release(fence_client *c, const char *name, uint32_t slot,
                                uint64_t token, bool *released_out);

typedef struct fence_sem_slot {
    uint32_t slot;         /* 0..n-1 */
    uint64_t token;        /* its holder's token (or the last one's, in lock-delay) */
    uint64_t lease;        /* its holder's lease; 0 while in lock-delay */
    uint64_t remaining_ms; /* until the lease deadline (or the lock-delay's end) */
} fence_sem_slot;

typedef struct fence_sem_info {
    bool exists;           /* false: no such semaphore (the rest is 0) */
    uint32_t n;            /* its slots */
    uint64_t waiters;      /* requests queued for a slot */
    size_t slots_count;    /* slots held or in lock-delay (all of them, even
                              beyond the caller's cap) */
} fence_sem_info;

/* SEM.INFO name: *out, and the first cap of the busy slots (slot order)
 * into slots (may be NULL when cap is 0). */
FENCE_API int fence_sem_info_get(fence_client *c, const char *name, fence_sem_info *out,
                                 fence_sem_slot *slots, size_t cap);

/* The fence name of a slot, "name#slot", into buf (cap bytes; give
 * FENCE_SEM_FENCE_BUF_SIZE).  0, or FENCE_EINVAL when it is longer than 256
 * bytes or does not fit cap. */
FENCE_API int fence_sem_fence_name(const char *name, uint32_t slot, char *buf, size_t cap);

/* INFO: *text_out is the server's "key:value" lines, NUL-terminated; free it
 * with fence_free(). */
FENCE_API int fence_server_info(fence_client *c, char **text_out);

/* Free memory the library handed out. NULL is a no-op. */
FENCE_API void fence_free(void *p);

/* ---- Fenced resource helper: fence-store --------------------------------
 * A connection to fence-store (the reference fenced resource).  Writes carry
 * the lock's token; the store admits token T for fence F only if T is at
 * least the highest token it has seen for F, atomically with the write. */

typedef struct fence_store fence_store;

/* Connect to fence-store at "host:port" (NULL: $FENCE_STORE, else
 * "127.0.0.1:7710") with a per-call timeout (0: 5000 ms).  The connection
 * is made lazily and re-made after an error.
 * Errors: FENCE_EINVAL, FENCE_ENOMEM. */
FENCE_API int fence_store_open(const char *addr, uint32_t timeout_ms,
                               fence_store **out);
/* Options of fence_store_open_opts(); fill with fence_store_opts_init(). */
typedef struct fence_store_opts {
    /* "host:port" or "unix:/path".  NULL: $FENCE_STORE, else
     * "127.0.0.1:7710".  Copied. */
    const char *addr;
    /* Per-call timeout (connect, TLS handshake and login included).
     * 0: 5000. */
    uint32_t timeout_ms;
    /* TLS to fence-store's --tls-port, as in fence_client_opts: the CA file
     * (NULL: the system's), a client certificate and key for mTLS (both or
     * neither), and the name the certificate must carry (NULL: the host of
     * addr; "": the chain only).  Copied. */
    bool tls;
    const char *tls_ca_file;
    const char *tls_cert_file;
    const char *tls_key_file;
    const char *tls_server_name;
    /* Login sent as AUTH on each new connection (fence-store --acl-file):
     * "AUTH user password", or "AUTH password" when user is NULL.
     * password NULL: no AUTH.  Copied, wiped on close, never in
     * fence_store_errmsg(). */
    const char *user;
    const char *password;
} fence_store_opts;

/* Fill opts with defaults (all zero: see the fields). */
FENCE_API void fence_store_opts_init(fence_store_opts *opts);

/* Connect with options (lazily, like fence_store_open()).  Errors:
 * FENCE_EINVAL (a bad address, a user without a password, unreadable or
 * mismatched TLS files, TLS files without tls), FENCE_ENOMEM.  Calls may
 * also fail with FENCE_EAUTH when fence-store refuses the login, and with
 * FENCE_EUNREACHABLE when the TLS handshake or certificate check fails. */
FENCE_API int fence_store_open_opts(const fence_store_opts *opts,
                                    fence_store **out);
/* Close and free; NULL is a no-op. */
FENCE_API void fence_store_close(fence_store *s);
/* Detail of the last failure on s (valid until the next call on s). */
FENCE_API const char *fence_store_errmsg(fence_store *s);

/* FSET fence token key value.  0 when admitted and written durably.
 * FENCE_ESTALE when token is below the fence's highest token; then
 * *highest_out (may be NULL) is that highest token and nothing was written.
 * FENCE_EUNREACHABLE, FENCE_ETIMEOUT / FENCE_EIO (outcome unknown; not
 * retried), FENCE_EBADTOKEN (a fence-store that verifies signed tokens
 * refuses plain numbers), FENCE_ESERVER, FENCE_EINVAL. */
FENCE_API int fence_store_set(fence_store *s, const char *fence,
                              uint64_t token, const void *key, size_t key_len,
                              const void *value, size_t value_len,
                              uint64_t *highest_out);
/* FENCE.ADMIT fence token: raise the fence's mark to token without a write
 * (do this before reading for a read-modify-write).  Errors as for
 * fence_store_set(). */
FENCE_API int fence_store_admit(fence_store *s, const char *fence,
                                uint64_t token, uint64_t *highest_out);
/* fence_store_set() and fence_store_admit() with a signed token string
 * (fence_lock_signed_token(), $FENCE_SIGNED_TOKEN) instead of the number,
 * for a fence-store started with --token-verify-keys.  FENCE_EINVAL if
 * signed_token does not have a signed token's shape; FENCE_EBADTOKEN if the
 * store refuses it (forged, altered, another lock's, an unlisted key). */
FENCE_API int fence_store_set_signed(fence_store *s, const char *fence,
                                     const char *signed_token, const void *key,
                                     size_t key_len, const void *value,
                                     size_t value_len, uint64_t *highest_out);
FENCE_API int fence_store_admit_signed(fence_store *s, const char *fence,
                                       const char *signed_token,
                                       uint64_t *highest_out);
/* FGET key: *value_out (NUL-terminated, free with fence_free()) and
 * *len_out.  *value_out is NULL when the key does not exist. */
FENCE_API int fence_store_get(fence_store *s, const void *key, size_t key_len,
                              char **value_out, size_t *len_out);

#ifdef __cplusplus
}
#endif

#endif /* FENCE_H */
