/* hr_progress: the one definition of a task's outcome counts and progress,
 * used alike by the API (GET /v1/tasks/{id}), `heraldctl status` and the
 * tests; docs/api.md ("Progress") says the same in words.
 *
 * Every subscribed recipient ends in exactly one outcome, counted once by
 * the Lua script that takes it out of a set (subs, a chunk):
 *   sent, failed (dead letter), throttled, pulled, cancelled, unregistered
 *   (no live address on the task's channel: every one the provider called
 *   dead was pruned, or there was none), expired (not pushed by the task's
 *   expire_at), opted_out (the user opted out of the task's category or
 *   channel type), suppressed (every address of the uid on the channel is
 *   on the suppression list; docs/recipients.md)
 * and, only for a finished task, `unaccounted`: subscriptions no counter
 * settled (a recipient lost with Redis, a task that failed before
 * chunking, for a moment after a cancel what a worker is still
 * cancelling).  `shadowed` (sent although a shadow-mode throttle would
 * have held it) and `retried` (attempts, not recipients) are reported but
 * are not outcomes.  Also counted, and shown: `over`, outcomes beyond the
 * subscriptions (a recipient counted twice; 0 unless something is wrong).
 *   done  = the sum of the outcomes
 *   total = the task's subscriptions (push_subscription, which the
 *           database freezes once the task is claimed); when they are not
 *           known, recipients published + not chunked yet + pulled
 *   ratio = done / total clamped to [0, 1]; exactly 1 once the task is
 *           finished (done, cancelled, failed), since then unaccounted
 *           makes up the difference.
 * Each counter is the larger of MySQL's and the live stats hash's: workers
 * raise MySQL to the hash's values (GREATEST), so the hash is ahead while
 * the task runs and MySQL is what survives a lost Redis.  Pure: no I/O. */
#ifndef HR_PROGRESS_H
#define HR_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

/* The outcomes in one fixed order (reports, tests). */
typedef enum hr_outcome {
    HR_OUTCOME_SENT,
    HR_OUTCOME_FAILED,
    HR_OUTCOME_THROTTLED,
    HR_OUTCOME_PULLED,
    HR_OUTCOME_CANCELLED,
    HR_OUTCOME_UNREGISTERED,
    HR_OUTCOME_EXPIRED,    /* not pushed by the task's expire_at */
    HR_OUTCOME_OPTED_OUT,  /* the user opted out (016_categories.sql) */
    HR_OUTCOME_SUPPRESSED, /* every address suppressed (015_suppression.sql) */
    HR_OUTCOME_UNACCOUNTED,
    HR__OUTCOMES
} hr_outcome;

/* A task's outcome counters as a row or a stats hash holds them (the
 * finish raises MySQL's to them, hr_finish.h); -1 = not known (MySQL's
 * value stands). */
typedef struct hr_outcomes {
    int64_t sent, failed, throttled, pulled, cancelled, retried, unregistered;
    int64_t expired;               /* expiry (009_expiry.sql) */
    int64_t opted_out, suppressed; /* consent (016_categories.sql) */
} hr_outcomes;

#define HR_OUTCOMES_UNKNOWN ((hr_outcomes){-1, -1, -1, -1, -1, -1, -1, -1, -1, -1})

typedef struct hr_progress_in {
    /* the settled outcomes (not unaccounted), best known: hr_progress_merge */
    int64_t outcome[HR_OUTCOME_UNACCOUNTED];
    int64_t subscriptions; /* COUNT(push_subscription), -1 = not known */
    int64_t published;     /* recipients chunked (push_task.total / stats.published), >= 0 */
    int64_t subs_left;     /* SCARD subs, -1 = not known */
    bool finished;         /* state done, cancelled or failed */
} hr_progress_in;

typedef struct hr_progress {
    int64_t outcome[HR__OUTCOMES]; /* the inputs plus unaccounted */
    int64_t done, total;
    int64_t over; /* settled beyond the known subscriptions: counted twice (0 normally) */
    double ratio; /* [0, 1] */
} hr_progress;

/* The counter a report should show: the larger of MySQL's (MYSQL) and the
 * live stats hash's (LIVE, -1 = not known). */
int64_t hr_progress_merge(int64_t mysql, int64_t live);

/* The name of outcome O ("sent", ... "unaccounted"). */
const char *hr_progress_outcome_name(hr_outcome o);

/* Progress from IN into *OUT. */
void hr_progress_compute(const hr_progress_in *in, hr_progress *out);

#endif
