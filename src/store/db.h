/* fence-store's LMDB layer: data and high-water marks in one environment,
 * each write (check + mark + data) in one write transaction.
 *
 * LMDB errors other than MDB_MAP_FULL are fatal (log + abort): mdb_txn_commit
 * fsyncs, and after a failed commit or write we cannot know what is on disk,
 * so the process stops instead of acknowledging anything more. */
#ifndef FENCE_STORE_DB_H
#define FENCE_STORE_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/cmd.h"

/* An open store (opaque). */
typedef struct store_db store_db;

/* Outcome of store_db_write. */
typedef enum store_result {
    STORE_OK,        /* committed (fsynced); see out fields */
    STORE_STALE,     /* token < mark: nothing written; high = the mark */
    STORE_FULL,      /* LMDB map full: nothing written */
    STORE_NOTINT,    /* FINCR on a value that is not an int64 */
    STORE_OVERFLOW,  /* FINCR would overflow int64 */
} store_result;

/* What a write returns to the client. */
typedef struct store_write_out {
    uint64_t high;   /* STORE_STALE: the mark; STORE_OK: the mark after */
    int64_t number;  /* FDEL: keys removed (0/1); FINCR: new value */
} store_write_out;

/* Counters for INFO. */
typedef struct store_db_stats {
    uint64_t keys;           /* keys stored */
    uint64_t fences;         /* fences with a mark */
    uint64_t admitted;       /* tokens admitted since start */
    uint64_t rejected_stale; /* tokens rejected since start */
    uint64_t map_size;       /* configured map size */
    uint64_t map_used;       /* bytes of the map in use (pages * psize) */
} store_db_stats;

/* Open (creating) the store in dir (created if missing) with the given map
 * size.  ignore_tokens turns enforcement off (control mode).  Returns 0, or
 * -1 with a message in err. */
int store_db_open(const char *dir, uint64_t map_size, bool ignore_tokens,
                  store_db **out, char *err, size_t errcap);

/* Close the store.  NULL is a no-op. */
void store_db_close(store_db *db);

/* Run a write command (FSET, FDEL, FINCR, FENCE.ADMIT): check the token
 * against the fence's mark, raise the mark, apply the write, commit, all in
 * one LMDB write transaction. */
store_result store_db_write(store_db *db, const store_cmd *c,
                            store_write_out *out);

/* Look up key; calls fn(ctx, value, len) with the value (valid only during
 * the call) or fn(ctx, NULL, 0) if missing. */
void store_db_get(store_db *db, const char *key, size_t len,
                  void (*fn)(void *ctx, const char *p, size_t n), void *ctx);

/* The fence's mark (0 if never admitted). */
uint64_t store_db_high(store_db *db, const char *fence, size_t len);

/* Fill *st. */
void store_db_stats_get(store_db *db, store_db_stats *st);

#endif /* FENCE_STORE_DB_H */
