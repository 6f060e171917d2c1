/* CLUSTER.* commands (run-time membership changes and leadership
 * transfer); see cluster.h for the address format (node.c holds the
 * raft glue for it) and docs/cluster.md for operations. */
#include "base/assert.h"
#include "server/cluster.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/cluster_addr.h"
#include "base/log.h"
#include "server/server.h"
#include "server/voter_floor.h"

/* Largest node id accepted (as for --node-id). */
#define NODE_ID_MAX (1ULL << 62)

/* Kinds of pending cluster requests. */
enum cluster_kind {
    CK_ADD = 0,    /* raft_add, then raft_assign(RAFT_VOTER) */
    CK_PROMOTE,    /* raft_assign(RAFT_VOTER) only (node already a non-voter) */
    CK_REMOVE,     /* raft_remove */
    CK_TRANSFER,   /* raft_transfer */
    CK_REMOVE_SELF, /* CLUSTER.REMOVE of the leader: raft_transfer first */
};

/* One membership change or leadership transfer waiting for raft. */
typedef struct cluster_req {
    struct raft_change change;     /* raft request for add/assign/remove */
    struct raft_transfer transfer; /* raft request for transfer */
    fence_server *srv;             /* the server */
    fence_slot *slot;              /* the reply slot (orphan-safe) */
    int kind;                      /* enum cluster_kind */
    uint64_t id;                   /* the server the request is about */
    uv_timer_t timer;              /* REMOVE: wait for trustworthy contact flags */
    bool rechecked;                /* REMOVE: the wait is over (check once more) */
} cluster_req;

/* Format the client address of server id into out ("" when unknown). */
static void client_addr(fence_node *n, uint64_t id, char *out, size_t cap)
{
    const fence_peer *p = fence__node_peer(n, id);
    if (p == NULL || p->client_port == 0)
        snprintf(out, cap, "%s", "");
    else
        snprintf(out, cap, "%s:%u", p->host, (unsigned)p->client_port);
}

/* Name of a raft role in a configuration. */
static const char *role_name(int role)
{
    switch (role) {
    case RAFT_VOTER:
        return "voter";
    case RAFT_STANDBY:
        return "standby";
    case RAFT_SPARE:
        return "spare";
    default:
        return "unknown";
    }
}

/* Reply with a simple string. */
static void reply_simple(fence_slot *slot, const char *s)
{
    char buf[64];
    size_t n = fence_resp_simple(buf, sizeof(buf), s);
    FENCE_ASSERT(n <= sizeof(buf));
    fence__slot_reply(slot, buf, n);
}

/* CLUSTER.INFO: this node's view, as "key:value" lines in one bulk string,
 * then one "node:" line per server of the current configuration.  Without
 * admin (fence__server_acl_admin) the term line and the nodes' raft
 * addresses are left out. */
static void cluster_info(fence_server *s, fence_slot *slot, bool admin)
{
    fence_node *n = &s->node;
    unsigned nservers = fence__node_servers(n);
    size_t cap = 2048 + (size_t)(nservers + 1) * 400;
    char *text = malloc(cap);
    if (text == NULL) {
        fence__slot_error(slot, "ERR", "out of memory");
        return;
    }
    uint64_t leader_id = fence__node_leader_id(n, NULL);
    char leader[FENCE_CLUSTER_ADDR_MAX];
    client_addr(n, leader_id, leader, sizeof(leader));
    char term[48] = "";
    if (admin)
        snprintf(term, sizeof(term), "term:%" PRIu64 "\r\n", fence__node_term(n));
    int len = snprintf(
        text, cap,
        "# cluster\r\n"
        "node_id:%" PRIu64 "\r\n"
        "role:%s\r\n"
        "leader_ready:%d\r\n"
        "leader_id:%" PRIu64 "\r\n"
        "leader:%s\r\n"
        "%s"
        "commit_index:%" PRIu64 "\r\n"
        "applied_index:%" PRIu64 "\r\n"
        "last_log_index:%" PRIu64 "\r\n"
        "snapshot_index:%" PRIu64 "\r\n"
        "configuration_index:%" PRIu64 "\r\n"
        "voters:%u\r\n"
        "nodes:%u\r\n",
        s->cfg->node_id, fence__node_role(n), fence__leader_ready(s->leader),
        leader_id, leader, term, fence__node_commit_index(n),
        fence__node_applied_index(n), fence__node_last_index(n),
        fence__node_snapshot_index(n), fence__node_configuration_index(n),
        fence__node_voters(n), nservers);
    FENCE_ASSERT(len > 0);
    FENCE_ASSERT((size_t)len < cap);
    for (unsigned i = 0; i < nservers; i++) {
        fence_node_server sv;
        fence__node_server_at(n, i, &sv);
        char raft[FENCE_CLUSTER_ADDR_MAX];
        char client[FENCE_CLUSTER_ADDR_MAX];
        if (fence__cluster_split_addr(sv.address ? sv.address : "", raft,
                                      sizeof(raft), client, sizeof(client)) != 0) {
            snprintf(raft, sizeof(raft), "%s", "?");
            client[0] = '\0';
        }
        if (client[0] == '\0')
            client_addr(n, sv.id, client, sizeof(client));
        char raft_kv[FENCE_CLUSTER_ADDR_MAX + 8] = "";
        if (admin)
            snprintf(raft_kv, sizeof(raft_kv), "raft=%s,", raft);
        int w = snprintf(text + len, cap - (size_t)len,
                         "node:id=%" PRIu64 ",%sclient=%s,role=%s,leader=%d,self=%d\r\n",
                         sv.id, raft_kv, client, role_name(sv.role),
                         sv.id == leader_id, sv.id == s->cfg->node_id);
        FENCE_ASSERT(w > 0);
        FENCE_ASSERT((size_t)w < cap - (size_t)len);
        len += w;
    }
    size_t need = fence_resp_bulk(NULL, 0, text, (size_t)len);
    char *buf = malloc(need);
    if (buf == NULL) {
        free(text);
        fence__slot_error(slot, "ERR", "out of memory");
        return;
    }
    fence_resp_bulk(buf, need, text, (size_t)len);
    fence__slot_reply(slot, buf, need);
    free(buf);
    free(text);
}

/* Reply for a synchronous raft refusal of a cluster request. */
static void reply_raft_error(fence_server *s, fence_slot *slot, int rv, uint64_t id)
{
    char msg[200];
    switch (rv) {
    case RAFT_NOTLEADER:
    case RAFT_LEADERSHIPLOST:
        if (rv == RAFT_LEADERSHIPLOST) {
            fence__slot_error(slot, "TRYAGAIN",
                              "leadership was lost before the change committed; "
                              "it may or may not have happened: check CLUSTER.INFO and retry");
            return;
        }
        if (fence__node_is_leader(&s->node) && fence__node_transferring(&s->node)) {
            fence__slot_error(slot, "TRYAGAIN",
                              "a leadership transfer is in progress; retry shortly");
            return;
        }
        fence__cmd_reply_unavailable(s, slot);
        return;
    case RAFT_CANTCHANGE:
        fence__slot_error(slot, "TRYAGAIN",
                          "another membership change is in progress; retry shortly");
        return;
    case RAFT_DUPLICATEID:
        snprintf(msg, sizeof(msg), "node %" PRIu64 " is already in the configuration", id);
        fence__slot_error(slot, "ERR", msg);
        return;
    case RAFT_DUPLICATEADDRESS:
        fence__slot_error(slot, "ERR", "that raft address is already in the configuration");
        return;
    case RAFT_NOTFOUND:
    case RAFT_BADID:
        snprintf(msg, sizeof(msg), "node %" PRIu64 " is not a voter of the configuration "
                 "(or is this node)", id);
        fence__slot_error(slot, "ERR", msg);
        return;
    case RAFT_NOCONNECTION:
        snprintf(msg, sizeof(msg), "node %" PRIu64 " could not be reached to catch up; it "
                 "stays in the configuration as a spare (not counted for quorum): start it "
                 "with --join 1 and retry CLUSTER.ADD, or CLUSTER.REMOVE it", id);
        fence__slot_error(slot, "ERR", msg);
        return;
    case RAFT_SHUTDOWN:
    case RAFT_CANCELED:
        fence__slot_error(slot, "TRYAGAIN", "the server is shutting down");
        return;
    default:
        snprintf(msg, sizeof(msg), "raft refused the change: %s (%d)",
                 fence__raft_strerror(rv), rv);
        fence__slot_error(slot, "ERR", msg);
        return;
    }
}

/* A new pending request for slot; the slot is marked as in a batch so a
 * closing connection orphans it instead of freeing it under us. */
static cluster_req *req_new(fence_server *s, fence_slot *slot, int kind, uint64_t id)
{
    cluster_req *q = calloc(1, sizeof(*q));
    if (q == NULL)
        return NULL;
    q->srv = s;
    q->slot = slot;
    q->kind = kind;
    q->id = id;
    q->change.data = q;
    q->transfer.data = q;
    slot->state = SLOT_BATCH;
    return q;
}

/* Give the slot back its normal state before replying and free q. */
static fence_slot *req_finish(cluster_req *q)
{
    fence_slot *slot = q->slot;
    slot->state = SLOT_NEW;
    free(q);
    return slot;
}

static void change_done(struct raft_change *req, int status);

/* Promote q->id to voter (second half of CLUSTER.ADD).  Returns raft's code. */
static int start_promote(cluster_req *q)
{
    q->kind = CK_PROMOTE;
    return fence__node_promote(&q->srv->node, &q->change, q->id, change_done);
}

/* Completion of raft_add / raft_assign / raft_remove. */
static void change_done(struct raft_change *req, int status)
{
    cluster_req *q = req->data;
    fence_server *s = q->srv;
    if (status == 0 && q->kind == CK_ADD) {
        FENCE_LOG_I("cluster: node %" PRIu64 " added as spare; promoting to voter", q->id);
        int rv = start_promote(q);
        if (rv == 0)
            return;
        status = rv;
    }
    uint64_t id = q->id;
    int kind = q->kind;
    fence_slot *slot = req_finish(q);
    if (status != 0) {
        FENCE_LOG_W("cluster: %s of node %" PRIu64 " failed: %s",
                    kind == CK_REMOVE ? "removal" : "addition", id, fence__raft_strerror(status));
        reply_raft_error(s, slot, status, id);
        return;
    }
    FENCE_LOG_I("cluster: node %" PRIu64 " %s", id,
                kind == CK_REMOVE ? "removed" : "is a voter");
    reply_simple(slot, "OK");
}

/* Completion of raft_transfer: success when another node leads now. */
static void transfer_done(struct raft_transfer *req)
{
    cluster_req *q = req->data;
    fence_server *s = q->srv;
    uint64_t target = q->id;
    int kind = q->kind;
    fence_slot *slot = req_finish(q);
    uint64_t leader = fence__node_leader_id(&s->node, NULL);
    bool moved = leader != s->cfg->node_id || !fence__node_raft_leads(&s->node);
    if (kind == CK_REMOVE_SELF) {
        /* The removal itself is the new leader's: redirect there
         * (NOTLEADER, or TRYAGAIN while no leader is known), and the
         * client's retry removes this node as a follower. */
        if (moved) {
            FENCE_LOG_I("cluster: leadership transferred (to node %" PRIu64 ") so that the "
                        "new leader removes this node", leader);
            fence__cmd_reply_unavailable(s, slot);
            return;
        }
        fence__slot_error(slot, "ERR", "leadership transfer did not complete in time; this "
                                       "node (the leader) was not removed: retry");
        return;
    }
    if (moved && (target == 0 || leader == target || leader == 0)) {
        FENCE_LOG_I("cluster: leadership transferred (to node %" PRIu64 ")", leader);
        reply_simple(slot, "OK");
        return;
    }
    fence__slot_error(slot, "ERR", "leadership transfer did not complete in time");
}

/* CLUSTER.ADD <id> <raft-addr> <client-addr>. */
static void cluster_add(fence_server *s, fence_slot *slot, const fence_resp_msg *m)
{
    char msg[200];
    uint64_t id;
    if (fence_resp_parse_u64(m->argv[1].ptr, m->argv[1].len, NODE_ID_MAX, &id) != 0 ||
        id == 0) {
        fence__slot_error(slot, "ERR", "id must be an integer in 1..4611686018427387904");
        return;
    }
    char rhost[FENCE_HOST_MAX], chost[FENCE_HOST_MAX];
    uint16_t rport, cport;
    if (fence__cluster_parse_hostport(m->argv[2].ptr, m->argv[2].len, rhost, sizeof(rhost),
                                      &rport) != 0) {
        fence__slot_error(slot, "ERR", "raft-addr must be IPv4-address:port");
        return;
    }
    if (fence__cluster_parse_hostport(m->argv[3].ptr, m->argv[3].len, chost, sizeof(chost),
                                      &cport) != 0) {
        fence__slot_error(slot, "ERR", "client-addr must be IPv4-address:port");
        return;
    }
    if (!fence__node_is_leader(&s->node)) {
        fence__cmd_reply_unavailable(s, slot);
        return;
    }
    char address[FENCE_CLUSTER_ADDR_MAX];
    snprintf(address, sizeof(address), "%s:%u|%s:%u", rhost, (unsigned)rport, chost,
             (unsigned)cport);
    /* A retried ADD (say after TRYAGAIN for a lost leadership) finds the
     * node already there: same address and voter is success, same address
     * and not yet a voter resumes with the promotion. */
    fence_node_server sv;
    bool known = fence__node_server_find(&s->node, id, &sv);
    if (known) {
        if (sv.address == NULL || strcmp(sv.address, address) != 0) {
            snprintf(msg, sizeof(msg), "node %" PRIu64 " is already in the configuration "
                     "with address %.100s", id, sv.address ? sv.address : "?");
            fence__slot_error(slot, "ERR", msg);
            return;
        }
        if (sv.role == RAFT_VOTER) {
            reply_simple(slot, "OK");
            return;
        }
    }
    cluster_req *q = req_new(s, slot, known ? CK_PROMOTE : CK_ADD, id);
    if (q == NULL) {
        fence__slot_error(slot, "ERR", "out of memory");
        return;
    }
    int rv = known ? start_promote(q)
                   : fence__node_add(&s->node, &q->change, id, address, change_done);
    if (rv != 0) {
        slot = req_finish(q);
        reply_raft_error(s, slot, rv, id);
        return;
    }
    FENCE_LOG_I("cluster: adding node %" PRIu64 " at %s", id, address);
}

/* Outcomes of removal_check(). */
enum removal_verdict {
    RM_OK = 0,     /* the removal may go ahead */
    RM_WAIT,       /* the contact flags are too fresh to trust: check again later */
    RM_REFUSED,    /* refused; the reason is in msg */
};

/* The voter floor for CLUSTER.REMOVE: the rule itself is the pure function
 * fence_voter_floor() (voter_floor.h, docs/cluster.md "The voter floor"),
 * which the simulation calls too; this hands it raft's configuration as
 * plain data.  Contact comes from libraft's check-quorum flags (struct
 * raft_progress, public in raft.h): set when a follower answers, cleared
 * every election timeout (when election_timer_start moves); within two
 * heartbeats of a clear the verdict is RM_WAIT with *wait_ms to go, unless
 * rechecked.  Only on a leader. */
static int removal_check(fence_server *s, uint64_t id, bool rechecked, char *msg,
                         size_t cap, uint64_t *wait_ms)
{
    fence_node *n = &s->node;
    FENCE_ASSERT(fence__node_raft_leads(n));
    unsigned count = fence__node_servers(n);
    fence_vf_server *sv = calloc(count ? count : 1, sizeof *sv);
    if (sv == NULL) {
        snprintf(msg, cap, "refused: out of memory");
        return RM_REFUSED;
    }
    for (unsigned i = 0; i < count; i++) {
        fence_node_server ns;
        fence__node_server_at(n, i, &ns);
        sv[i].id = ns.id;
        sv[i].voter = ns.role == RAFT_VOTER;
        sv[i].contact = ns.contact;
    }
    fence_vf_query q = {
        .servers = sv,
        .n = count,
        .victim = id,
        .rechecked = rechecked,
        .since_clear_ms = fence__node_contact_age_ms(n),
        .settle_ms = 2 * s->cfg->heartbeat_ms,
    };
    fence_vf_result r;
    int verdict = fence_voter_floor(&q, &r);
    free(sv);
    if (verdict == FENCE_VF_OK)
        return RM_OK;
    if (verdict == FENCE_VF_WAIT) {
        *wait_ms = r.wait_ms;
        return RM_WAIT;
    }
    fence_voter_floor_msg(&r, id, msg, cap);
    return RM_REFUSED;
}

static void remove_try(cluster_req *q);

/* Close callback of a REMOVE's wait timer: check again, for the last time. */
static void remove_timer_closed(uv_handle_t *h)
{
    cluster_req *q = h->data;
    q->rechecked = true;
    if (q->srv->stopping) {
        fence_slot *slot = req_finish(q);
        fence__slot_error(slot, "TRYAGAIN", "the server is shutting down");
        return;
    }
    remove_try(q);
}

/* The wait of a REMOVE is over; close the timer (q lives on). */
static void remove_timer_fired(uv_timer_t *t)
{
    uv_close((uv_handle_t *)t, remove_timer_closed);
}

/* Check the voter floor for q, then hand the removal to raft (or wait a
 * little for the contact flags, or refuse).  Every path replies on q's slot
 * or leaves q pending in raft or in its timer. */
static void remove_try(cluster_req *q)
{
    fence_server *s = q->srv;
    uint64_t id = q->id;
    char msg[300];
    uint64_t wait_ms = 0;
    if (!fence__node_is_leader(&s->node)) {
        fence_slot *slot = req_finish(q);
        fence__cmd_reply_unavailable(s, slot);
        return;
    }
    int verdict = removal_check(s, id, q->rechecked, msg, sizeof(msg), &wait_ms);
    if (verdict == RM_WAIT &&
        uv_timer_init(s->loop, &q->timer) == 0) {
        q->timer.data = q;
        int trv = uv_timer_start(&q->timer, remove_timer_fired, wait_ms, 0);
        FENCE_ASSERT(trv == 0);
        (void)trv;
        return;
    }
    if (verdict == RM_WAIT) /* no timer: read the flags as they are */
        verdict = removal_check(s, id, true, msg, sizeof(msg), &wait_ms);
    if (verdict == RM_REFUSED) {
        FENCE_LOG_W("cluster: removal of node %" PRIu64 " %s", id, msg);
        fence_slot *slot = req_finish(q);
        fence__slot_error(slot, "ERR", msg);
        return;
    }
    FENCE_ASSERT(verdict == RM_OK);
    if (id == s->cfg->node_id) {
        /* The leader itself.  A leader that removes itself steps down only
         * once the change commits, and with two voters losing leadership
         * before the other has the entry can leave the cluster without a
         * leader for good (docs/cluster.md).  So hand leadership to the most
         * up-to-date voter first; the new leader removes this node as a
         * follower when the client sends the request there. */
        if (fence__node_transferring(&s->node)) {
            fence_slot *slot = req_finish(q);
            fence__slot_error(slot, "TRYAGAIN", "a leadership transfer is in progress");
            return;
        }
        q->kind = CK_REMOVE_SELF;
        int trv = fence__node_transfer(&s->node, &q->transfer, 0, transfer_done);
        if (trv != 0) {
            fence_slot *slot = req_finish(q);
            reply_raft_error(s, slot, trv, id);
            return;
        }
        FENCE_LOG_I("cluster: removing this node (the leader): transferring leadership first");
        return;
    }
    int rv = fence__node_remove(&s->node, &q->change, id, change_done);
    if (rv != 0) {
        fence_slot *slot = req_finish(q);
        reply_raft_error(s, slot, rv, id);
        return;
    }
    FENCE_LOG_I("cluster: removing node %" PRIu64, id);
}

/* CLUSTER.REMOVE <id>: refused below the voter floor (removal_check). */
static void cluster_remove(fence_server *s, fence_slot *slot, const fence_resp_msg *m)
{
    uint64_t id;
    if (fence_resp_parse_u64(m->argv[1].ptr, m->argv[1].len, NODE_ID_MAX, &id) != 0 ||
        id == 0) {
        fence__slot_error(slot, "ERR", "id must be an integer in 1..4611686018427387904");
        return;
    }
    if (!fence__node_is_leader(&s->node)) {
        fence__cmd_reply_unavailable(s, slot);
        return;
    }
    fence_node_server sv;
    if (!fence__node_server_find(&s->node, id, &sv)) {
        char msg[120];
        snprintf(msg, sizeof(msg), "node %" PRIu64 " is not in the configuration", id);
        fence__slot_error(slot, "ERR", msg);
        return;
    }
    cluster_req *q = req_new(s, slot, CK_REMOVE, id);
    if (q == NULL) {
        fence__slot_error(slot, "ERR", "out of memory");
        return;
    }
    remove_try(q);
}

/* CLUSTER.TRANSFER [<id>]: hand leadership to id (0 or none: raft picks the
 * most up-to-date voter). */
static void cluster_transfer(fence_server *s, fence_slot *slot, const fence_resp_msg *m)
{
    uint64_t id = 0;
    if (m->argc == 2 &&
        fence_resp_parse_u64(m->argv[1].ptr, m->argv[1].len, NODE_ID_MAX, &id) != 0) {
        fence__slot_error(slot, "ERR", "id must be an integer in 0..4611686018427387904");
        return;
    }
    if (!fence__node_is_leader(&s->node)) {
        fence__cmd_reply_unavailable(s, slot);
        return;
    }
    if (fence__node_transferring(&s->node)) {
        fence__slot_error(slot, "TRYAGAIN", "a leadership transfer is in progress");
        return;
    }
    cluster_req *q = req_new(s, slot, CK_TRANSFER, id);
    if (q == NULL) {
        fence__slot_error(slot, "ERR", "out of memory");
        return;
    }
    int rv = fence__node_transfer(&s->node, &q->transfer, id, transfer_done);
    if (rv != 0) {
        slot = req_finish(q);
        reply_raft_error(s, slot, rv, id);
        return;
    }
    FENCE_LOG_I("cluster: transferring leadership to %s%" PRIu64,
                id == 0 ? "(any) " : "node ", id);
}

/* Route one CLUSTER.* request by its name. */
void fence__cluster_dispatch(fence_conn *c, fence_slot *slot, const fence_resp_msg *m)
{
    fence_server *s = c->srv;
    const fence_resp_arg *name = &m->argv[0];
    FENCE_ASSERT(m->argc >= 1);
    if (s->stopping) {
        fence__slot_error(slot, "TRYAGAIN", "the server is shutting down");
        return;
    }
    if (name->len == 12 && strncasecmp(name->ptr, "CLUSTER.INFO", 12) == 0)
        cluster_info(s, slot, fence__server_acl_admin(c));
    else if (name->len == 11 && strncasecmp(name->ptr, "CLUSTER.ADD", 11) == 0)
        cluster_add(s, slot, m);
    else if (name->len == 14 && strncasecmp(name->ptr, "CLUSTER.REMOVE", 14) == 0)
        cluster_remove(s, slot, m);
    else if (name->len == 16 && strncasecmp(name->ptr, "CLUSTER.TRANSFER", 16) == 0)
        cluster_transfer(s, slot, m);
    else {
        FENCE_ASSERT(!"command table and cluster dispatch disagree");
        fence__slot_error(slot, "ERR", "unknown cluster command");
    }
}
