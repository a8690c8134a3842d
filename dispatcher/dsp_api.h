/* dsp_api: the HTTP server of herald-dispatcher (d->api): serving a route
 * table, auth, the API's own connection pool, and the helpers every /v1
 * handler shares.  The table is dsp_api_routes.c's; the handlers are
 * dsp_api_task.c, dsp_api_subs.c, dsp_api_addr.c and dsp_api_ops.c.
 *
 * Every /v1 handler gets a connection pair of the API's own pool
 * (dsp_api_conn), held for the length of one request; the loop thread's and
 * the background job's connections are never touched from here. */
#ifndef DSP_API_H
#define DSP_API_H

#include <cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "dsp.h"
#include "dsp_api_job.h"
#include "hr_audit.h"
#include "hr_httpd.h"
#include "hr_role.h"
#include "hr_task.h"

typedef struct dsp_api dsp_api;

typedef struct dsp_api_conn {
    hr_mysql *m;
    hr_redis *r;
    bool busy;
    const char *action; /* the request's route, "POST /v1/tasks/{id}/pause": its audit action */
} dsp_api_conn;

/* A /v1 handler: D is read only (its cfg and owner). */
typedef void (*dsp_api_fn)(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);

/* A row of the route table: a /v1 route (FN, behind the auth hook and with
 * a connection pair), a public one (FN and PUBLIC: a connection pair, no
 * auth hook — the handler checks what the request carries itself, as the
 * tracking links' signatures or an unsubscribe token), or an open one
 * (OPEN: no token, no connection, no context; GET and HEAD).  The pattern
 * is the route label of herald_api_requests_total. */
typedef struct dsp_api_route {
    const char *method, *pattern;
    dsp_api_fn fn;
    hr_role role; /* the least role that may call it; HR_ROLE_NONE only for an open route */
    bool client;  /* a client token may call it, for the {uid} of its path */
    bool body;    /* takes a JSON body of up to dispatcher.api.max_body_bytes */
    bool public;  /* FN without the auth hook (role HR_ROLE_NONE) */
    hr_httpd_handler open;
    size_t form; /* takes an HTML form of at most this many bytes (not JSON) */
} dsp_api_route;

/* Serves ROUTES[N] (which must outlive the server) on dispatcher.listen,
 * and the probes and /metrics on dispatcher.probe_listen, into d->api.  0,
 * or -1 (ERRSTR). */
int dsp_api_start(dsp *d, const dsp_api_route *routes, size_t n, char *errstr, size_t errlen);
/* Stops serving (waits for running handlers) and frees; d->api may be
 * NULL. */
void dsp_api_stop(dsp *d);

/* ---- handler helpers ----------------------------------------------------- */

/* A path param as a positive integer (BIGINT UNSIGNED ids below 2^63);
 * false after answering 400. */
bool dsp_api_id(const hr_httpd_req *req, const char *name, hr_httpd_resp *resp, int64_t *out);
/* Parses the body as a JSON object; NULL after answering 400. */
cJSON *dsp_api_body(const hr_httpd_req *req, hr_httpd_resp *resp);
/* Adds id/uid V to object O as an exact JSON integer (a raw literal: a
 * cJSON number is a double and rounds past 2^53). */
void dsp_api_add_id(cJSON *o, const char *name, int64_t v);
/* Puts J (consumed) as the response body with STATUS. */
void dsp_api_reply(hr_httpd_resp *resp, int status, cJSON *j);
/* Answers a backend failure with 503 and logs it once. */
void dsp_api_backend_error(hr_httpd_resp *resp, const char *what, const char *err);
/* Loads task ID; false after answering 404 or 503 (*T NULL). */
bool dsp_api_load_task(dsp_api_conn *ac, int64_t id, hr_httpd_resp *resp, hr_task **t);
/* COUNT(push_subscription) of task ID, or -1 when MySQL does not answer. */
int64_t dsp_api_subscriptions(dsp_api_conn *ac, int64_t id);

/* ---- who, and the audit log ------------------------------------------------- */

/* The request's caller as the audit log names it: the name and role the
 * auth hook found, the client's address, and via "console" when the web
 * console sent it (it says X-Herald-Client: console). */
void dsp_api_who(const hr_httpd_req *req, hr_audit_who *who);
/* The audit row of the change this request made, on ac->m and inside the
 * handler's transaction (hr_audit.h): action ac->action, task TASK_ID (0:
 * none), TARGET, the fields BEFORE and AFTER.  true, or false after
 * answering 503 (the caller rolls its change back). */
bool dsp_api_audit(dsp_api_conn *ac, const hr_httpd_req *req, int64_t task_id, const char *target,
                   const cJSON *before, const cJSON *after, hr_httpd_resp *resp);
/* A transaction on ac->m for a change and its audit row: true, or false
 * after answering 503 (begin, commit; a failed commit has rolled back). */
bool dsp_api_begin(dsp_api_conn *ac, hr_httpd_resp *resp);
bool dsp_api_commit(dsp_api_conn *ac, hr_httpd_resp *resp);

/* ---- what the server holds for the handlers ---------------------------------- */

/* A token was created or revoked here: the next lookup reads the store
 * (dsp_auth_forget). */
void dsp_api_tokens_changed(dsp *d);
/* The runner of the API's jobs (dsp_api_job.h). */
dsp_api_job_runner *dsp_api_runner(dsp *d);
/* The routes (METHOD PATTERN strings) ROLE may call, as a JSON array: what
 * GET /v1/me tells the console, so it shows no button the caller cannot
 * use. */
cJSON *dsp_api_allowed(dsp *d, hr_role role);

#endif
