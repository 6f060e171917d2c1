/* A small load client for `make bench`'s TLS row (libfence has no TLS
 * yet): N threads, each with its own connection, plain TCP or TLS (OpenSSL,
 * blocking sockets), run LEASE.GRANT / LOCK / UNLOCK / LEASE.REVOKE cycles
 * on a lock of their own for a number of seconds.  Prints
 * "cycles=<n> seconds=<s> cycles_per_s=<r>" on stdout.
 *
 *   tls_cycles PORT CLIENTS SECONDS [CAFILE]   (CAFILE: connect with TLS)
 *
 * Only for 127.0.0.1.  Replies are read as RESP integers / simple strings;
 * any error reply stops the run with a message. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* One client thread's connection and reply buffer. */
typedef struct worker {
    int id;            /* thread index (lock name) */
    int fd;            /* socket */
    SSL *ssl;          /* NULL: plain */
    char buf[4096];    /* unread reply bytes */
    size_t len;        /* bytes in buf */
    uint64_t cycles;   /* cycles finished */
} worker;

static int port;                 /* server port on 127.0.0.1 */
static SSL_CTX *ctx;             /* TLS client context, or NULL */
static atomic_bool stop;         /* set when the time is up */
static atomic_bool failed;       /* a worker hit an error */

/* Seconds on the monotonic clock. */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Send all of p[0..n). */
static int send_all(worker *w, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = w->ssl ? SSL_write(w->ssl, p, (int)n) : write(w->fd, p, n);
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Read one reply line (":N" or "+OK"); its integer in *out. */
static int read_reply(worker *w, long long *out)
{
    for (;;) {
        char *nl = memchr(w->buf, '\n', w->len);
        if (nl != NULL) {
            size_t line = (size_t)(nl - w->buf) + 1;
            if (w->buf[0] == '-') {
                fprintf(stderr, "tls_cycles: error reply: %.*s", (int)line, w->buf);
                return -1;
            }
            *out = w->buf[0] == ':' ? strtoll(w->buf + 1, NULL, 10) : 0;
            memmove(w->buf, w->buf + line, w->len - line);
            w->len -= line;
            return 0;
        }
        if (w->len == sizeof(w->buf))
            return -1;
        ssize_t k = w->ssl ? SSL_read(w->ssl, w->buf + w->len, (int)(sizeof(w->buf) - w->len))
                           : read(w->fd, w->buf + w->len, sizeof(w->buf) - w->len);
        if (k <= 0)
            return -1;
        w->len += (size_t)k;
    }
}

/* One command as RESP, then its reply. */
static int call(worker *w, long long *out, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int call(worker *w, long long *out, const char *fmt, ...)
{
    char args[256], msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof(args), fmt, ap);
    va_end(ap);
    /* args: words separated by single spaces. */
    char *parts[8];
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(args, " ", &save); t != NULL && n < 8;
         t = strtok_r(NULL, " ", &save))
        parts[n++] = t;
    int off = snprintf(msg, sizeof(msg), "*%d\r\n", n);
    for (int i = 0; i < n; i++)
        off += snprintf(msg + off, sizeof(msg) - (size_t)off, "$%zu\r\n%s\r\n",
                        strlen(parts[i]), parts[i]);
    if (send_all(w, msg, (size_t)off) != 0)
        return -1;
    return read_reply(w, out);
}

/* Connect (and handshake). */
static int connect_worker(worker *w)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    w->fd = socket(AF_INET, SOCK_STREAM, 0);
    if (w->fd < 0 || connect(w->fd, (struct sockaddr *)&a, sizeof(a)) != 0)
        return -1;
    int one = 1;
    setsockopt(w->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (ctx != NULL) {
        w->ssl = SSL_new(ctx);
        if (w->ssl == NULL || SSL_set_fd(w->ssl, w->fd) != 1 || SSL_connect(w->ssl) != 1) {
            ERR_print_errors_fp(stderr);
            return -1;
        }
    }
    return 0;
}

/* The cycles of one thread. */
static void *run(void *arg)
{
    worker *w = arg;
    if (connect_worker(w) != 0) {
        fprintf(stderr, "tls_cycles: connect failed\n");
        atomic_store(&failed, true);
        return NULL;
    }
    while (!atomic_load(&stop)) {
        long long lease, tok, x;
        if (call(w, &lease, "LEASE.GRANT 30000") != 0 ||
            call(w, &tok, "LOCK bench-tls-%d %lld", w->id, lease) != 0 ||
            call(w, &x, "UNLOCK bench-tls-%d %lld", w->id, tok) != 0 ||
            call(w, &x, "LEASE.REVOKE %lld", lease) != 0) {
            atomic_store(&failed, true);
            break;
        }
        w->cycles++;
    }
    if (w->ssl != NULL) {
        SSL_shutdown(w->ssl);
        SSL_free(w->ssl);
    }
    close(w->fd);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: tls_cycles PORT CLIENTS SECONDS [CAFILE]\n");
        return 2;
    }
    port = atoi(argv[1]);
    int n = atoi(argv[2]);
    double secs = atof(argv[3]);
    if (port <= 0 || n <= 0 || n > 4096 || secs <= 0)
        return 2;
    if (argc > 4) {
        ctx = SSL_CTX_new(TLS_client_method());
        if (ctx == NULL || SSL_CTX_load_verify_locations(ctx, argv[4], NULL) != 1) {
            ERR_print_errors_fp(stderr);
            return 1;
        }
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    }
    worker *ws = calloc((size_t)n, sizeof(*ws));
    pthread_t *th = calloc((size_t)n, sizeof(*th));
    if (ws == NULL || th == NULL)
        return 1;
    double t0 = now_s();
    for (int i = 0; i < n; i++) {
        ws[i].id = i;
        pthread_create(&th[i], NULL, run, &ws[i]);
    }
    while (now_s() - t0 < secs && !atomic_load(&failed))
        usleep(20000);
    atomic_store(&stop, true);
    uint64_t total = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        total += ws[i].cycles;
    }
    double el = now_s() - t0;
    printf("cycles=%llu seconds=%.2f cycles_per_s=%.0f\n", (unsigned long long)total, el,
           (double)total / el);
    free(ws);
    free(th);
    SSL_CTX_free(ctx);
    return atomic_load(&failed) ? 1 : 0;
}
