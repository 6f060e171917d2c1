/* Raft glue: raft_uv setup, crash-stop wrappers, bootstrap; see node.h. */
#include "base/assert.h"
#include "server/node.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/stat.h>

#include "base/fs.h"
#include "server/cluster.h" /* FENCE_CLUSTER_ADDR_MAX */
#include "server/cluster_addr.h"
#include "base/log.h"
#include "server/peer_tls.h"

#define NODE_OF_IO(p) ((fence_node *)((char *)(p) - offsetof(fence_node, io)))

/* Most distinct stripped raft addresses remembered (one per node the
 * transport ever connects to; far above FENCE_PEERS_MAX). */
#define STRIPPED_MAX 64

/* ---- "raft|client" addresses (cluster.h) ------------------------------- */

/* raft_uv_tcp's own connect function, called by the wrapper. */
static int (*tcp_connect)(struct raft_uv_transport *t, struct raft_uv_connect *req,
                          raft_id id, const char *address, raft_uv_connect_cb cb);

/* Interned raft parts of "raft|client" addresses: raft_uv_tcp may keep the
 * address pointer it is given, so each stripped string lives for the whole
 * process. */
static char stripped[STRIPPED_MAX][FENCE_CLUSTER_ADDR_MAX];
/* Entries used in stripped. */
static unsigned n_stripped;

/* The interned raft part of address, or NULL if the table is full. */
static const char *intern_raft_part(const char *address)
{
    char raft[FENCE_CLUSTER_ADDR_MAX];
    char client[FENCE_CLUSTER_ADDR_MAX];
    if (fence__cluster_split_addr(address, raft, sizeof(raft), client,
                                  sizeof(client)) != 0)
        return NULL;
    for (unsigned i = 0; i < n_stripped; i++)
        if (strcmp(stripped[i], raft) == 0)
            return stripped[i];
    if (n_stripped == STRIPPED_MAX)
        return NULL;
    memcpy(stripped[n_stripped], raft, strlen(raft) + 1);
    return stripped[n_stripped++];
}

/* transport->connect wrapper: hand raft_uv_tcp only the raft part. */
static int connect_stripped(struct raft_uv_transport *t, struct raft_uv_connect *req,
                            raft_id id, const char *address, raft_uv_connect_cb cb)
{
    FENCE_ASSERT(tcp_connect != NULL);
    if (strchr(address, '|') == NULL)
        return tcp_connect(t, req, id, address, cb);
    const char *raft = intern_raft_part(address);
    if (raft == NULL) {
        FENCE_LOG_E("raft address '%.80s' is too long or too many addresses", address);
        return RAFT_NOCONNECTION;
    }
    return tcp_connect(t, req, id, raft, cb);
}

/* Install connect_stripped over raft_uv_tcp's connect. */
static void wrap_transport(struct raft_uv_transport *t)
{
    FENCE_ASSERT(t->connect != NULL);
    FENCE_ASSERT(t->connect != connect_stripped);
    tcp_connect = t->connect;
    t->connect = connect_stripped;
}

/* The peer entry of server id from its "raft|client" configuration
 * address, or NULL when it is not in the configuration or its address has
 * no client part.  Points at static storage. */
static const fence_peer *conf_peer(fence_node *n, uint64_t id)
{
    static fence_peer found;
    fence_node_server sv;
    if (!n->started || !fence__node_server_find(n, id, &sv) || sv.address == NULL)
        return NULL;
    char raft[FENCE_CLUSTER_ADDR_MAX];
    char client[FENCE_CLUSTER_ADDR_MAX];
    char rhost[FENCE_HOST_MAX];
    uint16_t rport;
    if (fence__cluster_split_addr(sv.address, raft, sizeof(raft), client,
                                  sizeof(client)) != 0 ||
        client[0] == '\0')
        return NULL;
    memset(&found, 0, sizeof(found));
    found.id = id;
    if (fence__cluster_parse_hostport(client, strlen(client), found.host,
                                      sizeof(found.host), &found.client_port) != 0 ||
        fence__cluster_parse_hostport(raft, strlen(raft), rhost, sizeof(rhost),
                                      &rport) != 0)
        return NULL;
    found.raft_port = rport;
    return &found;
}

/* See node.h: configuration address first, then --peers. */
const fence_peer *fence__node_peer(fence_node *n, uint64_t id)
{
    if (id == 0)
        return NULL;
    const fence_peer *p = conf_peer(n, id);
    return p != NULL ? p : fence__config_peer(n->cfg, id);
}

/* ---- The local transport (single node, no raft network) ---------------- */

/* Nothing to set up: a one-voter cluster never talks to anyone. */
static int local_init(struct raft_uv_transport *t, raft_id id, const char *addr)
{
    (void)t;
    (void)id;
    (void)addr;
    return 0;
}

/* Accept nothing. */
static int local_listen(struct raft_uv_transport *t, raft_uv_accept_cb cb)
{
    (void)t;
    (void)cb;
    return 0;
}

/* There is nobody to connect to; raft only connects to other voters. */
static int local_connect(struct raft_uv_transport *t, struct raft_uv_connect *req,
                         raft_id id, const char *addr, raft_uv_connect_cb cb)
{
    (void)req;
    (void)id;
    (void)addr;
    (void)cb;
    snprintf(t->errmsg, sizeof(t->errmsg), "single node: no raft network");
    return RAFT_NOCONNECTION;
}

/* Nothing pending, so closing completes at once. */
static void local_close(struct raft_uv_transport *t, raft_uv_transport_close_cb cb)
{
    cb(t);
}

/* ---- Crash-stop wrappers around raft_uv --------------------------------- */

/* Our own request passed to raft_uv, remembering raft's request. */
typedef struct wrap_append {
    struct raft_io_append req;     /* handed to raft_uv */
    struct raft_io_append *orig;   /* raft's request */
    raft_io_append_cb orig_cb;     /* raft's callback */
    fence_node *node;              /* for the test hook and shutdown state */
    uint64_t seq;                  /* 1-based append number */
    unsigned n_entries;            /* entries in this append (for the log) */
    uint64_t t0_ns;                /* when it started (latency metric) */
} wrap_append;

/* Completion of a log append: a failure is fatal, except cancellation while
 * the daemon is shutting down (nothing is acknowledged after that). */
static void wrap_append_cb(struct raft_io_append *req, int status)
{
    wrap_append *w = req->data;
    fence_node *n = w->node;
    if (status == 0 && n->fail_append_at != 0 && w->seq == n->fail_append_at)
        status = RAFT_IOERR; /* test hook: pretend the write failed */
    if (status != 0 && !(n->closing && status == RAFT_CANCELED))
        fence__log_fatal("raft log append of %u entries failed: %s (%d); "
                         "aborting rather than continue on a log that may be behind",
                         w->n_entries, fence__raft_strerror(status), status);
    if (status == 0 && n->append_latency != NULL)
        fence_metric_observe(n->append_latency, (double)(uv_hrtime() - w->t0_ns) * 1e-9);
    struct raft_io_append *orig = w->orig;
    raft_io_append_cb cb = w->orig_cb;
    free(w);
    orig->cb = cb;
    if (cb != NULL)
        cb(orig, status);
}

/* raft_io->append: forward to raft_uv with our completion in between. */
static int wrap_append_fn(struct raft_io *io, struct raft_io_append *req,
                          const struct raft_entry entries[], unsigned n_entries,
                          raft_io_append_cb cb)
{
    fence_node *n = NODE_OF_IO(io);
    wrap_append *w = malloc(sizeof(*w));
    if (w == NULL)
        return RAFT_NOMEM;
    w->req.data = w;
    w->orig = req;
    w->orig_cb = cb;
    w->node = n;
    w->seq = ++n->appends;
    w->n_entries = n_entries;
    w->t0_ns = uv_hrtime();
    int rv = n->uv_append(io, &w->req, entries, n_entries, wrap_append_cb);
    if (rv != 0) {
        free(w);
        if (rv != RAFT_NOMEM && !n->closing)
            fence__log_fatal("raft log append could not start: %s (%d)",
                             fence__raft_strerror(rv), rv);
    }
    return rv;
}

/* A synchronous raft_io call that failed is fatal (crash-stop), except while
 * the daemon is closing; "what" and "arg" name the call for the log. */
static int fatal_unless_ok(const fence_node *n, int rv, const char *what,
                           unsigned long long arg)
{
    if (rv != 0 && !n->closing)
        fence__log_fatal("%s %llu failed: %s (%d)", what, arg,
                         fence__raft_strerror(rv), rv);
    return rv;
}

/* raft_io->truncate: a refusal to truncate is as fatal as a failed write. */
static int wrap_truncate_fn(struct raft_io *io, raft_index index)
{
    fence_node *n = NODE_OF_IO(io);
    return fatal_unless_ok(n, n->uv_truncate(io, index), "raft log truncate at",
                           (unsigned long long)index);
}

/* raft_io->set_term and ->set_vote: the term and the vote are durable
 * promises (never vote twice in a term); if they cannot be written, going
 * on is unsafe, and libraft 0.15's own error paths for them are unreliable
 * (the simulation found a bad free after a failed set_vote). */
static int wrap_set_term_fn(struct raft_io *io, raft_term term)
{
    fence_node *n = NODE_OF_IO(io);
    return fatal_unless_ok(n, n->uv_set_term(io, term), "persisting raft term",
                           (unsigned long long)term);
}

static int wrap_set_vote_fn(struct raft_io *io, raft_id server_id)
{
    fence_node *n = NODE_OF_IO(io);
    return fatal_unless_ok(n, n->uv_set_vote(io, server_id),
                           "persisting raft vote for",
                           (unsigned long long)server_id);
}

/* Our own request for a snapshot write. */
typedef struct wrap_snap {
    struct raft_io_snapshot_put req;    /* handed to raft_uv */
    struct raft_io_snapshot_put *orig;  /* raft's request */
    raft_io_snapshot_put_cb orig_cb;    /* raft's callback */
    fence_node *node;                   /* for the shutdown state */
} wrap_snap;

/* Completion of a snapshot write: failure is fatal (as for appends). */
static void wrap_snap_cb(struct raft_io_snapshot_put *req, int status)
{
    wrap_snap *w = req->data;
    if (status != 0 && !(w->node->closing && status == RAFT_CANCELED))
        fence__log_fatal("raft snapshot write failed: %s (%d)",
                         fence__raft_strerror(status), status);
    struct raft_io_snapshot_put *orig = w->orig;
    raft_io_snapshot_put_cb cb = w->orig_cb;
    free(w);
    orig->cb = cb;
    if (cb != NULL)
        cb(orig, status);
}

/* raft_io->snapshot_put: forward with our completion in between. */
static int wrap_snap_fn(struct raft_io *io, unsigned trailing,
                        struct raft_io_snapshot_put *req,
                        const struct raft_snapshot *snapshot,
                        raft_io_snapshot_put_cb cb)
{
    fence_node *n = NODE_OF_IO(io);
    wrap_snap *w = malloc(sizeof(*w));
    if (w == NULL)
        return RAFT_NOMEM;
    w->req.data = w;
    w->orig = req;
    w->orig_cb = cb;
    w->node = n;
    int rv = n->uv_snapshot_put(io, trailing, &w->req, snapshot, wrap_snap_cb);
    if (rv != 0)
        free(w);
    return rv;
}

/* ---- Who may connect (the TLS transport's membership) --------------------- */

/* The membership the TLS transport admits peers by (fence_peer_tls_member_fn
 * in peer_tls.h): the servers of raft's current configuration, whatever
 * their role, the uncommitted configuration of a change included (libraft
 * switches to a new configuration as soon as it is in the log, so a node
 * being added by CLUSTER.ADD is a member of the leader from then on).  The
 * address is the raft part of a "raft|client" address.  While the
 * configuration is empty, which happens only on a --join node before its
 * leader's first entries arrive, the --peers map stands in: it names the
 * nodes the operator expects to hear from.  Nobody while closing. */
static bool node_member(void *arg, unsigned i, uint64_t *id, char *addr, size_t cap)
{
    fence_node *n = arg;
    FENCE_ASSERT(cap > 0);
    if (n->closing)
        return false;
    const struct raft_configuration *c = &n->raft.configuration;
    if (c->n > 0) {
        if (i >= c->n)
            return false;
        char client[FENCE_CLUSTER_ADDR_MAX];
        *id = (uint64_t)c->servers[i].id;
        if (c->servers[i].address == NULL ||
            fence__cluster_split_addr(c->servers[i].address, addr, cap, client,
                                      sizeof(client)) != 0)
            addr[0] = '\0'; /* matches no hello: the member is refused */
        return true;
    }
    if (i >= n->cfg->n_peers)
        return false;
    *id = n->cfg->peer[i].id;
    snprintf(addr, cap, "%s:%u", n->cfg->peer[i].host, (unsigned)n->cfg->peer[i].raft_port);
    return true;
}

/* See node.h. */
void fence__node_set_peer_refusals(fence_node *n, fence_metric *m)
{
    if (n->peer_tls)
        fence__peer_tls_set_refusals(&n->transport, m);
}

/* ---- Start / stop ----------------------------------------------------------- */

/* Set up raft_uv, wrap it, bootstrap if pristine, start.  See node.h. */
int fence__node_start(fence_node *n, uv_loop_t *loop, const fence_config *cfg,
                      struct raft_fsm *fsm)
{
    int rv;
    memset(n, 0, sizeof(*n));
    n->cfg = cfg;
    const char *env = getenv("FENCED_TEST_FAIL_APPEND");
    if (env != NULL && *env != '\0') {
        n->fail_append_at = strtoull(env, NULL, 10);
        FENCE_LOG_W("test hook: raft append #%llu will report a disk error",
                    (unsigned long long)n->fail_append_at);
    }
    rv = fence__fs_mkdir_p(cfg->data_dir, 0755);
    if (rv != 0) {
        FENCE_LOG_E("data-dir %s: cannot create: %s", cfg->data_dir, strerror(rv));
        return -1;
    }
    /* One process per data directory, before anything in it is read: two
     * fenced on one raft log would both lead and issue the same tokens. */
    char lerr[FENCE_FS_PATH_MAX + 200];
    n->lock_fd = fence__fs_lock_dir_msg(cfg->data_dir, "fenced.lock", lerr, sizeof(lerr));
    if (n->lock_fd < 0) {
        FENCE_LOG_E("%s", lerr);
        return -1;
    }
    if (fence__node_check_space(cfg->data_dir) != 0)
        return -1;

    const fence_peer *self = fence__config_peer(cfg, cfg->node_id);
    FENCE_ASSERT(self != NULL);
    n->tcp = cfg->raft_port != 0;
    snprintf(n->address, sizeof(n->address), "%s:%u", self->host,
             (unsigned)self->raft_port);
    if (n->tcp && cfg->peer_tls_cert[0] != '\0') {
        if (fence__peer_tls_init(&n->transport, loop, cfg->peer_tls_cert,
                                 cfg->peer_tls_key, cfg->peer_tls_ca,
                                 cfg->peer_tls_check_id != 0) != 0)
            return -1;
        n->peer_tls = true;
        fence__peer_tls_set_members(&n->transport, node_member, n);
        wrap_transport(&n->transport);
    } else if (n->tcp) {
        rv = raft_uv_tcp_init(&n->transport, loop);
        if (rv != 0) {
            FENCE_LOG_E("raft transport: %s", fence__raft_strerror(rv));
            return -1;
        }
        wrap_transport(&n->transport);
    } else {
        n->transport.init = local_init;
        n->transport.listen = local_listen;
        n->transport.connect = local_connect;
        n->transport.close = local_close;
    }
    rv = raft_uv_init(&n->io, loop, cfg->data_dir, &n->transport);
    if (rv != 0) {
        FENCE_LOG_E("raft storage in %s: %s", cfg->data_dir, n->io.errmsg);
        return -1;
    }
    raft_uv_set_segment_size(&n->io, FENCE_RAFT_SEGMENT_BYTES);
    n->uv_append = n->io.append;
    n->uv_truncate = n->io.truncate;
    n->uv_set_term = n->io.set_term;
    n->uv_set_vote = n->io.set_vote;
    n->uv_snapshot_put = n->io.snapshot_put;
    n->io.append = wrap_append_fn;
    n->io.truncate = wrap_truncate_fn;
    n->io.set_term = wrap_set_term_fn;
    n->io.set_vote = wrap_set_vote_fn;
    n->io.snapshot_put = wrap_snap_fn;

    rv = raft_init(&n->raft, &n->io, fsm, cfg->node_id, n->address);
    if (rv != 0) {
        FENCE_LOG_E("raft init: %s", raft_errmsg(&n->raft));
        return -1;
    }
    n->raft.data = n;
    raft_set_election_timeout(&n->raft, (unsigned)cfg->election_timeout_ms);
    raft_set_heartbeat_timeout(&n->raft, (unsigned)cfg->heartbeat_ms);
    raft_set_snapshot_threshold(&n->raft, (unsigned)cfg->snapshot_threshold);
    raft_set_snapshot_trailing(&n->raft, (unsigned)cfg->snapshot_trailing);
    raft_set_pre_vote(&n->raft, true);
    /* libraft's default of 30 s before it retries an InstallSnapshot that got
     * no answer (say the follower was killed while receiving it) stalls a
     * restarted follower's catch-up for that long; fenced's snapshots are
     * small, so retry after 10 election timeouts (at least 5 s). */
    raft_set_install_snapshot_timeout(
        &n->raft, (unsigned)(cfg->election_timeout_ms * 10 > 5000
                                 ? cfg->election_timeout_ms * 10 : 5000));

    /* First start: every node bootstraps the same full configuration.  A
     * data dir with raft state answers RAFT_CANTBOOTSTRAP: keep it. */
    struct raft_configuration conf;
    raft_configuration_init(&conf);
    for (unsigned i = 0; i < cfg->n_peers; i++) {
        char addr[96];
        snprintf(addr, sizeof(addr), "%s:%u", cfg->peer[i].host,
                 (unsigned)cfg->peer[i].raft_port);
        rv = raft_configuration_add(&conf, cfg->peer[i].id, addr, RAFT_VOTER);
        if (rv != 0) {
            FENCE_LOG_E("raft configuration: %s", fence__raft_strerror(rv));
            raft_configuration_close(&conf);
            return -1;
        }
    }
    /* --join: a node being added at run time must not bootstrap a
     * configuration of its own; raft brings it the cluster's. */
    rv = cfg->join ? RAFT_CANTBOOTSTRAP : raft_bootstrap(&n->raft, &conf);
    raft_configuration_close(&conf);
    if (cfg->join)
        FENCE_LOG_I("--join: not bootstrapping; waiting for a leader to add node %llu",
                    (unsigned long long)cfg->node_id);
    if (rv == 0)
        FENCE_LOG_I("bootstrapped a new raft log in %s with %u voter(s)",
                    cfg->data_dir, cfg->n_peers);
    else if (rv != RAFT_CANTBOOTSTRAP) {
        FENCE_LOG_E("raft bootstrap: %s (%s)", fence__raft_strerror(rv), n->io.errmsg);
        return -1;
    }
    rv = raft_start(&n->raft);
    if (rv != 0) {
        FENCE_LOG_E("raft start: %s", raft_errmsg(&n->raft));
        return -1;
    }
    n->started = true;
    FENCE_LOG_I("raft started: node %llu at %s, term %llu, last index %llu",
                (unsigned long long)cfg->node_id, n->address,
                (unsigned long long)n->raft.current_term,
                (unsigned long long)raft_last_index(&n->raft));
    return 0;
}

/* Propose one entry; see node.h for buffer ownership. */
int fence__node_apply(fence_node *n, struct raft_apply *req, void *buf,
                      size_t len, raft_apply_cb cb)
{
    struct raft_buffer b;
    FENCE_ASSERT(buf != NULL);
    FENCE_ASSERT(len > 0);
    b.base = buf;
    b.len = len;
    return raft_apply(&n->raft, req, &b, 1, cb);
}

/* Propose a barrier. */
int fence__node_barrier(fence_node *n, struct raft_barrier *req,
                        raft_barrier_cb cb)
{
    return raft_barrier(&n->raft, req, cb);
}

/* Whether raft says we lead (and are not handing leadership over). */
bool fence__node_is_leader(fence_node *n)
{
    return n->started && !n->closing && raft_state(&n->raft) == RAFT_LEADER;
}

/* Human-readable raft state for INFO. */
const char *fence__node_role(fence_node *n)
{
    if (!n->started || n->closing)
        return "unavailable";
    switch (raft_state(&n->raft)) {
    case RAFT_LEADER:
        return "leader";
    case RAFT_FOLLOWER:
        return "follower";
    case RAFT_CANDIDATE:
        return "candidate";
    default:
        return "unavailable";
    }
}

/* Count voters in raft's current configuration. */
unsigned fence__node_voters(fence_node *n)
{
    unsigned v = 0;
    for (unsigned i = 0; i < n->raft.configuration.n; i++)
        if (n->raft.configuration.servers[i].role == RAFT_VOTER)
            v++;
    return v;
}

/* raft's current term. */
uint64_t fence__node_term(const fence_node *n)
{
    return (uint64_t)n->raft.current_term;
}

/* raft's commit index. */
uint64_t fence__node_commit_index(const fence_node *n)
{
    return (uint64_t)n->raft.commit_index;
}

/* raft's last applied index. */
uint64_t fence__node_applied_index(const fence_node *n)
{
    return (uint64_t)raft_last_applied((struct raft *)&n->raft);
}

/* Whether raft has a leadership transfer request in progress. */
bool fence__node_transferring(const fence_node *n)
{
    return n->raft.transfer != NULL;
}

/* raft's own state is leader (also while closing). */
bool fence__node_raft_leads(fence_node *n)
{
    return raft_state(&n->raft) == RAFT_LEADER;
}

/* The leader raft knows of (0: none, or not started). */
uint64_t fence__node_leader_id(fence_node *n, const char **address)
{
    raft_id id = 0;
    const char *addr = NULL;
    if (n->started)
        raft_leader(&n->raft, &id, &addr);
    if (address != NULL)
        *address = addr;
    return (uint64_t)id;
}

/* raft's last log index, 0 before start. */
uint64_t fence__node_last_index(fence_node *n)
{
    return n->started ? (uint64_t)raft_last_index(&n->raft) : 0;
}

/* Index of raft's last snapshot. */
uint64_t fence__node_snapshot_index(const fence_node *n)
{
    return (uint64_t)n->raft.log.snapshot.last_index;
}

/* Index of the configuration in force. */
uint64_t fence__node_configuration_index(const fence_node *n)
{
    return (uint64_t)n->raft.configuration_index;
}

/* Servers in the current configuration. */
unsigned fence__node_servers(const fence_node *n)
{
    return n->raft.configuration.n;
}

/* Copy server i of the current configuration out. */
void fence__node_server_at(const fence_node *n, unsigned i,
                           fence_node_server *out)
{
    const struct raft *r = &n->raft;
    FENCE_ASSERT(i < r->configuration.n);
    const struct raft_server *sv = &r->configuration.servers[i];
    out->id = (uint64_t)sv->id;
    out->address = sv->address;
    out->role = sv->role;
    /* progress is indexed like the configuration, on a leader only. */
    out->contact = sv->id == r->id ||
                   (r->state == RAFT_LEADER && r->leader_state.progress != NULL &&
                    r->leader_state.progress[i].recent_recv);
}

/* Find a server of the current configuration by id. */
bool fence__node_server_find(const fence_node *n, uint64_t id,
                             fence_node_server *out)
{
    for (unsigned i = 0; i < n->raft.configuration.n; i++) {
        if (n->raft.configuration.servers[i].id == id) {
            fence__node_server_at(n, i, out);
            return true;
        }
    }
    return false;
}

/* Milliseconds since the check-quorum flags were last cleared. */
uint64_t fence__node_contact_age_ms(const fence_node *n)
{
    const struct raft *r = &n->raft;
    raft_time now = r->io->time(r->io);
    return (uint64_t)(now - r->election_timer_start);
}

/* raft_add: id joins as a spare. */
int fence__node_add(fence_node *n, struct raft_change *req, uint64_t id,
                    const char *address, raft_change_cb cb)
{
    return raft_add(&n->raft, req, (raft_id)id, address, cb);
}

/* raft_assign: id becomes a voter. */
int fence__node_promote(fence_node *n, struct raft_change *req, uint64_t id,
                        raft_change_cb cb)
{
    return raft_assign(&n->raft, req, (raft_id)id, RAFT_VOTER, cb);
}

/* raft_remove: id leaves the configuration. */
int fence__node_remove(fence_node *n, struct raft_change *req, uint64_t id,
                       raft_change_cb cb)
{
    return raft_remove(&n->raft, req, (raft_id)id, cb);
}

/* raft_transfer: hand leadership to id (0: raft picks). */
int fence__node_transfer(fence_node *n, struct raft_transfer *req, uint64_t id,
                         raft_transfer_cb cb)
{
    return raft_transfer(&n->raft, req, (raft_id)id, cb);
}

/* Map raft's idea of the leader to its client address. */
const fence_peer *fence__node_leader_peer(fence_node *n)
{
    raft_id id = 0;
    const char *addr = NULL;
    if (!n->started)
        return NULL;
    raft_leader(&n->raft, &id, &addr);
    if (id == 0)
        return NULL;
    return fence__node_peer(n, id); /* added nodes too (cluster.h) */
}

/* raft_close completion: hand over to the owner. */
static void node_closed(struct raft *r)
{
    fence_node *n = r->data;
    if (n->close_cb != NULL)
        n->close_cb(n);
}

/* Close raft (which closes raft_uv and the transport). */
void fence__node_close(fence_node *n, fence_node_close_cb cb)
{
    FENCE_ASSERT(!n->closing);
    n->closing = true;
    n->close_cb = cb;
    if (!n->started) {
        if (cb != NULL)
            cb(n);
        return;
    }
    raft_close(&n->raft, node_closed);
}
