/* dsp_pace: admission control (docs/scheduling.md), from the API's threads
 * and the background scan, each on its own connections.  Pacing itself is
 * derived at every grant by the limiter's script; its gauges are
 * dsp_owned.c's. */
#ifndef DSP_PACE_H
#define DSP_PACE_H

#include <stdint.h>

#include "dsp.h"
#include "hr_task.h"

/* Estimates task T as of NOW on its channel (with M and R) and writes its
 * last_warning (NULL when nothing is to warn about); a task's first
 * warning is counted and logged.  0, or -1 on a backend error. */
int dsp_pace_admit(dsp *d, hr_mysql *m, hr_redis *r, const hr_task *t, int64_t now, char *errstr,
                   size_t errlen);

#endif
