/* Tiny fake RESP servers for libfence's unit tests (client_fake.c):
 * threads in the test process on 127.0.0.1 ephemeral ports, each answering
 * every request through a handler and logging what it was sent. */
#ifndef FENCE_TEST_CLIENT_FAKE_H
#define FENCE_TEST_CLIENT_FAKE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "fence.h"

#define ARGS_MAX 12
#define ARG_LEN 300
#define LOG_MAX 1024

typedef struct fake fake;
/* Answer one request: return the raw reply bytes, NULL to drop the
 * connection without a reply, or "" to send nothing (hang a while). */
typedef const char *(*fake_handler)(fake *f, int n, int argc, char argv[][ARG_LEN]);

struct fake {
    int lfd;                       /* listening socket */
    int port;                      /* its port */
    fake_handler handler;          /* how to answer */
    pthread_mutex_t mu;            /* guards the log */
    char log[LOG_MAX][128];        /* "CMD arg1 ... REQID x" of each request */
    int nlog;                      /* entries in log */
    atomic_int count[8];           /* per-command counters for handlers */
    char other[64];                /* redirect target "host:port" */
    int hang_ms;                   /* how long "" replies hang */
};

/* Start a fake server on an ephemeral 127.0.0.1 port.  It lives until the
 * test case's process exits. */
fake *fake_start(fake_handler h);

/* "127.0.0.1:<port>" of f. */
const char *addr_of(fake *f, char *buf);

/* Open a client on servers with a short timeout. */
fence_client *client_for(const char *servers, uint32_t timeout_ms);

/* The log entry i of f (copied). */
void log_get(fake *f, int i, char *out);

/* Number of log entries of f starting with prefix. */
int log_count(fake *f, const char *prefix);

/* The REQID value in a logged request ("" if none). */
void reqid_of(const char *entry, char *out);

/* A well-behaved leader: ACQUIRE → [7, 9], UNLOCK → 1, KEEPALIVE → 300. */
const char *h_leader(fake *f, int n, int argc, char argv[][ARG_LEN]);

#endif /* FENCE_TEST_CLIENT_FAKE_H */
