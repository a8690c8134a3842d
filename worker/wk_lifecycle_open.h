/* wk_lifecycle_open: a received message becomes a chunk — decoded, its
 * task loaded, the chunk made and opened (control key, lease, members, the
 * addresses of an addressed channel) — or its offset is settled at once;
 * the open's answer halts the chunk, waits for a foreign lease, closes an
 * empty set, or starts its pushes.  Loop thread only. */
#ifndef WK_LIFECYCLE_OPEN_H
#define WK_LIFECYCLE_OPEN_H

#include <stddef.h>
#include <stdint.h>

#include "wk_inbox.h"
#include "wk_lifecycle.h"

/* The task rows of the N messages MSGS (received, not started yet) that
 * the task cache lacks, loaded in one statement (wk_task_prefetch). */
void wk_lifecycle_prefetch(wk_lifecycle *l, const wk_inbox_msg *msgs, size_t n);
/* A message received at PARTITION/OFFSET with PAYLOAD: becomes an open
 * chunk, or its offset is settled at once. */
void wk_lifecycle_intake(wk_lifecycle *l, int32_t partition, int64_t offset, const void *payload,
                         size_t len);
/* Submits C's open (control key, lease, members); its answer goes on in
 * the lifecycle, which waits for a foreign lease by calling this again
 * from the control timer.  May unlink C (when the job cannot be
 * submitted). */
void wk_lifecycle_open(wk_lifecycle *l, wk_chunk *c);

#endif
