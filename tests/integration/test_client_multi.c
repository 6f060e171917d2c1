/* libfence's multi-lock calls (include/fence.h "Multi-locks") against a real
 * fenced with a signing key ($FENCE_SERVER) and a fence-store that verifies
 * signed tokens ($FENCE_STORE), started by test_client_multi.sh: all names
 * with one token, busy (nothing taken), one UNLOCK releases all, SIGNED (each
 * name's string admitted at its name and refused at another of the set and
 * outside it), WRONGTYPE over an election, the argument checks. */
#include <stdlib.h>
#include <string.h>

#include "../lib/test.h"
#include "fence.h"

static fence_client *client(void)
{
    fence_client_opts o;
    fence_client_opts_init(&o);
    o.timeout_ms = 10000;
    fence_client *c = NULL;
    REQUIRE(fence_client_open(&o, &c) == 0);
    return c;
}

static void test_multi_calls(void)
{
    fence_client *c = client();
    uint64_t la = 0, lb = 0, ta = 0, tb = 0;
    REQUIRE(fence_lease_grant(c, 30000, &la) == 0);
    REQUIRE(fence_lease_grant(c, 30000, &lb) == 0);
    const char *ab[2] = {"m.a", "m.b"};
    CHECK_EQ_I64(fence_lease_lock_multi(c, la, ab, 2, 0, &ta), 0);
    fence_lock_info li;
    CHECK_EQ_I64(fence_lock_info_get(c, "m.b", &li), 0);
    CHECK(li.held && li.token == ta && li.lease == la);
    const char *bc[2] = {"m.b", "m.c"};
    CHECK_EQ_I64(fence_lease_lock_multi(c, lb, bc, 2, 0, &tb), FENCE_EBUSY);
    CHECK_EQ_I64(fence_lock_info_get(c, "m.c", &li), 0);
    CHECK(!li.held); /* nothing was taken */
    bool released = false;
    CHECK_EQ_I64(fence_token_unlock(c, "m.a", ta, &released), 0);
    CHECK(released);
    CHECK_EQ_I64(fence_lease_lock_multi(c, lb, bc, 2, 1000, &tb), 0);
    CHECK(tb > ta);
    /* SIGNED: one string per name. */
    const char *xyz[3] = {"m.x", "m.y", "m.z"};
    char sig[3][FENCE_SIGNED_TOKEN_BUF_SIZE];
    uint64_t ts = 0;
    CHECK_EQ_I64(fence_lease_lock_multi_signed(c, la, xyz, 3, 0, &ts, sig), 0);
    CHECK(ts > tb);
    CHECK(strcmp(sig[0], sig[1]) != 0);
    fence_store *st = NULL;
    REQUIRE(fence_store_open(NULL, 5000, &st) == 0);
    for (int i = 0; i < 3; i++)
        CHECK_EQ_I64(fence_store_admit_signed(st, xyz[i], sig[i], NULL), 0);
    CHECK_EQ_I64(fence_store_admit_signed(st, "m.y", sig[0], NULL), FENCE_EBADTOKEN);
    CHECK_EQ_I64(fence_store_admit_signed(st, "m.q", sig[2], NULL), FENCE_EBADTOKEN);
    fence_store_close(st);
    /* WRONGTYPE: an election's name. */
    uint64_t te = 0;
    REQUIRE(fence_election_campaign(c, "m.el", la, "v", 1, 0, &te) == 0);
    const char *el[2] = {"m.free", "m.el"};
    CHECK_EQ_I64(fence_lease_lock_multi(c, lb, el, 2, 200, &tb), FENCE_ESERVER);
    CHECK(strstr(fence_client_errmsg(c), "m.el is an election") != NULL);
    /* Bad input. */
    const char *dup[2] = {"m.d", "m.d"};
    CHECK_EQ_I64(fence_lease_lock_multi(c, la, dup, 2, 0, &tb), FENCE_EINVAL);
    CHECK_EQ_I64(fence_lease_lock_multi(c, la, ab, 0, 0, &tb), FENCE_EINVAL);
    CHECK_EQ_I64(fence_lease_lock_multi(c, la, ab, FENCE_MULTI_NAMES + 1, 0, &tb), FENCE_EINVAL);
    const char *word[2] = {"m.e", "wait"};
    CHECK_EQ_I64(fence_lease_lock_multi(c, la, word, 2, 0, &tb), FENCE_EINVAL);
    CHECK_EQ_I64(fence_lease_lock_multi_signed(c, la, ab, 2, 0, &tb, NULL), FENCE_EINVAL);
    CHECK_EQ_I64(fence_lease_lock_multi(c, 999999, bc, 2, 0, &tb), FENCE_ENOLEASE);
    fence_client_close(c);
}

int main(void)
{
    TEST_RUN(test_multi_calls);
    return TEST_DONE();
}
