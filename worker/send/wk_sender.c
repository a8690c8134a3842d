/* wk_sender: libcurl multi over libuv, per-channel queues, rate limits,
 * retries and slow-downs (see wk_sender.h).  One request — its easy
 * handle, how it is built and what its response means — is wk_xfer's;
 * a channel's queues, tokens and slow-downs are wk_chan.c's, the curl <->
 * libuv glue wk_sender_uv.c's; this file sets the sender up, takes pushes
 * in and acts on the outcome of every request.
 *
 * Re-entrancy: the done callback runs from wk_sender_check() (after
 * curl_multi_socket_action returned, never inside a curl callback) or from
 * wk_sender_pump() when a push cannot be rendered.  It may submit or cancel
 * pushes; queues are re-read after every callback, and a pump requested
 * while one runs is folded into the running one (s->pumping). */
#include "wk_sender_int.h"

#include <curl/curl.h>
#include <errno.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "hr_log.h"
#include "hr_clock.h"
#include "hr_ratelimit.h"
#include "wk_apns.h"
#include "wk_fcm_auth.h"
#include "wk_retry.h"
#include "wk_xfer.h"

uint64_t wk_sender_random(wk_sender *s)
{
    /* xorshift64*: jitter needs spread, not secrecy. */
    s->rnd ^= s->rnd >> 12;
    s->rnd ^= s->rnd << 25;
    s->rnd ^= s->rnd >> 27;
    return s->rnd * 2685821657736338717ULL;
}

void wk_sender_settle(wk_sender *s, wk_push *push, const wk_push_result *res)
{
    push->state = WK_PUSH_IDLE;
    s->done(s->ctx, push, res);
}

void wk_sender_pump(wk_sender *s)
{
    if (s->pumping) {
        s->pump_again = true;
        return;
    }
    s->pumping = true;
    do {
        s->pump_again = false;
        for (size_t i = 0; i < s->nchans; i++)
            wk_chan_pump(&s->chans[i]);
    } while (s->pump_again);
    s->pumping = false;
}

/* ---- outcomes ------------------------------------------------------------ */

/* ---- public -------------------------------------------------------------- */

int wk_sender_new(uv_loop_t *loop, const hr_config *cfg, wk_redis *rd, wk_metrics *m,
                  wk_sender_done_fn done, void *ctx, wk_sender **out, char *errstr, size_t errlen)
{
    wk_sender *s = calloc(1, sizeof *s);

    *out = NULL;
    if (s == NULL)
        goto oom;
    s->loop = loop;
    s->cfg = cfg;
    s->rd = rd;
    s->m = m;
    s->done = done;
    s->ctx = ctx;
    if (getrandom(&s->rnd, sizeof s->rnd, 0) != (ssize_t)sizeof s->rnd || s->rnd == 0)
        s->rnd = (uint64_t)hr_clock_now_ms() ^ ((uint64_t)getpid() << 32) ^ 1;
    s->chans = calloc(cfg->nchannels, sizeof *s->chans);
    if (s->chans == NULL)
        goto oom;
    for (size_t i = 0; i < cfg->nchannels; i++) {
        wk_chan *chan = &s->chans[i];

        chan->s = s;
        chan->cfg = &cfg->channels[i];
        /* The config's 64-byte channel names fit HR_KEY_MAX. */
        hr_key_slowdown(wk_redis_prefix(rd), chan->k_slow, sizeof chan->k_slow, chan->cfg->name);
        TAILQ_INIT(&chan->tasks);
        wk_retry_cap_init(&chan->cap, chan->cfg->concurrency);
        chan->all = calloc((size_t)chan->cfg->concurrency, sizeof *chan->all);
        chan->free = calloc((size_t)chan->cfg->concurrency, sizeof *chan->free);
        uv_timer_init(loop, &chan->wake);
        uv_timer_init(loop, &chan->retry);
        chan->wake.data = chan->retry.data = chan;
        s->nchans++;
        if (chan->all == NULL || chan->free == NULL)
            goto oom;
        if (wk_chan_multis(chan) != 0) {
            snprintf(errstr, errlen, "curl_multi_init failed");
            goto fail;
        }
        if (chan->cfg->type == HR_CHANNEL_FCM) {
            if (wk_fcm_auth_new(chan->cfg, &chan->fcm, errstr, errlen) != 0)
                goto fail;
            if ((chan->auth_x = wk_xfer_new(chan->cfg, chan)) == NULL)
                goto oom;
            chan->auth_x->mh = &chan->multis[0];
            wk_sender_uv_easy(s, chan->auth_x->easy);
        }
        if (chan->cfg->type == HR_CHANNEL_APNS) {
            if (wk_chan_apns_signer(chan, errstr, errlen) != 0)
                goto fail;
            /* Slow start: one request per connection until answers come
             * back, so curl knows each connection's
             * SETTINGS_MAX_CONCURRENT_STREAMS before it multiplexes (APNs
             * allows one stream until a provider token was accepted);
             * every delivery widens the cap by one (wk_retry). */
            if (chan->cfg->apns.connections < chan->cap.cap)
                chan->cap.cap = chan->cfg->apns.connections;
        }
    }
    *out = s;
    return 0;
oom:
    snprintf(errstr, errlen, "out of memory");
fail:
    if (s != NULL) {
        wk_sender_close(s);
        /* Handles were initialised but never started: closing them needs
         * one loop turn. */
        uv_run(loop, UV_RUN_NOWAIT);
    }
    wk_sender_free(s);
    return -1;
}

bool wk_sender_addressed(const wk_sender *s, size_t ch_index, hr_addr_platform *platform,
                         const char **app)
{
    const wk_chan *chan = &s->chans[ch_index];

    if (chan->fcm != NULL) {
        *platform = HR_ADDR_FCM;
        *app = wk_fcm_auth_project(chan->fcm);
        return true;
    }
    if (chan->apns != NULL) {
        *platform = HR_ADDR_APNS;
        *app = chan->cfg->apns.topic;
        return true;
    }
    if (chan->cfg->type == HR_CHANNEL_SMTP) {
        *platform = HR_ADDR_EMAIL;
        *app = "";
        return true;
    }
    return false;
}

void wk_sender_set_prune(wk_sender *s, wk_sender_prune_fn prune)
{
    s->prune = prune;
}

void wk_sender_submit(wk_sender *s, wk_push *push)
{
    wk_chan *chan = &s->chans[push->task->ch_index];

    push->xfer = NULL;
    wk_chan_enqueue(chan, push, false);
}

void wk_sender_kick(wk_sender *s)
{
    wk_sender_pump(s);
}

void wk_sender_cancel(wk_sender *s, wk_push *push)
{
    wk_chan *chan = &s->chans[push->task->ch_index];

    switch (push->state) {
    case WK_PUSH_READY:
        wk_chan_dequeue(chan, push);
        break;
    case WK_PUSH_DELAYED:
        wk_retry_heap_remove(&chan->delayed, &push->delay);
        break;
    case WK_PUSH_INFLIGHT:
        wk_chan_release_xfer(chan, push->xfer);
        break;
    case WK_PUSH_IDLE:
        break;
    }
    push->state = WK_PUSH_IDLE;
    push->xfer = NULL;
}

bool wk_sender_stuck(const wk_sender *s, size_t ch_index)
{
    const wk_chan *chan = &s->chans[ch_index];

    /* A token request's end runs the pump too. */
    if (s->draining || chan->inflight > 0 || chan->auth_busy)
        return false;
    if (!TAILQ_EMPTY(&chan->tasks) && !uv_is_active((const uv_handle_t *)&chan->wake))
        return true;
    return chan->delayed.n > 0 && !uv_is_active((const uv_handle_t *)&chan->retry);
}

void wk_sender_drain(wk_sender *s)
{
    s->draining = true;
}

size_t wk_sender_in_flight(const wk_sender *s)
{
    return s->inflight;
}

void wk_sender_close(wk_sender *s)
{
    if (s == NULL)
        return;
    s->closed = true;
    for (size_t i = 0; i < s->nchans; i++) {
        wk_chan *chan = &s->chans[i];

        for (size_t k = 0; k < chan->nall; k++) {
            if (chan->all[k]->p != NULL)
                curl_multi_remove_handle(chan->all[k]->mh->multi, chan->all[k]->easy);
        }
        if (chan->auth_busy)
            curl_multi_remove_handle(chan->auth_x->mh->multi, chan->auth_x->easy);
        chan->auth_busy = false;
        /* Closes cached connections (the socket callbacks close their
         * polls), while the easy handles that opened them still exist. */
        for (size_t k = 0; k < chan->nmultis; k++)
            wk_sender_uv_multi_close(&chan->multis[k]);
        for (size_t k = 0; k < chan->nall; k++)
            wk_xfer_free(chan->all[k]);
        chan->nall = chan->nfree = 0;
        wk_xfer_free(chan->auth_x);
        chan->auth_x = NULL;
        uv_close((uv_handle_t *)&chan->wake, NULL);
        uv_close((uv_handle_t *)&chan->retry, NULL);
    }
    wk_sender_uv_close_all(s);
}

void wk_sender_free(wk_sender *s)
{
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->nchans; i++) {
        free(s->chans[i].multis);
        free(s->chans[i].all);
        free(s->chans[i].free);
        wk_fcm_auth_free(s->chans[i].fcm);
        wk_apns_signer_free(s->chans[i].apns);
        wk_retry_heap_free(&s->chans[i].delayed);
    }
    free(s->chans);
    hr_vec_free(&s->socks);
    free(s);
}

void wk_chan_wake_cb(uv_timer_t *t)
{
    wk_chan *chan = t->data;

    wk_sender_pump(chan->s);
}

void wk_chan_arm_retry(wk_chan *chan)
{
    const wk_retry_node *first = wk_retry_heap_min(&chan->delayed);
    int64_t now = hr_clock_now_ms();

    if (first == NULL)
        uv_timer_stop(&chan->retry);
    else
        uv_timer_start(&chan->retry, wk_chan_wake_cb,
                       first->due_ms > now ? (uint64_t)(first->due_ms - now) : 0, 0);
}

/* Builds PUSH's next request on X: the webhook's, the messages:send of its
 * current address with the channel's access token, or the APNs request
 * signed with the provider token.  0, or -1 with ERRSTR. */
static int wk_chan_prepare(wk_chan *chan, wk_xfer *x, wk_push *push, char *errstr, size_t errlen)
{
    size_t stripped = 0;
    uint64_t gen;
    bool request;
    int64_t wake;
    const char *token;

    if (chan->apns != NULL) {
        token = wk_apns_signer_token(chan->apns, hr_clock_now_ms() / 1000, errstr, errlen);
        if (token == NULL)
            return -1;
        return wk_xfer_prepare_apns(
            x, chan->cfg, chan->cfg->url != NULL ? chan->cfg->url : WK_APNS_BASE_URL, token,
            push->task, push->uid, push->user, push->addrs[push->addr].address, errstr, errlen);
    }
    if (chan->cfg->type == HR_CHANNEL_SMTP)
        return wk_xfer_prepare_smtp(x, chan->cfg, push->task, push->uid, push->user,
                                    push->addrs[push->addr].address, errstr, errlen);
    if (chan->fcm == NULL) {
        if (wk_xfer_prepare(x, chan->cfg, push->task, push->uid, push->user, &stripped, errstr,
                            errlen) != 0)
            return -1;
        if (stripped > 0)
            hr_metrics_add(chan->s->m->anomalies[WK_ANOMALY_HEADER_STRIPPED], (uint64_t)stripped);
        return 0;
    }
    /* The pump starts an fcm push only with a token at hand. */
    token = wk_fcm_auth_token(chan->fcm, hr_clock_now_ms(), &gen, &request, &wake);
    if (token == NULL) {
        snprintf(errstr, errlen, "no access token");
        return -1;
    }
    push->token_gen = gen;
    return wk_xfer_prepare_fcm(x, wk_fcm_auth_send_url(chan->fcm), token, push->task, push->uid,
                               push->user, push->addrs[push->addr].address, errstr, errlen);
}

/* Starts PUSH on a free handle X; false when PUSH was settled instead (it could
 * not be rendered or the request not added, or it has no address). */
bool wk_chan_start(wk_chan *chan, wk_xfer *x, wk_push *push)
{
    wk_sender *s = chan->s;
    char errstr[256];
    wk_push_result res = {.delivered = false};
    CURLMcode mc;

    if (wk_chan_addressed(chan) && push->naddrs == 0) {
        chan->free[chan->nfree++] = x;
        res.unregistered = true;
        wk_sender_settle(s, push, &res);
        return false;
    }
    if (wk_chan_prepare(chan, x, push, errstr, sizeof errstr) != 0)
        goto fail;
    x->p = push;
    mc = curl_multi_add_handle(x->mh->multi, x->easy);
    if (mc != CURLM_OK) {
        x->p = NULL;
        snprintf(errstr, sizeof errstr, "curl: %s", curl_multi_strerror(mc));
        goto fail;
    }
    push->xfer = x;
    push->state = WK_PUSH_INFLIGHT;
    push->attempts++;
    if (++push->addr_attempts == 1)
        push->firsts++;
    chan->inflight++;
    s->inflight++;
    hr_metrics_set(s->m->inflight, (double)s->inflight);
    return true;
fail:
    chan->free[chan->nfree++] = x;
    wk_chan_end(chan, push, &res, WK_END_FAILED, errstr);
    return false;
}

/* Starts the token request of fcm channel CHAN on its own handle. */
static void wk_chan_auth_start(wk_chan *chan, int64_t now)
{
    char errstr[256];
    CURLMcode mc;

    if (wk_fcm_auth_request(chan->fcm, now, chan->auth_x, errstr, sizeof errstr) != 0)
        return; /* logged, back-off set */
    mc = curl_multi_add_handle(chan->auth_x->mh->multi, chan->auth_x->easy);
    if (mc != CURLM_OK) {
        wk_fcm_auth_done(chan->fcm, now, 0, NULL, 0, curl_multi_strerror(mc), errstr,
                         sizeof errstr);
        return;
    }
    chan->auth_busy = true;
}

/* The token request of CHAN ended with curl result RC. */
void wk_chan_auth_finished(wk_chan *chan, CURLcode rc)
{
    wk_xfer *x = chan->auth_x;
    char errstr[256], why[CURL_ERROR_SIZE + 8] = "";
    long code = 0;

    curl_multi_remove_handle(x->mh->multi, x->easy);
    chan->auth_busy = false;
    if (rc == CURLE_OK)
        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
    else
        snprintf(why, sizeof why, "curl: %s", x->errbuf[0] ? x->errbuf : curl_easy_strerror(rc));
    if (wk_fcm_auth_done(chan->fcm, hr_clock_now_ms(), code, x->resp.data, x->resp.len, why, errstr,
                         sizeof errstr) != 0)
        hr_metrics_inc(chan->s->m->backend_errors[WK_BACKEND_HTTP]);
}

/* Whether CHAN may start a push now: always for a webhook; for an fcm
 * channel with an unexpired access token.  Starts the token request when
 * one is due (sends go on with the current token meanwhile); while none
 * is usable the pushes wait, woken by the request's end or the back-off's
 * timer. */
bool wk_chan_authorized(wk_chan *chan, int64_t now)
{
    uint64_t gen;
    bool request;
    int64_t wake;
    const char *token;

    if (chan->fcm == NULL)
        return true;
    token = wk_fcm_auth_token(chan->fcm, now, &gen, &request, &wake);
    if (request) {
        wk_chan_auth_start(chan, now);
        token = wk_fcm_auth_token(chan->fcm, now, &gen, &request, &wake);
    }
    if (token != NULL)
        return true;
    if (wake > now)
        uv_timer_start(&chan->wake, wk_chan_wake_cb, (uint64_t)(wake - now), 0);
    return false;
}
