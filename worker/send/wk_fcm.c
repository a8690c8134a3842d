/* wk_fcm: FCM HTTP v1 requests and answers as pure functions.
 *
 * JSON in goes through cJSON: the service account and the token response
 * are parsed with cJSON_ParseWithLength; the JWT claims (once an hour) are
 * a cJSON tree printed into the caller's capped hr_buf.  The message,
 * built for every push, is written into the caller's buffer directly (the
 * JSON escaper of hr_template.h, the task's payload printed without
 * allocating), so a push builds no tree and allocates nothing.  Nothing
 * here does I/O, keeps state or logs. */
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

/* Appends a JSON string (quoted, escaped) of the LEN bytes at S to OUT. */
static int wk_fcm_str_append(hr_buf *out, const char *s, size_t len)
{
    return hr_buf_append(out, "\"", 1) != 0 || hr_json_escape_append(out, s, len) != 0 ||
                   hr_buf_append(out, "\"", 1) != 0
               ? -1
               : 0;
}

/* Appends the literal LIT to OUT. */
#define WK_FCM_LIT(out, lit) hr_buf_append((out), lit, sizeof lit - 1)

/* Appends ,"KEY":"VALUE" to OUT. */
static int wk_fcm_member(hr_buf *out, const char *key, const char *value)
{
    return WK_FCM_LIT(out, ",") != 0 || wk_fcm_str_append(out, key, strlen(key)) != 0 ||
                   WK_FCM_LIT(out, ":") != 0 || wk_fcm_str_append(out, value, strlen(value)) != 0
               ? -1
               : 0;
}

/* Appends ,"KEY":"VALUE" to OUT when VALUE is set (not ""). */
static int wk_fcm_opt(hr_buf *out, const char *key, const char *value)
{
    return value[0] == '\0' ? 0 : wk_fcm_member(out, key, value);
}

/* The rich buttons as the text of [{"id","title"},...] into TEXT (the
 * data member's value).  0, or -1 past its size. */
static int wk_fcm_buttons_text(const hr_rich *r, hr_buf *text)
{
    for (size_t i = 0; i < r->nbuttons; i++)
        if (hr_buf_append(text, i == 0 ? "[" : ",", 1) != 0 || WK_FCM_LIT(text, "{\"id\":") != 0 ||
            wk_fcm_str_append(text, r->buttons[i].id, strlen(r->buttons[i].id)) != 0 ||
            WK_FCM_LIT(text, ",\"title\":") != 0 ||
            wk_fcm_str_append(text, r->buttons[i].title, strlen(r->buttons[i].title)) != 0 ||
            WK_FCM_LIT(text, "}") != 0)
            return -1;
    return WK_FCM_LIT(text, "]");
}

/* Appends ,"buttons":"<R's buttons as JSON text>" to OUT (inside "data"). */
static int wk_fcm_buttons(const hr_rich *r, bool first, hr_buf *out)
{
    hr_buf text;
    int rc;

    hr_buf_init(&text, WK_PROVIDER_JSON_TEXT);
    rc = wk_fcm_buttons_text(r, &text) != 0 || (!first && WK_FCM_LIT(out, ",") != 0) ||
                 WK_FCM_LIT(out, "\"buttons\":") != 0 ||
                 wk_fcm_str_append(out, text.data, text.len) != 0
             ? -1
             : 0;
    hr_buf_free(&text);
    return rc;
}

/* Appends ,"data":{...} to OUT: PAYLOAD's members (PAYLOAD may be NULL),
 * each value a string (strings as they are, anything else as its JSON
 * text), and RICH's buttons (NULL: none). */
static int wk_fcm_data(const cJSON *payload, const hr_rich *rich, hr_buf *out, char *errstr,
                       size_t errlen)
{
    const cJSON *item;
    bool first = true;

    if (WK_FCM_LIT(out, ",\"data\":{") != 0)
        goto cap;
    cJSON_ArrayForEach(item, payload)
    {
        char text[WK_PROVIDER_JSON_TEXT];
        const char *v = item->valuestring;
        long n;

        if (wk_fcm_reserved_key(item->string)) {
            snprintf(errstr, errlen, "fcm message: payload key \"%s\" is reserved by FCM",
                     item->string);
            return -1;
        }
        if (cJSON_IsString(item)) {
            n = (long)strlen(v);
        } else {
            v = text;
            if ((n = wk_provider_json_print(item, text)) < 0)
                goto cap;
        }
        if ((!first && WK_FCM_LIT(out, ",") != 0) ||
            wk_fcm_str_append(out, item->string, strlen(item->string)) != 0 ||
            WK_FCM_LIT(out, ":") != 0 || wk_fcm_str_append(out, v, (size_t)n) != 0)
            goto cap;
        first = false;
    }
    if (rich != NULL && rich->nbuttons > 0 && wk_fcm_buttons(rich, first, out) != 0)
        goto cap;
    if (WK_FCM_LIT(out, "}") == 0)
        return 0;
cap:
    snprintf(errstr, errlen, "fcm message: over the buffer's cap");
    return -1;
}

/* Appends ,"notification":{sound, tag, notification_count} inside
 * "android" for R's options (nothing without them). */
static int wk_fcm_android_rich(const hr_rich *r, hr_buf *out)
{
    char num[HR_BUF_I64_MAX];
    size_t mark;

    if (r == NULL || r->silent || (r->sound[0] == '\0' && r->thread[0] == '\0' && r->badge < 0))
        return 0;
    /* Each member starts with a comma: the first one's is dropped. */
    if (WK_FCM_LIT(out, ",\"notification\":{") != 0)
        return -1;
    mark = out->len;
    if (wk_fcm_opt(out, "sound", r->sound) != 0 || wk_fcm_opt(out, "tag", r->thread) != 0 ||
        (r->badge >= 0 && (WK_FCM_LIT(out, ",\"notification_count\":") != 0 ||
                           hr_buf_append(out, num, hr_buf_i64(r->badge, num)) != 0)))
        return -1;
    memmove(out->data + mark, out->data + mark + 1, out->len - mark - 1);
    out->len--;
    return WK_FCM_LIT(out, "}");
}

/* Appends ,"payload":{"aps":{...}},"fcm_options":{"image"} inside "apns"
 * for R's options: what an iOS device reached through FCM shows (nothing
 * without them; a silent push: content-available). */
static int wk_fcm_apns_rich(const hr_rich *r, hr_buf *out)
{
    char num[HR_BUF_I64_MAX];

    if (r == NULL || !hr_rich_any(r))
        return 0;
    if (r->silent)
        return WK_FCM_LIT(out, ",\"payload\":{\"aps\":{\"content-available\":1}}");
    if (WK_FCM_LIT(out, ",\"payload\":{\"aps\":{\"mutable-content\":") != 0 ||
        hr_buf_append(out, r->mutable_content || r->image[0] != '\0' ? "1" : "0", 1) != 0 ||
        wk_fcm_opt(out, "sound", r->sound) != 0 || wk_fcm_opt(out, "thread-id", r->thread) != 0 ||
        wk_fcm_opt(out, "category", r->category) != 0 ||
        (r->badge >= 0 && (WK_FCM_LIT(out, ",\"badge\":") != 0 ||
                           hr_buf_append(out, num, hr_buf_i64(r->badge, num)) != 0)) ||
        WK_FCM_LIT(out, "}}") != 0)
        return -1;
    if (r->image[0] != '\0' &&
        (WK_FCM_LIT(out, ",\"fcm_options\":{\"image\":") != 0 ||
         wk_fcm_str_append(out, r->image, strlen(r->image)) != 0 || WK_FCM_LIT(out, "}") != 0))
        return -1;
    return 0;
}

int wk_fcm_message_build(const wk_fcm_message *m, hr_buf *out, char *errstr, size_t errlen)
{
    const hr_rich *r = m->rich;
    bool silent = r != NULL && r->silent;
    size_t start = out->len;
    char num[32];
    bool ttl = m->ttl_s >= 0, collapse = m->collapse_key != NULL;
    const char *prio = m->high_priority ? "HIGH" : "NORMAL";

    if (m->token == NULL || m->token[0] == '\0') {
        snprintf(errstr, errlen, "fcm message: no device token");
        return -1;
    }
    if (m->ttl_s < -1 || m->ttl_s > WK_FCM_TTL_MAX_S) {
        snprintf(errstr, errlen, "fcm message: ttl %d s outside 0..%d", m->ttl_s, WK_FCM_TTL_MAX_S);
        return -1;
    }
    if (collapse && strlen(m->collapse_key) > WK_FCM_COLLAPSE_MAX) {
        snprintf(errstr, errlen, "fcm message: collapse key over %d bytes", WK_FCM_COLLAPSE_MAX);
        return -1;
    }
    if (m->payload != NULL && !cJSON_IsObject(m->payload)) {
        snprintf(errstr, errlen, "fcm message: payload is not a JSON object");
        return -1;
    }
    if (WK_FCM_LIT(out, "{\"message\":{\"token\":") != 0 ||
        wk_fcm_str_append(out, m->token, strlen(m->token)) != 0)
        goto cap;
    /* A silent push is a data message: no notification block. */
    if (!silent && (m->title != NULL || m->body != NULL)) {
        if (WK_FCM_LIT(out, ",\"notification\":{") != 0 ||
            (m->title != NULL && (WK_FCM_LIT(out, "\"title\":") != 0 ||
                                  wk_fcm_str_append(out, m->title, strlen(m->title)) != 0)) ||
            (m->body != NULL && ((m->title != NULL && WK_FCM_LIT(out, ",") != 0) ||
                                 WK_FCM_LIT(out, "\"body\":") != 0 ||
                                 wk_fcm_str_append(out, m->body, strlen(m->body)) != 0)) ||
            (r != NULL && wk_fcm_opt(out, "image", r->image) != 0) || WK_FCM_LIT(out, "}") != 0)
            goto cap;
    }
    if (((m->payload != NULL && m->payload->child != NULL) || (r != NULL && r->nbuttons > 0)) &&
        wk_fcm_data(m->payload, r, out, errstr, errlen) != 0)
        goto fail;
    /* Android: a duration "<s>s"; APNs: an absolute expiry, 0 = now or never. */
    if (WK_FCM_LIT(out, ",\"android\":{\"priority\":") != 0 ||
        wk_fcm_str_append(out, prio, strlen(prio)) != 0)
        goto cap;
    if (ttl)
        snprintf(num, sizeof num, "%ds", m->ttl_s);
    if ((ttl && wk_fcm_member(out, "ttl", num) != 0) ||
        (collapse && wk_fcm_member(out, "collapse_key", m->collapse_key) != 0) ||
        wk_fcm_android_rich(r, out) != 0 ||
        WK_FCM_LIT(out, "},\"apns\":{\"headers\":{\"apns-priority\":") != 0 ||
        wk_fcm_str_append(out, m->high_priority && !silent ? "10" : "5",
                          m->high_priority && !silent ? 2 : 1) != 0)
        goto cap;
    if (ttl)
        snprintf(num, sizeof num, "%" PRId64, m->ttl_s == 0 ? (int64_t)0 : m->now_s + m->ttl_s);
    if ((ttl && wk_fcm_member(out, "apns-expiration", num) != 0) ||
        (collapse && wk_fcm_member(out, "apns-collapse-id", m->collapse_key) != 0) ||
        (silent && wk_fcm_member(out, "apns-push-type", "background") != 0) ||
        WK_FCM_LIT(out, "}") != 0 || wk_fcm_apns_rich(r, out) != 0 || WK_FCM_LIT(out, "}}}") != 0)
        goto cap;
    return 0;
cap:
    snprintf(errstr, errlen, "fcm message: over the buffer's cap");
fail:
    hr_buf_truncate(out, start);
    return -1;
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
