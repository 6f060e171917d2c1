/* Event-loop lag monitor (see lag.h). */
#include "server/lag.h"

#include <string.h>

#include "base/assert.h"
#include "base/limits.h"

/* One tick: record how late it came, arm the next one. */
static void on_tick(uv_timer_t *t)
{
    fence_lag *lg = t->data;
    uint64_t now = uv_hrtime();
    uint64_t late = now > lg->due_ns ? (now - lg->due_ns) / 1000 : 0;
    lg->last_us = late;
    /* The first tick spans the start (raft loads its log in the loop):
     * not a stall of a serving loop. */
    if (lg->ticks > 0 && late > lg->max_us)
        lg->max_us = late;
    if (lg->ticks > 0 && late > 20000)
        lg->over_20ms++;
    lg->ticks++;
    /* uv_timer_start counts from the loop's cached time, which may be
     * behind uv_hrtime(): refresh it so the due time is exact. */
    uv_update_time(t->loop);
    lg->due_ns = uv_hrtime() + (uint64_t)FENCE_LAG_PERIOD_MS * 1000000u;
    uv_timer_start(t, on_tick, FENCE_LAG_PERIOD_MS, 0);
}

/* Start the tick. */
void fence__lag_start(fence_lag *lg, uv_loop_t *loop)
{
    FENCE_ASSERT(lg != NULL);
    memset(lg, 0, sizeof(*lg));
    uv_timer_init(loop, &lg->timer);
    lg->timer.data = lg;
    uv_unref((uv_handle_t *)&lg->timer);
    uv_update_time(loop);
    lg->due_ns = uv_hrtime() + (uint64_t)FENCE_LAG_PERIOD_MS * 1000000u;
    uv_timer_start(&lg->timer, on_tick, FENCE_LAG_PERIOD_MS, 0);
}

/* Stop and close the tick. */
void fence__lag_close(fence_lag *lg)
{
    uv_timer_stop(&lg->timer);
    uv_close((uv_handle_t *)&lg->timer, NULL);
}
