/* dsp_pace: admission control (docs/scheduling.md), from the API's threads
 * and the background scan, each on its own connections.  Pacing itself is
 * derived at every grant by the limiter's script; its gauges are
 * dsp_owned.c's. */
#ifndef DSP_PACE_H
#define DSP_PACE_H

#include <stdint.h>

#include "dsp.h"
#include "hr_task.h"

/* What one scan's estimates share (dsp_pace.c says why): the subscriber
 * counts by task id, and the rows of the channels' tasks; its owner's
 * thread only. */
typedef struct dsp_pace_memo dsp_pace_memo;

/* An empty memo for estimates of tasks due from FIRST_DUE_MS to
 * LAST_DUE_MS (its channels' rows serve those; a task due outside reads
 * its own), or NULL out of memory; the free accepts NULL. */
dsp_pace_memo *dsp_pace_memo_new(int64_t first_due_ms, int64_t last_due_ms);
void dsp_pace_memo_free(dsp_pace_memo *memo);

/* Estimates task T as of NOW on its channel (with M and R) and writes its
 * last_warning (NULL when nothing is to warn about); a task's first
 * warning is counted and logged.  The tasks' sizes and the channel's rows
 * MEMO holds are taken from it, the others read and put there (NULL:
 * everything read for T).  0, or -1 on a backend error. */
int dsp_pace_admit(dsp *d, hr_mysql *m, hr_redis *r, dsp_pace_memo *memo, const hr_task *t,
                   int64_t now, char *errstr, size_t errlen);

#endif
