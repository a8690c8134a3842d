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

static uint64_t wk_sender_random(wk_sender *s)
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

/* A finished request of X with curl result RC. */
static void wk_sender_finished(wk_sender *s, wk_xfer *x, CURLcode rc)
{
    wk_chan *chan = x->chan;
    wk_push *push = x->p;
    const hr_channel *ch = chan->cfg;
    long code = 0;
    int64_t now = hr_clock_now_ms();
    wk_push_result res = {.latency_ms = (int)(now - x->start_ms)};
    wk_provider_result v;
    char reason[sizeof v.reason + 32];

    if (rc == CURLE_OK || ch->type == HR_CHANNEL_SMTP)
        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
    wk_xfer_verdict(ch, x, rc, code, &v);
    wk_chan_release_xfer(chan, x);
    res.http_status = code;
    hr_metrics_observe(s->m->chans[chan - s->chans].latency, res.latency_ms / 1000.0);
    if (rc != CURLE_OK)
        hr_metrics_inc(s->m->backend_errors[WK_BACKEND_HTTP]);

    if (v.verdict == WK_VERDICT_DELIVERED) {
        wk_retry_cap_grow(&chan->cap);
        wk_chan_end(chan, push, &res, WK_END_SENT, NULL);
        return;
    }
    if (push->hold != NULL && *push->hold) {
        wk_chan_end(chan, push, &res, WK_END_HELD, NULL);
        return;
    }
    if (v.verdict == WK_VERDICT_UNREGISTERED) {
        wk_chan_end(chan, push, &res, WK_END_DEAD, NULL);
        return;
    }
    /* "Slow down" and "refresh the token" re-send without counting
     * against the retry budget, up to a bound; past it they are what
     * their status says. */
    if ((v.verdict == WK_VERDICT_SLOWDOWN || v.verdict == WK_VERDICT_REFRESH) &&
        push->slowdowns >= WK_SENDER_MAX_SLOWDOWNS)
        v.verdict = code >= 500 ? WK_VERDICT_RETRY : WK_VERDICT_FAILED;
    if (v.verdict == WK_VERDICT_REFRESH && chan->fcm != NULL) {
        wk_fcm_auth_rejected(chan->fcm, push->token_gen);
        push->slowdowns++;
        wk_chan_enqueue(chan, push, true);
        return;
    }
    /* APNs calls the provider token expired: a new one, unless the held
     * one is too young for Apple to accept a renewal (then the clock or
     * the key is wrong, and the push fails). */
    if (v.verdict == WK_VERDICT_REFRESH && chan->apns != NULL &&
        wk_apns_signer_expired(chan->apns, now / 1000) == 0) {
        push->slowdowns++;
        wk_chan_enqueue(chan, push, true);
        return;
    }
    if (v.verdict == WK_VERDICT_SLOWDOWN) {
        int64_t pause =
            v.retry_after_s > 0 ? (int64_t)v.retry_after_s * 1000 : WK_SENDER_DEFAULT_PAUSE_MS;

        /* A provider's Retry-After may not stall the channel for longer
         * than the channel's longest retry backoff. */
        if (pause > ch->retry_max_backoff_ms)
            pause = ch->retry_max_backoff_ms;

        /* Every worker pauses with this one (wk_chan_read_slow): a new
         * window is published, and an extension worth a poll. */
        {
            int64_t before = chan->slow_seen_until;

            wk_chan_slow(chan, now + pause, "provider", code);
            if (before < now || now + pause > before + WK_SENDER_SLOW_POLL_MS)
                wk_chan_publish_slow(chan, now + pause, pause);
        }
        /* A re-send all the same (it counts as a retry in the stats, the
         * delivery log and herald_retries_total), but not against the
         * channel's retry budget: that is for failures. */
        push->slowdowns++;
        wk_chan_enqueue(chan, push, true);
        return;
    }
    if (v.verdict != WK_VERDICT_RETRY) {
        wk_chan_end(chan, push, &res, WK_END_FAILED, v.reason);
        return;
    }
    if (push->addr_attempts - push->slowdowns >= ch->retry_max_attempts) {
        snprintf(reason, sizeof reason, "%s after %d attempts", v.reason, push->addr_attempts);
        wk_chan_end(chan, push, &res, WK_END_FAILED, reason);
        return;
    }
    push->delay.due_ms =
        now + wk_retry_backoff_ms(ch->retry_backoff_ms, ch->retry_max_backoff_ms,
                                  push->addr_attempts - push->slowdowns, wk_sender_random(s));
    /* A retry due past the task's expire_at waits only until then: the pump
     * refuses to start it, and its chunk counts it and the rest expired
     * (wk_lifecycle_push_done).  Settling it at once would close a chunk
     * whose other pushes may still go out before expire_at. */
    if (hr_task_expired(push->task->row, push->delay.due_ms))
        push->delay.due_ms = push->task->row->expire_ms;
    if (wk_retry_heap_push(&chan->delayed, &push->delay) != 0) {
        wk_chan_end(chan, push, &res, WK_END_FAILED, "out of memory");
        return;
    }
    push->state = WK_PUSH_DELAYED;
    wk_chan_arm_retry(chan);
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

/* ---- public -------------------------------------------------------------- */

/* An apns channel's signer from its .p8 key file. */
static int wk_chan_apns_signer(wk_chan *chan, char *errstr, size_t errlen)
{
    const hr_channel *ch = chan->cfg;
    char detail[256];
    char *p8 = NULL;
    size_t len = 0;
    int rc = -1;

    if (hr_config_read_file(ch->apns.key_file, WK_SENDER_KEY_FILE_MAX, &p8, &len, detail,
                            sizeof detail) != 0 ||
        wk_apns_signer_new(p8, len, ch->apns.key_id, ch->apns.team_id, &chan->apns, detail,
                           sizeof detail) != 0)
        snprintf(errstr, errlen, "channel %s: key_file %s", ch->name, detail);
    else
        rc = 0;
    free(p8);
    return rc;
}

/* A channel's multi handles: one per WK_SENDER_MULTI_CONNS of the
 * connections it opens (HTTP/1.1 and smtp: one per request in flight;
 * apns: its few multiplexed connections), each limited to its share per
 * host, so an apns channel never opens more than apns.connections
 * (libcurl 7.88 opens a new connection for a request that finds every
 * stream taken, unless the host's limit is reached: then it waits). */
static int wk_chan_multis(wk_chan *chan)
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
