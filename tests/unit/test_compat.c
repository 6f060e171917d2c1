/* Unit tests of the Redis-client compatibility module (src/daemon/compat*.c):
 * what redis-py, ioredis, node-redis and redis-cli send on connect (HELLO,
 * AUTH, CLIENT, SELECT, ECHO, TIME, RESET), COMMAND and its subcommands
 * over both daemons' tables, the refused-transaction state machine (no
 * command inside a refused MULTI is ever passed to the daemon), the reply
 * buffer's limits, the INFO builder, and the well-formedness of fenced's
 * and fence-store's command tables. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/compat.h"
#include "server/commands_table.h"
#include "store/commands_table.h"
#include "../lib/resp_check.h"
#include "../lib/test.h"

/* Messages are large (FENCE_INLINE_MAX of scratch): share static ones. */
static fence_resp_msg msg;
static fence_compat_reply out;
static fence_compat_conn conn;
/* The last reply as a NUL-terminated string (replies here hold no NUL). */
static char got[1 << 16];

/* A fake wall clock for TIME. */
static uint64_t fake_wall(void *arg)
{
    (void)arg;
    return 1700000000123456ULL;
}

/* fenced's context, as the daemon would fill it (no list callback). */
static fence_compat_ctx ctx_fenced(void)
{
    fence_compat_ctx c = {
        .server = "fenced",
        .version = "0.1.0",
        .commands = fence__server_commands,
        .n_commands = fence__server_commands_n,
        .wall_us = fake_wall,
    };
    return c;
}

static fence_compat_ctx ctx;

/* Parse one inline line (quotes allowed) into msg and hand it to the
 * module with conn; the reply lands in out and got. */
static int run(const char *line)
{
    char buf[4096];
    size_t n = (size_t)snprintf(buf, sizeof(buf), "%s\r\n", line);
    ssize_t used = fence_resp_parse(buf, n, NULL, &msg);
    REQUIRE(used == (ssize_t)n);
    REQUIRE(msg.argc > 0);
    int rc = fence_compat_handle(&ctx, &conn, &msg, &out);
    size_t k = out.len < sizeof(got) - 1 ? out.len : sizeof(got) - 1;
    memcpy(got, out.ptr, k);
    got[k] = '\0';
    if (rc == FENCE_COMPAT_REPLIED) {
        CHECK(out.len > 0);
        /* The reply is in the protocol in force after the command. */
        if (conn.resp == 3)
            CHECK(resp3_check_all(out.ptr, out.len));
        else
            CHECK(resp_check_all(out.ptr, out.len));
    } else {
        CHECK_EQ_U64(rc, FENCE_COMPAT_PASS);
        CHECK_EQ_U64(out.len, 0);
    }
    return rc;
}

/* Fresh state before each case (each runs in its own process anyway). */
static void setup(void)
{
    ctx = ctx_fenced();
    fence_compat_conn_init(&conn, 7);
    fence_compat_reply_init(&out);
}

/* Whether the reply starts with prefix. */
static bool starts(const char *prefix)
{
    return strncmp(got, prefix, strlen(prefix)) == 0;
}

/* ---- pass-through --------------------------------------------------------- */

static void test_daemon_commands_pass(void)
{
    setup();
    const char *lines[] = {"LOCK orders 1", "PING", "QUIT", "INFO", "lease.grant 100",
                           "FSET f 1 k v", "CLIENTS", "MULTIX", "EXECUTE"};
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
        CHECK_EQ_U64(run(lines[i]), FENCE_COMPAT_PASS);
    CHECK_EQ_U64(conn.tx, FENCE_COMPAT_TX_NONE);
    CHECK_STR(conn.name, "");
}

/* ---- HELLO ----------------------------------------------------------------- */

static void test_hello(void)
{
    setup();
    CHECK_EQ_U64(run("HELLO"), FENCE_COMPAT_REPLIED);
    CHECK_STR(got, "*14\r\n$6\r\nserver\r\n$6\r\nfenced\r\n$7\r\nversion\r\n$5\r\n0.1.0\r\n"
                   "$5\r\nproto\r\n:2\r\n$2\r\nid\r\n:7\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n"
                   "$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n");
    run("hello 2");
    CHECK(starts("*14\r\n"));
    run("HELLO 1");
    CHECK_STR(got, "-NOPROTO unsupported protocol version (this server speaks RESP2 and "
                   "RESP3: HELLO 2 or HELLO 3)\r\n");
    run("HELLO 4 SETNAME x");
    CHECK(starts("-NOPROTO"));
    CHECK_STR(conn.name, "");
    run("HELLO two");
    CHECK_STR(got, "-ERR Protocol version is not an integer or out of range\r\n");
    run("HELLO 2 BOGUS");
    CHECK_STR(got, "-ERR Syntax error in HELLO option 'BOGUS'\r\n");
    run("HELLO 2 SETNAME");
    CHECK(starts("-ERR Syntax error"));
    run("HELLO 2 AUTH onlyuser");
    CHECK(starts("-ERR Syntax error"));
    CHECK_EQ_U64(conn.resp, 2);
}

/* HELLO 3 switches the connection to RESP3: its own reply is a map, nil is
 * "_", COMMAND DOCS are maps and COMMAND INFO's flags sets, and every
 * RESP3 reply reads as the RESP2 one once its types are mapped back;
 * HELLO 2 and RESET switch back, HELLO without a version keeps it. */
static void test_hello3(void)
{
    setup();
    static char conv[1 << 17];
    const char *same[] = {"CLIENT GETNAME", "COMMAND INFO lock nope", "COMMAND DOCS",
                          "COMMAND DOCS lock client", "COMMAND", "ECHO hi", "SELECT 1",
                          "CLIENT ID", "TIME", "AUTH x", "MULTI", "PING", "EXEC"};
    static char r2[sizeof(same) / sizeof(same[0])][1 << 17];
    size_t n2[sizeof(same) / sizeof(same[0])];
    for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
        run(same[i]);
        REQUIRE(out.len < sizeof(r2[i]));
        n2[i] = out.len;
        memcpy(r2[i], out.ptr, n2[i]);
    }
    CHECK_EQ_U64(run("HELLO 3 SETNAME w3"), FENCE_COMPAT_REPLIED);
    CHECK_STR(got, "%7\r\n$6\r\nserver\r\n$6\r\nfenced\r\n$7\r\nversion\r\n$5\r\n0.1.0\r\n"
                   "$5\r\nproto\r\n:3\r\n$2\r\nid\r\n:7\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n"
                   "$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n");
    CHECK_EQ_U64(conn.resp, 3);
    CHECK_STR(conn.name, "w3");
    run("CLIENT SETNAME \"\"");
    for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
        run(same[i]);
        CHECK(resp3_check_all(out.ptr, out.len));
        long k = resp3_to_resp2(out.ptr, out.len, conv, sizeof(conv));
        CHECK(k > 0);
        if (n2[i] > 0 && k > 0 && strcmp(same[i], "TIME") != 0) {
            CHECK_EQ_U64((uint64_t)k, n2[i]);
            CHECK(memcmp(conv, r2[i], n2[i]) == 0);
        }
    }
    run("CLIENT GETNAME");
    CHECK_STR(got, "_\r\n");
    run("COMMAND INFO nope");
    CHECK_STR(got, "*1\r\n_\r\n");
    run("COMMAND DOCS echo");
    CHECK(starts("%1\r\n$4\r\necho\r\n%4\r\n$7\r\nsummary\r\n"));
    run("COMMAND INFO echo");
    CHECK(starts("*1\r\n*10\r\n$4\r\necho\r\n:2\r\n~3\r\n+fast\r\n"));
    run("HELLO");
    CHECK(starts("%7\r\n"));
    CHECK_EQ_U64(conn.resp, 3);
    run("HELLO 4");
    CHECK(starts("-NOPROTO"));
    CHECK_EQ_U64(conn.resp, 3);
    run("HELLO 2");
    CHECK(starts("*14\r\n"));
    CHECK_EQ_U64(conn.resp, 2);
    run("CLIENT GETNAME");
    CHECK_STR(got, "$-1\r\n");
    run("HELLO 3");
    CHECK_EQ_U64(conn.resp, 3);
    run("RESET");
    CHECK_STR(got, "+RESET\r\n");
    CHECK_EQ_U64(conn.resp, 2);
    run("CLIENT GETNAME");
    CHECK_STR(got, "$-1\r\n");
}

/* A refused HELLO 3 (bad AUTH, bad name, bad option) leaves the protocol. */
static void test_hello3_refused(void)
{
    setup();
    run("HELLO 3 AUTH u p");
    CHECK(starts("-ERR AUTH <username> <password> called"));
    CHECK_EQ_U64(conn.resp, 2);
    run("HELLO 3 SETNAME \"a b\"");
    CHECK(starts("-ERR Client names"));
    CHECK_EQ_U64(conn.resp, 2);
    run("HELLO 3 BOGUS");
    CHECK(starts("-ERR Syntax error"));
    CHECK_EQ_U64(conn.resp, 2);
    run("MULTI");
    run("HELLO 3");
    CHECK(starts("-ERR not executed"));
    CHECK_EQ_U64(conn.resp, 2);
}

static void test_hello_setname(void)
{
    setup();
    run("HELLO 2 SETNAME worker-1");
    CHECK(starts("*14\r\n"));
    CHECK_STR(conn.name, "worker-1");
    run("HELLO 2 SETNAME \"bad name\"");
    CHECK(starts("-ERR Client names cannot contain spaces"));
    CHECK_STR(conn.name, "worker-1");
}

static void test_hello_auth_without_users(void)
{
    setup();
    /* AUTH fails, so SETNAME given with it must not be applied either. */
    run("HELLO 2 AUTH default secret SETNAME n1");
    CHECK(starts("-ERR AUTH <username> <password> called, but this server has no users"));
    CHECK_STR(conn.name, "");
    CHECK(!conn.authenticated);
}

/* An auth callback that accepts user "ops" with password "pw". */
static int fake_auth(void *arg, fence_compat_conn *c, const fence_resp_arg *user,
                     const fence_resp_arg *pass)
{
    (void)arg;
    (void)c;
    bool u = user == NULL || (user->len == 3 && memcmp(user->ptr, "ops", 3) == 0);
    return u && pass->len == 2 && memcmp(pass->ptr, "pw", 2) == 0 ? 0 : -1;
}

static void test_hello_auth_with_callback(void)
{
    setup();
    ctx.auth = fake_auth;
    run("HELLO 2 AUTH ops nope SETNAME n1");
    CHECK_STR(got, "-WRONGPASS invalid username-password pair or user is disabled.\r\n");
    CHECK_STR(conn.name, "");
    run("HELLO 2 AUTH ops pw SETNAME n1");
    CHECK(starts("*14\r\n"));
    CHECK_STR(conn.name, "n1");
    CHECK(conn.authenticated);
    CHECK_STR(conn.user, "ops");
}

/* HELLO 3 AUTH ... SETNAME: a wrong password keeps RESP2, the right one
 * logs in, names the connection and switches to RESP3 in one step. */
static void test_hello3_auth_with_callback(void)
{
    setup();
    ctx.auth = fake_auth;
    run("HELLO 3 AUTH ops nope SETNAME n3");
    CHECK_STR(got, "-WRONGPASS invalid username-password pair or user is disabled.\r\n");
    CHECK_EQ_U64(conn.resp, 2);
    CHECK(!conn.authenticated);
    CHECK_STR(conn.name, "");
    run("HELLO 3 AUTH ops pw SETNAME n3");
    CHECK(starts("%7\r\n"));
    CHECK(strstr(got, "$5\r\nproto\r\n:3\r\n") != NULL);
    CHECK_EQ_U64(conn.resp, 3);
    CHECK(conn.authenticated);
    CHECK_STR(conn.user, "ops");
    CHECK_STR(conn.name, "n3");
}

/* ---- AUTH ------------------------------------------------------------------ */

static void test_auth_without_users(void)
{
    setup();
    run("AUTH secret");
    /* redis-py maps this exact sentence to AuthenticationError. */
    CHECK_STR(got, "-ERR AUTH <password> called without any password configured for the "
                   "default user. Are you sure your configuration is correct?\r\n");
    run("AUTH default secret");
    CHECK(starts("-ERR AUTH <username> <password> called"));
    run("AUTH a b c");
    CHECK_STR(got, "-ERR syntax error\r\n");
    run("AUTH");
    CHECK_STR(got, "-ERR wrong number of arguments for 'auth' command\r\n");
    CHECK(!conn.authenticated);
}

static void test_auth_with_callback(void)
{
    setup();
    ctx.auth = fake_auth;
    run("AUTH wrong");
    CHECK(starts("-WRONGPASS"));
    run("AUTH pw");
    CHECK_STR(got, "+OK\r\n");
    CHECK_STR(conn.user, "default");
    run("AUTH ops pw");
    CHECK_STR(got, "+OK\r\n");
    CHECK_STR(conn.user, "ops");
    run("AUTH \"bad user\" pw");
    CHECK(starts("-WRONGPASS"));
}

/* ---- CLIENT ---------------------------------------------------------------- */

static void test_client_name(void)
{
    setup();
    run("CLIENT GETNAME");
    CHECK_STR(got, "$-1\r\n");
    run("client setname app-7");
    CHECK_STR(got, "+OK\r\n");
    run("CLIENT GETNAME");
    CHECK_STR(got, "$5\r\napp-7\r\n");
    run("CLIENT SETNAME \"a b\"");
    CHECK_STR(got, "-ERR Client names cannot contain spaces, newlines or special "
                   "characters.\r\n");
    run("CLIENT SETNAME \"a\\nb\"");
    CHECK(starts("-ERR Client names cannot"));
    CHECK_STR(conn.name, "app-7");
    /* An empty name clears it, as in Redis. */
    run("CLIENT SETNAME \"\"");
    CHECK_STR(got, "+OK\r\n");
    run("CLIENT GETNAME");
    CHECK_STR(got, "$-1\r\n");
    char line[400];
    char longname[FENCE_COMPAT_NAME_MAX + 2];
    memset(longname, 'n', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    snprintf(line, sizeof(line), "CLIENT SETNAME %s", longname);
    run(line);
    CHECK(starts("-ERR client name is longer than 128 bytes"));
    longname[FENCE_COMPAT_NAME_MAX] = '\0';
    snprintf(line, sizeof(line), "CLIENT SETNAME %s", longname);
    run(line);
    CHECK_STR(got, "+OK\r\n");
    CHECK_EQ_U64(strlen(conn.name), FENCE_COMPAT_NAME_MAX);
}

static void test_client_id_setinfo(void)
{
    setup();
    run("CLIENT ID");
    CHECK_STR(got, ":7\r\n");
    run("CLIENT SETINFO LIB-NAME redis-py");
    CHECK_STR(got, "+OK\r\n");
    run("CLIENT SETINFO lib-ver 5.0.1");
    CHECK_STR(got, "+OK\r\n");
    CHECK_STR(conn.lib_name, "redis-py");
    CHECK_STR(conn.lib_ver, "5.0.1");
    run("CLIENT SETINFO LIB-NAME \"has space\"");
    CHECK_STR(got, "-ERR lib-name cannot contain spaces, newlines or special "
                   "characters.\r\n");
    run("CLIENT SETINFO COLOR red");
    CHECK_STR(got, "-ERR Unrecognized option 'COLOR'\r\n");
    run("CLIENT SETINFO LIB-NAME");
    CHECK_STR(got, "-ERR wrong number of arguments for 'client|setinfo' command\r\n");
    CHECK_STR(conn.lib_name, "redis-py");
}

static void test_client_unknown_and_help(void)
{
    setup();
    run("CLIENT KILL 1.2.3.4:5");
    CHECK_STR(got, "-ERR unknown subcommand 'KILL'. Try CLIENT HELP.\r\n");
    run("CLIENT");
    CHECK_STR(got, "-ERR wrong number of arguments for 'client' command\r\n");
    run("CLIENT ID extra");
    CHECK_STR(got, "-ERR wrong number of arguments for 'client|id' command\r\n");
    run("CLIENT HELP");
    CHECK(starts("*"));
    CHECK(strstr(got, "SETNAME <name>") != NULL);
}

/* A daemon with three connections: ids 7 (the caller), 8 and 9. */
static fence_compat_conn others[2];
static void fake_list(void *arg, fence_compat_emit_fn emit, void *emit_arg)
{
    (void)arg;
    fence_compat_client_info ci = {
        .conn = &conn, .addr = "127.0.0.1:5000", .laddr = "127.0.0.1:7700", .fd = 9,
        .age_s = 3, .idle_s = 1, .cmd = "client|list"};
    emit(emit_arg, &ci);
    for (int i = 0; i < 2; i++) {
        fence_compat_client_info o = {
            .conn = &others[i], .addr = i ? "127.0.0.1:5002" : "127.0.0.1:5001",
            .laddr = "127.0.0.1:7700", .fd = 10 + i};
        emit(emit_arg, &o);
    }
}

/* Count lines (by "\n") in got. */
static int lines_in_got(void)
{
    int n = 0;
    for (const char *p = got; *p; p++)
        n += *p == '\n';
    return n;
}

static void test_client_list(void)
{
    setup();
    ctx.list = fake_list;
    fence_compat_conn_init(&others[0], 8);
    fence_compat_conn_init(&others[1], 9);
    strcpy(others[1].name, "keeper");
    run("CLIENT SETNAME me");
    run("CLIENT LIST");
    CHECK(starts("$"));
    /* "$N\r\n" then three "\n"-terminated lines, then "\r\n". */
    CHECK_EQ_U64(lines_in_got(), 5);
    CHECK(strstr(got, "id=7 addr=127.0.0.1:5000 laddr=127.0.0.1:7700 fd=9 name=me age=3 "
                      "idle=1 flags=N db=0") != NULL);
    CHECK(strstr(got, "id=9 addr=127.0.0.1:5002") != NULL);
    CHECK(strstr(got, "name=keeper") != NULL);
    CHECK(strstr(got, "cmd=client|list") != NULL);
    run("CLIENT LIST ID 9 8");
    CHECK_EQ_U64(lines_in_got(), 4);
    CHECK(strstr(got, "id=7 ") == NULL);
    run("CLIENT LIST TYPE normal");
    CHECK_EQ_U64(lines_in_got(), 5);
    run("CLIENT LIST TYPE pubsub");
    CHECK_STR(got, "$0\r\n\r\n");
    run("CLIENT LIST TYPE bogus");
    CHECK_STR(got, "-ERR Unknown client type 'bogus'\r\n");
    run("CLIENT LIST ID x");
    CHECK_STR(got, "-ERR Invalid client ID\r\n");
    run("CLIENT LIST ID 0");
    CHECK_STR(got, "-ERR Invalid client ID\r\n");
    run("CLIENT LIST ID");
    CHECK_STR(got, "-ERR syntax error\r\n");
    run("CLIENT INFO");
    CHECK_EQ_U64(lines_in_got(), 3);
    CHECK(strstr(got, "id=7 ") != NULL);
    CHECK(strstr(got, "id=8 ") == NULL);
}

static void test_client_list_without_callback(void)
{
    setup();
    run("CLIENT SETINFO LIB-NAME ioredis");
    run("CLIENT LIST");
    CHECK_EQ_U64(lines_in_got(), 3);
    CHECK(strstr(got, "id=7 addr= laddr= fd=-1 name=") != NULL);
    CHECK(strstr(got, "lib-name=ioredis lib-ver=\n") != NULL);
}

/* Many connections: the reply moves to the heap, then passes the limit. */
static size_t n_fake;
static void many_list(void *arg, fence_compat_emit_fn emit, void *emit_arg)
{
    (void)arg;
    for (size_t i = 0; i < n_fake; i++) {
        fence_compat_client_info ci = {.conn = &conn, .addr = "127.0.0.1:5000",
                                       .laddr = "127.0.0.1:7700", .fd = 9};
        emit(emit_arg, &ci);
    }
}

static void test_client_list_big_and_too_big(void)
{
    setup();
    ctx.list = many_list;
    n_fake = 10000;
    run("CLIENT LIST");
    CHECK(!out.failed);
    CHECK(out.len > 1000000);
    CHECK(out.ptr != out.inline_buf);
    CHECK(resp_check_all(out.ptr, out.len));
    n_fake = 100000; /* ~25 MB of lines: over FENCE_COMPAT_REPLY_MAX */
    run("CLIENT LIST");
    CHECK(out.failed);
    CHECK_STR(got, "-ERR reply too large or out of memory\r\n");
    /* The buffer is reusable after a failure. */
    run("CLIENT ID");
    CHECK_STR(got, ":7\r\n");
    CHECK(!out.failed);
    fence_compat_reply_free(&out);
    CHECK(out.ptr == out.inline_buf);
}

/* ---- SELECT, ECHO, TIME, RESET ---------------------------------------------- */

static void test_select(void)
{
    setup();
    run("SELECT 0");
    CHECK_STR(got, "+OK\r\n");
    run("SELECT 1");
    CHECK_STR(got, "-ERR DB index is out of range (this server has only database 0)\r\n");
    run("SELECT -1");
    CHECK(starts("-ERR DB index is out of range"));
    run("SELECT zero");
    CHECK_STR(got, "-ERR value is not an integer or out of range\r\n");
    run("SELECT");
    CHECK_STR(got, "-ERR wrong number of arguments for 'select' command\r\n");
    run("SELECT 0 1");
    CHECK(starts("-ERR wrong number of arguments"));
    CHECK_EQ_U64(conn.db, 0);
}

static void test_echo_time(void)
{
    setup();
    run("ECHO hello");
    CHECK_STR(got, "$5\r\nhello\r\n");
    run("echo \"\"");
    CHECK_STR(got, "$0\r\n\r\n");
    /* redis-cli --pipe ends with ECHO of 20 random bytes. */
    run("ECHO \"\\x00\\x01\\xff\\r\\n\"");
    CHECK_EQ_U64(out.len, 4 + 5 + 2);
    run("ECHO");
    CHECK_STR(got, "-ERR wrong number of arguments for 'echo' command\r\n");
    run("TIME");
    CHECK_STR(got, "*2\r\n$10\r\n1700000000\r\n$6\r\n123456\r\n");
    ctx.wall_us = NULL;
    run("TIME");
    CHECK(starts("-ERR TIME is not available"));
}

static void test_reset(void)
{
    setup();
    ctx.auth = fake_auth;
    run("CLIENT SETNAME n");
    run("AUTH ops pw");
    run("MULTI");
    run("RESET");
    CHECK_STR(got, "+RESET\r\n");
    CHECK_STR(conn.name, "");
    CHECK_EQ_U64(conn.tx, FENCE_COMPAT_TX_NONE);
    CHECK(!conn.authenticated);
    CHECK_STR(conn.user, "");
    CHECK_EQ_U64(conn.id, 7);
    CHECK_EQ_U64(run("LOCK a 1"), FENCE_COMPAT_PASS);
}

/* ---- Transactions --------------------------------------------------------- */

static void test_multi_exec_refused(void)
{
    setup();
    run("MULTI");
    CHECK(starts("-ERR MULTI is refused"));
    CHECK_EQ_U64(conn.tx, FENCE_COMPAT_TX_REFUSED);
    /* Nothing reaches the daemon: not its commands, not connection ones. */
    const char *queued[] = {"LEASE.GRANT 10000", "LOCK orders 1", "FSET f 1 k v", "PING",
                            "INFO", "ECHO x", "CLIENT SETNAME inside", "SELECT 0",
                            "HELLO 2", "COMMAND", "UNWATCH", "NOSUCH"};
    for (size_t i = 0; i < sizeof(queued) / sizeof(queued[0]); i++) {
        CHECK_EQ_U64(run(queued[i]), FENCE_COMPAT_REPLIED);
        CHECK(starts("-ERR not executed: this connection is in a refused MULTI"));
    }
    CHECK_STR(conn.name, "");
    run("MULTI");
    CHECK_STR(got, "-ERR MULTI calls can not be nested\r\n");
    run("WATCH k");
    CHECK_STR(got, "-ERR WATCH inside MULTI is not allowed\r\n");
    CHECK_EQ_U64(conn.tx, FENCE_COMPAT_TX_REFUSED);
    CHECK_EQ_U64(run("EXEC"), FENCE_COMPAT_REPLIED);
    CHECK(starts("-EXECABORT Transaction discarded because of previous errors."));
    CHECK(strstr(got, "none of the 12 commands") != NULL);
    /* Back to normal. */
    CHECK_EQ_U64(conn.tx, FENCE_COMPAT_TX_NONE);
    CHECK_EQ_U64(run("LOCK orders 1"), FENCE_COMPAT_PASS);
    run("EXEC");
    CHECK_STR(got, "-ERR EXEC without MULTI\r\n");
}

static void test_multi_discard(void)
{
    setup();
    run("multi");
    CHECK_EQ_U64(run("lock a 1"), FENCE_COMPAT_REPLIED);
    run("DISCARD");
    CHECK_STR(got, "+OK\r\n");
    CHECK_EQ_U64(conn.tx, FENCE_COMPAT_TX_NONE);
    CHECK_EQ_U64(run("lock a 1"), FENCE_COMPAT_PASS);
    run("DISCARD");
    CHECK_STR(got, "-ERR DISCARD without MULTI\r\n");
}

static void test_multi_quit_passes(void)
{
    setup();
    run("MULTI");
    /* QUIT closes the connection (the daemon's command), as in Redis. */
    CHECK_EQ_U64(run("QUIT"), FENCE_COMPAT_PASS);
    CHECK_EQ_U64(conn.tx, FENCE_COMPAT_TX_REFUSED);
}

static void test_multi_arity_errors(void)
{
    setup();
    run("MULTI now");
    CHECK_STR(got, "-ERR wrong number of arguments for 'multi' command\r\n");
    CHECK_EQ_U64(conn.tx, FENCE_COMPAT_TX_NONE);
    run("WATCH");
    CHECK_STR(got, "-ERR wrong number of arguments for 'watch' command\r\n");
    run("WATCH a b");
    CHECK_STR(got, "-ERR WATCH is not supported: this server runs no transactions\r\n");
    run("UNWATCH");
    CHECK_STR(got, "+OK\r\n");
}

/* The byte stream redis-py's pipeline(transaction=True) writes, parsed
 * request by request as the daemon would: no request passes. */
static void test_multi_pipeline_stream(void)
{
    setup();
    const char stream[] = "*1\r\n$5\r\nMULTI\r\n"
                          "*2\r\n$11\r\nLEASE.GRANT\r\n$5\r\n10000\r\n"
                          "*3\r\n$4\r\nLOCK\r\n$1\r\na\r\n$1\r\n1\r\n"
                          "*1\r\n$4\r\nEXEC\r\n"
                          "*3\r\n$4\r\nLOCK\r\n$1\r\nb\r\n$1\r\n1\r\n";
    size_t off = 0, len = sizeof(stream) - 1;
    int passed = 0, replied = 0;
    const char *last_passed = NULL;
    while (off < len) {
        ssize_t n = fence_resp_parse(stream + off, len - off, NULL, &msg);
        REQUIRE(n > 0);
        int rc = fence_compat_handle(&ctx, &conn, &msg, &out);
        if (rc == FENCE_COMPAT_PASS) {
            passed++;
            last_passed = msg.argv[1].ptr;
        } else {
            replied++;
        }
        off += (size_t)n;
    }
    CHECK_EQ_U64(replied, 4);
    CHECK_EQ_U64(passed, 1);
    CHECK(last_passed != NULL && last_passed[0] == 'b');
}

/* ---- COMMAND ----------------------------------------------------------------- */

static void test_command_count_list(void)
{
    setup();
    size_t nb;
    fence_compat_builtin_commands(&nb);
    run("COMMAND COUNT");
    char want[32];
    snprintf(want, sizeof(want), ":%zu\r\n", fence__server_commands_n + nb);
    CHECK_STR(got, want);
    run("COMMAND LIST");
    CHECK(strstr(got, "$11\r\nlease.grant\r\n") != NULL);
    CHECK(strstr(got, "$5\r\nhello\r\n") != NULL);
    run("COMMAND");
    snprintf(want, sizeof(want), "*%zu\r\n", fence__server_commands_n + nb);
    CHECK(starts(want));
    run("COMMAND COUNT extra");
    CHECK_STR(got, "-ERR wrong number of arguments for 'command|count' command\r\n");
    run("COMMAND GETKEYS lock a 1");
    CHECK_STR(got, "-ERR unknown subcommand 'GETKEYS'. Try COMMAND HELP.\r\n");
    run("COMMAND HELP");
    CHECK(starts("*"));
}

static void test_command_info(void)
{
    setup();
    run("COMMAND INFO lock nosuch");
    CHECK(starts("*2\r\n*10\r\n$4\r\nlock\r\n:-3\r\n*2\r\n+write\r\n+blocking\r\n"
                 ":0\r\n:0\r\n:0\r\n"));
    CHECK(strstr(got, "$-1\r\n") != NULL);
    run("COMMAND INFO client");
    CHECK(strstr(got, "$14\r\nclient|setname\r\n:3\r\n") != NULL);
    run("COMMAND INFO client|id");
    CHECK(starts("*1\r\n*10\r\n$9\r\nclient|id\r\n:2\r\n"));
    run("COMMAND INFO client|nosuch");
    CHECK_STR(got, "*1\r\n$-1\r\n");
}

static void test_command_docs(void)
{
    setup();
    run("COMMAND DOCS LOCK nosuch");
    /* Unknown names are left out; the map is a flat array in RESP2. */
    CHECK(starts("*2\r\n$4\r\nlock\r\n*8\r\n$7\r\nsummary\r\n"));
    CHECK(strstr(got, "$5\r\ntoken\r\n$4\r\nWAIT\r\n$5\r\nflags\r\n*1\r\n+optional\r\n") !=
          NULL);
    CHECK(strstr(got, "$4\r\nname\r\n$5\r\nlease\r\n$4\r\ntype\r\n$7\r\ninteger\r\n") != NULL);
    run("COMMAND DOCS");
    CHECK(!out.failed);
    CHECK(strstr(got, "$11\r\nsubcommands\r\n") != NULL);
    CHECK(strstr(got, "$14\r\nclient|setname\r\n") != NULL);
    run("COMMAND DOCS nosuch");
    CHECK_STR(got, "*0\r\n");
}

/* fence-store's context: the same module over the other table. */
static void test_command_store_table(void)
{
    setup();
    ctx.server = "fence-store";
    ctx.commands = fence__store_commands;
    ctx.n_commands = fence__store_commands_n;
    run("HELLO");
    CHECK(strstr(got, "$11\r\nfence-store\r\n") != NULL);
    run("COMMAND INFO fset fence.admit lock");
    CHECK(starts("*3\r\n*10\r\n$4\r\nfset\r\n:5\r\n"));
    CHECK(strstr(got, "$11\r\nfence.admit\r\n:3\r\n") != NULL);
    CHECK(strstr(got, "$-1\r\n") != NULL); /* no LOCK in fence-store */
}

/* Check one table's entries: the shape redis-cli and clients rely on. */
static void check_args(const fence_compat_arg *a, size_t n)
{
    static const char *const types[] = {"string", "integer", "key", "pure-token", "block",
                                        "oneof", NULL};
    for (size_t i = 0; i < n; i++) {
        CHECK(a[i].name != NULL && a[i].name[0] != '\0');
        bool known = false;
        for (size_t t = 0; types[t] != NULL; t++)
            known |= strcmp(types[t], a[i].type) == 0;
        CHECK(known);
        bool nested = strcmp(a[i].type, "block") == 0 || strcmp(a[i].type, "oneof") == 0;
        CHECK(nested == (a[i].n_sub > 0));
        CHECK((a[i].flags & ~(FENCE_COMPAT_ARG_OPTIONAL | FENCE_COMPAT_ARG_MULTIPLE)) == 0);
        if (a[i].n_sub > 0)
            check_args(a[i].sub, a[i].n_sub);
    }
}

static void check_table(const fence_compat_command *t, size_t n, const char *parent)
{
    for (size_t i = 0; i < n; i++) {
        const char *name = t[i].name;
        CHECK(name != NULL && name[0] != '\0');
        for (const char *p = name; *p; p++)
            CHECK(!(*p >= 'a' && *p <= 'z'));
        if (parent != NULL)
            CHECK(strncmp(name, parent, strlen(parent)) == 0 && name[strlen(parent)] == '|');
        CHECK(t[i].arity != 0);
        CHECK(t[i].summary != NULL && strpbrk(t[i].summary, "\r\n") == NULL);
        CHECK(t[i].summary[0] != '\0');
        CHECK(t[i].since != NULL && t[i].group != NULL);
        /* Required words are at least the non-optional arguments. */
        int need = 1;
        for (size_t k = 0; k < t[i].n_args; k++)
            need += !(t[i].args[k].flags & FENCE_COMPAT_ARG_OPTIONAL);
        int arity = t[i].arity < 0 ? -t[i].arity : t[i].arity;
        if (parent == NULL && t[i].n_subs == 0)
            CHECK_EQ_I64(arity, need);
        check_args(t[i].args, t[i].n_args);
        for (size_t j = 0; j < i; j++)
            CHECK(strcmp(t[j].name, name) != 0);
        if (t[i].n_subs > 0)
            check_table(t[i].subs, t[i].n_subs, name);
    }
}

static void test_tables_well_formed(void)
{
    size_t nb;
    const fence_compat_command *b = fence_compat_builtin_commands(&nb);
    check_table(b, nb, NULL);
    check_table(fence__server_commands, fence__server_commands_n, NULL);
    check_table(fence__store_commands, fence__store_commands_n, NULL);
    /* No daemon command is shadowed by (or shadows) a builtin. */
    for (size_t i = 0; i < nb; i++) {
        for (size_t j = 0; j < fence__server_commands_n; j++)
            CHECK(strcmp(b[i].name, fence__server_commands[j].name) != 0);
        for (size_t j = 0; j < fence__store_commands_n; j++)
            CHECK(strcmp(b[i].name, fence__store_commands[j].name) != 0);
    }
}

/* Every builtin at every argument count from 1 to 6 replies exactly one
 * well-formed reply and never passes (except nothing: all are builtins). */
static void test_every_builtin_every_arity(void)
{
    setup();
    ctx.list = fake_list;
    fence_compat_conn_init(&others[0], 8);
    fence_compat_conn_init(&others[1], 9);
    size_t nb;
    const fence_compat_command *b = fence_compat_builtin_commands(&nb);
    const char *words[] = {"x", "2", "ID", "LIB-NAME", "0", "SETNAME"};
    for (size_t i = 0; i < nb; i++) {
        for (int argc = 1; argc <= 6; argc++) {
            char line[256];
            int n = snprintf(line, sizeof(line), "%s", b[i].name);
            for (int k = 1; k < argc; k++)
                n += snprintf(line + n, sizeof(line) - (size_t)n, " %s", words[k - 1]);
            int rc = run(line);
            CHECK_EQ_U64(rc, FENCE_COMPAT_REPLIED);
            run("DISCARD"); /* leave a MULTI that may have started */
        }
        for (size_t s = 0; s < b[i].n_subs; s++) {
            const char *sub = strchr(b[i].subs[s].name, '|') + 1;
            for (int argc = 2; argc <= 6; argc++) {
                char line[256];
                int n = snprintf(line, sizeof(line), "%s %s", b[i].name, sub);
                for (int k = 2; k < argc; k++)
                    n += snprintf(line + n, sizeof(line) - (size_t)n, " %s", words[k - 2]);
                CHECK_EQ_U64(run(line), FENCE_COMPAT_REPLIED);
            }
        }
    }
}

/* ---- INFO builder ------------------------------------------------------------- */

/* Build INFO for the request line with the standard sections and one of
 * the daemon's own. */
static void build_info(const char *line)
{
    char buf[256];
    size_t n = (size_t)snprintf(buf, sizeof(buf), "%s\r\n", line);
    REQUIRE(fence_resp_parse(buf, n, NULL, &msg) == (ssize_t)n);
    fence_compat_info b;
    fence_compat_info_begin(&b, &msg);
    fence_compat_info_std std = {.process_id = 42, .tcp_port = 7700, .uptime_s = 5,
                                 .connected_clients = 3, .max_clients = 10000};
    fence_compat_info_standard(&b, &ctx, &std);
    if (fence_compat_info_section(&b, "fenced")) {
        fence_compat_info_str(&b, "role", "leader\r\nevil:1");
        fence_compat_info_u64(&b, "last_token", 9);
        fence_compat_info_i64(&b, "delta", -4);
    }
    /* A daemon's own preformatted lines go only into a wanted section. */
    fence_compat_info_section(&b, "extra");
    fence_compat_info_lines(&b, "pre:1\r\nformatted:2\r\n", strlen("pre:1\r\nformatted:2\r\n"));
    CHECK_EQ_I64(fence_compat_info_finish(&b, &out), 0);
    CHECK(resp_check_all(out.ptr, out.len));
    size_t k = out.len < sizeof(got) - 1 ? out.len : sizeof(got) - 1;
    memcpy(got, out.ptr, k);
    got[k] = '\0';
}

static void test_info_builder(void)
{
    setup();
    build_info("INFO");
    CHECK(strstr(got, "\r\n# Server\r\nredis_version:7.0.0\r\nfenced_version:0.1.0\r\n") !=
          NULL);
    CHECK(strstr(got, "process_id:42\r\ntcp_port:7700\r\nuptime_in_seconds:5\r\n") != NULL);
    CHECK(strstr(got, "\r\n\r\n# Clients\r\nconnected_clients:3\r\nmaxclients:10000\r\n") !=
          NULL);
    CHECK(strstr(got, "# Persistence\r\nloading:0\r\n") != NULL);
    /* CR/LF in a value cannot forge a field. */
    CHECK(strstr(got, "role:leader  evil:1\r\n") != NULL);
    CHECK(strstr(got, "\r\nevil:1") == NULL);
    CHECK(strstr(got, "delta:-4\r\n") != NULL);
    build_info("INFO clients");
    CHECK(strstr(got, "# Server") == NULL);
    CHECK(strstr(got, "# Clients\r\nconnected_clients:3\r\n") != NULL);
    CHECK(strstr(got, "last_token") == NULL);
    build_info("INFO FENCED server");
    CHECK(strstr(got, "# Server") != NULL);
    CHECK(strstr(got, "last_token:9") != NULL);
    CHECK(strstr(got, "# Clients") == NULL);
    build_info("INFO everything");
    CHECK(strstr(got, "# Persistence") != NULL);
    CHECK(strstr(got, "\r\n\r\n# extra\r\npre:1\r\nformatted:2\r\n\r\n") != NULL);
    build_info("INFO extra");
    CHECK_STR(got, "$29\r\n# extra\r\npre:1\r\nformatted:2\r\n\r\n");
    build_info("INFO server");
    CHECK(strstr(got, "pre:1") == NULL);
    build_info("INFO nosuch");
    CHECK_STR(got, "$0\r\n\r\n");
    ctx.server = "fence-store";
    build_info("INFO server");
    CHECK(strstr(got, "fence_store_version:0.1.0") != NULL);
}

int main(void)
{
    TEST_RUN(test_daemon_commands_pass);
    TEST_RUN(test_hello);
    TEST_RUN(test_hello3);
    TEST_RUN(test_hello3_refused);
    TEST_RUN(test_hello_setname);
    TEST_RUN(test_hello_auth_without_users);
    TEST_RUN(test_hello_auth_with_callback);
    TEST_RUN(test_hello3_auth_with_callback);
    TEST_RUN(test_auth_without_users);
    TEST_RUN(test_auth_with_callback);
    TEST_RUN(test_client_name);
    TEST_RUN(test_client_id_setinfo);
    TEST_RUN(test_client_unknown_and_help);
    TEST_RUN(test_client_list);
    TEST_RUN(test_client_list_without_callback);
    TEST_RUN(test_client_list_big_and_too_big);
    TEST_RUN(test_select);
    TEST_RUN(test_echo_time);
    TEST_RUN(test_reset);
    TEST_RUN(test_multi_exec_refused);
    TEST_RUN(test_multi_discard);
    TEST_RUN(test_multi_quit_passes);
    TEST_RUN(test_multi_arity_errors);
    TEST_RUN(test_multi_pipeline_stream);
    TEST_RUN(test_command_count_list);
    TEST_RUN(test_command_info);
    TEST_RUN(test_command_docs);
    TEST_RUN(test_command_store_table);
    TEST_RUN(test_tables_well_formed);
    TEST_RUN(test_every_builtin_every_arity);
    TEST_RUN(test_info_builder);
    return TEST_DONE();
}
