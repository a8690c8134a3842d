/* dsp_metrics: herald-dispatcher's Prometheus families and the handles the
 * modules update (dsp_metrics.c registers them; struct dsp holds one
 * dsp_metrics).  The handles are looked up at start-up and updated
 * lock-free from any thread. */
#ifndef DSP_METRICS_H
#define DSP_METRICS_H

#include "hr_metrics.h"
#include "hr_mysql.h"
#include "hr_pace.h"

/* The backends whose health the dispatcher tracks (dsp_conn.c) and whose
 * failed calls herald_backend_errors_total{backend} counts. */
typedef enum dsp_backend { DSP_MYSQL, DSP_REDIS, DSP_KAFKA, DSP__BACKENDS } dsp_backend;

/* The engagements counted, and what became of a request reporting one. */
typedef enum dsp_engage_kind {
    DSP_ENGAGE_OPENED,
    DSP_ENGAGE_CLICKED,
    DSP__ENGAGE_KINDS
} dsp_engage_kind;
typedef enum dsp_engage_result {
    DSP_ENGAGE_COUNTED,
    DSP_ENGAGE_REPEAT,
    DSP_ENGAGE_LOST,
    DSP__ENGAGE_RESULTS
} dsp_engage_result;

/* The dispatcher's metric handles (registered by dsp_metrics_new). */
typedef struct dsp_metrics {
    hr_metrics *reg;
    hr_metrics_child *chunks_published, *chunks_redelivered, *ratelimit_waits;
    hr_metrics_child *claimed_timer, *claimed_poller, *claimed_takeover;
    hr_metrics_child *claim_lag;
    hr_metrics_child *reconcile_added, *reconcile_seconds, *unaccounted;
    hr_metrics_child *expired; /* herald_recipients_expired_total */
    hr_metrics_child *backend_errors[DSP__BACKENDS];
    hr_metrics_family *tasks;        /* herald_tasks{state} */
    hr_metrics_family *api_requests; /* herald_api_requests_total{route,code} */
    /* pacing and admission (dsp_owned.c's gauges, dsp_pace.c's warnings) */
    hr_metrics_child *paced_tasks, *paced_rate;
    hr_metrics_child *task_warnings[HR_PACE__WARN_KINDS];
    /* the delivery log's partitions (dsp_dlog.c) */
    hr_metrics_child *dlog_days_ahead, *dlog_dropped;
    /* engagement (dsp_api_track.c): herald_engagement_total{kind,result}:
     * counted (a recipient's first), repeat (counted before), lost (a
     * click redirected while MySQL or Kafka failed); and
     * herald_track_refused_total: links whose signature did not match */
    hr_metrics_child *engaged[DSP__ENGAGE_KINDS][DSP__ENGAGE_RESULTS];
    hr_metrics_child *track_refused;
} dsp_metrics;

/* Registers the families into a new registry in M.  0, or -1 (ERRSTR). */
int dsp_metrics_new(dsp_metrics *m, char *errstr, size_t errlen);
void dsp_metrics_free(dsp_metrics *m);
/* Sets herald_tasks{state} of the states in STATES (bits 1u << state) from
 * a "state, count" result of them (a state of STATES not in it becomes 0);
 * the count of them all into *TOTAL. */
void dsp_metrics_tasks(dsp_metrics *m, const hr_mysql_rows *rows, unsigned states, int64_t *total);

#endif
