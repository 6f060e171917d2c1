/* fence-store's LMDB layer: logging a batch (see db_int.h).  The batch's
 * LSN goes into the open transaction, its WAL record is written and
 * fdatasynced, and the record is kept as a pending batch until LMDB
 * commits it (db_defer.c); a batch the log cannot take (larger than a
 * WAL file, or both files still waiting for their checkpoint) is
 * committed and LMDB synced at once (a checkpoint, db_ckpt.c).  Above
 * both: neither calls this file. */
#include "store/db_int.h"

#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/limits.h"

/* Keep the WAL record just logged (db->rec) until LMDB commits it; if
 * there is no memory for the copy, commit now instead (fatal if that
 * fails: the record could not be applied again). */
static void pending_push(fence_store_db *db)
{
    size_t need = db->pend_len + db->rec.len;
    if (need > db->pend_cap) {
        size_t cap = db->pend_cap > 0 ? db->pend_cap : 64 * 1024;
        while (cap < need)
            cap *= 2;
        uint8_t *p = realloc(db->pend, cap);
        if (p == NULL) {
            int rc = fence__store_db_commit_open(db);
            if (rc != 0)
                FENCE_STORE_FATAL("out of memory, and LMDB commit failed: "
                                  "%s", mdb_strerror(rc));
            return;
        }
        db->pend = p;
        db->pend_cap = cap;
    }
    memcpy(db->pend + db->pend_len, db->rec.p, db->rec.len);
    db->pend_len = need;
    db->pend_ops += db->rec.nops;
}

/* LMDB durable now, on this thread (a batch larger than a WAL file, or
 * both files still waiting for their checkpoint), after everything was
 * committed to it: every batch is then durable and the log starts over.
 * Fatal on failure. */
static void sync_now(fence_store_db *db)
{
    FENCE_ASSERT(db->open == NULL);
    int rc = fence__store_db_checkpoint_now(db);
    if (rc != 0)
        FENCE_STORE_FATAL("LMDB checkpoint of %s failed: %s", db->dir,
                          mdb_strerror(rc));
    FENCE_ASSERT(db->durable == db->lsn);
    fence__store_wal_reset(db->wal);
    db->wal_stalls++;
}

/* The batch with this lsn cannot be logged (larger than a WAL file, or
 * both files wait for their checkpoint): commit it to LMDB with the
 * pending batches and sync LMDB itself.  0, or the commit's error: the
 * batch is then gone (and the pending batches applied again). */
static int sync_batch(fence_store_db *db, uint64_t lsn)
{
    db->lsn = lsn;
    int rc = fence__store_db_commit_open(db);
    if (rc != 0) {
        db->lsn = lsn - 1;
        fence__store_db_restore_pending(db);
        return rc;
    }
    sync_now(db);
    return 0;
}

/* Make the current batch (its writes in the open transaction, its effects
 * in db->rec) durable: its LSN put, then its WAL record written and
 * fdatasynced; LMDB commits it later (fence__store_db_commit_open).  0, or the LMDB error of
 * the put or of a commit the log needed: the batch's writes are then gone,
 * nothing of it written.  A batch that changed nothing is not logged. */
int fence__store_db_commit_durable(fence_store_db *db)
{
    FENCE_ASSERT(db->open != NULL);
    if (db->rec.nops == 0) {
        if (db->pend_ops == 0) { /* nothing to keep the transaction for */
            mdb_txn_abort(db->open);
            db->open = NULL;
        }
        return 0;
    }
    uint64_t lsn = db->lsn + 1;
    int rc = fence__store_db_lsn_put(db, db->open, lsn);
    if (rc != 0) {
        fence__store_db_lose_batch(db);
        return rc;
    }
    if (fence__store_walbuf_finish(&db->rec, lsn) != 0)
        FENCE_STORE_FATAL("out of memory for a write-ahead log record");
    if (db->rec.len > fence__store_wal_record_max(db->wal))
        return sync_batch(db, lsn);
    switch (fence__store_wal_append(db->wal, lsn, db->rec.p, db->rec.len)) {
    case FENCE_STORE_WAL_WRITTEN:
        break;
    case FENCE_STORE_WAL_SWITCHED:
        db->ckpt_want = lsn; /* the file left behind: checkpoint it */
        break;
    case FENCE_STORE_WAL_BLOCKED:
        return sync_batch(db, lsn);
    }
    db->lsn = lsn;
    pending_push(db);
    if (db->pend_ops >= FENCE_STORE_FLUSH_OPS ||
        db->pend_len >= FENCE_STORE_FLUSH_BYTES)
        (void)fence__store_db_commit_or_block(db);
    return 0;
}
