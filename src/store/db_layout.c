/* fence-store's LMDB layer: what its databases hold (see db_int.h).
 * Records of "data" (format 2, and the upgrade from format 1), marks in
 * "fences", bindings of deleted keys in "owners", LMDB's LSN in "meta",
 * and the WAL operations that replay into them.  A read that finds bytes
 * of the wrong shape stops the process: the store is corrupt. */
#include "store/db_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/bytes.h"
#include "base/limits.h"

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
int fence__store_db_format_check(fence_store_db *db, MDB_txn *txn, char *err,
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
int fence__store_db_lsn_get(fence_store_db *db, MDB_txn *txn, uint64_t *lsn)
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
int fence__store_db_lsn_put(fence_store_db *db, MDB_txn *txn, uint64_t lsn)
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
int fence__store_db_apply_ops(fence_store_db *db, MDB_txn *txn,
                              const uint8_t *payload, size_t len,
                              uint32_t nops)
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

/* Decode a stored mark. */
static uint64_t mark_decode(const MDB_val *v)
{
    if (v->mv_size != 8)
        FENCE_STORE_FATAL("fences database holds a %zu-byte mark (expected 8): "
                    "the store is corrupt", v->mv_size);
    return fence__get_u64(v->mv_data);
}

/* Read the fence's mark inside txn (0 if absent). */
uint64_t fence__store_db_mark_get(fence_store_db *db, MDB_txn *txn,
                                  const char *fence, size_t len)
{
    MDB_val k = {len, (void *)fence}, v;
    int rc = mdb_get(txn, db->fences, &k, &v);
    if (rc == MDB_NOTFOUND)
        return 0;
    if (rc != 0)
        FENCE_STORE_FATAL("LMDB read of a fence mark: %s", mdb_strerror(rc));
    return mark_decode(&v);
}

/* A deleted key's fence inside txn ("owners"): 0 and the name in *owner
 * when bound, MDB_NOTFOUND when not. */
int fence__store_db_owner_get(fence_store_db *db, MDB_txn *txn,
                              const char *key, size_t key_len, MDB_val *owner)
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
int fence__store_db_record_get(fence_store_db *db, MDB_txn *txn,
                               const char *key, size_t key_len,
                               MDB_val *owner, MDB_val *value)
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
int fence__store_db_effect(fence_store_db *db, uint8_t op, uint8_t dbi,
                           const void *key, size_t key_len,
                           const void *value, size_t value_len)
{
    return fence__store_walbuf_op(&db->rec, op, dbi, key, key_len, value,
                                  value_len) == 0 ? 0 : ENOMEM;
}

/* Put key's record (owner, value) in "data" (and in the WAL record); 0 or
 * an LMDB error. */
int fence__store_db_record_put(fence_store_db *db, MDB_txn *txn,
                               const char *key, size_t key_len,
                               const char *owner, size_t owner_len,
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
    return fence__store_db_effect(db, FENCE_STORE_WALOP_PUT, FENCE_STORE_WALDB_DATA, key,
                  key_len, p, v.mv_size);
}
