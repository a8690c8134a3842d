/* dsp_api_routes: the route table (moved here from dsp_api.c). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsp_api.h"
#include "dsp_console.h"

static void dsp_api_route_add(dsp_api *a, const char *method, const char *pattern, dsp_api_route rt)
{
    rt.a = a;
    rt.name = pattern;
    a->rctx[a->nroutes] = rt;
    a->routes[a->nroutes] = (hr_httpd_route){method, pattern, dsp_api_serve, &a->rctx[a->nroutes],
                                             rt.open ? NULL : dsp_api_auth};
    a->nroutes++;
}

/* The route table: what the server serves and --print-routes prints.  A
 * has no dsp when only printing (the contexts are then never used). */
void dsp_api_add_routes(dsp_api *a)
{
    dsp_api_route_add(a, "GET", "/metrics",
                      (dsp_api_route){.open = true,
                                      .builtin = hr_httpd_metrics,
                                      .builtin_ctx = a->d != NULL ? a->d->met.reg : NULL});
    dsp_api_route_add(a, "GET", "/healthz",
                      (dsp_api_route){.open = true, .builtin = hr_httpd_healthz});
    dsp_api_route_add(
        a, "GET", "/readyz",
        (dsp_api_route){.open = true, .builtin = hr_httpd_readyz, .builtin_ctx = &a->ready});
    dsp_api_route_add(a, "GET", "/console",
                      (dsp_api_route){.open = true, .builtin = dsp_console_serve});
    dsp_api_route_add(a, "GET", "/console/",
                      (dsp_api_route){.open = true, .builtin = dsp_console_serve});
    dsp_api_route_add(a, "GET", "/console/{asset}",
                      (dsp_api_route){.open = true, .builtin = dsp_console_serve});
    dsp_api_route_add(a, "POST", "/v1/tasks", (dsp_api_route){.fn = dsp_api_create});
    dsp_api_route_add(a, "GET", "/v1/tasks", (dsp_api_route){.fn = dsp_api_list});
    dsp_api_route_add(a, "GET", "/v1/tasks/{id}", (dsp_api_route){.fn = dsp_api_get});
    dsp_api_route_add(a, "PATCH", "/v1/tasks/{id}", (dsp_api_route){.fn = dsp_api_patch});
    dsp_api_route_add(a, "POST", "/v1/tasks/{id}/pause",
                      (dsp_api_route){.is_control = true, .control = HR_CONTROL_PAUSE});
    dsp_api_route_add(a, "POST", "/v1/tasks/{id}/resume",
                      (dsp_api_route){.is_control = true, .control = HR_CONTROL_RUN});
    dsp_api_route_add(a, "POST", "/v1/tasks/{id}/cancel",
                      (dsp_api_route){.is_control = true, .control = HR_CONTROL_CANCEL});
    dsp_api_route_add(a, "POST", "/v1/tasks/{id}/subscribers",
                      (dsp_api_route){.fn = dsp_api_subs_add});
    dsp_api_route_add(a, "DELETE", "/v1/tasks/{id}/subscribers/{uid}",
                      (dsp_api_route){.fn = dsp_api_subs_del});
    dsp_api_route_add(a, "GET", "/v1/tasks/{id}/subscribers/count",
                      (dsp_api_route){.fn = dsp_api_subs_count});
    dsp_api_route_add(a, "GET", "/v1/tasks/{id}/chunks", (dsp_api_route){.fn = dsp_api_chunks});
    dsp_api_route_add(a, "GET", "/v1/tasks/{id}/dead-letters",
                      (dsp_api_route){.fn = dsp_api_dead_letters});
    dsp_api_route_add(a, "POST", "/v1/tasks/{id}/redrive", (dsp_api_route){.fn = dsp_api_redrive});
    dsp_api_route_add(a, "POST", "/v1/tasks/{id}/recover", (dsp_api_route){.fn = dsp_api_recover});
    dsp_api_route_add(a, "GET", "/v1/tasks/{id}/render",
                      (dsp_api_route){.fn = dsp_api_render_task});
    dsp_api_route_add(a, "POST", "/v1/render", (dsp_api_route){.fn = dsp_api_render_new});
    dsp_api_route_add(a, "GET", "/v1/users/{uid}/reminders",
                      (dsp_api_route){.fn = dsp_api_reminders, .client = true});
    dsp_api_route_add(a, "GET", "/v1/users/{uid}/addresses",
                      (dsp_api_route){.fn = dsp_api_addr_get});
    dsp_api_route_add(a, "POST", "/v1/users/{uid}/addresses",
                      (dsp_api_route){.fn = dsp_api_addr_add});
    dsp_api_route_add(a, "PUT", "/v1/users/{uid}/addresses",
                      (dsp_api_route){.fn = dsp_api_addr_put});
    dsp_api_route_add(a, "DELETE", "/v1/users/{uid}/addresses",
                      (dsp_api_route){.fn = dsp_api_addr_del});
}

int dsp_api_print_routes(FILE *out)
{
    dsp_api *a = calloc(1, sizeof *a);
    size_t i;

    if (a == NULL)
        return -1;
    dsp_api_add_routes(a);
    for (i = 0; i < a->nroutes; i++)
        fprintf(out, "%s %s\n", a->routes[i].method, a->routes[i].pattern);
    free(a);
    return 0;
}

