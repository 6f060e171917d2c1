/* Pure helpers of libfence: address lists, error replies, backoff, deadline
 * arithmetic.  No sockets, no hiredis, no clocks: unit-tested directly
 * (tests/unit/test_client_pure.c).  Private to the library. */
#ifndef FENCE_CLIENT_PURE_H
#define FENCE_CLIENT_PURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Most addresses a client knows (the configured list plus leaders learnt
 * from NOTLEADER redirects). */
#define FENCE__ADDRS_MAX 16
/* Longest host name or Unix socket path in an address. */
#define FENCE__HOST_MAX 108
/* Longest server list string accepted by fence_client_open(). */
#define FENCE__SERVERS_MAX 2048

/* One server address. */
typedef struct fence__addr {
    bool is_unix;                   /* true: path is a Unix socket */
    char host[FENCE__HOST_MAX + 1]; /* host name or address (or socket path) */
    int port;                       /* 1..65535 (0 for a Unix socket) */
} fence__addr;

/* Parse one address, "host:port", "[v6]:port" or "unix:/path", from
 * s[0..len).  0 on success, FENCE_EINVAL otherwise (out undefined). */
int fence__addr_parse(const char *s, size_t len, fence__addr *out);

/* Parse a comma-separated list into out[0..cap).  *n_out is the count.
 * 0, or FENCE_EINVAL (empty list, an empty or malformed item, more than
 * cap items). */
int fence__addr_parse_list(const char *s, fence__addr *out, size_t cap,
                           size_t *n_out);

/* Format a as "host:port" (or "unix:/path") into buf (cap bytes). */
void fence__addr_format(const fence__addr *a, char *buf, size_t cap);

/* True if the two addresses are the same. */
bool fence__addr_equal(const fence__addr *a, const fence__addr *b);

/* Map a RESP error reply text (e.g. "NOLEASE no such lease") to a FENCE_E*
 * code by its first word: NOLEASE, LIMIT, TRYAGAIN, NOTLEADER, STALE,
 * BADTOKEN; any
 * other (ERR, ...) is FENCE_ESERVER. */
int fence__error_code(const char *err);

/* Parse "NOTLEADER host:port ...": 0 and *out filled when an address is
 * given, FENCE_ENOTLEADER when the leader is unknown or the text does not
 * parse. */
int fence__parse_notleader(const char *err, fence__addr *out);

/* Parse "STALE <token> <highest>": 0 and *highest_out set, or FENCE_EPROTO. */
int fence__parse_stale(const char *err, uint64_t *highest_out);

/* Parse a decimal u64 from s[0..len) (no sign, no spaces, no overflow).
 * Returns true on success. */
bool fence__parse_u64(const char *s, size_t len, uint64_t *out);

/* Parse a signed token reply s[0..len) ("<token>.<key id>.<signature>",
 * docs/security.md): 1..cap-1 printable, non-space ASCII bytes that start
 * with a decimal token > 0 followed by '.'.  Only the shape is checked (the
 * resource verifies the signature).  On success *token_out is the number
 * and buf (cap bytes) the NUL-terminated string; returns true. */
bool fence__parse_signed(const char *s, size_t len, uint64_t *token_out,
                         char *buf, size_t cap);

/* The pause before reconnect attempt `attempt` (0-based): min_ms doubled per
 * attempt, capped at max_ms, then scaled into [1/2, 1] of that by
 * rand_u32 (jitter, so clients do not reconnect in lockstep). */
uint32_t fence__backoff_ms(uint32_t attempt, uint32_t min_ms, uint32_t max_ms,
                           uint32_t rand_u32);

/* The margin subtracted from valid-until for a lease of ttl_ms when the
 * configured margin is margin_ms (0: ttl/10 + 5 ms), never more than half
 * the TTL. */
uint64_t fence__margin_ms(uint64_t ttl_ms, uint64_t margin_ms);

/* valid-until = sent_ms + ttl_ms - margin (saturating at sent_ms). */
uint64_t fence__valid_until(uint64_t sent_ms, uint64_t ttl_ms,
                            uint64_t margin_ms);

/* When to renew next: about a third of the TTL after the request that
 * granted or renewed the lease was sent. */
uint64_t fence__renew_at(uint64_t sent_ms, uint64_t ttl_ms);

/* Whether an acquire with this wait uses ACQUIRE (one round trip; the wait
 * is short enough that the dedicated lease cannot run low while queued)
 * rather than LEASE.GRANT + LOCK with the lease kept alive while waiting. */
bool fence__use_acquire(uint64_t ttl_ms, uint64_t wait_ms);

#endif /* FENCE_CLIENT_PURE_H */
