/* Event-loop lag: a repeating uv timer that measures how late it fires.
 * A callback that holds the loop (a snapshot encoded in the loop, a long
 * apply) shows up as lateness of the next tick; the maximum since start
 * is reported by INFO (loop_lag_max_us) so a benchmark can print it.
 * The timer is unreferenced: it never keeps the loop alive. */
#ifndef FENCE_SERVER_LAG_H
#define FENCE_SERVER_LAG_H

#include <stdint.h>
#include <uv.h>

/* The monitor. */
typedef struct fence_lag {
    uv_timer_t timer;  /* the tick */
    uint64_t due_ns;   /* uv_hrtime() at which the next tick is due */
    uint64_t max_us;   /* largest lateness seen, microseconds */
    uint64_t last_us;  /* lateness of the latest tick, microseconds */
    uint64_t ticks;    /* ticks measured */
    uint64_t over_20ms; /* ticks later than 20 ms */
} fence_lag;

/* Start ticking every FENCE_LAG_PERIOD_MS on loop. */
void fence__lag_start(fence_lag *lg, uv_loop_t *loop);

/* Close the timer (part of the server's shutdown). */
void fence__lag_close(fence_lag *lg);

#endif /* FENCE_SERVER_LAG_H */
