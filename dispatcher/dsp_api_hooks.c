/* dsp_api_hooks: the event webhooks' handlers (see dsp_api_hooks.h).  A
 * body is checked whole before anything is written; the secret is shown
 * once, in the answer that created it.  A change goes with its audit row
 * in one transaction (hr_hooks_audit.h), which never holds the secret. */
#include "dsp_api_hooks.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsp_api_view.h"
#include "hr_hooks_audit.h"
#include "hr_httpd_req.h"

#define DSP_API_HOOKS_DEAD_DEFAULT 100
#define DSP_API_HOOKS_DEAD_MAX 1000
#define DSP_API_HOOKS_TYPES 64 /* names in a filter, at most */

/* H as JSON (the secret only when SECRET). */
static cJSON *dsp_api_hooks_view(const hr_hook *h, bool secret)
{
    cJSON *o = cJSON_CreateObject(), *types = cJSON_AddArrayToObject(o, "types");
    const char *p = h->types;

    dsp_api_add_id(o, "id", h->id);
    cJSON_AddStringToObject(o, "url", h->url);
    while (*p != '\0') {
        size_t len = strcspn(p, ",");
        char name[40];

        snprintf(name, sizeof name, "%.*s", (int)len, p);
        cJSON_AddItemToArray(types, cJSON_CreateString(name));
        p += len + (p[len] == ',');
    }
    cJSON_AddStringToObject(o, "description", h->description);
    cJSON_AddStringToObject(o, "state", h->enabled ? "enabled" : "disabled");
    if (h->disabled_reason[0] != '\0')
        cJSON_AddStringToObject(o, "disabled_reason", h->disabled_reason);
    else
        cJSON_AddNullToObject(o, "disabled_reason");
    dsp_api_add_time(o, "failing_since", h->failing_since_ms);
    dsp_api_add_time(o, "created_at", h->created_ms);
    dsp_api_add_id(o, "dead_letters", h->dead_letters);
    if (secret)
        cJSON_AddStringToObject(o, "secret", h->secret);
    return o;
}

/* A string member NAME of J of at most MAX bytes into OUT (absent: left
 * as it is, *SET false).  false after answering 400. */
static bool dsp_api_hooks_str(const cJSON *j, const char *name, size_t max, char *out, bool *set,
                              hr_httpd_resp *resp)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, name);

    *set = v != NULL;
    if (v == NULL)
        return true;
    if (!cJSON_IsString(v) || strlen(v->valuestring) > max) {
        hr_httpd_error(resp, 400, "invalid", "%s: a string of at most %zu bytes", name, max);
        return false;
    }
    snprintf(out, max + 1, "%s", v->valuestring);
    return true;
}

/* The types member of J (an array of names) into OUT; absent: *SET false.
 * false after answering 400. */
static bool dsp_api_hooks_types(const cJSON *j, char out[HR_HOOKS_TYPES_MAX + 1], bool *set,
                                hr_httpd_resp *resp)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "types"), *it;
    const char *names[DSP_API_HOOKS_TYPES];
    size_t n = 0;
    char err[256];

    *set = v != NULL;
    out[0] = '\0';
    if (v == NULL)
        return true;
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) > DSP_API_HOOKS_TYPES) {
        hr_httpd_error(resp, 400, "invalid",
                       "types: an array of at most %d event types ([] = every type)",
                       DSP_API_HOOKS_TYPES);
        return false;
    }
    cJSON_ArrayForEach(it, v)
    {
        if (!cJSON_IsString(it)) {
            hr_httpd_error(resp, 400, "invalid", "types: names of event types");
            return false;
        }
        names[n++] = it->valuestring;
    }
    if (hr_hooks_types(names, n, out, err, sizeof err) < 0) {
        hr_httpd_error(resp, 400, "invalid", "%s", err);
        return false;
    }
    return true;
}

/* Whether J holds only the members NAMES (NULL-terminated); false after
 * answering 400. */
static bool dsp_api_hooks_known(const cJSON *j, const char *const *names, hr_httpd_resp *resp)
{
    const cJSON *it;

    cJSON_ArrayForEach(it, j)
    {
        size_t i;

        for (i = 0; names[i] != NULL && strcmp(names[i], it->string) != 0; i++)
            ;
        if (names[i] == NULL) {
            hr_httpd_error(resp, 400, "invalid", "unknown member \"%.64s\"", it->string);
            return false;
        }
    }
    return true;
}

void dsp_api_hooks_create(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    static const char *const known[] = {"url", "types", "description", "secret", NULL};
    hr_hook h = {0};
    hr_audit_who who;
    cJSON *j;
    bool set;
    char err[512];

    (void)d;
    if ((j = dsp_api_body(req, resp)) == NULL)
        return;
    if (!dsp_api_hooks_known(j, known, resp) ||
        !dsp_api_hooks_str(j, "url", HR_HOOKS_URL_MAX, h.url, &set, resp) ||
        !dsp_api_hooks_types(j, h.types, &set, resp) ||
        !dsp_api_hooks_str(j, "description", HR_HOOKS_DESC_MAX, h.description, &set, resp) ||
        !dsp_api_hooks_str(j, "secret", HR_HOOKS_SECRET_MAX, h.secret, &set, resp))
        goto done;
    if (h.url[0] == '\0' || hr_hooks_check_url(h.url, err, sizeof err) < 0) {
        hr_httpd_error(resp, 400, "invalid", "%s", h.url[0] == '\0' ? "url is required" : err);
        goto done;
    }
    dsp_api_who(req, &who);
    if (hr_hooks_audit_create(ac->m, &h, &who, ac->action, err, sizeof err) < 0) {
        /* A secret that does not parse is the caller's. */
        if (h.secret[0] != '\0' && strncmp(h.secret, "whsec_", 6) != 0)
            hr_httpd_error(resp, 400, "invalid", "secret: %s", err);
        else
            dsp_api_backend_error(resp, "mysql", err);
        goto done;
    }
    {
        hr_hook made;

        /* As stored (its times), with the secret made or given. */
        if (hr_hooks_get(ac->m, h.id, &made, err, sizeof err) == 0) {
            snprintf(made.secret, sizeof made.secret, "%s", h.secret);
            h = made;
        }
    }
    dsp_api_reply(resp, 201, dsp_api_hooks_view(&h, true));
done:
    cJSON_Delete(j);
}

void dsp_api_hooks_list(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    hr_hook *hooks = NULL;
    size_t n = 0;
    cJSON *o, *arr;
    char err[512];

    (void)d;
    (void)req;
    if (hr_hooks_list(ac->m, &hooks, &n, err, sizeof err) < 0) {
        dsp_api_backend_error(resp, "mysql", err);
        return;
    }
    o = cJSON_CreateObject();
    arr = cJSON_AddArrayToObject(o, "hooks");
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(arr, dsp_api_hooks_view(&hooks[i], false));
    free(hooks);
    dsp_api_reply(resp, 200, o);
}

/* Loads the hook of the path's {id}: false after answering. */
static bool dsp_api_hooks_load(dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp,
                               hr_hook *h)
{
    int64_t id;
    char err[512];
    int rc;

    if (!dsp_api_id(req, "id", resp, &id))
        return false;
    if ((rc = hr_hooks_get(ac->m, id, h, err, sizeof err)) < 0)
        dsp_api_backend_error(resp, "mysql", err);
    else if (rc == 1)
        hr_httpd_error(resp, 404, "not_found", "hook %" PRId64 " does not exist", id);
    return rc == 0;
}

void dsp_api_hooks_get(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    hr_hook h;

    (void)d;
    if (dsp_api_hooks_load(ac, req, resp, &h))
        dsp_api_reply(resp, 200, dsp_api_hooks_view(&h, false));
}

void dsp_api_hooks_patch(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    static const char *const known[] = {"url", "types", "description", "state", NULL};
    char url[HR_HOOKS_URL_MAX + 1], types[HR_HOOKS_TYPES_MAX + 1], desc[HR_HOOKS_DESC_MAX + 1];
    char state[16] = "", err[512];
    bool has_url, has_types, has_desc, has_state;
    hr_hook_update u = {.enabled = -1};
    hr_audit_who who;
    hr_hook h;
    cJSON *j = NULL;

    (void)d;
    if (!dsp_api_hooks_load(ac, req, resp, &h) || (j = dsp_api_body(req, resp)) == NULL)
        return;
    if (!dsp_api_hooks_known(j, known, resp) ||
        !dsp_api_hooks_str(j, "url", HR_HOOKS_URL_MAX, url, &has_url, resp) ||
        !dsp_api_hooks_types(j, types, &has_types, resp) ||
        !dsp_api_hooks_str(j, "description", HR_HOOKS_DESC_MAX, desc, &has_desc, resp) ||
        !dsp_api_hooks_str(j, "state", sizeof state - 1, state, &has_state, resp))
        goto done;
    if (has_state && strcmp(state, "enabled") != 0 && strcmp(state, "disabled") != 0) {
        hr_httpd_error(resp, 400, "invalid", "state: enabled or disabled");
        goto done;
    }
    if (has_url && hr_hooks_check_url(url, err, sizeof err) < 0) {
        hr_httpd_error(resp, 400, "invalid", "%s", err);
        goto done;
    }
    u.url = has_url ? url : NULL;
    u.types = has_types ? types : NULL;
    u.description = has_desc ? desc : NULL;
    u.enabled = has_state ? strcmp(state, "enabled") == 0 : -1;
    dsp_api_who(req, &who);
    if (hr_hooks_audit_update(ac->m, h.id, &u, &who, ac->action, err, sizeof err) != 0 ||
        hr_hooks_get(ac->m, h.id, &h, err, sizeof err) != 0) {
        dsp_api_backend_error(resp, "mysql", err);
        goto done;
    }
    dsp_api_reply(resp, 200, dsp_api_hooks_view(&h, false));
done:
    cJSON_Delete(j);
}

void dsp_api_hooks_delete(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    hr_audit_who who;
    hr_hook h;
    char err[512];

    (void)d;
    if (!dsp_api_hooks_load(ac, req, resp, &h))
        return;
    dsp_api_who(req, &who);
    if (hr_hooks_audit_delete(ac->m, h.id, &who, ac->action, err, sizeof err) < 0) {
        dsp_api_backend_error(resp, "mysql", err);
        return;
    }
    resp->status = 204;
}

void dsp_api_hooks_dead(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    const char *limit_s = hr_httpd_query(req, "limit"), *after_s = hr_httpd_query(req, "after");
    long limit = DSP_API_HOOKS_DEAD_DEFAULT;
    long long after = 0;
    hr_hook_dead *dead = NULL;
    size_t n = 0;
    hr_hook h;
    cJSON *o, *arr;
    char *end, err[512];

    (void)d;
    if (!dsp_api_hooks_load(ac, req, resp, &h))
        return;
    if (limit_s != NULL && ((limit = strtol(limit_s, &end, 10)) < 1 ||
                            limit > DSP_API_HOOKS_DEAD_MAX || *end != '\0')) {
        hr_httpd_error(resp, 400, "bad_query", "limit must be 1..%d", DSP_API_HOOKS_DEAD_MAX);
        return;
    }
    if (after_s != NULL && ((after = strtoll(after_s, &end, 10)) < 0 || *end != '\0')) {
        hr_httpd_error(resp, 400, "bad_query", "after must be a dead letter's id");
        return;
    }
    if (hr_hooks_dead(ac->m, h.id, after, (int)limit, &dead, &n, err, sizeof err) < 0) {
        dsp_api_backend_error(resp, "mysql", err);
        return;
    }
    o = cJSON_CreateObject();
    arr = cJSON_AddArrayToObject(o, "dead_letters");
    for (size_t i = 0; i < n; i++) {
        cJSON *e = cJSON_CreateObject(), *ev = cJSON_Parse(dead[i].payload);

        dsp_api_add_id(e, "id", dead[i].id);
        cJSON_AddStringToObject(e, "event_id", dead[i].event_id);
        dsp_api_add_id(e, "uid", dead[i].uid);
        cJSON_AddStringToObject(e, "error", dead[i].error);
        cJSON_AddBoolToObject(e, "redrive", dead[i].redrive);
        dsp_api_add_time(e, "created_at", dead[i].created_ms);
        if (ev != NULL)
            cJSON_AddItemToObject(e, "event", ev);
        cJSON_AddItemToArray(arr, e);
    }
    if (n == (size_t)limit)
        dsp_api_add_id(o, "next_after", dead[n - 1].id);
    hr_hooks_dead_free(dead, n);
    dsp_api_reply(resp, 200, o);
}

void dsp_api_hooks_redrive(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    int64_t id, marked = 0;
    hr_audit_who who;
    char err[512];
    cJSON *o;
    int rc;

    (void)d;
    if (!dsp_api_id(req, "id", resp, &id))
        return;
    dsp_api_who(req, &who);
    if ((rc = hr_hooks_audit_redrive(ac->m, id, &marked, &who, ac->action, err, sizeof err)) < 0) {
        dsp_api_backend_error(resp, "mysql", err);
        return;
    }
    if (rc == 1) {
        hr_httpd_error(resp, 404, "not_found", "hook %" PRId64 " does not exist", id);
        return;
    }
    o = cJSON_CreateObject();
    dsp_api_add_id(o, "hook", id);
    dsp_api_add_id(o, "marked", marked);
    dsp_api_reply(resp, 200, o);
}
