/* hk_metrics: herald-hooks' Prometheus families and its probes server
 * (/metrics, /healthz, /readyz on events.hooks.listen).  The handles are
 * looked up once; the loop thread updates them lock-free, the server's
 * threads read the registry and the atomics. */
#ifndef HK_METRICS_H
#define HK_METRICS_H

#include <stdatomic.h>
#include <stdbool.h>

#include "hr_config.h"
#include "hr_httpd.h"
#include "hr_httpd_probe.h"
#include "hr_metrics.h"

typedef struct hk_metrics {
    hr_metrics *reg;
    /* herald_hook_requests_total{result}: deliveries (HTTP requests) */
    hr_metrics_child *requests_ok, *requests_failed;
    hr_metrics_child *latency; /* herald_hook_request_seconds */
    /* herald_hook_events_total{result}: events per endpoint */
    hr_metrics_child *delivered, *dead_lettered, *dropped, *redriven;
    hr_metrics_child *duplicates; /* herald_hook_duplicates_total: repeats of an event id */
    hr_metrics_child *bad;        /* herald_hook_bad_events_total: unreadable records */
    hr_metrics_child *disabled;   /* herald_hooks_disabled: endpoints disabled now */
    hr_metrics_child *disables;   /* herald_hook_disabled_total: disabled by this process */
    hr_metrics_child *queued;     /* herald_hook_queue_depth: events waiting, every endpoint */
    atomic_bool mysql_ok, kafka_ok;
    hr_httpd_ready ready;
    hr_httpd_route routes[HR_HTTPD_NPROBES];
    hr_httpd *httpd;
} hk_metrics;

/* NULL (ERRSTR) when out of memory or the table is refused. */
hk_metrics *hk_metrics_new(char *errstr, size_t errlen);
/* Serves the probes on LISTEN.  0, or -1 (ERRSTR). */
int hk_metrics_serve(hk_metrics *m, const char *listen, char *errstr, size_t errlen);
/* Stops the server and frees.  Accepts NULL. */
void hk_metrics_free(hk_metrics *m);

#endif
