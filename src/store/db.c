/* fence-store's LMDB layer (see db.h).  Two named databases: "data"
 * (key -> value bytes) and "fences" (fence name -> mark, 8 bytes
 * little-endian). */
#include "store/db.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "store/log.h"

struct fence_store_db {
    MDB_env *env;          /* the environment */
    MDB_dbi data;          /* key -> value */
    MDB_dbi fences;        /* fence -> mark */
    bool ignore_tokens;    /* control mode: never reject */
    uint64_t map_size;     /* configured map size */
    uint64_t admitted;     /* tokens admitted since start */
    uint64_t rejected;     /* tokens rejected as stale since start */
};

/* Create dir and its parents (mkdir -p). */
static int mkdir_p(const char *dir)
{
    char p[1024];
    if (snprintf(p, sizeof(p), "%s", dir) >= (int)sizeof(p))
        return ENAMETOOLONG;
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            return errno;
        *s = '/';
    }
    if (mkdir(p, 0755) != 0 && errno != EEXIST)
        return errno;
    return 0;
}

/* Open the environment and both databases. */
int fence__store_db_open(const char *dir, uint64_t map_size, bool ignore_tokens,
                  fence_store_db **out, char *err, size_t errcap)
{
    assert(out != NULL);
    *out = NULL;
    int rc = mkdir_p(dir);
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
    const char *what = "mdb_env_create";
    if ((rc = mdb_env_create(&db->env)) != 0)
        goto out_free;
    what = "mdb_env_set_mapsize";
    if ((rc = mdb_env_set_mapsize(db->env, (size_t)map_size)) != 0)
        goto out_close;
    what = "mdb_env_set_maxdbs";
    if ((rc = mdb_env_set_maxdbs(db->env, 2)) != 0)
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
    const unsigned char *p = v->mv_data;
    uint64_t x = 0;
    for (int i = 7; i >= 0; i--)
        x = (x << 8) | p[i];
    return x;
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

/* Parse a stored value as a decimal int64 (FINCR).  Returns 0 or -1. */
static int parse_i64(const char *p, size_t n, int64_t *out)
{
    if (n == 0 || n > 20)
        return -1;
    size_t i = 0;
    bool neg = false;
    if (p[0] == '-') {
        neg = true;
        i = 1;
        if (n == 1)
            return -1;
    }
    uint64_t v = 0;
    for (; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        uint64_t d = (uint64_t)(p[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    if (!neg && v > (uint64_t)INT64_MAX)
        return -1;
    if (neg && v > (uint64_t)INT64_MAX + 1)
        return -1;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

/* A write failed inside txn: MAP_FULL is reported, anything else stops. */
static fence_store_result put_failed(MDB_txn *txn, int rc, const char *what)
{
    mdb_txn_abort(txn);
    if (rc == MDB_MAP_FULL)
        return FENCE_STORE_FULL;
    FENCE_STORE_FATAL("LMDB %s failed: %s", what, mdb_strerror(rc));
}

/* The rule, the mark and the write, in one transaction. */
fence_store_result fence__store_db_write(fence_store_db *db,
                                         const fence_store_cmd *c,
                                         fence_store_write_out *out)
{
    assert(fence__store_cmd_is_write(c->op));
    assert(c->fence_len >= 1);
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
    if (c->token > high) {
        unsigned char buf[8];
        for (int i = 0; i < 8; i++)
            buf[i] = (unsigned char)(c->token >> (8 * i));
        MDB_val k = {c->fence_len, (void *)c->fence}, v = {8, buf};
        if ((rc = mdb_put(txn, db->fences, &k, &v, 0)) != 0)
            return put_failed(txn, rc, "put of a fence mark");
        high = c->token;
    }
    out->high = high;
    MDB_val k = {c->key_len, (void *)c->key}, v;
    switch (c->op) {
    case FENCE_STORE_OP_FSET:
        v.mv_size = c->value_len;
        v.mv_data = (void *)c->value;
        if ((rc = mdb_put(txn, db->data, &k, &v, 0)) != 0)
            return put_failed(txn, rc, "put of a value");
        break;
    case FENCE_STORE_OP_FDEL:
        rc = mdb_del(txn, db->data, &k, NULL);
        if (rc != 0 && rc != MDB_NOTFOUND)
            return put_failed(txn, rc, "delete of a key");
        out->number = rc == 0 ? 1 : 0;
        break;
    case FENCE_STORE_OP_FINCR: {
        int64_t n = 0;
        rc = mdb_get(txn, db->data, &k, &v);
        if (rc != 0 && rc != MDB_NOTFOUND)
            FENCE_STORE_FATAL("LMDB read of a value: %s", mdb_strerror(rc));
        if (rc == 0 && parse_i64(v.mv_data, v.mv_size, &n) != 0) {
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
            return put_failed(txn, rc, "put of a counter");
        out->number = n;
        break;
    }
    case FENCE_STORE_OP_FENCE_ADMIT:
        break;
    default:
        assert(0 && "not a write");
    }
    rc = mdb_txn_commit(txn); /* fsyncs; frees txn whatever happens */
    if (rc == MDB_MAP_FULL)
        return FENCE_STORE_FULL;
    if (rc != 0)
        FENCE_STORE_FATAL("LMDB commit failed: %s", mdb_strerror(rc));
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
    st->map_size = db->map_size;
}
