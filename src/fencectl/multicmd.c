/* `fencectl multi NAME... -- CMD`: take every NAME at once (LOCK.MULTI)
 * under a lease of its own, run CMD while holding them with the one token
 * valid at each name in $FENCE_TOKEN and the names, space-separated, in
 * $FENCE_LOCKS; renew the lease and stop CMD's process group when it is
 * lost (hold.c).  When CMD ends, UNLOCK by the token (it releases every
 * name) and revoke the lease. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/assert.h"
#include "base/limits.h"
#include "fencectl/cli.h"
#include "fencectl/hold.h"

static const char usage[] =
    "usage: fencectl [--server HOST:PORT[,...]] [--timeout MS] multi [--ttl MS] [--wait MS]\n"
    "                [--grace MS] [--signed] NAME... -- CMD [ARGS...]\n"
    "\n"
    "  Take every NAME (1..64 distinct names) at once, all or none (LOCK.MULTI),\n"
    "  under a lease of --ttl ms (default 10000), renewed every ttl/3.  Run CMD\n"
    "  with FENCE_TOKEN (the one fencing token, valid at every NAME: hand it to\n"
    "  each resource), FENCE_LOCKS (the names in the order given, separated by\n"
    "  one space), FENCE_LEASE and FENCE_SERVER in its environment, in its own\n"
    "  process group.  A NAME may not hold a space, a tab or a newline, nor be\n"
    "  an option word of LOCK.MULTI (WAIT, REQID, LOCKDELAY, SIGNED, SHARED).\n"
    "  If the lease is lost, or renewals fail until --grace before it ends, CMD's\n"
    "  group gets SIGTERM, then SIGKILL after --grace ms (default ttl/4), and\n"
    "  fencectl exits 79.  When CMD exits, fencectl unlocks by the token (every\n"
    "  name is released), revokes the lease and exits with CMD's status (128+N\n"
    "  if killed by signal N).\n"
    "  --wait MS: wait up to MS for all the names (default 30000; 0: try once);\n"
    "  exit 75 when they did not come (nothing is held then).  --signed: ask for\n"
    "  signed tokens and set FENCE_SIGNED_TOKENS too: one per name, in the order\n"
    "  of FENCE_LOCKS, separated by one space (each signed for its name alone).\n";

typedef struct multi_args {
    fencectl_args base; /* servers, timeout, ttl, wait, grace, signed, cmd */
    const char *names[FENCE_MULTI_NAMES];
    size_t count;
} multi_args;

/* What is held, for CMD's environment. */
typedef struct held {
    const multi_args *a;
    char signed_tok[FENCE_MULTI_NAMES][FENCE_SIGNED_TOKEN_BUF_SIZE]; /* with --signed */
} held;

bool fencectl_is_multi(int argc, char **argv)
{
    return fencectl_is_verb(argc, argv, "multi");
}

static int usage_error(const char *what, const char *arg)
{
    fprintf(stderr, "fencectl: multi: %s%s%s%s\n%s", what, arg ? " \"" : "", arg ? arg : "",
            arg ? "\"" : "", usage);
    return FENCECTL_EXIT_USAGE;
}

/* Why name cannot be one of a multi-lock's names, or NULL. */
static const char *bad_name(const char *name)
{
    static const char *const words[] = {"WAIT", "REQID", "LOCKDELAY", "SIGNED", "SHARED"};
    size_t n = strlen(name);
    if (n == 0 || n > FENCE_NAME_MAX)
        return "a NAME wants 1..256 bytes:";
    if (strpbrk(name, " \t\n\r") != NULL)
        return "a NAME may not hold a space, tab or newline (FENCE_LOCKS separates by spaces):";
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        if (strcasecmp(name, words[i]) == 0)
            return "a NAME spelled like an option word of LOCK.MULTI cannot be part of a "
                   "multi-lock (take it alone with fencectl lock):";
    return NULL;
}

/* Parse the command line; 1: --help printed. */
static int parse(int argc, char **argv, multi_args *a)
{
    memset(a, 0, sizeof(*a));
    a->base.ttl_ms = 10000;
    a->base.wait_ms = 30000;
    bool verb = false, dashes = false;
    int i = 1;
    for (; i < argc; i++) {
        const char *s = argv[i];
        const char *err = NULL, *err_arg = NULL;
        int took;
        if (strcmp(s, "--") == 0) {
            dashes = true;
            i++;
            break;
        } else if (strcmp(s, "multi") == 0 && !verb && a->count == 0) {
            verb = true;
        } else if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0) {
            fputs(usage, stdout);
            return 1;
        } else if ((took = fencectl_hold_option(&a->base, argc, argv, &i, true, &err,
                                                &err_arg)) != 0) {
            if (took < 0)
                return usage_error(err, err_arg);
        } else if (s[0] == '-' && s[1] != '\0') {
            return usage_error("unknown option", s);
        } else {
            const char *why = bad_name(s);
            if (why != NULL)
                return usage_error(why, s);
            if (a->count == FENCE_MULTI_NAMES)
                return usage_error("at most 64 names, not more; from", s);
            for (size_t j = 0; j < a->count; j++)
                if (strcmp(a->names[j], s) == 0)
                    return usage_error("a NAME given twice:", s);
            a->names[a->count++] = s;
        }
    }
    if (a->count == 0)
        return usage_error("NAME... (1..64 names) is missing", NULL);
    if (!dashes || i >= argc)
        return usage_error("a command is needed after --", NULL);
    a->base.name = a->names[0];
    a->base.cmd_argv = argv + i;
    a->base.cmd_argc = argc - i;
    if (!a->base.grace_set)
        a->base.grace_ms = a->base.ttl_ms / 4;
    return 0;
}

static int multi_grant(fencectl_hold *hd, fence_client *c)
{
    held *h = hd->ctx;
    const multi_args *a = h->a;
    if (a->count == 1)
        fencectl_say_waiting(c, a->names[0], a->base.wait_ms);
    if (a->base.signed_token)
        return fence_lease_lock_multi_signed(c, hd->lease, a->names, a->count, a->base.wait_ms,
                                             &hd->token, h->signed_tok);
    return fence_lease_lock_multi(c, hd->lease, a->names, a->count, a->base.wait_ms,
                                  &hd->token);
}

/* Append "<sep>item" to buf (cap bytes, *len used); false if it does not fit. */
static bool append(char *buf, size_t cap, size_t *len, const char *item, bool sep)
{
    int n = snprintf(buf + *len, cap - *len, "%s%s", sep ? " " : "", item);
    if (n < 0 || (size_t)n >= cap - *len)
        return false;
    *len += (size_t)n;
    return true;
}

static int multi_env(fencectl_hold *hd, char *buf, size_t cap, int max)
{
    const held *h = hd->ctx;
    const multi_args *a = h->a;
    int m = 0;
    FENCE_ASSERT(max >= 2);
    /* hold.c's cap holds 64 names or signed tokens, space-separated. */
    char *locks = buf + (size_t)m++ * cap;
    size_t len = 0;
    bool ok = append(locks, cap, &len, "FENCE_LOCKS=", false);
    for (size_t i = 0; i < a->count; i++)
        ok = ok && append(locks, cap, &len, a->names[i], i > 0);
    if (a->base.signed_token) {
        char *toks = buf + (size_t)m++ * cap;
        len = 0;
        ok = ok && append(toks, cap, &len, "FENCE_SIGNED_TOKENS=", false);
        for (size_t i = 0; i < a->count; i++)
            ok = ok && append(toks, cap, &len, h->signed_tok[i], i > 0);
    }
    FENCE_ASSERT(ok);
    return m;
}

static int multi_release(fencectl_hold *hd, fence_client *c)
{
    const held *h = hd->ctx;
    bool released = false;
    return fence_token_unlock(c, h->a->names[0], hd->token, &released);
}

int fencectl_cmd_multi(int argc, char **argv)
{
    static const char *const ours[] = {"FENCE_LOCKS=", "FENCE_SIGNED_TOKENS=", NULL};
    multi_args *a = calloc(1, sizeof(*a));
    held *h = calloc(1, sizeof(*h));
    fencectl_hold *hd = calloc(1, sizeof(*hd));
    int code = FENCECTL_EXIT_ERROR;
    if (a == NULL || h == NULL || hd == NULL) {
        fprintf(stderr, "fencectl: multi: out of memory\n");
        goto out;
    }
    code = parse(argc, argv, a);
    if (code == 1) {
        code = FENCECTL_EXIT_OK;
        goto out;
    }
    if (code != 0)
        goto out;
    h->a = a;
    hd->a = &a->base;
    /* Messages name the first names (cut to fit). */
    size_t len = 0;
    bool fits = append(hd->what, sizeof(hd->what), &len, "multi", false);
    for (size_t i = 0; i < a->count && fits; i++)
        fits = append(hd->what, sizeof(hd->what), &len, a->names[i], true);
    hd->env_names = ours;
    hd->grant = multi_grant;
    hd->env = multi_env;
    hd->release = multi_release;
    hd->ctx = h;
    code = fencectl_hold_run(hd);
out:
    free(hd);
    free(h);
    free(a);
    return code;
}
