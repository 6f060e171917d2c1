/* libfence-guard: a durable fencing-token guard for resources written in C.
 *
 * A guard keeps, per fence name, the highest fencing token it has admitted
 * (the high-water mark).  The rule: a request carrying token T for fence F
 * is admitted iff T >= high(F); admitting raises high(F) to T.  Equal tokens
 * are admitted (one lock holder writes many times).  A mark is on disk
 * (written and fsynced) before the call that raised it returns, so after a
 * crash the guard never admits a token lower than one it already admitted.
 *
 * Typical use, in a resource that wants check + write to be atomic:
 *
 *     fence_guard *g;
 *     if (fence_guard_open("/var/lib/myres/guard", NULL, &g) != 0) {
 *         fprintf(stderr, "guard: %s\n", fence_guard_errmsg(g));
 *         fence_guard_close(g);
 *         return -1;
 *     }
 *     uint64_t high;
 *     int rc = fence_guard_admit_run(g, "orders", 6, token, write_fn, arg,
 *                                    &high);
 *     if (rc == FENCE_GUARD_ESTALE)  ... reject: token < high ...
 *
 * On-disk format: one append-only log per guard directory with a CRC32C per
 * batch, compacted now and then by writing a temporary file, fsyncing it,
 * renaming it over the log and fsyncing the directory.  A torn final batch
 * (a crash in the middle of an append that was therefore never acknowledged)
 * is discarded when the guard is opened; a checksum failure anywhere else
 * makes fence_guard_open fail with FENCE_GUARD_ECORRUPT.  The guard never
 * silently resets a mark to zero.
 *
 * Threads: every function may be called from any thread on the same handle.
 * Calls on one fence are serialized; calls on different fences run in
 * parallel and share fsyncs (group commit: while one batch is being
 * written and fsynced, new records gather in the next batch).  A log
 * compaction (rare: when the log outgrows four times its live marks) holds
 * up every append until it is done.  The library never writes logs
 * and never aborts the host process: disk errors come back as error codes,
 * and after one the handle is unusable (every later call fails with
 * FENCE_GUARD_EFAILED) so that it cannot continue on a file that may be
 * behind what it acknowledged.
 *
 * Signed tokens: opened with fence_guard_opts.verify_keys_path, the guard
 * admits only tokens fenced signed for that fence (fence_guard_admit_signed),
 * so a forged or replayed-elsewhere token cannot raise a mark.  Link with
 * -lsodium -pthread.
 */
#ifndef FENCE_GUARD_H
#define FENCE_GUARD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define FENCE_GUARD_API __attribute__((visibility("default")))
#else
#define FENCE_GUARD_API
#endif

/* Longest fence name in bytes; names are any bytes, 1..this long. */
#define FENCE_GUARD_NAME_MAX 256
/* Default for fence_guard_opts.fences_max. */
#define FENCE_GUARD_FENCES_DEFAULT 100000
/* Hard ceiling for fence_guard_opts.fences_max. */
#define FENCE_GUARD_FENCES_MAX 100000000
/* Default for fence_guard_opts.compact_min_bytes. */
#define FENCE_GUARD_COMPACT_DEFAULT (4u * 1024 * 1024)
/* Size of the buffer behind fence_guard_errmsg(). */
#define FENCE_GUARD_ERRMSG_SIZE 512

/* Error codes: one X-macro makes both the enum and the strings.  Zero is
 * success; every error is negative. */
#define FENCE_GUARD_ERRNO_MAP(X)                                                \
    X(STALE, "fencing token is older than the fence's high-water mark")         \
    X(INVAL, "invalid argument")                                                \
    X(FULL, "too many fences (fences_max reached)")                             \
    X(NOMEM, "out of memory")                                                   \
    X(IO, "disk error; the guard is now unusable")                              \
    X(CORRUPT, "guard file is corrupt")                                         \
    X(BUSY, "guard directory is in use by another guard")                       \
    X(FAILED, "guard is unusable after an earlier disk error")                  \
    X(WRITE, "the caller's write failed; the mark was not raised")            \
    X(BADTOKEN, "token refused: unsigned, malformed, forged, signed with an "  \
                "unlisted key or for another fence")                          \
    X(KEYS, "the verify-keys file cannot be read or is malformed")

enum fence_guard_errno {
    FENCE_GUARD_OK = 0,
    FENCE_GUARD__ERRNO_BASE = -100,
#define FENCE_GUARD__ENUM(name, text) FENCE_GUARD_E##name,
    FENCE_GUARD_ERRNO_MAP(FENCE_GUARD__ENUM)
#undef FENCE_GUARD__ENUM
    FENCE_GUARD__ERRNO_END
};

/* An open guard (opaque). */
typedef struct fence_guard fence_guard;

/* Options for fence_guard_open.  Initialize with fence_guard_opts_default()
 * and change what you need; passing NULL to fence_guard_open means the
 * defaults. */
typedef struct fence_guard_opts {
    /* Most distinct fences the guard tracks (memory bound), 1 ..
     * FENCE_GUARD_FENCES_MAX; admitting a new fence beyond it fails with
     * FENCE_GUARD_EFULL.  Fences are never forgotten. */
    uint32_t fences_max;
    /* The log is compacted once it is larger than this many bytes and
     * more than four times the size its live marks need. */
    uint64_t compact_min_bytes;
    /* Signed tokens (docs/security.md, "Signed tokens"): a verify.keys file
     * (as `fencectl keygen` writes it; one "KEYID SCHEME KEY" a line).
     * NULL (the default): tokens are plain numbers, nothing is verified.
     * Set: the guard admits only tokens that fence_guard_admit_signed()
     * verifies against these keys, and refuses the numeric entry points
     * (fence_guard_admit, fence_guard_admit_run) with FENCE_GUARD_EBADTOKEN.
     * The file is read once, by fence_guard_open. */
    const char *verify_keys_path;
    /* Entries of the verify cache ((fence, token, signature) triples known
     * good, so a holder's repeated writes skip the signature check);
     * 0: 4096.  At most 1048576. */
    uint32_t verify_cache_max;
} fence_guard_opts;

/* Counters for monitoring and tests (fence_guard_stats). */
typedef struct fence_guard_stats {
    uint64_t fences;          /* distinct fences known */
    uint64_t admitted;        /* admits that returned 0 since open */
    uint64_t rejected_stale;  /* admits that returned FENCE_GUARD_ESTALE */
    uint64_t syncs;           /* fsyncs of the log since open */
    uint64_t compactions;     /* log compactions since open */
    uint64_t log_bytes;       /* current size of the log file */
    uint64_t torn_bytes;      /* bytes of a torn tail discarded at open */
    uint64_t rejected_badtoken; /* admits that returned FENCE_GUARD_EBADTOKEN */
    uint64_t verified;        /* signatures checked (not from the cache) */
    uint64_t verify_cache_hits; /* signed admits answered by the cache */
} fence_guard_stats;

/* The caller's protected write, run by fence_guard_admit_run while the
 * fence is held.  Return 0 if the write succeeded (and is as durable as the
 * caller needs it to be), non-zero if it failed and left nothing behind. */
typedef int (*fence_guard_write_fn)(void *arg);

/* Fill *opts with the defaults. */
FENCE_GUARD_API void fence_guard_opts_default(fence_guard_opts *opts);

/* Open (creating if needed) the guard stored in directory dir, which must
 * exist.  The guard keeps two files there: "fence-guard.log" and
 * "fence-guard.lock".  opts may be NULL (defaults).
 *
 * On return *out is set in every case except FENCE_GUARD_ENOMEM (*out is
 * then NULL): on failure it is a handle in the failed state whose
 * fence_guard_errmsg() says what went wrong (file, offset, reason); close it
 * with fence_guard_close().
 *
 * Returns 0, or:
 *   FENCE_GUARD_EINVAL    dir or out is NULL, or an option is out of range;
 *   FENCE_GUARD_EBUSY     another open guard (any process) holds dir;
 *   FENCE_GUARD_ECORRUPT  the log fails a check (bad header, bad checksum
 *                         before the final batch, an impossible record);
 *   FENCE_GUARD_EFULL     the log holds more fences than fences_max;
 *   FENCE_GUARD_EKEYS     opts->verify_keys_path cannot be read or has a
 *                         bad line (the message names the file and line);
 *   FENCE_GUARD_EIO       a system call failed (the message names it);
 *   FENCE_GUARD_ENOMEM    out of memory. */
FENCE_GUARD_API int fence_guard_open(const char *dir,
                                     const fence_guard_opts *opts,
                                     fence_guard **out);

/* Close the guard and free it.  NULL is a harmless no-op.  Must not be
 * called while other threads still use the handle.  Everything that was
 * acknowledged is already durable; close writes nothing. */
FENCE_GUARD_API void fence_guard_close(fence_guard *g);

/* Admit token for fence name[0..len) (len 1..FENCE_GUARD_NAME_MAX, any
 * bytes).  If token >= the fence's mark, the mark becomes token, is made
 * durable, and 0 is returned; *high (if not NULL) receives the new mark.
 * An equal token needs no disk write.  A fence never seen has mark 0.
 *
 * Returns 0, or:
 *   FENCE_GUARD_ESTALE  token < mark; *high receives the mark; nothing
 *                       changes;
 *   FENCE_GUARD_EBADTOKEN the guard verifies signed tokens (opened with
 *                       verify_keys_path): use fence_guard_admit_signed;
 *   FENCE_GUARD_EINVAL  g is NULL, or the name is empty or too long;
 *   FENCE_GUARD_EFULL   a new fence would exceed fences_max;
 *   FENCE_GUARD_ENOMEM  out of memory (nothing changes);
 *   FENCE_GUARD_EIO     the disk write failed (the guard is now failed);
 *   FENCE_GUARD_EFAILED the guard failed earlier (see fence_guard_errmsg). */
FENCE_GUARD_API int fence_guard_admit(fence_guard *g, const char *name,
                                      size_t len, uint64_t token,
                                      uint64_t *high);

/* Like fence_guard_admit, but runs the caller's write fn(arg) as part of the
 * admission, so that check and write are atomic with respect to every other
 * call on the same fence.  Order of events:
 *   1. wait for the fence (calls on one fence are serialized);
 *   2. if token < mark: return FENCE_GUARD_ESTALE without calling fn;
 *   3. if token > mark: write the new mark to disk and fsync it (so the mark
 *      is durable no later than the write it admits);
 *   4. call fn(arg) (without any guard-wide lock; other fences proceed);
 *   5. if fn returned 0: the mark is token, return 0;
 *      otherwise: the previous mark is restored (durably, if step 3 wrote)
 *      and FENCE_GUARD_EWRITE is returned.
 * A crash between 3 and 5 leaves the raised mark on disk, which is safe:
 * it only rejects tokens that were older than one a caller presented.
 * fn must not call the guard on the same fence (it would deadlock); fn may
 * be NULL (then this is fence_guard_admit).  Returns what fence_guard_admit
 * returns, plus FENCE_GUARD_EWRITE. */
FENCE_GUARD_API int fence_guard_admit_run(fence_guard *g, const char *name,
                                          size_t len, uint64_t token,
                                          fence_guard_write_fn fn, void *arg,
                                          uint64_t *high);

/* fence_guard_admit_run for a token as the client sent it: tok[0..tok_len)
 * is a signed token "<token>.<key id>.<signature>" (docs/security.md) or,
 * on a guard opened without verify keys, also a plain decimal.
 *
 * On a guard with verify keys, the token is checked BEFORE the fence is
 * looked at: it must parse strictly, name a listed key id, and carry a
 * signature of exactly (name, token, key id) under that key.  Anything
 * else (a plain number such as 9223372036854775808, a number changed after
 * signing, a signature for another fence, a key that is not listed) returns
 * FENCE_GUARD_EBADTOKEN with the reason in fence_guard_errmsg(), and
 * nothing changes: the mark stays where it was.  A verified (fence, token,
 * signature) is remembered in a bounded cache, so a holder's repeated
 * writes cost no signature check.  Without verify keys, the token's number
 * is used as is (the signature is not checked).
 *
 * *token_out (may be NULL) receives the token's number once it parsed.
 * Then as fence_guard_admit_run.  Returns what it returns, plus
 * FENCE_GUARD_EBADTOKEN. */
FENCE_GUARD_API int fence_guard_admit_signed(fence_guard *g, const char *name,
                                             size_t len, const char *tok,
                                             size_t tok_len,
                                             fence_guard_write_fn fn,
                                             void *arg, uint64_t *token_out,
                                             uint64_t *high);

/* Read the mark of fence name[0..len) into *high (0 if the fence was never
 * admitted).  Returns 0, FENCE_GUARD_EINVAL (bad arguments) or
 * FENCE_GUARD_EFAILED. */
FENCE_GUARD_API int fence_guard_high(fence_guard *g, const char *name,
                                     size_t len, uint64_t *high);

/* Copy the counters into *stats.  Safe to call at any time. */
FENCE_GUARD_API void fence_guard_stats_get(fence_guard *g,
                                           fence_guard_stats *stats);

/* A static description of an error code ("unknown error" for codes that are
 * not in FENCE_GUARD_ERRNO_MAP). */
FENCE_GUARD_API const char *fence_guard_strerror(int rc);

/* The detail of the last error on g (file names, offsets, errno text), or
 * "" if there was none.  The string belongs to g and stays valid until the
 * next call on g from any thread or fence_guard_close(g).  NULL g gives
 * "out of memory" (the only way fence_guard_open leaves *out NULL). */
FENCE_GUARD_API const char *fence_guard_errmsg(fence_guard *g);

#ifdef __cplusplus
}
#endif

#endif /* FENCE_GUARD_H */
