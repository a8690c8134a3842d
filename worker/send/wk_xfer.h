/* wk_xfer: one request of a push on the curl transport — a libcurl easy
 * handle kept configured for its channel between requests (so the
 * connection is reused), and the request built from the push: for a
 * webhook channel the URL, body and headers rendered by the task's
 * templates into buffers capped at creation, plus an Idempotency-Key
 * stable per task and recipient, "herald-<task>-<uid>", so a redelivered
 * chunk can be deduplicated by the receiver; with the channel's
 * signing_secrets, the same value is the Standard Webhooks webhook-id and
 * webhook-timestamp / webhook-signature (hr_sign) sign the body as sent, a
 * new timestamp on every attempt; for an smtp channel one mail over SMTP
 * (STARTTLS or smtps, AUTH, the connection kept for the next mail); for a
 * webpush channel the POST of the message encrypted to the subscription
 * (wk_ece) with its VAPID, TTL, Urgency and Topic headers (wk_webpush), on
 * HTTP/2 when the push service offers it (ALPN), HTTP/1.1 otherwise.  The
 * Retry-After header is read from the response, and the response
 * classified into a wk_verdict for the sender (wk_sender), which acts on
 * it.  The handles are the curl transport's (wk_curl): it pools them and
 * runs them on its multi handles.  (apns and fcm channels run on HTTP/2:
 * wk_stream, wk_h2send.) */
#ifndef WK_XFER_H
#define WK_XFER_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hr_config.h"
#include "hr_sign.h"
#include "hr_buf.h"
#include "wk_batch.h"
#include "wk_ece.h"
#include "wk_provider.h"
#include "wk_task.h"
#include "wk_webpush.h"

struct wk_multi; /* wk_curl.h */
struct wk_push;  /* wk_push.h */

typedef struct wk_xfer {
    CURL *easy;
    struct wk_multi *mh; /* the multi handle it runs on (set by its transport, wk_curl) */
    bool running;        /* on its multi handle (wk_curl) */
    struct wk_push *p;   /* the push it carries (the sender's); NULL while idle */
    /* A batched webhook's request: the pushes it carries in the request's
     * order (the sender's; a cancelled one NULL), up to the channel's
     * batch; npushes 0 otherwise. */
    struct wk_push **pushes;
    size_t npushes;
    /* The request: URL, body (an smtp channel's message), header lines
     * (each NUL-terminated), the task's title and body rendered. */
    wk_task_out req;
    hr_buf resp; /* smtp: the relay's last refusal; the response body when kept, capped */
    bool keep_resp;
    hr_buf mail[WK_TASK__MAIL]; /* smtp: the channel's templates rendered */
    size_t upload_off;          /* smtp: how much of BODY (the message) curl has read */
    struct curl_slist *rcpt;    /* smtp: the one RCPT TO */
    hr_buf plain;               /* webpush: the message before encryption */
    hr_sign_secret secrets[HR_SIGN_MAX_SECRETS]; /* the channel's, parsed once */
    size_t nsecrets;
    /* The header list handed to curl: nodes over req.headers' lines, made
     * once with the handle (curl only reads the list), so a request
     * allocates no list. */
    struct curl_slist *hnodes;
    size_t hcap;
    /* The channel's URL parsed once (CURLOPT_CURLU) when it names no
     * variable, so no request hands curl a URL string to parse again
     * (about 10,000 instructions a push; docs/performance.md, issue 33);
     * NULL when the URL is rendered per request (or curl refused it: each
     * request then reports the error as before). */
    CURLU *uh;
    char errbuf[CURL_ERROR_SIZE];
    long retry_after_s; /* -1 = header absent */
    int64_t start_ms;
} wk_xfer;

/* A handle configured for channel CH; NULL when out of memory. */
wk_xfer *wk_xfer_new(const hr_channel *ch);
void wk_xfer_free(wk_xfer *x);

/* Builds on X (not yet added to a multi handle) the request of TASK for
 * UID (its content VARIANT, wk_task_variant) with the recipient's USER hash (or NULL): *STRIPPED gets how many
 * rendered headers were dropped as unsafe.  0, or -1 with ERRSTR when it
 * cannot be rendered. */
int wk_xfer_prepare(wk_xfer *x, const hr_channel *ch, const wk_task *task, unsigned variant,
                    const char *uid, const redisReply *user, size_t *stripped, char *errstr,
                    size_t errlen);

/* Builds on X the batched request of TASK for the N pushes PUSHES (a
 * webhook channel CH with batch > 1): URL and headers rendered once, the
 * body CH->batch_body around each push's body rendered for its recipient,
 * comma-separated in the pushes' order; Idempotency-Key (and the
 * signature's webhook-id) "herald-<task>-b<hash of the uids>".  0, or -1
 * with ERRSTR. */
int wk_xfer_prepare_batch(wk_xfer *x, const hr_channel *ch, const wk_task *task,
                          struct wk_push *const *pushes, size_t n, size_t *stripped, char *errstr,
                          size_t errlen);

/* Builds on X the mail of CH (an smtp channel) to the address TO: the
 * MIME message (wk_smtp) from the channel's subject / text / html /
 * list_unsubscribe templates rendered for UID, its Message-ID derived
 * from (task, uid, address) so a re-sent mail repeats it.  0, or -1 with
 * ERRSTR. */
int wk_xfer_prepare_smtp(wk_xfer *x, const hr_channel *ch, const wk_task *task, unsigned variant,
                         const char *uid, const redisReply *user, const char *to, char *errstr,
                         size_t errlen);

/* Builds on X the web push of TASK to the subscription ADDRESS (a
 * webpush address, hr_wpsub.h) for UID (its content VARIANT,
 * wk_task_variant): the plaintext
 * (wk_webpush_plaintext) encrypted with ECE, the headers with WP's VAPID
 * token for the endpoint's origin.  0, or -1 with ERRSTR (a message over
 * WK_ECE_PLAIN_MAX bytes, a subscription that does not parse). */
int wk_xfer_prepare_webpush(wk_xfer *x, wk_webpush *wp, wk_ece *ece, const wk_task *task,
                            unsigned variant, const char *uid, const redisReply *user,
                            const char *address, char *errstr, size_t errlen);

/* What a request of channel CH on X that ended with curl result RC and
 * CODE (the HTTP status when RC is CURLE_OK; an SMTP channel's last reply
 * code, also on failure) means: *OUT gets the verdict, the
 * Retry-After and a reason ("http <code>" for a webhook, the relay's
 * reply for smtp, "curl: ..." for a transport error, which is
 * retried). */
void wk_xfer_verdict(const hr_channel *ch, const wk_xfer *x, CURLcode rc, long code,
                     wk_provider_result *out);

/* What the answer to X's batched request (X->npushes recipients; curl
 * result RC, HTTP status CODE) means: true when the receiver took the
 * request, *A then holds its answer per recipient (wk_batch_answer_next
 * for each in order; garbled when A->results is NULL); false when *ALL
 * applies to every recipient (a transport error, a status not in
 * success).  wk_batch_answer_free(A) in either case. */
bool wk_xfer_batch_verdict(const hr_channel *ch, const wk_xfer *x, CURLcode rc, long code,
                           wk_provider_result *all, wk_batch_answer *a);

#endif
