/* hr_httpd_probe: the probe server's routes: /metrics of a registry,
 * /healthz and /readyz of a readiness hook. */
#ifndef HR_HTTPD_PROBE_H
#define HR_HTTPD_PROBE_H

#include <stdbool.h>

#include "hr_buf.h"
#include "hr_httpd.h"
#include "hr_metrics.h"

/* Readiness for /readyz: FN appends a JSON object of checks to OUT
 * (e.g. {"mysql":"ok","kafka":"no assignment yet"}) and returns true when
 * the daemon is ready (200), false otherwise (503).  Called on any pool
 * thread. */
typedef struct hr_httpd_ready {
    bool (*fn)(void *ctx, hr_buf *out);
    void *ctx;
} hr_httpd_ready;

/* Fills ROUTES[0..HR_HTTPD_NPROBES) with GET (and HEAD) /metrics of REG,
 * /healthz and /readyz of READY: a probe server's whole table. */
#define HR_HTTPD_NPROBES 3
void hr_httpd_probe_routes(hr_httpd_route *routes, hr_metrics *reg, hr_httpd_ready *ready);

/* Built-in handlers. */
void hr_httpd_metrics(void *ctx /* hr_metrics * */, const hr_httpd_req *req, hr_httpd_resp *resp);
void hr_httpd_healthz(void *ctx /* unused */, const hr_httpd_req *req, hr_httpd_resp *resp);
void hr_httpd_readyz(void *ctx /* hr_httpd_ready * */, const hr_httpd_req *req,
                     hr_httpd_resp *resp);

#endif
