/* fence-store's LMDB layer: deferred commits (see db_int.h), the open
 * transaction that holds the batches logged in the write-ahead log until
 * their commit in LMDB, and what happens when LMDB finds its map or the
 * disk full.  Logging a batch is db_log.c's; checkpoints (db_ckpt.c) sit
 * on this file, which calls neither. */
#include "store/db_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/fs.h"
#include "base/limits.h"

/* Below this many free bytes, an EIO from LMDB is a full file system. */
#define FENCE_STORE_NOSPACE_FREE (1024 * 1024)

/* Deferred commits.  LMDB copies every page a transaction changes and
 * writes the copies at its commit, so a batch of writes to random keys
 * writes a whole leaf page per key (some 40 pages a batch at 64 clients,
 * 128 MB/s of page writes for a few MB/s of data).  A batch is durable
 * once its WAL record is synced, so LMDB need not commit each one: the
 * batches logged since LMDB's last commit ("pending") stay in one open
 * write transaction, each batch's writes going into it, and that
 * transaction commits (without a sync: MDB_NOSYNC) once it holds
 * FENCE_STORE_FLUSH_OPS operations or FENCE_STORE_FLUSH_BYTES, every
 * FENCE_STORE_FLUSH_MS (the server's timer), and before every checkpoint
 * and at shutdown.  A page written by many batches is then copied and
 * written once per commit.  Every read runs in the open transaction, so
 * it sees every answered write.  The pending batches' WAL records are
 * kept in memory (pend): when the open transaction becomes unusable (a
 * put or a commit finds the map or the disk full) they are applied again,
 * from LMDB's last commit, in a new one, so nothing answered is lost; if
 * LMDB cannot commit them, writes are refused (-FULL) until it can, and
 * reads still see them.  Recovery after a crash replays them from the
 * log, as before (LMDB's LSN is only older). */

/* LMDB's last used page (from its newest commit). */
uint64_t fence__store_db_last_pgno(fence_store_db *db)
{
    MDB_envinfo info;
    if (mdb_env_info(db->env, &info) != 0)
        return 0;
    return (uint64_t)info.me_last_pgno;
}

/* After an LMDB commit: ask for a checkpoint once LMDB grew by grow_pages
 * since the last capture.  The capture's pin keeps every page freed after
 * it from reuse (LMDB reclaims a page only when no reader is older than
 * the transaction that freed it), so without this the data file grows by
 * every page written until the log's next file switch, whatever the
 * data's size (a 64 MiB map was full with 16,000 keys of 16 bytes, the
 * default 1 GiB after about 200,000 random FSETs, and a full map never
 * checkpointed since nothing more was logged); a checkpoint moves the
 * pin, and the pages freed before it are reused, so at most about two
 * intervals' pages are held. */
static void grow_check(fence_store_db *db)
{
    uint64_t last = fence__store_db_last_pgno(db);
    if (db->ckpt_want < db->lmdb_lsn && last > db->pgno_capture &&
        last - db->pgno_capture >= db->grow_pages)
        db->ckpt_want = db->lmdb_lsn;
}

/* Commit the open transaction (no sync): the pending batches, and with
 * them whatever else it holds, become LMDB's.  0, or the commit's error:
 * the transaction is then gone, and so is everything in it (the caller
 * applies the pending batches again, fence__store_db_restore_pending). */
int fence__store_db_commit_open(fence_store_db *db)
{
    if (db->open == NULL)
        return 0;
    MDB_txn *txn = db->open;
    db->open = NULL;
    int rc = mdb_txn_commit(txn); /* frees txn whatever happens */
    if (rc != 0)
        return rc;
    db->lmdb_lsn = db->lsn;
    if (db->pend_ops > 0)
        db->flushes++;
    db->pend_len = 0;
    db->pend_ops = 0;
    grow_check(db);
    return 0;
}

/* Begin the open write transaction if there is none, or stop. */
void fence__store_db_txn_open(fence_store_db *db)
{
    if (db->open != NULL)
        return;
    int rc = mdb_txn_begin(db->env, NULL, 0, &db->open);
    if (rc != 0)
        FENCE_STORE_FATAL("LMDB mdb_txn_begin (write): %s", mdb_strerror(rc));
}

/* The open transaction was lost (a put or a commit failed): apply the
 * pending batches again, in order, from LMDB's last commit, in a new one.
 * They applied before from the same state, so a failure here means LMDB
 * is not what we left: stop (they are in the write-ahead log, and a
 * restart replays them). */
void fence__store_db_restore_pending(fence_store_db *db)
{
    FENCE_ASSERT(db->open == NULL);
    fence__store_db_txn_open(db);
    if (db->pend_ops == 0)
        return;
    int rc = 0;
    size_t at = 0;
    while (rc == 0 && at < db->pend_len) {
        fence_store_walrec r;
        size_t used = fence__store_walrec_parse(db->pend + at,
                                                db->pend_len - at, &r);
        FENCE_ASSERT(used > 0); /* we built it */
        at += used;
        rc = fence__store_db_apply_ops(db, db->open, r.payload, r.payload_len, r.nops);
    }
    if (rc == 0)
        rc = fence__store_db_lsn_put(db, db->open, db->lsn);
    if (rc != 0)
        FENCE_STORE_FATAL("LMDB refused to apply again the %" PRIu64
                          " answered operations (LSN %" PRIu64 " to %" PRIu64
                          ") it had taken before: %s; they are in the "
                          "write-ahead log, a restart replays them",
                          db->pend_ops, db->lmdb_lsn + 1, db->lsn,
                          mdb_strerror(rc));
}

/* A full map or disk (rc, from a put or a commit) as the result a client
 * gets; any other error stops the process.  LMDB turns a short pwrite
 * (what a full file system gives) into EIO, so an EIO while the file
 * system holding the data has less than FENCE_STORE_NOSPACE_FREE bytes
 * free counts as full. */
fence_store_result fence__store_db_full_kind(fence_store_db *db, int rc,
                                             const char *what)
{
    if (rc == MDB_MAP_FULL)
        return FENCE_STORE_FULL;
    uint64_t avail = 0;
    if (rc == ENOSPC ||
        (rc == EIO && fence__fs_free_bytes(db->dir, &avail) == 0 &&
         avail < FENCE_STORE_NOSPACE_FREE))
        return FENCE_STORE_NOSPACE;
    FENCE_STORE_FATAL("LMDB %s failed: %s", what, mdb_strerror(rc));
}

/* Commit the pending batches to LMDB; if LMDB is full, keep them (applied
 * again in a new open transaction) and refuse writes until a later try
 * succeeds.  0, or the commit's error. */
int fence__store_db_commit_or_block(fence_store_db *db)
{
    int rc = fence__store_db_commit_open(db);
    if (rc == 0) {
        if (db->blocked != 0)
            FENCE_LOG_I("LMDB in %s took the pending writes; writes are "
                        "accepted again", db->dir);
        db->blocked = 0;
        return 0;
    }
    fence_store_result kind = fence__store_db_full_kind(db, rc, "commit");
    if (db->blocked == 0)
        FENCE_LOG_E("LMDB in %s cannot take %" PRIu64 " answered operations "
                    "(%s): they stay in the write-ahead log and in memory, "
                    "and writes are refused until there is room; %s",
                    db->dir, db->pend_ops,
                    kind == FENCE_STORE_FULL ? "the map is full"
                                             : "no space left on device",
                    kind == FENCE_STORE_FULL ? "raise --map-size and restart"
                                             : "free disk space");
    fence__store_db_restore_pending(db);
    db->blocked = rc;
    return rc;
}

/* The open transaction is unusable (a put in it failed): drop it with the
 * current batch's writes, apply the pending batches again and commit
 * them, so that what runs next starts from LMDB's own state. */
void fence__store_db_lose_batch(fence_store_db *db)
{
    FENCE_ASSERT(db->open != NULL);
    mdb_txn_abort(db->open);
    db->open = NULL;
    fence__store_db_restore_pending(db);
    (void)fence__store_db_commit_or_block(db);
}

/* While LMDB cannot take the pending batches (db->blocked), try once per
 * batch to commit them; true when writes may run. */
bool fence__store_db_unblocked(fence_store_db *db)
{
    if (db->blocked != 0 && db->may_retry && !db->batch_writes) {
        db->may_retry = false;
        (void)fence__store_db_commit_or_block(db);
    }
    return db->blocked == 0;
}

/* Commit the pending batches to LMDB (see db.h). */
void fence__store_db_flush(fence_store_db *db)
{
    FENCE_ASSERT(!db->in_batch);
    if (db->pend_ops > 0 || db->blocked != 0) {
        (void)fence__store_db_commit_or_block(db);
    } else if (db->open != NULL) { /* holds nothing */
        mdb_txn_abort(db->open);
        db->open = NULL;
    }
}
