/* dsp_control: the dispatcher's side of pause / resume / cancel and of the
 * tasks heraldctl redrive reopened, run by the background job after each
 * scan on its connections.  Nothing is remembered between scans. */
#ifndef DSP_CONTROL_H
#define DSP_CONTROL_H

#include <stdbool.h>

#include "dsp.h"

/* The tasks whose control column asks for a transition (params: the topic
 * twice, the limit).  Read by ranges of (state, control) of the index
 * push_task_state_control_due (031_task_due_scan.sql), so only the tasks
 * it matches: by the state index's range of every unfinished task, a
 * stack with 1,000,000 reminders scheduled ahead read 1,000,000 entries
 * each scan (2.0 s, docs/performance.md "Reminders scheduled ahead"), and
 * left to itself MariaDB walked the primary key for the ORDER BY id LIMIT
 * once a few thousand tasks were unfinished, reading every finished task
 * too ("The dispatcher's scans and the task history"). */
#define DSP_CONTROL_SCAN_SQL                                                                  \
    "SELECT id, control, started_at IS NOT NULL, dispatched_at IS NOT NULL, "                 \
    "COALESCE(CAST(ROUND(UNIX_TIMESTAMP(due_at) * 1000) AS SIGNED), 0), shards "              \
    "FROM push_task FORCE INDEX (push_task_state_control_due) WHERE ((control = 'pause' AND " \
    "state IN "                                                                               \
    "('scheduled', 'dispatching', 'dispatched')) "                                            \
    "OR (control = 'run' AND state = 'paused') "                                              \
    "OR (control = 'cancel' AND state IN "                                                    \
    "('scheduled', 'dispatching', 'dispatched', 'paused'))) "                                 \
    "AND (? IS NULL OR topic = ?) ORDER BY id LIMIT ?"

/* One round of control transitions (at most DSP_CONTROL_MAX of each kind).
 * Whether a task entered or left a finished state (a cancel, a redrive). */
bool dsp_control_scan(dsp *d, dsp_conn *conn);

#endif
