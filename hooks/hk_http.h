/* hk_http: herald-hooks' HTTP client: POSTs in flight on one curl multi
 * handle, driven by the daemon's loop (hk_http_wait), answers handed back
 * with the caller's context.  A request copies its body and headers, has
 * its own timeout, verifies TLS (the system's trust store), follows no
 * redirect (a webhook that moved must be re-registered, not followed to
 * wherever a 30x points) and reads at most HK_HTTP_ANSWER_MAX bytes of the
 * answer (kept for the error message).  The proxy is the environment's,
 * read once by hk_http_new for each of the two schemes (hr_proxy) and set
 * on every request, so curl reads no proxy variable per delivery: a
 * changed environment needs a restart. */
#ifndef HK_HTTP_H
#define HK_HTTP_H

#include <stddef.h>
#include <stdint.h>

#define HK_HTTP_ANSWER_MAX 512

typedef struct hk_http hk_http;

typedef struct hk_http_result {
    long status;     /* 0: no answer (connection, timeout) */
    const char *err; /* curl's error, or the answer's first bytes; valid during the callback */
    double seconds;
} hk_http_result;

typedef void (*hk_http_done_fn)(void *ctx, const hk_http_result *res);

/* Reads the proxy environment; NULL when out of memory. */
hk_http *hk_http_new(hk_http_done_fn done);
/* Stops every request (no callback) and frees.  Accepts NULL. */
void hk_http_free(hk_http *h);
/* Starts a POST of BODY (LEN bytes) to URL with the NHEADERS "Name: value"
 * HEADERS, at most TIMEOUT_MS; its answer goes to the done callback with
 * CTX.  0, or -1 when out of memory. */
int hk_http_post(hk_http *h, const char *url, const char *const *headers, size_t nheaders,
                 const char *body, size_t len, int timeout_ms, void *ctx);
/* Runs the transfers, waiting at most WAIT_MS for one to make progress,
 * and calls the done callback of each that ended. */
void hk_http_wait(hk_http *h, int wait_ms);
/* Requests in flight. */
size_t hk_http_running(const hk_http *h);

#endif
