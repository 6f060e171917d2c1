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
#include "common/num.h"

/* Below this many free bytes, an EIO from LMDB is a full file system. */
#define FENCE_STORE_NOSPACE_FREE (1024 * 1024)

/* Log and abort (see db.h: after a failed disk write we cannot know what
 * is on disk). */
#define FENCE_STORE_FATAL(...) fence__log_fatal(__VA_ARGS__)

struct fence_store_db {
    MDB_env *env;          /* the environment */
    MDB_dbi data;          /* key -> value */
    MDB_dbi fences;        /* fence -> mark */
    MDB_dbi owners;        /* key -> fence it belongs to */
    char dir[1024];        /* the data directory (messages) */
    bool ignore_tokens;    /* control mode: never reject */
    uint64_t map_size;     /* configured map size */
    uint64_t admitted;     /* tokens admitted since start */
    uint64_t rejected;     /* tokens rejected as stale since start */
    uint64_t wrongfence;   /* writes refused: key of another fence */
};

/* Open the environment and the three databases. */
int fence__store_db_open(const char *dir, uint64_t map_size, bool ignore_tokens,
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
    const char *what = "mdb_env_create";
    if ((rc = mdb_env_create(&db->env)) != 0)
        goto out_free;
    what = "mdb_env_set_mapsize";
    if ((rc = mdb_env_set_mapsize(db->env, (size_t)map_size)) != 0)
        goto out_close;
    what = "mdb_env_set_maxdbs";
    if ((rc = mdb_env_set_maxdbs(db->env, 3)) != 0)
        goto out_close;
    /* Flags 0: full fsync on every commit (no MDB_NOSYNC/MDB_NOMETASYNC). */
    what = "mdb_env_open";
    if ((rc = mdb_env_open(db->env, dir, 0, 0644)) != 0)
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
    what = "mdb_txn_commit";
    if ((rc = mdb_txn_commit(txn)) != 0)
        goto out_close;
    *out = db;
    return 0;

out_abort:
    mdb_txn_abort(txn);
out_close:
    mdb_env_close(db->env);
out_free:
    free(db);
    snprintf(err, errcap, "LMDB %s on %s: %s", what, dir, mdb_strerror(rc));
    return -1;
}

/* Close the environment (everything acknowledged is already on disk). */
void fence__store_db_close(fence_store_db *db)
{
    if (db == NULL)
        return;
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

/* A write failed inside txn: abort it, then as write_failed. */
static fence_store_result put_failed(fence_store_db *db, MDB_txn *txn, int rc,
                                     const char *what)
{
    mdb_txn_abort(txn);
    return write_failed(db, rc, what);
}

/* The key's fence inside txn: 0 and the name in *owner when bound, MDB_NOTFOUND
 * when not. */
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

/* The rule, the mark and the write, in one transaction. */
fence_store_result fence__store_db_write(fence_store_db *db,
                                         const fence_store_cmd *c,
                                         fence_store_write_out *out)
{
    FENCE_ASSERT(fence__store_cmd_is_write(c->op));
    FENCE_ASSERT(c->fence_len >= 1);
    memset(out, 0, sizeof(*out));
    MDB_txn *txn;
    int rc = mdb_txn_begin(db->env, NULL, 0, &txn);
    if (rc != 0)
        FENCE_STORE_FATAL("LMDB mdb_txn_begin (write): %s", mdb_strerror(rc));
    uint64_t high = mark_get(db, txn, c->fence, c->fence_len);
    if (c->token < high && !db->ignore_tokens) {
        mdb_txn_abort(txn);
        db->rejected++;
        out->high = high;
        return FENCE_STORE_STALE;
    }
    bool bind = false; /* this write binds the key to c->fence */
    if (c->op != FENCE_STORE_OP_FENCE_ADMIT && !db->ignore_tokens) {
        MDB_val own;
        rc = owner_get(db, txn, c->key, c->key_len, &own);
        if (rc == 0 && (own.mv_size != c->fence_len ||
                        memcmp(own.mv_data, c->fence, c->fence_len) != 0)) {
            memcpy(out->owner, own.mv_data, own.mv_size);
            out->owner_len = own.mv_size;
            mdb_txn_abort(txn);
            db->wrongfence++;
            return FENCE_STORE_WRONGFENCE;
        }
        bind = rc == MDB_NOTFOUND && c->op != FENCE_STORE_OP_FDEL;
    }
    if (bind) {
        MDB_val k = {c->key_len, (void *)c->key};
        MDB_val v = {c->fence_len, (void *)c->fence};
        if ((rc = mdb_put(txn, db->owners, &k, &v, 0)) != 0)
            return put_failed(db, txn, rc, "binding of a key to its fence");
    }
    if (c->token > high) {
        uint8_t buf[8];
        fence__put_u64(buf, c->token);
        MDB_val k = {c->fence_len, (void *)c->fence}, v = {8, buf};
        if ((rc = mdb_put(txn, db->fences, &k, &v, 0)) != 0)
            return put_failed(db, txn, rc, "put of a fence mark");
        high = c->token;
    }
    out->high = high;
    MDB_val k = {c->key_len, (void *)c->key}, v;
    switch (c->op) {
    case FENCE_STORE_OP_FSET:
        v.mv_size = c->value_len;
        v.mv_data = (void *)c->value;
        if ((rc = mdb_put(txn, db->data, &k, &v, 0)) != 0)
            return put_failed(db, txn, rc, "put of a value");
        break;
    case FENCE_STORE_OP_FDEL:
        rc = mdb_del(txn, db->data, &k, NULL);
        if (rc != 0 && rc != MDB_NOTFOUND)
            return put_failed(db, txn, rc, "delete of a key");
        out->number = rc == 0 ? 1 : 0;
        break;
    case FENCE_STORE_OP_FINCR: {
        int64_t n = 0;
        rc = mdb_get(txn, db->data, &k, &v);
        if (rc != 0 && rc != MDB_NOTFOUND)
            FENCE_STORE_FATAL("LMDB read of a value: %s", mdb_strerror(rc));
        if (rc == 0 && fence__num_i64(v.mv_data, v.mv_size, &n) != 0) {
            mdb_txn_abort(txn);
            return FENCE_STORE_NOTINT;
        }
        if (n == INT64_MAX) {
            mdb_txn_abort(txn);
            return FENCE_STORE_OVERFLOW;
        }
        n++;
        char num[24];
        int len = snprintf(num, sizeof(num), "%" PRId64, n);
        v.mv_size = (size_t)len;
        v.mv_data = num;
        if ((rc = mdb_put(txn, db->data, &k, &v, 0)) != 0)
            return put_failed(db, txn, rc, "put of a counter");
        out->number = n;
        break;
    }
    case FENCE_STORE_OP_FENCE_ADMIT:
        break;
    default:
        FENCE_ASSERT(!"not a write");
    }
    rc = mdb_txn_commit(txn); /* fsyncs; frees txn whatever happens */
    if (rc != 0)
        return write_failed(db, rc, "commit");
    db->admitted++;
    return FENCE_STORE_OK;
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
    MDB_txn *txn = read_txn(db);
    MDB_val k = {len, (void *)key}, v;
    int rc = mdb_get(txn, db->data, &k, &v);
    if (rc == 0)
        fn(ctx, v.mv_data, v.mv_size);
    else if (rc == MDB_NOTFOUND)
        fn(ctx, NULL, 0);
    else
        FENCE_STORE_FATAL("LMDB read of a value: %s", mdb_strerror(rc));
    mdb_txn_abort(txn);
}

/* Read a mark in its own read transaction. */
uint64_t fence__store_db_high(fence_store_db *db, const char *fence, size_t len)
{
    MDB_txn *txn = read_txn(db);
    uint64_t h = mark_get(db, txn, fence, len);
    mdb_txn_abort(txn);
    return h;
}

/* Counts from LMDB's statistics plus the in-memory counters. */
void fence__store_db_stats_get(fence_store_db *db, fence_store_db_stats *st)
{
    memset(st, 0, sizeof(*st));
    MDB_txn *txn = read_txn(db);
    MDB_stat s;
    if (mdb_stat(txn, db->data, &s) == 0)
        st->keys = s.ms_entries;
    if (mdb_stat(txn, db->fences, &s) == 0)
        st->fences = s.ms_entries;
    MDB_envinfo info;
    if (mdb_env_info(db->env, &info) == 0 && mdb_env_stat(db->env, &s) == 0)
        st->map_used = (uint64_t)(info.me_last_pgno + 1) * s.ms_psize;
    mdb_txn_abort(txn);
    st->admitted = db->admitted;
    st->rejected_stale = db->rejected;
    st->rejected_wrongfence = db->wrongfence;
    st->map_size = db->map_size;
}
