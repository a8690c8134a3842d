/* dsp_api: herald-dispatcher's HTTP server (hr_httpd on dispatcher.listen,
 * dispatcher.api.threads pool threads): /metrics, /healthz, /readyz and the
 * /v1 API of docs/api.md.
 *
 * Every /v1 route has the auth hook dsp_api_auth, which hr_httpd runs on
 * the headers before any body is read: an admin bearer token, whenever
 * tokens are configured (constant-time, hr_httpd_bearer_ok; without tokens
 * the API only starts when api.insecure is set), or on the pull a client
 * token for the uid of the path (hr_ctoken.h).  Every route goes through
 * dsp_api_serve, which takes a connection pair
 * from the API's own pool (one per request in flight, made lazily, kept
 * for later requests), runs the handler and counts the request in
 * herald_api_requests_total{route,code}.  Handlers validate everything
 * before they change anything, so an error answer never leaves a change
 * behind.  This file: tasks (create, patch, get, list) and control
 * (pause/resume/cancel); dsp_api_subs.c: subscribers and the pull;
 * dsp_api_addr.c: the recipients' addresses; dsp_api_ops.c: the operations
 * heraldctl has too (chunks, dead letters, redrive, recover, counts, render);
 * dsp_api_parse.c: the request parsing all of them share; dsp_console.c:
 * the web console's files (open routes, like /healthz). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dsp_api.h"
#include "dsp_console.h"
#include "hr_clock.h"
#include "hr_ctoken.h"
#include "hr_log.h"
#include "hr_parse.h"
#include "hr_progress.h"
#include "hr_state.h"
#include "hr_tz.h"

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

bool dsp_api_task(dsp_api_conn *ac, int64_t id, hr_httpd_resp *resp, hr_task **t)
{
    char err[512];
    int rc = hr_task_load(ac->m, id, t, err, sizeof err);

    if (rc < 0)
        dsp_api_backend_error(resp, "mysql", err);
    else if (rc == 1)
        hr_httpd_error(resp, 404, "not_found", "task %" PRId64 " does not exist", id);
    return rc == 0;
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

/* local_time, default_tz and the window (docs/scheduling.md); bounds as
 * "HH:MM:SS". */
static void dsp_api_add_local(cJSON *o, const hr_task *t)
{
    const int64_t bounds[2] = {t->window_start_s, t->window_end_s};
    const char *names[2] = {"window_start", "window_end"};
    char buf[16];

    cJSON_AddBoolToObject(o, "local_time", t->local_time == 1);
    dsp_api_add_str(o, "default_tz", t->default_tz);
    for (size_t i = 0; i < 2; i++) {
        if (bounds[i] < 0) {
            cJSON_AddNullToObject(o, names[i]);
            continue;
        }
        snprintf(buf, sizeof buf, "%02d:%02d:%02d", (int)(bounds[i] / 3600),
                 (int)(bounds[i] / 60 % 60), (int)(bounds[i] % 60));
        cJSON_AddStringToObject(o, names[i], buf);
    }
    dsp_api_add_str(o, "window_tz", t->window_tz);
}

static cJSON *dsp_api_task_json(const hr_task *t)
{
    cJSON *o = cJSON_CreateObject(), *counters, *payload = NULL;
    char err[256];

    dsp_api_add_id(o, "id", t->id);
    dsp_api_add_str(o, "name", t->name);
    dsp_api_add_str(o, "topic", t->topic);
    dsp_api_add_str(o, "channel", t->channel);
    dsp_api_add_str(o, "title", t->title);
    dsp_api_add_str(o, "body", t->body);
    /* Numbers as stored, not through a double. */
    if (t->payload != NULL &&
        hr_parse_json(t->payload, strlen(t->payload), &payload, err, sizeof err) == 0)
        hr_parse_json_exact(payload);
    if (payload == NULL || !cJSON_AddItemToObject(o, "payload", payload)) {
        cJSON_Delete(payload);
        cJSON_AddNullToObject(o, "payload");
    }
    dsp_api_add_time(o, "due_at", t->due_ms);
    dsp_api_add_time(o, "freeze_at", t->freeze_ms);
    dsp_api_add_time(o, "expire_at", t->expire_ms > 0 ? t->expire_ms : -1);
    cJSON_AddNumberToObject(o, "rate_limit", (double)t->rate_limit);
    cJSON_AddNumberToObject(o, "chunk_size", (double)t->chunk_size);
    cJSON_AddNumberToObject(o, "shards", (double)(t->shards > 1 ? t->shards : 1));
    cJSON_AddNumberToObject(o, "throttle_limit", (double)t->throttle_limit);
    cJSON_AddNumberToObject(o, "throttle_window_s", (double)t->throttle_window_s);
    dsp_api_add_str(o, "throttle_scope", t->throttle_scope);
    dsp_api_add_str(o, "throttle_key", t->throttle_key);
    dsp_api_add_str(o, "throttle_mode", t->throttle_mode);
    if (t->ttl_s >= 0)
        cJSON_AddNumberToObject(o, "ttl", (double)t->ttl_s);
    else
        cJSON_AddNullToObject(o, "ttl");
    dsp_api_add_str(o, "collapse_key", t->collapse_key);
    dsp_api_add_str(o, "priority", hr_priority_name(t->priority));
    dsp_api_add_local(o, t);
    /* pacing and admission (docs/scheduling.md) */
    dsp_api_add_time(o, "finish_by", hr_task_paced(t) ? t->finish_ms : -1);
    dsp_api_add_str(o, "last_warning", t->last_warning);
    dsp_api_add_str(o, "control", hr_control_name(t->control));
    dsp_api_add_str(o, "state", hr_state_name(t->state));
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
    cJSON_AddNumberToObject(counters, "unregistered", (double)t->unregistered);
    cJSON_AddNumberToObject(counters, "expired", (double)t->expired);
    return o;
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

/* The value of FIELD in an HGETALL reply, -1 when absent. */
static int64_t dsp_api_stat(const redisReply *stats, const char *field)
{
    size_t i;

    for (i = 0; stats != NULL && i + 1 < stats->elements; i += 2)
        if (strcmp(stats->element[i]->str, field) == 0)
            return strtoll(stats->element[i + 1]->str, NULL, 10);
    return -1;
}

/* A wave of the waves hash: its release instant and the reply index of
 * its field. */
typedef struct dsp_api_wave {
    int64_t release;
    size_t at;
} dsp_api_wave;

static int dsp_api_wave_cmp(const void *a, const void *b)
{
    int64_t x = ((const dsp_api_wave *)a)->release, y = ((const dsp_api_wave *)b)->release;

    return (x > y) - (x < y);
}

/* A local-time or windowed task's waves into PROGRESS (docs/scheduling.md):
 * "waiting" (members of the wait set) and "waves", one per release instant
 * in time order: its zone, the window's close, recipients, released and
 * still waiting.  *WAITING gets the wait set's size (-1 when Redis does not
 * answer; the waves are then left out).  HGETALL's order is the hash's, so
 * the waves are sorted here and then appended: cJSON_InsertItemInArray at
 * index 0 leaves Debian's cJSON 1.7.15 list with a wrong tail, and a later
 * append lost waves. */
static void dsp_api_waves(dsp_api_conn *ac, const hr_task *t, cJSON *progress, int64_t *waiting)
{
    char wait[HR_KEY_MAX], waves[HR_KEY_MAX], err[256], field[40];
    redisReply *all = NULL, *n;
    dsp_api_wave *order = NULL;
    size_t nwaves = 0;
    cJSON *list;

    *waiting = -1;
    hr_key_task(hr_redis_prefix(ac->r), wait, sizeof wait, t->id, HR_KEY_WAIT);
    hr_key_task(hr_redis_prefix(ac->r), waves, sizeof waves, t->id, HR_KEY_WAVES);
    n = hr_redis_cmdf(ac->r, err, sizeof err, "ZCARD %s", wait);
    if (n == NULL || (all = hr_redis_cmdf(ac->r, err, sizeof err, "HGETALL %s", waves)) == NULL)
        goto done;
    *waiting = n->integer;
    cJSON_AddNumberToObject(progress, "waiting", (double)n->integer);
    list = cJSON_AddArrayToObject(progress, "waves");
    if (all->type != REDIS_REPLY_ARRAY || all->elements < 2 ||
        (order = calloc(all->elements / 2, sizeof *order)) == NULL)
        goto done;
    for (size_t i = 0; i + 1 < all->elements; i += 2) {
        char *end;
        int64_t release = strtoll(all->element[i]->str, &end, 10);

        if (*end == '\0') /* not "planned", "released:<ms>" */
            order[nwaves++] = (dsp_api_wave){.release = release, .at = i};
    }
    qsort(order, nwaves, sizeof *order, dsp_api_wave_cmp);
    for (size_t k = 0; k < nwaves; k++) {
        char zone[HR_TZ_NAME_MAX + 1] = "";
        int64_t release = order[k].release, close = -1, released, left;
        cJSON *w;

        (void)sscanf(all->element[order[k].at + 1]->str, "%" SCNd64 " %64s", &close, zone);
        snprintf(field, sizeof field, "released:%" PRId64, release);
        released = hr_progress_merge(0, dsp_api_stat(all, field));
        left = dsp_reply_int(hr_redis_cmdf(ac->r, err, sizeof err, "ZCOUNT %s %" PRId64 " %" PRId64,
                                           wait, release, release));
        w = cJSON_CreateObject();
        dsp_api_add_time(w, "release_at", release);
        cJSON_AddStringToObject(w, "zone", zone);
        dsp_api_add_time(w, "window_closes_at", close);
        cJSON_AddNumberToObject(w, "recipients", (double)(released + (left > 0 ? left : 0)));
        cJSON_AddNumberToObject(w, "released", (double)released);
        cJSON_AddNumberToObject(w, "waiting", (double)(left > 0 ? left : 0));
        cJSON_AddItemToArray(list, w);
    }
done:
    free(order);
    freeReplyObject(n);
    freeReplyObject(all);
}

/* Finish-by pacing's part of the progress (docs/scheduling.md): the rate
 * in force (the stats hash's planned_rate, null before the owner derived
 * one) and the plan a console draws against the actual `done`: the
 * straight line from due_at to finish_by.  null for a task without one. */
static void dsp_api_task_plan(const hr_task *t, const hr_shard_stats *stats, const hr_progress *pr,
                              int64_t now, cJSON *progress)
{
    int64_t rate = hr_shard_stats_get(stats, "planned_rate");
    cJSON *plan;

    if (rate > 0)
        cJSON_AddNumberToObject(progress, "planned_rate", (double)rate);
    else
        cJSON_AddNullToObject(progress, "planned_rate");
    if (!hr_task_paced(t)) {
        cJSON_AddNullToObject(progress, "plan");
        return;
    }
    plan = cJSON_AddObjectToObject(progress, "plan");
    dsp_api_add_time(plan, "start", t->due_ms);
    dsp_api_add_time(plan, "finish_by", t->finish_ms);
    dsp_api_add_time(plan, "now", now);
    cJSON_AddNumberToObject(plan, "planned_done_now",
                            (double)hr_pace_planned_done(pr->total, t->due_ms, t->finish_ms, now));
}

/* The live half of GET /v1/tasks/{id}: Redis state, and the progress of
 * hr_progress (docs/api.md "Progress"): each outcome the larger of MySQL's
 * counter and the stats hash's, total the subscriptions; ETA = remaining
 * at the average rate since the due time.  Without Redis the progress
 * still comes from MySQL. */
static void dsp_api_task_live(dsp_api_conn *ac, const hr_task *t, cJSON *o)
{
    char err[256];
    hr_shard_stats stats = {0}; /* summed over the shards; empty without Redis */
    cJSON *live = cJSON_AddObjectToObject(o, "live"), *st, *progress, *oc;
    const int64_t mysql[HR_OUTCOME_UNACCOUNTED] = {
        t->sent, t->failed, t->throttled, t->pulled, t->cancelled, t->unregistered, t->expired};
    hr_progress_in in = {.subscriptions = dsp_api_subscriptions(ac, t->id),
                         .subs_left = -1,
                         .finished = hr_state_final(t->state)};
    hr_progress pr;
    int64_t now = hr_clock_now_ms(), subs;
    size_t i;

    /* A sharded task's live state is the sum of its shards'. */
    if (hr_shard_sum(ac->r, t->id, (int)t->shards, "SCARD", HR_KEY_SUBS, &subs, err, sizeof err) <
            0 ||
        hr_shard_stats_read(ac->r, t->id, (int)t->shards, &stats, err, sizeof err) < 0) {
        cJSON_AddStringToObject(live, "error", err);
        stats.n = 0;
    } else {
        in.subs_left = subs;
        cJSON_AddNumberToObject(live, "subs", (double)subs);
        st = cJSON_AddObjectToObject(live, "stats");
        for (i = 0; i < stats.n; i++)
            cJSON_AddNumberToObject(st, stats.v[i].name, (double)stats.v[i].value);
    }
    for (i = 0; i < HR_OUTCOME_UNACCOUNTED; i++)
        in.outcome[i] =
            hr_progress_merge(mysql[i], hr_shard_stats_get(&stats, hr_progress_outcome_name(i)));
    in.published = hr_progress_merge(t->total, hr_shard_stats_get(&stats, "published"));
    progress = cJSON_CreateObject();
    if (hr_task_waits(t)) {
        int64_t waiting;

        /* Not chunked yet either: the fallback total counts them. */
        dsp_api_waves(ac, t, progress, &waiting);
        if (in.subs_left >= 0 && waiting > 0)
            in.subs_left += waiting;
    }
    hr_progress_compute(&in, &pr);
    cJSON_AddItemToObject(o, "progress", progress);
    cJSON_AddNumberToObject(progress, "done", (double)pr.done);
    cJSON_AddNumberToObject(progress, "total", (double)pr.total);
    cJSON_AddNumberToObject(progress, "ratio", pr.ratio);
    oc = cJSON_AddObjectToObject(progress, "outcomes");
    for (i = 0; i < HR__OUTCOMES; i++)
        cJSON_AddNumberToObject(oc, hr_progress_outcome_name(i), (double)pr.outcome[i]);
    cJSON_AddNumberToObject(progress, "over", (double)pr.over);
    /* Reported beside the outcomes, not among them: attempts, and pushes a
     * shadow-mode throttle let through. */
    cJSON_AddNumberToObject(
        progress, "retried",
        (double)hr_progress_merge(t->retried, hr_shard_stats_get(&stats, "retried")));
    cJSON_AddNumberToObject(
        progress, "shadowed",
        (double)hr_progress_merge(0, hr_shard_stats_get(&stats, "throttle_shadowed")));
    if (pr.done > 0 && pr.done < pr.total && t->due_ms > 0 && now > t->due_ms && !in.finished)
        cJSON_AddNumberToObject(progress, "eta_s",
                                (double)(pr.total - pr.done) * (double)(now - t->due_ms) /
                                    (double)pr.done / 1000.0);
    else
        cJSON_AddNullToObject(progress, "eta_s");
    dsp_api_task_plan(t, &stats, &pr, now, progress);
    hr_vec_free(&stats);
}

/* ---- POST /v1/tasks, PATCH /v1/tasks/{id} --------------------------------- */

static hr_mysql_param dsp_api_p_str(const char *s)
{
    return s != NULL ? HR_P_STR(s) : HR_P_NULL;
}

/* finish_by -1 is the column's NULL (no pacing). */
static hr_mysql_param dsp_api_p_finish(const hr_task *t)
{
    return hr_task_paced(t) ? HR_P_I64(t->finish_ms) : HR_P_NULL;
}

/* Admission control of the task *T just written, then *T reloaded with its
 * last_warning.  A failed estimate is logged, not answered: the task is
 * written, and the scanner estimates it again before due.  false when the
 * reply is made (the reload failed). */
static bool dsp_api_admit(dsp_api *a, dsp_api_conn *ac, hr_httpd_resp *resp, hr_task **t)
{
    int64_t id = (*t)->id;
    char err[512];

    if (dsp_admit(a->d, ac->m, ac->r, *t, hr_clock_now_ms(), err, sizeof err) < 0) {
        hr_log_warn("admission_failed", "task=%" PRId64 " error=%s", id, err);
        return true;
    }
    hr_task_free(*t);
    *t = NULL;
    return dsp_api_task(ac, id, resp, t);
}

/* A window bound in seconds of the day; -1 is the column's NULL. */
static hr_mysql_param dsp_api_p_tod(int64_t secs)
{
    return secs >= 0 ? HR_P_I64(secs) : HR_P_NULL;
}

/* ttl_s -1 is the column's NULL (the provider's default). */
static hr_mysql_param dsp_api_p_ttl(int64_t ttl_s)
{
    return ttl_s >= 0 ? HR_P_I64(ttl_s) : HR_P_NULL;
}

/* expiry: expire_ms <= 0 is the column's NULL (never). */
static hr_mysql_param dsp_api_p_expire(int64_t expire_ms)
{
    return expire_ms > 0 ? HR_P_I64(expire_ms) : HR_P_NULL;
}

bool dsp_api_task_input(dsp_api *a, const cJSON *j, dsp_api_input *in, const char **scope,
                        hr_httpd_resp *resp)
{
    char err[1024];
    const char *code;

    *in = (dsp_api_input){0};
    hr_task_defaults(&in->t);
    if (dsp_api_parse_task(j, false, in, &code, err, sizeof err) < 0) {
        hr_httpd_error(resp, 400, code, "%s", err);
        return false;
    }
    *scope = in->t.throttle_scope;
    if (in->t.throttle_scope == NULL)
        in->t.throttle_scope = in->t.topic; /* what hr_task_load would give */
    if (hr_task_validate(&in->t, a->d->cfg, err, sizeof err) < 0) {
        hr_httpd_error(resp, 400, "invalid_task", "%s", err);
        return false;
    }
    return true;
}

static void dsp_api_create(dsp_api *a, dsp_api_conn *ac, const hr_httpd_req *req,
                           hr_httpd_resp *resp)
{
    cJSON *j = dsp_api_body(req, resp);
    dsp_api_input in = {0};
    hr_task *t = NULL;
    char err[1024];
    uint64_t id = 0;
    const char *scope;

    if (j == NULL || !dsp_api_task_input(a, j, &in, &scope, resp))
        goto done;
    {
        const hr_mysql_param p[] = {
            HR_P_STR(in.t.name), HR_P_STR(in.t.topic), HR_P_STR(in.t.channel), HR_P_STR(in.t.title),
            HR_P_STR(in.t.body), dsp_api_p_str(in.t.payload), HR_P_I64(in.t.due_ms),
            in.has_freeze ? HR_P_I64(in.t.freeze_ms) : HR_P_NULL, HR_P_I64(in.t.rate_limit),
            HR_P_I64(in.t.chunk_size), HR_P_I64(in.t.throttle_limit),
            HR_P_I64(in.t.throttle_window_s), dsp_api_p_str(scope),
            dsp_api_p_str(in.t.throttle_key), dsp_api_p_str(in.t.throttle_mode),
            dsp_api_p_ttl(in.t.ttl_s), dsp_api_p_str(in.t.collapse_key),
            HR_P_STR(hr_priority_name(in.t.priority)),
            /* local time and send windows */
            HR_P_I64(in.t.local_time), dsp_api_p_str(in.t.default_tz),
            dsp_api_p_tod(in.t.window_start_s), dsp_api_p_tod(in.t.window_end_s),
            dsp_api_p_str(in.t.window_tz),
            /* expiry */
            dsp_api_p_expire(in.t.expire_ms),
            /* pacing */
            dsp_api_p_finish(&in.t),
            /* sharded tasks */
            HR_P_I64(in.t.shards)};

        if (hr_mysql_exec(ac->m,
                          "INSERT INTO push_task (name, topic, channel, title, body, payload, "
                          "due_at, freeze_at, rate_limit, chunk_size, throttle_limit, "
                          "throttle_window_s, throttle_scope, throttle_key, throttle_mode, "
                          "ttl_s, collapse_key, priority, "
                          "local_time, default_tz, window_start, window_end, window_tz, "
                          /* expiry */ "expire_at, "
                          /* pacing */ "finish_by, "
                          /* sharded tasks */ "shards) "
                          "VALUES (?, ?, ?, ?, ?, ?, FROM_UNIXTIME(? / 1000), "
                          "FROM_UNIXTIME(? / 1000), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                          "?, ?, SEC_TO_TIME(?), SEC_TO_TIME(?), ?, FROM_UNIXTIME(? / 1000), "
                          "FROM_UNIXTIME(? / 1000), ?)",
                          p, sizeof p / sizeof p[0], NULL, &id, NULL, err, sizeof err) < 0) {
            dsp_api_backend_error(resp, "mysql", err);
            goto done;
        }
    }
    if (!dsp_api_task(ac, (int64_t)id, resp, &t) || !dsp_api_admit(a, ac, resp, &t))
        goto done;
    hr_log_info("api_task_created", "task=%" PRIu64 " name=%s", id, t->name);
    dsp_api_reply(resp, 201, dsp_api_task_json(t));
done:
    hr_task_free(t);
    free(in.t.payload);
    cJSON_Delete(j);
}

/* 1 when task ID has an explicit freeze_at after DUE_MS (the rule POST
 * checks on its own fields; a NULL freeze_at follows due_at's day), 0 when
 * not, -1 on a database error. */
static int dsp_api_due_before_freeze(dsp_api_conn *ac, int64_t id, int64_t due_ms, char *errstr,
                                     size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(due_ms), HR_P_I64(id)};
    hr_mysql_rows *rows = NULL;
    int rc;

    if (hr_mysql_query(ac->m,
                       "SELECT COALESCE(freeze_at > FROM_UNIXTIME(? / 1000), 0) FROM push_task "
                       "WHERE id = ?",
                       p, 2, &rows, errstr, errlen) < 0)
        return -1;
    rc = rows->nrows == 1 && hr_mysql_cell(rows, 0, 0) != NULL &&
         strcmp(hr_mysql_cell(rows, 0, 0), "1") == 0;
    hr_mysql_rows_free(rows);
    return rc;
}

static void dsp_api_patch(dsp_api *a, dsp_api_conn *ac, const hr_httpd_req *req,
                          hr_httpd_resp *resp)
{
    cJSON *j = NULL;
    hr_task *t = NULL;
    dsp_api_input in = {0};
    int64_t id;
    uint64_t affected = 0;
    unsigned sqlerr = 0;
    char err[1024];
    const char *code;

    if (!dsp_api_id(req, "id", resp, &id) || (j = dsp_api_body(req, resp)) == NULL ||
        !dsp_api_task(ac, id, resp, &t))
        goto done;
    in.t = *t;
    in.t.payload = NULL;
    if (dsp_api_parse_task(j, true, &in, &code, err, sizeof err) < 0) {
        hr_httpd_error(resp, 400, code, "%s", err);
        goto done;
    }
    if (in.t.payload == NULL && t->payload != NULL)
        in.t.payload = strdup(t->payload);
    if (hr_task_validate(&in.t, a->d->cfg, err, sizeof err) < 0) {
        hr_httpd_error(resp, 400, "invalid_task", "%s", err);
        goto done;
    }
    if (t->state != HR_STATE_SCHEDULED) {
        hr_httpd_error(resp, 409, "wrong_state",
                       "task %" PRId64 " is %s; only a scheduled task changes", id,
                       hr_state_name(t->state));
        goto done;
    }
    if (in.has_due) {
        int early = dsp_api_due_before_freeze(ac, id, in.t.due_ms, err, sizeof err);

        if (early < 0) {
            dsp_api_backend_error(resp, "mysql", err);
            goto done;
        }
        if (early == 1) {
            hr_httpd_error(resp, 400, "bad_field",
                           "due_at must not be before the task's "
                           "freeze_at (the task would never be in the pull on its day)");
            goto done;
        }
    }
    {
        const hr_mysql_param p[] = {HR_P_STR(in.t.title), HR_P_STR(in.t.body),
                                    dsp_api_p_str(in.t.payload), HR_P_I64(in.t.due_ms),
                                    dsp_api_p_ttl(in.t.ttl_s), dsp_api_p_str(in.t.collapse_key),
                                    HR_P_STR(hr_priority_name(in.t.priority)),
                                    /* local time and send windows */
                                    HR_P_I64(in.t.local_time), dsp_api_p_str(in.t.default_tz),
                                    dsp_api_p_tod(in.t.window_start_s),
                                    dsp_api_p_tod(in.t.window_end_s), dsp_api_p_str(in.t.window_tz),
                                    /* pacing */
                                    dsp_api_p_finish(&in.t), HR_P_I64(id)};

        if (hr_mysql_exec(ac->m,
                          "UPDATE push_task SET title = ?, body = ?, payload = ?, "
                          "due_at = FROM_UNIXTIME(? / 1000), ttl_s = ?, collapse_key = ?, "
                          "priority = ?, local_time = ?, default_tz = ?, "
                          "window_start = SEC_TO_TIME(?), window_end = SEC_TO_TIME(?), "
                          "window_tz = ?, finish_by = FROM_UNIXTIME(? / 1000) "
                          "WHERE id = ? AND state = 'scheduled'",
                          p, 14, &affected, NULL, &sqlerr, err, sizeof err) < 0) {
            if (sqlerr == HR_MYSQL_ER_SIGNAL) /* the freeze trigger */
                hr_httpd_error(resp, 409, "frozen", "%s", err);
            else
                dsp_api_backend_error(resp, "mysql", err);
            goto done;
        }
    }
    hr_task_free(t);
    t = NULL;
    if (!dsp_api_task(ac, id, resp, &t) || !dsp_api_admit(a, ac, resp, &t))
        goto done;
    dsp_api_reply(resp, 200, dsp_api_task_json(t));
done:
    free(in.t.payload);
    hr_task_free(t);
    cJSON_Delete(j);
}

/* ---- GET /v1/tasks/{id}, GET /v1/tasks ------------------------------------ */

static void dsp_api_get(dsp_api *a, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    hr_task *t = NULL;
    cJSON *o;
    int64_t id;

    (void)a;
    if (!dsp_api_id(req, "id", resp, &id) || !dsp_api_task(ac, id, resp, &t))
        return;
    o = dsp_api_task_json(t);
    dsp_api_task_live(ac, t, o);
    dsp_api_reply(resp, 200, o);
    hr_task_free(t);
}

/* Newest first, keyset-paged: ?before=ID gives the tasks below ID, and
 * "next" is the before of the next page (null on the last). */
static void dsp_api_list(dsp_api *a, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    const char *state = hr_httpd_query(req, "state"), *q = hr_httpd_query(req, "q"), *code;
    long limit;
    int64_t before;
    hr_task **tasks = NULL;
    size_t n = 0, i;
    cJSON *o, *arr;
    char err[1024];

    (void)a;
    if (dsp_api_parse_list(state, hr_httpd_query(req, "limit"), &limit, &code, err, sizeof err) <
            0 ||
        dsp_api_parse_page(hr_httpd_query(req, "before"), q, &before, &code, err, sizeof err) < 0) {
        hr_httpd_error(resp, 400, code, "%s", err);
        return;
    }
    {
        /* One more than asked tells whether a next page exists. */
        const hr_mysql_param p[] = {dsp_api_p_str(state), dsp_api_p_str(state),
                                    HR_P_I64(before),     dsp_api_p_str(q),
                                    dsp_api_p_str(q),     HR_P_I64(limit + 1)};

        if (dsp_store_tasks(ac->m,
                            "SELECT " HR_TASK_COLUMNS " FROM push_task "
                            "WHERE (? IS NULL OR state = ?) AND id < ? "
                            "AND (? IS NULL OR LOCATE(?, name) > 0) ORDER BY id DESC LIMIT ?",
                            p, 6, &tasks, &n, err, sizeof err) < 0) {
            dsp_api_backend_error(resp, "mysql", err);
            return;
        }
    }
    o = cJSON_CreateObject();
    arr = cJSON_AddArrayToObject(o, "tasks");
    for (i = 0; i < n && i < (size_t)limit; i++)
        cJSON_AddItemToArray(arr, dsp_api_task_json(tasks[i]));
    if (n > (size_t)limit)
        dsp_api_add_id(o, "next", tasks[limit - 1]->id);
    else
        cJSON_AddNullToObject(o, "next");
    dsp_store_tasks_free(tasks, n);
    dsp_api_reply(resp, 200, o);
}

/* ---- POST /v1/tasks/{id}/pause|resume|cancel ------------------------------ */

/* The same as an admin's UPDATE push_task SET control = ..., plus the ctl
 * key at once so workers react without waiting for a dispatcher tick; the
 * dispatchers' control scan carries out the state transition. */
static void dsp_api_control(dsp_api *a, dsp_api_conn *ac, const hr_httpd_req *req,
                            hr_httpd_resp *resp, hr_control control)
{
    hr_task *t = NULL;
    char err[512];
    int64_t id;

    (void)a;
    if (!dsp_api_id(req, "id", resp, &id) || !dsp_api_task(ac, id, resp, &t))
        return;
    if (hr_state_final(t->state)) {
        hr_httpd_error(resp, 409, "finished", "task %" PRId64 " is already %s", id,
                       hr_state_name(t->state));
        goto done;
    }
    switch (hr_task_set_control(ac->m, ac->r, id, control, err, sizeof err)) {
    case -1:
        dsp_api_backend_error(resp, "mysql", err);
        goto done;
    case 1:
        /* MySQL holds the wish; the next dispatcher scan mirrors it. */
        hr_log_warn("api_ctl_key_failed", "task=%" PRId64 " control=%s error=%s", id,
                    hr_control_name(control), err);
        break;
    }
    hr_log_info("api_task_control", "task=%" PRId64 " control=%s", id, hr_control_name(control));
    hr_task_free(t);
    t = NULL;
    if (dsp_api_task(ac, id, resp, &t))
        dsp_api_reply(resp, 200, dsp_api_task_json(t));
done:
    hr_task_free(t);
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

static void dsp_api_count(const dsp_api_route *rt, int status)
{
    char code[8];

    snprintf(code, sizeof code, "%d", status);
    hr_metrics_inc(hr_metrics_labels(rt->a->d->met.api_requests, rt->name, code));
}

/* Refuses with STATUS; a 401 tells the client to authenticate. */
static bool dsp_api_refuse(const dsp_api_route *rt, hr_httpd_resp *resp, int status,
                           const char *code, const char *msg)
{
    hr_httpd_error(resp, status, code, "%s", msg);
    if (status == 401)
        hr_httpd_resp_header(resp, "WWW-Authenticate", "Bearer");
    dsp_api_count(rt, resp->status);
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
    const dsp_api_route *rt = ctx;
    const hr_config *cfg = rt->a->d->cfg;
    const char *token = hr_httpd_bearer(req), *param;
    char err[128];
    int64_t uid, want;

    if (cfg->dispatcher.api.ntokens == 0 ||
        hr_httpd_bearer_ok(req, cfg->dispatcher.api.tokens, cfg->dispatcher.api.ntokens))
        return true;
    if (token == NULL || cfg->dispatcher.api.nclient_keys == 0 || !hr_ctoken_is_client(token))
        return dsp_api_refuse(rt, resp, 401, "unauthorized",
                              "a valid 'Authorization: Bearer TOKEN' header is required");
    if (hr_ctoken_verify(token, cfg->dispatcher.api.client_keys, cfg->dispatcher.api.nclient_keys,
                         (int64_t)time(NULL), &uid, err, sizeof err) != 0)
        return dsp_api_refuse(rt, resp, 401, "unauthorized", err);
    param = hr_httpd_param(req, "uid");
    if (!rt->client || param == NULL || hr_parse_uid(param, strlen(param), &want) < 0 ||
        want != uid)
        return dsp_api_refuse(rt, resp, 403, "forbidden",
                              "a client token may only pull its own uid's reminders");
    req->auth_id = uid;
    return true;
}

static void dsp_api_serve(void *ctx, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    const dsp_api_route *rt = ctx;
    dsp_api *a = rt->a;
    dsp_api_conn *ac;
    const char *what;
    char err[512];

    if (rt->open) {
        rt->builtin(rt->builtin_ctx, req, resp);
    } else if ((ac = dsp_api_acquire(a, &what, err, sizeof err)) == NULL) {
        dsp_api_backend_error(resp, what, err);
    } else {
        if (rt->is_control)
            dsp_api_control(a, ac, req, resp, rt->control);
        else
            rt->fn(a, ac, req, resp);
        dsp_api_release(a, ac);
    }
    dsp_api_count(rt, resp->status);
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
static void dsp_api_add_routes(dsp_api *a)
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

int dsp_api_start(dsp *d, char *errstr, size_t errlen)
{
    const hr_config *cfg = d->cfg;
    dsp_api *a;

    a = calloc(1, sizeof *a);
    if (a == NULL ||
        (a->pool = calloc((size_t)cfg->dispatcher.api.threads, sizeof *a->pool)) == NULL) {
        free(a);
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    a->d = d;
    a->npool = (size_t)cfg->dispatcher.api.threads;
    pthread_mutex_init(&a->pool_mu, NULL);
    pthread_cond_init(&a->pool_cv, NULL);
    a->ready = (hr_httpd_ready){dsp_api_ready, d};
    dsp_api_add_routes(a);
    d->api = a;
    if (hr_httpd_start(cfg->dispatcher.listen, cfg->dispatcher.api.threads, a->routes, a->nroutes,
                       (size_t)cfg->dispatcher.api.max_body_bytes, &a->h, errstr, errlen) < 0) {
        dsp_api_stop(d);
        return -1;
    }
    hr_log_info("api_started", "listen=%s port=%d threads=%d insecure=%d", cfg->dispatcher.listen,
                hr_httpd_port(a->h), cfg->dispatcher.api.threads,
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
