/* The mutual-TLS raft transport: a socketpair per peer connection, pumped
 * through OpenSSL memory BIOs (net/tls_pump.h) to the TCP socket.  See
 * peer_tls.h. */
#include "server/peer_tls.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/assert.h"
#include "base/limits.h"
#include "base/log.h"
#include "net/tls_pump.h"
#include "server/peer_hello.h"

/* Bytes read from the TLS session at a time. */
#define PUMP_CHUNK (16 * 1024)

/* Where a peer connection is in its life. */
enum pconn_state {
    PC_HANDSHAKE = 0, /* TLS handshake running */
    PC_HELLO,         /* accepted: waiting for the hello inside TLS */
    PC_OPEN,          /* raft has its stream; pumping */
    PC_CLOSING,       /* handles being closed */
};

typedef struct ptls ptls;
typedef struct pconn pconn;

/* The transport's state (t->impl). */
struct ptls {
    struct raft_uv_transport *t;        /* the transport this is */
    uv_loop_t *loop;                    /* the daemon's loop */
    SSL_CTX *ctx;                       /* one context for both roles */
    bool check_id;                      /* require CN node-<id> */
    raft_id id;                         /* this server's id (init) */
    char address[FENCE_PEER_TLS_ADDR_MAX]; /* this server's raft address */
    uv_tcp_t listener;                  /* the raft port */
    bool listening;                     /* listener initialised */
    raft_uv_accept_cb accept_cb;        /* raft's accept callback */
    pconn *conns;                       /* every live connection, newest first */
    unsigned pending;                   /* connections not yet PC_OPEN */
    unsigned pending_in;                /* ... of them incoming (the slots) */
    uint64_t seq;                       /* incoming connections accepted so far */
    struct sockaddr_in self_sa;         /* own raft host, port 0 (outgoing bind) */
    fence_peer_tls_member_fn members;   /* membership lookup, NULL: admit nobody */
    void *members_arg;                  /* its argument */
    fence_metric *refusals;             /* refusals by reason, or NULL */
    bool closing;                       /* close was called */
    bool listener_closed;               /* the listener's close cb ran */
    raft_uv_transport_close_cb close_cb; /* raft's close callback */
    uint64_t log_window_ms;             /* start of the current refusal-log second */
    unsigned logged;                    /* refusals logged in that second */
    unsigned suppressed;                /* refusals not logged in it */
};

/* One peer connection: TCP socket, TLS session and socketpair. */
struct pconn {
    ptls *pt;                           /* the transport */
    pconn *next;                        /* list of pt->conns */
    pconn *prev;                        /* list of pt->conns */
    int state;                          /* enum pconn_state */
    bool outgoing;                      /* we connected (raft asked) */
    uv_tcp_t tcp;                       /* the real connection */
    uv_timer_t timer;                   /* handshake deadline */
    uv_pipe_t pipe;                     /* our end of the socketpair */
    bool have_pipe;                     /* pipe initialised */
    uv_pipe_t *raft_end;                /* raft's end until handed over */
    unsigned handles;                   /* handles not yet closed */
    uv_connect_t creq;                  /* TCP connect request */
    struct raft_uv_connect *req;        /* raft's request until its cb */
    fence_tls_pump pump;                /* the TLS session over its BIOs */
    raft_id id;                         /* target id, or the hello's id */
    uint8_t hello[FENCE_PEER_HELLO_MAX]; /* hello bytes (peer_hello.h) */
    size_t hello_len;                   /* bytes of hello read */
    char address[FENCE_PEER_TLS_ADDR_MAX]; /* the hello's address */
    bool tcp_paused;                    /* tcp reading stopped (flow) */
    bool pipe_paused;                   /* pipe reading stopped (flow) */
    bool got_bytes;                     /* the peer has sent something */
    uint64_t seq;                       /* incoming: order of acceptance */
    uint64_t born_ms;                   /* uv_now when made */
    uint32_t ip;                        /* incoming: source IPv4 (network order), 0: unknown */
    bool member_ip;                     /* incoming: ip is a member's raft host */
    char peer[64];                      /* ip:port for logs */
};

/* A write with its bytes behind it. */
typedef struct pbytes {
    uv_write_t req;                     /* libuv request; data = pconn */
    size_t len;                         /* bytes in data[] */
    char data[];                        /* the bytes */
} pbytes;

static void conn_drive(pconn *pc);
static int parse_addr(const char *address, struct sockaddr_in *sa);

/* OpenSSL's reason for the last error as text (clears the queue; tls_ctx.c). */
static const char *ssl_why(char *buf, size_t cap)
{
    fence__tls_reason(buf, cap, "TLS error");
    return buf;
}

/* Close callback of a transport-level handle: last one out finishes. */
static void maybe_closed(ptls *pt)
{
    if (!pt->closing || pt->conns != NULL || (pt->listening && !pt->listener_closed))
        return;
    struct raft_uv_transport *t = pt->t;
    raft_uv_transport_close_cb cb = pt->close_cb;
    SSL_CTX_free(pt->ctx);
    free(pt);
    t->impl = NULL;
    if (cb != NULL)
        cb(t);
}

/* A handle of a connection closed: free it after the last one. */
static void conn_handle_closed(uv_handle_t *h)
{
    pconn *pc = h->data;
    FENCE_ASSERT(pc->handles > 0);
    if (--pc->handles > 0)
        return;
    ptls *pt = pc->pt;
    if (pc->prev != NULL)
        pc->prev->next = pc->next;
    else
        pt->conns = pc->next;
    if (pc->next != NULL)
        pc->next->prev = pc->prev;
    fence__tls_pump_free(&pc->pump);
    free(pc);
    maybe_closed(pt);
}

/* raft's end closed before raft ever saw it: release the raft_malloc'd
 * handle. */
static void raft_end_closed(uv_handle_t *h)
{
    raft_free(h);
}

/* Tear a connection down (idempotent).  An outgoing connection still owed
 * to raft completes its request with status. */
static void conn_close(pconn *pc, int status)
{
    if (pc->state == PC_CLOSING)
        return;
    if (pc->state != PC_OPEN) {
        FENCE_ASSERT(pc->pt->pending > 0);
        pc->pt->pending--;
        if (!pc->outgoing) {
            FENCE_ASSERT(pc->pt->pending_in > 0);
            pc->pt->pending_in--;
        }
    }
    pc->state = PC_CLOSING;
    if (pc->req != NULL) {
        struct raft_uv_connect *req = pc->req;
        pc->req = NULL;
        req->cb(req, NULL, status);
    }
    if (pc->raft_end != NULL) {
        uv_close((uv_handle_t *)pc->raft_end, raft_end_closed);
        pc->raft_end = NULL;
    }
    uv_close((uv_handle_t *)&pc->tcp, conn_handle_closed);
    uv_close((uv_handle_t *)&pc->timer, conn_handle_closed);
    if (pc->have_pipe)
        uv_close((uv_handle_t *)&pc->pipe, conn_handle_closed);
}

/* Refuse a peer: count it under reason (the metric's label), log why (at
 * most FENCE_PEER_TLS_LOG_PER_S lines a second, so a flood of strangers
 * cannot flood the log), then close. */
static void conn_refuse(pconn *pc, const char *reason, const char *why)
{
    ptls *pt = pc->pt;
    if (pt->refusals != NULL)
        fence_series_inc(fence_metric_with(pt->refusals, reason, strlen(reason)));
    uint64_t now = uv_now(pt->loop);
    if (now - pt->log_window_ms >= 1000) {
        if (pt->suppressed > 0)
            FENCE_LOG_W("raft peers: %u more connections refused in the last second "
                        "(not logged one by one)", pt->suppressed);
        pt->log_window_ms = now;
        pt->logged = 0;
        pt->suppressed = 0;
    }
    if (pt->logged < FENCE_PEER_TLS_LOG_PER_S) {
        pt->logged++;
        FENCE_LOG_W("raft peer %s refused: %s", pc->peer, why);
    } else {
        pt->suppressed++;
    }
    conn_close(pc, RAFT_NOCONNECTION);
}

/* Buffer allocation for reads (freed by the read callbacks). */
static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    (void)suggested;
    buf->base = malloc(PUMP_CHUNK);
    buf->len = buf->base != NULL ? PUMP_CHUNK : 0;
}

/* A TCP write finished (fence_tls_pump_sent_fn, arg the connection):
 * resume reading raft's bytes if we paused. */
static void tcp_sent(void *arg, size_t tag, int status)
{
    pconn *pc = arg;
    (void)tag;
    if (pc->state == PC_CLOSING)
        return;
    if (status != 0) {
        FENCE_LOG_D("raft peer %s: write: %s", pc->peer, uv_strerror(status));
        conn_close(pc, RAFT_NOCONNECTION);
        return;
    }
    if (pc->pipe_paused && pc->tcp.write_queue_size < FENCE_PEER_TLS_FLOW_MAX / 2) {
        pc->pipe_paused = false;
        conn_drive(pc); /* no-op unless open */
    }
}

/* Queue len bytes to a stream; the copy is freed by cb.  0 or -1. */
static int stream_write(pconn *pc, uv_stream_t *s, const char *data, size_t len,
                        uv_write_cb cb)
{
    pbytes *w = malloc(sizeof(*w) + len);
    if (w == NULL)
        return -1;
    memcpy(w->data, data, len);
    w->len = len;
    w->req.data = pc;
    uv_buf_t b = uv_buf_init(w->data, (unsigned)len);
    if (uv_write(&w->req, s, &b, 1, cb) != 0) {
        free(w);
        return -1;
    }
    return 0;
}

/* Send whatever OpenSSL has written to the network BIO, always through a
 * queued write (tcp.write_queue_size is the flow control's measure).  0 or
 * -1. */
static int flush_tls(pconn *pc)
{
    int rc = fence__tls_pump_send(&pc->pump, (uv_stream_t *)&pc->tcp, NULL, 0,
                                  tcp_sent, pc, 0);
    return rc < 0 ? -1 : 0;
}

/* A pipe write (toward raft) finished: resume TCP reads if paused. */
static void pipe_written(uv_write_t *req, int status)
{
    pbytes *w = (pbytes *)req;
    pconn *pc = req->data;
    free(w);
    if (pc->state == PC_CLOSING)
        return;
    if (status != 0) {
        conn_close(pc, RAFT_NOCONNECTION);
        return;
    }
    if (pc->tcp_paused && pc->pipe.write_queue_size < FENCE_PEER_TLS_FLOW_MAX / 2) {
        pc->tcp_paused = false;
        conn_drive(pc);
    }
}

/* Bytes from the network: feed them to OpenSSL and drive the session. */
static void tcp_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    pconn *pc = s->data;
    if (nread < 0) {
        free(buf->base);
        if (pc->state == PC_OPEN)
            FENCE_LOG_D("raft peer %s: closed: %s", pc->peer, uv_strerror((int)nread));
        else if (pc->state != PC_CLOSING)
            conn_refuse(pc, "closed", "closed during the TLS handshake");
        conn_close(pc, RAFT_NOCONNECTION);
        return;
    }
    if (nread > 0 && pc->state != PC_CLOSING) {
        pc->got_bytes = true;
        if (fence__tls_pump_feed(&pc->pump, buf->base, (size_t)nread) != 0) {
            free(buf->base);
            FENCE_LOG_W("raft peer %s: out of memory for TLS input", pc->peer);
            conn_close(pc, RAFT_NOCONNECTION);
            return;
        }
    }
    free(buf->base);
    if (nread > 0)
        conn_drive(pc);
}

/* Bytes from raft: encrypt them and send. */
static void pipe_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    pconn *pc = s->data;
    if (nread < 0) {
        free(buf->base);
        FENCE_LOG_D("raft peer %s: raft closed the stream", pc->peer);
        conn_close(pc, RAFT_NOCONNECTION);
        return;
    }
    if (nread > 0 && pc->state == PC_OPEN) {
        int n = SSL_write(pc->pump.ssl, buf->base, (int)nread);
        free(buf->base);
        if (n != (int)nread || flush_tls(pc) != 0) {
            char why[256];
            FENCE_LOG_W("raft peer %s: %s", pc->peer, ssl_why(why, sizeof(why)));
            conn_close(pc, RAFT_NOCONNECTION);
            return;
        }
        if (pc->tcp.write_queue_size > FENCE_PEER_TLS_FLOW_MAX) {
            pc->pipe_paused = true;
            uv_read_stop((uv_stream_t *)&pc->pipe);
        }
        return;
    }
    free(buf->base);
}

/* Check that the peer certificate names node id (CN "node-<id>"). */
static bool cert_names(pconn *pc, raft_id id, char *why, size_t cap)
{
    X509 *cert = SSL_get0_peer_certificate(pc->pump.ssl);
    if (cert == NULL) {
        snprintf(why, cap, "%s", "no peer certificate");
        return false;
    }
    char cn[128];
    int n = X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName,
                                      cn, sizeof(cn));
    char want[32];
    snprintf(want, sizeof(want), "node-%" PRIu64, (uint64_t)id);
    if (n <= 0 || strcmp(cn, want) != 0) {
        snprintf(why, cap, "certificate CN '%.60s' does not name %s",
                 n > 0 ? cn : "", want);
        return false;
    }
    return true;
}

/* Make the socketpair: our end starts reading, raft's end waits in
 * pc->raft_end.  0 or -1. */
static int make_pair(pconn *pc)
{
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
        return -1;
    uv_pipe_t *re = raft_malloc(sizeof(*re));
    if (re == NULL)
        goto out_close_fds;
    uv_pipe_init(pc->pt->loop, &pc->pipe, 0);
    pc->pipe.data = pc;
    pc->have_pipe = true;
    pc->handles++;
    if (uv_pipe_open(&pc->pipe, fds[0]) != 0) {
        close(fds[0]);
        raft_free(re);
        close(fds[1]);
        return -1;
    }
    uv_pipe_init(pc->pt->loop, re, 0);
    if (uv_pipe_open(re, fds[1]) != 0) {
        close(fds[1]);
        uv_close((uv_handle_t *)re, raft_end_closed);
        return -1;
    }
    pc->raft_end = re;
    uv_read_start((uv_stream_t *)&pc->pipe, alloc_cb, pipe_read);
    return 0;

out_close_fds:
    close(fds[0]);
    close(fds[1]);
    return -1;
}

/* An incoming connection from node id is about to open: if that node
 * already has FENCE_PEER_TLS_OPEN_PER_ID open incoming connections, close
 * the oldest (a real node keeps one; older ones are dead links it has
 * replaced, or someone holding its key opening many). */
static void limit_open(ptls *pt, const pconn *pc)
{
    pconn *old = NULL;
    unsigned n = 0;
    for (pconn *q = pt->conns; q != NULL; q = q->next) {
        if (q == pc || q->outgoing || q->state != PC_OPEN || q->id != pc->id)
            continue;
        n++;
        if (old == NULL || q->seq < old->seq)
            old = q;
    }
    if (n >= FENCE_PEER_TLS_OPEN_PER_ID && old != NULL) {
        char why[128];
        snprintf(why, sizeof(why), "superseded: node %" PRIu64 " opened a newer connection "
                 "(at most %d each)", (uint64_t)pc->id, FENCE_PEER_TLS_OPEN_PER_ID);
        conn_refuse(old, "superseded", why);
    }
}

/* The connection is authenticated: hand raft its stream. */
static void conn_open(pconn *pc)
{
    if (make_pair(pc) != 0) {
        conn_refuse(pc, "internal", "cannot make a socketpair");
        return;
    }
    uv_timer_stop(&pc->timer);
    FENCE_ASSERT(pc->pt->pending > 0);
    pc->pt->pending--;
    if (!pc->outgoing) {
        FENCE_ASSERT(pc->pt->pending_in > 0);
        pc->pt->pending_in--;
    }
    if (!pc->outgoing)
        limit_open(pc->pt, pc);
    pc->state = PC_OPEN;
    uv_stream_t *re = (uv_stream_t *)pc->raft_end;
    pc->raft_end = NULL;
    FENCE_LOG_I("raft peer %s: node %" PRIu64 " authenticated (%s)", pc->peer,
                (uint64_t)pc->id, pc->outgoing ? "outgoing" : "incoming");
    if (pc->outgoing) {
        struct raft_uv_connect *req = pc->req;
        pc->req = NULL;
        req->cb(req, re, 0);
    } else {
        pc->pt->accept_cb(pc->pt->t, pc->id, pc->address, re);
    }
}

/* Send the hello (connecting side, right after the handshake).  0 or -1. */
static int send_hello(pconn *pc)
{
    uint8_t h[FENCE_PEER_HELLO_MAX];
    long n = fence__peer_hello_encode(pc->pt->id, pc->pt->address, h, sizeof(h));
    FENCE_ASSERT(n > 0); /* tls_init checked the address's length */
    if (SSL_write(pc->pump.ssl, h, (int)n) != (int)n)
        return -1;
    return flush_tls(pc);
}

/* The raft address of member id into addr (cap bytes); false when id is
 * not a member of the current configuration (or nobody installed the
 * lookup). */
static bool member_address(ptls *pt, uint64_t id, char *addr, size_t cap)
{
    if (pt->members == NULL)
        return false;
    uint64_t mid;
    for (unsigned i = 0; pt->members(pt->members_arg, i, &mid, addr, cap); i++)
        if (mid == id)
            return true;
    return false;
}

/* Whether ip (IPv4, network order) is the raft host of some member. */
static bool member_host(ptls *pt, uint32_t ip)
{
    if (pt->members == NULL || ip == 0)
        return false;
    char addr[FENCE_PEER_TLS_ADDR_MAX];
    uint64_t mid;
    struct sockaddr_in sa;
    for (unsigned i = 0; pt->members(pt->members_arg, i, &mid, addr, sizeof(addr)); i++)
        if (parse_addr(addr, &sa) == 0 && sa.sin_addr.s_addr == ip)
            return true;
    return false;
}

/* The membership check of an incoming peer whose hello (pc->id,
 * pc->address) has been read: its id must be a member, the hello's address
 * that member's configured raft address, and the TCP source address that
 * address's host.  On refusal, why says what and *reason is the metric's
 * label. */
static bool admitted(pconn *pc, char *why, size_t cap, const char **reason)
{
    ptls *pt = pc->pt;
    char conf[FENCE_PEER_TLS_ADDR_MAX];
    *reason = "member";
    if (pt->members == NULL) {
        snprintf(why, cap, "%s", "the raft configuration is not known yet");
        return false;
    }
    if (!member_address(pt, pc->id, conf, sizeof(conf))) {
        snprintf(why, cap, "node %" PRIu64 " is not a member of the raft configuration",
                 (uint64_t)pc->id);
        return false;
    }
    *reason = "address";
    struct sockaddr_in want;
    struct sockaddr_in said;
    if (parse_addr(conf, &want) != 0) {
        snprintf(why, cap, "node %" PRIu64 "'s configured address '%.60s' is not IPv4:port",
                 (uint64_t)pc->id, conf);
        return false;
    }
    if (parse_addr(pc->address, &said) != 0 ||
        said.sin_addr.s_addr != want.sin_addr.s_addr || said.sin_port != want.sin_port) {
        snprintf(why, cap, "node %" PRIu64 " says it is at '%.60s'; the configuration has '%.60s'",
                 (uint64_t)pc->id, pc->address, conf);
        return false;
    }
    if (pc->ip != want.sin_addr.s_addr) {
        char host[INET_ADDRSTRLEN] = "?";
        uv_ip4_name(&want, host, sizeof(host));
        snprintf(why, cap, "node %" PRIu64 " connects from another host than its configured %s",
                 (uint64_t)pc->id, host);
        return false;
    }
    return true;
}

/* Read the hello (exactly its bytes: raft's follow); on the whole of it,
 * check and open.  Returns true when the caller may go on reading
 * application data. */
static bool read_hello(pconn *pc)
{
    char why[256];
    uint64_t id = 0;
    long rc;
    for (;;) {
        size_t need = 0;
        rc = fence__peer_hello_decode(pc->hello, pc->hello_len, &id, pc->address, &need);
        if (rc != FENCE_PEER_HELLO_PARTIAL)
            break;
        FENCE_ASSERT(need > pc->hello_len && need <= sizeof(pc->hello));
        int n = SSL_read(pc->pump.ssl, pc->hello + pc->hello_len, (int)(need - pc->hello_len));
        if (n <= 0) {
            int e = SSL_get_error(pc->pump.ssl, n);
            if (e == SSL_ERROR_WANT_READ)
                return false;
            conn_refuse(pc, "hello", e == SSL_ERROR_ZERO_RETURN ? "closed before the hello"
                                                                : ssl_why(why, sizeof(why)));
            return false;
        }
        pc->hello_len += (size_t)n;
    }
    if (rc < 0) {
        conn_refuse(pc, "hello", fence__peer_hello_strerror(rc));
        return false;
    }
    if (pc->pt->check_id && !cert_names(pc, id, why, sizeof(why))) {
        conn_refuse(pc, "name", why);
        return false;
    }
    pc->id = id;
    const char *reason = NULL;
    if (!admitted(pc, why, sizeof(why), &reason)) {
        conn_refuse(pc, reason, why);
        return false;
    }
    conn_open(pc);
    return pc->state == PC_OPEN;
}

/* Move the session on: handshake, hello, then decrypted bytes to raft. */
static void conn_drive(pconn *pc)
{
    char why[256];
    if (pc->state == PC_HANDSHAKE) {
        int rv = SSL_do_handshake(pc->pump.ssl);
        if (flush_tls(pc) != 0) {
            conn_close(pc, RAFT_NOCONNECTION);
            return;
        }
        if (rv != 1) {
            int e = SSL_get_error(pc->pump.ssl, rv);
            if (e == SSL_ERROR_WANT_READ)
                return;
            long vr = SSL_get_verify_result(pc->pump.ssl);
            if (vr != X509_V_OK) {
                snprintf(why, sizeof(why), "certificate: %s",
                         X509_verify_cert_error_string(vr));
                ERR_clear_error();
            } else {
                ssl_why(why, sizeof(why));
            }
            conn_refuse(pc, "tls", why);
            return;
        }
        if (pc->outgoing) {
            if (pc->pt->check_id && !cert_names(pc, pc->id, why, sizeof(why))) {
                conn_refuse(pc, "name", why);
                return;
            }
            if (send_hello(pc) != 0) {
                conn_refuse(pc, "internal", "cannot send the hello");
                return;
            }
            conn_open(pc);
            if (pc->state != PC_OPEN)
                return;
        } else {
            pc->state = PC_HELLO;
        }
    }
    if (pc->state == PC_HELLO && !read_hello(pc))
        return;
    if (pc->state != PC_OPEN || pc->tcp_paused)
        return;
    if (pc->pipe_paused && pc->tcp.write_queue_size < FENCE_PEER_TLS_FLOW_MAX / 2) {
        pc->pipe_paused = false;
        uv_read_start((uv_stream_t *)&pc->pipe, alloc_cb, pipe_read);
    }
    char buf[PUMP_CHUNK];
    for (;;) {
        int n = SSL_read(pc->pump.ssl, buf, sizeof(buf));
        if (n <= 0) {
            int e = SSL_get_error(pc->pump.ssl, n);
            if (flush_tls(pc) != 0) {
                conn_close(pc, RAFT_NOCONNECTION);
                return;
            }
            if (e == SSL_ERROR_WANT_READ)
                break;
            if (e == SSL_ERROR_ZERO_RETURN)
                FENCE_LOG_D("raft peer %s: TLS closed", pc->peer);
            else
                FENCE_LOG_W("raft peer %s: %s", pc->peer, ssl_why(why, sizeof(why)));
            conn_close(pc, RAFT_NOCONNECTION);
            return;
        }
        if (stream_write(pc, (uv_stream_t *)&pc->pipe, buf, (size_t)n, pipe_written) != 0) {
            conn_close(pc, RAFT_NOCONNECTION);
            return;
        }
        if (pc->pipe.write_queue_size > FENCE_PEER_TLS_FLOW_MAX) {
            /* Raft is slow to read: stop taking bytes off the network; the
             * rest stays buffered in the BIO until pipe_written resumes. */
            pc->tcp_paused = true;
            uv_read_stop((uv_stream_t *)&pc->tcp);
            return;
        }
    }
    uv_read_start((uv_stream_t *)&pc->tcp, alloc_cb, tcp_read);
}

/* A deadline passed: an incoming connection that has sent nothing within
 * FENCE_PEER_TLS_FIRST_BYTE_MS is dropped; otherwise the timer runs on to
 * the handshake deadline, FENCE_PEER_TLS_HANDSHAKE_MS after the start. */
static void conn_timeout(uv_timer_t *tm)
{
    pconn *pc = tm->data;
    uint64_t age = uv_now(pc->pt->loop) - pc->born_ms;
    if (!pc->outgoing && !pc->got_bytes) {
        conn_refuse(pc, "timeout", "sent nothing in time");
        return;
    }
    if (age < FENCE_PEER_TLS_HANDSHAKE_MS) {
        uv_timer_start(&pc->timer, conn_timeout, FENCE_PEER_TLS_HANDSHAKE_MS - age, 0);
        return;
    }
    conn_refuse(pc, "timeout", "TLS handshake timed out");
}

/* A new connection object around an initialised pc->tcp.  NULL if the
 * SSL session cannot be made (pc->tcp is then closed by the caller). */
static pconn *conn_new(ptls *pt, bool outgoing)
{
    pconn *pc = calloc(1, sizeof(*pc));
    if (pc == NULL)
        return NULL;
    pc->pt = pt;
    pc->outgoing = outgoing;
    if (fence__tls_pump_init(&pc->pump, pt->ctx, !outgoing) != 0)
        goto out_free;
    uv_tcp_init(pt->loop, &pc->tcp);
    uv_timer_init(pt->loop, &pc->timer);
    pc->tcp.data = pc;
    pc->timer.data = pc;
    pc->handles = 2;
    pc->next = pt->conns;
    if (pt->conns != NULL)
        pt->conns->prev = pc;
    pt->conns = pc;
    pt->pending++;
    if (!outgoing) {
        pt->pending_in++;
        pc->seq = ++pt->seq;
    }
    pc->born_ms = uv_now(pt->loop);
    snprintf(pc->peer, sizeof(pc->peer), "%s", "?");
    uv_timer_start(&pc->timer, conn_timeout,
                   outgoing ? FENCE_PEER_TLS_HANDSHAKE_MS : FENCE_PEER_TLS_FIRST_BYTE_MS, 0);
    return pc;

out_free:
    free(pc);
    return NULL;
}

/* Format a socket address as ip:port (at most 45 + 1 + 5 + 1 bytes). */
static void fmt_addr(const struct sockaddr_storage *ss, char *out, size_t cap)
{
    char ip[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
        uv_ip4_name(a, ip, sizeof(ip));
        port = ntohs(a->sin_port);
    } else if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
        uv_ip6_name(a, ip, sizeof(ip));
        port = ntohs(a->sin6_port);
    }
    snprintf(out, cap, "%s:%u", ip, port);
}

/* The oldest incoming connection still in its handshake, other than pc,
 * that matches: from ip when by_ip, else from any address that is no
 * member's host when strangers, else any.  NULL if there is none. */
static pconn *oldest_pending(ptls *pt, const pconn *pc, bool by_ip, bool strangers,
                             unsigned *count)
{
    pconn *old = NULL;
    unsigned n = 0;
    for (pconn *q = pt->conns; q != NULL; q = q->next) {
        if (q == pc || q->outgoing || q->state == PC_OPEN || q->state == PC_CLOSING)
            continue;
        if (by_ip && q->ip != pc->ip)
            continue;
        if (!by_ip && strangers && q->member_ip)
            continue;
        n++;
        if (old == NULL || q->seq < old->seq)
            old = q;
    }
    if (count != NULL)
        *count = n;
    return old;
}

/* Find a handshake slot for the new incoming connection pc (already
 * counted in pending_in): a stranger's address keeps at most
 * FENCE_PEER_TLS_PENDING_PER_IP slots (its oldest makes room); when all
 * FENCE_PEER_TLS_PENDING_MAX are taken, the oldest stranger's connection
 * is evicted, or, for a newcomer from a member's host, the oldest of all.
 * Returns false (pc refused) when there is no room for it. */
static bool take_slot(ptls *pt, pconn *pc)
{
    if (!pc->member_ip) {
        unsigned same = 0;
        pconn *old = oldest_pending(pt, pc, true, false, &same);
        if (same >= FENCE_PEER_TLS_PENDING_PER_IP && old != NULL)
            conn_refuse(old, "evicted", "evicted: too many handshakes from its address");
    }
    if (pt->pending_in <= FENCE_PEER_TLS_PENDING_MAX)
        return true;
    pconn *victim = oldest_pending(pt, pc, false, true, NULL);
    if (victim == NULL && pc->member_ip)
        victim = oldest_pending(pt, pc, false, false, NULL);
    if (victim == NULL) {
        conn_refuse(pc, "busy", "too many connections in the handshake");
        return false;
    }
    conn_refuse(victim, "evicted", "evicted by a newer connection (handshake slots full)");
    return true;
}

/* A stranger or a peer connected to the raft port. */
static void on_connection(uv_stream_t *server, int status)
{
    ptls *pt = server->data;
    if (status != 0 || pt->closing)
        return;
    pconn *pc = conn_new(pt, false);
    if (pc == NULL) {
        uv_tcp_t *tmp = malloc(sizeof(*tmp));
        if (tmp == NULL)
            return;
        uv_tcp_init(pt->loop, tmp);
        if (uv_accept(server, (uv_stream_t *)tmp) == 0)
            FENCE_LOG_W("raft peer refused: out of memory");
        uv_close((uv_handle_t *)tmp, (uv_close_cb)free);
        return;
    }
    if (uv_accept(server, (uv_stream_t *)&pc->tcp) != 0) {
        conn_close(pc, 0);
        return;
    }
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    if (uv_tcp_getpeername(&pc->tcp, (struct sockaddr *)&ss, &len) == 0) {
        fmt_addr(&ss, pc->peer, sizeof(pc->peer));
        if (ss.ss_family == AF_INET)
            pc->ip = ((const struct sockaddr_in *)&ss)->sin_addr.s_addr;
    }
    pc->member_ip = member_host(pt, pc->ip);
    if (!take_slot(pt, pc))
        return;
    uv_tcp_nodelay(&pc->tcp, 1);
    uv_read_start((uv_stream_t *)&pc->tcp, alloc_cb, tcp_read);
}

/* transport->init: remember who we are. */
static int tls_init(struct raft_uv_transport *t, raft_id id, const char *address)
{
    ptls *pt = t->impl;
    if (strlen(address) >= sizeof(pt->address))
        return RAFT_NAMETOOLONG;
    pt->id = id;
    snprintf(pt->address, sizeof(pt->address), "%s", address);
    if (parse_addr(address, &pt->self_sa) != 0)
        memset(&pt->self_sa, 0, sizeof(pt->self_sa));
    pt->self_sa.sin_port = 0;
    return 0;
}

/* Split "a.b.c.d:port" into an IPv4 socket address.  0 or -1. */
static int parse_addr(const char *address, struct sockaddr_in *sa)
{
    const char *colon = strrchr(address, ':');
    char host[64];
    if (colon == NULL || (size_t)(colon - address) >= sizeof(host))
        return -1;
    memcpy(host, address, (size_t)(colon - address));
    host[colon - address] = '\0';
    char *end;
    unsigned long port = strtoul(colon + 1, &end, 10);
    if (*end != '\0' || port == 0 || port > 65535)
        return -1;
    return uv_ip4_addr(host, (int)port, sa) == 0 ? 0 : -1;
}

/* transport->listen: bind the raft port. */
static int tls_listen(struct raft_uv_transport *t, raft_uv_accept_cb cb)
{
    ptls *pt = t->impl;
    struct sockaddr_in sa;
    if (parse_addr(pt->address, &sa) != 0) {
        snprintf(t->errmsg, sizeof(t->errmsg), "bad raft address %s", pt->address);
        return RAFT_INVALID;
    }
    pt->accept_cb = cb;
    uv_tcp_init(pt->loop, &pt->listener);
    pt->listener.data = pt;
    pt->listening = true;
    int rv = uv_tcp_bind(&pt->listener, (const struct sockaddr *)&sa, 0);
    if (rv == 0)
        rv = uv_listen((uv_stream_t *)&pt->listener, 128, on_connection);
    if (rv != 0) {
        snprintf(t->errmsg, sizeof(t->errmsg), "listen on %s: %s", pt->address,
                 uv_strerror(rv));
        return RAFT_IOERR;
    }
    FENCE_LOG_I("raft transport: mutual TLS on %s", pt->address);
    return 0;
}

/* TCP connect finished: start the TLS handshake. */
static void on_connect(uv_connect_t *creq, int status)
{
    pconn *pc = creq->data;
    if (pc->state == PC_CLOSING)
        return;
    if (status != 0) {
        conn_close(pc, RAFT_NOCONNECTION);
        return;
    }
    uv_tcp_nodelay(&pc->tcp, 1);
    uv_read_start((uv_stream_t *)&pc->tcp, alloc_cb, tcp_read);
    conn_drive(pc); /* sends the ClientHello */
}

/* transport->connect: TCP, TLS, hello; raft's cb fires after all three. */
static int tls_connect(struct raft_uv_transport *t, struct raft_uv_connect *req,
                       raft_id id, const char *address, raft_uv_connect_cb cb)
{
    ptls *pt = t->impl;
    FENCE_ASSERT(!pt->closing);
    struct sockaddr_in sa;
    if (parse_addr(address, &sa) != 0)
        return RAFT_NOCONNECTION;
    pconn *pc = conn_new(pt, true);
    if (pc == NULL)
        return RAFT_NOMEM;
    req->cb = cb;
    pc->req = req;
    pc->id = id;
    snprintf(pc->peer, sizeof(pc->peer), "%.63s", address);
    pc->creq.data = pc;
    /* Connect from our own raft host: the peer admits us only from the
     * host our configured address names (a multi-homed host would pick
     * the source address by route otherwise). */
    if (pt->self_sa.sin_family == AF_INET && pt->self_sa.sin_addr.s_addr != htonl(INADDR_ANY)) {
        int brv = uv_tcp_bind(&pc->tcp, (const struct sockaddr *)&pt->self_sa, 0);
        if (brv != 0)
            FENCE_LOG_D("raft peer %s: bind to own raft host: %s", pc->peer, uv_strerror(brv));
    }
    int rv = uv_tcp_connect(&pc->creq, &pc->tcp, (const struct sockaddr *)&sa, on_connect);
    if (rv != 0) {
        pc->req = NULL; /* raft sees the error as the return value */
        conn_close(pc, 0);
        return RAFT_NOCONNECTION;
    }
    return 0;
}

/* The listener's close callback. */
static void listener_closed(uv_handle_t *h)
{
    ptls *pt = h->data;
    pt->listener_closed = true;
    maybe_closed(pt);
}

/* transport->close: stop listening, cancel connects, close everything. */
static void tls_close(struct raft_uv_transport *t, raft_uv_transport_close_cb cb)
{
    ptls *pt = t->impl;
    FENCE_ASSERT(!pt->closing);
    pt->closing = true;
    pt->close_cb = cb;
    if (pt->listening)
        uv_close((uv_handle_t *)&pt->listener, listener_closed);
    for (pconn *pc = pt->conns; pc != NULL; pc = pc->next)
        conn_close(pc, RAFT_CANCELED);
    maybe_closed(pt);
}

/* See peer_tls.h. */
void fence__peer_tls_set_members(struct raft_uv_transport *t,
                                 fence_peer_tls_member_fn fn, void *arg)
{
    ptls *pt = t->impl;
    FENCE_ASSERT(pt != NULL);
    pt->members = fn;
    pt->members_arg = arg;
}

/* See peer_tls.h. */
void fence__peer_tls_set_refusals(struct raft_uv_transport *t, fence_metric *m)
{
    ptls *pt = t->impl;
    FENCE_ASSERT(pt != NULL);
    pt->refusals = m;
}

/* See peer_tls.h. */
int fence__peer_tls_init(struct raft_uv_transport *t, uv_loop_t *loop,
                         const char *cert, const char *key, const char *ca,
                         bool check_id)
{
    char why[256];
    memset(t, 0, sizeof(*t));
    ptls *pt = calloc(1, sizeof(*pt));
    if (pt == NULL)
        return -1;
    pt->t = t;
    pt->loop = loop;
    pt->check_id = check_id;
    pt->ctx = SSL_CTX_new(TLS_method());
    if (pt->ctx == NULL)
        goto out_free;
    SSL_CTX_set_min_proto_version(pt->ctx, TLS1_3_VERSION);
    SSL_CTX_set_num_tickets(pt->ctx, 0);
    SSL_CTX_set_session_cache_mode(pt->ctx, SSL_SESS_CACHE_OFF);
    if (SSL_CTX_use_certificate_chain_file(pt->ctx, cert) != 1) {
        FENCE_LOG_E("peer-tls-cert %s: %s", cert, ssl_why(why, sizeof(why)));
        goto out_free_ctx;
    }
    if (SSL_CTX_use_PrivateKey_file(pt->ctx, key, SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(pt->ctx) != 1) {
        FENCE_LOG_E("peer-tls-key %s: %s", key, ssl_why(why, sizeof(why)));
        goto out_free_ctx;
    }
    if (SSL_CTX_load_verify_locations(pt->ctx, ca, NULL) != 1) {
        FENCE_LOG_E("peer-tls-ca %s: %s", ca, ssl_why(why, sizeof(why)));
        goto out_free_ctx;
    }
    SSL_CTX_set_verify(pt->ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    t->impl = pt;
    t->init = tls_init;
    t->listen = tls_listen;
    t->connect = tls_connect;
    t->close = tls_close;
    return 0;

out_free_ctx:
    SSL_CTX_free(pt->ctx);
out_free:
    free(pt);
    return -1;
}
