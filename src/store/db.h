/* fence-store's LMDB layer: data and high-water marks in one environment,
 * each write (check + mark + data) in one write transaction.
 *
 * A key belongs to one fence: the first FSET or FINCR of a key binds it to
 * that write's fence (LMDB database "owners": key -> fence name, written
 * in the same transaction as the value), and every later FSET, FINCR or
 * FDEL of the key through another fence is refused (FENCE_STORE_WRONGFENCE)
 * whatever its token, nothing written.  Without the rule a holder whose
 * token is stale for fence F could write F's keys through a fence G it
 * never used (any token is >= G's mark of 0).  The binding outlives FDEL
 * (a deleted key cannot be recreated through another fence).
 * --ignore-tokens turns this check off along with the token check.
 *
 * Durability: a write-ahead log (wal.h) in front of LMDB.  Each batch's
 * writes go into LMDB's one open write transaction, with its LSN, and the
 * batch is appended to the log as one record and fdatasynced: one sync per
 * batch, and the batch is durable (may be answered) then.  LMDB commits
 * the open transaction later, without a sync (MDB_NOSYNC), holding many
 * batches ("Deferred commits" in db_defer.c: fence__store_db_flush, a size
 * bound, before a checkpoint, at close).  When the log moves to its other
 * file, a checkpoint (fence__store_db_ckpt_*: mdb_env_sync on a worker
 * thread) makes LMDB durable so the file left behind can be reused.  At
 * open, every record above LMDB's LSN is re-applied.  See
 * docs/fence-store.md, "Durability"; the implementation's files are listed
 * in db_int.h.
 *
 * Disk full: LMDB's MDB_MAP_FULL (the map is full) and ENOSPC (the file
 * system is full) are reported (FENCE_STORE_FULL, FENCE_STORE_NOSPACE) and
 * logged as such.  A write whose put finds no room is refused, nothing of
 * it written; when LMDB's deferred commit of batches already answered
 * finds no room, they stay in the log and in memory (reads see them) and
 * every write is refused until a commit succeeds.  Any other
 * LMDB error, and any failed WAL write, fdatasync or checkpoint sync, is
 * fatal (log + abort): after a failed write or sync we cannot know what is
 * on disk, so the process stops instead of acknowledging anything more. */
#ifndef FENCE_STORE_DB_H
#define FENCE_STORE_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/limits.h"
#include "store/cmd.h"

/* An open store (opaque). */
typedef struct fence_store_db fence_store_db;

/* Outcome of fence__store_db_write. */
typedef enum fence_store_result {
    FENCE_STORE_OK,        /* committed, durable in the WAL; see out
                            * fields */
    FENCE_STORE_STALE,     /* token < mark: nothing written; high = the mark */
    FENCE_STORE_FULL,      /* LMDB map full: nothing written */
    FENCE_STORE_NOSPACE,   /* file system full (ENOSPC): nothing written */
    FENCE_STORE_WRONGFENCE, /* key bound to another fence: nothing written;
                             * owner = that fence */
    FENCE_STORE_NOTINT,    /* FINCR on a value that is not an int64 */
    FENCE_STORE_OVERFLOW,  /* FINCR would overflow int64 */
    FENCE_STORE_REPLAY,    /* batched: the batch broke; the outcome comes
                            * from the replay (fence__store_db_batch_end) */
} fence_store_result;

/* What a write returns to the client. */
typedef struct fence_store_write_out {
    uint64_t
        high; /* FENCE_STORE_STALE: the mark; FENCE_STORE_OK: the mark after */
    int64_t number;  /* FDEL: keys removed (0/1); FINCR: new value */
    char owner[FENCE_NAME_MAX]; /* FENCE_STORE_WRONGFENCE: the key's fence */
    size_t owner_len;           /* bytes in owner */
} fence_store_write_out;

/* Counters for INFO. */
typedef struct fence_store_db_stats {
    uint64_t keys;           /* keys stored */
    uint64_t fences;         /* fences with a mark */
    uint64_t admitted;       /* tokens admitted since start */
    uint64_t rejected_stale; /* tokens rejected since start */
    uint64_t rejected_wrongfence; /* writes refused: key of another fence */
    uint64_t map_size;       /* configured map size */
    uint64_t map_used;       /* bytes of the map in use (pages * psize) */
    uint64_t wal_file_size;  /* bytes per WAL file */
    uint64_t wal_bytes;      /* WAL record bytes written since start */
    uint64_t wal_syncs;      /* WAL fdatasyncs since start */
    uint64_t wal_lsn;        /* LSN of the last batch */
    uint64_t wal_durable_lsn; /* LSN up to which LMDB itself is durable */
    uint64_t wal_checkpoints; /* LMDB syncs since start */
    uint64_t wal_stalls;     /* batches that waited for a synchronous
                              * LMDB sync */
    uint64_t wal_replayed;   /* WAL records replayed at the start */
    uint64_t lmdb_lsn;       /* LSN of the last batch LMDB committed */
    uint64_t lmdb_flushes;   /* LMDB commits of logged batches since start */
    uint64_t lmdb_pending_ops; /* operations logged, not yet in LMDB */
} fence_store_db_stats;

/* Open (creating) the store in dir (created if missing) with the given map
 * size, and its write-ahead log (files of wal_size bytes when created),
 * replaying the log.  ignore_tokens turns enforcement off (control mode).
 * Returns 0, or -1 with a message in err. */
int fence__store_db_open(const char *dir, uint64_t map_size, uint64_t wal_size,
                         bool ignore_tokens,
                  fence_store_db **out, char *err, size_t errcap);

/* Close the store.  NULL is a no-op. */
void fence__store_db_close(fence_store_db *db);

/* Run a write command (FSET, FDEL, FINCR, FENCE.ADMIT): check the token
 * against the fence's mark, raise the mark, apply the write.  Every check
 * runs before the first put, so a refused write changes nothing.
 *
 * Outside a batch: the write alone, durable (its WAL record synced) before
 * the call returns.  Inside a batch (fence__store_db_batch_begin): the
 * write joins the batch and sees every earlier write of the batch, exactly
 * as if they had run one by one; nothing is durable (and the outcome must
 * not be sent) until fence__store_db_batch_end returns 0.  If a put fails
 * inside the batch (a full map), the batch's writes are dropped and this
 * call and every later one of the batch return FENCE_STORE_REPLAY: the
 * caller runs every request of the batch again, in order, outside a
 * batch, which gives each one the outcome a serial execution gives (only
 * the write that does not fit fails).  While LMDB cannot take the writes
 * already answered (a full map or disk, see "Deferred commits" in db_defer.c),
 * every write is refused with FENCE_STORE_FULL or _NOSPACE. */
fence_store_result fence__store_db_write(fence_store_db *db,
                                         const fence_store_cmd *c,
                                         fence_store_write_out *out);

/* Open a batch: every write until fence__store_db_batch_end shares one
 * transaction and one sync.  Reads in a batch (fence__store_db_get, _high,
 * _stats_get) see the batch's writes; their answers too must wait for
 * batch_end.  No batch may be open. */
void fence__store_db_batch_begin(fence_store_db *db);

/* Close the batch: log it (one WAL record, one fsync; LMDB commits it
 * later, fence__store_db_flush).  0: every write of the batch is durable,
 * with the outcome its call returned.  -1: nothing of
 * the batch was written (a put failed, or the commit found the disk or the
 * map full; any other commit failure is fatal); the caller replays every
 * request of the batch in order outside a batch. */
int fence__store_db_batch_end(fence_store_db *db);

/* Commit the batches logged since LMDB's last commit to LMDB (no sync;
 * also done when they reach FENCE_STORE_FLUSH_OPS / _BYTES, and before a
 * checkpoint).  The server calls it every FENCE_STORE_FLUSH_MS; no batch
 * may be open. */
void fence__store_db_flush(fence_store_db *db);

/* True after a batched write returned FENCE_STORE_REPLAY, until batch_end:
 * reads must not run then (they are replayed too). */
bool fence__store_db_batch_broken(const fence_store_db *db);

/* Look up key; calls fn(ctx, value, len) with the value (valid only during
 * the call) or fn(ctx, NULL, 0) if missing. */
void fence__store_db_get(fence_store_db *db, const char *key, size_t len,
                  void (*fn)(void *ctx, const char *p, size_t n), void *ctx);

/* The fence key[0..len) is bound to, copied into out (FENCE_NAME_MAX
 * bytes, not NUL-terminated); returns its length, or 0 when the key was
 * never written (per-fence read permissions, docs/security.md). */
size_t fence__store_db_key_fence(fence_store_db *db, const char *key, size_t len, char *out);

/* The fence's mark (0 if never admitted). */
uint64_t fence__store_db_high(fence_store_db *db, const char *fence,
                              size_t len);

/* Fill *st. */
void fence__store_db_stats_get(fence_store_db *db, fence_store_db_stats *st);

/* When a checkpoint is due (the log moved to its other file) and none is
 * in flight, capture it (ckpt.h: the pin and the meta pages of the last
 * commit) and return true with its LSN in *lsn; no batch may be open.
 * The caller then runs fence__store_db_ckpt_sync (any thread) and, back on
 * this thread, fence__store_db_ckpt_done. */
bool fence__store_db_ckpt_begin(fence_store_db *db, uint64_t *lsn);

/* The checkpoint's sync and save: mdb_env_sync(env, 1) (an fdatasync of
 * the data file: only the environment handle is used, which LMDB allows
 * beside the loop thread's transactions) and lmdb-meta.ckpt written.  May
 * run on a worker thread.  0 or an LMDB/errno code. */
int fence__store_db_ckpt_sync(fence_store_db *db);

/* The checkpoint finished with rc (fatal when not 0): every batch up to
 * its LSN is durable in LMDB; the log may reuse its file; the previous
 * checkpoint's pin is released. */
void fence__store_db_ckpt_done(fence_store_db *db, int rc);

#endif /* FENCE_STORE_DB_H */
