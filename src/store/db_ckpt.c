/* fence-store's LMDB layer: checkpoints (see db.h, and ckpt.h for the
 * capture, pin and meta-page save).  A checkpoint makes LMDB itself
 * durable up to an LSN, so the write-ahead log may reuse the file that
 * holds the batches before it. */
#include "store/db_int.h"

#include <string.h>

#include "base/assert.h"

/* Capture a checkpoint of LMDB's state at db->lsn into c (the open
 * transaction committed first); 0 or an LMDB/errno code. */
static int capture(fence_store_db *db, fence_store_ckpt *c)
{
    FENCE_ASSERT(db->open == NULL);
    FENCE_ASSERT(db->lmdb_lsn == db->lsn);
    db->pgno_capture = fence__store_db_last_pgno(db);
    return fence__store_ckpt_capture(db->env, db->lsn, ++db->ckpt_seq, c);
}

/* Make c the installed checkpoint if it is newer than the installed one
 * (releasing that one's pin), else release c; c is emptied. */
static void ckpt_install(fence_store_db *db, fence_store_ckpt *c)
{
    if (c->seq <= db->cur.seq) {
        fence__store_ckpt_release(c);
        return;
    }
    FENCE_ASSERT(c->lsn >= db->durable);
    fence__store_ckpt_release(&db->cur);
    db->cur = *c;
    memset(c, 0, sizeof(*c));
    db->durable = db->cur.lsn;
    fence__store_wal_durable(db->wal, db->durable);
    db->checkpoints++;
}

/* A whole checkpoint on this thread (ckpt.h): commit, capture, sync and
 * save, install.  0 or an LMDB/errno code. */
int fence__store_db_checkpoint_now(fence_store_db *db)
{
    fence_store_ckpt c;
    int rc = fence__store_db_commit_open(db);
    if (rc != 0)
        return rc;
    rc = capture(db, &c);
    if (rc == 0 && (rc = fence__store_ckpt_persist(db->env, &db->saver, &c)) != 0)
        fence__store_ckpt_release(&c);
    if (rc == 0)
        ckpt_install(db, &c);
    return rc;
}

/* Capture the due checkpoint (db.h). */
bool fence__store_db_ckpt_begin(fence_store_db *db, uint64_t *lsn)
{
    if (db->async_busy || db->ckpt_want <= db->durable)
        return false;
    FENCE_ASSERT(!db->in_batch);
    if (fence__store_db_commit_or_block(db) != 0)
        return false; /* LMDB is full: retried with the next batch */
    int rc = capture(db, &db->async);
    if (rc != 0)
        FENCE_STORE_FATAL("LMDB checkpoint capture in %s failed: %s",
                          db->dir, mdb_strerror(rc));
    db->async_busy = true;
    *lsn = db->lsn;
    return true;
}

/* The checkpoint's sync and save (db.h): reads only the environment
 * handle and db->async, which the loop leaves alone until _done. */
int fence__store_db_ckpt_sync(fence_store_db *db)
{
    return fence__store_ckpt_persist(db->env, &db->saver, &db->async);
}

/* The checkpoint finished (db.h). */
void fence__store_db_ckpt_done(fence_store_db *db, int rc)
{
    FENCE_ASSERT(db->async_busy);
    if (rc != 0)
        FENCE_STORE_FATAL("LMDB checkpoint of %s failed: %s", db->dir,
                          mdb_strerror(rc));
    db->async_busy = false;
    ckpt_install(db, &db->async);
}
