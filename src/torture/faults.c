/* fence-faults: a small TCP fault proxy for the torture harness.
 *
 * It forwards connections accepted on 127.0.0.1:<listen> to <host>:<port>
 * and lets a controller inject network faults by writing one command per
 * line to its standard input:
 *
 *   delay <ms>    hold every chunk of data for ms before forwarding it
 *                 (both directions; 0 turns it off)
 *   partition     stop forwarding in both directions and stop connecting
 *                 new clients upstream (a black hole: nothing is lost, it
 *                 just does not arrive until "heal", like a real partition)
 *   heal          end the partition and the delay
 *   reset         close every connection abruptly (RST)
 *   quit          exit
 *
 * Each command is answered with one line "ok <command>" on stdout, so the
 * controller knows it took effect.  End of input on stdin also exits.
 * Everything is single-threaded on poll(2); memory is bounded by
 * PROXY_CONNS_MAX connections and PROXY_QUEUE_MAX queued bytes per
 * direction (reading stops while a queue is full).
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/version.h"

/* Most connections proxied at once; more are refused (closed). */
#define PROXY_CONNS_MAX 256
/* Most bytes queued in one direction of one connection. */
#define PROXY_QUEUE_MAX (1024 * 1024)
/* Bytes read from a socket at a time (one queued chunk). */
#define PROXY_CHUNK 16384
/* Longest control line. */
#define PROXY_CTL_MAX 256

/* A piece of data in flight, due for forwarding at due_ms. */
typedef struct chunk {
    struct chunk *next; /* next chunk in the queue, or NULL */
    uint64_t due_ms;    /* monotonic time at which it may be forwarded */
    size_t len;         /* bytes in data */
    size_t off;         /* bytes of data already forwarded */
    char data[];        /* the bytes */
} chunk;

/* One direction of a connection: bytes read from one socket, waiting to be
 * written to the other. */
typedef struct pipe_dir {
    chunk *head;   /* oldest chunk */
    chunk *tail;   /* newest chunk */
    size_t queued; /* bytes queued (sum of len - off) */
    bool eof;      /* the reading side sent FIN; forward it after the queue */
    bool shut;     /* FIN forwarded to the writing side */
} pipe_dir;

/* A proxied connection. */
typedef struct conn {
    bool used;      /* slot in use */
    int cfd;        /* client socket */
    int sfd;        /* server socket, -1 until connected */
    bool connecting;/* non-blocking connect in progress */
    pipe_dir up;    /* client -> server */
    pipe_dir down;  /* server -> client */
} conn;

static conn conns[PROXY_CONNS_MAX];    /* connection slots */
static uint64_t delay_ms;              /* delay stamped on newly read data */
static bool partitioned;               /* black hole: nothing moves */
static struct sockaddr_storage target; /* upstream address */
static socklen_t target_len;           /* its length */

/* Returns the monotonic clock in milliseconds. */
static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Frees every chunk of a direction and clears it. */
static void dir_clear(pipe_dir *d)
{
    chunk *c = d->head;
    while (c != NULL) {
        chunk *next = c->next;
        free(c);
        c = next;
    }
    memset(d, 0, sizeof(*d));
}

/* Closes a connection; with hard set, sockets are closed with an RST
 * (SO_LINGER 0), as a connection reset by the network would be. */
static void conn_close(conn *c, bool hard)
{
    if (hard) {
        struct linger lg = {1, 0};
        setsockopt(c->cfd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        if (c->sfd >= 0) {
            setsockopt(c->sfd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        }
    }
    close(c->cfd);
    if (c->sfd >= 0) {
        close(c->sfd);
    }
    dir_clear(&c->up);
    dir_clear(&c->down);
    memset(c, 0, sizeof(*c));
    c->cfd = -1;
    c->sfd = -1;
}

/* Starts the non-blocking upstream connect of a connection.  Returns false
 * when it failed at once (the caller closes the connection). */
static bool conn_start_upstream(conn *c)
{
    int fd = socket(target.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return false;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (struct sockaddr *)&target, target_len) != 0 && errno != EINPROGRESS) {
        close(fd);
        return false;
    }
    c->sfd = fd;
    c->connecting = true;
    return true;
}

/* Reads what is available from fd into direction d, stamping it with the
 * current delay.  Returns false when the connection must be closed (error).
 * EOF sets d->eof. */
static bool dir_read(pipe_dir *d, int fd)
{
    if (d->queued >= PROXY_QUEUE_MAX || d->eof) {
        return true;
    }
    chunk *c = malloc(sizeof(*c) + PROXY_CHUNK);
    if (c == NULL) {
        return false;
    }
    ssize_t n = read(fd, c->data, PROXY_CHUNK);
    if (n < 0) {
        free(c);
        return errno == EAGAIN || errno == EINTR;
    }
    if (n == 0) {
        free(c);
        d->eof = true;
        return true;
    }
    c->next = NULL;
    c->len = (size_t)n;
    c->off = 0;
    c->due_ms = now_ms() + delay_ms;
    if (d->tail != NULL) {
        d->tail->next = c;
    } else {
        d->head = c;
    }
    d->tail = c;
    d->queued += (size_t)n;
    return true;
}

/* Writes due chunks of direction d to fd, then forwards a FIN when the queue
 * is empty and the reading side ended.  Returns false on a write error. */
static bool dir_write(pipe_dir *d, int fd)
{
    uint64_t now = now_ms();
    while (d->head != NULL && d->head->due_ms <= now) {
        chunk *c = d->head;
        ssize_t n = write(fd, c->data + c->off, c->len - c->off);
        if (n < 0) {
            return errno == EAGAIN || errno == EINTR;
        }
        c->off += (size_t)n;
        d->queued -= (size_t)n;
        if (c->off < c->len) {
            return true;
        }
        d->head = c->next;
        if (d->head == NULL) {
            d->tail = NULL;
        }
        free(c);
    }
    if (d->head == NULL && d->eof && !d->shut) {
        shutdown(fd, SHUT_WR);
        d->shut = true;
    }
    return true;
}

/* Accepts every pending client on the listening socket. */
static void accept_all(int lfd)
{
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            return;
        }
        int slot = -1;
        for (int i = 0; i < PROXY_CONNS_MAX; i++) {
            if (!conns[i].used) {
                slot = i;
                break;
            }
        }
        if (slot < 0) {
            close(fd);
            continue;
        }
        conn *c = &conns[slot];
        memset(c, 0, sizeof(*c));
        c->used = true;
        c->cfd = fd;
        c->sfd = -1;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (!partitioned && !conn_start_upstream(c)) {
            conn_close(c, true);
        }
    }
}

/* Runs one control command line and acknowledges it on stdout.  Unknown
 * commands get "err <line>". */
static void control(char *line)
{
    size_t len = strlen(line);
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) {
        line[--len] = '\0';
    }
    unsigned long long ms;
    if (sscanf(line, "delay %llu", &ms) == 1) {
        delay_ms = ms;
    } else if (strcmp(line, "partition") == 0) {
        partitioned = true;
    } else if (strcmp(line, "heal") == 0) {
        partitioned = false;
        delay_ms = 0;
        for (int i = 0; i < PROXY_CONNS_MAX; i++) {
            conn *c = &conns[i];
            if (c->used && c->sfd < 0 && !conn_start_upstream(c)) {
                conn_close(c, true);
            }
        }
    } else if (strcmp(line, "reset") == 0) {
        for (int i = 0; i < PROXY_CONNS_MAX; i++) {
            if (conns[i].used) {
                conn_close(&conns[i], true);
            }
        }
    } else if (strcmp(line, "quit") == 0) {
        printf("ok quit\n");
        fflush(stdout);
        exit(0);
    } else if (len > 0) {
        printf("err unknown command: %s\n", line);
        fflush(stdout);
        return;
    } else {
        return;
    }
    printf("ok %s\n", line);
    fflush(stdout);
}

/* Resolves host:port into the global target address, or exits. */
static void resolve_target(const char *host, const char *port)
{
    struct addrinfo hints = {0}, *res;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0) {
        fprintf(stderr, "fence-faults: cannot resolve %s:%s: %s\n", host, port, gai_strerror(rc));
        exit(2);
    }
    memcpy(&target, res->ai_addr, res->ai_addrlen);
    target_len = res->ai_addrlen;
    freeaddrinfo(res);
}

/* Opens the listening socket on 127.0.0.1:port, or exits. */
static int listen_on(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        perror("fence-faults: socket");
        exit(2);
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 128) != 0) {
        fprintf(stderr, "fence-faults: cannot listen on 127.0.0.1:%d: %s\n", port, strerror(errno));
        exit(2);
    }
    return fd;
}

/* Computes the poll timeout: the time until the earliest delayed chunk is
 * due, or -1 when nothing waits. */
static int next_timeout(void)
{
    uint64_t now = now_ms(), best = UINT64_MAX;
    for (int i = 0; i < PROXY_CONNS_MAX; i++) {
        conn *c = &conns[i];
        if (!c->used || partitioned || c->sfd < 0 || c->connecting) {
            continue;
        }
        if (c->up.head != NULL && c->up.head->due_ms < best) {
            best = c->up.head->due_ms;
        }
        if (c->down.head != NULL && c->down.head->due_ms < best) {
            best = c->down.head->due_ms;
        }
    }
    if (best == UINT64_MAX) {
        return -1;
    }
    return best <= now ? 0 : (int)(best - now);
}

/* Runs the proxy: one poll loop over stdin (control), the listening socket
 * and both sides of every connection; forwards due data, then retires
 * connections whose both directions are finished. */
int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--version") == 0) {
        printf("fence-faults %s\n", FENCE_VERSION);
        return 0;
    }
    if (argc != 4) {
        fprintf(stderr, "usage: fence-faults <listen-port> <target-host> <target-port>\n"
                        "  control commands on stdin: delay <ms> | partition | heal | reset | quit\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    char *end;
    long lport = strtol(argv[1], &end, 10);
    if (*end != '\0' || lport <= 0 || lport > 65535) {
        fprintf(stderr, "fence-faults: bad listen port '%s'\n", argv[1]);
        return 2;
    }
    resolve_target(argv[2], argv[3]);
    int lfd = listen_on((int)lport);
    for (int i = 0; i < PROXY_CONNS_MAX; i++) {
        conns[i].cfd = -1;
        conns[i].sfd = -1;
    }
    printf("ok listening %ld\n", lport);
    fflush(stdout);
    char ctl[PROXY_CTL_MAX];
    size_t ctl_len = 0;
    static struct pollfd pfds[2 + 2 * PROXY_CONNS_MAX];
    static int owner[2 + 2 * PROXY_CONNS_MAX];
    for (;;) {
        int np = 0;
        pfds[np++] = (struct pollfd){.fd = 0, .events = POLLIN};
        pfds[np++] = (struct pollfd){.fd = lfd, .events = POLLIN};
        uint64_t now = now_ms();
        for (int i = 0; i < PROXY_CONNS_MAX; i++) {
            conn *c = &conns[i];
            if (!c->used) {
                continue;
            }
            bool flowing = !partitioned && c->sfd >= 0 && !c->connecting;
            short ce = 0, se = 0;
            if (flowing && !c->up.eof && c->up.queued < PROXY_QUEUE_MAX) ce |= POLLIN;
            if (flowing && c->down.head != NULL && c->down.head->due_ms <= now) ce |= POLLOUT;
            if (flowing && !c->down.eof && c->down.queued < PROXY_QUEUE_MAX) se |= POLLIN;
            if (flowing && c->up.head != NULL && c->up.head->due_ms <= now) se |= POLLOUT;
            if (c->connecting) se |= POLLOUT;
            owner[np] = i;
            /* A socket with nothing to wait for is left out (fd -1), so a
             * hung-up peer does not make poll spin during a partition. */
            pfds[np++] = (struct pollfd){.fd = ce ? c->cfd : -1, .events = ce};
            if (c->sfd >= 0) {
                owner[np] = i;
                pfds[np++] = (struct pollfd){.fd = se ? c->sfd : -1, .events = se};
            }
        }
        int rc = poll(pfds, (nfds_t)np, next_timeout());
        if (rc < 0 && errno != EINTR) {
            perror("fence-faults: poll");
            return 1;
        }
        if (pfds[0].revents & (POLLIN | POLLHUP)) {
            ssize_t n = read(0, ctl + ctl_len, sizeof(ctl) - 1 - ctl_len);
            if (n <= 0) {
                return 0; /* the controller went away */
            }
            ctl_len += (size_t)n;
            ctl[ctl_len] = '\0';
            char *nl;
            while ((nl = strchr(ctl, '\n')) != NULL) {
                *nl = '\0';
                control(ctl);
                size_t rest = ctl_len - (size_t)(nl + 1 - ctl);
                memmove(ctl, nl + 1, rest);
                ctl_len = rest;
                ctl[ctl_len] = '\0';
            }
            if (ctl_len == sizeof(ctl) - 1) {
                ctl_len = 0; /* an overlong line: drop it */
            }
        }
        if (pfds[1].revents & POLLIN) {
            accept_all(lfd);
        }
        for (int p = 2; p < np; p++) {
            conn *c = &conns[owner[p]];
            if (!c->used || pfds[p].revents == 0) {
                continue;
            }
            bool is_client = pfds[p].fd == c->cfd;
            if (pfds[p].fd < 0) {
                continue;
            }
            short rev = pfds[p].revents;
            bool alive = true;
            if (!is_client && c->connecting) {
                int err = 0;
                socklen_t el = sizeof(err);
                getsockopt(c->sfd, SOL_SOCKET, SO_ERROR, &err, &el);
                if (err != 0) {
                    alive = false;
                } else {
                    c->connecting = false;
                }
            } else if (!partitioned) {
                pipe_dir *in = is_client ? &c->up : &c->down;
                pipe_dir *out = is_client ? &c->down : &c->up;
                if (rev & (POLLIN | POLLHUP | POLLERR)) {
                    alive = dir_read(in, pfds[p].fd);
                    if (rev & POLLERR) {
                        alive = false;
                    }
                }
                if (alive && (rev & POLLOUT)) {
                    alive = dir_write(out, pfds[p].fd);
                }
            }
            if (!alive) {
                conn_close(c, true);
            }
        }
        /* Forward due data and FINs, and retire connections whose both
         * directions have finished. */
        for (int i = 0; i < PROXY_CONNS_MAX; i++) {
            conn *c = &conns[i];
            if (!c->used || partitioned || c->sfd < 0 || c->connecting) {
                continue;
            }
            if (!dir_write(&c->up, c->sfd) || !dir_write(&c->down, c->cfd)) {
                conn_close(c, true);
                continue;
            }
            if (c->up.shut && c->down.shut) {
                conn_close(c, false);
            }
        }
    }
}
