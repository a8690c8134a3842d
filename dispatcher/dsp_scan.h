/* dsp_scan: the scanner and prepare (DESIGN.md "Scanner" and "Prepare"),
 * run by the background job on its connections; d->scan is the scanner's
 * memory of the tasks it put into the timer.  The DB poller prepares the
 * tasks it claims with the same two calls. */
#ifndef DSP_SCAN_H
#define DSP_SCAN_H

#include <stdbool.h>
#include <stdint.h>

#include "dsp.h"
#include "hr_state.h"
#include "hr_task.h"

#define DSP_SCAN_MAX 1000    /* tasks per page of a scan */
#define DSP_SCAN_PAGES 5     /* pages per scan, while they are full */
#define DSP_RECHECK_MS 10000 /* recount a prepared task's subscribers */

/* A page of the scan (dsp_scan.c): the scheduled tasks to run whose first
 * due instant comes within the horizon (the horizon in s, twice:
 * HR_STATE_DUE_BY_SQL), soonest first, after the cursor (topic filter
 * twice; whether there is a cursor; its due_at is NULL; its id; again NULL;
 * its first due in ms; its id), at most LIMIT.  A NULL due_at and a
 * local_time other than 0 or 1 are read to be failed by the validation.
 * The index is named: MariaDB's own choice read every scheduled task's row
 * (docs/performance.md "Reminders scheduled ahead"). */
#define DSP_SCAN_PAGE_SQL                                                                  \
    "SELECT " HR_TASK_COLUMNS " FROM push_task FORCE INDEX (push_task_state_control_due) " \
    "WHERE state = 'scheduled' AND control = 'run' AND (" HR_STATE_DUE_BY_SQL(             \
        "<=", "UTC_TIMESTAMP(3) + INTERVAL ? SECOND",                                      \
        "due_at IS NULL OR ") " OR local_time < 0 OR local_time > 1) "                     \
                              "AND (? IS NULL OR topic = ?) "                              \
                              "AND (? = 0 OR (due_at IS NULL AND ? AND id > ?) "           \
                              "OR (due_at IS NOT NULL AND (? OR (" HR_STATE_FIRST_DUE_SQL  \
                              ", id) > (FROM_UNIXTIME(? / 1000), ?)))) "                   \
                              "ORDER BY " HR_STATE_FIRST_DUE_SQL ", id LIMIT ?"

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
