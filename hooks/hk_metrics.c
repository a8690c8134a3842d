/* hk_metrics: herald-hooks' families and probes (see hk_metrics.h). */
#include "hk_metrics.h"

#include <stdio.h>
#include <stdlib.h>

/* Request time to an endpoint, seconds. */
static const double hk_metrics_buckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10};

/* /readyz: MySQL (the endpoints' table) and Kafka answer. */
static bool hk_metrics_ready(void *ctx, hr_buf *out)
{
    hk_metrics *m = ctx;
    bool mysql = atomic_load(&m->mysql_ok), kafka = atomic_load(&m->kafka_ok);
    char text[64];
    int n = snprintf(text, sizeof text, "{\"mysql\":\"%s\",\"kafka\":\"%s\"}",
                     mysql ? "ok" : "down", kafka ? "ok" : "down");

    hr_buf_append(out, text, (size_t)n);
    return mysql && kafka;
}

hk_metrics *hk_metrics_new(char *errstr, size_t errlen)
{
    hk_metrics *m = calloc(1, sizeof *m);
    hr_metrics_family *requests, *latency, *events, *dups, *bad, *disabled, *disables, *queued;
    const hr_metrics_spec specs[] = {
        {&requests, "herald_hook_requests_total",
         "Deliveries to event webhooks (one request, up to events.hooks.batch_max events), by "
         "result",
         HR_METRICS_COUNTER, "result", NULL, 0},
        {&latency, "herald_hook_request_seconds", "Time of a delivery request",
         HR_METRICS_HISTOGRAM, NULL, HR_METRICS_BUCKETS(hk_metrics_buckets)},
        {&events, "herald_hook_events_total",
         "Events per endpoint, by result: delivered, dead_lettered (retries given up, queue "
         "full or endpoint disabled), dropped (dead letters full), redriven (dead letters "
         "delivered)",
         HR_METRICS_COUNTER, "result", NULL, 0},
        {&dups, "herald_hook_duplicates_total",
         "Events whose id was seen before (a repeat of at-least-once publishing): not delivered "
         "again",
         HR_METRICS_COUNTER, NULL, NULL, 0},
        {&bad, "herald_hook_bad_events_total", "Records of the events topic that are no event",
         HR_METRICS_COUNTER, NULL, NULL, 0},
        {&disabled, "herald_hooks_disabled", "Event webhooks disabled now (push_hook)",
         HR_METRICS_GAUGE, NULL, NULL, 0},
        {&disables, "herald_hook_disabled_total",
         "Event webhooks this process disabled after failing for events.hooks.disable_after_ms",
         HR_METRICS_COUNTER, NULL, NULL, 0},
        {&queued, "herald_hook_queue_depth", "Events waiting for their endpoints", HR_METRICS_GAUGE,
         NULL, NULL, 0},
    };

    if (m == NULL || (m->reg = hr_metrics_new(0)) == NULL) {
        snprintf(errstr, errlen, "out of memory");
        free(m);
        return NULL;
    }
    if (hr_metrics_register(m->reg, specs, sizeof specs / sizeof specs[0], errstr, errlen) != 0) {
        hk_metrics_free(m);
        return NULL;
    }
    m->requests_ok = hr_metrics_labels(requests, "ok");
    m->requests_failed = hr_metrics_labels(requests, "failed");
    m->latency = hr_metrics_labels(latency, NULL);
    m->delivered = hr_metrics_labels(events, "delivered");
    m->dead_lettered = hr_metrics_labels(events, "dead_lettered");
    m->dropped = hr_metrics_labels(events, "dropped");
    m->redriven = hr_metrics_labels(events, "redriven");
    m->duplicates = hr_metrics_labels(dups, NULL);
    m->bad = hr_metrics_labels(bad, NULL);
    m->disabled = hr_metrics_labels(disabled, NULL);
    m->disables = hr_metrics_labels(disables, NULL);
    m->queued = hr_metrics_labels(queued, NULL);
    return m;
}

int hk_metrics_serve(hk_metrics *m, const char *listen, char *errstr, size_t errlen)
{
    m->ready = (hr_httpd_ready){hk_metrics_ready, m};
    hr_httpd_probe_routes(m->routes, m->reg, &m->ready);
    return hr_httpd_start(listen, &HR_HTTPD_PROBE_LIMITS, m->routes, HR_HTTPD_NPROBES, &m->httpd,
                          errstr, errlen);
}

void hk_metrics_free(hk_metrics *m)
{
    if (m == NULL)
        return;
    hr_httpd_stop(m->httpd);
    hr_metrics_free(m->reg);
    free(m);
}
