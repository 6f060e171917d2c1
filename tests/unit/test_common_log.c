/* src/base/log: the shared line format, level words, the level check
 * before formatting, and reopen after a logrotate-style rename. */
#include <errno.h>
#include <regex.h>
#include <stdbool.h>
#include <stdio.h>

#include "base/log.h"
#include "../lib/test.h"

/* Read a whole small file into buf (NUL-terminated). */
static size_t slurp(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        buf[0] = '\0';
        return 0;
    }
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
    return n;
}

/* True if text matches the extended regular expression re. */
static bool matches(const char *text, const char *re)
{
    regex_t r;
    if (regcomp(&r, re, REG_EXTENDED | REG_NEWLINE) != 0)
        return false;
    bool m = regexec(&r, text, 0, NULL, 0) == 0;
    regfree(&r);
    return m;
}

static int evaluated;
/* An argument with a side effect: counts how often it was evaluated. */
static int side_effect(void)
{
    return ++evaluated;
}

/* Words both ways. */
static void test_levels(void)
{
    CHECK(fence__log_level_parse("debug") == FENCE_LOG_DEBUG);
    CHECK(fence__log_level_parse("info") == FENCE_LOG_INFO);
    CHECK(fence__log_level_parse("warn") == FENCE_LOG_WARN);
    CHECK(fence__log_level_parse("error") == FENCE_LOG_ERROR);
    CHECK(fence__log_level_parse("INFO") == -1);
    CHECK(fence__log_level_parse("2") == -1);
    CHECK(fence__log_level_parse(NULL) == -1);
    CHECK_STR(fence__log_level_name(FENCE_LOG_WARN), "warn");
    CHECK_STR(fence__log_level_name(9), "?");
    CHECK(FENCE_LOG_DEBUG < FENCE_LOG_INFO);
    CHECK(FENCE_LOG_WARN < FENCE_LOG_ERROR);
}

/* One line per call: time, pid, level word, message; disabled levels are
 * neither written nor formatted. */
static void test_format(void)
{
    char path[64], buf[4096], re[256];
    snprintf(path, sizeof(path), "/tmp/test_common_log.%d", (int)getpid());
    unlink(path);
    REQUIRE(fence__log_open(FENCE_LOG_INFO, path) == 0);
    FENCE_LOG_I("hello %d", 42);
    FENCE_LOG_D("hidden %d", side_effect());
    FENCE_LOG_W("careful");
    CHECK(evaluated == 0);
    slurp(path, buf, sizeof(buf));
    snprintf(re, sizeof(re),
             "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z "
             "%d info hello 42\n[^\n]* %d warn careful\n$",
             (int)getpid(), (int)getpid());
    CHECK(matches(buf, re));
    CHECK(strstr(buf, "hidden") == NULL);
    char big[FENCE_LOG_LINE_MAX * 2];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    FENCE_LOG_E("%s", big);
    size_t n = slurp(path, buf, sizeof(buf));
    CHECK(n > 0 && buf[n - 1] == '\n'); /* a cut line still ends the line */
    fence__log_close();
    unlink(path);
}

/* --log-format json: one object a line, the message escaped; a cut line is
 * still a whole object. */
static void test_json(void)
{
    char path[64], buf[8192], re[256];
    snprintf(path, sizeof(path), "/tmp/test_common_log_json.%d", (int)getpid());
    unlink(path);
    CHECK(fence__log_format_set("xml") == -1);
    REQUIRE(fence__log_format_set("json") == 0);
    REQUIRE(fence__log_open(FENCE_LOG_INFO, path) == 0);
    FENCE_LOG_I("say \"hi\" \\ to %s\n\x01\xff", "lock");
    slurp(path, buf, sizeof(buf));
    snprintf(re, sizeof(re),
             "^\\{\"ts\":\"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\\.[0-9]{3}Z\",\"pid\":%d,"
             "\"level\":\"info\",\"msg\":\"", (int)getpid());
    CHECK(matches(buf, re));
    CHECK(strstr(buf, "\"msg\":\"say \\\"hi\\\" \\\\ to lock\\u000a\\u0001\\u00ff\"}\n") != NULL);
    char big[FENCE_LOG_LINE_MAX * 2];
    memset(big, '"', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    FENCE_LOG_E("%s", big);
    size_t n = slurp(path, buf, sizeof(buf));
    CHECK(n > 3 && memcmp(buf + n - 3, "\"}\n", 3) == 0);
    fence__log_format_set("text");
    fence__log_close();
    unlink(path);
}

/* The audit rate limit: burst lines a second, then counted drops. */
static void test_limit(void)
{
    fence_log_limit l = {0};
    l.burst = 3;
    unsigned long dropped = 99;
    int let = 0;
    for (int i = 0; i < 10; i++)
        let += fence__log_limit_take(&l, &dropped);
    CHECK(let >= 3 && let <= 6); /* a second boundary may fall inside the loop */
    sleep(1);
    CHECK(fence__log_limit_take(&l, &dropped) == 1);
    CHECK(dropped > 0);
    CHECK(fence__log_limit_take(&l, &dropped) == 1);
    CHECK(dropped == 0);
}

/* Rename the file, reopen: new lines go to a new file at the path. */
static void test_reopen(void)
{
    char path[64], moved[80], buf[4096];
    snprintf(path, sizeof(path), "/tmp/test_common_log_r.%d", (int)getpid());
    snprintf(moved, sizeof(moved), "%s.1", path);
    unlink(path);
    unlink(moved);
    REQUIRE(fence__log_open(FENCE_LOG_DEBUG, path) == 0);
    FENCE_LOG_I("before");
    REQUIRE(rename(path, moved) == 0);
    FENCE_LOG_I("still old");
    CHECK(fence__log_reopen() == 0);
    FENCE_LOG_I("after");
    slurp(moved, buf, sizeof(buf));
    CHECK(strstr(buf, "before") != NULL);
    CHECK(strstr(buf, "still old") != NULL);
    CHECK(strstr(buf, "after") == NULL);
    slurp(path, buf, sizeof(buf));
    CHECK(strstr(buf, "after") != NULL);
    CHECK(strstr(buf, "before") == NULL);
    fence__log_close();
    CHECK(fence__log_reopen() == 0); /* on stderr: a no-op */
    CHECK(fence__log_open(FENCE_LOG_INFO, "/nonexistent/dir/log") == ENOENT);
    unlink(path);
    unlink(moved);
}

/* fence__log_fatal logs, says it stops, and aborts. */
static void test_fatal(void)
{
    char path[64], buf[4096];
    snprintf(path, sizeof(path), "/tmp/test_common_log_f.%d", (int)getpid());
    unlink(path);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        fence__log_open(FENCE_LOG_ERROR, path);
        fence__log_fatal("disk on fire: %s", "EIO");
    }
    int status;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
    slurp(path, buf, sizeof(buf));
    CHECK(strstr(buf, " error disk on fire: EIO\n") != NULL);
    CHECK(strstr(buf, " error fatal: stopping (crash-stop)\n") != NULL);
    unlink(path);
}

int main(void)
{
    TEST_RUN(test_levels);
    TEST_RUN(test_format);
    TEST_RUN(test_json);
    TEST_RUN(test_limit);
    TEST_RUN(test_reopen);
    TEST_RUN(test_fatal);
    return TEST_DONE();
}
