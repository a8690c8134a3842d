/* hr_finish: the end of a campaign, `dispatched` -> `done`, shared by the
 * dispatcher's sweeper and the worker's reporter.
 *
 * `done` means every subscription is accounted for: the outcomes (sent,
 * failed, throttled, pulled, cancelled, unregistered, expired) add up to at least the task's
 * recipients (push_subscription rows, and an occurrence's series
 * subscribers at its claim: HR_SUBS_COUNT).  When they do not (Redis lost recipients, a set
 * was flushed, a bug), the task does not claim success: it becomes
 * `failed` with `unaccounted` = the gap and a last_error that says so, and
 * the caller counts herald_recipients_unaccounted_total.  A recipient
 * pushed twice counts twice, so a gap can hide behind duplicates; the
 * check never reports a gap that is not there. */
#ifndef HR_FINISH_H
#define HR_FINISH_H

#include <stdbool.h>
#include <stdint.h>

#include "hr_mysql.h"
#include "hr_pipe.h"
#include "hr_progress.h"
#include "hr_redis.h"
#include "hr_shard.h"
#include "hr_state.h"

/* Reads the stats hash of shard SHARD of task ID (0 or HR_SHARD_NONE for a
 * task of one shard) into *OUT (0 for a field it lacks).  0 or -1. */
int hr_finish_read_stats(hr_redis *r, int64_t id, int shard, hr_outcomes *out, char *errstr,
                         size_t errlen);
/* The same pipelined: queues the HMGET on PIPE (keys with PREFIX); 0, or
 * -1 out of memory.  hr_finish_stats_reply reads its answer (REPLY,
 * freed) into *OUT; -1 when there is none. */
int hr_finish_stats_queue(hr_pipe *pipe, const char *prefix, int64_t id, int shard);
int hr_finish_stats_reply(redisReply *reply, hr_outcomes *out);

/* One task's counters for hr_finish_raise_batch. */
typedef struct hr_finish_raise_row {
    int64_t id;
    hr_outcomes stats; /* absolute values, each -1 = leave it */
} hr_finish_raise_row;

/* Raises the MySQL outcome counters of the N tasks ROWS (ids unique, any
 * order) to at least their STATS, in one statement: what the worker's
 * reporter writes, a flush's tasks at once.  0 or -1. */
int hr_finish_raise_batch(hr_mysql *m, const hr_finish_raise_row *rows, size_t n, char *errstr,
                          size_t errlen);

/* The same for the stats hash of shard SHARD of a task of several shards
 * (docs/architecture.md "Sharded tasks"): its push_task_shard row is raised
 * to STATS, then push_task's counters to the sum of the task's rows.  The
 * task row is locked first, so writers of one task's shards never
 * deadlock on each other's rows; inside the caller's transaction if it has
 * one.  A row the reconciliation has not written yet (a pull or a cancel
 * before the claim) is written `waiting`, which no dispatcher claims.
 * SHARD HR_SHARD_NONE raises push_task's own counters.  0 or -1. */
int hr_finish_raise_shard(hr_mysql *m, int64_t id, int shard, const hr_outcomes *stats,
                          char *errstr, size_t errlen);

/* Adds DELTA (may be negative; a counter never goes below 0) to OUTCOME's
 * counter (HR_OUTCOME_PULLED: the pull's +1, HR_OUTCOME_FAILED: redrive's
 * minus what it moved) of shard SHARD of task ID (HR_SHARD_NONE: of
 * push_task itself), then, for a shard, raises push_task's to the rows' sum,
 * in a transaction of its own.  0 or -1. */
int hr_finish_add(hr_mysql *m, int64_t id, int shard, hr_outcome outcome, int64_t delta,
                  char *errstr, size_t errlen);

/* hr_finish_drop's SEQ for the task's own sets rather than a chunk. */
#define HR_FINISH_SUBS (-1) /* subs */
#define HR_FINISH_WAIT (-2) /* the wait ZSET of a local-time or windowed task */

/* The uids a drop took (events on: each becomes an event), UIDS[N], valid
 * during the call. */
typedef void (*hr_finish_dropped_fn)(void *ctx, const uint64_t *uids, size_t n);
/* Members a drop that reports them takes per drop_set.lua call. */
#define HR_FINISH_DROP_SLICE 5000

/* drop_set.lua: the recipients left in task ID's subs or wait set (SEQ
 * HR_FINISH_SUBS / HR_FINISH_WAIT) or in its chunk SEQ, of shard SHARD (0 for
 * a task of one shard), are dropped and counted as OUTCOME (HR_OUTCOME_CANCELLED or
 * HR_OUTCOME_EXPIRED).  OWNER is the calling worker's id (its lease goes
 * with the chunk), NULL for a dispatcher.  *N gets the number this call
 * dropped, -1 when another process holds the chunk's lease (nothing
 * changed); *TOTAL the stats hash's counter of OUTCOME after the call, the
 * value MySQL gets (hr_finish_count).  With EACH (not NULL) the set goes
 * in slices of HR_FINISH_DROP_SLICE, and EACH(CTX, ...) gets each slice's
 * uids once it is dropped (a member that is no uid is skipped: the worker
 * dead-letters those at open).  0 or -1 (after a failed slice, *N and
 * *TOTAL hold what the slices before it did). */
int hr_finish_drop(hr_redis *r, int64_t id, int shard, int64_t seq, hr_outcome outcome,
                   const char *owner, hr_finish_dropped_fn each, void *ctx, int64_t *n,
                   int64_t *total, char *errstr, size_t errlen);

/* push_task.<OUTCOME> := TOTAL (a stats hash counter hr_finish_drop
 * answered), never lower: every dropper writes the same counter this way,
 * so concurrent drops never add up wrong.  For shard SHARD of a task of
 * several shards (not HR_SHARD_NONE) the shard's row gets TOTAL and
 * push_task the rows' sum, in a transaction of its own.  0 or -1. */
int hr_finish_count(hr_mysql *m, int64_t id, int shard, hr_outcome outcome, int64_t total,
                    char *errstr, size_t errlen);

typedef struct hr_finish_result {
    int64_t
        subscriptions; /* recipients: push_subscription rows and a series occurrence's series subscribers (HR_SUBS_COUNT) */
    int64_t unaccounted; /* 0 when every subscription has an outcome */
    hr_task_state state; /* done, failed or cancelled */
} hr_finish_result;

/* One task of hr_finish_tasks: its id and stats in, its outcome out. */
typedef struct hr_finish_item {
    int64_t id;
    hr_outcomes stats; /* what its MySQL counters are raised to first (absolute
                            values from the stats hash; HR_OUTCOMES_UNKNOWN: nothing) */
    bool ended;        /* this call ended it: FIN says how */
    hr_finish_result fin;
} hr_finish_item;

/* Ends those of the N tasks ITEMS (ids unique; sorted by id here) that
 * are `dispatched`, inside the caller's transaction: their counters raised
 * to STATS, total capped at the subscriptions, then `done` when the
 * counters cover every subscription, else `failed` with unaccounted and
 * last_error; `cancelled` either way when its control is cancel (workers
 * cancelled what was left before a dispatcher's control scan did).  The rows found dispatched are locked first (hr_state.h), so
 * ENDED tells exactly which this call ended when other dispatchers and
 * workers try at the same time.  One statement when none is dispatched
 * (the subscriptions are counted with it), four more when some are; one
 * call serves a reporter's flush or a sweeper's page.  0, or -1 (ERRSTR;
 * none ended). */
int hr_finish_tasks(hr_mysql *m, hr_finish_item *items, size_t n, char *errstr, size_t errlen);

#endif
