/* src/net/conn: the shared connection layer on a real libuv loop and
 * real sockets (127.0.0.1, an ephemeral port): replies leave in request
 * order whatever order the daemon fills its slots in, the pipeline limit
 * pauses parsing, max-clients refuses politely, protocol errors and QUIT
 * close after the reply, an oversized request is refused, and a slot
 * orphaned by a closed connection can still be answered (then freed);
 * before login only small requests parse, and a held connection answers
 * (and parses what waits) only when its hold ends. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>

#include "net/conn.h"
#include "../lib/test.h"

/* What the test daemon has seen. */
static fence_net net;
static fence_net_slot *slots[64];  /* deferred requests, in arrival order */
static char first_arg[64][32];     /* their first argument */
static int n_requests;             /* requests handed to on_request */
static int n_orphans;              /* slots kept by on_slot_orphan */
static bool defer = true;          /* answer later (slot) or at once */
static bool prelogin;              /* start() with the pre-login limits */

/* The daemon: QUIT answers +OK and closes after it; NOW answers at once;
 * everything else gets a slot (or an immediate echo when !defer). */
static void on_request(void *ctx, fence_net_conn *c, const fence_resp_msg *m)
{
    (void)ctx;
    int i = n_requests++;
    snprintf(first_arg[i], sizeof(first_arg[i]), "%.*s",
             (int)(m->argc > 1 ? m->argv[1].len : m->argv[0].len),
             m->argc > 1 ? m->argv[1].ptr : m->argv[0].ptr);
    if (m->argv[0].len == 5 && memcmp(m->argv[0].ptr, "TRUST", 5) == 0) {
        fence__net_conn_trust(c, true); /* as a login does */
        fence__net_reply(c, "+T\r\n", 4);
        return;
    }
    if (m->argv[0].len == 4 && memcmp(m->argv[0].ptr, "HOLD", 4) == 0) {
        fence__net_conn_hold(c, 200); /* as a failed login does */
        fence__net_reply(c, "+H\r\n", 4);
        return;
    }
    if (m->argv[0].len == 4 && memcmp(m->argv[0].ptr, "QUIT", 4) == 0) {
        fence__net_reply(c, "+OK\r\n", 5);
        fence__net_close_after_flush(c);
        return;
    }
    if (!defer || (m->argv[0].len == 3 && memcmp(m->argv[0].ptr, "NOW", 3) == 0)) {
        char buf[64];
        int n = snprintf(buf, sizeof(buf), "+%s\r\n", first_arg[i]);
        fence__net_reply(c, buf, (size_t)n);
        return;
    }
    slots[i] = fence__net_slot_new(c);
    REQUIRE(slots[i] != NULL);
}

/* Keep every orphaned slot (the daemon answers it later). */
static bool on_orphan(void *ctx, fence_net_slot *s)
{
    (void)ctx;
    (void)s;
    n_orphans++;
    return true;
}

/* Start the layer on the default loop, listening on an ephemeral port;
 * returns the port. */
static int start(uint64_t max_clients, uint32_t max_pipeline, size_t rbuf_max)
{
    fence_net_limits lim;
    memset(&lim, 0, sizeof(lim));
    lim.max_clients = max_clients;
    lim.rbuf_max = rbuf_max;
    lim.max_pipeline = max_pipeline;
    lim.max_obuf = 1 << 20;
    fence_resp_limits_default(&lim.resp);
    lim.resp.bulk_max = 1 << 20;
    if (prelogin)
        fence__net_guard_limits(&lim, 0, 0, 0, 0, true);
    fence_net_hooks hooks;
    memset(&hooks, 0, sizeof(hooks));
    hooks.on_request = on_request;
    hooks.on_slot_orphan = on_orphan;
    hooks.refuse_msg = "max clients (1) reached";
    REQUIRE(fence__net_init(&net, uv_default_loop(), &lim, &hooks) == 0);
    char err[256];
    REQUIRE(fence__net_listen_tcp(&net, "127.0.0.1", 0, err, sizeof(err)) == 0);
    struct sockaddr_in a;
    int len = sizeof(a);
    REQUIRE(uv_tcp_getsockname(&net.tcp, (struct sockaddr *)&a, &len) == 0);
    return ntohs(a.sin_port);
}

/* Run the loop for about ms milliseconds. */
static void pump(int ms)
{
    struct timespec ts = {0, 1000000};
    for (int i = 0; i < ms; i++) {
        uv_run(uv_default_loop(), UV_RUN_NOWAIT);
        nanosleep(&ts, NULL);
    }
}

/* A non-blocking client socket connected to port. */
static int client(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
    fcntl(fd, F_SETFL, O_NONBLOCK);
    return fd;
}

/* Send a C string. */
static void say(int fd, const char *s)
{
    REQUIRE(write(fd, s, strlen(s)) == (ssize_t)strlen(s));
}

/* Pump, then read what has arrived into buf (NUL-terminated); *eof set if
 * the server closed. */
static size_t hear(int fd, char *buf, size_t cap, bool *eof)
{
    size_t n = 0;
    *eof = false;
    pump(30);
    for (;;) {
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r > 0) {
            n += (size_t)r;
            continue;
        }
        if (r == 0 || (r < 0 && errno == ECONNRESET))
            *eof = true; /* closed (a reset when our input was unread) */
        break;
    }
    buf[n] = '\0';
    return n;
}

/* Stop the layer and let the loop finish every close. */
static void stop(void)
{
    fence__net_stop(&net);
    uv_run(uv_default_loop(), UV_RUN_DEFAULT);
    fence__net_free(&net);
}

/* Slots filled 2, 0, 1 (and an immediate reply behind them): the bytes
 * leave as 0, 1, 2, immediate. */
static void test_order(void)
{
    char buf[256];
    bool eof;
    int fd = client(start(8, 64, 4096));
    say(fd, "GET a\r\nGET b\r\nGET c\r\nNOW d\r\n");
    hear(fd, buf, sizeof(buf), &eof);
    REQUIRE(n_requests == 4);
    CHECK_STR(buf, "");
    fence__net_slot_reply(slots[2], "+c\r\n", 4);
    hear(fd, buf, sizeof(buf), &eof);
    CHECK_STR(buf, ""); /* c waits for a and b */
    fence__net_slot_reply(slots[0], "+a\r\n", 4);
    hear(fd, buf, sizeof(buf), &eof);
    CHECK_STR(buf, "+a\r\n");
    fence__net_slot_error(slots[1], "ERR", "b failed");
    hear(fd, buf, sizeof(buf), &eof);
    CHECK_STR(buf, "-ERR b failed\r\n+c\r\n+d\r\n");
    CHECK(!eof);
    CHECK_EQ_U64(net.n_conns, 1);
    close(fd);
    pump(20);
    CHECK_EQ_U64(net.n_conns, 0);
    stop();
}

/* With max_pipeline 2, parsing pauses at two unanswered requests and goes
 * on as they are answered. */
static void test_pipeline(void)
{
    char buf[256];
    bool eof;
    int fd = client(start(8, 2, 4096));
    say(fd, "GET 1\r\nGET 2\r\nGET 3\r\nGET 4\r\nGET 5\r\n");
    hear(fd, buf, sizeof(buf), &eof);
    CHECK(n_requests == 2);
    fence__net_slot_reply(slots[0], "+1\r\n", 4);
    fence__net_slot_reply(slots[1], "+2\r\n", 4);
    hear(fd, buf, sizeof(buf), &eof);
    CHECK_STR(buf, "+1\r\n+2\r\n");
    CHECK(n_requests == 4);
    defer = false;
    fence__net_slot_reply(slots[2], "+3\r\n", 4);
    fence__net_slot_reply(slots[3], "+4\r\n", 4);
    hear(fd, buf, sizeof(buf), &eof);
    CHECK_STR(buf, "+3\r\n+4\r\n+5\r\n");
    CHECK(n_requests == 5);
    close(fd);
    stop();
}

/* One client too many gets -LIMIT and is closed; the first is served. */
static void test_max_clients(void)
{
    char buf[256];
    bool eof;
    int port = start(1, 64, 4096);
    defer = false;
    int a = client(port);
    pump(20);
    int b = client(port);
    hear(b, buf, sizeof(buf), &eof);
    CHECK_STR(buf, "-LIMIT max clients (1) reached\r\n");
    CHECK(eof);
    CHECK_EQ_U64(net.stat_refused, 1);
    say(a, "NOW x\r\n");
    hear(a, buf, sizeof(buf), &eof);
    CHECK_STR(buf, "+x\r\n");
    close(a);
    close(b);
    stop();
}

/* Garbage gets an error reply after the replies owed, then EOF; QUIT too. */
static void test_errors_close(void)
{
    char buf[512];
    bool eof;
    int port = start(8, 64, 4096);
    defer = false;
    int fd = client(port);
    say(fd, "NOW a\r\n*2\r\n$x\r\nNOW never\r\n");
    hear(fd, buf, sizeof(buf), &eof);
    CHECK(strncmp(buf, "+a\r\n-ERR Protocol error", 23) == 0);
    CHECK(eof);
    CHECK(n_requests == 1);
    close(fd);
    fd = client(port);
    say(fd, "NOW b\r\nQUIT\r\nNOW c\r\n");
    hear(fd, buf, sizeof(buf), &eof);
    CHECK_STR(buf, "+b\r\n+OK\r\n");
    CHECK(eof);
    close(fd);
    stop();
}

/* A request that cannot fit the read buffer is refused, and the
 * connection closed. */
static void test_too_big(void)
{
    char buf[512], req[600];
    bool eof;
    int fd = client(start(8, 64, 256));
    snprintf(req, sizeof(req), "*2\r\n$3\r\nSET\r\n$400\r\n");
    memset(req + strlen(req), 'v', 300);
    req[strlen("*2\r\n$3\r\nSET\r\n$400\r\n") + 300] = '\0';
    say(fd, req);
    hear(fd, buf, sizeof(buf), &eof);
    CHECK_STR(buf, "-ERR Protocol error: request larger than the read buffer\r\n");
    CHECK(eof);
    close(fd);
    stop();
}

/* A client that goes away with requests unanswered: its slots are handed
 * to the daemon, whose later replies free them. */
static void test_orphans(void)
{
    char buf[64];
    bool eof;
    int fd = client(start(8, 64, 4096));
    say(fd, "GET a\r\nGET b\r\n");
    hear(fd, buf, sizeof(buf), &eof);
    REQUIRE(n_requests == 2);
    close(fd);
    pump(30);
    CHECK(n_orphans == 2);
    CHECK(slots[0]->conn == NULL);
    fence__net_slot_reply(slots[0], "+late\r\n", 7); /* frees it */
    fence__net_slot_error(slots[1], "ERR", "late");
    stop();
}

/* Stop closes connections with deferred work through the same path. */
static void test_stop(void)
{
    char buf[64];
    bool eof;
    int fd = client(start(8, 64, 4096));
    say(fd, "GET a\r\n");
    hear(fd, buf, sizeof(buf), &eof);
    REQUIRE(n_requests == 1);
    stop();
    CHECK(n_orphans == 1);
    fence__net_slot_reply(slots[0], "+x\r\n", 4);
    hear(fd, buf, sizeof(buf), &eof);
    CHECK(eof);
    close(fd);
}

/* Before login: 11 arguments are refused with -NOAUTH and the connection
 * closes; after TRUST (a login), the same request parses, also when it is
 * pipelined right behind the TRUST. */
static void test_prelogin(void)
{
    char buf[512], req[256];
    bool eof;
    prelogin = true;
    defer = false;
    int port = start(8, 64, 1 << 20);
    size_t n = (size_t)snprintf(req, sizeof(req), "*11\r\n");
    for (int i = 0; i < 11; i++)
        n += (size_t)snprintf(req + n, sizeof(req) - n, "$1\r\n%c\r\n", 'a' + i);
    int fd = client(port);
    say(fd, req);
    hear(fd, buf, sizeof(buf), &eof);
    CHECK(strncmp(buf, "-NOAUTH Protocol error: too many arguments: before login", 56) == 0);
    CHECK(eof);
    CHECK(n_requests == 0);
    close(fd);
    fd = client(port);
    say(fd, "TRUST\r\n");
    say(fd, req);
    hear(fd, buf, sizeof(buf), &eof);
    CHECK_STR(buf, "+T\r\n+b\r\n");
    CHECK(!eof);
    close(fd);
    /* A bulk over 1 KiB before login, refused before its data arrives. */
    fd = client(port);
    say(fd, "*2\r\n$4\r\nAUTH\r\n$2000\r\n");
    hear(fd, buf, sizeof(buf), &eof);
    CHECK(strncmp(buf, "-NOAUTH Protocol error: invalid bulk length", 43) == 0);
    CHECK(eof);
    close(fd);
    stop();
}

/* HOLD holds the connection 200 ms: its answer and the answer of the
 * request pipelined behind it arrive only then, in order. */
static void test_hold(void)
{
    char buf[256];
    bool eof;
    defer = false;
    int fd = client(start(8, 64, 4096));
    say(fd, "HOLD\r\nNOW x\r\n");
    hear(fd, buf, sizeof(buf), &eof);
    CHECK_STR(buf, "");
    CHECK(n_requests == 1);
    pump(250);
    hear(fd, buf, sizeof(buf), &eof);
    CHECK_STR(buf, "+H\r\n+x\r\n");
    CHECK(n_requests == 2);
    CHECK(!eof);
    close(fd);
    stop();
}

int main(void)
{
    TEST_RUN(test_order);
    TEST_RUN(test_pipeline);
    TEST_RUN(test_max_clients);
    TEST_RUN(test_errors_close);
    TEST_RUN(test_too_big);
    TEST_RUN(test_orphans);
    TEST_RUN(test_stop);
    TEST_RUN(test_prelogin);
    TEST_RUN(test_hold);
    return TEST_DONE();
}
