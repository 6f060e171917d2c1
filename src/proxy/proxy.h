/* fence-proxy: an HTTP/1.1 reverse proxy that enforces fencing tokens in
 * front of an upstream that checks none (docs/proxy.md).
 *
 * Model.  Each fence (Fencing-Lock name) has a durable mark, the highest
 * token admitted, kept by libfence-guard in --data-dir.  A request with
 * token T for fence F is
 *   - refused with 409 if T is below F's mark, or below a token already
 *     queued for F (that holder has superseded T);
 *   - otherwise queued on F.  The queue is worked from its head: a token
 *     above the mark first raises the mark durably (a guard admit on a
 *     worker thread; concurrent admits on different fences share fsyncs),
 *     then, once no request with a lower token is still in flight at the
 *     upstream for F (the ordering rule), it is forwarded.  Requests with
 *     the token now in flight are forwarded at once (same token: run
 *     concurrently).  Fences never wait for each other.
 *   - If the head has waited --drain-timeout-ms for older requests to
 *     finish, those are aborted (their upstream connection is closed and
 *     their clients get 504), and the head is refused with 503
 *     (--drain-action fail) or forwarded (--drain-action proceed).
 * A request counts as in flight from the moment it is forwarded until the
 * upstream's whole response has arrived or its connection failed.
 *
 * After a restart the proxy cannot know what the previous process left in
 * flight, so for --restart-hold-ms it forwards no fenced request on a
 * fence that already had a mark (marks are still raised meanwhile).
 *
 * Threads: everything runs on one libuv loop except the guard admits,
 * which run in libuv's thread pool (uv_queue_work) and touch only the
 * guard and their own job. */
#ifndef FENCE_PROXY_PROXY_H
#define FENCE_PROXY_PROXY_H

#include <stdbool.h>
#include <stdint.h>

#include "proxy/limits.h"
#include "proxy/route.h"

/* --drain-action values. */
enum fence_proxy_drain {
    FENCE_PROXY_DRAIN_FAIL = 0,    /* refuse the waiting request (503) */
    FENCE_PROXY_DRAIN_PROCEED = 1, /* forward the waiting request */
};

/* The proxy's configuration (filled by the option table in main.c). */
typedef struct fence_proxy_config {
    char config[1024];          /* --config file, or "" */
    char listen[256];           /* --listen HOST:PORT */
    char upstream[512];         /* --upstream http://HOST:PORT */
    char data_dir[1024];        /* --data-dir: the guard's directory */
    char log_level[16];         /* --log-level word */
    char log_file[1024];        /* --log-file, or "" for stderr */
    char log_format[8];         /* --log-format: "text" or "json" */
    char token_verify_keys[1024]; /* --token-verify-keys verify.keys, or "" */
    char tls_cert[1024];        /* --tls-cert: serve HTTPS with it, or "" */
    char tls_key[1024];         /* --tls-key: its private key */
    char route[FENCE_PROXY_ROUTE_TEXT_MAX]; /* --route text */
    char drain_action_str[16];  /* --drain-action word */
    char read_methods[64];      /* --read-methods: the methods that are reads */
    uint64_t max_connections;   /* --max-connections */
    uint64_t max_inflight;      /* --max-inflight */
    uint64_t max_header_bytes;  /* --max-header-bytes */
    uint64_t max_body_bytes;    /* --max-body-bytes */
    uint64_t max_response_bytes; /* --max-response-bytes */
    uint64_t max_conn_memory;   /* --max-conn-memory: read buffers and request copies, 0: off */
    uint64_t max_fences;        /* --max-fences */
    uint64_t max_bindings;      /* --max-bindings: paths bound to their first fence */
    uint64_t drain_timeout_ms;  /* --drain-timeout-ms */
    uint64_t restart_hold_ms;   /* --restart-hold-ms */
    uint64_t upstream_timeout_ms; /* --upstream-timeout-ms (I/O timeout) */
    uint64_t request_timeout_ms;  /* --request-timeout-ms (client head/body) */
    uint64_t guard_threads;     /* --guard-threads */
    uint64_t metrics_port;      /* --metrics-port (HTTP /metrics on the --listen host), 0: off */
    bool keep_fencing_headers;  /* --keep-fencing-headers: forward them */
    /* Derived by fence__proxy_config_check: */
    int drain_action;           /* enum fence_proxy_drain */
    fence_proxy_routes routes;  /* parsed --route */
    char listen_host[256];      /* host part of --listen */
    uint16_t listen_port;       /* port part of --listen */
    char up_host[256];          /* host of --upstream */
    uint16_t up_port;           /* port of --upstream */
} fence_proxy_config;

/* Validate cfg across fields and fill its derived part.  Returns 0, or -1
 * with the reason in err[0..cap). */
int fence__proxy_config_check(fence_proxy_config *cfg, char *err, size_t cap);

/* Run the proxy until SIGTERM or SIGINT.  Returns the exit status. */
int fence__proxy_run(const fence_proxy_config *cfg);

#endif /* FENCE_PROXY_PROXY_H */
