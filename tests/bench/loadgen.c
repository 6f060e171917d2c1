/* Shared pieces of the event-loop load generators (see loadgen.h). */
#include "loadgen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
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
