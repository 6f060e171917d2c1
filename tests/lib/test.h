/* A tiny test harness for the C test programs.
 *
 * Each test program is a main() that calls TEST_RUN(fn) for every case.  A
 * case runs in a forked child (so a crash or an abort fails only that case),
 * with an alarm as its timeout.  Output is TAP-like, "ok - name" or
 * "not ok - name", which tests/run.sh counts.  CHECK() records a failure and
 * goes on; REQUIRE() stops the case.
 *
 *   static void test_tokens_increase(void) { CHECK_EQ_U64(a, b); }
 *   int main(void) { TEST_RUN(test_tokens_increase); return TEST_DONE(); }
 */
#ifndef FENCE_TEST_H
#define FENCE_TEST_H

#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int test__failures_in_case;
static int test__cases_failed;
static int test__cases_run;

#define CHECK(cond)                                                        \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stdout, "#   %s:%d: CHECK(%s) failed\n", __FILE__,     \
                    __LINE__, #cond);                                      \
            test__failures_in_case++;                                      \
        }                                                                  \
    } while (0)

#define REQUIRE(cond)                                                      \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stdout, "#   %s:%d: REQUIRE(%s) failed\n", __FILE__,   \
                    __LINE__, #cond);                                      \
            fflush(stdout);                                                \
            _exit(1);                                                      \
        }                                                                  \
    } while (0)

#define CHECK_EQ_U64(a, b)                                                 \
    do {                                                                   \
        uint64_t test__a = (uint64_t)(a), test__b = (uint64_t)(b);         \
        if (test__a != test__b) {                                          \
            fprintf(stdout, "#   %s:%d: %s == %s failed: %" PRIu64         \
                    " != %" PRIu64 "\n", __FILE__, __LINE__, #a, #b,       \
                    test__a, test__b);                                     \
            test__failures_in_case++;                                      \
        }                                                                  \
    } while (0)

#define CHECK_EQ_I64(a, b)                                                 \
    do {                                                                   \
        int64_t test__a = (int64_t)(a), test__b = (int64_t)(b);            \
        if (test__a != test__b) {                                          \
            fprintf(stdout, "#   %s:%d: %s == %s failed: %" PRId64         \
                    " != %" PRId64 "\n", __FILE__, __LINE__, #a, #b,       \
                    test__a, test__b);                                     \
            test__failures_in_case++;                                      \
        }                                                                  \
    } while (0)

#define CHECK_STR(a, b)                                                    \
    do {                                                                   \
        const char *test__a = (a), *test__b = (b);                         \
        if (test__a == NULL || test__b == NULL || strcmp(test__a, test__b)) { \
            fprintf(stdout, "#   %s:%d: %s == %s failed: \"%s\" != \"%s\"\n", \
                    __FILE__, __LINE__, #a, #b, test__a ? test__a : "(null)", \
                    test__b ? test__b : "(null)");                         \
            test__failures_in_case++;                                      \
        }                                                                  \
    } while (0)

/* Seconds a single case may take (override before including). */
#ifndef TEST_CASE_TIMEOUT_S
#define TEST_CASE_TIMEOUT_S 120
#endif

static inline void test__run(void (*fn)(void), const char *name)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(2);
    }
    if (pid == 0) {
        alarm(TEST_CASE_TIMEOUT_S);
        test__failures_in_case = 0;
        fn();
        fflush(stdout);
        _exit(test__failures_in_case ? 1 : 0);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
    }
    test__cases_run++;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        printf("ok - %s\n", name);
    } else {
        test__cases_failed++;
        if (WIFSIGNALED(status))
            printf("#   killed by signal %d%s\n", WTERMSIG(status),
                   WTERMSIG(status) == SIGALRM ? " (timeout)" : "");
        printf("not ok - %s\n", name);
    }
    fflush(stdout);
}

#define TEST_RUN(fn) test__run((fn), #fn)
#define TEST_DONE() (test__cases_failed ? 1 : 0)

#endif /* FENCE_TEST_H */
