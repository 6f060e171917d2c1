/* Unit tests of libfence-guard with signed tokens: forged, altered,
 * other-lock and other-key tokens are refused before the mark moves; real
 * holders still write afterwards; a multi-lock's per-name strings;
 * rotation; the verify cache. */
#include <sys/stat.h>

#include "token/signtok.h"
#include "fence_guard.h"
#include "../lib/test.h"

/* A temporary directory holding a guard and key files. */
typedef struct env {
    char dir[64];       /* the directory */
    char keys[128];     /* dir/verify.keys */
} env;

/* Make the directory. */
static void env_init(env *e)
{
    snprintf(e->dir, sizeof(e->dir), "/tmp/fence-guard-signed.XXXXXX");
    REQUIRE(mkdtemp(e->dir) != NULL);
    snprintf(e->keys, sizeof(e->keys), "%s/verify.keys", e->dir);
}

/* Remove everything env_init and the guard made. */
static void env_done(env *e)
{
    char p[256];
    const char *files[] = {"fence-guard.log", "fence-guard.lock",
                           "fence-guard.log.tmp", "verify.keys"};
    for (size_t i = 0; i < 4; i++) {
        snprintf(p, sizeof(p), "%s/%s", e->dir, files[i]);
        unlink(p);
    }
    rmdir(e->dir);
}

/* Write verify.keys listing keys[0..n). */
static void write_keys(env *e, const fence_signtok_key *keys, size_t n)
{
    FILE *f = fopen(e->keys, "w");
    REQUIRE(f != NULL);
    fputs("# verify keys\n", f);
    for (size_t i = 0; i < n; i++) {
        char line[128];
        REQUIRE(fence_signtok_key_line(&keys[i], line, sizeof(line)) > 0);
        fputs(line, f);
    }
    fclose(f);
}

/* A key pair. */
static void keypair(fence_signtok_scheme sch, const char *id,
                    fence_signtok_signer *s, fence_signtok_key *v)
{
    char err[256];
    REQUIRE(fence_signtok_keygen(sch, id, s, v, err, sizeof(err)) == 0);
}

/* Open a guard in e->dir, verifying against e->keys if verify is set. */
static fence_guard *open_guard(env *e, bool verify)
{
    fence_guard_opts o;
    fence_guard_opts_default(&o);
    if (verify)
        o.verify_keys_path = e->keys;
    fence_guard *g = NULL;
    int rc = fence_guard_open(e->dir, &o, &g);
    if (rc != 0)
        printf("#   open: %s\n", fence_guard_errmsg(g));
    REQUIRE(rc == 0);
    return g;
}

/* Admit a C-string token for a C-string fence. */
static int admit(fence_guard *g, const char *name, const char *tok)
{
    return fence_guard_admit_signed(g, name, strlen(name), tok, strlen(tok),
                                    NULL, NULL, NULL, NULL);
}

/* Sign into a static buffer (one of four, so a few can be live at once). */
static const char *sign(const fence_signtok_signer *s, const char *name,
                        uint64_t token)
{
    static char bufs[4][FENCE_SIGNTOK_BUF_SIZE];
    static int i;
    char *b = bufs[i++ % 4];
    REQUIRE(fence_signtok_sign(s, name, strlen(name), token, b,
                               FENCE_SIGNTOK_BUF_SIZE) > 0);
    return b;
}

/* The mark of a fence. */
static uint64_t high_of(fence_guard *g, const char *name)
{
    uint64_t h = 12345;
    REQUIRE(fence_guard_high(g, name, strlen(name), &h) == 0);
    return h;
}

/* Counts calls of the protected write. */
static int wrote;

/* A protected write that succeeds. */
static int write_ok(void *arg)
{
    (void)arg;
    wrote++;
    return 0;
}

/* Every forgery is refused with the mark unchanged, and the protected write
 * never runs; real holders keep writing (both schemes). */
static void test_forgeries(void)
{
    for (int sch = 1; sch <= 2; sch++) {
        env e;
        env_init(&e);
        fence_signtok_signer s, other, stranger;
        fence_signtok_key k[1], ko, ks;
        const char *id = sch == 1 ? "k1" : "h1";
        keypair((fence_signtok_scheme)sch, id, &s, &k[0]);
        keypair((fence_signtok_scheme)sch, id, &other, &ko);
        keypair((fence_signtok_scheme)sch, sch == 1 ? "k2" : "h2", &stranger,
                &ks);
        write_keys(&e, k, 1);
        fence_guard *g = open_guard(&e, true);

        char t34[FENCE_SIGNTOK_BUF_SIZE];
        snprintf(t34, sizeof(t34), "%s", sign(&s, "orders", 34));
        uint64_t tok = 0, high = 0;
        wrote = 0;
        CHECK(fence_guard_admit_signed(g, "orders", 6, t34, strlen(t34),
                                       write_ok, NULL, &tok, &high) == 0);
        CHECK_EQ_U64(tok, 34);
        CHECK_EQ_U64(high, 34);
        CHECK(wrote == 1);

        char forged[FENCE_SIGNTOK_BUF_SIZE];
        const char *rest = strchr(t34, '.');
        const char *bad[6];
        snprintf(forged, sizeof(forged), "9223372036854775808%s", rest);
        bad[0] = forged;                           /* 2^63, real signature */
        bad[1] = "9223372036854775808";            /* 2^63, unsigned */
        static char changed[FENCE_SIGNTOK_BUF_SIZE];
        snprintf(changed, sizeof(changed), "35%s", rest);
        bad[2] = changed;                          /* number changed */
        bad[3] = sign(&s, "invoices", 99);         /* another lock's */
        bad[4] = sign(&other, "orders", 99);       /* another key, same id */
        bad[5] = sign(&stranger, "orders", 99);    /* an unlisted key id */
        for (size_t i = 0; i < 6; i++) {
            wrote = 0;
            tok = 0;
            int rc = fence_guard_admit_signed(g, "orders", 6, bad[i],
                                              strlen(bad[i]), write_ok, NULL,
                                              &tok, &high);
            if (rc != FENCE_GUARD_EBADTOKEN)
                printf("#   case %zu: rc %d\n", i, rc);
            CHECK(rc == FENCE_GUARD_EBADTOKEN);
            CHECK(wrote == 0);
            CHECK(fence_guard_errmsg(g)[0] != '\0');
            CHECK_EQ_U64(high_of(g, "orders"), 34);
        }
        /* The numeric entry points are refused too. */
        CHECK(fence_guard_admit(g, "orders", 6, 1ull << 63, NULL) ==
              FENCE_GUARD_EBADTOKEN);
        CHECK(strstr(fence_guard_errmsg(g), "not signed") != NULL);
        CHECK_EQ_U64(high_of(g, "orders"), 34);
        /* The real holder writes again; a newer one takes over; the old
         * one is then stale, not bad. */
        CHECK(admit(g, "orders", t34) == 0);
        CHECK(admit(g, "orders", sign(&s, "orders", 40)) == 0);
        CHECK_EQ_U64(high_of(g, "orders"), 40);
        CHECK(admit(g, "orders", t34) == FENCE_GUARD_ESTALE);
        /* The other lock's token is fine at its own fence. */
        CHECK(admit(g, "invoices", bad[3]) == 0);
        fence_guard_stats st;
        fence_guard_stats_get(g, &st);
        CHECK_EQ_U64(st.rejected_badtoken, 7);
        CHECK(st.verify_cache_hits >= 1);
        fence_guard_close(g);
        /* The marks survive a reopen. */
        g = open_guard(&e, true);
        CHECK_EQ_U64(high_of(g, "orders"), 40);
        fence_guard_close(g);
        env_done(&e);
    }
}

/* A multi-lock's signed grant (LOCK.MULTI ... SIGNED): one string per
 * name, each the token signed for that name alone (what fenced's
 * fence__cmd_multi_signed_reply makes).  Each verifies at its own fence
 * without the others; none verifies at another name of the set, at a name
 * outside it, or altered; and one name's admit does not move the others. */
static void test_multi_lock_tokens(void)
{
    env e;
    env_init(&e);
    fence_signtok_signer s;
    fence_signtok_key k[1];
    keypair(FENCE_SIGNTOK_ED25519, "k1", &s, &k[0]);
    write_keys(&e, k, 1);
    fence_guard *g = open_guard(&e, true);
    const char *names[3] = {"acct:17", "acct:42", "acct:99"};
    char tok[3][FENCE_SIGNTOK_BUF_SIZE];
    for (int i = 0; i < 3; i++)
        snprintf(tok[i], sizeof(tok[i]), "%s", sign(&s, names[i], 77));
    /* One token number, three different strings. */
    CHECK(strncmp(tok[0], "77.", 3) == 0 && strncmp(tok[1], "77.", 3) == 0);
    CHECK(strcmp(tok[0], tok[1]) != 0 && strcmp(tok[1], tok[2]) != 0);
    /* Each name's string at another name of the set, and outside it. */
    for (int i = 0; i < 3; i++) {
        CHECK(admit(g, names[(i + 1) % 3], tok[i]) == FENCE_GUARD_EBADTOKEN);
        CHECK(admit(g, "acct:5", tok[i]) == FENCE_GUARD_EBADTOKEN);
    }
    CHECK_EQ_U64(high_of(g, "acct:42"), 0);
    /* Altered: another number with the signature, a name's string with a
     * character of its signature changed. */
    char changed[FENCE_SIGNTOK_BUF_SIZE];
    snprintf(changed, sizeof(changed), "78%s", strchr(tok[0], '.'));
    CHECK(admit(g, names[0], changed) == FENCE_GUARD_EBADTOKEN);
    snprintf(changed, sizeof(changed), "%s", tok[1]);
    size_t last = strlen(changed) - 2;
    changed[last] = changed[last] == 'A' ? 'B' : 'A';
    CHECK(admit(g, names[1], changed) == FENCE_GUARD_EBADTOKEN);
    /* Each verifies at its own name, one at a time. */
    CHECK(admit(g, names[0], tok[0]) == 0);
    CHECK_EQ_U64(high_of(g, names[0]), 77);
    CHECK_EQ_U64(high_of(g, names[1]), 0);
    CHECK(admit(g, names[1], tok[1]) == 0);
    CHECK(admit(g, names[2], tok[2]) == 0);
    CHECK_EQ_U64(high_of(g, names[2]), 77);
    /* A later grant of one name (78) fences the multi-lock out there only. */
    CHECK(admit(g, names[1], sign(&s, names[1], 78)) == 0);
    CHECK(admit(g, names[1], tok[1]) == FENCE_GUARD_ESTALE);
    CHECK(admit(g, names[0], tok[0]) == 0);
    fence_guard_close(g);
    env_done(&e);
}

/* Rotation: old and new keys listed: both verify; old removed: refused. */
static void test_rotation(void)
{
    env e;
    env_init(&e);
    fence_signtok_signer old, neu;
    fence_signtok_key k[2];
    keypair(FENCE_SIGNTOK_ED25519, "k2025", &old, &k[0]);
    keypair(FENCE_SIGNTOK_ED25519, "k2026", &neu, &k[1]);
    write_keys(&e, k, 1);
    fence_guard *g = open_guard(&e, true);
    CHECK(admit(g, "r", sign(&old, "r", 10)) == 0);
    CHECK(admit(g, "r", sign(&neu, "r", 11)) == FENCE_GUARD_EBADTOKEN);
    fence_guard_close(g);

    write_keys(&e, k, 2); /* the new key appended */
    g = open_guard(&e, true);
    CHECK(admit(g, "r", sign(&old, "r", 10)) == 0);
    CHECK(admit(g, "r", sign(&neu, "r", 11)) == 0);
    CHECK(admit(g, "r", sign(&old, "r", 12)) == 0);
    fence_guard_close(g);

    write_keys(&e, &k[1], 1); /* the old key removed */
    g = open_guard(&e, true);
    CHECK(admit(g, "r", sign(&old, "r", 13)) == FENCE_GUARD_EBADTOKEN);
    CHECK_EQ_U64(high_of(g, "r"), 12);
    CHECK(admit(g, "r", sign(&neu, "r", 14)) == 0);
    fence_guard_close(g);
    env_done(&e);
}

/* Without verify keys the signed form is accepted by its number (and plain
 * numbers too); a bad keys file fails the open with its line. */
static void test_no_keys_and_bad_file(void)
{
    env e;
    env_init(&e);
    fence_signtok_signer s;
    fence_signtok_key k;
    keypair(FENCE_SIGNTOK_ED25519, "k1", &s, &k);
    fence_guard *g = open_guard(&e, false);
    CHECK(admit(g, "a", sign(&s, "a", 5)) == 0);
    CHECK(admit(g, "a", "6") == 0);
    CHECK(admit(g, "a", "06") == FENCE_GUARD_EBADTOKEN);
    CHECK(fence_guard_admit(g, "a", 1, 7, NULL) == 0);
    CHECK_EQ_U64(high_of(g, "a"), 7);
    fence_guard_close(g);

    FILE *f = fopen(e.keys, "w");
    REQUIRE(f != NULL);
    fputs("# c\nk1 ed25519 short\n", f);
    fclose(f);
    fence_guard_opts o;
    fence_guard_opts_default(&o);
    o.verify_keys_path = e.keys;
    g = NULL;
    CHECK(fence_guard_open(e.dir, &o, &g) == FENCE_GUARD_EKEYS);
    CHECK(strstr(fence_guard_errmsg(g), "line 2") != NULL);
    fence_guard_close(g);
    o.verify_keys_path = "/nonexistent/verify.keys";
    g = NULL;
    CHECK(fence_guard_open(e.dir, &o, &g) == FENCE_GUARD_EKEYS);
    fence_guard_close(g);
    CHECK_STR(fence_guard_strerror(FENCE_GUARD_EBADTOKEN),
              "token refused: unsigned, malformed, forged, signed with an "
              "unlisted key or for another fence");
    env_done(&e);
}

/* Repeated writes with the current token hit the cache. */
static void test_cache(void)
{
    env e;
    env_init(&e);
    fence_signtok_signer s;
    fence_signtok_key k;
    keypair(FENCE_SIGNTOK_HMAC_SHA256, "h7", &s, &k);
    write_keys(&e, &k, 1);
    fence_guard *g = open_guard(&e, true);
    const char *t = sign(&s, "c", 3);
    for (int i = 0; i < 100; i++)
        CHECK(admit(g, "c", t) == 0);
    fence_guard_stats st;
    fence_guard_stats_get(g, &st);
    CHECK_EQ_U64(st.verified, 1);
    CHECK_EQ_U64(st.verify_cache_hits, 99);
    CHECK_EQ_U64(st.admitted, 100);
    fence_guard_close(g);
    env_done(&e);
}

int main(void)
{
    TEST_RUN(test_forgeries);
    TEST_RUN(test_multi_lock_tokens);
    TEST_RUN(test_rotation);
    TEST_RUN(test_no_keys_and_bad_file);
    TEST_RUN(test_cache);
    return TEST_DONE();
}
