/* fence-store's LMDB layer (see db.h).  Three named databases: "data"
 * (key -> value bytes), "fences" (fence name -> mark, 8 bytes
 * little-endian) and "owners" (key -> the name of the fence it belongs
 * to). */
#include "store/db.h"

#include <errno.h>
#include <inttypes.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "common/bytes.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/limits.h"
#include "common/num.h"
#include "store/ckpt.h"
#include "store/wal.h"
#include "store/walrec.h"

/* Below this many free bytes, an EIO from LMDB is a full file system. */
#define FENCE_STORE_NOSPACE_FREE (1024 * 1024)

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
                            * NULL (see "Deferred commits" below) */
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

/* The meta key holding the LSN of the last batch in LMDB (8 bytes LE):
 * written in each batch's transaction, so LMDB's content and its LSN
 * change together. */
#define LSN_KEY "wal_lsn"

/* The record layout of the "data" database this code writes: each value
 * is [u16 LE owner length][owner fence][value bytes], the key's fence
 * inside its own record, so a write touches one leaf page instead of two
 * (format 1 kept the binding in "owners" for every key).  "owners" now
 * holds only the bindings of deleted keys. */
#define FORMAT "2"

/* Bytes before the value in a record. */
#define REC_HDR 2

/* Upgrade a format-1 store (no "format" in meta) in txn: every value gets
 * its key's binding from "owners" in front; the "owners" entries stay (they
 * are read only for keys absent from "data").  0, or an LMDB error. */
static int migrate(fence_store_db *db, MDB_txn *txn, uint64_t *n)
{
    MDB_cursor *cur;
    int rc = mdb_cursor_open(txn, db->data, &cur);
    if (rc != 0)
        return rc;
    MDB_val k, v;
    *n = 0;
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        MDB_val own = {0, NULL};
        int orc = mdb_get(txn, db->owners, &k, &own);
        if (orc != 0 && orc != MDB_NOTFOUND)
            break;
        if (orc == MDB_NOTFOUND)
            own.mv_size = 0;
        if (own.mv_size > FENCE_NAME_MAX) {
            rc = MDB_CORRUPTED;
            break;
        }
        size_t len = REC_HDR + own.mv_size + v.mv_size;
        unsigned char *buf = malloc(len ? len : 1);
        if (buf == NULL) {
            rc = ENOMEM;
            break;
        }
        buf[0] = (unsigned char)(own.mv_size & 0xff);
        buf[1] = (unsigned char)(own.mv_size >> 8);
        if (own.mv_size > 0)
            memcpy(buf + REC_HDR, own.mv_data, own.mv_size);
        if (v.mv_size > 0)
            memcpy(buf + REC_HDR + own.mv_size, v.mv_data, v.mv_size);
        /* Put through a copy of the key (k points into the page the put
         * rewrites), then find the key again for MDB_NEXT. */
        char key[FENCE_STORE_KEY_MAX + 1];
        if (k.mv_size > sizeof(key)) {
            free(buf);
            rc = MDB_CORRUPTED;
            break;
        }
        memcpy(key, k.mv_data, k.mv_size);
        MDB_val kc = {k.mv_size, key}, nv = {len, buf};
        rc = mdb_put(txn, db->data, &kc, &nv, 0);
        free(buf);
        if (rc == 0)
            rc = mdb_cursor_get(cur, &kc, &v, MDB_SET);
        if (rc != 0)
            break;
        (*n)++;
    }
    mdb_cursor_close(cur);
    return rc == MDB_NOTFOUND ? 0 : rc;
}

/* Check the store's record format in txn, upgrading a format-1 store;
 * 0, or -1 with a message in err. */
static int format_check(fence_store_db *db, MDB_txn *txn, char *err,
                        size_t errcap)
{
    MDB_val k = {6, (void *)"format"}, v;
    int rc = mdb_get(txn, db->meta, &k, &v);
    if (rc == 0) {
        if (v.mv_size == strlen(FORMAT) &&
            memcmp(v.mv_data, FORMAT, v.mv_size) == 0)
            return 0;
        snprintf(err, errcap, "the store in %s has record format '%.*s'; "
                 "this fence-store reads format " FORMAT, db->dir,
                 (int)(v.mv_size < 16 ? v.mv_size : 16),
                 (const char *)v.mv_data);
        return -1;
    }
    uint64_t n = 0;
    if (rc == MDB_NOTFOUND)
        rc = migrate(db, txn, &n);
    if (rc == 0) {
        MDB_val fv = {strlen(FORMAT), (void *)FORMAT};
        rc = mdb_put(txn, db->meta, &k, &fv, 0);
    }
    if (rc != 0) {
        snprintf(err, errcap, "LMDB format upgrade of %s: %s", db->dir,
                 mdb_strerror(rc));
        return -1;
    }
    if (n > 0)
        FENCE_LOG_I("store in %s upgraded to record format " FORMAT
                    " (%" PRIu64 " keys)", db->dir, n);
    return 0;
}

/* LMDB's LSN inside txn into *lsn (0 when the store never had a WAL); 0
 * or an LMDB error. */
static int lsn_get(fence_store_db *db, MDB_txn *txn, uint64_t *lsn)
{
    MDB_val k = {strlen(LSN_KEY), (void *)LSN_KEY}, v;
    int rc = mdb_get(txn, db->meta, &k, &v);
    *lsn = 0;
    if (rc == MDB_NOTFOUND)
        return 0;
    if (rc != 0)
        return rc;
    if (v.mv_size != 8)
        return MDB_CORRUPTED;
    *lsn = fence__get_u64(v.mv_data);
    return 0;
}

/* Put the LSN into txn; 0 or an LMDB error. */
static int lsn_put(fence_store_db *db, MDB_txn *txn, uint64_t lsn)
{
    uint8_t buf[8];
    fence__put_u64(buf, lsn);
    MDB_val k = {strlen(LSN_KEY), (void *)LSN_KEY}, v = {8, buf};
    return mdb_put(txn, db->meta, &k, &v, 0);
}

/* The LMDB database a WAL operation names. */
static MDB_dbi wal_dbi(const fence_store_db *db, uint8_t which)
{
    switch (which) {
    case FENCE_STORE_WALDB_DATA:
        return db->data;
    case FENCE_STORE_WALDB_FENCES:
        return db->fences;
    default:
        FENCE_ASSERT(which == FENCE_STORE_WALDB_OWNERS);
        return db->owners;
    }
}

/* Apply the nops operations of a parsed WAL record's payload[0..len) in
 * txn: 0, or the LMDB error of the first one that failed (txn is then
 * unusable). */
static int apply_ops(fence_store_db *db, MDB_txn *txn, const uint8_t *payload,
                     size_t len, uint32_t nops)
{
    int rc = 0;
    size_t off = 0;
    fence_store_walop op;
    for (uint32_t i = 0; rc == 0 && i < nops; i++) {
        int got = fence__store_walrec_op_next(payload, len, &off, &op);
        FENCE_ASSERT(got == 1); /* the parser checked every operation */
        MDB_val k = {op.key_len, (void *)op.key};
        if (op.op == FENCE_STORE_WALOP_PUT) {
            MDB_val v = {op.value_len, (void *)op.value};
            rc = mdb_put(txn, wal_dbi(db, op.dbi), &k, &v, 0);
        } else {
            rc = mdb_del(txn, wal_dbi(db, op.dbi), &k, NULL);
            if (rc == MDB_NOTFOUND)
                rc = 0;
        }
    }
    return rc;
}

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
        rc = apply_ops(db, txn, payload, len, nops);
        if (rc == 0)
            rc = lsn_put(db, txn, lsn);
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

/* LMDB's last used page (from its newest commit). */
static uint64_t last_pgno(fence_store_db *db)
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
    uint64_t last = last_pgno(db);
    if (db->ckpt_want < db->lmdb_lsn && last > db->pgno_capture &&
        last - db->pgno_capture >= db->grow_pages)
        db->ckpt_want = db->lmdb_lsn;
}

/* Commit the open transaction (no sync): the pending batches, and with
 * them whatever else it holds, become LMDB's.  0, or the commit's error:
 * the transaction is then gone, and so is everything in it (the caller
 * applies the pending batches again, restore_pending). */
static int flush(fence_store_db *db)
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
static void open_txn(fence_store_db *db)
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
static void restore_pending(fence_store_db *db)
{
    FENCE_ASSERT(db->open == NULL);
    open_txn(db);
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
        rc = apply_ops(db, db->open, r.payload, r.payload_len, r.nops);
    }
    if (rc == 0)
        rc = lsn_put(db, db->open, db->lsn);
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
static fence_store_result full_kind(fence_store_db *db, int rc,
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
static int flush_or_block(fence_store_db *db)
{
    int rc = flush(db);
    if (rc == 0) {
        if (db->blocked != 0)
            FENCE_LOG_I("LMDB in %s took the pending writes; writes are "
                        "accepted again", db->dir);
        db->blocked = 0;
        return 0;
    }
    fence_store_result kind = full_kind(db, rc, "commit");
    if (db->blocked == 0)
        FENCE_LOG_E("LMDB in %s cannot take %" PRIu64 " answered operations "
                    "(%s): they stay in the write-ahead log and in memory, "
                    "and writes are refused until there is room; %s",
                    db->dir, db->pend_ops,
                    kind == FENCE_STORE_FULL ? "the map is full"
                                             : "no space left on device",
                    kind == FENCE_STORE_FULL ? "raise --map-size and restart"
                                             : "free disk space");
    restore_pending(db);
    db->blocked = rc;
    return rc;
}

/* The open transaction is unusable (a put in it failed): drop it with the
 * current batch's writes, apply the pending batches again and commit
 * them, so that what runs next starts from LMDB's own state. */
static void lose_batch(fence_store_db *db)
{
    FENCE_ASSERT(db->open != NULL);
    mdb_txn_abort(db->open);
    db->open = NULL;
    restore_pending(db);
    (void)flush_or_block(db);
}

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
            int rc = flush(db);
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

/* Capture a checkpoint of LMDB's state at db->lsn into c (the open
 * transaction committed first); 0 or an LMDB/errno code. */
static int capture(fence_store_db *db, fence_store_ckpt *c)
{
    FENCE_ASSERT(db->open == NULL);
    FENCE_ASSERT(db->lmdb_lsn == db->lsn);
    db->pgno_capture = last_pgno(db);
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
static int checkpoint_now(fence_store_db *db)
{
    fence_store_ckpt c;
    int rc = flush(db);
    if (rc != 0)
        return rc;
    rc = capture(db, &c);
    if (rc == 0 && (rc = fence__store_ckpt_persist(db->env, &db->saver, &c)) != 0)
        fence__store_ckpt_release(&c);
    if (rc == 0)
        ckpt_install(db, &c);
    return rc;
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
    int rc = checkpoint_now(db);
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
    /* A checkpoint once LMDB grew by map/DIV bytes, at most MAX (grow_check). */
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
    if ((rc = format_check(db, txn, err, errcap)) != 0) {
        mdb_txn_abort(txn);
        mdb_env_close(db->env);
        fence__store_ckpt_saver_free(&db->saver);
        free(db);
        return -1;
    }
    what = "read of the WAL LSN";
    if ((rc = lsn_get(db, txn, &db->lsn)) != 0)
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
    int rc = db->lsn > db->durable ? checkpoint_now(db) : 0;
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

/* Decode a stored mark. */
static uint64_t mark_decode(const MDB_val *v)
{
    if (v->mv_size != 8)
        FENCE_STORE_FATAL("fences database holds a %zu-byte mark (expected 8): "
                    "the store is corrupt", v->mv_size);
    return fence__get_u64(v->mv_data);
}

/* Read the fence's mark inside txn (0 if absent). */
static uint64_t mark_get(fence_store_db *db, MDB_txn *txn, const char *fence,
                         size_t len)
{
    MDB_val k = {len, (void *)fence}, v;
    int rc = mdb_get(txn, db->fences, &k, &v);
    if (rc == MDB_NOTFOUND)
        return 0;
    if (rc != 0)
        FENCE_STORE_FATAL("LMDB read of a fence mark: %s", mdb_strerror(rc));
    return mark_decode(&v);
}

/* A write or commit failed (the batch's writes are gone): a full map or
 * a full file system is reported and logged in words an operator acts on;
 * anything else stops the process (full_kind).  Either way LMDB wrote no
 * meta page for what failed (it writes it last, in place), so the store is
 * as it was before the batch. */
static fence_store_result write_failed(fence_store_db *db, int rc,
                                       const char *what)
{
    fence_store_result kind = full_kind(db, rc, what);
    if (kind == FENCE_STORE_FULL)
        FENCE_LOG_W("write refused: the store is full (LMDB map of %" PRIu64
                    " bytes, --map-size) at the %s; nothing was written",
                    db->map_size, what);
    else
        FENCE_LOG_E("write refused: no space left on device (data dir %s) "
                    "at the %s; nothing was written; free disk space",
                    db->dir, what);
    return kind;
}

/* A deleted key's fence inside txn ("owners"): 0 and the name in *owner
 * when bound, MDB_NOTFOUND when not. */
static int owner_get(fence_store_db *db, MDB_txn *txn, const char *key,
                     size_t key_len, MDB_val *owner)
{
    MDB_val k = {key_len, (void *)key};
    int rc = mdb_get(txn, db->owners, &k, owner);
    if (rc != 0 && rc != MDB_NOTFOUND)
        FENCE_STORE_FATAL("LMDB read of a key's fence: %s", mdb_strerror(rc));
    if (rc == 0 && (owner->mv_size < 1 || owner->mv_size > FENCE_NAME_MAX))
        FENCE_STORE_FATAL("owners database holds a %zu-byte fence name: the "
                          "store is corrupt", owner->mv_size);
    return rc;
}

/* A key's record in "data", split: 0 with its fence in *owner (size 0:
 * unbound) and its value in *value, or MDB_NOTFOUND.  Both point into
 * LMDB's pages: valid until the next put in txn. */
static int record_get(fence_store_db *db, MDB_txn *txn, const char *key,
                      size_t key_len, MDB_val *owner, MDB_val *value)
{
    MDB_val k = {key_len, (void *)key}, v;
    int rc = mdb_get(txn, db->data, &k, &v);
    if (rc == MDB_NOTFOUND)
        return rc;
    if (rc != 0)
        FENCE_STORE_FATAL("LMDB read of a value: %s", mdb_strerror(rc));
    const unsigned char *p = v.mv_data;
    size_t olen = v.mv_size >= REC_HDR ? (size_t)p[0] | (size_t)p[1] << 8 : 0;
    if (v.mv_size < REC_HDR || olen > FENCE_NAME_MAX ||
        v.mv_size < REC_HDR + olen)
        FENCE_STORE_FATAL("data database holds a malformed %zu-byte record: "
                          "the store is corrupt", v.mv_size);
    owner->mv_size = olen;
    owner->mv_data = (void *)(p + REC_HDR);
    value->mv_size = v.mv_size - REC_HDR - olen;
    value->mv_data = (void *)(p + REC_HDR + olen);
    return 0;
}

/* Add one put or delete to the open transaction's WAL record; 0 or
 * ENOMEM. */
static int effect(fence_store_db *db, uint8_t op, uint8_t dbi,
                  const void *key, size_t key_len, const void *value,
                  size_t value_len)
{
    return fence__store_walbuf_op(&db->rec, op, dbi, key, key_len, value,
                                  value_len) == 0 ? 0 : ENOMEM;
}

/* Put key's record (owner, value) in "data" (and in the WAL record); 0 or
 * an LMDB error. */
static int record_put(fence_store_db *db, MDB_txn *txn, const char *key,
                      size_t key_len, const char *owner, size_t owner_len,
                      const void *value, size_t value_len)
{
    FENCE_ASSERT(owner_len <= FENCE_NAME_MAX);
    MDB_val k = {key_len, (void *)key};
    MDB_val v = {REC_HDR + owner_len + value_len, NULL};
    int rc = mdb_put(txn, db->data, &k, &v, MDB_RESERVE);
    if (rc != 0)
        return rc;
    unsigned char *p = v.mv_data;
    p[0] = (unsigned char)(owner_len & 0xff);
    p[1] = (unsigned char)(owner_len >> 8);
    if (owner_len > 0)
        memcpy(p + REC_HDR, owner, owner_len);
    if (value_len > 0)
        memcpy(p + REC_HDR + owner_len, value, value_len);
    return effect(db, FENCE_STORE_WALOP_PUT, FENCE_STORE_WALDB_DATA, key,
                  key_len, p, v.mv_size);
}

/* The rule, the mark and the write inside txn, every check before the
 * first put, so a refusal leaves txn exactly as it was.  Returns 0 with
 * *res set (FENCE_STORE_OK or a refusal), or an LMDB error from a put with
 * *what naming it: txn is then unusable (the caller aborts it). */
static int apply(fence_store_db *db, MDB_txn *txn, const fence_store_cmd *c,
                 fence_store_write_out *out, fence_store_result *res,
                 const char **what)
{
    FENCE_ASSERT(fence__store_cmd_is_write(c->op));
    FENCE_ASSERT(c->fence_len >= 1);
    memset(out, 0, sizeof(*out));
    *what = NULL;
    uint64_t high = mark_get(db, txn, c->fence, c->fence_len);
    if (c->token < high && !db->ignore_tokens) {
        db->b_rejected++;
        out->high = high;
        *res = FENCE_STORE_STALE;
        return 0;
    }
    char owner[FENCE_NAME_MAX]; /* the key's fence after this write */
    size_t owner_len = 0;
    bool have = false;          /* the key holds a value */
    MDB_val own = {0, NULL}, cur = {0, NULL};
    if (c->op != FENCE_STORE_OP_FENCE_ADMIT) {
        have = record_get(db, txn, c->key, c->key_len, &own, &cur) == 0;
        if (!have && owner_get(db, txn, c->key, c->key_len, &own) != 0)
            own.mv_size = 0; /* never bound */
        if (own.mv_size > 0 && !db->ignore_tokens &&
            (own.mv_size != c->fence_len ||
             memcmp(own.mv_data, c->fence, c->fence_len) != 0)) {
            memcpy(out->owner, own.mv_data, own.mv_size);
            out->owner_len = own.mv_size;
            db->b_wrongfence++;
            *res = FENCE_STORE_WRONGFENCE;
            return 0;
        }
        if (own.mv_size > 0) { /* bound: stays so (also with --ignore-tokens) */
            memcpy(owner, own.mv_data, own.mv_size);
            owner_len = own.mv_size;
        } else if (!db->ignore_tokens && c->op != FENCE_STORE_OP_FDEL) {
            memcpy(owner, c->fence, c->fence_len); /* this write binds it */
            owner_len = c->fence_len;
        }
    }
    char num[24];
    size_t num_len = 0;
    if (c->op == FENCE_STORE_OP_FINCR) {
        /* The counter's checks, before anything is put. */
        int64_t n = 0;
        if (have && fence__num_i64(cur.mv_data, cur.mv_size, &n) != 0) {
            *res = FENCE_STORE_NOTINT;
            return 0;
        }
        if (n == INT64_MAX) {
            *res = FENCE_STORE_OVERFLOW;
            return 0;
        }
        n++;
        int len = snprintf(num, sizeof(num), "%" PRId64, n);
        FENCE_ASSERT(len > 0);
        FENCE_ASSERT((size_t)len < sizeof(num));
        num_len = (size_t)len;
        out->number = n;
    }
    int rc;
    if (c->token > high) {
        uint8_t buf[8];
        fence__put_u64(buf, c->token);
        MDB_val mk = {c->fence_len, (void *)c->fence}, mv = {8, buf};
        *what = "put of a fence mark";
        if ((rc = mdb_put(txn, db->fences, &mk, &mv, 0)) != 0 ||
            (rc = effect(db, FENCE_STORE_WALOP_PUT, FENCE_STORE_WALDB_FENCES,
                         c->fence, c->fence_len, buf, 8)) != 0)
            return rc;
        high = c->token;
    }
    out->high = high;
    switch (c->op) {
    case FENCE_STORE_OP_FSET:
        *what = "put of a value";
        if ((rc = record_put(db, txn, c->key, c->key_len, owner, owner_len,
                             c->value, c->value_len)) != 0)
            return rc;
        break;
    case FENCE_STORE_OP_FDEL:
        out->number = have ? 1 : 0;
        if (!have)
            break;
        *what = "delete of a key";
        MDB_val k = {c->key_len, (void *)c->key};
        if ((rc = mdb_del(txn, db->data, &k, NULL)) != 0 ||
            (rc = effect(db, FENCE_STORE_WALOP_DEL, FENCE_STORE_WALDB_DATA,
                         c->key, c->key_len, NULL, 0)) != 0)
            return rc;
        if (owner_len > 0) { /* the binding outlives the key */
            MDB_val ov = {owner_len, owner};
            *what = "binding of a deleted key to its fence";
            if ((rc = mdb_put(txn, db->owners, &k, &ov, 0)) != 0 ||
                (rc = effect(db, FENCE_STORE_WALOP_PUT,
                             FENCE_STORE_WALDB_OWNERS, c->key, c->key_len,
                             owner, owner_len)) != 0)
                return rc;
        }
        break;
    case FENCE_STORE_OP_FINCR:
        *what = "put of a counter";
        if ((rc = record_put(db, txn, c->key, c->key_len, owner, owner_len,
                             num, num_len)) != 0)
            return rc;
        break;
    case FENCE_STORE_OP_FENCE_ADMIT:
        break;
    default:
        FENCE_ASSERT(!"not a write");
    }
    db->b_admitted++;
    *res = FENCE_STORE_OK;
    return 0;
}

/* Fold the counters of the writes since the last commit into the totals
 * (keep true) or drop them (the transaction was aborted). */
static void counters_settle(fence_store_db *db, bool keep)
{
    if (keep) {
        db->admitted += db->b_admitted;
        db->rejected += db->b_rejected;
        db->wrongfence += db->b_wrongfence;
    }
    db->b_admitted = db->b_rejected = db->b_wrongfence = 0;
}

/* LMDB durable now, on this thread (a batch larger than a WAL file, or
 * both files still waiting for their checkpoint), after everything was
 * committed to it: every batch is then durable and the log starts over.
 * Fatal on failure. */
static void sync_now(fence_store_db *db)
{
    FENCE_ASSERT(db->open == NULL);
    int rc = checkpoint_now(db);
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
    int rc = flush(db);
    if (rc != 0) {
        db->lsn = lsn - 1;
        restore_pending(db);
        return rc;
    }
    sync_now(db);
    return 0;
}

/* Make the current batch (its writes in the open transaction, its effects
 * in db->rec) durable: its LSN put, then its WAL record written and
 * fdatasynced; LMDB commits it later (flush).  0, or the LMDB error of
 * the put or of a commit the log needed: the batch's writes are then gone,
 * nothing of it written.  A batch that changed nothing is not logged. */
static int commit_durable(fence_store_db *db)
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
    int rc = lsn_put(db, db->open, lsn);
    if (rc != 0) {
        lose_batch(db);
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
        (void)flush_or_block(db);
    return 0;
}

/* While LMDB cannot take the pending batches (db->blocked), try once per
 * batch to commit them; true when writes may run. */
static bool unblocked(fence_store_db *db)
{
    if (db->blocked != 0 && db->may_retry && !db->batch_writes) {
        db->may_retry = false;
        (void)flush_or_block(db);
    }
    return db->blocked == 0;
}

/* A write refused because LMDB cannot take the pending batches. */
static fence_store_result refuse_blocked(fence_store_db *db,
                                         fence_store_write_out *out)
{
    memset(out, 0, sizeof(*out));
    return write_failed(db, db->blocked, "commit of earlier writes");
}

/* One write alone: its own WAL record and sync (the replay of a broken
 * batch, one write at a time). */
static fence_store_result write_alone(fence_store_db *db,
                                      const fence_store_cmd *c,
                                      fence_store_write_out *out)
{
    if (!unblocked(db))
        return refuse_blocked(db, out);
    open_txn(db);
    fence__store_walbuf_reset(&db->rec);
    int rc;
    fence_store_result res;
    const char *what;
    if ((rc = apply(db, db->open, c, out, &res, &what)) != 0) {
        counters_settle(db, false);
        lose_batch(db);
        return write_failed(db, rc, what);
    }
    if (res != FENCE_STORE_OK) { /* a refusal changed nothing */
        counters_settle(db, true);
        return res;
    }
    rc = commit_durable(db);
    if (rc != 0) {
        counters_settle(db, false);
        return write_failed(db, rc, "commit");
    }
    counters_settle(db, true);
    return FENCE_STORE_OK;
}

/* A write: inside the open batch, or alone (see db.h). */
fence_store_result fence__store_db_write(fence_store_db *db,
                                         const fence_store_cmd *c,
                                         fence_store_write_out *out)
{
    if (!db->in_batch)
        return write_alone(db, c, out);
    if (db->broken) {
        memset(out, 0, sizeof(*out));
        return FENCE_STORE_REPLAY;
    }
    if (!unblocked(db))
        return refuse_blocked(db, out);
    open_txn(db);
    if (!db->batch_writes) {
        fence__store_walbuf_reset(&db->rec);
        db->batch_writes = true;
    }
    fence_store_result res;
    const char *what;
    int rc = apply(db, db->open, c, out, &res, &what);
    if (rc == 0)
        return res;
    /* A put failed: the transaction is unusable, so the whole batch is
     * dropped and replayed one write at a time (fence__store_db_batch_end);
     * the pending batches are applied again first. */
    FENCE_LOG_D("batch: %s failed (%s); replaying the batch one write at a "
                "time", what, mdb_strerror(rc));
    db->batch_writes = false;
    counters_settle(db, false);
    lose_batch(db);
    db->broken = true;
    memset(out, 0, sizeof(*out));
    return FENCE_STORE_REPLAY;
}

/* Open a batch (see db.h). */
void fence__store_db_batch_begin(fence_store_db *db)
{
    FENCE_ASSERT(!db->in_batch);
    FENCE_ASSERT(!db->batch_writes);
    db->in_batch = true;
    db->broken = false;
    db->may_retry = true;
}

/* Log the batch with one sync (see db.h). */
int fence__store_db_batch_end(fence_store_db *db)
{
    FENCE_ASSERT(db->in_batch);
    db->in_batch = false;
    if (db->broken) {
        db->broken = false;
        FENCE_ASSERT(!db->batch_writes);
        return -1;
    }
    if (!db->batch_writes) /* reads only, or every write refused */
        return 0;
    db->batch_writes = false;
    int rc = commit_durable(db); /* one fdatasync for the batch */
    if (rc != 0) {
        counters_settle(db, false);
        /* Fatal unless the disk or the map is full; then nothing of the
         * batch was written and the caller replays it write by write. */
        (void)write_failed(db, rc, "commit of a batch");
        return -1;
    }
    counters_settle(db, true);
    return 0;
}

/* Commit the pending batches to LMDB (see db.h). */
void fence__store_db_flush(fence_store_db *db)
{
    FENCE_ASSERT(!db->in_batch);
    if (db->pend_ops > 0 || db->blocked != 0) {
        (void)flush_or_block(db);
    } else if (db->open != NULL) { /* holds nothing */
        mdb_txn_abort(db->open);
        db->open = NULL;
    }
}

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
    if (record_get(db, txn, key, len, &own, &v) == 0)
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
    if (record_get(db, txn, key, len, &owner, &value) == 0 ||
        owner_get(db, txn, key, len, &owner) == 0) {
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
    uint64_t h = mark_get(db, txn, fence, len);
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

/* Capture the due checkpoint (db.h). */
bool fence__store_db_ckpt_begin(fence_store_db *db, uint64_t *lsn)
{
    if (db->async_busy || db->ckpt_want <= db->durable)
        return false;
    FENCE_ASSERT(!db->in_batch);
    if (flush_or_block(db) != 0)
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
