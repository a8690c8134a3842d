/* dsp_api_routes: the route table (docs/api.md).  A /v1 route names its
 * handler (behind the auth hook, with a connection pair of the API's
 * pool); an open one its hr_httpd handler and the context the server
 * gives it.  Adding a route is a row here and a handler in its file. */
#include "dsp_api_routes.h"

#include "dsp_api.h"
#include "dsp_api_addr.h"
#include "dsp_api_ops.h"
#include "dsp_api_subs.h"
#include "dsp_api_task.h"
#include "dsp_api_users.h"
#include "dsp_console.h"
#include "dsp_unsub.h"

/* A route behind the auth hook, an admin token's, without a body and with
 * a JSON one; an open one. */
#define DSP_API_V1(method_, pattern_, fn_)                \
    {                                                     \
        .method = method_, .pattern = pattern_, .fn = fn_ \
    }
#define DSP_API_V1_BODY(method_, pattern_, fn_)                         \
    {                                                                   \
        .method = method_, .pattern = pattern_, .fn = fn_, .body = true \
    }
#define DSP_API_OPEN(method_, pattern_, handler_)                \
    {                                                            \
        .method = method_, .pattern = pattern_, .open = handler_ \
    }

/* /healthz, /readyz and /metrics are not here: they are the probes'
 * server's (hr_httpd_probe_routes, on dispatcher.probe_listen). */
static const dsp_api_route dsp_api_routes[] = {
    DSP_API_OPEN("GET", "/console", dsp_console_serve),
    DSP_API_OPEN("GET", "/console/", dsp_console_serve),
    DSP_API_OPEN("GET", "/console/{asset}", dsp_console_serve),
    DSP_API_V1_BODY("POST", "/v1/tasks", dsp_api_task_create),
    DSP_API_V1("GET", "/v1/tasks", dsp_api_task_list),
    DSP_API_V1("GET", "/v1/tasks/{id}", dsp_api_task_get),
    DSP_API_V1_BODY("PATCH", "/v1/tasks/{id}", dsp_api_task_patch),
    DSP_API_V1("POST", "/v1/tasks/{id}/pause", dsp_api_task_pause),
    DSP_API_V1("POST", "/v1/tasks/{id}/resume", dsp_api_task_resume),
    DSP_API_V1("POST", "/v1/tasks/{id}/cancel", dsp_api_task_cancel),
    DSP_API_V1_BODY("POST", "/v1/tasks/{id}/subscribers", dsp_api_subs_add),
    DSP_API_V1("DELETE", "/v1/tasks/{id}/subscribers/{uid}", dsp_api_subs_del),
    DSP_API_V1("GET", "/v1/tasks/{id}/subscribers/count", dsp_api_ops_subs_count),
    DSP_API_V1("GET", "/v1/tasks/{id}/chunks", dsp_api_ops_chunks),
    DSP_API_V1("GET", "/v1/tasks/{id}/dead-letters", dsp_api_ops_dead_letters),
    DSP_API_V1("POST", "/v1/tasks/{id}/redrive", dsp_api_ops_redrive),
    DSP_API_V1("POST", "/v1/tasks/{id}/recover", dsp_api_ops_recover),
    DSP_API_V1("GET", "/v1/tasks/{id}/render", dsp_api_ops_render_task),
    DSP_API_V1_BODY("POST", "/v1/render", dsp_api_ops_render_new),
    {.method = "GET",
     .pattern = "/v1/users/{uid}/reminders",
     .fn = dsp_api_subs_reminders,
     .client = true},
    DSP_API_V1("GET", "/v1/users/{uid}/addresses", dsp_api_addr_get),
    DSP_API_V1_BODY("POST", "/v1/users/{uid}/addresses", dsp_api_addr_add),
    DSP_API_V1_BODY("PUT", "/v1/users/{uid}/addresses", dsp_api_addr_put),
    DSP_API_V1("DELETE", "/v1/users/{uid}/addresses", dsp_api_addr_del),
    /* recipients (docs/recipients.md) */
    DSP_API_V1("GET", "/v1/users/{uid}", dsp_api_users_get),
    DSP_API_V1_BODY("PUT", "/v1/users/{uid}", dsp_api_users_put),
    DSP_API_V1_BODY("PATCH", "/v1/users/{uid}", dsp_api_users_patch),
    DSP_API_V1("DELETE", "/v1/users/{uid}", dsp_api_users_del),
    {.method = "GET",
     .pattern = "/v1/users/{uid}/preferences",
     .fn = dsp_api_prefs_get,
     .client = true},
    {.method = "PUT",
     .pattern = "/v1/users/{uid}/preferences",
     .fn = dsp_api_prefs_put,
     .client = true,
     .body = true},
    DSP_API_V1("GET", "/v1/suppressions", dsp_api_supp_list),
    DSP_API_V1_BODY("POST", "/v1/suppressions", dsp_api_supp_add),
    DSP_API_V1("DELETE", "/v1/suppressions", dsp_api_supp_del),
    /* one-click unsubscribe: the token in the path is the capability */
    {.method = "GET", .pattern = "/u/{token}", .fn = dsp_unsub_get, .anyone = true},
    {.method = "POST",
     .pattern = "/u/{token}",
     .fn = dsp_unsub_post,
     .anyone = true,
     .form = DSP_UNSUB_MAX_BODY},
};

#define DSP_API_NROUTES (sizeof dsp_api_routes / sizeof dsp_api_routes[0])

int dsp_api_routes_start(dsp *d, char *errstr, size_t errlen)
{
    return dsp_api_start(d, dsp_api_routes, DSP_API_NROUTES, errstr, errlen);
}

void dsp_api_routes_print(FILE *out)
{
    hr_httpd_route probes[HR_HTTPD_NPROBES];

    for (size_t i = 0; i < DSP_API_NROUTES; i++)
        fprintf(out, "%s %s\n", dsp_api_routes[i].method, dsp_api_routes[i].pattern);
    hr_httpd_probe_routes(probes, NULL, NULL);
    for (size_t i = 0; i < HR_HTTPD_NPROBES; i++)
        fprintf(out, "%s %s\n", probes[i].method, probes[i].pattern);
}
