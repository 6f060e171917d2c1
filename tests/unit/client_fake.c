/* The fake RESP servers of libfence's unit tests (client_fake.h). */
#include "client_fake.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "../lib/test.h"

/* REQUIRE only: test.h keeps its failure counters static, so a CHECK here
 * would count in this file's copy, not in the test program's. */
#undef CHECK
#undef CHECK_EQ_U64
#undef CHECK_EQ_I64
#undef CHECK_STR

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
fake *fake_start(fake_handler h)
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
const char *addr_of(fake *f, char *buf)
{
    sprintf(buf, "127.0.0.1:%d", f->port);
    return buf;
}

/* Open a client on servers with a short timeout. */
fence_client *client_for(const char *servers, uint32_t timeout_ms)
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
void log_get(fake *f, int i, char *out)
{
    pthread_mutex_lock(&f->mu);
    strcpy(out, i < f->nlog ? f->log[i] : "");
    pthread_mutex_unlock(&f->mu);
}

/* Number of log entries of f starting with prefix. */
int log_count(fake *f, const char *prefix)
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
void reqid_of(const char *entry, char *out)
{
    const char *p = strstr(entry, "REQID ");
    strcpy(out, p ? p + 6 : "");
}

/* A well-behaved leader: ACQUIRE → [7, 9], UNLOCK → 1, KEEPALIVE → 300. */
const char *h_leader(fake *f, int n, int argc, char argv[][ARG_LEN])
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
