/* dsp_api_series: series' handlers (see dsp_api_series.h).  A body is
 * checked whole (unknown members refused, the rule by libical, the zone,
 * an occurrence as a task) before anything is written; the SQL is
 * common/hr_series.c's. */
#include "dsp_api_series.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsp_api_view.h"
#include "hr_httpd_req.h"
#include "hr_parse.h"
#include "hr_series.h"

#define DSP_API_SERIES_PAGE 100
#define DSP_API_SERIES_NEXT_MAX 100

/* The string member NAME of J into *OUT (absent: left as it is).  false
 * after answering 400. */
static bool dsp_api_series_str(const cJSON *j, const char *name, char **out, hr_httpd_resp *resp)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, name);

    if (v == NULL)
        return true;
    if (!cJSON_IsString(v)) {
        hr_httpd_error(resp, 400, "invalid", "%s: a string", name);
        return false;
    }
    *out = v->valuestring;
    return true;
}

/* The integer member NAME of J in 0..MAX into *OUT (absent: left). */
static bool dsp_api_series_int(const cJSON *j, const char *name, int64_t max, int64_t *out,
                               hr_httpd_resp *resp)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, name);

    if (v == NULL)
        return true;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > (double)max ||
        v->valuedouble != (double)(int64_t)v->valuedouble) {
        hr_httpd_error(resp, 400, "invalid", "%s: an integer 0..%" PRId64, name, max);
        return false;
    }
    *out = (int64_t)v->valuedouble;
    return true;
}

/* The body J into S (template T); *PAYLOAD the payload's text (the caller
 * frees).  false after answering 400. */
static bool dsp_api_series_parse(const cJSON *j, hr_series *s, hr_task *t, char **payload,
                                 hr_httpd_resp *resp)
{
    static const char *const known[] = {
        "name",   "channel",        "rrule",    "dtstart",   "tz",       "local_time", "exdate",
        "topic",  "title",          "body",     "payload",   "category", "priority",   "catch_up",
        "lead_s", "expire_after_s", "variants", "drip_days", NULL};
    const cJSON *it, *v;
    char *dtstart = NULL, *catch_up = NULL, *priority = NULL, err[256];

    cJSON_ArrayForEach(it, j)
    {
        size_t i;

        for (i = 0; known[i] != NULL && strcmp(known[i], it->string) != 0; i++)
            ;
        if (known[i] == NULL) {
            hr_httpd_error(resp, 400, "invalid", "unknown member \"%.64s\"", it->string);
            return false;
        }
    }
    if (!dsp_api_series_str(j, "name", &t->name, resp) ||
        !dsp_api_series_str(j, "channel", &t->channel, resp) ||
        !dsp_api_series_str(j, "rrule", &s->rrule, resp) ||
        !dsp_api_series_str(j, "dtstart", &dtstart, resp) ||
        !dsp_api_series_str(j, "tz", &s->tz, resp) ||
        !dsp_api_series_str(j, "exdate", &s->exdate, resp) ||
        !dsp_api_series_str(j, "topic", &t->topic, resp) ||
        !dsp_api_series_str(j, "title", &t->title, resp) ||
        !dsp_api_series_str(j, "body", &t->body, resp) ||
        !dsp_api_series_str(j, "category", &t->category, resp) ||
        !dsp_api_series_str(j, "priority", &priority, resp) ||
        !dsp_api_series_str(j, "catch_up", &catch_up, resp) ||
        !dsp_api_series_int(j, "lead_s", 2678400, &s->lead_s, resp) ||
        !dsp_api_series_int(j, "expire_after_s", 2678400, &s->expire_after_s, resp) ||
        !dsp_api_series_int(j, "drip_days", HR_SERIES_DRIP_DAYS_MAX, &s->drip_days, resp))
        return false;
    if (t->name == NULL || t->channel == NULL || s->rrule == NULL || dtstart == NULL) {
        hr_httpd_error(resp, 400, "invalid", "name, channel, rrule and dtstart are required");
        return false;
    }
    if (hr_parse_time("dtstart", dtstart, &s->dtstart_wall_ms, err, sizeof err) < 0) {
        hr_httpd_error(resp, 400, "invalid", "%s", err);
        return false;
    }
    if (catch_up != NULL && hr_series_catch_up_parse(catch_up, &s->catch_up) < 0) {
        hr_httpd_error(resp, 400, "invalid", "catch_up: none, latest or all");
        return false;
    }
    if (priority != NULL && hr_priority_parse(priority, &t->priority) < 0) {
        hr_httpd_error(resp, 400, "invalid", "priority: high or normal");
        return false;
    }
    v = cJSON_GetObjectItemCaseSensitive(j, "local_time");
    if (v != NULL && !cJSON_IsBool(v)) {
        hr_httpd_error(resp, 400, "invalid", "local_time: true or false");
        return false;
    }
    s->local_time = cJSON_IsTrue(v);
    v = cJSON_GetObjectItemCaseSensitive(j, "payload");
    if (v != NULL && !cJSON_IsObject(v)) {
        hr_httpd_error(resp, 400, "invalid", "payload: a JSON object");
        return false;
    }
    if (v != NULL && (*payload = t->payload = cJSON_PrintUnformatted(v)) == NULL) {
        hr_httpd_error(resp, 500, "internal", "out of memory");
        return false;
    }
    v = cJSON_GetObjectItemCaseSensitive(j, "variants");
    if (v != NULL && hr_variant_from_json(v, &s->variants, err, sizeof err) != 0) {
        hr_httpd_error(resp, 400, "invalid_variant", "%s", err);
        return false;
    }
    t->throttle_scope = t->topic; /* what a loaded template has */
    return true;
}

/* Wall time WALL_MS as "YYYY-MM-DDTHH:MM:SS.mmm": no Z, it is no instant. */
static void dsp_api_series_wall(int64_t wall_ms, char *buf, size_t len)
{
    size_t n;

    hr_parse_time_format(wall_ms, buf, len);
    n = strlen(buf);
    if (n > 0 && buf[n - 1] == 'Z')
        buf[n - 1] = '\0';
}

/* S as JSON, with its next N occurrences. */
static cJSON *dsp_api_series_view(const hr_series *s, size_t n)
{
    cJSON *o = cJSON_CreateObject(), *next;
    int64_t wall[DSP_API_SERIES_NEXT_MAX], due[DSP_API_SERIES_NEXT_MAX];
    size_t got = 0;
    char err[256], buf[HR_PARSE_TIME_LEN];

    dsp_api_add_id(o, "id", s->id);
    cJSON_AddStringToObject(o, "name", s->tmpl->name);
    cJSON_AddStringToObject(o, "state", hr_series_state_name(s->state));
    cJSON_AddStringToObject(o, "channel", s->tmpl->channel);
    cJSON_AddStringToObject(o, "topic", s->tmpl->topic);
    cJSON_AddStringToObject(o, "title", s->tmpl->title);
    cJSON_AddStringToObject(o, "body", s->tmpl->body);
    cJSON_AddStringToObject(o, "rrule", s->rrule);
    dsp_api_series_wall(s->dtstart_wall_ms, buf, sizeof buf);
    cJSON_AddStringToObject(o, "dtstart", buf);
    cJSON_AddStringToObject(o, "tz", s->tz);
    cJSON_AddBoolToObject(o, "local_time", s->local_time);
    if (s->exdate != NULL)
        cJSON_AddStringToObject(o, "exdate", s->exdate);
    cJSON_AddStringToObject(o, "catch_up", hr_series_catch_up_name(s->catch_up));
    if (s->lead_s >= 0)
        dsp_api_add_id(o, "lead_s", s->lead_s);
    if (s->drip_days >= 0)
        dsp_api_add_id(o, "drip_days", s->drip_days);
    dsp_api_add_id(o, "occurrences", s->occurrences);
    cJSON_AddStringToObject(o, "last_error",
                            s->tmpl->last_error != NULL ? s->tmpl->last_error : "");
    next = cJSON_AddArrayToObject(o, "next");
    if (hr_series_next(s, n, wall, due, &got, err, sizeof err) < 0)
        cJSON_AddStringToObject(o, "next_error", err);
    for (size_t i = 0; i < got; i++) {
        cJSON *e = cJSON_CreateObject();

        dsp_api_series_wall(wall[i], buf, sizeof buf);
        cJSON_AddStringToObject(e, "wall", buf);
        if (s->local_time)
            cJSON_AddNullToObject(e, "due_at"); /* each recipient's zone */
        else
            dsp_api_add_time(e, "due_at", due[i]);
        cJSON_AddItemToArray(next, e);
    }
    cJSON_AddBoolToObject(o, "ends", got < n);
    if (s->variants.n > 0)
        cJSON_AddItemToObject(o, "variants", hr_variant_to_json(&s->variants));
    return o;
}

void dsp_api_series_create(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    cJSON *j = dsp_api_body(req, resp), *after = NULL;
    hr_task t;
    hr_series s;
    hr_series *made = NULL;
    char *payload = NULL, err[512] = "the series vanished after its insert", target[40];
    int rc;

    hr_series_defaults(&s, &t);
    if (j == NULL || !dsp_api_series_parse(j, &s, &t, &payload, resp))
        goto done;
    if ((rc = hr_series_validate(&s, d->cfg, err, sizeof err)) < 0) {
        hr_httpd_error(resp, 400, rc == HR_VARIANT_EINVAL ? "invalid_variant" : "invalid_series",
                       "%s", err);
        goto done;
    }
    if (!dsp_api_begin(ac, resp))
        goto done;
    if (hr_series_insert(ac->m, &s, &s.id, err, sizeof err) < 0 ||
        hr_series_load(ac->m, s.id, &made, err, sizeof err) != 0) {
        hr_mysql_rollback(ac->m);
        dsp_api_backend_error(resp, "mysql", err);
        goto done;
    }
    snprintf(target, sizeof target, "series %" PRId64, s.id);
    after = cJSON_Duplicate(j, true);
    if (!dsp_api_audit(ac, req, 0, target, NULL, after, resp)) {
        hr_mysql_rollback(ac->m);
        goto done;
    }
    if (dsp_api_commit(ac, resp))
        dsp_api_reply(resp, 201, dsp_api_series_view(made, 5));
done:
    hr_series_free(made);
    hr_variant_set_clear(&s.variants);
    cJSON_Delete(after);
    cJSON_free(payload);
    cJSON_Delete(j);
}

void dsp_api_series_list(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    const char *a = hr_httpd_query(req, "after");
    hr_mysql_rows *rows = NULL;
    int64_t after = a != NULL ? strtoll(a, NULL, 10) : 0;
    cJSON *o, *arr;
    char err[512];

    (void)d;
    if (hr_series_list(ac->m, after, DSP_API_SERIES_PAGE, &rows, err, sizeof err) < 0) {
        dsp_api_backend_error(resp, "mysql", err);
        return;
    }
    o = cJSON_CreateObject();
    arr = cJSON_AddArrayToObject(o, "series");
    for (size_t i = 0; i < rows->nrows; i++) {
        cJSON *e = cJSON_CreateObject();

        dsp_api_add_id(e, "id", strtoll(hr_mysql_cell(rows, i, 0), NULL, 10));
        cJSON_AddStringToObject(e, "name", hr_mysql_cell(rows, i, 1));
        cJSON_AddStringToObject(e, "state", hr_mysql_cell(rows, i, 2));
        cJSON_AddStringToObject(e, "rrule", hr_mysql_cell(rows, i, 3));
        cJSON_AddStringToObject(e, "dtstart", hr_mysql_cell(rows, i, 4));
        cJSON_AddStringToObject(e, "tz", hr_mysql_cell(rows, i, 5));
        cJSON_AddBoolToObject(e, "local_time", strcmp(hr_mysql_cell(rows, i, 6), "1") == 0);
        cJSON_AddStringToObject(e, "catch_up", hr_mysql_cell(rows, i, 7));
        cJSON_AddStringToObject(e, "next_at", hr_mysql_cell(rows, i, 8));
        dsp_api_add_id(e, "occurrences", strtoll(hr_mysql_cell(rows, i, 9), NULL, 10));
        cJSON_AddStringToObject(e, "last_error", hr_mysql_cell(rows, i, 10));
        cJSON_AddItemToArray(arr, e);
    }
    if (rows->nrows == DSP_API_SERIES_PAGE)
        dsp_api_add_id(o, "next_after", strtoll(hr_mysql_cell(rows, rows->nrows - 1, 0), NULL, 10));
    hr_mysql_rows_free(rows);
    dsp_api_reply(resp, 200, o);
}

/* The series of the path's {id} into *S: false after answering. */
static bool dsp_api_series_load(dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp,
                                hr_series **s)
{
    int64_t id;
    char err[512];
    int rc;

    *s = NULL;
    if (!dsp_api_id(req, "id", resp, &id))
        return false;
    if ((rc = hr_series_load(ac->m, id, s, err, sizeof err)) < 0)
        dsp_api_backend_error(resp, "mysql", err);
    else if (rc == 1)
        hr_httpd_error(resp, 404, "not_found", "series %" PRId64 " does not exist", id);
    return rc == 0;
}

void dsp_api_series_get(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    hr_series *s;

    (void)d;
    if (dsp_api_series_load(ac, req, resp, &s))
        dsp_api_reply(resp, 200, dsp_api_series_view(s, 5));
    hr_series_free(s);
}

void dsp_api_series_next(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    const char *c = hr_httpd_query(req, "count");
    int64_t count = c != NULL ? strtoll(c, NULL, 10) : 10;
    hr_series *s;

    (void)d;
    if (count < 1 || count > DSP_API_SERIES_NEXT_MAX) {
        hr_httpd_error(resp, 400, "invalid", "count: 1..%d", DSP_API_SERIES_NEXT_MAX);
        return;
    }
    if (dsp_api_series_load(ac, req, resp, &s))
        dsp_api_reply(resp, 200, dsp_api_series_view(s, (size_t)count));
    hr_series_free(s);
}

/* pause, resume, end: the change to TO and its audit row. */
static void dsp_api_series_change(dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp,
                                  hr_series_state to)
{
    hr_series_state from = HR_SERIES_ACTIVE;
    cJSON *before = NULL, *after = NULL, *o;
    char err[512], target[40];
    int64_t id;
    int rc;

    if (!dsp_api_id(req, "id", resp, &id) || !dsp_api_begin(ac, resp))
        return;
    rc = hr_series_set_state(ac->m, id, to, &from, err, sizeof err);
    if (rc != 0) {
        hr_mysql_rollback(ac->m);
        if (rc == 1)
            hr_httpd_error(resp, 404, "not_found", "series %" PRId64 " does not exist", id);
        else if (rc == 2)
            hr_httpd_error(resp, 409, "wrong_state", "series %" PRId64 " is %s", id,
                           hr_series_state_name(from));
        else
            dsp_api_backend_error(resp, "mysql", err);
        return;
    }
    snprintf(target, sizeof target, "series %" PRId64, id);
    before = cJSON_CreateObject();
    after = cJSON_CreateObject();
    cJSON_AddStringToObject(before, "state", hr_series_state_name(from));
    cJSON_AddStringToObject(after, "state", hr_series_state_name(to));
    if (!dsp_api_audit(ac, req, 0, target, before, after, resp)) {
        hr_mysql_rollback(ac->m);
    } else if (dsp_api_commit(ac, resp)) {
        o = cJSON_CreateObject();
        dsp_api_add_id(o, "id", id);
        cJSON_AddStringToObject(o, "state", hr_series_state_name(to));
        dsp_api_reply(resp, 200, o);
    }
    cJSON_Delete(before);
    cJSON_Delete(after);
}

void dsp_api_series_pause(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    (void)d;
    dsp_api_series_change(ac, req, resp, HR_SERIES_PAUSED);
}

void dsp_api_series_resume(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    (void)d;
    dsp_api_series_change(ac, req, resp, HR_SERIES_ACTIVE);
}

void dsp_api_series_end(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    (void)d;
    dsp_api_series_change(ac, req, resp, HR_SERIES_ENDED);
}
