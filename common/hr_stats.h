/* hr_stats: a task's funnel and per-minute series (docs/api.md
 * "Funnels"): push_task_series (schemas/mysql/017_events.sql) written by
 * the workers' reporters (outcomes as they settle) and the dispatcher
 * (pulls, opens, clicks), read by GET /v1/tasks/{id}/stats, heraldctl
 * status and the console.
 *
 * The funnel is sent -> delivered -> opened -> clicked per channel:
 * sent is the task's counter (push_task.sent, exact), delivered its pulls
 * (a pull is a delivery the app confirmed; providers' delivery receipts
 * would join here), opened and clicked the series' sums, which are
 * written with their push_engagement rows and so count each recipient
 * once.  A task has one channel today, so the funnel has one row; the
 * series may name more (per variant, when those exist). */
#ifndef HR_STATS_H
#define HR_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "hr_mysql.h"
#include "hr_task.h"

#define HR_STATS_NAME 65 /* a channel's or outcome's name, with its NUL */
/* Minutes of series one read returns at most (the latest ones). */
#define HR_STATS_MINUTES_MAX 10080

/* A count to add to the series. */
typedef struct hr_stats_add {
    int64_t task;
    const char *channel;
    const char *outcome; /* an event type's name (hr_event.h) */
    int64_t minute_ms;   /* UTC ms, a multiple of 60000 */
    int64_t n;
} hr_stats_add;

/* Adds the N counts ROWS to push_task_series (upserts, in the caller's
 * transaction if any), one statement per channel and outcome among them.
 * 0, or -1 with ERRSTR. */
int hr_stats_add_rows(hr_mysql *m, const hr_stats_add *rows, size_t n, char *errstr, size_t errlen);

/* One point of the series. */
typedef struct hr_stats_point {
    char channel[HR_STATS_NAME];
    char outcome[HR_STATS_NAME];
    int64_t minute_ms;
    int64_t n;
} hr_stats_point;

/* The funnel of one channel. */
typedef struct hr_stats_funnel {
    char channel[HR_STATS_NAME];
    int64_t sent, delivered, opened, clicked;
} hr_stats_funnel;

typedef struct hr_stats {
    hr_stats_funnel funnel; /* the task's channel */
    hr_stats_point *points; /* ordered by channel, minute, outcome */
    size_t npoints;
} hr_stats;

/* Reads task T's funnel alone (its counters and two sums).  0, or -1
 * with ERRSTR. */
int hr_stats_funnel_load(hr_mysql *m, const hr_task *t, hr_stats_funnel *out, char *errstr,
                         size_t errlen);
/* Reads task T's funnel and its series (the last HR_STATS_MINUTES_MAX
 * minutes that have counts) into *OUT (free with hr_stats_free).  0, or
 * -1 with ERRSTR. */
int hr_stats_load(hr_mysql *m, const hr_task *t, hr_stats *out, char *errstr, size_t errlen);
/* Accepts a zeroed one. */
void hr_stats_free(hr_stats *s);

#endif
