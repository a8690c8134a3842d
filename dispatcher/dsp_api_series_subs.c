/* dsp_api_series_subs: a series' subscribers over the API (see
 * dsp_api_series_subs.h). */
#include "dsp_api_series_subs.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "dsp_api_parse.h"
#include "hr_httpd_req.h"
#include "hr_series_subs.h"

#define DSP_API_SERIES_SUBS_PAGE 1000

/* Whether series ID exists: false after answering 404 or 503. */
static bool dsp_api_series_subs_series(dsp_api_conn *ac, int64_t id, hr_httpd_resp *resp)
{
    char err[512];
    int rc = hr_series_subs_check(ac->m, id, err, sizeof err);

    if (rc < 0)
        dsp_api_backend_error(resp, "mysql", err);
    else if (rc == 1)
        hr_httpd_error(resp, 404, "not_found", "series %" PRId64 " does not exist", id);
    return rc == 0;
}

void dsp_api_series_subs_add(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    cJSON *j = NULL, *after = NULL, *o;
    int64_t id, *uids = NULL, lead_s = -1;
    uint64_t added = 0;
    char err[1024], target[40];
    const char *code;
    size_t n = 0;

    if (!dsp_api_id(req, "id", resp, &id) || (j = dsp_api_body(req, resp)) == NULL)
        goto done;
    if (dsp_api_parse_uids(j, d->cfg->dispatcher.api.max_ids, &uids, &n, &lead_s, &code, err,
                           sizeof err) < 0) {
        hr_httpd_error(resp, 400, code, "%s", err);
        goto done;
    }
    /* A lead time is a task subscription's (its event_at); an occurrence
     * has its series' time. */
    if (lead_s >= 0) {
        hr_httpd_error(resp, 400, "invalid",
                       "lead_s: a series subscription has no lead time (a task subscription "
                       "has: POST /v1/tasks/{id}/subscribers)");
        goto done;
    }
    if (!dsp_api_series_subs_series(ac, id, resp) || !dsp_api_begin(ac, resp))
        goto done;
    if (hr_series_subs_add(ac->m, id, uids, n, &added, err, sizeof err) < 0) {
        hr_mysql_rollback(ac->m);
        dsp_api_backend_error(resp, "mysql", err);
        goto done;
    }
    /* The audit row names the counts, not the uids (up to max_ids). */
    snprintf(target, sizeof target, "series %" PRId64, id);
    after = cJSON_CreateObject();
    cJSON_AddNumberToObject(after, "received", (double)n);
    cJSON_AddNumberToObject(after, "added", (double)added);
    if (!dsp_api_audit(ac, req, 0, target, NULL, after, resp)) {
        hr_mysql_rollback(ac->m);
        goto done;
    }
    if (!dsp_api_commit(ac, resp))
        goto done;
    o = cJSON_CreateObject();
    dsp_api_add_id(o, "series_id", id);
    cJSON_AddNumberToObject(o, "received", (double)n);
    cJSON_AddNumberToObject(o, "added", (double)added);
    dsp_api_reply(resp, 200, o);
done:
    free(uids);
    cJSON_Delete(after);
    cJSON_Delete(j);
}

void dsp_api_series_subs_del(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    cJSON *before = NULL, *after = NULL, *o;
    char err[512], target[64];
    int64_t id, uid;
    uint64_t was = 0;

    (void)d;
    if (!dsp_api_id(req, "id", resp, &id) || !dsp_api_id(req, "uid", resp, &uid) ||
        !dsp_api_series_subs_series(ac, id, resp) || !dsp_api_begin(ac, resp))
        return;
    if (hr_series_subs_del(ac->m, id, &uid, 1, &was, err, sizeof err) < 0) {
        hr_mysql_rollback(ac->m);
        dsp_api_backend_error(resp, "mysql", err);
        return;
    }
    snprintf(target, sizeof target, "series %" PRId64 " uid %" PRId64, id, uid);
    before = cJSON_CreateObject();
    after = cJSON_CreateObject();
    cJSON_AddBoolToObject(before, "subscribed", was > 0);
    cJSON_AddBoolToObject(after, "subscribed", false);
    if (!dsp_api_audit(ac, req, 0, target, before, after, resp))
        hr_mysql_rollback(ac->m);
    else if (dsp_api_commit(ac, resp)) {
        o = cJSON_CreateObject();
        dsp_api_add_id(o, "series_id", id);
        dsp_api_add_id(o, "uid", uid);
        cJSON_AddNumberToObject(o, "deleted", (double)was);
        dsp_api_reply(resp, 200, o);
    }
    cJSON_Delete(before);
    cJSON_Delete(after);
}

void dsp_api_series_subs_list(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req,
                              hr_httpd_resp *resp)
{
    const char *a = hr_httpd_query(req, "after"), *l = hr_httpd_query(req, "limit"), *code;
    int64_t id, after = 0, limit = DSP_API_SERIES_SUBS_PAGE, count = 0;
    hr_mysql_rows *rows = NULL;
    cJSON *o, *arr;
    char err[512], *end;

    (void)d;
    if (!dsp_api_id(req, "id", resp, &id))
        return;
    if (a != NULL && dsp_api_parse_id(a, "after", &after, &code, err, sizeof err) != 0) {
        hr_httpd_error(resp, 400, "bad_query", "%s", err);
        return;
    }
    if (l != NULL) {
        limit = strtoll(l, &end, 10);
        if (*l == '\0' || *end != '\0' || limit < 1 || limit > HR_SERIES_SUBS_PAGE_MAX) {
            hr_httpd_error(resp, 400, "bad_query", "limit must be 1..%d", HR_SERIES_SUBS_PAGE_MAX);
            return;
        }
    }
    if (!dsp_api_series_subs_series(ac, id, resp))
        return;
    if (hr_series_subs_count(ac->m, id, &count, err, sizeof err) < 0 ||
        hr_series_subs_list(ac->m, id, after, limit, &rows, err, sizeof err) < 0) {
        dsp_api_backend_error(resp, "mysql", err);
        return;
    }
    o = cJSON_CreateObject();
    dsp_api_add_id(o, "series_id", id);
    cJSON_AddNumberToObject(o, "count", (double)count);
    arr = cJSON_AddArrayToObject(o, "subscribers");
    for (size_t i = 0; i < rows->nrows; i++) {
        cJSON *e = cJSON_CreateObject();

        dsp_api_add_id(e, "uid", strtoll(hr_mysql_cell(rows, i, 0), NULL, 10));
        cJSON_AddStringToObject(e, "subscribed_at", hr_mysql_cell(rows, i, 1));
        cJSON_AddItemToArray(arr, e);
    }
    if (rows->nrows == (size_t)limit)
        dsp_api_add_id(o, "next_after", strtoll(hr_mysql_cell(rows, rows->nrows - 1, 0), NULL, 10));
    hr_mysql_rows_free(rows);
    dsp_api_reply(resp, 200, o);
}
