/* wk_metrics: the worker's families, children and HTTP endpoint (see
 * wk_metrics.h). */
#include "wk_metrics.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_insecure.h"
#include "hr_mysql.h"
#include "hr_mysql_watch.h"

/* Reporter transaction time, seconds. */
static const double wk_metrics_flush_buckets[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                  0.1,   0.25,   0.5,   1,    2.5,   5};

static double wk_metrics_lag(void *ctx)
{
    const wk_metrics *m = ctx;

    return (double)atomic_load(&m->kafka_lag_sum);
}

static void wk_metrics_check(hr_buf *out, bool *first, const char *name, bool ok, const char *bad)
{
    char item[96];
    int n =
        snprintf(item, sizeof item, "%s\"%s\":\"%s\"", *first ? "" : ",", name, ok ? "ok" : bad);

    hr_buf_append(out, item, (size_t)n);
    *first = false;
}

/* /readyz: Redis, MySQL (the reporter's connection) and Kafka healthy, the
 * consumer subscribed. */
static bool wk_metrics_ready(void *ctx, hr_buf *out)
{
    wk_metrics *m = ctx;
    bool redis = atomic_load(&m->redis_ok), mysql = atomic_load(&m->mysql_ok);
    bool kafka = atomic_load(&m->kafka_ok), assigned = atomic_load(&m->assigned);
    bool first = true;

    hr_buf_append(out, "{", 1);
    wk_metrics_check(out, &first, "redis", redis, "down");
    wk_metrics_check(out, &first, "mysql", mysql, "down");
    wk_metrics_check(out, &first, "kafka", kafka, "down");
    wk_metrics_check(out, &first, "consumer", assigned, "not subscribed");
    hr_buf_append(out, "}", 1);
    return redis && mysql && kafka && assigned;
}

wk_metrics *wk_metrics_new(const hr_config *cfg, char *errstr, size_t errlen)
{
    wk_metrics *m = calloc(1, sizeof *m);
    hr_metrics_family *pushes, *latency, *due, *inflight, *retries, *throttled, *waits, *acked;
    hr_metrics_family *redelivered, *bad, *queue, *flush, *lag, *errors, *dropped, *anomalies;
    hr_metrics_family *unaccounted, *pruned, *rows_missing, *deferred;
    hr_metrics_family *stalled, *stalls, *waits_failover, *handed_back, *forced;
    const hr_metrics_spec specs[] = {
        {&pushes, "herald_pushes_total", "Pushes by channel and outcome", HR_METRICS_COUNTER,
         "channel,outcome", NULL, 0},
        {&latency, "herald_push_latency_seconds", "Push request latency", HR_METRICS_HISTOGRAM,
         "channel", HR_METRICS_BUCKETS(hr_metrics_buckets_latency)},
        {&due, "herald_due_to_delivery_seconds", "Task due time to delivery", HR_METRICS_HISTOGRAM,
         NULL, HR_METRICS_BUCKETS(hr_metrics_buckets_delivery)},
        {&inflight, "herald_inflight_requests", "Push requests in flight", HR_METRICS_GAUGE, NULL,
         NULL, 0},
        {&retries, "herald_retries_total",
         "Push requests beyond a recipient's first (failures and slow-downs alike)",
         HR_METRICS_COUNTER, NULL, NULL, 0},
        {&throttled, "herald_throttled_total", "Recipients blocked by the throttle",
         HR_METRICS_COUNTER, NULL, NULL, 0},
        {&waits, "herald_ratelimit_waits_total",
         "Times a channel waited because the push rate limit was spent", HR_METRICS_COUNTER, NULL,
         NULL, 0},
        {&acked, "herald_chunks_acked_total", "Chunks closed with every recipient settled",
         HR_METRICS_COUNTER, NULL, NULL, 0},
        {&redelivered, "herald_chunks_redelivered_total",
         "Chunks taken partly acknowledged, or skipped for a live foreign lease",
         HR_METRICS_COUNTER, NULL, NULL, 0},
        {&bad, "herald_bad_messages_total", "Chunk messages skipped, by reason", HR_METRICS_COUNTER,
         "reason", NULL, 0},
        {&queue, "herald_reporter_queue_depth", "Events waiting for the MySQL reporter",
         HR_METRICS_GAUGE, NULL, NULL, 0},
        {&flush, "herald_reporter_flush_seconds", "Reporter transaction time", HR_METRICS_HISTOGRAM,
         NULL, HR_METRICS_BUCKETS(wk_metrics_flush_buckets)},
        {&lag, "herald_kafka_consumer_lag", "Sum of consumer lag over assigned partitions",
         HR_METRICS_GAUGE, NULL, NULL, 0},
        {&errors, "herald_backend_errors_total", "Failed backend calls", HR_METRICS_COUNTER,
         "backend", NULL, 0},
        {&dropped, "herald_reporter_dropped_total",
         "push_delivery rows not written: the queue stayed full, or MySQL rejected the row",
         HR_METRICS_COUNTER, "reason", NULL, 0},
        {&unaccounted, "herald_recipients_unaccounted_total",
         "Subscriptions with no outcome when their task finished (the task is failed)",
         HR_METRICS_COUNTER, NULL, NULL, 0},
        {&deferred, "herald_recipients_deferred_total",
         "Recipients put off to the end of their own quiet hours (docs/recipients.md)",
         HR_METRICS_COUNTER, "channel", NULL, 0},
        {&pruned, "herald_addresses_pruned_total",
         "Addresses a provider called dead, removed from MySQL and Redis, by channel",
         HR_METRICS_COUNTER, "channel", NULL, 0},
        {&rows_missing, "herald_chunk_rows_missing_total",
         "Chunk ends given up because their push_chunk row never appeared (it stays published)",
         HR_METRICS_COUNTER, NULL, NULL, 0},
        {&anomalies, "herald_worker_anomalies_total", "Bad input the worker worked around, by kind",
         HR_METRICS_COUNTER, "kind", NULL, 0},
        {&stalled, "herald_worker_stalled_chunks",
         "Open chunks with recipients left whose channel has nothing in flight and no wake-up",
         HR_METRICS_GAUGE, NULL, NULL, 0},
        {&stalls, "herald_worker_stalls_total",
         "Times the watchdog found stalled chunks and restarted the sender", HR_METRICS_COUNTER,
         NULL, NULL, 0},
        {&waits_failover, "herald_chunks_failover_waits_total",
         "Chunks held through a Redis failover (a call failed; retried with back-off)",
         HR_METRICS_COUNTER, NULL, NULL, 0},
        {&handed_back, "herald_chunks_handed_back_total",
         "Chunks given up and handed back to the dispatcher to publish at once", HR_METRICS_COUNTER,
         NULL, NULL, 0},
        {&forced, "herald_events_gate_forced_total",
         "Chunk Redis jobs (acknowledgements) let through before their events were confirmed "
         "by Kafka: a stop's or a revoke's grace ran out",
         HR_METRICS_COUNTER, NULL, NULL, 0},
    };
    static const char *const drop_reasons[WK__DROPS] = {"queue_full", "rejected"};
    static const char *const kinds[WK__ANOMALIES] = {"invalid_uid", "user_hash_error",
                                                     "header_stripped"};
    static const char *const backends[WK__BACKENDS] = {"mysql", "redis", "kafka", "http"};
    static const char *const reasons[WK__BAD_REASONS] = {"decode", "unknown_task", "invalid_task",
                                                         "no_channel"};

    if (m == NULL || (m->reg = hr_metrics_new(0)) == NULL ||
        (m->chans = calloc(cfg->nchannels ? cfg->nchannels : 1, sizeof *m->chans)) == NULL) {
        snprintf(errstr, errlen, "out of memory");
        goto fail;
    }
    if (hr_metrics_register(m->reg, specs, sizeof specs / sizeof specs[0], errstr, errlen) != 0 ||
        hr_insecure_gauge(cfg, m->reg, errstr, errlen) != 0)
        goto fail;
    m->nchans = cfg->nchannels;
    for (size_t i = 0; i < cfg->nchannels; i++) {
        const char *name = cfg->channels[i].name;

        m->chans[i].sent = hr_metrics_labels(pushes, name, "sent");
        m->chans[i].failed = hr_metrics_labels(pushes, name, "failed");
        m->chans[i].throttled = hr_metrics_labels(pushes, name, "throttled");
        m->chans[i].retried = hr_metrics_labels(pushes, name, "retried");
        m->chans[i].unregistered = hr_metrics_labels(pushes, name, "unregistered");
        m->chans[i].opted_out = hr_metrics_labels(pushes, name, "opted_out");
        m->chans[i].suppressed = hr_metrics_labels(pushes, name, "suppressed");
        m->chans[i].expired = hr_metrics_labels(pushes, name, "expired");
        m->chans[i].latency = hr_metrics_labels(latency, name);
        m->chans[i].pruned = hr_metrics_labels(pruned, name);
        m->chans[i].deferred = hr_metrics_labels(deferred, name);
    }
    m->due_to_delivery = hr_metrics_labels(due, NULL);
    m->inflight = hr_metrics_labels(inflight, NULL);
    m->retries = hr_metrics_labels(retries, NULL);
    m->throttled = hr_metrics_labels(throttled, NULL);
    m->ratelimit_waits = hr_metrics_labels(waits, NULL);
    m->chunks_acked = hr_metrics_labels(acked, NULL);
    m->chunks_redelivered = hr_metrics_labels(redelivered, NULL);
    m->reporter_queue = hr_metrics_labels(queue, NULL);
    m->reporter_flush = hr_metrics_labels(flush, NULL);
    m->unaccounted = hr_metrics_labels(unaccounted, NULL);
    m->chunk_rows_missing = hr_metrics_labels(rows_missing, NULL);
    m->kafka_lag = hr_metrics_labels(lag, NULL);
    m->stalled_chunks = hr_metrics_labels(stalled, NULL);
    m->stalls = hr_metrics_labels(stalls, NULL);
    m->chunks_stalled = hr_metrics_labels(waits_failover, NULL);
    m->chunks_handed_back = hr_metrics_labels(handed_back, NULL);
    m->gate_forced = hr_metrics_labels(forced, NULL);
    hr_metrics_gauge_fn(m->kafka_lag, wk_metrics_lag, m);
    for (size_t i = 0; i < WK__BAD_REASONS; i++)
        m->bad[i] = hr_metrics_labels(bad, reasons[i]);
    for (size_t i = 0; i < WK__DROPS; i++)
        m->reporter_dropped[i] = hr_metrics_labels(dropped, drop_reasons[i]);
    for (size_t i = 0; i < WK__ANOMALIES; i++)
        m->anomalies[i] = hr_metrics_labels(anomalies, kinds[i]);
    for (size_t i = 0; i < WK__BACKENDS; i++)
        m->backend_errors[i] = hr_metrics_labels(errors, backends[i]);
    atomic_init(&m->redis_ok, true);
    atomic_init(&m->mysql_ok, true);
    atomic_init(&m->kafka_ok, true);
    atomic_init(&m->assigned, false);
    atomic_init(&m->kafka_lag_sum, 0);
    /* herald_mysql_call_seconds, _slow_calls_total, _timeouts_total. */
    if (hr_mysql_watch(m->reg, hr_mysql_slow_log, errstr, errlen) != 0)
        goto fail;
    return m;
fail:
    wk_metrics_free(m);
    return NULL;
}

int wk_metrics_serve(wk_metrics *m, const char *listen, char *errstr, size_t errlen)
{
    m->ready.fn = wk_metrics_ready;
    m->ready.ctx = m;
    hr_httpd_probe_routes(m->routes, m->reg, &m->ready);
    return hr_httpd_start(listen, &HR_HTTPD_PROBE_LIMITS, m->routes, HR_HTTPD_NPROBES, &m->httpd,
                          errstr, errlen);
}

void wk_metrics_stop(wk_metrics *m)
{
    hr_httpd_stop(m->httpd);
    m->httpd = NULL;
}

void wk_metrics_free(wk_metrics *m)
{
    if (m == NULL)
        return;
    wk_metrics_stop(m);
    if (m->reg != NULL)
        hr_mysql_watch(NULL, NULL, NULL, 0);
    hr_metrics_free(m->reg);
    free(m->chans);
    free(m);
}

int wk_metrics_kafka_stats(wk_metrics *m, const char *json, size_t len)
{
    cJSON *root = cJSON_ParseWithLength(json, len);
    const cJSON *topic, *part, *broker;
    long long lag = 0;
    bool up = false;

    if (root == NULL)
        return -1;
    cJSON_ArrayForEach(broker, cJSON_GetObjectItemCaseSensitive(root, "brokers"))
    {
        const cJSON *state = cJSON_GetObjectItemCaseSensitive(broker, "state");

        if (cJSON_IsString(state) && strcmp(state->valuestring, "UP") == 0)
            up = true;
    }
    cJSON_ArrayForEach(topic, cJSON_GetObjectItemCaseSensitive(root, "topics"))
    {
        cJSON_ArrayForEach(part, cJSON_GetObjectItemCaseSensitive(topic, "partitions"))
        {
            const cJSON *desired = cJSON_GetObjectItemCaseSensitive(part, "desired");
            const cJSON *clag = cJSON_GetObjectItemCaseSensitive(part, "consumer_lag");

            /* "desired": in this consumer's assignment; -1 = lag unknown. */
            if (cJSON_IsTrue(desired) && cJSON_IsNumber(clag) && clag->valuedouble >= 0)
                lag += (long long)clag->valuedouble;
        }
    }
    cJSON_Delete(root);
    atomic_store(&m->kafka_lag_sum, lag);
    atomic_store(&m->kafka_ok, up);
    return 0;
}
