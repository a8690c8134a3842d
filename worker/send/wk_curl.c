/* wk_curl: a channel's curl transport (see wk_curl.h). */
#include "wk_curl.h"

#include <stdio.h>
#include <stdlib.h>

#include "hr_proxy.h"

struct wk_curl {
    const hr_channel *ch;
    wk_curl_io io;
    wk_curl_hooks hooks;
    hr_proxy px;      /* the environment's proxy for the channel, read once */
    wk_multi *multis; /* handle i runs on multis[i % nmultis] */
    size_t nmultis;
    wk_xfer **all;  /* every handle made, up to the channel's concurrency */
    wk_xfer **free; /* stack of idle handles */
    size_t nall, nfree;
};

/* A new handle on multi handle MH, its socket callbacks set; NULL when out
 * of memory. */
static wk_xfer *wk_curl_make(wk_curl *curl, wk_multi *mh)
{
    wk_xfer *x = wk_xfer_new(curl->ch);

    if (x == NULL)
        return NULL;
    x->mh = mh;
    hr_proxy_apply(&curl->px, x->easy);
    curl->io.easy(curl->io.data, x->easy);
    return x;
}

wk_xfer *wk_curl_take(wk_curl *curl)
{
    wk_xfer *x;

    if (curl->nfree > 0)
        return curl->free[--curl->nfree];
    if (curl->nall == (size_t)curl->ch->concurrency)
        return NULL;
    x = wk_curl_make(curl, &curl->multis[curl->nall % curl->nmultis]);
    if (x != NULL)
        curl->all[curl->nall++] = x;
    return x;
}

bool wk_curl_can_take(const wk_curl *curl)
{
    return curl->nfree > 0 || curl->nall < (size_t)curl->ch->concurrency;
}

void wk_curl_give(wk_curl *curl, wk_xfer *x)
{
    curl->free[curl->nfree++] = x;
}

static void wk_curl_remove(wk_curl *curl, wk_xfer *x)
{
    (void)curl;
    curl_multi_remove_handle(x->mh->multi, x->easy);
    x->running = false;
}

void wk_curl_release(wk_curl *curl, wk_xfer *x)
{
    wk_curl_remove(curl, x);
    x->p = NULL;
    wk_curl_give(curl, x);
}

int wk_curl_add(wk_curl *curl, wk_xfer *x, char *errstr, size_t errlen)
{
    CURLMcode mc = curl_multi_add_handle(x->mh->multi, x->easy);

    (void)curl;
    if (mc != CURLM_OK) {
        snprintf(errstr, errlen, "curl: %s", curl_multi_strerror(mc));
        return -1;
    }
    x->running = true;
    return 0;
}

void wk_curl_action(wk_multi *mh, curl_socket_t fd, int ev_bitmask)
{
    const wk_curl_hooks *hooks = &mh->curl->hooks;
    CURLMsg *msg;
    int running, left;

    curl_multi_socket_action(mh->multi, fd, ev_bitmask, &running);
    while ((msg = curl_multi_info_read(mh->multi, &left)) != NULL) {
        wk_xfer *x = NULL;

        if (msg->msg != CURLMSG_DONE)
            continue;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
        hooks->finished(hooks->ctx, x, msg->data.result);
    }
    hooks->drained(hooks->ctx);
}

/* The multi handles: one per WK_CURL_MULTI_CONNS of the connections the
 * channel opens (one per request in flight: HTTP/1.1 and smtp), each
 * limited to its share per host (libcurl 7.88 opens a new connection for
 * an HTTP/2 request that finds every stream taken, unless the host's
 * limit is reached: then it waits). */
static int wk_curl_multis(wk_curl *curl)
{
    const hr_channel *ch = curl->ch;
    long conns = ch->concurrency;
    size_t n = ((size_t)conns + WK_CURL_MULTI_CONNS - 1) / WK_CURL_MULTI_CONNS;
    long share;

    if (n > (size_t)ch->concurrency)
        n = (size_t)ch->concurrency;
    if (n == 0)
        n = 1;
    share = (conns + (long)n - 1) / (long)n;
    curl->multis = calloc(n, sizeof *curl->multis);
    if (curl->multis == NULL)
        return -1;
    for (; curl->nmultis < n; curl->nmultis++) {
        wk_multi *mh = &curl->multis[curl->nmultis];

        mh->curl = curl;
        if ((mh->multi = curl_multi_init()) == NULL)
            return -1;
        curl_multi_setopt(mh->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
        curl_multi_setopt(mh->multi, CURLMOPT_MAX_HOST_CONNECTIONS, share);
        curl_multi_setopt(mh->multi, CURLMOPT_MAXCONNECTS, share);
        if (curl->io.attach(curl->io.data, mh) != 0) {
            curl_multi_cleanup(mh->multi);
            mh->multi = NULL;
            return -1;
        }
    }
    return 0;
}

int wk_curl_new(const hr_channel *ch, const wk_curl_io *io, const wk_curl_hooks *hooks,
                wk_curl **out, char *errstr, size_t errlen)
{
    wk_curl *curl = calloc(1, sizeof *curl);
    const char *scheme;
    size_t slen;

    *out = NULL;
    if (curl == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    curl->ch = ch;
    curl->io = *io;
    curl->hooks = *hooks;
    curl->all = calloc((size_t)ch->concurrency, sizeof *curl->all);
    curl->free = calloc((size_t)ch->concurrency, sizeof *curl->free);
    if (curl->all == NULL || curl->free == NULL) {
        snprintf(errstr, errlen, "out of memory");
        goto fail;
    }
    scheme = hr_proxy_scheme(ch->url, &slen);
    if (hr_proxy_read(&curl->px, scheme, slen, errstr, errlen) != 0)
        goto fail;
    if (wk_curl_multis(curl) != 0) {
        snprintf(errstr, errlen, "curl_multi_init failed");
        goto fail;
    }
    *out = curl;
    return 0;
fail:
    wk_curl_free(curl);
    return -1;
}

void wk_curl_close(wk_curl *curl)
{
    if (curl == NULL)
        return;
    for (size_t k = 0; k < curl->nall; k++)
        if (curl->all[k]->running)
            wk_curl_remove(curl, curl->all[k]);
    /* Closes cached connections (the adapter's socket callbacks run),
     * while the easy handles that opened them still exist. */
    for (size_t k = 0; k < curl->nmultis; k++) {
        wk_multi *mh = &curl->multis[k];

        if (mh->multi == NULL)
            continue;
        curl_multi_cleanup(mh->multi);
        mh->multi = NULL;
        curl->io.detach(curl->io.data, mh);
    }
    for (size_t k = 0; k < curl->nall; k++)
        wk_xfer_free(curl->all[k]);
    curl->nall = curl->nfree = 0;
}

void wk_curl_free(wk_curl *curl)
{
    if (curl == NULL)
        return;
    wk_curl_close(curl);
    free(curl->multis);
    free(curl->all);
    free(curl->free);
    hr_proxy_clear(&curl->px);
    free(curl);
}
