/* wk_webpush: the web push provider (RFC 8030 delivery, RFC 8292 VAPID;
 * the payload's encryption is wk_ece's), as functions over buffers (the
 * request is the curl transport's, wk_xfer_prepare_webpush):
 *
 *   - VAPID: an ES256 JWT {"aud": <the endpoint's origin>, "exp", "sub":
 *     <the channel's subject>} signed with the channel's key, sent as
 *     "Authorization: vapid t=<jwt>, k=<the key's public point,
 *     base64url>".  RFC 8292 lets a token be reused for every request to
 *     one push service until it expires, so a wk_webpush keeps one token
 *     per origin (WK_WEBPUSH_ORIGINS of them, the least recently renewed
 *     evicted), valid WK_WEBPUSH_VAPID_TTL_S and renewed when half of that
 *     is left;
 *   - the request: POST to the subscription's endpoint with TTL (the
 *     task's ttl_s, else WK_WEBPUSH_TTL_DEFAULT), Urgency (the task's
 *     priority: high or normal), Topic (the task's collapse_key when it is
 *     1..32 base64url characters, else 32 characters of the base64url
 *     SHA-256 of it: same key, same topic), Content-Encoding: aes128gcm;
 *     the plaintext is the JSON {"title","body","data"} (data: the task's
 *     payload, when it has one);
 *   - the answer: 200/201/202 delivered; 404 and 410 unregistered (prune
 *     the subscription); 429, or 503 with Retry-After, slow down; other
 *     5xx retried; anything else (400 bad request, 401/403 VAPID refused,
 *     413 payload too large) fails for good.
 * A wk_webpush belongs to one thread (the worker's loop). */
#ifndef WK_WEBPUSH_H
#define WK_WEBPUSH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hr_buf.h"
#include "hr_rich.h"
#include "wk_provider.h"

struct cJSON;

#define WK_WEBPUSH_ORIGINS 32              /* VAPID tokens kept */
#define WK_WEBPUSH_VAPID_TTL_S (12 * 3600) /* RFC 8292: exp within 24 hours */
#define WK_WEBPUSH_TTL_DEFAULT 2419200     /* 28 days, when the task sets no ttl_s */
#define WK_WEBPUSH_TOPIC_MAX 32            /* RFC 8030 section 5.4 */
#define WK_WEBPUSH_AUTH_MAX 1024           /* the Authorization value */

typedef struct wk_webpush wk_webpush;

/* A provider for the VAPID key in the LEN bytes of PEM at PEM (P-256) and
 * SUBJECT (mailto: or https:, checked by the configuration).  0, or -1
 * with ERRSTR. */
int wk_webpush_new(const char *pem, size_t len, const char *subject, wk_webpush **out, char *errstr,
                   size_t errlen);
void wk_webpush_free(wk_webpush *wp);

/* The Authorization value for a request to ENDPOINT (ELEN bytes, an
 * https:// URL) at NOW_S: the origin's kept token, or a new one.  NULL
 * with ERRSTR when signing fails or the origin is over 255 bytes; valid
 * until the next call.  *LEN gets its length. */
const char *wk_webpush_auth(wk_webpush *wp, const char *endpoint, size_t elen, int64_t now_s,
                            size_t *len, char *errstr, size_t errlen);
/* How many VAPID tokens WP signed so far (the benchmark reports it). */
uint64_t wk_webpush_signed(const wk_webpush *wp);

/* The Topic of COLLAPSE_KEY (not NULL) into OUT; its length. */
size_t wk_webpush_topic(const char *collapse_key, char out[WK_WEBPUSH_TOPIC_MAX + 1]);

/* Appends the plaintext {"title","body","data"} to OUT (PAYLOAD may be
 * NULL), with RICH's options a web push carries (NULL: none; the rest are
 * refused at create time, hr_rich_check_webpush) under the names of the
 * Notification API's options, which the service worker passes to
 * showNotification: "image", "actions" ([{"action","title"}]), "tag" (the
 * thread).  0, or -1 past OUT's cap or a payload over WK_PROVIDER_JSON_MAX
 * (OUT then unchanged). */
int wk_webpush_plaintext(const char *title, const char *body, const struct cJSON *payload,
                         const hr_rich *rich, hr_buf *out);

/* Classifies an answer: STATUS, RETRY_AFTER_S (-1: absent). */
void wk_webpush_classify(long status, long retry_after_s, wk_provider_result *out);

#endif
