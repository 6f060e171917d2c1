/* The reference model of the lock state machine that test_core_model.c
 * runs side by side with the real one (core_model.c): arrays indexed by
 * id, linear scans, no heap and no hash tables, written apart from
 * src/core and as plainly as possible. */
#ifndef FENCE_TEST_CORE_MODEL_H
#define FENCE_TEST_CORE_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/fsm.h"

#define MAXID 4096  /* ids per run (steps bound them) */
#define NNAMES 4
#define MAXEV 4096

/* The lock names the random commands use (core_model.c). */
extern const char *const names[NNAMES];

typedef struct mlease {
    bool used;
    uint64_t ttl, delay, deadline;
    bool dedicated;
    uint64_t owner; /* owner of the command that created it */
} mlease;

typedef struct mlock {
    bool used;       /* the lock object exists */
    uint64_t holder; /* lease id, 0 = free */
    uint64_t token;  /* last grant */
    bool in_delay;
    uint64_t delay_ms, delay_end;
} mlock;

typedef struct mwait {
    bool used;
    uint64_t lease;
    int lock;
    uint64_t wait_ms, deadline;
    bool acquire, has_req;
    uint64_t req;
} mwait;

typedef struct mdedup {
    uint64_t req;
    fence_cmd cmd; /* the request, compared field by field on a retry */
    fence_result r;
} mdedup;

typedef struct model {
    uint64_t now, last_token, next_lease, next_wait;
    fence_limits lim;
    mlease leases[MAXID];
    mlock locks[NNAMES];
    mwait waits[MAXID];
    mdedup dedup[64];
    uint32_t ndedup;
    fence_event ev[MAXEV];
    int nev;
} model;

/* Apply c at time now (time first moves to now, expiring what is due);
 * the result a real state machine must give. */
fence_result m_apply(model *m, uint64_t now, const fence_cmd *c);
/* Leases alive. */
uint32_t m_count_leases(const model *m);
/* Whether lease id exists. */
bool m_live(const model *m, uint64_t id);
/* The next deadline due (a lease, a lock delay or a wait): its time,
 * kind and id; false when nothing is due. */
bool m_next(const model *m, uint64_t *dl, int *kind, uint64_t *id);
/* Waiters queued on lock k. */
uint32_t m_waiters(const model *m, int k);

#endif /* FENCE_TEST_CORE_MODEL_H */
