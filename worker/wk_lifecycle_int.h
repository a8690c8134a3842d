/* wk_lifecycle_int: the chunk endings and the open that the lifecycle's
 * timers (wk_lifecycle_timers.c) call in wk_lifecycle.c; nobody else
 * sees them. */
#ifndef WK_LIFECYCLE_INT_H
#define WK_LIFECYCLE_INT_H

#include <stdbool.h>

#include "wk_lifecycle.h"

/* Gives C up without finishing it; with SETTLE its offset counts as
 * finished.  Frees C. */
void wk_lifecycle_abandon(wk_lifecycle *l, wk_chunk *c, const char *why, bool settle);
/* Stops starting requests for C (HALT: park or cancel).  May free C. */
void wk_lifecycle_halt(wk_lifecycle *l, wk_chunk *c, wk_chunk_halt halt);
/* Takes C's lease, reads its set and starts its pushes; a foreign lease
 * is waited for (the open is retried by the timers).  May free C. */
void wk_lifecycle_open(wk_lifecycle *l, wk_chunk *c);

#endif
