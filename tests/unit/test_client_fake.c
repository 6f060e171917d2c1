/* libfence against tiny fake RESP servers (threads in this process, on
 * 127.0.0.1 ephemeral ports): NOTLEADER redirects, retries with the same
 * REQID after TRYAGAIN and lost connections, timeouts, the keepalive and
 * its lease-lost callback, valid-until from the send time, waits and
 * threads.  No real server needed.  (The fence-store helper, signed
 * tokens, AUTH and TLS: test_client_fake_store.c.) */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <time.h>

#include "../lib/test.h"
#include "libfence/testhook.h"
#include "client_fake.h"
#include "fence.h"

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
    return TEST_DONE();
}
