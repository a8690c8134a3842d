/* wk_fcm: Firebase Cloud Messaging HTTP v1, as pure functions over
 * buffers (the requests themselves are the sender's).
 *
 *   - the service account: the JSON key file Google issues (project_id,
 *     client_email, private_key, token_uri), its RSA key loaded once;
 *   - the OAuth2 access token: the form body that trades an RS256-signed
 *     JWT assertion for a token at token_uri (RFC 7523 jwt-bearer), and the
 *     token response read into a wk_fcm_token that says when to refresh it
 *     (5 minutes before it expires, or half-way for tokens of under 10
 *     minutes), so no request goes out with a token about to lapse;
 *   - the messages:send URL and JSON: token, notification title/body, data
 *     (the task payload's members, every value as a string as FCM wants),
 *     android ttl / collapse_key / priority and the matching apns headers;
 *   - the answer: 200 delivered; 404 UNREGISTERED, or 400 INVALID_ARGUMENT
 *     on message.token -> unregistered (prune the token); 401 -> refresh the
 *     access token and retry; 429 / 503 + Retry-After -> slow down; other
 *     5xx -> retry; everything else fails for good.
 * The account is read-only once parsed and may be shared across threads;
 * a wk_fcm_token belongs to its owner (one per worker, on the loop). */
#ifndef WK_FCM_H
#define WK_FCM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hr_jwt.h"
#include "hr_buf.h"
#include "hr_rich.h"
#include "wk_provider.h"

struct cJSON;

#define WK_FCM_SCOPE "https://www.googleapis.com/auth/firebase.messaging"
#define WK_FCM_BASE_URL "https://fcm.googleapis.com"
#define WK_FCM_TTL_MAX_S 2419200 /* 28 days, FCM's longest */

typedef struct wk_fcm_account {
    char *project_id;
    char *client_email;
    char *token_uri;
    hr_jwt_key *key; /* RS256, from private_key */
} wk_fcm_account;

/* Reads a service-account JSON key (LEN bytes).  0 and *OUT a new account,
 * or -1 with ERRSTR naming the missing or bad member. */
int wk_fcm_account_parse(const char *json, size_t len, wk_fcm_account **out, char *errstr,
                         size_t errlen);
void wk_fcm_account_free(wk_fcm_account *a);

/* Appends the token request's form body (application/x-www-form-urlencoded:
 * grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=<JWT>,
 * the JWT valid from NOW_S for an hour) to OUT.  0, or -1 with ERRSTR. */
int wk_fcm_token_request(const wk_fcm_account *a, int64_t now_s, hr_buf *out, char *errstr,
                         size_t errlen);

typedef struct wk_fcm_token {
    char *access_token; /* NULL: none yet (or invalidated) */
    int64_t expires_at_s;
    int64_t refresh_at_s; /* from here on, fetch a new one */
} wk_fcm_token;

/* Reads the token endpoint's answer (HTTP STATUS, LEN bytes of BODY)
 * received at NOW_S into *T, replacing what it held.  0, or -1 with ERRSTR
 * (the endpoint's error / error_description when it gave them); *T is
 * unchanged on failure. */
int wk_fcm_token_parse(long status, const char *body, size_t len, int64_t now_s, wk_fcm_token *t,
                       char *errstr, size_t errlen);
/* True when T must be (re)fetched before the next send: none, or its
 * refresh time has come. */
bool wk_fcm_token_due(const wk_fcm_token *t, int64_t now_s);
/* Drops the token (after a 401): the next wk_fcm_token_due() is true. */
void wk_fcm_token_clear(wk_fcm_token *t);

/* Appends BASE_URL "/v1/projects/<project_id>/messages:send" to OUT
 * (BASE_URL: WK_FCM_BASE_URL, or a stand-in's).  0, or -1 past the cap. */
int wk_fcm_send_url(const wk_fcm_account *a, const char *base_url, hr_buf *out);

typedef struct wk_fcm_message {
    const char *token;           /* the device's registration token */
    const char *title, *body;    /* both NULL: a data-only message */
    const struct cJSON *payload; /* an object, or NULL: becomes "data" */
    int ttl_s;                   /* -1: FCM's default; 0..WK_FCM_TTL_MAX_S */
    const char *collapse_key;    /* NULL: none; at most 64 bytes (APNs' limit) */
    bool high_priority;          /* android HIGH / apns-priority 10, else NORMAL / 5 */
    int64_t now_s;               /* for apns-expiration, an absolute time */
    /* rich options (NULL: none): notification.image; android.notification
     * sound, tag (the thread), notification_count (the badge); the apns
     * block's aps sound, badge, thread-id, category, mutable-content (also
     * for an image) and fcm_options.image; the buttons as data "buttons"
     * (a JSON array's text: FCM's data values are strings).  A silent one
     * is a data message: no notification block at all. */
    const hr_rich *rich;
} wk_fcm_message;

/* Appends the messages:send request body for M to OUT.  0, or -1 with
 * ERRSTR (no token, a data key FCM reserves, TTL out of range, over the
 * cap). */
int wk_fcm_message_build(const wk_fcm_message *m, hr_buf *out, char *errstr, size_t errlen);

/* Classifies a messages:send answer: STATUS, the first LEN bytes of BODY
 * (at most WK_PROVIDER_BODY_MAX are read), RETRY_AFTER_S (-1: absent). */
void wk_fcm_classify(long status, const char *body, size_t len, long retry_after_s,
                     wk_provider_result *out);

#endif
