/* Users, passwords and permissions (acl.h has the file syntax). */
#include "auth/acl.h"

#include <errno.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <sodium.h>

#include "base/assert.h"
#include "base/hash.h"
#include "base/hex.h"

/* One +/- rule: a category set, or one command by name. */
typedef struct acl_rule {
    bool allow;                      /* + (true) or - (false) */
    uint32_t cats;                   /* FENCE_ACL_CAT_* set; 0 for a command rule */
    char cmd[FENCE_ACL_CMD_MAX + 1]; /* upper-case command name, or "" */
} acl_rule;

/* One ~pattern. */
typedef struct acl_pattern {
    char *p;    /* the glob (heap, NUL-terminated) */
    size_t len; /* its length */
} acl_pattern;

/* One user. */
struct fence_acl_user {
    char name[FENCE_COMPAT_NAME_MAX + 1]; /* user name */
    bool on;                             /* may log in */
    bool nopass;                         /* any password is accepted */
    uint32_t n_pass;                     /* entries in pass */
    uint8_t pass[FENCE_ACL_PASSWORDS_MAX][FENCE_ACL_HASH_LEN]; /* SHA-256 digests */
    uint32_t n_pat;                      /* entries in pat */
    acl_pattern pat[FENCE_ACL_PATTERNS_MAX]; /* name patterns */
    uint32_t n_rules;                    /* entries in rules */
    acl_rule rules[FENCE_ACL_RULES_MAX]; /* command rules, in order */
    fence_acl_limits lim;                /* maxleases/maxlocks/maxconns, 0: none */
};

/* A set of users. */
struct fence_acl {
    fence_acl_user **users; /* heap array of heap users, file order */
    size_t n;               /* users in it */
    size_t cap;             /* room in users */
    bool any_maxconns;      /* a user has maxconns (set after parsing) */
    bool any_quota;         /* a user has maxleases or maxlocks */
};

/* ---- Glob ------------------------------------------------------------------ */

/* Whether the one-character matcher at p[*pi] (?, [set], \x or a literal)
 * matches c; advances *pi past it. */
static bool match_one(const char *p, size_t plen, size_t *pi, unsigned char c)
{
    size_t i = *pi;
    FENCE_ASSERT(i < plen);
    if (p[i] == '?') {
        *pi = i + 1;
        return true;
    }
    if (p[i] == '\\' && i + 1 < plen) {
        *pi = i + 2;
        return (unsigned char)p[i + 1] == c;
    }
    if (p[i] != '[') {
        *pi = i + 1;
        return (unsigned char)p[i] == c;
    }
    i++;
    bool neg = false, hit = false;
    if (i < plen && p[i] == '^') {
        neg = true;
        i++;
    }
    while (i < plen && p[i] != ']') {
        if (p[i] == '\\' && i + 1 < plen) {
            if ((unsigned char)p[i + 1] == c)
                hit = true;
            i += 2;
        } else if (i + 2 < plen && p[i + 1] == '-' && p[i + 2] != ']') {
            unsigned char lo = (unsigned char)p[i], hi = (unsigned char)p[i + 2];
            if (lo > hi) {
                unsigned char t = lo;
                lo = hi;
                hi = t;
            }
            if (c >= lo && c <= hi)
                hit = true;
            i += 3;
        } else {
            if ((unsigned char)p[i] == c)
                hit = true;
            i++;
        }
    }
    if (i < plen) /* the ']' */
        i++;
    *pi = i;
    return neg ? !hit : hit;
}

/* Glob match with the "last star" backtrack: every matcher but '*' takes
 * exactly one character, so going back to the last star and letting it
 * take one more character is complete, and each (star, position) pair is
 * tried once: O(plen * slen). */
bool fence_acl_glob(const char *p, size_t plen, const char *s, size_t slen)
{
    size_t pi = 0, si = 0;
    size_t star_p = (size_t)-1, star_s = 0;
    while (si < slen) {
        if (pi < plen && p[pi] == '*') {
            if (pi + 1 == plen)
                return true; /* a last star takes the rest (~* : every key) */
            star_p = ++pi;
            star_s = si;
            continue;
        }
        if (pi < plen) {
            size_t next = pi;
            if (match_one(p, plen, &next, (unsigned char)s[si])) {
                pi = next;
                si++;
                continue;
            }
        }
        if (star_p == (size_t)-1)
            return false;
        pi = star_p;
        si = ++star_s;
    }
    while (pi < plen && p[pi] == '*')
        pi++;
    return pi == plen;
}

/* ---- Users ------------------------------------------------------------------ */

/* Free one user and its patterns. */
static void user_free(fence_acl_user *u)
{
    if (u == NULL)
        return;
    for (uint32_t i = 0; i < u->n_pat; i++)
        free(u->pat[i].p);
    sodium_memzero(u->pass, sizeof(u->pass));
    free(u);
}

/* Forget every pattern of u. */
static void user_reset_keys(fence_acl_user *u)
{
    for (uint32_t i = 0; i < u->n_pat; i++)
        free(u->pat[i].p);
    u->n_pat = 0;
}

/* Add a rule; -1 when u has FENCE_ACL_RULES_MAX already. */
static int user_add_rule(fence_acl_user *u, bool allow, uint32_t cats, const char *cmd,
                         size_t cmd_len)
{
    if (u->n_rules == FENCE_ACL_RULES_MAX)
        return -1;
    acl_rule *r = &u->rules[u->n_rules++];
    r->allow = allow;
    r->cats = cats;
    FENCE_ASSERT(cmd_len <= FENCE_ACL_CMD_MAX);
    for (size_t i = 0; i < cmd_len; i++) {
        char ch = cmd[i];
        r->cmd[i] = (ch >= 'a' && ch <= 'z') ? (char)(ch - 'a' + 'A') : ch;
    }
    r->cmd[cmd_len] = '\0';
    return 0;
}

/* Whether name[0..len) is a valid user name: 1..FENCE_COMPAT_NAME_MAX of
 * [A-Za-z0-9._:@-]. */
static bool name_ok(const char *name, size_t len)
{
    if (len == 0 || len > FENCE_COMPAT_NAME_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == ':' || c == '@' || c == '-';
        if (!ok)
            return false;
    }
    return true;
}

/* ---- Parser ------------------------------------------------------------------- */

/* Parser state for one file. */
typedef struct parser {
    const char *file; /* its name, for errors */
    size_t line;      /* current line number (1-based) */
    char *err;        /* error buffer */
    size_t err_len;   /* its size */
} parser;

/* Write "file:line: reason" into the error buffer; returns -1. */
static int perr(parser *ps, const char *fmt, ...)
{
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    if (ps->err_len > 0)
        snprintf(ps->err, ps->err_len, "%s:%zu: %s", ps->file, ps->line, why);
    return -1;
}

/* Whether a word may be shown in an error: it starts like a rule that
 * holds no secret.  Words that may be a mistyped password are not shown. */
static bool word_showable(const char *w, size_t len)
{
    if (len == 0 || len > 40)
        return false;
    return w[0] == '+' || w[0] == '-' || w[0] == '~';
}

/* The per-user limit rules: name (with its '='), and the field it sets. */
static const struct {
    const char *name;
    size_t off;
} limit_rules[] = {
    {"maxleases=", offsetof(fence_acl_limits, leases)},
    {"maxlocks=", offsetof(fence_acl_limits, locks)},
    {"maxconns=", offsetof(fence_acl_limits, conns)},
};
#define N_LIMIT_RULES (sizeof(limit_rules) / sizeof(limit_rules[0]))

/* Index in limit_rules of the rule w[0..len) starts with (case-
 * insensitive), or -1.  A bare "maxleases" without '=' names it too (for
 * a clear error). */
static int limit_index(const char *w, size_t len)
{
    for (size_t i = 0; i < N_LIMIT_RULES; i++) {
        size_t n = strlen(limit_rules[i].name);
        if ((len >= n && strncasecmp(w, limit_rules[i].name, n) == 0) ||
            (len == n - 1 && strncasecmp(w, limit_rules[i].name, n - 1) == 0))
            return (int)i;
    }
    return -1;
}

/* maxleases=N, maxlocks=N, maxconns=N: N decimal 1..FENCE_ACL_QUOTA_MAX,
 * digits only, no leading zero. */
static int apply_limit(parser *ps, fence_acl_user *u, const char *w, size_t len,
                       size_t wordno)
{
    int k = limit_index(w, len);
    FENCE_ASSERT(k >= 0);
    const char *rule = limit_rules[k].name;
    size_t n = strlen(rule);
    const char *v = w + n;
    size_t vl = len >= n ? len - n : 0;
    uint64_t x = 0;
    bool ok = len >= n && vl >= 1 && vl <= 10 && v[0] != '0';
    for (size_t i = 0; ok && i < vl; i++) {
        if (v[i] < '0' || v[i] > '9')
            ok = false;
        else
            x = x * 10 + (uint64_t)(v[i] - '0');
    }
    if (!ok || x < 1 || x > FENCE_ACL_QUOTA_MAX)
        return perr(ps, "word %zu: %.*sN needs a whole number N from 1 to %u (no sign, no "
                        "leading zero; resetlimits removes the limits)",
                    wordno, (int)n, rule, FENCE_ACL_QUOTA_MAX);
    *(uint32_t *)((char *)&u->lim + limit_rules[k].off) = (uint32_t)x;
    return 0;
}

/* Apply one rule word w[0..len) (the wordno-th word of the line) to u.
 * Returns 0, or -1 with the error written. */
static int apply_rule(parser *ps, fence_acl_user *u, const char *w, size_t len, size_t wordno)
{
#define IS(lit) (len == sizeof(lit) - 1 && strncasecmp(w, lit, len) == 0)
    if (IS("on")) {
        u->on = true;
    } else if (IS("off")) {
        u->on = false;
    } else if (IS("nopass")) {
        u->nopass = true;
        u->n_pass = 0;
        sodium_memzero(u->pass, sizeof(u->pass));
    } else if (IS("resetpass")) {
        u->nopass = false;
        u->n_pass = 0;
        sodium_memzero(u->pass, sizeof(u->pass));
    } else if (IS("allkeys")) {
        return apply_rule(ps, u, "~*", 2, wordno);
    } else if (IS("resetkeys")) {
        user_reset_keys(u);
    } else if (IS("allcommands")) {
        return apply_rule(ps, u, "+@all", 5, wordno);
    } else if (IS("nocommands")) {
        return apply_rule(ps, u, "-@all", 5, wordno);
    } else if (IS("resetlimits")) {
        memset(&u->lim, 0, sizeof(u->lim));
    } else if (IS("reset")) {
        u->on = false;
        u->nopass = false;
        u->n_pass = 0;
        sodium_memzero(u->pass, sizeof(u->pass));
        user_reset_keys(u);
        u->n_rules = 0;
        memset(&u->lim, 0, sizeof(u->lim));
    } else if (limit_index(w, len) >= 0) {
        return apply_limit(ps, u, w, len, wordno);
    } else if (w[0] == '>') {
        if (u->n_pass == FENCE_ACL_PASSWORDS_MAX)
            return perr(ps, "word %zu: more than %d passwords", wordno, FENCE_ACL_PASSWORDS_MAX);
        crypto_hash_sha256(u->pass[u->n_pass++], (const unsigned char *)w + 1, len - 1);
        u->nopass = false;
    } else if (w[0] == '#') {
        if (len != 1 + 2 * FENCE_ACL_HASH_LEN)
            return perr(ps, "word %zu: '#' must be followed by 64 hex digits (a SHA-256)",
                        wordno);
        if (u->n_pass == FENCE_ACL_PASSWORDS_MAX)
            return perr(ps, "word %zu: more than %d passwords", wordno, FENCE_ACL_PASSWORDS_MAX);
        uint8_t h[FENCE_ACL_HASH_LEN];
        for (size_t i = 0; i < FENCE_ACL_HASH_LEN; i++) {
            int hi = fence__hexval(w[1 + 2 * i]), lo = fence__hexval(w[2 + 2 * i]);
            if (hi < 0 || lo < 0)
                return perr(ps, "word %zu: '#' must be followed by 64 hex digits (a SHA-256)",
                            wordno);
            h[i] = (uint8_t)(hi << 4 | lo);
        }
        memcpy(u->pass[u->n_pass++], h, sizeof(h));
        u->nopass = false;
    } else if (w[0] == '~') {
        if (len - 1 > FENCE_NAME_MAX)
            return perr(ps, "word %zu: pattern longer than %d bytes", wordno, FENCE_NAME_MAX);
        if (u->n_pat == FENCE_ACL_PATTERNS_MAX)
            return perr(ps, "word %zu: more than %d patterns", wordno, FENCE_ACL_PATTERNS_MAX);
        char *p = malloc(len);
        if (p == NULL)
            return perr(ps, "out of memory");
        memcpy(p, w + 1, len - 1);
        p[len - 1] = '\0';
        u->pat[u->n_pat].p = p;
        u->pat[u->n_pat].len = len - 1;
        u->n_pat++;
    } else if ((w[0] == '+' || w[0] == '-') && len >= 2 && w[1] == '@') {
        size_t i;
        for (i = 0; i < fence__acl_categories_n; i++) {
            const char *n = fence__acl_categories[i].name;
            if (strlen(n) == len - 2 && strncasecmp(w + 2, n, len - 2) == 0)
                break;
        }
        if (i == fence__acl_categories_n)
            return perr(ps, "word %zu: unknown category '%.*s' (categories: @all @lock @lease "
                            "@read @write @admin @store @fence @connection)",
                        wordno, (int)(len > 40 ? 40 : len), w);
        if (user_add_rule(u, w[0] == '+', fence__acl_categories[i].cats, "", 0) != 0)
            return perr(ps, "word %zu: more than %d command rules", wordno, FENCE_ACL_RULES_MAX);
    } else if ((w[0] == '+' || w[0] == '-') && len >= 2) {
        if (len - 1 > FENCE_ACL_CMD_MAX)
            return perr(ps, "word %zu: command name longer than %d bytes", wordno,
                        FENCE_ACL_CMD_MAX);
        for (size_t i = 1; i < len; i++) {
            char c = w[i];
            bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                      (c >= '0' && c <= '9') || c == '.' || c == '_';
            if (!ok)
                return perr(ps, "word %zu: bad command name '%.*s'", wordno,
                            (int)(len > 40 ? 40 : len), w);
        }
        if (user_add_rule(u, w[0] == '+', 0, w + 1, len - 1) != 0)
            return perr(ps, "word %zu: more than %d command rules", wordno, FENCE_ACL_RULES_MAX);
    } else if (word_showable(w, len)) {
        return perr(ps, "word %zu: unknown rule '%.*s'", wordno, (int)len, w);
    } else {
        /* Not shown: a word without a prefix may be a password missing its '>'. */
        return perr(ps, "word %zu: unknown rule (not shown; rules are on off >password "
                        "#sha256 nopass resetpass ~pattern allkeys resetkeys +@cat -@cat "
                        "+CMD -CMD maxleases=N maxlocks=N maxconns=N resetlimits reset)",
                    wordno);
    }
    return 0;
#undef IS
}

/* Add user u to acl (taking it); -1 when out of memory. */
static int acl_push(fence_acl *acl, fence_acl_user *u)
{
    if (acl->n == acl->cap) {
        size_t cap = acl->cap ? acl->cap * 2 : 8;
        fence_acl_user **n = realloc(acl->users, cap * sizeof(*n));
        if (n == NULL)
            return -1;
        acl->users = n;
        acl->cap = cap;
    }
    acl->users[acl->n++] = u;
    return 0;
}

/* Parse one line l[0..len) (no newline). */
static int parse_line(parser *ps, fence_acl *acl, const char *l, size_t len)
{
    size_t i = 0, wordno = 0;
    fence_acl_user *u = NULL;
    for (;;) {
        while (i < len && (l[i] == ' ' || l[i] == '\t'))
            i++;
        if (i == len)
            break;
        size_t start = i;
        while (i < len && l[i] != ' ' && l[i] != '\t')
            i++;
        const char *w = l + start;
        size_t wl = i - start;
        wordno++;
        if (wordno == 1) {
            if (w[0] == '#')
                return 0; /* a comment line */
            if (!(wl == 4 && strncmp(w, "user", 4) == 0))
                return perr(ps, "a line must start with 'user'");
            continue;
        }
        if (wordno == 2) {
            if (!name_ok(w, wl)) {
                return perr(ps, "bad user name (1 to %d of A-Z a-z 0-9 . _ : @ -)",
                            FENCE_COMPAT_NAME_MAX);
            }
            if (fence_acl_find(acl, w, wl) != NULL)
                return perr(ps, "user '%.*s' is defined twice", (int)wl, w);
            if (acl->n == FENCE_ACL_USERS_MAX)
                return perr(ps, "more than %d users", FENCE_ACL_USERS_MAX);
            u = calloc(1, sizeof(*u));
            if (u == NULL)
                return perr(ps, "out of memory");
            memcpy(u->name, w, wl);
            u->name[wl] = '\0';
            if (acl_push(acl, u) != 0) {
                user_free(u);
                return perr(ps, "out of memory");
            }
            continue;
        }
        FENCE_ASSERT(u != NULL);
        if (apply_rule(ps, u, w, wl, wordno) != 0)
            return -1;
    }
    if (wordno == 1)
        return perr(ps, "'user' without a name");
    return 0;
}

int fence_acl_parse(const char *buf, size_t len, const char *file, fence_acl **out,
                    char *err, size_t err_len)
{
    FENCE_ASSERT(out != NULL);
    FENCE_ASSERT(buf != NULL || len == 0);
    *out = NULL;
    if (err_len > 0)
        err[0] = '\0';
    if (sodium_init() < 0) {
        snprintf(err, err_len, "%s: libsodium failed to start", file);
        return -1;
    }
    fence_acl *acl = calloc(1, sizeof(*acl));
    if (acl == NULL) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    parser ps = {file ? file : "acl", 0, err, err_len};
    size_t i = 0;
    while (i < len) {
        ps.line++;
        const char *nl = memchr(buf + i, '\n', len - i);
        size_t end = nl ? (size_t)(nl - buf) : len;
        size_t l = end - i;
        if (l > 0 && buf[i + l - 1] == '\r')
            l--;
        if (l > FENCE_ACL_LINE_MAX) {
            perr(&ps, "line longer than %d bytes", FENCE_ACL_LINE_MAX);
            goto out_free_acl;
        }
        if (memchr(buf + i, '\0', l) != NULL) {
            perr(&ps, "NUL byte in the line");
            goto out_free_acl;
        }
        for (size_t k = 0; k < l; k++) {
            unsigned char c = (unsigned char)buf[i + k];
            if (c < 0x20 && c != '\t') {
                perr(&ps, "control character in the line");
                goto out_free_acl;
            }
        }
        if (parse_line(&ps, acl, buf + i, l) != 0)
            goto out_free_acl;
        i = end + 1;
    }
    for (size_t k = 0; k < acl->n; k++) {
        const fence_acl_limits *lim = &acl->users[k]->lim;
        acl->any_maxconns = acl->any_maxconns || lim->conns != 0;
        acl->any_quota = acl->any_quota || lim->leases != 0 || lim->locks != 0;
    }
    *out = acl;
    return 0;
out_free_acl:
    fence_acl_free(acl);
    return -1;
}

int fence_acl_load_file(const char *path, fence_acl **out, char *err, size_t err_len)
{
    FENCE_ASSERT(path != NULL);
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(err, err_len, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    /* Whoever may write the file may make himself @admin: a file any user
     * may write is refused, at start and at reload (the old users then
     * stay).  Checked on the open file, so a rename in between cannot
     * swap in another one. */
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        snprintf(err, err_len, "%s: cannot stat: %s", path, strerror(errno));
        goto out_close;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, err_len, "%s: not a regular file", path);
        goto out_close;
    }
    if ((st.st_mode & S_IWOTH) != 0) {
        snprintf(err, err_len, "%s: any user may write it (mode %03o), and so make himself "
                 "@admin: refused; chmod o-w it (0600 or 0640 is usual)", path,
                 (unsigned)(st.st_mode & 0777));
        goto out_close;
    }
    char *buf = malloc(FENCE_ACL_FILE_MAX + 1);
    if (buf == NULL) {
        snprintf(err, err_len, "out of memory");
        goto out_close;
    }
    size_t n = fread(buf, 1, FENCE_ACL_FILE_MAX + 1, f);
    if (ferror(f)) {
        snprintf(err, err_len, "%s: read error", path);
        goto out_free_buf;
    }
    if (n > FENCE_ACL_FILE_MAX) {
        snprintf(err, err_len, "%s: larger than %d bytes", path, FENCE_ACL_FILE_MAX);
        goto out_free_buf;
    }
    int rc = fence_acl_parse(buf, n, path, out, err, err_len);
    sodium_memzero(buf, n);
    free(buf);
    fclose(f);
    return rc;
out_free_buf:
    free(buf);
out_close:
    fclose(f);
    return -1;
}

fence_acl *fence_acl_new_default(void)
{
    static const char text[] = "user default on nopass ~* +@all\n";
    fence_acl *acl;
    char err[128];
    if (fence_acl_parse(text, sizeof(text) - 1, "default", &acl, err, sizeof(err)) != 0)
        return NULL;
    return acl;
}

void fence_acl_free(fence_acl *acl)
{
    if (acl == NULL)
        return;
    for (size_t i = 0; i < acl->n; i++)
        user_free(acl->users[i]);
    free(acl->users);
    free(acl);
}

size_t fence_acl_count(const fence_acl *acl)
{
    return acl->n;
}

const fence_acl_user *fence_acl_user_at(const fence_acl *acl, size_t i)
{
    FENCE_ASSERT(i < acl->n);
    return acl->users[i];
}

const fence_acl_user *fence_acl_find(const fence_acl *acl, const char *name, size_t len)
{
    for (size_t i = 0; i < acl->n; i++) {
        const fence_acl_user *u = acl->users[i];
        if (strlen(u->name) == len && memcmp(u->name, name, len) == 0)
            return u;
    }
    return NULL;
}

const fence_acl_user *fence_acl_auth(const fence_acl *acl, const char *user, size_t user_len,
                                     const char *pass, size_t pass_len)
{
    if (user == NULL) {
        user = "default";
        user_len = 7;
    }
    uint8_t h[FENCE_ACL_HASH_LEN];
    crypto_hash_sha256(h, (const unsigned char *)pass, pass_len);
    const fence_acl_user *u = fence_acl_find(acl, user, user_len);
    bool ok = false;
    if (u != NULL) {
        /* Compare with every stored digest (no early exit). */
        for (uint32_t i = 0; i < u->n_pass; i++)
            if (sodium_memcmp(h, u->pass[i], sizeof(h)) == 0)
                ok = true;
        if (u->nopass)
            ok = true;
        if (!u->on)
            ok = false;
    }
    sodium_memzero(h, sizeof(h));
    return ok ? u : NULL;
}

const fence_acl_user *fence_acl_auto_user(const fence_acl *acl)
{
    const fence_acl_user *u = fence_acl_find(acl, "default", 7);
    if (u != NULL && u->on && u->nopass)
        return u;
    return NULL;
}

const char *fence_acl_user_name(const fence_acl_user *u)
{
    return u->name;
}

bool fence_acl_user_on(const fence_acl_user *u)
{
    return u->on;
}

bool fence_acl_cmd_allowed(const fence_acl_user *u, const char *name, uint32_t cats)
{
    bool allowed = false;
    for (uint32_t i = 0; i < u->n_rules; i++) {
        const acl_rule *r = &u->rules[i];
        bool match;
        if (r->cmd[0] != '\0')
            match = name != NULL && strcasecmp(r->cmd, name) == 0;
        else
            match = r->cats == FENCE_ACL_CAT_ALL || (r->cats & cats) != 0;
        if (match)
            allowed = r->allow;
    }
    return allowed;
}

bool fence_acl_key_allowed(const fence_acl_user *u, const char *key, size_t len)
{
    for (uint32_t i = 0; i < u->n_pat; i++)
        if (fence_acl_glob(u->pat[i].p, u->pat[i].len, key, len))
            return true;
    return false;
}

uint64_t fence_acl_owner_id(const char *name)
{
    if (strcmp(name, "default") == 0)
        return 0;
    uint64_t h = fence__fnv1a64(name, strlen(name));
    return h != 0 ? h : 1;
}

void fence_acl_user_limits(const fence_acl_user *u, fence_acl_limits *out)
{
    FENCE_ASSERT(u != NULL);
    FENCE_ASSERT(out != NULL);
    *out = u->lim;
}

bool fence_acl_any_maxconns(const fence_acl *acl)
{
    return acl->any_maxconns;
}

bool fence_acl_any_quota(const fence_acl *acl)
{
    return acl->any_quota;
}

bool fence_acl_is_admin(const fence_acl_user *u)
{
    return fence_acl_cmd_allowed(u, NULL, FENCE_ACL_CAT_ADMIN);
}

/* Append text to buf at *at (keeping NUL termination within buf_len). */
static void put(char *buf, size_t buf_len, size_t *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char tmp[FENCE_NAME_MAX + 80];
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    FENCE_ASSERT(n >= 0);
    size_t len = (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1;
    if (*at < buf_len) {
        size_t room = buf_len - *at - 1;
        size_t k = len < room ? len : room;
        memcpy(buf + *at, tmp, k);
        buf[*at + k] = '\0';
    }
    *at += len;
}

size_t fence_acl_user_describe(const fence_acl_user *u, char *buf, size_t buf_len)
{
    size_t at = 0;
    if (buf_len > 0)
        buf[0] = '\0';
    put(buf, buf_len, &at, "user %s %s", u->name, u->on ? "on" : "off");
    if (u->nopass)
        put(buf, buf_len, &at, " nopass");
    for (uint32_t i = 0; i < u->n_pass; i++) {
        char hex[2 * FENCE_ACL_HASH_LEN + 1];
        sodium_bin2hex(hex, sizeof(hex), u->pass[i], FENCE_ACL_HASH_LEN);
        put(buf, buf_len, &at, " #%s", hex);
    }
    if (u->n_pat == 0)
        put(buf, buf_len, &at, " resetkeys");
    for (uint32_t i = 0; i < u->n_pat; i++)
        put(buf, buf_len, &at, " ~%s", u->pat[i].p);
    if (u->lim.leases != 0)
        put(buf, buf_len, &at, " maxleases=%u", (unsigned)u->lim.leases);
    if (u->lim.locks != 0)
        put(buf, buf_len, &at, " maxlocks=%u", (unsigned)u->lim.locks);
    if (u->lim.conns != 0)
        put(buf, buf_len, &at, " maxconns=%u", (unsigned)u->lim.conns);
    if (u->n_rules == 0)
        put(buf, buf_len, &at, " -@all");
    for (uint32_t i = 0; i < u->n_rules; i++) {
        const acl_rule *r = &u->rules[i];
        char sign = r->allow ? '+' : '-';
        if (r->cmd[0] != '\0') {
            put(buf, buf_len, &at, " %c%s", sign, r->cmd);
            continue;
        }
        for (size_t k = 0; k < fence__acl_categories_n; k++)
            if (fence__acl_categories[k].cats == r->cats)
                put(buf, buf_len, &at, " %c@%s", sign, fence__acl_categories[k].name);
    }
    return at;
}
