/* dsp_poll: the DB poller (DESIGN.md "DB poller"), run by the background
 * job on its connections: overdue scheduled tasks and dispatching tasks
 * whose lease expired are claimed, and handed to the loop thread to own. */
#ifndef DSP_POLL_H
#define DSP_POLL_H

#include "dsp.h"
#include "hr_task.h"
#include "hr_vec.h"

#define DSP_POLL_MAX 100 /* tasks per poller round */

/* The tasks a round claimed, for the loop thread (which frees them). */
typedef HR_VEC(hr_task *) dsp_poll_claimed;

/* One round: prepares and claims the overdue tasks, takes over the ones
 * whose lease expired, each appended to CLAIMED. */
void dsp_poll_run(dsp *d, dsp_conn *conn, dsp_poll_claimed *claimed);

#endif
