/* wk_h2send: a channel's HTTP/2 transport (see wk_h2send.h).
 *
 * Data: the engines (main, and token when the token URI is another
 * origin; else token points at main), the path of each URL, the pool
 * (every stream made, a stack of the idle ones, the extra one), the
 * finished streams in the order they ended (a TAILQ, so a cancel takes
 * one out), and the uv_check that hands them over.  A stream is idle (in
 * the pool or taken), running (on an engine: sx->running), or finished
 * (on the list: sx->done) until the hook took it. */
#include "wk_h2send.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>

#include "hr_clock.h"

#define WK_H2SEND_HOST_MAX 256

/* One origin: its engine and the path of the URL that named it. */
typedef struct wk_h2send_origin {
    wk_h2 *h2;
    char host[WK_H2SEND_HOST_MAX];
    int port;
    char path[WK_STREAM_PATH_MAX];
} wk_h2send_origin;

typedef struct wk_h2send_entry {
    wk_stream *sx;
    TAILQ_ENTRY(wk_h2send_entry) link;
} wk_h2send_entry;

struct wk_h2send {
    const hr_channel *ch;
    wk_h2send_hooks hooks;
    wk_h2send_origin main, token;
    bool token_own;   /* token has an engine of its own */
    wk_stream **all;  /* every stream made, up to the channel's concurrency */
    wk_stream **free; /* stack of idle ones */
    size_t nall, nfree;
    wk_stream *extra;
    TAILQ_HEAD(, wk_stream) done; /* finished, not yet handed over */
    uv_check_t check;
    bool closed;
};

/* ---- finished streams ---------------------------------------------------- */

/* The check handle: after the loop's I/O callbacks, every stream that
 * finished is handed over, in order, then the drain is reported.  The
 * streams of one pass share one clock read: their answers came in the
 * same loop iteration's I/O. */
static void wk_h2send_check_cb(uv_check_t *check)
{
    wk_h2send *hs = check->data;
    int64_t now = hr_clock_now_ms();
    wk_stream *sx;

    while (!hs->closed && (sx = TAILQ_FIRST(&hs->done)) != NULL) {
        TAILQ_REMOVE(&hs->done, sx, done_link);
        sx->done = false;
        sx->end_ms = now;
        hs->hooks.finished(hs->hooks.ctx, sx);
    }
    if (hs->closed)
        return;
    uv_check_stop(&hs->check);
    hs->hooks.drained(hs->hooks.ctx);
}

/* The engine's callback: the answer is copied into the stream, which
 * joins the finished list. */
static void wk_h2send_answered(void *user, const wk_h2_response *resp)
{
    wk_stream *sx = user;
    wk_h2send *hs = sx->hs;

    sx->running = false;
    sx->req = NULL;
    sx->status = resp->status;
    sx->err = resp->err;
    if (resp->err != WK_H2_OK)
        snprintf(sx->msg, sizeof sx->msg, "%s", resp->msg);
    hr_buf_reset(&sx->resp);
    if (resp->err == WK_H2_OK) {
        if (resp->keep[0] != NULL)
            sx->retry_after_s = wk_provider_retry_after(resp->keep[0], strlen(resp->keep[0]),
                                                        hr_clock_now_ms() / 1000);
        /* The engine's body cap is the stream's. */
        hr_buf_append(&sx->resp, resp->body, resp->body_len);
    }
    sx->done = true;
    TAILQ_INSERT_TAIL(&hs->done, sx, done_link);
    uv_check_start(&hs->check, wk_h2send_check_cb);
}

/* ---- the pool -------------------------------------------------------------- */

static wk_stream *wk_h2send_make(wk_h2send *hs)
{
    wk_stream *sx = wk_stream_new();

    if (sx != NULL)
        sx->hs = hs;
    return sx;
}

wk_stream *wk_h2send_take(wk_h2send *hs)
{
    wk_stream *sx;

    if (hs->nfree > 0)
        return hs->free[--hs->nfree];
    if (hs->nall == (size_t)hs->ch->concurrency)
        return NULL;
    sx = wk_h2send_make(hs);
    if (sx != NULL)
        hs->all[hs->nall++] = sx;
    return sx;
}

void wk_h2send_give(wk_h2send *hs, wk_stream *sx)
{
    sx->p = NULL;
    if (sx != hs->extra)
        hs->free[hs->nfree++] = sx;
}

wk_stream *wk_h2send_extra(wk_h2send *hs)
{
    if (hs->extra == NULL)
        hs->extra = wk_h2send_make(hs);
    return hs->extra;
}

const char *wk_h2send_path(const wk_h2send *hs)
{
    return hs->main.path;
}

const char *wk_h2send_token_path(const wk_h2send *hs)
{
    return hs->token.path;
}

/* ---- requests ---------------------------------------------------------------- */

void wk_h2send_warm(wk_h2send *hs)
{
    wk_h2_warm(hs->main.h2);
}

int wk_h2send_add(wk_h2send *hs, wk_stream *sx, bool token, char *errstr, size_t errlen)
{
    wk_h2 *h2 = token ? hs->token.h2 : hs->main.h2;
    wk_h2_request rq = {.method = "POST",
                        .path = sx->path,
                        .headers = sx->nv,
                        .nheaders = sx->nnv,
                        .body = sx->body.data,
                        .body_len = sx->body.len,
                        .done = wk_h2send_answered,
                        .user = sx};

    if (wk_h2_submit(h2, &rq, &sx->req, errstr, errlen) != 0)
        return -1;
    sx->h2 = h2;
    sx->running = true;
    return 0;
}

void wk_h2send_cancel(wk_h2send *hs, wk_stream *sx)
{
    if (sx->running)
        wk_h2_cancel(sx->h2, sx->req);
    else if (sx->done)
        TAILQ_REMOVE(&hs->done, sx, done_link);
    sx->running = sx->done = false;
    sx->req = NULL;
}

/* ---- set-up ------------------------------------------------------------------ */

/* Reads URL (https://host[:port][/path][?query]) into O.  0, or -1 with
 * ERRSTR. */
static int wk_h2send_origin_parse(wk_h2send_origin *o, const char *url, char *errstr, size_t errlen)
{
    CURLU *u = curl_url();
    char *scheme = NULL, *host = NULL, *port = NULL, *path = NULL, *query = NULL;
    const char *h;
    size_t hlen;
    int n, rc = -1;

    if (u == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_PATH, &path, 0) != CURLUE_OK) {
        snprintf(errstr, errlen, "%s: not a URL", url);
        goto cleanup;
    }
    curl_url_get(u, CURLUPART_QUERY, &query, 0);
    if (strcasecmp(scheme, "https") != 0) {
        snprintf(errstr, errlen, "%s: HTTP/2 to a provider is https:// only", url);
        goto cleanup;
    }
    /* An IPv6 literal comes in brackets. */
    h = host;
    hlen = strlen(host);
    if (hlen >= 2 && host[0] == '[' && host[hlen - 1] == ']') {
        h++;
        hlen -= 2;
    }
    /* The path is a prefix: "/" alone is none. */
    if (strcmp(path, "/") == 0)
        path[0] = '\0';
    n = snprintf(o->path, sizeof o->path, "%s%s%s", path, query ? "?" : "", query ? query : "");
    if (hlen >= sizeof o->host || n < 0 || (size_t)n >= sizeof o->path) {
        snprintf(errstr, errlen, "%s: host or path too long", url);
        goto cleanup;
    }
    memcpy(o->host, h, hlen);
    o->host[hlen] = '\0';
    o->port = atoi(port);
    rc = 0;
cleanup:
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_free(path);
    curl_free(query);
    curl_url_cleanup(u);
    return rc;
}

/* O's engine on LOOP for channel CH with CONNECTIONS connections and at
 * most MAX_REQUESTS requests.  0, or -1 with ERRSTR. */
static int wk_h2send_engine(wk_h2send_origin *o, uv_loop_t *loop, const hr_channel *ch,
                            int connections, size_t max_requests, char *errstr, size_t errlen)
{
    wk_h2_conf conf;

    wk_h2_conf_init(&conf);
    conf.host = o->host;
    conf.port = o->port;
    conf.ca_file = ch->ca_file;
    conf.tls_verify = ch->tls_verify;
    conf.connections = connections;
    /* A connection that takes longer than a request may would time its
     * requests out anyway. */
    conf.connect_timeout_ms = ch->timeout_ms;
    conf.timeout_ms = ch->timeout_ms;
    conf.max_requests = max_requests;
    conf.body_max = WK_PROVIDER_BODY_MAX;
    conf.keep[0] = "retry-after";
    conf.nkeep = 1;
    return wk_h2_new(loop, &conf, &o->h2, errstr, errlen);
}

int wk_h2send_new(uv_loop_t *loop, const hr_channel *ch, const char *url, const char *token_url,
                  const wk_h2send_hooks *hooks, wk_h2send **out, char *errstr, size_t errlen)
{
    wk_h2send *hs = calloc(1, sizeof *hs);
    int conns = ch->type == HR_CHANNEL_APNS
                    ? ch->apns.connections
                    : (ch->concurrency + WK_H2SEND_STREAMS - 1) / WK_H2SEND_STREAMS;

    *out = NULL;
    if (hs == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    hs->ch = ch;
    hs->hooks = *hooks;
    TAILQ_INIT(&hs->done);
    uv_check_init(loop, &hs->check);
    hs->check.data = hs;
    hs->all = calloc((size_t)ch->concurrency, sizeof *hs->all);
    hs->free = calloc((size_t)ch->concurrency, sizeof *hs->free);
    if (hs->all == NULL || hs->free == NULL) {
        snprintf(errstr, errlen, "out of memory");
        goto fail;
    }
    if (conns > WK_H2_CONNECTIONS_MAX)
        conns = WK_H2_CONNECTIONS_MAX;
    /* The token request is one more request of the engine when it shares
     * the origin. */
    if (wk_h2send_origin_parse(&hs->main, url, errstr, errlen) != 0 ||
        (token_url != NULL && wk_h2send_origin_parse(&hs->token, token_url, errstr, errlen) != 0))
        goto fail;
    hs->token_own = token_url != NULL &&
                    (strcmp(hs->main.host, hs->token.host) != 0 || hs->main.port != hs->token.port);
    if (wk_h2send_engine(&hs->main, loop, ch, conns, (size_t)ch->concurrency + 1, errstr, errlen) !=
            0 ||
        (hs->token_own && wk_h2send_engine(&hs->token, loop, ch, 1, 1, errstr, errlen) != 0))
        goto fail;
    if (!hs->token_own)
        hs->token.h2 = hs->main.h2;
    *out = hs;
    return 0;
fail:
    wk_h2send_close(hs);
    /* The caller runs the loop (the check handle's close), then frees. */
    *out = hs;
    return -1;
}

void wk_h2send_close(wk_h2send *hs)
{
    if (hs == NULL || hs->closed)
        return;
    hs->closed = true;
    for (size_t i = 0; i < hs->nall; i++)
        wk_h2send_cancel(hs, hs->all[i]);
    if (hs->extra != NULL)
        wk_h2send_cancel(hs, hs->extra);
    if (hs->token_own)
        wk_h2_free(hs->token.h2);
    wk_h2_free(hs->main.h2);
    hs->main.h2 = hs->token.h2 = NULL;
    uv_close((uv_handle_t *)&hs->check, NULL);
}

void wk_h2send_free(wk_h2send *hs)
{
    if (hs == NULL)
        return;
    wk_h2send_close(hs);
    for (size_t i = 0; i < hs->nall; i++)
        wk_stream_free(hs->all[i]);
    wk_stream_free(hs->extra);
    free(hs->all);
    free(hs->free);
    free(hs);
}
