/* wk_clock: the worker's one wall clock, UTC milliseconds since the epoch
 * (the unit of every herald timestamp; hosts run NTP). */
#ifndef WK_CLOCK_H
#define WK_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t wk_clock_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#endif
