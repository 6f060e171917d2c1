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
    MDB_txn *batch;        /* the batch's write transaction, or NULL */
    fence_store_wal *wal;  /* the write-ahead log (wal.h) */
    fence_store_walbuf rec; /* the open transaction's effects: its WAL
                            * record being built */
    uint64_t lsn;          /* LSN of the last batch committed to LMDB */
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
};

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
    if (rc == 0)
        rc = lsn_put(db, txn, lsn);
    if (rc == 0)
        rc = mdb_txn_commit(txn);
    else
        mdb_txn_abort(txn);
    if (rc != 0) {
        snprintf(err, errcap, "replay of write-ahead log record %" PRIu64
                 " into LMDB in %s failed: %s (free disk space or raise "
                 "--map-size, then restart)", lsn, db->dir, mdb_strerror(rc));
        return -1;
    }
    db->lsn = lsn;
    return 0;
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

/* A whole checkpoint on this thread (ckpt.h): capture, sync and save,
 * install.  0 or an LMDB/errno code. */
static int checkpoint_now(fence_store_db *db)
{
    fence_store_ckpt c;
    int rc = fence__store_ckpt_capture(db->env, db->lsn, ++db->ckpt_seq, &c);
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

/* A write or commit failed (txn already ended): a full map or a full
 * file system is reported and logged in words an operator acts on;
 * anything else stops the process.  LMDB turns a short pwrite (what a full
 * file system gives) into EIO, so an EIO while the file system holding the
 * data has less than FENCE_STORE_NOSPACE_FREE bytes free counts as full.
 * Either way the commit wrote no meta page (LMDB writes it last, in place),
 * so the store is as it was before this transaction. */
static fence_store_result write_failed(fence_store_db *db, int rc,
                                       const char *what)
{
    if (rc == MDB_MAP_FULL) {
        FENCE_LOG_W("write refused: the store is full (LMDB map of %" PRIu64
                    " bytes, --map-size) at the %s; nothing was written",
                    db->map_size, what);
        return FENCE_STORE_FULL;
    }
    uint64_t avail = 0;
    if (rc == ENOSPC ||
        (rc == EIO && fence__fs_free_bytes(db->dir, &avail) == 0 &&
         avail < FENCE_STORE_NOSPACE_FREE)) {
        FENCE_LOG_E("write refused: no space left on device (data dir %s) "
                    "at the %s; nothing was written; free disk space",
                    db->dir, what);
        return FENCE_STORE_NOSPACE;
    }
    FENCE_STORE_FATAL("LMDB %s failed: %s", what, mdb_strerror(rc));
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
 * both files still waiting for their checkpoint): every committed batch is
 * then durable and the log starts over.  Fatal on failure. */
static void sync_now(fence_store_db *db)
{
    int rc = checkpoint_now(db);
    if (rc != 0)
        FENCE_STORE_FATAL("LMDB checkpoint of %s failed: %s", db->dir,
                          mdb_strerror(rc));
    FENCE_ASSERT(db->durable == db->lsn);
    fence__store_wal_reset(db->wal);
    db->wal_stalls++;
}

/* Commit txn (the open transaction, whose effects are in db->rec) and
 * make it durable: its LSN put, LMDB committed without a sync, then its
 * WAL record written and fdatasynced.  0, or the LMDB error of the put or
 * the commit (txn is then gone, nothing written).  A transaction that
 * changed nothing is aborted. */
static int commit_durable(fence_store_db *db, MDB_txn *txn)
{
    if (db->rec.nops == 0) {
        mdb_txn_abort(txn);
        return 0;
    }
    uint64_t lsn = db->lsn + 1;
    int rc = lsn_put(db, txn, lsn);
    if (rc != 0) {
        mdb_txn_abort(txn);
        return rc;
    }
    if ((rc = mdb_txn_commit(txn)) != 0) /* no sync (MDB_NOSYNC) */
        return rc;
    db->lsn = lsn;
    if (fence__store_walbuf_finish(&db->rec, lsn) != 0)
        FENCE_STORE_FATAL("out of memory for a write-ahead log record");
    if (db->rec.len > fence__store_wal_record_max(db->wal)) {
        sync_now(db);
        return 0;
    }
    switch (fence__store_wal_append(db->wal, lsn, db->rec.p, db->rec.len)) {
    case FENCE_STORE_WAL_WRITTEN:
        break;
    case FENCE_STORE_WAL_SWITCHED:
        db->ckpt_want = lsn; /* the file left behind: checkpoint it */
        break;
    case FENCE_STORE_WAL_BLOCKED:
        sync_now(db);
        break;
    }
    return 0;
}

/* Begin a write transaction with an empty WAL record, or stop. */
static MDB_txn *write_txn(fence_store_db *db)
{
    MDB_txn *txn;
    int rc = mdb_txn_begin(db->env, NULL, 0, &txn);
    if (rc != 0)
        FENCE_STORE_FATAL("LMDB mdb_txn_begin (write): %s", mdb_strerror(rc));
    fence__store_walbuf_reset(&db->rec);
    return txn;
}

/* One write in its own transaction and sync (the path outside a batch, and
 * the replay of a broken one). */
static fence_store_result write_alone(fence_store_db *db,
                                      const fence_store_cmd *c,
                                      fence_store_write_out *out)
{
    MDB_txn *txn = write_txn(db);
    int rc;
    fence_store_result res;
    const char *what;
    if ((rc = apply(db, txn, c, out, &res, &what)) != 0) {
        counters_settle(db, false);
        mdb_txn_abort(txn);
        return write_failed(db, rc, what);
    }
    if (res != FENCE_STORE_OK) {
        mdb_txn_abort(txn);
        counters_settle(db, true);
        return res;
    }
    rc = commit_durable(db, txn); /* frees txn whatever happens */
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
    if (db->batch == NULL)
        db->batch = write_txn(db);
    fence_store_result res;
    const char *what;
    int rc = apply(db, db->batch, c, out, &res, &what);
    if (rc == 0)
        return res;
    /* A put failed: the transaction is unusable, so the whole batch is
     * dropped and replayed one write at a time (fence__store_db_batch_end). */
    FENCE_LOG_D("batch: %s failed (%s); replaying the batch one write at a "
                "time", what, mdb_strerror(rc));
    mdb_txn_abort(db->batch);
    db->batch = NULL;
    db->broken = true;
    counters_settle(db, false);
    memset(out, 0, sizeof(*out));
    return FENCE_STORE_REPLAY;
}

/* Open a batch (see db.h). */
void fence__store_db_batch_begin(fence_store_db *db)
{
    FENCE_ASSERT(!db->in_batch);
    FENCE_ASSERT(db->batch == NULL);
    db->in_batch = true;
    db->broken = false;
}

/* Commit the batch in one transaction and one sync (see db.h). */
int fence__store_db_batch_end(fence_store_db *db)
{
    FENCE_ASSERT(db->in_batch);
    db->in_batch = false;
    if (db->broken) {
        db->broken = false;
        FENCE_ASSERT(db->batch == NULL);
        return -1;
    }
    if (db->batch == NULL) /* reads only */
        return 0;
    MDB_txn *txn = db->batch;
    db->batch = NULL;
    int rc = commit_durable(db, txn); /* one fdatasync for the batch */
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

/* Begin a read-only transaction or stop. */
static MDB_txn *read_txn(fence_store_db *db)
{
    MDB_txn *txn;
    int rc = mdb_txn_begin(db->env, NULL, MDB_RDONLY, &txn);
    if (rc != 0)
        FENCE_STORE_FATAL("LMDB mdb_txn_begin (read): %s", mdb_strerror(rc));
    return txn;
}

/* Hand the value (or its absence) to fn inside a read transaction. */
void fence__store_db_get(fence_store_db *db, const char *key, size_t len,
                  void (*fn)(void *ctx, const char *p, size_t n), void *ctx)
{
    FENCE_ASSERT(!db->broken);
    MDB_txn *txn = db->batch != NULL ? db->batch : read_txn(db);
    MDB_val own, v;
    if (record_get(db, txn, key, len, &own, &v) == 0)
        fn(ctx, v.mv_data, v.mv_size);
    else
        fn(ctx, NULL, 0);
    if (txn != db->batch)
        mdb_txn_abort(txn);
}

/* The key's fence in its own read transaction (db.h). */
size_t fence__store_db_key_fence(fence_store_db *db, const char *key, size_t len, char *out)
{
    MDB_txn *txn = read_txn(db);
    MDB_val owner, value;
    size_t n = 0;
    /* A live key's fence is in its record (format 2); a deleted key's in
     * "owners". */
    if (record_get(db, txn, key, len, &owner, &value) == 0 ||
        owner_get(db, txn, key, len, &owner) == 0) {
        n = owner.mv_size;
        memcpy(out, owner.mv_data, n);
    }
    mdb_txn_abort(txn);
    return n;
}

/* Read a mark in its own read transaction. */
uint64_t fence__store_db_high(fence_store_db *db, const char *fence, size_t len)
{
    FENCE_ASSERT(!db->broken);
    if (db->batch != NULL)
        return mark_get(db, db->batch, fence, len);
    MDB_txn *txn = read_txn(db);
    uint64_t h = mark_get(db, txn, fence, len);
    mdb_txn_abort(txn);
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
    MDB_txn *txn = db->batch != NULL ? db->batch : read_txn(db);
    MDB_stat s;
    if (mdb_stat(txn, db->data, &s) == 0)
        st->keys = s.ms_entries;
    if (mdb_stat(txn, db->fences, &s) == 0)
        st->fences = s.ms_entries;
    MDB_envinfo info;
    if (mdb_env_info(db->env, &info) == 0 && mdb_env_stat(db->env, &s) == 0)
        st->map_used = (uint64_t)(info.me_last_pgno + 1) * s.ms_psize;
    if (txn != db->batch)
        mdb_txn_abort(txn);
    fence_store_wal_stats ws;
    fence__store_wal_stats_get(db->wal, &ws);
    st->wal_file_size = ws.file_size;
    st->wal_bytes = ws.bytes;
    st->wal_syncs = ws.syncs;
    st->wal_lsn = db->lsn;
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
    FENCE_ASSERT(db->batch == NULL);
    int rc = fence__store_ckpt_capture(db->env, db->lsn, ++db->ckpt_seq,
                                       &db->async);
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
