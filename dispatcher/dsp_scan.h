/* dsp_scan: the scanner and prepare (DESIGN.md "Scanner" and "Prepare"),
 * run by the background job on its connections; d->scan is the scanner's
 * memory of the tasks it put into the timer.  The DB poller prepares the
 * tasks it claims with the same two calls. */
#ifndef DSP_SCAN_H
#define DSP_SCAN_H

#include <stdbool.h>
#include <stdint.h>

#include "dsp.h"
#include "hr_task.h"

#define DSP_SCAN_MAX 1000    /* tasks per page of a scan */
#define DSP_SCAN_PAGES 5     /* pages per scan, while they are full */
#define DSP_RECHECK_MS 10000 /* recount a prepared task's subscribers */

/* The scanner's memory of one task in the horizon. */
typedef struct dsp_scan_entry {
    int64_t id;
    int64_t due_ms;      /* as put into the timer; -1 = not put yet */
    int64_t have;        /* SCARD subs + SCARD pulled at the last count */
    int64_t checked_ms;  /* when subscribers were last counted; 0 = never */
    int64_t admitted_ms; /* when admission control last ran (dsp_pace_admit); 0 = never */
} dsp_scan_entry;

/* What decides whether a task needs a prepare: its Redis count (subs +
 * pulled), its subscriptions, and whether it must be looked at (count
 * changed, or not checked for DSP_RECHECK_MS). */
typedef struct dsp_prep_count {
    int64_t have, want;
    bool synced; /* {t<ID>}synced exists */
    bool need;
} dsp_prep_count;

/* The scanner's memory (empty) into d->scan.  0, or -1 out of memory. */
int dsp_scan_new(dsp *d);
void dsp_scan_free(dsp *d);
/* One scan: the horizon's tasks validated, prepared, put into the timer,
 * admitted. */
void dsp_scan_run(dsp *d, dsp_conn *conn);
/* Reads the counts that decide whether the N TASKS need a prepare (E[i]:
 * the scanner's memory of task i's last count) into C[i], in two round
 * trips.  0 or -1 (logged). */
int dsp_scan_prepare_count(dsp *d, dsp_conn *conn, hr_task *const *tasks, size_t n,
                           const dsp_scan_entry *e, int64_t now, dsp_prep_count *c);
/* Brings T's subscriber set up to date before the claim, after
 * dsp_scan_prepare_count (C); E carries the scanner's memory of it.  A task
 * already due is not synced (its owner's reconciliation reads the rows).
 * 0 = prepared (or left to the owner's reconciliation), -1 = not
 * prepared (logged). */
int dsp_scan_prepare(dsp *d, dsp_conn *conn, const hr_task *t, dsp_scan_entry *e,
                     const dsp_prep_count *c);

#endif
