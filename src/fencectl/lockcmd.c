/* `fencectl lock NAME -- CMD`: hold a lock while CMD runs, hand CMD the
 * token, and stop CMD's whole process group when the lease is lost or about
 * to run out without renewal. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fencectl/cli.h"

/* Written (one byte) by the lease-lost callback. */
static int lost_pipe[2] = {-1, -1};
/* Written (the signal number) by the signal handler. */
static int sig_pipe[2] = {-1, -1};

/* Signals fencectl lock catches: SIGCHLD to notice CMD's exit, the others
 * to forward to CMD's process group. */
static const int caught[] = {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
#define N_CAUGHT (sizeof(caught) / sizeof(caught[0]))

/* Signal handler: report the signal through the self-pipe. */
static void on_signal(int sig)
{
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    ssize_t n = write(sig_pipe[1], &b, 1);
    (void)n;
    errno = saved;
}

/* Lease-lost callback (keepalive thread): wake the main loop. */
static void on_lost(fence_lock *l, int rc, void *arg)
{
    (void)l;
    (void)arg;
    unsigned char b = (unsigned char)(-rc);
    ssize_t n = write(lost_pipe[1], &b, 1);
    (void)n;
}

/* Make a non-blocking close-on-exec pipe, or exit. */
static void make_pipe(int p[2])
{
    if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) {
        fprintf(stderr, "fencectl: lock: pipe: %s\n", strerror(errno));
        exit(FENCECTL_EXIT_ERROR);
    }
}

/* Build CMD's environment: ours plus the FENCE_* variables (replacing any
 * inherited ones).  Built before fork(), because the keepalive thread may
 * hold the allocator's lock at the moment of the fork, and the child must
 * only make async-signal-safe calls before exec. */
static char **child_env(const fencectl_args *a, fence_lock *l, char **buf_out)
{
    extern char **environ;
    size_t n = 0;
    while (environ[n] != NULL)
        n++;
    char **env = calloc(n + 6, sizeof(char *));
    if (env == NULL)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "FENCE_TOKEN=", 12) != 0 &&
            strncmp(environ[i], "FENCE_LEASE=", 12) != 0 &&
            strncmp(environ[i], "FENCE_LOCK=", 11) != 0 &&
            strncmp(environ[i], "FENCE_SIGNED_TOKEN=", 19) != 0 &&
            strncmp(environ[i], "FENCE_SERVER=", 13) != 0)
            env[k++] = environ[i];
    const char *servers = fencectl_servers(a);
    size_t cap = strlen(a->name) + strlen(servers) + FENCE_SIGNED_TOKEN_BUF_SIZE + 128;
    char *buf = malloc(cap * 5);
    if (buf == NULL) {
        free(env);
        return NULL;
    }
    env[k++] = buf;
    snprintf(buf, cap, "FENCE_TOKEN=%" PRIu64, fence_lock_token(l));
    env[k++] = buf + cap;
    snprintf(buf + cap, cap, "FENCE_LEASE=%" PRIu64, fence_lock_lease(l));
    env[k++] = buf + 2 * cap;
    snprintf(buf + 2 * cap, cap, "FENCE_LOCK=%s", a->name);
    env[k++] = buf + 3 * cap;
    snprintf(buf + 3 * cap, cap, "FENCE_SERVER=%s", servers);
    if (fence_lock_signed_token(l) != NULL) {
        env[k++] = buf + 4 * cap;
        snprintf(buf + 4 * cap, cap, "FENCE_SIGNED_TOKEN=%s", fence_lock_signed_token(l));
    }
    env[k] = NULL;
    *buf_out = buf;
    return env;
}

/* Write a message from the forked child (async-signal-safe). */
static void child_say(const char *a, const char *b, const char *c)
{
    ssize_t n = write(2, a, strlen(a));
    n = write(2, b, strlen(b));
    n = write(2, c, strlen(c));
    (void)n;
}

/* Start CMD in its own process group with the lock's environment (and, if
 * fencectl owns the terminal, as the terminal's foreground group).  Returns
 * its pid (which is also its process group id), or -1. */
static pid_t start_child(const fencectl_args *a, fence_lock *l, const sigset_t *old_mask,
                         bool tty)
{
    char *buf = NULL;
    char **env = child_env(a, l, &buf);
    if (env == NULL) {
        fprintf(stderr, "fencectl: lock: out of memory\n");
        return -1;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "fencectl: lock: fork: %s\n", strerror(errno));
        free(buf);
        free(env);
        return -1;
    }
    if (pid == 0) {
        setpgid(0, 0);
        /* If fencectl itself dies (kill -9), nothing renews the lease any
         * more: CMD gets the --on-lost signal from the kernel. */
        if (a->on_lost != FENCECTL_ON_LOST_IGNORE) {
            prctl(PR_SET_PDEATHSIG, a->on_lost == FENCECTL_ON_LOST_KILL ? SIGKILL : SIGTERM);
            if (getppid() != parent)
                _exit(FENCECTL_EXIT_LEASE_LOST);
        }
        if (tty) {
            /* SIGTTOU is still blocked here (see fencectl_cmd_lock). */
            tcsetpgrp(0, getpid());
        }
        fencectl_default_signals(caught, N_CAUGHT, old_mask);
        execvpe(a->cmd_argv[0], a->cmd_argv, env);
        int e = errno;
        child_say("fencectl: lock: cannot run ", a->cmd_argv[0],
                  e == ENOENT ? ": not found\n" : ": not executable\n");
        _exit(e == ENOENT ? FENCECTL_EXIT_NOT_FOUND : FENCECTL_EXIT_CANNOT_EXEC);
    }
    /* Also from the parent, so the group exists before we may signal it. */
    setpgid(pid, pid);
    if (tty)
        tcsetpgrp(0, pid);
    free(buf);
    free(env);
    return pid;
}

/* State of the supervision loop. */
typedef struct supervisor {
    const fencectl_args *a; /* options */
    fence_lock *l;          /* the held lock */
    pid_t pid;              /* CMD's pid and process group */
    bool lease_trouble;     /* lost, or stop started before valid-until */
    bool term_sent;         /* SIGTERM sent to the group */
    bool kill_sent;         /* SIGKILL sent to the group */
    uint64_t kill_at_ms;    /* when to send SIGKILL after SIGTERM */
    uint64_t lead_ms;       /* how long before valid-until to start stopping */
} supervisor;

/* Begin stopping CMD because of the lease (once). */
static void lease_trouble(supervisor *s, const char *why)
{
    if (s->lease_trouble)
        return;
    s->lease_trouble = true;
    const fencectl_args *a = s->a;
    const char *action = a->on_lost == FENCECTL_ON_LOST_TERM   ? "sending SIGTERM to"
                         : a->on_lost == FENCECTL_ON_LOST_KILL ? "sending SIGKILL to"
                                                               : "leaving running (--on-lost ignore)";
    fprintf(stderr, "fencectl: lock \"%s\" (token %" PRIu64 ", lease %" PRIu64 "): %s; %s "
            "process group %ld\n", a->name, fence_lock_token(s->l), fence_lock_lease(s->l),
            why, action, (long)s->pid);
    if (a->on_lost == FENCECTL_ON_LOST_TERM) {
        killpg(s->pid, SIGTERM);
        s->term_sent = true;
        s->kill_at_ms = fence_monotonic_ms() + a->grace_ms;
    } else if (a->on_lost == FENCECTL_ON_LOST_KILL) {
        killpg(s->pid, SIGKILL);
        s->kill_sent = true;
    }
}

/* Run CMD under the lock; see the usage text. */
int fencectl_cmd_lock(const fencectl_args *a)
{
    make_pipe(lost_pipe);
    make_pipe(sig_pipe);

    /* If we are the terminal's foreground group, CMD becomes it (so it can
     * read the terminal and gets ^C directly); SIGTTOU stays blocked while
     * the foreground group is moved, and back at the end. */
    bool tty = isatty(0) && tcgetpgrp(0) == getpgrp();
    sigset_t ttou;
    sigemptyset(&ttou);
    sigaddset(&ttou, SIGTTOU);

    fence_client *c = fencectl_open(a);
    fence_lock *l = NULL;
    fencectl_tell_reconnects(c);
    fencectl_say_waiting(c, a->name, a->wait_ms);
    int rc = fence_lock_acquire_ex(c, a->name, a->ttl_ms, a->wait_ms,
                                   (a->signed_token ? FENCE_LOCK_SIGNED : 0u) |
                                       (a->shared ? FENCE_LOCK_SHARED : 0u),
                                   &l);
    if (rc != 0) {
        const char *msg = fence_client_errmsg(c);
        fprintf(stderr, "fencectl: lock \"%s\": %s%s%s\n", a->name, fence_strerror(rc),
                msg[0] ? ": " : "", msg);
        fence_client_close(c);
        return fencectl_exit_code(rc);
    }
    fence_lock_on_lost(l, on_lost, NULL);

    /* Until now the signals had their default effect (^C while waiting for
     * the lock ends fencectl; a lease granted meanwhile just expires).  From
     * here they are caught and forwarded to CMD.  They stay blocked in this
     * thread until the child exists; the handler only writes to a pipe, so
     * it may run in the keepalive thread too. */
    sigset_t old_mask;
    fencectl_catch_signals(caught, N_CAUGHT, on_signal, &old_mask);

    supervisor s = {.a = a, .l = l, .pid = -1};
    uint64_t ttl = fence_lock_ttl_ms(l);
    s.lead_ms = a->grace_ms < ttl / 4 ? a->grace_ms : ttl / 4;

    if (tty)
        sigprocmask(SIG_BLOCK, &ttou, NULL);
    s.pid = start_child(a, l, &old_mask, tty);
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    if (s.pid < 0) {
        fence_lock_release(l);
        fence_client_close(c);
        return FENCECTL_EXIT_ERROR;
    }

    int status = 0;
    bool exited = false;
    while (!exited) {
        uint64_t now = fence_monotonic_ms();
        if (!s.lease_trouble) {
            uint64_t vu = fence_lock_valid_until(l);
            if (vu == 0)
                lease_trouble(&s, "lease lost");
            else if (now + s.lead_ms >= vu)
                lease_trouble(&s, "lease not renewed and about to expire");
        }
        if (s.term_sent && !s.kill_sent && now >= s.kill_at_ms) {
            fprintf(stderr, "fencectl: grace period over; sending SIGKILL to process group %ld\n",
                    (long)s.pid);
            killpg(s.pid, SIGKILL);
            s.kill_sent = true;
        }
        /* Sleep until the next deadline or an event. */
        uint64_t wake = UINT64_MAX;
        if (!s.lease_trouble) {
            uint64_t vu = fence_lock_valid_until(l);
            wake = vu > s.lead_ms ? vu - s.lead_ms : 0;
        }
        if (s.term_sent && !s.kill_sent && s.kill_at_ms < wake)
            wake = s.kill_at_ms;
        int timeout = -1;
        now = fence_monotonic_ms();
        if (wake != UINT64_MAX)
            timeout = wake <= now ? 0 : (wake - now > 60000 ? 60000 : (int)(wake - now));
        struct pollfd pfd[2] = {{lost_pipe[0], POLLIN, 0}, {sig_pipe[0], POLLIN, 0}};
        int n = poll(pfd, 2, timeout);
        if (n < 0 && errno != EINTR) {
            fprintf(stderr, "fencectl: lock: poll: %s\n", strerror(errno));
            break;
        }
        unsigned char buf[64];
        if (n > 0 && (pfd[0].revents & POLLIN)) {
            while (read(lost_pipe[0], buf, sizeof(buf)) > 0) {
            }
            lease_trouble(&s, "lease lost");
        }
        if (n > 0 && (pfd[1].revents & POLLIN)) {
            ssize_t got;
            while ((got = read(sig_pipe[0], buf, sizeof(buf))) > 0) {
                for (ssize_t i = 0; i < got; i++)
                    if (buf[i] != SIGCHLD)
                        killpg(s.pid, buf[i]);
            }
        }
        pid_t w = waitpid(s.pid, &status, WNOHANG);
        if (w == s.pid)
            exited = true;
        else if (w < 0 && errno == ECHILD)
            break;
    }

    if (tty) {
        sigprocmask(SIG_BLOCK, &ttou, NULL);
        tcsetpgrp(0, getpgrp());
        sigprocmask(SIG_UNBLOCK, &ttou, NULL);
    }
    /* Whatever else is left in CMD's group must not outlive a lost lease:
     * it gets the rest of the grace period after SIGTERM, then SIGKILL. */
    if (s.lease_trouble && a->on_lost != FENCECTL_ON_LOST_IGNORE && !s.kill_sent) {
        while (killpg(s.pid, 0) == 0 && s.term_sent && fence_monotonic_ms() < s.kill_at_ms)
            usleep(10000);
        if (killpg(s.pid, 0) == 0)
            killpg(s.pid, SIGKILL);
    }

    int rrc = fence_lock_release(l);
    if (rrc != 0 && !s.lease_trouble) {
        const char *msg = fence_client_errmsg(c);
        fprintf(stderr, "fencectl: lock \"%s\": release: %s%s%s (the lease will expire)\n",
                a->name, fence_strerror(rrc), msg[0] ? ": " : "", msg);
    }
    fence_client_close(c);

    int code;
    if (WIFEXITED(status))
        code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status))
        code = 128 + WTERMSIG(status);
    else
        code = FENCECTL_EXIT_ERROR;
    if (s.lease_trouble) {
        fprintf(stderr, "fencectl: lock \"%s\": lease lost while the command ran (its status "
                "was %d); exiting %d\n", a->name, code, FENCECTL_EXIT_LEASE_LOST);
        return FENCECTL_EXIT_LEASE_LOST;
    }
    return code;
}
