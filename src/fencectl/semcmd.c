/* `fencectl sem NAME N -- CMD`: take one of the N slots of the semaphore
 * NAME under a lease of its own, run CMD while holding it (the slot's token
 * in $FENCE_TOKEN, its fence name NAME#SLOT in $FENCE_LOCK, as `fencectl
 * lock` does), renew the lease, and stop CMD's process group (SIGTERM, then
 * SIGKILL after --grace) when the lease is lost or about to run out
 * unrenewed.  When CMD ends, release the slot and revoke the lease.
 * `fencectl sem --info NAME` prints the semaphore's slots (SEM.INFO). */
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
    bool grace_set;
} sem_args;

bool fencectl_is_sem(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] != '-')
            return strcmp(argv[i], "sem") == 0;
        if (strcmp(argv[i], "--server") == 0 || strcmp(argv[i], "--timeout") == 0)
            i++;
    }
    return false;
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
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t x;
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
        } else if (strcmp(s, "--signed") == 0) {
            a->base.signed_token = true;
        } else if (strcmp(s, "--server") == 0 && v != NULL) {
            a->base.servers = v;
            i++;
        } else if ((strcmp(s, "--timeout") == 0 || strcmp(s, "--ttl") == 0 ||
                    strcmp(s, "--wait") == 0 || strcmp(s, "--grace") == 0) && v != NULL) {
            if (!fencectl_parse_ms(v, FENCE_WAIT_MS_MAX, &x))
                return usage_error("bad number for", s);
            if (strcmp(s, "--timeout") == 0) {
                a->base.timeout_ms = (uint32_t)x;
            } else if (strcmp(s, "--ttl") == 0) {
                if (x < FENCE_TTL_MS_MIN || x > FENCE_TTL_MS_MAX)
                    return usage_error("--ttl wants 10..604800000, not", v);
                a->base.ttl_ms = (uint32_t)x;
            } else if (strcmp(s, "--wait") == 0) {
                a->base.wait_ms = (uint32_t)x;
            } else {
                a->base.grace_ms = (uint32_t)x;
                a->grace_set = true;
            }
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
    if (!a->grace_set)
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

/* ---- Holding a slot ---------------------------------------------------------------- */

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
typedef struct holder_state {
    const sem_args *a;
    fence_client *ka;             /* the renewal thread's own client */
    uint64_t lease;
    _Atomic uint64_t valid_until; /* monotonic ms the lease surely lasts */
    _Atomic bool stop;
    _Atomic bool lost;
} holder_state;

/* The renewal thread: LEASE.KEEPALIVE every ttl/3, from the grant on (a
 * long wait for a slot keeps the lease too). */
static void *renew_main(void *arg)
{
    holder_state *hs = arg;
    uint64_t ttl = hs->a->base.ttl_ms;
    uint64_t period = ttl / 3 > 0 ? ttl / 3 : 1;
    while (!atomic_load(&hs->stop) && !atomic_load(&hs->lost)) {
        uint64_t until = fence_monotonic_ms() + period;
        while (!atomic_load(&hs->stop) && fence_monotonic_ms() < until)
            usleep(20000);
        if (atomic_load(&hs->stop))
            break;
        uint64_t sent = fence_monotonic_ms();
        int rc = fence_lease_keepalive(hs->ka, hs->lease, NULL);
        if (rc == FENCE_ENOLEASE) {
            atomic_store(&hs->lost, true);
            unsigned char b = 1;
            ssize_t n = write(lost_pipe[1], &b, 1);
            (void)n;
            break;
        }
        if (rc == 0)
            atomic_store(&hs->valid_until, sent + ttl);
    }
    return NULL;
}

/* The held slot, for CMD's environment. */
typedef struct held {
    uint32_t slot;
    uint64_t token;
    uint64_t lease;
    char fence[FENCE_NAME_MAX + 1];          /* NAME#SLOT */
    char signed_tok[FENCE_SIGNED_TOKEN_BUF_SIZE]; /* with --signed */
} held;

/* Our environment without FENCE_* variables we set, plus ours.  Built before
 * fork() (the renewal thread may hold the allocator's lock at the fork). */
static char **child_env(const sem_args *a, const held *h, char **buf_out)
{
    static const char *const ours[] = {"FENCE_TOKEN=",  "FENCE_LEASE=", "FENCE_LOCK=",
                                       "FENCE_SEM=",    "FENCE_SLOT=",  "FENCE_SERVER=",
                                       "FENCE_SIGNED_TOKEN="};
    enum { N_OURS = sizeof(ours) / sizeof(ours[0]) };
    extern char **environ;
    size_t n = 0;
    while (environ[n] != NULL)
        n++;
    char **env = calloc(n + N_OURS + 1, sizeof(char *));
    const char *servers = fencectl_servers(&a->base);
    size_t cap = strlen(a->base.name) + strlen(servers) + FENCE_SIGNED_TOKEN_BUF_SIZE + 64;
    char *buf = malloc(cap * N_OURS);
    if (env == NULL || buf == NULL) {
        free(env);
        free(buf);
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        bool mine = false;
        for (size_t j = 0; j < N_OURS; j++)
            mine = mine || strncmp(environ[i], ours[j], strlen(ours[j])) == 0;
        if (!mine)
            env[k++] = environ[i];
    }
    int m = 0;
    snprintf(buf + (size_t)m++ * cap, cap, "FENCE_TOKEN=%" PRIu64, h->token);
    snprintf(buf + (size_t)m++ * cap, cap, "FENCE_LEASE=%" PRIu64, h->lease);
    snprintf(buf + (size_t)m++ * cap, cap, "FENCE_LOCK=%s", h->fence);
    snprintf(buf + (size_t)m++ * cap, cap, "FENCE_SEM=%s", a->base.name);
    snprintf(buf + (size_t)m++ * cap, cap, "FENCE_SLOT=%" PRIu32, h->slot);
    snprintf(buf + (size_t)m++ * cap, cap, "FENCE_SERVER=%s", servers);
    if (a->base.signed_token)
        snprintf(buf + (size_t)m++ * cap, cap, "FENCE_SIGNED_TOKEN=%s", h->signed_tok);
    for (int j = 0; j < m; j++)
        env[k++] = buf + (size_t)j * cap;
    env[k] = NULL;
    *buf_out = buf;
    return env;
}

static pid_t start_child(const sem_args *a, const held *h, const sigset_t *old_mask)
{
    char *buf = NULL;
    char **env = child_env(a, h, &buf);
    if (env == NULL) {
        fprintf(stderr, "fencectl: sem: out of memory\n");
        return -1;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        fprintf(stderr, "fencectl: sem: fork: %s\n", strerror(errno));
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
        sigaction(SIGPIPE, &sa, NULL);
        sigprocmask(SIG_SETMASK, old_mask, NULL);
        execvpe(a->base.cmd_argv[0], a->base.cmd_argv, env);
        int e = errno;
        ssize_t w = write(2, "fencectl: sem: cannot run ", 26);
        w = write(2, a->base.cmd_argv[0], strlen(a->base.cmd_argv[0]));
        w = e == ENOENT ? write(2, ": not found\n", 12) : write(2, ": not executable\n", 17);
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
        fprintf(stderr, "fencectl: sem: pipe: %s\n", strerror(errno));
        exit(FENCECTL_EXIT_ERROR);
    }
}

/* Supervise CMD (pid) until it exits; *trouble when the lease was lost or
 * about to run out.  Returns CMD's wait status. */
static int supervise(const sem_args *a, holder_state *hs, const held *h, pid_t pid,
                     bool *trouble_out)
{
    uint64_t lead_ms = a->base.grace_ms < a->base.ttl_ms / 4 ? a->base.grace_ms
                                                             : a->base.ttl_ms / 4;
    bool trouble = false, term_sent = false, kill_sent = false;
    uint64_t kill_at = 0;
    int status = 0;
    for (;;) {
        uint64_t now = fence_monotonic_ms();
        const char *why = NULL;
        if (!trouble && atomic_load(&hs->lost))
            why = "lease lost";
        else if (!trouble && now + lead_ms >= atomic_load(&hs->valid_until))
            why = "lease not renewed and about to expire";
        if (why != NULL) {
            trouble = true;
            fprintf(stderr, "fencectl: sem \"%s\" slot %" PRIu32 " (token %" PRIu64 ", lease %"
                    PRIu64 "): %s; sending SIGTERM to process group %ld\n", a->base.name,
                    h->slot, h->token, h->lease, why, (long)pid);
            killpg(pid, SIGTERM);
            term_sent = true;
            kill_at = now + a->base.grace_ms;
        }
        if (term_sent && !kill_sent && now >= kill_at) {
            fprintf(stderr, "fencectl: grace period over; sending SIGKILL to process group "
                    "%ld\n", (long)pid);
            killpg(pid, SIGKILL);
            kill_sent = true;
        }
        uint64_t vu = atomic_load(&hs->valid_until);
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
    /* Whatever is left of CMD's group must not outlive a lost lease. */
    if (killpg(pid, 0) == 0) {
        if (trouble && !kill_sent)
            while (killpg(pid, 0) == 0 && fence_monotonic_ms() < kill_at)
                usleep(10000);
        if (killpg(pid, 0) == 0)
            killpg(pid, trouble ? SIGKILL : SIGTERM);
    }
    *trouble_out = trouble;
    return status;
}

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

static int hold(const sem_args *a)
{
    make_pipe(lost_pipe);
    make_pipe(sig_pipe);
    fence_client *c = fencectl_open(&a->base);
    holder_state *hs = calloc(1, sizeof(*hs));
    held *h = calloc(1, sizeof(*h));
    if (hs == NULL || h == NULL) {
        fprintf(stderr, "fencectl: sem: out of memory\n");
        return FENCECTL_EXIT_ERROR;
    }
    hs->a = a;
    hs->ka = fencectl_open(&a->base);
    fencectl_tell_reconnects(c);
    uint64_t t0 = fence_monotonic_ms();
    int rc = fence_lease_grant(c, a->base.ttl_ms, &hs->lease);
    atomic_store(&hs->valid_until, t0 + a->base.ttl_ms);
    pthread_t th;
    bool thread = false;
    if (rc == 0) {
        thread = pthread_create(&th, NULL, renew_main, hs) == 0;
        if (!thread)
            rc = FENCE_ENOMEM;
    }
    if (rc == 0)
        say_waiting(c, a);
    if (rc == 0 && a->base.signed_token)
        rc = fence_sem_acquire_signed(c, a->base.name, a->n, hs->lease, a->base.wait_ms,
                                      &h->slot, &h->token, h->signed_tok,
                                      sizeof(h->signed_tok));
    else if (rc == 0)
        rc = fence_sem_acquire(c, a->base.name, a->n, hs->lease, a->base.wait_ms, &h->slot,
                               &h->token);
    if (rc == 0 && atomic_load(&hs->lost))
        rc = FENCE_ELEASELOST;
    if (rc == 0)
        rc = fence_sem_fence_name(a->base.name, h->slot, h->fence, sizeof(h->fence));
    if (rc != 0) {
        const char *msg = fence_client_errmsg(c);
        fprintf(stderr, "fencectl: sem \"%s\": %s%s%s\n", a->base.name, fence_strerror(rc),
                msg[0] ? ": " : "", msg);
        atomic_store(&hs->stop, true);
        if (thread)
            pthread_join(th, NULL);
        if (hs->lease != 0)
            fence_lease_revoke(c, hs->lease); /* frees a slot granted meanwhile too */
        fence_client_close(hs->ka);
        fence_client_close(c);
        free(hs);
        free(h);
        return fencectl_exit_code(rc);
    }
    h->lease = hs->lease;

    /* From here the signals are caught and forwarded to CMD's group. */
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
    pid_t pid = start_child(a, h, &old_mask);
    sigprocmask(SIG_SETMASK, &old_mask, NULL);

    int status = 0;
    bool trouble = false;
    if (pid > 0)
        status = supervise(a, hs, h, pid, &trouble);
    atomic_store(&hs->stop, true);
    pthread_join(th, NULL);
    bool released = false;
    /* Keyed by token: harmless when the slot has moved on already. */
    int rrc = fence_sem_release(c, a->base.name, h->slot, h->token, &released);
    if (rrc != 0 && !trouble) {
        const char *msg = fence_client_errmsg(c);
        fprintf(stderr, "fencectl: sem \"%s\": release: %s%s%s (the lease will expire)\n",
                a->base.name, fence_strerror(rrc), msg[0] ? ": " : "", msg);
    }
    fence_lease_revoke(c, hs->lease);
    fence_client_close(hs->ka);
    fence_client_close(c);
    int code = pid < 0                ? FENCECTL_EXIT_ERROR
               : WIFEXITED(status)   ? WEXITSTATUS(status)
               : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                     : FENCECTL_EXIT_ERROR;
    if (trouble) {
        fprintf(stderr, "fencectl: sem \"%s\" slot %" PRIu32 ": lease lost while the command "
                "ran (its status was %d); exiting %d\n", a->base.name, h->slot, code,
                FENCECTL_EXIT_LEASE_LOST);
        code = FENCECTL_EXIT_LEASE_LOST;
    }
    free(hs);
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
