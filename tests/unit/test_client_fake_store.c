/* libfence against tiny fake RESP servers (client_fake.h): the fence-store
 * helper's STALE handling, signed tokens (the client's side), AUTH, and
 * TLS against a plaintext server.  No real server needed. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

#include "../lib/test.h"
#include "client_fake.h"
#include "fence.h"

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
    TEST_RUN(test_store);
    TEST_RUN(test_signed);
    TEST_RUN(test_store_signed);
    TEST_RUN(test_auth);
    TEST_RUN(test_tls_to_plain);
    return TEST_DONE();
}
