/* hr_purge: `heraldctl purge --finished-before DATE` — finished tasks
 * (done, failed, cancelled) that finished before a time, and everything
 * they left: the push_task row, its subscriptions, delivery log rows,
 * chunk and shard rows, and its Redis keys (every per-task key of each
 * shard, chunk and lease sets, its entries in the timer, cancel_held and
 * redriven sets).
 *
 * A task is taken by hr_state_purge, which checks that it is final and
 * finished before the time under the row's lock and swaps its push_task
 * row for a push_purge row in one transaction; so a task that is not
 * final, or is reopened by a repair at that moment, is never touched, and
 * once taken it is gone for every other reader.  Its other rows then go in
 * DELETEs of at most BATCH rows each (its delivery rows pruned to its
 * day's partition), each its own transaction, so no lock or undo log grows
 * with the task; its keys after them, and the push_purge row last.  A
 * purge cut short leaves push_purge rows, which the next purge finishes
 * first.  Then the closed subscription intervals of series that no
 * occurrence left can read (push_series_subscription_past: those that
 * ended an hour ago or more, before the claim of every occurrence of their
 * series still kept), in DELETEs of at most BATCH rows.  Retention of the
 * delivery log is not this: it drops whole day partitions (hr_dlog.h).
 *
 * Connections are the caller's; nothing here logs (O->each tells the
 * caller of every task). */
#ifndef HR_PURGE_H
#define HR_PURGE_H

#include <stdbool.h>
#include <stdint.h>

#include "hr_mysql.h"
#include "hr_redis.h"
#include "hr_state.h"

#define HR_PURGE_BATCH_MAX 100000

/* One task purged (or, in a dry run, that would be). */
typedef struct hr_purge_task {
    int64_t id;
    hr_task_state state;  /* HR_STATE__COUNT for a task a cut-short purge left */
    char finished_at[24]; /* "YYYY-MM-DDTHH:MM:SSZ", "" when left by a cut-short purge */
    int64_t subscriptions, deliveries, chunks, shard_rows; /* rows deleted (dry run: found) */
    int64_t keys;                                          /* Redis keys deleted (dry run: 0) */
    int64_t deletes; /* DELETE statements those rows took (each at most the batch) */
} hr_purge_task;

typedef struct hr_purge_opts {
    int64_t before_ms; /* tasks whose finished_at is before this (UTC ms) */
    int batch;         /* rows per DELETE, 1..HR_PURGE_BATCH_MAX */
    bool dry_run;      /* count the rows, change nothing */
    /* Called for every task after its rows went (NULL: not told). */
    void (*each)(void *ctx, const hr_purge_task *pt);
    void *ctx;
} hr_purge_opts;

typedef struct hr_purge_result {
    int64_t tasks;   /* tasks purged (dry run: found), cut-short ones included */
    int64_t resumed; /* of which a cut-short purge had left */
    int64_t subscriptions, deliveries, chunks, shard_rows, keys, deletes;
    int64_t past_intervals; /* closed series subscription intervals deleted (dry run: found) */
} hr_purge_result;

/* Purges as above into *OUT.  0, or -1 on a backend error (ERRSTR): what
 * was done stays done, and running it again finishes the rest. */
int hr_purge(hr_mysql *m, hr_redis *r, const hr_purge_opts *o, hr_purge_result *out, char *errstr,
             size_t errlen);

#endif
