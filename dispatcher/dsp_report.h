/* dsp_report: the push_chunk rows and push_task.total of confirmed
 * publishes, queued (d->report) and written in batches on the loop thread. */
#ifndef DSP_REPORT_H
#define DSP_REPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "dsp.h"

#define DSP_REPORTS_MAX 100000   /* confirmed chunks waiting for MySQL */
#define DSP_REPORTS_PER_TICK 256 /* push_chunk rows written per tick */

/* A confirmed first publish or republish waiting for its push_chunk row. */
typedef struct dsp_report {
    int64_t task, seq, size, published_ms;
    int shard; /* whose stats hash counts it (0 for a task of one set) */
} dsp_report;

/* The queue (empty) into d->report.  0, or -1 out of memory. */
int dsp_report_new(dsp *d);
/* Frees the queue (what it held is lost: called after the last flush). */
void dsp_report_free(dsp *d);
/* Queues the row of a confirmed publish (a full queue loses it, logged). */
void dsp_report_add(dsp *d, const dsp_report *rp);
/* Whether a report of shard SHARD (HR_SHARD_NONE: a task of one set) of
 * task ID waits for its row. */
bool dsp_report_queued(const dsp *d, int64_t id, int shard);
/* Writes a batch of queued rows (DSP_REPORTS_PER_TICK at most). */
void dsp_report_write(dsp *d);
/* At exit: writes batches until the queue is empty or MySQL fails. */
void dsp_report_flush(dsp *d);

#endif
