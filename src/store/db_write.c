/* fence-store's LMDB layer: writes (see db.h and db_int.h).  The rule,
 * checked before anything is put: a token below the fence's mark is
 * stale, a key bound to another fence is refused; then the mark rises and
 * the write applies, alone or in a batch (one WAL record, one sync). */
#include "store/db_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/assert.h"
#include "base/bytes.h"
#include "base/limits.h"
#include "base/num.h"

/* A write or commit failed (the batch's writes are gone): a full map or
 * a full file system is reported and logged in words an operator acts on;
 * anything else stops the process (fence__store_db_full_kind).  Either way LMDB wrote no
 * meta page for what failed (it writes it last, in place), so the store is
 * as it was before the batch. */
static fence_store_result write_failed(fence_store_db *db, int rc,
                                       const char *what)
{
    fence_store_result kind = fence__store_db_full_kind(db, rc, what);
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
    uint64_t high = fence__store_db_mark_get(db, txn, c->fence, c->fence_len);
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
        have = fence__store_db_record_get(db, txn, c->key, c->key_len, &own, &cur) == 0;
        if (!have && fence__store_db_owner_get(db, txn, c->key, c->key_len, &own) != 0)
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
            (rc = fence__store_db_effect(db, FENCE_STORE_WALOP_PUT, FENCE_STORE_WALDB_FENCES,
                         c->fence, c->fence_len, buf, 8)) != 0)
            return rc;
        high = c->token;
    }
    out->high = high;
    switch (c->op) {
    case FENCE_STORE_OP_FSET:
        *what = "put of a value";
        if ((rc = fence__store_db_record_put(db, txn, c->key, c->key_len, owner, owner_len,
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
            (rc = fence__store_db_effect(db, FENCE_STORE_WALOP_DEL, FENCE_STORE_WALDB_DATA,
                         c->key, c->key_len, NULL, 0)) != 0)
            return rc;
        if (owner_len > 0) { /* the binding outlives the key */
            MDB_val ov = {owner_len, owner};
            *what = "binding of a deleted key to its fence";
            if ((rc = mdb_put(txn, db->owners, &k, &ov, 0)) != 0 ||
                (rc = fence__store_db_effect(db, FENCE_STORE_WALOP_PUT,
                             FENCE_STORE_WALDB_OWNERS, c->key, c->key_len,
                             owner, owner_len)) != 0)
                return rc;
        }
        break;
    case FENCE_STORE_OP_FINCR:
        *what = "put of a counter";
        if ((rc = fence__store_db_record_put(db, txn, c->key, c->key_len, owner, owner_len,
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
    if (!fence__store_db_unblocked(db))
        return refuse_blocked(db, out);
    fence__store_db_txn_open(db);
    fence__store_walbuf_reset(&db->rec);
    int rc;
    fence_store_result res;
    const char *what;
    if ((rc = apply(db, db->open, c, out, &res, &what)) != 0) {
        counters_settle(db, false);
        fence__store_db_lose_batch(db);
        return write_failed(db, rc, what);
    }
    if (res != FENCE_STORE_OK) { /* a refusal changed nothing */
        counters_settle(db, true);
        return res;
    }
    rc = fence__store_db_commit_durable(db);
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
    if (!fence__store_db_unblocked(db))
        return refuse_blocked(db, out);
    fence__store_db_txn_open(db);
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
    fence__store_db_lose_batch(db);
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
    int rc = fence__store_db_commit_durable(db); /* one fdatasync for the batch */
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
