/* The command table: argument validation, immediate replies, and the
 * hand-over of commands and linearizable reads to the leader module
 * (src/leader), whose answers come back through the reply sink
 * (reply.c, which also turns state-machine results into RESP replies). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/assert.h"
#include "server/cluster.h"
#include "server/commands_table.h"
#include "base/log.h"
#include "server/server.h"

/* Largest value a RESP integer reply can carry. */
#define INT_REPLY_MAX ((uint64_t)INT64_MAX)

/* Find a command by name, ignoring case: the one table
 * (commands_table.c) that the ACL gate checked the request against. */
static const fence_compat_command *cmd_find(const fence_resp_arg *a)
{
    return fence_compat_command_find(fence__server_commands, fence__server_commands_n, a->ptr,
                                     a->len);
}

/* Whether argument a equals word, ignoring case. */
static bool arg_is(const fence_resp_arg *a, const char *word)
{
    return strlen(word) == a->len && strncasecmp(word, a->ptr, a->len) == 0;
}

/* Lower-case copy of a command name for error messages. */
static void lower_name(const char *name, char *out, size_t cap)
{
    size_t i = 0;
    for (; name[i] && i + 1 < cap; i++)
        out[i] = (char)((name[i] >= 'A' && name[i] <= 'Z') ? name[i] + 32 : name[i]);
    out[i] = '\0';
}

/* The request's reply slot, appended to c's queue; NULL if memory ran out. */
static fence_slot *slot_new(fence_conn *c, const fence_compat_command *def)
{
    fence_slot *slot = (fence_slot *)fence__net_slot_new(&c->base);
    if (slot == NULL)
        return NULL;
    slot->conn = c;
    slot->op = def != NULL ? def->op : OP_PING;
    slot->def = def;
    slot->state = SLOT_NEW;
    slot->resp = c->compat.resp;
    slot->t0_ns = uv_hrtime();
    return slot;
}

/* Argument a as an integer in [min, max] (cmd_args.c). */
static int arg_u64(fence_slot *slot, const fence_resp_arg *a, const char *what,
                   uint64_t min, uint64_t max, uint64_t *out)
{
    return fence__cmd_arg_u64(slot, a, what, min, max, out);
}

/* Check a lock name's length; reply ERR and return -1 when out of range. */
static int arg_name(fence_slot *slot, const fence_resp_arg *a, fence_cmd *cmd)
{
    if (a->len < 1 || a->len > FENCE_NAME_MAX) {
        char msg[96];
        snprintf(msg, sizeof(msg), "lock name must be 1..%d bytes", FENCE_NAME_MAX);
        fence__slot_error(slot, "ERR", msg);
        return -1;
    }
    cmd->name = (const uint8_t *)a->ptr;
    cmd->name_len = (uint16_t)a->len;
    return 0;
}

/* The election value at argv[at] (before end): at most
 * FENCE_ELECT_VALUE_MAX bytes; reply ERR and return -1 otherwise. */
static int arg_value(fence_slot *slot, const fence_resp_msg *m, uint32_t at, uint32_t end,
                     fence_cmd *cmd)
{
    if (at >= end) {
        fence__slot_error(slot, "ERR", "wrong number of arguments: the value is missing");
        return -1;
    }
    const fence_resp_arg *a = &m->argv[at];
    if (a->len > FENCE_ELECT_VALUE_MAX) {
        char msg[96];
        snprintf(msg, sizeof(msg), "election value must be at most %d bytes",
                 FENCE_ELECT_VALUE_MAX);
        fence__slot_error(slot, "ERR", msg);
        return -1;
    }
    cmd->value = (const uint8_t *)a->ptr;
    cmd->value_len = (uint32_t)a->len;
    return 0;
}

/* The trailing options allowed (OPTF_*, server.h) from argv[first..end)
 * into cmd (cmd_args.c). */
static int parse_options(fence_slot *slot, const fence_resp_msg *m, uint32_t first,
                         uint32_t end, unsigned allowed, fence_cmd *cmd)
{
    return fence__cmd_parse_options(slot, m, first, end, allowed, cmd);
}

/* A trailing SIGNED on LOCK/ACQUIRE (always the last argument): if present,
 * check that this server can sign, remember the lock name in the slot for
 * the reply, and return in *argc the argument count without it; -1 after
 * an error reply (nothing is proposed, so nothing is granted). */
static int take_signed(fence_server *s, fence_slot *slot, const fence_resp_msg *m,
                       const fence_cmd *cmd, uint32_t *argc)
{
    *argc = m->argc;
    if (m->argc < 4 || !arg_is(&m->argv[m->argc - 1], "SIGNED"))
        return 0;
    if (s->signer == NULL) {
        fence__slot_error(slot, "ERR", "SIGNED: this server has no token signing "
                                       "key (fenced --token-signing-key)");
        return -1;
    }
    FENCE_ASSERT(cmd->name_len > 0);
    FENCE_ASSERT(cmd->name_len <= sizeof(slot->sign_name));
    memcpy(slot->sign_name, cmd->name, cmd->name_len);
    slot->sign_name_len = cmd->name_len;
    slot->signer = s->signer;
    *argc = m->argc - 1;
    return 0;
}

/* Build the INFO text and reply with it as one bulk string: the sections
 * every Redis client may read (# Server with redis_version, # Clients,
 * # Persistence: fence_compat_info_standard), then # fenced; INFO with
 * section names (INFO server, INFO fenced) gives only those. */
static void reply_info(fence_server *s, fence_slot *slot, const fence_resp_msg *m)
{
    char text[4096];
    fence_fsm_stats st;
    fence_fsm_stats_get(s->fsm, &st);
    fence_leader_stats ls;
    fence__leader_stats_get(s->leader, &ls);
    const fence_peer *lp = fence__node_leader_peer(&s->node);
    char leader[96] = "";
    if (lp != NULL)
        snprintf(leader, sizeof(leader), "%s:%u", lp->host, (unsigned)lp->client_port);
    uint64_t mono = uv_hrtime() / 1000000;
    double avg = ls.batches ? (double)ls.batch_cmds / (double)ls.batches : 0.0;
    char why[128];
    bool healthy = fence__srv_health(&s->metrics, why, sizeof(why));
    int n = snprintf(
        text, sizeof(text),
        "version:%s\r\n"
        "role:%s\r\n"
        "leader_ready:%d\r\n"
        "node_id:%llu\r\n"
        "leader:%s\r\n"
        "voters:%u\r\n"
        "term:%llu\r\n"
        "commit_index:%llu\r\n"
        "applied_index:%llu\r\n"
        "uptime_s:%llu\r\n"
        "now_ms:%llu\r\n"
        "last_token:%llu\r\n"
        "leases:%llu\r\n"
        "locks:%llu\r\n"
        "waiters:%llu\r\n"
        "connections:%llu\r\n"
        "rejected_connections:%llu\r\n"
        "slow_readers_closed:%llu\r\n"
        "commands_processed:%llu\r\n"
        "batches:%llu\r\n"
        "batch_commands:%llu\r\n"
        "avg_batch_size:%.2f\r\n"
        "batches_held:%llu\r\n"
        "batches_gathered:%llu\r\n"
        "batches_gather_timeouts:%llu\r\n"
        "raft_entries:%llu\r\n"
        "raft_bytes:%llu\r\n"
        "fsync_batches:%llu\r\n"
        "healthy:%d\r\n"
        "health:%s\r\n"
        "grants:%llu\r\n"
        "handoffs:%llu\r\n"
        "lease_expirations:%llu\r\n"
        "lease_expirations_with_locks:%llu\r\n"
        "revocations:%llu\r\n"
        "loop_lag_max_us:%llu\r\n"
        "loop_lag_over_20ms:%llu\r\n"
        "renewals_local:%llu\r\n"
        "checkpoints:%llu\r\n"
        "checkpoint_leases:%llu\r\n"
        "checkpoints_rode:%llu\r\n"
        "batches_pipelined:%llu\r\n",
        FENCED_VERSION, fence__node_role(&s->node), fence__leader_ready(s->leader),
        (unsigned long long)s->cfg->node_id, leader, fence__node_voters(&s->node),
        (unsigned long long)fence__node_term(&s->node),
        (unsigned long long)fence__node_commit_index(&s->node),
        (unsigned long long)fence__node_applied_index(&s->node),
        (unsigned long long)((mono - s->start_ms) / 1000),
        (unsigned long long)fence__leader_now(s->leader), (unsigned long long)st.last_token,
        (unsigned long long)st.leases, (unsigned long long)st.locks,
        (unsigned long long)st.waiters, (unsigned long long)s->net.n_conns,
        (unsigned long long)s->net.stat_refused,
        (unsigned long long)s->net.stat_slow_closed,
        (unsigned long long)s->stat_commands, (unsigned long long)ls.batches,
        (unsigned long long)ls.batch_cmds, avg, (unsigned long long)ls.holds, (unsigned long long)ls.gathers,
        (unsigned long long)ls.gathers_timed_out,
        (unsigned long long)ls.batches, (unsigned long long)ls.entry_bytes,
        (unsigned long long)s->node.appends, healthy ? 1 : 0, why,
        (unsigned long long)st.grants, (unsigned long long)st.handoffs,
        (unsigned long long)st.expirations, (unsigned long long)st.expirations_with_locks,
        (unsigned long long)st.revocations,
        (unsigned long long)s->lag.max_us, (unsigned long long)s->lag.over_20ms,
        (unsigned long long)ls.renewals_local, (unsigned long long)ls.checkpoints,
        (unsigned long long)ls.checkpoint_ids, (unsigned long long)ls.checkpoints_rode,
        (unsigned long long)ls.pipelined);
    FENCE_ASSERT(n > 0);
    FENCE_ASSERT((size_t)n < sizeof(text));
    const char *note = fence_fsm_build_note();
    if (note != NULL) {
        int k = snprintf(text + n, sizeof(text) - (size_t)n, "build_note:%s\r\n", note);
        FENCE_ASSERT(k > 0);
        FENCE_ASSERT((size_t)k < sizeof(text) - (size_t)n);
        n += k;
    }
    fence_compat_info b;
    fence_compat_info_begin(&b, m);
    fence_compat_info_std std = {
        .process_id = (uint64_t)getpid(),
        .tcp_port = s->cfg->daemon.port,
        .uptime_s = (mono - s->start_ms) / 1000,
        .connected_clients = s->net.n_conns,
        .max_clients = s->cfg->daemon.max_clients,
        .loading = false, /* a node that is not ready answers TRYAGAIN */
    };
    fence_compat_info_standard(&b, &s->compat, &std);
    fence_compat_info_section(&b, "fenced");
    fence_compat_info_lines(&b, text, (size_t)n);
    fence_compat_reply out;
    fence_compat_reply_init(&out);
    if (fence_compat_info_finish(&b, &out) != 0)
        fence__slot_error(slot, "ERR", "out of memory building INFO");
    else
        fence__slot_reply(slot, out.ptr, out.len);
    fence_compat_reply_free(&out);
}

/* Handle one parsed request: find the command, check arity and arguments,
 * then answer or submit it.  Every path gives the slot a reply eventually. */
void fence__cmd_dispatch(fence_conn *c, const fence_resp_msg *m)
{
    fence_server *s = c->srv;
    if (fence__server_acl_gate(c, m) || fence__server_compat(c, m))
        return;
    const fence_compat_command *def = cmd_find(&m->argv[0]);
    fence_slot *slot = slot_new(c, def);
    char msg[160];
    if (slot == NULL) {
        FENCE_LOG_E("conn %llu: out of memory for a request; closing",
                    (unsigned long long)c->id);
        fence__net_conn_close(&c->base);
        return;
    }
    if (def == NULL) {
        snprintf(msg, sizeof(msg), "unknown command '%.*s'",
                 (int)(m->argv[0].len > 40 ? 40 : m->argv[0].len), m->argv[0].ptr);
        fence__slot_error(slot, "ERR", msg);
        return;
    }
    if (!fence_compat_command_arity_ok(def, m->argc)) {
        char lname[32];
        lower_name(def->name, lname, sizeof(lname));
        snprintf(msg, sizeof(msg), "wrong number of arguments for '%s' command", lname);
        fence__slot_error(slot, "ERR", msg);
        return;
    }
    fence_cmd cmd;
    memset(&cmd, 0, sizeof(cmd));
    fence_name names[FENCE_MULTI_NAMES_MAX]; /* LOCK.MULTI's, borrowed from m */
    switch (def->op) {
    case OP_PING: {
        char buf[128];
        if (m->argc == 1) {
            size_t n = fence_resp_simple(buf, sizeof(buf), "PONG");
            fence__slot_reply(slot, buf, n);
        } else {
            size_t need = fence_resp_bulk(NULL, 0, m->argv[1].ptr, m->argv[1].len);
            char *big = malloc(need);
            if (big == NULL) {
                fence__slot_error(slot, "ERR", "out of memory");
                return;
            }
            fence_resp_bulk(big, need, m->argv[1].ptr, m->argv[1].len);
            fence__slot_reply(slot, big, need);
            free(big);
        }
        return;
    }
    case OP_INTERNAL: /* QUIT */ {
        char buf[8];
        size_t n = fence_resp_simple(buf, sizeof(buf), "OK");
        fence__slot_reply(slot, buf, n);
        fence__net_close_after_flush(&c->base);
        return;
    }
    case OP_INFO:
        reply_info(s, slot, m);
        return;
    case OP_LIST:
        if (m->argv[0].len == 9) /* LOCK.LIST; LEASE.LIST is 10 bytes */
            fence__list_locks(s, slot, m);
        else
            fence__list_leases(s, slot, m);
        return;
    case OP_HEALTH: {
        /* The answer /health gives: +OK <why> or -UNAVAILABLE <why>. */
        char why[128], buf[160];
        if (fence__srv_health(&s->metrics, why, sizeof(why))) {
            size_t n = fence_resp_simple(buf, sizeof(buf), why);
            fence__slot_reply(slot, buf, n);
        } else {
            fence__slot_error(slot, "UNAVAILABLE", why);
        }
        return;
    }
    case OP_CLUSTER:
        fence__cluster_dispatch(c, slot, m);
        return;
    case OP_GRANT:
        cmd.type = FENCE_CMD_LEASE_GRANT;
        cmd.lock_delay_ms = s->cfg->lock_delay_ms;
        if (arg_u64(slot, &m->argv[1], "ttl_ms", FENCE_TTL_MS_MIN, FENCE_TTL_MS_MAX,
                    &cmd.ttl_ms) != 0 ||
            parse_options(slot, m, 2, m->argc, OPTF_LOCKDELAY | OPTF_REQID, &cmd) != 0)
            return;
        break;
    case OP_KEEPALIVE:
    case OP_REVOKE:
    case OP_LEASE_INFO:
        if (def->op == OP_KEEPALIVE)
            cmd.type = FENCE_CMD_LEASE_KEEPALIVE;
        else if (def->op == OP_REVOKE)
            cmd.type = FENCE_CMD_LEASE_REVOKE;
        /* LEASE.INFO is a read: no command type. */
        if (arg_u64(slot, &m->argv[1], "lease", 0, INT_REPLY_MAX, &cmd.lease) != 0)
            return;
        break;
    case OP_LOCK: {
        uint32_t end;
        cmd.type = FENCE_CMD_LOCK;
        if (arg_name(slot, &m->argv[1], &cmd) != 0 ||
            arg_u64(slot, &m->argv[2], "lease", 0, INT_REPLY_MAX, &cmd.lease) != 0 ||
            take_signed(s, slot, m, &cmd, &end) != 0 ||
            parse_options(slot, m, 3, end, OPTF_WAIT | OPTF_REQID | OPTF_SHARED, &cmd) != 0)
            return;
        break;
    }
    case OP_UNLOCK:
        /* UNLOCK name token, or UNLOCK name token LEASE lease: one holder
         * of a shared lock (whose holders share the token). */
        cmd.type = FENCE_CMD_UNLOCK;
        if (arg_name(slot, &m->argv[1], &cmd) != 0 ||
            arg_u64(slot, &m->argv[2], "token", 0, INT_REPLY_MAX, &cmd.token) != 0)
            return;
        if (m->argc > 3) {
            if (m->argc != 5 || !arg_is(&m->argv[3], "LEASE")) {
                fence__slot_error(slot, "ERR", "syntax error: UNLOCK name token "
                                               "[LEASE lease]");
                return;
            }
            if (arg_u64(slot, &m->argv[4], "lease", 1, INT_REPLY_MAX, &cmd.lease) != 0)
                return;
            cmd.type = FENCE_CMD_UNLOCK_SHARED;
        }
        break;
    case OP_LOCK_INFO:
        if (arg_name(slot, &m->argv[1], &cmd) != 0)
            return;
        break;
    case OP_ACQUIRE: {
        uint32_t end;
        cmd.type = FENCE_CMD_ACQUIRE;
        cmd.lock_delay_ms = s->cfg->lock_delay_ms;
        if (arg_name(slot, &m->argv[1], &cmd) != 0 ||
            arg_u64(slot, &m->argv[2], "ttl_ms", FENCE_TTL_MS_MIN, FENCE_TTL_MS_MAX,
                    &cmd.ttl_ms) != 0 ||
            take_signed(s, slot, m, &cmd, &end) != 0 ||
            parse_options(slot, m, 3, end,
                          OPTF_WAIT | OPTF_LOCKDELAY | OPTF_REQID | OPTF_SHARED, &cmd) != 0)
            return;
        break;
    }
    case OP_SEM_ACQUIRE: {
        uint32_t end;
        uint64_t n = 0;
        cmd.type = FENCE_CMD_SEM_ACQUIRE;
        if (arg_name(slot, &m->argv[1], &cmd) != 0 ||
            arg_u64(slot, &m->argv[2], "n", 1, FENCE_SEM_PERMITS_MAX, &n) != 0 ||
            take_signed(s, slot, m, &cmd, &end) != 0)
            return;
        cmd.permits = (uint32_t)n;
        slot->sem_permits = (uint16_t)n;
        fence__cmd_sem_keep_name(slot, &cmd);
        if (!fence__server_acl_slots_ok(c, cmd.name, cmd.name_len, cmd.permits)) {
            fence__slot_error(slot, "NOPERM", "No permissions to access a key (a slot "
                                              "name name#<slot> of this semaphore)");
            return;
        }
        if (arg_is(&m->argv[3], "TTL")) {
            /* The dedicated form: SEM.ACQUIRE name n TTL ms [LOCKDELAY ms] ... */
            slot->op = OP_SEM_ACQUIRE_TTL;
            cmd.lock_delay_ms = s->cfg->lock_delay_ms;
            if (end < 5) {
                fence__slot_error(slot, "ERR", "syntax error: TTL without a value");
                return;
            }
            if (arg_u64(slot, &m->argv[4], "TTL", FENCE_TTL_MS_MIN, FENCE_TTL_MS_MAX,
                        &cmd.ttl_ms) != 0 ||
                parse_options(slot, m, 5, end, OPTF_WAIT | OPTF_LOCKDELAY | OPTF_REQID, &cmd) !=
                    0)
                return;
        } else if (end > 3) {
            if (arg_u64(slot, &m->argv[3], "lease", 1, INT_REPLY_MAX, &cmd.lease) != 0 ||
                parse_options(slot, m, 4, end, OPTF_WAIT | OPTF_REQID, &cmd) != 0)
                return;
        } else {
            fence__slot_error(slot, "ERR", "syntax error: a lease or TTL ms is needed");
            return;
        }
        break;
    }
    case OP_SEM_RELEASE: {
        uint64_t v = 0;
        cmd.type = FENCE_CMD_SEM_RELEASE;
        if (arg_name(slot, &m->argv[1], &cmd) != 0 ||
            arg_u64(slot, &m->argv[2], "slot", 0, FENCE_SEM_PERMITS_MAX - 1, &v) != 0 ||
            arg_u64(slot, &m->argv[3], "token", 0, INT_REPLY_MAX, &cmd.token) != 0)
            return;
        cmd.slot = (uint32_t)v;
        fence__cmd_sem_keep_name(slot, &cmd);
        break;
    }
    case OP_SEM_INFO:
        if (arg_name(slot, &m->argv[1], &cmd) != 0)
            return;
        break;
    case OP_LOCK_MULTI:
    case OP_ACQUIRE_MULTI:
        if (fence__cmd_multi_parse(s, slot, m, &cmd, names) != 0)
            return;
        break;
    case OP_CAMPAIGN: {
        /* ELECTION.CAMPAIGN name lease value [WAIT ms] [REQID id] [SIGNED] */
        uint32_t end;
        cmd.type = FENCE_CMD_ELECT_CAMPAIGN;
        if (arg_name(slot, &m->argv[1], &cmd) != 0 ||
            arg_u64(slot, &m->argv[2], "lease", 0, INT_REPLY_MAX, &cmd.lease) != 0 ||
            take_signed(s, slot, m, &cmd, &end) != 0 || arg_value(slot, m, 3, end, &cmd) != 0 ||
            parse_options(slot, m, 4, end, OPTF_WAIT | OPTF_REQID, &cmd) != 0)
            return;
        break;
    }
    case OP_PROCLAIM:
    case OP_RESIGN:
        /* ELECTION.PROCLAIM name token value / ELECTION.RESIGN name token */
        cmd.type = def->op == OP_PROCLAIM ? FENCE_CMD_ELECT_PROCLAIM : FENCE_CMD_ELECT_RESIGN;
        if (arg_name(slot, &m->argv[1], &cmd) != 0 ||
            arg_u64(slot, &m->argv[2], "token", 0, INT_REPLY_MAX, &cmd.token) != 0 ||
            (def->op == OP_PROCLAIM && arg_value(slot, m, 3, m->argc, &cmd) != 0))
            return;
        break;
    case OP_ELECT_LEADER:
        if (arg_name(slot, &m->argv[1], &cmd) != 0)
            return;
        break;
    case OP_OBSERVE:
        fence__observe_cmd(s, c, slot, m);
        return;
    default:
        FENCE_ASSERT(!"command table and dispatch disagree");
        return;
    }
    /* The name, for WRONGTYPE's message (SIGNED has copied it already);
     * a multi-lock's: the one a semaphore claims, if any. */
    if (cmd.name_len > 0 && slot->signer == NULL) {
        memcpy(slot->sign_name, cmd.name, cmd.name_len);
        slot->sign_name_len = cmd.name_len;
    }
    if (def->op == OP_LOCK_MULTI || def->op == OP_ACQUIRE_MULTI)
        fence__cmd_sem_keep_multi_name(s, slot, &cmd);
    /* Commands, and linearizable reads (LEASE.INFO, LOCK.INFO, SEM.INFO,
     * ELECTION.LEADER), go to the leader module, which answers through the
     * reply sink (reply.c). */
    fence__server_acl_stamp(c, &cmd);
    slot->state = SLOT_LEADER;
    fence__leader_submit(s->leader, &c->lconn, slot, &cmd,
                         def->op == OP_LEASE_INFO || def->op == OP_LOCK_INFO ||
                             def->op == OP_SEM_INFO || def->op == OP_ELECT_LEADER);
}
