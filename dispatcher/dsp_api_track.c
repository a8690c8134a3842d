/* dsp_api_track: opens, clicks and the app's opens (see dsp_api_track.h).
 *
 * A link whose signature does not match is refused (403) before anything
 * is read or counted, so a forged or altered click link redirects nowhere
 * (herald_track_refused_total).  A genuine click always redirects, also
 * when counting it failed (the recipient must reach the page; the loss is
 * logged and counted as herald_engagement_total{result="lost"}); an open
 * that could not be counted answers 503, and the mail client's next load
 * counts it. */
#include "dsp_api_track.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "dsp_engage.h"
#include "hr_httpd_req.h"
#include "hr_log.h"
#include "hr_parse.h"
#include "hr_subs.h"
#include "hr_track.h"

/* A transparent 1x1 GIF. */
static const unsigned char dsp_api_track_gif[] = {
    0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 0x01, 0x00, 0x01, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00,
    0x00, 0xff, 0xff, 0xff, 0x21, 0xf9, 0x04, 0x01, 0x00, 0x00, 0x00, 0x00, 0x2c, 0x00, 0x00,
    0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x02, 0x02, 0x44, 0x01, 0x00, 0x3b};

/* Checks the link of KIND: true with *T (loaded) and *UID, false after
 * answering (404 without tracking, 403 for a bad signature, 404 for a task
 * gone, 503). */
static bool dsp_api_track_link(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req,
                               hr_httpd_resp *resp, hr_track_kind kind, const char *url,
                               hr_task **t, uint64_t *uid)
{
    const char *key = d->cfg->events.tracking.key;
    int64_t task;
    char err[256];

    if (key == NULL) {
        hr_httpd_error(resp, 404, "not_found", "tracking is not configured (events.tracking)");
        return false;
    }
    if (hr_track_verify(key, kind, hr_httpd_param(req, "token"), url, &task, uid, err, sizeof err) <
        0) {
        hr_metrics_inc(d->met.track_refused);
        hr_httpd_error(resp, 403, "forbidden", "%s", err);
        return false;
    }
    return dsp_api_load_task(ac, task, resp, t);
}

/* Counts (DSP_ENGAGE_*) what dsp_engage_record answered, RC. */
static void dsp_api_track_count(dsp *d, dsp_engage_kind kind, int rc)
{
    hr_metrics_inc(d->met.engaged[kind][rc == 1   ? DSP_ENGAGE_COUNTED
                                        : rc == 0 ? DSP_ENGAGE_REPEAT
                                                  : DSP_ENGAGE_LOST]);
}

void dsp_api_track_open(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    hr_task *t = NULL;
    uint64_t uid;
    char err[512];
    int rc;

    if (!dsp_api_track_link(d, ac, req, resp, HR_TRACK_OPENED, NULL, &t, &uid))
        return;
    rc = dsp_engage_record(d, ac->m, t, uid, HR_EVENT_OPENED, NULL, err, sizeof err);
    dsp_api_track_count(d, DSP_ENGAGE_OPENED, rc);
    if (rc < 0) {
        dsp_api_backend_error(resp, "mysql or kafka", err);
    } else {
        hr_buf_reset(&resp->body);
        hr_buf_append(&resp->body, (const char *)dsp_api_track_gif, sizeof dsp_api_track_gif);
        resp->content_type = "image/gif";
        hr_httpd_resp_header(resp, "Cache-Control", "no-store");
    }
    hr_task_free(t);
}

void dsp_api_track_click(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    const char *url = hr_httpd_query(req, "u");
    hr_task *t = NULL;
    uint64_t uid;
    char err[512];
    int rc;

    if (!dsp_api_track_link(d, ac, req, resp, HR_TRACK_CLICKED, url, &t, &uid))
        return;
    rc = dsp_engage_record(d, ac->m, t, uid, HR_EVENT_CLICKED, url, err, sizeof err);
    dsp_api_track_count(d, DSP_ENGAGE_CLICKED, rc);
    if (rc < 0)
        hr_log_warn("click_lost", "task=%" PRId64 " uid=%" PRIu64 " error=%s", t->id, uid, err);
    hr_buf_reset(&resp->body);
    resp->status = 302;
    resp->content_type = "text/plain; charset=utf-8";
    hr_httpd_resp_header(resp, "Location", url);
    hr_httpd_resp_header(resp, "Cache-Control", "no-store");
    hr_httpd_resp_header(resp, "Referrer-Policy", "no-referrer");
    hr_task_free(t);
}

void dsp_api_track_event(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    cJSON *j = NULL, *task, *type, *o;
    hr_mysql_rows *rows = NULL;
    hr_task *t = NULL;
    int64_t uid, id;
    char err[512];
    int rc;

    if (!dsp_api_id(req, "uid", resp, &uid) || (j = dsp_api_body(req, resp)) == NULL)
        return;
    task = cJSON_GetObjectItemCaseSensitive(j, "task");
    type = cJSON_GetObjectItemCaseSensitive(j, "type");
    if (!cJSON_IsNumber(task) || task->valuedouble < 1 || task->valuedouble > 9007199254740991.0 ||
        task->valuedouble != (double)(int64_t)task->valuedouble || !cJSON_IsString(type) ||
        strcmp(type->valuestring, "opened") != 0 || cJSON_GetArraySize(j) != 2) {
        hr_httpd_error(resp, 400, "invalid",
                       "the body must be {\"task\": <task id>, \"type\": \"opened\"}");
        goto done;
    }
    id = (int64_t)task->valuedouble;
    {
        const hr_mysql_param p[] = {HR_P_I64(id), HR_P_I64(uid), HR_P_I64(uid), HR_P_I64(uid),
                                    HR_P_I64(id)};

        /* A task's subscriber, or a series' of its occurrence. */
        if (hr_mysql_query(ac->m,
                           "SELECT 1 FROM push_subscription WHERE task_id = ? AND uid = ? "
                           "UNION ALL SELECT 1 FROM (" HR_SUBS_SERIES_TASKS_OF_UID ") x "
                           "WHERE x.id = ?",
                           p, 5, &rows, err, sizeof err) < 0) {
            dsp_api_backend_error(resp, "mysql", err);
            goto done;
        }
    }
    if (rows->nrows == 0) {
        hr_httpd_error(resp, 404, "not_found", "uid %" PRId64 " is no recipient of task %" PRId64,
                       uid, id);
        goto done;
    }
    if (!dsp_api_load_task(ac, id, resp, &t))
        goto done;
    rc = dsp_engage_record(d, ac->m, t, (uint64_t)uid, HR_EVENT_OPENED, NULL, err, sizeof err);
    dsp_api_track_count(d, DSP_ENGAGE_OPENED, rc);
    if (rc < 0) {
        dsp_api_backend_error(resp, "mysql or kafka", err);
        goto done;
    }
    o = cJSON_CreateObject();
    dsp_api_add_id(o, "task", id);
    dsp_api_add_id(o, "uid", uid);
    cJSON_AddStringToObject(o, "type", "opened");
    cJSON_AddBoolToObject(o, "counted", rc == 1);
    dsp_api_reply(resp, 200, o);
done:
    hr_mysql_rows_free(rows);
    hr_task_free(t);
    cJSON_Delete(j);
}
