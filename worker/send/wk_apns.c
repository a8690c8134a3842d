/* wk_apns: APNs provider tokens, requests and answers.
 *
 * The signer holds the hr_jwt_key and the current token in an hr_buf it
 * rewrites in place when renewing.  Request fields that end up in a path
 * or a header line are checked against narrow alphabets first, so nothing
 * a task or an address carries can add a header or change the path. */
#include "wk_apns.h"

#include <cJSON.h>
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_jwt.h"

#define WK_APNS_ID_LEN 10 /* key and team ids */
#define WK_APNS_COLLAPSE_MAX 64
#define WK_APNS_TOPIC_MAX 255

struct wk_apns_signer {
    hr_jwt_key *key;
    char key_id[WK_APNS_ID_LEN + 1];
    char team_id[WK_APNS_ID_LEN + 1];
    hr_buf token; /* empty: none yet */
    int64_t iat;  /* of token */
    bool expired; /* APNs said so: renew on the next call */
};

/* True when S is 1..MAX bytes, each alphanumeric or in EXTRA. */
static bool wk_apns_chars_ok(const char *s, size_t min, size_t max, const char *extra)
{
    size_t n = strlen(s);

    if (n < min || n > max)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && strchr(extra, s[i]) == NULL)
            return false;
    return true;
}

int wk_apns_signer_new(const char *p8, size_t len, const char *key_id, const char *team_id,
                       wk_apns_signer **out, char *errstr, size_t errlen)
{
    wk_apns_signer *s = NULL;
    int rc = -1;

    *out = NULL;
    if (!wk_apns_chars_ok(key_id, WK_APNS_ID_LEN, WK_APNS_ID_LEN, "") ||
        !wk_apns_chars_ok(team_id, WK_APNS_ID_LEN, WK_APNS_ID_LEN, "")) {
        snprintf(errstr, errlen, "apns: key id and team id must be %d letters or digits",
                 WK_APNS_ID_LEN);
        goto cleanup;
    }
    s = calloc(1, sizeof *s);
    if (s == NULL) {
        snprintf(errstr, errlen, "apns: out of memory");
        goto cleanup;
    }
    hr_buf_init(&s->token, 1024);
    if (hr_jwt_key_load(p8, len, &s->key, errstr, errlen) != 0)
        goto cleanup;
    if (hr_jwt_key_alg(s->key) != HR_JWT_ES256) {
        snprintf(errstr, errlen, "apns: the .p8 key is not an EC P-256 key");
        goto cleanup;
    }
    memcpy(s->key_id, key_id, WK_APNS_ID_LEN + 1);
    memcpy(s->team_id, team_id, WK_APNS_ID_LEN + 1);
    *out = s;
    s = NULL;
    rc = 0;
cleanup:
    wk_apns_signer_free(s);
    return rc;
}

void wk_apns_signer_free(wk_apns_signer *s)
{
    if (s == NULL)
        return;
    hr_jwt_key_free(s->key);
    hr_buf_free(&s->token);
    free(s);
}

const char *wk_apns_signer_token(wk_apns_signer *s, int64_t now_s, char *errstr, size_t errlen)
{
    char claims[64];
    int n;

    if (s->token.len > 0 && !s->expired && now_s - s->iat < WK_APNS_TOKEN_RENEW_S)
        return s->token.data;
    n = snprintf(claims, sizeof claims, "{\"iss\":\"%s\",\"iat\":%" PRId64 "}", s->team_id, now_s);
    hr_buf_reset(&s->token);
    if (hr_jwt_sign(s->key, s->key_id, claims, (size_t)n, &s->token, errstr, errlen) != 0)
        return NULL;
    s->iat = now_s;
    s->expired = false;
    return s->token.data;
}

int wk_apns_signer_expired(wk_apns_signer *s, int64_t now_s)
{
    if (s->token.len > 0 && now_s - s->iat < WK_APNS_TOKEN_MIN_AGE_S)
        return -1;
    s->expired = true;
    return 0;
}

/* True for a UUID in 8-4-4-4-12 hex form. */
static bool wk_apns_uuid_ok(const char *s)
{
    if (strlen(s) != 36)
        return false;
    for (size_t i = 0; i < 36; i++) {
        bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? s[i] != '-' : !isxdigit((unsigned char)s[i]))
            return false;
    }
    return true;
}

/* Appends the header line "NAME: VALUE" to REQ; -1 when it does not fit. */
static int wk_apns_header(wk_apns_request *req, const char *name, const char *value)
{
    int n;

    if (req->nheaders == WK_APNS_MAX_HEADERS)
        return -1;
    n = snprintf(req->header[req->nheaders], WK_APNS_HEADER_MAX, "%s: %s", name, value);
    if (n < 0 || n >= WK_APNS_HEADER_MAX)
        return -1;
    req->nheaders++;
    return 0;
}

/* Appends the JSON body of M to BODY. */
static int wk_apns_body(const wk_apns_message *m, hr_buf *body, char *errstr, size_t errlen)
{
    cJSON *root = cJSON_CreateObject(), *aps = cJSON_AddObjectToObject(root, "aps"), *alert;
    const cJSON *item;
    char *text = NULL;
    int rc = -1;

    if (aps == NULL)
        goto oom;
    if (m->push_type == WK_APNS_BACKGROUND) {
        if (!cJSON_AddNumberToObject(aps, "content-available", 1))
            goto oom;
    } else {
        alert = cJSON_AddObjectToObject(aps, "alert");
        if (alert == NULL || (m->title && !cJSON_AddStringToObject(alert, "title", m->title)) ||
            (m->body && !cJSON_AddStringToObject(alert, "body", m->body)))
            goto oom;
    }
    cJSON_ArrayForEach(item, m->payload)
    {
        if (strcmp(item->string, "aps") == 0) {
            snprintf(errstr, errlen, "apns: the payload may not set \"aps\"");
            goto cleanup;
        }
        if (!cJSON_AddItemToObject(root, item->string, cJSON_Duplicate(item, true)))
            goto oom;
    }
    text = cJSON_PrintUnformatted(root);
    if (text == NULL)
        goto oom;
    if (strlen(text) > WK_APNS_PAYLOAD_MAX) {
        snprintf(errstr, errlen, "apns: payload of %zu bytes, APNs takes %d", strlen(text),
                 WK_APNS_PAYLOAD_MAX);
        goto cleanup;
    }
    if (hr_buf_append(body, text, strlen(text)) != 0) {
        snprintf(errstr, errlen, "apns: body over the buffer's cap");
        goto cleanup;
    }
    rc = 0;
    goto cleanup;
oom:
    snprintf(errstr, errlen, "apns: out of memory");
cleanup:
    free(text);
    cJSON_Delete(root);
    return rc;
}

int wk_apns_request_build(const wk_apns_message *m, const char *provider_token,
                          wk_apns_request *req, hr_buf *body, char *errstr, size_t errlen)
{
    const char *tok = m->device_token;
    size_t toklen = tok ? strlen(tok) : 0;
    bool background = m->push_type == WK_APNS_BACKGROUND;
    char num[32], bearer[WK_APNS_HEADER_MAX];

    req->nheaders = 0;
    if (toklen < 64 || toklen > 200 || toklen % 2 != 0 ||
        strspn(tok, "0123456789abcdefABCDEF") != toklen) {
        snprintf(errstr, errlen, "apns: device token is not 64..200 hex digits");
        return -1;
    }
    if (m->topic == NULL || !wk_apns_chars_ok(m->topic, 1, WK_APNS_TOPIC_MAX, ".-_")) {
        snprintf(errstr, errlen, "apns: topic must be a bundle id ([A-Za-z0-9._-], 1..%d)",
                 WK_APNS_TOPIC_MAX);
        return -1;
    }
    if (m->collapse_id != NULL && (strlen(m->collapse_id) > WK_APNS_COLLAPSE_MAX ||
                                   strpbrk(m->collapse_id, "\r\n") || m->collapse_id[0] == '\0')) {
        snprintf(errstr, errlen, "apns: collapse id must be 1..%d bytes on one line",
                 WK_APNS_COLLAPSE_MAX);
        return -1;
    }
    if (m->apns_id != NULL && !wk_apns_uuid_ok(m->apns_id)) {
        snprintf(errstr, errlen, "apns: apns-id must be a UUID");
        return -1;
    }
    if (m->payload != NULL && !cJSON_IsObject(m->payload)) {
        snprintf(errstr, errlen, "apns: payload is not a JSON object");
        return -1;
    }
    if (!wk_apns_chars_ok(provider_token, 1, WK_APNS_HEADER_MAX - 32, ".-_")) {
        snprintf(errstr, errlen, "apns: provider token is not a JWT");
        return -1;
    }
    snprintf(req->path, sizeof req->path, "/3/device/%s", tok);
    snprintf(bearer, sizeof bearer, "bearer %s", provider_token);
    snprintf(num, sizeof num, "%" PRId64, m->ttl_s <= 0 ? (int64_t)0 : m->now_s + m->ttl_s);
    /* Seven lines at most, each value checked above to fit. */
    if (wk_apns_header(req, "authorization", bearer) != 0 ||
        wk_apns_header(req, "apns-topic", m->topic) != 0 ||
        wk_apns_header(req, "apns-push-type", background ? "background" : "alert") != 0 ||
        wk_apns_header(req, "apns-priority", m->high_priority && !background ? "10" : "5") != 0 ||
        (m->ttl_s >= 0 && wk_apns_header(req, "apns-expiration", num) != 0) ||
        (m->collapse_id && wk_apns_header(req, "apns-collapse-id", m->collapse_id) != 0) ||
        (m->apns_id && wk_apns_header(req, "apns-id", m->apns_id) != 0)) {
        snprintf(errstr, errlen, "apns: header too long");
        return -1;
    }
    return wk_apns_body(m, body, errstr, errlen);
}

void wk_apns_classify(long status, const char *body, size_t len, long retry_after_s,
                      wk_provider_result *out)
{
    cJSON *root = NULL;
    const cJSON *r;
    const char *reason = NULL;

    if (status == 200) {
        wk_provider_set(out, WK_VERDICT_DELIVERED, status, NULL);
        return;
    }
    if (body != NULL && len > 0) {
        root = cJSON_ParseWithLength(body, len < WK_PROVIDER_BODY_MAX ? len : WK_PROVIDER_BODY_MAX);
        r = cJSON_GetObjectItemCaseSensitive(root, "reason");
        reason = cJSON_IsString(r) ? r->valuestring : NULL;
    }
    if (status == 410 || (status == 400 && reason && strcmp(reason, "BadDeviceToken") == 0))
        wk_provider_set(out, WK_VERDICT_UNREGISTERED, status, reason);
    else if (status == 403 && reason && strcmp(reason, "ExpiredProviderToken") == 0)
        wk_provider_set(out, WK_VERDICT_REFRESH, status, reason);
    else
        wk_provider_classify_http(status, retry_after_s, reason, out);
    cJSON_Delete(root);
}
