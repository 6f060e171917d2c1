/* Unit tests of the voter floor (src/server/voter_floor.c): the rule that
 * fenced's CLUSTER.REMOVE and the simulation's membership changes both
 * apply, as a pure function of plain data.  Cases: a non-voter or unknown
 * id, the last voter, the live-quorum count (the leader removing itself, a
 * dead voter, the docs' 3-node example), spares not counting, the WAIT
 * window after a flag clear and its end, rechecked, and the messages. */
#include <stdio.h>
#include <string.h>

#include "server/voter_floor.h"

static int failures;

#define CHECK(cond, what)                                                   \
    do {                                                                    \
        if (cond) {                                                         \
            printf("ok - %s\n", what);                                      \
        } else {                                                            \
            printf("not ok - %s (line %d)\n", what, __LINE__);              \
            failures++;                                                     \
        }                                                                   \
    } while (0)

/* Ask the rule about removing victim from sv[0..n), flags settled. */
static int ask(const fence_vf_server *sv, size_t n, uint64_t victim,
               fence_vf_result *r)
{
    fence_vf_query q = {sv, n, victim, false, 1000, 200};
    return fence_voter_floor(&q, r);
}

int main(void)
{
    fence_vf_result r;
    char msg[300];

    /* 3 voters, all answering (node 1 is the leader). */
    fence_vf_server all3[] = {{1, true, true}, {2, true, true}, {3, true, true}};
    CHECK(ask(all3, 3, 2, &r) == FENCE_VF_OK && r.remaining == 2 && r.live == 2 &&
              r.quorum == 2,
          "3 live voters: removing a follower is allowed (2 of 2 left answer)");
    CHECK(ask(all3, 3, 1, &r) == FENCE_VF_OK,
          "3 live voters: the leader may remove itself");
    CHECK(ask(all3, 3, 9, &r) == FENCE_VF_OK, "an id not in the configuration: OK");

    /* The docs' example: 3 voters, node 3 dead. */
    fence_vf_server dead3[] = {{1, true, true}, {2, true, true}, {3, true, false}};
    CHECK(ask(dead3, 3, 2, &r) == FENCE_VF_NO_QUORUM && r.remaining == 2 &&
              r.live == 1 && r.quorum == 2,
          "node 3 dead: removing live node 2 is refused (1 of 2 answer)");
    CHECK(ask(dead3, 3, 3, &r) == FENCE_VF_OK, "node 3 dead: removing node 3 works");
    fence_voter_floor_msg(&r, 3, msg, sizeof msg);
    CHECK(msg[0] == '\0', "no message for an allowed removal");
    ask(dead3, 3, 2, &r);
    fence_voter_floor_msg(&r, 2, msg, sizeof msg);
    CHECK(strstr(msg, "refused: without node 2 the cluster would have 2 voter(s), of "
                      "which only 1 answer the leader; a quorum needs 2") == msg,
          "the no-quorum message gives the numbers");

    /* Last voter. */
    fence_vf_server one[] = {{5, true, true}, {6, false, true}};
    CHECK(ask(one, 2, 5, &r) == FENCE_VF_LAST_VOTER && r.remaining == 0,
          "the last voter is never removed (a spare does not count)");
    fence_voter_floor_msg(&r, 5, msg, sizeof msg);
    CHECK(strstr(msg, "refused: node 5 is the last voter") == msg,
          "the last-voter message");
    CHECK(ask(one, 2, 6, &r) == FENCE_VF_OK, "a non-voter is always removable");
    fence_vf_server lonely[] = {{6, false, false}};
    CHECK(ask(lonely, 1, 6, &r) == FENCE_VF_OK,
          "a non-voter is removable even with no voter in sight");
    CHECK(ask(NULL, 0, 1, &r) == FENCE_VF_OK, "an empty configuration: OK");

    /* Non-voters do not make a quorum. */
    fence_vf_server spares[] = {{1, true, true}, {2, true, false}, {3, true, false},
                                {4, false, true}, {5, false, true}};
    CHECK(ask(spares, 5, 2, &r) == FENCE_VF_NO_QUORUM && r.live == 1,
          "answering non-voters do not count toward the quorum");
    CHECK(ask(spares, 5, 4, &r) == FENCE_VF_OK, "removing a spare needs no quorum");

    /* 5 voters, two dead: removing a dead one leaves 4 of which 3 answer
     * (quorum 3), removing a live one leaves 4 of which 2 answer. */
    fence_vf_server five[] = {{1, true, true}, {2, true, true}, {3, true, true},
                              {4, true, false}, {5, true, false}};
    CHECK(ask(five, 5, 4, &r) == FENCE_VF_OK && r.quorum == 3 && r.live == 3,
          "5 voters, 2 dead: removing a dead one is allowed");
    CHECK(ask(five, 5, 2, &r) == FENCE_VF_NO_QUORUM && r.live == 2,
          "5 voters, 2 dead: removing a live one is refused");
    fence_vf_server two[] = {{1, true, true}, {2, true, false}};
    CHECK(ask(two, 2, 2, &r) == FENCE_VF_OK && r.quorum == 1,
          "2 voters: removing the dead follower leaves the leader alone");
    CHECK(ask(two, 2, 1, &r) == FENCE_VF_NO_QUORUM,
          "2 voters: the leader may not leave a dead follower alone");

    /* The settle window after a clear of the contact flags. */
    fence_vf_query q = {dead3, 3, 2, false, 50, 200};
    CHECK(fence_voter_floor(&q, &r) == FENCE_VF_WAIT && r.wait_ms == 151,
          "within the settle window: WAIT until just after it");
    q.since_clear_ms = 199;
    CHECK(fence_voter_floor(&q, &r) == FENCE_VF_WAIT && r.wait_ms == 2,
          "one ms before its end: WAIT 2 ms");
    q.since_clear_ms = 200;
    CHECK(fence_voter_floor(&q, &r) == FENCE_VF_NO_QUORUM,
          "at the end of the window the flags are read");
    q.since_clear_ms = 0;
    q.rechecked = true;
    CHECK(fence_voter_floor(&q, &r) == FENCE_VF_NO_QUORUM,
          "rechecked: the flags are read as they are, no WAIT");
    q.rechecked = false;
    q.victim = 3;
    CHECK(fence_voter_floor(&q, &r) == FENCE_VF_WAIT,
          "a removal the flags would allow also waits in the window");
    q.victim = 7;
    CHECK(fence_voter_floor(&q, &r) == FENCE_VF_OK,
          "an unknown id never waits");
    fence_vf_query q1 = {one, 2, 5, false, 0, 200};
    CHECK(fence_voter_floor(&q1, &r) == FENCE_VF_LAST_VOTER,
          "the last voter is refused without waiting");

    /* Messages are bounded. */
    char small[16];
    ask(dead3, 3, 2, &r);
    fence_voter_floor_msg(&r, 2, small, sizeof small);
    CHECK(strlen(small) == sizeof small - 1, "a long message is cut to the buffer");
    return failures ? 1 : 0;
}
