/* wk_fcm: FCM HTTP v1 requests and answers as pure functions.
 *
 * JSON in and out goes through cJSON: the service account and the token
 * response are parsed with cJSON_ParseWithLength, the JWT claims and the
 * message are built as cJSON trees and printed once into the caller's
 * capped hr_buf.  Nothing here does I/O, keeps state or logs. */
#include "wk_fcm.h"
#include "hr_seams.h"
#include "hr_template.h"

#include <inttypes.h>
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define WK_FCM_GRANT "urn:ietf:params:oauth:grant-type:jwt-bearer"
#define WK_FCM_JWT_LIFE_S 3600 /* Google's longest assertion */
#define WK_FCM_REFRESH_MARGIN_S 300
#define WK_FCM_COLLAPSE_MAX 64
#define WK_FCM_TOKEN_MAX 4096 /* access tokens are ~200 bytes; a bigger one is junk */

/* The string member NAME of OBJ, or NULL when absent, not a string or "". */
static const char *wk_fcm_str(const cJSON *obj, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);

    return cJSON_IsString(v) && v->valuestring[0] != '\0' ? v->valuestring : NULL;
}

int wk_fcm_account_parse(const char *json, size_t len, wk_fcm_account **out, char *errstr,
                         size_t errlen)
{
    static const char *const need[] = {"project_id", "client_email", "private_key", "token_uri"};
    cJSON *root = cJSON_ParseWithLength(json, len);
    wk_fcm_account *a = NULL;
    const char *key;
    int rc = -1;

    *out = NULL;
    if (!cJSON_IsObject(root)) {
        snprintf(errstr, errlen, "service account: not a JSON object");
        goto cleanup;
    }
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
        if (wk_fcm_str(root, need[i]) == NULL) {
            snprintf(errstr, errlen, "service account: no \"%s\" string", need[i]);
            goto cleanup;
        }
    }
    /* http:// would send the signed assertion in clear text: only the
     * tests' stand-ins (a build with test seams) may listen so. */
    if (strncmp(wk_fcm_str(root, "token_uri"), "https://", 8) != 0 &&
        (!HR_SEAMS_ON || strncmp(wk_fcm_str(root, "token_uri"), "http://", 7) != 0)) {
        snprintf(errstr, errlen, "service account: token_uri is not an https:// URL");
        goto cleanup;
    }
    a = calloc(1, sizeof *a);
    if (a == NULL || (a->project_id = strdup(wk_fcm_str(root, "project_id"))) == NULL ||
        (a->client_email = strdup(wk_fcm_str(root, "client_email"))) == NULL ||
        (a->token_uri = strdup(wk_fcm_str(root, "token_uri"))) == NULL) {
        snprintf(errstr, errlen, "service account: out of memory");
        goto cleanup;
    }
    key = wk_fcm_str(root, "private_key");
    if (hr_jwt_key_load(key, strlen(key), &a->key, errstr, errlen) != 0)
        goto cleanup;
    if (hr_jwt_key_alg(a->key) != HR_JWT_RS256) {
        snprintf(errstr, errlen, "service account: private_key is not an RSA key");
        goto cleanup;
    }
    *out = a;
    a = NULL;
    rc = 0;
cleanup:
    wk_fcm_account_free(a);
    cJSON_Delete(root);
    return rc;
}

void wk_fcm_account_free(wk_fcm_account *a)
{
    if (a == NULL)
        return;
    free(a->project_id);
    free(a->client_email);
    free(a->token_uri);
    hr_jwt_key_free(a->key);
    free(a);
}

/* Appends the printed tree ROOT to OUT; 0, or -1 with ERRSTR (WHAT names it). */
static int wk_fcm_print(const cJSON *root, const char *what, hr_buf *out, char *errstr,
                        size_t errlen)
{
    char *text = root ? cJSON_PrintUnformatted(root) : NULL;
    int rc = -1;

    if (text == NULL)
        snprintf(errstr, errlen, "%s: out of memory", what);
    else if (hr_buf_append(out, text, strlen(text)) != 0)
        snprintf(errstr, errlen, "%s: over the buffer's cap", what);
    else
        rc = 0;
    free(text);
    return rc;
}

int wk_fcm_token_request(const wk_fcm_account *a, int64_t now_s, hr_buf *out, char *errstr,
                         size_t errlen)
{
    cJSON *claims = cJSON_CreateObject();
    hr_buf text, body;
    int rc = -1;

    hr_buf_init(&text, 4096);
    hr_buf_init(&body, out->max - out->len);
    if (claims == NULL || !cJSON_AddStringToObject(claims, "iss", a->client_email) ||
        !cJSON_AddStringToObject(claims, "scope", WK_FCM_SCOPE) ||
        !cJSON_AddStringToObject(claims, "aud", a->token_uri) ||
        !cJSON_AddNumberToObject(claims, "iat", (double)now_s) ||
        !cJSON_AddNumberToObject(claims, "exp", (double)(now_s + WK_FCM_JWT_LIFE_S))) {
        snprintf(errstr, errlen, "token request: out of memory");
        goto cleanup;
    }
    if (wk_fcm_print(claims, "token request", &text, errstr, errlen) != 0)
        goto cleanup;
    /* The assertion is base64url and dots: nothing in it needs escaping. */
    if (hr_buf_append(&body, "grant_type=", 11) != 0 ||
        hr_url_escape_append(&body, WK_FCM_GRANT, strlen(WK_FCM_GRANT)) != 0 ||
        hr_buf_append(&body, "&assertion=", 11) != 0) {
        snprintf(errstr, errlen, "token request: over the buffer's cap");
        goto cleanup;
    }
    if (hr_jwt_sign(a->key, NULL, text.data, text.len, &body, errstr, errlen) != 0)
        goto cleanup;
    if (hr_buf_append(out, body.data, body.len) != 0) {
        snprintf(errstr, errlen, "token request: over the buffer's cap");
        goto cleanup;
    }
    rc = 0;
cleanup:
    hr_buf_free(&text);
    hr_buf_free(&body);
    cJSON_Delete(claims);
    return rc;
}

int wk_fcm_token_parse(long status, const char *body, size_t len, int64_t now_s, wk_fcm_token *t,
                       char *errstr, size_t errlen)
{
    cJSON *root =
        cJSON_ParseWithLength(body, len < WK_PROVIDER_BODY_MAX ? len : WK_PROVIDER_BODY_MAX);
    const cJSON *exp = cJSON_GetObjectItemCaseSensitive(root, "expires_in");
    const char *tok = wk_fcm_str(root, "access_token"), *type = wk_fcm_str(root, "token_type");
    char *copy;
    int rc = -1;
    int64_t life;

    if (status != 200) {
        const char *e = wk_fcm_str(root, "error"), *d = wk_fcm_str(root, "error_description");
        snprintf(errstr, errlen, "token endpoint: HTTP %ld%s%s%s%s", status, e ? " " : "",
                 e ? e : "", d ? ": " : "", d ? d : "");
        goto cleanup;
    }
    if (tok == NULL || strlen(tok) > WK_FCM_TOKEN_MAX || !cJSON_IsNumber(exp) ||
        exp->valuedouble < 1 || exp->valuedouble > 86400 ||
        (type != NULL && strcasecmp(type, "Bearer") != 0)) {
        snprintf(errstr, errlen,
                 "token endpoint: answer without a Bearer access_token and expires_in 1..86400");
        goto cleanup;
    }
    copy = strdup(tok);
    if (copy == NULL) {
        snprintf(errstr, errlen, "token endpoint: out of memory");
        goto cleanup;
    }
    life = (int64_t)exp->valuedouble;
    free(t->access_token);
    t->access_token = copy;
    t->expires_at_s = now_s + life;
    t->refresh_at_s = t->expires_at_s -
                      (life >= 2 * WK_FCM_REFRESH_MARGIN_S ? WK_FCM_REFRESH_MARGIN_S : life / 2);
    rc = 0;
cleanup:
    cJSON_Delete(root);
    return rc;
}

bool wk_fcm_token_due(const wk_fcm_token *t, int64_t now_s)
{
    return t->access_token == NULL || now_s >= t->refresh_at_s;
}

void wk_fcm_token_clear(wk_fcm_token *t)
{
    free(t->access_token);
    t->access_token = NULL;
    t->expires_at_s = 0;
    t->refresh_at_s = 0;
}

int wk_fcm_send_url(const wk_fcm_account *a, const char *base_url, hr_buf *out)
{
    static const char path[] = "/v1/projects/", tail[] = "/messages:send";

    if (hr_buf_append(out, base_url, strlen(base_url)) != 0 ||
        hr_buf_append(out, path, sizeof path - 1) != 0 ||
        hr_url_escape_append(out, a->project_id, strlen(a->project_id)) != 0 ||
        hr_buf_append(out, tail, sizeof tail - 1) != 0)
        return -1;
    return 0;
}

/* FCM refuses these data keys (its own message fields). */
static bool wk_fcm_reserved_key(const char *k)
{
    return strcmp(k, "from") == 0 || strcmp(k, "notification") == 0 ||
           strcmp(k, "message_type") == 0 || strncmp(k, "google", 6) == 0 ||
           strncmp(k, "gcm", 3) == 0;
}

/* Adds PAYLOAD's members to DATA, each value as a string: strings as they
 * are, anything else as its JSON text. */
static int wk_fcm_add_data(cJSON *data, const cJSON *payload, char *errstr, size_t errlen)
{
    const cJSON *item;

    cJSON_ArrayForEach(item, payload)
    {
        char *text = NULL;
        bool ok;

        if (wk_fcm_reserved_key(item->string)) {
            snprintf(errstr, errlen, "fcm message: payload key \"%s\" is reserved by FCM",
                     item->string);
            return -1;
        }
        if (!cJSON_IsString(item) && (text = cJSON_PrintUnformatted(item)) == NULL)
            ok = false;
        else
            ok = cJSON_AddStringToObject(data, item->string, text ? text : item->valuestring) !=
                 NULL;
        free(text);
        if (!ok) {
            snprintf(errstr, errlen, "fcm message: out of memory");
            return -1;
        }
    }
    return 0;
}

int wk_fcm_message_build(const wk_fcm_message *m, hr_buf *out, char *errstr, size_t errlen)
{
    cJSON *root = cJSON_CreateObject(), *msg, *n, *android, *headers, *data;
    char num[32];
    int rc = -1;

    if (m->token == NULL || m->token[0] == '\0') {
        snprintf(errstr, errlen, "fcm message: no device token");
        goto cleanup;
    }
    if (m->ttl_s < -1 || m->ttl_s > WK_FCM_TTL_MAX_S) {
        snprintf(errstr, errlen, "fcm message: ttl %d s outside 0..%d", m->ttl_s, WK_FCM_TTL_MAX_S);
        goto cleanup;
    }
    if (m->collapse_key != NULL && strlen(m->collapse_key) > WK_FCM_COLLAPSE_MAX) {
        snprintf(errstr, errlen, "fcm message: collapse key over %d bytes", WK_FCM_COLLAPSE_MAX);
        goto cleanup;
    }
    if (m->payload != NULL && !cJSON_IsObject(m->payload)) {
        snprintf(errstr, errlen, "fcm message: payload is not a JSON object");
        goto cleanup;
    }
    msg = cJSON_AddObjectToObject(root, "message");
    if (msg == NULL || !cJSON_AddStringToObject(msg, "token", m->token))
        goto oom;
    if (m->title != NULL || m->body != NULL) {
        n = cJSON_AddObjectToObject(msg, "notification");
        if (n == NULL || (m->title && !cJSON_AddStringToObject(n, "title", m->title)) ||
            (m->body && !cJSON_AddStringToObject(n, "body", m->body)))
            goto oom;
    }
    if (m->payload != NULL && m->payload->child != NULL) {
        data = cJSON_AddObjectToObject(msg, "data");
        if (data == NULL)
            goto oom;
        if (wk_fcm_add_data(data, m->payload, errstr, errlen) != 0)
            goto cleanup;
    }
    android = cJSON_AddObjectToObject(msg, "android");
    if (android == NULL ||
        !cJSON_AddStringToObject(android, "priority", m->high_priority ? "HIGH" : "NORMAL"))
        goto oom;
    headers = cJSON_AddObjectToObject(cJSON_AddObjectToObject(msg, "apns"), "headers");
    if (headers == NULL ||
        !cJSON_AddStringToObject(headers, "apns-priority", m->high_priority ? "10" : "5"))
        goto oom;
    if (m->ttl_s >= 0) {
        /* Android: a duration "<s>s"; APNs: an absolute expiry, 0 = now or never. */
        snprintf(num, sizeof num, "%ds", m->ttl_s);
        if (!cJSON_AddStringToObject(android, "ttl", num))
            goto oom;
        snprintf(num, sizeof num, "%" PRId64, m->ttl_s == 0 ? (int64_t)0 : m->now_s + m->ttl_s);
        if (!cJSON_AddStringToObject(headers, "apns-expiration", num))
            goto oom;
    }
    if (m->collapse_key != NULL &&
        (!cJSON_AddStringToObject(android, "collapse_key", m->collapse_key) ||
         !cJSON_AddStringToObject(headers, "apns-collapse-id", m->collapse_key)))
        goto oom;
    rc = wk_fcm_print(root, "fcm message", out, errstr, errlen);
    goto cleanup;
oom:
    snprintf(errstr, errlen, "fcm message: out of memory");
cleanup:
    cJSON_Delete(root);
    return rc;
}

/* The FCM error code of an error body: details[].errorCode of the FcmError
 * detail, else error.status; NULL when the body says neither.  *ON_TOKEN
 * is set when a BadRequest detail names message.token as the bad field. */
static const char *wk_fcm_error_code(const cJSON *root, bool *on_token)
{
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(root, "error");
    const cJSON *details = cJSON_GetObjectItemCaseSensitive(err, "details"), *d, *v;
    const char *code = NULL;

    *on_token = false;
    cJSON_ArrayForEach(d, details)
    {
        if (code == NULL)
            code = wk_fcm_str(d, "errorCode");
        cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(d, "fieldViolations"))
        {
            const char *field = wk_fcm_str(v, "field");
            if (field != NULL && strcmp(field, "message.token") == 0)
                *on_token = true;
        }
    }
    return code != NULL ? code : wk_fcm_str(err, "status");
}

void wk_fcm_classify(long status, const char *body, size_t len, long retry_after_s,
                     wk_provider_result *out)
{
    cJSON *root = NULL;
    const char *code = NULL;
    bool on_token = false;

    if (status == 200) {
        wk_provider_set(out, WK_VERDICT_DELIVERED, status, NULL);
        return;
    }
    if (body != NULL && len > 0) {
        root = cJSON_ParseWithLength(body, len < WK_PROVIDER_BODY_MAX ? len : WK_PROVIDER_BODY_MAX);
        code = wk_fcm_error_code(root, &on_token);
    }
    if ((status == 404 &&
         (code == NULL || strcmp(code, "UNREGISTERED") == 0 || strcmp(code, "NOT_FOUND") == 0)) ||
        (status == 400 && code != NULL && strcmp(code, "INVALID_ARGUMENT") == 0 && on_token))
        wk_provider_set(out, WK_VERDICT_UNREGISTERED, status, code);
    else if (status == 401 && (code == NULL || strcmp(code, "THIRD_PARTY_AUTH_ERROR") != 0))
        /* The access token lapsed or was revoked; an APNs / web-push
         * credential rejected (THIRD_PARTY_AUTH_ERROR) is not ours to fix. */
        wk_provider_set(out, WK_VERDICT_REFRESH, status, code);
    else
        wk_provider_classify_http(status, retry_after_s, code, out);
    cJSON_Delete(root);
}
