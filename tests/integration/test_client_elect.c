/* libfence's election calls (include/fence.h "Leader election") against a
 * real fenced ($FENCE_SERVER, started by test_client_elect.sh): campaign,
 * a second candidate elected when the leader resigns, proclaim (and a stale
 * token's FENCE_ESTALE), leader, observe (now, a change, nothing within the
 * wait), a binary value, the limits. */
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

static fence_election_state st, st2;

static void test_elect_calls(void)
{
    fence_client *c = client();
    uint64_t la = 0, lb = 0, ta = 0, tb = 0, rev = 0;
    REQUIRE(fence_lease_grant(c, 30000, &la) == 0);
    REQUIRE(fence_lease_grant(c, 30000, &lb) == 0);
    CHECK_EQ_I64(fence_election_observe(c, "c.e", FENCE_ELECTION_NOW, 0, &st), 0);
    CHECK(st.changed && !st.has_leader);
    const char bin[] = {'a', 0, 'b'};
    CHECK_EQ_I64(fence_election_campaign(c, "c.e", la, bin, sizeof(bin), 0, &ta), 0);
    CHECK(ta > 0);
    CHECK_EQ_I64(fence_election_leader(c, "c.e", &st), 0);
    CHECK(st.has_leader);
    CHECK_EQ_U64(st.token, ta);
    CHECK_EQ_U64(st.lease, la);
    CHECK_EQ_U64(st.value_len, 3);
    CHECK(memcmp(st.value, bin, 3) == 0);
    CHECK_EQ_I64(fence_election_campaign(c, "c.e", lb, "b", 1, 0, &tb), FENCE_EBUSY);
    CHECK_EQ_I64(fence_election_proclaim(c, "c.e", ta, "a2", 2, &rev), 0);
    CHECK(rev > st.revision);
    CHECK_EQ_I64(fence_election_proclaim(c, "c.e", ta + 100, "x", 1, NULL), FENCE_ESTALE);
    CHECK_EQ_I64(fence_election_observe(c, "c.e", rev, 50, &st2), 0);
    CHECK(!st2.changed);
    bool resigned = false;
    CHECK_EQ_I64(fence_election_resign(c, "c.e", ta, &resigned), 0);
    CHECK(resigned);
    CHECK_EQ_I64(fence_election_resign(c, "c.e", ta, &resigned), 0);
    CHECK(!resigned);
    CHECK_EQ_I64(fence_election_observe(c, "c.e", rev, 1000, &st2), 0);
    CHECK(st2.changed && !st2.has_leader && st2.revision > rev);
    CHECK_EQ_I64(fence_election_campaign(c, "c.e", lb, "b", 1, 1000, &tb), 0);
    CHECK(tb > ta);
    CHECK_EQ_I64(fence_election_observe(c, "c.e", st2.revision, 1000, &st2), 0);
    CHECK(st2.changed && st2.has_leader && st2.token == tb);
    CHECK_EQ_I64(strcmp(st2.value, "b"), 0);
    /* Limits and bad input. */
    static char big[FENCE_ELECTION_VALUE_MAX + 1];
    memset(big, 'x', sizeof(big));
    CHECK_EQ_I64(fence_election_campaign(c, "c.big", la, big, sizeof(big), 0, &ta), FENCE_ETOOBIG);
    CHECK_EQ_I64(fence_election_campaign(c, "c.big", la, big, FENCE_ELECTION_VALUE_MAX, 0, &ta),
                 0);
    CHECK_EQ_I64(fence_election_leader(c, "c.big", &st), 0);
    CHECK_EQ_U64(st.value_len, FENCE_ELECTION_VALUE_MAX);
    CHECK_EQ_I64(fence_election_campaign(c, "", la, "v", 1, 0, &ta), FENCE_EINVAL);
    CHECK_EQ_I64(fence_election_campaign(c, "c.e", 999999, "v", 1, 0, &ta), FENCE_ENOLEASE);
    uint64_t tok = 0;
    REQUIRE(fence_lease_lock(c, la, "c.lock", 0, &tok) == 0);
    CHECK_EQ_I64(fence_election_campaign(c, "c.lock", la, "v", 1, 0, &ta), FENCE_ESERVER);
    CHECK(strstr(fence_client_errmsg(c), "WRONGTYPE") != NULL);
    fence_client_close(c);
}

int main(void)
{
    TEST_RUN(test_elect_calls);
    return TEST_DONE();
}
