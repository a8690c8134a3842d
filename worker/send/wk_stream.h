/* wk_stream: one HTTP/2 request of a push on an apns or fcm channel — the
 * counterpart of wk_xfer for the HTTP/2 transport (wk_h2send).  A stream
 * holds what its request is made of, in buffers it keeps from one push to
 * the next (so a warmed-up stream allocates nothing): the path, the header
 * array handed to the engine (wk_h2, which copies it at submission), the
 * JSON body (borrowed by the engine until the request is done), the task's
 * title and body rendered for the recipient; and what came back: the
 * status or the transport's error, the Retry-After, the first
 * WK_PROVIDER_BODY_MAX bytes of the body.
 *
 * The requests: an APNs push (wk_apns: path /3/device/<token>, its header
 * lines, the apns-id derived from (task, uid, device token) so a re-sent
 * push repeats it), an FCM messages:send (wk_fcm, the channel's OAuth
 * token), and an fcm channel's token request (a form POST).  The answer is
 * classified by the provider module into a wk_provider verdict for the
 * sender.  Streams belong to their transport's pool; the push a running
 * one carries (wk_stream.p) is the sender's.  Loop thread only. */
#ifndef WK_STREAM_H
#define WK_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <openssl/evp.h>
#include <sys/queue.h>

#include "hr_buf.h"
#include "hr_config.h"
#include "wk_apns.h"
#include "wk_h2.h"
#include "wk_provider.h"
#include "wk_task.h"

#define WK_STREAM_PATH_MAX 1024
#define WK_STREAM_MSG_MAX 160

struct wk_push;   /* wk_push.h */
struct wk_h2send; /* wk_h2send.h */

typedef struct wk_stream {
    struct wk_push *p; /* the push it carries (the sender's); NULL while idle */
    /* The transport's: the transport, the engine the request was submitted
     * to and its handle (for a cancel), whether it runs there or waits on
     * the transport's list of finished ones. */
    struct wk_h2send *hs;
    wk_h2 *h2;
    wk_h2_req *req;
    bool running, done;
    TAILQ_ENTRY(wk_stream) done_link;
    /* The request. */
    char path[WK_STREAM_PATH_MAX];
    wk_h2_nv nv[WK_H2_HEADERS_MAX];
    size_t nnv;
    wk_apns_request apns; /* an APNs request's header lines (nv points into them) */
    char apns_id[37];
    EVP_MD_CTX *sha; /* the apns-id's digest, kept from one push to the next */
    EVP_MD *sha256;
    hr_buf auth;        /* fcm: "Bearer <access token>" */
    hr_buf body;        /* the JSON message or the form */
    hr_buf title, text; /* the task's title and body rendered for the recipient */
    int64_t start_ms;
    /* The answer (wk_h2send copies it from the engine's callback). */
    int64_t end_ms; /* when it was handed over (wall clock ms, one read per hand-over pass) */
    int status;     /* 0: no response (err says why) */
    wk_h2_err err;  /* WK_H2_OK: a complete response */
    char msg[WK_STREAM_MSG_MAX];
    long retry_after_s; /* -1: no Retry-After */
    hr_buf resp;        /* the response body, capped */
} wk_stream;

/* A stream with its buffers (empty until used); NULL when out of memory. */
wk_stream *wk_stream_new(void);
void wk_stream_free(wk_stream *sx);

/* Builds on SX the APNs request of CH (an apns channel) to DEVICE_TOKEN,
 * its path under PREFIX (the channel URL's path, "" for none), signed with
 * PROVIDER_TOKEN: the alert text from TASK's title and body rendered for
 * UID (content VARIANT, wk_task_variant), its payload, and the apns-id.
 * NOW_MS (wall clock; the sender's run reads it once for all the requests
 * it starts) is the request's start, for its latency, and the base of its
 * expiration.  0, or -1 with ERRSTR. */
int wk_stream_prepare_apns(wk_stream *sx, const hr_channel *ch, const char *prefix,
                           const char *provider_token, const wk_task *task, unsigned variant,
                           const char *uid, const redisReply *user, const char *device_token,
                           int64_t now_ms, char *errstr, size_t errlen);

/* Builds on SX the messages:send request to PATH with the OAuth BEARER
 * token for DEVICE_TOKEN: the message from TASK's title and body rendered
 * for UID and its payload (wk_fcm_message_build); NOW_MS as
 * wk_stream_prepare_apns's.  0, or -1 with ERRSTR. */
int wk_stream_prepare_fcm(wk_stream *sx, const char *path, const char *bearer, const wk_task *task,
                          unsigned variant, const char *uid, const redisReply *user,
                          const char *device_token, int64_t now_ms, char *errstr, size_t errlen);

/* Builds on SX a POST of the form FORM (application/x-www-form-urlencoded)
 * to PATH: an fcm channel's token request.  0, or -1 with ERRSTR. */
int wk_stream_prepare_form(wk_stream *sx, const char *path, const hr_buf *form, char *errstr,
                           size_t errlen);

/* What SX's answer on channel CH (apns or fcm) means: *OUT gets the
 * verdict, the Retry-After and a reason (the provider's "<status>
 * <error>", or "h2 <error>: ..." for a transport error, which is
 * retried). */
void wk_stream_verdict(const hr_channel *ch, const wk_stream *sx, wk_provider_result *out);

#endif
