/* The lease-holding supervisor of `fencectl sem`, `multi` and `elect`
 * (hold.h): a lease of its own renewed by a thread, CMD in its own process
 * group with the holder's variables, signals forwarded to that group, and
 * CMD stopped (SIGTERM, then SIGKILL after --grace) when the lease is lost
 * or about to run out unrenewed. */
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
#include "base/assert.h"
#include "fencectl/hold.h"

static int lost_pipe[2] = {-1, -1};
static int sig_pipe[2] = {-1, -1};
static const int caught[] = {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
#define N_CAUGHT (sizeof(caught) / sizeof(caught[0]))

/* CMD's variables: at most this many (FENCE_TOKEN, FENCE_LEASE and the
 * caller's), plus FENCE_SERVER. */
#define HOLD_VARS_MAX 8

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
    const fencectl_args *a;
    fencectl_hold *h;
    fence_client *ka;             /* the renewal thread's own client */
    uint64_t lease;
    _Atomic uint64_t valid_until; /* monotonic ms the lease surely lasts */
    _Atomic bool stop;
    _Atomic bool lost;
    _Atomic bool granted;         /* h->token is set: h->check may run */
    char why[160];                /* written once, before lost is set */
} holder_state;

static void say_lost(holder_state *hs, const char *why)
{
    if (atomic_load(&hs->lost))
        return;
    snprintf(hs->why, sizeof(hs->why), "%s", why);
    atomic_store(&hs->lost, true);
    unsigned char b = 1;
    ssize_t n = write(lost_pipe[1], &b, 1);
    (void)n;
}

bool fencectl_hold_lost(const fencectl_hold *h)
{
    const holder_state *hs = h->state;
    return hs != NULL && atomic_load(&hs->lost);
}

/* The renewal thread: LEASE.KEEPALIVE every ttl/3, from the grant on (a
 * long wait for the grant keeps the lease too), and once granted the
 * caller's check. */
static void *renew_main(void *arg)
{
    holder_state *hs = arg;
    fencectl_hold *h = hs->h;
    uint64_t ttl = hs->a->ttl_ms;
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
            say_lost(hs, "lease lost");
            break;
        }
        if (rc == 0)
            atomic_store(&hs->valid_until, sent + ttl);
        const char *why = NULL;
        if (rc == 0 && h->check != NULL && atomic_load(&hs->granted))
            why = h->check(h, hs->ka);
        if (why != NULL)
            say_lost(hs, why);
    }
    return NULL;
}

static bool is_ours(const fencectl_hold *h, const char *var)
{
    if (strncmp(var, "FENCE_SERVER=", 13) == 0 || strncmp(var, "FENCE_TOKEN=", 12) == 0 ||
        strncmp(var, "FENCE_LEASE=", 12) == 0)
        return true;
    for (size_t j = 0; h->env_names[j] != NULL; j++)
        if (strncmp(var, h->env_names[j], strlen(h->env_names[j])) == 0)
            return true;
    return false;
}

/* Our environment without the FENCE_* variables we set, plus ours.  Built
 * before fork() (the renewal thread may hold the allocator's lock at the
 * fork). */
static char **child_env(fencectl_hold *h, char **buf_out)
{
    extern char **environ;
    size_t n = 0;
    while (environ[n] != NULL)
        n++;
    char **env = calloc(n + HOLD_VARS_MAX + 2, sizeof(char *));
    const char *servers = fencectl_servers(h->a);
    /* Room for a multi-lock's names or signed tokens, space-separated. */
    size_t cap = strlen(servers) + (size_t)FENCE_MULTI_NAMES *
                                       (FENCE_SIGNED_TOKEN_BUF_SIZE + FENCE_NAME_MAX + 2) + 64;
    char *buf = malloc(cap * (HOLD_VARS_MAX + 1));
    if (env == NULL || buf == NULL) {
        free(env);
        free(buf);
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!is_ours(h, environ[i]))
            env[k++] = environ[i];
    int m = 0;
    snprintf(buf + (size_t)m++ * cap, cap, "FENCE_TOKEN=%" PRIu64, h->token);
    snprintf(buf + (size_t)m++ * cap, cap, "FENCE_LEASE=%" PRIu64, h->lease);
    int more = h->env(h, buf + (size_t)m * cap, cap, HOLD_VARS_MAX - m);
    FENCE_ASSERT(more >= 0 && more <= HOLD_VARS_MAX - m);
    m += more;
    snprintf(buf + (size_t)m++ * cap, cap, "FENCE_SERVER=%s", servers);
    for (int j = 0; j < m; j++)
        env[k++] = buf + (size_t)j * cap;
    env[k] = NULL;
    *buf_out = buf;
    return env;
}

static pid_t start_child(fencectl_hold *h, const sigset_t *old_mask)
{
    const fencectl_args *a = h->a;
    char *buf = NULL;
    char **env = child_env(h, &buf);
    if (env == NULL) {
        fprintf(stderr, "fencectl: %s: out of memory\n", h->what);
        return -1;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        fprintf(stderr, "fencectl: %s: fork: %s\n", h->what, strerror(errno));
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* nothing renews the lease without us */
        if (getppid() != parent)
            _exit(FENCECTL_EXIT_LEASE_LOST);
        fencectl_default_signals(caught, N_CAUGHT, old_mask);
        execvpe(a->cmd_argv[0], a->cmd_argv, env);
        int e = errno;
        ssize_t w = write(2, "fencectl: cannot run ", 21);
        w = write(2, a->cmd_argv[0], strlen(a->cmd_argv[0]));
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
        fprintf(stderr, "fencectl: pipe: %s\n", strerror(errno));
        exit(FENCECTL_EXIT_ERROR);
    }
}

/* Supervise CMD (pid) until it exits; *trouble when the lease was lost or
 * about to run out.  Returns CMD's wait status. */
static int supervise(const fencectl_hold *h, holder_state *hs, pid_t pid, bool *trouble_out)
{
    const fencectl_args *a = h->a;
    uint64_t lead_ms = a->grace_ms < a->ttl_ms / 4 ? a->grace_ms : a->ttl_ms / 4;
    bool trouble = false, term_sent = false, kill_sent = false;
    uint64_t kill_at = 0;
    int status = 0;
    for (;;) {
        uint64_t now = fence_monotonic_ms();
        const char *why = NULL;
        if (!trouble && atomic_load(&hs->lost))
            why = hs->why;
        else if (!trouble && now + lead_ms >= atomic_load(&hs->valid_until))
            why = "lease not renewed and about to expire";
        if (why != NULL) {
            trouble = true;
            fprintf(stderr, "fencectl: %s (token %" PRIu64 ", lease %" PRIu64 "): %s; sending "
                    "SIGTERM to process group %ld\n", h->what, h->token, h->lease, why,
                    (long)pid);
            killpg(pid, SIGTERM);
            term_sent = true;
            kill_at = now + a->grace_ms;
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

int fencectl_hold_run(fencectl_hold *h)
{
    const fencectl_args *a = h->a;
    make_pipe(lost_pipe);
    make_pipe(sig_pipe);
    fence_client *c = fencectl_open(a);
    holder_state *hs = calloc(1, sizeof(*hs));
    if (hs == NULL) {
        fprintf(stderr, "fencectl: %s: out of memory\n", h->what);
        fence_client_close(c);
        return FENCECTL_EXIT_ERROR;
    }
    hs->a = a;
    hs->h = h;
    h->state = hs;
    hs->ka = fencectl_open(a);
    fencectl_tell_reconnects(c);
    uint64_t t0 = fence_monotonic_ms();
    int rc = fence_lease_grant(c, a->ttl_ms, &hs->lease);
    atomic_store(&hs->valid_until, t0 + a->ttl_ms);
    h->lease = hs->lease;
    pthread_t th;
    bool thread = false;
    if (rc == 0) {
        thread = pthread_create(&th, NULL, renew_main, hs) == 0;
        if (!thread)
            rc = FENCE_ENOMEM;
    }
    if (rc == 0)
        rc = h->grant(h, c);
    if (rc == 0 && atomic_load(&hs->lost))
        rc = FENCE_ELEASELOST;
    if (rc == 0)
        atomic_store(&hs->granted, true);
    if (rc != 0) {
        const char *msg = fence_client_errmsg(c);
        fprintf(stderr, "fencectl: %s: %s%s%s\n", h->what, fence_strerror(rc),
                msg[0] ? ": " : "", msg);
        atomic_store(&hs->stop, true);
        if (thread)
            pthread_join(th, NULL);
        if (hs->lease != 0)
            fence_lease_revoke(c, hs->lease); /* frees what was granted meanwhile too */
        fence_client_close(hs->ka);
        fence_client_close(c);
        h->state = NULL;
        free(hs);
        return fencectl_exit_code(rc);
    }

    /* From here the signals are caught and forwarded to CMD's group. */
    sigset_t old_mask;
    fencectl_catch_signals(caught, N_CAUGHT, on_signal, &old_mask);
    pid_t pid = start_child(h, &old_mask);
    sigprocmask(SIG_SETMASK, &old_mask, NULL);

    int status = 0;
    bool trouble = false;
    if (pid > 0)
        status = supervise(h, hs, pid, &trouble);
    atomic_store(&hs->stop, true);
    pthread_join(th, NULL);
    /* Keyed by token: harmless when what was held has moved on already. */
    int rrc = h->release(h, c);
    if (rrc != 0 && !trouble) {
        const char *msg = fence_client_errmsg(c);
        fprintf(stderr, "fencectl: %s: release: %s%s%s (the lease will expire)\n", h->what,
                fence_strerror(rrc), msg[0] ? ": " : "", msg);
    }
    fence_lease_revoke(c, hs->lease);
    fence_client_close(hs->ka);
    fence_client_close(c);
    int code = pid < 0                ? FENCECTL_EXIT_ERROR
               : WIFEXITED(status)   ? WEXITSTATUS(status)
               : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                     : FENCECTL_EXIT_ERROR;
    if (trouble) {
        fprintf(stderr, "fencectl: %s: %s while the command ran (its status was %d); "
                "exiting %d\n", h->what, h->lost_what != NULL ? h->lost_what : "lease lost",
                code, FENCECTL_EXIT_LEASE_LOST);
        code = FENCECTL_EXIT_LEASE_LOST;
    }
    h->state = NULL;
    free(hs);
    return code;
}

int fencectl_hold_option(fencectl_args *a, int argc, char **argv, int *i, bool with_signed,
                         const char **err, const char **err_arg)
{
    const char *s = argv[*i];
    const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    if (with_signed && strcmp(s, "--signed") == 0) {
        a->signed_token = true;
        return 1;
    }
    if (v == NULL)
        return 0;
    if (strcmp(s, "--server") == 0) {
        a->servers = v;
        (*i)++;
        return 1;
    }
    if (strcmp(s, "--timeout") != 0 && strcmp(s, "--ttl") != 0 && strcmp(s, "--wait") != 0 &&
        strcmp(s, "--grace") != 0)
        return 0;
    uint64_t x;
    if (!fencectl_parse_ms(v, FENCE_WAIT_MS_MAX, &x)) {
        *err = "bad number for";
        *err_arg = s;
        return -1;
    }
    if (strcmp(s, "--timeout") == 0) {
        a->timeout_ms = (uint32_t)x;
    } else if (strcmp(s, "--ttl") == 0) {
        if (x < FENCE_TTL_MS_MIN || x > FENCE_TTL_MS_MAX) {
            *err = "--ttl wants 10..604800000, not";
            *err_arg = v;
            return -1;
        }
        a->ttl_ms = (uint32_t)x;
    } else if (strcmp(s, "--wait") == 0) {
        a->wait_ms = (uint32_t)x;
    } else {
        a->grace_ms = (uint32_t)x;
        a->grace_set = true;
    }
    (*i)++;
    return 1;
}
