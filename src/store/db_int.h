/* fence-store's LMDB layer, private to src/store/db*.c: the store's
 * state and the helpers its files share.  The files, one concern each:
 *   db.c        open (environment, databases, recovery from the WAL), close
 *   db_layout.c what the databases hold: record format 2 (and the upgrade
 *               from 1), marks, bindings, the LSN key, WAL operations
 *   db_defer.c  deferred commits: the open transaction, the pending
 *               batches, a full map or disk
 *   db_log.c    logging a batch: its WAL record, fdatasync, the pending
 *               copy; a batch the log cannot take syncs LMDB at once
 *   db_write.c  the write rule (token, mark, fence binding) and batches
 *   db_read.c   reads and INFO's counters
 *   db_ckpt.c   checkpoints: capture, sync, install
 * Every function here runs on the loop thread, except
 * fence__store_db_ckpt_sync (db.h). */
#ifndef FENCE_STORE_DB_INT_H
#define FENCE_STORE_DB_INT_H

#include <lmdb.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/log.h"
#include "store/ckpt.h"
#include "store/db.h"
#include "store/wal.h"
#include "store/walrec.h"

/* Log and abort (see db.h: after a failed disk write we cannot know what
 * is on disk). */
#define FENCE_STORE_FATAL(...) fence__log_fatal(__VA_ARGS__)

struct fence_store_db {
    MDB_env *env;          /* the environment */
    MDB_dbi data;          /* key -> value */
    MDB_dbi fences;        /* fence -> mark */
    MDB_dbi owners;        /* deleted key -> fence it stays bound to */
    MDB_dbi meta;          /* "format" -> FORMAT (the record layout) */
    char dir[1024];        /* the data directory (messages) */
    bool ignore_tokens;    /* control mode: never reject */
    uint64_t map_size;     /* configured map size */
    uint64_t admitted;     /* tokens admitted since start */
    uint64_t rejected;     /* tokens rejected as stale since start */
    uint64_t wrongfence;   /* writes refused: key of another fence */
    uint64_t b_admitted;   /* admitted since the last commit (tentative) */
    uint64_t b_rejected;   /* stale since the last commit (tentative) */
    uint64_t b_wrongfence; /* wrong fence since the last commit (tentative) */
    bool in_batch;         /* a batch is open (batch_begin .. batch_end) */
    bool broken;           /* a put failed in the batch: it gets replayed */
    bool batch_writes;     /* the open batch wrote: rec holds its effects */
    MDB_txn *open;         /* the open LMDB write transaction: the pending
                            * batches, then the current batch's writes; or
                            * NULL (see "Deferred commits" in db_defer.c) */
    fence_store_wal *wal;  /* the write-ahead log (wal.h) */
    fence_store_walbuf rec; /* the current batch's effects: its WAL record
                            * being built */
    uint64_t lsn;          /* LSN of the last batch logged (answered) */
    uint64_t lmdb_lsn;     /* LSN of the last batch committed to LMDB */
    uint8_t *pend;         /* the pending batches' WAL records, in order */
    size_t pend_len;       /* bytes in pend */
    size_t pend_cap;       /* bytes allocated for pend */
    uint64_t pend_ops;     /* operations in pend */
    int blocked;           /* LMDB refused to commit the pending batches
                            * (its error: a full map or disk); writes are
                            * refused until a commit succeeds */
    bool may_retry;        /* while blocked: this batch may retry it */
    uint64_t flushes;      /* LMDB commits of pending batches since start */
    uint64_t durable;      /* every batch up to this LSN is durable in
                            * LMDB itself (checkpointed) */
    uint64_t ckpt_want;    /* a checkpoint should make this LSN durable
                            * (the log moved to its other file) */
    uint64_t replayed;     /* WAL records replayed at the start */
    uint64_t checkpoints;  /* checkpoints (LMDB syncs) since start */
    uint64_t wal_stalls;   /* batches that waited for a synchronous sync
                            * (both files busy, or a batch larger than a
                            * file) */
    fence_store_ckpt_saver saver; /* writes lmdb-meta.ckpt (ckpt.h) */
    fence_store_ckpt cur;  /* the newest durable checkpoint: its pin */
    fence_store_ckpt async; /* the one on the worker thread */
    bool async_busy;       /* async is captured, not yet installed */
    uint64_t ckpt_seq;     /* captures so far */
    uint64_t pgno_capture; /* LMDB's last page at the last capture */
    uint64_t grow_pages;   /* growth in pages that calls for a checkpoint */
};

/* ---- db_layout.c: what the databases hold ---- */

/* Check the record format in txn, upgrading a format-1 store; 0, or -1
 * with a message in err. */
int fence__store_db_format_check(fence_store_db *db, MDB_txn *txn, char *err,
                                 size_t errcap);
/* LMDB's LSN in txn into *lsn (0 when never logged); 0 or an LMDB error. */
int fence__store_db_lsn_get(fence_store_db *db, MDB_txn *txn, uint64_t *lsn);
/* Put the LSN into txn; 0 or an LMDB error. */
int fence__store_db_lsn_put(fence_store_db *db, MDB_txn *txn, uint64_t lsn);
/* Apply a parsed WAL record's nops operations in txn; 0 or the first
 * LMDB error (txn is then unusable). */
int fence__store_db_apply_ops(fence_store_db *db, MDB_txn *txn,
                              const uint8_t *payload, size_t len,
                              uint32_t nops);
/* The fence's mark in txn (0 if absent); fatal on an LMDB error. */
uint64_t fence__store_db_mark_get(fence_store_db *db, MDB_txn *txn,
                                  const char *fence, size_t len);
/* A deleted key's fence in txn: 0 with the name in *owner, or
 * MDB_NOTFOUND. */
int fence__store_db_owner_get(fence_store_db *db, MDB_txn *txn,
                              const char *key, size_t key_len, MDB_val *owner);
/* A key's record split into its fence and value (pointing into LMDB's
 * pages, valid until the next put in txn); 0 or MDB_NOTFOUND. */
int fence__store_db_record_get(fence_store_db *db, MDB_txn *txn,
                               const char *key, size_t key_len,
                               MDB_val *owner, MDB_val *value);
/* Add one put or delete to the current batch's WAL record; 0 or ENOMEM. */
int fence__store_db_effect(fence_store_db *db, uint8_t op, uint8_t dbi,
                           const void *key, size_t key_len,
                           const void *value, size_t value_len);
/* Put a key's record (owner, value) in txn and in the WAL record; 0 or an
 * LMDB error. */
int fence__store_db_record_put(fence_store_db *db, MDB_txn *txn,
                               const char *key, size_t key_len,
                               const char *owner, size_t owner_len,
                               const void *value, size_t value_len);

/* ---- db_defer.c: deferred commits ---- */

/* LMDB's last used page (from its newest commit). */
uint64_t fence__store_db_last_pgno(fence_store_db *db);
/* Commit the open transaction (no sync); 0 or the commit's error (the
 * transaction and everything in it are then gone). */
int fence__store_db_commit_open(fence_store_db *db);
/* Begin the open write transaction if there is none, or stop. */
void fence__store_db_txn_open(fence_store_db *db);
/* Apply the pending batches again in a new open transaction, or stop. */
void fence__store_db_restore_pending(fence_store_db *db);
/* A full map or disk as a result; any other error stops the process. */
fence_store_result fence__store_db_full_kind(fence_store_db *db, int rc,
                                             const char *what);
/* Commit the pending batches, or keep them and refuse writes (blocked);
 * 0 or the commit's error. */
int fence__store_db_commit_or_block(fence_store_db *db);
/* Drop the unusable open transaction with the current batch's writes and
 * start again from LMDB's state plus the pending batches. */
void fence__store_db_lose_batch(fence_store_db *db);
/* While blocked, retry the commit once per batch; true when writes may
 * run. */
bool fence__store_db_unblocked(fence_store_db *db);

/* ---- db_ckpt.c: checkpoints (above db_defer.c) ---- */

/* Commit, capture, sync, save and install a checkpoint on this thread;
 * 0 or an LMDB/errno code. */
int fence__store_db_checkpoint_now(fence_store_db *db);

/* ---- db_log.c: logging a batch (above db_defer.c and db_ckpt.c) ---- */

/* Log the current batch (WAL record, fdatasync); 0 or an LMDB error (the
 * batch's writes are then gone). */
int fence__store_db_commit_durable(fence_store_db *db);

#endif /* FENCE_STORE_DB_INT_H */
