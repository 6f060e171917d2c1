/* fence-store's LMDB layer: reads and INFO's counters (see db.h and
 * db_int.h).  A read runs in the open write transaction when there is one,
 * so it sees every answered write LMDB has not committed yet. */
#include "store/db_int.h"

#include <string.h>

#include "base/assert.h"

/* Begin a read-only transaction or stop. */
static MDB_txn *read_txn(fence_store_db *db)
{
    MDB_txn *txn;
    int rc = mdb_txn_begin(db->env, NULL, MDB_RDONLY, &txn);
    if (rc != 0)
        FENCE_STORE_FATAL("LMDB mdb_txn_begin (read): %s", mdb_strerror(rc));
    return txn;
}

/* The transaction a read runs in: the open one (it holds every answered
 * write LMDB has not committed yet, and the batch's own), else a new read
 * transaction (end it with read_end). */
static MDB_txn *read_begin(fence_store_db *db)
{
    return db->open != NULL ? db->open : read_txn(db);
}

/* End a read begun with read_begin. */
static void read_end(fence_store_db *db, MDB_txn *txn)
{
    if (txn != db->open)
        mdb_txn_abort(txn);
}

/* Hand the value (or its absence) to fn (db.h). */
void fence__store_db_get(fence_store_db *db, const char *key, size_t len,
                  void (*fn)(void *ctx, const char *p, size_t n), void *ctx)
{
    FENCE_ASSERT(!db->broken);
    MDB_txn *txn = read_begin(db);
    MDB_val own, v;
    if (fence__store_db_record_get(db, txn, key, len, &own, &v) == 0)
        fn(ctx, v.mv_data, v.mv_size);
    else
        fn(ctx, NULL, 0);
    read_end(db, txn);
}

/* The key's fence (db.h). */
size_t fence__store_db_key_fence(fence_store_db *db, const char *key, size_t len, char *out)
{
    MDB_txn *txn = read_begin(db);
    MDB_val owner, value;
    size_t n = 0;
    /* A live key's fence is in its record (format 2); a deleted key's in
     * "owners". */
    if (fence__store_db_record_get(db, txn, key, len, &owner, &value) == 0 ||
        fence__store_db_owner_get(db, txn, key, len, &owner) == 0) {
        n = owner.mv_size;
        memcpy(out, owner.mv_data, n);
    }
    read_end(db, txn);
    return n;
}

/* Read a mark (db.h). */
uint64_t fence__store_db_high(fence_store_db *db, const char *fence, size_t len)
{
    FENCE_ASSERT(!db->broken);
    MDB_txn *txn = read_begin(db);
    uint64_t h = fence__store_db_mark_get(db, txn, fence, len);
    read_end(db, txn);
    return h;
}

/* True while a broken batch waits for its replay. */
bool fence__store_db_batch_broken(const fence_store_db *db)
{
    return db->broken;
}

/* Counts from LMDB's statistics plus the in-memory counters. */
void fence__store_db_stats_get(fence_store_db *db, fence_store_db_stats *st)
{
    memset(st, 0, sizeof(*st));
    FENCE_ASSERT(!db->broken);
    MDB_txn *txn = read_begin(db);
    MDB_stat s;
    if (mdb_stat(txn, db->data, &s) == 0)
        st->keys = s.ms_entries;
    if (mdb_stat(txn, db->fences, &s) == 0)
        st->fences = s.ms_entries;
    MDB_envinfo info;
    if (mdb_env_info(db->env, &info) == 0 && mdb_env_stat(db->env, &s) == 0)
        st->map_used = (uint64_t)(info.me_last_pgno + 1) * s.ms_psize;
    read_end(db, txn);
    fence_store_wal_stats ws;
    fence__store_wal_stats_get(db->wal, &ws);
    st->wal_file_size = ws.file_size;
    st->wal_bytes = ws.bytes;
    st->wal_syncs = ws.syncs;
    st->wal_lsn = db->lsn;
    st->lmdb_lsn = db->lmdb_lsn;
    st->lmdb_flushes = db->flushes;
    st->lmdb_pending_ops = db->pend_ops;
    st->wal_durable_lsn = db->durable;
    st->wal_checkpoints = db->checkpoints;
    st->wal_stalls = db->wal_stalls;
    st->wal_replayed = db->replayed;
    st->admitted = db->admitted;
    st->rejected_stale = db->rejected;
    st->rejected_wrongfence = db->wrongfence;
    st->map_size = db->map_size;
}
