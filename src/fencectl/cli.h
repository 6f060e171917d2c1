/* fencectl internals shared by its source files.  The helpers down to
 * fencectl_catch_signals are common.c's; each command is its own file's. */
#ifndef FENCECTL_CLI_H
#define FENCECTL_CLI_H

#include <signal.h>

#include "fencectl/args.h"
#include "fence.h"

/* Map a libfence error code to a fencectl exit code. */
int fencectl_exit_code(int rc);

/* Open a client for the parsed arguments (exits with a message on error). */
fence_client *fencectl_open(const fencectl_args *a);

/* The client options the command line asks for (TLS, login, timeout). */
void fencectl_client_opts(const fencectl_args *a, fence_client_opts *o);

/* The server list in use (for FENCE_SERVER in the child's environment). */
const char *fencectl_servers(const fencectl_args *a);

/* Before a wait of wait_ms for lock name: when stderr is a terminal and
 * the lock is held, say "waiting for lock NAME held by lease L" there (a
 * script that reads stderr sees nothing new).  Errors are ignored: the
 * acquire that follows reports them. */
void fencectl_say_waiting(fence_client *c, const char *name, uint32_t wait_ms);

/* Say on stderr when a call loses its connection and reconnects (lock,
 * acquire: a long WAIT should not end silently). */
void fencectl_tell_reconnects(fence_client *c);

/* In a forked child before exec: the n signals sigs and SIGPIPE back to
 * their default action, and the signal mask back to *old_mask (only
 * async-signal-safe calls). */
void fencectl_default_signals(const int *sigs, size_t n, const sigset_t *old_mask);

/* Whether the first word of the command line that is no option (skipping
 * --server's and --timeout's values) is verb: for sem, multi and elect. */
bool fencectl_is_verb(int argc, char **argv, const char *verb);

/* Block the n signals sigs (the mask before them in *old_mask) and catch
 * them with handler (SA_RESTART | SA_NOCLDSTOP): the set-up of a command
 * that forwards signals to its CMD (lockcmd.c, hold.c). */
void fencectl_catch_signals(const int *sigs, size_t n, void (*handler)(int),
                            sigset_t *old_mask);

/* `fencectl lock`: returns the exit code. */
int fencectl_cmd_lock(const fencectl_args *a);

/* `fencectl bench`: returns the exit code. */
int fencectl_cmd_bench(const fencectl_args *a);

/* Whether the command line is `fencectl [opts] cluster ...`: its first word
 * that is not an option or an option's value is "cluster". */
bool fencectl_is_cluster(int argc, char **argv);

/* `fencectl [opts] cluster ...` (src/fencectl/cluster.c); argv is the whole
 * command line.  Parses its own options; returns the exit code. */
int fencectl_cmd_cluster(int argc, char **argv);

/* `fencectl top` (src/fencectl/top.c): whether the command line asks for it,
 * and the live view itself (parses its own options; returns the exit
 * code). */
bool fencectl_is_top(int argc, char **argv);
/* `fencectl elect NAME VALUE -- CMD` and `elect --observe NAME`
 * (src/fencectl/electcmd.c). */
bool fencectl_is_elect(int argc, char **argv);
int fencectl_cmd_elect(int argc, char **argv);
int fencectl_cmd_top(int argc, char **argv);
/* `fencectl sem NAME N -- CMD` and `sem --info NAME` (src/fencectl/semcmd.c). */
bool fencectl_is_sem(int argc, char **argv);
int fencectl_cmd_sem(int argc, char **argv);
/* `fencectl multi NAME... -- CMD` (src/fencectl/multicmd.c). */
bool fencectl_is_multi(int argc, char **argv);
int fencectl_cmd_multi(int argc, char **argv);

/* Whether the command line is `fencectl [opts] keygen ...` (src/fencectl/keygen.c). */
bool fencectl_is_keygen(int argc, char **argv);

/* `fencectl keygen DIR ...`: write a token signing key pair; argv is the
 * whole command line.  Returns the exit code. */
int fencectl_cmd_keygen(int argc, char **argv);

#endif /* FENCECTL_CLI_H */
