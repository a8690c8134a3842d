/* wk_tally: the counts the reporter writes beside the delivery rows, kept
 * between its rounds: each task's counters (absolute values, the newest
 * wins), the outcomes per task, channel and minute (push_task_series), and
 * the tasks to mark failed; and their writes, inside the reporter's
 * transaction.  Not locked: the reporter holds its mutex around every call
 * but the writes, which get a tally taken out of its hands. */
#ifndef WK_TALLY_H
#define WK_TALLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hr_mysql.h"
#include "hr_vec.h"
#include "wk_event.h"

/* Task failures waiting to be written (each is re-reported by the next
 * chunk of the task when this overflows). */
#define WK_TALLY_FAILS 16

/* Counters of one task not yet written: sent .. suppressed absolute (-1 =
 * none), cancelled and expired absolute too, the largest seen (see
 * wk_reporter.h). */
typedef struct wk_task_delta {
    int64_t task, sent, failed, throttled, retried, unregistered, opted_out, suppressed;
    int64_t cancelled, expired;
    int shard; /* HR_SHARD_NONE, or the shard of a sharded task */
} wk_task_delta;

/* Recipients of a task that got an outcome in one minute: a row of
 * push_task_series to add (hr_stats.h). */
typedef struct wk_series {
    int64_t task, minute_ms, n;
    const char *channel; /* the config's */
    wk_delivery status;
} wk_series;

/* A task the worker cannot push, to be marked failed. */
typedef struct wk_task_fail {
    int64_t task;
    char why[256];
} wk_task_fail;

typedef struct wk_tally {
    HR_VEC(wk_task_delta) deltas;
    HR_VEC(wk_series) series;
    wk_task_fail fails[WK_TALLY_FAILS]; /* deduplicated by task; full = dropped */
    size_t nfails;
} wk_tally;

/* Adds task D's counters: D's absolute values replace the kept ones,
 * unless D is OLDER (a failed round given back), whose values only fill in
 * what nothing newer set.  0, or -1 out of memory. */
int wk_tally_merge(wk_tally *t, const wk_task_delta *d, bool older);
/* Adds N recipients of TASK that got STATUS on CHANNEL in the minute of
 * AT_MS.  0, or -1 out of memory. */
int wk_tally_count(wk_tally *t, int64_t task, const char *channel, wk_delivery status,
                   int64_t at_ms, int64_t n);
/* Queues the failure of TASK unless it is queued already or the list is
 * full. */
void wk_tally_add_fail(wk_tally *t, int64_t task, const char *why);
/* Gives OLDER (a round whose write failed) back to T, under what T got
 * meanwhile, and empties OLDER; what memory refuses is logged as lost. */
void wk_tally_giveback(wk_tally *t, wk_tally *older);
bool wk_tally_empty(const wk_tally *t);
/* Empties T and frees what it holds. */
void wk_tally_clear(wk_tally *t);

/* The writes, in the caller's transaction on M: the counters (push_task,
 * or a sharded task's push_task_shard), the series rows, the failures.
 * 0, or -1 (ERRSTR). */
int wk_tally_write_counters(const wk_tally *t, hr_mysql *m, char *errstr, size_t errlen);
int wk_tally_write_series(const wk_tally *t, hr_mysql *m, char *errstr, size_t errlen);
int wk_tally_write_fails(const wk_tally *t, hr_mysql *m, char *errstr, size_t errlen);

#endif
