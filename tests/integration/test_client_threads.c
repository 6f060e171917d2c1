/* The C API against a real fenced (and fence-store when $FENCE_STORE is
 * set), from several threads; built with ASan/UBSan (see mk/client.mk) and
 * run by test_client_threads.sh, which starts the servers and sets
 * $FENCE_SERVER. */
#include <pthread.h>
#include <stdatomic.h>

#include "../lib/test.h"
#include "fence.h"

/* A client on $FENCE_SERVER. */
static fence_client *client(void)
{
    fence_client_opts o;
    fence_client_opts_init(&o);
    o.timeout_ms = 10000;
    fence_client *c = NULL;
    REQUIRE(fence_client_open(&o, &c) == 0);
    return c;
}

/* Shared state of the mutual-exclusion test. */
static fence_client *shared;
static atomic_int holders;      /* threads inside the critical section */
static atomic_int violations;   /* times two were inside */
static atomic_int failures;     /* failed calls */
static uint64_t last_token;     /* token of the previous holder (under the lock) */
static atomic_int token_regressions; /* a holder's token not above the previous */

#define ROUNDS 25

/* Take the shared lock ROUNDS times through the shared client. */
static void *contend(void *arg)
{
    fence_client *c = arg ? arg : shared;
    for (int i = 0; i < ROUNDS; i++) {
        fence_lock *l = NULL;
        int rc = fence_lock_acquire(c, "threads.mutex", 5000, 5000, &l);
        if (rc != 0) {
            printf("#   acquire: %s: %s\n", fence_strerror(rc), fence_client_errmsg(c));
            atomic_fetch_add(&failures, 1);
            continue;
        }
        if (atomic_fetch_add(&holders, 1) != 0)
            atomic_fetch_add(&violations, 1);
        if (fence_lock_token(l) <= last_token)
            atomic_fetch_add(&token_regressions, 1);
        last_token = fence_lock_token(l);
        usleep(200);
        atomic_fetch_sub(&holders, 1);
        if (fence_lock_release(l) != 0)
            atomic_fetch_add(&failures, 1);
    }
    return NULL;
}

/* Eight threads on one client plus four with their own clients, all on one
 * lock: never two holders, tokens always increase, nothing fails. */
static void test_threads_mutual_exclusion(void)
{
    shared = client();
    fence_client *own[4];
    pthread_t t[12];
    for (int i = 0; i < 8; i++)
        REQUIRE(pthread_create(&t[i], NULL, contend, NULL) == 0);
    for (int i = 0; i < 4; i++) {
        own[i] = client();
        REQUIRE(pthread_create(&t[8 + i], NULL, contend, own[i]) == 0);
    }
    for (int i = 0; i < 12; i++)
        pthread_join(t[i], NULL);
    CHECK(atomic_load(&violations) == 0);
    CHECK(atomic_load(&token_regressions) == 0);
    CHECK(atomic_load(&failures) == 0);
    fence_lock_info li;
    CHECK(fence_lock_info_get(shared, "threads.mutex", &li) == 0);
    CHECK(!li.held);
    for (int i = 0; i < 4; i++)
        fence_client_close(own[i]);
    fence_client_close(shared);
}

/* Each thread its own lock through one client (uncontended, concurrent). */
static void *own_lock(void *arg)
{
    char name[32];
    snprintf(name, sizeof(name), "threads.own.%d", (int)(intptr_t)arg);
    for (int i = 0; i < ROUNDS; i++) {
        fence_lock *l = NULL;
        if (fence_lock_try(shared, name, 3000, &l) != 0) {
            atomic_fetch_add(&failures, 1);
            continue;
        }
        if (!fence_lock_valid(l))
            atomic_fetch_add(&failures, 1);
        if (fence_lock_release(l) != 0)
            atomic_fetch_add(&failures, 1);
    }
    return NULL;
}

static void test_threads_own_locks(void)
{
    shared = client();
    pthread_t t[8];
    for (intptr_t i = 0; i < 8; i++)
        REQUIRE(pthread_create(&t[i], NULL, own_lock, (void *)i) == 0);
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
    CHECK(atomic_load(&failures) == 0);
    fence_client_close(shared);
}

/* Keepalive holds a 500 ms lock for 3 s; another client cannot take it;
 * after release it can, with a higher token. */
static void test_keepalive_holds(void)
{
    fence_client *a = client();
    fence_client *b = client();
    fence_lock *l = NULL;
    /* 1 s TTL over 3.6 s: renewals must keep it (a 500 ms one failed now
     * and then when other tests loaded the shared disk). */
    REQUIRE(fence_lock_acquire(a, "threads.ka", 1000, 0, &l) == 0);
    uint64_t tok = fence_lock_token(l);
    for (int i = 0; i < 6; i++) {
        usleep(600000);
        fence_lock *other = NULL;
        CHECK(fence_lock_try(b, "threads.ka", 500, &other) == FENCE_EBUSY);
        CHECK(fence_lock_valid(l));
        fence_lock_info li;
        CHECK(fence_lock_info_get(b, "threads.ka", &li) == 0);
        CHECK(li.held && li.token == tok);
    }
    CHECK(fence_lock_release(l) == 0);
    fence_lock *other = NULL;
    REQUIRE(fence_lock_try(b, "threads.ka", 500, &other) == 0);
    CHECK(fence_lock_token(other) > tok);
    CHECK(fence_lock_release(other) == 0);
    fence_client_close(a);
    fence_client_close(b);
}

static atomic_int lost_calls;
static atomic_int lost_rc;

static void on_lost(fence_lock *l, int rc, void *arg)
{
    (void)l;
    (void)arg;
    atomic_fetch_add(&lost_calls, 1);
    atomic_store(&lost_rc, rc);
}

/* Revoking the lease behind the holder's back: the keepalive sees NOLEASE,
 * the callback runs once, and the lock goes to the next client. */
static void test_lost_callback(void)
{
    fence_client *a = client();
    fence_client *b = client();
    fence_lock *l = NULL;
    REQUIRE(fence_lock_acquire(a, "threads.lost", 900, 0, &l) == 0);
    fence_lock_on_lost(l, on_lost, NULL);
    CHECK(fence_lease_revoke(b, fence_lock_lease(l)) == 0);
    for (int i = 0; i < 300 && atomic_load(&lost_calls) == 0; i++)
        usleep(10000);
    CHECK(atomic_load(&lost_calls) == 1);
    CHECK(atomic_load(&lost_rc) == FENCE_ENOLEASE);
    CHECK(!fence_lock_valid(l));
    fence_lock *next = NULL;
    REQUIRE(fence_lock_try(b, "threads.lost", 900, &next) == 0);
    CHECK(fence_lock_token(next) > fence_lock_token(l));
    CHECK(fence_lock_release(l) == 0); /* already gone: fine */
    CHECK(fence_lock_release(next) == 0);
    usleep(400000);
    CHECK(atomic_load(&lost_calls) == 1);
    fence_client_close(a);
    fence_client_close(b);
}

/* Releases a lock after 3.2 s (a helper thread of test_long_wait). */
static void *release_later(void *arg)
{
    usleep(3200000);
    if (fence_lock_release(arg) != 0)
        atomic_fetch_add(&failures, 1);
    return NULL;
}

/* A wait longer than half the TTL: the lease is granted first and kept
 * alive while queued (3.2 s, three TTLs of 1 s: a durable renewal must land
 * within ~600 ms even when other tests load the shared disk); the lock is
 * handed over when the holder releases, and then kept alive too. */
static void test_long_wait(void)
{
    fence_client *a = client();
    fence_client *b = client();
    fence_lock *first = NULL, *second = NULL;
    REQUIRE(fence_lock_acquire(a, "threads.wait", 1000, 0, &first) == 0);
    uint64_t t1 = fence_lock_token(first);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, release_later, first) == 0);
    uint64_t t0 = fence_monotonic_ms();
    int rc = fence_lock_acquire(b, "threads.wait", 1000, 8000, &second);
    CHECK(rc == 0);
    CHECK(fence_monotonic_ms() - t0 >= 3000);
    pthread_join(t, NULL);
    CHECK(atomic_load(&failures) == 0);
    if (rc == 0) {
        CHECK(fence_lock_token(second) > t1);
        CHECK(fence_lock_valid(second));
        usleep(3200000); /* longer than three TTLs: kept alive */
        CHECK(fence_lock_valid(second));
        fence_lock_info li;
        CHECK(fence_lock_info_get(a, "threads.wait", &li) == 0);
        CHECK(li.held && li.token == fence_lock_token(second));
        CHECK(fence_lock_release(second) == 0);
    }
    fence_client_close(a);
    fence_client_close(b);
}

/* The plain protocol calls against the real server. */
static void test_plain_calls(void)
{
    fence_client *c = client();
    CHECK(fence_client_ping(c) == 0);
    uint64_t lease = 0, token = 0, ttl = 0;
    REQUIRE(fence_lease_grant(c, 5000, &lease) == 0);
    CHECK(fence_lease_lock(c, lease, "threads.plain", 0, &token) == 0);
    uint64_t again = 0;
    CHECK(fence_lease_lock(c, lease, "threads.plain", 0, &again) == 0);
    CHECK_EQ_U64(again, token); /* reentrant */
    fence_lease_info li;
    CHECK(fence_lease_info_get(c, lease, &li) == 0);
    CHECK_EQ_U64(li.ttl_ms, 5000);
    CHECK_EQ_U64(li.locks_held, 1);
    CHECK(fence_lease_keepalive(c, lease, &ttl) == 0);
    CHECK_EQ_U64(ttl, 5000);
    bool released = true;
    CHECK(fence_token_unlock(c, "threads.plain", token + 1000, &released) == 0);
    CHECK(!released);
    CHECK(fence_token_unlock(c, "threads.plain", token, &released) == 0);
    CHECK(released);
    CHECK(fence_lease_revoke(c, lease) == 0);
    CHECK(fence_lease_keepalive(c, lease, &ttl) == FENCE_ENOLEASE);
    CHECK(fence_lease_info_get(c, lease, &li) == FENCE_ENOLEASE);
    CHECK(fence_lease_lock(c, lease, "threads.plain", 0, &token) == FENCE_ENOLEASE);
    uint64_t t2 = 0, l2 = 0;
    CHECK(fence_lock_acquire_raw(c, "threads.plain", 2000, 0, &t2, &l2) == 0);
    CHECK(t2 > token);
    CHECK(fence_token_unlock(c, "threads.plain", t2, &released) == 0 && released);
    CHECK(fence_lease_keepalive(c, l2, &ttl) == FENCE_ENOLEASE); /* UNLOCK revoked it */
    char *info = NULL;
    CHECK(fence_server_info(c, &info) == 0);
    CHECK(info != NULL && strstr(info, "last_token:") != NULL);
    fence_free(info);
    fence_client_close(c);
}

/* fence-store: the lock's token is admitted, an older one is rejected with
 * the highest token, and the newer write stays. */
static void test_store(void)
{
    const char *addr = getenv("FENCE_STORE");
    if (addr == NULL || addr[0] == '\0') {
        printf("# no FENCE_STORE: skipping the fence-store checks\n");
        return;
    }
    fence_client *c = client();
    fence_store *s = NULL;
    REQUIRE(fence_store_open(addr, 5000, &s) == 0);
    fence_lock *l1 = NULL, *l2 = NULL;
    REQUIRE(fence_lock_try(c, "threads.store", 5000, &l1) == 0);
    uint64_t t1 = fence_lock_token(l1);
    CHECK(fence_store_set(s, "threads.store", t1, "k", 1, "one", 3, NULL) == 0);
    CHECK(fence_lock_release(l1) == 0);
    REQUIRE(fence_lock_try(c, "threads.store", 5000, &l2) == 0);
    uint64_t t2 = fence_lock_token(l2);
    CHECK(t2 > t1);
    CHECK(fence_store_admit(s, "threads.store", t2, NULL) == 0);
    CHECK(fence_store_set(s, "threads.store", t2, "k", 1, "two", 3, NULL) == 0);
    uint64_t high = 0;
    CHECK(fence_store_set(s, "threads.store", t1, "k", 1, "stale", 5, &high) == FENCE_ESTALE);
    CHECK_EQ_U64(high, t2);
    CHECK(fence_store_admit(s, "threads.store", t1, &high) == FENCE_ESTALE);
    char *v = NULL;
    size_t len = 0;
    CHECK(fence_store_get(s, "k", 1, &v, &len) == 0);
    CHECK(v != NULL && strcmp(v, "two") == 0);
    fence_free(v);
    CHECK(fence_lock_release(l2) == 0);
    fence_store_close(s);
    fence_client_close(c);
}

int main(void)
{
    if (getenv("FENCE_SERVER") == NULL) {
        printf("# skipped: FENCE_SERVER is not set (run test_client_threads.sh)\n");
        return 77;
    }
    TEST_RUN(test_plain_calls);
    TEST_RUN(test_threads_mutual_exclusion);
    TEST_RUN(test_threads_own_locks);
    TEST_RUN(test_keepalive_holds);
    TEST_RUN(test_lost_callback);
    TEST_RUN(test_long_wait);
    TEST_RUN(test_store);
    return TEST_DONE();
}
