/* Running one case of the core's allocation-failure tests in a child.
 *
 * A failed allocation inside apply stops the process (fence__fatal), so
 * the tests that make allocations fail run each case in a forked child,
 * with its stderr in a pipe, and then look at how it ended: stopped with
 * the out-of-memory message, or exited with a code of the test's own.
 * Included by test_core.c, test_core_model.c and test_core_diverge.c
 * (after ../lib/test.h). */
#ifndef FENCE_TEST_CORE_FORK_H
#define FENCE_TEST_CORE_FORK_H

#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Run fn(arg) in a child whose stderr goes to a pipe; fn ends the child
 * itself (_exit) or returns (exit status 0).  Returns the child's wait
 * status; err receives what it wrote to stderr (at most cap - 1 bytes,
 * NUL-terminated). */
static int fork_case(void (*fn)(void *), void *arg, char *err, size_t cap)
{
    int pfd[2];
    REQUIRE(pipe(pfd) == 0);
    fflush(stdout);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        close(pfd[0]);
        dup2(pfd[1], 2);
        close(pfd[1]);
        fn(arg);
        fflush(stdout);
        _exit(0);
    }
    close(pfd[1]);
    size_t len = 0;
    ssize_t got;
    while (len < cap - 1 && (got = read(pfd[0], err + len, cap - 1 - len)) > 0) {
        len += (size_t)got;
    }
    err[len] = '\0';
    close(pfd[0]);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    return status;
}

/* True when the child stopped as a replica must when an allocation fails
 * inside apply: SIGABRT after "fatal: out of memory while ...". */
static bool stopped_for_oom(int status, const char *err)
{
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT &&
           strstr(err, "fatal: out of memory while") != NULL;
}

/* True when the child exited with this code. */
static bool exited_with(int status, int code)
{
    return WIFEXITED(status) && WEXITSTATUS(status) == code;
}

#endif /* FENCE_TEST_CORE_FORK_H */
