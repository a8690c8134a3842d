/* dsp_pace: admission control (docs/scheduling.md), from the API's threads
 * and the background scan, each on its own connections.  Pacing itself is
 * derived at every grant by the limiter's script; its gauges are
 * dsp_owned.c's. */
#ifndef DSP_PACE_H
#define DSP_PACE_H

#include <stdint.h>

#include "dsp.h"
#include "hr_task.h"

/* A channel's unfinished tasks that may share a budget (params: the
 * channel, a task id to leave out, the latest due_at in ms, the earliest
 * due_at of a scheduled one in ms, the limit), the latest due first.
 * Read by ranges of push_task_state_control_due, named as the scanner's
 * statements name it: local_time IN (0, 1) (the values a valid row has,
 * the index's third column) makes the scheduled ones ranges of due_at;
 * without it this read took every scheduled task's index entry
 * (test_scan_reads).  push_task_state_due, which served it before, is the
 * next release's to drop (docs/operations.md, section 5). */
#define DSP_PACE_READ_SQL                                                                 \
    "SELECT id, CAST(ROUND(UNIX_TIMESTAMP(due_at) * 1000) AS SIGNED), "                   \
    "GREATEST(0, total - sent - failed - throttled - pulled - cancelled - unregistered "  \
    "- expired - opted_out - suppressed), "                                               \
    "rate_limit, priority, "                                                              \
    "COALESCE(CAST(ROUND(UNIX_TIMESTAMP(finish_by) * 1000) AS SIGNED), -1), shards, "     \
    "state = 'scheduled' "                                                                \
    "FROM push_task FORCE INDEX (push_task_state_control_due) "                           \
    "WHERE channel = ? AND id <> ? AND due_at IS NOT NULL "                               \
    "AND control = 'run' AND local_time IN (0, 1) AND due_at <= FROM_UNIXTIME(? / 1000) " \
    "AND (state IN ('dispatching', 'dispatched') OR "                                     \
    "(state = 'scheduled' AND due_at >= FROM_UNIXTIME(? / 1000))) "                       \
    "ORDER BY due_at DESC, id DESC LIMIT ?"

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
