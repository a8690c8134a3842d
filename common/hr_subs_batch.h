/* hr_subs_batch: hr_subs_sync for many claimed tasks at once, in one pass
 * of round trips (the dispatcher's reconciliation of small tasks). */
#ifndef HR_SUBS_BATCH_H
#define HR_SUBS_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "hr_subs.h"

/* One task of hr_subs_sync_claimed: its id in, its outcome out. */
typedef struct hr_subs_item {
    int64_t id;
    int result;          /* an hr_subs_result, or -1 (ERR) */
    int64_t added, seen; /* uids added to the set, subscription rows read */
    char err[256];
} hr_subs_item;

/* hr_subs_sync with CLAIMED true for the N tasks ITEMS (sorted by id
 * here), each with its own outcome, in one pass of round trips for all of
 * them instead of a dozen per task: the prepare locks and synced marks
 * (one pipeline), the epochs and how many rows they hold (one statement),
 * those rows (one statement, while they add up to at most O->batch; a
 * task with more reads its own pages), the locks renewed and the rows
 * added (a pipeline each), the synced marks and seqs set and the locks
 * released (one pipeline).  A task whose lock was found taken (by another
 * party, or by a retried SET of ours) and a task of several shards get
 * hr_subs_sync on their own.  What the reconciliation of many small tasks
 * due together costs (docs/performance.md "Many small tasks"). */
void hr_subs_sync_claimed(hr_mysql *m, hr_redis *r, hr_subs_item *items, size_t n,
                          const hr_subs_refill_opts *o);

#endif
