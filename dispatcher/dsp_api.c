/* dsp_api: herald-dispatcher's HTTP servers: the web console's files and
 * the /v1 API of docs/api.md, as the route table of dsp_api_routes.c lists
 * them, on dispatcher.listen (dispatcher.api.threads pool threads); and
 * /healthz, /readyz and /metrics on dispatcher.probe_listen, a server of
 * their own so that clients filling the API's connections never fail a
 * probe.
 *
 * Every /v1 route has the auth hook dsp_api_auth, which hr_httpd runs on
 * the headers before any body is read: an admin bearer token, whenever
 * tokens are configured (constant-time, hr_httpd_bearer_ok; without tokens
 * the API only starts when api.insecure is set, on a loopback address, and
 * serves only requests whose Host is loopback), or on the pull a client
 * token for the uid of the path (hr_ctoken.h).  Only the routes marked
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
 * context and the probes' server. */
#include "dsp_api.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dsp_api_parse.h"
#include "dsp_conn.h"
#include "hr_ctoken.h"
#include "hr_log.h"
#include "hr_parse.h"

/* What a route's hr_httpd context points to. */
typedef struct dsp_api_slot {
    dsp_api *a;
    const dsp_api_route *rt;
} dsp_api_slot;

struct dsp_api {
    dsp *d;
    hr_httpd *h;
    hr_httpd *probes; /* /healthz, /readyz, /metrics on dispatcher.probe_listen */
    hr_httpd_route probe_routes[HR_HTTPD_NPROBES];
    hr_httpd_ready ready;
    dsp_api_slot *slots;    /* one per route */
    hr_httpd_route *routes; /* what hr_httpd serves */
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
    const hr_mysql_param p[] = {HR_P_I64(id)};
    hr_mysql_rows *rows = NULL;
    char err[256];
    int64_t n = -1;

    if (hr_mysql_query(ac->m, "SELECT COUNT(*) FROM push_subscription WHERE task_id = ?", p, 1,
                       &rows, err, sizeof err) == 0 &&
        rows->nrows == 1 && hr_mysql_cell(rows, 0, 0) != NULL)
        n = strtoll(hr_mysql_cell(rows, 0, 0), NULL, 10);
    hr_mysql_rows_free(rows);
    return n;
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

/* The auth hook of every /v1 route (hr_httpd runs it on the headers, before
 * the body is read).  An admin token (whenever tokens are configured) may
 * call anything.  A client token (hr_ctoken.h, when client keys are
 * configured) may call only a client route, for its own uid: the uid goes
 * into req->auth_id for the handler.  Anything else is 401, or 403 for a
 * valid client token out of its place. */
static bool dsp_api_auth(void *ctx, hr_httpd_req *req, hr_httpd_resp *resp)
{
    const dsp_api_slot *slot = ctx;
    const hr_config *cfg = slot->a->d->cfg;
    const char *token = hr_httpd_bearer(req), *param;
    char err[128];
    int64_t uid, want;

    /* Insecure mode: a page whose name was re-pointed at 127.0.0.1 sends
     * its own Host (DNS rebinding). */
    if (cfg->dispatcher.api.ntokens == 0)
        return hr_httpd_host_is_loopback(req) ||
               dsp_api_refuse(slot, resp, 403, "forbidden",
                              "without tokens the API serves only requests to a loopback host "
                              "(Host: 127.0.0.1, localhost or [::1])");
    if (hr_httpd_bearer_ok(req, cfg->dispatcher.api.tokens, cfg->dispatcher.api.ntokens))
        return true;
    if (token == NULL || cfg->dispatcher.api.nclient_keys == 0 || !hr_ctoken_is_client(token))
        return dsp_api_refuse(slot, resp, 401, "unauthorized",
                              "a valid 'Authorization: Bearer TOKEN' header is required");
    if (hr_ctoken_verify(token, cfg->dispatcher.api.client_keys, cfg->dispatcher.api.nclient_keys,
                         (int64_t)time(NULL), &uid, err, sizeof err) != 0)
        return dsp_api_refuse(slot, resp, 401, "unauthorized", err);
    param = hr_httpd_param(req, "uid");
    if (!slot->rt->client || param == NULL || hr_parse_uid(param, strlen(param), &want) < 0 ||
        want != uid)
        return dsp_api_refuse(slot, resp, 403, "forbidden",
                              "a client token may only call its own uid's reminders and "
                              "preferences");
    req->auth_id = uid;
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
    for (size_t i = 0; i < n; i++) {
        a->slots[i] = (dsp_api_slot){a, &routes[i]};
        a->routes[i] =
            (hr_httpd_route){routes[i].method,
                             routes[i].pattern,
                             dsp_api_serve,
                             &a->slots[i],
                             routes[i].fn != NULL && !routes[i].anyone ? dsp_api_auth : NULL,
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
