/* wk_apns: Apple Push Notification service (HTTP/2 provider API), as pure
 * functions over buffers (the requests are the sender's).
 *
 *   - the provider token: an ES256 JWT ({"alg":"ES256","kid":<key id>},
 *     {"iss":<team id>,"iat":<now>}) signed with the .p8 key.  Apple
 *     refuses a token older than an hour (403 ExpiredProviderToken) and
 *     one renewed more often than every 20 minutes
 *     (429 TooManyProviderTokenUpdates), so a wk_apns_signer keeps one
 *     token and makes a new one after 50 minutes, or on an
 *     ExpiredProviderToken once the current one is 20 minutes old;
 *   - the request: path /3/device/<hex token>, headers authorization,
 *     apns-topic, apns-push-type, apns-priority, apns-expiration,
 *     apns-collapse-id and apns-id (the idempotency key), and the JSON
 *     body: {"aps":{"alert":{"title","body"}, and the rich options:
 *     "sound", "badge", "thread-id", "category", "mutable-content"}} (or
 *     content-available for a background push) plus the rich image and
 *     buttons and the payload's members at the top level;
 *   - the answer: 200 delivered; 410 Unregistered or 400 BadDeviceToken ->
 *     unregistered (prune the token); 403 ExpiredProviderToken -> refresh
 *     the token and retry; 429 -> slow down; 500 / 503 -> retry; anything
 *     else fails for good.
 * A signer belongs to one thread (the worker's loop); the rest is
 * stateless. */
#ifndef WK_APNS_H
#define WK_APNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hr_buf.h"
#include "hr_rich.h"
#include "wk_provider.h"

struct cJSON;

#define WK_APNS_BASE_URL "https://api.push.apple.com"
#define WK_APNS_TOKEN_RENEW_S 3000   /* a token is renewed at 50 minutes... */
#define WK_APNS_TOKEN_MIN_AGE_S 1200 /* ...and never before 20 */
#define WK_APNS_PAYLOAD_MAX 4096     /* Apple's limit for alert pushes */
#define WK_APNS_MAX_HEADERS 7
#define WK_APNS_HEADER_MAX 512

typedef struct wk_apns_signer wk_apns_signer;

/* A signer for the .p8 key in the LEN bytes at P8 (PEM, P-256), KEY_ID
 * (10 characters, Apple's key id) and TEAM_ID (10 characters).  0, or -1
 * with ERRSTR. */
int wk_apns_signer_new(const char *p8, size_t len, const char *key_id, const char *team_id,
                       wk_apns_signer **out, char *errstr, size_t errlen);
void wk_apns_signer_free(wk_apns_signer *s);
/* The provider token to send at NOW_S (a new one when none is held or the
 * held one is WK_APNS_TOKEN_RENEW_S old, or expired and old enough).  NULL
 * with ERRSTR when signing fails.  Valid until the next call. */
const char *wk_apns_signer_token(wk_apns_signer *s, int64_t now_s, char *errstr, size_t errlen);
/* After 403 ExpiredProviderToken at NOW_S: 0 when the next
 * wk_apns_signer_token() makes a new token (retry), -1 when the held one
 * is under WK_APNS_TOKEN_MIN_AGE_S old: Apple would refuse a renewal, the
 * clock or the key is wrong and the push fails. */
int wk_apns_signer_expired(wk_apns_signer *s, int64_t now_s);

typedef enum wk_apns_push_type {
    WK_APNS_ALERT,      /* shows title/body */
    WK_APNS_BACKGROUND, /* content-available, always priority 5 */
} wk_apns_push_type;

typedef struct wk_apns_message {
    const char *device_token; /* hex, 64..200 digits */
    const char *topic;        /* the app's bundle id */
    wk_apns_push_type push_type;
    const char *title, *body;    /* alert text, either may be NULL; unused for background */
    const struct cJSON *payload; /* an object, or NULL: custom top-level keys */
    int ttl_s;                   /* -1: no apns-expiration; 0: deliver now or never */
    const char *collapse_id;     /* NULL or at most 64 bytes */
    const char *apns_id;         /* NULL or a UUID (8-4-4-4-12 hex): the idempotency key */
    bool high_priority;          /* apns-priority 10, else 5 */
    int64_t now_s;
    /* rich options (NULL: none): aps.sound, badge, thread-id, category,
     * mutable-content (also for an image); the image's URL and the buttons
     * at the top level ("image", "buttons": [{"id","title"}]) for the app's
     * notification service extension.  A silent one is sent as
     * WK_APNS_BACKGROUND by the caller. */
    const hr_rich *rich;
} wk_apns_message;

typedef struct wk_apns_request {
    char path[256];                                       /* /3/device/<token> */
    char header[WK_APNS_MAX_HEADERS][WK_APNS_HEADER_MAX]; /* "name: value" lines */
    size_t name_len[WK_APNS_MAX_HEADERS];                 /* of each line's name */
    size_t line_len[WK_APNS_MAX_HEADERS];
    size_t nheaders;
} wk_apns_request;

/* Fills *REQ for M, signed with PROVIDER_TOKEN (wk_apns_signer_token), and
 * appends the JSON body to BODY.  0, or -1 with ERRSTR (a malformed token,
 * topic, collapse id or apns-id, a payload with "aps", over 4 KiB); BODY is
 * unchanged on failure.  The sender calls it for every push: it writes the
 * lines and the JSON itself (no printf, no cJSON tree; the payload, parsed
 * once per task, is printed into the body), so a warmed-up BODY is all the
 * memory it needs. */
int wk_apns_request_build(const wk_apns_message *m, const char *provider_token,
                          wk_apns_request *req, hr_buf *body, char *errstr, size_t errlen);

/* Classifies an answer: STATUS, the first LEN bytes of BODY ({"reason":..}),
 * RETRY_AFTER_S (-1: absent). */
void wk_apns_classify(long status, const char *body, size_t len, long retry_after_s,
                      wk_provider_result *out);

#endif
