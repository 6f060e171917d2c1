/* Unit tests of the voter floor of CLUSTER.REMOVE (src/server/voter_floor.c):
 * non-voters always go, the last voter never does, fresh contact flags
 * make it wait unless rechecked, and a removal that would leave fewer
 * answering voters than a majority of those remaining is refused. */
#include <stdint.h>
#include <string.h>

#include "server/voter_floor.h"
#include "../lib/test.h"

/* A view of a removal of node 2 with settled contact flags. */
static fence_vf_view view(bool is_voter, unsigned voters, unsigned live_others)
{
    fence_vf_view v;
    memset(&v, 0, sizeof(v));
    v.id = 2;
    v.is_voter = is_voter;
    v.voters = voters;
    v.live_others = live_others;
    v.since_clear_ms = 1000;
    v.settle_ms = 200;
    return v;
}

/* Call the rule; msg and wait_ms are reset first. */
static int floor_of(const fence_vf_view *v, char *msg, size_t cap, uint64_t *wait_ms)
{
    msg[0] = '\0';
    *wait_ms = 0;
    return fence__voter_floor(v, msg, cap, wait_ms);
}

/* A non-voter goes whatever the rest looks like. */
static void test_non_voter(void)
{
    char msg[256];
    uint64_t w;
    fence_vf_view v = view(false, 1, 0);
    CHECK(floor_of(&v, msg, sizeof(msg), &w) == FENCE_VF_OK);
    v.since_clear_ms = 0;
    CHECK(floor_of(&v, msg, sizeof(msg), &w) == FENCE_VF_OK);
}

/* The last voter is refused, at once (no wait for the flags). */
static void test_last_voter(void)
{
    char msg[256];
    uint64_t w;
    fence_vf_view v = view(true, 1, 0);
    v.since_clear_ms = 0;
    CHECK(floor_of(&v, msg, sizeof(msg), &w) == FENCE_VF_REFUSED);
    CHECK(strstr(msg, "node 2 is the last voter") != NULL);
}

/* Fresh flags: wait until they settle, unless rechecked. */
static void test_wait(void)
{
    char msg[256];
    uint64_t w;
    fence_vf_view v = view(true, 3, 0);
    v.since_clear_ms = 50;
    CHECK(floor_of(&v, msg, sizeof(msg), &w) == FENCE_VF_WAIT);
    CHECK_EQ_U64(w, 151);
    v.rechecked = true;
    CHECK(floor_of(&v, msg, sizeof(msg), &w) == FENCE_VF_REFUSED);
    v.live_others = 2;
    CHECK(floor_of(&v, msg, sizeof(msg), &w) == FENCE_VF_OK);
}

/* The quorum of the remaining voters must answer. */
static void test_quorum(void)
{
    char msg[256];
    uint64_t w;
    /* 3 voters -> 2 remain, quorum 2. */
    fence_vf_view v = view(true, 3, 2);
    CHECK(floor_of(&v, msg, sizeof(msg), &w) == FENCE_VF_OK);
    v.live_others = 1;
    CHECK(floor_of(&v, msg, sizeof(msg), &w) == FENCE_VF_REFUSED);
    CHECK(strstr(msg, "2 voter(s), of which only 1 answer the leader; a quorum needs 2") != NULL);
    /* 5 voters -> 4 remain, quorum 3. */
    v = view(true, 5, 3);
    CHECK(floor_of(&v, msg, sizeof(msg), &w) == FENCE_VF_OK);
    v.live_others = 2;
    CHECK(floor_of(&v, msg, sizeof(msg), &w) == FENCE_VF_REFUSED);
    /* 2 voters -> 1 remains, which must answer. */
    v = view(true, 2, 1);
    CHECK(floor_of(&v, msg, sizeof(msg), &w) == FENCE_VF_OK);
    v.live_others = 0;
    CHECK(floor_of(&v, msg, sizeof(msg), &w) == FENCE_VF_REFUSED);
}

/* A small message buffer is truncated, never overrun. */
static void test_small_msg(void)
{
    char msg[8];
    uint64_t w;
    fence_vf_view v = view(true, 3, 0);
    CHECK(floor_of(&v, msg, sizeof(msg), &w) == FENCE_VF_REFUSED);
    CHECK(strlen(msg) == sizeof(msg) - 1);
}

int main(void)
{
    TEST_RUN(test_non_voter);
    TEST_RUN(test_last_voter);
    TEST_RUN(test_wait);
    TEST_RUN(test_quorum);
    TEST_RUN(test_small_msg);
    return TEST_DONE();
}
