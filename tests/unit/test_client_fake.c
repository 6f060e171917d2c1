/* libfence against tiny fake RESP servers (threads in this process, on
 * 127.0.0.1 ephemeral ports): NOTLEADER redirects, retries with the same
 * REQID after TRYAGAIN and lost connections, timeouts, the keepalive and
 * its lease-lost callback, valid-until from the send time, and the
 * fence-store helper's STALE handling.  No real server needed. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <time.h>

#include "../lib/test.h"
#include "client/testhook.h"
#include "fence.h"

#define ARGS_MAX 12
#define ARG_LEN 300
#define LOG_MAX 1024

typedef struct fake fake;
/* Answer one request: return the raw reply bytes, NULL to drop the
 * connection without a reply, or "" to send nothing (hang a while). */
typedef const char *(*fake_handler)(fake *f, int n, int argc, char argv[][ARG_LEN]);

struct fake {
    int lfd;                       /* listening socket */
    int port;                      /* its port */
    fake_handler handler;          /* how to answer */
    pthread_mutex_t mu;            /* guards the log */
    char log[LOG_MAX][128];        /* "CMD arg1 ... REQID x" of each request */
    int nlog;                      /* entries in log */
    atomic_int count[8];           /* per-command counters for handlers */
    char other[64];                /* redirect target "host:port" */
    int hang_ms;                   /* how long "" replies hang */
};

/* Read exactly n bytes or fail. */
static bool read_full(int fd, char *buf, size_t n)
{
    while (n > 0) {
        ssize_t r = read(fd, buf, n);
        if (r <= 0)
            return false;
        buf += r;
        n -= (size_t)r;
    }
    return true;
}

/* Read a CRLF-terminated line into buf. */
static bool read_line(int fd, char *buf, size_t cap)
{
    size_t i = 0;
    while (i + 1 < cap) {
        if (!read_full(fd, buf + i, 1))
            return false;
        if (buf[i] == '\n') {
            buf[i > 0 && buf[i - 1] == '\r' ? i - 1 : i] = '\0';
            return true;
        }
        i++;
    }
    return false;
}

/* Read one multibulk request. */
static int read_request(int fd, char argv[][ARG_LEN])
{
    char line[64];
    if (!read_line(fd, line, sizeof(line)) || line[0] != '*')
        return -1;
    int argc = atoi(line + 1);
    if (argc <= 0 || argc > ARGS_MAX)
        return -1;
    for (int i = 0; i < argc; i++) {
        if (!read_line(fd, line, sizeof(line)) || line[0] != '$')
            return -1;
        int len = atoi(line + 1);
        if (len < 0 || len >= ARG_LEN - 2)
            return -1;
        if (!read_full(fd, argv[i], (size_t)len + 2))
            return -1;
        argv[i][len] = '\0';
    }
    return argc;
}

/* Arguments of a connection thread. */
typedef struct conn_arg {
    fake *f;  /* server */
    int fd;   /* accepted socket */
} conn_arg;

/* Serve one connection until it closes. */
static void *conn_main(void *p)
{
    conn_arg *ca = p;
    fake *f = ca->f;
    int fd = ca->fd;
    free(ca);
    char argv[ARGS_MAX][ARG_LEN];
    for (;;) {
        int argc = read_request(fd, argv);
        if (argc < 0)
            break;
        pthread_mutex_lock(&f->mu);
        int n = f->nlog;
        if (f->nlog < LOG_MAX) {
            char *e = f->log[f->nlog++];
            size_t used = 0;
            e[0] = '\0';
            for (int i = 0; i < argc && used < 100; i++) {
                int w = snprintf(e + used, 128 - used, i + 1 < argc ? "%.24s " : "%.24s",
                                 argv[i]);
                used += w > 0 ? (size_t)w : 0;
            }
        }
        pthread_mutex_unlock(&f->mu);
        const char *r = f->handler(f, n, argc, argv);
        if (r == NULL)
            break;
        if (r[0] == '\0') {
            usleep((useconds_t)f->hang_ms * 1000);
            continue;
        }
        ssize_t w = write(fd, r, strlen(r));
        (void)w;
    }
    close(fd);
    return NULL;
}

/* Accept loop (detached connection threads). */
static void *accept_main(void *p)
{
    fake *f = p;
    for (;;) {
        int fd = accept(f->lfd, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR)
                continue;
            return NULL;
        }
        conn_arg *ca = malloc(sizeof(*ca));
        ca->f = f;
        ca->fd = fd;
        pthread_t t;
        pthread_create(&t, NULL, conn_main, ca);
        pthread_detach(t);
    }
}

/* Start a fake server on an ephemeral 127.0.0.1 port.  It lives until the
 * test case's process exits. */
static fake *fake_start(fake_handler h)
{
    fake *f = calloc(1, sizeof(*f));
    REQUIRE(f != NULL);
    pthread_mutex_init(&f->mu, NULL);
    f->handler = h;
    f->hang_ms = 5000;
    f->lfd = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(f->lfd >= 0);
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
    REQUIRE(listen(f->lfd, 64) == 0);
    socklen_t len = sizeof(sa);
    REQUIRE(getsockname(f->lfd, (struct sockaddr *)&sa, &len) == 0);
    f->port = ntohs(sa.sin_port);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, accept_main, f) == 0);
    pthread_detach(t);
    return f;
}

/* "127.0.0.1:<port>" of f. */
static const char *addr_of(fake *f, char *buf)
{
    sprintf(buf, "127.0.0.1:%d", f->port);
    return buf;
}

/* Open a client on servers with a short timeout. */
static fence_client *client_for(const char *servers, uint32_t timeout_ms)
{
    fence_client_opts o;
    fence_client_opts_init(&o);
    o.servers = servers;
    o.timeout_ms = timeout_ms;
    o.backoff_ms_min = 5;
    o.backoff_ms_max = 50;
    fence_client *c = NULL;
    REQUIRE(fence_client_open(&o, &c) == 0);
    return c;
}

/* The log entry i of f (copied). */
static void log_get(fake *f, int i, char *out)
{
    pthread_mutex_lock(&f->mu);
    strcpy(out, i < f->nlog ? f->log[i] : "");
    pthread_mutex_unlock(&f->mu);
}

/* Number of log entries of f starting with prefix. */
static int log_count(fake *f, const char *prefix)
{
    int n = 0;
    pthread_mutex_lock(&f->mu);
    for (int i = 0; i < f->nlog; i++)
        if (strncmp(f->log[i], prefix, strlen(prefix)) == 0)
            n++;
    pthread_mutex_unlock(&f->mu);
    return n;
}

/* The REQID value in a logged request ("" if none). */
static void reqid_of(const char *entry, char *out)
{
    const char *p = strstr(entry, "REQID ");
    strcpy(out, p ? p + 6 : "");
}

/* A well-behaved leader: ACQUIRE → [7, 9], UNLOCK → 1, KEEPALIVE → 300. */
static const char *h_leader(fake *f, int n, int argc, char argv[][ARG_LEN])
{
    (void)f;
    (void)n;
    (void)argc;
    if (strcmp(argv[0], "ACQUIRE") == 0)
        return "*2\r\n:7\r\n:9\r\n";
    if (strcmp(argv[0], "UNLOCK") == 0)
        return ":1\r\n";
    if (strcmp(argv[0], "LEASE.KEEPALIVE") == 0)
        return ":300\r\n";
    if (strcmp(argv[0], "PING") == 0)
        return "+PONG\r\n";
    return "-ERR unknown\r\n";
}

/* A follower: everything → NOTLEADER <other>. */
static const char *h_follower(fake *f, int n, int argc, char argv[][ARG_LEN])
{
    (void)n;
    (void)argc;
    (void)argv;
    static __thread char reply[128]; /* one per connection thread */
    snprintf(reply, sizeof(reply), "-NOTLEADER %s\r\n", f->other);
    return reply;
}

/* A follower's NOTLEADER is followed to the leader, with the same REQID. */
static void test_redirect(void)
{
    fake *leader = fake_start(h_leader);
    fake *follower = fake_start(h_follower);
    char la[64], fa[64];
    addr_of(leader, la);
    strcpy(follower->other, la);
    fence_client *c = client_for(addr_of(follower, fa), 2000);
    fence_lock *l = NULL;
    REQUIRE(fence_lock_acquire(c, "res", 10000, 0, &l) == 0);
    CHECK_EQ_U64(fence_lock_token(l), 7);
    CHECK_EQ_U64(fence_lock_lease(l), 9);
    char buf[64];
    fence_client_server(c, buf, sizeof(buf));
    CHECK_STR(buf, la);
    char e1[128], e2[128], r1[128], r2[128];
    log_get(follower, 0, e1);
    log_get(leader, 0, e2);
    CHECK(strncmp(e1, "ACQUIRE res 10000 REQID ", 24) == 0);
    reqid_of(e1, r1);
    reqid_of(e2, r2);
    CHECK(r1[0] != '\0');
    CHECK_STR(r1, r2);
    CHECK(fence_lock_release(l) == 0);
    CHECK(log_count(leader, "UNLOCK res 7") == 1);
    CHECK(log_count(follower, "UNLOCK") == 0);
    fence_client_close(c);
}

/* Two followers pointing at each other: NOTLEADER until the deadline. */
static void test_redirect_loop(void)
{
    fake *a = fake_start(h_follower);
    fake *b = fake_start(h_follower);
    addr_of(b, a->other);
    addr_of(a, b->other);
    char aa[64];
    fence_client *c = client_for(addr_of(a, aa), 300);
    uint64_t t0 = fence_monotonic_ms();
    CHECK(fence_client_ping(c) == FENCE_ENOTLEADER);
    CHECK(fence_monotonic_ms() - t0 < 3000);
    CHECK(strstr(fence_client_errmsg(c), "NOTLEADER") != NULL);
    fence_client_close(c);
}

/* TRYAGAIN twice, then the answer. */
static const char *h_tryagain(fake *f, int n, int argc, char argv[][ARG_LEN])
{
    (void)n;
    (void)argc;
    if (strcmp(argv[0], "ACQUIRE") == 0 && atomic_fetch_add(&f->count[0], 1) < 2)
        return "-TRYAGAIN not ready\r\n";
    return h_leader(f, n, argc, argv);
}

/* TRYAGAIN is retried with the same REQID until it succeeds. */
static void test_tryagain_same_reqid(void)
{
    fake *f = fake_start(h_tryagain);
    char a[64];
    fence_client *c = client_for(addr_of(f, a), 2000);
    fence_lock *l = NULL;
    REQUIRE(fence_lock_acquire(c, "x", 10000, 0, &l) == 0);
    CHECK(log_count(f, "ACQUIRE x") == 3);
    char e[3][128], r[3][128];
    for (int i = 0; i < 3; i++) {
        log_get(f, i, e[i]);
        reqid_of(e[i], r[i]);
    }
    CHECK(r[0][0] != '\0');
    CHECK_STR(r[0], r[1]);
    CHECK_STR(r[1], r[2]);
    fence_lock_release(l);
    /* A second logical call gets a fresh REQID. */
    atomic_store(&f->count[0], 100);
    REQUIRE(fence_lock_acquire(c, "x", 10000, 0, &l) == 0);
    char e4[128], r4[128];
    log_get(f, f->nlog - 1, e4);
    reqid_of(e4, r4);
    CHECK(log_count(f, "ACQUIRE x") == 4);
    CHECK(strcmp(r4, r[0]) != 0);
    fence_lock_release(l);
    fence_client_close(c);
}

/* The first ACQUIRE's connection is dropped without a reply. */
static const char *h_drop_once(fake *f, int n, int argc, char argv[][ARG_LEN])
{
    if (strcmp(argv[0], "ACQUIRE") == 0 && atomic_fetch_add(&f->count[0], 1) == 0)
        return NULL;
    return h_leader(f, n, argc, argv);
}

/* A lost connection is re-made and the request re-sent with its REQID. */
static void test_reconnect_same_reqid(void)
{
    fake *f = fake_start(h_drop_once);
    char a[64];
    fence_client *c = client_for(addr_of(f, a), 2000);
    fence_lock *l = NULL;
    REQUIRE(fence_lock_acquire(c, "y", 10000, 0, &l) == 0);
    char e0[128], e1[128], r0[128], r1[128];
    log_get(f, 0, e0);
    log_get(f, 1, e1);
    reqid_of(e0, r0);
    reqid_of(e1, r1);
    CHECK(r0[0] != '\0');
    CHECK_STR(r0, r1);
    fence_lock_release(l);
    fence_client_close(c);
}

/* Nothing listens: unreachable, quickly; and a busy lock is EBUSY. */
static void test_unreachable(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(s, (struct sockaddr *)&sa, sizeof(sa)) == 0);
    socklen_t len = sizeof(sa);
    getsockname(s, (struct sockaddr *)&sa, &len);
    char a[64];
    sprintf(a, "127.0.0.1:%d", ntohs(sa.sin_port));
    close(s);
    fence_client *c = client_for(a, 300);
    uint64_t t0 = fence_monotonic_ms();
    fence_lock *l = NULL;
    CHECK(fence_lock_acquire(c, "z", 1000, 0, &l) == FENCE_EUNREACHABLE);
    CHECK(fence_monotonic_ms() - t0 < 3000);
    CHECK(strstr(fence_client_errmsg(c), "cannot connect") != NULL);
    fence_client_close(c);
}

/* ACQUIRE answered nil: busy. */
static const char *h_busy(fake *f, int n, int argc, char argv[][ARG_LEN])
{
    if (strcmp(argv[0], "ACQUIRE") == 0)
        return "$-1\r\n";
    return h_leader(f, n, argc, argv);
}

static void test_busy(void)
{
    fake *f = fake_start(h_busy);
    char a[64];
    fence_client *c = client_for(addr_of(f, a), 1000);
    fence_lock *l = NULL;
    CHECK(fence_lock_try(c, "b", 1000, &l) == FENCE_EBUSY);
    CHECK(l == NULL);
    fence_client_close(c);
}

/* The server never answers ACQUIRE: timeout at the deadline. */
static const char *h_hang(fake *f, int n, int argc, char argv[][ARG_LEN])
{
    if (strcmp(argv[0], "ACQUIRE") == 0)
        return "";
    return h_leader(f, n, argc, argv);
}

static void test_timeout(void)
{
    fake *f = fake_start(h_hang);
    f->hang_ms = 3000;
    char a[64];
    fence_client *c = client_for(addr_of(f, a), 300);
    fence_lock *l = NULL;
    uint64_t t0 = fence_monotonic_ms();
    CHECK(fence_lock_acquire(c, "t", 1000, 0, &l) == FENCE_ETIMEOUT);
    uint64_t took = fence_monotonic_ms() - t0;
    CHECK(took >= 290);
    CHECK(took < 2500);
    fence_client_close(c);
}

/* The keepalive tests run on a clock of their own (fence__client_set_clock):
 * the test moves it and fence__ka_sync waits until the keepalive thread has
 * acted on it, so no test sleeps for a lease to run out. */
static atomic_uint_fast64_t fake_now;
static fence_client *clocked; /* the client on fake_now (for handlers) */

static uint64_t fake_clock(void *arg)
{
    (void)arg;
    return atomic_load(&fake_now);
}

/* A client on the fake clock, which starts at 1,000,000 ms. */
static fence_client *client_clocked(const char *servers, uint32_t timeout_ms)
{
    fence_client *c = client_for(servers, timeout_ms);
    atomic_store(&fake_now, 1000000);
    fence__client_set_clock(c, fake_clock, NULL);
    clocked = c;
    return c;
}

/* Move the fake clock by ms and wait until the keepalive thread caught up. */
static void advance(fence_client *c, uint64_t ms)
{
    atomic_fetch_add(&fake_now, ms);
    fence__ka_sync(c);
}

/* Lost-callback bookkeeping (lost_at on the fake clock). */
static atomic_int lost_calls;
static atomic_int lost_rc;
static atomic_uint_fast64_t lost_at;
static atomic_int release_in_cb_rc;

static void count_lost(fence_lock *l, int rc, void *arg)
{
    (void)arg;
    atomic_fetch_add(&lost_calls, 1);
    atomic_store(&lost_rc, rc);
    atomic_store(&lost_at, atomic_load(&fake_now));
    atomic_store(&release_in_cb_rc, fence_lock_release(l)); /* refused here */
}

/* Short-TTL ACQUIRE; KEEPALIVE answers NOLEASE. */
static const char *h_noleasing(fake *f, int n, int argc, char argv[][ARG_LEN])
{
    if (strcmp(argv[0], "LEASE.KEEPALIVE") == 0)
        return "-NOLEASE the lease is unknown\r\n";
    return h_leader(f, n, argc, argv);
}

/* NOLEASE on a keepalive: the callback runs exactly once, valid is false. */
static void test_keepalive_noleas(void)
{
    fake *f = fake_start(h_noleasing);
    char a[64];
    fence_client *c = client_clocked(addr_of(f, a), 1000);
    fence_lock *l = NULL;
    REQUIRE(fence_lock_acquire(c, "k", 300, 0, &l) == 0);
    CHECK(fence_lock_valid(l));
    fence_lock_on_lost(l, count_lost, NULL);
    advance(c, 99); /* the renewal is due after TTL/3 = 100 ms */
    CHECK(atomic_load(&lost_calls) == 0);
    CHECK(log_count(f, "LEASE.KEEPALIVE 9") == 0);
    advance(c, 1); /* due: KEEPALIVE, NOLEASE, lost */
    CHECK(atomic_load(&lost_calls) == 1);
    CHECK(atomic_load(&lost_rc) == FENCE_ENOLEASE);
    CHECK(atomic_load(&release_in_cb_rc) == FENCE_EINVAL);
    CHECK(!fence_lock_valid(l));
    CHECK(fence_lock_valid_until(l) == 0);
    advance(c, 400); /* well past the TTL: nothing more happens */
    advance(c, 400);
    CHECK(atomic_load(&lost_calls) == 1);
    CHECK(log_count(f, "LEASE.KEEPALIVE 9") == 1);
    CHECK(fence_lock_release(l) == 0);
    fence_client_close(c);
}

/* KEEPALIVE never answered: the lease counts as lost at valid-until. */
static const char *h_ka_hang(fake *f, int n, int argc, char argv[][ARG_LEN])
{
    if (strcmp(argv[0], "LEASE.KEEPALIVE") == 0)
        return "";
    return h_leader(f, n, argc, argv);
}

static void test_keepalive_deadline(void)
{
    fake *f = fake_start(h_ka_hang);
    f->hang_ms = 2000;
    char a[64];
    fence_client *c = client_clocked(addr_of(f, a), 1000);
    fence_lock *l = NULL;
    uint64_t before = atomic_load(&fake_now);
    REQUIRE(fence_lock_acquire(c, "d", 300, 0, &l) == 0);
    uint64_t vu = fence_lock_valid_until(l);
    /* send time + 300 - margin (35) */
    CHECK(vu >= before + 265);
    CHECK(vu <= atomic_load(&fake_now) + 265);
    fence_lock_on_lost(l, count_lost, NULL);
    advance(c, 150); /* renewal due: KEEPALIVE sent, never answered */
    CHECK(atomic_load(&lost_calls) == 0);
    CHECK(fence_lock_valid(l));
    advance(c, vu - 1 - atomic_load(&fake_now)); /* 1 ms before valid-until */
    CHECK(atomic_load(&lost_calls) == 0);
    CHECK(fence_lock_valid(l));
    advance(c, 1); /* at valid-until */
    CHECK(atomic_load(&lost_calls) == 1);
    CHECK(atomic_load(&lost_rc) == FENCE_ELEASELOST);
    /* Declared at valid-until, not after. */
    CHECK(atomic_load(&lost_at) >= vu);
    CHECK(atomic_load(&lost_at) <= vu);
    CHECK(!fence_lock_valid(l));
    fence_lock_release(l);
    fence_client_close(c);
}

/* Renewals keep a 300 ms lease valid for a second. */
static void test_keepalive_renews(void)
{
    fake *f = fake_start(h_leader);
    char a[64];
    fence_client *c = client_clocked(addr_of(f, a), 1000);
    fence_lock *l = NULL;
    REQUIRE(fence_lock_acquire(c, "r", 300, 0, &l) == 0);
    fence_lock_on_lost(l, count_lost, NULL);
    uint64_t first = fence_lock_valid_until(l);
    for (int i = 0; i < 20; i++)
        advance(c, 50); /* a second, in steps shorter than TTL/3 */
    CHECK(fence_lock_valid(l));
    CHECK(fence_lock_valid_until(l) > first + 500);
    CHECK(atomic_load(&lost_calls) == 0);
    int n = log_count(f, "LEASE.KEEPALIVE 9");
    CHECK(n >= 3);
    CHECK(n <= 12);
    CHECK(fence_lock_release(l) == 0);
    int after = log_count(f, "LEASE.KEEPALIVE 9");
    advance(c, 300);
    advance(c, 300);
    CHECK(log_count(f, "LEASE.KEEPALIVE 9") == after); /* stopped */
    fence_client_close(c);
}

/* ACQUIRE answered 200 ms (of the fake clock) after it was sent:
 * valid-until counts from the send. */
static const char *h_slow(fake *f, int n, int argc, char argv[][ARG_LEN])
{
    if (strcmp(argv[0], "ACQUIRE") == 0)
        atomic_fetch_add(&fake_now, 200);
    return h_leader(f, n, argc, argv);
}

static void test_valid_until_from_send(void)
{
    fake *f = fake_start(h_slow);
    char a[64];
    fence_client *c = client_clocked(addr_of(f, a), 2000);
    fence_lock *l = NULL;
    uint64_t t0 = atomic_load(&fake_now);
    REQUIRE(fence_lock_acquire(c, "s", 10000, 0, &l) == 0);
    uint64_t t1 = atomic_load(&fake_now);
    CHECK(t1 - t0 >= 190);
    uint64_t vu = fence_lock_valid_until(l);
    CHECK(vu <= t0 + 10000 - 1005 + 5); /* from the send, not the reply */
    CHECK(vu >= t0 + 10000 - 1005 - 50);
    fence_lock_release(l);
    fence_client_close(c);
}

/* Long waits: LEASE.GRANT, keepalive during LOCK WAIT, LOCK, release with
 * UNLOCK and LEASE.REVOKE. */
static const char *h_grant(fake *f, int n, int argc, char argv[][ARG_LEN])
{
    if (strcmp(argv[0], "LEASE.GRANT") == 0)
        return ":41\r\n";
    if (strcmp(argv[0], "LOCK") == 0) {
        /* Queued for 700 ms of the fake clock, longer than the 300 ms TTL:
         * the keepalive thread renews meanwhile. */
        for (int i = 0; i < 14; i++)
            advance(clocked, 50);
        return ":99\r\n";
    }
    if (strcmp(argv[0], "LEASE.REVOKE") == 0)
        return "+OK\r\n";
    return h_leader(f, n, argc, argv);
}

static void test_long_wait_keeps_lease(void)
{
    fake *f = fake_start(h_grant);
    char a[64];
    fence_client *c = client_clocked(addr_of(f, a), 2000);
    fence_lock *l = NULL;
    REQUIRE(fence_lock_acquire(c, "w", 300, 5000, &l) == 0);
    CHECK_EQ_U64(fence_lock_token(l), 99);
    CHECK_EQ_U64(fence_lock_lease(l), 41);
    CHECK(fence_lock_valid(l));
    CHECK(log_count(f, "LEASE.GRANT 300 REQID ") == 1);
    CHECK(log_count(f, "LOCK w 41 WAIT 5000 REQID ") == 1);
    CHECK(log_count(f, "LEASE.KEEPALIVE 41") >= 2); /* renewed while queued */
    CHECK(fence_lock_release(l) == 0);
    CHECK(log_count(f, "UNLOCK w 99") == 1);
    CHECK(log_count(f, "LEASE.REVOKE 41") == 1);
    fence_client_close(c);
}

/* LOCK WAIT: the first connection is dropped while queued; the retry
 * (same REQID) gets the nil of the cancelled wait; then a new request. */
static const char *h_cancelled(fake *f, int n, int argc, char argv[][ARG_LEN])
{
    if (strcmp(argv[0], "LOCK") == 0) {
        int k = atomic_fetch_add(&f->count[0], 1);
        if (k == 0) {
            usleep(100000);
            return NULL;
        }
        return k == 1 ? "$-1\r\n" : ":55\r\n";
    }
    return h_grant(f, n, argc, argv);
}

static void test_cancelled_wait_reasked(void)
{
    fake *f = fake_start(h_cancelled);
    char a[64];
    fence_client *c = client_for(addr_of(f, a), 2000);
    uint64_t token = 0;
    REQUIRE(fence_lease_lock(c, 41, "q", 5000, &token) == 0);
    CHECK_EQ_U64(token, 55);
    char e[3][128], r[3][128];
    for (int i = 0; i < 3; i++) {
        log_get(f, i, e[i]);
        reqid_of(e[i], r[i]);
    }
    CHECK(strncmp(e[0], "LOCK q 41 WAIT 5000 REQID ", 26) == 0);
    CHECK_STR(r[0], r[1]);           /* the retry */
    CHECK(strcmp(r[1], r[2]) != 0);  /* a new request */
    CHECK(strncmp(e[2], "LOCK q 41 WAIT 4", 16) == 0); /* for the time left */
    fence_client_close(c);
}

/* Several threads share one client against the fake leader. */
static fence_client *shared;
static void *thread_cycles(void *arg)
{
    (void)arg;
    for (int i = 0; i < 50; i++) {
        fence_lock *l = NULL;
        if (fence_lock_acquire(shared, "m", 10000, 0, &l) != 0)
            return (void *)1;
        if (fence_lock_release(l) != 0)
            return (void *)1;
    }
    return NULL;
}

static void test_threads_share_client(void)
{
    fake *f = fake_start(h_leader);
    char a[64];
    shared = client_for(addr_of(f, a), 2000);
    pthread_t t[8];
    for (int i = 0; i < 8; i++)
        pthread_create(&t[i], NULL, thread_cycles, NULL);
    int bad = 0;
    for (int i = 0; i < 8; i++) {
        void *rv;
        pthread_join(t[i], &rv);
        bad += rv != NULL;
    }
    CHECK(bad == 0);
    CHECK(log_count(f, "ACQUIRE m") == 400);
    fence_client_close(shared);
}

/* fence-store: OK, STALE with the highest token, nil FGET. */
static const char *h_store(fake *f, int n, int argc, char argv[][ARG_LEN])
{
    (void)f;
    (void)n;
    (void)argc;
    if (strcmp(argv[0], "FSET") == 0 || strcmp(argv[0], "FENCE.ADMIT") == 0)
        return strcmp(argv[2], "5") >= 0 && strlen(argv[2]) == 1 ? "+OK\r\n"
                                                                   : "-STALE 3 5\r\n";
    if (strcmp(argv[0], "FGET") == 0)
        return strcmp(argv[1], "k") == 0 ? "$3\r\nval\r\n" : "$-1\r\n";
    return "-ERR unknown command\r\n";
}

/* The signed token the fake hands out (shape only; nothing verifies it). */
#define FAKE_SIGNED "34.k1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"

/* A verifying fence-store: a token with a '.' is "signed" (FAKE_SIGNED is
 * good, anything else BADTOKEN); a plain number is BADTOKEN too. */
static const char *h_store_signed(fake *f, int n, int argc, char argv[][ARG_LEN])
{
    (void)f;
    (void)n;
    (void)argc;
    if (strcmp(argv[0], "FSET") == 0 || strcmp(argv[0], "FENCE.ADMIT") == 0)
        return strcmp(argv[2], FAKE_SIGNED) == 0
                   ? "+OK\r\n"
                   : "-BADTOKEN the signature does not match\r\n";
    return "-ERR unknown command\r\n";
}

/* The signed-token store calls send the string as is and map BADTOKEN. */
static void test_store_signed(void)
{
    fake *f = fake_start(h_store_signed);
    char a[64];
    fence_store *s = NULL;
    REQUIRE(fence_store_open(addr_of(f, a), 1000, &s) == 0);
    CHECK(fence_store_set_signed(s, "orders", FAKE_SIGNED, "k", 1, "v", 1, NULL) == 0);
    CHECK(log_count(f, "FSET orders 34.k1.AAAA") == 1);
    CHECK(fence_store_admit_signed(s, "orders", FAKE_SIGNED, NULL) == 0);
    CHECK(fence_store_set_signed(s, "orders", "35.k1.AAAA", "k", 1, "v", 1, NULL) ==
          FENCE_EBADTOKEN);
    CHECK(strstr(fence_store_errmsg(s), "BADTOKEN") != NULL);
    CHECK(fence_store_set(s, "orders", 34, "k", 1, "v", 1, NULL) == FENCE_EBADTOKEN);
    CHECK(fence_store_admit_signed(s, "orders", "34", NULL) == FENCE_EINVAL);
    CHECK(fence_store_admit_signed(s, "orders", NULL, NULL) == FENCE_EINVAL);
    CHECK(log_count(f, "FENCE.ADMIT orders 34 ") == 0);
    fence_store_close(s);
}

static void test_store(void)
{
    fake *f = fake_start(h_store);
    char a[64];
    fence_store *s = NULL;
    REQUIRE(fence_store_open(addr_of(f, a), 1000, &s) == 0);
    uint64_t high = 0;
    CHECK(fence_store_set(s, "orders", 5, "k", 1, "v", 1, &high) == 0);
    CHECK(fence_store_set(s, "orders", 3, "k", 1, "v", 1, &high) == FENCE_ESTALE);
    CHECK_EQ_U64(high, 5);
    CHECK(strstr(fence_store_errmsg(s), "token 3") != NULL);
    CHECK(fence_store_admit(s, "orders", 3, &high) == FENCE_ESTALE);
    CHECK(fence_store_admit(s, "orders", 6, NULL) == 0);
    char *v = NULL;
    size_t len = 0;
    CHECK(fence_store_get(s, "k", 1, &v, &len) == 0);
    CHECK(v != NULL && len == 3 && strcmp(v, "val") == 0);
    fence_free(v);
    CHECK(fence_store_get(s, "nokey", 5, &v, &len) == 0);
    CHECK(v == NULL);
    CHECK(fence_store_set(s, "", 5, "k", 1, "v", 1, NULL) == FENCE_EINVAL);
    CHECK(log_count(f, "FSET orders 5 k v") == 1);
    fence_store_close(s);
    CHECK(fence_store_open("bad address", 0, &s) == FENCE_EINVAL);
}

/* A signing leader: a request ending in SIGNED gets a signed token string
 * (ACQUIRE: [string, lease]); lock names "bad-*" get malformed replies. */
static const char *h_signed(fake *f, int n, int argc, char argv[][ARG_LEN])
{
    bool sign = strcmp(argv[argc - 1], "SIGNED") == 0;
    static __thread char reply[256];
    const char *tok = FAKE_SIGNED;
    if (argc > 1 && strcmp(argv[1], "bad-int") == 0)
        tok = NULL;
    else if (argc > 1 && strcmp(argv[1], "bad-zero") == 0)
        tok = "034.k1.x";
    else if (argc > 1 && strcmp(argv[1], "bad-space") == 0)
        tok = "34.k1 x";
    else if (argc > 1 && strcmp(argv[1], "bad-nodot") == 0)
        tok = "34";
    if (strcmp(argv[0], "LEASE.GRANT") == 0)
        return ":9\r\n";
    if (strcmp(argv[0], "LOCK") == 0 && sign) {
        if (tok == NULL)
            return ":34\r\n";
        snprintf(reply, sizeof(reply), "$%zu\r\n%s\r\n", strlen(tok), tok);
        return reply;
    }
    if (strcmp(argv[0], "LOCK") == 0)
        return ":34\r\n";
    if (strcmp(argv[0], "ACQUIRE") == 0 && sign) {
        if (tok == NULL)
            return "*2\r\n:34\r\n:9\r\n";
        snprintf(reply, sizeof(reply), "*2\r\n$%zu\r\n%s\r\n:9\r\n",
                 strlen(tok), tok);
        return reply;
    }
    if (strcmp(argv[0], "LEASE.REVOKE") == 0)
        return "+OK\r\n";
    return h_leader(f, n, argc, argv);
}

/* FENCE_LOCK_SIGNED sends SIGNED on ACQUIRE and on LOCK, and the handle
 * keeps the string; without it nothing changes; malformed signed replies
 * are protocol errors; the raw calls check their buffer. */
static void test_signed(void)
{
    fake *f = fake_start(h_signed);
    char a[64];
    fence_client *c = client_for(addr_of(f, a), 2000);
    fence_lock *l = NULL;
    REQUIRE(fence_lock_acquire_ex(c, "s", 10000, 0, FENCE_LOCK_SIGNED, &l) == 0);
    CHECK_EQ_U64(fence_lock_token(l), 34);
    CHECK_EQ_U64(fence_lock_lease(l), 9);
    CHECK_STR(fence_lock_signed_token(l), FAKE_SIGNED);
    char e[128];
    log_get(f, 0, e);
    CHECK(strncmp(e, "ACQUIRE s 10000 REQID ", 22) == 0);
    CHECK(strcmp(e + strlen(e) - 7, " SIGNED") == 0);
    fence_lock_release(l);
    /* A long wait goes through LEASE.GRANT + LOCK ... SIGNED. */
    REQUIRE(fence_lock_acquire_ex(c, "s2", 10000, 60000, FENCE_LOCK_SIGNED, &l) == 0);
    CHECK_EQ_U64(fence_lock_token(l), 34);
    CHECK_STR(fence_lock_signed_token(l), FAKE_SIGNED);
    CHECK(log_count(f, "LOCK s2 9 WAIT 60000 REQID ") == 1);
    fence_lock_release(l);
    /* Unsigned: no SIGNED argument, no string. */
    REQUIRE(fence_lock_acquire(c, "u", 10000, 0, &l) == 0);
    CHECK(fence_lock_signed_token(l) == NULL);
    fence_lock_release(l);
    CHECK(log_count(f, "ACQUIRE u 10000 REQID ") == 1);
    int nsigned = 0;
    for (int i = 0; i < 64; i++) {
        log_get(f, i, e);
        if (strncmp(e, "ACQUIRE u ", 10) == 0 && strstr(e, "SIGNED") != NULL)
            nsigned++;
    }
    CHECK(nsigned == 0);
    /* Malformed signed replies. */
    const char *bad[] = {"bad-int", "bad-zero", "bad-space", "bad-nodot"};
    for (int i = 0; i < 4; i++) {
        l = NULL;
        CHECK(fence_lock_acquire_ex(c, bad[i], 10000, 0, FENCE_LOCK_SIGNED, &l) ==
              FENCE_EPROTO);
        CHECK(l == NULL);
        CHECK(fence_lock_acquire_ex(c, bad[i], 10000, 60000, FENCE_LOCK_SIGNED, &l) ==
              FENCE_EPROTO);
    }
    CHECK(fence_lock_acquire_ex(c, "s", 10000, 0, 0x80, &l) == FENCE_EINVAL);
    /* The raw calls. */
    char buf[FENCE_SIGNED_TOKEN_BUF_SIZE];
    uint64_t t = 0, lease = 0;
    CHECK(fence_lock_acquire_raw_signed(c, "r", 10000, 0, &t, &lease, buf,
                                        sizeof(buf)) == 0);
    CHECK_EQ_U64(t, 34);
    CHECK_EQ_U64(lease, 9);
    CHECK_STR(buf, FAKE_SIGNED);
    t = 0;
    CHECK(fence_lease_lock_signed(c, 9, "r", 0, &t, buf, sizeof(buf)) == 0);
    CHECK_EQ_U64(t, 34);
    CHECK(log_count(f, "LOCK r 9 REQID ") == 1);
    CHECK(fence_lease_lock_signed(c, 9, "r", 0, &t, buf, 20) == FENCE_EINVAL);
    CHECK(fence_lock_acquire_raw_signed(c, "r", 10000, 0, &t, &lease, NULL, 0) ==
          FENCE_EINVAL);
    fence_client_close(c);
}

/* A server with a login, like Redis with an ACL: alice / s3cret.  Before
 * AUTH everything gets NOAUTH.  Its first PING after a login drops the
 * connection (count[0]), so a reconnect must log in again. */
static const char *h_auth(fake *f, int n, int argc, char argv[][ARG_LEN])
{
    (void)n;
    static __thread bool authed; /* one per connection thread */
    if (strcmp(argv[0], "AUTH") == 0) {
        if (argc == 3 && strcmp(argv[1], "alice") == 0 && strcmp(argv[2], "s3cret") == 0) {
            authed = true;
            return "+OK\r\n";
        }
        return "-WRONGPASS invalid username-password pair or user is disabled.\r\n";
    }
    if (!authed)
        return "-NOAUTH Authentication required.\r\n";
    if (strcmp(argv[0], "PING") == 0)
        return atomic_fetch_add(&f->count[0], 1) == 0 ? NULL : "+PONG\r\n";
    return "-ERR unknown\r\n";
}

/* Open a client with a login (user may be NULL). */
static int client_auth(const char *servers, const char *user, const char *pass,
                       fence_client **out)
{
    fence_client_opts o;
    fence_client_opts_init(&o);
    o.servers = servers;
    o.timeout_ms = 2000;
    o.backoff_ms_min = 5;
    o.backoff_ms_max = 50;
    o.user = user;
    o.password = pass;
    return fence_client_open(&o, out);
}

/* AUTH user password goes first on every new connection; a refused or
 * missing login is FENCE_EAUTH, and the password is in no message. */
static void test_auth(void)
{
    fake *f = fake_start(h_auth);
    char fa[64];
    addr_of(f, fa);
    fence_client *c = NULL;
    REQUIRE(client_auth(fa, "alice", "s3cret", &c) == 0);
    CHECK_EQ_I64(0, fence_client_ping(c)); /* dropped once, re-logged in */
    fence_client_close(c);
    char e0[128], e1[128], e2[128];
    log_get(f, 0, e0);
    log_get(f, 1, e1);
    log_get(f, 2, e2);
    CHECK_STR("AUTH alice s3cret", e0);
    CHECK_STR("PING", e1);
    CHECK_STR("AUTH alice s3cret", e2);
    CHECK_EQ_I64(2, log_count(f, "AUTH"));

    REQUIRE(client_auth(fa, "alice", "wrong-pw-123", &c) == 0);
    CHECK_EQ_I64(FENCE_EAUTH, fence_client_ping(c));
    CHECK(strstr(fence_client_errmsg(c), "WRONGPASS") != NULL);
    CHECK(strstr(fence_client_errmsg(c), "wrong-pw-123") == NULL);
    fence_client_close(c);

    REQUIRE(client_auth(fa, NULL, NULL, &c) == 0);
    CHECK_EQ_I64(FENCE_EAUTH, fence_client_ping(c));
    CHECK(strstr(fence_client_errmsg(c), "NOAUTH") != NULL);
    fence_client_close(c);

    /* "AUTH password" (no user) is what this server refuses too. */
    REQUIRE(client_auth(fa, NULL, "s3cret", &c) == 0);
    CHECK_EQ_I64(FENCE_EAUTH, fence_client_ping(c));
    fence_client_close(c);
    CHECK_EQ_I64(1, log_count(f, "AUTH s3cret"));

    /* A user without a password, and TLS files without tls, are refused
     * at open. */
    c = NULL;
    CHECK_EQ_I64(FENCE_EINVAL, client_auth(fa, "alice", NULL, &c));
    CHECK(c == NULL);
    fence_client_opts o;
    fence_client_opts_init(&o);
    o.servers = fa;
    o.tls_ca_file = "/nonexistent/ca.pem";
    CHECK_EQ_I64(FENCE_EINVAL, fence_client_open(&o, &c));
    o.tls = true;
    CHECK_EQ_I64(FENCE_EINVAL, fence_client_open(&o, &c));
    CHECK(strstr(fence_client_errmsg(NULL), "/nonexistent/ca.pem") != NULL);
    o.tls_ca_file = NULL;
    o.tls_cert_file = "/nonexistent/cert.pem";
    CHECK_EQ_I64(FENCE_EINVAL, fence_client_open(&o, &c));
}

/* A TLS client against a plaintext server fails as unreachable, with the
 * TLS error in the message, and does not hang. */
static void test_tls_to_plain(void)
{
    fake *f = fake_start(h_leader);
    char fa[64];
    addr_of(f, fa);
    fence_client_opts o;
    fence_client_opts_init(&o);
    o.servers = fa;
    o.timeout_ms = 1500;
    o.connect_timeout_ms = 500;
    o.tls = true;
    fence_client *c = NULL;
    REQUIRE(fence_client_open(&o, &c) == 0);
    int rc = fence_client_ping(c);
    CHECK(rc == FENCE_EUNREACHABLE || rc == FENCE_ETIMEOUT);
    CHECK(strstr(fence_client_errmsg(c), "TLS") != NULL);
    fence_client_close(c);
}

int main(void)
{
    signal(SIGPIPE, SIG_DFL); /* the library must cope without SIG_IGN */
    TEST_RUN(test_redirect);
    TEST_RUN(test_redirect_loop);
    TEST_RUN(test_tryagain_same_reqid);
    TEST_RUN(test_reconnect_same_reqid);
    TEST_RUN(test_unreachable);
    TEST_RUN(test_busy);
    TEST_RUN(test_timeout);
    TEST_RUN(test_keepalive_noleas);
    TEST_RUN(test_keepalive_deadline);
    TEST_RUN(test_keepalive_renews);
    TEST_RUN(test_valid_until_from_send);
    TEST_RUN(test_long_wait_keeps_lease);
    TEST_RUN(test_cancelled_wait_reasked);
    TEST_RUN(test_threads_share_client);
    TEST_RUN(test_store);
    TEST_RUN(test_signed);
    TEST_RUN(test_store_signed);
    TEST_RUN(test_auth);
    TEST_RUN(test_tls_to_plain);
    return TEST_DONE();
}
