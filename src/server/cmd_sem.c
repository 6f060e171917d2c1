/* The replies of the semaphore commands (SEM.ACQUIRE, SEM.RELEASE,
 * SEM.INFO; docs/protocol.md) and the WRONGTYPE error of every command
 * whose name is another kind's.  cmd.c parses the commands; the state
 * machine (core/sem.c) decides. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "server/server.h"

/* Largest value a RESP integer reply can carry. */
#define INT_REPLY_MAX ((uint64_t)INT64_MAX)

static uint64_t clamp(uint64_t v)
{
    return v > INT_REPLY_MAX ? INT_REPLY_MAX : v;
}

/* Keep the command's name in the slot (its reply needs it). */
void fence__cmd_sem_keep_name(fence_slot *slot, const fence_cmd *cmd)
{
    FENCE_ASSERT(cmd->name_len > 0);
    FENCE_ASSERT(cmd->name_len <= sizeof(slot->sign_name));
    memcpy(slot->sign_name, cmd->name, cmd->name_len);
    slot->sign_name_len = cmd->name_len;
}

/* Whether name is a semaphore's or one of its slots' in the state now. */
static bool sem_claims_now(fence_fsm *fsm, const uint8_t *name, uint16_t len)
{
    fence_fsm_sem_state st;
    size_t n = 0;
    if (fence_fsm_sem_info(fsm, name, len, &st, NULL, 0, &n))
        return true;
    uint16_t i = len;
    while (i > 0 && name[i - 1] >= '0' && name[i - 1] <= '9')
        i--;
    if (i == len || len - i > 4 || i < 2 || name[i - 1] != '#' ||
        (len - i > 1 && name[i] == '0'))
        return false;
    uint32_t v = 0;
    for (uint16_t j = i; j < len; j++)
        v = v * 10 + (uint32_t)(name[j] - '0');
    return fence_fsm_sem_info(fsm, name, (uint16_t)(i - 1), &st, NULL, 0, &n) &&
           v < st.permits;
}

/* LOCK.MULTI / ACQUIRE.MULTI: keep the first name that is a semaphore's
 * (or a slot's) or an election's in the state now, else the first name: only the wording of
 * a WRONGTYPE error (the core decides, in the log). */
void fence__cmd_sem_keep_multi_name(fence_server *s, fence_slot *slot, const fence_cmd *cmd)
{
    FENCE_ASSERT(cmd->names_count > 0);
    uint16_t pick = 0;
    for (uint16_t i = 0; i < cmd->names_count; i++) {
        if (sem_claims_now(s->fsm, cmd->names[i].name, cmd->names[i].len) ||
            fence_fsm_is_election(s->fsm, cmd->names[i].name, cmd->names[i].len)) {
            pick = i;
            break;
        }
    }
    fence_cmd one;
    memset(&one, 0, sizeof(one));
    one.name = cmd->names[pick].name;
    one.name_len = cmd->names[pick].len;
    fence__cmd_sem_keep_name(slot, &one);
}

/* "<name> is <its kind>" for a name in use as some kind, asked of the state
 * now (only the wording; the log decided): a semaphore, a semaphore's slot,
 * an election, else a lock (held, shared, a multi-lock's, or one kept free
 * for a waiting multi-lock).  len: the bytes of the name to print. */
void fence__cmd_kind_words(fence_fsm *fsm, const uint8_t *name, uint16_t name_len, char *out,
                           size_t cap)
{
    int len = name_len > 64 ? 64 : (int)name_len;
    const char *nm = (const char *)name;
    if (memchr(name, '\0', name_len) != NULL)
        len = 0; /* a name with NUL bytes: not worded */
    fence_fsm_sem_state st;
    size_t n = 0;
    int base = -1;
    if (fsm != NULL && fence_fsm_sem_info(fsm, name, name_len, &st, NULL, 0, &n)) {
        snprintf(out, cap, "%.*s is a semaphore of %" PRIu32 " permits (SEM.ACQUIRE, "
                 "SEM.RELEASE)", len, nm, st.permits);
        return;
    }
    if (fsm != NULL && sem_claims_now(fsm, name, name_len)) {
        base = (int)name_len;
        while (base > 0 && name[base - 1] != '#')
            base--;
        base--;
        snprintf(out, cap, "%.*s is a slot of semaphore %.*s (SEM.ACQUIRE, SEM.RELEASE)", len,
                 nm, base > len ? len : base, nm);
        return;
    }
    if (fsm != NULL && fence_fsm_is_election(fsm, name, name_len)) {
        snprintf(out, cap, "%.*s is an election (ELECTION.*)", len, nm);
        return;
    }
    snprintf(out, cap, "%.*s is a lock", len, nm);
}

/* SEM.ACQUIRE refused though its name is free: the first of its slot names
 * name#0..name#(n-1) that is a lock or an election, into out; false when
 * none is (the state moved since the log decided). */
static bool slot_name_words(fence_fsm *fsm, const char *name, uint16_t len, uint32_t n,
                            char *out, size_t cap)
{
    char sn[FENCE_NAME_MAX + 8];
    for (uint32_t i = 0; i < n && i < FENCE_SEM_PERMITS_MAX; i++) {
        int k = snprintf(sn, sizeof(sn), "%.*s#%" PRIu32, (int)len, name, i);
        if (k <= 0 || k > FENCE_NAME_MAX)
            return false;
        fence_fsm_lock_state ls;
        bool elect = fence_fsm_is_election(fsm, (const uint8_t *)sn, (uint16_t)k);
        if (elect || fence_fsm_lock_info(fsm, (const uint8_t *)sn, (uint16_t)k, &ls)) {
            char what[FENCE_NAME_MAX + 96];
            fence__cmd_kind_words(fsm, (const uint8_t *)sn, (uint16_t)k, what, sizeof(what));
            int pl = len > 64 ? 64 : (int)len;
            snprintf(out, cap, "%s (the slot names of semaphore %.*s must be free)", what, pl,
                     name);
            return true;
        }
    }
    return false;
}

/* -WRONGTYPE <name> is a <kind>: the name belongs to another kind (a
 * lock, an election, a semaphore or one of its slots).  Only the wording
 * asks the state now; the log decided. */
void fence__cmd_reply_wrongtype(fence_slot *slot, const fence_result *r)
{
    char msg[2 * FENCE_NAME_MAX + 192];
    int len = slot->sign_name_len > 64 ? 64 : (int)slot->sign_name_len;
    const char *name = slot->sign_name;
    bool sem_op = slot->op == OP_SEM_ACQUIRE || slot->op == OP_SEM_ACQUIRE_TTL ||
                  slot->op == OP_SEM_RELEASE;
    fence_fsm *fsm = slot->conn != NULL ? slot->conn->srv->fsm : NULL;
    if (memchr(name, '\0', slot->sign_name_len) != NULL)
        len = 0; /* a name with NUL bytes: not worded */
    const uint8_t *u = (const uint8_t *)name;
    fence_fsm_lock_state ls;
    if (sem_op && r->value != 0)
        snprintf(msg, sizeof(msg), "%.*s is a semaphore of %" PRIu64 " permits", len, name,
                 r->value);
    else if (!sem_op || fsm == NULL || fence_fsm_is_election(fsm, u, slot->sign_name_len) ||
             fence_fsm_lock_info(fsm, u, slot->sign_name_len, &ls) ||
             !slot_name_words(fsm, name, slot->sign_name_len, slot->sem_permits, msg,
                              sizeof(msg)))
        /* The name itself is another kind (or, for a SEM.ACQUIRE whose
         * slot names are free by now, the state moved: a lock, then). */
        fence__cmd_kind_words(fsm, u, slot->sign_name_len, msg, sizeof(msg));
    fence__slot_error(slot, "WRONGTYPE", msg);
}

/* The signed token of a slot: signed for the fence name#slot. */
static size_t signed_slot(fence_slot *slot, const fence_result *r, char *out, size_t cap)
{
    char name[FENCE_NAME_MAX + 8];
    int n = snprintf(name, sizeof(name), "%.*s#%" PRIu32, (int)slot->sign_name_len,
                     slot->sign_name, r->slot);
    FENCE_ASSERT(n > 0);
    /* The core refuses a semaphore whose slot names do not fit. */
    FENCE_ASSERT((size_t)n <= FENCE_NAME_MAX);
    size_t len = fence_signtok_sign(slot->signer, name, (size_t)n, r->token, out, cap);
    FENCE_ASSERT(len > 0);
    return len;
}

/* SEM.ACQUIRE: [slot, token] ([slot, token, lease] for the TTL form; the
 * token a signed string with SIGNED); SEM.RELEASE: 1 or 0. */
void fence__cmd_sem_reply(fence_slot *slot, const fence_result *r)
{
    char buf[FENCE_SIGNTOK_BUF_SIZE + 96];
    size_t off = 0;
    if (slot->op == OP_SEM_RELEASE) {
        off = fence_resp_uint(buf, sizeof(buf), clamp(r->value));
        fence__slot_reply(slot, buf, off);
        return;
    }
    bool ttl = slot->op == OP_SEM_ACQUIRE_TTL;
    off += fence_resp_array(buf, sizeof(buf), ttl ? 3 : 2);
    off += fence_resp_uint(buf + off, sizeof(buf) - off, r->slot);
    if (slot->signer != NULL) {
        char tok[FENCE_SIGNTOK_BUF_SIZE];
        size_t n = signed_slot(slot, r, tok, sizeof(tok));
        off += fence_resp_bulk(buf + off, sizeof(buf) - off, tok, n);
    } else {
        off += fence_resp_uint(buf + off, sizeof(buf) - off, clamp(r->token));
    }
    if (ttl)
        off += fence_resp_uint(buf + off, sizeof(buf) - off, clamp(r->lease));
    FENCE_ASSERT(off <= sizeof(buf));
    fence__slot_reply(slot, buf, off);
}

/* SEM.INFO: nil, or [n, [[slot, token, lease, remaining_ms]...], waiters]
 * with the slots that are held or in lock-delay (lease 0), in slot order. */
void fence__cmd_sem_info(fence_server *s, fence_slot *slot, const fence_cmd *cmd)
{
    uint64_t now = fence__leader_now(s->leader);
    fence_fsm_sem_state st;
    size_t n = 0;
    fence_fsm_sem_slot *v = malloc(FENCE_SEM_PERMITS_MAX * sizeof(*v));
    if (v == NULL) {
        fence__slot_error(slot, "ERR", "out of memory");
        return;
    }
    if (!fence_fsm_sem_info(s->fsm, cmd->name, cmd->name_len, &st, v, FENCE_SEM_PERMITS_MAX,
                            &n)) {
        free(v);
        char nil[8];
        size_t k = fence_resp_nil_v(nil, sizeof(nil), slot->resp);
        fence__slot_reply(slot, nil, k);
        return;
    }
    /* Each integer is at most 21 bytes and each header 23. */
    size_t cap = 3 * 23 + n * (23 + 4 * 23);
    char *buf = malloc(cap);
    if (buf == NULL) {
        free(v);
        fence__slot_error(slot, "ERR", "out of memory");
        return;
    }
    size_t off = fence_resp_array(buf, cap, 3);
    off += fence_resp_uint(buf + off, cap - off, st.permits);
    off += fence_resp_array(buf + off, cap - off, (int64_t)n);
    for (size_t i = 0; i < n; i++) {
        off += fence_resp_array(buf + off, cap - off, 4);
        off += fence_resp_uint(buf + off, cap - off, v[i].slot);
        off += fence_resp_uint(buf + off, cap - off, clamp(v[i].token));
        off += fence_resp_uint(buf + off, cap - off, clamp(v[i].lease));
        uint64_t left = v[i].deadline_ms > now ? v[i].deadline_ms - now : 0;
        off += fence_resp_uint(buf + off, cap - off, left);
    }
    off += fence_resp_uint(buf + off, cap - off, st.waiters);
    FENCE_ASSERT(off <= cap);
    fence__slot_reply(slot, buf, off);
    free(buf);
    free(v);
}
