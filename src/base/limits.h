/* Every limit of fenced in one place, with its reason (after SQLite's
 * sqliteLimit.h).  The FENCE_*_DEFAULT values are what a fresh install uses;
 * the FENCE_*_MAX values are hard ceilings that configuration cannot exceed.
 * Relationships between limits are checked when compiling. */
#ifndef FENCE_LIMITS_H
#define FENCE_LIMITS_H

/* ---- Names and values ---------------------------------------------------- */

/* Longest lock (and fence) name in bytes.  Names are any bytes, 1..this. */
#define FENCE_NAME_MAX 256
/* The coordination kinds (core/fsm.h, docs/recipes.md). */
#define FENCE_ELECT_VALUE_MAX 4096     /* bytes of an election's value */
#define FENCE_SEM_PERMITS_MAX 1024     /* N of a semaphore (its slots) */
#define FENCE_MULTI_NAMES_MAX 64       /* names of one LOCK.MULTI */
/* Parked ELECTION.OBSERVEs (src/server/observe.c): each holds its slot and
 * a copy of the name (under 300 bytes); a connection may park this many
 * (a pipeline of observers), the server this many in all; beyond them
 * OBSERVE answers -LIMIT. */
#define FENCE_OBSERVERS_PER_CONN 16
#define FENCE_OBSERVERS_MAX 10000

/* ---- Wire protocol (src/proto) ------------------------------------------- */

/* Most arguments in one request (a multibulk count above this is refused):
 * room for ACQUIRE.MULTI with FENCE_MULTI_NAMES_MAX names and its options. */
#define FENCE_ARGS_MAX 80
_Static_assert(FENCE_MULTI_NAMES_MAX + 8 <= FENCE_ARGS_MAX,
               "a LOCK.MULTI / ACQUIRE.MULTI of every name it may have fits one request");
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
/* Client TLS (src/net/tls.c): time a client has to finish the
 * handshake by default (--tls-handshake-timeout-ms), and its bounds. */
#define FENCE_TLS_HANDSHAKE_MS_DEFAULT 10000
#define FENCE_TLS_HANDSHAKE_MS_MIN 100
#define FENCE_TLS_HANDSHAKE_MS_MAX 600000
/* Longest client-certificate common name kept (a longer one is refused). */
#define FENCE_TLS_CN_MAX 256
/* Ciphertext read from a TLS socket at once (one scratch buffer per
 * listener context). */
#define FENCE_TLS_READ_CHUNK (64 * 1024)
/* A TLS client connection that has neither read nor written for this
 * long gives its OpenSSL record buffers back (about 34 KB; they come back
 * with its next record).  A busy connection keeps them: freeing them
 * after every record costs two 17 KB malloc/free pairs a request. */
#define FENCE_TLS_IDLE_RELEASE_MS 2000
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
/* fenced: most log entries between two snapshots once the threshold
 * scales with the state (src/server/loop.c; --snapshot-threshold is the
 * floor). */
#define FENCE_SNAPSHOT_THRESHOLD_MAX 100000000u
_Static_assert(FENCE_SNAPSHOT_THRESHOLD_MAX <= 1000000000u, "fits raft's unsigned threshold");
/* fenced: after a snapshot that could not be taken (fork or memfd failed,
 * the forked child failed), no new one is tried for this long
 * (src/server/snapfork.c): raft would otherwise retry at every apply. */
#define FENCE_SNAPSHOT_RETRY_MS 1000u
_Static_assert(FENCE_SNAPSHOT_RETRY_MS >= 100u, "a failing fork must not run every loop turn");
/* fenced: the nice increment of a forked snapshot child (it yields the
 * CPU to the event loop; 19 is the lowest priority). */
#define FENCE_SNAPSHOT_CHILD_NICE 10
_Static_assert(FENCE_SNAPSHOT_CHILD_NICE > 0 && FENCE_SNAPSHOT_CHILD_NICE <= 19, "a nice increment");

/* fenced: AIO contexts waiting for the io_destroy reaper thread
 * (src/server/aio_reap.c); libraft closes one per log segment, so a few
 * at most are ever queued.  A full queue destroys in the caller, as before. */
#define FENCE_AIO_REAP_QUEUE 64
_Static_assert(FENCE_AIO_REAP_QUEUE >= 4, "room for the segments of a snapshot burst");

/* fenced's loop-lag monitor: period of the tick whose lateness is
 * measured (INFO loop_lag_max_us). */
#define FENCE_LAG_PERIOD_MS 10
_Static_assert(FENCE_LAG_PERIOD_MS >= 1, "a lag tick of at least 1 ms");

/* fence-store group commit: most requests in one batch (one LMDB
 * transaction, one fsync), and the bytes of requests copied into it past
 * which it commits early (one request may exceed it alone). */
#define FENCE_STORE_BATCH_MAX 4096
#define FENCE_STORE_BATCH_BYTES (32 * 1024 * 1024)
/* fence-store's LMDB commits: the batches logged (and answered) since
 * LMDB's last commit stay in one open LMDB write transaction, committed
 * (without a sync) once they hold this many operations or bytes, or after
 * FENCE_STORE_FLUSH_MS, so that a leaf page several batches write is
 * copied and written once (src/store/db_defer.c). */
#define FENCE_STORE_FLUSH_OPS 16384
#define FENCE_STORE_FLUSH_BYTES (16 * 1024 * 1024)
#define FENCE_STORE_FLUSH_MS 1000
/* fence-store checkpoints: LMDB growth since the last checkpoint that
 * starts one: map size / DIV, at most MAX bytes (src/store/db_defer.c). */
/* fence-store checkpoints write LMDB's dirty pages back in pieces of this
 * many bytes before their fdatasync (src/store/ckpt.c). */
#define FENCE_STORE_CKPT_CHUNK (2 * 1024 * 1024)
#define FENCE_STORE_CKPT_GROW_DIV 8
#define FENCE_STORE_CKPT_GROW_MAX (64ull * 1024 * 1024)
_Static_assert(FENCE_STORE_CKPT_GROW_DIV >= 4, "growth well inside the map");
_Static_assert(FENCE_STORE_BATCH_BYTES >= FENCE_STORE_VALUE_DEFAULT, "a default-size value fits a batch");
_Static_assert(FENCE_NAME_MAX + FENCE_STORE_KEY_MAX + 1024 < FENCE_STORE_RBUF_SLACK,
               "a request's other arguments must fit the slack");

/* fence-store's write-ahead log (src/store/wal.c): bytes per file (two
 * files, preallocated once), and the least a small file system gets (an
 * eighth of its free space otherwise).  A batch larger than a file skips
 * the log and is made durable by a synchronous LMDB sync. */
#define FENCE_STORE_WAL_FILE_DEFAULT (16 * 1024 * 1024)
#define FENCE_STORE_WAL_FILE_MIN (64 * 1024)
_Static_assert(FENCE_STORE_WAL_FILE_MIN <= FENCE_STORE_WAL_FILE_DEFAULT, "wal file bounds");
_Static_assert(FENCE_STORE_WAL_FILE_MIN % 4096 == 0, "wal files are whole pages");

/* ---- Redis-client compatibility (src/daemon/compat*.c) ------------------ */

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

/* ---- Users and permissions (src/auth/acl.c) ---------------------------- */

/* Users in one ACL file. */
#define FENCE_ACL_USERS_MAX 1024
/* Passwords (hashes) of one user. */
#define FENCE_ACL_PASSWORDS_MAX 8
/* ~patterns of one user. */
#define FENCE_ACL_PATTERNS_MAX 64
/* +/- command and category rules of one user. */
#define FENCE_ACL_RULES_MAX 64
/* Longest command name in a +COMMAND rule. */
#define FENCE_ACL_CMD_MAX 31
/* Longest line of an ACL file. */
#define FENCE_ACL_LINE_MAX 4096
/* Largest ACL file. */
#define FENCE_ACL_FILE_MAX (1024 * 1024)
/* Largest N of a per-user limit rule (maxleases=N, maxlocks=N,
 * maxconns=N). */
#define FENCE_ACL_QUOTA_MAX 1000000000u

/* ---- Hostile clients (src/net/conn_guard.c) --------------------------- */

/* Default --max-conn-memory: read buffers and unsent replies of every
 * connection together. */
#define FENCE_CONN_MEMORY_DEFAULT (1024ULL * 1024 * 1024)
/* Default --request-timeout-ms: an incomplete request must complete in
 * this long (slowloris). */
#define FENCE_REQUEST_TIMEOUT_MS_DEFAULT 30000
/* Default --auth-timeout-ms (with --acl-file): log in within this long. */
#define FENCE_AUTH_TIMEOUT_MS_DEFAULT 10000

_Static_assert(FENCE_CONN_MEMORY_DEFAULT >= 16ULL * FENCE_RBUF_MAX,
               "the default budget holds a few maximal read buffers");
_Static_assert(FENCE_CONN_MEMORY_DEFAULT >= FENCE_OBUF_DEFAULT,
               "the default budget holds one maximal output backlog");

/* ---- Before login (src/net/conn.c, conn_guard.c, acl_srv.c) ---------- */

/* With --acl-file, a connection that has not logged in yet gets a few
 * hundred bytes, not the full request limits (Redis caps multibulk counts
 * and bulk lengths before AUTH since CVE-2021-32675): at most ARGS
 * arguments (HELLO 3 AUTH u p SETNAME n is 7), each at most BULK bytes (a
 * user name is at most FENCE_COMPAT_NAME_MAX; a longer password cannot
 * log in), inline and header lines of at most INLINE bytes, a read buffer
 * of at most RBUF bytes and at most OBUF unsent reply bytes.  Together,
 * the connections not logged in hold at most 1/MEMORY_DIV of
 * --max-conn-memory. */
#define FENCE_PRELOGIN_ARGS_MAX 10
#define FENCE_PRELOGIN_BULK_MAX 1024
#define FENCE_PRELOGIN_INLINE_MAX 4096
#define FENCE_PRELOGIN_RBUF_MAX (16 * 1024)
/* The first read buffer of such a connection (an AUTH fits; it grows
 * toward RBUF_MAX for a larger request).  When their share of the memory
 * is full, the oldest of them is closed to make room for a new one, so
 * strangers holding buffers cannot keep a user from logging in. */
#define FENCE_PRELOGIN_RBUF_INITIAL 4096
#define FENCE_PRELOGIN_OBUF_MAX (64 * 1024)
#define FENCE_PRELOGIN_MEMORY_DIV 16
/* glibc's M_MMAP_THRESHOLD, fixed by the connection layer at start: a
 * buffer this large or larger is mmapped and so unmapped when it is
 * freed.  (The default threshold is dynamic: once a 4 MiB read buffer is
 * freed it rises to 4 MiB, later big buffers come from the heap, and the
 * heap keeps what they held after they close.) */
#define FENCE_MMAP_THRESHOLD (128 * 1024)
/* Buffer bytes freed by closed connections after which the layer asks
 * glibc to hand free heap pages back (malloc_trim, at most once a second). */
#define FENCE_TRIM_AFTER (1024 * 1024)

_Static_assert(FENCE_PRELOGIN_ARGS_MAX >= 7, "HELLO 3 AUTH user pass SETNAME name fits");
_Static_assert(FENCE_PRELOGIN_ARGS_MAX <= FENCE_ARGS_MAX, "a tighter limit, not a looser one");
_Static_assert(FENCE_PRELOGIN_BULK_MAX >= FENCE_COMPAT_NAME_MAX, "a user name fits");
_Static_assert(FENCE_PRELOGIN_BULK_MAX <= FENCE_BULK_DEFAULT, "a tighter limit");
_Static_assert(FENCE_PRELOGIN_INLINE_MAX <= FENCE_INLINE_MAX, "a tighter limit");
_Static_assert(FENCE_PRELOGIN_ARGS_MAX * (FENCE_PRELOGIN_BULK_MAX + 32) + 32 <=
               FENCE_PRELOGIN_RBUF_MAX, "a maximal pre-login request fits its read buffer");
_Static_assert(FENCE_PRELOGIN_INLINE_MAX + 2 <= FENCE_PRELOGIN_RBUF_MAX,
               "a maximal pre-login line fits its read buffer");
_Static_assert(FENCE_PRELOGIN_MEMORY_DIV >= 2, "a small share");
_Static_assert(FENCE_PRELOGIN_RBUF_INITIAL <= FENCE_PRELOGIN_RBUF_MAX, "the first buffer is the smallest");

/* Failed logins (src/daemon/acl_srv.c).  Each failed AUTH (or HELLO ...
 * AUTH) is answered after a delay, without blocking the loop: DELAY_MS
 * doubled for each earlier failure on the connection, or from its source
 * address within FORGET_MS, at most DELAY_MAX_MS; the failures of one
 * address are answered one after the other (an address gets at most one
 * answer per delay, however many connections it opens).  The connection
 * is closed after FAILS_MAX failures.  ADDRS source addresses are
 * remembered; a record is forgotten FORGET_MS after its last failure, and
 * while all are live, further addresses share one overflow record (so
 * cycling through more addresses than ADDRS resets no delay).  At most LOG_PER_S failures
 * a second are logged one by one (the rest are counted in the next line). */
#define FENCE_AUTH_DELAY_MS 100
#define FENCE_AUTH_DELAY_MAX_MS 3000
#define FENCE_AUTH_FAILS_MAX 5
#define FENCE_AUTH_FORGET_MS 60000
#define FENCE_AUTH_ADDRS 256
#define FENCE_AUTH_LOG_PER_S 10
/* ACL LOG: entries kept (Redis's acllog-max-len default), and the time in
 * which a failure of the same user from the same address adds to an
 * entry's count instead of opening a new one (as Redis groups them). */
#define FENCE_ACL_LOG_MAX 128
#define FENCE_ACL_LOG_GROUP_MS 60000

_Static_assert(FENCE_AUTH_DELAY_MS > 0 && FENCE_AUTH_DELAY_MS <= FENCE_AUTH_DELAY_MAX_MS,
               "delay bounds");
_Static_assert(FENCE_AUTH_DELAY_MAX_MS < FENCE_AUTH_TIMEOUT_MS_DEFAULT,
               "a delayed answer arrives before the login timeout");
_Static_assert(FENCE_AUTH_FAILS_MAX >= 2, "a mistyped password is forgiven once");

_Static_assert(FENCE_ACL_LINE_MAX <= FENCE_ACL_FILE_MAX, "a line fits the file");
_Static_assert(FENCE_NAME_MAX < FENCE_ACL_LINE_MAX, "a pattern as long as a name fits a line");
_Static_assert(FENCE_COMPAT_NAME_MAX < FENCE_ACL_LINE_MAX, "a user name fits a line");
/* ---- Operator views (LOCK.LIST, LEASE.LIST) ------------------------------ */

/* Entries one LOCK.LIST / LEASE.LIST call returns: default and ceiling. */
#define FENCE_LIST_COUNT_DEFAULT 100
#define FENCE_LIST_COUNT_MAX 1000
/* A LOCK.LIST call examines at most COUNT times this many locks. */
#define FENCE_LIST_VISIT_FACTOR 10

_Static_assert(FENCE_LIST_COUNT_DEFAULT <= FENCE_LIST_COUNT_MAX, "list count bounds");

/* ---- Metrics (src/ops/metrics.c) -------------------------------------- */

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
 * timeout: scrapers beyond the limit are refused, idle ones dropped.
 * Room for many (each holds at most FENCE_METRIC_HTTP_CONN_MEMORY bytes):
 * idle sockets must not lock /health out, and a short timeout frees their
 * places soon (a scraper that keeps its connection alive between scrapes
 * just opens a new one).  One remote address (an IPv4 address, an IPv6
 * /64) holds at most PER_IP of them; loopback is not limited (whoever is
 * on the host can do more than that anyway).  The listen backlog. */
#define FENCE_METRIC_HTTP_CONNS_DEFAULT 256
#define FENCE_METRIC_HTTP_TIMEOUT_S 3
#define FENCE_METRIC_HTTP_PER_IP 8
#define FENCE_METRIC_HTTP_CONN_MEMORY (32 * 1024)
#define FENCE_METRIC_HTTP_BACKLOG 511

_Static_assert(FENCE_METRIC_HTTP_PER_IP * 8 <= FENCE_METRIC_HTTP_CONNS_DEFAULT,
               "one address takes a small part of the connections");
_Static_assert((unsigned long long)FENCE_METRIC_HTTP_CONNS_DEFAULT * FENCE_METRIC_HTTP_CONN_MEMORY <=
               16ull * 1024 * 1024, "the endpoint's connections hold little memory");

_Static_assert(FENCE_METRIC_LABEL_MAX <= FENCE_NAME_MAX, "a cut label is a prefix of a name");
_Static_assert(FENCE_METRIC_LABEL_MAX < 65536, "label lengths fit a uint16_t");

/* ---- The mutual-TLS raft transport (src/server/peer_tls.c) -------------- */

/* Peer connections still in the TLS handshake or hello at once; more are
 * refused (a stranger cannot tie up memory with half-open handshakes). */
#define FENCE_PEER_TLS_PENDING_MAX 32
/* Time a peer has to finish the handshake and hello. */
#define FENCE_PEER_TLS_HANDSHAKE_MS 5000
/* Longest raft address in the hello. */
#define FENCE_PEER_TLS_ADDR_MAX 160
/* Refused raft connections logged one by one per second; the rest are
 * counted in one line. */
#define FENCE_PEER_TLS_LOG_PER_S 50
/* Bytes queued toward one side before the pump stops reading the other. */
#define FENCE_PEER_TLS_FLOW_MAX (8 * 1024 * 1024)

_Static_assert(FENCE_PEER_TLS_ADDR_MAX < 65536, "the hello's length field is 16 bits");
_Static_assert(FENCE_PEER_TLS_FLOW_MAX >= 64 * 1024, "room for a few TLS records");

#endif /* FENCE_LIMITS_H */
