/* dsp_api_admin: the API's own administration (see dsp_api.c for the
 * server and the rules every handler follows).
 *
 * - GET /v1/me: the caller as the auth hook found it, and the routes its
 *   role may call (dsp_api_allowed), so the console shows only what works.
 * - GET /v1/tokens, POST /v1/tokens, DELETE /v1/tokens/{id}: operators'
 *   API tokens (hr_apitoken.h).  A new token is in the 201 answer only:
 *   never logged, never stored but as its hash.  Creating and revoking
 *   write their audit row in the same transaction, and tell this
 *   dispatcher's cache at once (dsp_api_tokens_changed); the other
 *   replicas see it within DSP_AUTH_REFRESH_MS.
 * - GET /v1/audit: a page of the audit log (hr_audit_list), newest first,
 *   keyset-paged by id like the task list.
 * - GET /v1/jobs/{id}: a job's record (dsp_api_job.h). */
#include "dsp_api_admin.h"

#include <inttypes.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsp_api_parse.h"
#include "hr_apitoken.h"
#include "hr_clock.h"
#include "hr_httpd_req.h"
#include "hr_log.h"
#include "hr_parse.h"

#define DSP_API_AUDIT_DEFAULT 50
#define DSP_API_FILTER_MAX 200 /* bytes of an actor or action filter */

void dsp_api_admin_me(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    cJSON *o = cJSON_CreateObject();

    (void)ac;
    if (o != NULL) {
        cJSON_AddStringToObject(o, "name", req->auth_name);
        cJSON_AddStringToObject(o, "role", hr_role_name((hr_role)req->auth_role));
        cJSON_AddItemToObject(o, "routes", dsp_api_allowed(d, (hr_role)req->auth_role));
    }
    dsp_api_reply(resp, 200, o);
}

void dsp_api_admin_job(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    cJSON *o = NULL;
    char err[512];
    int64_t id;
    int rc;

    (void)d;
    if (!dsp_api_id(req, "id", resp, &id))
        return;
    rc = dsp_api_job_get(ac->r, id, hr_clock_now_ms(), &o, err, sizeof err);
    if (rc < 0)
        dsp_api_backend_error(resp, "redis", err);
    else if (rc == 1)
        hr_httpd_error(resp, 404, "not_found",
                       "job %" PRId64 " does not exist (a job is kept a day after it ended)", id);
    else
        dsp_api_reply(resp, 200, o);
}

/* ---- tokens ---------------------------------------------------------------------- */

void dsp_api_admin_tokens(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    const char *all = hr_httpd_query(req, "all");
    hr_apitoken *tokens = NULL;
    size_t n = 0;
    char err[512];
    cJSON *o, *arr;

    (void)d;
    if (all != NULL && strcmp(all, "1") != 0 && strcmp(all, "0") != 0) {
        hr_httpd_error(resp, 400, "bad_query", "all must be 0 or 1");
        return;
    }
    if (hr_apitoken_list(ac->m, all != NULL && all[0] == '1', hr_clock_now_ms(), &tokens, &n, err,
                         sizeof err) != 0) {
        dsp_api_backend_error(resp, "mysql", err);
        return;
    }
    o = cJSON_CreateObject();
    arr = cJSON_AddArrayToObject(o, "tokens");
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(arr, hr_apitoken_json(&tokens[i]));
    free(tokens);
    dsp_api_reply(resp, 200, o);
}

/* The expiry a token body asks for into *EXPIRES_MS: expires_at (a time)
 * or expires_in (seconds), not both, else the default.  false after
 * answering 400. */
static bool dsp_api_admin_expiry(const cJSON *j, int64_t now_ms, int64_t *expires_ms,
                                 hr_httpd_resp *resp)
{
    const cJSON *at = cJSON_GetObjectItemCaseSensitive(j, "expires_at");
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(j, "expires_in");
    char err[256];

    if (at != NULL && in != NULL) {
        hr_httpd_error(resp, 400, "bad_field", "give expires_at or expires_in, not both");
        return false;
    }
    if (at != NULL) {
        if (dsp_api_parse_time(at, "expires_at", expires_ms, err, sizeof err) != 0) {
            hr_httpd_error(resp, 400, "bad_field", "%s", err);
            return false;
        }
    } else if (in != NULL) {
        if (!cJSON_IsNumber(in) || in->valuedouble < 1 ||
            in->valuedouble > (double)(HR_APITOKEN_TTL_MAX_MS / 1000) ||
            in->valuedouble != (double)(int64_t)in->valuedouble) {
            hr_httpd_error(resp, 400, "bad_field", "expires_in must be whole seconds, 1..%" PRId64,
                           HR_APITOKEN_TTL_MAX_MS / 1000);
            return false;
        }
        *expires_ms = now_ms + (int64_t)in->valuedouble * 1000;
    } else {
        *expires_ms = now_ms + HR_APITOKEN_TTL_DEFAULT_MS;
    }
    return true;
}

void dsp_api_admin_token_create(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req,
                                hr_httpd_resp *resp)
{
    static const char *const known[] = {"name", "role", "expires_at", "expires_in"};
    cJSON *j = dsp_api_body(req, resp), *item, *o = NULL;
    const cJSON *name, *role_j;
    char token[HR_APITOKEN_MAX], err[512], target[40];
    int64_t now = hr_clock_now_ms(), expires_ms;
    hr_apitoken t;
    hr_role role;
    int rc;

    if (j == NULL)
        return;
    cJSON_ArrayForEach(item, j)
    {
        bool ok = false;

        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
            ok = ok || strcmp(item->string, known[i]) == 0;
        if (!ok) {
            hr_httpd_error(resp, 400, "unknown_field", "unknown field '%.64s'", item->string);
            goto done;
        }
    }
    name = cJSON_GetObjectItemCaseSensitive(j, "name");
    role_j = cJSON_GetObjectItemCaseSensitive(j, "role");
    if (!cJSON_IsString(name) || hr_apitoken_name_ok(name->valuestring, err, sizeof err) != 0) {
        hr_httpd_error(resp, 400, name == NULL ? "missing_field" : "bad_field",
                       "name: a token's name is 1..64 of A-Z a-z 0-9 _ . @ -");
        goto done;
    }
    if (!cJSON_IsString(role_j) || hr_role_parse(role_j->valuestring, &role) != 0) {
        hr_httpd_error(resp, 400, role_j == NULL ? "missing_field" : "bad_field",
                       "role must be viewer, operator or admin");
        goto done;
    }
    if (!dsp_api_admin_expiry(j, now, &expires_ms, resp) || !dsp_api_begin(ac, resp))
        goto done;
    rc = hr_apitoken_create(ac->m, name->valuestring, role, now, expires_ms, req->auth_name, token,
                            &t, err, sizeof err);
    if (rc != 0) {
        hr_mysql_rollback(ac->m);
        if (rc == HR_APITOKEN_REFUSED)
            hr_httpd_error(resp, 409, "exists", "%s", err);
        else
            dsp_api_backend_error(resp, "mysql", err);
        goto done;
    }
    o = hr_apitoken_json(&t);
    snprintf(target, sizeof target, "token %" PRId64, t.id);
    if (!dsp_api_audit(ac, req, 0, target, NULL, o, resp)) {
        hr_mysql_rollback(ac->m);
        goto done;
    }
    if (!dsp_api_commit(ac, resp))
        goto done;
    dsp_api_tokens_changed(d);
    hr_log_info("api_token_created", "id=%" PRId64 " name=%s role=%s by=%s", t.id, t.name,
                hr_role_name(t.role), req->auth_name);
    cJSON_AddStringToObject(o, "token", token);
    dsp_api_reply(resp, 201, o);
    o = NULL;
done:
    OPENSSL_cleanse(token, sizeof token);
    cJSON_Delete(o);
    cJSON_Delete(j);
}

void dsp_api_admin_token_revoke(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req,
                                hr_httpd_resp *resp)
{
    hr_apitoken before, after;
    cJSON *b = NULL, *a = NULL;
    char err[512], target[40];
    int64_t id;
    int rc;

    if (!dsp_api_id(req, "id", resp, &id) || !dsp_api_begin(ac, resp))
        return;
    rc = hr_apitoken_revoke(ac->m, id, req->auth_name, &before, err, sizeof err);
    if (rc == 0)
        rc = hr_apitoken_find(ac->m, id, NULL, &after, err, sizeof err) == 0 ? 0 : -1;
    if (rc != 0) {
        hr_mysql_rollback(ac->m);
        if (rc == HR_APITOKEN_REFUSED)
            hr_httpd_error(resp, strstr(err, "already") != NULL ? 409 : 404,
                           strstr(err, "already") != NULL ? "revoked" : "not_found", "%s", err);
        else
            dsp_api_backend_error(resp, "mysql", err);
        return;
    }
    b = hr_apitoken_json(&before);
    a = hr_apitoken_json(&after);
    hr_audit_diff(b, a);
    snprintf(target, sizeof target, "token %" PRId64, id);
    if (!dsp_api_audit(ac, req, 0, target, b, a, resp)) {
        hr_mysql_rollback(ac->m);
        goto done;
    }
    if (!dsp_api_commit(ac, resp))
        goto done;
    dsp_api_tokens_changed(d);
    hr_log_info("api_token_revoked", "id=%" PRId64 " name=%s by=%s", id, before.name,
                req->auth_name);
    dsp_api_reply(resp, 200, hr_apitoken_json(&after));
done:
    cJSON_Delete(b);
    cJSON_Delete(a);
}

/* ---- the audit log --------------------------------------------------------------- */

/* Query argument NAME, a time, into *MS (-1 when absent); false after
 * answering 400. */
static bool dsp_api_admin_time(const hr_httpd_req *req, const char *name, int64_t *ms,
                               hr_httpd_resp *resp)
{
    const char *s = hr_httpd_query(req, name);
    char err[256];

    *ms = -1;
    if (s != NULL && hr_parse_time(name, s, ms, err, sizeof err) != 0) {
        hr_httpd_error(resp, 400, "bad_query", "%s", err);
        return false;
    }
    return true;
}

void dsp_api_admin_audit(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    const char *limit_s = hr_httpd_query(req, "limit"), *code;
    hr_audit_filter f = {.actor = hr_httpd_query(req, "actor"),
                         .action = hr_httpd_query(req, "action"),
                         .limit = DSP_API_AUDIT_DEFAULT};
    char err[512], *end;
    cJSON *rows = NULL, *o;
    int64_t next = 0;

    (void)d;
    if (limit_s != NULL) {
        long limit = strtol(limit_s, &end, 10);

        if (*limit_s == '\0' || *end != '\0' || limit < 1 || limit > HR_AUDIT_LIST_MAX) {
            hr_httpd_error(resp, 400, "bad_query", "limit must be 1..%d", HR_AUDIT_LIST_MAX);
            return;
        }
        f.limit = (int)limit;
    }
    if ((hr_httpd_query(req, "task") != NULL &&
         dsp_api_parse_id(hr_httpd_query(req, "task"), "task", &f.task_id, &code, err,
                          sizeof err) != 0) ||
        (hr_httpd_query(req, "before") != NULL &&
         dsp_api_parse_id(hr_httpd_query(req, "before"), "before", &f.before_id, &code, err,
                          sizeof err) != 0)) {
        hr_httpd_error(resp, 400, "bad_query", "%s", err);
        return;
    }
    if ((f.actor != NULL && strlen(f.actor) > DSP_API_FILTER_MAX) ||
        (f.action != NULL && strlen(f.action) > DSP_API_FILTER_MAX)) {
        hr_httpd_error(resp, 400, "bad_query", "actor and action are at most %d bytes",
                       DSP_API_FILTER_MAX);
        return;
    }
    if (!dsp_api_admin_time(req, "since", &f.since_ms, resp) ||
        !dsp_api_admin_time(req, "until", &f.until_ms, resp))
        return;
    if (hr_audit_list(ac->m, &f, &rows, &next, err, sizeof err) != 0) {
        dsp_api_backend_error(resp, "mysql", err);
        return;
    }
    o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "audit", rows);
    if (next > 0)
        dsp_api_add_id(o, "next", next);
    else
        cJSON_AddNullToObject(o, "next");
    dsp_api_reply(resp, 200, o);
}
