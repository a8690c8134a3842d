/* dsp_timer: the Redis timer (DESIGN.md "Timer"): written by the scanner
 * (background job, its connections), popped and claimed by the loop thread,
 * whose libuv timer (d->timer) sleeps until the next entry is due. */
#ifndef DSP_TIMER_H
#define DSP_TIMER_H

#include <stdint.h>

#include "dsp.h"
#include "hr_task.h"

#define DSP_TIMER_POP_MAX 100 /* ids per timer pop */

/* The wake-up timer's state into d->timer.  0, or -1 out of memory. */
int dsp_timer_new(dsp *d);
/* Loop thread, at start-up: starts the wake-up timer (timer_interval_ms). */
void dsp_timer_start(dsp *d);
/* Loop thread: no more pops (shutdown). */
void dsp_timer_stop(dsp *d);
/* Loop thread: closes the timer's handle (the loop ends after it). */
void dsp_timer_close(dsp *d);
/* After the loop ended; NULL-safe. */
void dsp_timer_free(dsp *d);
/* Background job: puts T into the timer and mirrors control=run for
 * workers.  0 or -1. */
int dsp_timer_add(dsp *d, dsp_conn *conn, const hr_task *t);
/* Background job: takes the entries of the N tasks IDS out of the timer
 * (claimed, paused, cancelled, failed, or postponed beyond the horizon: a
 * stale entry would pop at the old due time), DSP_TIMER_DEL_MAX a ZREM.
 * 0 or -1. */
int dsp_timer_del(dsp *d, dsp_conn *conn, const int64_t *ids, size_t n);
/* Loop thread: pops the due entries now (a scan put entries in). */
void dsp_timer_wake(dsp *d);

#endif
