/* dsp_api_addr: the API's endpoints of the recipients' address book (see
 * dsp_api.c for the server and the rules every handler follows; hr_addr.h
 * for the dual storage).
 *
 * - GET /v1/users/{uid}/addresses: the uid's addresses as MySQL holds them.
 * - POST /v1/users/{uid}/addresses {"platform","app","address"}: adds one
 *   (201; 200 when the uid held it already; 409 too_many_addresses at
 *   HR_ADDR_PER_UID_MAX).
 * - PUT /v1/users/{uid}/addresses {"addresses":[...]}: replaces them all
 *   (an empty list removes them all), in one MySQL transaction.
 * - DELETE /v1/users/{uid}/addresses?platform=&app=&address=: removes one.
 * Every address is checked (hr_addr_check) before anything is written; the
 * body is capped by dispatcher.api.max_body_bytes like every request.  A
 * change goes with its audit row in one transaction (hr_addr_audit.h). */
#include "dsp_api_addr.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsp_api_parse.h"
#include "hr_addr_audit.h"
#include "hr_httpd_req.h"

#define DSP_API_ADDR_STORE "address book"

/* Answers STATUS with {"uid", "addresses": [...]} as MySQL holds them
 * now, plus EXTRA's members (consumed; may be NULL). */
static void dsp_api_addr_reply(dsp_api_conn *ac, int64_t uid, int status, cJSON *extra,
                               hr_httpd_resp *resp)
{
    hr_addr_list l = {0};
    cJSON *o = extra != NULL ? extra : cJSON_CreateObject(), *list;
    char err[512];

    if (hr_addr_list_uid(ac->m, uid, &l, err, sizeof err) != 0) {
        cJSON_Delete(o);
        dsp_api_backend_error(resp, "mysql", err);
        return;
    }
    dsp_api_add_id(o, "uid", uid);
    list = hr_addr_list_json(&l);
    hr_addr_list_free(&l);
    /* Out of memory anywhere: dsp_api_reply answers 500 for a NULL. */
    if (o == NULL || list == NULL || !cJSON_AddItemToObject(o, "addresses", list)) {
        cJSON_Delete(list);
        cJSON_Delete(o);
        o = NULL;
    }
    dsp_api_reply(resp, status, o);
}

/* A negative hr_addr code as the answer: 400, 409 or 503. */
static void dsp_api_addr_error(int rc, const char *err, hr_httpd_resp *resp)
{
    if (rc == HR_ADDR_EINVAL)
        hr_httpd_error(resp, 400, "invalid_address", "%s", err);
    else if (rc == HR_ADDR_EFULL)
        hr_httpd_error(resp, 409, "too_many_addresses", "%s", err);
    else
        dsp_api_backend_error(resp, DSP_API_ADDR_STORE, err);
}

/* KIND on UID's addresses with its audit row (hr_addr_audit.h).  The
 * hr_addr code (>= 0), or a negative one after answering. */
static int dsp_api_addr_apply(dsp_api_conn *ac, const hr_httpd_req *req, int64_t uid,
                              hr_addr_audit_kind kind, const hr_addr *list, size_t n,
                              hr_httpd_resp *resp)
{
    hr_audit_who who;
    char err[1024];
    int rc;

    dsp_api_who(req, &who);
    rc = hr_addr_audit_change(ac->m, ac->r, uid, kind, list, n, &who, ac->action, err, sizeof err);
    if (rc < 0)
        dsp_api_addr_error(rc, err, resp);
    return rc;
}

void dsp_api_addr_get(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    int64_t uid;

    (void)d;
    if (dsp_api_id(req, "uid", resp, &uid))
        dsp_api_addr_reply(ac, uid, 200, NULL, resp);
}

void dsp_api_addr_add(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    cJSON *j = NULL, *o;
    const char *code;
    char err[1024];
    int64_t uid;
    hr_addr in;
    int rc;

    (void)d;
    if (!dsp_api_id(req, "uid", resp, &uid) || (j = dsp_api_body(req, resp)) == NULL)
        goto done;
    if (dsp_api_parse_address(j, "", &in, &code, err, sizeof err) < 0) {
        hr_httpd_error(resp, 400, code, "%s", err);
        goto done;
    }
    rc = dsp_api_addr_apply(ac, req, uid, HR_ADDR_AUDIT_ADD, &in, 1, resp);
    if (rc < 0)
        goto done;
    o = cJSON_CreateObject();
    cJSON_AddBoolToObject(o, "added", rc == 1);
    dsp_api_addr_reply(ac, uid, rc == 1 ? 201 : 200, o, resp);
done:
    cJSON_Delete(j);
}

void dsp_api_addr_put(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    cJSON *j = NULL;
    hr_addr *list = NULL;
    const char *code;
    char err[1024];
    int64_t uid;
    size_t n;
    int rc;

    (void)d;
    if (!dsp_api_id(req, "uid", resp, &uid) || (j = dsp_api_body(req, resp)) == NULL)
        goto done;
    if (dsp_api_parse_addresses(j, &list, &n, &code, err, sizeof err) < 0) {
        hr_httpd_error(resp, 400, code, "%s", err);
        goto done;
    }
    rc = dsp_api_addr_apply(ac, req, uid, HR_ADDR_AUDIT_REPLACE, list, n, resp);
    if (rc < 0)
        goto done;
    dsp_api_addr_reply(ac, uid, 200, NULL, resp);
done:
    free(list);
    cJSON_Delete(j);
}

void dsp_api_addr_del(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    const char *platform = hr_httpd_query(req, "platform"),
               *address = hr_httpd_query(req, "address"), *app = hr_httpd_query(req, "app");
    hr_addr_platform p;
    hr_addr gone;
    int64_t uid;
    cJSON *o;
    int rc;

    (void)d;
    if (!dsp_api_id(req, "uid", resp, &uid))
        return;
    if (platform == NULL || address == NULL || hr_addr_platform_parse(platform, &p) != 0) {
        hr_httpd_error(resp, 400, "bad_query",
                       "?platform=fcm|apns|email|webhook and ?address= are required (and "
                       "?app= for fcm and apns); PUT an empty list to remove every address");
        return;
    }
    gone = (hr_addr){.platform = p, .app = app != NULL ? app : "", .address = address};
    rc = dsp_api_addr_apply(ac, req, uid, HR_ADDR_AUDIT_REMOVE, &gone, 1, resp);
    if (rc < 0)
        return;
    o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "deleted", rc);
    dsp_api_addr_reply(ac, uid, 200, o, resp);
}
