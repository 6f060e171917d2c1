/* The libFuzzer entry points a fuzz target defines (see mk/fuzz.mk).
 *
 * Every tests/fuzz/<name>_fuzz.c includes this header (the build uses
 * -Wmissing-prototypes) and defines LLVMFuzzerTestOneInput.  The same file
 * is linked two ways: with clang's libFuzzer by `make fuzz`, and with
 * tests/fuzz/replay.c (any compiler) for the corpus replay in `make test`.
 * A target reports a failed check by aborting (assert() or FUZZ_CHECK);
 * asserts stay on in every build.
 */
#ifndef FENCE_FUZZ_H
#define FENCE_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Run the target on one input, data[0..size).  The input is only valid
 * during the call.  Returns 0 (-1 asks libFuzzer to keep the input out of
 * the corpus; the replay treats both as success). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Optional one-time set-up, called before the first input. */
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Checks a property of the target; on failure prints where and aborts, so
 * that both libFuzzer and the replay report the input. */
#define FUZZ_CHECK(cond)                                                   \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed\n", __FILE__,    \
                    __LINE__, #cond);                                      \
            abort();                                                       \
        }                                                                  \
    } while (0)

#endif /* FENCE_FUZZ_H */
