/* src/base/options: one table for defaults, flags, config files,
 * --help and --version; errors name the file, line and directive. */
#include <stdbool.h>

#include "base/options.h"
#include "../lib/test.h"

/* A small config struct, as a daemon would have. */
typedef struct cfg {
    uint64_t port;       /* U64 */
    uint64_t buf;        /* SIZE */
    char name[8];        /* STR */
    char config[256];    /* the --config path */
    char dir[16];        /* STR, never empty */
    char level[8];       /* a log level word */
    bool flag;           /* BOOL */
} cfg;

static const fence_opt rows[] = {
    FENCE_OPT_U64_ROW(cfg, "port", port, 1, 65535, 7700, "<port>", "a port"),
    FENCE_OPT_SIZE_ROW(cfg, "max-buf", buf, 1024, 1024 * 1024, 4096, "<bytes>",
                       "a size"),
    FENCE_OPT_ALIAS_ROW("buf-max", "max-buf"),
    FENCE_OPT_STR_ROW(cfg, "name", name, "abc", "<s>", "a name"),
    FENCE_OPT_STR_REQ_ROW(cfg, "dir", dir, "d", "<dir>", "never empty"),
    FENCE_OPT_LEVEL_ROW(cfg, "level", level, "info", "<level>", "a level",
                        FENCE_OPT_F_LOGDIGIT),
    FENCE_OPT_STR_ROW(cfg, "config", config, "", "<file>", "a file"),
    FENCE_OPT_BOOL_ROW(cfg, "flag", flag, 0, "a flag"),
};

static const fence_opts_spec spec = {"prog", "9.9", "Summary.\n", "Footer.\n",
                                     rows, sizeof(rows) / sizeof(rows[0])};

/* Run fence__opts_load on a NULL-terminated argument list. */
static int load(cfg *c, char *err, size_t cap, const char **args)
{
    char *argv[16];
    int argc = 0;
    argv[argc++] = (char *)"prog";
    while (*args)
        argv[argc++] = (char *)*args++;
    argv[argc] = NULL;
    return fence__opts_load(&spec, c, argc, argv, err, cap);
}

/* Defaults, then both flag spellings, sizes, bools and aliases. */
static void test_flags(void)
{
    cfg c;
    char err[512];
    memset(&c, 0x5a, sizeof(c));
    fence__opts_defaults(&spec, &c);
    CHECK(c.port == 7700 && c.buf == 4096 && !c.flag);
    CHECK_STR(c.name, "abc");
    CHECK(load(&c, err, sizeof(err),
               (const char *[]){"--port", "80", "--max-buf=8k", "--flag",
                                "--name", "", NULL}) == 0);
    CHECK(c.port == 80 && c.buf == 8192 && c.flag);
    CHECK_STR(c.name, "");
    CHECK(load(&c, err, sizeof(err), (const char *[]){"--buf-max", "2k", NULL}) == 0);
    CHECK(c.buf == 2048);
    CHECK(load(&c, err, sizeof(err), (const char *[]){"--flag=no", NULL}) == 0);
    CHECK(!c.flag);
    const fence_opt *dep = NULL;
    const fence_opt *o = fence__opts_find(&spec, "buf-max", 7, &dep);
    CHECK(o != NULL && strcmp(o->name, "max-buf") == 0);
    CHECK(dep != NULL && strcmp(dep->name, "buf-max") == 0);
}

/* Each kind of bad flag, with the message a user sees. */
static void test_flag_errors(void)
{
    cfg c;
    char err[512];
    CHECK(load(&c, err, sizeof(err), (const char *[]){"--port", "0", NULL}) == -1);
    CHECK_STR(err, "--port: 0 is out of range 1..65535");
    CHECK(load(&c, err, sizeof(err), (const char *[]){"--port", "x", NULL}) == -1);
    CHECK_STR(err, "--port: 'x' is not a number in 1..65535");
    CHECK(load(&c, err, sizeof(err), (const char *[]){"--port", NULL}) == -1);
    CHECK_STR(err, "--port: missing value");
    CHECK(load(&c, err, sizeof(err), (const char *[]){"--max-buf", "1t", NULL}) == -1);
    CHECK_STR(err, "--max-buf: '1t' is not a size in 1024..1048576 (k/m/g suffixes allowed)");
    CHECK(load(&c, err, sizeof(err), (const char *[]){"--name", "toolongname", NULL}) == -1);
    CHECK_STR(err, "--name: value longer than 7 bytes");
    CHECK(load(&c, err, sizeof(err), (const char *[]){"--nope", NULL}) == -1);
    CHECK_STR(err, "unknown option '--nope' (see --help)");
    CHECK(load(&c, err, sizeof(err), (const char *[]){"stray", NULL}) == -1);
    CHECK_STR(err, "unexpected argument 'stray' (see --help)");
    CHECK(load(&c, err, sizeof(err), (const char *[]){"--flag=maybe", NULL}) == -1);
    CHECK_STR(err, "--flag: 'maybe' is not yes or no");
    CHECK(load(&c, err, sizeof(err), (const char *[]){"--dir=", NULL}) == -1);
    CHECK_STR(err, "--dir: must not be empty");
    CHECK(load(&c, err, sizeof(err), (const char *[]){"--level", "loud", NULL}) == -1);
    CHECK_STR(err, "--level: 'loud' is not debug, info, warn or error");
    CHECK(load(&c, err, sizeof(err), (const char *[]){"--level", "3", NULL}) == 0);
    CHECK_STR(c.level, "debug"); /* deprecated digit stored as the word */
    CHECK(load(&c, err, sizeof(err), (const char *[]){"--level", "warn", NULL}) == 0);
    CHECK_STR(c.level, "warn");
    CHECK(load(&c, err, sizeof(err), (const char *[]){"--port", "1", "--help", NULL}) ==
          FENCE_OPTS_HELP);
    CHECK(load(&c, err, sizeof(err), (const char *[]){"--version", NULL}) ==
          FENCE_OPTS_VERSION);
}

/* Directives, comments, trimming; the first bad line is reported with
 * its file and number; "config" is refused inside a file. */
static void test_text(void)
{
    cfg c;
    char err[512];
    const char *ok = "# comment\n\n  port   81  \nbuf-max 2k\nflag\nname x y\n";
    fence__opts_defaults(&spec, &c);
    CHECK(fence__opts_parse_text(&spec, &c, ok, strlen(ok), "f.conf", err,
                                 sizeof(err)) == 0);
    CHECK(c.port == 81 && c.buf == 2048 && c.flag);
    CHECK_STR(c.name, "x y");
    const char *bad = "port 82\n# x\nport 99999\n";
    CHECK(fence__opts_parse_text(&spec, &c, bad, strlen(bad), "f.conf", err,
                                 sizeof(err)) == -1);
    CHECK_STR(err, "f.conf:3: port: 99999 is out of range 1..65535");
    CHECK(c.port == 82); /* lines before the bad one were applied */
    const char *unk = "nothing 1\n";
    CHECK(fence__opts_parse_text(&spec, &c, unk, strlen(unk), "f.conf", err,
                                 sizeof(err)) == -1);
    CHECK_STR(err, "f.conf:1: unknown directive 'nothing'");
    const char *conf = "config other.conf\n";
    CHECK(fence__opts_parse_text(&spec, &c, conf, strlen(conf), "f.conf", err,
                                 sizeof(err)) == -1);
    CHECK_STR(err, "f.conf:1: unknown directive 'config'");
    const char nul[] = "port 1\0\n";
    CHECK(fence__opts_parse_text(&spec, &c, nul, sizeof(nul) - 1, "f.conf", err,
                                 sizeof(err)) == -1);
    CHECK_STR(err, "f.conf:1: NUL byte in line");
}

/* One pair of matching quotes around a value is stripped (issue 20: a
 * quoted data-dir kept its quotes); an unmatched one names file:line. */
static void test_quotes(void)
{
    cfg c;
    char err[512];
    fence__opts_defaults(&spec, &c);
    const char *dq = "dir \"./qd\"\nname 'a b'\n";
    CHECK(fence__opts_parse_text(&spec, &c, dq, strlen(dq), "f.conf", err,
                                 sizeof(err)) == 0);
    CHECK_STR(c.dir, "./qd");
    CHECK_STR(c.name, "a b");
    const char *inner = "name \"'x'\"\n"; /* only the outer pair goes */
    CHECK(fence__opts_parse_text(&spec, &c, inner, strlen(inner), "f.conf", err,
                                 sizeof(err)) == 0);
    CHECK_STR(c.name, "'x'");
    const char *mid = "name a\"b\n"; /* not at the start: kept */
    CHECK(fence__opts_parse_text(&spec, &c, mid, strlen(mid), "f.conf", err,
                                 sizeof(err)) == 0);
    CHECK_STR(c.name, "a\"b");
    const char *port = "port \"83\"\n";
    CHECK(fence__opts_parse_text(&spec, &c, port, strlen(port), "f.conf", err,
                                 sizeof(err)) == 0);
    CHECK(c.port == 83);
    const char *open1 = "port 84\ndir \"./qd\n";
    CHECK(fence__opts_parse_text(&spec, &c, open1, strlen(open1), "f.conf", err,
                                 sizeof(err)) == -1);
    CHECK_STR(err, "f.conf:2: dir: unmatched \" in value");
    const char *mixed = "name 'x\"\n";
    CHECK(fence__opts_parse_text(&spec, &c, mixed, strlen(mixed), "f.conf", err,
                                 sizeof(err)) == -1);
    CHECK_STR(err, "f.conf:1: name: unmatched ' in value");
    const char *lone = "name \"\n";
    CHECK(fence__opts_parse_text(&spec, &c, lone, strlen(lone), "f.conf", err,
                                 sizeof(err)) == -1);
    const char *empty = "dir \"\"\n"; /* "" is the empty value: refused here */
    CHECK(fence__opts_parse_text(&spec, &c, empty, strlen(empty), "f.conf", err,
                                 sizeof(err)) == -1);
    CHECK(strstr(err, "f.conf:1: dir") == err);
}

/* --config is read before the flags, whatever their order; flags win. */
static void test_config_file(void)
{
    cfg c;
    char err[512], path[64];
    snprintf(path, sizeof(path), "/tmp/test_common_options.%d", (int)getpid());
    FILE *f = fopen(path, "w");
    REQUIRE(f != NULL);
    fputs("port 90\nname file\n", f);
    fclose(f);
    CHECK(load(&c, err, sizeof(err),
               (const char *[]){"--port", "91", "--config", path, NULL}) == 0);
    CHECK(c.port == 91);
    CHECK_STR(c.name, "file");
    CHECK_STR(c.config, path);
    f = fopen(path, "w");
    REQUIRE(f != NULL);
    fputs("port 90\nport abc\n", f);
    fclose(f);
    CHECK(load(&c, err, sizeof(err), (const char *[]){"--config", path, NULL}) == -1);
    char want[160];
    snprintf(want, sizeof(want), "%s:2: port: 'abc' is not a number in 1..65535", path);
    CHECK_STR(err, want);
    unlink(path);
    CHECK(load(&c, err, sizeof(err), (const char *[]){"--config", path, NULL}) == -1);
    CHECK(strstr(err, "cannot open") != NULL);
}

/* --help lists every row with bounds and defaults, aliases as deprecated. */
static void test_help(void)
{
    char buf[4096];
    FILE *f = fmemopen(buf, sizeof(buf), "w");
    REQUIRE(f != NULL);
    fence__opts_help(&spec, f);
    fence__opts_version(&spec, f);
    fclose(f);
    CHECK(strstr(buf, "usage: prog ") != NULL);
    CHECK(strstr(buf, "Summary.") != NULL);
    CHECK(strstr(buf, "--port <port>") != NULL);
    CHECK(strstr(buf, "range 1..65535, default 7700") != NULL);
    CHECK(strstr(buf, "default \"abc\"") != NULL);
    CHECK(strstr(buf, "deprecated spelling of --max-buf") != NULL);
    CHECK(strstr(buf, "--version") != NULL);
    CHECK(strstr(buf, "Footer.") != NULL);
    CHECK(strstr(buf, "prog 9.9\n") != NULL);
}

int main(void)
{
    TEST_RUN(test_flags);
    TEST_RUN(test_flag_errors);
    TEST_RUN(test_text);
    TEST_RUN(test_quotes);
    TEST_RUN(test_config_file);
    TEST_RUN(test_help);
    return TEST_DONE();
}
