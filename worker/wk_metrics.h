/* wk_metrics: herald-worker's Prometheus families and its HTTP endpoint.
 *
 * One registration table; every child the worker updates (per channel and
 * outcome, per backend, per bad-message reason, the label-free ones) is
 * looked up once at creation, so the loop thread, the reporter thread and
 * the sender update them lock-free.  wk_metrics_serve() starts an hr_httpd
 * with /metrics, /healthz and /readyz on worker.listen (or --listen).
 *
 * Thread hand-off: the HTTP handlers run on libmicrohttpd's threads and
 * read only the registry (thread-safe) and the atomics below, which the
 * loop thread (redis_ok, kafka_ok, assigned, kafka_lag) and the reporter
 * thread (mysql_ok) keep up to date; gauge callbacks (reporter queue depth)
 * take the reporter's own mutex. */
#ifndef WK_METRICS_H
#define WK_METRICS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "hr_config.h"
#include "hr_httpd.h"
#include "hr_httpd_probe.h"
#include "hr_metrics.h"

typedef enum wk_backend {
    WK_BACKEND_MYSQL,
    WK_BACKEND_REDIS,
    WK_BACKEND_KAFKA,
    WK_BACKEND_HTTP,
    WK__BACKENDS,
} wk_backend;

typedef enum wk_bad_reason {
    WK_BAD_DECODE,       /* not a valid chunk message */
    WK_BAD_UNKNOWN_TASK, /* no such task row */
    WK_BAD_INVALID_TASK, /* the task cannot be pushed */
    WK_BAD_NO_CHANNEL,   /* the task's channel is not in this worker's config */
    WK__BAD_REASONS,
} wk_bad_reason;

/* Why the reporter did not write a push_delivery row. */
typedef enum wk_drop_reason {
    WK_DROP_QUEUE_FULL, /* the ring stayed full (MySQL slow or down) */
    WK_DROP_REJECTED,   /* MySQL refused the row itself */
    WK__DROPS,
} wk_drop_reason;

/* Bad input worked around (herald_worker_anomalies_total). */
typedef enum wk_anomaly {
    WK_ANOMALY_INVALID_UID,     /* a chunk member that is not 1..INT64_MAX: dead-lettered */
    WK_ANOMALY_USER_HASH,       /* HGETALL user:<uid> answered an error: no attributes */
    WK_ANOMALY_HEADER_STRIPPED, /* control bytes removed from a rendered header value */
    WK__ANOMALIES,
} wk_anomaly;

/* herald_pushes_total, herald_push_latency_seconds and
 * herald_addresses_pruned_total of one channel. */
typedef struct wk_metrics_chan {
    hr_metrics_child *sent, *failed, *throttled, *retried, *unregistered, *latency;
    hr_metrics_child *opted_out, *suppressed; /* consent (docs/recipients.md) */
    hr_metrics_child *deferred;               /* put off to the recipient's quiet hours' end */
    hr_metrics_child *expired; /* recipients a worker dropped at their task's expire_at */
    hr_metrics_child *pruned;  /* dead addresses removed from both stores */
} wk_metrics_chan;

typedef struct wk_metrics {
    hr_metrics *reg;
    wk_metrics_chan *chans; /* one per cfg->channels, same order */
    size_t nchans;
    hr_metrics_child *due_to_delivery, *inflight, *retries, *throttled, *ratelimit_waits;
    hr_metrics_child *chunks_acked, *chunks_redelivered, *reporter_queue, *reporter_flush;
    hr_metrics_child *kafka_lag;
    hr_metrics_child *stalled_chunks, *stalls; /* the worker's pump watchdog */
    /* issue 34: chunks held through a failover (STALLED), chunks handed back */
    hr_metrics_child *chunks_stalled, *chunks_handed_back;
    hr_metrics_child *bad[WK__BAD_REASONS];
    hr_metrics_child *backend_errors[WK__BACKENDS];
    hr_metrics_child *reporter_dropped[WK__DROPS];
    hr_metrics_child *unaccounted; /* herald_recipients_unaccounted_total */
    /* herald_chunk_rows_missing_total: chunk ends given up (wk_reporter.h) */
    hr_metrics_child *chunk_rows_missing;
    hr_metrics_child *anomalies[WK__ANOMALIES];
    /* herald_events_gate_forced_total: chunk jobs let through before their
     * events were confirmed (wk_gate.h) */
    hr_metrics_child *gate_forced;
    atomic_bool redis_ok, mysql_ok, kafka_ok;
    atomic_bool assigned; /* the consumer is subscribed (assigned or waiting) */
    atomic_llong kafka_lag_sum;
    hr_httpd_ready ready;
    hr_httpd_route routes[HR_HTTPD_NPROBES];
    hr_httpd *httpd;
} wk_metrics;

/* The registry and children for CFG's channels; NULL when out of memory or
 * the table is refused (ERRSTR says why). */
wk_metrics *wk_metrics_new(const hr_config *cfg, char *errstr, size_t errlen);
/* Serves /metrics, /healthz, /readyz on LISTEN ("host:port"). */
int wk_metrics_serve(wk_metrics *m, const char *listen, char *errstr, size_t errlen);
/* Stops the server (waiting for running handlers); serving again is not
 * supported.  Call it before freeing what gauge callbacks read. */
void wk_metrics_stop(wk_metrics *m);
/* Stops the server (if any) and frees.  Accepts NULL. */
void wk_metrics_free(wk_metrics *m);

/* Reads a librdkafka statistics JSON document: stores the sum of
 * consumer_lag over the partitions this consumer holds (unknown lags, -1,
 * are skipped) and whether some broker is UP.  Returns 0, or -1 when the
 * document does not parse. */
int wk_metrics_kafka_stats(wk_metrics *m, const char *json, size_t len);

#endif
