/* The pieces `make bench`'s event-loop load generators share
 * (keepalive_load.c, handoff_load.c, cycle_load.c): one thread, epoll,
 * non-blocking sockets to 127.0.0.1, replies parsed with hiredis's reader;
 * and the acquire/release cycle driver of handoff_load and cycle_load. */
#ifndef FENCE_TESTS_BENCH_LOADGEN_H
#define FENCE_TESTS_BENCH_LOADGEN_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fencectl/hist.h"

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

/* ---- the cycle driver: CONNS connections, one request owed on each ---- */

/* One connection of a cycle driver. */
typedef struct loadgen_conn {
    int fd;              /* socket */
    redisReader *reader; /* RESP reply parser */
    bool acquiring;      /* the request owed acquires (else it releases) */
    bool busy;           /* a request is owed */
    uint64_t sent_us;    /* when it was sent */
    uint64_t cycles;     /* acquire+release cycles completed in time */
    char name[64];       /* the connection's own lock name, if it has one */
} loadgen_conn;

/* A cycle driver's state: the program's callbacks start a connection's
 * cycle (start) and take each reply (on_reply, loadgen_drain's callback
 * with the loadgen_conn as ctx). */
typedef struct loadgen_cycles {
    loadgen_conn *conns;    /* n connections */
    uint32_t n;
    int epfd;               /* their epoll set */
    uint64_t stop_us;       /* no new cycle starts after this */
    uint64_t errors;        /* error or nil replies */
    fencectl_hist hist;     /* acquire latency */
    char first_error[160];  /* the first error reply, for stderr */
} loadgen_cycles;

/* n connections to 127.0.0.1:port in g (dies on failure). */
void loadgen_cycles_open(loadgen_cycles *g, int port, uint32_t n);

/* Send one request (a RESP array of argc words) on c, whole: a request is
 * far smaller than a socket buffer that holds nothing else; c is then
 * owed a reply from now. */
void loadgen_send(loadgen_conn *c, int argc, const char **argv);

/* Count an error (or nil) reply r; keep the first one's text. */
void loadgen_note_error(loadgen_cycles *g, const redisReply *r);

/* Start every connection's first cycle, then drive the replies for secs
 * seconds; after that no cycle starts (start must check g->stop_us), the
 * ones under way finish, or after grace_us more the run gives up. */
void loadgen_cycles_run(loadgen_cycles *g, double secs, uint64_t grace_us,
                        void (*start)(loadgen_conn *c),
                        void (*on_reply)(void *ctx, redisReply *r));

/* Print the result line on stdout ("cycles=.. seconds=.. cycles_per_s=..
 * p50_us=.. p99_us=.. max_us=.. min_cycles=.. max_cycles=.. errors=.."
 * then extra, which is "" or starts with a space), the first error on
 * stderr, and close every connection. */
void loadgen_cycles_finish(loadgen_cycles *g, double secs, const char *extra);

#endif /* FENCE_TESTS_BENCH_LOADGEN_H */
