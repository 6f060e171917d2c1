/* Every daemon has ONE command table (src/daemon/compat.h's
 * fence_compat_command rows: src/server/commands_table.c,
 * src/store/commands_table.c, compat_command.c's builtins, acl_srv.c's ACL
 * subcommands), from which dispatch, the ACL check, COMMAND and the metric
 * labels are derived.  This test walks every table and fails on a row that
 * would let a command past the ACL: no categories, unknown category bits, a
 * key argument that is not there, arity bounds that disagree, a name twice.
 * The checker is first run over a planted bad table, so it can fail.  Then
 * the real gate is driven with every row of each daemon's table: a user
 * with no commands is refused each (but PING and QUIT), a user with every
 * category passes each. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth/acl.h"
#include "daemon/acl_srv.h"
#include "daemon/compat.h"
#include "base/limits.h"
#include "proto/resp.h"
#include "server/commands_table.h"
#include "store/commands_table.h"
#include "../lib/test.h"

/* Problems check_rows found (it prints each). */
static int problems;

static void problem(const char *table, const char *name, const char *what)
{
    printf("#   table %s, row %s: %s\n", table, name != NULL ? name : "(null)", what);
    problems++;
}

/* Check rows t[0..n) of table tname.  daemon: the rows are dispatched by
 * a daemon (argc_max and op matter).  Returns the problems found. */
static int check_rows(const char *tname, const fence_compat_command *t, size_t n, bool daemon)
{
    int before = problems;
    for (size_t i = 0; i < n; i++) {
        const fence_compat_command *r = &t[i];
        if (r->name == NULL || r->name[0] == '\0') {
            problem(tname, r->name, "no name");
            continue;
        }
        const char *c = r->name;
        while (*c != '\0' && !(*c >= 'a' && *c <= 'z'))
            c++;
        if (*c != '\0')
            problem(tname, r->name, "name not upper case");
        for (size_t j = 0; j < i; j++)
            if (t[j].name != NULL && strcmp(t[j].name, r->name) == 0)
                problem(tname, r->name, "name twice");
        if (r->acl == 0)
            problem(tname, r->name, "no ACL categories: the gate could not check it");
        for (uint32_t bit = 1; bit != 0; bit <<= 1)
            if ((r->acl & bit) && fence_acl_category_name(bit) == NULL)
                problem(tname, r->name, "an ACL category bit without a name");
        if (r->arity == 0)
            problem(tname, r->name, "arity 0");
        unsigned required = 1;
        for (size_t k = 0; k < r->n_args; k++)
            required += !(r->args[k].flags & FENCE_COMPAT_ARG_OPTIONAL);
        if (r->acl_key != 0 &&
            (r->acl_key >= required || r->acl_key > r->n_args ||
             (r->args[r->acl_key - 1].flags & FENCE_COMPAT_ARG_OPTIONAL)))
            problem(tname, r->name, "acl_key names no required argument");
        if (r->acl_keys != FENCE_COMPAT_KEYS_ONE &&
            (r->acl_keys != FENCE_COMPAT_KEYS_REST || r->acl_key == 0 ||
             r->acl_key > r->n_args || !(r->args[r->acl_key - 1].flags & FENCE_COMPAT_ARG_MULTIPLE)))
            problem(tname, r->name, "a key range that does not start at a repeated key argument");
        if (daemon) {
            unsigned min = (unsigned)(r->arity < 0 ? -r->arity : r->arity);
            if (r->argc_max == 0 || r->argc_max < min || r->argc_max > FENCE_ARGS_MAX)
                problem(tname, r->name, "argc_max out of bounds");
            if (r->arity > 0 && r->argc_max != (unsigned)r->arity)
                problem(tname, r->name, "a fixed arity with another argc_max");
        }
        if (r->n_subs > 0)
            check_rows(tname, r->subs, r->n_subs, false);
    }
    return problems - before;
}

/* The checker catches what it is meant to (each row one planted fault). */
static void test_checker_can_fail(void)
{
    static const fence_compat_arg one[] = {{"name", "key", NULL, 0, NULL, 0}};
    static const fence_compat_command bad[] = {
        {"NOCATS", 1, 0, "x", "0.1.0", "s", NULL, 0, NULL, 0, 0, 0, 1, 0},
        {"badcase", 1, 0, "x", "0.1.0", "s", NULL, 0, NULL, 0, FENCE_ACL_CAT_READ, 0, 1, 0},
        {"KEYLESS", 1, 0, "x", "0.1.0", "s", NULL, 0, NULL, 0, FENCE_ACL_CAT_READ, 1, 1, 0},
        {"WIDE", 2, 0, "x", "0.1.0", "s", one, 1, NULL, 0, FENCE_ACL_CAT_READ, 1, 5, 0},
        {"BITS", 1, 0, "x", "0.1.0", "s", NULL, 0, NULL, 0, 0x80000000u, 0, 1, 0},
        {"BITS", 1, 0, "x", "0.1.0", "s", NULL, 0, NULL, 0, FENCE_ACL_CAT_READ, 0, 1, 0},
        {"RANGE", 2, 0, "x", "0.1.0", "s", one, 1, NULL, 0, FENCE_ACL_CAT_READ, 1, 2, 0,
         FENCE_COMPAT_KEYS_REST},
    };
    int found = check_rows("planted", bad, sizeof(bad) / sizeof(bad[0]), true);
    problems = 0;
    CHECK_EQ_I64(found, 7);
}

static void test_tables(void)
{
    size_t nb, na;
    const fence_compat_command *b = fence_compat_builtin_commands(&nb);
    const fence_compat_command *a = fence__acl_srv_subcommands(&na);
    CHECK_EQ_I64(check_rows("fenced", fence__server_commands, fence__server_commands_n, true), 0);
    CHECK_EQ_I64(check_rows("fence-store", fence__store_commands, fence__store_commands_n, true),
                 0);
    CHECK_EQ_I64(check_rows("compat", b, nb, false), 0);
    CHECK_EQ_I64(check_rows("acl", a, na, false), 0);
    /* Every LOCK-like command names its lock: the ~pattern check needs it. */
    for (size_t i = 0; i < fence__server_commands_n; i++) {
        const fence_compat_command *r = &fence__server_commands[i];
        if (r->n_args > 0 && strcmp(r->args[0].type, "key") == 0 &&
            !(r->args[0].flags & FENCE_COMPAT_ARG_OPTIONAL))
            CHECK(r->acl_key == 1);
    }
    /* fence-store: a command with a fence checks the fence. */
    for (size_t i = 0; i < fence__store_commands_n; i++) {
        const fence_compat_command *r = &fence__store_commands[i];
        if (r->n_args > 0 && strcmp(r->args[0].name, "fence") == 0)
            CHECK(r->acl_key == 1);
    }
}

/* A request of row r with its required words (placeholder values). */
static void fill_msg(const fence_compat_command *r, fence_resp_msg *m)
{
    memset(m, 0, sizeof(*m));
    unsigned words = (unsigned)(r->arity < 0 ? -r->arity : r->arity);
    m->argc = words;
    m->argv[0].ptr = r->name;
    m->argv[0].len = strlen(r->name);
    for (unsigned k = 1; k < words; k++) {
        m->argv[k].ptr = "x1";
        m->argv[k].len = 2;
    }
}

/* Drive the gate with every row of table t for a user with no commands and
 * for one with every category. */
static void gate_walk(const fence_compat_command *t, size_t n)
{
    char path[] = "/tmp/fence-cmdtab.XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    const char *acl = "user default on nopass ~* -@all\nuser all on >pw ~* +@all\n";
    REQUIRE(write(fd, acl, strlen(acl)) == (ssize_t)strlen(acl));
    close(fd);
    fence_acl_srv s;
    char err[256];
    REQUIRE(fence__acl_srv_init(&s, path, err, sizeof(err)) == 0);
    unlink(path);
    fence__acl_srv_set_commands(&s, t, n);
    for (size_t i = 0; i < n; i++) {
        const fence_compat_command *r = &t[i];
        fence_resp_msg m;
        fill_msg(r, &m);
        fence_acl_out out;
        /* default: logged in (nopass), no commands. */
        fence_compat_conn none;
        fence_compat_conn_init(&none, 1);
        fence__acl_srv_conn_open(&s, &none);
        CHECK(none.authenticated);
        bool free_cmd = strcmp(r->name, "PING") == 0 || strcmp(r->name, "QUIT") == 0;
        bool answered = fence__acl_srv_gate(&s, &none, &m, &out);
        if (answered == free_cmd) {
            printf("#   %s: refused for a user with no commands: %d\n", r->name, answered);
            CHECK(answered != free_cmd);
        }
        if (answered)
            CHECK(out.ptr != NULL && strncmp(out.ptr, "-NOPERM", 7) == 0);
        fence__acl_out_free(&out);
        /* all: logged in (as AUTH all pw would), every category. */
        fence_compat_conn every;
        fence_compat_conn_init(&every, 2);
        every.authenticated = true;
        snprintf(every.user, sizeof(every.user), "all");
        answered = fence__acl_srv_gate(&s, &every, &m, &out);
        if (answered)
            printf("#   %s: refused for a user with every category\n", r->name);
        CHECK(!answered);
        fence__acl_out_free(&out);
    }
    fence__acl_srv_free(&s);
}

static void test_gate_fenced(void)
{
    gate_walk(fence__server_commands, fence__server_commands_n);
}

static void test_gate_store(void)
{
    gate_walk(fence__store_commands, fence__store_commands_n);
}

/* A request from words (borrowed). */
static void words_msg(fence_resp_msg *m, const char *const *w, unsigned n)
{
    memset(m, 0, sizeof(*m));
    m->argc = n;
    for (unsigned i = 0; i < n; i++) {
        m->argv[i].ptr = w[i];
        m->argv[i].len = strlen(w[i]);
    }
}

/* The key range form (FENCE_COMPAT_KEYS_REST): every argument from acl_key
 * up to the first option word is a key, and the gate checks each of them
 * against the user's ~patterns, but no option value. */
static void test_key_range(void)
{
    const fence_compat_command *row = fence_compat_command_find(
        fence__server_commands, fence__server_commands_n, "LOCK.MULTI", 10);
    REQUIRE(row != NULL);
    CHECK_EQ_U64(row->acl_keys, FENCE_COMPAT_KEYS_REST);
    fence_resp_msg m;
    const char *w1[] = {"LOCK.MULTI", "7", "orders:1", "orders:2", "wait", "5", "REQID", "9"};
    words_msg(&m, w1, 8);
    CHECK_EQ_U64(fence_compat_command_keys_end(row, &m), 4);
    const char *w2[] = {"LOCK.MULTI", "7", "a", "b", "c"};
    words_msg(&m, w2, 5);
    CHECK_EQ_U64(fence_compat_command_keys_end(row, &m), 5);
    const fence_compat_command *one = fence_compat_command_find(
        fence__server_commands, fence__server_commands_n, "LOCK", 4);
    REQUIRE(one != NULL);
    const char *w3[] = {"LOCK", "x", "7", "WAIT", "5"};
    words_msg(&m, w3, 5);
    CHECK_EQ_U64(fence_compat_command_keys_end(one, &m), 2);
    /* The gate, for a user limited to ~orders:*. */
    char path[] = "/tmp/fence-cmdtab.XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    const char *acl = "user default on nopass ~orders:* +@all\n";
    REQUIRE(write(fd, acl, strlen(acl)) == (ssize_t)strlen(acl));
    close(fd);
    fence_acl_srv s;
    char err[256];
    REQUIRE(fence__acl_srv_init(&s, path, err, sizeof(err)) == 0);
    unlink(path);
    fence__acl_srv_set_commands(&s, fence__server_commands, fence__server_commands_n);
    struct {
        const char *w[8];
        unsigned n;
        bool refused;
    } cases[] = {
        {{"LOCK.MULTI", "7", "orders:1", "orders:2", "WAIT", "5"}, 6, false},
        {{"LOCK.MULTI", "7", "orders:1", "billing", "WAIT", "5"}, 6, true},
        {{"LOCK.MULTI", "7", "billing", "orders:1"}, 4, true},
        {{"ACQUIRE.MULTI", "100", "orders:1", "LOCKDELAY", "5", "REQID", "1"}, 7, false},
        {{"ACQUIRE.MULTI", "100", "orders:1", "orders:9", "pay"}, 5, true},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        words_msg(&m, cases[i].w, cases[i].n);
        fence_compat_conn cc;
        fence_compat_conn_init(&cc, 1);
        fence__acl_srv_conn_open(&s, &cc);
        fence_acl_out out;
        bool answered = fence__acl_srv_gate(&s, &cc, &m, &out);
        if (answered != cases[i].refused)
            printf("#   case %zu: answered %d\n", i, answered);
        CHECK(answered == cases[i].refused);
        if (answered)
            CHECK(out.ptr != NULL && strstr(out.ptr, "NOPERM") != NULL);
        fence__acl_out_free(&out);
    }
    fence__acl_srv_free(&s);
}

int main(void)
{
    TEST_RUN(test_key_range);
    TEST_RUN(test_checker_can_fail);
    TEST_RUN(test_tables);
    TEST_RUN(test_gate_fenced);
    TEST_RUN(test_gate_store);
    return TEST_DONE();
}
