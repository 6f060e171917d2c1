/* The pieces `make bench`'s event-loop load generators share
 * (keepalive_load.c, handoff_load.c): one thread, epoll, non-blocking
 * sockets to 127.0.0.1, replies parsed with hiredis's reader. */
#ifndef FENCE_TESTS_BENCH_LOADGEN_H
#define FENCE_TESTS_BENCH_LOADGEN_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

/* The program's name, for loadgen_die's messages (set it first). */
extern const char *loadgen_prog;

/* Monotonic microseconds. */
uint64_t loadgen_now_us(void);

/* Print "prog: what: strerror(errno)" ("failed" when errno is 0) and
 * exit 1. */
_Noreturn void loadgen_die(const char *what);

/* The RESP array of argv[0..argc) in buf (cap bytes, enough for it);
 * returns its length. */
size_t loadgen_encode(char *buf, size_t cap, int argc, const char **argv);

/* A TCP connection to 127.0.0.1:port (connected blocking, then made
 * non-blocking, TCP_NODELAY), registered with epfd for EPOLLIN with ptr;
 * returns the socket.  Dies on failure. */
int loadgen_connect(int port, int epfd, void *ptr);

/* Read what fd has (until it would block), feed it to reader and call
 * on_reply(ctx, reply) for every complete reply (freed afterwards).  Dies
 * when the server closes the connection or sends something unparsable. */
void loadgen_drain(int fd, redisReader *reader, void (*on_reply)(void *ctx, redisReply *r),
                   void *ctx);

#endif /* FENCE_TESTS_BENCH_LOADGEN_H */
