/* Log segments written out with zeros when libraft creates them.
 *
 * libraft 0.15's uv backend creates each open segment (src/uv_fs.c
 * UvFsAllocateFile, in the thread pool) with posix_fallocate, which on
 * ext4 leaves unwritten extents, then writes the log into it with
 * O_DIRECT|O_DSYNC through kernel AIO with RWF_NOWAIT.  An append that
 * reaches a block never written before fails that way with EAGAIN
 * (converting an unwritten extent may block), and libraft does it again
 * in the thread pool (src/uv_writer.c uvWriterPollCb): a loop turn, a hop
 * to a pool thread and back, and a journal commit for the conversion.
 * With entries of a few KB that was every other append at 64 clients
 * (101 EAGAINs in 180 appends, strace; fsync_probe: 337 us p50 for a write
 * into a fresh block against 165 us for a rewrite, the same minute).
 *
 * So fenced's executable defines posix_fallocate: after glibc's own, a
 * file named open-* (libraft's open segments, and nothing else fenced
 * allocates) is written with zeros through a second descriptor without
 * O_DSYNC and fdatasync'ed once (8 MB: about 25 ms here, in the pool
 * thread that prepares segments ahead of the writer).  Zeros read the same
 * as unwritten extents, so libraft's recovery sees the same file; every
 * append is then a rewrite of a written block, which RWF_NOWAIT takes.  If
 * any step fails the file is left as glibc made it (and libraft works as
 * before); the answer is glibc's. */
#ifndef FENCE_SERVER_SEG_FILL_H
#define FENCE_SERVER_SEG_FILL_H

#include <stdint.h>

/* Segments written with zeros since start (tests, INFO). */
uint64_t fence__seg_fill_count(void);

#endif /* FENCE_SERVER_SEG_FILL_H */
