/* Fuzz target for the ACL file parser (src/auth/acl.c) and the request
 * gate (src/daemon/acl_srv.c).
 *
 * An input that starts with '*' or '!' is a client's byte stream for the
 * gate (mode 2, below); any other input is an ACL file.  Properties of an
 * ACL file:
 *   - the parser either accepts it or fails with "acl:<line>: reason" (or
 *     out of memory), and a refused file yields no ACL;
 *   - every accepted user's ACL LIST line parses back to a user whose line
 *     is the same (describe is a fixed point) and who has the same rights
 *     for a few commands and names, and the same limits (maxleases,
 *     maxlocks, maxconns, each at most FENCE_ACL_QUOTA_MAX);
 *   - glob matching of every pattern against a few names terminates.
 * Mode 2 (the gate, with a fixed ACL and one connection state): the
 * stream is parsed request by request; a connection that is not logged in
 * gets only AUTH, HELLO ... AUTH u p, PING and QUIT through, everything
 * else (a HELLO without AUTH too) -NOAUTH; ACL LOG [n|RESET] answers;
 * every answer is one RESP reply; a logged-in user never gets a command
 * outside its rules through.  AUTH is checked with the real callback and
 * the connection is logged in as compat would on success.
 */
#include <stdio.h>
#include <string.h>

#include <strings.h>

#include "auth/acl.h"
#include "daemon/acl_srv.h"
#include "../lib/cmd_cats.h"
#include "fuzz.h"
#include "proto/resp.h"

/* Names and commands the round trip compares. */
static const char *names[] = {"", "orders", "orders:1", "a", "x*y", "[", "billing"};
static const char *cmds[] = {"LOCK", "UNLOCK", "CLUSTER.REMOVE", "FSET", "FENCE.ADMIT", "PING"};

/* The fixed ACL of mode 2, loaded once. */
static fence_acl_srv gate_srv;
static bool gate_ready;
static fence_resp_msg gate_msg;

/* Whether a HELLO request carries "AUTH u p" after its protocol version. */
static bool hello_auth(const fence_resp_msg *m)
{
    for (uint32_t i = 2; i + 2 < m->argc; i++)
        if (m->argv[i].len == 4 && strncasecmp(m->argv[i].ptr, "AUTH", 4) == 0)
            return true;
    return false;
}

/* Mode 2: the gate over a request stream. */
static void fuzz_gate(const char *p, size_t n)
{
    if (!gate_ready) {
        static const char text[] = "user alice on >pw ~orders:* +@all -@admin\n"
                                   "user root on >r ~* +@all\n";
        fence_acl *acl = NULL;
        char err[128];
        FUZZ_CHECK(fence_acl_parse(text, sizeof(text) - 1, "gate", &acl, err, sizeof(err)) == 0);
        gate_srv.acl = acl;
        fence__acl_srv_set_commands(&gate_srv, fence__server_commands, fence__server_commands_n);
        gate_srv.path = NULL;
        gate_srv.loads = 1;
        gate_ready = true;
    }
    fence_compat_conn cc;
    fence_compat_conn_init(&cc, 1);
    fence_resp_limits lim;
    fence_resp_limits_default(&lim);
    size_t off = 0;
    while (off < n) {
        ssize_t r = fence_resp_parse(p + off, n - off, &lim, &gate_msg);
        if (r <= 0)
            break;
        off += (size_t)r;
        if (gate_msg.argc == 0)
            continue;
        bool was_in = cc.authenticated;
        fence_acl_out out;
        bool answered = fence__acl_srv_gate(&gate_srv, &cc, &gate_msg, &out);
        const fence_resp_arg *a0 = &gate_msg.argv[0];
        bool free_cmd = (a0->len == 4 && (strncasecmp(a0->ptr, "AUTH", 4) == 0 ||
                                          strncasecmp(a0->ptr, "PING", 4) == 0 ||
                                          strncasecmp(a0->ptr, "QUIT", 4) == 0)) ||
                        (a0->len == 5 && strncasecmp(a0->ptr, "HELLO", 5) == 0 &&
                         hello_auth(&gate_msg));
        if (!was_in) {
            FUZZ_CHECK(answered == !free_cmd);
            if (answered)
                FUZZ_CHECK(out.len > 7 && memcmp(out.ptr, "-NOAUTH ", 8) == 0);
        }
        if (answered) {
            FUZZ_CHECK(out.len >= 3);
            FUZZ_CHECK(out.ptr[out.len - 2] == '\r' && out.ptr[out.len - 1] == '\n');
            FUZZ_CHECK(strchr("-+$*:", out.ptr[0]) != NULL);
        }
        fence__acl_out_free(&out);
        /* AUTH user pass, as the compat module would run it. */
        if (a0->len == 4 && strncasecmp(a0->ptr, "AUTH", 4) == 0 && gate_msg.argc == 3 &&
            gate_msg.argv[1].len < sizeof(cc.user) &&
            fence__acl_srv_auth(&gate_srv, &cc, NULL, &gate_msg.argv[1], &gate_msg.argv[2]) == 0) {
            cc.authenticated = true;
            memcpy(cc.user, gate_msg.argv[1].ptr, gate_msg.argv[1].len);
            cc.user[gate_msg.argv[1].len] = '\0';
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 0 && (data[0] == '*' || data[0] == '!')) {
        fuzz_gate((const char *)data + (data[0] == '!'), size - (data[0] == '!'));
        return 0;
    }
    fence_acl *acl = NULL;
    char err[320];
    int rc = fence_acl_parse((const char *)data, size, "acl", &acl, err, sizeof(err));
    if (rc != 0) {
        FUZZ_CHECK(acl == NULL);
        FUZZ_CHECK(strncmp(err, "acl:", 4) == 0 || strcmp(err, "out of memory") == 0);
        return 0;
    }
    FUZZ_CHECK(acl != NULL);
    static char line[64 * 1024], line2[64 * 1024];
    for (size_t i = 0; i < fence_acl_count(acl); i++) {
        const fence_acl_user *u = fence_acl_user_at(acl, i);
        size_t need = fence_acl_user_describe(u, line, sizeof(line));
        if (need >= sizeof(line))
            continue;
        fence_acl *again = NULL;
        char err2[320];
        int rc2 = fence_acl_parse(line, strlen(line), "again", &again, err2, sizeof(err2));
        if (rc2 != 0 && strstr(err2, "longer than") != NULL)
            continue; /* the line form may exceed FENCE_ACL_LINE_MAX */
        FUZZ_CHECK(rc2 == 0);
        FUZZ_CHECK(fence_acl_count(again) == 1);
        const fence_acl_user *v = fence_acl_user_at(again, 0);
        fence_acl_user_describe(v, line2, sizeof(line2));
        FUZZ_CHECK(strcmp(line, line2) == 0);
        FUZZ_CHECK(fence_acl_user_on(u) == fence_acl_user_on(v));
        for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++)
            FUZZ_CHECK(fence_acl_key_allowed(u, names[k], strlen(names[k])) ==
                       fence_acl_key_allowed(v, names[k], strlen(names[k])));
        for (size_t k = 0; k < sizeof(cmds) / sizeof(cmds[0]); k++) {
            uint32_t cats = test_cmd_cats(cmds[k], NULL);
            FUZZ_CHECK(fence_acl_cmd_allowed(u, cmds[k], cats) ==
                       fence_acl_cmd_allowed(v, cmds[k], cats));
        }
        FUZZ_CHECK(fence_acl_is_admin(u) == fence_acl_is_admin(v));
        fence_acl_limits lu, lv;
        fence_acl_user_limits(u, &lu);
        fence_acl_user_limits(v, &lv);
        FUZZ_CHECK(lu.leases == lv.leases && lu.locks == lv.locks && lu.conns == lv.conns);
        FUZZ_CHECK(lu.leases <= FENCE_ACL_QUOTA_MAX && lu.locks <= FENCE_ACL_QUOTA_MAX &&
                   lu.conns <= FENCE_ACL_QUOTA_MAX);
        fence_acl_free(again);
    }
    fence_acl_free(acl);
    return 0;
}
