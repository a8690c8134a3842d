/* hk_http: the curl multi handle and its requests (see hk_http.h). */
#include "hk_http.h"

#include <curl/curl.h>
#include <stdio.h>
#include <sys/queue.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hr_proxy.h"

typedef struct hk_http_req {
    TAILQ_ENTRY(hk_http_req) link;
    CURL *easy;
    struct curl_slist *headers;
    void *ctx;
    char answer[HK_HTTP_ANSWER_MAX];
    size_t alen;
    char err[CURL_ERROR_SIZE];
} hk_http_req;

struct hk_http {
    CURLM *multi;
    hk_http_done_fn done;
    TAILQ_HEAD(, hk_http_req) reqs; /* in flight */
    size_t running;
    hr_proxy http_px, https_px; /* the environment's, for http:// and https:// URLs */
};

hk_http *hk_http_new(hk_http_done_fn done)
{
    hk_http *h = calloc(1, sizeof *h);
    char errstr[64];

    if (h == NULL)
        return NULL;
    TAILQ_INIT(&h->reqs);
    h->done = done;
    if ((h->multi = curl_multi_init()) == NULL ||
        hr_proxy_read(&h->http_px, "http", 4, errstr, sizeof errstr) != 0 ||
        hr_proxy_read(&h->https_px, "https", 5, errstr, sizeof errstr) != 0) {
        hk_http_free(h);
        return NULL;
    }
    return h;
}

static void hk_http_req_free(hk_http *h, hk_http_req *r)
{
    TAILQ_REMOVE(&h->reqs, r, link);
    curl_multi_remove_handle(h->multi, r->easy);
    curl_easy_cleanup(r->easy);
    curl_slist_free_all(r->headers);
    free(r);
    h->running--;
}

void hk_http_free(hk_http *h)
{
    if (h == NULL)
        return;
    while (!TAILQ_EMPTY(&h->reqs))
        hk_http_req_free(h, TAILQ_FIRST(&h->reqs));
    curl_multi_cleanup(h->multi);
    hr_proxy_clear(&h->http_px);
    hr_proxy_clear(&h->https_px);
    free(h);
}

/* The proxy of URL's scheme: an endpoint's URL is http:// or https://
 * (hr_hooks checks it when it is stored). */
static const hr_proxy *hk_http_proxy(const hk_http *h, const char *url)
{
    size_t len;
    const char *scheme = hr_proxy_scheme(url, &len);

    return len == 4 && strncasecmp(scheme, "http", 4) == 0 ? &h->http_px : &h->https_px;
}

/* The first HK_HTTP_ANSWER_MAX - 1 bytes of the answer; the rest is read
 * and thrown away. */
static size_t hk_http_write(char *data, size_t size, size_t n, void *arg)
{
    hk_http_req *r = arg;
    size_t len = size * n, room = sizeof r->answer - 1 - r->alen;

    memcpy(r->answer + r->alen, data, len < room ? len : room);
    r->alen += len < room ? len : room;
    r->answer[r->alen] = '\0';
    return len;
}

int hk_http_post(hk_http *h, const char *url, const char *const *headers, size_t nheaders,
                 const char *body, size_t len, int timeout_ms, void *ctx)
{
    hk_http_req *r = calloc(1, sizeof *r);

    if (r == NULL || (r->easy = curl_easy_init()) == NULL)
        goto fail;
    for (size_t i = 0; i < nheaders; i++) {
        struct curl_slist *l = curl_slist_append(r->headers, headers[i]);

        if (l == NULL)
            goto fail;
        r->headers = l;
    }
    r->ctx = ctx;
    curl_easy_setopt(r->easy, CURLOPT_URL, url);
    curl_easy_setopt(r->easy, CURLOPT_PROTOCOLS_STR, "http,https");
    hr_proxy_apply(hk_http_proxy(h, url), r->easy);
    curl_easy_setopt(r->easy, CURLOPT_HTTPHEADER, r->headers);
    curl_easy_setopt(r->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(r->easy, CURLOPT_COPYPOSTFIELDS, body);
    curl_easy_setopt(r->easy, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
    curl_easy_setopt(r->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(r->easy, CURLOPT_WRITEFUNCTION, hk_http_write);
    curl_easy_setopt(r->easy, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(r->easy, CURLOPT_ERRORBUFFER, r->err);
    curl_easy_setopt(r->easy, CURLOPT_PRIVATE, r);
    if (curl_multi_add_handle(h->multi, r->easy) != CURLM_OK)
        goto fail;
    TAILQ_INSERT_TAIL(&h->reqs, r, link);
    h->running++;
    return 0;
fail:
    if (r != NULL) {
        curl_easy_cleanup(r->easy);
        curl_slist_free_all(r->headers);
        free(r);
    }
    return -1;
}

void hk_http_wait(hk_http *h, int wait_ms)
{
    CURLMsg *msg;
    int still, left;

    curl_multi_poll(h->multi, NULL, 0, wait_ms, NULL);
    curl_multi_perform(h->multi, &still);
    while ((msg = curl_multi_info_read(h->multi, &left)) != NULL) {
        hk_http_req *r = NULL;
        hk_http_result res = {0};

        if (msg->msg != CURLMSG_DONE)
            continue;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&r);
        curl_easy_getinfo(r->easy, CURLINFO_TOTAL_TIME, &res.seconds);
        if (msg->data.result == CURLE_OK) {
            curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &res.status);
            res.err = r->answer;
        } else {
            res.err = r->err[0] != '\0' ? r->err : curl_easy_strerror(msg->data.result);
        }
        h->done(r->ctx, &res);
        hk_http_req_free(h, r);
    }
}

size_t hk_http_running(const hk_http *h)
{
    return h->running;
}
