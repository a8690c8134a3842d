/* dsp_metrics: herald-dispatcher's Prometheus families.
 *
 * One registration table; the label-free children and the fixed label
 * tuples (claim paths, backends) are looked up once here so the hot paths
 * update them without a lock.  herald_tasks{state} is set by the scanner
 * from one GROUP BY query; herald_api_requests_total{route,code} is looked
 * up per request by the API (a bounded set: routes x status codes). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsp_metrics.h"
#include "hr_log.h"
#include "hr_mysql_watch.h"
#include "hr_state.h"

/* Claim lag: due time to claim, seconds. */
static const double dsp_lag_buckets[] = {0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300};

/* Reconciliation after the claim, seconds. */
static const double dsp_rc_buckets[] = {0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120};

int dsp_metrics_new(dsp_metrics *m, char *errstr, size_t errlen)
{
    hr_metrics_family *published, *redelivered, *claimed, *lag, *waits, *errors;
    hr_metrics_family *rc_added, *rc_seconds, *unaccounted, *expired;
    hr_metrics_family *paced, *paced_rate, *warnings, *dlog_ahead, *dlog_dropped;
    hr_metrics_family *engaged, *refused;
    const hr_metrics_spec specs[] = {
        {&published, "herald_chunks_published_total", "Chunks whose first publish Kafka confirmed",
         HR_METRICS_COUNTER, NULL, NULL, 0},
        {&redelivered, "herald_chunks_redelivered_total",
         "Chunks published again (sweeper, resume)", HR_METRICS_COUNTER, NULL, NULL, 0},
        {&claimed, "herald_tasks_claimed_total", "Tasks this dispatcher claimed, by path",
         HR_METRICS_COUNTER, "via", NULL, 0},
        {&lag, "herald_claim_lag_seconds", "Due time to claim", HR_METRICS_HISTOGRAM, NULL,
         HR_METRICS_BUCKETS(dsp_lag_buckets)},
        {&waits, "herald_ratelimit_waits_total",
         "Chunks held back because the task's rate limit was spent", HR_METRICS_COUNTER, NULL, NULL,
         0},
        {&rc_added, "herald_reconcile_added_total",
         "Subscriptions the reconciliation after the claim found missing from Redis and added",
         HR_METRICS_COUNTER, NULL, NULL, 0},
        {&rc_seconds, "herald_reconcile_seconds",
         "Reconciliation of a claimed task's set with push_subscription", HR_METRICS_HISTOGRAM,
         NULL, HR_METRICS_BUCKETS(dsp_rc_buckets)},
        {&unaccounted, "herald_recipients_unaccounted_total",
         "Subscriptions with no outcome when their task finished (the task is failed)",
         HR_METRICS_COUNTER, NULL, NULL, 0},
        {&expired, "herald_recipients_expired_total",
         "Recipients the chunker counted expired at their task's expire_at (subs and chunks no "
         "worker held; workers count theirs in herald_pushes_total{outcome=\"expired\"})",
         HR_METRICS_COUNTER, NULL, NULL, 0},
        {&m->tasks, "herald_tasks", "Tasks by state (refreshed by the scanner)", HR_METRICS_GAUGE,
         "state", NULL, 0},
        {&errors, "herald_backend_errors_total", "Failed backend calls", HR_METRICS_COUNTER,
         "backend", NULL, 0},
        {&m->api_requests, "herald_api_requests_total", "API requests by route and status",
         HR_METRICS_COUNTER, "route,code", NULL, 0},
        {&paced, "herald_paced_tasks", "Owned tasks with a finish_by", HR_METRICS_GAUGE, NULL, NULL,
         0},
        {&paced_rate, "herald_paced_rate",
         "Sum of the planned rates (pushes/s) of the owned tasks with a finish_by",
         HR_METRICS_GAUGE, NULL, NULL, 0},
        {&warnings, "herald_task_warnings_total",
         "Admission control warnings written to last_warning, by kind", HR_METRICS_COUNTER, "kind",
         NULL, 0},
        {&dlog_ahead, "herald_delivery_partition_days_ahead",
         "Days after today the delivery log's newest day partition holds (7 when kept up; "
         "below 0 the new rows go into pmax)",
         HR_METRICS_GAUGE, NULL, NULL, 0},
        {&dlog_dropped, "herald_delivery_partitions_dropped_total",
         "Delivery log partitions this dispatcher dropped for the retention", HR_METRICS_COUNTER,
         NULL, NULL, 0},
        {&engaged, "herald_engagement_total",
         "Opens and clicks reported, by kind and result (counted: a recipient's first; repeat; "
         "lost: a click redirected while MySQL or Kafka failed)",
         HR_METRICS_COUNTER, "kind,result", NULL, 0},
        {&refused, "herald_track_refused_total",
         "Tracking links refused: malformed, or their signature did not match (a tampered URL)",
         HR_METRICS_COUNTER, NULL, NULL, 0},
    };
    static const char *const backends[DSP__BACKENDS] = {"mysql", "redis", "kafka"};
    static const char *const kinds[DSP__ENGAGE_KINDS] = {"opened", "clicked"};
    static const char *const results[DSP__ENGAGE_RESULTS] = {"counted", "repeat", "lost"};
    size_t i;

    m->reg = hr_metrics_new(0);
    if (m->reg == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    if (hr_metrics_register(m->reg, specs, sizeof specs / sizeof specs[0], errstr, errlen) < 0)
        return -1;
    m->chunks_published = hr_metrics_labels(published, NULL);
    m->chunks_redelivered = hr_metrics_labels(redelivered, NULL);
    m->ratelimit_waits = hr_metrics_labels(waits, NULL);
    m->claim_lag = hr_metrics_labels(lag, NULL);
    m->reconcile_added = hr_metrics_labels(rc_added, NULL);
    m->reconcile_seconds = hr_metrics_labels(rc_seconds, NULL);
    m->unaccounted = hr_metrics_labels(unaccounted, NULL);
    m->expired = hr_metrics_labels(expired, NULL);
    m->claimed_timer = hr_metrics_labels(claimed, "timer");
    m->claimed_poller = hr_metrics_labels(claimed, "poller");
    m->claimed_takeover = hr_metrics_labels(claimed, "takeover");
    m->paced_tasks = hr_metrics_labels(paced, NULL);
    m->paced_rate = hr_metrics_labels(paced_rate, NULL);
    m->dlog_days_ahead = hr_metrics_labels(dlog_ahead, NULL);
    m->dlog_dropped = hr_metrics_labels(dlog_dropped, NULL);
    for (i = 0; i < HR_PACE__WARN_KINDS; i++)
        m->task_warnings[i] = hr_metrics_labels(warnings, hr_pace_warn_name((hr_pace_warn_kind)i));
    for (i = 0; i < DSP__BACKENDS; i++)
        m->backend_errors[i] = hr_metrics_labels(errors, backends[i]);
    for (i = 0; i < DSP__ENGAGE_KINDS; i++)
        for (size_t k = 0; k < DSP__ENGAGE_RESULTS; k++)
            m->engaged[i][k] = hr_metrics_labels(engaged, kinds[i], results[k]);
    m->track_refused = hr_metrics_labels(refused, NULL);
    for (i = 0; i < HR_STATE__COUNT; i++)
        hr_metrics_set(hr_metrics_labels(m->tasks, hr_state_name((hr_task_state)i)), 0);
    /* herald_mysql_call_seconds, _slow_calls_total, _timeouts_total. */
    return hr_mysql_watch(m->reg, hr_mysql_slow_log, errstr, errlen);
}

void dsp_metrics_free(dsp_metrics *m)
{
    if (m->reg != NULL)
        hr_mysql_watch(NULL, NULL, NULL, 0);
    hr_metrics_free(m->reg);
    memset(m, 0, sizeof *m);
}

void dsp_metrics_tasks(dsp_metrics *m, const hr_mysql_rows *rows, unsigned states, int64_t *total)
{
    double count[HR_STATE__COUNT] = {0};
    hr_task_state s;
    size_t i;

    *total = 0;
    for (i = 0; i < rows->nrows; i++) {
        if (hr_state_parse(hr_mysql_cell(rows, i, 0), &s) == 0) {
            count[s] = strtod(hr_mysql_cell(rows, i, 1), NULL);
            *total += (int64_t)count[s];
        } else {
            hr_log_warn("task_state_unknown", "state=%s", hr_mysql_cell(rows, i, 0));
        }
    }
    for (i = 0; i < HR_STATE__COUNT; i++)
        if (states & (1u << i))
            hr_metrics_set(hr_metrics_labels(m->tasks, hr_state_name((hr_task_state)i)), count[i]);
}
