/* Every limit of fenced in one place, with its reason (after SQLite's
 * sqliteLimit.h).  The FENCE_*_DEFAULT values are what a fresh install uses;
 * the FENCE_*_MAX values are hard ceilings that configuration cannot exceed.
 * Relationships between limits are checked when compiling. */
#ifndef FENCE_LIMITS_H
#define FENCE_LIMITS_H

/* ---- Names and values ---------------------------------------------------- */

/* Longest lock (and fence) name in bytes.  Names are any bytes, 1..this. */
#define FENCE_NAME_MAX 256

/* ---- Wire protocol (src/proto) ------------------------------------------- */

/* Most arguments in one request (a multibulk count above this is refused). */
#define FENCE_ARGS_MAX 64
/* Largest bulk string accepted in a request, by default (fence-store values
 * may be larger; see FENCE_STORE_VALUE_DEFAULT). */
#define FENCE_BULK_DEFAULT (64 * 1024)
/* Longest inline command line, and longest "*N"/"$N" header line. */
#define FENCE_INLINE_MAX (64 * 1024)
/* A connection's read buffer never grows beyond this. */
#define FENCE_RBUF_MAX (4 * 1024 * 1024)
/* Requests read from one connection but not yet answered (pipeline depth). */
#define FENCE_PIPELINE_DEFAULT 1024
/* Bytes queued for a slow reader before the server disconnects it. */
#define FENCE_OBUF_DEFAULT (16 * 1024 * 1024)
/* Client TLS (src/common/tls.c): time a client has to finish the
 * handshake by default (--tls-handshake-timeout-ms), and its bounds. */
#define FENCE_TLS_HANDSHAKE_MS_DEFAULT 10000
#define FENCE_TLS_HANDSHAKE_MS_MIN 100
#define FENCE_TLS_HANDSHAKE_MS_MAX 600000
/* Longest client-certificate common name kept (a longer one is refused). */
#define FENCE_TLS_CN_MAX 256
/* Ciphertext read from a TLS socket at once (one scratch buffer per
 * listener context). */
#define FENCE_TLS_READ_CHUNK (64 * 1024)
_Static_assert(FENCE_TLS_HANDSHAKE_MS_MIN <= FENCE_TLS_HANDSHAKE_MS_DEFAULT &&
               FENCE_TLS_HANDSHAKE_MS_DEFAULT <= FENCE_TLS_HANDSHAKE_MS_MAX,
               "the handshake timeout default lies within its bounds");
_Static_assert(FENCE_TLS_READ_CHUNK >= 16 * 1024 + 256,
               "room for one whole TLS record");

/* ---- State machine (src/core) -------------------------------------------- */

#define FENCE_CONNECTIONS_DEFAULT 10000
#define FENCE_LEASES_DEFAULT 100000
#define FENCE_LOCKS_DEFAULT 100000
/* Waiters queued on one lock. */
#define FENCE_WAITERS_DEFAULT 10000
/* Waits queued across all locks (without it, max-locks x max-waiters, 10^9
 * by default, would bound the waits only). */
#define FENCE_WAITS_DEFAULT 100000
/* Client request ids (REQID) remembered for idempotent retries. */
#define FENCE_DEDUP_DEFAULT 65536
/* Lease TTL bounds in ms. */
#define FENCE_TTL_MS_MIN 10
#define FENCE_TTL_MS_MAX (7ULL * 24 * 3600 * 1000)
/* Longest WAIT in ms, and longest lock-delay. */
#define FENCE_WAIT_MS_MAX (24ULL * 3600 * 1000)
#define FENCE_LOCK_DELAY_MS_MAX (3600ULL * 1000)
/* Most commands in one raft entry (one group-commit batch). */
#define FENCE_BATCH_MAX 4096

_Static_assert(FENCE_NAME_MAX < FENCE_BULK_DEFAULT, "a name must fit a bulk");
_Static_assert(FENCE_BULK_DEFAULT < FENCE_RBUF_MAX, "a maximal bulk must fit the read buffer");
_Static_assert(FENCE_INLINE_MAX < FENCE_RBUF_MAX, "an inline line must fit the read buffer");
_Static_assert(FENCE_TTL_MS_MIN < FENCE_TTL_MS_MAX, "ttl bounds");
_Static_assert(FENCE_WAITERS_DEFAULT <= FENCE_WAITS_DEFAULT,
               "one lock's waiters fit the global bound on waits");

/* ---- fence-store (src/store) --------------------------------------------- */

/* Largest value fence-store accepts by default (--max-value), and the
 * ceiling for --max-value.  fence-store sizes its read buffer from
 * --max-value (value + FENCE_STORE_RBUF_SLACK), not from FENCE_RBUF_MAX. */
#define FENCE_STORE_VALUE_DEFAULT (1024 * 1024)
#define FENCE_STORE_VALUE_MAX (64 * 1024 * 1024)
/* Room in fence-store's read buffer for the rest of a request beside one
 * maximal value (command, fence, token, key, headers). */
#define FENCE_STORE_RBUF_SLACK (64 * 1024)
/* Longest fence-store key (LMDB's compiled-in key size limit is 511). */
#define FENCE_STORE_KEY_MAX 511
/* Default and ceiling for fence-store --max-clients. */
#define FENCE_STORE_CLIENTS_DEFAULT 1024
#define FENCE_STORE_CLIENTS_MAX 100000

_Static_assert(FENCE_STORE_VALUE_DEFAULT <= FENCE_STORE_VALUE_MAX, "store value bounds");
_Static_assert(FENCE_NAME_MAX + FENCE_STORE_KEY_MAX + 1024 < FENCE_STORE_RBUF_SLACK,
               "a request's other arguments must fit the slack");

/* ---- Redis-client compatibility (src/common/compat.c) ------------------- */

/* Longest client name (CLIENT SETNAME, HELLO SETNAME) and AUTH user name. */
#define FENCE_COMPAT_NAME_MAX 128
/* Longest CLIENT SETINFO LIB-NAME / LIB-VER value. */
#define FENCE_COMPAT_LIB_MAX 64
/* Largest reply the compat module builds (CLIENT LIST of every connection,
 * COMMAND DOCS); above it the reply is an error instead. */
#define FENCE_COMPAT_REPLY_MAX (16 * 1024 * 1024)

_Static_assert(FENCE_COMPAT_NAME_MAX < FENCE_INLINE_MAX, "a name must fit a request");
_Static_assert(FENCE_COMPAT_LIB_MAX <= FENCE_COMPAT_NAME_MAX, "lib fields are names");
_Static_assert(FENCE_COMPAT_REPLY_MAX >= 1024 * 1024, "room for CLIENT LIST");

/* ---- Operator views (LOCK.LIST, LEASE.LIST) ------------------------------ */

/* Entries one LOCK.LIST / LEASE.LIST call returns: default and ceiling. */
#define FENCE_LIST_COUNT_DEFAULT 100
#define FENCE_LIST_COUNT_MAX 1000
/* A LOCK.LIST call examines at most COUNT times this many locks. */
#define FENCE_LIST_VISIT_FACTOR 10

_Static_assert(FENCE_LIST_COUNT_DEFAULT <= FENCE_LIST_COUNT_MAX, "list count bounds");

/* ---- Metrics (src/common/metrics.c) -------------------------------------- */

/* Longest metric or label name, and longest help text, in bytes. */
#define FENCE_METRIC_NAME_MAX 128
#define FENCE_METRIC_HELP_MAX 512
/* Longest label value kept; longer values (lock names) are cut to this. */
#define FENCE_METRIC_LABEL_MAX 128
/* Ceiling of a labelled family's cap on distinct label values. */
#define FENCE_METRIC_SERIES_MAX 1024
/* Most bucket bounds of one histogram (besides +Inf). */
#define FENCE_METRIC_BUCKETS_MAX 32
/* Concurrent connections of the metrics HTTP endpoint, and its idle
 * timeout: scrapers beyond the limit are refused, idle ones dropped. */
#define FENCE_METRIC_HTTP_CONNS_DEFAULT 32
#define FENCE_METRIC_HTTP_TIMEOUT_S 10

_Static_assert(FENCE_METRIC_LABEL_MAX <= FENCE_NAME_MAX, "a cut label is a prefix of a name");
_Static_assert(FENCE_METRIC_LABEL_MAX < 65536, "label lengths fit a uint16_t");

#endif /* FENCE_LIMITS_H */
