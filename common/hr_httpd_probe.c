/* hr_httpd_probe: the built-in probe handlers (see hr_httpd_probe.h). */
#include "hr_httpd_probe.h"

#include <microhttpd.h>

void hr_httpd_probe_routes(hr_httpd_route *routes, hr_metrics *reg, hr_httpd_ready *ready)
{
    routes[0] = (hr_httpd_route){"GET", "/metrics", hr_httpd_metrics, reg, .head = true};
    routes[1] = (hr_httpd_route){"GET", "/healthz", hr_httpd_healthz, NULL, .head = true};
    routes[2] = (hr_httpd_route){"GET", "/readyz", hr_httpd_readyz, ready, .head = true};
}

void hr_httpd_metrics(void *ctx, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    (void)req;
    if (hr_metrics_render(ctx, &resp->body) != 0) {
        hr_httpd_error(resp, MHD_HTTP_INTERNAL_SERVER_ERROR, "metrics_too_large",
                       "the rendering is over %zu bytes", HR_HTTPD_MAX_RESPONSE);
        return;
    }
    resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
}

void hr_httpd_healthz(void *ctx, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    (void)ctx;
    (void)req;
    resp->content_type = "text/plain; charset=utf-8";
    hr_buf_append(&resp->body, "ok\n", 3);
}

void hr_httpd_readyz(void *ctx, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    (void)req;
    const hr_httpd_ready *ready = ctx;
    bool ok = ready->fn(ready->ctx, &resp->body);
    resp->status = ok ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE;
}
