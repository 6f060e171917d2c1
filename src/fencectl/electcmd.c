/* `fencectl elect NAME VALUE -- CMD`: campaign for the election NAME with
 * VALUE, run CMD while this process leads (its token in $FENCE_TOKEN, as
 * `fencectl lock` does), renew the lease, and stop CMD's process group
 * (SIGTERM, then SIGKILL after --grace) when leadership is lost: the lease
 * gone or about to run out unrenewed, or another leader elected.  When CMD
 * ends, resign and revoke the lease.  `fencectl elect --observe NAME`
 * prints each leader as it changes (ELECTION.OBSERVE, any node). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fencectl/cli.h"
#include "base/limits.h"

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
    bool grace_set;
} elect_args;

bool fencectl_is_elect(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] != '-')
            return strcmp(argv[i], "elect") == 0;
        if (strcmp(argv[i], "--server") == 0 || strcmp(argv[i], "--timeout") == 0)
            i++;
    }
    return false;
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
        uint64_t x;
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
        } else if (strcmp(s, "--server") == 0 && v != NULL) {
            a->base.servers = v;
            i++;
        } else if ((strcmp(s, "--timeout") == 0 || strcmp(s, "--ttl") == 0 ||
                    strcmp(s, "--wait") == 0 || strcmp(s, "--grace") == 0 ||
                    strcmp(s, "--count") == 0) && v != NULL) {
            if (!fencectl_parse_ms(v, strcmp(s, "--count") == 0 ? UINT64_MAX : FENCE_WAIT_MS_MAX,
                                   &x))
                return usage_error("bad number for", s);
            if (strcmp(s, "--timeout") == 0)
                a->base.timeout_ms = (uint32_t)x;
            else if (strcmp(s, "--ttl") == 0) {
                if (x < FENCE_TTL_MS_MIN || x > FENCE_TTL_MS_MAX)
                    return usage_error("--ttl wants 10..604800000, not", v);
                a->base.ttl_ms = (uint32_t)x;
            } else if (strcmp(s, "--wait") == 0)
                a->base.wait_ms = (uint32_t)x;
            else if (strcmp(s, "--grace") == 0) {
                a->base.grace_ms = (uint32_t)x;
                a->grace_set = true;
            } else
                a->count = x;
            i++;
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
    if (!a->grace_set)
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

/* ---- Leading -------------------------------------------------------------------- */

static int lost_pipe[2] = {-1, -1};
static int sig_pipe[2] = {-1, -1};
static const int caught[] = {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
#define N_CAUGHT (sizeof(caught) / sizeof(caught[0]))

static void on_signal(int sig)
{
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    ssize_t n = write(sig_pipe[1], &b, 1);
    (void)n;
    errno = saved;
}

/* What the renewal thread and the main loop share. */
typedef struct leader_state {
    const elect_args *a;
    fence_client *ka;               /* the renewal thread's own client */
    uint64_t lease;
    _Atomic uint64_t token;         /* 0 until elected */
    _Atomic uint64_t valid_until;   /* monotonic ms the lease surely lasts */
    _Atomic bool stop;
    _Atomic bool lost;
    char why[160];                  /* written once, before lost is set */
} leader_state;

static void say_lost(leader_state *ls, const char *why)
{
    if (atomic_load(&ls->lost))
        return;
    snprintf(ls->why, sizeof(ls->why), "%s", why);
    atomic_store(&ls->lost, true);
    unsigned char b = 1;
    ssize_t n = write(lost_pipe[1], &b, 1);
    (void)n;
}

/* The renewal thread: LEASE.KEEPALIVE every ttl/3, and while leading a
 * check that the election's leader is still this lease's token. */
static void *renew_main(void *arg)
{
    leader_state *ls = arg;
    uint64_t ttl = ls->a->base.ttl_ms;
    uint64_t period = ttl / 3 > 0 ? ttl / 3 : 1;
    fence_election_state *st = malloc(sizeof(*st));
    while (!atomic_load(&ls->stop) && !atomic_load(&ls->lost)) {
        uint64_t until = fence_monotonic_ms() + period;
        while (!atomic_load(&ls->stop) && fence_monotonic_ms() < until)
            usleep(20000);
        if (atomic_load(&ls->stop))
            break;
        uint64_t sent = fence_monotonic_ms();
        int rc = fence_lease_keepalive(ls->ka, ls->lease, NULL);
        if (rc == FENCE_ENOLEASE) {
            say_lost(ls, "lease lost");
            break;
        }
        if (rc == 0)
            atomic_store(&ls->valid_until, sent + ttl);
        uint64_t tok = atomic_load(&ls->token);
        if (rc == 0 && tok != 0 && st != NULL &&
            fence_election_leader(ls->ka, ls->a->base.name, st) == 0 &&
            (!st->has_leader || st->token != tok))
            say_lost(ls, "another leader was elected");
    }
    free(st);
    return NULL;
}

static char **child_env(const elect_args *a, uint64_t token, uint64_t lease, char **buf_out)
{
    extern char **environ;
    size_t n = 0;
    while (environ[n] != NULL)
        n++;
    char **env = calloc(n + 5, sizeof(char *));
    const char *servers = fencectl_servers(&a->base);
    size_t cap = strlen(a->base.name) + strlen(servers) + 64;
    char *buf = malloc(cap * 4);
    if (env == NULL || buf == NULL) {
        free(env);
        free(buf);
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "FENCE_TOKEN=", 12) != 0 &&
            strncmp(environ[i], "FENCE_LEASE=", 12) != 0 &&
            strncmp(environ[i], "FENCE_ELECTION=", 15) != 0 &&
            strncmp(environ[i], "FENCE_SERVER=", 13) != 0)
            env[k++] = environ[i];
    snprintf(buf, cap, "FENCE_TOKEN=%" PRIu64, token);
    snprintf(buf + cap, cap, "FENCE_LEASE=%" PRIu64, lease);
    snprintf(buf + 2 * cap, cap, "FENCE_ELECTION=%s", a->base.name);
    snprintf(buf + 3 * cap, cap, "FENCE_SERVER=%s", servers);
    for (int j = 0; j < 4; j++)
        env[k++] = buf + (size_t)j * cap;
    env[k] = NULL;
    *buf_out = buf;
    return env;
}

static pid_t start_child(const elect_args *a, uint64_t token, uint64_t lease,
                         const sigset_t *old_mask)
{
    char *buf = NULL;
    char **env = child_env(a, token, lease, &buf);
    if (env == NULL)
        return -1;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* nothing renews the lease without us */
        if (getppid() != parent)
            _exit(FENCECTL_EXIT_LEASE_LOST);
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = SIG_DFL;
        for (size_t i = 0; i < N_CAUGHT; i++)
            sigaction(caught[i], &sa, NULL);
        sigprocmask(SIG_SETMASK, old_mask, NULL);
        execvpe(a->base.cmd_argv[0], a->base.cmd_argv, env);
        int e = errno;
        ssize_t w = write(2, "fencectl: elect: cannot run the command\n", 40);
        (void)w;
        _exit(e == ENOENT ? FENCECTL_EXIT_NOT_FOUND : FENCECTL_EXIT_CANNOT_EXEC);
    }
    if (pid > 0)
        setpgid(pid, pid);
    free(buf);
    free(env);
    return pid;
}

static void make_pipe(int p[2])
{
    if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) {
        fprintf(stderr, "fencectl: elect: pipe: %s\n", strerror(errno));
        exit(FENCECTL_EXIT_ERROR);
    }
}

/* Campaign until elected (or --wait runs out); 0 and *token. */
static int campaign(fence_client *c, const elect_args *a, uint64_t lease, leader_state *ls,
                    uint64_t *token)
{
    uint64_t start = fence_monotonic_ms();
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
        int rc = fence_election_campaign(c, a->base.name, lease, a->value, strlen(a->value),
                                         chunk, token);
        if (rc != FENCE_EBUSY)
            return rc;
        if (atomic_load(&ls->lost))
            return FENCE_ELEASELOST;
    }
}

static int lead(const elect_args *a)
{
    make_pipe(lost_pipe);
    make_pipe(sig_pipe);
    fence_client *c = fencectl_open(&a->base);
    leader_state *ls = calloc(1, sizeof(*ls));
    if (ls == NULL)
        return FENCECTL_EXIT_ERROR;
    ls->a = a;
    ls->ka = fencectl_open(&a->base);
    uint64_t t0 = fence_monotonic_ms();
    int rc = fence_lease_grant(c, a->base.ttl_ms, &ls->lease);
    atomic_store(&ls->valid_until, t0 + a->base.ttl_ms);
    pthread_t th;
    bool thread = false;
    uint64_t token = 0;
    if (rc == 0) {
        thread = pthread_create(&th, NULL, renew_main, ls) == 0;
        if (!thread)
            rc = FENCE_ENOMEM;
    }
    if (rc == 0) {
        fprintf(stderr, "fencectl: elect \"%s\": campaigning with lease %" PRIu64 "\n",
                a->base.name, ls->lease);
        rc = campaign(c, a, ls->lease, ls, &token);
    }
    if (rc != 0) {
        const char *msg = fence_client_errmsg(c);
        fprintf(stderr, "fencectl: elect \"%s\": %s%s%s\n", a->base.name, fence_strerror(rc),
                msg[0] ? ": " : "", msg);
        atomic_store(&ls->stop, true);
        if (thread)
            pthread_join(th, NULL);
        if (ls->lease != 0)
            fence_lease_revoke(c, ls->lease);
        fence_client_close(ls->ka);
        fence_client_close(c);
        free(ls);
        return fencectl_exit_code(rc);
    }
    atomic_store(&ls->token, token);
    fprintf(stderr, "fencectl: elect \"%s\": elected (token %" PRIu64 ", lease %" PRIu64 ")\n",
            a->base.name, token, ls->lease);

    sigset_t set, old_mask;
    sigemptyset(&set);
    for (size_t i = 0; i < N_CAUGHT; i++)
        sigaddset(&set, caught[i]);
    sigprocmask(SIG_BLOCK, &set, &old_mask);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < N_CAUGHT; i++)
        sigaction(caught[i], &sa, NULL);
    pid_t pid = start_child(a, token, ls->lease, &old_mask);
    sigprocmask(SIG_SETMASK, &old_mask, NULL);

    uint64_t lead_ms = a->base.grace_ms < a->base.ttl_ms / 4 ? a->base.grace_ms
                                                             : a->base.ttl_ms / 4;
    bool trouble = false, term_sent = false, kill_sent = false;
    uint64_t kill_at = 0;
    int status = 0;
    while (pid > 0) {
        uint64_t now = fence_monotonic_ms();
        const char *why = NULL;
        if (!trouble && atomic_load(&ls->lost))
            why = ls->why;
        else if (!trouble && now + lead_ms >= atomic_load(&ls->valid_until))
            why = "lease not renewed and about to expire";
        if (why != NULL) {
            trouble = true;
            fprintf(stderr, "fencectl: elect \"%s\" (token %" PRIu64 "): %s; sending SIGTERM "
                    "to process group %ld\n", a->base.name, token, why, (long)pid);
            killpg(pid, SIGTERM);
            term_sent = true;
            kill_at = now + a->base.grace_ms;
        }
        if (term_sent && !kill_sent && now >= kill_at) {
            killpg(pid, SIGKILL);
            kill_sent = true;
        }
        uint64_t vu = atomic_load(&ls->valid_until);
        uint64_t wake = trouble ? (kill_sent ? now + 1000 : kill_at)
                                : (vu > lead_ms ? vu - lead_ms : now);
        int timeout = wake <= now ? 0 : (wake - now > 1000 ? 1000 : (int)(wake - now));
        struct pollfd pfd[2] = {{lost_pipe[0], POLLIN, 0}, {sig_pipe[0], POLLIN, 0}};
        int n = poll(pfd, 2, timeout);
        unsigned char buf[64];
        if (n > 0 && (pfd[0].revents & POLLIN))
            while (read(lost_pipe[0], buf, sizeof(buf)) > 0) {
            }
        if (n > 0 && (pfd[1].revents & POLLIN)) {
            ssize_t got;
            while ((got = read(sig_pipe[0], buf, sizeof(buf))) > 0)
                for (ssize_t i = 0; i < got; i++)
                    if (buf[i] != SIGCHLD)
                        killpg(pid, buf[i]);
        }
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid || (w < 0 && errno == ECHILD))
            break;
    }
    if (pid > 0 && killpg(pid, 0) == 0)
        killpg(pid, trouble ? SIGKILL : SIGTERM); /* what is left of the group */
    atomic_store(&ls->stop, true);
    pthread_join(th, NULL);
    bool resigned = false;
    fence_election_resign(c, a->base.name, token, &resigned);
    fence_lease_revoke(c, ls->lease);
    fence_client_close(ls->ka);
    fence_client_close(c);
    free(ls);
    int code = pid < 0                ? FENCECTL_EXIT_CANNOT_EXEC
               : WIFEXITED(status)   ? WEXITSTATUS(status)
               : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                     : FENCECTL_EXIT_ERROR;
    if (trouble) {
        fprintf(stderr, "fencectl: elect \"%s\": leadership lost while the command ran (its "
                "status was %d); exiting %d\n", a->base.name, code, FENCECTL_EXIT_LEASE_LOST);
        return FENCECTL_EXIT_LEASE_LOST;
    }
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
