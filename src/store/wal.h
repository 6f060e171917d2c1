/* fence-store's write-ahead log files (record codec: walrec.h).
 *
 * Two files in the data directory, wal.0 and wal.1, each created once at
 * a fixed size, zero-filled (every block written, so that no fdatasync
 * ever has to commit a file size or an extent conversion), and reused.
 * Each starts with a FENCE_STORE_WAL_HDR-byte header (magic, version,
 * file size, CRC); records follow from there.  Batches are appended to the
 * current file, one pwrite and one fdatasync each.  When a batch does not
 * fit, the log moves to the other file, once every record of that file is
 * durable in LMDB (its LSN at most the durable LSN, raised by a
 * checkpoint); the records left behind in a reused file have lower LSNs
 * than the ones written over them, which is how a scan tells them apart.
 *
 * Single-threaded: every call runs on the thread that opened the log. */
#ifndef FENCE_STORE_WAL_H
#define FENCE_STORE_WAL_H

#include <stddef.h>
#include <stdint.h>

/* Header bytes at the start of each file. */
#define FENCE_STORE_WAL_HDR 4096

/* An open log (opaque). */
typedef struct fence_store_wal fence_store_wal;

/* Counters for INFO. */
typedef struct fence_store_wal_stats {
    uint64_t file_size;   /* bytes per file */
    uint64_t bytes;       /* record bytes written since start */
    uint64_t syncs;       /* fdatasyncs of a record since start */
    uint64_t switches;    /* moves to the other file since start */
} fence_store_wal_stats;

/* Open the log in dir, creating the files when missing with want bytes
 * each (less when the file system is small: an eighth of its free space,
 * or under a file-size limit: a quarter of it; at least
 * FENCE_STORE_WAL_FILE_MIN).  0, or -1 with a message in err. */
int fence__store_wal_open(const char *dir, uint64_t want,
                          fence_store_wal **out, char *err, size_t errcap);

/* Close; NULL is a no-op. */
void fence__store_wal_close(fence_store_wal *w);

/* Called once per record of the replay, in LSN order; 0 to go on, or -1
 * (the replay stops and fence__store_wal_replay fails; msg in err). */
typedef int (*fence_store_wal_apply_fn)(void *ctx, uint64_t lsn,
                                        const uint8_t *payload, size_t len,
                                        uint32_t nops, char *err,
                                        size_t errcap);

/* Recovery: hand every record with an LSN above after to fn, in LSN order,
 * stopping at the first torn or bad record or break in the sequence (the
 * end of the log).  Fails (-1, msg in err) when a bad record is followed
 * by a valid one with a higher LSN than any applied (corruption in the
 * middle of the log), or when the log's records above after do not start
 * at after + 1 (records missing).  0 with the last LSN in *last (after
 * when nothing was replayed) and the count in *n.  Afterwards both files
 * count as free: the caller makes LMDB durable before any append. */
int fence__store_wal_replay(fence_store_wal *w, uint64_t after,
                            fence_store_wal_apply_fn fn, void *ctx,
                            uint64_t *last, uint64_t *n, char *err,
                            size_t errcap);

/* Bytes a record may take at most (it must fit an empty file). */
uint64_t fence__store_wal_record_max(const fence_store_wal *w);

/* What fence__store_wal_append did. */
typedef enum fence_store_wal_put {
    FENCE_STORE_WAL_WRITTEN,  /* written and fdatasynced */
    FENCE_STORE_WAL_SWITCHED, /* written to the other file (now current)
                               * and fdatasynced: the file left needs a
                               * checkpoint */
    FENCE_STORE_WAL_BLOCKED,  /* does not fit, and the other file still
                               * holds records LMDB has not made durable:
                               * nothing written */
} fence_store_wal_put;

/* Append the record rec[0..len) (at most fence__store_wal_record_max
 * bytes) with its lsn; a failed write or sync is fatal (log + abort). */
fence_store_wal_put fence__store_wal_append(fence_store_wal *w, uint64_t lsn,
                                            const uint8_t *rec, size_t len);

/* Every record up to lsn is durable in LMDB. */
void fence__store_wal_durable(fence_store_wal *w, uint64_t lsn);

/* Start over: every record in both files is durable in LMDB (after a
 * synchronous checkpoint); the next append goes to the start of the
 * current file. */
void fence__store_wal_reset(fence_store_wal *w);

/* Fill *st. */
void fence__store_wal_stats_get(const fence_store_wal *w,
                                fence_store_wal_stats *st);

#endif /* FENCE_STORE_WAL_H */
