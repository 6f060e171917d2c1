/* Run CMD under a lease of its own that fencectl renews (hold.c): the
 * supervisor that `fencectl sem`, `fencectl multi` and `fencectl elect`
 * share.  The caller
 * fills a fencectl_hold with what differs (the grant under the lease, the
 * variables for CMD's environment, the release) and calls
 * fencectl_hold_run(). */
#ifndef FENCECTL_HOLD_H
#define FENCECTL_HOLD_H

#include <stdbool.h>
#include <stdint.h>

#include "base/limits.h"
#include "fencectl/args.h"
#include "fence.h"

typedef struct fencectl_hold fencectl_hold;

struct fencectl_hold {
    const fencectl_args *a; /* servers, ttl, wait, grace, signed, cmd_argv */
    /* How messages name what is held: set by the caller (`sem "jobs"`);
     * grant may refine it once granted (`sem "jobs" slot 0`). */
    char what[FENCE_NAME_MAX + 64];
    /* The environment variables CMD gets from the caller's env (prefixes
     * "FENCE_SEM="), NULL ended: inherited ones of these names are dropped
     * (FENCE_TOKEN=, FENCE_LEASE= and FENCE_SERVER=, hold.c's own, always). */
    const char *const *env_names;
    /* Take what is held with the lease h->lease (h->token set on success);
     * a libfence error code (the caller's messages are hold.c's). */
    int (*grant)(fencectl_hold *h, fence_client *c);
    /* CMD's variables besides FENCE_TOKEN, FENCE_LEASE and FENCE_SERVER
     * (hold.c's), "NAME=VALUE" strings into buf[0..max) of cap bytes each;
     * returns how many.  Called before fork(). */
    int (*env)(fencectl_hold *h, char *buf, size_t cap, int max);
    /* Release what is held by its token (harmless when it has moved on);
     * a libfence error code. */
    int (*release)(fencectl_hold *h, fence_client *c);
    /* Optional: called by the renewal thread after each keepalive that
     * succeeded, once granted, with the thread's own client: why what is
     * held is lost now ("another leader was elected"), or NULL. */
    const char *(*check)(fencectl_hold *h, fence_client *ka);
    /* Optional: what the last message calls the loss; "lease lost" if NULL. */
    const char *lost_what;
    void *ctx;      /* the caller's */
    void *state;    /* hold.c's own, set by fencectl_hold_run */
    uint64_t lease; /* set by fencectl_hold_run */
    uint64_t token; /* set by grant */
};

/* Grant a lease of a->ttl_ms, renew it every ttl/3 from a thread, grant,
 * run CMD in its own process group with our variables and FENCE_SERVER,
 * forward signals to it, stop it (SIGTERM, SIGKILL after a->grace_ms) when
 * the lease is lost or about to run out unrenewed; then release and revoke
 * the lease.  Returns the exit code: CMD's status (128+N for signal N),
 * FENCECTL_EXIT_LEASE_LOST after trouble, else the grant's error's code. */
int fencectl_hold_run(fencectl_hold *h);

/* The options that sem, multi and elect share, at argv[*i] (its value at
 * argv[*i + 1]): --server, --timeout, --ttl, --wait, --grace (sets
 * a->grace_set) and, when with_signed, --signed.  Returns 1 when taken
 * (*i moved past its value), 0 when argv[*i] is none of these (or lacks its
 * value), -1 on a bad value: *err and *err_arg say why, for a usage error. */
int fencectl_hold_option(fencectl_args *a, int argc, char **argv, int *i, bool with_signed,
                         const char **err, const char **err_arg);

/* True once the lease is lost (a grant's long wait may stop on it). */
bool fencectl_hold_lost(const fencectl_hold *h);

#endif /* FENCECTL_HOLD_H */
