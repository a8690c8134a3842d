/* dsp_dlog: the dispatchers' upkeep of the delivery log's partitions
 * (push_delivery, schemas/mysql/013_delivery_partitions.sql; the key and
 * the rules are common/hr_dlog.h), run by the background job.
 *
 * Every DSP_DLOG_EVERY_MS, and at the first scan, one dispatcher of the
 * cluster — the holder of the push_job lease HR_DLOG_JOB — creates the
 * partitions of the days up to DSP_DLOG_AHEAD_DAYS ahead, drops those of the
 * days before today - dispatcher.delivery_retention_days (recorded in
 * push_delivery_dropped first), settles rows written without a day, and
 * copies a slice of a legacy (pre-partitioning) log; while rows wait to be
 * settled or copied it runs again at the next scan.  d->dlog is the
 * background job's alone. */
#ifndef DSP_DLOG_H
#define DSP_DLOG_H

#include "dsp.h"

/* How often the partitions are looked at (and the lease held for). */
#define DSP_DLOG_EVERY_MS (10 * 60 * 1000)
/* Days of partitions kept ready after today. */
#define DSP_DLOG_AHEAD_DAYS 7

typedef struct dsp_dlog dsp_dlog;

/* The upkeep's state into d->dlog.  0, or -1 out of memory. */
int dsp_dlog_new(dsp *d);
void dsp_dlog_free(dsp *d);
/* The upkeep's pass on CONN, when one is due (background job). */
void dsp_dlog_run(dsp *d, dsp_conn *conn);

#endif
