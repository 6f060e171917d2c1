/* One option table drives a daemon's flags, its config file and --help
 * (Redis createIntConfig, nginx's offsetof slots).
 *
 * A daemon describes its options as a table of fence_opt rows, each naming
 * a field of its own config struct by offsetof.  The engine
 *
 *   1. fills the struct with every row's default,
 *   2. reads the --config file, if the table has a "config" row and the
 *      flags name one: one "name value" directive a line, '#' starts a
 *      comment line, the value is the rest of the line with its outer
 *      spaces trimmed,
 *   3. applies the flags ("--name value" or "--name=value"; flags win over
 *      the file),
 *
 * and reports the first error as "FILE:LINE: NAME: message" or "--NAME:
 * message".  Validation across fields stays with the daemon, after the
 * engine returns (parse the whole struct, validate it, then apply it).
 *
 * --help and --version are handled here for every binary: the engine
 * returns FENCE_OPTS_HELP or FENCE_OPTS_VERSION and the caller prints with
 * fence__opts_help / fence__opts_version and exits 0.
 *
 * A row of type FENCE_OPT_ALIAS is a deprecated spelling: its def_str
 * names the row it stands for (e.g. "obuf-max" for "max-obuf"), it is
 * accepted in flags and files alike, and --help lists it as deprecated.
 *
 * Pure code except fence__opts_load (reads the file) and the print
 * functions; no globals. */
#ifndef FENCE_COMMON_OPTIONS_H
#define FENCE_COMMON_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Largest config file, and longest line in it. */
#define FENCE_OPTS_FILE_MAX (1024 * 1024)
#define FENCE_OPTS_LINE_MAX 4096

/* How a row's value is parsed and stored. */
typedef enum fence_opt_type {
    FENCE_OPT_U64 = 0, /* uint64_t field; decimal in [min, max] */
    FENCE_OPT_SIZE,    /* uint64_t field; decimal with k/m/g, in [min, max] */
    FENCE_OPT_STR,     /* char[cap] field; at most cap - 1 bytes */
    FENCE_OPT_BOOL,    /* bool field; a flag without a value sets it; a
                        * value (flag "=v" or directive) is yes/no, on/off,
                        * true/false or 1/0 */
    FENCE_OPT_ALIAS,   /* deprecated name for the row named by def_str */
} fence_opt_type;

/* One row of an option table. */
typedef struct fence_opt {
    const char *name;    /* flag and directive name, without "--" */
    fence_opt_type type; /* how the value is parsed */
    size_t offset;       /* field in the daemon's config struct */
    size_t cap;          /* FENCE_OPT_STR: size of the char array */
    uint64_t min;        /* U64/SIZE: smallest accepted value */
    uint64_t max;        /* U64/SIZE: largest accepted value */
    uint64_t def;        /* U64/SIZE/BOOL: default */
    const char *def_str; /* STR: default; ALIAS: the row it stands for */
    const char *arg;     /* placeholder in --help ("<port>"), or NULL */
    const char *help;    /* one-line description for --help */
    unsigned flags;      /* FENCE_OPT_F_* */
} fence_opt;

/* fence_opt.flags. */
#define FENCE_OPT_F_NONEMPTY 1u /* STR: an empty value is refused */
#define FENCE_OPT_F_LOGLEVEL 2u /* STR: a log level word (base/log.h) */
#define FENCE_OPT_F_LOGDIGIT 4u /* with LOGLEVEL: also the deprecated
                                 * digits 0 (error) .. 3 (debug), stored
                                 * as the word */

/* Table rows for a config struct type T (use inside the table). */
#define FENCE_OPT_U64_ROW(T, n, field, lo, hi, d, a, h)                     \
    {(n), FENCE_OPT_U64, offsetof(T, field), 0, (lo), (hi), (d), NULL, (a), \
     (h)}
#define FENCE_OPT_SIZE_ROW(T, n, field, lo, hi, d, a, h)                    \
    {(n), FENCE_OPT_SIZE, offsetof(T, field), 0, (lo), (hi), (d), NULL,     \
     (a), (h)}
#define FENCE_OPT_STR_ROW(T, n, field, d, a, h)                             \
    {(n), FENCE_OPT_STR, offsetof(T, field), sizeof(((T *)0)->field), 0, 0, \
     0, (d), (a), (h)}
#define FENCE_OPT_STR_REQ_ROW(T, n, field, d, a, h)                         \
    {(n), FENCE_OPT_STR, offsetof(T, field), sizeof(((T *)0)->field), 0, 0, \
     0, (d), (a), (h), FENCE_OPT_F_NONEMPTY}
#define FENCE_OPT_LEVEL_ROW(T, n, field, d, a, h, extra)                    \
    {(n), FENCE_OPT_STR, offsetof(T, field), sizeof(((T *)0)->field), 0, 0, \
     0, (d), (a), (h), FENCE_OPT_F_LOGLEVEL | (extra)}
#define FENCE_OPT_BOOL_ROW(T, n, field, d, h)                               \
    {(n), FENCE_OPT_BOOL, offsetof(T, field), 0, 0, 1, (d), NULL, NULL, (h)}
#define FENCE_OPT_ALIAS_ROW(n, target)                                      \
    {(n), FENCE_OPT_ALIAS, 0, 0, 0, 0, 0, (target), NULL, NULL}

/* A daemon's whole option set. */
typedef struct fence_opts_spec {
    const char *prog;       /* program name for usage and --version */
    const char *version;    /* version string for --version */
    const char *summary;    /* paragraph printed by --help before the rows */
    const char *footer;     /* printed after the rows, or NULL */
    const fence_opt *opts;  /* the table */
    size_t n_opts;          /* rows in it */
} fence_opts_spec;

/* fence__opts_load's results other than 0 and -1. */
#define FENCE_OPTS_HELP 1    /* --help or -h was given */
#define FENCE_OPTS_VERSION 2 /* --version was given */

/* Put every row's default into cfg (which is zeroed first). */
void fence__opts_defaults(const fence_opts_spec *sp, void *cfg);

/* The row called name[0..len) (aliases resolved to their target), or NULL.
 * *deprecated, when not NULL, is set to the alias row itself if the name
 * was an alias, else to NULL. */
const fence_opt *fence__opts_find(const fence_opts_spec *sp, const char *name,
                                  size_t len, const fence_opt **deprecated);

/* Parse value (NUL-terminated) into the row's field of cfg.  value NULL
 * is a flag given without a value (only FENCE_OPT_BOOL accepts it).
 * Returns 0, or -1 with "NAME: message" in err[0..cap). */
int fence__opts_set(const fence_opts_spec *sp, void *cfg, const fence_opt *o,
                    const char *value, char *err, size_t cap);

/* Parse config text[0..len) (need not be NUL-terminated; a NUL byte is an
 * error) into cfg, reporting the first bad line as "FNAME:LINE: ...".  The
 * "config" directive is refused inside a file.  Returns 0 or -1. */
int fence__opts_parse_text(const fence_opts_spec *sp, void *cfg,
                           const char *text, size_t len, const char *fname,
                           char *err, size_t cap);

/* Read the file at path (at most FENCE_OPTS_FILE_MAX bytes) and parse it
 * with fence__opts_parse_text.  Returns 0 or -1 with a message in err. */
int fence__opts_read_file(const fence_opts_spec *sp, void *cfg,
                          const char *path, char *err, size_t cap);

/* The whole front end: defaults, then the --config file when the table has
 * a "config" STR row and a flag sets it (the path is stored in that row's
 * field), then every flag in argv[1..argc).  Returns 0; FENCE_OPTS_HELP or
 * FENCE_OPTS_VERSION (nothing else done); or -1 with the first error in
 * err ("FILE:LINE: NAME: ...", "--NAME: ...", "unknown option '--x' (see
 * --help)", "unexpected argument 'x' (see --help)"). */
int fence__opts_load(const fence_opts_spec *sp, void *cfg, int argc,
                     char **argv, char *err, size_t cap);

/* Print usage, the summary, every row with its bounds and default, and the
 * footer to out. */
void fence__opts_help(const fence_opts_spec *sp, FILE *out);

/* Print "PROG VERSION\n" to out. */
void fence__opts_version(const fence_opts_spec *sp, FILE *out);

#endif /* FENCE_COMMON_OPTIONS_H */
