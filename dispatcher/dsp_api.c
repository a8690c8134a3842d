/* dsp_api: herald-dispatcher's HTTP servers: the web console's files and
 * the /v1 API of docs/api.md, as the route table of dsp_api_routes.c lists
 * them, on dispatcher.listen (dispatcher.api.threads pool threads); and
 * /healthz, /readyz and /metrics on dispatcher.probe_listen, a server of
 * their own so that clients filling the API's connections never fail a
 * probe.
 *
 * Every /v1 route has the auth hook dsp_api_auth, which hr_httpd runs on
 * the headers before any body is read: the bearer token names a caller
 * and a role (dsp_auth.h: a bootstrap token, an API token, a JWT) and the
 * route's role must be at most the caller's (docs/api.md "Operators and
 * roles"), or on the pull a client token for the uid of the path
 * (hr_ctoken.h).  Without bootstrap tokens and JWTs the API only starts
 * when api.insecure is set, on a loopback address, and serves as the admin
 * "insecure" only requests whose Host is loopback.  The caller's name and
 * role go on the request for the handlers' audit rows
 * (dsp_api_audit).  Only the routes marked
 * `body` take one (JSON, up to api.max_body_bytes); HEAD is served on the
 * open routes only, since a GET of /v1 may act (the pull's ?ack=1).
 * Every route goes through
 * dsp_api_serve, which takes a connection pair from the API's own pool
 * (one per request in flight, made lazily, kept for later requests), runs
 * the handler and counts the request in
 * herald_api_requests_total{route,code}.  Handlers validate everything
 * before they change anything, so an error answer never leaves a change
 * behind.  The server owns its struct dsp_api: the pool (guarded by
 * pool_mu), the hr_httpd routes built from the table, each route's
 * context, the probes' server, the callers' identities (dsp_auth) and the
 * runner of the API's jobs (dsp_api_job). */
#include "dsp_api.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dsp_api_parse.h"
#include "dsp_auth.h"
#include "dsp_conn.h"
#include "hr_ctoken.h"
#include "hr_httpd_probe.h"
#include "hr_httpd_req.h"
#include "hr_insecure.h"
#include "hr_log.h"
#include "hr_parse.h"
#include "hr_subs.h"

#define DSP_API_ACTION 160 /* "METHOD PATTERN" of a route */

/* What a route's hr_httpd context points to. */
typedef struct dsp_api_slot {
    dsp_api *a;
    const dsp_api_route *rt;
    char action[DSP_API_ACTION]; /* "POST /v1/tasks/{id}/pause" */
} dsp_api_slot;

struct dsp_api {
    dsp *d;
    hr_httpd *h;
    hr_httpd *probes; /* /healthz, /readyz, /metrics on dispatcher.probe_listen */
    hr_httpd_route probe_routes[HR_HTTPD_NPROBES];
    hr_httpd_ready ready;
    dsp_api_slot *slots;    /* one per route */
    hr_httpd_route *routes; /* what hr_httpd serves */
    size_t nroutes;
    dsp_auth *auth;
    dsp_api_job_runner *runner;
    pthread_mutex_t pool_mu;
    pthread_cond_t pool_cv;
    dsp_api_conn *pool;
    size_t npool;
};

/* ---- shared helpers ------------------------------------------------------ */

bool dsp_api_id(const hr_httpd_req *req, const char *name, hr_httpd_resp *resp, int64_t *out)
{
    const char *code;
    char err[1024];

    if (dsp_api_parse_id(hr_httpd_param(req, name), name, out, &code, err, sizeof err) < 0) {
        hr_httpd_error(resp, 400, code, "%s", err);
        return false;
    }
    return true;
}

cJSON *dsp_api_body(const hr_httpd_req *req, hr_httpd_resp *resp)
{
    const char *code;
    char err[1024];
    cJSON *j;

    if (dsp_api_parse_json(req->body, req->body_len, &j, &code, err, sizeof err) < 0)
        hr_httpd_error(resp, 400, code, "%s", err);
    return j;
}

void dsp_api_add_id(cJSON *o, const char *name, int64_t v)
{
    char text[24];

    snprintf(text, sizeof text, "%" PRId64, v);
    cJSON_AddRawToObject(o, name, text);
}

void dsp_api_reply(hr_httpd_resp *resp, int status, cJSON *j)
{
    char *text = j != NULL ? cJSON_PrintUnformatted(j) : NULL;

    cJSON_Delete(j);
    if (text == NULL) {
        hr_httpd_error(resp, 500, "internal", "out of memory");
        return;
    }
    hr_buf_reset(&resp->body);
    if (hr_buf_append(&resp->body, text, strlen(text)) < 0)
        hr_httpd_error(resp, 500, "internal", "response too large");
    else
        resp->status = status;
    free(text);
}

void dsp_api_backend_error(hr_httpd_resp *resp, const char *what, const char *err)
{
    hr_log_warn("api_backend_error", "backend=%s error=%s", what, err);
    hr_httpd_error(resp, 503, "unavailable", "%s is not available, try again", what);
}

bool dsp_api_load_task(dsp_api_conn *ac, int64_t id, hr_httpd_resp *resp, hr_task **t)
{
    char err[512];
    int rc = hr_task_load(ac->m, id, t, err, sizeof err);

    if (rc < 0)
        dsp_api_backend_error(resp, "mysql", err);
    else if (rc == 1)
        hr_httpd_error(resp, 404, "not_found", "task %" PRId64 " does not exist", id);
    return rc == 0;
}

int64_t dsp_api_subscriptions(dsp_api_conn *ac, int64_t id)
{
    char err[256];

    return hr_subs_count(ac->m, id, err, sizeof err);
}

/* ---- who, and the audit log ------------------------------------------------- */

void dsp_api_who(const hr_httpd_req *req, hr_audit_who *who)
{
    const char *client = hr_httpd_header(req, "X-Herald-Client");
    char peer[HR_HTTPD_PEER];

    memset(who, 0, sizeof *who);
    snprintf(who->actor, sizeof who->actor, "%s", req->auth_name);
    who->role = (hr_role)req->auth_role;
    who->via = client != NULL && strcmp(client, "console") == 0 ? HR_AUDIT_CONSOLE : HR_AUDIT_API;
    hr_httpd_peer(req, peer, sizeof peer);
    snprintf(who->peer, sizeof who->peer, "%s", peer);
}

bool dsp_api_audit(dsp_api_conn *ac, const hr_httpd_req *req, int64_t task_id, const char *target,
                   const cJSON *before, const cJSON *after, hr_httpd_resp *resp)
{
    hr_audit_who who;
    char err[512];

    dsp_api_who(req, &who);
    if (hr_audit_write(ac->m,
                       &(hr_audit){.who = &who,
                                   .action = ac->action,
                                   .task_id = task_id,
                                   .target = target,
                                   .before = before,
                                   .after = after},
                       err, sizeof err) == 0)
        return true;
    dsp_api_backend_error(resp, "mysql (audit log)", err);
    return false;
}

bool dsp_api_begin(dsp_api_conn *ac, hr_httpd_resp *resp)
{
    char err[512];

    if (hr_mysql_begin(ac->m, err, sizeof err) == 0)
        return true;
    dsp_api_backend_error(resp, "mysql", err);
    return false;
}

bool dsp_api_commit(dsp_api_conn *ac, hr_httpd_resp *resp)
{
    char err[512];

    if (hr_mysql_commit(ac->m, err, sizeof err) == 0)
        return true;
    dsp_api_backend_error(resp, "mysql", err);
    return false;
}

void dsp_api_tokens_changed(dsp *d)
{
    dsp_auth_forget(d->api->auth);
}

dsp_api_job_runner *dsp_api_runner(dsp *d)
{
    return d->api->runner;
}

cJSON *dsp_api_allowed(dsp *d, hr_role role)
{
    const dsp_api *a = d->api;
    cJSON *arr = cJSON_CreateArray();

    for (size_t i = 0; arr != NULL && i < a->nroutes; i++)
        if (a->slots[i].rt->fn != NULL && !a->slots[i].rt->public && a->slots[i].rt->role <= role)
            cJSON_AddItemToArray(arr, cJSON_CreateString(a->slots[i].action));
    return arr;
}

/* ---- serving -------------------------------------------------------------- */

static dsp_api_conn *dsp_api_acquire(dsp_api *a, const char **what, char *errstr, size_t errlen)
{
    dsp_api_conn *ac = NULL;
    size_t i;

    pthread_mutex_lock(&a->pool_mu);
    while (ac == NULL) {
        for (i = 0; i < a->npool && ac == NULL; i++)
            if (!a->pool[i].busy)
                ac = &a->pool[i];
        if (ac == NULL)
            pthread_cond_wait(&a->pool_cv, &a->pool_mu);
    }
    ac->busy = true;
    pthread_mutex_unlock(&a->pool_mu);
    *what = "mysql";
    if (ac->m == NULL && hr_mysql_connect(a->d->cfg, &ac->m, errstr, errlen) < 0)
        goto failed;
    *what = "redis";
    if (ac->r == NULL && hr_redis_connect(a->d->cfg, &ac->r, errstr, errlen) < 0)
        goto failed;
    return ac;
failed:
    pthread_mutex_lock(&a->pool_mu);
    ac->busy = false;
    pthread_cond_signal(&a->pool_cv);
    pthread_mutex_unlock(&a->pool_mu);
    return NULL;
}

static void dsp_api_release(dsp_api *a, dsp_api_conn *ac)
{
    pthread_mutex_lock(&a->pool_mu);
    ac->busy = false;
    pthread_cond_signal(&a->pool_cv);
    pthread_mutex_unlock(&a->pool_mu);
}

static void dsp_api_count(const dsp_api_slot *slot, int status)
{
    char code[8];

    snprintf(code, sizeof code, "%d", status);
    hr_metrics_inc(hr_metrics_labels(slot->a->d->met.api_requests, slot->rt->pattern, code));
}

/* Refuses with STATUS; a 401 tells the client to authenticate. */
static bool dsp_api_refuse(const dsp_api_slot *slot, hr_httpd_resp *resp, int status,
                           const char *code, const char *msg)
{
    hr_httpd_error(resp, status, code, "%s", msg);
    if (status == 401)
        hr_httpd_resp_header(resp, "WWW-Authenticate", "Bearer");
    dsp_api_count(slot, resp->status);
    return false;
}

/* A client token (hr_ctoken.h) on SLOT's route: let in only on a client
 * route, for the uid of its path, which goes into req->auth_id. */
static bool dsp_api_client(const dsp_api_slot *slot, const char *token, hr_httpd_req *req,
                           hr_httpd_resp *resp)
{
    const hr_config *cfg = slot->a->d->cfg;
    const char *param;
    char err[200];
    int64_t uid, want;

    if (cfg->dispatcher.api.nclient_keys == 0)
        return dsp_api_refuse(slot, resp, 401, "unauthorized",
                              "a valid 'Authorization: Bearer TOKEN' header is required");
    if (hr_ctoken_verify(token, cfg->dispatcher.api.client_keys, cfg->dispatcher.api.nclient_keys,
                         (int64_t)time(NULL), cfg->dispatcher.api.client_token_max_ttl_s, &uid, err,
                         sizeof err) != 0)
        return dsp_api_refuse(slot, resp, 401, "unauthorized", err);
    param = hr_httpd_param(req, "uid");
    if (!slot->rt->client || param == NULL || hr_parse_uid(param, strlen(param), &want) < 0 ||
        want != uid)
        return dsp_api_refuse(slot, resp, 403, "forbidden",
                              "a client token may only call its own uid's reminders and "
                              "preferences");
    req->auth_id = uid;
    snprintf(req->auth_name, sizeof req->auth_name, "client:%" PRId64, uid);
    return true;
}

/* The auth hook of every /v1 route (hr_httpd runs it on the headers, before
 * the body is read): who the bearer token names (dsp_auth.h, or a client
 * token), then whether that caller's role reaches the route's.  401 for a
 * token that names nobody, 403 for a caller out of its place, 503 when the
 * API tokens cannot be read. */
static bool dsp_api_auth(void *ctx, hr_httpd_req *req, hr_httpd_resp *resp)
{
    const dsp_api_slot *slot = ctx;
    const hr_config *cfg = slot->a->d->cfg;
    const char *token = hr_httpd_bearer(req);
    dsp_auth_who who;
    char err[300], why[400];

    /* Insecure mode: a page whose name was re-pointed at 127.0.0.1 sends
     * its own Host (DNS rebinding). */
    if (cfg->dispatcher.api.ntokens == 0 && !hr_config_jwt_on(cfg)) {
        if (!hr_httpd_host_is_loopback(req))
            return dsp_api_refuse(slot, resp, 403, "forbidden",
                                  "without tokens the API serves only requests to a loopback "
                                  "host (Host: 127.0.0.1, localhost or [::1])");
        snprintf(req->auth_name, sizeof req->auth_name, "insecure");
        req->auth_role = HR_ROLE_ADMIN;
        return true;
    }
    if (token == NULL)
        return dsp_api_refuse(slot, resp, 401, "unauthorized",
                              "a valid 'Authorization: Bearer TOKEN' header is required");
    if (hr_ctoken_is_client(token))
        return dsp_api_client(slot, token, req, resp);
    switch (dsp_auth_identify(slot->a->auth, token, &who, err, sizeof err)) {
    case 0:
        break;
    case DSP_AUTH_UNAVAILABLE:
        hr_log_warn("api_backend_error", "backend=%s error=%s", "mysql (api tokens)", err);
        return dsp_api_refuse(slot, resp, 503, "unavailable", err);
    case DSP_AUTH_NO_ROLE:
        return dsp_api_refuse(slot, resp, 403, "forbidden", err);
    default:
        return dsp_api_refuse(slot, resp, 401, "unauthorized", err);
    }
    if (who.role < slot->rt->role) {
        snprintf(why, sizeof why, "%s has the role %s; %s needs %s", who.name,
                 hr_role_name(who.role), slot->action, hr_role_name(slot->rt->role));
        return dsp_api_refuse(slot, resp, 403, "forbidden", why);
    }
    snprintf(req->auth_name, sizeof req->auth_name, "%s", who.name);
    req->auth_role = who.role;
    return true;
}

static void dsp_api_serve(void *ctx, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    const dsp_api_slot *slot = ctx;
    dsp_api *a = slot->a;
    dsp_api_conn *ac;
    const char *what;
    char err[512];

    if (slot->rt->fn == NULL) {
        slot->rt->open(NULL, req, resp);
    } else if ((ac = dsp_api_acquire(a, &what, err, sizeof err)) == NULL) {
        dsp_api_backend_error(resp, what, err);
    } else {
        ac->action = slot->action;
        slot->rt->fn(a->d, ac, req, resp);
        dsp_api_release(a, ac);
    }
    dsp_api_count(slot, resp->status);
}

/* /readyz: the loop thread's MySQL and Redis worked and are not down, and
 * Kafka is not down (an idle producer has nothing to confirm). */
static bool dsp_api_ready(void *ctx, hr_buf *out)
{
    bool ok[DSP__BACKENDS], all = true;
    char text[160];
    size_t i;
    int n;

    dsp_health_ready(ctx, ok);
    for (i = 0; i < DSP__BACKENDS; i++)
        all = all && ok[i];
    n = snprintf(text, sizeof text, "{\"mysql\":\"%s\",\"redis\":\"%s\",\"kafka\":\"%s\"}",
                 ok[0] ? "ok" : "down", ok[1] ? "ok" : "down", ok[2] ? "ok" : "down");
    hr_buf_append(out, text, (size_t)n);
    return all;
}

/* A startup warning per insecure setting (hr_insecure.h). */
static void dsp_api_warn_insecure(void *ctx, const char *setting, const char *detail)
{
    (void)ctx;
    hr_log_warn("insecure_setting", "setting=%s detail=%s", setting, detail);
}

int dsp_api_start(dsp *d, const dsp_api_route *routes, size_t n, char *errstr, size_t errlen)
{
    const hr_config *cfg = d->cfg;
    dsp_api *a = calloc(1, sizeof *a);

    if (a == NULL)
        goto oom;
    a->d = d;
    pthread_mutex_init(&a->pool_mu, NULL);
    pthread_cond_init(&a->pool_cv, NULL);
    d->api = a;
    a->npool = (size_t)cfg->dispatcher.api.threads;
    a->pool = calloc(a->npool, sizeof *a->pool);
    a->slots = calloc(n, sizeof *a->slots);
    a->routes = calloc(n, sizeof *a->routes);
    if (a->pool == NULL || a->slots == NULL || a->routes == NULL)
        goto oom;
    a->ready = (hr_httpd_ready){dsp_api_ready, d};
    a->nroutes = n;
    hr_insecure_each(cfg, dsp_api_warn_insecure, NULL);
    if (hr_insecure_gauge(cfg, d->met.reg, errstr, errlen) != 0 ||
        dsp_auth_new(cfg, &a->auth, errstr, errlen) != 0 ||
        dsp_api_job_start(d, &a->runner, errstr, errlen) != 0) {
        dsp_api_stop(d);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        a->slots[i] = (dsp_api_slot){a, &routes[i], ""};
        snprintf(a->slots[i].action, sizeof a->slots[i].action, "%s %s", routes[i].method,
                 routes[i].pattern);
        a->routes[i] =
            (hr_httpd_route){routes[i].method,
                             routes[i].pattern,
                             dsp_api_serve,
                             &a->slots[i],
                             routes[i].fn != NULL && !routes[i].public ? dsp_api_auth : NULL,
                             .max_body = routes[i].body ? (size_t)cfg->dispatcher.api.max_body_bytes
                                                        : routes[i].form,
                             .head = routes[i].fn == NULL,
                             .form = routes[i].form > 0};
    }
    hr_httpd_probe_routes(a->probe_routes, d->met.reg, &a->ready);
    const hr_httpd_limits limits = {cfg->dispatcher.api.threads,
                                    (unsigned)cfg->dispatcher.api.max_connections,
                                    (unsigned)cfg->dispatcher.api.max_connections_per_ip,
                                    (unsigned)cfg->dispatcher.api.header_timeout_ms};
    if (hr_httpd_start(cfg->dispatcher.listen, &limits, a->routes, n, &a->h, errstr, errlen) < 0 ||
        hr_httpd_start(cfg->dispatcher.probe_listen, &HR_HTTPD_PROBE_LIMITS, a->probe_routes,
                       HR_HTTPD_NPROBES, &a->probes, errstr, errlen) < 0) {
        dsp_api_stop(d);
        return -1;
    }
    hr_log_info("api_started", "listen=%s port=%d threads=%d insecure=%d", cfg->dispatcher.listen,
                hr_httpd_port(a->h), cfg->dispatcher.api.threads,
                (int)cfg->dispatcher.api.insecure);
    hr_log_info("probes_started", "listen=%s port=%d", cfg->dispatcher.probe_listen,
                hr_httpd_port(a->probes));
    return 0;
oom:
    snprintf(errstr, errlen, "out of memory");
    dsp_api_stop(d);
    return -1;
}

void dsp_api_stop(dsp *d)
{
    dsp_api *a = d->api;
    size_t i;

    if (a == NULL)
        return;
    hr_httpd_stop(a->probes);
    hr_httpd_stop(a->h);
    /* No request queues a job any more. */
    dsp_api_job_stop(a->runner);
    dsp_auth_free(a->auth);
    for (i = 0; a->pool != NULL && i < a->npool; i++) {
        hr_mysql_free(a->pool[i].m);
        hr_redis_free(a->pool[i].r);
    }
    free(a->pool);
    free(a->slots);
    free(a->routes);
    pthread_mutex_destroy(&a->pool_mu);
    pthread_cond_destroy(&a->pool_cv);
    free(a);
    d->api = NULL;
}
