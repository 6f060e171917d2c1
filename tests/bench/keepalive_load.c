/* The keepalive row of `make bench` (tests/bench/run.py): many leases kept
 * alive by many connections, and the latency of a LOCK meanwhile.
 *
 *   keepalive_load PORT LEASES CONNS TTL_MS SECONDS
 *
 * One thread for the load, epoll, non-blocking sockets to 127.0.0.1:PORT,
 * replies parsed with hiredis's reader; the probe in a thread of its own
 * (a blocking hiredis connection), so that its latency is the server's
 * and not the load thread's turn around 1,000 sockets.  In order:
 *   1. idle: the probe runs LOCK/UNLOCK cycles on a lock of its own (its
 *      lease: one LEASE.GRANT with a long TTL) for SECONDS, alone;
 *   2. grant: CONNS connections pipeline LEASE.GRANT TTL_MS, LEASES in all
 *      (lease i on connection i % CONNS);
 *   3. load: every lease is renewed (LEASE.KEEPALIVE) once every TTL_MS/3,
 *      the renewals spread evenly over that period (open loop: sent when
 *      due, whether or not earlier ones were answered), for SECONDS, while
 *      the probe runs its cycles again.
 * Prints one "key=value ..." line per phase on stdout (latencies in
 * microseconds, from src/fencectl/hist.c's histogram, send to reply):
 *   idle lock_cycles=.. lock_p50_us=.. lock_p99_us=.. lock_max_us=..
 *   grant leases=.. seconds=.. grants_per_s=..
 *   load target_per_s=.. keepalives=.. keepalives_per_s=.. ka_p50_us=.. ...
 *        lock_cycles=.. lock_p50_us=.. ... raft_entries=.. raft_entries_per_s=..
 *        logged_cmds=.. renewals_local=.. errors=.. skipped=..
 *   (raft_entries, logged_cmds (INFO batch_commands: commands written into
 *   those entries), renewals_local: INFO's counters over the load phase,
 *   read on a connection of their own; entries include the probe's)
 * Exit 1 on a connection failure or an error reply to a grant. */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "fencectl/hist.h"
#include "base/assert.h"
#include "loadgen.h"

/* Most replies a connection may owe before renewals due on it are skipped
 * (counted in skipped=): bounds the send-time ring. */
#define OWED_MAX 4096

/* What a sent request was, to file its reply. */
typedef enum req_kind {
    REQ_GRANT,      /* LEASE.GRANT of a load lease */
    REQ_KEEPALIVE,  /* LEASE.KEEPALIVE of a load lease */
} req_kind;

/* One connection. */
typedef struct conn {
    int fd;                    /* socket */
    redisReader *reader;       /* RESP reply parser */
    char *wbuf;                /* bytes not yet written */
    size_t wlen;               /* bytes in wbuf */
    size_t wcap;               /* wbuf's size */
    bool want_out;             /* EPOLLOUT armed */
    uint64_t sent_us[OWED_MAX]; /* send time of each owed reply (ring) */
    uint8_t kind[OWED_MAX];    /* req_kind of each owed reply (ring) */
    uint32_t head;             /* oldest owed reply in the ring */
    uint32_t owed;             /* replies owed */
    uint64_t *leases;          /* lease ids granted on this connection */
    uint32_t n_leases;         /* entries in leases */
} conn;

static int epfd;              /* the epoll instance */
static conn *conns;           /* CONNS load connections */
static uint32_t n_conns;      /* load connections */
static int probe_port;        /* the server's port, for the probe thread */
static redisContext *probe_rc; /* the probe's connection (blocking) */
static uint64_t probe_lease;  /* the probe's lease */
static atomic_bool probe_stop; /* the probe thread ends after its cycle */
static pthread_t probe_thread; /* the probe thread of the phase */
/* Written by the probe thread only, read after it is joined: */
static uint64_t probe_cycles; /* LOCK+UNLOCK cycles completed */
static uint64_t probe_errors; /* its error or unexpected replies */
static fencectl_hist probe_hist; /* LOCK latency */
static fencectl_hist ka_hist; /* LEASE.KEEPALIVE latency */
static uint64_t ka_answered;  /* keepalive replies received */
static uint64_t ka_answered_in_time; /* of them, before the load phase ended */
static uint64_t load_end_us;  /* end of the load phase */
static uint64_t errors;       /* error replies (keepalives, probe) */
static uint64_t grants_left;  /* grant replies still owed */
static char first_error[160]; /* the first error reply, for stderr */


/* Arm or disarm EPOLLOUT on c to match whether it has bytes to write. */
static void set_out(conn *c, bool on)
{
    if (c->want_out == on)
        return;
    struct epoll_event ev = {.events = EPOLLIN | (on ? EPOLLOUT : 0u), .data.ptr = c};
    if (epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev) != 0)
        loadgen_die("epoll_ctl");
    c->want_out = on;
}

/* Write as much of c's buffer as the socket takes. */
static void flush(conn *c)
{
    size_t off = 0;
    while (off < c->wlen) {
        ssize_t k = write(c->fd, c->wbuf + off, c->wlen - off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (k <= 0)
            loadgen_die("write");
        off += (size_t)k;
    }
    memmove(c->wbuf, c->wbuf + off, c->wlen - off);
    c->wlen -= off;
    set_out(c, c->wlen > 0);
}

/* Queue one request (a RESP array of argc words) on c; false if c owes
 * OWED_MAX replies already. */
static bool send_cmd(conn *c, req_kind kind, int argc, const char **argv)
{
    if (c->owed == OWED_MAX)
        return false;
    char tmp[512];
    size_t n = loadgen_encode(tmp, sizeof(tmp), argc, argv);
    if (c->wlen + n > c->wcap) {
        size_t cap = c->wcap ? c->wcap * 2 : 4096;
        while (cap < c->wlen + n)
            cap *= 2;
        char *p = realloc(c->wbuf, cap);
        if (p == NULL)
            loadgen_die("out of memory");
        c->wbuf = p;
        c->wcap = cap;
    }
    memcpy(c->wbuf + c->wlen, tmp, n);
    c->wlen += n;
    uint32_t slot = (c->head + c->owed) % OWED_MAX;
    c->sent_us[slot] = loadgen_now_us();
    c->kind[slot] = (uint8_t)kind;
    c->owed++;
    return true;
}

/* Remember the first error reply. */
static void note_error(const redisReply *r)
{
    errors++;
    if (first_error[0] == '\0')
        snprintf(first_error, sizeof(first_error), "%.*s",
                 (int)(r->len < 150 ? r->len : 150), r->str);
}

/* File one reply of the connection ctx (its oldest owed request's);
 * loadgen_drain's callback. */
static void on_reply(void *ctx, redisReply *r)
{
    conn *c = ctx;
    FENCE_ASSERT(c->owed > 0);
    uint64_t lat = loadgen_now_us() - c->sent_us[c->head];
    req_kind kind = (req_kind)c->kind[c->head];
    c->head = (c->head + 1) % OWED_MAX;
    c->owed--;
    bool err = r->type == REDIS_REPLY_ERROR;
    switch (kind) {
    case REQ_GRANT:
        if (err || r->type != REDIS_REPLY_INTEGER) {
            fprintf(stderr, "keepalive_load: LEASE.GRANT: %s\n", err ? r->str : "not an integer");
            exit(1);
        }
        c->leases[c->n_leases++] = (uint64_t)r->integer;
        grants_left--;
        break;
    case REQ_KEEPALIVE:
        if (err) {
            note_error(r);
            break;
        }
        fencectl_hist_add(&ka_hist, lat);
        ka_answered++;
        if (loadgen_now_us() <= load_end_us)
            ka_answered_in_time++;
        break;
    }
}

/* Read what c's socket has and file every complete reply. */
static void on_readable(conn *c)
{
    loadgen_drain(c->fd, c->reader, on_reply, c);
}

/* Wait up to timeout_ms for events and handle them. */
static void poll_once(int timeout_ms)
{
    struct epoll_event evs[256];
    int n = epoll_wait(epfd, evs, 256, timeout_ms);
    if (n < 0 && errno != EINTR)
        loadgen_die("epoll_wait");
    for (int i = 0; i < n; i++) {
        conn *c = evs[i].data.ptr;
        if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
            on_readable(c);
        if (evs[i].events & EPOLLOUT)
            flush(c);
    }
}

/* Connect c to 127.0.0.1:port (blocking connect, then non-blocking). */
static void conn_open(conn *c, int port)
{
    memset(c, 0, sizeof(*c));
    c->reader = redisReaderCreate();
    if (c->reader == NULL)
        loadgen_die("out of memory");
    c->fd = loadgen_connect(port, epfd, c);
}

/* One command on the probe's connection; the reply (NULL: the connection
 * failed, which ends the program). */
static redisReply *probe_call(int argc, const char **argv)
{
    redisReply *r = redisCommandArgv(probe_rc, argc, argv, NULL);
    if (r == NULL) {
        fprintf(stderr, "keepalive_load: probe connection: %s\n", probe_rc->errstr);
        exit(1);
    }
    return r;
}

/* The probe thread: LOCK/UNLOCK cycles until probe_stop; LOCK latency
 * from just before the request is written to its reply parsed. */
static void *probe_main(void *arg)
{
    (void)arg;
    char lease[24];
    snprintf(lease, sizeof(lease), "%" PRIu64, probe_lease);
    while (!atomic_load(&probe_stop)) {
        const char *lv[] = {"LOCK", "keepalive_load.probe", lease};
        uint64_t t0 = loadgen_now_us();
        redisReply *r = probe_call(3, lv);
        uint64_t lat = loadgen_now_us() - t0;
        if (r->type != REDIS_REPLY_INTEGER) {
            probe_errors++; /* an error, or nil (cannot be: the lock is its own) */
            freeReplyObject(r);
            continue;
        }
        fencectl_hist_add(&probe_hist, lat);
        char tok[24];
        snprintf(tok, sizeof(tok), "%lld", r->integer);
        freeReplyObject(r);
        const char *uv[] = {"UNLOCK", "keepalive_load.probe", tok};
        r = probe_call(3, uv);
        if (r->type == REDIS_REPLY_ERROR)
            probe_errors++;
        else
            probe_cycles++;
        freeReplyObject(r);
    }
    return NULL;
}

/* Start the probe's cycles in their thread (alone, or with the load). */
static void probe_phase_start(void)
{
    fencectl_hist_init(&probe_hist);
    probe_cycles = 0;
    atomic_store(&probe_stop, false);
    if (pthread_create(&probe_thread, NULL, probe_main, NULL) != 0)
        loadgen_die("pthread_create");
}

/* Stop the probe: its last cycle finishes, then its thread is joined. */
static void probe_phase_stop(void)
{
    atomic_store(&probe_stop, true);
    pthread_join(probe_thread, NULL);
    errors += probe_errors;
    probe_errors = 0;
}

/* The probe's connection and its lease (a week: it never needs a
 * keepalive here). */
static void probe_open(void)
{
    probe_rc = redisConnect("127.0.0.1", probe_port);
    if (probe_rc == NULL || probe_rc->err) {
        fprintf(stderr, "keepalive_load: probe connect: %s\n",
                probe_rc ? probe_rc->errstr : "out of memory");
        exit(1);
    }
    const char *pg[] = {"LEASE.GRANT", "604800000"};
    redisReply *r = probe_call(2, pg);
    if (r->type != REDIS_REPLY_INTEGER) {
        fprintf(stderr, "keepalive_load: probe LEASE.GRANT: %s\n",
                r->type == REDIS_REPLY_ERROR ? r->str : "not an integer");
        exit(1);
    }
    probe_lease = (uint64_t)r->integer;
    freeReplyObject(r);
}

/* Print the probe's numbers (after a phase). */
static void print_probe(void)
{
    printf(" lock_cycles=%" PRIu64 " lock_p50_us=%" PRIu64 " lock_p99_us=%" PRIu64
           " lock_max_us=%" PRIu64,
           probe_cycles, fencectl_hist_quantile(&probe_hist, 0.50),
           fencectl_hist_quantile(&probe_hist, 0.99), probe_hist.max);
}

/* Parse a positive decimal argument. */
static uint64_t arg_num(const char *s, const char *what)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v == 0) {
        fprintf(stderr, "keepalive_load: %s wants a positive number, not \"%s\"\n", what, s);
        exit(2);
    }
    return v;
}

/* Raise the soft open-files limit to the hard one (CONNS sockets). */
static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* One INFO counter of the server (a blocking connection of its own), or 0
 * when it cannot be read (an older server without it). */
static uint64_t info_counter(int port, const char *key)
{
    redisContext *rc = redisConnect("127.0.0.1", port);
    uint64_t v = 0;
    if (rc != NULL && rc->err == 0) {
        redisReply *r = redisCommand(rc, "INFO fenced");
        if (r != NULL && r->type == REDIS_REPLY_STRING) {
            char pat[64];
            snprintf(pat, sizeof(pat), "\n%s:", key);
            const char *p = strstr(r->str, pat);
            if (p != NULL)
                v = strtoull(p + strlen(pat), NULL, 10);
        }
        if (r != NULL)
            freeReplyObject(r);
    }
    if (rc != NULL)
        redisFree(rc);
    return v;
}

/* Parse the arguments, run the three phases, print their lines. */
int main(int argc, char **argv)
{
    loadgen_prog = "keepalive_load";
    if (argc != 6) {
        fprintf(stderr, "usage: keepalive_load PORT LEASES CONNS TTL_MS SECONDS\n");
        return 2;
    }
    int port = (int)arg_num(argv[1], "PORT");
    uint64_t n_leases = arg_num(argv[2], "LEASES");
    n_conns = (uint32_t)arg_num(argv[3], "CONNS");
    uint64_t ttl_ms = arg_num(argv[4], "TTL_MS");
    uint64_t secs = arg_num(argv[5], "SECONDS");
    if (port > 65535 || n_conns > 100000 || ttl_ms < 30) {
        fprintf(stderr, "keepalive_load: PORT <= 65535, CONNS <= 100000, TTL_MS >= 30\n");
        return 2;
    }
    raise_nofile();
    epfd = epoll_create1(0);
    if (epfd < 0)
        loadgen_die("epoll_create1");
    conns = calloc(n_conns, sizeof(*conns));
    if (conns == NULL)
        loadgen_die("out of memory");
    for (uint32_t i = 0; i < n_conns; i++) {
        conn_open(&conns[i], port);
        conns[i].leases = calloc(n_leases / n_conns + 1, sizeof(uint64_t));
        if (conns[i].leases == NULL)
            loadgen_die("out of memory");
    }
    fencectl_hist_init(&ka_hist);
    probe_port = port;
    probe_open();

    /* 1. idle: the probe alone. */
    probe_phase_start();
    struct timespec idle = {.tv_sec = (time_t)secs, .tv_nsec = 0};
    while (nanosleep(&idle, &idle) != 0 && errno == EINTR) {
    }
    probe_phase_stop();
    printf("idle");
    print_probe();
    printf(" errors=%" PRIu64 "\n", errors);
    fflush(stdout);

    /* 2. grant: LEASES LEASE.GRANTs, at most 256 owed per connection. */
    char ttl_s[24];
    snprintf(ttl_s, sizeof(ttl_s), "%" PRIu64, ttl_ms);
    const char *gv[] = {"LEASE.GRANT", ttl_s};
    uint64_t t_grant = loadgen_now_us();
    uint64_t queued = 0;
    grants_left = n_leases;
    while (grants_left > 0) {
        for (uint32_t i = 0; i < n_conns && queued < n_leases; i++) {
            conn *c = &conns[i];
            bool any = false;
            while (c->owed < 256 && queued < n_leases &&
                   c->n_leases + c->owed < n_leases / n_conns + (i < n_leases % n_conns)) {
                FENCE_ASSERT(send_cmd(c, REQ_GRANT, 2, gv));
                queued++;
                any = true;
            }
            if (any)
                flush(c);
        }
        poll_once(10);
    }
    double grant_s = (double)(loadgen_now_us() - t_grant) / 1e6;
    printf("grant leases=%" PRIu64 " seconds=%.2f grants_per_s=%.1f\n", n_leases, grant_s,
           (double)n_leases / grant_s);
    fflush(stdout);

    /* 3. load: lease j renewed at t0 + (j / LEASES) * period + k * period. */
    uint64_t period_us = ttl_ms * 1000u / 3;
    uint64_t t0 = loadgen_now_us();
    load_end_us = t0 + secs * 1000000u;
    uint64_t sent = 0, skipped = 0;
    uint64_t entries0 = info_counter(port, "raft_entries");
    uint64_t local0 = info_counter(port, "renewals_local");
    uint64_t cmds0 = info_counter(port, "batch_commands");
    probe_phase_start();
    while (loadgen_now_us() < load_end_us) {
        uint64_t now = loadgen_now_us();
        uint64_t due = (uint64_t)((double)(now - t0) / (double)period_us * (double)n_leases);
        for (; sent < due; sent++) {
            uint64_t j = sent % n_leases;
            conn *c = &conns[j % n_conns];
            uint32_t k = (uint32_t)(j / n_conns);
            if (k >= c->n_leases)
                continue;
            char id[24];
            snprintf(id, sizeof(id), "%" PRIu64, c->leases[k]);
            const char *kv[] = {"LEASE.KEEPALIVE", id};
            if (!send_cmd(c, REQ_KEEPALIVE, 2, kv))
                skipped++;
        }
        for (uint32_t i = 0; i < n_conns; i++)
            if (conns[i].wlen > 0 && !conns[i].want_out)
                flush(&conns[i]);
        poll_once(1);
    }
    probe_phase_stop();
    uint64_t entries1 = info_counter(port, "raft_entries");
    uint64_t local1 = info_counter(port, "renewals_local");
    uint64_t cmds1 = info_counter(port, "batch_commands");
    /* Drain: the replies to renewals sent in time still count for latency. */
    uint64_t give_up = loadgen_now_us() + 10000000u;
    for (;;) {
        uint64_t owed = 0;
        for (uint32_t i = 0; i < n_conns; i++)
            owed += conns[i].owed;
        if (owed == 0 || loadgen_now_us() > give_up)
            break;
        poll_once(10);
    }
    double load_s = (double)secs;
    printf("load leases=%" PRIu64 " conns=%u ttl_ms=%" PRIu64 " target_per_s=%.1f sent=%" PRIu64
           " keepalives=%" PRIu64 " keepalives_per_s=%.1f ka_p50_us=%" PRIu64
           " ka_p99_us=%" PRIu64 " ka_max_us=%" PRIu64,
           n_leases, n_conns, ttl_ms, (double)n_leases * 1e6 / (double)period_us, sent - skipped,
           ka_answered, (double)ka_answered_in_time / load_s,
           fencectl_hist_quantile(&ka_hist, 0.50), fencectl_hist_quantile(&ka_hist, 0.99),
           ka_hist.max);
    print_probe();
    printf(" raft_entries=%" PRIu64 " raft_entries_per_s=%.1f logged_cmds=%" PRIu64
           " renewals_local=%" PRIu64,
           entries1 - entries0, (double)(entries1 - entries0) / load_s, cmds1 - cmds0,
           local1 - local0);
    printf(" errors=%" PRIu64 " skipped=%" PRIu64 "\n", errors, skipped);
    if (first_error[0] != '\0')
        fprintf(stderr, "keepalive_load: first error reply: %s\n", first_error);
    return 0;
}
