/*
 * ctl_clock.c — the controller's wall clock, one function shared by the loop
 * (ctl_main.c), the reconcile (ctl_cycle.c) and the actuator's hooks
 * (ctl_wire.c), so that none of them calls into another for the time.
 * `gangq bench reconcile --round-ms` moves it forward (ctl_clock_advance):
 * the controller itself never does.
 */
#include <time.h>

#include "ctl_int.h"

static int64_t advanced_ms; /* added by ctl_clock_advance (0 in the controller) */

int64_t ctl_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + advanced_ms;
}

void ctl_clock_advance(int64_t ms)
{
    if (ms > 0)
        advanced_ms += ms;
}
