/* wk_webpush: VAPID tokens kept per push service, the Topic, the
 * plaintext and the answers (see wk_webpush.h).
 *
 * The kept tokens are a small array searched by origin: a campaign's
 * subscriptions sit on a handful of push services (FCM, Mozilla, Apple,
 * Microsoft), so a linear search of WK_WEBPUSH_ORIGINS short strings
 * costs less than the hash it would replace. */
#include "wk_webpush.h"

#include <cJSON.h>
#include <inttypes.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_base64.h"
#include "hr_jwt.h"
#include "hr_template.h"

#define WK_WEBPUSH_ORIGIN_MAX 255

typedef struct wk_webpush_token {
    char origin[WK_WEBPUSH_ORIGIN_MAX + 1]; /* "" = a free slot */
    hr_buf auth;                            /* "vapid t=<jwt>, k=<key>" */
    int64_t exp;
} wk_webpush_token;

struct wk_webpush {
    hr_jwt_key *key;
    char *subject;
    char k[96]; /* the public point, base64url (87 characters) */
    wk_webpush_token tokens[WK_WEBPUSH_ORIGINS];
    uint64_t nsigned;
};

int wk_webpush_new(const char *pem, size_t len, const char *subject, wk_webpush **out, char *errstr,
                   size_t errlen)
{
    wk_webpush *wp = calloc(1, sizeof *wp);
    unsigned char point[HR_JWT_P256_POINT];
    hr_buf k;
    int rc = -1;

    *out = NULL;
    if (wp == NULL || (wp->subject = strdup(subject)) == NULL) {
        snprintf(errstr, errlen, "webpush: out of memory");
        goto done;
    }
    for (size_t i = 0; i < WK_WEBPUSH_ORIGINS; i++)
        hr_buf_init(&wp->tokens[i].auth, WK_WEBPUSH_AUTH_MAX);
    if (hr_jwt_key_load(pem, len, &wp->key, errstr, errlen) != 0)
        goto done;
    if (hr_jwt_key_point(wp->key, point) != 0) {
        snprintf(errstr, errlen, "webpush: the VAPID key is not an EC P-256 key");
        goto done;
    }
    hr_buf_init(&k, sizeof wp->k - 1);
    if (hr_base64_append(&k, point, sizeof point, HR_BASE64_URL) == 0)
        memcpy(wp->k, k.data, k.len + 1);
    hr_buf_free(&k);
    *out = wp;
    wp = NULL;
    rc = 0;
done:
    wk_webpush_free(wp);
    return rc;
}

void wk_webpush_free(wk_webpush *wp)
{
    if (wp == NULL)
        return;
    hr_jwt_key_free(wp->key);
    free(wp->subject);
    for (size_t i = 0; i < WK_WEBPUSH_ORIGINS; i++) {
        if (wp->tokens[i].auth.data != NULL)
            OPENSSL_cleanse(wp->tokens[i].auth.data, wp->tokens[i].auth.len);
        hr_buf_free(&wp->tokens[i].auth);
    }
    free(wp);
}

uint64_t wk_webpush_signed(const wk_webpush *wp)
{
    return wp->nsigned;
}

/* The slot of ORIGIN: its own, else a free one, else the one expiring
 * first (evicted). */
static wk_webpush_token *wk_webpush_slot(wk_webpush *wp, const char *origin)
{
    wk_webpush_token *pick = &wp->tokens[0];

    for (size_t i = 0; i < WK_WEBPUSH_ORIGINS; i++) {
        wk_webpush_token *t = &wp->tokens[i];

        if (strcmp(t->origin, origin) == 0)
            return t;
        if (pick->origin[0] != '\0' && (t->origin[0] == '\0' || t->exp < pick->exp))
            pick = t;
    }
    pick->origin[0] = '\0';
    hr_buf_reset(&pick->auth);
    return pick;
}

/* A new token for T's origin, valid until NOW_S + WK_WEBPUSH_VAPID_TTL_S. */
static int wk_webpush_sign(wk_webpush *wp, wk_webpush_token *t, int64_t now_s, char *errstr,
                           size_t errlen)
{
    static const char head[] = "vapid t=", mid[] = ", k=";
    char claims[WK_WEBPUSH_ORIGIN_MAX + 512];
    cJSON *c = cJSON_CreateObject();
    int64_t exp = now_s + WK_WEBPUSH_VAPID_TTL_S;
    bool ok;

    /* cJSON escapes the subject (the configuration's) and the origin. */
    ok = c != NULL && cJSON_AddStringToObject(c, "aud", t->origin) != NULL &&
         cJSON_AddNumberToObject(c, "exp", (double)exp) != NULL &&
         cJSON_AddStringToObject(c, "sub", wp->subject) != NULL &&
         cJSON_PrintPreallocated(c, claims, sizeof claims, false);
    cJSON_Delete(c);
    if (!ok) {
        snprintf(errstr, errlen, "webpush: VAPID claims too long");
        return -1;
    }
    hr_buf_reset(&t->auth);
    if (hr_buf_append(&t->auth, head, sizeof head - 1) != 0 ||
        hr_jwt_sign(wp->key, NULL, claims, strlen(claims), &t->auth, errstr, errlen) != 0 ||
        hr_buf_append(&t->auth, mid, sizeof mid - 1) != 0 ||
        hr_buf_append(&t->auth, wp->k, strlen(wp->k)) != 0) {
        if (errstr[0] == '\0')
            snprintf(errstr, errlen, "webpush: VAPID header over %d bytes", WK_WEBPUSH_AUTH_MAX);
        t->origin[0] = '\0';
        return -1;
    }
    t->exp = exp;
    wp->nsigned++;
    return 0;
}

const char *wk_webpush_auth(wk_webpush *wp, const char *endpoint, size_t elen, int64_t now_s,
                            size_t *len, char *errstr, size_t errlen)
{
    const char *slash = elen > 8 ? memchr(endpoint + 8, '/', elen - 8) : NULL;
    size_t olen = slash != NULL ? (size_t)(slash - endpoint) : elen;
    char origin[WK_WEBPUSH_ORIGIN_MAX + 1];
    wk_webpush_token *t;

    errstr[0] = '\0';
    if (olen > WK_WEBPUSH_ORIGIN_MAX) {
        snprintf(errstr, errlen, "webpush: endpoint origin over %d bytes", WK_WEBPUSH_ORIGIN_MAX);
        return NULL;
    }
    memcpy(origin, endpoint, olen);
    origin[olen] = '\0';
    t = wk_webpush_slot(wp, origin);
    if (t->origin[0] == '\0' || t->exp - now_s < WK_WEBPUSH_VAPID_TTL_S / 2) {
        memcpy(t->origin, origin, olen + 1);
        if (wk_webpush_sign(wp, t, now_s, errstr, errlen) != 0)
            return NULL;
    }
    *len = t->auth.len;
    return t->auth.data;
}

size_t wk_webpush_topic(const char *collapse_key, char out[WK_WEBPUSH_TOPIC_MAX + 1])
{
    size_t n = strlen(collapse_key);
    unsigned char d[SHA256_DIGEST_LENGTH];
    hr_buf b;

    if (n >= 1 && n <= WK_WEBPUSH_TOPIC_MAX &&
        strspn(collapse_key, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") ==
            n) {
        memcpy(out, collapse_key, n + 1);
        return n;
    }
    /* 24 bytes of the digest are 32 base64url characters. */
    SHA256((const unsigned char *)collapse_key, n, d);
    hr_buf_init(&b, WK_WEBPUSH_TOPIC_MAX);
    n = hr_base64_append(&b, d, 24, HR_BASE64_URL) == 0 ? b.len : 0;
    memcpy(out, b.data, n);
    out[n] = '\0';
    hr_buf_free(&b);
    return n;
}

/* Appends "NAME": and S as a JSON string to OUT. */
static int wk_webpush_member(hr_buf *out, const char *name, size_t nlen, const char *s)
{
    return hr_buf_append(out, name, nlen) != 0 || hr_buf_append(out, "\"", 1) != 0 ||
                   hr_json_escape_append(out, s, strlen(s)) != 0 || hr_buf_append(out, "\"", 1) != 0
               ? -1
               : 0;
}

/* RICH's image, actions and tag appended to OUT (each after a comma).  0 or -1. */
static int wk_webpush_rich(hr_buf *out, const hr_rich *rich)
{
    static const char img[] = ",\"image\":", tag[] = ",\"tag\":", act[] = "{\"action\":",
                      ttl[] = ",\"title\":";

    if (rich->image[0] != '\0' && wk_webpush_member(out, img, sizeof img - 1, rich->image) != 0)
        return -1;
    for (size_t i = 0; i < rich->nbuttons; i++)
        if (hr_buf_append(out, i == 0 ? ",\"actions\":[" : ",", i == 0 ? 12 : 1) != 0 ||
            wk_webpush_member(out, act, sizeof act - 1, rich->buttons[i].id) != 0 ||
            wk_webpush_member(out, ttl, sizeof ttl - 1, rich->buttons[i].title) != 0 ||
            hr_buf_append(out, i + 1 == rich->nbuttons ? "}]" : "}",
                          i + 1 == rich->nbuttons ? 2 : 1) != 0)
            return -1;
    return rich->thread[0] != '\0' ? wk_webpush_member(out, tag, sizeof tag - 1, rich->thread) : 0;
}

int wk_webpush_plaintext(const char *title, const char *body, const cJSON *payload,
                         const hr_rich *rich, hr_buf *out)
{
    static const char t[] = "{\"title\":", b[] = ",\"body\":", d[] = ",\"data\":";
    size_t before = out->len;
    char text[WK_PROVIDER_JSON_TEXT];
    long n = 0;

    if (payload != NULL && (n = wk_provider_json_print(payload, text)) < 0)
        return -1;
    if (wk_webpush_member(out, t, sizeof t - 1, title) != 0 ||
        wk_webpush_member(out, b, sizeof b - 1, body) != 0 ||
        (rich != NULL && wk_webpush_rich(out, rich) != 0) ||
        (payload != NULL &&
         (hr_buf_append(out, d, sizeof d - 1) != 0 || hr_buf_append(out, text, (size_t)n) != 0)) ||
        hr_buf_append(out, "}", 1) != 0) {
        hr_buf_truncate(out, before);
        return -1;
    }
    return 0;
}

void wk_webpush_classify(long status, long retry_after_s, wk_provider_result *out)
{
    if (status == 200 || status == 201 || status == 202)
        wk_provider_set(out, WK_VERDICT_DELIVERED, status, NULL);
    else if (status == 404 || status == 410)
        wk_provider_set(out, WK_VERDICT_UNREGISTERED, status, "subscription gone");
    else if (status == 413)
        wk_provider_set(out, WK_VERDICT_FAILED, status, "payload too large");
    else if (status == 401 || status == 403)
        wk_provider_set(out, WK_VERDICT_FAILED, status, "VAPID refused");
    else
        wk_provider_classify_http(status, retry_after_s, NULL, out);
}
