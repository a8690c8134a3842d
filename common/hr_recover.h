/* hr_recover: rebuilds a task's Redis state from MySQL, the one
 * implementation behind `heraldctl recover TASK` and
 * POST /v1/tasks/{id}/recover (hr_recover.c says how, step by step).
 *
 * A task that a worker may still push (dispatched, paused, a failed one
 * with unaccounted recipients) is recovered only after its workers' last
 * reports are in: the call sleeps one lease renewal and then waits for the
 * delivery log to stand still, up to HR_RECOVER_QUIET_MAX_MS in all, and
 * up to 30 s more for the task's prepare lock.  Callers on a request
 * thread hold it that long.  Connections are the caller's; nothing here
 * logs or prints (o->waiting tells the caller about the wait). */
#ifndef HR_RECOVER_H
#define HR_RECOVER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "hr_mysql.h"
#include "hr_redis.h"
#include "hr_state.h"
#include "hr_task.h"

/* The longest wait for the workers' last reports. */
#define HR_RECOVER_QUIET_MAX_MS 60000

/* Second successes of hr_recover: nothing was changed, ERRSTR says why. */
enum {
    HR_RECOVER_REFUSED = 1, /* the state, expired, outside the delivery log's retention, or
                               chunks in flight: pause first, or nothing to do */
    HR_RECOVER_BUSY = 2,    /* a dispatcher prepares it, workers still report, its delivery
                               rows are still being copied into partitions: try again */
};

typedef struct hr_recover_opts {
    const char *token;    /* the prepare lock's holder, e.g. "heraldctl/<pid>" */
    int lease_ms;         /* worker.lease_ms */
    int64_t now_ms;       /* the caller's clock (UTC ms): a task past its expire_at is refused */
    const hr_config *cfg; /* the profiles' checks (the books' sync, hr_user.h) */
    /* dispatcher.delivery_retention_days: a task due before today - this
     * many days is refused, its delivery rows dropped or about to be
     * (hr_dlog_ready) */
    int retention_days;
    /* Called before the wait for the workers' last reports (NULL: not told). */
    void (*waiting)(void *ctx, int64_t id, int renewal_ms, int quiet_ms);
    void *ctx;
    /* Looked at every 100 ms of a wait (NULL: never): once true, the call
     * gives up before changing anything, HR_RECOVER_BUSY ("interrupted"),
     * so a daemon that stops does not wait out a recover. */
    const atomic_bool *stop;
} hr_recover_opts;

typedef struct hr_recover_result {
    int64_t subs;           /* recipients put back into the subs set */
    int64_t undelivered;    /* undelivered subscriptions read */
    int64_t dropped_chunks; /* chunk:* sets deleted */
    int64_t dropped_leases; /* lease:* keys deleted */
    int64_t seq;            /* seq restarts from here (0 for a scheduled task) */
    int64_t book_uids;      /* profile and address keys the books' syncs rewrote */
    bool books_reloaded;    /* a book had lost its synced mark: every uid reloaded */
    hr_task_state state;    /* the task's state afterwards */
} hr_recover_result;

/* The refusals of hr_recover that need no wait (the task's state, its
 * expiry, its delivery log outside RETENTION_DAYS or not yet copied into
 * partitions): 0 when T may be recovered at NOW_MS, HR_RECOVER_REFUSED or
 * HR_RECOVER_BUSY (ERRSTR says why), or -1.  hr_recover begins with it; the API answers them at
 * once, before it queues the recover as a job. */
int hr_recover_check(hr_mysql *m, const hr_task *t, int64_t now_ms, int retention_days,
                     char *errstr, size_t errlen);

/* Recovers task T.  0 with *OUT, HR_RECOVER_REFUSED or HR_RECOVER_BUSY
 * (ERRSTR says why), or -1 on a backend failure (ERRSTR; run it again). */
int hr_recover(hr_mysql *m, hr_redis *r, const hr_task *t, const hr_recover_opts *o,
               hr_recover_result *out, char *errstr, size_t errlen);

#endif
