/* dsp_reconcile: the reconciliation of an owned task's subscriber set with
 * push_subscription after the claim and before the first chunk, in jobs on
 * libuv's pool (d->rc: the loop thread's queue and the jobs). */
#ifndef DSP_RECONCILE_H
#define DSP_RECONCILE_H

#include <stdbool.h>

#include "dsp.h"
#include "dsp_owned.h"

/* Reconciliations at once, each a job on libuv's pool, which dsp_run sizes
 * to DSP_POOL_THREADS (the background job and a spare besides; an
 * UV_THREADPOOL_SIZE in the environment wins).  A job takes up to
 * DSP_RECONCILE_BATCH queued tasks (one address sync and one pass of round
 * trips for them all, so a larger batch costs few more round trips: 64
 * took 1,500 small tasks due together from claimed to reconciled in two
 * rounds of jobs, 16 in eight).  The jobs wait on round trips far more
 * than they compute, so they overlap. */
#define DSP_RECONCILE_JOBS 6
#define DSP_RECONCILE_BATCH 64

/* The queue and the idle jobs into d->rc.  0, or -1 out of memory. */
int dsp_reconcile_new(dsp *d);
/* Frees the queue and closes the jobs' connections (no job may run). */
void dsp_reconcile_free(dsp *d);
/* Loop thread: queues the reconciliation of owned task DT (once) and marks
 * it reconciling; false when out of memory. */
bool dsp_reconcile_want(dsp *d, dsp_task *dt);
/* Whether a reconciliation job is running (shutdown waits for it). */
bool dsp_reconcile_busy(const dsp *d);

#endif
