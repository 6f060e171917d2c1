/* fence-store commands: turning a parsed RESP request into a checked
 * command.  Pure code (no I/O, no allocation), fuzzed by
 * tests/fuzz/store_fuzz.c. */
#ifndef FENCE_STORE_CMD_H
#define FENCE_STORE_CMD_H

#include <stddef.h>
#include <stdint.h>

#include "token/signtok.h"
#include "proto/resp.h"

/* The commands fence-store understands. */
typedef enum fence_store_op {
    FENCE_STORE_OP_FSET,        /* FSET <fence> <token> <key> <value> */
    FENCE_STORE_OP_FDEL,        /* FDEL <fence> <token> <key> */
    FENCE_STORE_OP_FINCR,       /* FINCR <fence> <token> <key> */
    FENCE_STORE_OP_FGET,        /* FGET <key> */
    FENCE_STORE_OP_FENCE_HIGH,  /* FENCE.HIGH <fence> */
    FENCE_STORE_OP_FENCE_ADMIT, /* FENCE.ADMIT <fence> <token> */
    FENCE_STORE_OP_PING,        /* PING [message] */
    FENCE_STORE_OP_INFO,        /* INFO [section] */
    FENCE_STORE_OP_QUIT,        /* QUIT */
} fence_store_op;

/* A checked command.  Pointers borrow from the request (valid as long as
 * the request's buffer and message are). */
typedef struct fence_store_cmd {
    fence_store_op op;          /* which command */
    const char *fence;    /* fence name (writes, FENCE.*), else NULL */
    size_t fence_len;     /* 1..FENCE_NAME_MAX */
    uint64_t token;       /* fencing token (writes, FENCE.ADMIT) */
    const char *key;      /* key (FSET, FDEL, FINCR, FGET), else NULL */
    size_t key_len;       /* 1..FENCE_STORE_KEY_MAX */
    const char *value;    /* value (FSET), or PING's message, else NULL */
    size_t value_len;     /* bytes of value */
} fence_store_cmd;

/* Largest token accepted on the wire: RESP integers are signed 64-bit, so
 * a token must fit one to be returned by FENCE.HIGH. */
#define FENCE_STORE_TOKEN_MAX ((uint64_t)INT64_MAX)

/* Check msg (argc >= 1) against the command table and fill *out.
 * value_max is the configured --max-value.  verifier: --token-verify-keys
 * (only tokens fenced signed for the fence pass, else -BADTOKEN), or NULL
 * (a signed token counts by its number, unverified).  Returns 0, or -1 with an error
 * reply's code ("ERR" or "LIMIT") in *code and a one-line message in
 * err[0..errcap) (printable ASCII only, even if the request was not). */
int fence__store_cmd_parse(const fence_resp_msg *msg, uint64_t value_max,
                    fence_signtok_verifier *verifier, fence_store_cmd *out, const char **code, char *err,
                    size_t errcap);

/* The command's canonical upper-case name. */
const char *fence__store_cmd_name(fence_store_op op);

/* Copy up to 40 bytes of p[0..n) into out[0..cap) (cap > 4) as printable
 * ASCII, others as '?', with "..." when cut and a NUL: so user bytes can go
 * into a one-line error reply. */
void fence__store_printable(char *out, size_t cap, const char *p, size_t n);

/* True if op writes (takes a fence and a token). */
int fence__store_cmd_is_write(fence_store_op op);

#endif /* FENCE_STORE_CMD_H */
