/* libfence test hooks: a unit test's own lease clock.  Private (not
 * installed); tests/unit/test_client_* include it to drive the keepalive
 * thread and valid-until without real sleeps. */
#ifndef FENCE_CLIENT_TESTHOOK_H
#define FENCE_CLIENT_TESTHOOK_H

#include <stdint.h>

#include "fence.h"

/* A clock in milliseconds: what valid-until, renew times and the keepalive
 * thread's schedule are counted in.  The default is fence_monotonic_ms. */
typedef uint64_t (*fence__clock_fn)(void *arg);

/* Count c's leases in fn(arg) instead of fence_monotonic_ms.  Call it
 * before the first lock (the keepalive thread must not run yet).  Network
 * deadlines stay on CLOCK_MONOTONIC: a renewal still waits at most what is
 * left of the lease, as counted by fn. */
void fence__client_set_clock(fence_client *c, fence__clock_fn fn, void *arg);

/* Wake c's keepalive thread (after the test moved its clock) and return
 * once the thread has scanned its locks afresh and gone back to sleep:
 * every renewal, lease-lost verdict and lost callback due by then has
 * happened.  Returns at once when the thread is not running. */
void fence__ka_sync(fence_client *c);

#endif
