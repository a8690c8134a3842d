/* wk_xfer: one HTTP request of a push (see wk_xfer.h). */
#include "wk_xfer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "wk_clock.h"

#define WK_XFER_BODY_MAX (256 * 1024)
#define WK_XFER_URL_MAX (16 * 1024)
/* A Retry-After beyond this is read as this, before the channel's own
 * bound (retry.max_backoff_ms) applies. */
#define WK_XFER_RETRY_AFTER_MAX_S 3600

static size_t wk_xfer_discard(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    (void)ptr;
    (void)userdata;
    return size * nmemb; /* response bodies are not needed */
}

static size_t wk_xfer_header(char *buf, size_t size, size_t nitems, void *userdata)
{
    wk_xfer *x = userdata;
    size_t n = size * nitems;
    static const char name[] = "retry-after:";

    if (n > sizeof name - 1 && strncasecmp(buf, name, sizeof name - 1) == 0) {
        char tmp[32];
        size_t len = n - (sizeof name - 1);
        char *end;
        long v;

        if (len >= sizeof tmp)
            len = sizeof tmp - 1;
        memcpy(tmp, buf + sizeof name - 1, len);
        tmp[len] = '\0';
        errno = 0;
        v = strtol(tmp, &end, 10);
        /* Delta seconds only; an HTTP-date gives the default pause.  The
         * value is clamped where the response is read (no overflow). */
        if (end == tmp || v < 0)
            v = 0;
        else if (errno == ERANGE || v > WK_XFER_RETRY_AFTER_MAX_S)
            v = WK_XFER_RETRY_AFTER_MAX_S;
        x->retry_after_s = v;
    }
    return n;
}

wk_xfer *wk_xfer_new(const hr_channel *cfg, struct wk_chan *ch)
{
    wk_xfer *x = calloc(1, sizeof *x);
    CURL *e;

    if (x == NULL)
        return NULL;
    e = x->easy = curl_easy_init();
    if (e == NULL) {
        free(x);
        return NULL;
    }
    x->ch = ch;
    hr_buf_init(&x->url, WK_XFER_URL_MAX);
    hr_buf_init(&x->body, WK_XFER_BODY_MAX);
    curl_easy_setopt(e, CURLOPT_PRIVATE, x);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)cfg->timeout_ms);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, wk_xfer_discard);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, wk_xfer_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    if (cfg->http2) {
        bool tls = strncasecmp(cfg->url, "https:", 6) == 0;

        curl_easy_setopt(e, CURLOPT_HTTP_VERSION,
                         tls ? (long)CURL_HTTP_VERSION_2TLS : (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
        curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
    }
    if (strcasecmp(cfg->method, "GET") == 0) {
        curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    } else {
        curl_easy_setopt(e, CURLOPT_POST, 1L);
        if (strcasecmp(cfg->method, "POST") != 0)
            curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, cfg->method);
    }
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, cfg->tls_verify ? 1L : 0L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, cfg->tls_verify ? 2L : 0L);
    if (cfg->ca_file != NULL)
        curl_easy_setopt(e, CURLOPT_CAINFO, cfg->ca_file);
    return x;
}

void wk_xfer_free(wk_xfer *x)
{
    if (x == NULL)
        return;
    curl_easy_cleanup(x->easy);
    curl_slist_free_all(x->headers);
    hr_buf_free(&x->url);
    hr_buf_free(&x->body);
    free(x);
}


int wk_xfer_prepare(wk_xfer *x, const hr_channel *cfg, const wk_task *task, const char *uid,
                    const redisReply *user, size_t *stripped, char *errstr, size_t errlen)
{
    struct curl_slist *headers = NULL, *h;

    if (wk_task_render(task, uid, user, &x->url, &x->body, &headers, stripped, errstr,
                       errlen) != 0)
        goto fail;
    /* curl would add "Expect: 100-continue" to larger POSTs: a wasted
     * round trip per push. */
    h = curl_slist_append(headers, "Expect:");
    if (h == NULL) {
        snprintf(errstr, errlen, "out of memory");
        goto fail;
    }
    headers = h;
    curl_slist_free_all(x->headers);
    x->headers = headers;
    headers = NULL;
    curl_easy_setopt(x->easy, CURLOPT_URL, x->url.data);
    curl_easy_setopt(x->easy, CURLOPT_HTTPHEADER, x->headers);
    if (strcasecmp(cfg->method, "GET") != 0) {
        curl_easy_setopt(x->easy, CURLOPT_POSTFIELDSIZE, (long)x->body.len);
        curl_easy_setopt(x->easy, CURLOPT_POSTFIELDS, x->body.data ? x->body.data : "");
    }
    x->errbuf[0] = '\0';
    x->retry_after_s = -1;
    x->start_ms = wk_clock_now_ms();
    return 0;
fail:
    curl_slist_free_all(headers);
    return -1;
}

static bool wk_xfer_success(const hr_channel *cfg, long code)
{
    for (size_t i = 0; i < cfg->nsuccess; i++)
        if (cfg->success[i] == code)
            return true;
    return false;
}

wk_xfer_class wk_xfer_classify(const hr_channel *cfg, CURLcode rc, long code,
                               long retry_after_s)
{
    if (rc != CURLE_OK)
        return WK_XFER_RETRYABLE;
    if (wk_xfer_success(cfg, code))
        return WK_XFER_DELIVERED;
    if (code == 429 || (code == 503 && retry_after_s >= 0))
        return WK_XFER_SLOWDOWN;
    if (code < 500)
        return WK_XFER_REJECTED;
    return WK_XFER_RETRYABLE;
}
