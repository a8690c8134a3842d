/* wk_curl: a channel's curl handles (see wk_sender.h). */
#include "wk_sender_int.h"

#include <curl/curl.h>
#include <stdlib.h>

wk_xfer *wk_chan_take_xfer(wk_chan *chan)
{
    wk_xfer *x;

    if (chan->nfree > 0)
        return chan->free[--chan->nfree];
    if (chan->nall == (size_t)chan->cfg->concurrency)
        return NULL;
    x = wk_xfer_new(chan->cfg, chan);
    if (x == NULL)
        return NULL;
    x->mh = &chan->multis[chan->nall % chan->nmultis];
    wk_sender_uv_easy(chan->s, x->easy);
    chan->all[chan->nall++] = x;
    return x;
}

/* Takes X out of the multi handle and back into the pool. */
void wk_chan_release_xfer(wk_chan *chan, wk_xfer *x)
{
    wk_sender *s = chan->s;

    curl_multi_remove_handle(x->mh->multi, x->easy);
    if (x->p != NULL) {
        x->p->xfer = NULL;
        x->p->state = WK_PUSH_IDLE;
    }
    x->p = NULL;
    chan->free[chan->nfree++] = x;
    chan->inflight--;
    s->inflight--;
    hr_metrics_set(s->m->inflight, (double)s->inflight);
}

/* A channel's multi handles: one per WK_SENDER_MULTI_CONNS of the
 * connections it opens (HTTP/1.1 and smtp: one per request in flight;
 * apns: its few multiplexed connections), each limited to its share per
 * host, so an apns channel never opens more than apns.connections
 * (libcurl 7.88 opens a new connection for a request that finds every
 * stream taken, unless the host's limit is reached: then it waits). */
int wk_chan_multis(wk_chan *chan)
{
    const hr_channel *ch = chan->cfg;
    long conns = ch->type == HR_CHANNEL_APNS ? ch->apns.connections : ch->concurrency;
    size_t n = ((size_t)conns + WK_SENDER_MULTI_CONNS - 1) / WK_SENDER_MULTI_CONNS;

    if (n > (size_t)ch->concurrency)
        n = (size_t)ch->concurrency;
    if (n == 0)
        n = 1;
    chan->multis = calloc(n, sizeof *chan->multis);
    if (chan->multis == NULL)
        return -1;
    for (; chan->nmultis < n; chan->nmultis++)
        if (wk_sender_uv_multi_init(chan->s, &chan->multis[chan->nmultis],
                                    (conns + (long)n - 1) / (long)n) != 0)
            return -1;
    return 0;
}

void wk_sender_check(wk_sender *s, wk_multi *mh)
{
    CURLMsg *msg;
    int left;

    while ((msg = curl_multi_info_read(mh->multi, &left)) != NULL) {
        wk_xfer *x = NULL;

        if (msg->msg != CURLMSG_DONE)
            continue;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
        if (x == x->chan->auth_x)
            wk_chan_auth_finished(x->chan, msg->data.result);
        else
            wk_sender_finished(s, x, msg->data.result);
    }
    wk_sender_pump(s);
}
