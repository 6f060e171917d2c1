/* Shared pieces of the event-loop load generators (see loadgen.h). */
#include "loadgen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/assert.h"

const char *loadgen_prog = "loadgen";

uint64_t loadgen_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

void loadgen_die(const char *what)
{
    fprintf(stderr, "%s: %s: %s\n", loadgen_prog, what, errno ? strerror(errno) : "failed");
    exit(1);
}

size_t loadgen_encode(char *buf, size_t cap, int argc, const char **argv)
{
    int n = snprintf(buf, cap, "*%d\r\n", argc);
    for (int i = 0; i < argc && n > 0 && (size_t)n < cap; i++)
        n += snprintf(buf + n, cap - (size_t)n, "$%zu\r\n%s\r\n", strlen(argv[i]), argv[i]);
    FENCE_ASSERT(n > 0 && (size_t)n < cap);
    return (size_t)n;
}

int loadgen_connect(int port, int epfd, void *ptr)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        loadgen_die("socket");
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
        loadgen_die("connect");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = ptr};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) != 0)
        loadgen_die("epoll_ctl");
    return fd;
}

void loadgen_drain(int fd, redisReader *reader, void (*on_reply)(void *ctx, redisReply *r),
                   void *ctx)
{
    static char buf[65536];
    for (;;) {
        ssize_t k = read(fd, buf, sizeof(buf));
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (k == 0) {
            errno = 0;
            loadgen_die("server closed a connection");
        }
        if (k < 0)
            loadgen_die("read");
        if (redisReaderFeed(reader, buf, (size_t)k) != REDIS_OK)
            loadgen_die("reader");
        for (;;) {
            void *reply = NULL;
            if (redisReaderGetReply(reader, &reply) != REDIS_OK) {
                errno = 0;
                loadgen_die("protocol error in a reply");
            }
            if (reply == NULL)
                break;
            on_reply(ctx, reply);
            freeReplyObject(reply);
        }
        if ((size_t)k < sizeof(buf))
            break;
    }
}

void loadgen_cycles_open(loadgen_cycles *g, int port, uint32_t n)
{
    memset(g, 0, sizeof(*g));
    fencectl_hist_init(&g->hist);
    g->epfd = epoll_create1(0);
    if (g->epfd < 0)
        loadgen_die("epoll_create1");
    g->conns = calloc(n, sizeof(*g->conns));
    if (g->conns == NULL)
        loadgen_die("out of memory");
    g->n = n;
    for (uint32_t i = 0; i < n; i++) {
        loadgen_conn *c = &g->conns[i];
        c->reader = redisReaderCreate();
        if (c->reader == NULL)
            loadgen_die("out of memory");
        c->fd = loadgen_connect(port, g->epfd, c);
    }
}

void loadgen_send(loadgen_conn *c, int argc, const char **argv)
{
    char buf[512];
    size_t n = loadgen_encode(buf, sizeof(buf), argc, argv);
    size_t off = 0;
    while (off < n) {
        ssize_t k = write(c->fd, buf + off, n - off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            loadgen_die("write");
        off += (size_t)k;
    }
    c->busy = true;
    c->sent_us = loadgen_now_us();
}

void loadgen_note_error(loadgen_cycles *g, const redisReply *r)
{
    g->errors++;
    if (g->first_error[0] == '\0')
        snprintf(g->first_error, sizeof(g->first_error), "%.*s",
                 r->type == REDIS_REPLY_ERROR ? (int)(r->len < 150 ? r->len : 150) : 3,
                 r->type == REDIS_REPLY_ERROR ? r->str : "nil");
}

void loadgen_cycles_run(loadgen_cycles *g, double secs, uint64_t grace_us,
                        void (*start)(loadgen_conn *c),
                        void (*on_reply)(void *ctx, redisReply *r))
{
    g->stop_us = loadgen_now_us() + (uint64_t)(secs * 1e6);
    for (uint32_t i = 0; i < g->n; i++)
        start(&g->conns[i]);
    struct epoll_event evs[256];
    uint64_t give_up = g->stop_us + grace_us;
    for (;;) {
        int k = epoll_wait(g->epfd, evs, 256, 100);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            loadgen_die("epoll_wait");
        for (int i = 0; i < k; i++) {
            loadgen_conn *c = evs[i].data.ptr;
            loadgen_drain(c->fd, c->reader, on_reply, c);
        }
        uint64_t t = loadgen_now_us();
        if (t < g->stop_us)
            continue;
        bool owed = false;
        for (uint32_t i = 0; i < g->n && !owed; i++)
            owed = g->conns[i].busy;
        if (!owed || t >= give_up)
            break;
    }
}

void loadgen_cycles_finish(loadgen_cycles *g, double secs, const char *extra)
{
    uint64_t cycles = 0, lo = UINT64_MAX, hi = 0;
    for (uint32_t i = 0; i < g->n; i++) {
        uint64_t m = g->conns[i].cycles;
        cycles += m;
        lo = m < lo ? m : lo;
        hi = m > hi ? m : hi;
    }
    printf("cycles=%" PRIu64 " seconds=%.3f cycles_per_s=%.1f p50_us=%" PRIu64
           " p99_us=%" PRIu64 " max_us=%" PRIu64 " min_cycles=%" PRIu64
           " max_cycles=%" PRIu64 " errors=%" PRIu64 "%s\n",
           cycles, secs, (double)cycles / secs, fencectl_hist_quantile(&g->hist, 0.50),
           fencectl_hist_quantile(&g->hist, 0.99), g->hist.max, lo, hi, g->errors, extra);
    if (g->errors > 0)
        fprintf(stderr, "%s: %" PRIu64 " error replies, the first: %s\n", loadgen_prog,
                g->errors, g->first_error);
    for (uint32_t i = 0; i < g->n; i++) {
        redisReaderFree(g->conns[i].reader);
        close(g->conns[i].fd);
    }
    free(g->conns);
    close(g->epfd);
}
