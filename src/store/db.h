/* fence-store's LMDB layer: data and high-water marks in one environment,
 * each write (check + mark + data) in one write transaction.
 *
 * A key belongs to one fence: the first FSET or FINCR of a key binds it to
 * that write's fence (LMDB database "owners": key -> fence name, written
 * in the same transaction as the value), and every later FSET, FINCR or
 * FDEL of the key through another fence is refused (FENCE_STORE_WRONGFENCE)
 * whatever its token, nothing written.  Without the rule a holder whose
 * token is stale for fence F could write F's keys through a fence G it
 * never used (any token is >= G's mark of 0).  The binding outlives FDEL
 * (a deleted key cannot be recreated through another fence).
 * --ignore-tokens turns this check off along with the token check.
 *
 * Disk full: LMDB's MDB_MAP_FULL (the map is full) and ENOSPC (the file
 * system is full) abort the transaction, nothing written, and are reported
 * (FENCE_STORE_FULL, FENCE_STORE_NOSPACE) and logged as such.  Any other
 * LMDB error is fatal (log + abort): mdb_txn_commit fsyncs, and after a
 * failed commit or write we cannot know what is on disk, so the process
 * stops instead of acknowledging anything more. */
#ifndef FENCE_STORE_DB_H
#define FENCE_STORE_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/limits.h"
#include "store/cmd.h"

/* An open store (opaque). */
typedef struct fence_store_db fence_store_db;

/* Outcome of fence__store_db_write. */
typedef enum fence_store_result {
    FENCE_STORE_OK,        /* committed (fsynced); see out fields */
    FENCE_STORE_STALE,     /* token < mark: nothing written; high = the mark */
    FENCE_STORE_FULL,      /* LMDB map full: nothing written */
    FENCE_STORE_NOSPACE,   /* file system full (ENOSPC): nothing written */
    FENCE_STORE_WRONGFENCE, /* key bound to another fence: nothing written;
                             * owner = that fence */
    FENCE_STORE_NOTINT,    /* FINCR on a value that is not an int64 */
    FENCE_STORE_OVERFLOW,  /* FINCR would overflow int64 */
} fence_store_result;

/* What a write returns to the client. */
typedef struct fence_store_write_out {
    uint64_t
        high; /* FENCE_STORE_STALE: the mark; FENCE_STORE_OK: the mark after */
    int64_t number;  /* FDEL: keys removed (0/1); FINCR: new value */
    char owner[FENCE_NAME_MAX]; /* FENCE_STORE_WRONGFENCE: the key's fence */
    size_t owner_len;           /* bytes in owner */
} fence_store_write_out;

/* Counters for INFO. */
typedef struct fence_store_db_stats {
    uint64_t keys;           /* keys stored */
    uint64_t fences;         /* fences with a mark */
    uint64_t admitted;       /* tokens admitted since start */
    uint64_t rejected_stale; /* tokens rejected since start */
    uint64_t rejected_wrongfence; /* writes refused: key of another fence */
    uint64_t map_size;       /* configured map size */
    uint64_t map_used;       /* bytes of the map in use (pages * psize) */
} fence_store_db_stats;

/* Open (creating) the store in dir (created if missing) with the given map
 * size.  ignore_tokens turns enforcement off (control mode).  Returns 0, or
 * -1 with a message in err. */
int fence__store_db_open(const char *dir, uint64_t map_size, bool ignore_tokens,
                  fence_store_db **out, char *err, size_t errcap);

/* Close the store.  NULL is a no-op. */
void fence__store_db_close(fence_store_db *db);

/* Run a write command (FSET, FDEL, FINCR, FENCE.ADMIT): check the token
 * against the fence's mark, raise the mark, apply the write, commit, all in
 * one LMDB write transaction. */
fence_store_result fence__store_db_write(fence_store_db *db,
                                         const fence_store_cmd *c,
                                         fence_store_write_out *out);

/* Look up key; calls fn(ctx, value, len) with the value (valid only during
 * the call) or fn(ctx, NULL, 0) if missing. */
void fence__store_db_get(fence_store_db *db, const char *key, size_t len,
                  void (*fn)(void *ctx, const char *p, size_t n), void *ctx);

/* The fence's mark (0 if never admitted). */
uint64_t fence__store_db_high(fence_store_db *db, const char *fence,
                              size_t len);

/* Fill *st. */
void fence__store_db_stats_get(fence_store_db *db, fence_store_db_stats *st);

#endif /* FENCE_STORE_DB_H */
