/* fence-store's network side (see server.h), on the shared connection
 * layer (src/net/conn.h).
 *
 * One thread, one libuv loop.  Each connection has a bounded read buffer
 * (--max-value plus FENCE_STORE_RBUF_SLACK) that the RESP parser works on;
 * complete requests are executed in order.
 *
 * Group commit.  Every write (and every read, so that it sees the writes
 * before it) that arrives in one loop turn joins one batch: the writes
 * run at once, in arrival order, in one LMDB write transaction
 * (fence__store_db_batch_begin), each seeing the ones before it, and their
 * replies wait in the connection layer's reply slots.  At the end of the
 * turn (a uv_check handle, after the poll phase has read every ready
 * connection) the transaction commits with one fsync, and only then are
 * the slots filled and sent: a reply is never sent for a write that is not
 * durable, nor for a read that saw one.  If the batch cannot commit (a put
 * or the commit finds the map or the disk full), nothing of it was
 * written, and every request of the batch runs again in order, one
 * transaction and one sync each, so each gets the outcome a serial
 * execution gives.  The requests are copied into the batch for that.  A
 * batch holds at most FENCE_STORE_BATCH_MAX requests and about
 * FENCE_STORE_BATCH_BYTES bytes; a fuller one commits early.  PING, QUIT
 * and COMMAND are answered at once (after any earlier reply of their
 * connection, as the layer orders replies).  See docs/fence-store.md.
 *
 * Hygiene (the layer's): a protocol error gets an error reply and the
 * connection is closed; a client whose queued replies exceed --max-obuf is
 * disconnected (slow reader); connections beyond --max-clients get
 * "-LIMIT" and are closed.
 *
 * Signals: SIGINT and SIGTERM stop the server; SIGHUP (the daemon
 * skeleton's, daemon/daemon.h, like the listeners, the compat context and
 * the ACL) reopens the --log-file (logrotate) and reads --acl-file and,
 * through reload_keys, --token-verify-keys again (a bad file keeps what
 * was in force). */
#include "store/server.h"

#include <inttypes.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "base/assert.h"
#include "daemon/acl_conns.h"
#include "daemon/acl_srv.h"
#include "daemon/compat.h"
#include "daemon/compat_net.h"
#include "net/conn.h"
#include "daemon/daemon.h"
#include "base/limits.h"
#include "base/log.h"
#include "net/tls.h"
#include "proto/resp.h"
#include "store/cmd.h"
#include "store/metrics.h"
#include "store/commands_table.h"

/* The server. */
typedef struct server {
    const fence_store_config *cfg; /* configuration */
    fence_store_db *db;            /* the store */
    uv_loop_t *loop;               /* the loop */
    fence_net net;                 /* listeners and connections */
    uv_signal_t sigint;            /* SIGINT: stop */
    uv_signal_t sigterm;           /* SIGTERM: stop */
    char refuse[128];              /* -LIMIT text for a refused client */
    uv_check_t check;              /* end of a loop turn: commit the batch */
    uv_idle_t idle;                /* keeps poll from blocking while a batch
                                    * is open */
    uv_timer_t flush;              /* every FENCE_STORE_FLUSH_MS: LMDB
                                    * commits the logged batches */
    bool open;                     /* a batch is open */
    struct batch_item **items;     /* the batch's requests, in order */
    size_t n_items;                /* requests in items */
    size_t bytes;                  /* bytes copied into the batch */
    uint64_t stat_batches;         /* batches committed */
    uint64_t stat_batched;         /* requests answered through a batch */
    uint64_t stat_replays;         /* batches replayed one by one */
    uv_work_t ckpt;                /* the checkpoint on a worker thread */
    bool ckpt_running;             /* ckpt is queued or running */
    uint64_t ckpt_lsn;             /* the LSN it makes durable */
    int ckpt_rc;                   /* its sync's result */
    uint64_t ckpt_t0;              /* when it was queued (uv_hrtime) */
    fence_res_metrics metrics;     /* metric families, /metrics (metrics.c) */
    fence_compat_ctx compat;       /* Redis-client commands (compat.h) */
    fence_signtok_verifier *verifier; /* --token-verify-keys, or NULL */
    fence_acl_srv acl;             /* users and permissions (acl_srv.h) */
    fence_acl_conns acl_conns;     /* connections per user, maxconns (acl_conns.h) */
    uint64_t start_ns;             /* uv_hrtime() at start (INFO uptime) */
    fence_daemon daemon;           /* the RESP daemon skeleton (daemon.h):
                                    * compat, ACL, listeners */
    fence_daemon_signals signals;  /* its SIGHUP */
} server;

/* One client connection: the layer's and its Redis-client state. */
typedef struct store_conn {
    fence_net_conn base;      /* the layer's connection (first) */
    fence_compat_conn compat; /* CLIENT SETNAME, MULTI refusal, ... */
    uint64_t quota_mark;      /* admitted under maxconns (daemon/acl_conns.h) */
} store_conn;

/* A connection was accepted: fresh compat state. */
static void on_open(void *ctx, fence_net_conn *c)
{
    server *s = ctx;
    fence__daemon_conn_open(&s->daemon, c); /* compat state, default login */
    /* The layer counts c right after this hook. */
    fence__store_metrics_connections(&s->metrics, s->net.n_conns + 1);
}

/* A connection is closing (the layer counts it until it returns): it
 * leaves its user's maxconns count and the connections gauge. */
static void on_close(void *ctx, fence_net_conn *c)
{
    server *s = ctx;
    fence__daemon_conn_closed(&s->daemon, c); /* maxconns */
    FENCE_ASSERT(s->net.n_conns > 0);
    fence__store_metrics_connections(&s->metrics, s->net.n_conns - 1);
}

/* Where a reply goes: straight to a connection (c != NULL), or into a
 * heap buffer kept until the batch is durable. */
typedef struct sink {
    fence_net_conn *c; /* the connection, or NULL for the buffer */
    char *buf;         /* c == NULL: the reply bytes (malloc) */
    size_t len;        /* bytes in buf */
    bool nomem;        /* c == NULL: a realloc failed */
    uint8_t resp;      /* the connection's protocol when the request
                          arrived (3 after HELLO 3: nil is "_") */
} sink;

/* A request of the open batch. */
typedef struct batch_item {
    fence_net_slot *slot;  /* its place in its connection's reply order */
    fence_store_cmd cmd;   /* the request; pointers into bytes */
    sink reply;            /* its reply, sent once the batch is durable */
    char bytes[];          /* copies of the fence, key and value */
} batch_item;

/* Room for need reply bytes in k, or NULL (out of memory). */
static char *sink_buf(sink *k, size_t need)
{
    if (k->c != NULL)
        return fence__net_reply_buf(k->c, need);
    char *p = realloc(k->buf, k->len + need + 1);
    if (p == NULL) {
        k->nomem = true;
        return NULL;
    }
    k->buf = p;
    k->len += need;
    return p + k->len - need;
}

/* Append "-CODE msg" to k (a long message is cut). */
static void sink_error(sink *k, const char *code, const char *msg)
{
    if (k->c != NULL) {
        fence__net_reply_error(k->c, code, msg);
        return;
    }
    char buf[640];
    size_t n = fence_resp_error(buf, sizeof(buf), code, msg);
    if (n > sizeof(buf)) {
        n = fence_resp_error(buf, sizeof(buf), code, "(message too long)");
        FENCE_ASSERT(n <= sizeof(buf));
    }
    char *p = sink_buf(k, n);
    if (p != NULL)
        memcpy(p, buf, n);
}

/* Append an encoded reply (snprintf-style encoder), encoded in place. */
#define REPLY(c, enc, ...)                                                     \
    do {                                                                       \
        size_t need_ = enc(NULL, 0, __VA_ARGS__);                              \
        char *p_ = sink_buf((c), need_);                           \
        if (p_ != NULL) {                                                      \
            size_t got_ = enc(p_, need_, __VA_ARGS__);                         \
            FENCE_ASSERT(got_ == need_);                                       \
        }                                                                      \
    } while (0)

/* Append "+s". */
static void reply_simple(sink *c, const char *s)
{
    REPLY(c, fence_resp_simple, s);
}

/* Append ":v". */
static void reply_int(sink *c, int64_t v)
{
    REPLY(c, fence_resp_int, v);
}

/* Append a bulk string, or nil if p is NULL. */
static void reply_bulk(sink *c, const char *p, size_t n)
{
    if (p != NULL) {
        REPLY(c, fence_resp_bulk, p, n);
        return;
    }
    int resp = c->resp == 3 ? 3 : 2;
    size_t need = fence_resp_nil_v(NULL, 0, resp);
    char *out = sink_buf(c, need);
    if (out != NULL)
        fence_resp_nil_v(out, need, resp);
}

/* Append the reply for a FGET value (called inside the read txn). */
static void on_value(void *ctx, const char *p, size_t n)
{
    reply_bulk(ctx, p, n);
}

/* Build the INFO text: the sections every Redis client may read (# Server
 * with redis_version and fence_store_version, # Clients, # Persistence:
 * fence_compat_info_standard), then # fence-store.  Every section, whatever
 * INFO's arguments (the request may wait in a batch, without its words). */
static void reply_info(server *s, sink *c)
{
    fence_store_db_stats st;
    fence__store_db_stats_get(s->db, &st);
    char text[1024];
    int n = snprintf(text, sizeof(text),
                     "keys:%" PRIu64 "\r\n"
                     "fences:%" PRIu64 "\r\n"
                     "admitted:%" PRIu64 "\r\n"
                     "rejected_stale:%" PRIu64 "\r\n"
                     "rejected_wrongfence:%" PRIu64 "\r\n"
                     "ignore_tokens:%d\r\n"
                     "connected_clients:%" PRIu64 "\r\n"
                     "max_clients:%" PRIu64 "\r\n"
                     "rejected_connections:%" PRIu64 "\r\n"
                     "slow_readers_closed:%" PRIu64 "\r\n"
                     "max_value:%" PRIu64 "\r\n"
                     "map_size:%" PRIu64 "\r\n"
                     "map_used:%" PRIu64 "\r\n"
                     "tcp_port:%" PRIu64 "\r\n"
                     "batches:%" PRIu64 "\r\n"
                     "batched_requests:%" PRIu64 "\r\n"
                     "batch_replays:%" PRIu64 "\r\n"
                     "wal_file_size:%" PRIu64 "\r\n"
                     "wal_bytes:%" PRIu64 "\r\n"
                     "wal_syncs:%" PRIu64 "\r\n"
                     "wal_lsn:%" PRIu64 "\r\n"
                     "wal_durable_lsn:%" PRIu64 "\r\n"
                     "wal_checkpoints:%" PRIu64 "\r\n"
                     "wal_stalls:%" PRIu64 "\r\n"
                     "wal_recovery_replayed:%" PRIu64 "\r\n"
                     "lmdb_lsn:%" PRIu64 "\r\n"
                     "lmdb_flushes:%" PRIu64 "\r\n"
                     "lmdb_pending_ops:%" PRIu64 "\r\n",
                     st.keys, st.fences, st.admitted, st.rejected_stale,
                     st.rejected_wrongfence, s->cfg->ignore_tokens ? 1 : 0,
                     s->net.n_conns, s->cfg->daemon.max_clients, s->net.stat_refused,
                     s->net.stat_slow_closed, s->cfg->max_value, st.map_size,
                     st.map_used, s->cfg->daemon.port, s->stat_batches,
                     s->stat_batched, s->stat_replays, st.wal_file_size,
                     st.wal_bytes, st.wal_syncs, st.wal_lsn,
                     st.wal_durable_lsn, st.wal_checkpoints, st.wal_stalls,
                     st.wal_replayed, st.lmdb_lsn, st.lmdb_flushes,
                     st.lmdb_pending_ops);
    FENCE_ASSERT(n > 0);
    FENCE_ASSERT((size_t)n < sizeof(text));
    fence_compat_info b;
    fence_compat_info_begin(&b, NULL);
    fence_compat_info_std std = {
        .process_id = (uint64_t)getpid(),
        .tcp_port = s->cfg->daemon.port,
        .uptime_s = (uv_hrtime() - s->start_ns) / 1000000000u,
        .connected_clients = s->net.n_conns,
        .max_clients = s->cfg->daemon.max_clients,
        .loading = false,
    };
    fence_compat_info_standard(&b, &s->compat, &std);
    fence_compat_info_section(&b, "fence-store");
    fence_compat_info_lines(&b, text, (size_t)n);
    fence_compat_reply out;
    fence_compat_reply_init(&out);
    if (fence_compat_info_finish(&b, &out) != 0) {
        sink_error(c, "ERR", "out of memory building INFO");
    } else {
        char *p = sink_buf(c, out.len);
        if (p != NULL)
            memcpy(p, out.ptr, out.len);
    }
    fence_compat_reply_free(&out);
}

/* The reply to a write that was refused or failed (r != FENCE_STORE_OK). */
static void reply_write_refused(server *s, sink *c,
                                const fence_store_cmd *cmd,
                                fence_store_result r,
                                const fence_store_write_out *out)
{
    char msg[400];
    char key[64], fence[64];
    switch (r) {
    case FENCE_STORE_STALE:
        snprintf(msg, sizeof(msg),
                 "%" PRIu64 " %" PRIu64 " token %" PRIu64
                 " is older than the highest token admitted for this "
                 "fence (%" PRIu64 "); nothing was written",
                 cmd->token, out->high, cmd->token, out->high);
        sink_error(c, "STALE", msg);
        break;
    case FENCE_STORE_WRONGFENCE:
        fence__store_printable(key, sizeof(key), cmd->key, cmd->key_len);
        fence__store_printable(fence, sizeof(fence), out->owner,
                               out->owner_len);
        snprintf(msg, sizeof(msg),
                 "key '%s' belongs to fence '%s'; a key is written only "
                 "through the fence that first wrote it; nothing was written",
                 key, fence);
        sink_error(c, "WRONGFENCE", msg);
        break;
    case FENCE_STORE_FULL:
        snprintf(msg, sizeof(msg),
                 "the store is full (LMDB map of %" PRIu64
                 " bytes); nothing was written; restart with a larger "
                 "--map-size", s->cfg->map_size);
        sink_error(c, "FULL", msg);
        break;
    case FENCE_STORE_NOSPACE:
        sink_error(c, "FULL",
                               "no space left on the device holding the "
                               "store; nothing was written");
        break;
    case FENCE_STORE_NOTINT:
        sink_error(c, "ERR", "value is not an integer; nothing "
                                         "was written");
        break;
    case FENCE_STORE_OVERFLOW:
        sink_error(c, "ERR", "increment would overflow; nothing "
                                         "was written");
        break;
    case FENCE_STORE_OK:
    case FENCE_STORE_REPLAY:
        FENCE_ASSERT(!"not a refusal");
        break;
    }
}

/* FGET names a key, not a fence: with an ACL file, the user needs a
 * pattern matching the fence the key is bound to (a key never written
 * holds nothing to read). */
static bool fget_allowed(server *s, fence_net_conn *c, const fence_store_cmd *cmd)
{
    if (!fence__acl_srv_has_file(&s->acl))
        return true;
    const fence_acl_user *u = fence__acl_srv_user(&s->acl, &((store_conn *)c)->compat);
    if (u == NULL)
        return false;
    char fence[FENCE_NAME_MAX];
    size_t n = fence__store_db_key_fence(s->db, cmd->key, cmd->key_len, fence);
    return n == 0 || fence_acl_key_allowed(u, fence, n);
}

/* Execute one checked command and append its reply. */
static void execute(server *s, sink *c, const fence_store_cmd *cmd)
{
    switch (cmd->op) {
    case FENCE_STORE_OP_FSET:
    case FENCE_STORE_OP_FDEL:
    case FENCE_STORE_OP_FINCR:
    case FENCE_STORE_OP_FENCE_ADMIT: {
        fence_store_write_out out;
        uint64_t t0 = uv_hrtime();
        fence_store_result r = fence__store_db_write(s->db, cmd, &out);
        if (r == FENCE_STORE_REPLAY)
            break; /* the batch broke: answered (and counted) by its replay */
        /* In a batch the time excludes the batch's commit (one fsync for
         * every write of the loop turn). */
        fence__store_metrics_write(&s->metrics, cmd, r, &out,
                                   (double)(uv_hrtime() - t0) * 1e-9);
        if (r != FENCE_STORE_OK)
            reply_write_refused(s, c, cmd, r, &out);
        else if (cmd->op == FENCE_STORE_OP_FDEL ||
                 cmd->op == FENCE_STORE_OP_FINCR)
            reply_int(c, out.number);
        else
            reply_simple(c, "OK");
        break;
    }
    case FENCE_STORE_OP_FGET:
        /* The ACL check ran at arrival (on_request): here the request may
         * be buffered in a batch, with no connection at hand. */
        fence__store_db_get(s->db, cmd->key, cmd->key_len, on_value, c);
        break;
    case FENCE_STORE_OP_FENCE_HIGH: {
        uint64_t h = fence__store_db_high(s->db, cmd->fence, cmd->fence_len);
        FENCE_ASSERT(h <= FENCE_STORE_TOKEN_MAX);
        reply_int(c, (int64_t)h);
        break;
    }
    case FENCE_STORE_OP_PING:
        if (cmd->value)
            reply_bulk(c, cmd->value, cmd->value_len);
        else
            reply_simple(c, "PONG");
        break;
    case FENCE_STORE_OP_INFO:
        reply_info(s, c);
        break;
    case FENCE_STORE_OP_QUIT:
        reply_simple(c, "OK");
        FENCE_ASSERT(c->c != NULL);
        fence__net_close_after_flush(c->c);
        break;
    }
}

/* Idle callback: nothing to do (the handle only keeps poll from blocking
 * while a batch is open). */
static void on_idle(uv_idle_t *h)
{
    (void)h;
}

/* Worker thread: the checkpoint's LMDB sync (nothing else is touched). */
static void ckpt_work(uv_work_t *w)
{
    server *s = w->data;
    s->ckpt_rc = fence__store_db_ckpt_sync(s->db);
}

static void ckpt_start(server *s);

/* Loop thread: the checkpoint finished; the log may reuse its file. */
static void ckpt_after(uv_work_t *w, int status)
{
    server *s = w->data;
    FENCE_ASSERT(status == 0);
    s->ckpt_running = false;
    fence__store_db_ckpt_done(s->db, s->ckpt_rc);
    fence__store_metrics_checkpoint(&s->metrics,
                                    (double)(uv_hrtime() - s->ckpt_t0) * 1e-9);
    ckpt_start(s);
}

/* Start the due checkpoint, if any, unless one runs (see db.h). */
static void ckpt_start(server *s)
{
    uint64_t lsn;
    if (s->ckpt_running || s->open || !fence__store_db_ckpt_begin(s->db, &lsn))
        return;
    s->ckpt.data = s;
    s->ckpt_lsn = lsn;
    s->ckpt_t0 = uv_hrtime();
    int rc = uv_queue_work(s->loop, &s->ckpt, ckpt_work, ckpt_after);
    FENCE_ASSERT(rc == 0);
    s->ckpt_running = true;
}

/* Commit the open batch (one fsync), then answer its requests in order;
 * if it cannot commit, run each of its requests again alone first. */
static void batch_flush(server *s)
{
    if (!s->open)
        return;
    s->open = false;
    uv_idle_stop(&s->idle);
    uint64_t t0 = uv_hrtime();
    int rc = fence__store_db_batch_end(s->db);
    fence__store_metrics_commit(&s->metrics, (double)(uv_hrtime() - t0) * 1e-9);
    if (rc != 0)
        s->stat_replays++;
    else
        s->stat_batches++;
    for (size_t i = 0; i < s->n_items; i++) {
        batch_item *it = s->items[i];
        if (rc != 0) {
            free(it->reply.buf);
            uint8_t resp = it->reply.resp;
            memset(&it->reply, 0, sizeof(it->reply));
            it->reply.resp = resp;
            execute(s, &it->reply, &it->cmd); /* alone: own txn and sync */
        }
        if (it->reply.nomem)
            fence__net_slot_error(it->slot, "ERR", "out of memory for the "
                                  "reply (the request was executed)");
        else
            fence__net_slot_reply(it->slot, it->reply.buf, it->reply.len);
        free(it->reply.buf);
        free(it);
        s->items[i] = NULL;
    }
    s->stat_batched += s->n_items;
    s->n_items = 0;
    s->bytes = 0;
    fence__net_flush(&s->net);
    ckpt_start(s);
}

/* Copy p[0..n) to *at and point *dst at the copy. */
static void copy_arg(char **at, const char **dst, const char *p, size_t n)
{
    if (p == NULL)
        return;
    memcpy(*at, p, n);
    *dst = *at;
    *at += n;
}

/* Run cmd inside the batch (opening one if needed); its reply waits for
 * the batch's commit. */
static void batch_add(server *s, fence_net_conn *c, const fence_store_cmd *cmd)
{
    size_t len = cmd->fence_len + cmd->key_len + cmd->value_len;
    if (s->n_items == FENCE_STORE_BATCH_MAX ||
        (s->n_items > 0 && s->bytes + len > FENCE_STORE_BATCH_BYTES))
        batch_flush(s);
    if (s->items == NULL) {
        s->items = calloc(FENCE_STORE_BATCH_MAX, sizeof(*s->items));
        if (s->items == NULL) {
            fence__net_reply_error(c, "ERR", "out of memory; nothing was "
                                             "written");
            return;
        }
    }
    batch_item *it = malloc(sizeof(*it) + len);
    if (it == NULL) {
        fence__net_reply_error(c, "ERR", "out of memory; nothing was written");
        return;
    }
    fence_net_slot *slot = fence__net_slot_new(c);
    if (slot == NULL) {
        free(it);
        fence__net_reply_error(c, "ERR", "out of memory; nothing was written");
        return;
    }
    memset(it, 0, sizeof(*it));
    it->slot = slot;
    it->reply.resp = ((store_conn *)c)->compat.resp;
    it->cmd = *cmd;
    char *at = it->bytes;
    copy_arg(&at, &it->cmd.fence, cmd->fence, cmd->fence_len);
    copy_arg(&at, &it->cmd.key, cmd->key, cmd->key_len);
    copy_arg(&at, &it->cmd.value, cmd->value, cmd->value_len);
    if (!s->open) {
        fence__store_db_batch_begin(s->db);
        s->open = true;
        uv_idle_start(&s->idle, on_idle);
    }
    s->items[s->n_items++] = it;
    s->bytes += len;
    if (!fence__store_db_batch_broken(s->db))
        execute(s, &it->reply, &it->cmd);
}

/* Timer: LMDB commits the batches logged since its last commit (db_defer.c,
 * "Deferred commits"), then a due checkpoint starts.  A batch may be open
 * here: batch_flush's fence__net_flush lets a paused pipeline go on
 * (--max-pipeline), and the requests it parses open a new batch after this
 * turn's commit, which the next turn's check commits; timers run before
 * that.  Then the flush waits for the next tick (the batch's own commit
 * logs it, and LMDB's commit is only deferred). */
static void on_flush_timer(uv_timer_t *h)
{
    server *s = h->data;
    if (s->open)
        return;
    fence__store_db_flush(s->db);
    ckpt_start(s);
}

/* End of the loop turn: commit the batch and answer it. */
static void on_check(uv_check_t *h)
{
    batch_flush(h->data);
}

/* A connection closed with batched requests unanswered: keep their slots
 * (the writes still commit; the layer frees a slot answered orphaned). */
static bool on_slot_orphan(void *ctx, fence_net_slot *slot)
{
    (void)ctx;
    (void)slot;
    return true;
}

/* The layer parsed a request: check it, run it, answer it. */
static void on_request(void *ctx, fence_net_conn *c, const fence_resp_msg *msg)
{
    server *s = ctx;
    fence_store_cmd cmd;
    const char *code;
    char err[256];
    if (fence__daemon_acl_gate(&s->daemon, c, msg) || fence__daemon_compat(&s->daemon, c, msg))
        return;
    if (fence__store_cmd_parse(msg, s->cfg->max_value, s->verifier, &cmd, &code, err,
                               sizeof(err)) != 0) {
        fence__net_reply_error(c, code, err);
        return;
    }
    if (cmd.op == FENCE_STORE_OP_FGET && fence__acl_srv_has_file(&s->acl)) {
        /* The key's binding must be read as the batch would see it: commit
         * the open batch first (a key it binds must not be readable by a
         * user outside that fence), then check. */
        if (s->open)
            batch_flush(s);
        if (!fget_allowed(s, c, &cmd)) {
            fence__net_reply_error(c, "NOPERM", "No permissions to access a key");
            return;
        }
    }
    switch (cmd.op) {
    case FENCE_STORE_OP_PING:
    case FENCE_STORE_OP_QUIT: {
        sink k = {.c = c, .resp = ((store_conn *)c)->compat.resp};
        execute(s, &k, &cmd);
        break;
    }
    default:
        batch_add(s, c, &cmd);
        break;
    }
}

/* The error reply for a request the parser refused. */
static void on_proto_error(void *ctx, fence_net_conn *c, int status,
                           const char *detail, const char **code, char *msg,
                           size_t cap)
{
    server *s = ctx;
    (void)c;
    if (status == FENCE_NET_EREQ_TOOBIG) {
        *code = "LIMIT";
        snprintf(msg, cap,
                 "request exceeds %zu bytes (--max-value %" PRIu64
                 " plus room for the other arguments); closing",
                 s->net.lim.rbuf_max, s->cfg->max_value);
    } else if (status == FENCE_RESP_ETOOBIG) {
        *code = "LIMIT";
        snprintf(msg, cap,
                 "%s (this fence-store accepts values up to %" PRIu64
                 " bytes, --max-value); nothing was written; closing",
                 detail ? detail : "too big", s->cfg->max_value);
    } else {
        *code = "ERR";
        snprintf(msg, cap, "Protocol error: %s; closing",
                 detail ? detail : "bad request");
    }
}

/* Close the signal handles (they keep the loop alive otherwise). */
static void close_stop_signals(server *s)
{
    uv_close((uv_handle_t *)&s->sigint, NULL);
    uv_close((uv_handle_t *)&s->sigterm, NULL);
    fence__daemon_signals_close(&s->signals);
}

/* Close the loop's handles: the batch's and the signals. */
static void close_signals(server *s)
{
    uv_close((uv_handle_t *)&s->check, NULL);
    uv_close((uv_handle_t *)&s->idle, NULL);
    uv_close((uv_handle_t *)&s->flush, NULL);
    close_stop_signals(s);
}

/* SIGINT/SIGTERM: stop accepting, close everything, let the loop end. */
static void on_stop_signal(uv_signal_t *sig, int signum)
{
    server *s = sig->data;
    FENCE_LOG_I("signal %d: stopping", signum);
    /* Commit and answer the open batch; flushing its replies may resume a
     * connection whose buffered requests open another one, committed
     * after the connections are closed (its slots orphaned, then freed). */
    batch_flush(s);
    fence__net_stop(&s->net);
    batch_flush(s);
    close_signals(s);
}

/* SIGHUP, after the skeleton reopened the log and reloaded the ACL: read
 * --token-verify-keys again.  The loop thread is the only one that
 * verifies, so the swap is atomic for every request; a bad file keeps the
 * old keys. */
static void reload_keys(void *arg)
{
    server *s = arg;
    if (s->cfg->token_verify_keys[0] == '\0')
        return;
    char kerr[1300];
    if (fence_signtok_verifier_reload(s->cfg->token_verify_keys, 0, &s->verifier, kerr,
                                      sizeof(kerr)) != 0)
        FENCE_LOG_E("SIGHUP: token-verify-keys not reloaded, the old %zu keys stay: %s",
                    fence_signtok_verifier_nkeys(s->verifier), kerr);
    else
        FENCE_LOG_I("SIGHUP: token-verify-keys reloaded (%zu verify keys from %s)",
                    fence_signtok_verifier_nkeys(s->verifier), s->cfg->token_verify_keys);
}

/* Set up and run the loop; see server.h. */
int fence__store_server_run(const fence_store_config *cfg, fence_store_db *db)
{
    static server srv;
    server *s = &srv;
    char err[1300];
    s->cfg = cfg;
    s->db = db;
    s->loop = uv_default_loop();
    s->start_ns = uv_hrtime();
    if (cfg->token_verify_keys[0] != '\0') {
        char kerr[1300];
        if (fence_signtok_verifier_load(cfg->token_verify_keys, 0, &s->verifier,
                                        kerr, sizeof(kerr)) != 0) {
            FENCE_LOG_E("token-verify-keys: %s", kerr);
            return 1;
        }
        FENCE_LOG_I("accepting only signed tokens (%zu verify keys from %s)",
                    fence_signtok_verifier_nkeys(s->verifier), cfg->token_verify_keys);
    }
    fence_daemon_parts parts = {"fence-store", &cfg->daemon, &s->net, &s->compat, &s->acl,
                                &s->acl_conns, offsetof(store_conn, compat),
                                offsetof(store_conn, quota_mark), fence__store_commands,
                                fence__store_commands_n};
    if (fence__daemon_users_init(&s->daemon, &parts) != 0)
        return 1;
    snprintf(s->refuse, sizeof(s->refuse), "max clients (%" PRIu64
             ") reached", cfg->daemon.max_clients);

    fence_net_limits lim;
    memset(&lim, 0, sizeof(lim));
    fence__daemon_net_limits(&cfg->daemon, &lim);
    lim.rbuf_max = (size_t)cfg->max_value + FENCE_STORE_RBUF_SLACK;
    lim.slot_size = sizeof(fence_net_slot);
    lim.conn_size = sizeof(store_conn);
    lim.eof_flush = true;
    fence_resp_limits_default(&lim.resp);
    lim.resp.args_max = 16;
    lim.resp.bulk_max = cfg->max_value;
    fence_net_hooks hooks;
    memset(&hooks, 0, sizeof(hooks));
    hooks.ctx = s;
    hooks.on_request = on_request;
    hooks.on_open = on_open;
    hooks.on_close = on_close;
    hooks.proto_error = on_proto_error;
    hooks.on_slot_orphan = on_slot_orphan;
    hooks.refuse_msg = s->refuse;
    if (fence__net_init(&s->net, s->loop, &lim, &hooks) != 0) {
        FENCE_LOG_E("out of memory");
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    /* The signals before anything listens: a signal may come as soon as
     * the listening line is logged. */
    uv_signal_init(s->loop, &s->sigint);
    uv_signal_init(s->loop, &s->sigterm);
    s->sigint.data = s->sigterm.data = s;
    uv_signal_start(&s->sigint, on_stop_signal, SIGINT);
    uv_signal_start(&s->sigterm, on_stop_signal, SIGTERM);
    fence__daemon_signals_start(&s->signals, &s->daemon, s->loop, reload_keys, s);
    if (fence__daemon_listen(&s->daemon) != 0) {
        close_stop_signals(s);
        fence__net_stop(&s->net);
        uv_run(s->loop, UV_RUN_DEFAULT);
        fence__net_free(&s->net);
        fence_signtok_verifier_free(s->verifier);
        return 1;
    }
    if (fence__store_metrics_start(&s->metrics, cfg->daemon.metrics_bind, (int)cfg->daemon.metrics_port,
                                   err, sizeof(err)) != 0) {
        FENCE_LOG_E("metrics-port: %s", err);
        close_stop_signals(s);
        fence__net_stop(&s->net);
        uv_run(s->loop, UV_RUN_DEFAULT);
        fence__net_free(&s->net);
        return 1;
    }
    s->acl.m_auth_failures = s->metrics.auth_failures;
    if (cfg->daemon.metrics_port != 0)
        FENCE_LOG_I("metrics on http://%s:%" PRIu64 "/metrics", cfg->daemon.metrics_bind,
                    cfg->daemon.metrics_port);
    /* After the listeners: the TLS listener's own handles (which hand
     * decrypted requests over) must run before this check handle in a
     * loop turn, or a batch opened by them would stay open past it. */
    uv_check_init(s->loop, &s->check);
    uv_idle_init(s->loop, &s->idle);
    s->check.data = s->idle.data = s;
    /* Started after fence__net_init's own check handle; batch_flush
     * flushes the layer itself, so the order of the two does not matter. */
    uv_check_start(&s->check, on_check);
    uv_timer_init(s->loop, &s->flush);
    s->flush.data = s;
    uv_timer_start(&s->flush, on_flush_timer, FENCE_STORE_FLUSH_MS,
                   FENCE_STORE_FLUSH_MS);
    uv_unref((uv_handle_t *)&s->flush); /* never keeps the loop alive */
    uv_run(s->loop, UV_RUN_DEFAULT);
    FENCE_ASSERT(!s->open);
    free(s->items);
    s->items = NULL;
    uv_loop_close(s->loop);
    fence__net_free(&s->net);
    fence_res_metrics_free(&s->metrics);
    fence_signtok_verifier_free(s->verifier);
    fence__acl_srv_free(&s->acl);
    FENCE_LOG_I("fence-store stopped");
    return 0;
}
