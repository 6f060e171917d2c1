/* fencectl command-line parsing: pure (no I/O besides nothing; results and
 * errors go into the struct), unit-tested in tests/unit/test_client_cli.c. */
#ifndef FENCECTL_ARGS_H
#define FENCECTL_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Exit codes of fencectl (documented in docs/fencectl.1). */
#define FENCECTL_EXIT_OK 0
#define FENCECTL_EXIT_ERROR 1        /* the server refused, or anything else */
#define FENCECTL_EXIT_USAGE 64       /* bad command line */
#define FENCECTL_EXIT_UNREACHABLE 69 /* no server reachable / no reply */
#define FENCECTL_EXIT_NOT_ACQUIRED 75 /* lock not acquired within --wait */
#define FENCECTL_EXIT_LEASE_LOST 79  /* the lease was lost (or about to be) */
#define FENCECTL_EXIT_CANNOT_EXEC 126 /* CMD (or fence-demo) found but not runnable */
#define FENCECTL_EXIT_NOT_FOUND 127  /* CMD (or fence-demo) not found */

/* Most connection counts in one bench run (--conns). */
#define FENCECTL_CONNS_MAX 16

typedef enum fencectl_cmd {
    FENCECTL_NONE = 0,   /* no subcommand (top-level --help) */
    FENCECTL_LOCK,       /* lock NAME -- CMD */
    FENCECTL_ACQUIRE,    /* acquire NAME */
    FENCECTL_RELEASE,    /* release NAME TOKEN */
    FENCECTL_INFO,       /* info NAME */
    FENCECTL_LEASE_GRANT,     /* lease grant TTL_MS */
    FENCECTL_LEASE_KEEPALIVE, /* lease keepalive ID */
    FENCECTL_LEASE_REVOKE,    /* lease revoke ID */
    FENCECTL_LEASE_INFO,      /* lease info ID */
    FENCECTL_STATUS,     /* status */
    FENCECTL_BENCH,      /* bench */
    FENCECTL_DEMO,       /* demo [ARGS] */
    FENCECTL_CMD_COUNT_  /* number of values */
} fencectl_cmd;

typedef enum fencectl_on_lost {
    FENCECTL_ON_LOST_TERM = 0, /* SIGTERM, SIGKILL after --grace */
    FENCECTL_ON_LOST_KILL,     /* SIGKILL at once */
    FENCECTL_ON_LOST_IGNORE,   /* leave CMD running; warn */
} fencectl_on_lost;

typedef enum fencectl_bench_mode {
    FENCECTL_BENCH_BOTH = 0,     /* uncontended then contended */
    FENCECTL_BENCH_UNCONTENDED,  /* a lock per connection */
    FENCECTL_BENCH_CONTENDED,    /* every connection on one lock */
    FENCECTL_BENCH_SHARED,       /* every connection on one lock, shared */
} fencectl_bench_mode;

/* Everything the command line can say.  Fields a subcommand does not use
 * keep their defaults. */
typedef struct fencectl_args {
    fencectl_cmd cmd;        /* the subcommand */
    bool help;               /* --help / -h given: print usage of cmd */
    const char *servers;     /* --server, else $FENCE_SERVER, else default */
    uint32_t timeout_ms;     /* --timeout: per-request timeout (0: library default) */
    bool tls;                /* --tls */
    const char *tls_ca;      /* --cacert, or NULL */
    const char *tls_cert;    /* --cert, or NULL */
    const char *tls_key;     /* --key, or NULL */
    const char *tls_server_name; /* --sni, or NULL */
    const char *user;        /* --user, or NULL */
    const char *password;    /* --pass, else $FENCE_PASSWORD (fencectl_client_opts) */
    const char *name;        /* lock name (lock, acquire, release, info) */
    uint32_t ttl_ms;         /* --ttl (default 10000) */
    uint32_t wait_ms;        /* --wait (default 30000 for lock/acquire) */
    bool wait_set;           /* --wait was given */
    fencectl_on_lost on_lost; /* --on-lost */
    uint32_t grace_ms;       /* --grace (0: ttl/4) */
    bool grace_set;          /* --grace was given */
    uint64_t token;          /* release TOKEN */
    uint64_t lease;          /* lease ID / acquire --lease */
    bool lease_set;          /* acquire --lease was given */
    bool env_format;         /* acquire --env: print shell assignments */
    bool signed_token;       /* lock/acquire --signed: ask for a signed token */
    bool shared;             /* lock --shared: a shared (read) lock */
    uint32_t duration_ms;    /* bench --duration (seconds on the command line) */
    uint32_t conns[FENCECTL_CONNS_MAX]; /* bench --conns */
    size_t n_conns;          /* entries used in conns */
    fencectl_bench_mode bench_mode; /* bench --mode */
    const char *bench_prefix; /* bench --prefix: lock name prefix */
    bool bench_tsv;          /* bench --format tsv: machine-readable lines */
    char **cmd_argv;         /* lock: CMD and its args (NULL-terminated, borrowed) */
    int cmd_argc;            /* entries in cmd_argv */
    char **rest_argv;        /* demo: arguments passed through */
    int rest_argc;           /* entries in rest_argv */
} fencectl_args;

/* Parse argv (argv[0] is the program) into *out.  Returns 0, or
 * FENCECTL_EXIT_USAGE with a one-line reason in err (errcap bytes).  With
 * --help anywhere, returns 0 with out->help set and out->cmd the subcommand
 * it was given for (FENCECTL_NONE at top level).  Pointers in *out borrow
 * from argv. */
int fencectl_parse(int argc, char **argv, fencectl_args *out, char *err,
                   size_t errcap);

/* The usage text of a subcommand (FENCECTL_NONE: the overview).  Static. */
const char *fencectl_usage(fencectl_cmd cmd);

/* Parse a decimal milliseconds value, 0..max.  Returns true on success. */
bool fencectl_parse_ms(const char *s, uint64_t max, uint64_t *out);

/* Parse "1,8,64" into out (at most cap values, each 1..4096). */
bool fencectl_parse_conns(const char *s, uint32_t *out, size_t cap, size_t *n);

#endif /* FENCECTL_ARGS_H */
