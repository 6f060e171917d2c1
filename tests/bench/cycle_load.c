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
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "loadgen.h"

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
static loadgen_cycles g;      /* the connections, the histogram, the errors */

/* Start c's next cycle (unless the time is up). */
static void acquire(loadgen_conn *c)
{
    if (loadgen_now_us() >= g.stop_us)
        return;
    c->acquiring = true;
    if (redis_mode) {
        const char *argv[] = {"EVALSHA", acq_sha, "2", c->name, counter, owner, ttl};
        loadgen_send(c, 7, argv);
        return;
    }
    const char *argv[] = {"ACQUIRE", c->name, ttl};
    loadgen_send(c, 3, argv);
}

/* One reply on the connection ctx (loadgen_drain's callback). */
static void on_reply(void *ctx, redisReply *r)
{
    loadgen_conn *c = ctx;
    uint64_t t = loadgen_now_us();
    c->busy = false;
    if (!c->acquiring) { /* release */
        if (r->type != REDIS_REPLY_INTEGER || r->integer != 1)
            loadgen_note_error(&g, r);
        else if (c->sent_us <= g.stop_us)
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
        loadgen_note_error(&g, r); /* held (nil) or refused: try again */
        acquire(c);
        return;
    }
    if (t <= g.stop_us)
        fencectl_hist_add(&g.hist, t - c->sent_us);
    c->acquiring = false;
    if (redis_mode) {
        const char *argv[] = {"EVALSHA", rel_sha, "1", c->name, owner};
        loadgen_send(c, 5, argv);
        return;
    }
    char tok[24];
    snprintf(tok, sizeof(tok), "%lld", token);
    const char *argv[] = {"UNLOCK", c->name, tok};
    loadgen_send(c, 3, argv);
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
    loadgen_cycles_open(&g, port, n);
    for (uint32_t i = 0; i < n; i++)
        snprintf(g.conns[i].name, sizeof(g.conns[i].name), "cycle_load.%ld.%u", pid, i);
    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    /* After the time is up no cycle starts; the ones under way finish
     * (or a TTL more, then give up). */
    loadgen_cycles_run(&g, secs, (uint64_t)ttl_ms * 1000u, acquire, on_reply);
    getrusage(RUSAGE_SELF, &ru1);
    double cpu = (double)(ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec) +
                 (double)(ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) +
                 ((double)(ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec) +
                  (double)(ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec)) / 1e6;
    char extra[48];
    snprintf(extra, sizeof(extra), " client_cpu_s=%.3f", cpu);
    loadgen_cycles_finish(&g, secs, extra);
    return 0;
}
