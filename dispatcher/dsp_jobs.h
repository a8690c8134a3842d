/* dsp_jobs: the background job runner: one job at a time on libuv's pool,
 * its own connections (d->jobs); the timers ask for work. */
#ifndef DSP_JOBS_H
#define DSP_JOBS_H

#include <stdbool.h>

#include "dsp.h"

typedef struct dsp_jobs dsp_jobs;

/* How often a scan also counts the finished tasks for herald_tasks{state}
 * (dsp_jobs.c), and the scheduled ones once they were more than
 * DSP_JOBS_SCHEDULED_EACH_SCAN at the last count (below, every scan). */
#define DSP_JOBS_FINALS_MS 60000
#define DSP_JOBS_SCHEDULED_EACH_SCAN 10000

enum { DSP_JOBS_SCAN = 1, DSP_JOBS_POLL = 2, DSP_JOBS_SWEEP = 4, DSP_JOBS_HANDBACK = 8 };

/* The runner (idle) into d->jobs.  0, or -1 out of memory. */
int dsp_jobs_new(dsp *d);
/* Frees what the last job left and closes its connections (no job may
 * run); NULL-safe. */
void dsp_jobs_free(dsp *d);
/* Loop thread: asks for background work WHAT (DSP_JOBS_*) and starts the
 * job if idle; a request made while a job runs is served by the next. */
void dsp_jobs_kick(dsp *d, unsigned what);
/* Whether a job is running (shutdown waits for it). */
bool dsp_jobs_busy(const dsp *d);

#endif
