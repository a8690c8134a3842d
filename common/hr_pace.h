/* hr_pace: the arithmetic of finish-by pacing and admission control
 * (docs/scheduling.md).  Pure: no I/O, the clock is a parameter, so the
 * unit tests drive it with fake times.
 *
 * Pacing: a task with a finish_by runs at the rate that ends its remaining
 * recipients by then (hr_pace_rate; common/lua/ratelimit.lua applies the
 * same formula at every grant, and admission control uses this one for
 * the paced tasks it simulates); the plan a console draws
 * against the actual progress is the straight line from due_at (nothing
 * done) to finish_by (everything done): hr_pace_planned_done.
 *
 * Admission: hr_pace_estimate simulates a channel's budget shared by
 * weight between the tasks due around the same time (a fluid model: each
 * task gets its weighted share, capped by its own rate, what it cannot use
 * going to the others, as share.lua does) and says when the task being
 * admitted ends and whether it has to share an overbooked budget;
 * hr_pace_warning turns that into the task's last_warning. */
#ifndef HR_PACE_H
#define HR_PACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hr_task.h"

#define HR_PACE_WINDOW_MS 60000 /* admission: tasks due this close share a budget */
#define HR_PACE_MAX_LOADS 64    /* admission: tasks simulated (the nearest due) */
/* Admission: scheduled tasks due this long before the estimated one may
 * still run with it (a late claim); running ones count whatever their due
 * time. */
#define HR_PACE_LOOKBACK_MS ((int64_t)3600 * 1000)

/* A task's weight in its channel's budget: high 2, normal 1. */
int hr_pace_weight(hr_priority p);

/* Pushes/s that end REMAINING recipients by FINISH_MS seen at NOW_MS:
 * ceil(remaining / (seconds left + 1)) (the limiter's seconds start their
 * pushes at once, so the seconds at both ends count), at least 1, at most
 * CAP (0 = no cap).
 * Once FINISH_MS has passed: CAP, or 0 (unlimited) without one. */
int64_t hr_pace_rate(int64_t remaining, int64_t now_ms, int64_t finish_ms, int64_t cap);

/* Recipients the plan has done by NOW_MS: TOTAL spread evenly from DUE_MS
 * to FINISH_MS (0 before, TOTAL after). */
int64_t hr_pace_planned_done(int64_t total, int64_t due_ms, int64_t finish_ms, int64_t now_ms);

/* One task on the channel, for the estimate. */
typedef struct hr_pace_load {
    int64_t due_ms;
    int64_t size; /* recipients left */
    int64_t cap;  /* its own pushes/s (rate_limit), 0 = none */
    int64_t weight;
} hr_pace_load;

/* A task that may share the estimated one's budget, as read from its row. */
typedef struct hr_pace_row {
    int64_t id;
    hr_pace_load load; /* size: published and not settled (its set's size comes on top) */
    int64_t finish_ms; /* finish_by, -1 = none */
    int shards;
    bool scheduled; /* else running (dispatching or dispatched) */
} hr_pace_row;

/* Which of ROWS[0..N) (sorted by due time, the latest first) share the
 * budget of task ID due at DUE_MS: every other one due at most
 * HR_PACE_WINDOW_MS after it, a scheduled one only when due at most
 * HR_PACE_LOOKBACK_MS before it.  The first MAX of them (the latest due)
 * go into PICK as indices of ROWS; returns their count.  Whether a scan
 * reads a channel's rows once for all of its estimates or an estimate its
 * own, the same rows are picked (dsp_pace.c). */
size_t hr_pace_neighbours(const hr_pace_row *rows, size_t n, int64_t id, int64_t due_ms,
                          size_t *pick, size_t max);

typedef struct hr_pace_estimate {
    int64_t finish_ms; /* when LOADS[0] ends; -1 = not known (no budget, no cap) */
    bool overbooked;   /* it shares a budget its sharers' wishes exceed */
    int sharers;       /* the most tasks running with it at once, itself included */
    int64_t at_ms;     /* when it first shares the budget (overbooked) */
} hr_pace_estimate;

/* Estimates LOADS[0] among LOADS[0..N) on a channel whose budget is
 * CAPACITY pushes/s (the lower of its rate_limit and its measured
 * throughput; 0 = unlimited). */
void hr_pace_estimate_run(const hr_pace_load *loads, size_t n, int64_t capacity,
                          hr_pace_estimate *out);

/* What admission control warns about (a bit each; herald_task_warnings_total{kind}). */
typedef enum hr_pace_warn_kind {
    HR_PACE_WARN_OVERBOOKED,
    HR_PACE_WARN_FINISH_BY,
    HR_PACE_WARN_EXPIRE_AT,
    HR_PACE__WARN_KINDS
} hr_pace_warn_kind;

const char *hr_pace_warn_name(hr_pace_warn_kind k);

/* The warning of estimate E for a task on CHANNEL with budget CAPACITY,
 * FINISH_MS its finish_by and EXPIRE_MS its expire_at (-1 = none each;
 * expire_at is the hook for the expiry column) into OUT; returns the bit
 * set of its kinds (1 << hr_pace_warn_kind), 0 with OUT "" when nothing is
 * to warn about. */
unsigned hr_pace_warning(const hr_pace_estimate *e, const char *channel, int64_t capacity,
                         int64_t finish_ms, int64_t expire_ms, char *out, size_t len);

#endif
