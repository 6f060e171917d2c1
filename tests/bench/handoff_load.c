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
#include <hiredis/hiredis.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "loadgen.h"

static char lock_name[64];   /* the one lock (or semaphore) */
static uint32_t sem_n;       /* 0: ACQUIRE/UNLOCK; else a semaphore of sem_n slots */
static uint32_t ttl_ms;      /* each ACQUIRE's TTL */
static loadgen_cycles g;     /* the connections, the histogram, the errors */

/* Start c's next cycle (unless the time is up). */
static void acquire(loadgen_conn *c)
{
    if (loadgen_now_us() >= g.stop_us)
        return;
    char ttl[16], wait[16];
    snprintf(ttl, sizeof(ttl), "%u", ttl_ms);
    snprintf(wait, sizeof(wait), "%u", ttl_ms / 2);
    c->acquiring = true;
    if (sem_n > 0) {
        char n[16];
        snprintf(n, sizeof(n), "%u", sem_n);
        const char *sv[] = {"SEM.ACQUIRE", lock_name, n, "TTL", ttl, "WAIT", wait};
        loadgen_send(c, 7, sv);
        return;
    }
    const char *argv[] = {"ACQUIRE", lock_name, ttl, "WAIT", wait};
    loadgen_send(c, 5, argv);
}

/* One reply on the connection ctx (loadgen_drain's callback). */
static void on_reply(void *ctx, redisReply *r)
{
    loadgen_conn *c = ctx;
    uint64_t t = loadgen_now_us();
    c->busy = false;
    if (!c->acquiring) { /* UNLOCK */
        if (r->type != REDIS_REPLY_INTEGER)
            loadgen_note_error(&g, r);
        else if (c->sent_us <= g.stop_us)
            c->cycles++;
        acquire(c);
        return;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != (sem_n > 0 ? 3u : 2u) ||
        r->element[0]->type != REDIS_REPLY_INTEGER ||
        r->element[1]->type != REDIS_REPLY_INTEGER) {
        loadgen_note_error(&g, r); /* timed out (nil) or refused: try again */
        acquire(c);
        return;
    }
    if (t <= g.stop_us)
        fencectl_hist_add(&g.hist, t - c->sent_us);
    char token[24];
    c->acquiring = false;
    if (sem_n > 0) {
        char slot[24];
        snprintf(slot, sizeof(slot), "%lld", r->element[0]->integer);
        snprintf(token, sizeof(token), "%lld", r->element[1]->integer);
        const char *sv[] = {"SEM.RELEASE", lock_name, slot, token};
        loadgen_send(c, 4, sv);
        return;
    }
    snprintf(token, sizeof(token), "%lld", r->element[0]->integer);
    const char *argv[] = {"UNLOCK", lock_name, token};
    loadgen_send(c, 3, argv);
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
    loadgen_cycles_open(&g, port, n);
    /* After the time is up no cycle starts, but a grant is still
     * released, so the queue drains: run until no request is owed (or a
     * WAIT's length more, then give up). */
    loadgen_cycles_run(&g, secs, (uint64_t)ttl_ms * 1000u, acquire, on_reply);
    loadgen_cycles_finish(&g, secs, "");
    return 0;
}
