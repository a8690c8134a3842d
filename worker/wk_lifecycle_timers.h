/* wk_lifecycle_timers: the lifecycle's periodic work on its open chunks,
 * driven by the worker's timers: lease renewal, the control read that
 * halts the chunks of paused, cancelled or expired tasks, the pump
 * watchdog and the retried open of chunks waiting for a foreign lease.
 * The renewal and the control read are jobs on the Redis thread
 * (wk_control): a tick submits one unless the last one has not answered
 * yet.  Loop thread only. */
#ifndef WK_LIFECYCLE_TIMERS_H
#define WK_LIFECYCLE_TIMERS_H

#include "wk_lifecycle.h"

/* Renews the lease of every open chunk; a chunk whose lease was lost is
 * abandoned (its offset counts as finished). */
void wk_lifecycle_renew(wk_lifecycle *l);
/* Reads the control keys and halts the chunks of paused or cancelled
 * tasks, runs the pump watchdog and retries opens waiting for a foreign
 * lease. */
void wk_lifecycle_control(wk_lifecycle *l);

#endif
