/* dsp_pace: finish-by pacing and admission control (docs/scheduling.md);
 * the arithmetic is common/hr_pace.c.
 *
 * Pacing: a task with a finish_by has its rate derived at every grant by
 * the limiter's script (common/lua/ratelimit.lua through
 * hr_ratelimit_take_paced), at the owner's chunking (dsp_grant) and at
 * every worker's pushes alike, from what is left (recipients not chunked
 * + chunked and not settled) and the time left, capped by its effective
 * rate_limit; so a plan that lags (a slow provider, a restart) corrects
 * itself, and the workers keep pacing the last chunks after the owner let
 * the task go.  The rate in force is in the stats hash (`planned_rate`,
 * for the API) and, summed over the owned tasks, in herald_paced_rate.
 *
 * Admission (API threads and the background scan, each with its own
 * connection): the estimate of hr_pace_estimate_run from the task's
 * subscriptions, its channel's budget (the lower of rate_limit and the
 * configured `throughput`) and the other unfinished tasks of the channel
 * due within the hour before or HR_PACE_WINDOW_MS after it; its text goes
 * to push_task.last_warning when it changed, and the first warning of a
 * task is counted in herald_task_warnings_total{kind}.  A warning never holds the task. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsp.h"
#include "hr_keys.h"
#include "hr_log.h"
#include "hr_pace.h"

/* Scheduled tasks due this long before the admitted one may still run
 * with it (a late claim); running ones count whatever their due time. */
#define DSP_PACE_LOOKBACK_MS ((int64_t)3600 * 1000)

void dsp_pace_gauges(dsp *d)
{
    double rate = 0, tasks = 0;

    for (size_t i = 0; i < d->tasks.n; i++) {
        if (d->tasks.v[i]->finish_ms <= 0)
            continue;
        tasks++;
        rate += (double)d->tasks.v[i]->rate_limit;
    }
    hr_metrics_set(d->met.paced_tasks, tasks);
    hr_metrics_set(d->met.paced_rate, rate);
}

/* The channel's budget for the estimate: the lower of its rate_limit and
 * its measured throughput (0 = unlimited). */
static int64_t dsp_pace_capacity(const hr_channel *ch)
{
    int64_t limit = ch->rate_limit, tp = ch->throughput;

    if (limit > 0 && tp > 0)
        return limit < tp ? limit : tp;
    return limit > 0 ? limit : tp;
}

/* LOAD's own cap: its rate_limit, lowered to the rate a finish_by plans. */
static int64_t dsp_pace_cap(int64_t rate_limit, int64_t size, int64_t start_ms, int64_t finish_ms)
{
    if (finish_ms <= 0)
        return rate_limit;
    return hr_pace_rate(size, start_ms, finish_ms, rate_limit);
}

/* Loads [1..] of the estimate: the channel's other unfinished tasks due
 * around T, their recipients left.  The count of loads, or -1. */
static int dsp_pace_others(hr_mysql *m, const hr_task *t, int64_t now, hr_pace_load *loads,
                           size_t max, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_STR(t->channel), HR_P_I64(t->id),
                                HR_P_I64(t->due_ms + HR_PACE_WINDOW_MS),
                                HR_P_I64(t->due_ms - DSP_PACE_LOOKBACK_MS), HR_P_I64((int64_t)max)};
    hr_mysql_rows *rows = NULL;
    size_t n = 0;

    if (hr_mysql_query(
            m,
            "SELECT CAST(ROUND(UNIX_TIMESTAMP(t.due_at) * 1000) AS SIGNED), "
            "GREATEST(0, (SELECT COUNT(*) FROM push_subscription s WHERE s.task_id = t.id) "
            "- t.sent - t.failed - t.throttled - t.pulled - t.cancelled - t.unregistered), "
            "t.rate_limit, t.priority, "
            "COALESCE(CAST(ROUND(UNIX_TIMESTAMP(t.finish_by) * 1000) AS SIGNED), -1) "
            "FROM push_task t WHERE t.channel = ? AND t.id <> ? AND t.due_at IS NOT NULL "
            "AND t.control = 'run' AND t.due_at <= FROM_UNIXTIME(? / 1000) "
            "AND (t.state IN ('dispatching', 'dispatched') OR "
            "(t.state = 'scheduled' AND t.due_at >= FROM_UNIXTIME(? / 1000))) "
            "ORDER BY t.due_at DESC LIMIT ?",
            p, 5, &rows, errstr, errlen) < 0)
        return -1;
    for (size_t i = 0; i < rows->nrows && n < max; i++) {
        hr_pace_load *l = &loads[n++];
        hr_priority prio;
        int64_t finish = strtoll(hr_mysql_cell(rows, i, 4), NULL, 10);

        l->due_ms = strtoll(hr_mysql_cell(rows, i, 0), NULL, 10);
        if (l->due_ms < now)
            l->due_ms = now; /* overdue or running: it takes its share from now */
        l->size = strtoll(hr_mysql_cell(rows, i, 1), NULL, 10);
        (void)hr_priority_parse(hr_mysql_cell(rows, i, 3), &prio);
        l->weight = hr_pace_weight(prio);
        l->cap =
            dsp_pace_cap(strtoll(hr_mysql_cell(rows, i, 2), NULL, 10), l->size, l->due_ms, finish);
    }
    hr_mysql_rows_free(rows);
    return (int)n;
}

int dsp_admit(dsp *d, hr_mysql *m, const hr_task *t, int64_t now, char *errstr, size_t errlen)
{
    const hr_channel *ch = hr_config_channel(d->cfg, t->channel);
    const hr_mysql_param pc[] = {HR_P_I64(t->id)};
    hr_pace_load loads[HR_PACE_MAX_LOADS];
    hr_pace_estimate e;
    hr_mysql_rows *rows = NULL;
    char text[1000];
    uint64_t changed = 0;
    unsigned kinds;
    int others;

    if (ch == NULL || t->due_ms < 0)
        return 0; /* hr_task_validate refuses it */
    if (hr_mysql_query(m, "SELECT COUNT(*) FROM push_subscription WHERE task_id = ?", pc, 1, &rows,
                       errstr, errlen) < 0)
        return -1;
    loads[0] = (hr_pace_load){.due_ms = t->due_ms > now ? t->due_ms : now,
                              .size = strtoll(hr_mysql_cell(rows, 0, 0), NULL, 10),
                              .cap = t->rate_limit,
                              .weight = hr_pace_weight(t->priority)};
    hr_mysql_rows_free(rows);
    others = dsp_pace_others(m, t, now, loads + 1, HR_PACE_MAX_LOADS - 1, errstr, errlen);
    if (others < 0)
        return -1;
    hr_pace_estimate_run(loads, (size_t)others + 1, dsp_pace_capacity(ch), &e);
    /* expire_at: the hook for the expiry column (-1 until it exists). */
    kinds =
        hr_pace_warning(&e, ch->name, dsp_pace_capacity(ch), t->finish_ms, -1, text, sizeof text);
    {
        const hr_mysql_param p[] = {kinds ? HR_P_STR(text) : HR_P_NULL, HR_P_I64(t->id),
                                    kinds ? HR_P_STR(text) : HR_P_NULL};

        if (hr_mysql_exec(m,
                          "UPDATE push_task SET last_warning = ? "
                          "WHERE id = ? AND NOT (last_warning <=> ?)",
                          p, 3, &changed, NULL, NULL, errstr, errlen) < 0)
            return -1;
    }
    /* Counted once per task that had none: a warning whose estimate moved
     * (another task came, a PATCH) is rewritten, not counted again. */
    if (changed > 0 && kinds != 0 && t->last_warning == NULL) {
        for (int k = 0; k < HR_PACE__WARN_KINDS; k++)
            if (kinds & (1u << k))
                hr_metrics_inc(d->met.task_warnings[k]);
        hr_log_warn("task_warning", "task=%" PRId64 " warning=%s", t->id, text);
    }
    return 0;
}
