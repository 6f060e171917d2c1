/* The connection layer every RESP daemon shares (fenced, fence-store,
 * fence-proxy), over libuv.
 *
 * A fence_net owns the listeners (TCP and Unix sockets) and the open
 * connections.  Each connection
 *
 *   - reads into one bounded buffer (limits.rbuf_max) and runs
 *     fence_resp_parse over it; every complete request goes to the daemon's
 *     on_request hook, in order;
 *   - keeps one reply slot per request that is answered later, in request
 *     order: the daemon may fill slots in any order and at any time, and
 *     replies still leave in request order (a slot is sent once every slot
 *     ahead of it has been).  A request answered at once needs no slot
 *     (fence__net_reply);
 *   - stops reading while limits.max_pipeline slots are unanswered, and
 *     resumes as they drain (parsing what waits in the next loop turn's
 *     idle phase: requests are parsed in the poll or idle phase only,
 *     never inside a daemon's timer or check callback);
 *   - before login (limits.prelogin), keeps a connection to small requests
 *     and a small share of max_conn_memory (FENCE_PRELOGIN_*, limits.h),
 *     and can hold a connection (fence__net_conn_hold: no reading, parsing
 *     or sending) to delay the answer to a failed login;
 *   - disconnects a slow reader: once more than limits.max_obuf reply bytes
 *     wait for the peer to take them;
 *   - refuses a connection beyond limits.max_clients with "-LIMIT <refuse
 *     message>" and closes it;
 *   - answers a protocol error with an error reply and closes after it is
 *     sent (close-after-flush); QUIT does the same through
 *     fence__net_close_after_flush.
 *
 * Under every connection is a small transport vtable (read_start,
 * read_stop, write, shutdown, queued, close, open, peer_cn, try_write), after Redis's
 * connection.h: the plain stream one (TCP and Unix) in conn_stream.c, and TLS over a
 * TCP stream in src/net/tls.c (fence__tls_listen opens its listener
 * through fence__net_listen_tcp_tr).  A transport moves bytes only: it hands plaintext in
 * through fence__net_conn_rbuf / fence__net_conn_input / fence__net_conn_eof
 * and reports finished writes with fence__net_conn_written.
 *
 * Lifetimes.  A connection lives from accept until its handle's close
 * callback; fence__net_conn_close may be called any number of times.  A
 * daemon with per-connection state embeds fence_net_conn first in its own
 * struct (limits.conn_size), set up in on_open.  When a connection closes,
 * on_close runs first, then each slot still unanswered goes to the
 * on_slot_orphan hook: the daemon either keeps it (return true: the slot's conn becomes
 * NULL, and the later fence__net_slot_reply frees it) or lets the layer
 * free it now (false).  Reply bytes are always copied.
 *
 * Single-threaded: everything runs on the loop given to fence__net_init. */
#ifndef FENCE_COMMON_CONN_H
#define FENCE_COMMON_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "proto/resp.h"

typedef struct fence_net fence_net;
typedef struct fence_net_conn fence_net_conn;
typedef struct fence_net_slot fence_net_slot;
typedef struct fence_net_transport fence_net_transport;

/* Status passed to the proto_error hook when the read buffer is full and
 * holds no complete request (not a fence_resp_parse code). */
#define FENCE_NET_EREQ_TOOBIG (-1000)

/* A transport: how bytes move for one kind of connection.  Each function
 * returns 0 or a negative libuv error code. */
struct fence_net_transport {
    const char *name; /* "tcp", "unix" (logs, INFO) */
    /* Start delivering input via fence__net_conn_rbuf/_input/_eof. */
    int (*read_start)(fence_net_conn *c);
    /* Stop delivering input (pipeline full, closing). */
    int (*read_stop)(fence_net_conn *c);
    /* Send buf[0..len), taking ownership of buf (malloc'd); call
     * fence__net_conn_written(c, n, status) as parts are done, the n adding
     * up to len (the plain streams report what the kernel took at once
     * before write returns).  On a non-zero return nothing was reported,
     * the transport has freed buf and will not call back. */
    int (*write)(fence_net_conn *c, char *buf, size_t len);
    /* Half-close: no more output after what is queued. */
    int (*shutdown)(fence_net_conn *c);
    /* Bytes given to write that the peer has not taken yet (the backlog a
     * slow reader grows; the kernel's socket buffer does not count). */
    size_t (*queued)(fence_net_conn *c);
    /* Close the handle; the layer frees the connection in the callback
     * the transport passes to uv_close (fence__net_conn_closed). */
    void (*close)(fence_net_conn *c);
    /* Set up the transport's state for a just-accepted connection (it may
     * keep it in c->tr_data), or NULL.  Non-zero: the connection is
     * closed at once (close must cope with a failed or skipped open). */
    int (*open)(fence_net_conn *c);
    /* The verified client certificate's common name, or NULL (none, or a
     * transport without certificates).  NULL member: always NULL. */
    const char *(*peer_cn)(const fence_net_conn *c);
    /* Only called while nothing given to write is still queued: write what
     * the kernel takes of buf[0..len) now, without taking buf (the layer
     * keeps its buffer for the next replies): the count taken (0 when it
     * would block) or a negative libuv error.  NULL member: every output
     * goes through write (TLS, whose records are made from a copy). */
    int (*try_write)(fence_net_conn *c, const char *buf, size_t len);
};

/* The plain stream transports (uv_tcp_t, uv_pipe_t). */
extern const fence_net_transport fence__net_tcp;
extern const fence_net_transport fence__net_unix;

/* Where a slot is. */
enum fence_net_slot_state {
    FENCE_NET_SLOT_PENDING = 0, /* waiting for the daemon's reply */
    FENCE_NET_SLOT_READY,       /* reply bytes final, not yet sent */
};

/* One request's place in its connection's reply order.  A daemon that
 * needs more per-request state embeds this as the first member of its own
 * struct and sets limits.slot_size to that struct's size. */
struct fence_net_slot {
    fence_net_slot *next; /* next slot of the connection (request order) */
    fence_net_conn *conn; /* owner; NULL once the connection closed */
    fence_net *net;       /* the layer it came from (its free list) */
    uint8_t state;        /* enum fence_net_slot_state */
    char *out;            /* READY: reply bytes (malloc) */
    size_t len;           /* READY: bytes in out */
};

/* One client connection. */
struct fence_net_conn {
    union {
        uv_handle_t handle; /* for uv_close */
        uv_stream_t stream; /* for reads and writes */
        uv_tcp_t tcp;       /* TCP client */
        uv_pipe_t pipe;     /* Unix socket client */
    } h;                    /* the libuv handle (data = this conn) */
    const fence_net_transport *tr; /* how bytes move */
    void *tr_data;          /* the transport's per-connection state (TLS) */
    fence_net *net;         /* the owning layer */
    void *data;             /* the daemon's, per connection */
    uint64_t id;            /* from 1, for logs */
    fence_net_conn *prev;   /* list of open connections */
    fence_net_conn *next;   /* list of open connections */
    fence_net_conn *dirty_next; /* list of connections with output */
    char *rbuf;             /* unparsed input */
    size_t rlen;            /* bytes in rbuf */
    size_t rcap;            /* capacity of rbuf (<= limits.rbuf_max) */
    char *wbuf;             /* ready replies gathered, not yet written */
    size_t wlen;            /* bytes in wbuf */
    size_t wcap;            /* capacity of wbuf */
    size_t out_pending;     /* bytes given to the transport, not written */
    fence_net_slot *head;   /* oldest unsent slot */
    fence_net_slot *tail;   /* newest slot */
    uint32_t n_slots;       /* slots in the queue (pipeline depth) */
    bool reading;           /* the transport is delivering input */
    bool in_input;          /* inside the parse loop (no re-entry) */
    bool dirty;             /* on the dirty list */
    bool closing;           /* close was called */
    bool close_after_flush; /* close once every reply is sent */
    /* Hostile-client guards (conn_guard.c): */
    bool trusted;           /* logged in (the daemon sets it): never evicted
                             * for room, no login timeout */
    uint64_t opened_ms;     /* uv_now at accept */
    uint64_t active_ms;     /* uv_now of the last complete request */
    uint64_t partial_ms;    /* uv_now when an incomplete request began, 0:
                             * none pending */
    size_t mem;             /* bytes counted against limits.max_conn_memory
                             * (rcap + wcap + out_pending) */
    bool mem_refused;       /* the budget refused its read buffer room */
    uint32_t auth_failures; /* failed logins on it (acl_srv.c) */
    bool held;              /* on the hold list: no reading, parsing or
                             * sending until hold_until_ms */
    uint64_t hold_until_ms; /* uv_now at which a hold ends */
    fence_net_conn *hold_prev; /* list of held connections */
    fence_net_conn *hold_next; /* list of held connections */
    bool resume;            /* on the resume list (parse in the idle phase) */
    fence_net_conn *resume_prev; /* list of connections to resume */
    fence_net_conn *resume_next; /* list of connections to resume */
};

/* The bounds, from the daemon's configuration. */
typedef struct fence_net_limits {
    uint64_t max_clients;    /* open connections; one more gets -LIMIT */
    size_t rbuf_max;         /* read buffer bound per connection */
    uint32_t max_pipeline;   /* unanswered slots before reading pauses */
    uint64_t max_obuf;       /* unsent reply bytes before a disconnect */
    size_t slot_size;        /* bytes per slot, >= sizeof(fence_net_slot) */
    size_t conn_size;        /* bytes per connection, >= sizeof(fence_net_conn)
                              * (a daemon's struct embedding it first) */
    bool eof_flush;          /* on EOF: send what is owed, then close (a
                              * half-closed client gets its replies);
                              * false: close at once */
    fence_resp_limits resp;  /* parser limits */
    /* Hostile-client guards (conn_guard.c; 0 turns each off): */
    uint64_t max_conn_memory;   /* read buffers + unsent output of every
                                 * connection together, bytes */
    uint64_t idle_timeout_ms;   /* close a connection with nothing owed and
                                 * no request for this long */
    uint64_t request_timeout_ms; /* close a connection whose incomplete
                                 * request has not completed in this long
                                 * (slowloris) */
    uint64_t auth_timeout_ms;   /* close a connection not trusted (logged
                                 * in) this long after accept */
    bool evict_untrusted;       /* the table full: close the oldest
                                 * untrusted connection rather than refuse a
                                 * new one (room for users who log in) */
    bool prelogin;              /* untrusted connections get the pre-login
                                 * limits (FENCE_PRELOGIN_*, limits.h):
                                 * small requests, a small read buffer and
                                 * backlog, 1/FENCE_PRELOGIN_MEMORY_DIV of
                                 * max_conn_memory together */
} fence_net_limits;

/* What the daemon does with requests and events. */
typedef struct fence_net_hooks {
    void *ctx; /* passed to every hook */
    /* One parsed request with argc >= 1 (msg valid during the call only).
     * Answer with fence__net_reply now, or with a slot later. */
    void (*on_request)(void *ctx, fence_net_conn *c, const fence_resp_msg *msg);
    /* A protocol error (status: the negative fence_resp_parse code, or
     * FENCE_NET_EREQ_TOOBIG; detail: the parser's message or NULL).  Fill
     * code (e.g. "ERR") and msg[0..cap) for the error reply.  NULL hook:
     * "ERR <detail>".  The connection closes after the reply. */
    void (*proto_error)(void *ctx, fence_net_conn *c, int status,
                        const char *detail, const char **code, char *msg,
                        size_t cap);
    /* The connection closed with this slot unanswered: return true to keep
     * it (it is orphaned: conn NULL; fence__net_slot_reply frees it later)
     * or false to have it freed now.  NULL hook: always freed. */
    bool (*on_slot_orphan)(void *ctx, fence_net_slot *slot);
    /* A connection was accepted (also one about to be refused), before
     * any request: set up the daemon's part of it.  Or NULL. */
    void (*on_open)(void *ctx, fence_net_conn *c);
    /* A connection is closing, before its unanswered slots go to
     * on_slot_orphan (c->closing is already true), or NULL. */
    void (*on_close)(void *ctx, fence_net_conn *c);
    /* The -LIMIT message for a refused connection ("max clients ..."). */
    const char *refuse_msg;
} fence_net_hooks;

/* The layer: listeners, connections, counters. */
struct fence_net {
    uv_loop_t *loop;            /* the loop */
    fence_net_limits lim;       /* bounds */
    fence_net_hooks hooks;      /* the daemon */
    fence_resp_msg *msg;        /* parse scratch (one; large) */
    uv_tcp_t tcp;               /* TCP listener */
    bool tcp_open;              /* tcp initialized */
    uv_pipe_t pipe;             /* Unix-socket listener */
    bool pipe_open;             /* pipe initialized */
    char pipe_path[108];        /* its path (unlinked on close) */
    uv_tcp_t tr_tcp;            /* TCP listener of another transport (TLS) */
    bool tr_tcp_open;           /* tr_tcp initialized */
    uv_connection_cb on_connection; /* conn.c's accept callback, handed to
                                 * conn_listen.c at init (no call up) */
    const fence_net_transport *tr_tcp_tr; /* its connections' transport */
    const fence_net_transport *tcp_tr;  /* the plain listener's connections'
                                         * transport (set by its listen) */
    const fence_net_transport *pipe_tr; /* the Unix socket's (likewise) */
    void *tr_ctx;               /* that transport's context (tls.h) */
    void (*tr_ctx_stop)(void *ctx); /* releases tr_ctx at fence__net_stop */
    uv_check_t check;           /* end of each loop turn: flush */
    bool stopping;              /* fence__net_stop called: refuse accepts */
    fence_net_conn *conns;      /* open connections */
    fence_net_conn *dirty;      /* connections with output to flush, in the
                                   order their first reply became ready (a
                                   grant goes out before the UNLOCK reply
                                   that caused it) */
    fence_net_conn *dirty_tail; /* newest of them */
    uint64_t n_conns;           /* entries in conns */
    uint64_t next_id;           /* last connection id handed out */
    uint64_t stat_accepted;     /* connections accepted since start */
    uint64_t stat_refused;      /* refused for max_clients */
    uint64_t stat_slow_closed;  /* slow readers disconnected */
    uint64_t stat_requests;     /* requests parsed */
    /* Hostile-client guards (conn_guard.c): */
    const struct fence_net_guard_acts *guard_acts; /* what the guard's timers do */
    uv_timer_t guard_timer;     /* sweeps the timeouts once a second */
    bool guard_timer_open;      /* guard_timer initialized */
    uint64_t mem_used;          /* sum of every connection's mem */
    uint64_t stat_timed_out;    /* closed by a timeout */
    uint64_t stat_evicted;      /* untrusted, closed to make room */
    uint64_t stat_mem_refused;  /* closed or refused for max_conn_memory */
    /* Before login (conn_guard.c): */
    fence_resp_limits resp_prelogin; /* parser limits of untrusted
                                 * connections (lim.prelogin) */
    uint64_t mem_prelogin;      /* the part of mem_used untrusted
                                 * connections hold */
    uint64_t stat_prelogin_refused; /* closed for a pre-login limit */
    uint64_t freed_since_trim;  /* buffer bytes freed since malloc_trim */
    uv_timer_t hold_timer;      /* ends holds (delayed answers) */
    bool hold_timer_open;       /* hold_timer initialized */
    fence_net_conn *held;       /* held connections (hold_next list) */
    /* Parsing resumed outside the poll phase (conn.c): */
    uv_idle_t resume_idle;      /* runs the resume list, then stops */
    fence_net_conn *resumes;    /* connections whose buffered input waits */
    fence_net_slot *free_slots; /* freed slots kept for the next requests
                                   (linked by next; up to FENCE_NET_FREE_SLOTS) */
    uint32_t n_free_slots;      /* how many */
};

/* ---- Hostile-client guards (conn_guard.c) ---------------------------------- */

/* Fill lim's guard fields from a daemon's options: the login timeout and
 * the eviction of untrusted connections apply only with users (has_acl). */
void fence__net_guard_limits(fence_net_limits *lim, uint64_t max_conn_memory,
                             uint64_t idle_timeout_ms, uint64_t request_timeout_ms,
                             uint64_t auth_timeout_ms, bool has_acl);

/* What the guard's two timers (the timeout sweep, the end of holds) have
 * the layer do.  The guard calls conn.c only through this table: conn.c
 * calls the guard at its few points (below), never the other way round by
 * name. */
typedef struct fence_net_guard_acts {
    /* Close c now (fence__net_conn_close). */
    void (*close)(fence_net_conn *c);
    /* c timed out: answer "ERR why", close after the flush, flush. */
    void (*time_out)(fence_net_conn *c, const char *why);
    /* c's hold ended (fence__net_conn_release). */
    void (*release)(fence_net_conn *c);
} fence_net_guard_acts;

/* Keep acts (static; they act for both timers) and start the timeout
 * sweep (fence__net_init calls it). */
void fence__net_guard_start(fence_net *net, const fence_net_guard_acts *acts);
/* Stop it (fence__net_stop calls it). */
void fence__net_guard_stop(fence_net *net);
/* Recount c->mem after its buffers changed. */
void fence__net_guard_account(fence_net_conn *c);
/* Whether c may grow its buffers by more bytes within max_conn_memory. */
bool fence__net_guard_mem_ok(const fence_net_conn *c, size_t more);
/* After output was handed to the transport: true when c must be closed
 * (over the budget with a large unsent backlog, or over the pre-login
 * output bound; logged and counted here, closed by the caller). */
bool fence__net_guard_after_write(fence_net_conn *c);
/* The table is full at accept of c: the oldest untrusted connection (not
 * c) to close to make room (counted and logged here), or NULL. */
fence_net_conn *fence__net_guard_evictee(fence_net *net, fence_net_conn *c);
/* After input was processed: note a pending incomplete request. */
void fence__net_guard_after_input(fence_net_conn *c, bool progressed);
/* The daemon trusts c from now on (it logged in). */
void fence__net_conn_trust(fence_net_conn *c, bool trusted);

/* ---- Before login (conn_guard.c) --------------------------------------------- */

/* The parser limits and read-buffer bound for c's next request: the
 * pre-login ones while c is untrusted (limits.prelogin) and presents no
 * verified client certificate, else the daemon's. */
const fence_resp_limits *fence__net_conn_resp_limits(const fence_net_conn *c);
size_t fence__net_conn_rbuf_max(const fence_net_conn *c);
/* Whether c is under the pre-login limits now. */
bool fence__net_conn_prelogin(const fence_net_conn *c);
/* The strangers' share of max_conn_memory is full as c (not logged in)
 * wants more: the oldest other connection not logged in that holds memory,
 * to close (counted and logged here), or NULL. */
fence_net_conn *fence__net_guard_evictee_mem(fence_net_conn *c);

/* Hold c for delay_ms from now (a delayed answer to a failed login): c
 * reads, parses and sends nothing until then (what it is owed, the
 * answer included, leaves when the hold ends); a later end extends it.
 * The loop is not blocked: one timer ends every hold. */
void fence__net_conn_hold(fence_net_conn *c, uint64_t delay_ms);
/* Take c off the hold list (closing, or its hold ended). */
void fence__net_guard_unhold(fence_net_conn *c);
/* A hold ended: parse what waited, send what is owed (conn.c; the guard's
 * hold timer reaches it through fence_net_guard_acts.release). */
void fence__net_conn_release(fence_net_conn *c);

/* c's peer address, "ip:port" (or "unix" for a Unix socket, "?" when
 * unknown), into buf; *ip (may be NULL) gets the IP alone. */
void fence__net_conn_peer(const fence_net_conn *c, char *buf, size_t cap, char *ip,
                          size_t ip_cap);

/* Set up the layer on loop (no listener yet).  lim and hooks are copied.
 * Returns 0 or UV_ENOMEM. */
int fence__net_init(fence_net *net, uv_loop_t *loop,
                    const fence_net_limits *lim, const fence_net_hooks *hooks);

/* Listen on TCP bind:port (bind an IPv4 or IPv6 literal).  Returns 0, or
 * -1 with "listen on ADDR:PORT: reason" (or "bind ADDR: not an IP
 * address") in err. */
int fence__net_listen_tcp(fence_net *net, const char *bind, unsigned port,
                          char *err, size_t cap);

/* Listen on TCP bind:port like fence__net_listen_tcp, for connections of
 * transport tr (TLS) whose context ctx is kept in net->tr_ctx; one such
 * listener per layer.  The layer owns ctx from this call on, even when it
 * fails: fence__net_stop calls ctx_stop(ctx) once every connection is
 * closed.  Returns 0 or -1 with err. */
int fence__net_listen_tcp_tr(fence_net *net, const char *bind, unsigned port,
                             const fence_net_transport *tr, void *ctx,
                             void (*ctx_stop)(void *ctx), char *err,
                             size_t cap);

/* Listen on a Unix socket at path (a stale socket file is removed first;
 * the file is removed again on stop).  Returns 0 or -1 with err. */
int fence__net_listen_unix(fence_net *net, const char *path, char *err,
                           size_t cap);

/* The listeners of fence__net_listen_tcp and fence__net_listen_unix
 * (conn_listen.c) for the plain transport tr those two pass (conn_stream.c):
 * the listeners name their transports, so conn.c never calls up into one. */
int fence__net_listen_tcp_with(fence_net *net, const char *bind, unsigned port,
                               const fence_net_transport *tr, char *err, size_t cap);
int fence__net_listen_unix_with(fence_net *net, const char *path,
                                const fence_net_transport *tr, char *err, size_t cap);

/* Close the listeners (no more accepts; a Unix socket file is removed). */
void fence__net_close_listeners(fence_net *net);

/* The listeners' accept callback (conn.c; layer-internal, handed to
 * conn_listen.c as net->on_connection): accept one client on server,
 * refusing it politely beyond max_clients. */
void fence__net_on_connection(uv_stream_t *server, int status);

/* Close the listeners and every connection (shutdown); connections close
 * through the normal path (their slots go to on_slot_orphan). */
void fence__net_stop(fence_net *net);

/* Free what init allocated, after the loop has run the close callbacks. */
void fence__net_free(fence_net *net);

/* ---- replies ------------------------------------------------------------ */

/* Answer the current request at once with bytes[0..len) (copied): sent
 * after every earlier reply of c.  On out of memory the connection is
 * closed (the caller need not check). */
void fence__net_reply(fence_net_conn *c, const char *bytes, size_t len);

/* Room for a reply of exactly need bytes to the current request, in
 * order after every earlier reply of c, for the caller to encode into at
 * once (no copy: large values).  NULL if memory ran out (the connection is
 * then closed) or c is closing. */
char *fence__net_reply_buf(fence_net_conn *c, size_t need);

/* fence__net_reply of "-CODE msg\r\n". */
void fence__net_reply_error(fence_net_conn *c, const char *code,
                            const char *msg);

/* A slot for a request answered later, at the end of c's queue; NULL if
 * memory ran out (the caller answers with fence__net_reply_error).  The
 * slot is zeroed beyond the fence_net_slot header. */
fence_net_slot *fence__net_slot_new(fence_net_conn *c);

/* Make the slot's reply final (bytes copied).  The slot belongs to the
 * layer from here on and may be freed before this returns: an orphaned
 * one, and the oldest of its connection, whose bytes go straight into the
 * connection's output buffer.  On out of memory the connection is
 * closed. */
void fence__net_slot_reply(fence_net_slot *slot, const char *bytes,
                           size_t len);

/* fence__net_slot_reply of "-CODE msg\r\n". */
void fence__net_slot_error(fence_net_slot *slot, const char *code,
                           const char *msg);

/* Free a slot that is in no queue (orphaned, or handed back). */
void fence__net_slot_free(fence_net_slot *slot);

/* Send whatever is ready on every connection with new output (the layer
 * also does it at the end of each loop turn and after each read). */
void fence__net_flush(fence_net *net);

/* ---- connections --------------------------------------------------------- */

/* Stop parsing c's input, send every reply it is owed, then close it. */
void fence__net_close_after_flush(fence_net_conn *c);

/* Close c now (unsent replies are dropped).  Idempotent. */
void fence__net_conn_close(fence_net_conn *c);

/* The common name (CN) of the client certificate c presented and the TLS
 * layer verified against --tls-ca, or NULL: a plain TCP or Unix
 * connection, a TLS client without a certificate (tls-auth-clients
 * optional or no), or a handshake not yet finished (no request is parsed
 * before it is).  The string stays valid until c's close callback; it holds
 * no NUL and no control characters (a certificate whose CN does is
 * refused at the handshake). */
const char *fence__net_conn_peer_cn(const fence_net_conn *c);

/* ---- for transports ---------------------------------------------------- */

/* The free tail of c's read buffer (grown toward rbuf_max when little is
 * left); *room 0 means the buffer is full. */
void fence__net_conn_rbuf(fence_net_conn *c, char **p, size_t *room);

/* n bytes were placed at the tail of the read buffer: parse them. */
void fence__net_conn_input(fence_net_conn *c, size_t n);

/* The peer will send no more (status UV_EOF) or reading failed. */
void fence__net_conn_eof(fence_net_conn *c, int status);

/* A write of len bytes finished with status (0 or a libuv error). */
void fence__net_conn_written(fence_net_conn *c, size_t len, int status);

/* The handle is closed: free the connection (uv_close callback). */
void fence__net_conn_closed(uv_handle_t *h);

#endif /* FENCE_COMMON_CONN_H */
