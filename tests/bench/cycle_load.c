/* The event-loop client of `make bench`'s fenced-vs-Redis row
 * (tests/bench/run.py): CONNS connections each cycle a lock of its own
 * (acquire with a fencing token, then release), driven by one thread, the
 * same way against fenced and against Redis, so the two servers are
 * compared through one client of the same cost.
 *
 *   cycle_load PORT CONNS SECONDS fenced|redis [TTL_MS]
 *
 * fenced (each connection i, a lock of its own):
 *   ACQUIRE cycle_load.<pid>.<i> TTL_MS          -> [token, lease]
 *   UNLOCK cycle_load.<pid>.<i> <token>          -> :1
 * redis (a lock with a fencing token the usual way in Redis: two Lua
 * scripts, loaded once with SCRIPT LOAD and run with EVALSHA):
 *   acquire: SET key owner NX PX ttl, and if it was set INCR the shared
 *            token counter and return it           -> :token (nil if held)
 *   release: DEL key if it still holds owner       -> :1
 * Each is one durable write in both (Redis: run with appendfsync always).
 * One request at a time per connection; one write(2) per request.
 *
 * Prints one line on stdout (latencies in microseconds, src/fencectl/hist.c,
 * acquire send to reply):
 *   cycles=.. seconds=.. cycles_per_s=.. p50_us=.. p99_us=.. max_us=..
 *   min_cycles=.. max_cycles=.. errors=.. client_cpu_s=..
 * client_cpu_s is this process's user+system CPU time: what the load
 * generator took of the shared cores.  Exit 1 on a connection failure. */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#include "fencectl/hist.h"
#include "loadgen.h"

/* One connection. */
typedef struct conn {
    int fd;               /* socket */
    redisReader *reader;  /* RESP reply parser */
    char name[48];        /* its lock (fenced) or key (Redis) */
    bool acquiring;       /* the request owed is an acquire (else release) */
    bool busy;            /* a request is owed */
    uint64_t sent_us;     /* when it was sent */
    uint64_t cycles;      /* acquire+release cycles completed in time */
} conn;

static const char ACQUIRE_LUA[] =
    "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then "
    "return redis.call('INCR', KEYS[2]) end return false";
static const char RELEASE_LUA[] =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end "
    "return 0";

static bool redis_mode;       /* the peer: Redis with the two scripts */
static char acq_sha[48];      /* SCRIPT LOAD of ACQUIRE_LUA */
static char rel_sha[48];      /* SCRIPT LOAD of RELEASE_LUA */
static char counter[48];      /* Redis: the token counter's key */
static char owner[48];        /* Redis: the owner value of every lock */
static char ttl[16];          /* each acquire's TTL, ms */
static uint64_t stop_us;      /* no new cycle starts after this */
static uint64_t errors;       /* error or nil replies */
static fencectl_hist hist;    /* acquire latency */
static char first_error[160]; /* the first error reply, for stderr */

/* Send one request (a RESP array of argc words) on c, whole. */
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
    c->acquiring = true;
    if (redis_mode) {
        const char *argv[] = {"EVALSHA", acq_sha, "2", c->name, counter, owner, ttl};
        send_cmd(c, 7, argv);
        return;
    }
    const char *argv[] = {"ACQUIRE", c->name, ttl};
    send_cmd(c, 3, argv);
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
    if (!c->acquiring) { /* release */
        if (r->type != REDIS_REPLY_INTEGER || r->integer != 1)
            note_error(r);
        else if (c->sent_us <= stop_us)
            c->cycles++;
        acquire(c);
        return;
    }
    long long token;
    if (redis_mode && r->type == REDIS_REPLY_INTEGER) {
        token = r->integer;
    } else if (!redis_mode && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
               r->element[0]->type == REDIS_REPLY_INTEGER) {
        token = r->element[0]->integer;
    } else {
        note_error(r); /* held (nil) or refused: try again */
        acquire(c);
        return;
    }
    if (t <= stop_us)
        fencectl_hist_add(&hist, t - c->sent_us);
    c->acquiring = false;
    if (redis_mode) {
        const char *argv[] = {"EVALSHA", rel_sha, "1", c->name, owner};
        send_cmd(c, 5, argv);
        return;
    }
    char tok[24];
    snprintf(tok, sizeof(tok), "%lld", token);
    const char *argv[] = {"UNLOCK", c->name, tok};
    send_cmd(c, 3, argv);
}

/* SCRIPT LOAD src on a blocking connection: its SHA1 into sha. */
static void script_load(int port, const char *src, char *sha, size_t cap)
{
    redisContext *rc = redisConnect("127.0.0.1", port);
    if (rc == NULL || rc->err)
        loadgen_die("connect (SCRIPT LOAD)");
    redisReply *r = redisCommand(rc, "SCRIPT LOAD %s", src);
    if (r == NULL || r->type != REDIS_REPLY_STRING || r->len + 1 > cap) {
        errno = 0;
        loadgen_die("SCRIPT LOAD");
    }
    memcpy(sha, r->str, r->len + 1);
    freeReplyObject(r);
    redisFree(rc);
}

int main(int argc, char **argv)
{
    loadgen_prog = "cycle_load";
    if (argc < 5 || argc > 6) {
        fprintf(stderr, "usage: cycle_load PORT CONNS SECONDS fenced|redis [TTL_MS]\n");
        return 2;
    }
    int port = atoi(argv[1]);
    uint32_t n = (uint32_t)strtoul(argv[2], NULL, 10);
    double secs = atof(argv[3]);
    redis_mode = strcmp(argv[4], "redis") == 0;
    uint32_t ttl_ms = argc == 6 ? (uint32_t)strtoul(argv[5], NULL, 10) : 10000;
    if (port <= 0 || port > 65535 || n == 0 || n > 10000 || secs <= 0 || ttl_ms < 10 ||
        (!redis_mode && strcmp(argv[4], "fenced") != 0)) {
        fprintf(stderr, "cycle_load: bad arguments\n");
        return 2;
    }
    snprintf(ttl, sizeof(ttl), "%u", ttl_ms);
    long pid = (long)getpid();
    snprintf(counter, sizeof(counter), "cycle_load.%ld.token", pid);
    snprintf(owner, sizeof(owner), "owner.%ld", pid);
    if (redis_mode) {
        script_load(port, ACQUIRE_LUA, acq_sha, sizeof(acq_sha));
        script_load(port, RELEASE_LUA, rel_sha, sizeof(rel_sha));
    }
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
        snprintf(c->name, sizeof(c->name), "cycle_load.%ld.%u", pid, i);
        c->fd = loadgen_connect(port, epfd, c);
    }
    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    uint64_t start = loadgen_now_us();
    stop_us = start + (uint64_t)(secs * 1e6);
    for (uint32_t i = 0; i < n; i++)
        acquire(&conns[i]);
    struct epoll_event evs[256];
    /* After the time is up no cycle starts; the ones under way finish
     * (or a TTL more, then give up). */
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
    getrusage(RUSAGE_SELF, &ru1);
    double cpu = (double)(ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec) +
                 (double)(ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) +
                 ((double)(ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec) +
                  (double)(ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec)) / 1e6;
    uint64_t cycles = 0, lo = UINT64_MAX, hi = 0;
    for (uint32_t i = 0; i < n; i++) {
        cycles += conns[i].cycles;
        lo = conns[i].cycles < lo ? conns[i].cycles : lo;
        hi = conns[i].cycles > hi ? conns[i].cycles : hi;
    }
    printf("cycles=%" PRIu64 " seconds=%.3f cycles_per_s=%.1f p50_us=%" PRIu64
           " p99_us=%" PRIu64 " max_us=%" PRIu64 " min_cycles=%" PRIu64
           " max_cycles=%" PRIu64 " errors=%" PRIu64 " client_cpu_s=%.3f\n",
           cycles, secs, (double)cycles / secs, fencectl_hist_quantile(&hist, 0.50),
           fencectl_hist_quantile(&hist, 0.99), hist.max, lo, hi, errors, cpu);
    if (errors > 0)
        fprintf(stderr, "cycle_load: %" PRIu64 " error replies, the first: %s\n", errors,
                first_error);
    for (uint32_t i = 0; i < n; i++) {
        redisReaderFree(conns[i].reader);
        close(conns[i].fd);
    }
    free(conns);
    close(epfd);
    return 0;
}
