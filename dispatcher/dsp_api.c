/* dsp_api: herald-dispatcher's HTTP server (hr_httpd on dispatcher.listen,
 * dispatcher.api.threads pool threads): /metrics, /healthz, /readyz and the
 * /v1 API of docs/api.md.
 *
 * Every route goes through dsp_api_serve, which checks the bearer token
 * (/v1 only, whenever tokens are configured; constant-time,
 * hr_httpd_bearer_ok; without tokens the API only starts when
 * api.insecure is set), takes a connection pair
 * from the API's own pool (one per request in flight, made lazily, kept
 * for later requests), runs the handler and counts the request in
 * herald_api_requests_total{route,code}.  Handlers validate everything
 * before they change anything, so an error answer never leaves a change
 * behind.  This file: tasks (create, patch, get, list) and control
 * (pause/resume/cancel); dsp_api_subs.c: subscribers and the pull. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dsp_api.h"
#include "hr_log.h"

#define DSP_API_LIST_MAX 1000
#define DSP_API_LIST_DEFAULT 100
#define DSP_API_TASK_FINISHED(s) \
    (strcmp((s), "done") == 0 || strcmp((s), "cancelled") == 0 || strcmp((s), "failed") == 0)

/* ---- shared helpers ------------------------------------------------------ */

bool dsp_api_id(const hr_httpd_req *req, const char *name, hr_httpd_resp *resp, int64_t *out)
{
    const char *s = hr_httpd_param(req, name);
    char *end;
    long long v;

    errno = 0;
    v = s != NULL && s[0] >= '1' && s[0] <= '9' ? strtoll(s, &end, 10) : 0;
    if (v <= 0 || errno != 0 || *end != '\0') {
        hr_httpd_error(resp, 400, "bad_id", "%s must be a positive integer", name);
        return false;
    }
    *out = v;
    return true;
}

cJSON *dsp_api_body(const hr_httpd_req *req, hr_httpd_resp *resp)
{
    const char *end = NULL;
    cJSON *j;

    /* JSON text is UTF-8 (RFC 8259); cJSON passes other bytes through, and
     * MySQL would refuse them later with an error that is not the client's
     * to retry. */
    if (!hr_utf8_valid(req->body, req->body_len)) {
        hr_httpd_error(resp, 400, "malformed_json", "the body is not valid UTF-8");
        return NULL;
    }
    j = cJSON_ParseWithLengthOpts(req->body, req->body_len, &end, false);
    if (j == NULL) {
        hr_httpd_error(resp, 400, "malformed_json", "the body is not valid JSON (near byte %zu)",
                       end != NULL ? (size_t)(end - req->body) : (size_t)0);
        return NULL;
    }
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        hr_httpd_error(resp, 400, "malformed_json", "the body must be a JSON object");
        return NULL;
    }
    return j;
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

bool dsp_api_task(dsp_api_conn *c, int64_t id, hr_httpd_resp *resp, hr_task **t)
{
    char err[512];
    int rc = hr_task_load(c->m, id, t, err, sizeof err);

    if (rc < 0)
        dsp_api_backend_error(resp, "mysql", err);
    else if (rc == 1)
        hr_httpd_error(resp, 404, "not_found", "task %lld does not exist", (long long)id);
    return rc == 0;
}

void dsp_api_time(int64_t ms, char *buf, size_t len)
{
    time_t s = (time_t)(ms / 1000);
    struct tm tm;

    gmtime_r(&s, &tm);
    snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
}

/* RFC 3339 UTC ("...Z", optional fraction) or epoch ms into *MS. */
static bool dsp_api_parse_time(const cJSON *v, int64_t *ms)
{
    struct tm tm = {0};
    int n = 0, frac = 0, digits = 0;
    const char *p;

    if (cJSON_IsNumber(v)) {
        *ms = (int64_t)v->valuedouble;
        return v->valuedouble >= 0 && v->valuedouble < 253402300800000.0 &&
               (double)*ms == v->valuedouble;
    }
    if (!cJSON_IsString(v) ||
        sscanf(v->valuestring, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
               &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6 || n != 19)
        return false;
    p = v->valuestring + n;
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++, digits++)
            if (digits < 3)
                frac = frac * 10 + (*p - '0');
    for (; digits > 0 && digits < 3; digits++)
        frac *= 10;
    if (strcmp(p, "Z") != 0 || tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 ||
        tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60)
        return false;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    *ms = (int64_t)timegm(&tm) * 1000 + frac;
    return true;
}

/* ---- task JSON ------------------------------------------------------------ */

static void dsp_api_add_time(cJSON *o, const char *name, int64_t ms)
{
    char buf[40];

    if (ms < 0) {
        cJSON_AddNullToObject(o, name);
        return;
    }
    dsp_api_time(ms, buf, sizeof buf);
    cJSON_AddStringToObject(o, name, buf);
}

static void dsp_api_add_str(cJSON *o, const char *name, const char *s)
{
    if (s != NULL)
        cJSON_AddStringToObject(o, name, s);
    else
        cJSON_AddNullToObject(o, name);
}

static cJSON *dsp_api_task_json(const hr_task *t)
{
    cJSON *o = cJSON_CreateObject(), *counters;

    cJSON_AddNumberToObject(o, "id", (double)t->id);
    dsp_api_add_str(o, "name", t->name);
    dsp_api_add_str(o, "topic", t->topic);
    dsp_api_add_str(o, "channel", t->channel);
    dsp_api_add_str(o, "title", t->title);
    dsp_api_add_str(o, "body", t->body);
    if (t->payload == NULL || !cJSON_AddItemToObject(o, "payload", cJSON_Parse(t->payload)))
        cJSON_AddNullToObject(o, "payload");
    dsp_api_add_time(o, "due_at", t->due_ms);
    dsp_api_add_time(o, "freeze_at", t->freeze_ms);
    cJSON_AddNumberToObject(o, "rate_limit", (double)t->rate_limit);
    cJSON_AddNumberToObject(o, "chunk_size", (double)t->chunk_size);
    cJSON_AddNumberToObject(o, "throttle_limit", (double)t->throttle_limit);
    cJSON_AddNumberToObject(o, "throttle_window_s", (double)t->throttle_window_s);
    dsp_api_add_str(o, "throttle_scope", t->throttle_scope);
    dsp_api_add_str(o, "throttle_key", t->throttle_key);
    dsp_api_add_str(o, "throttle_mode", t->throttle_mode);
    dsp_api_add_str(o, "control", t->control);
    dsp_api_add_str(o, "state", t->state);
    dsp_api_add_str(o, "last_error", t->last_error);
    dsp_api_add_str(o, "claimed_by", t->claimed_by);
    counters = cJSON_AddObjectToObject(o, "counters");
    cJSON_AddNumberToObject(counters, "total", (double)t->total);
    cJSON_AddNumberToObject(counters, "sent", (double)t->sent);
    cJSON_AddNumberToObject(counters, "failed", (double)t->failed);
    cJSON_AddNumberToObject(counters, "throttled", (double)t->throttled);
    cJSON_AddNumberToObject(counters, "pulled", (double)t->pulled);
    cJSON_AddNumberToObject(counters, "cancelled", (double)t->cancelled);
    cJSON_AddNumberToObject(counters, "retried", (double)t->retried);
    return o;
}

/* The live half of GET /v1/tasks/{id}: Redis state, progress and ETA.
 * Progress: done = sent + failed + throttled + pulled + cancelled (MySQL),
 * total = published recipients + recipients not chunked yet (SCARD subs);
 * ETA = remaining at the average rate since the due time. */
static void dsp_api_task_live(dsp_api_conn *c, const hr_task *t, cJSON *o)
{
    char keys[2][256], err[256];
    redisReply *subs, *stats;
    cJSON *live = cJSON_AddObjectToObject(o, "live"), *st, *progress;
    int64_t published = t->total, done, total, now = dsp_now_ms();
    size_t i;

    hr_redis_task_key(c->r, keys[0], sizeof keys[0], t->id, "subs");
    hr_redis_task_key(c->r, keys[1], sizeof keys[1], t->id, "stats");
    subs = hr_redis_cmdf(c->r, err, sizeof err, "SCARD %s", keys[0]);
    stats = subs != NULL ? hr_redis_cmdf(c->r, err, sizeof err, "HGETALL %s", keys[1]) : NULL;
    if (stats == NULL) {
        cJSON_AddStringToObject(live, "error", err);
        freeReplyObject(subs);
        return;
    }
    cJSON_AddNumberToObject(live, "subs", (double)subs->integer);
    st = cJSON_AddObjectToObject(live, "stats");
    for (i = 0; i + 1 < stats->elements; i += 2) {
        int64_t v = strtoll(stats->element[i + 1]->str, NULL, 10);

        cJSON_AddNumberToObject(st, stats->element[i]->str, (double)v);
        if (strcmp(stats->element[i]->str, "published") == 0 && v > published)
            published = v;
    }
    done = t->sent + t->failed + t->throttled + t->pulled + t->cancelled;
    total = published + subs->integer;
    progress = cJSON_AddObjectToObject(o, "progress");
    cJSON_AddNumberToObject(progress, "done", (double)done);
    cJSON_AddNumberToObject(progress, "total", (double)total);
    cJSON_AddNumberToObject(progress, "ratio", total > 0 ? (double)done / (double)total : 0);
    if (done > 0 && done < total && t->due_ms > 0 && now > t->due_ms &&
        !DSP_API_TASK_FINISHED(t->state))
        cJSON_AddNumberToObject(progress, "eta_s",
                                (double)(total - done) * (double)(now - t->due_ms) /
                                    (double)done / 1000.0);
    else
        cJSON_AddNullToObject(progress, "eta_s");
    freeReplyObject(subs);
    freeReplyObject(stats);
}

/* ---- POST /v1/tasks, PATCH /v1/tasks/{id} --------------------------------- */

typedef enum dsp_api_kind { DSP_F_STR, DSP_F_INT, DSP_F_OBJ, DSP_F_TIME } dsp_api_kind;

/* The task fields the API takes: name, kind, longest value (the column's),
 * whether PATCH may change it (the freeze trigger's columns). */
static const struct dsp_api_field {
    const char *name;
    dsp_api_kind kind;
    size_t max;
    bool patch;
} dsp_api_fields[] = {
    {"name", DSP_F_STR, 200, false},         {"topic", DSP_F_STR, 100, false},
    {"channel", DSP_F_STR, 64, false},       {"title", DSP_F_STR, 65535, true},
    {"body", DSP_F_STR, 65535, true},        {"payload", DSP_F_OBJ, 0, true},
    {"due_at", DSP_F_TIME, 0, true},         {"freeze_at", DSP_F_TIME, 0, false},
    {"rate_limit", DSP_F_INT, 0, false},     {"chunk_size", DSP_F_INT, 0, false},
    {"throttle_limit", DSP_F_INT, 0, false}, {"throttle_window_s", DSP_F_INT, 0, false},
    {"throttle_scope", DSP_F_STR, 100, false}, {"throttle_key", DSP_F_STR, 100, false},
    {"throttle_mode", DSP_F_STR, 16, false},
};

/* The values of a request, pointing into its cJSON (payload: owned). */
typedef struct dsp_api_input {
    hr_task t;
    bool has_due, has_freeze;
} dsp_api_input;

/* Checks every member of J against the field table (PATCH: only the
 * patchable ones) and copies the values into IN, which starts with the
 * defaults or the stored task.  false after answering 400. */
static bool dsp_api_input_read(const cJSON *j, bool patch, dsp_api_input *in,
                               hr_httpd_resp *resp)
{
    const cJSON *v;
    size_t f, nf = sizeof dsp_api_fields / sizeof dsp_api_fields[0];

    cJSON_ArrayForEach(v, j) {
        const struct dsp_api_field *fd = NULL;
        int64_t ms = -1;

        for (f = 0; f < nf; f++)
            if (strcmp(dsp_api_fields[f].name, v->string) == 0)
                fd = &dsp_api_fields[f];
        if (fd == NULL || (patch && !fd->patch)) {
            hr_httpd_error(resp, 400, "unknown_field", "unknown field '%s'%s", v->string,
                           fd != NULL ? " (PATCH changes title, body, payload and due_at)" : "");
            return false;
        }
        switch (fd->kind) {
        case DSP_F_STR:
            if (!cJSON_IsString(v) || strlen(v->valuestring) > fd->max) {
                hr_httpd_error(resp, 400, "bad_field", "%s must be a string of at most %zu bytes",
                               fd->name, fd->max);
                return false;
            }
            break;
        case DSP_F_INT:
            if (!cJSON_IsNumber(v) || v->valuedouble != (double)(int32_t)v->valuedouble) {
                hr_httpd_error(resp, 400, "bad_field", "%s must be an integer", fd->name);
                return false;
            }
            break;
        case DSP_F_OBJ:
            if (!cJSON_IsObject(v)) {
                hr_httpd_error(resp, 400, "bad_field", "%s must be a JSON object", fd->name);
                return false;
            }
            break;
        case DSP_F_TIME:
            if (!dsp_api_parse_time(v, &ms)) {
                hr_httpd_error(resp, 400, "bad_field",
                               "%s must be RFC 3339 UTC (2024-05-01T08:00:00Z) or epoch ms",
                               fd->name);
                return false;
            }
            break;
        }
        if (strcmp(fd->name, "name") == 0) in->t.name = v->valuestring;
        else if (strcmp(fd->name, "topic") == 0) in->t.topic = v->valuestring;
        else if (strcmp(fd->name, "channel") == 0) in->t.channel = v->valuestring;
        else if (strcmp(fd->name, "title") == 0) in->t.title = v->valuestring;
        else if (strcmp(fd->name, "body") == 0) in->t.body = v->valuestring;
        else if (strcmp(fd->name, "payload") == 0) in->t.payload = cJSON_PrintUnformatted(v);
        else if (strcmp(fd->name, "due_at") == 0) { in->t.due_ms = ms; in->has_due = true; }
        else if (strcmp(fd->name, "freeze_at") == 0) { in->t.freeze_ms = ms; in->has_freeze = true; }
        else if (strcmp(fd->name, "rate_limit") == 0) in->t.rate_limit = (int64_t)v->valuedouble;
        else if (strcmp(fd->name, "chunk_size") == 0) in->t.chunk_size = (int64_t)v->valuedouble;
        else if (strcmp(fd->name, "throttle_limit") == 0) in->t.throttle_limit = (int64_t)v->valuedouble;
        else if (strcmp(fd->name, "throttle_window_s") == 0) in->t.throttle_window_s = (int64_t)v->valuedouble;
        else if (strcmp(fd->name, "throttle_scope") == 0) in->t.throttle_scope = v->valuestring;
        else if (strcmp(fd->name, "throttle_key") == 0) in->t.throttle_key = v->valuestring;
        else if (strcmp(fd->name, "throttle_mode") == 0) in->t.throttle_mode = v->valuestring;
    }
    if (in->t.throttle_mode != NULL && strcmp(in->t.throttle_mode, "enforce") != 0 &&
        strcmp(in->t.throttle_mode, "shadow") != 0) {
        hr_httpd_error(resp, 400, "bad_field", "throttle_mode must be enforce or shadow");
        return false;
    }
    return true;
}

static hr_mysql_param dsp_api_p_str(const char *s)
{
    return s != NULL ? HR_P_STR(s) : HR_P_NULL;
}

static void dsp_api_create(dsp_api *a, dsp_api_conn *c, const hr_httpd_req *req,
                           hr_httpd_resp *resp)
{
    cJSON *j = dsp_api_body(req, resp);
    dsp_api_input in = {.t = {.topic = "default", .title = "", .body = "", .chunk_size = 5000,
                              .due_ms = -1, .freeze_ms = -1, .control = "run",
                              .state = "scheduled"}};
    hr_task *t = NULL;
    char err[512];
    uint64_t id = 0;
    const char *scope;

    if (j == NULL || !dsp_api_input_read(j, false, &in, resp))
        goto done;
    if (in.t.name == NULL || in.t.channel == NULL || !in.has_due) {
        hr_httpd_error(resp, 400, "missing_field", "name, channel and due_at are required");
        goto done;
    }
    scope = in.t.throttle_scope;
    if (in.t.throttle_scope == NULL)
        in.t.throttle_scope = in.t.topic; /* what hr_task_load would give */
    if (hr_task_validate(&in.t, a->d->cfg, err, sizeof err) < 0) {
        hr_httpd_error(resp, 400, "invalid_task", "%s", err);
        goto done;
    }
    {
        const hr_mysql_param p[] = {
            HR_P_STR(in.t.name), HR_P_STR(in.t.topic), HR_P_STR(in.t.channel),
            HR_P_STR(in.t.title), HR_P_STR(in.t.body), dsp_api_p_str(in.t.payload),
            HR_P_I64(in.t.due_ms), in.has_freeze ? HR_P_I64(in.t.freeze_ms) : HR_P_NULL,
            HR_P_I64(in.t.rate_limit), HR_P_I64(in.t.chunk_size), HR_P_I64(in.t.throttle_limit),
            HR_P_I64(in.t.throttle_window_s), dsp_api_p_str(scope),
            dsp_api_p_str(in.t.throttle_key), dsp_api_p_str(in.t.throttle_mode)};

        if (hr_mysql_exec(c->m,
                          "INSERT INTO push_task (name, topic, channel, title, body, payload, "
                          "due_at, freeze_at, rate_limit, chunk_size, throttle_limit, "
                          "throttle_window_s, throttle_scope, throttle_key, throttle_mode) "
                          "VALUES (?, ?, ?, ?, ?, ?, FROM_UNIXTIME(? / 1000), "
                          "FROM_UNIXTIME(? / 1000), ?, ?, ?, ?, ?, ?, ?)",
                          p, 15, NULL, &id, NULL, err, sizeof err) < 0) {
            dsp_api_backend_error(resp, "mysql", err);
            goto done;
        }
    }
    if (!dsp_api_task(c, (int64_t)id, resp, &t))
        goto done;
    hr_log_info("api_task_created", "task=%llu name=%s", (unsigned long long)id, t->name);
    dsp_api_reply(resp, 201, dsp_api_task_json(t));
done:
    hr_task_free(t);
    free(in.t.payload);
    cJSON_Delete(j);
}

static void dsp_api_patch(dsp_api *a, dsp_api_conn *c, const hr_httpd_req *req,
                          hr_httpd_resp *resp)
{
    cJSON *j = NULL;
    hr_task *t = NULL;
    dsp_api_input in = {0};
    int64_t id;
    uint64_t affected = 0;
    unsigned sqlerr = 0;
    char err[512];

    if (!dsp_api_id(req, "id", resp, &id) || (j = dsp_api_body(req, resp)) == NULL ||
        !dsp_api_task(c, id, resp, &t))
        goto done;
    in.t = *t;
    in.t.payload = NULL;
    if (!dsp_api_input_read(j, true, &in, resp))
        goto done;
    if (in.t.payload == NULL && t->payload != NULL)
        in.t.payload = strdup(t->payload);
    if (hr_task_validate(&in.t, a->d->cfg, err, sizeof err) < 0) {
        hr_httpd_error(resp, 400, "invalid_task", "%s", err);
        goto done;
    }
    if (strcmp(t->state, "scheduled") != 0) {
        hr_httpd_error(resp, 409, "wrong_state", "task %lld is %s; only a scheduled task changes",
                       (long long)id, t->state);
        goto done;
    }
    {
        const hr_mysql_param p[] = {HR_P_STR(in.t.title), HR_P_STR(in.t.body),
                                    dsp_api_p_str(in.t.payload), HR_P_I64(in.t.due_ms),
                                    HR_P_I64(id)};

        if (hr_mysql_exec(c->m,
                          "UPDATE push_task SET title = ?, body = ?, payload = ?, "
                          "due_at = FROM_UNIXTIME(? / 1000) WHERE id = ? AND state = 'scheduled'",
                          p, 5, &affected, NULL, &sqlerr, err, sizeof err) < 0) {
            if (sqlerr == 1644) /* the freeze trigger */
                hr_httpd_error(resp, 409, "frozen", "%s", err);
            else
                dsp_api_backend_error(resp, "mysql", err);
            goto done;
        }
    }
    hr_task_free(t);
    t = NULL;
    if (!dsp_api_task(c, id, resp, &t))
        goto done;
    dsp_api_reply(resp, 200, dsp_api_task_json(t));
done:
    free(in.t.payload);
    hr_task_free(t);
    cJSON_Delete(j);
}

/* ---- GET /v1/tasks/{id}, GET /v1/tasks ------------------------------------ */

static void dsp_api_get(dsp_api *a, dsp_api_conn *c, const hr_httpd_req *req,
                        hr_httpd_resp *resp)
{
    hr_task *t = NULL;
    cJSON *o;
    int64_t id;

    (void)a;
    if (!dsp_api_id(req, "id", resp, &id) || !dsp_api_task(c, id, resp, &t))
        return;
    o = dsp_api_task_json(t);
    dsp_api_task_live(c, t, o);
    dsp_api_reply(resp, 200, o);
    hr_task_free(t);
}

static void dsp_api_list(dsp_api *a, dsp_api_conn *c, const hr_httpd_req *req,
                         hr_httpd_resp *resp)
{
    static const char *const states[] = {"scheduled", "dispatching", "dispatched", "done",
                                         "paused",    "cancelled",   "failed"};
    const char *state = hr_httpd_query(req, "state"), *limit_s = hr_httpd_query(req, "limit");
    long limit = DSP_API_LIST_DEFAULT;
    hr_task **tasks = NULL;
    size_t n = 0, i;
    cJSON *o, *arr;
    char err[512], *end;
    bool known = state == NULL;

    (void)a;
    for (i = 0; state != NULL && i < sizeof states / sizeof states[0]; i++)
        known = known || strcmp(state, states[i]) == 0;
    if (!known) {
        hr_httpd_error(resp, 400, "bad_query", "state must be one of scheduled, dispatching, "
                       "dispatched, done, paused, cancelled, failed");
        return;
    }
    if (limit_s != NULL) {
        limit = strtol(limit_s, &end, 10);
        if (*limit_s == '\0' || *end != '\0' || limit < 1 || limit > DSP_API_LIST_MAX) {
            hr_httpd_error(resp, 400, "bad_query", "limit must be 1..%d", DSP_API_LIST_MAX);
            return;
        }
    }
    {
        const hr_mysql_param p[] = {dsp_api_p_str(state), dsp_api_p_str(state), HR_P_I64(limit)};

        if (dsp_store_tasks(c->m,
                            "SELECT " HR_TASK_COLUMNS " FROM push_task "
                            "WHERE (? IS NULL OR state = ?) ORDER BY id DESC LIMIT ?",
                            p, 3, &tasks, &n, err, sizeof err) < 0) {
            dsp_api_backend_error(resp, "mysql", err);
            return;
        }
    }
    o = cJSON_CreateObject();
    arr = cJSON_AddArrayToObject(o, "tasks");
    for (i = 0; i < n; i++)
        cJSON_AddItemToArray(arr, dsp_api_task_json(tasks[i]));
    dsp_store_tasks_free(tasks, n);
    dsp_api_reply(resp, 200, o);
}

/* ---- POST /v1/tasks/{id}/pause|resume|cancel ------------------------------ */

/* The same as an admin's UPDATE push_task SET control = ..., plus the ctl
 * key at once so workers react without waiting for a dispatcher tick; the
 * dispatchers' control scan carries out the state transition. */
static void dsp_api_control(dsp_api *a, dsp_api_conn *c, const hr_httpd_req *req,
                            hr_httpd_resp *resp, const char *control)
{
    hr_task *t = NULL;
    char err[512];
    int64_t id;

    (void)a;
    if (!dsp_api_id(req, "id", resp, &id) || !dsp_api_task(c, id, resp, &t))
        return;
    if (DSP_API_TASK_FINISHED(t->state)) {
        hr_httpd_error(resp, 409, "finished", "task %lld is already %s", (long long)id,
                       t->state);
        goto done;
    }
    switch (hr_task_set_control(c->m, c->r, id, control, err, sizeof err)) {
    case -1:
        dsp_api_backend_error(resp, "mysql", err);
        goto done;
    case 1:
        /* MySQL holds the wish; the next dispatcher scan mirrors it. */
        hr_log_warn("api_ctl_key_failed", "task=%lld control=%s error=%s", (long long)id,
                    control, err);
        break;
    }
    hr_log_info("api_task_control", "task=%lld control=%s", (long long)id, control);
    hr_task_free(t);
    t = NULL;
    if (dsp_api_task(c, id, resp, &t))
        dsp_api_reply(resp, 200, dsp_api_task_json(t));
done:
    hr_task_free(t);
}

/* ---- serving -------------------------------------------------------------- */

static dsp_api_conn *dsp_api_acquire(dsp_api *a, char *err, size_t errlen, const char **what)
{
    dsp_api_conn *c = NULL;
    size_t i;

    pthread_mutex_lock(&a->pool_mu);
    while (c == NULL) {
        for (i = 0; i < a->npool && c == NULL; i++)
            if (!a->pool[i].busy)
                c = &a->pool[i];
        if (c == NULL)
            pthread_cond_wait(&a->pool_cv, &a->pool_mu);
    }
    c->busy = true;
    pthread_mutex_unlock(&a->pool_mu);
    *what = "mysql";
    if (c->m == NULL && hr_mysql_connect(a->d->cfg, &c->m, err, errlen) < 0)
        goto failed;
    *what = "redis";
    if (c->r == NULL && hr_redis_connect(a->d->cfg, &c->r, err, errlen) < 0)
        goto failed;
    return c;
failed:
    pthread_mutex_lock(&a->pool_mu);
    c->busy = false;
    pthread_cond_signal(&a->pool_cv);
    pthread_mutex_unlock(&a->pool_mu);
    return NULL;
}

static void dsp_api_release(dsp_api *a, dsp_api_conn *c)
{
    pthread_mutex_lock(&a->pool_mu);
    c->busy = false;
    pthread_cond_signal(&a->pool_cv);
    pthread_mutex_unlock(&a->pool_mu);
}

static void dsp_api_serve(void *ctx, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    const dsp_api_route *rt = ctx;
    dsp_api *a = rt->a;
    const hr_config *cfg = a->d->cfg;
    dsp_api_conn *c;
    const char *what;
    char err[512], code[8];

    if (rt->open) {
        rt->builtin(rt->builtin_ctx, req, resp);
    } else if (cfg->dispatcher.api.ntokens > 0 &&
               !hr_httpd_bearer_ok(req, cfg->dispatcher.api.tokens,
                                   cfg->dispatcher.api.ntokens)) {
        hr_httpd_error(resp, 401, "unauthorized", "a valid 'Authorization: Bearer TOKEN' "
                       "header is required");
        hr_httpd_resp_header(resp, "WWW-Authenticate", "Bearer");
    } else if ((c = dsp_api_acquire(a, err, sizeof err, &what)) == NULL) {
        dsp_api_backend_error(resp, what, err);
    } else {
        if (rt->arg != NULL)
            dsp_api_control(a, c, req, resp, rt->arg);
        else
            rt->fn(a, c, req, resp);
        dsp_api_release(a, c);
    }
    snprintf(code, sizeof code, "%d", resp->status);
    hr_metrics_inc(hr_metrics_labels(a->d->met.api_requests, rt->name, code));
}

/* /readyz: the loop thread's MySQL and Redis worked and are not down, and
 * Kafka is not down (an idle producer has nothing to confirm). */
static bool dsp_api_ready(void *ctx, hr_buf *out)
{
    dsp *d = ctx;
    bool ok[DSP__BACKENDS], all = true;
    char text[160];
    size_t i;
    int n;

    pthread_mutex_lock(&d->health_mu);
    for (i = 0; i < DSP__BACKENDS; i++)
        ok[i] = !d->down[i] && (d->seen[i] || i == DSP_KAFKA);
    pthread_mutex_unlock(&d->health_mu);
    for (i = 0; i < DSP__BACKENDS; i++)
        all = all && ok[i];
    n = snprintf(text, sizeof text, "{\"mysql\":\"%s\",\"redis\":\"%s\",\"kafka\":\"%s\"}",
                 ok[0] ? "ok" : "down", ok[1] ? "ok" : "down", ok[2] ? "ok" : "down");
    hr_buf_append(out, text, (size_t)n);
    return all;
}

static void dsp_api_route_add(dsp_api *a, const char *method, const char *pattern,
                              dsp_api_route rt)
{
    rt.a = a;
    rt.name = pattern;
    a->rctx[a->nroutes] = rt;
    a->routes[a->nroutes] = (hr_httpd_route){method, pattern, dsp_api_serve,
                                             &a->rctx[a->nroutes]};
    a->nroutes++;
}

int dsp_api_start(dsp *d, char *errstr, size_t errlen)
{
    const hr_config *cfg = d->cfg;
    dsp_api *a;

    a = calloc(1, sizeof *a);
    if (a == NULL || (a->pool = calloc((size_t)cfg->dispatcher.api.threads,
                                       sizeof *a->pool)) == NULL) {
        free(a);
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    a->d = d;
    a->npool = (size_t)cfg->dispatcher.api.threads;
    pthread_mutex_init(&a->pool_mu, NULL);
    pthread_cond_init(&a->pool_cv, NULL);
    a->ready = (hr_httpd_ready){dsp_api_ready, d};
    dsp_api_route_add(a, "GET", "/metrics",
                      (dsp_api_route){.open = true, .builtin = hr_httpd_metrics,
                                      .builtin_ctx = d->met.reg});
    dsp_api_route_add(a, "GET", "/healthz",
                      (dsp_api_route){.open = true, .builtin = hr_httpd_healthz});
    dsp_api_route_add(a, "GET", "/readyz",
                      (dsp_api_route){.open = true, .builtin = hr_httpd_readyz,
                                      .builtin_ctx = &a->ready});
    dsp_api_route_add(a, "POST", "/v1/tasks", (dsp_api_route){.fn = dsp_api_create});
    dsp_api_route_add(a, "GET", "/v1/tasks", (dsp_api_route){.fn = dsp_api_list});
    dsp_api_route_add(a, "GET", "/v1/tasks/{id}", (dsp_api_route){.fn = dsp_api_get});
    dsp_api_route_add(a, "PATCH", "/v1/tasks/{id}", (dsp_api_route){.fn = dsp_api_patch});
    dsp_api_route_add(a, "POST", "/v1/tasks/{id}/pause", (dsp_api_route){.arg = "pause"});
    dsp_api_route_add(a, "POST", "/v1/tasks/{id}/resume", (dsp_api_route){.arg = "run"});
    dsp_api_route_add(a, "POST", "/v1/tasks/{id}/cancel", (dsp_api_route){.arg = "cancel"});
    dsp_api_route_add(a, "POST", "/v1/tasks/{id}/subscribers",
                      (dsp_api_route){.fn = dsp_api_subs_add});
    dsp_api_route_add(a, "DELETE", "/v1/tasks/{id}/subscribers/{uid}",
                      (dsp_api_route){.fn = dsp_api_subs_del});
    dsp_api_route_add(a, "GET", "/v1/users/{uid}/reminders",
                      (dsp_api_route){.fn = dsp_api_reminders});
    d->api = a;
    if (hr_httpd_start(cfg->dispatcher.listen, cfg->dispatcher.api.threads, a->routes,
                       a->nroutes, (size_t)cfg->dispatcher.api.max_body_bytes, &a->h, errstr,
                       errlen) < 0) {
        dsp_api_stop(d);
        return -1;
    }
    hr_log_info("api_started", "listen=%s port=%d threads=%d insecure=%d",
                cfg->dispatcher.listen, hr_httpd_port(a->h), cfg->dispatcher.api.threads,
                (int)cfg->dispatcher.api.insecure);
    return 0;
}

void dsp_api_stop(dsp *d)
{
    dsp_api *a = d->api;
    size_t i;

    if (a == NULL)
        return;
    hr_httpd_stop(a->h);
    for (i = 0; i < a->npool; i++) {
        hr_mysql_free(a->pool[i].m);
        hr_redis_free(a->pool[i].r);
    }
    free(a->pool);
    pthread_mutex_destroy(&a->pool_mu);
    pthread_cond_destroy(&a->pool_cv);
    free(a);
    d->api = NULL;
}
