/* `fencectl sem NAME N -- CMD`: take one of the N slots of the semaphore
 * NAME under a lease of its own, run CMD while holding it (the slot's token
 * in $FENCE_TOKEN, its fence name NAME#SLOT in $FENCE_LOCK, as `fencectl
 * lock` does), renew the lease, and stop CMD's process group (SIGTERM, then
 * SIGKILL after --grace) when the lease is lost or about to run out
 * unrenewed (hold.c).  When CMD ends, release the slot and revoke the lease.
 * `fencectl sem --info NAME` prints the semaphore's slots (SEM.INFO). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/assert.h"
#include "base/limits.h"
#include "fencectl/cli.h"
#include "fencectl/hold.h"

static const char usage[] =
    "usage: fencectl [--server HOST:PORT[,...]] [--timeout MS] sem [--ttl MS] [--wait MS]\n"
    "                [--grace MS] [--signed] NAME N -- CMD [ARGS...]\n"
    "       fencectl [--server HOST:PORT[,...]] sem --info NAME\n"
    "\n"
    "  Take one of the N slots (1..1024) of the semaphore NAME (the lowest free\n"
    "  one; queued FIFO when all are taken) under a lease of --ttl ms (default\n"
    "  10000), renewed every ttl/3.  Run CMD with FENCE_TOKEN (the slot's fencing\n"
    "  token), FENCE_SLOT, FENCE_LOCK (the slot's fence name NAME#SLOT: guard the\n"
    "  resource with that name and the token), FENCE_SEM, FENCE_LEASE and\n"
    "  FENCE_SERVER in its environment, in its own process group.  If the lease\n"
    "  is lost, or renewals fail until --grace before it ends, CMD's group gets\n"
    "  SIGTERM, then SIGKILL after --grace ms (default ttl/4), and fencectl exits\n"
    "  79.  When CMD exits, fencectl releases the slot, revokes the lease and\n"
    "  exits with CMD's status (128+N if killed by signal N).\n"
    "  --wait MS: wait up to MS for a slot (default 30000; 0: try once); exit 75\n"
    "  when none came.  --signed: ask for a signed token (signed for NAME#SLOT)\n"
    "  and set FENCE_SIGNED_TOKEN too.\n"
    "\n"
    "  --info: print \"n N waiters W\", then \"slot S token T lease L remaining_ms R\"\n"
    "  for each slot held (or in lock-delay: lease 0); \"none\" when NAME is no\n"
    "  semaphore.\n";

typedef struct sem_args {
    fencectl_args base; /* servers, timeout, ttl, wait, grace */
    bool info;
    uint32_t n;
} sem_args;

bool fencectl_is_sem(int argc, char **argv)
{
    return fencectl_is_verb(argc, argv, "sem");
}

static int usage_error(const char *what, const char *arg)
{
    fprintf(stderr, "fencectl: sem: %s%s%s\n%s", what, arg ? " " : "", arg ? arg : "", usage);
    return FENCECTL_EXIT_USAGE;
}

/* Parse the command line; 1: --help printed. */
static int parse(int argc, char **argv, sem_args *a)
{
    memset(a, 0, sizeof(*a));
    a->base.ttl_ms = 10000;
    a->base.wait_ms = 30000;
    const char *pos[2] = {NULL, NULL};
    int n_pos = 0;
    bool verb = false;
    int i = 1;
    for (; i < argc; i++) {
        const char *s = argv[i];
        const char *err = NULL, *err_arg = NULL;
        int took;
        if (strcmp(s, "--") == 0) {
            i++;
            break;
        } else if (strcmp(s, "sem") == 0 && !verb && n_pos == 0) {
            verb = true;
        } else if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0) {
            fputs(usage, stdout);
            return 1;
        } else if (strcmp(s, "--info") == 0) {
            a->info = true;
        } else if ((took = fencectl_hold_option(&a->base, argc, argv, &i, true, &err,
                                                &err_arg)) != 0) {
            if (took < 0)
                return usage_error(err, err_arg);
        } else if (s[0] == '-' && s[1] != '\0') {
            return usage_error("unknown option", s);
        } else if (n_pos < 2) {
            pos[n_pos++] = s;
        } else {
            return usage_error("unexpected argument (put CMD after --):", s);
        }
    }
    if (n_pos < 1 || strlen(pos[0]) == 0 || strlen(pos[0]) > FENCE_NAME_MAX)
        return usage_error("NAME (1..256 bytes) is missing", NULL);
    a->base.name = pos[0];
    if (a->info) {
        if (n_pos > 1 || i < argc)
            return usage_error("--info takes NAME only", NULL);
        return 0;
    }
    uint64_t n = 0;
    if (n_pos < 2)
        return usage_error("N (the number of slots) is missing", NULL);
    if (!fencectl_parse_ms(pos[1], FENCE_SEM_PERMITS_MAX, &n) || n == 0)
        return usage_error("N wants 1..1024, not", pos[1]);
    a->n = (uint32_t)n;
    char digits[24];
    int d = snprintf(digits, sizeof(digits), "%" PRIu64, n - 1);
    if (strlen(a->base.name) + 1 + (size_t)d > FENCE_NAME_MAX)
        return usage_error("NAME too long: the slot names NAME#SLOT must fit 256 bytes", NULL);
    if (i >= argc)
        return usage_error("a command is needed after --", NULL);
    a->base.cmd_argv = argv + i;
    a->base.cmd_argc = argc - i;
    if (!a->base.grace_set)
        a->base.grace_ms = a->base.ttl_ms / 4;
    return 0;
}

/* ---- --info --------------------------------------------------------------------- */

static int info(const sem_args *a)
{
    fence_client *c = fencectl_open(&a->base);
    fence_sem_slot *slots = calloc(FENCE_SEM_N_MAX, sizeof(*slots));
    if (slots == NULL) {
        fprintf(stderr, "fencectl: sem: out of memory\n");
        fence_client_close(c);
        return FENCECTL_EXIT_ERROR;
    }
    fence_sem_info si;
    int rc = fence_sem_info_get(c, a->base.name, &si, slots, FENCE_SEM_N_MAX);
    if (rc != 0) {
        const char *msg = fence_client_errmsg(c);
        fprintf(stderr, "fencectl: sem --info \"%s\": %s%s%s\n", a->base.name,
                fence_strerror(rc), msg[0] ? ": " : "", msg);
    } else if (!si.exists) {
        printf("none\n");
    } else {
        printf("n %" PRIu32 " waiters %" PRIu64 "\n", si.n, si.waiters);
        for (size_t i = 0; i < si.slots_count && i < FENCE_SEM_N_MAX; i++)
            printf("slot %" PRIu32 " token %" PRIu64 " lease %" PRIu64 " remaining_ms %" PRIu64
                   "\n", slots[i].slot, slots[i].token, slots[i].lease, slots[i].remaining_ms);
    }
    fflush(stdout);
    free(slots);
    fence_client_close(c);
    return rc == 0 ? FENCECTL_EXIT_OK : fencectl_exit_code(rc);
}

/* ---- Holding a slot (hold.c runs CMD) ----------------------------------------------- */

/* The held slot, for CMD's environment. */
typedef struct held {
    const sem_args *a;
    uint32_t slot;
    char fence[FENCE_NAME_MAX + 1];               /* NAME#SLOT */
    char signed_tok[FENCE_SIGNED_TOKEN_BUF_SIZE]; /* with --signed */
} held;

/* Before a wait: when stderr is a terminal and every slot is held, say so
 * there (as fencectl lock says who holds its lock).  Errors are ignored:
 * the acquire that follows reports them. */
static void say_waiting(fence_client *c, const sem_args *a)
{
    if (a->base.wait_ms == 0 || !isatty(2))
        return;
    fence_sem_info si;
    if (fence_sem_info_get(c, a->base.name, &si, NULL, 0) != 0 || !si.exists ||
        si.slots_count < si.n)
        return;
    fprintf(stderr, "fencectl: waiting for a slot of semaphore %s (%" PRIu32 " of %" PRIu32
            " held, %" PRIu64 " waiting; up to %" PRIu32 " ms)\n", a->base.name,
            (uint32_t)si.slots_count, si.n, si.waiters, a->base.wait_ms);
}

static int sem_grant(fencectl_hold *hd, fence_client *c)
{
    held *h = hd->ctx;
    const sem_args *a = h->a;
    say_waiting(c, a);
    int rc;
    if (a->base.signed_token)
        rc = fence_sem_acquire_signed(c, a->base.name, a->n, hd->lease, a->base.wait_ms,
                                      &h->slot, &hd->token, h->signed_tok,
                                      sizeof(h->signed_tok));
    else
        rc = fence_sem_acquire(c, a->base.name, a->n, hd->lease, a->base.wait_ms, &h->slot,
                               &hd->token);
    if (rc == 0)
        rc = fence_sem_fence_name(a->base.name, h->slot, h->fence, sizeof(h->fence));
    if (rc == 0)
        snprintf(hd->what, sizeof(hd->what), "sem \"%s\" slot %" PRIu32, a->base.name,
                 h->slot);
    return rc;
}

static int sem_env(fencectl_hold *hd, char *buf, size_t cap, int max)
{
    const held *h = hd->ctx;
    const sem_args *a = h->a;
    int m = 0;
    FENCE_ASSERT(max >= 4);
    snprintf(buf + (size_t)m++ * cap, cap, "FENCE_LOCK=%s", h->fence);
    snprintf(buf + (size_t)m++ * cap, cap, "FENCE_SEM=%s", a->base.name);
    snprintf(buf + (size_t)m++ * cap, cap, "FENCE_SLOT=%" PRIu32, h->slot);
    if (a->base.signed_token)
        snprintf(buf + (size_t)m++ * cap, cap, "FENCE_SIGNED_TOKEN=%s", h->signed_tok);
    return m;
}

static int sem_release(fencectl_hold *hd, fence_client *c)
{
    const held *h = hd->ctx;
    bool released = false;
    return fence_sem_release(c, h->a->base.name, h->slot, hd->token, &released);
}

static int hold(const sem_args *a)
{
    static const char *const ours[] = {"FENCE_LOCK=", "FENCE_SEM=", "FENCE_SLOT=",
                                       "FENCE_SIGNED_TOKEN=", NULL};
    held *h = calloc(1, sizeof(*h));
    fencectl_hold *hd = calloc(1, sizeof(*hd));
    if (h == NULL || hd == NULL) {
        fprintf(stderr, "fencectl: sem: out of memory\n");
        free(h);
        free(hd);
        return FENCECTL_EXIT_ERROR;
    }
    h->a = a;
    hd->a = &a->base;
    snprintf(hd->what, sizeof(hd->what), "sem \"%s\"", a->base.name);
    hd->env_names = ours;
    hd->grant = sem_grant;
    hd->env = sem_env;
    hd->release = sem_release;
    hd->ctx = h;
    int code = fencectl_hold_run(hd);
    free(hd);
    free(h);
    return code;
}

int fencectl_cmd_sem(int argc, char **argv)
{
    sem_args a;
    int rv = parse(argc, argv, &a);
    if (rv == 1)
        return FENCECTL_EXIT_OK;
    if (rv != 0)
        return rv;
    return a.info ? info(&a) : hold(&a);
}
