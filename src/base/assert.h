/* Assertions that stay on in every build (NDEBUG removes none of them).
 *
 * A crashed lock server is a liveness problem; a lock granted twice or a
 * token that goes backwards is a safety problem.  So every directory uses
 * FENCE_ASSERT instead of <assert.h>, and the handler prints the
 * expression, file and line to stderr (with one write(2), no stdio, no
 * allocation: it may run with the heap corrupt) before it aborts.
 *
 *   FENCE_ASSERT(cond)   our bug if false: print, abort
 *   FENCE_ALWAYS(cond)   defensive branch that should always be true but is
 *   FENCE_NEVER(cond)    cheap to survive (SQLite's ALWAYS()/NEVER()): the
 *                        value of cond, and nothing else, in every build
 *   fence__fatal(msg)    stop the process on a condition that is not a bug
 *                        but cannot be survived safely (an allocation that
 *                        fails inside a state-machine apply): prints
 *                        "fatal: msg" and aborts
 *
 * Split compound checks: FENCE_ASSERT(a); FENCE_ASSERT(b);  Macro arguments
 * are parenthesized, so FENCE_ASSERT(a == b) never becomes !a == b. */
#ifndef FENCE_COMMON_ASSERT_H
#define FENCE_COMMON_ASSERT_H

#define FENCE_ASSERT(cond)                                                  \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fence__assert_fail(#cond, __FILE__, __LINE__);                  \
        }                                                                   \
    } while (0)

#define FENCE_ALWAYS(cond) (cond)
#define FENCE_NEVER(cond) (cond)

/* Print "assertion failed: EXPR (FILE:LINE)" and abort.  Never returns. */
_Noreturn void fence__assert_fail(const char *expr, const char *file, int line);

/* Print "fatal: MSG" and abort.  Never returns. */
_Noreturn void fence__fatal(const char *msg);

#endif /* FENCE_COMMON_ASSERT_H */
