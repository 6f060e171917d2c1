/* Unit tests of fencectl's pure parts: argument parsing and the latency
 * histogram. */
#include <string.h>

#include "../lib/test.h"
#include "fencectl/args.h"
#include "fencectl/hist.h"

/* Parse a NULL-terminated list of words (argv[0] added). */
static int parse(fencectl_args *a, char *err, const char **words)
{
    char *argv[64];
    int argc = 0;
    argv[argc++] = (char *)"fencectl";
    for (; *words; words++)
        argv[argc++] = (char *)*words;
    argv[argc] = NULL;
    static char *saved[64];
    memcpy(saved, argv, sizeof(argv));
    return fencectl_parse(argc, saved, a, err, 256);
}

#define PARSE(a, err, ...) parse((a), (err), (const char *[]){__VA_ARGS__, NULL})

/* lock with every option, CMD after --. */
static void test_lock_full(void)
{
    fencectl_args a;
    char err[256];
    REQUIRE(PARSE(&a, err, "lock", "db", "--ttl", "500", "--wait=100", "--on-lost", "kill",
                  "--grace", "50", "--server", "h:1,h:2", "--", "sh", "-c", "echo --ttl") == 0);
    CHECK(a.cmd == FENCECTL_LOCK);
    CHECK_STR(a.name, "db");
    CHECK(a.ttl_ms == 500);
    CHECK(a.wait_ms == 100);
    CHECK(a.on_lost == FENCECTL_ON_LOST_KILL);
    CHECK(a.grace_ms == 50);
    CHECK_STR(a.servers, "h:1,h:2");
    REQUIRE(a.cmd_argc == 3);
    CHECK_STR(a.cmd_argv[0], "sh");
    CHECK_STR(a.cmd_argv[2], "echo --ttl");
}

/* lock defaults: ttl 10 s, wait 30 s, on-lost term, grace ttl/4. */
static void test_lock_defaults(void)
{
    fencectl_args a;
    char err[256];
    REQUIRE(PARSE(&a, err, "--server", "x:9", "lock", "n", "--", "true") == 0);
    CHECK(a.ttl_ms == 10000);
    CHECK(a.wait_ms == 30000);
    CHECK(a.on_lost == FENCECTL_ON_LOST_TERM);
    CHECK(a.grace_ms == 2500);
    CHECK_STR(a.servers, "x:9");
    REQUIRE(PARSE(&a, err, "lock", "n", "--ttl", "400", "--", "true") == 0);
    CHECK(a.grace_ms == 100);
}

/* lock mistakes are usage errors with a reason. */
static void test_lock_errors(void)
{
    fencectl_args a;
    char err[256];
    CHECK(PARSE(&a, err, "lock", "n") == FENCECTL_EXIT_USAGE);
    CHECK(strstr(err, "command") != NULL);
    CHECK(PARSE(&a, err, "lock", "n", "true") == FENCECTL_EXIT_USAGE);
    CHECK(strstr(err, "--") != NULL);
    CHECK(PARSE(&a, err, "lock", "--", "true") == FENCECTL_EXIT_USAGE);
    CHECK(PARSE(&a, err, "lock", "n", "--on-lost", "maybe", "--", "true") == FENCECTL_EXIT_USAGE);
    CHECK(strstr(err, "maybe") != NULL);
    CHECK(PARSE(&a, err, "lock", "n", "--ttl", "5", "--", "true") == FENCECTL_EXIT_USAGE);
    CHECK(PARSE(&a, err, "lock", "n", "--ttl", "abc", "--", "true") == FENCECTL_EXIT_USAGE);
    CHECK(PARSE(&a, err, "lock", "n", "--ttl", "-5", "--", "true") == FENCECTL_EXIT_USAGE);
    CHECK(PARSE(&a, err, "lock", "n", "--wait", "99999999999", "--", "true") == FENCECTL_EXIT_USAGE);
    CHECK(PARSE(&a, err, "lock", "n", "--ttl") == FENCECTL_EXIT_USAGE);
    CHECK(PARSE(&a, err, "lock", "n", "--lease", "3", "--", "true") == FENCECTL_EXIT_USAGE);
    CHECK(strstr(err, "--lease") != NULL);
    CHECK(PARSE(&a, err, "lock", "n", "-x", "--", "true") == FENCECTL_EXIT_USAGE);
    char big[300];
    memset(big, 'n', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    CHECK(PARSE(&a, err, "lock", big, "--", "true") == FENCECTL_EXIT_USAGE);
}

/* Every subcommand answers --help without other arguments. */
static void test_help_everywhere(void)
{
    fencectl_args a;
    char err[256];
    const char *cmds[][2] = {{"lock", NULL},  {"acquire", NULL}, {"release", NULL},
                             {"info", NULL},  {"lease", "grant"}, {"lease", "keepalive"},
                             {"lease", "revoke"}, {"lease", "info"}, {"status", NULL},
                             {"bench", NULL}};
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
        int rv = cmds[i][1] ? PARSE(&a, err, cmds[i][0], cmds[i][1], "--help")
                            : PARSE(&a, err, cmds[i][0], "--help");
        CHECK(rv == 0);
        CHECK(a.help);
        CHECK(a.cmd != FENCECTL_NONE);
        CHECK(strstr(fencectl_usage(a.cmd), "usage: fencectl") != NULL);
        CHECK(strstr(fencectl_usage(a.cmd), cmds[i][0]) != NULL);
    }
    CHECK(PARSE(&a, err, "lease", "--help") == 0);
    CHECK(a.help);
    CHECK(strstr(fencectl_usage(a.cmd), "keepalive") != NULL);
    CHECK(PARSE(&a, err, "--help") == 0);
    CHECK(a.help && a.cmd == FENCECTL_NONE);
    CHECK(strstr(fencectl_usage(FENCECTL_NONE), "exit codes") != NULL);
    /* demo passes --help through to fence-demo. */
    CHECK(PARSE(&a, err, "demo", "--help") == 0);
    CHECK(!a.help);
    CHECK(a.cmd == FENCECTL_DEMO);
    CHECK(a.rest_argc == 1);
}

/* Scripting subcommands and their positional arguments. */
static void test_scripts(void)
{
    fencectl_args a;
    char err[256];
    REQUIRE(PARSE(&a, err, "acquire", "x", "--ttl", "2000", "--wait", "0", "--env") == 0);
    CHECK(a.cmd == FENCECTL_ACQUIRE);
    CHECK(a.wait_ms == 0 && a.wait_set);
    CHECK(a.env_format);
    REQUIRE(PARSE(&a, err, "acquire", "x", "--lease", "42") == 0);
    CHECK(a.lease_set && a.lease == 42);
    REQUIRE(PARSE(&a, err, "release", "x", "18446744073709551615") == 0);
    CHECK_EQ_U64(a.token, UINT64_MAX);
    CHECK(PARSE(&a, err, "release", "x", "0") == FENCECTL_EXIT_USAGE);
    CHECK(PARSE(&a, err, "release", "x") == FENCECTL_EXIT_USAGE);
    CHECK(PARSE(&a, err, "release", "x", "1", "2") == FENCECTL_EXIT_USAGE);
    REQUIRE(PARSE(&a, err, "info", "x") == 0);
    CHECK(a.cmd == FENCECTL_INFO);
    REQUIRE(PARSE(&a, err, "lease", "grant", "1500") == 0);
    CHECK(a.cmd == FENCECTL_LEASE_GRANT && a.ttl_ms == 1500);
    REQUIRE(PARSE(&a, err, "lease", "keepalive", "7") == 0);
    CHECK(a.cmd == FENCECTL_LEASE_KEEPALIVE && a.lease == 7);
    REQUIRE(PARSE(&a, err, "lease", "revoke", "7", "--server=a:1") == 0);
    CHECK(a.cmd == FENCECTL_LEASE_REVOKE);
    CHECK_STR(a.servers, "a:1");
    REQUIRE(PARSE(&a, err, "lease", "info", "7") == 0);
    CHECK(a.cmd == FENCECTL_LEASE_INFO);
    CHECK(PARSE(&a, err, "lease", "grant", "5") == FENCECTL_EXIT_USAGE);
    CHECK(PARSE(&a, err, "lease", "renew", "5") == FENCECTL_EXIT_USAGE);
    CHECK(PARSE(&a, err, "lease") == FENCECTL_EXIT_USAGE);
    REQUIRE(PARSE(&a, err, "status", "--timeout", "200") == 0);
    CHECK(a.cmd == FENCECTL_STATUS && a.timeout_ms == 200);
    CHECK(PARSE(&a, err, "status", "extra") == FENCECTL_EXIT_USAGE);
    CHECK(PARSE(&a, err, "frobnicate") == FENCECTL_EXIT_USAGE);
    CHECK(strstr(err, "frobnicate") != NULL);
    CHECK(PARSE(&a, err, "--server") == FENCECTL_EXIT_USAGE);
}

/* bench options. */
static void test_bench(void)
{
    fencectl_args a;
    char err[256];
    REQUIRE(PARSE(&a, err, "bench") == 0);
    CHECK(a.n_conns == 3 && a.conns[0] == 1 && a.conns[1] == 8 && a.conns[2] == 64);
    CHECK(a.duration_ms == 3000);
    CHECK(a.bench_mode == FENCECTL_BENCH_BOTH);
    REQUIRE(PARSE(&a, err, "bench", "--conns", "2,4", "--duration", "1", "--mode",
                  "contended", "--prefix", "p") == 0);
    CHECK(a.n_conns == 2 && a.conns[1] == 4);
    CHECK(a.duration_ms == 1000);
    CHECK(a.bench_mode == FENCECTL_BENCH_CONTENDED);
    CHECK(PARSE(&a, err, "bench", "--conns", "0") == FENCECTL_EXIT_USAGE);
    CHECK(PARSE(&a, err, "bench", "--conns", "1,,2") == FENCECTL_EXIT_USAGE);
    CHECK(PARSE(&a, err, "bench", "--conns", "5000") == FENCECTL_EXIT_USAGE);
    CHECK(PARSE(&a, err, "bench", "--duration", "0") == FENCECTL_EXIT_USAGE);
    CHECK(PARSE(&a, err, "bench", "--mode", "fast") == FENCECTL_EXIT_USAGE);
    CHECK(!a.bench_tsv);
    REQUIRE(PARSE(&a, err, "bench", "--format", "tsv") == 0);
    CHECK(a.bench_tsv);
    REQUIRE(PARSE(&a, err, "bench", "--format", "table") == 0);
    CHECK(!a.bench_tsv);
    CHECK(PARSE(&a, err, "bench", "--format", "csv") == FENCECTL_EXIT_USAGE);
    CHECK(PARSE(&a, err, "lock", "x", "--format", "tsv", "--", "true") == FENCECTL_EXIT_USAGE);
}

/* Histogram buckets: monotone, exact below 32, within ~3% above. */
static void test_hist_buckets(void)
{
    for (uint64_t v = 0; v < 32; v++)
        CHECK(fencectl_hist_upper(fencectl_hist_index(v)) == v);
    uint32_t prev = 0;
    for (uint64_t v = 1; v < (1ull << 36); v = v * 9 / 8 + 1) {
        uint32_t i = fencectl_hist_index(v);
        CHECK(i >= prev);
        prev = i;
        uint64_t up = fencectl_hist_upper(i);
        CHECK(up >= v);
        CHECK(up - v <= v / 32 + 1);
    }
    CHECK(fencectl_hist_index(UINT64_MAX) == FENCECTL_HIST_BUCKETS - 1);
}

/* Quantiles of a known distribution. */
static void test_hist_quantiles(void)
{
    static fencectl_hist h, h2;
    fencectl_hist_init(&h);
    CHECK(fencectl_hist_quantile(&h, 0.5) == 0);
    for (uint64_t v = 1; v <= 1000; v++)
        fencectl_hist_add(&h, v);
    uint64_t p50 = fencectl_hist_quantile(&h, 0.5);
    CHECK(p50 >= 500 && p50 <= 516);
    uint64_t p99 = fencectl_hist_quantile(&h, 0.99);
    CHECK(p99 >= 990 && p99 <= 1000);
    CHECK(fencectl_hist_quantile(&h, 1.0) == 1000);
    fencectl_hist_init(&h2);
    fencectl_hist_add(&h2, 100000);
    fencectl_hist_merge(&h, &h2);
    CHECK(h.count == 1001);
    CHECK(fencectl_hist_quantile(&h, 1.0) == 100000);
}

int main(void)
{
    TEST_RUN(test_lock_full);
    TEST_RUN(test_lock_defaults);
    TEST_RUN(test_lock_errors);
    TEST_RUN(test_help_everywhere);
    TEST_RUN(test_scripts);
    TEST_RUN(test_bench);
    TEST_RUN(test_hist_buckets);
    TEST_RUN(test_hist_quantiles);
    return TEST_DONE();
}
