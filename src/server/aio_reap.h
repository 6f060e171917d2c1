/* io_destroy off the event loop.
 *
 * libraft 0.15's uv backend gives every open log segment its own kernel AIO
 * context (src/uv_writer.c UvWriterInit: io_setup) and destroys it when the
 * segment is closed (UvWriterClose: io_destroy), in the loop thread.  Every
 * snapshot closes the open segment (src/uv_append.c UvBarrier), so once per
 * --snapshot-threshold entries the loop sits in io_destroy, which waits for
 * an RCU grace period: 28-39 ms measured on a loaded 2-vCPU VM (strace -T),
 * every grant and reply of that moment waiting with it (issue 14).
 *
 * libraft calls io_destroy through glibc's syscall(), so fenced's
 * executable defines syscall(): SYS_io_destroy is handed to a reaper
 * thread and answered 0 at once; every other number goes to glibc's
 * syscall() unchanged (dlsym RTLD_NEXT).  Deferring is safe: libraft only
 * destroys a context with no I/O in flight and never uses its id again,
 * and the kernel frees whatever is left when the process exits.  When the
 * reaper is not running (before fence__aio_reap_start, or if it could not
 * start, or its queue is full) io_destroy runs at once, as before. */
#ifndef FENCE_SERVER_AIO_REAP_H
#define FENCE_SERVER_AIO_REAP_H

#include <stdint.h>

/* Start the reaper thread.  Returns 0, or -1 (io_destroy then stays
 * synchronous; fenced works as before). */
int fence__aio_reap_start(void);

/* Wait until every io_destroy handed over so far has been done (tests). */
void fence__aio_reap_drain(void);

/* io_destroy calls handed to the reaper since start (tests, INFO). */
uint64_t fence__aio_reap_count(void);

#endif /* FENCE_SERVER_AIO_REAP_H */
