/* Unit tests of src/ops/metrics.c (registry, renderer) and
 * metrics_http.c (the endpoint: paths, methods, bad input, many scrapers,
 * a writer updating while scrapers render). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "base/limits.h"
#include "ops/metrics.h"
#include "../lib/test.h"

/* Render m into a NUL-terminated string (malloc). */
static char *render(fence_metrics *m) {
    fence_metrics_text t = {0};
    REQUIRE(fence_metrics_render(m, &t) == 0);
    char *s = malloc(t.len + 1);
    REQUIRE(s != NULL);
    memcpy(s, t.buf, t.len);
    s[t.len] = '\0';
    free(t.buf);
    return s;
}

/* Names are checked; a name is registered once (also against a
 * histogram's _bucket/_sum/_count). */
static void test_names(void) {
    fence_metrics *m = NULL;
    REQUIRE(fence_metrics_new(&m) == 0);
    CHECK(fence_metrics_counter(m, "ok_total", "fine") != NULL);
    CHECK(fence_metrics_counter(m, "ok_total", "again") == NULL);
    CHECK(fence_metrics_counter(m, "9starts_with_digit", "x") == NULL);
    CHECK(fence_metrics_counter(m, "has-dash", "x") == NULL);
    CHECK(fence_metrics_counter(m, "", "x") == NULL);
    CHECK(fence_metrics_add(m, FENCE_METRIC_COUNTER, "a_total", "x", "__reserved", 4, NULL, 0) ==
          NULL);
    CHECK(fence_metrics_add(m, FENCE_METRIC_COUNTER, "b_total", "x", "a:b", 4, NULL, 0) == NULL);
    CHECK(fence_metrics_add(m, FENCE_METRIC_COUNTER, "c_total", "x", "code", 0, NULL, 0) == NULL);
    CHECK(fence_metrics_add(m, FENCE_METRIC_COUNTER, "d_total", "x", "code",
                            FENCE_METRIC_SERIES_MAX + 1, NULL, 0) == NULL);
    double b[] = {1, 2};
    double bad[] = {2, 1};
    CHECK(fence_metrics_histogram(m, "h_seconds", "x", b, 2) != NULL);
    CHECK(fence_metrics_counter(m, "h_seconds_count", "x") == NULL);
    CHECK(fence_metrics_counter(m, "g_sum", "x") != NULL);
    CHECK(fence_metrics_histogram(m, "g", "x", b, 2) == NULL);
    CHECK(fence_metrics_histogram(m, "i_seconds", "x", bad, 2) == NULL);
    CHECK(fence_metrics_histogram(m, "j_seconds", "x", b, 0) == NULL);
    CHECK(fence_metrics_add(m, FENCE_METRIC_HISTOGRAM, "k_seconds", "x", "le", 4, b, 2) == NULL);
    CHECK(fence_metrics_add(m, FENCE_METRIC_GAUGE, "l", "x", NULL, 0, b, 2) == NULL);
    CHECK(strcmp(fence_metrics_errmsg(m), "only a histogram has buckets") == 0);
    fence_metrics_free(m);
    fence_metrics_free(NULL);
}

/* The exact exposition text of a small registry. */
static void test_render_exact(void) {
    fence_metrics *m = NULL;
    REQUIRE(fence_metrics_new(&m) == 0);
    fence_metric *c = fence_metrics_counter(m, "x_total", "Things.\nBack\\slash");
    fence_metric *g = fence_metrics_gauge(m, "y", "A gauge.");
    double b[] = {0.5, 1};
    fence_metric *h = fence_metrics_histogram(m, "z_seconds", "Latency.", b, 2);
    fence_metric *l = fence_metrics_add(m, FENCE_METRIC_COUNTER, "e_total", "Errors.", "code",
                                        4, NULL, 0);
    REQUIRE(c && g && h && l);
    fence_metric_add(c, 3);
    fence_metric_set(g, -7);
    fence_metric_observe(h, 0.25);
    fence_metric_observe(h, 0.5);
    fence_metric_observe(h, 3);
    fence_series_inc(fence_metric_with(l, "ERR", 3));
    fence_series_add(fence_metric_with(l, "q\"\\\n\x01", 5), 2);
    char *s = render(m);
    const char *want =
        "# HELP x_total Things.\\nBack\\\\slash\n"
        "# TYPE x_total counter\n"
        "x_total 3\n"
        "# HELP y A gauge.\n"
        "# TYPE y gauge\n"
        "y -7\n"
        "# HELP z_seconds Latency.\n"
        "# TYPE z_seconds histogram\n"
        "z_seconds_bucket{le=\"0.5\"} 2\n"
        "z_seconds_bucket{le=\"1\"} 2\n"
        "z_seconds_bucket{le=\"+Inf\"} 3\n"
        "z_seconds_sum 3.75\n"
        "z_seconds_count 3\n"
        "# HELP e_total Errors.\n"
        "# TYPE e_total counter\n"
        "e_total{code=\"ERR\"} 1\n"
        "e_total{code=\"q\\\"\\\\\\n\\\\x01\"} 2\n";
    CHECK_STR(s, want);
    CHECK_EQ_U64(fence_series_count(fence_metric_one(h)), 3);
    free(s);
    fence_metrics_free(m);
}

/* A capped family sends new values to _other once full; a long value is
 * cut; the same value finds the same series. */
static void test_cap(void) {
    fence_metrics *m = NULL;
    REQUIRE(fence_metrics_new(&m) == 0);
    fence_metric *f = fence_metrics_add(m, FENCE_METRIC_COUNTER, "stale_total", "Stale.",
                                        "fence", 3, NULL, 0);
    REQUIRE(f != NULL);
    char name[32];
    for (int i = 0; i < 10; i++) {
        snprintf(name, sizeof(name), "f%d", i);
        fence_series_inc(fence_metric_with(f, name, strlen(name)));
    }
    fence_series_inc(fence_metric_with(f, "f1", 2));
    CHECK(fence_metric_with(f, "f0", 2) != fence_metric_with(f, "f9", 2));
    CHECK(fence_metric_with(f, "f8", 2) == fence_metric_with(f, "f9", 2));
    CHECK_EQ_I64(fence_series_get(fence_metric_with(f, "f1", 2)), 2);
    CHECK_EQ_I64(fence_series_get(fence_metric_with(f, "zz", 2)), 7);
    char *s = render(m);
    CHECK(strstr(s, "stale_total{fence=\"f0\"} 1\n") != NULL);
    CHECK(strstr(s, "stale_total{fence=\"f1\"} 2\n") != NULL);
    CHECK(strstr(s, "stale_total{fence=\"f2\"} 1\n") != NULL);
    CHECK(strstr(s, "stale_total{fence=\"_other\"} 7\n") != NULL);
    CHECK(strstr(s, "f3") == NULL);
    free(s);
    char big[FENCE_METRIC_LABEL_MAX + 50];
    memset(big, 'a', sizeof(big));
    fence_metric *g = fence_metrics_add(m, FENCE_METRIC_GAUGE, "mark", "Mark.", "fence", 2,
                                        NULL, 0);
    REQUIRE(g != NULL);
    fence_series_max(fence_metric_with(g, big, sizeof(big)), 5);
    fence_series_max(fence_metric_with(g, big, FENCE_METRIC_LABEL_MAX), 3);
    CHECK_EQ_I64(fence_series_get(fence_metric_with(g, big, FENCE_METRIC_LABEL_MAX + 1)), 5);
    fence_metrics_free(m);
}

/* Shared by the threaded tests. */
typedef struct {
    fence_metrics *m;      /* registry */
    fence_metric *c;       /* counter */
    fence_metric *h;       /* histogram */
    fence_metric *l;       /* labelled counter */
    atomic_bool stop;      /* writer stops */
    uint64_t rounds;       /* writer: iterations done */
} shared;

/* The writer: the event loop's role. */
static void *writer(void *arg) {
    shared *sh = arg;
    uint64_t i = 0;
    while (!atomic_load(&sh->stop)) {
        fence_metric_inc(sh->c);
        fence_metric_observe(sh->h, (double)(i % 7) * 0.1);
        char name[16];
        int n = snprintf(name, sizeof(name), "n%u", (unsigned)(i % 100));
        fence_series_inc(fence_metric_with(sh->l, name, (size_t)n));
        i++;
    }
    sh->rounds = i;
    return NULL;
}

/* The value after line_start at the start of a line (not the first), or
 * -1. */
static long long sample(const char *text, const char *line_start) {
    char key[128];
    snprintf(key, sizeof(key), "\n%s", line_start);
    const char *p = strstr(text, key);
    if (p == NULL)
        return -1;
    return strtoll(p + strlen(key), NULL, 10);
}

/* A scraper renders while the writer updates: counters never go back, the
 * histogram's +Inf bucket equals its _count, and at the end everything
 * adds up. */
static void test_concurrent_render(void) {
    shared sh = {0};
    REQUIRE(fence_metrics_new(&sh.m) == 0);
    sh.c = fence_metrics_counter(sh.m, "c_total", "c");
    sh.h = fence_metrics_histogram(sh.m, "h_seconds", "h", fence_metric_latency_bounds,
                                   fence_metric_latency_n);
    sh.l = fence_metrics_add(sh.m, FENCE_METRIC_COUNTER, "l_total", "l", "n", 50, NULL, 0);
    REQUIRE(sh.c && sh.h && sh.l);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, writer, &sh) == 0);
    long long last = 0;
    for (int i = 0; i < 300; i++) {
        char *s = render(sh.m);
        long long v = sample(s, "c_total ");
        CHECK(v >= 0);
        CHECK(v >= last);
        last = v;
        CHECK_EQ_I64(sample(s, "h_seconds_bucket{le=\"+Inf\"} "), sample(s, "h_seconds_count "));
        free(s);
    }
    atomic_store(&sh.stop, true);
    pthread_join(t, NULL);
    char *s = render(sh.m);
    CHECK_EQ_I64(sample(s, "c_total "), (long long)sh.rounds);
    CHECK_EQ_I64(sample(s, "h_seconds_count "), (long long)sh.rounds);
    long long sum = 0;
    for (const char *p = s; (p = strstr(p, "\nl_total{")) != NULL; p++)
        sum += strtoll(strchr(p, '}') + 2, NULL, 10);
    CHECK_EQ_I64(sum, (long long)sh.rounds);
    free(s);
    fence_metrics_free(sh.m);
}

/* ---- HTTP ---------------------------------------------------------------- */

/* Connect to 127.0.0.1:port with a receive timeout; -1 on failure. */
static int dial(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Send req (len bytes) and read the whole answer (until close) into out
 * (cap bytes, NUL-terminated); returns the HTTP status or -1. */
static int exchange(int port, const char *req, size_t len, char *out, size_t cap) {
    int fd = dial(port);
    if (fd < 0)
        return -1;
    if (send(fd, req, len, MSG_NOSIGNAL) != (ssize_t)len) {
        close(fd);
        return -1;
    }
    size_t got = 0;
    for (;;) {
        ssize_t n = recv(fd, out + got, cap - 1 - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
        if (got == cap - 1)
            break;
    }
    out[got] = '\0';
    close(fd);
    int status = -1;
    if (sscanf(out, "HTTP/1.%*d %d", &status) != 1)
        return -1;
    return status;
}

/* GET path with Connection: close. */
static int get(int port, const char *method, const char *path, char *out, size_t cap) {
    char req[256];
    int n = snprintf(req, sizeof(req),
                     "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", method, path);
    return exchange(port, req, (size_t)n, out, cap);
}

/* The health callback of the tests: healthy while *arg is true. */
static bool health_cb(void *arg, char *reason, size_t cap) {
    bool ok = atomic_load((atomic_bool *)arg);
    snprintf(reason, cap, ok ? "leader ready" : "no quorum");
    return ok;
}

/* Start an endpoint on a free port over m. */
static fence_metrics_http *start(fence_metrics *m, atomic_bool *healthy) {
    fence_metrics_http_opts o = {0};
    o.bind = "127.0.0.1";
    o.metrics = m;
    o.health = health_cb;
    o.health_arg = healthy;
    fence_metrics_http *h = NULL;
    char err[256];
    int rc = fence_metrics_http_start(&o, &h, err, sizeof(err));
    if (rc != 0)
        printf("#   start: %s\n", err);
    REQUIRE(rc == 0);
    REQUIRE(fence_metrics_http_port(h) > 0);
    return h;
}

static char buf[1 << 20];

/* Paths, methods, the content type, /health both ways; a port in use is
 * an error that names the address. */
static void test_http_basic(void) {
    fence_metrics *m = NULL;
    REQUIRE(fence_metrics_new(&m) == 0);
    fence_metric *c = fence_metrics_counter(m, "x_total", "x");
    fence_metric_add(c, 42);
    atomic_bool healthy = true;
    fence_metrics_http *h = start(m, &healthy);
    int port = fence_metrics_http_port(h);
    CHECK_EQ_I64(get(port, "GET", "/metrics", buf, sizeof(buf)), 200);
    CHECK(strstr(buf, "text/plain; version=0.0.4") != NULL);
    CHECK(strstr(buf, "\r\n\r\n# HELP x_total x\n# TYPE x_total counter\nx_total 42\n") != NULL);
    CHECK_EQ_I64(get(port, "HEAD", "/metrics", buf, sizeof(buf)), 200);
    CHECK(strstr(buf, "x_total") == NULL);
    CHECK_EQ_I64(get(port, "GET", "/health", buf, sizeof(buf)), 200);
    CHECK(strstr(buf, "ok: leader ready") != NULL);
    atomic_store(&healthy, false);
    CHECK_EQ_I64(get(port, "GET", "/health", buf, sizeof(buf)), 503);
    CHECK(strstr(buf, "unavailable: no quorum") != NULL);
    CHECK_EQ_I64(get(port, "GET", "/", buf, sizeof(buf)), 404);
    CHECK_EQ_I64(get(port, "POST", "/metrics", buf, sizeof(buf)), 405);
    CHECK_EQ_I64(get(port, "DELETE", "/health", buf, sizeof(buf)), 405);

    fence_metrics_http_opts o = {0};
    o.bind = "127.0.0.1";
    o.port = port;
    o.metrics = m;
    fence_metrics_http *h2 = NULL;
    char err[256] = "";
    CHECK(fence_metrics_http_start(&o, &h2, err, sizeof(err)) != 0);
    CHECK(strstr(err, "in use") != NULL);
    o.bind = "not-an-address";
    CHECK(fence_metrics_http_start(&o, &h2, err, sizeof(err)) != 0);
    fence_metrics_http_stop(h);
    fence_metrics_http_stop(NULL);
    CHECK(dial(port) < 0);
    fence_metrics_free(m);
}

/* Garbage, oversized headers, a half request left open and a body on GET:
 * each is answered or dropped, and the endpoint still serves afterwards. */
static void test_http_bad_input(void) {
    fence_metrics *m = NULL;
    REQUIRE(fence_metrics_new(&m) == 0);
    fence_metrics_counter(m, "x_total", "x");
    atomic_bool healthy = true;
    fence_metrics_http *h = start(m, &healthy);
    int port = fence_metrics_http_port(h);
    static const char *const junk[] = {
        "\x00\x01\x02\xff\r\n\r\n",
        "GET\r\n\r\n",
        "GET /metrics HTTP/9.9\r\n\r\n",
        "GET /metrics HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
        "GET /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        "GET /%00%ff/../../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
    };
    for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
        size_t len = i == 0 ? 8 : strlen(junk[i]);
        int st = exchange(port, junk[i], len, buf, sizeof(buf));
        CHECK(st == -1 || (st >= 200 && st < 600));
    }
    /* A header far beyond the connection's memory limit. */
    size_t big = 200 * 1024;
    char *req = malloc(big);
    REQUIRE(req != NULL);
    memset(req, 'A', big);
    memcpy(req, "GET /metrics HTTP/1.1\r\nX: ", 26);
    int st = exchange(port, req, big, buf, sizeof(buf));
    CHECK(st == -1 || st == 431 || st == 413 || st == 400);
    free(req);
    /* Idle connections that never finish a request. */
    int idle[8];
    for (int i = 0; i < 8; i++) {
        idle[i] = dial(port);
        if (idle[i] >= 0)
            send(idle[i], "GET /met", 8, MSG_NOSIGNAL);
    }
    CHECK_EQ_I64(get(port, "GET", "/metrics", buf, sizeof(buf)), 200);
    for (int i = 0; i < 8; i++) {
        if (idle[i] >= 0)
            close(idle[i]);
    }
    CHECK_EQ_I64(get(port, "GET", "/metrics", buf, sizeof(buf)), 200);
    fence_metrics_http_stop(h);
    fence_metrics_free(m);
}

/* Arguments of a scraper thread. */
typedef struct {
    int port;      /* endpoint */
    int ok;        /* 200 answers with a complete body */
    int refused;   /* connection refused or dropped (over the limit) */
} scraper_arg;

/* One scraper: 20 GETs of /metrics. */
static void *scraper(void *arg) {
    scraper_arg *a = arg;
    char *out = malloc(1 << 16);
    for (int i = 0; i < 20; i++) {
        int st = get(a->port, "GET", "/metrics", out, 1 << 16);
        if (st == 200 && strstr(out, "c_total") != NULL)
            a->ok++;
        else
            a->refused++;
    }
    free(out);
    return NULL;
}

/* 64 scrapers at once while the writer runs: the endpoint keeps serving,
 * most scrapes succeed, and none sees a torn histogram. */
static void test_http_many_scrapers(void) {
    shared sh = {0};
    REQUIRE(fence_metrics_new(&sh.m) == 0);
    sh.c = fence_metrics_counter(sh.m, "c_total", "c");
    sh.h = fence_metrics_histogram(sh.m, "h_seconds", "h", fence_metric_latency_bounds,
                                   fence_metric_latency_n);
    sh.l = fence_metrics_add(sh.m, FENCE_METRIC_COUNTER, "l_total", "l", "n", 50, NULL, 0);
    atomic_bool healthy = true;
    fence_metrics_http *h = start(sh.m, &healthy);
    pthread_t w;
    REQUIRE(pthread_create(&w, NULL, writer, &sh) == 0);
    enum { N = 64 };
    pthread_t t[N];
    scraper_arg a[N];
    for (int i = 0; i < N; i++) {
        a[i] = (scraper_arg){fence_metrics_http_port(h), 0, 0};
        REQUIRE(pthread_create(&t[i], NULL, scraper, &a[i]) == 0);
    }
    int ok = 0, refused = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        ok += a[i].ok;
        refused += a[i].refused;
    }
    atomic_store(&sh.stop, true);
    pthread_join(w, NULL);
    printf("# %d scrapes answered, %d refused over the connection limit\n", ok, refused);
    CHECK(ok >= N * 20 / 2);
    CHECK_EQ_I64(get(fence_metrics_http_port(h), "GET", "/metrics", buf, sizeof(buf)), 200);
    fence_metrics_http_stop(h);
    fence_metrics_free(sh.m);
}

int main(void) {
    TEST_RUN(test_names);
    TEST_RUN(test_render_exact);
    TEST_RUN(test_cap);
    TEST_RUN(test_concurrent_render);
    TEST_RUN(test_http_basic);
    TEST_RUN(test_http_bad_input);
    TEST_RUN(test_http_many_scrapers);
    return TEST_DONE();
}
