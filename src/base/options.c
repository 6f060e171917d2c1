/* The option-table engine (see options.h). */
#include "base/options.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/log.h"
#include "base/num.h"

/* Put every row's default into cfg. */
void fence__opts_defaults(const fence_opts_spec *sp, void *cfg)
{
    FENCE_ASSERT(sp != NULL);
    FENCE_ASSERT(cfg != NULL);
    for (size_t i = 0; i < sp->n_opts; i++) {
        const fence_opt *o = &sp->opts[i];
        char *field = (char *)cfg + o->offset;
        switch (o->type) {
        case FENCE_OPT_U64:
        case FENCE_OPT_SIZE:
            memcpy(field, &o->def, sizeof(uint64_t));
            break;
        case FENCE_OPT_STR:
            FENCE_ASSERT(o->cap > 0);
            snprintf(field, o->cap, "%s", o->def_str ? o->def_str : "");
            break;
        case FENCE_OPT_BOOL:
            *(bool *)(void *)field = o->def != 0;
            break;
        case FENCE_OPT_ALIAS:
            break;
        }
    }
}

/* The row with exactly this name (aliases not resolved), or NULL. */
static const fence_opt *find_row(const fence_opts_spec *sp, const char *name,
                                 size_t len)
{
    for (size_t i = 0; i < sp->n_opts; i++)
        if (strlen(sp->opts[i].name) == len &&
            memcmp(sp->opts[i].name, name, len) == 0)
            return &sp->opts[i];
    return NULL;
}

/* Look a name up, following one alias. */
const fence_opt *fence__opts_find(const fence_opts_spec *sp, const char *name,
                                  size_t len, const fence_opt **deprecated)
{
    const fence_opt *o = find_row(sp, name, len);
    if (deprecated != NULL)
        *deprecated = NULL;
    if (o == NULL || o->type != FENCE_OPT_ALIAS)
        return o;
    if (deprecated != NULL)
        *deprecated = o;
    const fence_opt *t = find_row(sp, o->def_str, strlen(o->def_str));
    FENCE_ASSERT(t != NULL);                   /* a table bug otherwise */
    FENCE_ASSERT(t->type != FENCE_OPT_ALIAS);
    return t;
}

/* Parse a boolean word. */
static int parse_bool(const char *v, bool *out)
{
    static const char *const yes[] = {"yes", "on", "true", "1"};
    static const char *const no[] = {"no", "off", "false", "0"};
    for (size_t i = 0; i < 4; i++) {
        if (strcmp(v, yes[i]) == 0) {
            *out = true;
            return 0;
        }
        if (strcmp(v, no[i]) == 0) {
            *out = false;
            return 0;
        }
    }
    return -1;
}

/* Parse one value into its field; the message names the row. */
int fence__opts_set(const fence_opts_spec *sp, void *cfg, const fence_opt *o,
                    const char *value, char *err, size_t cap)
{
    (void)sp;
    FENCE_ASSERT(o != NULL);
    FENCE_ASSERT(o->type != FENCE_OPT_ALIAS);
    char *field = (char *)cfg + o->offset;
    if (o->type == FENCE_OPT_BOOL) {
        bool b = true;
        if (value != NULL && value[0] != '\0' && parse_bool(value, &b) != 0) {
            snprintf(err, cap, "%s: '%.64s' is not yes or no", o->name, value);
            return -1;
        }
        *(bool *)(void *)field = b;
        return 0;
    }
    if (value == NULL) {
        snprintf(err, cap, "%s: missing value", o->name);
        return -1;
    }
    if (o->type == FENCE_OPT_STR) {
        size_t n = strlen(value);
        if (n == 0 && (o->flags & FENCE_OPT_F_NONEMPTY)) {
            snprintf(err, cap, "%s: must not be empty", o->name);
            return -1;
        }
        if (o->flags & FENCE_OPT_F_LOGLEVEL) {
            if ((o->flags & FENCE_OPT_F_LOGDIGIT) && value[0] >= '0' &&
                value[0] <= '3' && value[1] == '\0')
                value = fence__log_level_name(FENCE_LOG_ERROR - (value[0] - '0'));
            if (fence__log_level_parse(value) < 0) {
                snprintf(err, cap, "%s: '%.64s' is not debug, info, warn or error",
                         o->name, value);
                return -1;
            }
            n = strlen(value);
        }
        if (n >= o->cap) {
            snprintf(err, cap, "%s: value longer than %zu bytes", o->name,
                     o->cap - 1);
            return -1;
        }
        memcpy(field, value, n + 1);
        return 0;
    }
    if (value[0] == '\0') {
        snprintf(err, cap, "%s: missing value", o->name);
        return -1;
    }
    uint64_t v;
    int rc = o->type == FENCE_OPT_SIZE
                 ? fence__num_size(value, &v)
                 : fence__num_u64(value, strlen(value), UINT64_MAX, &v);
    if (rc != 0) {
        snprintf(err, cap, "%s: '%.64s' is not a %s in %" PRIu64 "..%" PRIu64
                 "%s", o->name, value,
                 o->type == FENCE_OPT_SIZE ? "size" : "number", o->min, o->max,
                 o->type == FENCE_OPT_SIZE ? " (k/m/g suffixes allowed)" : "");
        return -1;
    }
    if (v < o->min || v > o->max) {
        snprintf(err, cap, "%s: %" PRIu64 " is out of range %" PRIu64
                 "..%" PRIu64, o->name, v, o->min, o->max);
        return -1;
    }
    memcpy(field, &v, sizeof(v));
    return 0;
}

/* Parse the directives of a config text, line by line. */
int fence__opts_parse_text(const fence_opts_spec *sp, void *cfg,
                           const char *text, size_t len, const char *fname,
                           char *err, size_t cap)
{
    char line[FENCE_OPTS_LINE_MAX];
    char msg[512];
    unsigned lineno = 0;
    size_t pos = 0;
    while (pos < len) {
        lineno++;
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - (text + pos)) : len - pos;
        if (n >= sizeof(line)) {
            snprintf(err, cap, "%s:%u: line longer than %d bytes", fname,
                     lineno, FENCE_OPTS_LINE_MAX - 1);
            return -1;
        }
        if (memchr(text + pos, '\0', n) != NULL) {
            snprintf(err, cap, "%s:%u: NUL byte in line", fname, lineno);
            return -1;
        }
        memcpy(line, text + pos, n);
        line[n] = '\0';
        pos += n + (nl ? 1 : 0);
        while (n > 0 && isspace((unsigned char)line[n - 1]))
            line[--n] = '\0';
        char *p = line;
        while (*p && isspace((unsigned char)*p))
            p++;
        if (*p == '\0' || *p == '#')
            continue;
        char *name = p;
        while (*p && !isspace((unsigned char)*p))
            p++;
        size_t name_len = (size_t)(p - name);
        while (*p && isspace((unsigned char)*p))
            p++;
        const fence_opt *o = fence__opts_find(sp, name, name_len, NULL);
        if (o == NULL || strcmp(o->name, "config") == 0) {
            snprintf(err, cap, "%s:%u: unknown directive '%.*s'", fname,
                     lineno, (int)(name_len > 64 ? 64 : name_len), name);
            return -1;
        }
        /* A value in one pair of matching quotes ("x" or 'x') is the text
         * between them, taken as it is (no escapes); a quote that opens
         * and is not closed at the end of the line is refused. */
        size_t vlen = strlen(p);
        if (vlen > 0 && (p[0] == '"' || p[0] == '\'')) {
            if (vlen < 2 || p[vlen - 1] != p[0]) {
                snprintf(err, cap, "%s:%u: %s: unmatched %c in value", fname,
                         lineno, o->name, p[0]);
                return -1;
            }
            p[vlen - 1] = '\0';
            p++;
        }
        if (fence__opts_set(sp, cfg, o, p, msg, sizeof(msg)) != 0) {
            snprintf(err, cap, "%s:%u: %s", fname, lineno, msg);
            return -1;
        }
    }
    return 0;
}

/* Read a whole file, bounded, and parse it. */
int fence__opts_read_file(const fence_opts_spec *sp, void *cfg,
                          const char *path, char *err, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        snprintf(err, cap, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    char *text = malloc(FENCE_OPTS_FILE_MAX + 1);
    if (text == NULL) {
        fclose(f);
        snprintf(err, cap, "%s: out of memory", path);
        return -1;
    }
    size_t len = fread(text, 1, FENCE_OPTS_FILE_MAX + 1, f);
    int rc;
    if (ferror(f)) {
        snprintf(err, cap, "%s: read error", path);
        rc = -1;
    } else if (len > FENCE_OPTS_FILE_MAX) {
        snprintf(err, cap, "%s: larger than %d bytes", path,
                 FENCE_OPTS_FILE_MAX);
        rc = -1;
    } else {
        rc = fence__opts_parse_text(sp, cfg, text, len, path, err, cap);
    }
    free(text);
    fclose(f);
    return rc;
}

/* Defaults, --help/--version, the config file, then the flags. */
int fence__opts_load(const fence_opts_spec *sp, void *cfg, int argc,
                     char **argv, char *err, size_t cap)
{
    char msg[512];
    fence__opts_defaults(sp, cfg);
    const fence_opt *conf = find_row(sp, "config", 6);
    if (conf != NULL && conf->type != FENCE_OPT_STR)
        conf = NULL;

    /* First pass: --help, --version and --config, so the file comes
     * before the flags whatever the order. */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return FENCE_OPTS_HELP;
        if (strcmp(argv[i], "--version") == 0)
            return FENCE_OPTS_VERSION;
    }
    if (conf != NULL) {
        const char *path = NULL;
        for (int i = 1; i < argc; i++) {
            if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
                path = argv[++i];
            else if (strncmp(argv[i], "--config=", 9) == 0)
                path = argv[i] + 9;
        }
        if (path != NULL && path[0] != '\0') {
            if (fence__opts_set(sp, cfg, conf, path, msg, sizeof(msg)) != 0) {
                snprintf(err, cap, "--%s", msg);
                return -1;
            }
            if (fence__opts_read_file(sp, cfg, path, err, cap) != 0)
                return -1;
        }
    }

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0) {
            snprintf(err, cap, "unexpected argument '%.64s' (see --help)", a);
            return -1;
        }
        a += 2;
        const char *eq = strchr(a, '=');
        size_t name_len = eq ? (size_t)(eq - a) : strlen(a);
        const fence_opt *o = fence__opts_find(sp, a, name_len, NULL);
        if (o == NULL) {
            snprintf(err, cap, "unknown option '%.64s' (see --help)", argv[i]);
            return -1;
        }
        const char *value = NULL;
        if (eq != NULL) {
            value = eq + 1;
        } else if (o->type != FENCE_OPT_BOOL) {
            if (i + 1 >= argc) {
                snprintf(err, cap, "--%s: missing value", o->name);
                return -1;
            }
            value = argv[++i];
        }
        if (fence__opts_set(sp, cfg, o, value, msg, sizeof(msg)) != 0) {
            snprintf(err, cap, "--%s", msg);
            return -1;
        }
    }
    return 0;
}

/* One row of --help. */
static void help_row(const fence_opts_spec *sp, const fence_opt *o, FILE *out)
{
    char left[64];
    if (o->type == FENCE_OPT_ALIAS) {
        snprintf(left, sizeof(left), "--%s", o->name);
        fprintf(out, "  %-30s deprecated spelling of --%s\n", left,
                o->def_str);
        return;
    }
    snprintf(left, sizeof(left), "--%s%s%s", o->name, o->arg ? " " : "",
             o->arg ? o->arg : "");
    fprintf(out, "  %-30s %s\n", left, o->help ? o->help : "");
    switch (o->type) {
    case FENCE_OPT_U64:
        fprintf(out, "  %-30s   range %" PRIu64 "..%" PRIu64 ", default %"
                PRIu64 "\n", "", o->min, o->max, o->def);
        break;
    case FENCE_OPT_SIZE:
        fprintf(out, "  %-30s   range %" PRIu64 "..%" PRIu64 ", default %"
                PRIu64 " (k/m/g suffixes allowed)\n", "", o->min, o->max,
                o->def);
        break;
    case FENCE_OPT_STR:
        fprintf(out, "  %-30s   default \"%s\"\n", "",
                o->def_str ? o->def_str : "");
        break;
    case FENCE_OPT_BOOL:
        fprintf(out, "  %-30s   a flag; in a file: %s yes|no, default %s\n",
                "", o->name, o->def ? "yes" : "no");
        break;
    case FENCE_OPT_ALIAS:
        break;
    }
    (void)sp;
}

/* Usage, summary, rows, footer. */
void fence__opts_help(const fence_opts_spec *sp, FILE *out)
{
    fprintf(out, "usage: %s [--option value | --option=value]...\n\n",
            sp->prog);
    if (sp->summary != NULL)
        fprintf(out, "%s\n", sp->summary);
    for (size_t i = 0; i < sp->n_opts; i++)
        help_row(sp, &sp->opts[i], out);
    fprintf(out, "\n  %-30s this text\n  %-30s print the version and exit\n",
            "--help", "--version");
    if (sp->footer != NULL)
        fprintf(out, "\n%s", sp->footer);
}

/* "prog version". */
void fence__opts_version(const fence_opts_spec *sp, FILE *out)
{
    fprintf(out, "%s %s\n", sp->prog, sp->version ? sp->version : "?");
}
