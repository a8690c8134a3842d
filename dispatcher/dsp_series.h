/* dsp_series: a series' occurrences written as ordinary tasks
 * (docs/scheduling.md "Series"), run by the background job before the
 * scanner, so an occurrence written is scanned in the same pass.
 *
 * One dispatcher of the cluster at a time does it: the holder of the
 * push_job lease DSP_SERIES_JOB (dsp_store_job_lease, as the delivery
 * log's upkeep).  Every active series whose next occurrence is due within
 * its lead (push_series.lead_s, else dispatcher.series_lead_s) gets that
 * occurrence as a push_task row with series_id and occurrence_at, written
 * with hr_task_insert in the series row's transaction (its row locked):
 * the unique key (series_id, occurrence_at) makes a second write of the
 * same occurrence (a dispatcher that lost the lease mid-pass, a crash
 * between the insert and the commit of next_at) find the first row.
 *
 * An occurrence is missed when its time (for a local-time series, the
 * last instant any zone reaches it: a late local-time task still reaches
 * the zones ahead) is more than DSP_SERIES_LATE_MS past and it was never
 * written (the dispatchers were down, the series
 * paused): push_series.catch_up says what happens to the missed ones —
 * none skips them, latest writes only the last, all writes each.  A rule,
 * zone or template that is refused makes the series failed with
 * last_error; nothing crashes.  d->series is the background job's alone. */
#ifndef DSP_SERIES_H
#define DSP_SERIES_H

#include "dsp.h"

/* The push_job row of the lease, and how long a pass holds it. */
#define DSP_SERIES_JOB "series"
#define DSP_SERIES_LEASE_S 10
/* An occurrence this late and never written is missed (catch_up). */
#define DSP_SERIES_LATE_MS 5000
/* A wall time's last instant anywhere: UTC-12, the zone furthest west. */
#define DSP_SERIES_WEST_MAX_S 43200
/* Series looked at per pass, and occurrences walked per series per pass
 * (written or skipped); the rest waits for the next pass. */
#define DSP_SERIES_PER_PASS 500
#define DSP_SERIES_WALK_MAX 4096

typedef struct dsp_series dsp_series;

/* The module's state into d->series.  0, or -1 out of memory. */
int dsp_series_new(dsp *d);
void dsp_series_free(dsp *d);
/* One pass on CONN (background job, every scan). */
void dsp_series_run(dsp *d, dsp_conn *conn);

#endif
