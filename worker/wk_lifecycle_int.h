/* wk_lifecycle_int: the chunk endings and the open that the lifecycle's
 * timers (wk_lifecycle_timers.c) call in wk_lifecycle.c; nobody else
 * sees them. */
#ifndef WK_LIFECYCLE_INT_H
#define WK_LIFECYCLE_INT_H

#include <stdbool.h>

#include "wk_lifecycle.h"

/* Gives C up without finishing it (WHY: a static string for the log); with
 * SETTLE its offset counts as finished.  Submits C's end job (C is unlinked
 * when it answered); nothing for a chunk ending already. */
void wk_lifecycle_abandon(wk_lifecycle *l, wk_chunk *c, const char *why, bool settle);
/* Stops starting requests for C (HALT: park, expire or cancel); once
 * nothing of it is in flight its end job is submitted.  May unlink C (when
 * the job cannot be submitted). */
void wk_lifecycle_halt(wk_lifecycle *l, wk_chunk *c, wk_chunk_halt halt);
/* Submits C's open (control key, lease, members); its answer goes on in
 * the lifecycle, which waits for a foreign lease by calling this again
 * from the control timer.  May unlink C (when the job cannot be
 * submitted). */
void wk_lifecycle_open(wk_lifecycle *l, wk_chunk *c);

#endif
