/* The keepalive row of `make bench` (tests/bench/run.py): many leases kept
 * alive by many connections, and the latency of a LOCK meanwhile.
 *
 *   keepalive_load PORT LEASES CONNS TTL_MS SECONDS
 *
 * One thread for the load, epoll, non-blocking sockets to 127.0.0.1:PORT,
 * replies parsed with hiredis's reader; the probe in a thread of its own
 * (a blocking hiredis connection), so that its latency is the server's
 * and not the load thread's turn around 1,000 sockets.  In order:
 *   1. before: the probe runs LOCK/UNLOCK cycles on a lock of its own (its
 *      lease: one LEASE.GRANT with a long TTL) for SECONDS, alone;
 *   2. grant: CONNS connections pipeline LEASE.GRANT TTL_MS, LEASES in all
 *      (lease i on connection i % CONNS);
 *   3. load and idle in turn, 500 ms slices, SECONDS of each: in a load
 *      slice every lease is renewed (LEASE.KEEPALIVE) once every TTL_MS/3
 *      of load time, the renewals spread evenly (open loop: sent when due,
 *      whether or not earlier ones were answered); in an idle slice none
 *      is sent.  The probe runs throughout; its cycles are filed by slice
 *      (one that straddles a change under neither), so idle and loaded
 *      samples see the same drift of the machine.
 * Prints one "key=value ..." line per phase on stdout (latencies in
 * microseconds, from src/fencectl/hist.c's histogram, send to reply):
 *   before lock_cycles=.. lock_p50_us=.. lock_p99_us=.. lock_max_us=..
 *   grant leases=.. seconds=.. grants_per_s=..
 *   idle lock_cycles=.. lock_p50_us=.. ... seconds=..   (idle slices)
 *   load target_per_s=.. keepalives=.. keepalives_per_s=.. ka_p50_us=.. ...
 *        lock_cycles=.. lock_p50_us=.. ... raft_entries=.. raft_entries_per_s=..
 *        logged_cmds=.. renewals_local=.. ckpt_alone=.. ckpt_rode=..
 *        errors=.. skipped=..   (load slices)
 *   (ckpt_alone: LEASE_CHECKPOINT commands that went in entries of their
 *   own (INFO checkpoints - checkpoints_rode), ckpt_rode: those that rode
 *   other commands' entries (INFO checkpoints_rode); over the load slices;
 *   raft_entries, logged_cmds (INFO batch_commands: commands written into
 *   those entries): INFO's counters over the load slices; renewals_local
 *   over the whole phase (a renewal sent late in a load slice is answered
 *   in the idle one); read on a connection of their own; entries include
 *   the probe's)
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
/* The load phase's slices: load and idle in turn (see main). */
#define SLICE_US 500000u

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
/* What the probe's samples are filed under: the slice the load phase is
 * in (or the phase before the leases, filed as idle). */
enum { SL_IDLE, SL_LOAD, SL_KINDS };
static atomic_int probe_slice; /* SL_* now (set by the main thread) */
/* Written by the probe thread only, read after it is joined: */
static uint64_t probe_cycles[SL_KINDS]; /* LOCK+UNLOCK cycles, by slice */
static uint64_t probe_errors; /* its error or unexpected replies */
static fencectl_hist probe_hist[SL_KINDS]; /* LOCK latency, by slice */
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
        int sl = atomic_load(&probe_slice);
        uint64_t t0 = loadgen_now_us();
        redisReply *r = probe_call(3, lv);
        uint64_t lat = loadgen_now_us() - t0;
        if (r->type != REDIS_REPLY_INTEGER) {
            probe_errors++; /* an error, or nil (cannot be: the lock is its own) */
            freeReplyObject(r);
            continue;
        }
        /* A cycle that straddles a slice change is filed under neither. */
        bool same = atomic_load(&probe_slice) == sl;
        if (same)
            fencectl_hist_add(&probe_hist[sl], lat);
        char tok[24];
        snprintf(tok, sizeof(tok), "%lld", r->integer);
        freeReplyObject(r);
        const char *uv[] = {"UNLOCK", "keepalive_load.probe", tok};
        r = probe_call(3, uv);
        if (r->type == REDIS_REPLY_ERROR)
            probe_errors++;
        else if (same && atomic_load(&probe_slice) == sl)
            probe_cycles[sl]++;
        freeReplyObject(r);
    }
    return NULL;
}

/* Start the probe's cycles in their thread (alone, or with the load). */
static void probe_phase_start(void)
{
    for (int k = 0; k < SL_KINDS; k++) {
        fencectl_hist_init(&probe_hist[k]);
        probe_cycles[k] = 0;
    }
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

/* Print the probe's numbers of one slice kind (after a phase). */
static void print_probe(int sl)
{
    printf(" lock_cycles=%" PRIu64 " lock_p50_us=%" PRIu64 " lock_p99_us=%" PRIu64
           " lock_max_us=%" PRIu64,
           probe_cycles[sl], fencectl_hist_quantile(&probe_hist[sl], 0.50),
           fencectl_hist_quantile(&probe_hist[sl], 0.99), probe_hist[sl].max);
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

/* n INFO counters of the server, read from one INFO (a blocking
 * connection of its own) so that they are of the same moment; a counter
 * that cannot be read (an older server without it) is 0. */
static void info_counters(int port, const char *const *keys, uint64_t *vals, size_t n)
{
    for (size_t i = 0; i < n; i++)
        vals[i] = 0;
    redisContext *rc = redisConnect("127.0.0.1", port);
    if (rc != NULL && rc->err == 0) {
        redisReply *r = redisCommand(rc, "INFO fenced");
        if (r != NULL && r->type == REDIS_REPLY_STRING) {
            for (size_t i = 0; i < n; i++) {
                char pat[64];
                snprintf(pat, sizeof(pat), "\n%s:", keys[i]);
                const char *p = strstr(r->str, pat);
                if (p != NULL)
                    vals[i] = strtoull(p + strlen(pat), NULL, 10);
            }
        }
        if (r != NULL)
            freeReplyObject(r);
    }
    if (rc != NULL)
        redisFree(rc);
}

/* The counters a load slice is measured by (main), in this order. */
enum { SC_ENTRIES, SC_CMDS, SC_CKPT, SC_RODE, SC_N };
static const char *const slice_keys[SC_N] = {"raft_entries", "batch_commands", "checkpoints",
                                             "checkpoints_rode"};

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
    /* KEEPALIVE_LOAD_PROBE_PORT: the probe runs against another server
     * (the control of docs/performance.md: what the load costs a LOCK on
     * the same two cores when it does not share the server). */
    const char *pp = getenv("KEEPALIVE_LOAD_PROBE_PORT");
    probe_port = pp != NULL && *pp != '\0' ? atoi(pp) : port;
    probe_open();

    /* 1. before: the probe alone, before the leases exist. */
    atomic_store(&probe_slice, SL_IDLE);
    probe_phase_start();
    struct timespec idle = {.tv_sec = (time_t)secs, .tv_nsec = 0};
    while (nanosleep(&idle, &idle) != 0 && errno == EINTR) {
    }
    probe_phase_stop();
    printf("before");
    print_probe(SL_IDLE);
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

    /* 3. load, in slices of SLICE_US: load and idle in turn, SECONDS of
     * each (L I L I ...), so that what drifts on the machine meanwhile (the
     * disk's fsync time, other processes) hits the probe's idle and loaded
     * samples alike.  In a load slice lease j is renewed at
     * t0 + (j / LEASES) * period + k * period of load time (idle slices do
     * not count: the schedule pauses, at most one slice, well inside any
     * TTL); in an idle slice nothing is sent (replies still owed arrive). */
    uint64_t period_us = ttl_ms * 1000u / 3;
    uint64_t sent = 0, skipped = 0;
    uint64_t slice_sum[SC_N] = {0}; /* INFO deltas over the load slices */
    static const char *const local_key[] = {"renewals_local"};
    uint64_t local, local_end; /* over the whole phase */
    info_counters(port, local_key, &local, 1);
    uint64_t load_us = 0;                      /* load time so far */
    uint64_t n_slices = 2 * secs * (1000000u / SLICE_US);
    uint64_t t_phase = loadgen_now_us();
    load_end_us = UINT64_MAX;
    probe_phase_start();
    for (uint64_t sl = 0; sl < n_slices; sl++) {
        bool loaded = sl % 2 == 0;
        uint64_t v0[SC_N] = {0};
        if (loaded)
            info_counters(port, slice_keys, v0, SC_N);
        atomic_store(&probe_slice, loaded ? SL_LOAD : SL_IDLE);
        uint64_t ts = loadgen_now_us(), now = ts;
        while (now < ts + SLICE_US) {
            if (loaded) {
                uint64_t due = (uint64_t)((double)(load_us + now - ts) / (double)period_us *
                                          (double)n_leases);
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
            }
            poll_once(1);
            now = loadgen_now_us();
        }
        if (loaded) {
            load_us += now - ts;
            uint64_t v1[SC_N];
            info_counters(port, slice_keys, v1, SC_N);
            for (int k = 0; k < SC_N; k++)
                slice_sum[k] += v1[k] - v0[k];
        }
    }
    load_end_us = loadgen_now_us();
    probe_phase_stop();
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
    /* Renewals sent late in a load slice are answered in the idle one. */
    info_counters(port, local_key, &local_end, 1);
    local = local_end - local;
    printf("idle");
    print_probe(SL_IDLE);
    printf(" seconds=%.2f\n", (double)(load_end_us - t_phase - load_us) / 1e6);
    double load_s = (double)load_us / 1e6;
    printf("load leases=%" PRIu64 " conns=%u ttl_ms=%" PRIu64 " target_per_s=%.1f sent=%" PRIu64
           " keepalives=%" PRIu64 " keepalives_per_s=%.1f ka_p50_us=%" PRIu64
           " ka_p99_us=%" PRIu64 " ka_max_us=%" PRIu64,
           n_leases, n_conns, ttl_ms, (double)n_leases * 1e6 / (double)period_us, sent - skipped,
           ka_answered, (double)ka_answered_in_time / load_s,
           fencectl_hist_quantile(&ka_hist, 0.50), fencectl_hist_quantile(&ka_hist, 0.99),
           ka_hist.max);
    print_probe(SL_LOAD);
    printf(" raft_entries=%" PRIu64 " raft_entries_per_s=%.1f logged_cmds=%" PRIu64
           " renewals_local=%" PRIu64 " ckpt_alone=%" PRIu64 " ckpt_rode=%" PRIu64,
           slice_sum[SC_ENTRIES], (double)slice_sum[SC_ENTRIES] / load_s, slice_sum[SC_CMDS],
           local,
           slice_sum[SC_CKPT] > slice_sum[SC_RODE] ? slice_sum[SC_CKPT] - slice_sum[SC_RODE] : 0,
           slice_sum[SC_RODE]);
    printf(" errors=%" PRIu64 " skipped=%" PRIu64 "\n", errors, skipped);
    if (first_error[0] != '\0')
        fprintf(stderr, "keepalive_load: first error reply: %s\n", first_error);
    return 0;
}
