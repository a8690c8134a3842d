/* wk_xfer: one HTTP request of a push — a libcurl easy handle kept
 * configured for its channel between requests (so the connection is
 * reused), the request built from the push (URL, body and headers
 * rendered by the task's templates into buffers capped at creation), the
 * Retry-After header read from the response, and the response classified
 * for the sender (wk_sender), which owns the handles, runs them on its
 * multi handle and acts on the class. */
#ifndef WK_XFER_H
#define WK_XFER_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hr_config.h"
#include "hr_template.h"
#include "wk_task.h"

struct wk_chan; /* the sender's channel state */
struct wk_push; /* wk_sender.h */

typedef struct wk_xfer {
    CURL *easy;
    struct wk_chan *ch;
    struct wk_push *p;          /* NULL while in the pool */
    hr_buf url, body;
    struct curl_slist *headers; /* of the current request */
    char errbuf[CURL_ERROR_SIZE];
    long retry_after_s;         /* -1 = header absent */
    int64_t start_ms;
} wk_xfer;

/* What a finished request means for its push. */
typedef enum wk_xfer_class {
    WK_XFER_DELIVERED, /* one of the channel's success codes */
    WK_XFER_SLOWDOWN,  /* 429, or 503 with Retry-After: pause the channel, send again */
    WK_XFER_REJECTED,  /* another 4xx (or an odd code): retrying won't help */
    WK_XFER_RETRYABLE, /* 5xx or a curl error (timeout, refused connection...) */
} wk_xfer_class;

/* A handle configured for channel CFG, owned by CH; NULL when out of
 * memory. */
wk_xfer *wk_xfer_new(const hr_channel *cfg, struct wk_chan *ch);
void wk_xfer_free(wk_xfer *x);

/* Builds on X (not yet added to a multi handle) the request of TASK for
 * UID with the recipient's USER hash (or NULL): *STRIPPED gets how many
 * rendered headers were dropped as unsafe.  0, or -1 with ERRSTR when it
 * cannot be rendered. */
int wk_xfer_prepare(wk_xfer *x, const hr_channel *cfg, const wk_task *task, const char *uid,
                    const redisReply *user, size_t *stripped, char *errstr, size_t errlen);

/* The class of a request that ended with curl result RC and, when RC is
 * CURLE_OK, HTTP status CODE. */
wk_xfer_class wk_xfer_classify(const hr_channel *cfg, CURLcode rc, long code,
                               long retry_after_s);

#endif
