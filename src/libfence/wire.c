/* libfence's connection layer: a non-blocking socket driven with poll()
 * against deadlines, optionally TLS (OpenSSL on the fd), with hiredis's
 * reader for replies.  See wire.h. */
#include "libfence/wire.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "libfence/internal.h"
#include "base/assert.h"
#include "fence.h"

/* Read chunk size. */
#define WIRE_CHUNK 16384

struct fence__wire {
    int fd;                  /* the socket */
    SSL *ssl;                /* TLS session, or NULL */
    redisReader *reader;     /* reply parser */
    bool broken;             /* a failure happened: close, do not reuse */
    char errstr[256];        /* the last failure */
};

/* Milliseconds on CLOCK_MONOTONIC. */
static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The first queued OpenSSL error as text (the queue is cleared). */
static const char *ssl_text(char *buf, size_t cap)
{
    unsigned long e = ERR_get_error();
    if (e == 0)
        snprintf(buf, cap, "%s", "TLS error");
    else
        ERR_error_string_n(e, buf, cap);
    ERR_clear_error();
    return buf;
}

/* strdup that keeps NULL; false when out of memory. */
static bool dup_opt(const char *v, char **out)
{
    *out = NULL;
    if (v == NULL)
        return true;
    *out = strdup(v);
    return *out != NULL;
}

/* See wire.h. */
int fence__wire_owned_init(fence__wire_owned *o, bool tls, const char *ca_file,
                           const char *cert_file, const char *key_file,
                           const char *server_name, const char *user,
                           const char *password)
{
    if (!dup_opt(ca_file, &o->ca_file) || !dup_opt(cert_file, &o->cert_file) ||
        !dup_opt(key_file, &o->key_file) || !dup_opt(server_name, &o->server_name) ||
        !dup_opt(user, &o->user) || !dup_opt(password, &o->password))
        return fence__fail(FENCE_ENOMEM, "out of memory");
    if (o->user != NULL && o->password == NULL)
        return fence__fail(FENCE_EINVAL, "%s", "a user needs a password");
    if (tls) {
        char err[FENCE_ERRMSG_BUF_SIZE];
        o->cfg.tls = fence__wire_tls_ctx(o->ca_file, o->cert_file, o->key_file, err,
                                         sizeof(err));
        if (o->cfg.tls == NULL)
            return fence__fail(FENCE_EINVAL, "%s", err);
    } else if (o->ca_file != NULL || o->cert_file != NULL || o->key_file != NULL) {
        return fence__fail(FENCE_EINVAL, "%s", "TLS files given without tls");
    }
    o->cfg.server_name = o->server_name;
    o->cfg.user = o->user;
    o->cfg.password = o->password;
    return 0;
}

/* See wire.h. */
void fence__wire_owned_free(fence__wire_owned *o)
{
    if (o->password != NULL)
        OPENSSL_cleanse(o->password, strlen(o->password));
    free(o->password);
    free(o->user);
    free(o->server_name);
    free(o->key_file);
    free(o->cert_file);
    free(o->ca_file);
    SSL_CTX_free(o->cfg.tls);
    memset(o, 0, sizeof(*o));
}

/* See wire.h. */
SSL_CTX *fence__wire_tls_ctx(const char *ca, const char *cert, const char *key,
                             char *err, size_t cap)
{
    char why[200];
    if ((cert == NULL) != (key == NULL)) {
        snprintf(err, cap, "%s", "TLS: a client certificate needs its key (and the key its "
                                 "certificate)");
        return NULL;
    }
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == NULL) {
        snprintf(err, cap, "TLS: %s", ssl_text(why, sizeof(why)));
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    /* Read-ahead: a reply's record comes in one read(2) instead of two (its
     * 5-byte header, then the rest); read_some asks SSL_has_pending, which
     * counts what was read ahead. */
    SSL_CTX_set_read_ahead(ctx, 1);
    int ok = ca != NULL ? SSL_CTX_load_verify_locations(ctx, ca, NULL)
                        : SSL_CTX_set_default_verify_paths(ctx);
    if (ok != 1) {
        snprintf(err, cap, "TLS CA file %.100s: %s", ca ? ca : "(system)",
                 ssl_text(why, sizeof(why)));
        goto out_free;
    }
    if (cert != NULL) {
        if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
            snprintf(err, cap, "TLS certificate %.100s: %s", cert, ssl_text(why, sizeof(why)));
            goto out_free;
        }
        if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 ||
            SSL_CTX_check_private_key(ctx) != 1) {
            snprintf(err, cap, "TLS key %.100s: %s", key, ssl_text(why, sizeof(why)));
            goto out_free;
        }
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    return ctx;

out_free:
    SSL_CTX_free(ctx);
    return NULL;
}

/* Mark w broken with a message. */
static void fail(fence__wire *w, const char *fmt, const char *arg)
{
    w->broken = true;
    snprintf(w->errstr, sizeof(w->errstr), fmt, arg);
}

/* Wait until fd is ready for events or the deadline passes.  1 ready,
 * 0 timed out, -1 error (errno). */
static int wait_fd(int fd, short events, uint64_t deadline)
{
    for (;;) {
        uint64_t now = now_ms();
        if (now >= deadline)
            return 0;
        struct pollfd p = {fd, events, 0};
        uint64_t left = deadline - now;
        int rv = poll(&p, 1, left > 60000 ? 60000 : (int)left);
        if (rv > 0)
            return 1;
        if (rv < 0 && errno != EINTR)
            return -1;
    }
}

/* Connect fd to sa before the deadline.  0 or an errno value. */
static int connect_fd(int fd, const struct sockaddr *sa, socklen_t len, uint64_t deadline)
{
    if (connect(fd, sa, len) == 0)
        return 0;
    if (errno != EINPROGRESS)
        return errno;
    int rv = wait_fd(fd, POLLOUT, deadline);
    if (rv == 0)
        return ETIMEDOUT;
    if (rv < 0)
        return errno;
    int e = 0;
    socklen_t el = sizeof(e);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) != 0)
        return errno;
    return e;
}

/* Open a non-blocking, close-on-exec socket connected to a.  The fd, or -1
 * with the errno value in *eno, or (when the name does not resolve) 0 in
 * *eno and getaddrinfo's code in *gai. */
static int dial(const fence__addr *a, uint64_t deadline, int *eno, int *gai)
{
    *gai = 0;
    if (a->is_unix) {
        struct sockaddr_un un;
        memset(&un, 0, sizeof(un));
        un.sun_family = AF_UNIX;
        if (strlen(a->host) >= sizeof(un.sun_path)) {
            *eno = ENAMETOOLONG;
            return -1;
        }
        memcpy(un.sun_path, a->host, strlen(a->host) + 1);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            *eno = errno;
            return -1;
        }
        *eno = connect_fd(fd, (struct sockaddr *)&un, sizeof(un), deadline);
        if (*eno != 0) {
            close(fd);
            return -1;
        }
        return fd;
    }
    struct addrinfo hints, *res;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    char port[16];
    snprintf(port, sizeof(port), "%d", a->port);
    int g = getaddrinfo(a->host, port, &hints, &res);
    if (g != 0) {
        *eno = g == EAI_SYSTEM ? errno : 0;
        *gai = g == EAI_SYSTEM ? 0 : g;
        return -1;
    }
    int fd = -1;
    *eno = EHOSTUNREACH;
    for (struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    ai->ai_protocol);
        if (fd < 0) {
            *eno = errno;
            continue;
        }
        *eno = connect_fd(fd, ai->ai_addr, ai->ai_addrlen, deadline);
        if (*eno == 0)
            break;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd >= 0) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    return fd;
}

/* Wait for what OpenSSL asked for after a non-positive return rv.  1: try
 * again; 0: timed out; -1: the TLS error is final. */
static int ssl_wait(fence__wire *w, int rv, uint64_t deadline)
{
    int e = SSL_get_error(w->ssl, rv);
    if (e == SSL_ERROR_WANT_READ)
        return wait_fd(w->fd, POLLIN, deadline) > 0 ? 1 : 0;
    if (e == SSL_ERROR_WANT_WRITE)
        return wait_fd(w->fd, POLLOUT, deadline) > 0 ? 1 : 0;
    return -1;
}

/* Write all of buf before the deadline.  0, or -1 (w broken; *timed_out). */
static int write_all(fence__wire *w, const char *buf, size_t len, uint64_t deadline,
                     bool *timed_out)
{
    char why[200];
    size_t off = 0;
    while (off < len) {
        if (w->ssl != NULL) {
            int n = SSL_write(w->ssl, buf + off, (int)(len - off));
            if (n > 0) {
                off += (size_t)n;
                continue;
            }
            int r = ssl_wait(w, n, deadline);
            if (r == 1)
                continue;
            *timed_out = r == 0;
            fail(w, "TLS write: %s", r == 0 ? "timed out" : ssl_text(why, sizeof(why)));
            return -1;
        }
        ssize_t n = send(w->fd, buf + off, len - off, MSG_NOSIGNAL);
        if (n > 0) {
            off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (wait_fd(w->fd, POLLOUT, deadline) > 0)
                continue;
            *timed_out = true;
            fail(w, "%s", "write timed out");
            return -1;
        }
        fail(w, "write: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* Read some bytes into the reader before the deadline.  0, or -1 (w
 * broken; *timed_out). */
static int read_some(fence__wire *w, uint64_t deadline, bool *timed_out)
{
    char buf[WIRE_CHUNK];
    char why[200];
    bool waited = false;
    for (;;) {
        ssize_t n;
        /* Nothing buffered: the reply is rarely there the moment the
         * request left, so wait for the socket first rather than after a
         * read that fails with EAGAIN (TLS: an SSL_read that fails with
         * WANT_READ, a read(2) and a record-layer pass): one syscall a
         * reply less.  Past the deadline (0) the read below still takes
         * what has come, and times out only if nothing has. */
        if (!waited && (w->ssl == NULL || !SSL_has_pending(w->ssl))) {
            waited = true;
            if (wait_fd(w->fd, POLLIN, deadline) < 0) {
                fail(w, "%s", strerror(errno));
                return -1;
            }
        }
        if (w->ssl != NULL) {
            int k = SSL_read(w->ssl, buf, sizeof(buf));
            if (k <= 0) {
                if (SSL_get_error(w->ssl, k) == SSL_ERROR_ZERO_RETURN) {
                    fail(w, "%s", "connection closed by the server");
                    return -1;
                }
                int r = ssl_wait(w, k, deadline);
                if (r == 1)
                    continue;
                *timed_out = r == 0;
                if (r == 0)
                    fail(w, "%s", "read timed out");
                else if (ERR_peek_error() == 0)
                    fail(w, "%s", "connection closed by the server");
                else
                    fail(w, "TLS read: %s", ssl_text(why, sizeof(why)));
                return -1;
            }
            n = k;
        } else {
            n = recv(w->fd, buf, sizeof(buf), 0);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                if (wait_fd(w->fd, POLLIN, deadline) > 0)
                    continue;
                *timed_out = true;
                fail(w, "%s", "read timed out");
                return -1;
            }
            if (n <= 0) {
                fail(w, "%s", n == 0 ? "connection closed by the server" : strerror(errno));
                return -1;
            }
        }
        if (redisReaderFeed(w->reader, buf, (size_t)n) != REDIS_OK) {
            fail(w, "%s", "reply parser out of memory");
            return -1;
        }
        return 0;
    }
}

/* Consume a SIGPIPE raised while it was blocked (SSL_write uses write()). */
static void eat_sigpipe(const sigset_t *pipe_set, const sigset_t *old_set)
{
    sigset_t pending;
    sigemptyset(&pending);
    if (sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) &&
        !sigismember(old_set, SIGPIPE)) {
        struct timespec zero = {0, 0};
        int saved = errno;
        while (sigtimedwait(pipe_set, NULL, &zero) < 0 && errno == EINTR) {
        }
        errno = saved;
    }
}

/* See wire.h. */
redisReply *fence__wire_command(fence__wire *w, uint64_t timeout_ms, int argc,
                                const char **argv, const size_t *lens,
                                bool *timed_out)
{
    FENCE_ASSERT(w != NULL);
    FENCE_ASSERT(!w->broken);
    *timed_out = false;
    uint64_t deadline = now_ms() + timeout_ms;
    char *cmd = NULL;
    int len = redisFormatCommandArgv(&cmd, argc, argv, lens);
    if (len < 0) {
        fail(w, "%s", "out of memory formatting a command");
        return NULL;
    }
    sigset_t pipe_set, old_set;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
    int rv = write_all(w, cmd, (size_t)len, deadline, timed_out);
    eat_sigpipe(&pipe_set, &old_set);
    pthread_sigmask(SIG_SETMASK, &old_set, NULL);
    free(cmd);
    if (rv != 0)
        return NULL;
    for (;;) {
        void *reply = NULL;
        if (redisReaderGetReply(w->reader, &reply) != REDIS_OK) {
            fail(w, "protocol error: %s", w->reader->errstr);
            return NULL;
        }
        if (reply != NULL)
            return reply;
        if (read_some(w, deadline, timed_out) != 0)
            return NULL;
    }
}

/* TLS handshake on w->fd, checking the server's name.  0 or -1 (err). */
static int tls_start(fence__wire *w, const fence__addr *a, const fence__wire_cfg *cfg,
                     uint64_t deadline, char *err, size_t cap)
{
    char why[200];
    w->ssl = SSL_new(cfg->tls);
    if (w->ssl == NULL || SSL_set_fd(w->ssl, w->fd) != 1) {
        snprintf(err, cap, "TLS: %s", ssl_text(why, sizeof(why)));
        return -1;
    }
    const char *name = cfg->server_name != NULL ? cfg->server_name : a->host;
    if (name[0] != '\0') {
        /* SNI only for names, never for IP literals (RFC 6066). */
        struct in6_addr tmp;
        bool ip = inet_pton(AF_INET, name, &tmp) == 1 || inet_pton(AF_INET6, name, &tmp) == 1;
        if (!ip)
            SSL_set_tlsext_host_name(w->ssl, name);
        X509_VERIFY_PARAM *vp = SSL_get0_param(w->ssl);
        int ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(vp, name)
                    : X509_VERIFY_PARAM_set1_host(vp, name, 0);
        if (ok != 1) {
            snprintf(err, cap, "TLS: bad server name %.80s", name);
            return -1;
        }
    }
    sigset_t pipe_set, old_set;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
    int rv = 0;
    for (;;) {
        int n = SSL_connect(w->ssl);
        if (n == 1)
            break;
        int r = ssl_wait(w, n, deadline);
        if (r == 1)
            continue;
        long vr = SSL_get_verify_result(w->ssl);
        if (r == 0)
            snprintf(err, cap, "%s", "TLS handshake timed out");
        else if (vr != X509_V_OK)
            snprintf(err, cap, "TLS: server certificate: %s", X509_verify_cert_error_string(vr));
        else
            snprintf(err, cap, "TLS handshake: %s", ssl_text(why, sizeof(why)));
        ERR_clear_error();
        rv = -1;
        break;
    }
    eat_sigpipe(&pipe_set, &old_set);
    pthread_sigmask(SIG_SETMASK, &old_set, NULL);
    return rv;
}

/* See wire.h. */
int fence__wire_open(const fence__addr *a, const fence__wire_cfg *cfg,
                     uint64_t timeout_ms, fence__wire **out, bool *refused,
                     char *err, size_t cap)
{
    FENCE_ASSERT(a != NULL);
    FENCE_ASSERT(cfg != NULL);
    *out = NULL;
    *refused = false;
    uint64_t deadline = now_ms() + timeout_ms;
    fence__wire *w = calloc(1, sizeof(*w));
    if (w == NULL) {
        snprintf(err, cap, "%s", "out of memory");
        return FENCE_ENOMEM;
    }
    w->reader = redisReaderCreate();
    if (w->reader == NULL) {
        free(w);
        snprintf(err, cap, "%s", "out of memory");
        return FENCE_ENOMEM;
    }
    int eno = 0, gai = 0;
    w->fd = dial(a, deadline, &eno, &gai);
    if (w->fd < 0) {
        /* A name that does not exist will not start to within a retry
         * loop: it fails fast, as a refusal does. */
        *refused = eno == ECONNREFUSED || eno == ENOENT || gai == EAI_NONAME;
        if (gai != 0)
            snprintf(err, cap, "cannot resolve host '%.*s': %s", FENCE__HOST_MAX, a->host,
                     gai_strerror(gai));
        else
            snprintf(err, cap, "%s", strerror(eno));
        goto out_free;
    }
    if (cfg->tls != NULL && !a->is_unix && tls_start(w, a, cfg, deadline, err, cap) != 0)
        goto out_free;
    if (cfg->password != NULL) {
        const char *argv[3] = {"AUTH", cfg->user, cfg->password};
        size_t lens[3] = {4, cfg->user ? strlen(cfg->user) : 0, strlen(cfg->password)};
        int argc = 3;
        if (cfg->user == NULL) {
            argv[1] = cfg->password;
            lens[1] = lens[2];
            argc = 2;
        }
        bool timed_out;
        uint64_t now = now_ms();
        redisReply *r = fence__wire_command(w, deadline > now ? deadline - now : 1, argc,
                                            argv, lens, &timed_out);
        if (r == NULL) {
            snprintf(err, cap, "AUTH: %s", w->errstr);
            goto out_free;
        }
        if (r->type == REDIS_REPLY_ERROR) {
            /* The server's text never contains the password. */
            snprintf(err, cap, "AUTH refused: %.200s", r->str);
            freeReplyObject(r);
            fence__wire_close(w);
            return FENCE_EAUTH;
        }
        freeReplyObject(r);
    }
    *out = w;
    return 0;

out_free:
    fence__wire_close(w);
    return FENCE_EUNREACHABLE;
}

/* See wire.h. */
bool fence__wire_broken(const fence__wire *w)
{
    return w->broken;
}

/* See wire.h. */
const char *fence__wire_errstr(const fence__wire *w)
{
    return w->errstr;
}

/* See wire.h. */
void fence__wire_close(fence__wire *w)
{
    if (w == NULL)
        return;
    /* No close_notify: SSL_shutdown would write() and could raise SIGPIPE;
     * the server treats the TCP close alike. */
    SSL_free(w->ssl);
    if (w->fd >= 0)
        close(w->fd);
    redisReaderFree(w->reader);
    free(w);
}
