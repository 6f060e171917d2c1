/* RESP request parser and RESP2/RESP3 reply encoder: pure functions over
 * bytes.
 *
 * No sockets, no allocation, no globals: it behaves the same under a fuzzer
 * as in the daemon.  Shared by fenced and fence-store (a codec, not lock
 * service code).
 *
 * Requests are either a multibulk array of bulk strings
 * ("*2\r\n$4\r\nPING\r\n$2\r\nhi\r\n") or an inline line ("PING hi\r\n",
 * words split on spaces/tabs, with "..." and '...' quoting as redis-cli
 * accepts; a bare "\n" also ends an inline line).  Empty inline lines are
 * consumed and ignored (returns the bytes consumed with argc == 0).
 */
#ifndef FENCE_RESP_H
#define FENCE_RESP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/limits.h"

/* Return codes of fence_resp_parse besides "> 0: bytes consumed". */
#define FENCE_RESP_PARTIAL (-2)   /* need more bytes */
#define FENCE_RESP_EPROTO (-1)    /* malformed; see msg->error */
#define FENCE_RESP_ETOOBIG (-3)   /* a length or count exceeds a limit */

/* Limits one parse enforces.  args_max is capped at FENCE_ARGS_MAX and
 * inline_max at FENCE_INLINE_MAX (the sizes of the arrays in
 * fence_resp_msg), whatever larger value is passed. */
typedef struct fence_resp_limits {
    uint32_t args_max;   /* most arguments (multibulk count / inline words) */
    uint64_t bulk_max;   /* longest bulk string */
    uint64_t inline_max; /* longest inline line or header line ("*N", "$N"),
                            counted without its "\r\n" */
} fence_resp_limits;

/* Fill *lim with FENCE_ARGS_MAX, FENCE_BULK_DEFAULT and FENCE_INLINE_MAX. */
void fence_resp_limits_default(fence_resp_limits *lim);

/* One argument: points into the caller's buffer (multibulk) or into
 * msg->scratch (inline words with quotes/escapes).  Valid until the buffer
 * changes or the msg is reused. */
typedef struct fence_resp_arg {
    const char *ptr;
    size_t len;
} fence_resp_arg;

typedef struct fence_resp_msg {
    uint32_t argc;
    fence_resp_arg argv[FENCE_ARGS_MAX];
    const char *error;   /* why a parse failed (NULL on success): static
                            text or text in scratch, valid until the msg
                            is reused; one line, no "ERR " prefix */
    char scratch[FENCE_INLINE_MAX]; /* unescaped inline words */
} fence_resp_msg;

/* Parse one request from buf[0..len).
 * > 0: bytes consumed, *out filled (argc may be 0 for an empty inline line);
 * FENCE_RESP_PARTIAL: the request is incomplete (nothing consumed);
 * FENCE_RESP_EPROTO / FENCE_RESP_ETOOBIG: malformed or over a limit,
 * out->error says why (the server replies with it and closes).
 * lim may be NULL for the defaults.  Errors are reported as soon as the
 * bytes that cause them have arrived (a bulk length over the limit before
 * its data, a line over inline_max before its end), and a prefix of a
 * valid request is always PARTIAL.  Multibulk headers and bulk data must
 * end in "\r\n"; "*0" and "*-1" are empty requests (argc 0).  Inline
 * lines: a NUL byte is an ordinary byte; separators are space, \t, \r,
 * \v, \f (as Redis' isspace()); the result words always live in scratch.
 * Texts: "Protocol error: invalid multibulk length", "... too many
 * arguments", "... expected '$', got 'x'", "... invalid bulk length",
 * "... unbalanced quotes in request", "... too big inline request", ... */
ssize_t fence_resp_parse(const char *buf, size_t len,
                         const fence_resp_limits *lim, fence_resp_msg *out);

/* ---- Reply encoding ---------------------------------------------------------
 * Each writes into buf (capacity cap) and returns the bytes the reply needs;
 * when that exceeds cap nothing useful is written and the caller grows the
 * buffer and calls again (snprintf style).  buf may be NULL when cap is 0
 * (to learn the size).  No NUL is written.  simple and error replace "\r"
 * and "\n" in their text by spaces; error writes "-CODE\r\n" when msg is
 * NULL or empty. */
size_t fence_resp_simple(char *buf, size_t cap, const char *s);      /* +s */
size_t fence_resp_error(char *buf, size_t cap, const char *code,
                        const char *msg);                            /* -CODE msg */
size_t fence_resp_int(char *buf, size_t cap, int64_t v);             /* :v */
size_t fence_resp_uint(char *buf, size_t cap, uint64_t v);           /* :v (v <= INT64_MAX) */
size_t fence_resp_bulk(char *buf, size_t cap, const char *p, size_t n); /* $n */
size_t fence_resp_nil(char *buf, size_t cap);                        /* $-1 */
size_t fence_resp_array(char *buf, size_t cap, int64_t n);           /* *n header (-1: nil) */

/* ---- RESP3 reply types -------------------------------------------------------
 * Same contract as above.  A connection that sent HELLO 3 gets these where
 * a reply is a map, a set, a null or a boolean; every other reply type
 * (simple, error, integer, bulk, array) is the same bytes in both
 * protocols.  A map header counts PAIRS (each followed by a key and a
 * value); a set header counts elements. */
size_t fence_resp_map(char *buf, size_t cap, int64_t n);             /* %n header (n >= 0) */
size_t fence_resp_set(char *buf, size_t cap, int64_t n);             /* ~n header (n >= 0) */
size_t fence_resp_null(char *buf, size_t cap);                       /* _ */
size_t fence_resp_bool(char *buf, size_t cap, int v);                /* #t / #f */
/* ,v for a finite double: "%.17g" (shortest exact text for every finite
 * value), "inf" / "-inf" for the infinities; a NaN is written "nan".  */
size_t fence_resp_double(char *buf, size_t cap, double v);
/* =len\r\nfmt:text\r\n: a verbatim string; fmt is exactly 3 bytes
 * ("txt" or "mkd"). */
size_t fence_resp_verbatim(char *buf, size_t cap, const char *fmt,
                           const char *p, size_t n);

/* ---- Protocol-aware helpers: resp is the connection's protocol (2 or 3).
 * RESP2 writes the type a RESP2 client has always received. */
size_t fence_resp_nil_v(char *buf, size_t cap, int resp);            /* $-1 | _ */
size_t fence_resp_map_v(char *buf, size_t cap, int64_t n, int resp); /* *2n | %n */
size_t fence_resp_set_v(char *buf, size_t cap, int64_t n, int resp); /* *n | ~n */
size_t fence_resp_bool_v(char *buf, size_t cap, int v, int resp);    /* :1/:0 | #t/#f */
/* RESP2: a bulk string of the same text (as Redis answers a double or a
 * verbatim string to a RESP2 client). */
size_t fence_resp_double_v(char *buf, size_t cap, double v, int resp); /* $text | ,text */
size_t fence_resp_verbatim_v(char *buf, size_t cap, const char *fmt,
                             const char *p, size_t n, int resp);     /* $n | =n+4 */

/* Encode a request (array of bulk strings), as a client would send it.
 * Used by tests and the fuzz round trip.  Returns bytes needed. */
size_t fence_resp_request(char *buf, size_t cap, uint32_t argc,
                          const fence_resp_arg *argv);

/* Parse an unsigned decimal (no sign, no spaces, no leading "+", at most
 * 20 digits, <= max).  0 on success, -1 otherwise. */
int fence_resp_parse_u64(const char *p, size_t n, uint64_t max, uint64_t *out);

#endif /* FENCE_RESP_H */
