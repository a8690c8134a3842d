/* dsp_poll: the DB poller (DESIGN.md "DB poller"), run by the background
 * job on its connections: overdue scheduled tasks and dispatching tasks
 * whose lease expired are claimed, and handed to the loop thread to own. */
#ifndef DSP_POLL_H
#define DSP_POLL_H

#include "dsp.h"
#include "hr_state.h"
#include "hr_task.h"
#include "hr_vec.h"

#define DSP_POLL_MAX 100 /* tasks per poller round */

/* The scheduled tasks to run overdue by more than the grace (in µs,
 * twice: HR_STATE_DUE_BY_SQL), topic filter twice, at most LIMIT.  The
 * index is named as in DSP_SCAN_PAGE_SQL. */
#define DSP_POLL_OVERDUE_SQL                                                               \
    "SELECT " HR_TASK_COLUMNS " FROM push_task FORCE INDEX (push_task_state_control_due) " \
    "WHERE state = 'scheduled' AND control = 'run' "                                       \
    "AND " HR_STATE_DUE_BY_SQL("<", "UTC_TIMESTAMP(3) - INTERVAL ? MICROSECOND",           \
                               "") " AND (? IS NULL OR topic = ?) ORDER BY due_at LIMIT ?"

/* The tasks a round claimed, for the loop thread (which frees them). */
typedef HR_VEC(hr_task *) dsp_poll_claimed;

/* One round: prepares and claims the overdue tasks, takes over the ones
 * whose lease expired, each appended to CLAIMED. */
void dsp_poll_run(dsp *d, dsp_conn *conn, dsp_poll_claimed *claimed);

#endif
