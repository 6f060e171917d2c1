/* fence-store's checkpoints: what makes LMDB's durable state survive a
 * power cut although every batch commits with MDB_NOSYNC.
 *
 * MDB_NOSYNC alone is not enough: after a power cut the disk may hold the
 * newest meta page but not the pages it points to, or pages of the last
 * synced snapshot overwritten by later transactions that reused them
 * (lmdb.h: "a system crash can corrupt the database").  A checkpoint
 * therefore
 *   1. captures, on the loop thread right after a commit, a read
 *      transaction on that snapshot (the pin: LMDB reuses no page a live
 *      reader can see, so the snapshot's pages stay as they are) and a copy
 *      of the two meta pages (which later commits overwrite in place);
 *   2. syncs the data file (mdb_env_sync(env, 1), any thread) and then
 *      writes the meta copy and its LSN into <dir>/lmdb-meta.ckpt, in
 *      place, in the older of its two slots, and fdatasyncs it (the file
 *      is created once at full size: no new block is needed, so a full
 *      disk does not stop checkpoints, and a torn write spoils one slot);
 *   3. is installed on the loop thread: the pin of the previous checkpoint
 *      is released, this one is kept until the next checkpoint is durable.
 * On every start the saved meta pages are written back into data.mdb
 * before LMDB opens it, so LMDB opens the checkpoint's snapshot (intact:
 * synced, and pinned while the server ran) and the WAL replays every
 * batch after it.  The same path serves a kill -9 and a power cut. */
#ifndef FENCE_STORE_CKPT_H
#define FENCE_STORE_CKPT_H

#include <lmdb.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One checkpoint from capture to release. */
typedef struct fence_store_ckpt {
    uint64_t lsn;     /* the LSN of the captured snapshot */
    uint64_t seq;     /* capture order (later captures are newer
                       * snapshots, also at an equal LSN) */
    MDB_txn *pin;     /* read transaction on it, or NULL */
    uint8_t *image;   /* lmdb-meta.ckpt's bytes (malloc) */
    size_t image_len; /* bytes in image */
} fence_store_ckpt;

/* Serializes the writes of lmdb-meta.ckpt and keeps them monotonic. */
typedef struct fence_store_ckpt_saver {
    pthread_mutex_t mu; /* held while the file is written */
    uint64_t saved;     /* seq of the last image saved, 0: none yet
                         * (under mu) */
    uint64_t gen;       /* generation of the newest image in the file */
    int fd;             /* the file, -1 until first used */
    size_t slot;        /* bytes per slot (one image) */
    char dir[1024];     /* the data directory */
} fence_store_ckpt_saver;

/* Initialize sv for dir. */
void fence__store_ckpt_saver_init(fence_store_ckpt_saver *sv, const char *dir);

/* Free sv's mutex. */
void fence__store_ckpt_saver_free(fence_store_ckpt_saver *sv);

/* Step 1, on the thread that commits, with no write transaction open and
 * the last commit's LSN lsn: pin and copy; seq numbers the captures from
 * 1 up.  0 or an LMDB/errno code (*c then holds nothing). */
int fence__store_ckpt_capture(MDB_env *env, uint64_t lsn, uint64_t seq,
                              fence_store_ckpt *c);

/* Step 2, any thread: sync LMDB, then save c's meta pages unless a newer
 * checkpoint is saved already.  0, or an LMDB/errno code. */
int fence__store_ckpt_persist(MDB_env *env, fence_store_ckpt_saver *sv,
                              fence_store_ckpt *c);

/* Release c's pin and memory (c may be empty). */
void fence__store_ckpt_release(fence_store_ckpt *c);

/* At start, before mdb_env_open, with the data directory locked: write
 * the saved meta pages back into <dir>/data.mdb (and sync it).  1 with the
 * checkpoint's LSN in *lsn; 0 when there is no saved checkpoint (nothing
 * done); -1 with a message (a damaged lmdb-meta.ckpt refuses the
 * start). */
int fence__store_ckpt_restore(fence_store_ckpt_saver *sv, uint64_t *lsn,
                              char *err, size_t errcap);

/* After a clean stop's checkpoint (LMDB fully synced, its meta pages on
 * disk the newest): clear lmdb-meta.ckpt in place, so that an older
 * fence-store run on the directory in between cannot leave it stale.  0
 * or an errno. */
int fence__store_ckpt_forget(fence_store_ckpt_saver *sv);

#endif /* FENCE_STORE_CKPT_H */
