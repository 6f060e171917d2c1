/* fence-store flags: a table of options with bounds and defaults (Redis
 * createIntConfig style); parse into the struct, validate it as a whole. */
#include "store/config.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"

/* Kinds of option values. */
typedef enum opt_kind {
    OPT_UINT, /* decimal integer within [min, max] */
    OPT_SIZE, /* like OPT_UINT, with an optional k/m/g suffix (1024s) */
    OPT_STR,  /* string of at most the field's size - 1 bytes */
    OPT_BOOL, /* a flag without a value */
} opt_kind;

/* One option. */
typedef struct opt_def {
    const char *name;     /* flag name without "--" */
    opt_kind kind;        /* value kind */
    size_t offset;        /* field in fence_store_config */
    size_t size;          /* field size (strings) */
    uint64_t min;         /* lower bound (numbers) */
    uint64_t max;         /* upper bound (numbers) */
    uint64_t def;         /* default (numbers, bools) */
    const char *def_str;  /* default (strings) */
    const char *help;     /* one-line description */
} opt_def;

#define FIELD(f)                                                               \
    offsetof(fence_store_config, f), sizeof(((fence_store_config *)0)->f)

static const opt_def opts[] = {
    {"port", OPT_UINT, FIELD(port), 1, 65535, 7710, NULL,
     "TCP port to listen on"},
    {"bind", OPT_STR, FIELD(bind), 0, 0, 0, "127.0.0.1",
     "address to listen on (an IPv4 or IPv6 literal)"},
    {"data-dir", OPT_STR, FIELD(data_dir), 0, 0, 0, "var/fence-store",
     "directory for the LMDB files (created if missing)"},
    {"max-value", OPT_SIZE, FIELD(max_value), 1, FENCE_STORE_VALUE_MAX,
     FENCE_STORE_VALUE_DEFAULT, NULL,
     "largest value FSET accepts, in bytes (k/m/g suffixes allowed)"},
    {"map-size", OPT_SIZE, FIELD(map_size), 1024 * 1024,
     1024ull * 1024 * 1024 * 1024, 1024ull * 1024 * 1024, NULL,
     "LMDB map size: the most data the store can hold; writes beyond it "
     "get -FULL"},
    {"max-clients", OPT_UINT, FIELD(max_clients), 1, FENCE_STORE_CLIENTS_MAX,
     FENCE_STORE_CLIENTS_DEFAULT, NULL, "most client connections at once"},
    {"obuf-max", OPT_SIZE, FIELD(obuf_max), 64 * 1024,
     1024ull * 1024 * 1024, FENCE_OBUF_DEFAULT, NULL,
     "reply bytes queued for one client before it is disconnected as a "
     "slow reader (must exceed --max-value)"},
    {"log-level", OPT_UINT, FIELD(log_level), 0, 3, 2, NULL,
     "0 errors, 1 warnings, 2 info, 3 debug"},
    {"ignore-tokens", OPT_BOOL, FIELD(ignore_tokens), 0, 1, 0, NULL,
     "CONTROL MODE, UNSAFE: admit every token (lease only, no fencing); "
     "for demos and the torture harness's control run"},
};

#define NOPTS (sizeof(opts) / sizeof(opts[0]))

/* Fill every field from the table's defaults. */
void fence__store_config_default(fence_store_config *cfg)
{
    assert(cfg != NULL);
    memset(cfg, 0, sizeof(*cfg));
    for (size_t i = 0; i < NOPTS; i++) {
        char *f = (char *)cfg + opts[i].offset;
        switch (opts[i].kind) {
        case OPT_UINT:
        case OPT_SIZE:
            *(uint64_t *)(void *)f = opts[i].def;
            break;
        case OPT_STR:
            snprintf(f, opts[i].size, "%s", opts[i].def_str);
            break;
        case OPT_BOOL:
            *(bool *)f = opts[i].def != 0;
            break;
        }
    }
}

/* Print --help: every option with its bounds and default. */
static void print_help(FILE *out)
{
    fprintf(out,
            "usage: fence-store [options]\n"
            "\n"
            "A key/value server that enforces fencing tokens: a write with "
            "token T for\nfence F is admitted iff T >= the highest token "
            "admitted for F.  Speaks RESP\n(redis-cli works).  Commands: "
            "FSET FDEL FINCR FGET FENCE.HIGH FENCE.ADMIT PING INFO.\n"
            "\noptions:\n");
    for (size_t i = 0; i < NOPTS; i++) {
        const opt_def *o = &opts[i];
        char arg[48] = "";
        char bounds[96] = "";
        switch (o->kind) {
        case OPT_UINT:
        case OPT_SIZE:
            snprintf(arg, sizeof(arg), " <n>");
            snprintf(bounds, sizeof(bounds),
                     " [%" PRIu64 "..%" PRIu64 ", default %" PRIu64 "]",
                     o->min, o->max, o->def);
            break;
        case OPT_STR:
            snprintf(arg, sizeof(arg), " <s>");
            snprintf(bounds, sizeof(bounds), " [default %s]", o->def_str);
            break;
        case OPT_BOOL:
            break;
        }
        fprintf(out, "  --%s%s\n      %s%s\n", o->name, arg, o->help, bounds);
    }
    fprintf(out, "  --help\n      show this help\n");
}

/* Parse a number with an optional k/m/g suffix (sizes only). */
static int parse_number(const opt_def *o, const char *s, uint64_t *out)
{
    if (s[0] < '0' || s[0] > '9')
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0)
        return -1;
    uint64_t mult = 1;
    if (o->kind == OPT_SIZE && *end != '\0' && end[1] == '\0') {
        switch (*end) {
        case 'k': case 'K': mult = 1024; end++; break;
        case 'm': case 'M': mult = 1024 * 1024; end++; break;
        case 'g': case 'G': mult = 1024ull * 1024 * 1024; end++; break;
        default: return -1;
        }
    }
    if (*end != '\0')
        return -1;
    if (v > UINT64_MAX / mult)
        return -1;
    *out = (uint64_t)v * mult;
    return 0;
}

/* Parse flags into *cfg, then check relationships between fields. */
int fence__store_config_parse(fence_store_config *cfg, int argc, char **argv,
                              FILE *out, FILE *err)
{
    assert(cfg != NULL);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            print_help(out);
            return 1;
        }
        if (strncmp(a, "--", 2) != 0) {
            fprintf(err, "fence-store: unexpected argument '%s' (see --help)\n",
                    a);
            return -1;
        }
        a += 2;
        const char *eq = strchr(a, '=');
        size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
        const opt_def *o = NULL;
        for (size_t j = 0; j < NOPTS; j++)
            if (strlen(opts[j].name) == nlen &&
                strncmp(opts[j].name, a, nlen) == 0)
                o = &opts[j];
        if (o == NULL) {
            fprintf(err, "fence-store: unknown option '%s' (see --help)\n",
                    argv[i]);
            return -1;
        }
        char *f = (char *)cfg + o->offset;
        if (o->kind == OPT_BOOL) {
            if (eq) {
                fprintf(err, "fence-store: --%s takes no value\n", o->name);
                return -1;
            }
            *(bool *)f = true;
            continue;
        }
        const char *val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (val == NULL) {
            fprintf(err, "fence-store: --%s needs a value\n", o->name);
            return -1;
        }
        if (o->kind == OPT_STR) {
            if (val[0] == '\0' || strlen(val) >= o->size) {
                fprintf(err, "fence-store: --%s must be 1..%zu bytes\n",
                        o->name, o->size - 1);
                return -1;
            }
            snprintf(f, o->size, "%s", val);
            continue;
        }
        uint64_t v;
        if (parse_number(o, val, &v) != 0 || v < o->min || v > o->max) {
            fprintf(err,
                    "fence-store: --%s '%s' is not a number in %" PRIu64
                    "..%" PRIu64 "%s\n", o->name, val, o->min, o->max,
                    o->kind == OPT_SIZE ? " (k/m/g suffixes allowed)" : "");
            return -1;
        }
        *(uint64_t *)(void *)f = v;
    }
    if (cfg->obuf_max < cfg->max_value + 4096) {
        fprintf(err,
                "fence-store: --obuf-max (%" PRIu64 ") must exceed "
                "--max-value (%" PRIu64 ") by at least 4096, or a client "
                "could never read its largest value\n",
                cfg->obuf_max, cfg->max_value);
        return -1;
    }
    if (cfg->map_size < cfg->max_value * 4) {
        fprintf(err,
                "fence-store: --map-size (%" PRIu64 ") must be at least four "
                "times --max-value (%" PRIu64 ")\n", cfg->map_size,
                cfg->max_value);
        return -1;
    }
    return 0;
}
