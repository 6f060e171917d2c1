/* fence-store's LMDB layer (see db.h, and db_int.h for its files): the
 * environment's life.  Open creates the directory, the environment and its
 * four named databases ("data": key -> record, db_layout.c; "fences":
 * fence name -> mark, 8 bytes little-endian; "owners": deleted key -> the
 * fence it stays bound to; "meta": the record format and LMDB's LSN),
 * upgrades the format, restores the last checkpoint and replays the
 * write-ahead log; close checkpoints so the next start replays nothing. */
#include "store/db_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/fs.h"
#include "base/limits.h"

/* Replay one WAL record (fence_store_wal_apply_fn): its operations and
 * its LSN in one transaction, committed (not synced: recovery syncs once
 * at the end). */
static int replay_record(void *ctx, uint64_t lsn, const uint8_t *payload,
                         size_t len, uint32_t nops, char *err, size_t errcap)
{
    fence_store_db *db = ctx;
    FENCE_ASSERT(lsn == db->lsn + 1);
    MDB_txn *txn;
    int rc = mdb_txn_begin(db->env, NULL, 0, &txn);
    if (rc == 0) {
        rc = fence__store_db_apply_ops(db, txn, payload, len, nops);
        if (rc == 0)
            rc = fence__store_db_lsn_put(db, txn, lsn);
        if (rc == 0)
            rc = mdb_txn_commit(txn);
        else
            mdb_txn_abort(txn);
    }
    if (rc != 0) {
        snprintf(err, errcap, "replay of write-ahead log record %" PRIu64
                 " into LMDB in %s failed: %s (free disk space or raise "
                 "--map-size, then restart)", lsn, db->dir, mdb_strerror(rc));
        return -1;
    }
    db->lsn = db->lmdb_lsn = lsn;
    return 0;
}

/* Open the WAL, re-apply every record LMDB lacks, make LMDB durable; 0,
 * or -1 with a message in err. */
static int recover(fence_store_db *db, uint64_t wal_size, char *err,
                   size_t errcap)
{
    if (fence__store_wal_open(db->dir, wal_size,
                              &db->wal, err, errcap) != 0)
        return -1;
    uint64_t from = db->lsn, last = 0, n = 0;
    if (fence__store_wal_replay(db->wal, from, replay_record, db, &last, &n,
                                err, errcap) != 0)
        return -1;
    FENCE_ASSERT(last == db->lsn);
    int rc = fence__store_db_checkpoint_now(db);
    if (rc != 0) {
        snprintf(err, errcap, "LMDB checkpoint of %s after recovery: %s",
                 db->dir, mdb_strerror(rc));
        return -1;
    }
    db->replayed = n;
    if (n > 0)
        FENCE_LOG_I("recovery: replayed %" PRIu64 " write-ahead log records "
                    "(LSN %" PRIu64 " to %" PRIu64 ") into %s", n, from + 1,
                    last, db->dir);
    return 0;
}

/* Open the environment and the four databases; upgrade the format;
 * recover from the WAL. */
int fence__store_db_open(const char *dir, uint64_t map_size, uint64_t wal_size,
                         bool ignore_tokens,
                  fence_store_db **out, char *err, size_t errcap)
{
    FENCE_ASSERT(out != NULL);
    *out = NULL;
    int rc = fence__fs_mkdir_p(dir, 0755);
    if (rc != 0) {
        snprintf(err, errcap, "cannot create data dir %s: %s", dir,
                 strerror(rc));
        return -1;
    }
    fence_store_db *db = calloc(1, sizeof(*db));
    if (db == NULL) {
        snprintf(err, errcap, "out of memory");
        return -1;
    }
    db->ignore_tokens = ignore_tokens;
    db->map_size = map_size;
    /* A checkpoint once LMDB grew by map/DIV bytes, at most MAX (db_defer.c, grow_check). */
    uint64_t grow = map_size / FENCE_STORE_CKPT_GROW_DIV;
    if (grow > FENCE_STORE_CKPT_GROW_MAX)
        grow = FENCE_STORE_CKPT_GROW_MAX;
    db->grow_pages = grow / 4096 > 0 ? grow / 4096 : 1;
    snprintf(db->dir, sizeof(db->dir), "%s", dir);
    fence__store_ckpt_saver_init(&db->saver, dir);
    const char *what = "mdb_env_create";
    if ((rc = mdb_env_create(&db->env)) != 0)
        goto out_free;
    what = "mdb_env_set_mapsize";
    if ((rc = mdb_env_set_mapsize(db->env, (size_t)map_size)) != 0)
        goto out_close;
    what = "mdb_env_set_maxdbs";
    if ((rc = mdb_env_set_maxdbs(db->env, 4)) != 0)
        goto out_close;
    /* MDB_NOSYNC: a commit writes its pages and no sync; the write-ahead
     * log makes each batch durable (one fdatasync), and a checkpoint
     * (mdb_env_sync) makes LMDB durable before the log is reused. */
    /* MDB_NOTLS: the loop thread holds the checkpoint's pin (a read
     * transaction) beside its other transactions (ckpt.h). */
    uint64_t ckpt_lsn = 0;
    int restored = fence__store_ckpt_restore(&db->saver, &ckpt_lsn, err,
                                             errcap);
    if (restored < 0) {
        mdb_env_close(db->env);
        fence__store_ckpt_saver_free(&db->saver);
        free(db);
        return -1;
    }
    what = "mdb_env_open";
    if ((rc = mdb_env_open(db->env, dir, MDB_NOSYNC | MDB_NOTLS, 0644)) != 0)
        goto out_close;
    MDB_txn *txn;
    what = "mdb_txn_begin";
    if ((rc = mdb_txn_begin(db->env, NULL, 0, &txn)) != 0)
        goto out_close;
    what = "mdb_dbi_open(data)";
    if ((rc = mdb_dbi_open(txn, "data", MDB_CREATE, &db->data)) != 0)
        goto out_abort;
    what = "mdb_dbi_open(fences)";
    if ((rc = mdb_dbi_open(txn, "fences", MDB_CREATE, &db->fences)) != 0)
        goto out_abort;
    what = "mdb_dbi_open(owners)";
    if ((rc = mdb_dbi_open(txn, "owners", MDB_CREATE, &db->owners)) != 0)
        goto out_abort;
    what = "mdb_dbi_open(meta)";
    if ((rc = mdb_dbi_open(txn, "meta", MDB_CREATE, &db->meta)) != 0)
        goto out_abort;
    what = "format check";
    if ((rc = fence__store_db_format_check(db, txn, err, errcap)) != 0) {
        mdb_txn_abort(txn);
        mdb_env_close(db->env);
        fence__store_ckpt_saver_free(&db->saver);
        free(db);
        return -1;
    }
    what = "read of the WAL LSN";
    if ((rc = fence__store_db_lsn_get(db, txn, &db->lsn)) != 0)
        goto out_abort;
    db->lmdb_lsn = db->lsn;
    what = "mdb_txn_commit";
    if ((rc = mdb_txn_commit(txn)) != 0)
        goto out_close;
    if (restored > 0)
        FENCE_LOG_I("LMDB in %s restored to its last checkpoint (LSN %" PRIu64
                    "); the write-ahead log replays what followed", dir,
                    ckpt_lsn);
    if (recover(db, wal_size, err, errcap) != 0) {
        fence__store_ckpt_release(&db->cur);
        fence__store_wal_close(db->wal);
        mdb_env_close(db->env);
        fence__store_ckpt_saver_free(&db->saver);
        free(db);
        return -1;
    }
    *out = db;
    return 0;

out_abort:
    mdb_txn_abort(txn);
out_close:
    mdb_env_close(db->env);
out_free:
    fence__store_ckpt_saver_free(&db->saver);
    free(db);
    snprintf(err, errcap, "LMDB %s on %s: %s", what, dir, mdb_strerror(rc));
    return -1;
}

/* Make LMDB durable (everything acknowledged is in the WAL already), so
 * the next start replays nothing; close. */
void fence__store_db_close(fence_store_db *db)
{
    if (db == NULL)
        return;
    FENCE_ASSERT(!db->async_busy);
    int rc = db->lsn > db->durable ? fence__store_db_checkpoint_now(db) : 0;
    if (db->open != NULL) { /* holds nothing, or what LMDB refused */
        mdb_txn_abort(db->open);
        db->open = NULL;
    }
    if (rc != 0)
        FENCE_LOG_E("LMDB checkpoint of %s at shutdown: %s (the "
                    "write-ahead log still holds every acknowledged "
                    "write)", db->dir, mdb_strerror(rc));
    fence__store_ckpt_release(&db->cur);
    if (rc == 0 && (rc = fence__store_ckpt_forget(&db->saver)) != 0)
        FENCE_LOG_W("cannot clear %s/lmdb-meta.ckpt: %s", db->dir,
                    strerror(rc));
    fence__store_wal_close(db->wal);
    fence__store_ckpt_saver_free(&db->saver);
    fence__store_walbuf_free(&db->rec);
    free(db->pend);
    mdb_env_close(db->env);
    free(db);
}
