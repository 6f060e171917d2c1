/* libfence's semaphore calls against a tiny fake RESP server (client_fake.h):
 * the request each call sends, TRYAGAIN retried with the same REQID, an
 * early nil (a wait cancelled with its connection) asked again for the time
 * left with a fresh REQID, FENCE_EBUSY for a nil at the end of the wait,
 * and every malformed reply refused with FENCE_EPROTO (a slot outside 0..n-1,
 * token 0, a signed token without its shape, a SEM.INFO slot out of range),
 * WRONGTYPE as FENCE_ESERVER with the server's text. */
#include <string.h>
#include <unistd.h>

#include "../lib/test.h"
#include "client_fake.h"
#include "fence.h"

/* SEM.ACQUIRE: TRYAGAIN twice, then [1, 7]; SEM.RELEASE 1; SEM.INFO a
 * semaphore of 2 with slot 1 held. */
static const char *h_sem(fake *f, int n, int argc, char argv[][ARG_LEN])
{
    (void)n;
    (void)argc;
    if (strcmp(argv[0], "SEM.ACQUIRE") == 0 && strcmp(argv[1], "busy") == 0)
        return "$-1\r\n";
    if (strcmp(argv[0], "SEM.ACQUIRE") == 0 && strcmp(argv[1], "wt") == 0)
        return "-WRONGTYPE wt is a lock\r\n";
    if (strcmp(argv[0], "SEM.ACQUIRE") == 0)
        return atomic_fetch_add(&f->count[0], 1) < 2 ? "-TRYAGAIN not ready\r\n"
                                                     : "*2\r\n:1\r\n:7\r\n";
    if (strcmp(argv[0], "SEM.RELEASE") == 0)
        return ":1\r\n";
    if (strcmp(argv[0], "SEM.INFO") == 0 && strcmp(argv[1], "none") == 0)
        return "$-1\r\n";
    if (strcmp(argv[0], "SEM.INFO") == 0)
        return "*3\r\n:2\r\n*1\r\n*4\r\n:1\r\n:7\r\n:3\r\n:900\r\n:4\r\n";
    return "-ERR unknown\r\n";
}

static void test_requests_and_retries(void)
{
    fake *f = fake_start(h_sem);
    char a[64];
    fence_client *c = client_for(addr_of(f, a), 2000);
    uint32_t slot = 9;
    uint64_t token = 0;
    REQUIRE(fence_sem_acquire(c, "jobs", 2, 3, 0, &slot, &token) == 0);
    CHECK_EQ_U64(slot, 1);
    CHECK_EQ_U64(token, 7);
    char e[3][128], r[3][128];
    for (int i = 0; i < 3; i++) {
        log_get(f, i, e[i]);
        reqid_of(e[i], r[i]);
    }
    CHECK(strncmp(e[0], "SEM.ACQUIRE jobs 2 3 REQID ", 27) == 0);
    CHECK(r[0][0] != '\0');
    CHECK_STR(r[0], r[1]);
    CHECK_STR(r[1], r[2]);
    bool released = false;
    REQUIRE(fence_sem_release(c, "jobs", 1, 7, &released) == 0);
    CHECK(released);
    log_get(f, 3, e[0]);
    CHECK_STR(e[0], "SEM.RELEASE jobs 1 7");
    fence_sem_info si;
    fence_sem_slot sl[2];
    REQUIRE(fence_sem_info_get(c, "jobs", &si, sl, 2) == 0);
    CHECK(si.exists && si.n == 2 && si.slots_count == 1 && si.waiters == 4);
    CHECK(sl[0].slot == 1 && sl[0].token == 7 && sl[0].lease == 3 && sl[0].remaining_ms == 900);
    REQUIRE(fence_sem_info_get(c, "none", &si, sl, 2) == 0);
    CHECK(!si.exists);
    /* A nil with no wait: FENCE_EBUSY; WRONGTYPE: FENCE_ESERVER and its text. */
    CHECK_EQ_I64(fence_sem_acquire(c, "busy", 2, 3, 0, &slot, &token), FENCE_EBUSY);
    CHECK_EQ_I64(fence_sem_acquire(c, "wt", 2, 3, 0, &slot, &token), FENCE_ESERVER);
    CHECK(strstr(fence_client_errmsg(c), "WRONGTYPE wt is a lock") != NULL);
    fence_client_close(c);
}

/* The first SEM.ACQUIRE ... WAIT is dropped (its connection closes), its
 * retry gets the early nil of the cancelled wait, the new request [0, 55]. */
static const char *h_cancelled(fake *f, int n, int argc, char argv[][ARG_LEN])
{
    (void)n;
    (void)argc;
    if (strcmp(argv[0], "SEM.ACQUIRE") != 0)
        return "-ERR unknown\r\n";
    int k = atomic_fetch_add(&f->count[0], 1);
    if (k == 0) {
        usleep(100000);
        return NULL;
    }
    return k == 1 ? "$-1\r\n" : "*2\r\n:0\r\n:55\r\n";
}

static void test_cancelled_wait_reasked(void)
{
    fake *f = fake_start(h_cancelled);
    char a[64];
    fence_client *c = client_for(addr_of(f, a), 2000);
    uint32_t slot = 9;
    uint64_t token = 0;
    REQUIRE(fence_sem_acquire(c, "q", 4, 41, 5000, &slot, &token) == 0);
    CHECK_EQ_U64(slot, 0);
    CHECK_EQ_U64(token, 55);
    char e[3][128], r[3][128];
    for (int i = 0; i < 3; i++) {
        log_get(f, i, e[i]);
        reqid_of(e[i], r[i]);
    }
    CHECK(strncmp(e[0], "SEM.ACQUIRE q 4 41 WAIT 5000 REQID ", 35) == 0);
    CHECK_STR(r[0], r[1]);          /* the retry */
    CHECK(strcmp(r[1], r[2]) != 0); /* a new request */
    CHECK(strncmp(e[2], "SEM.ACQUIRE q 4 41 WAIT 4", 25) == 0); /* for the time left */
    fence_client_close(c);
}

/* Malformed replies, chosen by the name. */
static const char *h_bad(fake *f, int n, int argc, char argv[][ARG_LEN])
{
    (void)f;
    (void)n;
    (void)argc;
    const char *nm = argv[1];
    if (strcmp(argv[0], "SEM.ACQUIRE") == 0) {
        if (strcmp(nm, "slot") == 0)
            return "*2\r\n:2\r\n:7\r\n"; /* slot 2 of n = 2 */
        if (strcmp(nm, "zero") == 0)
            return "*2\r\n:0\r\n:0\r\n";
        if (strcmp(nm, "three") == 0)
            return "*3\r\n:0\r\n:7\r\n:1\r\n";
        if (strcmp(nm, "signed") == 0)
            return "*2\r\n:0\r\n$6\r\nnot ok\r\n";
        if (strcmp(nm, "good") == 0)
            return "*2\r\n:1\r\n$12\r\n7.k1.abcdefg\r\n";
        return ":7\r\n";
    }
    if (strcmp(argv[0], "SEM.INFO") == 0)
        return strcmp(nm, "slot") == 0 ? "*3\r\n:2\r\n*1\r\n*4\r\n:5\r\n:7\r\n:3\r\n:9\r\n:0\r\n"
                                       : "*3\r\n:0\r\n*0\r\n:0\r\n"; /* n = 0 */
    if (strcmp(argv[0], "SEM.RELEASE") == 0)
        return ":2\r\n";
    return "-ERR unknown\r\n";
}

static void test_malformed_replies(void)
{
    fake *f = fake_start(h_bad);
    char a[64];
    fence_client *c = client_for(addr_of(f, a), 2000);
    uint32_t slot = 0;
    uint64_t token = 0;
    const char *bad[] = {"slot", "zero", "three", "int"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK_EQ_I64(fence_sem_acquire(c, bad[i], 2, 3, 0, &slot, &token), FENCE_EPROTO);
    char sbuf[FENCE_SIGNED_TOKEN_BUF_SIZE];
    CHECK_EQ_I64(fence_sem_acquire_signed(c, "signed", 2, 3, 0, &slot, &token, sbuf,
                                          sizeof(sbuf)),
                 FENCE_EPROTO);
    CHECK_EQ_I64(fence_sem_acquire_signed(c, "good", 2, 3, 0, &slot, &token, sbuf,
                                          sizeof(sbuf)),
                 0);
    CHECK(slot == 1 && token == 7);
    CHECK_STR(sbuf, "7.k1.abcdefg");
    fence_sem_info si;
    CHECK_EQ_I64(fence_sem_info_get(c, "slot", &si, NULL, 0), FENCE_EPROTO);
    CHECK(!si.exists);
    CHECK_EQ_I64(fence_sem_info_get(c, "nzero", &si, NULL, 0), FENCE_EPROTO);
    CHECK_EQ_I64(fence_sem_release(c, "x", 0, 1, NULL), FENCE_EPROTO);
    fence_client_close(c);
}

int main(void)
{
    TEST_RUN(test_requests_and_retries);
    TEST_RUN(test_cancelled_wait_reasked);
    TEST_RUN(test_malformed_replies);
    return TEST_DONE();
}
