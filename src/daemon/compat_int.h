/* Redis-client compatibility, private to src/daemon/compat*.c: the reply
 * builder's helpers and the handlers the entry point (compat.c) calls.
 *
 *   compat.c          the entry point, HELLO, AUTH, SELECT, ECHO, TIME,
 *                     RESET and the refused transactions
 *   compat_reply.c    the reply buffer, its RESP encoders, word helpers
 *   compat_command.c  this module's command table and COMMAND
 *   compat_client.c   CLIENT (ID, names, SETINFO, INFO, LIST, HELP)
 *   compat_info.c     the INFO builder the daemons fill in
 *
 * Other code includes daemon/compat.h only. */
#ifndef FENCE_DAEMON_COMPAT_INT_H
#define FENCE_DAEMON_COMPAT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/compat.h"

/* ---- compat_reply.c: appending to a reply -------------------------------- */
/* Every fence__compat_put* appends to r; a reply that would pass
 * FENCE_COMPAT_REPLY_MAX or meets a short memory sets r->failed, and
 * fence__compat_finish turns it into a short error. */

/* Append raw bytes p[0..n). */
void fence__compat_put(fence_compat_reply *r, const char *p, size_t n);
/* Append a NUL-terminated string as raw bytes. */
void fence__compat_puts(fence_compat_reply *r, const char *s);
/* Append printf-formatted raw text (a line must fit 1 KiB). */
__attribute__((format(printf, 2, 3)))
void fence__compat_putf(fence_compat_reply *r, const char *fmt, ...);
/* Append "+s". */
void fence__compat_put_simple(fence_compat_reply *r, const char *s);
/* Append "-CODE msg". */
void fence__compat_put_error(fence_compat_reply *r, const char *code, const char *msg);
/* Append "-CODE <formatted text>". */
__attribute__((format(printf, 3, 4)))
void fence__compat_put_errorf(fence_compat_reply *r, const char *code, const char *fmt, ...);
/* Append ":v". */
void fence__compat_put_int(fence_compat_reply *r, int64_t v);
/* Append "*n". */
void fence__compat_put_array(fence_compat_reply *r, int64_t n);
/* Append a nil in the reply's protocol. */
void fence__compat_put_nil(fence_compat_reply *r);
/* Append a map header of n pairs in the reply's protocol. */
void fence__compat_put_map(fence_compat_reply *r, int64_t n);
/* Append a set header of n elements in the reply's protocol. */
void fence__compat_put_set(fence_compat_reply *r, int64_t n);
/* Append a bulk string of n bytes. */
void fence__compat_put_bulk(fence_compat_reply *r, const char *p, size_t n);
/* Append a bulk string holding s. */
void fence__compat_put_str(fence_compat_reply *r, const char *s);
/* Append a bulk string holding s in lower case (command names). */
void fence__compat_put_lower(fence_compat_reply *r, const char *s);
/* Reply Redis' arity error for command name (e.g. "client|setname"). */
void fence__compat_put_arity_error(fence_compat_reply *r, const char *name);
/* If building the reply failed, replace it by a short error. */
void fence__compat_finish(fence_compat_reply *r);

/* ---- compat_reply.c: words of a request ----------------------------------- */

/* Whether argument a equals word, ignoring case. */
bool fence__compat_arg_is(const fence_resp_arg *a, const char *word);
/* Copy a command word into buf as lower case, truncated, for messages. */
const char *fence__compat_word_lower(const fence_resp_arg *a, char *buf, size_t cap);
/* Copy a word into buf as is (non-printable bytes as '?'), for messages. */
const char *fence__compat_word_print(const fence_resp_arg *a, char *buf, size_t cap);
/* Whether a name is printable ASCII without spaces, as Redis requires. */
bool fence__compat_name_ok(const fence_resp_arg *a);
/* Copy a validated name into dst (capacity cap including the NUL). */
void fence__compat_copy_name(char *dst, size_t cap, const fence_resp_arg *a);
/* Parse a signed decimal: 0 and *out, or -1 when it is not an integer. */
int fence__compat_parse_i64(const fence_resp_arg *a, int64_t *out);

/* ---- compat_command.c: this module's table and COMMAND --------------------- */

/* The command of this module named a (NULL if not one). */
const fence_compat_command *fence__compat_builtin_find(const fence_resp_arg *a);
/* The subcommand of cmd named by a second word ("ID" for CLIENT|ID), or
 * NULL. */
const fence_compat_command *fence__compat_sub_find(const fence_compat_command *cmd,
                                                   const fence_resp_arg *a);
/* COMMAND [COUNT | LIST | INFO [name ...] | DOCS [name ...] | HELP]. */
void fence__compat_do_command(const fence_compat_ctx *ctx, const fence_resp_msg *m,
                              fence_compat_reply *r);

/* ---- compat_client.c --------------------------------------------------------- */

/* CLIENT and its subcommands (arity of the container already checked). */
void fence__compat_do_client(const fence_compat_ctx *ctx, fence_compat_conn *c,
                             const fence_resp_msg *m, fence_compat_reply *r);

#endif /* FENCE_DAEMON_COMPAT_INT_H */
