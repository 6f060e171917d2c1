/* The event-loop client of the contended rows of `make bench`
 * (tests/bench/run.py): CONNS connections cycle ACQUIRE ... WAIT + UNLOCK
 * on ONE lock, driven by one thread.
 *
 *   handoff_load PORT CONNS SECONDS [TTL_MS [SEM_N]]
 *
 * One thread, epoll, non-blocking sockets to 127.0.0.1:PORT, replies parsed
 * with hiredis's reader, each connection with one request at a time:
 *   ACQUIRE handoff_load.<pid> TTL_MS WAIT TTL_MS/2  -> [token, lease]
 *   UNLOCK handoff_load.<pid> <token>                -> :1
 * and again.  With SEM_N, the connections cycle on a semaphore of SEM_N
 * slots instead (docs/protocol.md):
 *   SEM.ACQUIRE handoff_load.<pid> SEM_N TTL TTL_MS WAIT TTL_MS/2
 *                                                    -> [slot, token, lease]
 *   SEM.RELEASE handoff_load.<pid> <slot> <token>    -> :1
 * With CONNS > SEM_N, most grants are handoffs of a released slot.  With CONNS > 1 every grant but the first is a handoff to a
 * queued waiter.  It is the same protocol `fencectl bench --mode contended`
 * speaks through libfence, without libfence's blocking calls: a thread per
 * connection that sleeps in recv(2) is woken for each grant, and on two
 * shared cores those wake-ups (not the server's path) take a large part of
 * a handoff.  Run both: the difference is the client's.
 *
 * Prints one line on stdout (latencies in microseconds, src/fencectl/hist.c,
 * ACQUIRE send to reply):
 *   cycles=.. seconds=.. cycles_per_s=.. p50_us=.. p99_us=.. max_us=..
 *   min_cycles=.. max_cycles=.. errors=..
 * Exit 1 on a connection failure. */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "fencectl/hist.h"
#include "loadgen.h"

/* One connection. */
typedef struct conn {
    int fd;               /* socket */
    redisReader *reader;  /* RESP reply parser */
    bool acquiring;       /* the request owed is an ACQUIRE (else UNLOCK) */
    bool busy;            /* a request is owed */
    uint64_t sent_us;     /* when it was sent */
    uint64_t cycles;      /* ACQUIRE+UNLOCK cycles completed in time */
} conn;

static char lock_name[64];   /* the one lock (or semaphore) */
static uint32_t sem_n;       /* 0: ACQUIRE/UNLOCK; else a semaphore of sem_n slots */
static uint32_t ttl_ms;      /* each ACQUIRE's TTL */
static uint64_t stop_us;     /* no new cycle starts after this */
static uint64_t errors;      /* error or nil replies */
static fencectl_hist hist;   /* ACQUIRE latency */
static char first_error[160]; /* the first error reply, for stderr */

/* Send one request (a RESP array of argc words) on c, whole: a request is
 * far smaller than a socket buffer that holds nothing else. */
static void send_cmd(conn *c, int argc, const char **argv)
{
    char buf[512];
    size_t n = loadgen_encode(buf, sizeof(buf), argc, argv);
    size_t off = 0;
    while (off < n) {
        ssize_t k = write(c->fd, buf + off, n - off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            loadgen_die("write");
        off += (size_t)k;
    }
    c->busy = true;
    c->sent_us = loadgen_now_us();
}

/* Start c's next cycle (unless the time is up). */
static void acquire(conn *c)
{
    if (loadgen_now_us() >= stop_us)
        return;
    char ttl[16], wait[16];
    snprintf(ttl, sizeof(ttl), "%u", ttl_ms);
    snprintf(wait, sizeof(wait), "%u", ttl_ms / 2);
    c->acquiring = true;
    if (sem_n > 0) {
        char n[16];
        snprintf(n, sizeof(n), "%u", sem_n);
        const char *sv[] = {"SEM.ACQUIRE", lock_name, n, "TTL", ttl, "WAIT", wait};
        send_cmd(c, 7, sv);
        return;
    }
    const char *argv[] = {"ACQUIRE", lock_name, ttl, "WAIT", wait};
    send_cmd(c, 5, argv);
}

/* Remember an error reply. */
static void note_error(const redisReply *r)
{
    errors++;
    if (first_error[0] == '\0')
        snprintf(first_error, sizeof(first_error), "%.*s",
                 r->type == REDIS_REPLY_ERROR ? (int)(r->len < 150 ? r->len : 150) : 3,
                 r->type == REDIS_REPLY_ERROR ? r->str : "nil");
}

/* One reply on the connection ctx (loadgen_drain's callback). */
static void on_reply(void *ctx, redisReply *r)
{
    conn *c = ctx;
    uint64_t t = loadgen_now_us();
    c->busy = false;
    if (!c->acquiring) { /* UNLOCK */
        if (r->type != REDIS_REPLY_INTEGER)
            note_error(r);
        else if (c->sent_us <= stop_us)
            c->cycles++;
        acquire(c);
        return;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != (sem_n > 0 ? 3u : 2u) ||
        r->element[0]->type != REDIS_REPLY_INTEGER ||
        r->element[1]->type != REDIS_REPLY_INTEGER) {
        note_error(r); /* timed out (nil) or refused: try again */
        acquire(c);
        return;
    }
    if (t <= stop_us)
        fencectl_hist_add(&hist, t - c->sent_us);
    char token[24];
    c->acquiring = false;
    if (sem_n > 0) {
        char slot[24];
        snprintf(slot, sizeof(slot), "%lld", r->element[0]->integer);
        snprintf(token, sizeof(token), "%lld", r->element[1]->integer);
        const char *sv[] = {"SEM.RELEASE", lock_name, slot, token};
        send_cmd(c, 4, sv);
        return;
    }
    snprintf(token, sizeof(token), "%lld", r->element[0]->integer);
    const char *argv[] = {"UNLOCK", lock_name, token};
    send_cmd(c, 3, argv);
}

int main(int argc, char **argv)
{
    loadgen_prog = "handoff_load";
    if (argc < 4 || argc > 6) {
        fprintf(stderr, "usage: handoff_load PORT CONNS SECONDS [TTL_MS [SEM_N]]\n");
        return 2;
    }
    int port = atoi(argv[1]);
    uint32_t n = (uint32_t)strtoul(argv[2], NULL, 10);
    double secs = atof(argv[3]);
    ttl_ms = argc >= 5 ? (uint32_t)strtoul(argv[4], NULL, 10) : 10000;
    sem_n = argc == 6 ? (uint32_t)strtoul(argv[5], NULL, 10) : 0;
    if (port <= 0 || port > 65535 || n == 0 || n > 10000 || secs <= 0 || ttl_ms < 10 ||
        sem_n > 1024) {
        fprintf(stderr, "handoff_load: bad arguments\n");
        return 2;
    }
    snprintf(lock_name, sizeof(lock_name), "handoff_load.%ld", (long)getpid());
    fencectl_hist_init(&hist);
    int epfd = epoll_create1(0);
    if (epfd < 0)
        loadgen_die("epoll_create1");
    conn *conns = calloc(n, sizeof(*conns));
    if (conns == NULL)
        loadgen_die("out of memory");
    for (uint32_t i = 0; i < n; i++) {
        conn *c = &conns[i];
        c->reader = redisReaderCreate();
        if (c->reader == NULL)
            loadgen_die("out of memory");
        c->fd = loadgen_connect(port, epfd, c);
    }
    uint64_t start = loadgen_now_us();
    stop_us = start + (uint64_t)(secs * 1e6);
    for (uint32_t i = 0; i < n; i++)
        acquire(&conns[i]);
    struct epoll_event evs[256];
    /* After the time is up no cycle starts, but a grant is still
     * released, so the queue drains: run until no request is owed (or a
     * WAIT's length more, then give up). */
    uint64_t give_up = stop_us + (uint64_t)ttl_ms * 1000u;
    for (;;) {
        int k = epoll_wait(epfd, evs, 256, 100);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            loadgen_die("epoll_wait");
        for (int i = 0; i < k; i++) {
            conn *c = evs[i].data.ptr;
            loadgen_drain(c->fd, c->reader, on_reply, c);
        }
        uint64_t t = loadgen_now_us();
        if (t < stop_us)
            continue;
        bool owed = false;
        for (uint32_t i = 0; i < n && !owed; i++)
            owed = conns[i].busy;
        if (!owed || t >= give_up)
            break;
    }
    uint64_t cycles = 0, lo = UINT64_MAX, hi = 0;
    for (uint32_t i = 0; i < n; i++) {
        cycles += conns[i].cycles;
        lo = conns[i].cycles < lo ? conns[i].cycles : lo;
        hi = conns[i].cycles > hi ? conns[i].cycles : hi;
    }
    printf("cycles=%" PRIu64 " seconds=%.3f cycles_per_s=%.1f p50_us=%" PRIu64
           " p99_us=%" PRIu64 " max_us=%" PRIu64 " min_cycles=%" PRIu64
           " max_cycles=%" PRIu64 " errors=%" PRIu64 "\n",
           cycles, secs, (double)cycles / secs, fencectl_hist_quantile(&hist, 0.50),
           fencectl_hist_quantile(&hist, 0.99), hist.max, lo, hi, errors);
    if (errors > 0)
        fprintf(stderr, "handoff_load: %" PRIu64 " error replies, the first: %s\n", errors,
                first_error);
    for (uint32_t i = 0; i < n; i++) {
        redisReaderFree(conns[i].reader);
        close(conns[i].fd);
    }
    free(conns);
    close(epfd);
    return 0;
}
