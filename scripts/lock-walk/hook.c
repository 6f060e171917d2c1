/* The function-entry hook of scripts/lock-walk.sh: loaded into a fenced
 * built with -finstrument-functions (LD_PRELOAD), it writes every entry
 * and exit of an instrumented function of the loop thread to the file
 * $FENCE_WALK_OUT, after the process's memory map (to resolve the
 * addresses afterwards).  A measuring aid only: never linked into the
 * daemon. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static FILE *out;       /* the trace, or NULL: not tracing */
static pthread_t loop_thread; /* the thread that loaded us: fenced's loop */

/* Open the trace and write the memory map first. */
__attribute__((constructor, no_instrument_function)) static void walk_open(void)
{
    const char *path = getenv("FENCE_WALK_OUT");
    if (path == NULL)
        return;
    out = fopen(path, "w");
    if (out == NULL)
        return;
    loop_thread = pthread_self();
    FILE *maps = fopen("/proc/self/maps", "r");
    char line[512];
    while (maps != NULL && fgets(line, sizeof(line), maps) != NULL)
        fprintf(out, "M %s", line);
    if (maps != NULL)
        fclose(maps);
    fflush(out);
}

/* One event: E (entry) or X (exit) and the function's address; flushed at
 * once, so a killed process leaves a whole trace. */
__attribute__((no_instrument_function)) static void walk_event(char kind, void *fn)
{
    if (out == NULL || !pthread_equal(pthread_self(), loop_thread))
        return;
    fprintf(out, "%c %p\n", kind, fn);
    fflush(out);
}

__attribute__((no_instrument_function)) void __cyg_profile_func_enter(void *fn, void *site);
__attribute__((no_instrument_function)) void __cyg_profile_func_exit(void *fn, void *site);

/* gcc's -finstrument-functions calls these on every entry and exit. */
void __cyg_profile_func_enter(void *fn, void *site)
{
    (void)site;
    walk_event('E', fn);
}

void __cyg_profile_func_exit(void *fn, void *site)
{
    (void)site;
    walk_event('X', fn);
}
