/* hr_clock: herald's two clocks, in milliseconds.
 *
 * hr_clock_now_ms is the wall clock, UTC milliseconds since the epoch: the
 * unit of every timestamp herald stores or compares with another host's
 * (hosts run NTP; docs/architecture.md says which clock decides what).
 * hr_clock_mono_ms is CLOCK_MONOTONIC, for deadlines and intervals inside
 * one process, which a step of the wall clock must not stretch or cut.
 *
 * Test seam (meson -Dtest_seams=true; hr_clock.c): HERALD_TEST_CLOCK_SKEW_MS,
 * read once, shifts this process's wall clock by that many ms, as a host
 * whose clock is off would (the fault rows clock-*, integration_pacing).
 * Debian's libfaketime did that to the whole process and broke librdkafka:
 * a consumer 30 s ahead lost its group every 30 s (its waits ran the skew
 * long), so a worker ahead consumed nothing.  Without the option the skew
 * is the constant 0. */
#ifndef HR_CLOCK_H
#define HR_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t hr_clock_ms(clockid_t clock)
{
    struct timespec ts;

    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#ifdef HERALD_TEST_SEAMS
int64_t hr_clock_test_skew_ms(void);
#else
static inline int64_t hr_clock_test_skew_ms(void)
{
    return 0;
}
#endif

static inline int64_t hr_clock_now_ms(void)
{
    return hr_clock_ms(CLOCK_REALTIME) + hr_clock_test_skew_ms();
}

static inline int64_t hr_clock_mono_ms(void)
{
    return hr_clock_ms(CLOCK_MONOTONIC);
}

/* *TS = CLOCK's now plus MS: a deadline for pthread_cond_timedwait (whose
 * condition variable waits on CLOCK). */
static inline void hr_clock_deadline(clockid_t clock, int64_t ms, struct timespec *ts)
{
    clock_gettime(clock, ts);
    ts->tv_sec += (time_t)(ms / 1000);
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

#endif
