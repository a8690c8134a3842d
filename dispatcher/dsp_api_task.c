/* dsp_api_task: the /v1 handlers of tasks (docs/api.md): POST /v1/tasks
 * and PATCH /v1/tasks/{id} (checked by dsp_api_parse.c and hr_task_validate,
 * written with one prepared statement, then admitted by dsp_pace.c), GET of
 * one task (its row and live state, dsp_api_view.c) and of a page of them,
 * and the admin's pause / resume / cancel wish (push_task.control and the
 * ctl key; the dispatchers' control scan carries it out). */
#include "dsp_api_task.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsp_api_view.h"
#include "dsp_pace.h"
#include "dsp_store.h"
#include "hr_clock.h"
#include "hr_httpd_req.h"
#include "hr_log.h"
#include "hr_state.h"
#include "hr_variant.h"

/* Bytes of title, body and payload one page of GET /v1/tasks carries at
 * most (but always its first task). */
#define DSP_API_LIST_BUDGET ((int64_t)4 * 1024 * 1024)

/* ---- POST /v1/tasks, PATCH /v1/tasks/{id} --------------------------------- */

/* The audit row of a task created (BEFORE NULL) or changed: the settings
 * of BEFORE and AFTER that differ (dsp_api_view_settings).  true, or false
 * after answering 503. */
static bool dsp_api_task_audit(dsp_api_conn *ac, const hr_httpd_req *req, int64_t id,
                               const hr_task *before, const hr_task *after, hr_httpd_resp *resp)
{
    cJSON *b = before != NULL ? dsp_api_view_settings(before) : NULL;
    cJSON *a = dsp_api_view_settings(after);
    bool ok;

    hr_audit_diff(b, a);
    ok = dsp_api_audit(ac, req, id, NULL, b, a, resp);
    cJSON_Delete(b);
    cJSON_Delete(a);
    return ok;
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
static bool dsp_api_admit(dsp *d, dsp_api_conn *ac, hr_httpd_resp *resp, hr_task **t)
{
    int64_t id = (*t)->id;
    char err[512];

    if (dsp_pace_admit(d, ac->m, ac->r, NULL, *t, hr_clock_now_ms(), err, sizeof err) < 0) {
        hr_log_warn("admission_failed", "task=%" PRId64 " error=%s", id, err);
        return true;
    }
    hr_task_free(*t);
    *t = NULL;
    return dsp_api_load_task(ac, id, resp, t);
}

bool dsp_api_task_input(dsp *d, const cJSON *j, dsp_api_input *in, const char **scope,
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
    if (hr_task_validate(&in->t, d->cfg, err, sizeof err) < 0) {
        hr_httpd_error(resp, 400, "invalid_task", "%s", err);
        return false;
    }
    return true;
}

/* The task T's per-locale variants VJ (NULL: none) into VS, checked with
 * the task's own content against the channel's limits (hr_variant_check).
 * false after answering 400. */
static bool dsp_api_task_variants(dsp *d, const cJSON *vj, const hr_task *t, hr_variant_set *vs,
                                  hr_httpd_resp *resp)
{
    char err[1024];
    int rc = vj != NULL ? hr_variant_from_json(vj, vs, err, sizeof err) : 0;

    if (rc == 0)
        rc = hr_variant_check(vs, t, d->cfg, err, sizeof err);
    if (rc == -1) {
        hr_httpd_error(resp, 503, "unavailable", "%s", err);
        return false;
    }
    if (rc != 0) {
        /* Without variants (nor a winner step) only the task's own content
         * was refused. */
        hr_httpd_error(resp, 400,
                       vj != NULL || t->ab_sample_pct > 0 ? "invalid_variant" : "invalid_task",
                       "%s", err);
        return false;
    }
    return true;
}

/* The winner step AB (NULL, or JSON null: none) into T, checked as
 * hr_task_validate checks a row.  false after answering 400. */
static bool dsp_api_task_ab(dsp *d, const cJSON *ab, hr_task *t, hr_httpd_resp *resp)
{
    char err[512];

    if (ab == NULL || cJSON_IsNull(ab))
        return true;
    if (hr_variant_ab_from_json(ab, t, err, sizeof err) != 0 ||
        hr_task_validate(t, d->cfg, err, sizeof err) < 0) {
        hr_httpd_error(resp, 400, "invalid_variant", "%s", err);
        return false;
    }
    return true;
}

/* Adds T's variants and the counts per variant (none: neither) to O, the
 * task's view.  false after answering 503. */
static bool dsp_api_task_view_variants(dsp_api_conn *ac, const hr_task *t, cJSON *o,
                                       hr_httpd_resp *resp)
{
    hr_variant_set vs = {0};
    cJSON *counts = NULL;
    char err[512];

    if (hr_variant_load(ac->m, t->id, &vs, err, sizeof err) != 0 ||
        hr_variant_counts(ac->m, t->id, &counts, err, sizeof err) != 0) {
        hr_variant_set_clear(&vs);
        dsp_api_backend_error(resp, "mysql", err);
        return false;
    }
    if (vs.n > 0 || counts->child != NULL) {
        cJSON_AddItemToObject(o, "variants", hr_variant_to_json(&vs));
        cJSON_AddItemToObject(o, "variant_counts", counts);
    } else {
        cJSON_Delete(counts);
    }
    hr_variant_set_clear(&vs);
    return true;
}

void dsp_api_task_create(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    cJSON *j = dsp_api_body(req, resp), *vj = NULL, *ab = NULL, *o;
    dsp_api_input in = {0};
    hr_variant_set vs = {0};
    hr_task *t = NULL;
    char err[1024];
    uint64_t id = 0;
    const char *scope;

    /* variants are rows of their own (push_task_variant), the winner step
     * (ab) columns hr_variant reads: the rest is the task's body. */
    if (j != NULL) {
        vj = cJSON_DetachItemFromObjectCaseSensitive(j, "variants");
        ab = cJSON_DetachItemFromObjectCaseSensitive(j, "ab");
    }
    if (j == NULL || !dsp_api_task_input(d, j, &in, &scope, resp) ||
        !dsp_api_task_ab(d, ab, &in.t, resp) || !dsp_api_task_variants(d, vj, &in.t, &vs, resp) ||
        !dsp_api_begin(ac, resp))
        goto done;
    if (hr_task_insert(ac->m, &in.t, scope, in.has_freeze ? in.t.freeze_ms : -1, 0, &id, NULL, err,
                       sizeof err) < 0) {
        hr_mysql_rollback(ac->m);
        dsp_api_backend_error(resp, "mysql", err);
        goto done;
    }
    if (hr_variant_insert(ac->m, (int64_t)id, &vs, err, sizeof err) != 0) {
        hr_mysql_rollback(ac->m);
        dsp_api_backend_error(resp, "mysql", err);
        goto done;
    }
    /* The row as stored, and its audit row in the same transaction. */
    if (!dsp_api_load_task(ac, (int64_t)id, resp, &t) ||
        !dsp_api_task_audit(ac, req, (int64_t)id, NULL, t, resp)) {
        hr_mysql_rollback(ac->m);
        goto done;
    }
    if (!dsp_api_commit(ac, resp) || !dsp_api_admit(d, ac, resp, &t))
        goto done;
    hr_log_info("api_task_created", "task=%" PRIu64 " name=%s variants=%zu", id, t->name, vs.n);
    o = dsp_api_view_task(t);
    if (vs.n > 0)
        cJSON_AddItemToObject(o, "variants", hr_variant_to_json(&vs));
    dsp_api_reply(resp, 201, o);
done:
    hr_task_free(t);
    hr_variant_set_clear(&vs);
    dsp_api_input_clear(&in);
    cJSON_Delete(ab);
    cJSON_Delete(vj);
    cJSON_Delete(j);
}

/* Locks task ID's row for the caller's transaction (SELECT ... FOR UPDATE):
 * what is read next is what a change will change.  false after answering
 * 404 or 503. */
static bool dsp_api_lock_task(dsp_api_conn *ac, int64_t id, hr_httpd_resp *resp)
{
    const hr_mysql_param p[] = {HR_P_I64(id)};
    hr_mysql_rows *rows = NULL;
    char err[512];
    bool found;

    if (hr_mysql_query(ac->m, "SELECT id FROM push_task WHERE id = ? FOR UPDATE", p, 1, &rows, err,
                       sizeof err) != 0) {
        dsp_api_backend_error(resp, "mysql", err);
        return false;
    }
    found = rows->nrows == 1;
    hr_mysql_rows_free(rows);
    if (!found)
        hr_httpd_error(resp, 404, "not_found", "task %" PRId64 " does not exist", id);
    return found;
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

void dsp_api_task_patch(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    cJSON *j = NULL;
    hr_task *t = NULL, *changed = NULL;
    dsp_api_input in = {0};
    int64_t id;
    uint64_t affected = 0;
    unsigned sqlerr = 0;
    char err[1024];
    const char *code;

    if (!dsp_api_id(req, "id", resp, &id) || (j = dsp_api_body(req, resp)) == NULL ||
        !dsp_api_begin(ac, resp))
        goto done;
    /* The row locked, so the audit's before is what the UPDATE changes. */
    if (!dsp_api_lock_task(ac, id, resp) || !dsp_api_load_task(ac, id, resp, &t))
        goto rollback;
    in.t = *t;
    /* IN owns its printed texts (dsp_api_input_clear); T keeps its own. */
    in.t.payload = in.t.rich = NULL;
    if (dsp_api_parse_task(j, true, &in, &code, err, sizeof err) < 0) {
        hr_httpd_error(resp, 400, code, "%s", err);
        goto rollback;
    }
    if (in.t.payload == NULL && t->payload != NULL)
        in.t.payload = strdup(t->payload);
    if (in.t.rich == NULL && t->rich != NULL)
        in.t.rich = strdup(t->rich);
    if (hr_task_validate(&in.t, d->cfg, err, sizeof err) < 0) {
        hr_httpd_error(resp, 400, "invalid_task", "%s", err);
        goto rollback;
    }
    if (t->state != HR_STATE_SCHEDULED) {
        hr_httpd_error(resp, 409, "wrong_state",
                       "task %" PRId64 " is %s; only a scheduled task changes", id,
                       hr_state_name(t->state));
        goto rollback;
    }
    if (in.has_due) {
        int early = dsp_api_due_before_freeze(ac, id, in.t.due_ms, err, sizeof err);

        if (early < 0) {
            dsp_api_backend_error(resp, "mysql", err);
            goto rollback;
        }
        if (early == 1) {
            hr_httpd_error(resp, 400, "bad_field",
                           "due_at must not be before the task's "
                           "freeze_at (the task would never be in the pull on its day)");
            goto rollback;
        }
    }
    {
        const hr_mysql_param p[] = {
            HR_P_STR(in.t.title), HR_P_STR(in.t.body), hr_mysql_p_str_or_null(in.t.payload),
            HR_P_I64(in.t.due_ms), hr_mysql_p_i64_or_null(in.t.ttl_s),
            hr_mysql_p_str_or_null(in.t.collapse_key), HR_P_STR(hr_priority_name(in.t.priority)),
            /* local time and send windows */
            HR_P_I64(in.t.local_time), hr_mysql_p_str_or_null(in.t.default_tz),
            hr_mysql_p_i64_or_null(in.t.window_start_s), hr_mysql_p_i64_or_null(in.t.window_end_s),
            hr_mysql_p_str_or_null(in.t.window_tz),
            /* pacing */
            dsp_api_p_finish(&in.t),
            /* lead times */
            hr_task_leads(&in.t) ? HR_P_I64(in.t.event_ms) : HR_P_NULL, HR_P_I64(id)};

        if (hr_mysql_exec(ac->m,
                          "UPDATE push_task SET title = ?, body = ?, payload = ?, "
                          "due_at = FROM_UNIXTIME(? / 1000), ttl_s = ?, collapse_key = ?, "
                          "priority = ?, local_time = ?, default_tz = ?, "
                          "window_start = SEC_TO_TIME(?), window_end = SEC_TO_TIME(?), "
                          "window_tz = ?, finish_by = FROM_UNIXTIME(? / 1000), "
                          "event_at = FROM_UNIXTIME(? / 1000) "
                          "WHERE id = ? AND state = 'scheduled'",
                          p, 15, &affected, NULL, &sqlerr, err, sizeof err) < 0) {
            if (sqlerr == HR_MYSQL_ER_SIGNAL) /* the freeze trigger */
                hr_httpd_error(resp, 409, "frozen", "%s", err);
            else
                dsp_api_backend_error(resp, "mysql", err);
            goto rollback;
        }
    }
    if (!dsp_api_load_task(ac, id, resp, &changed) ||
        !dsp_api_task_audit(ac, req, id, t, changed, resp) || !dsp_api_commit(ac, resp))
        goto rollback;
    if (!dsp_api_admit(d, ac, resp, &changed))
        goto done;
    dsp_api_reply(resp, 200, dsp_api_view_task(changed));
    goto done;
rollback:
    /* After a failed commit this only resets the connection's state. */
    hr_mysql_rollback(ac->m);
done:
    dsp_api_input_clear(&in);
    hr_task_free(t);
    hr_task_free(changed);
    cJSON_Delete(j);
}

/* ---- GET /v1/tasks/{id}, GET /v1/tasks ------------------------------------ */

void dsp_api_task_get(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    hr_task *t = NULL;
    cJSON *o;
    int64_t id;

    (void)d;
    if (!dsp_api_id(req, "id", resp, &id) || !dsp_api_load_task(ac, id, resp, &t))
        return;
    o = dsp_api_view_task(t);
    dsp_api_view_live(ac, t, o);
    if (dsp_api_task_view_variants(ac, t, o, resp))
        dsp_api_reply(resp, 200, o);
    else
        cJSON_Delete(o);
    hr_task_free(t);
}

/* How many of the N tasks sized SIZES (their title, body and payload, in
 * page order) one page carries: all that fit DSP_API_LIST_BUDGET bytes
 * together, and always the first (a single task is served whole, as GET
 * /v1/tasks/{id} would). */
static size_t dsp_api_list_fit(const hr_mysql_rows *sizes, size_t n)
{
    int64_t used = 0;
    size_t k;

    for (k = 0; k < n; k++) {
        used += strtoll(hr_mysql_cell(sizes, k, 1), NULL, 10);
        if (k > 0 && used > DSP_API_LIST_BUDGET)
            break;
    }
    return k;
}

/* Newest first, keyset-paged: ?before=ID gives the tasks below ID, and
 * "next" is the before of the next page (null on the last); ?series=ID keeps
 * only that series' occurrences (the console's series page).  A page holds
 * `limit` tasks, or fewer when their texts would pass the response budget
 * (dsp_api_list_fit): the sizes are read first (one small row a task),
 * then only the rows that fit, so a page of large payloads never builds
 * more than about the budget. */
void dsp_api_task_list(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    const char *state = hr_httpd_query(req, "state"), *q = hr_httpd_query(req, "q"), *code;
    const char *series_s = hr_httpd_query(req, "series");
    long limit;
    int64_t before, last = 0, series = 0;
    hr_task **tasks = NULL;
    hr_mysql_rows *sizes = NULL;
    size_t n = 0, i, fit = 0;
    cJSON *o, *arr;
    char err[1024];

    (void)d;
    if (dsp_api_parse_list(state, hr_httpd_query(req, "limit"), &limit, &code, err, sizeof err) <
            0 ||
        dsp_api_parse_page(hr_httpd_query(req, "before"), q, &before, &code, err, sizeof err) < 0 ||
        (series_s != NULL &&
         dsp_api_parse_id(series_s, "series", &series, &code, err, sizeof err) < 0)) {
        hr_httpd_error(resp, 400, code, "%s", err);
        return;
    }
    {
        /* One more than asked tells whether a next page exists. */
        const hr_mysql_param p[] = {hr_mysql_p_str_or_null(state),
                                    hr_mysql_p_str_or_null(state),
                                    HR_P_I64(before),
                                    hr_mysql_p_str_or_null(q),
                                    hr_mysql_p_str_or_null(q),
                                    HR_P_I64(series),
                                    HR_P_I64(series),
                                    HR_P_I64(limit + 1)};

        if (hr_mysql_query(ac->m,
                           "SELECT id, LENGTH(title) + LENGTH(body) + COALESCE(LENGTH(payload), 0) "
                           "FROM push_task WHERE (? IS NULL OR state = ?) AND id < ? "
                           "AND (? IS NULL OR LOCATE(?, name) > 0) "
                           "AND (? = 0 OR series_id = ?) ORDER BY id DESC LIMIT ?",
                           p, 8, &sizes, err, sizeof err) < 0) {
            dsp_api_backend_error(resp, "mysql", err);
            return;
        }
    }
    fit = dsp_api_list_fit(sizes, sizes->nrows < (size_t)limit ? sizes->nrows : (size_t)limit);
    if (fit > 0)
        last = strtoll(hr_mysql_cell(sizes, fit - 1, 0), NULL, 10);
    if (fit > 0) {
        const hr_mysql_param p[] = {hr_mysql_p_str_or_null(state),
                                    hr_mysql_p_str_or_null(state),
                                    HR_P_I64(before),
                                    HR_P_I64(last),
                                    hr_mysql_p_str_or_null(q),
                                    hr_mysql_p_str_or_null(q),
                                    HR_P_I64(series),
                                    HR_P_I64(series),
                                    HR_P_I64((int64_t)fit)};

        if (dsp_store_tasks(ac->m,
                            "SELECT " HR_TASK_COLUMNS " FROM push_task "
                            "WHERE (? IS NULL OR state = ?) AND id < ? AND id >= ? "
                            "AND (? IS NULL OR LOCATE(?, name) > 0) "
                            "AND (? = 0 OR series_id = ?) ORDER BY id DESC LIMIT ?",
                            p, 9, &tasks, &n, err, sizeof err) < 0) {
            hr_mysql_rows_free(sizes);
            dsp_api_backend_error(resp, "mysql", err);
            return;
        }
    }
    o = cJSON_CreateObject();
    arr = cJSON_AddArrayToObject(o, "tasks");
    for (i = 0; i < n; i++)
        cJSON_AddItemToArray(arr, dsp_api_view_task(tasks[i]));
    if (sizes->nrows > fit)
        dsp_api_add_id(o, "next", last);
    else
        cJSON_AddNullToObject(o, "next");
    hr_mysql_rows_free(sizes);
    dsp_store_tasks_free(tasks, n);
    dsp_api_reply(resp, 200, o);
}

/* ---- POST /v1/tasks/{id}/pause|resume|cancel ------------------------------ */

/* The same as an admin's UPDATE push_task SET control = ..., with its audit
 * row in the same transaction, plus the ctl key at once so workers react
 * without waiting for a dispatcher tick; the dispatchers' control scan
 * carries out the state transition. */
static void dsp_api_task_control(dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp,
                                 hr_control control)
{
    hr_task *t = NULL;
    cJSON *before = NULL, *after = NULL;
    char err[512];
    int64_t id;

    if (!dsp_api_id(req, "id", resp, &id) || !dsp_api_begin(ac, resp))
        return;
    if (!dsp_api_lock_task(ac, id, resp) || !dsp_api_load_task(ac, id, resp, &t))
        goto rollback;
    if (hr_state_final(t->state)) {
        hr_httpd_error(resp, 409, "finished", "task %" PRId64 " is already %s", id,
                       hr_state_name(t->state));
        goto rollback;
    }
    if (hr_state_control(ac->m, id, control, err, sizeof err) < 0) {
        dsp_api_backend_error(resp, "mysql", err);
        goto rollback;
    }
    /* Recorded even when it changes nothing (a pause of a paused task):
     * someone asked for it. */
    before = cJSON_CreateObject();
    after = cJSON_CreateObject();
    cJSON_AddStringToObject(before, "control", hr_control_name(t->control));
    cJSON_AddStringToObject(after, "control", hr_control_name(control));
    if (!dsp_api_audit(ac, req, id, NULL, before, after, resp) || !dsp_api_commit(ac, resp))
        goto rollback;
    /* The ctl key after the commit: workers never act on a wish MySQL
     * does not hold.  MySQL holds it now; the next dispatcher scan mirrors
     * it if this fails. */
    if (hr_task_set_control(NULL, ac->r, id, control, err, sizeof err) != 0)
        hr_log_warn("api_ctl_key_failed", "task=%" PRId64 " control=%s error=%s", id,
                    hr_control_name(control), err);
    hr_log_info("api_task_control", "task=%" PRId64 " control=%s by=%s", id,
                hr_control_name(control), req->auth_name);
    hr_task_free(t);
    t = NULL;
    if (dsp_api_load_task(ac, id, resp, &t))
        dsp_api_reply(resp, 200, dsp_api_view_task(t));
    goto done;
rollback:
    hr_mysql_rollback(ac->m);
done:
    cJSON_Delete(before);
    cJSON_Delete(after);
    hr_task_free(t);
}

void dsp_api_task_pause(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    (void)d;
    dsp_api_task_control(ac, req, resp, HR_CONTROL_PAUSE);
}

void dsp_api_task_resume(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    (void)d;
    dsp_api_task_control(ac, req, resp, HR_CONTROL_RUN);
}

void dsp_api_task_cancel(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    (void)d;
    dsp_api_task_control(ac, req, resp, HR_CONTROL_CANCEL);
}
