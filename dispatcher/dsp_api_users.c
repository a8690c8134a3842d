/* dsp_api_users: the API's endpoints of the recipients' profiles,
 * preferences and the suppression list (docs/recipients.md; dsp_api.c for
 * the server and the rules every handler follows; hr_user.h and hr_addr.h
 * for the dual storage).
 *
 * - GET /v1/users/{uid}: the profile (404 when there is none).
 * - PUT /v1/users/{uid} {"tz", "locale", "attributes", "quiet_hours"}: the
 *   whole profile, created (201) or replaced (200); its preferences stay.
 * - PATCH /v1/users/{uid}: the fields given replace the profile's, the
 *   attributes merged key by key (RFC 7386); 404 when there is none.
 * - DELETE /v1/users/{uid}: the profile and its preferences.
 * - GET and PUT /v1/users/{uid}/preferences {"opt_out", "quiet_hours"}:
 *   also with a client token of the uid (the app's), then written with
 *   source "app".
 * - GET /v1/suppressions?platform=&app=&address= (one) or ?after=&limit=
 *   (a page), POST /v1/suppressions {"platform", "app", "address",
 *   "reason", "note"}, DELETE /v1/suppressions?platform=&app=&address=.
 * Everything is checked before anything is written: a refusal (400)
 * changes nothing.  A change goes with its audit row in one transaction
 * (hr_user_audit.h, hr_addr_audit.h); a client token's change is the
 * actor "client:<uid>" the auth hook names. */
#include "dsp_api_users.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_addr_audit.h"
#include "hr_httpd_req.h"
#include "hr_user_audit.h"

#define DSP_API_USERS_PAGE 100      /* suppressions per page by default */
#define DSP_API_USERS_PAGE_MAX 1000 /* and at most */

/* A negative hr_user / hr_addr code as the answer: 400 or 503. */
static void dsp_api_users_error(int rc, const char *what, const char *err, hr_httpd_resp *resp)
{
    if (rc == HR_USER_EINVAL || rc == HR_ADDR_EINVAL)
        hr_httpd_error(resp, 400, what, "%s", err);
    else
        dsp_api_backend_error(resp, "mysql", err);
}

/* Answers STATUS with U as JSON. */
static void dsp_api_users_reply(const hr_user *u, int status, hr_httpd_resp *resp)
{
    dsp_api_reply(resp, status, hr_user_to_json(u));
}

void dsp_api_users_get(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    hr_user u = {0};
    char err[512];
    int64_t uid;
    int rc;

    (void)d;
    if (!dsp_api_id(req, "uid", resp, &uid))
        return;
    rc = hr_user_get(ac->m, uid, &u, err, sizeof err);
    if (rc < 0)
        dsp_api_backend_error(resp, "mysql", err);
    else if (rc == 1)
        hr_httpd_error(resp, 404, "not_found", "uid %" PRId64 " has no profile", uid);
    else
        dsp_api_users_reply(&u, 200, resp);
    hr_user_clear(&u);
}

void dsp_api_users_put(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    hr_user u = {0};
    hr_audit_who who;
    cJSON *j = NULL;
    char err[512];
    int rc;

    if (!dsp_api_id(req, "uid", resp, &u.uid) || (j = dsp_api_body(req, resp)) == NULL)
        goto done;
    dsp_api_who(req, &who);
    rc = hr_user_from_json(j, d->cfg, false, &u, err, sizeof err);
    if (rc == 0)
        rc = hr_user_audit_put(ac->m, ac->r, &u, d->cfg, &who, ac->action, err, sizeof err);
    if (rc < 0) {
        dsp_api_users_error(rc, "invalid_user", err, resp);
        goto done;
    }
    if (hr_user_get(ac->m, u.uid, &u, err, sizeof err) != 0) {
        dsp_api_backend_error(resp, "mysql", err);
        goto done;
    }
    dsp_api_users_reply(&u, rc == 1 ? 201 : 200, resp);
done:
    hr_user_clear(&u);
    cJSON_Delete(j);
}

void dsp_api_users_patch(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    hr_user u = {0};
    hr_audit_who who;
    cJSON *j = NULL;
    char err[512];
    int64_t uid;
    int rc;

    if (!dsp_api_id(req, "uid", resp, &uid) || (j = dsp_api_body(req, resp)) == NULL)
        goto done;
    dsp_api_who(req, &who);
    rc = hr_user_audit_patch(ac->m, ac->r, uid, j, d->cfg, &u, &who, ac->action, err, sizeof err);
    if (rc == 1)
        hr_httpd_error(resp, 404, "not_found",
                       "uid %" PRId64 " has no profile: PUT one (PATCH changes an existing one)",
                       uid);
    else if (rc < 0)
        dsp_api_users_error(rc, "invalid_user", err, resp);
    else
        dsp_api_users_reply(&u, 200, resp);
done:
    hr_user_clear(&u);
    cJSON_Delete(j);
}

void dsp_api_users_del(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    hr_audit_who who;
    char err[512];
    int64_t uid;
    cJSON *o;
    int rc;

    if (!dsp_api_id(req, "uid", resp, &uid))
        return;
    dsp_api_who(req, &who);
    rc = hr_user_audit_delete(ac->m, ac->r, uid, d->cfg, &who, ac->action, err, sizeof err);
    if (rc < 0) {
        dsp_api_backend_error(resp, "mysql", err);
        return;
    }
    o = cJSON_CreateObject();
    dsp_api_add_id(o, "uid", uid);
    cJSON_AddNumberToObject(o, "deleted", rc);
    dsp_api_reply(resp, 200, o);
}

/* Answers STATUS with UID's preferences as MySQL holds them. */
static void dsp_api_prefs_reply(dsp *d, dsp_api_conn *ac, int64_t uid, int status,
                                hr_httpd_resp *resp)
{
    hr_user_prefs p = {0};
    char err[512];

    if (hr_user_prefs_get(ac->m, uid, &p, err, sizeof err) != 0)
        dsp_api_backend_error(resp, "mysql", err);
    else
        dsp_api_reply(resp, status, hr_user_prefs_to_json(uid, &p, d->cfg));
    hr_user_prefs_clear(&p);
}

void dsp_api_prefs_get(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    int64_t uid;

    if (dsp_api_id(req, "uid", resp, &uid))
        dsp_api_prefs_reply(d, ac, uid, 200, resp);
}

void dsp_api_prefs_put(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    hr_user_prefs p = {0};
    hr_audit_who who;
    cJSON *j = NULL;
    char err[512];
    int64_t uid;
    int rc;

    if (!dsp_api_id(req, "uid", resp, &uid) || (j = dsp_api_body(req, resp)) == NULL)
        goto done;
    dsp_api_who(req, &who);
    /* A field left out is kept: the current preferences first. */
    rc = hr_user_prefs_get(ac->m, uid, &p, err, sizeof err);
    if (rc == 0)
        rc = hr_user_prefs_from_json(j, d->cfg, &p, err, sizeof err);
    if (rc == 0)
        rc = hr_user_audit_prefs_put(ac->m, ac->r, uid, &p,
                                     req->auth_id == uid ? HR_USER_SRC_APP : HR_USER_SRC_ADMIN,
                                     d->cfg, &who, ac->action, err, sizeof err);
    if (rc < 0) {
        dsp_api_users_error(rc, "invalid_preferences", err, resp);
        goto done;
    }
    dsp_api_prefs_reply(d, ac, uid, 200, resp);
done:
    hr_user_prefs_clear(&p);
    cJSON_Delete(j);
}

/* ---- the suppression list ------------------------------------------------- */

/* ?platform= and ?app= (default "") of REQ into *P and *APP; false after
 * answering 400. */
static bool dsp_api_supp_where(const hr_httpd_req *req, hr_addr_platform *p, const char **app,
                               hr_httpd_resp *resp)
{
    const char *platform = hr_httpd_query(req, "platform");

    *app = hr_httpd_query(req, "app");
    if (*app == NULL)
        *app = "";
    if (platform == NULL || hr_addr_platform_parse(platform, p) != 0) {
        hr_httpd_error(resp, 400, "bad_query",
                       "?platform=fcm|apns|email|webhook is required (and ?app= for fcm and "
                       "apns)");
        return false;
    }
    return true;
}

void dsp_api_supp_list(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    const char *app, *address = hr_httpd_query(req, "address");
    const char *after = hr_httpd_query(req, "after"), *limit_s = hr_httpd_query(req, "limit");
    long limit = DSP_API_USERS_PAGE;
    hr_addr_platform p;
    char err[512], *end = NULL;
    bool more = false;
    cJSON *list, *o;

    (void)d;
    if (!dsp_api_supp_where(req, &p, &app, resp))
        return;
    if (limit_s != NULL && ((limit = strtol(limit_s, &end, 10)) < 1 ||
                            limit > DSP_API_USERS_PAGE_MAX || *end != '\0')) {
        hr_httpd_error(resp, 400, "bad_query", "?limit= must be 1..%d", DSP_API_USERS_PAGE_MAX);
        return;
    }
    list = hr_addr_suppressions(ac->m, p, app, address, after, (int)limit, &more, err, sizeof err);
    if (list == NULL) {
        dsp_api_backend_error(resp, "mysql", err);
        return;
    }
    if (address != NULL && cJSON_GetArraySize(list) == 0) {
        cJSON_Delete(list);
        hr_httpd_error(resp, 404, "not_found", "%s address %.200s is not suppressed",
                       hr_addr_platform_name(p), address);
        return;
    }
    o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "suppressions", list);
    if (more && cJSON_GetArraySize(list) > 0)
        cJSON_AddStringToObject(
            o, "next",
            cJSON_GetObjectItem(cJSON_GetArrayItem(list, cJSON_GetArraySize(list) - 1), "address")
                ->valuestring);
    else
        cJSON_AddNullToObject(o, "next");
    dsp_api_reply(resp, 200, o);
}

void dsp_api_supp_add(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    static const char *const fields[] = {"platform", "app", "address", "reason", "note"};
    const char *v[5] = {NULL};
    cJSON *j = dsp_api_body(req, resp), *f, *o;
    hr_addr_platform p;
    hr_addr_supp reason;
    hr_audit_who who;
    char err[512];
    int rc;

    (void)d;
    if (j == NULL)
        return;
    cJSON_ArrayForEach(f, j)
    {
        size_t k = 0;

        while (k < 5 && strcmp(f->string, fields[k]) != 0)
            k++;
        if (k == 5 || !cJSON_IsString(f)) {
            hr_httpd_error(resp, 400, "invalid_suppression",
                           "%s: the fields are platform, app, address, reason and note, strings",
                           f->string);
            goto done;
        }
        v[k] = f->valuestring;
    }
    if (v[0] == NULL || hr_addr_platform_parse(v[0], &p) != 0 || v[2] == NULL || v[3] == NULL ||
        hr_addr_supp_parse(v[3], &reason) != 0) {
        hr_httpd_error(resp, 400, "invalid_suppression",
                       "platform (fcm, apns, email, webhook), address and reason (unsubscribed, "
                       "complained, bounced) are required");
        goto done;
    }
    dsp_api_who(req, &who);
    rc = hr_addr_audit_suppression(ac->m, ac->r, true, p, v[1] != NULL ? v[1] : "", v[2], reason,
                                   v[4], &who, ac->action, err, sizeof err);
    if (rc < 0) {
        dsp_api_users_error(rc, "invalid_suppression", err, resp);
        goto done;
    }
    o = cJSON_CreateObject();
    cJSON_AddBoolToObject(o, "added", rc == 1);
    cJSON_AddStringToObject(o, "platform", v[0]);
    cJSON_AddStringToObject(o, "app", v[1] != NULL ? v[1] : "");
    cJSON_AddStringToObject(o, "address", v[2]);
    cJSON_AddStringToObject(o, "reason", v[3]);
    dsp_api_reply(resp, rc == 1 ? 201 : 200, o);
done:
    cJSON_Delete(j);
}

void dsp_api_supp_del(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    const char *app, *address = hr_httpd_query(req, "address");
    hr_addr_platform p;
    hr_audit_who who;
    char err[512];
    cJSON *o;
    int rc;

    (void)d;
    if (!dsp_api_supp_where(req, &p, &app, resp))
        return;
    if (address == NULL) {
        hr_httpd_error(resp, 400, "bad_query", "?address= is required");
        return;
    }
    dsp_api_who(req, &who);
    rc = hr_addr_audit_suppression(ac->m, ac->r, false, p, app, address, HR_ADDR_SUPP_NONE, NULL,
                                   &who, ac->action, err, sizeof err);
    if (rc < 0) {
        dsp_api_users_error(rc, "invalid_suppression", err, resp);
        return;
    }
    o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "deleted", rc);
    dsp_api_reply(resp, 200, o);
}
