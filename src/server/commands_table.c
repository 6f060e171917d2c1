/* fenced's command table (see commands_table.h): one row per command, from
 * which cmd.c dispatches (op, arity, argc_max), the ACL gate checks (acl,
 * acl_key), COMMAND / COMMAND DOCS answer and the latency metric is
 * labelled.  Arity follows Redis' convention (the name counts; a negative
 * value is a minimum, argc_max the most words); the argument lists are what
 * redis-cli shows as hints. */
#include "server/commands_table.h"

#include "auth/acl.h"
#include "server/server.h"

/* ACL categories (the acl column). */
#define LOCK FENCE_ACL_CAT_LOCK
#define LEASE FENCE_ACL_CAT_LEASE
#define R FENCE_ACL_CAT_READ
#define W FENCE_ACL_CAT_WRITE
#define ADMIN FENCE_ACL_CAT_ADMIN
#define CONN FENCE_ACL_CAT_CONNECTION

#define ARGS(a) (a), (sizeof(a) / sizeof((a)[0]))
#define NO_ARGS NULL, 0
#define OPT FENCE_COMPAT_ARG_OPTIONAL

/* Flags shared by the commands that go through the raft log. */
#define LOGGED (FENCE_COMPAT_CMD_WRITE)
/* Reads answered from applied state. */
#define READ (FENCE_COMPAT_CMD_READONLY | FENCE_COMPAT_CMD_FAST)
/* Answered by any server at once. */
#define LOCAL (FENCE_COMPAT_CMD_FAST | FENCE_COMPAT_CMD_LOADING | FENCE_COMPAT_CMD_STALE)

static const fence_compat_arg ping_args[] = {
    {"message", "string", NULL, OPT, NULL, 0},
};
static const fence_compat_arg grant_args[] = {
    {"ttl_ms", "integer", NULL, 0, NULL, 0},
    {"ms", "integer", "LOCKDELAY", OPT, NULL, 0},
    {"id", "integer", "REQID", OPT, NULL, 0},
};
static const fence_compat_arg lease_arg[] = {
    {"lease", "integer", NULL, 0, NULL, 0},
};
static const fence_compat_arg lock_args[] = {
    {"name", "key", NULL, 0, NULL, 0},
    {"lease", "integer", NULL, 0, NULL, 0},
    {"shared", "pure-token", "SHARED", OPT, NULL, 0},
    {"ms", "integer", "WAIT", OPT, NULL, 0},
    {"id", "integer", "REQID", OPT, NULL, 0},
};
static const fence_compat_arg unlock_args[] = {
    {"name", "key", NULL, 0, NULL, 0},
    {"token", "integer", NULL, 0, NULL, 0},
    {"lease", "integer", "LEASE", OPT, NULL, 0},
};
static const fence_compat_arg name_arg[] = {
    {"name", "key", NULL, 0, NULL, 0},
};
static const fence_compat_arg acquire_args[] = {
    {"name", "key", NULL, 0, NULL, 0},
    {"ttl_ms", "integer", NULL, 0, NULL, 0},
    {"shared", "pure-token", "SHARED", OPT, NULL, 0},
    {"ms", "integer", "WAIT", OPT, NULL, 0},
    {"lockdelay", "integer", "LOCKDELAY", OPT, NULL, 0},
    {"id", "integer", "REQID", OPT, NULL, 0},
};
static const fence_compat_arg sem_acquire_args[] = {
    {"name", "key", NULL, 0, NULL, 0},
    {"n", "integer", NULL, 0, NULL, 0},
    {"lease", "integer", NULL, 0, NULL, 0},
    {"ms", "integer", "WAIT", OPT, NULL, 0},
    {"id", "integer", "REQID", OPT, NULL, 0},
};
static const fence_compat_arg sem_release_args[] = {
    {"name", "key", NULL, 0, NULL, 0},
    {"slot", "integer", NULL, 0, NULL, 0},
    {"token", "integer", NULL, 0, NULL, 0},
};
static const fence_compat_arg lock_multi_args[] = {
    {"lease", "integer", NULL, 0, NULL, 0},
    {"name", "key", NULL, FENCE_COMPAT_ARG_MULTIPLE, NULL, 0},
    {"ms", "integer", "WAIT", OPT, NULL, 0},
    {"id", "integer", "REQID", OPT, NULL, 0},
    {"signed", "pure-token", "SIGNED", OPT, NULL, 0},
};
static const fence_compat_arg acquire_multi_args[] = {
    {"ttl_ms", "integer", NULL, 0, NULL, 0},
    {"name", "key", NULL, FENCE_COMPAT_ARG_MULTIPLE, NULL, 0},
    {"ms", "integer", "WAIT", OPT, NULL, 0},
    {"lockdelay", "integer", "LOCKDELAY", OPT, NULL, 0},
    {"id", "integer", "REQID", OPT, NULL, 0},
    {"signed", "pure-token", "SIGNED", OPT, NULL, 0},
};
static const fence_compat_arg campaign_args[] = {
    {"name", "key", NULL, 0, NULL, 0},
    {"lease", "integer", NULL, 0, NULL, 0},
    {"value", "string", NULL, 0, NULL, 0},
    {"ms", "integer", "WAIT", OPT, NULL, 0},
    {"id", "integer", "REQID", OPT, NULL, 0},
};
static const fence_compat_arg proclaim_args[] = {
    {"name", "key", NULL, 0, NULL, 0},
    {"token", "integer", NULL, 0, NULL, 0},
    {"value", "string", NULL, 0, NULL, 0},
};
static const fence_compat_arg observe_args[] = {
    {"name", "key", NULL, 0, NULL, 0},
    {"revision", "integer", "AFTER", OPT, NULL, 0},
    {"ms", "integer", "WAIT", OPT, NULL, 0},
};
static const fence_compat_arg info_args[] = {
    {"section", "string", NULL, OPT, NULL, 0},
};
static const fence_compat_arg cluster_add_args[] = {
    {"id", "integer", NULL, 0, NULL, 0},
    {"raft-addr", "string", NULL, 0, NULL, 0},
    {"client-addr", "string", NULL, 0, NULL, 0},
};
static const fence_compat_arg id_arg[] = {
    {"id", "integer", NULL, 0, NULL, 0},
};
static const fence_compat_arg id_opt_arg[] = {
    {"id", "integer", NULL, OPT, NULL, 0},
};

const fence_compat_command fence__server_commands[] = {
    {"PING", -1, LOCAL, "connection", "0.1.0",
     "Liveness check: PONG, or the message.", ARGS(ping_args), NULL, 0,
     CONN, 0, 2, OP_PING},
    {"LEASE.GRANT", -2, LOGGED, "lease", "0.1.0",
     "Creates a lease of ttl_ms milliseconds; replies its id.", ARGS(grant_args), NULL, 0,
     LEASE | W, 0, 6, OP_GRANT},
    {"LEASE.KEEPALIVE", 2, LOGGED, "lease", "0.1.0",
     "Renews a lease for its full TTL; replies the TTL.", ARGS(lease_arg), NULL, 0,
     LEASE | W, 0, 2, OP_KEEPALIVE},
    {"LEASE.REVOKE", 2, LOGGED, "lease", "0.1.0",
     "Ends a lease now and releases its locks.", ARGS(lease_arg), NULL, 0,
     LEASE | W, 0, 2, OP_REVOKE},
    {"LEASE.INFO", 2, READ, "lease", "0.1.0",
     "Replies [ttl_ms, remaining_ms, locks_held] of a lease.", ARGS(lease_arg), NULL, 0,
     LEASE | R, 0, 2, OP_LEASE_INFO},
    {"LOCK", -3, LOGGED | FENCE_COMPAT_CMD_BLOCKING, "lock", "0.1.0",
     "Locks name for a lease (SHARED: a shared hold); replies the fencing token, or nil "
     "when busy.",
     ARGS(lock_args), NULL, 0,
     LOCK | W, 1, 9, OP_LOCK},
    {"UNLOCK", -3, LOGGED, "lock", "0.1.0",
     "Releases name if token is its holder's (LEASE: that holder of a shared lock); "
     "replies 1 or 0.", ARGS(unlock_args), NULL, 0,
     LOCK | W, 1, 5, OP_UNLOCK},
    {"LOCK.INFO", 2, READ, "lock", "0.1.0",
     "Replies [token, lease, remaining_ms, waiters] (shared: then \"shared\" and "
     "[[lease, remaining_ms]...]), or nil when free.", ARGS(name_arg),
     NULL, 0,
     LOCK | R, 1, 2, OP_LOCK_INFO},
    {"ACQUIRE", -3, LOGGED | FENCE_COMPAT_CMD_BLOCKING, "lock", "0.1.0",
     "Grants a lease and locks name with it; replies [token, lease] or nil.",
     ARGS(acquire_args), NULL, 0,
     LOCK | LEASE | W, 1, 11, OP_ACQUIRE},
    {"SEM.ACQUIRE", -4, LOGGED | FENCE_COMPAT_CMD_BLOCKING, "semaphore", "0.1.0",
     "Takes the lowest free of n slots for a lease (or TTL ms: a lease of its own); "
     "replies [slot, token] ([slot, token, lease] with TTL) or nil.",
     ARGS(sem_acquire_args), NULL, 0,
     LOCK | LEASE | W, 1, 12, OP_SEM_ACQUIRE},
    {"SEM.RELEASE", 4, LOGGED, "semaphore", "0.1.0",
     "Frees slot of semaphore name if token is its holder's; replies 1 or 0.",
     ARGS(sem_release_args), NULL, 0,
     LOCK | W, 1, 4, OP_SEM_RELEASE},
    {"SEM.INFO", 2, READ, "semaphore", "0.1.0",
     "Replies [n, [[slot, token, lease, remaining_ms]...], waiters], or nil.",
     ARGS(name_arg), NULL, 0,
     LOCK | R, 1, 2, OP_SEM_INFO},
    /* The multi-locks: every name (argument 2 on, up to the first option
     * word) is a key the user's ~patterns must allow. */
    {"LOCK.MULTI", -3, LOGGED | FENCE_COMPAT_CMD_BLOCKING, "lock", "0.1.0",
     "Locks every name for a lease, all or none, with one token; replies it, or nil.",
     ARGS(lock_multi_args), NULL, 0,
     LOCK | W, 2, 2 + FENCE_MULTI_NAMES_MAX + 5, OP_LOCK_MULTI, FENCE_COMPAT_KEYS_REST},
    {"ACQUIRE.MULTI", -3, LOGGED | FENCE_COMPAT_CMD_BLOCKING, "lock", "0.1.0",
     "Grants a lease and locks every name with it, all or none; replies [token, lease] or "
     "nil.",
     ARGS(acquire_multi_args), NULL, 0,
     LOCK | LEASE | W, 2, 2 + FENCE_MULTI_NAMES_MAX + 7, OP_ACQUIRE_MULTI,
     FENCE_COMPAT_KEYS_REST},
    {"ELECTION.CAMPAIGN", -4, LOGGED | FENCE_COMPAT_CMD_BLOCKING, "lock", "0.1.0",
     "Queues a lease as a candidate for name; replies [token, lease] once elected.",
     ARGS(campaign_args), NULL, 0,
     LOCK | W, 1, 9, OP_CAMPAIGN},
    {"ELECTION.PROCLAIM", 4, LOGGED, "lock", "0.1.0",
     "The leader (its token) sets a new value; replies the new revision, or 0.",
     ARGS(proclaim_args), NULL, 0,
     LOCK | W, 1, 4, OP_PROCLAIM},
    {"ELECTION.RESIGN", 3, LOGGED, "lock", "0.1.0",
     "The leader (its token) steps down; replies 1 or 0.", ARGS(unlock_args), NULL, 0,
     LOCK | W, 1, 3, OP_RESIGN},
    {"ELECTION.LEADER", 2, READ, "lock", "0.1.0",
     "Replies [value, token, lease, revision] of the leader, or nil.", ARGS(name_arg),
     NULL, 0,
     LOCK | R, 1, 2, OP_ELECT_LEADER},
    {"ELECTION.OBSERVE", -2, FENCE_COMPAT_CMD_READONLY | FENCE_COMPAT_CMD_BLOCKING, "lock",
     "0.1.0",
     "The first state with a revision above AFTER: [value|nil, token, lease, revision]; "
     "waits up to WAIT ms, then nil.",
     ARGS(observe_args), NULL, 0,
     LOCK | R, 1, 6, OP_OBSERVE},
    {"INFO", -1, LOCAL, "server", "0.1.0",
     "Server state and counters, one key:value a line.", ARGS(info_args), NULL, 0,
     CONN | R, 0, 2, OP_INFO},
    {"LOCK.LIST", -1, READ, "lock", "0.1.0",
     "Lists locks in token order: [cursor, [[name, token, lease, remaining_ms, waiters]...]].",
     NO_ARGS, NULL, 0,
     LOCK | R, 0, 6, OP_LIST},
    {"LEASE.LIST", -1, READ, "lease", "0.1.0",
     "Lists leases in id order: [cursor, [[id, ttl_ms, remaining_ms, locks, waits]...]].",
     NO_ARGS, NULL, 0,
     LEASE | R, 0, 5, OP_LIST},
    {"HEALTH", 1, LOCAL, "server", "0.1.0",
     "Whether this node can serve writes: +<why>, or -UNAVAILABLE <why>.", NO_ARGS, NULL, 0,
     CONN | R, 0, 1, OP_HEALTH},
    {"QUIT", 1, LOCAL, "connection", "0.1.0",
     "Closes the connection after the earlier replies.", NO_ARGS, NULL, 0,
     CONN, 0, 1, OP_INTERNAL},
    {"CLUSTER.INFO", 1, LOCAL, "cluster", "0.1.0",
     "This node's view of the cluster.", NO_ARGS, NULL, 0,
     ADMIN | R, 0, 1, OP_CLUSTER},
    {"CLUSTER.ADD", 4, FENCE_COMPAT_CMD_WRITE | FENCE_COMPAT_CMD_ADMIN, "cluster", "0.1.0",
     "Adds node id (started with --join 1) as a voter.", ARGS(cluster_add_args), NULL, 0,
     ADMIN | W, 0, 4, OP_CLUSTER},
    {"CLUSTER.REMOVE", 2, FENCE_COMPAT_CMD_WRITE | FENCE_COMPAT_CMD_ADMIN, "cluster",
     "0.1.0", "Removes node id from the cluster.", ARGS(id_arg), NULL, 0,
     ADMIN | W, 0, 2, OP_CLUSTER},
    {"CLUSTER.TRANSFER", -1, FENCE_COMPAT_CMD_ADMIN, "cluster", "0.1.0",
     "Hands leadership to node id (or any other voter).", ARGS(id_opt_arg), NULL, 0,
     ADMIN | W, 0, 2, OP_CLUSTER},
};

const size_t fence__server_commands_n =
    sizeof(fence__server_commands) / sizeof(fence__server_commands[0]);
