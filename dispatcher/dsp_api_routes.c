/* dsp_api_routes: the route table (docs/api.md).  A /v1 route names its
 * handler (behind the auth hook, with a connection pair of the API's
 * pool) and the least role that may call it; an open one its hr_httpd
 * handler and the context the server gives it.  Adding a route is a row
 * here, a handler in its file, a line of schemas/openapi.yaml (with its
 * x-herald-role) and one of tests/unit/test_api_routes.c's table of roles.
 *
 * The roles (hr_role.h, docs/api.md "Operators and roles"): a viewer
 * reads what the console shows (tasks, chunks, dead letters, counts, jobs,
 * itself); an operator also acts on campaigns (pause, resume, cancel,
 * redrive, recover, subscribers) and reads and writes what names a person
 * (addresses, profiles and preferences, the suppression list's entries,
 * user attributes through a render, the pull); an admin also creates and
 * changes tasks, takes an address off the suppression list, manages tokens
 * and reads the audit log. */
#include "dsp_api_routes.h"

#include "dsp_api.h"
#include "dsp_api_addr.h"
#include "dsp_api_admin.h"
#include "dsp_api_hooks.h"
#include "dsp_api_ops.h"
#include "dsp_api_series.h"
#include "dsp_api_series_subs.h"
#include "dsp_api_stats.h"
#include "dsp_api_subs.h"
#include "dsp_api_task.h"
#include "dsp_api_users.h"
#include "dsp_api_track.h"
#include "dsp_console.h"
#include "dsp_unsub.h"
#include "hr_httpd_probe.h"

/* A route behind the auth hook for ROLE and above, without a body and
 * with a JSON one; an open one. */
#define DSP_API_V1(method_, pattern_, fn_, role_)                                  \
    {                                                                              \
        .method = method_, .pattern = pattern_, .fn = fn_, .role = HR_ROLE_##role_ \
    }
#define DSP_API_V1_BODY(method_, pattern_, fn_, role_)                                           \
    {                                                                                            \
        .method = method_, .pattern = pattern_, .fn = fn_, .role = HR_ROLE_##role_, .body = true \
    }
/* A route without the auth hook whose handler checks the request itself
 * (the tracking links' signatures, an unsubscribe token) and gets a
 * connection pair. */
#define DSP_API_PUBLIC(method_, pattern_, fn_)                            \
    {                                                                     \
        .method = method_, .pattern = pattern_, .fn = fn_, .public = true \
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
    DSP_API_PUBLIC("GET", "/t/o/{token}", dsp_api_track_open),
    DSP_API_PUBLIC("GET", "/t/c/{token}", dsp_api_track_click),
    DSP_API_V1("GET", "/v1/me", dsp_api_admin_me, VIEWER),
    DSP_API_V1_BODY("POST", "/v1/tasks", dsp_api_task_create, ADMIN),
    DSP_API_V1("GET", "/v1/tasks", dsp_api_task_list, VIEWER),
    DSP_API_V1("GET", "/v1/tasks/{id}", dsp_api_task_get, VIEWER),
    DSP_API_V1_BODY("PATCH", "/v1/tasks/{id}", dsp_api_task_patch, ADMIN),
    DSP_API_V1("POST", "/v1/tasks/{id}/pause", dsp_api_task_pause, OPERATOR),
    DSP_API_V1("POST", "/v1/tasks/{id}/resume", dsp_api_task_resume, OPERATOR),
    DSP_API_V1("POST", "/v1/tasks/{id}/cancel", dsp_api_task_cancel, OPERATOR),
    DSP_API_V1_BODY("POST", "/v1/tasks/{id}/subscribers", dsp_api_subs_add, OPERATOR),
    DSP_API_V1("DELETE", "/v1/tasks/{id}/subscribers/{uid}", dsp_api_subs_del, OPERATOR),
    DSP_API_V1("GET", "/v1/tasks/{id}/subscribers/count", dsp_api_ops_subs_count, VIEWER),
    DSP_API_V1("GET", "/v1/tasks/{id}/chunks", dsp_api_ops_chunks, VIEWER),
    DSP_API_V1("GET", "/v1/tasks/{id}/dead-letters", dsp_api_ops_dead_letters, VIEWER),
    DSP_API_V1("POST", "/v1/tasks/{id}/redrive", dsp_api_ops_redrive, OPERATOR),
    DSP_API_V1("POST", "/v1/tasks/{id}/recover", dsp_api_ops_recover, OPERATOR),
    DSP_API_V1("GET", "/v1/tasks/{id}/render", dsp_api_ops_render_task, OPERATOR),
    DSP_API_V1("GET", "/v1/tasks/{id}/stats", dsp_api_stats_get, VIEWER),
    DSP_API_V1_BODY("POST", "/v1/render", dsp_api_ops_render_new, OPERATOR),
    {.method = "GET",
     .pattern = "/v1/users/{uid}/reminders",
     .fn = dsp_api_subs_reminders,
     .role = HR_ROLE_OPERATOR,
     .client = true},
    {.method = "POST",
     .pattern = "/v1/users/{uid}/events",
     .fn = dsp_api_track_event,
     .role = HR_ROLE_OPERATOR,
     .client = true,
     .body = true},
    DSP_API_V1("GET", "/v1/users/{uid}/addresses", dsp_api_addr_get, OPERATOR),
    DSP_API_V1_BODY("POST", "/v1/users/{uid}/addresses", dsp_api_addr_add, OPERATOR),
    DSP_API_V1_BODY("PUT", "/v1/users/{uid}/addresses", dsp_api_addr_put, OPERATOR),
    DSP_API_V1("DELETE", "/v1/users/{uid}/addresses", dsp_api_addr_del, OPERATOR),
    /* recipients (docs/recipients.md): a profile and its preferences name a
     * person, as addresses do; taking an address off the suppression list
     * undoes a complaint or a bounce, an admin's call */
    DSP_API_V1("GET", "/v1/users/{uid}", dsp_api_users_get, OPERATOR),
    DSP_API_V1_BODY("PUT", "/v1/users/{uid}", dsp_api_users_put, OPERATOR),
    DSP_API_V1_BODY("PATCH", "/v1/users/{uid}", dsp_api_users_patch, OPERATOR),
    DSP_API_V1("DELETE", "/v1/users/{uid}", dsp_api_users_del, OPERATOR),
    {.method = "GET",
     .pattern = "/v1/users/{uid}/preferences",
     .fn = dsp_api_prefs_get,
     .role = HR_ROLE_OPERATOR,
     .client = true},
    {.method = "PUT",
     .pattern = "/v1/users/{uid}/preferences",
     .fn = dsp_api_prefs_put,
     .role = HR_ROLE_OPERATOR,
     .client = true,
     .body = true},
    DSP_API_V1("GET", "/v1/suppressions", dsp_api_supp_list, OPERATOR),
    DSP_API_V1_BODY("POST", "/v1/suppressions", dsp_api_supp_add, OPERATOR),
    DSP_API_V1("DELETE", "/v1/suppressions", dsp_api_supp_del, ADMIN),
    /* one-click unsubscribe: the token in the path is the capability */
    DSP_API_PUBLIC("GET", "/u/{token}", dsp_unsub_get),
    {.method = "POST",
     .pattern = "/u/{token}",
     .fn = dsp_unsub_post,
     .public = true,
     .form = DSP_UNSUB_MAX_BODY},
    DSP_API_V1("GET", "/v1/jobs/{id}", dsp_api_admin_job, VIEWER),
    DSP_API_V1("GET", "/v1/tokens", dsp_api_admin_tokens, ADMIN),
    DSP_API_V1_BODY("POST", "/v1/tokens", dsp_api_admin_token_create, ADMIN),
    DSP_API_V1("DELETE", "/v1/tokens/{id}", dsp_api_admin_token_revoke, ADMIN),
    DSP_API_V1("GET", "/v1/audit", dsp_api_admin_audit, ADMIN),
    DSP_API_V1_BODY("POST", "/v1/hooks", dsp_api_hooks_create, ADMIN),
    DSP_API_V1("GET", "/v1/hooks", dsp_api_hooks_list, OPERATOR),
    DSP_API_V1("GET", "/v1/hooks/{id}", dsp_api_hooks_get, OPERATOR),
    DSP_API_V1_BODY("PATCH", "/v1/hooks/{id}", dsp_api_hooks_patch, ADMIN),
    DSP_API_V1("DELETE", "/v1/hooks/{id}", dsp_api_hooks_delete, ADMIN),
    DSP_API_V1("GET", "/v1/hooks/{id}/dead-letters", dsp_api_hooks_dead, OPERATOR),
    DSP_API_V1("POST", "/v1/hooks/{id}/redrive", dsp_api_hooks_redrive, OPERATOR),
    DSP_API_V1_BODY("POST", "/v1/series", dsp_api_series_create, OPERATOR),
    DSP_API_V1("GET", "/v1/series", dsp_api_series_list, VIEWER),
    DSP_API_V1("GET", "/v1/series/{id}", dsp_api_series_get, VIEWER),
    DSP_API_V1("GET", "/v1/series/{id}/next", dsp_api_series_next, VIEWER),
    DSP_API_V1("POST", "/v1/series/{id}/pause", dsp_api_series_pause, OPERATOR),
    DSP_API_V1("POST", "/v1/series/{id}/resume", dsp_api_series_resume, OPERATOR),
    DSP_API_V1("POST", "/v1/series/{id}/end", dsp_api_series_end, OPERATOR),
    DSP_API_V1_BODY("POST", "/v1/series/{id}/subscribers", dsp_api_series_subs_add, OPERATOR),
    DSP_API_V1("DELETE", "/v1/series/{id}/subscribers/{uid}", dsp_api_series_subs_del, OPERATOR),
    DSP_API_V1("GET", "/v1/series/{id}/subscribers", dsp_api_series_subs_list, OPERATOR),
};

#define DSP_API_NROUTES (sizeof dsp_api_routes / sizeof dsp_api_routes[0])

int dsp_api_routes_start(dsp *d, char *errstr, size_t errlen)
{
    return dsp_api_start(d, dsp_api_routes, DSP_API_NROUTES, errstr, errlen);
}

const dsp_api_route *dsp_api_routes_table(size_t *n)
{
    *n = DSP_API_NROUTES;
    return dsp_api_routes;
}

void dsp_api_routes_print(FILE *out)
{
    hr_httpd_route probes[HR_HTTPD_NPROBES];

    for (size_t i = 0; i < DSP_API_NROUTES; i++)
        fprintf(out, "%s %s %s\n", dsp_api_routes[i].method, dsp_api_routes[i].pattern,
                dsp_api_routes[i].fn != NULL && !dsp_api_routes[i].public
                    ? hr_role_name(dsp_api_routes[i].role)
                    : "open");
    hr_httpd_probe_routes(probes, NULL, NULL);
    for (size_t i = 0; i < HR_HTTPD_NPROBES; i++)
        fprintf(out, "%s %s open\n", probes[i].method, probes[i].pattern);
}
