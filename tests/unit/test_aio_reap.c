/* src/server/aio_reap.c: fenced's syscall() passes every call through to
 * glibc except io_destroy, which the reaper thread does once it runs
 * (before that, and without it, at once).  Whether a context still exists
 * is asked with io_submit(ctx, 0, NULL): 0 for a live one, EINVAL for a
 * destroyed one.  No timings. */
#include <errno.h>
#include <stdbool.h>
#include <linux/aio_abi.h>
#include <sys/syscall.h>

#include "server/aio_reap.h"
#include "../lib/test.h"

/* A fresh AIO context (through the interposed syscall). */
static aio_context_t ctx_new(void)
{
    aio_context_t ctx = 0;
    long rv = syscall(SYS_io_setup, 1, &ctx);
    REQUIRE(rv == 0);
    REQUIRE(ctx != 0);
    return ctx;
}

/* Whether ctx is still a live context. */
static bool ctx_alive(aio_context_t ctx)
{
    errno = 0;
    long rv = syscall(SYS_io_submit, ctx, 0L, NULL);
    return rv == 0;
}

static void test_passthrough(void)
{
    CHECK(syscall(SYS_getpid) == getpid());
    errno = 0;
    CHECK(syscall(SYS_close, -1) == -1 && errno == EBADF);
}

static void test_sync_before_start(void)
{
    aio_context_t ctx = ctx_new();
    CHECK(ctx_alive(ctx));
    CHECK(syscall(SYS_io_destroy, ctx) == 0);
    CHECK(!ctx_alive(ctx) && errno == EINVAL);
    CHECK(fence__aio_reap_count() == 0);
}

static void test_reaper_destroys(void)
{
    REQUIRE(fence__aio_reap_start() == 0);
    REQUIRE(fence__aio_reap_start() == 0); /* idempotent */
    aio_context_t a = ctx_new();
    aio_context_t b = ctx_new();
    CHECK(syscall(SYS_io_destroy, a) == 0);
    CHECK(syscall(SYS_io_destroy, b) == 0);
    CHECK(fence__aio_reap_count() == 2);
    fence__aio_reap_drain();
    CHECK(!ctx_alive(a) && errno == EINVAL);
    CHECK(!ctx_alive(b) && errno == EINVAL);
    aio_context_t c = ctx_new();
    CHECK(ctx_alive(c)); /* a new context is not touched */
    CHECK(syscall(SYS_io_destroy, c) == 0);
    fence__aio_reap_drain();
    CHECK(!ctx_alive(c));
}

int main(void)
{
    TEST_RUN(test_passthrough);
    TEST_RUN(test_sync_before_start);
    TEST_RUN(test_reaper_destroys);
    return TEST_DONE();
}
