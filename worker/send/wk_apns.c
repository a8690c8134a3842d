/* wk_apns: APNs provider tokens, requests and answers.
 *
 * The signer holds the hr_jwt_key and the current token in an hr_buf it
 * rewrites in place when renewing.  Request fields that end up in a path
 * or a header line are checked against narrow alphabets first, so nothing
 * a task or an address carries can add a header or change the path.  The
 * request is written with memcpy and the JSON escaper (hr_template.h), not
 * printf or a cJSON tree: it is built for every push. */
#include "wk_apns.h"

#include <cJSON.h>
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_jwt.h"
#include "hr_template.h"

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

/* The characters of key and team ids (letters and digits), as bitmaps of
 * 0..63 and 64..127; with WK_APNS_DOTS those of a bundle id and of a JWT
 * (base64url and dots). */
#define WK_APNS_BIT(c) (1ULL << ((c)&63))
#define WK_APNS_ALNUM_LO (0x3ffULL << '0')
#define WK_APNS_ALNUM_HI ((0x3ffffffULL << ('A' - 64)) | (0x3ffffffULL << ('a' - 64)))
#define WK_APNS_DOTS_LO (WK_APNS_BIT('.') | WK_APNS_BIT('-'))
#define WK_APNS_DOTS_HI WK_APNS_BIT('_')

/* True when S is MIN..MAX bytes, each a letter or digit or, with DOTS, one
 * of ".-_".  (A bitmap, not isalnum and strchr or strspn per call: the
 * provider token is checked on every push.) */
static bool wk_apns_chars_ok(const char *s, size_t min, size_t max, bool dots)
{
    uint64_t lo = WK_APNS_ALNUM_LO | (dots ? WK_APNS_DOTS_LO : 0);
    uint64_t hi = WK_APNS_ALNUM_HI | (dots ? WK_APNS_DOTS_HI : 0);
    size_t n = strlen(s);

    if (n < min || n > max)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned c = (unsigned char)s[i];

        if (c >= 128 || !(((c < 64 ? lo : hi) >> (c & 63)) & 1))
            return false;
    }
    return true;
}

int wk_apns_signer_new(const char *p8, size_t len, const char *key_id, const char *team_id,
                       wk_apns_signer **out, char *errstr, size_t errlen)
{
    wk_apns_signer *s = NULL;
    int rc = -1;

    *out = NULL;
    if (!wk_apns_chars_ok(key_id, WK_APNS_ID_LEN, WK_APNS_ID_LEN, false) ||
        !wk_apns_chars_ok(team_id, WK_APNS_ID_LEN, WK_APNS_ID_LEN, false)) {
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

/* Appends the header line "NAME: VALUE" (VLEN bytes) to REQ; -1 when it
 * does not fit. */
static int wk_apns_header(wk_apns_request *req, const char *name, size_t nlen, const char *value,
                          size_t vlen)
{
    char *line = req->header[req->nheaders];

    if (req->nheaders == WK_APNS_MAX_HEADERS || nlen + 2 + vlen >= WK_APNS_HEADER_MAX)
        return -1;
    memcpy(line, name, nlen);
    memcpy(line + nlen, ": ", 2);
    memcpy(line + nlen + 2, value, vlen);
    line[nlen + 2 + vlen] = '\0';
    req->name_len[req->nheaders] = nlen;
    req->line_len[req->nheaders] = nlen + 2 + vlen;
    req->nheaders++;
    return 0;
}

/* wk_apns_header with a NUL-terminated literal NAME and VALUE. */
#define WK_APNS_HEADER(req, name, value) \
    wk_apns_header((req), name, sizeof name - 1, (value), strlen(value))

/* Appends a JSON string (quoted, escaped) to BODY. */
static int wk_apns_str(hr_buf *body, const char *s)
{
    return hr_buf_append(body, "\"", 1) != 0 || hr_json_escape_append(body, s, strlen(s)) != 0 ||
                   hr_buf_append(body, "\"", 1) != 0
               ? -1
               : 0;
}

/* Appends ,"KEY":"VALUE" to BODY when VALUE is set (not ""). */
static int wk_apns_opt(hr_buf *body, const char *key, const char *value)
{
    if (value[0] == '\0')
        return 0;
    return hr_buf_append(body, ",", 1) != 0 || wk_apns_str(body, key) != 0 ||
                   hr_buf_append(body, ":", 1) != 0 || wk_apns_str(body, value) != 0
               ? -1
               : 0;
}

/* Appends the rich options of an alert inside "aps" (R's sound, badge,
 * thread-id, category, mutable-content), then, after "aps" is closed by
 * the caller, the top-level image and buttons (wk_apns_rich_top). */
static int wk_apns_rich_aps(hr_buf *body, const hr_rich *r)
{
    char num[HR_BUF_I64_MAX];

    if (r == NULL)
        return 0;
    if (wk_apns_opt(body, "sound", r->sound) != 0 ||
        (r->badge >= 0 && (hr_buf_append(body, ",\"badge\":", 9) != 0 ||
                           hr_buf_append(body, num, hr_buf_i64(r->badge, num)) != 0)) ||
        wk_apns_opt(body, "thread-id", r->thread) != 0 ||
        wk_apns_opt(body, "category", r->category) != 0)
        return -1;
    /* An image needs the app's service extension, which only a mutable
     * push wakes. */
    if ((r->mutable_content || r->image[0] != '\0') &&
        hr_buf_append(body, ",\"mutable-content\":1", 20) != 0)
        return -1;
    return 0;
}

static int wk_apns_rich_top(hr_buf *body, const hr_rich *r)
{
    if (r == NULL)
        return 0;
    if (wk_apns_opt(body, "image", r->image) != 0)
        return -1;
    for (size_t i = 0; i < r->nbuttons; i++)
        if (hr_buf_append(body, i == 0 ? ",\"buttons\":[" : ",", i == 0 ? 12 : 1) != 0 ||
            hr_buf_append(body, "{\"id\":", 6) != 0 || wk_apns_str(body, r->buttons[i].id) != 0 ||
            hr_buf_append(body, ",\"title\":", 9) != 0 ||
            wk_apns_str(body, r->buttons[i].title) != 0 || hr_buf_append(body, "}", 1) != 0)
            return -1;
    return r->nbuttons > 0 ? hr_buf_append(body, "]", 1) : 0;
}

/* Appends the JSON body of M to BODY: {"aps":{...}} and the payload's
 * members beside "aps", in the payload's order. */
static int wk_apns_body(const wk_apns_message *m, hr_buf *body, char *errstr, size_t errlen)
{
    static const char alert[] = "{\"aps\":{\"alert\":{",
                      background[] = "{\"aps\":{\"content-available\":1}";
    size_t start = body->len;
    const cJSON *item;
    int rc = 0;

    if (m->push_type == WK_APNS_BACKGROUND) {
        rc = hr_buf_append(body, background, sizeof background - 1);
    } else {
        rc = hr_buf_append(body, alert, sizeof alert - 1);
        if (rc == 0 && m->title != NULL)
            rc = hr_buf_append(body, "\"title\":", 8) != 0 || wk_apns_str(body, m->title) != 0;
        if (rc == 0 && m->body != NULL)
            rc = (m->title != NULL && hr_buf_append(body, ",", 1) != 0) ||
                 hr_buf_append(body, "\"body\":", 7) != 0 || wk_apns_str(body, m->body) != 0;
        if (rc == 0)
            rc = hr_buf_append(body, "}", 1) != 0 || wk_apns_rich_aps(body, m->rich) != 0 ||
                 hr_buf_append(body, "}", 1) != 0 || wk_apns_rich_top(body, m->rich) != 0;
    }
    cJSON_ArrayForEach(item, m->payload)
    {
        if (strcmp(item->string, "aps") == 0) {
            snprintf(errstr, errlen, "apns: the payload may not set \"aps\"");
            goto fail;
        }
    }
    /* The payload object printed, its braces dropped: its members. */
    if (rc == 0 && m->payload != NULL && m->payload->child != NULL) {
        char text[WK_PROVIDER_JSON_TEXT];
        long n = wk_provider_json_print(m->payload, text);

        rc = n < 2 || hr_buf_append(body, ",", 1) != 0 ||
             hr_buf_append(body, text + 1, (size_t)n - 2) != 0;
    }
    if (rc == 0)
        rc = hr_buf_append(body, "}", 1);
    if (rc != 0) {
        snprintf(errstr, errlen, "apns: payload over %d bytes", WK_APNS_PAYLOAD_MAX);
        goto fail;
    }
    if (body->len - start > WK_APNS_PAYLOAD_MAX) {
        snprintf(errstr, errlen, "apns: payload of %zu bytes, APNs takes %d", body->len - start,
                 WK_APNS_PAYLOAD_MAX);
        goto fail;
    }
    return 0;
fail:
    hr_buf_truncate(body, start);
    return -1;
}

int wk_apns_request_build(const wk_apns_message *m, const char *provider_token,
                          wk_apns_request *req, hr_buf *body, char *errstr, size_t errlen)
{
    static const char bearer[] = "bearer ";
    const char *tok = m->device_token;
    size_t toklen = tok ? strlen(tok) : 0, plen;
    bool background = m->push_type == WK_APNS_BACKGROUND;
    char num[HR_BUF_I64_MAX], auth[WK_APNS_HEADER_MAX];

    req->nheaders = 0;
    if (toklen < 64 || toklen > 200 || toklen % 2 != 0 ||
        strspn(tok, "0123456789abcdefABCDEF") != toklen) {
        snprintf(errstr, errlen, "apns: device token is not 64..200 hex digits");
        return -1;
    }
    if (m->topic == NULL || !wk_apns_chars_ok(m->topic, 1, WK_APNS_TOPIC_MAX, true)) {
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
    if (!wk_apns_chars_ok(provider_token, 1, WK_APNS_HEADER_MAX - 32, true)) {
        snprintf(errstr, errlen, "apns: provider token is not a JWT");
        return -1;
    }
    memcpy(req->path, "/3/device/", 10);
    memcpy(req->path + 10, tok, toklen + 1);
    plen = strlen(provider_token);
    memcpy(auth, bearer, sizeof bearer - 1);
    memcpy(auth + sizeof bearer - 1, provider_token, plen + 1);
    hr_buf_i64(m->ttl_s <= 0 ? (int64_t)0 : m->now_s + m->ttl_s, num);
    /* Seven lines at most, each value checked above to fit. */
    if (wk_apns_header(req, "authorization", 13, auth, sizeof bearer - 1 + plen) != 0 ||
        WK_APNS_HEADER(req, "apns-topic", m->topic) != 0 ||
        WK_APNS_HEADER(req, "apns-push-type", background ? "background" : "alert") != 0 ||
        WK_APNS_HEADER(req, "apns-priority", m->high_priority && !background ? "10" : "5") != 0 ||
        (m->ttl_s >= 0 && WK_APNS_HEADER(req, "apns-expiration", num) != 0) ||
        (m->collapse_id && WK_APNS_HEADER(req, "apns-collapse-id", m->collapse_id) != 0) ||
        (m->apns_id && WK_APNS_HEADER(req, "apns-id", m->apns_id) != 0)) {
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
