/* wk_lifecycle_push: a chunk's pushes from its open to its last
 * acknowledgement — the throttle slices that let them go, the sender's
 * outcomes (the done callback), the acknowledgements buffered and flushed
 * in batches, a delivery-log row per outcome.  Loop thread only. */
#ifndef WK_LIFECYCLE_PUSH_H
#define WK_LIFECYCLE_PUSH_H

#include "wk_chunk_acks.h"
#include "wk_chunk_check.h"
#include "wk_lifecycle.h"

/* Whether outcomes go to the reporter: a delivery log, or events. */
bool wk_lifecycle_reports(const wk_lifecycle *l);
/* Hands the reporter C's recipient UID's outcome STATUS (a delivery-log
 * row, an event): PUSH's attempts and last address, NULL for an outcome
 * decided before any push (no attempt, no address); RES the last answer's
 * status and latency.  C's acknowledgements from then on wait for the
 * event (wk_gate.h). */
void wk_lifecycle_outcome(wk_lifecycle *l, wk_chunk *c, const char *uid, const wk_push *push,
                          wk_delivery status, const wk_push_result *res);
/* The sender's done callback (CTX is the lifecycle). */
void wk_lifecycle_push_done(void *ctx, wk_push *push, const wk_push_result *res);
/* Checks C's pushes FIRST..FIRST+N-1 (those a part of the open's read
 * made) through the throttle in slices (the chunk's first one small), all
 * submitted at once: 0, or -1 when C was dropped. */
int wk_lifecycle_throttle(wk_lifecycle *l, wk_chunk *c, size_t first, size_t n);
/* The chunk's checked hook: a throttle slice answered. */
void wk_lifecycle_checked(wk_chunk *c, const wk_chunk_checked *res);
/* The chunk's flushed hook: a flush answered. */
void wk_lifecycle_flushed(wk_chunk *c, int rc, const char *errstr);

#endif
