/* `fencectl elect NAME VALUE -- CMD`: campaign for the election NAME with
 * VALUE, run CMD while this process leads (its token in $FENCE_TOKEN, as
 * `fencectl lock` does), renew the lease, and stop CMD's process group
 * (SIGTERM, then SIGKILL after --grace) when leadership is lost: the lease
 * gone or about to run out unrenewed, or another leader elected (hold.c).
 * When CMD ends, resign and revoke the lease.  `fencectl elect --observe
 * NAME` prints each leader as it changes (ELECTION.OBSERVE, any node). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/limits.h"
#include "fencectl/cli.h"
#include "fencectl/hold.h"

static const char usage[] =
    "usage: fencectl [--server HOST:PORT[,...]] [--timeout MS] elect [--ttl MS] [--wait MS]\n"
    "                [--grace MS] NAME VALUE -- CMD [ARGS...]\n"
    "       fencectl [--server HOST:PORT[,...]] elect --observe NAME [--count N]\n"
    "\n"
    "  Campaign for the election NAME (queued FIFO behind other candidates) with\n"
    "  VALUE (0..4096 bytes, e.g. this host's address) under a lease of --ttl ms\n"
    "  (default 10000), renewed every ttl/3.  Once elected, run CMD with\n"
    "  FENCE_TOKEN (the leader's fencing token: send it with every write),\n"
    "  FENCE_LEASE, FENCE_ELECTION and FENCE_SERVER in its environment, in its own\n"
    "  process group.  When leadership is lost (lease lost or about to expire\n"
    "  unrenewed, or another leader elected) CMD's group gets SIGTERM, then\n"
    "  SIGKILL after --grace ms (default ttl/4), and fencectl exits 79.  When CMD\n"
    "  exits, fencectl resigns, revokes the lease and exits with CMD's status.\n"
    "  --wait MS: give up (exit 75) if not elected within MS (default: wait on).\n"
    "\n"
    "  --observe: print the election's state now and each change after it, one\n"
    "  line each: \"rev R token T lease L VALUE\" or \"rev R no leader\"; --count N\n"
    "  stops after N lines.  Any node answers (followers too).\n";

typedef struct elect_args {
    fencectl_args base;   /* servers, timeout, TLS, login (fencectl_open) */
    bool observe;
    uint64_t count;       /* --observe --count (0: forever) */
    const char *value;
} elect_args;

bool fencectl_is_elect(int argc, char **argv)
{
    return fencectl_is_verb(argc, argv, "elect");
}

static int usage_error(const char *what, const char *arg)
{
    fprintf(stderr, "fencectl: elect: %s%s%s\n%s", what, arg ? " " : "", arg ? arg : "", usage);
    return FENCECTL_EXIT_USAGE;
}

/* Parse the command line; 1: --help printed. */
static int parse(int argc, char **argv, elect_args *a)
{
    memset(a, 0, sizeof(*a));
    a->base.ttl_ms = 10000;
    a->base.wait_ms = 0; /* wait on */
    const char *pos[2] = {NULL, NULL};
    int n_pos = 0;
    int i = 1;
    for (; i < argc; i++) {
        const char *s = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        const char *err = NULL, *err_arg = NULL;
        int took;
        if (strcmp(s, "--") == 0) {
            i++;
            break;
        } else if (strcmp(s, "elect") == 0 && a->base.name == NULL && n_pos == 0 &&
                   a->base.cmd == FENCECTL_NONE) {
            a->base.cmd = FENCECTL_LOCK; /* seen the verb */
        } else if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0) {
            fputs(usage, stdout);
            return 1;
        } else if (strcmp(s, "--observe") == 0) {
            a->observe = true;
        } else if (strcmp(s, "--count") == 0 && v != NULL) {
            if (!fencectl_parse_ms(v, UINT64_MAX, &a->count))
                return usage_error("bad number for", s);
            i++;
        } else if ((took = fencectl_hold_option(&a->base, argc, argv, &i, false, &err,
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
    if (a->observe) {
        if (n_pos > 1 || i < argc)
            return usage_error("--observe takes NAME only", NULL);
        return 0;
    }
    if (n_pos < 2)
        return usage_error("VALUE is missing", NULL);
    a->value = pos[1];
    if (strlen(a->value) > FENCE_ELECTION_VALUE_MAX)
        return usage_error("VALUE is longer than 4096 bytes", NULL);
    if (i >= argc)
        return usage_error("a command is needed after --", NULL);
    a->base.cmd_argv = argv + i;
    a->base.cmd_argc = argc - i;
    if (!a->base.grace_set)
        a->base.grace_ms = a->base.ttl_ms / 4;
    return 0;
}

/* ---- --observe ---------------------------------------------------------------- */

static void print_state(const fence_election_state *st)
{
    if (st->has_leader)
        printf("rev %" PRIu64 " token %" PRIu64 " lease %" PRIu64 " %s\n", st->revision,
               st->token, st->lease, st->value);
    else
        printf("rev %" PRIu64 " no leader\n", st->revision);
    fflush(stdout);
}

static int observe(const elect_args *a)
{
    fence_client *c = fencectl_open(&a->base);
    fence_election_state *st = malloc(sizeof(*st));
    fence_election_state *nx = malloc(sizeof(*nx));
    if (st == NULL || nx == NULL) {
        fprintf(stderr, "fencectl: elect: out of memory\n");
        return FENCECTL_EXIT_ERROR;
    }
    int rc = fence_election_observe(c, a->base.name, FENCE_ELECTION_NOW, 0, st);
    uint64_t printed = 0;
    if (rc == 0) {
        print_state(st);
        printed++;
    }
    while (rc == 0 && (a->count == 0 || printed < a->count)) {
        rc = fence_election_observe(c, a->base.name, st->revision, 30000, nx);
        if (rc != 0 || !nx->changed)
            continue;
        /* Each leader as it changes: a new revision with the same leader
         * and value (a gone election's revision moving) is not printed. */
        bool same = nx->has_leader == st->has_leader && nx->token == st->token &&
                    nx->value_len == st->value_len &&
                    memcmp(nx->value, st->value, nx->value_len) == 0;
        fence_election_state *t = st;
        st = nx;
        nx = t;
        if (!same) {
            print_state(st);
            printed++;
        }
    }
    if (rc != 0) {
        const char *msg = fence_client_errmsg(c);
        fprintf(stderr, "fencectl: elect --observe \"%s\": %s%s%s\n", a->base.name,
                fence_strerror(rc), msg[0] ? ": " : "", msg);
    }
    free(st);
    free(nx);
    fence_client_close(c);
    return rc == 0 ? FENCECTL_EXIT_OK : fencectl_exit_code(rc);
}

/* ---- Leading (hold.c runs CMD) ---------------------------------------------- */

/* The candidacy, for the callbacks. */
typedef struct leading {
    const elect_args *a;
    fence_election_state *st; /* the renewal thread's, for its leader check */
} leading;

/* Campaign until elected (or --wait runs out or the lease is lost). */
static int elect_grant(fencectl_hold *hd, fence_client *c)
{
    const leading *l = hd->ctx;
    const elect_args *a = l->a;
    fprintf(stderr, "fencectl: elect \"%s\": campaigning with lease %" PRIu64 "\n",
            a->base.name, hd->lease);
    uint64_t start = fence_monotonic_ms();
    int rc;
    for (;;) {
        /* One wait as long as the server allows: a campaign again after a
         * wait ran out queues at the end of the line. */
        uint32_t chunk = (uint32_t)FENCE_WAIT_MS_MAX;
        if (a->base.wait_ms > 0) {
            uint64_t spent = fence_monotonic_ms() - start;
            if (spent >= a->base.wait_ms)
                return FENCE_EBUSY;
            if (a->base.wait_ms - spent < chunk)
                chunk = (uint32_t)(a->base.wait_ms - spent);
        }
        rc = fence_election_campaign(c, a->base.name, hd->lease, a->value, strlen(a->value),
                                     chunk, &hd->token);
        if (rc != FENCE_EBUSY)
            break;
        if (fencectl_hold_lost(hd))
            return FENCE_ELEASELOST;
    }
    if (rc == 0)
        fprintf(stderr, "fencectl: elect \"%s\": elected (token %" PRIu64 ", lease %" PRIu64
                ")\n", a->base.name, hd->token, hd->lease);
    return rc;
}

/* From the renewal thread: is the election's leader still our token? */
static const char *elect_check(fencectl_hold *hd, fence_client *ka)
{
    const leading *l = hd->ctx;
    if (l->st != NULL && fence_election_leader(ka, l->a->base.name, l->st) == 0 &&
        (!l->st->has_leader || l->st->token != hd->token))
        return "another leader was elected";
    return NULL;
}

static int elect_env(fencectl_hold *hd, char *buf, size_t cap, int max)
{
    const leading *l = hd->ctx;
    int m = 0;
    FENCE_ASSERT(max >= 1);
    snprintf(buf + (size_t)m++ * cap, cap, "FENCE_ELECTION=%s", l->a->base.name);
    return m;
}

static int elect_resign(fencectl_hold *hd, fence_client *c)
{
    const leading *l = hd->ctx;
    bool resigned = false;
    return fence_election_resign(c, l->a->base.name, hd->token, &resigned);
}

static int lead(const elect_args *a)
{
    static const char *const ours[] = {"FENCE_ELECTION=", NULL};
    leading *l = calloc(1, sizeof(*l));
    fencectl_hold *hd = calloc(1, sizeof(*hd));
    if (l == NULL || hd == NULL) {
        fprintf(stderr, "fencectl: elect: out of memory\n");
        free(l);
        free(hd);
        return FENCECTL_EXIT_ERROR;
    }
    l->a = a;
    l->st = malloc(sizeof(*l->st)); /* NULL: no leader check, the lease still fences */
    hd->a = &a->base;
    snprintf(hd->what, sizeof(hd->what), "elect \"%s\"", a->base.name);
    hd->env_names = ours;
    hd->grant = elect_grant;
    hd->env = elect_env;
    hd->release = elect_resign;
    hd->check = elect_check;
    hd->lost_what = "leadership lost";
    hd->ctx = l;
    int code = fencectl_hold_run(hd);
    free(l->st);
    free(hd);
    free(l);
    return code;
}

int fencectl_cmd_elect(int argc, char **argv)
{
    elect_args a;
    int rv = parse(argc, argv, &a);
    if (rv == 1)
        return FENCECTL_EXIT_OK;
    if (rv != 0)
        return rv;
    return a.observe ? observe(&a) : lead(&a);
}
