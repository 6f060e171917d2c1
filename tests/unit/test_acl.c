/* src/auth/acl: the ACL file parser, logins, command and name checks. */
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth/acl.h"
#include "daemon/acl_srv.h"
#include "../lib/cmd_cats.h"
#include "proto/resp.h"
#include "../lib/test.h"

/* Parse a C string, or fail the case. */
static fence_acl *parse_ok(const char *text)
{
    fence_acl *acl = NULL;
    char err[256];
    int rc = fence_acl_parse(text, strlen(text), "t.acl", &acl, err, sizeof(err));
    if (rc != 0)
        printf("#   unexpected error: %s\n", err);
    REQUIRE(rc == 0);
    REQUIRE(acl != NULL);
    return acl;
}

/* Parse a C string that must fail; the error must start with want. */
static void parse_bad(const char *text, const char *want)
{
    fence_acl *acl = (fence_acl *)1;
    char err[256];
    int rc = fence_acl_parse(text, strlen(text), "t.acl", &acl, err, sizeof(err));
    CHECK(rc == -1);
    CHECK(acl == NULL);
    if (strncmp(err, want, strlen(want)) != 0)
        printf("#   error \"%s\" does not start with \"%s\"\n", err, want);
    CHECK(strncmp(err, want, strlen(want)) == 0);
}

/* AUTH as user with password. */
static const fence_acl_user *auth(const fence_acl *acl, const char *user, const char *pass)
{
    return fence_acl_auth(acl, user, user ? strlen(user) : 0, pass, strlen(pass));
}

/* Logins: passwords, hashes, on/off, nopass, default. */
static void test_auth(void)
{
    /* sha256("hunter2") */
    fence_acl *acl = parse_ok(
        "# a comment\n"
        "\n"
        "user alice on >secret ~orders:* +@all\n"
        "user bob on #f52fbd32b2b3b86ff88ef6c490628285f482af15ddcb29541f94bcf526a3f6c7 ~* +@lock\r\n"
        "user carol off >pw ~* +@all\n"
        "user dave on nopass ~* +@all\n");
    CHECK_EQ_U64(fence_acl_count(acl), 4);
    const fence_acl_user *a = auth(acl, "alice", "secret");
    REQUIRE(a != NULL);
    CHECK_STR(fence_acl_user_name(a), "alice");
    CHECK(auth(acl, "alice", "secreT") == NULL);
    CHECK(auth(acl, "alice", "") == NULL);
    CHECK(auth(acl, "bob", "hunter2") != NULL);
    CHECK(auth(acl, "bob", "secret") == NULL);
    CHECK(auth(acl, "carol", "pw") == NULL); /* off */
    CHECK(auth(acl, "dave", "anything") != NULL);
    CHECK(auth(acl, "eve", "secret") == NULL);
    CHECK(auth(acl, NULL, "secret") == NULL); /* no default user */
    CHECK(fence_acl_auto_user(acl) == NULL);
    fence_acl_free(acl);

    acl = fence_acl_new_default();
    REQUIRE(acl != NULL);
    CHECK(fence_acl_auto_user(acl) != NULL);
    CHECK(auth(acl, NULL, "whatever") != NULL);
    const fence_acl_user *d = fence_acl_auto_user(acl);
    CHECK(fence_acl_cmd_allowed(d, "CLUSTER.REMOVE", test_cmd_cats("CLUSTER.REMOVE", NULL)));
    CHECK(fence_acl_key_allowed(d, "anything", 8));
    CHECK(fence_acl_is_admin(d));
    fence_acl_free(acl);

    /* Later rules win: resetpass, reset, and a password after nopass. */
    acl = parse_ok("user x on nopass >a\nuser y on >a resetpass >b\nuser z on >a ~* +@all reset\n"
                   "user default on >pw +@all ~*\n");
    CHECK(auth(acl, "x", "a") != NULL);
    CHECK(auth(acl, "x", "b") == NULL);
    CHECK(auth(acl, "y", "a") == NULL);
    CHECK(auth(acl, "y", "b") != NULL);
    CHECK(auth(acl, "z", "a") == NULL);
    CHECK(auth(acl, NULL, "pw") != NULL);
    CHECK(fence_acl_auto_user(acl) == NULL); /* default has a password */
    fence_acl_free(acl);
}

/* Command rules: categories, commands, last one wins. */
static void test_commands(void)
{
    fence_acl *acl = parse_ok("user u on nopass +@all -@admin\n"
                              "user l on nopass +@lock +LEASE.GRANT\n"
                              "user r on nopass +@all -@write +LOCK\n"
                              "user n on nopass\n"
                              "user a on nopass -@all +@admin\n");
    const fence_acl_user *u = fence_acl_find(acl, "u", 1);
    const fence_acl_user *l = fence_acl_find(acl, "l", 1);
    const fence_acl_user *r = fence_acl_find(acl, "r", 1);
    const fence_acl_user *n = fence_acl_find(acl, "n", 1);
    const fence_acl_user *a = fence_acl_find(acl, "a", 1);
    REQUIRE(u && l && r && n && a);
#define OK(usr, cmd) fence_acl_cmd_allowed((usr), (cmd), test_cmd_cats((cmd), NULL))
    CHECK(OK(u, "LOCK"));
    CHECK(OK(u, "lease.grant"));
    CHECK(!OK(u, "CLUSTER.REMOVE"));
    CHECK(!OK(u, "CLUSTER.INFO"));
    CHECK(!fence_acl_cmd_allowed(u, "ACL", test_cmd_cats("ACL", "LOAD")));
    CHECK(fence_acl_cmd_allowed(u, "ACL", test_cmd_cats("ACL", "WHOAMI")));
    CHECK(!fence_acl_is_admin(u));
    CHECK(OK(l, "LOCK"));
    CHECK(OK(l, "UNLOCK"));
    CHECK(OK(l, "LOCK.INFO"));
    CHECK(OK(l, "LEASE.GRANT"));
    CHECK(!OK(l, "LEASE.REVOKE"));
    CHECK(!OK(l, "FSET"));
    CHECK(OK(r, "LOCK"));
    CHECK(!OK(r, "UNLOCK"));
    CHECK(OK(r, "LOCK.INFO"));
    CHECK(!OK(n, "PING"));
    CHECK(!OK(n, "LOCK"));
    CHECK(OK(a, "CLUSTER.TRANSFER"));
    CHECK(!OK(a, "LOCK"));
    CHECK(fence_acl_is_admin(a));
    CHECK(!OK(u, "NOSUCH") == false); /* +@all covers unknown commands */
    CHECK(!OK(l, "NOSUCH"));
#undef OK
    fence_acl_free(acl);
}

/* Name patterns and the glob. */
static void test_patterns(void)
{
    CHECK(fence_acl_glob("*", 1, "", 0));
    CHECK(fence_acl_glob("orders:*", 8, "orders:1", 8));
    CHECK(!fence_acl_glob("orders:*", 8, "orders", 6));
    CHECK(fence_acl_glob("a?c", 3, "abc", 3));
    CHECK(!fence_acl_glob("a?c", 3, "ac", 2));
    CHECK(fence_acl_glob("[a-c]x", 6, "bx", 2));
    CHECK(!fence_acl_glob("[a-c]x", 6, "dx", 2));
    CHECK(fence_acl_glob("[^a-c]x", 7, "dx", 2));
    CHECK(fence_acl_glob("a\\*b", 4, "a*b", 3));
    CHECK(!fence_acl_glob("a\\*b", 4, "axb", 3));
    CHECK(fence_acl_glob("*a*b*c", 6, "xxaxxbxxc", 9));
    CHECK(!fence_acl_glob("*a*b*c", 6, "xxaxxbxx", 8));
    CHECK(fence_acl_glob("**", 2, "abc", 3));
    /* A pathological pattern finishes quickly (no exponential backtracking). */
    char s[4001], p[201];
    memset(s, 'a', 4000);
    s[4000] = '\0';
    for (int i = 0; i < 100; i++) {
        p[2 * i] = '*';
        p[2 * i + 1] = 'a';
    }
    p[200] = 'b';
    CHECK(!fence_acl_glob(p, 201, s, 4000));

    fence_acl *acl = parse_ok("user u on nopass ~orders:* ~billing +@all\n"
                              "user k on nopass allkeys\nuser z on nopass ~* resetkeys\n");
    const fence_acl_user *u = fence_acl_find(acl, "u", 1);
    CHECK(fence_acl_key_allowed(u, "orders:7", 8));
    CHECK(fence_acl_key_allowed(u, "billing", 7));
    CHECK(!fence_acl_key_allowed(u, "billing2", 8));
    CHECK(!fence_acl_key_allowed(u, "payroll", 7));
    CHECK(fence_acl_key_allowed(fence_acl_find(acl, "k", 1), "x", 1));
    CHECK(!fence_acl_key_allowed(fence_acl_find(acl, "z", 1), "x", 1));
    fence_acl_free(acl);
}

/* Bad files: each error names the file and line; no password is shown. */
static void test_errors(void)
{
    parse_bad("user\n", "t.acl:1: 'user' without a name");
    parse_bad("\nusr alice\n", "t.acl:2: a line must start with 'user'");
    parse_bad("user al ice\n", "t.acl:1: word 3: unknown rule (not shown");
    parse_bad("user alice on mysecret\n", "t.acl:1: word 4: unknown rule (not shown");
    parse_bad("user a\nuser a\n", "t.acl:2: user 'a' is defined twice");
    parse_bad("user a +@nosuch\n", "t.acl:1: word 3: unknown category '+@nosuch'");
    parse_bad("user a #abc\n", "t.acl:1: word 3: '#' must be followed by 64 hex digits");
    parse_bad("user a #zz2fbd32b2b3b86ff88ef6c490628285f482af15ddcb29541f94bcf526a3f6c7\n",
              "t.acl:1: word 3: '#' must be followed");
    parse_bad("user a +LO/CK\n", "t.acl:1: word 3: bad command name");
    parse_bad("user a\x01\n", "t.acl:1: control character");
    parse_bad("user b@d!\n", "t.acl:1: bad user name");
    parse_bad("user a >1 >2 >3 >4 >5 >6 >7 >8 >9\n", "t.acl:1: word 11: more than 8 passwords");
    char big[5000];
    memset(big, 'a', sizeof(big));
    memcpy(big, "user x ~", 8);
    big[sizeof(big) - 1] = '\0';
    parse_bad(big, "t.acl:1: line longer than 4096 bytes");
    /* An error never contains a password. */
    fence_acl *acl;
    char err[256];
    const char *t = "user a on >topsecret\nuser b on topsecret2\n";
    CHECK(fence_acl_parse(t, strlen(t), "t.acl", &acl, err, sizeof(err)) == -1);
    CHECK(strstr(err, "topsecret") == NULL);
    /* A missing file. */
    CHECK(fence_acl_load_file("/nonexistent/x.acl", &acl, err, sizeof(err)) == -1);
    CHECK(strstr(err, "/nonexistent/x.acl: cannot open") == err);
}

/* ACL LIST lines: hashes, never passwords, and they parse back the same. */
static void test_describe(void)
{
    fence_acl *acl = parse_ok("user alice on >secret ~orders:* +@all -@admin -CLUSTER.INFO\n"
                              "user n off\n");
    char line[1024];
    fence_acl_user_describe(fence_acl_find(acl, "alice", 5), line, sizeof(line));
    CHECK(strstr(line, "secret") == NULL);
    CHECK_STR(line, "user alice on "
                    "#2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b "
                    "~orders:* +@all -@admin -CLUSTER.INFO");
    fence_acl *again = parse_ok(line);
    CHECK(fence_acl_auth(again, "alice", 5, "secret", 6) != NULL);
    char line2[1024];
    fence_acl_user_describe(fence_acl_find(again, "alice", 5), line2, sizeof(line2));
    CHECK_STR(line, line2);
    fence_acl_user_describe(fence_acl_find(acl, "n", 1), line, sizeof(line));
    CHECK_STR(line, "user n off resetkeys -@all");
    /* Truncation keeps a terminated string and reports the needed size. */
    char small[10];
    size_t need = fence_acl_user_describe(fence_acl_find(acl, "n", 1), small, sizeof(small));
    CHECK_EQ_U64(need, strlen("user n off resetkeys -@all"));
    CHECK_EQ_U64(strlen(small), 9);
    fence_acl_free(again);
    fence_acl_free(acl);
}

/* Per-user limits: maxleases=N maxlocks=N maxconns=N resetlimits, parsed
 * strictly, shown by ACL LIST, and parsed back the same. */
static void test_limits(void)
{
    fence_acl *acl = parse_ok("user a on nopass ~* +@all maxleases=5 MAXLOCKS=7 maxconns=2\n"
                              "user b on nopass maxleases=5 resetlimits maxlocks=1\n"
                              "user c on nopass maxconns=9 reset\n"
                              "user d on nopass\n");
    fence_acl_limits l;
    fence_acl_user_limits(fence_acl_find(acl, "a", 1), &l);
    CHECK_EQ_U64(l.leases, 5);
    CHECK_EQ_U64(l.locks, 7);
    CHECK_EQ_U64(l.conns, 2);
    fence_acl_user_limits(fence_acl_find(acl, "b", 1), &l);
    CHECK_EQ_U64(l.leases, 0);
    CHECK_EQ_U64(l.locks, 1);
    CHECK_EQ_U64(l.conns, 0);
    fence_acl_user_limits(fence_acl_find(acl, "c", 1), &l);
    CHECK(l.leases == 0 && l.locks == 0 && l.conns == 0);
    CHECK(fence_acl_any_maxconns(acl));
    CHECK(fence_acl_any_quota(acl));
    char line[1024];
    fence_acl_user_describe(fence_acl_find(acl, "a", 1), line, sizeof(line));
    CHECK_STR(line, "user a on nopass ~* maxleases=5 maxlocks=7 maxconns=2 +@all");
    fence_acl *again = parse_ok(line);
    char line2[1024];
    fence_acl_user_describe(fence_acl_find(again, "a", 1), line2, sizeof(line2));
    CHECK_STR(line, line2);
    fence_acl_user_describe(fence_acl_find(acl, "d", 1), line, sizeof(line));
    CHECK_STR(line, "user d on nopass resetkeys -@all");
    fence_acl_free(again);
    fence_acl_free(acl);
    acl = parse_ok("user a on maxleases=1000000000\n");
    CHECK(!fence_acl_any_maxconns(acl));
    CHECK(fence_acl_any_quota(acl));
    fence_acl_free(acl);
    acl = parse_ok("user a on maxconns=1\n");
    CHECK(fence_acl_any_maxconns(acl));
    CHECK(!fence_acl_any_quota(acl));
    fence_acl_free(acl);
    const char *bad[] = {"maxleases=0", "maxleases=", "maxleases", "maxleases=-1",
                         "maxleases=+3", "maxleases=007", "maxleases=1000000001",
                         "maxleases=99999999999", "maxleases=1x", "maxlocks=1.5",
                         "maxconns=1e3", "maxconns= 3", "maxleases=18446744073709551617"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char t[128];
        snprintf(t, sizeof(t), "user a on %s\n", bad[i]);
        const char *name = strncmp(bad[i], "maxleases", 9) == 0 ? "maxleases="
                           : strncmp(bad[i], "maxlocks", 8) == 0 ? "maxlocks="
                                                                  : "maxconns=";
        char want[64];
        snprintf(want, sizeof(want), "t.acl:1: word 4: %sN needs a whole number", name);
        parse_bad(t, strcmp(bad[i], "maxconns= 3") == 0 ? "t.acl:1: word 4: maxconns=N" : want);
    }
}

/* A file any user may write is refused (whoever writes it is @admin);
 * group-writable or private files load. */
static void test_file_mode(void)
{
    char path[] = "/tmp/fence-acl-mode.XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    const char *t = "user default on nopass ~* +@all\n";
    REQUIRE(write(fd, t, strlen(t)) == (ssize_t)strlen(t));
    close(fd);
    fence_acl *acl = NULL;
    char err[512];
    REQUIRE(chmod(path, 0600) == 0);
    CHECK(fence_acl_load_file(path, &acl, err, sizeof(err)) == 0);
    fence_acl_free(acl);
    REQUIRE(chmod(path, 0664) == 0);
    CHECK(fence_acl_load_file(path, &acl, err, sizeof(err)) == 0);
    fence_acl_free(acl);
    REQUIRE(chmod(path, 0666) == 0);
    CHECK(fence_acl_load_file(path, &acl, err, sizeof(err)) == -1);
    CHECK(acl == NULL);
    CHECK(strstr(err, "any user may write it (mode 666)") != NULL);
    REQUIRE(chmod(path, 0602) == 0);
    CHECK(fence_acl_load_file(path, &acl, err, sizeof(err)) == -1);
    unlink(path);
}

/* Run the gate on one inline request; returns the reply ("" when it
 * passed the request on). */
static const char *gate(fence_acl_srv *s, fence_compat_conn *cc, const char *line)
{
    static fence_resp_msg m;
    static char reply[4096];
    fence_resp_limits lim;
    fence_resp_limits_default(&lim);
    REQUIRE(fence_resp_parse(line, strlen(line), &lim, &m) > 0);
    fence_acl_out out;
    bool answered = fence__acl_srv_gate(s, cc, &m, &out);
    REQUIRE(!answered || out.len < sizeof(reply));
    snprintf(reply, sizeof(reply), "%.*s", answered ? (int)out.len : 0, answered ? out.ptr : "");
    fence__acl_out_free(&out);
    return reply;
}

/* The gate: NOAUTH before login, categories, patterns, ACL commands, a
 * reload that keeps or replaces the users, owner ids. */
static void test_gate(void)
{
    char path[] = "/tmp/test_acl.XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    const char *text = "user alice on >pw ~orders:* +@all -@admin\nuser root on >r ~* +@all\n";
    REQUIRE(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    fence_acl_srv s;
    char err[256];
    REQUIRE(fence__acl_srv_init(&s, path, err, sizeof(err)) == 0);
    fence__acl_srv_set_commands(&s, fence__server_commands, fence__server_commands_n);
    fence_compat_conn cc;
    fence_compat_conn_init(&cc, 1);
    fence__acl_srv_conn_open(&s, &cc);
    CHECK(!cc.authenticated); /* no default user */
    CHECK_STR(gate(&s, &cc, "LOCK orders:1 1\r\n"), "-NOAUTH Authentication required.\r\n");
    CHECK_STR(gate(&s, &cc, "ACL WHOAMI\r\n"), "-NOAUTH Authentication required.\r\n");
    CHECK_STR(gate(&s, &cc, "PING\r\n"), "");
    CHECK_STR(gate(&s, &cc, "auth alice pw\r\n"), "");
    CHECK_STR(gate(&s, &cc, "HELLO 2 AUTH alice pw\r\n"), "");
    /* HELLO without AUTH says nothing about the server before login. */
    CHECK(strncmp(gate(&s, &cc, "HELLO\r\n"), "-NOAUTH HELLO must be called", 28) == 0);
    CHECK(strncmp(gate(&s, &cc, "HELLO 2 SETNAME x\r\n"), "-NOAUTH", 7) == 0);
    fence_resp_arg u = {"alice", 5}, p = {"pw", 2}, bad = {"PW", 2};
    CHECK(fence__acl_srv_auth(&s, &cc, NULL, &u, &p) == 0);
    CHECK(s.stat_auth_failures == 0);
    CHECK(fence__acl_srv_auth(&s, &cc, NULL, &u, &bad) == -1);
    CHECK(fence__acl_srv_auth(&s, &cc, NULL, &u, &bad) == -1);
    CHECK(s.stat_auth_failures == 2);
    CHECK(s.log_n == 1 && s.log[s.log_head].count == 2); /* grouped: same user, address */
    CHECK(strcmp(s.log[s.log_head].user, "alice") == 0);
    cc.authenticated = true; /* what compat does after the callback said yes */
    strcpy(cc.user, "alice");
    CHECK_STR(gate(&s, &cc, "ACL WHOAMI\r\n"), "$5\r\nalice\r\n");
    CHECK_STR(gate(&s, &cc, "LOCK orders:1 1\r\n"), "");
    CHECK_STR(gate(&s, &cc, "lock payroll 1\r\n"), "-NOPERM No permissions to access a key\r\n");
    CHECK_STR(gate(&s, &cc, "CLUSTER.REMOVE 2\r\n"),
              "-NOPERM User alice has no permissions to run the 'cluster.remove' command\r\n");
    CHECK_STR(gate(&s, &cc, "ACL LIST\r\n"),
              "-NOPERM User alice has no permissions to run the 'acl|list' command\r\n");
    CHECK_STR(gate(&s, &cc, "ACL LOG\r\n"),
              "-NOPERM User alice has no permissions to run the 'acl|log' command\r\n");
    {
        fence_compat_conn rc;
        fence_compat_conn_init(&rc, 2);
        rc.authenticated = true;
        strcpy(rc.user, "root");
        const char *r = gate(&s, &rc, "ACL LOG\r\n");
        CHECK(strncmp(r, "*1\r\n*20\r\n$5\r\ncount\r\n:2\r\n$6\r\nreason\r\n$4\r\nauth\r\n", 44) == 0);
        CHECK(strstr(r, "$8\r\nusername\r\n$5\r\nalice\r\n") != NULL);
        CHECK(strstr(r, "PW") == NULL); /* never the password */
        CHECK_STR(gate(&s, &rc, "ACL LOG 0\r\n"), "*0\r\n");
        CHECK_STR(gate(&s, &rc, "ACL LOG RESET\r\n"), "+OK\r\n");
        CHECK_STR(gate(&s, &rc, "ACL LOG\r\n"), "*0\r\n");
        CHECK(strncmp(gate(&s, &rc, "ACL LOG x\r\n"), "-ERR", 4) == 0);
    }
    CHECK_STR(gate(&s, &cc, "CLIENT ID\r\n"), "");
    CHECK_STR(gate(&s, &cc, "NOSUCH\r\n"), "");
    uint64_t owner;
    bool admin;
    fence__acl_srv_owner(&s, &cc, &owner, &admin);
    CHECK(owner == fence_acl_owner_id("alice") && owner != 0 && !admin);
    CHECK(fence_acl_owner_id("default") == 0);
    /* A bad file keeps the users; a good one replaces them. */
    FILE *f = fopen(path, "w");
    REQUIRE(f != NULL);
    fputs("user alice on >pw ~* +@all\nuser x +@bad\n", f);
    fclose(f);
    CHECK(fence__acl_srv_reload(&s, err, sizeof(err)) == -1);
    CHECK(strstr(err, ":2: word 3: unknown category") != NULL);
    CHECK_STR(gate(&s, &cc, "lock payroll 1\r\n"), "-NOPERM No permissions to access a key\r\n");
    f = fopen(path, "w");
    REQUIRE(f != NULL);
    fputs("user alice on >pw ~* +@all\n", f);
    fclose(f);
    CHECK(fence__acl_srv_reload(&s, err, sizeof(err)) == 0);
    CHECK_STR(gate(&s, &cc, "lock payroll 1\r\n"), "");
    fence__acl_srv_owner(&s, &cc, &owner, &admin);
    CHECK(admin);
    f = fopen(path, "w");
    REQUIRE(f != NULL);
    fputs("user alice off >pw ~* +@all\n", f);
    fclose(f);
    CHECK(fence__acl_srv_reload(&s, err, sizeof(err)) == 0);
    CHECK_STR(gate(&s, &cc, "LOCK a 1\r\n"), "-NOAUTH Authentication required.\r\n");
    CHECK(!cc.authenticated);
    fence__acl_srv_free(&s);
    unlink(path);
    /* Without a file: everyone is "default", logged in from the start. */
    REQUIRE(fence__acl_srv_init(&s, NULL, err, sizeof(err)) == 0);
    fence__acl_srv_set_commands(&s, fence__server_commands, fence__server_commands_n);
    CHECK(!fence__acl_srv_has_file(&s));
    fence_compat_conn_init(&cc, 2);
    fence__acl_srv_conn_open(&s, &cc);
    CHECK(cc.authenticated);
    CHECK_STR(gate(&s, &cc, "CLUSTER.REMOVE 2\r\n"), "");
    cc.authenticated = false; /* RESET */
    CHECK_STR(gate(&s, &cc, "LOCK a 1\r\n"), "");
    fence__acl_srv_owner(&s, &cc, &owner, &admin);
    CHECK(owner == 0 && admin);
    fence__acl_srv_free(&s);
    /* Safe defaults. */
    CHECK(fence__acl_srv_check_bind("127.0.0.1", false, false, false, err, sizeof(err)) == 0);
    CHECK(fence__acl_srv_check_bind("::1", false, false, false, err, sizeof(err)) == 0);
    CHECK(fence__acl_srv_check_bind("0.0.0.0", false, false, false, err, sizeof(err)) == -1);
    CHECK(fence__acl_srv_check_bind("::", false, false, false, err, sizeof(err)) == -1);
    /* Users without TLS-only, or TLS-only without users: refused. */
    CHECK(fence__acl_srv_check_bind("10.1.2.3", true, false, false, err, sizeof(err)) == -1);
    CHECK(strstr(err, "TLS") != NULL);
    CHECK(fence__acl_srv_check_bind("10.1.2.3", false, true, false, err, sizeof(err)) == -1);
    CHECK(strstr(err, "--acl-file") != NULL);
    CHECK(fence__acl_srv_check_bind("10.1.2.3", true, true, false, err, sizeof(err)) == 0);
    CHECK(fence__acl_srv_check_bind("10.1.2.3", false, false, true, err, sizeof(err)) == 0);
    CHECK(fence__acl_srv_tls_only(0, 7443, "c.pem", "k.pem"));
    CHECK(!fence__acl_srv_tls_only(7700, 7443, "c.pem", "k.pem"));
    CHECK(!fence__acl_srv_tls_only(0, 0, "c.pem", "k.pem"));
    CHECK(!fence__acl_srv_tls_only(0, 7443, "", "k.pem"));
    CHECK(!fence__acl_srv_tls_only(0, 7443, "c.pem", ""));
}

int main(void)
{
    TEST_RUN(test_auth);
    TEST_RUN(test_commands);
    TEST_RUN(test_patterns);
    TEST_RUN(test_errors);
    TEST_RUN(test_describe);
    TEST_RUN(test_limits);
    TEST_RUN(test_file_mode);
    TEST_RUN(test_gate);
    return TEST_DONE();
}
